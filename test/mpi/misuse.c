/*
 * misuse.c - erroneous uses that must get an MPI error, not a crash or a
 * silent hang (issue 13, items 2 and 9), with MPI_ERRORS_RETURN:
 *
 *  - NULL buffer with count > 0 (MPIX_Acc_Isend/Irecv and stream-communicator
 *    MPI_Isend/MPI_Irecv): MPI_ERR_BUFFER, like MPICH for MPI_Isend. Before
 *    the fix it was accepted and the progress thread died with SIGSEGV.
 *    count 0 with NULL is fine, and so is NULL (MPI_BOTTOM) with a derived
 *    type whose true lower bound is not 0 (absolute addresses): on a host
 *    stream the message is sent from there (derived datatypes, issue 20).
 *  - Waiting on the host on a stale copy of a handle that a stream wait (or
 *    MPI_Request_free) already took: MPI_ERR_REQUEST with a message. Before
 *    the fix MPI_Wait blocked forever without a word.
 */
#include "common.h"

static void expect_class(int rc, int cls, const char *what)
{
    int got = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &got);
    T_CHECK(got == cls, "%s: got %s, expected class %d", what, t_errstr(rc), cls);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "misuse", 60);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    MPI_Request r = MPI_REQUEST_NULL;

    t_phase("NULL buffer, explicit calls");
    expect_class(MPIX_Acc_Isend(s, NULL, 4, MPI_INT, next, 1, MPI_COMM_WORLD, &r), MPI_ERR_BUFFER,
                 "MPIX_Acc_Isend(NULL, 4)");
    T_CHECK(r == MPI_REQUEST_NULL, "failed Isend set a request");
    expect_class(MPIX_Acc_Irecv(s, NULL, 4, MPI_INT, prev, 1, MPI_COMM_WORLD, &r), MPI_ERR_BUFFER,
                 "MPIX_Acc_Irecv(NULL, 4)");
    expect_class(MPIX_Acc_Send(s, NULL, 1, MPI_BYTE, next, 1, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                 "MPIX_Acc_Send(NULL, 1)");

    t_phase("NULL buffer, stream communicator");
    MPI_Comm sc;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &sc));
    T_MPI(MPIX_Acc_Comm_set_stream(sc, s));
    MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN);
    expect_class(MPI_Isend(NULL, 2, MPI_DOUBLE, next, 1, sc, &r), MPI_ERR_BUFFER,
                 "MPI_Isend(NULL, 2) on a stream communicator");
    expect_class(MPI_Irecv(NULL, 2, MPI_DOUBLE, prev, 1, sc, &r), MPI_ERR_BUFFER,
                 "MPI_Irecv(NULL, 2) on a stream communicator");

    t_phase("NULL buffer with count 0 and MPI_BOTTOM with an absolute-address type");
    MPI_Request z[2];
    T_MPI(MPIX_Acc_Irecv(s, NULL, 0, MPI_INT, prev, 2, MPI_COMM_WORLD, &z[0]));
    T_MPI(MPIX_Acc_Isend(s, NULL, 0, MPI_INT, next, 2, MPI_COMM_WORLD, &z[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, z, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    int cell = 7;
    MPI_Aint addr;
    MPI_Get_address(&cell, &addr);
    int bl = 1;
    MPI_Datatype abs_t;
    T_MPI(MPI_Type_create_hindexed(1, &bl, &addr, MPI_INT, &abs_t));
    T_MPI(MPI_Type_commit(&abs_t));
    int rc = MPIX_Acc_Isend(s, MPI_BOTTOM, 1, abs_t, next, 3, MPI_COMM_WORLD, &r);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(cls != MPI_ERR_BUFFER, "MPI_BOTTOM with an absolute-address type: MPI_ERR_BUFFER");
    T_CHECK(rc == MPI_SUCCESS, "MPI_BOTTOM with an absolute-address type: %s", t_errstr(rc));
    if (rc == MPI_SUCCESS) {
        int got = 0;
        T_MPI(MPIX_Acc_Irecv(s, &got, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &z[0]));
        z[1] = r;
        T_MPI(MPIX_Acc_Waitall(s, 2, z, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_CHECK(got == 7, "MPI_BOTTOM message: got %d", got);
    }
    MPI_Type_free(&abs_t);

    t_phase("stale handle copy after a stream wait");
    /* Sends go on a second stream: s waits for its receive first, and the
     * peer's send must not sit behind the peer's own wait. Rank 1's sends
     * come 1 s late, so rank 0's receives are pending while it tries the
     * stale copies (on rank 1 they may be pending or done: both must fail). */
    MPIX_Acc_stream s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    int v = t_rank, w = -1;
    MPI_Request rr, copy;
    T_MPI(MPIX_Acc_Irecv(s, &w, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, &rr));
    copy = rr;
    T_MPI(MPIX_Acc_Wait(s, &rr, MPI_STATUS_IGNORE));
    T_CHECK(rr == MPI_REQUEST_NULL, "MPIX_Acc_Wait did not take the handle");
    /* The receive is still pending (nothing sent yet): a host wait on the copy
     * must fail at once, not block. */
    double t0 = t_now();
    expect_class(MPI_Wait(&copy, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                 "MPI_Wait on a stale copy after MPIX_Acc_Wait");
    int flag = 0;
    expect_class(MPI_Test(&copy, &flag, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                 "MPI_Test on a stale copy");
    MPI_Request arr[2] = {copy, MPI_REQUEST_NULL};
    expect_class(MPI_Waitall(2, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST,
                 "MPI_Waitall with a stale copy");
    int idx;
    expect_class(MPI_Waitany(2, arr, &idx, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                 "MPI_Waitany with a stale copy");
    T_CHECK(t_now() - t0 < 5.0, "stale-copy errors took %.1f s", t_now() - t0);
    if (t_rank == 1)
        t_sleep_ms(1000);
    MPI_Request sr;
    T_MPI(MPIX_Acc_Isend(s2, &v, 1, MPI_INT, next, 4, MPI_COMM_WORLD, &sr));
    T_MPI(MPIX_Acc_Wait(s2, &sr, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
    T_CHECK(w == prev, "stream-waited receive: got %d, expected %d", w, prev);

    t_phase("stale handle copy after MPI_Request_free");
    T_MPI(MPIX_Acc_Irecv(s, &w, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &rr));
    copy = rr;
    T_MPI(MPI_Request_free(&rr));
    expect_class(MPI_Wait(&copy, MPI_STATUS_IGNORE), MPI_ERR_REQUEST,
                 "MPI_Wait on a stale copy after MPI_Request_free");
    if (t_rank == 1)
        t_sleep_ms(1000);
    T_MPI(MPIX_Acc_Isend(s2, &v, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &sr));
    T_MPI(MPIX_Acc_Wait(s2, &sr, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));

    t_phase("cleanup");
    MPI_Comm_free(&sc);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
