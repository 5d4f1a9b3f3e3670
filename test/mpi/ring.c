/*
 * ring.c - ring exchange on host streams with the explicit MPIX_Acc_* calls.
 *
 * Each rank sends to rank+1 and receives from rank-1, for message sizes from
 * 0 bytes to 1 MiB (eager and rendezvous), in three styles:
 *   A: Irecv + Isend + Waitall on one stream; send data is produced on the
 *      stream by a launched fill function, received data is checked on the
 *      stream by a launched verify function enqueued after the Waitall;
 *   B: blocking-style Send/Recv on the stream (even ranks send first);
 *   C: Irecv on stream 1, Isend on stream 2, separate Waits on each stream.
 * Statuses and request handles are checked on the host after synchronize.
 */
#include "common.h"

#define NITER 6

static const size_t sizes[] = {0, 1, 7, 100, 4096, 8191, 8192, 8193, 65536, 262144, 1048576};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "ring", 120);
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream s1, s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s1));
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    T_CHECK(s1 != NULL && s2 != NULL && s1 != s2, "Hoststream_create gave %p and %p", s1, s2);

    size_t maxn = sizes[NSIZES - 1];
    char *sbuf = malloc(maxn), *rbuf = malloc(maxn);
    T_CHECK(sbuf && rbuf, "malloc");

    for (int it = 0; it < NITER; it++) {
        for (size_t si = 0; si < NSIZES; si++) {
            size_t n = sizes[si];
            int tag = (int)(it * 100 + si);
            uint64_t sseed = ((uint64_t)t_rank << 32) | (uint64_t)(it * 1000 + si);
            uint64_t rseed = ((uint64_t)prev << 32) | (uint64_t)(it * 1000 + si);
            char what[128];
            MPI_Status st[2];
            MPI_Request req[2];

            /* ---- style A ---- */
            t_phase("A: Irecv/Isend/Waitall on one stream");
            snprintf(what, sizeof what, "A it=%d size=%zu from %d", it, n, prev);
            memset(rbuf, 0xEE, n);
            memset(sbuf, 0x11, n);
            t_fill_arg_t fa = {.buf = sbuf, .n = n, .seed = sseed, .sleep_ms = 0};
            t_verify_arg_t va = {.buf = rbuf, .n = n, .seed = rseed, .what = what};
            memset(st, 0, sizeof st);
            T_MPI(MPIX_Acc_Hoststream_launch(s1, t_fill_fn, &fa));
            T_MPI(MPIX_Acc_Irecv(s1, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
            T_MPI(MPIX_Acc_Isend(s1, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
            T_CHECK(req[0] != MPI_REQUEST_NULL && req[1] != MPI_REQUEST_NULL,
                    "Isend/Irecv returned MPI_REQUEST_NULL");
            T_MPI(MPIX_Acc_Waitall(s1, 2, req, st));
            T_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                    "MPIX_Acc_Waitall did not set the handles to MPI_REQUEST_NULL");
            T_MPI(MPIX_Acc_Hoststream_launch(s1, t_verify_fn, &va));
            T_MPI(MPIX_Acc_Hoststream_synchronize(s1));
            t_check_async();
            T_CHECK(atomic_load(&va.ran),
                    "%s: verify function did not run before synchronize "
                    "returned",
                    what);
            t_expect_pattern(rbuf, n, rseed, what);
            t_expect_status(&st[0], prev, tag, (int)n, MPI_BYTE, what);
            T_CHECK(st[0].MPI_ERROR == MPI_SUCCESS || st[0].MPI_ERROR == 0,
                    "%s: status.MPI_ERROR = %d", what, st[0].MPI_ERROR);

            /* ---- style B ---- */
            t_phase("B: Send/Recv on the stream");
            snprintf(what, sizeof what, "B it=%d size=%zu from %d", it, n, prev);
            memset(rbuf, 0xEE, n);
            t_fill(sbuf, n, sseed + 7);
            MPI_Status rst;
            memset(&rst, 0, sizeof rst);
            if (t_rank % 2 == 0) {
                T_MPI(MPIX_Acc_Send(s2, sbuf, (int)n, MPI_BYTE, next, tag + 50, MPI_COMM_WORLD));
                T_MPI(MPIX_Acc_Recv(s2, rbuf, (int)n, MPI_BYTE, prev, tag + 50, MPI_COMM_WORLD,
                                    &rst));
            } else {
                T_MPI(MPIX_Acc_Recv(s2, rbuf, (int)n, MPI_BYTE, prev, tag + 50, MPI_COMM_WORLD,
                                    &rst));
                T_MPI(MPIX_Acc_Send(s2, sbuf, (int)n, MPI_BYTE, next, tag + 50, MPI_COMM_WORLD));
            }
            T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
            t_expect_pattern(rbuf, n, rseed + 7, what);
            t_expect_status(&rst, prev, tag + 50, (int)n, MPI_BYTE, what);

            /* ---- style C ---- */
            t_phase("C: Irecv on s1, Isend on s2, waits on their own streams");
            snprintf(what, sizeof what, "C it=%d size=%zu from %d", it, n, prev);
            memset(rbuf, 0xEE, n);
            t_fill(sbuf, n, sseed + 13);
            t_verify_arg_t vc = {.buf = rbuf, .n = n, .seed = rseed + 13, .what = what};
            T_MPI(MPIX_Acc_Irecv(s1, rbuf, (int)n, MPI_BYTE, prev, tag + 70, MPI_COMM_WORLD,
                                 &req[0]));
            T_MPI(MPIX_Acc_Isend(s2, sbuf, (int)n, MPI_BYTE, next, tag + 70, MPI_COMM_WORLD,
                                 &req[1]));
            T_MPI(MPIX_Acc_Wait(s1, &req[0], &st[0]));
            T_MPI(MPIX_Acc_Wait(s2, &req[1], MPI_STATUS_IGNORE));
            T_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                    "MPIX_Acc_Wait did not set the handle to MPI_REQUEST_NULL");
            T_MPI(MPIX_Acc_Hoststream_launch(s1, t_verify_fn, &vc));
            T_MPI(MPIX_Acc_Hoststream_synchronize(s1));
            T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
            t_check_async();
            t_expect_pattern(rbuf, n, rseed + 13, what);
            t_expect_status(&st[0], prev, tag + 70, (int)n, MPI_BYTE, what);
        }
    }

    /* Typed (MPI_INT / MPI_DOUBLE) ring: count is in elements. */
    t_phase("typed ring");
    {
        enum { N = 5000 };
        int *si = malloc(N * sizeof(int)), *ri = malloc(N * sizeof(int));
        double *sd = malloc(N * sizeof(double)), *rd = malloc(N * sizeof(double));
        for (int i = 0; i < N; i++) {
            si[i] = t_rank * 1000003 + i;
            sd[i] = t_rank + i * 0.5;
            ri[i] = -1;
            rd[i] = -1;
        }
        MPI_Request rq[4];
        MPI_Status sts[4];
        T_MPI(MPIX_Acc_Irecv(s1, ri, N, MPI_INT, prev, 1, MPI_COMM_WORLD, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(s1, rd, N, MPI_DOUBLE, prev, 2, MPI_COMM_WORLD, &rq[1]));
        T_MPI(MPIX_Acc_Isend(s1, si, N, MPI_INT, next, 1, MPI_COMM_WORLD, &rq[2]));
        T_MPI(MPIX_Acc_Isend(s1, sd, N, MPI_DOUBLE, next, 2, MPI_COMM_WORLD, &rq[3]));
        T_MPI(MPIX_Acc_Waitall(s1, 4, rq, sts));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s1));
        for (int i = 0; i < N; i++) {
            T_CHECK(ri[i] == prev * 1000003 + i, "typed ring int[%d]: expected %d got %d", i,
                    prev * 1000003 + i, ri[i]);
            T_CHECK(rd[i] == prev + i * 0.5, "typed ring double[%d]: expected %g got %g", i,
                    prev + i * 0.5, rd[i]);
        }
        t_expect_status(&sts[0], prev, 1, N, MPI_INT, "typed ring int");
        t_expect_status(&sts[1], prev, 2, N, MPI_DOUBLE, "typed ring double");
        free(si);
        free(ri);
        free(sd);
        free(rd);
    }

    /* MPI edge cases: empty Waitall, null handles in Waitall and Wait */
    t_phase("Waitall/Wait with MPI_REQUEST_NULL and count 0");
    {
        T_MPI(MPIX_Acc_Waitall(s1, 0, NULL, MPI_STATUSES_IGNORE));
        int sv = t_rank + 40, rv = -1;
        MPI_Request rq[4];
        MPI_Status st[4];
        memset(st, 0x5A, sizeof st);
        rq[0] = MPI_REQUEST_NULL;
        rq[3] = MPI_REQUEST_NULL;
        T_MPI(MPIX_Acc_Irecv(s1, &rv, 1, MPI_INT, prev, 900, MPI_COMM_WORLD, &rq[1]));
        T_MPI(MPIX_Acc_Isend(s1, &sv, 1, MPI_INT, next, 900, MPI_COMM_WORLD, &rq[2]));
        T_MPI(MPIX_Acc_Waitall(s1, 4, rq, st));
        MPI_Request nul = MPI_REQUEST_NULL;
        MPI_Status nst;
        memset(&nst, 0x5A, sizeof nst);
        T_MPI(MPIX_Acc_Wait(s1, &nul, &nst));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s1));
        T_CHECK(rv == prev + 40, "Waitall with null entries: data %d expected %d", rv, prev + 40);
        t_expect_status(&st[1], prev, 900, 1, MPI_INT, "Waitall with null entries");
        /* MPI: a null request gives an empty status (MPI_ANY_SOURCE, MPI_ANY_TAG, count 0) */
        t_expect_status(&st[0], MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_INT,
                        "Waitall status of an MPI_REQUEST_NULL entry");
        t_expect_status(&nst, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_INT,
                        "MPIX_Acc_Wait status of MPI_REQUEST_NULL");
    }

    t_phase("free streams");
    T_MPI(MPIX_Acc_Hoststream_free(&s1));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));
    free(sbuf);
    free(rbuf);
    return t_finish();
}
