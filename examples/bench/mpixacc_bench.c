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
 *   acc-sx         acc on a communicator with mpi_assert_no_any_source and
 *                  _tag: the library's stream-executed path (MPIX_ACC_SX) may
 *                  carry the messages between processes of a node
 *   acc-sx-sync    acc-sx with a stream synchronize per latency iteration:
 *                  each send finds its slot free when it is called
 *   ki             kernel-initiated: a partitioned request pair
 *                  (MPIX_Acc_Psend_init, mpix_acc_device.cuh); latency: ONE
 *                  kernel per rank runs every round trip of the repetition
 *                  inside one epoch (partition i = round trip i), no host
 *                  call per message; bandwidth: an epoch per window, a
 *                  block per message (bench_ki.cu; device buffers)
 *   ki-value       ki with the message passed as a value (4, 8, 12 or 16
 *                  bytes; other sizes have no row): mpix_acc_pready_value and
 *                  mpix_acc_parrived_wait_value, one thread per rank
 *   acc-graph      latency only: G round trips of acc (G = the largest
 *                  divisor of the iteration count up to 10) captured into a
 *                  CUDA graph once per repetition and the graph launched
 *                  iterations/G times (the library's fire and wait nodes;
 *                  CUDA backend)
 *   nccl-graph     the same with nccl's round trips captured (the anchor
 *                  for acc-graph)
 *   mpich-enqueue  MPICH's MPIX_Send_enqueue & co on its stream communicator
 *                  (MPICH >= 4.1 with CUDA; run with MPIR_CVAR_CH4_RESERVE_VCIS=1)
 *   floor          rank 0 alone: cudaMemcpyPeerAsync between its GPU and the
 *                  next one with a stream-to-stream flag round trip (latency)
 *                  or back to back (bandwidth), timed on the GPU; only when
 *                  named (-v floor or all) until it has run on a GPU (its
 *                  first run deadlocked in set-up on a flag-write bug, fixed)
 *   floor-spin     beside floor (named with it, or alone), latency only: the
 *                  same round trip with kernels storing payload + a release
 *                  flag into the other GPU's memory and a spinning 1-thread
 *                  kernel as the receive
 *   floor-fused    as floor-spin with one kernel per hop that spins on the
 *                  incoming flag and then sends the reply itself
 *
 * Latency: ping-pong, rank 0 sends and gets the message echoed by rank 1;
 * half-RTT = rank 0's wall time of the repetition (from a barrier to the end
 * of its last synchronize) / (2 x iterations). Bandwidth: rank 0 sends
 * windows of -W messages, rank 1 receives them into distinct buffers and
 * answers each window with a 1-byte ack; MB/s = 10^6 bytes / wall second.
 * Median, min and max over -r repetitions after -w warm-up ones (the
 * conventions of the OSU micro-benchmarks and nccl-tests: -w warm-up, -W
 * window, -d buffer placement per side, '#' before every line that is not
 * a result row). CPU:
 * the calling thread's CPU time per latency iteration on rank 0, without
 * the one synchronize that drains the stream at the end of a repetition
 * (a spinning cudaStreamSynchronize would count the GPU's time as CPU).
 *
 * Allreduce (-t allreduce, or -t all): ranks 0 and 1 sum size/4 MPI_INT
 * elements from a send into a receive buffer, the latency test's
 * iteration count back to back: acc / acc-sx MPIX_Acc_Allreduce on the
 * stream (enqueued, one synchronize at the end), staged (copy out,
 * synchronize, host MPI_Allreduce, copy back: every iteration),
 * cuda-aware (MPI_Allreduce on device pointers), nccl (ncclAllReduce on
 * the stream). Rows "allreduce-<variant>": us per Allreduce (wall /
 * iterations) and bus bandwidth (for two processes the algorithm
 * bandwidth, size / time); every element of the last result checked on
 * the host.
 *
 * Check (on unless --no-check): every repetition sends a new pattern; after
 * it, the receiver validates the last message (echo on rank 0, every
 * buffer of the last window on rank 1) with a kernel on the stream. A wrong
 * byte makes the row FAIL and the exit status 1.
 *
 * Buffers (-d, CUDA backend): each rank's send, receive and ack buffers are
 * device (D), managed (M), pageable host (H, malloc, as OSU's H) or pinned
 * host (P, cudaMallocHost) memory; "-d DH" puts rank 0's in device memory
 * and rank 1's in pageable host memory; OSU's "-d cuda D H" is accepted too.
 * Fill and check run as kernels on the stream, or on the host (after a
 * synchronize) for pageable buffers, which no kernel may touch. nccl needs
 * device buffers on both sides, floor device buffers on rank 0.
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
#ifdef EX_HAVE_CUDA
#include "bench_ki.h"
#endif

#include <mpix_acc.h>

#include <dlfcn.h>
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
    int rank, role;  /* role 0/1: ranks 0 and 1; -1: idle */
    MPI_Comm comm;   /* plain duplicate of MPI_COMM_WORLD */
    MPI_Comm scomm;  /* duplicate with mpi_assert_no_any_source/_tag (acc-sx) */
    MPI_Comm ecomm;  /* MPICH stream communicator (mpich-enqueue), or NULL */
    MPI_Comm pcomm;  /* ranks 0 and 1 (allreduce), MPI_COMM_NULL elsewhere */
    MPI_Comm pscomm; /* the same with the no-wildcard assertions (acc-sx) */
    ex_stream_t S;
    size_t n;
    int window;
    unsigned char *sbuf, *rbuf, *ack; /* backend memory; rbuf holds a window */
    ex_mem_t place[2];                /* -d: buffer kind of ranks 0 and 1 */
    ex_mem_t mine;                    /* this rank's (place[role]) */
    unsigned char *hs, *hr, *hack;    /* pinned staging (device backend only) */
    unsigned int *errors;             /* backend memory */
    pkp_args_t args[2];
    MPI_Request *req;
} bench_t;

typedef enum { T_LAT = 0, T_BW = 1, T_AR = 2 } test_t;

/* ------------------------------------------------------------------ */
/* watchdog: --timeout S ends a stuck run naming what it was doing      */

static char bench_phase[160] = "setup";
static int bench_timeout_s;

static void bench_phase_set(const char *variant, int test, size_t n)
{
    snprintf(bench_phase, sizeof bench_phase, "%s %s %zu B", variant,
             test == 0   ? "latency"
             : test == 1 ? "bandwidth"
                         : "allreduce",
             n);
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
    if (b->ac->is_device && b->mine == EX_MEM_PAGEABLE) {
        pkp_host_fn(a); /* no kernel may touch pageable memory; the stream is idle */
        return;
    }
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
    void (*ar)(bench_t *b, int iters); /* allreduce (-t allreduce), NULL: none */
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
/* acc-sx: acc on a communicator with the MPI-4 no-wildcard assertions,
 * where the library's stream-executed path may carry messages between
 * processes of a node (MPIX_ACC_SX) */
static void run_accsx_lat(bench_t *b, int iters)
{
    MPI_Comm c = b->comm;
    b->comm = b->scomm;
    acc_lat(b, iters, 0);
    b->comm = c;
}
static void run_accsxsync_lat(bench_t *b, int iters)
{
    MPI_Comm c = b->comm;
    b->comm = b->scomm;
    acc_lat(b, iters, 1);
    b->comm = c;
}
static void run_accsx_bw(bench_t *b, int windows)
{
    MPI_Comm c = b->comm;
    b->comm = b->scomm;
    acc_bw(b, windows, 0);
    b->comm = c;
}

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
static int avail_cuda_aware(const bench_t *b, char *why, size_t len)
{
    if (!b->ac->is_device)
        return 1; /* host memory: plain MPI */
    int s = ex_mpi_cuda_support();
    if (s == 1)
        return 1;
    snprintf(why, len, "%s", ex_mpi_cuda_why(s));
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
    if (nccl_ok && b->ac->is_device &&
        (b->place[0] != EX_MEM_DEVICE || b->place[1] != EX_MEM_DEVICE)) {
        snprintf(why, len, "needs device buffers on both sides (-d DD)");
        return 0;
    }
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

/* ki: kernel-initiated partitioned requests (bench_ki.cu) */
#ifdef EX_HAVE_CUDA
static int ki_used;
static int avail_ki(const bench_t *b, char *why, size_t len)
{
    if (!b->ac->is_device || b->place[0] != EX_MEM_DEVICE || b->place[1] != EX_MEM_DEVICE) {
        snprintf(why, len, "needs device buffers on both sides (-d DD)");
        return 0;
    }
    return 1;
}

static void ki_fail(const char *what, const char *why)
{
    fprintf(stderr, "[mpixacc_bench] ki %s failed: %s\n", what, why);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void run_ki_lat(bench_t *b, int iters)
{
    char why[256];
    ki_used = 1;
    if (bench_ki_latency(b->comm, b->role, b->S, b->sbuf, b->rbuf, b->n, iters, why, sizeof why) !=
        0)
        ki_fail("latency", why);
}

static void run_ki_bw(bench_t *b, int windows)
{
    char why[256];
    ki_used = 1;
    if (bench_ki_bandwidth(b->comm, b->role, b->S, b->sbuf, b->rbuf, b->n, b->window, windows, why,
                           sizeof why) != 0)
        ki_fail("bandwidth", why);
}

/* ki-value: sizes of 4, 8, 12 and 16 bytes only (others: no row) */
static int avail_ki_value(const bench_t *b, char *why, size_t len)
{
    if (!avail_ki(b, why, len))
        return 0;
    if (b->n && !bench_ki_value_ok(b->n)) {
        snprintf(why, len, "messages of 4, 8, 12 or 16 bytes only");
        return 0;
    }
    return 1;
}

static void run_ki_value_lat(bench_t *b, int iters)
{
    char why[256];
    ki_used = 1;
    if (bench_ki_latency_value(b->comm, b->role, b->S, b->sbuf, b->rbuf, b->n, iters, why,
                               sizeof why) != 0)
        ki_fail("value latency", why);
}

static void run_ki_value_bw(bench_t *b, int windows)
{
    char why[256];
    ki_used = 1;
    if (bench_ki_bandwidth_value(b->comm, b->role, b->S, b->sbuf, b->rbuf, b->n, b->window, windows,
                                 why, sizeof why) != 0)
        ki_fail("value bandwidth", why);
}

/* acc-graph, nccl-graph: g round trips of the latency loop captured once
 * (in the timed region: its host cost is spread over the iterations) and
 * the graph launched iters / g times; g divides iters, so no plain
 * operation runs beside a launch on the graph's tag */
static void graph_lat(bench_t *b, int iters, void (*body)(bench_t *, int))
{
    char why[256];
    void *exec = NULL;
    int g = 1;
    for (int d = 10; d >= 1; d--)
        if (iters % d == 0) {
            g = d;
            break;
        }
    if (iters <= 0)
        return;
    if (ex_cuda_graph_begin(b->S, why, sizeof why) != 0)
        ki_fail("graph capture", why);
    body(b, g);
    if (ex_cuda_graph_end(b->S, &exec, why, sizeof why) != 0)
        ki_fail("graph capture", why);
    for (int k = 0; k < iters; k += g)
        if (ex_cuda_graph_launch(exec, b->S, why, sizeof why) != 0)
            ki_fail("graph launch", why);
    ex_cuda_graph_free(exec);
}

static int avail_acc_graph(const bench_t *b, char *why, size_t len)
{
    if (!b->ac->is_device) {
        snprintf(why, len, "needs the CUDA backend (CUDA graphs)");
        return 0;
    }
    return 1;
}
static int avail_nccl(const bench_t *b, char *why, size_t len);
static int avail_nccl_graph(const bench_t *b, char *why, size_t len)
{
    return avail_acc_graph(b, why, len) && avail_nccl(b, why, len);
}
static void run_nccl_lat(bench_t *b, int iters);
static void run_accgraph_lat(bench_t *b, int iters) { graph_lat(b, iters, run_acc_lat); }
static void run_ncclgraph_lat(bench_t *b, int iters) { graph_lat(b, iters, run_nccl_lat); }
#else
static int avail_ki(const bench_t *b, char *why, size_t len)
{
    (void)b;
    snprintf(why, len, "needs a CUDA build");
    return 0;
}
#define avail_acc_graph avail_ki
#define avail_nccl_graph avail_ki
#define run_accgraph_lat NULL
#define run_ncclgraph_lat NULL
#define run_ki_lat NULL
#define run_ki_bw NULL
#define avail_ki_value avail_ki
#define run_ki_value_lat NULL
#define run_ki_value_bw NULL
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

/* floor-spin, floor-fused (bench.h's kernel floors, mode 0 and 1): rank 0's
 * answer, broadcast after set-up; a mode that fails in a run is off for the
 * rest of it. Latency only. kfloor_text: the description, or why not. */
static char kfloor_text[2][320];
static int kfloor_ok[2], kfloor_lat;

static int avail_kfloor(int mode, char *why, size_t len)
{
    if (!floor_ok)
        snprintf(why, len, "%s", floor_why);
    else if (!kfloor_lat)
        snprintf(why, len, "measures latency only (-t lat)");
    else if (!kfloor_ok[mode])
        snprintf(why, len, "%s", kfloor_text[mode]);
    return floor_ok && kfloor_lat && kfloor_ok[mode];
}

static int avail_floor_spin(const bench_t *b, char *why, size_t len)
{
    (void)b;
    return avail_kfloor(0, why, len);
}

static int avail_floor_fused(const bench_t *b, char *why, size_t len)
{
    (void)b;
    return avail_kfloor(1, why, len);
}

/* allreduce (-t allreduce): ranks 0 and 1, n / 4 MPI_INT elements summed
 * from sbuf into rbuf, iterations back to back like the latency test (all
 * enqueued where the variant enqueues; one synchronize at the end). */
static int ar_count(const bench_t *b) { return (int)(b->n / 4); }

static void ar_acc(bench_t *b, int iters, MPI_Comm c)
{
    for (int i = 0; i < iters; i++)
        EX_MPI(MPIX_Acc_Allreduce(b->S, b->sbuf, b->rbuf, ar_count(b), MPI_INT, MPI_SUM, c));
}
static void run_acc_ar(bench_t *b, int iters) { ar_acc(b, iters, b->pcomm); }
static void run_accsx_ar(bench_t *b, int iters) { ar_acc(b, iters, b->pscomm); }

/* staged: copy out, synchronize, host MPI_Allreduce, copy back -- each
 * iteration waits for the stream */
static void run_staged_ar(bench_t *b, int iters)
{
    const ex_accel_t *ac = b->ac;
    int dev = ac->is_device;
    size_t bytes = (size_t)ar_count(b) * 4;
    for (int i = 0; i < iters; i++) {
        if (dev)
            ac->copy_async(b->S, b->hs, b->sbuf, bytes);
        ac->stream_sync(b->S);
        EX_MPI(MPI_Allreduce(dev ? b->hs : b->sbuf, dev ? b->hr : b->rbuf, ar_count(b), MPI_INT,
                             MPI_SUM, b->pcomm));
        if (dev)
            ac->copy_async(b->S, b->rbuf, b->hr, bytes);
    }
}

static void run_cuda_aware_ar(bench_t *b, int iters)
{
    b->ac->stream_sync(b->S);
    for (int i = 0; i < iters; i++)
        EX_MPI(MPI_Allreduce(b->sbuf, b->rbuf, ar_count(b), MPI_INT, MPI_SUM, b->pcomm));
}

static void run_nccl_ar(bench_t *b, int iters)
{
    for (int i = 0; i < iters; i++)
        ex_nccl_allreduce_i32(b->sbuf, b->rbuf, (size_t)ar_count(b), b->S);
}

static const variant_t variants[] = {
    {"acc", avail_always, run_acc_lat, run_acc_bw, run_acc_ar},
    {"acc-sync", avail_always, run_accsync_lat, run_accsync_bw, NULL},
    {"acc-sx", avail_always, run_accsx_lat, run_accsx_bw, run_accsx_ar},
    {"acc-sx-sync", avail_always, run_accsxsync_lat, run_accsx_bw, NULL},
    {"staged", avail_always, run_staged_lat, run_staged_bw, run_staged_ar},
    {"cuda-aware", avail_cuda_aware, run_cuda_aware_lat, run_cuda_aware_bw, run_cuda_aware_ar},
    {"nccl", avail_nccl, run_nccl_lat, run_nccl_bw, run_nccl_ar},
    {"ki", avail_ki, run_ki_lat, run_ki_bw, NULL},
    {"ki-value", avail_ki_value, run_ki_value_lat, run_ki_value_bw, NULL},
    {"acc-graph", avail_acc_graph, run_accgraph_lat, NULL, NULL},
    {"nccl-graph", avail_nccl_graph, run_ncclgraph_lat, NULL, NULL},
    {"mpich-enqueue", avail_enqueue, run_enqueue_lat, run_enqueue_bw, NULL},
    {"floor", avail_floor, NULL, NULL, NULL},
    {"floor-spin", avail_floor_spin, NULL, NULL, NULL},
    {"floor-fused", avail_floor_fused, NULL, NULL, NULL},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))
/* a variant's index in variants[] by name (a name not there: abort) */
static int variant_index(const char *name)
{
    for (int v = 0; v < NVARIANTS; v++)
        if (strcmp(variants[v].name, name) == 0)
            return v;
    ex_die("mpixacc_bench: no variant %s", name);
    return -1;
}
#define FLOOR_INDEX (NVARIANTS - 3)
#define FLOOR_SPIN_INDEX (NVARIANTS - 2)  /* kernel floor mode 0 */
#define FLOOR_FUSED_INDEX (NVARIANTS - 1) /* mode 1 */
#define IS_FLOOR(v) ((v) >= FLOOR_INDEX)

/* ------------------------------------------------------------------ */
/* options                                                             */

typedef struct {
    int use[NVARIANTS];
    int tests[3];
    long long sizes[MAX_SIZES];
    int nsizes;
    int iters, repeats, warmup, window, check, fault, timeout;
    long long budget;
    const char *backend, *csv;
    ex_mem_t place[2]; /* -d: ranks 0 and 1 */
    char place_label[3];
} opts_t;

/* -d letters (OSU's D, M, H, plus P for pinned host memory) */
static int place_of(char c, ex_mem_t *out)
{
    switch (c) {
    case 'D':
    case 'd':
        *out = EX_MEM_DEVICE;
        return 1;
    case 'M':
    case 'm':
        *out = EX_MEM_MANAGED;
        return 1;
    case 'H':
    case 'h':
        *out = EX_MEM_PAGEABLE;
        return 1;
    case 'P':
    case 'p':
        *out = EX_MEM_PINNED;
        return 1;
    default:
        return 0;
    }
}

static const char *place_name(ex_mem_t m)
{
    switch (m) {
    case EX_MEM_DEVICE:
        return "device";
    case EX_MEM_MANAGED:
        return "managed";
    case EX_MEM_PAGEABLE:
        return "pageable host";
    case EX_MEM_PINNED:
        return "pinned host";
    }
    return "?";
}

/* "DH", "D,H", "D H" (two letters, ranks 0 and 1) */
static int parse_place(const char *s, opts_t *o)
{
    char l[2];
    int n = 0;
    for (; *s != '\0'; s++) {
        if (*s == ',' || *s == ' ')
            continue;
        if (n == 2 || !place_of(*s, &o->place[n]))
            return 0;
        l[n++] = (char)(*s & ~0x20); /* upper case */
    }
    if (n != 2)
        return 0;
    o->place_label[0] = l[0], o->place_label[1] = l[1], o->place_label[2] = '\0';
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mpiexec -n 2 mpixacc_bench [options]\n"
               "  -b, --min B          smallest message (default 8; suffixes K, M, G)\n"
               "  -e, --max B          largest message (default 64M)\n"
               "  -f, --factor F       size step factor (default 4)\n"
               "      --sizes LIST     explicit sizes instead, e.g. 8,64K,1M,64M\n"
               "  -v, --variant LIST   "
               "acc,acc-sync,staged,cuda-aware,nccl,ki,ki-value,mpich-enqueue,floor,\n"
               "                       floor-spin,floor-fused or all (default: all but the\n"
               "                       floors, not yet run to the end on a GPU; floor brings\n"
               "                       floor-spin and floor-fused, latency only, with it)\n"
               "  -t, --test LIST      lat,bw,allreduce or all (default lat,bw); allreduce:\n"
               "                       MPI_INT sum of size/4 elements between ranks 0 and 1\n"
               "                       (acc, acc-sx, staged, cuda-aware, nccl), rows\n"
               "                       'allreduce-<variant>': us per Allreduce, bus MB/s\n"
               "  -i, --iters N        latency round trips per repetition (default 1000; fewer\n"
               "                       for large messages, see --budget)\n"
               "  -r, --repeats R      timed repetitions, median/min/max over them (default 7)\n"
               "  -w, --warmup N       untimed warm-up repetitions before them (default 1)\n"
               "  -W, --window W       messages in flight per bandwidth window (default 8)\n"
               "  -d, --buffers XY     buffer placement of rank 0 (X) and rank 1 (Y), OSU style:\n"
               "                       D device, M managed, H pageable host (malloc), P pinned\n"
               "                       host (cudaMallocHost); e.g. -d DD (default), -d HH, -d DM;\n"
               "                       OSU's form -d cuda D H works too (and selects --backend\n"
               "                       cuda). CUDA backend only: host streams use host memory\n"
               "                       (floor: device memory of its own)\n"
               "      --budget B       bytes moved per repetition at most (default 1G): large\n"
               "                       messages get fewer iterations (at least 8 / 2 windows)\n"
               "      --backend B      auto, host or cuda (default auto)\n"
               "      --csv FILE       also write the results as CSV\n"
               "      --timeout S      end the program (exit 124) when it runs longer than S\n"
               "                       seconds, naming what it was doing (default 0: none)\n"
               "      --check/--no-check   validate received data (default on)\n"
               "      --inject-fault   testing: in bandwidth runs rank 0 sends a pattern the\n"
               "                       receiver does not expect (rows must FAIL, exit status 1)\n"
               "Output: lines starting with '#' describe the run; the others are result rows:\n"
               "size, variant, half-RTT latency in us (median, min, max), bandwidth in MB/s\n"
               "(10^6 bytes per second; median, min, max), latency iterations, CPU us per\n"
               "iteration, data check.\n");
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"min", required_argument, 0, 'b'},     {"max", required_argument, 0, 'e'},
        {"factor", required_argument, 0, 'f'},  {"sizes", required_argument, 0, 's'},
        {"variant", required_argument, 0, 'v'}, {"test", required_argument, 0, 't'},
        {"iters", required_argument, 0, 'i'},   {"repeats", required_argument, 0, 'r'},
        {"window", required_argument, 0, 'W'},  {"budget", required_argument, 0, 'B'},
        {"warmup", required_argument, 0, 'w'},  {"buffers", required_argument, 0, 'd'},
        {"backend", required_argument, 0, 'k'}, {"csv", required_argument, 0, 'c'},
        {"check", no_argument, 0, 'C'},         {"no-check", no_argument, 0, 'N'},
        {"inject-fault", no_argument, 0, 'F'},  {"timeout", required_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *vnames[NVARIANTS], *tnames[3] = {"lat", "bw", "allreduce"};
    for (int v = 0; v < NVARIANTS; v++)
        vnames[v] = variants[v].name;
    long long bmin = 8, bmax = 64LL << 20, factor = 4;
    int explicit_sizes = 0;
    memset(o, 0, sizeof *o);
    for (int v = 0; v < NVARIANTS; v++) /* the floors only when asked for (see usage) */
        o->use[v] = !IS_FLOOR(v);
    o->tests[T_LAT] = o->tests[T_BW] = 1;
    o->iters = 1000, o->repeats = 7, o->warmup = 1, o->window = 8, o->check = 1;
    o->place[0] = o->place[1] = EX_MEM_DEVICE;
    strcpy(o->place_label, "DD");
    o->budget = 1LL << 30;
    o->backend = "auto";
    int c;
    while ((c = ex_getopt(argc, argv, "b:e:f:v:t:i:r:w:W:d:h", lo, usage)) != -1) {
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
            o->nsizes = ex_opt_sizes(optarg, o->sizes, MAX_SIZES);
            explicit_sizes = 1;
            break;
        case 'v':
            ex_parse_name_list(optarg, vnames, NVARIANTS, o->use, "variant");
            break;
        case 't':
            ex_parse_name_list(optarg, tnames, 3, o->tests, "test");
            break;
        case 'i':
            o->iters = (int)ex_parse_long("--iters", optarg, 1, 100000000);
            break;
        case 'r':
            o->repeats = (int)ex_parse_long("--repeats", optarg, 1, 100000);
            break;
        case 'w':
            o->warmup = (int)ex_parse_long("--warmup", optarg, 0, 100000);
            break;
        case 'W':
            o->window = (int)ex_parse_long("--window", optarg, 1, 1024);
            break;
        case 'd':
            if (strcmp(optarg, "cuda") == 0) { /* OSU: -d cuda X Y, the letters next */
                char two[8];
                if (optind + 2 > argc || strlen(argv[optind]) != 1 ||
                    strlen(argv[optind + 1]) != 1) {
                    fprintf(stderr, "-d cuda needs two placements, e.g. -d cuda D D\n");
                    exit(2);
                }
                snprintf(two, sizeof two, "%s%s", argv[optind], argv[optind + 1]);
                if (!parse_place(two, o)) {
                    fprintf(stderr, "invalid placements '%s %s': D, M, H or P each\n", argv[optind],
                            argv[optind + 1]);
                    exit(2);
                }
                optind += 2;
                o->backend = "cuda";
            } else if (!parse_place(optarg, o)) {
                fprintf(stderr, "invalid --buffers '%s': two of D, M, H, P (e.g. DD, HH, DM)\n",
                        optarg);
                exit(2);
            }
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
        default:
            ex_usage_exit(usage, 2);
        }
    }
    if (!explicit_sizes) {
        if (bmin > bmax) {
            fprintf(stderr, "--min %lld > --max %lld\n", bmin, bmax);
            exit(2);
        }
        o->nsizes = ex_size_sweep(bmin, bmax, factor, o->sizes, MAX_SIZES);
    }
    ex_check_message_sizes(o->sizes, o->nsizes);
    if (o->use[FLOOR_INDEX]) /* every floor latency with the kernel floors beside it */
        o->use[FLOOR_SPIN_INDEX] = o->use[FLOOR_FUSED_INDEX] = 1;
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
/* An element of rank `role`'s Allreduce input (the sum of two fits an int). */
static int ar_value(uint32_t seed, size_t i, int role)
{
    return (int)((seed + (uint32_t)i * 2654435761u + (uint32_t)role * 40503u) & 0x3fffffffu);
}

/* One repetition of a variant's Allreduce (ranks 0 and 1): inputs and a
 * poisoned result buffer copied in, barrier, run, check every element on
 * the host. */
static unsigned long long ar_rep(bench_t *b, const variant_t *v, int iters, uint32_t seed,
                                 const opts_t *o, double *wall, double *cpu)
{
    const ex_accel_t *ac = b->ac;
    size_t cnt = (size_t)ar_count(b), bytes = cnt * 4;
    int *h = NULL;
    if (b->role >= 0) {
        h = malloc(bytes ? bytes : 4);
        if (!h)
            ex_die("out of memory");
        for (size_t i = 0; i < cnt; i++)
            h[i] = ar_value(seed, i, b->role);
        ac->copy(b->sbuf, h, bytes);
        memset(h, 0xff, bytes);
        ac->copy(b->rbuf, h, bytes);
        ac->stream_sync(b->S);
    }
    EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
    bench_phase_set(v->name, T_AR, b->n);
    double t0 = ex_now(), c0 = ex_thread_cpu_s();
    if (b->role >= 0)
        v->ar(b, iters);
    double c1 = ex_thread_cpu_s();
    if (b->role >= 0)
        ac->stream_sync(b->S);
    double t1 = ex_now();
    *wall = t1 - t0;
    *cpu = c1 - c0;
    EX_MPI(MPI_Bcast(wall, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    EX_MPI(MPI_Bcast(cpu, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    unsigned long long e = 0, tot = 0;
    if (b->role >= 0 && o->check) {
        ac->copy(h, b->rbuf, bytes);
        for (size_t i = 0; i < cnt; i++)
            if (h[i] != ar_value(seed, i, 0) + ar_value(seed, i, 1))
                e++;
    }
    free(h);
    EX_MPI(MPI_Allreduce(&e, &tot, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    return tot;
}

static unsigned long long one_rep(bench_t *b, const variant_t *v, test_t t, int count,
                                  uint32_t seed, const opts_t *o, double *wall, double *cpu)
{
    if (t == T_AR)
        return ar_rep(b, v, count, seed, o, wall, cpu);
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
    b.place[0] = o.place[0];
    b.place[1] = o.place[1];
    b.mine = b.ac->is_device && b.role >= 0 ? o.place[b.role] : EX_MEM_DEVICE;
    b.ecomm = MPI_COMM_NULL;
    EX_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b.comm));
    ex_comm_dup_no_wildcards(MPI_COMM_WORLD, &b.scomm);
    EX_MPI(MPI_Comm_split(MPI_COMM_WORLD, b.role >= 0 ? 0 : MPI_UNDEFINED, rank, &b.pcomm));
    b.pscomm = MPI_COMM_NULL;
    if (b.pcomm != MPI_COMM_NULL)
        ex_comm_dup_no_wildcards(b.pcomm, &b.pscomm);
    b.S = b.ac->stream_create();
    /* pinned: written by the check kernels and by the host check of
     * pageable buffers alike */
    b.errors = b.ac->alloc(sizeof(unsigned int), EX_MEM_PINNED);
    b.req = calloc((size_t)o.window, sizeof *b.req);
    if (!b.req)
        ex_die("out of memory");
    size_t maxn = 1;
    for (int i = 0; i < o.nsizes; i++)
        if ((size_t)o.sizes[i] > maxn)
            maxn = (size_t)o.sizes[i];

    snprintf(bench_phase, sizeof bench_phase, "setup: NCCL");
    if (o.use[variant_index("nccl")] || o.use[variant_index("nccl-graph")])
        nccl_ok = ex_nccl_setup(b.ac->is_device, b.role, nccl_why, sizeof nccl_why);
    snprintf(bench_phase, sizeof bench_phase, "setup: MPICH enqueue");
    if (o.use[variant_index("mpich-enqueue")])
        ex_enqueue_setup(b.ac->is_device, b.S, &b.ecomm, enq_why, sizeof enq_why);
    snprintf(bench_phase, sizeof bench_phase, "setup: floor");
    kfloor_lat = o.tests[T_LAT];
    if (o.use[FLOOR_INDEX] || o.use[FLOOR_SPIN_INDEX] || o.use[FLOOR_FUSED_INDEX]) {
#ifdef EX_HAVE_CUDA
        int ok[3] = {0, 0, 0}; /* floor, floor-spin, floor-fused */
        if (!b.ac->is_device)
            snprintf(floor_why, sizeof floor_why, "needs the CUDA backend");
        else if (rank == 0) {
            floor_tried = 1;
            ok[0] =
                bench_floor_setup(maxn, floor_desc, sizeof floor_desc, floor_why, sizeof floor_why);
            for (int m = 0; m < 2 && ok[0]; m++)
                ok[1 + m] = bench_floor_kernel_available(m, kfloor_text[m], sizeof kfloor_text[m]);
        }
        EX_MPI(MPI_Bcast(ok, 3, MPI_INT, 0, MPI_COMM_WORLD));
        floor_ok = ok[0];
        kfloor_ok[0] = ok[1];
        kfloor_ok[1] = ok[2];
#else
        snprintf(floor_why, sizeof floor_why, "needs a CUDA build");
#endif
    }

    FILE *csv = NULL;
    if (rank == 0) {
        printf("# mpixacc_bench: ranks 0 <-> 1 of %d; backend %s%s%s\n", size, b.ac->desc,
               note[0] ? "; " : "", note);
        {
            /* versions, for the plots (scripts/bench-plot.py reads this line) */
            char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "?";
            int len = 0;
            MPI_Get_library_version(mpi, &len);
            mpi[strcspn(mpi, "\n")] = '\0';
            for (char *t = mpi; *t; t++)
                if (*t == '\t')
                    *t = ' ';
            const char *(*ucx_version)(void) =
                (const char *(*)(void))dlsym(RTLD_DEFAULT, "ucp_get_version_string");
            printf("# versions: mpix-acc %d.%d.%d; %s; UCX %s\n", MPIX_ACC_VERSION_MAJOR,
                   MPIX_ACC_VERSION_MINOR, MPIX_ACC_VERSION_PATCH, mpi,
                   ucx_version ? ucx_version() : "?");
        }
        if (o.fault)
            printf("# FAULT INJECTION: bandwidth messages carry a wrong pattern (results must "
                   "FAIL)\n");
        printf("# latency: ping-pong half-RTT (rank 0 wall time / 2 per round trip), up to %d "
               "round trips per repetition; bandwidth: windows of %d messages + 1-byte ack, "
               "MB/s = 10^6 B/s; %d repetitions after %d warm-up; data check %s\n",
               o.iters, o.window, o.repeats, o.warmup, o.check ? "on" : "OFF");
        {
            int cs = ex_mpi_cuda_support();
            printf("# MPI library CUDA support: %s\n",
                   cs == 1   ? "yes (device buffers straight to MPI in cuda-aware)"
                   : cs == 0 ? "no"
                             : "cannot be asked");
        }
        if (b.ac->is_device)
            printf("# buffers: rank 0 %s, rank 1 %s (-d %s)\n", place_name(o.place[0]),
                   place_name(o.place[1]), o.place_label);
        else
            printf("# host backend: host memory (-d %s does not apply); staged and cuda-aware "
                   "are plain MPI on host memory\n",
                   o.place_label);
        for (int v = 0; v < NVARIANTS; v++) {
            char why[400];
            if (o.use[v] && !variants[v].available(&b, why, sizeof why))
                printf("# variant %s skipped: %s\n", variants[v].name, why);
        }
        if (floor_ok)
            printf("# floor: %s\n", floor_desc);
        for (int m = 0; m < 2; m++)
            if (o.use[FLOOR_SPIN_INDEX + m] && floor_ok && kfloor_lat && kfloor_ok[m])
                printf("# %s: %s; GPU-timed in segments of 32 round trips behind a host-opened "
                       "gate (no host launch time), hops alternate two patterns, the last reply "
                       "of each segment checked in full\n",
                       variants[FLOOR_SPIN_INDEX + m].name, kfloor_text[m]);
        printf("#\n# %-7s %-20s %9s %9s %9s %10s %10s %10s %8s %9s  %s\n", "size", "variant",
               "lat us", "min", "max", "MB/s", "min", "max", "lat it", "cpu us/it", "check");
        if (o.csv) {
            csv = fopen(o.csv, "w");
            if (!csv)
                ex_die("cannot open %s: %s", o.csv, strerror(errno));
            fprintf(csv, "bytes,variant,backend,lat_iters,bw_windows,window,repeats,warmup,"
                         "buffers,lat_us_med,lat_us_min,lat_us_max,bw_MBs_med,bw_MBs_min,"
                         "bw_MBs_max,cpu_us_per_iter,errors,check\n");
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
        b.sbuf = b.ac->alloc(maxn, b.mine);
        b.rbuf = b.ac->alloc(win_max, b.mine);
        b.ack = b.ac->alloc(1, b.mine);
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
            if (o.tests[T_AR] && v->ar) {
                /* allreduce row: us per Allreduce, bus MB/s (2 processes:
                 * the algorithm bandwidth) */
                unsigned long long aerr = 0;
                double w, cp;
                for (int r = -o.warmup; r < o.repeats; r++) {
                    aerr +=
                        one_rep(&b, v, T_AR, li, seed_of(si, vi, T_AR, r + o.warmup), &o, &w, &cp);
                    if (r < 0)
                        continue;
                    tl[r] = w / li * 1e6;
                    cl[r] = cp / li * 1e6;
                    tb[r] = (double)(b.n / 4 * 4) * li / w / 1e6;
                }
                stat3_t AL = stats_of(tl, o.repeats), AW = stats_of(tb, o.repeats),
                        AC = stats_of(cl, o.repeats);
                if (rank == 0) {
                    char lab[32], name[48];
                    ex_size_label((long long)b.n, lab, sizeof lab);
                    snprintf(name, sizeof name, "allreduce-%s", v->name);
                    const char *chk = o.check && aerr ? "FAIL" : !o.check ? "unchecked" : "ok";
                    printf("%-9s %-20s %9.2f %9.2f %9.2f %10.2f %10.2f %10.2f %8d %9.2f  %s", lab,
                           name, AL.med, AL.mn, AL.mx, AW.med, AW.mn, AW.mx, li, AC.med, chk);
                    if (aerr)
                        printf(" (%llu wrong elements)", aerr);
                    printf("\n");
                    fflush(stdout);
                    if (csv)
                        fprintf(csv,
                                "%zu,%s,%s,%d,%d,%d,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                                "%llu,%s\n",
                                b.n, name, b.ac->name, li, 0, 1, o.repeats, o.warmup,
                                b.ac->is_device ? o.place_label : "host", AL.med, AL.mn, AL.mx,
                                AW.med, AW.mn, AW.mx, AC.med, aerr, chk);
                }
                if (aerr)
                    failures++;
            }
            if (!o.tests[T_LAT] && !o.tests[T_BW])
                continue;
            stat3_t L = {0, 0, 0}, W = {0, 0, 0}, C = {0, 0, 0};
            unsigned long long errors = 0;
            double w, cp;
            /* kernel floors: latency only; failed: a repetition did not finish
             * (reason in why on rank 0), the row is FAIL without numbers */
            int kmode = vi == FLOOR_SPIN_INDEX ? 0 : vi == FLOOR_FUSED_INDEX ? 1 : -1, failed = 0;
            if (kmode >= 0) {
#ifdef EX_HAVE_CUDA
                int bad = 0;
                if (rank == 0) {
                    unsigned long long e = 0;
                    double x = 0;
                    bench_phase_set(v->name, 0, b.n);
                    for (int r = -o.warmup; r < o.repeats && !bad; r++) {
                        uint32_t sd = seed_of(si, vi, T_LAT, r + o.warmup);
                        bad = bench_floor_kernel_latency(kmode, b.n, li, sd, &x, &e, why,
                                                         sizeof why) != 0;
                        errors += o.check && !bad ? e : 0;
                        if (r >= 0) {
                            tl[r] = x;
                            cl[r] = 0;
                        }
                    }
                }
                EX_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
                if (bad) { /* off for the remaining sizes: no second 2 s time-out */
                    failed = 1;
                    kfloor_ok[kmode] = 0;
                    snprintf(kfloor_text[kmode], sizeof kfloor_text[kmode], "failed at %zu B", b.n);
                }
#endif
            } else if (vi == FLOOR_INDEX) {
#ifdef EX_HAVE_CUDA
                int bad = 0;
                if (rank == 0) {
                    unsigned long long e = 0;
                    double x;
                    bench_phase_set("floor", 0, b.n);
                    for (int r = -o.warmup; r < o.repeats && !bad; r++) {
                        uint32_t sd = seed_of(si, vi, T_LAT, r + o.warmup);
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
                                tb[r] = x * 1e3; /* GB/s -> MB/s */
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
                for (int t = T_LAT; t <= T_BW; t++) {
                    /* latency-only variants (acc-graph, nccl-graph) have no
                     * bandwidth function: that column stays empty */
                    if (!o.tests[t] || !(t == T_LAT ? v->lat : v->bw))
                        continue;
                    int count = t == T_LAT ? li : bk;
                    for (int r = -o.warmup; r < o.repeats; r++) { /* r < 0: warm-up */
                        errors += one_rep(&b, v, (test_t)t, count, seed_of(si, vi, t, r + o.warmup),
                                          &o, &w, &cp);
                        if (r < 0)
                            continue;
                        if (t == T_LAT) {
                            tl[r] = w / (2.0 * count) * 1e6;
                            cl[r] = cp / count * 1e6;
                        } else {
                            tb[r] = (double)b.n * o.window * count / w / 1e6; /* MB/s */
                        }
                    }
                }
            }
            /* a kernel floor has no bandwidth (CSV: bw_windows 0) and, when it
             * failed, no latency either (lat_iters 0: plots leave it out) */
            int has_lat = o.tests[T_LAT] && !failed,
                has_bw = o.tests[T_BW] && kmode < 0 && (vi == FLOOR_INDEX || v->bw);
            if (has_lat) {
                L = stats_of(tl, o.repeats);
                C = stats_of(cl, o.repeats);
            }
            if (has_bw)
                W = stats_of(tb, o.repeats);
            if (rank == 0) {
                char lab[32];
                ex_size_label((long long)b.n, lab, sizeof lab);
                const char *chk = failed || (o.check && errors) ? "FAIL"
                                  : !o.check                    ? "unchecked"
                                                                : "ok";
                printf("%-9s %-20s %9.2f %9.2f %9.2f %10.2f %10.2f %10.2f %8d %9.2f  %s", lab,
                       v->name, L.med, L.mn, L.mx, W.med, W.mn, W.mx, li, C.med, chk);
                if (errors)
                    printf(" (%llu wrong bytes received)", errors);
                if (failed)
                    printf(" (%s; %s off for the remaining sizes)", why, v->name);
                printf("\n");
                fflush(stdout);
                if (csv)
                    fprintf(csv,
                            "%zu,%s,%s,%d,%d,%d,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%llu,"
                            "%s\n",
                            b.n, v->name, b.ac->name, has_lat ? li : 0, has_bw ? bk : 0, o.window,
                            o.repeats, o.warmup, b.ac->is_device ? o.place_label : "host", L.med,
                            L.mn, L.mx, W.med, W.mn, W.mx, C.med, errors, chk);
            }
            if (errors || failed)
                failures++;
        }
    }
    if (b.role >= 0) {
        b.ac->free(b.sbuf, b.mine);
        b.ac->free(b.rbuf, b.mine);
        b.ac->free(b.ack, b.mine);
        if (b.ac->is_device) {
            b.ac->free(b.hs, EX_MEM_PINNED);
            b.ac->free(b.hr, EX_MEM_PINNED);
            b.ac->free(b.hack, EX_MEM_PINNED);
        }
    }
    if (rank == 0) {
        printf("# %s\n", failures ? "RESULT: FAIL" : "RESULT: OK");
        if (csv)
            fclose(csv);
    }
#ifdef EX_HAVE_CUDA
    if (floor_tried)
        bench_floor_teardown();
    if (ki_used) {
        if (rank == 0)
            printf("# ki: the library's protocol between the GPUs: %s\n", bench_ki_protocol());
        bench_ki_teardown();
    }
#endif
    ex_enqueue_teardown(&b.ecomm);
    if (nccl_ok)
        ex_nccl_teardown();
    free(tl);
    free(tb);
    free(cl);
    free(b.req);
    b.ac->free(b.errors, EX_MEM_PINNED);
    b.ac->stream_destroy(b.S);
    b.ac->finalize();
    MPI_Comm_free(&b.comm);
    MPI_Comm_free(&b.scomm);
    if (b.pcomm != MPI_COMM_NULL) {
        MPI_Comm_free(&b.pcomm);
        MPI_Comm_free(&b.pscomm);
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
