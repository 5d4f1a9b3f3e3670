/*
 * cuda_ipc.c - CUDA backend (cuda.c): the exported cuIpcOpenMemHandle_v2 /
 * cuIpcCloseMemHandle (libmpixacc-cuda.map) that map peers' buffers in a
 * context of the library's own; the mappings are kept in ipc_table.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <dlfcn.h>
#include <string.h>

#include "accel/ipc_table.h"
#include "util/log.h"
#include "util/settings.h"

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
 * current context as UCX would, except when the driver answers
 * CUDA_ERROR_ALREADY_MAPPED (a stale mapping over the same addresses): that
 * goes back to UCX, which unmaps its stale entries and retries.
 * MPIX_ACC_IPC_CONTEXT=0 turns it all off. mxa_cuda_ipc_open/_close are
 * the redirection itself, for any caller's driver functions (unit-tested
 * with a simulated driver: test/unit/test_ipc_table.c).
 * The contexts live until the process exits (UCX unmaps its cache at
 * unload, after MPI_Finalize).
 */
#define IPC_MAX_DEV 64

/* cuCtxCreate_v4 (CUDA >= 12.5), whatever the toolkit's <cuda.h> maps the
 * name to. */
typedef CUresult (*ctx_create_v4_fn)(CUcontext *, void *, unsigned int, CUdevice);

static struct {
    pthread_mutex_t lock; /* contexts and mappings */
    _Atomic int enabled;
    ctx_create_v4_fn create;
    CUcontext ctx[IPC_MAX_DEV]; /* by device ordinal */
    int failed[IPC_MAX_DEV];    /* creation failures so far (retried) */
    mxa_ipc_table_t mapped;     /* the library contexts' mappings (ipc_table.h) */
    int map_ok;
    unsigned long opened, closed, fallbacks, reused;
    unsigned long already; /* answered CUDA_ERROR_ALREADY_MAPPED (UCX unmaps and retries) */
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

void mxa_cuda_ipc_ctx_setup(void)
{
    if (!mxu_config.ipc_context || MXA_CU(cuIpcOpenMemHandle) == NULL ||
        MXA_CU(cuIpcCloseMemHandle) == NULL)
        return;
    void *p = mxa_cuda_g.lib != NULL
                  ? mxa_cuda_driver_proc(mxa_cuda_g.lib, "cuCtxCreate", 12050, "cuCtxCreate_v4")
                  : NULL;
    if (p == NULL) {
        MXU_LOG(MXU_LOG_INFO, "CUDA backend: the driver lacks cuCtxCreate_v4: peers' "
                              "buffers are mapped in the application's context");
        return;
    }
    mxa_cuda_ipc_enable(p);
}

void mxa_cuda_ipc_enable(void *ctx_create_v4)
{
    pthread_mutex_lock(&ipcx.lock);
    memcpy(&ipcx.create, &ctx_create_v4, sizeof(ctx_create_v4));
    if (!ipcx.map_ok && mxa_ipc_table_init(&ipcx.mapped) == MXU_OK)
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
        MXU_LOG(MXU_LOG_DEBUG,
                "CUDA backend: context %p of device %d for peers' mappings "
                "(cuda_ipc)",
                (void *)c, (int)dev);
        return c;
    }
    if (ipcx.failed[dev]++ == 0)
        MXU_LOG(MXU_LOG_WARN,
                "CUDA backend: no context of its own on device %d for peers' "
                "mappings (%s): UCX maps them in the application's context, where a peer "
                "freeing a buffer it sent from can deadlock a stream wait",
                (int)dev, cu_err(r));
    return NULL;
}

/* cuIpcOpenMemHandle_v2 (<cuda.h> renames it), exported for UCX. */
__attribute__((visibility("default"))) CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr,
                                                                           CUipcMemHandle handle,
                                                                           unsigned int flags)
{
    static void *cached;
    mxa_cu_ipc_open_fn real = MXA_CU(cuIpcOpenMemHandle);
    if (real == NULL) {
        void *p = driver_fn(&cached, "cuIpcOpenMemHandle_v2");
        memcpy(&real, &p, sizeof(p));
        if (real == NULL)
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!ipc_called_by_ucx(__builtin_return_address(0)))
        return real(pdptr, handle, flags);
    return mxa_cuda_ipc_open(real, pdptr, handle, flags);
}

CUresult mxa_cuda_ipc_open(mxa_cu_ipc_open_fn real, CUdeviceptr *pdptr, CUipcMemHandle handle,
                           unsigned int flags)
{
    CUdevice dev;
    if (!atomic_load_explicit(&ipcx.enabled, memory_order_acquire) ||
        MXA_CU(cuCtxGetDevice) == NULL || MXA_CU(cuCtxPushCurrent) == NULL ||
        MXA_CU(cuCtxPopCurrent) == NULL || MXA_CU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS)
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
            if (mxa_ipc_table_add(&ipcx.mapped, &handle, own, (uint64_t)*pdptr) != MXU_OK) {
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
        if (r == CUDA_ERROR_ALREADY_MAPPED) {
            /* The peer freed a buffer and allocated a new one over its
             * addresses while a mapping of the old one is still open here
             * (UCX's cache has not seen the free). UCX answers this error
             * by unmapping what it cached over the new buffer's range and
             * trying again; mapping it in the application's context instead
             * fails ("invalid resource handle": the driver maps a peer's
             * memory in one context per device), which failed 1 MiB device
             * messages on the UCX path (2 x H100, sx_path-1conn, 4aa5b6e). */
            ipcx.already++;
            pthread_mutex_unlock(&ipcx.lock);
            return r;
        }
    }
    if (own != NULL && ipcx.fallbacks++ == 0)
        MXU_LOG(MXU_LOG_WARN,
                "CUDA backend: a peer's buffer cannot be mapped in the "
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
    mxa_cu_ipc_close_fn real = MXA_CU(cuIpcCloseMemHandle);
    if (real == NULL) {
        void *p = driver_fn(&cached, "cuIpcCloseMemHandle");
        memcpy(&real, &p, sizeof(p));
        if (real == NULL)
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    return mxa_cuda_ipc_close(real, dptr);
}

CUresult mxa_cuda_ipc_close(mxa_cu_ipc_close_fn real, CUdeviceptr dptr)
{
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
            MXU_LOG(MXU_LOG_WARN,
                    "CUDA backend: unmapping a peer's buffer at 0x%llx in the "
                    "library's context failed: %s",
                    (unsigned long long)dptr, cu_err(r));
    }
    ipcx.closed++;
    pthread_mutex_unlock(&ipcx.lock);
    return r;
}

/* At finalize (info level): what the IPC redirection did in this process. */
void mxa_cuda_ipc_report(void)
{
    pthread_mutex_lock(&ipcx.lock);
    if (atomic_load(&ipcx.enabled) && (ipcx.opened || ipcx.fallbacks || ipcx.already))
        MXU_LOG(MXU_LOG_INFO,
                "peers' buffers: %lu mapped in the library's contexts (%lu of "
                "them already open there), %lu unmapped, %lu mapped in the application's "
                "context instead, %lu refused over a stale mapping (UCX unmapped and retried)",
                ipcx.opened, ipcx.reused, ipcx.closed, ipcx.fallbacks, ipcx.already);
    pthread_mutex_unlock(&ipcx.lock);
}

void mxa_cuda_ipc_describe(char *buf, size_t len)
{
    pthread_mutex_lock(&ipcx.lock);
    if (atomic_load(&ipcx.enabled))
        snprintf(buf, len,
                 "library's own context per device (%lu mapped, %lu of them already "
                 "open there, %lu unmapped, %lu refused over a stale mapping so far)",
                 ipcx.opened, ipcx.reused, ipcx.closed, ipcx.already);
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
