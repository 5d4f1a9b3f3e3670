/*
 * cuda.c - the CUDA accelerator backend (see accel.h): stream points on a
 * cudaStream_t / CUstream as stream memory operations on 64-bit sequence
 * words in host-mapped pinned memory, with a one-thread-kernel fallback.
 *
 * Driver. libcuda.so.1 is dlopen()ed at mxa_cuda_init() and every entry point
 * is fetched with cuGetProcAddress (cuda_driver.h); the library never links
 * libcuda or libcudart, so a CUDA build runs on machines without a driver:
 * the backend then reports itself off (MX_ERR_NO_DEVICE, info log) and the
 * library uses host streams only.
 *
 * Streams. The first lookup of a handle creates an mxa_cuda_stream_t (the
 * public mxa_stream_t is its first member), cached in a locked hash map keyed
 * by the handle. Every lookup validates the handle: cuStreamGetId (CUDA 12+,
 * which also detects a destroyed handle's address being reused for a new
 * stream: the record is then re-bound to the new stream's context and keeps
 * its monotonic sequence words) or cuStreamGetCtx. A failing handle is
 * MX_ERR_INVALID_STREAM. NULL and CU_STREAM_LEGACY (0x1) are the legacy
 * default stream of the calling thread's current context (of device 0's
 * primary context when the thread has none); CU_STREAM_PER_THREAD (0x2) is
 * the per-thread default stream of (current context, calling thread). These
 * "special" streams are kept in a list keyed by (context[, thread]).
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
 * Sequence words. One (trigger, release) pair of 64-bit words per stream,
 * on separate 64-byte lines of a slot in a 64 KiB slab of
 * cuMemHostAlloc(DEVICEMAP|PORTABLE) memory (device pointer from
 * cuMemHostGetDevicePointer). Triggers: cuStreamWriteValue64(trigger, seq)
 * (the default flags put a system-scope fence before the write). Waits:
 * cuStreamWaitValue64(release, seq, GEQ[|FLUSH where the device can flush
 * remote writes]). The engine's progress thread polls trigger words (needs_polling = 1) and
 * releases waits with an atomic store (the GPU sees host-mapped memory).
 *
 * Fallback. With MPIX_ACC_MEMOPS=0, when the device cannot do 64-bit stream
 * memory operations or they failed the self-test, and for every point
 * enqueued while the stream is being captured into a graph, the points are
 * one-thread kernels (cuda_kernels.cu): flag-set, flag-wait (wait-then-set
 * only in the self-test).
 *
 * Threads. Lookups and enqueues come from application threads (any number);
 * release/poll_trigger come from the progress thread and touch only the
 * words. Records are created under g.lock and never freed before
 * mxa_cuda_finalize().
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda.h"

static void ipc_ctx_setup(void);
static void ipc_describe(char *buf, size_t len);

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/cuda_driver.h"
#include "accel/ipc_table.h"
#include "util/settings.h"
#include "util/hashmap.h"
#include "util/log.h"
#include "util/waiter.h"

#define SLAB_BYTES      (64 * 1024)
#define SLOT_BYTES      128 /* trigger word at +0, release word at +64 */
#define SELFTEST_NS     (5ull * 1000000000ull)

enum { SPECIAL_NONE = 0, SPECIAL_LEGACY = 1, SPECIAL_PER_THREAD = 2 };

mxa_cu_api_t mxa_cu;

typedef struct {
    CUdevice dev;
    char name[96];
    char busid[32]; /* lower case, "0000:3b:00.0" */
    int memops64;   /* device attribute: 64-bit stream memory operations */
    int flush;      /* CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES */
    int uva;
    CUcontext primary; /* retained by mxa_cuda_bind_buffer for VMM memory, or NULL */
} cuda_dev_t;

typedef struct cuda_ctx {
    CUcontext ctx;
    unsigned long long ctx_id; /* cuCtxGetId, 0 when unavailable */
    int dev_index;
    _Atomic int stale;         /* destroyed (its address reused) or set-up failed */
    _Atomic int warm;          /* the engine's context hook has run (or was not needed) */
    CUmodule module;
    CUfunction fn_set, fn_wait, fn_wait_set;
    int kernels_ok;            /* fallback kernels loaded and self-tested */
    int memops;                /* stream memory operations in use in this context */
    _Atomic uint64_t *scratch; /* self-test word */
    CUdeviceptr scratch_dptr;
    struct cuda_ctx *next;
} cuda_ctx_t;

typedef struct cuda_stream {
    mxa_stream_t pub; /* first member: (mxa_stream_t *) <-> (cuda_stream_t *) */
    CUstream cu;      /* what is passed to the driver */
    int special;      /* SPECIAL_* */
    pthread_t thread; /* SPECIAL_PER_THREAD: the owning thread */
    cuda_ctx_t *ctx;
    unsigned long long stream_id;
    int have_id;
    CUdeviceptr trig_dptr, rel_dptr;
    unsigned wait_flags;
    struct cuda_stream *next;
} cuda_stream_t;

typedef struct slab {
    unsigned char *host;
    size_t used;
    struct slab *next;
} slab_t;

static struct {
    pthread_mutex_t lock;
    int tried;      /* mxa_cuda_init() ran (finalize undoes it) */
    void *lib;
    int driver_version;
    int ndev;
    cuda_dev_t *devs;
    int memops_all; /* every device can use 64-bit memops and the setting allows */
    char mode[64];
    char why_off[64];
    cuda_ctx_t *ctxs;
    cuda_stream_t *streams;  /* every record, specials included */
    mxu_locked_map_t map;    /* handle -> cuda_stream_t (ordinary handles) */
    int map_ok;
    slab_t *slabs;
    pthread_cond_t warm_cv;  /* a context became warm (cuda_ctx_t.warm) */
    CUcontext primary0;      /* retained primary context of device 0 (no current ctx) */
    int primary0_retained;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .warm_cv = PTHREAD_COND_INITIALIZER};

static _Atomic int g_active;
/* A context this thread's last ctx_get set up (the context hook runs for it
 * once g.lock is released); NULL when none. */
static _Thread_local struct cuda_ctx *tl_new_ctx;
static _Atomic(CUcontext) g_first_ctx; /* first context set up (bind_buffer's default) */

static mx_status_t backend_enqueue_trigger(mxa_stream_t *s, uint64_t seq);
static mx_status_t backend_enqueue_wait(mxa_stream_t *s, uint64_t seq);
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

/* ---------------------------------------------------------------- helpers */

static const char *cu_err(CUresult r)
{
    const char *s = NULL;
    if (mxa_cu.f_cuGetErrorName != NULL && mxa_cu.f_cuGetErrorName(r, &s) == CUDA_SUCCESS &&
        s != NULL)
        return s;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof(buf), "CUDA error %d", (int)r);
    return buf;
}

static int cu_err_is_bad_handle(CUresult r)
{
    return r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
           r == CUDA_ERROR_INVALID_CONTEXT;
}

/* Make `c` current if it is not; returns 1 if pushed, 0 if already current,
 * -1 on failure. */
static int ctx_enter(CUcontext c)
{
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == c)
        return 0;
    return MXA_CU(cuCtxPushCurrent)(c) == CUDA_SUCCESS ? 1 : -1;
}

static void ctx_leave(int entered)
{
    if (entered == 1) {
        CUcontext popped;
        MXA_CU(cuCtxPopCurrent)(&popped);
    }
}

static void store_max(_Atomic uint64_t *word, uint64_t seq)
{
    uint64_t cur = atomic_load_explicit(word, memory_order_relaxed);
    while ((int64_t)(seq - cur) > 0 &&
           !atomic_compare_exchange_weak_explicit(word, &cur, seq, memory_order_release,
                                                  memory_order_relaxed))
        ;
}

/* ------------------------------------------------------- driver loading */

#define MXA_STR_(x) #x
#define MXA_XSTR(x) MXA_STR_(x)

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

/* cuGetProcAddress of the loaded driver (set by load_driver). */
static gpa_v2_fn g_gpa2;
static gpa_v1_fn g_gpa1;

/* Entry point `name` at ABI version `since` of driver `lib`, by
 * cuGetProcAddress, else dlsym(dlname); NULL when absent. */
static void *driver_proc(void *lib, const char *name, int since, const char *dlname)
{
    void *fp = NULL;
    if (g_gpa2 != NULL) {
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (g_gpa2(name, &fp, since, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
            q != CU_GET_PROC_ADDRESS_SUCCESS)
            fp = NULL;
    } else if (g_gpa1 != NULL) {
        if (g_gpa1(name, &fp, since, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS)
            fp = NULL;
    }
    return fp != NULL ? fp : dlsym(lib, dlname);
}

static int load_driver(char *why, size_t whylen)
{
    memset(&mxa_cu, 0, sizeof(mxa_cu));
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend: cannot load libcuda.so.1 (%s)",
                     e != NULL ? e : "?");
        snprintf(why, whylen, "off: no CUDA driver (libcuda.so.1)");
        return -1;
    }
    g_gpa2 = NULL;
    g_gpa1 = NULL;
    void *p = dlsym(lib, "cuGetProcAddress_v2");
    memcpy(&g_gpa2, &p, sizeof(p));
    if (g_gpa2 == NULL) {
        p = dlsym(lib, "cuGetProcAddress");
        memcpy(&g_gpa1, &p, sizeof(p));
    }
    const char *missing = NULL;
#define MXA_CU_LOAD_(name, req, since)                                                           \
    do {                                                                                         \
        void *fp_ = driver_proc(lib, #name, (since), MXA_XSTR(name));                            \
        if (fp_ == NULL && (req) && missing == NULL)                                             \
            missing = #name;                                                                     \
        memcpy(&mxa_cu.f_##name, &fp_, sizeof(fp_));                                             \
    } while (0);
    MXA_CU_FUNCS(MXA_CU_LOAD_)
#undef MXA_CU_LOAD_
    if (missing != NULL) {
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend: the driver lacks %s (too old?)", missing);
        snprintf(why, whylen, "off: driver lacks %s", missing);
        dlclose(lib);
        memset(&mxa_cu, 0, sizeof(mxa_cu));
        return -1;
    }
    g.lib = lib;
    return 0;
}

/* ----------------------------------------------------- sequence words */

/* Allocate one slot (two words on separate lines). A context must be
 * current (cuMemHostAlloc); PORTABLE makes the memory usable from all. */
static mx_status_t slot_alloc(unsigned char **host_out)
{
    slab_t *sl = g.slabs;
    if (sl == NULL || sl->used + SLOT_BYTES > SLAB_BYTES) {
        sl = calloc(1, sizeof(*sl));
        if (sl == NULL)
            MX_FAIL(MX_ERR_NO_MEMORY, "CUDA backend: out of memory");
        void *hp = NULL;
        CUresult r = MXA_CU(cuMemHostAlloc)(&hp, SLAB_BYTES,
                                            CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (r != CUDA_SUCCESS) {
            free(sl);
            MX_FAIL(MX_ERR_NO_DEVICE,
                    "CUDA backend: cuMemHostAlloc(%d bytes, DEVICEMAP|PORTABLE) failed: %s",
                    SLAB_BYTES, cu_err(r));
        }
        memset(hp, 0, SLAB_BYTES);
        sl->host = hp;
        sl->next = g.slabs;
        g.slabs = sl;
    }
    *host_out = sl->host + sl->used;
    sl->used += SLOT_BYTES;
    return MX_OK;
}

static mx_status_t host_to_dev(void *host, CUdeviceptr *d)
{
    CUresult r = MXA_CU(cuMemHostGetDevicePointer)(d, host, 0);
    if (r != CUDA_SUCCESS)
        MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: cuMemHostGetDevicePointer failed: %s",
                cu_err(r));
    return MX_OK;
}

/* ------------------------------------------------------------ contexts */

/* Flags of every wait memop on device i: cyclic >=, plus a flush of remote
 * (e.g. GPUDirect RDMA) writes where the device can do it, so data a NIC
 * wrote before the release is visible to the work after the wait. */
static unsigned wait_flags_for(int dev_index)
{
    unsigned f = CU_STREAM_WAIT_VALUE_GEQ;
    if (dev_index >= 0 && g.devs[dev_index].flush)
        f |= CU_STREAM_WAIT_VALUE_FLUSH;
    return f;
}

static mx_status_t launch1(CUfunction f, CUstream st, void **args)
{
    CUresult r = MXA_CU(cuLaunchKernel)(f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
    if (r != CUDA_SUCCESS)
        return cu_err_is_bad_handle(r) ? MX_ERR_INVALID_STREAM : MX_ERR_NO_DEVICE;
    return MX_OK;
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
        MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: self-test stream: %s", cu_err(r));
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
        mx_status_t s1 = launch1(cx->fn_set, st, a_set);
        mx_status_t s2 = s1 == MX_OK ? launch1(cx->fn_wait, st, a_wait) : s1;
        mx_status_t s3 = s2 == MX_OK ? launch1(cx->fn_wait_set, st, a_ws) : s2;
        int done = s3 == MX_OK && stream_done_within(st, SELFTEST_NS);
        uint64_t v = atomic_load(cx->scratch);
        cx->kernels_ok = done && v == 2;
        if (!cx->kernels_ok) {
            stuck = s3 == MX_OK && !done;
            MPIX_ACC_LOG(MX_LOG_WARN,
                         "CUDA backend: fallback kernels failed their self-test on device %d "
                         "(launch %s, completed %d, word %llu, expected 2)",
                         cx->dev_index, s3 == MX_OK ? "ok" : "failed", done,
                         (unsigned long long)v);
        }
    }
    if (try_memops && MXA_CU(cuStreamWriteValue64) != NULL &&
        MXA_CU(cuStreamWaitValue64) != NULL && MXA_CU(cuStreamBatchMemOp) != NULL) {
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
            MPIX_ACC_LOG(MX_LOG_WARN,
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
        MPIX_ACC_LOG(MX_LOG_ERROR, "CUDA backend: self-test work did not finish within %llu s "
                     "on device %d", (unsigned long long)(SELFTEST_NS / 1000000000ull),
                     cx->dev_index);
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
    MPIX_ACC_LOG(r != CUDA_SUCCESS ? MX_LOG_WARN : sched_changed ? MX_LOG_INFO : MX_LOG_DEBUG,
                 "CUDA backend: context flags of device %d 0x%x -> CU_CTX_SYNC_MEMOPS "
                 "(what UCX sets at its first memory query): %s",
                 dev_index, flags, r == CUDA_SUCCESS ? "done" : cu_err(r));
}

/* Find or create the record of context c (g.lock held). */
static mx_status_t ctx_get(CUcontext c, cuda_ctx_t **out)
{
    unsigned long long id = 0;
    if (MXA_CU(cuCtxGetId) != NULL) {
        CUresult r = MXA_CU(cuCtxGetId)(c, &id);
        if (r != CUDA_SUCCESS)
            return MX_ERR_INVALID_STREAM;
    }
    for (cuda_ctx_t *cx = g.ctxs; cx != NULL; cx = cx->next) {
        if (cx->ctx != c || cx->stale)
            continue;
        if (id == 0 || cx->ctx_id == id) {
            *out = cx;
            return MX_OK;
        }
        /* same address, new context: the old one was destroyed */
        cx->stale = 1;
    }

    cuda_ctx_t *cx = calloc(1, sizeof(*cx));
    if (cx == NULL)
        MX_FAIL(MX_ERR_NO_MEMORY, "CUDA backend: out of memory");
    cx->ctx = c;
    cx->ctx_id = id;
    cx->dev_index = -1;

    int entered = ctx_enter(c);
    if (entered < 0) {
        free(cx);
        MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: cannot make a stream's context current");
    }
    mx_status_t status = MX_OK;
    CUdevice dev;
    CUresult r = MXA_CU(cuCtxGetDevice)(&dev);
    if (r != CUDA_SUCCESS) {
        MPIX_ACC_LOG(MX_LOG_ERROR, "CUDA backend: cuCtxGetDevice failed: %s", cu_err(r));
        status = MX_ERR_NO_DEVICE;
        goto out;
    }
    for (int i = 0; i < g.ndev; i++)
        if (g.devs[i].dev == dev)
            cx->dev_index = i;
    if (cx->dev_index < 0) {
        MPIX_ACC_LOG(MX_LOG_ERROR, "CUDA backend: context on an unknown device %d", (int)dev);
        status = MX_ERR_NO_DEVICE;
        goto out;
    }
    ctx_preset_sync_memops(cx->dev_index);

    unsigned char *slot;
    MX_TRY_GOTO(slot_alloc(&slot), out);
    cx->scratch = (_Atomic uint64_t *)slot;
    MX_TRY_GOTO(host_to_dev(slot, &cx->scratch_dptr), out);

    r = MXA_CU(cuModuleLoadData)(&cx->module, mxa_cuda_fatbin);
    if (r == CUDA_SUCCESS) {
        CUresult r1 = MXA_CU(cuModuleGetFunction)(&cx->fn_set, cx->module, MXA_CUDA_KERNEL_SET);
        CUresult r2 = MXA_CU(cuModuleGetFunction)(&cx->fn_wait, cx->module, MXA_CUDA_KERNEL_WAIT);
        CUresult r3 =
            MXA_CU(cuModuleGetFunction)(&cx->fn_wait_set, cx->module, MXA_CUDA_KERNEL_WAIT_SET);
        if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS || r3 != CUDA_SUCCESS) {
            MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: fallback kernels not found in the module: %s",
                         cu_err(r1 != CUDA_SUCCESS ? r1 : r2 != CUDA_SUCCESS ? r2 : r3));
            MXA_CU(cuModuleUnload)(cx->module);
            cx->module = NULL;
        } else if (MXA_CU(cuFuncLoad) != NULL) {
            /* Load now even under CUDA_MODULE_LOADING=LAZY. */
            MXA_CU(cuFuncLoad)(cx->fn_set);
            MXA_CU(cuFuncLoad)(cx->fn_wait);
            MXA_CU(cuFuncLoad)(cx->fn_wait_set);
        }
    } else {
        cx->module = NULL;
        MPIX_ACC_LOG(MX_LOG_WARN,
                     "CUDA backend: cannot load the fallback kernels on device %d (%s): "
                     "graph capture and MPIX_ACC_MEMOPS=0 will not work there",
                     cx->dev_index, cu_err(r));
    }

    int try_memops = mxu_config.memops && g.devs[cx->dev_index].memops64;
    ctx_selftest(cx, try_memops);
    if (!cx->memops && !cx->kernels_ok) {
        MPIX_ACC_LOG(MX_LOG_ERROR, "CUDA backend: neither stream memory operations nor the "
                     "fallback kernels work on device %d: its streams cannot be used",
                     cx->dev_index);
        status = MX_ERR_NO_DEVICE;
        goto out;
    }
    MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend: context %p on device %d (%s, %s): %s%s", (void *)c,
                 cx->dev_index, g.devs[cx->dev_index].name, g.devs[cx->dev_index].busid,
                 cx->memops ? "stream memory operations" : "kernel fallback",
                 cx->kernels_ok ? "" : " (no fallback kernels)");

out:
    ctx_leave(entered);
    if (status != MX_OK) {
        if (cx->module != NULL && !cx->kernels_ok && !cx->memops) {
            /* keep it loaded: a stuck self-test kernel may still run it */
        }
        /* cx->scratch stays in its slab; the record is kept as stale so a
         * retry re-runs the set-up on a fresh record. */
        cx->stale = 1;
        cx->next = g.ctxs;
        g.ctxs = cx;
        return status;
    }
    cx->next = g.ctxs;
    g.ctxs = cx;
    tl_new_ctx = cx;
    CUcontext none = NULL;
    atomic_compare_exchange_strong(&g_first_ctx, &none, c);
    *out = cx;
    return MX_OK;
}

/* ------------------------------------------------------------- streams */

/* Bind record cs to context cx: device pointers of the words and flags.
 * g.lock held. */
static mx_status_t stream_bind(cuda_stream_t *cs, cuda_ctx_t *cx)
{
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: cannot make a stream's context current");
    mx_status_t status = MX_OK;
    if (cs->pub.trigger_word == NULL) {
        unsigned char *slot;
        MX_TRY_GOTO(slot_alloc(&slot), out);
        cs->pub.trigger_word = (_Atomic uint64_t *)slot;
        cs->pub.release_word = (_Atomic uint64_t *)(slot + 64);
    }
    MX_TRY_GOTO(host_to_dev((void *)cs->pub.trigger_word, &cs->trig_dptr), out);
    MX_TRY_GOTO(host_to_dev((void *)cs->pub.release_word, &cs->rel_dptr), out);
    cs->ctx = cx;
    cs->wait_flags = wait_flags_for(cx->dev_index);
out:
    ctx_leave(entered);
    return status;
}

static mx_status_t stream_new(void *handle, CUstream cu, int special, cuda_ctx_t *cx,
                              cuda_stream_t **out)
{
    cuda_stream_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        MX_FAIL(MX_ERR_NO_MEMORY, "CUDA backend: out of memory");
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
    mx_status_t st = stream_bind(cs, cx);
    if (st != MX_OK) {
        /* a slot taken by a failed bind stays in its slab */
        free(cs);
        return st;
    }
    cs->next = g.streams;
    g.streams = cs;
    *out = cs;
    return MX_OK;
}

/* After g.lock is released: the engine's hook for a context this thread
 * just set up; the context is warm afterwards. */
static void run_new_context_hook(void)
{
    cuda_ctx_t *cx = tl_new_ctx;
    if (cx != NULL) {
        tl_new_ctx = NULL;
        mxa_run_context_hook(cx->ctx);
        pthread_mutex_lock(&g.lock);
        atomic_store(&cx->warm, 1);
        pthread_cond_broadcast(&g.warm_cv);
        pthread_mutex_unlock(&g.lock);
    }
}

/* g.lock held: another thread set up cx and runs the hook for it; no stream
 * point of cx may be enqueued before it is done (its warm-up would wait
 * for that point, behind the progress thread). */
static void wait_until_warm(cuda_ctx_t *cx)
{
    while (!atomic_load(&cx->warm) && tl_new_ctx != cx)
        pthread_cond_wait(&g.warm_cv, &g.lock);
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

static mx_status_t lookup_special(int special, void *handle, mxa_stream_t **out)
{
    CUcontext c = NULL;
    MXA_CU(cuCtxGetCurrent)(&c);
    pthread_t self = pthread_self();
    mx_status_t status = MX_OK;
    pthread_mutex_lock(&g.lock);
    if (c == NULL) {
        /* No context on this thread: like the runtime, use device 0's
         * primary context. */
        if (!g.primary0_retained) {
            CUresult r = MXA_CU(cuDevicePrimaryCtxRetain)(&g.primary0, g.devs[0].dev);
            if (r != CUDA_SUCCESS) {
                pthread_mutex_unlock(&g.lock);
                MX_FAIL(MX_ERR_NO_DEVICE,
                        "CUDA backend: default stream without a current context, and device "
                        "0's primary context cannot be retained: %s",
                        cu_err(r));
            }
            g.primary0_retained = 1;
        }
        c = g.primary0;
    }
    cuda_ctx_t *cx = NULL;
    status = ctx_get(c, &cx);
    if (status != MX_OK)
        goto out;
    for (cuda_stream_t *cs = g.streams; cs != NULL; cs = cs->next) {
        if (cs->special == special && cs->ctx == cx &&
            (special != SPECIAL_PER_THREAD || pthread_equal(cs->thread, self))) {
            *out = &cs->pub;
            goto out;
        }
    }
    cuda_stream_t *cs = NULL;
    status = stream_new(handle, special == SPECIAL_LEGACY ? CU_STREAM_LEGACY : CU_STREAM_PER_THREAD,
                        special, cx, &cs);
    if (status == MX_OK)
        *out = &cs->pub;
out:
    if (status == MX_OK && cx != NULL)
        wait_until_warm(cx);
    pthread_mutex_unlock(&g.lock);
    run_new_context_hook();
    return status;
}

/* Identity of a live ordinary stream handle. */
static mx_status_t stream_identity(CUstream h, CUcontext *ctx, unsigned long long *id, int *have_id)
{
    CUresult r = MXA_CU(cuStreamGetCtx)(h, ctx);
    if (r != CUDA_SUCCESS) {
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: stream %p: cuStreamGetCtx: %s", (void *)h,
                     cu_err(r));
        return MX_ERR_INVALID_STREAM;
    }
    *have_id = 0;
    if (MXA_CU(cuStreamGetId) != NULL && MXA_CU(cuStreamGetId)(h, id) == CUDA_SUCCESS)
        *have_id = 1;
    return MX_OK;
}

mx_status_t mxa_cuda_stream_lookup(void *handle, mxa_stream_t **out)
{
    if (out == NULL)
        return MX_ERR_INVALID_PARAM;
    *out = NULL;
    if (!atomic_load_explicit(&g_active, memory_order_acquire))
        return MX_ERR_INVALID_STREAM;
    uintptr_t h = (uintptr_t)handle;
    if (h == 0 || h == (uintptr_t)CU_STREAM_LEGACY)
        return lookup_special(SPECIAL_LEGACY, handle, out);
    if (h == (uintptr_t)CU_STREAM_PER_THREAD)
        return lookup_special(SPECIAL_PER_THREAD, handle, out);
    if (h < 4096 || (h & 7) != 0)
        return MX_ERR_INVALID_STREAM; /* cannot be a driver object: do not pass it on */

    CUstream cu = (CUstream)handle;
    cuda_stream_t *cs = mxu_locked_map_get(&g.map, (uint64_t)h);
    if (cs != NULL) {
        /* Fast path: one driver call validates the handle. */
        if (cs->have_id) {
            unsigned long long id;
            CUresult r = MXA_CU(cuStreamGetId)(cu, &id);
            if (r != CUDA_SUCCESS) {
                MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: stream %p: cuStreamGetId: %s", handle,
                             cu_err(r));
                return MX_ERR_INVALID_STREAM;
            }
            if (id == cs->stream_id && !cs->ctx->stale && atomic_load(&cs->ctx->warm)) {
                *out = &cs->pub;
                return MX_OK;
            }
        } else {
            CUcontext c;
            CUresult r = MXA_CU(cuStreamGetCtx)(cu, &c);
            if (r != CUDA_SUCCESS)
                return MX_ERR_INVALID_STREAM;
            if (c == cs->ctx->ctx && !cs->ctx->stale && atomic_load(&cs->ctx->warm)) {
                *out = &cs->pub;
                return MX_OK;
            }
        }
    }

    /* Slow path: first sight of the handle, or its address now names
     * another stream. */
    CUcontext c;
    unsigned long long id = 0;
    int have_id = 0;
    MX_TRY(stream_identity(cu, &c, &id, &have_id));
    mx_status_t status = MX_OK;
    pthread_mutex_lock(&g.lock);
    cuda_ctx_t *cx = NULL;
    status = ctx_get(c, &cx);
    if (status != MX_OK)
        goto out;
    cs = mxu_locked_map_get(&g.map, (uint64_t)h);
    if (cs == NULL) {
        status = stream_new(handle, cu, SPECIAL_NONE, cx, &cs);
        if (status != MX_OK)
            goto out;
        cs->stream_id = id;
        cs->have_id = have_id;
        status = mxu_locked_map_put(&g.map, (uint64_t)h, cs);
        if (status != MX_OK)
            goto out; /* the record stays on g.streams (freed at finalize) */
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: new stream %p (device %d, %s)", handle,
                     cx->dev_index, cx->memops ? "memops" : "kernel fallback");
    } else if (cs->ctx != cx || (have_id && cs->stream_id != id)) {
        /* Handle reuse. The record keeps its words and counters (they only
         * grow); points of the destroyed stream that were never reached
         * are lost with it. */
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend: stream handle %p now names a new stream "
                     "(id %llu -> %llu): re-bound", handle, cs->stream_id, id);
        status = stream_bind(cs, cx);
        if (status != MX_OK)
            goto out;
        cs->stream_id = id;
        cs->have_id = have_id;
    }
    *out = &cs->pub;
out:
    if (status == MX_OK && cx != NULL)
        wait_until_warm(cx);
    pthread_mutex_unlock(&g.lock);
    run_new_context_hook();
    return status;
}

/* ------------------------------------------------------- stream points */

static mx_status_t enqueue_point(cuda_stream_t *cs, int is_wait, uint64_t seq)
{
    cuda_ctx_t *cx = cs->ctx;
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MX_FAIL(MX_ERR_INVALID_STREAM, "CUDA backend: cannot make the context of stream %p "
                "current", cs->pub.handle);

    mx_status_t status = MX_OK;
    CUresult r = CUDA_SUCCESS;
    int use_memops = cx->memops;
    if (use_memops) {
        CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
        r = MXA_CU(cuStreamIsCapturing)(cs->cu, &cap);
        if (r != CUDA_SUCCESS)
            goto fail;
        if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
            use_memops = 0; /* captured into a graph: kernel nodes */
    }

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
            MX_FAIL(MX_ERR_UNSUPPORTED, "CUDA backend: stream %p needs the fallback kernels "
                    "(%s), which are not available on device %d", cs->pub.handle,
                    cx->memops ? "stream capture" : "no stream memory operations",
                    cx->dev_index);
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
        MX_FAIL(MX_ERR_INVALID_STREAM, "CUDA backend: enqueue on stream %p failed: %s",
                cs->pub.handle, cu_err(r));
    MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: enqueue on stream %p failed: %s", cs->pub.handle,
            cu_err(r));
}

static mx_status_t backend_enqueue_trigger(mxa_stream_t *s, uint64_t seq)
{
    return enqueue_point((cuda_stream_t *)s, 0, seq);
}

static mx_status_t backend_enqueue_wait(mxa_stream_t *s, uint64_t seq)
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
    store_max(s->release_word, seq);
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
    int entered = ctx_enter(cs->ctx->ctx);
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = MXA_CU(cuStreamIsCapturing)(cs->cu, &cap);
    ctx_leave(entered);
    return r == CUDA_SUCCESS && cap != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* --------------------------------------------------------- memory type */

mxa_memtype_t mxa_cuda_memtype(const void *buf, size_t len)
{
    (void)len;
    if (buf == NULL || !atomic_load_explicit(&g_active, memory_order_acquire))
        return MXA_MEM_HOST;
    /* One driver call per buffer. No range cache: without free hooks a
     * cached range can outlive its allocation and name the wrong type for
     * a new allocation at the same address (device <-> managed), which
     * would send the transport down the wrong path. */
    unsigned int memtype = 0, managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[2] = {&memtype, &managed};
    CUresult r = MXA_CU(cuPointerGetAttributes)(2, attrs, data, (CUdeviceptr)(uintptr_t)buf);
    if (r != CUDA_SUCCESS) {
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: cuPointerGetAttributes(%p): %s: host assumed",
                     buf, cu_err(r));
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
mx_status_t mxa_cuda_bind_buffer(const void *buf)
{
    if (!atomic_load_explicit(&g_active, memory_order_acquire))
        return MX_OK;
    /* A thread without a context first gets the default one: UCX may need
     * a context even for a host buffer (cuda_ipc mapping of the peer's GPU
     * memory), and the pointer query below is safest with one current. */
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == NULL) {
        CUcontext dflt = atomic_load_explicit(&g_first_ctx, memory_order_acquire);
        if (dflt != NULL && MXA_CU(cuCtxSetCurrent)(dflt) == CUDA_SUCCESS)
            cur = dflt;
    }
    if (buf == NULL)
        return MX_OK;
    CUcontext bc = NULL;
    unsigned int memtype = 0, managed = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_CONTEXT,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[4] = {&memtype, &managed, &bc, &ordinal};
    CUresult r = MXA_CU(cuPointerGetAttributes)(4, attrs, data, (CUdeviceptr)(uintptr_t)buf);
    if (r != CUDA_SUCCESS || (!managed && memtype != CU_MEMORYTYPE_DEVICE))
        return MX_OK; /* host memory: the default context (if any) will do */
    if (bc == NULL) {
        /* Memory not tied to a context (cuMemCreate/VMM, memory pools):
         * the primary context of its device. */
        if (ordinal < 0 || ordinal >= g.ndev)
            MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: no context or device for buffer %p", buf);
        pthread_mutex_lock(&g.lock);
        cuda_dev_t *d = &g.devs[ordinal];
        if (d->primary == NULL) {
            r = MXA_CU(cuDevicePrimaryCtxRetain)(&d->primary, d->dev);
            if (r != CUDA_SUCCESS) {
                d->primary = NULL;
                pthread_mutex_unlock(&g.lock);
                MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: cannot retain the primary context of "
                        "device %d: %s", ordinal, cu_err(r));
            }
        }
        bc = d->primary;
        pthread_mutex_unlock(&g.lock);
    }
    if (cur == bc)
        return MX_OK;
    r = MXA_CU(cuCtxSetCurrent)(bc);
    if (r != CUDA_SUCCESS)
        MX_FAIL(MX_ERR_NO_DEVICE, "CUDA backend: cannot make the context of buffer %p current: %s",
                buf, cu_err(r));
    return MX_OK;
}

/* ---------------------------------------------------------------- init */

static void set_mode(void)
{
    int fallback_reason_config = !mxu_config.memops;
    int n64 = 0;
    for (int i = 0; i < g.ndev; i++)
        n64 += g.devs[i].memops64 != 0;
    g.memops_all = !fallback_reason_config && n64 == g.ndev &&
                   MXA_CU(cuStreamWriteValue64) != NULL && MXA_CU(cuStreamWaitValue64) != NULL &&
                   MXA_CU(cuStreamBatchMemOp) != NULL;
    if (g.memops_all)
        snprintf(g.mode, sizeof(g.mode), "memops");
    else if (fallback_reason_config)
        snprintf(g.mode, sizeof(g.mode), "kernel-fallback (MPIX_ACC_MEMOPS=0)");
    else if (n64 == 0 || MXA_CU(cuStreamWriteValue64) == NULL)
        snprintf(g.mode, sizeof(g.mode), "kernel-fallback (no 64-bit stream memops)");
    else
        snprintf(g.mode, sizeof(g.mode), "memops on %d/%d devices, else kernel-fallback",
                 n64 % 1000, g.ndev % 1000);
}

static int dev_attr(CUdevice d, CUdevice_attribute a)
{
    int v = 0;
    if (MXA_CU(cuDeviceGetAttribute)(&v, a, d) != CUDA_SUCCESS)
        return 0;
    return v;
}

mx_status_t mxa_cuda_init(void)
{
    pthread_mutex_lock(&g.lock);
    if (g.tried) {
        int active = atomic_load(&g_active);
        pthread_mutex_unlock(&g.lock);
        return active ? MX_OK : MX_ERR_NO_DEVICE;
    }
    g.tried = 1;
    snprintf(g.mode, sizeof(g.mode), "off");
    if (!mxu_config.cuda) {
        snprintf(g.mode, sizeof(g.mode), "off: disabled by MPIX_ACC_CUDA=0");
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend off: disabled by MPIX_ACC_CUDA=0");
        pthread_mutex_unlock(&g.lock);
        return MX_ERR_NO_DEVICE;
    }
    if (load_driver(g.mode, sizeof(g.mode)) != 0) {
        pthread_mutex_unlock(&g.lock);
        return MX_ERR_NO_DEVICE;
    }
    CUresult r = MXA_CU(cuInit)(0);
    if (r != CUDA_SUCCESS) {
        snprintf(g.mode, sizeof(g.mode), "off: cuInit: %s", cu_err(r));
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend off: cuInit failed: %s", cu_err(r));
        goto off;
    }
    MXA_CU(cuDriverGetVersion)(&g.driver_version);
    int n = 0;
    r = MXA_CU(cuDeviceGetCount)(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(g.mode, sizeof(g.mode), "off: no CUDA device");
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend off: no CUDA device (%s)",
                     r != CUDA_SUCCESS ? cu_err(r) : "count 0");
        goto off;
    }
    g.devs = calloc((size_t)n, sizeof(*g.devs));
    if (g.devs == NULL) {
        snprintf(g.mode, sizeof(g.mode), "off: out of memory");
        goto off;
    }
    g.ndev = n;
    for (int i = 0; i < n; i++) {
        cuda_dev_t *d = &g.devs[i];
        r = MXA_CU(cuDeviceGet)(&d->dev, i);
        if (r != CUDA_SUCCESS) {
            snprintf(g.mode, sizeof(g.mode), "off: cuDeviceGet(%d): %s", i, cu_err(r));
            goto off;
        }
        if (MXA_CU(cuDeviceGetName)(d->name, (int)sizeof(d->name), d->dev) != CUDA_SUCCESS)
            snprintf(d->name, sizeof(d->name), "?");
        if (MXA_CU(cuDeviceGetPCIBusId)(d->busid, (int)sizeof(d->busid), d->dev) != CUDA_SUCCESS)
            d->busid[0] = '\0';
        for (char *p = d->busid; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        d->memops64 = dev_attr(d->dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
        if (!d->memops64) /* drivers before CUDA 12 only know the V1 attribute */
            d->memops64 = dev_attr(d->dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1);
        d->flush = dev_attr(d->dev, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES);
        d->uva = dev_attr(d->dev, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
        if (!d->uva) {
            snprintf(g.mode, sizeof(g.mode), "off: device %d lacks unified addressing", i);
            MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend off: device %d (%s) lacks unified addressing",
                         i, d->name);
            goto off;
        }
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: device %d %s %s: 64-bit memops %d, flush %d", i,
                     d->name, d->busid, d->memops64, d->flush);
    }
    if (mxu_locked_map_init(&g.map) != MX_OK) {
        snprintf(g.mode, sizeof(g.mode), "off: out of memory");
        goto off;
    }
    g.map_ok = 1;
    set_mode();
    ipc_ctx_setup();
    atomic_store(&g_active, 1);
    MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend active: driver %d, %d device(s), %s",
                 g.driver_version, g.ndev, g.mode);
    if (MXA_CU(cuModuleGetLoadingMode) != NULL) {
        CUmoduleLoadingMode lm;
        if (MXA_CU(cuModuleGetLoadingMode)(&lm) == CUDA_SUCCESS && lm == CU_MODULE_LAZY_LOADING)
            MPIX_ACC_LOG(MX_LOG_INFO,
                         "CUDA lazy module loading is on: the library loads its own kernels "
                         "eagerly; load application kernels before they are enqueued behind "
                         "a stream wait (or set CUDA_MODULE_LOADING=EAGER)");
    }
    /* Set up the calling thread's context now, so its kernels are loaded
     * before any stream point exists. */
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur != NULL) {
        cuda_ctx_t *cx;
        if (ctx_get(cur, &cx) != MX_OK)
            MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: set-up of the current context failed; "
                         "it is retried at its first stream");
        if (tl_new_ctx != NULL) /* warmed up by the engine's start (mxt_warm_up) */
            atomic_store(&tl_new_ctx->warm, 1);
        tl_new_ctx = NULL;
    }
    pthread_mutex_unlock(&g.lock);
    return MX_OK;

off:
    free(g.devs);
    g.devs = NULL;
    g.ndev = 0;
    pthread_mutex_unlock(&g.lock);
    return MX_ERR_NO_DEVICE;
}

int mxa_cuda_active(void)
{
    return atomic_load_explicit(&g_active, memory_order_acquire);
}

static void ipc_report(void);

void mxa_cuda_finalize(void)
{
    ipc_report();
    pthread_mutex_lock(&g.lock);
    if (!g.tried) {
        pthread_mutex_unlock(&g.lock);
        return;
    }
    if (atomic_load(&g_active)) {
        atomic_store(&g_active, 0);
        /* The pinned sequence words and the kernel modules stay until the
         * process exits (the driver frees them then). Whether every stream
         * has passed its last point cannot be asked safely: the application
         * may have destroyed its streams, and a destroyed CUstream must not
         * be passed to the driver (undefined behaviour: the suspected cause
         * of the SIGSEGV at exit seen on the H100 in any_source, 2026-11-22,
         * not yet confirmed there). Freeing words a stream may still read
         * could fault the GPU. */
        size_t nslabs = 0;
        for (slab_t *sl = g.slabs; sl != NULL; sl = sl->next)
            nslabs++;
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: finalize keeps %zu KiB of pinned sequence "
                     "words and the kernel modules until the process exits",
                     nslabs * SLAB_BYTES / 1024);
        if (g.primary0_retained)
            MXA_CU(cuDevicePrimaryCtxRelease)(g.devs[0].dev);
        for (int i = 0; i < g.ndev; i++)
            if (g.devs[i].primary != NULL)
                MXA_CU(cuDevicePrimaryCtxRelease)(g.devs[i].dev);
        while (g.slabs != NULL) {
            slab_t *sl = g.slabs;
            g.slabs = sl->next;
            free(sl);
        }
        while (g.streams != NULL) {
            cuda_stream_t *cs = g.streams;
            g.streams = cs->next;
            free(cs);
        }
        while (g.ctxs != NULL) {
            cuda_ctx_t *cx = g.ctxs;
            g.ctxs = cx->next;
            free(cx);
        }
        if (g.map_ok)
            mxu_locked_map_destroy(&g.map);
        g.map_ok = 0;
    }
    free(g.devs);
    g.devs = NULL;
    g.ndev = 0;
    g.primary0 = NULL;
    g.primary0_retained = 0;
    atomic_store(&g_first_ctx, NULL);
    /* libcuda stays loaded: the application (cudart) uses it too. */
    g.tried = 0;
    pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------------- reports */

void mxa_cuda_get_features(mxa_features_t *out)
{
    if (out == NULL)
        return;
    pthread_mutex_lock(&g.lock);
    out->cuda_built = 1;
    out->cuda_active = atomic_load(&g_active);
    out->cuda_device_count = g.ndev;
    int memops_ctx = 0, ctxs = 0;
    for (cuda_ctx_t *cx = g.ctxs; cx != NULL; cx = cx->next) {
        if (cx->stale)
            continue;
        ctxs++;
        memops_ctx += cx->memops;
    }
    /* memops in use: every context set up so far uses them (before any
     * context exists: what the devices and settings allow). */
    out->cuda_memops = out->cuda_active && (ctxs > 0 ? memops_ctx == ctxs : g.memops_all);
    if (g.driver_version > 0)
        snprintf(out->cuda_driver, sizeof(out->cuda_driver), "%d (CUDA %d.%d)",
                 g.driver_version, g.driver_version / 1000, (g.driver_version % 1000) / 10);
    else
        out->cuda_driver[0] = '\0';
    if (out->cuda_active && ctxs > 0 && memops_ctx < ctxs && g.memops_all)
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "kernel-fallback (memops self-test "
                 "failed: %d/%d ctx)", (ctxs - memops_ctx) % 1000, ctxs % 1000);
    else
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "%s", g.mode);
    out->cuda_ipc[0] = '\0';
    if (out->cuda_active)
        ipc_describe(out->cuda_ipc, sizeof(out->cuda_ipc));
    pthread_mutex_unlock(&g.lock);
}

void mxa_cuda_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg)
{
    if (fn == NULL)
        return;
    /* Snapshot under the lock, call without it (fn may look streams up).
     * Records are not freed before mxa_cuda_finalize(). */
    pthread_mutex_lock(&g.lock);
    size_t n = 0;
    for (cuda_stream_t *cs = g.streams; cs != NULL; cs = cs->next)
        n++;
    cuda_stream_t **v = n ? malloc(n * sizeof(*v)) : NULL;
    size_t i = 0;
    if (v != NULL)
        for (cuda_stream_t *cs = g.streams; cs != NULL; cs = cs->next)
            v[i++] = cs;
    pthread_mutex_unlock(&g.lock);
    if (n != 0 && v == NULL) {
        MPIX_ACC_LOG(MX_LOG_ERROR, "CUDA backend: out of memory listing streams");
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
    if (cs->ctx == NULL || cs->ctx->dev_index < 0 || g.devs == NULL)
        return NULL;
    const char *b = g.devs[cs->ctx->dev_index].busid;
    return b[0] ? b : NULL;
}

const char *mxa_cuda_current_pci_busid(void)
{
    if (!atomic_load_explicit(&g_active, memory_order_acquire))
        return NULL;
    CUdevice dev;
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) != CUDA_SUCCESS || cur == NULL ||
        MXA_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS)
        return NULL;
    for (int i = 0; i < g.ndev; i++)
        if (g.devs[i].dev == dev)
            return g.devs[i].busid[0] ? g.devs[i].busid : NULL;
    return NULL;
}

/* ------------------------------------------ peers' memory, mapped apart */

/*
 * UCX's cuda_ipc transport maps a peer process's device buffer with
 * cuIpcOpenMemHandle in the context current on the calling thread (our
 * progress thread, with the primary context of the local buffer's device
 * pushed: the application's context) and unmaps it with cuIpcCloseMemHandle
 * when the peer reuses the virtual address for a new allocation, or the
 * cache evicts it. Unmapping holds the context's lock while it waits for
 * the context to be idle; an application stream of that context may be
 * blocked at a wait that only the progress thread can release, so the
 * progress thread deadlocked (2xH200, any_source: the progress thread in
 * cuIpcCloseMemHandle under uct_cuda_ipc_map_memhandle, the application
 * thread in cuLaunchKernel waiting for that lock; doc/gpu-testing.md).
 * Deferring the unmap does not work: the driver refuses the new mapping
 * (CUDA_ERROR_ALREADY_MAPPED) until the old one is gone.
 *
 * So the library exports both functions (libmpixacc-cuda.map; UCX's module
 * links them by name, the dynamic linker binds them here) and makes UCX's
 * mappings in a context of its own on the same device, created at the
 * first mapping and never running work: unmapping there waits for nothing
 * of the application's. Copies from the mapping still run on UCX's streams
 * in the application's context (unified addressing). Only calls made from
 * UCX's cuda module are redirected (the caller's address, dladdr): an
 * application that calls the driver's IPC functions itself gets the
 * driver's behaviour. When the library's context cannot map a handle (the
 * driver allows one context per device and peer process: another user of
 * the same peer's memory got there first) the mapping is made in the
 * current context as UCX would. MPIX_ACC_IPC_CONTEXT=0 turns it all off.
 * The contexts live until the process exits (UCX unmaps its cache at
 * unload, after MPI_Finalize).
 */
#define IPC_MAX_DEV 64

/* cuCtxCreate_v4 (CUDA >= 12.5), whatever the toolkit's <cuda.h> maps the
 * name to. */
typedef CUresult (*ctx_create_v4_fn)(CUcontext *, void *, unsigned int, CUdevice);

static struct {
    pthread_mutex_t lock;       /* contexts and mappings */
    _Atomic int enabled;
    ctx_create_v4_fn create;
    CUcontext ctx[IPC_MAX_DEV]; /* by device ordinal */
    int failed[IPC_MAX_DEV];    /* creation failures so far (retried) */
    mxa_ipc_table_t mapped;     /* the library contexts' mappings (ipc_table.h) */
    int map_ok;
    unsigned long opened, closed, fallbacks, reused;
} ipcx = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The driver's own function `name` when the backend has not loaded the
 * table (backend off: a second handle on the libcuda.so.1 that UCX loaded),
 * looked up once into *cache. */
static void *driver_fn(void **cache, const char *name)
{
    void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (p == NULL) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        p = lib ? dlsym(lib, name) : NULL;
        if (lib)
            dlclose(lib);
        __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    }
    return p;
}

static void ipc_ctx_setup(void)
{
    if (!mxu_config.ipc_context || MXA_CU(cuIpcOpenMemHandle) == NULL ||
        MXA_CU(cuIpcCloseMemHandle) == NULL)
        return;
    void *p = g.lib != NULL ? driver_proc(g.lib, "cuCtxCreate", 12050, "cuCtxCreate_v4") : NULL;
    if (p == NULL) {
        MPIX_ACC_LOG(MX_LOG_INFO, "CUDA backend: the driver lacks cuCtxCreate_v4: peers' "
                     "buffers are mapped in the application's context");
        return;
    }
    pthread_mutex_lock(&ipcx.lock);
    memcpy(&ipcx.create, &p, sizeof(p));
    if (!ipcx.map_ok && mxa_ipc_table_init(&ipcx.mapped) == MX_OK)
        ipcx.map_ok = 1;
    pthread_mutex_unlock(&ipcx.lock);
    if (ipcx.map_ok)
        atomic_store(&ipcx.enabled, 1);
}

/* Whether the call comes from UCX's cuda module (libuct_cuda). */
static int ipc_called_by_ucx(const void *ret_addr)
{
    Dl_info di;
    if (dladdr(ret_addr, &di) == 0 || di.dli_fname == NULL)
        return 0;
    const char *base = strrchr(di.dli_fname, '/');
    return strncmp(base ? base + 1 : di.dli_fname, "libuct_cuda", 11) == 0;
}

/* The library's mapping context of device `dev` (created at the first
 * call; ipcx.lock held), or NULL. A failed creation is retried at later
 * calls (it can fail transiently, e.g. during another thread's global-mode
 * stream capture); the first failure is logged. */
static CUcontext ipc_ctx_of_locked(CUdevice dev)
{
    if ((int)dev < 0 || (int)dev >= IPC_MAX_DEV)
        return NULL;
    if (ipcx.ctx[dev] != NULL || ipcx.create == NULL)
        return ipcx.ctx[dev];
    CUcontext c = NULL, prev;
    CUresult r = ipcx.create(&c, NULL, 0, dev); /* pushes c */
    if (r == CUDA_SUCCESS) {
        MXA_CU(cuCtxPopCurrent)(&prev);
        ipcx.ctx[dev] = c;
        MPIX_ACC_LOG(MX_LOG_DEBUG, "CUDA backend: context %p of device %d for peers' mappings "
                     "(cuda_ipc)", (void *)c, (int)dev);
        return c;
    }
    if (ipcx.failed[dev]++ == 0)
        MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: no context of its own on device %d for peers' "
                     "mappings (%s): UCX maps them in the application's context, where a peer "
                     "freeing a buffer it sent from can deadlock a stream wait",
                     (int)dev, cu_err(r));
    return NULL;
}

/* cuIpcOpenMemHandle_v2 (<cuda.h> renames it), exported for UCX. */
__attribute__((visibility("default"))) CUresult CUDAAPI
cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    static void *cached;
    __typeof__(&cuIpcOpenMemHandle) real = MXA_CU(cuIpcOpenMemHandle);
    if (real == NULL) {
        void *p = driver_fn(&cached, "cuIpcOpenMemHandle_v2");
        memcpy(&real, &p, sizeof(p));
        if (real == NULL)
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    CUdevice dev;
    if (!atomic_load_explicit(&ipcx.enabled, memory_order_acquire) ||
        MXA_CU(cuCtxGetDevice) == NULL || MXA_CU(cuCtxPushCurrent) == NULL ||
        MXA_CU(cuCtxPopCurrent) == NULL || !ipc_called_by_ucx(__builtin_return_address(0)) ||
        MXA_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS)
        return real(pdptr, handle, flags);
    _Static_assert(sizeof(CUipcMemHandle) == MXA_IPC_HANDLE_BYTES, "IPC handle size");
    pthread_mutex_lock(&ipcx.lock);
    CUcontext own = ipc_ctx_of_locked(dev);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    uint64_t addr;
    if (own != NULL && mxa_ipc_table_reuse(&ipcx.mapped, &handle, own, &addr)) {
        /* already open there (e.g. by the MPI library's UCX context): the
         * driver would refuse a second open (CUDA_ERROR_ALREADY_MAPPED) */
        *pdptr = (CUdeviceptr)addr;
        ipcx.opened++;
        ipcx.reused++;
        pthread_mutex_unlock(&ipcx.lock);
        return CUDA_SUCCESS;
    }
    if (own != NULL && MXA_CU(cuCtxPushCurrent)(own) == CUDA_SUCCESS) {
        r = real(pdptr, handle, flags);
        CUcontext prev;
        MXA_CU(cuCtxPopCurrent)(&prev);
        if (r == CUDA_SUCCESS) {
            if (mxa_ipc_table_add(&ipcx.mapped, &handle, own, (uint64_t)*pdptr) != MX_OK) {
                MXA_CU(cuCtxPushCurrent)(own);
                MXA_CU(cuIpcCloseMemHandle)(*pdptr);
                MXA_CU(cuCtxPopCurrent)(&prev);
                pthread_mutex_unlock(&ipcx.lock);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            ipcx.opened++;
            pthread_mutex_unlock(&ipcx.lock);
            return CUDA_SUCCESS;
        }
    }
    if (own != NULL && ipcx.fallbacks++ == 0)
        MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: a peer's buffer cannot be mapped in the "
                     "library's context of device %d (%s): mapped in the application's",
                     (int)dev, cu_err(r));
    pthread_mutex_unlock(&ipcx.lock);
    return real(pdptr, handle, flags);
}

/* Exported for UCX: a mapping made in the library's context is unmapped
 * there (at its last close); anything else as the caller asked. */
__attribute__((visibility("default"))) CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    static void *cached;
    __typeof__(&cuIpcCloseMemHandle) real = MXA_CU(cuIpcCloseMemHandle);
    if (real == NULL) {
        void *p = driver_fn(&cached, "cuIpcCloseMemHandle");
        memcpy(&real, &p, sizeof(p));
        if (real == NULL)
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!atomic_load_explicit(&ipcx.enabled, memory_order_acquire) ||
        MXA_CU(cuCtxPushCurrent) == NULL || MXA_CU(cuCtxPopCurrent) == NULL)
        return real(dptr);
    pthread_mutex_lock(&ipcx.lock);
    void *ctx = NULL;
    int driver_close = 0;
    if (!mxa_ipc_table_release(&ipcx.mapped, (uint64_t)dptr, &ctx, &driver_close)) {
        pthread_mutex_unlock(&ipcx.lock);
        return real(dptr);
    }
    CUresult r = CUDA_SUCCESS;
    if (driver_close) { /* the last reference of one driver open */
        r = MXA_CU(cuCtxPushCurrent)((CUcontext)ctx);
        if (r == CUDA_SUCCESS) {
            r = real(dptr);
            CUcontext prev;
            MXA_CU(cuCtxPopCurrent)(&prev);
        }
        if (r != CUDA_SUCCESS)
            MPIX_ACC_LOG(MX_LOG_WARN, "CUDA backend: unmapping a peer's buffer at 0x%llx in the "
                         "library's context failed: %s", (unsigned long long)dptr, cu_err(r));
    }
    ipcx.closed++;
    pthread_mutex_unlock(&ipcx.lock);
    return r;
}

/* At finalize (info level): what the IPC redirection did in this process. */
static void ipc_report(void)
{
    pthread_mutex_lock(&ipcx.lock);
    if (atomic_load(&ipcx.enabled) && (ipcx.opened || ipcx.fallbacks))
        MPIX_ACC_LOG(MX_LOG_INFO, "peers' buffers: %lu mapped in the library's contexts (%lu of "
                     "them already open there), %lu unmapped, %lu mapped in the application's "
                     "context instead", ipcx.opened, ipcx.reused, ipcx.closed, ipcx.fallbacks);
    pthread_mutex_unlock(&ipcx.lock);
}

static void ipc_describe(char *buf, size_t len)
{
    pthread_mutex_lock(&ipcx.lock);
    if (atomic_load(&ipcx.enabled))
        snprintf(buf, len, "library's own context per device (%lu mapped, %lu of them already "
                 "open there, %lu unmapped so far)", ipcx.opened, ipcx.reused, ipcx.closed);
    else if (mxu_config.ipc_context)
        snprintf(buf, len, "application's context (no cuCtxCreate_v4 in the driver)");
    else
        snprintf(buf, len, "application's context (MPIX_ACC_IPC_CONTEXT=0)");
    pthread_mutex_unlock(&ipcx.lock);
}

#else /* !MPIXACC_HAVE_CUDA */

/* ISO C forbids an empty translation unit. */
typedef int mxa_cuda_unused_t;

#endif

