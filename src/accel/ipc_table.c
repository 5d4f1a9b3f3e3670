/*
 * ipc_table.c - see ipc_table.h.
 */
#include "accel/ipc_table.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char handle[MXA_IPC_HANDLE_BYTES];
    uint64_t hkey; /* by_handle key */
    void *ctx;
    uint64_t addr;
    unsigned long refs; /* logical opens not yet closed */
    unsigned long drv;  /* driver opens not yet closed (<= refs) */
} ipc_entry_t;

/* FNV-1a over the handle; 0 is reserved by the hash map */
static uint64_t handle_key(const void *handle)
{
    const unsigned char *p = handle;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < MXA_IPC_HANDLE_BYTES; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h != 0 ? h : 1;
}

mxu_status_t mxa_ipc_table_init(mxa_ipc_table_t *t)
{
    memset(t, 0, sizeof(*t));
    MXU_TRY(mxu_hashmap_init(&t->by_addr, 64));
    mxu_status_t st = mxu_hashmap_init(&t->by_handle, 64);
    if (st != MXU_OK) {
        mxu_hashmap_destroy(&t->by_addr);
        return st;
    }
    t->ready = 1;
    return MXU_OK;
}

void mxa_ipc_table_destroy(mxa_ipc_table_t *t)
{
    if (!t->ready)
        return;
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (mxu_hashmap_next(&t->by_addr, &pos, &key, &val) >= 0)
        free(val);
    mxu_hashmap_destroy(&t->by_addr);
    mxu_hashmap_destroy(&t->by_handle);
    t->ready = 0;
}

int mxa_ipc_table_reuse(mxa_ipc_table_t *t, const void *handle, const void *ctx, uint64_t *addr)
{
    if (!t->ready)
        return 0;
    ipc_entry_t *e = mxu_hashmap_get(&t->by_handle, handle_key(handle));
    if (e == NULL || e->ctx != ctx || memcmp(e->handle, handle, MXA_IPC_HANDLE_BYTES) != 0)
        return 0;
    e->refs++;
    *addr = e->addr;
    return 1;
}

mxu_status_t mxa_ipc_table_add(mxa_ipc_table_t *t, const void *handle, void *ctx, uint64_t addr)
{
    if (!t->ready)
        return MXU_ERR_NOT_READY;
    ipc_entry_t *e = mxu_hashmap_get(&t->by_addr, addr);
    if (e != NULL) { /* the driver returned a mapping it already had */
        e->refs++;
        e->drv++;
        return MXU_OK;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return MXU_ERR_NO_MEMORY;
    memcpy(e->handle, handle, MXA_IPC_HANDLE_BYTES);
    e->hkey = handle_key(handle);
    e->ctx = ctx;
    e->addr = addr;
    e->refs = 1;
    e->drv = 1;
    if (mxu_hashmap_put(&t->by_addr, addr, e) != MXU_OK) {
        free(e);
        return MXU_ERR_NO_MEMORY;
    }
    /* a hash collision with another live handle: that one keeps the slot,
     * this one is simply never reused (the driver is asked instead) */
    if (mxu_hashmap_get(&t->by_handle, e->hkey) == NULL &&
        mxu_hashmap_put(&t->by_handle, e->hkey, e) != MXU_OK)
        e->hkey = 0;
    return MXU_OK;
}

int mxa_ipc_table_release(mxa_ipc_table_t *t, uint64_t addr, void **ctx, int *driver_close)
{
    if (!t->ready)
        return 0;
    ipc_entry_t *e = mxu_hashmap_get(&t->by_addr, addr);
    if (e == NULL)
        return 0;
    *ctx = e->ctx;
    e->refs--;
    *driver_close = e->refs < e->drv;
    if (*driver_close)
        e->drv--;
    if (e->refs == 0) {
        mxu_hashmap_remove(&t->by_addr, addr);
        if (e->hkey != 0 && mxu_hashmap_get(&t->by_handle, e->hkey) == e)
            mxu_hashmap_remove(&t->by_handle, e->hkey);
        free(e);
    }
    return 1;
}

unsigned long mxa_ipc_table_refs(const mxa_ipc_table_t *t, uint64_t addr)
{
    if (!t->ready)
        return 0;
    const ipc_entry_t *e = mxu_hashmap_get(&t->by_addr, addr);
    return e != NULL ? e->refs : 0;
}
