/*
 * test_ipc_defer.c - the deferred IPC-close queue (accel/ipc_defer.h),
 * without CUDA: closes called on a deferring thread are queued (and report
 * success), others are not; a flush closes the queue oldest first with the
 * context of each call, counts refused closes, empties the queue; a thread
 * that entered with deferral off closes at once; the queue survives growth
 * and concurrent producers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "accel/ipc_defer.h"
#include "unit_check.h"

#define MAXCALLS 4096
static uint64_t closed_ptr[MAXCALLS];
static void *closed_ctx[MAXCALLS];
static int nclosed;

static int fake_close(uint64_t dptr, void *ctx)
{
    if (nclosed < MAXCALLS) {
        closed_ptr[nclosed] = dptr;
        closed_ctx[nclosed] = ctx;
    }
    nclosed++;
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

    /* this thread never entered: closes now */
    CHECK(mxa_ipc_defer_close(0x1000, NULL) == 0);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);
    unsigned failed = 99;
    CHECK_EQ_LL(mxa_ipc_defer_flush(&failed), 0);
    CHECK_EQ_LL(failed, 0);

    /* deferring: queued in order, flushed with their contexts */
    mxa_ipc_defer_thread_enter(1);
    CHECK(mxa_ipc_defer_close(0x2000, (void *)0x11) == 1);
    CHECK(mxa_ipc_defer_close(0xbad, (void *)0x22) == 1);
    CHECK(mxa_ipc_defer_close(0x3000, (void *)0x33) == 1);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 3);
    CHECK_EQ_LL(nclosed, 0);
    CHECK_EQ_LL(mxa_ipc_defer_flush(&failed), 3);
    CHECK_EQ_LL(failed, 1);
    CHECK_EQ_LL(nclosed, 3);
    CHECK(closed_ptr[0] == 0x2000 && closed_ctx[0] == (void *)0x11);
    CHECK(closed_ptr[1] == 0xbad && closed_ctx[1] == (void *)0x22);
    CHECK(closed_ptr[2] == 0x3000 && closed_ctx[2] == (void *)0x33);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);
    CHECK_EQ_LL(mxa_ipc_defer_flush(NULL), 0);

    /* deferral switched off on this thread */
    mxa_ipc_defer_thread_enter(0);
    CHECK(mxa_ipc_defer_close(0x4000, NULL) == 0);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 0);

    /* growth and concurrent producers (two deferring threads) */
    nclosed = 0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, deferring_thread, (void *)(intptr_t)((i + 1) * 100000)) ==
              0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_LL(mxa_ipc_defer_pending(), 2000);
    CHECK_EQ_LL(mxa_ipc_defer_flush(&failed), 2000);
    CHECK_EQ_LL(failed, 0);
    CHECK_EQ_LL(nclosed, 2000);
    long sum = 0;
    for (int i = 0; i < 2000; i++)
        sum += (long)closed_ptr[i];
    CHECK_EQ_LL(sum, 1000L * 100000 + 1000L * 200000 + 2L * (999L * 1000 / 2));

    TEST_PASS("test_ipc_defer");
}
