/* gbctl: command-line control of a running gpubridge, through libgpubridge.
 * Exit status: 0 ok, 1 an error reply or a failure, 2 a usage error. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/client.h"
#include "gpubridge/demo.h"

#define DEFAULT_ENDPOINT "tcp://127.0.0.1:5555"
#define MAX_ENDPOINTS 64
#define MAX_ELEMS 4096

enum { EXIT_ERR = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "usage: gbctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Controls and probes a running gpubridge over ZeroMQ.\n"
    "\n"
    "Options:\n"
    "  -e, --endpoint E        bridge endpoint, repeatable (grains are placed over\n"
    "                          all of them; control commands go to each); default\n"
    "                          $GPUBRIDGE_ENDPOINT or " DEFAULT_ENDPOINT "\n"
    "  -t, --timeout MS        reply deadline in milliseconds (default 5000)\n"
    "      --curve-server-key K  the bridge's Z85 public key: use CURVE\n"
    "      --curve-public-key K  this client's Z85 key pair (default: an ephemeral\n"
    "      --curve-secret-key K  pair); also $GPUBRIDGE_CURVE_SERVER_KEY,\n"
    "                          $GPUBRIDGE_CURVE_PUBLIC_KEY, $GPUBRIDGE_CURVE_SECRET_KEY\n"
    "  -h, --help              this text\n"
    "\n"
    "Commands:\n"
    "  status [TYPE]           state of TYPE's kernel (of every type if none)\n"
    "  telemetry [TYPE]        counters of TYPE (of every type if none)\n"
    "  list                    grain types the bridge hosts\n"
    "  activate TYPE           resume a paused TYPE\n"
    "  deactivate TYPE         pause TYPE (its requests wait, in order, until the\n"
    "                          next activate)\n"
    "  terminate TYPE          stop TYPE's kernel (it stays stopped until the bridge\n"
    "                          restarts its GPU side)\n"
    "  detect                  the bridge host's facts and mode decision\n"
    "  limits                  frame size limit and, per grain type, what each\n"
    "                          message type accepts\n"
    "  send vecadd KEY OP A B  OP is add, sub, mul or div; A and B are\n"
    "                          comma-separated floats; prints the result\n"
    "  send echo KEY TEXT      sends TEXT through grain (echo, KEY)\n"
    "  send TYPE KEY MSGTYPE [HEX]\n"
    "                          any grain: payload as hex bytes; prints the reply\n"
    "                          (echo and vecadd: with HEX, or vecadd with\n"
    "                          MSGTYPE alone)\n"
    "\n"
    "Examples:\n"
    "  gbctl status vecadd\n"
    "  gbctl send vecadd 7 add 1,2,3 4,5,6\n"
    "  gbctl -e ipc:///tmp/gpubridge.sock send echo 7 hello\n"
    "\n"
    "Exit status: 0 ok, 1 error reply or failure, 2 usage error.\n";

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gbctl: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(gbctl --help for usage)\n");
    return EXIT_USAGE;
}

static int failed(void)
{
    fprintf(stderr, "gbctl: %s\n", gbc_last_error());
    return EXIT_ERR;
}

/* Decimal digits only: strtoull alone would take "010" as 8, "0x10", "+5"
 * and leading spaces. */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s[0] || strspn(s, "0123456789") != strlen(s))
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* "1,2.5,-3" into v (up to cap); the count in *n. */
static bool parse_floats(const char *s, float *v, size_t cap, size_t *n)
{
    *n = 0;
    if (!s[0])
        return true; /* an empty vector */
    for (;;) {
        char *end;
        errno = 0;
        float f = strtof(s, &end);
        if (end == s || errno || *n == cap)
            return false;
        v[(*n)++] = f;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        s = end + 1;
    }
}

/* "CUDA 1", or "cpu" for a device of host threads; buf holds 16 bytes. */
static const char *device_text(int32_t device, char *buf)
{
    if (device < 0)
        return "cpu";
    snprintf(buf, 16, "CUDA %d", (int)device);
    return buf;
}

static void print_status(const gbc_grain_status_t *s)
{
    printf("%s: %s, mode %s, placement %s, device %d, queue %u x %u B, lanes %u, heartbeat %llu "
           "(age %.3f ms), last exit %s",
           s->grain_type, gbc_grain_state_name(s->state), s->mode[0] ? s->mode : "?",
           gbc_placement_name(s->placement), (int)s->device, s->queue_capacity, s->slot_size, s->lanes,
           (unsigned long long)s->heartbeat, (double)s->heartbeat_age_ns / 1e6,
           gbc_exit_reason_name(s->exit_reason));
    if (s->max_message_size)
        printf(", max message %u B", s->max_message_size);
    if (s->last_error_code)
        printf(", last error %d %s", (int)s->last_error_code, s->last_error_name);
    printf("\n");
    for (uint32_t d = 0; d < s->n_devices; d++) {
        const gbc_device_status_t *ds = &s->devices[d];
        printf("%s: device #%u (%s): %s, mode %s, heartbeat %llu (age %.3f ms), last exit %s", s->grain_type,
               ds->device_number, device_text(ds->device, (char[16]){0}), gbc_grain_state_name(ds->state),
               ds->mode[0] ? ds->mode : "?", (unsigned long long)ds->heartbeat, (double)ds->heartbeat_age_ns / 1e6,
               gbc_exit_reason_name(ds->exit_reason));
        if (ds->last_error_code)
            printf(", last error %d", (int)ds->last_error_code);
        printf("\n");
    }
}

static void print_telemetry(const gbc_telemetry_t *t)
{
    printf("%s: processed %llu, errors %llu, launches %llu, iterations %llu, "
           "queue in %u/%u, out %u/%u\n",
           t->grain_type, (unsigned long long)t->messages_processed,
           (unsigned long long)t->errors, (unsigned long long)t->launches,
           (unsigned long long)t->iterations, t->queue_depth_in, t->queue_capacity,
           t->queue_depth_out, t->queue_capacity);
    printf("%s: mail_sent: %llu, mail_forwarded: %llu, mail_linked: %llu, mail_held: %llu, mail_undeliverable: %llu\n",
           t->grain_type, (unsigned long long)t->mail_sent, (unsigned long long)t->mail_forwarded,
           (unsigned long long)t->mail_linked,
           (unsigned long long)t->mail_held, (unsigned long long)t->mail_undeliverable);
    printf("%s: connections_dropped: %llu, replies_undelivered: %llu, held_bytes: %llu, reply_backlog_bytes: %llu, "
           "frames_too_large: %llu, frames_refused_unread: %llu\n",
           t->grain_type, (unsigned long long)t->connections_dropped, (unsigned long long)t->replies_undelivered,
           (unsigned long long)t->held_bytes, (unsigned long long)t->reply_backlog_bytes,
           (unsigned long long)t->frames_too_large, (unsigned long long)t->frames_refused_unread);
    for (uint32_t d = 0; d < t->n_devices; d++) {
        const gbc_device_telemetry_t *dt = &t->devices[d];
        printf("%s: device #%u (%s): processed %llu, errors %llu, launches %llu, queue in %u, out %u\n",
               t->grain_type, dt->device_number, device_text(dt->device, (char[16]){0}),
               (unsigned long long)dt->messages_processed, (unsigned long long)dt->errors,
               (unsigned long long)dt->launches, dt->queue_depth_in, dt->queue_depth_out);
    }
}

static void print_detect(const gbc_detect_report_t *d)
{
    printf("mode                 %s (requested %s, by %s)\n", d->mode, d->mode_requested,
           d->mode_source);
    printf("rule                 %s\n", d->rule_fired);
    if (d->fallback_reason[0])
        printf("fallback             %s\n", d->fallback_reason);
    printf("cuda built           %s\n", d->cuda_built ? "yes" : "no");
    printf("cuda devices         %d\n", (int)d->cuda_device_count);
    if (d->cuda_device_count > 0)
        printf("device               %d %s (compute %d.%d)\n", (int)d->device, d->device_name,
               (int)d->compute_capability_major, (int)d->compute_capability_minor);
    else
        printf("device               none\n");
    printf("wsl2 / wsl1 / dxg    %s / %s / %s\n", d->wsl2 ? "yes" : "no", d->wsl1 ? "yes" : "no",
           d->dev_dxg ? "yes" : "no");
    printf("os release           %s\n", d->os_release);
    printf("exec timeout         %s\n", d->kernel_exec_timeout ? "yes" : "no");
    printf("mapped pinned        %s\n", d->mapped_pinned_ok ? "ok" : "no");
    printf("concurrent managed   %s\n", d->concurrent_managed_access ? "yes" : "no");
    printf("cooperative launch   %s\n", d->cooperative_launch ? "yes" : "no");
    printf("host native atomics  %s\n", d->host_native_atomics ? "yes" : "no");
}

static void print_limits(const gbc_limits_t *l)
{
    printf("max_message_size %u bytes, hold bound %llu bytes, replies per frame %u\n", l->max_message_size,
           (unsigned long long)l->hold_bound, l->max_replies_per_frame);
    for (size_t i = 0; i < l->n_types; i++) {
        const gbc_type_limits_t *t = &l->types[i];
        printf("%s: slot %u B (record %u B), queue %u, max grains %u\n", t->grain_type, t->slot_size,
               t->record_size, t->queue_capacity, t->max_grains);
        size_t n;
        const gbc_msg_limits_t *all = gbc_limits_messages(l, i, &n);
        for (size_t j = 0; j < n; j++) {
            const gbc_msg_limits_t *m = &all[j];
            printf("  %u %s: payload <= %u B", m->message_type, m->name, m->max_payload);
            if (m->max_elements)
                printf(", elements <= %u", m->max_elements);
            printf("\n");
        }
    }
}

/* status / telemetry of one type, or of every listed type. */
static int per_type(gbc_client_t *c, size_t ep, const char *cmd, const char *type, int tmo)
{
    gbc_type_list_t all = {0};
    const char *one[1] = {type};
    const char *const *types = one;
    size_t n = 1;
    if (!type) {
        if (gbc_ctl_list(c, ep, &all, tmo) != GBC_OK)
            return failed();
        types = (const char *const *)all.names;
        n = all.n;
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        gbc_err err;
        if (strcmp(cmd, "status") == 0) {
            gbc_grain_status_t s = GBC_GRAIN_STATUS_INIT;
            if ((err = gbc_ctl_status(c, ep, types[i], &s, tmo)) == GBC_OK)
                print_status(&s);
        } else {
            gbc_telemetry_t t = GBC_TELEMETRY_INIT;
            if ((err = gbc_ctl_telemetry(c, ep, types[i], &t, tmo)) == GBC_OK)
                print_telemetry(&t);
        }
        if (err)
            rc = failed();
    }
    gbc_type_list_clear(&all);
    return rc;
}

static int lifecycle(gbc_client_t *c, size_t ep, const char *cmd, const char *type, int tmo)
{
    gbc_grain_status_t s = GBC_GRAIN_STATUS_INIT;
    gbc_err err = strcmp(cmd, "activate") == 0     ? gbc_ctl_activate(c, ep, type, &s, tmo)
                  : strcmp(cmd, "deactivate") == 0 ? gbc_ctl_deactivate(c, ep, type, &s, tmo)
                                                   : gbc_ctl_terminate(c, ep, type, &s, tmo);
    if (err)
        return failed();
    print_status(&s);
    return 0;
}

static int control(gbc_client_t *c, size_t ep, int argc, char **argv, int tmo)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "status") == 0 || strcmp(cmd, "telemetry") == 0)
        return per_type(c, ep, cmd, argc > 1 ? argv[1] : NULL, tmo);
    if (strcmp(cmd, "list") == 0) {
        gbc_type_list_t l;
        if (gbc_ctl_list(c, ep, &l, tmo) != GBC_OK)
            return failed();
        for (size_t i = 0; i < l.n; i++)
            printf("%s\n", l.names[i]);
        gbc_type_list_clear(&l);
        return 0;
    }
    if (strcmp(cmd, "detect") == 0) {
        gbc_detect_report_t d = GBC_DETECT_REPORT_INIT;
        if (gbc_ctl_detect(c, ep, &d, tmo) != GBC_OK)
            return failed();
        print_detect(&d);
        return 0;
    }
    if (strcmp(cmd, "limits") == 0) {
        gbc_limits_t l;
        if (gbc_ctl_limits(c, ep, &l, tmo) != GBC_OK)
            return failed();
        print_limits(&l);
        gbc_limits_clear(&l);
        return 0;
    }
    return lifecycle(c, ep, cmd, argv[1], tmo);
}

static int send_vecadd(gbc_client_t *c, uint64_t key, int argc, char **argv, int tmo)
{
    static const char *const ops[] = {"add", "sub", "mul", "div"};
    if (argc != 3)
        return usage_error("%s", "send vecadd KEY OP A B: expected OP, A and B");
    int op = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[0], ops[i]) == 0)
            op = i;
    if (op < 0)
        return usage_error("unknown op '%s' (add, sub, mul or div)", argv[0]);
    static float a[MAX_ELEMS], b[MAX_ELEMS], r[MAX_ELEMS];
    size_t na, nb;
    if (!parse_floats(argv[1], a, MAX_ELEMS, &na))
        return usage_error("A '%s' is not a comma-separated list of floats", argv[1]);
    if (!parse_floats(argv[2], b, MAX_ELEMS, &nb))
        return usage_error("B '%s' is not a comma-separated list of floats", argv[2]);
    if (na != nb)
        return usage_error("%s", "A and B differ in length");
    if (gbc_vecadd(c, key, (gbc_vecadd_op)op, a, b, na, r, tmo) != GBC_OK)
        return failed();
    for (size_t i = 0; i < na; i++)
        printf("%s%.9g", i ? "," : "", (double)r[i]);
    printf("\n");
    return 0;
}

static int send_echo(gbc_client_t *c, uint64_t key, int argc, char **argv, int tmo)
{
    if (argc != 1)
        return usage_error("%s", "send echo KEY TEXT: expected one TEXT");
    gbc_echo_result_t e;
    if (gbc_echo(c, key, argv[0], strlen(argv[0]), &e, tmo) != GBC_OK)
        return failed();
    printf("%s (sequence %llu, grain count %llu, round trip %.1f us)\n", argv[0],
           (unsigned long long)e.sequence, (unsigned long long)e.grain_count,
           (double)e.rtt_ns / 1e3);
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int send_raw(gbc_client_t *c, const char *type, uint64_t key, int argc, char **argv,
                    int tmo)
{
    uint64_t mt;
    if (argc < 1 || argc > 2 || !parse_u64(argv[0], &mt) || mt > UINT32_MAX)
        return usage_error("%s", "send TYPE KEY MSGTYPE [HEX]: expected a message type number");
    const char *hex = argc > 1 ? argv[1] : "";
    size_t hl = strlen(hex);
    if (hl % 2)
        return usage_error("payload '%s' is not an even number of hex digits", hex);
    unsigned char *p = malloc(hl / 2 + 1);
    if (!p)
        return EXIT_ERR;
    for (size_t i = 0; i < hl / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(p);
            return usage_error("payload '%s' is not hex", hex);
        }
        p[i] = (unsigned char)(hi << 4 | lo);
    }
    gbc_reply_t r;
    gbc_err err = gbc_call(c, type, key, (uint32_t)mt, p, hl / 2, &r, tmo);
    free(p);
    if (err && err != GBC_ERR_STATUS)
        return failed();
    printf("%s, message type %u, %zu bytes", gbc_status_name(r.status), r.message_type,
           r.payload_len);
    if (r.payload_len) {
        printf(": ");
        for (size_t i = 0; i < r.payload_len; i++)
            printf("%02x", r.payload[i]);
    }
    if (r.error) /* cleaned of terminal controls by the client library */
        printf(" (%s)", r.error);
    printf("\n");
    gbc_reply_clear(&r);
    return err ? failed() : 0;
}

static int send_cmd(gbc_client_t *c, int argc, char **argv, int tmo)
{
    if (argc < 3)
        return usage_error("%s", "send TYPE KEY ...: expected a type and a key");
    uint64_t key;
    if (!parse_u64(argv[2], &key))
        return usage_error("key '%s' is not an unsigned decimal integer below 2^64", argv[2]);
    /* The built-in forms by their argument count (vecadd: OP A B; echo:
     * TEXT); any other count is the generic MSGTYPE [HEX] form. */
    const int vecadd = strcmp(argv[1], "vecadd") == 0, echo = strcmp(argv[1], "echo") == 0;
    uint64_t mt;
    if (vecadd && argc == 6)
        return send_vecadd(c, key, argc - 3, argv + 3, tmo);
    if (echo && argc == 4)
        return send_echo(c, key, argc - 3, argv + 3, tmo);
    if ((vecadd || echo) && (argc < 4 || !parse_u64(argv[3], &mt)))
        return usage_error("%s", vecadd ? "send vecadd KEY OP A B, or send vecadd KEY MSGTYPE [HEX]"
                                        : "send echo KEY TEXT, or send echo KEY MSGTYPE HEX");
    return send_raw(c, argv[1], key, argc - 3, argv + 3, tmo);
}

/* Checks the command's argument count; 0 if right. */
static int check_args(int argc, char **argv)
{
    static const struct {
        const char *name;
        int min, max;
    } cmds[] = {
        {"status", 0, 1},     {"telemetry", 0, 1},  {"list", 0, 0},     {"activate", 1, 1},
        {"deactivate", 1, 1}, {"terminate", 1, 1},  {"detect", 0, 0},   {"limits", 0, 0},
        {"send", 2, 64},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[0], cmds[i].name) != 0)
            continue;
        if (argc - 1 < cmds[i].min || argc - 1 > cmds[i].max)
            return usage_error("wrong number of arguments for '%s'", argv[0]);
        if (argc > 1 && !argv[1][0])
            return usage_error("'%s': the grain type is empty", argv[0]);
        return 0;
    }
    return usage_error("unknown command '%s'", argv[0]);
}

int main(int argc, char **argv)
{
    enum { OPT_SERVER = 256, OPT_PUBLIC, OPT_SECRET };
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"timeout", required_argument, NULL, 't'},
        {"curve-server-key", required_argument, NULL, OPT_SERVER},
        {"curve-public-key", required_argument, NULL, OPT_PUBLIC},
        {"curve-secret-key", required_argument, NULL, OPT_SECRET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *eps[MAX_ENDPOINTS];
    size_t n_eps = 0;
    gbc_options_t opt;
    gbc_options_init(&opt);
    opt.curve_server_key = getenv("GPUBRIDGE_CURVE_SERVER_KEY");
    opt.curve_public_key = getenv("GPUBRIDGE_CURVE_PUBLIC_KEY");
    opt.curve_secret_key = getenv("GPUBRIDGE_CURVE_SECRET_KEY");
    int ch;
    uint64_t v;
    /* "+": stop at the command, so that "-1,2" in its arguments is no option. */
    while ((ch = getopt_long(argc, argv, "+e:t:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'e':
            if (n_eps == MAX_ENDPOINTS)
                return usage_error("%s", "too many endpoints");
            eps[n_eps++] = optarg;
            break;
        case 't':
            if (!parse_u64(optarg, &v) || v == 0 || v > 86400000)
                return usage_error("timeout '%s' is not a number of milliseconds (1..86400000)",
                                   optarg);
            opt.timeout_ms = (int)v;
            break;
        case OPT_SERVER: opt.curve_server_key = optarg; break;
        case OPT_PUBLIC: opt.curve_public_key = optarg; break;
        case OPT_SECRET: opt.curve_secret_key = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fprintf(stderr, "(gbctl --help for usage)\n"); return EXIT_USAGE;
        }
    }
    argc -= optind;
    argv += optind;
    if (argc < 1)
        return usage_error("%s", "no command given");
    int rc = check_args(argc, argv);
    if (rc)
        return rc;
    if (n_eps == 0) {
        const char *env = getenv("GPUBRIDGE_ENDPOINT");
        eps[n_eps++] = env && env[0] ? env : DEFAULT_ENDPOINT;
    }
    gbc_client_t *c;
    gbc_err err = gbc_client_new(eps, n_eps, &opt, &c);
    if (err) {
        fprintf(stderr, "gbctl: %s\n", gbc_last_error());
        return err == GBC_ERR_INVALID ? EXIT_USAGE : EXIT_ERR;
    }
    if (strcmp(argv[0], "send") == 0) {
        rc = send_cmd(c, argc, argv, GBC_TIMEOUT_DEFAULT);
    } else {
        for (size_t i = 0; i < n_eps; i++) {
            if (n_eps > 1)
                printf("%s== %s\n", i ? "\n" : "", eps[i]);
            int r = control(c, i, argc, argv, GBC_TIMEOUT_DEFAULT);
            rc = rc ? rc : r;
        }
    }
    gbc_client_destroy(&c);
    return rc;
}
