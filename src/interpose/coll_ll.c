/*
 * coll_ll.c - the one-kernel Allreduce: small stream-ordered Allreduces
 * and Reduces on a CUDA stream between processes of one node whose GPUs
 * reach each other (streamcoll.c takes it first).
 *
 * The round-based path (streamcoll.c) costs a send step, a receive step
 * and a reduction kernel per round, each launched by the host, and a trip
 * through the progress thread for every message the ring does not carry:
 * 17 us for 8 bytes between two H100s against NCCL's 6.7 (same run,
 * doc/benchmarks.md). Here the whole Allreduce is one kernel: each round
 * writes this process's partial as LL lines straight into the partner's
 * GPU memory and spins on the partner's lines in its own (llred_proto.h),
 * in streamcoll.c's combination order, so the result has the same bits as
 * the round-based path. No host thread and no UCX call between the GPUs.
 *
 * Set-up, once per communicator, at the first call that may use it (a
 * collective call, so every member is there): each process makes its
 * receive area (device memory exported as a POSIX fd, handed out by its
 * progress thread: accel/sx.c's named fds), the members exchange their
 * device and socket names (PMPI_Allgather), each maps every peer's area
 * (bounded wait) and they agree (PMPI_Allreduce, before and after) -- every member decides
 * alike, so a failure anywhere leaves the communicator on the round-based
 * path everywhere. Areas stay mapped to the end of the process (freeing
 * device memory waits for the device; rings and slots alike).
 *
 * Which calls: MPIX_ACC_COLL_LL_BYTES (16 KiB at most, the kernel's shared
 * buffer) and below; decided from the message size alone, which every
 * member has alike. Not where two members share a GPU (a spinning kernel
 * would wait for a time slice of the other process's). Buffers that are not device memory are staged through
 * the stream's device scratch. The members of a collective must use the
 * same kind of stream (all CUDA); a member on a host stream would never
 * join the set-up.
 */
#include "interpose/interpose.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel/sx.h"
#include "util/waiter.h"

/* what a member tells the others at set-up */
typedef struct {
    int ok;
    char busid[32];
    char sock[64];
    char name[48];
    uint64_t bytes;
} ll_desc_t;

struct mxi_coll_ll {
    int state;  /* 1: ready; -1: not available (the round-based path) */
    void *ctx;  /* the CUDA context it was made in */
    void *area; /* my receive area */
    size_t area_bytes;
    char name[48];  /* exported under this name ("" once unexported) */
    void **peer;    /* each member's area mapped here (NULL: me) */
    size_t lines;   /* LL lines per (sender, parity) region */
    uint64_t *err;  /* host-visible: the kernels' time-out word */
    uint64_t epoch; /* calls made on the path */
    int reported;   /* the error word's time-out was raised */
};

/* region of sender q, parity par, in an area of `lines` lines per region */
static uint64_t ll_region(const void *area, int q, int par, size_t lines)
{
    return (uint64_t)(uintptr_t)area + ((uint64_t)q * 2 + (uint64_t)par) * lines * 8;
}

/* a communicator whose set-up could not even record itself (no memory):
 * off for good -- a second set-up would be a collective only it calls */
static struct mxi_coll_ll ll_off = {.state = -1};

void mxi_coll_ll_free(struct mxi_coll_ll *ll)
{
    if (!ll || ll == &ll_off)
        return;
    if (ll->name[0])
        mxa_sx_unexport_fd(ll->name);
    /* the area and the peers' mappings stay (a kernel may still run) */
    free(ll->peer);
    free(ll);
}

/* Every member's area mapped here, or an error. */
static int ll_map_peers(struct mxi_coll_ll *ll, const ll_desc_t *d, int p, int me)
{
    for (int q = 0; q < p; q++) {
        if (q == me)
            continue;
        if (!mxa_part_reaches(ll->ctx, d[q].busid)) {
            MXU_LOG(MXU_LOG_INFO,
                    "one-kernel Allreduce: the GPU of member %d (%s) is not "
                    "reachable from this one",
                    q, d[q].busid);
            return 0;
        }
        int sock = mxa_sx_fd_ask(d[q].sock, d[q].name), fd = -1, r = 0;
        uint64_t bytes = 0;
        uint64_t until = mxu_now_ns() + 30ull * 1000000000ull;
        if (sock >= 0) {
            struct timespec ts = {0, 20000};
            while ((r = mxa_sx_fd_answer(sock, &fd, &bytes)) == 0 && mxu_now_ns() < until)
                nanosleep(&ts, NULL);
            if (r == 0)
                close(sock);
        }
        if (r != 1) {
            MXU_LOG(MXU_LOG_WARN, "one-kernel Allreduce: member %d did not hand out its area", q);
            return 0;
        }
        mxu_status_t st = mxa_part_slots_import(ll->ctx, fd, (size_t)bytes, &ll->peer[q]);
        close(fd);
        if (st != MXU_OK)
            return 0;
    }
    return 1;
}

/* The collective set-up; c->coll_ll afterwards (state 1 or -1). */
static void ll_setup(mxi_comm_t *c, MPI_Comm comm, mxa_stream_t *s)
{
    struct mxi_coll_ll *ll = calloc(1, sizeof(*ll));
    int p = c->ec.size, me = c->ec.rank;
    ll_desc_t mine = {0};
    ll_desc_t *all = calloc((size_t)p, sizeof(*all));
    if (ll) {
        ll->state = -1;
        ll->ctx = mxa_stream_device_ctx(s);
        ll->lines = MXA_LLRED_MAX_BYTES / 4;
        ll->peer = calloc((size_t)p, sizeof(void *));
        ll->err = mxa_part_host_alloc(64);
    }
    mine.ok = ll && all && ll->ctx && ll->peer && ll->err;
    for (int q = 0; q < p && mine.ok; q++) /* (mxe_world_on_node says 0 for this process) */
        mine.ok = q == me || mxe_world_on_node(c->ec.world_ranks ? c->ec.world_ranks[q] : q);
    if (mine.ok) {
        mxa_part_busid(ll->ctx, mine.busid, sizeof(mine.busid));
        size_t bytes = (size_t)p * 2 * ll->lines * 8;
        int fd = -1;
        mine.ok = mine.busid[0] && mxa_part_slots_alloc(ll->ctx, &bytes, &ll->area, &fd) == MXU_OK;
        if (mine.ok) {
            ll->area_bytes = bytes;
            snprintf(ll->name, sizeof(ll->name), "mxcoll-%u", (unsigned)c->ec.ctx_id);
            if (mxa_sx_export_fd(ll->name, fd, bytes, mine.sock, sizeof(mine.sock)) != MXU_OK) {
                close(fd);
                ll->name[0] = '\0';
                mine.ok = 0;
            }
            snprintf(mine.name, sizeof(mine.name), "%s", ll->name);
            mine.bytes = bytes;
        }
    }
    /* every member able to take part (a member without its buffers cannot
     * join the Allgather: all members agree first, then all or none of
     * them call it) */
    int ok = 0;
    if (PMPI_Allreduce(&mine.ok, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        ok = 0;
    /* everyone's description */
    if (ok)
        ok = PMPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE,
                            comm) == MPI_SUCCESS;
    /* one process per GPU: a spinning kernel must not share its GPU with
     * another process's (time-slicing without MPS; the SX path's rule) */
    for (int q = 0; q < p && ok; q++)
        for (int o = q + 1; o < p && ok; o++)
            if (strcmp(all[q].busid, all[o].busid) == 0) {
                ok = 0;
                MXU_LOG(MXU_LOG_INFO, "one-kernel Allreduce: members %d and %d share GPU %s", q, o,
                        all[q].busid);
            }
    if (ok)
        ok = ll_map_peers(ll, all, p, me);
    int agreed = 0;
    if (PMPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        agreed = 0;
    free(all);
    if (!ll) {
        c->coll_ll = &ll_off;
        return;
    }
    ll->state = agreed ? 1 : -1;
    MXU_LOG(MXU_LOG_INFO, "one-kernel Allreduce on communicator context %u (%d processes): %s",
            (unsigned)c->ec.ctx_id, p, agreed ? "on" : "off (the round-based path)");
    c->coll_ll = ll;
}

int mxi_coll_ll_allreduce(mxi_comm_t *c, MPI_Comm comm, mxa_stream_t *s, const void *src, void *dst,
                          size_t n, size_t esize, mxa_red_kind_t kind, mxa_red_op_t op, int *rc)
{
    size_t bytes = n * esize;
    int p = c->ec.size, r = c->ec.rank;
    *rc = MPI_SUCCESS;
    if (s->kind != MXA_KIND_CUDA || p < 2 || bytes == 0 || bytes > mxu_config.coll_ll_bytes ||
        bytes > MXA_LLRED_MAX_BYTES || !mxa_device_active())
        return 0;
    /* a capture records the round-based path (graph.c): every member that
     * captures the call captures it, and graph launches match among
     * themselves only (their own tag) */
    if (mxi_graph_capturing(s))
        return 0;
    if (!c->coll_ll)
        ll_setup(c, comm, s);
    struct mxi_coll_ll *ll = c->coll_ll;
    if (!ll || ll->state != 1)
        return 0;
    if (mxa_stream_device_ctx(s) != ll->ctx) {
        /* another device's stream: every member must decide alike, so the
         * call cannot leave the path -- an error */
        *rc = mxi_raise(comm, MXI_E_UNSUPPORTED,
                        "stream-ordered Allreduce on a stream of another CUDA context than the "
                        "communicator's first one (the one-kernel path is set up per context)");
        return 1;
    }
    if (!ll->reported && __atomic_load_n(ll->err, __ATOMIC_ACQUIRE)) {
        ll->reported = 1;
        *rc = mxi_raise(comm, MXI_E_TRANSPORT,
                        "an earlier one-kernel Allreduce timed out waiting for a member "
                        "(MPIX_ACC_SX_TIMEOUT) or was aborted: its result is wrong");
        return 1;
    }
    /* device memory for the kernel: the user's buffers where they are,
     * else the stream's device scratch */
    int src_dev = mxa_memtype(src, bytes) != MXA_MEM_HOST;
    int dst_dev = dst && mxa_memtype(dst, bytes) != MXA_MEM_HOST;
    /* the stream's device scratch, fetched on every call: also what the
     * round-based path needs (at most 2 x bytes), so that this call made
     * once before a capture sets up what its captured form (the rounds,
     * streamcoll.c) uses */
    unsigned char *scr = mxa_stream_scratch(s, MXA_MEM_DEVICE, 2 * bytes);
    if (!scr) {
        *rc = mxi_raise(comm, MXI_E_NO_MEM, "%zu bytes of stream scratch", 2 * bytes);
        return 1;
    }
    const void *ksrc = src_dev ? src : scr;
    void *kdst = dst_dev ? dst : scr + bytes;
    mxu_status_t st = MXU_OK;
    if (!src_dev)
        st = mxa_stream_copy(s, scr, src, bytes);

    mxa_llred_plan_t pl;
    memset(&pl, 0, sizeof(pl));
    uint64_t e = ++ll->epoch;
    int par = (int)(e & 1);
    pl.src = (uint64_t)(uintptr_t)ksrc;
    pl.dst = (uint64_t)(uintptr_t)kdst;
    pl.n = n;
    pl.err = (uint64_t)(uintptr_t)ll->err;
    pl.abort_word = mxa_sx_abort_word_addr();
    pl.timeout_ns = mxu_config.sx_timeout > 0 ? (uint64_t)(mxu_config.sx_timeout * 1e9) : 0;
    pl.kind = (int32_t)kind;
    pl.op = (int32_t)op;
    pl.flag = (uint32_t)((e - 1) % 0xffffffffu) + 1;
    /* streamcoll.c's order: fold the first 2 rem ranks, recursive doubling
     * among the pof2 core ranks, the result back to the folded ones */
    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    int rem = p - pof2, nr = -1, k = 0;
#define LL_ROUND(partner, md, tf)                                                                  \
    do {                                                                                           \
        pl.r[k].to = ll_region(ll->peer[partner], r, par, ll->lines);                              \
        pl.r[k].from = ll_region(ll->area, (partner), par, ll->lines);                             \
        pl.r[k].mode = (md);                                                                       \
        pl.r[k].theirs_first = (tf);                                                               \
        k++;                                                                                       \
    } while (0)
    if (r < 2 * rem) {
        if (r % 2) {
            LL_ROUND(r - 1, MXA_LLR_SEND, 0);
        } else {
            LL_ROUND(r + 1, MXA_LLR_FOLDIN, 0);
            nr = r / 2;
        }
    } else {
        nr = r - rem;
    }
    if (nr >= 0)
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int nd = nr ^ mask, dst_rank = nd < rem ? nd * 2 : nd + rem;
            LL_ROUND(dst_rank, MXA_LLR_EXCH, nd < nr);
        }
    if (r < 2 * rem) {
        if (r % 2)
            LL_ROUND(r - 1, MXA_LLR_RESULT, 0);
        else
            LL_ROUND(r + 1, MXA_LLR_GIVE, 0);
    }
#undef LL_ROUND
    pl.nrounds = k;
    if (st == MXU_OK)
        st = mxa_stream_llreduce(s, &pl);
    if (st == MXU_OK && dst && !dst_dev)
        st = mxa_stream_copy(s, dst, kdst, bytes);
    if (st != MXU_OK)
        *rc = mxi_raise_code(comm, mxi_status_to_mpi(st));
    return 1;
}
