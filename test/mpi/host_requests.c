/*
 * host_requests.c - accelerated requests (MPIX_Acc_Isend/Irecv on a host
 * stream) used with the host MPI request functions, mixed in one array with
 * plain MPI requests (on a separate plain communicator):
 *   MPI_Wait, MPI_Test, MPI_Waitall, MPI_Waitany, MPI_Waitsome, MPI_Testall,
 *   MPI_Testany, MPI_Testsome, MPI_Request_get_status, MPI_Request_free,
 *   MPI_Cancel (receives), and MPIX_Acc_Wait + MPI_Wait on one stream.
 * The accelerated operations sit behind a gate on their stream for part of
 * each test, so the host functions must also handle requests whose stream
 * has not reached them yet.
 */
#include "common.h"

static int next, prev;
static MPIX_Acc_stream S;
static MPI_Comm pcomm; /* plain communicator */

#define N1 300    /* eager */
#define N2 150000 /* rendezvous */

typedef struct {
    uint8_t *acc_s, *acc_r, *pl_s, *pl_r, *acc_s2, *acc_r2;
} bufs_t;

static void bufs_init(bufs_t *b, uint64_t salt)
{
    b->acc_s = malloc(N2);
    b->acc_r = malloc(N2);
    b->pl_s = malloc(N2);
    b->pl_r = malloc(N2);
    b->acc_s2 = malloc(N1);
    b->acc_r2 = malloc(N1);
    t_fill(b->acc_s, N2, salt * 16 + (uint64_t)t_rank * 1000 + 1);
    t_fill(b->pl_s, N2, salt * 16 + (uint64_t)t_rank * 1000 + 2);
    t_fill(b->acc_s2, N1, salt * 16 + (uint64_t)t_rank * 1000 + 3);
    memset(b->acc_r, 0, N2);
    memset(b->pl_r, 0, N2);
    memset(b->acc_r2, 0, N1);
}
static void bufs_check(bufs_t *b, uint64_t salt, const char *what)
{
    char w[160];
    snprintf(w, sizeof w, "%s: accelerated 150000-B receive", what);
    t_expect_pattern(b->acc_r, N2, salt * 16 + (uint64_t)prev * 1000 + 1, w);
    snprintf(w, sizeof w, "%s: plain receive", what);
    t_expect_pattern(b->pl_r, N2, salt * 16 + (uint64_t)prev * 1000 + 2, w);
    snprintf(w, sizeof w, "%s: accelerated 300-B receive", what);
    t_expect_pattern(b->acc_r2, N1, salt * 16 + (uint64_t)prev * 1000 + 3, w);
}
static void bufs_free(bufs_t *b)
{
    free(b->acc_s);
    free(b->acc_r);
    free(b->pl_s);
    free(b->pl_r);
    free(b->acc_s2);
    free(b->acc_r2);
}

/* Post 7 requests: [0] acc recv N2, [1] plain recv, [2] acc recv N1, [3] NULL,
 * [4] acc send N2, [5] plain send, [6] acc send N1. The acc ops follow a gate
 * on S. Tags base..base+2. */
enum { NREQ = 7 };
static void post_mixed(bufs_t *b, MPI_Request *rq, t_gate_t *g, int base)
{
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, g));
    T_MPI(MPIX_Acc_Irecv(S, b->acc_r, N2, MPI_BYTE, prev, base, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPI_Irecv(b->pl_r, N2, MPI_BYTE, prev, base + 1, pcomm, &rq[1]));
    T_MPI(MPIX_Acc_Irecv(S, b->acc_r2, N1, MPI_BYTE, prev, base + 2, MPI_COMM_WORLD, &rq[2]));
    rq[3] = MPI_REQUEST_NULL;
    T_MPI(MPIX_Acc_Isend(S, b->acc_s, N2, MPI_BYTE, next, base, MPI_COMM_WORLD, &rq[4]));
    T_MPI(MPI_Isend(b->pl_s, N2, MPI_BYTE, next, base + 1, pcomm, &rq[5]));
    T_MPI(MPIX_Acc_Isend(S, b->acc_s2, N1, MPI_BYTE, next, base + 2, MPI_COMM_WORLD, &rq[6]));
}
static void check_recv_status(const MPI_Status *st, int idx, int base, const char *what)
{
    char w[160];
    snprintf(w, sizeof w, "%s: status of request %d", what, idx);
    if (idx == 0)
        t_expect_status(st, prev, base, N2, MPI_BYTE, w);
    else if (idx == 1)
        t_expect_status(st, prev, base + 1, N2, MPI_BYTE, w);
    else if (idx == 2)
        t_expect_status(st, prev, base + 2, N1, MPI_BYTE, w);
}

static void test_wait_test(void)
{
    t_phase("MPI_Wait and MPI_Test on accelerated requests");
    bufs_t b;
    bufs_init(&b, 1);
    MPI_Request rq[NREQ];
    MPI_Status st;
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    post_mixed(&b, rq, &g, 100);
    t_sleep_ms(100);
    atomic_store(&g.open, 1);
    /* MPI_Test until complete on the accelerated receive */
    int flag = 0;
    double t0 = t_now();
    while (!flag) {
        T_MPI(MPI_Test(&rq[0], &flag, &st));
        T_CHECK(t_now() - t0 < T_SLOW(30), "MPI_Test never completed the accelerated receive");
    }
    T_CHECK(rq[0] == MPI_REQUEST_NULL, "MPI_Test did not free the completed request");
    check_recv_status(&st, 0, 100, "MPI_Test");
    /* MPI_Test on a null request: flag true, empty status */
    flag = 0;
    T_MPI(MPI_Test(&rq[3], &flag, &st));
    T_CHECK(flag, "MPI_Test on MPI_REQUEST_NULL gave flag 0");
    for (int i = 1; i < NREQ; i++) {
        if (i == 3)
            continue;
        T_MPI(MPI_Wait(&rq[i], &st));
        T_CHECK(rq[i] == MPI_REQUEST_NULL, "MPI_Wait did not free request %d", i);
        check_recv_status(&st, i, 100, "MPI_Wait");
    }
    bufs_check(&b, 1, "Wait/Test");
    bufs_free(&b);
}

static void test_waitall(void)
{
    t_phase("MPI_Waitall mixed");
    bufs_t b;
    bufs_init(&b, 2);
    MPI_Request rq[NREQ];
    MPI_Status st[NREQ];
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    post_mixed(&b, rq, &g, 200);
    t_sleep_ms(50);
    atomic_store(&g.open, 1);
    T_MPI(MPI_Waitall(NREQ, rq, st));
    for (int i = 0; i < NREQ; i++) {
        T_CHECK(rq[i] == MPI_REQUEST_NULL, "MPI_Waitall left request %d non-null", i);
        check_recv_status(&st[i], i, 200, "MPI_Waitall");
    }
    bufs_check(&b, 2, "Waitall");
    bufs_free(&b);
}

static void test_waitany_waitsome(int some)
{
    t_phase(some ? "MPI_Waitsome mixed" : "MPI_Waitany mixed");
    const char *what = some ? "MPI_Waitsome" : "MPI_Waitany";
    bufs_t b;
    bufs_init(&b, some ? 4 : 3);
    int base = some ? 400 : 300;
    MPI_Request rq[NREQ];
    MPI_Status st[NREQ];
    int seen[NREQ] = {0}, idx[NREQ];
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    post_mixed(&b, rq, &g, base);
    /* with the gate closed, only the plain requests can complete */
    int done = 0, opened = 0;
    double t0 = t_now();
    for (;;) {
        if (!opened && done >= 2) {
            /* both plain ones done: the accelerated ones must all still be pending */
            t_sleep_ms(50);
            opened = 1;
            atomic_store(&g.open, 1);
        }
        int k = 0;
        if (some) {
            int outc = -5;
            T_MPI(MPI_Waitsome(NREQ, rq, &outc, idx, st));
            if (outc == MPI_UNDEFINED)
                break;
            T_CHECK(outc >= 1 && outc <= NREQ, "%s: outcount %d", what, outc);
            k = outc;
        } else {
            int i = -5;
            T_MPI(MPI_Waitany(NREQ, rq, &i, &st[0]));
            if (i == MPI_UNDEFINED)
                break;
            idx[0] = i;
            k = 1;
        }
        for (int j = 0; j < k; j++) {
            int i = idx[j];
            T_CHECK(i >= 0 && i < NREQ && i != 3, "%s returned index %d", what, i);
            T_CHECK(!seen[i], "%s returned index %d twice", what, i);
            T_CHECK(rq[i] == MPI_REQUEST_NULL, "%s did not free request %d", what, i);
            seen[i] = 1;
            T_CHECK(opened || i == 1 || i == 5,
                    "%s completed accelerated request %d while its stream was gated", what, i);
            check_recv_status(&st[j], i, base, what);
            done++;
        }
        T_CHECK(t_now() - t0 < T_SLOW(60), "%s loop took too long", what);
    }
    T_CHECK(done == NREQ - 1, "%s: completed %d requests, expected %d", what, done, NREQ - 1);
    bufs_check(&b, some ? 4 : 3, what);
    bufs_free(&b);
}

static void test_testall_any_some(void)
{
    t_phase("MPI_Testall / Testany / Testsome mixed");
    bufs_t b;
    bufs_init(&b, 5);
    MPI_Request rq[NREQ], copy[NREQ];
    MPI_Status st[NREQ];
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    post_mixed(&b, rq, &g, 500);
    memcpy(copy, rq, sizeof rq);
    /* gate closed: Testall must be false and leave the handles alone */
    double t0 = t_now();
    while (t_now() - t0 < 0.3) {
        int flag = 1;
        T_MPI(MPI_Testall(NREQ, rq, &flag, st));
        T_CHECK(!flag, "MPI_Testall returned true while accelerated requests were gated");
        T_CHECK(memcmp(copy, rq, sizeof rq) == 0,
                "MPI_Testall changed handles while returning false");
        t_sleep_ms(2);
    }
    /* Testany until the two plain ones completed */
    int got = 0;
    t0 = t_now();
    while (got < 2) {
        int i = -5, flag = 0;
        T_MPI(MPI_Testany(NREQ, rq, &i, &flag, &st[0]));
        if (flag && i != MPI_UNDEFINED) {
            T_CHECK(i == 1 || i == 5, "MPI_Testany completed request %d while its stream was gated",
                    i);
            check_recv_status(&st[0], i, 500, "MPI_Testany");
            got++;
        }
        T_CHECK(t_now() - t0 < T_SLOW(30), "MPI_Testany never completed the plain requests");
    }
    atomic_store(&g.open, 1);
    /* Testsome for the rest */
    int seen = 0, idx[NREQ];
    t0 = t_now();
    while (seen < NREQ - 3) {
        int outc = -5;
        T_MPI(MPI_Testsome(NREQ, rq, &outc, idx, st));
        T_CHECK(outc != MPI_UNDEFINED, "MPI_Testsome: MPI_UNDEFINED with %d requests left",
                NREQ - 3 - seen);
        for (int j = 0; j < outc; j++) {
            T_CHECK(idx[j] == 0 || idx[j] == 2 || idx[j] == 4 || idx[j] == 6,
                    "MPI_Testsome returned index %d", idx[j]);
            check_recv_status(&st[j], idx[j], 500, "MPI_Testsome");
        }
        seen += outc;
        T_CHECK(t_now() - t0 < T_SLOW(30), "MPI_Testsome never completed the accelerated requests");
    }
    int flag = 0;
    T_MPI(MPI_Testall(NREQ, rq, &flag, st));
    T_CHECK(flag, "MPI_Testall on all-null requests gave false");
    bufs_check(&b, 5, "Testall/Testany/Testsome");
    bufs_free(&b);
}

static void test_get_status(void)
{
    t_phase("MPI_Request_get_status");
    int sv = t_rank + 10, rv = -1;
    MPI_Request rr, rs;
    MPI_Status st;
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    T_MPI(MPIX_Acc_Irecv(S, &rv, 1, MPI_INT, prev, 600, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Isend(S, &sv, 1, MPI_INT, next, 600, MPI_COMM_WORLD, &rs));
    MPI_Request keep = rr;
    int flag = 1;
    T_MPI(MPI_Request_get_status(rr, &flag, &st));
    T_CHECK(!flag, "MPI_Request_get_status: complete before the stream reached the receive");
    atomic_store(&g.open, 1);
    double t0 = t_now();
    do {
        T_MPI(MPI_Request_get_status(rr, &flag, &st));
        T_CHECK(t_now() - t0 < T_SLOW(30), "MPI_Request_get_status never reported completion");
    } while (!flag);
    T_CHECK(rr == keep, "MPI_Request_get_status changed the handle");
    T_CHECK(rv == prev + 10, "get_status reported completion but data is %d expected %d", rv,
            prev + 10);
    t_expect_status(&st, prev, 600, 1, MPI_INT, "MPI_Request_get_status");
    MPI_Status st2;
    T_MPI(MPI_Wait(&rr, &st2));
    T_CHECK(rr == MPI_REQUEST_NULL, "MPI_Wait after get_status did not free the request");
    t_expect_status(&st2, prev, 600, 1, MPI_INT, "MPI_Wait after get_status");
    T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
}

static void test_request_free(void)
{
    t_phase("MPI_Request_free on accelerated sends");
    uint8_t *s1 = malloc(N2), *s2 = malloc(N1), *r1 = malloc(N2), *r2 = malloc(N1);
    t_fill(s1, N2, 700 + (uint64_t)t_rank);
    t_fill(s2, N1, 800 + (uint64_t)t_rank);
    memset(r1, 0, N2);
    memset(r2, 0, N1);
    MPI_Request rs[2], rr[2];
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    T_MPI(MPIX_Acc_Isend(S, s1, N2, MPI_BYTE, next, 700, MPI_COMM_WORLD, &rs[0]));
    T_MPI(MPIX_Acc_Isend(S, s2, N1, MPI_BYTE, next, 701, MPI_COMM_WORLD, &rs[1]));
    /* free while the stream has not reached the sends */
    T_MPI(MPI_Request_free(&rs[0]));
    T_MPI(MPI_Request_free(&rs[1]));
    T_CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL,
            "MPI_Request_free did not set the handles to MPI_REQUEST_NULL");
    T_MPI(MPIX_Acc_Irecv(S, r1, N2, MPI_BYTE, prev, 700, MPI_COMM_WORLD, &rr[0]));
    T_MPI(MPIX_Acc_Irecv(S, r2, N1, MPI_BYTE, prev, 701, MPI_COMM_WORLD, &rr[1]));
    atomic_store(&g.open, 1);
    T_MPI(MPI_Waitall(2, rr, MPI_STATUSES_IGNORE));
    t_expect_pattern(r1, N2, 700 + (uint64_t)prev, "receive of a freed rendezvous send");
    t_expect_pattern(r2, N1, 800 + (uint64_t)prev, "receive of a freed eager send");
    T_MPI(MPIX_Acc_Hoststream_synchronize(S)); /* sends done before the buffers go */
    /* also free an accelerated receive after it was matched */
    int v = t_rank, w = -1;
    MPI_Request a, c;
    T_MPI(MPIX_Acc_Irecv(S, &w, 1, MPI_INT, prev, 702, MPI_COMM_WORLD, &a));
    T_MPI(MPIX_Acc_Isend(S, &v, 1, MPI_INT, next, 702, MPI_COMM_WORLD, &c));
    T_MPI(MPI_Wait(&c, MPI_STATUS_IGNORE));
    T_MPI(MPI_Request_free(&a));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(s1);
    free(s2);
    free(r1);
    free(r2);
}

static void test_cancel(void)
{
    t_phase("MPI_Cancel on accelerated receives");
    int buf[4] = {1, 2, 3, 4}, late = -1, sv = t_rank + 900;
    MPI_Request r, s;
    MPI_Status st;
    int flag = 0;
    t_phase("MPI_Cancel a) unmatched receive, stream past it");
    /* a) never matched, stream already past it */
    atomic_int reached;
    atomic_store(&reached, 0);
    T_MPI(MPIX_Acc_Irecv(S, buf, 4, MPI_INT, prev, 999, MPI_COMM_WORLD, &r));
    /* (no synchronize: it would wait for the receive itself to complete) */
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_flag_fn, &reached));
    double tr = t_now();
    while (!atomic_load(&reached)) {
        T_CHECK(t_now() - tr < T_SLOW(30), "stream never passed an Irecv");
        t_sleep_ms(1);
    }
    T_MPI(MPI_Cancel(&r));
    T_MPI(MPI_Wait(&r, &st));
    T_MPI(MPI_Test_cancelled(&st, &flag));
    T_CHECK(flag, "cancelled unmatched receive: MPI_Test_cancelled false");
    T_CHECK(buf[0] == 1 && buf[3] == 4, "cancelled receive wrote its buffer");
    t_phase("MPI_Cancel b) receive not yet reached by its stream");
    /* b) cancel while the stream has not reached the receive (gate closed) */
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    T_MPI(MPIX_Acc_Irecv(S, buf, 4, MPI_INT, prev, 999, MPI_COMM_WORLD, &r));
    T_MPI(MPI_Cancel(&r));
    atomic_store(&g.open, 1);
    T_MPI(MPI_Wait(&r, &st));
    flag = 0;
    T_MPI(MPI_Test_cancelled(&st, &flag));
    T_CHECK(flag, "cancelled (not yet posted) receive: MPI_Test_cancelled false");
    t_phase("MPI_Cancel: a later message is not swallowed by cancelled receives");
    /* the cancelled receives must not swallow a later tag-999 message */
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Isend(S, &sv, 1, MPI_INT, next, 999, MPI_COMM_WORLD, &s));
    T_MPI(MPIX_Acc_Irecv(S, &late, 1, MPI_INT, prev, 999, MPI_COMM_WORLD, &r));
    T_MPI(MPI_Wait(&r, &st));
    T_CHECK(late == prev + 900, "receive after two cancelled ones got %d expected %d", late,
            prev + 900);
    t_expect_status(&st, prev, 999, 1, MPI_INT, "receive after cancelled ones");
    T_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    T_CHECK(buf[0] == 1 && buf[3] == 4, "a cancelled receive's buffer was written");
    t_phase("MPI_Cancel c) receive that already matched");
    /* c) cancel after it matched: not cancelled, data there */
    int m = -1;
    T_MPI(MPIX_Acc_Irecv(S, &m, 1, MPI_INT, prev, 998, MPI_COMM_WORLD, &r));
    T_MPI(MPIX_Acc_Isend(S, &sv, 1, MPI_INT, next, 998, MPI_COMM_WORLD, &s));
    T_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* after the barrier every peer's send has been started; wait until our
       receive has matched, then cancel it */
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    double t0 = t_now();
    flag = 0;
    while (!flag) {
        T_MPI(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
        T_CHECK(t_now() - t0 < T_SLOW(30), "matched receive never completed");
    }
    T_MPI(MPI_Cancel(&r));
    T_MPI(MPI_Wait(&r, &st));
    flag = 1;
    T_MPI(MPI_Test_cancelled(&st, &flag));
    T_CHECK(!flag, "cancel of a completed receive reported cancelled");
    T_CHECK(m == prev + 900, "completed receive data %d expected %d", m, prev + 900);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_mixed_waits(void)
{
    t_phase("MPIX_Acc_Wait and MPI_Wait on requests of one stream");
    int a = t_rank, b = t_rank * 2, ra = -1, rb = -1;
    MPI_Request rq[4];
    MPI_Status st;
    T_MPI(MPIX_Acc_Irecv(S, &ra, 1, MPI_INT, prev, 1000, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPIX_Acc_Irecv(S, &rb, 1, MPI_INT, prev, 1001, MPI_COMM_WORLD, &rq[1]));
    T_MPI(MPIX_Acc_Isend(S, &a, 1, MPI_INT, next, 1000, MPI_COMM_WORLD, &rq[2]));
    T_MPI(MPIX_Acc_Isend(S, &b, 1, MPI_INT, next, 1001, MPI_COMM_WORLD, &rq[3]));
    T_MPI(MPIX_Acc_Wait(S, &rq[0], MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&rq[1], &st));
    T_CHECK(rb == prev * 2, "host-waited receive got %d expected %d", rb, prev * 2);
    T_MPI(MPI_Waitall(2, &rq[2], MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(ra == prev, "stream-waited receive got %d expected %d", ra, prev);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "host_requests", 150);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &pcomm));
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    test_wait_test();
    test_waitall();
    test_waitany_waitsome(0);
    test_waitany_waitsome(1);
    test_testall_any_some();
    test_get_status();
    test_request_free();
    test_cancel();
    test_mixed_waits();
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    T_MPI(MPI_Comm_free(&pcomm));
    return t_finish();
}
