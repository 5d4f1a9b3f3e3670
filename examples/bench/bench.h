/*
 * bench.h - mpixacc_bench's CUDA-only part: the "floor" variant, run by
 * rank 0 alone on two streams, one on its GPU and one on the next GPU (the
 * same GPU when only one is visible), timed on the GPU with events:
 *
 *   latency:   stream A copies n bytes to GPU B (cudaMemcpyPeerAsync) and
 *              writes a flag; stream B waits on the flag
 *              (cuStreamWaitValue64), copies the bytes back and writes a
 *              flag that stream A waits on. Half-RTT = time / (2 iters): the
 *              floor of any design in which each side's stream waits on a
 *              memory flag.
 *   bandwidth: back-to-back cudaMemcpyPeerAsync of n bytes, GB/s.
 *
 * Flags are 64-bit words in host-mapped pinned memory; the stream memory
 * operations come from the driver through cudaGetDriverEntryPointByVersion
 * (no link with libcuda). The data that comes back is compared with what
 * went out after every repetition.
 */
#ifndef MPIXACC_BENCH_H
#define MPIXACC_BENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prepare for messages up to max_bytes on the current device and the next
 * one. Returns 1, or 0 with the reason in why. desc describes the pair. */
int bench_floor_setup(size_t max_bytes, char *desc, size_t desclen, char *why, size_t whylen);
/* One repetition: half-RTT in microseconds / GB/s; the number of wrong bytes
 * in the data that came back goes to *errors. Returns 0, or -1 with why. */
int bench_floor_latency(size_t n, int iters, unsigned seed, double *half_us,
                        unsigned long long *errors, char *why, size_t whylen);
int bench_floor_bandwidth(size_t n, int iters, unsigned seed, double *gbs,
                          unsigned long long *errors, char *why, size_t whylen);
void bench_floor_teardown(void);

#ifdef __cplusplus
}
#endif

#endif
