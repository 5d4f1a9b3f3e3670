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
