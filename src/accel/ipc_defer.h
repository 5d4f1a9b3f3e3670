/*
 * ipc_defer.h - deferred closing of CUDA IPC mappings made on the progress
 * thread.
 *
 * UCX's cuda_ipc transport maps a peer's device buffer (cuIpcOpenMemHandle)
 * on the receiving side and keeps the mapping in a cache; when the peer
 * frees the buffer and a new one appears at the same virtual address, or
 * the cache evicts an entry, UCX closes the old mapping with
 * cuIpcCloseMemHandle - on our progress thread. Unmapping may synchronize
 * the device, and a user stream may be blocked at a wait only the progress
 * thread can release: a deadlock (doc/design.md §3). The CUDA backend
 * therefore exports cuIpcCloseMemHandle (resolved before libcuda's for the
 * UCX module, which links it by name); on the progress thread the call is
 * queued here and returns success, and a closer thread of the library
 * makes the close: if it synchronizes the device, it waits while the
 * progress thread goes on releasing stream waits. Other threads close at
 * once.
 *
 * The queue itself has no CUDA dependency, so that it is unit-tested
 * without a GPU; the close function is given by the backend (or a test).
 */
#ifndef MX_ACCEL_IPC_DEFER_H
#define MX_ACCEL_IPC_DEFER_H

#include <stddef.h>
#include <stdint.h>

/* Closes one mapping with `ctx` current; returns the driver's result. */
typedef int (*mxa_ipc_close_fn)(uint64_t dptr, void *ctx);

/* The function that really closes (the driver's cuIpcCloseMemHandle with a
 * context switch around it). */
void mxa_ipc_defer_set_closer(mxa_ipc_close_fn fn);

/* The calling thread defers from now on (enabled != 0) or not. The
 * engine's progress thread calls it when it starts. */
void mxa_ipc_defer_thread_enter(int enabled);

/* Called by the exported cuIpcCloseMemHandle: returns 1 when the close was
 * queued (the caller reports success), 0 when the caller must close now.
 * Queues only on a deferring thread; out of memory: 0. */
int mxa_ipc_defer_close(uint64_t dptr, void *ctx);

/* Wait until everything queued so far is closed (any thread but the
 * progress thread). */
void mxa_ipc_defer_drain(void);

/* Stop the closer thread after it closed everything queued, close what was
 * queued without it, and return the number closed during this call (*failed,
 * may be NULL: how many of them the driver refused). The engine
 * calls it after the progress thread has stopped; deferral works again
 * afterwards (a new closer thread starts at the next deferred close). */
unsigned mxa_ipc_defer_shutdown(unsigned *failed);

/* Closes queued or being made. */
size_t mxa_ipc_defer_pending(void);

#endif
