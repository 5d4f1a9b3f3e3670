/*
 * waiter.c - event count on a Linux futex (see waiter.h).
 *
 * Lost wake-ups are impossible because the waiter registers itself
 * (waiters++) before it re-checks its condition, and the notifier publishes
 * its condition before it looks at `waiters`; a sequentially consistent
 * fence on each side orders the two (Dekker). If the notifier bumps `seq`
 * between prepare() and the futex call, FUTEX_WAIT sees a changed value and
 * returns at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util/waiter.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void mxu_event_init(mxu_event_t *e)
{
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&e->waiters, 0, memory_order_relaxed);
}

uint32_t mxu_event_prepare(mxu_event_t *e)
{
    atomic_fetch_add_explicit(&e->waiters, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&e->seq, memory_order_acquire);
}

void mxu_event_wait(mxu_event_t *e, uint32_t key, int64_t timeout_ns)
{
    if (atomic_load_explicit(&e->seq, memory_order_acquire) == key) {
        if (timeout_ns < 0) {
            futex(&e->seq, FUTEX_WAIT_PRIVATE, key, NULL);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)(timeout_ns / 1000000000);
            ts.tv_nsec = (long)(timeout_ns % 1000000000);
            futex(&e->seq, FUTEX_WAIT_PRIVATE, key, &ts);
        }
        /* EAGAIN (already notified), EINTR, ETIMEDOUT and spurious wake-ups
         * all end the wait: the caller re-checks its condition. */
    }
    atomic_fetch_sub_explicit(&e->waiters, 1, memory_order_release);
}

void mxu_event_cancel(mxu_event_t *e)
{
    atomic_fetch_sub_explicit(&e->waiters, 1, memory_order_release);
}

void mxu_event_notify(mxu_event_t *e)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&e->waiters, memory_order_relaxed) == 0)
        return;
    atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
    futex(&e->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

uint64_t mxu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
