/*
 * ex_accel_host.c - the examples' host backend (library host streams), and
 * backend selection.
 */
#include "ex_accel.h"
#include "ex_util.h"

#include <mpix_acc.h>

#include <pthread.h>

static void *host_alloc(size_t bytes, ex_mem_t kind)
{
    (void)kind;
    size_t n = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p)
        ex_die("out of host memory (%zu bytes)", bytes);
    return p;
}

static void host_free(void *p, ex_mem_t kind)
{
    (void)kind;
    free(p);
}

static ex_stream_t host_stream_create(void)
{
    MPIX_Acc_stream s = NULL;
    EX_MPI(MPIX_Acc_Hoststream_create(&s));
    return s;
}

static void host_stream_destroy(ex_stream_t s) { EX_MPI(MPIX_Acc_Hoststream_free(&s)); }

static void host_stream_sync(ex_stream_t s) { EX_MPI(MPIX_Acc_Hoststream_synchronize(s)); }

static void host_launch(ex_stream_t s, const ex_kernel_t *k)
{
    EX_MPI(MPIX_Acc_Hoststream_launch(s, k->host_fn, k->arg));
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} host_copy_arg_t;

static void host_copy_fn(void *p)
{
    host_copy_arg_t *a = p;
    memcpy(a->dst, a->src, a->n);
    free(a);
}

static void host_copy_async(ex_stream_t s, void *dst, const void *src, size_t n)
{
    host_copy_arg_t *a = malloc(sizeof *a);
    if (!a)
        ex_die("out of memory");
    *a = (host_copy_arg_t){dst, src, n};
    EX_MPI(MPIX_Acc_Hoststream_launch(s, host_copy_fn, a));
}

static void host_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

/* ---- events: the j-th wait waits for the j-th record ---- */
struct ex_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long recorded; /* records executed (by the recording stream) */
    unsigned long waited;   /* waits executed (by the waiting stream) */
};

static ex_event_t *host_event_create(void)
{
    ex_event_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        ex_die("out of memory");
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cv, NULL);
    return ev;
}

static void host_event_destroy(ex_event_t *ev)
{
    if (!ev)
        return;
    pthread_cond_destroy(&ev->cv);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}

static void host_event_reset(ex_event_t *ev)
{
    pthread_mutex_lock(&ev->mu);
    ev->recorded = ev->waited = 0;
    pthread_mutex_unlock(&ev->mu);
}

static void host_event_record_fn(void *p)
{
    ex_event_t *ev = p;
    pthread_mutex_lock(&ev->mu);
    ev->recorded++;
    pthread_cond_broadcast(&ev->cv);
    pthread_mutex_unlock(&ev->mu);
}

static void host_event_wait_fn(void *p)
{
    ex_event_t *ev = p;
    pthread_mutex_lock(&ev->mu);
    unsigned long target = ++ev->waited;
    while (ev->recorded < target)
        pthread_cond_wait(&ev->cv, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
}

static void host_event_record(ex_event_t *ev, ex_stream_t s)
{
    EX_MPI(MPIX_Acc_Hoststream_launch(s, host_event_record_fn, ev));
}

static void host_event_wait(ex_event_t *ev, ex_stream_t s)
{
    EX_MPI(MPIX_Acc_Hoststream_launch(s, host_event_wait_fn, ev));
}

static void host_finalize(void) {}

static const ex_accel_t host_accel = {
    .name = "host",
    .is_device = 0,
    .desc = "host streams (MPIX_Acc_Hoststream_launch; no GPU)",
    .alloc = host_alloc,
    .free = host_free,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .stream_sync = host_stream_sync,
    .launch = host_launch,
    .copy_async = host_copy_async,
    .copy = host_copy,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_reset = host_event_reset,
    .event_record = host_event_record,
    .event_wait = host_event_wait,
    .finalize = host_finalize,
};

const ex_accel_t *ex_accel_host(void) { return &host_accel; }

void ex_accel_preinit(const char *want)
{
    static const char *const vars[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "SLURM_LOCALID"};
    if (!strcmp(want, "host"))
        return;
    /* Load every kernel when the CUDA context is created: with CUDA's lazy
     * loading, a kernel launched for the first time behind a stream wait can
     * wait for that stream (the README's advice; the user's setting wins). */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            ex_accel_cuda_preinit(atoi(v));
            return;
        }
    }
}

#ifndef EX_HAVE_CUDA
void ex_accel_cuda_preinit(int local_rank) { (void)local_rank; }

const ex_accel_t *ex_accel_cuda(int local_rank, char *why, size_t whylen)
{
    (void)local_rank;
    snprintf(why, whylen, "built without CUDA");
    return NULL;
}
#endif

const ex_accel_t *ex_accel_select(const char *want, int local_rank, char *note, size_t notelen)
{
    char why[256] = "";
    note[0] = 0;
    if (!strcmp(want, "host"))
        return ex_accel_host();
    if (strcmp(want, "cuda") && strcmp(want, "auto"))
        ex_die("unknown backend '%s' (auto, host, cuda)", want);
    const ex_accel_t *a = ex_accel_cuda(local_rank, why, sizeof why);
    if (a)
        return a;
    if (!strcmp(want, "cuda"))
        ex_die("--backend cuda: CUDA not usable: %s", why);
    snprintf(note, notelen, "no GPU backend (%s): using host streams", why);
    return ex_accel_host();
}

void ex_fatal(const char *msg) { ex_die("%s", msg); }
