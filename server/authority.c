/* Control authority (authority.h). A peer is identified by the metadata
 * ZeroMQ attaches to each received message: "User-Id" is the client's CURVE
 * public key in Z85 (our ZAP handler sets it, curve.c), "Peer-Address" the
 * remote IP for tcp and "localhost:uid:gid:pid" for ipc; inproc messages have
 * no metadata at all, and every message that crossed a tcp or ipc connection
 * has "Socket-Type". */
#include "authority.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "control.pb-c.h"
#include "gpubridge.pb-c.h"
#include "wire.h"

int gb_authority_local_address(const char *addr)
{
    if (!addr || !*addr)
        return 0;
    if (strncmp(addr, "localhost", 9) == 0)
        return 1; /* ipc: the socket file's permissions decided who connects */
    struct in_addr v4;
    if (inet_pton(AF_INET, addr, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    struct in6_addr v6;
    if (inet_pton(AF_INET6, addr, &v6) == 1) {
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (IN6_IS_ADDR_LOOPBACK(&v6))
            return 1;
        return memcmp(v6.s6_addr, mapped, 12) == 0 && v6.s6_addr[12] == 127;
    }
    return 0;
}

static int is_admin_key(const gb_config_t *cfg, const char *user)
{
    if (!user || strlen(user) != GB_KEY_LEN - 1)
        return 0;
    for (size_t i = 0; i < cfg->curve.n_admin; i++)
        if (strcmp(user, cfg->curve.admin_clients[i]) == 0)
            return 1;
    return 0;
}

int gb_authority_peer(const gb_config_t *cfg, void *msg)
{
    zmq_msg_t *m = msg;
    if (cfg->curve.enabled && cfg->curve.n_admin > 0)
        return is_admin_key(cfg, zmq_msg_gets(m, "User-Id"));
    if (cfg->remote_control)
        return 1;
    const char *addr = zmq_msg_gets(m, "Peer-Address");
    if (!addr)
        return zmq_msg_gets(m, "Socket-Type") == NULL; /* inproc: this process */
    return gb_authority_local_address(addr);
}

int gb_authority_op_changes_state(int op_case)
{
    return op_case == GPUBRIDGE__CONTROL__OP_ACTIVATE || op_case == GPUBRIDGE__CONTROL__OP_DEACTIVATE ||
           op_case == GPUBRIDGE__CONTROL__OP_TERMINATE;
}

static int env_changes_state(const gbi_env_t *e)
{
    if (e->kind != GPUBRIDGE__KIND__KIND_CONTROL || !e->has_control)
        return 0;
    Gpubridge__Control *c = gpubridge__control__unpack(NULL, e->control_len, e->control);
    int yes = c && gb_authority_op_changes_state(c->op_case);
    if (c)
        gpubridge__control__free_unpacked(c, NULL);
    return yes;
}

/* Every envelope of f answered UNAUTHORIZED (one-way ones without a
 * correlation id get nothing, as everywhere). */
static uint8_t *encode_refusal(const gbi_frame_t *f, size_t *len, size_t *n_replies)
{
    Gpubridge__Reply *rs = calloc(f->n ? f->n : 1, sizeof *rs);
    Gpubridge__Reply **ptrs = calloc(f->n ? f->n : 1, sizeof *ptrs);
    uint8_t *buf = NULL;
    if (rs && ptrs) {
        Gpubridge__ReplyBatch b = GPUBRIDGE__REPLY_BATCH__INIT;
        for (size_t i = 0; i < f->n; i++) {
            if (f->envs[i].kind == GPUBRIDGE__KIND__KIND_ONE_WAY && f->envs[i].corr == 0)
                continue;
            gpubridge__reply__init(&rs[b.n_replies]);
            rs[b.n_replies].correlation_id = f->envs[i].corr;
            rs[b.n_replies].status = GPUBRIDGE__STATUS__STATUS_UNAUTHORIZED;
            rs[b.n_replies].error = (char *)GB_AUTHORITY_REFUSED;
            ptrs[b.n_replies] = &rs[b.n_replies];
            b.n_replies++;
        }
        b.replies = ptrs;
        *n_replies = b.n_replies;
        Gpubridge__ServerFrame sf = GPUBRIDGE__SERVER_FRAME__INIT;
        if (b.n_replies == 1) {
            sf.body_case = GPUBRIDGE__SERVER_FRAME__BODY_REPLY;
            sf.reply = ptrs[0];
        } else {
            sf.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
            sf.batch = &b;
        }
        *len = gpubridge__server_frame__get_packed_size(&sf);
        buf = malloc(*len ? *len : 1);
        if (buf)
            gpubridge__server_frame__pack(&sf, buf);
    }
    free(rs);
    free(ptrs);
    return buf;
}

uint8_t *gb_authority_refusal(const uint8_t *data, size_t size, size_t *len, size_t *n_replies)
{
    gbi_frame_t f;
    memset(&f, 0, sizeof f);
    char err[128];
    uint8_t *out = NULL;
    if (gbi_frame_decode(&f, data, size, err, sizeof err) == 0) {
        int needs = 0;
        for (size_t i = 0; i < f.n && !needs; i++)
            needs = env_changes_state(&f.envs[i]);
        if (needs)
            out = encode_refusal(&f, len, n_replies);
    }
    gbi_frame_fini(&f);
    return out;
}
