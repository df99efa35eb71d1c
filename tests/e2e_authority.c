/* End to end: control authority (docs/protocol.md, "CURVE security and
 * control authority"), against the real daemon, plain and supervised.
 *   - Without CURVE, a remote peer (the host's own non-loopback address) may
 *     not Activate, Deactivate or Terminate; status and grain messages work;
 *     a loopback peer may; remote_control = true opens it.
 *   - With CURVE and curve.admin_clients, an allow-listed client that is not
 *     an admin is refused even over ipc; an admin key (admitted without being
 *     on allowed_clients) may.
 *   - SIGHUP applies changed CURVE lists where the public socket is (the
 *     supervisor under --supervise), and the log says so. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "e2e_harness.h"
#include "e2e_net.h"


static int status_of(void *s, uint64_t corr, const char *type)
{
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__StatusRequest q = GPUBRIDGE__STATUS_REQUEST__INIT;
    q.grain_type = (char *)type;
    c.op_case = GPUBRIDGE__CONTROL__OP_STATUS_REQUEST;
    c.status_request = &q;
    send_env(s, make_control(corr, &c));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, 10000);
    int st = r->status;
    gpubridge__server_frame__free_unpacked(f, NULL);
    return st;
}

enum { OK = GPUBRIDGE__STATUS__STATUS_OK, NO = GPUBRIDGE__STATUS__STATUS_UNAUTHORIZED };

static void test_remote_control_refused(void **state)
{
    (void)state;
    char ip[64], remote[128], local[128], listen[64];
    if (!remote_address(ip, sizeof ip))
        skip(); /* no address but loopback: no remote peer to play */
    int port = free_port();
    snprintf(listen, sizeof listen, "tcp://0.0.0.0:%d", port);
    snprintf(remote, sizeof remote, "tcp://%s:%d", ip, port);
    snprintf(local, sizeof local, "tcp://127.0.0.1:%d", port);
    g_extra_endpoint = listen;
    bridge_t b;
    assert_int_equal(bridge_start(&b, ""), 0);
    void *far = client_open(remote), *near = client_open(local);
    still_serves(far);
    assert_int_equal(control_simple(far, 1, GPUBRIDGE__CONTROL__OP_TERMINATE, "vecadd"), NO);
    assert_int_equal(control_simple(far, 2, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), NO);
    assert_int_equal(control_simple(far, 3, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), NO);
    assert_int_equal(status_of(far, 4, "vecadd"), OK); /* read-only stays open */
    still_serves(far);                                 /* and vecadd was not terminated */
    assert_int_equal(control_simple(near, 5, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(near, 6, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    still_serves(far);
    zmq_close(far);
    zmq_close(near);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);

    /* remote_control = true: the operator opened it. */
    port = free_port();
    snprintf(listen, sizeof listen, "tcp://0.0.0.0:%d", port);
    snprintf(remote, sizeof remote, "tcp://%s:%d", ip, port);
    assert_int_equal(bridge_start(&b, "remote_control = true;"), 0);
    g_extra_endpoint = NULL;
    far = client_open(remote);
    assert_int_equal(control_simple(far, 7, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(far, 8, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    zmq_close(far);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

/* Whether this host can listen on the IPv6 loopback (::1). */
static int has_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* An IPv6 endpoint (the config's "[IPV6]:PORT" form) is served, and ::1 is a
 * local peer, as protocol.md says; so is an IPv4 loopback peer of a
 * dual-stack wildcard endpoint (tcp, host "*"), seen as IPv4-mapped. */
static void test_ipv6_endpoint(void **state)
{
    (void)state;
    if (!has_ipv6_loopback())
        skip();
    char listen[64], v6[64], any[64], v4[64];
    int port = free_port();
    snprintf(listen, sizeof listen, "tcp://[::1]:%d", port);
    snprintf(v6, sizeof v6, "tcp://[::1]:%d", port);
    g_extra_endpoint = listen;
    bridge_t b;
    int st = bridge_start(&b, "");
    g_extra_endpoint = NULL;
    if (st != 0)
        fail_msg("the bridge did not start with endpoint %s (exit %d)", listen, st);
    void *near = client_open(v6);
    still_serves(near);
    assert_int_equal(control_simple(near, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(near, 2, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    still_serves(near);
    zmq_close(near);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);

    /* A wildcard host: both families; an IPv4 loopback peer is still local */
    port = free_port();
    snprintf(any, sizeof any, "tcp://*:%d", port);
    snprintf(v4, sizeof v4, "tcp://127.0.0.1:%d", port);
    snprintf(v6, sizeof v6, "tcp://[::1]:%d", port);
    g_extra_endpoint = any;
    st = bridge_start(&b, "");
    g_extra_endpoint = NULL;
    assert_int_equal(st, 0);
    void *near4 = client_open(v4), *near6 = client_open(v6);
    still_serves(near4);
    still_serves(near6);
    assert_int_equal(control_simple(near4, 3, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(near6, 4, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    zmq_close(near4);
    zmq_close(near6);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

static void *curve_client(const bridge_t *b, const char *spub, const char *pub, const char *sec)
{
    void *s = zmq_socket(g_zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
    assert_int_equal(zmq_connect(s, b->endpoint), 0);
    return s;
}

static void test_admin_keys(void **state)
{
    (void)state;
    g_extra_endpoint = NULL; /* also after a failed test_remote_control_refused */
    if (!g_zctx)
        g_zctx = zmq_ctx_new();
    char spub[41], ssec[41], upub[41], usec[41], apub[41], asec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(upub, usec), 0);
    assert_int_equal(zmq_curve_keypair(apub, asec), 0);
    char dir[256], keyfile[300], cfg[1024];
    e2e_server_key(ssec, dir, keyfile);
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\";\n"
             "          allowed_clients = [ \"%s\" ]; admin_clients = [ \"%s\" ]; };\n",
             keyfile, spub, upub, apub);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 0);
    void *user = curve_client(&b, spub, upub, usec), *admin = curve_client(&b, spub, apub, asec);
    still_serves(user);
    /* ipc is local, but with admin keys set only they count. */
    assert_int_equal(control_simple(user, 1, GPUBRIDGE__CONTROL__OP_TERMINATE, "vecadd"), NO);
    assert_int_equal(control_simple(user, 2, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), NO);
    assert_int_equal(status_of(user, 3, "vecadd"), OK);
    still_serves(user);
    still_serves(admin);
    assert_int_equal(control_simple(admin, 4, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(admin, 5, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(admin, 6, GPUBRIDGE__CONTROL__OP_TERMINATE, "echo"), OK);
    assert_int_equal(control_simple(user, 7, GPUBRIDGE__CONTROL__OP_ACTIVATE, "echo"), NO);
    zmq_close(user);
    zmq_close(admin);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
    assert_true(log_contains(&b, "terminated"));
}

/* Writes a CURVE config for key file keyfile and public key pub into
 * dir/check.cfg (its path in cfg) and runs gpubridge --check-config on it;
 * returns the exit status, stderr in dir/check.err. */
static int check_config(const char *dir, const char *keyfile, const char *pub, char *errtext, size_t cap)
{
    char cfg[300], errf[300];
    snprintf(cfg, sizeof cfg, "%s/check.cfg", dir);
    snprintf(errf, sizeof errf, "%s/check.err", dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\"; };\n",
            keyfile, pub);
    fclose(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *e = freopen(errf, "w", stderr);
        FILE *o = freopen("/dev/null", "w", stdout);
        (void)e;
        (void)o;
        const char *bin = getenv("GB_BRIDGE_BIN");
        execl(bin, bin, "--check-config", "--config", cfg, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    f = fopen(errf, "r");
    assert_non_null(f);
    size_t n = fread(errtext, 1, cap - 1, f);
    errtext[n] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --check-config checks the secret key file: mode, owner, a FIFO, and that it
 * is the secret key of server_public_key; the daemon refuses to start on a
 * mismatch. */
static void test_check_config_keys(void **state)
{
    (void)state;
    char spub[41], ssec[41], opub[41], osec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(opub, osec), 0);
    char dir[256], keyfile[300], err[2048];
    e2e_server_key(ssec, dir, keyfile);
    assert_int_equal(check_config(dir, keyfile, spub, err, sizeof err), 0);

    assert_int_equal(check_config(dir, keyfile, opub, err, sizeof err), 2);
    assert_non_null(strstr(err, "does not hold the secret key of curve.server_public_key"));
    assert_non_null(strstr(err, spub)); /* names the key it does hold */

    chmod(keyfile, 0640);
    assert_int_equal(check_config(dir, keyfile, spub, err, sizeof err), 2);
    assert_non_null(strstr(err, "chmod 600"));
    chmod(keyfile, 0600);

    if (geteuid() == 0) { /* only root can give a file away */
        assert_int_equal(chown(keyfile, 65534, 65534), 0);
        assert_int_equal(check_config(dir, keyfile, spub, err, sizeof err), 2);
        assert_non_null(strstr(err, "is owned by uid 65534"));
        assert_int_equal(chown(keyfile, 0, 0), 0);
    }

    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/key.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(check_config(dir, fifo, spub, err, sizeof err), 2); /* and does not block */
    assert_non_null(strstr(err, "is a FIFO"));
    /* Not a regular file, whatever its mode: said so, not "chmod 600 it". */
    char subdir[300];
    snprintf(subdir, sizeof subdir, "%s/key.dir", dir);
    assert_int_equal(mkdir(subdir, 0755), 0);
    assert_int_equal(check_config(dir, subdir, spub, err, sizeof err), 2);
    assert_non_null(strstr(err, "is a directory"));
    assert_null(strstr(err, "chmod"));
    assert_int_equal(chmod(fifo, 0644), 0);
    assert_int_equal(check_config(dir, fifo, spub, err, sizeof err), 2);
    assert_non_null(strstr(err, "is a FIFO"));
    rmdir(subdir);

    /* A link is refused, even to a good key: its target is not what was checked. */
    char link[300];
    snprintf(link, sizeof link, "%s/key.link", dir);
    assert_int_equal(symlink(keyfile, link), 0);
    assert_int_equal(check_config(dir, link, spub, err, sizeof err), 2);
    assert_non_null(strstr(err, "is a symbolic link"));

    /* The daemon itself refuses the mismatch at start. */
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\"; };\n",
             keyfile, opub);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 2);
    assert_true(log_contains(&b, "does not hold the secret key"));
}

static uint64_t now_ms(void) { return e2e_ms(); }

/* Refused CURVE handshakes log a few lines per 10 s, not one each. */
static void test_refused_handshakes_rate_limited(void **state)
{
    (void)state;
    if (!g_zctx)
        g_zctx = zmq_ctx_new();
    char spub[41], ssec[41], apub[41], asec[41], bpub[41], bsec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(apub, asec), 0);
    assert_int_equal(zmq_curve_keypair(bpub, bsec), 0);
    char dir[256], keyfile[300], cfg[1024];
    e2e_server_key(ssec, dir, keyfile);
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\";\n"
             "          allowed_clients = [ \"%s\" ]; };\n",
             keyfile, spub, apub);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 0);
    /* 100 refused clients, each reconnecting every 100 ms (ZeroMQ's default)
     * and refused again, until one second after the first refusal is logged. */
    enum { N = 100 };
    void *bad[N];
    uint64_t t0 = now_ms();
    for (int i = 0; i < N; i++)
        bad[i] = curve_client(&b, spub, bpub, bsec);
    while (!log_contains(&b, "refused client key") && now_ms() - t0 < 20000)
        usleep(10000);
    usleep(1000000);
    for (int i = 0; i < N; i++)
        zmq_close(bad[i]);
    void *ok = curve_client(&b, spub, apub, asec);
    still_serves(ok);
    uint64_t elapsed = now_ms() - t0;
    zmq_close(ok);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
    FILE *f = fopen(b.log, "r");
    assert_non_null(f);
    char line[2048];
    unsigned refused = 0;
    while (fgets(line, sizeof line, f))
        refused += strstr(line, "refused client key") != NULL;
    fclose(f);
    /* 10 per 10 s window (the windows this run spanned), not one per handshake. */
    unsigned bound = 10 * (unsigned)(elapsed / 10000 + 2);
    if (refused == 0 || refused > bound)
        fail_msg("%u refused-handshake lines for %d refused clients in %llu ms (at most %u)", refused, N,
                 (unsigned long long)elapsed, bound);
}

/* 1 when a request gets no reply: the handshake was refused. A refused
 * connection may be gone before the send, which then cannot be queued. */
static int refused(void *s, uint64_t corr)
{
    float a[1] = {1}, b[1] = {2};
    uint8_t buf[64], frame[128];
    size_t len = pack_vecadd(buf, 0, a, b, 1);
    Gpubridge__ClientFrame cf = GPUBRIDGE__CLIENT_FRAME__INIT;
    cf.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    cf.envelope = make_env(corr, "vecadd", 1, 1, buf, len);
    assert_true(gpubridge__client_frame__get_packed_size(&cf) <= sizeof frame);
    len = gpubridge__client_frame__pack(&cf, frame);
    int timeout = 2000 * E2E_SLOW;
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    if (zmq_send(s, frame, len, 0) < 0)
        return 1;
    Gpubridge__ServerFrame *f = recv_frame(s, 2000 * E2E_SLOW);
    if (f)
        gpubridge__server_frame__free_unpacked(f, NULL);
    return f == NULL;
}

/* Rewrites the bridge's config file with extra (as bridge_start wrote it). */
static void rewrite_config(const bridge_t *b, const char *extra)
{
    FILE *f = fopen(b->cfg, "w");
    assert_non_null(f);
    fprintf(f, "endpoints = [\"%s\"];\nlog_level = \"debug\";\n%s\n", b->endpoint, extra);
    fclose(f);
}

/* SIGHUP reloads the CURVE lists where the public socket is: in the bridge,
 * or under --supervise in the supervisor (its worker has no CURVE). A key
 * added to allowed_clients is admitted, one removed is refused, a new admin
 * key may change state; and the log says which process applied them. */
static void test_reload_access(void **state)
{
    (void)state;
    g_extra_endpoint = NULL;
    if (!g_zctx)
        g_zctx = zmq_ctx_new();
    char spub[41], ssec[41], apub[41], asec[41], bpub[41], bsec[41], dpub[41], dsec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(apub, asec), 0);
    assert_int_equal(zmq_curve_keypair(bpub, bsec), 0);
    assert_int_equal(zmq_curve_keypair(dpub, dsec), 0);
    char dir[256], keyfile[300], cfg[1024];
    e2e_server_key(ssec, dir, keyfile);
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\";\n"
             "          allowed_clients = [ \"%s\" ]; };\n",
             keyfile, spub, apub);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 0);
    void *a = curve_client(&b, spub, apub, asec), *nb = curve_client(&b, spub, bpub, bsec);
    still_serves(a);
    assert_true(refused(nb, 1));
    zmq_close(a);
    zmq_close(nb);

    /* B allowed instead of A; D an admin. */
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\";\n"
             "          allowed_clients = [ \"%s\" ]; admin_clients = [ \"%s\" ]; };\n",
             keyfile, spub, bpub, dpub);
    rewrite_config(&b, cfg);
    assert_int_equal(kill(b.pid, SIGHUP), 0);
    const int sup = getenv("GB_E2E_SUPERVISE") && *getenv("GB_E2E_SUPERVISE") == '1';
    const char *applied = sup ? "supervisor: reload: curve.admin_clients: 1 key(s)" : "reload: curve.admin_clients: 1 key(s)";
    for (uint64_t end = e2e_ms() + 10000 * E2E_SLOW; !log_contains(&b, applied) && e2e_ms() < end;)
        usleep(10000);
    if (!log_contains(&b, applied))
        fail_msg("no '%s' in %s after SIGHUP", applied, b.log);
    void *nb2 = curve_client(&b, spub, bpub, bsec), *d = curve_client(&b, spub, dpub, dsec);
    void *a2 = curve_client(&b, spub, apub, asec);
    still_serves(nb2);
    assert_int_equal(control_simple(nb2, 2, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), NO);
    assert_int_equal(control_simple(d, 3, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"), OK);
    assert_int_equal(control_simple(d, 4, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), OK);
    assert_true(refused(a2, 5));
    zmq_close(nb2);
    zmq_close(d);
    zmq_close(a2);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
    /* The worker does not claim what it does not apply, nor warn of keys it does not own. */
    if (sup) {
        assert_true(log_contains(&b, "supervisor: reload: curve.allowed_clients: 1 key(s)"));
        assert_false(log_contains(&b, "gpubridge: reload: curve."));
        assert_false(log_contains(&b, "reload: endpoints changed"));
        assert_false(log_contains(&b, "reload: curve.enabled changed"));
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_control_refused),
        cmocka_unit_test(test_admin_keys),
        cmocka_unit_test(test_check_config_keys),
        cmocka_unit_test(test_refused_handshakes_rate_limited),
        cmocka_unit_test(test_ipv6_endpoint),
        cmocka_unit_test(test_reload_access),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests_name("control authority", tests, NULL, NULL) ? 1 : 0;
}
