/*
 * engine.h - operations, stream ordering, the progress thread.
 *
 * Layering: util <- accel, transport, topo <- engine <- interpose.
 * The engine knows streams (accel) and the transport (UCX) but not MPI: the
 * interposition layer translates communicators, datatypes and requests.
 *
 * Threads. Application threads call mxe_isend/mxe_irecv/mxe_stream_wait;
 * these allocate sequence numbers on the stream, enqueue the stream points
 * (trigger/wait) through the accel backend, and hand a command to the
 * progress thread through a lock-free MPSC queue. They never block on
 * communication and never call UCX. The progress thread owns the UCX worker:
 * it starts operations whose trigger has been reached, drives UCX, completes
 * operations and releases stream waits in order.
 *
 * Tag layout (64-bit UCX tag):
 *   bits 63..44  matching context (communicator id, 20 bits)
 *   bits 43..24  source rank in that communicator (20 bits)
 *   bits 23..0   user tag (24 bits)
 */
#ifndef MX_ENGINE_H
#define MX_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/accel.h"
#include "util/mpsc.h"
#include "util/status.h"
#include "util/trace.h"

#define MXE_CTX_BITS 20
#define MXE_SRC_BITS 20
#define MXE_TAG_BITS 24
#define MXE_CTX_MAX ((1u << MXE_CTX_BITS) - 1)
/* Context spaces: the top three context bits say what a context is for.
 * Communicators' point-to-point contexts are below MXE_CTX_COMM_LIMIT;
 * MXE_CTX_COLL | ctx is a communicator's collective context (the library's
 * stream-ordered collectives, interpose/streamcoll.c); partitioned
 * requests (interpose/partitioned.c) exchange their set-up on
 * MXE_CTX_PART_SEND | ctx (the sender's description) and
 * MXE_CTX_PART_RECV | ctx (the receiver's), and a host proxy sends their
 * partitions on MXE_CTX_PART_DATA | q, q the receiver's number of the
 * pair (partition p as tag p, the peers' world ranks as sources). */
#define MXE_CTX_SPACE_SHIFT (MXE_CTX_BITS - 3)
#define MXE_CTX_COMM_LIMIT (1u << MXE_CTX_SPACE_SHIFT)
#define MXE_CTX_COLL (4u << MXE_CTX_SPACE_SHIFT)
#define MXE_CTX_PART_SEND (5u << MXE_CTX_SPACE_SHIFT)
#define MXE_CTX_PART_RECV (6u << MXE_CTX_SPACE_SHIFT)
#define MXE_CTX_PART_DATA (7u << MXE_CTX_SPACE_SHIFT)
#define MXE_RANK_MAX ((1 << MXE_SRC_BITS) - 1) /* ranks 0..MXE_RANK_MAX-1 */
#define MXE_TAG_MAX ((1 << MXE_TAG_BITS) - 1)
/* With CUDA, jobs up to this size connect all endpoints at MPI_Init. */
#define MXE_EAGER_CONNECT_MAX 1024

#define MXE_ANY_SOURCE (-1)
#define MXE_ANY_TAG (-1)
#define MXE_PROC_NULL (-2)

static inline uint64_t mxe_tag_make(uint32_t ctx, uint32_t src, uint32_t tag)
{
    return ((uint64_t)ctx << (MXE_SRC_BITS + MXE_TAG_BITS)) | ((uint64_t)src << MXE_TAG_BITS) |
           (uint64_t)tag;
}
static inline int mxe_tag_source(uint64_t t)
{
    return (int)((t >> MXE_TAG_BITS) & ((1u << MXE_SRC_BITS) - 1));
}
static inline int mxe_tag_user(uint64_t t) { return (int)(t & ((1u << MXE_TAG_BITS) - 1)); }

/* A communicator as the engine sees it (owned by the caller; read during
 * the call only). */
typedef struct {
    uint32_t ctx_id; /* matching context, agreed by all members */
    int rank;        /* this process's rank in it */
    int size;
    const int *world_ranks; /* comm rank -> transport (world) rank; NULL: identity */
    int match_dynamic;      /* mpix_acc_match=dynamic: match in start order, not call order */
    int sx; /* no wildcard receives on any member (MPI-4 assertions) and call order: messages
               between processes of a node may take the stream-executed path (path.c) */
} mxe_comm_t;

typedef enum { MXE_OP_SEND = 0, MXE_OP_RECV = 1 } mxe_op_type_t;

typedef enum {
    MXE_STATE_QUEUED = 0,   /* handed to the engine, trigger not reached */
    MXE_STATE_STARTED = 1,  /* posted to the transport */
    MXE_STATE_COMPLETE = 2, /* result valid */
} mxe_op_state_t;

/* Result of an operation, valid once the op is complete. */
typedef struct {
    int source;         /* recv: sender's rank in the comm; MXE_PROC_NULL for proc-null */
    int tag;            /* recv: the message tag; MXE_ANY_TAG for proc-null */
    size_t bytes;       /* bytes received (recv) or sent */
    mxu_status_t error; /* MXU_OK, MXU_ERR_TRUNCATED, MXU_ERR_CANCELED, MXU_ERR_TRANSPORT, ... */
    int cancelled;
} mxe_result_t;

typedef struct mxe_op mxe_op_t;
typedef struct mxe_wait mxe_wait_t;

/* A command handed from application threads to the progress thread. */
typedef enum {
    MXE_CMD_OP = 0,
    MXE_CMD_WAIT = 1,
    MXE_CMD_CANCEL = 2,
    MXE_CMD_ABORT = 3,
    MXE_CMD_STREAM_FREE = 4,
    MXE_CMD_WARM_CONTEXT = 5,
    MXE_CMD_SX_STEP = 6,   /* run a bound receive's step on a library stream */
    MXE_CMD_SX_WATCH = 7,  /* a receive step was enqueued: watch its record */
    MXE_CMD_MEM_REG = 8,   /* register memory with the transport (synchronous) */
    MXE_CMD_MEM_DEREG = 9, /* drop such a registration */
} mxe_cmd_kind_t;
typedef struct {
    mxu_mpsc_node_t node;
    mxe_cmd_kind_t kind;
    void *target;     /* the op, wait or stream */
    _Atomic int done; /* synchronous commands: set by the progress thread */
} mxe_cmd_t;

/* Writes an op's result to a caller-supplied target (an MPI_Status) when a
 * stream wait is released, or at once if the op had already completed.
 * Called on the progress thread or the calling thread. */
typedef void (*mxe_result_writer_t)(mxe_op_t *op, void *target);
void mxe_set_result_writer(mxe_result_writer_t fn);

struct mxe_op {
    /* ---- fixed at creation ---- */
    mxe_op_type_t type;
    mxa_stream_t *stream; /* stream whose trigger starts it */
    uint64_t trigger_seq; /* 0: start at once (none stream, early recv) */
    void *buf;
    size_t bytes;
    int peer;       /* dest/source comm rank, or MXE_ANY_SOURCE / MXE_PROC_NULL */
    int peer_world; /* transport rank of dest (send) */
    int tag;        /* user tag or MXE_ANY_TAG */
    uint32_t ctx_id;
    int comm_rank;      /* own rank in the comm (send: goes into the tag) */
    size_t eager_limit; /* send: copy into a library buffer up to this size */
    int synchronous;    /* send: completes only once matched (MPI_Ssend) */
    int post_early;     /* recv: posted at submit time, no trigger */
    int memtype;        /* mxa_memtype_t */
    void *reg;          /* a registration covering buf (mxe_mem_register), or NULL; the
                           creator's, set before submit */

    /* ---- result ---- */
    _Atomic int state;   /* mxe_op_state_t */
    mxe_result_t result; /* written by the progress thread before COMPLETE */

    /* ---- interposition layer's fields ---- */
    void *user; /* free for the interposition layer */
    /* called by the progress thread when a receive completes, before the
     * completion is published (e.g. unpack a derived datatype: stream waits
     * then wait for the host); and when the op is freed, with `user` */
    void (*user_complete)(struct mxe_op *op); /* at completion, result (error too) set */
    /* set by user_complete when it handed work to a library stream (e.g. a
     * device unpack): the progress thread calls it at every pass and
     * publishes the completion once it returns 1 (the work is done; it may
     * set result.error); block: wait for the work, bounded (finalize) */
    int (*user_finish)(struct mxe_op *op, int block);
    void (*user_free)(void *user);
    /* called by mxe_stream_wait on the waiting thread, after the wait (point
     * or step) for the op is enqueued on s, for every op of the wait (ones
     * already complete too): e.g. enqueue a device unpack behind it */
    void (*user_stream_wait)(struct mxe_op *op, mxa_stream_t *s);
    int recv_fence;       /* recv: a stream-executed step fences before its record */
    uint64_t user_handle; /* e.g. the MPI_Request handle */
    uint64_t user_aux;    /* e.g. the MPI_Comm the op was made on */
    int user_flags;
    int user_origin;

    /* ---- local ops (mxe_op_create_local) ---- */
    int local;                              /* no message of its own */
    int local_parts;                        /* parts not done yet (progress thread) */
    mxu_status_t local_error;               /* the first part's error */
    void (*local_start)(struct mxe_op *op); /* progress thread, when its stream reached it */

    /* ---- engine private ---- */
    _Atomic int refs;
    _Atomic int cancel_requested;
    mxe_cmd_t cmd;          /* command queue link */
    int transport_active;   /* posted to UCX, callback pending */
    mxe_op_t *next_pending; /* per-stream pending-trigger list */
    uint64_t t_start_ns;    /* phase timers (mxe.timing): started, completed */
    uint64_t t_done_ns;
    mxu_trace_range_t trace; /* NVTX range: started -> completed (progress thread) */
    mxe_op_t *next_active;   /* engine list of all live ops (finalize report) */
    int finishing;           /* user_finish pending: in mxe.finishing_head's list */
    mxe_op_t *next_finishing;
    mxe_op_t *prev_active;
    mxe_wait_t *waiter; /* stream wait depending on this op */
    void *transport_handle;
    void *eager_copy;
    int peer_failed;  /* recv cancelled because its peer failed (MXU_ERR_PEER) */
    int any_nmembers; /* MPI_ANY_SOURCE recv with MPIX_ACC_PEER_ERRORS: comm size */
    int *any_members; /* its world ranks (copied; NULL: ranks 0..any_nmembers-1) */

    /* ---- matching (match.c; progress thread) ---- */
    int match_dynamic;     /* announce/register at start, not at the call */
    int registered;        /* recv: in its context's posted list, or matched */
    int matched;           /* recv: bound to a message (msg_* valid) */
    int recv_ready;        /* recv: its stream reached it: the data may land */
    uint64_t pseq;         /* send: its pair sequence; recv: the matched message's */
    int msg_src;           /* recv: the matched message's source (comm rank) */
    int msg_tag;           /* recv: its tag */
    size_t msg_bytes;      /* recv: its size */
    mxe_op_t *next_posted; /* recv: posted-receive list of its context */
    mxe_op_t *prev_posted;
    /* made on the thread of host stream `after_stream` (mxe_op_submit_on):
     * that stream's ops up to trigger after_trigger start before it */
    mxa_stream_t *after_stream;
    uint64_t after_trigger;

    /* ---- stream-executed path (path.c) ---- */
    int sx_comm;                 /* made on an SX communicator */
    int sx_dynamic;              /* ... that matches in start order: MXE_ENV_DYN (match.c) */
    int sx;                      /* send: carried by its SX link; recv: bound to one (sx_k) */
    uint64_t sx_k;               /* ordinal in its channel (context, sender, tag), call order */
    uint64_t sx_n;               /* send: its number on the link */
    struct mxe_sx_peer *sx_peer; /* the peer's links */
    void *sx_rec;                /* its step's record (mxa_sx_record_t) */
    void *sx_bounce;             /* send: host-visible copy if its slot is taken */
    _Atomic int sx_stepped;      /* recv: a receive step was enqueued or asked for */
    /* recv, set by its maker: a word the receive step writes the received
     * length into (device or host memory, as the stream's executor sees
     * it), for work after the step that reads the length in stream order
     * (a derived type's unpack); with it the stream finishes the op alone
     * even though it has a user_complete */
    uint64_t *sx_len_word;
    int sx_len_stepped; /* recv: a receive step that writes sx_len_word was enqueued */
    /* set by its maker for a non-contiguous buffer packed by the library
     * (issue 20): the pack (send) or unpack (recv) an SX step may fuse,
     * one launch fewer. A send's is done one of two ways, before anything
     * reads the packed bytes: fused into its LL send step, or by
     * user_prepare, which enqueues the pack on the op's stream (called
     * before the op's stream point or bulk step). A receive's is fused only
     * into a receive step enqueued by a stream wait (sx_pack_state 1 then;
     * the user_stream_wait hook sees it); otherwise its maker unpacks. */
    const mxa_pack_args_t *sx_pack;
    mxu_status_t (*user_prepare)(struct mxe_op *op);
    int sx_pack_state;   /* 0: not done yet, 1: fused into the step, 2: prepared */
    int sx_env_sx;       /* recv: its envelope said the data came by SX */
    int sx_watched;      /* progress thread: the step's record is being watched */
    int sx_delivered;    /* progress thread: completed another way (UCX, error) */
    int sx_ucx_posted;   /* progress thread: its receive was posted to UCX */
    int sx_in_dring;     /* send: its step writes into the peer's device ring */
    int sx_step_pending; /* progress thread: a library step waits for the trigger */
    /* recv, set by its maker: a stream wait on its own stream follows at
     * once (the library's blocking calls on a stream) */
    int stream_waited;
    /* recv: bound with no stream point of its own (mxe_sx_bind_recv): that
     * wait's receive step on the stream is the only writer of its buffer,
     * so a message that comes by UCX is always staged */
    int sx_untriggered;
    void *sx_staging;      /* recv: host-visible buffer UCX receives the message into */
    size_t sx_staging_cap; /* its size class's request (the message's length) */
    size_t sx_staged_len;  /* progress thread: bytes UCX put there */
    int sx_staged;         /* progress thread: UCX finished into sx_staging */
    int sx_host_copy;      /* progress thread: no stream step; a library step copies */
    mxe_op_t *sx_next_watch;
    mxe_op_t *sx_next_hunt; /* progress thread: the host looks for its message in the ring */
};

/* ---- lifecycle ---- */

typedef struct {
    int world_rank;
    int world_size;
    int local_rank;  /* rank among the processes of this node */
    int local_size;  /* processes on this node (0: unknown) */
    int peer_errors; /* endpoints report a failed peer (the same on every rank) */
} mxe_init_args_t;

/* The engine owns the lifecycle of the layers below it: mxe_init starts
 * accel, topo and the transport; mxe_finalize stops them. */
/* Phase 1 (application thread, after PMPI_Init): start the accelerator
 * layer and topo, create the transport. The GPU the progress thread is
 * placed near is the calling thread's current device (mxa_current_pci_busid). */
mxu_status_t mxe_init(const mxe_init_args_t *args);
/* Local worker address for the exchange done by the caller. */
mxu_status_t mxe_local_address(const void **addr, size_t *len);
/* Phase 2: install the exchanged addresses and start the progress thread. */
/* node_peers: world ranks of this node's processes when every one of them
 * has the CUDA backend active (the same list on each; NULL otherwise), for
 * the device-memory warm-up between them (mxt_warm_up). */
mxu_status_t mxe_start(const void *blob, const size_t *offsets, int nranks, const int *node_peers,
                       int npeers);
/* Drain: wait up to timeout_s for every live op; report and cancel the
 * rest (they complete with MXU_ERR_TIMED_OUT, stream waits are released).
 * Returns the number of ops that had to be cancelled. */
int mxe_drain(double timeout_s);
/* Stop the progress thread, close endpoints, destroy the transport, stop
 * topo and the accelerator layer (host streams still live end). Call
 * after mxe_drain() and after all peers drained (the caller barriers).
 * fence (may be NULL; see mxt_flush_and_close) is polled, with the worker
 * progressing, after this rank's endpoints are closed and before the
 * worker is destroyed: a non-blocking barrier there keeps a peer from
 * losing its connections before it closed them itself. */
void mxe_finalize(int (*fence)(void *arg), void *arg);
int mxe_is_running(void);

/* ---- operations (application threads) ---- */

/* Create an op; the caller may set user/hook fields, then submits it. The
 * op starts with two references: the engine's and the caller's. */
mxu_status_t mxe_op_create_send(mxa_stream_t *s, const void *buf, size_t bytes,
                                const mxe_comm_t *comm, int dest, int tag, size_t eager_limit,
                                mxe_op_t **op_out);
mxu_status_t mxe_op_create_recv(mxa_stream_t *s, void *buf, size_t bytes, const mxe_comm_t *comm,
                                int source, int tag, int post_early, mxe_op_t **op_out);
/* The same with the buffer's memory type (mxa_memtype_t) known: no query
 * of the accelerator (the progress thread's operations for CUDA graphs) */
mxu_status_t mxe_op_create_send_mt(mxa_stream_t *s, const void *buf, size_t bytes,
                                   const mxe_comm_t *comm, int dest, int tag, size_t eager_limit,
                                   int memtype, mxe_op_t **op_out);
mxu_status_t mxe_op_create_recv_mt(mxa_stream_t *s, void *buf, size_t bytes, const mxe_comm_t *comm,
                                   int source, int tag, int post_early, int memtype,
                                   mxe_op_t **op_out);
/* A local operation: no message of its own. It starts when its stream
 * reaches it (at once on the none stream; local_start, if set, runs on the
 * progress thread then) and completes once it started and
 * mxe_op_local_part_done was called `parts` times, with the first part's
 * error. The caller sets op->result (source, tag, bytes) before submitting;
 * type says what it stands for. Waits, stream waits and requests treat
 * it as any op. */
mxu_status_t mxe_op_create_local(mxa_stream_t *s, mxe_op_type_t type, int parts, mxe_op_t **op_out);
/* Progress thread only (e.g. from another op's user_complete or a poller). */
void mxe_op_local_part_done(mxe_op_t *op, mxu_status_t error);
/* A poller the progress thread calls at every pass (returns the work it
 * did), and asks whether it has anything to watch (then the thread polls
 * instead of sleeping in epoll). Added before mxe_start; at most
 * MXE_POLLERS (MXU_ERR_INVALID_PARAM beyond). */
#define MXE_POLLERS 4
mxu_status_t mxe_add_poller(unsigned (*poll)(void), int (*busy)(void));
/* Is this world rank a process of this node (mxe_set_node; not self)? */
int mxe_world_on_node(int world_rank);
/* Were this node's processes set (mxe_set_node)? Else nothing is known
 * to be on another node. */
int mxe_node_known(void);

/* Stream points (triggers and waits) enqueued on s that the stream has not
 * reached yet (triggers) or that are not released yet (waits): how far the
 * application runs ahead of the GPU (or host stream); 0 without a stream.
 * Any thread, lock-free: it only reads the sequence words. */
long mxe_stream_points_ahead(const mxa_stream_t *s);
/* The same, but 0 while s is being captured into a graph (its points run
 * when the graph is launched): asks the backend (a driver call for CUDA),
 * so callers check mxe_stream_points_ahead first. */
long mxe_stream_backlog(mxa_stream_t *s);

/* Enqueue the op's trigger on its stream (unless it starts at once) and hand
 * it to the progress thread. After this the op may complete at any time. */
mxu_status_t mxe_op_submit(mxe_op_t *op);
/* mxe_op_submit of an op of the none stream made on the thread of host
 * stream `by` while it runs (a graph's fire entry, graph.c): it starts
 * after the ops of `by` whose triggers that thread has reached, and
 * before those it reaches later -- in the order of `by`. */
mxu_status_t mxe_op_submit_on(mxe_op_t *op, mxa_stream_t *by);
/* A registration of [buf, buf + bytes) with the transport, made by the
 * progress thread while this thread waits; set as an op's `reg` it spares
 * each message's memory type detection (transport.h, mxt_mem_register).
 * The progress thread also binds the buffer's accelerator context
 * (mxa_thread_bind_buffer); host memory is only bound (*reg = NULL).
 * mxe_mem_deregister: any thread (a driver's callback thread too), done
 * later by the progress thread; dropped once the engine has stopped. */
mxu_status_t mxe_mem_register(void *buf, size_t bytes, int memtype, void **reg);
void mxe_mem_deregister(void *reg);
/* Drop the caller's reference. */
void mxe_op_release(mxe_op_t *op);
void mxe_op_retain(mxe_op_t *op);

static inline int mxe_op_is_complete(mxe_op_t *op)
{
    return atomic_load_explicit(&op->state, memory_order_acquire) == MXE_STATE_COMPLETE;
}
/* Host-side wait: spin, then sleep, until complete or timeout (ns; <0 none).
 * Returns MXU_OK when complete, MXU_ERR_TIMED_OUT otherwise. */
mxu_status_t mxe_op_wait_host(mxe_op_t *op, int64_t timeout_ns);
/* Wait until any op in ops[] (NULL entries skipped) completes, or timeout. */
mxu_status_t mxe_op_wait_any_host(mxe_op_t *const *ops, int n, int64_t timeout_ns);
/* Request cancellation of a receive (MPI_Cancel): completes it with
 * cancelled=1 unless it already matched. */
void mxe_op_cancel(mxe_op_t *op);

/* Stream wait: work enqueued on `s` after this call does not start until all
 * ops[] have completed. Takes its own references to the ops. For the none
 * stream this is a host wait. targets (may be NULL, or hold NULLs): where
 * the result writer puts each op's result before the stream passes. */
mxu_status_t mxe_stream_wait(mxa_stream_t *s, mxe_op_t *const *ops, void *const *targets, int n);

/* This rank has drained and enters MPI_Finalize's barrier: peers closing
 * their connections from now on is expected, not reported as an error. */
void mxe_peers_finalizing(void);
/* Peers whose failure the transport reported (MPIX_ACC_PEER_ERRORS=1):
 * returns how many, and writes up to max of their world ranks (any
 * thread). */
int mxe_failed_peers(int *ranks, int max);
/* Finalize when the ranks cannot all take part (a peer failed or never came
 * to MPI_Finalize): stop the progress thread and destroy the transport
 * without flushing or closing endpoints (UCX could wait for the missing
 * peer there) and without a fence. Instead of mxe_finalize. */
void mxe_abandon(void);

/* ---- statistics ---- */
/* The paths a message can take (today one: UCX tagged messages, eager or
 * rendezvous as UCX chooses); counted per path. */
typedef enum { MXE_PATH_UCX = 0, MXE_PATH_SX = 1, MXE_NPATHS } mxe_path_t;
const char *mxe_path_name(mxe_path_t path);
typedef struct {
    uint64_t sent, sent_bytes;         /* sends completed without error */
    uint64_t received, received_bytes; /* receives completed with data */
} mxe_path_stats_t;
typedef struct {
    uint64_t ops_submitted;
    uint64_t ops_completed;
    uint64_t ops_failed;
    uint64_t ops_finished_later; /* of the completed: published after a library stream's work */
    uint64_t waits_submitted;
    uint64_t waits_released;
    uint64_t progress_sleeps;
    uint64_t progress_wakeups;
    int progress_cpu;
    /* Phase timers (MPIX_ACC_STATS=1 only; progress thread's clock, sums in
     * ns and counts): a stream's wait released -> its next trigger seen
     * (the GPU resumes, runs to the next trigger, the poll sees it); send
     * started -> transport completion; receive started -> data arrived;
     * last op of a stream wait complete -> wait released (engine). */
    uint64_t turnaround_ns, turnaround_n;
    uint64_t send_ns, send_n;
    uint64_t recv_ns, recv_n;
    uint64_t release_ns, release_n;
    mxe_path_stats_t path[MXE_NPATHS];
    /* call-order matching (match.c): envelopes announced by this rank,
     * receives matched when their envelope arrived (posted first) and
     * envelopes matched when a receive came (unexpected first) */
    uint64_t match_announced, match_posted, match_unexpected;
    /* stream-executed path: sends that could have taken it and did not,
     * by reason (mxe_sx_fallback_name) */
    uint64_t sx_fallback[8];
    uint64_t sx_links_in;      /* rings made here (one per peer process of the node) */
    uint64_t sx_ring_bytes;    /* device or shared memory of the published rings */
    uint64_t sx_staged;        /* messages of bound receives UCX put into host staging */
    uint64_t sx_drings_made;   /* device rings made here (receiver) */
    uint64_t sx_drings_mapped; /* peers' device rings mapped here (sender) */
    uint64_t sx_dring_sent;    /* messages sent into peers' device rings */
    uint64_t sx_bulk_sent;     /* ... of them bulk (a device ring's bulk slot) */
    uint64_t sx_fused_packs;   /* send steps that packed a non-contiguous buffer themselves */
    uint64_t sx_fused_unpacks; /* receive steps that unpacked one themselves */
    /* receives without a stream point of their own: late points given to
     * their stream (a stream wait on another stream), and receive steps put
     * on their stream by host interest (MPI_Test, host waits, freed requests) */
    uint64_t sx_late_points, sx_host_interest_steps;
    int ucx_endpoints;            /* endpoints to other processes made so far */
    char ucx_endpoint_kinds[256]; /* by their transports: "tcp/eth0 x3, ..." */
} mxe_stats_t;
const char *mxe_sx_fallback_name(int reason); /* NULL past the last */

/* Processes of this node (world ranks, local order) and an id of the job
 * on this node (the first one's process id), for the stream-executed
 * path's links; call before mxe_start (NULL/0: none). */
void mxe_set_node(const int *world_ranks, int n, long node_job_id);

/* The host is interested in op's completion (MPI_Wait/Test on it): a
 * receive bound to an SX link gets its receive step run by the library.
 * Any application thread. */
void mxe_op_host_interest(mxe_op_t *op);
static inline int mxe_op_test_host(mxe_op_t *op)
{
    if (mxe_op_is_complete(op))
        return 1;
    mxe_op_host_interest(op);
    return mxe_op_is_complete(op);
}
void mxe_get_stats(mxe_stats_t *out);

#endif
