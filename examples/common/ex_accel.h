/*
 * ex_accel.h - the examples' compute backend: streams, memory, events,
 * copies and "kernel" launches behind one small interface.
 *
 *   host  - library host streams (MPIX_Acc_Hoststream_*): a "kernel" is a
 *           host function launched on the stream; memory is host memory.
 *   cuda  - cudaStream_t, device memory, CUDA kernels (ex_accel_cuda.cu),
 *           present in builds with CUDA and used when a device is found.
 *
 * A stream is an MPIX_Acc_stream in both cases (a host stream handle, or a
 * cudaStream_t), so it is passed unchanged to MPIX_Acc_* calls and to
 * MPIX_Acc_Info_set_stream.
 *
 * Kernels: an example describes one kernel by an ex_kernel_t holding a host
 * function and a CUDA launcher for the same argument block. The argument
 * block must stay valid and unchanged until the stream has executed the
 * kernel (examples keep them in persistent arrays).
 *
 * Events (cudaEvent-like, for joining two streams): ex_event_record(ev, s)
 * and ex_event_wait(ev, s) pair in order: the j-th wait enqueued makes its
 * stream wait until the stream of the j-th record has reached that record.
 * (Host: a counter + condition variable; CUDA: a ring of two cudaEvents,
 * valid because a wait is always enqueued before the record two ahead.)
 * ex_event_reset() restarts the pairing; call it only when both streams are
 * idle.
 */
#ifndef EX_ACCEL_H
#define EX_ACCEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same type as MPIX_Acc_stream (this header does not include mpi.h, so the
 * CUDA sources compile without MPI headers). */
typedef void *ex_stream_t;
typedef struct ex_event ex_event_t;

typedef enum {
    EX_MEM_DEVICE = 0,   /* where kernels compute (device memory; host memory on "host") */
    EX_MEM_PINNED = 1,   /* host memory a kernel can also access (pinned; plain host on "host") */
    EX_MEM_MANAGED = 2,  /* managed (unified) memory; plain host on "host" */
    EX_MEM_PAGEABLE = 3, /* plain malloc'ed host memory: no kernel may touch it */
} ex_mem_t;

typedef struct {
    void (*host_fn)(void *arg);                   /* runs on a host stream's thread */
    void (*cuda_fn)(void *arg, void *cudastream); /* enqueues CUDA kernel(s); NULL: none */
    void *arg;
} ex_kernel_t;

typedef struct ex_accel {
    const char *name; /* "host" or "cuda" */
    int is_device;    /* 1: EX_MEM_DEVICE is not host-accessible */
    char desc[160];   /* e.g. "host streams" or "cuda: NVIDIA H200 (device 0 of 2)" */

    void *(*alloc)(size_t bytes, ex_mem_t kind);
    void (*free)(void *p, ex_mem_t kind);
    ex_stream_t (*stream_create)(void);
    void (*stream_destroy)(ex_stream_t s);
    void (*stream_sync)(ex_stream_t s);
    void (*launch)(ex_stream_t s, const ex_kernel_t *k);
    /* Stream-ordered copy of n bytes (any direction the memory kinds allow). */
    void (*copy_async)(ex_stream_t s, void *dst, const void *src, size_t n);
    /* Synchronous copy (the device is idle for these buffers). */
    void (*copy)(void *dst, const void *src, size_t n);
    ex_event_t *(*event_create)(void);
    void (*event_destroy)(ex_event_t *ev);
    void (*event_reset)(ex_event_t *ev);
    void (*event_record)(ex_event_t *ev, ex_stream_t s);
    void (*event_wait)(ex_event_t *ev, ex_stream_t s);
    void (*finalize)(void);
} ex_accel_t;

/* Print "[rank r] error: msg" and abort the MPI job (for .cu sources). */
void ex_fatal(const char *msg) __attribute__((noreturn));

/* Host streams (needs MPI_Init and the mpix-acc library). */
const ex_accel_t *ex_accel_host(void);

/* CUDA: selects device (local_rank % count). Returns NULL with a reason in
 * why when the build has no CUDA or no device is usable. */
const ex_accel_t *ex_accel_cuda(int local_rank, char *why, size_t whylen);

/* Before MPI_Init: unless want is "host", make the GPU of this rank current
 * (local rank from the launcher's environment: MPI_LOCALRANKID,
 * OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID), so the library sees the
 * device the application uses when it initializes, and ask for eager
 * kernel loading (CUDA_MODULE_LOADING=EAGER unless set). Silent when there is
 * no GPU; a no-op in builds without CUDA. */
void ex_accel_preinit(const char *want);
void ex_accel_cuda_preinit(int local_rank);

/* want: "auto" (cuda if usable, else host), "host" or "cuda". Dies when
 * "cuda" is asked for and not usable. note receives the fallback reason. */
const ex_accel_t *ex_accel_select(const char *want, int local_rank, char *note, size_t notelen);

/* CUDA graphs (CUDA backend, ex_accel_cuda.cu): a capture of the stream
 * into a CUDA graph (global mode), its end and instantiation (*exec; the
 * graph itself is destroyed, the instance keeps what it needs), a launch,
 * the instance freed (launches in flight finish first). 0, or -1 with the
 * reason in why. */
int ex_cuda_graph_begin(void *stream, char *why, size_t len);
int ex_cuda_graph_end(void *stream, void **exec, char *why, size_t len);
int ex_cuda_graph_launch(void *exec, void *stream, char *why, size_t len);
void ex_cuda_graph_free(void *exec);

#ifdef __cplusplus
}
#endif

#endif
