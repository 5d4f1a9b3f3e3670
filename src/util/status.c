/*
 * status.c - names of mx_status_t values.
 */
#include "util/status.h"

const char *mx_status_string(mx_status_t status)
{
    switch (status) {
    case MX_OK: return "success";
    case MX_ERR_NO_MEMORY: return "out of memory";
    case MX_ERR_INVALID_PARAM: return "invalid parameter";
    case MX_ERR_INVALID_STREAM: return "invalid stream handle";
    case MX_ERR_UNSUPPORTED: return "unsupported";
    case MX_ERR_TRANSPORT: return "transport error";
    case MX_ERR_TRUNCATED: return "message truncated";
    case MX_ERR_CANCELED: return "canceled";
    case MX_ERR_TIMED_OUT: return "timed out";
    case MX_ERR_NO_DEVICE: return "no accelerator device";
    case MX_ERR_SYSTEM: return "system call failed";
    case MX_ERR_PEER: return "peer unreachable";
    case MX_ERR_NOT_READY: return "not initialised";
    case MX_ERR_BUSY: return "busy, try again";
    }
    return "unknown status";
}
