/*
 * sx_proto.h - the stream-executed (SX) path's protocol, written once for
 * every executor: the CUDA kernels (cuda_kernels.cu, compiled by nvcc) and
 * the host backend's stream threads (sx.c). Nothing here knows MPI or UCX.
 *
 * A *link* carries messages from one process (the sender) to another (the
 * receiver) of the same node. The receiver owns it:
 *
 *   control page  POSIX shared memory (both processes map it; the CUDA
 *                 backend also registers it for its GPU): the published
 *                 ring, and one `consumed` word per slot, which the
 *                 receiver's step raises when it has copied a message out.
 *   ring          nslots slots of slot_bytes payload behind a 64-byte
 *                 header, in the receiver's memory (device memory exported
 *                 by CUDA IPC, or the control page itself for host streams).
 *
 * The sender numbers its SX messages on the link n = 0, 1, 2, ... and
 * message n may use slot n % nslots. The send step decides when it runs:
 * the slot is free when the message last written into it was consumed
 * (`consumed[slot] >= written[slot]`, both n + 1 of a message; the sender
 * writes `written`, the receiver `consumed`). Free: it claims the slot
 * (written = n + 1) and writes, in order:
 *   header.flag = 0; payload; fence; header fields; release: header.flag = n + 1.
 * Taken: it copies the message into the send's bounce buffer (host memory)
 * instead, and the sender's progress thread sends it by UCX. Either way the
 * step never waits, and the sender's buffer is free when it ends. Two send
 * steps of one slot never run at once: the host sends a message by UCX at
 * its call when the slot's previous message is on another stream that has
 * not passed it.
 * The receive step knows its message by (context, tag, k): k is the
 * ordinal of the message in its channel (context, sender, tag), counted in
 * call order by both sides (the k-th receive of a channel gets the k-th
 * send: MPI's non-overtaking rule with exact source and tag). It scans the
 * headers for it with a seqlock read (flag, fields, flag again), copies the
 * payload out, raises consumed[slot] = n + 1 and writes its *record* (host-
 * visible memory the engine polls): bytes, error, done = 1.
 *
 * The engine may also finish a receive another way (the message came by
 * UCX, the peer failed, finalize): it writes the record's `desc` word; a
 * step waiting for the message then stops and reports it in `error`.
 * Every wait is bounded by a deadline and by a process-wide abort word.
 */
#ifndef MX_ACCEL_SX_PROTO_H
#define MX_ACCEL_SX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define MXA_SX_MAX_SLOTS 64
#define MXA_SX_HDR_BYTES 64
#define MXA_SX_CTRL_MAGIC 0x4d58535843544c31ull /* "MXSXCTL1" */
#define MXA_SX_RECV_BATCH 16                    /* receives per receive step */

/* Ring kinds (control page's ring_kind). */
#define MXA_SX_RING_NONE 0
#define MXA_SX_RING_HOST 1 /* in the control page, after it */
#define MXA_SX_RING_CUDA 2 /* device memory, CUDA IPC handle in the page */

/* Record error values (the step's outcome). */
#define MXA_SX_OK 0
#define MXA_SX_TRUNCATED 1 /* the message was longer than the buffer */
#define MXA_SX_DELIVERED 2 /* desc said: the message came another way */
#define MXA_SX_ABORTED 3   /* desc or the abort word said: give up */
#define MXA_SX_TIMED_OUT 4 /* the deadline passed */
#define MXA_SX_SENT 5      /* send step: the message is in the ring */
#define MXA_SX_BOUNCED 6   /* send step: the slot was taken; the message is in the bounce */

/* desc values (engine -> step) */
#define MXA_SX_DESC_NONE 0
#define MXA_SX_DESC_DELIVERED 1
#define MXA_SX_DESC_ABORT 2
/* the message came by UCX into host staging: copy record.copy_bytes
 * (the message's length) from record.copy_src, then finish as a ring
 * message would (OK or TRUNCATED, slot -1) */
#define MXA_SX_DESC_COPY 3

/* Slot header (64 bytes, at the start of each slot). */
typedef struct {
    uint64_t flag; /* n + 1 once complete; 0 while being written */
    uint32_t ctx;
    int32_t tag;
    uint64_t k;
    uint64_t bytes;
    uint64_t n;
    uint64_t spare[3];
} mxa_sx_hdr_t;

/* Control page (starts a page-aligned shared-memory segment). */
typedef struct {
    uint64_t magic;
    uint32_t nslots;
    uint32_t ring_kind; /* written before ring_ready */
    uint64_t slot_bytes;
    uint64_t ring_ready; /* 1: the ring below may be used (release) */
    unsigned char ipc_handle[64];
    uint64_t spare[4];
    uint64_t consumed[MXA_SX_MAX_SLOTS]; /* n + 1 of the last message copied out */
    uint64_t written[MXA_SX_MAX_SLOTS];  /* n + 1 of the last message written (sender) */
} mxa_sx_ctrl_t;

/* A receive's record (64 bytes, host-visible; the engine polls `done`). */
typedef struct {
    uint64_t done; /* 1: the step finished (release) */
    uint64_t bytes;
    int32_t error; /* MXA_SX_* */
    int32_t slot;
    uint64_t desc;       /* MXA_SX_DESC_*: written by the engine (release, after the below) */
    uint64_t copy_src;   /* DESC_COPY: host-visible staging holding the message */
    uint64_t copy_bytes; /* DESC_COPY: the message's length */
    uint64_t spare[2];
} mxa_sx_record_t;

/* What a send step needs (addresses in the executor's address space). */
typedef struct {
    uint64_t slot; /* the slot's header in the receiver's ring */
    uint64_t src;
    uint64_t bytes;
    uint64_t k;
    uint64_t n;
    uint32_t ctx;
    int32_t tag;
    uint64_t trigger_word; /* raised to trigger_seq after the message (0: none) */
    uint64_t trigger_seq;
    uint64_t written;  /* the slot's written word */
    uint64_t consumed; /* the slot's consumed word */
    uint64_t bounce;   /* where the message goes when the slot is taken */
    uint64_t record;   /* the outcome (mxa_sx_record_t: error SENT or BOUNCED) */
    /* 1: the slot's previous message was not sent from this stream, so the
     * claim may run before the kernel ahead of the step on its stream has
     * finished (CUDA programmatic dependent launch); 0: claim after it */
    uint64_t early_claim;
} mxa_sx_send_desc_t;

/* What a receive step needs for one receive. */
typedef struct {
    uint64_t ring;     /* first slot's header */
    uint64_t consumed; /* the control page's consumed[] */
    uint64_t dst;
    uint64_t cap;    /* bytes the buffer takes */
    uint64_t record; /* mxa_sx_record_t */
    uint64_t k;
    uint64_t slot_stride; /* header + payload */
    uint32_t ctx;
    int32_t tag;
    uint32_t nslots;
    uint32_t spare;
    uint64_t after_word; /* first wait for *after_word >= after_seq (0: none) */
    uint64_t after_seq;
} mxa_sx_recv_desc_t;

/* Process-wide parameters of a receive step. */
typedef struct {
    uint64_t abort_word; /* non-zero: stop waiting */
    uint64_t timeout_ns; /* 0: none */
} mxa_sx_limits_t;

/* The CUDA receive step's parameters (by value; one block per receive). */
typedef struct {
    mxa_sx_limits_t lim;
    int32_t n;
    int32_t spare;
    mxa_sx_recv_desc_t d[MXA_SX_RECV_BATCH];
} mxa_sx_recv_params_t;

/* -------------------------------------------------- memory primitives */

#ifdef __CUDACC__
#define MXA_SX_FN static __device__ __forceinline__
MXA_SX_FN uint64_t mxa_sx_load_acquire(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
MXA_SX_FN uint64_t mxa_sx_load_relaxed(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
MXA_SX_FN void mxa_sx_store_release(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MXA_SX_FN void mxa_sx_store_relaxed(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* acq_rel, not sc: every use orders one thread's accesses for a release or
 * acquire pattern (publication, seqlock read); none needs a single total
 * order of fences. fence.sc.sys costs more on the PCIe/NVLink paths. */
MXA_SX_FN void mxa_sx_fence(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
MXA_SX_FN uint64_t mxa_sx_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#else
#define MXA_SX_FN static inline
static inline uint64_t mxa_sx_load_acquire(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint64_t mxa_sx_load_relaxed(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void mxa_sx_store_release(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static inline void mxa_sx_store_relaxed(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static inline void mxa_sx_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

/* ------------------------------------------------------- protocol steps */

/* Sender, before the payload: the slot is being rewritten. */
MXA_SX_FN void mxa_sx_slot_open(mxa_sx_hdr_t *h)
{
    mxa_sx_store_relaxed(&h->flag, 0);
    mxa_sx_fence();
}

/* Sender, after the payload (all of it visible to this thread: the CUDA
 * step synchronizes its block first): fields, then the flag. */
MXA_SX_FN void mxa_sx_slot_publish(mxa_sx_hdr_t *h, const mxa_sx_send_desc_t *d)
{
    mxa_sx_fence();
    uint64_t *w = (uint64_t *)h;
    /* ctx and tag share the second word */
    uint64_t ct = (uint64_t)d->ctx | ((uint64_t)(uint32_t)d->tag << 32);
    mxa_sx_store_relaxed(w + 1, ct);
    mxa_sx_store_relaxed(&h->k, d->k);
    mxa_sx_store_relaxed(&h->bytes, d->bytes);
    mxa_sx_store_relaxed(&h->n, d->n);
    mxa_sx_fence();
    mxa_sx_store_release(&h->flag, d->n + 1);
}

/* Receiver: does slot h hold (ctx, tag, k), completely written? Then
 * *n_out and *bytes_out describe it. A seqlock read: the sender zeroes the
 * flag before it touches a slot again, which it does only after this
 * receiver consumed the slot's message, so an unchanged non-zero flag
 * means the fields belong to it. */
MXA_SX_FN int mxa_sx_slot_match(const mxa_sx_hdr_t *h, uint32_t ctx, int32_t tag, uint64_t k,
                                uint64_t *n_out, uint64_t *bytes_out)
{
    uint64_t f1 = mxa_sx_load_acquire(&h->flag);
    if (f1 == 0)
        return 0;
    /* all four fields at once (one round trip where the ring is across a
     * bus), then the checks */
    const uint64_t *w = (const uint64_t *)h;
    uint64_t ct = mxa_sx_load_relaxed(w + 1);
    uint64_t hk = mxa_sx_load_relaxed(&h->k);
    uint64_t bytes = mxa_sx_load_relaxed(&h->bytes);
    uint64_t n = mxa_sx_load_relaxed(&h->n);
    if ((uint32_t)ct != ctx || (int32_t)(uint32_t)(ct >> 32) != tag || hk != k)
        return 0;
    mxa_sx_fence();
    if (mxa_sx_load_relaxed(&h->flag) != f1 || f1 != n + 1)
        return 0;
    *n_out = n;
    *bytes_out = bytes;
    return 1;
}

/* Receiver, after copying message n out of slot `slot`. */
MXA_SX_FN void mxa_sx_consume(uint64_t *consumed, uint32_t slot, uint64_t n)
{
    mxa_sx_fence();
    mxa_sx_store_release(&consumed[slot], n + 1);
}

/* Sender's step: claim the slot if it is free (1), else 0. */
MXA_SX_FN int mxa_sx_slot_claim(const mxa_sx_send_desc_t *d)
{
    uint64_t *w = (uint64_t *)(uintptr_t)d->written;
    /* both words in one round trip; the acquire orders the payload's
     * stores after the receiver's copy-out it reports */
    uint64_t wv = mxa_sx_load_relaxed(w);
    uint64_t cv = mxa_sx_load_acquire((const uint64_t *)(uintptr_t)d->consumed);
    if (wv != 0 && cv < wv)
        return 0;
    mxa_sx_store_relaxed(w, d->n + 1);
    return 1;
}

/* Receiver: the step's outcome. */
MXA_SX_FN void mxa_sx_record_finish(mxa_sx_record_t *r, uint64_t bytes, int32_t error, int32_t slot)
{
    mxa_sx_store_relaxed(&r->bytes, bytes);
    uint64_t es = (uint64_t)(uint32_t)error | ((uint64_t)(uint32_t)slot << 32);
    mxa_sx_store_relaxed((uint64_t *)&r->error, es);
    mxa_sx_fence();
    mxa_sx_store_release(&r->done, 1);
}

#endif
