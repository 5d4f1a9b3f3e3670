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

extern "C" __global__ void mxa_sx_send_kernel(mxa_sx_send_desc_t d)
{
    __shared__ int s_free;
    mxa_sx_hdr_t *h = (mxa_sx_hdr_t *)(size_t)d.slot;
    /* The claim touches only the link's control words and the slot. It may
     * run before the kernel ahead has finished unless that kernel could be
     * this slot's previous send step (same stream): then after it. */
    if (!d.early_claim)
        mxa_pdl_wait();
    if (threadIdx.x == 0) {
        s_free = mxa_sx_slot_claim(&d);
        if (s_free)
            mxa_sx_slot_open(h);
    }
    __syncthreads();
    mxa_pdl_wait(); /* before reading the buffer the kernel ahead may write */
    int in_ring = s_free;
    unsigned char *dst =
        in_ring ? (unsigned char *)h + MXA_SX_HDR_BYTES : (unsigned char *)(size_t)d.bounce;
    mxa_sx_copy(dst, (const unsigned char *)(size_t)d.src, d.bytes);
    /* The block's payload stores happen before thread 0's fence (barrier),
     * whose release patterns below publish them (PTX fences are
     * cumulative): no fence per thread here. */
    __syncthreads();
    if (threadIdx.x == 0) {
        if (in_ring)
            mxa_sx_slot_publish(h, &d);
        mxa_sx_record_finish((mxa_sx_record_t *)(size_t)d.record, d.bytes,
                             in_ring ? MXA_SX_SENT : MXA_SX_BOUNCED, (int32_t)(d.n & 0x7fffffff));
        /* after the record's release in this thread's order */
        if (d.trigger_word)
            mxa_sx_store_release((uint64_t *)(size_t)d.trigger_word, d.trigger_seq);
    }
}

extern "C" __global__ void mxa_sx_recv_kernel(mxa_sx_recv_params_t p)
{
    __shared__ int s_slot;
    __shared__ uint64_t s_n, s_bytes, s_src;
    __shared__ int s_outcome;
    /* a send step behind this one may start now (it waits for this grid
     * before it reads anything this grid writes) */
    mxa_pdl_launch_dependents();
    const mxa_sx_recv_desc_t *d = &p.d[blockIdx.x];
    mxa_sx_record_t *rec = (mxa_sx_record_t *)(size_t)d->record;
    if (threadIdx.x < 32) {
        unsigned lane = threadIdx.x;
        if (lane == 0 && d->after_word)
            mxa_wait_geq((const mxa_u64 *)(size_t)d->after_word, d->after_seq);
        __syncwarp();
        uint64_t start = mxa_sx_now_ns();
        int slot = -1, outcome = -1;
        uint64_t n = 0, bytes = 0, src = 0;
        for (unsigned iter = 0;; iter++) {
            int hit = 0;
            uint64_t hn = 0, hb = 0;
            for (unsigned s = lane; s < d->nslots && !hit; s += 32) {
                const mxa_sx_hdr_t *h =
                    (const mxa_sx_hdr_t *)(size_t)(d->ring + (uint64_t)s * d->slot_stride);
                if (mxa_sx_slot_match(h, d->ctx, d->tag, d->k, &hn, &hb)) {
                    hit = 1;
                    slot = (int)s;
                }
            }
            unsigned mask = __ballot_sync(0xffffffffu, hit);
            if (mask) {
                int src = __ffs(mask) - 1;
                slot = __shfl_sync(0xffffffffu, slot, src);
                n = __shfl_sync(0xffffffffu, hn, src);
                bytes = __shfl_sync(0xffffffffu, hb, src);
                outcome = bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED;
                break;
            }
            /* The record's word every scan: a message that came by UCX
             * (larger than a slot, or its slot was taken) is announced
             * there, and a scan is a bus round trip when the ring is host
             * memory (checked every 32 scans before: 1 MiB on an SX
             * communicator took 5 x the plain UCX path's time, 2 x H200 at
             * e833f5d). The abort word and the clock every 32 scans. */
            {
                int o = -1;
                if (lane == 0) {
                    uint64_t desc = mxa_sx_load_acquire(&rec->desc);
                    if (desc == MXA_SX_DESC_COPY) { /* by UCX into host staging */
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
                if (o >= 0) {
                    outcome = o;
                    slot = -1;
                    break;
                }
            }
        }
        if (lane == 0) {
            s_slot = slot;
            s_n = n;
            s_bytes = bytes;
            s_src = src;
            s_outcome = outcome;
        }
    }
    __syncthreads();
    int outcome = s_outcome;
    uint64_t take = 0;
    if (outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED) {
        mxa_sx_fence(); /* lane 0's acquire of the flag, for every thread's loads */
        take = s_bytes <= d->cap ? s_bytes : d->cap;
        const unsigned char *src =
            s_slot >= 0
                ? (const unsigned char *)(size_t)(d->ring + (uint64_t)s_slot * d->slot_stride) +
                      MXA_SX_HDR_BYTES
                : (const unsigned char *)(size_t)s_src; /* DESC_COPY: staging */
        mxa_sx_copy((unsigned char *)(size_t)d->dst, src, take);
    }
    /* the copy's stores happen before thread 0's consume and record
     * releases (barrier; they fence first) */
    __syncthreads();
    if (threadIdx.x == 0) {
        if ((outcome == MXA_SX_OK || outcome == MXA_SX_TRUNCATED) && s_slot >= 0)
            mxa_sx_consume((uint64_t *)(size_t)d->consumed, (unsigned)s_slot, s_n);
        mxa_sx_record_finish(rec, take, outcome, s_slot);
    }
}
