/*
 * wait_report.c - "no silent hang": a blocking call of the library that
 * waits longer than MPIX_ACC_WAIT_REPORT seconds logs what it waits for.
 * Run by test/mpi/wait_report.sh (with MPIX_ACC_WAIT_REPORT=1), which checks
 * rank 0's log for the reports. Rank 1 holds back each message for
 * WAIT_REPORT_DELAY_S (default 2.5) seconds, so rank 0 blocks in:
 *   1. a host MPI_Wait on an MPIX_Acc_Irecv request;
 *   2. a host MPI_Waitall on two of them;
 *   3. MPIX_Acc_Hoststream_synchronize behind a stream-waited receive;
 *   4. the library's own agreement in MPI_Comm_set_info (rank 1 late);
 *   5. the barrier of MPI_Finalize while rank 1 arrives late;
 * and every wait ends normally once the message (or the rank) arrives.
 */
#include "common.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "wait_report", 120);
    t_need_ranks(2);
    double delay = 2.5;
    const char *e = getenv("WAIT_REPORT_DELAY_S");
    if (e && atof(e) > 0)
        delay = atof(e);
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    int v[2] = {0, 0};
    MPI_Request r[2];
    if (t_rank == 0) {
        t_phase("host MPI_Wait");
        fprintf(stderr, "[wait_report] phase 1: host MPI_Wait\n");
        T_MPI(MPIX_Acc_Irecv(s, &v[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r[0]));
        T_MPI(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        T_CHECK(v[0] == 11, "phase 1: got %d", v[0]);
        t_phase("host MPI_Waitall");
        fprintf(stderr, "[wait_report] phase 2: host MPI_Waitall\n");
        T_MPI(MPIX_Acc_Irecv(s, &v[0], 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &r[0]));
        T_MPI(MPIX_Acc_Irecv(s, &v[1], 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r[1]));
        T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        T_CHECK(v[0] == 12 && v[1] == 13, "phase 2: got %d %d", v[0], v[1]);
        t_phase("host stream synchronize");
        fprintf(stderr, "[wait_report] phase 3: MPIX_Acc_Hoststream_synchronize\n");
        T_MPI(MPIX_Acc_Irecv(s, &v[0], 1, MPI_INT, 1, 4, MPI_COMM_WORLD, &r[0]));
        T_MPI(MPIX_Acc_Wait(s, &r[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        T_CHECK(v[0] == 14, "phase 3: got %d", v[0]);
    } else if (t_rank == 1) {
        int m[4] = {11, 12, 13, 14};
        t_sleep_ms(delay * 1000);
        T_MPI(MPIX_Acc_Send(s, &m[0], 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
        t_sleep_ms(delay * 1000);
        T_MPI(MPIX_Acc_Send(s, &m[1], 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Send(s, &m[2], 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
        t_sleep_ms(delay * 1000);
        T_MPI(MPIX_Acc_Send(s, &m[3], 1, MPI_INT, 0, 4, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    }
    /* 4: the library's agreement of MPI_Comm_set_info, rank 1 late */
    MPI_Comm c;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPI_Info info;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPI_Info_set(info, MPIX_ACC_INFO_RECV_POST, "early"));
    if (t_rank == 0)
        fprintf(stderr, "[wait_report] phase 4: MPI_Comm_set_info\n");
    else
        t_sleep_ms(delay * 1000);
    t_phase("MPI_Comm_set_info");
    T_MPI(MPI_Comm_set_info(c, info));
    T_MPI(MPI_Info_free(&info));
    T_MPI(MPI_Comm_free(&c));
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    /* 5: the barrier of MPI_Finalize, rank 1 late */
    if (t_rank == 0) {
        printf("[wait_report] PASS with %d ranks\n", t_size);
        fflush(stdout);
        fprintf(stderr, "[wait_report] phase 5: MPI_Finalize\n");
    } else {
        t_sleep_ms(delay * 1000);
    }
    t_phase("MPI_Finalize");
    T_MPI(MPI_Finalize());
    return 0;
}
