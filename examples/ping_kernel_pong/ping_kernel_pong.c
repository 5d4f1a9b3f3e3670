/*
 * ping_kernel_pong - libmp's ping-kernel-pong pattern, stream-ordered vs
 * staged, on ranks 0 and 1 (further ranks idle).
 *
 * One iteration: rank 0 waits for rank 1's message, runs a kernel (validates
 * the message, writes the reply, stays busy for --kernel-us, default 20 us)
 * and sends the reply; rank 1 mirrors: it waits for rank 0's message, runs
 * the same kernel and sends back. Time per iteration = one round trip with
 * two kernels.
 *
 * Variants (all in the same launch, every size):
 *   acc            MPIX_Acc_Irecv/Isend/Wait(all) on the kernel's stream; the
 *                  host enqueues every iteration and synchronizes once.
 *   staged         the traditional way: kernel, (copy to pinned host memory),
 *                  stream synchronize, host MPI send/recv, (copy back).
 *   cuda-aware     kernel, stream synchronize, device buffers straight to
 *                  host MPI (needs a CUDA-aware MPI: MPIX_GPU_query_support).
 *   acc-sx         acc on a communicator with mpi_assert_no_any_source/_tag:
 *                  the library's stream-executed path may carry the messages
 *   nccl           ncclSend/ncclRecv on the same stream, enqueued ahead like acc
 *                  (CUDA builds with nccl.h; libnccl.so.2 loaded at run time).
 *   mpich-enqueue  MPICH's own MPIX_Irecv_enqueue / MPIX_Send_enqueue /
 *                  MPIX_Wait_enqueue on its stream communicator (MPICH >= 4.1
 *                  built with CUDA; run with MPIR_CVAR_CH4_RESERVE_VCIS=1).
 * A variant that is not available says why and is skipped.
 *
 * Every received message is validated by the next kernel (a pattern that
 * depends on run, iteration and sender); wrong bytes are counted on the
 * device and reported; any error makes the program exit non-zero.
 */
#include "../common/ex_util.h"
#include "../common/ex_accel.h"
#include "../common/ex_enqueue.h"
#include "../common/ex_nccl.h"
#include "pkp.h"

#include <mpix_acc.h>

#include <getopt.h>
#include <inttypes.h>

#define TAG 42
#define MAX_SIZES 64

typedef struct {
    const ex_accel_t *ac;
    int rank;       /* in MPI_COMM_WORLD */
    int role;       /* 0 or 1: active; -1: idle */
    MPI_Comm comm;  /* plain duplicate of MPI_COMM_WORLD */
    MPI_Comm scomm; /* duplicate with mpi_assert_no_any_source/_tag (acc-sx) */
    ex_stream_t S;
    size_t n;
    double busy_ns;
    unsigned char *d_sbuf, *d_rbuf[2]; /* kernel-side buffers */
    unsigned char *h_sbuf, *h_rbuf;    /* pinned staging (device backend only) */
    unsigned int *errors;              /* backend memory */
    pkp_args_t *args;                  /* one per iteration (+1), kept until the run ends */
    int nargs;
    int fault_iter; /* testing: rank 1 sends a wrong reply here (-1: none) */
} pkp_t;

/* Seed of rank 1's reply (wrong in the fault-injection iteration). */
static uint32_t reply_seed(const pkp_t *p, int run, int i)
{
    return pkp_seed(run, i, 1) + (i == p->fault_iter ? 0x5a5a5au : 0u);
}

static ex_kernel_t pkp_kernel_of(pkp_args_t *a)
{
    ex_kernel_t k = {pkp_host_fn, NULL, a};
#ifdef EX_HAVE_CUDA
    k.cuda_fn = pkp_cuda_fn;
#endif
    return k;
}

static void launch_args(pkp_t *p, int slot, const unsigned char *rbuf, uint32_t rseed,
                        unsigned char *sbuf, uint32_t sseed, double busy_ns)
{
    pkp_args_t *a = &p->args[slot];
    *a = (pkp_args_t){.rbuf = rbuf,
                      .rseed = rseed,
                      .sbuf = sbuf,
                      .sseed = sseed,
                      .n = p->n,
                      .busy_ns = busy_ns,
                      .errors = p->errors};
    ex_kernel_t k = pkp_kernel_of(a);
    p->ac->launch(p->S, &k);
}

/* ------------------------------------------------------------------ */
/* variants                                                            */

static int avail_always(const pkp_t *p, char *why, size_t len)
{
    (void)p, (void)why, (void)len;
    return 1;
}

/* acc: everything enqueued on S; no host synchronization in the loop. */
static void run_acc(pkp_t *p, int run, int iters)
{
    int peer = 1 - p->role;
    for (int i = 0; i < iters; i++) {
        MPI_Request rq[2];
        if (p->role == 0) {
            EX_MPI(MPIX_Acc_Irecv(p->S, p->d_rbuf[i & 1], (int)p->n, MPI_BYTE, peer, TAG, p->comm,
                                  &rq[0]));
            launch_args(p, i, i ? p->d_rbuf[(i - 1) & 1] : NULL, pkp_seed(run, i - 1, 1), p->d_sbuf,
                        pkp_seed(run, i, 0), p->busy_ns);
            EX_MPI(
                MPIX_Acc_Isend(p->S, p->d_sbuf, (int)p->n, MPI_BYTE, peer, TAG, p->comm, &rq[1]));
            EX_MPI(MPIX_Acc_Waitall(p->S, 2, rq, MPI_STATUSES_IGNORE));
        } else {
            EX_MPI(MPIX_Acc_Irecv(p->S, p->d_rbuf[i & 1], (int)p->n, MPI_BYTE, peer, TAG, p->comm,
                                  &rq[0]));
            EX_MPI(MPIX_Acc_Wait(p->S, &rq[0], MPI_STATUS_IGNORE));
            launch_args(p, i, p->d_rbuf[i & 1], pkp_seed(run, i, 0), p->d_sbuf,
                        reply_seed(p, run, i), p->busy_ns);
            EX_MPI(
                MPIX_Acc_Isend(p->S, p->d_sbuf, (int)p->n, MPI_BYTE, peer, TAG, p->comm, &rq[1]));
            EX_MPI(MPIX_Acc_Wait(p->S, &rq[1], MPI_STATUS_IGNORE));
        }
    }
    if (p->role == 0) /* validate the last reply */
        launch_args(p, iters, p->d_rbuf[(iters - 1) & 1], pkp_seed(run, iters - 1, 1), NULL, 0, 0);
    p->ac->stream_sync(p->S);
}

/* The host-MPI loop: kernel, stream sync, host MPI send/recv. copies: go
 * through pinned host buffers (copy out before the sync, copy back after
 * the receive: staged); else MPI gets the device buffers (cuda-aware). On
 * the host backend the buffers are host memory and nothing is copied. */
static void host_mpi_loop(pkp_t *p, int run, int iters, int copies)
{
    const ex_accel_t *ac = p->ac;
    int peer = 1 - p->role, dev = ac->is_device && copies;
    unsigned char *hs = dev ? p->h_sbuf : p->d_sbuf;
    unsigned char *hr = dev ? p->h_rbuf : p->d_rbuf[0];
    for (int i = 0; i < iters; i++) {
        if (p->role == 0) {
            launch_args(p, i, i ? p->d_rbuf[0] : NULL, pkp_seed(run, i - 1, 1), p->d_sbuf,
                        pkp_seed(run, i, 0), p->busy_ns);
            if (dev)
                ac->copy_async(p->S, hs, p->d_sbuf, p->n);
            ac->stream_sync(p->S);
            MPI_Request rs;
            EX_MPI(MPI_Isend(hs, (int)p->n, MPI_BYTE, peer, TAG, p->comm, &rs));
            EX_MPI(MPI_Recv(hr, (int)p->n, MPI_BYTE, peer, TAG, p->comm, MPI_STATUS_IGNORE));
            EX_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
            if (dev)
                ac->copy_async(p->S, p->d_rbuf[0], hr, p->n);
        } else {
            EX_MPI(MPI_Recv(hr, (int)p->n, MPI_BYTE, peer, TAG, p->comm, MPI_STATUS_IGNORE));
            if (dev)
                ac->copy_async(p->S, p->d_rbuf[0], hr, p->n);
            launch_args(p, i, p->d_rbuf[0], pkp_seed(run, i, 0), p->d_sbuf, reply_seed(p, run, i),
                        p->busy_ns);
            if (dev)
                ac->copy_async(p->S, hs, p->d_sbuf, p->n);
            ac->stream_sync(p->S);
            EX_MPI(MPI_Send(hs, (int)p->n, MPI_BYTE, peer, TAG, p->comm));
        }
    }
    if (p->role == 0)
        launch_args(p, iters, p->d_rbuf[0], pkp_seed(run, iters - 1, 1), NULL, 0, 0);
    ac->stream_sync(p->S);
}

/* staged: kernel, copy to pinned host memory, stream sync, host MPI, copy back. */
static void run_staged(pkp_t *p, int run, int iters) { host_mpi_loop(p, run, iters, 1); }

/* cuda-aware: what a CUDA-aware MPI code does: kernel, stream sync, device
 * buffers straight to host MPI (the MPI library moves device memory
 * itself). */
static int avail_cuda_aware(const pkp_t *p, char *why, size_t len)
{
    if (!p->ac->is_device)
        return 1;
    int s = ex_mpi_cuda_support();
    if (s != 1)
        snprintf(why, len, "%s", ex_mpi_cuda_why(s));
    return s == 1;
}

static void run_cuda_aware(pkp_t *p, int run, int iters) { host_mpi_loop(p, run, iters, 0); }

/* nccl: ncclSend/ncclRecv on the kernel's stream, everything enqueued, one
 * synchronize per run (the same loop shape as run_acc); see ex_nccl.h. */
static int nccl_ok;
static char nccl_why[256];

static int avail_nccl(const pkp_t *p, char *why, size_t len)
{
    (void)p;
    if (!nccl_ok)
        snprintf(why, len, "%s", nccl_why);
    return nccl_ok;
}

static void run_nccl(pkp_t *p, int run, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (p->role == 0) {
            launch_args(p, i, i ? p->d_rbuf[(i - 1) & 1] : NULL, pkp_seed(run, i - 1, 1), p->d_sbuf,
                        pkp_seed(run, i, 0), p->busy_ns);
            ex_nccl_send(p->d_sbuf, p->n, p->S);
            ex_nccl_recv(p->d_rbuf[i & 1], p->n, p->S);
        } else {
            ex_nccl_recv(p->d_rbuf[i & 1], p->n, p->S);
            launch_args(p, i, p->d_rbuf[i & 1], pkp_seed(run, i, 0), p->d_sbuf,
                        reply_seed(p, run, i), p->busy_ns);
            ex_nccl_send(p->d_sbuf, p->n, p->S);
        }
    }
    if (p->role == 0)
        launch_args(p, iters, p->d_rbuf[(iters - 1) & 1], pkp_seed(run, iters - 1, 1), NULL, 0, 0);
    p->ac->stream_sync(p->S);
}

/* mpich-enqueue: MPICH's own stream enqueue API on its stream communicator
 * for the kernel's stream (MPICH >= 4.1 with CUDA; see ex_enqueue.h), the
 * same loop shape as run_acc. */
static MPI_Comm enq_comm = MPI_COMM_NULL;
static char enq_why[320];

static int avail_mpich_enqueue(const pkp_t *p, char *why, size_t len)
{
    (void)p;
    if (enq_comm == MPI_COMM_NULL)
        snprintf(why, len, "%s", enq_why);
    return enq_comm != MPI_COMM_NULL;
}

#ifdef EX_HAVE_MPICH_ENQUEUE
static void run_mpich_enqueue(pkp_t *p, int run, int iters)
{
    int peer = 1 - p->role;
    for (int i = 0; i < iters; i++) {
        if (p->role == 0) {
            MPI_Request rq;
            EX_MPI(MPIX_Irecv_enqueue(p->d_rbuf[i & 1], (int)p->n, MPI_BYTE, peer, TAG, enq_comm,
                                      &rq));
            launch_args(p, i, i ? p->d_rbuf[(i - 1) & 1] : NULL, pkp_seed(run, i - 1, 1), p->d_sbuf,
                        pkp_seed(run, i, 0), p->busy_ns);
            EX_MPI(MPIX_Send_enqueue(p->d_sbuf, (int)p->n, MPI_BYTE, peer, TAG, enq_comm));
            EX_MPI(MPIX_Wait_enqueue(&rq, MPI_STATUS_IGNORE));
        } else {
            EX_MPI(MPIX_Recv_enqueue(p->d_rbuf[i & 1], (int)p->n, MPI_BYTE, peer, TAG, enq_comm,
                                     MPI_STATUS_IGNORE));
            launch_args(p, i, p->d_rbuf[i & 1], pkp_seed(run, i, 0), p->d_sbuf,
                        reply_seed(p, run, i), p->busy_ns);
            EX_MPI(MPIX_Send_enqueue(p->d_sbuf, (int)p->n, MPI_BYTE, peer, TAG, enq_comm));
        }
    }
    if (p->role == 0)
        launch_args(p, iters, p->d_rbuf[(iters - 1) & 1], pkp_seed(run, iters - 1, 1), NULL, 0, 0);
    p->ac->stream_sync(p->S);
}
#else
#define run_mpich_enqueue NULL
#endif

typedef struct {
    const char *name;
    int (*available)(const pkp_t *p, char *why, size_t len);
    void (*run)(pkp_t *p, int run, int iters);
} variant_t;

/* acc-sx: acc on a communicator with the MPI-4 no-wildcard assertions:
 * the library's stream-executed path may carry the messages */
static void run_accsx(pkp_t *p, int run, int iters)
{
    MPI_Comm c = p->comm;
    p->comm = p->scomm;
    run_acc(p, run, iters);
    p->comm = c;
}

static const variant_t variants[] = {
    {"staged", avail_always, run_staged}, {"cuda-aware", avail_cuda_aware, run_cuda_aware},
    {"acc", avail_always, run_acc},       {"acc-sx", avail_always, run_accsx},
    {"nccl", avail_nccl, run_nccl},       {"mpich-enqueue", avail_mpich_enqueue, run_mpich_enqueue},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* ------------------------------------------------------------------ */
/* options                                                             */

typedef struct {
    int use[NVARIANTS];
    long long sizes[MAX_SIZES];
    int nsizes;
    int iters, warmup, repeats;
    double kernel_us;
    const char *backend, *csv;
    int fault_iter;
} opts_t;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mpiexec -n 2 ping_kernel_pong [options]\n"
        "  --variant LIST   staged,cuda-aware,acc,acc-sx,nccl,mpich-enqueue or all (default all)\n"
        "  --sizes LIST     message sizes, e.g. 1,8,4K (default 1,8,64,512,4K,32K)\n"
        "  --min B --max B --factor F   size sweep (instead of --sizes)\n"
        "  --iters N        iterations per timed run (default 200)\n"
        "  --warmup N       iterations of the untimed warm-up run (default 20)\n"
        "  --repeats R      timed runs: median/min/max over them (default 5)\n"
        "  --kernel-us D    kernel duration in microseconds (default 20)\n"
        "  --backend B      auto, host or cuda (default auto)\n"
        "  --csv FILE       also write CSV to FILE\n"
        "  --inject-fault I testing: rank 1 sends a wrong reply in iteration I of every\n"
        "                   run, to show that validation catches it (exit status 1)\n");
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {{"variant", required_argument, 0, 'v'},
                                       {"sizes", required_argument, 0, 's'},
                                       {"min", required_argument, 0, 'b'},
                                       {"max", required_argument, 0, 'e'},
                                       {"factor", required_argument, 0, 'f'},
                                       {"iters", required_argument, 0, 'n'},
                                       {"warmup", required_argument, 0, 'w'},
                                       {"repeats", required_argument, 0, 'r'},
                                       {"kernel-us", required_argument, 0, 'k'},
                                       {"backend", required_argument, 0, 'B'},
                                       {"csv", required_argument, 0, 'c'},
                                       {"inject-fault", required_argument, 0, 'F'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    static const long long defsizes[] = {1, 8, 64, 512, 4096, 32768};
    long long bmin = -1, bmax = -1, factor = 2;
    memset(o, 0, sizeof *o);
    for (int v = 0; v < NVARIANTS; v++)
        o->use[v] = 1;
    memcpy(o->sizes, defsizes, sizeof defsizes);
    o->nsizes = (int)(sizeof defsizes / sizeof defsizes[0]);
    o->iters = 200, o->warmup = 20, o->repeats = 5, o->kernel_us = 20;
    o->backend = "auto";
    o->fault_iter = -1;
    int c;
    while ((c = ex_getopt(argc, argv, "b:e:f:h", lo, usage)) != -1) {
        switch (c) {
        case 'v': {
            const char *names[NVARIANTS];
            for (int v = 0; v < NVARIANTS; v++)
                names[v] = variants[v].name;
            ex_parse_name_list(optarg, names, NVARIANTS, o->use, "variant");
            break;
        }
        case 's':
            o->nsizes = ex_opt_sizes(optarg, o->sizes, MAX_SIZES);
            break;
        case 'b':
            bmin = ex_parse_size(optarg);
            break;
        case 'e':
            bmax = ex_parse_size(optarg);
            break;
        case 'f':
            factor = ex_parse_long("--factor", optarg, 2, 1024);
            break;
        case 'n':
            o->iters = (int)ex_parse_long("--iters", optarg, 1, 10000000);
            break;
        case 'w':
            o->warmup = (int)ex_parse_long("--warmup", optarg, 0, 10000000);
            break;
        case 'r':
            o->repeats = (int)ex_parse_long("--repeats", optarg, 1, 10000);
            break;
        case 'k':
            o->kernel_us = ex_parse_double("--kernel-us", optarg, 0, 1e7);
            break;
        case 'B':
            o->backend = optarg;
            break;
        case 'c':
            o->csv = optarg;
            break;
        case 'F':
            o->fault_iter = (int)ex_parse_long("--inject-fault", optarg, 0, 10000000);
            break;
        default:
            ex_usage_exit(usage, 2);
        }
    }
    if (bmin >= 0 || bmax >= 0) {
        if (bmin < 0)
            bmin = bmax;
        if (bmax < 0)
            bmax = bmin;
        o->nsizes = ex_size_sweep(bmin, bmax, factor, o->sizes, MAX_SIZES);
    }
    ex_check_message_sizes(o->sizes, o->nsizes);
}

/* ------------------------------------------------------------------ */

/* One run of iters iterations; returns rank 0's wall and CPU seconds and
 * the global error count (on every rank). */
static unsigned long long one_run(pkp_t *p, const variant_t *v, int run, int iters, double *wall,
                                  double *cpu)
{
    const ex_accel_t *ac = p->ac;
    unsigned int zero = 0, errs = 0;
    if (p->role >= 0) {
        ac->copy(p->errors, &zero, sizeof zero);
        if (iters + 1 > p->nargs) {
            free(p->args);
            p->nargs = iters + 1;
            p->args = calloc((size_t)p->nargs, sizeof *p->args);
            if (!p->args)
                ex_die("out of memory");
        }
    }
    EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = ex_now(), c0 = ex_thread_cpu_s();
    if (p->role >= 0)
        v->run(p, run, iters);
    double t1 = ex_now(), c1 = ex_thread_cpu_s();
    *wall = t1 - t0;
    *cpu = c1 - c0;
    EX_MPI(MPI_Bcast(wall, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    EX_MPI(MPI_Bcast(cpu, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (p->role >= 0)
        ac->copy(&errs, p->errors, sizeof errs);
    unsigned long long e = errs, tot = 0;
    EX_MPI(MPI_Allreduce(&e, &tot, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    return tot;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rank, size;
    parse_opts(argc, argv, &o);
    ex_accel_preinit(o.backend); /* this rank's GPU current before MPI_Init */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2)
        ex_die("ping_kernel_pong needs at least 2 ranks (ranks 0 and 1 take part)");

    char note[320];
    pkp_t p = {0};
    p.ac = ex_accel_select(o.backend, ex_local_rank(MPI_COMM_WORLD), note, sizeof note);
    p.rank = rank;
    p.role = rank < 2 ? rank : -1;
    p.busy_ns = o.kernel_us * 1e3;
    p.fault_iter = o.fault_iter;
    EX_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &p.comm));
    ex_comm_dup_no_wildcards(MPI_COMM_WORLD, &p.scomm);
    p.S = p.ac->stream_create();
    p.errors = p.ac->alloc(sizeof(unsigned int), EX_MEM_DEVICE);
    nccl_ok = ex_nccl_setup(p.ac->is_device, p.role, nccl_why, sizeof nccl_why);
    ex_enqueue_setup(p.ac->is_device, p.S, &enq_comm, enq_why, sizeof enq_why);

    FILE *csv = NULL;
    if (rank == 0) {
        printf("ping-kernel-pong: ranks 0 <-> 1 of %d; backend %s%s%s\n", size, p.ac->desc,
               note[0] ? "; " : "", note);
        if (o.fault_iter >= 0)
            printf("FAULT INJECTION: rank 1 sends a wrong reply in iteration %d of every run "
                   "(results must FAIL)\n",
                   o.fault_iter);
        printf("kernel %.1f us; %d iterations per run, %d timed runs after a %d-iteration "
               "warm-up; time per iteration = one round trip with two kernels\n",
               o.kernel_us, o.iters, o.repeats, o.warmup);
        for (int v = 0; v < NVARIANTS; v++) {
            char why[256];
            if (o.use[v] && !variants[v].available(&p, why, sizeof why))
                printf("variant %s skipped: %s\n", variants[v].name, why);
        }
        printf("\n%-9s %-14s %11s %10s %10s %13s %10s  %s\n", "size", "variant", "us/iter", "min",
               "max", "cpu us/iter", "vs staged", "check");
        if (o.csv) {
            csv = fopen(o.csv, "w");
            if (!csv)
                ex_die("cannot open %s: %s", o.csv, strerror(errno));
            fprintf(csv, "bytes,variant,backend,kernel_us,iters,repeats,us_per_iter_med,"
                         "us_per_iter_min,us_per_iter_max,cpu_us_per_iter,vs_staged_pct,"
                         "errors,check\n");
        }
        fflush(stdout);
    }

    int run_id = 0, failures = 0;
    /* Buffers for the largest size, allocated once (device memory a peer
     * has mapped is best not freed while streams wait; see mpixacc_bench). */
    size_t maxn = 1;
    for (int si = 0; si < o.nsizes; si++)
        if ((size_t)o.sizes[si] > maxn)
            maxn = (size_t)o.sizes[si];
    if (p.role >= 0) {
        p.d_sbuf = p.ac->alloc(maxn, EX_MEM_DEVICE);
        p.d_rbuf[0] = p.ac->alloc(maxn, EX_MEM_DEVICE);
        p.d_rbuf[1] = p.ac->alloc(maxn, EX_MEM_DEVICE);
        if (p.ac->is_device) {
            p.h_sbuf = p.ac->alloc(maxn, EX_MEM_PINNED);
            p.h_rbuf = p.ac->alloc(maxn, EX_MEM_PINNED);
        }
    }
    for (int si = 0; si < o.nsizes; si++) {
        p.n = (size_t)o.sizes[si];
        double staged_med = 0;
        for (int v = 0; v < NVARIANTS; v++) {
            char why[256];
            if (!o.use[v] || !variants[v].available(&p, why, sizeof why))
                continue;
            double *t = calloc((size_t)o.repeats, sizeof *t),
                   *c = calloc((size_t)o.repeats, sizeof *c);
            unsigned long long errors = 0;
            double w, cp;
            if (o.warmup)
                errors += one_run(&p, &variants[v], ++run_id, o.warmup, &w, &cp);
            for (int r = 0; r < o.repeats; r++) {
                errors += one_run(&p, &variants[v], ++run_id, o.iters, &w, &cp);
                t[r] = w / o.iters * 1e6;
                c[r] = cp / o.iters * 1e6;
            }
            if (rank == 0) {
                double med, mn, mx, cmed, cmn, cmx;
                ex_stats(t, o.repeats, &med, &mn, &mx);
                ex_stats(c, o.repeats, &cmed, &cmn, &cmx);
                char lab[32], vs[32] = "", vscsv[32] = "";
                ex_size_label((long long)p.n, lab, sizeof lab);
                if (!strcmp(variants[v].name, "staged"))
                    staged_med = med;
                else if (staged_med > 0) {
                    double pct = 100.0 * (med - staged_med) / staged_med;
                    snprintf(vs, sizeof vs, "%+.1f%%", pct);
                    snprintf(vscsv, sizeof vscsv, "%.2f", pct);
                }
                const char *chk = errors ? "FAIL" : "ok";
                printf("%-9s %-14s %11.2f %10.2f %10.2f %13.2f %10s  %s", lab, variants[v].name,
                       med, mn, mx, cmed, vs, chk);
                if (errors)
                    printf(" (%llu wrong bytes received)", errors);
                printf("\n");
                fflush(stdout);
                if (csv)
                    fprintf(csv, "%zu,%s,%s,%.3f,%d,%d,%.3f,%.3f,%.3f,%.3f,%s,%llu,%s\n", p.n,
                            variants[v].name, p.ac->name, o.kernel_us, o.iters, o.repeats, med, mn,
                            mx, cmed, vscsv, errors, chk);
            }
            if (errors)
                failures++;
            free(t);
            free(c);
        }
    }
    if (p.role >= 0) {
        p.ac->free(p.d_sbuf, EX_MEM_DEVICE);
        p.ac->free(p.d_rbuf[0], EX_MEM_DEVICE);
        p.ac->free(p.d_rbuf[1], EX_MEM_DEVICE);
        if (p.ac->is_device) {
            p.ac->free(p.h_sbuf, EX_MEM_PINNED);
            p.ac->free(p.h_rbuf, EX_MEM_PINNED);
        }
    }
    if (rank == 0) {
        printf("%s\n", failures ? "RESULT: FAIL" : "RESULT: OK");
        if (csv)
            fclose(csv);
    }
    ex_enqueue_teardown(&enq_comm);
    if (nccl_ok)
        ex_nccl_teardown();
    p.ac->free(p.errors, EX_MEM_DEVICE);
    p.ac->stream_destroy(p.S);
    p.ac->finalize();
    free(p.args);
    MPI_Comm_free(&p.comm);
    MPI_Comm_free(&p.scomm);
    MPI_Finalize();
    return failures ? 1 : 0;
}
