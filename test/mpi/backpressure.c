/*
 * backpressure.c - many stream-ordered operations in flight (run with a
 * small MPIX_ACC_MAX_PENDING, e.g. 32).
 *
 * Phase 1, throttling: ranks 0 and 1 enqueue 3000 ping-pong iterations on a
 * host stream whose first item sleeps 300 ms, far more operations than the
 * limit: calls beyond the limit wait until earlier ones are done (like a
 * full CUDA stream queue) instead of failing, every message arrives (the
 * last echo is checked), and the library frees every generalized request
 * (regression: a reaper that always inspected the same 64 incomplete
 * entries never freed completed requests behind them, and MPICH aborted
 * with ~128k of them alive: 100k iterations enqueued ahead).
 * Phase 2, the limit error: rank 0 posts receives that nothing matches
 * until the limit is reached; the next receive fails, after the library's
 * 10 s without progress, with the library's own error class, named by
 * MPI_Error_string; then rank 1 sends the messages (stream-ordered) and
 * everything drains.
 * Ranks beyond 1 only take part in the barriers.
 */
#include "common.h"

#define ITERS 3000

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "backpressure", 120);
    t_need_ranks(2);
    const char *lim_s = getenv("MPIX_ACC_MAX_PENDING");
    int limit = lim_s ? atoi(lim_s) : 0;
    T_CHECK(limit > 0 && limit <= 256, "run with MPIX_ACC_MAX_PENDING between 1 and 256 (got %s)",
            lim_s ? lim_s : "unset");
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    int peer = 1 - t_rank;

    /* ---- phase 1 ---- */
    t_phase("throttled ping-pong");
    if (t_rank < 2) {
        uint64_t echo = 0;
        double t_enq = t_pingpong_behind_hold(s, ITERS, 300, &echo);
        /* with 6 or 8 operations per iteration far beyond the limit, the
         * enqueue loop must have waited for the stream (it cannot outrun
         * the 300 ms hold by more than the limit) */
        T_CHECK(t_enq > 0.25,
                "enqueueing %d iterations took %.3f s: no back-pressure with "
                "MPIX_ACC_MAX_PENDING=%d",
                ITERS, t_enq, limit);
        if (t_rank == 0)
            T_CHECK(echo == ITERS, "last echo %llu, expected %d", (unsigned long long)echo, ITERS);
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- phase 2 ---- */
    t_phase("limit error");
    uint64_t *rb = calloc((size_t)limit + 1, sizeof *rb);
    MPI_Request *rq = calloc((size_t)limit + 1, sizeof *rq);
    T_CHECK(rb && rq, "calloc");
    if (t_rank == 0) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int posted = 0, rc = MPI_SUCCESS;
        double t0 = t_now();
        for (; posted <= limit; posted++) {
            rc = MPIX_Acc_Irecv(s, &rb[posted], 1, MPI_UINT64_T, peer, 2, MPI_COMM_WORLD,
                                &rq[posted]);
            if (rc != MPI_SUCCESS)
                break;
        }
        double dt = t_now() - t0;
        T_CHECK(rc != MPI_SUCCESS, "%d receives in flight with MPIX_ACC_MAX_PENDING=%d: no error",
                posted, limit);
        T_CHECK(posted <= limit && posted >= limit - 2, "error after %d receives, limit %d", posted,
                limit);
        T_CHECK(dt > 9.0, "the error came after %.1f s, expected the 10 s grace", dt);
        int cls = -1, len = 0;
        char msg[MPI_MAX_ERROR_STRING];
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, msg, &len);
        T_CHECK(cls > MPI_ERR_LASTCODE || strstr(msg, "MPIX_ACC_MAX_PENDING"),
                "error class %d, string '%s'", cls, msg);
        T_CHECK(strstr(msg, "too many stream-ordered operations") != NULL,
                "error string '%s' does not name the cause", msg);
        printf("[backpressure] receive %d refused after %.1f s: %s\n", posted + 1, dt, msg);
        T_MPI(MPI_Send(&posted, 1, MPI_INT, peer, 3, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Waitall(s, posted, rq, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        t_expect_posted(rb, posted, 1000);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    } else if (t_rank == 1) {
        t_send_to_posted(s, rb, rq, 1000);
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(rb);
    free(rq);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
