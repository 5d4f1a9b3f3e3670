/*
 * calltime.c - per-kind histograms of host time (calltime.h).
 */
#include "util/calltime.h"

#include <stdatomic.h>

int mxu_ct_on;
_Thread_local int mxu_ct_depth;
_Thread_local uint64_t mxu_ct_left_out_ns;

/* bucket i < 8: i ns; else e = i/8 + 2, m = i%8: [(8+m) << (e-3), (9+m) << (e-3)) */
#define MXU_CT_BUCKETS 320

static struct {
    _Atomic uint64_t n, sum_ns;
    _Atomic uint64_t hist[MXU_CT_BUCKETS];
} ct[MXU_CT_COUNT];

static const char *const ct_names[MXU_CT_COUNT] = {"send",
                                                   "receive",
                                                   "stream wait",
                                                   "CUDA launch of a send step",
                                                   "CUDA launch of a receive step",
                                                   "CUDA stream point",
                                                   "progress-thread wake-up",
                                                   "CUDA pointer query",
                                                   "stream capture query",
                                                   "request handle",
                                                   "packed-buffer set-up",
                                                   "reap",
                                                   "engine submit",
                                                   "throttle wait"};

const char *mxu_ct_name(mxu_ct_kind_t k) { return (unsigned)k < MXU_CT_COUNT ? ct_names[k] : "?"; }

static unsigned ct_bucket(uint64_t ns)
{
    if (ns < 8)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 3 */
    unsigned m = (unsigned)(ns >> (e - 3)) & 7u;
    unsigned i = (e - 2) * 8 + m;
    return i < MXU_CT_BUCKETS ? i : MXU_CT_BUCKETS - 1;
}

/* the middle of bucket i */
static double ct_bucket_mid(unsigned i)
{
    if (i < 8)
        return (double)i;
    unsigned e = i / 8 + 2, m = i % 8;
    double lo = (double)((8ull + m) << (e - 3)), width = (double)(1ull << (e - 3));
    return lo + width / 2;
}

void mxu_ct_record(mxu_ct_kind_t k, uint64_t ns)
{
    if ((unsigned)k >= MXU_CT_COUNT)
        return;
    atomic_fetch_add_explicit(&ct[k].n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ct[k].sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&ct[k].hist[ct_bucket(ns)], 1, memory_order_relaxed);
}

uint64_t mxu_ct_count(mxu_ct_kind_t k)
{
    return (unsigned)k < MXU_CT_COUNT ? atomic_load(&ct[k].n) : 0;
}

double mxu_ct_mean_ns(mxu_ct_kind_t k)
{
    uint64_t n = mxu_ct_count(k);
    return n ? (double)atomic_load(&ct[k].sum_ns) / (double)n : 0.0;
}

double mxu_ct_percentile_ns(mxu_ct_kind_t k, double p)
{
    uint64_t n = mxu_ct_count(k);
    if (n == 0)
        return 0.0;
    /* the smallest bucket whose cumulative count reaches ceil(p * n) */
    uint64_t want = (uint64_t)(p * (double)n);
    if ((double)want < p * (double)n)
        want++;
    if (want < 1)
        want = 1;
    uint64_t cum = 0;
    for (unsigned i = 0; i < MXU_CT_BUCKETS; i++) {
        cum += atomic_load_explicit(&ct[k].hist[i], memory_order_relaxed);
        if (cum >= want)
            return ct_bucket_mid(i);
    }
    return ct_bucket_mid(MXU_CT_BUCKETS - 1);
}

void mxu_ct_reset(void)
{
    for (int k = 0; k < MXU_CT_COUNT; k++) {
        atomic_store(&ct[k].n, 0);
        atomic_store(&ct[k].sum_ns, 0);
        for (unsigned i = 0; i < MXU_CT_BUCKETS; i++)
            atomic_store(&ct[k].hist[i], 0);
    }
}
