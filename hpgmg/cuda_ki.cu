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

/* a waiting block gives up after this long (the first block's wait is
 * bounded by the request's MPIX_ACC_KI_TIMEOUT and publishes either way) */
static const unsigned long long WAIT_LIMIT_NS = 120ull * 1000000000ull;

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
    /* the tiles read what the kernels before wrote; then the receive
     * kernel may be scheduled (it waits for this one before it unpacks) */
    hg_pdl_enter();
    const int b = blockIdx.x;
    if (b >= a.pack.nt) { /* a local tile */
        const hg_tile_t T = a.local.t[b - a.pack.nt];
        hg_tile_run(a.local, T, a.local.sbuf, a.local.dbuf, blockIdx.y, gridDim.y, false);
        return;
    }
    hg_tile_t T = a.pack.t[b];
    const hg_ki_group_t G = a.send[T.peer];
    const int part = a.slot * G.tiles + T.doff;
    T.doff = 0;
    hg_tile_run(a.pack, T, nullptr, G.base + (long long)part * G.size, blockIdx.y, gridDim.y,
                false);
    if (gridDim.y == 1) {
        __syncthreads();
    } else {
        /* the block's stores, then its count: the chunk that counts last
         * sees every chunk's stores (the pattern of a grid reduction) */
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            last = atomicAdd(&a.packed[b], 1ull) + 1 == a.run * gridDim.y;
            if (last)
                __threadfence();
        }
        __syncthreads();
        if (!last)
            return;
    }
    if (mpix_acc_pready<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)G.dreq, part) != MPIX_ACC_DSUCCESS &&
        threadIdx.x == 0)
        atomicAdd(a.err, 1);
}

/* Blocks take their work by ticket, in the order they start: logical
 * blocks [0, U) unpack (tile id / cu, chunk id % cu), [U, U + B) apply the
 * boundary conditions (region (id - U) / cb, chunk (id - U) % cb) once
 * every unpack is done. */
__global__ void k_ki_recv(hg_args_ki_t a, int cu, int cb)
{
    __shared__ int first, ok;
    __shared__ unsigned long long id;
    /* the next kernel may be scheduled (it waits for this one); this one
     * waits for the send kernel before it writes the level, below */
    hg_pdl_trigger();
    const unsigned long long U = (unsigned long long)a.unpack.nt * cu;
    if (threadIdx.x == 0)
        id = atomicAdd(a.ticket, 1ull) - a.ticket_base;
    __syncthreads();
    if (id >= U) { /* a boundary block */
        if (threadIdx.x == 0) {
            const unsigned long long t0 = ki_now();
            for (unsigned i = 0; *(volatile unsigned long long *)a.unpacked < a.run * U; i++)
                if ((i & 255) == 255 && ki_now() - t0 > WAIT_LIMIT_NS) {
                    atomicAdd(a.err, 1);
                    break;
                }
            __threadfence();
        }
        hg_pdl_wait(); /* the local tiles (send kernel) are in too */
        __syncthreads();
        const int r = (int)((id - U) / cb);
        hg_bc_run(a.bc, r, (unsigned)((id - U) % cb), cb);
        return;
    }
    const int b = (int)(id / cu);
    const unsigned chunk = (unsigned)(id % cu);
    const hg_tile_t T = a.unpack.t[b];
    const hg_ki_group_t G = a.recv[T.peer];
    const int part = a.slot * G.tiles + T.soff;
    if (threadIdx.x == 0) {
        first = cu == 1 || atomicMax(&a.claim[b], a.run) < a.run;
        ok = 1;
    }
    __syncthreads();
    if (first) {
        const bool got = mpix_acc_parrived_wait<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)G.dreq, part,
                                                                0) == MPIX_ACC_DSUCCESS;
        if (cu > 1) {
            /* every thread's copied bytes, then the flag (published even
             * on a failure, so the tile's other chunks stop waiting) */
            __threadfence();
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (!got) {
                atomicAdd(a.err, 1);
                ok = 0;
            }
            if (cu > 1)
                atomicExch(&a.ready[b], a.run);
        }
    } else if (threadIdx.x == 0) {
        const unsigned long long t0 = ki_now();
        for (unsigned i = 0; *(volatile unsigned long long *)&a.ready[b] < a.run; i++)
            if ((i & 255) == 255 && ki_now() - t0 > WAIT_LIMIT_NS) {
                atomicAdd(a.err, 1);
                ok = 0;
                break;
            }
        __threadfence();
    }
    /* the send kernel (and so every kernel before it) is done before the
     * tile is written: the tile's cells may be read by kernels before */
    hg_pdl_wait();
    __syncthreads();
    if (ok) {
        hg_tile_t V = T;
        V.soff = 0;
        hg_tile_run(a.unpack, V, G.base + (long long)part * G.size, nullptr, chunk, cu, cu > 1);
    }
    /* this block's cells, then its count (boundary blocks wait for all:
     * run x U after this run's; every run counts, with or without them) */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(a.unpacked, 1ull);
}

__global__ void k_ki_fill(const hg_ki_group_t *send, int lo_slot, int runs, int *err)
{
    const hg_ki_group_t G = send[blockIdx.x];
    if (mpix_acc_pready_range<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)G.dreq, lo_slot * G.tiles,
                                              runs * G.tiles - 1) != MPIX_ACC_DSUCCESS &&
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
    CK(hg_launch(k_ki_send, dim3((unsigned)nb, chunks_for(cells)), NT, (cudaStream_t)stream, a->pdl,
                 *a));
}

extern "C" long long hg_cuda_ki_recv(void *stream, const hg_args_ki_t *a)
{
    if (a->unpack.nt == 0)
        return 0;
    const int cu = (int)chunks_for(tile_cells(a->unpack));
    const int cb = a->bc.nbc ? (int)chunks_for((long long)a->bc.g.n * a->bc.g.n * a->bc.g.g) : 1;
    const long long nblk = (long long)a->unpack.nt * cu + (long long)a->bc.nbc * cb;
    CK(hg_launch(k_ki_recv, dim3((unsigned)nblk), NT, (cudaStream_t)stream, a->pdl, *a, cu, cb));
    return nblk;
}

extern "C" void hg_cuda_ki_fill(void *stream, const hg_ki_group_t *send_dev, int n, int lo_slot,
                                int runs, int *err)
{
    if (n == 0 || lo_slot >= runs)
        return;
    k_ki_fill<<<n, NT, 0, (cudaStream_t)stream>>>(send_dev, lo_slot, runs, err);
    CK(cudaGetLastError());
}
