/*
 * datatype.c - the datatype attribute (MPIX_ACC_STREAM_KEYVAL) and datatype
 * checks for stream-ordered operations (contiguous datatypes only).
 */
#include "interpose/interpose.h"

#include <stdint.h>

int MPIX_ACC_STREAM_KEYVAL = MPI_KEYVAL_INVALID;

/* A private communicator with MPI_ERRORS_RETURN, for checks that must not
 * trigger the application's error handlers. */
static MPI_Comm mxi_check_comm = MPI_COMM_NULL;

/* The attribute value is the stream handle itself. Copies (MPI_Type_dup)
 * carry it; every live copy is counted so the common path (no typed
 * streams anywhere) costs one atomic load. */
static int mxi_type_attr_copy(MPI_Datatype oldtype, int keyval, void *extra_state,
                              void *attribute_val_in, void *attribute_val_out, int *flag)
{
    (void)oldtype;
    (void)keyval;
    (void)extra_state;
    *(void **)attribute_val_out = attribute_val_in;
    *flag = 1;
    atomic_fetch_add(&mxi.typed_streams, 1);
    return MPI_SUCCESS;
}

static int mxi_type_attr_delete(MPI_Datatype type, int keyval, void *attribute_val,
                                void *extra_state)
{
    (void)type;
    (void)keyval;
    (void)attribute_val;
    (void)extra_state;
    atomic_fetch_sub(&mxi.typed_streams, 1);
    return MPI_SUCCESS;
}

void mxi_datatype_init(void)
{
    if (PMPI_Comm_dup(MPI_COMM_SELF, &mxi_check_comm) == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(mxi_check_comm, MPI_ERRORS_RETURN);
    else
        mxi_check_comm = MPI_COMM_NULL;
    if (PMPI_Type_create_keyval(mxi_type_attr_copy, mxi_type_attr_delete, &MPIX_ACC_STREAM_KEYVAL,
                                NULL) != MPI_SUCCESS) {
        MXU_LOG(MXU_LOG_ERROR, "cannot create MPIX_ACC_STREAM_KEYVAL");
        MPIX_ACC_STREAM_KEYVAL = MPI_KEYVAL_INVALID;
    }
}

void mxi_datatype_finalize(void)
{
    if (mxi_check_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&mxi_check_comm);
    if (MPIX_ACC_STREAM_KEYVAL != MPI_KEYVAL_INVALID)
        PMPI_Type_free_keyval(&MPIX_ACC_STREAM_KEYVAL);
}

/* A valid handle of a committed datatype: MPI_Pack_size checks both and
 * raises on mxi_check_comm (MPI_ERRORS_RETURN), so a bad handle runs no
 * application error handler here and the caller raises once, on the
 * operation's communicator. Calls without a communicator
 * (MPI_Type_get_envelope, MPI_Type_get_attr, ...) would raise on
 * MPI_COMM_WORLD's handler first: only valid handles reach them. */
static int mxi_datatype_committed(MPI_Datatype dt)
{
    int ni, na, nd, combiner, size;
    if (mxi_check_comm == MPI_COMM_NULL) /* no quiet check available */
        return PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) == MPI_SUCCESS;
    return PMPI_Pack_size(1, dt, mxi_check_comm, &size) == MPI_SUCCESS;
}

int MPI_Type_set_attr(MPI_Datatype type, int keyval, void *attribute_val)
{
    if (!mxi_on() || keyval != MPIX_ACC_STREAM_KEYVAL || keyval == MPI_KEYVAL_INVALID)
        return PMPI_Type_set_attr(type, keyval, attribute_val);
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(attribute_val, MPI_COMM_SELF, &s);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Type_set_attr(type, keyval, attribute_val);
    if (rc == MPI_SUCCESS)
        atomic_fetch_add(&mxi.typed_streams, 1); /* a replaced value was un-counted by delete */
    return rc;
}

int mxi_datatype_stream(MPI_Datatype dt, void **stream_handle)
{
    if (atomic_load_explicit(&mxi.typed_streams, memory_order_relaxed) <= 0 ||
        dt == MPI_DATATYPE_NULL)
        return 0;
    void *val = NULL;
    int flag = 0;
    /* a bad handle or uncommitted type goes the host path: the MPI library raises there */
    if (!mxi_datatype_committed(dt) ||
        PMPI_Type_get_attr(dt, MPIX_ACC_STREAM_KEYVAL, &val, &flag) != MPI_SUCCESS || !flag)
        return 0;
    *stream_handle = val;
    return 1;
}

/* Size, bounds and contiguity of dt: 0, or -1 (logged) when dt is not a
 * valid committed datatype. Contiguous: the bytes of one element are
 * dense, and elements abut. */
static int mxi_datatype_query(MPI_Datatype dt, int *size, int *contiguous, int quiet)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    if (dt == MPI_DATATYPE_NULL) {
        if (!quiet)
            MXU_LOG(MXU_LOG_WARN, "datatype argument: MPI_DATATYPE_NULL");
        return -1;
    }
    if (!mxi_datatype_committed(dt) || PMPI_Type_size(dt, size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &true_lb, &true_extent) != MPI_SUCCESS) {
        if (!quiet)
            MXU_LOG(MXU_LOG_WARN, "datatype argument: not a valid committed datatype");
        return -1;
    }
    *contiguous = *size == 0 || ((MPI_Aint)*size == extent && (MPI_Aint)*size == true_extent &&
                                 true_lb == 0 && lb == 0);
    if (!*contiguous && !quiet)
        MXU_LOG(MXU_LOG_DEBUG,
                "datatype argument: not contiguous (size %d, lower bound %ld, extent %ld, true "
                "lower bound %ld, true extent %ld)",
                *size, (long)lb, (long)extent, (long)true_lb, (long)true_extent);
    return 0;
}

int mxi_datatype_contiguous(MPI_Datatype dt)
{
    int size, contiguous;
    return mxi_datatype_query(dt, &size, &contiguous, 1) < 0 ? -1 : contiguous;
}

int mxi_datatype_bytes(MPI_Datatype dt, int count, size_t *bytes, int *contiguous)
{
    int size, contig;
    if (mxi_datatype_query(dt, &size, &contig, 0) < 0)
        return mxi_err_code(MXI_E_TYPE);
    if (!contig && !contiguous) {
        MXU_LOG(MXU_LOG_WARN, "datatype argument: not contiguous; this operation takes contiguous "
                              "datatypes only");
        return mxi_err_code(MXI_E_TYPE);
    }
    if (contiguous)
        *contiguous = contig;
    if (count > 0 && (size_t)size > SIZE_MAX / (size_t)count) {
        MXU_LOG(MXU_LOG_WARN, "count %d of a datatype of %d bytes: more than SIZE_MAX bytes", count,
                size);
        return mxi_err_code(MXI_E_COUNT);
    }
    *bytes = (size_t)size * (size_t)count;
    return MPI_SUCCESS;
}
