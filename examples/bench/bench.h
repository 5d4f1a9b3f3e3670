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
 *
 * Beside the latency floor, two kernel floors (latency only), the same data
 * path (A's buffer -> B -> back to A) with kernels doing the work:
 *
 *   spin:      each hop is a copy kernel (one block for small messages, up to
 *              2 blocks per SM for large ones) that stores the payload into
 *              the peer GPU's memory and then a flag (st.release.sys, after a
 *              system fence); the receiver is a 1-thread kernel on its stream
 *              spinning on the flag with ld.acquire.sys, after which the reply
 *              hop is issued: the floor of a design whose receive is a
 *              polling kernel instead of cuStreamWaitValue64.
 *   fused:     one kernel per hop: it spins on the incoming flag, then writes
 *              the reply (payload + flag) itself.
 *
 * Both need peer access between the two GPUs (or one GPU). Their round trips
 * run in segments of 32 behind a host-opened gate (a stream wait on a
 * host-mapped word), so that only GPU execution is timed, not the ~3 us of
 * host time per kernel launch; the hops alternate between two patterns and
 * the last reply of every segment is compared in full with what went out.
 * Every spin gives up after 2 s: the repetition then fails with the reason.
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
/* The kernel floors (after bench_floor_setup returned 1). */
enum { BENCH_FLOOR_SPIN = 0, BENCH_FLOOR_FUSED = 1 };
/* 1 with a description of mode in text, or 0 with the reason it cannot run. */
int bench_floor_kernel_available(int mode, char *text, size_t len);
/* One repetition of mode's latency, as bench_floor_latency. -1 (with why)
 * after a spin that gave up or a CUDA error: mode is unusable after it. */
int bench_floor_kernel_latency(int mode, size_t n, int iters, unsigned seed, double *half_us,
                               unsigned long long *errors, char *why, size_t whylen);
void bench_floor_teardown(void);

#ifdef __cplusplus
}
#endif

#endif
