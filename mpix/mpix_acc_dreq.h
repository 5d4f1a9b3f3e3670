/*
 * mpix_acc_dreq.h - the device handle of a partitioned request (mpix-acc).
 *
 * Shared by the library (C) and the device functions of
 * mpix_acc_device.cuh (CUDA C++): one layout, one protocol. Applications
 * use it only through MPIX_Acc_Prequest_get_device(3) and the functions
 * of mpix_acc_device.cuh; the fields are the library's.
 *
 * Protocols (mpix_acc_device.cuh, MPIX_Acc_Psend_init(3)):
 *   proxy   the sender's pready raises ready[p] = epoch in host-visible
 *           memory; the library's progress thread sends the partition as
 *           an MPI message and the receiver's raises arrived[p] = epoch
 *           once it landed in the receive buffer. Works between any two
 *           processes, for any memory.
 *   direct  (processes of one node whose GPUs reach each other, device
 *           buffers) pready writes the partition into the receiver's
 *           slots, mapped into the sender's address space: as LL lines --
 *           8 bytes each, 4 bytes of data and the epoch as flag -- up to
 *           MPIX_ACC_KI_LL_BYTES, above as plain bytes followed by a fence
 *           and the partition's flag (bulk); parrived (or the receive's
 *           completion) sees the flags and copies the data out. No host
 *           thread in between.
 * Epochs count the starts of a request (1, 2, ...) and only grow, so no
 * flag is ever reset. On the direct path every step of an epoch reads the
 * epoch from the handle (a start in a CUDA graph capture adds one to it on
 * the device): a captured start, kernels and stream wait replay as new
 * epochs each launch, with no host work.
 */
#ifndef MPIX_ACC_DREQ_H
#define MPIX_ACC_DREQ_H

#include <stdint.h>

#define MPIX_ACC_DREQ_MAGIC 0x4d585052u /* "MXPR" while the request lives */

/* dreq->mode */
#define MPIX_ACC_DREQ_PENDING 0 /* set-up not finished (the peer's init not seen yet) */
#define MPIX_ACC_DREQ_PROXY 1
#define MPIX_ACC_DREQ_DIRECT 2

/* Errors of the device functions (returned, and the first one kept in
 * *dreq->error, which the request's completion reports by name). */
#define MPIX_ACC_DSUCCESS 0
#define MPIX_ACC_DERR_FREED 1     /* the handle's request was freed (or is not one) */
#define MPIX_ACC_DERR_PARTITION 2 /* partition index out of range */
#define MPIX_ACC_DERR_TWICE 3     /* pready twice for one partition in one epoch */
#define MPIX_ACC_DERR_TIMEOUT 4   /* a bounded device wait ran out (MPIX_ACC_KI_TIMEOUT) */
#define MPIX_ACC_DERR_ROLE 5      /* pready on a receive request, parrived on a send request */
#define MPIX_ACC_DERR_NOT_READY 6 /* the request has no started epoch */
#define MPIX_ACC_DERR_SIZE 7      /* a value call whose value is not one partition in size */

typedef struct mpix_acc_dreq {
    uint32_t magic;   /* MPIX_ACC_DREQ_MAGIC; 0 once freed */
    uint32_t is_send; /* 1: partitioned send; 0: receive */
    uint32_t mode;    /* MPIX_ACC_DREQ_*: written before any epoch passes its start */
    int32_t partitions;
    uint64_t part_bytes; /* bytes of one partition */
    char *buf;           /* the user's buffer, as the executor addresses it */
    uint64_t epoch;      /* the current epoch, written in stream order by the start */
    uint64_t timeout_ns; /* bound of every device wait (MPIX_ACC_KI_TIMEOUT) */
    uint32_t *error;     /* host-visible: the first device error (MPIX_ACC_DERR_*) */
    uint64_t *pstate;    /* per partition: the epoch it was last made ready (send) or copied
                            out (receive) in, where this side's code runs */
    /* proxy */
    uint64_t *ready;   /* send: ready[p] = epoch (host-visible) */
    uint64_t *arrived; /* receive: arrived[p] = epoch once partition p landed */
    /* direct */
    uint64_t *lines;      /* the receiver's slots: partition p at lines + p * line_stride */
    uint64_t line_stride; /* 8-byte words per partition's slot (even: 16-byte aligned) */
    uint32_t bulk;        /* 0: LL lines; 1: plain bytes, flag in pflags[p] */
    uint32_t pad0;
    uint64_t *pflags;         /* bulk: the receiver's flag per partition (its epoch) */
    uint64_t *consumed;       /* in the receiver's slot memory: the last epoch it completed */
    uint64_t consumed_seen;   /* send: the last value read of *consumed */
    unsigned long long *done; /* send: partitions delivered, over all epochs */
    unsigned long long fin;   /* receive: blocks of completion kernels finished, over all
                                 epochs (the last block of each writes the credit) */
} mpix_acc_dreq_t;

#endif /* MPIX_ACC_DREQ_H */
