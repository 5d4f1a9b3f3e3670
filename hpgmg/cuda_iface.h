/*
 * hpgmg/cuda_iface.h - C interface of the CUDA part (cuda_kernels.cu).
 * Only used when the proxy is built with HAVE_CUDA.
 */
#ifndef HPGMG_CUDA_IFACE_H
#define HPGMG_CUDA_IFACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* select the device local_rank % count; returns the device count (0: none) */
int hg_cuda_init(int local_rank, char *name, size_t name_len);
void *hg_cuda_stream_create(void);
void hg_cuda_stream_destroy(void *stream);
void hg_cuda_stream_sync(void *stream);
/* enqueue operation `kind` (ops.h) with its argument block on `stream` */
void hg_cuda_run(void *stream, int kind, const void *args);
void *hg_cuda_alloc(size_t bytes, int mem_kind); /* hg_mem_t; zero-filled */
void hg_cuda_free(void *p, int mem_kind);
void hg_cuda_copy(void *dst, const void *src, size_t bytes); /* cudaMemcpy, any direction */

#ifdef __cplusplus
}
#endif

#endif /* HPGMG_CUDA_IFACE_H */
