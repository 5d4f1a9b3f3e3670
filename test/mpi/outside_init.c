/*
 * outside_init.c - MPIX_Acc_* calls before MPI_Init and after MPI_Finalize
 * (say a C++ destructor freeing a host stream after finalize). No MPI error
 * handler may run then and the library's error classes do not exist: every
 * call returns MPI_ERR_OTHER, calls no handler, and the process goes on and
 * exits 0 (MPICH refuses MPI_Comm_call_errhandler then and ends the process
 * with status 1).
 */
#include "common.h"

static int nfailed, nchecks;

static void noop_fn(void *arg) { (void)arg; }

static void expect_other(int rc, const char *when, const char *what)
{
    nchecks++;
    if (rc != MPI_ERR_OTHER) {
        fprintf(stderr,
                "[outside_init] rank %d FAIL: %s %s returned %d, expected "
                "MPI_ERR_OTHER (%d)\n",
                t_rank, what, when, rc, MPI_ERR_OTHER);
        nfailed++;
    }
}

/* Every kind of call, on a stream handle that is not live (before MPI_Init:
 * a pointer to junk; after MPI_Finalize: a host stream never freed). */
static void calls(const char *when, MPIX_Acc_stream stream)
{
    MPIX_Acc_stream s = NULL;
    int buf[4] = {0};
    MPI_Request r = MPI_REQUEST_NULL;
    expect_other(MPIX_Acc_Hoststream_create(&s), when, "MPIX_Acc_Hoststream_create");
    expect_other(MPIX_Acc_Hoststream_launch(stream, noop_fn, NULL), when,
                 "MPIX_Acc_Hoststream_launch");
    expect_other(MPIX_Acc_Hoststream_synchronize(stream), when, "MPIX_Acc_Hoststream_synchronize");
    expect_other(MPIX_Acc_Isend(stream, buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r), when,
                 "MPIX_Acc_Isend");
    expect_other(MPIX_Acc_Irecv(stream, buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r), when,
                 "MPIX_Acc_Irecv");
    expect_other(MPIX_Acc_Send(stream, buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD), when,
                 "MPIX_Acc_Send");
    r = MPI_REQUEST_NULL;
    expect_other(MPIX_Acc_Wait(stream, &r, MPI_STATUS_IGNORE), when, "MPIX_Acc_Wait");
    expect_other(MPIX_Acc_Waitall(stream, 1, &r, MPI_STATUSES_IGNORE), when, "MPIX_Acc_Waitall");
    expect_other(MPIX_Acc_Comm_set_stream(MPI_COMM_WORLD, stream), when,
                 "MPIX_Acc_Comm_set_stream");
    MPIX_Acc_stream f = stream;
    expect_other(MPIX_Acc_Hoststream_free(&f), when, "MPIX_Acc_Hoststream_free");
}

int main(int argc, char **argv)
{
    static int junk[64];
    calls("before MPI_Init", (MPIX_Acc_stream)junk);

    t_init(&argc, &argv, "outside_init", 60);
    /* the library works in between */
    MPIX_Acc_stream S, kept;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&kept));
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    int sv = t_rank, rv = -1;
    MPI_Request rq[2];
    T_MPI(MPIX_Acc_Irecv(S, &rv, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPIX_Acc_Isend(S, &sv, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &rq[1]));
    T_MPI(MPIX_Acc_Waitall(S, 2, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(rv == prev, "exchange got %d expected %d", rv, prev);
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    /* `kept` is left alive: MPI_Finalize stops it, the handle is stale */

    t_phase("MPI_Finalize");
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPI_Finalize());
    alarm(0);

    calls("after MPI_Finalize", kept);
    if (nfailed) {
        fprintf(stderr, "[outside_init] rank %d FAIL: %d of %d checks failed (listed above)\n",
                t_rank, nfailed, nchecks);
        return 1;
    }
    if (t_rank == 0)
        printf("[outside_init] PASS with %d ranks (%d calls outside MPI returned "
               "MPI_ERR_OTHER)\n",
               t_size, nchecks);
    return 0;
}
