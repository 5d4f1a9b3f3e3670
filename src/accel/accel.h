/*
 * accel.h - accelerator layer: streams behind one small interface.
 *
 * Layering: util <- accel. Nothing here knows MPI or UCX.
 *
 * A stream (a cudaStream_t, a host stream made by this library, or "no
 * stream") is represented inside the library by an mxa_stream_t. Every
 * stream has two 64-bit sequence words:
 *
 *   trigger_word  written BY THE STREAM when it reaches a trigger point
 *                 (enqueue_trigger(seq) stores seq); read by the engine's
 *                 progress thread, which then starts every operation whose
 *                 trigger sequence number is <= the value read.
 *   release_word  written BY THE ENGINE (release(seq)); the stream blocks at a
 *                 wait point (enqueue_wait(seq)) until release_word >= seq.
 *
 * Both words only grow. Sequence numbers are allocated by the engine from
 * the per-stream counters below (atomic fetch-add on the application side),
 * so operations start in enqueue order and waits are released in order.
 *
 * Backends: "none" (NULL stream in a build/run without CUDA: triggers are
 * reached immediately, waits are host waits), "host" (host.c: one library
 * thread per stream executing an in-order queue), "cuda" (cuda*.c: stream
 * memory operations on host-mapped words, or a kernel fallback).
 */
#ifndef MX_ACCEL_H
#define MX_ACCEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#include "util/status.h"

typedef enum {
    MXA_KIND_NONE = 0, /* no stream: execute immediately */
    MXA_KIND_HOST = 1, /* library host stream */
    MXA_KIND_CUDA = 2, /* cudaStream_t */
} mxa_kind_t;

typedef enum {
    MXA_MEM_HOST = 0,    /* pageable or pinned host memory */
    MXA_MEM_DEVICE = 1,  /* accelerator device memory */
    MXA_MEM_MANAGED = 2, /* managed / unified memory */
} mxa_memtype_t;

typedef struct mxa_backend mxa_backend_t;
typedef struct mxa_stream mxa_stream_t;

struct mxa_stream {
    mxa_kind_t kind;
    const mxa_backend_t *backend;
    void *handle; /* the user's handle (cudaStream_t, host stream, NULL) */

    /* Sequence words. For CUDA they live in host-mapped pinned memory; for
     * host streams in ordinary memory. Accessed with atomics by the host. */
    _Atomic uint64_t *trigger_word;
    _Atomic uint64_t *release_word;

    /* Application side: next sequence numbers to hand out (fetch-add). */
    _Atomic uint64_t next_trigger_seq;
    _Atomic uint64_t next_wait_seq;

    /* Operations of this stream not yet completed (host-stream synchronize). */
    _Atomic uint64_t ops_in_flight;

    /* Operations made on this (host) stream's thread while it runs a
     * graph's entries (graph.c's fire entries): they start from the
     * engine's command queue, not at a trigger of the stream. The stream's
     * thread counts them (before its next trigger), the progress thread
     * counts those it started; while they differ the progress thread starts
     * none of the stream's triggered operations (engine: start order is
     * stream order, api.md 3). */
    _Atomic uint64_t fires_made;
    uint64_t fires_started; /* progress thread */

    /* Engine-private state, owned by the progress thread. */
    void *engine_state;

    /* Backend-private state. */
    void *backend_state;
};

struct mxa_backend {
    const char *name;
    mxa_kind_t kind;
    /* Stream points. Called on the application thread, in stream order.
     * seq is already allocated. Must not block on communication. */
    mxu_status_t (*enqueue_trigger)(mxa_stream_t *s, uint64_t seq);
    mxu_status_t (*enqueue_wait)(mxa_stream_t *s, uint64_t seq);
    /* Called by the progress thread: publish release_word = seq (seq grows)
     * and wake the stream if it sleeps. */
    void (*release)(mxa_stream_t *s, uint64_t seq);
    /* Called by the progress thread: current trigger_word. */
    uint64_t (*poll_trigger)(mxa_stream_t *s);
    /* Non-zero if the progress thread must poll trigger words itself (no
     * wake-up comes from the stream, e.g. CUDA memops). Host streams wake
     * the progress thread through mxa_set_trigger_notify(). */
    int needs_polling;
    /* Optional (NULL: never): non-zero while the stream is being captured
     * into a graph (its points then run only when the graph is launched).
     * Application threads. */
    int (*capturing)(mxa_stream_t *s);
    /* Optional (NULL: none): PCI bus id ("0000:3b:00.0", lower case) of the
     * device the stream runs on, NULL when unknown. Any thread. */
    const char *(*pci_busid)(mxa_stream_t *s);
};

/* ---- layer-wide entry points (accel.c) ---- */

/* Initialise the available backends. Never fails because a GPU is absent:
 * the CUDA backend is simply reported off. */
mxu_status_t mxa_init(void);
void mxa_finalize(void);

/* Map a user stream handle to the library's stream. Validates the handle:
 * a registered host stream, a live CUDA stream (when CUDA is active), or
 * NULL ("none" kind without CUDA, legacy default stream with CUDA).
 * Returns MXU_ERR_INVALID_STREAM otherwise. Thread-safe. */
mxu_status_t mxa_stream_lookup(void *handle, mxa_stream_t **out);

/* Memory type of a buffer (cached where the backend can). Host when no
 * accelerator backend is active. */
mxa_memtype_t mxa_memtype(const void *buf, size_t len);

/* Callback the host backend calls after it wrote a trigger word, so the
 * engine's progress thread wakes (set once by the engine). */
typedef void (*mxa_trigger_notify_fn)(void);
void mxa_set_trigger_notify(mxa_trigger_notify_fn fn);
/* Internal (backends): call the notify callback, if one is set. */
void mxa_notify_trigger(void);

/* Callback run when a host stream is freed (mxa_host_stream_free or
 * mxa_host_shutdown), on the freeing thread, after the stream synchronized
 * (queue drained, ops_in_flight == 0) and before its memory is released:
 * the engine drops s->engine_state here and must not touch s afterwards.
 * Set once by the engine (NULL: none). */
typedef void (*mxa_stream_free_fn)(mxa_stream_t *s);
void mxa_set_stream_free_hook(mxa_stream_free_fn fn);

/* Scratch memory for stream s's operations: at least bytes of memory of
 * kind k that s's executor and the transport can use (device or managed
 * memory in s's context, pinned host memory for CUDA streams, heap memory
 * for host streams). One per (stream, kind), handed out again to later
 * calls on s: every use of it is ordered by s, so a later call's use comes
 * after an earlier one's. A larger request gets a new one; the outgrown
 * one is kept (an earlier call's operations may still use it). Host
 * memory is freed at mxa_finalize, CUDA memory never (freeing waits for
 * the device). NULL when none can be had, or a CUDA stream being captured
 * needs a new one (allocating would invalidate the capture; logged).
 * Application threads;
 * calls on one stream are serialized by the caller, as stream use is. */
void *mxa_stream_scratch(mxa_stream_t *s, mxa_memtype_t k, size_t bytes);
/* Enqueue on s a copy of bytes from src to dst (memory s's executor
 * reaches), in stream order; on the "none" stream it copies at once. */
mxu_status_t mxa_stream_copy(mxa_stream_t *s, void *dst, const void *src, size_t bytes);
/* Enqueue fn(arg) on s, in stream order, run on a host thread (host
 * streams: the stream's thread; the "none" stream: at once, here; CUDA
 * streams: the driver's callback thread, cuLaunchHostFunc -- fn must not
 * call CUDA or block on the stream's later work). */
mxu_status_t mxa_stream_host_call(mxa_stream_t *s, void (*fn)(void *), void *arg);
/* Block the calling thread until everything enqueued on s so far ran
 * (host streams: their queue; CUDA: cuStreamSynchronize). */
mxu_status_t mxa_stream_synchronize(mxa_stream_t *s);

/* ---- element-wise reductions (reduce.c; stream-ordered collectives) ---- */
typedef enum {
    MXA_RED_I8,
    MXA_RED_U8,
    MXA_RED_I16,
    MXA_RED_U16,
    MXA_RED_I32,
    MXA_RED_U32,
    MXA_RED_I64,
    MXA_RED_U64,
    MXA_RED_F32,
    MXA_RED_F64
} mxa_red_kind_t;
typedef enum { MXA_RED_SUM, MXA_RED_PROD, MXA_RED_MIN, MXA_RED_MAX } mxa_red_op_t;
/* Bytes of one element of kind k (0: not a kind). */
size_t mxa_red_esize(mxa_red_kind_t k);
/* out[i] = a[i] op b[i], i < n (a: the lower rank's operand; out may be a
 * or b). Integer sums and products wrap; floating point: one IEEE
 * operation per element, the same bits on the host and on a GPU. */
void mxa_reduce_host(mxa_red_kind_t k, mxa_red_op_t op, void *out, const void *a, const void *b,
                     size_t n);
/* The same in s's order: a kernel on a CUDA stream when out, a and b are
 * device or managed memory, the host arithmetic in stream order when they
 * are host memory (MXU_ERR_INVALID_PARAM when device and host memory
 * mix: the caller stages), at once on the "none" stream. */
mxu_status_t mxa_stream_reduce(mxa_stream_t *s, mxa_red_kind_t k, mxa_red_op_t op, void *out,
                               const void *a, const void *b, size_t n);

/* ---- the one-kernel Allreduce between processes of a node (coll_ll.c) ---- */
#include "accel/llred_proto.h"
/* Enqueue plan's kernel on s (a CUDA stream; MXU_ERR_UNSUPPORTED else). */
mxu_status_t mxa_stream_llreduce(mxa_stream_t *s, const mxa_llred_plan_t *plan);
/* The device context of stream s (a CUcontext for CUDA streams; NULL for
 * other kinds), as the mxa_part_* functions below take it. */
void *mxa_stream_device_ctx(mxa_stream_t *s);
/* The SX path's process-wide abort word (host-visible, device-mapped with
 * CUDA; 0 before the path's set-up). */
uint64_t mxa_sx_abort_word_addr(void);

/* ---- device pack/unpack of non-contiguous datatypes (interpose/p2p.c) ---- */
#include "accel/pack_proto.h"
/* Device memory of ctx for a packed message of bytes (host: pinned host
 * memory that ctx's kernels reach at the same address, for messages staged
 * through host memory) (*got: its size, to give back) and a host-visible
 * word that goes with it (*word). stream: the stream the caller's uses of
 * it are ordered on; a block given back in the order of that stream may be
 * handed out again (also NULL: any free block). A device block (host 0)
 * has 64 more bytes after its *got: a device word at *p + *got (a receive
 * step writes the received length there). MXU_ERR_UNSUPPORTED without
 * CUDA. */
mxu_status_t mxa_dev_temp_get(void *ctx, const mxa_stream_t *stream, size_t bytes, int host,
                              void **p, size_t *got, uint64_t **word);
/* As mxa_dev_temp_get, but only a block kept for reuse (one given back
 * with no stream, or in the order of `stream`): MXU_ERR_BUSY when there is
 * none -- nothing is allocated (a stream being captured into a CUDA graph:
 * allocating would invalidate the capture). */
mxu_status_t mxa_dev_temp_take(void *ctx, const mxa_stream_t *stream, size_t bytes, int host,
                               void **p, size_t *got, uint64_t **word);
/* Give it back: stream NULL when nothing of its last use is still to run;
 * else the stream on which its last use is enqueued (later work of that
 * stream only may have it). */
void mxa_dev_temp_put(void *ctx, void *p, size_t got, int host, uint64_t *word,
                      const mxa_stream_t *stream);
/* Copy bytes of host memory into new device memory of ctx (kept to the end
 * of the process), done at return. */
mxu_status_t mxa_dev_upload(void *ctx, const void *host, size_t bytes, void **dptr);
/* The pack kernel in s's order (a CUDA stream). */
mxu_status_t mxa_stream_pack(mxa_stream_t *s, const mxa_pack_args_t *args);
/* The same into a CUDA graph being captured on s (interpose/graph.c): a
 * plain kernel node (no programmatic dependent launch), and an unpack
 * whose limit is a host word (args->limit_at, not limit_dev) has it copied
 * in s's order into limit_word (8 bytes of device memory of s's context,
 * the caller's; NULL for a pack) and read there -- not into the stream's
 * own word, which the graph launched on another stream would share. */
mxu_status_t mxa_stream_pack_captured(mxa_stream_t *s, const mxa_pack_args_t *args,
                                      void *limit_word);
/* The pack kernel on ctx's library stream, not waited for (any thread, the
 * progress thread too): *job is NULL when there was nothing to do, else
 * ask mxa_dev_job_done until it is done. */
typedef struct mxa_dev_job mxa_dev_job_t;
mxu_status_t mxa_dev_pack_start(void *ctx, const mxa_pack_args_t *args, mxa_dev_job_t **job);
/* MXU_ERR_BUSY: not done yet (block 0); else done, the job freed, and its
 * outcome (block 1: waits, at most 10 s: MXU_ERR_TIMED_OUT). */
mxu_status_t mxa_dev_job_done(mxa_dev_job_t *job, int block);
/* A zeroed host-visible 64-bit word (device-mapped with CUDA), from a slab
 * kept to the end of the process; NULL when none. Give back with _put. */
uint64_t *mxa_host_word_get(void);
void mxa_host_word_put(uint64_t *w);

/* ---- partitioned requests (interpose/partitioned.c) ---- */
/* Zeroed host memory a device can reach at the same address (pinned and
 * mapped while CUDA is active: kept to the end of the process, as freeing
 * pinned memory waits for the device; heap memory otherwise). */
void *mxa_part_host_alloc(size_t bytes);
void mxa_part_host_free(void *p);
/* Zeroed device memory in the context of device buffer buf (*ctx: that
 * context). MXU_ERR_UNSUPPORTED without CUDA. Application threads. */
mxu_status_t mxa_part_dev_alloc(const void *buf, size_t bytes, void **dptr, void **ctx);
void mxa_part_dev_free(void *ctx, void *dptr, size_t bytes);
/* Copy bytes from host memory into device memory of ctx, done at return;
 * through a library stream of ctx, so it waits for nothing of the
 * application's (any thread, the progress thread too). */
mxu_status_t mxa_part_dev_write(void *ctx, void *dptr, const void *src, size_t bytes);
/* In stream order: *addr = v (addr as s's executor addresses it: device
 * or mapped host memory for CUDA streams, host memory otherwise). */
mxu_status_t mxa_stream_write64(mxa_stream_t *s, uint64_t *addr, uint64_t v);
/* Is s being captured into a graph (CUDA or host)? */
int mxa_stream_capturing(mxa_stream_t *s);

/* The direct protocol's device side (CUDA; MXU_ERR_UNSUPPORTED, 0 or ""
 * otherwise): slots in device memory of ctx's device exportable as a POSIX
 * fd (cuMemCreate; *bytes rounded up to the allocation granularity), a
 * peer's mapped into ctx from its fd, either unmapped; the PCI bus id of
 * ctx's device; can ctx's device map memory of the device with that bus id
 * (the same device, or peer access)? (CUDA IPC handles of cuMemAlloc
 * memory failed to open here with CUDA_ERROR_INVALID_HANDLE on 2 x H200,
 * as the SX path's did on the H100: sx.h.) */
mxu_status_t mxa_part_slots_alloc(void *ctx, size_t *bytes, void **dptr, int *fd);
mxu_status_t mxa_part_slots_import(void *ctx, int fd, size_t bytes, void **dptr);
void mxa_part_slots_free(void *ctx, void *dptr, size_t bytes);
void mxa_part_busid(void *ctx, char *buf, size_t len);
int mxa_part_reaches(void *ctx, const char *peer_busid);
/* Enqueue on s (a CUDA stream) the completion of the handle's current
 * epoch on the direct path, for the handle dreq (device memory): a
 * receive's kernel (the partitions' copy-out, then the sender's credit),
 * or a send's, which waits until the handle's `done` reaches epoch x
 * partitions. Both read the epoch from the handle when they run. */
mxu_status_t mxa_part_complete(mxa_stream_t *s, void *dreq, int is_send, int partitions,
                               uint64_t part_bytes);
/* Enqueue on s (a CUDA stream) a start counted on the device: the handle's
 * epoch + 1 when the stream gets there (capturable; replays count). */
mxu_status_t mxa_part_start_dev(mxa_stream_t *s, void *dreq);

/* Call fn(stream) for every stream the layer knows (finalize, reporting). */
void mxa_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg);

/* Devices, asked without naming a backend (NULL / 0 when no device backend
 * is active). For hwloc placement (progress core, NIC) and the start-up
 * exchanges between processes of a node. */
int mxa_device_active(void); /* a device backend (CUDA) is active */
/* PCI bus id ("0000:3b:00.0", lower case) of the device of stream s (its
 * backend's pci_busid), or of the calling thread's current device context
 * (e.g. at MPI_Init, after the application chose its device). */
const char *mxa_stream_pci_busid(mxa_stream_t *s);
const char *mxa_current_pci_busid(void);

/* Device contexts met after start-up. The CUDA backend calls the hook on
 * an application thread, with no lock held, once per context it sets up
 * after mxa_init (the context current at mxa_init is set up there), before
 * any stream point of that context is enqueued: the engine warms UCX up
 * for the context's device then, while none of its streams can wait for
 * the progress thread (UCX's first use of a device makes synchronizing
 * CUDA calls). Set once by the engine (NULL: none). */
typedef void (*mxa_context_hook_fn)(void *ctx);
void mxa_set_context_hook(mxa_context_hook_fn fn);
void mxa_run_context_hook(void *ctx); /* the backend's side */
/* Make a device context current on the calling thread (0) or fail (-1,
 * also in builds without CUDA); mxa_context_pop undoes a successful push. */
int mxa_context_push(void *ctx);
void mxa_context_pop(void);
/* Make the context that owns buf (device or managed memory) current on the
 * calling thread, or for other memory some context if it has none: UCX's
 * CUDA transports work in the thread's current context (the progress
 * thread's operations made for CUDA graphs). No-op without CUDA. */
void mxa_thread_bind_buffer(const void *buf);
/* The calling thread (the progress thread) is not bound by other threads'
 * stream captures: in CUDA's default "global" capture mode, allocating or
 * freeing memory, or creating a context, while any thread captures a
 * stream fails and invalidates that capture; UCX does such calls on the
 * progress thread. No-op without CUDA. */
void mxa_thread_relax_capture(void);

/* Feature report for mpixacc_info and logs. */
typedef struct {
    int cuda_built;  /* compiled with CUDA support */
    int cuda_active; /* driver loaded and at least one device */
    int cuda_device_count;
    int cuda_memops;      /* stream memory operations in use */
    char cuda_driver[64]; /* e.g. "13000" */
    char cuda_mode[64];   /* "memops", "kernel-fallback", "off: <reason>" */
    char cuda_ipc[96];    /* where peers' buffers are mapped (cuda_ipc.c), "" when off */
} mxa_features_t;
void mxa_get_features(mxa_features_t *out);

/* ---- host streams (host.c) ---- */
mxu_status_t mxa_host_stream_create(void **handle_out);
mxu_status_t mxa_host_stream_launch(void *handle, void (*fn)(void *), void *arg);
/* Blocks until the queue has drained and ops_in_flight == 0. */
mxu_status_t mxa_host_stream_synchronize(void *handle);
mxu_status_t mxa_host_stream_free(void *handle);
/* Internal: resolve a host stream handle (NULL-safe). Returns NULL if the
 * handle is not a live host stream. */
mxa_stream_t *mxa_host_stream_find(void *handle);
/* Internal: the library's own host stream (made at first use, stopped by
 * mxa_host_shutdown); *handle (may be NULL) gets its handle. NULL when it
 * cannot be made (logged). */
mxa_stream_t *mxa_library_host_stream(void **handle);
/* Internal: fully stop all host stream threads (library finalize). */
void mxa_host_shutdown(void);
/* Internal (mxa_foreach_stream): fn for every live host stream. */
void mxa_host_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg);
/* Internal: the host stream whose thread calls (running one of its
 * launches), or NULL on any other thread. */
mxa_stream_t *mxa_host_current_stream(void);

/* Host graphs (MPIX_Acc_Hoststream_begin_capture(3)): between begin and
 * end, launches on the stream (mxa_host_stream_launch, and the library's
 * own entries, mxa_host_capture_add) are recorded instead of run; every
 * other stream point refuses (mxa_stream_refuse_capture breaks the
 * capture, and the end fails with MXU_ERR_CAPTURED and why). A launch of
 * the graph enqueues the recorded entries in order on a stream that is not
 * capturing. Freeing a graph with launches in flight is the caller's error
 * to prevent (mxa_host_graph_inflight). */
typedef struct mxa_host_graph mxa_host_graph_t;
mxu_status_t mxa_host_capture_begin(void *handle);
mxu_status_t mxa_host_capture_add(mxa_stream_t *s, void (*fn)(void *), void *arg);
void mxa_host_capture_break(mxa_stream_t *s, const char *why);
mxu_status_t mxa_host_capture_end(void *handle, mxa_host_graph_t **graph, char *why, size_t len);
mxu_status_t mxa_host_graph_launch(mxa_host_graph_t *g, void *handle);
long mxa_host_graph_inflight(const mxa_host_graph_t *g);
void mxa_host_graph_free(mxa_host_graph_t *g);

/* Graph words (interpose/graph.c's counter protocol, issue 21): a pair of
 * 64-bit counters, word 0 and word MXA_GRAPH_DONE_WORD (on separate cache
 * lines), zeroed, in memory that the host and the stream's device both
 * reach (CUDA: mapped pinned memory; host streams: ordinary memory). A fire
 * node increments word 0 when the stream reaches it (the progress thread
 * watches it and makes one launch's operation per increment); a wait node
 * takes ticket k = ++word 0 and holds the stream until word
 * MXA_GRAPH_DONE_WORD >= k (the progress thread publishes the count of
 * launches whose operations completed). Both are recorded on a stream that
 * is being captured (a host graph's entries, a CUDA graph's kernel nodes)
 * and replay as such at every launch. The free may run on any thread and
 * calls no driver function (a CUDA user object's destructor frees them). */
#define MXA_GRAPH_DONE_WORD 8
#define MXA_GRAPH_WORDS_BYTES 128
mxu_status_t mxa_graph_words_alloc(mxa_stream_t *s, uint64_t **pair);
void mxa_graph_words_free(int kind, uint64_t *pair);
mxu_status_t mxa_stream_graph_fire(mxa_stream_t *s, uint64_t *pair);
mxu_status_t mxa_stream_graph_wait(mxa_stream_t *s, uint64_t *pair);
/* The capture s is in (a CUDA stream): its id, unique in the process, and
 * its graph; MXU_ERR_UNSUPPORTED where the backend cannot tell. */
mxu_status_t mxa_stream_capture_info(mxa_stream_t *s, uint64_t *id, void **graph);
/* fn(arg) once graph (mxa_stream_capture_info's) and every executable graph
 * made from it are destroyed -- on a driver thread, where fn must call no
 * driver function. On failure fn is never called. */
mxu_status_t mxa_graph_on_destroy(mxa_stream_t *s, void *graph, void (*fn)(void *), void *arg);
/* host backend's (accel/host.c) */
mxu_status_t mxa_host_graph_word_alloc(uint64_t **pair);
mxu_status_t mxa_host_graph_fire(mxa_stream_t *s, uint64_t *pair);
mxu_status_t mxa_host_graph_wait(mxa_stream_t *s, uint64_t *pair);

/* Stream-ordered communication is not captured into CUDA graphs (issue
 * 21): its points carry sequence numbers fixed at the call, so a graph
 * launched twice would skip its messages. On a stream that is being
 * captured: log why (what: the call), invalidate the capture (the
 * application's end of capture then fails too) and MXU_ERR_CAPTURED;
 * else MXU_OK. Any thread. */
mxu_status_t mxa_stream_refuse_capture(mxa_stream_t *s, const char *what);

/* The "none" stream singleton (kind NONE). */
mxa_stream_t *mxa_none_stream(void);

#endif
