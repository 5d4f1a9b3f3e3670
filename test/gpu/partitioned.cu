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
 *
 * Options: --timeout=S, --expect=direct|proxy, --epochs=N, --pp=N (round trips of B)
 */
#include "gpu_common.h"

#include <mpix_acc_device.cuh>

#define NP 8
#define PB (4096 + 12)

__device__ unsigned char pat(int src, int ep, int p, size_t i)
{
    return (unsigned char)(src * 31 + ep * 7 + p * 13 + (int)(i * 5 % 251));
}

__global__ void send_kernel(mpix_acc_dreq_t *r, unsigned char *buf, int src, int ep, int *errors)
{
    int p = blockIdx.x;
    for (size_t i = threadIdx.x; i < PB; i += blockDim.x)
        buf[(size_t)p * PB + i] = pat(src, ep, p, i);
    __syncthreads();
    int rc = mpix_acc_pready<MPIX_ACC_BLOCK>(r, p);
    if (rc != MPIX_ACC_DSUCCESS && threadIdx.x == 0)
        atomicAdd(errors, 1000 + rc);
}

__global__ void recv_kernel(mpix_acc_dreq_t *r, const unsigned char *buf, int src, int ep,
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
    T_MPI(MPIX_Acc_Precv_init(rb, NP, PB, MPI_BYTE, peer, 1, c, MPI_INFO_NULL, &rq[0]));
    T_MPI(MPIX_Acc_Psend_init(sb, NP, PB, MPI_BYTE, peer, 1, c, MPI_INFO_NULL, &rq[1]));
    mpix_acc_dreq_t *dr, *ds;
    T_MPI(MPIX_Acc_Prequest_get_device(rq[0], &dr));
    T_MPI(MPIX_Acc_Prequest_get_device(rq[1], &ds));
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
