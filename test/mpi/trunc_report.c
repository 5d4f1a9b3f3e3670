/*
 * trunc_report.c - truncated receives waited on a stream, for
 * test/mpi/trunc_report.sh, which checks what the library logs about them.
 *
 *   trunc_report status    every wait passes a status: each truncated
 *                          receive's status.MPI_ERROR must be of class
 *                          MPI_ERR_TRUNCATE (checked here); the error has
 *                          reached the user, so the library must not report
 *                          it again (no WARN, no ERROR at MPI_Finalize)
 *   trunc_report ignore    every wait passes MPI_STATUS(ES)_IGNORE: nobody
 *                          saw the errors, so the library reports each one
 *                          (a WARN) and MPI_Finalize their number (an ERROR)
 *   trunc_report coll      a stream-ordered MPIX_Acc_Bcast whose root sends
 *                          100 ints and whose other members expect 50: the
 *                          truncated message has no request or status, so
 *                          the library reports it (a WARN on each rank the
 *                          root sends to) and MPI_Finalize their number
 *
 * Each rank receives T_TRUNCATED truncated messages from its left
 * neighbour (100 B and 200000 B sends into half-size buffers: eager and
 * rendezvous), each waited in one of five ways: MPIX_Acc_Wait,
 * MPIX_Acc_Waitall (next to a good receive), and on a stream communicator
 * MPI_Recv, MPI_Irecv + MPI_Wait, MPI_Irecv + MPI_Waitall. The script checks
 * the count it prints ("truncated receives per rank: N").
 */
#include "common.h"

#define T_WAYS 5
#define T_TRUNCATED (2 * T_WAYS)

static int next, prev;

static void check_truncated(const MPI_Status *st, int tag, int ignore, const char *what)
{
    if (ignore)
        return;
    int c = -1;
    MPI_Error_class(st->MPI_ERROR, &c);
    T_CHECK(c == MPI_ERR_TRUNCATE, "%s: status.MPI_ERROR expected class MPI_ERR_TRUNCATE, got %s",
            what, t_errstr(st->MPI_ERROR));
    T_CHECK(st->MPI_SOURCE == prev && st->MPI_TAG == tag,
            "%s: status source/tag %d/%d expected %d/%d", what, st->MPI_SOURCE, st->MPI_TAG, prev,
            tag);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "trunc_report", 60);
    int ignore = argc > 1 && strcmp(argv[1], "ignore") == 0;
    int coll = argc > 1 && strcmp(argv[1], "coll") == 0;
    T_CHECK(argc > 1 && (ignore || coll || strcmp(argv[1], "status") == 0),
            "usage: trunc_report status|ignore|coll");
    if (coll) {
        t_phase("a Bcast whose members' counts differ");
        MPIX_Acc_stream s;
        int b[100];
        for (int i = 0; i < 100; i++)
            b[i] = t_rank == 0 ? i : -1;
        T_MPI(MPIX_Acc_Hoststream_create(&s));
        T_MPI(MPIX_Acc_Bcast(s, b, t_rank == 0 ? 100 : 50, MPI_INT, 0, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_MPI(MPIX_Acc_Hoststream_free(&s));
        return t_finish();
    }
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream S;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    MPI_Comm sc; /* stream communicator on S */
    MPI_Info info;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &sc));
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPIX_Acc_Info_set_stream(info, S));
    T_MPI(MPI_Comm_set_info(sc, info));
    T_MPI(MPI_Info_free(&info));
    T_MPI(MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN));

    const int sizes[2] = {100, 200000};
    for (int v = 0; v < 2; v++) {
        int n = sizes[v], rn = n / 2;
        char what[128];
        uint8_t *sbuf = malloc((size_t)n), *rbuf = malloc((size_t)n);
        T_CHECK(sbuf && rbuf, "malloc");
        t_fill(sbuf, (size_t)n, (uint64_t)t_rank);
        MPI_Request rq[4];
        MPI_Status st[4], *stp = ignore ? MPI_STATUS_IGNORE : &st[0];
        MPI_Status *sts = ignore ? MPI_STATUSES_IGNORE : st;
        int okv = t_rank, okr = -1;

        snprintf(what, sizeof what, "%d B into %d B, MPIX_Acc_Wait", n, rn);
        t_phase(what);
        T_MPI(MPIX_Acc_Isend(S, sbuf, n, MPI_BYTE, next, 40, MPI_COMM_WORLD, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(S, rbuf, rn, MPI_BYTE, prev, 40, MPI_COMM_WORLD, &rq[1]));
        T_MPI(MPIX_Acc_Wait(S, &rq[1], stp));
        T_MPI(MPIX_Acc_Wait(S, &rq[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        check_truncated(&st[0], 40, ignore, what);

        snprintf(what, sizeof what, "%d B into %d B, MPIX_Acc_Waitall", n, rn);
        t_phase(what);
        T_MPI(MPIX_Acc_Irecv(S, rbuf, rn, MPI_BYTE, prev, 41, MPI_COMM_WORLD, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(S, &okr, 1, MPI_INT, prev, 42, MPI_COMM_WORLD, &rq[1]));
        T_MPI(MPIX_Acc_Isend(S, sbuf, n, MPI_BYTE, next, 41, MPI_COMM_WORLD, &rq[2]));
        T_MPI(MPIX_Acc_Isend(S, &okv, 1, MPI_INT, next, 42, MPI_COMM_WORLD, &rq[3]));
        T_MPI(MPIX_Acc_Waitall(S, 4, rq, sts));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        check_truncated(&st[0], 41, ignore, what);
        T_CHECK(okr == prev, "%s: the good receive got %d expected %d", what, okr, prev);

        /* stream communicator: unmodified MPI calls, stream-waited */
        snprintf(what, sizeof what, "%d B into %d B, MPI_Recv on a stream communicator", n, rn);
        t_phase(what);
        T_MPI(MPI_Isend(sbuf, n, MPI_BYTE, next, 43, sc, &rq[0]));
        T_MPI(MPI_Recv(rbuf, rn, MPI_BYTE, prev, 43, sc, stp));
        T_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        check_truncated(&st[0], 43, ignore, what);

        snprintf(what, sizeof what, "%d B into %d B, MPI_Wait on a stream communicator", n, rn);
        t_phase(what);
        T_MPI(MPI_Isend(sbuf, n, MPI_BYTE, next, 44, sc, &rq[0]));
        T_MPI(MPI_Irecv(rbuf, rn, MPI_BYTE, prev, 44, sc, &rq[1]));
        T_MPI(MPI_Wait(&rq[1], stp));
        T_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        check_truncated(&st[0], 44, ignore, what);

        snprintf(what, sizeof what, "%d B into %d B, MPI_Waitall on a stream communicator", n, rn);
        t_phase(what);
        T_MPI(MPI_Isend(sbuf, n, MPI_BYTE, next, 45, sc, &rq[0]));
        T_MPI(MPI_Irecv(rbuf, rn, MPI_BYTE, prev, 45, sc, &rq[1]));
        T_MPI(MPI_Waitall(2, rq, sts));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        check_truncated(&st[1], 45, ignore, what);
        free(sbuf);
        free(rbuf);
    }
    if (t_rank == 0)
        printf("[trunc_report] truncated receives per rank: %d\n", T_TRUNCATED);
    T_MPI(MPI_Comm_free(&sc));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    return t_finish();
}
