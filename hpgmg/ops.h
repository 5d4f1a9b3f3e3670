/*
 * hpgmg/ops.h - the operations ("kernels") the solver launches on an execution
 * context, with their argument blocks.
 *
 * An operation is described by a kind (HG_K_*) and a plain-data argument
 * block.  The same block is executed by the CPU implementation
 * (hg_cpu_run, cpu_kernels.c) — directly or from a host stream — or by the
 * CUDA implementation (hg_cuda_run, cuda_kernels.cu) on a cudaStream_t.
 * Argument blocks are copied when enqueued, so callers may reuse them.
 */
#ifndef HPGMG_OPS_H
#define HPGMG_OPS_H

#include "defs.h"

/* Geometry of the box storage of one level (my boxes only). */
typedef struct {
    int nb;          /* number of my boxes                                  */
    int n;           /* box dimension (cells per side)                      */
    int g;           /* ghost zones                                         */
    int js, ks, vol; /* j and k strides, cells per box including ghosts     */
    int dim;         /* global cells per side of the level                  */
    const int *low;  /* 3*nb global low corner (i,j,k) of each box          */
} hg_geom_t;

/* A tile of a communication program or of a restriction/interpolation.
 * d*: block size (see the kinds below for its unit);  s*: source, d*: dest.
 * sbox/dbox >= 0: local box index, (si,sj,sk)/(ti,tj,tk) cell offsets inside
 * it; < 0: the data is in a buffer at element offset soff/doff, laid out
 * densely with the block's dimensions on that side. */
typedef struct {
    int bi, bj, bk;
    int sbox, soff, si, sj, sk;
    int dbox, doff, ti, tj, tk;
    int peer; /* ki backend: the tile's peer (index into its message list) */
} hg_tile_t;

/* Operation kinds */
enum {
    HG_K_ZERO = 0, /* whole storage (ghosts included) = 0            */
    HG_K_AXPBY,    /* c = alpha*a + beta*b (b may be NULL), interior */
    HG_K_MUL,      /* c = scale*a*b, interior                         */
    HG_K_DOT,      /* partial[box] = sum a*b, interior                */
    HG_K_NORM,     /* partial[box] = max |a|, interior                */
    HG_K_STENCIL,  /* apply / residual / smoother sweep               */
    HG_K_BC,       /* Dirichlet boundary conditions in ghost zones    */
    HG_K_TILES,    /* tile list (pack, local, unpack, restrict, interp)*/
    HG_K_COMBINE,  /* per-box partials -> the collective's buffer     */
    HG_K_NUM
};

/* Stencil variants */
enum { HG_S_APPLY = 0, HG_S_RESIDUAL, HG_S_GSRB, HG_S_CHEBY };

typedef struct {
    hg_geom_t g;
    double *x;
} hg_args_zero_t;
typedef struct {
    hg_geom_t g;
    double *c;
    const double *a, *b;
    double alpha, beta;
} hg_args_axpby_t;
typedef struct {
    hg_geom_t g;
    double *c;
    const double *a, *b;
    double scale;
} hg_args_mul_t;
typedef struct {
    hg_geom_t g;
    const double *a, *b;
    double *partial;
} hg_args_red_t;
/* the per-box partials of a reduction into the buffer its collective
 * reduces in place: dot, out[0..num_boxes) = 0 but out[ids[b]] =
 * partial[b] (each box its own slot: the sum is the same bits for any
 * decomposition); max norm, out[0] = max over partial[b] (0 when none) */
typedef struct {
    int nb, num_boxes, dot;
    const double *partial;
    const int *ids;
    double *out;
} hg_args_combine_t;

typedef struct {
    hg_geom_t g;
    int op;             /* HG_OP_7PT / HG_OP_FV4                                       */
    int variant;        /* HG_S_*                                                       */
    int sweep;          /* GSRB: sweep number s; the colour updated has (i+j+k+s) even  */
    int copy_other;     /* GSRB out of place: copy the cells of the other colour        */
    double h2inv, b;    /* -b*div(beta grad) / h^2                                      */
    double c1, c2;      /* Chebyshev coefficients                                       */
    const double *x;    /* x_n (read)                                                   */
    const double *xnm1; /* Chebyshev x_{n-1}                                            */
    double *out;        /* Ax, residual, or x_{n+1}                                     */
    const double *rhs;
    const double *beta_i, *beta_j, *beta_k, *dinv;
} hg_args_stencil_t;

typedef struct {
    hg_geom_t g;
    double *x;
    const int *bc; /* pairs (local box, direction index) of ghost regions outside the domain */
    int nbc;
    int order; /* 1 linear, 2 quadratic, 4 quartic (volume averages) */
    int n_own; /* the first n_own regions read no ghost cell an exchange fills */
} hg_args_bc_t;

typedef struct {
    int kind; /* HG_T_*                                      */
    const hg_tile_t *t;
    int nt;
    const double *src;  /* source vector base (box storage) ...        */
    const double *sbuf; /* ... or buffer base for tiles with sbox < 0  */
    int s_js, s_ks, s_vol, s_g;
    double *dst, *dbuf;
    int d_js, d_ks, d_vol, d_g;
    double prescale; /* INCREMENT / INTERP: dst = prescale*dst + ... */
    int max_blk;     /* largest bi*bj*bk of the list (GPU grid size) */
} hg_args_tiles_t;

typedef union {
    hg_args_zero_t zero;
    hg_args_axpby_t axpby;
    hg_args_mul_t mul;
    hg_args_red_t red;
    hg_args_combine_t combine;
    hg_args_stencil_t st;
    hg_args_bc_t bc;
    hg_args_tiles_t tiles;
} hg_args_t;

/* CPU implementation of every operation (cpu_kernels.c) */
void hg_cpu_run(int kind, const void *args);

#endif /* HPGMG_OPS_H */
