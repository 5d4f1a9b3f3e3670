/*
 * host.c - host streams (MPIX_Acc_Hoststream_create(3)): in-order host queues, each executed by
 * one library-owned thread.
 *
 * A host stream is a host_stream_t that embeds the mxa_stream_t as its first
 * member; the user's handle is its address. Live streams are registered in a
 * locked hash map keyed by that address, so a handle is validated by looking
 * its VALUE up - an unknown pointer is never dereferenced.
 *
 * Producers (any thread) push items on a lock-free MPSC queue and poke the
 * stream thread's event. Items, executed strictly in queue order:
 *   LAUNCH  fn(arg)
 *   TRIGGER trigger_word = seq (release), then the engine's notify callback
 *   WAIT    block until release_word >= seq (the engine's progress thread
 *           calls backend->release(s, seq), which stores and wakes us)
 *   MARK    synchronize: set the caller's flag (the item lives on the
 *           synchronizing thread's stack)
 *   STOP    end of the thread (free / shutdown)
 *
 * The stream thread never busy-waits for long: when idle, or blocked at a
 * WAIT, it spins MPIX_ACC_WAIT_SPIN_US microseconds and then sleeps on a
 * futex-based event (util/waiter.h).
 *
 * Lifetime. mxa_host_stream_free() synchronizes first (all enqueued work,
 * communication included: the queue drains and ops_in_flight drops to 0),
 * then unregisters the handle, stops and joins the thread, runs the engine's
 * free hook, and releases the memory. Like MPI, freeing a stream whose wait
 * depends on an operation that never completes blocks until it completes
 * (MPI_Finalize's drain cancels such operations and releases their waits);
 * a warning is logged every 10 s while it waits. mxa_host_shutdown()
 * (library finalize) stops every remaining stream without waiting for
 * communication: pending waits are abandoned with a warning.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "accel/accel.h"
#include "accel/seq_word.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/calltime.h"
#include "util/hashmap.h"
#include "util/settings.h"
#include "util/log.h"
#include "util/mpsc.h"
#include "util/waiter.h"

#define HOST_STREAM_MAGIC 0x4d58485354524d21ull /* "MXHSTRM!" */
#define OPS_POLL_MAX_SLEEP_NS 50000

typedef enum { ITEM_LAUNCH, ITEM_TRIGGER, ITEM_WAIT, ITEM_MARK, ITEM_STOP } item_kind_t;

typedef struct host_item {
    mxu_mpsc_node_t node;
    item_kind_t kind;
    union {
        struct {
            void (*fn)(void *);
            void *arg;
        } launch;
        uint64_t seq;
        _Atomic int *done; /* MARK */
    } u;
} host_item_t;

typedef struct host_stream {
    mxa_stream_t s; /* first: the handle is the address of the host_stream_t */
    uint64_t magic;
    pthread_t thread;
    uint64_t spin_ns;
    _Atomic int freeing;   /* free or shutdown has claimed the stream */
    _Atomic int aborting;  /* shutdown: abandon waits, stop waiting for ops */
    _Atomic int releasers; /* release() calls in progress (free waits them out) */
    struct host_stream *list_next, *list_prev;
    host_item_t stop_item;

    alignas(64) mxu_mpsc_t queue;
    mxu_event_t work_ev; /* producers -> stream thread: items queued */

    alignas(64) mxu_event_t release_ev; /* progress thread -> stream thread */
    mxu_event_t done_ev;                /* stream thread -> synchronizers */

    alignas(64) _Atomic uint64_t trigger_word;
    alignas(64) _Atomic uint64_t release_word;

    /* capture into a host graph (mxa_host_capture_begin): launches are
     * recorded instead of run; cap_broken: a call that cannot be captured
     * came (cap_why says which), the end of the capture fails */
    pthread_mutex_t cap_lock;
    _Atomic int capturing;
    mxa_host_graph_t *cap;
    int cap_broken;
    char cap_why[200];
} host_stream_t;

/* A recorded list of launches, replayed in order onto a stream by each
 * launch of the graph (MPIX_Acc_Hoststream_begin_capture(3)). */
typedef struct {
    void (*fn)(void *);
    void *arg;
} host_entry_t;
struct mxa_host_graph {
    host_entry_t *e;
    size_t n, cap;
    _Atomic long inflight; /* launches whose last entry has not run */
};

/* Registry: map for lookups (its own lock), list for iteration (list_lock).
 * Lock order: list_lock, then the map's lock. */
static mxu_locked_map_t registry = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static host_stream_t *list_head;
static _Atomic(mxa_stream_free_fn) free_hook;

static const mxa_backend_t host_backend;
static int capture_record(host_stream_t *hs, void (*fn)(void *), void *arg);

static inline host_stream_t *hs_of(mxa_stream_t *s) { return (host_stream_t *)s; }

static void push_item(host_stream_t *hs, host_item_t *it)
{
    mxu_mpsc_push(&hs->queue, &it->node);
    mxu_event_notify(&hs->work_ev);
}

static mxu_status_t push_new(host_stream_t *hs, item_kind_t kind, uint64_t seq, void (*fn)(void *),
                             void *arg)
{
    host_item_t *it = malloc(sizeof(*it));
    if (it == NULL)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "host stream %p: out of memory enqueuing work", (void *)hs);
    it->kind = kind;
    if (kind == ITEM_LAUNCH) {
        it->u.launch.fn = fn;
        it->u.launch.arg = arg;
    } else {
        it->u.seq = seq;
    }
    push_item(hs, it);
    return MXU_OK;
}

/* ---- the stream thread ---- */

static void idle_wait(host_stream_t *hs)
{
    uint64_t deadline = mxu_now_ns() + hs->spin_ns;
    for (unsigned i = 0;; i++) {
        if (!mxu_mpsc_empty(&hs->queue))
            return;
        if ((i & 63) == 0 && mxu_now_ns() >= deadline)
            break;
        mxu_cpu_relax();
    }
    uint32_t key = mxu_event_prepare(&hs->work_ev);
    if (!mxu_mpsc_empty(&hs->queue)) {
        mxu_event_cancel(&hs->work_ev);
        return;
    }
    mxu_event_wait(&hs->work_ev, key, -1);
}

static int released(host_stream_t *hs, uint64_t seq)
{
    return atomic_load_explicit(&hs->release_word, memory_order_acquire) >= seq;
}

static void wait_released(host_stream_t *hs, uint64_t seq)
{
    uint64_t deadline = mxu_now_ns() + hs->spin_ns;
    for (unsigned i = 0;; i++) {
        if (released(hs, seq))
            return;
        if ((i & 63) == 0 && mxu_now_ns() >= deadline)
            break;
        mxu_cpu_relax();
    }
    for (;;) {
        if (released(hs, seq))
            return;
        if (atomic_load_explicit(&hs->aborting, memory_order_acquire)) {
            MXU_LOG(MXU_LOG_WARN,
                    "host stream %p stopped while waiting for sequence %llu (released "
                    "up to %llu): the wait is abandoned",
                    (void *)hs, (unsigned long long)seq,
                    (unsigned long long)atomic_load(&hs->release_word));
            return;
        }
        uint32_t key = mxu_event_prepare(&hs->release_ev);
        if (released(hs, seq) || atomic_load_explicit(&hs->aborting, memory_order_acquire)) {
            mxu_event_cancel(&hs->release_ev);
            continue;
        }
        mxu_event_wait(&hs->release_ev, key, -1);
    }
}

/* the stream a host stream's thread runs (mxa_host_current_stream) */
static _Thread_local host_stream_t *tl_current;

mxa_stream_t *mxa_host_current_stream(void) { return tl_current ? &tl_current->s : NULL; }

static void *stream_main(void *arg)
{
    host_stream_t *hs = arg;
    tl_current = hs;
    for (;;) {
        mxu_mpsc_node_t *n = mxu_mpsc_pop(&hs->queue);
        if (n == NULL) {
            idle_wait(hs);
            continue;
        }
        host_item_t *it = MXU_CONTAINER_OF(n, host_item_t, node);
        switch (it->kind) {
        case ITEM_LAUNCH:
            it->u.launch.fn(it->u.launch.arg);
            free(it);
            break;
        case ITEM_TRIGGER:
            mxa_store_max(&hs->trigger_word, it->u.seq);
            free(it);
            mxa_notify_trigger();
            break;
        case ITEM_WAIT:
            wait_released(hs, it->u.seq);
            free(it);
            break;
        case ITEM_MARK: {
            _Atomic int *done = it->u.done;
            /* `it` is on the synchronizer's stack: not touched after this */
            atomic_store_explicit(done, 1, memory_order_release);
            mxu_event_notify(&hs->done_ev);
            break;
        }
        case ITEM_STOP:
            return NULL; /* stop_item is embedded in hs */
        }
    }
}

/* ---- synchronize ---- */

static void nap_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static void maybe_warn_slow(host_stream_t *hs, uint64_t start, uint64_t *next_warn,
                            const char *what)
{
    uint64_t now = mxu_now_ns();
    if (*next_warn == 0 || now - start < *next_warn)
        return;
    *next_warn += mxu_wait_report_ns();
    MXU_LOG(MXU_LOG_WARN,
            "host stream %p: %s is still waiting after %.0f s (%llu of its operations in flight; "
            "triggers reached %llu of %llu; waits released %llu of %llu)",
            (void *)hs, what, (double)(now - start) / 1e9,
            (unsigned long long)atomic_load(&hs->s.ops_in_flight),
            (unsigned long long)atomic_load(&hs->trigger_word),
            (unsigned long long)atomic_load(&hs->s.next_trigger_seq),
            (unsigned long long)atomic_load(&hs->release_word),
            (unsigned long long)atomic_load(&hs->s.next_wait_seq));
}

/* All items queued before the call have run and ops_in_flight == 0
 * (or the stream is being aborted by shutdown). */
static void sync_impl(host_stream_t *hs, const char *what)
{
    uint64_t start = mxu_now_ns();
    uint64_t next_warn = mxu_wait_report_ns();

    _Atomic int done = 0;
    host_item_t mark;
    mark.kind = ITEM_MARK;
    mark.u.done = &done;
    push_item(hs, &mark);

    uint64_t deadline = start + hs->spin_ns;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&done, memory_order_acquire))
            break;
        if ((i & 63) == 0 && mxu_now_ns() >= deadline)
            break;
        mxu_cpu_relax();
    }
    while (!atomic_load_explicit(&done, memory_order_acquire)) {
        uint32_t key = mxu_event_prepare(&hs->done_ev);
        if (atomic_load_explicit(&done, memory_order_acquire)) {
            mxu_event_cancel(&hs->done_ev);
            break;
        }
        mxu_event_wait(&hs->done_ev, key, 1000000000); /* 1 s: slow-wait report */
        maybe_warn_slow(hs, start, &next_warn, what);
    }

    /* Communication: the engine decrements ops_in_flight on completion and
     * does not signal, so poll with a growing sleep (at most 50 us). */
    long sleep_ns = 1000;
    for (unsigned i = 0; atomic_load_explicit(&hs->s.ops_in_flight, memory_order_acquire) != 0;
         i++) {
        if (atomic_load_explicit(&hs->aborting, memory_order_acquire))
            break;
        if (mxu_now_ns() - start < hs->spin_ns) {
            mxu_cpu_relax();
            continue;
        }
        nap_ns(sleep_ns);
        if (sleep_ns < OPS_POLL_MAX_SLEEP_NS)
            sleep_ns *= 2;
        if (sleep_ns > OPS_POLL_MAX_SLEEP_NS)
            sleep_ns = OPS_POLL_MAX_SLEEP_NS;
        if ((i & 1023) == 0)
            maybe_warn_slow(hs, start, &next_warn, what);
    }
}

/* ---- backend ---- */

static mxu_status_t host_enqueue_trigger(mxa_stream_t *s, uint64_t seq)
{
    return push_new(hs_of(s), ITEM_TRIGGER, seq, NULL, NULL);
}

static mxu_status_t host_enqueue_wait(mxa_stream_t *s, uint64_t seq)
{
    return push_new(hs_of(s), ITEM_WAIT, seq, NULL, NULL);
}

static void host_release(mxa_stream_t *s, uint64_t seq)
{
    host_stream_t *hs = hs_of(s);
    /* Counted so that free() cannot release the memory while we are still
     * notifying: the increment is ordered before the store the stream
     * thread (and, through it, the freeing thread) observes. */
    atomic_fetch_add_explicit(&hs->releasers, 1, memory_order_relaxed);
    mxa_store_max(&hs->release_word, seq);
    mxu_event_notify(&hs->release_ev);
    atomic_fetch_sub_explicit(&hs->releasers, 1, memory_order_release);
}

static uint64_t host_poll_trigger(mxa_stream_t *s)
{
    return atomic_load_explicit(&hs_of(s)->trigger_word, memory_order_acquire);
}

/* timed like the CUDA driver's query (MXU_CT_CU_CAPTURE), so that the
 * host-time statistics count capture queries on host streams too (the CPU
 * tests check how many a call asks: test/mpi/stats.sh) */
static int host_capturing(mxa_stream_t *s)
{
    uint64_t t = mxu_ct_inner_begin();
    int c = atomic_load_explicit(&hs_of(s)->capturing, memory_order_acquire);
    mxu_ct_inner_end(MXU_CT_CU_CAPTURE, t);
    return c;
}

static const mxa_backend_t host_backend = {
    .name = "host",
    .kind = MXA_KIND_HOST,
    .enqueue_trigger = host_enqueue_trigger,
    .enqueue_wait = host_enqueue_wait,
    .release = host_release,
    .poll_trigger = host_poll_trigger,
    .needs_polling = 0,
    .capturing = host_capturing,
};

/* ---- registry ---- */

static host_stream_t *find(void *handle)
{
    if (handle == NULL)
        return NULL;
    host_stream_t *hs = mxu_locked_map_get(&registry, (uint64_t)(uintptr_t)handle);
    if (hs == NULL || hs->magic != HOST_STREAM_MAGIC)
        return NULL;
    return hs;
}

mxa_stream_t *mxa_host_stream_find(void *handle)
{
    host_stream_t *hs = find(handle);
    return hs != NULL ? &hs->s : NULL;
}

void mxa_set_stream_free_hook(mxa_stream_free_fn fn)
{
    atomic_store_explicit(&free_hook, fn, memory_order_release);
}

void mxa_host_foreach_stream(void (*fn)(mxa_stream_t *s, void *arg), void *arg)
{
    /* fn may look streams up but must not create or free host streams */
    pthread_mutex_lock(&list_lock);
    for (host_stream_t *hs = list_head; hs != NULL; hs = hs->list_next)
        fn(&hs->s, arg);
    pthread_mutex_unlock(&list_lock);
}

/* ---- create / free ---- */

mxu_status_t mxa_host_stream_create(void **handle_out)
{
    if (handle_out == NULL)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "host stream create: NULL output pointer");
    *handle_out = NULL;

    size_t size = (sizeof(host_stream_t) + 63) & ~(size_t)63;
    host_stream_t *hs = aligned_alloc(64, size);
    if (hs == NULL)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "host stream create: out of memory");
    memset(hs, 0, size);

    hs->s.kind = MXA_KIND_HOST;
    hs->s.backend = &host_backend;
    hs->s.handle = hs;
    hs->s.trigger_word = &hs->trigger_word;
    hs->s.release_word = &hs->release_word;
    atomic_init(&hs->s.next_trigger_seq, 0);
    atomic_init(&hs->s.next_wait_seq, 0);
    atomic_init(&hs->s.ops_in_flight, 0);
    atomic_init(&hs->trigger_word, 0);
    atomic_init(&hs->release_word, 0);
    atomic_init(&hs->freeing, 0);
    atomic_init(&hs->aborting, 0);
    atomic_init(&hs->releasers, 0);
    atomic_init(&hs->capturing, 0);
    pthread_mutex_init(&hs->cap_lock, NULL);
    hs->magic = HOST_STREAM_MAGIC;
    long spin_us = mxu_config.wait_spin_us;
    hs->spin_ns = spin_us > 0 ? (uint64_t)spin_us * 1000u : 0;
    hs->stop_item.kind = ITEM_STOP;
    mxu_mpsc_init(&hs->queue);
    mxu_event_init(&hs->work_ev);
    mxu_event_init(&hs->release_ev);
    mxu_event_init(&hs->done_ev);

    /* Library threads take no signals: the application's threads do. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&hs->thread, NULL, stream_main, hs);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        free(hs);
        MXU_FAIL(MXU_ERR_SYSTEM, "host stream create: pthread_create failed (%s)", strerror(rc));
    }
    pthread_setname_np(hs->thread, "mpixacc-hstream");

    pthread_mutex_lock(&list_lock);
    mxu_status_t st = mxu_locked_map_put(&registry, (uint64_t)(uintptr_t)hs, hs);
    if (st == MXU_OK) {
        hs->list_next = list_head;
        if (list_head != NULL)
            list_head->list_prev = hs;
        list_head = hs;
    }
    pthread_mutex_unlock(&list_lock);
    if (st != MXU_OK) {
        push_item(hs, &hs->stop_item);
        pthread_join(hs->thread, NULL);
        free(hs);
        MXU_FAIL(st, "host stream create: cannot register the stream");
    }
    MXU_LOG(MXU_LOG_DEBUG, "host stream %p created", (void *)hs);
    *handle_out = hs;
    return MXU_OK;
}

/* Unregister, stop, join and release a stream claimed by free/shutdown. */
static void destroy(host_stream_t *hs)
{
    pthread_mutex_lock(&list_lock);
    mxu_locked_map_remove(&registry, (uint64_t)(uintptr_t)hs);
    if (hs->list_prev != NULL)
        hs->list_prev->list_next = hs->list_next;
    else
        list_head = hs->list_next;
    if (hs->list_next != NULL)
        hs->list_next->list_prev = hs->list_prev;
    pthread_mutex_unlock(&list_lock);

    push_item(hs, &hs->stop_item);
    pthread_join(hs->thread, NULL);

    /* Items pushed after STOP (erroneous use of the handle concurrently
     * with free): release them; unblock synchronizers. */
    mxu_mpsc_node_t *n;
    int leftovers = 0;
    for (;;) {
        n = mxu_mpsc_pop(&hs->queue);
        if (n == NULL) {
            if (mxu_mpsc_empty(&hs->queue))
                break;
            sched_yield(); /* a push is half done */
            continue;
        }
        host_item_t *it = MXU_CONTAINER_OF(n, host_item_t, node);
        leftovers++;
        if (it->kind == ITEM_MARK) {
            _Atomic int *done = it->u.done;
            atomic_store_explicit(done, 1, memory_order_release);
            mxu_event_notify(&hs->done_ev);
        } else if (it->kind != ITEM_STOP) {
            free(it);
        }
    }
    if (leftovers != 0)
        MXU_LOG(MXU_LOG_WARN,
                "host stream %p: %d items were enqueued while the stream was being freed "
                "and are dropped",
                (void *)hs, leftovers);

    mxa_stream_free_fn hook = atomic_load_explicit(&free_hook, memory_order_acquire);
    if (hook != NULL)
        hook(&hs->s);

    while (atomic_load_explicit(&hs->releasers, memory_order_acquire) != 0)
        sched_yield();
    if (hs->cap) { /* freed while capturing: the capture is dropped */
        MXU_LOG(MXU_LOG_WARN, "host stream %p freed while being captured: the capture is dropped",
                (void *)hs);
        mxa_host_graph_free(hs->cap);
        hs->cap = NULL;
    }
    pthread_mutex_destroy(&hs->cap_lock);
    hs->magic = 0;
    MXU_LOG(MXU_LOG_DEBUG, "host stream %p freed", (void *)hs);
    free(hs);
}

mxu_status_t mxa_host_stream_launch(void *handle, void (*fn)(void *), void *arg)
{
    host_stream_t *hs = find(handle);
    if (hs == NULL || atomic_load_explicit(&hs->freeing, memory_order_acquire))
        return MXU_ERR_INVALID_STREAM;
    if (fn == NULL)
        return MXU_ERR_INVALID_PARAM;
    int rec = capture_record(hs, fn, arg);
    if (rec != 0)
        return rec == 1 ? MXU_OK : MXU_ERR_NO_MEMORY;
    return push_new(hs, ITEM_LAUNCH, 0, fn, arg);
}

mxu_status_t mxa_host_stream_synchronize(void *handle)
{
    host_stream_t *hs = find(handle);
    if (hs == NULL)
        return MXU_ERR_INVALID_STREAM;
    if (pthread_equal(pthread_self(), hs->thread))
        MXU_FAIL(MXU_ERR_INVALID_PARAM,
                 "host stream %p: synchronize called from work running on the same stream "
                 "would deadlock",
                 (void *)hs);
    if (atomic_load_explicit(&hs->capturing, memory_order_acquire))
        MXU_FAIL(MXU_ERR_INVALID_PARAM,
                 "host stream %p is being captured into a graph: synchronize it after the "
                 "capture ended",
                 (void *)hs);
    sync_impl(hs, "synchronize");
    return MXU_OK;
}

mxu_status_t mxa_host_stream_free(void *handle)
{
    pthread_mutex_lock(&list_lock);
    host_stream_t *hs = find(handle);
    if (hs != NULL && pthread_equal(pthread_self(), hs->thread)) {
        pthread_mutex_unlock(&list_lock);
        MXU_FAIL(MXU_ERR_INVALID_PARAM,
                 "host stream %p: free called from work running on the same stream would "
                 "deadlock",
                 (void *)hs);
    }
    if (hs == NULL || atomic_exchange(&hs->freeing, 1) != 0) {
        pthread_mutex_unlock(&list_lock);
        return MXU_ERR_INVALID_STREAM; /* unknown, or already being freed */
    }
    pthread_mutex_unlock(&list_lock);

    sync_impl(hs, "free");
    destroy(hs);
    return MXU_OK;
}

/* The library's own host stream (one per process, made at first use):
 * host work the progress thread hands off (stream-executed receive steps
 * into host memory, unpacks of non-contiguous receives). */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib_handle;

mxa_stream_t *mxa_library_host_stream(void **handle)
{
    pthread_mutex_lock(&lib_lock);
    if (!lib_handle && mxa_host_stream_create(&lib_handle) != MXU_OK)
        lib_handle = NULL; /* logged there */
    void *h = lib_handle;
    pthread_mutex_unlock(&lib_lock);
    if (handle)
        *handle = h;
    return h ? mxa_host_stream_find(h) : NULL;
}

void mxa_host_shutdown(void)
{
    pthread_mutex_lock(&lib_lock);
    lib_handle = NULL; /* stopped below with the others */
    pthread_mutex_unlock(&lib_lock);

    /* Abandon every pending wait: the engine has drained (or given up). */
    pthread_mutex_lock(&list_lock);
    for (host_stream_t *hs = list_head; hs != NULL; hs = hs->list_next) {
        atomic_store_explicit(&hs->aborting, 1, memory_order_release);
        mxu_event_notify(&hs->release_ev);
    }
    pthread_mutex_unlock(&list_lock);

    for (;;) {
        pthread_mutex_lock(&list_lock);
        host_stream_t *victim = NULL;
        int busy = 0;
        for (host_stream_t *hs = list_head; hs != NULL; hs = hs->list_next) {
            if (atomic_exchange(&hs->freeing, 1) == 0) {
                atomic_store_explicit(&hs->aborting, 1, memory_order_release);
                mxu_event_notify(&hs->release_ev);
                victim = hs;
                break;
            }
            busy++; /* being freed by another thread */
        }
        pthread_mutex_unlock(&list_lock);
        if (victim != NULL) {
            MXU_LOG(MXU_LOG_DEBUG,
                    "host stream %p was not freed by the application; "
                    "stopping it",
                    (void *)victim);
            destroy(victim);
            continue;
        }
        if (busy == 0)
            break;
        nap_ns(100000); /* let concurrent frees finish */
    }
}

/* ---- capture into host graphs ---- */

static mxu_status_t graph_append(mxa_host_graph_t *g, void (*fn)(void *), void *arg)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        host_entry_t *e = realloc(g->e, cap * sizeof(*e));
        if (!e)
            return MXU_ERR_NO_MEMORY;
        g->e = e;
        g->cap = cap;
    }
    g->e[g->n++] = (host_entry_t){fn, arg};
    return MXU_OK;
}

/* Record fn(arg) if hs is capturing: 1 recorded, 0 not capturing, <0 error. */
static int capture_record(host_stream_t *hs, void (*fn)(void *), void *arg)
{
    if (!atomic_load_explicit(&hs->capturing, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&hs->cap_lock);
    int rc = 0;
    if (hs->cap)
        rc = graph_append(hs->cap, fn, arg) == MXU_OK ? 1 : -1;
    pthread_mutex_unlock(&hs->cap_lock);
    return rc;
}

mxu_status_t mxa_host_capture_begin(void *handle)
{
    host_stream_t *hs = find(handle);
    if (hs == NULL || atomic_load_explicit(&hs->freeing, memory_order_acquire))
        return MXU_ERR_INVALID_STREAM;
    mxa_host_graph_t *g = calloc(1, sizeof(*g));
    if (!g)
        return MXU_ERR_NO_MEMORY;
    pthread_mutex_lock(&hs->cap_lock);
    if (hs->cap) {
        pthread_mutex_unlock(&hs->cap_lock);
        free(g);
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "host stream %p is already being captured", (void *)hs);
    }
    hs->cap = g;
    hs->cap_broken = 0;
    hs->cap_why[0] = '\0';
    atomic_store_explicit(&hs->capturing, 1, memory_order_release);
    pthread_mutex_unlock(&hs->cap_lock);
    return MXU_OK;
}

mxu_status_t mxa_host_capture_add(mxa_stream_t *s, void (*fn)(void *), void *arg)
{
    if (s == NULL || s->kind != MXA_KIND_HOST)
        return MXU_ERR_INVALID_STREAM;
    int rc = capture_record(hs_of(s), fn, arg);
    return rc == 1 ? MXU_OK : rc == 0 ? MXU_ERR_INVALID_STREAM : MXU_ERR_NO_MEMORY;
}

void mxa_host_capture_break(mxa_stream_t *s, const char *why)
{
    host_stream_t *hs = hs_of(s);
    pthread_mutex_lock(&hs->cap_lock);
    if (hs->cap && !hs->cap_broken) {
        hs->cap_broken = 1;
        snprintf(hs->cap_why, sizeof(hs->cap_why), "%s", why);
    }
    pthread_mutex_unlock(&hs->cap_lock);
}

mxu_status_t mxa_host_capture_end(void *handle, mxa_host_graph_t **graph, char *why, size_t len)
{
    host_stream_t *hs = find(handle);
    if (why && len)
        why[0] = '\0';
    if (hs == NULL)
        return MXU_ERR_INVALID_STREAM;
    pthread_mutex_lock(&hs->cap_lock);
    mxa_host_graph_t *g = hs->cap;
    int broken = hs->cap_broken;
    if (broken && why && len)
        snprintf(why, len, "%s", hs->cap_why);
    hs->cap = NULL;
    atomic_store_explicit(&hs->capturing, 0, memory_order_release);
    pthread_mutex_unlock(&hs->cap_lock);
    if (g == NULL)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "host stream %p is not being captured", (void *)hs);
    if (broken) {
        mxa_host_graph_free(g);
        return MXU_ERR_CAPTURED;
    }
    *graph = g;
    return MXU_OK;
}

static void graph_launch_done(void *arg)
{
    mxa_host_graph_t *g = arg;
    atomic_fetch_sub_explicit(&g->inflight, 1, memory_order_release);
}

mxu_status_t mxa_host_graph_launch(mxa_host_graph_t *g, void *handle)
{
    host_stream_t *hs = find(handle);
    if (hs == NULL || atomic_load_explicit(&hs->freeing, memory_order_acquire))
        return MXU_ERR_INVALID_STREAM;
    if (atomic_load_explicit(&hs->capturing, memory_order_acquire))
        MXU_FAIL(MXU_ERR_INVALID_PARAM,
                 "host stream %p is being captured: a graph is launched on a stream that is not",
                 (void *)hs);
    /* every item first, then all pushed: a launch is enqueued whole or not */
    size_t n = g->n + 1;
    host_item_t **its = malloc(n * sizeof(*its));
    size_t got = 0;
    if (its)
        for (; got < n; got++)
            if (!(its[got] = malloc(sizeof(host_item_t))))
                break;
    if (!its || got < n) {
        for (size_t i = 0; its && i < got; i++)
            free(its[i]);
        free(its);
        MXU_FAIL(MXU_ERR_NO_MEMORY, "host stream %p: out of memory launching a graph", (void *)hs);
    }
    atomic_fetch_add_explicit(&g->inflight, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        its[i]->kind = ITEM_LAUNCH;
        its[i]->u.launch.fn = i < g->n ? g->e[i].fn : graph_launch_done;
        its[i]->u.launch.arg = i < g->n ? g->e[i].arg : g;
        push_item(hs, its[i]);
    }
    free(its);
    return MXU_OK;
}

long mxa_host_graph_inflight(const mxa_host_graph_t *g)
{
    return atomic_load_explicit(&((mxa_host_graph_t *)g)->inflight, memory_order_acquire);
}

void mxa_host_graph_free(mxa_host_graph_t *g)
{
    if (!g)
        return;
    free(g->e);
    free(g);
}

/* ---- graph words (graph.c's counter protocol) on host streams ---- */

/* a wait reports every this many ns while its launch's operations are out */
#define GRAPH_WAIT_REPORT_NS (10ull * 1000000000ull)

static void graph_fire_fn(void *arg)
{
    atomic_fetch_add_explicit((_Atomic uint64_t *)arg, 1, memory_order_acq_rel);
}

/* k = ++tickets, then wait (spin, then naps to 50 us) until done >= k --
 * what the CUDA backend's wait kernel does on the device */
static void graph_wait_fn(void *arg)
{
    _Atomic uint64_t *tickets = arg, *done = (_Atomic uint64_t *)arg + MXA_GRAPH_DONE_WORD;
    uint64_t k = atomic_fetch_add_explicit(tickets, 1, memory_order_acq_rel) + 1;
    uint64_t start = mxu_now_ns(), report = start + GRAPH_WAIT_REPORT_NS, nap = 0;
    for (int spins = 0; atomic_load_explicit(done, memory_order_acquire) < k; spins++) {
        if (spins < 1000)
            continue;
        nap = nap ? nap * 2 : 1000;
        if (nap > 50000)
            nap = 50000;
        nap_ns(nap);
        uint64_t now = mxu_now_ns();
        if (now >= report) {
            MXU_LOG(MXU_LOG_WARN,
                    "host graph: the wait of launch %" PRIu64 " is still waiting for its "
                    "operations after %.0f s",
                    k, (double)(now - start) / 1e9);
            report = now + GRAPH_WAIT_REPORT_NS;
        }
    }
}

mxu_status_t mxa_host_graph_word_alloc(uint64_t **pair)
{
    void *p = aligned_alloc(64, MXA_GRAPH_WORDS_BYTES);
    if (!p)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "host graph: out of memory for its counters");
    memset(p, 0, MXA_GRAPH_WORDS_BYTES);
    *pair = p;
    return MXU_OK;
}

mxu_status_t mxa_host_graph_fire(mxa_stream_t *s, uint64_t *pair)
{
    return mxa_host_capture_add(s, graph_fire_fn, pair);
}

mxu_status_t mxa_host_graph_wait(mxa_stream_t *s, uint64_t *pair)
{
    return mxa_host_capture_add(s, graph_wait_fn, pair);
}
