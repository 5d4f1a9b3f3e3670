/*
 * hpgmg/cuda_iface.h - C interface of the CUDA part (cuda_kernels.cu).
 * Only used when the proxy is built with HAVE_CUDA.
 */
#ifndef HPGMG_CUDA_IFACE_H
#define HPGMG_CUDA_IFACE_H

#include <stddef.h>

#include "ops.h"

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
/* launch the kernels with programmatic dependent launch (default on) */
void hg_cuda_set_pdl(int on);
/* CUDA graphs (--graph): capture what this thread enqueues on `stream`
 * (thread-local mode: the library's threads may call CUDA meanwhile);
 * end returns the instantiated graph, NULL with a message when the capture
 * failed (e.g. a call refused it) */
void hg_cuda_capture_begin(void *stream);
void *hg_cuda_capture_end(void *stream);
void hg_cuda_graph_launch(void *exec, void *stream);
void hg_cuda_graph_destroy(void *exec);

/* ---- the ki backend (cuda_ki.cu; builds with mpix-acc only) ----------
 * A program's messages are partitioned requests (MPIX_Acc_Psend_init /
 * Precv_init): per peer, one request pair per tile size (a group), with a
 * partition per tile and run (partition = run slot x tiles + the tile's
 * index in its group; an epoch is `partitions / tiles` runs). A run is one
 * kernel whose blocks take their work in the order they start (a ticket):
 * first pack blocks -- a tile into its partition, then mark it ready
 * (mpix_acc_pready: the partition goes to the peer's slots from the
 * block) --, then the local tiles, then unpack blocks -- wait for the
 * tile's partition (mpix_acc_parrived_wait copies it into the buffer),
 * unpack it --, then, after an exchange, the boundary conditions
 * (hg_apply_bc), whose blocks wait for every block before them, then a
 * stencil sweep on the exchanged vector (hg_stencil: the smoother, the
 * residual), whose blocks wait for every block before them too. A
 * tile cut into chunks: the last chunk packed readies it, the first chunk
 * of the receive side copies it in for the others. A block waits only for
 * blocks that started before it (so run) or for the peer's pack blocks. */
typedef struct {
    double *base; /* the group's buffer: partition p at base + p * size    */
    int size;     /* doubles per tile (partition)                           */
    int tiles;    /* tiles of the group per run                             */
    void *dreq;   /* the request's device handle (mpix_acc_dreq_t *)        */
} hg_ki_group_t;

typedef struct {
    hg_args_tiles_t pack, local, unpack; /* device tile lists; a pack or unpack tile's
                                            group is tile.peer, its index in the group
                                            doff (pack) / soff (unpack)             */
    const hg_ki_group_t *send, *recv;    /* device arrays                           */
    unsigned long long *packed;          /* per pack tile: chunks packed (all runs)   */
    unsigned long long pack_target;      /* ... when this run's are                  */
    unsigned long long *claim, *ready;   /* per unpack tile: run claimed / copied in */
    unsigned long long *ticket;          /* the kernels' blocks started (their order) */
    unsigned long long ticket_base;      /* ... before this launch                   */
    unsigned long long *done;            /* pack, local, unpack, boundary blocks done
                                            (all runs)                               */
    unsigned long long bc_target;        /* ... when this run's before the boundary
                                            blocks are                               */
    unsigned long long st_target;        /* ... when all of this run's are           */
    hg_args_bc_t bc;                     /* bc.nbc > 0: the kernel then applies
                                            these boundary conditions (hg_apply_bc)  */
    hg_args_stencil_t st;                /* st.out != NULL: then this stencil sweep  */
    int *err;                            /* failed device calls (device word)       */
    int slot;                            /* run slot in the epoch (slot_dev: offset) */
    const unsigned long long *slot_dev;  /* non-NULL (a run captured into a CUDA graph):
                                            the slot is *slot_dev + slot, the word
                                            the graph advances (comm.c)             */
    int pdl;                             /* launch with programmatic dependent launch */
    unsigned long long run;              /* 1, 2, ...: runs of the program          */
} hg_args_ki_t;

/* load the kernels now (hg_cuda_init says why: a first launch under lazy
 * loading can wait for a kernel that waits for the peer) */
void hg_cuda_ki_load(void);
/* a run's kernel: chunks per pack/local tile (cp), unpack tile (cu) and
 * boundary region (cb); its blocks before the boundary blocks, before the
 * stencil blocks, and all */
typedef struct {
    unsigned cp, cu, cb;
    long long pre_bc, pre_st, blocks;
} hg_ki_shape_t;
void hg_cuda_ki_shape(const hg_args_ki_t *a, hg_ki_shape_t *shape);
/* enqueue a run's kernel (its shape from hg_cuda_ki_shape) */
void hg_cuda_ki_run(void *stream, const hg_args_ki_t *a, const hg_ki_shape_t *shape);
/* mark partitions lo.. of n send groups ready, each up to its last (an
 * epoch cut short: lo_slot is the first run slot not made) */
void hg_cuda_ki_fill(void *stream, const hg_ki_group_t *send_dev, int n, int lo_slot, int runs,
                     int *err);
/* set n device counter words to 0 on the stream (a program's counters at
 * the start of a CUDA graph's launch, comm.c) */
void hg_cuda_ki_reset(void *stream, unsigned long long *words, size_t n);
/* a program's slot word (comm.c, CUDA graphs) in stream order: *word = v,
 * or *word += v with add */
void hg_cuda_ki_word(void *stream, unsigned long long *word, unsigned long long v, int add);

#ifdef __cplusplus
}
#endif

#endif /* HPGMG_CUDA_IFACE_H */
