/*
 * cuda_kernels.cu - the CUDA backend's fallback stream points (see cuda.c).
 *
 * Used when stream memory operations are unavailable (device attribute,
 * driver, or MPIX_ACC_MEMOPS=0) and while a stream is being captured into a
 * CUDA graph. Each kernel runs as ONE thread and touches one or two 64-bit
 * sequence words in host-mapped pinned memory (cuMemHostAlloc with
 * DEVICEMAP|PORTABLE):
 *
 *   mxa_flag_set_kernel       trigger point: *word = value (release, system scope)
 *   mxa_flag_wait_kernel      wait point: spin until *word >= value (acquire, system scope)
 *   mxa_flag_wait_set_kernel  a wait point directly followed by a trigger point
 *
 * The comparison is the cyclic one of cuStreamWaitValue64 with
 * CU_STREAM_WAIT_VALUE_GEQ: (int64_t)(*word - value) >= 0.
 *
 * This file is compiled by nvcc into a fatbinary that the build embeds into
 * the library as the C array mxa_cuda_fatbin[] (see cuda_driver.h); cuda.c
 * loads it with cuModuleLoadData into every CUDA context it meets, eagerly,
 * before the first stream point of that context is enqueued (a module that
 * loads lazily behind a blocked stream can deadlock). The kernels are
 * extern "C" so cuModuleGetFunction finds them by these names.
 */

#include "accel/llred_proto.h"
#include "accel/pack_proto.h"

typedef unsigned long long mxa_u64;

static __device__ __forceinline__ mxa_u64 mxa_load_acquire_sys(const mxa_u64 *p)
{
    mxa_u64 v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void mxa_store_release_sys(mxa_u64 *p, mxa_u64 v)
{
    /* Work that preceded this kernel on the stream is complete (stream
     * order); the system-scope fence makes it, and anything this grid wrote,
     * visible to the host and peers before the sequence word changes. */
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ void mxa_wait_geq(const mxa_u64 *word, mxa_u64 value)
{
    unsigned ns = 32;
    for (;;) {
        mxa_u64 v = mxa_load_acquire_sys(word);
        if ((long long)(v - value) >= 0)
            break;
        __nanosleep(ns);
        if (ns < 1024)
            ns <<= 1;
    }
    /* Order the release before any memory access of work that follows this
     * kernel on the stream (kernel boundary) and of this thread. */
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

extern "C" __global__ void mxa_flag_set_kernel(mxa_u64 *word, mxa_u64 value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        mxa_store_release_sys(word, value);
}

extern "C" __global__ void mxa_flag_wait_kernel(const mxa_u64 *word, mxa_u64 value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        mxa_wait_geq(word, value);
}

extern "C" __global__ void mxa_flag_wait_set_kernel(const mxa_u64 *wait_word, mxa_u64 wait_value,
                                                    mxa_u64 *set_word, mxa_u64 set_value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        mxa_wait_geq(wait_word, wait_value);
        mxa_store_release_sys(set_word, set_value);
    }
}

/* ---------------------------------------------------------------- SX steps
 * The stream-executed path's steps (protocol: sx_proto.h, shared with the
 * host executor in sx.c). One block per step; the sender's payload goes
 * straight into the receiver's ring (mapped by CUDA IPC), the receiver's
 * block scans its ring for its message and copies it out. */
/* The pieces of a pack or unpack (pack_proto.h) that warp `warp` of
 * `warps` moves: a warp per chunk instance (element e, chunk k), only the
 * first `limit` packed bytes; 8-byte copies where both sides are aligned,
 * else bytes. The pack kernel runs it over its grid; an SX send or receive
 * step over its block (a fused pack or unpack, sx_proto.h). */
static __device__ __forceinline__ void mxa_pack_warps(const mxa_pack_args_t &a, mxa_u64 limit,
                                                      mxa_u64 warp, mxa_u64 warps)
{
    const mxa_u64 lane = threadIdx.x & 31;
    const mxa_u64 total = a.count * a.nchunks;
    /* no chunk list: contiguous bytes, as elements of `size` bytes */
    const mxa_chunk_t flat = {0, a.size, 0};
    const mxa_chunk_t *ch = a.chunks ? (const mxa_chunk_t *)a.chunks : &flat;
    for (mxa_u64 ci = warp; ci < total; ci += warps) {
        const mxa_u64 e = ci / a.nchunks, k = ci % a.nchunks;
        unsigned char *user = (unsigned char *)a.buf + (long long)e * a.extent + ch[k].off;
        unsigned char *pk = (unsigned char *)a.packed + e * a.size + ch[k].pos;
        mxa_u64 len = ch[k].len, at = e * a.size + ch[k].pos;
        if (at >= limit) /* a short message, or the last piece of contiguous bytes */
            continue;
        if (len > limit - at)
            len = limit - at;
        unsigned char *dst = a.unpack ? user : pk;
        const unsigned char *src = a.unpack ? pk : user;
        if ((((uintptr_t)dst | (uintptr_t)src | len) & 7) == 0) {
            for (mxa_u64 i = lane; i < len / 8; i += 32)
                ((mxa_u64 *)dst)[i] = ((const mxa_u64 *)src)[i];
        } else {
            for (mxa_u64 i = lane; i < len; i += 32)
                dst[i] = src[i];
        }
    }
}

/* A regular layout of whole aligned words (a column: reg_len, sizes,
 * strides and the buffer all multiples of 8): an 8-byte-aligned packed
 * word never straddles two chunks, and its user address is arithmetic */
static __device__ __forceinline__ bool mxa_pack_regular8(const mxa_pack_args_t &a)
{
    return a.buf && a.reg_len &&
           ((a.reg_len | a.size | a.buf | (mxa_u64)a.extent | (mxa_u64)a.reg_off |
             (mxa_u64)a.reg_stride) &
            7) == 0;
}
/* The user's address of packed byte q of a regular layout */
static __device__ __forceinline__ unsigned char *mxa_pack_addr(const mxa_pack_args_t &a, mxa_u64 q)
{
    const mxa_u64 e = q / a.size, r = q % a.size, k = r / a.reg_len, in = r % a.reg_len;
    return (unsigned char *)a.buf + (long long)e * a.extent + a.reg_off +
           (long long)k * a.reg_stride + in;
}
/* n <= 8 packed bytes at q of a regular8 layout (in one chunk: q is a
 * multiple of 4 and chunks end at multiples of 8), as a little-endian
 * value (gather), or stored from one (scatter) */
static __device__ __forceinline__ mxa_u64 mxa_pack_load(const mxa_pack_args_t &a, mxa_u64 q,
                                                        mxa_u64 n)
{
    const unsigned char *p = mxa_pack_addr(a, q);
    if (n == 8 && ((uintptr_t)p & 7) == 0)
        return *(const mxa_u64 *)p;
    mxa_u64 v = 0;
    for (mxa_u64 b = 0; b < n; b++)
        v |= (mxa_u64)p[b] << (8 * b);
    return v;
}
static __device__ __forceinline__ void mxa_pack_store(const mxa_pack_args_t &a, mxa_u64 q,
                                                      mxa_u64 n, mxa_u64 v)
{
    unsigned char *p = mxa_pack_addr(a, q);
    if (n == 8 && ((uintptr_t)p & 7) == 0) {
        *(mxa_u64 *)p = v;
        return;
    }
    if (n == 4 && ((uintptr_t)p & 3) == 0) {
        *(unsigned int *)p = (unsigned int)v;
        return;
    }
    for (mxa_u64 b = 0; b < n; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

/* A fused pack or unpack over one block, then a barrier: the block's
 * later reads see the bytes. Every thread of the block calls it. A thread
 * per 8 packed bytes, not a warp per chunk (a column halo is thousands of
 * 8-byte chunks and a step has 2-16 warps: one 8-byte copy per round and
 * warp would take a round per chunk): the unit's chunk by binary search
 * of the packed positions, one 8-byte copy when the unit lies in one
 * chunk and both sides are aligned, else bytes, walking into the next
 * chunk (or element). */
static __device__ __forceinline__ void mxa_pack_block(const mxa_pack_args_t &a, mxa_u64 limit)
{
    mxa_u64 from = 0; /* packed bytes before it are done */
    if (mxa_pack_regular8(a) && (a.packed & 7) == 0) {
        /* regular chunks of whole aligned words (a column): a unit's
         * address by division; four units' loads in flight per thread
         * before their stores (a search per unit was a chain of dependent
         * loads: a 1024-row column took ~25 us per step, 2 x H100) */
        const mxa_u64 total = a.count * a.size, nt = blockDim.x;
        const mxa_u64 words = (limit < total ? limit : total) / 8;
        for (mxa_u64 w0 = threadIdx.x; w0 < words; w0 += 4 * nt) {
            mxa_u64 v[4];
            mxa_u64 *to[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const mxa_u64 w = w0 + j * nt;
                to[j] = NULL;
                if (w >= words)
                    continue;
                mxa_u64 *user = (mxa_u64 *)mxa_pack_addr(a, 8 * w);
                mxa_u64 *pk = (mxa_u64 *)((unsigned char *)a.packed + 8 * w);
                v[j] = a.unpack ? *pk : *user;
                to[j] = a.unpack ? user : pk;
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (to[j])
                    *to[j] = v[j];
        }
        /* a short message's last partial word: the generic walk below */
        if (limit % 8 == 0 || limit >= total) {
            __syncthreads();
            return;
        }
        from = 8 * words; /* the walk below does [from, limit) */
    }
    const mxa_chunk_t flat = {0, a.size, 0};
    const mxa_chunk_t *ch = a.chunks ? (const mxa_chunk_t *)a.chunks : &flat;
    const mxa_u64 nch = a.chunks ? a.nchunks : 1;
    const mxa_u64 total = a.count * a.size;
    if (limit > total)
        limit = total;
    for (mxa_u64 q = from + (mxa_u64)threadIdx.x * 8; q < limit; q += (mxa_u64)blockDim.x * 8) {
        const mxa_u64 end = q + 8 < limit ? q + 8 : limit;
        mxa_u64 e = q / a.size, r = q % a.size, lo = 0, hi = nch - 1;
        while (lo < hi) { /* the last chunk whose packed position is <= r */
            mxa_u64 mid = (lo + hi + 1) / 2;
            if (ch[mid].pos <= r)
                lo = mid;
            else
                hi = mid - 1;
        }
        mxa_u64 k = lo;
        for (mxa_u64 at = q; at < end;) {
            mxa_u64 in = r - ch[k].pos, n = ch[k].len - in;
            if (n > end - at)
                n = end - at;
            unsigned char *user = (unsigned char *)a.buf + (long long)e * a.extent + ch[k].off + in;
            unsigned char *pk = (unsigned char *)a.packed + at;
            unsigned char *dst = a.unpack ? user : pk;
            const unsigned char *src = a.unpack ? pk : user;
            if (n == 8 && (((uintptr_t)dst | (uintptr_t)src) & 7) == 0) {
                *(mxa_u64 *)dst = *(const mxa_u64 *)src;
            } else {
                for (mxa_u64 b = 0; b < n; b++)
                    dst[b] = src[b];
            }
            at += n;
            r += n;
            if (r >= ch[k].pos + ch[k].len && ++k == nch) { /* the element's last chunk */
                k = 0;
                e++;
                r = 0;
            }
        }
    }
    __syncthreads();
}

#include "accel/sx_proto.h"

/* Block-wide copy: 16-byte words when both ends allow it. Loads bypass L1
 * (the ring is rewritten by another GPU between two reads). */
static __device__ __forceinline__ void mxa_sx_copy(unsigned char *dst, const unsigned char *src,
                                                   uint64_t n)
{
    uint64_t tid = threadIdx.x, nt = blockDim.x;
    if (((((uint64_t)(size_t)dst) | ((uint64_t)(size_t)src)) & 15) == 0) {
        uint64_t nv = n / 16;
        const uint4 *s = (const uint4 *)src;
        uint4 *d = (uint4 *)dst;
        for (uint64_t i = tid; i < nv; i += nt)
            d[i] = __ldcg(s + i);
        for (uint64_t i = nv * 16 + tid; i < n; i += nt)
            dst[i] = __ldcg(src + i);
    } else {
        for (uint64_t i = tid; i < n; i += nt)
            dst[i] = __ldcg(src + i);
    }
}

/* The same with four 16-byte loads in flight per thread (bulk steps: one
 * round of loads per 64 bytes x threads, not one per 16). */
static __device__ __forceinline__ void mxa_sx_copy_wide(unsigned char *dst,
                                                        const unsigned char *src, uint64_t n)
{
    if (((((uint64_t)(size_t)dst) | ((uint64_t)(size_t)src)) & 15) != 0) {
        mxa_sx_copy(dst, src, n);
        return;
    }
    uint64_t tid = threadIdx.x, nt = blockDim.x, nv = n / 16;
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)dst;
    for (uint64_t b = tid; b < nv; b += 4 * nt) {
        uint4 r[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (b + k * nt < nv)
                r[k] = __ldcg(s + b + k * nt);
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (b + k * nt < nv)
                d[b + k * nt] = r[k];
    }
    for (uint64_t i = nv * 16 + tid; i < n; i += nt)
        dst[i] = __ldcg(src + i);
}

/* Programmatic dependent launch (sm_90+; the send step may be launched
 * so, cuda_sx.c): wait until the kernel ahead on the stream has finished
 * and its memory is visible / let the kernel behind start early. Both are
 * no-ops for a plain launch. */
static __device__ __forceinline__ void mxa_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void mxa_pdl_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* Phase timing of the SX steps, for diagnosis (off unless built with
 * NVCCFLAGS=-DMXA_SX_TIMING): per-GPU sums of the steps' phases from
 * %globaltimer, printed by a send step every 4096 sends (device printf,
 * flushed at the next synchronization). It is how the fences in the step
 * tails were found (doc/benchmarks.md, session 10). Steps of one
 * receive and one send per launch are assumed (a ping-pong); for bulk
 * (multi-block) steps the phases are those of the block that finished
 * the step. */
#ifdef MXA_SX_TIMING
#define MXA_SX_TM(x) x
#define MXA_SX_TM_DECL(...) unsigned long long __VA_ARGS__
#define MXA_SX_TM_SEND mxa_sx_tm_send
#define MXA_SX_TM_RECV mxa_sx_tm_recv
__device__ unsigned long long mxa_sx_tm_sum[16];
__device__ unsigned long long mxa_sx_tm_last[4]; /* receive start, hit, end; send stored */
__device__ unsigned long long mxa_sx_tm_cnt[2];  /* sends, receives */
static __device__ __forceinline__ unsigned long long mxa_sx_tm_now(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static __device__ __forceinline__ unsigned long long mxa_sx_tm_gap(unsigned long long a,
                                                                   unsigned long long b)
{
    return b > a ? b - a : 0;
}
/* receive step, thread 0 of block 0 at its end */
static __device__ void mxa_sx_tm_recv(unsigned long long start, unsigned long long hit,
                                      unsigned long long waited, unsigned long long copied)
{
    unsigned long long *sum = mxa_sx_tm_sum, *last = mxa_sx_tm_last;
    unsigned long long end = mxa_sx_tm_now();
    unsigned long long sent = *(volatile unsigned long long *)&last[3];
    atomicAdd(&sum[7], hit - start);
    atomicAdd(&sum[8], waited - hit);
    atomicAdd(&sum[9], copied - waited);
    atomicAdd(&sum[10], end - copied);
    atomicAdd(&sum[11], mxa_sx_tm_gap(sent, hit));
    last[0] = start;
    last[1] = hit;
    last[2] = end;
    __threadfence();
    atomicAdd(&mxa_sx_tm_cnt[1], 1ull);
}
/* send step, thread 0 at its end: t0 start, t1 after its wait for the
 * kernel ahead, t2 after the stores */
static __device__ void mxa_sx_tm_send(unsigned long long t0, unsigned long long t1,
                                      unsigned long long t2)
{
    unsigned long long *sum = mxa_sx_tm_sum, *last = mxa_sx_tm_last;
    unsigned long long t3 = mxa_sx_tm_now();
    unsigned long long rs = *(volatile unsigned long long *)&last[0];
    unsigned long long rh = *(volatile unsigned long long *)&last[1];
    unsigned long long re = *(volatile unsigned long long *)&last[2];
    atomicAdd(&sum[0], t1 - t0);
    atomicAdd(&sum[1], t2 - t1);
    atomicAdd(&sum[2], t3 - t2);
    atomicAdd(&sum[3], mxa_sx_tm_gap(re, t1));
    atomicAdd(&sum[4], mxa_sx_tm_gap(rs, t0));
    atomicAdd(&sum[5], mxa_sx_tm_gap(rh, t1));
    atomicAdd(&sum[6], t0 < rh ? 1ull : 0ull);
    atomicAdd(&sum[12], t0 < re ? 1ull : 0ull);
    last[3] = t2;
    unsigned long long c = atomicAdd(&mxa_sx_tm_cnt[0], 1ull) + 1;
    if (c % 4096)
        return;
    double n = (double)c, rn = mxa_sx_tm_cnt[1] ? (double)mxa_sx_tm_cnt[1] : 1.0;
    printf("SXTIME us, %llu sends: start->waited %.2f stores %.2f tail %.2f | receive end->send "
           "waited %.2f receive start->send start %.2f hit->send waited %.2f started before "
           "hit %.1f%% before receive end %.1f%% | receives: start->hit %.2f hit->waited %.2f "
           "waited->copied %.2f tail %.2f last send stored->hit %.2f\n",
           c, sum[0] / 1e3 / n, sum[1] / 1e3 / n, sum[2] / 1e3 / n, sum[3] / 1e3 / n,
           sum[4] / 1e3 / n, sum[5] / 1e3 / n, 100.0 * sum[6] / n, 100.0 * sum[12] / n,
           sum[7] / 1e3 / rn, sum[8] / 1e3 / rn, sum[9] / 1e3 / rn, sum[10] / 1e3 / rn,
           sum[11] / 1e3 / rn);
    for (int i = 0; i < 16; i++)
        sum[i] = 0;
    mxa_sx_tm_cnt[0] = mxa_sx_tm_cnt[1] = 0;
}
#else
#define MXA_SX_TM(x)
#define MXA_SX_TM_DECL(...)
#define MXA_SX_TM_SEND(t0, t1, t2) ((void)0)
#define MXA_SX_TM_RECV(a, b, c, d) ((void)0)
#endif

/* One LL word, or two, as one access each (sx_proto.h: every 64-bit word
 * is single-copy atomic; the pair is for fewer transactions, and a reader
 * checks both flags). Volatile: relaxed at system scope, never cached in
 * L1 (another GPU or the host rewrites the ring). */
static __device__ __forceinline__ void mxa_ll_store2(uint64_t *p, uint64_t a, uint64_t b)
{
    asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
static __device__ __forceinline__ void mxa_ll_load2(const uint64_t *p, uint64_t *a, uint64_t *b)
{
    uint64_t x, y;
    asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p) : "memory");
    *a = x;
    *b = y;
}
static __device__ __forceinline__ uint64_t mxa_ll_load(const uint64_t *p)
{
    uint64_t x;
    asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(x) : "l"(p) : "memory");
    return x;
}

/* GPU-scope accesses to the sender's own scratch words (bulk steps). */
static __device__ __forceinline__ mxa_u64 mxa_ld_acquire_gpu(const mxa_u64 *p)
{
    mxa_u64 v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void mxa_st_release_gpu(mxa_u64 *p, mxa_u64 v)
{
    asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Bytes [*lo, *hi) of n that part `part` of `parts` copies (16-byte
 * multiples, so 16-byte aligned ends stay aligned). */
static __device__ __forceinline__ void mxa_sx_share(uint64_t n, unsigned part, unsigned parts,
                                                    uint64_t *lo, uint64_t *hi)
{
    uint64_t per = ((n + parts - 1) / parts + 15) & ~15ull;
    uint64_t a = per * part;
    *lo = a < n ? a : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* A multi-block step decides once whether the slots are free: the first
 * block to arrive claims them (mxa_sx_slot_claim) and publishes the
 * outcome in the slot's decision word, (n + 1) << 2 | 1 (free) or 2
 * (taken); the others wait for it -- only ever for a block that is
 * already running, so no block count or residency is assumed. Thread 0. */
static __device__ int mxa_sx_bulk_decide(const mxa_sx_send_desc_t *d)
{
    mxa_u64 *w = (mxa_u64 *)(size_t)d->scratch;
    mxa_u64 want = (mxa_u64)(d->n + 1) << 2;
    for (;;) {
        mxa_u64 v = mxa_ld_acquire_gpu(w);
        if ((v & ~3ull) == want) {
            if (v & 3ull)
                return (v & 3ull) == 1ull;
            continue; /* the deciding block is between its claim's loads */
        }
        if (atomicCAS(w, v, want) == v) {
            int free = mxa_sx_slot_claim(d);
            mxa_st_release_gpu(w, want | (free ? 1ull : 2ull));
            return free;
        }
    }
}

/* Header words 2i and 2i + 1 of message d into its slot, and into the
 * receiver's host-page mirror of a device ring's headers (for its
 * host-side look-up; posted, off the critical path). */
static __device__ __forceinline__ void mxa_sx_header_pair(const mxa_sx_send_desc_t *d, int i)
{
    uint64_t w[MXA_SX_LL_HDR_WORDS];
    mxa_sx_ll_header(d, w);
    mxa_ll_store2((uint64_t *)(size_t)d->slot + 2 * i, w[2 * i], w[2 * i + 1]);
    if (d->mirror)
        mxa_ll_store2((uint64_t *)(size_t)d->mirror + 2 * i, w[2 * i], w[2 * i + 1]);
}

/* The send step's outcome, then the stream's trigger: two relaxed stores
 * that may land in either order (the engine waits for the record once it
 * sees the trigger, mxe_sx_send_outcome); the caller fenced if a reader
 * needs the step's other stores first. One thread. */
static __device__ __forceinline__ void mxa_sx_send_finish(const mxa_sx_send_desc_t *d, int in_ring)
{
    mxa_sx_record_finish_relaxed((mxa_sx_record_t *)(size_t)d->record, d->bytes,
                                 in_ring ? MXA_SX_SENT : MXA_SX_BOUNCED, -1);
    if (d->trigger_word)
        mxa_sx_store_relaxed((uint64_t *)(size_t)d->trigger_word, d->trigger_seq);
}

/* The send step's claim (each block gets the one outcome). The claim
 * touches only the link's control words: it may run before the kernel
 * ahead has finished unless that kernel could be this slot's previous send
 * step (same stream); the buffer is read only after that kernel. 1: the
 * slot (and a bulk message's bulk slot) are the message's. */
static __device__ __forceinline__ int mxa_sx_send_claim(const mxa_sx_send_desc_t *d)
{
    __shared__ int s_free;
    if (!d->early_claim)
        mxa_pdl_wait();
    if (threadIdx.x == 0)
        s_free = d->bulk ? mxa_sx_bulk_decide(d) : mxa_sx_slot_claim(d);
    __syncthreads();
    mxa_pdl_wait(); /* before reading the buffer the kernel ahead may write */
    return s_free;
}

/* A bulk message (sx_proto.h): every block copies its share of the
 * message into the bulk slot (or, when a slot is taken, the bounce
 * buffer), publishes it with a system-scope fence and counts itself in
 * the slot's second scratch word; the last one writes the header's LL
 * words (the receiver's acquire of them orders its reads of the data),
 * the record and the trigger. */
static __device__ void mxa_sx_send_bulk(const mxa_sx_send_desc_t &d)
{
    MXA_SX_TM_DECL(t0 = mxa_sx_tm_now(), t1 = 0, t2 = 0);
    int in_ring = mxa_sx_send_claim(&d);
    MXA_SX_TM(t1 = mxa_sx_tm_now());
    uint64_t lo, hi;
    mxa_sx_share(d.bytes, blockIdx.x, gridDim.x, &lo, &hi);
    unsigned char *dst = (unsigned char *)(size_t)(in_ring ? d.bulk : d.bounce);
    if (hi > lo)
        mxa_sx_copy_wide(dst + lo, (const unsigned char *)(size_t)d.src + lo, hi - lo);
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    mxa_sx_fence(); /* the block's stores (barrier; fences are cumulative) */
    mxa_u64 *cnt = (mxa_u64 *)(size_t)d.scratch + 1;
    if (atomicAdd(cnt, 1ull) != (mxa_u64)gridDim.x - 1)
        return;
    mxa_sx_fence();                  /* every block's copy, seen through the count */
    MXA_SX_TM(t2 = mxa_sx_tm_now()); /* (the phases of the last block to finish) */
    *(volatile mxa_u64 *)cnt = 0;    /* for the slot's next message (after this one's consume) */
    for (int i = 0; in_ring && i < MXA_SX_LL_HDR_WORDS / 2; i++)
        mxa_sx_header_pair(&d, i);
    mxa_sx_send_finish(&d, in_ring);
    MXA_SX_TM_SEND(t0, t1, t2);
}

extern "C" __global__ void mxa_sx_send_kernel(mxa_sx_send_desc_t d)
{
    if (d.bulk) {
        mxa_sx_send_bulk(d);
        return;
    }
    uint64_t *h = (uint64_t *)(size_t)d.slot;
    MXA_SX_TM_DECL(t0 = mxa_sx_tm_now(), t1 = 0, t2 = 0);
    int in_ring = mxa_sx_send_claim(&d);
    /* a non-contiguous buffer: gathered into src first -- except a regular
     * one going into the ring, whose LL words are read straight from it
     * (no packed block in between) */
    const bool direct = in_ring && mxa_pack_regular8(d.pack);
    if (d.pack.buf && !direct)
        mxa_pack_block(d.pack, d.pack.limit);
    MXA_SX_TM(t1 = mxa_sx_tm_now());
    if (in_ring) {
        /* LL words, header and payload, in one pass without a fence: each
         * word carries its own flag (sx_proto.h). Pairs of words per
         * thread; payload pair j is words 2j, 2j+1. */
        uint32_t f = mxa_sx_ll_flag(d.n);
        const unsigned char *src = (const unsigned char *)(size_t)d.src;
        uint64_t nw = mxa_sx_ll_words(d.bytes);
        uint64_t npairs = (nw + 1) / 2;
        uint64_t *pay = h + MXA_SX_HDR_BYTES / sizeof(uint64_t);
        for (uint64_t j = threadIdx.x; j < npairs; j += blockDim.x) {
            uint32_t lo, hi = 0;
            if (direct) {
                const uint64_t q = 8 * j, n = d.bytes - q < 8 ? d.bytes - q : 8;
                const uint64_t v = mxa_pack_load(d.pack, q, n);
                lo = (uint32_t)v;
                hi = (uint32_t)(v >> 32);
            } else {
                lo = mxa_sx_ll_gather(src, d.bytes, 2 * j);
                if (2 * j + 1 < nw)
                    hi = mxa_sx_ll_gather(src, d.bytes, 2 * j + 1);
            }
            uint64_t a = mxa_sx_ll_word(lo, f);
            if (2 * j + 1 < nw)
                mxa_ll_store2(pay + 2 * j, a, mxa_sx_ll_word(hi, f));
            else
                mxa_sx_store_relaxed(pay + 2 * j, a);
        }
        if (threadIdx.x < MXA_SX_LL_HDR_WORDS / 2)
            mxa_sx_header_pair(&d, (int)threadIdx.x);
    } else {
        mxa_sx_copy((unsigned char *)(size_t)d.bounce, (const unsigned char *)(size_t)d.src,
                    d.bytes);
    }
    /* The block's stores happen before thread 0's fence below (barrier;
     * PTX fences are cumulative): the bounce is published by it. */
    __syncthreads();
    MXA_SX_TM(t2 = mxa_sx_tm_now());
    if (threadIdx.x == 0) {
        /* A message in the ring carries its own flags: the record and the
         * trigger need no fence (two releases here cost 3.2 us per step on
         * H100). A bounced one is read by the host from the bounce buffer:
         * one fence publishes it. */
        if (!in_ring)
            mxa_sx_fence();
        mxa_sx_send_finish(&d, in_ring);
        MXA_SX_TM_SEND(t0, t1, t2);
    }
}

/* The receive step's body, for a parameter block of 16 receives or of
 * one (mxa_sx_recv1_params_t: the usual step, a smaller launch). */
template <typename P> static __device__ __forceinline__ void mxa_sx_recv_body(const P &p)
{
    __shared__ int s_slot;
    __shared__ uint64_t s_n, s_bytes, s_src, s_ring;
    __shared__ uint32_t s_flag;
    __shared__ int s_outcome;
    __shared__ volatile int s_gave_up;
    __shared__ int s_inline;                     /* the scan read the whole message */
    __shared__ int s_bulk;                       /* a bulk message (its data in a bulk slot) */
    __shared__ uint64_t s_pw[MXA_SX_SCAN_WORDS]; /* its payload words */
    /* a send step behind this one may start now (it waits for this grid
     * before it reads anything this grid writes) */
    mxa_pdl_launch_dependents();
    /* receive i has blocks [i * per, i * per + d->blocks): part 0 leads
     * (it acts on the record's desc word, the abort word and the deadline);
     * helpers find the same header, copy their share of a bulk message,
     * and stop when the record is finished or reused */
    unsigned per = p.per > 0 ? (unsigned)p.per : 1u;
    unsigned ri = blockIdx.x / per, part = blockIdx.x % per;
    if ((int)ri >= p.n || part >= (p.d[ri].blocks ? p.d[ri].blocks : 1u))
        return;
    const mxa_sx_recv_desc_t *d = &p.d[ri];
    const int helper = part > 0;
    mxa_sx_record_t *rec = (mxa_sx_record_t *)(size_t)d->record;
    uint64_t start = mxa_sx_now_ns();
    MXA_SX_TM_DECL(tr0 = start, tr2 = 0, tr3 = 0);
    MXA_SX_TM(__shared__ unsigned long long s_thit);
    if (threadIdx.x == 0) {
        s_gave_up = 0;
        s_inline = 0;
        s_bulk = 0;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        unsigned lane = threadIdx.x;
        if (lane == 0 && d->after_word)
            mxa_wait_geq((const mxa_u64 *)(size_t)d->after_word, d->after_seq);
        __syncwarp();
        int slot = -1, outcome = -1;
        uint64_t n = 0, bytes = 0, src = 0;
        uint32_t flag = 0;
        uint64_t ring = 0; /* the ring the message is in */
        int ring_off = 0;  /* desc said: the message comes by UCX */
        for (unsigned iter = 0;; iter++) {
            /* One scan: every lane reads the headers of its slots (four
             * 16-byte loads each, and the first payload words) and lane 0
             * the record's word, all issued together: one round trip where
             * the ring or the record is across a bus. */
            /* The record's word is host memory: a round trip. While only
             * a device ring (local memory) is scanned, every 8th scan
             * reads it, so the scans run at local-memory speed; it says
             * what comes by UCX, which takes microseconds anyway. */
            int read_desc = helper ? (iter & 7) == 0 : d->ring != 0 || ring_off || (iter & 7) == 0;
            uint64_t desc = lane == 0 && read_desc ? mxa_ll_load(&rec->desc) : 0;
            int hit = 0;
            uint64_t hn = 0, hb = 0;
            uint32_t hf = 0;
            uint64_t hbase = 0;
            uint64_t pw[MXA_SX_SCAN_WORDS];
            /* lane j: slot j (and j + 32) of the host ring, then of the
             * device ring; a ring whose address is 0 is not scanned */
            for (unsigned i = lane; i < 2 * d->nslots && !hit && !ring_off; i += 32) {
                uint64_t base = i < d->nslots ? d->ring : d->dring;
                unsigned s = i < d->nslots ? i : i - d->nslots;
                /* helpers only look in the device ring: a message in
                 * the host ring is the leader's alone */
                if (!base || (helper && i < d->nslots))
                    continue;
                const uint64_t *h = (const uint64_t *)(size_t)(base + (uint64_t)s * d->slot_stride);
                uint64_t w[MXA_SX_LL_HDR_WORDS];
                for (int i = 0; i < MXA_SX_LL_HDR_WORDS / 2; i++)
                    mxa_ll_load2(h + 2 * i, &w[2 * i], &w[2 * i + 1]);
                /* the first payload words too: a message this small is
                 * complete after one round trip */
                for (int i = 0; i < MXA_SX_SCAN_WORDS / 2; i++)
                    mxa_ll_load2(h + MXA_SX_LL_HDR_WORDS + 2 * i, &pw[2 * i], &pw[2 * i + 1]);
                if (mxa_sx_ll_match(w, d->ctx, d->tag, d->k, &hn, &hb, &hf)) {
                    hit = 1;
                    slot = (int)s;
                    hbase = base;
                }
            }
            unsigned mask = __ballot_sync(0xffffffffu, hit);
            if (mask) {
                int from = __ffs(mask) - 1;
                slot = __shfl_sync(0xffffffffu, slot, from);
                n = __shfl_sync(0xffffffffu, hn, from);
                bytes = __shfl_sync(0xffffffffu, hb, from);
                flag = __shfl_sync(0xffffffffu, hf, from);
                ring = __shfl_sync(0xffffffffu, hbase, from);
                int bulk = mxa_sx_hdr_bulk(bytes);
                bytes = mxa_sx_hdr_len(bytes);
                outcome = bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED;
                if ((int)lane == from) {
                    uint64_t take = bytes <= d->cap ? bytes : d->cap;
                    uint64_t nw = mxa_sx_ll_words(take);
                    int whole = !bulk && nw <= MXA_SX_SCAN_WORDS;
                    s_bulk = bulk;
                    /* a bulk message's data was published before its
                     * header: acquire it (local memory, no fence) */
                    if (bulk)
                        (void)mxa_sx_load_acquire(
                            (const uint64_t *)(size_t)(ring + (uint64_t)slot * d->slot_stride));
                    for (uint64_t i = 0; i < nw && whole; i++) {
                        whole = mxa_sx_ll_flag_of(pw[i]) == flag;
                        s_pw[i] = pw[i];
                    }
                    s_inline = whole;
                }
                break;
            }
            /* nothing yet: after ~100 us of scans, one every microsecond
             * (a scan is a burst of bus reads where the ring is host
             * memory; receives waiting long, e.g. behind large messages,
             * would otherwise keep the bus busy) */
            if (ring_off)
                __nanosleep(500); /* one word to poll */
            else if (iter >= 128)
                __nanosleep(1000);
            /* The record's word every scan: a message that came by UCX
             * (larger than a slot, or its slot was taken) is announced
             * there. The abort word and the clock every 32 scans. */
            {
                int o = -1;
                if (lane == 0 && helper) {
                    /* the leader finished the record without this
                     * block (not in a slot, or it gave up), or the
                     * record was already given back and reused */
                    if (read_desc && (desc != MXA_SX_DESC_NONE || mxa_ll_load(&rec->done) != 0 ||
                                      mxa_ll_load(&rec->serial) != d->serial))
                        o = -2; /* (desc: the message is not in the ring) */
                } else if (lane == 0) {
                    if (desc != MXA_SX_DESC_NONE && desc != MXA_SX_DESC_UCX)
                        desc = mxa_sx_load_acquire(&rec->desc); /* orders the reads below */
                    if (desc == MXA_SX_DESC_UCX) {
                        /* not in the ring: stop reading it (a scan is a
                         * burst of bus reads; steps waiting for large
                         * messages halved the bandwidth of UCX transfers,
                         * 2 x H200 at 29c614c) */
                    } else if (desc == MXA_SX_DESC_COPY) { /* by UCX into host staging */
                        src = mxa_sx_load_relaxed(&rec->copy_src);
                        bytes = mxa_sx_load_relaxed(&rec->copy_bytes);
                        o = bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED;
                    } else if (desc != MXA_SX_DESC_NONE)
                        o = desc == MXA_SX_DESC_DELIVERED ? MXA_SX_DELIVERED : MXA_SX_ABORTED;
                    else if ((iter & 31) == 0 && p.lim.abort_word &&
                             mxa_sx_load_acquire((const uint64_t *)(size_t)p.lim.abort_word))
                        o = MXA_SX_ABORTED;
                    else if ((iter & 31) == 0 && p.lim.timeout_ns &&
                             mxa_sx_now_ns() - start > p.lim.timeout_ns)
                        o = MXA_SX_TIMED_OUT;
                }
                o = __shfl_sync(0xffffffffu, o, 0);
                ring_off = __shfl_sync(0xffffffffu, (int)(desc == MXA_SX_DESC_UCX), 0);
                if (o != -1) { /* an outcome, or -2: a helper stops */
                    outcome = o;
                    slot = -1;
                    break;
                }
            }
        }
        if (lane == 0) {
            MXA_SX_TM(s_thit = mxa_sx_tm_now());
            s_ring = ring;
            s_slot = slot;
            s_n = n;
            s_bytes = bytes;
            s_src = src;
            s_flag = flag;
            s_outcome = outcome;
        }
    }
    __syncthreads();
    /* Launched with programmatic dependent launch (cuda_sx.c), the step
     * scanned while the kernel ahead of it may still run: that kernel may
     * read the buffer this step writes, so wait for it here. */
    mxa_pdl_wait();
    MXA_SX_TM(tr2 = mxa_sx_tm_now());
    int outcome = s_outcome;
    if (outcome == -2)
        return; /* a helper whose leader finished alone */
    uint64_t take = 0;
    /* a fused unpack of a regular layout from an LL message: the words go
     * straight into the user's buffer (no packed block, no second pass) */
    const bool direct = (outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED) && s_slot >= 0 &&
                        !s_bulk && mxa_pack_regular8(d->unpack);
    if (outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED) {
        take = s_bytes <= d->cap ? s_bytes : d->cap;
        unsigned char *dst = (unsigned char *)(size_t)d->dst;
        if (s_slot >= 0 && s_bulk) {
            /* this block's share of the bulk slot (local memory) */
            uint64_t lo, hi;
            mxa_sx_share(take, part, d->blocks ? d->blocks : 1u, &lo, &hi);
            if (hi > lo)
                mxa_sx_copy_wide(dst + lo,
                                 (const unsigned char *)(size_t)mxa_sx_bulk_data(d, s_n) + lo,
                                 hi - lo);
        } else if (helper) {
            /* an LL message: the leader copies it */
        } else if (s_slot >= 0 && s_inline) {
            uint64_t nw = mxa_sx_ll_words(take);
            if (threadIdx.x < nw && direct) {
                const uint64_t q = 4 * (uint64_t)threadIdx.x;
                mxa_pack_store(d->unpack, q, take - q < 4 ? take - q : 4,
                               mxa_sx_ll_data_of(s_pw[threadIdx.x]));
            } else if (threadIdx.x < nw) {
                mxa_sx_ll_scatter(dst, take, threadIdx.x, mxa_sx_ll_data_of(s_pw[threadIdx.x]));
            }
        } else if (s_slot >= 0) {
            /* LL words: wait for each word's flag (they may land after
             * the header), bounded like the scan */
            const uint64_t *pay =
                (const uint64_t *)(size_t)(s_ring + (uint64_t)s_slot * d->slot_stride) +
                MXA_SX_HDR_BYTES / sizeof(uint64_t);
            uint32_t f = s_flag;
            uint64_t nw = mxa_sx_ll_words(take);
            uint64_t npairs = (nw + 1) / 2;
            for (uint64_t j = threadIdx.x; j < npairs; j += blockDim.x) {
                uint64_t a, b = 0;
                for (unsigned spin = 0;; spin++) {
                    if (2 * j + 1 < nw)
                        mxa_ll_load2(pay + 2 * j, &a, &b);
                    else
                        a = mxa_ll_load(pay + 2 * j);
                    if (mxa_sx_ll_flag_of(a) == f && (2 * j + 1 >= nw || mxa_sx_ll_flag_of(b) == f))
                        break;
                    if ((spin & 1023) == 1023 &&
                        ((p.lim.abort_word &&
                          mxa_sx_load_relaxed((const uint64_t *)(size_t)p.lim.abort_word)) ||
                         (p.lim.timeout_ns && mxa_sx_now_ns() - start > p.lim.timeout_ns))) {
                        s_gave_up = 1;
                        break;
                    }
                }
                if (s_gave_up)
                    break;
                if (direct) {
                    const uint64_t q = 8 * j, n = take - q < 8 ? take - q : 8;
                    mxa_pack_store(d->unpack, q, n,
                                   (uint64_t)mxa_sx_ll_data_of(a) | (uint64_t)mxa_sx_ll_data_of(b)
                                                                        << 32);
                    continue;
                }
                mxa_sx_ll_scatter(dst, take, 2 * j, mxa_sx_ll_data_of(a));
                if (2 * j + 1 < nw)
                    mxa_sx_ll_scatter(dst, take, 2 * j + 1, mxa_sx_ll_data_of(b));
            }
        } else {
            mxa_sx_fence(); /* lane 0's acquire of desc, for every thread's loads */
            mxa_sx_copy(dst, (const unsigned char *)(size_t)s_src, take); /* DESC_COPY: staging */
        }
    }
    /* the copy's stores happen before thread 0's consume and record
     * releases (barrier; releases are cumulative) */
    __syncthreads();
    if (d->unpack.buf && !s_gave_up && !direct) {
        /* a fused unpack (one block: sx_proto.h): the received bytes from
         * dst into the user's non-contiguous buffer, before the record; a
         * message UCX delivered into dst was published by the host's
         * release of desc, which lane 0 acquired */
        if (outcome == MXA_SX_DELIVERED)
            mxa_sx_fence();
        mxa_pack_block(d->unpack, mxa_sx_recv_len(rec, outcome, take));
    }
    MXA_SX_TM(tr3 = mxa_sx_tm_now());
    if (threadIdx.x == 0) {
        int in_slot = (outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED) && s_slot >= 0;
        if (!s_gave_up && in_slot && d->blocks > 1 && s_ring == d->dring) {
            /* every block of the receive counts itself in the slot's
             * counter (the ring's, local memory) after its reads and
             * writes; the last finishes for all */
            if (d->flags & MXA_SX_RECV_FENCE)
                mxa_sx_fence();
            else
                __threadfence();
            mxa_u64 *cnt = (mxa_u64 *)(size_t)d->counters + s_slot;
            if (atomicAdd(cnt, 1ull) != (mxa_u64)d->blocks - 1)
                return;
            *(volatile mxa_u64 *)cnt = 0; /* for the slot's next message */
            __threadfence();              /* ... before the sender may write it */
        }
        if (d->len_word) {
            /* the received length for work after the step (a derived
             * type's unpack reads it in stream order: no host between) */
            uint64_t len = s_gave_up ? 0 : mxa_sx_recv_len(rec, outcome, take);
            *(volatile mxa_u64 *)(size_t)d->len_word = len;
        }
        if (s_gave_up) {
            int ab =
                p.lim.abort_word && mxa_sx_load_acquire((const uint64_t *)(size_t)p.lim.abort_word);
            mxa_sx_record_finish(rec, 0, ab ? MXA_SX_ABORTED : MXA_SX_TIMED_OUT, -1);
        } else {
            /* No system-scope fence unless the host may read dst when it
             * sees the record (flags): a fence.acq_rel.sys costs ~1.7 us on
             * H100 and this tail had two (consume, record releases): 3.4 us
             * between the copy-out and the end of the step, on the
             * critical path of every hop (2 x H100, MXA_SX_TIMING). The
             * consume store follows, through the barrier, loads whose
             * values the block has already used, so the sender cannot
             * overwrite what it still reads; readers of dst on this GPU are
             * ordered by the stream. */
            if (d->flags & MXA_SX_RECV_FENCE)
                mxa_sx_fence();
            if (in_slot && s_bulk)
                mxa_sx_bulk_consume(d, s_n, 0);
            if (in_slot)
                mxa_sx_consume_relaxed((uint64_t *)(size_t)d->consumed, (unsigned)s_slot, s_n);
            mxa_sx_record_finish_relaxed(rec, take, outcome, s_slot);
        }
        /* the block that finished the first receive (the last of its
         * blocks to count itself, for a bulk message) */
        if (ri == 0)
            MXA_SX_TM_RECV(tr0, s_thit, tr2, tr3);
    }
}

extern "C" __global__ void mxa_sx_recv_kernel(const __grid_constant__ mxa_sx_recv_params_t p)
{
    mxa_sx_recv_body(p);
}

extern "C" __global__ void mxa_sx_recv1_kernel(const __grid_constant__ mxa_sx_recv1_params_t p)
{
    mxa_sx_recv_body(p);
}

/* ------------------------------------------------- partitioned requests
 * The completion of an epoch of a partitioned request on the direct path
 * (interpose/partitioned.c; the protocol is mpix/mpix_acc_device.cuh, the
 * handle mpix/mpix_acc_dreq.h):
 *   receive  one block per partition (grid-stride): wait for its LL lines,
 *            copy them into the receive buffer (unless parrived did),
 *            mark it; the launch's last block to finish gives the sender
 *            its credit (consumed = epoch)
 *   send     one thread: wait until every partition of the epoch was
 *            delivered (done >= epoch x partitions)
 *   start    one thread: epoch + 1 (a start in a CUDA graph capture, and
 *            every later start of that request: interpose/partitioned.c)
 * Every step reads the epoch from the handle, so a captured sequence
 * replays as a new epoch per launch. Waits are bounded by the request's
 * timeout: the error is kept in the handle. */
#include "mpix_acc_device.cuh"

extern "C" __global__ void mxa_part_recv_done_kernel(mpix_acc_dreq_t *r)
{
    namespace d = mpix_acc_detail;
    __shared__ int skip;
    const uint64_t e = r->epoch;
    const uint64_t t0 = d::now_ns();
    for (int p = blockIdx.x; p < r->partitions; p += gridDim.x) {
        if (threadIdx.x == 0)
            skip = d::ld_vol(&r->pstate[p]) >= e;
        __syncthreads();
        if (!skip && r->bulk) {
            __shared__ int ok;
            if (threadIdx.x == 0) {
                ok = d::wait_geq(&r->pflags[p], e, r->timeout_ns, true);
                if (!ok)
                    d::fail(r, MPIX_ACC_DERR_TIMEOUT);
            }
            __syncthreads();
            if (ok)
                d::grp_copy_in(r->buf + (uint64_t)p * r->part_bytes,
                               (const char *)(r->lines + (uint64_t)p * r->line_stride),
                               r->part_bytes, threadIdx.x, blockDim.x);
        } else if (!skip) {
            const uint64_t *lines = r->lines + (uint64_t)p * r->line_stride;
            char *dst = r->buf + (uint64_t)p * r->part_bytes;
            unsigned i = 0;
            /* copies each word as its flag shows the epoch */
            while (!d::ll_take(lines, dst, r->part_bytes, (uint32_t)e, threadIdx.x, blockDim.x,
                               true)) {
                if (r->timeout_ns && (++i & 255) == 0 && d::now_ns() - t0 > r->timeout_ns) {
                    d::fail(r, MPIX_ACC_DERR_TIMEOUT);
                    break;
                }
            }
        }
        __syncthreads();
        if (threadIdx.x == 0 && !skip)
            d::st_vol(&r->pstate[p], e);
    }
    /* the credit, once every block of this launch copied its partitions
     * out (a launch's blocks count gridDim.x onto the handle's total) */
    if (threadIdx.x == 0) {
        __threadfence();
        if ((atomicAdd(&r->fin, 1ull) + 1) % gridDim.x == 0) {
            __threadfence_system();
            d::st_release_sys(r->consumed, e);
        }
    }
}

extern "C" __global__ void mxa_part_start_kernel(mpix_acc_dreq_t *r)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        r->epoch = r->epoch + 1;
}

/* Graphs' fire and wait nodes (accel.h's graph words; interpose/graph.c's
 * counter protocol). The words are mapped pinned host memory; one writer
 * each (the stream's nodes, in stream order), so plain stores do. Fire:
 * word 0 + 1 (the progress thread makes that launch's operation). Wait:
 * ticket k = ++word 0, then hold the stream until the progress thread has
 * published word 8 >= k (launch k's operations complete). */
extern "C" __global__ void mxa_graph_fire_kernel(unsigned long long *pair)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        volatile unsigned long long *fire = pair;
        *fire = *fire + 1;
        __threadfence_system();
    }
}

extern "C" __global__ void mxa_graph_wait_kernel(unsigned long long *pair)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        volatile unsigned long long *tickets = pair, *done = pair + 8;
        unsigned long long k = *tickets + 1;
        *tickets = k;
        __threadfence_system();
        while (*done < k)
            __nanosleep(256);
        __threadfence_system();
    }
}

extern "C" __global__ void mxa_part_send_done_kernel(mpix_acc_dreq_t *r)
{
    namespace d = mpix_acc_detail;
    if (threadIdx.x == 0 && blockIdx.x == 0 &&
        !d::wait_geq((const uint64_t *)r->done, r->epoch * (uint64_t)r->partitions, r->timeout_ns,
                     false))
        d::fail(r, MPIX_ACC_DERR_TIMEOUT);
}

/* ------------------------------------------------- collectives' reductions
 * out[i] = a[i] op b[i] (reduce.c's arithmetic, bit for bit: integer sums
 * and products in unsigned arithmetic of at least int's width, one IEEE
 * round-to-nearest operation per floating-point element -- no contraction,
 * MIN/MAX as (y < x ? y : x) / (y > x ? y : x)). kind and op are
 * mxa_red_kind_t / mxa_red_op_t (accel.h). Grid-stride loop. */
template <typename T, typename W> struct mxa_red_arith {
    static __device__ __forceinline__ T sum(T x, T y) { return (T)((W)x + (W)y); }
    static __device__ __forceinline__ T prod(T x, T y) { return (T)((W)x * (W)y); }
};
template <> struct mxa_red_arith<float, float> {
    static __device__ __forceinline__ float sum(float x, float y) { return __fadd_rn(x, y); }
    static __device__ __forceinline__ float prod(float x, float y) { return __fmul_rn(x, y); }
};
template <> struct mxa_red_arith<double, double> {
    static __device__ __forceinline__ double sum(double x, double y) { return __dadd_rn(x, y); }
    static __device__ __forceinline__ double prod(double x, double y) { return __dmul_rn(x, y); }
};

template <typename T, typename W> static __device__ __forceinline__ T mxa_red1(int op, T x, T y)
{
    switch (op) {
    case 0:
        return mxa_red_arith<T, W>::sum(x, y);
    case 1:
        return mxa_red_arith<T, W>::prod(x, y);
    case 2:
        return y < x ? y : x;
    default:
        return y > x ? y : x;
    }
}

template <typename T, typename W>
static __device__ void mxa_red_run(int op, T *out, const T *a, const T *b, mxa_u64 n)
{
    const mxa_u64 stride = (mxa_u64)gridDim.x * blockDim.x;
    for (mxa_u64 i = (mxa_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = mxa_red1<T, W>(op, a[i], b[i]);
}

/* The element type of an mxa_red_kind_t (T) and the type its sums and
 * products are computed in (W), as a tag: mxa_red_kind_switch calls
 * f(mxa_red_type<T, W>()) for kind -- the one place that maps kinds to
 * types, for the reduction kernel and the one-kernel Allreduce. */
template <typename T, typename W> struct mxa_red_type {
    typedef T elem;
    typedef W wide;
};

template <typename F> static __device__ __forceinline__ void mxa_red_kind_switch(int kind, F f)
{
    typedef unsigned int u32;
    switch (kind) {
    case 0:
        f(mxa_red_type<signed char, u32>());
        break;
    case 1:
        f(mxa_red_type<unsigned char, u32>());
        break;
    case 2:
        f(mxa_red_type<short, u32>());
        break;
    case 3:
        f(mxa_red_type<unsigned short, u32>());
        break;
    case 4:
        f(mxa_red_type<int, u32>());
        break;
    case 5:
        f(mxa_red_type<u32, u32>());
        break;
    case 6:
        f(mxa_red_type<long long, mxa_u64>());
        break;
    case 7:
        f(mxa_red_type<mxa_u64, mxa_u64>());
        break;
    case 8:
        f(mxa_red_type<float, float>());
        break;
    default:
        f(mxa_red_type<double, double>());
        break;
    }
}

extern "C" __global__ void mxa_reduce_kernel(int kind, int op, void *out, const void *a,
                                             const void *b, mxa_u64 n)
{
    mxa_red_kind_switch(kind, [&](auto t) {
        typedef typename decltype(t)::elem T;
        mxa_red_run<T, typename decltype(t)::wide>(op, (T *)out, (const T *)a, (const T *)b, n);
    });
}

/* ------------------------------------- one-kernel Allreduce (llred_proto.h)
 * One block. Per round: every thread writes its 4-byte words of the partial
 * as LL lines into the partner's region, reads its words of the partner's
 * lines (spinning until the line carries this call's flag) into shared
 * memory, then the block combines element-wise into dst (mxa_red1: the
 * reduction kernel's bits). Waits are bounded (timeout_ns, abort word); a
 * time-out sets *err = 1 and the kernel ends (the host reports it). */

template <typename T, typename W>
static __device__ void mxa_llred_combine(int op, T *dst, const T *cur, const T *theirs, mxa_u64 n,
                                         int theirs_first)
{
    for (mxa_u64 i = threadIdx.x; i < n; i += blockDim.x) {
        T a = cur[i], b = theirs[i];
        dst[i] = theirs_first ? mxa_red1<T, W>(op, b, a) : mxa_red1<T, W>(op, a, b);
    }
}

static __device__ void mxa_llred_combine_any(int kind, int op, void *dst, const void *cur,
                                             const void *theirs, mxa_u64 n, int tf)
{
    mxa_red_kind_switch(kind, [&](auto t) {
        typedef typename decltype(t)::elem T;
        mxa_llred_combine<T, typename decltype(t)::wide>(op, (T *)dst, (const T *)cur,
                                                         (const T *)theirs, n, tf);
    });
}

static __device__ __forceinline__ mxa_u64 mxa_ld_volatile_u64(const mxa_u64 *p)
{
    mxa_u64 v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void mxa_st_volatile_u64(mxa_u64 *p, mxa_u64 v)
{
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ mxa_u64 mxa_globaltimer(void)
{
    mxa_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* 4-byte word w of the nbytes at p (zero past the end; byte-wise where p
 * is not 4-byte aligned or the word is the last, partial one) */
static __device__ __forceinline__ unsigned mxa_llred_word(const unsigned char *p, mxa_u64 nbytes,
                                                          mxa_u64 w)
{
    mxa_u64 o = w * 4;
    if (((uintptr_t)p & 3) == 0 && o + 4 <= nbytes)
        return *(const unsigned *)(p + o);
    unsigned v = 0;
    for (int k = 0; k < 4 && o + k < nbytes; k++)
        v |= (unsigned)p[o + k] << (8 * k);
    return v;
}

extern "C" __global__ void mxa_llred_kernel(mxa_llred_plan_t pl)
{
    __shared__ mxa_u64 theirs_buf[MXA_LLRED_MAX_BYTES / 8];
    __shared__ int failed;
    unsigned *theirs = (unsigned *)theirs_buf;
    static const unsigned char esz[10] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
    const mxa_u64 nbytes = pl.n * esz[pl.kind], words = (nbytes + 3) / 4;
    const unsigned char *cur = (const unsigned char *)pl.src;
    unsigned char *dst = (unsigned char *)pl.dst;
    const mxa_u64 hi = (mxa_u64)pl.flag << 32;
    if (threadIdx.x == 0)
        failed = 0;
    __syncthreads();
    for (int k = 0; k < pl.nrounds; k++) {
        const mxa_llred_round_t rd = pl.r[k];
        if (rd.mode == MXA_LLR_EXCH || rd.mode == MXA_LLR_SEND || rd.mode == MXA_LLR_GIVE) {
            const unsigned char *from = rd.mode == MXA_LLR_GIVE ? dst : cur;
            mxa_u64 *to = (mxa_u64 *)rd.to;
            for (mxa_u64 w = threadIdx.x; w < words; w += blockDim.x)
                mxa_st_volatile_u64(to + w, hi | mxa_llred_word(from, nbytes, w));
        }
        if (rd.mode == MXA_LLR_SEND || rd.mode == MXA_LLR_GIVE)
            continue;
        const mxa_u64 *lines = (const mxa_u64 *)rd.from;
        mxa_u64 t0 = 0;
        for (mxa_u64 w = threadIdx.x; w < words; w += blockDim.x) {
            mxa_u64 line;
            unsigned spins = 0;
            while (((line = mxa_ld_volatile_u64(lines + w)) & 0xffffffff00000000ull) != hi) {
                if ((++spins & 1023) != 0)
                    continue;
                if (t0 == 0)
                    t0 = mxa_globaltimer();
                if (*(volatile int *)&failed ||
                    (pl.abort_word && *(volatile mxa_u64 *)pl.abort_word) ||
                    (pl.timeout_ns && mxa_globaltimer() - t0 > pl.timeout_ns)) {
                    failed = 1;
                    break;
                }
            }
            theirs[w] = (unsigned)line;
        }
        __syncthreads();
        if (failed)
            break;
        if (rd.mode == MXA_LLR_RESULT) {
            for (mxa_u64 b = threadIdx.x; b < nbytes; b += blockDim.x)
                dst[b] = ((const unsigned char *)theirs)[b];
        } else {
            mxa_llred_combine_any(pl.kind, pl.op, dst, cur, theirs, pl.n, rd.theirs_first);
        }
        __syncthreads();
        cur = dst;
    }
    if (failed && threadIdx.x == 0) {
        asm volatile("st.release.sys.u64 [%0], %1;" ::"l"((mxa_u64 *)pl.err), "l"(1ull) : "memory");
    }
}

/* ------------------------------------- non-contiguous datatypes (pack_proto.h)
 * A warp per chunk instance (element e, chunk k): gather copies it from
 * the user's buffer into the packed bytes, scatter back (only the first
 * `limit` packed bytes: a short message fills the first chunks only; the
 * limit is read from a word when limit_at is set -- the receive's
 * length, which the progress thread writes into a host-visible word before
 * the stream passes its wait, and the stream copies into device memory
 * right before the kernel: one read of host memory per warp was
 * serialized, ~2 us each, cuda_pack.c). 8-byte
 * copies where both sides are aligned, else bytes. */
extern "C" __global__ void mxa_pack_kernel(mxa_pack_args_t a)
{
    /* Launched with programmatic dependent launch on a stream (cuda_pack.c):
     * a step behind it may be scheduled now (it waits for this grid before
     * it reads), and this grid waits for the kernel ahead (which writes
     * what it reads) before any load. No-ops without PDL. */
    mxa_pdl_launch_dependents();
    mxa_pdl_wait();
    mxa_u64 limit = a.limit;
    if (a.unpack && a.limit_at)
        limit = *(volatile const mxa_u64 *)a.limit_at;
    const mxa_u64 warp = ((mxa_u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const mxa_u64 warps = ((mxa_u64)gridDim.x * blockDim.x) >> 5;
    mxa_pack_warps(a, limit, warp, warps);
}
