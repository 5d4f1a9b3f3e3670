/*
 * stencil2d - Jacobi 5-point stencil on a PX x PY Cartesian process grid with
 * a halo exchange every step, in these variants of the same computation:
 *
 *   mpi         the baseline: synchronize the stream before the sends, host
 *               MPI_Isend/Irecv/Waitall, then unpack; on CUDA the kernels pack
 *               into and unpack from pinned host buffers.
 *   mpi-cuda-aware  the mpi loop with device buffers given to MPI (a
 *               CUDA-aware MPI; skipped, with the reason, when the MPI library
 *               does not report CUDA support). On host streams: as mpi.
 *   acc         the same loop with MPIX_Acc_Isend/Irecv/Waitall on the compute
 *               stream; the host never synchronizes inside the loop.
 *   acc2        two streams: the interior on one, packing, communication,
 *               unpacking and the boundary band on the other, joined by
 *               events (cudaEvent on CUDA; a host-stream flag on host streams).
 *   streamcomm  the mpi loop, its MPI_Isend/Irecv/Waitall calls unchanged, on
 *               a communicator made a stream communicator by ONE
 *               MPI_Comm_set_info call before the loop (the stream, and
 *               MPI-4's mpi_assert_no_any_source/_tag, which let the
 *               stream-executed path carry the halos). The loop's only
 *               non-MPI synchronization (the stream sync before the sends) is
 *               skipped when the communicator says it is stream-ordered.
 *   acc-sx      acc on a duplicate with the MPI-4 assertions
 *               mpi_assert_no_any_source/_tag: the library's stream-executed
 *               path may carry the halos between processes of a node.
 *   ki          kernel-initiated (CUDA): a partitioned request pair per
 *               neighbour (MPIX_Acc_Psend_init, partition k = step k) and
 *               ONE cooperative kernel per run doing every step: it packs
 *               and readies each halo, updates the interior, waits for the
 *               neighbours' halos and unpacks them, then the band, with a
 *               grid-wide barrier after each half (stencil.h, st_ki_t). One
 *               MPIX_Acc_Start per request and one stream wait per run, not
 *               per step.
 *   graph       host backend: two acc steps (even and odd: the grids swap)
 *               captured once into a host graph
 *               (MPIX_Acc_Hoststream_begin_capture) with their messages,
 *               launched steps/2 times (an odd last step as acc). CUDA
 *               backend: ki's kernel doing K steps captured alone into a
 *               CUDA graph at the variant's set-up (untimed) and launched
 *               steps/K times; K = the largest even divisor of the step
 *               count up to 10 (an odd step count: the variant is
 *               skipped). A launch takes the next K partitions of an epoch
 *               of E x K (a device word the kernel advances), so the graph
 *               holds no library node; the host starts an epoch before its
 *               first launch and waits for it (on the stream) after its
 *               last, once per E launches (--graph-epoch E; default as many
 *               as 256 MiB of partition buffers hold, at most 1000) -- the
 *               open epoch spans runs and is filled at the end. It prints
 *               the host's cost per step of launching the graph, and of
 *               launching the kernel captured without its communication
 *               (one epoch of launches each).
 *   acc-graph   two acc steps (even and odd) with their MPIX_Acc_Irecv/
 *               Isend/Waitall captured once -- on CUDA into a CUDA graph at
 *               the variant's set-up (the library's fire and wait nodes),
 *               on the host backend into a host graph -- and launched
 *               steps/2 times (an odd last step as acc). On CUDA it also
 *               prints the host's cost per step of launching that graph and
 *               of launching the same two steps captured without their
 *               communication (wall and thread CPU time of the launch loop).
 *   streamcomm-classic  a textbook MPI step, unmodified apart from the one
 *               MPI_Comm_set_info of streamcomm: the halos straight from
 *               and into the grid -- columns as an MPI_Type_vector, rows as
 *               contiguous doubles -- by four MPI_Sendrecv, then the update
 *               of every owned point, and every 10 steps the residual
 *               (max |unew - u|) through MPI_Allreduce(MPI_MAX). On the
 *               stream communicator the library packs the columns on the
 *               stream and the Allreduce is stream-ordered: the host never
 *               synchronizes in the loop. The ranks' final residuals must
 *               agree bit for bit.
 *
 * Every run is checked against a serial reference of the same global grid
 * computed on rank 0 (one domain, same number of steps): the final grids must
 * be bitwise identical.
 *
 * The compute backend (examples/common/ex_accel.h) is CUDA when built with
 * CUDA and a device is present, host functions on library host streams
 * otherwise.
 */
#include "../common/ex_util.h"
#include "../common/ex_accel.h"
#include "stencil.h"

#include <mpix_acc.h>

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>

enum {
    V_MPI = 0,
    V_MPICA,
    V_ACC,
    V_ACC2,
    V_STREAMCOMM,
    V_ACCSX,
    V_KI,
    V_CLASSIC,
    V_GRAPH,
    V_ACCGRAPH,
    V_COUNT
};
static const char *const vname[V_COUNT] = {
    "mpi", "mpi-cuda-aware",     "acc",   "acc2",     "streamcomm", "acc-sx",
    "ki",  "streamcomm-classic", "graph", "acc-graph"};

#define MAX_SIZES 32

/* ------------------------------------------------------------------ */
/* options                                                             */

typedef struct {
    int variants[V_COUNT], nvariants;
    long long sizes[MAX_SIZES];
    int nsizes;
    int steps, warmup, repeats;
    int px, py;
    const char *backend;
    const char *csv;
    int check;
    int fault_step;  /* testing: skip the unpack of this step (-1: none) */
    int graph_epoch; /* graph on CUDA: launches per epoch (0: as memory allows) */
} opts_t;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mpiexec -n P stencil2d [options]\n"
        "  --variant LIST     mpi,mpi-cuda-aware,acc,acc2,streamcomm,acc-sx,ki,\n"
        "                     streamcomm-classic, graph, acc-graph or all (default\n"
        "                     all; mpi-cuda-aware only where MPI reports CUDA support)\n"
        "  --sizes LIST       points per rank along each axis, e.g. 64,256 (default 64,256,1024)\n"
        "  --nmin N --nmax N  sweep N = nmin, 2*nmin, ... nmax (e.g. --nmin 8 --nmax 8192)\n"
        "  --steps S          steps per run (default 100)\n"
        "  --warmup W         untimed runs before the timed ones (default 1)\n"
        "  --repeats R        timed runs; the median is reported (default 5)\n"
        "  --px X --py Y      process grid (default MPI_Dims_create)\n"
        "  --backend B        auto, host or cuda (default auto)\n"

        "  --graph-epoch N    graph on CUDA: launches per partitioned epoch (default:\n"
        "                     up to 1000, as 256 MiB of partition buffers allow)\n"
        "  --no-check         skip the reference run and the comparison\n"
        "  --csv FILE         also write one CSV line per (size, variant) to FILE\n"
        "  --inject-fault K   testing: skip the halo unpack of step K on every rank, to\n"
        "                     show that the check catches it (exit status 1)\n"
        "  --help\n");
}

static void parse_variants(const char *s, opts_t *o)
{
    int use[V_COUNT];
    ex_parse_name_list(s, vname, V_COUNT, use, "variant");
    o->nvariants = 0;
    for (int v = 0; v < V_COUNT; v++)
        if (use[v])
            o->variants[o->nvariants++] = v;
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {{"variant", required_argument, 0, 'v'},
                                       {"sizes", required_argument, 0, 's'},
                                       {"nmin", required_argument, 0, 'a'},
                                       {"nmax", required_argument, 0, 'b'},
                                       {"steps", required_argument, 0, 'n'},
                                       {"warmup", required_argument, 0, 'w'},
                                       {"repeats", required_argument, 0, 'r'},
                                       {"px", required_argument, 0, 'x'},
                                       {"py", required_argument, 0, 'y'},
                                       {"backend", required_argument, 0, 'B'},
                                       {"csv", required_argument, 0, 'c'},
                                       {"no-check", no_argument, 0, 'N'},
                                       {"inject-fault", required_argument, 0, 'F'},
                                       {"graph-epoch", required_argument, 0, 'G'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    long long nmin = 0, nmax = 0;
    memset(o, 0, sizeof *o);
    parse_variants("all", o);
    o->sizes[0] = 64, o->sizes[1] = 256, o->sizes[2] = 1024, o->nsizes = 3;
    o->steps = 100, o->warmup = 1, o->repeats = 5;
    o->backend = "auto";
    o->check = 1;
    o->fault_step = -1;
    int c;
    while ((c = ex_getopt(argc, argv, "h", lo, usage)) != -1) {
        switch (c) {
        case 'v':
            parse_variants(optarg, o);
            break;
        case 's':
            o->nsizes = ex_opt_sizes(optarg, o->sizes, MAX_SIZES);
            break;
        case 'a':
            nmin = ex_parse_long("--nmin", optarg, 1, 1 << 20);
            break;
        case 'b':
            nmax = ex_parse_long("--nmax", optarg, 1, 1 << 20);
            break;
        case 'n':
            o->steps = (int)ex_parse_long("--steps", optarg, 1, 1 << 24);
            break;
        case 'w':
            o->warmup = (int)ex_parse_long("--warmup", optarg, 0, 1000);
            break;
        case 'r':
            o->repeats = (int)ex_parse_long("--repeats", optarg, 1, 1000);
            break;
        case 'x':
            o->px = (int)ex_parse_long("--px", optarg, 1, 1 << 20);
            break;
        case 'y':
            o->py = (int)ex_parse_long("--py", optarg, 1, 1 << 20);
            break;
        case 'B':
            o->backend = optarg;
            break;
        case 'c':
            o->csv = optarg;
            break;
        case 'N':
            o->check = 0;
            break;
        case 'F':
            o->fault_step = (int)ex_parse_long("--inject-fault", optarg, 0, 1 << 24);
            break;
        case 'G':
            o->graph_epoch = (int)ex_parse_long("--graph-epoch", optarg, 1, 1 << 20);
            break;
        default:
            ex_usage_exit(usage, 2);
        }
    }
    if (nmin || nmax) {
        if (!nmin)
            nmin = nmax;
        if (!nmax)
            nmax = nmin;
        o->nsizes = ex_size_sweep(nmin, nmax, 2, o->sizes, MAX_SIZES);
        if (!o->nsizes) {
            fprintf(stderr, "--nmin must not exceed --nmax\n");
            exit(2);
        }
    }
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] < 1 || o->sizes[i] > (1 << 20)) {
            fprintf(stderr, "size %lld out of range [1, 1048576]\n", o->sizes[i]);
            exit(2);
        }
}

/* ------------------------------------------------------------------ */
/* one variant's state                                                 */

typedef struct {
    const ex_accel_t *ac;
    st_dims_t d;
    int nbr[ST_NSIDES], cnt[ST_NSIDES];
    double *g[2];               /* the two grids (backend memory) */
    double *sbuf[ST_NSIDES];    /* send buffers */
    double *rbuf[2][ST_NSIDES]; /* receive buffers, by step parity */
    ex_mem_t bufkind;
    /* persistent operation descriptors, by step parity p (u = g[p]) */
    st_op_t op_init[2], op_pack[2], op_unpack[2], op_int[2], op_bnd[2];
    ex_kernel_t k_init[2], k_pack[2], k_unpack[2], k_int[2], k_bnd[2];
    ex_stream_t S, S2;     /* compute stream; second stream (acc2) */
    ex_event_t *evA, *evB; /* acc2: interior done, boundary done */
    MPI_Comm comm;         /* the communicator the loop uses */
    int sync_before_send;  /* mpi loop: needed unless comm is stream-ordered */
    int fault_step;        /* testing: step whose unpack is skipped, -1: none */
    int graph_epoch;       /* --graph-epoch (0: auto) */
    /* ki: partitioned requests per side (MPI_REQUEST_NULL: no neighbour),
     * their buffers (steps partitions each) and the kernel's arguments */
    int steps;
    MPI_Request kreq[2 * ST_NSIDES]; /* receives, then sends */
    st_ki_t ki;
    /* graph on CUDA: steps per launch, partitions (steps) per epoch, those
     * of the open epoch taken (0: none started), the kernel's slot word
     * (device memory), the captured kernel and the same kernel captured
     * without its communication (the host-cost comparison) */
    int gk, gparts, gused;
    double groll; /* thread CPU seconds in the epochs' starts and waits */
    unsigned long long *gword;
    void *gexec, *gexec_nocomm;
    /* acc-graph on CUDA: two acc steps captured, and the same without
     * their communication (the host-cost comparison) */
    void *agexec, *agexec_nocomm;
    /* streamcomm-classic: the column type, the residual (backend memory:
     * this rank's, the global one) and its operations by step parity */
    MPI_Datatype col;
    double *resid, *resid_all;
    st_op_t op_full[2], op_resid[2];
    ex_kernel_t k_full[2], k_resid[2];
    double t_blocked; /* host time inside synchronizing calls, this run */
} run_t;

#define BLOCKED(r, call)                                                                           \
    do {                                                                                           \
        double t_b_ = ex_now();                                                                    \
        call;                                                                                      \
        (r)->t_blocked += ex_now() - t_b_;                                                         \
    } while (0)

static ex_kernel_t kernel_of(st_op_t *op)
{
    ex_kernel_t k = {st_host_fn, NULL, op};
#ifdef EX_HAVE_CUDA
    k.cuda_fn = st_cuda_fn;
#endif
    return k;
}

static void build_ops(run_t *r)
{
    for (int p = 0; p < 2; p++) {
        st_op_t base = {.d = r->d};
        r->op_init[p] = base;
        r->op_init[p].kind = ST_OP_INIT;
        r->op_init[p].dst = r->g[p];

        r->op_pack[p] = base;
        r->op_pack[p].kind = ST_OP_PACK;
        r->op_pack[p].src = r->g[p];
        r->op_unpack[p] = base;
        r->op_unpack[p].kind = ST_OP_UNPACK;
        r->op_unpack[p].dst = r->g[p];
        for (int s = 0; s < ST_NSIDES; s++) {
            int has = r->nbr[s] != MPI_PROC_NULL;
            r->op_pack[p].buf[s] = has ? r->sbuf[s] : NULL;
            r->op_unpack[p].buf[s] = has ? r->rbuf[p][s] : NULL;
        }
        r->op_int[p] = base;
        r->op_int[p].kind = ST_OP_INTERIOR;
        r->op_int[p].src = r->g[p];
        r->op_int[p].dst = r->g[p ^ 1];
        r->op_bnd[p] = r->op_int[p];
        r->op_bnd[p].kind = ST_OP_BOUNDARY;

        r->op_full[p] = r->op_int[p];
        r->op_full[p].kind = ST_OP_FULL;
        r->op_resid[p] = r->op_int[p]; /* after the update: dst = unew, src = u */
        r->op_resid[p].kind = ST_OP_RESID;
        r->op_resid[p].buf[0] = r->resid;
        r->k_full[p] = kernel_of(&r->op_full[p]);
        r->k_resid[p] = kernel_of(&r->op_resid[p]);

        r->k_init[p] = kernel_of(&r->op_init[p]);
        r->k_pack[p] = kernel_of(&r->op_pack[p]);
        r->k_unpack[p] = kernel_of(&r->op_unpack[p]);
        r->k_int[p] = kernel_of(&r->op_int[p]);
        r->k_bnd[p] = kernel_of(&r->op_bnd[p]);
    }
}

static int comm_is_stream_ordered(MPI_Comm comm)
{
    MPI_Info info = MPI_INFO_NULL;
    char v[128];
    int flag = 0, len = (int)sizeof v;
    EX_MPI(MPI_Comm_get_info(comm, &info));
    if (info == MPI_INFO_NULL)
        return 0;
    EX_MPI(MPI_Info_get_string(info, MPIX_ACC_INFO_STREAM, &len, v, &flag));
    MPI_Info_free(&info);
    return flag && strcmp(v, "none") != 0;
}

/* ------------------------------------------------------------------ */
/* the step loops                                                      */

/* The plain MPI loop. Used unchanged by `streamcomm`, where comm is a
 * stream communicator and these MPI calls become stream-ordered. */
static void step_mpi(run_t *r, int k)
{
    const ex_accel_t *ac = r->ac;
    int p = k & 1;
    MPI_Request rq[2 * ST_NSIDES];

    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPI_Irecv(r->rbuf[p][s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s ^ 1, r->comm, &rq[s]));
    ac->launch(r->S, &r->k_pack[p]);
    if (r->sync_before_send) /* the send buffers must be packed before host MPI reads them */
        BLOCKED(r, ac->stream_sync(r->S));
    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPI_Isend(r->sbuf[s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s, r->comm,
                         &rq[ST_NSIDES + s]));
    ac->launch(r->S, &r->k_int[p]);
    BLOCKED(r, EX_MPI(MPI_Waitall(2 * ST_NSIDES, rq, MPI_STATUSES_IGNORE)));
    if (k != r->fault_step)
        ac->launch(r->S, &r->k_unpack[p]);
    ac->launch(r->S, &r->k_bnd[p]);
}

/* acc: the same loop, explicit stream-ordered calls, no host sync. */
static void step_acc(run_t *r, int k)
{
    const ex_accel_t *ac = r->ac;
    int p = k & 1;
    MPI_Request rq[2 * ST_NSIDES];

    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPIX_Acc_Irecv(r->S, r->rbuf[p][s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s ^ 1, r->comm,
                              &rq[s]));
    ac->launch(r->S, &r->k_pack[p]);
    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPIX_Acc_Isend(r->S, r->sbuf[s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s, r->comm,
                              &rq[ST_NSIDES + s]));
    ac->launch(r->S, &r->k_int[p]);
    BLOCKED(r, EX_MPI(MPIX_Acc_Waitall(r->S, 2 * ST_NSIDES, rq, MPI_STATUSES_IGNORE)));
    if (k != r->fault_step)
        ac->launch(r->S, &r->k_unpack[p]);
    ac->launch(r->S, &r->k_bnd[p]);
}

/* streamcomm-classic: the textbook step (see the top). */
#define CLASSIC_RESID_EVERY 10
static void step_classic(run_t *r, int k)
{
    const ex_accel_t *ac = r->ac;
    int p = k & 1, nx = r->d.nx, ny = r->d.ny;
    long ld = r->d.ld;
    double *u = r->g[p];
    if (r->sync_before_send) /* host MPI reads the grid the stream wrote */
        BLOCKED(r, ac->stream_sync(r->S));
    /* x: a column of ny points (vector type), y: a row of nx points */
    EX_MPI(MPI_Sendrecv(u + ld + nx, 1, r->col, r->nbr[ST_E], ST_E, u + ld, 1, r->col, r->nbr[ST_W],
                        ST_E, r->comm, MPI_STATUS_IGNORE));
    EX_MPI(MPI_Sendrecv(u + ld + 1, 1, r->col, r->nbr[ST_W], ST_W, u + ld + nx + 1, 1, r->col,
                        r->nbr[ST_E], ST_W, r->comm, MPI_STATUS_IGNORE));
    EX_MPI(MPI_Sendrecv(u + ny * ld + 1, nx, MPI_DOUBLE, r->nbr[ST_N], ST_N, u + 1, nx, MPI_DOUBLE,
                        r->nbr[ST_S], ST_N, r->comm, MPI_STATUS_IGNORE));
    EX_MPI(MPI_Sendrecv(u + ld + 1, nx, MPI_DOUBLE, r->nbr[ST_S], ST_S, u + (ny + 1) * ld + 1, nx,
                        MPI_DOUBLE, r->nbr[ST_N], ST_S, r->comm, MPI_STATUS_IGNORE));
    ac->launch(r->S, &r->k_full[p]);
    if ((k + 1) % CLASSIC_RESID_EVERY == 0) {
        ac->launch(r->S, &r->k_resid[p]);
        EX_MPI(MPI_Allreduce(r->resid, r->resid_all, 1, MPI_DOUBLE, MPI_MAX, r->comm));
    }
}

/* acc2: interior on S; pack, communication, unpack and boundary on S2.
 * interior(k) needs boundary(k-1) (the band of g[p]); boundary(k) needs
 * interior(k-1) (the interior of g[p]); both also cover the write-after-read
 * hazards on g[p^1]. */
static void step_acc2(run_t *r, int k)
{
    const ex_accel_t *ac = r->ac;
    int p = k & 1;
    MPI_Request rq[2 * ST_NSIDES];

    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPIX_Acc_Irecv(r->S2, r->rbuf[p][s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s ^ 1,
                              r->comm, &rq[s]));
    ac->launch(r->S2, &r->k_pack[p]);
    for (int s = 0; s < ST_NSIDES; s++)
        EX_MPI(MPIX_Acc_Isend(r->S2, r->sbuf[s], r->cnt[s], MPI_DOUBLE, r->nbr[s], s, r->comm,
                              &rq[ST_NSIDES + s]));

    if (k > 0)
        ac->event_wait(r->evB, r->S); /* boundary(k-1) */
    ac->launch(r->S, &r->k_int[p]);
    ac->event_record(r->evA, r->S);

    BLOCKED(r, EX_MPI(MPIX_Acc_Waitall(r->S2, 2 * ST_NSIDES, rq, MPI_STATUSES_IGNORE)));
    if (k != r->fault_step)
        ac->launch(r->S2, &r->k_unpack[p]);
    if (k > 0)
        ac->event_wait(r->evA, r->S2); /* interior(k-1) */
    ac->launch(r->S2, &r->k_bnd[p]);
    ac->event_record(r->evB, r->S2);
}

typedef struct {
    double run, loop, blocked; /* seconds: whole run incl. final drain; host in loop; blocked */
} run_times_t;

#ifdef EX_HAVE_CUDA
static void ki_run(run_t *r)
{
    char why[256];
    if (st_ki_launch(&r->ki, r->S, why, sizeof why) != 0)
        ex_die("ki: %s", why);
}

/* seconds of CPU time of this thread or (CLOCK_PROCESS_CPUTIME_ID) of
 * every thread of the process: the library's progress thread too */
static double cpu_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* graph on CUDA: the ki kernel of r->gk steps captured alone -- its
 * partitions from the device word, which it advances -- and the same kernel
 * without its communication (no request handles, no word). The epochs'
 * starts and waits are not in the graph: the host makes them between
 * launches, one pair per gparts / gk launches (graph_launch). */
static void ki_start(run_t *r);
static void ki_wait(run_t *r);
static void graph_capture(run_t *r)
{
    char why[256];
    st_ki_t keep = r->ki;
    for (int c = 0; c < 2; c++) {
        r->ki.steps = r->gk;
        if (c == 1) {
            memset(r->ki.ds, 0, sizeof r->ki.ds);
            memset(r->ki.dr, 0, sizeof r->ki.dr);
            r->ki.word = NULL;
        }
        if (ex_cuda_graph_begin(r->S, why, sizeof why) != 0)
            ex_die("graph: %s", why);
        ki_run(r);
        if (ex_cuda_graph_end(r->S, c == 0 ? &r->gexec : &r->gexec_nocomm, why, sizeof why) != 0)
            ex_die("graph: %s", why);
    }
    r->ki = keep;
}

/* one launch of gk steps: with its communication (comm), the epoch is
 * started before the first launch of it and completed after the last (both
 * stream-ordered; the host never waits) */
static void graph_launch(run_t *r, int comm)
{
    char why[256];
    if (comm && r->gused == 0) {
        double c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        ki_start(r);
        r->groll += cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    if (ex_cuda_graph_launch(comm ? r->gexec : r->gexec_nocomm, r->S, why, sizeof why) != 0)
        ex_die("graph: %s", why);
    if (comm && (r->gused += r->gk) == r->gparts) {
        double c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        ki_wait(r);
        r->groll += cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        r->gused = 0;
    }
}

/* graph: complete the open epoch -- its remaining partitions by one plain
 * run of the kernel (it computes steps on the grids, which every run
 * starts afresh), then the wait */
static void graph_close(run_t *r)
{
    if (r->gused == 0)
        return;
    st_ki_t keep = r->ki;
    r->ki.steps = r->gparts - r->gused;
    ki_run(r);
    r->ki = keep;
    ki_wait(r);
    r->gused = 0;
}

/* acc-graph on CUDA: the even and odd acc steps captured (the library
 * records their messages as fire and wait nodes), and the same kernels
 * without the messages */
static void step_acc(run_t *r, int k);
static void acc_graph_capture(run_t *r)
{
    char why[256];
    if (ex_cuda_graph_begin(r->S, why, sizeof why) != 0)
        ex_die("acc-graph: %s", why);
    step_acc(r, 0);
    step_acc(r, 1);
    if (ex_cuda_graph_end(r->S, &r->agexec, why, sizeof why) != 0)
        ex_die("acc-graph: %s", why);
    if (ex_cuda_graph_begin(r->S, why, sizeof why) != 0)
        ex_die("acc-graph: %s", why);
    for (int p = 0; p < 2; p++) {
        r->ac->launch(r->S, &r->k_pack[p]);
        r->ac->launch(r->S, &r->k_int[p]);
        r->ac->launch(r->S, &r->k_unpack[p]);
        r->ac->launch(r->S, &r->k_bnd[p]);
    }
    if (ex_cuda_graph_end(r->S, &r->agexec_nocomm, why, sizeof why) != 0)
        ex_die("acc-graph: %s", why);
}

static void acc_graph_launch(run_t *r, int comm)
{
    char why[256];
    if (ex_cuda_graph_launch(comm ? r->agexec : r->agexec_nocomm, r->S, why, sizeof why) != 0)
        ex_die("acc-graph: %s", why);
}
#else
static void ki_run(run_t *r)
{
    (void)r;
    ex_die("ki: needs the CUDA backend");
}
static void graph_capture(run_t *r)
{
    (void)r;
    ex_die("graph: CUDA graphs need the CUDA backend");
}
static void graph_launch(run_t *r, int comm)
{
    (void)comm;
    graph_capture(r);
}
static void graph_close(run_t *r) { graph_capture(r); }
static void acc_graph_capture(run_t *r)
{
    (void)r;
    ex_die("acc-graph: CUDA graphs need the CUDA backend");
}
static void acc_graph_launch(run_t *r, int comm)
{
    (void)comm;
    acc_graph_capture(r);
}
#endif

/* ki: an epoch's start (every request) and its completion (one stream
 * Waitall), both on the compute stream */
static void ki_start(run_t *r)
{
    for (int q = 0; q < 2 * ST_NSIDES; q++)
        if (r->kreq[q] != MPI_REQUEST_NULL)
            EX_MPI(MPIX_Acc_Start(r->S, &r->kreq[q]));
}

static void ki_wait(run_t *r)
{
    MPI_Request rq[2 * ST_NSIDES];
    int nr = 0;
    for (int q = 0; q < 2 * ST_NSIDES; q++)
        if (r->kreq[q] != MPI_REQUEST_NULL)
            rq[nr++] = r->kreq[q];
    EX_MPI(MPIX_Acc_Waitall(r->S, nr, rq, MPI_STATUSES_IGNORE));
}

/* ki: one epoch of `steps` steps -- start, one kernel for every step, one
 * stream wait */
static void ki_epoch(run_t *r, int steps)
{
    ki_start(r);
    r->ki.steps = steps;
    ki_run(r);
    ki_wait(r);
}

static run_times_t run_once(run_t *r, int v, int steps)
{
    const ex_accel_t *ac = r->ac;
    run_times_t t;
    ac->launch(r->S, &r->k_init[0]);
    ac->launch(r->S, &r->k_init[1]);
    ac->stream_sync(r->S);
    if (v == V_ACC2) {
        ac->event_reset(r->evA);
        ac->event_reset(r->evB);
    }
    EX_MPI(MPI_Barrier(MPI_COMM_WORLD));

    r->t_blocked = 0;
    double t0 = ex_now();
    MPIX_Acc_hostgraph graph = NULL;
    if (v == V_GRAPH && r->gexec) {
        /* CUDA: the kernel of gk steps captured at the set-up, one launch
         * per gk steps (the host enqueues nothing else but an epoch's start
         * and wait once per gparts steps) */
        for (int k = 0; k < steps; k += r->gk)
            graph_launch(r, 1);
        steps = 0;
    } else if (v == V_ACCGRAPH && r->agexec) {
        /* CUDA: two acc steps with their messages captured at the set-up,
         * one launch per two steps */
        for (int k = 0; k + 1 < steps; k += 2)
            acc_graph_launch(r, 1);
        if (steps % 2) {
            /* plain messages on the graph's tags: not beside a launch */
            BLOCKED(r, ac->stream_sync(r->S));
            step_acc(r, steps - 1);
        }
        steps = 0;
    } else if (v == V_GRAPH || v == V_ACCGRAPH) {
        /* two steps (the grids swap every step) captured once, launched per
         * pair of steps: the host enqueues one launch per two steps */
        EX_MPI(MPIX_Acc_Hoststream_begin_capture(r->S));
        step_acc(r, 0);
        step_acc(r, 1);
        EX_MPI(MPIX_Acc_Hoststream_end_capture(r->S, &graph));
        for (int k = 0; k + 1 < steps; k += 2)
            EX_MPI(MPIX_Acc_Hostgraph_launch(graph, r->S));
        if (steps % 2) {
            /* plain messages on the graph's tags: not beside a launch */
            BLOCKED(r, ac->stream_sync(r->S));
            step_acc(r, steps - 1);
        }
        steps = 0;
    }
    if (v == V_KI) {
        /* one epoch per run: start, one kernel for every step, one stream wait */
        ki_epoch(r, steps);
        steps = 0;
    }
    for (int k = 0; k < steps; k++) {
        switch (v) {
        case V_MPI:
        case V_MPICA:
        case V_STREAMCOMM:
            step_mpi(r, k);
            break;
        case V_ACC:
        case V_ACCSX:
            step_acc(r, k);
            break;
        case V_ACC2:
            step_acc2(r, k);
            break;
        case V_CLASSIC:
            step_classic(r, k);
            break;
        }
    }
    double t1 = ex_now();
    ac->stream_sync(r->S);
    if (v == V_ACC2)
        ac->stream_sync(r->S2);
    double t2 = ex_now();
    if (graph) {
        unsigned long errs = 0;
        EX_MPI(MPIX_Acc_Hostgraph_errors(graph, &errs));
        if (errs)
            ex_die("graph: %lu operations of the graph's launches failed", errs);
        EX_MPI(MPIX_Acc_Hostgraph_free(&graph));
    }
    t.run = t2 - t0;
    t.loop = t1 - t0;
    t.blocked = r->t_blocked;
    return t;
}

#ifdef EX_HAVE_CUDA
/* graph and acc-graph on CUDA: the host's time per step of `launches`
 * launches of `launch_steps` steps each, with their communication
 * (launch(r, 1)) and of the same kernels captured without it (launch(r,
 * 0)) -- each loop timed alone, after the stream's work before it and a
 * barrier; every rank launches (the messages need their peers), the output
 * may be NULL. HC_ROUNDS rounds, the two graphs in alternating order, the
 * medians reported. out[g][m] (g: 0 with communication, 1 without):
 * m = 0, 1: wall and this thread's CPU per step of the back-to-back loop,
 * which include the driver's wait once its launch queue is full (the
 * slower graph reaches that sooner); 2, 3: the same for the launch calls
 * alone, launched in batches of 4 with a stream synchronization and a
 * barrier (not timed) after each -- the launch's own cost; 4: the process's CPU (every thread:
 * the library's progress thread too) over those batches; 5: the part of 3
 * spent in graph's epoch starts and waits (`launches` is one epoch). */
enum { HC_BATCH = 4, HC_ROUNDS = 5, HC_M = 6 };
static void graph_host_cost(run_t *r, void (*launch)(run_t *, int), int launches, int launch_steps,
                            double out[2][HC_M])
{
    const ex_accel_t *ac = r->ac;
    const double per_step = 1e6 / ((double)launch_steps * launches);
    const clockid_t thr = CLOCK_THREAD_CPUTIME_ID;
    double v[2][HC_M][HC_ROUNDS];
    for (int round = 0; round < HC_ROUNDS; round++)
        for (int o = 0; o < 2; o++) {
            const int g = o ^ (round & 1), comm = g == 0;
            ac->stream_sync(r->S);
            EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = ex_now(), c0 = cpu_s(thr);
            for (int k = 0; k < launches; k++)
                launch(r, comm);
            v[g][0][round] = (ex_now() - t0) * per_step;
            v[g][1][round] = (cpu_s(thr) - c0) * per_step;
            ac->stream_sync(r->S);
            EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
            double wb = 0.0, cb = 0.0, pb = 0.0, roll0 = r->groll;
            for (int k = 0; k < launches; k += HC_BATCH) {
                double b0 = ex_now(), d0 = cpu_s(thr), p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
                for (int j = k; j < k + HC_BATCH && j < launches; j++)
                    launch(r, comm);
                wb += ex_now() - b0;
                cb += cpu_s(thr) - d0;
                pb += cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
                ac->stream_sync(r->S);
                /* both graphs' batches start alike: after a barrier (the
                 * graph with communication also waits for the peer's
                 * steps in its synchronization) */
                EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
            }
            v[g][2][round] = wb * per_step;
            v[g][3][round] = cb * per_step;
            v[g][4][round] = pb * per_step;
            v[g][5][round] = (r->groll - roll0) * per_step;
        }
    if (out)
        for (int g = 0; g < 2; g++)
            for (int m = 0; m < HC_M; m++) {
                double lo, hi;
                ex_stats(v[g][m], HC_ROUNDS, &out[g][m], &lo, &hi);
            }
}
#endif

/* ki: a partitioned request pair per neighbour, `parts` partitions;
 * partition k = step k of an epoch */
static void ki_setup(run_t *r, int parts)
{
    const ex_accel_t *ac = r->ac;
    r->ki = (st_ki_t){.d = r->d, .g = {r->g[0], r->g[1]}, .steps = parts};
    r->ki.err = ac->alloc(sizeof(int), EX_MEM_DEVICE);
    int zero = 0;
    ac->copy(r->ki.err, &zero, sizeof zero);
    for (int s = 0; s < ST_NSIDES; s++) {
        r->kreq[s] = r->kreq[ST_NSIDES + s] = MPI_REQUEST_NULL;
        if (r->nbr[s] == MPI_PROC_NULL)
            continue;
        size_t bytes = (size_t)r->cnt[s] * sizeof(double) * (size_t)parts;
        r->ki.sbuf[s] = ac->alloc(bytes, EX_MEM_DEVICE);
        r->ki.rbuf[s] = ac->alloc(bytes, EX_MEM_DEVICE);
        /* the tags of the mpi loop: sent toward side s with tag s, received
         * from side s with the opposite side's tag */
        EX_MPI(MPIX_Acc_Precv_init(r->ki.rbuf[s], parts, r->cnt[s], MPI_DOUBLE, r->nbr[s], s ^ 1,
                                   r->comm, MPI_INFO_NULL, &r->kreq[s]));
        EX_MPI(MPIX_Acc_Psend_init(r->ki.sbuf[s], parts, r->cnt[s], MPI_DOUBLE, r->nbr[s], s,
                                   r->comm, MPI_INFO_NULL, &r->kreq[ST_NSIDES + s]));
        mpix_acc_dreq_t *dr, *ds;
        EX_MPI(MPIX_Acc_Prequest_get_device(r->kreq[s], &dr));
        EX_MPI(MPIX_Acc_Prequest_get_device(r->kreq[ST_NSIDES + s], &ds));
        r->ki.dr[s] = dr;
        r->ki.ds[s] = ds;
    }
}

static void ki_teardown(run_t *r)
{
    for (int q = 0; q < 2 * ST_NSIDES; q++)
        if (r->kreq[q] != MPI_REQUEST_NULL)
            EX_MPI(MPI_Request_free(&r->kreq[q]));
    for (int s = 0; s < ST_NSIDES; s++) {
        if (r->ki.sbuf[s])
            r->ac->free(r->ki.sbuf[s], EX_MEM_DEVICE);
        if (r->ki.rbuf[s])
            r->ac->free(r->ki.rbuf[s], EX_MEM_DEVICE);
    }
    if (r->ki.err)
        r->ac->free(r->ki.err, EX_MEM_DEVICE);
    memset(&r->ki, 0, sizeof r->ki);
}

static void variant_setup(run_t *r, int v, MPI_Comm cart)
{
    const ex_accel_t *ac = r->ac;
    r->bufkind = (v == V_MPI && ac->is_device) ? EX_MEM_PINNED : EX_MEM_DEVICE;
    for (int s = 0; s < ST_NSIDES; s++) {
        size_t bytes = (size_t)r->cnt[s] * sizeof(double);
        r->sbuf[s] = ac->alloc(bytes, r->bufkind);
        for (int p = 0; p < 2; p++)
            r->rbuf[p][s] = ac->alloc(bytes, r->bufkind);
    }
    r->resid = ac->alloc(sizeof(double), EX_MEM_DEVICE);
    r->resid_all = ac->alloc(sizeof(double), EX_MEM_DEVICE);
    build_ops(r);
    r->comm = cart;
    if (v == V_CLASSIC) {
        EX_MPI(MPI_Type_vector(r->d.ny, 1, (int)r->d.ld, MPI_DOUBLE, &r->col));
        EX_MPI(MPI_Type_commit(&r->col));
    }
    if (v == V_STREAMCOMM || v == V_CLASSIC) {
        /* The opt-in: one MPI_Comm_set_info on the loop's communicator,
         * with MPI-4's assertions that the loop posts no wildcard receive
         * (true of every halo exchange): they let the library's
         * stream-executed path carry the halos between processes of a
         * node (without them every message is a UCX message: classic at
         * 256^2, 2 x H100, 76e62bf: 2000 of 2000 by UCX) */
        MPI_Info info;
        EX_MPI(MPI_Comm_dup(cart, &r->comm));
        EX_MPI(MPI_Info_create(&info));
        EX_MPI(MPIX_Acc_Info_set_stream(info, r->S));
        EX_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
        EX_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
        EX_MPI(MPI_Comm_set_info(r->comm, info));
        EX_MPI(MPI_Info_free(&info));
    }
    if (v == V_ACCSX)
        ex_comm_dup_no_wildcards(cart, &r->comm);
    if (v == V_KI)
        ki_setup(r, r->steps);
    if (v == V_GRAPH && r->ac->is_device) {
        /* gk steps per launch; an epoch of gparts = gk x (launches per
         * epoch) partitions, the launches per epoch as --graph-epoch says or
         * as many as 256 MiB of partition buffers hold (at most 1000) */
        r->gk = 2;
        for (int k = 10; k >= 2; k -= 2)
            if (r->steps % k == 0) {
                r->gk = k;
                break;
            }
        size_t per_step = 0;
        for (int s = 0; s < ST_NSIDES; s++)
            if (r->nbr[s] != MPI_PROC_NULL)
                per_step += 2 * (size_t)r->cnt[s] * sizeof(double);
        long epoch = r->graph_epoch;
        if (!epoch) {
            epoch = per_step ? (long)((256u << 20) / per_step / (size_t)r->gk) : 1000;
            epoch = epoch < 1 ? 1 : epoch > 1000 ? 1000 : epoch;
        }
        if (epoch * r->gk > INT_MAX / 2)
            ex_die("graph: --graph-epoch %ld x %d steps is too many partitions", epoch, r->gk);
        r->gparts = (int)epoch * r->gk;
        r->gused = 0;
        ki_setup(r, r->gparts);
        r->gword = ac->alloc(sizeof *r->gword, EX_MEM_DEVICE);
        unsigned long long zero = 0;
        ac->copy(r->gword, &zero, sizeof zero);
        r->ki.word = r->gword;
        r->ki.parts = r->gparts;
        /* the captures, before any timed run; no library call is in them
         * (the epochs' starts and waits are the host's, between launches) */
        graph_capture(r);
    }
    if (v == V_ACCGRAPH && r->ac->is_device)
        acc_graph_capture(r);
    r->sync_before_send = !comm_is_stream_ordered(r->comm);
    if ((v == V_STREAMCOMM || v == V_CLASSIC) && r->sync_before_send)
        ex_die("%s: MPI_Comm_get_info does not report key %s after MPI_Comm_set_info", vname[v],
               MPIX_ACC_INFO_STREAM);
}

static void variant_teardown(run_t *r)
{
    if (r->col != MPI_DATATYPE_NULL)
        EX_MPI(MPI_Type_free(&r->col));
    r->col = MPI_DATATYPE_NULL;
    r->ac->free(r->resid, EX_MEM_DEVICE);
    r->ac->free(r->resid_all, EX_MEM_DEVICE);
    for (int s = 0; s < ST_NSIDES; s++) {
        r->ac->free(r->sbuf[s], r->bufkind);
        for (int p = 0; p < 2; p++)
            r->ac->free(r->rbuf[p][s], r->bufkind);
    }
}

/* ------------------------------------------------------------------ */
/* reference and checking                                              */

static uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Rank 0: the whole global grid as one domain, `steps` full sweeps.
 * Returns the final (gnx+2) x (gny+2) array on the host (malloc'd). */
static double *reference_run(const ex_accel_t *ac, ex_stream_t S, long gnx, long gny, int steps,
                             double *seconds)
{
    st_dims_t d = {
        .nx = (int)gnx, .ny = (int)gny, .ld = gnx + 2, .gx0 = 0, .gy0 = 0, .gnx = gnx, .gny = gny};
    size_t n = (size_t)(gnx + 2) * (size_t)(gny + 2);
    double *g[2] = {ac->alloc(n * sizeof(double), EX_MEM_DEVICE),
                    ac->alloc(n * sizeof(double), EX_MEM_DEVICE)};
    st_op_t init[2], full[2];
    ex_kernel_t kinit[2], kfull[2];
    for (int p = 0; p < 2; p++) {
        init[p] = (st_op_t){.kind = ST_OP_INIT, .d = d, .dst = g[p]};
        full[p] = (st_op_t){.kind = ST_OP_FULL, .d = d, .src = g[p], .dst = g[p ^ 1]};
        kinit[p] = kernel_of(&init[p]);
        kfull[p] = kernel_of(&full[p]);
    }
    double t0 = ex_now();
    ac->launch(S, &kinit[0]);
    ac->launch(S, &kinit[1]);
    for (int k = 0; k < steps; k++)
        ac->launch(S, &kfull[k & 1]);
    ac->stream_sync(S);
    *seconds = ex_now() - t0;
    double *h = malloc(n * sizeof(double));
    if (!h)
        ex_die("out of host memory for the reference (%zu doubles)", n);
    ac->copy(h, g[steps & 1], n * sizeof(double));
    ac->free(g[0], EX_MEM_DEVICE);
    ac->free(g[1], EX_MEM_DEVICE);
    return h;
}

/* On a device backend, recompute the reference with the host functions
 * (small grids only) and compare bitwise: checks the kernels against the
 * plain C code. Returns the number of differing points, -1 if skipped. */
static long long reference_host_crosscheck(const double *ref, long gnx, long gny, int steps)
{
    size_t n = (size_t)(gnx + 2) * (size_t)(gny + 2);
    if ((double)gnx * (double)gny * steps > 4e8)
        return -1;
    st_dims_t d = {.nx = (int)gnx, .ny = (int)gny, .ld = gnx + 2, .gnx = gnx, .gny = gny};
    double *g[2] = {malloc(n * sizeof(double)), malloc(n * sizeof(double))};
    if (!g[0] || !g[1])
        ex_die("out of host memory");
    for (int p = 0; p < 2; p++)
        st_host_run(&(st_op_t){.kind = ST_OP_INIT, .d = d, .dst = g[p]});
    for (int k = 0; k < steps; k++)
        st_host_run(&(st_op_t){.kind = ST_OP_FULL, .d = d, .src = g[k & 1], .dst = g[(k & 1) ^ 1]});
    long long bad = 0;
    for (long j = 1; j <= gny; j++)
        for (long i = 1; i <= gnx; i++)
            bad += bits_of(g[steps & 1][j * (gnx + 2) + i]) != bits_of(ref[j * (gnx + 2) + i]);
    free(g[0]);
    free(g[1]);
    return bad;
}

typedef struct {
    double maxdiff;
    uint64_t mismatches, bitsum;
} check_t;

/* Compare this rank's owned points of grid g (backend memory) with its
 * piece of the reference; reduce to rank 0. */
static check_t check_grid(const run_t *r, const double *g, const double *ref_local, double *hbuf)
{
    const st_dims_t *d = &r->d;
    size_t n = (size_t)d->ld * (size_t)(d->ny + 2);
    r->ac->copy(hbuf, g, n * sizeof(double));
    double maxdiff = 0;
    uint64_t mism = 0, bitsum = 0;
    for (int j = 1; j <= d->ny; j++)
        for (int i = 1; i <= d->nx; i++) {
            double a = hbuf[j * d->ld + i];
            bitsum += bits_of(a);
            if (ref_local) {
                double b = ref_local[(size_t)(j - 1) * d->nx + (i - 1)];
                if (bits_of(a) != bits_of(b)) {
                    mism++;
                    double df = fabs(a - b);
                    if (!(df <= maxdiff)) /* NaN propagates */
                        maxdiff = df;
                }
            }
        }
    check_t c = {0, 0, 0};
    uint64_t in[2] = {mism, bitsum}, out[2] = {0, 0};
    EX_MPI(MPI_Reduce(&maxdiff, &c.maxdiff, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    EX_MPI(MPI_Reduce(in, out, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD));
    c.mismatches = out[0];
    c.bitsum = out[1];
    return c;
}

/* ------------------------------------------------------------------ */
/* main                                                                */

typedef struct {
    long long n;
    double med[V_COUNT];
    int ran[V_COUNT], ok[V_COUNT];
} summary_t;

int main(int argc, char **argv)
{
    opts_t o;
    int rank, size;

    parse_opts(argc, argv, &o);
    ex_accel_preinit(o.backend); /* this rank's GPU current before MPI_Init */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int dims[2] = {o.px, o.py}, periods[2] = {0, 0}, coords[2];
    if (o.px && o.py && o.px * o.py != size)
        ex_die("--px %d x --py %d != %d ranks", o.px, o.py, size);
    EX_MPI(MPI_Dims_create(size, 2, dims));
    MPI_Comm cart;
    EX_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    EX_MPI(MPI_Cart_coords(cart, rank, 2, coords));
    int nbr[ST_NSIDES];
    EX_MPI(MPI_Cart_shift(cart, 0, 1, &nbr[ST_W], &nbr[ST_E]));
    EX_MPI(MPI_Cart_shift(cart, 1, 1, &nbr[ST_S], &nbr[ST_N]));

    char note[320];
    const ex_accel_t *ac =
        ex_accel_select(o.backend, ex_local_rank(MPI_COMM_WORLD), note, sizeof note);
    /* all ranks must use the same kind of backend */
    int is_dev = ac->is_device, all_dev = 0, any_dev = 0;
    MPI_Allreduce(&is_dev, &all_dev, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&is_dev, &any_dev, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all_dev != any_dev)
        ex_die("ranks disagree on the backend (some found a GPU, some did not); use --backend");

    FILE *csv = NULL;
    if (rank == 0) {
        printf("stencil2d: Jacobi 5-point, halo 1, double; %d ranks, process grid %d x %d "
               "(non-periodic)\n",
               size, dims[0], dims[1]);
        printf("backend: %s%s%s\n", ac->desc, note[0] ? "; " : "", note);
        printf("steps per run %d, warm-up runs %d, timed runs %d (median, min, max)\n", o.steps,
               o.warmup, o.repeats);
        printf("blocked%% = host time inside synchronizing calls in the loop (stream sync, "
               "Waitall) / run time;\nhost us/step = host time spent in the loop per step "
               "(the end-of-run drain is excluded)\n");
        if (o.csv) {
            csv = fopen(o.csv, "w");
            if (!csv)
                ex_die("cannot open %s: %s", o.csv, strerror(errno));
            fprintf(csv, "ranks,px,py,n_per_rank,gnx,gny,backend,variant,steps,repeats,"
                         "t_step_med_us,t_step_min_us,t_step_max_us,host_loop_us_per_step,"
                         "blocked_pct,checksum,ref_checksum,maxdiff,mismatches,check\n");
        }
        fflush(stdout);
    }

    /* ki needs the CUDA backend (its kernel) */
    if (!ac->is_device) {
        int kept = 0;
        for (int vi = 0; vi < o.nvariants; vi++) {
            if (o.variants[vi] == V_KI) {
                if (rank == 0)
                    printf("variant %s skipped: needs the CUDA backend (a cooperative kernel)\n",
                           vname[V_KI]);
                continue;
            }
            o.variants[kept++] = o.variants[vi];
        }
        o.nvariants = kept;
    }
    /* graph: its capture bakes in the steps, so no injected fault; on CUDA
     * launches of an even number of steps (the grids swap every step) */
    {
        int kept = 0;
        for (int vi = 0; vi < o.nvariants; vi++) {
            if (o.variants[vi] == V_ACCGRAPH && o.fault_step >= 0) {
                if (rank == 0)
                    printf("variant %s skipped: no --inject-fault with a captured step\n",
                           vname[V_ACCGRAPH]);
                continue;
            }
            if (o.variants[vi] == V_GRAPH &&
                (o.fault_step >= 0 || (ac->is_device && o.steps % 2 != 0))) {
                if (rank == 0)
                    printf("variant %s skipped: %s\n", vname[V_GRAPH],
                           o.fault_step >= 0 ? "no --inject-fault with a captured step"
                                             : "on CUDA it needs an even number of steps (each "
                                               "launch does an even number: the grids swap)");
                continue;
            }
            o.variants[kept++] = o.variants[vi];
        }
        o.nvariants = kept;
    }
    /* mpi-cuda-aware needs an MPI that takes device pointers */
    if (ac->is_device) {
        int cs = ex_mpi_cuda_support(), kept = 0;
        for (int vi = 0; vi < o.nvariants; vi++) {
            if (o.variants[vi] == V_MPICA && cs != 1) {
                if (rank == 0)
                    printf("variant %s skipped: %s\n", vname[V_MPICA], ex_mpi_cuda_why(cs));
                continue;
            }
            o.variants[kept++] = o.variants[vi];
        }
        o.nvariants = kept;
    }

    run_t *r = calloc(1, sizeof *r);
    r->ac = ac;
    r->col = MPI_DATATYPE_NULL;
    memcpy(r->nbr, nbr, sizeof nbr);
    r->S = ac->stream_create();
    r->S2 = ac->stream_create();
    r->evA = ac->event_create();
    r->evB = ac->event_create();
    r->fault_step = o.fault_step;
    r->graph_epoch = o.graph_epoch;
    r->steps = o.steps;
    if (rank == 0 && o.fault_step >= 0)
        printf("FAULT INJECTION: the halo unpack of step %d is skipped (results must FAIL)\n",
               o.fault_step);

    summary_t sum[MAX_SIZES];
    int failures = 0;

    for (int si = 0; si < o.nsizes; si++) {
        int n = (int)o.sizes[si];
        st_dims_t d = {.nx = n,
                       .ny = n,
                       .ld = n + 2,
                       .gx0 = (long)coords[0] * n,
                       .gy0 = (long)coords[1] * n,
                       .gnx = (long)dims[0] * n,
                       .gny = (long)dims[1] * n};
        r->d = d;
        for (int s = 0; s < ST_NSIDES; s++)
            r->cnt[s] = st_side_count(&d, s);
        size_t npts = (size_t)d.ld * (size_t)(d.ny + 2);
        r->g[0] = ac->alloc(npts * sizeof(double), EX_MEM_DEVICE);
        r->g[1] = ac->alloc(npts * sizeof(double), EX_MEM_DEVICE);
        double *hbuf = malloc(npts * sizeof(double));
        if (!hbuf)
            ex_die("out of host memory");

        summary_t *sm = &sum[si];
        memset(sm, 0, sizeof *sm);
        sm->n = n;

        if (rank == 0) {
            printf("\n== %d x %d points per rank, global %ld x %ld, process grid %d x %d, "
                   "%d steps\n",
                   n, n, d.gnx, d.gny, dims[0], dims[1], o.steps);
            fflush(stdout);
        }

        /* reference on rank 0, scattered to the ranks */
        double *ref_local = NULL;
        uint64_t ref_bitsum = 0;
        if (o.check) {
            ref_local = malloc((size_t)n * (size_t)n * sizeof(double));
            if (!ref_local)
                ex_die("out of host memory");
            if (rank == 0) {
                double tref = 0;
                double *ref = reference_run(ac, r->S, d.gnx, d.gny, o.steps, &tref);
                double rsum = 0;
                for (long j = 1; j <= d.gny; j++)
                    for (long i = 1; i <= d.gnx; i++) {
                        ref_bitsum += bits_of(ref[j * (d.gnx + 2) + i]);
                        rsum += ref[j * (d.gnx + 2) + i];
                    }
                printf("reference: rank 0, one %ld x %ld domain, %d steps on %s in %.3f s: "
                       "checksum 0x%016" PRIx64 ", sum %.17g\n",
                       d.gnx, d.gny, o.steps, ac->name, tref, ref_bitsum, rsum);
                if (ac->is_device) {
                    long long bad = reference_host_crosscheck(ref, d.gnx, d.gny, o.steps);
                    if (bad < 0)
                        printf("reference: host recomputation skipped (grid too large)\n");
                    else
                        printf("reference: host recomputation %s (%lld points differ)\n",
                               bad ? "DIFFERS from the GPU reference" : "bitwise equal", bad);
                    if (bad > 0)
                        failures++;
                }
                fflush(stdout);
                for (int q = 0; q < size; q++) {
                    int qc[2];
                    EX_MPI(MPI_Cart_coords(cart, q, 2, qc));
                    const double *base =
                        ref + ((long)qc[1] * n + 1) * (d.gnx + 2) + (long)qc[0] * n + 1;
                    if (q == 0) {
                        for (int j = 0; j < n; j++)
                            memcpy(ref_local + (size_t)j * n, base + (size_t)j * (d.gnx + 2),
                                   (size_t)n * sizeof(double));
                    } else {
                        MPI_Datatype blk;
                        EX_MPI(MPI_Type_vector(n, n, (int)(d.gnx + 2), MPI_DOUBLE, &blk));
                        EX_MPI(MPI_Type_commit(&blk));
                        EX_MPI(MPI_Send(base, 1, blk, q, 77, MPI_COMM_WORLD));
                        MPI_Type_free(&blk);
                    }
                }
                free(ref);
            } else {
                EX_MPI(MPI_Recv(ref_local, n * n, MPI_DOUBLE, 0, 77, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
            }
        }

        if (rank == 0) {
            printf("%-20s %11s %10s %10s %12s %9s  %-18s %-10s %s\n", "variant", "t/step us", "min",
                   "max", "host us/step", "blocked%", "checksum", "max|diff|", "check");
            fflush(stdout);
        }

        for (int vi = 0; vi < o.nvariants; vi++) {
            int v = o.variants[vi];
            variant_setup(r, v, cart);
            int nruns = o.warmup + o.repeats;
            double *tstep = calloc((size_t)nruns, sizeof(double));
            double *tloop = calloc((size_t)nruns, sizeof(double));
            double *tblk = calloc((size_t)nruns, sizeof(double));
            check_t worst = {0, 0, 0};
            uint64_t last_bitsum = 0;
            int all_equal = 1;
            for (int run = 0; run < nruns; run++) {
                run_times_t t = run_once(r, v, o.steps);
                double in[3] = {t.run, t.loop, t.blocked}, mx[3];
                EX_MPI(MPI_Allreduce(in, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
                if (run >= o.warmup) {
                    int i = run - o.warmup;
                    tstep[i] = mx[0] / o.steps * 1e6;
                    tloop[i] = mx[1] / o.steps * 1e6;
                    tblk[i] = 100.0 * mx[2] / mx[0];
                }
                check_t c = check_grid(r, r->g[o.steps & 1], ref_local, hbuf);
                if (rank == 0) {
                    if (!isnan(worst.maxdiff) && (isnan(c.maxdiff) || c.maxdiff > worst.maxdiff))
                        worst.maxdiff = c.maxdiff;
                    worst.mismatches += c.mismatches;
                    if (o.check && (c.mismatches || c.bitsum != ref_bitsum))
                        all_equal = 0;
                    if (run > 0 && c.bitsum != last_bitsum)
                        all_equal = 0; /* runs must be deterministic even without a reference */
                    last_bitsum = c.bitsum;
                }
            }
            if (rank == 0) {
                double med, mn, mx, lmed, lmn, lmx, bmed, bmn, bmx;
                ex_stats(tstep, o.repeats, &med, &mn, &mx);
                ex_stats(tloop, o.repeats, &lmed, &lmn, &lmx);
                ex_stats(tblk, o.repeats, &bmed, &bmn, &bmx);
                const char *verdict = !all_equal ? "FAIL" : o.check ? "bitwise" : "unchecked";
                char cks[32];
                snprintf(cks, sizeof cks, "0x%016" PRIx64, last_bitsum);
                printf("%-20s %11.2f %10.2f %10.2f %12.2f %9.1f  %-18s %-10.3g %s", vname[v], med,
                       mn, mx, lmed, bmed, cks, worst.maxdiff, verdict);
                if (worst.mismatches)
                    printf(" (%" PRIu64 " points differ over %d runs)", worst.mismatches, nruns);
                printf("\n");
                fflush(stdout);
                if (csv)
                    fprintf(csv,
                            "%d,%d,%d,%d,%ld,%ld,%s,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.2f,%s,"
                            "0x%016" PRIx64 ",%.6g,%" PRIu64 ",%s\n",
                            size, dims[0], dims[1], n, d.gnx, d.gny, ac->name, vname[v], o.steps,
                            o.repeats, med, mn, mx, lmed, bmed, cks, ref_bitsum, worst.maxdiff,
                            worst.mismatches, verdict);
                sm->med[v] = med;
                sm->ran[v] = 1;
                sm->ok[v] = all_equal;
                if (!all_equal)
                    failures++;
            }
            free(tstep);
            free(tloop);
            free(tblk);
#ifdef EX_HAVE_CUDA
            if (r->agexec || r->gexec) {
                /* graph: the open epoch completed first, so that the loops
                 * span one epoch each, with its start and its wait */
                double hc[2][HC_M];
                const int is_graph = r->gexec != NULL;
                if (is_graph)
                    graph_close(r);
                const int spl = is_graph ? r->gk : 2;
                const int launches = is_graph          ? r->gparts / r->gk
                                     : o.steps / 2 > 0 ? o.steps / 2
                                                       : 1;
                graph_host_cost(r, is_graph ? graph_launch : acc_graph_launch, launches, spl,
                                rank == 0 ? hc : NULL);
                if (rank == 0) {
                    const char *what = is_graph ? "the same kernel captured without its "
                                                  "communication"
                                                : "the same steps captured without their messages";
                    printf("%-20s host per step, launching the graph (%d launches of %d steps, "
                           "median of %d rounds): %.3f us (thread cpu %.3f); %s: %.3f us (cpu "
                           "%.3f)\n",
                           vname[v], launches, spl, HC_ROUNDS, hc[0][0], hc[0][1], what, hc[1][0],
                           hc[1][1]);
                    printf("%-20s host per step, the launch calls alone (batches of %d, then a "
                           "wait and a barrier)%s: %.3f us (thread cpu %.3f, process cpu %.3f); "
                           "without the "
                           "communication: %.3f us (cpu %.3f, process cpu %.3f)\n",
                           vname[v], HC_BATCH, is_graph ? ", with the epoch's start and wait" : "",
                           hc[0][2], hc[0][3], hc[0][4], hc[1][2], hc[1][3], hc[1][4]);
                    if (is_graph)
                        printf("%-20s host per step, of which the epoch's start and wait: %.4f us "
                               "(thread cpu, once per %d steps)\n",
                               vname[v], hc[0][5], r->gparts);
                }
                if (!is_graph) {
                    ex_cuda_graph_free(r->agexec);
                    ex_cuda_graph_free(r->agexec_nocomm);
                    r->agexec = r->agexec_nocomm = NULL;
                }
            }
#endif
            if (v == V_KI || r->gexec) {
                if (r->gexec) {
                    graph_close(r);
                    ac->stream_sync(r->S);
                }
                int kerr = 0;
                ac->copy(&kerr, r->ki.err, sizeof kerr);
                if (kerr)
                    ex_die("%s: %d device calls failed (partitioned requests)", vname[v], kerr);
#ifdef EX_HAVE_CUDA
                ex_cuda_graph_free(r->gexec);
                ex_cuda_graph_free(r->gexec_nocomm);
#endif
                r->gexec = r->gexec_nocomm = NULL;
                if (r->gword)
                    ac->free(r->gword, EX_MEM_DEVICE);
                r->gword = NULL;
                ki_teardown(r);
            }
            if (v == V_CLASSIC) {
                /* the residual every member got from MPI_Allreduce: the same bits */
                double res = 0, lo = 0, hi = 0;
                ac->stream_sync(r->S);
                ac->copy(&res, r->resid_all, sizeof res);
                EX_MPI(MPI_Allreduce(&res, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
                EX_MPI(MPI_Allreduce(&res, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
                if (rank == 0)
                    printf("  %s: residual after the last run %.17g%s\n", vname[v], res,
                           lo == hi ? "" : " (the ranks' residuals DIFFER)");
                if (lo != hi)
                    failures++;
            }
            if (v == V_STREAMCOMM || v == V_ACCSX || v == V_CLASSIC)
                EX_MPI(MPI_Comm_free(&r->comm));
            variant_teardown(r);
            r->comm = MPI_COMM_NULL;
        }
        free(ref_local);
        free(hbuf);
        ac->free(r->g[0], EX_MEM_DEVICE);
        ac->free(r->g[1], EX_MEM_DEVICE);
    }

    if (rank == 0) {
        printf("\nsummary: median time per step in us (speed-up vs mpi); %d ranks, %s\n", size,
               ac->name);
        printf("%-14s", "points/rank");
        for (int vi = 0; vi < o.nvariants; vi++)
            printf(" %-20s", vname[o.variants[vi]]);
        printf(" check\n");
        for (int si = 0; si < o.nsizes; si++) {
            char lab[32];
            snprintf(lab, sizeof lab, "%lld^2", sum[si].n);
            printf("%-14s", lab);
            int ok = 1;
            for (int vi = 0; vi < o.nvariants; vi++) {
                int v = o.variants[vi];
                char cell[48];
                if (v != V_MPI && sum[si].ran[V_MPI])
                    snprintf(cell, sizeof cell, "%.2f (%.2fx)", sum[si].med[v],
                             sum[si].med[V_MPI] / sum[si].med[v]);
                else
                    snprintf(cell, sizeof cell, "%.2f", sum[si].med[v]);
                printf(" %-20s", cell);
                ok &= sum[si].ok[v];
            }
            printf(" %s\n", !ok       ? "FAIL"
                            : o.check ? "all bitwise equal to the reference"
                                      : "unchecked (runs agree)");
        }
        printf("%s\n", failures ? "RESULT: FAIL" : "RESULT: OK");
        if (csv)
            fclose(csv);
        fflush(stdout);
    }

    ac->event_destroy(r->evA);
    ac->event_destroy(r->evB);
    ac->stream_destroy(r->S);
    ac->stream_destroy(r->S2);
    ac->finalize();
    free(r);
    MPI_Comm_free(&cart);
    EX_MPI(MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_Finalize();
    return failures ? 1 : 0;
}
