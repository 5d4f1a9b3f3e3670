/*
 * hpgmg/level.h - levels of the multigrid hierarchy: boxes, their Z-Morton
 * distribution over ranks, vectors, ghost zones, communicators, timers and
 * the communication programs of each level.
 */
#ifndef HPGMG_LEVEL_H
#define HPGMG_LEVEL_H

#include <mpi.h>

#include "defs.h"
#include "exec.h"
#include "ops.h"

/* max norms one level may have begun and not ended (hg_red_t) */
#define HG_RED_NORM_SLOTS 4
/* ki with --graph: the least --ki-runs (a leg's runs of one program stay in
 * one epoch: up to 7, a 6-sweep smooth and the residual) */
#define HG_KI_GRAPH_MIN_RUNS 8

/* time split of one distributed operation (seconds, summed over calls) */
typedef struct {
    double total, local, pack, unpack, send, recv, wait;
} hg_commtimer_t;

typedef struct {
    double smooth, residual, apply_op, blas1, bc, collectives, total;
    hg_commtimer_t restriction, interpolation, ghost;
} hg_timers_t;

struct hg_level;

/* A communication program: computed once, run many times.
 * Messages are aggregated per neighbour rank; the order of the tiles inside
 * a message is canonical (sorted by destination box id and direction) so that
 * sender and receiver agree without exchanging metadata. */
typedef struct hg_prog {
    int built;
    int tag;
    struct hg_level *src, *dst; /* level read by pack/local, level written by local/unpack */
    struct hg_level *owner;     /* level whose communicator, context and timers are used  */
    int n_send, n_recv;
    int *send_rank, *send_count, *send_off; /* ranks in owner->comm; counts/offsets in doubles */
    int *recv_rank, *recv_count, *recv_off;
    size_t send_total, recv_total;
    double *send_host, *recv_host;  /* buffers of host execution (and host streams)          */
    double *send_gpu, *recv_gpu[2]; /* buffers of CUDA execution (device memory, or pinned host
                                    memory for the mpi backend, which alternates recv_gpu[] */
    hg_mem_t gpu_mem;
    int parity;
    hg_tile_t *pack, *local, *unpack;             /* host                       */
    hg_tile_t *pack_dev, *local_dev, *unpack_dev; /* device copies (GPU levels) */
    int n_pack, n_local, n_unpack;
    int max_pack, max_local, max_unpack; /* largest block of each list */
    MPI_Request *req;
    MPI_Status *stat;
    struct hg_ki *ki; /* ki backend on a GPU level (comm.c), else NULL */
} hg_prog_t;

typedef struct hg_level {
    int id;              /* 0 = finest                                       */
    int box_dim, ghosts; /* cells per box side, ghost zone depth             */
    int boxes_in;        /* boxes per side                                   */
    int dim;             /* cells per side of the level                      */
    int num_boxes;       /* boxes_in^3                                       */
    int nprocs;          /* ranks among which the boxes are distributed      */
    double h;
    int *rank_of_box;  /* world rank of each box id (id = i + j*B + k*B*B) */
    int nb;            /* boxes I own                                      */
    int *my_id;        /* their ids (ascending Morton order)               */
    int *low;          /* 3*nb low corners (host)                          */
    int *low_dev;      /* GPU levels: device copy (geom.low points at it)  */
    int *local_of_box; /* id -> my local index, or -1                       */
    int js, ks, vol;
    int nvec;
    double **vec; /* nvec vectors, each nb*vol doubles                */
    hg_mem_t mem; /* of the vectors and partials: host, or pinned host
                             memory (GPU-accessible) when CUDA is in use; a GPU
                             level's vectors move to device memory (vec_mem)  */
    hg_mem_t vec_mem;
    hg_geom_t geom;

    int active;     /* I own boxes here or on a coarser level           */
    MPI_Comm comm;  /* the active ranks (MPI_COMM_NULL when inactive)   */
    int *comm_rank; /* world rank -> rank in comm (-1: not in comm)     */

    int *bc[HG_NUM_SHAPES];     /* (box, direction) ghost regions outside the domain */
    int *bc_dev[HG_NUM_SHAPES]; /* GPU levels: device copies                  */
    int nbc[HG_NUM_SHAPES];
    int nbc_own[HG_NUM_SHAPES]; /* the first ones, outside along every axis they
                                   extend along: no exchanged ghost cell in them */

    hg_prog_t exchange[HG_NUM_SHAPES];
    hg_prog_t restriction[4]; /* this level -> next coarser: CELL, FACE_I/J/K */
    hg_prog_t interpolation;  /* next coarser -> this level                   */

    double dominant_eigenvalue; /* Gershgorin bound of D^{-1}A                  */
    double *partial;            /* nb per-box partial reductions (shared memory) */
    double *gpartial;           /* num_boxes, for decomposition-independent sums */
    int *red_ids;               /* my_id where the level's kernels read it      */
    double *red_norm;           /* HG_RED_NORM_SLOTS max norms in flight         */
    int red_norm_next;

    hg_exec_t *exec;      /* where this level runs                        */
    hg_backend_t backend; /* how its communication programs run           */
    int on_gpu;
    hg_timers_t t;
    int krylov_iterations;
    int vcycles_from_this_level;
} hg_level_t;

/* ------------------------------------------------------------------------ */
typedef struct {
    int my_rank, num_ranks;
    hg_operator_t op;
    hg_smoother_t smoother;
    hg_cycle_t cycle;
    hg_backend_t backend;
    int use_cuda;       /* CUDA compiled in, a device is present, threshold allows */
    long gpu_threshold; /* levels with more local cells run on the GPU           */
    int bottom_min_dim; /* coarsest level dimension allowed                       */
    int nlevels;
    hg_level_t **levels;
    hg_exec_t host, hoststream, cuda;
    int setup_done;    /* before: everything runs on the host with plain MPI     */
    int cpu_streams;   /* CPU levels of the acc/streamcomm backends on host streams:
                              always without GPU levels; with them only if asked
                              (--cpu-levels stream), else plain MPI on the host */
    int no_wildcards;  /* MPI-4 assertions mpi_assert_no_any_source/_tag on the level
                          communicators (--backend acc-sx|streamcomm-sx, --no-wildcards):
                          mpix-acc may then move messages between GPUs of a node on the
                          stream-executed path */
    int skip_exchange; /* --skip-exchange: GPU levels skip the messages of their
                          communication programs after set-up (pack, local copies and
                          unpack still run): a bound with communication's cost removed,
                          its results are wrong and not checked */
    int ki_runs;       /* ki backend: program runs per epoch of its partitioned requests */
    int pdl;           /* GPU kernels with programmatic dependent launch (--no-pdl: off) */

    /* --graph: a V-cycle's work per level captured once (CUDA graph, or host
     * graph on host streams) and launched as one (mg.c); the graphs; the ki
     * programs a capture records (comm.c), or NULL; captures and launches */
    int graph;
    struct hg_gentry *graphs;
    struct hg_ki_graph *ki_rec;
    long graphs_made, graph_launches;

    double mgbuild_time, mgsolve_time;
    int solves;
    long reductions_on_streams; /* stream-ordered norms and dots (hg_red_t) */
    int last_cycles;            /* V-cycles of the last MGSolve (1 for an F-cycle) */
} hg_mg_t;

/* level.c */
void hg_level_create(hg_mg_t *mg, hg_level_t *L, int id, int boxes_in, int box_dim, int ghosts,
                     int nvec, int nprocs);
void hg_level_add_vectors(hg_mg_t *mg, hg_level_t *L, int nvec);
void hg_level_build_comm(hg_mg_t *mg); /* communicators of all levels */
void hg_level_free(hg_level_t *L);
double *hg_box(hg_level_t *L, int vec, int b); /* interior origin of my box b */
int hg_radius(hg_operator_t op);
/* GPU level: move vectors, corners and boundary lists to device memory */
void hg_level_to_device(hg_level_t *L);

#endif /* HPGMG_LEVEL_H */
