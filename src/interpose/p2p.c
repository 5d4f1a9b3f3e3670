/*
 * p2p.c - point-to-point: the explicit MPIX_Acc_* calls, and the MPI_*
 * wrappers that route ordinary calls to the engine when the communicator is
 * a stream communicator or the datatype carries a stream.
 */
#include "interpose/interpose.h"
#include "interpose/typelayout.h"
#include "util/calltime.h"
#include "util/waiter.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* NVTX ranges of the enqueue calls (util/trace.h), on the calling thread:
 * every path (MPIX_Acc_*, stream communicators, stream datatypes) goes
 * through mxi_isend, mxi_irecv and the stream waits of request.c
 * (mxi_tn_wait); payload: the element count, or the number of requests. */
static mxu_trace_name_t mxi_tn_send = MXU_TRACE_NAME("enqueue send");
static mxu_trace_name_t mxi_tn_recv = MXU_TRACE_NAME("enqueue recv");
mxu_trace_name_t mxi_tn_wait = MXU_TRACE_NAME("enqueue stream wait");

int mxi_stream_resolve(void *handle, MPI_Comm comm, mxa_stream_t **out)
{
    if (!mxi_on())
        return mxi_raise(comm, MXI_E_NOT_ACTIVE, "stream %p", handle);
    mxu_status_t st = mxa_stream_lookup(handle, out);
    if (st == MXU_ERR_INVALID_STREAM)
        return mxi_raise(comm, MXI_E_BAD_STREAM, "stream %p", handle);
    if (st != MXU_OK)
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    return MPI_SUCCESS;
}

/* Returns 1 if stream-ordered (stream resolved into *s), 0 for the host
 * path, -1 if the datatype's stream is no longer valid (error raised; the
 * code is in *err). */
int mxi_route_checked(MPI_Comm comm, MPI_Datatype dt, mxa_stream_t **s, mxi_origin_t *origin,
                      int *err)
{
    if (!mxi_on())
        return 0;
    if (atomic_load_explicit(&mxi.stream_comms, memory_order_relaxed) > 0) {
        mxi_comm_t *c = mxi_comm_find(comm);
        if (c && c->stream) {
            *s = c->stream;
            *origin = MXI_ORIGIN_STREAMCOMM;
            return 1;
        }
    }
    void *handle;
    if (mxi_datatype_stream(dt, &handle)) {
        *err = mxi_stream_resolve(handle, comm, s);
        if (*err != MPI_SUCCESS)
            return -1;
        *origin = MXI_ORIGIN_DATATYPE;
        return 1;
    }
    return 0;
}

/* Checks shared by sends and receives. */
static int mxi_check_common(MPI_Comm comm, int count, MPI_Datatype dt, void *request_ptr,
                            mxi_comm_t **c, size_t *bytes, int *contiguous)
{
    if (!request_ptr)
        return mxi_raise(comm, MXI_E_REQUEST, "request argument is NULL");
    if (comm == MPI_COMM_NULL)
        return mxi_raise(MPI_COMM_NULL, MXI_E_COMM, "communicator argument is MPI_COMM_NULL");
    *c = mxi_comm_find(comm);
    if (!*c)
        return mxi_raise(MPI_COMM_NULL, MXI_E_COMM,
                         "communicator argument not known to the library (freed?)");
    if (!(*c)->supported)
        return mxi_raise(comm, MXI_E_COMM_UNSUPPORTED, "communicator");
    if (count < 0)
        return mxi_raise(comm, MXI_E_COUNT, "count %d (must be >= 0)", count);
    int rc = mxi_datatype_bytes(dt, count, bytes, contiguous);
    if (rc != MPI_SUCCESS)
        return mxi_raise_code(comm, rc);
    return MPI_SUCCESS;
}

/* Back-pressure, before a stream-ordered operation is created or a stream
 * wait enqueued, in two limits; beyond either the call waits (sleeping, no
 * driver call, no lock held), like a full CUDA stream queue:
 *  - MPIX_ACC_MAX_PENDING operations alive in the process (each holds an MPI
 *    generalized request until it completed and the application let go of
 *    it; MPICH ch4 aborts near 128k live requests);
 *  - MPIX_ACC_STREAM_DEPTH points ahead of the stream s (CUDA and host
 *    streams alike). CUDA streams need it: an application enqueuing far
 *    ahead of a stream wait fills the driver's queue, its thread then blocks
 *    inside cuLaunchKernel holding a driver lock that the progress thread's
 *    next CUDA call (UCX's cuEventRecord) needs, and the wait is never
 *    released (2xH200, test/gpu/default_streams at 300 iterations).
 * Gives up with MXI_E_TOO_MANY after 10 s in which neither count went down.
 * s may be NULL (no stream limit). A stream wait passes new_request 0: it
 * creates no request (it is what lets requests go), only the depth counts. */

/* Points s is ahead, for the depth limit: the lock-free count, and the
 * capture check (a driver call) only when that count reaches the limit. */
static long mxi_ahead(mxa_stream_t *s, long depth)
{
    if (depth <= 0)
        return 0;
    long n = mxe_stream_points_ahead(s);
    return n < depth ? n : mxe_stream_backlog(s);
}

static int mxi_under_limits(long live, long limit, long ahead, long depth)
{
    return live < limit && (depth <= 0 || ahead < depth);
}

static int mxi_throttle_wait(MPI_Comm comm, mxa_stream_t *s, long limit, long depth, long live,
                             long ahead);

int mxi_throttle(MPI_Comm comm, mxa_stream_t *s, int new_request)
{
    long limit = !new_request ? LONG_MAX : mxu_config.max_pending > 0 ? mxu_config.max_pending : 1;
    long depth = mxu_config.stream_depth;
    long live = atomic_load_explicit(&mxi.greqs_alive, memory_order_relaxed);
    long ahead = mxi_ahead(s, depth);
    if (mxi_under_limits(live, limit, ahead, depth))
        return MPI_SUCCESS;
    uint64_t t = mxu_ct_inner_begin();
    int rc = mxi_throttle_wait(comm, s, limit, depth, live, ahead);
    mxu_ct_inner_end(MXU_CT_THROTTLE, t);
    return rc;
}

static int mxi_throttle_wait(MPI_Comm comm, mxa_stream_t *s, long limit, long depth, long live,
                             long ahead)
{
    struct timespec ts = {0, 2000};
    long best_live = live, best_ahead = ahead;
    double waited = 0, since_progress = 0;
    for (;;) {
        mxi_reap(1); /* every completed one the application let go of */
        live = atomic_load_explicit(&mxi.greqs_alive, memory_order_relaxed);
        ahead = mxi_ahead(s, depth);
        if (mxi_under_limits(live, limit, ahead, depth))
            break;
        if (live < best_live || ahead < best_ahead) {
            best_live = live < best_live ? live : best_live;
            best_ahead = ahead < best_ahead ? ahead : best_ahead;
            since_progress = 0;
        }
        if (since_progress > 10.0) {
            if (live >= limit)
                return mxi_raise(comm, MXI_E_TOO_MANY, "%ld operations in flight (limit %ld)", live,
                                 limit);
            return mxi_raise(comm, MXI_E_TOO_MANY,
                             "stream %p is %ld stream points behind (limit %ld)", s->handle, ahead,
                             depth);
        }
        nanosleep(&ts, NULL);
        double d = (double)ts.tv_nsec * 1e-9;
        waited += d;
        since_progress += d;
        if (ts.tv_nsec < 1000000)
            ts.tv_nsec *= 2;
    }
    if (waited > 1.0)
        MXU_LOG(MXU_LOG_INFO,
                "waited %.1f s for stream-ordered operations to complete "
                "(MPIX_ACC_MAX_PENDING=%d, MPIX_ACC_STREAM_DEPTH=%ld)",
                waited, (int)mxu_config.max_pending, depth);
    return MPI_SUCCESS;
}

_Thread_local mxe_op_t **mxi_internal_op;

/* op without an MPI handle (mxi_internal_op): the caller's reference goes
 * to *out, which its stream wait hands to the reaper */
static int mxi_submit_internal(mxe_op_t *op, MPI_Comm comm, mxe_op_t **out, MPI_Request *req)
{
    op->user_flags |= MXI_OPF_INTERNAL | MXI_OPF_GREQ_COMPLETED;
    atomic_fetch_add_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
    uint64_t t = mxu_ct_inner_begin();
    mxu_status_t st = mxe_op_submit(op);
    mxu_ct_inner_end(MXU_CT_SUBMIT, t);
    if (st != MXU_OK) {
        atomic_fetch_sub_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
        mxe_op_release(op); /* the engine's: it never got the op */
        mxe_op_release(op);
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    *out = op;
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* Create the generalized request for op and hand op to the engine. */
int mxi_submit(mxe_op_t *op, mxi_origin_t origin, MPI_Comm comm, MPI_Request *req)
{
    MPI_Request greq;
    int trc = mxi_throttle(comm, op->stream, 1);
    if (trc != MPI_SUCCESS) {
        mxe_op_release(op);
        mxe_op_release(op);
        return trc;
    }
    op->user_origin = (int)origin;
    memcpy(&op->user_aux, &comm,
           sizeof(comm) < sizeof(op->user_aux) ? sizeof(comm) : sizeof(op->user_aux));
    if (mxi_internal_op) {
        mxe_op_t **out = mxi_internal_op;
        mxi_internal_op = NULL; /* one op per request for it */
        return mxi_submit_internal(op, comm, out, req);
    }
    uint64_t t = mxu_ct_inner_begin();
    int rc = PMPI_Grequest_start(mxi_greq_query, mxi_greq_free, mxi_greq_cancel, op, &greq);
    if (rc != MPI_SUCCESS) {
        mxe_op_release(op);
        mxe_op_release(op);
        return mxi_raise_code(comm, rc);
    }
    atomic_fetch_add_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
    memcpy(&op->user_handle, &greq,
           sizeof(greq) < sizeof(op->user_handle) ? sizeof(greq) : sizeof(op->user_handle));
    mxi_request_track(greq, op);
    mxu_ct_inner_end(MXU_CT_REQUEST, t);
    t = mxu_ct_inner_begin();
    mxu_status_t st = mxe_op_submit(op);
    mxu_ct_inner_end(MXU_CT_SUBMIT, t);
    if (st != MXU_OK) {
        mxu_locked_map_remove(&mxi.requests, MXI_REQ_KEY(greq));
        mxe_op_release(op); /* the engine's reference: it never got the op */
        op->user_flags |= MXI_OPF_GREQ_COMPLETED;
        PMPI_Grequest_complete(greq);
        PMPI_Request_free(&greq); /* drops the caller's reference */
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    *req = greq;
    return MPI_SUCCESS;
}

/* MPICH's rule for a NULL buffer: an error when there is data to move and
 * the datatype's true lower bound is 0; a type with absolute addresses
 * (true lower bound != 0) is used with MPI_BOTTOM, which is NULL. */
static int mxi_check_buffer(MPI_Comm comm, const void *buf, int count, MPI_Datatype dt,
                            const char *what)
{
    if (buf != NULL || count == 0)
        return MPI_SUCCESS;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_get_true_extent(dt, &lb, &extent) == MPI_SUCCESS && lb != 0)
        return MPI_SUCCESS;
    return mxi_raise(comm, MXI_E_BUFFER, "%s buffer is NULL with count %d", what, count);
}

static int mxi_isend_(mxa_stream_t *s, mxi_origin_t origin, const void *buf, int count,
                      MPI_Datatype dt, int dest, int tag, MPI_Comm comm, int synchronous,
                      MPI_Request *req);
static int mxi_irecv_(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count, MPI_Datatype dt,
                      int source, int tag, MPI_Comm comm, MPI_Request *req);

int mxi_isend(mxa_stream_t *s, mxi_origin_t origin, const void *buf, int count, MPI_Datatype dt,
              int dest, int tag, MPI_Comm comm, int synchronous, MPI_Request *req)
{
    uint64_t t = mxu_ct_begin();
    mxu_trace_push(&mxi_tn_send, count > 0 ? (uint64_t)count : 0);
    int rc = mxi_isend_(s, origin, buf, count, dt, dest, tag, comm, synchronous, req);
    mxu_trace_pop();
    mxu_ct_end(MXU_CT_SEND, t);
    return rc;
}

int mxi_irecv(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count, MPI_Datatype dt,
              int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    uint64_t t = mxu_ct_begin();
    mxu_trace_push(&mxi_tn_recv, count > 0 ? (uint64_t)count : 0);
    int rc = mxi_irecv_(s, origin, buf, count, dt, source, tag, comm, req);
    mxu_trace_pop();
    mxu_ct_end(MXU_CT_RECV, t);
    return rc;
}

/* A send's arguments (also checked by MPI_Send_init, persist.c). With
 * contiguous NULL a non-contiguous datatype is an error, else *contiguous
 * says whether dt is (the same for receives). */
static int mxi_send_args(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                         MPI_Comm comm, MPI_Request *req, mxi_comm_t **cp, size_t *bytes,
                         int *contiguous)
{
    int rc = mxi_check_common(comm, count, dt, req, cp, bytes, contiguous);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_comm_t *c = *cp;
    if ((rc = mxi_check_buffer(comm, buf, count, dt, "send")) != MPI_SUCCESS)
        return rc;
    if (dest != MPI_PROC_NULL && (dest < 0 || dest >= c->ec.size))
        return mxi_raise(comm, MXI_E_RANK, "destination %d (valid: 0..%d or MPI_PROC_NULL)", dest,
                         c->ec.size - 1);
    if (tag < 0 || tag > MXE_TAG_MAX)
        return mxi_raise(comm, MXI_E_TAG, "send tag %d (valid: 0..%d)", tag, MXE_TAG_MAX);
    return MPI_SUCCESS;
}

/* A receive's arguments (also checked by MPI_Recv_init, persist.c). */
static int mxi_recv_args(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                         MPI_Request *req, mxi_comm_t **cp, size_t *bytes, int *contiguous)
{
    int rc = mxi_check_common(comm, count, dt, req, cp, bytes, contiguous);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_comm_t *c = *cp;
    if ((rc = mxi_check_buffer(comm, buf, count, dt, "receive")) != MPI_SUCCESS)
        return rc;
    if ((source == MPI_ANY_SOURCE && c->no_any_source) || (tag == MPI_ANY_TAG && c->no_any_tag))
        return mxi_raise(comm, MXI_E_ARG, "%s receive on a communicator with %s=true",
                         source == MPI_ANY_SOURCE ? "MPI_ANY_SOURCE" : "MPI_ANY_TAG",
                         source == MPI_ANY_SOURCE && c->no_any_source ? "mpi_assert_no_any_source"
                                                                      : "mpi_assert_no_any_tag");
    if (source != MPI_PROC_NULL && source != MPI_ANY_SOURCE && (source < 0 || source >= c->ec.size))
        return mxi_raise(comm, MXI_E_RANK,
                         "source %d (valid: 0..%d, MPI_ANY_SOURCE or "
                         "MPI_PROC_NULL)",
                         source, c->ec.size - 1);
    if (tag != MPI_ANY_TAG && (tag < 0 || tag > MXE_TAG_MAX))
        return mxi_raise(comm, MXI_E_TAG, "receive tag %d (valid: 0..%d or MPI_ANY_TAG)", tag,
                         MXE_TAG_MAX);
    return MPI_SUCCESS;
}

static int mxi_packed_layout(MPI_Comm comm, MPI_Datatype dt, int count, mxi_layout_t **l,
                             uint64_t *bytes);

int mxi_p2p_check(int is_send, const void *buf, int count, MPI_Datatype dt, int peer, int tag,
                  MPI_Comm comm, MPI_Request *req)
{
    mxi_comm_t *c;
    size_t bytes;
    int contiguous = 1;
    int rc = is_send ? mxi_send_args(buf, count, dt, peer, tag, comm, req, &c, &bytes, &contiguous)
                     : mxi_recv_args((void *)(uintptr_t)buf, count, dt, peer, tag, comm, req, &c,
                                     &bytes, &contiguous);
    if (rc != MPI_SUCCESS || contiguous || count == 0)
        return rc;
    /* a non-contiguous type: the layout each start will pack with */
    mxi_layout_t *l;
    uint64_t packed;
    rc = mxi_packed_layout(comm, dt, count, &l, &packed);
    if (rc == MPI_SUCCESS)
        mxi_layout_put(l);
    return rc;
}

/* ------------------------------------------------- derived datatypes
 * A non-contiguous datatype (issue 20 item 1): the operation moves its
 * packed bytes as a contiguous message. The layout (typelayout.h) is the
 * type's cached chunk list: the type may be freed meanwhile.
 *
 * Host memory (host streams, and host buffers on CUDA streams): the packed
 * bytes are a heap buffer of the library's. A send packs on its stream
 * right before the send (mxa_stream_host_call: in stream order, whichever
 * path the message then takes); a receive unpacks when it completes (the
 * progress thread, before the completion is published: a stream wait on
 * it keeps its wait point, so the stream continues after the unpack).
 *
 * Device or managed memory on a CUDA stream: the packed bytes are device
 * memory (accel's temp blocks) and the CUDA pack kernel moves them, with
 * the chunk list uploaded once per layout and context. A send gathers on
 * its stream right before the send. A receive is unpacked once, by whoever
 * comes first (unpack_state, compare-and-swap): a stream wait enqueues the
 * scatter kernel on the waiting stream behind its wait (the engine's
 * user_stream_wait hook; the kernel reads the received length from the
 * block's host-visible word, which the progress thread writes at
 * completion, before the wait is released); a receive that completes with
 * no stream wait yet (host waits and tests, freed requests) is scattered on
 * the context's library stream, and its completion is published once that
 * kernel is done (the engine's user_finish; the progress thread goes on
 * meanwhile). The block goes back in the order of the stream that used it
 * last. */
typedef struct {
    int refs; /* atomic: the op, and a pack step not yet run */
    mxi_layout_t *layout;
    void *user_buf;
    int count;
    void *packed;
    /* unpacking behind a stream wait: device packing (dev), or a host
     * stream's receive (behind_wait: a host call on the waiting stream) */
    int dev, behind_wait;
    int host_block;            /* dev: the block is pinned host memory (network staging) */
    uint64_t limit_store;      /* behind_wait: the word limit points to */
    void *ctx;                 /* the stream's device context */
    void *chunks;              /* the layout's chunks in ctx's memory */
    size_t got;                /* the temp block's size */
    uint64_t *limit;           /* its host-visible word: a receive's length */
    uint64_t *dev_word;        /* dev, device block: a device word after the bytes (the
                                * length, written by a stream-executed receive step) */
    _Atomic int unpack_state;  /* 0; 3: reserved for a stream wait to come (the library's own
                                * blocking calls); 1: a stream wait unpacks; 2: the progress
                                * thread unpacks, or hands it to a library stream */
    const mxa_stream_t *order; /* the stream the block goes back in the order of */
    /* an unpack on a library stream, which the receive's completion waits
     * for (mxi_unpack_finish): */
    mxa_dev_job_t *job;   /* device: the kernel's job */
    int dev_lost;         /* device: the job never finished: the block is not reused */
    size_t job_bytes;     /* host: the received length */
    _Atomic int job_done; /* host: set by the library host stream's step */
    /* the pack (send) or unpack (receive) an SX step may fuse (op->sx_pack):
     * the chunks in the memory of the stream's executor */
    mxa_pack_args_t fuse;
} mxi_packed_t;

static void mxi_packed_put(void *p)
{
    mxi_packed_t *pk = p;
    if (pk && __atomic_sub_fetch(&pk->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        mxi_layout_put(pk->layout);
        if (pk->dev && !pk->dev_lost)
            mxa_dev_temp_put(pk->ctx, pk->packed, pk->got, pk->host_block, pk->limit, pk->order);
        else if (!pk->dev)
            free(pk->packed);
        free(pk);
    }
}

static void mxi_pack_step(void *arg)
{
    mxi_packed_t *pk = arg;
    mxi_layout_pack(pk->layout, pk->user_buf, pk->count, pk->packed);
    mxi_packed_put(pk);
}

mxa_pack_args_t mxi_layout_pack_args(const mxi_layout_t *l, void *user_buf, void *packed,
                                     void *chunks, int count, int unpack)
{
    if (mxi_layout_contiguous(l)) { /* 256-byte pieces, a warp each */
        uint64_t total = mxi_layout_bytes(l, count);
        return (mxa_pack_args_t){.buf = (uint64_t)(uintptr_t)user_buf,
                                 .packed = (uint64_t)(uintptr_t)packed,
                                 .chunks = 0,
                                 .nchunks = 1,
                                 .count = (total + 255) / 256,
                                 .extent = 256,
                                 .size = 256,
                                 .limit = total,
                                 .unpack = unpack};
    }
    return (mxa_pack_args_t){.buf = (uint64_t)(uintptr_t)user_buf,
                             .packed = (uint64_t)(uintptr_t)packed,
                             .chunks = (uint64_t)(uintptr_t)chunks,
                             .nchunks = l->n,
                             .count = (uint64_t)(count > 0 ? count : 0),
                             .extent = l->extent,
                             .size = l->size,
                             .limit = mxi_layout_bytes(l, count),
                             .unpack = unpack,
                             .reg_len = l->reg_len,
                             .reg_off = l->reg_off,
                             .reg_stride = l->reg_stride};
}

static mxa_pack_args_t mxi_pack_args(const mxi_packed_t *pk, int unpack)
{
    return mxi_layout_pack_args(pk->layout, pk->user_buf, pk->packed, pk->chunks, pk->count,
                                unpack);
}

/* host-stream unpack behind a stream wait (a host call on the waiting
 * stream): the length the progress thread stored at completion */
static void mxi_unpack_step(void *arg)
{
    mxi_packed_t *pk = arg;
    uint64_t n = __atomic_load_n(pk->limit, __ATOMIC_ACQUIRE);
    mxi_layout_unpack(pk->layout, pk->packed, n, pk->user_buf, pk->count);
    mxi_packed_put(pk);
}

/* the library host stream's unpack (mxi_unpack_on_complete) */
static void mxi_unpack_job_step(void *arg)
{
    mxi_packed_t *pk = arg;
    mxi_layout_unpack(pk->layout, pk->packed, pk->job_bytes, pk->user_buf, pk->count);
    atomic_store_explicit(&pk->job_done, 1, memory_order_release);
    mxi_packed_put(pk);
}

/* The engine's user_finish: 1 once the library stream's unpack is done. */
static int mxi_unpack_finish(mxe_op_t *op, int block)
{
    mxi_packed_t *pk = op->user;
    mxu_status_t st = MXU_OK;
    if (pk->job) {
        st = mxa_dev_job_done(pk->job, block);
        if (st == MXU_ERR_BUSY)
            return 0;
        if (st == MXU_ERR_TIMED_OUT)
            pk->dev_lost = 1; /* the kernel may still read the block */
        pk->job = NULL;       /* done, or failed (logged): freed */
    } else if (!atomic_load_explicit(&pk->job_done, memory_order_acquire)) {
        if (!block)
            return 0;
        uint64_t t0 = mxu_now_ns();
        while (!atomic_load_explicit(&pk->job_done, memory_order_acquire)) {
            if (mxu_now_ns() - t0 > 10000000000ull) {
                MXU_LOG(MXU_LOG_ERROR,
                        "the library host stream did not unpack a receive of a non-contiguous "
                        "datatype (peer %d, tag %d) in 10 s: its buffer may not be written",
                        op->result.source, op->result.tag);
                st = MXU_ERR_TIMED_OUT;
                break;
            }
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    if (st != MXU_OK && op->result.error == MXU_OK)
        op->result.error = st == MXU_ERR_TIMED_OUT ? st : MXU_ERR_NO_DEVICE;
    return 1;
}

/* The unpack of a receive that completed with no stream wait on it yet
 * (host waits and tests, freed requests, a wait still to come) and of
 * every host-memory receive on a CUDA stream: the progress thread hands it
 * to a library stream and the completion is published once that is done
 * (mxi_unpack_finish), so the progress thread never waits for a device --
 * a kernel queued behind a stream that waits for the progress thread would
 * never run (compute-sanitizer runs one kernel at a time) -- nor scatters
 * a large message itself. Small host messages it unpacks at once. */
static void mxi_unpack_on_complete(mxe_op_t *op)
{
    mxi_packed_t *pk = op->user;
    if (pk->dev || pk->behind_wait) {
        /* the length first: a stream that claimed the unpack reads it once
         * the completion (published after this) releases its wait */
        __atomic_store_n(pk->limit, (uint64_t)op->result.bytes, __ATOMIC_RELEASE);
        int zero = 0;
        if (!atomic_compare_exchange_strong(&pk->unpack_state, &zero, 2))
            return; /* a stream wait enqueued the unpack, or will */
    }
    if (!pk->dev) {
        mxa_stream_t *lib = op->result.bytes >= mxu_config.unpack_offload_bytes
                                ? mxa_library_host_stream(NULL)
                                : NULL;
        if (lib) {
            pk->job_bytes = op->result.bytes;
            __atomic_fetch_add(&pk->refs, 1, __ATOMIC_RELAXED); /* the step's */
            if (mxa_stream_host_call(lib, mxi_unpack_job_step, pk) == MXU_OK) {
                op->user_finish = mxi_unpack_finish;
                return;
            }
            mxi_packed_put(pk);
        }
        mxi_layout_unpack(pk->layout, pk->packed, op->result.bytes, pk->user_buf, pk->count);
        return;
    }
    pk->order = NULL; /* the block is free once the job is done */
    if (op->result.error != MXU_OK)
        return;
    mxa_pack_args_t a = mxi_pack_args(pk, 1);
    a.limit = op->result.bytes;
    if (mxa_dev_pack_start(pk->ctx, &a, &pk->job) != MXU_OK)
        op->result.error = MXU_ERR_NO_DEVICE; /* logged there */
    else if (pk->job)
        op->user_finish = mxi_unpack_finish;
}

static void mxi_unpack_on_stream_wait(mxe_op_t *op, mxa_stream_t *s)
{
    mxi_packed_t *pk = op->user;
    int from = 0, reserved = 3;
    if (!atomic_compare_exchange_strong(&pk->unpack_state, &from, 1) &&
        !atomic_compare_exchange_strong(&pk->unpack_state, &reserved, 1))
        return;                   /* the progress thread unpacked it already */
    if (op->sx_pack_state == 1) { /* the receive step on s unpacks */
        if (pk->dev)
            pk->order = s;
        return;
    }
    mxu_status_t st;
    if (pk->dev) {
        mxa_pack_args_t a = mxi_pack_args(pk, 1);
        /* the length: written by the receive step on this stream, or by the
         * progress thread into the host word before the wait is released */
        int by_step = op->sx_len_stepped && pk->dev_word;
        a.limit_at = (uint64_t)(uintptr_t)(by_step ? pk->dev_word : pk->limit);
        a.limit_dev = by_step;
        pk->order = s;
        st = mxa_stream_pack(s, &a);
    } else {
        __atomic_fetch_add(&pk->refs, 1, __ATOMIC_RELAXED); /* the step's */
        st = mxa_stream_host_call(s, mxi_unpack_step, pk);
        if (st != MXU_OK)
            mxi_packed_put(pk);
    }
    if (st != MXU_OK)
        MXU_LOG(MXU_LOG_ERROR,
                "a receive of a non-contiguous datatype (peer %d, tag %d) could "
                "not be unpacked on its stream: its buffer is not written",
                op->peer, op->tag);
}

/* Set around the library's own receive-then-stream-wait calls (MPI_Recv,
 * MPI_Sendrecv, MPI_Sendrecv_replace on a stream): the unpack is reserved
 * for the stream wait that follows (in that stream's order, no library
 * stream in between). */
static _Thread_local int mxi_recv_stream_waited;

/* The layout of count elements of the non-contiguous dt (one reference)
 * and their packed size, at most INT_MAX bytes (a status counts them). */
static int mxi_packed_layout(MPI_Comm comm, MPI_Datatype dt, int count, mxi_layout_t **l,
                             uint64_t *bytes)
{
    int rc = mxi_layout_get(dt, l);
    if (rc != MPI_SUCCESS)
        return mxi_raise(comm, rc == MPI_ERR_NO_MEM ? MXI_E_NO_MEM : MXI_E_TYPE,
                         "no stream-ordered layout for this datatype's constructor");
    *bytes = mxi_layout_bytes(*l, count);
    if (*bytes > (uint64_t)INT_MAX) {
        mxi_layout_put(*l);
        return mxi_raise(comm, MXI_E_COUNT,
                         "%d elements of a non-contiguous datatype: %llu packed bytes (at most %d)",
                         count, (unsigned long long)*bytes, INT_MAX);
    }
    return MPI_SUCCESS;
}

/* The layout's chunks in device memory of ctx (uploaded at the first use
 * there; a layout keeps one context's copy, others get one per call --
 * kept, like all the library's device memory, to the end). */
static pthread_mutex_t mxi_chunks_lock = PTHREAD_MUTEX_INITIALIZER;

void *mxi_layout_dev_chunks(mxi_layout_t *l, void *ctx, int upload)
{
    pthread_mutex_lock(&mxi_chunks_lock);
    void *d = l->dev_ctx == ctx ? l->dev_chunks : NULL;
    pthread_mutex_unlock(&mxi_chunks_lock);
    if (d || !upload)
        return d;
    if (mxa_dev_upload(ctx, l->c, sizeof(l->c[0]) * (l->n ? l->n : 1), &d) != MXU_OK)
        d = NULL;
    pthread_mutex_lock(&mxi_chunks_lock);
    if (d && !l->dev_ctx) {
        l->dev_ctx = ctx;
        l->dev_chunks = d;
    }
    pthread_mutex_unlock(&mxi_chunks_lock);
    return d;
}

/* *pk (one reference) for count elements of layout l (the caller's
 * reference passes to it) at buf, `bytes` packed: the operation moves them
 * from or into pk->packed. Device and managed buffers on a CUDA stream get
 * a block of the library's: device memory, or pinned host memory when
 * host_block (staged for the network). */
static int mxi_packed_make(mxa_stream_t *s, MPI_Comm comm, const void *buf, mxi_layout_t *l,
                           int count, uint64_t bytes, int host_block, mxi_packed_t **pk)
{
    *pk = NULL;
    const char *what =
        host_block ? "a message staged through host memory" : "a non-contiguous datatype's packing";
    mxi_packed_t *p = calloc(1, sizeof(*p));
    if (!p) {
        mxi_layout_put(l);
        return mxi_raise(comm, MXI_E_NO_MEM, "%s", what);
    }
    p->dev = s->kind == MXA_KIND_CUDA && buf && mxa_memtype(buf, 1) != MXA_MEM_HOST;
    if (p->dev) {
        p->host_block = host_block;
        p->ctx = mxa_stream_device_ctx(s);
        /* contiguous bytes need no chunk list (mxi_pack_args) */
        int need_chunks = !mxi_layout_contiguous(l);
        p->chunks = p->ctx && need_chunks ? mxi_layout_dev_chunks(l, p->ctx, 1) : NULL;
        if (!p->ctx || (need_chunks && !p->chunks) ||
            mxa_dev_temp_get(p->ctx, s, bytes ? (size_t)bytes : 1, host_block, &p->packed, &p->got,
                             &p->limit) != MXU_OK) {
            free(p);
            mxi_layout_put(l);
            return mxi_raise(comm, MXI_E_NO_MEM, "%llu bytes of %s memory for %s",
                             (unsigned long long)bytes, host_block ? "pinned host" : "device",
                             what);
        }
        p->order = s;
        if (!host_block) /* accel's device blocks end with a device word */
            p->dev_word = (uint64_t *)((char *)p->packed + p->got);
        if (mxi_recv_stream_waited)
            atomic_store_explicit(&p->unpack_state, 3, memory_order_relaxed);
    } else {
        p->packed = malloc(bytes ? (size_t)bytes : 1);
        if (!p->packed) {
            free(p);
            mxi_layout_put(l);
            return mxi_raise(comm, MXI_E_NO_MEM, "%llu bytes for %s", (unsigned long long)bytes,
                             what);
        }
        /* a host stream's receive unpacks behind its stream wait as the
         * device path does (the same claim; how CI runs that logic) */
        p->behind_wait = s->kind == MXA_KIND_HOST;
        p->limit = &p->limit_store;
        if (p->behind_wait && mxi_recv_stream_waited)
            atomic_store_explicit(&p->unpack_state, 3, memory_order_relaxed);
    }
    __atomic_store_n(&p->refs, 1, __ATOMIC_RELAXED);
    p->layout = l;
    p->user_buf = (void *)(uintptr_t)buf;
    p->count = count;
    *pk = p;
    return MPI_SUCCESS;
}

/* For count elements of the non-contiguous dt at buf (arguments checked):
 * *pk with the packed buffer (one reference); the operation moves its
 * `bytes` (the datatype's size times count) from or into it. */
static int mxi_packed_begin(mxa_stream_t *s, MPI_Comm comm, const void *buf, int count,
                            MPI_Datatype dt, mxi_packed_t **pk)
{
    *pk = NULL;
    mxi_layout_t *l;
    uint64_t bytes;
    int rc = mxi_packed_layout(comm, dt, count, &l, &bytes);
    if (rc != MPI_SUCCESS)
        return rc;
    return mxi_packed_make(s, comm, buf, l, count, bytes, 0, pk);
}

/* ------------------------------------------- staging for the network
 * Issue 22 item 1: a contiguous message of at most MPIX_ACC_NET_STAGE_BYTES
 * to or from a process of another node travels through a library buffer
 * in host memory, as the packed bytes of a non-contiguous one do (the same
 * code with a layout of plain bytes): the send's stream copies a device
 * buffer into a pinned host block (the pack kernel, writing host memory)
 * before its point, so UCX sends host memory eagerly (no rendezvous, no
 * cuda_copy on the progress thread); the receive lands in a pinned block
 * and its stream copies the bytes out behind its wait. */
static atomic_ullong mxi_net_staged_sent, mxi_net_staged_received;

void mxi_net_stage_counts(unsigned long long *sent, unsigned long long *received)
{
    *sent = atomic_load_explicit(&mxi_net_staged_sent, memory_order_relaxed);
    *received = atomic_load_explicit(&mxi_net_staged_received, memory_order_relaxed);
}

/* A process known to be on another node (not when the node's processes
 * are unknown: then nothing is staged by auto). */
static int mxi_world_remote(int w)
{
    return mxe_node_known() && w != mxi.world_rank && !mxe_world_on_node(w);
}

/* Has the communicator a member on another node (cached)? */
static int mxi_comm_has_remote(mxi_comm_t *c)
{
    int v = atomic_load_explicit(&c->remote_members, memory_order_relaxed);
    if (v == 0) {
        v = 1;
        for (int r = 0; r < c->ec.size && v == 1; r++)
            if (mxi_world_remote(c->ec.world_ranks ? c->ec.world_ranks[r] : r))
                v = 2;
        atomic_store_explicit(&c->remote_members, v, memory_order_relaxed);
    }
    return v == 2;
}

static int mxi_net_stage(const mxa_stream_t *s, mxi_comm_t *c, const void *buf, size_t bytes,
                         int peer)
{
    if (bytes == 0 || bytes > mxu_config.net_stage_bytes || peer == MPI_PROC_NULL ||
        strcmp(mxu_config.net_stage, "off") == 0)
        return 0;
    if (strcmp(mxu_config.net_stage, "all") == 0)
        return 1;
    if (s->kind != MXA_KIND_CUDA || !buf)
        return 0;
    int remote = peer == MPI_ANY_SOURCE
                     ? mxi_comm_has_remote(c)
                     : mxi_world_remote(c->ec.world_ranks ? c->ec.world_ranks[peer] : peer);
    /* the memory type last: a driver query, on the path of every call */
    return remote && mxa_memtype(buf, 1) != MXA_MEM_HOST;
}

/* The packed buffer of a call whose arguments passed (rc MPI_SUCCESS): a
 * non-contiguous type's, or a staged contiguous message's (*staged), or
 * none (*pk NULL). */
static int mxi_packing_begin_(mxa_stream_t *s, mxi_comm_t *c, MPI_Comm comm, const void *buf,
                              int count, MPI_Datatype dt, size_t bytes, int contiguous, int peer,
                              mxi_packed_t **pk, int *staged)
{
    *pk = NULL;
    *staged = contiguous && mxi_net_stage(s, c, buf, bytes, peer);
    if (!contiguous)
        return mxi_packed_begin(s, comm, buf, count, dt, pk);
    if (!*staged)
        return MPI_SUCCESS;
    mxi_layout_t *l = mxi_layout_bytes_get();
    if (!l)
        return mxi_raise(comm, MXI_E_NO_MEM, "a message staged through host memory");
    return mxi_packed_make(s, comm, buf, l, (int)bytes, bytes, 1, pk);
}

/* mxi_packing_begin_, timed (MPIX_ACC_STATS) */
static int mxi_packing_begin(mxa_stream_t *s, mxi_comm_t *c, MPI_Comm comm, const void *buf,
                             int count, MPI_Datatype dt, size_t bytes, int contiguous, int peer,
                             mxi_packed_t **pk, int *staged)
{
    uint64_t t = mxu_ct_inner_begin();
    int rc = mxi_packing_begin_(s, c, comm, buf, count, dt, bytes, contiguous, peer, pk, staged);
    mxu_ct_inner_end(MXU_CT_PACKING, t);
    return rc;
}

/* An operation with MPI_PROC_NULL (arguments checked) on a communicator
 * that matches in call order: nothing to move and nothing to order, so
 * nothing is enqueued and no operation made (issue 16: the stencil's
 * edges are 6 of its 8 calls per step). A generalized request completed
 * at once carries MPI's status (source MPI_PROC_NULL, tag MPI_ANY_TAG,
 * count 0) to every wait and test, on the host or in a stream wait
 * (request.c: requests that are not the library's complete there). Not
 * the MPI library's own MPI_PROC_NULL request: MPICH 4.0.2's reports
 * source 0 in its status (test/mpi/matching). */
void mxi_proc_null_status(MPI_Status *st)
{
    PMPI_Status_set_elements_x(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_PROC_NULL;
    st->MPI_TAG = MPI_ANY_TAG;
}

static int mxi_proc_null_query(void *extra, MPI_Status *st)
{
    (void)extra;
    mxi_proc_null_status(st);
    return MPI_SUCCESS;
}

static int mxi_proc_null_free(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int mxi_proc_null_cancel(void *extra, int complete)
{
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

/* A send or receive on a capturing stream (graph.c): a non-contiguous
 * datatype is captured with its layout (the graph packs and unpacks on the
 * stream: design.md 6d). */
static int mxi_graph_p2p_typed(mxa_stream_t *s, mxi_origin_t origin, int is_send, void *buf,
                               int count, MPI_Datatype dt, size_t bytes, int contiguous, int peer,
                               int tag, MPI_Comm comm, mxi_comm_t *c, int synchronous,
                               MPI_Request *req)
{
    mxi_layout_t *l = NULL;
    if (!contiguous && count > 0) {
        uint64_t packed;
        int rc = mxi_packed_layout(comm, dt, count, &l, &packed);
        if (rc != MPI_SUCCESS) {
            mxi_graph_break(s, "a captured datatype has no stream-ordered layout (see above)");
            return rc;
        }
    }
    return mxi_graph_p2p(s, origin, is_send, buf, bytes, l, count, peer, tag, comm, c, synchronous,
                         req);
}

/* A send's pack on its stream, before the send's own point (op->user is
 * its mxi_packed_t): the pack kernel for device buffers, a host call for
 * host ones. */
static mxu_status_t mxi_pack_prepare(mxe_op_t *op)
{
    mxi_packed_t *pk = op->user;
    if (pk->dev) {
        mxa_pack_args_t a = mxi_pack_args(pk, 0);
        return mxa_stream_pack(op->stream, &a);
    }
    __atomic_fetch_add(&pk->refs, 1, __ATOMIC_RELAXED);
    mxu_status_t st = mxa_stream_host_call(op->stream, mxi_pack_step, pk);
    if (st != MXU_OK)
        mxi_packed_put(pk); /* the step's reference: no step */
    return st;
}

/* Can an SX step on s do pk's pack (send) or unpack (receive) itself --
 * one launch instead of two (issue 20: a column halo's send cost a pack
 * kernel launch and a send step launch, its receive a receive step and an
 * unpack kernel, ~3.5 us of host time each on the GPU machine)? Device
 * blocks on CUDA streams (chunks in device memory) and host streams'
 * buffers (chunks in host memory); a receive only when its unpack is
 * reserved for the stream wait that follows (the library's blocking
 * calls). Sets pk->fuse. */
static int mxi_pack_fusable(const mxa_stream_t *s, mxi_packed_t *pk, int unpack)
{
    if (!mxu_config.sx_fuse_pack)
        return 0;
    void *chunks; /* (a contiguous layout needs none: mxi_layout_pack_args) */
    if (pk->dev && !pk->host_block && s->kind == MXA_KIND_CUDA)
        chunks = pk->chunks; /* uploaded by mxi_packed_make */
    else if (!pk->dev && s->kind == MXA_KIND_HOST)
        chunks = pk->layout->c;
    else
        return 0;
    if (unpack && atomic_load_explicit(&pk->unpack_state, memory_order_relaxed) != 3)
        return 0;
    pk->fuse =
        mxi_layout_pack_args(pk->layout, pk->user_buf, pk->packed, chunks, pk->count, unpack);
    return 1;
}

/* The memory type of an operation's buffer: a packed buffer's is known
 * (accel's device block, a pinned host block or a heap buffer), so the
 * engine asks the driver only for the user's own buffers (-1). */
static int mxi_packed_memtype(const mxi_packed_t *pk)
{
    if (!pk)
        return -1;
    return pk->dev && !pk->host_block ? MXA_MEM_DEVICE : MXA_MEM_HOST;
}

static int mxi_proc_null_request(MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Grequest_start(mxi_proc_null_query, mxi_proc_null_free, mxi_proc_null_cancel,
                                 NULL, req);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Grequest_complete(*req);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : mxi_raise_code(comm, rc);
}

static int mxi_isend_(mxa_stream_t *s, mxi_origin_t origin, const void *buf, int count,
                      MPI_Datatype dt, int dest, int tag, MPI_Comm comm, int synchronous,
                      MPI_Request *req)
{
    mxi_comm_t *c;
    size_t bytes;
    mxi_packed_t *pk = NULL;
    int contiguous;
    int rc = mxi_send_args(buf, count, dt, dest, tag, comm, req, &c, &bytes, &contiguous);
    if (rc == MPI_SUCCESS && mxi_graph_capturing(s))
        return mxi_graph_p2p_typed(s, origin, 1, (void *)(uintptr_t)buf, count, dt, bytes,
                                   contiguous, dest, tag, comm, c, synchronous, req);
    if (rc == MPI_SUCCESS && dest == MPI_PROC_NULL && !c->ec.match_dynamic) {
        /* the MPI library's own request, complete at once (MPICH's costs
         * no generalized request); a send's status says nothing */
        rc = PMPI_Isend(buf, count, dt, MPI_PROC_NULL, tag, comm, req);
        return rc == MPI_SUCCESS ? rc : mxi_raise_code(comm, rc);
    }
    int staged = 0;
    if (rc == MPI_SUCCESS)
        rc = mxi_packing_begin(s, c, comm, buf, count, dt, bytes, contiguous, dest, &pk, &staged);
    if (rc != MPI_SUCCESS)
        return rc;
    if (pk)
        buf = pk->packed;
    mxi_reap(0);
    mxe_op_t *op;
    mxu_status_t st =
        mxe_op_create_send_mt(s, buf, bytes, &c->ec, dest == MPI_PROC_NULL ? MXE_PROC_NULL : dest,
                              tag, synchronous ? 0 : c->eager_limit, mxi_packed_memtype(pk), &op);
    if (st != MXU_OK) {
        mxi_packed_put(pk);
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    if (staged)
        atomic_fetch_add_explicit(&mxi_net_staged_sent, 1, memory_order_relaxed);
    op->synchronous = synchronous;
    if (pk) {
        /* the pack goes on the stream before the send's own point, or into
         * its SX step (mxi_pack_fusable) */
        op->user = pk;
        op->user_free = mxi_packed_put;
        op->user_prepare = mxi_pack_prepare;
        st = MXU_OK;
        if (dest != MPI_PROC_NULL && mxi_pack_fusable(s, pk, 0))
            op->sx_pack = &pk->fuse; /* the engine fuses it or calls mxi_pack_prepare */
        else if (dest != MPI_PROC_NULL)
            st = mxi_pack_prepare(op);
        if (st != MXU_OK) {
            mxe_op_release(op);
            mxe_op_release(op);
            return mxi_raise_code(comm, mxi_status_to_mpi(st));
        }
    }
    return mxi_submit(op, origin, comm, req);
}

static int mxi_irecv_(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count, MPI_Datatype dt,
                      int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    mxi_comm_t *c;
    size_t bytes;
    mxi_packed_t *pk = NULL;
    int contiguous;
    int rc = mxi_recv_args(buf, count, dt, source, tag, comm, req, &c, &bytes, &contiguous);
    if (rc == MPI_SUCCESS && mxi_graph_capturing(s))
        return mxi_graph_p2p_typed(s, origin, 0, buf, count, dt, bytes, contiguous, source, tag,
                                   comm, c, 0, req);
    if (rc == MPI_SUCCESS && source == MPI_PROC_NULL && !c->ec.match_dynamic)
        return mxi_proc_null_request(comm, req);
    int staged = 0;
    if (rc == MPI_SUCCESS)
        rc = mxi_packing_begin(s, c, comm, buf, count, dt, bytes, contiguous, source, &pk, &staged);
    if (rc != MPI_SUCCESS)
        return rc;
    if (pk)
        buf = pk->packed;
    mxi_reap(0);
    int esrc = source == MPI_PROC_NULL    ? MXE_PROC_NULL
               : source == MPI_ANY_SOURCE ? MXE_ANY_SOURCE
                                          : source;
    mxe_op_t *op;
    mxu_status_t st =
        mxe_op_create_recv_mt(s, buf, bytes, &c->ec, esrc, tag == MPI_ANY_TAG ? MXE_ANY_TAG : tag,
                              c->recv_post_early, mxi_packed_memtype(pk), &op);
    if (st != MXU_OK) {
        mxi_packed_put(pk);
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    if (staged)
        atomic_fetch_add_explicit(&mxi_net_staged_received, 1, memory_order_relaxed);
    op->stream_waited = mxi_recv_stream_waited; /* (before the engine binds it) */
    if (pk) {
        /* unpacked as the receive completes (host memory; device memory
         * when no stream wait came first) or behind a stream wait */
        op->user = pk;
        op->user_free = mxi_packed_put;
        op->user_complete = mxi_unpack_on_complete;
        if (pk->dev || pk->behind_wait)
            op->user_stream_wait = mxi_unpack_on_stream_wait;
        /* Reserved for the stream wait that follows (the library's own
         * MPI_Recv, MPI_Sendrecv, MPI_Sendrecv_replace): a stream-executed
         * receive step writes the length where the unpack reads it, and
         * the stream goes on without the host (issue 20: the stream had
         * waited for the progress thread's completion of every such
         * receive, and a copy of the length, between the step and the
         * unpack). Otherwise a step's bytes may be unpacked on a library
         * stream that the progress thread starts: fenced for it. */
        int reserved = atomic_load_explicit(&pk->unpack_state, memory_order_relaxed) == 3;
        if (reserved && pk->dev && pk->dev_word)
            op->sx_len_word = pk->dev_word;
        else if (reserved && pk->behind_wait)
            op->sx_len_word = pk->limit;
        if (pk->dev && !reserved)
            op->recv_fence = 1;
        if (op->sx_len_word && mxi_pack_fusable(s, pk, 1))
            op->sx_pack = &pk->fuse; /* the receive step may unpack */
    }
    return mxi_submit(op, origin, comm, req);
}

/* ---------------------------------------------------------- explicit API */

int MPIX_Acc_Isend(MPIX_Acc_stream stream, const void *buf, int count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
    uint64_t t = mxu_ct_begin(); /* the stream's lookup counts too */
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, comm, &s);
    if (rc == MPI_SUCCESS)
        rc = mxi_isend(s, MXI_ORIGIN_EXPLICIT, buf, count, datatype, dest, tag, comm, 0, request);
    mxu_ct_end(MXU_CT_SEND, t);
    return rc;
}

int MPIX_Acc_Irecv(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Request *request)
{
    uint64_t t = mxu_ct_begin();
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, comm, &s);
    if (rc == MPI_SUCCESS)
        rc = mxi_irecv(s, MXI_ORIGIN_EXPLICIT, buf, count, datatype, source, tag, comm, request);
    mxu_ct_end(MXU_CT_RECV, t);
    return rc;
}

int MPIX_Acc_Wait(MPIX_Acc_stream stream, MPI_Request *request, MPI_Status *status)
{
    if (!request)
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST, "MPIX_Acc_Wait: request argument is NULL");
    uint64_t t = mxu_ct_begin();
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, MPI_COMM_SELF, &s);
    if (rc == MPI_SUCCESS) /* a persistent request's operation in its place */
        MXI_PERSIST_CALL_ON(rc, 1, request, s,
                            mxi_stream_waitall(s, 1, request,
                                               status == MPI_STATUS_IGNORE ? NULL : status,
                                               MPI_COMM_SELF));
    mxu_ct_end(MXU_CT_STREAM_WAIT, t);
    return rc;
}

int MPIX_Acc_Waitall(MPIX_Acc_stream stream, int count, MPI_Request requests[],
                     MPI_Status statuses[])
{
    if (count < 0)
        return mxi_raise(MPI_COMM_SELF, MXI_E_COUNT, "MPIX_Acc_Waitall count %d (must be >= 0)",
                         count);
    if (count > 0 && !requests)
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST, "MPIX_Acc_Waitall: NULL request array");
    uint64_t t = mxu_ct_begin();
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, MPI_COMM_SELF, &s);
    if (rc == MPI_SUCCESS)
        MXI_PERSIST_CALL_ON(rc, count, requests, s,
                            mxi_stream_waitall(s, count, requests,
                                               statuses == MPI_STATUSES_IGNORE ? NULL : statuses,
                                               MPI_COMM_SELF));
    mxu_ct_end(MXU_CT_STREAM_WAIT, t);
    return rc;
}

int MPIX_Acc_Send(MPIX_Acc_stream stream, const void *buf, int count, MPI_Datatype datatype,
                  int dest, int tag, MPI_Comm comm)
{
    MPI_Request req;
    int rc = MPIX_Acc_Isend(stream, buf, count, datatype, dest, tag, comm, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPIX_Acc_Wait(stream, &req, MPI_STATUS_IGNORE);
}

int MPIX_Acc_Recv(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int source,
                  int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request req;
    int rc = MPIX_Acc_Irecv(stream, buf, count, datatype, source, tag, comm, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPIX_Acc_Wait(stream, &req, status);
}

/* ----------------------------------------------------- ordinary wrappers */

/* Blocking sends and receives on a stream: the non-blocking call and a
 * stream wait (returns at once). */
/* The operation of a blocking call on a stream (its non-blocking call):
 * without an MPI handle where it is an engine operation and s is not
 * being captured (an MPICH generalized request cost ~0.3 us to make and
 * ~1.7 us to complete and free on the GPU machine's host, issue 20), else
 * with its request. */
static int mxi_blocking_op(mxa_stream_t *s, mxi_origin_t origin, int is_send, const void *buf,
                           int count, MPI_Datatype dt, int peer, int tag, MPI_Comm comm, int sync,
                           mxe_op_t **op, MPI_Request *req)
{
    *op = NULL;
    *req = MPI_REQUEST_NULL;
    int internal = !mxi_graph_capturing(s);
    if (internal)
        mxi_internal_op = op;
    if (!is_send)
        mxi_recv_stream_waited = 1;
    int rc = is_send
                 ? mxi_isend(s, origin, buf, count, dt, peer, tag, comm, sync, req)
                 : mxi_irecv(s, origin, (void *)(uintptr_t)buf, count, dt, peer, tag, comm, req);
    mxi_recv_stream_waited = 0;
    mxi_internal_op = NULL; /* (not taken: an error, or no engine operation) */
    return rc;
}

/* One stream wait for the blocking call's operations (mxi_blocking_op):
 * those without a handle together, any with one (a capture's, a
 * PROC_NULL's) after them; a side with neither made nothing (an
 * MPI_PROC_NULL side of MPI_Sendrecv): its status is MPI's PROC_NULL one. */
static int mxi_blocking_wait(mxa_stream_t *s, int n, mxe_op_t *const *ops, MPI_Request *reqs,
                             MPI_Status *const *status_at, MPI_Comm comm)
{
    int rc = MPI_SUCCESS, any = 0;
    for (int i = 0; i < n; i++)
        any |= ops[i] != NULL;
    if (any)
        rc = mxi_stream_wait_ops(s, n, ops, status_at, comm);
    for (int i = 0; i < n; i++)
        if (!ops[i] && reqs[i] != MPI_REQUEST_NULL) {
            int r = mxi_stream_waitall(s, 1, &reqs[i], status_at ? status_at[i] : NULL, comm);
            if (rc == MPI_SUCCESS)
                rc = r;
        } else if (!ops[i] && status_at && status_at[i]) {
            mxi_proc_null_status(status_at[i]);
        }
    return rc;
}

static int mxi_send_on_stream(mxa_stream_t *s, mxi_origin_t origin, const void *buf, int count,
                              MPI_Datatype dt, int dest, int tag, MPI_Comm comm, int sync)
{
    MPI_Request req;
    mxe_op_t *op;
    int rc = mxi_blocking_op(s, origin, 1, buf, count, dt, dest, tag, comm, sync, &op, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    return mxi_blocking_wait(s, 1, &op, &req, NULL, comm);
}

static int mxi_recv_on_stream(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count,
                              MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                              MPI_Status *status)
{
    MPI_Request req;
    mxe_op_t *op;
    int rc = mxi_blocking_op(s, origin, 0, buf, count, dt, source, tag, comm, 0, &op, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    MPI_Status *at = status == MPI_STATUS_IGNORE ? NULL : status;
    return mxi_blocking_wait(s, 1, &op, &req, &at, comm);
}

/* Nonblocking sends: one body, the mode decides synchronous matching. */
#define MXI_WRAP_ISEND(name, sync)                                                                 \
    int name(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,        \
             MPI_Request *req)                                                                     \
    {                                                                                              \
        MXI_ROUTE_RETURN(comm, dt, s, origin,                                                      \
                         mxi_isend(s, origin, buf, count, dt, dest, tag, comm, sync, req),         \
                         P##name(buf, count, dt, dest, tag, comm, req));                           \
    }

MXI_WRAP_ISEND(MPI_Isend, 0)
MXI_WRAP_ISEND(MPI_Ibsend, 0)
MXI_WRAP_ISEND(MPI_Irsend, 0)
MXI_WRAP_ISEND(MPI_Issend, 1)

/* Blocking sends: on a stream, Isend + stream wait (returns at once). */
#define MXI_WRAP_SEND(name, sync)                                                                  \
    int name(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)        \
    {                                                                                              \
        MXI_ROUTE_RETURN(comm, dt, s, origin,                                                      \
                         mxi_send_on_stream(s, origin, buf, count, dt, dest, tag, comm, sync),     \
                         P##name(buf, count, dt, dest, tag, comm));                                \
    }

MXI_WRAP_SEND(MPI_Send, 0)
MXI_WRAP_SEND(MPI_Bsend, 0)
MXI_WRAP_SEND(MPI_Rsend, 0)
MXI_WRAP_SEND(MPI_Ssend, 1)

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    MXI_ROUTE_RETURN(comm, dt, s, origin,
                     mxi_irecv(s, origin, buf, count, dt, source, tag, comm, req),
                     PMPI_Irecv(buf, count, dt, source, tag, comm, req));
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MXI_ROUTE_RETURN(comm, dt, s, origin,
                     mxi_recv_on_stream(s, origin, buf, count, dt, source, tag, comm, status),
                     PMPI_Recv(buf, count, dt, source, tag, comm, status));
}

/* MPI_Sendrecv on a stream: receive, send, one stream wait for both (the
 * receive's with the status); returns at once. An MPI_PROC_NULL side (the
 * edges of every non-periodic halo exchange: half of a 2-rank stencil's
 * Sendrecvs have two) is argument-checked and makes nothing -- no request,
 * no operation, nothing on the stream -- and a PROC_NULL receive's status
 * is MPI's (mxi_blocking_wait); two such sides return at once (issue 20:
 * each had cost two request handles and a stream wait, ~2.4 us of host
 * time on the GPU machine). Communicators that match in start order
 * (mpix_acc_match=dynamic, captures) make their PROC_NULL operations. */
static int mxi_sendrecv_on_stream(mxa_stream_t *s, mxi_origin_t origin, const void *sendbuf,
                                  int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                                  int recvtag, MPI_Comm comm, MPI_Status *status)
{
    mxi_comm_t *c = mxi_comm_find(comm);
    int null_free = c && !c->ec.match_dynamic;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    mxe_op_t *ops[2] = {NULL, NULL};
    size_t bytes;
    int contiguous, rc;
    if (null_free && source == MPI_PROC_NULL)
        rc = mxi_recv_args(recvbuf, recvcount, recvtype, source, recvtag, comm, &reqs[1], &c,
                           &bytes, &contiguous);
    else
        rc = mxi_blocking_op(s, origin, 0, recvbuf, recvcount, recvtype, source, recvtag, comm, 0,
                             &ops[1], &reqs[1]);
    if (rc != MPI_SUCCESS)
        return rc;
    if (null_free && dest == MPI_PROC_NULL)
        rc = mxi_send_args(sendbuf, sendcount, sendtype, dest, sendtag, comm, &reqs[0], &c, &bytes,
                           &contiguous);
    else
        rc = mxi_blocking_op(s, origin, 1, sendbuf, sendcount, sendtype, dest, sendtag, comm, 0,
                             &ops[0], &reqs[0]);
    MPI_Status *at[2] = {NULL, status == MPI_STATUS_IGNORE ? NULL : status};
    if (rc != MPI_SUCCESS) {
        /* Keep the stream consistent: the receive is still waited for. */
        mxi_blocking_wait(s, 1, &ops[1], &reqs[1], NULL, comm);
        return rc;
    }
    return mxi_blocking_wait(s, 2, ops, reqs, at, comm);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    mxa_stream_t *s;
    mxi_origin_t origin;
    int err;
    int r = mxi_route_checked(comm, sendtype, &s, &origin, &err);
    if (r == 0)
        r = mxi_route_checked(comm, recvtype, &s, &origin, &err);
    if (r == -1)
        return err;
    if (r == 0)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    return mxi_sendrecv_on_stream(s, origin, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
                                  recvcount, recvtype, source, recvtag, comm, status);
}

/* MPI_Sendrecv_replace on a stream: the message arrives in a scratch
 * buffer of the stream (mxa_stream_scratch: same memory kind as buf), which
 * first gets buf's bytes, so that a shorter message leaves the rest of buf
 * as it was (MPI's rule); after the stream wait on both, the scratch is
 * copied back into buf. Every step is stream-ordered: copy buf -> scratch,
 * receive into it, send from buf, wait for both, copy scratch -> buf; the
 * call returns at once. A scratch handed to a later call on the stream is
 * safe to reuse: that call's receive can write it only once the stream has
 * passed this call's copies. */
/* MPI_Sendrecv_replace with a non-contiguous datatype:
 * the send packs buf on the stream into a buffer of its own, and the
 * receive, enqueued after it, unpacks into buf when it completes -- which
 * is after its trigger, so after the pack. A shorter message leaves the
 * rest of buf as it was. */
static int mxi_sendrecv_replace_packed(mxa_stream_t *s, mxi_origin_t origin, void *buf, int count,
                                       MPI_Datatype dt, int dest, int sendtag, int source,
                                       int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request reqs[2];
    int rc = mxi_isend(s, origin, buf, count, dt, dest, sendtag, comm, 0, &reqs[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_recv_stream_waited = 1;
    rc = mxi_irecv(s, origin, buf, count, dt, source, recvtag, comm, &reqs[1]);
    mxi_recv_stream_waited = 0;
    if (rc != MPI_SUCCESS) {
        mxi_stream_waitall(s, 1, &reqs[0], NULL, comm);
        return rc;
    }
    rc = mxi_stream_waitall(s, 1, &reqs[0], NULL, comm);
    int rc2 = mxi_stream_waitall(s, 1, &reqs[1], status == MPI_STATUS_IGNORE ? NULL : status, comm);
    return rc != MPI_SUCCESS ? rc : rc2;
}

static int mxi_sendrecv_replace_on_stream(mxa_stream_t *s, mxi_origin_t origin, void *buf,
                                          int count, MPI_Datatype dt, int dest, int sendtag,
                                          int source, int recvtag, MPI_Comm comm,
                                          MPI_Status *status)
{
    mxi_comm_t *c;
    size_t bytes = 0;
    MPI_Request dummy;
    int contiguous;
    int rc = mxi_send_args(buf, count, dt, dest, sendtag, comm, &dummy, &c, &bytes, &contiguous);
    if (rc == MPI_SUCCESS)
        rc = mxi_recv_args(buf, count, dt, source, recvtag, comm, &dummy, &c, &bytes, &contiguous);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!contiguous) {
        /* receives posted at their call (mpix_acc_recv_post=early) could
         * complete before the pack: contiguous types only there */
        if (count == 0 || c->recv_post_early)
            return mxi_raise(comm, MXI_E_TYPE,
                             "MPI_Sendrecv_replace with a non-contiguous datatype%s",
                             count == 0 ? " and count 0" : " where receives are posted early");
        return mxi_sendrecv_replace_packed(s, origin, buf, count, dt, dest, sendtag, source,
                                           recvtag, comm, status);
    }
    void *rbuf = buf; /* nothing to send: receive in place */
    if (dest != MPI_PROC_NULL && source != MPI_PROC_NULL && bytes > 0) {
        rbuf = mxa_stream_scratch(s, mxa_memtype(buf, bytes), bytes);
        if (!rbuf)
            return mxi_raise(comm, MXI_E_NO_MEM,
                             "MPI_Sendrecv_replace: no scratch memory of %zu bytes for the stream "
                             "(being captured into a graph? make the call once before capturing)",
                             bytes);
        mxu_status_t st = mxa_stream_copy(s, rbuf, buf, bytes);
        if (st != MXU_OK)
            return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    rc = mxi_sendrecv_on_stream(s, origin, buf, count, dt, dest, sendtag, rbuf, count, dt, source,
                                recvtag, comm, status);
    if (rbuf != buf) {
        mxu_status_t st = mxa_stream_copy(s, buf, rbuf, bytes);
        if (st != MXU_OK && rc == MPI_SUCCESS)
            return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MXI_ROUTE_RETURN(
        comm, datatype, s, origin,
        mxi_sendrecv_replace_on_stream(s, origin, buf, count, datatype, dest, sendtag, source,
                                       recvtag, comm, status),
        PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status));
}

/* ------------------------------------------------------------ probes
 * Stream-ordered messages travel over the library's own transport and are
 * matched by the library in call order: the MPI library's probes never see
 * them (api.md §5 "what passes through"). On a stream communicator every
 * message is stream-ordered, so a blocking probe there could only wait
 * forever: MPI_Probe and MPI_Mprobe fail with MPI_ERR_UNSUPPORTED_OPERATION
 * instead of hanging. The nonblocking ones pass through (their answer,
 * "nothing yet", is one MPI allows at any instant) and the library logs a
 * warning, once per communicator. Probes for MPI_PROC_NULL, and on every
 * other communicator (a datatype's stream attribute makes single messages
 * stream-ordered, the rest stays the MPI library's), pass through. */

static mxi_comm_t *mxi_probe_stream_comm(int source, MPI_Comm comm)
{
    if (source == MPI_PROC_NULL || !mxi_on() ||
        atomic_load_explicit(&mxi.stream_comms, memory_order_relaxed) <= 0)
        return NULL;
    mxi_comm_t *c = mxi_comm_find(comm);
    return c && c->stream ? c : NULL;
}

static int mxi_probe_refused(MPI_Comm comm, const char *name)
{
    return mxi_raise(comm, MXI_E_UNSUPPORTED,
                     "%s on a stream communicator would wait forever: stream-ordered messages "
                     "are matched by mpix-acc, not by the MPI library; receive them with "
                     "MPI_Irecv / MPIX_Acc_Irecv (source and tag known)",
                     name);
}

static void mxi_probe_warn(mxi_comm_t *c, const char *name)
{
    if (atomic_exchange(&c->probe_warned, 1))
        return;
    MXU_LOG(MXU_LOG_WARN,
            "%s on a stream communicator passes to the MPI library, which does not see "
            "stream-ordered messages: it will not report them (logged once per communicator)",
            name);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (mxi_probe_stream_comm(source, comm))
        return mxi_probe_refused(comm, "MPI_Probe");
    return PMPI_Probe(source, tag, comm, status);
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    if (mxi_probe_stream_comm(source, comm))
        return mxi_probe_refused(comm, "MPI_Mprobe");
    return PMPI_Mprobe(source, tag, comm, message, status);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    mxi_comm_t *c = mxi_probe_stream_comm(source, comm);
    if (c)
        mxi_probe_warn(c, "MPI_Iprobe");
    return PMPI_Iprobe(source, tag, comm, flag, status);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
    mxi_comm_t *c = mxi_probe_stream_comm(source, comm);
    if (c)
        mxi_probe_warn(c, "MPI_Improbe");
    return PMPI_Improbe(source, tag, comm, flag, message, status);
}
