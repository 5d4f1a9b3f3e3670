/*
 * sx_path.c - the stream-executed path (doc/design.md §5b) on host streams,
 * 2-4 ranks, on a communicator with mpi_assert_no_any_source/_tag (SX) and
 * the same exchanges on one without (UCX only): results must be identical.
 * test/mpi/sx_path.sh runs it with MPIX_ACC_STATS=1 and checks that the SX
 * path carried messages (and none with MPIX_ACC_SX=off).
 *
 *  1. sizes: ring exchange (send to rank+1, receive from rank-1) of 0, 1, 8,
 *     100, 4096, 16 and 32 KiB (above the eager limit: the path takes them
 *     into a device ring, MPIX_ACC_SX_DRING=on), the slot size and one byte
 *     more, 64 KiB, 128 KiB + 3 and 1 MiB (bulk slots of a device ring, else
 *     UCX), 1 MiB + 1 (UCX), one
 *     stream, stream wait with MPI_STATUSES_IGNORE, then with statuses.
 *  2. head-to-head: with the partner (rank ^ 1), N Isend then N Irecv then
 *     one stream Waitall, N = 3 x the slots (sends beyond the free slots go
 *     by UCX), payload checked.
 *  3. ahead: rank 0 enqueues 1000 messages (tags 0..2) to rank 1 before rank
 *     1 (asleep 200 ms) calls its receives; per-tag order checked.
 *  4. host waits: MPIX_Acc_Irecv completed by MPI_Wait, and by MPI_Test
 *     polling (the library runs the receive step).
 *  5. truncation: 100 bytes into a 50-byte receive: MPI_ERR_TRUNCATE.
 *  6. mixed sizes on one channel: small (SX) and large (UCX) alternate on
 *     one tag; order kept.
 *  7. other streams: receive on s1, stream wait on s2; send on s1, stream
 *     wait on s2; self-send; MPI_PROC_NULL.
 *  8. blocking calls on a stream communicator (their receives have no
 *     stream point: the receive step is the buffer's only writer): behind a
 *     held receiving stream that writes the buffer first, MPI_Recv of an
 *     MPI_Ssend (UCX: staged, then copied by the step), of an MPI_Send (the
 *     ring) and MPI_Sendrecv; the message, not the earlier write, must be
 *     there after the stream ran; 100 bytes by MPI_Ssend into MPI_Recv of
 *     50: MPI_ERR_TRUNCATE in the status, byte 50 untouched.
 *  9. non-blocking receives on a stream communicator (no stream point of
 *     their own either: a stream wait on their stream, a stream wait on
 *     another stream -- a late point -- or host interest puts their receive
 *     step in order), in pairs: behind a held receiving stream that writes
 *     the buffer first, MPI_Irecv + MPI_Waitall of an MPI_Issend (UCX,
 *     staged) and of an MPIX_Acc_Isend (the ring), MPIX_Acc_Irecv +
 *     MPIX_Acc_Waitall on another stream, MPI_Irecv + MPI_Test (not done
 *     while the stream is held), a 3000-byte message into 1500:
 *     MPI_ERR_TRUNCATE, the bytes past the receive untouched, and a
 *     20000-byte one (above the host ring's limit: by UCX, staged); each
 *     once with the wait (or test) right after MPI_Irecv and once after
 *     the message arrived (a message staged before any step existed is
 *     still the step's to copy, not a library step's at once).
 */
#include "common.h"

#define SLOT (64 * 1024)

static size_t slot_bytes(void)
{
    const char *v = getenv("MPIX_ACC_SX_SLOT_BYTES");
    return v ? (size_t)atol(v) : SLOT;
}

static int nslots(void)
{
    const char *v = getenv("MPIX_ACC_SX_SLOTS");
    return v ? atoi(v) : 16;
}

static void sync_stream(MPIX_Acc_stream s) { T_MPI(MPIX_Acc_Hoststream_synchronize(s)); }

/* ------------------------------------------------------------ 1. sizes */

static void sizes(MPI_Comm comm, const char *what)
{
    size_t sz[] = {0,
                   1,
                   8,
                   100,
                   4096,
                   16384,
                   32768,
                   slot_bytes(),
                   slot_bytes() + 1,
                   65536,
                   131072 + 3,
                   1 << 20,
                   (1 << 20) + 1};
    int nsz = (int)(sizeof(sz) / sizeof(sz[0]));
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    for (int with_status = 0; with_status < 2; with_status++) {
        for (int i = 0; i < nsz; i++) {
            size_t n = sz[i];
            unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
            t_fill(out, n, (uint64_t)(t_rank * 1000 + i));
            memset(in, 0xee, n + 1);
            MPI_Request r[2];
            MPI_Status st[2];
            T_MPI(MPIX_Acc_Irecv(s, in, (int)n, MPI_BYTE, from, 7, comm, &r[0]));
            T_MPI(MPIX_Acc_Isend(s, out, (int)n, MPI_BYTE, to, 7, comm, &r[1]));
            T_MPI(MPIX_Acc_Waitall(s, 2, r, with_status ? st : MPI_STATUSES_IGNORE));
            sync_stream(s);
            char w[96];
            snprintf(w, sizeof(w), "%s sizes, %zu bytes%s", what, n,
                     with_status ? ", statuses" : "");
            t_expect_pattern(in, n, (uint64_t)(from * 1000 + i), w);
            T_CHECK(in[n] == 0xee, "%s: byte past the message written", w);
            if (with_status)
                t_expect_status(&st[0], from, 7, (int)n, MPI_BYTE, w);
            free(out);
            free(in);
        }
    }
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* ---------------------------------------------------- 2. head-to-head */

static void head_to_head(MPI_Comm comm, const char *what)
{
    int partner = t_rank ^ 1;
    if (partner >= t_size)
        return;
    int n = 3 * nslots();
    size_t len = 256;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    unsigned char *out = malloc(len * (size_t)n), *in = malloc(len * (size_t)n);
    MPI_Request *r = malloc(sizeof(MPI_Request) * 2 * (size_t)n);
    for (int i = 0; i < n; i++)
        t_fill(out + len * (size_t)i, len, (uint64_t)(t_rank * 7919 + i));
    memset(in, 0, len * (size_t)n);
    for (int i = 0; i < n; i++)
        T_MPI(
            MPIX_Acc_Isend(s, out + len * (size_t)i, (int)len, MPI_BYTE, partner, 3, comm, &r[i]));
    for (int i = 0; i < n; i++)
        T_MPI(MPIX_Acc_Irecv(s, in + len * (size_t)i, (int)len, MPI_BYTE, partner, 3, comm,
                             &r[n + i]));
    T_MPI(MPIX_Acc_Waitall(s, 2 * n, r, MPI_STATUSES_IGNORE));
    sync_stream(s);
    for (int i = 0; i < n; i++) {
        char w[96];
        snprintf(w, sizeof(w), "%s head-to-head message %d of %d", what, i, n);
        t_expect_pattern(in + len * (size_t)i, len, (uint64_t)(partner * 7919 + i), w);
    }
    free(out);
    free(in);
    free(r);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* ----------------------------------------------------------- 3. ahead */

static void ahead(MPI_Comm comm, const char *what)
{
    enum { N = 1000 };
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    if (t_rank == 0) {
        static uint64_t v[N];
        MPI_Request r[N];
        for (int i = 0; i < N; i++) {
            v[i] = (uint64_t)i;
            T_MPI(MPIX_Acc_Isend(s, &v[i], 1, MPI_UINT64_T, 1, i % 3, comm, &r[i]));
        }
        T_MPI(MPIX_Acc_Waitall(s, N, r, MPI_STATUSES_IGNORE));
        sync_stream(s);
    } else if (t_rank == 1) {
        static uint64_t v[N];
        MPI_Request r[N];
        t_sleep_ms(200);
        /* receives by tag: tag 0 first, then 1, then 2 */
        int k = 0;
        for (int tag = 0; tag < 3; tag++)
            for (int i = tag; i < N; i += 3, k++)
                T_MPI(MPIX_Acc_Irecv(s, &v[k], 1, MPI_UINT64_T, 0, tag, comm, &r[k]));
        T_MPI(MPIX_Acc_Waitall(s, N, r, MPI_STATUSES_IGNORE));
        sync_stream(s);
        k = 0;
        for (int tag = 0; tag < 3; tag++)
            for (int i = tag; i < N; i += 3, k++)
                T_CHECK(v[k] == (uint64_t)i, "%s ahead: receive %d (tag %d) got %llu, expected %d",
                        what, k, tag, (unsigned long long)v[k], i);
    }
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* ------------------------------------------------------ 4. host waits */

static void host_waits(MPI_Comm comm, const char *what)
{
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    for (int mode = 0; mode < 2; mode++) {
        uint64_t out[4] = {(uint64_t)t_rank, 11, 22, 33}, in[4] = {0, 0, 0, 0};
        MPI_Request r[2];
        MPI_Status st;
        T_MPI(MPIX_Acc_Irecv(s, in, 4, MPI_UINT64_T, from, 9, comm, &r[0]));
        T_MPI(MPIX_Acc_Isend(s, out, 4, MPI_UINT64_T, to, 9, comm, &r[1]));
        t_host_complete(&r[0], &st, mode, 20, what);
        T_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        t_expect_status(&st, from, 9, 4, MPI_UINT64_T, mode ? "MPI_Test" : "MPI_Wait");
        T_CHECK(in[0] == (uint64_t)from && in[3] == 33, "%s host %s: got %llu, %llu", what,
                mode ? "MPI_Test" : "MPI_Wait", (unsigned long long)in[0],
                (unsigned long long)in[3]);
    }
    /* the same with a bulk-sized message (a device ring's bulk slot with
     * MPIX_ACC_SX_DRING=on): the library's step or look-up takes it */
    size_t n = 65536 + 12;
    unsigned char *bo = malloc(n), *bi = malloc(n);
    for (int mode = 0; mode < 2; mode++) {
        t_fill(bo, n, (uint64_t)(t_rank * 77 + mode));
        memset(bi, 0, n);
        MPI_Request r[2];
        MPI_Status st;
        T_MPI(MPIX_Acc_Irecv(s, bi, (int)n, MPI_BYTE, from, 10, comm, &r[0]));
        T_MPI(MPIX_Acc_Isend(s, bo, (int)n, MPI_BYTE, to, 10, comm, &r[1]));
        t_host_complete(&r[0], &st, mode, 20, what);
        T_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        char w[96];
        snprintf(w, sizeof(w), "%s host %s, %zu bytes", what, mode ? "MPI_Test" : "MPI_Wait", n);
        t_expect_status(&st, from, 10, (int)n, MPI_BYTE, w);
        t_expect_pattern(bi, n, (uint64_t)(from * 77 + mode), w);
    }
    free(bo);
    free(bi);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* -------------------------------------------------------- 5. truncate */

static void truncate_case(MPI_Comm comm, const char *what)
{
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    unsigned char out[100], in[64];
    memset(out, 5, sizeof(out));
    memset(in, 0, sizeof(in));
    MPI_Request r[2];
    MPI_Status st[2];
    T_MPI(MPIX_Acc_Irecv(s, in, 50, MPI_BYTE, from, 4, comm, &r[0]));
    T_MPI(MPIX_Acc_Isend(s, out, 100, MPI_BYTE, to, 4, comm, &r[1]));
    int rc = MPI_Wait(&r[0], &st[0]);
    T_MPI(MPI_Wait(&r[1], &st[1]));
    int cls = -1;
    MPI_Error_class(rc == MPI_SUCCESS ? st[0].MPI_ERROR : rc, &cls);
    T_CHECK(cls == MPI_ERR_TRUNCATE, "%s: 100 bytes into 50: error class %d, expected %d", what,
            cls, MPI_ERR_TRUNCATE);
    /* what lands in the buffer is the library's choice (the SX path writes
     * the 50 bytes that fit, UCX nothing); never past it */
    T_CHECK(in[50] == 0, "%s truncate: byte 50 written (%d)", what, in[50]);
    /* a bulk-sized message into a smaller (still bulk-sized) buffer */
    size_t big = 100000, cap = 70000;
    unsigned char *bo = malloc(big), *bi = calloc(1, cap + 1);
    t_fill(bo, big, (uint64_t)(t_rank + 5));
    T_MPI(MPIX_Acc_Irecv(s, bi, (int)cap, MPI_BYTE, from, 5, comm, &r[0]));
    T_MPI(MPIX_Acc_Isend(s, bo, (int)big, MPI_BYTE, to, 5, comm, &r[1]));
    rc = MPI_Wait(&r[0], &st[0]);
    T_MPI(MPI_Wait(&r[1], &st[1]));
    MPI_Error_class(rc == MPI_SUCCESS ? st[0].MPI_ERROR : rc, &cls);
    T_CHECK(cls == MPI_ERR_TRUNCATE, "%s: %zu bytes into %zu: error class %d, expected %d", what,
            big, cap, cls, MPI_ERR_TRUNCATE);
    T_CHECK(bi[cap] == 0, "%s truncate: byte %zu written (%d)", what, cap, bi[cap]);
    free(bo);
    free(bi);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* ----------------------------------------------------------- 6. mixed */

static void mixed(MPI_Comm comm, const char *what)
{
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    enum { M = 12 };
    size_t big = slot_bytes() * 2;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    unsigned char *out[M], *in[M];
    MPI_Request r[2 * M];
    for (int i = 0; i < M; i++) {
        size_t n = (i % 2) ? big : 24;
        out[i] = malloc(n);
        in[i] = calloc(1, n);
        t_fill(out[i], n, (uint64_t)(t_rank * 31 + i));
        T_MPI(MPIX_Acc_Isend(s, out[i], (int)n, MPI_BYTE, to, 6, comm, &r[i]));
    }
    for (int i = 0; i < M; i++)
        T_MPI(MPIX_Acc_Irecv(s, in[i], (int)((i % 2) ? big : 24), MPI_BYTE, from, 6, comm,
                             &r[M + i]));
    T_MPI(MPIX_Acc_Waitall(s, 2 * M, r, MPI_STATUSES_IGNORE));
    sync_stream(s);
    for (int i = 0; i < M; i++) {
        char w[64];
        snprintf(w, sizeof(w), "%s mixed message %d", what, i);
        t_expect_pattern(in[i], (i % 2) ? big : 24, (uint64_t)(from * 31 + i), w);
        free(out[i]);
        free(in[i]);
    }
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* ---------------------------------------------------- 7. other streams */

static void other_streams(MPI_Comm comm, const char *what)
{
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s1, s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s1));
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    uint64_t out = 100 + (uint64_t)t_rank, in = 0, self_out = 7, self_in = 0, nul = 5;
    MPI_Request r[5];
    t_sleep_arg_t hold = {100};
    T_MPI(MPIX_Acc_Hoststream_launch(s1, t_sleep_fn, &hold)); /* s1 is late */
    T_MPI(MPIX_Acc_Irecv(s1, &in, 1, MPI_UINT64_T, from, 8, comm, &r[0]));
    T_MPI(MPIX_Acc_Isend(s1, &out, 1, MPI_UINT64_T, to, 8, comm, &r[1]));
    T_MPI(MPIX_Acc_Irecv(s2, &self_in, 1, MPI_UINT64_T, t_rank, 2, comm, &r[2]));
    T_MPI(MPIX_Acc_Isend(s2, &self_out, 1, MPI_UINT64_T, t_rank, 2, comm, &r[3]));
    T_MPI(MPIX_Acc_Isend(s2, &nul, 1, MPI_UINT64_T, MPI_PROC_NULL, 2, comm, &r[4]));
    T_MPI(MPIX_Acc_Waitall(s2, 5, r, MPI_STATUSES_IGNORE));
    sync_stream(s2);
    T_CHECK(in == 100 + (uint64_t)from, "%s other streams: got %llu", what, (unsigned long long)in);
    T_CHECK(self_in == 7, "%s self-send: got %llu", what, (unsigned long long)self_in);
    sync_stream(s1);
    T_MPI(MPIX_Acc_Hoststream_free(&s1));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));
}

/* ------------------------------------- 8. blocking calls on a stream */

static void blocking_calls(int sx, const char *what)
{
    int to = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    MPI_Comm sc = t_stream_comm_dup(s, sx);
    enum { N = 3000 };
    unsigned char *out = malloc(N), *in = malloc(N);
    for (int way = 0; way < 3; way++) {
        char w[96];
        snprintf(w, sizeof w, "%s, blocking %s", what,
                 way == 0   ? "MPI_Ssend/MPI_Recv"
                 : way == 1 ? "MPI_Send/MPI_Recv"
                            : "MPI_Sendrecv");
        t_fill(out, N, (uint64_t)(t_rank * 7 + way));
        memset(in, 0, N);
        /* the receiving stream is held, then writes the buffer itself */
        t_gate_t g;
        t_gate_init(&g);
        t_fill_arg_t fa = {.buf = in, .n = N, .seed = 999 + (uint64_t)way, .sleep_ms = 20};
        T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, &g));
        T_MPI(MPIX_Acc_Hoststream_launch(s, t_fill_fn, &fa));
        MPI_Status st;
        if (way == 2) {
            T_MPI(MPI_Sendrecv(out, N, MPI_BYTE, to, 30, in, N, MPI_BYTE, from, 30, sc, &st));
        } else if (t_rank % 2 == 0) { /* a blocking send returns at once on a stream */
            T_MPI(way == 0 ? MPI_Ssend(out, N, MPI_BYTE, to, 30 + way, sc)
                           : MPI_Send(out, N, MPI_BYTE, to, 30 + way, sc));
            T_MPI(MPI_Recv(in, N, MPI_BYTE, from, 30 + way, sc, &st));
        } else {
            T_MPI(MPI_Recv(in, N, MPI_BYTE, from, 30 + way, sc, &st));
            T_MPI(way == 0 ? MPI_Ssend(out, N, MPI_BYTE, to, 30 + way, sc)
                           : MPI_Send(out, N, MPI_BYTE, to, 30 + way, sc));
        }
        T_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every message sent or staged meanwhile */
        t_sleep_ms(50);
        atomic_store(&g.open, 1);
        sync_stream(s);
        t_expect_pattern(in, N, (uint64_t)(from * 7 + way), w);
        t_expect_status(&st, from, way == 2 ? 30 : 30 + way, N, MPI_BYTE, w);
    }
    /* truncation by a synchronous (UCX) send */
    memset(in, 0, N);
    MPI_Status st;
    if (t_rank % 2 == 0) {
        T_MPI(MPI_Ssend(out, 100, MPI_BYTE, to, 40, sc));
        T_MPI(MPI_Recv(in, 50, MPI_BYTE, from, 40, sc, &st));
    } else {
        T_MPI(MPI_Recv(in, 50, MPI_BYTE, from, 40, sc, &st));
        T_MPI(MPI_Ssend(out, 100, MPI_BYTE, to, 40, sc));
    }
    sync_stream(s);
    int cls = -1;
    MPI_Error_class(st.MPI_ERROR, &cls);
    T_CHECK(cls == MPI_ERR_TRUNCATE, "%s: MPI_Ssend of 100 bytes into MPI_Recv of 50: class %d",
            what, cls);
    T_CHECK(in[50] == 0, "%s: blocking truncation wrote byte 50 (%d)", what, in[50]);
    free(out);
    free(in);
    T_MPI(MPI_Comm_free(&sc));
    T_MPI(MPIX_Acc_Hoststream_free(&s));
}

/* --------------------- 9. non-blocking receives without a stream point */

/* Ranks in pairs (rank ^ 1; a last odd rank only joins the barriers): the
 * even one sends on an ungated stream, the odd one receives on a stream
 * held by a gate, behind a host function that writes the buffer first.
 * The message is sent (ring or UCX) before the gate opens; after the
 * stream ran the buffer must hold the message. */
/* the receiving side of phase 9: the held stream that writes the buffer
 * first, then the receive */
static void nb_post(MPIX_Acc_stream s, MPI_Comm sc, t_gate_t *g, t_fill_arg_t *fa, int way,
                    unsigned char *buf, int n, int rcount, int partner, int tag, MPI_Request *r)
{
    memset(buf, 0, (size_t)n);
    T_MPI(MPIX_Acc_Hoststream_launch(s, t_gate_fn, g));
    T_MPI(MPIX_Acc_Hoststream_launch(s, t_fill_fn, fa));
    if (way == 2)
        T_MPI(MPIX_Acc_Irecv(s, buf, n, MPI_BYTE, partner, tag, sc, r));
    else
        T_MPI(MPI_Irecv(buf, rcount, MPI_BYTE, partner, tag, sc, r));
}

static void nonblocking_calls(int sx, const char *what)
{
    int partner = t_rank ^ 1;
    int active = partner < t_size;
    int sender = t_rank % 2 == 0;
    MPIX_Acc_stream s, s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    MPI_Comm sc = t_stream_comm_dup(s, sx);
    enum { NMAX = 20000 };
    unsigned char *buf = malloc(NMAX);
    static const char *ways[] = {"MPI_Issend, MPI_Irecv + MPI_Waitall (staged from UCX)",
                                 "MPI_Isend, MPI_Irecv + MPI_Waitall",
                                 "MPIX_Acc_Irecv + MPIX_Acc_Waitall on another stream",
                                 "MPI_Irecv + MPI_Test until done",
                                 "MPI_Irecv + MPI_Waitall, a message longer than the receive",
                                 "MPI_Isend of 20000 bytes (UCX on host streams, staged)"};
    /* late: the receiver's wait (or test) comes after the message arrived
     * (the barrier and a sleep between MPI_Irecv and it): a message staged
     * from UCX before any step was enqueued is still the step's to copy */
    for (int k = 0; k < 12; k++) {
        const int way = k % 6, late = k / 6;
        char w[160];
        snprintf(w, sizeof w, "%s, non-blocking %s%s", what, ways[way],
                 late ? ", waited for after it arrived" : "");
        const int N = way == 5 ? NMAX : 3000;
        int tag = 50 + way, rcount = way == 4 ? N / 2 : N;
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_Status st;
        int flag = 0;
        t_gate_t g;
        t_gate_init(&g);
        t_fill_arg_t fa = {.buf = buf, .n = N, .seed = 999 + (uint64_t)way, .sleep_ms = 20};
        if (active && !sender && late)
            nb_post(s, sc, &g, &fa, way, buf, N, rcount, partner, tag, &r);
        if (late) /* the receive is posted before the message is sent */
            T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (active && sender) {
            t_fill(buf, N, (uint64_t)(t_rank * 11 + way));
            if (way == 0)
                T_MPI(MPI_Issend(buf, N, MPI_BYTE, partner, tag, sc, &r));
            else
                T_MPI(MPIX_Acc_Isend(s2, buf, N, MPI_BYTE, partner, tag, sc, &r));
            T_MPI(MPIX_Acc_Wait(way == 0 ? s : s2, &r, MPI_STATUS_IGNORE));
        }
        if (active && !sender && !late)
            nb_post(s, sc, &g, &fa, way, buf, N, rcount, partner, tag, &r);
        if (late) {
            T_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* sent */
            t_sleep_ms(50);                     /* arrived, staged if by UCX */
        }
        if (active && !sender) {
            if (way == 2)
                T_MPI(MPIX_Acc_Waitall(s2, 1, &r, &st));
            else if (way == 3)
                T_MPI(MPI_Test(&r, &flag, &st)); /* the stream is held: not done */
            else
                T_MPI(MPI_Waitall(1, &r, &st));
            T_CHECK(!flag, "%s: done while its stream is held", w);
        }
        T_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every message sent or staged meanwhile */
        t_sleep_ms(late ? 5 : 50);
        atomic_store(&g.open, 1);
        if (active && !sender) {
            if (way == 3) {
                double t0 = t_now();
                while (!flag && t_now() - t0 < T_SLOW(20.0))
                    T_MPI(MPI_Test(&r, &flag, &st));
                T_CHECK(flag, "%s: MPI_Test never saw it done", w);
            }
            sync_stream(s);
            sync_stream(s2);
            if (way == 4) {
                T_CHECK(t_err_class(st.MPI_ERROR) == MPI_ERR_TRUNCATE,
                        "%s: error class %d, expected MPI_ERR_TRUNCATE", w,
                        t_err_class(st.MPI_ERROR));
                /* the fill's bytes past the receive stay */
                unsigned char *ref = malloc(N);
                t_fill(ref, N, 999 + (uint64_t)way);
                T_CHECK(memcmp(buf + rcount, ref + rcount, (size_t)(N - rcount)) == 0,
                        "%s: bytes past the receive written", w);
                free(ref);
            } else {
                t_expect_pattern(buf, N, (uint64_t)(partner * 11 + way), w);
                t_expect_status(&st, partner, tag, N, MPI_BYTE, w);
            }
        } else {
            sync_stream(s);
            sync_stream(s2);
        }
    }
    free(buf);
    T_MPI(MPI_Comm_free(&sc));
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "sx_path", 120);
    t_need_ranks(2);
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    for (int sx = 1; sx >= 0; sx--) {
        MPI_Comm c = t_comm_dup(sx);
        const char *what = sx ? "SX communicator" : "plain communicator";
        t_phase(sx ? "1. sizes (sx)" : "1. sizes (plain)");
        sizes(c, what);
        t_phase("2. head-to-head");
        head_to_head(c, what);
        t_phase("3. ahead");
        ahead(c, what);
        t_phase("4. host waits");
        host_waits(c, what);
        t_phase("5. truncation");
        truncate_case(c, what);
        t_phase("6. mixed sizes");
        mixed(c, what);
        t_phase("7. other streams");
        other_streams(c, what);
        t_phase("8. blocking calls on a stream");
        blocking_calls(sx, what);
        t_phase("9. non-blocking receives behind a held stream");
        nonblocking_calls(sx, what);
        T_MPI(MPI_Barrier(c));
        T_MPI(MPI_Comm_free(&c));
    }
    return t_finish();
}
