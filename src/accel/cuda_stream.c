/*
 * cuda_stream.c - CUDA backend (cuda.c): streams, their sequence words and
 * stream points (the backend table).
 *
 * Streams. The first lookup of a handle creates an mxa_cuda_stream_t (the
 * public mxa_stream_t is its first member), cached in a locked hash map keyed
 * by the handle. Every lookup validates the handle: cuStreamGetId (CUDA 12+,
 * which also detects a destroyed handle's address being reused for a new
 * stream: the record is then re-bound to the new stream's context and keeps
 * its monotonic sequence words) or cuStreamGetCtx. A failing handle is
 * MXU_ERR_INVALID_STREAM. NULL and CU_STREAM_LEGACY (0x1) are the legacy
 * default stream of the calling thread's current context (of device 0's
 * primary context when the thread has none); CU_STREAM_PER_THREAD (0x2) is
 * the per-thread default stream of (current context, calling thread). These
 * "special" streams are kept in a list keyed by (context[, thread]).
 *
 * Sequence words. One (trigger, release) pair of 64-bit words per stream,
 * on separate 64-byte lines of a slot in a 64 KiB slab of
 * cuMemHostAlloc(DEVICEMAP|PORTABLE) memory (device pointer from
 * cuMemHostGetDevicePointer). Triggers: cuStreamWriteValue64(trigger, seq)
 * (the default flags put a system-scope fence before the write). Waits:
 * cuStreamWaitValue64(release, seq, GEQ[|FLUSH where the device can flush
 * remote writes]). The engine's progress thread polls trigger words (needs_polling = 1) and
 * releases waits with an atomic store (the GPU sees host-mapped memory).
 *
 * Fallback. With MPIX_ACC_MEMOPS=0, or when the device cannot do 64-bit
 * stream memory operations or they failed the self-test, the points are
 * one-thread kernels (cuda_kernels.cu): flag-set, flag-wait (wait-then-set
 * only in the self-test). No point is enqueued on a stream being captured
 * into a graph: the engine refuses such calls (mxa_stream_refuse_capture).
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

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static mxu_status_t backend_enqueue_trigger(mxa_stream_t *s, uint64_t seq);
static mxu_status_t backend_enqueue_wait(mxa_stream_t *s, uint64_t seq);
static void backend_release(mxa_stream_t *s, uint64_t seq);
static uint64_t backend_poll_trigger(mxa_stream_t *s);
static int backend_capturing(mxa_stream_t *s);

static const mxa_backend_t cuda_backend = {
    .name = "cuda",
    .kind = MXA_KIND_CUDA,
    .enqueue_trigger = backend_enqueue_trigger,
    .enqueue_wait = backend_enqueue_wait,
    .release = backend_release,
    .poll_trigger = backend_poll_trigger,
    .needs_polling = 1,
    .capturing = backend_capturing,
    .pci_busid = mxa_cuda_stream_pci_busid,
};

/* ----------------------------------------------------- sequence words */

/* Allocate one slot (two words on separate lines). A context must be
 * current (cuMemHostAlloc); PORTABLE makes the memory usable from all. */
mxu_status_t mxa_cuda_slot_alloc(unsigned char **host_out)
{
    slab_t *sl = mxa_cuda_g.slabs;
    if (sl == NULL || sl->used + SLOT_BYTES > SLAB_BYTES) {
        sl = calloc(1, sizeof(*sl));
        if (sl == NULL)
            MXU_FAIL(MXU_ERR_NO_MEMORY, "CUDA backend: out of memory");
        void *hp = NULL;
        CUresult r = MXA_CU(cuMemHostAlloc)(&hp, SLAB_BYTES,
                                            CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (r != CUDA_SUCCESS) {
            free(sl);
            MXU_FAIL(MXU_ERR_NO_DEVICE,
                     "CUDA backend: cuMemHostAlloc(%d bytes, DEVICEMAP|PORTABLE) failed: %s",
                     SLAB_BYTES, cu_err(r));
        }
        memset(hp, 0, SLAB_BYTES);
        sl->host = hp;
        sl->next = mxa_cuda_g.slabs;
        mxa_cuda_g.slabs = sl;
    }
    *host_out = sl->host + sl->used;
    sl->used += SLOT_BYTES;
    return MXU_OK;
}

mxu_status_t mxa_cuda_host_to_dev(void *host, CUdeviceptr *d)
{
    CUresult r = MXA_CU(cuMemHostGetDevicePointer)(d, host, 0);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "CUDA backend: cuMemHostGetDevicePointer failed: %s",
                 cu_err(r));
    return MXU_OK;
}

/* ------------------------------------------------------------- streams */

/* Bind record cs to context cx: device pointers of the words and flags.
 * mxa_cuda_g.lock held. */
static mxu_status_t stream_bind(cuda_stream_t *cs, cuda_ctx_t *cx)
{
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "CUDA backend: cannot make a stream's context current");
    mxu_status_t status = MXU_OK;
    if (cs->pub.trigger_word == NULL) {
        unsigned char *slot;
        MXU_TRY_GOTO(mxa_cuda_slot_alloc(&slot), out);
        cs->pub.trigger_word = (_Atomic uint64_t *)slot;
        cs->pub.release_word = (_Atomic uint64_t *)(slot + 64);
    }
    MXU_TRY_GOTO(mxa_cuda_host_to_dev((void *)cs->pub.trigger_word, &cs->trig_dptr), out);
    MXU_TRY_GOTO(mxa_cuda_host_to_dev((void *)cs->pub.release_word, &cs->rel_dptr), out);
    cs->ctx = cx;
    cs->wait_flags = wait_flags_for(cx->dev_index);
out:
    ctx_leave(entered);
    return status;
}

static mxu_status_t stream_new(void *handle, CUstream cu, int special, cuda_ctx_t *cx,
                               cuda_stream_t **out)
{
    cuda_stream_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "CUDA backend: out of memory");
    cs->pub.kind = MXA_KIND_CUDA;
    cs->pub.backend = &cuda_backend;
    cs->pub.handle = handle;
    cs->pub.backend_state = cs;
    atomic_init(&cs->pub.next_trigger_seq, 0);
    atomic_init(&cs->pub.next_wait_seq, 0);
    atomic_init(&cs->pub.ops_in_flight, 0);
    cs->cu = cu;
    cs->special = special;
    cs->thread = pthread_self();
    mxu_status_t st = stream_bind(cs, cx);
    if (st != MXU_OK) {
        /* a slot taken by a failed bind stays in its slab */
        free(cs);
        return st;
    }
    cs->next = mxa_cuda_g.streams;
    mxa_cuda_g.streams = cs;
    *out = cs;
    return MXU_OK;
}

static mxu_status_t lookup_special(int special, void *handle, mxa_stream_t **out)
{
    CUcontext c = NULL;
    MXA_CU(cuCtxGetCurrent)(&c);
    pthread_t self = pthread_self();
    mxu_status_t status = MXU_OK;
    pthread_mutex_lock(&mxa_cuda_g.lock);
    if (c == NULL) {
        /* No context on this thread: like the runtime, use device 0's
         * primary context. */
        if (!mxa_cuda_g.primary0_retained) {
            CUresult r =
                MXA_CU(cuDevicePrimaryCtxRetain)(&mxa_cuda_g.primary0, mxa_cuda_g.devs[0].dev);
            if (r != CUDA_SUCCESS) {
                pthread_mutex_unlock(&mxa_cuda_g.lock);
                MXU_FAIL(MXU_ERR_NO_DEVICE,
                         "CUDA backend: default stream without a current context, and device "
                         "0's primary context cannot be retained: %s",
                         cu_err(r));
            }
            mxa_cuda_g.primary0_retained = 1;
        }
        c = mxa_cuda_g.primary0;
    }
    cuda_ctx_t *cx = NULL;
    status = mxa_cuda_ctx_get(c, &cx);
    if (status != MXU_OK)
        goto out;
    for (cuda_stream_t *cs = mxa_cuda_g.streams; cs != NULL; cs = cs->next) {
        if (cs->special == special && cs->ctx == cx &&
            (special != SPECIAL_PER_THREAD || pthread_equal(cs->thread, self))) {
            *out = &cs->pub;
            goto out;
        }
    }
    cuda_stream_t *cs = NULL;
    status = stream_new(handle, special == SPECIAL_LEGACY ? CU_STREAM_LEGACY : CU_STREAM_PER_THREAD,
                        special, cx, &cs);
    if (status == MXU_OK)
        *out = &cs->pub;
out:
    if (status == MXU_OK && cx != NULL)
        mxa_cuda_wait_until_warm(cx);
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    mxa_cuda_run_new_context_hook();
    return status;
}

/* Is the live handle cu being captured? (The capture query works where
 * cuStreamGetId does not: on a capturing stream; backend_capturing.) */
static int stream_in_capture(CUcontext ctx, CUstream cu)
{
    int entered = ctx_enter(ctx);
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cu_capture_status(cu, &cap);
    ctx_leave(entered);
    return r == CUDA_SUCCESS && cap != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Identity of a live ordinary stream handle. */
static mxu_status_t stream_identity(CUstream h, CUcontext *ctx, unsigned long long *id,
                                    int *have_id)
{
    CUresult r = MXA_CU(cuStreamGetCtx)(h, ctx);
    if (r != CUDA_SUCCESS) {
        MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: stream %p: cuStreamGetCtx: %s", (void *)h, cu_err(r));
        return MXU_ERR_INVALID_STREAM;
    }
    *have_id = 0;
    /* a stream first seen inside its capture is known by its context only:
     * asking a capturing stream for its id invalidates the capture (2 x
     * H100, CUDA 13.0, session 21: the first MPIX_Acc_Irecv on a stream
     * created and captured at once found its capture invalidated) */
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu_capture_status(h, &cap) != CUDA_SUCCESS || cap != CU_STREAM_CAPTURE_STATUS_NONE)
        return MXU_OK;
    if (MXA_CU(cuStreamGetId) != NULL && MXA_CU(cuStreamGetId)(h, id) == CUDA_SUCCESS)
        *have_id = 1;
    return MXU_OK;
}

static mxu_status_t stream_lookup(void *handle, mxa_stream_t **out);

/* A capture in global or thread-local mode -- on this thread, or in global
 * mode on any thread -- makes CUDA refuse "potentially unsafe" driver calls
 * on this thread, and the handle's validation may be one of them. A
 * validation that fails is tried once more with this thread in relaxed
 * mode, so a stream beside another one's capture works. (A stream that is
 * itself being captured has no id: cuStreamGetId answers
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED in every mode -- seen on 2 x H100,
 * CUDA 13.0, where MPIX_Acc_Isend on it was reported as an invalid stream,
 * 92adb84 -- and stream_lookup then asks the capture status instead.) */
mxu_status_t mxa_cuda_stream_lookup(void *handle, mxa_stream_t **out)
{
    mxu_status_t st = stream_lookup(handle, out);
    CUstreamCaptureMode prev;
    if (st != MXU_ERR_INVALID_STREAM || !cu_capture_mode_relax(&prev))
        return st;
    st = stream_lookup(handle, out);
    cu_capture_mode_restore(prev);
    if (st == MXU_OK)
        MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: stream %p validated in relaxed capture mode", handle);
    return st;
}

static mxu_status_t stream_lookup(void *handle, mxa_stream_t **out)
{
    if (out == NULL)
        return MXU_ERR_INVALID_PARAM;
    *out = NULL;
    if (!atomic_load_explicit(&mxa_cuda_g_active, memory_order_acquire))
        return MXU_ERR_INVALID_STREAM;
    uintptr_t h = (uintptr_t)handle;
    if (h == 0 || h == (uintptr_t)CU_STREAM_LEGACY)
        return lookup_special(SPECIAL_LEGACY, handle, out);
    if (h == (uintptr_t)CU_STREAM_PER_THREAD)
        return lookup_special(SPECIAL_PER_THREAD, handle, out);
    if (h < 4096 || (h & 7) != 0)
        return MXU_ERR_INVALID_STREAM; /* cannot be a driver object: do not pass it on */

    CUstream cu = (CUstream)handle;
    cuda_stream_t *cs = mxu_locked_map_get(&mxa_cuda_g.map, (uint64_t)h);
    if (cs != NULL) {
        /* Fast path: one driver call validates the handle. */
        if (cs->have_id) {
            /* a stream being captured has no id to ask for (CUDA 13.0:
             * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), and asking invalidates
             * its capture (2 x H100, session 19: a partitioned start
             * captured after the lookup failed with
             * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED): its capture status
             * first, which a capturing stream answers */
            CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
            if (!cs->ctx->stale && atomic_load(&cs->ctx->warm) &&
                cu_capture_status(cu, &cap) == CUDA_SUCCESS &&
                cap != CU_STREAM_CAPTURE_STATUS_NONE) {
                *out = &cs->pub;
                return MXU_OK;
            }
            unsigned long long id;
            CUresult r = MXA_CU(cuStreamGetId)(cu, &id);
            if (r != CUDA_SUCCESS) {
                MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: stream %p: cuStreamGetId: %s", handle,
                        cu_err(r));
                return MXU_ERR_INVALID_STREAM;
            }
            if (id == cs->stream_id && !cs->ctx->stale && atomic_load(&cs->ctx->warm)) {
                *out = &cs->pub;
                return MXU_OK;
            }
        } else {
            CUcontext c;
            CUresult r = MXA_CU(cuStreamGetCtx)(cu, &c);
            if (r != CUDA_SUCCESS)
                return MXU_ERR_INVALID_STREAM;
            if (c == cs->ctx->ctx && !cs->ctx->stale && atomic_load(&cs->ctx->warm)) {
                *out = &cs->pub;
                return MXU_OK;
            }
        }
    }

    /* Slow path: first sight of the handle, or its address now names
     * another stream. */
    CUcontext c;
    unsigned long long id = 0;
    int have_id = 0;
    MXU_TRY(stream_identity(cu, &c, &id, &have_id));
    mxu_status_t status = MXU_OK;
    pthread_mutex_lock(&mxa_cuda_g.lock);
    cuda_ctx_t *cx = NULL;
    status = mxa_cuda_ctx_get(c, &cx);
    if (status != MXU_OK)
        goto out;
    cs = mxu_locked_map_get(&mxa_cuda_g.map, (uint64_t)h);
    if (cs == NULL) {
        status = stream_new(handle, cu, SPECIAL_NONE, cx, &cs);
        if (status != MXU_OK)
            goto out;
        cs->stream_id = id;
        cs->have_id = have_id;
        status = mxu_locked_map_put(&mxa_cuda_g.map, (uint64_t)h, cs);
        if (status != MXU_OK)
            goto out; /* the record stays on mxa_cuda_g.streams (freed at finalize) */
        MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: new stream %p (device %d, %s)", handle, cx->dev_index,
                cx->memops ? "memops" : "kernel fallback");
    } else if (cs->ctx != cx || (have_id && cs->stream_id != id)) {
        /* Handle reuse. The record keeps its words and counters (they only
         * grow); points of the destroyed stream that were never reached
         * are lost with it. */
        MXU_LOG(MXU_LOG_INFO,
                "CUDA backend: stream handle %p now names a new stream "
                "(id %llu -> %llu): re-bound",
                handle, cs->stream_id, id);
        status = stream_bind(cs, cx);
        if (status != MXU_OK)
            goto out;
        cs->stream_id = id;
        cs->have_id = have_id;
    }
    *out = &cs->pub;
out:
    if (status == MXU_OK && cx != NULL)
        mxa_cuda_wait_until_warm(cx);
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    mxa_cuda_run_new_context_hook();
    return status;
}

/* ----------------------------------------------------------- launches */

CUresult mxa_cuda_launch(CUfunction f, unsigned grid, unsigned block, CUstream stream, int pdl,
                         void **kargs, void **extra)
{
    if (!pdl || MXA_CU(cuLaunchKernelEx) == NULL)
        return MXA_CU(cuLaunchKernel)(f, grid, 1, 1, block, 1, 1, 0, stream, kargs, extra);
    CUlaunchAttribute at;
    memset(&at, 0, sizeof(at));
    at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    at.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.hStream = stream;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    return MXA_CU(cuLaunchKernelEx)(&cfg, f, kargs, extra);
}

/* ------------------------------------------------------- stream points */

static mxu_status_t enqueue_point_(cuda_stream_t *cs, int is_wait, uint64_t seq);

/* a stream point (memop or its fallback kernel), timed for MPIX_ACC_STATS */
static mxu_status_t enqueue_point(cuda_stream_t *cs, int is_wait, uint64_t seq)
{
    uint64_t t = mxu_ct_inner_begin();
    mxu_status_t st = enqueue_point_(cs, is_wait, seq);
    mxu_ct_inner_end(MXU_CT_CU_MEMOP, t);
    return st;
}

static mxu_status_t enqueue_point_(cuda_stream_t *cs, int is_wait, uint64_t seq)
{
    cuda_ctx_t *cx = cs->ctx;
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM,
                 "CUDA backend: cannot make the context of stream %p "
                 "current",
                 cs->pub.handle);

    mxu_status_t status = MXU_OK;
    CUresult r = CUDA_SUCCESS;
    /* (no capture here: the engine refused the call first,
     * mxa_stream_refuse_capture) */
    int use_memops = cx->memops;

    if (use_memops) {
        if (is_wait)
            r = MXA_CU(cuStreamWaitValue64)(cs->cu, cs->rel_dptr, seq, cs->wait_flags);
        else
            r = MXA_CU(cuStreamWriteValue64)(cs->cu, cs->trig_dptr, seq,
                                             CU_STREAM_WRITE_VALUE_DEFAULT);
        if (r != CUDA_SUCCESS)
            goto fail;
    } else {
        if (!cx->kernels_ok) {
            ctx_leave(entered);
            MXU_FAIL(MXU_ERR_UNSUPPORTED,
                     "CUDA backend: stream %p needs the fallback kernels "
                     "(no stream memory operations), which are not available on device %d",
                     cs->pub.handle, cx->dev_index);
        }
        unsigned long long v = seq;
        if (is_wait) {
            void *args[] = {&cs->rel_dptr, &v};
            r = MXA_CU(cuLaunchKernel)(cx->fn_wait, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
        } else {
            void *args[] = {&cs->trig_dptr, &v};
            r = MXA_CU(cuLaunchKernel)(cx->fn_set, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
        }
        if (r != CUDA_SUCCESS)
            goto fail;
    }
    ctx_leave(entered);
    return status;

fail:
    ctx_leave(entered);
    if (cu_err_is_bad_handle(r))
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "CUDA backend: enqueue on stream %p failed: %s",
                 cs->pub.handle, cu_err(r));
    MXU_FAIL(MXU_ERR_NO_DEVICE, "CUDA backend: enqueue on stream %p failed: %s", cs->pub.handle,
             cu_err(r));
}

static mxu_status_t backend_enqueue_trigger(mxa_stream_t *s, uint64_t seq)
{
    return enqueue_point((cuda_stream_t *)s, 0, seq);
}

static mxu_status_t backend_enqueue_wait(mxa_stream_t *s, uint64_t seq)
{
    return enqueue_point((cuda_stream_t *)s, 1, seq);
}

/* The progress thread (the only caller of release/poll_trigger) hands the
 * operations of CUDA streams to UCX, whose CUDA transports need a current
 * context. The first time it touches a CUDA stream and has no context, it
 * gets that stream's context (mxa_cuda_bind_buffer would refine this per
 * buffer; it is not called at present). One thread-local test per call
 * afterwards. */
static _Thread_local int tl_ctx_checked;

static void progress_thread_context(cuda_stream_t *cs)
{
    tl_ctx_checked = 1;
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == NULL && cs->ctx != NULL &&
        !cs->ctx->stale)
        MXA_CU(cuCtxSetCurrent)(cs->ctx->ctx);
}

static void backend_release(mxa_stream_t *s, uint64_t seq)
{
    if (!tl_ctx_checked)
        progress_thread_context((cuda_stream_t *)s);
    mxa_store_max(s->release_word, seq);
}

static uint64_t backend_poll_trigger(mxa_stream_t *s)
{
    if (!tl_ctx_checked)
        progress_thread_context((cuda_stream_t *)s);
    return atomic_load_explicit(s->trigger_word, memory_order_acquire);
}

static int backend_capturing(mxa_stream_t *s)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    return stream_in_capture(cs->ctx->ctx, cs->cu);
}

/* Invalidate the capture s is in: synchronizing a capturing stream is one
 * of CUDA's invalid operations during capture, which invalidate the
 * capture graph (cuStreamEndCapture then returns an error and no graph). */
void mxa_cuda_stream_break_capture(mxa_stream_t *s)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    int entered = ctx_enter(cs->ctx->ctx);
    CUresult r = MXA_CU(cuStreamSynchronize)(cs->cu);
    ctx_leave(entered);
    MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: capture of stream %p invalidated (%s)", cs->pub.handle,
            cu_err(r));
}

void mxa_cuda_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg)
{
    if (fn == NULL)
        return;
    /* Snapshot under the lock, call without it (fn may look streams up).
     * Records are not freed before mxa_cuda_finalize(). */
    pthread_mutex_lock(&mxa_cuda_g.lock);
    size_t n = 0;
    for (cuda_stream_t *cs = mxa_cuda_g.streams; cs != NULL; cs = cs->next)
        n++;
    cuda_stream_t **v = n ? malloc(n * sizeof(*v)) : NULL;
    size_t i = 0;
    if (v != NULL)
        for (cuda_stream_t *cs = mxa_cuda_g.streams; cs != NULL; cs = cs->next)
            v[i++] = cs;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    if (n != 0 && v == NULL) {
        MXU_LOG(MXU_LOG_ERROR, "CUDA backend: out of memory listing streams");
        return;
    }
    for (i = 0; i < n; i++)
        fn(&v[i]->pub, arg);
    free(v);
}

const char *mxa_cuda_stream_pci_busid(mxa_stream_t *s)
{
    if (s == NULL || s->kind != MXA_KIND_CUDA || s->backend != &cuda_backend)
        return NULL;
    cuda_stream_t *cs = (cuda_stream_t *)s;
    if (cs->ctx == NULL || cs->ctx->dev_index < 0 || mxa_cuda_g.devs == NULL)
        return NULL;
    const char *b = mxa_cuda_g.devs[cs->ctx->dev_index].busid;
    return b[0] ? b : NULL;
}

/* ------------------------------------------------ scratch and copies */

mxu_status_t mxa_cuda_scratch_alloc(mxa_stream_t *s, mxa_memtype_t k, size_t bytes, void **out)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    const char *what = "cuMemAlloc";
    if (k == MXA_MEM_HOST) {
        what = "cuMemHostAlloc";
        void *hp = NULL;
        r = MXA_CU(cuMemHostAlloc)(&hp, bytes, CU_MEMHOSTALLOC_PORTABLE);
        *out = hp;
    } else {
        CUdeviceptr d = 0;
        if (k == MXA_MEM_MANAGED) {
            what = "cuMemAllocManaged";
            if (MXA_CU(cuMemAllocManaged))
                r = MXA_CU(cuMemAllocManaged)(&d, bytes, CU_MEM_ATTACH_GLOBAL);
        } else if (MXA_CU(cuMemAlloc)) {
            r = MXA_CU(cuMemAlloc)(&d, bytes);
        }
        *out = (void *)(uintptr_t)d;
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "%s(%zu) for stream %p failed: %s", what, bytes, cs->pub.handle,
                 cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_copy(mxa_stream_t *s, void *dst, const void *src, size_t bytes)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    if (MXA_CU(cuMemcpyAsync) == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "cuMemcpyAsync is not available in this driver");
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r = MXA_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                       bytes, cs->cu);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "stream-ordered copy of %zu bytes on stream %p failed: %s", bytes, cs->pub.handle,
                 cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_host_call(mxa_stream_t *s, void (*fn)(void *), void *arg)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    if (MXA_CU(cuLaunchHostFunc) == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "cuLaunchHostFunc is not available in this driver");
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r = MXA_CU(cuLaunchHostFunc)(cs->cu, (CUhostFn)fn, arg);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "host function on stream %p: %s", cs->pub.handle, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_synchronize(mxa_stream_t *s)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r = MXA_CU(cuStreamSynchronize)(cs->cu);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "synchronizing stream %p: %s", cs->pub.handle, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_reduce(mxa_stream_t *s, int kind, int op, void *out, const void *a,
                                    const void *b, size_t n)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    if (cx->fn_reduce == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "the reduction kernel is not loaded in stream %p's context",
                 cs->pub.handle);
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    /* a thread per element, 256 a block, at most 1024 blocks (grid-stride
     * beyond) */
    unsigned long long nn = n;
    unsigned threads = 256;
    unsigned long long want = (nn + threads - 1) / threads;
    unsigned blocks = want > 1024 ? 1024u : (unsigned)want;
    CUdeviceptr o = (CUdeviceptr)(uintptr_t)out, x = (CUdeviceptr)(uintptr_t)a,
                y = (CUdeviceptr)(uintptr_t)b;
    void *args[] = {&kind, &op, &o, &x, &y, &nn};
    CUresult r =
        MXA_CU(cuLaunchKernel)(cx->fn_reduce, blocks, 1, 1, threads, 1, 1, 0, cs->cu, args, NULL);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "reduction of %zu elements on stream %p: %s", n, cs->pub.handle, cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_stream_llreduce(mxa_stream_t *s, const mxa_llred_plan_t *plan, size_t words)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    if (cx->fn_llred == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED,
                 "the one-kernel Allreduce is not loaded in stream %p's context", cs->pub.handle);
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    /* one block, a thread per 4-byte word up to 1024 */
    unsigned threads = words >= 1024 ? 1024u : (unsigned)((words + 31) / 32 * 32);
    if (threads == 0)
        threads = 32;
    mxa_llred_plan_t pl = *plan;
    void *args[] = {&pl};
    CUresult r =
        MXA_CU(cuLaunchKernel)(cx->fn_llred, 1, 1, 1, threads, 1, 1, 0, cs->cu, args, NULL);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "one-kernel Allreduce on stream %p: %s", cs->pub.handle, cu_err(r));
    return MXU_OK;
}

void *mxa_cuda_stream_ctx(mxa_stream_t *s) { return ((cuda_stream_t *)s)->ctx->ctx; }

#else /* !MPIXACC_HAVE_CUDA */

/* ISO C forbids an empty translation unit. */
typedef int mxa_cuda_unused_t;

#endif
