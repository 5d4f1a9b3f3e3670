/*
 * hpgmg/defs.h - common definitions of the HPGMG-FV proxy (C11 and CUDA).
 *
 * Everything in this header is plain data (no MPI, no CUDA types) so that
 * it can be included from the C sources and from the CUDA kernels.
 */
#ifndef HPGMG_DEFS_H
#define HPGMG_DEFS_H

/* CUDA support: compiled in when the build defines HAVE_CUDA (or the
 * library's MPIXACC_HAVE_CUDA); the acc/streamcomm backends need the mpix-acc
 * library unless HPGMG_NO_MPIX is defined (mpi-only build). */
#if defined(HAVE_CUDA) || defined(MPIXACC_HAVE_CUDA)
#define HG_HAVE_CUDA 1
#endif

#ifdef __CUDACC__
#define HOSTDEV __host__ __device__ __forceinline__
#else
#define HOSTDEV static inline
#endif

/* ---- vector ids (every level stores these, the coarsest level adds the
 *      BiCGStab work vectors after HG_VEC_RESERVED) ---------------------- */
enum {
    HG_VEC_U = 0,  /* solution / correction                              */
    HG_VEC_F,      /* right-hand side                                    */
    HG_VEC_R,      /* right-hand side of the cycle (f - Av restricted)   */
    HG_VEC_TEMP,   /* residual, out-of-place smoother ping-pong          */
    HG_VEC_ALPHA,  /* cell coefficient (Helmholtz alpha, 1 here)          */
    HG_VEC_BETA_I, /* face coefficients, low face of the cell            */
    HG_VEC_BETA_J,
    HG_VEC_BETA_K,
    HG_VEC_DINV,  /* inverse of the diagonal (boundary conditions incl.)*/
    HG_VEC_L1INV, /* l1 inverse (kept for parity with HPGMG)             */
    HG_VEC_UTRUE, /* manufactured exact solution (7-point problem)      */
    HG_VEC_RESERVED
};
#define HG_BICGSTAB_VECTORS 8

/* ---- operators, smoothers, cycles, backends --------------------------- */
typedef enum { HG_OP_7PT = 0, HG_OP_FV4 = 1 } hg_operator_t;
typedef enum { HG_SMOOTH_GSRB = 0, HG_SMOOTH_CHEBY = 1 } hg_smoother_t;
typedef enum { HG_CYCLE_F = 0, HG_CYCLE_V = 1 } hg_cycle_t;
typedef enum {
    HG_BACKEND_MPI = 0,
    HG_BACKEND_ACC = 1,
    HG_BACKEND_STREAMCOMM = 2,
    HG_BACKEND_KI = 3 /* kernel-initiated (partitioned requests) on GPU levels, acc elsewhere */
} hg_backend_t;
#define HG_BACKEND_NAMES                                                                           \
    {                                                                                              \
        "mpi", "acc", "streamcomm", "ki"                                                           \
    }

/* ---- memory kinds: host, CUDA device, pinned host memory mapped into the
 *      device address space (no managed memory is used) */
typedef enum { HG_MEM_HOST = 0, HG_MEM_DEVICE, HG_MEM_PINNED } hg_mem_t;

/* ---- stencil shapes of a ghost-zone exchange --------------------------- */
typedef enum {
    HG_SHAPE_STAR = 0,       /* faces only                    */
    HG_SHAPE_NO_CORNERS = 1, /* faces and edges               */
    HG_SHAPE_BOX = 2,        /* faces, edges and corners      */
    HG_NUM_SHAPES = 3
} hg_shape_t;

/* direction index 0..26 of (di,dj,dk) in {-1,0,1}^3; 13 is the box itself */
HOSTDEV int hg_dir_index(int di, int dj, int dk) { return (di + 1) + 3 * (dj + 1) + 9 * (dk + 1); }
HOSTDEV int hg_dir_di(int d) { return d % 3 - 1; }
HOSTDEV int hg_dir_dj(int d) { return (d / 3) % 3 - 1; }
HOSTDEV int hg_dir_dk(int d) { return d / 9 - 1; }
HOSTDEV int hg_shape_has(int shape, int di, int dj, int dk)
{
    int nz = (di != 0) + (dj != 0) + (dk != 0);
    if (nz == 0)
        return 0;
    if (shape == HG_SHAPE_STAR)
        return nz == 1;
    if (shape == HG_SHAPE_NO_CORNERS)
        return nz <= 2;
    return 1;
}

/* Tile kinds.  Block size (bi,bj,bk) is counted in:
 *   COPY, INCREMENT          : cells on both sides
 *   RESTRICT_CELL/FACE_*     : coarse (destination) cells/faces
 *   INTERP_*                 : coarse (source) cells; the fine block is twice that */
enum {
    HG_T_COPY = 0,        /* dst = src                                         */
    HG_T_INCREMENT,       /* dst = prescale*dst + src                          */
    HG_T_RESTRICT_CELL,   /* dst = average of the 8 fine cells                 */
    HG_T_RESTRICT_FACE_I, /* dst = average of the 4 fine faces (normal i)      */
    HG_T_RESTRICT_FACE_J,
    HG_T_RESTRICT_FACE_K,
    HG_T_INTERP_P0, /* piecewise constant                                */
    HG_T_INTERP_P1, /* piecewise (tri)linear, 7-point F-cycle            */
    HG_T_INTERP_V2, /* 2nd-order volume-average, fv4 V-cycle             */
    HG_T_INTERP_V4, /* 4th-order volume-average, fv4 F-cycle             */
    HG_T_NUM
};

#endif /* HPGMG_DEFS_H */
