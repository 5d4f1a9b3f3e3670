/*
 * partitioned.cu - partitioned requests driven by kernels
 * (mpix_acc_device.cuh; issue 19), 2 ranks with device buffers.
 *
 *   A  ring: 8 partitions of 4 KiB + 12 bytes (not a multiple of 4: the
 *      LL tail), 50 epochs; the send kernel fills each partition and
 *      makes it ready (one block per partition, block level), the receive
 *      kernel waits for each (block-level parrived_wait) and checks it;
 *      completed by MPIX_Acc_Waitall on the stream; every epoch checked
 *   B  ping-pong inside one epoch: 1000 round trips of 8 bytes, one warp,
 *      partition i = round trip i; rank 1 answers value + 1
 *   C  host completion: MPI_Wait / MPI_Test loop on the requests
 *   D  thread-level pready of every partition from different threads of
 *      one block, single-thread parrived polling
 *   E  errors: a partition made ready twice in one epoch and one out of
 *      range -- the device calls return the code, the request's next
 *      completion reports it (MPI error, not a hang)
 *   G  B with the value calls (mpix_acc_pready_value,
 *      mpix_acc_parrived_wait_value): values checked in the kernel, the
 *      receive buffer on the host; a value of the wrong size gives
 *      MPIX_ACC_DERR_SIZE and the next start reports it
 *   F  the protocol in use is what MPIX_ACC_KI asks (direct by default
 *      where the GPUs reach each other, proxy with MPIX_ACC_KI=proxy):
 *      --expect=direct|proxy
 *   H  CUDA graphs (issue 21): a launch counter kernel, both starts, A's
 *      kernels (the pattern of launch k) and the stream Waitall captured
 *      once (global mode) and launched N times, every launch's data checked
 *      on the device; plain epochs between launches; launches on a second
 *      stream; a second capture (relaxed mode, another pattern) applied
 *      with cudaGraphExecUpdate and launched, its data read back on the
 *      host; a host wait of a captured start refused. On the proxy the
 *      captured start is refused, the capture invalidated, and the
 *      requests work on outside it.
 *
 * Options: --timeout=S, --expect=direct|proxy, --epochs=N, --pp=N (round trips of B),
 * --launches=N (graph launches of H, default 10000)
 */
#include "gpu_common.h"

#include <mpix_acc_device.cuh>

#define NP 8
#define PB (4096 + 12)

__host__ __device__ unsigned char pat(int src, int ep, int p, size_t i)
{
    return (unsigned char)(src * 31 + ep * 7 + p * 13 + (int)(i * 5 % 251));
}

/* A's block p: fill partition p of epoch ep and make it ready / wait for
 * partition p and check it (also the bodies of H's graph kernels) */
__device__ void send_part(mpix_acc_dreq_t *r, unsigned char *buf, int src, int ep, int *errors)
{
    int p = blockIdx.x;
    for (size_t i = threadIdx.x; i < PB; i += blockDim.x)
        buf[(size_t)p * PB + i] = pat(src, ep, p, i);
    __syncthreads();
    int rc = mpix_acc_pready<MPIX_ACC_BLOCK>(r, p);
    if (rc != MPIX_ACC_DSUCCESS && threadIdx.x == 0)
        atomicAdd(errors, 1000 + rc);
}

__device__ void recv_part(mpix_acc_dreq_t *r, const unsigned char *buf, int src, int ep,
                          int *errors)
{
    int p = blockIdx.x;
    int rc = mpix_acc_parrived_wait<MPIX_ACC_BLOCK>(r, p, 0);
    if (rc != MPIX_ACC_DSUCCESS) {
        if (threadIdx.x == 0)
            atomicAdd(errors, 1000 + rc);
        return;
    }
    for (size_t i = threadIdx.x; i < PB; i += blockDim.x)
        if (buf[(size_t)p * PB + i] != pat(src, ep, p, i))
            atomicAdd(errors, 1);
}

__global__ void send_kernel(mpix_acc_dreq_t *r, unsigned char *buf, int src, int ep, int *errors)
{
    send_part(r, buf, src, ep, errors);
}

__global__ void recv_kernel(mpix_acc_dreq_t *r, const unsigned char *buf, int src, int ep,
                            int *errors)
{
    recv_part(r, buf, src, ep, errors);
}

__global__ void pingpong_kernel(mpix_acc_dreq_t *s, mpix_acc_dreq_t *r, uint64_t *out,
                                const uint64_t *in, int role, int n, int *errors)
{
    for (int i = 0; i < n; i++) {
        if (role == 0) {
            if (threadIdx.x == 0)
                out[i] = 3ull * (uint64_t)i;
            __syncwarp();
            if (mpix_acc_pready<MPIX_ACC_WARP>(s, i) != MPIX_ACC_DSUCCESS ||
                mpix_acc_parrived_wait<MPIX_ACC_WARP>(r, i, 0) != MPIX_ACC_DSUCCESS) {
                if (threadIdx.x == 0)
                    atomicAdd(errors, 1000000);
                return;
            }
            if (threadIdx.x == 0 && in[i] != 3ull * (uint64_t)i + 1)
                atomicAdd(errors, 1);
        } else {
            if (mpix_acc_parrived_wait<MPIX_ACC_WARP>(r, i, 0) != MPIX_ACC_DSUCCESS) {
                if (threadIdx.x == 0)
                    atomicAdd(errors, 1000000);
                return;
            }
            if (threadIdx.x == 0)
                out[i] = in[i] + 1;
            __syncwarp();
            if (mpix_acc_pready<MPIX_ACC_WARP>(s, i) != MPIX_ACC_DSUCCESS) {
                if (threadIdx.x == 0)
                    atomicAdd(errors, 1000000);
                return;
            }
        }
    }
}

/* G: B's ping-pong with the value calls, one thread: rank 1 answers
 * value + 1; the values are checked in registers here, the receive
 * buffers on the host afterwards */
__global__ void pingpong_value_kernel(mpix_acc_dreq_t *s, mpix_acc_dreq_t *r, int role, int n,
                                      int *errors)
{
    for (int i = 0; i < n; i++) {
        uint64_t v = 5ull * (uint64_t)i + 7, a = 0;
        if (role == 0) {
            if (mpix_acc_pready_value(s, i, v) != MPIX_ACC_DSUCCESS ||
                mpix_acc_parrived_wait_value(r, i, &a, 0) != MPIX_ACC_DSUCCESS) {
                atomicAdd(errors, 1000000);
                return;
            }
            if (a != v + 1)
                atomicAdd(errors, 1);
        } else {
            if (mpix_acc_parrived_wait_value(r, i, &a, 0) != MPIX_ACC_DSUCCESS) {
                atomicAdd(errors, 1000000);
                return;
            }
            if (a != v)
                atomicAdd(errors, 1);
            if (mpix_acc_pready_value(s, i, a + 1) != MPIX_ACC_DSUCCESS) {
                atomicAdd(errors, 1000000);
                return;
            }
        }
    }
}

/* G: a value of the wrong size (4 bytes for 8-byte partitions), then every
 * partition made ready properly so that the epoch completes */
__global__ void value_misuse_kernel(mpix_acc_dreq_t *s, int n, int *codes)
{
    codes[0] = mpix_acc_pready_value(s, 0, 42u);
    codes[1] = mpix_acc_pready_range<MPIX_ACC_THREAD>(s, 0, n - 1);
}

/* D: thread p of the block readies partition p (thread level) */
__global__ void thread_ready_kernel(mpix_acc_dreq_t *r, unsigned char *buf, int src, int ep,
                                    int *errors)
{
    int p = threadIdx.x;
    if (p >= NP)
        return;
    for (size_t i = 0; i < PB; i++)
        buf[(size_t)p * PB + i] = pat(src, ep, p, i);
    if (mpix_acc_pready<MPIX_ACC_THREAD>(r, p) != MPIX_ACC_DSUCCESS)
        atomicAdd(errors, 1000);
}

__global__ void thread_poll_kernel(mpix_acc_dreq_t *r, const unsigned char *buf, int src, int ep,
                                   int *errors)
{
    int p = threadIdx.x;
    if (p >= NP)
        return;
    unsigned long long t0 = clock64();
    while (!mpix_acc_parrived(r, p))
        if (clock64() - t0 > 20000000000ull) {
            atomicAdd(errors, 1000);
            return;
        }
    for (size_t i = 0; i < PB; i++)
        if (buf[(size_t)p * PB + i] != pat(src, ep, p, i))
            atomicAdd(errors, 1);
}

/* H: the graph's launch counter, and A's kernels with the epoch from it
 * (launch k, pattern salt: epoch k * 16 + salt) */
__global__ void bump_kernel(int *k)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *k += 1;
}

__global__ void gsend_kernel(mpix_acc_dreq_t *r, unsigned char *buf, int src, const int *k,
                             int salt, int *errors)
{
    send_part(r, buf, src, *k * 16 + salt, errors);
}

__global__ void grecv_kernel(mpix_acc_dreq_t *r, const unsigned char *buf, int src, const int *k,
                             int salt, int *errors)
{
    recv_part(r, buf, src, *k * 16 + salt, errors);
}

/* E: ready partition 0 twice and partition NP (out of range) */
__global__ void misuse_kernel(mpix_acc_dreq_t *r, int *codes)
{
    if (threadIdx.x != 0)
        return;
    for (int p = 0; p < NP; p++)
        mpix_acc_pready<MPIX_ACC_THREAD>(r, p);
    codes[0] = mpix_acc_pready<MPIX_ACC_THREAD>(r, 0);
    codes[1] = mpix_acc_pready<MPIX_ACC_THREAD>(r, NP);
}

static int host_errors(int *d)
{
    int h = 0;
    GT_CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemset(d, 0, sizeof h));
    return h;
}

/* B and G: one epoch of n round trips in one kernel (value 0: B's
 * pingpong_kernel; 1: G's pingpong_value_kernel), timed on the GPU and
 * its errors checked */
static void pingpong_epoch(cudaStream_t s, MPI_Comm c, MPI_Request *ps, MPI_Request *pr,
                           mpix_acc_dreq_t *pds, mpix_acc_dreq_t *pdr, uint64_t *out,
                           const uint64_t *in, int n, int value, int rep, const char *mode,
                           int *derr)
{
    const char *what = value ? "value ping-pong" : "ping-pong";
    T_MPI(MPIX_Acc_Start(s, pr));
    T_MPI(MPIX_Acc_Start(s, ps));
    cudaEvent_t e0, e1;
    GT_CUDA(cudaEventCreate(&e0));
    GT_CUDA(cudaEventCreate(&e1));
    T_MPI(MPI_Barrier(c));
    GT_CUDA(cudaEventRecord(e0, s));
    if (value)
        pingpong_value_kernel<<<1, 1, 0, s>>>(pds, pdr, t_rank, n, derr);
    else
        pingpong_kernel<<<1, 32, 0, s>>>(pds, pdr, out, in, t_rank, n, derr);
    GT_CUDA(cudaEventRecord(e1, s));
    T_MPI(MPIX_Acc_Wait(s, ps, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Wait(s, pr, MPI_STATUS_IGNORE));
    GT_CUDA(cudaStreamSynchronize(s));
    float ms = 0;
    GT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (t_rank == 0)
        printf("[partitioned] %s in one epoch: %d round trips, %.2f us per half round trip (GPU "
               "time, %s)\n",
               what, n, ms * 1000.0 / (2.0 * n), mode);
    int e = host_errors(derr);
    T_CHECK(e == 0, "%s rep %d: %d errors", what, rep, e);
}

/* A's and H's request pair: NP partitions of PB bytes each way with the
 * peer on tag (rq[0] the receive, rq[1] the send) and their device handles */
static void ring_pair(MPI_Comm c, unsigned char *sb, unsigned char *rb, int peer, int tag,
                      MPI_Request rq[2], mpix_acc_dreq_t **dr, mpix_acc_dreq_t **ds)
{
    T_MPI(MPIX_Acc_Precv_init(rb, NP, PB, MPI_BYTE, peer, tag, c, MPI_INFO_NULL, &rq[0]));
    T_MPI(MPIX_Acc_Psend_init(sb, NP, PB, MPI_BYTE, peer, tag, c, MPI_INFO_NULL, &rq[1]));
    T_MPI(MPIX_Acc_Prequest_get_device(rq[0], dr));
    T_MPI(MPIX_Acc_Prequest_get_device(rq[1], ds));
}

/* H: one epoch of the graph's sequence on s (captured or not): the
 * launch counter, both starts, the kernels, the stream wait */
static void graph_epoch(cudaStream_t s, MPI_Request *gq, mpix_acc_dreq_t *gds, mpix_acc_dreq_t *gdr,
                        unsigned char *sb, unsigned char *rb, int peer, int *kc, int salt,
                        int *derr)
{
    bump_kernel<<<1, 1, 0, s>>>(kc);
    T_MPI(MPIX_Acc_Start(s, &gq[0]));
    T_MPI(MPIX_Acc_Start(s, &gq[1]));
    gsend_kernel<<<NP, 128, 0, s>>>(gds, sb, t_rank, kc, salt, derr);
    grecv_kernel<<<NP, 128, 0, s>>>(gdr, rb, peer, kc, salt, derr);
    T_MPI(MPIX_Acc_Waitall(s, 2, gq, MPI_STATUSES_IGNORE));
}

/* H: the receive buffer holds launch k's partitions of the peer (salt) */
static int graph_rb_bad(const unsigned char *rb, int peer, int k, int salt)
{
    unsigned char *h = (unsigned char *)malloc((size_t)NP * PB);
    GT_CUDA(cudaMemcpy(h, rb, (size_t)NP * PB, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int p = 0; p < NP; p++)
        for (size_t i = 0; i < PB; i++)
            bad += h[(size_t)p * PB + i] != pat(peer, k * 16 + salt, p, i);
    free(h);
    return bad;
}

static void phase_graph(cudaStream_t s, MPI_Comm c, unsigned char *sb, unsigned char *rb, int peer,
                        const char *mode, int *derr)
{
    const int L = (int)gt_opt_long("--launches", 10000);
    MPI_Request gq[2];
    mpix_acc_dreq_t *gdr, *gds;
    ring_pair(c, sb, rb, peer, 3, gq, &gdr, &gds);
    int *kc;
    GT_CUDA(cudaMalloc(&kc, sizeof(int)));
    GT_CUDA(cudaMemset(kc, 0, sizeof(int)));
    int k = 0; /* launches and epochs so far (the device's *kc) */
    /* a plain epoch first: the protocol's set-up happens outside the capture */
    graph_epoch(s, gq, gds, gdr, sb, rb, peer, kc, 0, derr);
    k++;
    GT_CUDA(cudaStreamSynchronize(s));
    int e = host_errors(derr);
    T_CHECK(e == 0, "graph: first plain epoch: %d errors", e);

    cudaGraph_t g = NULL;
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (strcmp(mode, "direct") != 0) {
        /* the proxy needs the host per epoch: the start is refused and the
         * capture invalidated; the requests work on outside it */
        int rc = MPIX_Acc_Start(s, &gq[0]);
        cudaError_t ce = cudaStreamEndCapture(s, &g);
        T_CHECK(rc != MPI_SUCCESS && ce != cudaSuccess && g == NULL,
                "proxy: captured start rc %d, end of capture %s (want refused, invalidated)", rc,
                cudaGetErrorString(ce));
        (void)cudaGetLastError();
        if (t_rank == 0)
            printf("[partitioned] H proxy: captured start refused (%s)\n", cudaGetErrorString(ce));
        graph_epoch(s, gq, gds, gdr, sb, rb, peer, kc, 0, derr);
        k++;
        GT_CUDA(cudaStreamSynchronize(s));
        e = host_errors(derr);
        T_CHECK(e == 0, "proxy: epoch after the refused capture: %d errors", e);
        T_CHECK(graph_rb_bad(rb, peer, k, 0) == 0, "proxy: receive buffer after the refusal");
    } else {
        graph_epoch(s, gq, gds, gdr, sb, rb, peer, kc, 0, derr);
        GT_CUDA(cudaStreamEndCapture(s, &g));
        cudaGraphExec_t ge;
        GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
        /* a host wait of an epoch started in a capture: refused */
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        T_MPI(MPIX_Acc_Start(s, &gq[0]));
        int rc = MPI_Wait(&gq[0], MPI_STATUS_IGNORE);
        cudaGraph_t gx = NULL;
        cudaError_t ce = cudaStreamEndCapture(s, &gx);
        if (gx) {
            /* the start alone was captured: its graph is never launched */
            GT_CUDA(cudaGraphDestroy(gx));
        }
        (void)ce;
        T_CHECK(rc != MPI_SUCCESS, "host wait of a captured start: rc %d (want an error)", rc);
        /* (the request's captured epoch is still pending: a stream wait in a
         * capture completes it, in a graph that is dropped) */
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        T_MPI(MPIX_Acc_Wait(s, &gq[0], MPI_STATUS_IGNORE));
        GT_CUDA(cudaStreamEndCapture(s, &gx));
        if (gx)
            GT_CUDA(cudaGraphDestroy(gx));

        cudaStream_t s2;
        GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        double t0 = t_now();
        for (int j = 0; j < L; j++) {
            GT_CUDA(cudaGraphLaunch(ge, s));
            k++;
            if ((j + 1) % 1000 == 0 || j + 1 == L) {
                GT_CUDA(cudaStreamSynchronize(s));
                e = host_errors(derr);
                T_CHECK(e == 0, "graph: %d errors by launch %d", e, j + 1);
            }
        }
        double dt = t_now() - t0;
        T_CHECK(graph_rb_bad(rb, peer, k, 0) == 0, "graph: receive buffer after %d launches", L);
        if (t_rank == 0)
            printf("[partitioned] H graph: %d launches, every one checked, %.2f us per launch "
                   "(%d x %d bytes each way)\n",
                   L, dt * 1e6 / L, NP, PB);
        /* plain epochs between launches, and launches on another stream */
        for (int j = 0; j < 20; j++) {
            if (j % 2) {
                graph_epoch(s, gq, gds, gdr, sb, rb, peer, kc, 0, derr);
            } else {
                GT_CUDA(cudaGraphLaunch(ge, s));
            }
            k++;
        }
        GT_CUDA(cudaStreamSynchronize(s));
        for (int j = 0; j < 50; j++, k++)
            GT_CUDA(cudaGraphLaunch(ge, s2));
        GT_CUDA(cudaStreamSynchronize(s2));
        e = host_errors(derr);
        T_CHECK(e == 0, "graph: mixed with plain epochs and a second stream: %d errors", e);
        T_CHECK(graph_rb_bad(rb, peer, k, 0) == 0, "graph: receive buffer after the mixed part");
        /* a second capture (relaxed mode, salt 5) applied to the instance */
        cudaGraph_t g2 = NULL;
        GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        graph_epoch(s, gq, gds, gdr, sb, rb, peer, kc, 5, derr);
        GT_CUDA(cudaStreamEndCapture(s, &g2));
        cudaGraphExecUpdateResultInfo info;
        GT_CUDA(cudaGraphExecUpdate(ge, g2, &info));
        for (int j = 0; j < 100; j++, k++)
            GT_CUDA(cudaGraphLaunch(ge, s));
        GT_CUDA(cudaStreamSynchronize(s));
        e = host_errors(derr);
        T_CHECK(e == 0, "graph after cudaGraphExecUpdate: %d errors", e);
        int bad = graph_rb_bad(rb, peer, k, 5);
        T_CHECK(bad == 0, "graph after cudaGraphExecUpdate: %d bytes are not the update's", bad);
        mpix_acc_dreq_t h;
        GT_CUDA(cudaMemcpy(&h, gdr, sizeof h, cudaMemcpyDeviceToHost));
        T_CHECK(h.epoch == (uint64_t)k, "receive handle's epoch %llu after %d epochs",
                (unsigned long long)h.epoch, k);
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        GT_CUDA(cudaGraphDestroy(g2));
        GT_CUDA(cudaStreamDestroy(s2));
    }
    T_MPI(MPI_Request_free(&gq[0]));
    T_MPI(MPI_Request_free(&gq[1]));
    GT_CUDA(cudaFree(kc));
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "partitioned", 240);
    t_need_ranks(2);
    gt_warmup();
    const char *expect = gt_opt("--expect", "");
    int epochs = (int)gt_opt_long("--epochs", 50);
    int peer = 1 - t_rank;
    if (t_rank > 1)
        return gt_finish();
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *derr;
    GT_CUDA(cudaMalloc(&derr, sizeof(int) * 4));
    GT_CUDA(cudaMemset(derr, 0, sizeof(int) * 4));
    unsigned char *sb = (unsigned char *)gt_alloc(GT_DEVICE, (size_t)NP * PB);
    unsigned char *rb = (unsigned char *)gt_alloc(GT_DEVICE, (size_t)NP * PB);
    MPI_Comm c;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    T_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));

    t_phase("A. ring of kernel-driven epochs");
    MPI_Request rq[2];
    mpix_acc_dreq_t *dr, *ds;
    ring_pair(c, sb, rb, peer, 1, rq, &dr, &ds);
    for (int ep = 0; ep < epochs; ep++) {
        T_MPI(MPIX_Acc_Start(s, &rq[0]));
        T_MPI(MPIX_Acc_Start(s, &rq[1]));
        send_kernel<<<NP, 128, 0, s>>>(ds, sb, t_rank, ep, derr);
        recv_kernel<<<NP, 128, 0, s>>>(dr, rb, peer, ep, derr);
        T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
    }
    GT_CUDA(cudaStreamSynchronize(s));
    int e = host_errors(derr);
    T_CHECK(e == 0, "ring: %d errors (>= 1000: a device call failed with code e - 1000)", e);
    mpix_acc_dreq_t h;
    GT_CUDA(cudaMemcpy(&h, dr, sizeof h, cudaMemcpyDeviceToHost));
    const char *mode = h.mode == MPIX_ACC_DREQ_DIRECT  ? "direct"
                       : h.mode == MPIX_ACC_DREQ_PROXY ? "proxy"
                                                       : "pending";
    if (t_rank == 0)
        printf("[partitioned] protocol: %s (%d epochs of %d x %d bytes)\n", mode, epochs, NP, PB);
    T_CHECK(!expect[0] || strcmp(expect, mode) == 0, "protocol %s, expected %s", mode, expect);
    T_CHECK(h.epoch == (uint64_t)epochs, "receive handle's epoch %llu after %d starts",
            (unsigned long long)h.epoch, epochs);
    if (t_rank == 0)
        printf("[partitioned] A ok\n"), fflush(stdout);

    t_phase("C. host completion (MPI_Wait, MPI_Test)");
    for (int ep = epochs; ep < epochs + 20; ep++) {
        T_MPI(MPIX_Acc_Start(s, &rq[0]));
        T_MPI(MPIX_Acc_Start(s, &rq[1]));
        send_kernel<<<NP, 128, 0, s>>>(ds, sb, t_rank, ep, derr);
        recv_kernel<<<NP, 128, 0, s>>>(dr, rb, peer, ep, derr);
        if (ep % 2) {
            T_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        } else {
            int flag = 0;
            double t0 = t_now();
            while (!flag) {
                T_MPI(MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE));
                T_CHECK(t_now() - t0 < 30, "MPI_Testall never completed");
            }
        }
        T_CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL, "handles lost");
    }
    GT_CUDA(cudaStreamSynchronize(s));
    e = host_errors(derr);
    T_CHECK(e == 0, "host completion: %d errors", e);
    if (t_rank == 0)
        printf("[partitioned] C ok\n"), fflush(stdout);

    t_phase("D. thread-level readiness, single-thread polling");
    for (int ep = 0; ep < 5; ep++) {
        T_MPI(MPIX_Acc_Start(s, &rq[0]));
        T_MPI(MPIX_Acc_Start(s, &rq[1]));
        thread_ready_kernel<<<1, 32, 0, s>>>(ds, sb, t_rank, 100 + ep, derr);
        thread_poll_kernel<<<1, 32, 0, s>>>(dr, rb, peer, 100 + ep, derr);
        T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
    }
    GT_CUDA(cudaStreamSynchronize(s));
    e = host_errors(derr);
    T_CHECK(e == 0, "thread level: %d errors", e);
    if (t_rank == 0)
        printf("[partitioned] D ok\n"), fflush(stdout);

    t_phase("E. misuse: pready twice, partition out of range");
    T_MPI(MPIX_Acc_Start(s, &rq[0]));
    T_MPI(MPIX_Acc_Start(s, &rq[1]));
    misuse_kernel<<<1, 32, 0, s>>>(ds, derr);
    recv_kernel<<<NP, 128, 0, s>>>(dr, rb, peer, -1, derr + 2); /* data not checked */
    T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
    GT_CUDA(cudaStreamSynchronize(s));
    int codes[2];
    GT_CUDA(cudaMemcpy(codes, derr, sizeof codes, cudaMemcpyDeviceToHost));
    T_CHECK(codes[0] == MPIX_ACC_DERR_TWICE && codes[1] == MPIX_ACC_DERR_PARTITION,
            "misuse codes %d %d (want %d %d)", codes[0], codes[1], MPIX_ACC_DERR_TWICE,
            MPIX_ACC_DERR_PARTITION);
    GT_CUDA(cudaMemset(derr, 0, sizeof(int) * 4));
    /* the next start reports the device's error, naming the request */
    int rc = MPIX_Acc_Start(s, &rq[1]);
    int cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_ARG, "start after a device error: rc %d class %d (want MPI_ERR_ARG)", rc,
            cls);
    T_MPI(MPI_Request_free(&rq[0]));
    T_MPI(MPI_Request_free(&rq[1]));
    if (t_rank == 0)
        printf("[partitioned] E ok\n"), fflush(stdout);

    t_phase("B. ping-pong inside one epoch");
    const int N = (int)gt_opt_long("--pp", 1000);
    uint64_t *out = (uint64_t *)gt_alloc(GT_DEVICE, sizeof(uint64_t) * N);
    uint64_t *in = (uint64_t *)gt_alloc(GT_DEVICE, sizeof(uint64_t) * N);
    MPI_Request ps, pr;
    T_MPI(MPIX_Acc_Psend_init(out, N, 1, MPI_UINT64_T, peer, 2, c, MPI_INFO_NULL, &ps));
    T_MPI(MPIX_Acc_Precv_init(in, N, 1, MPI_UINT64_T, peer, 2, c, MPI_INFO_NULL, &pr));
    mpix_acc_dreq_t *pds, *pdr;
    T_MPI(MPIX_Acc_Prequest_get_device(ps, &pds));
    T_MPI(MPIX_Acc_Prequest_get_device(pr, &pdr));
    for (int rep = 0; rep < 3; rep++)
        pingpong_epoch(s, c, &ps, &pr, pds, pdr, out, in, N, 0, rep, mode, derr);
    if (t_rank == 0)
        printf("[partitioned] B ok\n"), fflush(stdout);

    t_phase("G. value calls: ping-pong, receive buffer, a value of the wrong size");
    for (int rep = 0; rep < 3; rep++) {
        GT_CUDA(cudaMemset(in, 0, sizeof(uint64_t) * N));
        pingpong_epoch(s, c, &ps, &pr, pds, pdr, out, in, N, 1, rep, mode, derr);
        /* the value calls fill the receive buffer too */
        uint64_t *h = (uint64_t *)malloc(sizeof(uint64_t) * N);
        GT_CUDA(cudaMemcpy(h, in, sizeof(uint64_t) * N, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += h[i] != 5ull * (uint64_t)i + 7 + (t_rank == 0 ? 1 : 0);
        free(h);
        T_CHECK(bad == 0, "value ping-pong rep %d: %d partitions wrong in the receive buffer", rep,
                bad);
    }
    /* a value of the wrong size: MPIX_ACC_DERR_SIZE, reported by the next start */
    T_MPI(MPIX_Acc_Start(s, &pr));
    T_MPI(MPIX_Acc_Start(s, &ps));
    value_misuse_kernel<<<1, 1, 0, s>>>(pds, N, derr);
    T_MPI(MPIX_Acc_Wait(s, &ps, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Wait(s, &pr, MPI_STATUS_IGNORE));
    GT_CUDA(cudaStreamSynchronize(s));
    GT_CUDA(cudaMemcpy(codes, derr, sizeof codes, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemset(derr, 0, sizeof(int) * 4));
    T_CHECK(codes[0] == MPIX_ACC_DERR_SIZE && codes[1] == MPIX_ACC_DSUCCESS,
            "value of the wrong size: codes %d %d (want %d %d)", codes[0], codes[1],
            MPIX_ACC_DERR_SIZE, MPIX_ACC_DSUCCESS);
    rc = MPIX_Acc_Start(s, &ps);
    cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_ARG, "start after a value of the wrong size: rc %d class %d", rc, cls);
    if (t_rank == 0)
        printf("[partitioned] G ok\n"), fflush(stdout);

    t_phase("H. CUDA graphs: a captured epoch launched many times");
    phase_graph(s, c, sb, rb, peer, mode, derr);
    if (t_rank == 0)
        printf("[partitioned] H ok\n"), fflush(stdout);

    T_MPI(MPI_Request_free(&ps));
    T_MPI(MPI_Request_free(&pr));
    gt_free(GT_DEVICE, out);
    gt_free(GT_DEVICE, in);

    gt_free(GT_DEVICE, sb);
    gt_free(GT_DEVICE, rb);
    GT_CUDA(cudaFree(derr));
    T_MPI(MPI_Comm_free(&c));
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
