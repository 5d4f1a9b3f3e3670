/*
 * stencil_host.c - the stencil operations as host functions (run on a host
 * stream's thread, or directly for the serial reference).
 */
#include "stencil.h"

static void st_init(const st_op_t *op)
{
    const st_dims_t *d = &op->d;
    for (int j = 0; j <= d->ny + 1; j++)
        for (int i = 0; i <= d->nx + 1; i++)
            op->dst[j * d->ld + i] =
                st_init_value(d->gx0, d->gy0, d->gnx, d->gny, d->nx, d->ny, i, j);
}

static void st_pack(const st_op_t *op)
{
    const st_dims_t *d = &op->d;
    const double *u = op->src;
    if (op->buf[ST_W])
        for (int j = 1; j <= d->ny; j++)
            op->buf[ST_W][j - 1] = u[j * d->ld + 1];
    if (op->buf[ST_E])
        for (int j = 1; j <= d->ny; j++)
            op->buf[ST_E][j - 1] = u[j * d->ld + d->nx];
    if (op->buf[ST_S])
        for (int i = 1; i <= d->nx; i++)
            op->buf[ST_S][i - 1] = u[1 * d->ld + i];
    if (op->buf[ST_N])
        for (int i = 1; i <= d->nx; i++)
            op->buf[ST_N][i - 1] = u[d->ny * d->ld + i];
}

static void st_unpack(const st_op_t *op)
{
    const st_dims_t *d = &op->d;
    double *u = op->dst;
    if (op->buf[ST_W])
        for (int j = 1; j <= d->ny; j++)
            u[j * d->ld + 0] = op->buf[ST_W][j - 1];
    if (op->buf[ST_E])
        for (int j = 1; j <= d->ny; j++)
            u[j * d->ld + d->nx + 1] = op->buf[ST_E][j - 1];
    if (op->buf[ST_S])
        for (int i = 1; i <= d->nx; i++)
            u[0 * d->ld + i] = op->buf[ST_S][i - 1];
    if (op->buf[ST_N])
        for (int i = 1; i <= d->nx; i++)
            u[(d->ny + 1) * d->ld + i] = op->buf[ST_N][i - 1];
}

static inline void st_point(const double *u, double *v, long ld, int i, int j)
{
    long c = j * ld + i;
    v[c] = st_update(u[c - 1], u[c + 1], u[c - ld], u[c + ld]);
}

static void st_rect(const st_op_t *op, int i0, int i1, int j0, int j1)
{
    const double *u = op->src;
    double *v = op->dst;
    long ld = op->d.ld;
    for (int j = j0; j <= j1; j++)
        for (int i = i0; i <= i1; i++)
            st_point(u, v, ld, i, j);
}

static void st_boundary(const st_op_t *op)
{
    const st_dims_t *d = &op->d;
    st_rect(op, 1, d->nx, 1, 1); /* row j = 1 */
    if (d->ny > 1)
        st_rect(op, 1, d->nx, d->ny, d->ny); /* row j = ny */
    st_rect(op, 1, 1, 2, d->ny - 1);         /* column i = 1 */
    if (d->nx > 1)
        st_rect(op, d->nx, d->nx, 2, d->ny - 1); /* column i = nx */
}

void st_host_run(const st_op_t *op)
{
    switch (op->kind) {
    case ST_OP_INIT:
        st_init(op);
        break;
    case ST_OP_PACK:
        st_pack(op);
        break;
    case ST_OP_UNPACK:
        st_unpack(op);
        break;
    case ST_OP_INTERIOR:
        st_rect(op, 2, op->d.nx - 1, 2, op->d.ny - 1);
        break;
    case ST_OP_BOUNDARY:
        st_boundary(op);
        break;
    case ST_OP_FULL:
        st_rect(op, 1, op->d.nx, 1, op->d.ny);
        break;
    case ST_OP_RESID: {
        double m = 0;
        for (int j = 1; j <= op->d.ny; j++)
            for (int i = 1; i <= op->d.nx; i++) {
                double a = op->dst[j * op->d.ld + i] - op->src[j * op->d.ld + i];
                a = a < 0 ? -a : a;
                m = a > m ? a : m;
            }
        op->buf[0][0] = m;
        break;
    }
    }
}

void st_host_fn(void *arg) { st_host_run((const st_op_t *)arg); }
