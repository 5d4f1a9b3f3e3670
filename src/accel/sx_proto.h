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
 *   ring          nslots slots, each a message of up to slot_bytes as LL
 *                 words (header and payload; below), after the control
 *                 page in the same segment.
 *
 * The sender numbers its SX messages on the link n = 0, 1, 2, ... and
 * message n may use slot n % nslots. The send step decides when it runs:
 * the slot is free when the message last written into it was consumed
 * (`consumed[slot] >= written[slot]`, both n + 1 of a message; the sender
 * writes `written`, the receiver `consumed`). Free: it claims the slot
 * (written = n + 1) and writes the message's LL words (header and payload,
 * each word with its flag, in any order, no fence). Taken: it copies the message into the send's bounce buffer (host memory)
 * instead, and the sender's progress thread sends it by UCX. Either way the
 * step never waits, and the sender's buffer is free when it ends. Two send
 * steps of one slot never run at once: the host sends a message by UCX at
 * its call when the slot's previous message is on another stream that has
 * not passed it.
 * The receive step knows its message by (context, tag, k): k is the
 * ordinal of the message in its channel (context, sender, tag), counted in
 * call order by both sides (the k-th receive of a channel gets the k-th
 * send: MPI's non-overtaking rule with exact source and tag). It scans the
 * headers for it (a header is whole when its 8 words carry one flag),
 * copies the payload words out as their flags arrive, raises
 * consumed[slot] = n + 1 and writes its *record* (host-visible memory the
 * engine polls): one done word with bytes, error and slot.
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
#ifndef __CUDACC__
#include <string.h>
#endif

#include "accel/pack_proto.h"

#define MXA_SX_MAX_SLOTS 64
#define MXA_SX_MAX_BULK 8 /* bulk slots of a device ring */
/* Bulk messages: the header's bytes field carries this bit */
#define MXA_SX_BULK_BIT (1ull << 62)
/* Blocks of a CUDA bulk step: the sender's copy crosses NVLink, one block
 * per MXA_SX_BULK_SEND_CHUNK bytes; the receiver's is local, one per
 * MXA_SX_BULK_RECV_CHUNK; at most MXA_SX_BULK_SEND_BLOCKS and
 * MXA_SX_BULK_RECV_BLOCKS (the send side may be overridden at build time). */
#ifndef MXA_SX_BULK_SEND_CHUNK
#define MXA_SX_BULK_SEND_CHUNK (16u * 1024u)
#endif
#ifndef MXA_SX_BULK_SEND_BLOCKS
#define MXA_SX_BULK_SEND_BLOCKS 32u
#endif
#define MXA_SX_BULK_RECV_CHUNK (64u * 1024u)
#define MXA_SX_BULK_RECV_BLOCKS 32u
#define MXA_SX_HDR_BYTES 64
#define MXA_SX_CTRL_MAGIC 0x4d58535843544c32ull /* "MXSXCTL2" */
#define MXA_SX_RECV_BATCH 16                    /* receives per receive step */

/* Ring kinds (control page's ring_kind). */
#define MXA_SX_RING_NONE 0
#define MXA_SX_RING_HOST 1 /* in the control page, after it */
/* (2 was a CUDA IPC ring: see ctrl.dr_ready for device rings) */

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
/* a hint: the message comes by UCX (its envelope said so), not in the
 * ring: stop reading the ring and wait for DELIVERED or COPY */
#define MXA_SX_DESC_UCX 4

/* Device rings (ctrl.dr_ready): the receiver's second ring, in memory it
 * exports as a file descriptor that the sender maps (sx.c). */
#define MXA_SX_DRING_NONE 0
#define MXA_SX_DRING_HOST 1 /* memfd: host streams (how CI runs this) */
#define MXA_SX_DRING_CUDA 2 /* cuMemCreate on the receiver's GPU */

/* Control page (starts a page-aligned shared-memory segment). */
typedef struct {
    uint64_t magic;
    uint32_t nslots;
    uint32_t ring_kind; /* written before ring_ready */
    uint64_t slot_bytes;
    uint64_t ring_ready; /* 1: the ring below may be used (release) */
    /* the device ring: receiver writes dr_bytes and sock_name, then
     * dr_ready (MXA_SX_DRING_*, release); a sender that wants it raises
     * dr_req and asks the receiver's socket for the fd; it writes dr_from
     * (1 + the first link number it writes there) when it switches, and
     * host_final = 1 once no message will enter the host ring any more */
    uint64_t dr_ready;
    uint64_t dr_bytes;
    uint64_t dr_req;
    uint64_t dr_from;
    uint64_t host_final;
    char sock_name[64];                  /* abstract Unix socket, without its leading NUL */
    uint64_t consumed[MXA_SX_MAX_SLOTS]; /* n + 1 of the last message copied out */
    uint64_t written[MXA_SX_MAX_SLOTS];  /* n + 1 of the last message written (sender) */
    uint64_t pad[7];                     /* mirror at a 64-byte offset (16-byte stores) */
    /* header words of each slot's last device-ring message (written by the
     * send step after the ring's), for the host's look-up */
    uint64_t mirror[MXA_SX_MAX_SLOTS][8];
    /* bulk slots of the device ring (receiver writes these before
     * dr_ready): bulk slot b at byte bulk_off + b * bulk_bytes of the
     * device ring; message n uses bulk slot n % bulk_slots. Credit words
     * like the slots': n + 1 of the last bulk message written (sender) and
     * copied out (receiver). */
    uint64_t bulk_slots;
    uint64_t bulk_bytes;
    uint64_t bulk_off;
    uint64_t count_off; /* the receiver's per-slot block counters (device ring) */
    uint64_t bulk_written[MXA_SX_MAX_BULK];
    uint64_t bulk_consumed[MXA_SX_MAX_BULK];
} mxa_sx_ctrl_t;

/* A receive's record (64 bytes, host-visible; the engine polls `done`). */
typedef struct {
    uint64_t done; /* 0 until the step finished; then mxa_sx_done_word() (release) */
    /* a number no other use of this record has (set at allocation): the
     * helper blocks of a multi-block receive step stop when it changes */
    uint64_t serial;
    uint64_t delivered_bytes; /* DESC_DELIVERED: the message's length (for len_word) */
    uint64_t desc;            /* MXA_SX_DESC_*: written by the engine (release, after the below) */
    uint64_t copy_src;        /* DESC_COPY: host-visible staging holding the message */
    uint64_t copy_bytes;      /* DESC_COPY: the message's length */
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
    uint64_t mirror; /* the slot's header mirror (device ring; 0: none) */
    /* bulk (0: an LL message): the bulk slot's data and credit words, and
     * two words of the sender's own memory per slot for a multi-block
     * step (the decision, the blocks done) */
    uint64_t bulk;
    uint64_t bulk_written;
    uint64_t bulk_consumed;
    uint64_t scratch;
    /* pack.buf != 0 (LL messages only): the step first gathers a
     * non-contiguous buffer into src (pack.packed == src) itself, one
     * launch instead of a pack kernel and a send step (issue 20) */
    mxa_pack_args_t pack;
} mxa_sx_send_desc_t;

/* Receive flags (mxa_sx_recv_desc_t.flags). */
#define MXA_SX_RECV_FENCE 1u /* system-scope fence between copy-out and record */

/* What a receive step needs for one receive. */
typedef struct {
    uint64_t ring;     /* first slot of the host ring (0: no message can be there) */
    uint64_t dring;    /* first slot of the device ring (0: none) */
    uint64_t consumed; /* the control page's consumed[] */
    uint64_t dst;
    uint64_t cap;    /* bytes the buffer takes */
    uint64_t record; /* mxa_sx_record_t */
    uint64_t k;
    uint64_t slot_stride; /* header + payload */
    uint32_t ctx;
    int32_t tag;
    uint32_t nslots;
    uint32_t flags;      /* MXA_SX_RECV_* */
    uint64_t after_word; /* first wait for *after_word >= after_seq (0: none) */
    uint64_t after_seq;
    /* the device ring's bulk slots (0: none), their consumed words, and
     * the per-slot block counters of a multi-block step (device ring) */
    uint64_t bulk;
    uint64_t bulk_bytes;
    uint64_t bulk_consumed;
    uint64_t counters;
    uint32_t bulk_slots;
    uint32_t blocks;   /* CUDA: blocks of this receive (1 without counters) */
    uint64_t serial;   /* the record's serial */
    uint64_t len_word; /* 0, or where the step writes the received length at its end */
    /* unpack.buf != 0 (one block): after the copy-out into dst
     * (unpack.packed == dst) the step scatters the received length into
     * the user's non-contiguous buffer itself, before its record */
    mxa_pack_args_t unpack;
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
    int32_t per; /* blocks per receive: receive i is blocks [i * per, i * per + d[i].blocks) */
    mxa_sx_recv_desc_t d[MXA_SX_RECV_BATCH];
} mxa_sx_recv_params_t;

/* The same for a step of one receive (the usual case; CUDA: its own
 * kernel, mxa_sx_recv1_kernel). A launch copies the whole parameter block
 * into the command stream: ~170 bytes instead of ~2.5 KiB. */
typedef struct {
    mxa_sx_limits_t lim;
    int32_t n;
    int32_t per;
    mxa_sx_recv_desc_t d[1];
} mxa_sx_recv1_params_t;

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

/* LL words. A slot holds its message as 8-byte words, each 4 bytes of
 * data under a 4-byte flag (NCCL's "LL" lines): word = data | flag << 32,
 * flag = mxa_sx_ll_flag(n) for message n. A word is written and read as
 * one 64-bit access, so a reader that sees the flag of message n sees
 * that message's data in the same word: no fence between payload and
 * header, no flag to clear before a slot is rewritten, and words may land
 * in any order (a reader waits for each word's flag). A slot: 8 header
 * words (ctx, tag, k lo/hi, bytes lo/hi, n lo/hi: 64 bytes) and then
 * ceil(bytes / 4) payload words: a slot for S bytes of message takes
 * 64 + 2 S bytes of ring. Words of an older message in the slot carry an older
 * flag (flags repeat after 2^32 - 1 messages on one link). */
#define MXA_SX_LL_HDR_WORDS 8
/* Payload words a CUDA receive step reads with each header in its scan:
 * messages up to 4 x this bytes need no second round trip. */
#define MXA_SX_SCAN_WORDS 4

MXA_SX_FN uint32_t mxa_sx_ll_flag(uint64_t n) { return (uint32_t)(n % 0xffffffffull) + 1u; }
MXA_SX_FN uint64_t mxa_sx_ll_word(uint32_t data, uint32_t flag)
{
    return (uint64_t)data | ((uint64_t)flag << 32);
}
MXA_SX_FN uint32_t mxa_sx_ll_flag_of(uint64_t w) { return (uint32_t)(w >> 32); }
MXA_SX_FN uint32_t mxa_sx_ll_data_of(uint64_t w) { return (uint32_t)w; }
/* Payload words of a message of `bytes` bytes. */
MXA_SX_FN uint64_t mxa_sx_ll_words(uint64_t bytes) { return (bytes + 3) / 4; }

/* The 8 header words of message d (the writer stores each with one 64-bit
 * store, relaxed, in any order). */
MXA_SX_FN void mxa_sx_ll_header(const mxa_sx_send_desc_t *d, uint64_t w[MXA_SX_LL_HDR_WORDS])
{
    uint32_t f = mxa_sx_ll_flag(d->n);
    w[0] = mxa_sx_ll_word(d->ctx, f);
    w[1] = mxa_sx_ll_word((uint32_t)d->tag, f);
    w[2] = mxa_sx_ll_word((uint32_t)d->k, f);
    w[3] = mxa_sx_ll_word((uint32_t)(d->k >> 32), f);
    uint64_t field = d->bytes | (d->bulk ? MXA_SX_BULK_BIT : 0);
    w[4] = mxa_sx_ll_word((uint32_t)field, f);
    w[5] = mxa_sx_ll_word((uint32_t)(field >> 32), f);
    w[6] = mxa_sx_ll_word((uint32_t)d->n, f);
    w[7] = mxa_sx_ll_word((uint32_t)(d->n >> 32), f);
}

/* The 64-bit field held by two header words' data (lo, then hi). */
MXA_SX_FN uint64_t mxa_sx_ll_data64(uint64_t lo, uint64_t hi)
{
    return (uint64_t)mxa_sx_ll_data_of(lo) | ((uint64_t)mxa_sx_ll_data_of(hi) << 32);
}
/* The message number n in 8 header words. */
MXA_SX_FN uint64_t mxa_sx_ll_n(const uint64_t w[MXA_SX_LL_HDR_WORDS])
{
    return mxa_sx_ll_data64(w[6], w[7]);
}

/* Are these 8 header words (each read with one 64-bit load) whole: all
 * under one flag, not 0 (an empty slot)? Then *flag_out is that flag. A
 * whole header may still be an old message's (see mxa_sx_ll_match). */
MXA_SX_FN int mxa_sx_ll_whole(const uint64_t w[MXA_SX_LL_HDR_WORDS], uint32_t *flag_out)
{
    uint32_t f = mxa_sx_ll_flag_of(w[0]);
    if (f == 0)
        return 0;
    for (int i = 1; i < MXA_SX_LL_HDR_WORDS; i++)
        if (mxa_sx_ll_flag_of(w[i]) != f)
            return 0;
    *flag_out = f;
    return 1;
}

/* Receiver: do these 8 header words (each read with one 64-bit load) hold
 * (ctx, tag, k), all of one message? Then *n_out and *bytes_out describe
 * it and *flag_out is its payload words' flag. */
MXA_SX_FN int mxa_sx_ll_match(const uint64_t w[MXA_SX_LL_HDR_WORDS], uint32_t ctx, int32_t tag,
                              uint64_t k, uint64_t *n_out, uint64_t *bytes_out, uint32_t *flag_out)
{
    uint32_t f;
    if (!mxa_sx_ll_whole(w, &f))
        return 0;
    if (mxa_sx_ll_data_of(w[0]) != ctx || (int32_t)mxa_sx_ll_data_of(w[1]) != tag ||
        mxa_sx_ll_data64(w[2], w[3]) != k)
        return 0;
    uint64_t n = mxa_sx_ll_n(w);
    if (mxa_sx_ll_flag(n) != f)
        return 0;
    *n_out = n;
    *bytes_out = mxa_sx_ll_data64(w[4], w[5]); /* with MXA_SX_BULK_BIT for a bulk message */
    *flag_out = f;
    return 1;
}

/* A header's bytes field: the message's length, and is it bulk? */
MXA_SX_FN uint64_t mxa_sx_hdr_len(uint64_t field) { return field & (MXA_SX_BULK_BIT - 1); }
MXA_SX_FN int mxa_sx_hdr_bulk(uint64_t field) { return (field & MXA_SX_BULK_BIT) != 0; }

/* Payload word i of a message of `bytes` bytes at src: 4 bytes, fewer in
 * the last word (zero-filled); one 32-bit load where src allows. */
MXA_SX_FN uint32_t mxa_sx_ll_gather(const unsigned char *src, uint64_t bytes, uint64_t i)
{
    const unsigned char *p = src + 4 * i;
    uint64_t left = bytes - 4 * i;
    if (left >= 4 && ((uintptr_t)p & 3) == 0) {
#ifdef __CUDACC__
        return *(const uint32_t *)p;
#else
        uint32_t w;
        memcpy(&w, p, 4);
        return w;
#endif
    }
    uint32_t v = 0;
    for (uint64_t b = 0; b < 4 && b < left; b++)
        v |= (uint32_t)p[b] << (8 * b);
    return v;
}

/* Store payload word i's data at dst (at most cap bytes in all). */
MXA_SX_FN void mxa_sx_ll_scatter(unsigned char *dst, uint64_t cap, uint64_t i, uint32_t v)
{
    if (4 * i >= cap)
        return;
    unsigned char *p = dst + 4 * i;
    uint64_t left = cap - 4 * i;
    if (left >= 4 && ((uintptr_t)p & 3) == 0) {
#ifdef __CUDACC__
        *(uint32_t *)p = v;
#else
        memcpy(p, &v, 4);
#endif
        return;
    }
    for (uint64_t b = 0; b < 4 && b < left; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

/* Receiver, after copying message n out of slot `slot`. */
MXA_SX_FN void mxa_sx_consume(uint64_t *consumed, uint32_t slot, uint64_t n)
{
    /* the release orders this thread's (and, after a barrier, its
     * block's) reads of the slot before the sender may rewrite it */
    mxa_sx_store_release(&consumed[slot], n + 1);
}
/* The same without the release's fence (CUDA steps, which fence only
 * where a reader needs it, cuda_kernels.cu): the caller's reads of the
 * slot have returned the values it already used. */
MXA_SX_FN void mxa_sx_consume_relaxed(uint64_t *consumed, uint32_t slot, uint64_t n)
{
    mxa_sx_store_relaxed(&consumed[slot], n + 1);
}

/* Sender's step: claim the slot (and for a bulk message its bulk slot)
 * if free (1), else 0. */
MXA_SX_FN int mxa_sx_slot_claim(const mxa_sx_send_desc_t *d)
{
    uint64_t *w = (uint64_t *)(uintptr_t)d->written;
    uint64_t *bw = (uint64_t *)(uintptr_t)d->bulk_written;
    /* all words in one round trip; the acquires order the payload's
     * stores after the receiver's copy-out they report */
    uint64_t wv = mxa_sx_load_relaxed(w);
    uint64_t cv = mxa_sx_load_acquire((const uint64_t *)(uintptr_t)d->consumed);
    uint64_t bwv = 0, bcv = 0;
    if (d->bulk) {
        bwv = mxa_sx_load_relaxed(bw);
        bcv = mxa_sx_load_acquire((const uint64_t *)(uintptr_t)d->bulk_consumed);
    }
    if ((wv != 0 && cv < wv) || (bwv != 0 && bcv < bwv))
        return 0;
    mxa_sx_store_relaxed(w, d->n + 1);
    if (d->bulk)
        mxa_sx_store_relaxed(bw, d->n + 1);
    return 1;
}

/* Receiver, after copying bulk message n out of its bulk slot. */
MXA_SX_FN void mxa_sx_bulk_consume(const mxa_sx_recv_desc_t *d, uint64_t n, int release)
{
    uint64_t *c = (uint64_t *)(uintptr_t)d->bulk_consumed + n % d->bulk_slots;
    if (release)
        mxa_sx_store_release(c, n + 1);
    else
        mxa_sx_store_relaxed(c, n + 1);
}
/* Where bulk message n's data is (receiver's view of the device ring). */
MXA_SX_FN uint64_t mxa_sx_bulk_data(const mxa_sx_recv_desc_t *d, uint64_t n)
{
    return d->bulk + (n % d->bulk_slots) * d->bulk_bytes;
}

/* The step's outcome, in one word (one store: no fence between fields
 * and the done bit): done (bit 0), error (MXA_SX_*, bits 1-8), slot + 1
 * (bits 9-16; 0: no slot), bytes (bits 17-63). */
MXA_SX_FN uint64_t mxa_sx_done_word(uint64_t bytes, int32_t error, int32_t slot)
{
    return 1u | ((uint64_t)(uint32_t)error & 0xffu) << 1 |
           ((uint64_t)(uint32_t)(slot + 1) & 0xffu) << 9 | bytes << 17;
}
MXA_SX_FN int32_t mxa_sx_done_error(uint64_t w) { return (int32_t)((w >> 1) & 0xffu); }
MXA_SX_FN int32_t mxa_sx_done_slot(uint64_t w) { return (int32_t)((w >> 9) & 0xffu) - 1; }
MXA_SX_FN uint64_t mxa_sx_done_bytes(uint64_t w) { return w >> 17; }

/* Receiver: the step's outcome (a release: the copy-out before it). */
MXA_SX_FN void mxa_sx_record_finish(mxa_sx_record_t *r, uint64_t bytes, int32_t error, int32_t slot)
{
    mxa_sx_store_release(&r->done, mxa_sx_done_word(bytes, error, slot));
}
/* The same as a relaxed store: the caller fenced before it if the reader
 * of the record relies on the step's other stores. */
MXA_SX_FN void mxa_sx_record_finish_relaxed(mxa_sx_record_t *r, uint64_t bytes, int32_t error,
                                            int32_t slot)
{
    mxa_sx_store_relaxed(&r->done, mxa_sx_done_word(bytes, error, slot));
}

/* Receiver: the received length a step with outcome `outcome` writes into
 * its desc's len_word: what it copied (take) for OK and TRUNCATED, the
 * record's delivered_bytes for a message UCX delivered, else 0. */
MXA_SX_FN uint64_t mxa_sx_recv_len(const mxa_sx_record_t *r, int32_t outcome, uint64_t take)
{
    if (outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED)
        return take;
    return outcome == MXA_SX_DELIVERED ? mxa_sx_load_relaxed(&r->delivered_bytes) : 0;
}

#endif
