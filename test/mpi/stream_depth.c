/*
 * stream_depth.c - MPIX_ACC_STREAM_DEPTH: how far the application may run
 * ahead of one stream (run with MPIX_ACC_STREAM_DEPTH set; 0 = no limit).
 *
 * On CUDA streams the limit prevents a deadlock (test/gpu/deep_queue.cu):
 * a full driver queue behind a stream wait blocks the application inside
 * the driver, holding a lock the progress thread needs. Host streams have
 * the same limit, which lets this test check it without a GPU.
 *
 * Phase 1, throttling: ranks 0 and 1 enqueue 400 ping-pong iterations on a
 * host stream whose first item sleeps 300 ms. With a limit the enqueue loop
 * waits for the stream (it takes > 250 ms) and every message arrives; with
 * MPIX_ACC_STREAM_DEPTH=0 the calls return at once (< 250 ms).
 * Phase 2 (limit <= 64), the error: rank 0 enqueues receive + wait pairs that
 * nothing matches; once the stream is the limit behind, the next call fails
 * after the library's 10 s without progress with the library's error class
 * naming MPIX_ACC_STREAM_DEPTH; the requests stay valid: rank 1 then sends
 * the messages and everything drains with the data intact.
 * Ranks beyond 1 only take part in the barriers.
 */
#include "common.h"

#define ITERS 400

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "stream_depth", 120);
    t_need_ranks(2);
    const char *d_s = getenv("MPIX_ACC_STREAM_DEPTH");
    T_CHECK(d_s != NULL, "run with MPIX_ACC_STREAM_DEPTH set (0 = no limit)");
    int depth = atoi(d_s);
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    int peer = 1 - t_rank;

    /* ---- phase 1 ---- */
    t_phase("throttled ping-pong");
    if (t_rank < 2) {
        uint64_t echo = 0;
        double t_enq = t_pingpong_behind_hold(s, ITERS, 300, &echo);
        if (depth > 0)
            T_CHECK(t_enq > 0.25,
                    "enqueueing %d iterations behind a 300 ms hold took %.3f s: "
                    "not throttled with MPIX_ACC_STREAM_DEPTH=%d",
                    ITERS, t_enq, depth);
        else
            T_CHECK(t_enq < T_SLOW(0.25),
                    "enqueueing %d iterations took %.3f s with "
                    "MPIX_ACC_STREAM_DEPTH=0 (no limit): the calls waited",
                    ITERS, t_enq);
        if (t_rank == 0) {
            T_CHECK(echo == ITERS, "last echo %llu, expected %d", (unsigned long long)echo, ITERS);
            printf("[stream_depth] %d iterations enqueued in %.3f s behind a 300 ms hold "
                   "(MPIX_ACC_STREAM_DEPTH=%d)\n",
                   ITERS, t_enq, depth);
        }
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- phase 2 ---- */
    if (depth > 0 && depth <= 64) {
        t_phase("depth error");
        int max = depth + 2;
        uint64_t *rb = calloc((size_t)max, sizeof *rb);
        MPI_Request *rq = calloc((size_t)max, sizeof *rq);
        T_CHECK(rb && rq, "calloc");
        if (t_rank == 0) {
            /* a refused receive raises on its communicator, a refused
             * stream wait on MPI_COMM_SELF (mpix_acc(3), ERRORS) */
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
            int posted = 0, unwaited = -1, rc = MPI_SUCCESS;
            double t0 = t_now();
            for (; posted < max; posted++) {
                rc = MPIX_Acc_Irecv(s, &rb[posted], 1, MPI_UINT64_T, peer, 2, MPI_COMM_WORLD,
                                    &rq[posted]);
                if (rc != MPI_SUCCESS)
                    break;
                rc = MPIX_Acc_Wait(s, &rq[posted], MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    unwaited = posted++; /* posted; its wait was refused */
                    break;
                }
                T_CHECK(rq[posted] == MPI_REQUEST_NULL, "MPIX_Acc_Wait left request %d set",
                        posted);
            }
            double dt = t_now() - t0;
            T_CHECK(rc != MPI_SUCCESS,
                    "%d receive+wait pairs behind an unmatched receive with "
                    "MPIX_ACC_STREAM_DEPTH=%d: no error",
                    posted, depth);
            /* each pair is 2 points: the limit is reached after depth/2 pairs */
            T_CHECK(posted >= depth / 2 && posted <= depth / 2 + 1,
                    "error after %d pairs, MPIX_ACC_STREAM_DEPTH=%d", posted, depth);
            T_CHECK(dt > 9.0, "the error came after %.1f s, expected the 10 s grace", dt);
            int cls = -1, len = 0;
            char msg[MPI_MAX_ERROR_STRING];
            MPI_Error_class(rc, &cls);
            MPI_Error_string(rc, msg, &len);
            T_CHECK(cls > MPI_ERR_LASTCODE, "error class %d (%s), expected the library's own", cls,
                    msg);
            T_CHECK(strstr(msg, "MPIX_ACC_STREAM_DEPTH") != NULL,
                    "error string '%s' does not name the setting", msg);
            printf("[stream_depth] %s refused after %d pairs and %.1f s: %s\n",
                   unwaited >= 0 ? "a wait" : "a receive", posted, dt, msg);
            T_MPI(MPI_Send(&posted, 1, MPI_INT, peer, 3, MPI_COMM_WORLD));
            if (unwaited >= 0) /* the refused wait's request is still ours */
                T_MPI(MPIX_Acc_Wait(s, &rq[unwaited], MPI_STATUS_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_synchronize(s));
            t_expect_posted(rb, posted, 2000);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
        } else if (t_rank == 1) {
            t_send_to_posted(s, rb, rq, 2000);
        }
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        free(rb);
        free(rq);
    }
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
