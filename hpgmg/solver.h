/*
 * hpgmg/solver.h - level operations (BLAS1, reductions, ghost exchange,
 * boundary conditions, operator), operators/problems, smoothers, inter-level
 * transfers, the bottom solver and the multigrid driver.
 */
#ifndef HPGMG_SOLVER_H
#define HPGMG_SOLVER_H

#include "comm.h"
#include "level.h"

/* blas.c: every operation runs on the level's execution context */
void hg_zero(hg_mg_t *mg, hg_level_t *L, int v);
void hg_axpby(hg_mg_t *mg, hg_level_t *L, int c, double alpha, int a, double beta,
              int b); /* b<0: none */
void hg_mul(hg_mg_t *mg, hg_level_t *L, int c, double scale, int a, int b);
double hg_dot(hg_mg_t *mg, hg_level_t *L, int a, int b); /* independent of the decomposition */
double hg_norm(hg_mg_t *mg, hg_level_t *L, int a);       /* max norm */
/* A reduction in two halves. On a stream level of the streamcomm backend
 * _begin enqueues the per-box partials, their combination and the
 * MPI_Allreduce on the level's stream communicator and returns at once;
 * hg_red_end waits for the stream (one host wait, none if it was drained
 * since) and returns the value. Elsewhere _begin does all of it. At most
 * HG_RED_NORM_SLOTS norms and one dot per level in flight. */
typedef struct {
    hg_level_t *L;
    int dot, pending;
    const double *buf; /* the collective's result */
    long sync_mark;    /* the stream's syncs when begun */
    double value;
} hg_red_t;
void hg_dot_begin(hg_mg_t *mg, hg_level_t *L, int a, int b, hg_red_t *r);
void hg_norm_begin(hg_mg_t *mg, hg_level_t *L, int a, hg_red_t *r);
double hg_red_end(hg_mg_t *mg, hg_red_t *r);
/* after an MPI collective on L->comm, before the host reads its result */
void hg_collective_done(hg_mg_t *mg, hg_level_t *L);
void hg_exchange(hg_mg_t *mg, hg_level_t *L, int v, int shape);
void hg_apply_bc(hg_mg_t *mg, hg_level_t *L, int v, int shape, int order);
/* the exchange, then the boundary conditions (on ki levels one kernel
 * fewer: the run's kernel applies them; their time counts as exchange) */
void hg_exchange_bc(hg_mg_t *mg, hg_level_t *L, int v, int shape, int order);
int hg_op_shape(const hg_mg_t *mg);
int hg_op_bc_order(const hg_mg_t *mg, const hg_level_t *L);
void hg_stencil(hg_mg_t *mg, hg_level_t *L, int variant, int x, int xnm1, int out, int rhs,
                int sweep, int copy_other, double c1, double c2);
/* hg_exchange_bc of x (the operator's shape and order), then hg_stencil;
 * on ki levels one kernel whose stencil blocks wait for the ghosts (its
 * time counts as exchange), else the stencil's time goes to *t_row */
void hg_exchange_stencil(hg_mg_t *mg, hg_level_t *L, double *t_row, int variant, int x, int xnm1,
                         int out, int rhs, int sweep, int copy_other, double c1, double c2);
void hg_apply_op(hg_mg_t *mg, hg_level_t *L, int ax, int x);
void hg_residual(hg_mg_t *mg, hg_level_t *L, int r, int x, int rhs);

/* operators.c */
void hg_init_problem(hg_mg_t *mg, hg_level_t *L);
void hg_exact_solution(hg_mg_t *mg, hg_level_t *L);
void hg_rebuild_operator(hg_mg_t *mg, hg_level_t *L, hg_level_t *from);
void hg_restriction(hg_mg_t *mg, hg_level_t *coarse, int vc, hg_level_t *fine, int vf, int kind);
void hg_interpolation(hg_mg_t *mg, hg_level_t *fine, int vf, double prescale, hg_level_t *coarse,
                      int vc, int kind);
int hg_interp_vcycle(const hg_mg_t *mg);
int hg_interp_fcycle(const hg_mg_t *mg);

/* smoothers.c */
void hg_smooth(hg_mg_t *mg, hg_level_t *L, int x, int rhs);

/* bicgstab.c */
void hg_bicgstab(hg_mg_t *mg, hg_level_t *L, int x, int rhs, double reduction);

/* mg.c */
void hg_mg_build(hg_mg_t *mg, int boxes_in, int box_dim);
void hg_mg_prepare_execution(hg_mg_t *mg);
void hg_mg_destroy(hg_mg_t *mg);
double hg_fmg_solve(hg_mg_t *mg, int on, int u, int f, double rtol, double *rel);
double hg_mg_solve(hg_mg_t *mg, int on, int u, int f, double rtol, double *rel);
void hg_reset_timers(hg_mg_t *mg);
void hg_print_timing(hg_mg_t *mg, int from);
double hg_now(void);

#endif /* HPGMG_SOLVER_H */
