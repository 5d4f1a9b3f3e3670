/*
 * wait_race.c - host completion calls racing against fast completions.
 *
 * Regression test for the host MPI_Waitall hang (issue 13, item 1): the
 * wrapper counted the incomplete stream-ordered operations, then built the
 * list of those still incomplete and waited on it without a time-out; when
 * the progress thread completed the last ones in between, the list was empty
 * and the wait never returned. With 32 receives and 32 sends of 8 bytes per
 * iteration that window is hit within a few hundred to a few thousand
 * iterations. MPI_Waitany, MPI_Waitsome and MPI_Testall share the helper, so
 * every iteration picks one of them in turn (Waitall twice as often).
 *
 * Every message is checked (value = iteration * 64 + index). Iterations:
 * WAIT_RACE_ITERS (default 4000; 3000 under TSan, 300 under valgrind).
 */
#include "common.h"

#define NMSG 32

static int complete_all(int mode, int n, MPI_Request *reqs)
{
    switch (mode) {
    case 0:
    case 1:
        return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    case 2: {
        for (int done = 0; done < n; done++) {
            int idx;
            int rc = MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return rc;
            T_CHECK(idx != MPI_UNDEFINED, "MPI_Waitany: MPI_UNDEFINED with %d of %d left", n - done,
                    n);
        }
        return MPI_SUCCESS;
    }
    case 3: {
        int done = 0, idx[2 * NMSG];
        while (done < n) {
            int out;
            int rc = MPI_Waitsome(n, reqs, &out, idx, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS)
                return rc;
            T_CHECK(out != MPI_UNDEFINED && out > 0, "MPI_Waitsome: outcount %d with %d left", out,
                    n - done);
            done += out;
        }
        return MPI_SUCCESS;
    }
    default: {
        int flag = 0;
        while (!flag) {
            int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS)
                return rc;
        }
        return MPI_SUCCESS;
    }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "wait_race", 240);
    const char *mode_env = getenv("MPIXACC_TEST_MODE");
    long iters = 4000;
    if (mode_env && !strcmp(mode_env, "tsan"))
        iters = 3000; /* about 10 s */
    else if (mode_env && !strcmp(mode_env, "valgrind"))
        iters = 300;
    const char *it = getenv("WAIT_RACE_ITERS");
    if (it && atol(it) > 0)
        iters = atol(it);
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;

    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    uint64_t sbuf[NMSG], rbuf[NMSG];
    MPI_Request reqs[2 * NMSG];
    static const char *names[] = {"MPI_Waitall", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
                                  "MPI_Testall"};
    double t0 = t_now();
    for (long i = 0; i < iters; i++) {
        int mode = (int)(i % 5);
        t_phase(names[mode]);
        for (int k = 0; k < NMSG; k++) {
            rbuf[k] = ~0ull;
            sbuf[k] = (uint64_t)i * 64 + (uint64_t)k;
            T_MPI(MPIX_Acc_Irecv(s, &rbuf[k], 1, MPI_UINT64_T, prev, k, MPI_COMM_WORLD, &reqs[k]));
        }
        for (int k = 0; k < NMSG; k++)
            T_MPI(MPIX_Acc_Isend(s, &sbuf[k], 1, MPI_UINT64_T, next, k, MPI_COMM_WORLD,
                                 &reqs[NMSG + k]));
        int rc = complete_all(mode, 2 * NMSG, reqs);
        T_CHECK(rc == MPI_SUCCESS, "iteration %ld: %s returned %s", i, names[mode], t_errstr(rc));
        for (int k = 0; k < 2 * NMSG; k++)
            T_CHECK(reqs[k] == MPI_REQUEST_NULL, "iteration %ld: %s left request %d active", i,
                    names[mode], k);
        for (int k = 0; k < NMSG; k++)
            T_CHECK(rbuf[k] == (uint64_t)i * 64 + (uint64_t)k,
                    "iteration %ld, message %d: got %llu, expected %llu", i, k,
                    (unsigned long long)rbuf[k], (unsigned long long)((uint64_t)i * 64 + k));
    }
    if (t_rank == 0)
        printf("[wait_race] %ld iterations x %d messages each way in %.2f s\n", iters, NMSG,
               t_now() - t0);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
