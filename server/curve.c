/* CURVE security: the server's key pair from the config, and a ZAP handler
 * (ZeroMQ's authentication protocol, RFC 27) that admits only clients whose
 * public key is on the allow-list. An empty allow-list admits any client that
 * completes the CURVE handshake with our server key. A secret key file that
 * group or others can read, or that another user owns, is refused: the key
 * would not be secret; so is one that does not match server_public_key. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "config_file.h"
#include "log.h"
#include "server_internal.h"

static pthread_mutex_t g_curve_lock = PTHREAD_MUTEX_INITIALIZER;

void gb_curve_lock(void) { pthread_mutex_lock(&g_curve_lock); }
void gb_curve_unlock(void) { pthread_mutex_unlock(&g_curve_lock); }

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

#define KEY_FILE "curve.server_secret_key_file"

/* The file's owner and mode: ours (or root's), and no access for group or
 * others; anyone else could read the key, or replace it. Checked on the
 * descriptor that is then read, so the file checked is the file read. */
static gb_err check_owner_mode(int fd, const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, errlen, KEY_FILE " %s: %s", path, strerror(errno));
        return GB_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode))
        return GB_OK; /* gbi_read_regular_fd says what it is instead: chmod would not help */
    if (sb.st_uid != geteuid() && sb.st_uid != 0) {
        snprintf(err, errlen, KEY_FILE " %s is owned by uid %u, not by this user (uid %u) or root; run: chown %u %s",
                 path, (unsigned)sb.st_uid, (unsigned)geteuid(), (unsigned)geteuid(), path);
        return GB_ERR_CONFIG;
    }
    if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, KEY_FILE " %s is accessible by group or others (mode %03o); run: chmod 600 %s",
                 path, (unsigned)(sb.st_mode & 0777), path);
        return GB_ERR_CONFIG;
    }
    return GB_OK;
}

static gb_err read_secret(const char *path, char key[41], char *err, size_t errlen)
{
    /* O_NOFOLLOW: a link's owner and mode say nothing of its target's;
     * O_NONBLOCK: opening a FIFO would wait for a writer. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ELOOP)
            snprintf(err, errlen, KEY_FILE " %s is a symbolic link; name the key file itself", path);
        else
            snprintf(err, errlen, KEY_FILE " %s: %s", path, strerror(errno));
        return GB_ERR_IO;
    }
    gb_err e = check_owner_mode(fd, path, err, errlen);
    if (e != GB_OK) {
        close(fd);
        return e;
    }
    char *text = NULL;
    size_t n = 0;
    e = gbi_read_regular_fd(fd, path, KEY_FILE, 128, &text, &n, err, errlen);
    if (e != GB_OK)
        return e;
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
        text[--n] = 0;
    uint8_t bin[32];
    int ok = n == 40 && zmq_z85_decode(bin, text);
    if (ok)
        memcpy(key, text, 41);
    memset(text, 0, n);
    free(text);
    memset(bin, 0, sizeof bin);
    if (!ok) {
        snprintf(err, errlen, KEY_FILE " %s: expected one 40-character Z85 key", path);
        return GB_ERR_CONFIG;
    }
    return GB_OK;
}

gb_err gb_config_check_curve(const gb_config_t *cfg, char *secret_out, char *err, size_t errlen)
{
    char secret[41], pub[41];
    if (!cfg->curve.enabled)
        return GB_OK;
    gb_err e = read_secret(cfg->curve.server_secret_key_file, secret, err, errlen);
    if (e != GB_OK)
        return e;
    if (zmq_curve_public(pub, secret) != 0) {
        snprintf(err, errlen, "CURVE: cannot derive the public key: %s (is libzmq built with libsodium?)",
                 zmq_strerror(errno));
        memset(secret, 0, sizeof secret);
        return GB_ERR_CONFIG;
    }
    if (strcmp(pub, cfg->curve.server_public_key) != 0) {
        snprintf(err, errlen, KEY_FILE " %s does not hold the secret key of curve.server_public_key %s "
                 "(its public key is %s)", cfg->curve.server_secret_key_file, cfg->curve.server_public_key, pub);
        memset(secret, 0, sizeof secret);
        return GB_ERR_CONFIG;
    }
    if (secret_out)
        memcpy(secret_out, secret, sizeof secret);
    memset(secret, 0, sizeof secret);
    return GB_OK;
}

/* Admin keys (curve.admin_clients) are admitted as well. */
static int allowed(const gb_server_t *s, const char *z85)
{
    const gb_curve_config_t *cv = &s->cfg->curve;
    gb_curve_lock(); /* SIGHUP may be replacing the lists */
    int ok = cv->n_allowed == 0;
    for (size_t i = 0; !ok && i < cv->n_allowed; i++)
        ok = strcmp(z85, cv->allowed_clients[i]) == 0;
    for (size_t i = 0; !ok && i < cv->n_admin; i++)
        ok = strcmp(z85, cv->admin_clients[i]) == 0;
    gb_curve_unlock();
    return ok;
}

/* The ZAP handler thread: request frames are version, request id, domain,
 * address, identity, mechanism, credentials...; the reply is version, request
 * id, status code, status text, user id, metadata. */
static void *zap_main(void *arg)
{
    gb_server_t *s = arg;
    void *zap = s->zap_sock; /* bound by gbi_curve_setup: no handshake can precede it */
    for (;;) {
        char parts[8][256];
        size_t sizes[8] = {0};
        int n = 0, more = 1;
        while (more) {
            int rc = zmq_recv(zap, n < 8 ? parts[n] : parts[7], 255, 0);
            if (rc < 0) {
                zmq_close(zap); /* ETERM: the context is closing */
                return NULL;
            }
            if (n < 8)
                sizes[n++] = (size_t)rc;
            int m = 0;
            size_t ml = sizeof m;
            zmq_getsockopt(zap, ZMQ_RCVMORE, &m, &ml);
            more = m;
        }
        const char *code = "400", *text = "not allowed";
        char z85[41] = "";
        if (n >= 7 && sizes[5] == 5 && memcmp(parts[5], "CURVE", 5) == 0 && sizes[6] == 32) {
            zmq_z85_encode(z85, (const uint8_t *)parts[6], 32);
            if (allowed(s, z85)) {
                code = "200";
                text = "OK";
            } else {
                GB_WARN_LIMITED("CURVE: refused client key %s (not in curve.allowed_clients)", z85);
            }
        }
        /* The user id is the client's key: messages carry it as "User-Id"
         * metadata, which the control authority check reads (authority.c). */
        const char *user = code[0] == '2' ? z85 : "";
        zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(zap, parts[1], sizes[1], ZMQ_SNDMORE);
        zmq_send(zap, code, 3, ZMQ_SNDMORE);
        zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(zap, user, strlen(user), ZMQ_SNDMORE);
        zmq_send(zap, "", 0, 0);
    }
}

gb_err gbi_curve_setup(gb_server_t *s, char *err, size_t errlen)
{
    char secret[41];
    gb_err e = gb_config_check_curve(s->cfg, secret, err, errlen);
    if (e != GB_OK)
        return e;
    s->zap_sock = zmq_socket(s->zctx, ZMQ_REP);
    if (!s->zap_sock || zmq_bind(s->zap_sock, ZAP_ENDPOINT) != 0) {
        snprintf(err, errlen, "CURVE: cannot bind the ZAP handler at %s: %s", ZAP_ENDPOINT, zmq_strerror(errno));
        return GB_ERR_IO;
    }
    /* The socket moves to the handler thread; pthread_create is the barrier. */
    if (pthread_create(&s->zap_thread, NULL, zap_main, s) != 0) {
        snprintf(err, errlen, "cannot start the ZAP handler thread");
        return GB_ERR_IO;
    }
    s->zap_running = 1;
    pthread_setname_np(s->zap_thread, "gb-zap");
    int one = 1;
    const char *domain = "gpubridge";
    if (zmq_setsockopt(s->sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, secret, 40) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0) {
        snprintf(err, errlen, "CURVE setup failed: %s (is libzmq built with libsodium?)", zmq_strerror(errno));
        return GB_ERR_CONFIG;
    }
    memset(secret, 0, sizeof secret);
    return GB_OK;
}

void gbi_curve_stop(gb_server_t *s)
{
    if (!s->zap_running)
        return;
    /* Shutting the context down makes the handler's recv fail with ETERM. */
    zmq_ctx_shutdown(s->zctx);
    pthread_join(s->zap_thread, NULL);
    s->zap_running = 0;
}
