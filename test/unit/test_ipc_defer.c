/*
 * test_ipc_defer.c - the deferred IPC-close queue (accel/ipc_defer.h),
 * without CUDA: closes called on a deferring thread are handed to the
 * closer thread (and report success), others are not; the closer closes
 * them in order with the context of each call, on a thread of its own, while
 * the deferring thread goes on (a close that blocks does not block it);
 * refused closes are counted; shutdown stops the closer after closing what
 * is queued, and deferral works again afterwards; concurrent producers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "accel/ipc_defer.h"
#include "unit_check.h"

#define MAXCALLS 4096
static uint64_t closed_ptr[MAXCALLS];
static void *closed_ctx[MAXCALLS];
static pthread_t closed_by[MAXCALLS];
static _Atomic int nclosed;
static _Atomic int gate_open = 1; /* 0: a close of 0xb10c blocks until it opens */

static int fake_close(uint64_t dptr, void *ctx)
{
    int i = atomic_fetch_add(&nclosed, 1);
    if (i < MAXCALLS) {
        closed_ptr[i] = dptr;
        closed_ctx[i] = ctx;
        closed_by[i] = pthread_self();
    }
    while (dptr == 0xb10c && !atomic_load(&gate_open))
        usleep(1000);
    return dptr == 0xbad ? 201 : 0; /* 201: a driver error code */
}

static void *deferring_thread(void *arg)
{
    int base = (int)(intptr_t)arg;
    mxa_ipc_defer_thread_enter(1);
    for (int i = 0; i < 1000; i++)
        CHECK(mxa_ipc_defer_close((uint64_t)(base + i), (void *)(intptr_t)base) == 1);
    return NULL;
}

int main(void)
{
    mxa_ipc_defer_set_closer(fake_close);
    unsigned failed = 99;

    /* this thread never entered: closes now (the caller does it) */
    CHECK(mxa_ipc_defer_close(0x1000, NULL) == 0);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);
    CHECK_EQ_LL(mxa_ipc_defer_shutdown(&failed), 0);
    CHECK_EQ_LL(failed, 0);

    /* deferring: closed in order, with their contexts, by another thread;
     * a close that blocks does not block the deferring thread */
    mxa_ipc_defer_thread_enter(1);
    atomic_store(&gate_open, 0);
    CHECK(mxa_ipc_defer_close(0xb10c, (void *)0x11) == 1);
    CHECK(mxa_ipc_defer_close(0xbad, (void *)0x22) == 1);
    CHECK(mxa_ipc_defer_close(0x3000, (void *)0x33) == 1);
    for (int i = 0; i < 2000 && atomic_load(&nclosed) == 0; i++)
        usleep(1000);
    CHECK_EQ_LL(atomic_load(&nclosed), 1); /* the closer is inside the blocked close */
    CHECK(mxa_ipc_defer_pending() >= 2);
    CHECK(mxa_ipc_defer_close(0x4000, (void *)0x44) == 1); /* still accepted, at once */
    atomic_store(&gate_open, 1);
    mxa_ipc_defer_drain();
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);
    CHECK_EQ_LL(atomic_load(&nclosed), 4);
    CHECK(closed_ptr[0] == 0xb10c && closed_ctx[0] == (void *)0x11);
    CHECK(closed_ptr[1] == 0xbad && closed_ctx[1] == (void *)0x22);
    CHECK(closed_ptr[2] == 0x3000 && closed_ctx[2] == (void *)0x33);
    CHECK(closed_ptr[3] == 0x4000 && closed_ctx[3] == (void *)0x44);
    for (int i = 0; i < 4; i++)
        CHECK(!pthread_equal(closed_by[i], pthread_self()));

    /* shutdown after everything was closed: nothing left, the closer stops */
    CHECK_EQ_LL(mxa_ipc_defer_shutdown(&failed), 0);

    /* deferral switched off on this thread */
    mxa_ipc_defer_thread_enter(0);
    CHECK(mxa_ipc_defer_close(0x5000, NULL) == 0);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);

    /* after a shutdown, a new closer: growth and two concurrent producers;
     * shutdown closes whatever is still queued and counts refusals */
    atomic_store(&nclosed, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, deferring_thread, (void *)(intptr_t)((i + 1) * 100000)) ==
              0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    mxa_ipc_defer_thread_enter(1);
    CHECK(mxa_ipc_defer_close(0xbad, NULL) == 1);
    unsigned n = mxa_ipc_defer_shutdown(&failed);
    CHECK(n <= 2001);
    CHECK_EQ_LL(atomic_load(&nclosed), 2001);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);
    long sum = 0;
    for (int i = 0; i < 2001; i++)
        sum += closed_ptr[i] == 0xbad ? 0 : (long)closed_ptr[i];
    CHECK_EQ_LL(sum, 1000L * 100000 + 1000L * 200000 + 2L * (999L * 1000 / 2));

    TEST_PASS("test_ipc_defer");
}
