/* Operations pieces without a daemon: JSON log lines, the metrics config and
 * listen address, the Prometheus rendering, and what a SIGHUP reload applies
 * and what it says needs a restart. (tests/test_ops.sh runs the daemon.) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "reload.h"

static void test_json_escapes(void **state)
{
    (void)state;
    char buf[512];
    size_t n = gb_log_json_line(buf, sizeof buf, "T", "warn",
                                "a \"q\" \\ b\nc\td\x01 \xc3\xa9 bad:\xff\xc3 end");
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "{\"time\":\"T\",\"level\":\"warn\",\"program\":\"gpubridge\","
                             "\"message\":\"a \\\"q\\\" \\\\ b\\nc\\td\\u0001 \xc3\xa9 "
                             "bad:\\ufffd\\ufffd end\"}\n");
}

static void test_json_truncates_as_json(void **state)
{
    (void)state;
    char msg[600], buf[200];
    memset(msg, '"', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    size_t n = gb_log_json_line(buf, sizeof buf, "T", "info", msg);
    assert_true(n < sizeof buf);
    assert_string_equal(buf + n - 3, "\"}\n");
    assert_int_not_equal(buf[n - 4], '\\'); /* no escape cut in half */
    /* Overlong, surrogate and too-large sequences are not UTF-8. */
    gb_log_json_line(buf, sizeof buf, "T", "info", "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80");
    assert_non_null(strstr(buf, "\"message\":\"" "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"));
    assert_null(strchr(buf, '\xc0'));
}

static void test_listen_parse(void **state)
{
    (void)state;
    char why[160];
    struct sockaddr_storage ss;
    assert_int_equal(gb_metrics_parse_listen("127.0.0.1:9464", &ss, why, sizeof why), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(gb_metrics_parse_listen("[::1]:0", &ss, why, sizeof why), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    const char *bad[] = {"localhost:9464", "127.0.0.1", "127.0.0.1:70000", ":80",
                         "1.2.3.4:x", "1.2.3.4:-1", "[::1:80", "", "1.2.3.4:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gb_metrics_parse_listen(bad[i], NULL, why, sizeof why), -1);
    gb_metrics_parse_listen("localhost:1", NULL, why, sizeof why);
    assert_non_null(strstr(why, "not a numeric IPv4 address"));
}

static void test_config_keys(void **state)
{
    (void)state;
    gb_config_t cfg;
    char err[512];
    gb_config_defaults(&cfg);
    assert_int_equal(cfg.log_format, GB_LOG_TEXT);
    assert_false(cfg.metrics.enabled);
    assert_string_equal(cfg.metrics.listen, "127.0.0.1:9464"); /* loopback when on */
    assert_int_equal(gb_config_load_string("log_format = \"json\";\n"
                                           "metrics = { listen = \"[::1]:9000\"; };\n",
                                           "t.cfg", &cfg, err, sizeof err), GB_OK);
    assert_int_equal(cfg.log_format, GB_LOG_JSON);
    assert_string_equal(cfg.metrics.listen, "[::1]:9000");
    assert_int_equal(gb_config_load_string("log_format = \"xml\";", "t.cfg", &cfg, err,
                                           sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "t.cfg:1: log_format: unknown log format 'xml'"));
    assert_int_equal(gb_config_load_string("\nmetrics = { listen = \"any:1\"; };", "t.cfg", &cfg,
                                           err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "t.cfg:2: metrics.listen: 'any:1'"));
    assert_int_equal(gb_config_load_string("metrics = { port = 1; };", "t.cfg", &cfg, err,
                                           sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "port"));
    gb_err e = gb_config_load_string("metrics = { enabled = true; };", "t.cfg", &cfg, err,
                                     sizeof err);
    if (gb_metrics_available()) {
        assert_int_equal(e, GB_OK);
    } else {
        assert_int_equal(e, GB_ERR_CONFIG);
        assert_non_null(strstr(err, "built without libmicrohttpd"));
    }
}

static char *render(const gb_metrics_snap_t *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    gb_metrics_render(s, f);
    fclose(f);
    return text;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

static void test_render(void **state)
{
    (void)state;
    gb_metrics_snap_t *s = calloc(1, sizeof *s);
    s->mode = GB_MODE_CPU;
    s->n_types = 1;
    gb_metrics_type_t *t = &s->types[0];
    snprintf(t->name, sizeof t->name, "echo");
    t->mode = GB_MODE_RELAUNCH;
    t->requests = 3;
    t->errors[8] = 2;
    t->launches = 5;
    gb_metrics_observe(t, 5000);      /* first bucket (10 us) */
    gb_metrics_observe(t, 30000);     /* 50 us */
    gb_metrics_observe(t, 5000000000); /* past 1 s: +Inf only */
    char *text = render(s);
    const char *want[] = {
        "gpubridge_grain_requests_total{grain_type=\"echo\",mode=\"relaunch\"} 3\n",
        "gpubridge_grain_errors_total{grain_type=\"echo\",mode=\"relaunch\",status=\"STATUS_BUSY\"} 2\n",
        "gpubridge_kernel_relaunches_total{grain_type=\"echo\",mode=\"relaunch\"} 4\n",
        "gpubridge_grain_latency_seconds_bucket{grain_type=\"echo\",mode=\"relaunch\",le=\"1e-05\"} 1\n",
        "gpubridge_grain_latency_seconds_bucket{grain_type=\"echo\",mode=\"relaunch\",le=\"2.5e-05\"} 1\n",
        "gpubridge_grain_latency_seconds_bucket{grain_type=\"echo\",mode=\"relaunch\",le=\"5e-05\"} 2\n",
        "gpubridge_grain_latency_seconds_bucket{grain_type=\"echo\",mode=\"relaunch\",le=\"1\"} 2\n",
        "gpubridge_grain_latency_seconds_bucket{grain_type=\"echo\",mode=\"relaunch\",le=\"+Inf\"} 3\n",
        "gpubridge_grain_latency_seconds_sum{grain_type=\"echo\",mode=\"relaunch\"} 5.000035000\n",
        "gpubridge_grain_latency_seconds_count{grain_type=\"echo\",mode=\"relaunch\"} 3\n",
        "# TYPE gpubridge_grain_latency_seconds histogram\n",
        "gpubridge_info{version=\"" GB_VERSION "\",mode=\"cpu\"} 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(text, want[i]))
            fail_msg("missing: %s", want[i]);
    }
    /* Each family's TYPE line appears once. */
    assert_int_equal(count(text, "# TYPE gpubridge_grain_requests_total "), 1);
    free(text);
    free(s);
}

static void test_reload_apply(void **state)
{
    (void)state;
    gb_config_t live, next;
    char err[512];
    gb_config_defaults(&live);
    gb_config_defaults(&next);
    assert_int_equal(gb_config_load_string(
        "log_level = \"warn\"; endpoints = [ \"inproc://other\" ];\n"
        "hosts = ( { pattern = \"testhost\"; mode = \"cpu\"; } );\n"
        "curve = { allowed_clients = [ \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\" ]; };\n"
        "metrics = { listen = \"127.0.0.1:1\"; };\n",
        "next.cfg", &next, err, sizeof err), GB_OK);
    gb_log_level saved = gb_log_get_level();
    /* endpoints, metrics.listen and the host's mode need a restart; the rest applies. */
    assert_int_equal(gb_reload_apply(&live, &next, false, "testhost"), 3);
    assert_int_equal(live.log_level, GB_LOG_WARN);
    assert_int_equal(gb_log_get_level(), GB_LOG_WARN);
    assert_int_equal(live.n_hosts, 1);
    assert_string_equal(live.hosts[0].pattern, "testhost");
    assert_int_equal(live.curve.n_allowed, 1);
    assert_string_equal(live.endpoints[0], "tcp://127.0.0.1:5555"); /* not applied */
    assert_string_equal(live.metrics.listen, "127.0.0.1:9464");
    /* --log-level beats the file on reload too. */
    next.log_level = GB_LOG_DEBUG;
    assert_int_equal(gb_reload_apply(&live, &next, true, "testhost"), 2);
    assert_int_equal(live.log_level, GB_LOG_WARN);
    /* Nothing changed: nothing to say. */
    gb_config_t same = live;
    assert_int_equal(gb_reload_apply(&live, &same, false, "testhost"), 0);
    /* The messaging group is read at start: a change is said to need a restart. */
    same.mail_hold_ms = live.mail_hold_ms + 1;
    same.mail_max_hops = live.mail_max_hops + 1;
    assert_int_equal(gb_reload_apply(&live, &same, false, "testhost"), 2);
    gb_log_set_level(saved);
}

/* Lines of the log file that hold what. */
static int lines_with(FILE *f, const char *what)
{
    char line[512];
    int n = 0;
    rewind(f);
    while (fgets(line, sizeof line, f))
        n += strstr(line, what) != NULL;
    return n;
}

/* Runs fn(r) n times with stderr into a temporary file (returned, rewound
 * by lines_with); ret[i]: what the i-th call returned. */
static FILE *reload_logged(int (*fn)(gb_reload_t *), gb_reload_t *r, int *ret, int n)
{
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(log), 2);
    gb_log_level level = gb_log_get_level();
    gb_log_set_level(GB_LOG_INFO);
    for (int i = 0; i < n; i++)
        ret[i] = fn(r);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    gb_log_set_level(level);
    return log;
}

/* --max-message-size beats the file on reload too (a supervised worker always
 * gets it): said once, not at every SIGHUP, and not as a restart-only change. */
static void test_reload_cli_max_message_size(void **state)
{
    (void)state;
    char path[] = "/tmp/gb-reload-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "max_message_size = 2048;\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    gb_config_t live;
    gb_config_defaults(&live);
    live.max_message_size = 4096;
    gb_reload_t r = {.path = path, .live = &live, .hostname = "testhost", .cli_max_message_size = 4096};
    int ret[2];
    FILE *log = reload_logged(gb_reload_file, &r, ret, 2);
    unlink(path);
    assert_int_equal(ret[0], 0);
    assert_int_equal(ret[1], 0);
    assert_int_equal(live.max_message_size, 4096);
    assert_int_equal(lines_with(log, "max_message_size"), 1);
    assert_int_equal(lines_with(log, "max_message_size 2048 in the file; --max-message-size 4096 stays in force"), 1);
    fclose(log);
}

/* A reload that names a grain library which is missing, not a regular file,
 * or not ELF is refused whole (a restart would refuse the file): nothing
 * applied, one line naming the file, line and entry. */
static void test_reload_library_checked(void **state)
{
    (void)state;
    char path[] = "/tmp/gb-reload-XXXXXX", dir[] = "/tmp/gb-reload-dir-XXXXXX", text[512], lib[64];
    assert_non_null(mkdtemp(dir));
    snprintf(lib, sizeof lib, "%s/text.so", dir);
    FILE *t = fopen(lib, "w");
    assert_non_null(t);
    fputs("not a library\n", t);
    fclose(t);
    const char *libs[3] = {"/nonexistent/g.so", "/tmp", lib};
    const char *why[3] = {"grains[0].library: cannot open '/nonexistent/g.so': No such file or directory",
                          "grains[0].library: '/tmp' is not a regular file",
                          "is not a shared library (no ELF header)"};
    for (int i = 0; i < 3; i++) {
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        int len = snprintf(text, sizeof text, "log_level = \"warn\";\ngrains = ( { library = \"%s\"; } );\n",
                           libs[i]);
        assert_int_equal(write(fd, text, (size_t)len), len);
        close(fd);
        gb_config_t live;
        gb_config_defaults(&live);
        gb_reload_t r = {.path = path, .live = &live, .hostname = "testhost"};
        int n;
        FILE *log = reload_logged(gb_reload_file, &r, &n, 1);
        unlink(path);
        assert_int_equal(n, -1);
        assert_int_equal(live.log_level, GB_LOG_INFO); /* nothing applied */
        assert_int_equal(live.n_libs, 0);
        assert_int_equal(lines_with(log, why[i]), 1);
        assert_int_equal(lines_with(log, ":2: grains[0].library: "), 1);
        assert_int_equal(lines_with(log, "the running configuration stays"), 1);
        fclose(log);
        strcpy(path, "/tmp/gb-reload-XXXXXX");
    }
    unlink(lib);
    rmdir(dir);
}

/* Under --supervise the public socket's keys are the supervisor's: it applies
 * the CURVE lists and remote_control, and says endpoints need a restart; the
 * worker (a private ipc socket, no CURVE) neither claims nor warns of them. */
static void test_reload_supervised(void **state)
{
    (void)state;
    char pub[41], sec[41], path[] = "/tmp/gb-reload-XXXXXX", text[1024];
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int len = snprintf(text, sizeof text,
                       "endpoints = [ \"tcp://127.0.0.1:7100\" ];\nremote_control = true;\n"
                       "curve = { enabled = true; server_secret_key_file = \"/nonexistent\";\n"
                       "          server_public_key = \"%s\"; allowed_clients = [ \"%s\" ]; };\n",
                       pub, pub);
    assert_int_equal(write(fd, text, (size_t)len), len);
    close(fd);

    gb_config_t worker;
    gb_config_defaults(&worker);
    worker.n_endpoints = 1;
    snprintf(worker.endpoints[0], sizeof worker.endpoints[0], "ipc:///tmp/gpubridge-1-abcdef/worker.sock");
    gb_reload_t rw = {.path = path, .live = &worker, .hostname = "testhost", .supervised = true};
    int n;
    FILE *log = reload_logged(gb_reload_file, &rw, &n, 1);
    assert_int_equal(n, 0);
    assert_int_equal(lines_with(log, "curve"), 0);
    assert_int_equal(lines_with(log, "endpoints"), 0);
    assert_int_equal(lines_with(log, "remote_control"), 0);
    assert_int_equal(worker.curve.n_allowed, 0);
    fclose(log);

    gb_config_t sup;
    gb_config_defaults(&sup);
    gb_reload_t rs = {.path = path, .live = &sup};
    log = reload_logged(gb_reload_supervisor, &rs, &n, 1);
    unlink(path);
    assert_int_equal(n, 4); /* endpoints and curve.enabled, .server_secret_key_file, .server_public_key */
    assert_int_equal(sup.curve.n_allowed, 1);
    assert_string_equal(sup.curve.allowed_clients[0], pub);
    assert_true(sup.remote_control);
    assert_int_equal(lines_with(log, "supervisor: reload: curve.allowed_clients: 1 key(s)"), 1);
    assert_int_equal(lines_with(log, "supervisor: reload: remote_control true"), 1);
    assert_int_equal(lines_with(log, "supervisor: reload: endpoints changed; it takes effect only after a restart"), 1);
    fclose(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escapes),
        cmocka_unit_test(test_json_truncates_as_json),
        cmocka_unit_test(test_listen_parse),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_reload_apply),
        cmocka_unit_test(test_reload_cli_max_message_size),
        cmocka_unit_test(test_reload_supervised),
        cmocka_unit_test(test_reload_library_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
