/*
 * status.c - names of mxu_status_t values.
 */
#include "util/status.h"

const char *mxu_status_string(mxu_status_t status)
{
    switch (status) {
    case MXU_OK:
        return "success";
    case MXU_ERR_NO_MEMORY:
        return "out of memory";
    case MXU_ERR_INVALID_PARAM:
        return "invalid parameter";
    case MXU_ERR_INVALID_STREAM:
        return "invalid stream handle";
    case MXU_ERR_UNSUPPORTED:
        return "unsupported";
    case MXU_ERR_TRANSPORT:
        return "transport error";
    case MXU_ERR_TRUNCATED:
        return "message truncated";
    case MXU_ERR_CANCELED:
        return "canceled";
    case MXU_ERR_TIMED_OUT:
        return "timed out";
    case MXU_ERR_NO_DEVICE:
        return "no accelerator device";
    case MXU_ERR_SYSTEM:
        return "system call failed";
    case MXU_ERR_PEER:
        return "peer unreachable";
    case MXU_ERR_NOT_READY:
        return "not initialised";
    case MXU_ERR_BUSY:
        return "busy, try again";
    case MXU_ERR_CAPTURED:
        return "stream being captured into a graph";
    }
    return "unknown status";
}
