/*
 * cuda_mem.c - CUDA backend (cuda.c): memory types of buffers, and the
 * context of a buffer (mxa_cuda_bind_buffer).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"
#include "util/calltime.h"

#include "util/log.h"

/* --------------------------------------------------------- memory type */

mxa_memtype_t mxa_cuda_memtype(const void *buf, size_t len)
{
    (void)len;
    if (buf == NULL || !atomic_load_explicit(&mxa_cuda_g_active, memory_order_acquire))
        return MXA_MEM_HOST;
    /* One driver call per buffer. No range cache: without free hooks a
     * cached range can outlive its allocation and name the wrong type for
     * a new allocation at the same address (device <-> managed), which
     * would send the transport down the wrong path. */
    unsigned int memtype = 0, managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[2] = {&memtype, &managed};
    uint64_t t = mxu_ct_inner_begin();
    CUresult r = MXA_CU(cuPointerGetAttributes)(2, attrs, data, (CUdeviceptr)(uintptr_t)buf);
    CUstreamCaptureMode prev;
    if (r != CUDA_SUCCESS && cu_capture_mode_relax(&prev)) {
        /* refused because of a capture? (mxa_cuda_stream_lookup) */
        r = MXA_CU(cuPointerGetAttributes)(2, attrs, data, (CUdeviceptr)(uintptr_t)buf);
        cu_capture_mode_restore(prev);
    }
    mxu_ct_inner_end(MXU_CT_CU_QUERY, t);
    if (r != CUDA_SUCCESS) {
        MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: cuPointerGetAttributes(%p): %s: host assumed", buf,
                cu_err(r));
        return MXA_MEM_HOST;
    }
    if (managed)
        return MXA_MEM_MANAGED;
    if (memtype == CU_MEMORYTYPE_DEVICE || memtype == CU_MEMORYTYPE_ARRAY)
        return MXA_MEM_DEVICE;
    return MXA_MEM_HOST;
}

/* Context of a device/managed buffer, made current on the calling thread
 * (the progress thread, before UCX touches the buffer). */
mxu_status_t mxa_cuda_bind_buffer(const void *buf)
{
    if (!atomic_load_explicit(&mxa_cuda_g_active, memory_order_acquire))
        return MXU_OK;
    /* A thread without a context first gets the default one: UCX may need
     * a context even for a host buffer (cuda_ipc mapping of the peer's GPU
     * memory), and the pointer query below is safest with one current. */
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == NULL) {
        CUcontext dflt = atomic_load_explicit(&mxa_cuda_g_first_ctx, memory_order_acquire);
        if (dflt != NULL && MXA_CU(cuCtxSetCurrent)(dflt) == CUDA_SUCCESS)
            cur = dflt;
    }
    if (buf == NULL)
        return MXU_OK;
    CUcontext bc = NULL;
    unsigned int memtype = 0, managed = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_CONTEXT,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[4] = {&memtype, &managed, &bc, &ordinal};
    CUresult r = MXA_CU(cuPointerGetAttributes)(4, attrs, data, (CUdeviceptr)(uintptr_t)buf);
    if (r != CUDA_SUCCESS || (!managed && memtype != CU_MEMORYTYPE_DEVICE))
        return MXU_OK; /* host memory: the default context (if any) will do */
    if (bc == NULL) {
        /* Memory not tied to a context (cuMemCreate/VMM, memory pools):
         * the primary context of its device. */
        if (ordinal < 0 || ordinal >= mxa_cuda_g.ndev)
            MXU_FAIL(MXU_ERR_NO_DEVICE, "CUDA backend: no context or device for buffer %p", buf);
        pthread_mutex_lock(&mxa_cuda_g.lock);
        cuda_dev_t *d = &mxa_cuda_g.devs[ordinal];
        if (d->primary == NULL) {
            r = MXA_CU(cuDevicePrimaryCtxRetain)(&d->primary, d->dev);
            if (r != CUDA_SUCCESS) {
                d->primary = NULL;
                pthread_mutex_unlock(&mxa_cuda_g.lock);
                MXU_FAIL(MXU_ERR_NO_DEVICE,
                         "CUDA backend: cannot retain the primary context of "
                         "device %d: %s",
                         ordinal, cu_err(r));
            }
        }
        bc = d->primary;
        pthread_mutex_unlock(&mxa_cuda_g.lock);
    }
    if (cur == bc)
        return MXU_OK;
    r = MXA_CU(cuCtxSetCurrent)(bc);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE,
                 "CUDA backend: cannot make the context of buffer %p current: %s", buf, cu_err(r));
    return MXU_OK;
}

#else /* !MPIXACC_HAVE_CUDA */

/* ISO C forbids an empty translation unit. */
typedef int mxa_cuda_unused_t;

#endif
