/*
 * ipc_table.h - bookkeeping of the peer-buffer mappings the CUDA backend
 * makes for UCX's cuda_ipc (src/accel/cuda_ipc.c, cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle). No CUDA here: handles are 64 opaque bytes, contexts
 * opaque pointers, so the rules are unit-tested without a GPU
 * (test/unit/test_ipc_table.c).
 *
 * Rules. A process may have two UCX contexts mapping the same peer buffer
 * (the MPI library's and the library's own, one libucp). The driver refuses
 * to open a handle that is already open in the same context
 * (CUDA_ERROR_ALREADY_MAPPED), so a second open of a handle open in that
 * context is answered from the table (same address, one more logical
 * reference) without the driver. (Written for an ALREADY_MAPPED failure with
 * two ranks on one H100; that one turned out to be a stale mapping in UCX's
 * cache, see transport/ucx.c, and the table reported no reuse there: this is
 * a safeguard.) The driver is asked to close a
 * mapping as many times as it opened it, at the last logical closes.
 * Not thread-safe: the caller locks.
 */
#ifndef MX_ACCEL_IPC_TABLE_H
#define MX_ACCEL_IPC_TABLE_H

#include <stdint.h>

#include "util/hashmap.h"
#include "util/status.h"

#define MXA_IPC_HANDLE_BYTES 64

typedef struct {
    mxu_hashmap_t by_addr;   /* mapped address -> entry */
    mxu_hashmap_t by_handle; /* hash of the handle bytes -> entry (first one only) */
    int ready;
} mxa_ipc_table_t;

mxu_status_t mxa_ipc_table_init(mxa_ipc_table_t *t);
void mxa_ipc_table_destroy(mxa_ipc_table_t *t);
/* Before opening: if handle is already open in ctx, take one more reference
 * and return 1 with its address in *addr; else 0 (open it with the driver). */
int mxa_ipc_table_reuse(mxa_ipc_table_t *t, const void *handle, const void *ctx, uint64_t *addr);
/* After the driver opened handle in ctx at addr (a new mapping, or one the
 * driver itself returned again). */
mxu_status_t mxa_ipc_table_add(mxa_ipc_table_t *t, const void *handle, void *ctx, uint64_t addr);
/* At a close of addr: 0 if the table does not know addr (not a mapping of
 * the library's context: the caller closes it as asked); else 1, with the
 * mapping's context in *ctx and *driver_close = 1 when the driver must be
 * asked to close it now (0: other references remain). */
int mxa_ipc_table_release(mxa_ipc_table_t *t, uint64_t addr, void **ctx, int *driver_close);
/* Logical references to addr (0 when unknown). */
unsigned long mxa_ipc_table_refs(const mxa_ipc_table_t *t, uint64_t addr);

#endif
