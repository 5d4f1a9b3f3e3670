/*
 * derived.cu - non-contiguous datatypes on a CUDA stream (issue 20 item 1):
 * the library packs device buffers with its CUDA pack kernel on the stream
 * and unpacks behind the stream wait (or on the host for host waits).
 *
 * Types: a matrix column (MPI_Type_vector), a face of a 3-D block
 * (MPI_Type_create_subarray), irregular blocks (MPI_Type_indexed), a
 * struct of a double and an int with gaps, resized (MPI_Type_create_struct
 * + _resized), a vector of that struct. Each case: the sender's buffer holds
 * a byte pattern, the receiver's another; after the exchange the receiver's
 * buffer must equal, byte for byte, its old pattern with MPI_Unpack of the
 * MPI library's MPI_Pack of the sender's pattern written over it (host
 * memory, the MPI library's own code: the reference).
 *
 *   A  ring on the stream, MPIX_Acc_Isend/Irecv/Waitall, device buffers,
 *      every type, counts 1 and 5; then 200 iterations of one type with a
 *      kernel changing the data between them and no host synchronization
 *      (the stream's order: the last iteration's data checked);
 *   B  MPI_Wait on the host (the progress thread unpacks);
 *   C  a short message (count - 1 elements into count): only those are
 *      written, MPI_Get_count says count - 1;
 *   D  managed and pinned host buffers;
 *   E  MPI_Sendrecv and MPI_Sendrecv_replace on a stream communicator of
 *      the stream, a short Sendrecv (4 into 5, its status), and 200
 *      Sendrecv of a column with a kernel changing it between them and no
 *      host synchronization (with --sx the send and receive steps pack and
 *      unpack themselves: MPIX_ACC_SX_FUSE_PACK);
 *   F  a 20000-row column by MPI_Sendrecv (with --sx a bulk message: the
 *      pack and unpack kernels around the multi-block steps).
 *
 * Options: --timeout=S, --sx (the communicator asserts no wildcards: the
 * stream-executed path carries the packed messages)
 */
#include "gpu_common.h"

#include <vector>

#define NT 5
static MPI_Datatype types[NT];
static const char *tname[NT] = {"vector column", "subarray face", "indexed", "struct resized",
                                "vector of struct"};
static MPI_Aint span[NT]; /* bytes a count of 5 covers (generously) */

static void make_types(void)
{
    /* a column of a 64 x 33 matrix of doubles */
    T_MPI(MPI_Type_vector(64, 1, 33, MPI_DOUBLE, &types[0]));
    /* the x = 1 face of a 6 x 7 x 9 block of floats */
    int sz[3] = {6, 7, 9}, sub[3] = {1, 7, 9}, st[3] = {1, 0, 0};
    T_MPI(MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_FLOAT, &types[1]));
    int bl[4] = {3, 1, 7, 2}, dis[4] = {0, 5, 9, 30};
    T_MPI(MPI_Type_indexed(4, bl, dis, MPI_INT, &types[2]));
    int sbl[2] = {1, 1};
    MPI_Aint sdis[2] = {0, 12};
    MPI_Datatype sty[2] = {MPI_DOUBLE, MPI_INT}, s0;
    T_MPI(MPI_Type_create_struct(2, sbl, sdis, sty, &s0));
    T_MPI(MPI_Type_create_resized(s0, 0, 24, &types[3]));
    T_MPI(MPI_Type_free(&s0));
    T_MPI(MPI_Type_vector(3, 2, 5, types[3], &types[4]));
    for (int i = 0; i < NT; i++) {
        T_MPI(MPI_Type_commit(&types[i]));
        MPI_Aint lb, ext, tlb, text;
        T_MPI(MPI_Type_get_extent(types[i], &lb, &ext));
        T_MPI(MPI_Type_get_true_extent(types[i], &tlb, &text));
        span[i] = ext * 5 + text + 64;
    }
}

static void pattern(std::vector<unsigned char> &v, unsigned seed)
{
    for (size_t i = 0; i < v.size(); i++)
        v[i] = (unsigned char)((i * 131u + seed * 7919u) >> 3);
}

/* what the receiver's buffer must hold: its own pattern with the sender's
 * packed elements unpacked over it (the MPI library's MPI_Pack/Unpack) */
static std::vector<unsigned char> expect(int ti, int count, int recv_count, unsigned sseed,
                                         unsigned rseed)
{
    std::vector<unsigned char> snd(span[ti]), out(span[ti]);
    pattern(snd, sseed);
    pattern(out, rseed);
    int psz = 0, pos = 0;
    T_MPI(MPI_Pack_size(count, types[ti], MPI_COMM_WORLD, &psz));
    std::vector<unsigned char> packed(psz + 1);
    T_MPI(MPI_Pack(snd.data(), count, types[ti], packed.data(), psz, &pos, MPI_COMM_WORLD));
    int upos = 0;
    (void)recv_count;
    T_MPI(MPI_Unpack(packed.data(), pos, &upos, out.data(), count, types[ti], MPI_COMM_WORLD));
    return out;
}

static void check(const void *buf, gt_mem_t k, const std::vector<unsigned char> &want,
                  const char *what)
{
    std::vector<unsigned char> got(want.size());
    GT_CUDA(cudaMemcpy(got.data(), buf, want.size(), cudaMemcpyDefault));
    (void)k;
    for (size_t i = 0; i < want.size(); i++)
        if (got[i] != want[i])
            t_fail("%s: byte %zu is %u, want %u", what, i, got[i], want[i]);
}

/* one exchange of count elements of type ti around the ring */
static void ring_case(cudaStream_t s, MPI_Comm comm, int ti, int count, gt_mem_t k, int host_wait,
                      int scount)
{
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    unsigned sseed = 100 + t_rank * 10 + ti, rseed = 900 + t_rank;
    unsigned pseed = 100 + prev * 10 + ti;
    std::vector<unsigned char> hs(span[ti]), hr(span[ti]);
    pattern(hs, sseed);
    pattern(hr, rseed);
    unsigned char *sb = (unsigned char *)gt_alloc(k, span[ti]),
                  *rb = (unsigned char *)gt_alloc(k, span[ti]);
    GT_CUDA(cudaMemcpy(sb, hs.data(), span[ti], cudaMemcpyDefault));
    GT_CUDA(cudaMemcpy(rb, hr.data(), span[ti], cudaMemcpyDefault));
    MPI_Request rq[2];
    MPI_Status st[2];
    T_MPI(MPIX_Acc_Irecv(s, rb, count, types[ti], prev, 7, comm, &rq[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, scount, types[ti], next, 7, comm, &rq[1]));
    if (host_wait) {
        T_MPI(MPI_Waitall(2, rq, st));
    } else {
        T_MPI(MPIX_Acc_Waitall(s, 2, rq, st));
        GT_CUDA(cudaStreamSynchronize(s));
    }
    char what[160];
    snprintf(what, sizeof what, "%s x %d (%d sent) %s, %s wait", tname[ti], count, scount,
             gt_mem_name[k], host_wait ? "host" : "stream");
    check(rb, k, expect(ti, scount, count, pseed, rseed), what);
    int got = -1;
    T_MPI(MPI_Get_count(&st[0], types[ti], &got));
    T_CHECK(got == scount, "%s: MPI_Get_count %d, want %d", what, got, scount);
    gt_free(k, sb);
    gt_free(k, rb);
}

__global__ void bump_kernel(unsigned char *b, size_t n, int it)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        b[i] = (unsigned char)(b[i] + it);
}

/* 200 exchanges of 5 columns around the ring with a kernel changing the
 * data between them and no host synchronization (the stream's order: the
 * last iteration's data checked): MPIX_Acc_Irecv/Isend/Waitall, or
 * (sendrecv) MPI_Sendrecv on a stream communicator */
static void iterations_case(cudaStream_t s, MPI_Comm comm, int sendrecv)
{
    int ti = 0, count = 5, next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    std::vector<unsigned char> hs(span[ti]), hr(span[ti]);
    pattern(hs, 100 + t_rank * 10);
    pattern(hr, 900 + t_rank);
    unsigned char *sb = (unsigned char *)gt_alloc(GT_DEVICE, span[ti]),
                  *rb = (unsigned char *)gt_alloc(GT_DEVICE, span[ti]);
    GT_CUDA(cudaMemcpy(sb, hs.data(), span[ti], cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemcpy(rb, hr.data(), span[ti], cudaMemcpyHostToDevice));
    const int iters = 200;
    for (int it = 1; it <= iters; it++) {
        bump_kernel<<<8, 256, 0, s>>>(sb, span[ti], 1); /* the data changes every iteration */
        if (sendrecv) {
            T_MPI(MPI_Sendrecv(sb, count, types[ti], next, 12, rb, count, types[ti], prev, 12, comm,
                               MPI_STATUS_IGNORE));
        } else {
            MPI_Request rq[2];
            T_MPI(MPIX_Acc_Irecv(s, rb, count, types[ti], prev, 8, comm, &rq[0]));
            T_MPI(MPIX_Acc_Isend(s, sb, count, types[ti], next, 8, comm, &rq[1]));
            T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
        }
    }
    GT_CUDA(cudaStreamSynchronize(s));
    /* the sender's pattern bumped iters times, packed and unpacked over
     * the receiver's */
    std::vector<unsigned char> snd(span[ti]);
    pattern(snd, 100 + prev * 10);
    for (auto &b : snd)
        b = (unsigned char)(b + iters);
    std::vector<unsigned char> want(span[ti]);
    pattern(want, 900 + t_rank);
    int psz = 0, pos = 0, upos = 0;
    T_MPI(MPI_Pack_size(count, types[ti], MPI_COMM_WORLD, &psz));
    std::vector<unsigned char> packed(psz + 1);
    T_MPI(MPI_Pack(snd.data(), count, types[ti], packed.data(), psz, &pos, MPI_COMM_WORLD));
    T_MPI(MPI_Unpack(packed.data(), pos, &upos, want.data(), count, types[ti], MPI_COMM_WORLD));
    check(rb, GT_DEVICE, want,
          sendrecv ? "MPI_Sendrecv, 200 iterations" : "200 iterations, no host synchronization");
    gt_free(GT_DEVICE, sb);
    gt_free(GT_DEVICE, rb);
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "derived", 240);
    gt_warmup();
    {
        unsigned char *w;
        GT_CUDA(cudaMalloc(&w, 64));
        bump_kernel<<<1, 32>>>(w, 64, 1);
        GT_CUDA(cudaDeviceSynchronize());
        GT_CUDA(cudaFree(w));
    }
    make_types();
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MPI_Comm comm;
    MPI_Info ci;
    T_MPI(MPI_Info_create(&ci));
    if (gt_opt_long("--sx", 0)) { /* no wildcards: the stream-executed path */
        T_MPI(MPI_Info_set(ci, "mpi_assert_no_any_source", "true"));
        T_MPI(MPI_Info_set(ci, "mpi_assert_no_any_tag", "true"));
    }
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, ci, &comm));
    T_MPI(MPI_Info_free(&ci));
    T_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));

    t_phase("A: every type on the stream, device buffers");
    for (int ti = 0; ti < NT; ti++)
        for (int count = 1; count <= 5; count += 4)
            ring_case(s, comm, ti, count, GT_DEVICE, 0, count);

    t_phase("A: 200 iterations, no host synchronization");
    iterations_case(s, comm, 0);

    t_phase("B: host waits");
    for (int ti = 0; ti < NT; ti++)
        ring_case(s, comm, ti, 5, GT_DEVICE, 1, 5);

    t_phase("C: short messages");
    for (int ti = 0; ti < NT; ti++) {
        ring_case(s, comm, ti, 5, GT_DEVICE, 0, 4);
        ring_case(s, comm, ti, 5, GT_DEVICE, 1, 4);
    }

    t_phase("D: managed and pinned buffers");
    for (int ti = 0; ti < NT; ti++) {
        ring_case(s, comm, ti, 5, GT_MANAGED, 0, 5);
        ring_case(s, comm, ti, 5, GT_PINNED, 0, 5);
    }

    t_phase("E: MPI_Sendrecv and MPI_Sendrecv_replace on a stream communicator");
    {
        /* with --sx the stream communicator asserts no wildcards too: its
         * messages take the stream-executed path, whose steps pack and
         * unpack the buffers themselves */
        MPI_Comm sc = t_stream_comm_dup((MPIX_Acc_stream)s, (int)gt_opt_long("--sx", 0));
        int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
        for (int ti = 0; ti < NT; ti++) {
            std::vector<unsigned char> hs(span[ti]), hr(span[ti]);
            pattern(hs, 100 + t_rank * 10 + ti);
            pattern(hr, 900 + t_rank);
            unsigned char *sb = (unsigned char *)gt_alloc(GT_DEVICE, span[ti]),
                          *rb = (unsigned char *)gt_alloc(GT_DEVICE, span[ti]);
            GT_CUDA(cudaMemcpy(sb, hs.data(), span[ti], cudaMemcpyHostToDevice));
            GT_CUDA(cudaMemcpy(rb, hr.data(), span[ti], cudaMemcpyHostToDevice));
            T_MPI(MPI_Sendrecv(sb, 5, types[ti], next, 9, rb, 5, types[ti], prev, 9, sc,
                               MPI_STATUS_IGNORE));
            GT_CUDA(cudaStreamSynchronize(s));
            char what[96];
            snprintf(what, sizeof what, "MPI_Sendrecv %s", tname[ti]);
            check(rb, GT_DEVICE, expect(ti, 5, 5, 100 + prev * 10 + ti, 900 + t_rank), what);
            /* replace: my own buffer's elements go out, the neighbour's come in */
            T_MPI(
                MPI_Sendrecv_replace(sb, 5, types[ti], next, 10, prev, 10, sc, MPI_STATUS_IGNORE));
            GT_CUDA(cudaStreamSynchronize(s));
            snprintf(what, sizeof what, "MPI_Sendrecv_replace %s", tname[ti]);
            check(sb, GT_DEVICE, expect(ti, 5, 5, 100 + prev * 10 + ti, 100 + t_rank * 10 + ti),
                  what);
            /* short: 4 elements into room for 5, with a status (on the SX
             * path the receive step unpacks the 4 itself) */
            GT_CUDA(cudaMemcpy(sb, hs.data(), span[ti], cudaMemcpyHostToDevice));
            GT_CUDA(cudaMemcpy(rb, hr.data(), span[ti], cudaMemcpyHostToDevice));
            MPI_Status st;
            T_MPI(MPI_Sendrecv(sb, 4, types[ti], next, 11, rb, 5, types[ti], prev, 11, sc, &st));
            GT_CUDA(cudaStreamSynchronize(s));
            snprintf(what, sizeof what, "MPI_Sendrecv %s, 4 into 5", tname[ti]);
            check(rb, GT_DEVICE, expect(ti, 4, 5, 100 + prev * 10 + ti, 900 + t_rank), what);
            int got = -1;
            T_MPI(MPI_Get_count(&st, types[ti], &got));
            T_CHECK(got == 4 && st.MPI_SOURCE == prev && st.MPI_TAG == 11,
                    "%s: status count %d source %d tag %d, want 4, %d, 11", what, got,
                    st.MPI_SOURCE, st.MPI_TAG, prev);
            gt_free(GT_DEVICE, sb);
            gt_free(GT_DEVICE, rb);
        }
        /* the textbook loop: 200 MPI_Sendrecv of a column */
        iterations_case(s, sc, 1);
        /* F: a long column (160000 packed bytes: a bulk message with --sx,
         * packed by the pack kernel ahead of the multi-block step, and
         * unpacked by the unpack kernel behind the receive step) */
        t_phase("F: a 20000-row column by MPI_Sendrecv");
        {
            const int rows = 20000, w = 3;
            MPI_Datatype lc;
            T_MPI(MPI_Type_vector(rows, 1, w, MPI_DOUBLE, &lc));
            T_MPI(MPI_Type_commit(&lc));
            std::vector<double> hs((size_t)rows * w), hr((size_t)rows * w), got((size_t)rows * w);
            for (size_t i = 0; i < hs.size(); i++) {
                hs[i] = t_rank * 1e6 + (double)i;
                hr[i] = -1.0 - (double)i;
            }
            size_t bytes = hs.size() * sizeof(double);
            double *sb = (double *)gt_alloc(GT_DEVICE, bytes),
                   *rb = (double *)gt_alloc(GT_DEVICE, bytes);
            GT_CUDA(cudaMemcpy(sb, hs.data(), bytes, cudaMemcpyHostToDevice));
            GT_CUDA(cudaMemcpy(rb, hr.data(), bytes, cudaMemcpyHostToDevice));
            MPI_Status st;
            for (int it = 0; it < 3; it++)
                T_MPI(MPI_Sendrecv(sb, 1, lc, next, 13, rb, 1, lc, prev, 13, sc, &st));
            GT_CUDA(cudaStreamSynchronize(s));
            GT_CUDA(cudaMemcpy(got.data(), rb, bytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < got.size(); i++) {
                double want = i % w == 0 ? prev * 1e6 + (double)i : -1.0 - (double)i;
                if (got[i] != want)
                    t_fail("F: element %zu is %g, want %g", i, got[i], want);
            }
            int cnt = -1;
            T_MPI(MPI_Get_count(&st, lc, &cnt));
            T_CHECK(cnt == 1, "F: MPI_Get_count %d, want 1", cnt);
            gt_free(GT_DEVICE, sb);
            gt_free(GT_DEVICE, rb);
            T_MPI(MPI_Type_free(&lc));
        }
        T_MPI(MPI_Comm_free(&sc));
    }

    GT_CUDA(cudaStreamDestroy(s));
    for (int i = 0; i < NT; i++)
        T_MPI(MPI_Type_free(&types[i]));
    T_MPI(MPI_Comm_free(&comm));
    return gt_finish();
}
