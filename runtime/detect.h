/* Detection and mode selection: which mode (persistent, relaunch, cpu) this
 * host runs, and why.
 *
 * Three steps, each testable on its own:
 *   1. facts:     gb_detect_fs() reads the filesystem (WSL, hostname) under an
 *                 injectable root; gb_detect_cuda() asks the CUDA runtime.
 *                 Tests fill a gb_facts_t by hand instead.
 *   2. decision:  gb_detect_decide() maps facts to a mode (what "auto" means).
 *   3. selection: gb_mode_select() applies the precedence
 *                 --mode > GPUBRIDGE_MODE > first matching host entry > config mode,
 *                 and runs the decision when the winner is "auto".
 *
 * Production start-up is gb_detect_run(), which does all three in order:
 *     gb_facts_init(&f);  gb_detect_fs("/", &f);
 *     dev = gb_select_device(cfg, f.hostname);   (host entry override, else cfg->device)
 *     gb_detect_cuda(dev, gb_detect_force_fallback(cfg, gb_test_hook(GB_HOOK_FORCE_FALLBACK)), &f);
 *     gb_mode_select(cfg, f.hostname, getenv("GPUBRIDGE_MODE"), cli_mode, &f, &sel, ...);
 */
#ifndef GB_DETECT_H
#define GB_DETECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_DETECT_TEXT_LEN 256
#define GB_DETECT_WHY_LEN 640 /* a decision's sentence: quotes facts of GB_DETECT_TEXT_LEN */

/* What the host can do. Plain data: gb_facts_init() then fill by hand in tests. */
typedef struct gb_facts {
    /* filesystem (gb_detect_fs) */
    char hostname[GB_DETECT_TEXT_LEN];
    char osrelease[GB_DETECT_TEXT_LEN]; /* /proc/sys/kernel/osrelease, "" when unreadable */
    bool dev_dxg;                       /* /dev/dxg exists: the WSL2 GPU paravirtualisation device */
    bool wsl2;
    char wsl2_why[GB_DETECT_TEXT_LEN];  /* evidence, e.g. "/dev/dxg present" */
    bool wsl1;
    char wsl1_why[GB_DETECT_TEXT_LEN];

    /* CUDA (gb_detect_cuda) */
    bool cuda_built;                    /* compiled with GB_HAVE_CUDA */
    int cuda_device_count;              /* 0 when CUDA is missing or reports an error */
    char cuda_error[GB_DETECT_TEXT_LEN]; /* why there are no devices / a query failed, else "" */
    int cuda_runtime_version;           /* e.g. 12040, 0 when unknown */
    int cuda_driver_version;            /* 0 when no driver */
    int device;                         /* the index the device facts below describe; -1 none */
    char device_name[GB_DETECT_TEXT_LEN];
    int cc_major, cc_minor;             /* compute capability */
    bool kernel_exec_timeout;           /* cudaDevAttrKernelExecTimeout: a display watchdog */
    bool can_map_host_memory;           /* cudaDevAttrCanMapHostMemory */
    bool mapped_pinned_ok;              /* the real probe succeeded (4 KiB mapped + device pointer) */
    bool mapped_pinned_forced;          /* probe skipped: forced failure (force_fallback) */
    char mapped_pinned_why[GB_DETECT_TEXT_LEN]; /* the failing call and its error, else "" */
    bool concurrent_managed_access;
    bool cooperative_launch;
    bool host_native_atomic_supported;  /* reported only: the rings never rely on it */
} gb_facts_t;

/* The rule of gb_detect_decide() that fired, in the order they are checked. */
typedef enum gb_rule {
    GB_RULE_WSL1 = 0,         /* cpu: WSL1 has no GPU access */
    GB_RULE_NO_DEVICE,        /* cpu: no CUDA device (or the configured index is absent) */
    GB_RULE_WSL2,             /* relaunch: a resident kernel blocks host CUDA calls on WSL2 */
    GB_RULE_WATCHDOG,         /* relaunch: kernel exec timeout (display watchdog) */
    GB_RULE_NO_MAPPED_PINNED, /* relaunch: mapped pinned memory unavailable */
    GB_RULE_NATIVE,           /* persistent: nothing stands in the way */
} gb_rule;

/* Short stable names: "wsl1", "no-device", "wsl2", "watchdog", "no-mapped-pinned", "native". */
const char *gb_rule_name(gb_rule rule);

typedef struct gb_decision {
    gb_mode mode; /* never GB_MODE_AUTO */
    gb_rule rule;
    char why[GB_DETECT_WHY_LEN]; /* one sentence: the fact and its consequence */
} gb_decision_t;

/* Where the winning mode value came from. */
typedef enum gb_mode_source {
    GB_SOURCE_CLI = 0, /* --mode */
    GB_SOURCE_ENV,     /* GPUBRIDGE_MODE */
    GB_SOURCE_HOST,    /* first hosts[] entry whose pattern matches the hostname */
    GB_SOURCE_CONFIG,  /* the config's global mode */
} gb_mode_source;

typedef struct gb_selection {
    gb_mode mode;              /* what to run: never GB_MODE_AUTO */
    gb_mode requested;         /* the winning value, possibly GB_MODE_AUTO */
    gb_mode_source source;
    char source_text[GB_NAME_LEN + 32]; /* "--mode", "GPUBRIDGE_MODE", "host entry 'pat'", "config mode" */
    bool auto_decided;         /* requested was auto: mode = decision.mode */
    gb_decision_t decision;    /* always filled: what auto chooses (or would have chosen) */
    char why[GB_DETECT_WHY_LEN + 32];      /* source_text, or "auto: <rule why>" */
    int host_index;            /* first matching hosts[] entry, -1 when none */
    char host_pattern[GB_NAME_LEN];
    int device;                /* CUDA device to use */
    bool device_from_host;     /* device came from the host entry, not cfg->device */
    bool fell_back;            /* an explicit GPU mode had no device: running cpu */
    char warning[GB_DETECT_WHY_LEN + 160]; /* fallback or caution, else "" */
} gb_selection_t;

/* Zeroes *f; device = -1 (none probed). */
void gb_facts_init(gb_facts_t *f);

/* Reads <root>/dev/dxg, <root>/proc/sys/kernel/osrelease and, for the hostname,
 * gethostname() when root is "/" (the file <root>/proc/sys/kernel/hostname as
 * fallback, and always under any other root). Fills only the filesystem facts.
 * Missing files are facts, not errors: returns GB_OK, or GB_ERR_INVALID for NULL
 * arguments. */
gb_err gb_detect_fs(const char *root, gb_facts_t *f);

/* Classifies an osrelease string (exposed for tests and --detect):
 * "WSL2" or "microsoft-standard" in it, or dev_dxg → WSL2; otherwise "microsoft"
 * → WSL1; otherwise "wsl" → WSL2 (custom WSL2 kernels); otherwise neither.
 * Case-insensitive. Sets f->wsl1/wsl2 and their why texts from f->osrelease
 * and f->dev_dxg. */
void gb_detect_classify_os(gb_facts_t *f);

/* Fills the CUDA facts for device. Without GB_HAVE_CUDA it reports zero devices
 * ("built without CUDA"). force_pinned_failure skips the mapped pinned probe and
 * reports it failed (config placement.force_fallback, or in a test build
 * GPUBRIDGE_FORCE_FALLBACK=1).
 * Zero devices is a fact, not an error: returns GB_OK, or GB_ERR_INVALID for NULL.
 * Restores the calling thread's current device. */
gb_err gb_detect_cuda(int device, bool force_pinned_failure, gb_facts_t *f);

/* cfg->force_fallback_placement, or env_value (the test hook
 * GPUBRIDGE_FORCE_FALLBACK) is "1" (also "true", "yes", "on", any case). */
bool gb_detect_force_fallback(const gb_config_t *cfg, const char *env_value);

/* The first hosts[] entry whose fnmatch pattern matches hostname (case-insensitive,
 * as hostnames are), or -1. NULL/empty hostname matches nothing. */
int gb_host_match(const gb_config_t *cfg, const char *hostname);

/* The device index to use: the matching host entry's override, else cfg->device. */
int gb_select_device(const gb_config_t *cfg, const char *hostname);

/* Facts → mode. Rules, first that fires wins:
 *   WSL1 → cpu; no device (count 0 or facts->device absent) → cpu;
 *   WSL2 → relaunch; kernel exec timeout → relaunch; mapped pinned probe failed
 *   → relaunch; else persistent. host_native_atomic_supported, managed access and
 *   cooperative launch are reported but decide nothing. */
void gb_detect_decide(const gb_facts_t *facts, gb_decision_t *out);

/* Chooses the mode: cli_mode (--mode) > env_mode (GPUBRIDGE_MODE; "" counts as
 * unset) > first matching host entry > cfg->mode; "auto" runs gb_detect_decide().
 * hostname NULL means facts->hostname. Both cli_mode and env_mode are validated
 * when given, even when the CLI overrides the environment, so a typo never lingers:
 * a bad name returns GB_ERR_CONFIG with "what: unknown mode 'x' (valid: auto,
 * persistent, relaunch, cpu)" in err.
 * An explicit persistent or relaunch where the decision found no usable device
 * (rules wsl1, no-device) falls back to cpu with fell_back and a warning (logged
 * too): the user expects the bridge to still run. An explicit GPU mode that auto
 * would not choose (e.g. persistent on WSL2) is honoured, with a warning. */
/* gb_mode_parse for a value that came from `what` (an option or variable):
 * GB_ERR_CONFIG with "WHAT: unknown mode 'V' (valid: ...)" in err. */
gb_err gb_mode_parse_named(const char *what, const char *value, gb_mode *out, char *err, size_t errlen);

gb_err gb_mode_select(const gb_config_t *cfg, const char *hostname, const char *env_mode,
                      const char *cli_mode, const gb_facts_t *facts, gb_selection_t *out,
                      char *err, size_t errlen);

/* Start-up in one call: facts from root ("/" in production) and the CUDA runtime,
 * GPUBRIDGE_MODE from the environment (and the test hook GPUBRIDGE_FORCE_FALLBACK),
 * then selection.
 * Logs the one-line summary (info) and any warning. */
gb_err gb_detect_run(const gb_config_t *cfg, const char *root, const char *cli_mode,
                     gb_facts_t *facts, gb_selection_t *sel, char *err, size_t errlen);

/* A device of the engine, as the config lists it (a device listed twice is
 * two devices of the engine on one GPU, for testing). */
typedef struct gb_engine_dev {
    int device;   /* CUDA device index */
    gb_mode mode; /* decided per device: a host may mix GPUs */
} gb_engine_dev_t;

/* The devices to run on and the mode of each: the config's `devices` (or
 * its one `device`), "all" being the host's CUDA devices, each detected in
 * turn from root like gb_detect_run (sel0 and facts0: the first device's,
 * already run). A host entry with a device narrows the list to that one.
 * In cpu mode, or without CUDA devices, every listed device runs in cpu
 * mode (each its own rings and threads). A listed device the host lacks is
 * an error (err) in a GPU mode. */
gb_err gb_detect_devices(const gb_config_t *cfg, const char *root, const char *cli_mode, const gb_facts_t *facts0,
                         const gb_selection_t *sel0, gb_engine_dev_t devs[GB_MAX_DEVICES], size_t *n, char *err,
                         size_t errlen);

/* What `gpubridge --detect` prints: every fact, the rule and the mode, in aligned
 * "key: value" lines. sel may be NULL (then only the auto decision is shown). */
void gb_detect_print(const gb_facts_t *facts, const gb_selection_t *sel, FILE *out);

/* One line for the start-up log, e.g. "mode relaunch (auto: WSL2 ...) on 'host',
 * device 0 'NVIDIA H100' sm_90 of 1". Returns buf (always NUL-terminated). */
const char *gb_detect_summary(const gb_facts_t *facts, const gb_selection_t *sel, char *buf,
                              size_t len);

#ifdef __cplusplus
}
#endif
#endif
