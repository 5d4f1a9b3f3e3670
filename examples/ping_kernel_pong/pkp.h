/*
 * pkp.h - the ping-kernel-pong "kernel": check the received message, write
 * the message to send, and stay busy for a given time. Host function
 * (pkp_host.c) and CUDA kernel (pkp_cuda.cu) with the same arguments.
 */
#ifndef PKP_H
#define PKP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PKP_HD __host__ __device__
#else
#define PKP_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const unsigned char *rbuf; /* received message to validate, NULL: none */
    uint32_t rseed;            /* its expected pattern */
    unsigned char *sbuf;       /* message to produce, NULL: none */
    uint32_t sseed;
    size_t n;             /* bytes */
    double busy_ns;       /* the kernel runs at least this long */
    unsigned int *errors; /* count of wrong bytes (backend memory) */
} pkp_args_t;

/* Byte j of the message with pattern seed s. */
PKP_HD static inline unsigned char pkp_pattern(uint32_t s, size_t j)
{
    uint32_t x = s * 2654435761u + (uint32_t)j * 40503u + (uint32_t)(j >> 16);
    return (unsigned char)(x ^ (x >> 13) ^ (x >> 24));
}

/* Seed of the message sent by `sender` in iteration `iter` of run `run`. */
static inline uint32_t pkp_seed(int run, int iter, int sender)
{
    return ((uint32_t)run << 24) ^ ((uint32_t)iter * 2u + (uint32_t)sender + 1u);
}

void pkp_host_fn(void *arg);                   /* host-stream kernel */
void pkp_cuda_fn(void *arg, void *cudastream); /* CUDA kernel launch */

#ifdef __cplusplus
}
#endif

#endif
