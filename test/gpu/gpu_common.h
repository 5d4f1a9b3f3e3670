/*
 * gpu_common.h - shared helpers of the GPU tests (test/gpu, CUDA C++).
 *
 * The parts shared with the CPU tests (t_fail, T_MPI/T_CHECK, t_phase,
 * t_now, the time guard, t_rank/t_size, the data pattern t_pat) are in
 * test/common/t_common.h. Every test program:
 *   - calls gt_init(): picks its GPU (local rank modulo the visible devices)
 *     and creates the context BEFORE MPI_Init, so the library sets that
 *     context up at init (its kernels load eagerly; --device-after-init:
 *     after MPI_Init, the library meets it at first use); arms a hard SIGALRM
 *     guard; MPI_Init; MPI_ERRORS_RETURN on MPI_COMM_WORLD;
 *   - warms up its own kernels with gt_warmup() before the first stream wait
 *     (a lazily loaded module behind a blocked stream can deadlock);
 *   - produces data with a kernel on the stream, communicates stream-ordered
 *     and checks the data with a kernel on the stream: mismatches are
 *     counted on the GPU (gt_err_t) and turned into a failure after the loop;
 *   - reports failures with t_fail() (one line naming the GPU, then
 *     MPI_Abort: exit != 0) and ends with gt_finish() (prints "[name] PASS
 *     ..."); on a timeout every thread prints its stack (GT_NO_STACKS=1: not).
 *
 * Buffers: gt_alloc() for the memory kinds (device, pinned host, pageable
 * host, managed). Pageable buffers are filled and checked by
 * host functions on the stream (cudaLaunchHostFunc), the others by kernels.
 */
#ifndef MPIXACC_GPU_COMMON_H
#define MPIXACC_GPU_COMMON_H

#include <cuda_runtime.h>

#include "../common/t_common.h"
#include "stackdump.h"

/* ------------------------------------------------------------------ */
/* state, CUDA checks, stacks on timeout                               */

static int gt_dev = -1, gt_ndev = 0;

#define GT_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t gt_ce_ = (call);                                                               \
        if (gt_ce_ != cudaSuccess)                                                                 \
            t_fail("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorName(gt_ce_),      \
                   cudaGetErrorString(gt_ce_));                                                    \
    } while (0)

/* On a timeout every thread of the process prints its backtrace
 * (tools/stackdump.h): the GPU machine has no debugger that attaches
 * reliably. GT_NO_STACKS=1 turns it off (read in gt_init). */
static void gt_dump_stacks(void) { sd_dump_all_threads(); }

/* ------------------------------------------------------------------ */
/* options (each test documents its own)                               */

static int gt_argc;
static char **gt_argv;

static inline const char *gt_opt(const char *name, const char *def)
{
    size_t n = strlen(name);
    for (int i = 1; i < gt_argc; i++) {
        if (strncmp(gt_argv[i], name, n) == 0 && gt_argv[i][n] == '=')
            return gt_argv[i] + n + 1;
        if (strcmp(gt_argv[i], name) == 0)
            return "1";
    }
    return def;
}
static inline long gt_opt_long(const char *name, long def)
{
    const char *v = gt_opt(name, NULL);
    return v ? strtol(v, NULL, 0) : def;
}

/* ------------------------------------------------------------------ */
/* init / finish                                                       */

static inline int gt_env_int(const char *a, const char *b, const char *c)
{
    const char *names[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        const char *v = names[i] ? getenv(names[i]) : NULL;
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

static inline void gt_init(int *argc, char ***argv, const char *name, int timeout_s)
{
    gt_argc = *argc;
    gt_argv = *argv;
    sd_install(name);
    if (getenv("GT_NO_STACKS") == NULL)
        t_on_timeout = gt_dump_stacks;
    t_start(name, (int)gt_opt_long("--timeout", timeout_s));

    t_phase("device selection");
    /* Local rank before MPI_Init (hydra: MPI_LOCALRANKID; Open MPI; else
     * the global rank), so the context exists when the library starts. */
    int lr = gt_env_int("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK");
    if (lr < 0)
        lr = 0;
    cudaError_t ce = cudaGetDeviceCount(&gt_ndev);
    if (ce != cudaSuccess || gt_ndev <= 0) {
        fprintf(stderr, "[%s] FAIL: no CUDA device (%s)\n", name, cudaGetErrorString(ce));
        exit(2);
    }
    gt_dev = lr % gt_ndev;
    /* --device-after-init: the GPU is made current after MPI_Init, as HPGMG
     * and many applications do: the library meets the context at its first
     * stream-ordered call (set-up at first use) */
    const int late = gt_opt_long("--device-after-init", 0) != 0;
    if (!late && (cudaSetDevice(gt_dev) != cudaSuccess || cudaFree(0) != cudaSuccess)) {
        fprintf(stderr, "[%s] FAIL: cannot use GPU %d\n", name, gt_dev);
        exit(2);
    }

    snprintf(t_where, sizeof t_where, " (GPU %d)", gt_dev);

    t_phase("MPI_Init");
    T_MPI(MPI_Init(argc, argv));
    if (late && (cudaSetDevice(gt_dev) != cudaSuccess || cudaFree(0) != cudaSuccess)) {
        fprintf(stderr, "[%s] FAIL: cannot use GPU %d after MPI_Init\n", name, gt_dev);
        exit(2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (t_rank == 0) {
        cudaDeviceProp p;
        cudaGetDeviceProperties(&p, gt_dev);
        printf("[%s] %d ranks, %d visible GPU(s), rank 0 on GPU %d (%s)\n", name, t_size, gt_ndev,
               gt_dev, p.name);
        fflush(stdout);
    }
    t_phase("start");
}

static inline int gt_finish(void)
{
    t_phase("final barrier");
    GT_CUDA(cudaDeviceSynchronize());
    char detail[64];
    snprintf(detail, sizeof detail, " on %d visible GPU(s)", gt_ndev);
    return t_end(detail);
}

/* ------------------------------------------------------------------ */
/* data patterns and checking                                          */

__host__ __device__ static inline uint64_t gt_seed(int src, long it, long tag)
{
    return ((uint64_t)(src + 1) << 48) ^ ((uint64_t)it << 20) ^ (uint64_t)tag;
}

/* Mismatch record, in device memory (kernels) or host memory (host funcs). */
struct gt_err_t {
    unsigned long long count;     /* bad bytes */
    unsigned long long first_idx; /* of the first recorded bad byte */
    long long first_iter;
    unsigned int expected, got;
    unsigned int recorded;
};

__global__ static void gt_fill_kernel(uint8_t *buf, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] = t_pat(seed, i);
}

__global__ static void gt_check_kernel(const uint8_t *buf, size_t n, uint64_t seed, long long iter,
                                       gt_err_t *err)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint8_t e = t_pat(seed, i);
        uint8_t g = buf[i];
        if (g != e) {
            atomicAdd(&err->count, 1ull);
            if (atomicCAS(&err->recorded, 0u, 1u) == 0u) {
                err->first_idx = i;
                err->first_iter = iter;
                err->expected = e;
                err->got = g;
            }
        }
    }
}

/* Adds `v` to a device counter (stream-ordered event counting). */
__global__ static void gt_count_kernel(unsigned long long *ctr, unsigned long long v)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *ctr += v;
}

/* Spins ~`ns` nanoseconds on the GPU (delays a stream). */
__global__ static void gt_delay_kernel(unsigned long long ns)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        unsigned long long t0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (;;) {
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 >= ns)
                break;
            __nanosleep(1000);
        }
    }
}

static inline unsigned gt_blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b < 1)
        b = 1;
    if (b > 1024)
        b = 1024;
    return (unsigned)b;
}

/* ------------------------------------------------------------------ */
/* memory kinds                                                        */

enum gt_mem_t { GT_DEVICE = 0, GT_PINNED = 1, GT_PAGEABLE = 2, GT_MANAGED = 3 };
static const char *const gt_mem_name[] = {"device", "pinned", "pageable", "managed"};

static inline void *gt_alloc(gt_mem_t k, size_t n)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    switch (k) {
    case GT_DEVICE:
        GT_CUDA(cudaMalloc(&p, n));
        break;
    case GT_PINNED:
        GT_CUDA(cudaMallocHost(&p, n));
        break;
    case GT_PAGEABLE:
        p = malloc(n);
        T_CHECK(p != NULL, "malloc(%zu)", n);
        break;
    case GT_MANAGED:
        GT_CUDA(cudaMallocManaged(&p, n, cudaMemAttachGlobal));
        break;
    }
    return p;
}

static inline void gt_free(gt_mem_t k, void *p)
{
    switch (k) {
    case GT_DEVICE:
    case GT_MANAGED:
        GT_CUDA(cudaFree(p));
        break;
    case GT_PINNED:
        GT_CUDA(cudaFreeHost(p));
        break;
    case GT_PAGEABLE:
        free(p);
        break;
    }
}

/* Host-function work items for pageable buffers: kept in a list freed by
 * gt_hostfn_reset() after the stream synchronized. */
struct gt_hostfn_arg_t {
    uint8_t *buf;
    size_t n;
    uint64_t seed;
    long long iter;
    gt_err_t *err; /* host memory */
    gt_hostfn_arg_t *next;
};
static gt_hostfn_arg_t *gt_hostfn_list;

static void CUDART_CB gt_fill_hostfn(void *a)
{
    gt_hostfn_arg_t *x = (gt_hostfn_arg_t *)a;
    t_fill(x->buf, x->n, x->seed);
}

static void CUDART_CB gt_check_hostfn(void *a)
{
    gt_hostfn_arg_t *x = (gt_hostfn_arg_t *)a;
    for (size_t i = 0; i < x->n; i++) {
        uint8_t e = t_pat(x->seed, i), g = x->buf[i];
        if (g != e) {
            if (x->err->recorded == 0) {
                x->err->recorded = 1;
                x->err->first_idx = i;
                x->err->first_iter = x->iter;
                x->err->expected = e;
                x->err->got = g;
            }
            x->err->count++;
        }
    }
}

static inline gt_hostfn_arg_t *gt_hostfn_new(void *buf, size_t n, uint64_t seed, long long iter,
                                             gt_err_t *herr)
{
    gt_hostfn_arg_t *x = (gt_hostfn_arg_t *)malloc(sizeof(*x));
    T_CHECK(x != NULL, "malloc");
    x->buf = (uint8_t *)buf;
    x->n = n;
    x->seed = seed;
    x->iter = iter;
    x->err = herr;
    x->next = gt_hostfn_list;
    gt_hostfn_list = x;
    return x;
}

static inline void gt_hostfn_reset(void)
{
    while (gt_hostfn_list) {
        gt_hostfn_arg_t *x = gt_hostfn_list;
        gt_hostfn_list = x->next;
        free(x);
    }
}

/* A checker: a device gt_err_t for kernels plus a host one for host funcs. */
struct gt_checker_t {
    gt_err_t *dev;
    gt_err_t host;
};

static inline void gt_checker_init(gt_checker_t *c)
{
    GT_CUDA(cudaMalloc(&c->dev, sizeof(gt_err_t)));
    GT_CUDA(cudaMemset(c->dev, 0, sizeof(gt_err_t)));
    memset(&c->host, 0, sizeof(c->host));
}

static inline void gt_checker_free(gt_checker_t *c) { GT_CUDA(cudaFree(c->dev)); }

/* Stream-ordered fill of `buf` (memory kind k) with pattern `seed`. */
static inline void gt_fill(gt_mem_t k, void *buf, size_t n, uint64_t seed, cudaStream_t s)
{
    if (n == 0)
        return;
    if (k == GT_PAGEABLE) {
        GT_CUDA(cudaLaunchHostFunc(s, gt_fill_hostfn, gt_hostfn_new(buf, n, seed, 0, NULL)));
    } else {
        gt_fill_kernel<<<gt_blocks(n), 256, 0, s>>>((uint8_t *)buf, n, seed);
        GT_CUDA(cudaGetLastError());
    }
}

/* Stream-ordered check of `buf` against pattern `seed`. */
static inline void gt_check(gt_checker_t *c, gt_mem_t k, const void *buf, size_t n, uint64_t seed,
                            long long iter, cudaStream_t s)
{
    if (n == 0)
        return;
    if (k == GT_PAGEABLE) {
        GT_CUDA(cudaLaunchHostFunc(s, gt_check_hostfn,
                                   gt_hostfn_new((void *)buf, n, seed, iter, &c->host)));
    } else {
        gt_check_kernel<<<gt_blocks(n), 256, 0, s>>>((const uint8_t *)buf, n, seed, iter, c->dev);
        GT_CUDA(cudaGetLastError());
    }
}

/* After the stream synchronized: fail if any check saw a mismatch. */
static inline void gt_checker_verify(gt_checker_t *c, const char *what)
{
    gt_err_t d;
    GT_CUDA(cudaMemcpy(&d, c->dev, sizeof d, cudaMemcpyDeviceToHost));
    const gt_err_t *e = d.count ? &d : c->host.count ? &c->host : NULL;
    if (e)
        t_fail("%s: %llu bad byte(s); first at byte %llu of iteration %lld: expected 0x%02x got "
               "0x%02x",
               what, e->count, e->first_idx, e->first_iter, e->expected, e->got);
}

static inline void gt_checker_clear(gt_checker_t *c)
{
    GT_CUDA(cudaMemset(c->dev, 0, sizeof(gt_err_t)));
    memset(&c->host, 0, sizeof(c->host));
}

/* Load every kernel of this file now (run once each, synchronously). */
static inline void gt_warmup(void)
{
    t_phase("kernel warm-up");
    uint8_t *b;
    gt_err_t *e;
    unsigned long long *ctr;
    GT_CUDA(cudaMalloc(&b, 64));
    GT_CUDA(cudaMalloc(&e, sizeof(gt_err_t)));
    GT_CUDA(cudaMalloc(&ctr, sizeof(*ctr)));
    GT_CUDA(cudaMemset(e, 0, sizeof(gt_err_t)));
    gt_fill_kernel<<<1, 64>>>(b, 64, 1);
    gt_check_kernel<<<1, 64>>>(b, 64, 1, 0, e);
    gt_count_kernel<<<1, 1>>>(ctr, 1);
    gt_delay_kernel<<<1, 1>>>(1000);
    GT_CUDA(cudaGetLastError());
    GT_CUDA(cudaDeviceSynchronize());
    gt_err_t h;
    GT_CUDA(cudaMemcpy(&h, e, sizeof h, cudaMemcpyDeviceToHost));
    T_CHECK(h.count == 0, "warm-up check kernel found %llu bad bytes", h.count);
    GT_CUDA(cudaFree(b));
    GT_CUDA(cudaFree(e));
    GT_CUDA(cudaFree(ctr));
}

/* A duplicate of MPI_COMM_WORLD made a stream communicator of s by the
 * info key (MPI_Comm_dup_with_info). */
static inline MPI_Comm gt_stream_comm(cudaStream_t s)
{
    MPI_Info info;
    MPI_Comm c;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPIX_Acc_Info_set_stream(info, s));
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    T_MPI(MPI_Info_free(&info));
    return c;
}

/* One checked ring step on MPI_COMM_WORLD: fill sbuf on ks, Irecv and
 * Isend of n device bytes on post, Waitall on wait, check rbuf on ks
 * (the data of iteration it, tag tag). */
static inline void gt_ring_step(cudaStream_t ks, MPIX_Acc_stream post, MPIX_Acc_stream wait,
                                uint8_t *sbuf, uint8_t *rbuf, size_t n, int tag, long it,
                                gt_checker_t *chk)
{
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    MPI_Request req[2];
    gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag), ks);
    T_MPI(MPIX_Acc_Irecv(post, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
    T_MPI(MPIX_Acc_Isend(post, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
    T_MPI(MPIX_Acc_Waitall(wait, 2, req, MPI_STATUSES_IGNORE));
    gt_check(chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, ks);
}

/* MPI_Status fields as text. */
static inline const char *gt_status_str(const MPI_Status *st)
{
    static char buf[128];
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    snprintf(buf, sizeof buf, "source %d tag %d error %d count %d", st->MPI_SOURCE, st->MPI_TAG,
             st->MPI_ERROR, count);
    return buf;
}

#endif
