/*
 * peer_fault.c - a peer killed mid-exchange (issue 13, item 5 and the fault
 * tests). Run by test/mpi/peer_fault.sh, which launches it with mpiexec and
 * checks the outcome; mpiexec itself reports the killed rank as a failure.
 *
 * The last rank is the victim; rank 0 is the survivor that checks. All
 * ranks exchange stream-ordered messages on host streams first, so the
 * endpoints exist both ways. Then rank 0 enqueues, on host streams:
 *   - a receive from the victim (tag 11), waited on the host;
 *   - a receive from the victim (tag 12) with a stream wait and a launched
 *     flag behind it (the stream must be released);
 *   - an MPI_ANY_SOURCE receive on MPI_COMM_WORLD (tag 13), waited on the
 *     host: the documented rule (doc/design.md section 8) is that a
 *     wildcard receive pending when a process of its communicator fails
 *     completes with the error;
 *   - a 1 MiB send to the victim (tag 14: zero-copy, the victim never
 *     receives it), waited on the host;
 *   - on a communicator with the no-wildcard assertions (the stream-executed
 *     path, doc/design.md 5b): a bound receive from the victim (tag 15)
 *     with a stream wait, whose receive step polls the ring, and a flag
 *     behind it; one (tag 16) waited on the host (the progress thread
 *     hunts for it in the ring);
 * and tells the victim (plain MPI_Send) to raise(SIGKILL).
 *
 * PEER_FAULT_EXPECT=errors (with MPIX_ACC_PEER_ERRORS=1): rank 0 checks that
 * each of these completes with the library's transport error within
 * T_SLOW(20) s, that the stream was released with the error in the
 * status, that a send, a receive and a wildcard receive started after the
 * failure fail too, and (with 3 or more ranks) that a wildcard receive on a
 * communicator without the victim still matches a living peer. Then
 * MPI_Finalize must return (the wrapper checks the time and the report).
 *
 * PEER_FAULT_EXPECT=finalize (the default mode): the survivors wait for
 * nothing and call MPI_Finalize at once; it must report the stuck
 * operations and return (launcher without clean-up), or the launcher ends
 * the job (hydra's default).
 *
 * Every survivor prints "[peer_fault] rank R: MPI_Finalize returned RC
 * after S s" and rank 0 then "[peer_fault] PASS ..." (exit 0).
 */
#include "common.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "peer_fault", 60);
    t_need_ranks(2);
    const char *expect = getenv("PEER_FAULT_EXPECT");
    int errors_mode = expect && strcmp(expect, "errors") == 0;
    int victim = t_size - 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    /* communicator of the survivors (made before the failure) */
    MPI_Comm alive;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_rank == victim ? MPI_UNDEFINED : 0, t_rank, &alive));

    MPI_Comm sxc = t_comm_dup(1); /* the stream-executed path's communicator */

    MPIX_Acc_stream S1, S2, S3, S4;
    T_MPI(MPIX_Acc_Hoststream_create(&S1));
    T_MPI(MPIX_Acc_Hoststream_create(&S2));
    T_MPI(MPIX_Acc_Hoststream_create(&S3));
    T_MPI(MPIX_Acc_Hoststream_create(&S4));

    t_phase("exchange before the failure");
    enum { BIG = 1 << 20 };
    static uint8_t sbuf[BIG], rbuf[BIG];
    if (t_rank == 0 || t_rank == victim) {
        int peer = t_rank == 0 ? victim : 0;
        for (int i = 0; i < 10; i++) {
            size_t n = (i % 2) ? 65536 : 8;
            t_exchange_checked(S1, sbuf, rbuf, n, peer, 1, MPI_COMM_WORLD,
                               (uint64_t)(t_rank * 100 + i), (uint64_t)(peer * 100 + i),
                               "exchange");
            /* and on the SX communicator (its rings are made and linked) */
            t_exchange_checked(S4, sbuf, rbuf, 8, peer, 1, sxc, (uint64_t)(t_rank * 100 + 50 + i),
                               (uint64_t)(peer * 100 + 50 + i), "SX exchange");
        }
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (t_rank == victim)
        t_victim_die_on(0, 99);

    t_phase("enqueue operations involving the victim");
    static uint8_t r11[64], r12[64], r13[64], r15[64], r16[64];
    MPI_Request rr_host = MPI_REQUEST_NULL, rr_stream = MPI_REQUEST_NULL;
    MPI_Request sx_stream = MPI_REQUEST_NULL, sx_host = MPI_REQUEST_NULL;
    MPI_Status st_sx;
    memset(&st_sx, 0, sizeof st_sx);
    atomic_int sx_released;
    atomic_store(&sx_released, 0);
    MPI_Request rw = MPI_REQUEST_NULL, rs = MPI_REQUEST_NULL;
    MPI_Status st_stream;
    memset(&st_stream, 0, sizeof st_stream);
    atomic_int released;
    atomic_store(&released, 0);
    if (t_rank == 0) {
        T_MPI(MPIX_Acc_Irecv(S2, r11, 64, MPI_BYTE, victim, 11, MPI_COMM_WORLD, &rr_host));
        T_MPI(MPIX_Acc_Irecv(S1, r12, 64, MPI_BYTE, victim, 12, MPI_COMM_WORLD, &rr_stream));
        T_MPI(MPIX_Acc_Wait(S1, &rr_stream, &st_stream));
        T_MPI(MPIX_Acc_Hoststream_launch(S1, t_flag_fn, &released));
        T_MPI(MPIX_Acc_Irecv(S3, r13, 64, MPI_BYTE, MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, &rw));
        T_MPI(MPIX_Acc_Isend(S2, sbuf, BIG, MPI_BYTE, victim, 14, MPI_COMM_WORLD, &rs));
        T_MPI(MPIX_Acc_Irecv(S4, r15, 64, MPI_BYTE, victim, 15, sxc, &sx_stream));
        T_MPI(MPIX_Acc_Wait(S4, &sx_stream, &st_sx));
        T_MPI(MPIX_Acc_Hoststream_launch(S4, t_flag_fn, &sx_released));
        T_MPI(MPIX_Acc_Irecv(S2, r16, 64, MPI_BYTE, victim, 16, sxc, &sx_host));
        int go = 1;
        T_MPI(MPI_Send(&go, 1, MPI_INT, victim, 99, MPI_COMM_WORLD));
    }

    double t0 = t_now();
    if (errors_mode && t_rank == 0) {
        t_phase("operations pending at the failure complete with the error");
        t_expect_transport_error(MPI_Wait(&rr_host, MPI_STATUS_IGNORE),
                                 "receive from the victim (host wait)", t0, T_SLOW(20.0));
        t_expect_transport_error(MPI_Wait(&rs, MPI_STATUS_IGNORE),
                                 "1 MiB send to the victim (host wait)", t0, T_SLOW(20.0));
        t_expect_transport_error(MPI_Wait(&rw, MPI_STATUS_IGNORE),
                                 "MPI_ANY_SOURCE receive pending at the failure", t0, T_SLOW(20.0));
        t_phase("the stream waiting on a receive from the victim is released");
        T_MPI(MPIX_Acc_Hoststream_synchronize(S1));
        T_CHECK(atomic_load(&released), "work behind the stream wait did not run");
        t_expect_transport_error(st_stream.MPI_ERROR,
                                 "receive from the victim (stream wait status)", t0, T_SLOW(20.0));
        t_phase("stream-executed receives from the victim end with the error");
        t_expect_transport_error(MPI_Wait(&sx_host, MPI_STATUS_IGNORE),
                                 "SX-bound receive from the victim (host wait)", t0, T_SLOW(20.0));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S4));
        T_CHECK(atomic_load(&sx_released), "work behind the SX receive's stream wait did not run");
        t_expect_transport_error(st_sx.MPI_ERROR, "SX-bound receive from the victim (stream wait)",
                                 t0, T_SLOW(20.0));

        t_phase("operations started after the failure fail at once");
        MPI_Request rq;
        double t1 = t_now();
        T_MPI(MPIX_Acc_Irecv(S2, r11, 64, MPI_BYTE, victim, 21, MPI_COMM_WORLD, &rq));
        t_expect_transport_error(MPI_Wait(&rq, MPI_STATUS_IGNORE), "new receive from the victim",
                                 t1, T_SLOW(20.0));
        T_MPI(MPIX_Acc_Isend(S2, sbuf, BIG, MPI_BYTE, victim, 22, MPI_COMM_WORLD, &rq));
        t_expect_transport_error(MPI_Wait(&rq, MPI_STATUS_IGNORE), "new send to the victim", t1,
                                 T_SLOW(20.0));
        T_MPI(MPIX_Acc_Irecv(S3, r13, 64, MPI_BYTE, MPI_ANY_SOURCE, 23, MPI_COMM_WORLD, &rq));
        t_expect_transport_error(MPI_Wait(&rq, MPI_STATUS_IGNORE),
                                 "new MPI_ANY_SOURCE receive on a communicator with the victim", t1,
                                 T_SLOW(20.0));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S2));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S3));
    }
    if (errors_mode && t_size > 2 && t_rank < victim) {
        /* a wildcard receive on a communicator without the victim matches */
        t_phase("MPI_ANY_SOURCE on a communicator without the victim");
        int v = -1, one = 1;
        MPI_Request rq;
        MPI_Status st;
        if (t_rank == 0) {
            T_MPI(MPIX_Acc_Irecv(S3, &v, 1, MPI_INT, MPI_ANY_SOURCE, 31, alive, &rq));
            T_MPI(MPI_Wait(&rq, &st));
            T_CHECK(v == 1 && st.MPI_SOURCE == 1,
                    "wildcard receive on the survivors' "
                    "communicator: got %d from %d, expected 1 from 1",
                    v, st.MPI_SOURCE);
        } else if (t_rank == 1) {
            T_MPI(MPIX_Acc_Isend(S3, &one, 1, MPI_INT, 0, 31, alive, &rq));
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(S3));
    }

    /* MPI_Finalize with the victim gone: it must report and return. The
     * requests of the default mode stay pending (finalize cancels them). */
    if (alive != MPI_COMM_NULL)
        T_MPI(MPI_Comm_free(&alive)); /* local in MPICH */
    if (t_rank == 0 && errors_mode)
        T_MPI(MPI_Comm_free(&sxc));
    t_phase("MPI_Finalize with a failed peer");
    t_finalize_timed(45);
    if (t_rank == 0)
        printf("[peer_fault] PASS survivor (%s mode, %d ranks)\n",
               errors_mode ? "peer-errors" : "default", t_size);
    fflush(stdout);
    fflush(stderr);
    return 0;
}
