/*
 * stream_order.c - proof that communication is ordered with other stream work.
 *
 * Every rank sends to next = rank+1 and receives from prev = rank-1 (ring),
 * each direction on its own host stream, for an eager (64 B) and a
 * rendezvous (256 KiB) size. Scenarios:
 *
 *  send side   S: gate -> fill(NEW) -> Isend -> Wait -> fill(NEW2)
 *              R: [sleep]        -> Irecv -> Wait -> verify
 *    The host opens the gate 0.4 s after enqueuing. The receiver must get
 *    NEW: OLD means the send read the buffer before the prior stream work
 *    finished; NEW2 means the stream wait released the stream before the
 *    send completed (tested with the receiver posting 1.5 s late). The host
 *    enqueue calls must return while the gate is still closed.
 *
 *  receive side R: record(sleep, rbuf) -> Irecv -> Wait -> verify
 *    The function enqueued BEFORE the Irecv must still see the old buffer
 *    contents (the message was sent at once, so a receive posted at call time
 *    would have written it); the verify enqueued after the Wait must see the
 *    data also when the sender sends late.
 *
 *  host wait   a request whose stream is held by a closed gate must not
 *    complete under MPI_Test / MPI_Request_get_status, nor write the buffer,
 *    until the gate opens; then MPI_Wait completes it.
 *
 *  no blocking every explicit call (Isend, Irecv, Wait, Waitall, Send, Recv)
 *    enqueued on a gated stream returns at once.
 */
#include "common.h"

#define OLD_SEED 0x01d01d01dull
#define NEW_SEED 0x0e0e0e0eull
#define NEW2_SEED 0x22222222ull

static int next, prev;

/* Record the first bytes of a buffer after an optional sleep. */
typedef struct {
    const uint8_t *buf;
    size_t n;
    double sleep_ms;
    uint64_t old_seed;
    int saw_old; /* result: 1 when the buffer still held the OLD pattern */
    long first_bad;
    atomic_int ran;
} record_arg_t;

static void record_fn(void *arg)
{
    record_arg_t *a = (record_arg_t *)arg;
    if (a->sleep_ms > 0)
        t_sleep_ms(a->sleep_ms);
    a->first_bad = t_verify(a->buf, a->n, a->old_seed);
    a->saw_old = a->first_bad < 0;
    atomic_store(&a->ran, 1);
}

static uint64_t seed_for(int rank, uint64_t base, size_t n)
{
    return base ^ ((uint64_t)rank << 48) ^ n;
}

/* Send-side ordering. recv_delay_ms: the receiver's stream sleeps that long
 * before its Irecv (0: receive posted before the sender's data is ready). */
static void send_side(MPIX_Acc_stream S, MPIX_Acc_stream R, size_t n, double recv_delay_ms)
{
    char what[160];
    snprintf(what, sizeof what, "send-side ordering, %zu B from rank %d, receiver delay %.0f ms", n,
             prev, recv_delay_ms);
    t_phase(what);
    uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
    T_CHECK(sbuf && rbuf, "malloc");
    t_fill(sbuf, n, seed_for(t_rank, OLD_SEED, n));
    memset(rbuf, 0xC3, n);
    t_fill_arg_t fnew = {.buf = sbuf, .n = n, .seed = seed_for(t_rank, NEW_SEED, n)};
    t_gate_t g;
    t_gate_init(&g);
    t_fill_arg_t fnew2 = {.buf = sbuf, .n = n, .seed = seed_for(t_rank, NEW2_SEED, n)};
    t_sleep_arg_t rdelay = {.ms = recv_delay_ms};
    t_verify_arg_t ver = {.buf = rbuf, .n = n, .seed = seed_for(prev, NEW_SEED, n), .what = what};
    MPI_Request rs, rr;
    MPI_Status st;

    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* receiver side first, so that with delay 0 the receive is surely posted early */
    if (recv_delay_ms > 0)
        T_MPI(MPIX_Acc_Hoststream_launch(R, t_sleep_fn, &rdelay));
    T_MPI(MPIX_Acc_Irecv(R, rbuf, (int)n, MPI_BYTE, prev, 11, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Wait(R, &rr, &st));
    T_MPI(MPIX_Acc_Hoststream_launch(R, t_verify_fn, &ver));

    /* the stream is held by a gate before the fill: the host calls must
     * return at once, and the send must not go out while the gate is closed */
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    double t0 = t_now();
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_fill_fn, &fnew));
    T_MPI(MPIX_Acc_Isend(S, sbuf, (int)n, MPI_BYTE, next, 11, MPI_COMM_WORLD, &rs));
    T_MPI(MPIX_Acc_Wait(S, &rs, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_fill_fn, &fnew2));
    double t_enq = t_now() - t0;
    int fill_done_at_enqueue = atomic_load(&fnew.done);
    t_sleep_ms(400); /* window in which a send started too early would carry OLD */
    atomic_store(&g.open, 1);
    T_CHECK(t_enq < T_SLOW(2.0),
            "%s: enqueuing launch+Isend+Wait+launch took %.3f s while the stream was "
            "held: the host was blocked",
            what, t_enq);
    T_CHECK(!fill_done_at_enqueue, "internal: fill ran before the gate opened");

    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPIX_Acc_Hoststream_synchronize(R));
    t_check_async();
    T_CHECK(atomic_load(&ver.ran), "%s: verify did not run", what);
    if (t_verify(rbuf, n, seed_for(prev, OLD_SEED, n)) < 0)
        t_fail("%s: received the OLD buffer contents: the send read the buffer before the "
               "launched function that precedes it on the stream had finished",
               what);
    if (t_verify(rbuf, n, seed_for(prev, NEW2_SEED, n)) < 0)
        t_fail("%s: received the contents written AFTER the stream wait: the wait released the "
               "stream before the send completed",
               what);
    t_expect_pattern(rbuf, n, seed_for(prev, NEW_SEED, n), what);
    t_expect_status(&st, prev, 11, (int)n, MPI_BYTE, what);
    free(sbuf);
    free(rbuf);
}

/* Receive-side ordering. send_delay_ms: the sender's stream sleeps that long
 * before its Isend. */
static void recv_side(MPIX_Acc_stream S, MPIX_Acc_stream R, size_t n, double send_delay_ms)
{
    char what[160];
    snprintf(what, sizeof what, "recv-side ordering, %zu B from rank %d, sender delay %.0f ms", n,
             prev, send_delay_ms);
    t_phase(what);
    uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
    T_CHECK(sbuf && rbuf, "malloc");
    t_fill(sbuf, n, seed_for(t_rank, NEW_SEED, n));
    t_fill(rbuf, n, seed_for(t_rank, OLD_SEED, n));
    record_arg_t rec = {
        .buf = rbuf, .n = n, .sleep_ms = 700.0, .old_seed = seed_for(t_rank, OLD_SEED, n)};
    t_verify_arg_t ver = {.buf = rbuf, .n = n, .seed = seed_for(prev, NEW_SEED, n), .what = what};
    t_sleep_arg_t sdelay = {.ms = send_delay_ms};
    MPI_Request rs, rr;
    MPI_Status st;

    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(R, record_fn, &rec));
    T_MPI(MPIX_Acc_Irecv(R, rbuf, (int)n, MPI_BYTE, prev, 12, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Wait(R, &rr, &st));
    T_MPI(MPIX_Acc_Hoststream_launch(R, t_verify_fn, &ver));

    if (send_delay_ms > 0)
        T_MPI(MPIX_Acc_Hoststream_launch(S, t_sleep_fn, &sdelay));
    T_MPI(MPIX_Acc_Isend(S, sbuf, (int)n, MPI_BYTE, next, 12, MPI_COMM_WORLD, &rs));
    T_MPI(MPIX_Acc_Wait(S, &rs, MPI_STATUS_IGNORE));

    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPIX_Acc_Hoststream_synchronize(R));
    T_CHECK(atomic_load(&rec.ran), "%s: record function did not run", what);
    T_CHECK(rec.saw_old,
            "%s: the function enqueued BEFORE the Irecv saw the buffer already modified (byte "
            "%ld): the receive was posted/written before the stream reached it",
            what, rec.first_bad);
    t_check_async();
    T_CHECK(atomic_load(&ver.ran), "%s: verify did not run", what);
    t_expect_pattern(rbuf, n, seed_for(prev, NEW_SEED, n), what);
    t_expect_status(&st, prev, 12, (int)n, MPI_BYTE, what);
    free(sbuf);
    free(rbuf);
}

/* Host-side test/wait on requests whose streams are held by closed gates. */
static void host_wait_gated(MPIX_Acc_stream S, MPIX_Acc_stream R, size_t n)
{
    char what[160];
    snprintf(what, sizeof what, "host wait on gated streams, %zu B", n);
    t_phase(what);
    uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
    T_CHECK(sbuf && rbuf, "malloc");
    t_fill(sbuf, n, seed_for(t_rank, NEW_SEED, n));
    t_fill(rbuf, n, seed_for(t_rank, OLD_SEED, n));
    t_gate_t gs, gr;
    t_gate_init(&gs);
    t_gate_init(&gr);
    MPI_Request rs, rr;
    MPI_Status st;
    int flag;

    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(R, t_gate_fn, &gr));
    T_MPI(MPIX_Acc_Irecv(R, rbuf, (int)n, MPI_BYTE, prev, 13, MPI_COMM_WORLD, &rr));
    /* Phase 1: receive stream gated, send stream free: the message arrives,
     * but the receive must not be posted yet. */
    T_MPI(MPIX_Acc_Isend(S, sbuf, (int)n, MPI_BYTE, next, 13, MPI_COMM_WORLD, &rs));
    double t0 = t_now();
    while (t_now() - t0 < 0.4) {
        flag = 1;
        T_MPI(MPI_Test(&rr, &flag, &st));
        T_CHECK(!flag,
                "%s: MPI_Test completed a receive whose stream has not reached it "
                "(gate closed)",
                what);
        flag = 1;
        T_MPI(MPI_Request_get_status(rr, &flag, &st));
        T_CHECK(!flag,
                "%s: MPI_Request_get_status reports complete for a receive whose stream "
                "has not reached it",
                what);
        T_CHECK(t_verify(rbuf, n, seed_for(t_rank, OLD_SEED, n)) < 0,
                "%s: receive buffer written while the stream was held before the Irecv", what);
        t_sleep_ms(5);
    }
    T_CHECK(atomic_load(&gr.entered), "%s: stream never reached the gate", what);
    atomic_store(&gr.open, 1);
    T_MPI(MPI_Wait(&rr, &st));
    T_CHECK(rr == MPI_REQUEST_NULL, "%s: MPI_Wait did not free the receive request", what);
    t_expect_pattern(rbuf, n, seed_for(prev, NEW_SEED, n), what);
    t_expect_status(&st, prev, 13, (int)n, MPI_BYTE, what);
    T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
    T_CHECK(rs == MPI_REQUEST_NULL, "%s: MPI_Wait did not free the send request", what);

    /* Phase 2: send stream gated: the send must not complete (nor the
     * receiver's receive) until it opens. */
    t_fill(rbuf, n, seed_for(t_rank, OLD_SEED, n));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Irecv(R, rbuf, (int)n, MPI_BYTE, prev, 14, MPI_COMM_WORLD, &rr));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &gs));
    T_MPI(MPIX_Acc_Isend(S, sbuf, (int)n, MPI_BYTE, next, 14, MPI_COMM_WORLD, &rs));
    t0 = t_now();
    while (t_now() - t0 < 0.4) {
        flag = 1;
        T_MPI(MPI_Test(&rs, &flag, MPI_STATUS_IGNORE));
        T_CHECK(!flag, "%s: MPI_Test completed a send whose stream has not reached it", what);
        flag = 1;
        T_MPI(MPI_Test(&rr, &flag, &st));
        T_CHECK(!flag, "%s: a receive completed although the matching send's stream is gated",
                what);
        t_sleep_ms(5);
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* everyone has observed "not complete" */
    atomic_store(&gs.open, 1);
    T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&rr, &st));
    t_expect_pattern(rbuf, n, seed_for(prev, NEW_SEED, n), what);
    t_expect_status(&st, prev, 14, (int)n, MPI_BYTE, what);
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPIX_Acc_Hoststream_synchronize(R));
    t_check_async();
    free(sbuf);
    free(rbuf);
}

/* Every explicit call returns at once even when its stream is held. */
static void no_blocking(MPIX_Acc_stream S, size_t n)
{
    char what[160];
    snprintf(what, sizeof what, "explicit calls return at once on a gated stream, %zu B", n);
    t_phase(what);
    enum { SLOTS = 3 };
    uint8_t *sbuf = malloc(SLOTS * n), *rbuf = malloc(SLOTS * n);
    T_CHECK(sbuf && rbuf, "malloc");
    for (int k = 0; k < SLOTS; k++)
        t_fill(sbuf + k * n, n, seed_for(t_rank, NEW_SEED + (uint64_t)k, n));
    memset(rbuf, 0, SLOTS * n);
    t_gate_t g;
    t_gate_init(&g);
    MPI_Request rq[2];
    MPI_Status st[2], st1, st2;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    double t0 = t_now();
    /* slot 0: Irecv + Isend + Waitall */
    T_MPI(MPIX_Acc_Irecv(S, rbuf, (int)n, MPI_BYTE, prev, 15, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPIX_Acc_Isend(S, sbuf, (int)n, MPI_BYTE, next, 15, MPI_COMM_WORLD, &rq[1]));
    T_MPI(MPIX_Acc_Waitall(S, 2, rq, st));
    /* slot 1: Irecv + Isend + two Waits */
    T_MPI(MPIX_Acc_Irecv(S, rbuf + n, (int)n, MPI_BYTE, prev, 16, MPI_COMM_WORLD, &rq[0]));
    T_MPI(MPIX_Acc_Isend(S, sbuf + n, (int)n, MPI_BYTE, next, 16, MPI_COMM_WORLD, &rq[1]));
    T_MPI(MPIX_Acc_Wait(S, &rq[1], MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Wait(S, &rq[0], &st1));
    /* slot 2: blocking-style Send/Recv */
    if (t_rank % 2 == 0) {
        T_MPI(MPIX_Acc_Send(S, sbuf + 2 * n, (int)n, MPI_BYTE, next, 17, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Recv(S, rbuf + 2 * n, (int)n, MPI_BYTE, prev, 17, MPI_COMM_WORLD, &st2));
    } else {
        T_MPI(MPIX_Acc_Recv(S, rbuf + 2 * n, (int)n, MPI_BYTE, prev, 17, MPI_COMM_WORLD, &st2));
        T_MPI(MPIX_Acc_Send(S, sbuf + 2 * n, (int)n, MPI_BYTE, next, 17, MPI_COMM_WORLD));
    }
    double dt = t_now() - t0;
    T_CHECK(!atomic_load(&g.open), "internal: gate opened early");
    /* opening the gate before failing keeps the other ranks from hanging */
    atomic_store(&g.open, 1);
    T_CHECK(dt < T_SLOW(2.0),
            "%s: the enqueue calls took %.3f s with the stream gated (blocked the host)", what, dt);
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    t_check_async();
    for (int k = 0; k < SLOTS; k++) {
        char w2[200];
        snprintf(w2, sizeof w2, "%s, slot %d", what, k);
        t_expect_pattern(rbuf + k * n, n, seed_for(prev, NEW_SEED + (uint64_t)k, n), w2);
    }
    t_expect_status(&st[0], prev, 15, (int)n, MPI_BYTE, what);
    t_expect_status(&st1, prev, 16, (int)n, MPI_BYTE, what);
    t_expect_status(&st2, prev, 17, (int)n, MPI_BYTE, what);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "stream_order", 150);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream S, R;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&R));
    const size_t ns[2] = {64, 262144};
    for (int i = 0; i < 2; i++) {
        send_side(S, R, ns[i], 0);
        send_side(S, R, ns[i], 1500);
        recv_side(S, R, ns[i], 0);
        recv_side(S, R, ns[i], 1500);
        host_wait_gated(S, R, ns[i]);
        no_blocking(S, ns[i]);
    }
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    T_MPI(MPIX_Acc_Hoststream_free(&R));
    return t_finish();
}
