/*
 * cuda_ctx.c - CUDA backend (cuda.c): device contexts.
 *
 * Contexts. Each context met gets a record: its device, the fallback kernels
 * loaded with cuModuleLoadData (eagerly, before the first stream point of
 * that context: a module loaded lazily behind a blocked stream can deadlock,
 * see doc/gpu-testing.md), and a self-test that runs each fallback kernel
 * and each stream memory operation once on a private stream (bounded by a
 * timeout) - a device whose memops fail the test uses the kernels. The
 * context current at mxa_cuda_init() is set up there. Every enqueue pushes
 * the stream's context when it is not current, so streams of several devices
 * in one process work.
 *
 * A context first met after mxa_cuda_init is set up under mxa_cuda_g.lock by
 * the looking-up thread, which then runs the engine's context hook
 * (mxa_cuda_run_new_context_hook, with mxa_cuda_g.lock released); other
 * threads wait until the context is warm (mxa_cuda_wait_until_warm).
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
#include <time.h>

#include "util/log.h"
#include "util/settings.h"
#include "util/waiter.h"

#define SELFTEST_NS (5ull * 1000000000ull)

/* ------------------------------------------------------------ contexts */

static mxu_status_t launch1(CUfunction f, CUstream st, void **args)
{
    CUresult r = MXA_CU(cuLaunchKernel)(f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
    if (r != CUDA_SUCCESS)
        return cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE;
    return MXU_OK;
}

/* Wait for a private stream with a deadline (a broken device-host path must
 * not hang MPI_Init). */
static int stream_done_within(CUstream st, uint64_t ns)
{
    uint64_t t0 = mxu_now_ns();
    for (;;) {
        CUresult r = MXA_CU(cuStreamQuery)(st);
        if (r == CUDA_SUCCESS)
            return 1;
        if (r != CUDA_ERROR_NOT_READY)
            return 0;
        if (mxu_now_ns() - t0 > ns)
            return 0;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Run every fallback kernel and every memop once on a private stream. The
 * context is current. Sets cx->kernels_ok and cx->memops. */
static void ctx_selftest(cuda_ctx_t *cx, int try_memops)
{
    /* Two private non-blocking streams: a kernel test that cannot run (a
     * GPU full of other work) must not hold up the memop test. */
    CUstream st = NULL, st2 = NULL;
    CUresult r = MXA_CU(cuStreamCreate)(&st, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
        r = MXA_CU(cuStreamCreate)(&st2, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        MXU_LOG(MXU_LOG_WARN, "CUDA backend: self-test stream: %s", cu_err(r));
        if (st != NULL)
            MXA_CU(cuStreamDestroy)(st);
        return;
    }
    int stuck = 0;
    if (cx->module != NULL) {
        atomic_store(cx->scratch, 0);
        CUdeviceptr d = cx->scratch_dptr;
        unsigned long long one = 1, two = 2;
        void *a_set[] = {&d, &one};
        void *a_wait[] = {&d, &one};
        void *a_ws[] = {&d, &one, &d, &two};
        mxu_status_t s1 = launch1(cx->fn_set, st, a_set);
        mxu_status_t s2 = s1 == MXU_OK ? launch1(cx->fn_wait, st, a_wait) : s1;
        mxu_status_t s3 = s2 == MXU_OK ? launch1(cx->fn_wait_set, st, a_ws) : s2;
        int done = s3 == MXU_OK && stream_done_within(st, SELFTEST_NS);
        uint64_t v = atomic_load(cx->scratch);
        cx->kernels_ok = done && v == 2;
        if (!cx->kernels_ok) {
            stuck = s3 == MXU_OK && !done;
            MXU_LOG(MXU_LOG_WARN,
                    "CUDA backend: fallback kernels failed their self-test on device %d "
                    "(launch %s, completed %d, word %llu, expected 2)",
                    cx->dev_index, s3 == MXU_OK ? "ok" : "failed", done, (unsigned long long)v);
        }
    }
    if (try_memops && MXA_CU(cuStreamWriteValue64) != NULL && MXA_CU(cuStreamWaitValue64) != NULL &&
        MXA_CU(cuStreamBatchMemOp) != NULL) {
        /* its own word (the release word of the scratch slot): a stuck
         * kernel test may still write the first one */
        _Atomic uint64_t *w = (_Atomic uint64_t *)((unsigned char *)cx->scratch + 64);
        atomic_store(w, 0);
        CUdeviceptr d = cx->scratch_dptr + 64;
        CUstreamBatchMemOpParams ops[2];
        memset(ops, 0, sizeof(ops));
        ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        ops[0].waitValue.address = d;
        ops[0].waitValue.value64 = 3;
        ops[0].waitValue.flags = wait_flags_for(cx->dev_index);
        ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        ops[1].writeValue.address = d;
        ops[1].writeValue.value64 = 4;
        ops[1].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        CUresult r1 = MXA_CU(cuStreamWriteValue64)(st2, d, 3, CU_STREAM_WRITE_VALUE_DEFAULT);
        CUresult r2 = r1 == CUDA_SUCCESS
                          ? MXA_CU(cuStreamWaitValue64)(st2, d, 3, wait_flags_for(cx->dev_index))
                          : r1;
        CUresult r3 = r2 == CUDA_SUCCESS ? MXA_CU(cuStreamBatchMemOp)(st2, 2, ops, 0) : r2;
        int done = r3 == CUDA_SUCCESS && stream_done_within(st2, SELFTEST_NS);
        uint64_t v = atomic_load(w);
        cx->memops = done && v == 4;
        if (!cx->memops) {
            stuck = stuck || (r3 == CUDA_SUCCESS && !done);
            MXU_LOG(MXU_LOG_WARN,
                    "CUDA backend: stream memory operations failed their self-test on "
                    "device %d (%s, completed %d, word %llu, expected 4): using the "
                    "kernel fallback",
                    cx->dev_index, r3 == CUDA_SUCCESS ? "enqueued" : cu_err(r3), done,
                    (unsigned long long)v);
        }
    }
    if (stuck) {
        /* Leave the stream (and its stuck work) alone: destroying is
         * deferred by the driver until the work ends, which it may not. */
        MXU_LOG(MXU_LOG_ERROR,
                "CUDA backend: self-test work did not finish within %llu s "
                "on device %d",
                (unsigned long long)(SELFTEST_NS / 1000000000ull), cx->dev_index);
    }
    MXA_CU(cuStreamDestroy)(st);
    MXA_CU(cuStreamDestroy)(st2);
}

/* UCX's cuda_copy module sets CU_CTX_SYNC_MEMOPS on a buffer's context
 * (cuCtxSetFlags, the context pushed) at every memory-type query that misses
 * its cache. The first set in a context waits until the context is idle;
 * made on the progress thread while a stream of that context waits at a
 * point only the progress thread can release, it deadlocks (seen on 2xH200:
 * multi_device, a second device's context; stacks in doc/gpu-testing.md).
 * So the flags UCX will set are set here, on the application thread, when
 * the library first meets the context (current here), before any of its
 * waits exists there; UCX's later sets change nothing and return at once.
 * Like UCX's, the set replaces the scheduling flags by CU_CTX_SCHED_AUTO. */
static void ctx_preset_sync_memops(int dev_index)
{
    unsigned flags = 0;
    if (MXA_CU(cuCtxGetFlags) == NULL || MXA_CU(cuCtxSetFlags) == NULL ||
        MXA_CU(cuCtxGetFlags)(&flags) != CUDA_SUCCESS)
        return;
    if ((flags & CU_CTX_SYNC_MEMOPS) && (flags & CU_CTX_SCHED_MASK) == 0)
        return;
    CUresult r = MXA_CU(cuCtxSetFlags)(CU_CTX_SYNC_MEMOPS);
    int sched_changed = (flags & CU_CTX_SCHED_MASK) != 0;
    MXU_LOG(r != CUDA_SUCCESS ? MXU_LOG_WARN
            : sched_changed   ? MXU_LOG_INFO
                              : MXU_LOG_DEBUG,
            "CUDA backend: context flags of device %d 0x%x -> CU_CTX_SYNC_MEMOPS "
            "(what UCX sets at its first memory query): %s",
            dev_index, flags, r == CUDA_SUCCESS ? "done" : cu_err(r));
}

/* The live record of context c, or NULL in *found; *id is c's cuCtxGetId
 * (0 when the driver lacks it). A record of a destroyed context whose
 * address c reuses is marked stale. mxa_cuda_g.lock held. */
static mxu_status_t ctx_find(CUcontext c, unsigned long long *id, cuda_ctx_t **found)
{
    *found = NULL;
    *id = 0;
    if (MXA_CU(cuCtxGetId) != NULL) {
        CUresult r = MXA_CU(cuCtxGetId)(c, id);
        if (r != CUDA_SUCCESS)
            return MXU_ERR_INVALID_STREAM;
    }
    for (cuda_ctx_t *cx = mxa_cuda_g.ctxs; cx != NULL; cx = cx->next) {
        if (cx->ctx != c || cx->stale)
            continue;
        if (*id == 0 || cx->ctx_id == *id) {
            *found = cx;
            return MXU_OK;
        }
        /* same address, new context: the old one was destroyed */
        cx->stale = 1;
    }
    return MXU_OK;
}

/* cx->dev_index: the device of the current context. */
static mxu_status_t ctx_find_device(cuda_ctx_t *cx)
{
    CUdevice dev;
    CUresult r = MXA_CU(cuCtxGetDevice)(&dev);
    if (r != CUDA_SUCCESS) {
        MXU_LOG(MXU_LOG_ERROR, "CUDA backend: cuCtxGetDevice failed: %s", cu_err(r));
        return MXU_ERR_NO_DEVICE;
    }
    for (int i = 0; i < mxa_cuda_g.ndev; i++)
        if (mxa_cuda_g.devs[i].dev == dev)
            cx->dev_index = i;
    if (cx->dev_index < 0) {
        MXU_LOG(MXU_LOG_ERROR, "CUDA backend: context on an unknown device %d", (int)dev);
        return MXU_ERR_NO_DEVICE;
    }
    return MXU_OK;
}

/* Load the fallback kernels into the current context; cx->module stays
 * NULL when they cannot be loaded (logged: the memops may still do). */
static void ctx_load_kernels(cuda_ctx_t *cx)
{
    CUresult r = MXA_CU(cuModuleLoadData)(&cx->module, mxa_cuda_fatbin);
    if (r == CUDA_SUCCESS) {
        CUresult r1 = MXA_CU(cuModuleGetFunction)(&cx->fn_set, cx->module, MXA_CUDA_KERNEL_SET);
        CUresult r2 = MXA_CU(cuModuleGetFunction)(&cx->fn_wait, cx->module, MXA_CUDA_KERNEL_WAIT);
        CUresult r3 =
            MXA_CU(cuModuleGetFunction)(&cx->fn_wait_set, cx->module, MXA_CUDA_KERNEL_WAIT_SET);
        if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS || r3 != CUDA_SUCCESS) {
            MXU_LOG(MXU_LOG_WARN, "CUDA backend: fallback kernels not found in the module: %s",
                    cu_err(r1 != CUDA_SUCCESS   ? r1
                           : r2 != CUDA_SUCCESS ? r2
                                                : r3));
            MXA_CU(cuModuleUnload)(cx->module);
            cx->module = NULL;
        } else {
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_sx_send, cx->module, MXA_CUDA_KERNEL_SX_SEND) !=
                    CUDA_SUCCESS ||
                MXA_CU(cuModuleGetFunction)(&cx->fn_sx_recv, cx->module, MXA_CUDA_KERNEL_SX_RECV) !=
                    CUDA_SUCCESS)
                cx->fn_sx_send = cx->fn_sx_recv = NULL;
            if (!cx->fn_sx_recv ||
                MXA_CU(cuModuleGetFunction)(&cx->fn_sx_recv1, cx->module,
                                            MXA_CUDA_KERNEL_SX_RECV1) != CUDA_SUCCESS)
                cx->fn_sx_recv1 = NULL;
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_part_recv, cx->module,
                                            MXA_CUDA_KERNEL_PART_RECV) != CUDA_SUCCESS ||
                MXA_CU(cuModuleGetFunction)(&cx->fn_part_send, cx->module,
                                            MXA_CUDA_KERNEL_PART_SEND) != CUDA_SUCCESS ||
                MXA_CU(cuModuleGetFunction)(&cx->fn_part_start, cx->module,
                                            MXA_CUDA_KERNEL_PART_START) != CUDA_SUCCESS)
                cx->fn_part_recv = cx->fn_part_send = cx->fn_part_start = NULL;
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_graph_fire, cx->module,
                                            MXA_CUDA_KERNEL_GRAPH_FIRE) != CUDA_SUCCESS ||
                MXA_CU(cuModuleGetFunction)(&cx->fn_graph_wait, cx->module,
                                            MXA_CUDA_KERNEL_GRAPH_WAIT) != CUDA_SUCCESS)
                cx->fn_graph_fire = cx->fn_graph_wait = NULL;
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_reduce, cx->module, MXA_CUDA_KERNEL_REDUCE) !=
                CUDA_SUCCESS)
                cx->fn_reduce = NULL;
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_llred, cx->module, MXA_CUDA_KERNEL_LLRED) !=
                CUDA_SUCCESS)
                cx->fn_llred = NULL;
            if (MXA_CU(cuModuleGetFunction)(&cx->fn_pack, cx->module, MXA_CUDA_KERNEL_PACK) !=
                CUDA_SUCCESS)
                cx->fn_pack = NULL;
            if (MXA_CU(cuFuncLoad) != NULL) {
                /* Load now even under CUDA_MODULE_LOADING=LAZY. */
                MXA_CU(cuFuncLoad)(cx->fn_set);
                MXA_CU(cuFuncLoad)(cx->fn_wait);
                MXA_CU(cuFuncLoad)(cx->fn_wait_set);
                if (cx->fn_sx_send) {
                    MXA_CU(cuFuncLoad)(cx->fn_sx_send);
                    MXA_CU(cuFuncLoad)(cx->fn_sx_recv);
                }
                if (cx->fn_sx_recv1)
                    MXA_CU(cuFuncLoad)(cx->fn_sx_recv1);
                if (cx->fn_part_recv) {
                    MXA_CU(cuFuncLoad)(cx->fn_part_recv);
                    MXA_CU(cuFuncLoad)(cx->fn_part_send);
                    MXA_CU(cuFuncLoad)(cx->fn_part_start);
                }
                if (cx->fn_graph_fire) {
                    MXA_CU(cuFuncLoad)(cx->fn_graph_fire);
                    MXA_CU(cuFuncLoad)(cx->fn_graph_wait);
                }
                if (cx->fn_reduce)
                    MXA_CU(cuFuncLoad)(cx->fn_reduce);
                if (cx->fn_llred)
                    MXA_CU(cuFuncLoad)(cx->fn_llred);
                if (cx->fn_pack)
                    MXA_CU(cuFuncLoad)(cx->fn_pack);
            }
            /* programmatic dependent launch of the send steps: sm_90 and up */
            int major = 0;
            cx->sx_pdl =
                cx->fn_sx_send != NULL && mxu_config.sx_pdl && MXA_CU(cuLaunchKernelEx) != NULL &&
                MXA_CU(cuDeviceGetAttribute)(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                             mxa_cuda_g.devs[cx->dev_index].dev) == CUDA_SUCCESS &&
                major >= 9;
        }
    } else {
        cx->module = NULL;
        MXU_LOG(MXU_LOG_WARN,
                "CUDA backend: cannot load the fallback kernels on device %d (%s): "
                "graph capture and MPIX_ACC_MEMOPS=0 will not work there",
                cx->dev_index, cu_err(r));
    }
}

/* Set up record cx of context c, which is current: its device, the
 * context flags, the self-test word, the fallback kernels, the self-test. */
static mxu_status_t ctx_setup(CUcontext c, cuda_ctx_t *cx)
{
    MXU_TRY(ctx_find_device(cx));
    ctx_preset_sync_memops(cx->dev_index);

    unsigned char *slot;
    MXU_TRY(mxa_cuda_slot_alloc(&slot));
    cx->scratch = (_Atomic uint64_t *)slot;
    MXU_TRY(mxa_cuda_host_to_dev(slot, &cx->scratch_dptr));

    ctx_load_kernels(cx);

    int try_memops = mxu_config.memops && mxa_cuda_g.devs[cx->dev_index].memops64;
    ctx_selftest(cx, try_memops);
    if (!cx->memops && !cx->kernels_ok) {
        MXU_LOG(MXU_LOG_ERROR,
                "CUDA backend: neither stream memory operations nor the "
                "fallback kernels work on device %d: its streams cannot be used",
                cx->dev_index);
        return MXU_ERR_NO_DEVICE;
    }
    MXU_LOG(MXU_LOG_INFO, "CUDA backend: context %p on device %d (%s, %s): %s%s", (void *)c,
            cx->dev_index, mxa_cuda_g.devs[cx->dev_index].name,
            mxa_cuda_g.devs[cx->dev_index].busid,
            cx->memops ? "stream memory operations" : "kernel fallback",
            cx->kernels_ok ? "" : " (no fallback kernels)");
    return MXU_OK;
}

/* Find or create the record of context c (mxa_cuda_g.lock held). */
mxu_status_t mxa_cuda_ctx_get(CUcontext c, cuda_ctx_t **out)
{
    unsigned long long id;
    cuda_ctx_t *found;
    MXU_TRY(ctx_find(c, &id, &found));
    if (found != NULL) {
        *out = found;
        return MXU_OK;
    }

    cuda_ctx_t *cx = calloc(1, sizeof(*cx));
    if (cx == NULL)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "CUDA backend: out of memory");
    cx->ctx = c;
    cx->ctx_id = id;
    cx->dev_index = -1;

    int entered = ctx_enter(c);
    if (entered < 0) {
        free(cx);
        MXU_FAIL(MXU_ERR_NO_DEVICE, "CUDA backend: cannot make a stream's context current");
    }
    mxu_status_t status = ctx_setup(c, cx);
    ctx_leave(entered);
    if (status != MXU_OK) {
        /* A module whose self-test failed stays loaded (a stuck self-test
         * kernel may still run it); cx->scratch stays in its slab; the
         * record is kept as stale so a retry re-runs the set-up on a fresh
         * record. */
        cx->stale = 1;
        cx->next = mxa_cuda_g.ctxs;
        mxa_cuda_g.ctxs = cx;
        return status;
    }
    cx->next = mxa_cuda_g.ctxs;
    mxa_cuda_g.ctxs = cx;
    mxa_cuda_tl_new_ctx = cx;
    CUcontext none = NULL;
    atomic_compare_exchange_strong(&mxa_cuda_g_first_ctx, &none, c);
    *out = cx;
    return MXU_OK;
}

/* After mxa_cuda_g.lock is released: the engine's hook for a context this thread
 * just set up; the context is warm afterwards. */
void mxa_cuda_run_new_context_hook(void)
{
    cuda_ctx_t *cx = mxa_cuda_tl_new_ctx;
    if (cx != NULL) {
        mxa_cuda_tl_new_ctx = NULL;
        mxa_run_context_hook(cx->ctx);
        pthread_mutex_lock(&mxa_cuda_g.lock);
        atomic_store(&cx->warm, 1);
        pthread_cond_broadcast(&mxa_cuda_g.warm_cv);
        pthread_mutex_unlock(&mxa_cuda_g.lock);
    }
}

/* mxa_cuda_g.lock held: another thread set up cx and runs the hook for it; no stream
 * point of cx may be enqueued before it is done (its warm-up would wait
 * for that point, behind the progress thread). */
void mxa_cuda_wait_until_warm(cuda_ctx_t *cx)
{
    while (!atomic_load(&cx->warm) && mxa_cuda_tl_new_ctx != cx)
        pthread_cond_wait(&mxa_cuda_g.warm_cv, &mxa_cuda_g.lock);
}

int mxa_cuda_ctx_push(void *ctx)
{
    return ctx != NULL && MXA_CU(cuCtxPushCurrent)((CUcontext)ctx) == CUDA_SUCCESS ? 0 : -1;
}

void mxa_cuda_ctx_pop(void)
{
    CUcontext prev;
    MXA_CU(cuCtxPopCurrent)(&prev);
}

void mxa_cuda_thread_relax_capture(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (MXA_CU(cuThreadExchangeStreamCaptureMode) != NULL)
        MXA_CU(cuThreadExchangeStreamCaptureMode)(&mode);
}

#else /* !MPIXACC_HAVE_CUDA */

/* ISO C forbids an empty translation unit. */
typedef int mxa_cuda_unused_t;

#endif
