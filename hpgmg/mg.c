/*
 * hpgmg/mg.c - multigrid hierarchy (MGBuild), execution plan, V-cycle,
 * F-cycle (FMGSolve), V-cycle solve (MGSolve) and the timing breakdown.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver.h"

#define HG_AGGLOMERATION_START 8 /* boxes halve down to 8^3, then agglomerate */
#define HG_BOTTOM_REDUCTION 1e-3

/* execution of each level as seen over all ranks: 0 cpu, 1 gpu, 2 mixed */
static int g_gpu_mode[64];
/* --graph: level l's legs take the coarser level's part (restriction,
 * interpolation) into their graph, on every rank alike */
static int g_graph_coarse[64];
static int graph_level(const hg_mg_t *mg, const hg_level_t *L);

static void graphs_free(hg_mg_t *mg);

void hg_mg_build(hg_mg_t *mg, int boxes_in, int box_dim)
{
    double t0 = MPI_Wtime();
    const int radius = hg_radius(mg->op), ghosts = radius;
    int nprocs[64], dim[64], bin[64], bdim[64];
    int coarse_dim = boxes_in * box_dim, nl = 1;
    while (coarse_dim >= 2 * mg->bottom_min_dim && (coarse_dim & 1) == 0) {
        nl++;
        coarse_dim /= 2;
    }
    nprocs[0] = mg->num_ranks;
    dim[0] = boxes_in * box_dim;
    bin[0] = boxes_in;
    bdim[0] = box_dim;
    /* HPGMG's coarsening: halve the boxes down to 8^3, then agglomerate 8:1,
   * then one box (fewer ranks), then halve that box down to the bottom */
    int n = 1, again = nl > 1;
    while (again && n < 64) {
        const int fb = bdim[n - 1], fp = nprocs[n - 1], fd = dim[n - 1], fbin = bin[n - 1];
        again = 0;
        if (fb % 2 == 0 && fb > HG_AGGLOMERATION_START && fb / 2 >= radius) {
            nprocs[n] = fp;
            dim[n] = fd / 2;
            bdim[n] = fb / 2;
            bin[n] = fbin;
            again = 1;
        } else if (fbin % 2 == 0 && fb >= radius) {
            nprocs[n] = fp;
            dim[n] = fd / 2;
            bdim[n] = fb;
            bin[n] = fbin / 2;
            again = 1;
        } else if (coarse_dim != 1 && fd == 2 * coarse_dim && fd / 2 >= radius) {
            nprocs[n] = 1;
            dim[n] = fd / 2;
            bdim[n] = fd / 2;
            bin[n] = 1;
            again = 1;
        } else if (coarse_dim != 1 && fd == 4 * coarse_dim && fb / 2 >= radius) {
            nprocs[n] = coarse_dim < fp ? coarse_dim : fp;
            dim[n] = fd / 2;
            bdim[n] = fb / 2;
            bin[n] = fbin;
            again = 1;
        } else if (coarse_dim != 1 && fd == 8 * coarse_dim && fb / 2 >= radius) {
            nprocs[n] = coarse_dim * coarse_dim < fp ? coarse_dim * coarse_dim : fp;
            dim[n] = fd / 2;
            bdim[n] = fb / 2;
            bin[n] = fbin;
            again = 1;
        } else if (fb % 2 == 0 && fb / 2 >= radius) {
            nprocs[n] = fp;
            dim[n] = fd / 2;
            bdim[n] = fb / 2;
            bin[n] = fbin;
            again = 1;
        }
        if (again && dim[n] < mg->bottom_min_dim)
            again = 0;
        if (again)
            n++;
    }
    mg->nlevels = n;
    mg->levels = calloc(n, sizeof(hg_level_t *));
    for (int l = 0; l < n; l++) {
        mg->levels[l] = calloc(1, sizeof(hg_level_t));
        hg_level_create(mg, mg->levels[l], l, bin[l], bdim[l], ghosts, HG_VEC_RESERVED, nprocs[l]);
        mg->levels[l]->h = 1.0 / (double)dim[l];
        if (l == 0)
            hg_init_problem(mg, mg->levels[0]);
        else if (mg->op == HG_OP_7PT)
            hg_exact_solution(mg, mg->levels[l]);
    }
    hg_level_add_vectors(mg, mg->levels[n - 1], HG_VEC_RESERVED + HG_BICGSTAB_VECTORS);

    hg_level_build_comm(mg);
    if (mg->my_rank == 0) {
        fprintf(stdout, "\n  Building exchange, restriction and interpolation lists... ");
        fflush(stdout);
    }
    for (int l = 0; l < n; l++) {
        for (int s = 0; s < HG_NUM_SHAPES; s++)
            hg_build_exchange(mg, mg->levels[l], s);
        if (l + 1 < n) {
            for (int k = HG_T_RESTRICT_CELL; k <= HG_T_RESTRICT_FACE_K; k++)
                hg_build_restriction(mg, mg->levels[l], mg->levels[l + 1], k);
            hg_build_interpolation(mg, mg->levels[l], mg->levels[l + 1]);
        }
    }
    if (mg->my_rank == 0)
        fprintf(stdout, "done\n\n");
    for (int l = 0; l < n; l++)
        hg_rebuild_operator(mg, mg->levels[l], l ? mg->levels[l - 1] : NULL);
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(&dt, &mg->mgbuild_time, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

void hg_mg_prepare_execution(hg_mg_t *mg)
{
    int need_stream = 0, need_cuda = 0, any_gpu = 0;
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        const long cells = (long)L->nb * L->box_dim * L->box_dim * L->box_dim;
        L->on_gpu = mg->use_cuda && cells > mg->gpu_threshold;
        need_cuda |= L->on_gpu;
    }
    MPI_Allreduce(&need_cuda, &any_gpu, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    /* CPU levels: with GPU levels in the run they use plain MPI on the host
   * thread (as GPUDirect-Async HPGMG does) unless --cpu-levels stream; without
   * GPU levels the acc/streamcomm backends run them on a host stream */
    if (mg->cpu_streams < 0)
        mg->cpu_streams = !any_gpu;
    if (mg->backend != HG_BACKEND_MPI && mg->cpu_streams)
        need_stream = 1;
    if (need_stream && hg_exec_init(&mg->hoststream, HG_EXEC_HOSTSTREAM, "host stream") != 0) {
        fprintf(stderr, "hpgmg-fv: cannot create an mpix-acc host stream\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (need_cuda && hg_exec_init(&mg->cuda, HG_EXEC_CUDA, "CUDA stream") != 0) {
        fprintf(stderr, "hpgmg-fv: cannot create a CUDA stream\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        L->exec = L->on_gpu ? &mg->cuda : (need_stream ? &mg->hoststream : &mg->host);
        L->backend = L->exec->kind == HG_EXEC_HOST ? HG_BACKEND_MPI : mg->backend;
        int v[2] = {L->on_gpu && L->nb > 0, L->nb > 0}, s[2];
        MPI_Allreduce(v, s, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        g_gpu_mode[l] = s[0] == 0 ? 0 : s[0] == s[1] ? 1 : 2;
        /* ki: partitioned requests pair only with partitioned requests, so a
         * level is ki only where every rank of its communicator (every party
         * of its programs) runs it on its GPU */
        int off_gpu = L->comm != MPI_COMM_NULL && !L->on_gpu, any_off = 0;
        MPI_Allreduce(&off_gpu, &any_off, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (L->backend == HG_BACKEND_KI && any_off)
            L->backend = HG_BACKEND_ACC;
    }
    /* GPU levels: data and lists into device memory; CPU levels stay in pinned
   * host memory, which the GPU kernels at the GPU/CPU boundary read/write */
    for (int l = 0; l < mg->nlevels; l++)
        if (mg->levels[l]->on_gpu) {
            hg_level_to_device(mg->levels[l]);
            hg_prog_prepare_gpu(mg, mg->levels[l]);
        }
    if (mg->backend == HG_BACKEND_STREAMCOMM)
        hg_comm_attach_streams(mg);
    /* --graph: a leg's graph takes the coarser level's part only where it
     * runs on the same stream on every rank active here (a rank without
     * boxes there runs it on the host: the legs of all ranks must capture
     * the same messages, or their launches pair with different epochs) */
    for (int l = 0; l + 1 < mg->nlevels && mg->graph; l++) {
        hg_level_t *L = mg->levels[l], *C = mg->levels[l + 1];
        int mine = !L->active || (C->exec == L->exec && graph_level(mg, C)), all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        g_graph_coarse[l] = all;
    }
    mg->setup_done = 1;
    if (mg->my_rank == 0) {
        fprintf(stdout, "\n  Execution plan (GPU threshold %ld local cells):\n", mg->gpu_threshold);
        for (int l = 0; l < mg->nlevels; l++) {
            hg_level_t *L = mg->levels[l];
            const char *be[] = HG_BACKEND_NAMES;
            fprintf(stdout, "    level %2d  %5d^3  %s%s, %s backend\n", l, L->dim,
                    g_gpu_mode[l] == 1   ? "GPU (CUDA stream)"
                    : g_gpu_mode[l] == 2 ? "mixed GPU/CPU"
                                         : "CPU",
                    g_gpu_mode[l] == 1 ? "" : (need_stream ? " (host stream)" : " (host thread)"),
                    be[L->backend]);
        }
        fflush(stdout);
    }
}

void hg_mg_destroy(hg_mg_t *mg)
{
    hg_comm_ki_finish(mg);
    hg_exec_drain();
    graphs_free(mg);
    if (mg->my_rank == 0) {
        fprintf(stdout, "attempting to free the restriction and interpolation lists... done\n");
    }
    for (int l = mg->nlevels - 1; l >= 0; l--) {
        if (mg->my_rank == 0)
            fprintf(stdout, "attempting to free the %5d^3 level... ", mg->levels[l]->dim);
        hg_level_free(mg->levels[l]);
        free(mg->levels[l]);
        if (mg->my_rank == 0)
            fprintf(stdout, "done\n");
    }
    free(mg->levels);
    if (mg->hoststream.stream)
        hg_exec_fini(&mg->hoststream);
    if (mg->cuda.stream)
        hg_exec_fini(&mg->cuda);
}

/* ---- graphs (--graph) --------------------------------------------------
 * A V-cycle's work on level l between two visits of the coarser levels is
 * a "leg": down = smooth, residual, restriction to l+1, zero there; up =
 * interpolation from l+1, smooth. With --graph a leg whose operations all
 * run on one stream (CUDA or host stream; the restriction/interpolation
 * only when level l+1 runs there too) is run plainly at its first call
 * (which sets up whatever it needs: the library's per-peer state, scratch),
 * captured at its second and launched as one graph from then on. Every
 * rank decides alike (the level's execution mode and backend are the same
 * on all ranks of a level that is not mixed), so the messages of the
 * graphs match among the ranks' launches in the order they run (mpix-acc's
 * capture of point-to-point calls, api.md 3). ki levels: the run kernels
 * are captured, their slots taken from a device word the graph advances, so
 * epochs span launches (started and completed by the host between them, one
 * per --ki-runs runs); the host's run counters are made launch-invariant by
 * comm.c (hg_comm_ki_*). */
enum { HG_LEG_DOWN = 0, HG_LEG_UP = 1 };
struct hg_gentry {
    int level, leg, e, R; /* (the coarser level's part and the interpolation: fixed per run) */
    int seen;
    hg_graph_t *g;
    hg_ki_graph_t *ki; /* its ki programs (comm.h), or NULL */
    struct hg_gentry *next;
};

static int graph_level(const hg_mg_t *mg, const hg_level_t *L)
{
    return mg->graph && g_gpu_mode[L->id] != 2 && hg_exec_can_capture(L->exec) &&
           (L->backend == HG_BACKEND_ACC || L->backend == HG_BACKEND_STREAMCOMM ||
            L->backend == HG_BACKEND_KI);
}

static void leg_down(hg_mg_t *mg, hg_level_t *L, hg_level_t *C, int e, int R, int with_coarse)
{
    hg_smooth(mg, L, e, R);
    hg_residual(mg, L, HG_VEC_TEMP, e, R);
    if (with_coarse) {
        hg_restriction(mg, C, R, L, HG_VEC_TEMP, HG_T_RESTRICT_CELL);
        hg_zero(mg, C, e);
    }
}

static void leg_up(hg_mg_t *mg, hg_level_t *L, hg_level_t *C, int e, int R, int with_coarse)
{
    if (with_coarse)
        hg_interpolation(mg, L, e, 1.0, C, e, hg_interp_vcycle(mg));
    hg_smooth(mg, L, e, R);
}

/* the table entry of a leg (made at its first call) */
static struct hg_gentry *graph_entry(hg_mg_t *mg, const hg_level_t *L, int leg, int e, int R)
{
    struct hg_gentry *x = mg->graphs;
    while (x && !(x->level == L->id && x->leg == leg && x->e == e && x->R == R))
        x = x->next;
    if (x)
        return x;
    x = calloc(1, sizeof(*x));
    if (!x) {
        fprintf(stderr, "hpgmg-fv: out of memory (graph table)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    *x = (struct hg_gentry){.level = L->id, .leg = leg, .e = e, .R = R, .next = mg->graphs};
    mg->graphs = x;
    return x;
}

typedef void (*hg_leg_fn)(hg_mg_t *, hg_level_t *, hg_level_t *, int, int, int);

/* run leg `leg` of level L (coarser level C): plainly, or as its graph */
static void run_leg(hg_mg_t *mg, int leg, hg_level_t *L, hg_level_t *C, int e, int R)
{
    const hg_leg_fn fn = leg == HG_LEG_DOWN ? leg_down : leg_up;
    if (!graph_level(mg, L)) {
        fn(mg, L, C, e, R, 1);
        return;
    }
    const int with_coarse = g_graph_coarse[L->id];
    if (!with_coarse && leg == HG_LEG_UP) /* the interpolation first, on its own context */
        hg_interpolation(mg, L, e, 1.0, C, e, hg_interp_vcycle(mg));
    struct hg_gentry *x = graph_entry(mg, L, leg, e, R);
    if (!x->g && x->seen++ == 0) {
        fn(mg, L, C, e, R, with_coarse); /* the first call: plainly, setting everything up */
    } else {
        if (!x->g) {
            x->ki = hg_comm_ki_capture_begin(mg, L, with_coarse ? C : NULL);
            hg_exec_capture_begin(L->exec);
            fn(mg, L, C, e, R, with_coarse);
            hg_comm_ki_capture_end(mg, x->ki);
            x->g = hg_exec_capture_end(L->exec);
            if (!x->g) {
                fprintf(stderr, "hpgmg-fv: level %d: its %s leg could not be captured (--graph)\n",
                        L->id, leg == HG_LEG_DOWN ? "down" : "up");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            mg->graphs_made++;
        }
        hg_comm_ki_launch_begin(x->ki);
        hg_exec_graph_launch(L->exec, x->g);
        hg_comm_ki_launch_end(x->ki);
        mg->graph_launches++;
    }
    if (!with_coarse && leg == HG_LEG_DOWN) { /* the restriction on the coarser level's context */
        hg_restriction(mg, C, R, L, HG_VEC_TEMP, HG_T_RESTRICT_CELL);
        hg_zero(mg, C, e);
    }
}

static void graphs_free(hg_mg_t *mg)
{
    for (struct hg_gentry *x = mg->graphs, *n; x; x = n) {
        n = x->next;
        hg_exec_graph_free(x->g);
        hg_comm_ki_graph_free(x->ki);
        free(x);
    }
    mg->graphs = NULL;
}

/* ---- cycles ------------------------------------------------------------ */
static void vcycle(hg_mg_t *mg, int e, int R, int l)
{
    hg_level_t *L = mg->levels[l];
    if (!L->active)
        return;
    if (l == mg->nlevels - 1) {
        double t = hg_now();
        hg_bicgstab(mg, L, e, R, HG_BOTTOM_REDUCTION);
        L->t.total += hg_now() - t;
        return;
    }
    hg_level_t *C = mg->levels[l + 1];
    double t = hg_now();
    run_leg(mg, HG_LEG_DOWN, L, C, e, R);
    L->t.total += hg_now() - t;
    vcycle(mg, e, R, l + 1);
    t = hg_now();
    run_leg(mg, HG_LEG_UP, L, C, e, R);
    L->t.total += hg_now() - t;
}

double hg_fmg_solve(hg_mg_t *mg, int on, int u, int f, double rtol, double *rel_out)
{
    (void)rtol; /* one F-cycle, as HPGMG's default build (no V-cycles after it) */
    mg->solves++;
    mg->last_cycles = 1;
    hg_level_t *T = mg->levels[on];
    if (!T->active)
        return 0.0;
    const int e = u, R = HG_VEC_R, bottom = mg->nlevels - 1;
    if (mg->my_rank == 0) {
        fprintf(stdout, "FMGSolve... ");
        fflush(stdout);
    }
    const double start = hg_now();
    double t = hg_now();
    hg_red_t nf; /* read at the end: no host wait for it inside the cycle */
    hg_norm_begin(mg, T, f, &nf);
    hg_axpby(mg, T, R, 1.0, f, 0.0, -1);
    T->t.total += hg_now() - t;
    for (int l = on; l < bottom; l++) { /* restrict the right-hand side to the bottom */
        t = hg_now();
        hg_restriction(mg, mg->levels[l + 1], R, mg->levels[l], R, HG_T_RESTRICT_CELL);
        mg->levels[l]->t.total += hg_now() - t;
    }
    t = hg_now();
    if (mg->levels[bottom]->active) {
        if (bottom > on)
            hg_zero(mg, mg->levels[bottom], e);
        hg_bicgstab(mg, mg->levels[bottom], e, R, HG_BOTTOM_REDUCTION);
    }
    mg->levels[bottom]->t.total += hg_now() - t;
    for (int l = bottom - 1; l >= on; l--) { /* high-order interpolation, then one V-cycle */
        t = hg_now();
        hg_interpolation(mg, mg->levels[l], e, 0.0, mg->levels[l + 1], e, hg_interp_fcycle(mg));
        mg->levels[l]->t.total += hg_now() - t;
        mg->levels[l]->vcycles_from_this_level++;
        vcycle(mg, e, R, l);
    }
    t = hg_now();
    hg_residual(mg, T, HG_VEC_TEMP, e, f);
    const double norm_r = hg_norm(mg, T, HG_VEC_TEMP);
    const double norm_f = hg_red_end(mg, &nf); /* the wait above covered it */
    T->t.total += hg_now() - t;
    const double dt = hg_now() - start;
    mg->mgsolve_time += dt;
    const double rel = norm_r / norm_f;
    if (mg->my_rank == 0) {
        fprintf(stdout, "f-cycle     norm=%1.15e  rel=%1.15e  done (%f seconds)\n", norm_r, rel,
                dt);
        fflush(stdout);
    }
    if (rel_out)
        *rel_out = rel;
    return norm_r;
}

double hg_mg_solve(hg_mg_t *mg, int on, int u, int f, double rtol, double *rel_out)
{
    mg->solves++;
    hg_level_t *T = mg->levels[on];
    if (!T->active)
        return 0.0;
    const int R = HG_VEC_R;
    if (mg->my_rank == 0) {
        fprintf(stdout, "MGSolve... ");
        fflush(stdout);
    }
    const double start = hg_now();
    double t = hg_now();
    const double norm_f = hg_norm(mg, T, f);
    hg_zero(mg, T, u);
    hg_axpby(mg, T, R, 1.0, f, 0.0, -1);
    T->t.total += hg_now() - t;
    double norm_r = 0.0, rel = 0.0;
    mg->last_cycles = 0;
    for (int v = 0; v < 20; v++) {
        mg->last_cycles++;
        T->vcycles_from_this_level++;
        vcycle(mg, u, R, on);
        t = hg_now();
        hg_residual(mg, T, HG_VEC_TEMP, u, f);
        norm_r = hg_norm(mg, T, HG_VEC_TEMP);
        T->t.total += hg_now() - t;
        rel = norm_r / norm_f;
        if (mg->my_rank == 0) {
            fprintf(stdout, "%sv-cycle=%2d  norm=%1.15e  rel=%1.15e  ", v ? "\n           " : "",
                    v + 1, norm_r, rel);
            fflush(stdout);
        }
        if (rel < rtol)
            break;
    }
    const double dt = hg_now() - start;
    mg->mgsolve_time += dt;
    if (mg->my_rank == 0)
        fprintf(stdout, "done (%f seconds)\n", dt);
    if (rel_out)
        *rel_out = rel;
    return norm_r;
}

/* ---- timers ------------------------------------------------------------- */
void hg_reset_timers(hg_mg_t *mg)
{
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        memset(&L->t, 0, sizeof(L->t));
        L->krylov_iterations = 0;
        L->vcycles_from_this_level = 0;
    }
    mg->mgsolve_time = 0.0;
    mg->solves = 0;
    mg->reductions_on_streams = 0;
    mg->graph_launches = 0; /* (graphs_made: over the run) */
    mg->host.syncs = mg->hoststream.syncs = mg->cuda.syncs = 0;
    mg->host.sync_time = mg->hoststream.sync_time = mg->cuda.sync_time = 0.0;
}

typedef double (*getter_t)(const hg_level_t *);
#define GET(name, expr)                                                                            \
    static double name(const hg_level_t *L) { return expr; }
GET(g_smooth, L->t.smooth)
GET(g_residual, L->t.residual)
GET(g_apply, L->t.apply_op)
GET(g_blas1, L->t.blas1)
GET(g_bc, L->t.bc)
GET(g_coll, L->t.collectives)
GET(g_total, L->t.total)
GET(g_r_total, L->t.restriction.total)
GET(g_r_local, L->t.restriction.local)
GET(g_r_pack, L->t.restriction.pack)
GET(g_r_unpack, L->t.restriction.unpack)
GET(g_r_send, L->t.restriction.send)
GET(g_r_recv, L->t.restriction.recv)
GET(g_r_wait, L->t.restriction.wait)
GET(g_i_total, L->t.interpolation.total)
GET(g_i_local, L->t.interpolation.local)
GET(g_i_pack, L->t.interpolation.pack)
GET(g_i_unpack, L->t.interpolation.unpack)
GET(g_i_send, L->t.interpolation.send)
GET(g_i_recv, L->t.interpolation.recv)
GET(g_i_wait, L->t.interpolation.wait)
GET(g_g_total, L->t.ghost.total)
GET(g_g_local, L->t.ghost.local)
GET(g_g_pack, L->t.ghost.pack)
GET(g_g_unpack, L->t.ghost.unpack)
GET(g_g_send, L->t.ghost.send)
GET(g_g_recv, L->t.ghost.recv)
GET(g_g_wait, L->t.ghost.wait)

static void row(hg_mg_t *mg, int from, const char *label, getter_t get, double scale)
{
    double total = 0.0;
    printf("%-26s", label);
    for (int l = from; l < mg->nlevels; l++) {
        double v = scale * get(mg->levels[l]);
        total += v;
        printf("%12.6f ", v);
    }
    printf("%12.6f\n", total);
}

static void rule(hg_mg_t *mg, int from)
{
    printf("------------------        ");
    for (int l = from; l <= mg->nlevels; l++)
        printf("------------ ");
    printf("\n");
}

void hg_print_timing(hg_mg_t *mg, int from)
{
    if (mg->my_rank != 0 || mg->solves == 0)
        return;
    const double s = 1.0 / mg->solves; /* average per solve */
    const char *isend = "  MPI_Isend", *irecv = "  MPI_Irecv", *wait = "  MPI_Waitall";
    if (mg->backend == HG_BACKEND_ACC || mg->backend == HG_BACKEND_KI) {
        isend = "  MPIX_Acc_Isend";
        irecv = "  MPIX_Acc_Irecv";
        wait = mg->backend == HG_BACKEND_KI ? "  MPIX_Acc_Start/Waitall" : "  MPIX_Acc_Waitall";
    }
    printf("\n\n");
    printf("%-26s", "level");
    for (int l = from; l < mg->nlevels; l++)
        printf("%12d ", l - from);
    printf("\n%-26s", "level dimension");
    for (int l = from; l < mg->nlevels; l++)
        printf("%10d^3 ", mg->levels[l]->dim);
    printf("\n%-26s", "box dimension");
    for (int l = from; l < mg->nlevels; l++)
        printf("%10d^3 ", mg->levels[l]->box_dim);
    printf("       total\n%-26s", "execution (GPU/CPU)");
    for (int l = from; l < mg->nlevels; l++)
        printf("%12s ", g_gpu_mode[l] == 1 ? "GPU" : g_gpu_mode[l] == 2 ? "mixed" : "CPU");
    printf("\n");
    rule(mg, from);
    row(mg, from, "smooth", g_smooth, s);
    row(mg, from, "residual", g_residual, s);
    row(mg, from, "applyOp", g_apply, s);
    row(mg, from, "BLAS1", g_blas1, s);
    row(mg, from, "Boundary Conditions", g_bc, s);
    row(mg, from, "Restriction", g_r_total, s);
    row(mg, from, "  local restriction", g_r_local, s);
    row(mg, from, "  pack MPI buffers", g_r_pack, s);
    row(mg, from, "  unpack MPI buffers", g_r_unpack, s);
    row(mg, from, isend, g_r_send, s);
    row(mg, from, irecv, g_r_recv, s);
    row(mg, from, wait, g_r_wait, s);
    row(mg, from, "Interpolation", g_i_total, s);
    row(mg, from, "  local interpolation", g_i_local, s);
    row(mg, from, "  pack MPI buffers", g_i_pack, s);
    row(mg, from, "  unpack MPI buffers", g_i_unpack, s);
    row(mg, from, isend, g_i_send, s);
    row(mg, from, irecv, g_i_recv, s);
    row(mg, from, wait, g_i_wait, s);
    row(mg, from, "Ghost Zone Exchange", g_g_total, s);
    row(mg, from, "  local exchange", g_g_local, s);
    row(mg, from, "  pack MPI buffers", g_g_pack, s);
    row(mg, from, "  unpack MPI buffers", g_g_unpack, s);
    row(mg, from, isend, g_g_send, s);
    row(mg, from, irecv, g_g_recv, s);
    row(mg, from, wait, g_g_wait, s);
    row(mg, from, "MPI_collectives", g_coll, s);
    rule(mg, from);
    row(mg, from, "Total by level", g_total, s);
    double gpu = 0.0;
    int ngpu = 0;
    for (int l = from; l < mg->nlevels; l++)
        if (g_gpu_mode[l] == 1) {
            gpu += s * mg->levels[l]->t.total;
            ngpu++;
        }
    printf("\n");
    printf("   Total time in MGBuild  %12.6f seconds\n", mg->mgbuild_time);
    printf("   Total time in MGSolve  %12.6f seconds\n", s * mg->mgsolve_time);
    printf("      number of v-cycles  %12d\n",
           mg->levels[from]->vcycles_from_this_level / mg->solves);
    printf("Bottom solver iterations  %12d\n",
           mg->levels[mg->nlevels - 1]->krylov_iterations / mg->solves);
    if (ngpu)
        printf("   MGSolve on GPU levels  %12.6f seconds (%d levels)%s\n", gpu, ngpu,
               mg->skip_exchange ? " [--skip-exchange: messages skipped, a bound]" : "");
    else
        printf("   MGSolve on GPU levels  %12s (no level runs on a GPU)\n", "-");
    printf("     host waits on streams  %10.1f per solve (%.6f seconds)\n",
           (double)(mg->hoststream.syncs + mg->cuda.syncs) * s,
           (mg->hoststream.sync_time + mg->cuda.sync_time) * s);
    printf("  reductions on the streams %10.1f per solve (norms and dots enqueued with their "
           "MPI_Allreduce)\n",
           (double)mg->reductions_on_streams * s);
    if (mg->graph)
        printf("     graphs (--graph)       %10.1f launches per solve, %ld captured (a V-cycle's "
               "legs per level)\n",
               (double)mg->graph_launches * s, mg->graphs_made);
    if (mg->backend != HG_BACKEND_MPI) {
        printf("   (%s backend: on stream levels the rows time the host side - launches and\n"
               "    enqueued calls; the execution shows up where the host waits: norms, dot\n"
               "    products, the drain at a GPU/CPU switch",
               mg->backend == HG_BACKEND_KI ? "ki"
               : mg->backend == HG_BACKEND_ACC
                   ? (mg->no_wildcards ? "acc-sx" : "acc")
                   : (mg->no_wildcards ? "streamcomm-sx" : "streamcomm"));
        if (mg->backend == HG_BACKEND_KI)
            printf(".  ki levels: the pack row is a run's kernel (pack, pready, local tiles,\n"
                   "    parrived, unpack, boundary conditions), the waitall row the epochs'\n"
                   "    starts and completions (one each per %d runs of a program)",
                   mg->ki_runs);
        if (!mg->cpu_streams)
            printf(".  CPU levels: plain MPI on the host thread");
        printf(")\n");
    }
    printf("\n\n");
    fflush(stdout);
}
