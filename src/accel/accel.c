/*
 * accel.c - layer-wide entry points of the accelerator layer and the "none"
 * backend (see accel.h).
 *
 * Stream lookup order (never dereferences a pointer it does not know):
 *   1. NULL handle       -> the CUDA legacy stream when CUDA is active,
 *                           else the "none" stream
 *   2. registered host stream (pointer looked up in host.c's registry)
 *   3. CUDA active       -> mxa_cuda_stream_lookup (validates the handle)
 *   4. otherwise         -> MXU_ERR_INVALID_STREAM
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "accel/accel.h"
#include "accel/seq_word.h"
#include "accel/cuda.h"
#include "accel/sx.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "util/settings.h"
#include "util/log.h"

/* ---- the "none" backend: no stream, everything happens at once ---- */

static mxu_status_t none_enqueue_trigger(mxa_stream_t *s, uint64_t seq)
{
    /* The stream "reaches" the trigger immediately. */
    mxa_store_max(s->trigger_word, seq);
    return MXU_OK;
}

static mxu_status_t none_enqueue_wait(mxa_stream_t *s, uint64_t seq)
{
    (void)s;
    (void)seq;
    /* Nothing can be held back on "no stream": the engine waits on the host. */
    return MXU_ERR_UNSUPPORTED;
}

static void none_release(mxa_stream_t *s, uint64_t seq) { mxa_store_max(s->release_word, seq); }

static uint64_t none_poll_trigger(mxa_stream_t *s)
{
    return atomic_load_explicit(s->trigger_word, memory_order_acquire);
}

static const mxa_backend_t none_backend = {
    .name = "none",
    .kind = MXA_KIND_NONE,
    .enqueue_trigger = none_enqueue_trigger,
    .enqueue_wait = none_enqueue_wait,
    .release = none_release,
    .poll_trigger = none_poll_trigger,
    .needs_polling = 0,
};

static _Atomic uint64_t none_trigger_word;
static _Atomic uint64_t none_release_word;

static mxa_stream_t none_stream = {
    .kind = MXA_KIND_NONE,
    .backend = &none_backend,
    .handle = NULL,
    .trigger_word = &none_trigger_word,
    .release_word = &none_release_word,
};

mxa_stream_t *mxa_none_stream(void) { return &none_stream; }

/* ---- layer state ---- */

static pthread_mutex_t accel_lock = PTHREAD_MUTEX_INITIALIZER;
static int accel_initialized;
static _Atomic int cuda_on; /* CUDA backend initialised and active */
static int cuda_tried;      /* mxa_cuda_init() was called */
static _Atomic(mxa_trigger_notify_fn) trigger_notify;

mxu_status_t mxa_init(void)
{
    pthread_mutex_lock(&accel_lock);
    if (accel_initialized) {
        pthread_mutex_unlock(&accel_lock);
        return MXU_OK;
    }
    /* The host layer needs no set-up (its registry is statically
     * initialised); host streams may even exist before mxa_init(). */
#ifdef MPIXACC_HAVE_CUDA
    if (mxu_config.cuda) {
        cuda_tried = 1;
        mxu_status_t st = mxa_cuda_init();
        if (st == MXU_OK && mxa_cuda_active()) {
            atomic_store(&cuda_on, 1);
            MXU_LOG(MXU_LOG_INFO, "CUDA backend active");
        } else if (st == MXU_OK || st == MXU_ERR_NO_DEVICE) {
            MXU_LOG(MXU_LOG_INFO, "CUDA backend off: no CUDA driver or device");
        } else {
            MXU_LOG(MXU_LOG_WARN, "CUDA backend off: initialisation failed (%s)",
                    mxu_status_string(st));
        }
    } else {
        MXU_LOG(MXU_LOG_INFO, "CUDA backend off: disabled by MPIX_ACC_CUDA=0");
    }
#endif
    accel_initialized = 1;
    pthread_mutex_unlock(&accel_lock);
    return MXU_OK;
}

/* ------------------------------------------------ stream scratch */

typedef struct scratch {
    struct scratch *next;
    mxa_stream_t *stream; /* NULL: outgrown, kept until finalize */
    mxa_memtype_t kind;
    int heap; /* malloc'd (host streams): freed at finalize */
    void *ptr;
    size_t bytes;
} scratch_t;

static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static scratch_t *scratch_list;

static void scratch_release_all(void)
{
    pthread_mutex_lock(&scratch_lock);
    while (scratch_list) {
        scratch_t *e = scratch_list;
        scratch_list = e->next;
        if (e->heap)
            free(e->ptr);
        free(e);
    }
    pthread_mutex_unlock(&scratch_lock);
}

void *mxa_stream_scratch(mxa_stream_t *s, mxa_memtype_t k, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    pthread_mutex_lock(&scratch_lock);
    scratch_t *e = scratch_list;
    while (e && !(e->stream == s && e->kind == k))
        e = e->next;
    if (e && e->bytes >= bytes) {
        void *p = e->ptr;
        pthread_mutex_unlock(&scratch_lock);
        return p;
    }
    if (s->kind == MXA_KIND_CUDA && mxa_stream_capturing(s)) {
        /* allocating while a stream is captured (CUDA's global mode)
         * would invalidate the capture */
        pthread_mutex_unlock(&scratch_lock);
        MXU_LOG(MXU_LOG_ERROR,
                "stream %p is being captured: its scratch (%zu bytes) must exist before the "
                "capture (make the same call once before capturing)",
                s->handle, bytes);
        return NULL;
    }
    if (e)
        e->stream = NULL; /* outgrown: kept, an earlier call may still use it */
    size_t want = 4096;
    while (want < bytes && want <= SIZE_MAX / 2)
        want *= 2;
    if (want < bytes)
        want = bytes;
    scratch_t *n = calloc(1, sizeof(*n));
    void *p = NULL;
    mxu_status_t st = MXU_ERR_NO_MEMORY;
    if (n && (s->kind != MXA_KIND_CUDA)) {
        p = malloc(want); /* host and "none" streams reach host memory only */
        st = p ? MXU_OK : MXU_ERR_NO_MEMORY;
        n->heap = 1;
    }
#ifdef MPIXACC_HAVE_CUDA
    else if (n)
        st = mxa_cuda_scratch_alloc(s, k, want, &p);
#endif
    if (st != MXU_OK || !p) {
        free(n);
        pthread_mutex_unlock(&scratch_lock);
        MXU_LOG(MXU_LOG_ERROR, "no scratch memory (%zu bytes) for stream %p", want, s->handle);
        return NULL;
    }
    n->stream = s;
    n->kind = k;
    n->ptr = p;
    n->bytes = want;
    n->next = scratch_list;
    scratch_list = n;
    pthread_mutex_unlock(&scratch_lock);
    return p;
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} host_copy_t;

static void host_copy_fn(void *arg)
{
    host_copy_t *c = arg;
    memcpy(c->dst, c->src, c->bytes);
    free(c);
}

mxu_status_t mxa_stream_copy(mxa_stream_t *s, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src)
        return MXU_OK;
    switch (s->kind) {
    case MXA_KIND_NONE:
        memcpy(dst, src, bytes);
        return MXU_OK;
    case MXA_KIND_HOST: {
        host_copy_t *c = malloc(sizeof(*c));
        if (!c)
            MXU_FAIL(MXU_ERR_NO_MEMORY, "out of memory for a stream-ordered copy");
        *c = (host_copy_t){dst, src, bytes};
        mxu_status_t st = mxa_host_stream_launch(s->handle, host_copy_fn, c);
        if (st != MXU_OK)
            free(c);
        return st;
    }
    case MXA_KIND_CUDA:
#ifdef MPIXACC_HAVE_CUDA
        return mxa_cuda_stream_copy(s, dst, src, bytes);
#endif
    default:
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "no stream-ordered copy for this stream kind");
    }
}

mxu_status_t mxa_stream_host_call(mxa_stream_t *s, void (*fn)(void *), void *arg)
{
    switch (s->kind) {
    case MXA_KIND_NONE:
        fn(arg);
        return MXU_OK;
    case MXA_KIND_HOST:
        return mxa_host_stream_launch(s->handle, fn, arg);
    case MXA_KIND_CUDA:
#ifdef MPIXACC_HAVE_CUDA
        return mxa_cuda_stream_host_call(s, fn, arg);
#endif
    default:
        return MXU_ERR_UNSUPPORTED;
    }
}

mxu_status_t mxa_stream_synchronize(mxa_stream_t *s)
{
    switch (s->kind) {
    case MXA_KIND_NONE:
        return MXU_OK;
    case MXA_KIND_HOST:
        return mxa_host_stream_synchronize(s->handle);
    case MXA_KIND_CUDA:
#ifdef MPIXACC_HAVE_CUDA
        return mxa_cuda_stream_synchronize(s);
#endif
    default:
        return MXU_ERR_UNSUPPORTED;
    }
}

/* ------------------------------------------------- one-kernel Allreduce */

mxu_status_t mxa_stream_llreduce(mxa_stream_t *s, const mxa_llred_plan_t *plan)
{
    if (plan->n == 0)
        return MXU_OK;
    size_t esize = mxa_red_esize((mxa_red_kind_t)plan->kind);
    size_t bytes = (size_t)plan->n * esize;
    if (esize == 0 || bytes > MXA_LLRED_MAX_BYTES || plan->nrounds > MXA_LLRED_MAX_ROUNDS)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "one-kernel Allreduce: %zu bytes, %d rounds", bytes,
                 plan->nrounds);
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_stream_llreduce(s, plan, (bytes + 3) / 4);
#endif
    return MXU_ERR_UNSUPPORTED;
}

void *mxa_stream_device_ctx(mxa_stream_t *s)
{
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_stream_ctx(s);
#endif
    (void)s;
    return NULL;
}

/* ------------------------------------------------- pack/unpack */

mxu_status_t mxa_dev_temp_get(void *ctx, const mxa_stream_t *stream, size_t bytes, int host,
                              void **p, size_t *got, uint64_t **word)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_temp_get(ctx, stream, bytes, host, p, got, word);
#endif
    (void)ctx, (void)stream, (void)bytes, (void)host, (void)p, (void)got, (void)word;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_dev_temp_take(void *ctx, const mxa_stream_t *stream, size_t bytes, int host,
                               void **p, size_t *got, uint64_t **word)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_temp_take(ctx, stream, bytes, host, p, got, word);
#endif
    (void)ctx, (void)stream, (void)bytes, (void)host, (void)p, (void)got, (void)word;
    return MXU_ERR_UNSUPPORTED;
}

void mxa_dev_temp_put(void *ctx, void *p, size_t got, int host, uint64_t *word,
                      const mxa_stream_t *stream)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        mxa_cuda_temp_put(ctx, p, got, host, word, stream);
#endif
    (void)ctx, (void)p, (void)got, (void)host, (void)word, (void)stream;
}

mxu_status_t mxa_dev_upload(void *ctx, const void *host, size_t bytes, void **dptr)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_dev_upload(ctx, host, bytes, dptr);
#endif
    (void)ctx, (void)host, (void)bytes, (void)dptr;
    return MXU_ERR_UNSUPPORTED;
}

int mxa_stream_capturing(mxa_stream_t *s)
{
    return s && s->backend && s->backend->capturing && s->backend->capturing(s);
}

mxu_status_t mxa_stream_refuse_capture(mxa_stream_t *s, const char *what)
{
    if (!mxa_stream_capturing(s))
        return MXU_OK;
    if (s->kind == MXA_KIND_HOST) {
        char why[200];
        snprintf(why, sizeof(why), "%s cannot be captured into a host graph", what);
        mxa_host_capture_break(s, why);
        MXU_FAIL(MXU_ERR_CAPTURED,
                 "%s on host stream %p, which is being captured into a graph: only launches, "
                 "sends and receives, stream waits on their requests and the blocking "
                 "stream-ordered collectives can be; the capture is broken (its end fails). "
                 "Enqueue it outside the capture.",
                 what, s->handle);
    }
    if (s->kind != MXA_KIND_CUDA)
        return MXU_OK;
#ifdef MPIXACC_HAVE_CUDA
    mxa_cuda_stream_break_capture(s);
#endif
    MXU_FAIL(MXU_ERR_CAPTURED,
             "%s on CUDA stream %p, which is being captured into a graph: of stream-ordered "
             "communication only sends and receives (non-contiguous datatypes: of device "
             "buffers, set up by the same call before the capture) with stream waits on their "
             "requests, the blocking collectives whose scratch exists, and partitioned "
             "requests on the direct protocol (their MPIX_Acc_Start and stream waits) can be "
             "captured; the capture is invalidated. Enqueue it outside the capture.",
             what, s->handle);
}

static mxu_status_t stream_pack(mxa_stream_t *s, const mxa_pack_args_t *args, int captured,
                                void *limit_word)
{
    if (args->count == 0 || args->nchunks == 0)
        return MXU_OK;
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_stream_pack(s, args, captured, limit_word);
#endif
    (void)s, (void)captured, (void)limit_word;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_stream_pack(mxa_stream_t *s, const mxa_pack_args_t *args)
{
    return stream_pack(s, args, 0, NULL);
}

mxu_status_t mxa_stream_pack_captured(mxa_stream_t *s, const mxa_pack_args_t *args,
                                      void *limit_word)
{
    return stream_pack(s, args, 1, limit_word);
}

mxu_status_t mxa_dev_pack_start(void *ctx, const mxa_pack_args_t *args, mxa_dev_job_t **job)
{
    *job = NULL;
    if (args->count == 0 || args->nchunks == 0)
        return MXU_OK;
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_pack_start(ctx, args, job);
#endif
    (void)ctx;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_dev_job_done(mxa_dev_job_t *job, int block)
{
#ifdef MPIXACC_HAVE_CUDA
    return mxa_cuda_job_done(job, block);
#else
    (void)job, (void)block;
    return MXU_ERR_UNSUPPORTED;
#endif
}

/* host-visible words: slabs of 512, a free list through the words */
static pthread_mutex_t word_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *word_free;

uint64_t *mxa_host_word_get(void)
{
    pthread_mutex_lock(&word_lock);
    if (!word_free) {
        uint64_t *slab = mxa_part_host_alloc(512 * 64); /* a word per 64-byte line */
        for (int i = 0; slab && i < 512; i++) {
            uint64_t *w = slab + (size_t)i * 8;
            *(uint64_t **)w = word_free;
            word_free = w;
        }
    }
    uint64_t *w = word_free;
    if (w)
        word_free = *(uint64_t **)w;
    pthread_mutex_unlock(&word_lock);
    if (w)
        __atomic_store_n(w, 0, __ATOMIC_RELAXED);
    return w;
}

void mxa_host_word_put(uint64_t *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&word_lock);
    *(uint64_t **)w = word_free;
    word_free = w;
    pthread_mutex_unlock(&word_lock);
}

/* ------------------------------------------------- partitioned requests */

void *mxa_part_host_alloc(size_t bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_sx_host_alloc(bytes);
#endif
    return calloc(1, bytes ? bytes : 1);
}

void mxa_part_host_free(void *p)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire)) {
        mxa_cuda_sx_host_free(p);
        return;
    }
#endif
    free(p);
}

mxu_status_t mxa_part_dev_alloc(const void *buf, size_t bytes, void **dptr, void **ctx)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_part_dev_alloc(buf, bytes, dptr, ctx);
#endif
    (void)buf;
    (void)bytes;
    *dptr = NULL;
    *ctx = NULL;
    return MXU_ERR_UNSUPPORTED;
}

void mxa_part_dev_free(void *ctx, void *dptr, size_t bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (dptr && atomic_load_explicit(&cuda_on, memory_order_acquire))
        mxa_cuda_part_dev_free(ctx, dptr, bytes);
#endif
    (void)ctx;
    (void)dptr;
    (void)bytes;
}

mxu_status_t mxa_part_dev_write(void *ctx, void *dptr, const void *src, size_t bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_part_dev_write(ctx, dptr, src, bytes);
#endif
    (void)ctx;
    (void)dptr;
    (void)src;
    (void)bytes;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_part_slots_alloc(void *ctx, size_t *bytes, void **dptr, int *fd)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire)) {
        uint64_t base = 0;
        mxu_status_t st = mxa_cuda_sx_dring_alloc(ctx, bytes, &base, fd);
        *dptr = (void *)(uintptr_t)base;
        return st;
    }
#endif
    (void)ctx;
    (void)bytes;
    (void)fd;
    *dptr = NULL;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_part_slots_import(void *ctx, int fd, size_t bytes, void **dptr)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire)) {
        uint64_t base = 0;
        mxu_status_t st = mxa_cuda_sx_dring_import(ctx, fd, bytes, &base);
        *dptr = (void *)(uintptr_t)base;
        return st;
    }
#endif
    (void)ctx;
    (void)fd;
    (void)bytes;
    *dptr = NULL;
    return MXU_ERR_UNSUPPORTED;
}

void mxa_part_slots_free(void *ctx, void *dptr, size_t bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (dptr && atomic_load_explicit(&cuda_on, memory_order_acquire))
        mxa_cuda_part_vmm_free(ctx, dptr, bytes);
#endif
    (void)ctx;
    (void)dptr;
    (void)bytes;
}

void mxa_part_busid(void *ctx, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
#ifdef MPIXACC_HAVE_CUDA
    if (ctx && atomic_load_explicit(&cuda_on, memory_order_acquire))
        mxa_cuda_part_busid(ctx, buf, len);
#endif
    (void)ctx;
}

int mxa_part_reaches(void *ctx, const char *peer_busid)
{
#ifdef MPIXACC_HAVE_CUDA
    if (ctx && atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_part_reaches(ctx, peer_busid);
#endif
    (void)ctx;
    (void)peer_busid;
    return 0;
}

mxu_status_t mxa_part_complete(mxa_stream_t *s, void *dreq, int is_send, int partitions,
                               uint64_t part_bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_part_complete(s, dreq, is_send, partitions, part_bytes);
#endif
    (void)s;
    (void)dreq;
    (void)is_send;
    (void)partitions;
    (void)part_bytes;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_part_start_dev(mxa_stream_t *s, void *dreq)
{
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_part_start(s, dreq);
#endif
    (void)s;
    (void)dreq;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_graph_words_alloc(mxa_stream_t *s, uint64_t **pair)
{
    *pair = NULL;
    if (s->kind == MXA_KIND_HOST)
        return mxa_host_graph_word_alloc(pair);
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_graph_words_alloc(s, pair);
#endif
    return MXU_ERR_UNSUPPORTED;
}

void mxa_graph_words_free(int kind, uint64_t *pair)
{
    if (!pair)
        return;
#ifdef MPIXACC_HAVE_CUDA
    if (kind == MXA_KIND_CUDA) {
        mxa_cuda_graph_words_free(pair);
        return;
    }
#endif
    (void)kind;
    free(pair);
}

mxu_status_t mxa_stream_graph_fire(mxa_stream_t *s, uint64_t *pair)
{
    if (s->kind == MXA_KIND_HOST)
        return mxa_host_graph_fire(s, pair);
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_graph_node(s, pair, 0);
#endif
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_stream_graph_wait(mxa_stream_t *s, uint64_t *pair)
{
    if (s->kind == MXA_KIND_HOST)
        return mxa_host_graph_wait(s, pair);
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_graph_node(s, pair, 1);
#endif
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_stream_capture_info(mxa_stream_t *s, uint64_t *id, void **graph)
{
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_capture_info(s, id, graph);
#endif
    (void)s, (void)id, (void)graph;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxa_graph_on_destroy(mxa_stream_t *s, void *graph, void (*fn)(void *), void *arg)
{
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA)
        return mxa_cuda_graph_on_destroy(graph, fn, arg);
#endif
    (void)s, (void)graph, (void)fn, (void)arg;
    return MXU_ERR_UNSUPPORTED;
}

typedef struct {
    uint64_t *addr;
    uint64_t v;
} write64_t;

static void host_write64_fn(void *arg)
{
    write64_t *w = arg;
    atomic_store_explicit((_Atomic uint64_t *)w->addr, w->v, memory_order_release);
    free(w);
}

mxu_status_t mxa_stream_write64(mxa_stream_t *s, uint64_t *addr, uint64_t v)
{
    switch (s->kind) {
    case MXA_KIND_NONE:
        atomic_store_explicit((_Atomic uint64_t *)addr, v, memory_order_release);
        return MXU_OK;
    case MXA_KIND_HOST: {
        write64_t *w = malloc(sizeof(*w));
        if (!w)
            return MXU_ERR_NO_MEMORY;
        *w = (write64_t){addr, v};
        mxu_status_t st = mxa_host_stream_launch(s->handle, host_write64_fn, w);
        if (st != MXU_OK)
            free(w);
        return st;
    }
    case MXA_KIND_CUDA:
#ifdef MPIXACC_HAVE_CUDA
        return mxa_cuda_stream_write64(s, addr, v);
#endif
    default:
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "no stream-ordered store for this stream kind");
    }
}

void mxa_finalize(void)
{
    pthread_mutex_lock(&accel_lock);
    if (!accel_initialized) {
        pthread_mutex_unlock(&accel_lock);
        return;
    }
    /* Host streams the application did not free are stopped here; their
     * handles become invalid (lookups fail, nothing is dereferenced). */
    mxa_host_shutdown();
    scratch_release_all();
#ifdef MPIXACC_HAVE_CUDA
    if (cuda_tried)
        mxa_cuda_finalize();
#endif
    atomic_store(&cuda_on, 0);
    cuda_tried = 0;
    accel_initialized = 0;
    pthread_mutex_unlock(&accel_lock);
}

mxu_status_t mxa_stream_lookup(void *handle, mxa_stream_t **out)
{
    if (out == NULL)
        return MXU_ERR_INVALID_PARAM;
    *out = NULL;
    if (handle == NULL) {
#ifdef MPIXACC_HAVE_CUDA
        if (atomic_load_explicit(&cuda_on, memory_order_acquire))
            return mxa_cuda_stream_lookup(NULL, out);
#endif
        *out = &none_stream;
        return MXU_OK;
    }
    mxa_stream_t *s = mxa_host_stream_find(handle);
    if (s != NULL) {
        *out = s;
        return MXU_OK;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_stream_lookup(handle, out);
#endif
    return MXU_ERR_INVALID_STREAM;
}

mxa_memtype_t mxa_memtype(const void *buf, size_t len)
{
#ifdef MPIXACC_HAVE_CUDA
    if (buf != NULL && atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_memtype(buf, len);
#else
    (void)buf;
    (void)len;
#endif
    return MXA_MEM_HOST;
}

void mxa_set_trigger_notify(mxa_trigger_notify_fn fn)
{
    atomic_store_explicit(&trigger_notify, fn, memory_order_release);
}

void mxa_notify_trigger(void)
{
    mxa_trigger_notify_fn fn = atomic_load_explicit(&trigger_notify, memory_order_acquire);
    if (fn != NULL)
        fn();
}

void mxa_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg)
{
    if (fn == NULL)
        return;
    fn(&none_stream, arg);
    mxa_host_foreach_stream(fn, arg);
#ifdef MPIXACC_HAVE_CUDA
    mxa_cuda_foreach_stream(fn, arg);
#endif
}

int mxa_device_active(void) { return atomic_load_explicit(&cuda_on, memory_order_acquire); }

const char *mxa_stream_pci_busid(mxa_stream_t *s)
{
    if (s == NULL || s->backend == NULL || s->backend->pci_busid == NULL)
        return NULL;
    return s->backend->pci_busid(s);
}

const char *mxa_current_pci_busid(void)
{
#ifdef MPIXACC_HAVE_CUDA
    if (atomic_load_explicit(&cuda_on, memory_order_acquire))
        return mxa_cuda_current_pci_busid();
#endif
    return NULL;
}

void mxa_get_features(mxa_features_t *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
#ifdef MPIXACC_HAVE_CUDA
    pthread_mutex_lock(&accel_lock);
    int tried = cuda_tried, initialized = accel_initialized;
    pthread_mutex_unlock(&accel_lock);
    if (tried) {
        mxa_cuda_get_features(out);
    } else if (!initialized) {
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "off: accelerator layer not initialised");
    } else {
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "off: disabled by MPIX_ACC_CUDA=0");
    }
    out->cuda_built = 1;
    out->cuda_active = atomic_load(&cuda_on) ? out->cuda_active : 0;
    if (!out->cuda_active && strncmp(out->cuda_mode, "off", 3) != 0)
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "off: no CUDA driver or device");
#else
    out->cuda_built = 0;
    snprintf(out->cuda_mode, sizeof(out->cuda_mode), "off: built without CUDA");
#endif
}

/* ---- contexts met after start-up ---- */

static _Atomic(mxa_context_hook_fn) context_hook;

void mxa_set_context_hook(mxa_context_hook_fn fn) { atomic_store(&context_hook, fn); }

void mxa_run_context_hook(void *ctx)
{
    /* the SX abort word, when no context existed at start-up (sx.c) */
    mxa_sx_context_ready();
    mxa_context_hook_fn fn = atomic_load(&context_hook);
    if (fn != NULL)
        fn(ctx);
}

int mxa_context_push(void *ctx)
{
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active())
        return mxa_cuda_ctx_push(ctx);
#endif
    (void)ctx;
    return -1;
}

void mxa_thread_bind_buffer(const void *buf)
{
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active() && mxa_cuda_bind_buffer(buf) != MXU_OK)
        MXU_LOG(MXU_LOG_DEBUG, "no CUDA context for buffer %p on this thread", buf);
#endif
    (void)buf;
}

void mxa_context_pop(void)
{
#ifdef MPIXACC_HAVE_CUDA
    mxa_cuda_ctx_pop();
#endif
}

void mxa_thread_relax_capture(void)
{
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active())
        mxa_cuda_thread_relax_capture();
#endif
}
