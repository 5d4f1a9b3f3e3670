/*
 * typelayout.h - the byte layout of an MPI datatype as a list of chunks
 * (typelayout.c): what a stream-ordered pack or unpack step needs to move a
 * non-contiguous buffer without calling the MPI library (issue 20 item 1:
 * "contiguous chunks extracted once per type and cached").
 *
 * A layout describes one element: its chunks (offset from the buffer,
 * length) in type-map order, adjacent ones merged, so packing element e is
 * copying every chunk at e * extent + offset, in order, into consecutive
 * bytes: the same bytes in the same order as MPI_Pack. Layouts are built
 * once per datatype from MPI_Type_get_envelope / _get_contents (named,
 * dup, contiguous, vector, hvector, indexed, hindexed, indexed_block,
 * hindexed_block, struct, resized, subarray and their nestings), cached on
 * the datatype as an attribute, and reference-counted: an operation keeps
 * its layout alive after the application frees the type.
 */
#ifndef MX_INTERPOSE_TYPELAYOUT_H
#define MX_INTERPOSE_TYPELAYOUT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/pack_proto.h"

typedef struct mxi_layout {
    int refs;         /* atomic */
    uint64_t size;    /* bytes of one element (MPI_Type_size) */
    int64_t extent;   /* stride between elements (MPI_Type_get_extent) */
    void *dev_ctx;    /* the device context of dev_chunks (p2p.c), or NULL */
    void *dev_chunks; /* c uploaded into that context's memory */
    /* reg_len != 0: every chunk is reg_len bytes, chunk k at reg_off +
     * k * reg_stride (regular: a vector of a basic type, one chunk) */
    uint64_t reg_len;
    int64_t reg_off, reg_stride;
    size_t n;        /* chunks of one element */
    mxa_chunk_t c[]; /* n chunks (offset, length, packed position; pack_proto.h) */
} mxi_layout_t;

/* The layout of datatype dt (committed), with one reference for the caller
 * (mxi_layout_put). MPI_SUCCESS, or an MPI error code for a type whose
 * constructor is not supported (e.g. darray) or on memory exhaustion; the
 * message says which. */
int mxi_layout_get(MPI_Datatype dt, mxi_layout_t **out);
void mxi_layout_put(mxi_layout_t *l);
/* A layout of plain bytes (one chunk of 1 byte, extent 1: count elements
 * are count contiguous bytes), one reference for the caller; NULL when out
 * of memory. For contiguous messages staged through a library buffer. */
mxi_layout_t *mxi_layout_bytes_get(void);
/* Is one element one chunk at offset 0 whose extent is its size (count
 * elements are contiguous bytes)? Pack and unpack then copy at once. */
int mxi_layout_contiguous(const mxi_layout_t *l);
/* Packed bytes of count elements. */
static inline uint64_t mxi_layout_bytes(const mxi_layout_t *l, int count)
{
    return l->size * (uint64_t)(count > 0 ? count : 0);
}
/* Host memory: gather count elements of buf into packed (mxi_layout_bytes
 * bytes, MPI_Pack's order), and scatter the first `bytes` packed bytes
 * back into count elements of buf (fewer bytes: a truncated or short
 * message fills the elements' first chunks only). */
void mxi_layout_pack(const mxi_layout_t *l, const void *buf, int count, void *packed);
void mxi_layout_unpack(const mxi_layout_t *l, const void *packed, uint64_t bytes, void *buf,
                       int count);
/* Device packing (p2p.c): the layout's chunks in device memory of ctx --
 * uploaded at its first use there when `upload`, else NULL unless they
 * are there already (a stream being captured allocates nothing) -- and the
 * pack kernel's arguments for count elements of user_buf and the packed
 * bytes (chunks NULL for a contiguous layout). */
void *mxi_layout_dev_chunks(mxi_layout_t *l, void *ctx, int upload);
mxa_pack_args_t mxi_layout_pack_args(const mxi_layout_t *l, void *user_buf, void *packed,
                                     void *chunks, int count, int unpack);
/* The keyval's life (init.c). */
void mxi_layout_init(void);
void mxi_layout_finalize(void);

#endif
