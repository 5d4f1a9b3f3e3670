/*
 * progress.c - the progress thread: the only thread that touches the UCX
 * worker and the per-stream engine state.
 *
 * Each pass: drain commands from application threads; start operations
 * whose stream trigger has been reached (in sequence order); drive UCX;
 * release stream waits whose operations have all completed (in sequence
 * order). When a pass finds nothing to do for PROGRESS_SPIN_US, the thread
 * sleeps: in epoll on its eventfd and the UCX wake-up fd, or, while
 * accelerator triggers must be polled, in short growing naps.
 */
#include "engine/engine_priv.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "topo/topo.h"
#include "accel/sx.h"
#include "transport/transport.h"
#include "util/settings.h"
#include "util/trace.h"

/* NVTX ranges of the progress thread (util/trace.h): each transfer from its
 * start (the stream reached it) to its completion, payload its bytes; each
 * stream wait from its arrival here to its release, payload its number of
 * operations. */
static mxu_trace_name_t mxe_tn_send = MXU_TRACE_NAME("send");
static mxu_trace_name_t mxe_tn_recv = MXU_TRACE_NAME("recv");
static mxu_trace_name_t mxe_tn_wait = MXU_TRACE_NAME("stream wait");

/* ------------------------------------------------------------ stream state */

/* Bind the progress thread near `busid` (NULL: near the calling thread's
 * NUMA node), unless the user chose a core or disabled binding. */
static void mxe_place(const char *busid)
{
    if (mxu_config.progress_cpu == -2)
        return;
    int cpu = mxo_choose_progress_cpu((int)mxu_config.progress_cpu, busid);
    if (cpu >= 0 && mxo_bind_self(cpu) == MXU_OK)
        atomic_store(&mxe.progress_cpu, cpu);
}

static mxe_sstate_t *mxe_sstate(mxa_stream_t *s)
{
    mxe_sstate_t *st = s->engine_state;
    if (st)
        return st;
    st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->stream = s;
    s->engine_state = st;
    /* First device stream seen: move next to its GPU (unless placed at init). */
    if (!mxe.placed_near_gpu && mxu_config.progress_cpu == -1) {
        const char *busid = mxa_stream_pci_busid(s);
        if (busid) {
            mxe_place(busid);
            mxe.placed_near_gpu = 1;
        }
    }
    return st;
}

static void mxe_activate(mxe_sstate_t *st)
{
    if (st->listed)
        return;
    st->listed = 1;
    st->next_active = mxe.active_streams;
    mxe.active_streams = st;
    if (st->stream->backend->needs_polling)
        mxe.polling_streams++;
}

/* ------------------------------------------------------------- completion */

static void mxe_live_link(mxe_op_t *op)
{
    op->prev_active = NULL;
    op->next_active = mxe.live_head;
    if (mxe.live_head)
        mxe.live_head->prev_active = op;
    mxe.live_head = op;
}

static void mxe_live_unlink(mxe_op_t *op)
{
    if (op->prev_active)
        op->prev_active->next_active = op->next_active;
    else if (mxe.live_head == op)
        mxe.live_head = op->next_active;
    if (op->next_active)
        op->next_active->prev_active = op->prev_active;
    op->next_active = op->prev_active = NULL;
}

static void mxe_op_publish(mxe_op_t *op);

static void mxe_finishing_unlink(mxe_op_t *op)
{
    for (mxe_op_t **pp = &mxe.finishing_head; *pp; pp = &(*pp)->next_finishing)
        if (*pp == op) {
            *pp = op->next_finishing;
            break;
        }
    op->next_finishing = NULL;
    op->finishing = 0;
}

/* Complete an op: the result fields other than `error` are already set.
 * The user_complete hook may hand work to a library stream (e.g. a device
 * unpack) and set user_finish: the completion is then published once that
 * work is done (mxe_poll_finishing), so the progress thread never blocks
 * on a stream. An op that is finishing already completes when that work
 * is done; at finalize's abort it finishes here, blocking (bounded by the
 * hook), with its own result. */
static void mxe_op_complete(mxe_op_t *op, mxu_status_t error)
{
    if (op->finishing) {
        if (!mxe.aborting)
            return; /* e.g. a receive step's late report: the message is here */
        mxe_finishing_unlink(op);
        op->user_finish(op, 1);
        mxe_op_publish(op);
        return;
    }
    op->result.error = error;
    if (op->user_complete)
        op->user_complete(op); /* result.bytes and .error are set */
    mxe_match_forget(op);      /* a receive completing unmatched leaves its posted list */
    if (op->user_finish) {
        atomic_fetch_add_explicit(&mxe.st_ops_finished_later, 1, memory_order_relaxed);
        op->finishing = 1;
        op->next_finishing = mxe.finishing_head;
        mxe.finishing_head = op;
        return;
    }
    mxe_op_publish(op);
}

/* Ops whose completion waits for their user_finish: publish the done ones. */
static unsigned mxe_poll_finishing(void)
{
    unsigned n = 0;
    mxe_op_t **pp = &mxe.finishing_head;
    while (*pp) {
        mxe_op_t *op = *pp;
        if (!op->user_finish(op, 0)) {
            pp = &op->next_finishing;
            continue;
        }
        *pp = op->next_finishing;
        op->next_finishing = NULL;
        op->finishing = 0;
        mxe_op_publish(op);
        n++;
    }
    return n;
}

/* The second half of mxe_op_complete: the op's result is final. */
static void mxe_op_publish(mxe_op_t *op)
{
    mxu_status_t error = op->result.error;
    mxu_trace_end(&op->trace);
    if (mxe.timing && op->t_start_ns) {
        op->t_done_ns = mxu_now_ns();
        if (op->type == MXE_OP_SEND)
            mxe_timer_add(&mxe.st_send_ns, &mxe.st_send_n, op->t_done_ns - op->t_start_ns);
        else
            mxe_timer_add(&mxe.st_recv_ns, &mxe.st_recv_n, op->t_done_ns - op->t_start_ns);
    }
    if (error != MXU_OK) {
        atomic_fetch_add_explicit(&mxe.st_ops_failed, 1, memory_order_relaxed);
    } else if (op->peer != MXE_PROC_NULL && !op->result.cancelled) {
        /* a message that went through a path */
        int path = op->sx_env_sx ? MXE_PATH_SX : MXE_PATH_UCX;
        if (op->type == MXE_OP_SEND) {
            atomic_fetch_add_explicit(&mxe.st_path[path].sent, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&mxe.st_path[path].sent_bytes, op->result.bytes,
                                      memory_order_relaxed);
        } else {
            atomic_fetch_add_explicit(&mxe.st_path[path].received, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&mxe.st_path[path].received_bytes, op->result.bytes,
                                      memory_order_relaxed);
        }
    }
    if (op->type == MXE_OP_RECV && op->sx)
        mxe_sx_on_complete(op); /* a step waiting for it stops */
    mxe_live_unlink(op);
    mxa_stream_t *s = op->stream;
    int engine_ref_free = !op->transport_active;
    atomic_store_explicit(&op->state, MXE_STATE_COMPLETE, memory_order_release);
    atomic_fetch_sub_explicit(&s->ops_in_flight, 1, memory_order_release);
    atomic_fetch_sub_explicit(&mxe.live_ops, 1, memory_order_release);
    atomic_fetch_add_explicit(&mxe.st_ops_completed, 1, memory_order_relaxed);
    mxe.waits_dirty = 1;
    mxu_event_notify(&mxe.completion);
    if (engine_ref_free)
        mxe_op_release(op);
}

static int mxe_remove_pending(mxe_op_t *op);

void mxe_sx_complete_from_step(mxe_op_t *op, mxu_status_t st)
{
    /* a receive step on the waiting stream can finish before this thread
     * has seen the receive's own trigger: the op leaves its stream's
     * pending list now (which holds no reference, and whose start would
     * make a complete op "started" again) */
    if (atomic_load_explicit(&op->state, memory_order_relaxed) == MXE_STATE_QUEUED)
        mxe_remove_pending(op);
    mxe_op_complete(op, st);
}

static void mxe_transport_done(void *user, mxu_status_t status, uint64_t sender_tag, size_t length)
{
    mxe_op_t *op = user;
    op->transport_active = 0;
    op->transport_handle = NULL;
    if (atomic_load_explicit(&op->state, memory_order_relaxed) == MXE_STATE_COMPLETE) {
        /* Force-completed at finalize; the transport has now let go. */
        mxe_op_release(op);
        return;
    }
    if (op->type == MXE_OP_RECV && op->sx_staging && status == MXU_OK) {
        mxe_sx_staged(op, length); /* its receive step copies it out */
        return;
    }
    if (op->type == MXE_OP_RECV) {
        if (status == MXU_OK || status == MXU_ERR_TRUNCATED) {
            (void)sender_tag; /* (context, source, sequence): the envelope says more */
            op->result.source = op->msg_src;
            op->result.tag = op->msg_tag;
            op->result.bytes = status == MXU_OK ? length : op->bytes;
        } else if (status == MXU_ERR_CANCELED && op->peer_failed) {
            status = MXU_ERR_PEER; /* cancelled by mxe_on_peer_failed */
            op->result.source = op->peer;
            op->result.tag = op->tag;
        } else if (status == MXU_ERR_CANCELED && mxe.aborting) {
            status = MXU_ERR_TIMED_OUT; /* cancelled by mxe_handle_abort */
        } else if (status == MXU_ERR_CANCELED && atomic_load(&op->cancel_requested)) {
            op->result.cancelled = 1;
            op->result.source = op->peer;
            op->result.tag = op->tag;
            status = MXU_OK;
        }
    } else {
        op->result.bytes = op->bytes;
    }
    if (status != MXU_OK && status != MXU_ERR_TRUNCATED && status != MXU_ERR_CANCELED &&
        !mxe.aborting) /* mxe_handle_abort reports its own */
        MXU_LOG(MXU_LOG_ERROR, "%s of %zu bytes %s rank %d (tag %d) failed: %s",
                op->type == MXE_OP_SEND ? "send" : "receive", op->bytes,
                op->type == MXE_OP_SEND ? "to" : "from", op->peer, op->tag,
                mxu_status_string(status));
    mxe_op_complete(op, status);
}

/* A bounce buffer of the SX path sent by UCX (mxe_op_start). */
typedef struct {
    void *buf;
    size_t bytes;
} mxe_bounce_t;

static void mxe_bounce_done(void *user, mxu_status_t status, uint64_t sender_tag, size_t length)
{
    (void)sender_tag;
    (void)length;
    mxe_bounce_t *bb = user;
    if (status != MXU_OK)
        MXU_LOG(MXU_LOG_ERROR, "send from an SX bounce buffer failed after local completion: %s",
                mxu_status_string(status));
    mxa_sx_bounce_free(bb->buf, bb->bytes);
    free(bb);
}

static void mxe_eager_done(void *user, mxu_status_t status, uint64_t sender_tag, size_t length)
{
    (void)sender_tag;
    (void)length;
    if (status != MXU_OK)
        MXU_LOG(MXU_LOG_ERROR, "buffered (eager) send failed after local completion: %s",
                mxu_status_string(status));
    free(user);
}

/* ------------------------------------------------------------------ start */

static void mxe_complete_cancelled(mxe_op_t *op)
{
    op->result.cancelled = 1;
    op->result.source = op->peer;
    op->result.tag = op->tag;
    mxe_op_complete(op, MXU_OK);
}

static int mxe_remove_pending(mxe_op_t *op);

/* Does op name world rank w, or (a wildcard receive) could w send to it? */
static int mxe_op_involves(const mxe_op_t *op, int w)
{
    if (op->peer >= 0)
        return op->peer_world == w;
    if (op->type != MXE_OP_RECV || op->peer != MXE_ANY_SOURCE || op->any_nmembers <= 0)
        return 0;
    if (!op->any_members)
        return w < op->any_nmembers;
    for (int i = 0; i < op->any_nmembers; i++)
        if (op->any_members[i] == w)
            return 1;
    return 0;
}

/* An op about to start with a peer that failed: the failed rank it involves,
 * or -1. */
static int mxe_op_failed_peer(const mxe_op_t *op)
{
    if (op->peer >= 0)
        return mxt_peer_failed(op->peer_world) ? op->peer_world : -1;
    int n = atomic_load_explicit(&mxe.nfailed, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (mxe_op_involves(op, mxe.failed_ranks[i]))
            return mxe.failed_ranks[i];
    return -1;
}

static void mxe_complete_peer_failed(mxe_op_t *op)
{
    op->result.source = op->peer;
    op->result.tag = op->tag;
    op->result.bytes = 0;
    mxe_op_complete(op, MXU_ERR_PEER);
}

/* The transport reports that world rank w failed (MPIX_ACC_PEER_ERRORS=1).
 * UCX completes the sends it holds for w with an error; here every other
 * live op that involves w completes with MXU_ERR_PEER: receives naming w,
 * posted or still waiting for their trigger, sends to w not started yet,
 * and wildcard receives whose communicator contains w (the documented
 * rule, doc/design.md section 8). Stream waits on them are then released
 * as usual. Ops started later with w fail at start (mxe_op_start). */
void mxe_on_peer_failed(int w)
{
    if (!mxe.failed_ranks) {
        mxe.failed_ranks = calloc((size_t)mxe.world_size, sizeof(int));
        if (!mxe.failed_ranks) {
            MXU_LOG(MXU_LOG_ERROR, "out of memory recording the failure of rank %d", w);
            return;
        }
    }
    int n = atomic_load_explicit(&mxe.nfailed, memory_order_relaxed);
    if (n >= mxe.world_size)
        return;
    mxe.failed_ranks[n] = w;
    atomic_store_explicit(&mxe.nfailed, n + 1, memory_order_release);

    int count = 0;
    mxe_op_t *op = mxe.live_head;
    while (op) {
        mxe_op_t *next = op->next_active;
        if (mxe_op_is_complete(op) || op->finishing || !mxe_op_involves(op, w)) {
            op = next;
            continue;
        }
        int state = atomic_load(&op->state);
        if (state == MXE_STATE_QUEUED) {
            mxe_remove_pending(op);
            mxe_match_forget(op);
            mxe_complete_peer_failed(op);
            count++;
        } else if (op->type == MXE_OP_RECV && !op->transport_active) {
            mxe_match_forget(op); /* started, no message matched yet */
            mxe_complete_peer_failed(op);
            count++;
        } else if (op->type == MXE_OP_RECV && op->transport_active && op->transport_handle) {
            /* completes through mxe_transport_done, maybe from inside */
            op->peer_failed = 1;
            mxt_cancel(op->transport_handle);
            count++;
        }
        op = next;
    }
    MXU_LOG(MXU_LOG_ERROR,
            "rank %d (in MPI_COMM_WORLD) failed: %d pending receive(s) and "
            "send(s) not yet started that involve it complete with the transport error "
            "(sends in flight complete through UCX)",
            w, count);
}

static void mxe_op_start(mxe_op_t *op)
{
    void *handle = NULL;
    mxu_status_t status;

    atomic_store_explicit(&op->state, MXE_STATE_STARTED, memory_order_relaxed);
    if (mxe.timing)
        op->t_start_ns = mxu_now_ns();
    op->trace = mxu_trace_start(op->type == MXE_OP_SEND ? &mxe_tn_send : &mxe_tn_recv, op->bytes);
    if (op->local) {
        if (op->local_start)
            op->local_start(op); /* may finish parts */
        if (op->local_parts == 0)
            mxe_op_complete(op, op->local_error);
        return;
    }
    if (op->peer == MXE_PROC_NULL) {
        op->result.source = MXE_PROC_NULL;
        op->result.tag = MXE_ANY_TAG;
        op->result.bytes = 0;
        mxe_op_complete(op, MXU_OK);
        return;
    }
    if (atomic_load_explicit(&mxe.nfailed, memory_order_relaxed) > 0 &&
        mxe_op_failed_peer(op) >= 0) {
        mxe_complete_peer_failed(op);
        return;
    }
    if (op->type == MXE_OP_RECV && op->peer >= 0 && mxu_config.peer_errors) {
        /* an endpoint to the sender, so that its failure is seen */
        status = mxt_watch_peer(op->peer_world);
        if (status != MXU_OK) {
            op->result.source = op->peer;
            op->result.tag = op->tag;
            mxe_op_complete(op, status);
            return;
        }
    }
    if (op->type == MXE_OP_SEND && op->sx) {
        /* the stream-executed path: the step ran before it raised this
         * trigger; the message is in the peer's ring or, if the slot was
         * taken, in our bounce buffer: sent by UCX from there. Either way
         * the user's buffer is free now. Announced now (pseq in announce
         * order: its receiver matches it by its channel ordinal). */
        void *bounce = NULL;
        op->sx_env_sx = mxe_sx_send_outcome(op, &bounce);
        mxe_match_send_called(op);
        mxe_match_flush();
        op->result.bytes = op->bytes;
        if (bounce) {
            mxe_bounce_t *bb = malloc(sizeof(*bb));
            if (!bb) {
                mxa_sx_bounce_free(bounce, op->bytes);
                mxe_op_complete(op, MXU_ERR_NO_MEMORY);
                return;
            }
            bb->buf = bounce;
            bb->bytes = op->bytes;
            uint64_t tag = mxe_match_data_tag(op->ctx_id, op->comm_rank, op->pseq);
            status = mxt_tag_send(op->peer_world, bounce, op->bytes, MXA_MEM_HOST, NULL, 0, tag,
                                  mxe_bounce_done, bb, &handle);
            if (status != MXU_OK) {
                mxa_sx_bounce_free(bounce, op->bytes);
                free(bb);
            }
            mxe_op_complete(op, status);
            return;
        }
        mxe_op_complete(op, MXU_OK);
        return;
    }
    if (op->type == MXE_OP_SEND) {
        if (op->match_dynamic) { /* matched in start order: announce it now */
            mxe_match_send_called(op);
            mxe_match_flush();
        }
        uint64_t tag = mxe_match_data_tag(op->ctx_id, op->comm_rank, op->pseq);
        if (op->bytes > 0 && op->bytes <= op->eager_limit && op->memtype == MXA_MEM_HOST &&
            !op->synchronous) {
            /* Buffered send: copy now, complete locally at once. */
            void *copy = malloc(op->bytes);
            if (!copy) {
                MXU_LOG(MXU_LOG_ERROR, "eager copy of %zu bytes failed", op->bytes);
                mxe_op_complete(op, MXU_ERR_NO_MEMORY);
                return;
            }
            memcpy(copy, op->buf, op->bytes);
            status = mxt_tag_send(op->peer_world, copy, op->bytes, MXA_MEM_HOST, NULL, 0, tag,
                                  mxe_eager_done, copy, &handle);
            if (status != MXU_OK)
                free(copy);
            op->result.bytes = op->bytes;
            mxe_op_complete(op, status);
            return;
        }
        op->transport_active = 1;
        status = mxt_tag_send(op->peer_world, op->buf, op->bytes, op->memtype, op->reg,
                              op->synchronous, tag, mxe_transport_done, op, &handle);
    } else {
        if (atomic_load(&op->cancel_requested) && !op->matched) {
            mxe_match_forget(op);
            mxe_complete_cancelled(op);
            return;
        }
        if (op->match_dynamic)
            mxe_match_recv_called(op); /* start order: register now */
        op->recv_ready = 1;
        if (op->sx)
            mxe_sx_recv_ready(op); /* a library receive step waiting for this */
        if (op->matched)           /* (post last: the op may complete and go inside) */
            mxe_recv_post_data(op);
        return; /* else posted when its message is announced (match.c) */
    }
    if (status != MXU_OK) {
        op->transport_active = 0;
        mxe_op_complete(op, status);
        return;
    }
    /* handle == NULL: the callback already ran (and may have freed op). */
    if (handle)
        op->transport_handle = handle;
}

void mxe_op_local_part_done(mxe_op_t *op, mxu_status_t error)
{
    if (error != MXU_OK && op->local_error == MXU_OK)
        op->local_error = error;
    if (--op->local_parts == 0 &&
        atomic_load_explicit(&op->state, memory_order_relaxed) == MXE_STATE_STARTED)
        mxe_op_complete(op, op->local_error);
}

/* A receive that is matched and whose stream reached it: receive its data,
 * which has a tag of its own (context, source, sequence). */
void mxe_recv_post_data(mxe_op_t *op)
{
    void *handle = NULL;
    uint64_t tag = mxe_match_data_tag(op->ctx_id, op->msg_src, op->pseq);
    void *staging = op->sx ? mxe_sx_recv_staging(op) : NULL;
    void *buf = staging ? staging : op->buf;
    size_t cap = staging ? op->sx_staging_cap : op->bytes;
    if (!staging && op->sx_untriggered && op->msg_bytes > 0) {
        /* no staging for it (larger than any bounce buffer, so longer
         * than the receive takes): the buffer may still be in use on the
         * stream -- receive nothing, truncated */
        buf = NULL;
        cap = 0;
    }
    mxa_memtype_t memtype = staging ? MXA_MEM_HOST : op->memtype;
    op->transport_active = 1;
    if (op->sx)
        mxe_sx_posted_ucx(op); /* before the post: the op may complete inside it */
    mxu_status_t status = mxt_tag_recv(buf, cap, memtype, staging ? NULL : op->reg, tag, UINT64_MAX,
                                       mxe_transport_done, op, &handle);
    if (status != MXU_OK) {
        op->transport_active = 0;
        op->result.source = op->msg_src;
        op->result.tag = op->msg_tag;
        mxe_op_complete(op, status);
        return;
    }
    if (handle) /* NULL: the callback already ran (and may have freed op) */
        op->transport_handle = handle;
}

/* --------------------------------------------------------------- commands */

static void mxe_insert_pending(mxe_sstate_t *st, mxe_op_t *op)
{
    op->next_pending = NULL;
    if (!st->pending_tail) {
        st->pending_head = st->pending_tail = op;
    } else if (st->pending_tail->trigger_seq < op->trigger_seq) {
        st->pending_tail->next_pending = op;
        st->pending_tail = op;
    } else { /* enqueued by several threads: keep sequence order */
        mxe_op_t **pp = &st->pending_head;
        while (*pp && (*pp)->trigger_seq < op->trigger_seq)
            pp = &(*pp)->next_pending;
        op->next_pending = *pp;
        *pp = op;
        if (!op->next_pending)
            st->pending_tail = op;
    }
}

static int mxe_remove_pending(mxe_op_t *op)
{
    mxe_sstate_t *st = op->stream->engine_state;
    if (!st)
        return 0;
    mxe_op_t *prev = NULL;
    for (mxe_op_t *p = st->pending_head; p; prev = p, p = p->next_pending) {
        if (p != op)
            continue;
        if (prev)
            prev->next_pending = p->next_pending;
        else
            st->pending_head = p->next_pending;
        if (st->pending_tail == p)
            st->pending_tail = prev;
        p->next_pending = NULL;
        return 1;
    }
    return 0;
}

static void mxe_insert_wait(mxe_sstate_t *st, mxe_wait_t *w)
{
    w->next = NULL;
    if (!st->wait_tail) {
        st->wait_head = st->wait_tail = w;
    } else if (st->wait_tail->seq < w->seq) {
        st->wait_tail->next = w;
        st->wait_tail = w;
    } else {
        mxe_wait_t **pp = &st->wait_head;
        while (*pp && (*pp)->seq < w->seq)
            pp = &(*pp)->next;
        w->next = *pp;
        *pp = w;
        if (!w->next)
            st->wait_tail = w;
    }
}

static void mxe_start_before(mxa_stream_t *s, uint64_t trigger);

static void mxe_handle_op(mxe_op_t *op)
{
    mxe_live_link(op);
    /* Commands arrive in call order: number sends and register receives
     * now (call-order matching), unless the communicator matches in start
     * order. */
    if (!op->match_dynamic && op->peer != MXE_PROC_NULL) {
        if (op->type == MXE_OP_SEND) {
            if (!op->sx) /* SX: announced at its start */
                mxe_match_send_called(op);
        } else {
            mxe_match_recv_called(op);
        }
    }
    if (op->after_stream)
        mxe_start_before(op->after_stream, op->after_trigger);
    if (op->trigger_seq == 0) {
        mxe_op_start(op);
        return;
    }
    mxe_sstate_t *st = mxe_sstate(op->stream);
    if (!st) {
        MXU_LOG(MXU_LOG_ERROR, "out of memory for stream state");
        mxe_op_complete(op, MXU_ERR_NO_MEMORY);
        return;
    }
    mxe_insert_pending(st, op);
    mxe_activate(st);
}

static void mxe_handle_wait(mxe_wait_t *w)
{
    mxe_sstate_t *st = mxe_sstate(w->stream);
    if (!st) {
        /* Cannot track it: release at once rather than leave the stream stuck. */
        MXU_LOG(MXU_LOG_ERROR, "out of memory for stream state; releasing wait %llu",
                (unsigned long long)w->seq);
        w->stream->backend->release(w->stream, w->seq);
        for (int i = 0; i < w->n; i++)
            mxe_op_release(w->ops[i]);
        free(w);
        atomic_fetch_sub(&mxe.live_waits, 1);
        return;
    }
    w->trace = mxu_trace_start(&mxe_tn_wait, (uint64_t)w->n);
    mxe_insert_wait(st, w);
    mxe_activate(st);
    mxe.waits_dirty = 1;
}

static void mxe_handle_cancel(mxe_op_t *op)
{
    /* A receive can be cancelled until a message is matched to it (MPI
     * lets a cancel fail): then it leaves its context's posted list. (An op
     * whose own command is not processed yet is cancelled by mxe_op_start,
     * which checks the flag.) */
    int state = atomic_load(&op->state);
    if (!mxe_op_is_complete(op) && !op->matched) {
        if (state == MXE_STATE_QUEUED) {
            if (mxe_remove_pending(op)) {
                mxe_match_forget(op);
                mxe_complete_cancelled(op);
            }
        } else if (state == MXE_STATE_STARTED && mxe_match_forget(op)) {
            mxe_complete_cancelled(op);
        }
    }
    mxe_op_release(op);
}

/* A synchronous command (mxe_run_sync_command) is carried out: wake its
 * waiting application thread. */
static void mxe_cmd_done(mxe_cmd_t *cmd)
{
    atomic_store_explicit((_Atomic int *)&cmd->done, 1, memory_order_release);
    mxu_event_notify(&mxe.completion);
}

/* A stream is being freed by its owner (it has synchronized): forget it. */
static void mxe_handle_stream_free(mxe_cmd_t *cmd)
{
    mxa_stream_t *s = cmd->target;
    mxe_sstate_t *st = s->engine_state;
    if (st) {
        if (st->pending_head || st->wait_head)
            MXU_LOG(MXU_LOG_WARN, "stream %p freed with operations or waits pending", s->handle);
        for (mxe_sstate_t **pp = &mxe.active_streams; *pp; pp = &(*pp)->next_active) {
            if (*pp == st) {
                *pp = st->next_active;
                if (s->backend->needs_polling)
                    mxe.polling_streams--;
                break;
            }
        }
        s->engine_state = NULL;
        free(st);
    }
    mxe_cmd_done(cmd);
}

static const char *mxe_kind_name(mxa_kind_t k)
{
    return k == MXA_KIND_HOST ? "host stream" : k == MXA_KIND_CUDA ? "CUDA stream" : "no stream";
}

static int mxe_handle_abort(void)
{
    int count = 0;
    mxe.aborting = 1;
    mxe_sx_abort_steps(); /* receive steps still waiting stop */
    mxe_op_t *op = mxe.live_head;
    while (op) {
        mxe_op_t *next = op->next_active;
        if (op->finishing) { /* its message is here: finish it, keep its result */
            mxe_op_complete(op, op->result.error);
            op = next;
            continue;
        }
        int state = atomic_load(&op->state);
        const char *what = op->type == MXE_OP_SEND ? "send" : "receive";
        op->result.source = op->peer;
        op->result.tag = op->tag;
        if (state == MXE_STATE_QUEUED) {
            uint64_t reached = op->stream->backend->poll_trigger(op->stream);
            MXU_LOG(MXU_LOG_ERROR,
                    "pending at finalize: %s of %zu bytes %s rank %d (tag %d, context %u) "
                    "on %s %p: the stream never reached it (stream at trigger %llu, "
                    "operation is %llu); cancelled",
                    what, op->bytes, op->type == MXE_OP_SEND ? "to" : "from", op->peer, op->tag,
                    op->ctx_id, mxe_kind_name(op->stream->kind), op->stream->handle,
                    (unsigned long long)reached, (unsigned long long)op->trigger_seq);
            mxe_remove_pending(op);
            mxe_match_forget(op);
        } else {
            mxe_match_forget(op);
            MXU_LOG(MXU_LOG_ERROR,
                    "pending at finalize: %s of %zu bytes %s rank %d (tag %d, context %u) "
                    "on %s %p: started but %s; cancelled",
                    what, op->bytes, op->type == MXE_OP_SEND ? "to" : "from", op->peer, op->tag,
                    op->ctx_id, mxe_kind_name(op->stream->kind), op->stream->handle,
                    op->type == MXE_OP_RECV ? "no matching message arrived"
                                            : "the receiver never took the data");
            /* UCX may call the receive's callback from inside the cancel:
             * mxe_transport_done then completes the op (with
             * MXU_ERR_TIMED_OUT, as mxe.aborting is set). */
            if (op->type == MXE_OP_RECV && op->transport_active && op->transport_handle)
                mxt_cancel(op->transport_handle);
        }
        if (!mxe_op_is_complete(op))
            mxe_op_complete(op, MXU_ERR_TIMED_OUT);
        count++;
        op = next;
    }
    return count;
}

/* A device context the application met after start-up (mxa_set_context_hook):
 * UCX's first use of its device, here, while the application thread waits
 * in mxe_warm_context and no stream of that context can wait for us. */
static void mxe_handle_warm_context(mxe_cmd_t *cmd)
{
    if (mxa_context_push(cmd->target) == 0) {
        mxu_status_t st = mxt_warm_memory(1);
        mxa_context_pop();
        MXU_LOG(st == MXU_OK ? MXU_LOG_DEBUG : MXU_LOG_INFO,
                "UCX warm-up for device context %p: %s", cmd->target, mxu_status_string(st));
    }
    mxe_cmd_done(cmd);
}

static unsigned mxe_drain_commands(void)
{
    unsigned n = 0;
    mxu_mpsc_node_t *node;
    while ((node = mxu_mpsc_pop(&mxe.cmdq)) != NULL) {
        mxe_cmd_t *cmd = MXU_CONTAINER_OF(node, mxe_cmd_t, node);
        n++;
        switch (cmd->kind) {
        case MXE_CMD_OP:
            mxe_handle_op(cmd->target);
            break;
        case MXE_CMD_WAIT:
            mxe_handle_wait(cmd->target);
            break;
        case MXE_CMD_CANCEL:
            mxe_handle_cancel(cmd->target);
            free(cmd);
            break;
        case MXE_CMD_STREAM_FREE:
            mxe_handle_stream_free(cmd);
            break;
        case MXE_CMD_WARM_CONTEXT:
            mxe_handle_warm_context(cmd);
            break;
        case MXE_CMD_MEM_REG:
            mxe_handle_mem_reg(cmd->target);
            mxe_cmd_done(cmd);
            break;
        case MXE_CMD_MEM_DEREG:
            mxt_mem_deregister(cmd->target);
            free(cmd);
            break;
        case MXE_CMD_SX_STEP:
            mxe_sx_handle_step(cmd->target);
            free(cmd);
            break;
        case MXE_CMD_SX_WATCH:
            mxe_sx_handle_watch(cmd->target);
            free(cmd);
            break;
        case MXE_CMD_ABORT:
            free(cmd);
            atomic_store(&mxe.aborted_count, mxe_handle_abort());
            mxe.waits_dirty = 1;
            mxe.abort_pending = 1;
            break;
        }
    }
    if (n)
        mxe_match_flush(); /* the announcements of the sends just called */
    return n;
}

/* ------------------------------------------------------- triggers & waits */

/* Start, in order, st's pending ops whose triggers are up to `upto`. */
static unsigned mxe_start_pending(mxe_sstate_t *st, uint64_t upto)
{
    unsigned n = 0;
    while (st->pending_head && st->pending_head->trigger_seq <= upto) {
        mxe_op_t *op = st->pending_head;
        st->pending_head = op->next_pending;
        if (!st->pending_head)
            st->pending_tail = NULL;
        op->next_pending = NULL;
        mxe_op_start(op);
        n++;
    }
    return n;
}

/* An op made on host stream s's thread (mxe_op_submit_on) is about to
 * start: first the ops of s whose triggers that thread wrote before making
 * it (they are visible: the command queue's pop acquires its push). */
static void mxe_start_before(mxa_stream_t *s, uint64_t trigger)
{
    s->fires_started++;
    mxe_sstate_t *st = s->engine_state;
    if (!st)
        return;
    if (trigger > st->trigger_seen)
        st->trigger_seen = trigger;
    (void)mxe_start_pending(st, trigger);
}

static unsigned mxe_poll_triggers(void)
{
    unsigned n = 0;
    for (mxe_sstate_t *st = mxe.active_streams; st; st = st->next_active) {
        if (!st->pending_head)
            continue;
        uint64_t v = st->stream->backend->poll_trigger(st->stream);
        /* an op the stream's thread made before writing v (a graph's fire
         * entry) is still in the command queue: it starts first, at the
         * next drain (read after v: v's release store published it) */
        if (atomic_load_explicit(&st->stream->fires_made, memory_order_relaxed) >
            st->stream->fires_started) {
            n++;
            continue;
        }
        if (v > st->trigger_seen) {
            st->trigger_seen = v;
            /* the stream passed its last released wait and reached a
             * trigger: the GPU-side turnaround as the engine sees it */
            if (mxe.timing && st->t_release_ns && st->pending_head &&
                st->pending_head->trigger_seq <= v) {
                mxe_timer_add(&mxe.st_turnaround_ns, &mxe.st_turnaround_n,
                              mxu_now_ns() - st->t_release_ns);
                st->t_release_ns = 0;
            }
        }
        n += mxe_start_pending(st, st->trigger_seen);
    }
    return n;
}

/* Release, in order, the waits whose ops have completed; drop streams that
 * have nothing left from the active list. */
static unsigned mxe_check_waits(void)
{
    unsigned n = 0;
    mxe_sstate_t **pp = &mxe.active_streams;
    while (*pp) {
        mxe_sstate_t *st = *pp;
        uint64_t released = st->released;
        while (st->wait_head) {
            mxe_wait_t *w = st->wait_head;
            while (w->checked < w->n && mxe_op_is_complete(w->ops[w->checked]))
                w->checked++;
            if (w->checked < w->n)
                break;
            st->wait_head = w->next;
            if (!st->wait_head)
                st->wait_tail = NULL;
            released = w->seq;
            if (mxe.timing) {
                uint64_t last = 0, now = mxu_now_ns();
                for (int i = 0; i < w->n; i++)
                    if (w->ops[i]->t_done_ns > last)
                        last = w->ops[i]->t_done_ns;
                if (last)
                    mxe_timer_add(&mxe.st_release_ns, &mxe.st_release_n, now - last);
            }
            for (int i = 0; i < w->n; i++) {
                if (w->targets[i] && mxe.result_writer)
                    mxe.result_writer(w->ops[i], w->targets[i]);
                mxe_op_release(w->ops[i]);
            }
            mxu_trace_end(&w->trace);
            free(w);
            atomic_fetch_sub_explicit(&mxe.live_waits, 1, memory_order_release);
            atomic_fetch_add_explicit(&mxe.st_waits_released, 1, memory_order_relaxed);
            n++;
        }
        if (released != st->released) {
            st->released = released;
            st->stream->backend->release(st->stream, released);
            if (mxe.timing)
                st->t_release_ns = mxu_now_ns();
        }
        if (!st->pending_head && !st->wait_head) {
            *pp = st->next_active;
            st->listed = 0;
            st->next_active = NULL;
            if (st->stream->backend->needs_polling)
                mxe.polling_streams--;
        } else {
            pp = &st->next_active;
        }
    }
    if (n)
        mxu_event_notify(&mxe.completion);
    return n;
}

/* ------------------------------------------------------------------ sleep */

static int mxe_ready_without_sleep(void)
{
    if (!mxu_mpsc_empty(&mxe.cmdq))
        return 1;
    for (mxe_sstate_t *st = mxe.active_streams; st; st = st->next_active)
        if (st->pending_head &&
            st->stream->backend->poll_trigger(st->stream) >= st->pending_head->trigger_seq)
            return 1;
    return 0;
}

static void mxe_nap(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

static void mxe_sleep(uint64_t *nap_ns)
{
    atomic_fetch_add_explicit(&mxe.st_sleeps, 1, memory_order_relaxed);
    int must_poll =
        mxe.polling_streams > 0 || mxt_event_fd() < 0 || mxe_sx_watching() || mxe.finishing_head;
    for (int i = 0; i < mxe.npollers && !must_poll; i++)
        must_poll = mxe.poller_busy[i]();
    if (must_poll) {
        /* Accelerator triggers or UCX without wake-up: nap, growing to the cap. */
        uint64_t cap =
            (uint64_t)(mxu_config.progress_poll_us > 0 ? mxu_config.progress_poll_us : 1) * 1000u;
        *nap_ns = *nap_ns ? *nap_ns * 2 : 1000;
        if (*nap_ns > cap)
            *nap_ns = cap;
        mxe_nap(*nap_ns);
        return;
    }
    atomic_store_explicit(&mxe.sleeping, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (mxe_ready_without_sleep() || atomic_load(&mxe.stop) || mxt_arm() != MXU_OK) {
        atomic_store_explicit(&mxe.sleeping, 0, memory_order_relaxed);
        return;
    }
    struct epoll_event ev[2];
    /* The timeout only bounds the damage of a lost wake-up; none is expected. */
    int rc = epoll_wait(mxe.epoll_fd, ev, 2, 100);
    atomic_store_explicit(&mxe.sleeping, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&mxe.st_wakeups, 1, memory_order_relaxed);
    if (rc < 0 && errno != EINTR)
        MXU_LOG(MXU_LOG_WARN, "epoll_wait: %s", strerror(errno));
    uint64_t drained;
    while (read(mxe.wake_fd, &drained, sizeof(drained)) == (ssize_t)sizeof(drained))
        ;
}

/* ------------------------------------------------------------------- main */

void *mxe_progress_main(void *arg)
{
    (void)arg;
    mxe.placed_near_gpu = mxe.gpu_busid[0] != '\0';
    mxa_thread_relax_capture();
    mxe_place(mxe.placed_near_gpu ? mxe.gpu_busid : NULL);
    uint64_t spin_ns =
        (uint64_t)(mxu_config.progress_spin_us > 0 ? mxu_config.progress_spin_us : 0) * 1000u;
    uint64_t last_work = mxu_now_ns();
    uint64_t nap_ns = 0;

    while (!atomic_load_explicit(&mxe.stop, memory_order_acquire)) {
        unsigned work = mxe_drain_commands();
        if (mxe.active_streams)
            work += mxe_poll_triggers();
        work += mxt_progress();
        if (mxe_sx_watching())
            work += mxe_sx_poll();
        work += mxe_sx_serve();
        for (int i = 0; i < mxe.npollers; i++)
            work += mxe.poller[i]();
        if (mxe.finishing_head)
            work += mxe_poll_finishing();
        if (mxe.waits_dirty) {
            mxe.waits_dirty = 0;
            work += mxe_check_waits();
        }
        if (mxe.abort_pending) {
            mxe.abort_pending = 0;
            atomic_store(&mxe.abort_done, 1);
            mxu_event_notify(&mxe.completion);
        }
        if (work) {
            last_work = mxu_now_ns();
            nap_ns = 0;
            continue;
        }
        if (mxu_now_ns() - last_work < spin_ns) {
            /* Spin, but give the core away if another thread wants it: with
             * more threads than cores (several ranks per core) a hard spin
             * would delay the very threads we wait for. */
            sched_yield();
            continue;
        }
        mxe_sleep(&nap_ns);
    }
    return NULL;
}
