/* Control authority: who may change a grain type's state (Activate,
 * Deactivate, Terminate). Read-only control (status, telemetry, list, detect)
 * and grain messages, DeactivateGrain included, stay open to every client
 * the socket admits.
 *
 * With CURVE on and curve.admin_clients set, only those keys may; otherwise
 * only local peers (loopback TCP, ipc, inproc) may, unless remote_control is
 * true. docs/protocol.md, "CURVE security and control authority". */
#ifndef GB_AUTHORITY_H
#define GB_AUTHORITY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the peer that sent msg (a zmq_msg_t * received from the bridge's
 * socket, so carrying its metadata) may change state under cfg, else 0. */
int gb_authority_peer(const gb_config_t *cfg, void *msg);

/* 1 when peer address addr (ZeroMQ's "Peer-Address": an IP for tcp,
 * "localhost..." for ipc) is on this host. */
int gb_authority_local_address(const char *addr);

/* 1 when Control op case op_case changes state (needs authority). */
int gb_authority_op_changes_state(int op_case);

/* For a relay (the supervisor) that cannot answer envelope by envelope
 * itself: when the encoded ClientFrame data holds an operation that changes
 * state, returns a malloc'd encoded ServerFrame answering every envelope of
 * it STATUS_UNAUTHORIZED (*len its size, *n_replies the replies in it); NULL
 * when the frame needs no authority (or cannot be decoded: the worker
 * answers that). */
uint8_t *gb_authority_refusal(const uint8_t *data, size_t size, size_t *len, size_t *n_replies);

/* The error text of a refused operation. */
#define GB_AUTHORITY_REFUSED                                                                       \
    "this client may not change a grain type's state (Activate, Deactivate, Terminate): "     \
    "that needs a key in curve.admin_clients, or a local peer when none is set"

#ifdef __cplusplus
}
#endif
#endif
