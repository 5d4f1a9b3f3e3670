/*
 * cuda.c - the CUDA accelerator backend (see accel.h): stream points on a
 * cudaStream_t / CUstream as stream memory operations on 64-bit sequence
 * words in host-mapped pinned memory, with a one-thread-kernel fallback.
 *
 * Driver. libcuda.so.1 is dlopen()ed at mxa_cuda_init() and every entry point
 * is fetched with cuGetProcAddress (cuda_driver.h); the library never links
 * libcuda or libcudart, so a CUDA build runs on machines without a driver:
 * the backend then reports itself off (MXU_ERR_NO_DEVICE, info log) and the
 * library uses host streams only.
 *
 * This file: the backend's state, driver loading, mxa_cuda_init/finalize
 * and the reports. Contexts: cuda_ctx.c; streams and stream points:
 * cuda_stream.c; memory types: cuda_mem.c; peers' memory (the exported
 * cuIpc* functions): cuda_ipc.c; shared declarations: cuda_priv.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/settings.h"

mxa_cu_api_t mxa_cu;

mxa_cuda_state_t mxa_cuda_g = {.lock = PTHREAD_MUTEX_INITIALIZER,
                               .warm_cv = PTHREAD_COND_INITIALIZER};
_Atomic int mxa_cuda_g_active;
_Thread_local struct cuda_ctx *mxa_cuda_tl_new_ctx;
_Atomic(CUcontext) mxa_cuda_g_first_ctx;

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
void *mxa_cuda_driver_proc(void *lib, const char *name, int since, const char *dlname)
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
        MXU_LOG(MXU_LOG_INFO, "CUDA backend: cannot load libcuda.so.1 (%s)", e != NULL ? e : "?");
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
#define MXA_CU_LOAD_(name, req, since)                                                             \
    do {                                                                                           \
        void *fp_ = mxa_cuda_driver_proc(lib, #name, (since), MXA_XSTR(name));                     \
        if (fp_ == NULL && (req) && missing == NULL)                                               \
            missing = #name;                                                                       \
        memcpy(&mxa_cu.f_##name, &fp_, sizeof(fp_));                                               \
    } while (0);
    MXA_CU_FUNCS(MXA_CU_LOAD_)
#undef MXA_CU_LOAD_
    if (missing != NULL) {
        MXU_LOG(MXU_LOG_INFO, "CUDA backend: the driver lacks %s (too old?)", missing);
        snprintf(why, whylen, "off: driver lacks %s", missing);
        dlclose(lib);
        memset(&mxa_cu, 0, sizeof(mxa_cu));
        return -1;
    }
    mxa_cuda_g.lib = lib;
    return 0;
}

/* ---------------------------------------------------------------- init */

static void set_mode(void)
{
    int fallback_reason_config = !mxu_config.memops;
    int n64 = 0;
    for (int i = 0; i < mxa_cuda_g.ndev; i++)
        n64 += mxa_cuda_g.devs[i].memops64 != 0;
    mxa_cuda_g.memops_all =
        !fallback_reason_config && n64 == mxa_cuda_g.ndev && MXA_CU(cuStreamWriteValue64) != NULL &&
        MXA_CU(cuStreamWaitValue64) != NULL && MXA_CU(cuStreamBatchMemOp) != NULL;
    if (mxa_cuda_g.memops_all)
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "memops");
    else if (fallback_reason_config)
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "kernel-fallback (MPIX_ACC_MEMOPS=0)");
    else if (n64 == 0 || MXA_CU(cuStreamWriteValue64) == NULL)
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode),
                 "kernel-fallback (no 64-bit stream memops)");
    else
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode),
                 "memops on %d/%d devices, else kernel-fallback", n64 % 1000,
                 mxa_cuda_g.ndev % 1000);
}

static int dev_attr(CUdevice d, CUdevice_attribute a)
{
    int v = 0;
    if (MXA_CU(cuDeviceGetAttribute)(&v, a, d) != CUDA_SUCCESS)
        return 0;
    return v;
}

/* Describe device i in mxa_cuda_g.devs[i]; -1 (mode set) when the backend
 * cannot use it. mxa_cuda_g.lock held. */
static int init_device(int i)
{
    cuda_dev_t *d = &mxa_cuda_g.devs[i];
    CUresult r = MXA_CU(cuDeviceGet)(&d->dev, i);
    if (r != CUDA_SUCCESS) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: cuDeviceGet(%d): %s", i,
                 cu_err(r));
        return -1;
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
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode),
                 "off: device %d lacks unified addressing", i);
        MXU_LOG(MXU_LOG_WARN, "CUDA backend off: device %d (%s) lacks unified addressing", i,
                d->name);
        return -1;
    }
    MXU_LOG(MXU_LOG_DEBUG, "CUDA backend: device %d %s %s: 64-bit memops %d, flush %d", i, d->name,
            d->busid, d->memops64, d->flush);
    return 0;
}

/* cuInit and the device table; -1 (mode set, logged) when the backend
 * stays off. mxa_cuda_g.lock held. */
static int init_devices(void)
{
    CUresult r = MXA_CU(cuInit)(0);
    if (r != CUDA_SUCCESS) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: cuInit: %s", cu_err(r));
        MXU_LOG(MXU_LOG_INFO, "CUDA backend off: cuInit failed: %s", cu_err(r));
        return -1;
    }
    MXA_CU(cuDriverGetVersion)(&mxa_cuda_g.driver_version);
    int n = 0;
    r = MXA_CU(cuDeviceGetCount)(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: no CUDA device");
        MXU_LOG(MXU_LOG_INFO, "CUDA backend off: no CUDA device (%s)",
                r != CUDA_SUCCESS ? cu_err(r) : "count 0");
        return -1;
    }
    mxa_cuda_g.devs = calloc((size_t)n, sizeof(*mxa_cuda_g.devs));
    if (mxa_cuda_g.devs == NULL) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: out of memory");
        return -1;
    }
    mxa_cuda_g.ndev = n;
    for (int i = 0; i < n; i++)
        if (init_device(i) != 0)
            return -1;
    return 0;
}

static void log_lazy_loading(void)
{
    if (MXA_CU(cuModuleGetLoadingMode) != NULL) {
        CUmoduleLoadingMode lm;
        if (MXA_CU(cuModuleGetLoadingMode)(&lm) == CUDA_SUCCESS && lm == CU_MODULE_LAZY_LOADING)
            MXU_LOG(MXU_LOG_INFO,
                    "CUDA lazy module loading is on: the library loads its own kernels "
                    "eagerly; load application kernels before they are enqueued behind "
                    "a stream wait (or set CUDA_MODULE_LOADING=EAGER)");
    }
}

/* Set up the calling thread's context now, so its kernels are loaded
 * before any stream point exists. mxa_cuda_g.lock held. */
static void setup_current_context(void)
{
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur != NULL) {
        cuda_ctx_t *cx;
        if (mxa_cuda_ctx_get(cur, &cx) != MXU_OK)
            MXU_LOG(MXU_LOG_WARN, "CUDA backend: set-up of the current context failed; "
                                  "it is retried at its first stream");
        if (mxa_cuda_tl_new_ctx != NULL) /* warmed up by the engine's start (mxt_warm_up) */
            atomic_store(&mxa_cuda_tl_new_ctx->warm, 1);
        mxa_cuda_tl_new_ctx = NULL;
    }
}

mxu_status_t mxa_cuda_init(void)
{
    pthread_mutex_lock(&mxa_cuda_g.lock);
    if (mxa_cuda_g.tried) {
        int active = atomic_load(&mxa_cuda_g_active);
        pthread_mutex_unlock(&mxa_cuda_g.lock);
        return active ? MXU_OK : MXU_ERR_NO_DEVICE;
    }
    mxa_cuda_g.tried = 1;
    snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off");
    if (!mxu_config.cuda) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: disabled by MPIX_ACC_CUDA=0");
        MXU_LOG(MXU_LOG_INFO, "CUDA backend off: disabled by MPIX_ACC_CUDA=0");
        pthread_mutex_unlock(&mxa_cuda_g.lock);
        return MXU_ERR_NO_DEVICE;
    }
    if (load_driver(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode)) != 0) {
        pthread_mutex_unlock(&mxa_cuda_g.lock);
        return MXU_ERR_NO_DEVICE;
    }
    if (init_devices() != 0)
        goto off;
    if (mxu_locked_map_init(&mxa_cuda_g.map) != MXU_OK) {
        snprintf(mxa_cuda_g.mode, sizeof(mxa_cuda_g.mode), "off: out of memory");
        goto off;
    }
    mxa_cuda_g.map_ok = 1;
    set_mode();
    mxa_cuda_ipc_ctx_setup();
    atomic_store(&mxa_cuda_g_active, 1);
    MXU_LOG(MXU_LOG_INFO, "CUDA backend active: driver %d, %d device(s), %s",
            mxa_cuda_g.driver_version, mxa_cuda_g.ndev, mxa_cuda_g.mode);
    log_lazy_loading();
    setup_current_context();
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    return MXU_OK;

off:
    free(mxa_cuda_g.devs);
    mxa_cuda_g.devs = NULL;
    mxa_cuda_g.ndev = 0;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    return MXU_ERR_NO_DEVICE;
}

int mxa_cuda_active(void) { return atomic_load_explicit(&mxa_cuda_g_active, memory_order_acquire); }

void mxa_cuda_finalize(void)
{
    mxa_cuda_ipc_report();
    pthread_mutex_lock(&mxa_cuda_g.lock);
    if (!mxa_cuda_g.tried) {
        pthread_mutex_unlock(&mxa_cuda_g.lock);
        return;
    }
    if (atomic_load(&mxa_cuda_g_active)) {
        atomic_store(&mxa_cuda_g_active, 0);
        /* The pinned sequence words and the kernel modules stay until the
         * process exits (the driver frees them then). Whether every stream
         * has passed its last point cannot be asked safely: the application
         * may have destroyed its streams, and a destroyed CUstream must not
         * be passed to the driver (undefined behaviour: the suspected cause
         * of the SIGSEGV at exit seen on the H100 in any_source, 2026-11-22,
         * not yet confirmed there). Freeing words a stream may still read
         * could fault the GPU. */
        size_t nslabs = 0;
        for (slab_t *sl = mxa_cuda_g.slabs; sl != NULL; sl = sl->next)
            nslabs++;
        MXU_LOG(MXU_LOG_DEBUG,
                "CUDA backend: finalize keeps %zu KiB of pinned sequence "
                "words and the kernel modules until the process exits",
                nslabs * SLAB_BYTES / 1024);
        if (mxa_cuda_g.primary0_retained)
            MXA_CU(cuDevicePrimaryCtxRelease)(mxa_cuda_g.devs[0].dev);
        for (int i = 0; i < mxa_cuda_g.ndev; i++)
            if (mxa_cuda_g.devs[i].primary != NULL)
                MXA_CU(cuDevicePrimaryCtxRelease)(mxa_cuda_g.devs[i].dev);
        while (mxa_cuda_g.slabs != NULL) {
            slab_t *sl = mxa_cuda_g.slabs;
            mxa_cuda_g.slabs = sl->next;
            free(sl);
        }
        while (mxa_cuda_g.streams != NULL) {
            cuda_stream_t *cs = mxa_cuda_g.streams;
            mxa_cuda_g.streams = cs->next;
            free(cs);
        }
        while (mxa_cuda_g.ctxs != NULL) {
            cuda_ctx_t *cx = mxa_cuda_g.ctxs;
            mxa_cuda_g.ctxs = cx->next;
            free(cx);
        }
        if (mxa_cuda_g.map_ok)
            mxu_locked_map_destroy(&mxa_cuda_g.map);
        mxa_cuda_g.map_ok = 0;
    }
    free(mxa_cuda_g.devs);
    mxa_cuda_g.devs = NULL;
    mxa_cuda_g.ndev = 0;
    mxa_cuda_g.primary0 = NULL;
    mxa_cuda_g.primary0_retained = 0;
    atomic_store(&mxa_cuda_g_first_ctx, NULL);
    /* libcuda stays loaded: the application (cudart) uses it too. */
    mxa_cuda_g.tried = 0;
    pthread_mutex_unlock(&mxa_cuda_g.lock);
}

/* ------------------------------------------------------------- reports */

void mxa_cuda_get_features(mxa_features_t *out)
{
    if (out == NULL)
        return;
    pthread_mutex_lock(&mxa_cuda_g.lock);
    out->cuda_built = 1;
    out->cuda_active = atomic_load(&mxa_cuda_g_active);
    out->cuda_device_count = mxa_cuda_g.ndev;
    int memops_ctx = 0, ctxs = 0;
    for (cuda_ctx_t *cx = mxa_cuda_g.ctxs; cx != NULL; cx = cx->next) {
        if (cx->stale)
            continue;
        ctxs++;
        memops_ctx += cx->memops;
    }
    /* memops in use: every context set up so far uses them (before any
     * context exists: what the devices and settings allow). */
    out->cuda_memops = out->cuda_active && (ctxs > 0 ? memops_ctx == ctxs : mxa_cuda_g.memops_all);
    if (mxa_cuda_g.driver_version > 0)
        snprintf(out->cuda_driver, sizeof(out->cuda_driver), "%d (CUDA %d.%d)",
                 mxa_cuda_g.driver_version, mxa_cuda_g.driver_version / 1000,
                 (mxa_cuda_g.driver_version % 1000) / 10);
    else
        out->cuda_driver[0] = '\0';
    if (out->cuda_active && ctxs > 0 && memops_ctx < ctxs && mxa_cuda_g.memops_all)
        snprintf(out->cuda_mode, sizeof(out->cuda_mode),
                 "kernel-fallback (memops self-test "
                 "failed: %d/%d ctx)",
                 (ctxs - memops_ctx) % 1000, ctxs % 1000);
    else
        snprintf(out->cuda_mode, sizeof(out->cuda_mode), "%s", mxa_cuda_g.mode);
    out->cuda_ipc[0] = '\0';
    if (out->cuda_active)
        mxa_cuda_ipc_describe(out->cuda_ipc, sizeof(out->cuda_ipc));
    pthread_mutex_unlock(&mxa_cuda_g.lock);
}

const char *mxa_cuda_current_pci_busid(void)
{
    if (!atomic_load_explicit(&mxa_cuda_g_active, memory_order_acquire))
        return NULL;
    CUdevice dev;
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) != CUDA_SUCCESS || cur == NULL ||
        MXA_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS)
        return NULL;
    for (int i = 0; i < mxa_cuda_g.ndev; i++)
        if (mxa_cuda_g.devs[i].dev == dev)
            return mxa_cuda_g.devs[i].busid[0] ? mxa_cuda_g.devs[i].busid : NULL;
    return NULL;
}

#else /* !MPIXACC_HAVE_CUDA */

/* ISO C forbids an empty translation unit. */
typedef int mxa_cuda_unused_t;

#endif
