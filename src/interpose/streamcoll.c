/*
 * streamcoll.c - collectives ordered on a stream: MPIX_Acc_Barrier, _Bcast,
 * _Reduce, _Allreduce, _Allgather and _Alltoall (issue 20 item 4).
 *
 * Each collective is a fixed sequence of rounds built from the library's
 * own stream-ordered point-to-point operations (engine ops, no MPI
 * requests) on the communicator's collective context (its context id with
 * MXE_CTX_COLL set: collective messages never match point-to-point ones),
 * a stream wait per round, and the reductions and copies as steps on the
 * stream between the rounds. So the whole collective is enqueued at the
 * call and the call returns at once; its result exists when the stream
 * reaches that point (api.md §5). Messages match in call order, so every
 * round uses one tag: the members call collectives in the same order.
 *
 * Algorithms (the same bits on every member, and for a fixed process
 * count from run to run):
 *   Allreduce  recursive doubling; with p not a power of two, the first
 *              2(p - p') ranks fold pairwise into p' = 2^floor(log2 p)
 *              first and get the result back at the end. Both partners of
 *              a round combine (lower rank's partial) op (higher's). From
 *              MPIX_ACC_ALLREDUCE_RSAG bytes the p' core ranks reduce-
 *              scatter by recursive halving and allgather by recursive
 *              doubling instead: the same combination order, so the same
 *              bits, and 2(p'-1)/p' of the data sent instead of log2 p'
 *              times all of it.
 *   Reduce     the Allreduce on a scratch buffer, the root keeps it (so a
 *              Reduce gives the Allreduce's bits)
 *   Bcast      binomial tree from the root
 *   Barrier    dissemination, zero-byte messages, ceil(log2 p) rounds
 *   Allgather, Alltoall
 *              every pair exchanges its block in one round
 * Reductions: MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX on the basic integer
 * and floating types, computed by the library (integer sums and products
 * wrap like the MPI library's), in stream order by accel's
 * mxa_stream_reduce: a kernel on a CUDA stream whose working buffers are
 * device (or managed) memory, the host arithmetic in stream order
 * otherwise (host streams; cuLaunchHostFunc on a CUDA stream with host
 * buffers); a send buffer on the other side of the device/host divide is
 * first copied on the stream. Host streams, CUDA streams and the none
 * stream (where everything happens at the call). Datatypes: contiguous
 * ones.
 */
#include "interpose/interpose.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ reductions */

/* The element kind of a predefined type a reduction may use (MPI_ERR_TYPE
 * otherwise). */
static int sc_kind_of(MPI_Datatype dt, mxa_red_kind_t *k, size_t *esize)
{
    const MPI_Datatype sgn[] = {MPI_SIGNED_CHAR, MPI_SHORT,     MPI_INT,
                                MPI_LONG,        MPI_LONG_LONG, MPI_INT8_T,
                                MPI_INT16_T,     MPI_INT32_T,   MPI_INT64_T};
    const MPI_Datatype uns[] = {MPI_UNSIGNED_CHAR, MPI_UNSIGNED_SHORT,     MPI_UNSIGNED,
                                MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_UINT8_T,
                                MPI_UINT16_T,      MPI_UINT32_T,           MPI_UINT64_T};
    int cls = -1; /* 0 signed, 1 unsigned, 2 floating */
    for (size_t i = 0; i < sizeof(sgn) / sizeof(sgn[0]) && cls < 0; i++)
        if (dt == sgn[i])
            cls = 0;
    for (size_t i = 0; i < sizeof(uns) / sizeof(uns[0]) && cls < 0; i++)
        if (dt == uns[i])
            cls = 1;
    if (cls < 0 && (dt == MPI_FLOAT || dt == MPI_DOUBLE))
        cls = 2;
    int sz = 0;
    if (cls < 0 || PMPI_Type_size(dt, &sz) != MPI_SUCCESS)
        return 0;
    *esize = (size_t)sz;
    switch (sz) {
    case 1:
        *k = cls == 0 ? MXA_RED_I8 : MXA_RED_U8;
        return cls < 2;
    case 2:
        *k = cls == 0 ? MXA_RED_I16 : MXA_RED_U16;
        return cls < 2;
    case 4:
        *k = cls == 0 ? MXA_RED_I32 : cls == 1 ? MXA_RED_U32 : MXA_RED_F32;
        return 1;
    case 8:
        *k = cls == 0 ? MXA_RED_I64 : cls == 1 ? MXA_RED_U64 : MXA_RED_F64;
        return 1;
    default:
        return 0;
    }
}

static int sc_op_of(MPI_Op op, mxa_red_op_t *o)
{
    if (op == MPI_SUM)
        *o = MXA_RED_SUM;
    else if (op == MPI_PROD)
        *o = MXA_RED_PROD;
    else if (op == MPI_MIN)
        *o = MXA_RED_MIN;
    else if (op == MPI_MAX)
        *o = MXA_RED_MAX;
    else
        return 0;
    return 1;
}

/* ------------------------------------------------------- steps on streams */

static void sc_free_step(void *arg) { free(arg); }

/* ------------------------------------------------------ one collective */

/* A collective's messages have no request and no status: their errors are
 * logged as they complete (progress thread) and counted for MPI_Finalize's
 * report -- a member whose count or type differs truncates a message. */
static _Atomic long sc_failed;

static void sc_op_done(mxe_op_t *op)
{
    mxu_status_t err = op->result.error;
    if (err == MXU_OK)
        return;
    atomic_fetch_add_explicit(&sc_failed, 1, memory_order_relaxed);
    if (err == MXU_ERR_TRUNCATED)
        MXU_LOG(MXU_LOG_WARN,
                "stream-ordered collective: the message from rank %d was longer than this "
                "rank's buffer (truncated): the members' counts or datatypes differ",
                op->peer);
    else
        MXU_LOG(MXU_LOG_ERROR, "stream-ordered collective: %s rank %d (%zu bytes) failed: %s",
                op->type == MXE_OP_SEND ? "send to" : "receive from", op->peer, op->bytes,
                mxu_status_string(err));
}

long mxi_streamcoll_failed(void) { return atomic_load(&sc_failed); }

#define SC_TAG 0
/* A collective captured into a host graph: its messages are made when a
 * launch runs and match in the order launches execute (graph.c), the plain
 * ones' when called and in call order; their own tag keeps the two orders
 * apart on one communicator (each is the same on every member). */
#define SC_TAG_GRAPH 1

typedef struct {
    mxa_stream_t *s;
    MPI_Comm comm;
    const mxe_comm_t *ec;
    size_t eager_limit;
    mxe_op_t **ops;  /* the current round's operations ...                 */
    mxi_tmpl_t **tm; /* ... or, captured into a host graph, its templates */
    int n, cap;
    int capture;         /* the stream is a host stream being captured (graph.c) */
    int rc;              /* the first error: nothing more is enqueued */
    int enqueued;        /* something of the call is on the stream or with the engine */
    int dev;             /* CUDA stream, working buffers in device (or managed) memory */
    mxa_red_kind_t kind; /* a reduction's element kind and operation */
    mxa_red_op_t op;
    void *heap; /* heap scratch (host streams), freed in stream order */
} sc_t;

static void sc_begin(sc_t *x, mxa_stream_t *s, MPI_Comm comm, const mxi_comm_t *c)
{
    memset(x, 0, sizeof(*x));
    x->s = s;
    x->comm = comm;
    x->ec = &c->coll_ec;
    x->eager_limit = c->eager_limit;
    /* a capturing stream records the collective (graph.c): its messages
     * as templates, fired and waited for at every launch; a host stream's
     * copies and reductions as steps, a CUDA stream's as the copy and
     * kernel nodes their enqueues become */
    x->capture = mxi_graph_capturing(s);
}

/* an error while capturing: the capture is broken (graph.c has said why
 * where it failed; this says what) */
static void sc_capture_failed(sc_t *x, mxu_status_t st)
{
    x->rc = mxi_raise(x->comm, MXI_E_UNSUPPORTED,
                      "a stream-ordered collective on a stream being captured could not be "
                      "recorded (%s); the capture is broken",
                      mxu_status_string(st));
}

/* A send or receive of this round (bytes of buf with rank peer). */
static void sc_post(sc_t *x, int is_send, void *buf, size_t bytes, int peer)
{
    if (x->rc != MPI_SUCCESS)
        return;
    int rc = x->capture ? MPI_SUCCESS : mxi_throttle(x->comm, x->s, 0);
    if (rc != MPI_SUCCESS) {
        x->rc = rc;
        return;
    }
    if (x->n == x->cap) { /* the round's array: templates when capturing, else ops */
        int cap = x->cap ? 2 * x->cap : 8;
        void *p = x->capture ? realloc(x->tm, sizeof(*x->tm) * (size_t)cap)
                             : realloc(x->ops, sizeof(*x->ops) * (size_t)cap);
        if (!p) {
            x->rc = mxi_raise(x->comm, MXI_E_NO_MEM, "collective of %d ranks", x->ec->size);
            if (x->capture)
                mxi_graph_break(x->s, "out of memory recording a collective");
            return;
        }
        if (x->capture)
            x->tm = p;
        else
            x->ops = p;
        x->cap = cap;
    }
    if (x->capture) {
        mxu_status_t st = mxi_graph_coll_post(x->s, is_send, buf, bytes, x->ec, peer, SC_TAG_GRAPH,
                                              x->eager_limit, &x->tm[x->n]);
        if (st != MXU_OK) {
            sc_capture_failed(x, st);
            return;
        }
        x->n++;
        x->enqueued = 1;
        return;
    }
    mxe_op_t *op;
    mxu_status_t st =
        is_send ? mxe_op_create_send(x->s, buf, bytes, x->ec, peer, SC_TAG, x->eager_limit, &op)
                : mxe_op_create_recv(x->s, buf, bytes, x->ec, peer, SC_TAG, 0, &op);
    if (st == MXU_OK)
        op->user_complete = sc_op_done;
    if (st == MXU_OK && (st = mxe_op_submit(op)) != MXU_OK) {
        mxe_op_release(op); /* the engine's reference: it never got the op */
        mxe_op_release(op);
    }
    if (st != MXU_OK) {
        x->rc = mxi_raise_code(x->comm, mxi_status_to_mpi(st));
        return;
    }
    x->ops[x->n++] = op;
    x->enqueued = 1;
}

/* The stream waits for the round's operations. */
static void sc_wait(sc_t *x)
{
    if (x->capture) {
        mxu_status_t st =
            x->n > 0 && x->rc == MPI_SUCCESS ? mxi_graph_coll_wait(x->s, x->tm, x->n) : MXU_OK;
        if (st != MXU_OK)
            sc_capture_failed(x, st);
        x->n = 0; /* the templates are the graph's */
        return;
    }
    if (x->n > 0 && x->rc == MPI_SUCCESS) {
        int rc = mxi_throttle(x->comm, x->s, 0);
        mxu_status_t st = rc == MPI_SUCCESS ? mxe_stream_wait(x->s, x->ops, NULL, x->n) : MXU_OK;
        if (rc != MPI_SUCCESS)
            x->rc = rc;
        else if (st != MXU_OK)
            x->rc = mxi_raise_code(x->comm, mxi_status_to_mpi(st));
    }
    for (int i = 0; i < x->n; i++)
        mxe_op_release(x->ops[i]); /* ours; the engine and the wait hold theirs */
    x->n = 0;
}

/* An accel status of an enqueue: the call's error (nothing more is
 * enqueued after it), or the call has something on the stream. */
static void sc_enqueued(sc_t *x, mxu_status_t st)
{
    if (st != MXU_OK) {
        if (x->capture) /* what is recorded would replay without it */
            mxi_graph_break(x->s, "a collective's copy or reduction could not be enqueued");
        x->rc = mxi_raise_code(x->comm, mxi_status_to_mpi(st));
    } else {
        x->enqueued = 1;
    }
}

/* A copy or reduction recorded into a host graph: run at every launch,
 * its arguments the graph's. */
typedef struct {
    void *out;
    const void *a, *b; /* b NULL: a copy of `bytes` */
    size_t n, bytes;
    mxa_red_kind_t kind;
    mxa_red_op_t op;
} sc_step_t;

static void sc_step_run(void *arg)
{
    const sc_step_t *t = arg;
    if (t->b)
        mxa_reduce_host(t->kind, t->op, t->out, t->a, t->b, t->n);
    else
        memcpy(t->out, t->a, t->bytes);
}

static void sc_capture_step(sc_t *x, const sc_step_t *v)
{
    sc_step_t *t = malloc(sizeof(*t));
    mxu_status_t st = MXU_ERR_NO_MEMORY;
    if (t) {
        *t = *v;
        st = mxi_graph_step(x->s, sc_step_run, t);
    } else {
        mxi_graph_break(x->s, "out of memory recording a collective");
    }
    if (st != MXU_OK)
        sc_capture_failed(x, st);
    else
        x->enqueued = 1;
}

static void sc_copy(sc_t *x, void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0 || x->rc != MPI_SUCCESS)
        return;
    if (x->capture && x->s->kind == MXA_KIND_HOST)
        sc_capture_step(x, &(sc_step_t){.out = dst, .a = src, .bytes = bytes});
    else
        sc_enqueued(x, mxa_stream_copy(x->s, dst, src, bytes));
}

/* out = a op b over n elements, in stream order */
static void sc_reduce(sc_t *x, void *out, const void *a, const void *b, size_t n)
{
    if (n == 0 || x->rc != MPI_SUCCESS)
        return;
    if (x->capture && x->s->kind == MXA_KIND_HOST)
        sc_capture_step(
            x, &(sc_step_t){.out = out, .a = a, .b = b, .n = n, .kind = x->kind, .op = x->op});
    else
        sc_enqueued(x, mxa_stream_reduce(x->s, x->kind, x->op, out, a, b, n));
}

/*
 * The call's scratch: heap memory for host streams, freed by a last step
 * on the stream (sc_end); on a CUDA stream the stream's own scratch
 * (mxa_stream_scratch: device memory when the call's working buffers are
 * device or managed memory, pinned host memory otherwise), kept for the
 * stream's later calls -- every use of it is ordered by the stream. A
 * capture uses the capture stream's scratch too, which must exist before
 * the capture (allocating inside it is refused): a graph with collectives
 * runs ordered with the stream's collectives (launched on that stream).
 */
static void *sc_scratch(sc_t *x, size_t bytes)
{
    if (x->s->kind == MXA_KIND_CUDA) {
        void *p = mxa_stream_scratch(x->s, x->dev ? MXA_MEM_DEVICE : MXA_MEM_HOST, bytes);
        if (!p && x->capture) {
            mxi_graph_break(x->s, "a collective's scratch does not exist before the capture");
            x->rc = mxi_raise(x->comm, MXI_E_UNSUPPORTED,
                              "a stream-ordered collective on a stream being captured needs %zu "
                              "bytes of the stream's scratch, which must exist before the capture "
                              "(make the same call on the stream once before capturing); the "
                              "capture is broken",
                              bytes);
        } else if (!p) {
            x->rc = mxi_raise(x->comm, MXI_E_NO_MEM,
                              "%zu bytes of stream scratch for a stream-ordered collective", bytes);
        }
        return p;
    }
    x->heap = malloc(bytes ? bytes : 1);
    if (!x->heap)
        x->rc = mxi_raise(x->comm, MXI_E_NO_MEM, "%zu bytes of scratch for a collective", bytes);
    return x->heap;
}

/* Does memory at p belong with the call's working memory (the same side
 * of the device/host divide on a CUDA stream; always on host streams)? */
static int sc_same_side(const sc_t *x, const void *p, size_t bytes)
{
    if (x->s->kind != MXA_KIND_CUDA || bytes == 0)
        return 1;
    return (mxa_memtype(p, bytes) != MXA_MEM_HOST) == x->dev;
}

/* Heap scratch is freed by a last step on the stream; after an error too,
 * since what was enqueued may still use it (if even that step cannot be
 * enqueued, it is left allocated, and logged). */
static int sc_end(sc_t *x)
{
    if (x->capture && x->heap) { /* the graph's steps use it at every launch */
        if (mxi_graph_keep(x->s, x->heap) != MXU_OK && x->rc == MPI_SUCCESS)
            sc_capture_failed(x, MXU_ERR_NO_MEMORY);
    } else if (x->heap) {
        if (!x->enqueued)
            free(x->heap);
        else if (mxa_stream_host_call(x->s, sc_free_step, x->heap) != MXU_OK)
            MXU_LOG(MXU_LOG_WARN, "a stream-ordered collective's scratch could not be freed in "
                                  "stream order; it is left allocated");
    }
    free(x->ops);
    free(x->tm);
    return x->rc;
}

/* The rank of new rank nr in the power-of-two core of an Allreduce (the
 * first 2 rem ranks folded pairwise onto their even members). */
static int sc_core_rank(int nr, int rem) { return nr < rem ? nr * 2 : nr + rem; }

/*
 * Reduce-scatter by recursive halving, then allgather by recursive
 * doubling, among the pof2 core ranks (new rank nr): the data is split
 * into pof2 blocks; in round `mask` (1, 2, 4, ...) a rank keeps the half
 * of its current range given by its bit `mask` and sends the other half
 * to nr ^ mask, which sends it this half; the lower rank's partial is the
 * left operand. So every element is combined in recursive doubling's
 * order (the same bits); each rank sends 2 (pof2 - 1) / pof2 of the data
 * instead of log2(pof2) times all of it. cur: this rank's partial (the
 * send buffer, or work); the result ends in work.
 */
static void sc_allreduce_rsag(sc_t *x, const void *cur, unsigned char *work, unsigned char *tmp,
                              size_t n, size_t esize, int nr, int pof2, int rem)
{
    size_t lo = 0, hi = (size_t)pof2; /* the current range, in blocks */
    size_t los[32], his[32];
    int depth = 0;
#define SC_BLK(j) ((size_t)(j)*n / (size_t)pof2 * esize) /* byte offset of block j */
    for (int mask = 1; mask < pof2; mask <<= 1, depth++) {
        int nd = nr ^ mask, dst = sc_core_rank(nd, rem);
        size_t mid = (lo + hi) / 2;
        size_t klo = (nr & mask) ? mid : lo, khi = (nr & mask) ? hi : mid;
        size_t glo = (nr & mask) ? lo : mid, ghi = (nr & mask) ? mid : hi;
        sc_post(x, 1, (unsigned char *)(uintptr_t)cur + SC_BLK(glo), SC_BLK(ghi) - SC_BLK(glo),
                dst);
        sc_post(x, 0, tmp + SC_BLK(klo), SC_BLK(khi) - SC_BLK(klo), dst);
        sc_wait(x);
        const unsigned char *mine = (const unsigned char *)cur + SC_BLK(klo);
        const unsigned char *theirs = tmp + SC_BLK(klo);
        sc_reduce(x, work + SC_BLK(klo), nd < nr ? theirs : mine, nd < nr ? mine : theirs,
                  (SC_BLK(khi) - SC_BLK(klo)) / esize);
        los[depth] = lo;
        his[depth] = hi;
        lo = klo;
        hi = khi;
        cur = work;
    }
    while (depth-- > 0) {
        int dst = sc_core_rank(nr ^ (1 << depth), rem);
        size_t olo = lo == los[depth] ? hi : los[depth], ohi = lo == los[depth] ? his[depth] : lo;
        sc_post(x, 1, work + SC_BLK(lo), SC_BLK(hi) - SC_BLK(lo), dst);
        sc_post(x, 0, work + SC_BLK(olo), SC_BLK(ohi) - SC_BLK(olo), dst);
        sc_wait(x);
        lo = los[depth];
        hi = his[depth];
    }
#undef SC_BLK
}

/*
 * Allreduce of n elements: src is this rank's contribution (the send
 * buffer, or work itself), the result ends in work; tmp (n elements) is
 * the receive buffer. Recursive doubling, or (at least
 * MPIX_ACC_ALLREDUCE_RSAG bytes, n >= pof2) reduce-scatter + allgather,
 * which give the same bits.
 */
static void sc_allreduce_rounds(sc_t *x, const void *src, void *work, void *tmp, size_t n,
                                size_t esize)
{
    int p = x->ec->size, r = x->ec->rank;
    size_t bytes = n * esize;
    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    int rem = p - pof2, newrank;
    const void *cur = src;
    if (r < 2 * rem) {
        if (r % 2) { /* gives its data to r - 1, gets the result at the end */
            sc_post(x, 1, (void *)(uintptr_t)cur, bytes, r - 1);
            sc_wait(x);
            newrank = -1;
        } else {
            sc_post(x, 0, tmp, bytes, r + 1);
            sc_wait(x);
            sc_reduce(x, work, cur, tmp, n);
            cur = work;
            newrank = r / 2;
        }
    } else {
        newrank = r - rem;
    }
    if (newrank >= 0 && pof2 > 1 && bytes >= mxu_config.allreduce_rsag && n >= (size_t)pof2) {
        sc_allreduce_rsag(x, cur, work, tmp, n, esize, newrank, pof2, rem);
        cur = work;
    } else if (newrank >= 0) {
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int newdst = newrank ^ mask;
            int dst = sc_core_rank(newdst, rem);
            sc_post(x, 1, (void *)(uintptr_t)cur, bytes, dst);
            sc_post(x, 0, tmp, bytes, dst);
            sc_wait(x);
            sc_reduce(x, work, newdst < newrank ? tmp : cur, newdst < newrank ? cur : tmp, n);
            cur = work;
        }
    }
    if (r < 2 * rem) {
        sc_post(x, r % 2 ? 0 : 1, work, bytes, r % 2 ? r - 1 : r + 1);
        sc_wait(x);
    } else if (cur != work) {
        sc_copy(x, work, cur, bytes); /* one process */
    }
}

/* --------------------------------------------------------- argument checks */

/* The stream and the communicator of a collective on stream; *c, *s. */
static int sc_args(MPIX_Acc_stream stream, MPI_Comm comm, const char *call, mxi_comm_t **c,
                   mxa_stream_t **s)
{
    if (comm == MPI_COMM_NULL)
        return mxi_raise(MPI_COMM_NULL, MXI_E_COMM, "%s: communicator is MPI_COMM_NULL", call);
    int rc = mxi_stream_resolve(stream, comm, s);
    if (rc != MPI_SUCCESS)
        return rc;
    *c = mxi_comm_find(comm);
    if (!*c)
        return mxi_raise(MPI_COMM_NULL, MXI_E_COMM,
                         "%s: communicator not known to the library (freed?)", call);
    if (!(*c)->supported)
        return mxi_raise(comm, MXI_E_COMM_UNSUPPORTED, "%s", call);
    return MPI_SUCCESS;
}

/* Bytes of count elements of the contiguous dt (MPI_ERR_COUNT, _TYPE). */
static int sc_bytes(MPI_Comm comm, const char *call, const char *what, int count, MPI_Datatype dt,
                    size_t *bytes)
{
    if (count < 0)
        return mxi_raise(comm, MXI_E_COUNT, "%s: %s count %d (must be >= 0)", call, what, count);
    int contiguous = 0;
    int rc = mxi_datatype_bytes(dt, count, bytes, &contiguous);
    if (rc != MPI_SUCCESS)
        return mxi_raise_code(comm, rc);
    if (!contiguous)
        return mxi_raise(comm, MXI_E_TYPE,
                         "%s: %s datatype is not contiguous (collectives take contiguous "
                         "datatypes so far)",
                         call, what);
    return MPI_SUCCESS;
}

static int sc_buffer(MPI_Comm comm, const char *call, const char *what, const void *buf,
                     size_t bytes)
{
    if (buf == MPI_IN_PLACE)
        return mxi_raise(comm, MXI_E_BUFFER, "%s: %s buffer is MPI_IN_PLACE (not allowed there)",
                         call, what);
    if (!buf && bytes > 0)
        return mxi_raise(comm, MXI_E_BUFFER, "%s: %s buffer is NULL with %zu bytes to move", call,
                         what, bytes);
    return MPI_SUCCESS;
}

static int sc_root(MPI_Comm comm, const char *call, int root, int size)
{
    if (root < 0 || root >= size)
        return mxi_raise(comm, MXI_E_ROOT, "%s: root %d (valid: 0..%d)", call, root, size - 1);
    return MPI_SUCCESS;
}

/* A reduction's type and operation (MPI_ERR_TYPE, MPI_ERR_OP). */
static int sc_reduction(MPI_Comm comm, const char *call, MPI_Datatype dt, MPI_Op op,
                        mxa_red_kind_t *k, mxa_red_op_t *o, size_t *esize)
{
    if (!sc_kind_of(dt, k, esize))
        return mxi_raise(comm, MXI_E_TYPE,
                         "%s: stream-ordered reductions take the basic integer and floating "
                         "types (MPI_INT, MPI_DOUBLE, MPI_INT64_T, ...)",
                         call);
    if (!sc_op_of(op, o))
        return mxi_raise(comm, MXI_E_OP,
                         "%s: stream-ordered reductions take MPI_SUM, MPI_PROD, MPI_MIN and "
                         "MPI_MAX",
                         call);
    return MPI_SUCCESS;
}

#define SC_TRY(expr)                                                                               \
    do {                                                                                           \
        int sc_rc_ = (expr);                                                                       \
        if (sc_rc_ != MPI_SUCCESS)                                                                 \
            return sc_rc_;                                                                         \
    } while (0)

/* ----------------------------------------------------------------- calls */

int MPIX_Acc_Barrier(MPIX_Acc_stream stream, MPI_Comm comm)
{
    mxi_comm_t *c;
    mxa_stream_t *s;
    SC_TRY(sc_args(stream, comm, "MPIX_Acc_Barrier", &c, &s));
    sc_t x;
    sc_begin(&x, s, comm, c);
    int p = c->coll_ec.size, r = c->coll_ec.rank;
    for (int k = 1; k < p && x.rc == MPI_SUCCESS; k <<= 1) {
        sc_post(&x, 1, NULL, 0, (r + k) % p);
        sc_post(&x, 0, NULL, 0, (r - k + p) % p);
        sc_wait(&x);
    }
    return sc_end(&x);
}

int MPIX_Acc_Bcast(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int root,
                   MPI_Comm comm)
{
    const char *call = "MPIX_Acc_Bcast";
    mxi_comm_t *c;
    mxa_stream_t *s;
    size_t bytes;
    SC_TRY(sc_args(stream, comm, call, &c, &s));
    SC_TRY(sc_root(comm, call, root, c->coll_ec.size));
    SC_TRY(sc_bytes(comm, call, "the", count, datatype, &bytes));
    SC_TRY(sc_buffer(comm, call, "the", buf, bytes));
    sc_t x;
    sc_begin(&x, s, comm, c);
    int p = c->coll_ec.size, vr = (c->coll_ec.rank - root + p) % p, mask = 1;
    while (mask < p) {
        if (vr & mask) {
            sc_post(&x, 0, buf, bytes, (vr - mask + root) % p);
            sc_wait(&x);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < p)
            sc_post(&x, 1, buf, bytes, (vr + mask + root) % p);
    sc_wait(&x);
    return sc_end(&x);
}

/* Allreduce and Reduce: root < 0 for Allreduce. */
static int sc_allreduce_call(const char *call, MPIX_Acc_stream stream, const void *sendbuf,
                             void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                             MPI_Comm comm)
{
    mxi_comm_t *c;
    mxa_stream_t *s;
    size_t bytes, esize = 0;
    mxa_red_kind_t k = MXA_RED_U8;
    mxa_red_op_t o = MXA_RED_SUM;
    SC_TRY(sc_args(stream, comm, call, &c, &s));
    if (root >= 0)
        SC_TRY(sc_root(comm, call, root, c->coll_ec.size));
    SC_TRY(sc_bytes(comm, call, "the", count, datatype, &bytes));
    SC_TRY(sc_reduction(comm, call, datatype, op, &k, &o, &esize));
    int keeps = root < 0 || root == c->coll_ec.rank; /* recvbuf significant */
    if (sendbuf == MPI_IN_PLACE && !keeps)
        return mxi_raise(comm, MXI_E_BUFFER,
                         "%s: MPI_IN_PLACE as the send buffer is for the root only", call);
    if (sendbuf != MPI_IN_PLACE)
        SC_TRY(sc_buffer(comm, call, "send", sendbuf, bytes));
    if (keeps)
        SC_TRY(sc_buffer(comm, call, "receive", recvbuf, bytes));
    /* small messages between the GPUs of a node: one kernel (coll_ll.c) */
    int llrc;
    if (mxi_coll_ll_allreduce(c, comm, s, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
                              keeps ? recvbuf : NULL, (size_t)count, esize, k, o, &llrc))
        return llrc; /* (it also set up the rounds' scratch, for a later capture) */
    sc_t x;
    sc_begin(&x, s, comm, c);
    x.kind = k;
    x.op = o;
    /* the working buffer: the result's place, or scratch off the root; on
     * a CUDA stream device memory when that (or, off the root, the send
     * buffer) is, else host memory */
    const void *side = keeps ? recvbuf : sendbuf;
    x.dev = s->kind == MXA_KIND_CUDA && bytes > 0 && mxa_memtype(side, bytes) != MXA_MEM_HOST;
    unsigned char *scratch = sc_scratch(&x, keeps ? bytes : 2 * bytes);
    if (!scratch)
        return sc_end(&x);
    void *work = keeps ? recvbuf : scratch + bytes;
    /* this rank's contribution: the send buffer itself where the working
     * memory's side reaches it, else a copy in the working buffer */
    const void *src = work;
    if (sendbuf != MPI_IN_PLACE) {
        if (sc_same_side(&x, sendbuf, bytes))
            src = sendbuf;
        else
            sc_copy(&x, work, sendbuf, bytes);
    }
    sc_allreduce_rounds(&x, src, work, scratch, (size_t)count, esize);
    return sc_end(&x);
}

int MPIX_Acc_Allreduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return sc_allreduce_call("MPIX_Acc_Allreduce", stream, sendbuf, recvbuf, count, datatype, op,
                             -1, comm);
}

int MPIX_Acc_Reduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)
{
    if (root < 0) /* checked against the size there; -1 would mean Allreduce */
        return mxi_raise(comm, MXI_E_ROOT, "MPIX_Acc_Reduce: root %d", root);
    return sc_allreduce_call("MPIX_Acc_Reduce", stream, sendbuf, recvbuf, count, datatype, op, root,
                             comm);
}

/* Allgather (all = 0) and Alltoall (all = 1): every pair exchanges a block. */
static int sc_exchange_call(const char *call, int all, MPIX_Acc_stream stream, const void *sendbuf,
                            int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm)
{
    mxi_comm_t *c;
    mxa_stream_t *s;
    size_t sbytes = 0, rbytes;
    SC_TRY(sc_args(stream, comm, call, &c, &s));
    int p = c->coll_ec.size, r = c->coll_ec.rank;
    SC_TRY(sc_bytes(comm, call, "receive", recvcount, recvtype, &rbytes));
    if (sendbuf != MPI_IN_PLACE) {
        SC_TRY(sc_bytes(comm, call, "send", sendcount, sendtype, &sbytes));
        if (sbytes != rbytes)
            return mxi_raise(comm, MXI_E_COUNT,
                             "%s: a send block of %zu bytes and a receive block of %zu bytes (they "
                             "must be the same)",
                             call, sbytes, rbytes);
        SC_TRY(sc_buffer(comm, call, "send", sendbuf, all ? rbytes * (size_t)p : rbytes));
    }
    SC_TRY(sc_buffer(comm, call, "receive", recvbuf, rbytes * (size_t)p));
    unsigned char *rb = recvbuf;
    const unsigned char *sb = sendbuf;
    void *scratch = NULL;
    sc_t x;
    sc_begin(&x, s, comm, c);
    if (all && sendbuf == MPI_IN_PLACE) {
        /* send from a copy of the receive buffer, made on the stream */
        size_t total = rbytes * (size_t)p;
        x.dev = s->kind == MXA_KIND_CUDA && total > 0 && mxa_memtype(rb, total) != MXA_MEM_HOST;
        scratch = sc_scratch(&x, total);
        if (!scratch)
            return sc_end(&x);
        sb = scratch;
    }
    if (scratch)
        sc_copy(&x, scratch, rb, rbytes * (size_t)p);
    else if (sendbuf != MPI_IN_PLACE)
        sc_copy(&x, rb + rbytes * (size_t)r, all ? sb + rbytes * (size_t)r : sb, rbytes);
    for (int q = 0; q < p; q++) {
        if (q == r)
            continue;
        const unsigned char *own = sendbuf == MPI_IN_PLACE && !all ? rb + rbytes * (size_t)r
                                   : all                           ? sb + rbytes * (size_t)q
                                                                   : sb;
        sc_post(&x, 0, rb + rbytes * (size_t)q, rbytes, q);
        sc_post(&x, 1, (void *)(uintptr_t)own, rbytes, q);
    }
    sc_wait(&x);
    return sc_end(&x);
}

int MPIX_Acc_Allgather(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       MPI_Comm comm)
{
    return sc_exchange_call("MPIX_Acc_Allgather", 0, stream, sendbuf, sendcount, sendtype, recvbuf,
                            recvcount, recvtype, comm);
}

int MPIX_Acc_Alltoall(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                      MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      MPI_Comm comm)
{
    return sc_exchange_call("MPIX_Acc_Alltoall", 1, stream, sendbuf, sendcount, sendtype, recvbuf,
                            recvcount, recvtype, comm);
}

/* --------------------------------------------------- nonblocking forms
 * The collective is enqueued as by the blocking form; its request is a
 * local engine op behind it on the same stream, complete when the stream
 * passed the collective: MPIX_Acc_Wait on a stream orders later work after
 * it, MPI_Wait/MPI_Test see it from the host (for a stream communicator's
 * request MPI_Wait is a stream wait, as for its point-to-point requests). */
static int sc_request(MPIX_Acc_stream stream, MPI_Comm comm, mxi_origin_t origin, int rc,
                      MPI_Request *request)
{
    if (rc != MPI_SUCCESS)
        return rc;
    mxa_stream_t *s;
    rc = mxi_stream_resolve(stream, comm, &s);
    if (rc != MPI_SUCCESS)
        return rc;
    /* captured: the collective was recorded just now, complete where the
     * capture stream passes it -- its request a placeholder that a stream
     * wait captured on that stream takes */
    if (mxi_graph_capturing(s))
        return mxi_graph_ordered_request(s, origin, comm, request);
    mxe_op_t *op = NULL;
    if (mxe_op_create_local(s, MXE_OP_RECV, 0, &op) != MXU_OK)
        return mxi_raise(comm, MXI_E_NO_MEM, "the request of a nonblocking collective");
    op->result.source = MXE_PROC_NULL;
    op->result.tag = MXE_ANY_TAG;
    return mxi_submit(op, origin, comm, request);
}

#define SC_NEED_REQUEST(comm, call, request)                                                       \
    do {                                                                                           \
        if (!(request))                                                                            \
            return mxi_raise((comm), MXI_E_REQUEST, "%s: request argument is NULL", (call));       \
    } while (0)

int MPIX_Acc_Ibarrier(MPIX_Acc_stream stream, MPI_Comm comm, MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Ibarrier", request);
    return sc_request(stream, comm, MXI_ORIGIN_EXPLICIT, MPIX_Acc_Barrier(stream, comm), request);
}

int MPIX_Acc_Ibcast(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int root,
                    MPI_Comm comm, MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Ibcast", request);
    return sc_request(stream, comm, MXI_ORIGIN_EXPLICIT,
                      MPIX_Acc_Bcast(stream, buf, count, datatype, root, comm), request);
}

int MPIX_Acc_Ireduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
                     MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Ireduce", request);
    return sc_request(stream, comm, MXI_ORIGIN_EXPLICIT,
                      MPIX_Acc_Reduce(stream, sendbuf, recvbuf, count, datatype, op, root, comm),
                      request);
}

int MPIX_Acc_Iallreduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Iallreduce", request);
    return sc_request(stream, comm, MXI_ORIGIN_EXPLICIT,
                      MPIX_Acc_Allreduce(stream, sendbuf, recvbuf, count, datatype, op, comm),
                      request);
}

int MPIX_Acc_Iallgather(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Iallgather", request);
    return sc_request(stream, comm, MXI_ORIGIN_EXPLICIT,
                      MPIX_Acc_Allgather(stream, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                         recvtype, comm),
                      request);
}

int MPIX_Acc_Ialltoall(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Request *request)
{
    SC_NEED_REQUEST(comm, "MPIX_Acc_Ialltoall", request);
    return sc_request(
        stream, comm, MXI_ORIGIN_EXPLICIT,
        MPIX_Acc_Alltoall(stream, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
        request);
}

/* ------------------------------------------ MPI_* on stream communicators */

/*
 * MPI's collectives on a stream communicator are the calls above on its
 * stream (host or CUDA): enqueued, returning at once, their results there
 * when the stream reaches them (api.md §5). What the stream-ordered code
 * does not take (other operations or types, non-contiguous types,
 * arguments it would refuse) runs as the MPI library's call after the
 * stream drained: it reads what the stream wrote, its results exist at
 * return (so before the stream's later work), and its errors are the MPI
 * library's.
 */
static mxa_stream_t *sc_stream_of(MPI_Comm comm)
{
    if (!mxi_on() || atomic_load_explicit(&mxi.stream_comms, memory_order_relaxed) <= 0)
        return NULL;
    mxi_comm_t *c = mxi_comm_find(comm);
    if (!c || !c->stream || !c->supported ||
        (c->stream->kind != MXA_KIND_HOST && c->stream->kind != MXA_KIND_CUDA))
        return NULL;
    return c->stream;
}

/* The MPI library's call, after stream s drained (NULL: no stream). It
 * cannot be recorded into a graph: on a stream being captured the capture
 * is broken and the call fails (it would run now, not at the launches). */
#define SC_HOST(s, comm, call)                                                                     \
    do {                                                                                           \
        if (s) {                                                                                   \
            mxu_status_t st_ = mxa_stream_refuse_capture(                                          \
                (s), "a collective the stream-ordered code does not take (the MPI library's)");    \
            if (st_ != MXU_OK)                                                                     \
                return mxi_raise_code((comm), mxi_status_to_mpi(st_));                             \
            (void)mxa_stream_synchronize(s);                                                       \
        }                                                                                          \
        return (call);                                                                             \
    } while (0)

/* count elements of dt at buf: movable by the stream-ordered code */
static int sc_can_move(const void *buf, int count, MPI_Datatype dt)
{
    if (count < 0 || mxi_datatype_contiguous(dt) != 1)
        return 0;
    int sz = 0;
    PMPI_Type_size(dt, &sz);
    return buf != MPI_IN_PLACE && (buf != NULL || count == 0 || sz == 0);
}

static int sc_can_reduce(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                         MPI_Op op, int keeps)
{
    mxa_red_kind_t k;
    mxa_red_op_t o;
    size_t esize;
    if (!sc_kind_of(dt, &k, &esize) || !sc_op_of(op, &o) || count < 0)
        return 0;
    if (sendbuf == MPI_IN_PLACE ? !keeps : !sc_can_move(sendbuf, count, dt))
        return 0;
    return !keeps || sc_can_move(recvbuf, count, dt);
}

static int sc_root_ok(MPI_Comm comm, int root)
{
    int size = 0;
    PMPI_Comm_size(comm, &size);
    return root >= 0 && root < size;
}

int MPI_Barrier(MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    return h ? MPIX_Acc_Barrier(h->handle, comm) : PMPI_Barrier(comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && sc_root_ok(comm, root) && sc_can_move(buf, count, datatype))
        return MPIX_Acc_Bcast(h->handle, buf, count, datatype, root, comm);
    SC_HOST(h, comm, PMPI_Bcast(buf, count, datatype, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && sc_can_reduce(sendbuf, recvbuf, count, datatype, op, 1))
        return MPIX_Acc_Allreduce(h->handle, sendbuf, recvbuf, count, datatype, op, comm);
    SC_HOST(h, comm, PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    int rank = -1;
    if (h)
        PMPI_Comm_rank(comm, &rank);
    if (h && sc_root_ok(comm, root) &&
        sc_can_reduce(sendbuf, recvbuf, count, datatype, op, rank == root))
        return MPIX_Acc_Reduce(h->handle, sendbuf, recvbuf, count, datatype, op, root, comm);
    SC_HOST(h, comm, PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm));
}

/* Allgather/Alltoall: blocks of the same size, movable buffers */
static int sc_can_exchange(MPI_Comm comm, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           const void *recvbuf, int recvcount, MPI_Datatype recvtype)
{
    int size = 0, ssz = 0, rsz = 0;
    PMPI_Comm_size(comm, &size);
    if (recvcount < 0 || recvcount > INT_MAX / (size > 0 ? size : 1) ||
        !sc_can_move(recvbuf, recvcount * size, recvtype))
        return 0;
    if (sendbuf == MPI_IN_PLACE)
        return 1;
    if (!sc_can_move(sendbuf, sendcount, sendtype))
        return 0;
    PMPI_Type_size(sendtype, &ssz);
    PMPI_Type_size(recvtype, &rsz);
    return (long long)ssz * sendcount == (long long)rsz * recvcount;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && sc_can_exchange(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))
        return MPIX_Acc_Allgather(h->handle, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                  recvtype, comm);
    SC_HOST(h, comm,
            PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && sc_can_exchange(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))
        return MPIX_Acc_Alltoall(h->handle, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                 recvtype, comm);
    SC_HOST(h, comm,
            PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

/* The nonblocking collectives on a stream communicator of a host stream:
 * the forms above with the communicator's stream (their requests are
 * stream requests: MPI_Wait is a stream wait); what they do not take: the
 * MPI library's call after the stream drained. */
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && request)
        return sc_request(h->handle, comm, MXI_ORIGIN_STREAMCOMM, MPIX_Acc_Barrier(h->handle, comm),
                          request);
    SC_HOST(h, comm, PMPI_Ibarrier(comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && request && sc_root_ok(comm, root) && sc_can_move(buf, count, datatype))
        return sc_request(h->handle, comm, MXI_ORIGIN_STREAMCOMM,
                          MPIX_Acc_Bcast(h->handle, buf, count, datatype, root, comm), request);
    SC_HOST(h, comm, PMPI_Ibcast(buf, count, datatype, root, comm, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && request && sc_can_reduce(sendbuf, recvbuf, count, datatype, op, 1))
        return sc_request(
            h->handle, comm, MXI_ORIGIN_STREAMCOMM,
            MPIX_Acc_Allreduce(h->handle, sendbuf, recvbuf, count, datatype, op, comm), request);
    SC_HOST(h, comm, PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && request && sc_root_ok(comm, root)) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (sc_can_reduce(sendbuf, recvbuf, count, datatype, op, rank == root))
            return sc_request(
                h->handle, comm, MXI_ORIGIN_STREAMCOMM,
                MPIX_Acc_Reduce(h->handle, sendbuf, recvbuf, count, datatype, op, root, comm),
                request);
    }
    SC_HOST(h, comm, PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request));
}

/* MPI_Iallgather (all = 0) and MPI_Ialltoall (all = 1) */
static int sc_iexchange(int all, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Request *request)
{
    mxa_stream_t *h = sc_stream_of(comm);
    if (h && request &&
        sc_can_exchange(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))
        return sc_request(h->handle, comm, MXI_ORIGIN_STREAMCOMM,
                          sc_exchange_call(all ? "MPI_Ialltoall" : "MPI_Iallgather", all, h->handle,
                                           sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                           recvtype, comm),
                          request);
    SC_HOST(h, comm,
            all ? PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                 request)
                : PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                  request));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return sc_iexchange(0, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                        request);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return sc_iexchange(1, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                        request);
}
