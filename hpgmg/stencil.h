/*
 * hpgmg/stencil.h - the discrete operators, boundary extrapolations and
 * interpolation weights, written once for the CPU and the GPU (HOSTDEV).
 *
 * Pointers passed to these helpers point at the cell being computed; the
 * strides js/ks step one cell in j/k.  The GPU build compiles these with
 * -fmad=false so that a GPU sweep performs exactly the same IEEE operations
 * as the CPU sweep.
 */
#ifndef HPGMG_STENCIL_H
#define HPGMG_STENCIL_H

#include "defs.h"

/* ---- 7-point, 2nd order, variable coefficient ---------------------------
 * A x = -b/h^2 * sum_faces beta_f (x_nb - x); beta_i[c] is the low-i face of c. */
HOSTDEV double hg_apply_7pt(const double *x, const double *bi, const double *bj, const double *bk,
                            int js, int ks, double bh2inv)
{
    const double xc = x[0];
    return -bh2inv * (bi[1] * (x[1] - xc) + bi[0] * (x[-1] - xc) + bj[js] * (x[js] - xc) +
                      bj[0] * (x[-js] - xc) + bk[ks] * (x[ks] - xc) + bk[0] * (x[-ks] - xc));
}

/* ---- 4th-order finite volume, variable coefficient ------------------------
 * Face fluxes with the 4th-order gradient (15(x1-x0) - (x2-x_-1))/12 and the
 * transverse correction (1/48) d(beta)/dt * d2x/dn dt, summed over 6 faces.
 * Reaches 2 cells along the axes and 1 cell along the edges (no corners). */
HOSTDEV double hg_apply_fv4(const double *x, const double *bi, const double *bj, const double *bk,
                            int js, int ks, double bh2inv)
{
    const double xc = x[0];
    const double twelfth = 1.0 / 12.0;
    /* normal fluxes through the six faces */
    double n = bi[0] * (15.0 * (x[-1] - xc) - (x[-2] - x[1])) +
               bi[1] * (15.0 * (x[1] - xc) - (x[2] - x[-1])) +
               bj[0] * (15.0 * (x[-js] - xc) - (x[-2 * js] - x[js])) +
               bj[js] * (15.0 * (x[js] - xc) - (x[2 * js] - x[-js])) +
               bk[0] * (15.0 * (x[-ks] - xc) - (x[-2 * ks] - x[ks])) +
               bk[ks] * (15.0 * (x[ks] - xc) - (x[2 * ks] - x[-ks]));
    /* transverse (mixed derivative) corrections, low faces then high faces */
    double t = (bi[js] - bi[-js]) * (x[-1 + js] - x[js] - x[-1 - js] + x[-js]) +
               (bi[ks] - bi[-ks]) * (x[-1 + ks] - x[ks] - x[-1 - ks] + x[-ks]) +
               (bj[1] - bj[-1]) * (x[-js + 1] - x[1] - x[-js - 1] + x[-1]) +
               (bj[ks] - bj[-ks]) * (x[-js + ks] - x[ks] - x[-js - ks] + x[-ks]) +
               (bk[1] - bk[-1]) * (x[-ks + 1] - x[1] - x[-ks - 1] + x[-1]) +
               (bk[js] - bk[-js]) * (x[-ks + js] - x[js] - x[-ks - js] + x[-js]) +
               (bi[1 + js] - bi[1 - js]) * (x[1 + js] - x[js] - x[1 - js] + x[-js]) +
               (bi[1 + ks] - bi[1 - ks]) * (x[1 + ks] - x[ks] - x[1 - ks] + x[-ks]) +
               (bj[js + 1] - bj[js - 1]) * (x[js + 1] - x[1] - x[js - 1] + x[-1]) +
               (bj[js + ks] - bj[js - ks]) * (x[js + ks] - x[ks] - x[js - ks] + x[-ks]) +
               (bk[ks + 1] - bk[ks - 1]) * (x[ks + 1] - x[1] - x[ks - 1] + x[-1]) +
               (bk[ks + js] - bk[ks - js]) * (x[ks + js] - x[js] - x[ks - js] + x[-js]);
    return -bh2inv * (twelfth * n + 0.25 * twelfth * t);
}

HOSTDEV double hg_apply(int op, const double *x, const double *bi, const double *bj,
                        const double *bk, int js, int ks, double bh2inv)
{
    return op == HG_OP_FV4 ? hg_apply_fv4(x, bi, bj, bk, js, ks, bh2inv)
                           : hg_apply_7pt(x, bi, bj, bk, js, ks, bh2inv);
}

/* ---- homogeneous Dirichlet boundary: extrapolation of cell averages -------
 * A ghost cell at depth d (1 = adjacent to the boundary) is a weighted sum of
 * the interior cells m = 0.. (m = 0 adjacent to the boundary).  The weights
 * are those of the polynomial of the given order that vanishes on the
 * boundary and has the interior cells' averages:
 *   order 1 (linear)   : d=1: -1
 *   order 2 (quadratic): d=1: -5/2, 1/2                      (deeper: 0)
 *   order 4 (quartic)  : d=1: (-77, 43, -17, 3)/12
 *                        d=2: (-505, 335, -145, 27)/12        (deeper: 0)
 * Edges and corners use the tensor product over the dimensions outside. */
HOSTDEV int hg_bc_taps(int c, int side, int n, int order, int *t, double *w)
{
    if (side == 0) {
        t[0] = c;
        w[0] = 1.0;
        return 1;
    }
    int depth = side < 0 ? -c : c - (n - 1);
    int cnt = 0;
    if (order >= 4) {
        if (depth == 1) {
            w[0] = -77.0 / 12.0;
            w[1] = 43.0 / 12.0;
            w[2] = -17.0 / 12.0;
            w[3] = 3.0 / 12.0;
            cnt = 4;
        } else if (depth == 2) {
            w[0] = -505.0 / 12.0;
            w[1] = 335.0 / 12.0;
            w[2] = -145.0 / 12.0;
            w[3] = 27.0 / 12.0;
            cnt = 4;
        }
    } else if (order == 2) {
        if (depth == 1) {
            w[0] = -2.5;
            w[1] = 0.5;
            cnt = 2;
        }
    } else {
        if (depth == 1) {
            w[0] = -1.0;
            cnt = 1;
        }
    }
    for (int m = 0; m < cnt; m++)
        t[m] = side < 0 ? m : n - 1 - m;
    return cnt;
}

/* weighted sum over the tensor product of taps (same arithmetic on CPU and GPU) */
HOSTDEV double hg_bc_combine(const double *x0, int js, int ks, const int *ti, const double *wi,
                             int ni, const int *tj, const double *wj, int nj, const int *tk,
                             const double *wk, int nk)
{
    double v = 0.0;
    for (int c = 0; c < nk; c++)
        for (int b = 0; b < nj; b++) {
            double s = 0.0;
            for (int a = 0; a < ni; a++)
                s += wi[a] * x0[ti[a] + tj[b] * js + tk[c] * ks];
            v += (wk[c] * wj[b]) * s;
        }
    return v;
}

/* value of ghost cell (ci,cj,ck) of a box whose interior origin is x0;
 * (si,sj,sk): -1/+1 for the dimensions in which the cell is outside the domain */
HOSTDEV double hg_bc_value(const double *x0, int js, int ks, int n, int ci, int cj, int ck, int si,
                           int sj, int sk, int order)
{
    int ti[4], tj[4], tk[4];
    double wi[4], wj[4], wk[4];
    int ni = hg_bc_taps(ci, si, n, order, ti, wi);
    int nj = hg_bc_taps(cj, sj, n, order, tj, wj);
    int nk = hg_bc_taps(ck, sk, n, order, tk, wk);
    return hg_bc_combine(x0, js, ks, ti, wi, ni, tj, wj, nj, tk, wk, nk);
}

/* ---- interpolation weights ------------------------------------------------
 * 1D volume-average interpolation of the left fine child (right child: mirror)
 *   v2: c0 + 1/8 (c_-1 - c_+1)
 *   v4: c0 + 22/128 (c_-1 - c_+1) - 3/128 (c_-2 - c_+2)                      */
#define HG_V2_C1 (1.0 / 8.0)
#define HG_V4_C1 (22.0 / 128.0)
#define HG_V4_C2 (-3.0 / 128.0)

HOSTDEV double hg_v2_1d(double m1, double c0, double p1, int odd)
{
    return odd ? c0 - HG_V2_C1 * (m1 - p1) : c0 + HG_V2_C1 * (m1 - p1);
}
HOSTDEV double hg_v4_1d(double m2, double m1, double c0, double p1, double p2, int odd)
{
    return odd ? c0 - HG_V4_C1 * (m1 - p1) - HG_V4_C2 * (m2 - p2)
               : c0 + HG_V4_C1 * (m1 - p1) + HG_V4_C2 * (m2 - p2);
}

/* Interpolated value of the fine child (oi,oj,ok) in {0,1}^3 of the coarse
 * cell at c (coarse strides js, ks).  kind: HG_T_INTERP_*.  Tensor-product
 * schemes are applied along i, then j, then k. */
HOSTDEV double hg_interp_value(int kind, const double *c, int js, int ks, int oi, int oj, int ok)
{
    if (kind == HG_T_INTERP_P0)
        return c[0];
    if (kind == HG_T_INTERP_P1) {
        const int di = oi ? 1 : -1, dj = oj ? js : -js, dk = ok ? ks : -ks;
        return 0.421875 * c[0] + 0.140625 * c[dk] + 0.140625 * c[dj] + 0.046875 * c[dj + dk] +
               0.140625 * c[di] + 0.046875 * c[di + dk] + 0.046875 * c[di + dj] +
               0.015625 * c[di + dj + dk];
    }
    if (kind == HG_T_INTERP_V2) {
        double fk[3];
        for (int z = -1; z <= 1; z++) {
            double fj[3];
            for (int y = -1; y <= 1; y++) {
                const double *r = c + y * js + z * ks;
                fj[y + 1] = hg_v2_1d(r[-1], r[0], r[1], oi);
            }
            fk[z + 1] = hg_v2_1d(fj[0], fj[1], fj[2], oj);
        }
        return hg_v2_1d(fk[0], fk[1], fk[2], ok);
    }
    /* HG_T_INTERP_V4 */
    double fk[5];
    for (int z = -2; z <= 2; z++) {
        double fj[5];
        for (int y = -2; y <= 2; y++) {
            const double *r = c + y * js + z * ks;
            fj[y + 2] = hg_v4_1d(r[-2], r[-1], r[0], r[1], r[2], oi);
        }
        fk[z + 2] = hg_v4_1d(fj[0], fj[1], fj[2], fj[3], fj[4], oj);
    }
    return hg_v4_1d(fk[0], fk[1], fk[2], fk[3], fk[4], ok);
}

/* Restriction: f points at the first fine cell (2I,2J,2K) of the coarse
 * cell or face; kind: HG_T_RESTRICT_* */
HOSTDEV double hg_restrict_value(int kind, const double *f, int js, int ks)
{
    switch (kind) {
    case HG_T_RESTRICT_FACE_I:
        return 0.25 * (f[0] + f[js] + f[ks] + f[js + ks]);
    case HG_T_RESTRICT_FACE_J:
        return 0.25 * (f[0] + f[1] + f[ks] + f[1 + ks]);
    case HG_T_RESTRICT_FACE_K:
        return 0.25 * (f[0] + f[1] + f[js] + f[1 + js]);
    default:
        return 0.125 *
               (f[0] + f[1] + f[js] + f[1 + js] + f[ks] + f[1 + ks] + f[js + ks] + f[1 + js + ks]);
    }
}

#endif /* HPGMG_STENCIL_H */
