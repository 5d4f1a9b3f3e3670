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

/* ---- the ki backend (cuda_ki.cu; builds with mpix-acc only) ----------
 * A program's messages are partitioned requests (MPIX_Acc_Psend_init /
 * Precv_init, one pair per peer, partition r = run r of an epoch): the
 * send kernel packs each peer's tiles into partition `slot` of its buffer
 * and the last block that packed for a peer marks the partition ready
 * (mpix_acc_pready); the receive kernel's first block for a peer waits
 * for the partition (mpix_acc_parrived_wait, which copies it into the
 * buffer), the peer's other blocks wait for that block; then each unpacks
 * its tile. Local tiles run in the send kernel, beside the transfers. */
typedef struct {
    double *base; /* the peer's buffer: `partitions` runs of `count` doubles */
    int count;    /* doubles per run                                         */
    int tiles;    /* tiles of the peer's message                             */
    void *dreq;   /* the request's device handle (mpix_acc_dreq_t *)         */
} hg_ki_peer_t;

typedef struct {
    hg_args_tiles_t pack, local, unpack; /* device tile lists; a pack tile's doff and
                                            an unpack tile's soff are relative to its
                                            peer's run, its peer in tile.peer     */
    const hg_ki_peer_t *send, *recv;     /* device arrays, one per peer          */
    unsigned long long *packed;          /* per send peer: blocks that packed    */
    unsigned long long *claim, *ready;   /* per receive peer: run claimed / copied in */
    int *err;                            /* failed device calls (device word)    */
    int slot;                            /* partition of this run                */
    unsigned long long run;              /* 1, 2, ...: runs of the program       */
} hg_args_ki_t;

/* load the kernels now (hg_cuda_init says why: a first launch under lazy
 * loading can wait for a kernel that waits for the peer) */
void hg_cuda_ki_load(void);
/* enqueue the send kernel (pack + pready, local tiles) / the receive kernel */
void hg_cuda_ki_send(void *stream, const hg_args_ki_t *a);
void hg_cuda_ki_recv(void *stream, const hg_args_ki_t *a);
/* mark partitions lo..hi of n send requests ready (an epoch cut short) */
void hg_cuda_ki_fill(void *stream, const hg_ki_peer_t *send_dev, int n, int lo, int hi, int *err);

#ifdef __cplusplus
}
#endif

#endif /* HPGMG_CUDA_IFACE_H */
