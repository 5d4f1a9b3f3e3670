/*
 * hpgmg/main.c - hpgmg-fv: an HPGMG-FV style geometric multigrid benchmark
 * with MPI and stream-ordered (mpix-acc) communication backends.
 *
 *   hpgmg-fv <log2_box_dim> <target_boxes_per_rank> [options]
 *
 * Like HPGMG-FV it builds the largest cube of boxes_in^3 boxes with
 * boxes_in^3 <= target x ranks, benchmarks one FMG solve (F-cycle) at h, 2h
 * and 4h, prints the timing breakdown per level and the performance summary,
 * then solves the three sizes again for the Richardson error analysis.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver.h"
#ifdef HG_HAVE_CUDA
#include "cuda_iface.h"
#endif

typedef struct {
    int log2_box_dim, target;
    int boxes_in; /* --boxes-in: force boxes per side (0: HPGMG's choice) */
    int min_solves;
    double min_time;
    int check;      /* print CHECK lines (hex norms) for tests */
    int richardson; /* run the Richardson analysis */
} opts_t;

static void usage(int rank)
{
    if (rank)
        return;
    fprintf(
        stderr,
        "usage: hpgmg-fv <log2_box_dim> <target_boxes_per_rank> [options]\n"
        "  --operator 7pt|fv4          discretisation (default fv4)\n"
        "  --smoother gsrb|cheby       smoother (default gsrb)\n"
        "  --cycle f|v                 F-cycle (one FMG solve, default) or V-cycles to 1e-10\n"
        "  --backend mpi|acc|streamcomm|acc-sx|streamcomm-sx|ki\n"
        "                              communication backend (default mpi); -sx: the same with\n"
        "                              --no-wildcards; ki: GPU levels send from their kernels\n"
        "                              (partitioned requests; CUDA builds), other levels as acc\n"
        "  --ki-runs N                 ki: program runs per epoch of its requests (default 32;\n"
        "                              with --graph at least 8)\n"
        "  --no-pdl                    launch the GPU kernels without programmatic dependent\n"
        "                              launch (default: with it, sm_90 and newer)\n"
        "  --no-wildcards              MPI-4 assertions mpi_assert_no_any_source/_tag on the\n"
        "                              level communicators (mpix-acc's stream-executed path)\n"
        "  --graph                     acc/streamcomm/ki: capture each level's V-cycle legs\n"
        "                              (smooth, residual, restriction / interpolation, smooth)\n"
        "                              on CUDA and host streams once and launch them as graphs\n"
        "  --skip-exchange             GPU levels skip their messages after set-up: a bound\n"
        "                              without communication (wrong results, unchecked)\n"
        "  --gpu-threshold N           levels with more than N local cells run on the GPU\n"
        "                              (default 10000; -1: never)\n"
        "  --cpu-levels host|stream    acc/streamcomm: run the CPU levels with plain MPI on the\n"
        "                              host thread, or on an mpix-acc host stream (default:\n"
        "                              stream when no level runs on a GPU, else host)\n"
        "  --min-solves N              warm-up and timed solves per size (default 10)\n"
        "  --min-time S                run the timed solves for at least S seconds (default 1)\n"
        "  --boxes-in N                use N^3 boxes instead of HPGMG's choice\n"
        "  --no-richardson             skip the Richardson analysis\n"
        "  --check                     print CHECK lines (exact hex values) for tests\n");
}

static int parse(int argc, char **argv, opts_t *o, hg_mg_t *mg)
{
    int pos = 0;
    o->min_solves = 10;
    o->min_time = 1.0;
    o->richardson = 1;
    mg->op = HG_OP_FV4;
    mg->smoother = HG_SMOOTH_GSRB;
    mg->cycle = HG_CYCLE_F;
    mg->backend = HG_BACKEND_MPI;
    mg->gpu_threshold = 10000;
    mg->cpu_streams = -1;
    mg->ki_runs = 32;
    mg->pdl = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (OPT("--operator")) {
            if (!strcmp(v, "7pt") || !strcmp(v, "7-point"))
                mg->op = HG_OP_7PT;
            else if (!strcmp(v, "fv4"))
                mg->op = HG_OP_FV4;
            else
                return -1;
        } else if (OPT("--smoother")) {
            if (!strcmp(v, "gsrb"))
                mg->smoother = HG_SMOOTH_GSRB;
            else if (!strcmp(v, "cheby") || !strcmp(v, "chebyshev"))
                mg->smoother = HG_SMOOTH_CHEBY;
            else
                return -1;
        } else if (OPT("--cycle")) {
            if (!strcmp(v, "f"))
                mg->cycle = HG_CYCLE_F;
            else if (!strcmp(v, "v"))
                mg->cycle = HG_CYCLE_V;
            else
                return -1;
        } else if (OPT("--backend")) {
            if (!strcmp(v, "mpi"))
                mg->backend = HG_BACKEND_MPI;
            else if (!strcmp(v, "acc"))
                mg->backend = HG_BACKEND_ACC;
            else if (!strcmp(v, "streamcomm"))
                mg->backend = HG_BACKEND_STREAMCOMM;
            else if (!strcmp(v, "acc-sx"))
                mg->backend = HG_BACKEND_ACC, mg->no_wildcards = 1;
            else if (!strcmp(v, "streamcomm-sx"))
                mg->backend = HG_BACKEND_STREAMCOMM, mg->no_wildcards = 1;
            else if (!strcmp(v, "ki"))
                mg->backend = HG_BACKEND_KI;
            else
                return -1;
        } else if (OPT("--ki-runs")) {
            mg->ki_runs = atoi(v);
            if (mg->ki_runs < 1)
                return -1;
        } else if (!strcmp(a, "--no-wildcards")) {
            mg->no_wildcards = 1;
        } else if (!strcmp(a, "--no-pdl")) {
            mg->pdl = 0;
        } else if (!strcmp(a, "--graph")) {
            mg->graph = 1;
        } else if (!strcmp(a, "--skip-exchange")) {
            mg->skip_exchange = 1;
        } else if (OPT("--gpu-threshold")) {
            mg->gpu_threshold = atol(v);
        } else if (OPT("--cpu-levels")) {
            if (!strcmp(v, "stream"))
                mg->cpu_streams = 1;
            else if (!strcmp(v, "host"))
                mg->cpu_streams = 0;
            else
                return -1;
        } else if (OPT("--min-solves")) {
            o->min_solves = atoi(v);
        } else if (OPT("--min-time")) {
            o->min_time = atof(v);
        } else if (OPT("--boxes-in")) {
            o->boxes_in = atoi(v);
        } else if (!strcmp(a, "--no-richardson")) {
            o->richardson = 0;
        } else if (!strcmp(a, "--check")) {
            o->check = 1;
        } else if (a[0] != '-' && pos == 0) {
            o->log2_box_dim = atoi(a);
            pos++;
        } else if (a[0] != '-' && pos == 1) {
            o->target = atoi(a);
            pos++;
        } else {
            return -1;
        }
#undef OPT
    }
    if (pos != 2 || o->min_solves < 1)
        return -1;
    if (mg->graph && mg->backend == HG_BACKEND_MPI) {
        if (mg->my_rank == 0)
            fprintf(stderr, "hpgmg-fv: --graph needs a stream-ordered backend "
                            "(acc|streamcomm|acc-sx|streamcomm-sx|ki): mpi waits on the host\n");
        return -1;
    }
    /* a ki level's graphed leg keeps its runs in one epoch (comm.h): an
     * exchange program runs up to 7 times in a leg (a 6-sweep smooth and the
     * residual) */
    if (mg->graph && mg->backend == HG_BACKEND_KI && mg->ki_runs < HG_KI_GRAPH_MIN_RUNS) {
        if (mg->my_rank == 0)
            fprintf(stderr,
                    "hpgmg-fv: --graph with --backend ki needs --ki-runs >= %d (a V-cycle leg "
                    "runs an exchange program up to %d times, all in one epoch)\n",
                    HG_KI_GRAPH_MIN_RUNS, HG_KI_GRAPH_MIN_RUNS - 1);
        return -1;
    }
#ifdef HPGMG_NO_MPIX
    if (mg->backend != HG_BACKEND_MPI) {
        if (mg->my_rank == 0)
            fprintf(stderr,
                    "hpgmg-fv: this build has no mpix-acc (HPGMG_NO_MPIX): only --backend mpi\n");
        return -1;
    }
#endif
    return 0;
}

static double solve(hg_mg_t *mg, int level, double *rel)
{
    hg_zero(mg, mg->levels[level], HG_VEC_U);
    if (mg->cycle == HG_CYCLE_F)
        return hg_fmg_solve(mg, level, HG_VEC_U, HG_VEC_F, 1e-10, rel);
    return hg_mg_solve(mg, level, HG_VEC_U, HG_VEC_F, 1e-10, rel);
}

/* bit pattern of a double, for exact comparisons in tests */
static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

/* warm up, then time at least min_solves solves and min_time seconds */
static double bench(hg_mg_t *mg, const opts_t *o, int level)
{
    int min_solves = o->min_solves;
    double per_solve = 0.0;
    int identical = 1, total = 0;
    uint64_t first = 0;
    for (int timing = 0; timing <= 1; timing++) {
        if (timing && per_solve > 0.0 && o->min_time / per_solve > min_solves)
            min_solves = (int)(o->min_time / per_solve);
        if (mg->my_rank == 0) {
            if (!timing)
                fprintf(stdout,
                        "\n\n===== Warming up by running %d solves "
                        "==========================================\n",
                        min_solves);
            else
                fprintf(stdout,
                        "\n\n===== Running %d solves "
                        "========================================================\n",
                        min_solves);
            fflush(stdout);
        }
        hg_reset_timers(mg);
        double start = MPI_Wtime();
        for (int s = 0; s < min_solves; s++) {
            double rel;
            double nrm = solve(mg, level, &rel);
            if (!timing && s == 0)
                first = bits(nrm);
            if (bits(nrm) != first)
                identical = 0;
            total++;
        }
        hg_exec_drain();
        if (!timing) {
            per_solve = (MPI_Wtime() - start) / min_solves;
            MPI_Bcast(&per_solve, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        }
    }
    if (o->check && mg->my_rank == 0)
        fprintf(stdout, "CHECK repeat level=%d solves=%d identical=%d\n", level, total, identical);
    return mg->mgsolve_time / mg->solves;
}

/* Richardson bands.  The observed order only approaches 4 (fv4) / 2 (7-point)
 * as h -> 0, so each band is centred on the value this discretisation gives
 * for that fine-grid size (it is the same, to 10 digits, for 1x32^3, 8x16^3 and
 * 64x8^3 boxes, and bit-identical for any number of ranks).  Measured (see
 * hpgmg/README.md): fv4 1.027 (16^3), 1.966 (32^3), 3.247 (64^3), 3.625 (128^3),
 * 3.978 (256^3, = HPGMG's published value); 7-point 1.004, 1.617, 1.853, 1.949
 * (one F-cycle).
 * From 64^3 on the bands exclude the order of a wrong (2nd-order) fv4. */
static void band(const hg_mg_t *mg, int n, double *lo, double *hi)
{
    /* one F-cycle (default) */
    static const double fv4_f[6][2] = {{0.8, 1.3},  {1.8, 2.15}, {3.1, 3.4},
                                       {3.5, 3.75}, {3.9, 4.05}, {3.95, 4.05}};
    static const double p7_f[6][2] = {{0.8, 1.2}, {1.5, 1.75},  {1.78, 1.93},
                                      {1.9, 2.0}, {1.95, 2.05}, {1.97, 2.03}};
    /* V-cycles to 1e-10 (the discretisation error alone): fv4 0.976, 2.220, 2.779,
   * 3.671 and 7-point 1.064, 1.647, 1.857, 1.939 for 16^3 .. 128^3 */
    static const double fv4_v[6][2] = {{0.8, 1.3},  {2.05, 2.4}, {2.6, 2.95},
                                       {3.55, 3.8}, {3.85, 4.1}, {3.9, 4.1}};
    static const double p7_v[6][2] = {{0.85, 1.25}, {1.5, 1.75},  {1.78, 1.93},
                                      {1.9, 2.0},   {1.95, 2.05}, {1.97, 2.03}};
    int i = n <= 16 ? 0 : n <= 32 ? 1 : n <= 64 ? 2 : n <= 128 ? 3 : n <= 256 ? 4 : 5;
    const double(*t)[2] = mg->op == HG_OP_FV4 ? (mg->cycle == HG_CYCLE_F ? fv4_f : fv4_v)
                                              : (mg->cycle == HG_CYCLE_F ? p7_f : p7_v);
    *lo = t[i][0];
    *hi = t[i][1];
}

/* 7-point: order of the true error ||u^h - u_exact|| between h and 2h
 * (measured 1.575, 1.818, 1.929, 1.970 for 16^3 .. 128^3 with one F-cycle,
 * 1.599, 1.818, 1.916, 1.961 with V-cycles) */
static void exact_band(int n, double *lo, double *hi)
{
    static const double t[6][2] = {{1.45, 1.7}, {1.72, 1.9},  {1.88, 1.97},
                                   {1.94, 2.0}, {1.96, 2.04}, {1.97, 2.03}};
    int i = n <= 16 ? 0 : n <= 32 ? 1 : n <= 64 ? 2 : n <= 128 ? 3 : n <= 256 ? 4 : 5;
    *lo = t[i][0];
    *hi = t[i][1];
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--features")) { /* for scripts: no MPI needed */
#ifdef HPGMG_NO_MPIX
        printf("backends=mpi");
#elif defined(HG_HAVE_CUDA)
        printf("backends=mpi,acc,streamcomm,ki");
#else
        printf("backends=mpi,acc,streamcomm");
#endif
#ifdef HG_HAVE_CUDA
        printf(" cuda=yes\n");
#else
        printf(" cuda=no\n");
#endif
        return 0;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    hg_mg_t mg_s, *mg = &mg_s;
    memset(mg, 0, sizeof(*mg));
    MPI_Comm_rank(MPI_COMM_WORLD, &mg->my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mg->num_ranks);
    opts_t o;
    memset(&o, 0, sizeof(o));
    if (parse(argc, argv, &o, mg) != 0) {
        usage(mg->my_rank);
        MPI_Finalize();
        return 1;
    }
    if (mg->my_rank == 0) {
        const char *names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                               "MPI_THREAD_MULTIPLE"};
        int p = provided == MPI_THREAD_SINGLE       ? 0
                : provided == MPI_THREAD_FUNNELED   ? 1
                : provided == MPI_THREAD_SERIALIZED ? 2
                                                    : 3;
        fprintf(stdout, "Requested MPI_THREAD_FUNNELED, got %s\n", names[p]);
        fprintf(stdout, "%d MPI Tasks of 1 threads\n", mg->num_ranks);
    }
    if (o.log2_box_dim < 1 || o.log2_box_dim > 9 || o.target < 1) {
        if (mg->my_rank == 0)
            fprintf(stderr, "log2_box_dim must be in 1..9 and target_boxes_per_rank >= 1\n");
        MPI_Finalize();
        return 1;
    }

    /* ---- GPU ------------------------------------------------------------ */
#ifdef HG_HAVE_CUDA
    if (mg->gpu_threshold >= 0) {
        MPI_Comm node;
        int local_rank = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mg->my_rank, MPI_INFO_NULL,
                            &node);
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_free(&node);
        char name[256] = "";
        int ndev = hg_cuda_init(local_rank, name, sizeof(name));
        hg_cuda_set_pdl(mg->pdl);
        mg->use_cuda = ndev > 0;
        int any = 0;
        MPI_Allreduce(&mg->use_cuda, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (mg->my_rank == 0) {
            if (mg->use_cuda)
                fprintf(stdout, "rank 0: %d visible GPU(s), using %s\n", ndev, name);
            else
                fprintf(stdout, "rank 0: no GPU visible: every level runs on the CPU\n");
        }
    }
#else
    if (mg->my_rank == 0)
        fprintf(stdout, "built without CUDA: every level runs on the CPU\n");
#endif

    /* ---- problem size, as HPGMG-FV chooses it ------------------------------ */
    const int box_dim = 1 << o.log2_box_dim;
    int boxes_in = -1;
    if (o.boxes_in > 0) {
        boxes_in = o.boxes_in;
    } else {
        const int64_t target = (int64_t)o.target * mg->num_ranks;
        for (int64_t bi = 1; bi < 1000; bi++) {
            if (bi * bi * bi > target)
                break;
            int64_t c = box_dim * bi;
            while (c % 2 == 0)
                c /= 2;
            if (c <= 11)
                boxes_in = (int)bi;
        }
    }
    if (boxes_in < 1) {
        if (mg->my_rank == 0)
            fprintf(stderr, "failed to find an acceptable problem size\n");
        MPI_Finalize();
        return 1;
    }
    mg->bottom_min_dim = 1;
    if (mg->my_rank == 0) {
        const char *be[] = HG_BACKEND_NAMES;
        fprintf(stdout,
                "\n  operator=%s  smoother=%s  cycle=%s  backend=%s%s  GPU threshold=%ld cells\n",
                mg->op == HG_OP_FV4 ? "fv4 (4th order finite volume)"
                                    : "7-point (2nd order, variable coefficient)",
                mg->smoother == HG_SMOOTH_GSRB ? "GSRB" : "Chebyshev",
                mg->cycle == HG_CYCLE_F ? "F-cycle" : "V-cycle", be[mg->backend],
                mg->graph ? " (graphs)" : "", mg->gpu_threshold);
        fprintf(stdout, "\n\n===== Benchmark setup "
                        "==========================================================\n");
        fprintf(stdout, "  Creating Poisson (a=0.000000, b=1.000000) test problem\n");
        fflush(stdout);
    }
    hg_mg_build(mg, boxes_in, box_dim);
    if (mg->nlevels < 3 && mg->my_rank == 0)
        fprintf(stderr, "hpgmg-fv: only %d levels: the 2h/4h benchmarks and Richardson need 3\n",
                mg->nlevels);
    hg_mg_prepare_execution(mg);
    const int nsizes = mg->nlevels < 3 ? mg->nlevels : 3;

    /* ---- benchmark h, 2h, 4h ---------------------------------------------- */
    double avg[3] = {0, 0, 0};
    for (int l = 0; l < nsizes; l++) {
        if (l > 0)
            hg_restriction(mg, mg->levels[l], HG_VEC_F, mg->levels[l - 1], HG_VEC_F,
                           HG_T_RESTRICT_CELL);
        avg[l] = bench(mg, &o, l);
        if (mg->my_rank == 0)
            fprintf(stdout, "\n\n===== Timing Breakdown "
                            "=========================================================\n");
        hg_print_timing(mg, l);
    }
    if (mg->my_rank == 0) {
        fprintf(stdout, "\n\n===== Performance Summary "
                        "======================================================\n");
        for (int l = 0; l < nsizes; l++) {
            const double dof = (double)mg->levels[l]->dim * mg->levels[l]->dim * mg->levels[l]->dim;
            fprintf(stdout, "  h=%0.15e  DOF=%0.15e  time=%0.6f  DOF/s=%0.3e  MPI=%d  OMP=%d\n",
                    mg->levels[l]->h, dof, avg[l], dof / avg[l], mg->num_ranks, 1);
        }
    }

    /* ---- Richardson error analysis ------------------------------------------ */
    int failed = 0;
    if (o.richardson && nsizes == 3) {
        if (mg->my_rank == 0)
            fprintf(stdout, "\n\n===== Richardson error analysis "
                            "================================================\n");
        hg_reset_timers(mg);
        double nrm[3], rel[3];
        int cyc[3];
        for (int l = 0; l < 3; l++) {
            if (l > 0)
                hg_restriction(mg, mg->levels[l], HG_VEC_F, mg->levels[l - 1], HG_VEC_F,
                               HG_T_RESTRICT_CELL);
            nrm[l] = solve(mg, l, &rel[l]);
            cyc[l] = mg->last_cycles;
        }
        hg_level_t *L0 = mg->levels[0], *L1 = mg->levels[1], *L2 = mg->levels[2];
        hg_restriction(mg, L1, HG_VEC_TEMP, L0, HG_VEC_U, HG_T_RESTRICT_CELL);
        hg_restriction(mg, L2, HG_VEC_TEMP, L1, HG_VEC_U, HG_T_RESTRICT_CELL);
        hg_axpby(mg, L1, HG_VEC_TEMP, 1.0, HG_VEC_U, -1.0, HG_VEC_TEMP);
        hg_axpby(mg, L2, HG_VEC_TEMP, 1.0, HG_VEC_U, -1.0, HG_VEC_TEMP);
        const double e2h = hg_norm(mg, L1, HG_VEC_TEMP); /* ||u^2h - R u^h||   */
        const double e4h = hg_norm(mg, L2, HG_VEC_TEMP); /* ||u^4h - R u^2h||  */
        const double order = log(e4h / e2h) / log(2.0);
        double lo, hi;
        band(mg, L0->dim, &lo, &hi);
        const int ok = order >= lo && order <= hi;
        failed |= !ok;
        if (mg->my_rank == 0) {
            fprintf(stdout, "  h=%0.15e  ||error||=%0.15e\n", L0->h, e2h);
            fprintf(stdout,
                    "  order=%0.3f  (expected %s; band for a %d^3 fine grid [%.2f, %.2f]: %s)\n",
                    order, mg->op == HG_OP_FV4 ? "-> 4" : "-> 2", L0->dim, lo, hi,
                    ok ? "PASS" : "FAIL");
        }
        double ex[3] = {0, 0, 0};
        if (mg->op == HG_OP_7PT) { /* manufactured solution: the true error of each solve */
            for (int l = 0; l < 3; l++) {
                hg_axpby(mg, mg->levels[l], HG_VEC_TEMP, 1.0, HG_VEC_U, -1.0, HG_VEC_UTRUE);
                ex[l] = hg_norm(mg, mg->levels[l], HG_VEC_TEMP);
            }
            if (mg->my_rank == 0) {
                for (int l = 0; l < 3; l++)
                    fprintf(stdout, "  h=%0.15e  ||u-u_exact||=%0.15e\n", mg->levels[l]->h, ex[l]);
            }
            const double eorder = log(ex[1] / ex[0]) / log(2.0);
            double elo, ehi;
            exact_band(L0->dim, &elo, &ehi);
            const int eok = eorder >= elo && eorder <= ehi;
            failed |= !eok;
            if (mg->my_rank == 0)
                fprintf(
                    stdout,
                    "  order of ||u-u_exact|| (h vs 2h)=%0.3f  (band for %d^3 [%.2f, %.2f]: %s)\n",
                    eorder, L0->dim, elo, ehi, eok ? "PASS" : "FAIL");
            if (o.check && mg->my_rank == 0)
                fprintf(stdout, "CHECK exact_order=%.6f band_ok=%d\n", eorder, eok);
        }
        if (o.check && mg->my_rank == 0) {
            for (int l = 0; l < 3; l++)
                fprintf(stdout, "CHECK solve=%d norm=%016llx rel=%.17g cycles=%d\n", l,
                        (unsigned long long)bits(nrm[l]), rel[l], cyc[l]);
            fprintf(stdout, "CHECK error=%016llx %.17g order=%.6f band_ok=%d\n",
                    (unsigned long long)bits(e2h), e2h, order, ok);
            if (mg->op == HG_OP_7PT)
                for (int l = 0; l < 3; l++)
                    fprintf(stdout, "CHECK exact%d=%016llx %.17g\n", l,
                            (unsigned long long)bits(ex[l]), ex[l]);
            fflush(stdout);
        }
    }

    if (mg->my_rank == 0)
        fprintf(stdout, "\n\n===== Deallocating memory "
                        "======================================================\n");
    hg_mg_destroy(mg);
    if (mg->my_rank == 0) {
        fprintf(stdout, "\n\n===== Done "
                        "=====================================================================\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
