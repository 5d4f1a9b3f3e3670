/*
 * ex_accel_cuda.cu - the examples' CUDA backend: cudaStream_t, device and
 * pinned memory, cudaEvent joins. Kernels themselves live in each example's
 * own .cu file and are reached through ex_kernel_t.cuda_fn.
 */
#include "ex_accel.h"

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXC(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            char m_[512];                                                                          \
            snprintf(m_, sizeof m_, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                    \
                     cudaGetErrorString(e_));                                                      \
            ex_fatal(m_);                                                                          \
        }                                                                                          \
    } while (0)

static void *cu_alloc(size_t bytes, ex_mem_t kind)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (kind == EX_MEM_DEVICE) {
        EXC(cudaMalloc(&p, bytes));
    } else if (kind == EX_MEM_MANAGED) {
        EXC(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
    } else if (kind == EX_MEM_PAGEABLE) {
        p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (!p)
            ex_fatal("out of host memory");
    } else {
        EXC(cudaMallocHost(&p, bytes));
    }
    return p;
}

static void cu_free(void *p, ex_mem_t kind)
{
    if (!p)
        return;
    if (kind == EX_MEM_DEVICE || kind == EX_MEM_MANAGED)
        EXC(cudaFree(p));
    else if (kind == EX_MEM_PAGEABLE)
        free(p);
    else
        EXC(cudaFreeHost(p));
}

static ex_stream_t cu_stream_create(void)
{
    cudaStream_t s;
    EXC(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (ex_stream_t)s;
}

static void cu_stream_destroy(ex_stream_t s) { EXC(cudaStreamDestroy((cudaStream_t)s)); }

static void cu_stream_sync(ex_stream_t s) { EXC(cudaStreamSynchronize((cudaStream_t)s)); }

static void cu_launch(ex_stream_t s, const ex_kernel_t *k)
{
    if (!k->cuda_fn)
        ex_fatal("kernel has no CUDA implementation");
    k->cuda_fn(k->arg, s);
    EXC(cudaGetLastError());
}

static void cu_copy_async(ex_stream_t s, void *dst, const void *src, size_t n)
{
    EXC(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)s));
}

static void cu_copy(void *dst, const void *src, size_t n)
{
    EXC(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
}

/* The j-th wait waits for the j-th record: a ring of two events suffices
 * because wait j is always enqueued after record j and before record j+2. */
struct ex_event {
    cudaEvent_t e[2];
    unsigned long rec, wait;
};

static ex_event_t *cu_event_create(void)
{
    ex_event_t *ev = (ex_event_t *)calloc(1, sizeof *ev);
    if (!ev)
        ex_fatal("out of memory");
    for (int i = 0; i < 2; i++)
        EXC(cudaEventCreateWithFlags(&ev->e[i], cudaEventDisableTiming));
    return ev;
}

static void cu_event_destroy(ex_event_t *ev)
{
    if (!ev)
        return;
    for (int i = 0; i < 2; i++)
        EXC(cudaEventDestroy(ev->e[i]));
    free(ev);
}

static void cu_event_reset(ex_event_t *ev) { ev->rec = ev->wait = 0; }

static void cu_event_record(ex_event_t *ev, ex_stream_t s)
{
    if (ev->rec >= ev->wait + 2)
        ex_fatal("ex_event: record would overwrite an event no wait has consumed yet");
    EXC(cudaEventRecord(ev->e[ev->rec % 2], (cudaStream_t)s));
    ev->rec++;
}

static void cu_event_wait(ex_event_t *ev, ex_stream_t s)
{
    if (ev->wait >= ev->rec)
        ex_fatal("ex_event: wait enqueued before its matching record");
    EXC(cudaStreamWaitEvent((cudaStream_t)s, ev->e[ev->wait % 2], 0));
    ev->wait++;
}

static void cu_finalize(void) { cudaDeviceSynchronize(); }

static ex_accel_t cu_accel;

extern "C" void ex_accel_cuda_preinit(int local_rank)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        return;
    }
    if (cudaSetDevice(local_rank % n) == cudaSuccess)
        cudaFree(0);
    cudaGetLastError();
}

extern "C" const ex_accel_t *ex_accel_cuda(int local_rank, char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return NULL;
    }
    if (n <= 0) {
        snprintf(why, whylen, "no CUDA device");
        return NULL;
    }
    int dev = local_rank % n;
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
        return NULL;
    }
    cudaDeviceProp prop;
    EXC(cudaGetDeviceProperties(&prop, dev));
    EXC(cudaFree(0)); /* create the context now */

    cu_accel.name = "cuda";
    cu_accel.is_device = 1;
    snprintf(cu_accel.desc, sizeof cu_accel.desc, "cuda: %.96s (device %d of %d, sm_%d%d)",
             prop.name, dev, n, prop.major, prop.minor);
    cu_accel.alloc = cu_alloc;
    cu_accel.free = cu_free;
    cu_accel.stream_create = cu_stream_create;
    cu_accel.stream_destroy = cu_stream_destroy;
    cu_accel.stream_sync = cu_stream_sync;
    cu_accel.launch = cu_launch;
    cu_accel.copy_async = cu_copy_async;
    cu_accel.copy = cu_copy;
    cu_accel.event_create = cu_event_create;
    cu_accel.event_destroy = cu_event_destroy;
    cu_accel.event_reset = cu_event_reset;
    cu_accel.event_record = cu_event_record;
    cu_accel.event_wait = cu_event_wait;
    cu_accel.finalize = cu_finalize;
    return &cu_accel;
}

/* CUDA graphs (ex_accel.h): the stencil2d graph variants, mpixacc_bench's
 * acc-graph and nccl-graph */
extern "C" int ex_cuda_graph_begin(void *stream, char *why, size_t len)
{
    cudaError_t e = cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" int ex_cuda_graph_end(void *stream, void **exec, char *why, size_t len)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g);
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&x, g, 0);
    if (g)
        cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        snprintf(why, len, "capture into a CUDA graph: %s", cudaGetErrorString(e));
        return -1;
    }
    *exec = (void *)x;
    return 0;
}

extern "C" int ex_cuda_graph_launch(void *exec, void *stream, char *why, size_t len)
{
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaGraphLaunch: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" void ex_cuda_graph_free(void *exec)
{
    if (exec)
        cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
