/*
 * bench_ki.h - mpixacc_bench's "ki" variant (bench_ki.cu): kernel-initiated
 * partitioned communication. Ranks 0 and 1 (role 0/1) call each function
 * together with the same sizes. Returns 0, or -1 with the reason in why.
 */
#ifndef MPIXACC_BENCH_KI_H
#define MPIXACC_BENCH_KI_H

#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* iters round trips of n bytes in one epoch (one kernel per rank); rank 0
 * copies the last answer into rbuf. */
int bench_ki_latency(MPI_Comm comm, int role, void *stream, const void *sbuf, void *rbuf, size_t n,
                     int iters, char *why, size_t len);
/* windows epochs of `window` messages of n bytes from rank 0 into rank 1's
 * rbuf (a window of them). */
int bench_ki_bandwidth(MPI_Comm comm, int role, void *stream, const void *sbuf, void *rbuf,
                       size_t n, int window, int windows, char *why, size_t len);
/* ki-value: the same with the message as a value (n: 4, 8, 12 or 16) */
int bench_ki_value_ok(size_t n);
int bench_ki_latency_value(MPI_Comm comm, int role, void *stream, const void *sbuf, void *rbuf,
                           size_t n, int iters, char *why, size_t len);
int bench_ki_bandwidth_value(MPI_Comm comm, int role, void *stream, const void *sbuf, void *rbuf,
                             size_t n, int window, int windows, char *why, size_t len);
/* "direct" or "proxy": the library's protocol of the last requests */
const char *bench_ki_protocol(void);
void bench_ki_teardown(void);

#ifdef __cplusplus
}
#endif

#endif
