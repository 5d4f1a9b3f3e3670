/*
 * cuda_part.c - CUDA backend (cuda.c): device memory and stream-ordered
 * stores for partitioned requests (interpose/partitioned.c): the device
 * handle (mpix/mpix_acc_dreq.h) lives in device memory of the buffer's
 * context, written through the context's library stream; the epoch of a
 * start is a stream memory operation (or the fallback kernel).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <string.h>

#include "util/log.h"

mxu_status_t mxa_cuda_part_dev_alloc(const void *buf, size_t bytes, void **dptr, void **ctx)
{
    CUcontext c = NULL;
    if (MXA_CU(cuPointerGetAttribute) == NULL || MXA_CU(cuMemAlloc) == NULL)
        return MXU_ERR_UNSUPPORTED;
    CUresult r = MXA_CU(cuPointerGetAttribute)(&c, CU_POINTER_ATTRIBUTE_CONTEXT,
                                               (CUdeviceptr)(uintptr_t)buf);
    if (r != CUDA_SUCCESS || c == NULL)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "partitioned request: no context for device buffer %p: %s",
                 buf, cu_err(r));
    int entered = ctx_enter(c);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "partitioned request: cannot enter the buffer's context");
    CUdeviceptr p = 0;
    r = MXA_CU(cuMemAlloc)(&p, bytes ? bytes : 8);
    if (r == CUDA_SUCCESS) {
        r = MXA_CU(cuMemsetD8)(p, 0, bytes ? bytes : 8);
        if (r != CUDA_SUCCESS)
            MXA_CU(cuMemFree)(p);
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "partitioned request: %zu bytes of device memory: %s", bytes,
                 cu_err(r));
    *dptr = (void *)(uintptr_t)p;
    *ctx = c;
    return MXU_OK;
}

void mxa_cuda_part_dev_free(void *ctx, void *dptr)
{
    /* cuMemFree waits for the device: only where nothing of the library's
     * runs on it any more is that harmless; kept like the SX memory
     * (cuda_sx.c) would be -- except that a request freed by the
     * application is freed at once: its epochs are complete. */
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        return;
    (void)MXA_CU(cuMemFree)((CUdeviceptr)(uintptr_t)dptr);
    ctx_leave(entered);
}

mxu_status_t mxa_cuda_part_dev_write(void *ctx, void *dptr, const void *src, size_t bytes)
{
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "partitioned request: cannot enter the buffer's context");
    CUstream st = mxa_cuda_lib_stream((CUcontext)ctx);
    CUstream own = NULL;
    CUresult r = CUDA_SUCCESS;
    if (st == NULL) { /* a context the backend has not met (no stream of it yet) */
        r = MXA_CU(cuStreamCreate)(&own, CU_STREAM_NON_BLOCKING);
        st = own;
    }
    if (r == CUDA_SUCCESS)
        r = MXA_CU(cuMemcpyHtoDAsync)((CUdeviceptr)(uintptr_t)dptr, src, bytes, st);
    if (r == CUDA_SUCCESS)
        r = MXA_CU(cuStreamSynchronize)(st);
    if (own)
        MXA_CU(cuStreamDestroy)(own);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "partitioned request: writing %zu bytes of its handle: %s",
                 bytes, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_write64(mxa_stream_t *s, uint64_t *addr, uint64_t v)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 s->handle);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)addr;
    CUresult r = CUDA_SUCCESS;
    int use_memops = cx->memops;
    if (use_memops) {
        CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
        r = cu_capture_status(cs->cu, &cap);
        if (r == CUDA_SUCCESS && cap != CU_STREAM_CAPTURE_STATUS_NONE)
            use_memops = 0;
    }
    if (r == CUDA_SUCCESS && use_memops) {
        r = MXA_CU(cuStreamWriteValue64)(cs->cu, d, v, CU_STREAM_WRITE_VALUE_DEFAULT);
    } else if (r == CUDA_SUCCESS) {
        if (!cx->kernels_ok) {
            ctx_leave(entered);
            MXU_FAIL(MXU_ERR_UNSUPPORTED, "stream %p: no memory operations and no fallback kernels",
                     s->handle);
        }
        unsigned long long vv = v;
        void *args[] = {&d, &vv};
        r = MXA_CU(cuLaunchKernel)(cx->fn_set, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "stream-ordered store on stream %p failed: %s", s->handle, cu_err(r));
    return MXU_OK;
}

#else /* !MPIXACC_HAVE_CUDA */

typedef int mxa_cuda_part_unused_t;

#endif
