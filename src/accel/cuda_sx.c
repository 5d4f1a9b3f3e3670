/*
 * cuda_sx.c - CUDA backend (cuda.c): the stream-executed path's device side
 * (sx.c is the layer above it, sx_proto.h the protocol): the shared-memory
 * segments registered for the GPU, host-visible memory for records, the
 * launches of the send and receive steps, and one library stream per
 * context for the receive steps the host asks for.
 *
 * Nothing here is freed at finalize: freeing pinned memory and
 * unregistering wait for the device to be idle (design.md §3, hazard 4);
 * the process ends soon after.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <stdlib.h>
#include <string.h>

#include "accel/sx_proto.h"
#include "util/calltime.h"
#include "util/log.h"

/* Any context to allocate pinned memory in (PORTABLE: usable from all):
 * the first the library set up, else the calling thread's (*current). */
static CUcontext sx_any_ctx(int *current)
{
    CUcontext c = atomic_load_explicit(&mxa_cuda_g_first_ctx, memory_order_acquire);
    *current = 0;
    if (c == NULL && MXA_CU(cuCtxGetCurrent)(&c) == CUDA_SUCCESS && c != NULL)
        *current = 1;
    return c;
}

static int sx_enter_any(void)
{
    int current;
    CUcontext c = sx_any_ctx(&current);
    if (c == NULL)
        return -1;
    return current ? 0 : ctx_enter(c);
}

int mxa_cuda_sx_context_known(void)
{
    int current;
    return sx_any_ctx(&current) != NULL;
}

void *mxa_cuda_sx_host_alloc(size_t bytes)
{
    int entered = sx_enter_any();
    if (entered < 0) {
        MXU_LOG(MXU_LOG_ERROR, "SX: no CUDA context to allocate pinned memory in");
        return NULL;
    }
    void *hp = NULL;
    CUresult r =
        MXA_CU(cuMemHostAlloc)(&hp, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS) {
        MXU_LOG(MXU_LOG_ERROR, "SX: cuMemHostAlloc(%zu) failed: %s", bytes, cu_err(r));
        return NULL;
    }
    memset(hp, 0, bytes);
    return hp;
}

void mxa_cuda_sx_host_free(void *p)
{
    (void)p; /* kept: cuMemFreeHost waits for the device (see the top) */
}

mxu_status_t mxa_cuda_sx_register(void *host, size_t bytes, uint64_t *dptr)
{
    if (MXA_CU(cuMemHostRegister) == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "SX: cuMemHostRegister is not available");
    int entered = sx_enter_any();
    if (entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: no CUDA context to register memory in");
    CUresult r = MXA_CU(cuMemHostRegister)(
        host, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
    CUdeviceptr d = 0;
    if (r == CUDA_SUCCESS)
        r = MXA_CU(cuMemHostGetDevicePointer)(&d, host, 0);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: cannot register the control page (%zu bytes): %s", bytes,
                 cu_err(r));
    *dptr = (uint64_t)d;
    return MXU_OK;
}

/* ---------------------------------------------------- device rings */

/* VMM properties for ctx's device, exportable as a POSIX fd. */
static CUresult sx_dring_prop(CUmemAllocationProp *prop, CUmemAccessDesc *acc)
{
    CUdevice dev = 0;
    CUresult r = MXA_CU(cuCtxGetDevice)(&dev);
    if (r != CUDA_SUCCESS)
        return r;
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int)dev;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    memset(acc, 0, sizeof(*acc));
    acc->location = prop->location;
    acc->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
}

static int sx_dring_api(void)
{
    return MXA_CU(cuMemCreate) && MXA_CU(cuMemRelease) && MXA_CU(cuMemAddressReserve) &&
           MXA_CU(cuMemMap) && MXA_CU(cuMemSetAccess) && MXA_CU(cuMemGetAllocationGranularity) &&
           MXA_CU(cuMemExportToShareableHandle) && MXA_CU(cuMemImportFromShareableHandle) &&
           MXA_CU(cuMemsetD8);
}

/* Reserve an address range and map handle h there for ctx's device. */
static CUresult sx_dring_map(CUmemGenericAllocationHandle h, size_t bytes, size_t align,
                             const CUmemAccessDesc *acc, CUdeviceptr *out)
{
    CUdeviceptr va = 0;
    CUresult r = MXA_CU(cuMemAddressReserve)(&va, bytes, align, 0, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = MXA_CU(cuMemMap)(va, bytes, 0, h, 0);
    if (r == CUDA_SUCCESS)
        r = MXA_CU(cuMemSetAccess)(va, bytes, acc, 1);
    if (r != CUDA_SUCCESS) {
        if (MXA_CU(cuMemUnmap))
            MXA_CU(cuMemUnmap)(va, bytes);
        if (MXA_CU(cuMemAddressFree))
            MXA_CU(cuMemAddressFree)(va, bytes);
        return r;
    }
    *out = va;
    return CUDA_SUCCESS;
}

/* The start of a device ring's allocation or import (sx_dring_begin). */
typedef struct {
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    size_t gran;      /* allocation granularity (0 until queried) */
    int entered;      /* ctx_enter's result, for ctx_leave */
    const char *what; /* the last driver call: the one that failed, if any */
} sx_dring_env_t;

/* What allocating and importing a device ring start with: the driver's VMM
 * API, ctx made current (whose: "ring's" or "stream's", for the message),
 * the VMM properties of its device and their allocation granularity. A
 * failure of the first two is logged and returned, nothing entered.
 * Otherwise MXU_OK with e->entered for ctx_leave, and *r the result of the
 * driver calls: where it failed, e->what names the call. */
static mxu_status_t sx_dring_begin(void *ctx, const char *whose, sx_dring_env_t *e, CUresult *r)
{
    if (!sx_dring_api())
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "SX: the driver has no virtual memory management API");
    e->entered = ctx_enter((CUcontext)ctx);
    if (e->entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: cannot make the %s context current", whose);
    e->gran = 0;
    e->what = "cuCtxGetDevice";
    *r = sx_dring_prop(&e->prop, &e->acc);
    if (*r == CUDA_SUCCESS) {
        e->what = "cuMemGetAllocationGranularity";
        *r = MXA_CU(cuMemGetAllocationGranularity)(&e->gran, &e->prop,
                                                   CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    }
    return MXU_OK;
}

mxu_status_t mxa_cuda_sx_dring_alloc(void *ctx, size_t *bytes, uint64_t *base, int *fd)
{
    sx_dring_env_t e;
    CUresult r;
    MXU_TRY(sx_dring_begin(ctx, "ring's", &e, &r));
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    int xfd = -1;
    size_t sz = e.gran ? (*bytes + e.gran - 1) / e.gran * e.gran : *bytes;
    if (r == CUDA_SUCCESS) {
        e.what = "cuMemCreate";
        r = MXA_CU(cuMemCreate)(&h, sz, &e.prop, 0);
    }
    if (r == CUDA_SUCCESS) {
        e.what = "mapping";
        r = sx_dring_map(h, sz, e.gran, &e.acc, &va);
        if (r != CUDA_SUCCESS)
            MXA_CU(cuMemRelease)(h);
    }
    if (r == CUDA_SUCCESS) {
        e.what = "cuMemsetD8";
        r = MXA_CU(cuMemsetD8)(va, 0, sz);
    }
    if (r == CUDA_SUCCESS) {
        e.what = "cuMemExportToShareableHandle";
        r = MXA_CU(cuMemExportToShareableHandle)(&xfd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                 0);
    }
    /* the mapping keeps the memory; the handle is not needed any more */
    if (h && va)
        MXA_CU(cuMemRelease)(h);
    ctx_leave(e.entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: device ring of %zu bytes: %s failed: %s", sz, e.what,
                 cu_err(r));
    *bytes = sz;
    *base = (uint64_t)va;
    *fd = xfd;
    return MXU_OK;
}

mxu_status_t mxa_cuda_sx_dring_import(void *ctx, int fd, size_t bytes, uint64_t *base)
{
    sx_dring_env_t e;
    CUresult r;
    MXU_TRY(sx_dring_begin(ctx, "stream's", &e, &r));
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    if (r == CUDA_SUCCESS) {
        e.what = "cuMemImportFromShareableHandle";
        r = MXA_CU(cuMemImportFromShareableHandle)(&h, (void *)(uintptr_t)fd,
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    }
    if (r == CUDA_SUCCESS) {
        e.what = "mapping (peer access)";
        r = sx_dring_map(h, bytes, e.gran, &e.acc, &va);
        MXA_CU(cuMemRelease)(h);
    }
    ctx_leave(e.entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: peer's device ring (%zu bytes): %s failed: %s", bytes,
                 e.what, cu_err(r));
    *base = (uint64_t)va;
    return MXU_OK;
}

mxu_status_t mxa_cuda_sx_dring_read(void *ctx, uint64_t src, void *dst, size_t bytes)
{
    if (MXA_CU(cuMemcpyDtoH) == NULL)
        return MXU_ERR_UNSUPPORTED;
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        return MXU_ERR_NO_DEVICE;
    CUresult r = MXA_CU(cuMemcpyDtoH)(dst, (CUdeviceptr)src, bytes);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: reading the device ring: %s", cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_sx_scratch_alloc(void *ctx, size_t bytes, uint64_t *dptr)
{
    if (MXA_CU(cuMemAlloc) == NULL || MXA_CU(cuMemsetD8) == NULL)
        return MXU_ERR_UNSUPPORTED;
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        return MXU_ERR_NO_DEVICE;
    CUdeviceptr p = 0;
    CUresult r = MXA_CU(cuMemAlloc)(&p, bytes);
    if (r == CUDA_SUCCESS) {
        r = MXA_CU(cuMemsetD8)(p, 0, bytes);
        if (r != CUDA_SUCCESS)
            MXA_CU(cuMemFree)(p);
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: %zu bytes of scratch: %s", bytes, cu_err(r));
    *dptr = (uint64_t)p;
    return MXU_OK;
}

void *mxa_cuda_sx_stream_ctx(const mxa_stream_t *s)
{
    if (s->kind != MXA_KIND_CUDA)
        return NULL;
    const cuda_stream_t *cs = (const cuda_stream_t *)s;
    return cs->ctx ? cs->ctx->ctx : NULL;
}

static cuda_ctx_t *sx_ctx_record(CUcontext c)
{
    pthread_mutex_lock(&mxa_cuda_g.lock);
    cuda_ctx_t *found = NULL;
    for (cuda_ctx_t *cx = mxa_cuda_g.ctxs; cx != NULL; cx = cx->next)
        if (cx->ctx == c && !cx->stale)
            found = cx;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    return found;
}

/* The context's library stream (created at the first call; context current). */
static CUstream sx_ctx_stream(cuda_ctx_t *cx)
{
    pthread_mutex_lock(&mxa_cuda_g.lock);
    if (cx->sx_stream == NULL) {
        CUstream st = NULL;
        if (MXA_CU(cuStreamCreate)(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS)
            cx->sx_stream = st;
    }
    CUstream st = cx->sx_stream;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    return st;
}

cuda_ctx_t *mxa_cuda_ctx_record(CUcontext c) { return sx_ctx_record(c); }

CUstream mxa_cuda_lib_stream(CUcontext c)
{
    cuda_ctx_t *cx = sx_ctx_record(c);
    return cx ? sx_ctx_stream(cx) : NULL;
}

static mxu_status_t sx_launch(cuda_stream_t *cs, CUfunction f, unsigned blocks, unsigned threads,
                              void *param, size_t param_bytes, const char *what, int pdl)
{
    uint64_t t = mxu_ct_inner_begin();
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "SX: cannot make the context of stream %p current",
                 cs->pub.handle);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, param, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &param_bytes, CU_LAUNCH_PARAM_END};
    /* pdl: the step may start before the kernel ahead of it finishes; it
     * waits for that kernel (griddepcontrol.wait) before its reads */
    CUresult r = mxa_cuda_launch(f, blocks, threads, cs->cu, pdl, NULL, extra);
    ctx_leave(entered);
    mxu_ct_inner_end(f == cs->ctx->fn_sx_recv || f == cs->ctx->fn_sx_recv1 ? MXU_CT_CU_LAUNCH_RECV
                                                                           : MXU_CT_CU_LAUNCH,
                     t);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "SX: %s step on stream %p failed to launch: %s", what, cs->pub.handle, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_sx_send(mxa_stream_t *s, const mxa_sx_send_desc_t *d)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    mxa_sx_send_desc_t p = *d;
    if (p.trigger_seq)
        p.trigger_word = (uint64_t)cs->trig_dptr;
    unsigned threads = p.bytes <= 1024 ? 64 : p.bytes <= 16384 ? 256 : 512;
    unsigned blocks = 1;
    if (p.bulk) {
        /* a bulk step's copy crosses NVLink: one block per chunk */
        uint64_t b = (p.bytes + MXA_SX_BULK_SEND_CHUNK - 1) / MXA_SX_BULK_SEND_CHUNK;
        blocks = (unsigned)(b < 1 ? 1 : b < MXA_SX_BULK_SEND_BLOCKS ? b : MXA_SX_BULK_SEND_BLOCKS);
    }
    return sx_launch(cs, cs->ctx->fn_sx_send, blocks, threads, &p, sizeof(p), "send",
                     cs->ctx->sx_pdl);
}

mxu_status_t mxa_cuda_sx_recv(mxa_stream_t *s, const mxa_sx_recv_desc_t *d, int n,
                              const mxa_sx_limits_t *lim)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    if (cs->ctx->fn_sx_recv == NULL)
        return MXU_ERR_UNSUPPORTED;
    uint64_t most = 0;
    unsigned per = 1; /* blocks per receive: the most any of them takes */
    for (int i = 0; i < n; i++) {
        if (d[i].cap > most)
            most = d[i].cap;
        if (d[i].blocks > per)
            per = d[i].blocks;
    }
    unsigned threads = most <= 1024 ? 64 : most <= 16384 ? 256 : 512;
    /* with programmatic dependent launch too: the step scans while the
     * kernel ahead runs and waits for it before it writes the buffer */
    if (n == 1 && cs->ctx->fn_sx_recv1) {
        mxa_sx_recv1_params_t p1;
        memset(&p1, 0, sizeof(p1));
        p1.lim = *lim;
        p1.n = 1;
        p1.per = (int32_t)per;
        p1.d[0] = d[0];
        return sx_launch(cs, cs->ctx->fn_sx_recv1, per, threads, &p1, sizeof(p1), "receive",
                         cs->ctx->sx_pdl);
    }
    mxa_sx_recv_params_t p;
    memset(&p, 0, sizeof(p));
    p.lim = *lim;
    p.n = n;
    for (int i = 0; i < n; i++)
        p.d[i] = d[i];
    p.per = (int32_t)per;
    return sx_launch(cs, cs->ctx->fn_sx_recv, (unsigned)n * per, threads, &p, sizeof(p), "receive",
                     cs->ctx->sx_pdl);
}

mxu_status_t mxa_cuda_sx_after(mxa_stream_t *s, mxa_stream_t *other, uint64_t seq)
{
    cuda_stream_t *cs = (cuda_stream_t *)s, *os = (cuda_stream_t *)other;
    cuda_ctx_t *cx = cs->ctx;
    uint64_t t = mxu_ct_inner_begin();
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "SX: cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r;
    if (cx->memops) {
        r = MXA_CU(cuStreamWaitValue64)(cs->cu, os->trig_dptr, seq, CU_STREAM_WAIT_VALUE_GEQ);
    } else {
        unsigned long long v = seq;
        CUdeviceptr w = os->trig_dptr;
        void *args[] = {&w, &v};
        r = MXA_CU(cuLaunchKernel)(cx->fn_wait, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
    }
    ctx_leave(entered);
    mxu_ct_inner_end(MXU_CT_CU_MEMOP, t);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "SX: cross-stream wait on stream %p failed: %s", cs->pub.handle,
                 cu_err(r));
    return MXU_OK;
}

mxa_stream_t *mxa_cuda_sx_library_stream(void *ctx)
{
    cuda_ctx_t *cx = sx_ctx_record((CUcontext)ctx);
    if (cx == NULL)
        return NULL;
    int entered = ctx_enter(cx->ctx);
    CUstream st = entered >= 0 ? sx_ctx_stream(cx) : NULL;
    mxa_stream_t *out = NULL;
    if (st != NULL && mxa_cuda_stream_lookup(st, &out) != MXU_OK)
        out = NULL;
    ctx_leave(entered);
    return out;
}

#else /* !MPIXACC_HAVE_CUDA */

typedef int mxa_cuda_sx_unused_t;

#endif
