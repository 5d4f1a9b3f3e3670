/*
 * pack_proto.h - the chunk list of a non-contiguous datatype as the CUDA
 * pack kernel (cuda_kernels.cu's mxa_pack_kernel) reads it: one element's
 * chunks in type-map order; element e's chunk k is len bytes at
 * buf + e * extent + off, packed at e * size + pos (MPI_Pack's order).
 * interpose/typelayout.c builds the list, p2p.c uploads it per context.
 */
#ifndef MX_ACCEL_PACK_PROTO_H
#define MX_ACCEL_PACK_PROTO_H

#include <stdint.h>

typedef struct {
    int64_t off;  /* from the element's start, may be < 0 */
    uint64_t len; /* bytes */
    uint64_t pos; /* offset in the element's packed bytes */
} mxa_chunk_t;

typedef struct {
    uint64_t buf;    /* the user's buffer (device or managed memory) */
    uint64_t packed; /* the packed bytes (device memory) */
    uint64_t chunks; /* mxa_chunk_t[nchunks] in device memory; 0: contiguous bytes,
                      * one chunk {0, size, 0} per element (nchunks 1) */
    uint64_t nchunks;
    uint64_t count;    /* elements */
    int64_t extent;    /* bytes between elements */
    uint64_t size;     /* packed bytes of one element */
    uint64_t limit;    /* packed bytes to gather or scatter at most */
    uint64_t limit_at; /* unpack: 0, or a host-visible word holding the limit */
    int32_t unpack;    /* 0: gather buf -> packed; 1: scatter packed -> buf */
    int32_t limit_dev; /* limit_at is device memory already (an SX step wrote it) */
    /* reg_len != 0: the chunks are regular -- chunk k is reg_len bytes at
     * reg_off + k * reg_stride (a vector of a basic type: a column) -- so
     * a fused pack finds a byte's chunk by division, not by search */
    uint64_t reg_len;
    int64_t reg_off;
    int64_t reg_stride;
} mxa_pack_args_t;

#ifndef __CUDACC__
#include <string.h>
/* Host memory: gather (a->unpack 0) or scatter the first `limit` packed
 * bytes of a (chunks in host memory; 0: contiguous elements), piece by
 * piece in packed order -- the host executors' fused packs (sx_proto.h)
 * and the interposition layer's host packing (typelayout.c). */
static inline void mxa_pack_host(const mxa_pack_args_t *a, uint64_t limit)
{
    const mxa_chunk_t flat = {0, a->size, 0};
    const mxa_chunk_t *ch = a->chunks ? (const mxa_chunk_t *)(uintptr_t)a->chunks : &flat;
    uint64_t nch = a->chunks ? a->nchunks : 1;
    for (uint64_t e = 0; e < a->count; e++)
        for (uint64_t k = 0; k < nch; k++) {
            uint64_t at = e * a->size + ch[k].pos, len = ch[k].len;
            if (at >= limit)
                return; /* pieces are in packed order */
            if (len > limit - at)
                len = limit - at;
            unsigned char *user =
                (unsigned char *)(uintptr_t)a->buf + (int64_t)e * a->extent + ch[k].off;
            unsigned char *pk = (unsigned char *)(uintptr_t)a->packed + at;
            if (a->unpack)
                memcpy(user, pk, (size_t)len);
            else
                memcpy(pk, user, (size_t)len);
        }
}
#endif

#endif
