/*
 * hpgmg/tile.cuh - what cuda_kernels.cu and the ki backend's cuda_ki.cu
 * share: the checking macro, block size and chunking, programmatic
 * dependent launch, one tile of a tile list (pack,
 * local, unpack, restrict, interpolate) -- the body of k_tiles, which the
 * ki kernel calls with each tile's own buffer base --, one ghost region's
 * boundary condition (the body of k_bc) and one cell of a stencil sweep
 * (the body of k_stencil), which the ki kernel runs after its unpacks.
 */
#ifndef HPGMG_TILE_CUH
#define HPGMG_TILE_CUH

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

extern "C" {
#include "ops.h"
}
#include "stencil.h"

/* every CUDA runtime call is checked: a failure ends the process, naming the call */
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "hpgmg-fv: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                                       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* threads per block of every kernel */
static const int NT = 256;

/* blocks along y for a tile (or region) of `cells` cells: about 4 cells per thread */
static unsigned chunks_for(long long cells)
{
    long long c = (cells + 4LL * NT - 1) / (4LL * NT); /* about 4 cells per thread */
    if (c < 1)
        c = 1;
    if (c > 65535)
        c = 65535;
    return (unsigned)c;
}

/* blocks of NT threads for `total` cells, a cell per thread */
static unsigned blocks_for(long long total) { return (unsigned)((total + NT - 1) / NT); }

/* Programmatic dependent launch (sm_90; nothing before): a kernel launched
 * with it may start while the kernel before it in the stream still runs.
 * hg_pdl_enter, first thing in every kernel: wait until the kernels before
 * completed (their stores visible), then let the next kernel be scheduled
 * (it waits in its own hg_pdl_enter). The next kernel's blocks can only be
 * placed once every block of this one runs, so they never take a place one
 * of this kernel's blocks needs. */
__device__ __forceinline__ void hg_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void hg_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void hg_pdl_enter()
{
    hg_pdl_wait();
    hg_pdl_trigger();
}

/* Launch kernel k on `grid` blocks of `threads`, with programmatic dependent
 * launch when pdl is set. */
template <typename... A>
static inline cudaError_t hg_launch(void (*k)(A...), dim3 grid, unsigned threads, cudaStream_t st,
                                    int pdl, A... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.stream = st;
    if (pdl) {
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&cfg, k, args...);
}

/* The cells of tile T handled by chunk `chunk` of `nchunks` (this block's
 * threads). sbuf / dbuf: the buffer of tiles whose source / destination is
 * a buffer (sbox / dbox < 0). l2_src: load buffer sources from L2 (data
 * another block of the same kernel wrote). */
__device__ __forceinline__ void hg_tile_run(const hg_args_tiles_t &a, const hg_tile_t &T,
                                            const double *sbuf, double *dbuf, unsigned chunk,
                                            unsigned nchunks, bool l2_src)
{
    const int kind = a.kind;
    const int fine = kind >= HG_T_INTERP_P0;
    const double *s;
    int sjs, sks;
    const bool from_buf = T.sbox < 0;
    if (!from_buf) {
        s = a.src + (long long)T.sbox * a.s_vol + a.s_g * (1 + a.s_js + a.s_ks) + T.si +
            T.sj * a.s_js + T.sk * a.s_ks;
        sjs = a.s_js;
        sks = a.s_ks;
    } else {
        s = sbuf + T.soff;
        sjs = T.bi;
        sks = T.bi * T.bj;
    }
    double *d;
    int djs, dks;
    if (T.dbox >= 0) {
        d = a.dst + (long long)T.dbox * a.d_vol + a.d_g * (1 + a.d_js + a.d_ks) + T.ti +
            T.tj * a.d_js + T.tk * a.d_ks;
        djs = a.d_js;
        dks = a.d_ks;
    } else {
        d = dbuf + T.doff;
        djs = fine ? 2 * T.bi : T.bi;
        dks = fine ? 4 * T.bi * T.bj : T.bi * T.bj;
    }
    const int ni = fine ? 2 * T.bi : T.bi, nj = fine ? 2 * T.bj : T.bj, nk = fine ? 2 * T.bk : T.bk;
    const int cells = ni * nj * nk;
    const double p = a.prescale;
    for (int c = chunk * blockDim.x + threadIdx.x; c < cells; c += nchunks * blockDim.x) {
        const int i = c % ni, j = (c / ni) % nj, k = c / (ni * nj);
        double *o = d + i + j * djs + k * dks;
        if (kind == HG_T_COPY || kind == HG_T_INCREMENT) {
            const double *q = s + i + j * sjs + k * sks;
            const double v = (l2_src && from_buf) ? __ldcg(q) : *q;
            *o = kind == HG_T_COPY ? v : p * *o + v;
        } else if (kind <= HG_T_RESTRICT_FACE_K) {
            *o = hg_restrict_value(kind, s + 2 * i + 2 * j * sjs + 2 * k * sks, sjs, sks);
        } else {
            const double v = hg_interp_value(kind, s + (i >> 1) + (j >> 1) * sjs + (k >> 1) * sks,
                                             sjs, sks, i & 1, j & 1, k & 1);
            *o = (p == 0.0) ? v : p * *o + v;
        }
    }
}

/* offset of box b's first interior cell in a vector */
__device__ __forceinline__ long long origin(const hg_geom_t &g, int b)
{
    return (long long)b * g.vol + (long long)g.g * (1 + g.js + g.ks);
}

/* cells [lo, lo + len) along one axis of ghost region d (-1, 0, 1) */
__device__ __forceinline__ void hg_region(int d, int n, int g, int &lo, int &len)
{
    if (d < 0) {
        lo = -g;
        len = g;
    } else if (d > 0) {
        lo = n;
        len = g;
    } else {
        lo = 0;
        len = n;
    }
}

/* Ghost region t of a.bc (its box, direction): where its cells are and
 * which axes leave the domain (hg_bc_region_of; then hg_bc_apply). */
struct hg_bc_region {
    double *x0; /* the box's first interior cell */
    int il, ni, jl, nj, kl, nk;
    int si, sj, sk;
};

__device__ __forceinline__ hg_bc_region hg_bc_region_of(const hg_args_bc_t &a, int t)
{
    const int b = a.bc[2 * t], d = a.bc[2 * t + 1];
    const hg_geom_t &g = a.g;
    const int n = g.n;
    const int *lo = g.low + 3 * b;
    const int di = hg_dir_di(d), dj = hg_dir_dj(d), dk = hg_dir_dk(d);
    hg_bc_region R;
    R.si = (di < 0 && lo[0] == 0) ? -1 : (di > 0 && lo[0] + n == g.dim) ? 1 : 0;
    R.sj = (dj < 0 && lo[1] == 0) ? -1 : (dj > 0 && lo[1] + n == g.dim) ? 1 : 0;
    R.sk = (dk < 0 && lo[2] == 0) ? -1 : (dk > 0 && lo[2] + n == g.dim) ? 1 : 0;
    hg_region(di, n, g.g, R.il, R.ni);
    hg_region(dj, n, g.g, R.jl, R.nj);
    hg_region(dk, n, g.g, R.kl, R.nk);
    R.x0 = a.x + origin(g, b);
    return R;
}

/* The boundary condition of region R: chunk `chunk` of `nchunks` of its
 * cells, by this block's threads. */
__device__ __forceinline__ void hg_bc_apply(const hg_args_bc_t &a, const hg_bc_region &R,
                                            unsigned chunk, unsigned nchunks)
{
    const hg_geom_t &g = a.g;
    const int cells = R.ni * R.nj * R.nk;
    for (int c = chunk * blockDim.x + threadIdx.x; c < cells; c += nchunks * blockDim.x) {
        const int i = R.il + c % R.ni, j = R.jl + (c / R.ni) % R.nj, k = R.kl + c / (R.ni * R.nj);
        R.x0[i + j * g.js + k * g.ks] =
            hg_bc_value(R.x0, g.js, g.ks, g.n, i, j, k, R.si, R.sj, R.sk, a.order);
    }
}

/* The boundary condition of ghost region t of a.bc: chunk `chunk` of
 * `nchunks` of its cells, by this block's threads. */
__device__ __forceinline__ void hg_bc_run(const hg_args_bc_t &a, int t, unsigned chunk,
                                          unsigned nchunks)
{
    hg_bc_apply(a, hg_bc_region_of(a, t), chunk, nchunks);
}

/* cell idx (interior cells of all boxes, i fastest) -> box and offset */
__device__ __forceinline__ void cell_of(const hg_geom_t &g, long long idx, int &b, int &i, int &j,
                                        int &k)
{
    const long long n = g.n;
    i = (int)(idx % n);
    j = (int)((idx / n) % n);
    k = (int)((idx / (n * n)) % n);
    b = (int)(idx / (n * n * n));
}

/* One cell (idx: interior cells of all boxes, i fastest) of a stencil
 * sweep: apply, residual, a GSRB sweep or a Chebyshev step (the body of
 * k_stencil, which the ki kernel also runs after an exchange). */
__device__ __forceinline__ void hg_stencil_cell(const hg_args_stencil_t &a, long long idx)
{
    const long long total = (long long)a.g.nb * a.g.n * a.g.n * a.g.n;
    if (idx >= total)
        return;
    int b, i, j, k;
    cell_of(a.g, idx, b, i, j, k);
    const int js = a.g.js, ks = a.g.ks;
    const long long o = origin(a.g, b);
    const int c = i + j * js + k * ks;
    const double *x = a.x + o, *bi = a.beta_i + o, *bj = a.beta_j + o, *bk = a.beta_k + o;
    double *out = a.out + o;
    const double bh2 = a.b * a.h2inv;
    switch (a.variant) {
    case HG_S_APPLY:
        out[c] = hg_apply(a.op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
        break;
    case HG_S_RESIDUAL:
        out[c] = a.rhs[o + c] - hg_apply(a.op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
        break;
    case HG_S_GSRB: {
        const int *lo = a.g.low + 3 * b;
        const int p0 = (lo[0] + lo[1] + lo[2] + a.sweep) & 1;
        if (((i + j + k + p0) & 1) == 0) {
            const double ax = hg_apply(a.op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
            out[c] = x[c] + a.dinv[o + c] * (a.rhs[o + c] - ax);
        } else if (a.copy_other) {
            out[c] = x[c];
        }
        break;
    }
    case HG_S_CHEBY: {
        const double ax = hg_apply(a.op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
        out[c] = x[c] + a.c1 * (x[c] - a.xnm1[o + c]) + a.c2 * a.dinv[o + c] * (a.rhs[o + c] - ax);
        break;
    }
    }
}

#endif /* HPGMG_TILE_CUH */
