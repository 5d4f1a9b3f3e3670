/*
 * graph_p2p.cu - stream-ordered sends, receives and waits captured into CUDA
 * graphs and launched many times (issue 21; interpose/graph.c's counter
 * protocol: a captured send or receive is a fire node -- a kernel that
 * increments a counter in mapped host memory, which the progress thread
 * watches and makes that launch's operation from -- and a captured stream
 * wait is a wait node that takes a ticket and holds the stream until the
 * progress thread has published that launch's completion).
 *
 * Every launch moves different data: a device counter bumped by the graph's
 * first kernel is the pattern's iteration, so a launch that received an
 * earlier launch's bytes (or none) fails the check kernel.
 *
 *   A: ring, global capture mode: bump -> fill(send buffer, launch k) ->
 *      MPIX_Acc_Irecv(prev) -> MPIX_Acc_Isend(next) -> MPIX_Acc_Waitall
 *      (statuses) -> check(receive buffer, launch k). Launched --launches
 *      times (10 000), the stream synchronized every 1000 launches, every
 *      launch's data checked on the device; the launch counter, the
 *      statuses of the last launch (source, tag, count) checked on the host.
 *   B: ranks replay different graphs (thread-local mode): even ranks
 *      capture MPIX_Acc_Send then MPIX_Acc_Recv, odd ranks MPIX_Acc_Irecv,
 *      MPIX_Acc_Isend and two MPIX_Acc_Wait in another order; 200 launches.
 *   C: a graph and plain enqueues on the same stream (another tag), and the
 *      same graph launched on a second stream (relaxed mode): interleaved,
 *      all data checked.
 *   M: a graph and plain operations on one channel (communicator, peer,
 *      tag) and stream, on a communicator with mpix_acc_match=dynamic;
 *      300 launches, each followed by a plain exchange on the same tag.
 *   U: cudaGraphExecUpdate: A's step captured again on other buffers and a
 *      tag of its own; the executable graph updated and launched 50 times;
 *      the new buffers checked, the old ones untouched.
 *   S: a stream communicator's MPI_Irecv/MPI_Isend/MPI_Waitall and
 *      MPI_Sendrecv captured (global mode); 100 launches, data checked.
 *   K: MPIX_Acc_Allreduce (MPI_INT sum, 1000 elements), MPIX_Acc_Bcast and
 *      MPIX_Acc_Barrier captured (global mode; one plain call of each
 *      first: the stream's scratch exists before the capture); 200
 *      launches, every launch's results checked on the device. Then
 *      MPIX_Acc_Iallreduce and MPIX_Acc_Ibcast with one MPIX_Acc_Waitall
 *      captured, 100 launches checked.
 *   T: non-contiguous datatypes captured (pack and unpack kernel nodes around
 *      the fire and wait nodes): a ring of MPIX_Acc_Irecv of 2 elements and
 *      MPIX_Acc_Isend of 1 element of an MPI_Type_vector (16 blocks of 64
 *      bytes, stride 128) -- one plain exchange first, which is the set-up --,
 *      the type freed after the capture; 500 launches (at most --launches),
 *      on device buffers (pack and unpack kernel nodes), then 200 on pinned
 *      host buffers (host nodes); every launch's blocks
 *      checked on the device, the gaps and the second element untouched, the
 *      last status's counts (1 element, 1024 bytes); a plain exchange after.
 *   E: errors: a host MPI_Wait on a captured request returns
 *      MPI_ERR_REQUEST at once; an MPIX_Acc_Isend of a vector datatype never
 *      used outside a capture (its set-up would happen inside it) returns
 *      MPI_ERR_UNSUPPORTED_OPERATION and invalidates the capture
 *      (cudaStreamEndCapture fails); the stream works on afterwards.
 *
 * Options: --launches=N (A's count), --timeout=S
 */
#include "gpu_common.h"

/* the graph's launch counter */
__global__ void bump_kernel(unsigned long long *k)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *k += 1;
}

/* buf = pattern of (src, launch *k, tag) */
__global__ void kfill_kernel(uint8_t *buf, size_t n, int src, int tag, const unsigned long long *k)
{
    uint64_t seed = gt_seed(src, (long)*k, tag);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] = t_pat(seed, i);
}

__global__ void kcheck_kernel(const uint8_t *buf, size_t n, int src, int tag,
                              const unsigned long long *k, gt_err_t *err)
{
    uint64_t seed = gt_seed(src, (long)*k, tag);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint8_t e = t_pat(seed, i), g = buf[i];
        if (g != e) {
            atomicAdd(&err->count, 1ull);
            if (atomicCAS(&err->recorded, 0u, 1u) == 0u) {
                err->first_idx = i;
                err->first_iter = (long long)*k;
                err->expected = e;
                err->got = g;
            }
        }
    }
}

/* K: this rank's contribution to launch *k's Allreduce, and the root's
 * Bcast data */
__global__ void cfill_kernel(int *a, int *b, int n, int rank, int root, const unsigned long long *k)
{
    int kk = (int)*k;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a[i] = rank * 1000 + i + kk;
        if (rank == root)
            b[i] = 7 * kk + i;
    }
}

__device__ static void cbad(gt_err_t *err, unsigned long long i, long long it, int want, int got)
{
    atomicAdd(&err->count, 1ull);
    if (atomicCAS(&err->recorded, 0u, 1u) == 0u) {
        err->first_idx = i;
        err->first_iter = it;
        err->expected = (unsigned)want;
        err->got = (unsigned)got;
    }
}

/* K: launch *k's Allreduce sum over p ranks and Bcast */
__global__ void ccheck_kernel(const int *r, const int *b, int n, int p, const unsigned long long *k,
                              gt_err_t *err)
{
    int kk = (int)*k;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int want = 1000 * p * (p - 1) / 2 + p * (i + kk);
        if (r[i] != want)
            cbad(err, (unsigned long long)i, kk, want, r[i]);
        if (b[i] != 7 * kk + i)
            cbad(err, (unsigned long long)(n + i), kk, 7 * kk + i, b[i]);
    }
}

/* T: the receive buffer of 2 elements of the vector type (16 blocks of 64
 * bytes, stride 128): element 0's blocks hold launch *k's pattern of the
 * sender's buffer (the same offsets), everything else `keep` */
__global__ void vcheck_kernel(const uint8_t *buf, size_t n, size_t ext, int src, int tag,
                              uint8_t keep, const unsigned long long *k, gt_err_t *err)
{
    uint64_t seed = gt_seed(src, (long)*k, tag);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint8_t e = i < ext && i % 128 < 64 ? t_pat(seed, i) : keep, g = buf[i];
        if (g != e)
            cbad(err, (unsigned long long)i, (long long)*k, e, g);
    }
}

static void kfill(uint8_t *buf, size_t n, int src, int tag, const unsigned long long *k,
                  cudaStream_t s)
{
    kfill_kernel<<<gt_blocks(n), 256, 0, s>>>(buf, n, src, tag, k);
    GT_CUDA(cudaGetLastError());
}

static void kcheck(gt_checker_t *c, const uint8_t *buf, size_t n, int src, int tag,
                   const unsigned long long *k, cudaStream_t s)
{
    kcheck_kernel<<<gt_blocks(n), 256, 0, s>>>(buf, n, src, tag, k, c->dev);
    GT_CUDA(cudaGetLastError());
}

static unsigned long long read_counter(const unsigned long long *k)
{
    unsigned long long v = 0;
    GT_CUDA(cudaMemcpy(&v, k, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

static cudaGraphExec_t end_capture(cudaStream_t s, cudaGraph_t *g, const char *what)
{
    cudaGraphExec_t ge = NULL;
    cudaError_t ce = cudaStreamEndCapture(s, g);
    T_CHECK(ce == cudaSuccess && *g != NULL, "%s: cudaStreamEndCapture returned %s", what,
            cudaGetErrorName(ce));
    GT_CUDA(cudaGraphInstantiate(&ge, *g, 0));
    return ge;
}

/* A: the ring step captured on s; statuses into st (the graph's for its life) */
static void capture_ring(cudaStream_t s, cudaStreamCaptureMode mode, MPI_Comm comm, uint8_t *sbuf,
                         uint8_t *rbuf, size_t n, int tag, unsigned long long *k, gt_checker_t *chk,
                         MPI_Status *st)
{
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    MPI_Request req[2];
    GT_CUDA(cudaStreamBeginCapture(s, mode));
    bump_kernel<<<1, 1, 0, s>>>(k);
    kfill(sbuf, n, t_rank, tag, k, s);
    T_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, comm, &req[0]));
    T_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, comm, &req[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, req, st));
    T_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
            "a captured Waitall left its requests");
    kcheck(chk, rbuf, n, prev, tag, k, s);
}

/* T: a ring of MPIX_Acc_Irecv of 2 and MPIX_Acc_Isend of 1 element of an
 * MPI_Type_vector (16 blocks of 64 bytes, stride 128) on sb/rb (>= 2
 * extents), captured after one plain exchange (the set-up), the type freed
 * after the capture, nt launches with every launch's blocks, gaps and
 * second element checked on the device, the last status's counts, then a
 * plain exchange of a new type of the same shape */
static void vector_ring_graph(cudaStream_t s, unsigned long long *k, gt_checker_t *chk, uint8_t *sb,
                              uint8_t *rb, int nt, int tag, const char *kind)
{
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    MPI_Datatype vec; /* 1984 bytes of extent */
    T_MPI(MPI_Type_vector(16, 64, 128, MPI_BYTE, &vec));
    T_MPI(MPI_Type_commit(&vec));
    const size_t ext = 15 * 128 + 64, rn = 2 * ext;
    const uint8_t keep = 0xa5;
    static MPI_Status st[2];
    GT_CUDA(cudaMemset(rb, keep, rn));
    MPI_Request req[2];
    T_MPI(MPIX_Acc_Irecv(s, rb, 2, vec, prev, tag, MPI_COMM_WORLD, &req[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, 1, vec, next, tag, MPI_COMM_WORLD, &req[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
    GT_CUDA(cudaStreamSynchronize(s));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    unsigned long long k0 = read_counter(k);
    cudaGraph_t g;
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    bump_kernel<<<1, 1, 0, s>>>(k);
    kfill(sb, ext, t_rank, tag, k, s);
    T_MPI(MPIX_Acc_Irecv(s, rb, 2, vec, prev, tag, MPI_COMM_WORLD, &req[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, 1, vec, next, tag, MPI_COMM_WORLD, &req[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, req, st));
    vcheck_kernel<<<4, 256, 0, s>>>(rb, rn, ext, prev, tag, keep, k, chk->dev);
    GT_CUDA(cudaGetLastError());
    cudaGraphExec_t ge = end_capture(s, &g, "T");
    T_MPI(MPI_Type_free(&vec)); /* the graph keeps its layout */
    for (int i = 0; i < nt; i++) {
        GT_CUDA(cudaGraphLaunch(ge, s));
        if ((i + 1) % 100 == 0)
            GT_CUDA(cudaStreamSynchronize(s));
    }
    GT_CUDA(cudaStreamSynchronize(s));
    gt_checker_verify(chk, "T");
    T_CHECK(read_counter(k) == k0 + (unsigned long long)nt, "T (%s): %llu launches ran", kind,
            read_counter(k) - k0);
    MPI_Datatype vec2; /* the same shape: MPI_Get_count of the status */
    T_MPI(MPI_Type_vector(16, 64, 128, MPI_BYTE, &vec2));
    T_MPI(MPI_Type_commit(&vec2));
    int ce = -1, cb = -1;
    T_MPI(MPI_Get_count(&st[0], vec2, &ce));
    T_MPI(MPI_Get_count(&st[0], MPI_BYTE, &cb));
    T_CHECK(ce == 1 && cb == 1024 && st[0].MPI_SOURCE == prev && st[0].MPI_TAG == tag,
            "T (%s): the last launch's receive status: %d elements, %d bytes, source %d, tag %d",
            kind, ce, cb, st[0].MPI_SOURCE, st[0].MPI_TAG);
    GT_CUDA(cudaGraphExecDestroy(ge));
    GT_CUDA(cudaGraphDestroy(g));
    /* a plain exchange of the type after the graph is gone */
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    kfill(sb, ext, t_rank, tag, k, s);
    T_MPI(MPIX_Acc_Irecv(s, rb, 2, vec2, prev, tag, MPI_COMM_WORLD, &req[0]));
    T_MPI(MPIX_Acc_Isend(s, sb, 1, vec2, next, tag, MPI_COMM_WORLD, &req[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
    vcheck_kernel<<<4, 256, 0, s>>>(rb, rn, ext, prev, tag, keep, k, chk->dev);
    GT_CUDA(cudaStreamSynchronize(s));
    gt_checker_verify(chk, "T, the plain exchange after");
    T_MPI(MPI_Type_free(&vec2));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0)
        printf("[graph_p2p] ok T: %d launches of a captured vector-type ring on %s buffers, every "
               "launch checked (blocks, gaps, the second element), status counts\n",
               nt, kind);
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "graph_p2p", 300);
    gt_warmup();
    const long launches = gt_opt_long("--launches", 10000);
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    cudaStream_t s, s2;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    const size_t n = 65536;
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
    uint8_t *sbuf2 = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf2 = (uint8_t *)gt_alloc(GT_DEVICE, n);
    unsigned long long *k;
    GT_CUDA(cudaMalloc(&k, sizeof(*k)));
    GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
    static MPI_Status st[2], st2[2];
    char what[160];

    /* ---- A ---- */
    t_phase("A: a captured ring launched many times");
    {
        cudaGraph_t g;
        capture_ring(s, cudaStreamCaptureModeGlobal, MPI_COMM_WORLD, sbuf, rbuf, n, 11, k, &chk,
                     st);
        cudaGraphExec_t ge = end_capture(s, &g, "A");
        double t0 = MPI_Wtime();
        for (long i = 0; i < launches; i++) {
            GT_CUDA(cudaGraphLaunch(ge, s));
            if ((i + 1) % 1000 == 0)
                GT_CUDA(cudaStreamSynchronize(s));
        }
        GT_CUDA(cudaStreamSynchronize(s));
        double us = (MPI_Wtime() - t0) * 1e6 / (double)launches;
        gt_checker_verify(&chk, "A");
        unsigned long long got = read_counter(k);
        T_CHECK(got == (unsigned long long)launches, "A: %llu launches ran, %ld expected", got,
                launches);
        int cnt = -1;
        MPI_Get_count(&st[0], MPI_BYTE, &cnt);
        T_CHECK(st[0].MPI_SOURCE == prev && st[0].MPI_TAG == 11 && cnt == (int)n &&
                    st[0].MPI_ERROR == MPI_SUCCESS,
                "A: receive status %s, expected source %d tag 11 count %zu", gt_status_str(&st[0]),
                prev, n);
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok A: %ld launches of a captured ring (%zu bytes), every one "
                   "checked: %.1f us per launch\n",
                   launches, n, us);
    }

    /* ---- B ---- */
    t_phase("B: different graphs per rank");
    {
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        const int tag = 21, nl = 200;
        int even = t_rank % 2 == 0;
        /* with an odd number of ranks the last rank sends to rank 0 (even):
         * both its neighbours' orders still pair up, Send first on evens */
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        bump_kernel<<<1, 1, 0, s>>>(k);
        kfill(sbuf, n, t_rank, tag, k, s);
        if (even) {
            T_MPI(MPIX_Acc_Send(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD));
            T_MPI(MPIX_Acc_Recv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
        } else {
            MPI_Request r, q;
            T_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &r));
            T_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &q));
            T_MPI(MPIX_Acc_Wait(s, &q, MPI_STATUS_IGNORE));
            T_MPI(MPIX_Acc_Wait(s, &r, MPI_STATUS_IGNORE));
        }
        kcheck(&chk, rbuf, n, prev, tag, k, s);
        cudaGraph_t g;
        cudaGraphExec_t ge = end_capture(s, &g, "B");
        for (int i = 0; i < nl; i++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "B");
        T_CHECK(read_counter(k) == (unsigned long long)nl, "B: %llu launches ran", read_counter(k));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok B: %d launches, %s graphs on even and odd ranks\n", nl,
                   "Send/Recv and Irecv/Isend/Wait");
    }

    /* ---- C ---- */
    t_phase("C: a graph beside plain enqueues, and on a second stream");
    {
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        cudaGraph_t g;
        capture_ring(s, cudaStreamCaptureModeRelaxed, MPI_COMM_WORLD, sbuf, rbuf, n, 31, k, &chk,
                     st);
        cudaGraphExec_t ge = end_capture(s, &g, "C");
        const int nl = 200;
        for (int i = 0; i < nl; i++) {
            if (i % 3 == 2) { /* on s2, after everything before on s, and before the rest */
                GT_CUDA(cudaStreamSynchronize(s));
                GT_CUDA(cudaGraphLaunch(ge, s2));
                GT_CUDA(cudaStreamSynchronize(s2));
            } else {
                GT_CUDA(cudaGraphLaunch(ge, s));
            }
            /* a plain ring exchange on the same stream, another tag */
            gt_ring_step(s, s, s, sbuf2, rbuf2, 4096, 32, i, &chk);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        GT_CUDA(cudaStreamSynchronize(s2));
        gt_checker_verify(&chk, "C");
        T_CHECK(read_counter(k) == (unsigned long long)nl, "C: %llu launches ran", read_counter(k));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok C: %d launches (every third on a second stream), each "
                   "followed by a plain exchange on the stream\n",
                   nl);
    }

    /* ---- M ---- */
    t_phase("M: a graph and plain operations on one channel (dynamic matching)");
    {
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        MPI_Info info;
        MPI_Comm dc;
        T_MPI(MPI_Info_create(&info));
        T_MPI(MPI_Info_set(info, "mpix_acc_match", "dynamic"));
        T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dc));
        T_MPI(MPI_Info_free(&info));
        cudaGraph_t g;
        capture_ring(s, cudaStreamCaptureModeGlobal, dc, sbuf, rbuf, n, 41, k, &chk, st);
        cudaGraphExec_t ge = end_capture(s, &g, "M");
        const int nl = 300;
        for (int i = 0; i < nl; i++) {
            GT_CUDA(cudaGraphLaunch(ge, s));
            MPI_Request req[2]; /* plain, same (communicator, peer, tag), same stream */
            gt_fill(GT_DEVICE, sbuf2, 4096, gt_seed(t_rank, i, 4141), s);
            T_MPI(MPIX_Acc_Irecv(s, rbuf2, 4096, MPI_BYTE, prev, 41, dc, &req[0]));
            T_MPI(MPIX_Acc_Isend(s, sbuf2, 4096, MPI_BYTE, next, 41, dc, &req[1]));
            T_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
            gt_check(&chk, GT_DEVICE, rbuf2, 4096, gt_seed(prev, i, 4141), i, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "M");
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        T_MPI(MPI_Comm_free(&dc));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok M: %d launches and plain exchanges on one channel\n", nl);
    }

    /* ---- U ---- */
    t_phase("U: relaunch after cudaGraphExecUpdate");
    {
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        cudaGraph_t g, g2;
        capture_ring(s, cudaStreamCaptureModeGlobal, MPI_COMM_WORLD, sbuf, rbuf, n, 51, k, &chk,
                     st);
        cudaGraphExec_t ge = end_capture(s, &g, "U (first)");
        for (int i = 0; i < 20; i++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        GT_CUDA(cudaMemsetAsync(rbuf, 0xEE, n, s));
        capture_ring(s, cudaStreamCaptureModeGlobal, MPI_COMM_WORLD, sbuf2, rbuf2, n, 52, k, &chk,
                     st2);
        cudaError_t ce = cudaStreamEndCapture(s, &g2);
        T_CHECK(ce == cudaSuccess, "U: second capture: %s", cudaGetErrorName(ce));
        cudaGraphExecUpdateResultInfo info;
        ce = cudaGraphExecUpdate(ge, g2, &info);
        T_CHECK(ce == cudaSuccess && info.result == cudaGraphExecUpdateSuccess,
                "U: cudaGraphExecUpdate: %s (result %d)", cudaGetErrorName(ce), (int)info.result);
        for (int i = 0; i < 50; i++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "U");
        T_CHECK(read_counter(k) == 70, "U: %llu launches ran, 70 expected", read_counter(k));
        uint8_t probe[64];
        GT_CUDA(cudaMemcpy(probe, rbuf, sizeof probe, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 64; i++)
            T_CHECK(probe[i] == 0xEE, "U: the first graph's receive buffer was written after "
                                      "the update");
        T_CHECK(st2[0].MPI_TAG == 52 && st2[0].MPI_SOURCE == prev,
                "U: the updated graph's status %s", gt_status_str(&st2[0]));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        GT_CUDA(cudaGraphDestroy(g2));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok U: 20 launches, cudaGraphExecUpdate, 50 launches of the "
                   "update\n");
    }

    /* ---- S ---- */
    t_phase("S: a stream communicator's calls captured");
    {
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        MPI_Comm sc = gt_stream_comm(s);
        const int nl = 100;
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        bump_kernel<<<1, 1, 0, s>>>(k);
        kfill(sbuf, n, t_rank, 61, k, s);
        MPI_Request req[2];
        T_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, prev, 61, sc, &req[0]));
        T_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, next, 61, sc, &req[1]));
        T_MPI(MPI_Waitall(2, req, st));
        kcheck(&chk, rbuf, n, prev, 61, k, s);
        kfill(sbuf2, 4096, t_rank, 62, k, s);
        T_MPI(MPI_Sendrecv(sbuf2, 4096, MPI_BYTE, next, 62, rbuf2, 4096, MPI_BYTE, prev, 62, sc,
                           MPI_STATUS_IGNORE));
        kcheck(&chk, rbuf2, 4096, prev, 62, k, s);
        cudaGraph_t g;
        cudaGraphExec_t ge = end_capture(s, &g, "S");
        for (int i = 0; i < nl; i++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "S");
        T_CHECK(read_counter(k) == (unsigned long long)nl, "S: %llu launches ran", read_counter(k));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        T_MPI(MPI_Comm_free(&sc));
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok S: %d launches of a stream communicator's Irecv/Isend/Waitall "
                   "and Sendrecv\n",
                   nl);
    }

    /* ---- K ---- */
    t_phase("K: stream-ordered collectives captured");
    {
        const int nk = 200, cnt = 1000, root = 1 % t_size;
        int *ka = (int *)gt_alloc(GT_DEVICE, cnt * sizeof(int));
        int *kr = (int *)gt_alloc(GT_DEVICE, cnt * sizeof(int));
        int *kb = (int *)gt_alloc(GT_DEVICE, cnt * sizeof(int));
        /* the stream's scratch and the set-up exist before the capture: one
         * plain call of each */
        T_MPI(MPIX_Acc_Allreduce(s, ka, kr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Bcast(s, kb, cnt, MPI_INT, root, MPI_COMM_WORLD));
        GT_CUDA(cudaStreamSynchronize(s));
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        bump_kernel<<<1, 1, 0, s>>>(k);
        cfill_kernel<<<4, 256, 0, s>>>(ka, kb, cnt, t_rank, root, k);
        T_MPI(MPIX_Acc_Allreduce(s, ka, kr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Bcast(s, kb, cnt, MPI_INT, root, MPI_COMM_WORLD));
        T_MPI(MPIX_Acc_Barrier(s, MPI_COMM_WORLD));
        ccheck_kernel<<<4, 256, 0, s>>>(kr, kb, cnt, t_size, k, chk.dev);
        cudaGraph_t g;
        cudaGraphExec_t ge = end_capture(s, &g, "K");
        for (int i = 0; i < nk; i++) {
            GT_CUDA(cudaGraphLaunch(ge, s));
            if (i % 50 == 49)
                GT_CUDA(cudaStreamSynchronize(s));
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "K");
        T_CHECK(read_counter(k) == (unsigned long long)nk, "K: %llu launches ran", read_counter(k));
        /* a plain Allreduce after the launches: the plain and the captured
         * collectives keep apart */
        T_MPI(MPIX_Acc_Allreduce(s, ka, kr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        ccheck_kernel<<<4, 256, 0, s>>>(kr, kb, cnt, t_size, k, chk.dev);
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "K, the plain Allreduce after");
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        /* the nonblocking forms captured, completed by one stream Waitall
         * (their requests complete in the capture stream's order) */
        const int nn = 100;
        GT_CUDA(cudaMemset(k, 0, sizeof(*k)));
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        bump_kernel<<<1, 1, 0, s>>>(k);
        cfill_kernel<<<4, 256, 0, s>>>(ka, kb, cnt, t_rank, root, k);
        MPI_Request kq[2];
        T_MPI(MPIX_Acc_Iallreduce(s, ka, kr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &kq[0]));
        T_MPI(MPIX_Acc_Ibcast(s, kb, cnt, MPI_INT, root, MPI_COMM_WORLD, &kq[1]));
        T_MPI(MPIX_Acc_Waitall(s, 2, kq, MPI_STATUSES_IGNORE));
        T_CHECK(kq[0] == MPI_REQUEST_NULL && kq[1] == MPI_REQUEST_NULL,
                "K: a captured Waitall left requests of nonblocking collectives");
        ccheck_kernel<<<4, 256, 0, s>>>(kr, kb, cnt, t_size, k, chk.dev);
        ge = end_capture(s, &g, "K (nonblocking)");
        for (int i = 0; i < nn; i++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "K (nonblocking)");
        T_CHECK(read_counter(k) == (unsigned long long)nn, "K (nonblocking): %llu launches ran",
                read_counter(k));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        gt_free(GT_DEVICE, ka);
        gt_free(GT_DEVICE, kr);
        gt_free(GT_DEVICE, kb);
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok K: %d launches of a captured Allreduce (sum), Bcast and "
                   "Barrier, %d of Iallreduce and Ibcast with a Waitall, every launch checked\n",
                   nk, nn);
    }

    /* ---- T ---- */
    t_phase("T: non-contiguous datatypes captured (device buffers)");
    vector_ring_graph(s, k, &chk, sbuf2, rbuf2, launches < 500 ? (int)launches : 500, 81, "device");
    t_phase("T: non-contiguous datatypes captured (pinned host buffers)");
    {
        uint8_t *hs = (uint8_t *)gt_alloc(GT_PINNED, 4096),
                *hr = (uint8_t *)gt_alloc(GT_PINNED, 4096);
        vector_ring_graph(s, k, &chk, hs, hr, launches < 200 ? (int)launches : 200, 82,
                          "pinned host");
        gt_free(GT_PINNED, hs);
        gt_free(GT_PINNED, hr);
    }

    /* ---- E ---- */
    t_phase("E: errors");
    {
        T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        /* a host wait on a captured request: MPI_ERR_REQUEST at once */
        MPI_Request r;
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        T_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, 71, MPI_COMM_WORLD, &r));
        int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        snprintf(what, sizeof what, "E: host MPI_Wait on a captured send");
        T_CHECK(t_err_class(rc) == MPI_ERR_REQUEST,
                "%s returned class %d, expected "
                "MPI_ERR_REQUEST",
                what, t_err_class(rc));
        if (r != MPI_REQUEST_NULL)
            T_MPI(MPI_Request_free(&r));
        cudaGraph_t g = NULL;
        cudaError_t ce = cudaStreamEndCapture(s, &g);
        T_CHECK(ce == cudaSuccess && g, "E: a capture with a send that is never launched: %s",
                cudaGetErrorName(ce));
        GT_CUDA(cudaGraphDestroy(g)); /* never launched: nothing was sent */
        /* a vector datatype never used outside a capture: its set-up would
         * happen inside it -- refused, the capture invalidated */
        MPI_Datatype vec;
        T_MPI(MPI_Type_vector(16, 64, 128, MPI_BYTE, &vec));
        T_MPI(MPI_Type_commit(&vec));
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        rc = MPIX_Acc_Isend(s, sbuf, 1, vec, next, 72, MPI_COMM_WORLD, &r);
        g = NULL;
        ce = cudaStreamEndCapture(s, &g);
        (void)cudaGetLastError();
        T_CHECK(t_err_class(rc) == MPI_ERR_UNSUPPORTED_OPERATION,
                "E: a vector datatype's Isend in a capture returned class %d", t_err_class(rc));
        T_CHECK(ce != cudaSuccess && g == NULL,
                "E: the capture with a refused call ended with %s and %s graph",
                cudaGetErrorName(ce), g ? "a" : "no");
        T_MPI(MPI_Type_free(&vec));
        /* the stream and the matching are sound */
        gt_ring_step(s, s, s, sbuf, rbuf, n, 73, 73, &chk);
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "E");
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[graph_p2p] ok E: host wait on a captured request, a vector datatype "
                   "refused, the stream sound after\n");
    }

    GT_CUDA(cudaFree(k));
    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_free(GT_DEVICE, sbuf2);
    gt_free(GT_DEVICE, rbuf2);
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    GT_CUDA(cudaStreamDestroy(s2));
    return gt_finish();
}
