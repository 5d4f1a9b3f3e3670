/*
 * topo.h - placement with hwloc: which core the progress thread runs on,
 * which NIC is closest to a GPU. Optional: without hwloc everything reports
 * "unknown" and binding is skipped.
 *
 * Layering: util <- topo. Nothing here knows MPI or UCX.
 */
#ifndef MX_TOPO_H
#define MX_TOPO_H

#include "util/status.h"

mxu_status_t mxo_init(void);
void mxo_finalize(void);

/* Choose a core for the progress thread: `forced` >= 0 wins (setting
 * MPIX_ACC_PROGRESS_CPU); else a core near the GPU with the given PCI bus id
 * (NULL: none) ; else the NUMA node of the calling thread, preferring a core
 * the calling thread is not running on. Returns -1 if nothing can be
 * chosen. The choice is logged at info level. */
int mxo_choose_progress_cpu(int forced, const char *gpu_pci_busid);
/* Placement context, from the application thread at init: this process's
 * rank among the processes of its node and their number (0: unknown), and
 * the application thread's CPU now. Ranks of a node then get distinct cores
 * (counted from the last candidate by local rank), and when the node is
 * oversubscribed - fewer allowed CPUs than two per process (an application
 * thread and a progress thread) - the progress thread is not bound: pinned
 * progress threads stacked on shared cores starved the ranks' other threads
 * (4 ranks on 2 cores: barriers stalled for tens of seconds). */
void mxo_set_placement_context(int local_rank, int local_size);
/* Bind the calling thread to `cpu` (no-op and MXU_OK when cpu < 0). */
mxu_status_t mxo_bind_self(int cpu);
/* Name of the network device closest to the GPU (e.g. "mlx5_0:1"), or NULL. */
const char *mxo_nic_near_gpu(const char *gpu_pci_busid);
/* One-line description for mpixacc_info ("hwloc 2.9.0: 2 cores, 1 NUMA"). */
void mxo_describe(char *buf, unsigned len);
/* verbs capability probe: number of RDMA devices (0 when built without verbs). */
int mxo_verbs_device_count(void);

#endif
