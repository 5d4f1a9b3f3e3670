/*
 * engine_priv.h - state shared by engine.c (application-thread side) and
 * progress.c (the progress thread). Not for other layers.
 */
#ifndef MX_ENGINE_PRIV_H
#define MX_ENGINE_PRIV_H

#include <pthread.h>

#include "engine/engine.h"
#include "util/waiter.h"

/* A stream wait: released when all ops have completed and every earlier
 * wait of the same stream has been released. */
struct mxe_wait {
    mxe_cmd_t cmd;
    mxa_stream_t *stream;
    uint64_t seq;
    int n;
    int checked;             /* ops[0..checked) are known complete */
    mxu_trace_range_t trace; /* NVTX range: handed to the progress thread -> released */
    mxe_wait_t *next;        /* per-stream list, seq order */
    void **targets;          /* n result targets (points into this allocation) */
    mxe_op_t *ops[];         /* each holds a reference */
};

/* Per-stream engine state, created and owned by the progress thread. */
typedef struct mxe_sstate {
    mxa_stream_t *stream;
    mxe_op_t *pending_head; /* ops waiting for their trigger, seq order */
    mxe_op_t *pending_tail;
    mxe_wait_t *wait_head; /* waits not yet released, seq order */
    mxe_wait_t *wait_tail;
    uint64_t trigger_seen; /* highest trigger value read */
    uint64_t released;     /* highest wait seq released */
    uint64_t t_release_ns; /* phase timers: when the last release was written */
    int listed;            /* on the engine's active-stream list */
    struct mxe_sstate *next_active;
} mxe_sstate_t;

typedef struct {
    /* shared */
    mxu_mpsc_t cmdq;
    int wake_fd;          /* eventfd */
    _Atomic int sleeping; /* progress thread blocks (or is about to) */
    _Atomic int stop;
    _Atomic int running;
    _Atomic long live_ops;   /* submitted, not yet completed */
    _Atomic long live_waits; /* submitted, not yet released */
    _Atomic int abort_done;  /* progress thread finished an ABORT */
    _Atomic int aborted_count;
    mxu_event_t completion; /* host waiters sleep here */
    mxe_result_writer_t result_writer;
    pthread_t thread;
    int world_rank;
    int world_size;
    char gpu_busid[32]; /* GPU the progress thread is placed near ("" none) */

    /* statistics (relaxed atomics) */
    _Atomic uint64_t st_ops_submitted, st_ops_completed, st_ops_failed;
    _Atomic uint64_t st_ops_finished_later; /* completions after a library stream's work */
    _Atomic uint64_t st_waits_submitted, st_waits_released;
    _Atomic uint64_t st_sleeps, st_wakeups;
    _Atomic int progress_cpu;
    int timing; /* phase timers on (MPIX_ACC_STATS=1); set before the thread starts */
    _Atomic uint64_t st_turnaround_ns, st_turnaround_n, st_send_ns, st_send_n;
    _Atomic uint64_t st_recv_ns, st_recv_n, st_release_ns, st_release_n;
    struct {
        _Atomic uint64_t sent, sent_bytes, received, received_bytes;
    } st_path[MXE_NPATHS];

    /* progress thread only */
    mxe_sstate_t *active_streams; /* streams with pending ops or waits */
    mxe_op_t *live_head;          /* started or pending ops, for reports */
    mxe_op_t *finishing_head;     /* ops whose user_finish is pending */
    int waits_dirty;              /* an op completed since the last check */
    int abort_pending;            /* an ABORT was handled this pass */
    int aborting;                 /* finalize: live ops are being cancelled */
    int one_hw_queue;             /* CUDA_DEVICE_MAX_CONNECTIONS=1: CUDA stream waits on the host */
    int polling_streams;          /* active streams that need polling */
    int epoll_fd;
    int placed_near_gpu; /* progress thread bound near a GPU */

    /* mxe_add_poller: set before the thread starts */
    unsigned (*poller[MXE_POLLERS])(void);
    int (*poller_busy[MXE_POLLERS])(void);
    int npollers;

    /* failed peers (written by the progress thread, read by any thread:
     * entries [0, nfailed) are valid) */
    int *failed_ranks; /* world_size entries */
    _Atomic int nfailed;
} mxe_engine_t;

extern mxe_engine_t mxe;

static inline void mxe_timer_add(_Atomic uint64_t *sum, _Atomic uint64_t *n, uint64_t ns)
{
    atomic_fetch_add_explicit(sum, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}

/* Progress thread: the op has its result -- complete, or finishing (its
 * completion waits only for a library stream's work, mxe_op_complete). */
static inline int mxe_op_settled(mxe_op_t *op) { return op->finishing || mxe_op_is_complete(op); }

/* Wake the progress thread if it sleeps (any thread). */
void mxe_wake(void);
/* The transport's peer-failure hook (progress thread). */
void mxe_on_peer_failed(int world_rank);
/* Call-order matching (match.c; progress thread, init/destroy around it). */
mxu_status_t mxe_match_init(int world_size);
void mxe_match_destroy(void);
void mxe_match_send_called(mxe_op_t *op); /* number and announce a send */
void mxe_match_recv_called(mxe_op_t *op); /* register a receive: match or post */
void mxe_match_flush(void);               /* send the queued announcements */
int mxe_match_forget(mxe_op_t *op);       /* unmatched receive out of its list: 1 */
uint64_t mxe_match_data_tag(uint32_t ctx, int src, uint64_t pseq);
void mxe_match_stats(uint64_t *announced, uint64_t *matched_posted, uint64_t *matched_unexpected);
/* The stream-executed path (path.c). Application threads: */
mxu_status_t mxe_sx_start(void);
void mxe_sx_stop(void);
void mxe_sx_forget_stream(mxa_stream_t *s); /* the stream-free hook */
void mxe_sx_stats(mxe_stats_t *out);
int mxe_sx_submit_send(mxe_op_t *op); /* 1: SX (trigger_seq set), 0: UCX, -1: UCX, seq set */
void mxe_sx_bind_recv(mxe_op_t *op);
void mxe_sx_stream_wait(mxa_stream_t *s, mxe_op_t **ops, void **targets, int n,
                        unsigned char *drop);
/* ... progress thread: */
void mxe_sx_handle_step(mxe_op_t *op);
void mxe_sx_handle_watch(mxe_op_t *op);
void mxe_sx_recv_ready(mxe_op_t *op);
void mxe_sx_on_complete(mxe_op_t *op);
unsigned mxe_sx_poll(void);
int mxe_sx_watching(void);
void mxe_sx_abort_steps(void);
void mxe_sx_complete_from_step(mxe_op_t *op, mxu_status_t st); /* progress.c */
int mxe_sx_send_outcome(mxe_op_t *op, void **bounce);
/* A bound receive whose message comes by UCX: a host-visible buffer for
 * UCX to receive into (NULL: into op->buf), and the hook when UCX is done
 * with it (the receive step copies it out: UCX never writes a device
 * buffer on the progress thread while steps poll). */
void *mxe_sx_recv_staging(mxe_op_t *op);
void mxe_sx_staged(mxe_op_t *op, size_t length);
/* The progress thread posted a bound receive to UCX (its message is not
 * in the ring): its step, when there is one, stops reading the ring. */
void mxe_sx_posted_ucx(mxe_op_t *op);
/* Progress thread: hand out our device rings' fds (sx.c); work done. */
unsigned mxe_sx_serve(void);
void mxe_sx_staging_free(mxe_op_t *op);
/* progress.c: post a matched receive's data receive (it is ready). */
void mxe_recv_post_data(mxe_op_t *op);
/* MXE_CMD_MEM_REG on the progress thread (engine.c's request) */
void mxe_handle_mem_reg(void *target);
/* Progress thread entry. */
void *mxe_progress_main(void *arg);

#endif
