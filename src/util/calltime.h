/*
 * calltime.h - host time the library spends on the calling thread, per call
 * kind, with percentiles (MPIX_ACC_STATS=1; printed at finalize).
 *
 * Outer kinds time a whole library call on an application thread (an
 * enqueued send, receive, stream wait). Inner kinds time what those calls
 * spend in one place (a CUDA kernel launch, a stream memory operation, a
 * wake-up of the progress thread) and are recorded only while the thread
 * is inside an outer kind, so the progress thread's own launches do not
 * count. Waits for the stream to fall behind (MXU_CT_THROTTLE) are recorded
 * as their own kind and left out of the outer call's time. Off (the
 * default), a timer is one predictable branch.
 *
 *   uint64_t t = mxu_ct_begin();   ...   mxu_ct_end(MXU_CT_SEND, t);
 *   uint64_t t = mxu_ct_inner_begin();   ...   mxu_ct_inner_end(MXU_CT_CU_LAUNCH, t);
 *
 * Histograms have 8 buckets per power of two (percentiles within 1/16 of
 * an octave, about 4 %), updated with relaxed atomics from any thread.
 */
#ifndef MXU_CALLTIME_H
#define MXU_CALLTIME_H

#include <stdint.h>
#include <time.h>

typedef enum {
    MXU_CT_SEND = 0,    /* an enqueued send (MPIX_Acc_Isend, MPI_Isend on a stream communicator) */
    MXU_CT_RECV,        /* an enqueued receive */
    MXU_CT_STREAM_WAIT, /* a stream wait (MPIX_Acc_Wait/Waitall, MPI_Wait* on a stream comm) */
    MXU_CT_NOUTER,
    MXU_CT_CU_LAUNCH = MXU_CT_NOUTER, /* a CUDA kernel launch of the library: SX send step */
    MXU_CT_CU_LAUNCH_RECV,            /* ... SX receive step (up to 16 receives' parameters) */
    MXU_CT_CU_MEMOP,                  /* a CUDA stream point (memop or its fallback kernel) */
    MXU_CT_WAKE,                      /* a wake-up of the progress thread (eventfd write) */
    MXU_CT_CU_QUERY,   /* the CUDA driver's pointer attributes of a buffer (its memory type) */
    MXU_CT_CU_CAPTURE, /* a stream's capture status (the CUDA driver's, or a host stream's) */
    MXU_CT_REQUEST,    /* the MPI request handle of an operation (generalized request + table) */
    MXU_CT_PACKING,    /* a non-contiguous (or staged) buffer's packed block and layout */
    MXU_CT_REAP,       /* freeing the handles of released operations that completed */
    MXU_CT_SUBMIT,     /* handing an operation to the engine (its SX send step launch too) */
    MXU_CT_THROTTLE,   /* waiting because the stream is too far ahead (MPIX_ACC_STREAM_DEPTH,
                      * MPIX_ACC_MAX_PENDING): not the library's cost, left out of the outer
                      * kinds' times */
    MXU_CT_COUNT
} mxu_ct_kind_t;

extern int mxu_ct_on;                             /* set once at start-up, before the threads */
extern _Thread_local int mxu_ct_depth;            /* outer calls open on this thread */
extern _Thread_local uint64_t mxu_ct_left_out_ns; /* of the open outer call: throttle waits */

const char *mxu_ct_name(mxu_ct_kind_t k);
void mxu_ct_record(mxu_ct_kind_t k, uint64_t ns);
/* count, mean and the p-th percentile (0 < p < 1) in ns; 0 when empty */
uint64_t mxu_ct_count(mxu_ct_kind_t k);
double mxu_ct_mean_ns(mxu_ct_kind_t k);
double mxu_ct_percentile_ns(mxu_ct_kind_t k, double p);
void mxu_ct_reset(void);

static inline uint64_t mxu_ct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* An outer call nested in another (MPIX_Acc_Recv's receive and wait, a
 * public call and the internal one it forwards to) is not recorded: only
 * the outermost counts (begin returns the sentinel 1 for the nested one). */
static inline uint64_t mxu_ct_begin(void)
{
    if (!mxu_ct_on)
        return 0;
    if (mxu_ct_depth++ > 0)
        return 1;
    mxu_ct_left_out_ns = 0;
    return mxu_ct_now();
}
static inline void mxu_ct_end(mxu_ct_kind_t k, uint64_t t0)
{
    if (!t0)
        return;
    if (t0 > 1) {
        uint64_t d = mxu_ct_now() - t0;
        mxu_ct_record(k, d > mxu_ct_left_out_ns ? d - mxu_ct_left_out_ns : 0);
    }
    mxu_ct_depth--;
}
/* End an outer call without recording it (it turned out not to be one of
 * its kind: an MPI_Waitall with no stream-ordered request) */
static inline void mxu_ct_drop(uint64_t t0)
{
    if (t0)
        mxu_ct_depth--;
}
static inline uint64_t mxu_ct_inner_begin(void)
{
    return (mxu_ct_on && mxu_ct_depth > 0) ? mxu_ct_now() : 0;
}
static inline void mxu_ct_inner_end(mxu_ct_kind_t k, uint64_t t0)
{
    if (t0) {
        uint64_t d = mxu_ct_now() - t0;
        mxu_ct_record(k, d);
        if (k == MXU_CT_THROTTLE)
            mxu_ct_left_out_ns += d;
    }
}

#endif
