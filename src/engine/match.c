/*
 * match.c - call-order matching of stream-ordered messages (progress thread).
 *
 * MPI orders the calls of one thread; streams start the operations later,
 * in an order of their own. Matching follows the calls: every send is given
 * its pair sequence number when its command reaches the progress thread
 * (commands are in call order), and an envelope -- (context, source, tag,
 * size, sequence) -- goes to the receiver at once, as a control message,
 * long before the stream reaches the send. The receiver matches envelopes,
 * per source in sequence order, against its receives in the order they were
 * called: MPI's matching rules (the earliest posted receive that matches;
 * MPI_ANY_SOURCE / MPI_ANY_TAG; per-source order), with "posted" meaning
 * "called". The data then moves with a tag unique to the message (context,
 * source, sequence), so the transport never matches anything itself: a send
 * whose stream runs late cannot be overtaken by a later one on another
 * stream, and a receive whose stream runs late keeps its message.
 *
 * So the k-th receive for (communicator, source, tag) gets the k-th send of
 * that channel, whatever streams they are on; with receives that name source
 * and tag the match is known as soon as both calls were made. The pair
 * sequence is independent of the data path: another path (the stream-
 * executed one) can carry any message of a pair as long as it announces it
 * with the same sequence number, and no match changes.
 *
 * mpix_acc_match=dynamic (op->match_dynamic): the envelope is sent, and the
 * receive registered, when the stream reaches the operation instead (start
 * order, the library's former behaviour).
 */
#include "engine/engine_priv.h"

#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "util/hashmap.h"

/* One announced message, as it travels (host byte order: one node's
 * processes, or a homogeneous cluster). */
typedef struct {
    uint32_t ctx;
    int32_t src; /* sender's rank in the communicator */
    int32_t tag;
    uint32_t flags; /* MXE_ENV_K, MXE_ENV_SX */
    uint64_t pseq;  /* sender's call sequence number towards this rank, in ctx */
    uint64_t bytes;
    uint64_t k; /* ordinal in its channel (SX communicators), else 0 */
} mxe_envelope_t;

/* k is the message's ordinal in its channel (context, source, tag): the
 * communicator binds receives from this sender statically (path.c) */
#define MXE_ENV_K 0x1u
/* the data is in the receiver's SX ring: its bound receive's step takes it
 * there; the envelope itself is only counted */
#define MXE_ENV_SX 0x2u
/* sent in start order on an SX communicator (op->sx_dynamic): not counted
 * in its channel's ordinals, so no receive bound to an ordinal takes it.
 * Without the flag such a receive, called before its communicator turned
 * to start order (a capture) and still waiting for its message in the SX
 * ring -- whose envelope is not matched --, took the first message sent
 * after the turn (hpgmg-fv --graph with acc-sx hung 1 run in 50) */
#define MXE_ENV_DYN 0x4u

/* A control message: a header, then count envelopes. */
typedef struct {
    uint32_t kind; /* MXE_CTRL_ENVELOPES */
    uint32_t count;
} mxe_ctrl_hdr_t;

#define MXE_CTRL_ENVELOPES 0x454e5631u /* "ENV1" */
#define MXE_ENV_BATCH_MAX 64           /* envelopes per control message (stays eager) */

/* An envelope waiting at the receiver: out of sequence, or unexpected. */
typedef struct mxe_env_node {
    mxe_envelope_t e;
    struct mxe_env_node *next;
} mxe_env_node_t;

/* Per context (communicator): receives called and not matched, messages
 * announced and not matched, each in order. */
typedef struct {
    mxe_op_t *posted_head, *posted_tail;
    mxe_env_node_t *unexp_head, *unexp_tail;
} mxe_mctx_t;

/* Per (context, peer) pair. */
typedef struct {
    uint64_t next_out;    /* next sequence number to give a send */
    uint64_t next_in;     /* next sequence number to match from the peer */
    mxe_env_node_t *held; /* arrived ahead of next_in, ascending */
} mxe_pair_t;

/* Envelopes queued for one destination, sent at the next flush. */
typedef struct {
    int dest;
    int count;
    mxe_envelope_t env[MXE_ENV_BATCH_MAX];
} mxe_outbox_t;

static struct {
    mxu_hashmap_t ctxs;    /* ctx + 1 -> mxe_mctx_t* */
    mxu_hashmap_t pairs;   /* (ctx << 32 | peer) + 1 -> mxe_pair_t* */
    mxe_outbox_t **outbox; /* world rank -> queued envelopes (lazily) */
    int *dirty;            /* world ranks with queued envelopes */
    int ndirty;
    int nranks;
    /* statistics: read by mxe_match_stats from another thread */
    _Atomic uint64_t announced, matched_unexpected, matched_posted, sx_announced;
} mm;

static void mxe_match_arrived(const mxe_envelope_t *e);
static void mxe_control_received(const void *data, size_t len);

mxu_status_t mxe_match_init(int world_size)
{
    memset(&mm, 0, sizeof(mm));
    mm.nranks = world_size;
    mm.outbox = calloc((size_t)world_size, sizeof(*mm.outbox));
    mm.dirty = calloc((size_t)world_size, sizeof(*mm.dirty));
    if (!mm.outbox || !mm.dirty) {
        free(mm.outbox);
        free(mm.dirty);
        MXU_FAIL(MXU_ERR_NO_MEMORY, "matching tables for %d ranks", world_size);
    }
    MXU_TRY(mxu_hashmap_init(&mm.ctxs, 16));
    MXU_TRY(mxu_hashmap_init(&mm.pairs, 64));
    mxt_set_control_handler(mxe_control_received);
    return MXU_OK;
}

static void mxe_free_env_list(mxe_env_node_t *n, uint64_t *count)
{
    while (n) {
        mxe_env_node_t *next = n->next;
        free(n);
        (*count)++;
        n = next;
    }
}

void mxe_match_destroy(void)
{
    uint64_t left = 0, key;
    void *value;
    size_t pos = 0;
    while (mxu_hashmap_next(&mm.ctxs, &pos, &key, &value) >= 0) {
        mxe_mctx_t *c = value;
        mxe_free_env_list(c->unexp_head, &left);
        free(c);
    }
    pos = 0;
    while (mxu_hashmap_next(&mm.pairs, &pos, &key, &value) >= 0) {
        mxe_pair_t *p = value;
        mxe_free_env_list(p->held, &left);
        free(p);
    }
    if (left)
        MXU_LOG(MXU_LOG_INFO, "%llu message(s) announced to this rank were never received",
                (unsigned long long)left);
    mxu_hashmap_destroy(&mm.ctxs);
    mxu_hashmap_destroy(&mm.pairs);
    for (int r = 0; r < mm.nranks; r++)
        free(mm.outbox ? mm.outbox[r] : NULL);
    free(mm.outbox);
    free(mm.dirty);
    mxt_set_control_handler(NULL);
    memset(&mm, 0, sizeof(mm));
}

uint64_t mxe_match_data_tag(uint32_t ctx, int src, uint64_t pseq)
{
    return mxe_tag_make(ctx, (uint32_t)src, (uint32_t)(pseq & MXE_TAG_MAX));
}

static mxe_mctx_t *mxe_mctx(uint32_t ctx)
{
    mxe_mctx_t *c = mxu_hashmap_get(&mm.ctxs, (uint64_t)ctx + 1);
    if (c)
        return c;
    c = calloc(1, sizeof(*c));
    if (!c || mxu_hashmap_put(&mm.ctxs, (uint64_t)ctx + 1, c) != MXU_OK) {
        free(c);
        MXU_LOG(MXU_LOG_ERROR, "out of memory for the matching state of context %u", ctx);
        return NULL;
    }
    return c;
}

static mxe_pair_t *mxe_pair(uint32_t ctx, int peer)
{
    uint64_t key = (((uint64_t)ctx << 32) | (uint32_t)peer) + 1;
    mxe_pair_t *p = mxu_hashmap_get(&mm.pairs, key);
    if (p)
        return p;
    p = calloc(1, sizeof(*p));
    if (!p || mxu_hashmap_put(&mm.pairs, key, p) != MXU_OK) {
        free(p);
        MXU_LOG(MXU_LOG_ERROR, "out of memory for the matching state of context %u", ctx);
        return NULL;
    }
    return p;
}

/* ------------------------------------------------------------------ sends */

void mxe_match_flush(void)
{
    for (int i = 0; i < mm.ndirty; i++) {
        int dest = mm.dirty[i];
        mxe_outbox_t *ob = mm.outbox[dest];
        size_t len = sizeof(mxe_ctrl_hdr_t) + sizeof(mxe_envelope_t) * (size_t)ob->count;
        unsigned char *msg = malloc(len);
        if (!msg) {
            MXU_LOG(MXU_LOG_ERROR, "out of memory: %d envelope(s) to rank %d lost", ob->count,
                    dest);
        } else {
            mxe_ctrl_hdr_t h = {.kind = MXE_CTRL_ENVELOPES, .count = (uint32_t)ob->count};
            memcpy(msg, &h, sizeof(h));
            memcpy(msg + sizeof(h), ob->env, sizeof(mxe_envelope_t) * (size_t)ob->count);
            /* failures are logged by the transport; a failed peer's ops
             * complete through the peer-failure path */
            (void)mxt_control_send(dest, msg, len);
        }
        ob->count = 0;
    }
    mm.ndirty = 0;
}

void mxe_match_send_called(mxe_op_t *op)
{
    mxe_pair_t *p = mxe_pair(op->ctx_id, op->peer);
    if (!p)
        return; /* logged; the send's data will not be matched */
    op->pseq = p->next_out++;
    int dest = op->peer_world;
    mxe_outbox_t *ob = mm.outbox[dest];
    if (!ob) {
        ob = mm.outbox[dest] = calloc(1, sizeof(*ob));
        if (!ob) {
            MXU_LOG(MXU_LOG_ERROR, "out of memory: envelope to rank %d lost", dest);
            return;
        }
        ob->dest = dest;
    }
    if (ob->count == MXE_ENV_BATCH_MAX)
        mxe_match_flush();
    if (ob->count == 0)
        mm.dirty[mm.ndirty++] = dest;
    mxe_envelope_t *e = &ob->env[ob->count++];
    e->ctx = op->ctx_id;
    e->src = op->comm_rank;
    e->tag = op->tag;
    e->flags = (op->sx_peer ? MXE_ENV_K : 0) | (op->sx_env_sx ? MXE_ENV_SX : 0) |
               (op->sx_dynamic ? MXE_ENV_DYN : 0);
    e->pseq = op->pseq;
    e->bytes = op->bytes;
    e->k = op->sx_k;
    atomic_fetch_add_explicit(&mm.announced, 1, memory_order_relaxed);
}

/* --------------------------------------------------------------- receives */

static int mxe_envelope_fits(const mxe_op_t *op, const mxe_envelope_t *e)
{
    if (!((op->peer == MXE_ANY_SOURCE || op->peer == e->src) &&
          (op->tag == MXE_ANY_TAG || op->tag == e->tag)))
        return 0;
    /* a receive bound statically takes exactly its channel's k-th message
     * (the earlier ones may have completed from the ring already), and
     * never one its sender did not count (MXE_ENV_DYN); a message of a
     * sender without the SX path it may take (MPIX_ACC_SX differs) */
    if (op->sx && (e->flags & MXE_ENV_K))
        return op->sx_k == e->k;
    if (op->sx && (e->flags & MXE_ENV_DYN))
        return 0;
    return 1;
}

static void mxe_posted_unlink(mxe_mctx_t *c, mxe_op_t *op)
{
    if (op->prev_posted)
        op->prev_posted->next_posted = op->next_posted;
    else
        c->posted_head = op->next_posted;
    if (op->next_posted)
        op->next_posted->prev_posted = op->prev_posted;
    else
        c->posted_tail = op->prev_posted;
    op->next_posted = op->prev_posted = NULL;
}

static void mxe_bind(mxe_op_t *op, const mxe_envelope_t *e)
{
    op->matched = 1;
    op->msg_src = e->src;
    op->msg_tag = e->tag;
    op->msg_bytes = (size_t)e->bytes;
    op->pseq = e->pseq;
    if (op->recv_ready)
        mxe_recv_post_data(op);
}

void mxe_match_recv_called(mxe_op_t *op)
{
    mxe_mctx_t *c = mxe_mctx(op->ctx_id);
    if (!c)
        return;
    op->registered = 1;
    mxe_env_node_t *prev = NULL;
    for (mxe_env_node_t *n = c->unexp_head; n; prev = n, n = n->next) {
        if (!mxe_envelope_fits(op, &n->e))
            continue;
        if (prev)
            prev->next = n->next;
        else
            c->unexp_head = n->next;
        if (c->unexp_tail == n)
            c->unexp_tail = prev;
        atomic_fetch_add_explicit(&mm.matched_unexpected, 1, memory_order_relaxed);
        mxe_bind(op, &n->e);
        free(n);
        return;
    }
    op->next_posted = NULL;
    op->prev_posted = c->posted_tail;
    if (c->posted_tail)
        c->posted_tail->next_posted = op;
    else
        c->posted_head = op;
    c->posted_tail = op;
}

int mxe_match_forget(mxe_op_t *op)
{
    if (op->type != MXE_OP_RECV || !op->registered || op->matched)
        return 0;
    mxe_mctx_t *c = mxu_hashmap_get(&mm.ctxs, (uint64_t)op->ctx_id + 1);
    if (!c)
        return 0;
    mxe_posted_unlink(c, op);
    op->registered = 0;
    return 1;
}

/* A copy of e to keep in a list (NULL, logged, when out of memory). */
static mxe_env_node_t *mxe_env_node_new(const mxe_envelope_t *e)
{
    mxe_env_node_t *n = malloc(sizeof(*n));
    if (!n) {
        MXU_LOG(MXU_LOG_ERROR, "out of memory: message from %d (tag %d) lost", e->src, e->tag);
        return NULL;
    }
    n->e = *e;
    n->next = NULL;
    return n;
}

/* An envelope in its pair's sequence: the earliest receive called that
 * matches it takes it; else it waits for one. */
static void mxe_match_arrived(const mxe_envelope_t *e)
{
    if (e->flags & MXE_ENV_SX) {
        /* in our ring: the bound receive's step finds it, before or after
         * this envelope; nothing to match */
        atomic_fetch_add_explicit(&mm.sx_announced, 1, memory_order_relaxed);
        return;
    }
    mxe_mctx_t *c = mxe_mctx(e->ctx);
    if (!c)
        return;
    for (mxe_op_t *op = c->posted_head; op; op = op->next_posted) {
        if (!mxe_envelope_fits(op, e))
            continue;
        mxe_posted_unlink(c, op);
        atomic_fetch_add_explicit(&mm.matched_posted, 1, memory_order_relaxed);
        mxe_bind(op, e);
        return;
    }
    mxe_env_node_t *n = mxe_env_node_new(e);
    if (!n)
        return;
    if (c->unexp_tail)
        c->unexp_tail->next = n;
    else
        c->unexp_head = n;
    c->unexp_tail = n;
}

/* Deliver a pair's envelopes in sequence order (the transport does not
 * promise the order of control messages). */
static void mxe_envelope_in(const mxe_envelope_t *e)
{
    mxe_pair_t *p = mxe_pair(e->ctx, e->src);
    if (!p)
        return;
    if (e->pseq != p->next_in) {
        if (e->pseq < p->next_in) {
            MXU_LOG(MXU_LOG_ERROR, "duplicate message %llu from %d in context %u ignored",
                    (unsigned long long)e->pseq, e->src, e->ctx);
            return;
        }
        mxe_env_node_t *n = mxe_env_node_new(e);
        if (!n)
            return;
        mxe_env_node_t **pp = &p->held;
        while (*pp && (*pp)->e.pseq < e->pseq)
            pp = &(*pp)->next;
        n->next = *pp;
        *pp = n;
        return;
    }
    mxe_match_arrived(e);
    p->next_in++;
    while (p->held && p->held->e.pseq == p->next_in) {
        mxe_env_node_t *n = p->held;
        p->held = n->next;
        mxe_match_arrived(&n->e);
        free(n);
        p->next_in++;
    }
}

static void mxe_control_received(const void *data, size_t len)
{
    mxe_ctrl_hdr_t h;
    if (len < sizeof(h)) {
        MXU_LOG(MXU_LOG_ERROR, "control message of %zu bytes: too short", len);
        return;
    }
    memcpy(&h, data, sizeof(h));
    if (h.kind != MXE_CTRL_ENVELOPES ||
        len != sizeof(h) + (size_t)h.count * sizeof(mxe_envelope_t)) {
        MXU_LOG(MXU_LOG_ERROR, "control message of %zu bytes, kind %#x: not understood", len,
                h.kind);
        return;
    }
    const unsigned char *p = (const unsigned char *)data + sizeof(h);
    for (uint32_t i = 0; i < h.count; i++) {
        mxe_envelope_t e;
        memcpy(&e, p + (size_t)i * sizeof(e), sizeof(e));
        mxe_envelope_in(&e);
    }
}

void mxe_match_stats(uint64_t *announced, uint64_t *matched_posted, uint64_t *matched_unexpected)
{
    *announced = atomic_load_explicit(&mm.announced, memory_order_relaxed);
    *matched_posted = atomic_load_explicit(&mm.matched_posted, memory_order_relaxed);
    *matched_unexpected = atomic_load_explicit(&mm.matched_unexpected, memory_order_relaxed);
}
