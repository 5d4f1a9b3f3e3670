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
#include <time.h>

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

/* ------------------------------------------------------------------ */
/* the kernel floors: floor-spin and floor-fused (see bench.h)          */

#define KF_THREADS 256           /* threads per block of the hop kernel */
#define KF_SEGMENT 32            /* round trips per gated segment */
#define KF_SPIN_NS 2000000000ull /* a spin gives up after 2 s */
#define KF_HOST_WAIT_S 30.0      /* the host's limit for one segment */

/* Host-mapped, seen by both GPUs and the host. */
typedef struct {
    uint64_t gate;       /* the host opens segment g by writing g here */
    unsigned abort;      /* set by a spin that gave up: the others give up too */
    int side;            /* what the spin that timed out waited for (0: A, 1: B), */
    uint64_t want, seen; /* which flag value, and the value it saw last */
} kf_ctl_t;

static struct {
    int ok[2];             /* per mode */
    char text[2][320];     /* per mode: description, or why it cannot run */
    int one_block;         /* one GPU: the fused kernel is a single block */
    int sms[2];            /* per side */
    unsigned char *mem[2]; /* per side, on its GPU: the flag the other side
                            * raises (byte 0), the hop kernel's block counter
                            * (byte 128) */
    uint64_t *flag[2];
    unsigned *done[2];
    unsigned char *a0x; /* on dev[0]: the second pattern (a0's bytes ^ 0xff) */
    kf_ctl_t *ctl;      /* host view */
    kf_ctl_t *ctl_d;    /* device view */
    cudaEvent_t e0, e1, eb;
    uint64_t gate; /* last gate value used */
    int stuck;     /* a segment did not drain: no more GPU calls */
} kf;

__device__ __forceinline__ uint64_t kf_now_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint64_t kf_ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void kf_st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Spin until *flag >= v (wrap-safe). Every 1024 polls: give up when another
 * spin gave up (ctl->abort), or after KF_SPIN_NS, then recording what was
 * awaited and raising ctl->abort. The host-mapped ctl is read only on that
 * slow path, never on the way of a flag that is already there. */
__device__ bool kf_spin(const uint64_t *flag, uint64_t v, kf_ctl_t *ctl, int side)
{
    volatile kf_ctl_t *c = ctl;
    uint64_t t0 = 0;
    for (unsigned k = 0;; k++) {
        uint64_t f = kf_ld_acquire_sys(flag);
        if ((int64_t)(f - v) >= 0)
            return true;
        if ((k & 1023u) != 1023u)
            continue;
        if (c->abort)
            return false;
        uint64_t t = kf_now_ns();
        if (t0 == 0) {
            t0 = t;
        } else if (t - t0 > KF_SPIN_NS) {
            c->side = side;
            c->want = v;
            c->seen = f;
            __threadfence_system();
            c->abort = 1;
            __threadfence_system();
            return false;
        }
    }
}

/* The receive of floor-spin: one thread waits for the flag. */
__global__ void kf_spin_kernel(const uint64_t *my_flag, uint64_t v, kf_ctl_t *ctl, int side)
{
    kf_spin(my_flag, v, ctl, side);
}

/* One hop: (wait_v != 0: thread 0 of every block first spins until my_flag
 * >= wait_v, the fused receive) copy n bytes src -> dst (dst in the peer's
 * memory), then raise peer_flag to v with a release store, once every
 * block's stores are fenced at system scope (the last block to count itself
 * in done raises it and resets done for the next hop on this stream). The
 * source is read through L2 (ld.cg): it may just have been written by the
 * peer. Buffers come from cudaMalloc (16-byte aligned). */
__global__ void kf_hop_kernel(const uint64_t *my_flag, uint64_t wait_v, const unsigned char *src,
                              unsigned char *dst, size_t n, unsigned *done, uint64_t *peer_flag,
                              uint64_t v, kf_ctl_t *ctl, int side)
{
    __shared__ int go;
    if (wait_v != 0) {
        if (threadIdx.x == 0)
            go = kf_spin(my_flag, wait_v, ctl, side);
        __syncthreads();
        if (!go)
            return;
    }
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x, n16 = n / 16, rest = n - n16 * 16;
    const uint4 *s16 = (const uint4 *)src;
    uint4 *d16 = (uint4 *)dst;
    for (size_t i = tid; i < n16; i += stride)
        d16[i] = __ldcg(s16 + i);
    if (tid < rest)
        dst[n16 * 16 + tid] = __ldcg(src + n16 * 16 + tid);
    __threadfence_system(); /* this thread's payload stores before the flag */
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (gridDim.x > 1) {
        if (atomicAdd(done, 1u) != gridDim.x - 1)
            return;
        *done = 0;
        __threadfence_system(); /* every block's stores (they counted after theirs) */
    }
    kf_st_release_sys(peer_flag, v);
}

static double kf_wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wait for event e (on device dev) for at most KF_HOST_WAIT_S. A stream
 * that makes no progress that long sets kf.stuck: no CUDA call that could
 * wait on it is made again (teardown included). */
static int kf_wait_event(cudaEvent_t e, int dev, const char *what, char *why, size_t whylen)
{
    FL_CHECK(cudaSetDevice(dev));
    double t0 = kf_wall_s();
    for (;;) {
        cudaError_t r = cudaEventQuery(e);
        if (r == cudaSuccess)
            return 0;
        if (r != cudaErrorNotReady) {
            snprintf(why, whylen, "%s: GPU %d: %s", what, dev, cudaGetErrorString(r));
            return -1;
        }
        if (kf_wall_s() - t0 > KF_HOST_WAIT_S) {
            kf.stuck = 1;
            snprintf(why, whylen, "%s: GPU %d's stream made no progress in %.0f s", what, dev,
                     KF_HOST_WAIT_S);
            return -1;
        }
        struct timespec d = {0, 20000};
        nanosleep(&d, NULL);
    }
}

/* Grid of a hop kernel sent by side s: ~4 uint4 per thread, at most 2
 * blocks per SM; one block for the fused kernel on one GPU. */
static int kf_grid(int mode, int s, size_t n)
{
    if (mode == BENCH_FLOOR_FUSED && kf.one_block)
        return 1;
    size_t b = (n / 16 + 4 * KF_THREADS - 1) / (4 * KF_THREADS), cap = 2 * (size_t)kf.sms[s];
    return (int)(b < 1 ? 1 : b > cap ? cap : b);
}

/* Everything but the check round trip of bench_floor_setup: 0, or -1 with
 * why. */
static int floor_setup(size_t max_bytes, int *peer, char *why, size_t whylen)
{
    int ndev = 0, dev0 = 0;
    memset(&fl, 0, sizeof fl);
    memset(&kf, 0, sizeof kf);
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

static void kf_setup(int peer);

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
    /* the kernel floors: what fails there disables only them */
    kf_setup(peer);
    if (kf.stuck) {
        snprintf(why, whylen, "the kernel floors' check left a GPU stream stuck: %s", kf.text[0]);
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
    if (kf.stuck) {
        snprintf(why, whylen, "a kernel floor run left a GPU stream stuck");
        return -1;
    }
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

/* ------------------------------------------------------------------ */
/* the kernel floors, host side                                        */

/* One GPU (dev[0] == dev[1], two streams): can the spinning kernels
 * deadlock? A spinning kernel only finishes once the kernel it waits for,
 * on the other stream, has run. floor-spin: the spins are 1-thread kernels
 * and the copy kernels never wait, so at most two spins (one per stream)
 * are resident while the copy kernel they wait for runs on the rest of the
 * GPU. floor-fused: the hop kernel itself spins, so on one GPU it is a
 * single block (kf.one_block): one fused kernel per stream, two blocks in
 * all, which always fit beside each other. Both need the GPU to run
 * kernels of two streams concurrently (cudaDevAttrConcurrentKernels; not
 * there: the rows are skipped with that reason) and the two streams on
 * distinct hardware queues (they are created one after the other; with
 * CUDA_DEVICE_MAX_CONNECTIONS=1 they would share one, a spin would then
 * block its own sender, give up after 2 s and fail the row, not hang). On
 * two GPUs each GPU runs one kernel at a time and every spin waits for the
 * other GPU, so neither the grid size nor concurrency matters there. */
static int kf_alloc(int same, char *why, size_t whylen)
{
    if (same) {
        int ck = 0;
        FL_CHECK(cudaDeviceGetAttribute(&ck, cudaDevAttrConcurrentKernels, fl.dev[0]));
        if (!ck) {
            snprintf(why, whylen,
                     "one GPU that runs no kernels concurrently: a spinning kernel would block "
                     "the kernel it waits for");
            return -1;
        }
    }
    for (int s = 0; s < 2; s++) {
        cudaFuncAttributes fa;
        FL_CHECK(cudaSetDevice(fl.dev[s]));
        FL_CHECK(cudaDeviceGetAttribute(&kf.sms[s], cudaDevAttrMultiProcessorCount, fl.dev[s]));
        FL_CHECK(cudaMalloc(&kf.mem[s], 256));
        FL_CHECK(cudaMemset(kf.mem[s], 0, 256));
        kf.flag[s] = (uint64_t *)kf.mem[s];
        kf.done[s] = (unsigned *)(kf.mem[s] + 128);
        /* load both kernels now: under CUDA_MODULE_LOADING=LAZY the first
         * launch would load them while a spinning kernel runs */
        FL_CHECK(cudaFuncGetAttributes(&fa, kf_spin_kernel));
        FL_CHECK(cudaFuncGetAttributes(&fa, kf_hop_kernel));
        if (fa.maxThreadsPerBlock < KF_THREADS) {
            snprintf(why, whylen, "the hop kernel runs at most %d threads per block on GPU %d",
                     fa.maxThreadsPerBlock, fl.dev[s]);
            return -1;
        }
    }
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CHECK(cudaEventCreateWithFlags(&kf.eb, cudaEventDisableTiming));
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaEventCreate(&kf.e0));
    FL_CHECK(cudaEventCreate(&kf.e1));
    FL_CHECK(cudaMalloc(&kf.a0x, fl.max));
    void *c = NULL, *cd = NULL;
    FL_CHECK(cudaHostAlloc(&c, sizeof(kf_ctl_t), cudaHostAllocMapped | cudaHostAllocPortable));
    memset(c, 0, sizeof(kf_ctl_t));
    kf.ctl = (kf_ctl_t *)c;
    FL_CHECK(cudaHostGetDevicePointer(&cd, c, 0));
    kf.ctl_d = (kf_ctl_t *)cd;
    kf.one_block = same;
    return 0;
}

static void kf_free(void)
{
    for (int s = 0; s < 2; s++)
        if (kf.mem[s]) {
            cudaSetDevice(fl.dev[s]);
            cudaFree(kf.mem[s]);
        }
    if (kf.eb) {
        cudaSetDevice(fl.dev[1]);
        cudaEventDestroy(kf.eb);
    }
    cudaSetDevice(fl.dev[0]);
    if (kf.e0)
        cudaEventDestroy(kf.e0);
    if (kf.e1)
        cudaEventDestroy(kf.e1);
    if (kf.a0x)
        cudaFree(kf.a0x);
    if (kf.ctl)
        cudaFreeHost(kf.ctl);
}

static const char *const kf_name[2] = {"floor-spin", "floor-fused"};

/* Before a repetition: both patterns in place (a0: P, a0x: P ^ 0xff),
 * destinations, flags and block counters zeroed, both devices idle. */
static int kf_prepare(int mode, size_t n, int iters, unsigned seed, char *why, size_t whylen)
{
    if (mode < 0 || mode > 1 || !fl.ok || !kf.ok[mode] || kf.stuck || n > fl.max || iters < 1) {
        snprintf(why, whylen, "%s not set up for %zu bytes",
                 mode == BENCH_FLOOR_FUSED ? kf_name[1] : kf_name[0], n);
        return -1;
    }
    fill(fl.host_out, n, seed);
    for (size_t j = 0; j < n; j++)
        fl.host_back[j] = (unsigned char)(fl.host_out[j] ^ 0xffu);
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CHECK(cudaMemset(fl.b, 0, n));
    FL_CHECK(cudaMemset(kf.mem[1], 0, 256));
    FL_CHECK(cudaDeviceSynchronize());
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaMemcpy(fl.a0, fl.host_out, n, cudaMemcpyHostToDevice));
    FL_CHECK(cudaMemcpy(kf.a0x, fl.host_back, n, cudaMemcpyHostToDevice));
    FL_CHECK(cudaMemset(fl.a1, 0, n));
    FL_CHECK(cudaMemset(kf.mem[0], 0, 256));
    FL_CHECK(cudaDeviceSynchronize());
    volatile kf_ctl_t *c = kf.ctl;
    c->abort = 0;
    c->side = -1;
    c->want = c->seen = 0;
    return 0;
}

/* Round trips v0+1 .. v0+cnt on both streams. Round trip v: A sends
 * pattern P (v odd) or P ^ 0xff (v even) from dev[0] to b on dev[1]; B sends
 * b back to a1 on dev[0].
 *   spin:  A: hop(v), spin(A's flag >= v)     B: spin(B's flag >= v), hop(v)
 *   fused: A: wait for reply v-1 + hop(v)     B: wait for v + hop(v)
 *          and, after the last, A: spin(A's flag >= last) */
static int kf_enqueue(int mode, size_t n, uint64_t v0, int cnt, char *why, size_t whylen)
{
    int ga = kf_grid(mode, 0, n), gb = kf_grid(mode, 1, n), spin = mode == BENCH_FLOOR_SPIN;
    uint64_t v = v0;
    for (int k = 0; k < cnt; k++) {
        v++;
        const unsigned char *src = (v & 1) ? fl.a0 : kf.a0x;
        FL_CHECK(cudaSetDevice(fl.dev[0]));
        kf_hop_kernel<<<ga, KF_THREADS, 0, fl.s[0]>>>(kf.flag[0], spin ? 0 : v - 1, src, fl.b, n,
                                                      kf.done[0], kf.flag[1], v, kf.ctl_d, 0);
        if (spin)
            kf_spin_kernel<<<1, 1, 0, fl.s[0]>>>(kf.flag[0], v, kf.ctl_d, 0);
        FL_CHECK(cudaGetLastError());
        FL_CHECK(cudaSetDevice(fl.dev[1]));
        if (spin)
            kf_spin_kernel<<<1, 1, 0, fl.s[1]>>>(kf.flag[1], v, kf.ctl_d, 1);
        kf_hop_kernel<<<gb, KF_THREADS, 0, fl.s[1]>>>(kf.flag[1], spin ? 0 : v, fl.b, fl.a1, n,
                                                      kf.done[1], kf.flag[0], v, kf.ctl_d, 1);
        FL_CHECK(cudaGetLastError());
    }
    if (!spin) {
        FL_CHECK(cudaSetDevice(fl.dev[0]));
        kf_spin_kernel<<<1, 1, 0, fl.s[0]>>>(kf.flag[0], v, kf.ctl_d, 0);
        FL_CHECK(cudaGetLastError());
    }
    return 0;
}

/* One segment behind gate g: both streams wait for the gate (a stream
 * memory operation on the host-mapped word), A records e0 when it passes,
 * the round trips follow, A records e1 after the last reply, B records eb.
 * Nothing runs before the host opens the gate, so the GPU time between e0
 * and e1 holds no host launch cost. */
static int kf_segment(int mode, size_t n, uint64_t v0, int cnt, uint64_t g, char *why,
                      size_t whylen)
{
    CUdeviceptr gate = (CUdeviceptr)(uintptr_t)&kf.ctl_d->gate;
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CU(fl.wait64((CUstream)fl.s[0], gate, g, CU_STREAM_WAIT_VALUE_GEQ));
    FL_CHECK(cudaEventRecord(kf.e0, fl.s[0]));
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CU(fl.wait64((CUstream)fl.s[1], gate, g, CU_STREAM_WAIT_VALUE_GEQ));
    if (kf_enqueue(mode, n, v0, cnt, why, whylen) != 0)
        return -1;
    FL_CHECK(cudaSetDevice(fl.dev[0]));
    FL_CHECK(cudaEventRecord(kf.e1, fl.s[0]));
    FL_CHECK(cudaSetDevice(fl.dev[1]));
    FL_CHECK(cudaEventRecord(kf.eb, fl.s[1]));
    return 0;
}

/* After a failed enqueue (the gate already open): make every queued spin
 * give up, and wait until both streams are idle. */
static void kf_drain(void)
{
    char w[200];
    cudaEvent_t ev[2] = {kf.e1, kf.eb};
    ((volatile kf_ctl_t *)kf.ctl)->abort = 1;
    for (int s = 0; s < 2 && !kf.stuck; s++)
        if (cudaSetDevice(fl.dev[s]) == cudaSuccess &&
            cudaEventRecord(ev[s], fl.s[s]) == cudaSuccess)
            kf_wait_event(ev[s], fl.dev[s], "drain", w, sizeof w);
    cudaSetDevice(fl.dev[0]);
}

extern "C" int bench_floor_kernel_latency(int mode, size_t n, int iters, unsigned seed,
                                          double *half_us, unsigned long long *errors, char *why,
                                          size_t whylen)
{
    if (kf_prepare(mode, n, iters, seed, why, whylen) != 0)
        return -1;
    volatile kf_ctl_t *c = kf.ctl;
    double ms_sum = 0;
    unsigned long long bad = 0;
    uint64_t v = 0;
    for (int left = iters; left > 0;) {
        int cnt = left < KF_SEGMENT ? left : KF_SEGMENT;
        uint64_t g = ++kf.gate;
        int rc = kf_segment(mode, n, v, cnt, g, why, whylen);
        __atomic_store_n(&kf.ctl->gate, g, __ATOMIC_SEQ_CST); /* open the gate */
        if (rc != 0) {
            kf_drain();
            return -1;
        }
        if (kf_wait_event(kf.e1, fl.dev[0], kf_name[mode], why, whylen) != 0 ||
            kf_wait_event(kf.eb, fl.dev[1], kf_name[mode], why, whylen) != 0)
            return -1;
        if (c->abort) {
            int side = c->side;
            snprintf(why, whylen,
                     "a spinning receive on GPU %d gave up after 2 s waiting for %s %llu (its "
                     "flag stayed at %llu), round trips %llu-%llu of this repetition",
                     fl.dev[side == 1 ? 1 : 0], side == 1 ? "message" : "reply",
                     (unsigned long long)c->want, (unsigned long long)c->seen,
                     (unsigned long long)v + 1, (unsigned long long)v + (unsigned long long)cnt);
            return -1;
        }
        float ms = 0;
        FL_CHECK(cudaSetDevice(fl.dev[0]));
        FL_CHECK(cudaEventElapsedTime(&ms, kf.e0, kf.e1));
        ms_sum += (double)ms;
        v += (uint64_t)cnt;
        left -= cnt;
        /* the segment's last reply, in full: pattern P ^ 0xff after an even
         * round trip, so data of the round trip before cannot pass */
        FL_CHECK(cudaMemcpy(fl.host_back, fl.a1, n, cudaMemcpyDeviceToHost));
        unsigned char x = (v & 1) ? 0 : 0xff;
        for (size_t j = 0; j < n; j++)
            bad += fl.host_back[j] != (unsigned char)(fl.host_out[j] ^ x);
    }
    *half_us = 1e3 * ms_sum / (2.0 * iters);
    *errors = bad;
    return 0;
}

extern "C" int bench_floor_kernel_available(int mode, char *text, size_t len)
{
    if (mode < 0 || mode > 1) {
        snprintf(text, len, "no such kernel floor");
        return 0;
    }
    if (!fl.ok || kf.stuck) {
        snprintf(text, len, "the floor is not set up");
        return 0;
    }
    snprintf(text, len, "%s", kf.text[mode]);
    return kf.ok[mode];
}

/* After the latency floor's check round trip: set up the kernel floors
 * and check each with two round trips (multi-block when the sizes allow). A
 * mode that fails gets its reason in kf.text. */
static void kf_setup(int peer)
{
    char why[256] = "";
    int same = fl.dev[0] == fl.dev[1];
    if (!same && !peer) {
        for (int m = 0; m < 2; m++)
            snprintf(kf.text[m], sizeof kf.text[m],
                     "GPU %d and GPU %d have no peer access (the kernels store into the other "
                     "GPU's memory)",
                     fl.dev[0], fl.dev[1]);
        return;
    }
    if (kf_alloc(same, why, sizeof why) != 0) {
        for (int m = 0; m < 2; m++)
            snprintf(kf.text[m], sizeof kf.text[m], "%s", why);
        return;
    }
    size_t n = fl.max < 262151 ? fl.max : 262151; /* 256 KiB + 7: blocks and tail bytes */
    for (int m = 0; m < 2 && !kf.stuck; m++) {
        double h = 0;
        unsigned long long err = 0;
        why[0] = '\0';
        kf.ok[m] = 1;
        if (bench_floor_kernel_latency(m, n, 2, 1, &h, &err, why, sizeof why) != 0 || err) {
            kf.ok[m] = 0;
            if (err)
                snprintf(kf.text[m], sizeof kf.text[m],
                         "check round trips (%zu B) returned %llu wrong bytes", n, err);
            else
                snprintf(kf.text[m], sizeof kf.text[m], "check round trips failed: %s", why);
            continue;
        }
        if (m == BENCH_FLOOR_SPIN)
            snprintf(kf.text[m], sizeof kf.text[m],
                     "copy kernel (1 block up to 16 KiB, at most %d blocks) stores payload + "
                     "st.release.sys flag into the other GPU's memory, a 1-thread kernel spins "
                     "on it (ld.acquire.sys), then the reply",
                     2 * kf.sms[0]);
        else
            snprintf(kf.text[m], sizeof kf.text[m],
                     "one kernel per hop spins on its flag, then stores reply + flag (%s)",
                     same ? "one GPU: 1 block, so large messages time a 1-block copy"
                          : "at most 2 blocks per SM");
    }
    if (kf.stuck) /* the reason for both, and for the latency floor */
        for (int m = 0; m < 2; m++) {
            kf.ok[m] = 0;
            snprintf(kf.text[m], sizeof kf.text[m], "%s", why);
        }
}

extern "C" void bench_floor_teardown(void)
{
    if (kf.stuck) { /* a stream may still be waiting: no CUDA call could return */
        free(fl.host_out);
        free(fl.host_back);
        memset(&fl, 0, sizeof fl);
        memset(&kf, 0, sizeof kf);
        return;
    }
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
    kf_free();
    if (fl.flags)
        cudaFreeHost((void *)fl.flags);
    free(fl.host_out);
    free(fl.host_back);
    memset(&fl, 0, sizeof fl);
    memset(&kf, 0, sizeof kf);
}
