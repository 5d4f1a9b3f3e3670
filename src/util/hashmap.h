/*
 * hashmap.h - open-addressing hash map from 64-bit keys to pointers.
 * Not thread-safe: callers lock (mxu_locked_map_t wraps one with a mutex).
 * Key 0 is reserved (cannot be stored).
 */
#ifndef MXU_HASHMAP_H
#define MXU_HASHMAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

typedef struct {
    uint64_t *keys;
    void **values;
    size_t capacity; /* power of two */
    size_t count;
    size_t tombstones;
} mxu_hashmap_t;

mxu_status_t mxu_hashmap_init(mxu_hashmap_t *m, size_t initial_capacity);
void mxu_hashmap_destroy(mxu_hashmap_t *m);
mxu_status_t mxu_hashmap_put(mxu_hashmap_t *m, uint64_t key, void *value); /* replaces */
void *mxu_hashmap_get(const mxu_hashmap_t *m, uint64_t key);               /* NULL if absent */
void *mxu_hashmap_remove(mxu_hashmap_t *m, uint64_t key);                  /* returns old value */
/* Iterate: returns next index >= *pos holding an entry, or -1. */
long mxu_hashmap_next(const mxu_hashmap_t *m, size_t *pos, uint64_t *key, void **value);

typedef struct {
    pthread_mutex_t lock;
    mxu_hashmap_t map;
    _Atomic size_t count; /* mirror of map.count, readable without the lock */
} mxu_locked_map_t;

mxu_status_t mxu_locked_map_init(mxu_locked_map_t *m);
void mxu_locked_map_destroy(mxu_locked_map_t *m);
mxu_status_t mxu_locked_map_put(mxu_locked_map_t *m, uint64_t key, void *value);
void *mxu_locked_map_get(mxu_locked_map_t *m, uint64_t key); /* fast NULL when empty */
void *mxu_locked_map_remove(mxu_locked_map_t *m, uint64_t key);

#endif
