/*
 * nonovertaking.c - MPI's non-overtaking rule for stream-ordered messages.
 *
 * Each rank sends to next = rank+1 and receives from prev = rank-1, all on ONE
 * host stream, >= 10000 messages (argv[1] overrides) of mixed sizes: small,
 * around the default eager limit (8191/8192/8193), and large rendezvous up to
 * 256 KiB. Every receive buffer has exactly the size of the message it must
 * match, and every message carries its index, so any overtaking shows up as
 * wrong data, a wrong count or a truncation error.
 *
 *  mode 1 "same tag": all messages tag 5, batches of 250 enqueued as
 *     fill -> Isend x B -> Irecv x B -> Waitall -> check, buffers reused per
 *     batch purely through stream order (no host synchronization).
 *  mode 2 "interleaved tags": message k has tag 100 + k%3; within a batch the
 *     receiver posts the tag-102 receives first, then tag 101, then tag 100,
 *     so most messages arrive before their receive exists.
 *  mode 3 "burst": all messages enqueued back to back (one Waitall at the
 *     end), mostly small, every 500th message 256 KiB.
 */
#include "common.h"

static int next, prev;
static long total = 10000;
#define BATCH 250

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* size of message k sent by rank src in mode m */
static size_t msg_size(int m, int src, long k)
{
    uint64_t h = mix(((uint64_t)m << 56) ^ ((uint64_t)src << 40) ^ (uint64_t)k);
    if (m == 3)
        return (k % 500 == 499) ? 262144 : (size_t)(h % 65);
    unsigned r = (unsigned)(h % 100);
    if (r < 60)
        return (size_t)(h >> 8) % 257; /* 0..256 */
    if (r < 84)
        return 257 + (size_t)(h >> 8) % (8192 - 257); /* below the eager limit */
    if (r < 93)
        return (size_t)(8191 + (h >> 8) % 3);             /* 8191, 8192, 8193 */
    return 8194 + (size_t)(h >> 8) % (262144 - 8194 + 1); /* rendezvous up to 256 KiB */
}

static int msg_tag(int m, long k)
{
    if (m == 2)
        return 100 + (int)(k % 3);
    return 5;
}

static uint64_t msg_seed(int m, int src, long k)
{
    return ((uint64_t)m << 60) ^ ((uint64_t)src << 40) ^ (uint64_t)k;
}

/* message payload: the 8-byte index (when it fits) followed by a pattern */
static void fill_msg(uint8_t *p, size_t n, int m, int src, long k)
{
    t_fill(p, n, msg_seed(m, src, k));
    if (n >= 8)
        memcpy(p, &k, 8);
}

/* -1 on success, else the first bad byte */
static long check_msg(const uint8_t *p, size_t n, int m, int src, long k)
{
    if (n >= 8) {
        long got;
        memcpy(&got, p, 8);
        if (got != k)
            return 0;
        for (size_t i = 8; i < n; i++)
            if (p[i] != t_pat(msg_seed(m, src, k), i))
                return (long)i;
        return -1;
    }
    return t_verify(p, n, msg_seed(m, src, k));
}

typedef struct {
    int mode;
    long first, count; /* message indices of this batch */
    uint8_t *buf;      /* send or receive region of this batch */
    const size_t *off; /* offsets into buf, per message of the batch */
    int src;           /* sender rank of the messages */
} batch_arg_t;

static void fill_batch_fn(void *arg)
{
    batch_arg_t *a = (batch_arg_t *)arg;
    for (long i = 0; i < a->count; i++) {
        long k = a->first + i;
        fill_msg(a->buf + a->off[i], msg_size(a->mode, a->src, k), a->mode, a->src, k);
    }
}

static void check_batch_fn(void *arg)
{
    batch_arg_t *a = (batch_arg_t *)arg;
    for (long i = 0; i < a->count; i++) {
        long k = a->first + i;
        size_t n = msg_size(a->mode, a->src, k);
        long bad = check_msg(a->buf + a->off[i], n, a->mode, a->src, k);
        if (bad >= 0) {
            long got = -1;
            if (n >= 8)
                memcpy(&got, a->buf + a->off[i], 8);
            t_async_fail("mode %d: message %ld (%zu B, tag %d) from rank %d: wrong data at byte "
                         "%ld (index field holds %ld): a message overtook another",
                         a->mode, k, n, msg_tag(a->mode, k), a->src, bad, got);
            return;
        }
    }
}

static void run_batched(MPIX_Acc_stream S, int mode)
{
    char what[96];
    snprintf(what, sizeof what, "mode %d (%s), %ld messages", mode,
             mode == 1 ? "same tag" : "interleaved tags", total);
    t_phase(what);
    long nb = (total + BATCH - 1) / BATCH;
    /* per-batch offsets and the largest batch, for both directions */
    size_t *soff = malloc(sizeof(size_t) * (size_t)total),
           *roff = malloc(sizeof(size_t) * (size_t)total);
    size_t smax = 0, rmax = 0;
    for (long b = 0; b < nb; b++) {
        size_t so = 0, ro = 0;
        for (long k = b * BATCH; k < total && k < (b + 1) * BATCH; k++) {
            soff[k] = so;
            so += msg_size(mode, t_rank, k);
            roff[k] = ro;
            ro += msg_size(mode, prev, k);
        }
        if (so > smax)
            smax = so;
        if (ro > rmax)
            rmax = ro;
    }
    uint8_t *sbuf = malloc(smax + 1), *rbuf = malloc(rmax + 1);
    batch_arg_t *fa = calloc((size_t)nb, sizeof *fa), *ca = calloc((size_t)nb, sizeof *ca);
    MPI_Status *sts = calloc((size_t)total, sizeof *sts);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * BATCH);
    MPI_Status *bst = malloc(sizeof(MPI_Status) * 2 * BATCH);
    long *order = malloc(sizeof(long) * BATCH);
    T_CHECK(soff && roff && sbuf && rbuf && fa && ca && sts && rq && bst && order, "malloc");
    (void)bst;

    double t0 = MPI_Wtime();
    for (long b = 0; b < nb; b++) {
        long first = b * BATCH, cnt = (total - first < BATCH) ? total - first : BATCH;
        fa[b] = (batch_arg_t){mode, first, cnt, sbuf, soff + first, t_rank};
        ca[b] = (batch_arg_t){mode, first, cnt, rbuf, roff + first, prev};
        T_MPI(MPIX_Acc_Hoststream_launch(S, fill_batch_fn, &fa[b]));
        for (long i = 0; i < cnt; i++) {
            long k = first + i;
            T_MPI(MPIX_Acc_Isend(S, sbuf + soff[k], (int)msg_size(mode, t_rank, k), MPI_BYTE, next,
                                 msg_tag(mode, k), MPI_COMM_WORLD, &rq[i]));
        }
        /* receive posting order */
        long no = 0;
        if (mode == 2) {
            for (int t = 2; t >= 0; t--)
                for (long i = 0; i < cnt; i++)
                    if ((first + i) % 3 == t)
                        order[no++] = first + i;
        } else {
            for (long i = 0; i < cnt; i++)
                order[no++] = first + i;
        }
        for (long j = 0; j < cnt; j++) {
            long k = order[j];
            /* statuses go straight to their final place: valid until the stream passes */
            T_MPI(MPIX_Acc_Irecv(S, rbuf + roff[k], (int)msg_size(mode, prev, k), MPI_BYTE, prev,
                                 msg_tag(mode, k), MPI_COMM_WORLD, &rq[cnt + j]));
        }
        /* wait for the sends, then the receives one by one with their own statuses */
        T_MPI(MPIX_Acc_Waitall(S, (int)cnt, rq, MPI_STATUSES_IGNORE));
        for (long j = 0; j < cnt; j++)
            T_MPI(MPIX_Acc_Wait(S, &rq[cnt + j], &sts[order[j]]));
        T_MPI(MPIX_Acc_Hoststream_launch(S, check_batch_fn, &ca[b]));
    }
    double t_enq = MPI_Wtime() - t0;
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    double t_all = MPI_Wtime() - t0;
    t_check_async();
    for (long k = 0; k < total; k++) {
        char w[256];
        snprintf(w, sizeof w, "%s: status of message %ld", what, k);
        T_CHECK(sts[k].MPI_ERROR == MPI_SUCCESS, "%s: MPI_ERROR = %s", w,
                t_errstr(sts[k].MPI_ERROR));
        t_expect_status(&sts[k], prev, msg_tag(mode, k), (int)msg_size(mode, prev, k), MPI_BYTE, w);
    }
    if (t_rank == 0)
        printf("[nonovertaking] %s: enqueue %.3f s, total %.3f s\n", what, t_enq, t_all);
    free(soff);
    free(roff);
    free(sbuf);
    free(rbuf);
    free(fa);
    free(ca);
    free(sts);
    free(rq);
    free(bst);
    free(order);
}

static void run_burst(MPIX_Acc_stream S)
{
    const int mode = 3;
    char what[96];
    snprintf(what, sizeof what, "mode 3 (burst), %ld messages", total);
    t_phase(what);
    size_t *soff = malloc(sizeof(size_t) * (size_t)total),
           *roff = malloc(sizeof(size_t) * (size_t)total);
    size_t so = 0, ro = 0;
    for (long k = 0; k < total; k++) {
        soff[k] = so;
        so += msg_size(mode, t_rank, k);
        roff[k] = ro;
        ro += msg_size(mode, prev, k);
    }
    uint8_t *sbuf = malloc(so + 1), *rbuf = malloc(ro + 1);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)total);
    MPI_Status *sts = calloc(2 * (size_t)total, sizeof(MPI_Status));
    T_CHECK(soff && roff && sbuf && rbuf && rq && sts, "malloc");
    for (long k = 0; k < total; k++)
        fill_msg(sbuf + soff[k], msg_size(mode, t_rank, k), mode, t_rank, k);
    memset(rbuf, 0xAB, ro + 1);
    double t0 = MPI_Wtime();
    for (long k = 0; k < total; k++) {
        T_MPI(MPIX_Acc_Isend(S, sbuf + soff[k], (int)msg_size(mode, t_rank, k), MPI_BYTE, next, 9,
                             MPI_COMM_WORLD, &rq[k]));
        T_MPI(MPIX_Acc_Irecv(S, rbuf + roff[k], (int)msg_size(mode, prev, k), MPI_BYTE, prev, 9,
                             MPI_COMM_WORLD, &rq[total + k]));
    }
    T_MPI(MPIX_Acc_Waitall(S, (int)(2 * total), rq, sts));
    for (long k = 0; k < 2 * total; k++)
        T_CHECK(rq[k] == MPI_REQUEST_NULL, "Waitall left request %ld non-null", k);
    double t_enq = MPI_Wtime() - t0;
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    double t_all = MPI_Wtime() - t0;
    for (long k = 0; k < total; k++) {
        size_t n = msg_size(mode, prev, k);
        long bad = check_msg(rbuf + roff[k], n, mode, prev, k);
        T_CHECK(bad < 0, "%s: message %ld (%zu B) from rank %d: wrong data at byte %ld", what, k, n,
                prev, bad);
        char w[256];
        snprintf(w, sizeof w, "%s: status of message %ld", what, k);
        T_CHECK(sts[total + k].MPI_ERROR == MPI_SUCCESS, "%s: MPI_ERROR = %s", w,
                t_errstr(sts[total + k].MPI_ERROR));
        t_expect_status(&sts[total + k], prev, 9, (int)n, MPI_BYTE, w);
    }
    T_CHECK(rbuf[ro] == 0xAB, "%s: byte past the last receive buffer was overwritten", what);
    if (t_rank == 0)
        printf("[nonovertaking] %s: enqueue %.3f s, total %.3f s\n", what, t_enq, t_all);
    free(soff);
    free(roff);
    free(sbuf);
    free(rbuf);
    free(rq);
    free(sts);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "nonovertaking", 240);
    if (argc > 1)
        total = atol(argv[1]);
    T_CHECK(total >= 1, "bad message count");
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream S;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    run_batched(S, 1);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    run_batched(S, 2);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    run_burst(S);
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    return t_finish();
}
