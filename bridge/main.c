/* gpubridge: the bridge daemon and its command line.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.
 * Without --config the embedded defaults are used; ./config/gpubridge.cfg is
 * never read implicitly, so what runs never depends on the working directory. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "detect.h"
#include "engine.h"
#include "grain_libs.h"
#include "grain_registry.h"
#include "server.h"
#include "sup_state.h"
#include "supervisor.h"
#include "error.h"
#include "log.h"
#include "metrics.h"
#include "reload.h"
#include "test_hooks.h"

enum { GBI_EXIT_OK = 0, GBI_EXIT_FAIL = 1, GBI_EXIT_USAGE = 2 };
_Static_assert(GBI_EXIT_USAGE == GB_EXIT_WORKER_START, "the supervisor reads a worker's exit 2 as a failed start");

/* What the command line asked for, beyond the config file. */
typedef struct gbi_cli {
    const char *config_path; /* NULL: embedded defaults */
    bool check_config;
    bool detect;
    bool has_log_level;
    gb_log_level log_level;
    bool has_mode;
    gb_mode mode; /* --mode: beats the config, its hosts and GPUBRIDGE_MODE */
    bool supervise;
    const char *worker_endpoint; /* set by a supervisor for its worker (not in --help) */
    uint32_t max_message_size;   /* --max-message-size: beats the file's (0: not given) */
} gbi_cli;

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [OPTION]...\n"
            "Host actor grains on a GPU as ring kernels and serve them over ZeroMQ.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE       load FILE (libconfig syntax; see config/gpubridge.cfg);\n"
            "                          without it the embedded defaults are used\n"
            "      --check-config      validate the configuration (with CURVE on, also the\n"
            "                          secret key file: owner, mode 0600, and that it matches\n"
            "                          server_public_key), print the effective one and exit\n"
            "                          (0: valid, 2: invalid)\n"
            "  -l, --log-level LEVEL   error, warn, info, debug or diag (overrides the file)\n"
            "  -m, --mode MODE         auto, persistent, relaunch or cpu (overrides the file,\n"
            "                          its hosts entries and GPUBRIDGE_MODE)\n"
            "      --detect            print the detected host facts and mode decision, exit\n"
            "      --max-message-size BYTES\n"
            "                          the largest frame (64..67108864), beating the file's\n"
            "                          max_message_size; a supervisor passes its own to its\n"
            "                          worker, so both keep one bound across restarts\n"
            "      --supervise         keep the socket in a supervisor process and run the GPU\n"
            "                          side in a worker process, restarted when it crashes or\n"
            "                          hits a CUDA error (its unanswered requests then get\n"
            "                          STATUS_GPU_ERROR)\n"
            "  -h, --help              print this help and exit\n"
            "  -V, --version           print the version and exit\n"
            "\n"
            "Environment:\n"
            "  GPUBRIDGE_MODE          auto, persistent, relaunch or cpu: beats the config's\n"
            "                          mode and hosts entries; --mode beats it\n"
            "\n"
            "Exit status: 0 success, 1 runtime failure, 2 usage or configuration error.\n",
            prog);
    if (gb_test_hooks_usage())
        fputs(gb_test_hooks_usage(), out);
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, gbi_cli *cli)
{
    enum { OPT_CHECK = 256, OPT_DETECT, OPT_SUPERVISE, OPT_WORKER, OPT_MAXMSG };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"log-level", required_argument, NULL, 'l'},
        {"mode", required_argument, NULL, 'm'},
        {"detect", no_argument, NULL, OPT_DETECT},
        {"supervise", no_argument, NULL, OPT_SUPERVISE},
        {"worker-endpoint", required_argument, NULL, OPT_WORKER},
        {"max-message-size", required_argument, NULL, OPT_MAXMSG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0] ? argv[0] : "gpubridge";
    int ch;
    while ((ch = getopt_long(argc, argv, "c:l:m:hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': cli->config_path = optarg; break;
        case OPT_CHECK: cli->check_config = true; break;
        case OPT_DETECT: cli->detect = true; break;
        case OPT_SUPERVISE: cli->supervise = true; break;
        case OPT_WORKER: cli->worker_endpoint = optarg; break;
        case OPT_MAXMSG: {
            char *end = NULL;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || !end || *end || optarg[0] == '-' || v < 64 || v > (64ul << 20)) {
                fprintf(stderr, "%s: --max-message-size '%s': a number of bytes from 64 to 67108864 wanted\n", prog,
                        optarg);
                return GBI_EXIT_USAGE;
            }
            cli->max_message_size = (uint32_t)v;
            break;
        }
        case 'l':
            if (gb_log_level_parse(optarg, &cli->log_level) != 0) {
                fprintf(stderr, "%s: unknown log level '%s' (valid: error, warn, info, "
                                "debug, diag)\n", prog, optarg);
                return GBI_EXIT_USAGE;
            }
            cli->has_log_level = true;
            break;
        case 'm':
            if (gb_mode_parse(optarg, &cli->mode) != 0) {
                fprintf(stderr, "%s: unknown mode '%s' (valid: auto, persistent, relaunch, "
                                "cpu)\n", prog, optarg);
                return GBI_EXIT_USAGE;
            }
            cli->has_mode = true;
            break;
        case 'h': usage(stdout, prog); return GBI_EXIT_OK;
        case 'V': printf("gpubridge %s\n", GB_VERSION); return GBI_EXIT_OK;
        default: /* getopt_long already said what was wrong */
            fprintf(stderr, "Try '%s --help' for more information.\n", prog);
            return GBI_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help' for more information.\n",
                prog, argv[optind], prog);
        return GBI_EXIT_USAGE;
    }
    return -1;
}

/* The devices to run on (gb_detect_devices) with their modes, logged when
 * there are several. Returns 0, or -1 once the error is printed. */
static int start_devices(const gb_config_t *cfg, const gb_mode *mode_override, const gb_facts_t *facts,
                         const gb_selection_t *sel, gb_engine_dev_t devs[GB_MAX_DEVICES], size_t *n)
{
    char err[512];
    if (gb_detect_devices(cfg, "/", mode_override ? gb_mode_name(*mode_override) : NULL, facts, sel, devs, n, err,
                          sizeof err) != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        return -1;
    }
    for (size_t i = 0; *n > 1 && i < *n; i++)
        GB_INFO("device #%zu: %s %d, mode %s", i, devs[i].mode == GB_MODE_CPU ? "cpu threads, listed as" : "CUDA device",
                devs[i].device, gb_mode_name(devs[i].mode));
    return 0;
}

/* Prints the host facts, the rule that fired and the mode chosen for cfg
 * (its hosts entries), GPUBRIDGE_MODE and --mode. */
static int run_detect(const gb_config_t *cfg, const gb_mode *mode_override)
{
    gb_facts_t facts;
    gb_selection_t sel;
    char err[512];
    gb_err e = gb_detect_run(cfg, "/", mode_override ? gb_mode_name(*mode_override) : NULL, &facts, &sel,
                             err, sizeof err);
    if (e != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        return GBI_EXIT_USAGE;
    }
    gb_detect_print(&facts, &sel, stdout);
    gb_engine_dev_t devs[GB_MAX_DEVICES];
    size_t n = 0;
    if (start_devices(cfg, mode_override, &facts, &sel, devs, &n) != 0)
        return GBI_EXIT_USAGE;
    for (size_t i = 0; n > 1 && i < n; i++) /* several devices: each one's mode */
        printf("%-28s#%zu: %s %d, mode %s\n", i ? "" : "devices:", i,
               devs[i].mode == GB_MODE_CPU ? "cpu threads, listed as" : "CUDA device", devs[i].device,
               gb_mode_name(devs[i].mode));
    return GBI_EXIT_OK;
}

static volatile sig_atomic_t g_stop;
static volatile sig_atomic_t g_reload;  /* wakes the loop for a reload */
static volatile sig_atomic_t g_serving; /* the server loop or the supervisor runs */
static volatile sig_atomic_t g_worker;  /* a supervisor's worker */
/* Counted by the handlers only (each masks the other): SIGHUPs, and in a
 * worker SIGUSR1s, its supervisor's word that it refused a reload. */
static volatile sig_atomic_t g_hups, g_refusals;

static void on_hup(int sig)
{
    (void)sig;
    g_hups = g_hups + 1;
    g_reload = 1;
}

/* Counted only when it comes from the supervisor (the parent): anyone
 * else's SIGUSR1 is no word of a reload. */
static void on_refused(int sig, siginfo_t *info, void *uctx)
{
    (void)sig, (void)uctx;
    if (info->si_pid != getppid())
        return;
    g_refusals = g_refusals + 1;
    g_reload = 1;
}

static void on_signal(int sig)
{
    /* Before serving (loading the config, starting CUDA and the devices) a
     * first signal is kept for the loop, which then drains at once; a
     * second one stops the start itself, as without a handler. Not in a
     * worker: a Ctrl-C or a service manager reaches it besides the
     * supervisor's own signal, and the supervisor kills it if need be. */
    if (g_stop && !g_serving && !g_worker) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    g_stop = 1;
}

/* SIGINT/SIGTERM: stop gracefully (drain, answer, exit 0); SIGHUP: reload;
 * no SIGPIPE. Set first thing, so that a signal that comes while the bridge
 * starts (a supervisor's SIGTERM to a worker that is still starting CUDA)
 * stops it cleanly rather than killing it. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_hup;
    sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGHUP, &sa, NULL);
    if (g_worker) {
        struct sigaction su;
        memset(&su, 0, sizeof su);
        su.sa_sigaction = on_refused;
        su.sa_flags = SA_SIGINFO;
        sigemptyset(&su.sa_mask);
        sigaddset(&su.sa_mask, SIGHUP);
        sigaction(SIGUSR1, &su, NULL);
    } else {
        signal(SIGUSR1, SIG_IGN); /* a worker's signal: nothing to a bridge or a supervisor */
    }
    signal(SIGPIPE, SIG_IGN);
    /* A supervisor starts its worker with these blocked (supervisor.c):
     * from here on they are handled. */
    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGINT);
    sigaddset(&handled, SIGTERM);
    sigaddset(&handled, SIGHUP);
    sigaddset(&handled, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &handled, NULL);
}

/* The Prometheus endpoint of cfg->metrics, counting server's traffic. */
static gb_err start_metrics(const gb_config_t *cfg, gb_server_t *server, gb_metrics_t **out)
{
    char err[256];
    gb_err e = gb_metrics_start(&cfg->metrics, out, err, sizeof err);
    if (e == GB_OK && (e = gb_server_set_metrics(server, *out)) != GB_OK)
        snprintf(err, sizeof err, "metrics: %s", gb_strerror(e));
    if (e != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        gb_metrics_stop(out);
        return e;
    }
    GB_INFO("metrics: serving http://%.*s:%u/metrics", (int)(strrchr(cfg->metrics.listen, ':') -
                                                             cfg->metrics.listen),
            cfg->metrics.listen, gb_metrics_port(*out));
    return GB_OK;
}

/* Raises the soft limit on descriptors to the hard one: every connection
 * takes one (two or three under --supervise). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = rl.rlim_max;
    if (rl.rlim_cur < want && setrlimit(RLIMIT_NOFILE, &(struct rlimit){want, rl.rlim_max}) != 0) {
        /* An unlimited hard limit is capped by the kernel (fs.nr_open). */
        want = 1u << 20;
        while (want > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &(struct rlimit){want, rl.rlim_max}) != 0)
            want /= 2;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        GB_INFO("descriptors: limit %llu (hard %llu)", (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max);
}

/* A supervised worker, before it serves: the grain types its supervisor
 * says the last worker kept deactivated or terminated start so
 * (sup_state.h). The file lies beside the worker's socket. */
static void apply_kept_state(const char *worker_ep, gb_engine_t *engine)
{
    if (strncmp(worker_ep, "ipc://", 6) != 0)
        return;
    char path[GB_PATH_LEN + 64];
    const char *dir = worker_ep + 6, *slash = strrchr(dir, '/');
    if (!slash)
        return;
    snprintf(path, sizeof path, "%.*s/" GBI_SUP_STATE_FILE, (int)(slash - dir), dir);
    gbi_worker_state_apply(path, engine);
}

/* A supervised worker serves only the endpoint its supervisor made: an ipc
 * socket in a private directory (0700, ours), open to the supervisor's pid
 * only; CURVE is the supervisor's business. Returns -1 when ep is not such
 * an endpoint. */
static int worker_config(gb_config_t *wcfg, const char *ep)
{
    char path[GB_PATH_LEN];
    if (strncmp(ep, "ipc:///", 7) != 0 || snprintf(path, sizeof path, "%s", ep + 6) >= (int)sizeof path) {
        fprintf(stderr, "gpubridge: --worker-endpoint is for the supervisor's use (ipc:// in a private directory)\n");
        return -1;
    }
    if (gb_sup_check_private_dir(dirname(path)) != 0) {
        fprintf(stderr, "gpubridge: --worker-endpoint %s: its directory is not private (mode 0700, owner %d)\n", ep,
                (int)geteuid());
        return -1;
    }
    wcfg->n_endpoints = 1;
    snprintf(wcfg->endpoints[0], sizeof wcfg->endpoints[0], "%s", ep);
    wcfg->curve.enabled = false;
    wcfg->ipc_peer_pid = (int)getppid();
    return 0;
}

/* The worker's socket directory, once its supervisor is gone (killed: it
 * could not clean up); the socket file itself goes with the ZeroMQ socket. */
static void worker_cleanup(const char *ep, pid_t supervisor)
{
    char path[GB_PATH_LEN];
    if (getppid() == supervisor)
        return;
    snprintf(path, sizeof path, "%s", ep + 6);
    if (gb_sup_remove_dir(dirname(path)) == 0)
        GB_INFO("supervisor %d is gone: removed %s", (int)supervisor, path);
}

/* Loads the config's grain libraries (grain_libs.h), before --check-config
 * prints and before any process starts serving, so that a bad one stops
 * either with its FILE:LINE. Whether their types need GPU code depends on
 * the mode this host would run: detected (CUDA calls), or for a supervisor,
 * which keeps CUDA out of its process, only a mode given explicitly (its
 * worker checks again with detection). Returns 0, or -1 once the error is
 * printed. */
static int load_grain_libs(gb_config_t *cfg, const gb_mode *mode_override, bool detect)
{
    if (cfg->n_libs == 0)
        return 0;
    gb_facts_t facts;
    gb_selection_t sel;
    char err[768];
    gb_mode mode = cfg->mode;
    const char *env = getenv("GPUBRIDGE_MODE");
    if (mode_override)
        mode = *mode_override;
    else if (env && *env && gb_mode_parse(env, &mode) != 0)
        mode = cfg->mode;
    if (detect && gb_detect_run(cfg, "/", mode_override ? gb_mode_name(*mode_override) : NULL, &facts, &sel, err,
                                sizeof err) == GB_OK)
        mode = sel.mode;
    const bool gpu = mode == GB_MODE_PERSISTENT || mode == GB_MODE_RELAUNCH;
    if (gb_grain_libs_load(cfg, gpu, err, sizeof err) != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        return -1;
    }
    return 0;
}

/* The daemon: decide the mode, start every grain type's ring kernel, serve
 * until SIGINT/SIGTERM, then drain, answer everything in flight, stop the
 * kernels and exit 0. cli->worker_endpoint: set in a supervised worker. */
static int run_bridge(const gb_config_t *cfg_in, const gb_mode *mode_override, const gbi_cli *cli)
{
    const char *worker_ep = cli->worker_endpoint;
    gb_config_t wcfg = *cfg_in;
    const bool worker = worker_ep != NULL;
    if (worker && worker_config(&wcfg, worker_ep) != 0)
        return GBI_EXIT_USAGE;
    const gb_config_t *cfg = &wcfg;
    gb_facts_t facts;
    gb_selection_t sel;
    char err[512];
    gb_err e = gb_detect_run(cfg, "/", mode_override ? gb_mode_name(*mode_override) : NULL, &facts, &sel, err,
                             sizeof err);
    if (e != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        return GBI_EXIT_USAGE;
    }
    GB_INFO("gpubridge %s: config %s; mode %s (%s)", GB_VERSION, cfg->source, gb_mode_name(sel.mode), sel.why);
    if (sel.warning[0])
        GB_WARN("%s", sel.warning);

    gb_engine_dev_t devs[GB_MAX_DEVICES];
    size_t n_devs = 0;
    if (start_devices(cfg, mode_override, &facts, &sel, devs, &n_devs) != 0)
        return GBI_EXIT_USAGE;

    gb_engine_t *engine = NULL;
    e = gb_engine_new_devs(cfg, devs, n_devs, &engine);
    if (e != GB_OK) {
        fprintf(stderr, "gpubridge: cannot start the grain types in %s mode: %s\n", gb_mode_name(sel.mode),
                gb_strerror(e));
        return e == GB_ERR_CONFIG ? GBI_EXIT_USAGE : GBI_EXIT_FAIL;
    }
    if (worker)
        apply_kept_state(worker_ep, engine);
    gb_server_t *server = NULL;
    e = gb_server_new(cfg, engine, &facts, &sel, &server, err, sizeof err);
    if (e != GB_OK) {
        fprintf(stderr, "gpubridge: %s\n", err);
        gb_engine_destroy(&engine, 2000);
        return e == GB_ERR_CONFIG ? GBI_EXIT_USAGE : GBI_EXIT_FAIL;
    }
    gb_server_exit_on_gpu_failure(server, worker);
    gb_metrics_t *metrics = NULL;
    if (cfg->metrics.enabled && start_metrics(cfg, server, &metrics) != GB_OK) {
        gb_server_destroy(&server);
        gb_engine_destroy(&engine, 2000);
        return GBI_EXIT_FAIL;
    }
    /* SIGHUP: the server loop reloads the file (reload.c). */
    gb_reload_t reload = {.path = cli->config_path,
                          .live = &wcfg,
                          .cli_log_level = cli->has_log_level,
                          .hostname = facts.hostname,
                          .cli_max_message_size = cli->max_message_size,
                          .supervised = worker,
                          .hups = &g_hups,
                          .refusals = &g_refusals};
    gb_server_on_reload(server, &g_reload, gb_reload_run, &reload);
    g_serving = 1;
    e = gb_server_run(server, &g_stop, (int)cfg->shutdown_drain_ms);
    gb_server_destroy(&server);
    gb_metrics_stop(&metrics);
    if (e == GB_ERR_CUDA) {
        /* The context is poisoned: stopping kernels could hang; the process
         * exit frees everything, and the supervisor starts a fresh one. */
        GB_INFO("bye (GPU side failed)");
        return GB_EXIT_GPU_FAILED;
    }
    gb_engine_destroy(&engine, 2000);
    GB_INFO("bye");
    return e == GB_OK ? GBI_EXIT_OK : GBI_EXIT_FAIL;
}

int main(int argc, char **argv)
{
    gbi_cli cli = {0};
    int rc = parse_args(argc, argv, &cli);
    if (rc >= 0)
        return rc;
    g_worker = cli.worker_endpoint != NULL;
    if (!cli.check_config && !cli.detect)
        install_signals();

    gb_config_t cfg;
    gb_config_defaults(&cfg);
    if (cli.config_path) {
        char err[512];
        gb_err e = gb_config_load(cli.config_path, &cfg, err, sizeof err);
        if (e != GB_OK) {
            fprintf(stderr, "gpubridge: %s\n", err);
            return GBI_EXIT_USAGE;
        }
    }
    if (cli.has_log_level)
        cfg.log_level = cli.log_level;
    if (cli.max_message_size)
        cfg.max_message_size = cli.max_message_size;
    gb_log_set_level(cfg.log_level);
    gb_log_set_format(cfg.log_format);
    const gb_mode *mode_override = cli.has_mode ? &cli.mode : NULL;
    if (load_grain_libs(&cfg, mode_override, !(cli.supervise && !cli.worker_endpoint)) != 0)
        return GBI_EXIT_USAGE;

    if (cli.check_config) {
        char err[512];
        gb_mode env_mode;
        const char *env = getenv("GPUBRIDGE_MODE");
        if (env && *env && gb_mode_parse_named("GPUBRIDGE_MODE", env, &env_mode, err, sizeof err) != GB_OK) {
            fprintf(stderr, "gpubridge: %s\n", err); /* the start would refuse it (exit 2) */
            return GBI_EXIT_USAGE;
        }
        if (gb_config_check_curve(&cfg, NULL, err, sizeof err) != GB_OK) {
            fprintf(stderr, "gpubridge: %s\n", err);
            return GBI_EXIT_USAGE;
        }
        for (size_t i = 0; i < cfg.n_grains; i++)
            if (!gb_grain_kind_of(cfg.grains[i].type))
                fprintf(stderr, "gpubridge: warning: grain type '%s' is not built in and no grain library defines "
                        "it: requests to it would be refused (a misspelt name?)\n", cfg.grains[i].type);
        gb_config_print(&cfg, stdout);
        /* --mode is not a config key (it also beats hosts entries); say so as a comment
         * so that the output stays loadable. */
        if (mode_override)
            printf("# command line: --mode %s (overrides mode and hosts)\n",
                   gb_mode_name(*mode_override));
    }
    if (cli.detect)
        return run_detect(&cfg, mode_override);
    if (cli.check_config)
        return GBI_EXIT_OK;
    raise_nofile();
    /* A worker started by a supervisor never supervises (getopt also takes
     * abbreviations of --supervise, which the supervisor cannot filter out). */
    if (cli.supervise && !cli.worker_endpoint) {
        /* The worker gets our own arguments, without --supervise. */
        char **wargv = calloc((size_t)argc + 1, sizeof *wargv);
        int wn = 0;
        for (int i = 0; wargv && i < argc; i++)
            if (strcmp(argv[i], "--supervise") != 0)
                wargv[wn++] = argv[i];
        if (!wargv)
            return GBI_EXIT_FAIL;
        /* SIGHUP: the supervisor reads the file and applies its keys; its worker reloads the copy it writes */
        g_serving = 1;
        char host[256] = "";
        (void)gethostname(host, sizeof host - 1);
        gb_reload_t rl = {.path = cli.config_path,
                          .live = &cfg,
                          .cli_log_level = cli.has_log_level,
                          .hostname = host,
                          .cli_max_message_size = cli.max_message_size};
        gb_err e = gb_supervise(&cfg, wargv, &g_stop, &g_reload, &rl);
        free(wargv);
        return e == GB_OK ? GBI_EXIT_OK : e == GB_ERR_CONFIG ? GBI_EXIT_USAGE : GBI_EXIT_FAIL;
    }
    const pid_t parent = getppid();
    rc = run_bridge(&cfg, mode_override, &cli);
    if (cli.worker_endpoint)
        worker_cleanup(cli.worker_endpoint, parent);
    return rc;
}
