/*
 * cuda_graph.c - CUDA backend (cuda.c): what interpose/graph.c's counter
 * protocol needs to capture stream-ordered messages into CUDA graphs
 * (issue 21):
 *   - graph words (accel.h): slots of the backend's mapped pinned slabs,
 *     reused through a free list (a free calls no driver function: a CUDA
 *     user object's destructor frees them);
 *   - fire and wait nodes: one-thread kernels (cuda_kernels.cu) launched on
 *     the capturing stream, so they become kernel nodes of the graph;
 *   - the capture a stream is in (its id, unique in the process, and its
 *     graph) and a callback when that graph and every executable graph made
 *     from it are gone (a user object the graph owns).
 * Driver calls that a capture in global mode refuses as "potentially
 * unsafe" (a slab's cuMemHostAlloc) run in relaxed mode on this thread.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef MPIXACC_HAVE_CUDA

#include "accel/cuda_priv.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

typedef struct graph_slot {
    struct graph_slot *next;
} graph_slot_t;

static pthread_mutex_t graph_free_lock = PTHREAD_MUTEX_INITIALIZER;
static graph_slot_t *graph_free; /* freed slots (zeroed when taken again) */

mxu_status_t mxa_cuda_graph_words_alloc(mxa_stream_t *s, uint64_t **pair)
{
    *pair = NULL;
    pthread_mutex_lock(&graph_free_lock);
    graph_slot_t *f = graph_free;
    if (f)
        graph_free = f->next;
    pthread_mutex_unlock(&graph_free_lock);
    if (f) {
        memset(f, 0, SLOT_BYTES);
        *pair = (uint64_t *)f;
        return MXU_OK;
    }
    cuda_stream_t *cs = (cuda_stream_t *)s;
    int entered = ctx_enter(cs->ctx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current", s->handle);
    CUstreamCaptureMode prev;
    int relaxed = cu_capture_mode_relax(&prev);
    unsigned char *slot = NULL;
    pthread_mutex_lock(&mxa_cuda_g.lock);
    mxu_status_t st = mxa_cuda_slot_alloc(&slot);
    pthread_mutex_unlock(&mxa_cuda_g.lock);
    if (relaxed)
        cu_capture_mode_restore(prev);
    ctx_leave(entered);
    if (st != MXU_OK)
        return st;
    memset(slot, 0, SLOT_BYTES);
    *pair = (uint64_t *)slot;
    return MXU_OK;
}

void mxa_cuda_graph_words_free(uint64_t *pair)
{
    graph_slot_t *f = (graph_slot_t *)pair;
    pthread_mutex_lock(&graph_free_lock);
    f->next = graph_free;
    graph_free = f;
    pthread_mutex_unlock(&graph_free_lock);
}

mxu_status_t mxa_cuda_graph_node(mxa_stream_t *s, uint64_t *pair, int wait)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    cuda_ctx_t *cx = cs->ctx;
    CUfunction fn = wait ? cx->fn_graph_wait : cx->fn_graph_fire;
    if (fn == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED,
                 "graph: the %s kernel is not loaded in the context of "
                 "stream %p",
                 wait ? "wait" : "fire", s->handle);
    int entered = ctx_enter(cx->ctx);
    if (entered < 0)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "cannot make the context of stream %p current", s->handle);
    CUstreamCaptureMode prev;
    int relaxed = cu_capture_mode_relax(&prev);
    CUdeviceptr d = 0;
    mxu_status_t st = mxa_cuda_host_to_dev(pair, &d);
    if (relaxed)
        cu_capture_mode_restore(prev);
    CUresult r = CUDA_SUCCESS;
    if (st == MXU_OK) {
        void *args[] = {&d};
        r = MXA_CU(cuLaunchKernel)(fn, 1, 1, 1, 1, 1, 1, 0, cs->cu, args, NULL);
    }
    ctx_leave(entered);
    if (st != MXU_OK)
        return st;
    if (r != CUDA_SUCCESS)
        MXU_FAIL(cu_err_is_bad_handle(r) ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_DEVICE,
                 "graph: the %s node on stream %p: %s", wait ? "wait" : "fire", s->handle,
                 cu_err(r));
    return MXU_OK;
}

mxu_status_t mxa_cuda_capture_info(mxa_stream_t *s, uint64_t *id, void **graph)
{
    cuda_stream_t *cs = (cuda_stream_t *)s;
    if (MXA_CU(cuStreamGetCaptureInfo) == NULL || MXA_CU(cuUserObjectCreate) == NULL ||
        MXA_CU(cuGraphRetainUserObject) == NULL)
        MXU_FAIL(MXU_ERR_UNSUPPORTED, "graph: this driver has no capture information or user "
                                      "objects (CUDA 12.3 or newer is needed)");
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t cid = 0;
    CUgraph g = NULL;
    CUresult r = MXA_CU(cuStreamGetCaptureInfo)(cs->cu, &cap, &cid, &g, NULL, NULL, NULL);
    if (r != CUDA_SUCCESS || cap != CU_STREAM_CAPTURE_STATUS_ACTIVE || g == NULL)
        MXU_FAIL(MXU_ERR_INVALID_STREAM, "graph: stream %p is not in an active capture (%s)",
                 s->handle,
                 r != CUDA_SUCCESS                             ? cu_err(r)
                 : cap == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "its capture was invalidated"
                 : cap == CU_STREAM_CAPTURE_STATUS_NONE        ? "not capturing"
                                                               : "no graph");
    *id = (uint64_t)cid;
    *graph = g;
    return MXU_OK;
}

mxu_status_t mxa_cuda_graph_on_destroy(void *graph, void (*fn)(void *), void *arg)
{
    CUuserObject obj;
    CUresult r =
        MXA_CU(cuUserObjectCreate)(&obj, arg, (CUhostFn)fn, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    if (r != CUDA_SUCCESS)
        MXU_FAIL(MXU_ERR_NO_DEVICE, "graph: cuUserObjectCreate: %s", cu_err(r));
    r = MXA_CU(cuGraphRetainUserObject)((CUgraph)graph, obj, 1, CU_GRAPH_USER_OBJECT_MOVE);
    if (r != CUDA_SUCCESS) /* (the object is left alone: its release would run fn, and the
                              caller frees arg itself) */
        MXU_FAIL(MXU_ERR_NO_DEVICE, "graph: cuGraphRetainUserObject: %s", cu_err(r));
    return MXU_OK;
}

#endif /* MPIXACC_HAVE_CUDA */
