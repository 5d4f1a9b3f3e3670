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
