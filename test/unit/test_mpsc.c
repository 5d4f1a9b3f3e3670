/*
 * test_mpsc.c - the lock-free MPSC queue (util/mpsc.h): FIFO per producer,
 * nothing lost or duplicated under a 4-producer stress, empty() semantics.
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
#include <string.h>

#include "unit_check.h"
#include "util/mpsc.h"

typedef struct {
    mxu_mpsc_node_t node;
    int producer;
    int seq;
} item_t;

#define NPROD 4
#define NITEMS 100000

static mxu_mpsc_t q;
static item_t *items[NPROD];
static _Atomic int go;

static void *producer(void *arg)
{
    int p = (int)(long)arg;
    while (!atomic_load(&go))
        ;
    for (int i = 0; i < NITEMS; i++) {
        items[p][i].producer = p;
        items[p][i].seq = i;
        mxu_mpsc_push(&q, &items[p][i].node);
    }
    return NULL;
}

static void test_single(void)
{
    mxu_mpsc_init(&q);
    CHECK(mxu_mpsc_empty(&q));
    CHECK(mxu_mpsc_pop(&q) == NULL);
    item_t a = {.seq = 1}, b = {.seq = 2}, c = {.seq = 3};
    mxu_mpsc_push(&q, &a.node);
    CHECK(!mxu_mpsc_empty(&q));
    mxu_mpsc_push(&q, &b.node);
    mxu_mpsc_node_t *n = mxu_mpsc_pop(&q);
    CHECK(n == &a.node);
    mxu_mpsc_push(&q, &c.node);
    CHECK(mxu_mpsc_pop(&q) == &b.node);
    CHECK(!mxu_mpsc_empty(&q));
    n = mxu_mpsc_pop(&q);
    CHECK(n != NULL && MXU_CONTAINER_OF(n, item_t, node)->seq == 3);
    CHECK(mxu_mpsc_empty(&q));
    CHECK(mxu_mpsc_pop(&q) == NULL);
    /* reuse of a popped node */
    mxu_mpsc_push(&q, &a.node);
    CHECK(mxu_mpsc_pop(&q) == &a.node);
    CHECK(mxu_mpsc_empty(&q));
}

static void test_stress(void)
{
    mxu_mpsc_init(&q);
    for (int p = 0; p < NPROD; p++) {
        items[p] = calloc(NITEMS, sizeof(item_t));
        CHECK(items[p] != NULL);
    }
    pthread_t th[NPROD];
    for (long p = 0; p < NPROD; p++)
        CHECK(pthread_create(&th[p], NULL, producer, (void *)p) == 0);
    atomic_store(&go, 1);

    int next[NPROD] = {0};
    long total = 0, empty_polls = 0;
    while (total < (long)NPROD * NITEMS) {
        mxu_mpsc_node_t *n = mxu_mpsc_pop(&q);
        if (n == NULL) {
            empty_polls++;
            continue;
        }
        item_t *it = MXU_CONTAINER_OF(n, item_t, node);
        CHECK(it->producer >= 0 && it->producer < NPROD);
        CHECK(it->seq == next[it->producer], "producer %d: got %d, expected %d", it->producer,
              it->seq, next[it->producer]);
        next[it->producer]++;
        total++;
    }
    for (int p = 0; p < NPROD; p++)
        pthread_join(th[p], NULL);
    CHECK(mxu_mpsc_pop(&q) == NULL);
    CHECK(mxu_mpsc_empty(&q));
    for (int p = 0; p < NPROD; p++) {
        CHECK_EQ_LL(next[p], NITEMS);
        free(items[p]);
    }
    printf("stress: %ld items, %ld empty polls\n", total, empty_polls);
}

int main(void)
{
    test_single();
    test_stress();
    TEST_PASS("test_mpsc");
}
