/*
 * hpgmg/comm.h - communication programs: ghost-zone exchange per stencil
 * shape, restriction (fine -> coarse) and interpolation (coarse -> fine).
 *
 * A program is built once (neighbours, message sizes, persistent buffers and
 * the pack / local / unpack tile lists) and run many times through one of
 * the three backends:
 *   mpi        : MPI_Irecv, pack, [device sync], MPI_Isend, local, MPI_Waitall, unpack
 *   acc        : MPIX_Acc_Irecv/Isend/Waitall enqueued on the level's stream with
 *                pack/local/unpack; the host never waits inside a level
 *   streamcomm : the mpi code path (same MPI calls) on communicators made stream
 *                communicators; pack/unpack are enqueued on the stream and the
 *                device sync is not needed
 */
#ifndef HPGMG_COMM_H
#define HPGMG_COMM_H

#include "level.h"

void hg_build_exchange(hg_mg_t *mg, hg_level_t *L, int shape);
void hg_build_restriction(hg_mg_t *mg, hg_level_t *fine, hg_level_t *coarse, int kind);
void hg_build_interpolation(hg_mg_t *mg, hg_level_t *fine, hg_level_t *coarse);
/* allocate the buffers of CUDA execution for the programs owned by L */
void hg_prog_prepare_gpu(hg_mg_t *mg, hg_level_t *L);

/* Run program P: read vector vsrc of P->src, write vector vdst of P->dst.
 * k_pack / k_local / k_unpack: tile kinds (HG_T_*); prescale for
 * INCREMENT / INTERP tiles; T receives the time split. */
void hg_prog_run(hg_mg_t *mg, hg_prog_t *P, int vsrc, int vdst, int k_pack, int k_local,
                 int k_unpack, double prescale, hg_commtimer_t *T);

/* ki backend: run exchange program P on vector v, then in the same kernel
 * apply the boundary conditions bc and (st non-NULL) the stencil sweep st;
 * 0 (nothing done) where P does not run as ki with unpacks -- the caller
 * then runs them itself */
int hg_prog_run_bc(hg_mg_t *mg, hg_prog_t *P, int v, const hg_args_bc_t *bc,
                   const hg_args_stencil_t *st, hg_commtimer_t *T);

/* ki backend: complete every program's open epoch (the sender marks the
 * partitions of the runs not made ready, every request is waited for on
 * its stream), check the kernels' error counts; before the level's
 * resources go (hg_mg_destroy) */
void hg_comm_ki_finish(hg_mg_t *mg);
/* free a program's ki state and requests (its epoch completed) */
void hg_prog_free_ki(hg_prog_t *P);

/* ki programs in CUDA graphs (mg.c, --graph). A ki run bakes the host's
 * counters (tickets, blocks done, chunks packed, run number) into its
 * kernel; so that a graph's launches all run alike, the graph's first run of
 * each program resets the program's block counters (a memset node) and
 * counts from 0 on the host, and after each launch the host takes the
 * counters the capture ended with -- the device's after that launch. The
 * slot of a captured run in its epoch is an offset from the program's slot
 * word, which the graph's last node of the program advances by its runs:
 * an epoch spans launches (--ki-runs of them per epoch, as plain runs), and
 * a graph starts and completes none.
 *   capture_begin: before the capture of a leg of level L, C the coarser
 *     level when the leg runs its part (opens an epoch of each of their
 *     programs that has none -- the only ones a leg runs --, plain);
 *     the program runs until capture_end are recorded in the returned set
 *   capture_end:   inside the capture, before it ends (the slot words'
 *     advance, captured; takes the snapshot)
 *   launch_begin / _end: around each launch of the graph (before: an epoch
 *     with room for the graph's runs -- the full one completed, the next
 *     started -- and the slot word set after plain runs, plain; after: the
 *     host's counters, an epoch that is full completed)
 * NULL set: nothing ki (no-ops). */
typedef struct hg_ki_graph hg_ki_graph_t;
hg_ki_graph_t *hg_comm_ki_capture_begin(hg_mg_t *mg, hg_level_t *L, hg_level_t *C);
void hg_comm_ki_capture_end(hg_mg_t *mg, hg_ki_graph_t *kg);
void hg_comm_ki_launch_begin(hg_ki_graph_t *kg);
void hg_comm_ki_launch_end(hg_ki_graph_t *kg);
void hg_comm_ki_graph_free(hg_ki_graph_t *kg);

/* streamcomm: turn every level communicator into a stream communicator of
 * the level's stream (MPI_Comm_set_info with "mpix_acc_stream") */
void hg_comm_attach_streams(hg_mg_t *mg);

#endif /* HPGMG_COMM_H */
