/*
 * ipc_defer.c - see ipc_defer.h.
 *
 * Closes queued by the progress thread are made by a closer thread of their
 * own (started at the first one): a close that synchronizes the device then
 * only waits while the progress thread goes on releasing stream waits,
 * whatever the streams are doing, and the queue never waits for an idle
 * moment that a busy pipeline may not have.
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
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;  /* closer: items queued, or stop */
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;  /* drain: queue empty, none closing */
static mxa_ipc_deferred_t *deferred;
static size_t ndeferred, capdeferred;
static size_t nclosing;          /* taken by the closer, being closed */
static _Atomic size_t npending;  /* ndeferred + nclosing, readable without the lock */
static int closer_running, closer_stop;
static pthread_t closer_thread;
static _Atomic unsigned closed_total, failed_total;
static _Atomic(mxa_ipc_close_fn) closer_fn;
static _Thread_local int defer_here;

void mxa_ipc_defer_set_closer(mxa_ipc_close_fn fn) { atomic_store(&closer_fn, fn); }

void mxa_ipc_defer_thread_enter(int enabled) { defer_here = enabled != 0; }

/* Close items[0..n) (no lock held). */
static void close_batch(const mxa_ipc_deferred_t *items, size_t n)
{
    mxa_ipc_close_fn fn = atomic_load(&closer_fn);
    unsigned failed = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = fn ? fn(items[i].dptr, items[i].ctx) : -1;
        if (rc != 0) {
            failed++;
            MPIX_ACC_LOG(MX_LOG_WARN, "deferred cuIpcCloseMemHandle(0x%llx) failed (%d)",
                         (unsigned long long)items[i].dptr, rc);
        }
    }
    atomic_fetch_add(&closed_total, (unsigned)n);
    atomic_fetch_add(&failed_total, failed);
}

/* Close everything queued now: called and returns with the lock held,
 * which it drops while closing. */
static void close_queued(void)
{
    mxa_ipc_deferred_t *items = deferred;
    size_t n = ndeferred;
    deferred = NULL;
    ndeferred = capdeferred = 0;
    nclosing += n;
    pthread_mutex_unlock(&defer_lock);
    close_batch(items, n);
    free(items);
    pthread_mutex_lock(&defer_lock);
    nclosing -= n;
    atomic_store_explicit(&npending, ndeferred + nclosing, memory_order_release);
    if (ndeferred == 0 && nclosing == 0)
        pthread_cond_broadcast(&idle_cv);
}

static void *closer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&defer_lock);
    for (;;) {
        while (ndeferred == 0 && !closer_stop)
            pthread_cond_wait(&work_cv, &defer_lock);
        if (ndeferred == 0 && closer_stop)
            break;
        close_queued();
    }
    pthread_mutex_unlock(&defer_lock);
    return NULL;
}

int mxa_ipc_defer_close(uint64_t dptr, void *ctx)
{
    if (!defer_here)
        return 0;
    pthread_mutex_lock(&defer_lock);
    if (!closer_running) {
        closer_stop = 0;
        if (pthread_create(&closer_thread, NULL, closer_main, NULL) != 0) {
            pthread_mutex_unlock(&defer_lock);
            return 0; /* no closer: close now */
        }
        closer_running = 1;
    }
    if (ndeferred == capdeferred) {
        size_t cap = capdeferred ? 2 * capdeferred : 16;
        mxa_ipc_deferred_t *n = realloc(deferred, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&defer_lock);
            return 0; /* close now: a possible stall beats losing the close */
        }
        deferred = n;
        capdeferred = cap;
    }
    deferred[ndeferred++] = (mxa_ipc_deferred_t){dptr, ctx};
    atomic_store_explicit(&npending, ndeferred + nclosing, memory_order_release);
    pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&defer_lock);
    MPIX_ACC_LOG(MX_LOG_DEBUG, "cuIpcCloseMemHandle(0x%llx) on the progress thread handed to "
                 "the closer thread", (unsigned long long)dptr);
    return 1;
}

void mxa_ipc_defer_drain(void)
{
    pthread_mutex_lock(&defer_lock);
    while (ndeferred != 0 || nclosing != 0)
        pthread_cond_wait(&idle_cv, &defer_lock);
    pthread_mutex_unlock(&defer_lock);
}

unsigned mxa_ipc_defer_shutdown(unsigned *failed)
{
    unsigned before = atomic_load(&closed_total), bad_before = atomic_load(&failed_total);
    pthread_mutex_lock(&defer_lock);
    int running = closer_running;
    closer_stop = 1;
    pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&defer_lock);
    if (running)
        pthread_join(closer_thread, NULL); /* it closes what is queued first */
    pthread_mutex_lock(&defer_lock);
    closer_running = 0;
    closer_stop = 0;
    close_queued(); /* anything queued without a closer */
    pthread_mutex_unlock(&defer_lock);
    if (failed)
        *failed = atomic_load(&failed_total) - bad_before;
    return atomic_load(&closed_total) - before;
}

size_t mxa_ipc_defer_pending(void) { return atomic_load_explicit(&npending, memory_order_acquire); }
