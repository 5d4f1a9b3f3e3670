/*
 * collectives.cu - stream-ordered collectives on a CUDA stream (issue 20
 * item 4): MPIX_Acc_Allreduce/_Reduce/_Bcast/_Allgather/_Alltoall/
 * _Barrier with stream first, their nonblocking forms, and MPI's own
 * collectives on a stream communicator of a cudaStream_t.
 *
 *   A  Allreduce, device buffers: int, unsigned char, int64, float, double
 *      x sum, prod, min, max; 1, 7, 1000 and 70001 elements (the last
 *      above MPIX_ACC_ALLREDUCE_RSAG: reduce-scatter + allgather); in place
 *      and not. Every result bitwise equal to the documented combination
 *      order (streamcoll.c: fold, then a balanced tree, lower rank's
 *      operand first) computed here on the host from every rank's input --
 *      the reduction kernel gives the host arithmetic's bits -- and the
 *      same on every rank;
 *   B  the same for pinned and managed buffers, and a pageable send
 *      buffer with a device receive buffer (staged on the stream);
 *   C  Reduce to every root (the Allreduce's bits at the root), Bcast from
 *      every root, Allgather and Alltoall (in place and not), Barrier;
 *   D  a loop of 300 steps with no host synchronization: a kernel adds the
 *      step to the input, MPI_Allreduce on a stream communicator of the
 *      stream, a kernel accumulates the result; the sum is checked once at
 *      the end; MPI_Iallreduce + MPI_Wait (a stream wait) likewise;
 *   E  MPIX_Acc_Iallreduce behind a kernel that sleeps 200 ms: MPI_Test
 *      says not done, MPI_Wait (host) then has the result.
 *
 * Options: --timeout=S, --quick (A: int and double only, for the
 * sanitizers), --sx (the communicator asserts no wildcards: the
 * stream-executed path between processes of a node)
 */
#include "gpu_common.h"

#include <math.h>
#include <stdint.h>
#include <vector>

static MPI_Comm C;

/* ------------------------------------------------------- host reference */

template <typename T, typename W> static T ref1(int op, T x, T y)
{
    switch (op) {
    case 0:
        return (T)((W)x + (W)y);
    case 1:
        return (T)((W)x * (W)y);
    case 2:
        return y < x ? y : x;
    default:
        return y > x ? y : x;
    }
}

/* the library's order: fold the first 2 rem ranks pairwise, then a
 * balanced tree over the pof2 partials */
template <typename T, typename W> static T tree(const std::vector<T> &part, int lo, int hi, int op)
{
    if (hi - lo == 1)
        return part[lo];
    int mid = (lo + hi) / 2;
    return ref1<T, W>(op, tree<T, W>(part, lo, mid, op), tree<T, W>(part, mid, hi, op));
}

template <typename T, typename W>
static void reference(const T *all, int p, size_t n, int op, T *out)
{
    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    int rem = p - pof2;
    std::vector<T> part(pof2);
    for (size_t i = 0; i < n; i++) {
        for (int nr = 0; nr < pof2; nr++) {
            int r = nr < rem ? 2 * nr : nr + rem;
            T v = all[(size_t)r * n + i];
            if (nr < rem)
                v = ref1<T, W>(op, v, all[(size_t)(r + 1) * n + i]);
            part[nr] = v;
        }
        out[i] = tree<T, W>(part, 0, pof2, op);
    }
}

struct tinfo {
    MPI_Datatype dt;
    size_t size;
    const char *name;
};
static const tinfo types[] = {{MPI_INT, 4, "MPI_INT"},
                              {MPI_UNSIGNED_CHAR, 1, "MPI_UNSIGNED_CHAR"},
                              {MPI_INT64_T, 8, "MPI_INT64_T"},
                              {MPI_FLOAT, 4, "MPI_FLOAT"},
                              {MPI_DOUBLE, 8, "MPI_DOUBLE"}};
static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
static const char *const opname[] = {"sum", "prod", "min", "max"};

static void fill_host(int ti, void *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) {
        int v = (int)((seed * 7 + i * 3) % 5) + 1;
        switch (ti) {
        case 0:
            ((int *)buf)[i] = (i % 3 == 0) ? -v * 1000003 : v;
            break;
        case 1:
            ((unsigned char *)buf)[i] = (unsigned char)(v * 51 + seed);
            break;
        case 2:
            ((int64_t *)buf)[i] = (int64_t)v * 1000000007LL * ((i % 2) ? 1 : -1);
            break;
        case 3:
            ((float *)buf)[i] = (float)v / 3.0f + (float)seed * 0.1f + (float)i * 1e-6f;
            break;
        default:
            ((double *)buf)[i] = (double)v / 7.0 + (double)seed * 1e-3 + (double)i * 1e-9;
        }
    }
}

static void want_of(int ti, int oi, const void *all, size_t n, void *out)
{
    switch (ti) {
    case 0:
        reference<int, unsigned>((const int *)all, t_size, n, oi, (int *)out);
        break;
    case 1:
        reference<unsigned char, unsigned>((const unsigned char *)all, t_size, n, oi,
                                           (unsigned char *)out);
        break;
    case 2:
        reference<int64_t, uint64_t>((const int64_t *)all, t_size, n, oi, (int64_t *)out);
        break;
    case 3:
        reference<float, float>((const float *)all, t_size, n, oi, (float *)out);
        break;
    default:
        reference<double, double>((const double *)all, t_size, n, oi, (double *)out);
    }
}

/* every rank's input of this case, and the expected result */
static void expected(int ti, int oi, const void *in, size_t n, void *want)
{
    size_t b = types[ti].size * n;
    std::vector<unsigned char> all(b * (size_t)t_size + 1);
    T_MPI(MPI_Allgather(in, (int)b, MPI_BYTE, all.data(), (int)b, MPI_BYTE, MPI_COMM_WORLD));
    want_of(ti, oi, all.data(), n, want);
}

static void same_everywhere(const void *buf, size_t bytes, const char *what)
{
    std::vector<unsigned char> all(bytes * (size_t)t_size + 1);
    T_MPI(
        MPI_Allgather(buf, (int)bytes, MPI_BYTE, all.data(), (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
    for (int r = 0; r < t_size; r++)
        T_CHECK(memcmp(all.data() + bytes * (size_t)r, buf, bytes) == 0,
                "%s: rank %d's result differs from rank %d's in its bits", what, r, t_rank);
}

static void first_diff(const void *got, const void *want, int ti, size_t n, const char *what)
{
    size_t es = types[ti].size;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
            double g = 0, w = 0;
            if (ti == 3)
                g = ((const float *)got)[i], w = ((const float *)want)[i];
            else if (ti == 4)
                g = ((const double *)got)[i], w = ((const double *)want)[i];
            t_fail("%s: element %zu differs from the combination order's bits (%.17g vs %.17g)",
                   what, i, g, w);
        }
}

/* ------------------------------------------------------------ A and B */

/* One Allreduce case: send buffer of kind sk, receive buffer of kind rk. */
static void allreduce_case(cudaStream_t s, int ti, int oi, size_t n, gt_mem_t sk, gt_mem_t rk,
                           int in_place)
{
    size_t b = types[ti].size * n;
    char what[160];
    snprintf(what, sizeof what, "Allreduce %s %s n=%zu %s->%s%s", types[ti].name, opname[oi], n,
             gt_mem_name[sk], gt_mem_name[rk], in_place ? " in place" : "");
    std::vector<unsigned char> in(b + 1), want(b + 1), got(b + 1);
    fill_host(ti, in.data(), n, t_rank + 1);
    expected(ti, oi, in.data(), n, want.data());
    void *sb = in_place ? NULL : gt_alloc(sk, b), *rb = gt_alloc(rk, b);
    GT_CUDA(cudaMemcpy(in_place ? rb : sb, in.data(), b, cudaMemcpyDefault));
    if (!in_place)
        GT_CUDA(cudaMemset(rb, 0x5a, b));
    T_MPI(
        MPIX_Acc_Allreduce(s, in_place ? MPI_IN_PLACE : sb, rb, (int)n, types[ti].dt, ops[oi], C));
    GT_CUDA(cudaStreamSynchronize(s));
    GT_CUDA(cudaMemcpy(got.data(), rb, b, cudaMemcpyDefault));
    first_diff(got.data(), want.data(), ti, n, what);
    same_everywhere(got.data(), b, what);
    if (sb)
        gt_free(sk, sb);
    gt_free(rk, rb);
}

/* ------------------------------------------------------------------ C */

static void others(cudaStream_t s)
{
    t_phase("C: Reduce to every root, Bcast, Allgather, Alltoall, Barrier");
    const size_t n = 1000;
    const int ti = 4; /* double */
    size_t b = 8 * n;
    std::vector<unsigned char> in(b), want(b), got(b);
    fill_host(ti, in.data(), n, t_rank + 3);
    expected(ti, 0, in.data(), n, want.data());
    double *sb = (double *)gt_alloc(GT_DEVICE, b), *rb = (double *)gt_alloc(GT_DEVICE, b);
    GT_CUDA(cudaMemcpy(sb, in.data(), b, cudaMemcpyHostToDevice));
    for (int root = 0; root < t_size; root++) {
        GT_CUDA(cudaMemset(rb, 0x5a, b));
        T_MPI(MPIX_Acc_Reduce(s, sb, t_rank == root ? rb : NULL, (int)n, MPI_DOUBLE, MPI_SUM, root,
                              C));
        GT_CUDA(cudaStreamSynchronize(s));
        if (t_rank == root) {
            GT_CUDA(cudaMemcpy(got.data(), rb, b, cudaMemcpyDeviceToHost));
            first_diff(got.data(), want.data(), ti, n, "Reduce double sum n=1000");
        }
        /* Bcast of this root's input */
        GT_CUDA(cudaMemcpy(rb, in.data(), b, cudaMemcpyHostToDevice));
        T_MPI(MPIX_Acc_Bcast(s, rb, (int)n, MPI_DOUBLE, root, C));
        GT_CUDA(cudaStreamSynchronize(s));
        GT_CUDA(cudaMemcpy(got.data(), rb, b, cudaMemcpyDeviceToHost));
        std::vector<unsigned char> rootin(b);
        fill_host(ti, rootin.data(), n, root + 3);
        T_CHECK(memcmp(got.data(), rootin.data(), b) == 0, "Bcast from %d: other bytes", root);
    }
    /* Allgather and Alltoall of ints, blocks of 777 */
    const int m = 777, p = t_size;
    std::vector<int> blk((size_t)m * p), res((size_t)m * p);
    for (int i = 0; i < m * p; i++)
        blk[i] = t_rank * 1000000 + i;
    int *ds = (int *)gt_alloc(GT_DEVICE, sizeof(int) * m * p),
        *dr = (int *)gt_alloc(GT_DEVICE, sizeof(int) * m * p);
    GT_CUDA(cudaMemcpy(ds, blk.data(), sizeof(int) * m * p, cudaMemcpyHostToDevice));
    T_MPI(MPIX_Acc_Allgather(s, ds, m, MPI_INT, dr, m, MPI_INT, C));
    GT_CUDA(cudaStreamSynchronize(s));
    GT_CUDA(cudaMemcpy(res.data(), dr, sizeof(int) * m * p, cudaMemcpyDeviceToHost));
    for (int q = 0; q < p; q++)
        for (int i = 0; i < m; i++)
            T_CHECK(res[q * m + i] == q * 1000000 + i, "Allgather block %d [%d] = %d", q, i,
                    res[q * m + i]);
    T_MPI(MPIX_Acc_Alltoall(s, ds, m, MPI_INT, dr, m, MPI_INT, C));
    /* in place: the receive buffer is its own send buffer */
    T_MPI(MPIX_Acc_Alltoall(s, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ds, m, MPI_INT, C));
    GT_CUDA(cudaStreamSynchronize(s));
    GT_CUDA(cudaMemcpy(res.data(), dr, sizeof(int) * m * p, cudaMemcpyDeviceToHost));
    std::vector<int> res2((size_t)m * p);
    GT_CUDA(cudaMemcpy(res2.data(), ds, sizeof(int) * m * p, cudaMemcpyDeviceToHost));
    for (int q = 0; q < p; q++)
        for (int i = 0; i < m; i++) {
            int w = q * 1000000 + t_rank * m + i;
            T_CHECK(res[q * m + i] == w, "Alltoall block %d [%d] = %d, want %d", q, i,
                    res[q * m + i], w);
            T_CHECK(res2[q * m + i] == w, "Alltoall in place block %d [%d] = %d, want %d", q, i,
                    res2[q * m + i], w);
        }
    T_MPI(MPIX_Acc_Barrier(s, C));
    GT_CUDA(cudaStreamSynchronize(s));
    gt_free(GT_DEVICE, sb);
    gt_free(GT_DEVICE, rb);
    gt_free(GT_DEVICE, ds);
    gt_free(GT_DEVICE, dr);
}

/* ------------------------------------------------------------------ D */

__global__ void produce_kernel(double *x, int n, int step)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = (double)(i % 13) + (double)step;
}

__global__ void accumulate_kernel(double *acc, const double *r, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc[i] += r[i];
}

static void stream_comm_loop(cudaStream_t s)
{
    t_phase("D: 300 steps of kernel -> MPI_Allreduce on a stream communicator -> kernel");
    MPI_Comm sc = gt_stream_comm(s);
    const int n = 4096, steps = 300;
    double *x, *r, *acc;
    GT_CUDA(cudaMalloc(&x, sizeof(double) * n));
    GT_CUDA(cudaMalloc(&r, sizeof(double) * n));
    GT_CUDA(cudaMalloc(&acc, sizeof(double) * n));
    GT_CUDA(cudaMemsetAsync(acc, 0, sizeof(double) * n, s));
    for (int k = 0; k < steps; k++) {
        produce_kernel<<<16, 256, 0, s>>>(x, n, k + t_rank);
        if (k % 2 == 0) {
            T_MPI(MPI_Allreduce(x, r, n, MPI_DOUBLE, MPI_SUM, sc));
        } else {
            MPI_Request rq;
            T_MPI(MPI_Iallreduce(x, r, n, MPI_DOUBLE, MPI_SUM, sc, &rq));
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE)); /* a stream wait */
        }
        accumulate_kernel<<<16, 256, 0, s>>>(acc, r, n);
    }
    GT_CUDA(cudaGetLastError());
    GT_CUDA(cudaStreamSynchronize(s));
    std::vector<double> h(n);
    GT_CUDA(cudaMemcpy(h.data(), acc, sizeof(double) * n, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        /* sum over k and ranks of (i % 13 + k + rank): exact in doubles */
        double w = 0;
        for (int k = 0; k < steps; k++)
            for (int q = 0; q < t_size; q++)
                w += (double)(i % 13) + (double)(k + q);
        T_CHECK(h[i] == w, "step loop: acc[%d] = %.17g, want %.17g", i, h[i], w);
    }
    T_MPI(MPI_Comm_free(&sc));
    GT_CUDA(cudaFree(x));
    GT_CUDA(cudaFree(r));
    GT_CUDA(cudaFree(acc));
}

/* ------------------------------------------------------------------ E */

static void nonblocking(cudaStream_t s)
{
    t_phase("E: MPIX_Acc_Iallreduce behind a sleeping kernel, MPI_Test / MPI_Wait");
    int in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = t_rank * 100 + i;
    int *d;
    GT_CUDA(cudaMalloc(&d, sizeof in * 2));
    GT_CUDA(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemset(d + 64, 0, sizeof in));
    gt_delay_kernel<<<1, 1, 0, s>>>(200ull * 1000 * 1000);
    MPI_Request rq;
    T_MPI(MPIX_Acc_Iallreduce(s, d, d + 64, 64, MPI_INT, MPI_SUM, C, &rq));
    int flag = 1;
    T_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
    T_CHECK(!flag, "MPI_Test: an Iallreduce behind a sleeping kernel is complete");
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    GT_CUDA(cudaMemcpy(out, d + 64, sizeof out, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) {
        int w = 0;
        for (int q = 0; q < t_size; q++)
            w += q * 100 + i;
        T_CHECK(out[i] == w, "Iallreduce at MPI_Wait: out[%d] = %d, want %d", i, out[i], w);
    }
    GT_CUDA(cudaFree(d));
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "collectives", 300);
    gt_warmup();
    {
        /* this file's kernels too: a lazily loaded module behind a blocked
         * stream deadlocks with the progress thread's CUDA calls (seen:
         * UCX's cuCtxSetFlags waiting for the context lock held by the
         * launch; doc/gpu-testing.md) */
        double *w;
        GT_CUDA(cudaMalloc(&w, 2 * sizeof(double)));
        produce_kernel<<<1, 32>>>(w, 1, 0);
        accumulate_kernel<<<1, 32>>>(w + 1, w, 1);
        GT_CUDA(cudaGetLastError());
        GT_CUDA(cudaDeviceSynchronize());
        GT_CUDA(cudaFree(w));
    }
    int quick = (int)gt_opt_long("--quick", 0);
    /* --sx: the communicator asserts no wildcards, so messages between
     * processes of a node take the stream-executed path */
    MPI_Info ci;
    T_MPI(MPI_Info_create(&ci));
    if (gt_opt_long("--sx", 0)) {
        T_MPI(MPI_Info_set(ci, "mpi_assert_no_any_source", "true"));
        T_MPI(MPI_Info_set(ci, "mpi_assert_no_any_tag", "true"));
    }
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, ci, &C));
    T_MPI(MPI_Info_free(&ci));
    T_MPI(MPI_Comm_set_errhandler(C, MPI_ERRORS_RETURN));
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    t_phase("A: Allreduce of device buffers, every type and operation");
    const size_t counts[] = {1, 7, 1000, 70001};
    for (int ti = 0; ti < 5; ti++)
        for (int oi = 0; oi < 4; oi++)
            if (!quick || ti == 0 || ti == 4)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                    for (int ip = 0; ip < 2; ip++)
                        allreduce_case(s, ti, oi, counts[ci], GT_DEVICE, GT_DEVICE, ip);

    t_phase("B: pinned, managed, pageable -> device");
    for (int oi = 0; oi < 4; oi++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            allreduce_case(s, 4, oi, counts[ci], GT_PINNED, GT_PINNED, 0);
            allreduce_case(s, 4, oi, counts[ci], GT_MANAGED, GT_MANAGED, 0);
            allreduce_case(s, 3, oi, counts[ci], GT_PAGEABLE, GT_DEVICE, 0);
            allreduce_case(s, 0, oi, counts[ci], GT_DEVICE, GT_PINNED, 0);
        }

    others(s);
    stream_comm_loop(s);
    nonblocking(s);

    GT_CUDA(cudaStreamDestroy(s));
    T_MPI(MPI_Comm_free(&C));
    return gt_finish();
}
