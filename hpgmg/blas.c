/*
 * hpgmg/blas.c - level-wide operations: BLAS1, reductions (stream-ordered on
 * the streamcomm backend's stream levels, else on the host after a wait for
 * the level's context), ghost-zone exchange, boundary conditions, operator
 * application and residual.
 */
#include <math.h>
#include <string.h>

#include "solver.h"

double hg_now(void) { return MPI_Wtime(); }

void hg_zero(hg_mg_t *mg, hg_level_t *L, int v)
{
    (void)mg;
    if (!L->nb)
        return;
    double t = hg_now();
    hg_args_zero_t a = {L->geom, L->vec[v]};
    hg_exec_launch(L->exec, HG_K_ZERO, &a, sizeof(a));
    L->t.blas1 += hg_now() - t;
}

void hg_axpby(hg_mg_t *mg, hg_level_t *L, int c, double alpha, int a, double beta, int b)
{
    (void)mg;
    if (!L->nb)
        return;
    double t = hg_now();
    hg_args_axpby_t x = {L->geom, L->vec[c], L->vec[a], b >= 0 ? L->vec[b] : NULL, alpha, beta};
    hg_exec_launch(L->exec, HG_K_AXPBY, &x, sizeof(x));
    L->t.blas1 += hg_now() - t;
}

void hg_mul(hg_mg_t *mg, hg_level_t *L, int c, double scale, int a, int b)
{
    (void)mg;
    if (!L->nb)
        return;
    double t = hg_now();
    hg_args_mul_t x = {L->geom, L->vec[c], L->vec[a], L->vec[b], scale};
    hg_exec_launch(L->exec, HG_K_MUL, &x, sizeof(x));
    L->t.blas1 += hg_now() - t;
}

/* After an MPI collective on L->comm, before the host reads its result.
 * With the streamcomm backend L->comm is a stream communicator, and
 * mpix-acc orders collectives on the stream (host and CUDA streams): the
 * result exists once the stream has passed the call (api.md §5), so the
 * host waits for the stream (counted as a host wait). */
void hg_collective_done(hg_mg_t *mg, hg_level_t *L)
{
    if (mg->backend == HG_BACKEND_STREAMCOMM)
        hg_exec_sync(L->exec);
}

/* Reductions. The per-box partials are combined so that the result is the
 * same bits for any number of ranks and any reduction tree: a dot gives
 * each box its own slot of gpartial (one contributor per slot, so the MPI
 * sum is exact) and adds the slots in box-id order; a max norm is exact.
 *
 * Stream-ordered (the streamcomm backend on a level that runs on a stream,
 * whose communicator is a stream communicator): partials, their
 * combination (HG_K_COMBINE) and the MPI_Allreduce are all enqueued, and
 * the host waits once, when it needs the value (hg_red_end). Otherwise the
 * host waits for the partials, combines them and calls MPI_Allreduce, as
 * HPGMG does. */
static int red_on_stream(const hg_mg_t *mg, const hg_level_t *L)
{
    return mg->backend == HG_BACKEND_STREAMCOMM && L->exec->kind != HG_EXEC_HOST;
}

static void red_begin(hg_mg_t *mg, hg_level_t *L, int kind, int a, int b, hg_red_t *r)
{
    const int dot = kind == HG_K_DOT;
    *r = (hg_red_t){.L = L, .dot = dot};
    if (L->comm == MPI_COMM_NULL)
        return; /* value 0 */
    double t = hg_now();
    if (L->nb) {
        hg_args_red_t x = {L->geom, L->vec[a], b >= 0 ? L->vec[b] : NULL, L->partial};
        hg_exec_launch(L->exec, kind, &x, sizeof(x));
    }
    if (red_on_stream(mg, L)) {
        double *out = dot ? L->gpartial : &L->red_norm[L->red_norm_next++ % HG_RED_NORM_SLOTS];
        hg_args_combine_t c = {L->nb, L->num_boxes, dot, L->partial, L->red_ids, out};
        hg_exec_launch(L->exec, HG_K_COMBINE, &c, sizeof(c));
        double t1 = hg_now();
        L->t.blas1 += t1 - t;
        MPI_Allreduce(MPI_IN_PLACE, out, dot ? L->num_boxes : 1, MPI_DOUBLE,
                      dot ? MPI_SUM : MPI_MAX, L->comm);
        r->buf = out;
        r->pending = 1;
        mg->reductions_on_streams++;
        r->sync_mark = L->exec->syncs;
        L->t.collectives += hg_now() - t1;
        return;
    }
    hg_exec_sync(L->exec);
    double t1 = hg_now();
    L->t.blas1 += t1 - t;
    if (dot) {
        memset(L->gpartial, 0, sizeof(double) * L->num_boxes);
        for (int i = 0; i < L->nb; i++)
            L->gpartial[L->my_id[i]] = L->partial[i];
        MPI_Allreduce(MPI_IN_PLACE, L->gpartial, L->num_boxes, MPI_DOUBLE, MPI_SUM, L->comm);
        hg_collective_done(mg, L);
        double s = 0.0;
        for (int i = 0; i < L->num_boxes; i++)
            s += L->gpartial[i];
        r->value = s;
    } else {
        double m = 0.0;
        for (int i = 0; i < L->nb; i++)
            if (L->partial[i] > m)
                m = L->partial[i];
        MPI_Allreduce(&m, &r->value, 1, MPI_DOUBLE, MPI_MAX, L->comm);
        hg_collective_done(mg, L);
    }
    L->t.collectives += hg_now() - t1;
}

void hg_dot_begin(hg_mg_t *mg, hg_level_t *L, int a, int b, hg_red_t *r)
{
    red_begin(mg, L, HG_K_DOT, a, b, r);
}

void hg_norm_begin(hg_mg_t *mg, hg_level_t *L, int a, hg_red_t *r)
{
    red_begin(mg, L, HG_K_NORM, a, -1, r);
}

double hg_red_end(hg_mg_t *mg, hg_red_t *r)
{
    (void)mg;
    if (!r->pending)
        return r->value;
    hg_level_t *L = r->L;
    double t = hg_now();
    if (L->exec->syncs == r->sync_mark) /* not drained since it was enqueued */
        hg_exec_sync(L->exec);
    r->pending = 0;
    if (r->dot) {
        double s = 0.0;
        for (int i = 0; i < L->num_boxes; i++)
            s += r->buf[i];
        r->value = s;
    } else {
        r->value = r->buf[0];
    }
    L->t.collectives += hg_now() - t;
    return r->value;
}

double hg_dot(hg_mg_t *mg, hg_level_t *L, int a, int b)
{
    hg_red_t r;
    hg_dot_begin(mg, L, a, b, &r);
    return hg_red_end(mg, &r);
}

double hg_norm(hg_mg_t *mg, hg_level_t *L, int a)
{
    hg_red_t r;
    hg_norm_begin(mg, L, a, &r);
    return hg_red_end(mg, &r);
}

void hg_exchange(hg_mg_t *mg, hg_level_t *L, int v, int shape)
{
    hg_prog_run(mg, &L->exchange[shape], v, v, HG_T_COPY, HG_T_COPY, HG_T_COPY, 0.0, &L->t.ghost);
}

void hg_apply_bc(hg_mg_t *mg, hg_level_t *L, int v, int shape, int order)
{
    (void)mg;
    if (!L->nbc[shape])
        return;
    double t = hg_now();
    const int *list = L->exec->kind == HG_EXEC_CUDA ? L->bc_dev[shape] : L->bc[shape];
    hg_args_bc_t a = {L->geom, L->vec[v], list, L->nbc[shape], order, L->nbc_own[shape]};
    hg_exec_launch(L->exec, HG_K_BC, &a, sizeof(a));
    L->t.bc += hg_now() - t;
}

/* ki levels: the exchange of v, its boundary conditions and (st non-NULL)
 * the stencil sweep st as one kernel; 0 where the level does not run so */
static int exchange_ki(hg_mg_t *mg, hg_level_t *L, int v, int shape, int order,
                       const hg_args_stencil_t *st)
{
    if (L->exec->kind != HG_EXEC_CUDA)
        return 0;
    hg_args_bc_t a = {L->geom,       L->vec[v], L->bc_dev[shape],
                      L->nbc[shape], order,     L->nbc_own[shape]};
    return hg_prog_run_bc(mg, &L->exchange[shape], v, &a, st, &L->t.ghost);
}

void hg_exchange_bc(hg_mg_t *mg, hg_level_t *L, int v, int shape, int order)
{
    if (exchange_ki(mg, L, v, shape, order, NULL))
        return;
    hg_exchange(mg, L, v, shape);
    hg_apply_bc(mg, L, v, shape, order);
}

int hg_op_shape(const hg_mg_t *mg)
{
    return mg->op == HG_OP_FV4 ? HG_SHAPE_NO_CORNERS : HG_SHAPE_STAR;
}

/* fv4: quartic boundary extrapolation, dropping to quadratic / linear on
 * boxes too small for it (as HPGMG does); 7-point: linear */
int hg_op_bc_order(const hg_mg_t *mg, const hg_level_t *L)
{
    if (mg->op != HG_OP_FV4)
        return 1;
    return L->box_dim >= 4 ? 4 : L->box_dim >= 2 ? 2 : 1;
}

static void stencil_args(const hg_mg_t *mg, const hg_level_t *L, hg_args_stencil_t *a, int variant,
                         int x, int xnm1, int out, int rhs, int sweep, int copy_other, double c1,
                         double c2)
{
    memset(a, 0, sizeof(*a));
    a->g = L->geom;
    a->op = mg->op;
    a->variant = variant;
    a->sweep = sweep;
    a->copy_other = copy_other;
    a->h2inv = 1.0 / (L->h * L->h);
    a->b = 1.0;
    a->c1 = c1;
    a->c2 = c2;
    a->x = L->vec[x];
    a->xnm1 = xnm1 >= 0 ? L->vec[xnm1] : NULL;
    a->out = L->vec[out];
    a->rhs = rhs >= 0 ? L->vec[rhs] : NULL;
    a->beta_i = L->vec[HG_VEC_BETA_I];
    a->beta_j = L->vec[HG_VEC_BETA_J];
    a->beta_k = L->vec[HG_VEC_BETA_K];
    a->dinv = L->vec[HG_VEC_DINV];
}

void hg_stencil(hg_mg_t *mg, hg_level_t *L, int variant, int x, int xnm1, int out, int rhs,
                int sweep, int copy_other, double c1, double c2)
{
    if (!L->nb)
        return;
    hg_args_stencil_t a;
    stencil_args(mg, L, &a, variant, x, xnm1, out, rhs, sweep, copy_other, c1, c2);
    hg_exec_launch(L->exec, HG_K_STENCIL, &a, sizeof(a));
}

void hg_exchange_stencil(hg_mg_t *mg, hg_level_t *L, double *t_row, int variant, int x, int xnm1,
                         int out, int rhs, int sweep, int copy_other, double c1, double c2)
{
    const int shape = hg_op_shape(mg), order = hg_op_bc_order(mg, L);
    hg_args_stencil_t a;
    stencil_args(mg, L, &a, variant, x, xnm1, out, rhs, sweep, copy_other, c1, c2);
    if (exchange_ki(mg, L, x, shape, order, L->nb ? &a : NULL))
        return;
    hg_exchange(mg, L, x, shape);
    hg_apply_bc(mg, L, x, shape, order);
    if (!L->nb)
        return;
    double t = hg_now();
    hg_exec_launch(L->exec, HG_K_STENCIL, &a, sizeof(a)); /* hg_stencil's launch, args made */
    *t_row += hg_now() - t;
}

void hg_apply_op(hg_mg_t *mg, hg_level_t *L, int ax, int x)
{
    hg_exchange_stencil(mg, L, &L->t.apply_op, HG_S_APPLY, x, -1, ax, -1, 0, 0, 0.0, 0.0);
}

void hg_residual(hg_mg_t *mg, hg_level_t *L, int r, int x, int rhs)
{
    hg_exchange_stencil(mg, L, &L->t.residual, HG_S_RESIDUAL, x, -1, r, rhs, 0, 0, 0.0, 0.0);
}
