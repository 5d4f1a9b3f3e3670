/*
 * mpixacc_bench - point-to-point latency and bandwidth of stream-ordered
 * MPIX_Acc next to the anchors a user compares it with, every variant in the
 * same launch, on the same GPUs (ranks 0 and 1; further ranks idle).
 *
 * Variants (a variant that cannot run here says why and is skipped):
 *   acc            MPIX_Acc_Isend/Irecv/Waitall on the stream; all iterations
 *                  enqueued, one synchronize at the end
 *   acc-sync       the same, with a stream synchronize after every iteration
 *   staged         the traditional way: copy to pinned host memory on the
 *                  stream, cudaStreamSynchronize, host MPI, copy back
 *   cuda-aware     device pointers straight to MPI_Send/MPI_Recv (when the MPI
 *                  library reports CUDA support)
 *   nccl           ncclSend/ncclRecv on the stream, enqueued ahead like acc
 *   mpich-enqueue  MPICH's MPIX_Send_enqueue & co on its stream communicator
 *                  (MPICH >= 4.1 with CUDA; run with MPIR_CVAR_CH4_RESERVE_VCIS=1)
 *   floor          rank 0 alone: cudaMemcpyPeerAsync between its GPU and the
 *                  next one with a stream-to-stream flag round trip (latency)
 *                  or back to back (bandwidth), timed on the GPU; only when
 *                  named (-v floor or all) until it has run on a GPU (its
 *                  first run deadlocked in set-up on a flag-write bug, fixed)
 *
 * Latency: ping-pong, rank 0 sends and gets the message echoed by rank 1;
 * half-RTT = rank 0's wall time of the repetition (from a barrier to the end
 * of its last synchronize) / (2 x iterations). Bandwidth: rank 0 sends
 * windows of --window messages, rank 1 receives them into distinct buffers
 * and answers each window with a 1-byte ack; GB/s = bytes / wall time.
 * Median, min and max over --repeats repetitions after a warm-up one. CPU:
 * the calling thread's CPU time per latency iteration on rank 0, without
 * the one synchronize that drains the stream at the end of a repetition
 * (a spinning cudaStreamSynchronize would count the GPU's time as CPU).
 *
 * Check (on unless --no-check): every repetition sends a new pattern; after
 * it, the receiver validates the last message (echo on rank 0, every
 * buffer of the last window on rank 1) with a kernel on the stream. A wrong
 * byte makes the row FAIL and the exit status 1.
 *
 * Without a GPU (or --backend host) the same program runs on host streams
 * and host memory; staged and cuda-aware are then plain MPI on host memory,
 * and nccl, mpich-enqueue and floor are skipped.
 */
#include "../common/ex_util.h"
#include "../common/ex_accel.h"
#include "../common/ex_enqueue.h"
#include "../common/ex_nccl.h"
#include "../ping_kernel_pong/pkp.h"
#include "bench.h"

#include <mpix_acc.h>

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <unistd.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#define TAG 77
#define TAG_ACK 78
#define MAX_SIZES 64

typedef struct {
    const ex_accel_t *ac;
    int rank, role; /* role 0/1: ranks 0 and 1; -1: idle */
    MPI_Comm comm;  /* plain duplicate of MPI_COMM_WORLD */
    MPI_Comm ecomm; /* MPICH stream communicator (mpich-enqueue), or NULL */
    ex_stream_t S;
    size_t n;
    int window;
    unsigned char *sbuf, *rbuf, *ack; /* backend memory; rbuf holds a window */
    unsigned char *hs, *hr, *hack;    /* pinned staging (device backend only) */
    unsigned int *errors;             /* backend memory */
    pkp_args_t args[2];
    MPI_Request *req;
} bench_t;

typedef enum { T_LAT = 0, T_BW = 1 } test_t;

/* ------------------------------------------------------------------ */
/* watchdog: --timeout S ends a stuck run naming what it was doing      */

static char bench_phase[160] = "setup";
static int bench_timeout_s;

static void bench_phase_set(const char *variant, int test, size_t n)
{
    snprintf(bench_phase, sizeof bench_phase, "%s %s %zu B", variant,
             test == 0 ? "latency" : "bandwidth", n);
}

static void bench_alarm(int sig)
{
    (void)sig;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "mpixacc_bench: TIMEOUT after %d s in '%s'\n",
                     bench_timeout_s, bench_phase);
    if (n > 0 && write(2, msg, (size_t)n) < 0)
        _exit(124);
    _exit(124);
}

/* ------------------------------------------------------------------ */
/* fill / check kernels (ping-kernel-pong's pattern kernel, no busy time) */

static void pattern_kernel(bench_t *b, int slot, const unsigned char *check, uint32_t cseed,
                           unsigned char *fill, uint32_t fseed, size_t n)
{
    pkp_args_t *a = &b->args[slot];
    b->ac->stream_sync(b->S); /* the argument block is reused */
    *a = (pkp_args_t){.rbuf = check,
                      .rseed = cseed,
                      .sbuf = fill,
                      .sseed = fseed,
                      .n = n,
                      .busy_ns = 0,
                      .errors = b->errors};
    ex_kernel_t k = {pkp_host_fn, NULL, a};
#ifdef EX_HAVE_CUDA
    k.cuda_fn = pkp_cuda_fn;
#endif
    b->ac->launch(b->S, &k);
}

/* ------------------------------------------------------------------ */
/* variants                                                            */

typedef struct variant {
    const char *name;
    int (*available)(const bench_t *b, char *why, size_t len);
    void (*lat)(bench_t *b, int iters);
    void (*bw)(bench_t *b, int windows);
} variant_t;

static int avail_always(const bench_t *b, char *why, size_t len)
{
    (void)b, (void)why, (void)len;
    return 1;
}

/* acc: all iterations enqueued, one synchronize (sync_each: per iteration). */
static void acc_lat(bench_t *b, int iters, int sync_each)
{
    int peer = 1 - b->role;
    for (int i = 0; i < iters; i++) {
        MPI_Request rq[2];
        if (b->role == 0) {
            EX_MPI(MPIX_Acc_Isend(b->S, b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, &rq[0]));
            EX_MPI(MPIX_Acc_Irecv(b->S, b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, &rq[1]));
            EX_MPI(MPIX_Acc_Waitall(b->S, 2, rq, MPI_STATUSES_IGNORE));
        } else {
            EX_MPI(MPIX_Acc_Irecv(b->S, b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, &rq[0]));
            EX_MPI(MPIX_Acc_Wait(b->S, &rq[0], MPI_STATUS_IGNORE));
            EX_MPI(MPIX_Acc_Isend(b->S, b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, &rq[1]));
            EX_MPI(MPIX_Acc_Wait(b->S, &rq[1], MPI_STATUS_IGNORE));
        }
        if (sync_each)
            b->ac->stream_sync(b->S);
    }
}

static void acc_bw(bench_t *b, int windows, int sync_each)
{
    int peer = 1 - b->role, w = b->window;
    for (int k = 0; k < windows; k++) {
        MPI_Request ar;
        if (b->role == 0) {
            EX_MPI(MPIX_Acc_Irecv(b->S, b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm, &ar));
            for (int j = 0; j < w; j++)
                EX_MPI(MPIX_Acc_Isend(b->S, b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm,
                                      &b->req[j]));
            EX_MPI(MPIX_Acc_Waitall(b->S, w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPIX_Acc_Wait(b->S, &ar, MPI_STATUS_IGNORE));
        } else {
            for (int j = 0; j < w; j++)
                EX_MPI(MPIX_Acc_Irecv(b->S, b->rbuf + (size_t)j * b->n, (int)b->n, MPI_BYTE, peer,
                                      TAG, b->comm, &b->req[j]));
            EX_MPI(MPIX_Acc_Waitall(b->S, w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPIX_Acc_Isend(b->S, b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm, &ar));
            EX_MPI(MPIX_Acc_Wait(b->S, &ar, MPI_STATUS_IGNORE));
        }
        if (sync_each)
            b->ac->stream_sync(b->S);
    }
}

static void run_acc_lat(bench_t *b, int iters) { acc_lat(b, iters, 0); }
static void run_acc_bw(bench_t *b, int windows) { acc_bw(b, windows, 0); }
static void run_accsync_lat(bench_t *b, int iters) { acc_lat(b, iters, 1); }
static void run_accsync_bw(bench_t *b, int windows) { acc_bw(b, windows, 1); }

/* staged: the data lives on the device; host MPI moves pinned copies. On
 * the host backend the buffers are host memory and no copies are made. */
static void run_staged_lat(bench_t *b, int iters)
{
    const ex_accel_t *ac = b->ac;
    int peer = 1 - b->role, dev = ac->is_device;
    unsigned char *hs = dev ? b->hs : b->sbuf, *hr = dev ? b->hr : b->rbuf;
    for (int i = 0; i < iters; i++) {
        if (b->role == 0) {
            if (dev)
                ac->copy_async(b->S, hs, b->sbuf, b->n);
            ac->stream_sync(b->S);
            EX_MPI(MPI_Send(hs, (int)b->n, MPI_BYTE, peer, TAG, b->comm));
            EX_MPI(MPI_Recv(hr, (int)b->n, MPI_BYTE, peer, TAG, b->comm, MPI_STATUS_IGNORE));
            if (dev)
                ac->copy_async(b->S, b->rbuf, hr, b->n);
            ac->stream_sync(b->S);
        } else {
            EX_MPI(MPI_Recv(hr, (int)b->n, MPI_BYTE, peer, TAG, b->comm, MPI_STATUS_IGNORE));
            if (dev) { /* the message lands on the device, and is sent back from there */
                ac->copy_async(b->S, b->rbuf, hr, b->n);
                ac->copy_async(b->S, hs, b->rbuf, b->n);
            }
            ac->stream_sync(b->S);
            EX_MPI(MPI_Send(dev ? hs : b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm));
        }
    }
}

static void run_staged_bw(bench_t *b, int windows)
{
    const ex_accel_t *ac = b->ac;
    int peer = 1 - b->role, dev = ac->is_device, w = b->window;
    for (int k = 0; k < windows; k++) {
        if (b->role == 0) {
            unsigned char *hs = dev ? b->hs : b->sbuf;
            for (int j = 0; j < w && dev; j++)
                ac->copy_async(b->S, hs + (size_t)j * b->n, b->sbuf, b->n);
            ac->stream_sync(b->S);
            MPI_Request ar;
            EX_MPI(MPI_Irecv(dev ? b->hack : b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm, &ar));
            for (int j = 0; j < w; j++)
                EX_MPI(MPI_Isend(hs + (dev ? (size_t)j * b->n : 0), (int)b->n, MPI_BYTE, peer, TAG,
                                 b->comm, &b->req[j]));
            EX_MPI(MPI_Waitall(w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPI_Wait(&ar, MPI_STATUS_IGNORE));
        } else {
            unsigned char *hr = dev ? b->hr : b->rbuf;
            for (int j = 0; j < w; j++)
                EX_MPI(MPI_Irecv(hr + (size_t)j * b->n, (int)b->n, MPI_BYTE, peer, TAG, b->comm,
                                 &b->req[j]));
            EX_MPI(MPI_Waitall(w, b->req, MPI_STATUSES_IGNORE));
            if (dev)
                ac->copy_async(b->S, b->rbuf, hr, (size_t)w * b->n);
            ac->stream_sync(b->S);
            EX_MPI(MPI_Send(dev ? b->hack : b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm));
        }
    }
}

/* cuda-aware: device pointers to the MPI library; one synchronize before
 * the first send (the data was produced on the stream). */
static int mpi_cuda_support(void)
{
#if defined(MPIX_GPU_SUPPORT_CUDA) && defined(MPICH_NUMVERSION)
    int sup = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &sup) == MPI_SUCCESS && sup;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return -1; /* cannot tell */
#endif
}

static int avail_cuda_aware(const bench_t *b, char *why, size_t len)
{
    if (!b->ac->is_device)
        return 1; /* host memory: plain MPI */
    int s = mpi_cuda_support();
    if (s == 1)
        return 1;
    snprintf(why, len, "%s",
             s == 0 ? "the MPI library reports no CUDA support (device pointers would crash it)"
                    : "the MPI library offers no way to ask for CUDA support");
    return 0;
}

static void run_cuda_aware_lat(bench_t *b, int iters)
{
    int peer = 1 - b->role;
    b->ac->stream_sync(b->S);
    for (int i = 0; i < iters; i++) {
        if (b->role == 0) {
            EX_MPI(MPI_Send(b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm));
            EX_MPI(MPI_Recv(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, MPI_STATUS_IGNORE));
        } else {
            EX_MPI(MPI_Recv(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, MPI_STATUS_IGNORE));
            EX_MPI(MPI_Send(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm));
        }
    }
}

static void run_cuda_aware_bw(bench_t *b, int windows)
{
    int peer = 1 - b->role, w = b->window;
    b->ac->stream_sync(b->S);
    for (int k = 0; k < windows; k++) {
        if (b->role == 0) {
            MPI_Request ar;
            EX_MPI(MPI_Irecv(b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm, &ar));
            for (int j = 0; j < w; j++)
                EX_MPI(MPI_Isend(b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->comm, &b->req[j]));
            EX_MPI(MPI_Waitall(w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPI_Wait(&ar, MPI_STATUS_IGNORE));
        } else {
            for (int j = 0; j < w; j++)
                EX_MPI(MPI_Irecv(b->rbuf + (size_t)j * b->n, (int)b->n, MPI_BYTE, peer, TAG,
                                 b->comm, &b->req[j]));
            EX_MPI(MPI_Waitall(w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPI_Send(b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->comm));
        }
    }
}

/* nccl: ncclSend/ncclRecv on the stream, enqueued ahead, one synchronize. */
static char nccl_why[256];
static int nccl_ok;

static int avail_nccl(const bench_t *b, char *why, size_t len)
{
    (void)b;
    if (!nccl_ok)
        snprintf(why, len, "%s", nccl_why);
    return nccl_ok;
}

static void run_nccl_lat(bench_t *b, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (b->role == 0) {
            ex_nccl_send(b->sbuf, b->n, b->S);
            ex_nccl_recv(b->rbuf, b->n, b->S);
        } else {
            ex_nccl_recv(b->rbuf, b->n, b->S);
            ex_nccl_send(b->rbuf, b->n, b->S);
        }
    }
}

static void run_nccl_bw(bench_t *b, int windows)
{
    for (int k = 0; k < windows; k++) {
        ex_nccl_group_start();
        for (int j = 0; j < b->window; j++) {
            if (b->role == 0)
                ex_nccl_send(b->sbuf, b->n, b->S);
            else
                ex_nccl_recv(b->rbuf + (size_t)j * b->n, b->n, b->S);
        }
        ex_nccl_group_end();
        if (b->role == 0)
            ex_nccl_recv(b->ack, 1, b->S);
        else
            ex_nccl_send(b->ack, 1, b->S);
    }
}

/* mpich-enqueue: MPICH's stream communicator, enqueued ahead. */
static char enq_why[320];

static int avail_enqueue(const bench_t *b, char *why, size_t len)
{
    if (b->ecomm == MPI_COMM_NULL)
        snprintf(why, len, "%s", enq_why);
    return b->ecomm != MPI_COMM_NULL;
}

#ifdef EX_HAVE_MPICH_ENQUEUE
static void run_enqueue_lat(bench_t *b, int iters)
{
    int peer = 1 - b->role;
    for (int i = 0; i < iters; i++) {
        if (b->role == 0) {
            EX_MPI(MPIX_Send_enqueue(b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->ecomm));
            EX_MPI(MPIX_Recv_enqueue(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->ecomm,
                                     MPI_STATUS_IGNORE));
        } else {
            EX_MPI(MPIX_Recv_enqueue(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->ecomm,
                                     MPI_STATUS_IGNORE));
            EX_MPI(MPIX_Send_enqueue(b->rbuf, (int)b->n, MPI_BYTE, peer, TAG, b->ecomm));
        }
    }
}

static void run_enqueue_bw(bench_t *b, int windows)
{
    int peer = 1 - b->role, w = b->window;
    for (int k = 0; k < windows; k++) {
        if (b->role == 0) {
            for (int j = 0; j < w; j++)
                EX_MPI(MPIX_Isend_enqueue(b->sbuf, (int)b->n, MPI_BYTE, peer, TAG, b->ecomm,
                                          &b->req[j]));
            EX_MPI(MPIX_Waitall_enqueue(w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(
                MPIX_Recv_enqueue(b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->ecomm, MPI_STATUS_IGNORE));
        } else {
            for (int j = 0; j < w; j++)
                EX_MPI(MPIX_Irecv_enqueue(b->rbuf + (size_t)j * b->n, (int)b->n, MPI_BYTE, peer,
                                          TAG, b->ecomm, &b->req[j]));
            EX_MPI(MPIX_Waitall_enqueue(w, b->req, MPI_STATUSES_IGNORE));
            EX_MPI(MPIX_Send_enqueue(b->ack, 1, MPI_BYTE, peer, TAG_ACK, b->ecomm));
        }
    }
}
#else
#define run_enqueue_lat NULL
#define run_enqueue_bw NULL
#endif

/* floor: run by rank 0 alone (see bench.h); listed so --variant selects it. */
static char floor_why[256], floor_desc[160];
static int floor_ok;
#ifdef EX_HAVE_CUDA
static int floor_tried;
#endif

static int avail_floor(const bench_t *b, char *why, size_t len)
{
    (void)b;
    if (!floor_ok)
        snprintf(why, len, "%s", floor_why);
    return floor_ok;
}

static const variant_t variants[] = {
    {"acc", avail_always, run_acc_lat, run_acc_bw},
    {"acc-sync", avail_always, run_accsync_lat, run_accsync_bw},
    {"staged", avail_always, run_staged_lat, run_staged_bw},
    {"cuda-aware", avail_cuda_aware, run_cuda_aware_lat, run_cuda_aware_bw},
    {"nccl", avail_nccl, run_nccl_lat, run_nccl_bw},
    {"mpich-enqueue", avail_enqueue, run_enqueue_lat, run_enqueue_bw},
    {"floor", avail_floor, NULL, NULL},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))
#define FLOOR_INDEX (NVARIANTS - 1)

/* ------------------------------------------------------------------ */
/* options                                                             */

typedef struct {
    int use[NVARIANTS];
    int tests[2];
    long long sizes[MAX_SIZES];
    int nsizes;
    int iters, repeats, window, check, fault, timeout;
    long long budget;
    const char *backend, *csv;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: mpiexec -n 2 mpixacc_bench [options]\n"
               "  -b, --min B          smallest message (default 8; suffixes K, M, G)\n"
               "  -e, --max B          largest message (default 64M)\n"
               "  -f, --factor F       size step factor (default 4)\n"
               "      --sizes LIST     explicit sizes instead, e.g. 8,64K,1M,64M\n"
               "  -v, --variant LIST   acc,acc-sync,staged,cuda-aware,nccl,mpich-enqueue,floor\n"
               "                       or all (default: all but floor, not yet run to the end\n"
               "                       on a GPU)\n"
               "  -t, --test LIST      lat,bw or both (default both)\n"
               "  -i, --iters N        latency round trips per repetition (default 1000; fewer\n"
               "                       for large messages, see --budget)\n"
               "  -r, --repeats R      timed repetitions, median/min/max over them (default 7)\n"
               "  -w, --window W       messages in flight per bandwidth window (default 8)\n"
               "      --budget B       bytes moved per repetition at most (default 1G): large\n"
               "                       messages get fewer iterations (at least 8 / 2 windows)\n"
               "      --backend B      auto, host or cuda (default auto)\n"
               "      --csv FILE       also write the results as CSV\n"
               "      --timeout S      end the program (exit 124) when it runs longer than S\n"
               "                       seconds, naming what it was doing (default 0: none)\n"
               "      --check/--no-check   validate received data (default on)\n"
               "      --inject-fault   testing: in bandwidth runs rank 0 sends a pattern the\n"
               "                       receiver does not expect (rows must FAIL, exit status 1)\n");
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"min", required_argument, 0, 'b'},     {"max", required_argument, 0, 'e'},
        {"factor", required_argument, 0, 'f'},  {"sizes", required_argument, 0, 's'},
        {"variant", required_argument, 0, 'v'}, {"test", required_argument, 0, 't'},
        {"iters", required_argument, 0, 'i'},   {"repeats", required_argument, 0, 'r'},
        {"window", required_argument, 0, 'w'},  {"budget", required_argument, 0, 'B'},
        {"backend", required_argument, 0, 'k'}, {"csv", required_argument, 0, 'c'},
        {"check", no_argument, 0, 'C'},         {"no-check", no_argument, 0, 'N'},
        {"inject-fault", no_argument, 0, 'F'},  {"timeout", required_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *vnames[NVARIANTS], *tnames[2] = {"lat", "bw"};
    for (int v = 0; v < NVARIANTS; v++)
        vnames[v] = variants[v].name;
    long long bmin = 8, bmax = 64LL << 20, factor = 4;
    int explicit_sizes = 0;
    memset(o, 0, sizeof *o);
    for (int v = 0; v < NVARIANTS; v++) /* floor only when asked for (see usage) */
        o->use[v] = v != FLOOR_INDEX;
    o->tests[T_LAT] = o->tests[T_BW] = 1;
    o->iters = 1000, o->repeats = 7, o->window = 8, o->check = 1;
    o->budget = 1LL << 30;
    o->backend = "auto";
    int c;
    while ((c = getopt_long(argc, argv, "b:e:f:v:t:i:r:w:h", lo, NULL)) != -1) {
        switch (c) {
        case 'b':
        case 'e':
        case 'B': {
            long long v = ex_parse_size(optarg);
            if (v < 1) {
                fprintf(stderr, "invalid size '%s'\n", optarg);
                exit(2);
            }
            *(c == 'b' ? &bmin : c == 'e' ? &bmax : &o->budget) = v;
            break;
        }
        case 'f':
            factor = ex_parse_long("--factor", optarg, 2, 1024);
            break;
        case 's':
            o->nsizes = ex_parse_size_list(optarg, o->sizes, MAX_SIZES);
            if (o->nsizes <= 0) {
                fprintf(stderr, "invalid --sizes '%s'\n", optarg);
                exit(2);
            }
            explicit_sizes = 1;
            break;
        case 'v':
            ex_parse_name_list(optarg, vnames, NVARIANTS, o->use, "variant");
            break;
        case 't':
            ex_parse_name_list(optarg, tnames, 2, o->tests, "test");
            break;
        case 'i':
            o->iters = (int)ex_parse_long("--iters", optarg, 1, 100000000);
            break;
        case 'r':
            o->repeats = (int)ex_parse_long("--repeats", optarg, 1, 100000);
            break;
        case 'w':
            o->window = (int)ex_parse_long("--window", optarg, 1, 1024);
            break;
        case 'k':
            o->backend = optarg;
            break;
        case 'c':
            o->csv = optarg;
            break;
        case 'C':
            o->check = 1;
            break;
        case 'N':
            o->check = 0;
            break;
        case 'F':
            o->fault = 1;
            break;
        case 'T':
            o->timeout = (int)ex_parse_long("--timeout", optarg, 0, 1000000);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        usage(stderr);
        exit(2);
    }
    if (!explicit_sizes) {
        if (bmin > bmax) {
            fprintf(stderr, "--min %lld > --max %lld\n", bmin, bmax);
            exit(2);
        }
        for (long long s = bmin; s <= bmax && o->nsizes < MAX_SIZES; s *= factor)
            o->sizes[o->nsizes++] = s;
    }
    ex_check_message_sizes(o->sizes, o->nsizes);
}

/* ------------------------------------------------------------------ */

/* Pattern seed of repetition `rep` of test t for size index si. */
static uint32_t seed_of(int si, int vi, test_t t, int rep)
{
    return (uint32_t)(si * 7919 + vi * 104729 + (int)t * 31 + rep * 2 + 1);
}

/* One repetition of an MPI variant: fill, barrier, run, validate. Returns
 * rank 0's wall and CPU seconds (on every rank) and the global count of
 * wrong bytes. */
static unsigned long long one_rep(bench_t *b, const variant_t *v, test_t t, int count,
                                  uint32_t seed, const opts_t *o, double *wall, double *cpu)
{
    int check = o->check;
    const ex_accel_t *ac = b->ac;
    unsigned int zero = 0, errs = 0;
    if (b->role >= 0) {
        ac->copy(b->errors, &zero, sizeof zero);
        if (b->role == 0) /* --inject-fault: a pattern rank 1 does not expect */
            pattern_kernel(b, 0, NULL, 0, b->sbuf, seed ^ (o->fault && t == T_BW ? 0x5a5a5au : 0u),
                           b->n);
        ac->stream_sync(b->S);
    }
    EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
    bench_phase_set(v->name, t, b->n);
    double t0 = ex_now(), c0 = ex_thread_cpu_s();
    if (b->role >= 0)
        (t == T_LAT ? v->lat : v->bw)(b, count);
    /* CPU time of the loop, without the end-of-run drain (a spinning
     * synchronize would count the whole GPU time as CPU time) */
    double c1 = ex_thread_cpu_s();
    if (b->role >= 0)
        b->ac->stream_sync(b->S);
    double t1 = ex_now();
    *wall = t1 - t0;
    *cpu = c1 - c0;
    EX_MPI(MPI_Bcast(wall, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    EX_MPI(MPI_Bcast(cpu, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (b->role >= 0 && check) {
        if (t == T_LAT && b->role == 0)
            pattern_kernel(b, 1, b->rbuf, seed, NULL, 0, b->n);
        if (t == T_BW && b->role == 1)
            for (int j = 0; j < b->window; j++)
                pattern_kernel(b, j & 1, b->rbuf + (size_t)j * b->n, seed, NULL, 0, b->n);
        ac->stream_sync(b->S);
        ac->copy(&errs, b->errors, sizeof errs);
    }
    unsigned long long e = errs, tot = 0;
    EX_MPI(MPI_Allreduce(&e, &tot, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    return tot;
}

typedef struct {
    double med, mn, mx;
} stat3_t;

static stat3_t stats_of(double *v, int n)
{
    stat3_t s;
    ex_stats(v, n, &s.med, &s.mn, &s.mx);
    return s;
}

/* Counts per repetition for message size n. */
static int lat_iters(const opts_t *o, size_t n)
{
    long long by_budget = o->budget / (2 * (long long)n);
    long long it = by_budget < o->iters ? by_budget : o->iters;
    return (int)(it < 8 ? 8 : it);
}

static int bw_windows(const opts_t *o, size_t n)
{
    long long by_budget = o->budget / ((long long)n * o->window);
    long long cap = o->iters / o->window > 2 ? o->iters / o->window : 2;
    long long k = by_budget < cap ? by_budget : cap;
    return (int)(k < 2 ? 2 : k);
}

int main(int argc, char **argv)
{
    opts_t o;
    int rank, size;
    parse_opts(argc, argv, &o);
    if (o.timeout > 0) {
        bench_timeout_s = o.timeout;
        signal(SIGALRM, bench_alarm);
        alarm((unsigned)o.timeout);
    }
    ex_accel_preinit(o.backend);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2)
        ex_die("mpixacc_bench needs at least 2 ranks (ranks 0 and 1 take part)");

    char note[320];
    bench_t b = {0};
    int local = ex_local_rank(MPI_COMM_WORLD);
    b.ac = ex_accel_select(o.backend, local, note, sizeof note);
    b.rank = rank;
    b.role = rank < 2 ? rank : -1;
    b.window = o.window;
    b.ecomm = MPI_COMM_NULL;
    EX_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b.comm));
    b.S = b.ac->stream_create();
    b.errors = b.ac->alloc(sizeof(unsigned int), EX_MEM_DEVICE);
    b.req = calloc((size_t)o.window, sizeof *b.req);
    if (!b.req)
        ex_die("out of memory");
    size_t maxn = 1;
    for (int i = 0; i < o.nsizes; i++)
        if ((size_t)o.sizes[i] > maxn)
            maxn = (size_t)o.sizes[i];

    snprintf(bench_phase, sizeof bench_phase, "setup: NCCL");
    if (o.use[4])
        nccl_ok = ex_nccl_setup(b.ac->is_device, b.role, nccl_why, sizeof nccl_why);
    snprintf(bench_phase, sizeof bench_phase, "setup: MPICH enqueue");
    if (o.use[5])
        ex_enqueue_setup(b.ac->is_device, b.S, &b.ecomm, enq_why, sizeof enq_why);
    snprintf(bench_phase, sizeof bench_phase, "setup: floor");
    if (o.use[FLOOR_INDEX]) {
#ifdef EX_HAVE_CUDA
        int ok = 0;
        if (!b.ac->is_device)
            snprintf(floor_why, sizeof floor_why, "needs the CUDA backend");
        else if (rank == 0) {
            floor_tried = 1;
            ok =
                bench_floor_setup(maxn, floor_desc, sizeof floor_desc, floor_why, sizeof floor_why);
        }
        EX_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
        floor_ok = ok;
#else
        snprintf(floor_why, sizeof floor_why, "needs a CUDA build");
#endif
    }

    FILE *csv = NULL;
    if (rank == 0) {
        printf("mpixacc_bench: ranks 0 <-> 1 of %d; backend %s%s%s\n", size, b.ac->desc,
               note[0] ? "; " : "", note);
        if (o.fault)
            printf("FAULT INJECTION: bandwidth messages carry a wrong pattern (results must "
                   "FAIL)\n");
        printf("latency: ping-pong half-RTT (rank 0 wall time / 2 per round trip), up to %d "
               "round trips per repetition; bandwidth: windows of %d messages + 1-byte ack; "
               "%d repetitions after a warm-up; data check %s\n",
               o.iters, o.window, o.repeats, o.check ? "on" : "OFF");
        if (!b.ac->is_device)
            printf("host backend: staged and cuda-aware are plain MPI on host memory\n");
        for (int v = 0; v < NVARIANTS; v++) {
            char why[400];
            if (o.use[v] && !variants[v].available(&b, why, sizeof why))
                printf("variant %s skipped: %s\n", variants[v].name, why);
        }
        if (floor_ok)
            printf("floor: %s\n", floor_desc);
        printf("\n%-9s %-14s %9s %9s %9s %9s %9s %9s %8s %9s  %s\n", "size", "variant", "lat us",
               "min", "max", "GB/s", "min", "max", "lat it", "cpu us/it", "check");
        if (o.csv) {
            csv = fopen(o.csv, "w");
            if (!csv)
                ex_die("cannot open %s: %s", o.csv, strerror(errno));
            fprintf(csv, "bytes,variant,backend,lat_iters,bw_windows,window,repeats,"
                         "lat_us_med,lat_us_min,lat_us_max,bw_GBs_med,bw_GBs_min,bw_GBs_max,"
                         "cpu_us_per_iter,errors,check\n");
        }
        fflush(stdout);
    }

    int failures = 0;
    double *tl = calloc((size_t)o.repeats, sizeof *tl), *tb = calloc((size_t)o.repeats, sizeof *tb);
    double *cl = calloc((size_t)o.repeats, sizeof *cl);
    if (!tl || !tb || !cl)
        ex_die("out of memory");
    /* Buffers for the largest size, allocated once: freeing device memory
     * that a peer has mapped (CUDA IPC) makes UCX unmap it on the peer's
     * progress thread later, a device-synchronizing call that was seen to
     * stall behind a stream waiting on that thread (2 x H200). */
    size_t win_max = (size_t)o.window * maxn;
    if (b.role >= 0) {
        b.sbuf = b.ac->alloc(maxn, EX_MEM_DEVICE);
        b.rbuf = b.ac->alloc(win_max, EX_MEM_DEVICE);
        b.ack = b.ac->alloc(1, EX_MEM_DEVICE);
        if (b.ac->is_device) {
            b.hs = b.ac->alloc(win_max, EX_MEM_PINNED);
            b.hr = b.ac->alloc(win_max, EX_MEM_PINNED);
            b.hack = b.ac->alloc(1, EX_MEM_PINNED);
        }
    }
    for (int si = 0; si < o.nsizes; si++) {
        b.n = (size_t)o.sizes[si];
        int li = lat_iters(&o, b.n), bk = bw_windows(&o, b.n);
        for (int vi = 0; vi < NVARIANTS; vi++) {
            const variant_t *v = &variants[vi];
            char why[400];
            if (!o.use[vi] || !v->available(&b, why, sizeof why))
                continue;
            stat3_t L = {0, 0, 0}, W = {0, 0, 0}, C = {0, 0, 0};
            unsigned long long errors = 0;
            double w, cp;
            if (vi == FLOOR_INDEX) {
#ifdef EX_HAVE_CUDA
                int bad = 0;
                if (rank == 0) {
                    unsigned long long e = 0;
                    double x;
                    bench_phase_set("floor", 0, b.n);
                    for (int r = -1; r < o.repeats && !bad; r++) {
                        uint32_t sd = seed_of(si, vi, T_LAT, r + 1);
                        if (o.tests[T_LAT]) {
                            bad |= bench_floor_latency(b.n, li, sd, &x, &e, why, sizeof why);
                            errors += o.check ? e : 0;
                            if (r >= 0)
                                tl[r] = x;
                        }
                        if (o.tests[T_BW] && !bad) {
                            bad |= bench_floor_bandwidth(b.n, bk * o.window, sd + 1, &x, &e, why,
                                                         sizeof why);
                            errors += o.check ? e : 0;
                            if (r >= 0)
                                tb[r] = x;
                        }
                        if (r >= 0)
                            cl[r] = 0;
                    }
                    if (bad)
                        ex_die("floor: %s", why);
                }
                EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
#endif
            } else {
                for (int t = 0; t < 2; t++) {
                    if (!o.tests[t])
                        continue;
                    int count = t == T_LAT ? li : bk;
                    for (int r = -1; r < o.repeats; r++) { /* r = -1: warm-up */
                        errors += one_rep(&b, v, (test_t)t, count, seed_of(si, vi, t, r + 1), &o,
                                          &w, &cp);
                        if (r < 0)
                            continue;
                        if (t == T_LAT) {
                            tl[r] = w / (2.0 * count) * 1e6;
                            cl[r] = cp / count * 1e6;
                        } else {
                            tb[r] = (double)b.n * o.window * count / w / 1e9;
                        }
                    }
                }
            }
            if (o.tests[T_LAT]) {
                L = stats_of(tl, o.repeats);
                C = stats_of(cl, o.repeats);
            }
            if (o.tests[T_BW])
                W = stats_of(tb, o.repeats);
            if (rank == 0) {
                char lab[32];
                ex_size_label((long long)b.n, lab, sizeof lab);
                const char *chk = !o.check ? "unchecked" : errors ? "FAIL" : "ok";
                printf("%-9s %-14s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8d %9.2f  %s", lab, v->name,
                       L.med, L.mn, L.mx, W.med, W.mn, W.mx, li, C.med, chk);
                if (errors)
                    printf(" (%llu wrong bytes received)", errors);
                printf("\n");
                fflush(stdout);
                if (csv)
                    fprintf(csv,
                            "%zu,%s,%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%llu,%s\n",
                            b.n, v->name, b.ac->name, o.tests[T_LAT] ? li : 0,
                            o.tests[T_BW] ? bk : 0, o.window, o.repeats, L.med, L.mn, L.mx, W.med,
                            W.mn, W.mx, C.med, errors, chk);
            }
            if (errors)
                failures++;
        }
    }
    if (b.role >= 0) {
        b.ac->free(b.sbuf, EX_MEM_DEVICE);
        b.ac->free(b.rbuf, EX_MEM_DEVICE);
        b.ac->free(b.ack, EX_MEM_DEVICE);
        if (b.ac->is_device) {
            b.ac->free(b.hs, EX_MEM_PINNED);
            b.ac->free(b.hr, EX_MEM_PINNED);
            b.ac->free(b.hack, EX_MEM_PINNED);
        }
    }
    if (rank == 0) {
        printf("%s\n", failures ? "RESULT: FAIL" : "RESULT: OK");
        if (csv)
            fclose(csv);
    }
#ifdef EX_HAVE_CUDA
    if (floor_tried)
        bench_floor_teardown();
#endif
    ex_enqueue_teardown(&b.ecomm);
    if (nccl_ok)
        ex_nccl_teardown();
    free(tl);
    free(tb);
    free(cl);
    free(b.req);
    b.ac->free(b.errors, EX_MEM_DEVICE);
    b.ac->stream_destroy(b.S);
    b.ac->finalize();
    MPI_Comm_free(&b.comm);
    MPI_Finalize();
    return failures ? 1 : 0;
}
