/*
 * cuda.h - the CUDA backend's entry points (cuda*.c), for the accelerator
 * layer's own files only: accel.c calls them behind the backend-neutral
 * functions of accel.h. Nothing above accel includes this header; the
 * engine and interpose ask accel.h (mxa_device_active, mxa_*_pci_busid,
 * mxa_context_push, ...). Present only in CUDA builds.
 */
#ifndef MX_ACCEL_CUDA_H
#define MX_ACCEL_CUDA_H

#include "accel/accel.h"

#ifdef MPIXACC_HAVE_CUDA
mxu_status_t mxa_cuda_init(void); /* dlopen libcuda; MXU_ERR_NO_DEVICE if absent */
void mxa_cuda_finalize(void);
int mxa_cuda_active(void);
mxu_status_t mxa_cuda_stream_lookup(void *handle, mxa_stream_t **out);
mxa_memtype_t mxa_cuda_memtype(const void *buf, size_t len);
void mxa_cuda_get_features(mxa_features_t *out);
/* Call fn for every CUDA stream record (fn may look streams up; records live
 * until mxa_cuda_finalize). */
void mxa_cuda_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg);
/* PCI bus id ("0000:3b:00.0", lower case) of the GPU of a CUDA stream; NULL
 * for other kinds or when unknown (the CUDA backend's pci_busid). */
const char *mxa_cuda_stream_pci_busid(mxa_stream_t *s);
/* The same for the calling thread's current CUDA context (NULL: none). */
const char *mxa_cuda_current_pci_busid(void);
/* Make a suitable CUDA context current on the calling thread: the context
 * that owns `buf` when buf is device or managed memory; for other memory,
 * if the thread has no context at all, the first context the backend set
 * up (no-op when nothing applies). UCX's CUDA transports (cuda_copy,
 * cuda_ipc) work in the calling thread's current context and fail without
 * one - also for a host buffer whose peer sends from or receives into GPU
 * memory. The progress thread gets a context from the first CUDA stream it
 * polls (cuda_stream.c, progress_thread_context), and from this for the
 * operations it makes for CUDA graphs (accel's mxa_thread_bind_buffer, at
 * each captured template's registration: engine's mxe_mem_register). */
mxu_status_t mxa_cuda_bind_buffer(const void *buf);
int mxa_cuda_ctx_push(void *ctx);
void mxa_cuda_ctx_pop(void);
void mxa_cuda_thread_relax_capture(void);
/* Scratch memory for stream s's operations (accel.c's mxa_stream_scratch):
 * device or managed memory in s's context, pinned host memory for host;
 * never freed (freeing waits for the device). */
mxu_status_t mxa_cuda_scratch_alloc(mxa_stream_t *s, mxa_memtype_t k, size_t bytes, void **out);
/* Enqueue on s a copy of bytes from src to dst (cuMemcpyAsync). */
mxu_status_t mxa_cuda_stream_copy(mxa_stream_t *s, void *dst, const void *src, size_t bytes);
/* Enqueue on s fn(arg) on the driver's callback thread (cuLaunchHostFunc). */
mxu_status_t mxa_cuda_stream_host_call(mxa_stream_t *s, void (*fn)(void *), void *arg);
/* cuStreamSynchronize in s's context. */
mxu_status_t mxa_cuda_stream_synchronize(mxa_stream_t *s);
/* Enqueue on s the reduction kernel (reduce.c's mxa_stream_reduce: kind
 * and op are mxa_red_kind_t / mxa_red_op_t; pointers in device or managed
 * memory of s's context). */
mxu_status_t mxa_cuda_stream_reduce(mxa_stream_t *s, int kind, int op, void *out, const void *a,
                                    const void *b, size_t n);
/* Enqueue on s the one-kernel Allreduce of plan (words: 4-byte words of
 * its message); the CUcontext of s. */
mxu_status_t mxa_cuda_stream_llreduce(mxa_stream_t *s, const mxa_llred_plan_t *plan, size_t words);
void *mxa_cuda_stream_ctx(mxa_stream_t *s);
/* cuda_pack.c: device pack/unpack of non-contiguous datatypes and the
 * device memory of packed messages (accel.h's mxa_dev_temp_*, _pack_*) */
mxu_status_t mxa_cuda_temp_get(void *ctx, const void *stream, size_t bytes, int host, void **p,
                               size_t *got, uint64_t **word);
void mxa_cuda_temp_put(void *ctx, void *p, size_t got, int host, uint64_t *word,
                       const void *stream);
mxu_status_t mxa_cuda_temp_take(void *ctx, const void *stream, size_t bytes, int host, void **p,
                                size_t *got, uint64_t **word);
mxu_status_t mxa_cuda_stream_pack(mxa_stream_t *s, const mxa_pack_args_t *args, int captured,
                                  void *limit_word);
mxu_status_t mxa_cuda_pack_start(void *ctx, const mxa_pack_args_t *args, mxa_dev_job_t **job);
mxu_status_t mxa_cuda_job_done(mxa_dev_job_t *j, int block);
mxu_status_t mxa_cuda_dev_upload(void *ctx, const void *host, size_t bytes, void **dptr);
/* partitioned requests (cuda_part.c; accel.h's mxa_part_* and mxa_stream_write64) */
mxu_status_t mxa_cuda_part_dev_alloc(const void *buf, size_t bytes, void **dptr, void **ctx);
void mxa_cuda_part_dev_free(void *ctx, void *dptr, size_t bytes);
mxu_status_t mxa_cuda_part_dev_write(void *ctx, void *dptr, const void *src, size_t bytes);
mxu_status_t mxa_cuda_stream_write64(mxa_stream_t *s, uint64_t *addr, uint64_t v);
void mxa_cuda_part_vmm_free(void *ctx, void *dptr, size_t bytes);
void mxa_cuda_part_busid(void *ctx, char *buf, size_t len);
int mxa_cuda_part_reaches(void *ctx, const char *peer_busid);
mxu_status_t mxa_cuda_part_complete(mxa_stream_t *s, void *dreq, int is_send, int partitions,
                                    uint64_t part_bytes);
mxu_status_t mxa_cuda_part_start(mxa_stream_t *s, void *dreq);
/* graphs (cuda_graph.c; accel.h's graph words, mxa_stream_capture_info,
 * mxa_graph_on_destroy) */
mxu_status_t mxa_cuda_graph_words_alloc(mxa_stream_t *s, uint64_t **pair);
void mxa_cuda_graph_words_free(uint64_t *pair);
mxu_status_t mxa_cuda_graph_node(mxa_stream_t *s, uint64_t *pair, int wait);
mxu_status_t mxa_cuda_capture_info(mxa_stream_t *s, uint64_t *id, void **graph);
mxu_status_t mxa_cuda_graph_on_destroy(void *graph, void (*fn)(void *), void *arg);

/* cuda_sx.c: the stream-executed path's device side (for sx.c) */
#include "accel/sx_proto.h"
void *mxa_cuda_sx_host_alloc(size_t bytes); /* pinned, mapped, portable; never freed */
int mxa_cuda_sx_context_known(void);        /* a context to allocate that in exists */
void mxa_cuda_sx_host_free(void *p);
mxu_status_t mxa_cuda_sx_register(void *host, size_t bytes, uint64_t *dptr);
void *mxa_cuda_sx_stream_ctx(const mxa_stream_t *s);
void mxa_cuda_stream_break_capture(mxa_stream_t *s);
mxu_status_t mxa_cuda_sx_send(mxa_stream_t *s, const mxa_sx_send_desc_t *d);
mxu_status_t mxa_cuda_sx_recv(mxa_stream_t *s, const mxa_sx_recv_desc_t *d, int n,
                              const mxa_sx_limits_t *lim);
mxu_status_t mxa_cuda_sx_after(mxa_stream_t *s, mxa_stream_t *other, uint64_t seq);
mxa_stream_t *mxa_cuda_sx_library_stream(void *ctx);
/* SX device rings (sx.c): device memory of ctx's GPU that another process
 * maps, exported as a POSIX file descriptor (cuMemCreate: not bound to a
 * context, unlike a CUDA IPC handle), zeroed; and the importer's side:
 * map an exported fd for ctx's GPU (the fd is not closed here). *base is
 * the address; *bytes rounded up to the granularity on allocation. */
mxu_status_t mxa_cuda_sx_dring_alloc(void *ctx, size_t *bytes, uint64_t *base, int *fd);
mxu_status_t mxa_cuda_sx_dring_import(void *ctx, int fd, size_t bytes, uint64_t *base);
/* Copy device-ring bytes to host memory (progress thread, synchronous). */
mxu_status_t mxa_cuda_sx_dring_read(void *ctx, uint64_t src, void *dst, size_t bytes);
/* Zeroed device memory of ctx's GPU for a sender's bulk-step scratch
 * (kept until exit, like the rings). */
mxu_status_t mxa_cuda_sx_scratch_alloc(void *ctx, size_t bytes, uint64_t *dptr);
#endif

#endif
