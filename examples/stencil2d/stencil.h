/*
 * stencil.h - the 2D Jacobi stencil's data layout, operations and the
 * arithmetic shared by the host functions (stencil_host.c) and the CUDA
 * kernels (stencil_cuda.cu). C and CUDA C++.
 *
 * Layout: a rank owns nx x ny points; its array has a halo of width 1, so
 * (nx + 2) x (ny + 2) doubles, row-major, element (i, j) at [j * ld + i],
 * ld = nx + 2; owned points are 1 <= i <= nx, 1 <= j <= ny. x (i) is the
 * first Cartesian dimension, y (j) the second.
 *
 * Update: unew(i,j) = 0.25 * ((u(i-1,j) + u(i+1,j)) + (u(i,j-1) + u(i,j+1))),
 * the same expression, in the same order, everywhere: no multiply-add to
 * contract, so every backend and every decomposition gives identical bits.
 *
 * Initial state: owned points and the fixed boundary ring of the global grid
 * take a deterministic pseudo-random value of their global coordinates;
 * halo cells that a neighbour must fill are set to a poison value, so a
 * missing halo exchange cannot go unnoticed.
 */
#ifndef STENCIL_H
#define STENCIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ST_HD __host__ __device__
#else
#define ST_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { ST_W = 0, ST_E = 1, ST_S = 2, ST_N = 3, ST_NSIDES = 4 };

#define ST_POISON 1.0e30

typedef struct {
    int nx, ny;    /* owned points */
    long ld;       /* row stride, nx + 2 */
    long gx0, gy0; /* global coordinates of owned point (1, 1) */
    long gnx, gny; /* global grid (owned points of all ranks) */
} st_dims_t;

typedef enum {
    ST_OP_INIT = 0, /* dst: whole array incl. halo */
    ST_OP_PACK,     /* src -> buf[side] for sides with buf != NULL */
    ST_OP_UNPACK,   /* buf[side] -> halo of dst */
    ST_OP_INTERIOR, /* dst(i,j) for 2 <= i <= nx-1, 2 <= j <= ny-1, from src */
    ST_OP_BOUNDARY, /* dst on the band of width 1 along the edges of the owned area */
    ST_OP_FULL,     /* dst on all owned points (the serial reference) */
    ST_OP_RESID,    /* buf[0][0] = max over owned points of |dst - src| (a residual) */
} st_op_kind_t;

/* One operation with its arguments; kept in persistent storage until the
 * stream has executed it. */
typedef struct {
    st_op_kind_t kind;
    st_dims_t d;
    const double *src;
    double *dst;
    double *buf[ST_NSIDES];
} st_op_t;

/* Number of doubles exchanged through a side. */
static inline int st_side_count(const st_dims_t *d, int side)
{
    return side == ST_W || side == ST_E ? d->ny : d->nx;
}

ST_HD static inline uint64_t st_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Initial value of local cell (i, j) (0 <= i <= nx+1, 0 <= j <= ny+1). */
ST_HD static inline double st_init_value(long gx0, long gy0, long gnx, long gny, int nx, int ny,
                                         int i, int j)
{
    long gi = gx0 + i - 1, gj = gy0 + j - 1;
    int owned = i >= 1 && i <= nx && j >= 1 && j <= ny;
    int global_edge = gi < 0 || gi >= gnx || gj < 0 || gj >= gny;
    if (!owned && !global_edge)
        return ST_POISON;
    uint64_t key = ((uint64_t)(gj + 1) << 32) ^ (uint64_t)(gi + 1);
    return (double)(st_mix64(key) >> 11) * 0x1.0p-53;
}

ST_HD static inline double st_update(double w, double e, double s, double n)
{
    return 0.25 * ((w + e) + (s + n));
}

/* The `ki` variant (stencil_cuda.cu): every step of a run in ONE
 * cooperative kernel. Per step: blocks 0..3 pack side s's boundary into
 * partition k of sbuf[s] and mark it ready (mpix_acc_pready, a partitioned
 * send request per neighbour, partition k = step k), every block updates
 * the interior, blocks 4..7 wait for partition k of rbuf[s]
 * (mpix_acc_parrived_wait) and unpack it into the halo; a grid-wide
 * barrier; the boundary band; a grid-wide barrier. sbuf/rbuf hold `steps`
 * partitions of st_side_count doubles (NULL: no neighbour); ds/dr are the
 * requests' device handles (mpix_acc_dreq_t *). *err (device memory)
 * counts failed device calls. word (device memory, NULL: none): step k of
 * the run uses partition *word + k instead of k, and the run's last act
 * sets *word to (*word + steps) % parts -- a run captured into a CUDA
 * graph takes the next steps of an epoch of `parts` partitions at each
 * launch (the `graph` variant). Returns 0, or -1 with the reason. */
typedef struct {
    st_dims_t d;
    double *g[2];
    double *sbuf[ST_NSIDES], *rbuf[ST_NSIDES];
    void *ds[ST_NSIDES], *dr[ST_NSIDES];
    int steps;
    int *err;
    unsigned long long *word;
    int parts;
} st_ki_t;
int st_ki_launch(const st_ki_t *k, void *cudastream, char *why, size_t len);

/* Host implementation of one operation (stencil_host.c). */
void st_host_run(const st_op_t *op);
/* Host-stream entry point: st_host_run((st_op_t *)arg). */
void st_host_fn(void *arg);
/* CUDA entry point (stencil_cuda.cu): enqueue op's kernel on the stream. */
void st_cuda_fn(void *arg, void *cudastream);

#ifdef __cplusplus
}
#endif

#endif
