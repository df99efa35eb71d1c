/* SIGHUP: reload the config file and apply what can change while serving
 * (log level and format, hosts entries, the CURVE allow-list); every other
 * key that changed is named in a WARN line saying it needs a restart. Under
 * --supervise the supervisor applies the keys of the public socket and the
 * worker the rest. */
#ifndef GB_RELOAD_H
#define GB_RELOAD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "server.h"

typedef struct gb_reload {
    const char *path;      /* the config file; NULL: embedded defaults, nothing to reload */
    gb_config_t *live;     /* the running config (the server reads it) */
    bool cli_log_level;    /* --log-level given: it keeps beating the file */
    const char *hostname;  /* for hosts entries */
    uint32_t cli_max_message_size; /* --max-message-size given (0: not): it keeps beating the file */
    uint32_t mms_said;     /* the file's max_message_size last said to be overridden */
    bool supervised;       /* a --supervise worker: the public socket's keys are the supervisor's */
    /* For gb_reload_run: SIGHUPs, and refusals said by the supervisor (its
     * SIGUSR1), counted by the signal handlers; NULL: every call reloads. */
    const volatile sig_atomic_t *hups, *refusals;
    sig_atomic_t hups_seen, refusals_seen;
} gb_reload_t;

/* Applies next to live (the reloadable keys) and logs one line per change and
 * one WARN per key that needs a restart. Returns how many keys need one. */
int gb_reload_apply(gb_config_t *live, const gb_config_t *next, bool keep_log_level,
                    const char *hostname);

/* Reloads r->path into r->live; returns how many keys need a restart, or -1
 * when the file could not be read (the running configuration stays). */
int gb_reload_file(gb_reload_t *r);

/* The supervisor's reload (--supervise): applies the public socket's keys
 * it owns (curve.allowed_clients, curve.admin_clients, remote_control) and
 * the log level and format, logging "supervisor: reload: ..." lines; WARNs
 * for every restart-only key that changed (its workers run its config).
 * Returns how many need a restart, or -1 when the file could not be read
 * (r->live unchanged). */
int gb_reload_supervisor(gb_reload_t *r);

/* The server's reload callback (gb_server_on_reload): ctx is a gb_reload_t.
 * Counts a reload the supervisor refused as a failed one (the supervisor
 * does not pass the file on), and reloads the file after a SIGHUP. */
void gb_reload_run(void *ctx, gb_server_t *s);

#endif
