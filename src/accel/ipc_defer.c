/*
 * ipc_defer.c - see ipc_defer.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "accel/ipc_defer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/log.h"

typedef struct {
    uint64_t dptr;
    void *ctx;
} mxa_ipc_deferred_t;

static pthread_mutex_t defer_lock = PTHREAD_MUTEX_INITIALIZER;
static mxa_ipc_deferred_t *deferred;
static size_t ndeferred, capdeferred;
static _Atomic size_t npending; /* ndeferred, readable without the lock */
static _Atomic(mxa_ipc_close_fn) closer;
static _Thread_local int defer_here;

void mxa_ipc_defer_set_closer(mxa_ipc_close_fn fn) { atomic_store(&closer, fn); }

void mxa_ipc_defer_thread_enter(int enabled) { defer_here = enabled != 0; }

int mxa_ipc_defer_close(uint64_t dptr, void *ctx)
{
    if (!defer_here)
        return 0;
    pthread_mutex_lock(&defer_lock);
    if (ndeferred == capdeferred) {
        size_t cap = capdeferred ? 2 * capdeferred : 16;
        mxa_ipc_deferred_t *n = realloc(deferred, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&defer_lock);
            return 0; /* close now: a possible stall beats a leak that grows */
        }
        deferred = n;
        capdeferred = cap;
    }
    deferred[ndeferred++] = (mxa_ipc_deferred_t){dptr, ctx};
    atomic_store_explicit(&npending, ndeferred, memory_order_release);
    pthread_mutex_unlock(&defer_lock);
    MPIX_ACC_LOG(MX_LOG_DEBUG, "cuIpcCloseMemHandle(0x%llx) on the progress thread deferred",
                 (unsigned long long)dptr);
    return 1;
}

unsigned mxa_ipc_defer_flush(unsigned *failed)
{
    unsigned closed = 0, bad = 0;
    if (atomic_load_explicit(&npending, memory_order_acquire) == 0) {
        if (failed)
            *failed = 0;
        return 0;
    }
    pthread_mutex_lock(&defer_lock);
    mxa_ipc_close_fn fn = atomic_load(&closer);
    for (size_t i = 0; i < ndeferred; i++) {
        int rc = fn ? fn(deferred[i].dptr, deferred[i].ctx) : -1;
        if (rc != 0) {
            bad++;
            MPIX_ACC_LOG(MX_LOG_WARN, "deferred cuIpcCloseMemHandle(0x%llx) failed (%d)",
                         (unsigned long long)deferred[i].dptr, rc);
        }
        closed++;
    }
    ndeferred = 0;
    atomic_store_explicit(&npending, 0, memory_order_release);
    pthread_mutex_unlock(&defer_lock);
    if (failed)
        *failed = bad;
    return closed;
}

size_t mxa_ipc_defer_pending(void) { return atomic_load_explicit(&npending, memory_order_acquire); }
