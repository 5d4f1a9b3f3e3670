/*
 * cuda_pack.c - CUDA backend (cuda.c): device pack/unpack of non-contiguous
 * datatypes (mxa_pack_kernel, pack_proto.h) on a stream or on a context's
 * library stream, and the device memory for packed messages: blocks of
 * cuMemAlloc memory in power-of-two size classes, each with a host-visible
 * word (a receive's length for the unpack kernel), kept for reuse and never
 * freed (freeing waits for the device). A block given back "in the order
 * of stream s" (its last use is enqueued on s) is handed out again only
 * to work enqueued later on s -- stream order keeps the uses apart --
 * and one given back with no stream to anyone.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "util/log.h"
#include "util/waiter.h"

typedef struct temp_block {
    struct temp_block *next;
    CUcontext ctx;
    const void *owner; /* the stream whose order frees it, NULL: free */
    size_t bytes;
    int host; /* pinned host memory (cuMemHostAlloc, device-mapped) */
    CUdeviceptr p;
    uint64_t *word; /* a host-visible word that goes with the block */
} temp_block_t;

static pthread_mutex_t temp_lock = PTHREAD_MUTEX_INITIALIZER;
static temp_block_t *temp_free;

/* a free block of the size class of bytes, one given back in the order of
 * stream, or (alloc) a new one */
static mxu_status_t temp_get(void *ctx, const void *stream, size_t bytes, int host, int alloc,
                             void **p, size_t *got, uint64_t **word)
{
    size_t want = 256;
    while (want < bytes)
        want *= 2;
    pthread_mutex_lock(&temp_lock);
    for (temp_block_t **pp = &temp_free; *pp; pp = &(*pp)->next) {
        temp_block_t *b = *pp;
        if (b->ctx == (CUcontext)ctx && b->bytes == want && b->host == host &&
            (b->owner == NULL || b->owner == stream)) {
            *pp = b->next;
            pthread_mutex_unlock(&temp_lock);
            *p = (void *)(uintptr_t)b->p;
            *got = b->bytes;
            *word = b->word;
            free(b);
            return MXU_OK;
        }
    }
    pthread_mutex_unlock(&temp_lock);
    if (!alloc)
        return MXU_ERR_BUSY;
    uint64_t *w = mxa_host_word_get();
    if (!w)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "packed message: no host-visible word");
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "packed message: cannot enter the buffer's context");
    CUdeviceptr d = 0;
    CUresult r;
    if (host) { /* unified addressing: the host address is the kernels' too */
        void *h = NULL;
        r = MXA_CU(cuMemHostAlloc)(&h, want, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        d = (CUdeviceptr)(uintptr_t)h;
    } else {
        /* a device word after the bytes (p + want): a receive step writes
         * the received length there for the unpack behind it */
        r = MXA_CU(cuMemAlloc) ? MXA_CU(cuMemAlloc)(&d, want + 64) : CUDA_ERROR_NOT_SUPPORTED;
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS) {
        mxa_host_word_put(w);
        MXU_FAIL(MXU_ERR_NO_MEMORY, "packed message: %s(%zu): %s",
                 host ? "cuMemHostAlloc" : "cuMemAlloc", want, cu_err(r));
    }
    *p = (void *)(uintptr_t)d;
    *got = want;
    *word = w;
    return MXU_OK;
}

mxu_status_t mxa_cuda_temp_get(void *ctx, const void *stream, size_t bytes, int host, void **p,
                               size_t *got, uint64_t **word)
{
    return temp_get(ctx, stream, bytes, host, 1, p, got, word);
}

mxu_status_t mxa_cuda_temp_take(void *ctx, const void *stream, size_t bytes, int host, void **p,
                                size_t *got, uint64_t **word)
{
    return temp_get(ctx, stream, bytes, host, 0, p, got, word);
}

void mxa_cuda_temp_put(void *ctx, void *p, size_t got, int host, uint64_t *word, const void *stream)
{
    temp_block_t *b = malloc(sizeof(*b));
    if (!b)
        return; /* lost, never freed under a running kernel */
    *b = (temp_block_t){.ctx = (CUcontext)ctx,
                        .owner = stream,
                        .bytes = got,
                        .host = host,
                        .p = (CUdeviceptr)(uintptr_t)p,
                        .word = word};
    pthread_mutex_lock(&temp_lock);
    b->next = temp_free;
    temp_free = b;
    pthread_mutex_unlock(&temp_lock);
}

static void pack_grid(const mxa_pack_args_t *a, unsigned *blocks, unsigned *threads)
{
    uint64_t warps = a->count * a->nchunks;
    *threads = warps >= 8 ? 256u : (unsigned)(warps ? warps : 1) * 32u;
    uint64_t b = (warps * 32 + *threads - 1) / *threads;
    *blocks = b > 1024 ? 1024u : b ? (unsigned)b : 1u;
}

/* The device word the unpack kernels of cs read their limit from (made
 * once per stream and context, never freed: scratch). */
static mxu_status_t stream_limit_word(cuda_stream_t *cs, CUdeviceptr *out)
{
    mxu_status_t st = MXU_OK;
    pthread_mutex_lock(&mxa_cuda_g.lock);
    if (cs->limit_dptr == 0 || cs->limit_ctx != cs->ctx) {
        uint64_t p = 0;
        st = mxa_cuda_sx_scratch_alloc(cs->ctx->ctx, sizeof(uint64_t), &p);
        if (st == MXU_OK) {
            cs->limit_dptr = (CUdeviceptr)p;
            cs->limit_ctx = cs->ctx;
        }
    }
    *out = cs->limit_dptr;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    return st;
}

mxu_status_t mxa_cuda_stream_pack(mxa_stream_t *s, const mxa_pack_args_t *args, int captured,
                                  void *limit_word_of)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    if (cx->fn_pack == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "the pack kernel is not loaded in stream %p's context",
                 cs->pub.handle);
    unsigned blocks, threads;
    pack_grid(args, &blocks, &threads);
    mxa_pack_args_t a = *args;
    CUdeviceptr limit_word = 0;
    /* a warp or two read the host word themselves (the copy would cost
     * more than their reads); the caller's own word is used whatever the
     * size (a graph's unpack: launched on any stream, and no allocation
     * while the stream is captured) */
    if (a.unpack && a.limit_at && !a.limit_dev && MXA_CU(cuMemcpyHtoDAsync) != NULL) {
        if (limit_word_of)
            limit_word = (CUdeviceptr)(uintptr_t)limit_word_of;
        else if ((uint64_t)blocks * threads > 64)
            MXU_TRY(stream_limit_word(cs, &limit_word));
    }
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current",
                 cs->pub.handle);
    CUresult r = CUDA_SUCCESS;
    if (limit_word) {
        /* The receive's length is a host-visible word that the progress
         * thread writes at completion. Every warp of the kernel reading it
         * from host memory cost ~2 us per warp, serialized (8 ms for the
         * 4096 chunks of a column type on 2 x H100, 92adb84): the stream
         * copies it into device memory first, once. */
        r = MXA_CU(cuMemcpyHtoDAsync)(limit_word, (const void *)(uintptr_t)a.limit_at,
                                      sizeof(uint64_t), cs->cu);
        a.limit_at = (uint64_t)limit_word;
    }
    void *kargs[] = {&a};
    /* programmatic dependent launch as the SX steps: the launch overlaps
     * the kernel ahead -- a receive step lets its dependents start at
     * once -- and the kernel waits for it; not into a graph being captured
     * (a plain kernel node there) */
    if (r == CUDA_SUCCESS)
        r = mxa_cuda_launch(cx->fn_pack, blocks, threads, cs->cu, captured ? 0 : cx->sx_pdl, kargs,
                            NULL);
    ctx_leave(entered);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "%s of a non-contiguous datatype on stream %p: %s",
                 args->unpack ? "unpack" : "pack", cs->pub.handle, cu_err(r));
    return MXU_OK;
}

/* A pack or unpack on ctx's library stream that the caller does not wait
 * for: an event recorded behind it tells when it is done. */
struct mxa_dev_job {
    CUcontext ctx;
    CUevent done;
    int unpack;
};

mxu_status_t mxa_cuda_pack_start(void *ctx, const mxa_pack_args_t *args, mxa_dev_job_t **job)
{
    *job = NULL;
    cuda_ctx_t *cx = mxa_cuda_ctx_record((CUcontext)ctx);
    if (cx == NULL || cx->fn_pack == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "no pack kernel in the buffer's context");
    if (!MXA_CU(cuEventCreate) || !MXA_CU(cuEventRecord) || !MXA_CU(cuEventQuery) ||
        !MXA_CU(cuEventDestroy))
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "the CUDA driver has no events");
    mxa_dev_job_t *j = calloc(1, sizeof(*j));
    if (!j)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "a packed message's job record");
    int entered = ctx_enter((CUcontext)ctx);
    if (entered < 0) {
        free(j);
        MXU_FAIL(MXU_ERR_NO_DEVICE, "packed message: cannot enter the buffer's context");
    }
    CUstream st = mxa_cuda_lib_stream((CUcontext)ctx);
    unsigned blocks, threads;
    pack_grid(args, &blocks, &threads);
    mxa_pack_args_t a = *args;
    void *kargs[] = {&a};
    CUresult r =
        st ? MXA_CU(cuEventCreate)(&j->done, CU_EVENT_DISABLE_TIMING) : CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        r = MXA_CU(cuLaunchKernel)(cx->fn_pack, blocks, 1, 1, threads, 1, 1, 0, st, kargs, NULL);
        if (r == CUDA_SUCCESS)
            r = MXA_CU(cuEventRecord)(j->done, st);
        if (r != CUDA_SUCCESS)
            MXA_CU(cuEventDestroy)(j->done);
    }
    ctx_leave(entered);
    if (r != CUDA_SUCCESS) {
        free(j);
        MXU_FAIL(MXU_ERR_NO_DEVICE, "%s of a non-contiguous datatype: %s",
                 args->unpack ? "unpack" : "pack", cu_err(r));
    }
    j->ctx = (CUcontext)ctx;
    j->unpack = (int)args->unpack;
    *job = j;
    return MXU_OK;
}

mxu_status_t mxa_cuda_job_done(mxa_dev_job_t *j, int block)
{
    int entered = ctx_enter(j->ctx);
    if (entered < 0 && block) /* the job is left as it is: its kernel may still run */
        MXU_FAIL(MXU_ERR_TIMED_OUT, "cannot enter the context of a non-contiguous datatype's %s",
                 j->unpack ? "unpack" : "pack");
    if (entered < 0)
        return MXU_ERR_BUSY; /* asked again at the next pass */
    uint64_t t0 = block ? mxu_now_ns() : 0, nap = 1000;
    CUresult r;
    for (;;) {
        r = MXA_CU(cuEventQuery)(j->done);
        if (r != CUDA_ERROR_NOT_READY || !block)
            break;
        if (mxu_now_ns() - t0 > 10000000000ull) { /* finalize: give up, loudly */
            ctx_leave(entered);
            MXU_FAIL(MXU_ERR_TIMED_OUT,
                     "the %s of a non-contiguous datatype on the library stream did not finish "
                     "in 10 s; its buffer may not be written",
                     j->unpack ? "unpack" : "pack");
        }
        struct timespec ts = {0, (long)nap};
        nanosleep(&ts, NULL);
        nap = nap < 1000000 ? nap * 2 : nap;
    }
    if (r == CUDA_ERROR_NOT_READY) {
        ctx_leave(entered);
        return MXU_ERR_BUSY;
    }
    MXA_CU(cuEventDestroy)(j->done);
    ctx_leave(entered);
    int unpack = j->unpack;
    free(j);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "%s of a non-contiguous datatype: %s",
                 unpack ? "unpack" : "pack", cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_dev_upload(void *ctx, const void *host, size_t bytes, void **dptr)
{
    uint64_t p = 0;
    MXU_TRY(mxa_cuda_sx_scratch_alloc(ctx, bytes ? bytes : 8, &p));
    mxu_status_t st = mxa_cuda_part_dev_write(ctx, (void *)(uintptr_t)p, host, bytes);
    if (st != MXU_OK)
        return st; /* the block is lost, as scratch is never freed */
    *dptr = (void *)(uintptr_t)p;
    return MXU_OK;
}

#else /* !MPIXACC_HAVE_CUDA */

typedef int mxa_cuda_pack_unused_t;

#endif
