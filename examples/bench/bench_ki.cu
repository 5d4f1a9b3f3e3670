/*
 * bench_ki.cu - mpixacc_bench's "ki" variant: kernel-initiated partitioned
 * communication (MPIX_Acc_Psend_init + mpix_acc_device.cuh).
 *
 *   latency    one epoch per repetition, partition i = round trip i: ONE
 *              kernel per rank runs all round trips (rank 0: copy the
 *              message into partition i, pready, wait for the answer;
 *              rank 1: wait, copy it into its partition i, pready) -- no
 *              host call and no launch per message. A warp moves messages
 *              up to 1 KiB, a block of 512 threads larger ones.
 *   bandwidth  one epoch per window, partition j = message j: a block per
 *              message readies it as soon as it is copied, the receiver's
 *              blocks wait for theirs.
 *   ki-value   the same with messages of 4..16 bytes passed as values
 *              (mpix_acc_pready_value, mpix_acc_parrived_wait_value), one
 *              thread: no partition is read back from memory.
 * The library's protocol between the two GPUs is reported (direct: LL lines
 * into the peer's slots; proxy: the progress thread sends each partition).
 */
#include <mpi.h>
#include <mpix_acc.h>
#include <mpix_acc_device.cuh>

#include <cuda_runtime.h>

#include <stdio.h>
#include <string.h>

#include "bench_ki.h"

#define KI_WARP_MAX 1024

static struct {
    int mode; /* 0: none, 1: latency, 2: bandwidth */
    size_t n;
    int parts;
    MPI_Request s, r;
    mpix_acc_dreq_t *ds, *dr;
    unsigned char *ks, *kr; /* partitions of the send / receive (latency) */
    int *err;
} ki;

#define KI_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, len, "%s: %s", #call, cudaGetErrorString(e_));                           \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
#define KI_MPI(call)                                                                               \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char s_[MPI_MAX_ERROR_STRING];                                                         \
            int l_ = 0;                                                                            \
            MPI_Error_string(rc_, s_, &l_);                                                        \
            snprintf(why, len, "%s: %s", #call, s_);                                               \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

template <mpix_acc_level L>
__device__ void ki_copy(unsigned char *dst, const unsigned char *src, size_t n)
{
    unsigned tid = L == MPIX_ACC_WARP ? threadIdx.x & 31u : threadIdx.x;
    unsigned nt = L == MPIX_ACC_WARP ? 32u : blockDim.x;
    if (((uintptr_t)dst | (uintptr_t)src | n) % 16 == 0) {
        for (size_t i = tid; i < n / 16; i += nt)
            ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
    } else {
        for (size_t i = tid; i < n; i += nt)
            dst[i] = src[i];
    }
}

template <mpix_acc_level L>
__global__ void ki_lat_kernel(mpix_acc_dreq_t *s, mpix_acc_dreq_t *r, unsigned char *ks,
                              const unsigned char *kr, const unsigned char *msg, size_t n,
                              int iters, int role, int *err)
{
    for (int i = 0; i < iters; i++) {
        unsigned char *out = ks + (size_t)i * n;
        if (role == 0) {
            ki_copy<L>(out, msg, n);
        } else {
            if (mpix_acc_parrived_wait<L>(r, i, 0) != MPIX_ACC_DSUCCESS) {
                *err = 1;
                return;
            }
            ki_copy<L>(out, kr + (size_t)i * n, n);
        }
        if (L == MPIX_ACC_WARP)
            __syncwarp();
        else
            __syncthreads();
        if (mpix_acc_pready<L>(s, i) != MPIX_ACC_DSUCCESS) {
            *err = 2;
            return;
        }
        if (role == 0 && mpix_acc_parrived_wait<L>(r, i, 0) != MPIX_ACC_DSUCCESS) {
            *err = 3;
            return;
        }
    }
}

__global__ void ki_bw_send_kernel(mpix_acc_dreq_t *s, unsigned char *ks, const unsigned char *msg,
                                  size_t n, int *err)
{
    int j = blockIdx.x;
    ki_copy<MPIX_ACC_BLOCK>(ks + (size_t)j * n, msg, n);
    __syncthreads();
    if (mpix_acc_pready<MPIX_ACC_BLOCK>(s, j) != MPIX_ACC_DSUCCESS)
        *err = 4;
}

__global__ void ki_bw_recv_kernel(mpix_acc_dreq_t *r, int *err)
{
    if (mpix_acc_parrived_wait<MPIX_ACC_BLOCK>(r, blockIdx.x, 0) != MPIX_ACC_DSUCCESS)
        *err = 5;
}

/* ki-value: the message as a value of K 4-byte words (4..16 bytes), one
 * thread per rank: mpix_acc_pready_value / mpix_acc_parrived_wait_value,
 * so neither side reads a partition back from memory. */
template <int K> struct ki_val {
    uint32_t w[K];
};

template <int K>
__global__ void ki_lat_value_kernel(mpix_acc_dreq_t *s, mpix_acc_dreq_t *r, const ki_val<K> *msg,
                                    int iters, int role, int *err)
{
    ki_val<K> v = *msg;
    for (int i = 0; i < iters; i++) {
        if (role == 1 && mpix_acc_parrived_wait_value(r, i, &v, 0) != MPIX_ACC_DSUCCESS) {
            *err = 1;
            return;
        }
        if (mpix_acc_pready_value(s, i, v) != MPIX_ACC_DSUCCESS) {
            *err = 2;
            return;
        }
        ki_val<K> a;
        if (role == 0 && mpix_acc_parrived_wait_value(r, i, &a, 0) != MPIX_ACC_DSUCCESS) {
            *err = 3;
            return;
        }
    }
}

template <int K>
__global__ void ki_bw_value_send_kernel(mpix_acc_dreq_t *s, const ki_val<K> *msg, int *err)
{
    if (mpix_acc_pready_value(s, (int)blockIdx.x, *msg) != MPIX_ACC_DSUCCESS)
        *err = 4;
}

template <int K> __global__ void ki_bw_value_recv_kernel(mpix_acc_dreq_t *r, int *err)
{
    ki_val<K> v;
    if (mpix_acc_parrived_wait_value(r, (int)blockIdx.x, &v, 0) != MPIX_ACC_DSUCCESS)
        *err = 5;
}

static void ki_free(void)
{
    if (ki.mode) {
        MPI_Request_free(&ki.s);
        MPI_Request_free(&ki.r);
        cudaFree(ki.ks);
        if (ki.kr)
            cudaFree(ki.kr);
    }
    ki.mode = 0;
    ki.ks = ki.kr = NULL;
}

/* Requests for `mode` with `parts` partitions of n bytes (re-made when any differs). */
static int ki_setup(MPI_Comm comm, int role, int mode, size_t n, int parts, void *rbuf, char *why,
                    size_t len)
{
    if (ki.mode == mode && ki.n == n && ki.parts == parts)
        return 0;
    ki_free();
    if (!ki.err)
        KI_CUDA(cudaMalloc(&ki.err, sizeof(int)));
    KI_CUDA(cudaMemset(ki.err, 0, sizeof(int)));
    size_t bytes = n * (size_t)parts;
    KI_CUDA(cudaMalloc(&ki.ks, bytes));
    void *recv = rbuf;
    if (mode == 1) {
        KI_CUDA(cudaMalloc(&ki.kr, bytes));
        recv = ki.kr;
    }
    int peer = 1 - role;
    KI_MPI(MPIX_Acc_Psend_init(ki.ks, parts, (MPI_Count)n, MPI_BYTE, peer, 91, comm, MPI_INFO_NULL,
                               &ki.s));
    KI_MPI(MPIX_Acc_Precv_init(recv, parts, (MPI_Count)n, MPI_BYTE, peer, 91, comm, MPI_INFO_NULL,
                               &ki.r));
    KI_MPI(MPIX_Acc_Prequest_get_device(ki.s, &ki.ds));
    KI_MPI(MPIX_Acc_Prequest_get_device(ki.r, &ki.dr));
    ki.mode = mode;
    ki.n = n;
    ki.parts = parts;
    return 0;
}

static int ki_check_err(char *why, size_t len)
{
    int e = 0;
    KI_CUDA(cudaMemcpy(&e, ki.err, sizeof e, cudaMemcpyDeviceToHost));
    if (e) {
        snprintf(why, len, "a device call failed (stage %d)", e);
        return -1;
    }
    return 0;
}

extern "C" int bench_ki_latency(MPI_Comm comm, int role, void *stream, const void *sbuf, void *rbuf,
                                size_t n, int iters, char *why, size_t len)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (ki_setup(comm, role, 1, n, iters, NULL, why, len) != 0)
        return -1;
    KI_MPI(MPIX_Acc_Start(s, &ki.r));
    KI_MPI(MPIX_Acc_Start(s, &ki.s));
    if (n <= KI_WARP_MAX)
        ki_lat_kernel<MPIX_ACC_WARP><<<1, 32, 0, s>>>(
            ki.ds, ki.dr, ki.ks, ki.kr, (const unsigned char *)sbuf, n, iters, role, ki.err);
    else
        ki_lat_kernel<MPIX_ACC_BLOCK><<<1, 512, 0, s>>>(
            ki.ds, ki.dr, ki.ks, ki.kr, (const unsigned char *)sbuf, n, iters, role, ki.err);
    KI_CUDA(cudaGetLastError());
    KI_MPI(MPIX_Acc_Wait(s, &ki.s, MPI_STATUS_IGNORE));
    KI_MPI(MPIX_Acc_Wait(s, &ki.r, MPI_STATUS_IGNORE));
    if (role == 0) /* the last answer, for the harness's check */
        KI_CUDA(
            cudaMemcpyAsync(rbuf, ki.kr + (size_t)(iters - 1) * n, n, cudaMemcpyDeviceToDevice, s));
    KI_CUDA(cudaStreamSynchronize(s));
    return ki_check_err(why, len);
}

#define KI_VALUE_SWITCH(n, launch)                                                                 \
    switch (n) {                                                                                   \
    case 4:                                                                                        \
        launch(1);                                                                                 \
        break;                                                                                     \
    case 8:                                                                                        \
        launch(2);                                                                                 \
        break;                                                                                     \
    case 12:                                                                                       \
        launch(3);                                                                                 \
        break;                                                                                     \
    default:                                                                                       \
        launch(4);                                                                                 \
        break;                                                                                     \
    }

extern "C" int bench_ki_value_ok(size_t n) { return n > 0 && n % 4 == 0 && n <= 16; }

/* ki_setup for ki-value, whose messages are 4, 8, 12 or 16 bytes */
static int ki_value_setup(MPI_Comm comm, int role, int mode, size_t n, int parts, void *rbuf,
                          char *why, size_t len)
{
    if (!bench_ki_value_ok(n)) {
        snprintf(why, len, "ki-value takes messages of 4, 8, 12 or 16 bytes, not %zu", n);
        return -1;
    }
    return ki_setup(comm, role, mode, n, parts, rbuf, why, len);
}

extern "C" int bench_ki_latency_value(MPI_Comm comm, int role, void *stream, const void *sbuf,
                                      void *rbuf, size_t n, int iters, char *why, size_t len)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (ki_value_setup(comm, role, 1, n, iters, NULL, why, len) != 0)
        return -1;
    KI_MPI(MPIX_Acc_Start(s, &ki.r));
    KI_MPI(MPIX_Acc_Start(s, &ki.s));
#define KI_LAT_VALUE(K)                                                                            \
    ki_lat_value_kernel<K>                                                                         \
        <<<1, 1, 0, s>>>(ki.ds, ki.dr, (const ki_val<K> *)sbuf, iters, role, ki.err)
    KI_VALUE_SWITCH(n, KI_LAT_VALUE)
#undef KI_LAT_VALUE
    KI_CUDA(cudaGetLastError());
    KI_MPI(MPIX_Acc_Wait(s, &ki.s, MPI_STATUS_IGNORE));
    KI_MPI(MPIX_Acc_Wait(s, &ki.r, MPI_STATUS_IGNORE));
    if (role == 0) /* the last answer (also in the receive buffer), for the check */
        KI_CUDA(
            cudaMemcpyAsync(rbuf, ki.kr + (size_t)(iters - 1) * n, n, cudaMemcpyDeviceToDevice, s));
    KI_CUDA(cudaStreamSynchronize(s));
    return ki_check_err(why, len);
}

extern "C" int bench_ki_bandwidth_value(MPI_Comm comm, int role, void *stream, const void *sbuf,
                                        void *rbuf, size_t n, int window, int windows, char *why,
                                        size_t len)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (ki_value_setup(comm, role, 2, n, window, rbuf, why, len) != 0)
        return -1;
#define KI_BW_VALUE_SEND(K)                                                                        \
    ki_bw_value_send_kernel<K><<<window, 1, 0, s>>>(ki.ds, (const ki_val<K> *)sbuf, ki.err)
#define KI_BW_VALUE_RECV(K) ki_bw_value_recv_kernel<K><<<window, 1, 0, s>>>(ki.dr, ki.err)
    for (int k = 0; k < windows; k++) {
        if (role == 0) {
            KI_MPI(MPIX_Acc_Start(s, &ki.s));
            KI_VALUE_SWITCH(n, KI_BW_VALUE_SEND)
            KI_MPI(MPIX_Acc_Wait(s, &ki.s, MPI_STATUS_IGNORE));
        } else {
            KI_MPI(MPIX_Acc_Start(s, &ki.r));
            KI_VALUE_SWITCH(n, KI_BW_VALUE_RECV)
            KI_MPI(MPIX_Acc_Wait(s, &ki.r, MPI_STATUS_IGNORE));
        }
    }
#undef KI_BW_VALUE_SEND
#undef KI_BW_VALUE_RECV
    KI_CUDA(cudaGetLastError());
    KI_CUDA(cudaStreamSynchronize(s));
    return ki_check_err(why, len);
}

extern "C" int bench_ki_bandwidth(MPI_Comm comm, int role, void *stream, const void *sbuf,
                                  void *rbuf, size_t n, int window, int windows, char *why,
                                  size_t len)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (ki_setup(comm, role, 2, n, window, rbuf, why, len) != 0)
        return -1;
    for (int k = 0; k < windows; k++) {
        if (role == 0) {
            KI_MPI(MPIX_Acc_Start(s, &ki.s));
            ki_bw_send_kernel<<<window, 512, 0, s>>>(ki.ds, ki.ks, (const unsigned char *)sbuf, n,
                                                     ki.err);
            KI_MPI(MPIX_Acc_Wait(s, &ki.s, MPI_STATUS_IGNORE));
        } else {
            KI_MPI(MPIX_Acc_Start(s, &ki.r));
            ki_bw_recv_kernel<<<window, 512, 0, s>>>(ki.dr, ki.err);
            KI_MPI(MPIX_Acc_Wait(s, &ki.r, MPI_STATUS_IGNORE));
        }
    }
    KI_CUDA(cudaStreamSynchronize(s));
    return ki_check_err(why, len);
}

extern "C" const char *bench_ki_protocol(void)
{
    if (!ki.mode)
        return "not set up";
    mpix_acc_dreq_t h;
    if (cudaMemcpy(&h, ki.dr, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess)
        return "unknown";
    return h.mode == MPIX_ACC_DREQ_DIRECT  ? "direct"
           : h.mode == MPIX_ACC_DREQ_PROXY ? "proxy"
                                           : "pending";
}

extern "C" void bench_ki_teardown(void) { ki_free(); }
