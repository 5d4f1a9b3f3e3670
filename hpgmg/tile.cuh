/*
 * hpgmg/tile.cuh - one tile of a tile list (pack, local, unpack, restrict,
 * interpolate) on the GPU: the body of k_tiles (cuda_kernels.cu), shared
 * with the kernel-initiated backend's kernels (cuda_ki.cu), which give each
 * tile its own buffer base.
 */
#ifndef HPGMG_TILE_CUH
#define HPGMG_TILE_CUH

extern "C" {
#include "ops.h"
}
#include "stencil.h"

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

#endif /* HPGMG_TILE_CUH */
