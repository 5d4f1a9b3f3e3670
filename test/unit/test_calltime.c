/*
 * test_calltime.c - host-time histograms (util/calltime.c): percentiles of
 * known distributions within the bucket resolution, outer/inner/nesting
 * rules, off means nothing recorded, and concurrent recording loses no
 * count.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unit_check.h"
#include "util/calltime.h"

/* within one bucket: 1/8 of an octave (12.5 %) */
static void check_near(double got, double want, const char *what)
{
    CHECK(fabs(got - want) <= want * 0.125 + 1.0, "%s: %.1f, expected about %.1f", what, got, want);
}

static void test_percentiles(void)
{
    mxu_ct_reset();
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_SEND), 0);
    CHECK(mxu_ct_percentile_ns(MXU_CT_SEND, 0.5) == 0.0, "empty p50 not 0");
    /* 1..1000 us uniformly: p50 500 us, p99 990 us, mean 500.5 us */
    for (uint64_t i = 1; i <= 1000; i++)
        mxu_ct_record(MXU_CT_SEND, i * 1000);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_SEND), 1000);
    check_near(mxu_ct_percentile_ns(MXU_CT_SEND, 0.5), 500e3, "p50");
    check_near(mxu_ct_percentile_ns(MXU_CT_SEND, 0.99), 990e3, "p99");
    CHECK(fabs(mxu_ct_mean_ns(MXU_CT_SEND) - 500.5e3) < 1.0, "mean %.1f",
          mxu_ct_mean_ns(MXU_CT_SEND));
    /* skewed: 90 % at 2 us, 10 % at 50 us -> p50 2 us, p99 50 us */
    for (int i = 0; i < 900; i++)
        mxu_ct_record(MXU_CT_RECV, 2000);
    for (int i = 0; i < 100; i++)
        mxu_ct_record(MXU_CT_RECV, 50000);
    check_near(mxu_ct_percentile_ns(MXU_CT_RECV, 0.5), 2000, "skewed p50");
    check_near(mxu_ct_percentile_ns(MXU_CT_RECV, 0.99), 50000, "skewed p99");
    /* tiny and huge values land in the first and last buckets */
    mxu_ct_record(MXU_CT_WAKE, 0);
    mxu_ct_record(MXU_CT_WAKE, 3);
    CHECK(mxu_ct_percentile_ns(MXU_CT_WAKE, 0.5) <= 3.0, "small values");
    mxu_ct_record(MXU_CT_CU_LAUNCH, UINT64_MAX / 2);
    CHECK(mxu_ct_percentile_ns(MXU_CT_CU_LAUNCH, 0.5) > 1e11, "huge value clamped to the top");
    for (int k = 0; k < MXU_CT_COUNT; k++)
        CHECK(strcmp(mxu_ct_name((mxu_ct_kind_t)k), "?") != 0, "kind %d has no name", k);
    CHECK_STR(mxu_ct_name(MXU_CT_COUNT), "?");
}

static void spin_ns(uint64_t ns)
{
    uint64_t t0 = mxu_ct_now();
    while (mxu_ct_now() - t0 < ns)
        ;
}

static void test_scopes(void)
{
    mxu_ct_reset();
    mxu_ct_on = 0;
    uint64_t t = mxu_ct_begin();
    CHECK(t == 0, "off: begin must return 0");
    mxu_ct_end(MXU_CT_SEND, t);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_SEND), 0);
    CHECK_EQ_LL(mxu_ct_depth, 0);

    mxu_ct_on = 1;
    /* inner outside an outer call: not recorded */
    t = mxu_ct_inner_begin();
    CHECK(t == 0, "inner without outer must not time");
    mxu_ct_inner_end(MXU_CT_CU_LAUNCH, t);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_CU_LAUNCH), 0);

    /* outer with an inner and a nested outer: one outer, one inner */
    uint64_t to = mxu_ct_begin();
    spin_ns(20000);
    uint64_t ti = mxu_ct_inner_begin();
    spin_ns(10000);
    mxu_ct_inner_end(MXU_CT_CU_LAUNCH, ti);
    uint64_t tn = mxu_ct_begin();
    CHECK(tn == 1, "a nested outer call returns the sentinel");
    mxu_ct_end(MXU_CT_STREAM_WAIT, tn);
    mxu_ct_end(MXU_CT_SEND, to);
    CHECK_EQ_LL(mxu_ct_depth, 0);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_SEND), 1);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_STREAM_WAIT), 0);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_CU_LAUNCH), 1);
    CHECK(mxu_ct_mean_ns(MXU_CT_SEND) >= 30000, "outer %.0f ns < 30 us",
          mxu_ct_mean_ns(MXU_CT_SEND));
    CHECK(mxu_ct_mean_ns(MXU_CT_CU_LAUNCH) >= 10000 &&
              mxu_ct_mean_ns(MXU_CT_CU_LAUNCH) < mxu_ct_mean_ns(MXU_CT_SEND),
          "inner %.0f ns", mxu_ct_mean_ns(MXU_CT_CU_LAUNCH));

    /* a throttle wait is recorded and left out of the outer call's time */
    mxu_ct_reset();
    to = mxu_ct_begin();
    spin_ns(10000);
    ti = mxu_ct_inner_begin();
    spin_ns(200000);
    mxu_ct_inner_end(MXU_CT_THROTTLE, ti);
    mxu_ct_end(MXU_CT_RECV, to);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_THROTTLE), 1);
    CHECK(mxu_ct_mean_ns(MXU_CT_THROTTLE) >= 200000, "throttle %.0f",
          mxu_ct_mean_ns(MXU_CT_THROTTLE));
    CHECK(mxu_ct_mean_ns(MXU_CT_RECV) >= 10000 && mxu_ct_mean_ns(MXU_CT_RECV) < 100000,
          "outer %.0f ns must leave the 200 us throttle wait out", mxu_ct_mean_ns(MXU_CT_RECV));
    /* the next outer call starts with nothing left out */
    to = mxu_ct_begin();
    spin_ns(50000);
    mxu_ct_end(MXU_CT_SEND, to);
    CHECK(mxu_ct_mean_ns(MXU_CT_SEND) >= 50000, "second call %.0f ns", mxu_ct_mean_ns(MXU_CT_SEND));
    mxu_ct_on = 0;
}

#define NTHREADS 4
#define PER_THREAD 100000
static void *recorder(void *arg)
{
    uint64_t v = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++)
        mxu_ct_record(MXU_CT_RECV, v);
    return NULL;
}

static void test_concurrent(void)
{
    mxu_ct_reset();
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, recorder, (void *)(uintptr_t)(1000 * (i + 1))) == 0,
              "pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_LL(mxu_ct_count(MXU_CT_RECV), NTHREADS * PER_THREAD);
    CHECK(fabs(mxu_ct_mean_ns(MXU_CT_RECV) - 2500.0) < 1e-6, "mean %.3f",
          mxu_ct_mean_ns(MXU_CT_RECV));
    check_near(mxu_ct_percentile_ns(MXU_CT_RECV, 0.5), 2000, "p50 of 1,2,3,4 us");
}

int main(void)
{
    test_percentiles();
    test_scopes();
    test_concurrent();
    printf("test_calltime: OK\n");
    return 0;
}
