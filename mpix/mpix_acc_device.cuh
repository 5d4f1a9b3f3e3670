/*
 * mpix_acc_device.cuh - device functions of partitioned requests (mpix-acc).
 *
 * Header-only CUDA C++17. Include it in a .cu file; it needs only this
 * directory on the include path (mpix_acc.h, mpix_acc_dreq.h) and the MPI
 * compiler flags. A kernel gets a request's handle from
 * MPIX_Acc_Prequest_get_device(3) (host) and calls:
 *
 *   mpix_acc_pready<L>(r, p)              partition p of a send is ready
 *   mpix_acc_pready_range<L>(r, lo, hi)   partitions lo..hi are
 *   mpix_acc_parrived(r, p)               has partition p of a receive arrived
 *                                         (and is it in the receive buffer)?
 *   mpix_acc_parrived_wait(r, p, ns)      wait for it, at most ns (0: the
 *                                         request's MPIX_ACC_KI_TIMEOUT)
 *   mpix_acc_pready_value(r, p, v)        partition p IS the value v (one thread;
 *                                         sizeof v = the partition, a multiple
 *                                         of 4 bytes up to 16): v is stored into
 *                                         the send buffer and sent from registers
 *   mpix_acc_parrived_wait_value(r, p, &v, ns)
 *                                         wait for partition p, which is copied
 *                                         into the receive buffer, and return it
 *                                         in v (from the arriving lines)
 *
 * The value forms are for the smallest messages (a flag, a count, a
 * residual): the plain forms read the partition back from memory after the
 * kernel wrote it, and the receiver reads it back after the copy-out --
 * dependent trips to L2 that a value in registers does not make.
 * L says who calls: MPIX_ACC_THREAD (one thread), MPIX_ACC_WARP (all 32
 * threads of a warp together, converged), MPIX_ACC_BLOCK (every thread of
 * the block together). The group shares the copy of a partition; one of
 * its threads does the bookkeeping. Each returns MPIX_ACC_DSUCCESS or an
 * MPIX_ACC_DERR_* code (mpix_acc_dreq.h), also kept in the request, whose
 * completion then fails naming it. Every wait is bounded.
 *
 * The request's epoch is the one its last MPIX_Acc_Start wrote in stream
 * order: launch the kernel on that stream after the start (or order it
 * after with events). A send's buffer may be written again once its epoch
 * completed (MPIX_Acc_Wait(3)); a receive's partition is in the buffer
 * once parrived said so, all of them once the epoch completed.
 */
#ifndef MPIX_ACC_DEVICE_CUH
#define MPIX_ACC_DEVICE_CUH

#include <stdint.h>

#include "mpix_acc_dreq.h"

enum mpix_acc_level { MPIX_ACC_THREAD = 0, MPIX_ACC_WARP = 1, MPIX_ACC_BLOCK = 2 };

namespace mpix_acc_detail {

__device__ __forceinline__ uint64_t now_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint64_t ld_vol(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_vol(uint64_t *p, uint64_t v)
{
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Keep the request's first error (a host-visible word: plain stores, as
 * system-scope atomics on host memory need host support), return it. */
__device__ __forceinline__ int fail(const mpix_acc_dreq_t *r, int code)
{
    volatile uint32_t *w = r->error;
    if (w && *w == 0) {
        *w = (uint32_t)code;
        __threadfence_system();
    }
    return code;
}

/* The checks every call makes (the same outcome in every thread). The
 * fields read here do not change while a kernel of the epoch runs (the
 * library writes them before, in stream order): plain loads, which the
 * L1 cache keeps for the next call, not volatile ones that go to L2 each
 * time (3.7 us per 8-byte hop with volatile loads on 2 x H200). */
__device__ __forceinline__ int check(const mpix_acc_dreq_t *r, int lo, int hi, int want_send)
{
    if (r == nullptr || r->magic != MPIX_ACC_DREQ_MAGIC)
        return MPIX_ACC_DERR_FREED;
    if ((int)r->is_send != want_send)
        return fail(r, MPIX_ACC_DERR_ROLE);
    if (lo < 0 || hi >= r->partitions || lo > hi)
        return fail(r, MPIX_ACC_DERR_PARTITION);
    if (r->epoch == 0 || r->mode == MPIX_ACC_DREQ_PENDING)
        return fail(r, MPIX_ACC_DERR_NOT_READY);
    return MPIX_ACC_DSUCCESS;
}

/* A 4-byte word of data: word w of n bytes at src (the tail zero-padded). */
__device__ __forceinline__ uint32_t word_at(const char *src, uint64_t n, uint64_t w)
{
    uint64_t off = w * 4;
    if (off + 4 <= n && ((uintptr_t)(src + off) & 3) == 0)
        return *(const uint32_t *)(src + off);
    uint32_t v = 0;
    for (int b = 0; b < 4 && off + (uint64_t)b < n; b++)
        v |= (uint32_t)(unsigned char)src[off + (uint64_t)b] << (8 * b);
    return v;
}

__device__ __forceinline__ void word_to(char *dst, uint64_t n, uint64_t w, uint32_t v)
{
    uint64_t off = w * 4;
    if (off + 4 <= n && ((uintptr_t)(dst + off) & 3) == 0) {
        *(uint32_t *)(dst + off) = v;
        return;
    }
    for (int b = 0; b < 4 && off + (uint64_t)b < n; b++)
        dst[off + (uint64_t)b] = (char)(v >> (8 * b));
}

/* LL lines of partition p of n bytes: word w at lines[w], flag in the
 * upper half. Written by threads tid, tid + nthr, ... */
__device__ __forceinline__ void ll_put(uint64_t *lines, const char *src, uint64_t n, uint32_t flag,
                                       unsigned tid, unsigned nthr)
{
    uint64_t words = (n + 3) / 4;
    for (uint64_t w = tid; w < words; w += nthr)
        st_vol(lines + w, ((uint64_t)flag << 32) | word_at(src, n, w));
}

/* Have lines tid, tid + nthr, ... of partition p arrived (flag >= the
 * epoch's)? With copy: copy their data to dst. */
__device__ __forceinline__ bool ll_take(const uint64_t *lines, char *dst, uint64_t n, uint32_t flag,
                                        unsigned tid, unsigned nthr, bool copy)
{
    uint64_t words = (n + 3) / 4;
    for (uint64_t w = tid; w < words; w += nthr) {
        uint64_t v = ld_vol(lines + w);
        if ((int32_t)((uint32_t)(v >> 32) - flag) < 0)
            return false;
        if (copy)
            word_to(dst, n, w, (uint32_t)v);
    }
    return true;
}

/* Copy n bytes with threads tid, tid + nthr, ...: 16-byte words where
 * both sides allow, bytes for the rest. */
__device__ __forceinline__ void grp_copy(char *dst, const char *src, uint64_t n, unsigned tid,
                                         unsigned nthr)
{
    uint64_t head = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        uint64_t n16 = n / 16;
        for (uint64_t w = tid; w < n16; w += nthr)
            ((uint4 *)dst)[w] = ((const uint4 *)src)[w];
        head = n16 * 16;
    }
    for (uint64_t b = head + tid; b < n; b += nthr)
        dst[b] = src[b];
}

/* The same from memory another GPU wrote (the receiver's slots): volatile
 * loads, which bypass the L1 cache -- a line of an earlier epoch's copy
 * may still be there (data errors under compute-sanitizer racecheck's
 * timing at 22ebfaa before this). */
__device__ __forceinline__ void grp_copy_in(char *dst, const char *src, uint64_t n, unsigned tid,
                                            unsigned nthr)
{
    uint64_t head = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        uint64_t n16 = n / 16;
        for (uint64_t w = tid; w < n16; w += nthr) {
            uint4 v;
            asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                         : "l"(src + w * 16)
                         : "memory");
            ((uint4 *)dst)[w] = v;
        }
        head = n16 * 16;
    }
    for (uint64_t b = head + tid; b < n; b += nthr)
        dst[b] = *(const volatile char *)(src + b);
}

/* Spin until *word >= v, at most timeout_ns (0: no bound). */
__device__ __forceinline__ bool wait_geq(const uint64_t *word, uint64_t v, uint64_t timeout_ns,
                                         bool sys)
{
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        uint64_t x = sys ? ld_acquire_sys(word) : ld_vol(word);
        if (x >= v)
            return true;
        if (timeout_ns && (i & 255) == 255) {
            uint64_t t = now_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > timeout_ns)
                return false;
        }
    }
}

/* Group helpers: the group's thread index and size, a barrier, and a value
 * of the leader's handed to all. */
template <mpix_acc_level L> __device__ __forceinline__ unsigned g_tid()
{
    if (L == MPIX_ACC_WARP)
        return threadIdx.x & 31u;
    if (L == MPIX_ACC_BLOCK)
        return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    return 0;
}
template <mpix_acc_level L> __device__ __forceinline__ unsigned g_size()
{
    if (L == MPIX_ACC_WARP)
        return 32u;
    if (L == MPIX_ACC_BLOCK)
        return blockDim.x * blockDim.y * blockDim.z;
    return 1u;
}
template <mpix_acc_level L> __device__ __forceinline__ void g_sync()
{
    if (L == MPIX_ACC_WARP)
        __syncwarp();
    else if (L == MPIX_ACC_BLOCK)
        __syncthreads();
}
template <mpix_acc_level L> __device__ __forceinline__ int g_bcast(int v)
{
    if (L == MPIX_ACC_WARP)
        return __shfl_sync(0xffffffffu, v, 0);
    if (L == MPIX_ACC_BLOCK) {
        __shared__ int mpix_acc_bcast_slot;
        __syncthreads();
        if (g_tid<L>() == 0)
            mpix_acc_bcast_slot = v;
        __syncthreads();
        int out = mpix_acc_bcast_slot;
        __syncthreads();
        return out;
    }
    return v;
}

} // namespace mpix_acc_detail

/* Partitions lo..hi of a send are ready (their data is in the buffer). */
template <mpix_acc_level L>
__device__ int mpix_acc_pready_range(mpix_acc_dreq_t *r, int lo, int hi)
{
    namespace d = mpix_acc_detail;
    int rc = d::check(r, lo, hi, 1);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    const unsigned tid = d::g_tid<L>(), n = d::g_size<L>();
    const uint64_t e = r->epoch;
    const bool direct = r->mode == MPIX_ACC_DREQ_DIRECT;
    /* direct: the leader waits for the receiver's credit -- it completed
     * the epoch before, its slots are free (once per epoch: the value
     * seen is kept) */
    if (direct && e > 1 && tid == 0 && r->consumed_seen + 1 < e) {
        if (!d::wait_geq(r->consumed, e - 1, r->timeout_ns, false))
            rc = d::fail(r, MPIX_ACC_DERR_TIMEOUT);
        else
            d::st_vol(&r->consumed_seen, e - 1);
    }
    if (direct)
        rc = d::g_bcast<L>(rc);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    /* the leader claims the partitions for the epoch (twice is an error);
     * its atomics' answers are looked at after the stores, so their
     * latency overlaps them */
    unsigned long long prev[4] = {0, 0, 0, 0};
    const int nclaim = hi - lo + 1;
    if (tid == 0)
        for (int k = 0; k < nclaim && k < 4; k++)
            prev[k] = atomicExch((unsigned long long *)&r->pstate[lo + k], (unsigned long long)e);
    if (direct) {
        for (int p = lo; p <= hi; p++) {
            uint64_t *slot = r->lines + (uint64_t)p * r->line_stride;
            const char *src = r->buf + (uint64_t)p * r->part_bytes;
            if (r->bulk) {
                d::grp_copy((char *)slot, src, r->part_bytes, tid, n);
                /* every thread's bytes reach the peer before the leader's
                 * flag (a fence per storing thread, not only the leader's) */
                __threadfence_system();
            } else
                d::ll_put(slot, src, r->part_bytes, (uint32_t)e, tid, n);
        }
    }
    d::g_sync<L>();
    if (tid == 0) {
        for (int k = 4; k < nclaim; k++)
            if (atomicExch((unsigned long long *)&r->pstate[lo + k], (unsigned long long)e) == e)
                rc = MPIX_ACC_DERR_TWICE;
        for (int k = 0; k < nclaim && k < 4; k++)
            if (prev[k] == e)
                rc = MPIX_ACC_DERR_TWICE;
        if (rc != MPIX_ACC_DSUCCESS) {
            d::fail(r, rc);
        } else if (direct) {
            if (r->bulk) {
                /* (the group's bytes were fenced by each thread before the
                 * barrier above) */
                for (int p = lo; p <= hi; p++)
                    d::st_release_sys(&r->pflags[p], e);
            }
            atomicAdd(r->done, (unsigned long long)nclaim);
        } else {
            /* proxy: the data (written before, by this group or earlier
             * kernels) is visible to the host before the flag */
            __threadfence_system();
            for (int p = lo; p <= hi; p++)
                d::st_release_sys(&r->ready[p], e);
        }
    }
    return d::g_bcast<L>(rc);
}

template <mpix_acc_level L> __device__ int mpix_acc_pready(mpix_acc_dreq_t *r, int p)
{
    return mpix_acc_pready_range<L>(r, p, p);
}

namespace mpix_acc_detail {
/* A value of T as 4-byte words (T: a multiple of 4 bytes, at most 16). */
template <typename T> struct words {
    static_assert(sizeof(T) % 4 == 0 && sizeof(T) <= 16,
                  "mpix-acc value calls take values of 4, 8, 12 or 16 bytes");
    static constexpr int n = (int)(sizeof(T) / 4);
    uint32_t w[n];
};
} // namespace mpix_acc_detail

/* Partition p of a send is the value v (called by one thread; sizeof(T)
 * must be the partition's size). Same semantics as storing v into the
 * partition and calling mpix_acc_pready<MPIX_ACC_THREAD>: on the direct LL
 * path the lines are made from v itself, so the partition is not read
 * back from memory; elsewhere (proxy, bulk) it is exactly that. */
template <typename T> __device__ int mpix_acc_pready_value(mpix_acc_dreq_t *r, int p, const T &v)
{
    namespace d = mpix_acc_detail;
    int rc = d::check(r, p, p, 1);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    if (r->part_bytes != sizeof(T))
        return d::fail(r, MPIX_ACC_DERR_SIZE);
    d::words<T> wv;
    memcpy(&wv, &v, sizeof(T));
    char *part = r->buf + (uint64_t)p * r->part_bytes;
    if (r->mode != MPIX_ACC_DREQ_DIRECT || r->bulk) {
        for (int k = 0; k < wv.n; k++)
            d::word_to(part, sizeof(T), (uint64_t)k, wv.w[k]);
        return mpix_acc_pready<MPIX_ACC_THREAD>(r, p);
    }
    const uint64_t e = r->epoch;
    if (e > 1 && r->consumed_seen + 1 < e) { /* the receiver's credit (mpix_acc_pready_range) */
        if (!d::wait_geq(r->consumed, e - 1, r->timeout_ns, false))
            return d::fail(r, MPIX_ACC_DERR_TIMEOUT);
        d::st_vol(&r->consumed_seen, e - 1);
    }
    /* the claim's answer is looked at after the lines are out */
    unsigned long long prev = atomicExch((unsigned long long *)&r->pstate[p], (unsigned long long)e);
    uint64_t *slot = r->lines + (uint64_t)p * r->line_stride;
    for (int k = 0; k < wv.n; k++)
        d::st_vol(slot + k, ((uint64_t)(uint32_t)e << 32) | wv.w[k]);
    /* the send buffer holds the partition too (MPI's view of it) */
    for (int k = 0; k < wv.n; k++)
        d::word_to(part, sizeof(T), (uint64_t)k, wv.w[k]);
    if (prev == e)
        return d::fail(r, MPIX_ACC_DERR_TWICE);
    atomicAdd(r->done, 1ull);
    return MPIX_ACC_DSUCCESS;
}

/* Has partition p of a receive arrived? On the direct path the calling
 * thread copies it into the receive buffer first (once per epoch). */
__device__ inline bool mpix_acc_parrived(const mpix_acc_dreq_t *r, int p)
{
    namespace d = mpix_acc_detail;
    if (d::check(r, p, p, 0) != MPIX_ACC_DSUCCESS)
        return false;
    const uint64_t e = r->epoch;
    if (d::ld_vol(&r->pstate[p]) >= e)
        return true;
    if (r->mode == MPIX_ACC_DREQ_DIRECT) {
        const uint64_t *lines = r->lines + (uint64_t)p * r->line_stride;
        char *dst = r->buf + (uint64_t)p * r->part_bytes;
        if (r->bulk) {
            if (d::ld_acquire_sys(&r->pflags[p]) < e)
                return false;
            d::grp_copy_in(dst, (const char *)lines, r->part_bytes, 0, 1);
        } else if (!d::ll_take(lines, dst, r->part_bytes, (uint32_t)e, 0, 1, true)) {
            return false;
        }
        __threadfence();
        d::st_vol(&r->pstate[p], e);
        return true;
    }
    if (d::ld_acquire_sys(&r->arrived[p]) < e)
        return false;
    __threadfence_system();
    return true;
}

/* Wait until partition p arrived, at most timeout_ns (0: the request's
 * bound). MPIX_ACC_DSUCCESS or an MPIX_ACC_DERR_* code. */
__device__ inline int mpix_acc_parrived_wait(const mpix_acc_dreq_t *r, int p, uint64_t timeout_ns)
{
    namespace d = mpix_acc_detail;
    int rc = d::check(r, p, p, 0);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    if (timeout_ns == 0)
        timeout_ns = r->timeout_ns;
    uint64_t t0 = d::now_ns();
    for (unsigned i = 0;; i++) {
        if (mpix_acc_parrived(r, p))
            return MPIX_ACC_DSUCCESS;
        if (timeout_ns && (i & 63) == 63 && d::now_ns() - t0 > timeout_ns)
            return d::fail(r, MPIX_ACC_DERR_TIMEOUT);
    }
}

/* Wait for partition p of a receive (one thread; sizeof(T) must be the
 * partition's size), at most timeout_ns (0: the request's bound), and
 * return it in *v. As mpix_acc_parrived_wait followed by a load of the
 * partition from the receive buffer, which it also fills; on the direct LL
 * path *v is made from the lines as they arrive, not reloaded. */
template <typename T>
__device__ int mpix_acc_parrived_wait_value(const mpix_acc_dreq_t *r, int p, T *v,
                                            uint64_t timeout_ns)
{
    namespace d = mpix_acc_detail;
    int rc = d::check(r, p, p, 0);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    if (r->part_bytes != sizeof(T))
        return d::fail(r, MPIX_ACC_DERR_SIZE);
    char *dst = r->buf + (uint64_t)p * r->part_bytes;
    d::words<T> wv;
    if (r->mode != MPIX_ACC_DREQ_DIRECT || r->bulk) {
        rc = mpix_acc_parrived_wait(r, p, timeout_ns);
        if (rc == MPIX_ACC_DSUCCESS) {
            for (int k = 0; k < wv.n; k++)
                wv.w[k] = d::word_at(dst, sizeof(T), (uint64_t)k);
            memcpy(v, &wv, sizeof(T));
        }
        return rc;
    }
    if (timeout_ns == 0)
        timeout_ns = r->timeout_ns;
    const uint64_t e = r->epoch;
    const uint64_t *lines = r->lines + (uint64_t)p * r->line_stride;
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        /* every line loaded before any is looked at: one trip, not one
         * per line (a first version looked line by line: 2.71 us per
         * 8-byte hop against 1.76 for the warp-level calls, 2 x H100) */
        uint64_t x[d::words<T>::n];
#pragma unroll
        for (int k = 0; k < wv.n; k++)
            x[k] = d::ld_vol(lines + k);
        bool all = true;
#pragma unroll
        for (int k = 0; k < wv.n; k++) {
            all = all && (int32_t)((uint32_t)(x[k] >> 32) - (uint32_t)e) >= 0;
            wv.w[k] = (uint32_t)x[k];
        }
        if (all)
            break;
        if (timeout_ns && (i & 63) == 63) {
            uint64_t t = d::now_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > timeout_ns)
                return d::fail(r, MPIX_ACC_DERR_TIMEOUT);
        }
    }
    memcpy(v, &wv, sizeof(T));
    /* into the receive buffer; like the group form it marks nothing (the
     * epoch's completion copies the partition from the slots again, the
     * same bytes), so no fence sits between the value and the caller */
    for (int k = 0; k < wv.n; k++)
        d::word_to(dst, sizeof(T), (uint64_t)k, wv.w[k]);
    return MPIX_ACC_DSUCCESS;
}

/* The same for a group (L as for pready): the group's threads share the
 * copy of the partition into the receive buffer. (The partition stays in
 * the slots until the epoch completes; the completion copies what no
 * parrived marked -- this one marks nothing, so it needs no fence.) */
template <mpix_acc_level L>
__device__ int mpix_acc_parrived_wait(const mpix_acc_dreq_t *r, int p, uint64_t timeout_ns)
{
    namespace d = mpix_acc_detail;
    int rc = d::check(r, p, p, 0);
    if (rc != MPIX_ACC_DSUCCESS)
        return rc;
    const unsigned tid = d::g_tid<L>(), n = d::g_size<L>();
    const uint64_t e = r->epoch;
    if (timeout_ns == 0)
        timeout_ns = r->timeout_ns;
    int ok = 1;
    if (r->mode == MPIX_ACC_DREQ_DIRECT && r->bulk) {
        /* the leader waits for the flag, the group copies the bytes */
        if (tid == 0)
            ok = d::wait_geq(&r->pflags[p], e, timeout_ns, true);
        ok = d::g_bcast<L>(ok);
        if (ok)
            d::grp_copy_in(r->buf + (uint64_t)p * r->part_bytes,
                           (const char *)(r->lines + (uint64_t)p * r->line_stride), r->part_bytes,
                           tid, n);
        /* the whole partition is in the buffer for every thread of the
         * group once this returns (the copy's chunks are not the caller's:
         * 14k wrong bytes under racecheck's timing at 060cbf4 without it) */
        d::g_sync<L>();
    } else if (r->mode == MPIX_ACC_DREQ_DIRECT) {
        const uint64_t *lines = r->lines + (uint64_t)p * r->line_stride;
        char *dst = r->buf + (uint64_t)p * r->part_bytes;
        /* each thread copies its lines as they arrive (a word is copied
         * only with its epoch's flag) until all of its lines are there */
        uint64_t t0 = 0;
        for (unsigned i = 0; !d::ll_take(lines, dst, r->part_bytes, (uint32_t)e, tid, n, true);
             i++)
            if (timeout_ns && (i & 63) == 63) {
                uint64_t t = d::now_ns();
                if (t0 == 0) {
                    t0 = t;
                } else if (t - t0 > timeout_ns) {
                    ok = 0;
                    break;
                }
            }
        if (L == MPIX_ACC_WARP)
            ok = __all_sync(0xffffffffu, ok);
        else if (L == MPIX_ACC_BLOCK)
            ok = __syncthreads_and(ok);
    } else {
        if (tid == 0)
            ok = d::wait_geq(&r->arrived[p], e, timeout_ns, true);
        ok = d::g_bcast<L>(ok);
        if (ok)
            __threadfence_system();
    }
    return ok ? MPIX_ACC_DSUCCESS : d::fail(r, MPIX_ACC_DERR_TIMEOUT);
}

#endif /* MPIX_ACC_DEVICE_CUH */
