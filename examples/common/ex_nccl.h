/*
 * ex_nccl.h - NCCL point-to-point (and Allreduce) between ranks 0 and 1, for
 * the examples'
 * and benchmarks' "nccl" variants.
 *
 * Built when the CUDA build finds nccl.h; libnccl.so.2 is loaded at run
 * time (dlopen), so the binaries run where NCCL is absent and the variant
 * is skipped with the reason. Other builds get the same functions, which
 * report that NCCL is not available.
 */
#ifndef EX_NCCL_H
#define EX_NCCL_H

#include <stddef.h>

/* Collective over MPI_COMM_WORLD (every rank calls it): load NCCL on every
 * rank and make a 2-rank NCCL communicator of the ranks with role 0 and 1
 * (role -1: not taking part). is_device: the caller computes on a CUDA
 * device. Returns 1 when the variant can run; else 0 and the reason in why.
 * NCCL refusing two ranks on one GPU is such a reason, not an error. */
int ex_nccl_setup(int is_device, int role, char *why, size_t whylen);

/* Stream-ordered send / receive of n bytes to / from the other role, on
 * the cudaStream_t `stream`. Die on an NCCL error. */
void ex_nccl_send(const void *buf, size_t n, void *stream);
void ex_nccl_recv(void *buf, size_t n, void *stream);

/* Stream-ordered ncclAllReduce of count MPI_INT32-like elements (sum)
 * over the two roles' communicator. */
void ex_nccl_allreduce_i32(const void *sbuf, void *rbuf, size_t count, void *stream);

/* Group a send and a receive (ncclGroupStart / ncclGroupEnd) so that both
 * can be posted before either completes (bandwidth windows). */
void ex_nccl_group_start(void);
void ex_nccl_group_end(void);

/* Destroy the communicator (collective over the two roles, no-op else). */
void ex_nccl_teardown(void);

#endif
