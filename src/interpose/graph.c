/*
 * graph.c - host graphs (MPIX_Acc_Hoststream_begin_capture(3)): a host
 * stream's work captured once, with its stream-ordered point-to-point
 * messages, and launched any number of times (issue 21, host streams).
 *
 * Capture. Between MPIX_Acc_Hoststream_begin_capture and _end_capture the
 * stream records its launches (accel/host.c) instead of running them. A
 * send or receive of contiguous data enqueued on it (MPIX_Acc_Isend/Irecv,
 * or a stream communicator's call) becomes a *template*: its arguments are
 * kept, its request is a placeholder that only a stream wait captured with
 * it takes (a host wait on it fails), and a *fire* entry is recorded. A
 * stream wait on such requests records a *wait* entry. Anything else that
 * would enqueue communication on the stream breaks the capture (its end
 * fails saying why): accel's mxa_stream_refuse_capture.
 *
 * Launch. The graph's entries run in order on the stream's thread. A fire
 * entry makes an operation from its template -- on the "none" stream, so it
 * starts at once, and matched in start order (mpix_acc_match=dynamic), so
 * every launch's messages match in the order the launches execute, on both
 * sides, whatever was called before -- and hands it to a waiting wait entry
 * (a FIFO per template: the wait of launch k takes launch k's operation) or
 * lets it go (its request was freed). A wait entry blocks the stream's
 * thread until its operations completed and writes their statuses where the
 * capture's wait said. No host call per launch besides the launch itself.
 * A template with MPI_PROC_NULL records no fire entry: as outside graphs
 * (p2p.c's mxi_proc_null_request), a launch makes no operation for it, and
 * a wait on it writes MPI's PROC_NULL status.
 * Collectives (streamcoll.c): a blocking stream-ordered collective records
 * its rounds -- templates without requests, a wait entry per round without
 * statuses, its copies and reductions as steps whose arguments (and heap
 * scratch) the graph keeps; its messages use a tag of their own on the
 * collective context, so plain collectives (matched at the call) and a
 * launch's (matched when it runs) never take each other's messages.
 * Counter protocol (CUDA graphs; host graphs with
 * MPIX_ACC_GRAPH_PROTOCOL=counter): the fire and wait entries become nodes
 * over graph words (accel.h) -- a fire node increments its template's
 * counter, a wait node takes a ticket and waits for the count of launches
 * the progress thread published -- and the progress thread's poller
 * (mxi_graph_poll) makes the operations and releases the waits. A CUDA
 * capture's state is found by the capture's id and freed with its graph (a
 * CUDA user object). A CUDA capture's collectives: their messages as
 * templates like a host stream's, their copies and reductions the copy and
 * kernel nodes their enqueues become.
 */
#include "interpose/interpose.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/typelayout.h"
#include "util/hashmap.h"
#include "util/waiter.h"

#define MXI_GRAPH_MAGIC 0x4d58484752415048ull /* "MXHGRAPH" */
/* a graph's wait reports every this many ns while it waits */
#define MXI_GRAPH_WAIT_REPORT_NS (10ull * 1000000000ull)

typedef struct mxi_graph_state mxi_graph_state_t;

/* A captured send or receive of a non-contiguous datatype: the graph's
 * packed buffer, which its template moves; a send's pack entry runs before
 * its fire, a receive's unpack entry after its captured wait (of the `got`
 * bytes that launch received). Kept with the graph. Host buffers: heap
 * memory, the entries run mxi_layout_pack/_unpack (a host graph's entries,
 * a CUDA graph's host nodes). CUDA captures of device and managed
 * buffers: a block of accel's packed-message pool taken at the
 * capture (none is allocated there), the pack kernel as the entries -- the
 * graph's kernel nodes --, the chunk list the type's (uploaded before the
 * capture), and the received length in a host-visible word the unpack
 * reads. */
typedef struct mxi_gpack {
    mxi_layout_t *layout; /* a reference: the type may be freed meanwhile */
    void *user_buf;
    int count;
    void *packed;
    _Atomic uint64_t got; /* a receive: bytes of the last finished launch */
    /* a CUDA capture's: the block's context and size (its device word at
     * packed + block), the chunks, the host-visible length word */
    void *ctx;
    size_t block;
    void *chunks;
    uint64_t *word;
} mxi_gpack_t;

struct mxi_tmpl {
    struct mxi_tmpl *next;
    _Atomic int refs; /* the graph's (or capture's), its request's while live */
    mxi_graph_state_t *gs;
    int is_send;
    void *buf;
    size_t bytes;
    int peer, tag; /* engine forms (MXE_ANY_SOURCE, MXE_PROC_NULL, MXE_ANY_TAG) */
    int synchronous;
    size_t eager_limit;
    mxe_comm_t ec; /* the communicator's, matched in start order */
    int *world_ranks;
    _Atomic int req_live; /* its request is the application's */
    int waited;           /* a captured stream wait takes its operations */
    pthread_mutex_t lock;
    mxe_op_t **fifo; /* operations made and not taken by the wait yet */
    size_t head, n, cap;
    /* counter protocol: word 0 counts the launches that reached the fire
     * node (accel's graph words); made: operations made from them (the
     * progress thread's) */
    uint64_t *words;
    int words_kind;
    uint64_t made;
    /* a CUDA capture's: the buffer's memory type, told at the capture, and
     * its registration with the transport (device memory): the progress
     * thread makes operations without a driver call of its own or UCX's
     * (a thread blocked in cudaGraphLaunch holds a driver lock that UCX's
     * memory type detection waits for: 2 x H100, session 21) */
    int memtype; /* -1: ask at each launch (host graphs) */
    void *reg;
    mxi_gpack_t *pack; /* a non-contiguous datatype's (the graph keeps it), or NULL */
};

typedef struct mxi_gwait {
    struct mxi_gwait *next;
    int n;
    mxi_tmpl_t **t;      /* all of one capture (their gs) */
    MPI_Status **status; /* per template, the status to write (NULL: none; a
                            collective's round: no statuses at all) */
    /* counter protocol: word 0 the wait node's tickets, word
     * MXA_GRAPH_DONE_WORD the launches whose operations completed
     * (published by the progress thread) */
    uint64_t *words;
    int words_kind;
    uint64_t published;
    uint64_t behind_since, reported; /* a launch's wait outstanding since (ns) */
} mxi_gwait_t;

/* memory of the graph's steps (collectives, packed datatypes), freed with
 * it (by fn, or free) */
typedef struct mxi_gkeep {
    struct mxi_gkeep *next;
    void *p;
    void (*fn)(void *);
} mxi_gkeep_t;

/* A capture's, then its graph's, templates and waits. */
struct mxi_graph_state {
    mxa_stream_t *s;                 /* while capturing */
    mxi_tmpl_t *tmpls, **tmpls_tail; /* in capture order */
    mxi_gwait_t *waits;
    mxi_gkeep_t *keep;
    _Atomic unsigned long errors; /* operations that failed, at launches */
    mxi_graph_state_t *next_capture;
    /* counter protocol (MPIX_ACC_GRAPH_PROTOCOL=counter on host streams):
     * fire and wait are counters the progress thread watches (graph_poll),
     * on the list of counted states from capture to free */
    int counter;
    mxi_graph_state_t *next_counted;
    /* a CUDA capture's (counter protocol; s is NULL: several streams may
     * join one capture): its id, unique in the process; freed when the
     * driver destroys its graph and the executable graphs made from it
     * (mxi_cuda_graph_gone) */
    int cuda;
    uint64_t cap_id;
};

struct mpix_acc_hostgraph {
    uint64_t magic;
    mxa_host_graph_t *hg;
    mxi_graph_state_t *gs;
};

/* captures, templates and waits of a capture, counted states (graph_poll) */
static pthread_mutex_t mxi_cap_lock = PTHREAD_MUTEX_INITIALIZER;
static mxi_graph_state_t *mxi_captures;
static mxi_graph_state_t *mxi_counted;
static _Atomic int mxi_ncounted;
/* statistics (MPIX_ACC_STATS): counted states made, operations the poller
 * made, launches whose waits it released */
static _Atomic unsigned long long mxi_nstates, mxi_nmade, mxi_ndone;
/* live graphs by address: a handle is looked up, never dereferenced blind */
static mxu_locked_map_t mxi_graphs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void mxi_state_free(mxi_graph_state_t *gs);

/* gs onto the poller's list of counted states (mxi_cap_lock held) */
static void mxi_counted_link(mxi_graph_state_t *gs)
{
    gs->next_counted = mxi_counted;
    mxi_counted = gs;
    atomic_fetch_add_explicit(&mxi_ncounted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mxi_nstates, 1, memory_order_relaxed);
}

/* The driver destroyed a CUDA capture's graph and every executable graph
 * made from it (a driver thread: no driver call here, graph words go to
 * the backend's free list). */
static void mxi_cuda_graph_gone(void *arg)
{
    mxi_graph_state_t *gs = arg;
    pthread_mutex_lock(&mxi_cap_lock);
    for (mxi_graph_state_t **pp = &mxi_captures; *pp; pp = &(*pp)->next_capture)
        if (*pp == gs) {
            *pp = gs->next_capture;
            break;
        }
    pthread_mutex_unlock(&mxi_cap_lock);
    mxi_state_free(gs);
}

/* A CUDA stream's capture: found by its id, else made -- counted, and freed
 * with the capture's graph. NULL (logged) when the capture cannot be told
 * or its graph not given the state's lifetime. */
static mxi_graph_state_t *mxi_cuda_capture_of(mxa_stream_t *s)
{
    uint64_t id = 0;
    void *graph = NULL;
    if (mxa_stream_capture_info(s, &id, &graph) != MXU_OK)
        return NULL;
    pthread_mutex_lock(&mxi_cap_lock);
    mxi_graph_state_t *g = mxi_captures;
    while (g && !(g->cuda && g->cap_id == id))
        g = g->next_capture;
    if (!g && (g = calloc(1, sizeof(*g))) != NULL) {
        g->cuda = 1;
        g->cap_id = id;
        g->counter = 1;
        if (mxa_graph_on_destroy(s, graph, mxi_cuda_graph_gone, g) != MXU_OK) {
            free(g);
            g = NULL;
        } else {
            g->next_capture = mxi_captures;
            mxi_captures = g;
            mxi_counted_link(g);
        }
    }
    pthread_mutex_unlock(&mxi_cap_lock);
    return g;
}

static mxi_graph_state_t *mxi_capture_of(mxa_stream_t *s)
{
    if (s->kind == MXA_KIND_CUDA)
        return mxi_cuda_capture_of(s);
    pthread_mutex_lock(&mxi_cap_lock);
    mxi_graph_state_t *g = mxi_captures;
    while (g && g->s != s)
        g = g->next_capture;
    pthread_mutex_unlock(&mxi_cap_lock);
    return g;
}

int mxi_graph_capturing(const mxa_stream_t *s)
{
    return s && (s->kind == MXA_KIND_HOST || s->kind == MXA_KIND_CUDA) &&
           mxa_stream_capturing((mxa_stream_t *)s);
}

/* The capture of s cannot be completed correctly: a host stream's capture
 * is broken (its end fails saying why), a CUDA stream's invalidated (the
 * application's end of capture fails). */
void mxi_graph_break(mxa_stream_t *s, const char *why)
{
    if (s->kind == MXA_KIND_HOST)
        mxa_host_capture_break(s, why);
    else
        (void)mxa_stream_refuse_capture(s, why);
}

static void mxi_tmpl_release(mxi_tmpl_t *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < t->n; i++) { /* (none when no launch is in flight) */
        mxe_op_t *op = t->fifo[(t->head + i) % t->cap];
        if (op)
            mxe_op_release(op);
    }
    free(t->fifo);
    free(t->world_ranks);
    mxe_mem_deregister(t->reg);
    mxa_graph_words_free(t->words_kind, t->words);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* the placeholder op of a template's request was freed */
static void mxi_tmpl_req_gone(void *user)
{
    mxi_tmpl_t *t = user;
    /* (host graphs: _end_capture refuses the graph; a CUDA capture's end
     * is not seen) */
    if (t->pack && t->pack->ctx && !t->waited && t->peer != MXE_PROC_NULL)
        MXU_LOG(MXU_LOG_ERROR,
                "the request of a %s of a non-contiguous datatype captured into a CUDA graph "
                "was freed without a stream wait in the capture: the graph packs and unpacks "
                "around that wait, so its launches may overwrite the packed bytes in flight "
                "(send) or never unpack them (receive); wait for it inside the capture",
                t->is_send ? "send" : "receive");
    atomic_store_explicit(&t->req_live, 0, memory_order_release);
    mxi_tmpl_release(t);
}

static void mxi_gwait_free(mxi_gwait_t *w)
{
    mxa_graph_words_free(w->words_kind, w->words);
    free(w->t);
    free(w->status);
    free(w);
}

static void mxi_state_free(mxi_graph_state_t *gs)
{
    if (gs->counter) { /* off the poller's list first (it polls under the lock) */
        pthread_mutex_lock(&mxi_cap_lock);
        for (mxi_graph_state_t **pp = &mxi_counted; *pp; pp = &(*pp)->next_counted)
            if (*pp == gs) {
                *pp = gs->next_counted;
                atomic_fetch_sub_explicit(&mxi_ncounted, 1, memory_order_relaxed);
                break;
            }
        pthread_mutex_unlock(&mxi_cap_lock);
    }
    for (mxi_gwait_t *w = gs->waits, *nw; w; w = nw) {
        nw = w->next;
        mxi_gwait_free(w);
    }
    for (mxi_tmpl_t *t = gs->tmpls, *nt; t; t = nt) {
        nt = t->next;
        mxi_tmpl_release(t);
    }
    for (mxi_gkeep_t *k = gs->keep, *nk; k; k = nk) {
        nk = k->next;
        if (k->fn)
            k->fn(k->p);
        else
            free(k->p);
        free(k);
    }
    free(gs);
}

/* ---------------------------------------------------------- at launches */

static void mxi_fifo_push(mxi_tmpl_t *t, mxe_op_t *op)
{
    pthread_mutex_lock(&t->lock);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4;
        mxe_op_t **f = malloc(cap * sizeof(*f));
        if (!f) {
            pthread_mutex_unlock(&t->lock);
            MXU_LOG(MXU_LOG_ERROR, "host graph: out of memory queueing an operation");
            if (op)
                mxe_op_release(op);
            atomic_fetch_add(&t->gs->errors, 1);
            return;
        }
        for (size_t i = 0; i < t->n; i++)
            f[i] = t->fifo[(t->head + i) % t->cap];
        free(t->fifo);
        t->fifo = f;
        t->head = 0;
        t->cap = cap;
    }
    t->fifo[(t->head + t->n) % t->cap] = op;
    t->n++;
    pthread_mutex_unlock(&t->lock);
}

/* the oldest operation made and not taken; *none when there is none */
static mxe_op_t *mxi_fifo_pop(mxi_tmpl_t *t, int *none)
{
    pthread_mutex_lock(&t->lock);
    mxe_op_t *op = NULL;
    *none = t->n == 0;
    if (t->n) {
        op = t->fifo[t->head];
        t->head = (t->head + 1) % t->cap;
        t->n--;
    }
    pthread_mutex_unlock(&t->lock);
    return op;
}

static void mxi_gpack_free(void *p)
{
    mxi_gpack_t *gp = p;
    mxi_layout_put(gp->layout);
    if (gp->ctx) /* the graph is gone with its launches: the block is free */
        mxa_dev_temp_put(gp->ctx, gp->packed, gp->block, 0, gp->word, NULL);
    else
        free(gp->packed);
    free(gp);
}

/* a CUDA capture's pack or unpack: the pack kernel on the capturing
 * stream (a kernel node); an unpack takes the launch's received length
 * from the host word, copied into the block's device word first */
static mxu_status_t mxi_gpack_kernel(mxa_stream_t *s, const mxi_gpack_t *gp, int unpack)
{
    mxa_pack_args_t a =
        mxi_layout_pack_args(gp->layout, gp->user_buf, gp->packed, gp->chunks, gp->count, unpack);
    if (unpack)
        a.limit_at = (uint64_t)(uintptr_t)gp->word;
    return mxa_stream_pack_captured(s, &a, unpack ? (char *)gp->packed + gp->block : NULL);
}

/* a non-contiguous send's pack entry (the stream's thread, before its fire) */
static void mxi_gpack_pack(void *arg)
{
    mxi_gpack_t *gp = arg;
    mxi_layout_pack(gp->layout, gp->user_buf, gp->count, gp->packed);
}

/* a non-contiguous receive's unpack entry (after its captured wait) */
static void mxi_gpack_unpack(void *arg)
{
    mxi_gpack_t *gp = arg;
    mxi_layout_unpack(gp->layout, gp->packed, atomic_load_explicit(&gp->got, memory_order_acquire),
                      gp->user_buf, gp->count);
}

/* a fire entry (the stream's thread) */
static void mxi_tmpl_fire(void *arg)
{
    mxi_tmpl_t *t = arg;
    mxe_op_t *op = NULL;
    mxa_stream_t *none = mxa_none_stream();
    mxu_status_t st =
        t->is_send ? mxe_op_create_send_mt(none, t->buf, t->bytes, &t->ec, t->peer, t->tag,
                                           t->synchronous ? 0 : t->eager_limit, t->memtype, &op)
                   : mxe_op_create_recv_mt(none, t->buf, t->bytes, &t->ec, t->peer, t->tag, 0,
                                           t->memtype, &op);
    if (st == MXU_OK) {
        op->synchronous = t->synchronous;
        op->reg = t->reg;
        /* on a host stream's thread (a launch's entry) in that stream's
         * order with its other operations; from the poller (counter
         * protocol) when the poller makes it */
        if ((st = mxe_op_submit_on(op, mxa_host_current_stream())) != MXU_OK) {
            mxe_op_release(op);
            mxe_op_release(op);
        }
    }
    if (st != MXU_OK) {
        MXU_LOG(MXU_LOG_ERROR, "host graph: the %s of a launch (peer %d, tag %d) failed: %s",
                t->is_send ? "send" : "receive", t->peer, t->tag, mxu_status_string(st));
        atomic_fetch_add(&t->gs->errors, 1);
        op = NULL;
    }
    if (t->waited)
        mxi_fifo_push(t, op); /* NULL: the wait reports the failure */
    else if (op)
        mxe_op_release(op); /* its request was freed: it completes alone */
}

/* Template i of wait w in this launch, its operation op complete (or NULL:
 * its fire failed, or none was made when `none`): the status, the error
 * count, the operation released. */
static void mxi_gwait_finish(mxi_gwait_t *w, int i, mxe_op_t *op, int none)
{
    MPI_Status *stp = w->status ? w->status[i] : NULL;
    if (w->t[i]->peer == MXE_PROC_NULL) { /* no operation (no fire entry): MPI's status */
        if (stp) {
            mxi_proc_null_status(stp);
            stp->MPI_ERROR = MPI_SUCCESS;
        }
        return;
    }
    if (none)
        MXU_LOG(MXU_LOG_ERROR, "host graph: a wait found no operation of its launch");
    if (!op || op->result.error != MXU_OK)
        atomic_fetch_add(&w->t[i]->gs->errors, 1);
    if (op && op->result.error != MXU_OK && !w->status) /* a collective's: no status */
        MXU_LOG(MXU_LOG_ERROR, "graph: a collective's %s rank %d (%zu bytes) failed: %s",
                op->type == MXE_OP_SEND ? "send to" : "receive from", op->peer, op->bytes,
                mxu_status_string(op->result.error));
    if (stp) {
        if (op) {
            mxi_fill_status(op, stp);
        } else {
            stp->MPI_ERROR = MPI_ERR_INTERN;
        }
    }
    mxi_gpack_t *gp = w->t[i]->pack;
    if (gp) { /* what the unpack entry after this wait takes */
        uint64_t got = op ? (uint64_t)op->result.bytes : 0;
        atomic_store_explicit(&gp->got, got, memory_order_release);
        if (gp->word) /* before the launch is published */
            __atomic_store_n(gp->word, got, __ATOMIC_RELEASE);
    }
    if (op)
        mxe_op_release(op);
}

/* a wait entry (the stream's thread): this launch's operations */
static void mxi_gwait_run(void *arg)
{
    mxi_gwait_t *w = arg;
    for (int i = 0; i < w->n; i++) {
        if (w->t[i]->peer == MXE_PROC_NULL) {
            mxi_gwait_finish(w, i, NULL, 0);
            continue;
        }
        int none = 0;
        mxe_op_t *op = mxi_fifo_pop(w->t[i], &none);
        if (op) {
            uint64_t start = mxu_now_ns();
            while (mxe_op_wait_host(op, (int64_t)MXI_GRAPH_WAIT_REPORT_NS) != MXU_OK)
                MXU_LOG(MXU_LOG_WARN,
                        "host graph: a launch's wait for its %s (peer %d, tag %d) is still "
                        "waiting after %.0f s",
                        op->type == MXE_OP_SEND ? "send" : "receive", op->peer, op->tag,
                        (double)(mxu_now_ns() - start) / 1e9);
        }
        mxi_gwait_finish(w, i, op, none);
    }
}

/* ------------------------------------------- counter protocol (poller) */

/* The oldest operation made and not taken, left in place: 1 when there is
 * one (*op may be NULL: its fire failed), else 0. */
static int mxi_fifo_peek(mxi_tmpl_t *t, mxe_op_t **op)
{
    pthread_mutex_lock(&t->lock);
    int any = t->n > 0;
    *op = any ? t->fifo[t->head] : NULL;
    pthread_mutex_unlock(&t->lock);
    return any;
}

/* Wait w's next launch: when its wait node has taken its ticket (so its
 * statuses are written where and when the host protocol's wait entry would
 * write them: a launch of only MPI_PROC_NULL templates has no operation to
 * wait for) and every template's operation of it exists and is complete,
 * finish them, publish the count of launches done (the wait node of that
 * launch goes on) and return 1; else 0. */
static int mxi_gwait_advance(mxi_gwait_t *w)
{
    if (atomic_load_explicit((_Atomic uint64_t *)w->words, memory_order_acquire) <= w->published)
        return 0;
    for (int i = 0; i < w->n; i++) {
        mxe_op_t *op;
        if (w->t[i]->peer == MXE_PROC_NULL)
            continue;
        if (!mxi_fifo_peek(w->t[i], &op) || (op && !mxe_op_is_complete(op)))
            return 0;
    }
    for (int i = 0; i < w->n; i++) {
        int none = 0;
        mxe_op_t *op = w->t[i]->peer == MXE_PROC_NULL ? NULL : mxi_fifo_pop(w->t[i], &none);
        mxi_gwait_finish(w, i, op, none);
    }
    w->published++;
    atomic_store_explicit((_Atomic uint64_t *)(w->words + MXA_GRAPH_DONE_WORD), w->published,
                          memory_order_release);
    return 1;
}

/* Has t's fire node run more often than the poller made operations? */
static int mxi_tmpl_fired(const mxi_tmpl_t *t)
{
    return t->words &&
           t->made < atomic_load_explicit((_Atomic uint64_t *)t->words, memory_order_acquire);
}

/* The progress thread's poller: operations for the fire counts, the
 * completed launches of every wait, a report every 10 s for a wait whose
 * launch is still out. */
static unsigned mxi_graph_poll(void)
{
    if (atomic_load_explicit(&mxi_ncounted, memory_order_relaxed) == 0)
        return 0;
    unsigned work = 0;
    uint64_t now = 0;
    pthread_mutex_lock(&mxi_cap_lock);
    for (mxi_graph_state_t *gs = mxi_counted; gs; gs = gs->next_counted) {
        /* operations in the order their fire nodes ran -- launch by launch,
         * and within a launch in capture order (the order of the nodes on a
         * stream) -- so that two templates on one (communicator, peer, tag)
         * start, and match, as they would outside a graph */
        for (;;) {
            uint64_t low = UINT64_MAX;
            for (mxi_tmpl_t *t = gs->tmpls; t; t = t->next)
                if (t->made < low && mxi_tmpl_fired(t))
                    low = t->made;
            if (low == UINT64_MAX)
                break;
            for (mxi_tmpl_t *t = gs->tmpls; t; t = t->next)
                if (t->made == low && mxi_tmpl_fired(t)) {
                    mxi_tmpl_fire(t); /* (the buffer's context bound at its registration) */
                    t->made++;
                    work++;
                    atomic_fetch_add_explicit(&mxi_nmade, 1, memory_order_relaxed);
                }
        }
        for (mxi_gwait_t *w = gs->waits; w; w = w->next) {
            while (mxi_gwait_advance(w)) {
                work++;
                atomic_fetch_add_explicit(&mxi_ndone, 1, memory_order_relaxed);
            }
            uint64_t tickets =
                atomic_load_explicit((_Atomic uint64_t *)w->words, memory_order_acquire);
            if (tickets <= w->published) {
                w->behind_since = 0;
                continue;
            }
            now = now ? now : mxu_now_ns();
            if (!w->behind_since) {
                w->behind_since = w->reported = now;
            } else if (now - w->reported >= MXI_GRAPH_WAIT_REPORT_NS) {
                w->reported = now;
                MXU_LOG(MXU_LOG_WARN,
                        "graph: the wait of launch %" PRIu64 " (of %d message(s)) is still "
                        "waiting for its operations after %.0f s",
                        w->published + 1, w->n, (double)(now - w->behind_since) / 1e9);
            }
        }
    }
    pthread_mutex_unlock(&mxi_cap_lock);
    return work;
}

static int mxi_graph_busy(void)
{
    return atomic_load_explicit(&mxi_ncounted, memory_order_relaxed) > 0;
}

void mxi_graph_init(void) { (void)mxe_add_poller(mxi_graph_poll, mxi_graph_busy); }

int mxi_graph_stats(unsigned long long *states, unsigned long long *made, unsigned long long *done)
{
    *states = atomic_load(&mxi_nstates);
    *made = atomic_load(&mxi_nmade);
    *done = atomic_load(&mxi_ndone);
    return *states > 0;
}

/* MPI_Finalize, after the drain: every counted wait is released (a launch
 * still waiting would hold its stream forever once the progress thread has
 * stopped); said when a launch was still out. */
void mxi_graph_finalize(void)
{
    pthread_mutex_lock(&mxi_cap_lock);
    for (mxi_graph_state_t *gs = mxi_counted; gs; gs = gs->next_counted)
        for (mxi_gwait_t *w = gs->waits; w; w = w->next) {
            uint64_t tickets =
                atomic_load_explicit((_Atomic uint64_t *)w->words, memory_order_acquire);
            if (tickets > w->published)
                MXU_LOG(MXU_LOG_ERROR,
                        "MPI_Finalize: a graph's launch %" PRIu64 " still waits for its "
                        "operations; released without them",
                        w->published + 1);
            atomic_store_explicit((_Atomic uint64_t *)(w->words + MXA_GRAPH_DONE_WORD), UINT64_MAX,
                                  memory_order_release);
        }
    pthread_mutex_unlock(&mxi_cap_lock);
}

/* ------------------------------------------------------- in the capture */

/* A template (engine forms of peer and tag) with `refs` references, its
 * communicator view matched in start order (the order launches execute),
 * not on the stream-executed path; NULL when out of memory. */
static mxi_tmpl_t *mxi_tmpl_new(mxi_graph_state_t *gs, int is_send, void *buf, size_t bytes,
                                const mxe_comm_t *ec, int peer, int tag, int synchronous,
                                size_t eager_limit, int refs)
{
    mxi_tmpl_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->gs = gs;
    t->is_send = is_send;
    t->buf = buf;
    t->bytes = bytes;
    t->peer = peer;
    t->tag = tag;
    t->synchronous = synchronous;
    t->eager_limit = eager_limit;
    t->memtype = -1;
    t->ec = *ec;
    /* start order takes it off the stream-executed path (engine.c); ec.sx
     * stays, so its envelopes say they were not counted (match.c) */
    t->ec.match_dynamic = 1;
    if (ec->world_ranks) {
        t->world_ranks = malloc(sizeof(int) * (size_t)ec->size);
        if (!t->world_ranks) {
            free(t);
            return NULL;
        }
        memcpy(t->world_ranks, ec->world_ranks, sizeof(int) * (size_t)ec->size);
        t->ec.world_ranks = t->world_ranks;
    }
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->refs, refs);
    return t;
}

static void mxi_tmpl_link(mxi_graph_state_t *gs, mxi_tmpl_t *t)
{
    pthread_mutex_lock(&mxi_cap_lock);
    t->next = NULL;
    if (!gs->tmpls_tail)
        gs->tmpls_tail = &gs->tmpls;
    *gs->tmpls_tail = t;
    gs->tmpls_tail = &t->next;
    pthread_mutex_unlock(&mxi_cap_lock);
}

/* A wait entry for up to n templates, with a status pointer per template
 * when `statuses`; NULL when out of memory. */
static mxi_gwait_t *mxi_gwait_new(int n, int statuses)
{
    mxi_gwait_t *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->t = calloc((size_t)(n ? n : 1), sizeof(*w->t));
    w->status = statuses ? calloc((size_t)(n ? n : 1), sizeof(*w->status)) : NULL;
    if (!w->t || (statuses && !w->status)) {
        mxi_gwait_free(w);
        return NULL;
    }
    return w;
}

/* Record template t's fire on capturing stream s: a fire entry, or with the
 * counter protocol a fire node on its counter. (Before t is linked: the
 * poller reads t->words.) */
static mxu_status_t mxi_rec_fire(mxa_stream_t *s, mxi_graph_state_t *gs, mxi_tmpl_t *t)
{
    if (!gs->counter)
        return mxa_host_capture_add(s, mxi_tmpl_fire, t);
    MXU_TRY(mxa_graph_words_alloc(s, &t->words));
    t->words_kind = s->kind;
    return mxa_stream_graph_fire(s, t->words);
}

/* Record wait entry w on capturing stream s and keep it with gs (freed with
 * it); when that fails w is freed. */
static mxu_status_t mxi_gwait_record(mxa_stream_t *s, mxi_graph_state_t *gs, mxi_gwait_t *w)
{
    mxu_status_t st;
    if (!gs->counter) {
        st = mxa_host_capture_add(s, mxi_gwait_run, w);
    } else if ((st = mxa_graph_words_alloc(s, &w->words)) == MXU_OK) {
        w->words_kind = s->kind;
        st = mxa_stream_graph_wait(s, w->words);
    }
    if (st != MXU_OK) {
        mxi_gwait_free(w);
        return st;
    }
    pthread_mutex_lock(&mxi_cap_lock);
    w->next = gs->waits;
    gs->waits = w;
    pthread_mutex_unlock(&mxi_cap_lock);
    return MXU_OK;
}

/* the capture of s; else its capture is broken, saying what could not be recorded */
static mxi_graph_state_t *mxi_capture_or_break(mxa_stream_t *s, const char *what)
{
    mxi_graph_state_t *gs = mxi_capture_of(s);
    if (!gs) {
        char why[200];
        snprintf(why, sizeof(why), "%s: the stream's capture is unknown", what);
        mxi_graph_break(s, why);
    }
    return gs;
}

/* A CUDA capture's template of `bytes` at buf: its memory type told now,
 * device memory registered with the transport and the buffer's context
 * bound on the progress thread, so that a launch's operation needs no
 * driver call (design.md 6d). */
static mxu_status_t mxi_tmpl_prepare(const mxi_graph_state_t *gs, mxi_tmpl_t *t)
{
    if (!gs->cuda || t->peer == MXE_PROC_NULL || t->bytes == 0)
        return MXU_OK;
    t->memtype = (int)mxa_memtype(t->buf, t->bytes);
    return mxe_mem_register(t->buf, t->bytes, t->memtype, &t->reg);
}

/* keep p with capture gs (freed by fn, or free, with it); 0 when out of memory */
static int mxi_keep_in(mxi_graph_state_t *gs, void *p, void (*fn)(void *))
{
    mxi_gkeep_t *k = malloc(sizeof(*k));
    if (!k)
        return 0;
    k->p = p;
    k->fn = fn;
    pthread_mutex_lock(&mxi_cap_lock);
    k->next = gs->keep;
    gs->keep = k;
    pthread_mutex_unlock(&mxi_cap_lock);
    return 1;
}

mxu_status_t mxi_graph_keep(mxa_stream_t *s, void *p)
{
    mxi_graph_state_t *gs = mxi_capture_or_break(s, "a collective's memory");
    if (!gs || !mxi_keep_in(gs, p, NULL)) {
        free(p);
        if (gs)
            mxa_host_capture_break(s, "out of memory recording a collective");
        return gs ? MXU_ERR_NO_MEMORY : MXU_ERR_INVALID_STREAM;
    }
    return MXU_OK;
}

mxu_status_t mxi_graph_step(mxa_stream_t *s, void (*fn)(void *), void *arg)
{
    mxu_status_t st = mxi_graph_keep(s, arg);
    if (st == MXU_OK && (st = mxa_host_capture_add(s, fn, arg)) != MXU_OK)
        mxa_host_capture_break(s, "out of memory recording a collective's step");
    return st;
}

mxu_status_t mxi_graph_coll_post(mxa_stream_t *s, int is_send, void *buf, size_t bytes,
                                 const mxe_comm_t *ec, int peer, int tag, size_t eager_limit,
                                 mxi_tmpl_t **out)
{
    *out = NULL;
    mxi_graph_state_t *gs = mxi_capture_or_break(s, "a collective's message");
    if (!gs)
        return MXU_ERR_INVALID_STREAM;
    /* no request: the graph's reference only; the round's wait takes its
     * operations */
    mxi_tmpl_t *t = mxi_tmpl_new(gs, is_send, buf, bytes, ec, peer, tag, 0, eager_limit, 1);
    if (!t) {
        mxi_graph_break(s, "out of memory recording a collective");
        return MXU_ERR_NO_MEMORY;
    }
    t->waited = 1;
    mxu_status_t st = mxi_tmpl_prepare(gs, t);
    if (st != MXU_OK) {
        mxi_tmpl_release(t);
        mxi_graph_break(s, "a collective's buffer could not be registered (see above)");
        return st;
    }
    st = mxi_rec_fire(s, gs, t);
    if (st != MXU_OK) {
        mxi_tmpl_release(t);
        mxi_graph_break(s, "out of memory recording a collective");
        return st;
    }
    mxi_tmpl_link(gs, t); /* freed with the state from here on */
    *out = t;
    return MXU_OK;
}

mxu_status_t mxi_graph_coll_wait(mxa_stream_t *s, mxi_tmpl_t *const *t, int n)
{
    mxi_graph_state_t *gs = mxi_capture_or_break(s, "a collective's round");
    if (!gs)
        return MXU_ERR_INVALID_STREAM;
    mxi_gwait_t *w = mxi_gwait_new(n, 0);
    mxu_status_t st = MXU_ERR_NO_MEMORY;
    if (w) {
        memcpy(w->t, t, sizeof(*w->t) * (size_t)n);
        w->n = n;
        st = mxi_gwait_record(s, gs, w);
    }
    if (st != MXU_OK)
        mxi_graph_break(s, "out of memory recording a collective");
    return st;
}

/* a free block of accel's pool for a CUDA capture's packed bytes: also one
 * that a finished request not reaped yet holds (the set-up call's) */
static mxu_status_t mxi_gpack_take(mxa_stream_t *s, void *ctx, size_t bytes, mxi_gpack_t *gp)
{
    size_t want = bytes ? bytes : 1;
    if (mxa_dev_temp_take(ctx, s, want, 0, &gp->packed, &gp->block, &gp->word) == MXU_OK)
        return MXU_OK;
    mxi_reap(1);
    return mxa_dev_temp_take(ctx, s, want, 0, &gp->packed, &gp->block, &gp->word);
}

/* a pack or unpack entry fn(gp) of a host buffer: a host graph's entry, or
 * on a CUDA stream a host node (cuLaunchHostFunc captured) */
static mxu_status_t mxi_gpack_host_entry(mxa_stream_t *s, const mxi_graph_state_t *gs,
                                         void (*fn)(void *), mxi_gpack_t *gp)
{
    return gs->cuda ? mxa_stream_host_call(s, fn, gp) : mxa_host_capture_add(s, fn, gp);
}

/* A CUDA capture's packed buffer for count elements of layout at buf (the
 * layout reference passes to *out, or is dropped on failure): made of what
 * exists before the capture -- the type's chunk list in the stream's
 * context and a free block of accel's pool, both there after the same call
 * outside the capture -- never allocated here (that would invalidate the
 * capture in CUDA's global mode). Kept with the graph's state. */
static int mxi_gpack_dev_new(mxa_stream_t *s, mxi_graph_state_t *gs, mxi_layout_t *layout,
                             void *buf, int count, size_t bytes, const char *what, MPI_Comm comm,
                             mxi_gpack_t **out)
{
    const char *why = NULL;
    void *ctx = mxa_stream_device_ctx(s), *chunks = NULL;
    mxi_gpack_t *gp = calloc(1, sizeof(*gp));
    if (!gp)
        why = "out of memory";
    else if (!ctx)
        why = "the stream has no device context";
    else if (!mxi_layout_contiguous(layout) && !(chunks = mxi_layout_dev_chunks(layout, ctx, 0)))
        why = "the datatype's chunk list is not in the stream's device memory yet";
    else if (mxi_gpack_take(s, ctx, bytes, gp) != MXU_OK)
        why = "no packed-message block of its size is free for the graph";
    else if (!mxi_keep_in(gs, gp, mxi_gpack_free)) {
        mxa_dev_temp_put(ctx, gp->packed, gp->block, 0, gp->word, s);
        why = "out of memory";
    }
    if (why) {
        free(gp);
        mxi_layout_put(layout);
        mxi_graph_break(s, "a non-contiguous datatype's packing could not be set up (see above)");
        return mxi_raise(comm, MXI_E_UNSUPPORTED,
                         "a %s of a non-contiguous datatype on a CUDA stream being captured: %s. "
                         "Set-up happens outside captures: make the same call on this stream "
                         "once before capturing (device buffers); the capture is broken",
                         what, why);
    }
    /* kept (and freed) with the graph from here on */
    gp->layout = layout;
    gp->user_buf = buf;
    gp->count = count;
    gp->ctx = ctx;
    gp->chunks = chunks;
    *out = gp;
    return MPI_SUCCESS;
}

/* The request of something captured on s: op (a local op never submitted,
 * one reference: the request's), complete with MXU_ERR_CAPTURED for any
 * wait but a captured stream wait; flag says what it is (MXI_OPF_TEMPLATE:
 * op->user is the template; MXI_OPF_ORDERED: nothing to wait for on s). */
static int mxi_placeholder_request(mxa_stream_t *s, mxi_origin_t origin, MPI_Comm comm,
                                   mxe_op_t *op, unsigned flag, MPI_Request *req)
{
    op->user_flags |= flag;
    op->user_origin = (int)origin;
    op->stream = s; /* (never submitted: where a stream communicator's wait looks) */
    op->result.error = MXU_ERR_CAPTURED;
    atomic_store_explicit(&op->state, MXE_STATE_COMPLETE, memory_order_release);
    memcpy(&op->user_aux, &comm,
           sizeof(comm) < sizeof(op->user_aux) ? sizeof(comm) : sizeof(op->user_aux));
    MPI_Request greq;
    int rc = PMPI_Grequest_start(mxi_greq_query, mxi_greq_free, mxi_greq_cancel, op, &greq);
    if (rc != MPI_SUCCESS) {
        mxe_op_release(op); /* (a template's: drops its request reference) */
        return mxi_raise_code(comm, rc);
    }
    atomic_fetch_add_explicit(&mxi.greqs_alive, 1, memory_order_relaxed);
    memcpy(&op->user_handle, &greq,
           sizeof(greq) < sizeof(op->user_handle) ? sizeof(greq) : sizeof(op->user_handle));
    mxi_request_track(greq, op);
    *req = greq;
    return MPI_SUCCESS;
}

int mxi_graph_p2p(mxa_stream_t *s, mxi_origin_t origin, int is_send, void *buf, size_t bytes,
                  struct mxi_layout *layout, int count, int peer, int tag, MPI_Comm comm,
                  mxi_comm_t *c, int synchronous, MPI_Request *req)
{
    const char *what = is_send ? "send" : "receive";
    mxi_graph_state_t *gs = mxi_capture_of(s);
    if (!gs) {
        mxi_layout_put(layout);
        mxi_graph_break(s, "the stream's capture cannot be told (see above)");
        return mxi_raise(comm, MXI_E_INTERN, "captured %s: the stream's capture is unknown", what);
    }
    /* a non-contiguous datatype: the template moves the graph's packed
     * buffer (a CUDA capture's of a device or managed buffer: device
     * memory and the pack kernel; else heap memory and host entries) */
    mxi_gpack_t *gp = NULL;
    if (layout && gs->cuda && buf && mxa_memtype(buf, bytes) != MXA_MEM_HOST) {
        int rc = mxi_gpack_dev_new(s, gs, layout, buf, count, bytes, what, comm, &gp);
        if (rc != MPI_SUCCESS)
            return rc;
        buf = gp->packed;
    } else if (layout) {
        gp = calloc(1, sizeof(*gp));
        void *packed = gp && bytes ? malloc(bytes) : NULL;
        if (!gp || (bytes && !packed) || !mxi_keep_in(gs, gp, mxi_gpack_free)) {
            free(packed);
            free(gp);
            mxi_layout_put(layout);
            mxi_graph_break(s, "out of memory recording a non-contiguous datatype");
            return mxi_raise(comm, MXI_E_NO_MEM, "captured %s", what);
        }
        /* kept (and freed) with the graph from here on */
        gp->layout = layout;
        gp->user_buf = buf;
        gp->count = count;
        gp->packed = packed;
        buf = packed;
    }
    mxi_tmpl_t *t =
        mxi_tmpl_new(gs, is_send, buf, bytes, &c->ec,
                     peer == MPI_PROC_NULL    ? MXE_PROC_NULL
                     : peer == MPI_ANY_SOURCE ? MXE_ANY_SOURCE
                                              : peer,
                     tag == MPI_ANY_TAG ? MXE_ANY_TAG : tag, synchronous, c->eager_limit, 2);
    if (!t)
        return mxi_raise(comm, MXI_E_NO_MEM, "captured %s", what);
    t->pack = gp;
    atomic_init(&t->req_live, 1);
    mxu_status_t rs = mxi_tmpl_prepare(gs, t);
    if (rs != MXU_OK) {
        atomic_store(&t->refs, 1);
        mxi_tmpl_release(t);
        mxi_graph_break(s, "a captured buffer could not be registered (see above)");
        return mxi_raise(comm, MXI_E_INTERN,
                         "captured %s: registration of its %zu-byte buffer failed (%s); the "
                         "capture is broken",
                         what, bytes, mxu_status_string(rs));
    }

    /* the request: a placeholder op, complete with an error for any wait but
     * a captured stream wait (which never waits for it) */
    mxe_op_t *op = NULL;
    mxu_status_t st =
        mxe_op_create_local(mxa_none_stream(), is_send ? MXE_OP_SEND : MXE_OP_RECV, 0, &op);
    /* MPI_PROC_NULL: no fire entry -- a launch makes no operation, as
     * mxi_proc_null_request makes none, and the wait writes its status
     * (nor a pack entry) */
    if (st == MXU_OK && t->peer != MXE_PROC_NULL && gp && is_send)
        st = gp->ctx ? mxi_gpack_kernel(s, gp, 0) : mxi_gpack_host_entry(s, gs, mxi_gpack_pack, gp);
    if (st == MXU_OK && t->peer != MXE_PROC_NULL)
        st = mxi_rec_fire(s, gs, t);
    if (st != MXU_OK) {
        if (op) {
            mxe_op_release(op);
            mxe_op_release(op);
        }
        atomic_store(&t->refs, 1);
        mxi_tmpl_release(t);
        return mxi_raise_code(comm, mxi_status_to_mpi(st));
    }
    mxe_op_release(op); /* never submitted: the engine's reference */
    op->user = t;
    op->user_free = mxi_tmpl_req_gone;
    mxi_tmpl_link(gs, t);
    /* Captured and plain operations on one (communicator, peer, tag) are
     * defined on one stream (api.md 3): a launch's operations match in the
     * order they start, so from the first capture on the communicator's
     * plain ones do too (as with mpix_acc_match=dynamic) -- in call order
     * a plain call after a launch would take its place before the launch
     * ran (design.md 6d) */
    if (!c->ec.match_dynamic) {
        c->ec.match_dynamic = 1;
        mxi_hint_record(c, MPIX_ACC_INFO_MATCH, "dynamic");
        MXU_LOG(MXU_LOG_INFO,
                "a point-to-point call on context %u was captured into a graph: the "
                "communicator matches in start order from now on (mpix_acc_match=dynamic)",
                (unsigned)c->ec.ctx_id);
    }
    return mxi_placeholder_request(s, origin, comm, op, MXI_OPF_TEMPLATE, req);
}

int mxi_graph_ordered_request(mxa_stream_t *s, mxi_origin_t origin, MPI_Comm comm, MPI_Request *req)
{
    mxe_op_t *op = NULL;
    if (mxe_op_create_local(mxa_none_stream(), MXE_OP_RECV, 0, &op) != MXU_OK) {
        mxi_graph_break(s, "out of memory recording a nonblocking collective");
        return mxi_raise(comm, MXI_E_NO_MEM, "the request of a captured nonblocking collective");
    }
    mxe_op_release(op); /* never submitted: the engine's reference */
    return mxi_placeholder_request(s, origin, comm, op, MXI_OPF_ORDERED, req);
}

/* A request a captured stream wait passes over: MPI_REQUEST_NULL, or a
 * partitioned request whose completion mxi_part_prepare has enqueued (on
 * the direct protocol: the handle, no operation behind it). */
static int mxi_gwait_skips(MPI_Request req)
{
    MPI_Request *active = NULL;
    return req == MPI_REQUEST_NULL ||
           (!mxi_request_op(req) && mxi_persist_part(req, &active) != NULL);
}

int mxi_graph_wait(mxa_stream_t *s, int count, MPI_Request reqs[], MPI_Status *statuses,
                   const int *at, MPI_Comm err_comm)
{
    mxi_graph_state_t *gs = mxi_capture_of(s);
    if (!gs) {
        mxi_graph_break(s, "the stream's capture cannot be told (see above)");
        return mxi_raise(err_comm, MXI_E_INTERN, "captured stream wait: the capture is unknown");
    }
    mxi_gwait_t *w = mxi_gwait_new(count, 1);
    if (!w)
        return mxi_raise(err_comm, MXI_E_NO_MEM, "captured stream wait");
    const char *bad = NULL;
    for (int i = 0; i < count && !bad; i++) {
        int k = at ? at[i] : i;
        if (mxi_gwait_skips(reqs[k]))
            continue;
        mxe_op_t *op = mxi_request_op(reqs[k]);
        mxi_tmpl_t *t = op && (op->user_flags & MXI_OPF_TEMPLATE) ? op->user : NULL;
        if (op && (op->user_flags & MXI_OPF_ORDERED)) {
            /* a nonblocking collective captured on s is complete here */
            if (op->stream != s)
                bad = "a stream wait, captured into a graph, on a nonblocking collective "
                      "captured on another stream (wait for it on that stream)";
            continue;
        }
        if (!t)
            bad = "a stream wait, captured into a graph, on a request made outside the "
                  "capture";
        else if (t->gs != gs)
            bad = "a stream wait on a request of another stream's capture";
        else if (t->waited)
            bad = "a second captured stream wait on one request";
        else {
            w->t[w->n] = t;
            w->status[w->n] = statuses ? &statuses[k] : NULL;
            w->n++;
        }
    }
    if (bad || w->n == 0) { /* (nothing to wait for: partitioned requests, NULL) */
        mxi_gwait_free(w);
    } else if (mxi_gwait_record(s, gs, w) != MXU_OK) { /* (w freed) */
        bad = "a stream wait could not be recorded (see above)";
    } else {
        /* a non-contiguous receive: its unpack entry behind the wait (w is
         * the state's now, freed with it) */
        for (int i = 0; i < w->n && !bad; i++) {
            mxi_gpack_t *gp = w->t[i]->pack;
            if (!gp || w->t[i]->is_send || w->t[i]->peer == MXE_PROC_NULL)
                continue;
            if ((gp->ctx ? mxi_gpack_kernel(s, gp, 1)
                         : mxi_gpack_host_entry(s, gs, mxi_gpack_unpack, gp)) != MXU_OK)
                bad = "the unpack of a non-contiguous receive could not be recorded (see above)";
        }
    }
    if (bad) {
        mxi_graph_break(s, bad);
        return mxi_raise(err_comm, MXI_E_REQUEST, "%s: the capture is broken", bad);
    }
    /* the requests are the wait's now: retired (the templates stay) */
    for (int i = 0; i < count; i++) {
        int k = at ? at[i] : i;
        if (mxi_gwait_skips(reqs[k])) {
            if (statuses) {
                statuses[k].MPI_SOURCE = MPI_ANY_SOURCE;
                statuses[k].MPI_TAG = MPI_ANY_TAG;
                statuses[k].MPI_ERROR = MPI_SUCCESS;
            }
            continue;
        }
        mxe_op_t *op = mxi_request_op(reqs[k]);
        if (op->user_flags & MXI_OPF_ORDERED) {
            if (statuses) { /* a collective's: nothing to tell */
                statuses[k].MPI_SOURCE = MPI_ANY_SOURCE;
                statuses[k].MPI_TAG = MPI_ANY_TAG;
                statuses[k].MPI_ERROR = MPI_SUCCESS;
            }
        } else {
            ((mxi_tmpl_t *)op->user)->waited = 1;
        }
        mxi_request_retire(&reqs[k], op);
    }
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- API */

int MPIX_Acc_Hoststream_begin_capture(MPIX_Acc_stream stream)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_begin_capture");
    mxa_stream_t *s = mxa_host_stream_find(stream);
    if (!s)
        return mxi_raise(MPI_COMM_SELF, MXI_E_BAD_STREAM,
                         "MPIX_Acc_Hoststream_begin_capture: %p is not a host stream", stream);
    mxi_graph_state_t *gs = calloc(1, sizeof(*gs));
    if (!gs)
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPIX_Acc_Hoststream_begin_capture");
    gs->s = s;
    gs->counter = strcmp(mxu_config.graph_protocol, "counter") == 0;
    pthread_mutex_lock(&mxi_cap_lock);
    mxu_status_t st = mxa_host_capture_begin(stream);
    if (st == MXU_OK) {
        gs->next_capture = mxi_captures;
        mxi_captures = gs;
        if (gs->counter)
            mxi_counted_link(gs);
    }
    pthread_mutex_unlock(&mxi_cap_lock);
    if (st != MXU_OK) {
        free(gs);
        return mxi_raise(MPI_COMM_SELF, st == MXU_ERR_INVALID_PARAM ? MXI_E_ARG : MXI_E_BAD_STREAM,
                         "MPIX_Acc_Hoststream_begin_capture: stream %p %s", stream,
                         st == MXU_ERR_INVALID_PARAM ? "is already being captured"
                                                     : "is not a live host stream");
    }
    return MPI_SUCCESS;
}

int MPIX_Acc_Hoststream_end_capture(MPIX_Acc_stream stream, MPIX_Acc_hostgraph *graph)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hoststream_end_capture");
    if (!graph)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hoststream_end_capture: graph pointer argument is NULL");
    *graph = NULL;
    mxa_stream_t *s = mxa_host_stream_find(stream);
    pthread_mutex_lock(&mxi_cap_lock);
    mxi_graph_state_t **pp = &mxi_captures;
    while (*pp && (!s || (*pp)->s != s))
        pp = &(*pp)->next_capture;
    mxi_graph_state_t *gs = *pp;
    if (gs)
        *pp = gs->next_capture;
    pthread_mutex_unlock(&mxi_cap_lock);
    if (!gs)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hoststream_end_capture: stream %p is not being captured",
                         stream);
    char why[200];
    mxa_host_graph_t *hg = NULL;
    mxu_status_t st = mxa_host_capture_end(stream, &hg, why, sizeof(why));
    gs->s = NULL;
    const char *live = NULL, *unwaited = NULL;
    for (mxi_tmpl_t *t = gs->tmpls; t && st == MXU_OK; t = t->next) {
        if (!t->waited && atomic_load_explicit(&t->req_live, memory_order_acquire))
            live = t->is_send ? "send" : "receive";
        else if (!t->waited && t->pack && t->peer != MXE_PROC_NULL)
            unwaited = t->is_send ? "send" : "receive";
    }
    if (st == MXU_OK && !live && unwaited) {
        mxa_host_graph_free(hg);
        mxi_state_free(gs);
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST,
                         "MPIX_Acc_Hoststream_end_capture: a captured %s of a non-contiguous "
                         "datatype has no stream wait in the capture (its request was freed): "
                         "the graph packs and unpacks its data around that wait; no graph is made",
                         unwaited);
    }
    if (st != MXU_OK || live) {
        mxa_host_graph_free(hg);
        mxi_state_free(gs);
        if (live)
            return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST,
                             "MPIX_Acc_Hoststream_end_capture: the request of a captured %s is "
                             "still active: wait for it on the stream inside the capture "
                             "(MPIX_Acc_Wait), or free it; no graph is made",
                             live);
        return mxi_raise(MPI_COMM_SELF, MXI_E_UNSUPPORTED,
                         "MPIX_Acc_Hoststream_end_capture: the capture of stream %p was broken: "
                         "%s; no graph is made",
                         stream, why[0] ? why : "(see the error before)");
    }
    struct mpix_acc_hostgraph *g = calloc(1, sizeof(*g));
    if (!g || mxu_locked_map_put(&mxi_graphs, (uint64_t)(uintptr_t)g, g) != MXU_OK) {
        free(g);
        mxa_host_graph_free(hg);
        mxi_state_free(gs);
        return mxi_raise(MPI_COMM_SELF, MXI_E_NO_MEM, "MPIX_Acc_Hoststream_end_capture");
    }
    g->magic = MXI_GRAPH_MAGIC;
    g->hg = hg;
    g->gs = gs;
    *graph = g;
    return MPI_SUCCESS;
}

static struct mpix_acc_hostgraph *mxi_graph_find(MPIX_Acc_hostgraph graph)
{
    if (!graph)
        return NULL;
    struct mpix_acc_hostgraph *g = mxu_locked_map_get(&mxi_graphs, (uint64_t)(uintptr_t)graph);
    return g && g->magic == MXI_GRAPH_MAGIC ? g : NULL;
}

int MPIX_Acc_Hostgraph_launch(MPIX_Acc_hostgraph graph, MPIX_Acc_stream stream)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hostgraph_launch");
    struct mpix_acc_hostgraph *g = mxi_graph_find(graph);
    if (!g)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hostgraph_launch: %p is not a live host graph", (void *)graph);
    mxu_status_t st = mxa_host_graph_launch(g->hg, stream);
    if (st == MXU_OK)
        return MPI_SUCCESS;
    if (st == MXU_ERR_INVALID_STREAM)
        return mxi_raise(MPI_COMM_SELF, MXI_E_BAD_STREAM,
                         "MPIX_Acc_Hostgraph_launch: %p is not a live host stream", stream);
    if (st == MXU_ERR_INVALID_PARAM)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hostgraph_launch: stream %p is being captured", stream);
    return mxi_raise_code(MPI_COMM_SELF, mxi_status_to_mpi(st));
}

int MPIX_Acc_Hostgraph_free(MPIX_Acc_hostgraph *graph)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hostgraph_free");
    if (!graph)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "MPIX_Acc_Hostgraph_free: NULL argument");
    struct mpix_acc_hostgraph *g = mxi_graph_find(*graph);
    if (!g)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hostgraph_free: %p is not a live host graph", (void *)*graph);
    long inflight = mxa_host_graph_inflight(g->hg);
    if (inflight > 0)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG,
                         "MPIX_Acc_Hostgraph_free: %ld launches of graph %p are still in flight: "
                         "synchronize their streams first (the graph stays)",
                         inflight, (void *)g);
    mxu_locked_map_remove(&mxi_graphs, (uint64_t)(uintptr_t)g);
    g->magic = 0;
    mxa_host_graph_free(g->hg);
    mxi_state_free(g->gs);
    free(g);
    *graph = NULL;
    return MPI_SUCCESS;
}

int MPIX_Acc_Hostgraph_errors(MPIX_Acc_hostgraph graph, unsigned long *count)
{
    if (!mxi_on())
        return mxi_raise(MPI_COMM_SELF, MXI_E_NOT_ACTIVE, "MPIX_Acc_Hostgraph_errors");
    struct mpix_acc_hostgraph *g = mxi_graph_find(graph);
    if (!g || !count)
        return mxi_raise(MPI_COMM_SELF, MXI_E_ARG, "MPIX_Acc_Hostgraph_errors: %s",
                         g ? "count pointer is NULL" : "not a live host graph");
    *count = atomic_load(&g->gs->errors);
    return MPI_SUCCESS;
}
