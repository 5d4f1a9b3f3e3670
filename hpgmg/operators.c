/*
 * hpgmg/operators.c - the two problems, coefficient setup of every level
 * (restriction of alpha/beta, extrapolation of beta into the boundary ghost
 * zones for fv4, exact D^{-1} by probing, Gershgorin bound of D^{-1}A) and the
 * inter-level transfers.
 *
 * Setup runs on the host (plain MPI) before any execution context is chosen.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "solver.h"
#include "stencil.h"

/* ---- fv4 problem (HPGMG's default): f = sin^7 products, beta = 1 + 1/4 sin sin sin,
 *      both converted from point values to cell/face averages with h^2/24 corrections */
static double fv4_beta(double x, double y, double z, double h, int axx, int ayy, int azz)
{
    const double b = 0.25, a = 2.0 * M_PI;
    const double s = sin(a * x) * sin(a * y) * sin(a * z);
    double B = 1.0 + b * s;
    const double Bdd = -a * a * b * s; /* each of Bxx, Byy, Bzz */
    if (axx)
        B += (h * h / 24.0) * Bdd;
    if (ayy)
        B += (h * h / 24.0) * Bdd;
    if (azz)
        B += (h * h / 24.0) * Bdd;
    return B;
}

static double fv4_f(double x, double y, double z, double h)
{
    const double a = 2.0 * M_PI, p = 7.0;
    const double sx = sin(a * x), sy = sin(a * y), sz = sin(a * z);
    const double cx = cos(a * x), cy = cos(a * y), cz = cos(a * z);
    const double F = pow(sx, p) * pow(sy, p) * pow(sz, p);
    const double Fxx =
        -a * a * p * F + a * a * p * (p - 1) * pow(sx, p - 2) * pow(sy, p) * pow(sz, p) * cx * cx;
    const double Fyy =
        -a * a * p * F + a * a * p * (p - 1) * pow(sx, p) * pow(sy, p - 2) * pow(sz, p) * cy * cy;
    const double Fzz =
        -a * a * p * F + a * a * p * (p - 1) * pow(sx, p) * pow(sy, p) * pow(sz, p - 2) * cz * cz;
    return F + (h * h / 24.0) * Fxx + (h * h / 24.0) * Fyy + (h * h / 24.0) * Fzz;
}

/* ---- 7-point problem: manufactured u = P(x)P(y)P(z), P(t) = 2t^6-6t^5+5t^4-t^2,
 *      beta = 5.5 + 4.5 tanh(10(r-1/4)), f = -div(beta grad u) at cell centres */
static void p6_beta(double x, double y, double z, double *B, double *Bx, double *By, double *Bz)
{
    const double c1 = 5.5, c2 = 4.5, c3 = 10.0;
    const double dx = x - 0.5, dy = y - 0.5, dz = z - 0.5;
    const double r = sqrt(dx * dx + dy * dy + dz * dz);
    const double th = tanh(c3 * (r - 0.25));
    *B = c1 + c2 * th;
    const double d = r > 0.0 ? c2 * c3 * (1.0 - th * th) / r : 0.0;
    *Bx = d * dx;
    *By = d * dy;
    *Bz = d * dz;
}

static void p6_poly(double t, double *P, double *Pt, double *Ptt)
{
    *P = 2.0 * pow(t, 6) - 6.0 * pow(t, 5) + 5.0 * pow(t, 4) - 1.0 * pow(t, 2);
    *Pt = 12.0 * pow(t, 5) - 30.0 * pow(t, 4) + 20.0 * pow(t, 3) - 2.0 * t;
    *Ptt = 60.0 * pow(t, 4) - 120.0 * pow(t, 3) + 60.0 * pow(t, 2) - 2.0;
}

void hg_init_problem(hg_mg_t *mg, hg_level_t *L)
{
    const double h = L->h;
    const int n = L->box_dim;
    if (mg->my_rank == 0) {
        fprintf(stdout, "  Initializing alpha, beta, RHS for the %s operator... ",
                mg->op == HG_OP_FV4 ? "fv4" : "7-point");
        fflush(stdout);
    }
    for (int b = 0; b < L->nb; b++) {
        const int *lo = L->low + 3 * b;
        double *F = hg_box(L, HG_VEC_F, b), *A = hg_box(L, HG_VEC_ALPHA, b),
               *U = hg_box(L, HG_VEC_UTRUE, b);
        double *Bi = hg_box(L, HG_VEC_BETA_I, b), *Bj = hg_box(L, HG_VEC_BETA_J, b),
               *Bk = hg_box(L, HG_VEC_BETA_K, b);
        for (int k = 0; k <= n; k++) /* <= n: the high faces are stored too */
            for (int j = 0; j <= n; j++)
                for (int i = 0; i <= n; i++) {
                    const int c = i + j * L->js + k * L->ks;
                    const double x = h * ((double)(i + lo[0]) + 0.5);
                    const double y = h * ((double)(j + lo[1]) + 0.5);
                    const double z = h * ((double)(k + lo[2]) + 0.5);
                    A[c] = 1.0;
                    if (mg->op == HG_OP_FV4) {
                        Bi[c] = fv4_beta(x - 0.5 * h, y, z, h, 0, 1, 1);
                        Bj[c] = fv4_beta(x, y - 0.5 * h, z, h, 1, 0, 1);
                        Bk[c] = fv4_beta(x, y, z - 0.5 * h, h, 1, 1, 0);
                        F[c] = fv4_f(x, y, z, h);
                        U[c] = 0.0;
                    } else {
                        double B, Bx, By, Bz, d1, d2, d3;
                        p6_beta(x - 0.5 * h, y, z, &Bi[c], &d1, &d2, &d3);
                        p6_beta(x, y - 0.5 * h, z, &Bj[c], &d1, &d2, &d3);
                        p6_beta(x, y, z - 0.5 * h, &Bk[c], &d1, &d2, &d3);
                        p6_beta(x, y, z, &B, &Bx, &By, &Bz);
                        double X, Xx, Xxx, Y, Yy, Yyy, Z, Zz, Zzz;
                        p6_poly(x, &X, &Xx, &Xxx);
                        p6_poly(y, &Y, &Yy, &Yyy);
                        p6_poly(z, &Z, &Zz, &Zzz);
                        const double u = X * Y * Z, ux = Xx * Y * Z, uy = X * Yy * Z,
                                     uz = X * Y * Zz;
                        const double uxx = Xxx * Y * Z, uyy = X * Yyy * Z, uzz = X * Y * Zzz;
                        U[c] = u;
                        F[c] = -((Bx * ux + By * uy + Bz * uz) + B * (uxx + uyy + uzz));
                    }
                }
    }
    if (mg->my_rank == 0)
        fprintf(stdout, "done\n");
}

/* 7-point: the exact solution at the cell centres of a coarser level (setup) */
void hg_exact_solution(hg_mg_t *mg, hg_level_t *L)
{
    (void)mg;
    for (int b = 0; b < L->nb; b++) {
        const int *lo = L->low + 3 * b;
        double *U = hg_box(L, HG_VEC_UTRUE, b);
        for (int k = 0; k < L->box_dim; k++)
            for (int j = 0; j < L->box_dim; j++)
                for (int i = 0; i < L->box_dim; i++) {
                    double X, Y, Z, d1, d2;
                    p6_poly(L->h * (i + lo[0] + 0.5), &X, &d1, &d2);
                    p6_poly(L->h * (j + lo[1] + 0.5), &Y, &d1, &d2);
                    p6_poly(L->h * (k + lo[2] + 0.5), &Z, &d1, &d2);
                    U[i + j * L->js + k * L->ks] = X * Y * Z;
                }
    }
}

/* fv4: the transverse terms read beta one cell outside the box.  At the
 * domain boundary those values are extrapolated along the box-relative
 * inward normal of the ghost region (polynomial degree 4, 3 or 1 depending on
 * the box size); a face coefficient is not extrapolated across its own face. */
static void extrapolate_betas(hg_level_t *L)
{
    const int n = L->box_dim, g = L->ghosts, js = L->js, ks = L->ks;
    if (n < 2)
        return;
    static const double w5[5] = {5.0, -10.0, 10.0, -5.0, 1.0}, w4[4] = {4.0, -6.0, 4.0, -1.0},
                        w2[2] = {2.0, -1.0};
    const double *w = n >= 5 ? w5 : n >= 4 ? w4 : w2;
    const int nw = n >= 5 ? 5 : n >= 4 ? 4 : 2;
    for (int t = 0; t < L->nbc[HG_SHAPE_BOX]; t++) {
        const int b = L->bc[HG_SHAPE_BOX][2 * t], d = L->bc[HG_SHAPE_BOX][2 * t + 1];
        const int dd[3] = {hg_dir_di(d), hg_dir_dj(d), hg_dir_dk(d)};
        const int nz = (dd[0] != 0) + (dd[1] != 0) + (dd[2] != 0);
        for (int comp = 0; comp < 3; comp++) {
            if (nz == 1 && dd[comp] != 0)
                continue; /* the face normal to this coefficient */
            int s[3] = {-dd[0], -dd[1], -dd[2]};
            s[comp] = 0;
            const int stride = s[0] + s[1] * js + s[2] * ks;
            double *v = hg_box(L, HG_VEC_BETA_I + comp, b);
            /* visit the region nearest-first so that deeper cells read computed ones */
            int lo[3], cnt[3], step[3];
            for (int a = 0; a < 3; a++) {
                if (dd[a] < 0) {
                    lo[a] = -1;
                    cnt[a] = g;
                    step[a] = -1;
                } else if (dd[a] > 0) {
                    lo[a] = n;
                    cnt[a] = g;
                    step[a] = 1;
                } else {
                    lo[a] = 0;
                    cnt[a] = n;
                    step[a] = 1;
                }
            }
            for (int kk = 0; kk < cnt[2]; kk++)
                for (int jj = 0; jj < cnt[1]; jj++)
                    for (int ii = 0; ii < cnt[0]; ii++) {
                        const int c = (lo[0] + step[0] * ii) + (lo[1] + step[1] * jj) * js +
                                      (lo[2] + step[2] * kk) * ks;
                        double e = 0.0;
                        for (int m = 0; m < nw; m++)
                            e += w[m] * v[c + (m + 1) * stride];
                        v[c] = e;
                    }
        }
    }
}

/* exact diagonal of A (boundary conditions included) by probing with a
 * colouring of 2*radius colours per dimension; also the l1 row sums for the
 * Gershgorin bound of the spectrum of D^{-1}A (Chebyshev) */
static void probe_diagonal(hg_mg_t *mg, hg_level_t *L)
{
    int colours = 2 * hg_radius(mg->op);
    if (L->dim < colours)
        colours = L->dim;
    double t0 = MPI_Wtime();
    if (mg->my_rank == 0) {
        fprintf(stdout, "  calculating D^{-1} exactly for level h=%e using %d colors...  ", L->h,
                colours * colours * colours);
        fflush(stdout);
    }
    const int n = L->box_dim, js = L->js, ks = L->ks, shape = hg_op_shape(mg),
              order = hg_op_bc_order(mg, L);
    const double bh2 = 1.0 / (L->h * L->h);
    for (int b = 0; b < L->nb; b++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < n; i++) {
                    hg_box(L, HG_VEC_DINV, b)[i + j * js + k * ks] = 0.0;
                    hg_box(L, HG_VEC_L1INV, b)[i + j * js + k * ks] = 0.0;
                }
    for (int kc = 0; kc < colours; kc++)
        for (int jc = 0; jc < colours; jc++)
            for (int ic = 0; ic < colours; ic++) {
                hg_zero(mg, L, HG_VEC_TEMP);
                for (int b = 0; b < L->nb; b++) {
                    const int *lo = L->low + 3 * b;
                    double *x = hg_box(L, HG_VEC_TEMP, b);
                    for (int k = 0; k < n; k++)
                        for (int j = 0; j < n; j++)
                            for (int i = 0; i < n; i++)
                                x[i + j * js + k * ks] =
                                    ((lo[0] + i) % colours == ic && (lo[1] + j) % colours == jc &&
                                     (lo[2] + k) % colours == kc)
                                        ? 1.0
                                        : 0.0;
                }
                hg_exchange_bc(mg, L, HG_VEC_TEMP, shape, order);
                for (int b = 0; b < L->nb; b++) {
                    const double *x = hg_box(L, HG_VEC_TEMP, b);
                    const double *bi = hg_box(L, HG_VEC_BETA_I, b),
                                 *bj = hg_box(L, HG_VEC_BETA_J, b),
                                 *bk = hg_box(L, HG_VEC_BETA_K, b);
                    double *aii = hg_box(L, HG_VEC_DINV, b), *sum = hg_box(L, HG_VEC_L1INV, b);
                    for (int k = 0; k < n; k++)
                        for (int j = 0; j < n; j++)
                            for (int i = 0; i < n; i++) {
                                const int c = i + j * js + k * ks;
                                const double ax =
                                    hg_apply(mg->op, x + c, bi + c, bj + c, bk + c, js, ks, bh2);
                                aii[c] += x[c] * ax;
                                sum[c] += fabs((1.0 - x[c]) * ax);
                            }
                }
            }
    double lmax = -1e9;
    for (int b = 0; b < L->nb; b++) {
        double *aii = hg_box(L, HG_VEC_DINV, b), *sum = hg_box(L, HG_VEC_L1INV, b);
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < n; i++) {
                    const int c = i + j * js + k * ks;
                    const double d = aii[c], s = sum[c];
                    const double g = (d + s) / d;
                    if (g > lmax)
                        lmax = g;
                    sum[c] = (d >= 1.5 * s) ? 1.0 / d : 1.0 / (d + 0.5 * s);
                    aii[c] = 1.0 / d;
                }
    }
    double t1 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, &lmax, 1, MPI_DOUBLE, MPI_MAX, L->comm);
    hg_collective_done(mg, L);
    L->t.collectives += MPI_Wtime() - t1;
    L->dominant_eigenvalue = lmax;
    if (mg->my_rank == 0) {
        fprintf(stdout, "done (%0.6f seconds)\n  estimating  lambda_max... <%1.15e\n",
                MPI_Wtime() - t0, lmax);
        fflush(stdout);
    }
}

void hg_rebuild_operator(hg_mg_t *mg, hg_level_t *L, hg_level_t *from)
{
    if (mg->my_rank == 0) {
        fprintf(stdout, "  rebuilding operator for level...  h=%e\n", L->h);
        fflush(stdout);
    }
    if (from) {
        hg_restriction(mg, L, HG_VEC_ALPHA, from, HG_VEC_ALPHA, HG_T_RESTRICT_CELL);
        hg_restriction(mg, L, HG_VEC_BETA_I, from, HG_VEC_BETA_I, HG_T_RESTRICT_FACE_I);
        hg_restriction(mg, L, HG_VEC_BETA_J, from, HG_VEC_BETA_J, HG_T_RESTRICT_FACE_J);
        hg_restriction(mg, L, HG_VEC_BETA_K, from, HG_VEC_BETA_K, HG_T_RESTRICT_FACE_K);
    }
    if (L->comm == MPI_COMM_NULL)
        return;
    if (mg->op == HG_OP_FV4)
        extrapolate_betas(L);
    hg_exchange(mg, L, HG_VEC_ALPHA, HG_SHAPE_BOX);
    hg_exchange(mg, L, HG_VEC_BETA_I, HG_SHAPE_BOX);
    hg_exchange(mg, L, HG_VEC_BETA_J, HG_SHAPE_BOX);
    hg_exchange(mg, L, HG_VEC_BETA_K, HG_SHAPE_BOX);
    probe_diagonal(mg, L);
    hg_exchange(mg, L, HG_VEC_DINV, HG_SHAPE_BOX);
    hg_exchange(mg, L, HG_VEC_L1INV, HG_SHAPE_BOX);
}

void hg_restriction(hg_mg_t *mg, hg_level_t *coarse, int vc, hg_level_t *fine, int vf, int kind)
{
    (void)coarse;
    hg_prog_run(mg, &fine->restriction[kind - HG_T_RESTRICT_CELL], vf, vc, kind, kind, HG_T_COPY,
                0.0, &fine->t.restriction);
}

/* HPGMG: 7-point V-cycle p0 / F-cycle p1; fv4 V-cycle v2 / F-cycle v4 */
int hg_interp_vcycle(const hg_mg_t *mg)
{
    return mg->op == HG_OP_FV4 ? HG_T_INTERP_V2 : HG_T_INTERP_P0;
}
int hg_interp_fcycle(const hg_mg_t *mg)
{
    return mg->op == HG_OP_FV4 ? HG_T_INTERP_V4 : HG_T_INTERP_P1;
}

void hg_interpolation(hg_mg_t *mg, hg_level_t *fine, int vf, double prescale, hg_level_t *coarse,
                      int vc, int kind)
{
    if (kind != HG_T_INTERP_P0) {
        /* the coarse grid's ghost zones (corners included) and boundary values */
        int order = 1;
        if (kind == HG_T_INTERP_V2)
            order = coarse->box_dim >= 2 ? 2 : 1;
        if (kind == HG_T_INTERP_V4)
            order = coarse->box_dim >= 4 ? 4 : coarse->box_dim >= 2 ? 2 : 1;
        hg_exchange_bc(mg, coarse, vc, HG_SHAPE_BOX, order);
    }
    hg_prog_run(mg, &fine->interpolation, vc, vf, kind, kind, HG_T_INCREMENT, prescale,
                &fine->t.interpolation);
}
