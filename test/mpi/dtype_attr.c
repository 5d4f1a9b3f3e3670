/*
 * dtype_attr.c - the datatype attribute path: a stream attached to a dup of
 * MPI_BYTE with MPI_Type_set_attr(type, MPIX_ACC_STREAM_KEYVAL, stream) makes
 * plain MPI_Isend/MPI_Irecv/MPI_Send/MPI_Recv/MPI_Wait on MPI_COMM_WORLD that
 * use the type stream-ordered on that stream.
 *
 * Sends use type tS (stream S), receives type tR (stream R). Proofs:
 *   - a send issued after a launched write (behind a closed gate) carries the
 *     written data, and MPI_Isend returns while the gate is closed;
 *   - a function launched on R before the MPI_Irecv still sees the old
 *     receive buffer although the message was sent at once;
 *   - a check launched on R after MPI_Wait sees the data;
 *   - after MPI_Type_delete_attr the type is plain again.
 */
#include "common.h"

static int next, prev;

typedef struct {
    const uint8_t *buf;
    size_t n;
    uint64_t old_seed;
    double sleep_ms;
    int saw_old;
    atomic_int ran;
} rec_t;
static void rec_fn(void *arg)
{
    rec_t *a = (rec_t *)arg;
    t_sleep_ms(a->sleep_ms);
    a->saw_old = t_verify(a->buf, a->n, a->old_seed) < 0;
    atomic_store(&a->ran, 1);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "dtype_attr", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream S, R;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&R));
    MPI_Datatype tS, tR;
    T_MPI(MPI_Type_dup(MPI_BYTE, &tS));
    T_MPI(MPI_Type_dup(MPI_BYTE, &tR));
    T_MPI(MPI_Type_set_attr(tS, MPIX_ACC_STREAM_KEYVAL, (void *)S));
    T_MPI(MPI_Type_set_attr(tR, MPIX_ACC_STREAM_KEYVAL, (void *)R));
    void *got = NULL;
    int flag = 0;
    T_MPI(MPI_Type_get_attr(tS, MPIX_ACC_STREAM_KEYVAL, &got, &flag));
    T_CHECK(flag && got == (void *)S, "MPI_Type_get_attr: flag %d value %p expected %p", flag, got,
            (void *)S);

    const size_t sizes[3] = {64, 8193, 262144};
    for (int si = 0; si < 3; si++) {
        size_t n = sizes[si];
        char what[128];
        uint8_t *sbuf = malloc(n), *rbuf = malloc(n);
        uint64_t snew = 77000 + (uint64_t)t_rank * 10 + (uint64_t)si;
        uint64_t rnew = 77000 + (uint64_t)prev * 10 + (uint64_t)si;
        MPI_Request rr, rs;
        MPI_Status st;

        /* send side */
        snprintf(what, sizeof what, "send ordered after a launched write, %zu B", n);
        t_phase(what);
        t_fill(sbuf, n, 5);
        memset(rbuf, 0, n);
        t_fill_arg_t fa = {.buf = sbuf, .n = n, .seed = snew};
        t_verify_arg_t va = {.buf = rbuf, .n = n, .seed = rnew, .what = what};
        t_gate_t g;
        t_gate_init(&g);
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        T_MPI(MPI_Irecv(rbuf, (int)n, tR, prev, 1, MPI_COMM_WORLD, &rr));
        T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
        double t0 = t_now();
        T_MPI(MPIX_Acc_Hoststream_launch(S, t_fill_fn, &fa));
        T_MPI(MPI_Isend(sbuf, (int)n, tS, next, 1, MPI_COMM_WORLD, &rs));
        double dt = t_now() - t0;
        t_sleep_ms(300); /* window for a send started too early */
        atomic_store(&g.open, 1);
        T_CHECK(dt < T_SLOW(2.0),
                "%s: MPI_Isend with the attributed type blocked the host %.3f s while "
                "its stream was held",
                what, dt);
        T_MPI(MPI_Wait(&rr, &st));
        T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
        T_CHECK(rr == MPI_REQUEST_NULL && rs == MPI_REQUEST_NULL, "%s: MPI_Wait left a handle",
                what);
        T_MPI(MPIX_Acc_Hoststream_launch(R, t_verify_fn, &va));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_MPI(MPIX_Acc_Hoststream_synchronize(R));
        t_check_async();
        if (t_verify(rbuf, n, 5) < 0)
            t_fail("%s: received the buffer from before the launched write: MPI_Isend with the "
                   "attributed datatype was not stream-ordered",
                   what);
        t_expect_pattern(rbuf, n, rnew, what);
        t_expect_status(&st, prev, 1, (int)n, MPI_BYTE, what);
        t_expect_status(&st, prev, 1, (int)n, tR, what);

        /* receive side */
        snprintf(what, sizeof what, "receive ordered after a launched function, %zu B", n);
        t_phase(what);
        t_fill(sbuf, n, snew);
        t_fill(rbuf, n, 6);
        rec_t rec = {.buf = rbuf, .n = n, .old_seed = 6, .sleep_ms = 700};
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Hoststream_launch(R, rec_fn, &rec));
        T_MPI(MPI_Irecv(rbuf, (int)n, tR, prev, 2, MPI_COMM_WORLD, &rr));
        T_MPI(MPI_Isend(sbuf, (int)n, tS, next, 2, MPI_COMM_WORLD, &rs));
        T_MPI(MPI_Wait(&rr, &st));
        T_MPI(MPIX_Acc_Hoststream_launch(R, t_verify_fn, &va));
        T_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(R));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(atomic_load(&rec.ran), "%s: record function did not run", what);
        T_CHECK(rec.saw_old,
                "%s: the function launched before MPI_Irecv saw the buffer already "
                "written: MPI_Irecv with the attributed datatype was not "
                "stream-ordered",
                what);
        t_check_async();
        t_expect_pattern(rbuf, n, rnew, what);
        t_expect_status(&st, prev, 2, (int)n, tR, what);

        /* blocking forms */
        snprintf(what, sizeof what, "MPI_Send/MPI_Recv with attributed types, %zu B", n);
        t_phase(what);
        memset(rbuf, 0, n);
        if (t_rank % 2 == 0) {
            T_MPI(MPI_Send(sbuf, (int)n, tS, next, 3, MPI_COMM_WORLD));
            T_MPI(MPI_Recv(rbuf, (int)n, tR, prev, 3, MPI_COMM_WORLD, &st));
        } else {
            T_MPI(MPI_Recv(rbuf, (int)n, tR, prev, 3, MPI_COMM_WORLD, &st));
            T_MPI(MPI_Send(sbuf, (int)n, tS, next, 3, MPI_COMM_WORLD));
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_MPI(MPIX_Acc_Hoststream_synchronize(R));
        t_expect_pattern(rbuf, n, rnew, what);
        t_expect_status(&st, prev, 3, (int)n, tR, what);
        free(sbuf);
        free(rbuf);
    }

    /* delete the attribute: the types are plain again (MPI_Recv returns with data) */
    t_phase("after MPI_Type_delete_attr");
    T_MPI(MPI_Type_delete_attr(tS, MPIX_ACC_STREAM_KEYVAL));
    T_MPI(MPI_Type_delete_attr(tR, MPIX_ACC_STREAM_KEYVAL));
    T_MPI(MPI_Type_get_attr(tS, MPIX_ACC_STREAM_KEYVAL, &got, &flag));
    T_CHECK(!flag, "attribute still present after delete");
    {
        uint8_t sb[32], rb[32];
        memset(sb, t_rank + 1, sizeof sb);
        memset(rb, 0, sizeof rb);
        MPI_Status st;
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank % 2 == 0) {
            t_sleep_ms(300);
            T_MPI(MPI_Send(sb, 32, tS, next, 4, MPI_COMM_WORLD));
            T_MPI(MPI_Recv(rb, 32, tR, prev, 4, MPI_COMM_WORLD, &st));
        } else {
            T_MPI(MPI_Recv(rb, 32, tR, prev, 4, MPI_COMM_WORLD, &st));
            T_MPI(MPI_Send(sb, 32, tS, next, 4, MPI_COMM_WORLD));
        }
        for (int i = 0; i < 32; i++)
            T_CHECK(rb[i] == prev + 1,
                    "plain MPI_Recv after delete_attr: byte %d = %d expected "
                    "%d (returned without the data)",
                    i, rb[i], prev + 1);
        t_expect_status(&st, prev, 4, 32, MPI_BYTE, "plain after delete_attr");
    }
    T_MPI(MPI_Type_free(&tS));
    T_MPI(MPI_Type_free(&tR));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    T_MPI(MPIX_Acc_Hoststream_free(&R));
    return t_finish();
}
