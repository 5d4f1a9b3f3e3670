/*
 * test_waiter.c - event count (util/waiter.c): timeouts, no lost wake-up
 * (ping-pong with unbounded waits under an alarm), wake-all, monotonic clock.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "unit_check.h"
#include "util/waiter.h"

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL test_waiter: timed out (lost wake-up?)\n";
    ssize_t r = write(2, msg, sizeof(msg) - 1);
    (void)r;
    _exit(1);
}

static void test_clock(void)
{
    uint64_t a = mxu_now_ns();
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    uint64_t b = mxu_now_ns();
    CHECK(b >= a + 2000000, "clock advanced only %llu ns", (unsigned long long)(b - a));
    CHECK(b - a < 2000000000ull);
}

static void test_basic(void)
{
    mxu_event_t e;
    mxu_event_init(&e);

    /* notify without waiters is cheap: seq does not move */
    mxu_event_notify(&e);
    CHECK_EQ_LL(atomic_load(&e.seq), 0);

    /* timeout */
    uint32_t key = mxu_event_prepare(&e);
    CHECK_EQ_LL(atomic_load(&e.waiters), 1);
    uint64_t t0 = mxu_now_ns();
    mxu_event_wait(&e, key, 20000000);
    uint64_t dt = mxu_now_ns() - t0;
    CHECK(dt >= 15000000 && dt < 2000000000ull, "timed wait took %llu ns", (unsigned long long)dt);
    CHECK_EQ_LL(atomic_load(&e.waiters), 0);

    /* a notify between prepare and wait is not lost */
    key = mxu_event_prepare(&e);
    mxu_event_notify(&e);
    CHECK_EQ_LL(atomic_load(&e.seq), 1);
    t0 = mxu_now_ns();
    mxu_event_wait(&e, key, -1); /* must return at once */
    CHECK(mxu_now_ns() - t0 < 1000000000ull);
    CHECK_EQ_LL(atomic_load(&e.waiters), 0);

    /* cancel ends a prepared wait */
    mxu_event_prepare(&e);
    mxu_event_cancel(&e);
    CHECK_EQ_LL(atomic_load(&e.waiters), 0);
}

/* ping-pong: each side waits (no timeout) for the counter to reach its turn */
#define ROUNDS 20000
static mxu_event_t ev;
static _Atomic int turn;

static void wait_for(int value)
{
    for (int spin = 0; spin < 50; spin++) {
        if (atomic_load_explicit(&turn, memory_order_acquire) >= value)
            return;
        mxu_cpu_relax();
    }
    while (atomic_load_explicit(&turn, memory_order_acquire) < value) {
        uint32_t key = mxu_event_prepare(&ev);
        if (atomic_load_explicit(&turn, memory_order_acquire) >= value) {
            mxu_event_cancel(&ev);
            return;
        }
        mxu_event_wait(&ev, key, -1);
    }
}

static void *pong(void *arg)
{
    (void)arg;
    for (int i = 1; i < 2 * ROUNDS; i += 2) {
        wait_for(i);
        atomic_store_explicit(&turn, i + 1, memory_order_release);
        mxu_event_notify(&ev);
    }
    return NULL;
}

static void test_pingpong(void)
{
    mxu_event_init(&ev);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, pong, NULL) == 0);
    for (int i = 0; i < 2 * ROUNDS; i += 2) {
        wait_for(i);
        atomic_store_explicit(&turn, i + 1, memory_order_release);
        mxu_event_notify(&ev);
    }
    wait_for(2 * ROUNDS);
    pthread_join(th, NULL);
    CHECK_EQ_LL(atomic_load(&turn), 2 * ROUNDS);
    CHECK_EQ_LL(atomic_load(&ev.waiters), 0);
}

/* wake-all: several sleepers, one notify */
static _Atomic int flag;
static _Atomic int woken;

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&flag, memory_order_acquire)) {
        uint32_t key = mxu_event_prepare(&ev);
        if (atomic_load_explicit(&flag, memory_order_acquire)) {
            mxu_event_cancel(&ev);
            break;
        }
        mxu_event_wait(&ev, key, -1);
    }
    atomic_fetch_add(&woken, 1);
    return NULL;
}

static void test_wake_all(void)
{
    mxu_event_init(&ev);
    enum { N = 4 };
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&th[i], NULL, sleeper, NULL) == 0);
    /* let them go to sleep (not required for correctness) */
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    atomic_store_explicit(&flag, 1, memory_order_release);
    mxu_event_notify(&ev);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_LL(atomic_load(&woken), N);
    CHECK_EQ_LL(atomic_load(&ev.waiters), 0);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    test_clock();
    test_basic();
    test_pingpong();
    test_wake_all();
    TEST_PASS("test_waiter");
}
