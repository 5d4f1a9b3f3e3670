/*
 * bench_floor.cu - mpixacc_bench's "floor" variant (see bench.h).
 */
#include "bench.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*wait64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*write64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

static struct {
    int ok, dev[2];
    cudaStream_t s[2];
    cudaEvent_t e0, e1;
    unsigned char *a0, *a1; /* on dev[0]: data out, data back */
    unsigned char *b;       /* on dev[1] */
    unsigned char *host_out, *host_back;
    size_t max;
    volatile uint64_t *flags; /* [0]: A waits on it, [1]: B waits on it */
    uint64_t epoch;
    wait64_fn wait64;
    write64_fn write64;
} fl;

#define FL_CHECK(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, whylen, "%s: %s", #call, cudaGetErrorString(e_));                        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t j = 0; j < n; j++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[j] = (unsigned char)x;
    }
}

static unsigned long long diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    unsigned long long d = 0;
    for (size_t j = 0; j < n; j++)
        d += a[j] != b[j];
    return d;
}

/* Everything but the check round trip of bench_floor_setup: 0, or -1 with
 * why. */
static int floor_setup(size_t max_bytes, int *peer, char *why, size_t whylen)
{
    int ndev = 0, dev0 = 0;
    memset(&fl, 0, sizeof fl);
    FL_CHECK(cudaGetDeviceCount(&ndev));
    FL_CHECK(cudaGetDevice(&dev0));
    fl.dev[0] = dev0;
    fl.dev[1] = ndev > 1 ? (dev0 + 1) % ndev : dev0;
    fl.max = max_bytes ? max_bytes : 1;

    cudaDriverEntryPointQueryResult q1, q2;
    void *w = NULL, *wr = NULL;
    FL_CHECK(
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &w, 12000, cudaEnableDefault, &q1));
    FL_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &wr, 12000, cudaEnableDefault,
                                              &q2));
    if (q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess || !w || !wr) {
        snprintf(why, whylen, "driver has no cuStreamWaitValue64/cuStreamWriteValue64");
        return -1;
    }
    fl.wait64 = (wait64_fn)w;
    fl.write64 = (write64_fn)wr;

    *peer = 1;
    if (fl.dev[1] != fl.dev[0]) {
        FL_CHECK(cudaDeviceCanAccessPeer(peer, fl.dev[0], fl.dev[1]));
        if (*peer) {
            FL_CHECK(cudaSetDevice(fl.dev[0]));
            cudaError_t e = cudaDeviceEnablePeerAccess(fl.dev[1], 0);
            if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
                FL_CHECK(e);
            FL_CHECK(cudaSetDevice(fl.dev[1]));
            e = cudaDeviceEnablePeerAccess(fl.dev[0], 0);
            if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
                FL_CHECK(e);
            (void)cudaGetLastError();
        }
    }
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CHECK(cudaStreamCreateWithFlags(&fl.s[1], cudaStreamNonBlocking));
    FL_CHECK(cudaMalloc(&fl.b, fl.max));
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaStreamCreateWithFlags(&fl.s[0], cudaStreamNonBlocking));
    FL_CHECK(cudaMalloc(&fl.a0, fl.max));
    FL_CHECK(cudaMalloc(&fl.a1, fl.max));
    FL_CHECK(cudaEventCreate(&fl.e0));
    FL_CHECK(cudaEventCreate(&fl.e1));
    void *f = NULL;
    FL_CHECK(cudaHostAlloc(&f, 2 * sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    fl.flags = (volatile uint64_t *)f;
    fl.flags[0] = fl.flags[1] = 0;
    fl.host_out = (unsigned char *)malloc(fl.max);
    fl.host_back = (unsigned char *)malloc(fl.max);
    if (!fl.host_out || !fl.host_back) {
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    return 0;
}

extern "C" int bench_floor_setup(size_t max_bytes, char *desc, size_t desclen, char *why,
                                 size_t whylen)
{
    int peer = 0;
    if (floor_setup(max_bytes, &peer, why, whylen) != 0)
        return 0;
    /* One round trip to check that the memory operations work here. */
    double h;
    unsigned long long err = 0;
    fl.ok = 1;
    if (bench_floor_latency(1, 1, 1, &h, &err, why, whylen) != 0 || err) {
        if (!why[0])
            snprintf(why, whylen, "flag round trip returned wrong data");
        fl.ok = 0;
        return 0;
    }
    snprintf(desc, desclen, "GPU %d <-> GPU %d, %s, flags in host-mapped memory", fl.dev[0],
             fl.dev[1],
             fl.dev[0] == fl.dev[1] ? "same GPU"
             : peer                 ? "peer access on"
                                    : "no peer access");
    return 1;
}

/* Stream `side` waits until its own flag reaches v. */
static CUresult enqueue_wait(int side, uint64_t v)
{
    return fl.wait64((CUstream)fl.s[side], (CUdeviceptr)(uintptr_t)&fl.flags[side], v,
                     CU_STREAM_WAIT_VALUE_GEQ);
}

/* Stream `side` writes v into the OTHER side's flag (releasing it). */
static CUresult enqueue_signal_other(int side, uint64_t v)
{
    return fl.write64((CUstream)fl.s[side], (CUdeviceptr)(uintptr_t)&fl.flags[1 - side], v, 0);
}

#define FL_CU(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            snprintf(why, whylen, "%s: CUresult %d", #call, (int)r_);                              \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* Before a repetition: a new pattern in a0, the destination (on device
 * dest_dev) zeroed, both devices idle, device 0 current. */
static int floor_prepare(size_t n, int iters, unsigned seed, void *dest, int dest_dev, char *why,
                         size_t whylen)
{
    if (!fl.ok || n > fl.max || iters < 1) {
        snprintf(why, whylen, "floor not set up for %zu bytes", n);
        return -1;
    }
    fill(fl.host_out, n, seed);
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaMemcpy(fl.a0, fl.host_out, n, cudaMemcpyHostToDevice));
    FL_CHECK(cudaSetDevice(dest_dev));
    FL_CHECK(cudaMemset(dest, 0, n));
    FL_CHECK(cudaDeviceSynchronize());
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaDeviceSynchronize());
    return 0;
}

extern "C" int bench_floor_latency(size_t n, int iters, unsigned seed, double *half_us,
                                   unsigned long long *errors, char *why, size_t whylen)
{
    if (floor_prepare(n, iters, seed, fl.a1, fl.dev[0], why, whylen) != 0)
        return -1;
    uint64_t base = fl.epoch;
    FL_CHECK(cudaEventRecord(fl.e0, fl.s[0]));
    for (int i = 1; i <= iters; i++) {
        /* A: payload to B, flag B, wait for B's flag (enqueued per
         * iteration on both streams, so a full queue never stalls the
         * host ahead of the other stream's work) */
        FL_CHECK(cudaSetDevice(fl.dev[0]));
        FL_CHECK(cudaMemcpyPeerAsync(fl.b, fl.dev[1], fl.a0, fl.dev[0], n, fl.s[0]));
        FL_CU(enqueue_signal_other(0, base + (uint64_t)i)); /* A releases B */
        FL_CU(enqueue_wait(0, base + (uint64_t)i));         /* A waits for B */
        FL_CHECK(cudaSetDevice(fl.dev[1]));
        FL_CU(enqueue_wait(1, base + (uint64_t)i));
        FL_CHECK(cudaMemcpyPeerAsync(fl.a1, fl.dev[0], fl.b, fl.dev[1], n, fl.s[1]));
        FL_CU(enqueue_signal_other(1, base + (uint64_t)i)); /* B releases A */
    }
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaEventRecord(fl.e1, fl.s[0]));
    FL_CHECK(cudaStreamSynchronize(fl.s[0]));
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CHECK(cudaStreamSynchronize(fl.s[1]));
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    fl.epoch = base + (uint64_t)iters;
    float ms = 0;
    FL_CHECK(cudaEventElapsedTime(&ms, fl.e0, fl.e1));
    *half_us = 1e3 * (double)ms / (2.0 * iters);
    FL_CHECK(cudaMemcpy(fl.host_back, fl.a1, n, cudaMemcpyDeviceToHost));
    *errors = diff(fl.host_out, fl.host_back, n);
    return 0;
}

extern "C" int bench_floor_bandwidth(size_t n, int iters, unsigned seed, double *gbs,
                                     unsigned long long *errors, char *why, size_t whylen)
{
    if (floor_prepare(n, iters, seed, fl.b, fl.dev[1], why, whylen) != 0)
        return -1;
    FL_CHECK(cudaEventRecord(fl.e0, fl.s[0]));
    for (int i = 0; i < iters; i++)
        FL_CHECK(cudaMemcpyPeerAsync(fl.b, fl.dev[1], fl.a0, fl.dev[0], n, fl.s[0]));
    FL_CHECK(cudaEventRecord(fl.e1, fl.s[0]));
    FL_CHECK(cudaStreamSynchronize(fl.s[0]));
    float ms = 0;
    FL_CHECK(cudaEventElapsedTime(&ms, fl.e0, fl.e1));
    *gbs = (double)n * iters / (1e-3 * (double)ms) / 1e9;
    FL_CHECK(cudaMemcpy(fl.host_back, fl.b, n, cudaMemcpyDefault));
    *errors = diff(fl.host_out, fl.host_back, n);
    return 0;
}

extern "C" void bench_floor_teardown(void)
{
    if (fl.s[1]) {
        cudaSetDevice(fl.dev[1]);
        cudaStreamSynchronize(fl.s[1]);
        cudaStreamDestroy(fl.s[1]);
        cudaFree(fl.b);
    }
    cudaSetDevice(fl.dev[0]);
    if (fl.s[0]) {
        cudaStreamSynchronize(fl.s[0]);
        cudaStreamDestroy(fl.s[0]);
        cudaFree(fl.a0);
        cudaFree(fl.a1);
        cudaEventDestroy(fl.e0);
        cudaEventDestroy(fl.e1);
    }
    if (fl.flags)
        cudaFreeHost((void *)fl.flags);
    free(fl.host_out);
    free(fl.host_back);
    memset(&fl, 0, sizeof fl);
}
