/*
 * hpgmg/cuda_ki.cu - the kernels of the ki backend (kernel-initiated
 * communication through mpix-acc's partitioned requests; cuda_iface.h says
 * how a program runs). Built only with the library (its device header
 * mpix_acc_device.cuh).
 *
 * One kernel per program run, in stream order on the level's stream. Its
 * blocks take their work by ticket, in the order they start:
 *   pack     tile b's chunk into partition `slot` of its peer's buffer; the
 *            chunk that completes the tile (a counter per tile, only
 *            growing) marks the partition ready -- its bytes go to the
 *            peer's slots from this block. Then the local tiles.
 *   unpack   the first chunk of a tile to claim the run waits for the
 *            partition (which copies it into the receive buffer) and
 *            publishes that, the tile's other chunks wait for it; each then
 *            unpacks its chunk.
 *   boundary after an exchange: the regions that read no exchanged ghost
 *            cell beside the pack (before the unpacks), the others once
 *            every block before is done;
 *   stencil  then a stencil sweep on the exchanged vector (the smoother's,
 *            the residual's), once every block before is done.
 * A block waits only for blocks with a smaller ticket (they run: they
 * started before it) or for the peer's pack blocks of the same run (which
 * wait for nothing, and the peer's kernels before this one wait only for
 * this rank's runs before this one). Every wait is bounded: a failed or
 * timed-out device call counts in *err (the host checks it) and the
 * request keeps the error, which its completion reports.
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

/* the run's slot in its epoch: baked into the launch, or (a run in a CUDA
 * graph) an offset from the program's slot word, which the kernels before
 * this one wrote (hg_pdl_enter waited for them) */
__device__ __forceinline__ int ki_slot(const hg_args_ki_t &a)
{
    return a.slot_dev ? a.slot + (int)*(const volatile unsigned long long *)a.slot_dev : a.slot;
}

/* a pack block: chunk `chunk` of `cp` of pack tile b, then (the chunk that
 * completes the tile) its partition ready */
__device__ __forceinline__ void ki_pack(const hg_args_ki_t &a, int b, unsigned chunk, unsigned cp)
{
    __shared__ int last;
    hg_tile_t T = a.pack.t[b];
    const hg_ki_group_t G = a.send[T.peer];
    const int part = ki_slot(a) * G.tiles + T.doff;
    T.doff = 0;
    hg_tile_run(a.pack, T, nullptr, G.base + (long long)part * G.size, chunk, cp, false);
    if (cp == 1) {
        __syncthreads();
    } else {
        /* the block's stores, then its count: the chunk that counts last
         * sees every chunk's stores (the pattern of a grid reduction) */
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            last = atomicAdd(&a.packed[b], 1ull) + 1 == a.pack_target;
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

/* the counters blocks wait on: a block's stores, a barrier, then its
 * thread 0 counts with release semantics (gpu scope); a waiting thread 0
 * loads with acquire semantics, then its block's barrier */
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void count_release_gpu(unsigned long long *p)
{
    asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(p)
                 : "memory");
}

/* thread 0 spins until *w >= target (bounded: then counts an error) */
__device__ __forceinline__ bool ki_spin(const unsigned long long *w, unsigned long long target,
                                        int *err)
{
    const unsigned long long t0 = ki_now();
    for (unsigned i = 0; ld_acquire_gpu(w) < target; i++)
        if ((i & 255) == 255 && ki_now() - t0 > WAIT_LIMIT_NS) {
            atomicAdd(err, 1);
            return false;
        }
    return true;
}

/* an unpack block: chunk `chunk` of `cu` of unpack tile b */
__device__ __forceinline__ void ki_unpack(const hg_args_ki_t &a, int b, unsigned chunk, unsigned cu)
{
    __shared__ int first, ok;
    const hg_tile_t T = a.unpack.t[b];
    const hg_ki_group_t G = a.recv[T.peer];
    const int part = ki_slot(a) * G.tiles + T.soff;
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
    } else if (threadIdx.x == 0 && !ki_spin(&a.ready[b], a.run, a.err)) {
        ok = 0;
    }
    __syncthreads();
    if (ok) {
        hg_tile_t V = T;
        V.soff = 0;
        hg_tile_run(a.unpack, V, G.base + (long long)part * G.size, nullptr, chunk, cu, cu > 1);
    }
}

/* Logical blocks (by ticket): [0, P) pack (tile id / cp, chunk id % cp),
 * then L local tiles alike, then Bo boundary blocks of the regions that
 * read no exchanged ghost cell (region id / cb, chunk id % cb), then U
 * unpack blocks (cu chunks per tile), then Br boundary blocks of the other
 * regions, then the stencil's blocks. Every block before the stencil's
 * counts itself in *done once its stores are out; the Br blocks wait for
 * all blocks before them, the stencil blocks for all. */
__global__ void k_ki_run(hg_args_ki_t a, unsigned cp, unsigned cu, unsigned cb)
{
    __shared__ unsigned long long id;
    /* the tiles read what the kernels before wrote; then the next kernel
     * may be scheduled (it waits for this one in its own hg_pdl_enter) */
    hg_pdl_enter();
    if (threadIdx.x == 0)
        id = atomicAdd(a.ticket, 1ull) - a.ticket_base;
    __syncthreads();
    const unsigned long long P = (unsigned long long)a.pack.nt * cp,
                             L = (unsigned long long)a.local.nt * cp,
                             Bo = (unsigned long long)a.bc.n_own * cb,
                             U = (unsigned long long)a.unpack.nt * cu,
                             Br = (unsigned long long)(a.bc.nbc - a.bc.n_own) * cb;
    const unsigned long long pre_st = P + L + Bo + U + Br;
    if (id >= pre_st) { /* a stencil block */
        if (threadIdx.x == 0)
            ki_spin(a.done, a.st_target, a.err);
        __syncthreads();
        hg_stencil_cell(a.st, (long long)(id - pre_st) * blockDim.x + threadIdx.x);
        return;
    }
    if (id < P) {
        ki_pack(a, (int)(id / cp), (unsigned)(id % cp), cp);
    } else if (id < P + L) {
        const hg_tile_t T = a.local.t[(id - P) / cp];
        hg_tile_run(a.local, T, a.local.sbuf, a.local.dbuf, (unsigned)((id - P) % cp), cp, false);
    } else if (id < P + L + Bo) {
        const unsigned long long r = id - P - L;
        hg_bc_run(a.bc, (int)(r / cb), (unsigned)(r % cb), cb);
    } else if (id < P + L + Bo + U) {
        const unsigned long long u = id - P - L - Bo;
        ki_unpack(a, (int)(u / cu), (unsigned)(u % cu), cu);
    } else {
        /* the region's place first (no exchanged data), then the wait */
        const unsigned long long r = id - P - L - Bo - U;
        const hg_bc_region R = hg_bc_region_of(a.bc, a.bc.n_own + (int)(r / cb));
        if (threadIdx.x == 0)
            ki_spin(a.done, a.bc_target, a.err);
        __syncthreads();
        hg_bc_apply(a.bc, R, (unsigned)(r % cb), cb);
    }
    /* this block's stores, then its count */
    __syncthreads();
    if (threadIdx.x == 0)
        count_release_gpu(a.done);
}

__global__ void k_ki_fill(const hg_ki_group_t *send, int lo_slot, int runs, int *err)
{
    const hg_ki_group_t G = send[blockIdx.x];
    if (mpix_acc_pready_range<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)G.dreq, lo_slot * G.tiles,
                                              runs * G.tiles - 1) != MPIX_ACC_DSUCCESS &&
        threadIdx.x == 0)
        atomicAdd(err, 1);
}

__global__ void k_ki_word(unsigned long long *w, unsigned long long v, int add)
{
    if (threadIdx.x == 0)
        *w = add ? *w + v : v;
}

extern "C" void hg_cuda_ki_load(void)
{
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_run));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_fill));
    CK(cudaFuncGetAttributes(&fa, (const void *)k_ki_word));
}

extern "C" void hg_cuda_ki_shape(const hg_args_ki_t *a, hg_ki_shape_t *sh)
{
    long long cells = tile_cells(a->pack);
    if (tile_cells(a->local) > cells)
        cells = tile_cells(a->local);
    sh->cp = chunks_for(cells);
    sh->cu = chunks_for(tile_cells(a->unpack));
    sh->cb = a->bc.nbc ? chunks_for((long long)a->bc.g.n * a->bc.g.n * a->bc.g.g) : 1;
    sh->pre_bc = (long long)(a->pack.nt + a->local.nt) * sh->cp + (long long)a->bc.n_own * sh->cb +
                 (long long)a->unpack.nt * sh->cu;
    sh->pre_st = sh->pre_bc + (long long)(a->bc.nbc - a->bc.n_own) * sh->cb;
    sh->blocks = sh->pre_st;
    if (a->st.out)
        sh->blocks += blocks_for((long long)a->st.g.nb * a->st.g.n * a->st.g.n * a->st.g.n);
}

extern "C" void hg_cuda_ki_run(void *stream, const hg_args_ki_t *a, const hg_ki_shape_t *sh)
{
    if (sh->blocks == 0)
        return;
    CK(hg_launch(k_ki_run, dim3((unsigned)sh->blocks), NT, (cudaStream_t)stream, a->pdl, *a, sh->cp,
                 sh->cu, sh->cb));
}

extern "C" void hg_cuda_ki_fill(void *stream, const hg_ki_group_t *send_dev, int n, int lo_slot,
                                int runs, int *err)
{
    if (n == 0 || lo_slot >= runs)
        return;
    k_ki_fill<<<n, NT, 0, (cudaStream_t)stream>>>(send_dev, lo_slot, runs, err);
    CK(cudaGetLastError());
}

extern "C" void hg_cuda_ki_reset(void *stream, unsigned long long *words, size_t n)
{
    CK(cudaMemsetAsync(words, 0, sizeof(*words) * n, (cudaStream_t)stream));
}

extern "C" void hg_cuda_ki_word(void *stream, unsigned long long *word, unsigned long long v,
                                int add)
{
    k_ki_word<<<1, 32, 0, (cudaStream_t)stream>>>(word, v, add);
    CK(cudaGetLastError());
}
