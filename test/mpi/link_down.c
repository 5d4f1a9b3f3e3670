/*
 * link_down.c - a node's network link goes down mid-run (issue 22, item 2).
 * Run by test/multinode/multinode.sh across two simulated nodes
 * (scripts/simnodes.sh), one rank each; LINK_DOWN_EXPECT says the mode.
 *
 * Both ranks exchange stream-ordered messages on host streams first (the
 * endpoints exist). Then rank 0 enqueues, with rank 1: a receive (tag 11)
 * waited on the host, a receive (tag 12) with a stream wait and a flag
 * behind it, a 64 KiB send (tag 14); and tells rank 1 (plain MPI_Send) to
 * cut its node's link (`ip link set eth0 down` in its network namespace).
 * Rank 1 holds the link down for LINK_DOWN_HOLD seconds (default 10), then
 * restores it.
 *
 * LINK_DOWN_EXPECT=errors (MPIX_ACC_PEER_ERRORS=1, UCX's TCP keep-alive
 * shortened by the caller): rank 0's receives complete with the library's
 * transport error while the link is down (within the hold), the stream is
 * released with the error in the status, the send completes with the error
 * or had completed locally (its bytes in the socket); MPI_Finalize returns.
 *
 * LINK_DOWN_EXPECT=default: a peer is never given up (MPI semantics): the
 * operations stay pending while the link is down (checked with MPI_Test
 * for 4 s), and once rank 1 restores the link and does its part (sends
 * tags 11 and 12, receives tag 14) they complete with the right data --
 * nothing lost. (The send may complete at once: local completion.) MPI_Finalize returns on both.
 *
 * Rank 0 prints "[link_down] PASS ..." and "[link_down] rank 0:
 * MPI_Finalize returned ..."; the script checks both.
 */
#include "common.h"

static void set_link(const char *state)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "ip link set eth0 %s", state);
    int rc = system(cmd);
    T_CHECK(rc == 0, "'%s' failed (%d): not in a simulated node?", cmd, rc);
    fprintf(stderr, "[link_down] rank 1: link %s\n", state);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "link_down", 120);
    T_CHECK(t_size == 2, "this test runs with 2 ranks (one per node), got %d", t_size);
    const char *expect = getenv("LINK_DOWN_EXPECT");
    int errors_mode = expect && strcmp(expect, "errors") == 0;
    double hold = getenv("LINK_DOWN_HOLD") ? atof(getenv("LINK_DOWN_HOLD")) : 10.0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPIX_Acc_stream S1, S2;
    T_MPI(MPIX_Acc_Hoststream_create(&S1));
    T_MPI(MPIX_Acc_Hoststream_create(&S2));
    int peer = 1 - t_rank;

    t_phase("exchange before the cut");
    static uint8_t sbuf[65536], rbuf[65536];
    for (int i = 0; i < 6; i++)
        t_exchange_checked(S1, sbuf, rbuf, (i % 2) ? 65536 : 8, peer, 1, MPI_COMM_WORLD,
                           (uint64_t)(t_rank * 100 + i), (uint64_t)(peer * 100 + i), "exchange");
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));

    static uint8_t r11[64], r12[64], s14[65536], r14[65536], s11[64], s12[64];
    if (t_rank == 1) {
        t_phase("cut the link, hold it, restore it");
        int go = 0;
        T_MPI(MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        set_link("down");
        t_sleep_ms((int)(hold * 1000));
        set_link("up");
        if (!errors_mode) {
            t_phase("the messages of the cut, after it");
            MPI_Request rq[3];
            t_fill(s11, 64, 11);
            t_fill(s12, 64, 12);
            T_MPI(MPIX_Acc_Isend(S1, s11, 64, MPI_BYTE, 0, 11, MPI_COMM_WORLD, &rq[0]));
            T_MPI(MPIX_Acc_Isend(S1, s12, 64, MPI_BYTE, 0, 12, MPI_COMM_WORLD, &rq[1]));
            T_MPI(MPIX_Acc_Irecv(S1, r14, 65536, MPI_BYTE, 0, 14, MPI_COMM_WORLD, &rq[2]));
            T_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
            t_expect_pattern(r14, 65536, 14, "64 KiB send of the cut, received after it");
        }
    } else {
        t_phase("enqueue operations with the node being cut");
        MPI_Request rr_host, rr_stream, rs;
        MPI_Status st_stream;
        memset(&st_stream, 0, sizeof st_stream);
        atomic_int released;
        atomic_store(&released, 0);
        t_fill(s14, 65536, 14);
        T_MPI(MPIX_Acc_Irecv(S2, r11, 64, MPI_BYTE, 1, 11, MPI_COMM_WORLD, &rr_host));
        T_MPI(MPIX_Acc_Irecv(S1, r12, 64, MPI_BYTE, 1, 12, MPI_COMM_WORLD, &rr_stream));
        T_MPI(MPIX_Acc_Wait(S1, &rr_stream, &st_stream));
        T_MPI(MPIX_Acc_Hoststream_launch(S1, t_flag_fn, &released));
        T_MPI(MPIX_Acc_Isend(S2, s14, 65536, MPI_BYTE, 1, 14, MPI_COMM_WORLD, &rs));
        int go = 1;
        T_MPI(MPI_Send(&go, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
        double t0 = t_now();
        if (errors_mode) {
            t_phase("operations with the cut node fail while it is cut off");
            t_expect_transport_error(MPI_Wait(&rr_host, MPI_STATUS_IGNORE),
                                     "receive from the cut node (host wait)", t0, hold);
            /* the send may have completed locally (its bytes in the socket's
             * buffer) before the cut was seen: success or the error */
            int rc14 = MPI_Wait(&rs, MPI_STATUS_IGNORE);
            if (rc14 != MPI_SUCCESS)
                t_expect_transport_error(rc14, "64 KiB send to the cut node (host wait)", t0, hold);
            else
                fprintf(stderr, "[link_down] rank 0: the 64 KiB send completed locally\n");
            T_MPI(MPIX_Acc_Hoststream_synchronize(S1));
            T_CHECK(atomic_load(&released), "work behind the stream wait did not run");
            t_expect_transport_error(st_stream.MPI_ERROR,
                                     "receive from the cut node (stream wait status)", t0, hold);
        } else {
            t_phase("operations stay pending while the link is down");
            while (t_now() - t0 < 4.0) {
                /* (the send may complete locally: in the socket's buffer) */
                int f11 = 0;
                T_MPI(MPI_Test(&rr_host, &f11, MPI_STATUS_IGNORE));
                T_CHECK(!f11, "a receive from the cut node completed while cut off");
                T_CHECK(!atomic_load(&released), "the stream wait was released while cut off");
                t_sleep_ms(100);
            }
            t_phase("they complete after the link is back, data intact");
            T_MPI(MPI_Wait(&rr_host, MPI_STATUS_IGNORE));
            T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S1));
            T_CHECK(atomic_load(&released), "work behind the stream wait did not run");
            T_CHECK(st_stream.MPI_ERROR == MPI_SUCCESS, "stream wait status: %s",
                    t_errstr(st_stream.MPI_ERROR));
            t_expect_pattern(r11, 64, 11, "receive of the cut, completed after it");
            t_expect_pattern(r12, 64, 12, "stream-waited receive of the cut, after it");
            fprintf(stderr,
                    "[link_down] rank 0: pending for %.1f s, complete after the link came "
                    "back\n",
                    t_now() - t0);
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(S2));
    }
    t_phase("MPI_Finalize");
    t_finalize_timed(60);
    if (t_rank == 0)
        printf("[link_down] PASS (%s mode)\n", errors_mode ? "peer-errors" : "default");
    fflush(stdout);
    fflush(stderr);
    return 0;
}
