/*
 * engine.c - the application-thread side of the engine: creating and
 * submitting operations and stream waits, host-side waits, lifecycle.
 *
 * Nothing here blocks on communication except the explicit host waits
 * (mxe_op_wait_host), and nothing here touches UCX after mxe_start(): all
 * transport work is done by the progress thread (progress.c).
 */
#include "engine/engine_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "topo/topo.h"
#include "transport/transport.h"
#include "util/calltime.h"
#include "util/settings.h"

mxe_engine_t mxe;

void mxe_wake(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&mxe.sleeping, memory_order_relaxed)) {
        uint64_t one = 1, t = mxu_ct_inner_begin();
        ssize_t rc = write(mxe.wake_fd, &one, sizeof(one));
        (void)rc; /* EAGAIN: counter saturated, the thread wakes anyway */
        mxu_ct_inner_end(MXU_CT_WAKE, t);
    }
}

static void mxe_on_stream_free(mxa_stream_t *s);

static void mxe_push(mxe_cmd_t *cmd)
{
    mxu_mpsc_push(&mxe.cmdq, &cmd->node);
    mxe_wake();
}

/* ---------------------------------------------------------------- lifecycle */

mxu_status_t mxe_init(const mxe_init_args_t *args)
{
    memset(&mxe, 0, sizeof(mxe));
    mxu_mpsc_init(&mxe.cmdq);
    mxu_event_init(&mxe.completion);
    mxe.world_rank = args->world_rank;
    mxe.world_size = args->world_size;
    mxe.wake_fd = -1;
    mxe.epoll_fd = -1;
    atomic_store(&mxe.progress_cpu, -1);

    /* Never fails because a GPU is absent: the CUDA backend is then off. */
    MXU_TRY(mxa_init());
    const char *gpu_busid = mxa_current_pci_busid();
    mxe.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mxe.wake_fd < 0) {
        mxa_finalize();
        MXU_FAIL(MXU_ERR_SYSTEM, "eventfd: %s", strerror(errno));
    }

    mxo_init(); /* without hwloc or a topology: placement is simply skipped */
    mxo_set_placement_context(args->local_rank, args->local_size);
    snprintf(mxe.gpu_busid, sizeof(mxe.gpu_busid), "%s", gpu_busid ? gpu_busid : "");
    const char *nic = NULL;
    if (gpu_busid && mxu_config.set_net_devices && !getenv("UCX_NET_DEVICES")) {
        nic = mxo_nic_near_gpu(gpu_busid);
        if (nic)
            MXU_LOG(MXU_LOG_INFO, "UCX network device %s (closest to GPU %s)", nic, gpu_busid);
    }
    mxa_features_t feat;
    mxa_get_features(&feat);
    int shared_gpu =
        feat.cuda_active && feat.cuda_device_count > 0 && args->local_size > feat.cuda_device_count;
    if (shared_gpu)
        MXU_LOG(MXU_LOG_INFO,
                "%d ranks on this node, %d visible GPU(s): ranks share GPUs "
                "(UCX's cuda_ipc mapping cache off in the library's context)",
                args->local_size, feat.cuda_device_count);
    mxt_config_t tcfg = {.world_rank = args->world_rank,
                         .world_size = args->world_size,
                         .enable_wakeup = 1,
                         .net_devices = nic,
                         .peer_errors = args->peer_errors,
                         .shared_gpu = shared_gpu};
    mxu_status_t status = mxt_create(&tcfg);
    if (status != MXU_OK)
        goto undo_topo;
    status = mxe_match_init(args->world_size); /* before any peer can announce */
    if (status != MXU_OK)
        goto undo_transport;
    mxa_set_trigger_notify(mxe_wake);
    mxa_set_stream_free_hook(mxe_on_stream_free);
    mxt_set_peer_failure_hook(mxe_on_peer_failed);
    return MXU_OK;

    /* undo the lower layers this call started, in reverse */
undo_transport:
    mxt_destroy();
undo_topo:
    close(mxe.wake_fd);
    mxe.wake_fd = -1;
    mxo_finalize();
    mxa_finalize();
    return status;
}

mxu_status_t mxe_local_address(const void **addr, size_t *len)
{
    return mxt_local_address(addr, len);
}

static void mxe_warm_context(void *ctx);

mxu_status_t mxe_start(const void *blob, const size_t *offsets, int nranks, const int *node_peers,
                       int npeers)
{
    MXU_TRY(mxt_set_peer_addresses(blob, offsets, nranks));
    /* UCX's lazy set-up may synchronize the GPU (cuMemFree): do it now,
     * before any stream can wait on the progress thread. With CUDA, connect
     * to every rank of jobs up to MXE_EAGER_CONNECT_MAX ranks as well. */
    mxa_features_t feat;
    mxa_get_features(&feat);
    int with_cuda = feat.cuda_active;
    /* device memory only in a context: an application that makes its GPU
     * current after MPI_Init has none yet (UCX logged an error per
     * allocation); the context hook warms that device up (mxe_warm_context)
     * and the node peers' rounds use host memory (every process of the
     * node takes part in them) */
    int device_memory = with_cuda && mxa_current_pci_busid() != NULL;
    MXU_TRY(mxt_warm_up(with_cuda, device_memory, with_cuda && nranks <= MXE_EAGER_CONNECT_MAX,
                        node_peers, npeers));

    mxe.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (mxe.epoll_fd < 0)
        MXU_FAIL(MXU_ERR_SYSTEM, "epoll_create1: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
    if (epoll_ctl(mxe.epoll_fd, EPOLL_CTL_ADD, mxe.wake_fd, &ev) != 0)
        MXU_FAIL(MXU_ERR_SYSTEM, "epoll_ctl(eventfd): %s", strerror(errno));
    int ucx_fd = mxt_event_fd();
    if (ucx_fd >= 0) {
        ev.data.u32 = 1;
        if (epoll_ctl(mxe.epoll_fd, EPOLL_CTL_ADD, ucx_fd, &ev) != 0)
            MXU_FAIL(MXU_ERR_SYSTEM, "epoll_ctl(ucx fd): %s", strerror(errno));
    }

    mxe.timing = mxu_config.stats;
    mxu_ct_on = mxu_config.stats;
    atomic_store(&mxe.running, 1);
    int rc = pthread_create(&mxe.thread, NULL, mxe_progress_main, NULL);
    if (rc != 0) {
        atomic_store(&mxe.running, 0);
        MXU_FAIL(MXU_ERR_SYSTEM, "cannot start the progress thread: %s", strerror(rc));
    }
    mxa_set_context_hook(mxe_warm_context);
    /* One hardware queue per process (under MPS, per GPU): a wait point on
     * the GPU holds back all work behind it, other streams' and other
     * processes' sends included -- a stream wait that waits for a peer
     * whose send is queued behind it never ends (H100, 2 ranks under MPS,
     * test/gpu/sx_path phase 6). Stream waits on CUDA streams then wait on
     * the calling thread, and the work after them is enqueued when the
     * operations are done: correct, never a wait point on the GPU. */
    const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    mxa_features_t f;
    mxa_get_features(&f);
    if (f.cuda_active && conn && atoi(conn) == 1) {
        mxe.one_hw_queue = 1;
        MXU_LOG(MXU_LOG_WARN,
                "CUDA_DEVICE_MAX_CONNECTIONS=1: stream waits on CUDA streams wait on the calling "
                "thread (a wait point on the GPU would block the work it waits for); unset it "
                "or raise it for stream-ordered waits");
    }
    (void)mxe_sx_start(); /* failures are logged; the UCX path carries everything */
    return MXU_OK;
}

/* Hand a command to the progress thread and wait until it has carried it
 * out (the command lives on this stack; the progress thread sets done). */
static void mxe_run_sync_command(mxe_cmd_kind_t kind, void *target)
{
    mxe_cmd_t cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.kind = kind;
    cmd.target = target;
    mxe_push(&cmd);
    while (!atomic_load_explicit(&cmd.done, memory_order_acquire)) {
        uint32_t key = mxu_event_prepare(&mxe.completion);
        if (atomic_load_explicit(&cmd.done, memory_order_acquire)) {
            mxu_event_cancel(&mxe.completion);
            break;
        }
        mxu_event_wait(&mxe.completion, key, 1000000);
    }
}

/* The accelerator layer's context hook (mxa_set_context_hook): the
 * progress thread warms UCX up for the new context's device while this
 * (application) thread waits; once per context. */
static void mxe_warm_context(void *ctx)
{
    if (!atomic_load(&mxe.running) || pthread_equal(pthread_self(), mxe.thread))
        return;
    mxe_run_sync_command(MXE_CMD_WARM_CONTEXT, ctx);
}

/* a registration request, answered by the progress thread */
typedef struct {
    void *buf;
    size_t bytes;
    int memtype;
    void *reg;
    mxu_status_t status;
} mxe_mem_reg_req_t;

void mxe_handle_mem_reg(void *target)
{
    mxe_mem_reg_req_t *rq = target;
    /* UCX's CUDA transports want a context current on the thread that sends
     * or receives the buffer (this one; accel/cuda.h says when, host buffers
     * included): bound here, before any graph launch may hold the driver */
    mxa_thread_bind_buffer(rq->buf);
    rq->status = rq->memtype == MXA_MEM_HOST
                     ? MXU_OK
                     : mxt_mem_register(rq->buf, rq->bytes, rq->memtype, &rq->reg);
}

mxu_status_t mxe_mem_register(void *buf, size_t bytes, int memtype, void **reg)
{
    *reg = NULL;
    if (!atomic_load(&mxe.running))
        MXU_FAIL(MXU_ERR_NOT_READY, "memory registration: the engine is not running");
    mxe_mem_reg_req_t rq = {.buf = buf, .bytes = bytes, .memtype = memtype};
    if (pthread_equal(pthread_self(), mxe.thread))
        mxe_handle_mem_reg(&rq);
    else
        mxe_run_sync_command(MXE_CMD_MEM_REG, &rq);
    *reg = rq.reg;
    return rq.status;
}

void mxe_mem_deregister(void *reg)
{
    if (!reg)
        return;
    if (!atomic_load(&mxe.running)) {
        MXU_LOG(MXU_LOG_DEBUG, "memory registration %p outlived the engine: dropped", reg);
        return;
    }
    if (pthread_equal(pthread_self(), mxe.thread)) {
        mxt_mem_deregister(reg);
        return;
    }
    mxe_cmd_t *cmd = calloc(1, sizeof(*cmd));
    if (!cmd) {
        MXU_LOG(MXU_LOG_WARN, "out of memory dropping a memory registration (kept)");
        return;
    }
    cmd->kind = MXE_CMD_MEM_DEREG;
    cmd->target = reg;
    mxe_push(cmd);
}

int mxe_is_running(void) { return atomic_load(&mxe.running); }

int mxe_drain(double timeout_s)
{
    if (!atomic_load(&mxe.running))
        return 0;
    uint64_t deadline = mxu_now_ns() + (uint64_t)(timeout_s * 1e9);
    while (atomic_load(&mxe.live_ops) > 0 || atomic_load(&mxe.live_waits) > 0) {
        if (mxu_now_ns() >= deadline)
            break;
        uint32_t key = mxu_event_prepare(&mxe.completion);
        if (atomic_load(&mxe.live_ops) == 0 && atomic_load(&mxe.live_waits) == 0) {
            mxu_event_cancel(&mxe.completion);
            break;
        }
        mxu_event_wait(&mxe.completion, key, 1000000); /* 1 ms slices */
    }
    if (atomic_load(&mxe.live_ops) == 0 && atomic_load(&mxe.live_waits) == 0)
        return 0;

    /* Ask the progress thread to report and cancel what is left. */
    mxe_cmd_t *cmd = calloc(1, sizeof(*cmd));
    if (!cmd) {
        MXU_LOG(MXU_LOG_ERROR, "out of memory while aborting pending operations");
        return (int)atomic_load(&mxe.live_ops);
    }
    cmd->kind = MXE_CMD_ABORT;
    atomic_store(&mxe.abort_done, 0);
    mxe_push(cmd);
    while (!atomic_load(&mxe.abort_done)) {
        uint32_t key = mxu_event_prepare(&mxe.completion);
        if (atomic_load(&mxe.abort_done)) {
            mxu_event_cancel(&mxe.completion);
            break;
        }
        mxu_event_wait(&mxe.completion, key, 1000000);
    }
    return atomic_load(&mxe.aborted_count);
}

/* Stop the progress thread: the worker is the caller's from then on. */
static void mxe_stop_progress(void)
{
    mxa_set_context_hook(NULL);
    if (atomic_load(&mxe.running)) {
        atomic_store(&mxe.stop, 1);
        atomic_store(&mxe.sleeping, 1); /* force the eventfd write */
        mxe_wake();
        pthread_join(mxe.thread, NULL);
        atomic_store(&mxe.running, 0);
    }
}

/* After the transport's endpoints are closed (or abandoned): destroy it and
 * stop the other lower layers, accel last. */
static void mxe_stop_lower_layers(void)
{
    mxe_sx_stop();
    mxe_match_destroy();
    mxt_destroy();
    if (mxe.epoll_fd >= 0)
        close(mxe.epoll_fd);
    if (mxe.wake_fd >= 0)
        close(mxe.wake_fd);
    mxe.epoll_fd = mxe.wake_fd = -1;
    mxa_set_trigger_notify(NULL);
    mxo_finalize();
    atomic_store(&mxe.nfailed, 0);
    free(mxe.failed_ranks);
    mxe.failed_ranks = NULL;
    mxa_finalize();
}

void mxe_finalize(int (*fence)(void *arg), void *arg)
{
    mxe_stop_progress();
    mxt_flush_and_close(fence, arg); /* flush, close endpoints */
    mxe_stop_lower_layers();
}

void mxe_abandon(void)
{
    mxe_stop_progress();
    mxt_abandon();
    mxe_stop_lower_layers();
}

int mxe_failed_peers(int *ranks, int max)
{
    int n = atomic_load_explicit(&mxe.nfailed, memory_order_acquire);
    for (int i = 0; i < n && i < max; i++)
        ranks[i] = mxe.failed_ranks[i];
    return n;
}

/* --------------------------------------------------------------- operations */

static mxu_status_t mxe_op_alloc(mxa_stream_t *s, mxe_op_type_t type, void *buf, size_t bytes,
                                 const mxe_comm_t *comm, int peer, int tag, int memtype,
                                 mxe_op_t **op_out)
{
    if (!atomic_load_explicit(&mxe.running, memory_order_relaxed))
        MXU_FAIL(MXU_ERR_NOT_READY, "the engine is not running");
    MXU_TRY(mxa_stream_refuse_capture(s, type == MXE_OP_SEND ? "a send" : "a receive"));
    mxe_op_t *op = calloc(1, sizeof(*op));
    if (!op)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "operation allocation failed");
    op->type = type;
    op->stream = s;
    op->buf = buf;
    op->bytes = bytes;
    op->peer = peer;
    op->tag = tag;
    op->ctx_id = comm->ctx_id;
    op->comm_rank = comm->rank;
    op->peer_world = -1;
    if (peer >= 0)
        op->peer_world = comm->world_ranks ? comm->world_ranks[peer] : peer;
    op->memtype = !(bytes > 0 && buf) ? MXA_MEM_HOST
                  : memtype >= 0      ? memtype
                                      : (int)mxa_memtype(buf, bytes);
    op->match_dynamic = comm->match_dynamic;
    op->sx_comm = comm->sx && !comm->match_dynamic;
    op->sx_dynamic = comm->sx && comm->match_dynamic;
    if (type == MXE_OP_RECV && peer == MXE_ANY_SOURCE && mxu_config.peer_errors) {
        /* who may send to it, for the failure rule (mxe_on_peer_failed):
         * the communicator may be freed before the receive completes */
        op->any_nmembers = comm->size;
        if (comm->world_ranks) {
            op->any_members = malloc(sizeof(int) * (size_t)comm->size);
            if (!op->any_members) {
                free(op);
                MXU_FAIL(MXU_ERR_NO_MEMORY, "operation allocation failed");
            }
            memcpy(op->any_members, comm->world_ranks, sizeof(int) * (size_t)comm->size);
        }
    }
    atomic_init(&op->state, MXE_STATE_QUEUED);
    atomic_init(&op->refs, 2); /* engine + caller */
    op->cmd.kind = MXE_CMD_OP;
    op->cmd.target = op;
    *op_out = op;
    return MXU_OK;
}

mxu_status_t mxe_op_create_send(mxa_stream_t *s, const void *buf, size_t bytes,
                                const mxe_comm_t *comm, int dest, int tag, size_t eager_limit,
                                mxe_op_t **op_out)
{
    return mxe_op_create_send_mt(s, buf, bytes, comm, dest, tag, eager_limit, -1, op_out);
}

mxu_status_t mxe_op_create_send_mt(mxa_stream_t *s, const void *buf, size_t bytes,
                                   const mxe_comm_t *comm, int dest, int tag, size_t eager_limit,
                                   int memtype, mxe_op_t **op_out)
{
    MXU_TRY(mxe_op_alloc(s, MXE_OP_SEND, (void *)buf, bytes, comm, dest, tag, memtype, op_out));
    (*op_out)->eager_limit = eager_limit;
    return MXU_OK;
}

mxu_status_t mxe_op_create_recv(mxa_stream_t *s, void *buf, size_t bytes, const mxe_comm_t *comm,
                                int source, int tag, int post_early, mxe_op_t **op_out)
{
    return mxe_op_create_recv_mt(s, buf, bytes, comm, source, tag, post_early, -1, op_out);
}

mxu_status_t mxe_op_create_recv_mt(mxa_stream_t *s, void *buf, size_t bytes, const mxe_comm_t *comm,
                                   int source, int tag, int post_early, int memtype,
                                   mxe_op_t **op_out)
{
    MXU_TRY(mxe_op_alloc(s, MXE_OP_RECV, buf, bytes, comm, source, tag, memtype, op_out));
    (*op_out)->post_early = post_early;
    return MXU_OK;
}

mxu_status_t mxe_op_create_local(mxa_stream_t *s, mxe_op_type_t type, int parts, mxe_op_t **op_out)
{
    const mxe_comm_t none = {.ctx_id = 0, .rank = 0, .size = 1};
    MXU_TRY(mxe_op_alloc(s, type, NULL, 0, &none, MXE_PROC_NULL, MXE_ANY_TAG, -1, op_out));
    (*op_out)->local = 1;
    (*op_out)->local_parts = parts;
    return MXU_OK;
}

mxu_status_t mxe_add_poller(unsigned (*poll)(void), int (*busy)(void))
{
    for (int i = 0; i < mxe.npollers; i++)
        if (mxe.poller[i] == poll)
            return MXU_OK; /* (again after a re-initialization) */
    if (mxe.npollers == MXE_POLLERS)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "engine: more than %d pollers", MXE_POLLERS);
    mxe.poller_busy[mxe.npollers] = busy;
    mxe.poller[mxe.npollers] = poll;
    mxe.npollers++;
    return MXU_OK;
}

long mxe_stream_points_ahead(const mxa_stream_t *s)
{
    if (s == NULL || s->kind == MXA_KIND_NONE)
        return 0;
    uint64_t trig = atomic_load_explicit(&s->next_trigger_seq, memory_order_relaxed) -
                    atomic_load_explicit(s->trigger_word, memory_order_acquire);
    uint64_t wait = atomic_load_explicit(&s->next_wait_seq, memory_order_relaxed) -
                    atomic_load_explicit(s->release_word, memory_order_acquire);
    /* the words only grow up to the allocated values; guard a torn view */
    return ((int64_t)trig > 0 ? (long)trig : 0) + ((int64_t)wait > 0 ? (long)wait : 0);
}

long mxe_stream_backlog(mxa_stream_t *s)
{
    long n = mxe_stream_points_ahead(s);
    if (n > 0 && mxa_stream_capturing(s))
        return 0;
    return n;
}

mxu_status_t mxe_op_submit(mxe_op_t *op)
{
    mxa_stream_t *s = op->stream;
    int needs_trigger = s->kind != MXA_KIND_NONE && !op->post_early;
    int sx = 0;
    if (op->sx_comm && op->peer >= 0) {
        if (op->type == MXE_OP_SEND)
            sx = mxe_sx_submit_send(op);
        else
            mxe_sx_bind_recv(op);
    }
    if (op->sx_untriggered) /* its receive step is its stream point */
        needs_trigger = 0;
    if (sx == -2)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "the pack of a send could not be enqueued");
    if (sx != 1 && op->type == MXE_OP_SEND && op->sx_pack && op->sx_pack_state == 0) {
        /* not fused into a send step: the pack goes before the point */
        MXU_TRY(op->user_prepare(op));
        op->sx_pack_state = 2;
    }
    if (sx == 1) {
        /* the send step raises the trigger word itself */
    } else if (sx == -1) {
        MXU_TRY(s->backend->enqueue_trigger(s, op->trigger_seq));
    } else if (needs_trigger) {
        uint64_t seq = atomic_fetch_add_explicit(&s->next_trigger_seq, 1, memory_order_relaxed) + 1;
        op->trigger_seq = seq;
        MXU_TRY(s->backend->enqueue_trigger(s, seq));
    } else {
        op->trigger_seq = 0;
    }
    atomic_fetch_add_explicit(&s->ops_in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mxe.live_ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mxe.st_ops_submitted, 1, memory_order_relaxed);
    mxe_push(&op->cmd);
    return MXU_OK;
}

mxu_status_t mxe_op_submit_on(mxe_op_t *op, mxa_stream_t *by)
{
    if (by) {
        op->after_stream = by;
        /* the triggers this thread has written */
        op->after_trigger = atomic_load_explicit(by->trigger_word, memory_order_relaxed);
    }
    MXU_TRY(mxe_op_submit(op));
    /* counted after the push (the progress thread may count its start
     * first: it compares made > started) and before this thread's next
     * trigger, whose release store publishes it */
    if (by)
        atomic_fetch_add_explicit(&by->fires_made, 1, memory_order_relaxed);
    return MXU_OK;
}

void mxe_op_retain(mxe_op_t *op) { atomic_fetch_add_explicit(&op->refs, 1, memory_order_relaxed); }

void mxe_op_release(mxe_op_t *op)
{
    if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) == 1) {
        if (op->user_free)
            op->user_free(op->user);
        free(op->eager_copy);
        free(op->any_members);
        if (op->sx_staging)
            mxe_sx_staging_free(op);
        free(op);
    }
}

/* What a host wait is still waiting for, for the periodic report. */
static void mxe_report_host_wait(mxe_op_t *const *ops, int n, double waited_s)
{
    int left = 0;
    const mxe_op_t *first = NULL;
    for (int i = 0; i < n; i++)
        if (ops[i] && !mxe_op_is_complete(ops[i])) {
            if (!first)
                first = ops[i];
            left++;
        }
    if (!first)
        return;
    int state = atomic_load_explicit(&first->state, memory_order_acquire);
    MXU_LOG(MXU_LOG_WARN,
            "still waiting after %.0f s on the host for %d stream-ordered operation%s; "
            "first: %s rank %d, tag %d, %zu bytes, %s (MPIX_ACC_WAIT_REPORT=%g)",
            waited_s, left, left == 1 ? "" : "s",
            first->type == MXE_OP_SEND ? "send to" : "receive from", first->peer, first->tag,
            first->bytes,
            state == MXE_STATE_QUEUED ? "its stream has not reached it"
                                      : "posted, no matching message yet",
            mxu_config.wait_report);
}

mxu_status_t mxe_op_wait_any_host(mxe_op_t *const *ops, int n, int64_t timeout_ns)
{
    uint64_t start = mxu_now_ns();
    uint64_t spin_ns = (uint64_t)mxu_config.wait_spin_us * 1000u;
    uint64_t report_ns = mxu_wait_report_ns();
    uint64_t next_report = start + report_ns;
    for (int i = 0; i < n; i++)
        if (ops[i])
            mxe_op_host_interest(ops[i]);
    for (;;) {
        /* Nothing left to wait for (every entry NULL: the caller's list was
         * built after the ops completed) counts as done, never as a wait. */
        int any = 0;
        for (int i = 0; i < n; i++) {
            if (!ops[i])
                continue;
            if (mxe_op_is_complete(ops[i]))
                return MXU_OK;
            any = 1;
        }
        if (!any)
            return MXU_OK;
        uint64_t now = mxu_now_ns();
        if (timeout_ns >= 0 && now - start >= (uint64_t)timeout_ns)
            return MXU_ERR_TIMED_OUT;
        if (now - start < spin_ns) {
            mxu_cpu_relax();
            continue;
        }
        if (report_ns && now >= next_report) {
            mxe_report_host_wait(ops, n, (double)(now - start) / 1e9);
            next_report = now + report_ns;
        }
        uint32_t key = mxu_event_prepare(&mxe.completion);
        int done = 0;
        for (int i = 0; i < n && !done; i++)
            done = ops[i] && mxe_op_is_complete(ops[i]);
        if (done) {
            mxu_event_cancel(&mxe.completion);
            return MXU_OK;
        }
        int64_t slice = 10000000; /* 10 ms: bounded even if a wake-up were lost */
        if (timeout_ns >= 0 && (int64_t)(start + (uint64_t)timeout_ns - now) < slice)
            slice = (int64_t)(start + (uint64_t)timeout_ns - now);
        mxu_event_wait(&mxe.completion, key, slice);
    }
}

mxu_status_t mxe_op_wait_host(mxe_op_t *op, int64_t timeout_ns)
{
    return mxe_op_wait_any_host(&op, 1, timeout_ns);
}

void mxe_op_cancel(mxe_op_t *op)
{
    if (op->type != MXE_OP_RECV || mxe_op_is_complete(op))
        return;
    /* a receive bound to an SX link is matched at its call (static
     * matching): MPI lets the cancel fail */
    if (op->sx)
        return;
    if (atomic_exchange(&op->cancel_requested, 1))
        return;
    mxe_cmd_t *cmd = calloc(1, sizeof(*cmd));
    if (!cmd) {
        MXU_LOG(MXU_LOG_ERROR, "out of memory: cancel request dropped");
        return;
    }
    cmd->kind = MXE_CMD_CANCEL;
    cmd->target = op;
    mxe_op_retain(op); /* dropped by the progress thread */
    mxe_push(cmd);
}

void mxe_set_result_writer(mxe_result_writer_t fn) { mxe.result_writer = fn; }

static mxu_status_t mxe_stream_wait_(mxa_stream_t *s, mxe_op_t *const *ops, void *const *targets,
                                     int n);

/* the ops' user_stream_wait hooks, after their wait is enqueued */
mxu_status_t mxe_stream_wait(mxa_stream_t *s, mxe_op_t *const *ops, void *const *targets, int n)
{
    int any = 0;
    for (int i = 0; i < n && !any; i++)
        any = ops[i] != NULL;
    if (!any) /* nothing to wait for enqueues nothing (so a capture may hold it) */
        return MXU_OK;
    MXU_TRY(mxa_stream_refuse_capture(s, "a stream wait"));
    int hooks = 0;
    for (int i = 0; i < n && !hooks; i++)
        hooks = ops[i] && ops[i]->user_stream_wait;
    if (!hooks)
        return mxe_stream_wait_(s, ops, targets, n);
    /* the hooks may run after the ops completed and were released by
     * others: keep them */
    for (int i = 0; i < n; i++)
        if (ops[i] && ops[i]->user_stream_wait)
            mxe_op_retain(ops[i]);
    mxu_status_t st = mxe_stream_wait_(s, ops, targets, n);
    for (int i = 0; i < n; i++)
        if (ops[i] && ops[i]->user_stream_wait) {
            if (st == MXU_OK)
                ops[i]->user_stream_wait(ops[i], s);
            mxe_op_release(ops[i]);
        }
    return st;
}

static mxu_status_t mxe_stream_wait_(mxa_stream_t *s, mxe_op_t *const *ops, void *const *targets,
                                     int n)
{
    if (s->kind == MXA_KIND_NONE || (s->kind == MXA_KIND_CUDA && mxe.one_hw_queue)) {
        /* No stream (or one hardware queue): the wait happens now, on the host. */
        for (int i = 0; i < n; i++) {
            if (!ops[i])
                continue;
            mxe_op_wait_host(ops[i], -1);
            if (targets && targets[i] && mxe.result_writer)
                mxe.result_writer(ops[i], targets[i]);
        }
        return MXU_OK;
    }
    mxe_wait_t *w = calloc(1, sizeof(*w) + (sizeof(mxe_op_t *) + sizeof(void *)) * (size_t)n);
    if (!w)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "stream wait allocation failed");
    w->targets = (void **)&w->ops[n];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!ops[i])
            continue;
        void *target = targets ? targets[i] : NULL;
        if (mxe_op_is_complete(ops[i])) {
            /* Nothing to wait for; its result can be written now. */
            if (target && mxe.result_writer)
                mxe.result_writer(ops[i], target);
            continue;
        }
        mxe_op_retain(ops[i]);
        w->targets[m] = target;
        w->ops[m++] = ops[i];
    }
    /* the stream-executed path: the ops the stream finishes itself leave
     * the host's list (their steps hold references of their own) */
    if (m > 0) {
        unsigned char drop_small[64];
        unsigned char *drop = m <= 64 ? drop_small : calloc((size_t)m, 1);
        if (drop) {
            memset(drop, 0, (size_t)m);
            mxe_sx_stream_wait(s, w->ops, w->targets, m, drop);
            int k = 0;
            for (int i = 0; i < m; i++) {
                if (drop[i]) {
                    mxe_op_release(w->ops[i]);
                    continue;
                }
                w->ops[k] = w->ops[i];
                w->targets[k] = w->targets[i];
                k++;
            }
            m = k;
            if (drop != drop_small)
                free(drop);
        }
    }
    if (m == 0) {
        /* nothing for the host (every op complete, or finished by the
         * stream itself): no wait point */
        free(w);
        return MXU_OK;
    }
    w->n = m;
    w->checked = 0;
    w->next = NULL;
    w->stream = s;
    w->cmd.kind = MXE_CMD_WAIT;
    w->cmd.target = w;
    w->seq = atomic_fetch_add_explicit(&s->next_wait_seq, 1, memory_order_relaxed) + 1;
    mxu_status_t status = s->backend->enqueue_wait(s, w->seq);
    if (status != MXU_OK) {
        for (int i = 0; i < m; i++)
            mxe_op_release(w->ops[i]);
        free(w);
        return status;
    }
    atomic_fetch_add_explicit(&mxe.live_waits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mxe.st_waits_submitted, 1, memory_order_relaxed);
    mxe_push(&w->cmd);
    return MXU_OK;
}

/* accel's stream-free hook: the stream has synchronized; have the progress
 * thread drop its state, and wait until it has. */
static void mxe_on_stream_free(mxa_stream_t *s)
{
    mxe_sx_forget_stream(s);
    if (!atomic_load(&mxe.running)) {
        free(s->engine_state); /* progress thread gone: nobody else touches it */
        s->engine_state = NULL;
        return;
    }
    mxe_run_sync_command(MXE_CMD_STREAM_FREE, s);
}

void mxe_peers_finalizing(void) { mxt_expect_disconnects(); }

void mxe_get_stats(mxe_stats_t *out)
{
    out->ops_submitted = atomic_load(&mxe.st_ops_submitted);
    out->ops_completed = atomic_load(&mxe.st_ops_completed);
    out->ops_failed = atomic_load(&mxe.st_ops_failed);
    out->ops_finished_later = atomic_load(&mxe.st_ops_finished_later);
    out->waits_submitted = atomic_load(&mxe.st_waits_submitted);
    out->waits_released = atomic_load(&mxe.st_waits_released);
    out->progress_sleeps = atomic_load(&mxe.st_sleeps);
    out->progress_wakeups = atomic_load(&mxe.st_wakeups);
    out->turnaround_ns = atomic_load(&mxe.st_turnaround_ns);
    out->turnaround_n = atomic_load(&mxe.st_turnaround_n);
    out->send_ns = atomic_load(&mxe.st_send_ns);
    out->send_n = atomic_load(&mxe.st_send_n);
    out->recv_ns = atomic_load(&mxe.st_recv_ns);
    out->recv_n = atomic_load(&mxe.st_recv_n);
    out->release_ns = atomic_load(&mxe.st_release_ns);
    out->release_n = atomic_load(&mxe.st_release_n);
    out->progress_cpu = atomic_load(&mxe.progress_cpu);
    for (int p = 0; p < MXE_NPATHS; p++) {
        out->path[p].sent = atomic_load(&mxe.st_path[p].sent);
        out->path[p].sent_bytes = atomic_load(&mxe.st_path[p].sent_bytes);
        out->path[p].received = atomic_load(&mxe.st_path[p].received);
        out->path[p].received_bytes = atomic_load(&mxe.st_path[p].received_bytes);
    }
    mxe_match_stats(&out->match_announced, &out->match_posted, &out->match_unexpected);
    mxe_sx_stats(out);
    out->ucx_endpoints =
        mxt_endpoint_summary(out->ucx_endpoint_kinds, sizeof(out->ucx_endpoint_kinds));
}

const char *mxe_path_name(mxe_path_t path)
{
    switch (path) {
    case MXE_PATH_UCX:
        return "ucx";
    case MXE_PATH_SX:
        return "sx";
    case MXE_NPATHS:
        break;
    }
    return "?";
}
