/* typed.c: helpers for the vecadd and echo grain types: encode their
 * request, call or queue it, decode and check the reply. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "echo.pb-c.h"
#include "vecadd.pb-c.h"

#define VECADD_TYPE "vecadd"
#define ECHO_TYPE "echo"

/* Encoded requests up to this size stay on the stack. */
#define SMALL 512

/* Packs msg into small (when it fits) or a malloc'd buffer in *buf. */
static gbc_err pack(const ProtobufCMessage *msg, uint8_t small[SMALL], uint8_t **buf,
                    size_t *len)
{
    *len = protobuf_c_message_get_packed_size(msg);
    *buf = *len <= SMALL ? small : malloc(*len);
    if (!*buf)
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    protobuf_c_message_pack(msg, *buf);
    return GBC_OK;
}

static void pack_done(uint8_t small[SMALL], uint8_t *buf)
{
    if (buf != small)
        free(buf);
}

/* The reply must be OK and carry message type `want` (or be empty, which
 * the bridge sends with message type 0). */
static gbc_err check_reply(const gbc_reply_t *r, uint32_t want, const char *what)
{
    if (!r)
        return gbci_fail(GBC_ERR_INVALID, "%s: reply is NULL", what);
    if (r->status != GBC_STATUS_OK)
        return gbci_fail_status(NULL, r);
    if (r->message_type != want && !(r->message_type == 0 && r->payload_len == 0))
        return gbci_fail(GBC_ERR_PROTO, "%s: reply has message type %u, expected %u", what,
                         r->message_type, want);
    return GBC_OK;
}

/* ---- vecadd ---- */

static gbc_err vecadd_encode(gbc_vecadd_op op, const float *a, const float *b, size_t n,
                             uint8_t small[SMALL], uint8_t **buf, size_t *len)
{
    if ((unsigned)op > GBC_VECADD_DIV)
        return gbci_fail(GBC_ERR_INVALID, "vecadd: op %d is not add/sub/mul/div", (int)op);
    if (n && (!a || !b))
        return gbci_fail(GBC_ERR_INVALID, "vecadd: a or b is NULL");
    Gpubridge__VectorAddRequest req = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    req.op = (Gpubridge__VectorAddRequest__Op)op;
    req.n_a = req.n_b = n;
    req.a = (float *)a;
    req.b = (float *)b;
    return pack(&req.base, small, buf, len);
}

gbc_err gbc_vecadd_result(const gbc_reply_t *r, float *result, size_t n)
{
    gbc_err err = check_reply(r, GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_RESPONSE,
                              "vecadd");
    if (err)
        return err;
    if (n && !result)
        return gbci_fail(GBC_ERR_INVALID, "vecadd: result is NULL");
    Gpubridge__VectorAddResponse *resp =
        gpubridge__vector_add_response__unpack(NULL, r->payload_len, r->payload);
    if (!resp)
        return gbci_fail(GBC_ERR_PROTO, "vecadd: reply does not decode as VectorAddResponse");
    if (resp->n_result != n) {
        err = gbci_fail(GBC_ERR_PROTO, "vecadd: reply has %zu elements, expected %zu",
                        resp->n_result, n);
    } else if (n) {
        memcpy(result, resp->result, n * sizeof *result);
    }
    gpubridge__vector_add_response__free_unpacked(resp, NULL);
    return err;
}

gbc_err gbc_vecadd(gbc_client_t *c, uint64_t key, gbc_vecadd_op op, const float *a,
                   const float *b, size_t n, float *result, int timeout_ms)
{
    gbci_clear_error();
    if (n && !result)
        return gbci_fail(GBC_ERR_INVALID, "vecadd: result is NULL");
    uint8_t small[SMALL], *buf = NULL;
    size_t len = 0;
    gbc_err err = vecadd_encode(op, a, b, n, small, &buf, &len);
    if (err)
        return err;
    gbc_reply_t r;
    err = gbc_call(c, VECADD_TYPE, key,
                   GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST, buf, len,
                   &r, timeout_ms);
    pack_done(small, buf);
    if (!err)
        err = gbc_vecadd_result(&r, result, n);
    gbc_reply_clear(&r);
    return err;
}

gbc_err gbc_vecadd_send(gbc_client_t *c, uint64_t key, gbc_vecadd_op op, const float *a,
                        const float *b, size_t n, uint64_t *corr_out)
{
    gbci_clear_error();
    uint8_t small[SMALL], *buf = NULL;
    size_t len = 0;
    gbc_err err = vecadd_encode(op, a, b, n, small, &buf, &len);
    if (err)
        return err;
    err = gbc_send(c, VECADD_TYPE, key,
                   GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST, buf, len,
                   corr_out);
    pack_done(small, buf);
    return err;
}

/* ---- echo ---- */

static gbc_err echo_encode(uint64_t seq, const void *data, size_t len, uint8_t small[SMALL],
                           uint8_t **buf, size_t *buf_len)
{
    if (len && !data)
        return gbci_fail(GBC_ERR_INVALID, "echo: data is NULL but len is %zu", len);
    Gpubridge__EchoRequest req = GPUBRIDGE__ECHO_REQUEST__INIT;
    req.sequence = seq;
    req.data.data = (uint8_t *)data;
    req.data.len = len;
    req.client_time_ns = (uint64_t)gbci_now_ns();
    return pack(&req.base, small, buf, buf_len);
}

/* Decodes an echo reply; *resp_out (if not NULL) keeps the decoded message. */
static gbc_err echo_decode(const gbc_reply_t *r, gbc_echo_result_t *out,
                           Gpubridge__EchoResponse **resp_out)
{
    gbc_err err = check_reply(r, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_RESPONSE, "echo");
    if (err)
        return err;
    Gpubridge__EchoResponse *resp = gpubridge__echo_response__unpack(NULL, r->payload_len,
                                                                     r->payload);
    if (!resp)
        return gbci_fail(GBC_ERR_PROTO, "echo: reply does not decode as EchoResponse");
    if (out) {
        out->sequence = resp->sequence;
        out->grain_count = resp->grain_count;
        out->client_time_ns = resp->client_time_ns;
        out->rtt_ns = (uint64_t)gbci_now_ns() - resp->client_time_ns;
        out->data_len = resp->data.len;
    }
    if (resp_out)
        *resp_out = resp;
    else
        gpubridge__echo_response__free_unpacked(resp, NULL);
    return GBC_OK;
}

gbc_err gbc_echo_result(const gbc_reply_t *r, gbc_echo_result_t *out)
{
    return echo_decode(r, out, NULL);
}

gbc_err gbc_echo(gbc_client_t *c, uint64_t key, const void *data, size_t len,
                 gbc_echo_result_t *out, int timeout_ms)
{
    gbci_clear_error();
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    uint64_t seq = c->echo_seq;
    uint8_t small[SMALL], *buf = NULL;
    size_t blen = 0;
    gbc_err err = echo_encode(seq, data, len, small, &buf, &blen);
    if (err)
        return err;
    c->echo_seq++;
    gbc_reply_t r;
    err = gbc_call(c, ECHO_TYPE, key, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST, buf,
                   blen, &r, timeout_ms);
    pack_done(small, buf);
    Gpubridge__EchoResponse *resp = NULL;
    if (!err)
        err = echo_decode(&r, out, &resp);
    if (!err && resp->sequence != seq)
        err = gbci_fail(GBC_ERR_PROTO, "echo: reply has sequence %llu, sent %llu",
                        (unsigned long long)resp->sequence, (unsigned long long)seq);
    if (!err && (resp->data.len != len || (len && memcmp(resp->data.data, data, len) != 0)))
        err = gbci_fail(GBC_ERR_PROTO, "echo: the data came back changed (%zu bytes sent, %zu "
                        "received)", len, resp->data.len);
    if (resp)
        gpubridge__echo_response__free_unpacked(resp, NULL);
    gbc_reply_clear(&r);
    return err;
}

gbc_err gbc_echo_send(gbc_client_t *c, uint64_t key, const void *data, size_t len,
                      uint64_t *corr_out)
{
    gbci_clear_error();
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    uint8_t small[SMALL], *buf = NULL;
    size_t blen = 0;
    gbc_err err = echo_encode(c->echo_seq, data, len, small, &buf, &blen);
    if (err)
        return err;
    err = gbc_send(c, ECHO_TYPE, key, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST, buf,
                   blen, corr_out);
    pack_done(small, buf);
    if (!err)
        c->echo_seq++;
    return err;
}
