/*
 * partitioned.c - partitioned requests whose partitions kernels (or host
 * code) mark ready and see arrive (issue 19): MPIX_Acc_Psend_init,
 * MPIX_Acc_Precv_init, MPIX_Acc_Start, MPIX_Acc_Pready(_range),
 * MPIX_Acc_Parrived, MPIX_Acc_Prequest_get_device; the device side is
 * mpix/mpix_acc_device.cuh, the handle's layout mpix/mpix_acc_dreq.h.
 *
 * Shape (MPI-4 partitioned communication): a request is persistent; a
 * send and a receive request pair up once, in the order of their init
 * calls per (communicator, sender, receiver, tag) -- the set-up is
 * exchanged at init, not at a start; each start begins an *epoch*
 * (1, 2, ...) written into the device handle in stream order; the
 * sender's code marks partitions ready, the receiver's sees them arrive;
 * a wait (on a stream or the host) completes the epoch.
 *
 * Set-up: each side sends a description of itself to the other as a
 * library message (MXE_CTX_PART_SEND | ctx from the sender, _RECV from the
 * receiver; the user's tag, call order: init order pairs them) and
 * receives the other's. When both are done (progress thread) the pair
 * agrees on its protocol (mpix_acc_dreq.h): *direct* where both buffers
 * are device memory of processes of one node whose GPUs reach each other
 * and MPIX_ACC_KI=auto, else the *proxy*. A start before that enqueues a
 * stream wait on the set-up, so no device code sees an undecided handle.
 *
 * Proxy: the sender's progress thread polls ready[p] of its started
 * epochs and sends partition p as a message on MXE_CTX_PART_DATA | q (q:
 * the receiver's number of the pair, tag p; each (pair, partition) is its
 * own channel, so partitions go in the order they become ready); the
 * receiver's epoch, when its stream reaches the start, posts one receive
 * per partition and raises arrived[p] as each lands. An epoch is one
 * engine op (a local op: it completes when its partitions' messages did),
 * so MPI_Wait, MPI_Test, MPIX_Acc_Wait and the stream waits treat it as
 * any request (persist.c puts it in the persistent handle's place).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "interpose/interpose.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mpix_acc_dreq.h"
#include "accel/sx.h"
#include "util/log.h"
#include "util/waiter.h"

#include <unistd.h>

#define PART_DESC_MAGIC 0x4d58504453433031ull /* "MXPDSC01" */

/* What one side tells the other at init. */
typedef struct {
    uint64_t magic;
    uint64_t part_bytes;
    int32_t partitions;
    int32_t memtype;      /* mxa_memtype_t of the buffer */
    int32_t q;            /* receiver: its number of the pair */
    int32_t direct;       /* this side can take the direct protocol */
    char busid[32];       /* device of the buffer ("" none) */
    uint64_t line_stride; /* receiver, direct: 8-byte words per partition's slot */
    uint64_t data_off;    /* receiver, direct: where the partitions' slots start */
    int32_t bulk;         /* receiver, direct: plain bytes + a flag per partition */
    int32_t pad;
    uint64_t slots_bytes; /* receiver, direct: its slots, handed out as a fd ... */
    char sock[64];        /* ... by its progress thread at this socket */
    char slots_name[32];  /* ... under this name */
} part_desc_t;

/* A started epoch of a proxy send, waiting for its partitions (poller). */
typedef struct part_epoch {
    struct part_epoch *next;
    uint64_t e;
    mxe_op_t *op; /* the epoch's op (a reference) */
    int scan;     /* partitions below are sent */
    int nsent;
    unsigned char *sent;
} part_epoch_t;

struct mxi_part {
    _Atomic int refs; /* the application's, the set-up's, each epoch op's */
    int is_send;
    char *buf;
    int partitions;
    size_t part_bytes;
    int memtype;
    int peer, peer_world, tag, my_world;
    MPI_Comm comm;
    uint32_t ctx;
    size_t eager_limit;
    int q; /* the receiver's number of the pair (receiver: its own) */

    part_desc_t mine, theirs;
    mxe_op_t *setup; /* local op: done when both descriptions are */
    int setup_left;  /* descriptions not done (progress thread) */
    mxu_status_t setup_error;
    _Atomic int mode; /* MPIX_ACC_DREQ_* */

    /* the device handle: dreq is what device code gets (device memory for
     * device buffers, else host memory == hd); hd is the host's copy */
    mpix_acc_dreq_t *dreq;
    mpix_acc_dreq_t hd;
    void *dev_ctx; /* context of the device handle (NULL: host memory) */
    size_t dreq_bytes;
    uint64_t *flags; /* host-visible: ready/arrived[partitions], pstate[partitions], error */
    uint64_t epoch;  /* epochs started (application thread) */
    /* direct: the receiver's slots (its own, or mapped here by the sender),
     * the epoch started and not completed yet (0: none), its stream */
    void *slots;
    size_t slots_bytes;
    int ask_fd;         /* sender: the socket the receiver's fd comes by (-1: none) */
    uint64_t ask_until; /* ... and when the sender gives up */
    struct mxi_part *next_asking;
    uint64_t direct_pending;
    mxa_stream_t *start_stream;
    mxi_origin_t start_origin;
    int start_captured; /* the pending epoch's start is in a CUDA graph capture */
    int dev_counted;    /* starts count on the device (once one was captured: the
                           graph's launches start epochs the host does not see) */
    uint32_t reported_error;

    /* proxy send: started epochs (lock), and the poller's list link */
    pthread_mutex_t lock;
    part_epoch_t *eq_head, *eq_tail;
    int polled;
    struct mxi_part *next_polled;
};

typedef struct {
    mxi_part_t *part;
    uint64_t e;
} part_epoch_ref_t;

static struct {
    pthread_mutex_t lock; /* polled list and pair numbers */
    mxi_part_t *polled;   /* proxy sends with started epochs */
    _Atomic int npolled;
    _Atomic int ndirect; /* requests on the direct protocol */
    mxi_part_t *asking;  /* senders waiting for their receiver's slots (progress thread) */
    _Atomic int nasking;
    unsigned char *q_used; /* pair numbers (MXE_CTX_COMM_LIMIT) */
    int q_next;
} pt = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned part_poll(void);
static int part_busy(void)
{
    return atomic_load_explicit(&pt.npolled, memory_order_relaxed) > 0 ||
           atomic_load_explicit(&pt.nasking, memory_order_relaxed) > 0;
}
void mxi_part_init(void) { (void)mxe_add_poller(part_poll, part_busy); }

/* ------------------------------------------------------------ lifetime */

static void part_release(void *arg)
{
    mxi_part_t *p = arg;
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (atomic_load(&p->mode) == MPIX_ACC_DREQ_DIRECT)
        atomic_fetch_sub(&pt.ndirect, 1);
    if (!p->is_send && p->q >= 0) {
        pthread_mutex_lock(&pt.lock);
        pt.q_used[p->q] = 0;
        pthread_mutex_unlock(&pt.lock);
    }
    if (p->setup)
        mxe_op_release(p->setup);
    if (p->slots)
        mxa_part_slots_free(p->dev_ctx, p->slots, p->slots_bytes);
    if (!p->is_send && p->mine.slots_name[0])
        mxa_sx_unexport_fd(p->mine.slots_name);
    if (p->dev_ctx)
        mxa_part_dev_free(p->dev_ctx, p->dreq, p->dreq_bytes);
    mxa_part_host_free(p->flags);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int q_alloc(void)
{
    pthread_mutex_lock(&pt.lock);
    int q = -1;
    if (!pt.q_used)
        pt.q_used = calloc(MXE_CTX_COMM_LIMIT, 1);
    for (int i = 0; pt.q_used && i < (int)MXE_CTX_COMM_LIMIT; i++) {
        int c = (pt.q_next + i) % (int)MXE_CTX_COMM_LIMIT;
        if (!pt.q_used[c]) {
            pt.q_used[c] = 1;
            pt.q_next = c + 1;
            q = c;
            break;
        }
    }
    pthread_mutex_unlock(&pt.lock);
    return q;
}

/* The host's copy of the handle, to where device code reads it. */
static mxu_status_t part_publish(mxi_part_t *p)
{
    if (!p->dev_ctx)
        return MXU_OK; /* dreq is hd */
    return mxa_part_dev_write(p->dev_ctx, p->dreq, &p->hd, sizeof(p->hd));
}

/* --------------------------------------------------------------- set-up */

static const char *part_what(const mxi_part_t *p) { return p->is_send ? "send" : "receive"; }

static void part_direct_failed(mxi_part_t *p, mxu_status_t st);
static void part_set_mode(mxi_part_t *p, int mode);

/* Both descriptions are here (progress thread): agree on the protocol. */
static void part_setup_finish(mxi_part_t *p)
{
    const part_desc_t *t = &p->theirs;
    if (p->setup_error == MXU_OK && t->magic != PART_DESC_MAGIC)
        p->setup_error = MXU_ERR_TRANSPORT;
    if (p->setup_error == MXU_OK &&
        (t->partitions != p->partitions || t->part_bytes != p->part_bytes)) {
        uint64_t mine = (uint64_t)p->partitions * p->part_bytes;
        uint64_t theirs = (uint64_t)t->partitions * t->part_bytes;
        MXU_LOG(MXU_LOG_ERROR,
                "partitioned %s (peer %d, tag %d): %d partitions of %llu bytes here, %d of %llu "
                "at the peer: %s",
                part_what(p), p->peer, p->tag, p->partitions, (unsigned long long)p->part_bytes,
                t->partitions, (unsigned long long)t->part_bytes,
                mine != theirs ? "the sizes differ"
                               : "different partitionings of one size are not supported");
        p->setup_error = (p->is_send ? mine > theirs : theirs > mine) ? MXU_ERR_TRUNCATED
                                                                      : MXU_ERR_INVALID_PARAM;
    }
    if (p->is_send)
        p->q = t->q;
    /* direct where both sides offered it and the devices reach each other
     * (both sides decide alike) */
    int mode = MPIX_ACC_DREQ_PROXY;
    if (p->setup_error == MXU_OK && p->mine.direct && t->direct && t->partitions == p->partitions &&
        mxa_part_reaches(p->dev_ctx, t->busid))
        mode = MPIX_ACC_DREQ_DIRECT;
    if (mode == MPIX_ACC_DREQ_DIRECT && p->is_send) {
        /* the receiver's slots come as a fd from its progress thread: ask
         * now, map when the answer is there (part_poll; the set-up's third
         * part) */
        p->ask_fd = mxa_sx_fd_ask(t->sock, t->slots_name);
        if (p->ask_fd >= 0) {
            p->ask_until = mxu_now_ns() + 30ull * 1000000000ull;
            p->next_asking = pt.asking;
            pt.asking = p;
            atomic_fetch_add(&pt.nasking, 1);
            return;
        }
        part_direct_failed(p, MXU_ERR_SYSTEM);
        mode = MPIX_ACC_DREQ_PROXY;
    }
    part_set_mode(p, mode);
}

/* The sender could not map the receiver's slots: the receiver expects the
 * direct protocol, so the pair's epochs fail (theirs by time-out). */
static void part_direct_failed(mxi_part_t *p, mxu_status_t st)
{
    MXU_LOG(MXU_LOG_ERROR,
            "partitioned send (peer %d, tag %d): cannot map the receiver's slots; the pair's "
            "epochs fail",
            p->peer, p->tag);
    p->setup_error = st;
}

/* The pair's protocol is decided: published to the device handle. */
static void part_set_mode(mxi_part_t *p, int mode)
{
    MXU_LOG(MXU_LOG_DEBUG, "partitioned %s (peer %d, tag %d): %s protocol", part_what(p), p->peer,
            p->tag, mode == MPIX_ACC_DREQ_DIRECT ? "direct" : "proxy");
    p->hd.mode = (uint32_t)mode;
    if (mode == MPIX_ACC_DREQ_DIRECT)
        atomic_fetch_add(&pt.ndirect, 1);
    if (part_publish(p) != MXU_OK && p->setup_error == MXU_OK)
        p->setup_error = MXU_ERR_NO_DEVICE;
    atomic_store_explicit(&p->mode, mode, memory_order_release);
    mxe_op_local_part_done(p->setup, p->setup_error); /* the set-up's third part */
}

/* Senders waiting for the receiver's slots (progress thread): map them
 * when their fd came. */
static unsigned part_poll_asking(void)
{
    unsigned work = 0;
    mxi_part_t **pp = &pt.asking;
    while (*pp) {
        mxi_part_t *p = *pp;
        int fd = -1;
        uint64_t bytes = 0;
        int r = mxa_sx_fd_answer(p->ask_fd, &fd, &bytes);
        if (r == 0 && mxu_now_ns() < p->ask_until) {
            pp = &p->next_asking;
            continue;
        }
        if (r == 0)
            close(p->ask_fd);
        p->ask_fd = -1;
        *pp = p->next_asking;
        atomic_fetch_sub(&pt.nasking, 1);
        work++;
        int mode = MPIX_ACC_DREQ_PROXY;
        mxu_status_t st =
            r == 1 ? mxa_part_slots_import(p->dev_ctx, fd, (size_t)bytes, &p->slots) : MXU_ERR_PEER;
        if (fd >= 0)
            close(fd);
        if (st == MXU_OK) {
            p->slots_bytes = (size_t)bytes;
            p->hd.lines = (uint64_t *)((char *)p->slots + p->theirs.data_off);
            p->hd.consumed = (uint64_t *)p->slots;
            p->hd.pflags = (uint64_t *)((char *)p->slots + 64);
            p->hd.line_stride = p->theirs.line_stride;
            p->hd.bulk = (uint32_t)p->theirs.bulk;
            mode = MPIX_ACC_DREQ_DIRECT;
        } else {
            p->slots = NULL;
            part_direct_failed(p, st);
        }
        part_set_mode(p, mode);
    }
    return work;
}

static void part_desc_done(mxe_op_t *op)
{
    mxi_part_t *p = op->user;
    if (op->result.error != MXU_OK && p->setup_error == MXU_OK)
        p->setup_error = op->result.error;
    if (--p->setup_left == 0)
        part_setup_finish(p);
    mxe_op_local_part_done(p->setup, p->setup_error);
}

/* The set-up messages: our description out, the peer's in. */
static mxu_status_t part_exchange(mxi_part_t *p, const mxe_comm_t *ec)
{
    mxe_comm_t out = *ec, in = *ec;
    out.ctx_id = (p->is_send ? MXE_CTX_PART_SEND : MXE_CTX_PART_RECV) | p->ctx;
    in.ctx_id = (p->is_send ? MXE_CTX_PART_RECV : MXE_CTX_PART_SEND) | p->ctx;
    out.match_dynamic = in.match_dynamic = 0;
    out.sx = in.sx = 0;
    mxa_stream_t *none = mxa_none_stream();
    MXU_TRY(mxe_op_create_local(none, MXE_OP_RECV, 3, &p->setup));
    p->setup_left = 2;
    mxe_op_t *send = NULL, *recv = NULL;
    mxu_status_t st =
        mxe_op_create_send(none, &p->mine, sizeof(p->mine), &out, p->peer, p->tag, 0, &send);
    if (st == MXU_OK)
        st =
            mxe_op_create_recv(none, &p->theirs, sizeof(p->theirs), &in, p->peer, p->tag, 0, &recv);
    if (st != MXU_OK) {
        if (send) {
            mxe_op_release(send);
            mxe_op_release(send);
        }
        mxe_op_release(p->setup);
        mxe_op_release(p->setup);
        p->setup = NULL;
        return st;
    }
    /* each set-up op holds a reference to p until it is freed */
    mxe_op_t *ops[2] = {send, recv};
    for (int i = 0; i < 2; i++) {
        atomic_fetch_add(&p->refs, 1);
        ops[i]->user = p;
        ops[i]->user_complete = part_desc_done;
        ops[i]->user_free = part_release;
    }
    (void)mxe_op_submit(p->setup); /* the none stream: nothing to enqueue */
    for (int i = 0; i < 2; i++) {
        (void)mxe_op_submit(ops[i]);
        mxe_op_release(ops[i]);
    }
    return MXU_OK;
}

/* ---------------------------------------------------------------- init */

/* This side can take the direct protocol (a device buffer of a process
 * whose peer is on the node): its device, and for a receive the slots --
 * a 64-byte credit word (consumed), a flag per partition (bulk), then per
 * partition its LL lines or (above MPIX_ACC_KI_LL_BYTES) its bytes, each
 * rounded to 16 bytes -- exported for the sender. */
static mxu_status_t part_direct_offer(mxi_part_t *p)
{
    mxa_part_busid(p->dev_ctx, p->mine.busid, sizeof(p->mine.busid));
    if (!p->mine.busid[0])
        return MXU_ERR_UNSUPPORTED;
    if (p->is_send)
        return MXU_OK;
    /* LL: a line per 4 bytes; bulk: the bytes, rounded to 16 (a flag per
     * partition after the credit word) */
    int bulk = p->part_bytes > mxu_config.ki_ll_bytes;
    uint64_t stride = bulk ? (p->part_bytes + 15) / 16 * 2 : ((p->part_bytes + 3) / 4 + 1) / 2 * 2;
    if (stride == 0)
        stride = 2;
    uint64_t data_off = 64 + ((uint64_t)p->partitions * 8 + 63) / 64 * 64;
    size_t bytes = (size_t)data_off + (size_t)stride * 8 * (size_t)p->partitions;
    int fd = -1;
    mxu_status_t st = mxa_part_slots_alloc(p->dev_ctx, &bytes, &p->slots, &fd);
    if (st == MXU_OK) {
        p->slots_bytes = bytes;
        snprintf(p->mine.slots_name, sizeof(p->mine.slots_name), "mxpart-%d", p->q);
        st = mxa_sx_export_fd(p->mine.slots_name, fd, bytes, p->mine.sock, sizeof(p->mine.sock));
        if (st != MXU_OK) {
            close(fd);
            p->mine.slots_name[0] = '\0';
        }
    }
    if (st != MXU_OK) {
        if (p->slots)
            mxa_part_slots_free(p->dev_ctx, p->slots, p->slots_bytes);
        p->slots = NULL;
        MXU_LOG(MXU_LOG_INFO,
                "partitioned receive (peer %d, tag %d): no slots for the direct "
                "protocol: the proxy carries it",
                p->peer, p->tag);
        return st;
    }
    p->mine.line_stride = stride;
    p->mine.slots_bytes = bytes;
    p->mine.data_off = data_off;
    p->mine.bulk = bulk;
    p->hd.lines = (uint64_t *)((char *)p->slots + data_off);
    p->hd.consumed = (uint64_t *)p->slots;
    p->hd.pflags = (uint64_t *)((char *)p->slots + 64);
    p->hd.line_stride = stride;
    p->hd.bulk = (uint32_t)bulk;
    return MXU_OK;
}

static int part_init(int is_send, void *buf, int partitions, MPI_Count count, MPI_Datatype dt,
                     int peer, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
    const char *call = is_send ? "MPIX_Acc_Psend_init" : "MPIX_Acc_Precv_init";
    (void)info;
    if (!mxi_on())
        return mxi_raise(comm, MXI_E_NOT_ACTIVE, "%s", call);
    if (partitions < 1)
        return mxi_raise(comm, MXI_E_COUNT, "%s: %d partitions (must be >= 1)", call, partitions);
    if (count < 0 || count > INT_MAX)
        return mxi_raise(comm, MXI_E_COUNT, "%s: count %lld per partition (valid: 0..%d)", call,
                         (long long)count, INT_MAX);
    if (!is_send && (peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG))
        return mxi_raise(comm, MXI_E_ARG, "%s: partitioned receives name their source and tag",
                         call);
    int rc = mxi_p2p_check(is_send, buf, (int)count, dt, peer, tag, comm, req);
    if (rc != MPI_SUCCESS)
        return rc;
    if (count > 0 && mxi_datatype_contiguous(dt) != 1)
        return mxi_raise(comm, MXI_E_TYPE, "%s: non-contiguous datatypes are not supported", call);
    mxi_comm_t *c = mxi_comm_find(comm);
    int tsize = 0;
    PMPI_Type_size(dt, &tsize);

    mxi_part_t *p = calloc(1, sizeof(*p));
    if (!p)
        return mxi_raise(comm, MXI_E_NO_MEM, "%s", call);
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->lock, NULL);
    p->is_send = is_send;
    p->buf = buf;
    p->partitions = partitions;
    p->part_bytes = (size_t)count * (size_t)tsize;
    p->peer = peer;
    p->tag = tag;
    p->comm = comm;
    p->ctx = c->ec.ctx_id;
    p->my_world = mxi.world_rank;
    p->peer_world = peer >= 0 ? (c->ec.world_ranks ? c->ec.world_ranks[peer] : peer) : -1;
    p->eager_limit = c->eager_limit;
    p->q = -1;
    p->ask_fd = -1;
    size_t total = p->part_bytes * (size_t)partitions;
    p->memtype = total > 0 ? (int)mxa_memtype(buf, total) : MXA_MEM_HOST;

    /* flags: ready or arrived [partitions], pstate [partitions], error */
    size_t nflags = 2 * (size_t)partitions + 1;
    p->flags = mxa_part_host_alloc(nflags * sizeof(uint64_t));
    if (!p->flags) {
        part_release(p);
        return mxi_raise(comm, MXI_E_NO_MEM, "%s (flags)", call);
    }
    mxu_config_t *cfg = &mxu_config;
    p->hd = (mpix_acc_dreq_t){
        .magic = MPIX_ACC_DREQ_MAGIC,
        .is_send = (uint32_t)is_send,
        .mode = MPIX_ACC_DREQ_PENDING,
        .partitions = partitions,
        .part_bytes = p->part_bytes,
        .buf = buf,
        .timeout_ns = (uint64_t)(cfg->ki_timeout * 1e9),
        .error = (uint32_t *)(p->flags + 2 * (size_t)partitions),
        .pstate = p->flags + partitions,
        .ready = is_send ? p->flags : NULL,
        .arrived = is_send ? NULL : p->flags,
    };
    p->dreq = &p->hd;
    if (p->memtype == MXA_MEM_DEVICE) {
        /* the handle and pstate (the device's atomics) in device memory */
        void *d = NULL;
        size_t off = (sizeof(mpix_acc_dreq_t) + 63) / 64 * 64;
        p->dreq_bytes = off + sizeof(uint64_t) * ((size_t)partitions + 1);
        mxu_status_t st = mxa_part_dev_alloc(buf, p->dreq_bytes, &d, &p->dev_ctx);
        if (st != MXU_OK) {
            part_release(p);
            return mxi_raise(comm, MXI_E_NO_MEM, "%s (device handle)", call);
        }
        p->dreq = d;
        p->hd.pstate = (uint64_t *)((char *)d + off);
        p->hd.done = (unsigned long long *)(p->hd.pstate + partitions);
    }
    p->mine = (part_desc_t){.magic = PART_DESC_MAGIC,
                            .part_bytes = p->part_bytes,
                            .partitions = partitions,
                            .memtype = p->memtype,
                            .q = -1,
                            .direct = 0};
    if (!is_send && peer != MPI_PROC_NULL) {
        p->q = q_alloc();
        if (p->q < 0) {
            part_release(p);
            return mxi_raise(comm, MXI_E_NO_MEM, "%s: %u partitioned receives live", call,
                             MXE_CTX_COMM_LIMIT);
        }
        p->mine.q = p->q;
    }
    if (p->dev_ctx && peer != MPI_PROC_NULL && strcmp(cfg->ki, "auto") == 0 &&
        mxe_world_on_node(p->peer_world) && part_direct_offer(p) == MXU_OK)
        p->mine.direct = 1;
    if (peer == MPI_PROC_NULL) {
        p->hd.mode = MPIX_ACC_DREQ_PROXY;
        atomic_store(&p->mode, MPIX_ACC_DREQ_PROXY);
    }
    if (part_publish(p) != MXU_OK) {
        part_release(p);
        return mxi_raise(comm, MXI_E_NO_MEM, "%s (device handle)", call);
    }
    if (peer != MPI_PROC_NULL && part_exchange(p, &c->ec) != MXU_OK) {
        part_release(p);
        return mxi_raise(comm, MXI_E_NO_MEM, "%s (set-up messages)", call);
    }
    rc = mxi_persist_add_part(comm, p, req);
    if (rc != MPI_SUCCESS)
        part_release(p); /* (the set-up ops keep it until they are done) */
    return rc;
}

int MPIX_Acc_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                        int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return part_init(1, (void *)(uintptr_t)buf, partitions, count, datatype, dest, tag, comm, info,
                     request);
}

int MPIX_Acc_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                        int source, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return part_init(0, buf, partitions, count, datatype, source, tag, comm, info, request);
}

/* ---------------------------------------------------------------- proxy */

/* A partition's message is done (progress thread). */
static void part_msg_done(mxe_op_t *op)
{
    part_epoch_ref_t *ref = ((mxe_op_t *)op->user)->user;
    mxi_part_t *p = ref->part;
    if (!p->is_send && op->result.error == MXU_OK)
        atomic_store_explicit((_Atomic uint64_t *)&p->flags[op->tag], ref->e,
                              memory_order_release); /* arrived[p] */
    mxe_op_local_part_done(op->user, op->result.error);
}

/* One partition's message of epoch op `eop` (progress thread). */
static mxu_status_t part_msg(mxi_part_t *p, mxe_op_t *eop, int part)
{
    mxe_comm_t data = {.ctx_id = MXE_CTX_PART_DATA | (uint32_t)p->q,
                       .rank = p->my_world,
                       .size = mxi.world_size,
                       .world_ranks = NULL};
    char *b = p->buf + (size_t)part * p->part_bytes;
    mxe_op_t *op = NULL;
    mxu_status_t st = p->is_send ? mxe_op_create_send(mxa_none_stream(), b, p->part_bytes, &data,
                                                      p->peer_world, part, p->eager_limit, &op)
                                 : mxe_op_create_recv(mxa_none_stream(), b, p->part_bytes, &data,
                                                      p->peer_world, part, 0, &op);
    if (st != MXU_OK)
        return st;
    op->user = eop;
    op->user_complete = part_msg_done;
    st = mxe_op_submit(op);
    if (st != MXU_OK)
        mxe_op_release(op); /* the engine's: it never got it */
    mxe_op_release(op);
    return st;
}

/* The receiver's epoch: its stream reached the start (progress thread). */
static void part_recv_epoch_start(mxe_op_t *eop)
{
    part_epoch_ref_t *ref = eop->user;
    mxi_part_t *p = ref->part;
    if (p->setup_error != MXU_OK) {
        eop->local_error = p->setup_error;
        eop->local_parts = 0;
        return;
    }
    for (int i = 0; i < p->partitions; i++) {
        mxu_status_t st = part_msg(p, eop, i);
        if (st != MXU_OK) {
            if (eop->local_error == MXU_OK)
                eop->local_error = st;
            eop->local_parts--;
        }
    }
}

/* Send the ready partitions of p's oldest epochs (progress thread). */
static unsigned part_poll_one(mxi_part_t *p, int *drained)
{
    unsigned work = 0;
    *drained = 0;
    if (atomic_load_explicit(&p->mode, memory_order_acquire) == MPIX_ACC_DREQ_PENDING)
        return 0;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        part_epoch_t *ep = p->eq_head;
        pthread_mutex_unlock(&p->lock);
        if (!ep) {
            *drained = 1;
            return work;
        }
        for (int i = ep->scan; i < p->partitions; i++) {
            if (ep->sent[i])
                continue;
            uint64_t r =
                atomic_load_explicit((_Atomic uint64_t *)&p->flags[i], memory_order_acquire);
            if (r < ep->e && p->setup_error == MXU_OK)
                continue;
            ep->sent[i] = 1;
            ep->nsent++;
            work++;
            mxu_status_t st = p->setup_error;
            if (st == MXU_OK)
                st = part_msg(p, ep->op, i);
            if (st != MXU_OK)
                mxe_op_local_part_done(ep->op, st);
        }
        while (ep->scan < p->partitions && ep->sent[ep->scan])
            ep->scan++;
        if (ep->nsent < p->partitions)
            return work;
        pthread_mutex_lock(&p->lock);
        p->eq_head = ep->next;
        if (!p->eq_head)
            p->eq_tail = NULL;
        pthread_mutex_unlock(&p->lock);
        mxe_op_release(ep->op);
        free(ep->sent);
        free(ep);
    }
}

static unsigned part_poll_asking(void);

static unsigned part_poll(void)
{
    unsigned work = pt.asking ? part_poll_asking() : 0;
    if (atomic_load_explicit(&pt.npolled, memory_order_acquire) == 0)
        return work;
    /* the whole pass under the list's lock: a start may add to the list
     * meanwhile (lock order: pt.lock, then a request's lock) */
    pthread_mutex_lock(&pt.lock);
    mxi_part_t **pp = &pt.polled;
    while (*pp) {
        mxi_part_t *p = *pp;
        int drained = 0;
        work += part_poll_one(p, &drained);
        pthread_mutex_lock(&p->lock);
        int empty = drained && p->eq_head == NULL;
        if (empty)
            p->polled = 0;
        pthread_mutex_unlock(&p->lock);
        if (empty) {
            *pp = p->next_polled;
            atomic_fetch_sub(&pt.npolled, 1);
            part_release(p); /* a send: its release does not take pt.lock */
        } else {
            pp = &p->next_polled;
        }
    }
    pthread_mutex_unlock(&pt.lock);
    return work;
}

/* --------------------------------------------------------------- start */

static const char *part_derr_name(uint32_t code)
{
    switch (code) {
    case MPIX_ACC_DERR_FREED:
        return "a device call used the handle of a freed request";
    case MPIX_ACC_DERR_PARTITION:
        return "a device call named a partition out of range";
    case MPIX_ACC_DERR_TWICE:
        return "a partition was made ready twice in one epoch";
    case MPIX_ACC_DERR_TIMEOUT:
        return "a device wait ran out of time (MPIX_ACC_KI_TIMEOUT)";
    case MPIX_ACC_DERR_ROLE:
        return "pready on a receive or parrived on a send";
    case MPIX_ACC_DERR_NOT_READY:
        return "a device call before the request's first start";
    case MPIX_ACC_DERR_SIZE:
        return "a value call's value is not one partition in size";
    default:
        return "unknown device error";
    }
}

static uint32_t part_error_word(const mxi_part_t *p)
{
    return atomic_load_explicit((_Atomic uint32_t *)p->hd.error, memory_order_acquire);
}

/* An error the device code kept that was not reported yet: raised once. */
static int part_device_error(mxi_part_t *p, const char *call)
{
    uint32_t code = part_error_word(p);
    if (code == 0 || code == p->reported_error)
        return MPI_SUCCESS;
    p->reported_error = code;
    return mxi_raise(p->comm, code == MPIX_ACC_DERR_TIMEOUT ? MXI_E_PENDING : MXI_E_ARG,
                     "%s: partitioned %s (peer %d, tag %d), epoch %llu: %s", call, part_what(p),
                     p->peer, p->tag, (unsigned long long)p->epoch, part_derr_name(code));
}

/* The host waits for a direct epoch: its completion's op passed the
 * completion on the stream (progress thread): the device's error, if any. */
static void part_direct_checked(mxe_op_t *op)
{
    part_epoch_ref_t *ref = op->user;
    uint32_t code = part_error_word(ref->part);
    if (code != 0)
        op->local_error = code == MPIX_ACC_DERR_TIMEOUT ? MXU_ERR_TIMED_OUT : MXU_ERR_INVALID_PARAM;
}

static void part_epoch_free(void *arg);

/* The completion of p's pending direct epoch on stream s: kernels that
 * read the epoch from the handle (a receive's also gives the sender its
 * credit), so a capture of start, kernels and wait replays as a new epoch
 * per launch. An epoch started in a capture completes in the same capture
 * (a stream wait on the capturing stream), one started outside outside. */
static int part_direct_complete(mxi_part_t *p, mxa_stream_t *s)
{
    int capturing = mxa_stream_capturing(s);
    if (capturing != p->start_captured) {
        const char *why =
            p->start_captured
                ? "its epoch was started in a CUDA graph capture: complete it by a stream wait "
                  "in that capture"
                : "its epoch was started outside the CUDA graph capture this wait is in: "
                  "complete it outside (a graph launched twice would complete epochs it "
                  "never started)";
        if (capturing) /* (it fails: the error raised is this call's) */
            (void)mxa_stream_refuse_capture(s, "a stream wait");
        return mxi_raise(p->comm, MXI_E_REQUEST, "wait of a partitioned %s (peer %d, tag %d): %s",
                         part_what(p), p->peer, p->tag, why);
    }
    mxu_status_t st = mxa_part_complete(s, p->dreq, p->is_send, p->partitions, p->part_bytes);
    if (st != MXU_OK)
        return mxi_raise_code(p->comm, mxi_status_to_mpi(st));
    p->direct_pending = 0;
    p->start_captured = 0;
    return MPI_SUCCESS;
}

int mxi_part_prepare(int count, MPI_Request reqs[], mxa_stream_t *s)
{
    if (atomic_load_explicit(&pt.ndirect, memory_order_relaxed) == 0 || !reqs)
        return MPI_SUCCESS;
    for (int i = 0; i < count; i++) {
        MPI_Request *active = NULL;
        mxi_part_t *p = mxi_persist_part(reqs[i], &active);
        if (!p || !p->direct_pending)
            continue;
        if (s || p->start_origin == MXI_ORIGIN_STREAMCOMM) {
            /* a stream wait: the completion is on the stream; the request
             * is inactive at once (its status is empty) */
            int rc = part_direct_complete(p, s ? s : p->start_stream);
            if (rc != MPI_SUCCESS)
                return rc;
            continue;
        }
        /* the host waits: the completion on the start's stream, then an op
         * that completes when the stream passed it */
        if (p->start_captured)
            return mxi_raise(p->comm, MXI_E_REQUEST,
                             "host wait of a partitioned %s (peer %d, tag %d) whose epoch was "
                             "started in a CUDA graph capture: a graph's epochs complete by a "
                             "stream wait in the capture (MPIX_Acc_Wait(3))",
                             part_what(p), p->peer, p->tag);
        uint64_t e = p->direct_pending;
        int rc = part_direct_complete(p, p->start_stream);
        if (rc != MPI_SUCCESS)
            return rc;
        mxe_op_t *op = NULL;
        part_epoch_ref_t *ref = malloc(sizeof(*ref));
        if (!ref || mxe_op_create_local(p->start_stream, p->is_send ? MXE_OP_SEND : MXE_OP_RECV, 0,
                                        &op) != MXU_OK) {
            free(ref);
            return mxi_raise(p->comm, MXI_E_NO_MEM, "partitioned completion");
        }
        atomic_fetch_add(&p->refs, 1);
        *ref = (part_epoch_ref_t){p, e};
        op->user = ref;
        op->user_free = part_epoch_free;
        op->local_start = part_direct_checked;
        op->result.source = p->peer;
        op->result.tag = p->tag;
        op->result.bytes = p->part_bytes * (size_t)p->partitions;
        rc = mxi_submit(op, MXI_ORIGIN_EXPLICIT, p->comm, active);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

static void part_epoch_free(void *arg)
{
    part_epoch_ref_t *ref = arg;
    part_release(ref->part);
    free(ref);
}

int mxi_part_start(mxi_part_t *p, mxa_stream_t *s, MPI_Request *active)
{
    mxi_origin_t origin = MXI_ORIGIN_EXPLICIT;
    if (*active != MPI_REQUEST_NULL)
        return mxi_raise(p->comm, MXI_E_REQUEST,
                         "start of a partitioned %s (peer %d, tag %d) whose epoch %llu was not "
                         "completed by a wait or test",
                         part_what(p), p->peer, p->tag, (unsigned long long)p->epoch);
    if (s == NULL) { /* MPI_Start: the communicator's stream, else none */
        mxi_comm_t *c = mxi_comm_find(p->comm);
        if (c && c->stream) {
            s = c->stream;
            origin = MXI_ORIGIN_STREAMCOMM;
        } else {
            s = mxa_none_stream();
        }
    }
    if (p->direct_pending)
        return mxi_raise(p->comm, MXI_E_REQUEST,
                         "start of a partitioned %s (peer %d, tag %d) whose epoch %llu was not "
                         "completed by a wait or test",
                         part_what(p), p->peer, p->tag, (unsigned long long)p->epoch);
    int rc = part_device_error(p, "MPIX_Acc_Start");
    if (rc != MPI_SUCCESS)
        return rc;
    /* the first start needs the protocol: it waits until the peer's init
     * was seen (bounded by MPIX_ACC_KI_TIMEOUT) */
    if (p->setup && !mxe_op_is_complete(p->setup)) {
        double limit = mxu_config.ki_timeout;
        if (mxe_op_wait_host(p->setup, limit > 0 ? (int64_t)(limit * 1e9) : -1) != MXU_OK)
            return mxi_raise(p->comm, MXI_E_PENDING,
                             "first start of a partitioned %s (peer %d, tag %d): the peer's "
                             "matching init was not seen within MPIX_ACC_KI_TIMEOUT=%g s",
                             part_what(p), p->peer, p->tag, limit);
    }
    int direct = atomic_load_explicit(&p->mode, memory_order_acquire) == MPIX_ACC_DREQ_DIRECT;
    /* A capture into a CUDA graph: only the direct protocol (no host work
     * per epoch) replays; its start then counts on the device, and so does
     * every later start of the request (the graph's launches start epochs
     * the host never sees). The set-up above happened before, on the host. */
    int capturing = mxa_stream_capturing(s);
    if (capturing && (!direct || s->kind != MXA_KIND_CUDA)) {
        mxu_status_t cst = mxa_stream_refuse_capture(
            s, direct ? "MPIX_Acc_Start of a partitioned request on a host stream"
                      : "MPIX_Acc_Start of a partitioned request the host proxy carries (not the "
                        "direct protocol: its GPUs do not reach each other, host memory, or "
                        "MPIX_ACC_KI=proxy)");
        return mxi_raise_code(p->comm, mxi_status_to_mpi(cst)); /* capturing: never MXU_OK */
    }
    uint64_t e = p->epoch + 1;
    mxu_status_t st;
    if (direct && (capturing || p->dev_counted)) {
        st = mxa_part_start_dev(s, p->dreq);
        if (st == MXU_OK)
            p->dev_counted = 1;
    } else {
        st = mxa_stream_write64(s, &p->dreq->epoch, e);
    }
    if (st != MXU_OK)
        return mxi_raise_code(p->comm, mxi_status_to_mpi(st));
    p->epoch = e; /* the host's count (the device's once a graph replays) */
    if (direct) {
        /* no host work: the kernels move it; a wait enqueues the completion */
        p->direct_pending = e;
        p->start_stream = s;
        p->start_origin = origin;
        p->start_captured = capturing;
        return MPI_SUCCESS;
    }
    /* the epoch's op, started when the stream reaches the start (after its
     * store of the epoch: the request lives until then): a receive's posts
     * its partitions' receives then; a send's partitions leave as they
     * become ready (the poller) */
    int parts = p->peer == MPI_PROC_NULL ? 0 : p->partitions;
    mxe_op_t *eop = NULL;
    st = mxe_op_create_local(s, p->is_send ? MXE_OP_SEND : MXE_OP_RECV, parts, &eop);
    part_epoch_ref_t *ref = st == MXU_OK ? malloc(sizeof(*ref)) : NULL;
    part_epoch_t *ep = NULL;
    if (st == MXU_OK && p->is_send && parts > 0) {
        ep = calloc(1, sizeof(*ep));
        if (ep)
            ep->sent = calloc((size_t)parts, 1);
    }
    if (st != MXU_OK || !ref || (p->is_send && parts > 0 && (!ep || !ep->sent))) {
        if (ep)
            free(ep->sent);
        free(ep);
        free(ref);
        if (eop) {
            mxe_op_release(eop);
            mxe_op_release(eop);
        }
        return mxi_raise(p->comm, MXI_E_NO_MEM, "partitioned start");
    }
    atomic_fetch_add(&p->refs, 1);
    *ref = (part_epoch_ref_t){p, e};
    eop->user = ref;
    eop->user_free = part_epoch_free;
    /* its status (a send's says MPI_PROC_NULL, like every status of a send) */
    eop->result.source = p->peer == MPI_PROC_NULL ? MXE_PROC_NULL : p->peer;
    eop->result.tag = p->peer == MPI_PROC_NULL ? MXE_ANY_TAG : p->tag;
    eop->result.bytes = parts ? p->part_bytes * (size_t)parts : 0;
    if (!p->is_send && parts > 0)
        eop->local_start = part_recv_epoch_start;
    if (ep) {
        ep->e = e;
        ep->op = eop;
        mxe_op_retain(eop); /* the poller's */
        pthread_mutex_lock(&pt.lock);
        pthread_mutex_lock(&p->lock);
        if (p->eq_tail)
            p->eq_tail->next = ep;
        else
            p->eq_head = ep;
        p->eq_tail = ep;
        if (!p->polled) {
            p->polled = 1;
            atomic_fetch_add(&p->refs, 1);
            p->next_polled = pt.polled;
            pt.polled = p;
            atomic_fetch_add(&pt.npolled, 1);
        }
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_unlock(&pt.lock);
    }
    return mxi_submit(eop, origin, p->comm, active);
}

int MPIX_Acc_Start(MPIX_Acc_stream stream, MPI_Request *request)
{
    if (!request)
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST, "MPIX_Acc_Start: request argument is NULL");
    MPI_Request *active = NULL;
    mxi_part_t *p = mxi_persist_part(*request, &active);
    if (!p) /* a persistent point-to-point request: as MPI_Start, on stream */
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST,
                         "MPIX_Acc_Start: not a partitioned request of the library's");
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, p->comm, &s);
    if (rc != MPI_SUCCESS)
        return rc;
    return mxi_part_start(p, s, active);
}

/* ------------------------------------------------------ host functions */

/* The host functions act on the newest started epoch (in host order: a
 * start's stream may not have reached it yet); device code acts on the
 * epoch its stream is in (dreq->epoch). */
static int part_host_check(MPI_Request request, const char *call, mxi_part_t **out)
{
    mxi_part_t *p = mxi_persist_part(request, NULL);
    if (!p)
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST, "%s: not a partitioned request", call);
    if (p->epoch == 0)
        return mxi_raise(p->comm, MXI_E_REQUEST, "%s: the partitioned %s was never started", call,
                         part_what(p));
    if (atomic_load_explicit(&p->mode, memory_order_acquire) == MPIX_ACC_DREQ_DIRECT)
        return mxi_raise(p->comm, MXI_E_UNSUPPORTED,
                         "%s on the host: this request's partitions move between GPUs (direct "
                         "protocol); mark them from device code (mpix_acc_device.cuh)",
                         call);
    *out = p;
    return MPI_SUCCESS;
}

/* Partition i is made ready for its next epoch that is not ready yet: the
 * proxy sends epochs in order, so this is right whether the call comes
 * before the start's stream reached it or from a function on that stream
 * while the host started the next one already. */
int MPIX_Acc_Pready_range(int partition_low, int partition_high, MPI_Request request)
{
    mxi_part_t *p;
    int rc = part_host_check(request, "MPIX_Acc_Pready", &p);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!p->is_send)
        return mxi_raise(p->comm, MXI_E_REQUEST, "MPIX_Acc_Pready on a partitioned receive");
    if (partition_low < 0 || partition_high >= p->partitions || partition_low > partition_high)
        return mxi_raise(p->comm, MXI_E_ARG, "MPIX_Acc_Pready: partitions %d..%d (valid: 0..%d)",
                         partition_low, partition_high, p->partitions - 1);
    uint64_t newest = p->epoch;
    for (int i = partition_low; i <= partition_high; i++)
        if (atomic_load_explicit((_Atomic uint64_t *)&p->flags[i], memory_order_relaxed) >= newest)
            return mxi_raise(p->comm, MXI_E_ARG,
                             "MPIX_Acc_Pready: partition %d is ready already in epoch %llu", i,
                             (unsigned long long)newest);
    for (int i = partition_low; i <= partition_high; i++)
        atomic_fetch_add_explicit((_Atomic uint64_t *)&p->flags[i], 1, memory_order_release);
    return MPI_SUCCESS;
}

int MPIX_Acc_Pready(int partition, MPI_Request request)
{
    return MPIX_Acc_Pready_range(partition, partition, request);
}

int MPIX_Acc_Parrived(MPI_Request request, int partition, int *flag)
{
    mxi_part_t *p;
    int rc = part_host_check(request, "MPIX_Acc_Parrived", &p);
    if (rc != MPI_SUCCESS)
        return rc;
    if (p->is_send)
        return mxi_raise(p->comm, MXI_E_REQUEST, "MPIX_Acc_Parrived on a partitioned send");
    if (!flag)
        return mxi_raise(p->comm, MXI_E_ARG, "MPIX_Acc_Parrived: flag is NULL");
    if (partition < 0 || partition >= p->partitions)
        return mxi_raise(p->comm, MXI_E_ARG, "MPIX_Acc_Parrived: partition %d (valid: 0..%d)",
                         partition, p->partitions - 1);
    *flag = p->peer == MPI_PROC_NULL ||
            atomic_load_explicit((_Atomic uint64_t *)&p->flags[partition], memory_order_acquire) >=
                p->epoch;
    return MPI_SUCCESS;
}

int MPIX_Acc_Prequest_get_device(MPI_Request request, mpix_acc_dreq_t **dreq)
{
    mxi_part_t *p = mxi_persist_part(request, NULL);
    if (!p)
        return mxi_raise(MPI_COMM_SELF, MXI_E_REQUEST,
                         "MPIX_Acc_Prequest_get_device: not a partitioned request");
    if (!dreq)
        return mxi_raise(p->comm, MXI_E_ARG, "MPIX_Acc_Prequest_get_device: dreq is NULL");
    *dreq = p->dreq;
    return MPI_SUCCESS;
}

/* ----------------------------------------------------------------- free */

void mxi_part_free(mxi_part_t *p)
{
    /* device code that still holds the handle sees it freed */
    p->hd.magic = 0;
    (void)part_publish(p);
    part_release(p);
}

/* ------------------------------------------------ MPI-4 partitioned calls
 * On a stream communicator MPI_Psend_init / MPI_Precv_init make the
 * library's partitioned requests (MPI_Start: an epoch on the
 * communicator's stream; MPI_Wait: a stream wait), and MPI_Pready(_range,
 * _list) / MPI_Parrived act on them as the MPIX_Acc_ host calls do. On
 * other communicators, and on the MPI library's own partitioned requests,
 * every call is the MPI library's. (MPI libraries before MPI-4 have none of
 * them: nothing to interpose.) */
#if MPI_VERSION >= 4
static int part_on_stream_comm(MPI_Comm comm)
{
    if (!mxi_on() || comm == MPI_COMM_NULL)
        return 0;
    mxi_comm_t *c = mxi_comm_find(comm);
    return c && c->supported && c->stream;
}

int MPI_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!part_on_stream_comm(comm))
        return PMPI_Psend_init(buf, partitions, count, datatype, dest, tag, comm, info, request);
    return part_init(1, (void *)(uintptr_t)buf, partitions, count, datatype, dest, tag, comm, info,
                     request);
}

int MPI_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!part_on_stream_comm(comm))
        return PMPI_Precv_init(buf, partitions, count, datatype, source, tag, comm, info, request);
    return part_init(0, buf, partitions, count, datatype, source, tag, comm, info, request);
}

int MPI_Pready(int partition, MPI_Request request)
{
    if (!mxi_persist_part(request, NULL))
        return PMPI_Pready(partition, request);
    return MPIX_Acc_Pready_range(partition, partition, request);
}

int MPI_Pready_range(int partition_low, int partition_high, MPI_Request request)
{
    if (!mxi_persist_part(request, NULL))
        return PMPI_Pready_range(partition_low, partition_high, request);
    return MPIX_Acc_Pready_range(partition_low, partition_high, request);
}

int MPI_Pready_list(int length, int array_of_partitions[], MPI_Request request)
{
    mxi_part_t *p = mxi_persist_part(request, NULL);
    if (!p)
        return PMPI_Pready_list(length, array_of_partitions, request);
    if (length < 0 || (length > 0 && !array_of_partitions))
        return mxi_raise(p->comm, MXI_E_ARG, "MPI_Pready_list: length %d, partitions %p", length,
                         (void *)array_of_partitions);
    for (int i = 0; i < length; i++) {
        int rc = MPIX_Acc_Pready_range(array_of_partitions[i], array_of_partitions[i], request);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

int MPI_Parrived(MPI_Request request, int partition, int *flag)
{
    if (!mxi_persist_part(request, NULL))
        return PMPI_Parrived(request, partition, flag);
    return MPIX_Acc_Parrived(request, partition, flag);
}
#endif
