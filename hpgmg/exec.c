/*
 * hpgmg/exec.c - execution contexts (see exec.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#ifndef HPGMG_NO_MPIX
#include "mpix_acc.h"
#endif

#include "exec.h"
#ifdef HG_HAVE_CUDA
#include "cuda_iface.h"
#endif

/* Host-stream launches need their argument block to live until the stream
 * thread runs it: each launch takes a slot of a ring; a slot is reused only
 * after the stream has executed the launch that last used it. */
#define HG_RING 8192
struct hg_slot {
    int kind;
    uint64_t seq;
    hg_exec_t *E;
    hg_args_t args;
};

/* a recorded graph; host graphs keep their launches' argument blocks */
struct hg_block {
    int kind;
    struct hg_block *next;
    hg_args_t args;
};
struct hg_graph {
    hg_exec_kind_t kind;
    void *exec; /* cudaGraphExec_t, or MPIX_Acc_hostgraph */
    struct hg_block *blocks;
};

static hg_exec_t *g_current = NULL;

static void die(const char *what)
{
    fprintf(stderr, "hpgmg-fv: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int hg_exec_init(hg_exec_t *E, hg_exec_kind_t kind, const char *name)
{
    memset(E, 0, sizeof(*E));
    E->kind = kind;
    E->name = name;
    atomic_init(&E->done, 0);
    switch (kind) {
    case HG_EXEC_HOST:
        return 0;
    case HG_EXEC_HOSTSTREAM:
#ifndef HPGMG_NO_MPIX
        if (MPIX_Acc_Hoststream_create(&E->stream) != MPI_SUCCESS)
            return -1;
        E->ring = calloc(HG_RING, sizeof(struct hg_slot));
        return E->ring ? 0 : -1;
#else
        return -1;
#endif
    case HG_EXEC_CUDA:
#ifdef HG_HAVE_CUDA
        E->stream = hg_cuda_stream_create();
        return E->stream ? 0 : -1;
#else
        return -1;
#endif
    }
    return -1;
}

void hg_exec_fini(hg_exec_t *E)
{
    if (g_current == E) {
        hg_exec_sync(E);
        g_current = NULL;
    }
#ifndef HPGMG_NO_MPIX
    if (E->kind == HG_EXEC_HOSTSTREAM && E->stream) {
        MPIX_Acc_Hoststream_synchronize(E->stream);
        MPIX_Acc_Hoststream_free(&E->stream);
    }
#endif
#ifdef HG_HAVE_CUDA
    if (E->kind == HG_EXEC_CUDA && E->stream)
        hg_cuda_stream_destroy(E->stream);
#endif
    free(E->ring);
    E->ring = NULL;
    E->stream = NULL;
}

void hg_exec_sync(hg_exec_t *E)
{
    if (E->kind == HG_EXEC_HOST)
        return;
    if (E->capturing)
        die("a wait for a stream inside its graph capture (--graph)");
    double t0 = MPI_Wtime();
#ifndef HPGMG_NO_MPIX
    if (E->kind == HG_EXEC_HOSTSTREAM && MPIX_Acc_Hoststream_synchronize(E->stream) != MPI_SUCCESS)
        die("MPIX_Acc_Hoststream_synchronize failed");
#endif
#ifdef HG_HAVE_CUDA
    if (E->kind == HG_EXEC_CUDA)
        hg_cuda_stream_sync(E->stream);
#endif
    E->sync_time += MPI_Wtime() - t0;
    E->syncs++;
}

void hg_exec_use(hg_exec_t *E)
{
    if (g_current != E) {
        if (g_current)
            hg_exec_sync(g_current);
        g_current = E;
    }
}

void hg_exec_drain(void)
{
    if (g_current)
        hg_exec_sync(g_current);
}

#ifndef HPGMG_NO_MPIX
static void slot_run(void *p)
{
    struct hg_slot *s = p;
    hg_cpu_run(s->kind, &s->args);
    atomic_store_explicit(&s->E->done, s->seq + 1, memory_order_release);
}

static void block_run(void *p)
{
    struct hg_block *b = p;
    hg_cpu_run(b->kind, &b->args);
}
#endif

void hg_exec_launch(hg_exec_t *E, int kind, const void *args, size_t size)
{
    hg_exec_use(E);
    switch (E->kind) {
    case HG_EXEC_HOST:
        hg_cpu_run(kind, args);
        return;
    case HG_EXEC_HOSTSTREAM: {
#ifndef HPGMG_NO_MPIX
        if (E->capturing) { /* the graph's own argument block, for every launch of it */
            struct hg_block *b = malloc(sizeof(*b));
            if (!b)
                die("out of memory recording a host graph");
            b->kind = kind;
            memcpy(&b->args, args, size);
            b->next = E->capturing->blocks;
            E->capturing->blocks = b;
            if (MPIX_Acc_Hoststream_launch(E->stream, block_run, b) != MPI_SUCCESS)
                die("MPIX_Acc_Hoststream_launch failed (capture)");
            return;
        }
        uint64_t seq = E->issued;
        if (seq >= HG_RING && atomic_load_explicit(&E->done, memory_order_acquire) <= seq - HG_RING)
            hg_exec_sync(E); /* the slot is still in use: let the stream catch up */
        struct hg_slot *s = &E->ring[seq % HG_RING];
        s->kind = kind;
        s->seq = seq;
        s->E = E;
        memcpy(&s->args, args, size);
        E->issued++;
        if (MPIX_Acc_Hoststream_launch(E->stream, slot_run, s) != MPI_SUCCESS)
            die("MPIX_Acc_Hoststream_launch failed");
#else
        (void)size;
        die("host streams need the mpix-acc library");
#endif
        return;
    }
    case HG_EXEC_CUDA:
#ifdef HG_HAVE_CUDA
        hg_cuda_run(E->stream, kind, args);
#else
        die("CUDA execution in a build without CUDA");
#endif
        return;
    }
}

void *hg_alloc(size_t bytes, hg_mem_t kind)
{
    if (bytes == 0)
        bytes = 8;
    void *p = NULL;
    if (kind == HG_MEM_HOST) {
        p = calloc(1, bytes);
    } else {
#ifdef HG_HAVE_CUDA
        p = hg_cuda_alloc(bytes, (int)kind);
#else
        p = calloc(1, bytes); /* no CUDA: every kind is host memory */
#endif
    }
    if (!p)
        die("out of memory");
    return p;
}

void hg_copy(void *dst, const void *src, size_t bytes)
{
#ifdef HG_HAVE_CUDA
    hg_cuda_copy(dst, src, bytes);
#else
    memcpy(dst, src, bytes);
#endif
}

void hg_free(void *p, hg_mem_t kind)
{
    if (!p)
        return;
#ifdef HG_HAVE_CUDA
    if (kind != HG_MEM_HOST) {
        hg_cuda_free(p, (int)kind);
        return;
    }
#else
    (void)kind;
#endif
    free(p);
}

int hg_exec_can_capture(const hg_exec_t *E)
{
#ifndef HPGMG_NO_MPIX
    if (E->kind == HG_EXEC_HOSTSTREAM)
        return 1;
#endif
#ifdef HG_HAVE_CUDA
    if (E->kind == HG_EXEC_CUDA)
        return 1;
#endif
    return 0;
}

void hg_exec_capture_begin(hg_exec_t *E)
{
    if (!hg_exec_can_capture(E) || E->capturing)
        die("graph capture on a context that cannot capture, or twice");
    hg_exec_use(E); /* (a drain of another context, before the capture) */
    hg_graph_t *g = calloc(1, sizeof(*g));
    if (!g)
        die("out of memory starting a graph capture");
    g->kind = E->kind;
#ifndef HPGMG_NO_MPIX
    if (E->kind == HG_EXEC_HOSTSTREAM &&
        MPIX_Acc_Hoststream_begin_capture(E->stream) != MPI_SUCCESS)
        die("MPIX_Acc_Hoststream_begin_capture failed");
#endif
#ifdef HG_HAVE_CUDA
    if (E->kind == HG_EXEC_CUDA)
        hg_cuda_capture_begin(E->stream);
#endif
    E->capturing = g;
}

hg_graph_t *hg_exec_capture_end(hg_exec_t *E)
{
    hg_graph_t *g = E->capturing;
    if (!g)
        die("graph capture ended without its begin");
    E->capturing = NULL;
#ifndef HPGMG_NO_MPIX
    if (E->kind == HG_EXEC_HOSTSTREAM) {
        MPIX_Acc_hostgraph hgr = NULL;
        if (MPIX_Acc_Hoststream_end_capture(E->stream, &hgr) != MPI_SUCCESS)
            fprintf(stderr, "hpgmg-fv: host graph capture failed\n");
        g->exec = hgr;
    }
#endif
#ifdef HG_HAVE_CUDA
    if (E->kind == HG_EXEC_CUDA)
        g->exec = hg_cuda_capture_end(E->stream);
#endif
    if (!g->exec) {
        hg_exec_graph_free(g);
        return NULL;
    }
    return g;
}

void hg_exec_graph_launch(hg_exec_t *E, hg_graph_t *g)
{
    hg_exec_use(E);
#ifndef HPGMG_NO_MPIX
    if (g->kind == HG_EXEC_HOSTSTREAM &&
        MPIX_Acc_Hostgraph_launch((MPIX_Acc_hostgraph)g->exec, E->stream) != MPI_SUCCESS)
        die("MPIX_Acc_Hostgraph_launch failed");
#endif
#ifdef HG_HAVE_CUDA
    if (g->kind == HG_EXEC_CUDA)
        hg_cuda_graph_launch(g->exec, E->stream);
#endif
}

void hg_exec_graph_free(hg_graph_t *g)
{
    if (!g)
        return;
#ifndef HPGMG_NO_MPIX
    if (g->kind == HG_EXEC_HOSTSTREAM && g->exec) {
        MPIX_Acc_hostgraph hgr = g->exec;
        unsigned long errors = 0;
        if (MPIX_Acc_Hostgraph_errors(hgr, &errors) == MPI_SUCCESS && errors)
            fprintf(stderr, "hpgmg-fv: a host graph's launches had %lu errors\n", errors);
        MPIX_Acc_Hostgraph_free(&hgr);
    }
#endif
#ifdef HG_HAVE_CUDA
    if (g->kind == HG_EXEC_CUDA)
        hg_cuda_graph_destroy(g->exec);
#endif
    for (struct hg_block *b = g->blocks, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(g);
}
