/*
 * hpgmg/bicgstab.c - bottom solver: BiCGStab with diagonal preconditioning
 * (Saad, Algorithm 7.7) until the residual max-norm drops by `reduction`.
 * The dot products and norms are the only places where the host waits.
 */
#include <math.h>

#include "solver.h"

void hg_bicgstab(hg_mg_t *mg, hg_level_t *L, int x, int rhs, double reduction)
{
    const int r0 = HG_VEC_RESERVED + 0, r = r0 + 1, p = r0 + 2, q = r0 + 3, s = r0 + 4, t = r0 + 5,
              ap = r0 + 6, as = r0 + 7;
    const int jmax = 200;
    hg_residual(mg, L, r0, x, rhs);       /* r0 = rhs - A x   */
    hg_axpby(mg, L, r, 1.0, r0, 0.0, -1); /* r = r0           */
    hg_axpby(mg, L, p, 1.0, r0, 0.0, -1); /* p = r0           */
    double r_dot_r0 = hg_dot(mg, L, r, r0);
    const double norm_r0 = hg_norm(mg, L, r);
    if (r_dot_r0 == 0.0 || norm_r0 == 0.0)
        return;
    for (int j = 0; j < jmax; j++) {
        L->krylov_iterations++;
        hg_mul(mg, L, q, 1.0, HG_VEC_DINV, p); /* q = D^{-1} p     */
        hg_apply_op(mg, L, ap, q);             /* Ap = A q         */
        const double ap_dot_r0 = hg_dot(mg, L, ap, r0);
        if (ap_dot_r0 == 0.0)
            break;
        const double alpha = r_dot_r0 / ap_dot_r0;
        if (isinf(alpha))
            break;
        hg_axpby(mg, L, x, 1.0, x, alpha, q);   /* x = x + alpha q  */
        hg_axpby(mg, L, s, 1.0, r, -alpha, ap); /* s = r - alpha Ap */
        const double norm_s = hg_norm(mg, L, s);
        if (norm_s == 0.0 || norm_s < reduction * norm_r0)
            break;
        hg_mul(mg, L, t, 1.0, HG_VEC_DINV, s); /* t = D^{-1} s     */
        hg_apply_op(mg, L, as, t);             /* As = A t         */
        const double as_dot_as = hg_dot(mg, L, as, as);
        const double as_dot_s = hg_dot(mg, L, as, s);
        if (as_dot_as == 0.0)
            break;
        const double omega = as_dot_s / as_dot_as;
        if (omega == 0.0 || isinf(omega))
            break;
        hg_axpby(mg, L, x, 1.0, x, omega, t);   /* x = x + omega t   */
        hg_axpby(mg, L, r, 1.0, s, -omega, as); /* r = s - omega As  */
        const double norm_r = hg_norm(mg, L, r);
        if (norm_r == 0.0 || norm_r < reduction * norm_r0)
            break;
        const double r_dot_r0_new = hg_dot(mg, L, r, r0);
        if (r_dot_r0_new == 0.0)
            break;
        const double beta = (r_dot_r0_new / r_dot_r0) * (alpha / omega);
        if (isinf(beta))
            break;
        hg_axpby(mg, L, HG_VEC_TEMP, 1.0, p, -omega, ap); /* TEMP = p - omega Ap  */
        hg_axpby(mg, L, p, 1.0, r, beta, HG_VEC_TEMP);    /* p = r + beta TEMP    */
        r_dot_r0 = r_dot_r0_new;
    }
}
