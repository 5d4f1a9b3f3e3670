/*
 * persistent.c - persistent requests on a stream communicator (host
 * streams): MPI_Send_init / MPI_Recv_init / MPI_Start / MPI_Startall /
 * MPI_Request_free, completed by every kind of wait.
 *
 *   1. a ring exchange restarted 40 times with MPI_Startall + MPI_Waitall
 *      (stream-ordered: returns at once, the handles stay, inactive), the
 *      data checked every time; MPIX_Acc_Waitall on the same handles too;
 *   2. each Start matches anew in call order: a persistent send between
 *      two MPI_Isends of the same tag arrives second (10 rounds);
 *   3. host completion: MPI_Test until done, the status (source, tag,
 *      count) and the handle kept; MPI_Request_get_status;
 *   4. MPI_Start of an active request is MPI_ERR_REQUEST; inactive handles
 *      complete at once (MPI_Waitany gives MPI_UNDEFINED);
 *   5. MPI_Request_free of an active request: its message still arrives;
 *      of an inactive one: the handle becomes MPI_REQUEST_NULL;
 *   6. arguments are checked at init (rank, tag: MPI_ERR_RANK/TAG);
 *      MPI_PROC_NULL persistent requests complete with its status;
 *   7. on a plain communicator persistent requests are the MPI library's.
 */
#include "common.h"

#include <string.h>

static int next, prev;
static MPIX_Acc_stream S;

static void ring_restart(MPI_Comm c)
{
    t_phase("1. ring exchange restarted");
    uint64_t sbuf = 0, rbuf = 0;
    MPI_Request r[2], keep[2];
    T_MPI(MPI_Recv_init(&rbuf, 1, MPI_UINT64_T, prev, 5, c, &r[0]));
    T_MPI(MPI_Send_init(&sbuf, 1, MPI_UINT64_T, next, 5, c, &r[1]));
    keep[0] = r[0];
    keep[1] = r[1];
    for (int it = 0; it < 40; it++) {
        sbuf = (uint64_t)t_rank * 1000 + (uint64_t)it;
        rbuf = 0;
        T_MPI(MPI_Startall(2, r));
        if (it % 2 == 0)
            T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE)); /* stream-ordered */
        else
            T_MPI(MPIX_Acc_Waitall(S, 2, r, MPI_STATUSES_IGNORE));
        T_CHECK(r[0] == keep[0] && r[1] == keep[1],
                "iteration %d: a wait changed the persistent handles", it);
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        uint64_t want = (uint64_t)prev * 1000 + (uint64_t)it;
        T_CHECK(rbuf == want, "iteration %d: received %llu, expected %llu", it,
                (unsigned long long)rbuf, (unsigned long long)want);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
    T_CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "freed handles are not null");
}

static void call_order(MPI_Comm c)
{
    t_phase("2. persistent send between two Isends of one tag");
    uint64_t a, b, d, got[3];
    MPI_Request ps;
    T_MPI(MPI_Send_init(&b, 1, MPI_UINT64_T, next, 7, c, &ps));
    for (int round = 0; round < 10; round++) {
        a = 100u * (uint64_t)round + 1;
        b = 100u * (uint64_t)round + 2;
        d = 100u * (uint64_t)round + 3;
        memset(got, 0, sizeof got);
        MPI_Request rq[6];
        for (int i = 0; i < 3; i++)
            T_MPI(MPI_Irecv(&got[i], 1, MPI_UINT64_T, prev, 7, c, &rq[i]));
        T_MPI(MPI_Isend(&a, 1, MPI_UINT64_T, next, 7, c, &rq[3]));
        T_MPI(MPI_Start(&ps));
        rq[4] = ps;
        T_MPI(MPI_Isend(&d, 1, MPI_UINT64_T, next, 7, c, &rq[5]));
        T_MPI(MPI_Waitall(6, rq, MPI_STATUSES_IGNORE));
        T_CHECK(rq[4] == ps, "round %d: the persistent handle in the array changed", round);
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        for (int i = 0; i < 3; i++)
            T_CHECK(got[i] == 100u * (uint64_t)round + (uint64_t)i + 1,
                    "round %d: receive %d got %llu (persistent send out of call order?)", round, i,
                    (unsigned long long)got[i]);
    }
    T_MPI(MPI_Request_free(&ps));
}

static void host_completion(MPI_Comm c)
{
    t_phase("3. host completion: MPI_Test, statuses, get_status");
    int sbuf[3], rbuf[3];
    MPI_Request rr, sr;
    T_MPI(MPI_Recv_init(rbuf, 3, MPI_INT, prev, 9, c, &rr));
    T_MPI(MPI_Send_init(sbuf, 3, MPI_INT, next, 9, c, &sr));
    MPI_Request keep = rr;
    int flag = 0;
    MPI_Status st;
    /* inactive: complete at once, empty status */
    T_MPI(MPI_Request_get_status(rr, &flag, &st));
    T_CHECK(flag == 1, "an inactive persistent request is not complete for get_status");
    for (int it = 0; it < 5; it++) {
        for (int i = 0; i < 3; i++)
            sbuf[i] = t_rank * 10 + it + i;
        T_MPI(MPI_Start(&rr));
        T_MPI(MPI_Start(&sr));
        flag = 0;
        double t0 = MPI_Wtime();
        while (!flag) {
            T_MPI(MPI_Test(&rr, &flag, &st));
            T_CHECK(MPI_Wtime() - t0 < T_SLOW(60.0), "iteration %d: MPI_Test never completed", it);
        }
        T_CHECK(rr == keep, "iteration %d: MPI_Test changed the persistent handle", it);
        int count = -1;
        T_MPI(MPI_Get_count(&st, MPI_INT, &count));
        T_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 9 && count == 3,
                "iteration %d: status source %d tag %d count %d (want %d 9 3)", it, st.MPI_SOURCE,
                st.MPI_TAG, count, prev);
        for (int i = 0; i < 3; i++)
            T_CHECK(rbuf[i] == prev * 10 + it + i, "iteration %d: rbuf[%d] = %d", it, i, rbuf[i]);
        T_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE)); /* stream-ordered; handle kept */
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    }
    T_MPI(MPI_Request_free(&rr));
    T_MPI(MPI_Request_free(&sr));
}

static void misuse_and_free(MPI_Comm c)
{
    t_phase("4. Start of an active request; inactive handles");
    int v = t_rank, got = -1, got2 = -1;
    MPI_Request rr, sr;
    T_MPI(MPI_Recv_init(&got, 1, MPI_INT, prev, 11, c, &rr));
    T_MPI(MPI_Send_init(&v, 1, MPI_INT, next, 11, c, &sr));
    int idx = 0;
    MPI_Request both[2] = {rr, sr};
    T_MPI(MPI_Waitany(2, both, &idx, MPI_STATUS_IGNORE));
    T_CHECK(idx == MPI_UNDEFINED, "MPI_Waitany of inactive requests gave index %d", idx);
    T_MPI(MPI_Start(&rr));
    int rc = MPI_Start(&rr);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_REQUEST,
            "MPI_Start of an active request: rc %d class %d (want MPI_ERR_REQUEST)", rc, cls);
    T_MPI(MPI_Start(&sr));
    T_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(got == prev, "received %d, expected %d", got, prev);

    t_phase("5. MPI_Request_free of active and inactive requests");
    T_MPI(MPI_Start(&sr)); /* active: freed, but its message still goes */
    T_MPI(MPI_Request_free(&sr));
    T_CHECK(sr == MPI_REQUEST_NULL, "freed active request is not null");
    T_MPI(MPI_Recv(&got2, 1, MPI_INT, prev, 11, c, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(got2 == prev, "the freed active send's message: %d, expected %d", got2, prev);
    T_MPI(MPI_Request_free(&rr)); /* inactive */
    T_CHECK(rr == MPI_REQUEST_NULL, "freed inactive request is not null");
}

static void init_checks(MPI_Comm c)
{
    t_phase("6. arguments checked at init; MPI_PROC_NULL");
    int x = 0, cls = -1;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Send_init(&x, 1, MPI_INT, t_size + 3, 0, c, &r);
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_RANK, "Send_init to rank %d: class %d", t_size + 3,
            cls);
    rc = MPI_Recv_init(&x, 1, MPI_INT, prev, -4, c, &r);
    MPI_Error_class(rc, &cls);
    T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TAG, "Recv_init with tag -4: class %d", cls);
    MPI_Request pn[2];
    T_MPI(MPI_Send_init(&x, 1, MPI_INT, MPI_PROC_NULL, 3, c, &pn[0]));
    T_MPI(MPI_Recv_init(&x, 1, MPI_INT, MPI_PROC_NULL, 3, c, &pn[1]));
    for (int it = 0; it < 3; it++) {
        T_MPI(MPI_Startall(2, pn));
        MPI_Status st[2];
        int flag = 0;
        while (!flag)
            T_MPI(MPI_Testall(2, pn, &flag, st));
        T_CHECK(st[1].MPI_SOURCE == MPI_PROC_NULL, "MPI_PROC_NULL receive: source %d",
                st[1].MPI_SOURCE);
    }
    T_MPI(MPI_Request_free(&pn[0]));
    T_MPI(MPI_Request_free(&pn[1]));
}

static void plain_comm(void)
{
    t_phase("7. persistent requests on a plain communicator");
    int v = t_rank + 50, got = -1;
    MPI_Request r[2];
    T_MPI(MPI_Recv_init(&got, 1, MPI_INT, prev, 13, MPI_COMM_WORLD, &r[0]));
    T_MPI(MPI_Send_init(&v, 1, MPI_INT, next, 13, MPI_COMM_WORLD, &r[1]));
    for (int it = 0; it < 3; it++) {
        got = -1;
        T_MPI(MPI_Startall(2, r));
        T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        T_CHECK(got == prev + 50, "plain communicator: got %d, expected %d", got, prev + 50);
    }
    T_MPI(MPI_Request_free(&r[0]));
    T_MPI(MPI_Request_free(&r[1]));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "persistent", 200);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPI_Comm c = t_stream_comm(&S);
    ring_restart(c);
    call_order(c);
    host_completion(c);
    misuse_and_free(c);
    init_checks(c);
    plain_comm();
    t_stream_comm_free(&c, &S);
    return t_finish();
}
