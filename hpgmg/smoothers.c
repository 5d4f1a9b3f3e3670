/*
 * hpgmg/smoothers.c - Gauss-Seidel red-black and Chebyshev smoothers.
 *
 * GSRB: a ghost-zone exchange and the boundary conditions before every
 * sweep (hg_exchange_stencil: on ki levels with the sweep, one kernel).  7-point: 2 smooths (R-B-R-B) in place (a red cell's neighbours are
 * all black).  fv4: 3 smooths (R-B-R-B-R-B) out of place, ping-ponging
 * between x and TEMP (the stencil reaches cells of its own colour).
 * Chebyshev: one polynomial of degree 4 (7-point) or 6 (fv4) in D^{-1}A on
 * [lambda_max/8, lambda_max], ping-ponging between x and TEMP.
 */
#include "solver.h"

void hg_smooth(hg_mg_t *mg, hg_level_t *L, int x, int rhs)
{
    if (!L->nb)
        return;
    if (mg->smoother == HG_SMOOTH_GSRB) {
        const int oop = (mg->op == HG_OP_FV4);
        const int sweeps = 2 * (mg->op == HG_OP_FV4 ? 3 : 2);
        for (int s = 0; s < sweeps; s++) {
            const int src = (oop && (s & 1)) ? HG_VEC_TEMP : x;
            const int dst = oop ? ((s & 1) ? x : HG_VEC_TEMP) : x;
            hg_exchange_stencil(mg, L, &L->t.smooth, HG_S_GSRB, src, -1, dst, rhs, s, oop, 0.0,
                                0.0);
        }
        return;
    }
    /* Chebyshev (Saad, Algorithm 12.1, with the D^{-1} preconditioner) */
    enum { MAXDEG = 8 };
    const int degree = mg->op == HG_OP_FV4 ? 6 : 4;
    const double beta = L->dominant_eigenvalue, alpha = 0.125 * beta;
    const double theta = 0.5 * (beta + alpha), delta = 0.5 * (beta - alpha), sigma = theta / delta;
    double c1[MAXDEG], c2[MAXDEG], rho = 1.0 / sigma;
    c1[0] = 0.0;
    c2[0] = 1.0 / theta;
    for (int s = 1; s < degree; s++) {
        const double rho_prev = rho;
        rho = 1.0 / (2.0 * sigma - rho_prev);
        c1[s] = rho * rho_prev;
        c2[s] = rho * 2.0 / delta;
    }
    for (int s = 0; s < degree; s++) {
        const int xn = (s & 1) ? HG_VEC_TEMP : x;
        const int xo = (s & 1) ? x : HG_VEC_TEMP; /* x_{n-1}, overwritten by x_{n+1} */
        hg_exchange_stencil(mg, L, &L->t.smooth, HG_S_CHEBY, xn, xo, xo, rhs, s, 0, c1[s], c2[s]);
    }
}
