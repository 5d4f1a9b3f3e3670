/*
 * hoststream.c - the public host-stream calls (MPIX_Acc_Hoststream_create(3)
 * and its siblings), mapped to accel.
 */
#include "interpose/interpose.h"

static int mxi_host_result(mxu_status_t st, const char *what, const void *stream)
{
    if (st == MXU_OK)
        return MPI_SUCCESS;
    if (st == MXU_ERR_INVALID_STREAM)
        return mxi_raise(MPI_COMM_SELF, MXI_E_BAD_STREAM, "%s: stream %p", what, stream);
    if (st == MXU_ERR_INVALID_PARAM)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "%s: stream %p", what, stream);
    return mxi_raise_code(MPI_COMM_SELF, mxi_status_to_mpi(st));
}

int MPIX_Acc_Hoststream_create(MPIX_Acc_stream *stream)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_create");
    if (!stream)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "stream pointer argument is NULL");
    return mxi_host_result(mxa_host_stream_create(stream), "MPIX_Acc_Hoststream_create", NULL);
}

int MPIX_Acc_Hoststream_launch(MPIX_Acc_stream stream, void (*fn)(void *arg), void *arg)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_launch");
    if (!fn)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "MPIX_Acc_Hoststream_launch: function is NULL");
    return mxi_host_result(mxa_host_stream_launch(stream, fn, arg), "MPIX_Acc_Hoststream_launch",
                           stream);
}

int MPIX_Acc_Hoststream_synchronize(MPIX_Acc_stream stream)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_synchronize");
    mxi_reap(0);
    return mxi_host_result(mxa_host_stream_synchronize(stream), "MPIX_Acc_Hoststream_synchronize",
                           stream);
}

int MPIX_Acc_Hoststream_free(MPIX_Acc_stream *stream)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_free");
    if (!stream)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "stream pointer argument is NULL");
    int rc = mxi_host_result(mxa_host_stream_free(*stream), "MPIX_Acc_Hoststream_free", *stream);
    if (rc == MPI_SUCCESS)
        *stream = NULL;
    mxi_reap(0);
    return rc;
}
