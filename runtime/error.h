/* gpubridge error codes: one enum for the whole project, one strerror.
 * Every fallible public function returns gb_err; GB_OK is zero. */
#ifndef GB_ERROR_H
#define GB_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gb_err {
    GB_OK = 0,
    GB_ERR_NOMEM,        /* an allocation failed */
    GB_ERR_INVALID,      /* a bad argument or malformed input */
    GB_ERR_CONFIG,       /* the configuration is invalid */
    GB_ERR_FULL,         /* a ring has no room: retry after draining (backpressure) */
    GB_ERR_EMPTY,        /* nothing to receive yet */
    GB_ERR_TIMEOUT,      /* a deadline passed */
    GB_ERR_NODEV,        /* no CUDA device, or CUDA not built in */
    GB_ERR_CUDA,         /* a CUDA call failed (see the log / status for the code) */
    GB_ERR_UNKNOWN_TYPE, /* unknown grain type or message type */
    GB_ERR_TOO_LARGE,    /* payload larger than the slot or the configured maximum */
    GB_ERR_TERMINATED,   /* the ring kernel has terminated or failed */
    GB_ERR_STATE,        /* the call does not fit the object's state */
    GB_ERR_IO,           /* a system call or file operation failed */
    GB_ERR_PROTO,        /* a message could not be decoded */
    GB_ERR_UNSUPPORTED,  /* not available on this host or build */
    GB_ERR_NOSPACE,      /* a fixed table (grain states, types) is full */
    GB_ERR__COUNT
} gb_err;

/* A short human-readable text for err; never NULL. */
const char *gb_strerror(gb_err err);

#ifdef __cplusplus
}
#endif
#endif
