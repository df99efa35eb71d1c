#include "error.h"

const char *gb_strerror(gb_err err)
{
    switch (err) {
    case GB_OK: return "ok";
    case GB_ERR_NOMEM: return "out of memory";
    case GB_ERR_INVALID: return "invalid argument or input";
    case GB_ERR_CONFIG: return "invalid configuration";
    case GB_ERR_FULL: return "ring full (backpressure)";
    case GB_ERR_EMPTY: return "nothing available";
    case GB_ERR_TIMEOUT: return "timed out";
    case GB_ERR_NODEV: return "no CUDA device";
    case GB_ERR_CUDA: return "CUDA error";
    case GB_ERR_UNKNOWN_TYPE: return "unknown grain or message type";
    case GB_ERR_TOO_LARGE: return "message too large";
    case GB_ERR_TERMINATED: return "ring kernel terminated";
    case GB_ERR_STATE: return "operation not valid in this state";
    case GB_ERR_IO: return "I/O error";
    case GB_ERR_PROTO: return "malformed message";
    case GB_ERR_UNSUPPORTED: return "not supported here";
    case GB_ERR_NOSPACE: return "table full";
    case GB_ERR__COUNT: break;
    }
    return "unknown error";
}
