/*
 * pingpong.c - ping-pong on host streams, fully stream-ordered on both sides.
 *
 * Rank 0 plays ping-pong with every other rank at the same time, one host
 * stream per peer. For each size and iteration, rank 0 enqueues on the
 * peer's stream: fill(sbuf) -> Send -> Recv -> check(rbuf). The peer enqueues
 * everything up front on its own stream: Recv(buf) -> xor(buf) -> Send(buf),
 * reusing one buffer, and only then synchronizes. Correct data therefore
 * requires that each stream starts work strictly in order and that waits hold
 * the stream until the communication completes.
 */
#include "common.h"

#define K 30
static const size_t sizes[] = {0, 1, 8, 4096, 8192, 8193, 100000, 262144};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXN 262144

typedef struct {
    uint8_t *buf;
    size_t n;
    uint64_t seed;
    int peer, iter;
    atomic_int ran;
} xarg_t;

/* peer: transform the received message in place */
static void xor_fn(void *arg)
{
    xarg_t *a = (xarg_t *)arg;
    for (size_t i = 0; i < a->n; i++)
        a->buf[i] ^= 0x5A;
    atomic_store(&a->ran, 1);
}

/* rank 0: check the echo */
static void check_echo_fn(void *arg)
{
    xarg_t *a = (xarg_t *)arg;
    for (size_t i = 0; i < a->n; i++) {
        uint8_t want = (uint8_t)(t_pat(a->seed, i) ^ 0x5A);
        if (a->buf[i] != want) {
            t_async_fail("echo from rank %d size %zu iter %d: byte %zu expected 0x%02x got 0x%02x",
                         a->peer, a->n, a->iter, i, want, a->buf[i]);
            break;
        }
    }
    atomic_store(&a->ran, 1);
}

static uint64_t seed_of(int peer, size_t si, int it)
{
    return ((uint64_t)peer << 40) | ((uint64_t)si << 20) | (uint64_t)it;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "pingpong", 150);
    t_need_ranks(2);
    int npeers = t_size - 1;

    if (t_rank == 0) {
        MPIX_Acc_stream *st = calloc((size_t)npeers, sizeof *st);
        uint8_t **sb = calloc((size_t)npeers, sizeof *sb),
                **rb = calloc((size_t)npeers, sizeof *rb);
        t_fill_arg_t *fills = calloc((size_t)npeers * NSIZES * K, sizeof *fills);
        xarg_t *checks = calloc((size_t)npeers * NSIZES * K, sizeof *checks);
        MPI_Status *sts = calloc((size_t)npeers * NSIZES * K, sizeof *sts);
        T_CHECK(st && sb && rb && fills && checks && sts, "calloc");
        for (int p = 0; p < npeers; p++) {
            T_MPI(MPIX_Acc_Hoststream_create(&st[p]));
            sb[p] = malloc(MAXN);
            rb[p] = malloc(MAXN);
            T_CHECK(sb[p] && rb[p], "malloc");
        }
        double t0 = MPI_Wtime();
        t_phase("rank 0 enqueue all ping-pongs");
        /* interleave the peers so their streams run concurrently */
        for (size_t si = 0; si < NSIZES; si++)
            for (int it = 0; it < K; it++)
                for (int p = 0; p < npeers; p++) {
                    int peer = p + 1;
                    size_t idx = ((size_t)p * NSIZES + si) * K + (size_t)it;
                    size_t n = sizes[si];
                    int tag = (int)(si * 1000 + (size_t)it);
                    fills[idx] =
                        (t_fill_arg_t){.buf = sb[p], .n = n, .seed = seed_of(peer, si, it)};
                    checks[idx] = (xarg_t){.buf = rb[p],
                                           .n = n,
                                           .seed = seed_of(peer, si, it),
                                           .peer = peer,
                                           .iter = it};
                    T_MPI(MPIX_Acc_Hoststream_launch(st[p], t_fill_fn, &fills[idx]));
                    T_MPI(MPIX_Acc_Send(st[p], sb[p], (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                    T_MPI(MPIX_Acc_Recv(st[p], rb[p], (int)n, MPI_BYTE, peer, tag + 500000,
                                        MPI_COMM_WORLD, &sts[idx]));
                    T_MPI(MPIX_Acc_Hoststream_launch(st[p], check_echo_fn, &checks[idx]));
                }
        double t_enq = MPI_Wtime() - t0;
        t_phase("rank 0 synchronize");
        for (int p = 0; p < npeers; p++)
            T_MPI(MPIX_Acc_Hoststream_synchronize(st[p]));
        double t_all = MPI_Wtime() - t0;
        t_check_async();
        t_phase("rank 0 check statuses");
        for (int p = 0; p < npeers; p++)
            for (size_t si = 0; si < NSIZES; si++)
                for (int it = 0; it < K; it++) {
                    size_t idx = ((size_t)p * NSIZES + si) * K + (size_t)it;
                    char what[96];
                    snprintf(what, sizeof what, "echo status peer %d size %zu iter %d", p + 1,
                             sizes[si], it);
                    T_CHECK(atomic_load(&checks[idx].ran), "%s: check function never ran", what);
                    t_expect_status(&sts[idx], p + 1, (int)(si * 1000 + (size_t)it) + 500000,
                                    (int)sizes[si], MPI_BYTE, what);
                }
        printf("[pingpong] %d peers x %zu sizes x %d round trips: enqueue %.3f s, total %.3f s\n",
               npeers, NSIZES, K, t_enq, t_all);
        for (int p = 0; p < npeers; p++) {
            T_MPI(MPIX_Acc_Hoststream_free(&st[p]));
            free(sb[p]);
            free(rb[p]);
        }
        free(st);
        free(sb);
        free(rb);
        free(fills);
        free(checks);
        free(sts);
    } else {
        MPIX_Acc_stream s;
        T_MPI(MPIX_Acc_Hoststream_create(&s));
        uint8_t *buf = malloc(MAXN);
        xarg_t *x = calloc(NSIZES * K, sizeof *x);
        MPI_Status *sts = calloc(NSIZES * K, sizeof *sts);
        T_CHECK(buf && x && sts, "malloc");
        t_phase("peer enqueue all echoes");
        for (size_t si = 0; si < NSIZES; si++)
            for (int it = 0; it < K; it++) {
                size_t idx = si * K + (size_t)it;
                int tag = (int)(si * 1000 + (size_t)it);
                x[idx] = (xarg_t){.buf = buf, .n = sizes[si]};
                T_MPI(MPIX_Acc_Recv(s, buf, (int)sizes[si], MPI_BYTE, 0, tag, MPI_COMM_WORLD,
                                    &sts[idx]));
                T_MPI(MPIX_Acc_Hoststream_launch(s, xor_fn, &x[idx]));
                T_MPI(MPIX_Acc_Send(s, buf, (int)sizes[si], MPI_BYTE, 0, tag + 500000,
                                    MPI_COMM_WORLD));
            }
        t_phase("peer synchronize");
        T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        for (size_t si = 0; si < NSIZES; si++)
            for (int it = 0; it < K; it++) {
                size_t idx = si * K + (size_t)it;
                T_CHECK(atomic_load(&x[idx].ran), "xor function %zu never ran", idx);
                t_expect_status(&sts[idx], 0, (int)(si * 1000 + (size_t)it), (int)sizes[si],
                                MPI_BYTE, "peer receive status");
            }
        T_MPI(MPIX_Acc_Hoststream_free(&s));
        free(buf);
        free(x);
        free(sts);
    }
    return t_finish();
}
