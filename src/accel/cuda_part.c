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

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Freed handles are kept for later requests of the same context and size:
 * cuMemFree waits for the device, and a request's last reference may go
 * while a kernel spins for a partition that the progress thread must move
 * -- the progress thread then waits for the driver lock cuMemFree holds
 * (2 x H200, test/gpu/partitioned with MPIX_ACC_KI=proxy at 9a998c1). */
typedef struct part_block {
    struct part_block *next;
    CUcontext ctx;
    size_t bytes;
    CUdeviceptr p;
} part_block_t;

static pthread_mutex_t part_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static part_block_t *part_pool;

mxu_status_t mxa_cuda_part_dev_alloc(const void *buf, size_t bytes, void **dptr, void **ctx)
{
    CUcontext c = NULL;
    if (MXA_CU(cuPointerGetAttribute) == NULL)
        return MXU_ERR_UNSUPPORTED;
    CUresult r = MXA_CU(cuPointerGetAttribute)(&c, CU_POINTER_ATTRIBUTE_CONTEXT,
                                               (CUdeviceptr)(uintptr_t)buf);
    if (r != CUDA_SUCCESS || c == NULL)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "partitioned request: no context for device buffer %p: %s", buf,
                 cu_err(r));
    if (bytes == 0)
        bytes = 8;
    pthread_mutex_lock(&part_pool_lock);
    part_block_t **pp = &part_pool, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->ctx == c && (*pp)->bytes == bytes) {
            b = *pp;
            *pp = b->next;
            break;
        }
    pthread_mutex_unlock(&part_pool_lock);
    if (b) { /* zeroed through the library stream: waits for nothing of the application's */
        void *zero = calloc(1, bytes);
        mxu_status_t st = zero ? mxa_cuda_part_dev_write(c, (void *)(uintptr_t)b->p, zero, bytes)
                               : MXU_ERR_NO_MEMORY;
        free(zero);
        if (st == MXU_OK) {
            *dptr = (void *)(uintptr_t)b->p;
            *ctx = c;
            free(b);
            return MXU_OK;
        }
        pthread_mutex_lock(&part_pool_lock); /* kept; a new one instead */
        b->next = part_pool;
        part_pool = b;
        pthread_mutex_unlock(&part_pool_lock);
    }
    uint64_t p = 0; /* zeroed device memory of c, as the SX path's scratch */
    MXU_TRY(mxa_cuda_sx_scratch_alloc(c, bytes, &p));
    *dptr = (void *)(uintptr_t)p;
    *ctx = c;
    return MXU_OK;
}

void mxa_cuda_part_dev_free(void *ctx, void *dptr, size_t bytes)
{
    part_block_t *b = malloc(sizeof(*b));
    if (!b)
        return; /* lost, never freed under a running kernel */
    *b = (part_block_t){
        .ctx = (CUcontext)ctx, .bytes = bytes ? bytes : 8, .p = (CUdeviceptr)(uintptr_t)dptr};
    pthread_mutex_lock(&part_pool_lock);
    b->next = part_pool;
    part_pool = b;
    pthread_mutex_unlock(&part_pool_lock);
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
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current", s->handle);
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

/* ------------------------------------------------------ direct protocol */

void mxa_cuda_part_vmm_free(void *ctx, void *dptr, size_t bytes)
{
    /* Kept mapped to the end of the process: unmapping may wait for the
     * device like cuMemFree (above). One mapping per partitioned request
     * pair made; a pool by size is the next step. */
    (void)ctx;
    (void)dptr;
    (void)bytes;
}

static int part_ctx_device(void *ctx, CUdevice *dev)
{
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        return -1;
    CUresult r = MXA_CU(cuCtxGetDevice)(dev);
    ctx_leave(entered);
    return r == CUDA_SUCCESS ? 0 : -1;
}

void mxa_cuda_part_busid(void *ctx, char *buf, size_t len)
{
    CUdevice dev;
    if (len == 0 || part_ctx_device(ctx, &dev) != 0 ||
        MXA_CU(cuDeviceGetPCIBusId)(buf, (int)len, dev) != CUDA_SUCCESS) {
        if (len)
            buf[0] = '\0';
        return;
    }
    for (char *c = buf; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
}

int mxa_cuda_part_reaches(void *ctx, const char *peer_busid)
{
    CUdevice mine, peer;
    if (!peer_busid || !peer_busid[0] || part_ctx_device(ctx, &mine) != 0 ||
        MXA_CU(cuDeviceGetByPCIBusId) == NULL ||
        MXA_CU(cuDeviceGetByPCIBusId)(&peer, peer_busid) != CUDA_SUCCESS)
        return 0;
    if (peer == mine)
        return 1;
    int can = 0;
    if (MXA_CU(cuDeviceCanAccessPeer) == NULL ||
        MXA_CU(cuDeviceCanAccessPeer)(&can, mine, peer) != CUDA_SUCCESS)
        return 0;
    return can;
}

mxu_status_t mxa_cuda_part_complete(mxa_stream_t *s, void *dreq, int is_send, int partitions,
                                    uint64_t part_bytes)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    CUfunction f = is_send ? cx->fn_part_send : cx->fn_part_recv;
    if (f == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "partitioned request: the completion kernels are not loaded");
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current", s->handle);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dreq;
    CUresult r;
    if (is_send) {
        void *args[] = {&d};
        r = MXA_CU(cuLaunchKernel)(f, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
    } else {
        /* a block per partition, a thread per LL line up to 256 */
        uint64_t words = (part_bytes + 3) / 4;
        unsigned threads = words >= 256 ? 256u : (unsigned)((words + 31) / 32 * 32);
        if (threads == 0)
            threads = 32;
        unsigned blocks = partitions > 1024 ? 1024u : (unsigned)partitions;
        void *args[] = {&d};
        r = MXA_CU(cuLaunchKernel)(f, blocks, 1, 1, threads, 1, 1, 0, cs->cu, args, NULL);
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "partitioned completion on stream %p: %s", s->handle, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_part_start(mxa_stream_t *s, void *dreq)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    if (cx->fn_part_start == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "partitioned request: the start kernel is not loaded");
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current", s->handle);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dreq;
    void *args[] = {&d};
    CUresult r = MXA_CU(cuLaunchKernel)(cx->fn_part_start, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "partitioned start on stream %p: %s", s->handle, cu_err(r));
    return MXU_OK;
}

#else /* !MPIXACC_HAVE_CUDA */

typedef int mxa_cuda_part_unused_t;

#endif
