/*
 * path.c - which path carries a message, and the stream-executed (SX) path.
 *
 * Two paths: UCX (tagged messages started by the progress thread, match.c)
 * and SX, for messages between processes of one node on a communicator
 * without wildcard receives (the MPI-4 assertions mpi_assert_no_any_source
 * and mpi_assert_no_any_tag, and call-order matching): the sender's stream
 * writes the message into a ring the receiver owns and the receiver's
 * stream copies it out (accel/sx.h, accel/sx_proto.h). No host thread sits
 * between the two streams.
 *
 * Static matching. On such a communicator every send to a process of the
 * node and every receive from one gets the ordinal k of its channel
 * (context, sender, tag) at the call, on the application thread; with
 * exact source and tag, MPI's rules give the k-th receive the k-th send,
 * so each side knows the match without asking. The sender decides the
 * path per message (SX when its stream can write the peer's ring, the
 * buffer is of a kind the stream reaches, the message fits a slot and the
 * slot is free; else UCX, which is never blocked on credit). A receive
 * does not know which way its message comes: its receive step waits for
 * (context, tag, k) in the ring *or* for the engine's word that the
 * message came by UCX (match.c still matches every message; it announces
 * SX messages too, so nothing is counted twice).
 *
 * Where the receive step runs: on the stream of the stream wait that
 * waits for the receive (MPIX_Acc_Wait*, MPI_Wait on a stream
 * communicator), when that stream's executor can write the buffer; else,
 * once the host shows interest (MPI_Wait/Test) or a stream wait cannot
 * take it, on a library stream whose executor writes the buffer (a host
 * stream for host memory, a CUDA stream for device memory). The progress thread watches the
 * records of the steps and completes the operations from them.
 */
#include "engine/engine_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "accel/sx.h"
#include "util/hashmap.h"
#include "util/settings.h"

typedef enum {
    SXF_NO_LINK = 0, /* the peer's ring is not published or not for this stream */
    SXF_TOO_BIG,     /* larger than a slot or the send's eager limit */
    SXF_MEMTYPE,     /* a buffer the stream's executor cannot read */
    SXF_CREDIT,      /* the slot's last message is on another stream, not yet passed */
    SXF_SYNC,        /* synchronous send */
    SXF_ENQUEUE,     /* the step could not be enqueued */
    SXF_BOUNCED,     /* the step found the slot taken: by UCX from a bounce buffer */
    SXF_COUNT
} mxe_sx_fallback_t;

static const char *const sxf_names[SXF_COUNT] = {"no ring for the stream",
                                                 "larger than the eager limit or a slot",
                                                 "buffer not reachable",
                                                 "slot busy on another stream",
                                                 "synchronous send",
                                                 "enqueue failed",
                                                 "slot taken when the step ran"};

const char *mxe_sx_fallback_name(int reason)
{
    return reason >= 0 && reason < SXF_COUNT ? sxf_names[reason] : NULL;
}

/* One process of the node: the links both ways and the channel ordinals. */
typedef struct mxe_sx_peer {
    int world;
    pthread_mutex_t lock;
    mxa_sx_link_t *in;  /* its messages to us (ours) */
    mxa_sx_link_t *out; /* our messages to it (its; opened at first use) */
    char out_name[96];
    unsigned open_tries;
    uint64_t next_n; /* our next SX message on `out` */
    /* the stream and trigger of the last send given each slot */
    mxa_stream_t *slot_stream[MXA_SX_MAX_SLOTS];
    uint64_t slot_seq[MXA_SX_MAX_SLOTS];
    /* the same for the device ring's bulk slots */
    mxa_stream_t *bulk_stream[MXA_SX_MAX_BULK];
    uint64_t bulk_seq[MXA_SX_MAX_BULK];
    mxu_hashmap_t send_k; /* (ctx, tag) -> next ordinal of our sends + 1 */
    mxu_hashmap_t recv_k; /* (ctx, tag) -> next ordinal of our receives + 1 */
} mxe_sx_peer_t;

static struct {
    int on;
    int recv_lazy;         /* MPIX_ACC_SX_RECV_POINT=lazy */
    int stage_off;         /* MPIX_ACC_SX_STAGE=off */
    int listen_watched;    /* progress thread: the device-ring socket is in the epoll set */
    mxe_sx_peer_t **peers; /* world rank -> peer (NULL: not on this node, or self) */
    int npeers_world;
    int *node;
    int nnode;
    long job;
    _Atomic uint64_t fallback[SXF_COUNT];
    _Atomic uint64_t links_in, ring_bytes, staged, dring_sent, bulk_sent;
    _Atomic uint64_t fused_packs, fused_unpacks;
    _Atomic uint64_t late_points, host_interest_steps; /* receives without a point */
} px;

void mxe_set_node(const int *world_ranks, int n, long node_job_id)
{
    free(px.node);
    px.node = NULL;
    px.nnode = 0;
    px.job = node_job_id;
    if (world_ranks && n > 0) {
        px.node = malloc(sizeof(int) * (size_t)n);
        if (px.node) {
            memcpy(px.node, world_ranks, sizeof(int) * (size_t)n);
            px.nnode = n;
        }
    }
}

int mxe_node_known(void) { return px.nnode > 0; }

int mxe_world_on_node(int world_rank)
{
    if (world_rank == mxe.world_rank)
        return 0;
    for (int i = 0; i < px.nnode; i++)
        if (px.node[i] == world_rank)
            return 1;
    return 0;
}

static void link_name(char *buf, size_t len, int dst, int src)
{
    snprintf(buf, len, "/mpixacc-sx-%ld-%d-from-%d", px.job, dst, src);
}

static uint64_t chan_key(uint32_t ctx, int tag)
{
    return (((uint64_t)ctx << MXE_TAG_BITS) | (uint32_t)tag) + 1;
}

/* Next ordinal of channel (ctx, tag) in map m (peer lock held). */
static uint64_t chan_next(mxu_hashmap_t *m, uint32_t ctx, int tag)
{
    uint64_t key = chan_key(ctx, tag);
    uint64_t v = (uint64_t)(uintptr_t)mxu_hashmap_get(m, key); /* next + 1; 0: absent */
    uint64_t k = v ? v - 1 : 0;
    if (mxu_hashmap_put(m, key, (void *)(uintptr_t)(k + 2)) != MXU_OK)
        MXU_LOG(MXU_LOG_ERROR, "SX: out of memory for channel ordinals");
    return k;
}

static int sx_setting_on(int local_size)
{
    const char *v = mxu_config.sx;
    if (v && strcmp(v, "off") == 0)
        return 0;
    mxa_features_t f;
    mxa_get_features(&f);
    /* One hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1; under MPS, one for
     * every process on the GPU): a polling receive step holds back all
     * other work behind it, the sends it waits for included (H100, 2 ranks
     * under MPS: head-to-head deadlocked). The UCX path carries everything. */
    if (mxe.one_hw_queue) { /* mxe_start detected it */
        MXU_LOG(v && strcmp(v, "on") == 0 ? MXU_LOG_WARN : MXU_LOG_INFO,
                "SX path off: CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue: a polling "
                "receive step would block the work it waits for)");
        return 0;
    }
    if (v && strcmp(v, "on") == 0)
        return 1;
    /* auto with CUDA: on where every process of the node can have a GPU
     * of its own (its receive steps poll: processes sharing a GPU need
     * MPS, MPIX_ACC_SX=on). With device rings it is 2.4 x faster than the
     * UCX path for small messages (2 x H200, e1e828b: 8 B 8.3 vs 19.7 us,
     * doc/benchmarks.md 2.00000) and as fast for large ones. */
    if (f.cuda_active && local_size > f.cuda_device_count) {
        MXU_LOG(MXU_LOG_INFO,
                "SX path off (MPIX_ACC_SX=auto with CUDA; %d processes, %d GPU(s) on this "
                "node): MPIX_ACC_SX=on turns it on (with MPS where processes share a GPU)",
                local_size, f.cuda_device_count);
        return 0;
    }
    return 1;
}

mxu_status_t mxe_sx_start(void)
{
    memset((void *)px.fallback, 0, sizeof(px.fallback));
    px.on = 0;
    px.recv_lazy = strcmp(mxu_config.sx_recv_point, "lazy") == 0;
    px.stage_off = strcmp(mxu_config.sx_stage, "off") == 0;
    if (px.nnode < 2 || !sx_setting_on(px.nnode))
        return MXU_OK;
    if (mxa_sx_setup(mxu_config.sx_timeout) != MXU_OK)
        return MXU_OK; /* logged: the UCX path carries everything */
    px.peers = calloc((size_t)mxe.world_size, sizeof(*px.peers));
    if (!px.peers)
        return MXU_OK;
    px.npeers_world = mxe.world_size;
    int made = 0;
    for (int i = 0; i < px.nnode; i++) {
        int w = px.node[i];
        if (w == mxe.world_rank || w < 0 || w >= mxe.world_size)
            continue;
        mxe_sx_peer_t *p = calloc(1, sizeof(*p));
        if (!p)
            continue;
        p->world = w;
        pthread_mutex_init(&p->lock, NULL);
        if (mxu_hashmap_init(&p->send_k, 16) != MXU_OK ||
            mxu_hashmap_init(&p->recv_k, 16) != MXU_OK) {
            free(p);
            continue;
        }
        char name[96];
        link_name(name, sizeof(name), mxe.world_rank, w);
        link_name(p->out_name, sizeof(p->out_name), w, mxe.world_rank);
        if (mxa_sx_link_create(name, (unsigned)mxu_config.sx_slots, mxu_config.sx_slot_bytes,
                               &p->in) != MXU_OK)
            p->in = NULL; /* logged; its messages come by UCX */
        else {
            atomic_fetch_add(&px.links_in, 1);
            atomic_fetch_add(&px.ring_bytes,
                             mxa_sx_slot_stride(mxu_config.sx_slot_bytes) * mxu_config.sx_slots);
        }
        px.peers[w] = p;
        made++;
    }
    px.on = made > 0;
    if (px.on)
        MXU_LOG(MXU_LOG_INFO,
                "SX path on for %d process(es) of this node: %lld slots of %zu bytes per peer "
                "and direction (shared-memory rings)",
                made, (long long)mxu_config.sx_slots, mxu_config.sx_slot_bytes);
    return MXU_OK;
}

/* A stream is being freed (it has synchronized: its steps ran): no slot
 * may name it as the stream of its last message any more. */
void mxe_sx_forget_stream(mxa_stream_t *s)
{
    for (int w = 0; px.peers && w < px.npeers_world; w++) {
        mxe_sx_peer_t *p = px.peers[w];
        if (!p)
            continue;
        pthread_mutex_lock(&p->lock);
        for (int i = 0; i < MXA_SX_MAX_SLOTS; i++)
            if (p->slot_stream[i] == s)
                p->slot_stream[i] = NULL;
        for (int i = 0; i < MXA_SX_MAX_BULK; i++)
            if (p->bulk_stream[i] == s)
                p->bulk_stream[i] = NULL;
        pthread_mutex_unlock(&p->lock);
    }
}

void mxe_sx_stop(void)
{
    for (int w = 0; px.peers && w < px.npeers_world; w++) {
        mxe_sx_peer_t *p = px.peers[w];
        if (!p)
            continue;
        mxa_sx_link_close(p->in);
        mxa_sx_link_close(p->out);
        mxu_hashmap_destroy(&p->send_k);
        mxu_hashmap_destroy(&p->recv_k);
        pthread_mutex_destroy(&p->lock);
        free(p);
    }
    free(px.peers);
    px.peers = NULL;
    px.npeers_world = 0;
    px.listen_watched = 0;
    px.on = 0;
    mxa_sx_shutdown();
}

void mxe_sx_stats(mxe_stats_t *out)
{
    for (int i = 0; i < SXF_COUNT && i < 8; i++)
        out->sx_fallback[i] = atomic_load_explicit(&px.fallback[i], memory_order_relaxed);
    out->sx_links_in = atomic_load(&px.links_in);
    out->sx_ring_bytes = atomic_load(&px.ring_bytes);
    out->sx_staged = atomic_load(&px.staged);
    out->sx_dring_sent = atomic_load(&px.dring_sent);
    out->sx_late_points = atomic_load(&px.late_points);
    out->sx_host_interest_steps = atomic_load(&px.host_interest_steps);
    out->sx_bulk_sent = atomic_load(&px.bulk_sent);
    out->sx_fused_packs = atomic_load(&px.fused_packs);
    out->sx_fused_unpacks = atomic_load(&px.fused_unpacks);
    mxa_sx_dring_counts(&out->sx_drings_made, &out->sx_drings_mapped);
}

static void sx_fallback(mxe_sx_fallback_t why)
{
    atomic_fetch_add_explicit(&px.fallback[why], 1, memory_order_relaxed);
}

/* Progress thread, at an SX send's trigger: its step ran. 1: the message
 * is in the ring; 0: the step found the slot taken and left it in the
 * bounce buffer (*bounce, to send by UCX and give back with
 * mxa_sx_bounce_free). The record is given back here. */
int mxe_sx_send_outcome(mxe_op_t *op, void **bounce)
{
    mxa_sx_record_t *rec = op->sx_rec;
    uint64_t done = rec ? __atomic_load_n(&rec->done, __ATOMIC_ACQUIRE) : 0;
    if (rec && !done) {
        /* A CUDA send step stores its record and then the trigger with no
         * fence between them (a system-scope fence costs ~1.7 us per step,
         * 2 x H100): the trigger may be seen first, the record is on its
         * way. Bounded: a record that never comes is a lost device. */
        uint64_t t0 = mxu_now_ns();
        while (!(done = __atomic_load_n(&rec->done, __ATOMIC_ACQUIRE))) {
            if (mxu_now_ns() - t0 > 1000000000ull) {
                MXU_LOG(MXU_LOG_ERROR,
                        "SX: send step to rank %d passed its trigger but wrote no record in "
                        "1 s; taking the message as sent",
                        op->peer);
                done = mxa_sx_done_word(op->bytes, MXA_SX_SENT, -1);
                break;
            }
            mxu_cpu_relax();
        }
    }
    int sent = done && mxa_sx_done_error(done) == MXA_SX_SENT;
    op->sx_rec = NULL;
    mxa_sx_record_free(rec);
    if (op->sx_peer && op->sx_peer->out)
        mxa_sx_link_send_ran(op->sx_peer->out, op->sx_in_dring);
    *bounce = op->sx_bounce;
    op->sx_bounce = NULL;
    if (sent) {
        mxa_sx_bounce_free(*bounce, op->bytes);
        *bounce = NULL;
    } else {
        sx_fallback(SXF_BOUNCED);
    }
    return sent;
}

/* ------------------------------------------------ application threads */

static mxe_sx_peer_t *sx_peer_of(const mxe_op_t *op)
{
    if (!px.on || !op->sx_comm || op->peer < 0 || op->peer_world < 0 ||
        op->peer_world >= px.npeers_world)
        return NULL;
    return px.peers[op->peer_world];
}

/* The out link, opened at first use (peer lock held). */
static mxa_sx_link_t *sx_out(mxe_sx_peer_t *p)
{
    if (p->out)
        return p->out;
    /* retry rarely: the peer may still be starting */
    if (p->open_tries++ % 64 != 0)
        return NULL;
    if (mxa_sx_link_open(p->out_name, &p->out) != MXU_OK)
        p->out = NULL;
    return p->out;
}

/* Is the previous message of a slot (sent from stream prev, its trigger
 * seq) still ahead on another stream than s? Two steps of one slot must
 * not run at once. */
static int sx_slot_pending_elsewhere(mxa_stream_t *prev, uint64_t seq, const mxa_stream_t *s)
{
    return prev && prev != s &&
           (int64_t)(atomic_load_explicit(prev->trigger_word, memory_order_acquire) - seq) < 0;
}

/* A send on an SX communicator: its ordinal, and its path. Returns 1 when
 * the send step was enqueued (op->trigger_seq set: the step raises the
 * stream's trigger word after the message), 0 for the UCX path, -1 when
 * the step failed to enqueue after the trigger number was taken, -2 when a
 * bulk send's pack (op->user_prepare) failed (nothing enqueued). */
int mxe_sx_submit_send(mxe_op_t *op)
{
    mxe_sx_peer_t *p = sx_peer_of(op);
    if (!p)
        return 0;
    mxa_stream_t *s = op->stream;
    pthread_mutex_lock(&p->lock);
    op->sx_peer = p;
    op->sx_k = chan_next(&p->send_k, op->ctx_id, op->tag);
    int why = -1;
    mxa_sx_link_t *l = NULL;
    unsigned slot = 0; /* of message p->next_n, once l is known */
    int bulk = 0;      /* above the LL limit: into a bulk slot of the device ring */
    int bslot = -1;    /* that bulk slot */
    if (s->kind == MXA_KIND_NONE)
        why = SXF_NO_LINK;
    else if (op->synchronous)
        why = SXF_SYNC;
    else if (!(l = sx_out(p)))
        why = SXF_NO_LINK;
    if (why < 0) {
        /* the device ring's mapping moves on at every send, also one that
         * UCX takes (a code whose messages all exceed the shared ring's
         * limit never used the device ring's LL and bulk sizes: 2 x H100,
         * 89c58e9) */
        mxa_sx_link_advance(l, s);
        /* one threshold family: the path carries what the communicator's
         * mpix_acc_eager_limit calls small (8 KiB by default) through a
         * ring in host memory (above it UCX's CUDA IPC copy wins over two
         * bus crossings: 2 x H200, e6a64cd, 64 KiB 31.9 vs 23.0 us), four
         * times that as LL words into the receiver's device ring (2 x
         * H100, session 10: 16/32 KiB 10.9/12.0 us against 24.1/24.2 by
         * UCX), up to a slot, and 128 times that (up to a bulk slot) into
         * the device ring's bulk slots by multi-block steps */
        if (op->bytes > mxa_sx_link_send_limit(l, s, op->eager_limit) &&
            !(bulk = op->bytes <= mxa_sx_link_bulk_limit(l, s, op->eager_limit)))
            why = SXF_TOO_BIG;
        else if (op->bytes > 0 && !mxa_sx_stream_reaches(s, op->memtype))
            why = SXF_MEMTYPE;
    }
    if (why < 0) {
        /* the slot's previous message (and a bulk message's bulk slot's),
         * if on another stream, must have been passed there */
        slot = (unsigned)(p->next_n % mxa_sx_link_nslots(l));
        if (bulk)
            bslot = (int)(p->next_n % mxa_sx_link_bulk_slots(l));
        if (sx_slot_pending_elsewhere(p->slot_stream[slot], p->slot_seq[slot], s) ||
            (bslot >= 0 && sx_slot_pending_elsewhere(p->bulk_stream[bslot], p->bulk_seq[bslot], s)))
            why = SXF_CREDIT;
    }
    void *bounce = NULL;
    mxa_sx_record_t *rec = NULL;
    if (why < 0) {
        mxu_status_t st = mxa_sx_link_attach(l, s);
        if (st != MXU_OK)
            why = SXF_NO_LINK;
        /* (no capture check: a call on a capturing stream was refused
         * before its op existed, mxa_stream_refuse_capture) */
    }
    if (why < 0) {
        rec = mxa_sx_record_alloc();
        bounce = rec ? mxa_sx_bounce_alloc(op->bytes) : NULL;
        if (!bounce)
            why = SXF_ENQUEUE;
    }
    if (why >= 0) {
        pthread_mutex_unlock(&p->lock);
        mxa_sx_record_free(rec);
        sx_fallback((mxe_sx_fallback_t)why);
        return 0;
    }
    /* a non-contiguous buffer: an LL step packs it itself; a bulk step
     * (several blocks) reads it packed by the pack kernel ahead of it */
    const mxa_pack_args_t *fuse = NULL;
    if (op->sx_pack && op->sx_pack_state == 0) {
        if (!bulk) {
            fuse = op->sx_pack;
        } else if (op->user_prepare(op) != MXU_OK) {
            pthread_mutex_unlock(&p->lock);
            mxa_sx_record_free(rec);
            mxa_sx_bounce_free(bounce, op->bytes);
            return -2;
        } else {
            op->sx_pack_state = 2;
        }
    }
    uint64_t seq = atomic_fetch_add_explicit(&s->next_trigger_seq, 1, memory_order_relaxed) + 1;
    mxa_sx_send_t m = {.early_claim =
                           p->slot_stream[slot] != s && (bslot < 0 || p->bulk_stream[bslot] != s),
                       .bulk = bulk,
                       .bounce = bounce,
                       .record = rec,
                       .link = l,
                       .src = op->buf,
                       .bytes = op->bytes,
                       .ctx = op->ctx_id,
                       .tag = op->tag,
                       .k = op->sx_k,
                       .n = p->next_n,
                       .trigger_seq = seq,
                       .pack = fuse};
    if (mxa_sx_enqueue_send(s, &m) != MXU_OK) {
        /* the trigger number is taken: raise it the ordinary way */
        pthread_mutex_unlock(&p->lock);
        mxa_sx_record_free(rec);
        mxa_sx_bounce_free(bounce, op->bytes);
        sx_fallback(SXF_ENQUEUE);
        op->trigger_seq = seq;
        return -1;
    }
    if (fuse) {
        op->sx_pack_state = 1;
        atomic_fetch_add_explicit(&px.fused_packs, 1, memory_order_relaxed);
    }
    p->slot_stream[slot] = s;
    p->slot_seq[slot] = seq;
    if (bslot >= 0) {
        p->bulk_stream[bslot] = s;
        p->bulk_seq[bslot] = seq;
        atomic_fetch_add_explicit(&px.bulk_sent, 1, memory_order_relaxed);
    }
    op->sx_in_dring = m.in_dring;
    if (m.in_dring)
        atomic_fetch_add_explicit(&px.dring_sent, 1, memory_order_relaxed);
    op->sx = 1; /* a candidate: its step decides (op->sx_env_sx: it went by SX) */
    op->sx_rec = rec;
    op->sx_bounce = bounce;
    op->sx_n = p->next_n++;
    op->trigger_seq = seq;
    pthread_mutex_unlock(&p->lock);
    return 1;
}

static size_t sx_stage_most(void);
static size_t sx_untriggered_most(const mxa_sx_link_t *l);

/* A receive on an SX communicator: bind it (its ordinal); publish our ring
 * for its stream's executor at the first receive from that peer. */
void mxe_sx_bind_recv(mxe_op_t *op)
{
    mxe_sx_peer_t *p = sx_peer_of(op);
    if (!p || !p->in)
        return;
    pthread_mutex_lock(&p->lock);
    op->sx_peer = p;
    op->sx_k = chan_next(&p->recv_k, op->ctx_id, op->tag);
    op->sx = 1;
    if (op->stream->kind == MXA_KIND_CUDA && !mxa_sx_link_published_for(p->in, op->stream) &&
        mxa_sx_link_ring_kind(p->in) != MXA_SX_RING_NONE) {
        if (mxa_sx_link_publish(p->in, op->stream) == MXU_OK)
            /* made here, not on the progress thread */
            (void)mxa_sx_library_stream(p->in, MXA_MEM_DEVICE);
    }
    /* the ring in our own memory for this stream's kind, at the first
     * receive (MPIX_ACC_SX_DRING; senders switch to it when they see it) */
    if (mxa_sx_link_ring_kind(p->in) != MXA_SX_RING_NONE &&
        (op->stream->kind == MXA_KIND_HOST || mxa_sx_link_published_for(p->in, op->stream)))
        mxa_sx_link_want_dring(p->in, op->stream);
    /* A receive whose buffer only a receive step on its own stream writes
     * needs no stream point of its own -- the point told the progress
     * thread that the buffer was free (issue 20: one memop per received
     * halo, 1.1-1.9 us of host time on 2 x H100). That holds when a
     * message that comes by UCX is staged and every consumer of the
     * receive puts its step in its stream's order: a stream wait on its
     * own stream enqueues it there (mxe_sx_stream_wait: the ring is
     * published for the stream and the step reaches the buffer); a stream
     * wait on another stream gives the receive's stream a point then (a
     * late one: after the receive in stream order) and its step waits for
     * it; host interest (MPI_Test, a host wait, a freed request) enqueues
     * the step on the receive's own stream (mxe_op_host_interest). Up to
     * the largest LL message of the ring (sx_untriggered_most: hpgmg's
     * 20 KiB halos), not where staging is off, and for non-blocking
     * receives not those of derived types (their unpack at completion).
     * Host interest may come while the stream is held behind the receive
     * by work the host releases later: a host test or wait then completes
     * only once the stream passes the host's call, not the receive (api.md
     * §3 says the receive): non-blocking receives go without a point only
     * with MPIX_ACC_SX_RECV_POINT=lazy. */
    if ((op->stream_waited || (px.recv_lazy && !op->user_complete)) &&
        op->stream->kind != MXA_KIND_NONE && !op->post_early && !px.stage_off &&
        op->bytes <= sx_untriggered_most(p->in) && mxa_sx_link_published_for(p->in, op->stream) &&
        (op->bytes == 0 || mxa_sx_stream_reaches(op->stream, op->memtype)))
        op->sx_untriggered = 1;
    pthread_mutex_unlock(&p->lock);
}

static void sx_push(mxe_cmd_kind_t kind, mxe_op_t *op)
{
    mxe_cmd_t *cmd = calloc(1, sizeof(*cmd));
    if (!cmd) {
        MXU_LOG(MXU_LOG_ERROR, "SX: out of memory: a receive step is lost");
        return;
    }
    cmd->kind = kind;
    cmd->target = op;
    mxe_op_retain(op); /* dropped by the progress thread */
    mxu_mpsc_push(&mxe.cmdq, &cmd->node);
    mxe_wake();
}

/* The receive step's parameters of bound receive op on stream s; after_seq:
 * the point of op's own stream the step waits for when s is another one. */
static mxa_sx_recv_t sx_recv_of(mxe_op_t *op, mxa_stream_t *s, mxa_sx_record_t *rec,
                                uint64_t after_seq)
{
    mxa_sx_recv_t rv = {.link = op->sx_peer->in,
                        .dst = op->buf,
                        .cap = op->bytes,
                        .ctx = op->ctx_id,
                        .tag = op->tag,
                        .k = op->sx_k,
                        .record = rec,
                        .after = op->stream != s ? op->stream : NULL,
                        .after_seq = after_seq,
                        .fence = op->memtype != MXA_MEM_DEVICE || op->recv_fence,
                        .len_word = op->sx_len_word,
                        .unpack = op->sx_pack && op->sx_pack_state == 0 &&
                                          op->bytes <= MXA_SX_FUSE_UNPACK_MAX
                                      ? op->sx_pack
                                      : NULL};
    return rv;
}

/* A receive step for op on s is being made: its record and parameters */
static mxa_sx_recv_t sx_step_begin(mxe_op_t *op, mxa_stream_t *s, mxa_sx_record_t *rec,
                                   uint64_t after_seq)
{
    op->sx_rec = rec;
    mxa_sx_recv_t rv = sx_recv_of(op, s, rec, after_seq);
    if (rv.unpack)
        op->sx_pack_state = 1;
    op->sx_len_stepped = op->sx_len_word != NULL;
    return rv;
}

/* ... and could not be enqueued: op is as it was before (not stepped) */
static void sx_step_undo(mxe_op_t *op, const mxa_sx_recv_t *rv)
{
    if (rv->unpack) /* the maker unpacks */
        op->sx_pack_state = 0;
    mxa_sx_record_free(op->sx_rec);
    op->sx_rec = NULL;
    op->sx_len_stepped = 0;
    atomic_store(&op->sx_stepped, 0);
}

/* ... or was: the progress thread watches its record */
static void sx_step_enqueued(mxe_op_t *op, const mxa_sx_recv_t *rv)
{
    if (rv->unpack)
        atomic_fetch_add_explicit(&px.fused_unpacks, 1, memory_order_relaxed);
    sx_push(MXE_CMD_SX_WATCH, op);
}

/* A late stream point of op's own stream (op has none: sx_untriggered),
 * after the receive in stream order: *seq. -1 while the stream captures
 * or when the point cannot be enqueued. */
static int sx_late_point(mxe_op_t *op, uint64_t *seq)
{
    mxa_stream_t *s = op->stream;
    if (mxa_stream_capturing(s))
        return -1;
    uint64_t q = atomic_fetch_add_explicit(&s->next_trigger_seq, 1, memory_order_relaxed) + 1;
    if (s->backend->enqueue_trigger(s, q) != MXU_OK)
        return -1;
    atomic_fetch_add_explicit(&px.late_points, 1, memory_order_relaxed);
    *seq = q;
    return 0;
}

/* Host interest in a receive without a stream point (application thread):
 * its receive step goes on its own stream now, the only place that may
 * write its buffer; the progress thread watches the step's record. While
 * the stream captures nothing happens (a later call does it). */
static void sx_step_untriggered(mxe_op_t *op)
{
    /* stepped already (its stream wait's step, or an earlier interest): a
     * load, before the capture query (a driver call) -- the reaper asks
     * every incomplete receive it holds, every library call */
    if (atomic_load_explicit(&op->sx_stepped, memory_order_relaxed))
        return;
    if (mxa_stream_capturing(op->stream)) {
        static _Atomic int warned;
        if (!atomic_exchange(&warned, 1))
            MXU_LOG(MXU_LOG_WARN,
                    "SX: a receive is tested or waited for on the host while its stream "
                    "captures: it completes after the capture ends and it is asked again");
        return;
    }
    if (atomic_exchange(&op->sx_stepped, 1))
        return;
    mxa_sx_record_t *rec = mxa_sx_record_alloc();
    if (rec) {
        mxa_sx_recv_t rv = sx_step_begin(op, op->stream, rec, 0);
        if (mxa_sx_enqueue_recv(op->stream, &rv, 1) == MXU_OK) {
            atomic_fetch_add_explicit(&px.host_interest_steps, 1, memory_order_relaxed);
            sx_step_enqueued(op, &rv);
            return;
        }
        sx_step_undo(op, &rv);
        atomic_store(&op->sx_stepped, 1); /* the library step's, below */
    }
    /* no record or no launch (the device is failing): a library step
     * delivers it, out of its stream's order */
    MXU_LOG(MXU_LOG_ERROR, "SX: a receive step could not be enqueued on its stream: the "
                           "library delivers the message out of the stream's order");
    sx_push(MXE_CMD_SX_STEP, op);
}

void mxe_op_host_interest(mxe_op_t *op)
{
    if (op->type != MXE_OP_RECV || !op->sx || mxe_op_is_complete(op))
        return;
    if (op->sx_untriggered) {
        sx_step_untriggered(op);
        return;
    }
    if (atomic_load_explicit(&op->sx_stepped, memory_order_relaxed) ||
        atomic_exchange(&op->sx_stepped, 1))
        return;
    sx_push(MXE_CMD_SX_STEP, op);
}

/* The receive steps of one stream wait, enqueued in batches of up to
 * MXA_SX_RECV_BATCH in the wait's order. */
typedef struct {
    mxa_sx_recv_t rv[MXA_SX_RECV_BATCH];
    mxe_op_t *op[MXA_SX_RECV_BATCH];
    int at[MXA_SX_RECV_BATCH]; /* the op's index in the wait */
    int n;
} sx_batch_t;

static void sx_batch_flush(mxa_stream_t *s, sx_batch_t *b, unsigned char *drop)
{
    int n = b->n;
    b->n = 0;
    if (!n)
        return;
    if (mxa_sx_enqueue_recv(s, b->rv, n) != MXU_OK) {
        /* logged: the library steps them, the host waits for them */
        for (int j = 0; j < n; j++) {
            sx_step_undo(b->op[j], &b->rv[j]);
            drop[b->at[j]] = 0;
            mxe_op_host_interest(b->op[j]);
        }
        return;
    }
    for (int j = 0; j < n; j++)
        sx_step_enqueued(b->op[j], &b->rv[j]);
}

/* A receive the wait does not step: host interest. One without a stream
 * point gets its step on its own stream there, which may be s: the steps
 * batched so far go first (a channel's steps run in its order). */
static void sx_wait_not_stepped(mxa_stream_t *s, sx_batch_t *b, mxe_op_t *op, unsigned char *drop)
{
    if (op->sx_untriggered)
        sx_batch_flush(s, b, drop);
    mxe_op_host_interest(op); /* a step; the host waits for it */
}

/* Stream wait (before its wait point is enqueued): the ops the stream can
 * finish itself get drop[i] = 1 -- SX sends of this stream (their step
 * precedes) or of another stream of the same kind (a cross-stream wait on
 * its trigger word), and bound receives, for which a receive step is
 * enqueued on s here, in batches in the wait's order (a receive without a
 * stream point of another stream first gives that stream a late point). A
 * bound receive whose status is wanted stays for the host wait too (the
 * host writes statuses). */
void mxe_sx_stream_wait(mxa_stream_t *s, mxe_op_t **ops, void **targets, int n, unsigned char *drop)
{
    if (!px.on)
        return;
    sx_batch_t b;
    b.n = 0;
    for (int i = 0; i < n; i++) {
        mxe_op_t *op = ops[i];
        if (op->type == MXE_OP_SEND && op->sx) {
            if (op->stream == s || mxa_sx_enqueue_after(s, op->stream, op->trigger_seq) == MXU_OK)
                drop[i] = 1;
            continue;
        }
        if (op->type != MXE_OP_RECV || !op->sx)
            continue;
        /* past a batch, receives with points get a library step and the
         * host waits; those without go on in further batches, in order */
        if ((b.n == MXA_SX_RECV_BATCH && !op->sx_untriggered) ||
            !mxa_sx_link_published_for(op->sx_peer->in, s) ||
            (op->bytes > 0 && !mxa_sx_stream_reaches(s, op->memtype))) {
            sx_wait_not_stepped(s, &b, op, drop);
            continue;
        }
        if (atomic_exchange(&op->sx_stepped, 1))
            continue;
        uint64_t after_seq = op->trigger_seq;
        if (op->sx_untriggered && op->stream != s && sx_late_point(op, &after_seq) != 0) {
            atomic_store(&op->sx_stepped, 0);
            sx_wait_not_stepped(s, &b, op, drop);
            continue;
        }
        mxa_sx_record_t *rec = mxa_sx_record_alloc();
        if (!rec) {
            atomic_store(&op->sx_stepped, 0);
            sx_wait_not_stepped(s, &b, op, drop);
            continue;
        }
        if (b.n == MXA_SX_RECV_BATCH)
            sx_batch_flush(s, &b, drop);
        b.rv[b.n] = sx_step_begin(op, s, rec, after_seq);
        b.op[b.n] = op;
        b.at[b.n++] = i;
        /* the stream finishes it alone unless a status is wanted or the
         * host has work at its completion that the stream must wait for
         * (a derived type's unpack, unless it reads the length the step
         * writes: sx_len_word) */
        drop[i] = targets[i] == NULL && (!op->user_complete || op->sx_len_word);
    }
    sx_batch_flush(s, &b, drop);
}

/* ------------------------------------------------------ progress thread */

static mxe_op_t *watch_head;
static int watch_count;

static int hunt_count;
int mxe_sx_watching(void);

/* ------------------------------------------------ UCX-carried messages */

/* A bound receive whose message comes by UCX (its slot was taken when the
 * sender's step ran) gets it in host staging when its buffer is device
 * memory: UCX's eager unpack into device memory copies synchronously on
 * the progress thread, and that copy can sit behind a polling receive
 * step (one hardware queue for several streams) -- the progress thread
 * would stall and with it every message. The receive step copies it out
 * instead, in its stream's order; when no step is coming, a library step
 * does. Only messages the ring could have carried are staged: up to the
 * eager limit and a slot. Larger ones are UCX rendezvous (CUDA IPC, no
 * eager unpack on the progress thread) straight into the buffer; staging
 * them cost two bus crossings (2 x H200, 96a0643: 64 KiB 64.4 us against
 * 29.4 us for the plain UCX path). The bound never drops below 8 KiB,
 * above UCX's eager range for device memory (about 1.2 KB measured), so a
 * small MPIX_ACC_EAGER_LIMIT cannot bring the stall back. */
#define MXE_SX_STAGE_FLOOR 8192
static size_t sx_stage_most(void)
{
    size_t most =
        mxu_config.eager_limit > MXE_SX_STAGE_FLOOR ? mxu_config.eager_limit : MXE_SX_STAGE_FLOOR;
    return most > mxu_config.sx_slot_bytes ? mxu_config.sx_slot_bytes : most;
}

/* The largest receive that goes without a stream point: what the link's
 * LL steps carry once the ring is in the receiver's GPU memory (four times
 * the eager limit, up to a slot), at least staging's bound. A message of
 * that size still comes by UCX now and then (the sender's slot taken, the
 * device ring not mapped yet): it is staged then, two bus crossings. */
static size_t sx_untriggered_most(const mxa_sx_link_t *l)
{
    size_t most = sx_stage_most(), slot = mxa_sx_link_slot_bytes(l);
    size_t ll = mxu_config.eager_limit > SIZE_MAX / MXA_SX_DRING_EAGER_FACTOR
                    ? SIZE_MAX
                    : mxu_config.eager_limit * MXA_SX_DRING_EAGER_FACTOR;
    if (ll > slot)
        ll = slot;
    return ll > most ? ll : most;
}

void *mxe_sx_recv_staging(mxe_op_t *op)
{
    const char *mode = mxu_config.sx_stage;
    /* a receive without a stream point (sx_untriggered) is always staged,
     * also a longer message than it takes (its step reports truncation) */
    if (op->msg_bytes == 0 ||
        (!op->sx_untriggered && (op->msg_bytes > sx_stage_most() || !strcmp(mode, "off") ||
                                 (op->memtype == MXA_MEM_HOST && strcmp(mode, "all") != 0))))
        return NULL;
    if (!op->sx_staging) {
        op->sx_staging = mxa_sx_bounce_alloc(op->msg_bytes);
        op->sx_staging_cap = op->msg_bytes;
    }
    return op->sx_staging;
}

void mxe_sx_staging_free(mxe_op_t *op)
{
    mxa_sx_bounce_free(op->sx_staging, op->sx_staging_cap);
    op->sx_staging = NULL;
}

/* Give the step its "copy from" word (it may be enqueued or running). */
static void sx_tell_copy(mxe_op_t *op)
{
    mxa_sx_record_t *rec = op->sx_rec;
    if (!rec || __atomic_load_n(&rec->desc, __ATOMIC_RELAXED) == MXA_SX_DESC_COPY)
        return; /* told already (this thread writes desc) */
    rec->copy_src = (uint64_t)(uintptr_t)op->sx_staging;
    rec->copy_bytes = op->sx_staged_len;
    __atomic_store_n(&rec->desc, MXA_SX_DESC_COPY, __ATOMIC_RELEASE);
}

static void sx_watch(mxe_op_t *op);

/* A receive step for op on the library stream of its buffer's kind,
 * watched like a stream's (a staged message gets its copy word from
 * sx_watch). */
static mxu_status_t sx_library_step(mxe_op_t *op)
{
    mxa_sx_link_t *l = op->sx_peer->in;
    mxa_stream_t *ls = mxa_sx_library_stream(l, op->memtype);
    mxa_sx_record_t *rec = ls ? mxa_sx_record_alloc() : NULL;
    if (!rec)
        return MXU_ERR_NO_MEMORY; /* logged */
    op->sx_rec = rec;
    mxa_sx_recv_t r = {.link = l,
                       .dst = op->buf,
                       .cap = op->bytes,
                       .ctx = op->ctx_id,
                       .tag = op->tag,
                       .k = op->sx_k,
                       .record = rec,
                       .fence = 1}; /* the host waits for it */
    mxu_status_t st = mxa_sx_enqueue_recv(ls, &r, 1);
    if (st != MXU_OK) { /* logged */
        mxa_sx_record_free(rec);
        op->sx_rec = NULL;
        return st;
    }
    mxe_op_retain(op); /* the watch's reference */
    sx_watch(op);
    return MXU_OK;
}

/* No step on a stream takes this receive: one on a library stream copies
 * the staged message out (the buffer is the receive's since its trigger). */
static void sx_copy_step(mxe_op_t *op)
{
    mxu_status_t st = sx_library_step(op);
    if (st != MXU_OK)
        mxe_sx_complete_from_step(op, st);
}

/* The host waits for a receive whose message UCX brings. */
static void sx_host_copy_wanted(mxe_op_t *op)
{
    if (op->sx_host_copy)
        return;
    op->sx_host_copy = 1;
    if (op->sx_staged && !mxe_op_settled(op))
        sx_copy_step(op);
}

void mxe_sx_staged(mxe_op_t *op, size_t length)
{
    op->sx_staged = 1;
    op->sx_staged_len = length;
    atomic_fetch_add_explicit(&px.staged, 1, memory_order_relaxed);
    if (op->sx_watched)
        sx_tell_copy(op); /* a step on a stream waits for it */
    else if (op->sx_untriggered)
        ; /* only a step in its stream's order may write the buffer: the
           * stream wait's or host interest's, which sx_watch tells */
    else if (op->sx_host_copy || !atomic_exchange(&op->sx_stepped, 1))
        sx_copy_step(op);
    /* else a step's command is on its way: sx_watch / mxe_sx_handle_step */
}

/* Tell a step (enqueued or still to come) that its op finished another way. */
static void sx_tell_step(mxe_op_t *op)
{
    mxa_sx_record_t *rec = op->sx_rec;
    if (!rec)
        return;
    uint64_t d = (op->result.error == MXU_OK && !op->result.cancelled) ? MXA_SX_DESC_DELIVERED
                                                                       : MXA_SX_DESC_ABORT;
    __atomic_store_n(&rec->delivered_bytes, (uint64_t)op->result.bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->desc, d, __ATOMIC_RELEASE);
}

/* mxe_op_complete's hook for bound receives completed by anything but
 * their step (UCX delivery, peer failure, finalize). */
void mxe_sx_on_complete(mxe_op_t *op)
{
    op->sx_delivered = 1;
    if (op->sx_watched)
        sx_tell_step(op);
}

/* Tell a step that its message comes by UCX (the receive was posted to
 * UCX: its envelope had no MXE_ENV_SX), so it stops reading the ring and
 * waits for its desc alone. Only a step that has nothing better yet. */
static void sx_tell_ucx(mxe_op_t *op)
{
    mxa_sx_record_t *rec = op->sx_rec;
    uint64_t none = MXA_SX_DESC_NONE;
    if (rec)
        __atomic_compare_exchange_n(&rec->desc, &none, MXA_SX_DESC_UCX, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
}

/* Progress thread: bound receive op was posted to UCX. */
void mxe_sx_posted_ucx(mxe_op_t *op)
{
    op->sx_ucx_posted = 1;
    if (op->sx_watched && !op->sx_delivered && !op->sx_staged)
        sx_tell_ucx(op);
}

static void sx_watch(mxe_op_t *op)
{
    op->sx_watched = 1;
    op->sx_next_watch = watch_head;
    watch_head = op;
    watch_count++;
    if (op->sx_delivered)
        sx_tell_step(op);
    else if (op->sx_staged)
        sx_tell_copy(op);
    else if (op->sx_ucx_posted)
        sx_tell_ucx(op);
}

/* Receives the host waits for: the progress thread looks for their
 * messages in the ring itself (it is host memory), so no step sits on a
 * stream waiting -- one such step per stream could block another's
 * message. Found: a host buffer is copied here; a device buffer gets a
 * receive step on a library stream, which finds its message at once. */
static mxe_op_t *hunt_head;
static int hunt_count;

static void sx_hunt(mxe_op_t *op)
{
    mxe_op_retain(op); /* the hunt's reference */
    op->sx_next_hunt = hunt_head;
    hunt_head = op;
    hunt_count++;
}

/* op's message is in slot `slot` of its link: take it. 1: done with op. */
static int sx_hunt_found(mxe_op_t *op, unsigned slot, uint64_t n, uint64_t bytes)
{
    mxa_sx_link_t *l = op->sx_peer->in;
    if (op->memtype == MXA_MEM_HOST || op->bytes == 0) {
        size_t got = mxa_sx_link_take(l, slot, n, bytes, op->buf, op->bytes);
        op->result.source = op->peer;
        op->result.tag = op->tag;
        if (got == (size_t)-1) { /* the header came, the rest did not */
            MXU_LOG(MXU_LOG_ERROR,
                    "SX: message from rank %d (tag %d) incomplete after MPIX_ACC_SX_TIMEOUT=%g s",
                    op->peer, op->tag, mxu_config.sx_timeout);
            mxe_sx_complete_from_step(op, op->peer_failed ? MXU_ERR_PEER : MXU_ERR_TIMED_OUT);
            return 1;
        }
        op->result.bytes = got;
        op->sx_env_sx = 1;
        mxe_sx_complete_from_step(op, bytes <= op->bytes ? MXU_OK : MXU_ERR_TRUNCATED);
        return 1;
    }
    return sx_library_step(op) == MXU_OK; /* else tried again at the next pass */
}

static unsigned sx_hunt_poll(void)
{
    unsigned done = 0;
    mxe_op_t **pp = &hunt_head;
    while (*pp) {
        mxe_op_t *op = *pp;
        unsigned slot = 0;
        uint64_t n = 0, bytes = 0;
        int drop = mxe_op_settled(op);
        if (!drop && op->matched) { /* UCX brings it */
            sx_host_copy_wanted(op);
            drop = 1;
        }
        if (!drop &&
            mxa_sx_link_find(op->sx_peer->in, op->ctx_id, op->tag, op->sx_k, &slot, &n, &bytes))
            drop = sx_hunt_found(op, slot, n, bytes);
        if (!drop) {
            pp = &op->sx_next_hunt;
            continue;
        }
        *pp = op->sx_next_hunt;
        hunt_count--;
        done++;
        mxe_op_release(op);
    }
    return done;
}

void mxe_sx_handle_step(mxe_op_t *op)
{
    if (!mxe_op_settled(op)) {
        if (op->matched) /* it comes by UCX */
            sx_host_copy_wanted(op);
        else if (op->recv_ready)
            sx_hunt(op);
        else
            op->sx_step_pending = 1; /* mxe_sx_recv_ready runs it */
    }
    mxe_op_release(op);
}

void mxe_sx_handle_watch(mxe_op_t *op) { sx_watch(op); /* keeps the command's reference */ }

void mxe_sx_recv_ready(mxe_op_t *op)
{
    if (op->sx_step_pending && op->matched) {
        op->sx_step_pending = 0; /* its message comes by UCX: no ring step */
        sx_host_copy_wanted(op);
        return;
    }
    if (op->sx_step_pending) {
        op->sx_step_pending = 0;
        sx_hunt(op);
    }
}

int mxe_sx_watching(void) { return watch_count + hunt_count; }

/* Progress thread: senders asking for our device rings' fds (their
 * connections also wake this thread: the socket is in its epoll set). */
unsigned mxe_sx_serve(void)
{
    int fd = mxa_sx_listen_fd(); /* (-1 unless the path made device rings) */
    if (fd < 0)
        return 0;
    if (!px.listen_watched) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(mxe.epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
            MXU_LOG(MXU_LOG_WARN, "SX: epoll_ctl(device-ring socket): %s", strerror(errno));
        px.listen_watched = 1;
    }
    return (unsigned)mxa_sx_serve();
}

/* Records of finished steps: complete their ops; receives the host waits
 * for: look for their messages. */
unsigned mxe_sx_poll(void)
{
    unsigned n = hunt_count ? sx_hunt_poll() : 0;
    mxe_op_t **pp = &watch_head;
    while (*pp) {
        mxe_op_t *op = *pp;
        mxa_sx_record_t *rec = op->sx_rec;
        uint64_t done = __atomic_load_n(&rec->done, __ATOMIC_ACQUIRE);
        if (!done) {
            pp = &op->sx_next_watch;
            continue;
        }
        *pp = op->sx_next_watch;
        watch_count--;
        n++;
        op->sx_watched = 0;
        int err = mxa_sx_done_error(done);
        size_t bytes = (size_t)mxa_sx_done_bytes(done);
        if (!mxe_op_settled(op)) {
            op->result.source = op->peer;
            op->result.tag = op->tag;
            mxu_status_t st = MXU_OK;
            if (err == MXA_SX_OK || err == MXA_SX_TRUNCATED) {
                op->result.bytes = bytes;
                op->sx_env_sx = mxa_sx_done_slot(done) >= 0; /* else from staging: it came by UCX */
                st = err == MXA_SX_OK ? MXU_OK : MXU_ERR_TRUNCATED;
            } else if (err == MXA_SX_TIMED_OUT) {
                MXU_LOG(MXU_LOG_ERROR,
                        "SX: receive from rank %d (tag %d) gave up after MPIX_ACC_SX_TIMEOUT=%g s",
                        op->peer, op->tag, mxu_config.sx_timeout);
                st = MXU_ERR_TIMED_OUT;
            } else {
                st = op->peer_failed ? MXU_ERR_PEER : MXU_ERR_TIMED_OUT;
            }
            mxe_sx_complete_from_step(op, st);
        }
        op->sx_rec = NULL;
        mxa_sx_record_free(rec);
        mxe_op_release(op);
    }
    return n;
}

/* Finalize or a failed peer: every step still waiting stops. */
void mxe_sx_abort_steps(void)
{
    if (watch_count)
        mxa_sx_abort_all();
}
