/*
 * pkp_host.c - the ping-kernel-pong kernel as a host function (run on a host
 * stream's thread): validate, produce, then busy-wait until busy_ns elapsed.
 */
#define _GNU_SOURCE
#include "pkp.h"

#include <time.h>

static double pkp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

void pkp_host_fn(void *arg)
{
    const pkp_args_t *a = arg;
    double t0 = pkp_now_ns();
    unsigned int bad = 0;
    if (a->rbuf)
        for (size_t j = 0; j < a->n; j++)
            bad += a->rbuf[j] != pkp_pattern(a->rseed, j);
    if (a->sbuf)
        for (size_t j = 0; j < a->n; j++)
            a->sbuf[j] = pkp_pattern(a->sseed, j);
    if (bad)
        __atomic_fetch_add(a->errors, bad, __ATOMIC_RELAXED);
    while (pkp_now_ns() - t0 < a->busy_ns) {
    }
}
