/*
 * reduce.c - element-wise reductions for stream-ordered collectives
 * (interpose/streamcoll.c): the host arithmetic, and mxa_stream_reduce,
 * which runs it (or the CUDA kernel mxa_reduce_kernel of cuda_kernels.cu,
 * the same arithmetic) in a stream's order.
 *
 * out[i] = a[i] op b[i], a the lower rank's operand. Integer sums and
 * products wrap (unsigned arithmetic of at least int's width: no
 * undefined overflow); floating-point ones are one IEEE operation per
 * element in round-to-nearest, so host and GPU give the same bits; MIN and
 * MAX are (b < a ? b : a) and (b > a ? b : a) on both.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "accel/accel.h"

#include <stdlib.h>

#include "util/log.h"

#ifdef MPIXACC_HAVE_CUDA
#include "accel/cuda.h"
#endif

size_t mxa_red_esize(mxa_red_kind_t k)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
    return (unsigned)k < sizeof(sz) / sizeof(sz[0]) ? sz[k] : 0;
}

#define MXA_RED_LOOP(T, W)                                                                         \
    do {                                                                                           \
        T *o_ = out;                                                                               \
        const T *a_ = a, *b_ = b;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a_[i], y = b_[i];                                                                \
            switch (op) {                                                                          \
            case MXA_RED_SUM:                                                                      \
                o_[i] = (T)((W)x + (W)y);                                                          \
                break;                                                                             \
            case MXA_RED_PROD:                                                                     \
                o_[i] = (T)((W)x * (W)y);                                                          \
                break;                                                                             \
            case MXA_RED_MIN:                                                                      \
                o_[i] = y < x ? y : x;                                                             \
                break;                                                                             \
            case MXA_RED_MAX:                                                                      \
                o_[i] = y > x ? y : x;                                                             \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void mxa_reduce_host(mxa_red_kind_t kind, mxa_red_op_t op, void *out, const void *a, const void *b,
                     size_t n)
{
    switch (kind) {
    case MXA_RED_I8:
        MXA_RED_LOOP(int8_t, uint32_t);
        break;
    case MXA_RED_U8:
        MXA_RED_LOOP(uint8_t, uint32_t);
        break;
    case MXA_RED_I16:
        MXA_RED_LOOP(int16_t, uint32_t);
        break;
    case MXA_RED_U16:
        MXA_RED_LOOP(uint16_t, uint32_t);
        break;
    case MXA_RED_I32:
        MXA_RED_LOOP(int32_t, uint32_t);
        break;
    case MXA_RED_U32:
        MXA_RED_LOOP(uint32_t, uint32_t);
        break;
    case MXA_RED_I64:
        MXA_RED_LOOP(int64_t, uint64_t);
        break;
    case MXA_RED_U64:
        MXA_RED_LOOP(uint64_t, uint64_t);
        break;
    case MXA_RED_F32:
        MXA_RED_LOOP(float, float);
        break;
    case MXA_RED_F64:
        MXA_RED_LOOP(double, double);
        break;
    }
}

typedef struct {
    mxa_red_kind_t kind;
    mxa_red_op_t op;
    void *out;
    const void *a, *b;
    size_t n;
} host_reduce_t;

static void host_reduce_fn(void *arg)
{
    host_reduce_t *r = arg;
    mxa_reduce_host(r->kind, r->op, r->out, r->a, r->b, r->n);
    free(r);
}

mxu_status_t mxa_stream_reduce(mxa_stream_t *s, mxa_red_kind_t kind, mxa_red_op_t op, void *out,
                               const void *a, const void *b, size_t n)
{
    if (n == 0)
        return MXU_OK;
    if (mxa_red_esize(kind) == 0 || (unsigned)op > MXA_RED_MAX)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "reduction of an unknown kind %d or operation %d",
                 (int)kind, (int)op);
    if (s->kind == MXA_KIND_NONE) {
        mxa_reduce_host(kind, op, out, a, b, n);
        return MXU_OK;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA) {
        size_t bytes = n * mxa_red_esize(kind);
        mxa_memtype_t to = mxa_memtype(out, bytes), ta = mxa_memtype(a, bytes),
                      tb = mxa_memtype(b, bytes);
        if (to != MXA_MEM_HOST && ta != MXA_MEM_HOST && tb != MXA_MEM_HOST)
            return mxa_cuda_stream_reduce(s, (int)kind, (int)op, out, a, b, n);
        if (to == MXA_MEM_DEVICE || ta == MXA_MEM_DEVICE || tb == MXA_MEM_DEVICE)
            MXU_FAIL(MXU_ERR_INVALID_PARAM,
                     "stream-ordered reduction over device and host memory at once (the caller "
                     "stages one side)");
        /* host (and managed) memory: the host arithmetic in stream order */
    }
#endif
    host_reduce_t *r = malloc(sizeof(*r));
    if (!r)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "out of memory for a stream-ordered reduction");
    *r = (host_reduce_t){kind, op, out, a, b, n};
    mxu_status_t st = mxa_stream_host_call(s, host_reduce_fn, r);
    if (st != MXU_OK)
        free(r);
    return st;
}
