/*
 * errors.c - MPI error classes, codes and strings of the library, and the
 * one place where failures are raised through MPI error handlers.
 *
 * Argument errors return the predefined MPI class the spec names
 * (MPI_ERR_ARG for a bad stream, ...) itself, whose MPICH text is right; the
 * specifics (which argument, which value, which limit) are logged where the
 * error is raised. No code is added under a predefined class: MPICH 4.0.2
 * decodes such a code as an index into its error-stack ring, and
 * MPI_Error_string then gave unrelated text ("unable to allocate shared
 * memory" for a negative count). Failures that have no MPI class get
 * library classes (MPI_Add_error_class), returned as the class itself, with
 * their strings.
 */
#include "interpose/interpose.h"

#include <stdarg.h>
#include <stdio.h>

static struct {
    int base_class;   /* predefined class, or -1 for a new library class */
    const char *text; /* the library class's string; logged for the others */
} const mxi_err_table[MXI_E_COUNT_OF_ERRORS] = {
    [MXI_E_BAD_STREAM] = {MPI_ERR_ARG, "mpix-acc: invalid stream handle (not a live CUDA stream "
                                       "or host stream)"},
    [MXI_E_COUNT] = {MPI_ERR_COUNT, "mpix-acc: invalid count"},
    [MXI_E_BUFFER] = {MPI_ERR_BUFFER, "mpix-acc: invalid buffer pointer (NULL with data to move)"},
    [MXI_E_RANK] = {MPI_ERR_RANK, "mpix-acc: invalid rank"},
    [MXI_E_TAG] = {MPI_ERR_TAG, "mpix-acc: invalid tag (stream-ordered operations accept "
                                "0..16777215)"},
    [MXI_E_REQUEST] = {MPI_ERR_REQUEST, "mpix-acc: invalid request argument"},
    [MXI_E_COMM] = {MPI_ERR_COMM, "mpix-acc: invalid communicator"},
    [MXI_E_COMM_UNSUPPORTED] = {MPI_ERR_COMM,
                                "mpix-acc: communicator not supported for stream-ordered "
                                "operations (intercommunicator, from MPI_Comm_idup, or too many "
                                "ranks)"},
    [MXI_E_INFO_VALUE] = {MPI_ERR_INFO_VALUE, "mpix-acc: malformed value for an mpix_acc info "
                                              "key"},
    [MXI_E_TYPE] = {MPI_ERR_TYPE, "mpix-acc: datatype not supported for stream-ordered "
                                  "operations (contiguous datatypes only)"},
    [MXI_E_ARG] = {MPI_ERR_ARG, "mpix-acc: invalid argument"},
    [MXI_E_NOT_ACTIVE] = {-1, "mpix-acc: library not active (MPIX_ACC_DISABLE=1, not "
                              "initialised, or its initialisation failed)"},
    [MXI_E_TRANSPORT] = {-1, "mpix-acc: transport failure (UCX reported an error or the peer "
                             "is gone)"},
    [MXI_E_PENDING] = {-1, "mpix-acc: operation cancelled at MPI_Finalize because it could not "
                           "complete"},
    [MXI_E_NO_MEM] = {MPI_ERR_NO_MEM, "mpix-acc: out of memory"},
    [MXI_E_INTERN] = {MPI_ERR_INTERN, "mpix-acc: internal error"},
    [MXI_E_UNSUPPORTED] = {MPI_ERR_UNSUPPORTED_OPERATION,
                           "mpix-acc: operation not supported on a stream communicator"},
    [MXI_E_TOO_MANY] = {-1, "mpix-acc: too many stream-ordered operations in flight "
                            "(MPIX_ACC_MAX_PENDING per process or MPIX_ACC_STREAM_DEPTH ahead "
                            "of one stream) and none completed for 10 s"},
    [MXI_E_OP] = {MPI_ERR_OP, "mpix-acc: reduction operation not supported stream-ordered"},
    [MXI_E_ROOT] = {MPI_ERR_ROOT, "mpix-acc: invalid root"},
};

static int mxi_err_codes[MXI_E_COUNT_OF_ERRORS];
static int mxi_errors_ready;

void mxi_errors_init(void)
{
    for (int e = 0; e < MXI_E_COUNT_OF_ERRORS; e++) {
        int cls = mxi_err_table[e].base_class;
        if (cls < 0) {
            if (PMPI_Add_error_class(&cls) != MPI_SUCCESS ||
                PMPI_Add_error_string(cls, mxi_err_table[e].text) != MPI_SUCCESS) {
                MXU_LOG(MXU_LOG_WARN,
                        "cannot register the error class \"%s\": "
                        "MPI_ERR_OTHER is returned instead",
                        mxi_err_table[e].text);
                cls = MPI_ERR_OTHER;
            }
        }
        mxi_err_codes[e] = cls;
    }
    mxi_errors_ready = 1;
}

int mxi_err_code(mxi_err_t e)
{
    if (!mxi_errors_ready)
        return mxi_err_table[e].base_class >= 0 ? mxi_err_table[e].base_class : MPI_ERR_OTHER;
    return mxi_err_codes[e];
}

int mxi_status_to_mpi(mxu_status_t st)
{
    switch (st) {
    case MXU_OK:
    case MXU_ERR_CANCELED:
        return MPI_SUCCESS;
    case MXU_ERR_TRUNCATED:
        return MPI_ERR_TRUNCATE;
    case MXU_ERR_INVALID_STREAM:
        return mxi_err_code(MXI_E_BAD_STREAM);
    case MXU_ERR_INVALID_PARAM:
        return mxi_err_code(MXI_E_ARG);
    case MXU_ERR_NO_MEMORY:
        return mxi_err_code(MXI_E_NO_MEM);
    case MXU_ERR_TIMED_OUT:
        return mxi_err_code(MXI_E_PENDING);
    case MXU_ERR_TRANSPORT:
    case MXU_ERR_PEER:
        return mxi_err_code(MXI_E_TRANSPORT);
    case MXU_ERR_NOT_READY:
        return mxi_err_code(MXI_E_NOT_ACTIVE);
    case MXU_ERR_UNSUPPORTED:
    case MXU_ERR_CAPTURED:
        return mxi_err_code(MXI_E_UNSUPPORTED);
    default:
        return mxi_err_code(MXI_E_INTERN);
    }
}

/* Error handlers run only between MPI_Init and MPI_Finalize: MPICH refuses
 * MPI_Comm_call_errhandler outside and ends the process with status 1, and
 * the library's classes do not exist then. NULL inside, else where we are. */
static const char *mxi_outside_mpi(void)
{
    int flag = 0;
    if (PMPI_Finalized(&flag) == MPI_SUCCESS && flag)
        return "after MPI_Finalize";
    if (PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
        return "before MPI_Init";
    return NULL;
}

int mxi_raise_code(MPI_Comm comm, int code)
{
    if (code == MPI_SUCCESS)
        return code;
    const char *outside = mxi_outside_mpi();
    if (outside) {
        MXU_LOG(MXU_LOG_WARN,
                "error %d %s: no MPI error handler can run then, "
                "MPI_ERR_OTHER returned",
                code, outside);
        return MPI_ERR_OTHER;
    }
    if (comm == MPI_COMM_NULL || !mxi_comm_find(comm))
        comm = MPI_COMM_SELF;
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int mxi_raise(MPI_Comm comm, mxi_err_t e, const char *fmt, ...)
{
    /* The returned code says only the class: the specifics are here. */
    const char *outside = mxi_outside_mpi();
    if (e == MXI_E_NOT_ACTIVE && !outside) {
        char call[96];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call, sizeof(call), fmt, ap);
        va_end(ap);
        mxi_link_order_check(call);
    }
    if (mxu_log_threshold >= MXU_LOG_WARN) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (outside)
            MXU_LOG(MXU_LOG_WARN,
                    "call %s (%s): no MPI error handler can run then, "
                    "MPI_ERR_OTHER returned",
                    outside, msg);
        else
            MXU_LOG(MXU_LOG_WARN, "%s: %s", mxi_err_table[e].text, msg);
    }
    return outside ? MPI_ERR_OTHER : mxi_raise_code(comm, mxi_err_code(e));
}

int mxi_error(mxi_err_t e, const char *fmt, ...)
{
    if (mxu_log_threshold >= MXU_LOG_INFO) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        MXU_LOG(MXU_LOG_INFO, "%s: %s", mxi_err_table[e].text, msg);
    }
    return mxi_err_code(e);
}
