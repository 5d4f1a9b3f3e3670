/*
 * waiter.h - sleeping and waking without lost wake-ups (an event count on a
 * futex), and a spin-then-sleep backoff helper.
 *
 * Waiting side:                         Notifying side:
 *   uint32_t key = mxu_event_prepare(e);   (publish the condition)
 *   if (condition) done;                   mxu_event_notify(e);
 *   mxu_event_wait(e, key, timeout_ns);
 *
 * notify() is cheap when nobody sleeps (one atomic load).
 */
#ifndef MXU_WAITER_H
#define MXU_WAITER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    _Atomic uint32_t seq;     /* bumped by notify when waiters exist */
    _Atomic uint32_t waiters; /* number of threads in prepare..wait */
} mxu_event_t;

void mxu_event_init(mxu_event_t *e);
uint32_t mxu_event_prepare(mxu_event_t *e);
/* Sleep until notified after prepare() or timeout (timeout_ns < 0: none).
 * Always ends the prepared wait, also on spurious wake-up. */
void mxu_event_wait(mxu_event_t *e, uint32_t key, int64_t timeout_ns);
/* End a prepared wait without sleeping. */
void mxu_event_cancel(mxu_event_t *e);
void mxu_event_notify(mxu_event_t *e); /* wake all */

/* Monotonic clock in nanoseconds. */
uint64_t mxu_now_ns(void);
/* CPU pause hint for spin loops. */
static inline void mxu_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
