/*
 * mpsc.h - lock-free intrusive multi-producer single-consumer queue
 * (Vyukov). Producers: any application thread. Consumer: one thread (the
 * progress thread, or a host stream's thread).
 *
 * push() is wait-free; pop() may briefly return NULL while a push is half
 * done (the consumer simply retries on its next pass).
 */
#ifndef MXU_MPSC_H
#define MXU_MPSC_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct mxu_mpsc_node {
    _Atomic(struct mxu_mpsc_node *) next;
} mxu_mpsc_node_t;

typedef struct {
    _Atomic(mxu_mpsc_node_t *) head; /* producers swap here */
    mxu_mpsc_node_t *tail;           /* consumer only */
    mxu_mpsc_node_t stub;
} mxu_mpsc_t;

static inline void mxu_mpsc_init(mxu_mpsc_t *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&q->head, &q->stub, memory_order_relaxed);
    q->tail = &q->stub;
}

static inline void mxu_mpsc_push(mxu_mpsc_t *q, mxu_mpsc_node_t *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    mxu_mpsc_node_t *prev = atomic_exchange_explicit(&q->head, n, memory_order_acq_rel);
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* Consumer only. */
static inline mxu_mpsc_node_t *mxu_mpsc_pop(mxu_mpsc_t *q)
{
    mxu_mpsc_node_t *tail = q->tail;
    mxu_mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (tail == &q->stub) {
        if (next == NULL)
            return NULL;
        q->tail = next;
        tail = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    mxu_mpsc_node_t *head = atomic_load_explicit(&q->head, memory_order_acquire);
    if (tail != head)
        return NULL; /* a producer is mid-push: retry later */
    mxu_mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    return NULL;
}

/* Consumer only: non-zero if nothing is queued (a half-done push counts as
 * queued). */
static inline int mxu_mpsc_empty(mxu_mpsc_t *q)
{
    return q->tail == &q->stub &&
           atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL &&
           atomic_load_explicit(&q->head, memory_order_acquire) == &q->stub;
}

#define MXU_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
