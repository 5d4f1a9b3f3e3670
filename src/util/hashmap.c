/*
 * hashmap.c - open addressing with linear probing (see hashmap.h).
 *
 * A slot is empty (key 0, value NULL), a tombstone (key 0, value TOMBSTONE)
 * or full (key != 0). The table grows (doubles) when full slots plus
 * tombstones would exceed 70% of the capacity; when most of that load is
 * tombstones it is rebuilt at the same size instead.
 */
#include "util/hashmap.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static char tombstone_marker;
#define TOMBSTONE ((void *)&tombstone_marker)
#define MIN_CAPACITY 16

static inline uint64_t mix64(uint64_t x)
{
    /* splitmix64 finaliser: pointers and small integers spread well */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static size_t round_pow2(size_t n)
{
    size_t c = MIN_CAPACITY;
    while (c < n)
        c <<= 1;
    return c;
}

mxu_status_t mxu_hashmap_init(mxu_hashmap_t *m, size_t initial_capacity)
{
    size_t cap = round_pow2(initial_capacity);
    m->keys = calloc(cap, sizeof(*m->keys));
    m->values = calloc(cap, sizeof(*m->values));
    if (m->keys == NULL || m->values == NULL) {
        free(m->keys);
        free(m->values);
        m->keys = NULL;
        m->values = NULL;
        m->capacity = m->count = m->tombstones = 0;
        return MXU_ERR_NO_MEMORY;
    }
    m->capacity = cap;
    m->count = 0;
    m->tombstones = 0;
    return MXU_OK;
}

void mxu_hashmap_destroy(mxu_hashmap_t *m)
{
    free(m->keys);
    free(m->values);
    m->keys = NULL;
    m->values = NULL;
    m->capacity = m->count = m->tombstones = 0;
}

/* Index of `key`, or -1. */
static long find_slot(const mxu_hashmap_t *m, uint64_t key)
{
    if (m->capacity == 0 || key == 0)
        return -1;
    size_t mask = m->capacity - 1;
    size_t i = (size_t)mix64(key) & mask;
    for (size_t probes = 0; probes < m->capacity; probes++, i = (i + 1) & mask) {
        if (m->keys[i] == key)
            return (long)i;
        if (m->keys[i] == 0 && m->values[i] == NULL)
            return -1; /* empty: end of the probe chain */
    }
    return -1;
}

static mxu_status_t rehash(mxu_hashmap_t *m, size_t new_cap)
{
    mxu_hashmap_t n;
    mxu_status_t st = mxu_hashmap_init(&n, new_cap);
    if (st != MXU_OK)
        return st;
    size_t mask = n.capacity - 1;
    for (size_t i = 0; i < m->capacity; i++) {
        if (m->keys[i] == 0)
            continue;
        size_t j = (size_t)mix64(m->keys[i]) & mask;
        while (n.keys[j] != 0)
            j = (j + 1) & mask;
        n.keys[j] = m->keys[i];
        n.values[j] = m->values[i];
        n.count++;
    }
    free(m->keys);
    free(m->values);
    *m = n;
    return MXU_OK;
}

mxu_status_t mxu_hashmap_put(mxu_hashmap_t *m, uint64_t key, void *value)
{
    if (key == 0)
        return MXU_ERR_INVALID_PARAM;
    if (m->capacity == 0)
        MXU_TRY(mxu_hashmap_init(m, MIN_CAPACITY));

    long found = find_slot(m, key);
    if (found >= 0) {
        m->values[found] = value;
        return MXU_OK;
    }

    /* New key: keep (count + tombstones) <= 70% of the capacity. */
    if ((m->count + m->tombstones + 1) * 10 > m->capacity * 7) {
        size_t cap = m->capacity;
        if ((m->count + 1) * 10 > cap * 7 / 2)
            cap *= 2; /* really full: grow; otherwise just drop the tombstones */
        MXU_TRY(rehash(m, cap));
    }

    size_t mask = m->capacity - 1;
    size_t i = (size_t)mix64(key) & mask;
    while (m->keys[i] != 0)
        i = (i + 1) & mask;
    /* first empty-or-tombstone slot of the chain: the key is not further on */
    if (m->values[i] == TOMBSTONE)
        m->tombstones--;
    m->keys[i] = key;
    m->values[i] = value;
    m->count++;
    return MXU_OK;
}

void *mxu_hashmap_get(const mxu_hashmap_t *m, uint64_t key)
{
    long i = find_slot(m, key);
    return i >= 0 ? m->values[i] : NULL;
}

void *mxu_hashmap_remove(mxu_hashmap_t *m, uint64_t key)
{
    long i = find_slot(m, key);
    if (i < 0)
        return NULL;
    void *old = m->values[i];
    m->keys[i] = 0;
    m->values[i] = TOMBSTONE;
    m->count--;
    m->tombstones++;
    if (m->count == 0) {
        /* cheap full reset: no tombstones left behind */
        memset(m->keys, 0, m->capacity * sizeof(*m->keys));
        memset(m->values, 0, m->capacity * sizeof(*m->values));
        m->tombstones = 0;
    }
    return old;
}

long mxu_hashmap_next(const mxu_hashmap_t *m, size_t *pos, uint64_t *key, void **value)
{
    /* *pos is advanced past the returned index, so both
     *   while (mxu_hashmap_next(m, &pos, &k, &v) >= 0) ...
     * and   for (pos = 0; (i = mxu_hashmap_next(m, &pos, ..)) >= 0; pos = i + 1)
     * visit every entry once. */
    for (size_t i = *pos; i < m->capacity; i++) {
        if (m->keys[i] != 0) {
            if (key != NULL)
                *key = m->keys[i];
            if (value != NULL)
                *value = m->values[i];
            *pos = i + 1;
            return (long)i;
        }
    }
    *pos = m->capacity;
    return -1;
}

/* ---- locked map ---- */

mxu_status_t mxu_locked_map_init(mxu_locked_map_t *m)
{
    if (pthread_mutex_init(&m->lock, NULL) != 0)
        return MXU_ERR_SYSTEM;
    atomic_store_explicit(&m->count, 0, memory_order_relaxed);
    mxu_status_t st = mxu_hashmap_init(&m->map, MIN_CAPACITY);
    if (st != MXU_OK)
        pthread_mutex_destroy(&m->lock);
    return st;
}

void mxu_locked_map_destroy(mxu_locked_map_t *m)
{
    mxu_hashmap_destroy(&m->map);
    atomic_store_explicit(&m->count, 0, memory_order_relaxed);
    pthread_mutex_destroy(&m->lock);
}

mxu_status_t mxu_locked_map_put(mxu_locked_map_t *m, uint64_t key, void *value)
{
    pthread_mutex_lock(&m->lock);
    mxu_status_t st = mxu_hashmap_put(&m->map, key, value);
    atomic_store_explicit(&m->count, m->map.count, memory_order_release);
    pthread_mutex_unlock(&m->lock);
    return st;
}

void *mxu_locked_map_get(mxu_locked_map_t *m, uint64_t key)
{
    if (atomic_load_explicit(&m->count, memory_order_acquire) == 0)
        return NULL;
    pthread_mutex_lock(&m->lock);
    void *v = mxu_hashmap_get(&m->map, key);
    pthread_mutex_unlock(&m->lock);
    return v;
}

void *mxu_locked_map_remove(mxu_locked_map_t *m, uint64_t key)
{
    pthread_mutex_lock(&m->lock);
    void *v = mxu_hashmap_remove(&m->map, key);
    atomic_store_explicit(&m->count, m->map.count, memory_order_release);
    pthread_mutex_unlock(&m->lock);
    return v;
}
