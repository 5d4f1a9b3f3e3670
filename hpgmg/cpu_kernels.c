/*
 * hpgmg/cpu_kernels.c - CPU implementation of every operation of ops.h.
 *
 * These functions run either directly on the calling thread (mpi backend)
 * or on a host stream's thread (acc / streamcomm backends); they only touch
 * the memory named in their argument block.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "stencil.h"

/* interior origin (cell 0,0,0) of box b */
static inline double *box0(double *base, const hg_geom_t *g, int b)
{
    return base + (size_t)b * g->vol + g->g * (1 + g->js + g->ks);
}
static inline const double *cbox0(const double *base, const hg_geom_t *g, int b)
{
    return base + (size_t)b * g->vol + g->g * (1 + g->js + g->ks);
}

static void k_zero(const hg_args_zero_t *a)
{
    memset(a->x, 0, sizeof(double) * (size_t)a->g.nb * a->g.vol);
}

static void k_axpby(const hg_args_axpby_t *a)
{
    const hg_geom_t *g = &a->g;
    for (int b = 0; b < g->nb; b++) {
        double *c = box0(a->c, g, b);
        const double *x = cbox0(a->a, g, b);
        const double *y = a->b ? cbox0(a->b, g, b) : NULL;
        for (int k = 0; k < g->n; k++)
            for (int j = 0; j < g->n; j++) {
                int o = j * g->js + k * g->ks;
                if (y)
                    for (int i = 0; i < g->n; i++)
                        c[o + i] = a->alpha * x[o + i] + a->beta * y[o + i];
                else
                    for (int i = 0; i < g->n; i++)
                        c[o + i] = a->alpha * x[o + i];
            }
    }
}

static void k_mul(const hg_args_mul_t *a)
{
    const hg_geom_t *g = &a->g;
    for (int b = 0; b < g->nb; b++) {
        double *c = box0(a->c, g, b);
        const double *x = cbox0(a->a, g, b), *y = cbox0(a->b, g, b);
        for (int k = 0; k < g->n; k++)
            for (int j = 0; j < g->n; j++) {
                int o = j * g->js + k * g->ks;
                for (int i = 0; i < g->n; i++)
                    c[o + i] = a->scale * x[o + i] * y[o + i];
            }
    }
}

static void k_dot(const hg_args_red_t *a)
{
    const hg_geom_t *g = &a->g;
    for (int b = 0; b < g->nb; b++) {
        const double *x = cbox0(a->a, g, b), *y = cbox0(a->b, g, b);
        double s = 0.0;
        for (int k = 0; k < g->n; k++)
            for (int j = 0; j < g->n; j++) {
                int o = j * g->js + k * g->ks;
                for (int i = 0; i < g->n; i++)
                    s += x[o + i] * y[o + i];
            }
        a->partial[b] = s;
    }
}

static void k_norm(const hg_args_red_t *a)
{
    const hg_geom_t *g = &a->g;
    for (int b = 0; b < g->nb; b++) {
        const double *x = cbox0(a->a, g, b);
        double m = 0.0;
        for (int k = 0; k < g->n; k++)
            for (int j = 0; j < g->n; j++) {
                int o = j * g->js + k * g->ks;
                for (int i = 0; i < g->n; i++) {
                    double v = fabs(x[o + i]);
                    if (v > m)
                        m = v;
                }
            }
        a->partial[b] = m;
    }
}

static void k_combine(const hg_args_combine_t *a)
{
    if (a->dot) {
        for (int i = 0; i < a->num_boxes; i++)
            a->out[i] = 0.0;
        for (int b = 0; b < a->nb; b++)
            a->out[a->ids[b]] = a->partial[b];
        return;
    }
    double m = 0.0;
    for (int b = 0; b < a->nb; b++)
        if (a->partial[b] > m)
            m = a->partial[b];
    a->out[0] = m;
}

static void k_stencil(const hg_args_stencil_t *a)
{
    const hg_geom_t *g = &a->g;
    const int n = g->n, js = g->js, ks = g->ks;
    const double bh2 = a->b * a->h2inv;
    for (int b = 0; b < g->nb; b++) {
        const double *x = cbox0(a->x, g, b);
        const double *bi = cbox0(a->beta_i, g, b), *bj = cbox0(a->beta_j, g, b),
                     *bk = cbox0(a->beta_k, g, b);
        double *out = box0(a->out, g, b);
        const double *rhs = a->rhs ? cbox0(a->rhs, g, b) : NULL;
        const double *dinv = a->dinv ? cbox0(a->dinv, g, b) : NULL;
        switch (a->variant) {
        case HG_S_APPLY:
            for (int k = 0; k < n; k++)
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < n; i++) {
                        int c = i + j * js + k * ks;
                        out[c] = hg_apply(a->op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
                    }
            break;
        case HG_S_RESIDUAL:
            for (int k = 0; k < n; k++)
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < n; i++) {
                        int c = i + j * js + k * ks;
                        out[c] =
                            rhs[c] - hg_apply(a->op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
                    }
            break;
        case HG_S_GSRB: {
            const int *lo = g->low + 3 * b;
            const int p0 = (lo[0] + lo[1] + lo[2] + a->sweep) & 1;
            for (int k = 0; k < n; k++)
                for (int j = 0; j < n; j++) {
                    int row = j * js + k * ks;
                    if (a->copy_other)
                        for (int i = 0; i < n; i++)
                            out[row + i] = x[row + i];
                    for (int i = (j + k + p0) & 1; i < n; i += 2) {
                        int c = row + i;
                        double ax = hg_apply(a->op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
                        out[c] = x[c] + dinv[c] * (rhs[c] - ax);
                    }
                }
            break;
        }
        case HG_S_CHEBY: {
            const double *xm = cbox0(a->xnm1, g, b);
            for (int k = 0; k < n; k++)
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < n; i++) {
                        int c = i + j * js + k * ks;
                        double ax = hg_apply(a->op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
                        out[c] = x[c] + a->c1 * (x[c] - xm[c]) + a->c2 * dinv[c] * (rhs[c] - ax);
                    }
            break;
        }
        }
    }
}

/* ghost region of direction (di,dj,dk): [-g,0), [0,n) or [n,n+g) per dimension */
static inline void region(int d, int n, int g, int *lo, int *hi)
{
    if (d < 0) {
        *lo = -g;
        *hi = 0;
    } else if (d > 0) {
        *lo = n;
        *hi = n + g;
    } else {
        *lo = 0;
        *hi = n;
    }
}

static void k_bc(const hg_args_bc_t *a)
{
    const hg_geom_t *g = &a->g;
    const int n = g->n, js = g->js, ks = g->ks;
    for (int t = 0; t < a->nbc; t++) {
        const int b = a->bc[2 * t], d = a->bc[2 * t + 1];
        const int *lo = g->low + 3 * b;
        const int di = hg_dir_di(d), dj = hg_dir_dj(d), dk = hg_dir_dk(d);
        /* which sides of this region are outside the domain */
        const int si = (di < 0 && lo[0] == 0) ? -1 : (di > 0 && lo[0] + n == g->dim) ? 1 : 0;
        const int sj = (dj < 0 && lo[1] == 0) ? -1 : (dj > 0 && lo[1] + n == g->dim) ? 1 : 0;
        const int sk = (dk < 0 && lo[2] == 0) ? -1 : (dk > 0 && lo[2] + n == g->dim) ? 1 : 0;
        double *x0 = box0(a->x, g, b);
        int il, ih, jl, jh, kl, kh;
        region(di, n, g->g, &il, &ih);
        region(dj, n, g->g, &jl, &jh);
        region(dk, n, g->g, &kl, &kh);
        /* the taps of each coordinate, computed once per region */
        enum { MAXR = 1100 };
        int ti[MAXR][4], tj[4], tk[4], ni[MAXR];
        double wi[MAXR][4], wj[4], wk[4];
        if (ih - il > MAXR)
            abort(); /* boxes are at most 512^3 (log2_box_dim <= 9) */
        for (int i = il; i < ih; i++)
            ni[i - il] = hg_bc_taps(i, si, n, a->order, ti[i - il], wi[i - il]);
        for (int k = kl; k < kh; k++) {
            const int nk = hg_bc_taps(k, sk, n, a->order, tk, wk);
            for (int j = jl; j < jh; j++) {
                const int nj = hg_bc_taps(j, sj, n, a->order, tj, wj);
                double *row = x0 + j * js + k * ks;
                for (int i = il; i < ih; i++)
                    row[i] = hg_bc_combine(x0, js, ks, ti[i - il], wi[i - il], ni[i - il], tj, wj,
                                           nj, tk, wk, nk);
            }
        }
    }
}

static void k_tiles(const hg_args_tiles_t *a)
{
    const int kind = a->kind;
    for (int t = 0; t < a->nt; t++) {
        const hg_tile_t *T = a->t + t;
        /* source */
        const double *s;
        int sjs, sks;
        if (T->sbox >= 0) {
            s = a->src + (size_t)T->sbox * a->s_vol + a->s_g * (1 + a->s_js + a->s_ks) + T->si +
                T->sj * a->s_js + T->sk * a->s_ks;
            sjs = a->s_js;
            sks = a->s_ks;
        } else {
            s = a->sbuf + T->soff;
            sjs = T->bi;
            sks = T->bi * T->bj; /* buffers on the source side: COPY / INCREMENT */
        }
        /* destination */
        double *d;
        int djs, dks;
        const int fine = (kind >= HG_T_INTERP_P0);
        if (T->dbox >= 0) {
            d = a->dst + (size_t)T->dbox * a->d_vol + a->d_g * (1 + a->d_js + a->d_ks) + T->ti +
                T->tj * a->d_js + T->tk * a->d_ks;
            djs = a->d_js;
            dks = a->d_ks;
        } else {
            d = a->dbuf + T->doff;
            djs = fine ? 2 * T->bi : T->bi;
            dks = fine ? 4 * T->bi * T->bj : T->bi * T->bj;
        }
        if (kind == HG_T_COPY) {
            for (int k = 0; k < T->bk; k++)
                for (int j = 0; j < T->bj; j++)
                    for (int i = 0; i < T->bi; i++)
                        d[i + j * djs + k * dks] = s[i + j * sjs + k * sks];
        } else if (kind == HG_T_INCREMENT) {
            const double p = a->prescale;
            for (int k = 0; k < T->bk; k++)
                for (int j = 0; j < T->bj; j++)
                    for (int i = 0; i < T->bi; i++) {
                        double *o = d + i + j * djs + k * dks;
                        *o = p * *o + s[i + j * sjs + k * sks];
                    }
        } else if (kind <= HG_T_RESTRICT_FACE_K) {
            for (int k = 0; k < T->bk; k++)
                for (int j = 0; j < T->bj; j++)
                    for (int i = 0; i < T->bi; i++)
                        d[i + j * djs + k * dks] = hg_restrict_value(
                            kind, s + 2 * i + 2 * j * sjs + 2 * k * sks, sjs, sks);
        } else if (kind == HG_T_INTERP_V4 || kind == HG_T_INTERP_V2) {
            /* the 8 children of a coarse cell share the 1D interpolations: same
       * arithmetic as hg_interp_value, evaluated once per coarse cell */
            const double p = a->prescale;
            const int r = kind == HG_T_INTERP_V4 ? 2 : 1, w = 2 * r + 1;
            for (int K = 0; K < T->bk; K++)
                for (int J = 0; J < T->bj; J++)
                    for (int I = 0; I < T->bi; I++) {
                        const double *c = s + I + J * sjs + K * sks;
                        double fi[2][5][5], fj[2][2][5];
                        for (int z = -r; z <= r; z++)
                            for (int y = -r; y <= r; y++) {
                                const double *q = c + y * sjs + z * sks;
                                for (int o = 0; o < 2; o++)
                                    fi[o][z + r][y + r] =
                                        r == 2 ? hg_v4_1d(q[-2], q[-1], q[0], q[1], q[2], o)
                                               : hg_v2_1d(q[-1], q[0], q[1], o);
                            }
                        for (int oi = 0; oi < 2; oi++)
                            for (int oj = 0; oj < 2; oj++)
                                for (int z = 0; z < w; z++) {
                                    const double *q = fi[oi][z];
                                    fj[oi][oj][z] = r == 2
                                                        ? hg_v4_1d(q[0], q[1], q[2], q[3], q[4], oj)
                                                        : hg_v2_1d(q[0], q[1], q[2], oj);
                                }
                        for (int ok = 0; ok < 2; ok++)
                            for (int oj = 0; oj < 2; oj++)
                                for (int oi = 0; oi < 2; oi++) {
                                    const double *q = fj[oi][oj];
                                    double v = r == 2 ? hg_v4_1d(q[0], q[1], q[2], q[3], q[4], ok)
                                                      : hg_v2_1d(q[0], q[1], q[2], ok);
                                    double *o =
                                        d + (2 * I + oi) + (2 * J + oj) * djs + (2 * K + ok) * dks;
                                    *o = (p == 0.0) ? v : p * *o + v;
                                }
                    }
        } else { /* interpolation: dst = prescale*dst + I(src) over the fine block */
            const double p = a->prescale;
            for (int k = 0; k < 2 * T->bk; k++)
                for (int j = 0; j < 2 * T->bj; j++)
                    for (int i = 0; i < 2 * T->bi; i++) {
                        double v =
                            hg_interp_value(kind, s + (i >> 1) + (j >> 1) * sjs + (k >> 1) * sks,
                                            sjs, sks, i & 1, j & 1, k & 1);
                        double *o = d + i + j * djs + k * dks;
                        *o = (p == 0.0) ? v : p * *o + v;
                    }
        }
    }
}

void hg_cpu_run(int kind, const void *args)
{
    switch (kind) {
    case HG_K_ZERO:
        k_zero(args);
        break;
    case HG_K_AXPBY:
        k_axpby(args);
        break;
    case HG_K_MUL:
        k_mul(args);
        break;
    case HG_K_DOT:
        k_dot(args);
        break;
    case HG_K_NORM:
        k_norm(args);
        break;
    case HG_K_STENCIL:
        k_stencil(args);
        break;
    case HG_K_BC:
        k_bc(args);
        break;
    case HG_K_TILES:
        k_tiles(args);
        break;
    case HG_K_COMBINE:
        k_combine(args);
        break;
    default:
        break;
    }
}
