/*
 * stream_collectives.c - MPIX_Acc_Barrier/_Bcast/_Reduce/_Allreduce/
 * _Allgather/_Alltoall on a host stream (issue 20 item 4), against the MPI
 * library's own collectives on a plain duplicate of MPI_COMM_WORLD.
 *
 *   1. behind a gate that holds the stream: each call returns at once and
 *      writes nothing until the stream runs; then the results are there;
 *   2. Allreduce and Reduce (every root): int, unsigned char, int64, float,
 *      double x sum, prod, min, max; 0, 1, 7 and 1000 elements; in place
 *      and not: integers bitwise equal to the exact result (computed here
 *      from every rank's input) and to MPI_Allreduce/MPI_Reduce (except
 *      MPI_MIN/MPI_MAX on MPI_UNSIGNED_CHAR, which MPICH 4.0.2 compares as
 *      signed: min(51, 153) = 153 there), floating types within 1e-12 of
 *      MPI's, bitwise the same on every rank and in a second run (a fixed
 *      algorithm);
 *  2b. double sums and products of 1..40003 elements bitwise equal to the
 *      documented combination order (fold, then a balanced tree): recursive
 *      doubling below MPIX_ACC_ALLREDUCE_RSAG, reduce-scatter + allgather
 *      above (TESTS runs it with the threshold at 64 bytes too);
 *   3. Bcast from every root; Allgather and Alltoall, in place and not;
 *   4. Barrier: the stream of a rank whose peer holds its stream does not
 *      pass the barrier before the peer's gate opens;
 *   5. 40 collectives and point-to-point messages on the same communicator
 *      and stream, back to back: collective messages never match
 *      point-to-point ones;
 *   6. argument errors are MPI errors of the right class, nothing enqueued;
 *   7. nonblocking forms: MPIX_Acc_Iallreduce behind a gate -- MPI_Test
 *      says not done until the stream passed it, MPI_Wait (host) then has
 *      the result; MPIX_Acc_Ibarrier/_Ibcast/_Ireduce/_Iallgather/
 *      _Ialltoall completed by MPIX_Acc_Waitall on the stream; MPI_I* on a
 *      stream communicator (MPI_Waitall: a stream wait), and one it does
 *      not take (MPI_LAND: the MPI library's request).
 */
#include "common.h"

#include <math.h>
#include <string.h>

static MPIX_Acc_stream S;
static MPI_Comm C, P; /* C: the collectives' communicator; P: plain reference */

typedef struct {
    MPI_Datatype dt;
    size_t size;
    int floating;
    const char *name;
} tinfo_t;

static void fill(void *buf, const tinfo_t *t, int n, int seed)
{
    for (int i = 0; i < n; i++) {
        /* small values: products of 4 ranks stay exact in every type */
        int v = (seed * 7 + i * 3) % 5 + 1;
        if (t->dt == MPI_INT)
            ((int *)buf)[i] = (i % 3 == 0) ? -v : v;
        else if (t->dt == MPI_UNSIGNED_CHAR)
            ((unsigned char *)buf)[i] = (unsigned char)(v * 51);
        else if (t->dt == MPI_INT64_T)
            ((int64_t *)buf)[i] = (int64_t)v * 1000000007LL * ((i % 2) ? 1 : -1);
        else if (t->dt == MPI_FLOAT)
            ((float *)buf)[i] = (float)v / 3.0f + (float)seed * 0.1f;
        else
            ((double *)buf)[i] = (double)v / 7.0 + (double)seed * 1e-3 + (double)i * 1e-9;
    }
}

/* The exact reduction of every rank's input (integer types: wrap-around
 * sums and products are exact in any order). */
#define REF_LOOP(T, W)                                                                             \
    do {                                                                                           \
        T *o_ = out, *x_ = tmp;                                                                    \
        for (int i = 0; i < n; i++) {                                                              \
            T a = o_[i], b = x_[i];                                                                \
            o_[i] = op == MPI_SUM    ? (T)((W)a + (W)b)                                            \
                    : op == MPI_PROD ? (T)((W)a * (W)b)                                            \
                    : op == MPI_MIN  ? (b < a ? b : a)                                             \
                                     : (b > a ? b : a);                                             \
        }                                                                                          \
    } while (0)

static void exact(const tinfo_t *t, MPI_Op op, int n, void *out)
{
    void *tmp = malloc(t->size * (size_t)n + 1);
    fill(out, t, n, 1);
    for (int r = 1; r < t_size; r++) {
        fill(tmp, t, n, r + 1);
        if (t->dt == MPI_INT)
            REF_LOOP(int, unsigned);
        else if (t->dt == MPI_UNSIGNED_CHAR)
            REF_LOOP(unsigned char, unsigned);
        else
            REF_LOOP(int64_t, uint64_t);
    }
    free(tmp);
}

/* got vs want: bitwise for integers, within rel 1e-12 (1e-5 for float) */
static void compare(const void *got, const void *want, const tinfo_t *t, int n, const char *what)
{
    if (!t->floating) {
        T_CHECK(memcmp(got, want, t->size * (size_t)n) == 0, "%s: %s result differs from MPI's",
                what, t->name);
        return;
    }
    for (int i = 0; i < n; i++) {
        double g = t->dt == MPI_FLOAT ? ((const float *)got)[i] : ((const double *)got)[i];
        double w = t->dt == MPI_FLOAT ? ((const float *)want)[i] : ((const double *)want)[i];
        double tol = (t->dt == MPI_FLOAT ? 1e-5 : 1e-12) * (fabs(w) > 1 ? fabs(w) : 1);
        T_CHECK(fabs(g - w) <= tol, "%s: %s element %d = %.17g, MPI gives %.17g", what, t->name, i,
                g, w);
    }
}

/* every rank holds the same bytes */
static void same_everywhere(const void *buf, size_t bytes, const char *what)
{
    unsigned char *all = malloc(bytes * (size_t)t_size + 1);
    T_MPI(MPI_Allgather(buf, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, P));
    for (int r = 0; r < t_size; r++)
        T_CHECK(memcmp(all + bytes * (size_t)r, buf, bytes) == 0,
                "%s: rank %d's result differs from rank %d's in its bits", what, r, t_rank);
    free(all);
}

/* ---------------------------------------------------------------- 1. */

static void behind_gate(void)
{
    t_phase("1. behind a gate: nothing happens before the stream runs");
    int in[16], out[16], want[16];
    for (int i = 0; i < 16; i++)
        in[i] = t_rank * 100 + i, out[i] = -7;
    T_MPI(MPI_Allreduce(in, want, 16, MPI_INT, MPI_SUM, P));
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    double t0 = t_now();
    T_MPI(MPIX_Acc_Allreduce(S, in, out, 16, MPI_INT, MPI_SUM, C));
    double dt = t_now() - t0;
    T_CHECK(dt < T_SLOW(1.0), "MPIX_Acc_Allreduce took %.2f s (it must not wait)", dt);
    for (int i = 0; i < 16; i++)
        T_CHECK(out[i] == -7, "receive buffer written before the stream ran (out[%d] = %d)", i,
                out[i]);
    atomic_store(&g.open, 1);
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(memcmp(out, want, sizeof out) == 0, "result after the gate differs from MPI's");
}

/* ---------------------------------------------------------------- 2. */

static void reductions(void)
{
    t_phase("2. Allreduce and Reduce against MPI's");
    const tinfo_t types[] = {{MPI_INT, sizeof(int), 0, "MPI_INT"},
                             {MPI_UNSIGNED_CHAR, 1, 0, "MPI_UNSIGNED_CHAR"},
                             {MPI_INT64_T, 8, 0, "MPI_INT64_T"},
                             {MPI_FLOAT, sizeof(float), 1, "MPI_FLOAT"},
                             {MPI_DOUBLE, sizeof(double), 1, "MPI_DOUBLE"}};
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    const char *opname[] = {"sum", "prod", "min", "max"};
    const int counts[] = {0, 1, 7, 1000};
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const tinfo_t *t = &types[ti];
        for (int oi = 0; oi < 4; oi++) {
            for (int ci = 0; ci < 4; ci++) {
                int n = counts[ci];
                size_t b = t->size * (size_t)n + 1;
                void *in = malloc(b), *out = malloc(b), *out2 = malloc(b), *want = malloc(b);
                char what[128];
                snprintf(what, sizeof what, "Allreduce %s %s n=%d", t->name, opname[oi], n);
                fill(in, t, n, t_rank + 1);
                /* MPICH 4.0.2 compares MPI_UNSIGNED_CHAR as signed in MIN/MAX */
                int mpi_ok = !(t->dt == MPI_UNSIGNED_CHAR && (oi == 2 || oi == 3));
                T_MPI(MPI_Allreduce(in, want, n, t->dt, ops[oi], P));
                T_MPI(MPIX_Acc_Allreduce(S, in, out, n, t->dt, ops[oi], C));
                /* in place, the same values */
                memcpy(out2, in, b);
                T_MPI(MPIX_Acc_Allreduce(S, MPI_IN_PLACE, out2, n, t->dt, ops[oi], C));
                T_MPI(MPIX_Acc_Hoststream_synchronize(S));
                if (mpi_ok)
                    compare(out, want, t, n, what);
                if (!t->floating) {
                    exact(t, ops[oi], n, want);
                    T_CHECK(memcmp(out, want, t->size * (size_t)n) == 0,
                            "%s: differs from the exact result", what);
                }
                T_CHECK(memcmp(out, out2, t->size * (size_t)n) == 0,
                        "%s: in place gives other bits than not in place", what);
                same_everywhere(out, t->size * (size_t)n, what);
                /* a second run: the same bits */
                T_MPI(MPIX_Acc_Allreduce(S, in, out2, n, t->dt, ops[oi], C));
                T_MPI(MPIX_Acc_Hoststream_synchronize(S));
                T_CHECK(memcmp(out, out2, t->size * (size_t)n) == 0,
                        "%s: a second run gives other bits", what);
                /* Reduce to every root: the Allreduce's bits at the root */
                if (n == 7 || n == 0) {
                    for (int root = 0; root < t_size; root++) {
                        snprintf(what, sizeof what, "Reduce %s %s n=%d root %d", t->name,
                                 opname[oi], n, root);
                        memset(out2, 0x5a, b);
                        T_MPI(MPIX_Acc_Reduce(S, in, t_rank == root ? out2 : NULL, n, t->dt,
                                              ops[oi], root, C));
                        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
                        if (t_rank == root)
                            T_CHECK(memcmp(out, out2, t->size * (size_t)n) == 0,
                                    "%s: differs from the Allreduce's bits", what);
                        T_MPI(MPI_Reduce(in, want, n, t->dt, ops[oi], root, P));
                        if (t_rank == root && mpi_ok)
                            compare(out2, want, t, n, what);
                        /* the root in place */
                        memcpy(out2, in, b);
                        T_MPI(MPIX_Acc_Reduce(S, t_rank == root ? MPI_IN_PLACE : in,
                                              t_rank == root ? out2 : NULL, n, t->dt, ops[oi], root,
                                              C));
                        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
                        if (t_rank == root)
                            T_CHECK(memcmp(out, out2, t->size * (size_t)n) == 0,
                                    "%s in place: differs from the Allreduce's bits", what);
                    }
                }
                free(in);
                free(out);
                free(out2);
                free(want);
            }
        }
    }
}

/* ---------------------------------------------------------------- 2b. */

/* The library's combination order (streamcoll.c): the first 2 rem ranks
 * fold pairwise (even op odd), then the pof2 partials combine as a
 * balanced tree left to right -- recursive doubling and reduce-scatter +
 * allgather alike. tree(lo, hi) over the partials of new ranks lo..hi-1. */
static double tree_d(const double *part, int lo, int hi, int prod)
{
    if (hi - lo == 1)
        return part[lo];
    int mid = (lo + hi) / 2;
    double a = tree_d(part, lo, mid, prod), b = tree_d(part, mid, hi, prod);
    return prod ? a * b : a + b;
}

static void tree_order(void)
{
    t_phase("2b. Allreduce bits = the documented combination order, both algorithms");
    /* sizes around the reduce-scatter threshold (MPIX_ACC_ALLREDUCE_RSAG,
     * 256k by default; TESTS runs this with 64 too) and counts below,
     * at and off a multiple of the process count */
    const int counts[] = {1, 3, 4, 5, 17, 1000, 40000, 40003};
    int p = t_size, pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    int rem = p - pof2;
    for (int ci = 0; ci < (int)(sizeof(counts) / sizeof(counts[0])); ci++) {
        int n = counts[ci];
        for (int prod = 0; prod < 2; prod++) {
            double *in = malloc(sizeof(double) * (size_t)n),
                   *out = malloc(sizeof(double) * (size_t)n);
            double *all = malloc(sizeof(double) * (size_t)n * (size_t)p);
            for (int i = 0; i < n; i++)
                in[i] = 1.0 + (double)((t_rank * 131 + i * 17) % 97) / 89.0 + (double)i * 1e-7;
            T_MPI(MPI_Allgather(in, n, MPI_DOUBLE, all, n, MPI_DOUBLE, P));
            T_MPI(MPIX_Acc_Allreduce(S, in, out, n, MPI_DOUBLE, prod ? MPI_PROD : MPI_SUM, C));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            double part[64];
            int bad = -1;
            for (int i = 0; i < n && bad < 0; i++) {
                for (int nr = 0; nr < pof2; nr++) {
                    int r = nr < rem ? 2 * nr : nr + rem;
                    double v = all[(size_t)r * (size_t)n + (size_t)i];
                    if (nr < rem) {
                        double w = all[(size_t)(r + 1) * (size_t)n + (size_t)i];
                        v = prod ? v * w : v + w;
                    }
                    part[nr] = v;
                }
                double want = tree_d(part, 0, pof2, prod);
                if (memcmp(&want, &out[i], sizeof want) != 0)
                    bad = i;
            }
            T_CHECK(bad < 0,
                    "Allreduce %s n=%d: element %d = %.17g, the tree order gives other bits",
                    prod ? "prod" : "sum", n, bad, bad >= 0 ? out[bad] : 0.0);
            free(in);
            free(out);
            free(all);
        }
    }
}

/* ---------------------------------------------------------------- 3. */

static void data_movement(void)
{
    t_phase("3. Bcast, Allgather, Alltoall");
    enum { N = 333 };
    double *b = malloc(sizeof(double) * N);
    for (int root = 0; root < t_size; root++) {
        for (int i = 0; i < N; i++)
            b[i] = t_rank == root ? root * 1000.0 + i : -1.0;
        T_MPI(MPIX_Acc_Bcast(S, b, N, MPI_DOUBLE, root, C));
        T_MPI(MPIX_Acc_Bcast(S, NULL, 0, MPI_DOUBLE, root, C));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        for (int i = 0; i < N; i++)
            T_CHECK(b[i] == root * 1000.0 + i, "Bcast from %d: b[%d] = %g", root, i, b[i]);
    }
    free(b);
    int p = t_size;
    int *sb = malloc(sizeof(int) * N * (size_t)p), *rb = malloc(sizeof(int) * N * (size_t)p);
    int *want = malloc(sizeof(int) * N * (size_t)p);
    for (int i = 0; i < N * p; i++)
        sb[i] = t_rank * 100000 + i;
    /* Allgather: N ints per rank */
    T_MPI(MPI_Allgather(sb, N, MPI_INT, want, N, MPI_INT, P));
    memset(rb, 0, sizeof(int) * N * (size_t)p);
    T_MPI(MPIX_Acc_Allgather(S, sb, N, MPI_INT, rb, N, MPI_INT, C));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(memcmp(rb, want, sizeof(int) * N * (size_t)p) == 0, "Allgather differs from MPI's");
    memset(rb, 0, sizeof(int) * N * (size_t)p);
    memcpy(rb + N * t_rank, sb, sizeof(int) * N);
    T_MPI(MPIX_Acc_Allgather(S, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, N * (int)sizeof(int),
                             MPI_BYTE, C));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(memcmp(rb, want, sizeof(int) * N * (size_t)p) == 0,
            "Allgather in place (as bytes) differs from MPI's");
    /* Alltoall: block q of rank r goes to rank q */
    T_MPI(MPI_Alltoall(sb, N, MPI_INT, want, N, MPI_INT, P));
    memset(rb, 0, sizeof(int) * N * (size_t)p);
    T_MPI(MPIX_Acc_Alltoall(S, sb, N, MPI_INT, rb, N, MPI_INT, C));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(memcmp(rb, want, sizeof(int) * N * (size_t)p) == 0, "Alltoall differs from MPI's");
    memcpy(rb, sb, sizeof(int) * N * (size_t)p);
    T_MPI(MPIX_Acc_Alltoall(S, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, N, MPI_INT, C));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(memcmp(rb, want, sizeof(int) * N * (size_t)p) == 0,
            "Alltoall in place differs from MPI's");
    free(sb);
    free(rb);
    free(want);
}

/* ---------------------------------------------------------------- 4. */

typedef struct {
    atomic_int ran;
    double at;
} mark_t;

static void mark_fn(void *arg)
{
    mark_t *m = arg;
    m->at = t_now();
    atomic_store(&m->ran, 1);
}

static void barrier_order(void)
{
    t_phase("4. Barrier: no stream passes it before every stream reached it");
    for (int holder = 0; holder < t_size; holder++) {
        t_gate_t g;
        t_gate_init(&g);
        mark_t m;
        atomic_store(&m.ran, 0);
        m.at = 0;
        T_MPI(MPI_Barrier(P));
        if (t_rank == holder)
            T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
        double t0 = t_now();
        T_MPI(MPIX_Acc_Barrier(S, C));
        T_MPI(MPIX_Acc_Hoststream_launch(S, mark_fn, &m));
        if (t_rank == holder) {
            t_sleep_ms(T_SLOW(300.0));
            T_CHECK(!atomic_load(&m.ran), "the holder's stream passed its own gate");
            atomic_store(&g.open, 1);
        }
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(atomic_load(&m.ran) && m.at - t0 >= 0.25,
                "rank %d passed the barrier %.3f s after the call while rank %d held its stream "
                "300 ms",
                t_rank, m.at - t0, holder);
    }
}

/* ---------------------------------------------------------------- 5. */

static void mixed_with_p2p(void)
{
    t_phase("5. collectives and point-to-point messages on one communicator");
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    enum { R = 40 };
    int s[R], r[R], sum[R];
    MPI_Request rq[2 * R];
    for (int k = 0; k < R; k++) {
        s[k] = t_rank * 1000 + k;
        r[k] = -1;
        T_MPI(MPIX_Acc_Irecv(S, &r[k], 1, MPI_INT, prev, 0, C, &rq[2 * k]));
        T_MPI(MPIX_Acc_Allreduce(S, &s[k], &sum[k], 1, MPI_INT, MPI_SUM, C));
        T_MPI(MPIX_Acc_Isend(S, &s[k], 1, MPI_INT, next, 0, C, &rq[2 * k + 1]));
        if (k % 8 == 0)
            T_MPI(MPIX_Acc_Barrier(S, C));
    }
    T_MPI(MPIX_Acc_Waitall(S, 2 * R, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    int base = 1000 * t_size * (t_size - 1) / 2;
    for (int k = 0; k < R; k++) {
        T_CHECK(r[k] == prev * 1000 + k, "message %d from rank %d: got %d", k, prev, r[k]);
        T_CHECK(sum[k] == base + t_size * k, "Allreduce %d: %d, expected %d", k, sum[k],
                base + t_size * k);
    }
}

/* ---------------------------------------------------------------- 6. */

static void expect_class(int rc, int want, const char *what)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    T_CHECK(cls == want, "%s: error class %d, expected %d", what, cls, want);
}

static void errors(void)
{
    t_phase("6. argument errors");
    int a[4] = {1, 2, 3, 4}, b[4 * 64];
    expect_class(MPIX_Acc_Bcast(S, a, 4, MPI_INT, t_size, C), MPI_ERR_ROOT, "Bcast root = size");
    expect_class(MPIX_Acc_Reduce(S, a, b, 4, MPI_INT, MPI_SUM, -1, C), MPI_ERR_ROOT,
                 "Reduce root -1");
    expect_class(MPIX_Acc_Allreduce(S, a, b, 4, MPI_INT, MPI_BAND, C), MPI_ERR_OP,
                 "Allreduce MPI_BAND");
    expect_class(MPIX_Acc_Allreduce(S, a, b, 2, MPI_2INT, MPI_SUM, C), MPI_ERR_TYPE,
                 "Allreduce MPI_2INT");
    expect_class(MPIX_Acc_Allreduce(S, a, b, -1, MPI_INT, MPI_SUM, C), MPI_ERR_COUNT,
                 "Allreduce count -1");
    expect_class(MPIX_Acc_Allreduce(S, a, MPI_IN_PLACE, 4, MPI_INT, MPI_SUM, C), MPI_ERR_BUFFER,
                 "Allreduce receive buffer MPI_IN_PLACE");
    expect_class(MPIX_Acc_Allreduce(S, NULL, b, 4, MPI_INT, MPI_SUM, C), MPI_ERR_BUFFER,
                 "Allreduce send buffer NULL");
    if (t_size > 1)
        expect_class(
            MPIX_Acc_Reduce(S, MPI_IN_PLACE, b, 4, MPI_INT, MPI_SUM, t_rank == 0 ? 1 : 0, C),
            MPI_ERR_BUFFER, "Reduce MPI_IN_PLACE off the root");
    expect_class(MPIX_Acc_Allgather(S, a, 4, MPI_INT, b, 3, MPI_INT, C), MPI_ERR_COUNT,
                 "Allgather blocks of 16 and 12 bytes");
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    expect_class(MPIX_Acc_Bcast(S, b, 1, vec, 0, C), MPI_ERR_TYPE, "Bcast of a vector type");
    MPI_Type_free(&vec);
    MPI_Datatype unc;
    MPI_Type_contiguous(4, MPI_INT, &unc); /* not committed */
    expect_class(MPIX_Acc_Bcast(S, b, 1, unc, 0, C), MPI_ERR_TYPE, "Bcast of an uncommitted type");
    MPI_Type_free(&unc);
    /* errors without a communicator are raised on MPI_COMM_SELF (MPI-4) */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    expect_class(MPIX_Acc_Barrier(S, MPI_COMM_NULL), MPI_ERR_COMM, "Barrier on MPI_COMM_NULL");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    /* nothing was enqueued by the failed calls: a correct one still works */
    int one = 1, sum = 0;
    T_MPI(MPIX_Acc_Allreduce(S, &one, &sum, 1, MPI_INT, MPI_SUM, C));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(sum == t_size, "Allreduce after the errors: %d, expected %d", sum, t_size);
}

static void nonblocking(void)
{
    t_phase("7. nonblocking forms");
    int in[8], out[8], want[8];
    for (int i = 0; i < 8; i++)
        in[i] = t_rank * 10 + i, out[i] = -7;
    T_MPI(MPI_Allreduce(in, want, 8, MPI_INT, MPI_SUM, P));
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    MPI_Request rq[6];
    T_MPI(MPIX_Acc_Iallreduce(S, in, out, 8, MPI_INT, MPI_SUM, C, &rq[0]));
    int flag = 1;
    T_MPI(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
    T_CHECK(!flag, "MPI_Test: an Iallreduce behind a closed gate is complete");
    atomic_store(&g.open, 1);
    T_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    T_CHECK(rq[0] == MPI_REQUEST_NULL, "MPI_Wait left the request");
    T_CHECK(memcmp(out, want, sizeof out) == 0, "Iallreduce's result at MPI_Wait differs");

    /* the others, completed on the stream */
    int p = t_size, b[4], red[8], ag[8 * 16], at[8 * 16], sb[8 * 16];
    for (int i = 0; i < 4; i++)
        b[i] = t_rank == 0 ? 40 + i : -1;
    for (int i = 0; i < 8 * p; i++)
        sb[i] = t_rank * 1000 + i;
    T_MPI(MPIX_Acc_Ibarrier(S, C, &rq[0]));
    T_MPI(MPIX_Acc_Ibcast(S, b, 4, MPI_INT, 0, C, &rq[1]));
    T_MPI(MPIX_Acc_Ireduce(S, in, red, 8, MPI_INT, MPI_SUM, p - 1, C, &rq[2]));
    T_MPI(MPIX_Acc_Iallgather(S, sb, 8, MPI_INT, ag, 8, MPI_INT, C, &rq[3]));
    T_MPI(MPIX_Acc_Ialltoall(S, sb, 8, MPI_INT, at, 8, MPI_INT, C, &rq[4]));
    T_MPI(MPIX_Acc_Waitall(S, 5, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    for (int i = 0; i < 4; i++)
        T_CHECK(b[i] == 40 + i, "Ibcast: b[%d] = %d", i, b[i]);
    if (t_rank == p - 1)
        T_CHECK(memcmp(red, want, sizeof red) == 0, "Ireduce's result at the root differs");
    for (int q = 0; q < p; q++)
        for (int i = 0; i < 8; i++) {
            T_CHECK(ag[q * 8 + i] == q * 1000 + i, "Iallgather block %d [%d] = %d", q, i,
                    ag[q * 8 + i]);
            T_CHECK(at[q * 8 + i] == q * 1000 + t_rank * 8 + i, "Ialltoall block %d [%d] = %d", q,
                    i, at[q * 8 + i]);
        }

    /* MPI_I* on a stream communicator: stream-ordered, MPI_Waitall a stream wait */
    MPIX_Acc_stream s2;
    MPI_Comm sc = t_stream_comm(&s2);
    int x[8], lx = 1, lr = 0;
    for (int i = 0; i < 8; i++)
        x[i] = -7;
    T_MPI(MPI_Iallreduce(in, x, 8, MPI_INT, MPI_SUM, sc, &rq[0]));
    T_MPI(MPI_Ibarrier(sc, &rq[1]));
    T_MPI(MPI_Ibcast(b, 4, MPI_INT, p - 1, sc, &rq[2]));
    T_MPI(MPI_Iallreduce(&lx, &lr, 1, MPI_INT, MPI_LAND, sc, &rq[3])); /* the MPI library's */
    T_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s2));
    T_CHECK(memcmp(x, want, sizeof x) == 0, "MPI_Iallreduce on a stream communicator differs");
    T_CHECK(lr == 1, "MPI_Iallreduce(MPI_LAND) through the MPI library: %d", lr);
    t_stream_comm_free(&sc, &s2);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "stream_collectives", 240);
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &C));
    T_MPI(MPI_Comm_set_errhandler(C, MPI_ERRORS_RETURN));
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &P));
    behind_gate();
    reductions();
    tree_order();
    data_movement();
    barrier_order();
    mixed_with_p2p();
    errors();
    nonblocking();
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPI_Comm_free(&C));
    T_MPI(MPI_Comm_free(&P));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    return t_finish();
}
