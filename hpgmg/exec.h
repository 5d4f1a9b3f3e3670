/*
 * hpgmg/exec.h - execution contexts: where the operations of a level run.
 *
 *   HG_EXEC_HOST       : on the calling thread, at once (mpi backend on CPU
 *                        levels, and the whole setup phase)
 *   HG_EXEC_HOSTSTREAM : enqueued on an mpix-acc host stream (acc and
 *                        streamcomm backends on CPU levels)
 *   HG_EXEC_CUDA       : enqueued on a cudaStream_t (GPU levels)
 *
 * The process uses one context at a time: launching on a context other than
 * the last one used first drains the last one (this is the drain at the
 * GPU->CPU and CPU->GPU switches of the hierarchy).
 */
#ifndef HPGMG_EXEC_H
#define HPGMG_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

typedef enum { HG_EXEC_HOST = 0, HG_EXEC_HOSTSTREAM = 1, HG_EXEC_CUDA = 2 } hg_exec_kind_t;

struct hg_slot;
struct hg_graph;
typedef struct hg_exec {
    hg_exec_kind_t kind;
    void *stream; /* MPIX_Acc_stream (host stream) or cudaStream_t */
    const char *name;
    struct hg_slot *ring; /* argument blocks of host-stream launches        */
    uint64_t issued;
    _Atomic uint64_t done;
    double sync_time; /* seconds the host spent waiting in hg_exec_sync */
    long syncs;
    struct hg_graph *capturing; /* the graph being recorded on E, or NULL */
} hg_exec_t;

int hg_exec_init(hg_exec_t *E, hg_exec_kind_t kind, const char *name); /* 0 on success */
void hg_exec_fini(hg_exec_t *E);
/* make E the current context (drains the previous one when it differs) */
void hg_exec_use(hg_exec_t *E);
/* run / enqueue one operation on E */
void hg_exec_launch(hg_exec_t *E, int kind, const void *args, size_t size);
/* wait until everything enqueued on E has completed */
void hg_exec_sync(hg_exec_t *E);
/* drain the current context: the host may then touch any memory */
void hg_exec_drain(void);

/* Graphs (--graph): what is enqueued on E (a CUDA or host stream) between
 * begin and end is recorded once -- a CUDA graph, or an mpix-acc host
 * graph (MPIX_Acc_Hoststream_begin_capture) whose launches own their
 * argument blocks -- and launched as one any number of times. Nothing may
 * wait for E in between (hg_exec_sync dies there). end returns NULL when
 * the capture failed (the message is printed). */
typedef struct hg_graph hg_graph_t;
int hg_exec_can_capture(const hg_exec_t *E); /* CUDA or host stream */
void hg_exec_capture_begin(hg_exec_t *E);
hg_graph_t *hg_exec_capture_end(hg_exec_t *E);
void hg_exec_graph_launch(hg_exec_t *E, hg_graph_t *g);
void hg_exec_graph_free(hg_graph_t *g); /* nothing of it in flight */

/* memory (hg_mem_t in defs.h) */
void *hg_alloc(size_t bytes, hg_mem_t kind);            /* zero-filled */
void hg_copy(void *dst, const void *src, size_t bytes); /* any kinds, blocking */
void hg_free(void *p, hg_mem_t kind);

#endif /* HPGMG_EXEC_H */
