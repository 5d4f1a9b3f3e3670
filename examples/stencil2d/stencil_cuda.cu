/*
 * stencil_cuda.cu - the stencil operations as CUDA kernels. Same arithmetic
 * as stencil_host.c (st_update from stencil.h), so results are bitwise equal.
 */
#include "stencil.h"
#include "../common/ex_accel.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <mpix_acc_device.cuh>

#include <stdio.h>

#define ST_BX 32
#define ST_BY 8

__global__ void st_k_init(st_op_t op)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    const st_dims_t d = op.d;
    if (i <= d.nx + 1 && j <= d.ny + 1)
        op.dst[(long)j * d.ld + i] = st_init_value(d.gx0, d.gy0, d.gnx, d.gny, d.nx, d.ny, i, j);
}

/* blockIdx.y = side */
__global__ void st_k_pack(st_op_t op)
{
    int side = blockIdx.y;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    const st_dims_t d = op.d;
    double *b = op.buf[side];
    if (!b)
        return;
    const double *u = op.src;
    switch (side) {
    case ST_W:
        if (t < d.ny)
            b[t] = u[(long)(t + 1) * d.ld + 1];
        break;
    case ST_E:
        if (t < d.ny)
            b[t] = u[(long)(t + 1) * d.ld + d.nx];
        break;
    case ST_S:
        if (t < d.nx)
            b[t] = u[1 * d.ld + t + 1];
        break;
    case ST_N:
        if (t < d.nx)
            b[t] = u[(long)d.ny * d.ld + t + 1];
        break;
    }
}

__global__ void st_k_unpack(st_op_t op)
{
    int side = blockIdx.y;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    const st_dims_t d = op.d;
    const double *b = op.buf[side];
    if (!b)
        return;
    double *u = op.dst;
    switch (side) {
    case ST_W:
        if (t < d.ny)
            u[(long)(t + 1) * d.ld + 0] = b[t];
        break;
    case ST_E:
        if (t < d.ny)
            u[(long)(t + 1) * d.ld + d.nx + 1] = b[t];
        break;
    case ST_S:
        if (t < d.nx)
            u[0 * d.ld + t + 1] = b[t];
        break;
    case ST_N:
        if (t < d.nx)
            u[(long)(d.ny + 1) * d.ld + t + 1] = b[t];
        break;
    }
}

__device__ __forceinline__ void st_d_point(const double *__restrict__ u, double *__restrict__ v,
                                           long ld, int i, int j)
{
    long c = (long)j * ld + i;
    v[c] = st_update(u[c - 1], u[c + 1], u[c - ld], u[c + ld]);
}

/* Rectangle [i0, i0 + w) x [j0, j0 + h). */
__global__ void st_k_rect(st_op_t op, int i0, int j0, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        st_d_point(op.src, op.dst, op.d.ld, i0 + x, j0 + y);
}

/* Point t of the band: row 1, row ny (ny > 1), columns 1 and nx (nx > 1)
 * for rows 2..ny-1. */
__device__ __forceinline__ void st_band_point(const st_dims_t &d, long t, int *i, int *j)
{
    if (t < d.nx) {
        *i = (int)t + 1;
        *j = 1;
    } else if (d.ny > 1 && t < 2L * d.nx) {
        *i = (int)(t - d.nx) + 1;
        *j = d.ny;
    } else {
        long r = t - (d.ny > 1 ? 2L * d.nx : (long)d.nx);
        int ncol = d.nx > 1 ? 2 : 1;
        *j = 2 + (int)(r / ncol);
        *i = (r % ncol) ? d.nx : 1;
    }
}

__global__ void st_k_boundary(st_op_t op, long total)
{
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total)
        return;
    int i, j;
    st_band_point(op.d, t, &i, &j);
    st_d_point(op.src, op.dst, op.d.ld, i, j);
}

static void st_rect_launch(const st_op_t *op, int i0, int j0, int w, int h, cudaStream_t s)
{
    if (w <= 0 || h <= 0)
        return;
    dim3 b(ST_BX, ST_BY), g((w + ST_BX - 1) / ST_BX, (h + ST_BY - 1) / ST_BY);
    st_k_rect<<<g, b, 0, s>>>(*op, i0, j0, w, h);
}

/* ST_OP_RESID: max over the owned points of |dst - src|. A block per band
 * of rows (a row per warp step, no division per point), a block maximum in
 * shared memory, then atomicMax on the bit pattern: for non-negative
 * doubles the order of the patterns is the order of the values, so the
 * result is exactly the host's whatever the order (a NaN is skipped by the
 * comparison, as on the host). buf[0][0] is zeroed on the stream first.
 * (Session 15's version ran in one block: 12 ms per call at 4096^2.) */
#define ST_RESID_THREADS 256
__global__ void st_k_resid(st_op_t op)
{
    __shared__ double part[ST_RESID_THREADS];
    const st_dims_t d = op.d;
    double m = 0;
    for (int j = blockIdx.x * blockDim.y + threadIdx.y + 1; j <= d.ny; j += gridDim.x * blockDim.y)
        for (int i = threadIdx.x + 1; i <= d.nx; i += blockDim.x) {
            double a = op.dst[(long)j * d.ld + i] - op.src[(long)j * d.ld + i];
            a = a < 0 ? -a : a;
            m = a > m ? a : m;
        }
    int t = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    part[t] = m;
    __syncthreads();
    for (int w = n / 2; w > 0; w /= 2) {
        if (t < w && part[t + w] > part[t])
            part[t] = part[t + w];
        __syncthreads();
    }
    if (t == 0 && part[0] > 0)
        atomicMax((unsigned long long *)op.buf[0],
                  (unsigned long long)__double_as_longlong(part[0]));
}

static void st_resid_launch(const st_op_t *op, cudaStream_t s)
{
    const st_dims_t *d = &op->d;
    dim3 b(32, ST_RESID_THREADS / 32);
    unsigned g = (unsigned)((d->ny + b.y - 1) / b.y);
    if (g > 1024)
        g = 1024;
    cudaMemsetAsync(op->buf[0], 0, sizeof(double), s);
    st_k_resid<<<g ? g : 1, b, 0, s>>>(*op);
}

extern "C" void st_cuda_fn(void *arg, void *cudastream)
{
    const st_op_t *op = (const st_op_t *)arg;
    cudaStream_t s = (cudaStream_t)cudastream;
    const st_dims_t *d = &op->d;
    switch (op->kind) {
    case ST_OP_INIT: {
        dim3 b(ST_BX, ST_BY), g((d->nx + 2 + ST_BX - 1) / ST_BX, (d->ny + 2 + ST_BY - 1) / ST_BY);
        st_k_init<<<g, b, 0, s>>>(*op);
        break;
    }
    case ST_OP_PACK:
    case ST_OP_UNPACK: {
        int n = d->nx > d->ny ? d->nx : d->ny;
        dim3 b(256), g((n + 255) / 256, ST_NSIDES);
        if (op->kind == ST_OP_PACK)
            st_k_pack<<<g, b, 0, s>>>(*op);
        else
            st_k_unpack<<<g, b, 0, s>>>(*op);
        break;
    }
    case ST_OP_INTERIOR:
        st_rect_launch(op, 2, 2, d->nx - 2, d->ny - 2, s);
        break;
    case ST_OP_BOUNDARY: {
        long total = (long)d->nx + (d->ny > 1 ? d->nx : 0) +
                     (d->ny > 2 ? (long)(d->ny - 2) * (d->nx > 1 ? 2 : 1) : 0);
        st_k_boundary<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(*op, total);
        break;
    }
    case ST_OP_FULL:
        st_rect_launch(op, 1, 1, d->nx, d->ny, s);
        break;
    case ST_OP_RESID:
        st_resid_launch(op, s);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* the `ki` variant: all steps in one cooperative kernel (stencil.h)    */

__device__ __forceinline__ long st_pack_index(const st_dims_t &d, int side, int t)
{
    switch (side) {
    case ST_W:
        return (long)(t + 1) * d.ld + 1;
    case ST_E:
        return (long)(t + 1) * d.ld + d.nx;
    case ST_S:
        return 1 * d.ld + t + 1;
    default:
        return (long)d.ny * d.ld + t + 1;
    }
}

__device__ __forceinline__ long st_halo_index(const st_dims_t &d, int side, int t)
{
    switch (side) {
    case ST_W:
        return (long)(t + 1) * d.ld + 0;
    case ST_E:
        return (long)(t + 1) * d.ld + d.nx + 1;
    case ST_S:
        return 0 * d.ld + t + 1;
    default:
        return (long)(d.ny + 1) * d.ld + t + 1;
    }
}

__global__ void st_k_ki(st_ki_t a)
{
    namespace cg = cooperative_groups;
    cg::grid_group grid = cg::this_grid();
    const st_dims_t d = a.d;
    const long nth = (long)gridDim.x * blockDim.x;
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long iw = d.nx > 2 ? d.nx - 2 : 0, ih = d.ny > 2 ? d.ny - 2 : 0;
    const long band =
        (long)d.nx + (d.ny > 1 ? d.nx : 0) + (d.ny > 2 ? (long)(d.ny - 2) * (d.nx > 1 ? 2 : 1) : 0);
    /* every block reads the word before the first grid barrier, block 0
     * advances it after the last one */
    const int base = a.word ? (int)*(const volatile unsigned long long *)a.word : 0;
    for (int k = 0; k < a.steps; k++) {
        const int part = base + k;
        const double *u = a.g[k & 1];
        double *uh = a.g[k & 1]; /* its halo, written by the unpack */
        double *v = a.g[(k & 1) ^ 1];
        /* 1. pack side s into partition k, make it ready */
        if (blockIdx.x < ST_NSIDES && a.ds[blockIdx.x]) {
            int side = blockIdx.x, cnt = side == ST_W || side == ST_E ? d.ny : d.nx;
            double *b = a.sbuf[side] + (long)part * cnt;
            for (int t = threadIdx.x; t < cnt; t += blockDim.x)
                b[t] = u[st_pack_index(d, side, t)];
            __syncthreads();
            if (mpix_acc_pready<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)a.ds[side], part) !=
                    MPIX_ACC_DSUCCESS &&
                threadIdx.x == 0)
                atomicAdd(a.err, 1);
        }
        /* 2. the interior: rows over the blocks, points of a row over the
         * threads (coalesced, no division per point) */
        for (long row = blockIdx.x; row < ih; row += gridDim.x)
            for (long x = threadIdx.x; x < iw; x += blockDim.x)
                st_d_point(u, v, d.ld, 2 + (int)x, 2 + (int)row);
        /* 3. wait for partition k of side s, unpack it into u's halo */
        if (blockIdx.x >= ST_NSIDES && blockIdx.x < 2 * ST_NSIDES && a.dr[blockIdx.x - ST_NSIDES]) {
            int side = blockIdx.x - ST_NSIDES, cnt = side == ST_W || side == ST_E ? d.ny : d.nx;
            if (mpix_acc_parrived_wait<MPIX_ACC_BLOCK>((mpix_acc_dreq_t *)a.dr[side], part, 0) !=
                MPIX_ACC_DSUCCESS) {
                if (threadIdx.x == 0)
                    atomicAdd(a.err, 1);
            } else {
                const double *b = a.rbuf[side] + (long)part * cnt;
                for (int t = threadIdx.x; t < cnt; t += blockDim.x)
                    uh[st_halo_index(d, side, t)] = b[t];
            }
        }
        grid.sync();
        /* 4. the band (as st_k_boundary) */
        for (long t = tid; t < band; t += nth) {
            int i, j;
            st_band_point(d, t, &i, &j);
            st_d_point(u, v, d.ld, i, j);
        }
        grid.sync();
    }
    if (a.word && blockIdx.x == 0 && threadIdx.x == 0)
        *a.word = (unsigned long long)((base + a.steps) % a.parts);
}

extern "C" int st_ki_launch(const st_ki_t *k, void *cudastream, char *why, size_t len)
{
    int dev = 0, sms = 0, per = 0, coop = 0;
    const int threads = 256;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, st_k_ki, threads, 0) != cudaSuccess) {
        snprintf(why, len, "device attributes: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    if (!coop || per < 1) {
        snprintf(why, len, "no cooperative launch on this device");
        return -1;
    }
    long pts = (long)k->d.nx * k->d.ny;
    long want = (pts + threads - 1) / threads;
    long blocks = (long)sms * per;
    if (blocks > want)
        blocks = want;
    if (blocks < 2 * ST_NSIDES)
        blocks = 2 * ST_NSIDES; /* the pack and unpack blocks */
    if (blocks > (long)sms * per) {
        snprintf(why, len, "%ld blocks do not fit at once (%d x %d)", blocks, sms, per);
        return -1;
    }
    st_ki_t arg = *k;
    void *args[] = {&arg};
    cudaError_t e = cudaLaunchCooperativeKernel((void *)st_k_ki, dim3((unsigned)blocks),
                                                dim3(threads), args, 0, (cudaStream_t)cudastream);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaLaunchCooperativeKernel: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
