/*
 * init.c - MPI_Init / MPI_Init_thread / MPI_Finalize: bring the engine up
 * after the MPI library, exchange worker addresses, and drain at the end.
 */
#include "interpose/interpose.h"
#include "interpose/typelayout.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "util/calltime.h"
#include "util/settings.h"
#include "util/waiter.h"

mxi_state_t mxi;

/* ---- link order: did MPI_Init come through this library? ----
 * A program linked with the MPI library before -lmpixacc resolves MPI_Init
 * (and every MPI_* call) to the MPI library: the library never starts and
 * stream communicators are silently plain. Checked at load time (which
 * object the process's MPI_Init belongs to) and again when an MPIX_Acc_*
 * call finds the library inactive although MPI is initialised. */
static int mxi_init_seen;            /* our MPI_Init / MPI_Init_thread ran */
static _Atomic int mxi_order_warned; /* the call-time warning, once per process */
static int mxi_node_size = 1;        /* processes of this node (MPI_COMM_TYPE_SHARED) */

#define MXI_LINK_FIX                                                                               \
    "link -lmpixacc before the MPI library, or preload it "                                        \
    "(LD_PRELOAD=/full/path/to/libmpixacc.so)"

/* dl_iterate_phdr: is data (an address) inside the first object, the program? */
static int mxi_phdr_in_program(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t a = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
            return 1;
    }
    return -1; /* stop after the first object: not in the program */
}

/* The object MPI_Init resolves to when it is not this library, else NULL.
 * NULL too when this code is in the program itself (static libmpixacc.a,
 * mpixacc_info, unit tests): there the program's own definition wins. */
static const char *mxi_mpi_init_elsewhere(void)
{
    static const char unknown[] = "another object";
    Dl_info self, other;
    void *fn = dlsym(RTLD_DEFAULT, "MPI_Init");
    if (fn == NULL || !dladdr((void *)mxi_mpi_init_elsewhere, &self) || !dladdr(fn, &other))
        return NULL;
    if (dl_iterate_phdr(mxi_phdr_in_program, (void *)mxi_mpi_init_elsewhere) > 0)
        return NULL;
    if (other.dli_fbase == self.dli_fbase)
        return NULL;
    return other.dli_fname && other.dli_fname[0] ? other.dli_fname : unknown;
}

static int mxi_disabled_by_env(void)
{
    int off = 0;
    const char *v = getenv("MPIX_ACC_DISABLE");
    return v && mxu_config_parse_value(MXU_CFG_BOOL, v, &off) == MXU_OK && off;
}

__attribute__((constructor)) static void mxi_link_order_at_load(void)
{
    const char *where = mxi_mpi_init_elsewhere();
    if (where != NULL && !mxi_disabled_by_env())
        MXU_LOG(MXU_LOG_WARN,
                "MPI_Init resolves to %s, not to libmpixacc: the MPI library "
                "comes before libmpixacc on the link line, so no MPI call "
                "reaches the library and it stays inactive; %s",
                where, MXI_LINK_FIX);
}

void mxi_link_order_check(const char *call)
{
    int flag = 0;
    if (mxi_init_seen || mxi.disabled || atomic_load(&mxi_order_warned) ||
        PMPI_Initialized(&flag) != MPI_SUCCESS || !flag || mxi_disabled_by_env())
        return;
    if (atomic_exchange(&mxi_order_warned, 1))
        return;
    const char *where = mxi_mpi_init_elsewhere();
    MXU_LOG(MXU_LOG_WARN,
            "an MPIX_Acc_* call (%s) found the library inactive: MPI_Init did "
            "not go through it (MPI was initialised by %s); %s",
            call, where ? where : "the MPI library directly", MXI_LINK_FIX);
}

/* Exchange worker addresses over MPI_COMM_WORLD and start the engine.
 * Collective: every rank takes part even if its own setup failed, and all
 * ranks agree on whether the library is active. */
/* The node as the library needs it: processes that share the host name,
 * the kernel (boot id) and /dev/shm (POSIX shared memory, the stream-
 * executed path's rings). Not MPI_COMM_TYPE_SHARED: an MPI library may
 * call every process a node of its own (MPICH with MPIR_CVAR_NOLOCAL=1)
 * or a container boundary may split one host. FNV-1a, 64 bits. */
static uint64_t mxi_node_key(void)
{
    char text[512];
    char host[256] = "", boot[64] = "";
    (void)gethostname(host, sizeof(host) - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
    }
    struct stat st;
    memset(&st, 0, sizeof(st));
    (void)stat("/dev/shm", &st);
    snprintf(text, sizeof(text), "%s|%s|%llu|%llu", host, boot, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    uint64_t h = 1469598103934665603ull;
    for (const char *c = text; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h;
}

/* This node's communicator (mxi_node_key), or MPI_COMM_NULL. */
static MPI_Comm mxi_node_comm(void)
{
    uint64_t key = mxi_node_key();
    int mine[2] = {(int)(uint32_t)key, (int)(uint32_t)(key >> 32)};
    int *all = malloc(sizeof(int) * 2 * (size_t)mxi.world_size);
    int ok = all != NULL, ok_all = 0;
    mxi_allreduce_int(&ok, &ok_all, MPI_MIN, MPI_COMM_WORLD, "of MPI_Init (node keys)");
    MPI_Comm node = MPI_COMM_NULL;
    if (ok_all) {
        mxi_allgather_int(&mine[0], all, MPI_COMM_WORLD, "of MPI_Init (node keys)");
        mxi_allgather_int(&mine[1], all + mxi.world_size, MPI_COMM_WORLD,
                          "of MPI_Init (node keys)");
        int color = mxi.world_rank; /* the lowest rank with this key */
        for (int r = 0; r < mxi.world_size; r++)
            if (all[r] == mine[0] && all[mxi.world_size + r] == mine[1]) {
                color = r;
                break;
            }
        if (PMPI_Comm_split(MPI_COMM_WORLD, color, mxi.world_rank, &node) != MPI_SUCCESS)
            node = MPI_COMM_NULL;
    }
    free(all);
    return node;
}

static void mxi_bring_up(void)
{
    int ok = 1;
    mxu_locked_map_init(&mxi.comms);
    mxu_locked_map_init(&mxi.requests);
    pthread_mutex_init(&mxi.reap_lock, NULL);
    PMPI_Comm_rank(MPI_COMM_WORLD, &mxi.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &mxi.world_size);
    mxu_log_set_rank(mxi.world_rank);
    /* NVTX ranges (MPIX_ACC_NVTX): before any thread of the library starts */
    mxu_trace_setup(mxu_config.nvtx);
    mxi_errors_init();
    mxi_datatype_init();
    mxi_layout_init();

    /* both ends of every UCX endpoint must use the same error mode */
    int pe = mxu_config.peer_errors != 0, pe_all = pe;
    mxi_allreduce_int(&pe, &pe_all, MPI_MAX, MPI_COMM_WORLD, "of MPI_Init (error mode)");
    if (pe_all != pe)
        MXU_LOG(MXU_LOG_WARN, "MPIX_ACC_PEER_ERRORS differs between ranks: all use 1");
    mxe_init_args_t args = {
        .world_rank = mxi.world_rank, .world_size = mxi.world_size, .peer_errors = pe_all};
    /* processes sharing this node, for the progress thread's placement */
    MPI_Comm node = mxi_node_comm();
    int *node_peers = NULL, cuda_everywhere = 0;
    if (node != MPI_COMM_NULL) {
        PMPI_Comm_rank(node, &args.local_rank);
        PMPI_Comm_size(node, &args.local_size);
        mxi_node_size = args.local_size;
        /* the node's processes and a job id for the stream-executed path's
         * shared-memory names (the first process's pid) */
        int *ranks = malloc(sizeof(int) * (size_t)args.local_size * 2);
        int mine[2] = {mxi.world_rank, (int)getpid()}, ok_all = 0, ok = ranks != NULL;
        mxi_allreduce_int(&ok, &ok_all, MPI_MIN, node, "of MPI_Init (node list)");
        if (ok_all) {
            mxi_allgather_int(&mine[0], ranks, node, "of MPI_Init (node ranks)");
            mxi_allgather_int(&mine[1], ranks + args.local_size, node, "of MPI_Init (node pids)");
            mxe_set_node(ranks, args.local_size, (long)ranks[args.local_size]);
        }
        free(ranks);
    }
    /* the engine starts the layers below it (accel, topo, transport) */
    if (mxe_init(&args) != MXU_OK)
        ok = 0;
    if (node != MPI_COMM_NULL) {
        /* with a GPU backend on every process of the node, they exchange
         * device memory once at start (mxe_start: GPU peer access set up early) */
        int mine = mxa_device_active();
        if (args.local_size > 1 && mine)
            node_peers = malloc(sizeof(int) * (size_t)args.local_size);
        int ready = node_peers != NULL; /* CUDA on and the list allocated, on every one */
        mxi_allreduce_int(&ready, &cuda_everywhere, MPI_MIN, node, "of MPI_Init (node GPUs)");
        if (cuda_everywhere)
            mxi_allgather_int(&mxi.world_rank, node_peers, node, "of MPI_Init (node ranks)");
        else {
            free(node_peers);
            node_peers = NULL;
        }
        PMPI_Comm_free(&node);
    }
    const void *addr = NULL;
    size_t len = 0;
    if (ok && mxe_local_address(&addr, &len) != MXU_OK)
        ok = 0;

    int n = mxi.world_size;
    int mylen = ok ? (int)len : 0;
    int *lens = malloc(sizeof(int) * (size_t)n);
    int *displs = malloc(sizeof(int) * (size_t)n);
    size_t *offsets = malloc(sizeof(size_t) * ((size_t)n + 1));
    char *blob = NULL;
    if (!lens || !displs || !offsets)
        ok = 0; /* still take part below with what we have */
    int all_ok = 0;
    if (lens && displs && offsets) {
        mxi_allgather_int(&mylen, lens, MPI_COMM_WORLD, "of MPI_Init (address lengths)");
        size_t total = 0;
        for (int r = 0; r < n; r++) {
            displs[r] = (int)total;
            offsets[r] = total;
            total += (size_t)lens[r];
        }
        offsets[n] = total;
        blob = malloc(total ? total : 1);
        mxi_allgatherv_bytes(addr, mylen, blob, lens, displs, MPI_COMM_WORLD,
                             "of MPI_Init (worker addresses)");
        for (int r = 0; r < n; r++)
            if (lens[r] == 0)
                ok = 0;
    }
    mxi_allreduce_int(&ok, &all_ok, MPI_MIN, MPI_COMM_WORLD, "of MPI_Init (outcome)");
    mxi_part_init(); /* (the engine's pollers: before its thread starts) */
    mxi_graph_init();
    /* node_peers: set on every rank of a node or on none of them */
    if (all_ok &&
        mxe_start(blob, offsets, n, node_peers, node_peers ? args.local_size : 0) != MXU_OK)
        all_ok = 0;
    free(node_peers);
    free(lens);
    free(displs);
    free(offsets);
    free(blob);
    if (!all_ok) {
        MXU_LOG(MXU_LOG_ERROR,
                "stream-ordered communication unavailable (setup failed on "
                "%s); MPI calls pass through unchanged",
                ok ? "another rank" : "this rank");
        if (mxe_is_running())
            mxe_finalize(NULL, NULL);
        return;
    }
    mxe_set_result_writer(mxi_result_writer);
    mxi.active = 1;
    mxi_comm_register_predefined();
    MXU_LOG(MXU_LOG_INFO, "mpix-acc %d.%d.%d active on %d ranks", MPIX_ACC_VERSION_MAJOR,
            MPIX_ACC_VERSION_MINOR, MPIX_ACC_VERSION_PATCH, n);
}

static void mxi_before_init(void)
{
    mxi_init_seen = 1;
    mxu_config_load();
    mxi.disabled = mxu_config.disable;
}

int MPI_Init(int *argc, char ***argv)
{
    mxi_before_init();
    int rc = PMPI_Init(argc, argv);
    if (rc != MPI_SUCCESS || mxi.disabled)
        return rc;
    PMPI_Query_thread(&mxi.thread_level);
    mxi_bring_up();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    mxi_before_init();
    /* The progress thread makes no MPI call but the local status writers of
     * the result writer (design.md §2, up-calls): the application's level
     * is all that is asked of the MPI library. */
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc != MPI_SUCCESS || mxi.disabled)
        return rc;
    mxi.thread_level = *provided;
    mxi_bring_up();
    return rc;
}

/* MPIX_ACC_STATS=1: the counters at INFO level, printed whatever
 * MPIX_ACC_LOG says (the user asked for them), into the log (stderr or
 * MPIX_ACC_LOG_FILE). */
static void mxi_print_stats(void)
{
    mxe_stats_t st;
    mxe_get_stats(&st);
    MXU_LOG_FORCED(MXU_LOG_INFO,
                   "stats: ops submitted %llu completed %llu failed %llu; waits %llu released "
                   "%llu; progress sleeps %llu wake-ups %llu; progress cpu %d; completed after "
                   "a library stream's work %llu",
                   (unsigned long long)st.ops_submitted, (unsigned long long)st.ops_completed,
                   (unsigned long long)st.ops_failed, (unsigned long long)st.waits_submitted,
                   (unsigned long long)st.waits_released, (unsigned long long)st.progress_sleeps,
                   (unsigned long long)st.progress_wakeups, st.progress_cpu,
                   (unsigned long long)st.ops_finished_later);
    for (int p = 0; p < MXE_NPATHS; p++)
        MXU_LOG_FORCED(MXU_LOG_INFO,
                       "stats: path %s: sent %llu messages %llu bytes; received %llu messages "
                       "%llu bytes",
                       mxe_path_name((mxe_path_t)p), (unsigned long long)st.path[p].sent,
                       (unsigned long long)st.path[p].sent_bytes,
                       (unsigned long long)st.path[p].received,
                       (unsigned long long)st.path[p].received_bytes);
    MXU_LOG_FORCED(
        MXU_LOG_INFO, "stats: peers: %d on this node, %d on other nodes; UCX endpoints %d: %s",
        mxi_node_size - 1, mxi.world_size - mxi_node_size, st.ucx_endpoints, st.ucx_endpoint_kinds);
    unsigned long long staged_sent, staged_received;
    mxi_net_stage_counts(&staged_sent, &staged_received);
    MXU_LOG_FORCED(MXU_LOG_INFO,
                   "stats: staged through host memory (MPIX_ACC_NET_STAGE=%s, up to %zu bytes): "
                   "sent %llu received %llu",
                   mxu_config.net_stage, mxu_config.net_stage_bytes, staged_sent, staged_received);
    unsigned long long g_states, g_made, g_done;
    if (mxi_graph_stats(&g_states, &g_made, &g_done)) /* (only where graphs used counters) */
        MXU_LOG_FORCED(MXU_LOG_INFO,
                       "stats: graphs (counter protocol): captures %llu; operations made for "
                       "launches %llu; launches whose waits completed %llu",
                       g_states, g_made, g_done);
    MXU_LOG_FORCED(MXU_LOG_INFO,
                   "stats: call-order matching: announced %llu; matched posted %llu; matched "
                   "unexpected %llu",
                   (unsigned long long)st.match_announced, (unsigned long long)st.match_posted,
                   (unsigned long long)st.match_unexpected);
    {
        char fb[256];
        size_t off = 0;
        for (int i = 0; mxe_sx_fallback_name(i) && off < sizeof(fb); i++)
            off += (size_t)snprintf(fb + off, sizeof(fb) - off, "%s%s %llu", i ? ", " : "",
                                    mxe_sx_fallback_name(i), (unsigned long long)st.sx_fallback[i]);
        MXU_LOG_FORCED(
            MXU_LOG_INFO,
            "stats: sx: rings published %llu (%llu bytes), sends that took UCX: %s; received "
            "by UCX into staging %llu; device rings made %llu, mapped %llu, messages sent into "
            "them %llu (bulk %llu); steps with a fused pack %llu, unpack %llu; receives "
            "without a stream point: late points %llu, steps for host interest %llu",
            (unsigned long long)st.sx_links_in, (unsigned long long)st.sx_ring_bytes, fb,
            (unsigned long long)st.sx_staged, (unsigned long long)st.sx_drings_made,
            (unsigned long long)st.sx_drings_mapped, (unsigned long long)st.sx_dring_sent,
            (unsigned long long)st.sx_bulk_sent, (unsigned long long)st.sx_fused_packs,
            (unsigned long long)st.sx_fused_unpacks, (unsigned long long)st.sx_late_points,
            (unsigned long long)st.sx_host_interest_steps);
    }
#define MXI_MEAN_US(sum, n) ((n) ? (double)(sum) / (double)(n) / 1e3 : 0.0)
    MXU_LOG_FORCED(MXU_LOG_INFO,
                   "stats: mean us: stream turnaround (wait released -> next trigger seen) %.2f "
                   "(%llu); send started -> done %.2f (%llu); receive started -> arrived %.2f "
                   "(%llu); last op done -> wait released %.2f (%llu)",
                   MXI_MEAN_US(st.turnaround_ns, st.turnaround_n),
                   (unsigned long long)st.turnaround_n, MXI_MEAN_US(st.send_ns, st.send_n),
                   (unsigned long long)st.send_n, MXI_MEAN_US(st.recv_ns, st.recv_n),
                   (unsigned long long)st.recv_n, MXI_MEAN_US(st.release_ns, st.release_n),
                   (unsigned long long)st.release_n);
#undef MXI_MEAN_US
    {
        /* host time of the library on application threads, per call kind */
        char ct[1024];
        size_t off = 0;
        for (int k = 0; k < MXU_CT_COUNT && off < sizeof(ct); k++)
            off += (size_t)snprintf(ct + off, sizeof(ct) - off, "%s%s %.2f/%.2f/%.2f (%llu)",
                                    k == 0               ? ""
                                    : k == MXU_CT_NOUTER ? "; inside them: "
                                                         : "; ",
                                    mxu_ct_name((mxu_ct_kind_t)k),
                                    mxu_ct_percentile_ns((mxu_ct_kind_t)k, 0.5) / 1e3,
                                    mxu_ct_percentile_ns((mxu_ct_kind_t)k, 0.99) / 1e3,
                                    mxu_ct_mean_ns((mxu_ct_kind_t)k) / 1e3,
                                    (unsigned long long)mxu_ct_count((mxu_ct_kind_t)k));
        MXU_LOG_FORCED(MXU_LOG_INFO,
                       "stats: host us per call on application threads, p50/p99/mean (count): %s",
                       ct);
    }
}

/* MPIX_ACC_FINALIZE_PEER_TIMEOUT in seconds (a value not > 0: the default) */
static double mxi_peer_timeout(void)
{
    return mxu_config.finalize_peer_timeout > 0 ? mxu_config.finalize_peer_timeout : 600.0;
}

/* mxe_finalize's fence, polled while the library's worker progresses: a
 * non-blocking barrier started once this rank's endpoints are closed, so
 * that no rank destroys its worker before every rank closed its own. Gives
 * up (with an error logged) after MPIX_ACC_FINALIZE_PEER_TIMEOUT. */
typedef struct {
    MPI_Request req;
    uint64_t start_ns;
} mxi_fence_t;

static int mxi_world_fence(void *arg)
{
    mxi_fence_t *f = arg;
    int done = 0;
    if (f->req == MPI_REQUEST_NULL) {
        f->start_ns = mxu_now_ns();
        if (PMPI_Ibarrier(MPI_COMM_WORLD, &f->req) != MPI_SUCCESS)
            return 1;
        return 0;
    }
    if (PMPI_Test(&f->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return 1;
    if (!done && (double)(mxu_now_ns() - f->start_ns) * 1e-9 > mxi_peer_timeout()) {
        MXU_LOG(MXU_LOG_ERROR,
                "MPI_Finalize: the ranks did not all close their "
                "connections within MPIX_ACC_FINALIZE_PEER_TIMEOUT=%gs; going on",
                mxi_peer_timeout());
        return 1;
    }
    return done;
}

/* The world barrier of MPI_Finalize, bounded: every rank has drained before
 * endpoints close. Returns 0 when every rank arrived; -1 when a peer is
 * known to have failed (no wait) or MPIX_ACC_FINALIZE_PEER_TIMEOUT passed
 * (reported here). A blocking barrier would wait forever for a dead rank. */
static int mxi_finalize_barrier(void)
{
    int failed[8];
    int nfailed = mxe_failed_peers(failed, 8);
    if (nfailed > 0) {
        char list[96] = "";
        size_t used = 0;
        for (int i = 0; i < nfailed && i < 8 && used < sizeof(list); i++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", i ? ", " : "",
                                     failed[i]);
        MXU_LOG(MXU_LOG_ERROR,
                "MPI_Finalize: %d rank(s) failed (%s%s, ranks in "
                "MPI_COMM_WORLD): not waiting for the other ranks",
                nfailed, list, nfailed > 8 ? ", ..." : "");
        return -1;
    }
    /* Once this rank is in the barrier, a peer closing its connection is a
     * peer leaving the barrier first (announced before entering: the peer
     * can close before this thread sees the barrier complete). */
    mxe_peers_finalizing();
    MPI_Request req;
    if (PMPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
        MXU_LOG(MXU_LOG_ERROR, "MPI_Finalize: MPI_Ibarrier failed");
        return -1;
    }
    double limit = mxi_peer_timeout();
    int rc = mxi_collective_wait(&req, MPI_COMM_WORLD, "MPI_Barrier of MPI_Finalize", limit);
    if (rc == MXI_COLLECTIVE_GAVE_UP) {
        MXU_LOG(MXU_LOG_ERROR,
                "MPI_Finalize: not every rank reached MPI_Finalize within "
                "MPIX_ACC_FINALIZE_PEER_TIMEOUT=%gs (a rank failed, hangs, or is that "
                "much later); giving up",
                limit);
        return -1;
    }
    if (rc != MPI_SUCCESS) {
        MXU_LOG(MXU_LOG_ERROR, "MPI_Finalize: MPI_Test on the world barrier failed");
        return -1;
    }
    return 0;
}

int MPI_Finalize(void)
{
    if (mxi.active) {
        mxi_reap(0);
        int stuck = mxe_drain(mxu_config.finalize_timeout);
        if (stuck > 0)
            MXU_LOG(MXU_LOG_ERROR,
                    "MPI_Finalize: %d stream-ordered operation(s) could not complete within "
                    "MPIX_ACC_FINALIZE_TIMEOUT=%gs and were cancelled (listed above)",
                    stuck, mxu_config.finalize_timeout);
        mxi_reap(1);
        mxi_graph_finalize();
        if (mxi.released_errors > 0)
            MXU_LOG(MXU_LOG_ERROR,
                    "MPI_Finalize: %ld stream-waited operation(s) ended with an error",
                    mxi.released_errors);
        if (mxi_streamcoll_failed() > 0)
            MXU_LOG(MXU_LOG_ERROR,
                    "MPI_Finalize: %ld message(s) of stream-ordered collectives ended with an "
                    "error (logged above)",
                    mxi_streamcoll_failed());
        long held = (long)atomic_load(&mxi.requests.count);
        if (held > 0)
            MXU_LOG(MXU_LOG_WARN,
                    "MPI_Finalize: %ld stream-ordered request(s) never waited or freed by "
                    "the application",
                    held);
        /* Every peer has drained before endpoints close. */
        int complete = mxi_finalize_barrier() == 0;
        if (mxu_config.stats)
            mxi_print_stats();
        /* both stop accel, topo and transport too (the engine owns them) */
        if (complete) {
            mxi_fence_t fence = {.req = MPI_REQUEST_NULL, .start_ns = 0};
            mxe_finalize(mxi_world_fence, &fence);
        } else {
            mxe_abandon();
        }
        mxi.active = 0;
        mxi_layout_finalize();
        mxi_datatype_finalize();
        mxi_comm_forget_all();
        mxu_locked_map_destroy(&mxi.requests);
        free(mxi.reap);
        mxi.reap = NULL;
        mxi.nreap = mxi.capreap = 0;
        if (!complete) {
            /* The MPI library's own finalize waits for every rank (plain
             * MPICH 4.0.2 hangs there when one was killed). */
            MXU_LOG(MXU_LOG_ERROR, "MPI_Finalize: returning an error without finalizing the "
                                   "MPI library, which would wait for the missing rank(s) forever");
            return mxi_status_to_mpi(MXU_ERR_PEER);
        }
    }
    return PMPI_Finalize();
}
