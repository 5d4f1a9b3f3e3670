/*
 * cross_stream.c - requests created on one stream waited on another.
 *
 *  1. receive on stream A (held by a gate for 0.5 s), MPIX_Acc_Wait on stream
 *     B, then a check on B (the matching send goes from stream C): B's check
 *     must see the received data, so B must wait for A's operation, which
 *     only starts when A's gate opens;
 *  2. send on stream A (held by a gate), wait on stream B, then B overwrites
 *     the send buffer: the receiver must get the original data;
 *  3. MPIX_Acc_Waitall on stream C of requests from streams A and B;
 *  4. relay: a token travels the ring several times; each rank receives it on
 *     stream A, waits on stream B and forwards it from stream B (after a
 *     launched increment on B), with no host synchronization in between.
 */
#include "common.h"

static int next, prev;

static void recv_waited_elsewhere(MPIX_Acc_stream A, MPIX_Acc_stream B, MPIX_Acc_stream C, size_t n)
{
    char what[128];
    snprintf(what, sizeof what, "recv on A (gated), wait on B, %zu B", n);
    t_phase(what);
    uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
    t_fill(sbuf, n, 100 + (uint64_t)t_rank);
    memset(rbuf, 0, n);
    t_gate_t g;
    t_gate_init(&g);
    t_verify_arg_t ver = {.buf = rbuf, .n = n, .seed = 100 + (uint64_t)prev, .what = what};
    atomic_int bflag;
    atomic_store(&bflag, 0);
    MPI_Request rr, rs;
    MPI_Status st;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(A, t_gate_fn, &g));
    T_MPI(MPIX_Acc_Irecv(A, rbuf, (int)n, MPI_BYTE, prev, 40, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Wait(B, &rr, &st));
    T_MPI(MPIX_Acc_Hoststream_launch(B, t_verify_fn, &ver));
    T_MPI(MPIX_Acc_Hoststream_launch(B, t_flag_fn, &bflag));
    /* the matching send goes from a third, free stream */
    T_MPI(MPIX_Acc_Isend(C, sbuf, (int)n, MPI_BYTE, next, 40, MPI_COMM_WORLD, &rs));
    T_MPI(MPIX_Acc_Wait(C, &rs, MPI_STATUS_IGNORE));
    t_sleep_ms(500);
    int early = atomic_load(&bflag);
    atomic_store(&g.open, 1);
    T_CHECK(!early,
            "%s: work on B after the cross-stream wait ran while A was still held "
            "before the receive",
            what);
    T_MPI(MPIX_Acc_Hoststream_synchronize(B));
    T_MPI(MPIX_Acc_Hoststream_synchronize(A));
    T_MPI(MPIX_Acc_Hoststream_synchronize(C));
    t_check_async();
    T_CHECK(atomic_load(&ver.ran), "%s: check on B never ran", what);
    t_expect_pattern(rbuf, n, 100 + (uint64_t)prev, what);
    t_expect_status(&st, prev, 40, (int)n, MPI_BYTE, what);
    free(sbuf);
    free(rbuf);
}

static void send_waited_elsewhere(MPIX_Acc_stream A, MPIX_Acc_stream B, MPIX_Acc_stream R, size_t n)
{
    char what[128];
    snprintf(what, sizeof what, "send on A (gated), wait on B, B overwrites, %zu B", n);
    t_phase(what);
    uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
    t_fill(sbuf, n, 200 + (uint64_t)t_rank);
    memset(rbuf, 0, n);
    t_gate_t g;
    t_gate_init(&g);
    t_fill_arg_t over = {.buf = sbuf, .n = n, .seed = 999};
    MPI_Request rr, rs;
    MPI_Status st;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Irecv(R, rbuf, (int)n, MPI_BYTE, prev, 41, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Wait(R, &rr, &st));
    T_MPI(MPIX_Acc_Hoststream_launch(A, t_gate_fn, &g));
    T_MPI(MPIX_Acc_Isend(A, sbuf, (int)n, MPI_BYTE, next, 41, MPI_COMM_WORLD, &rs));
    T_MPI(MPIX_Acc_Wait(B, &rs, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_launch(B, t_fill_fn, &over));
    t_sleep_ms(300);
    int early = atomic_load(&over.done);
    atomic_store(&g.open, 1);
    T_CHECK(!early, "%s: B ran past the wait on a send whose stream had not reached it", what);
    T_MPI(MPIX_Acc_Hoststream_synchronize(A));
    T_MPI(MPIX_Acc_Hoststream_synchronize(B));
    T_MPI(MPIX_Acc_Hoststream_synchronize(R));
    t_check_async();
    T_CHECK(t_verify(rbuf, n, 999) != -1 || n == 0,
            "%s: received the data written on B after the cross-stream wait: B did not wait for "
            "the send to complete",
            what);
    t_expect_pattern(rbuf, n, 200 + (uint64_t)prev, what);
    t_expect_status(&st, prev, 41, (int)n, MPI_BYTE, what);
    free(sbuf);
    free(rbuf);
}

static void waitall_mixed_streams(MPIX_Acc_stream A, MPIX_Acc_stream B, MPIX_Acc_stream C)
{
    t_phase("Waitall on C of requests from A and B");
    enum { N = 8, SZ = 70000 };
    uint8_t *sbuf = malloc((size_t)N * SZ), *rbuf = malloc((size_t)N * SZ);
    memset(rbuf, 0, (size_t)N * SZ);
    MPI_Request rq[2 * N];
    MPI_Status st[2 * N];
    t_verify_arg_t ver[N];
    for (int i = 0; i < N; i++)
        t_fill(sbuf + (size_t)i * SZ, SZ, (uint64_t)(t_rank * 1000 + i));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) {
        MPIX_Acc_stream s = (i % 2) ? A : B;
        int sz = (i % 3 == 0) ? 100 : SZ;
        T_MPI(MPIX_Acc_Irecv(s, rbuf + (size_t)i * SZ, sz, MPI_BYTE, prev, 50 + i, MPI_COMM_WORLD,
                             &rq[i]));
        T_MPI(MPIX_Acc_Isend((i % 2) ? B : A, sbuf + (size_t)i * SZ, sz, MPI_BYTE, next, 50 + i,
                             MPI_COMM_WORLD, &rq[N + i]));
    }
    T_MPI(MPIX_Acc_Waitall(C, 2 * N, rq, st));
    for (int i = 0; i < 2 * N; i++)
        T_CHECK(rq[i] == MPI_REQUEST_NULL, "Waitall left request %d non-null", i);
    for (int i = 0; i < N; i++) {
        ver[i] = (t_verify_arg_t){.buf = rbuf + (size_t)i * SZ,
                                  .n = (i % 3 == 0) ? 100 : SZ,
                                  .seed = (uint64_t)(prev * 1000 + i),
                                  .what = "Waitall on C"};
        T_MPI(MPIX_Acc_Hoststream_launch(C, t_verify_fn, &ver[i]));
    }
    T_MPI(MPIX_Acc_Hoststream_synchronize(C));
    t_check_async();
    for (int i = 0; i < N; i++) {
        T_CHECK(atomic_load(&ver[i].ran), "verify %d did not run", i);
        t_expect_status(&st[i], prev, 50 + i, (i % 3 == 0) ? 100 : SZ, MPI_BYTE,
                        "Waitall on C status");
    }
    T_MPI(MPIX_Acc_Hoststream_synchronize(A));
    T_MPI(MPIX_Acc_Hoststream_synchronize(B));
    free(sbuf);
    free(rbuf);
}

typedef struct {
    int *tok;
} inc_arg_t;
static void inc_fn(void *arg) { ((inc_arg_t *)arg)->tok[0] += 1; }

static void relay(MPIX_Acc_stream A, MPIX_Acc_stream B)
{
    t_phase("relay through A (recv) and B (wait, increment, send)");
    enum { ROUNDS = 20, TN = 50000 };
    const size_t ti = TN / sizeof(int);
    /* one token slot per round, plus the final one on rank 0 */
    int *tok = calloc(ROUNDS + 1, TN);
    inc_arg_t *inc = calloc(ROUNDS, sizeof *inc);
    T_CHECK(tok && inc, "calloc");
    for (int r = 0; r <= ROUNDS; r++)
        tok[(size_t)r * ti] = -1000;
    MPI_Request rq;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int r = 0; r < ROUNDS; r++) {
        int *slot = tok + (size_t)r * ti;
        inc[r].tok = slot;
        if (t_rank == 0 && r == 0) {
            slot[0] = 0;
            for (size_t j = 1; j < ti; j++)
                slot[j] = (int)(j * 2654435761u);
        } else {
            int tag = (t_rank == 0) ? 60 + r - 1 : 60 + r;
            T_MPI(MPIX_Acc_Irecv(A, slot, TN, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rq));
            T_MPI(MPIX_Acc_Wait(B, &rq, MPI_STATUS_IGNORE));
        }
        T_MPI(MPIX_Acc_Hoststream_launch(B, inc_fn, &inc[r]));
        T_MPI(MPIX_Acc_Send(B, slot, TN, MPI_BYTE, next, 60 + r, MPI_COMM_WORLD));
    }
    int *fin = tok + (size_t)ROUNDS * ti;
    if (t_rank == 0) {
        T_MPI(MPIX_Acc_Irecv(A, fin, TN, MPI_BYTE, prev, 60 + ROUNDS - 1, MPI_COMM_WORLD, &rq));
        T_MPI(MPIX_Acc_Wait(B, &rq, MPI_STATUS_IGNORE));
    }
    T_MPI(MPIX_Acc_Hoststream_synchronize(B));
    T_MPI(MPIX_Acc_Hoststream_synchronize(A));
    t_check_async();
    for (int r = 0; r < ROUNDS; r++) {
        int *slot = tok + (size_t)r * ti;
        int want = r * t_size + t_rank + 1;
        T_CHECK(slot[0] == want,
                "relay round %d: token counter %d expected %d (a hop used a "
                "stale token or the increment raced the transfer)",
                r, slot[0], want);
        for (size_t j = 1; j < ti; j++)
            T_CHECK(slot[j] == (int)(j * 2654435761u), "relay round %d: payload word %zu wrong", r,
                    j);
    }
    if (t_rank == 0)
        T_CHECK(fin[0] == ROUNDS * t_size, "relay: final token counter %d expected %d", fin[0],
                ROUNDS * t_size);
    free(tok);
    free(inc);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "cross_stream", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream A, B, C;
    T_MPI(MPIX_Acc_Hoststream_create(&A));
    T_MPI(MPIX_Acc_Hoststream_create(&B));
    T_MPI(MPIX_Acc_Hoststream_create(&C));
    const size_t ns[2] = {64, 262144};
    for (int i = 0; i < 2; i++) {
        recv_waited_elsewhere(A, B, C, ns[i]);
        send_waited_elsewhere(A, B, C, ns[i]);
    }
    waitall_mixed_streams(A, B, C);
    relay(A, B);
    T_MPI(MPIX_Acc_Hoststream_free(&A));
    T_MPI(MPIX_Acc_Hoststream_free(&B));
    T_MPI(MPIX_Acc_Hoststream_free(&C));
    return t_finish();
}
