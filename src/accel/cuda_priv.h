/*
 * cuda_priv.h - what the files of the CUDA backend share (cuda.c, cuda_ctx.c,
 * cuda_stream.c, cuda_mem.c, cuda_ipc.c); nothing outside src/accel/cuda*.c
 * includes it. The backend's entry points for accel.c are in cuda.h.
 *
 * Threads. Lookups and enqueues come from application threads (any number);
 * release/poll_trigger come from the progress thread and touch only the
 * words. Records are created under mxa_cuda_g.lock and never freed before
 * mxa_cuda_finalize().
 */
#ifndef MX_ACCEL_CUDA_PRIV_H
#define MX_ACCEL_CUDA_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "accel/cuda.h"
#include "accel/cuda_driver.h"
#include "accel/seq_word.h"
#include "util/calltime.h"
#include "util/hashmap.h"

#define SLAB_BYTES (64 * 1024)
#define SLOT_BYTES 128 /* trigger word at +0, release word at +64 */

enum { SPECIAL_NONE = 0, SPECIAL_LEGACY = 1, SPECIAL_PER_THREAD = 2 };

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
    _Atomic int stale; /* destroyed (its address reused) or set-up failed */
    _Atomic int warm;  /* the engine's context hook has run (or was not needed) */
    CUmodule module;
    CUfunction fn_set, fn_wait, fn_wait_set;
    CUfunction fn_sx_send, fn_sx_recv;       /* SX steps (NULL: not in the module) */
    CUfunction fn_sx_recv1;                  /* SX receive step of one receive (or NULL) */
    CUfunction fn_part_recv, fn_part_send;   /* partitioned epochs' completions (ditto) */
    CUfunction fn_part_start;                /* ... and device-counted starts (ditto) */
    CUfunction fn_graph_fire, fn_graph_wait; /* graphs' counter nodes (ditto) */
    CUfunction fn_reduce;                    /* collectives' element-wise reduction (ditto) */
    CUfunction fn_llred;                     /* the one-kernel Allreduce (ditto) */
    CUfunction fn_pack;                      /* non-contiguous datatypes' pack/unpack (ditto) */
    int sx_pdl;                /* launch send steps with programmatic dependent launch (sm_90+) */
    CUstream sx_stream;        /* library stream for SX steps and ring set-up */
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
    /* a device word the unpack kernels of this stream read their limit
     * from (cuda_pack.c), in limit_ctx; under mxa_cuda_g.lock */
    CUdeviceptr limit_dptr;
    struct cuda_ctx *limit_ctx;
    struct cuda_stream *next;
} cuda_stream_t;

typedef struct slab {
    unsigned char *host;
    size_t used;
    struct slab *next;
} slab_t;

typedef struct {
    pthread_mutex_t lock;
    int tried; /* mxa_cuda_init() ran (finalize undoes it) */
    void *lib;
    int driver_version;
    int ndev;
    cuda_dev_t *devs;
    int memops_all; /* every device can use 64-bit memops and the setting allows */
    char mode[64];
    char why_off[64];
    cuda_ctx_t *ctxs;
    cuda_stream_t *streams; /* every record, specials included */
    mxu_locked_map_t map;   /* handle -> cuda_stream_t (ordinary handles) */
    int map_ok;
    slab_t *slabs;
    pthread_cond_t warm_cv; /* a context became warm (cuda_ctx_t.warm) */
    CUcontext primary0;     /* retained primary context of device 0 (no current ctx) */
    int primary0_retained;
} mxa_cuda_state_t;

/* cuda.c: the backend's state (mxa_cuda_g.lock guards the lists and records). */
extern mxa_cuda_state_t mxa_cuda_g;
extern _Atomic int mxa_cuda_g_active;
/* A context this thread's last mxa_cuda_ctx_get set up (the context hook runs for it
 * once mxa_cuda_g.lock is released); NULL when none. */
extern _Thread_local struct cuda_ctx *mxa_cuda_tl_new_ctx;
extern _Atomic(CUcontext) mxa_cuda_g_first_ctx; /* first context set up (bind_buffer's default) */

/* ---------------------------------------------------------------- helpers */

static inline const char *cu_err(CUresult r)
{
    const char *s = NULL;
    if (mxa_cu.f_cuGetErrorName != NULL && mxa_cu.f_cuGetErrorName(r, &s) == CUDA_SUCCESS &&
        s != NULL)
        return s;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof(buf), "CUDA error %d", (int)r);
    return buf;
}

static inline int cu_err_is_bad_handle(CUresult r)
{
    return r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
           r == CUDA_ERROR_INVALID_CONTEXT;
}

/* Make `c` current if it is not; returns 1 if pushed, 0 if already current,
 * -1 on failure. */
static inline int ctx_enter(CUcontext c)
{
    CUcontext cur = NULL;
    if (MXA_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == c)
        return 0;
    return MXA_CU(cuCtxPushCurrent)(c) == CUDA_SUCCESS ? 1 : -1;
}

/* A stream's capture status (timed: MXU_CT_CU_CAPTURE in the host-time
 * statistics, it is asked at every stream point and SX step). */
static inline CUresult cu_capture_status(CUstream st, CUstreamCaptureStatus *cap)
{
    uint64_t t = mxu_ct_inner_begin();
    CUresult r = MXA_CU(cuStreamIsCapturing)(st, cap);
    mxu_ct_inner_end(MXU_CT_CU_CAPTURE, t);
    return r;
}

/* This thread's capture interaction mode made relaxed, for a retry of a
 * driver call that a capture (this thread's, or another's in global mode)
 * refused as "potentially unsafe": 1 and the previous mode in *prev if it
 * was changed (give it back with cu_capture_mode_restore), else 0. */
static inline int cu_capture_mode_relax(CUstreamCaptureMode *prev)
{
    if (MXA_CU(cuThreadExchangeStreamCaptureMode) == NULL)
        return 0;
    *prev = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (MXA_CU(cuThreadExchangeStreamCaptureMode)(prev) != CUDA_SUCCESS)
        return 0;
    if (*prev != CU_STREAM_CAPTURE_MODE_RELAXED)
        return 1;
    return 0; /* relaxed already: nothing to retry for */
}

static inline void cu_capture_mode_restore(CUstreamCaptureMode prev)
{
    MXA_CU(cuThreadExchangeStreamCaptureMode)(&prev);
}

static inline void ctx_leave(int entered)
{
    if (entered == 1) {
        CUcontext popped;
        MXA_CU(cuCtxPopCurrent)(&popped);
    }
}

/* Flags of every wait memop on device i: cyclic >=, plus a flush of remote
 * (e.g. GPUDirect RDMA) writes where the device can do it, so data a NIC
 * wrote before the release is visible to the work after the wait. */
static inline unsigned wait_flags_for(int dev_index)
{
    unsigned f = CU_STREAM_WAIT_VALUE_GEQ;
    if (dev_index >= 0 && mxa_cuda_g.devs[dev_index].flush)
        f |= CU_STREAM_WAIT_VALUE_FLUSH;
    return f;
}

/* cuda.c: entry point `name` at ABI version `since` of driver `lib`, by
 * cuGetProcAddress, else dlsym(dlname); NULL when absent. */
void *mxa_cuda_driver_proc(void *lib, const char *name, int since, const char *dlname);

/* cuda_stream.c: sequence words */
mxu_status_t mxa_cuda_slot_alloc(unsigned char **host_out);
mxu_status_t mxa_cuda_host_to_dev(void *host, CUdeviceptr *d);

/* cuda_stream.c: launch f on stream (the caller made its context current):
 * grid x block threads, the parameters as kargs or extra (cuLaunchKernel's
 * kernelParams and extra). pdl: with programmatic dependent launch (sm_90:
 * cuda_ctx_t.sx_pdl), so f may start before the kernel ahead of it ends --
 * f waits for it (griddepcontrol.wait) before it depends on it; a plain
 * launch without cuLaunchKernelEx. */
CUresult mxa_cuda_launch(CUfunction f, unsigned grid, unsigned block, CUstream stream, int pdl,
                         void **kargs, void **extra);

/* cuda_ctx.c: contexts (mxa_cuda_g.lock held for mxa_cuda_ctx_get and mxa_cuda_wait_until_warm) */
mxu_status_t mxa_cuda_ctx_get(CUcontext c, cuda_ctx_t **out);
void mxa_cuda_run_new_context_hook(void);
void mxa_cuda_wait_until_warm(cuda_ctx_t *cx);

/* cuda_ipc.c: peers' memory mapped in the library's own contexts */
void mxa_cuda_ipc_ctx_setup(void);
/* The redirection of UCX's peer mappings into the library's contexts
 * (cuda_ipc.c): turned on with the driver's cuCtxCreate_v4 (by
 * mxa_cuda_ipc_ctx_setup; a unit test passes a stand-in), then open and
 * close with the driver functions `real`. */
typedef CUresult (*mxa_cu_ipc_open_fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
typedef CUresult (*mxa_cu_ipc_close_fn)(CUdeviceptr);
void mxa_cuda_ipc_enable(void *ctx_create_v4);
CUresult mxa_cuda_ipc_open(mxa_cu_ipc_open_fn real, CUdeviceptr *pdptr, CUipcMemHandle handle,
                           unsigned int flags);
CUresult mxa_cuda_ipc_close(mxa_cu_ipc_close_fn real, CUdeviceptr dptr);
void mxa_cuda_ipc_describe(char *buf, size_t len);
void mxa_cuda_ipc_report(void);

/* The library stream of a context the backend set up (cuda_sx.c; created
 * at the first call with the context current; NULL: unknown context). */
CUstream mxa_cuda_lib_stream(CUcontext c);
/* The backend's record of context c (NULL: unknown or stale). */
cuda_ctx_t *mxa_cuda_ctx_record(CUcontext c);

#endif
