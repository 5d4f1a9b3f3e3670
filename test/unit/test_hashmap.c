/*
 * test_hashmap.c - open-addressing map (util/hashmap.c) against a reference
 * model, load-factor bound, tombstone reuse, iteration, and the locked map
 * under concurrent use.
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
#include <string.h>

#include "unit_check.h"
#include "util/hashmap.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_load(const mxu_hashmap_t *m)
{
    CHECK((m->capacity & (m->capacity - 1)) == 0, "capacity %zu not a power of two", m->capacity);
    CHECK((m->count + m->tombstones) * 10 <= m->capacity * 7, "load %zu+%zu / %zu over 70%%",
          m->count, m->tombstones, m->capacity);
}

static void test_basic(void)
{
    mxu_hashmap_t m;
    CHECK(mxu_hashmap_init(&m, 5) == MXU_OK);
    CHECK(m.capacity >= 8 && (m.capacity & (m.capacity - 1)) == 0);
    int a, b, c;
    CHECK(mxu_hashmap_put(&m, 0, &a) == MXU_ERR_INVALID_PARAM);
    CHECK(mxu_hashmap_get(&m, 0) == NULL);
    CHECK(mxu_hashmap_get(&m, 7) == NULL);
    CHECK(mxu_hashmap_put(&m, 7, &a) == MXU_OK);
    CHECK(mxu_hashmap_put(&m, UINT64_MAX, &b) == MXU_OK);
    CHECK(mxu_hashmap_get(&m, 7) == &a);
    CHECK(mxu_hashmap_get(&m, UINT64_MAX) == &b);
    CHECK(mxu_hashmap_put(&m, 7, &c) == MXU_OK); /* replace */
    CHECK(mxu_hashmap_get(&m, 7) == &c);
    CHECK_EQ_LL(m.count, 2);
    CHECK(mxu_hashmap_remove(&m, 7) == &c);
    CHECK(mxu_hashmap_remove(&m, 7) == NULL);
    CHECK(mxu_hashmap_get(&m, 7) == NULL);
    CHECK(mxu_hashmap_get(&m, UINT64_MAX) == &b);
    CHECK_EQ_LL(m.count, 1);
    /* NULL values are storable and distinguishable only via iteration/count */
    CHECK(mxu_hashmap_put(&m, 9, NULL) == MXU_OK);
    CHECK_EQ_LL(m.count, 2);
    mxu_hashmap_destroy(&m);
    CHECK(m.keys == NULL && m.capacity == 0);

    /* a zeroed map works without init (lazy allocation) */
    mxu_hashmap_t z;
    memset(&z, 0, sizeof(z));
    CHECK(mxu_hashmap_get(&z, 1) == NULL);
    CHECK(mxu_hashmap_remove(&z, 1) == NULL);
    CHECK(mxu_hashmap_put(&z, 1, &a) == MXU_OK);
    CHECK(mxu_hashmap_get(&z, 1) == &a);
    mxu_hashmap_destroy(&z);
}

#define KEYSPACE 3000
static void test_model(void)
{
    mxu_hashmap_t m;
    CHECK(mxu_hashmap_init(&m, 0) == MXU_OK);
    static void *model[KEYSPACE + 1];
    static char present[KEYSPACE + 1];
    size_t live = 0;
    for (int op = 0; op < 200000; op++) {
        uint64_t k = 1 + next_rand() % KEYSPACE;
        uint64_t r = next_rand() % 10;
        if (r < 5) {
            void *v = (void *)(uintptr_t)next_rand();
            CHECK(mxu_hashmap_put(&m, k * 0x9e3779b97f4a7c15ull, v) == MXU_OK);
            if (!present[k])
                live++;
            present[k] = 1;
            model[k] = v;
            check_load(&m);
        } else if (r < 8) {
            void *v = mxu_hashmap_remove(&m, k * 0x9e3779b97f4a7c15ull);
            CHECK(v == (present[k] ? model[k] : NULL));
            if (present[k])
                live--;
            present[k] = 0;
        } else {
            void *v = mxu_hashmap_get(&m, k * 0x9e3779b97f4a7c15ull);
            CHECK(v == (present[k] ? model[k] : NULL), "op %d key %llu", op, (unsigned long long)k);
        }
        CHECK(m.count == live);
    }
    /* iteration (both idioms) visits each live entry exactly once */
    static char visited[KEYSPACE + 1];
    size_t pos = 0, n = 0;
    uint64_t key;
    void *val;
    while (mxu_hashmap_next(&m, &pos, &key, &val) >= 0)
        n++;
    CHECK_EQ_LL(n, live);
    memset(visited, 0, sizeof(visited));
    n = 0;
    long i;
    for (pos = 0; (i = mxu_hashmap_next(&m, &pos, &key, &val)) >= 0; pos = (size_t)i + 1) {
        int found = 0;
        for (uint64_t k = 1; k <= KEYSPACE && !found; k++) {
            if (k * 0x9e3779b97f4a7c15ull == key) {
                CHECK(present[k] && !visited[k] && model[k] == val);
                visited[k] = 1;
                found = 1;
            }
        }
        CHECK(found, "iteration returned an unknown key");
        n++;
    }
    CHECK_EQ_LL(n, live);
    mxu_hashmap_destroy(&m);
}

static void test_tombstones(void)
{
    /* insert/remove churn over ever-new keys with few live entries: the table
     * must not keep growing (tombstones are recycled by rebuilds) */
    mxu_hashmap_t m;
    CHECK(mxu_hashmap_init(&m, 16) == MXU_OK);
    int x;
    for (uint64_t k = 1; k <= 200000; k++) {
        CHECK(mxu_hashmap_put(&m, k, &x) == MXU_OK);
        if (k > 5)
            CHECK(mxu_hashmap_remove(&m, k - 5) == &x);
        check_load(&m);
    }
    CHECK_EQ_LL(m.count, 5);
    CHECK(m.capacity <= 64, "capacity grew to %zu with 5 live entries", m.capacity);
    for (uint64_t k = 199996; k <= 200000; k++)
        CHECK(mxu_hashmap_get(&m, k) == &x);
    mxu_hashmap_destroy(&m);

    /* growth keeps everything */
    CHECK(mxu_hashmap_init(&m, 0) == MXU_OK);
    for (uint64_t k = 1; k <= 100000; k++)
        CHECK(mxu_hashmap_put(&m, k << 12, (void *)(uintptr_t)k) == MXU_OK);
    check_load(&m);
    for (uint64_t k = 1; k <= 100000; k++)
        CHECK(mxu_hashmap_get(&m, k << 12) == (void *)(uintptr_t)k);
    mxu_hashmap_destroy(&m);
}

/* ---- locked map ---- */

static mxu_locked_map_t lm;
#define PER_THREAD 20000

static void *lm_worker(void *arg)
{
    uint64_t base = ((uint64_t)(uintptr_t)arg + 1) << 32;
    for (uint64_t i = 1; i <= PER_THREAD; i++) {
        CHECK(mxu_locked_map_put(&lm, base + i, (void *)(uintptr_t)(base + i)) == MXU_OK);
        CHECK(mxu_locked_map_get(&lm, base + i) == (void *)(uintptr_t)(base + i));
        if (i % 2 == 0)
            CHECK(mxu_locked_map_remove(&lm, base + i) == (void *)(uintptr_t)(base + i));
    }
    for (uint64_t i = 1; i <= PER_THREAD; i++) {
        void *v = mxu_locked_map_get(&lm, base + i);
        CHECK(v == (i % 2 ? (void *)(uintptr_t)(base + i) : NULL));
    }
    return NULL;
}

static void test_locked(void)
{
    CHECK(mxu_locked_map_init(&lm) == MXU_OK);
    CHECK(mxu_locked_map_get(&lm, 5) == NULL);
    enum { NT = 4 };
    pthread_t th[NT];
    for (long t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, lm_worker, (void *)t) == 0);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    CHECK_EQ_LL(atomic_load(&lm.count), NT * PER_THREAD / 2);
    CHECK_EQ_LL(lm.map.count, NT * PER_THREAD / 2);
    for (long t = 0; t < NT; t++) {
        uint64_t base = ((uint64_t)t + 1) << 32;
        for (uint64_t i = 1; i <= PER_THREAD; i += 2)
            CHECK(mxu_locked_map_remove(&lm, base + i) != NULL);
    }
    CHECK_EQ_LL(atomic_load(&lm.count), 0);
    CHECK(mxu_locked_map_get(&lm, (1ull << 32) + 1) == NULL);
    mxu_locked_map_destroy(&lm);

    /* statically initialised locked map (as host.c uses it) */
    static mxu_locked_map_t st = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int v;
    CHECK(mxu_locked_map_get(&st, 3) == NULL);
    CHECK(mxu_locked_map_put(&st, 3, &v) == MXU_OK);
    CHECK(mxu_locked_map_get(&st, 3) == &v);
    CHECK(mxu_locked_map_remove(&st, 3) == &v);
    mxu_hashmap_destroy(&st.map);
}

int main(void)
{
    test_basic();
    test_model();
    test_tombstones();
    test_locked();
    TEST_PASS("test_hashmap");
}
