/*
 * status.h - the one status convention of mpix-acc.
 *
 * Every internal function that can fail returns mx_status_t. MX_OK is 0 and
 * errors are negative. An error is logged once, where it is first detected
 * (MX_FAIL), and propagated quietly afterwards (MX_TRY). Only the
 * interposition layer maps statuses to MPI error classes.
 */
#ifndef MX_UTIL_STATUS_H
#define MX_UTIL_STATUS_H

#include "util/log.h"

typedef enum {
    MX_OK = 0,
    MX_ERR_NO_MEMORY = -1,      /* allocation failed */
    MX_ERR_INVALID_PARAM = -2,  /* bad argument (generic) */
    MX_ERR_INVALID_STREAM = -3, /* stream handle is not a live stream */
    MX_ERR_UNSUPPORTED = -4,    /* feature not available in this build/run */
    MX_ERR_TRANSPORT = -5,      /* UCX reported a failure */
    MX_ERR_TRUNCATED = -6,      /* received message longer than the buffer */
    MX_ERR_CANCELED = -7,       /* operation was cancelled */
    MX_ERR_TIMED_OUT = -8,      /* gave up waiting (finalize drain) */
    MX_ERR_NO_DEVICE = -9,      /* accelerator runtime absent or failed */
    MX_ERR_SYSTEM = -10,        /* an OS call failed (errno logged) */
    MX_ERR_PEER = -11,          /* peer unreachable or gone */
    MX_ERR_NOT_READY = -12,     /* resource not initialised yet */
    MX_ERR_BUSY = -13,          /* try again */
} mx_status_t;

/* Short human-readable name of a status. */
const char *mx_status_string(mx_status_t status);

/* Log an error at the point of detection and return it from the function. */
#define MX_FAIL(status, ...)                                                                     \
    do {                                                                                         \
        MPIX_ACC_LOG(MX_LOG_ERROR, __VA_ARGS__);                                                 \
        return (status);                                                                         \
    } while (0)

/* Propagate a failure quietly (it was logged where it was detected). */
#define MX_TRY(expr)                                                                             \
    do {                                                                                         \
        mx_status_t mx_try_status_ = (expr);                                                     \
        if (mx_try_status_ != MX_OK)                                                             \
            return mx_try_status_;                                                               \
    } while (0)

/* Propagate to a cleanup label: the caller declares `mx_status_t status`. */
#define MX_TRY_GOTO(expr, label)                                                                 \
    do {                                                                                         \
        status = (expr);                                                                         \
        if (status != MX_OK)                                                                     \
            goto label;                                                                          \
    } while (0)

#endif
