/*
 * hpgmg/cuda_kernels.cu - CUDA implementation of the operations of ops.h
 * (GPU levels), plus device selection, streams and memory.
 *
 * Every kernel evaluates exactly the per-cell expressions of stencil.h that
 * the CPU kernels use; compiled with -fmad=false the GPU sweeps give the same
 * bits as the CPU sweeps (dot products differ only by summation order, and
 * are deterministic: a fixed tree per box).
 *
 * Every kernel starts with hg_pdl_enter and is launched with programmatic
 * dependent launch (tile.cuh) unless hg_cuda_set_pdl(0): the next kernel's
 * launch overlaps this one's run (--no-pdl turns it off).
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
#include "cuda_iface.h"
#include "ops.h"
}
#include "stencil.h"
#include "tile.cuh"

/* launch with programmatic dependent launch (hg_cuda_set_pdl) */
static int g_pdl = 1;

extern "C" void hg_cuda_set_pdl(int on) { g_pdl = on; }

__global__ void k_axpby(hg_args_axpby_t a)
{
    hg_pdl_enter();
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long total = (long long)a.g.nb * a.g.n * a.g.n * a.g.n;
    if (idx >= total)
        return;
    int b, i, j, k;
    cell_of(a.g, idx, b, i, j, k);
    const long long c = origin(a.g, b) + i + (long long)j * a.g.js + (long long)k * a.g.ks;
    if (a.b)
        a.c[c] = a.alpha * a.a[c] + a.beta * a.b[c];
    else
        a.c[c] = a.alpha * a.a[c];
}

__global__ void k_mul(hg_args_mul_t a)
{
    hg_pdl_enter();
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long total = (long long)a.g.nb * a.g.n * a.g.n * a.g.n;
    if (idx >= total)
        return;
    int b, i, j, k;
    cell_of(a.g, idx, b, i, j, k);
    const long long c = origin(a.g, b) + i + (long long)j * a.g.js + (long long)k * a.g.ks;
    a.c[c] = a.scale * a.a[c] * a.b[c];
}

/* one block per box; fixed per-thread strides and a fixed tree: deterministic */
__global__ void k_reduce(hg_args_red_t a, int is_dot)
{
    hg_pdl_enter();
    __shared__ double sh[NT];
    const int b = blockIdx.x, n = a.g.n;
    const long long o = origin(a.g, b);
    const int cells = n * n * n;
    double acc = 0.0;
    for (int c = threadIdx.x; c < cells; c += blockDim.x) {
        const int i = c % n, j = (c / n) % n, k = c / (n * n);
        const long long q = o + i + (long long)j * a.g.js + (long long)k * a.g.ks;
        if (is_dot)
            acc += a.a[q] * a.b[q];
        else {
            const double v = fabs(a.a[q]);
            if (v > acc)
                acc = v;
        }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            if (is_dot)
                sh[threadIdx.x] += sh[threadIdx.x + s];
            else if (sh[threadIdx.x + s] > sh[threadIdx.x])
                sh[threadIdx.x] = sh[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        a.partial[b] = sh[0];
}

/* one block: the same arithmetic as the CPU's k_combine (a max is exact) */
__global__ void k_combine(hg_args_combine_t a)
{
    hg_pdl_enter();
    if (a.dot) {
        for (int i = threadIdx.x; i < a.num_boxes; i += blockDim.x)
            a.out[i] = 0.0;
        __syncthreads();
        for (int b = threadIdx.x; b < a.nb; b += blockDim.x)
            a.out[a.ids[b]] = a.partial[b];
        return;
    }
    if (threadIdx.x == 0) {
        double m = 0.0;
        for (int b = 0; b < a.nb; b++)
            if (a.partial[b] > m)
                m = a.partial[b];
        a.out[0] = m;
    }
}

__global__ void k_stencil(hg_args_stencil_t a)
{
    hg_pdl_enter();
    hg_stencil_cell(a, (long long)blockIdx.x * blockDim.x + threadIdx.x);
}

/* grid (ghost regions, chunks): a block covers a chunk of one region */
__global__ void k_bc(hg_args_bc_t a)
{
    hg_pdl_enter();
    hg_bc_run(a, blockIdx.x, blockIdx.y, gridDim.y);
}

/* grid (tiles, chunks): a block covers a chunk of the destination cells of one tile */
__global__ void k_tiles(hg_args_tiles_t a)
{
    hg_pdl_enter();
    hg_tile_run(a, a.t[blockIdx.x], a.sbuf, a.dbuf, blockIdx.y, gridDim.y, false);
}

extern "C" void hg_cuda_run(void *stream, int kind, const void *args)
{
    cudaStream_t st = (cudaStream_t)stream;
    switch (kind) {
    case HG_K_ZERO: {
        const hg_args_zero_t *a = (const hg_args_zero_t *)args;
        CK(cudaMemsetAsync(a->x, 0, sizeof(double) * (size_t)a->g.nb * a->g.vol, st));
        return;
    }
    case HG_K_AXPBY: {
        const hg_args_axpby_t *a = (const hg_args_axpby_t *)args;
        long long total = (long long)a->g.nb * a->g.n * a->g.n * a->g.n;
        if (total)
            CK(hg_launch(k_axpby, dim3(blocks_for(total)), NT, st, g_pdl, *a));
        break;
    }
    case HG_K_MUL: {
        const hg_args_mul_t *a = (const hg_args_mul_t *)args;
        long long total = (long long)a->g.nb * a->g.n * a->g.n * a->g.n;
        if (total)
            CK(hg_launch(k_mul, dim3(blocks_for(total)), NT, st, g_pdl, *a));
        break;
    }
    case HG_K_DOT:
    case HG_K_NORM: {
        const hg_args_red_t *a = (const hg_args_red_t *)args;
        if (a->g.nb)
            CK(hg_launch(k_reduce, dim3(a->g.nb), NT, st, g_pdl, *a, (int)(kind == HG_K_DOT)));
        break;
    }
    case HG_K_COMBINE: {
        const hg_args_combine_t *a = (const hg_args_combine_t *)args;
        CK(hg_launch(k_combine, dim3(1), NT, st, g_pdl, *a));
        break;
    }
    case HG_K_STENCIL: {
        const hg_args_stencil_t *a = (const hg_args_stencil_t *)args;
        long long total = (long long)a->g.nb * a->g.n * a->g.n * a->g.n;
        if (total)
            CK(hg_launch(k_stencil, dim3(blocks_for(total)), NT, st, g_pdl, *a));
        break;
    }
    case HG_K_BC: {
        const hg_args_bc_t *a = (const hg_args_bc_t *)args;
        if (a->nbc) {
            dim3 grid((unsigned)a->nbc, chunks_for((long long)a->g.n * a->g.n * a->g.g));
            CK(hg_launch(k_bc, grid, NT, st, g_pdl, *a));
        }
        break;
    }
    case HG_K_TILES: {
        const hg_args_tiles_t *a = (const hg_args_tiles_t *)args;
        if (a->nt) {
            long long cells = (long long)a->max_blk * (a->kind >= HG_T_INTERP_P0 ? 8 : 1);
            dim3 grid((unsigned)a->nt, chunks_for(cells));
            CK(hg_launch(k_tiles, grid, NT, st, g_pdl, *a));
        }
        break;
    }
    default:
        fprintf(stderr, "hpgmg-fv: unknown GPU operation %d\n", kind);
        abort();
    }
    CK(cudaGetLastError());
}

extern "C" int hg_cuda_init(int local_rank, char *name, size_t name_len)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        return 0;
    }
    const int dev = local_rank % n;
    CK(cudaSetDevice(dev));
    /* Load every kernel now.  With CUDA's lazy module loading (the default) the
   * first launch of a kernel loads its module, and that can wait for work
   * already queued in the context - e.g. a stream-ordered receive that waits
   * for the peer, whose own first launch waits likewise: a deadlock seen with
   * 2 ranks sharing a GPU (mpix-acc logs the same advice at info level). */
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, (const void *)k_axpby));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_mul));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_reduce));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_stencil));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_bc));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_tiles));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    if (name && name_len)
        snprintf(name, name_len, "device %d (%s)", dev, p.name);
    return n;
}

extern "C" void *hg_cuda_stream_create(void)
{
    cudaStream_t s = nullptr;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (void *)s;
}

extern "C" void hg_cuda_stream_destroy(void *stream)
{
    CK(cudaStreamDestroy((cudaStream_t)stream));
}

extern "C" void hg_cuda_stream_sync(void *stream)
{
    CK(cudaStreamSynchronize((cudaStream_t)stream));
}

extern "C" void hg_cuda_capture_begin(void *stream)
{
    CK(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal));
}

extern "C" void *hg_cuda_capture_end(void *stream)
{
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g);
    if (e != cudaSuccess || !g) {
        fprintf(stderr, "hpgmg-fv: CUDA graph capture failed: %s\n", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return nullptr;
    }
    cudaGraphExec_t x = nullptr;
    e = cudaGraphInstantiateWithFlags(&x, g, 0);
    CK(cudaGraphDestroy(g));
    if (e != cudaSuccess) {
        fprintf(stderr, "hpgmg-fv: CUDA graph instantiation failed: %s\n", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return nullptr;
    }
    return (void *)x;
}

extern "C" void hg_cuda_graph_launch(void *exec, void *stream)
{
    CK(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream));
}

extern "C" void hg_cuda_graph_destroy(void *exec)
{
    if (exec)
        CK(cudaGraphExecDestroy((cudaGraphExec_t)exec));
}

extern "C" void *hg_cuda_alloc(size_t bytes, int mem_kind)
{
    void *p = nullptr;
    switch (mem_kind) {
    case HG_MEM_DEVICE:
        CK(cudaMalloc(&p, bytes));
        CK(cudaMemset(p, 0, bytes));
        break;
    case HG_MEM_PINNED:
        CK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
        memset(p, 0, bytes);
        break;
    default:
        p = calloc(1, bytes);
    }
    return p;
}

extern "C" void hg_cuda_free(void *p, int mem_kind)
{
    if (!p)
        return;
    switch (mem_kind) {
    case HG_MEM_DEVICE:
        CK(cudaFree(p));
        break;
    case HG_MEM_PINNED:
        CK(cudaFreeHost(p));
        break;
    default:
        free(p);
    }
}

extern "C" void hg_cuda_copy(void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
