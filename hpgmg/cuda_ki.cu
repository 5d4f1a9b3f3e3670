/*
 * hpgmg/cuda_ki.cu - the kernels of the ki backend (kernel-initiated
 * communication through mpix-acc's partitioned requests; cuda_iface.h says
 * how a program runs). Built only with the library (its device header
 * mpix_acc_device.cuh).
 *
 * Two kernels per program run, in stream order on the level's stream:
 *   send    blocks [0, npack) x chunks: pack tile b's chunk into partition
 *           `slot` of its peer's buffer; the block that completes a peer's
 *           message (a counter per peer, only growing: run x blocks) marks
 *           the partition ready -- its bytes go to the peer's slots from
 *           this kernel. Blocks [npack, npack + nlocal): the local tiles.
 *   receive blocks [0, nunpack) x chunks: the first block of a peer to
 *           claim the run waits for the partition (which copies it into
 *           the receive buffer), publishes that, the peer's other blocks
 *           wait for it; each then unpacks its tile's chunk.
 * No block waits for a block that has not started (a waiter waits for a
 * block that claimed, i.e. runs), and the receive kernel follows the send
 * kernel in the stream, so every wait is on work that is already running
 * or done. Every wait is bounded: a failed or timed-out device call counts
 * in *err (the host checks it) and the request keeps the error, which its
 * completion reports.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "mpix_acc_device.cuh"

extern "C" {
#include "cuda_iface.h"
#include "ops.h"
}
#include "tile.cuh"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "hpgmg-fv: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                                       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const int NT = 256;
/* a waiting block gives up after this long (the first block's wait is
 * bounded by the request's MPIX_ACC_KI_TIMEOUT and publishes either way) */
static const unsigned long long WAIT_LIMIT_NS = 120ull * 1000000000ull;

static unsigned chunks_for(long long cells)
{
    long long c = (cells + 4LL * NT - 1) / (4LL * NT); /* about 4 cells per thread */
    if (c < 1)
        c = 1;
    if (c > 65535)
        c = 65535;
    return (unsigned)c;
}

static long long tile_cells(const hg_args_tiles_t &t)
{
    return (long long)t.max_blk * (t.kind >= HG_T_INTERP_P0 ? 8 : 1);
}

__device__ __forceinline__ unsigned long long ki_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void k_ki_send(hg_args_ki_t a)
{
    __shared__ int last;
    const int b = blockIdx.x;
    if (b >= a.pack.nt) { /* a local tile */
        const hg_tile_t T = a.local.t[b - a.pack.nt];
        hg_tile_run(a.local, T, a.local.sbuf, a.local.dbuf, blockIdx.y, gridDim.y, false);
        return;
    }
    const hg_tile_t T = a.pack.t[b];
    const hg_ki_peer_t P = a.send[T.peer];
    hg_tile_run(a.pack, T, nullptr, P.base + (long long)a.slot * P.count, blockIdx.y, gridDim.y,
                false);
    /* the block's stores, then its count: the block that counts last sees
     * every block's stores (the threadfence pattern of a grid reduction) */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned long long want = a.run * (unsigned long long)P.tiles * gridDim.y;
        last = atomicAdd(&a.packed[T.peer], 1ull) + 1 == want;
        if (last)
            __threadfence();
    }
    __syncthreads();
    if (last &&
        mpix_acc_pready<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)P.dreq, a.slot) != MPIX_ACC_DSUCCESS &&
        threadIdx.x == 0)
        atomicAdd(a.err, 1);
}

__global__ void k_ki_recv(hg_args_ki_t a)
{
    __shared__ int first, ok;
    const hg_tile_t T = a.unpack.t[blockIdx.x];
    const int n = T.peer;
    const hg_ki_peer_t P = a.recv[n];
    if (threadIdx.x == 0) {
        first = atomicMax(&a.claim[n], a.run) < a.run;
        ok = 1;
    }
    __syncthreads();
    if (first) {
        const bool got = mpix_acc_parrived_wait<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)P.dreq, a.slot,
                                                                0) == MPIX_ACC_DSUCCESS;
        /* every thread's copied bytes, then the flag (published even on a
         * failure, so the peer's other blocks stop waiting) */
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            if (!got) {
                atomicAdd(a.err, 1);
                ok = 0;
            }
            atomicExch(&a.ready[n], a.run);
        }
    } else if (threadIdx.x == 0) {
        const unsigned long long t0 = ki_now();
        for (unsigned i = 0; *(volatile unsigned long long *)&a.ready[n] < a.run; i++)
            if ((i & 255) == 255 && ki_now() - t0 > WAIT_LIMIT_NS) {
                atomicAdd(a.err, 1);
                ok = 0;
                break;
            }
        __threadfence();
    }
    __syncthreads();
    if (!ok)
        return;
    hg_tile_run(a.unpack, T, P.base + (long long)a.slot * P.count, nullptr, blockIdx.y, gridDim.y,
                true);
}

__global__ void k_ki_fill(const hg_ki_peer_t *send, int lo, int hi, int *err)
{
    if (mpix_acc_pready_range<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)send[blockIdx.x].dreq, lo, hi) !=
            MPIX_ACC_DSUCCESS &&
        threadIdx.x == 0)
        atomicAdd(err, 1);
}

extern "C" void hg_cuda_ki_load(void)
{
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_send));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_recv));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_fill));
}

extern "C" void hg_cuda_ki_send(void *stream, const hg_args_ki_t *a)
{
    const int nb = a->pack.nt + a->local.nt;
    if (nb == 0)
        return;
    long long cells = tile_cells(a->pack);
    if (tile_cells(a->local) > cells)
        cells = tile_cells(a->local);
    dim3 grid((unsigned)nb, chunks_for(cells));
    k_ki_send<<<grid, NT, 0, (cudaStream_t)stream>>>(*a);
    CK(cudaGetLastError());
}

extern "C" void hg_cuda_ki_recv(void *stream, const hg_args_ki_t *a)
{
    if (a->unpack.nt == 0)
        return;
    dim3 grid((unsigned)a->unpack.nt, chunks_for(tile_cells(a->unpack)));
    k_ki_recv<<<grid, NT, 0, (cudaStream_t)stream>>>(*a);
    CK(cudaGetLastError());
}

extern "C" void hg_cuda_ki_fill(void *stream, const hg_ki_peer_t *send_dev, int n, int lo, int hi,
                                int *err)
{
    if (n == 0 || lo > hi)
        return;
    k_ki_fill<<<n, NT, 0, (cudaStream_t)stream>>>(send_dev, lo, hi, err);
    CK(cudaGetLastError());
}
