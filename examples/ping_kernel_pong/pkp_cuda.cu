/*
 * pkp_cuda.cu - the ping-kernel-pong kernel on the GPU: validate the received
 * message, produce the next one, and keep the kernel running for busy_ns
 * (thread 0 of block 0 spins on %globaltimer, the GPU's nanosecond clock).
 */
#include "pkp.h"

#include <cuda_runtime.h>

__device__ __forceinline__ unsigned long long pkp_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void pkp_kernel(pkp_args_t a)
{
    unsigned long long t0 = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        t0 = pkp_globaltimer();
    unsigned int bad = 0;
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.n; j += stride) {
        if (a.rbuf && a.rbuf[j] != pkp_pattern(a.rseed, j))
            bad++;
        if (a.sbuf)
            a.sbuf[j] = pkp_pattern(a.sseed, j);
    }
    if (bad)
        atomicAdd(a.errors, bad);
    if (blockIdx.x == 0 && threadIdx.x == 0 && a.busy_ns > 0) {
        unsigned long long ns = (unsigned long long)a.busy_ns;
        while (pkp_globaltimer() - t0 < ns) {
        }
    }
}

extern "C" void pkp_cuda_fn(void *arg, void *cudastream)
{
    const pkp_args_t *a = (const pkp_args_t *)arg;
    size_t blocks = (a->n + 1023) / 1024;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 1024)
        blocks = 1024;
    pkp_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)cudastream>>>(*a);
}
