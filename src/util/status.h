/*
 * status.h - the one status convention of mpix-acc.
 *
 * Every internal function that can fail returns mxu_status_t. MXU_OK is 0 and
 * errors are negative. An error is logged once, where it is first detected
 * (MXU_FAIL), and propagated quietly afterwards (MXU_TRY). Only the
 * interposition layer maps statuses to MPI error classes.
 */
#ifndef MXU_STATUS_H
#define MXU_STATUS_H

#include "util/log.h"

typedef enum {
    MXU_OK = 0,
    MXU_ERR_NO_MEMORY = -1,      /* allocation failed */
    MXU_ERR_INVALID_PARAM = -2,  /* bad argument (generic) */
    MXU_ERR_INVALID_STREAM = -3, /* stream handle is not a live stream */
    MXU_ERR_UNSUPPORTED = -4,    /* feature not available in this build/run */
    MXU_ERR_TRANSPORT = -5,      /* UCX reported a failure */
    MXU_ERR_TRUNCATED = -6,      /* received message longer than the buffer */
    MXU_ERR_CANCELED = -7,       /* operation was cancelled */
    MXU_ERR_TIMED_OUT = -8,      /* gave up waiting (finalize drain) */
    MXU_ERR_NO_DEVICE = -9,      /* accelerator runtime absent or failed */
    MXU_ERR_SYSTEM = -10,        /* an OS call failed (errno logged) */
    MXU_ERR_PEER = -11,          /* peer unreachable or gone */
    MXU_ERR_NOT_READY = -12,     /* resource not initialised yet */
    MXU_ERR_BUSY = -13,          /* try again */
    MXU_ERR_CAPTURED = -14,      /* the stream is being captured into a CUDA graph */
} mxu_status_t;

/* Short human-readable name of a status. */
const char *mxu_status_string(mxu_status_t status);

/* Log an error at the point of detection and return it from the function. */
#define MXU_FAIL(status, ...)                                                                      \
    do {                                                                                           \
        MXU_LOG(MXU_LOG_ERROR, __VA_ARGS__);                                                       \
        return (status);                                                                           \
    } while (0)

/* Propagate a failure quietly (it was logged where it was detected). */
#define MXU_TRY(expr)                                                                              \
    do {                                                                                           \
        mxu_status_t mxu_try_status_ = (expr);                                                     \
        if (mxu_try_status_ != MXU_OK)                                                             \
            return mxu_try_status_;                                                                \
    } while (0)

/* Propagate to a cleanup label: the caller declares `mxu_status_t status`. */
#define MXU_TRY_GOTO(expr, label)                                                                  \
    do {                                                                                           \
        status = (expr);                                                                           \
        if (status != MXU_OK)                                                                      \
            goto label;                                                                            \
    } while (0)

#endif
