/*
 * llred_proto.h - the one-kernel Allreduce between the processes of a node
 * (interpose/coll_ll.c plans it, cuda_kernels.cu's mxa_llred_kernel runs
 * it): the plan a kernel gets by value. Nothing here knows MPI or UCX.
 *
 * Every process owns a receive area in its GPU's memory that its peers map
 * (exported as a POSIX fd): per sending peer two regions (call parity) of
 * LL lines, each 4 data bytes under a 4-byte flag, written and read as one
 * 64-bit access (NCCL's LL protocol): a reader that sees the call's flag in
 * a line sees that line's data. A call has a flag no earlier call of the
 * communicator had; its round k writes this process's partial into the
 * partner's region for it and spins on its own region for the partner's,
 * then combines (lower rank's partial first, streamcoll.c's order). Two
 * regions per peer suffice: a process writes a peer's region of parity P
 * again two calls later, after a call in which it waited for that peer's
 * data -- which the peer sends only after it read the region.
 */
#ifndef MX_ACCEL_LLRED_PROTO_H
#define MX_ACCEL_LLRED_PROTO_H

#include <stdint.h>

#define MXA_LLRED_MAX_ROUNDS 24
#define MXA_LLRED_MAX_BYTES (16u * 1024u) /* per message: the kernel's shared buffer */

/* a round's work */
#define MXA_LLR_EXCH 0   /* send the partial, receive the partner's, combine */
#define MXA_LLR_SEND 1   /* send the partial only (a folded rank gives its data) */
#define MXA_LLR_FOLDIN 2 /* receive the partner's and combine, send nothing */
#define MXA_LLR_RESULT 3 /* receive the result into dst (a folded rank at the end) */
#define MXA_LLR_GIVE 4   /* send the result (dst) to the folded partner */

typedef struct {
    uint64_t to;          /* the partner's region for this process (mapped here) */
    uint64_t from;        /* this process's region for the partner */
    int32_t mode;         /* MXA_LLR_* */
    int32_t theirs_first; /* combine: the partner's partial is the left operand */
} mxa_llred_round_t;

typedef struct {
    uint64_t src, dst;   /* this process's contribution, the result (device) */
    uint64_t n;          /* elements */
    uint64_t err;        /* host-visible word: the kernel sets 1 on a time-out */
    uint64_t abort_word; /* host-visible word, non-zero: stop waiting (0: none) */
    uint64_t timeout_ns; /* a round's wait, 0: none */
    int32_t kind, op;    /* accel.h's mxa_red_kind_t, mxa_red_op_t */
    uint32_t flag;       /* this call's LL flag, never 0 */
    int32_t nrounds;
    mxa_llred_round_t r[MXA_LLRED_MAX_ROUNDS];
} mxa_llred_plan_t;

#endif
