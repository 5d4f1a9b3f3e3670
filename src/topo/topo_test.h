/*
 * topo_test.h - private test hooks of topo.c (unit tests only; not part of
 * the layer contract). They let test/unit/test_topo.c exercise placement
 * decisions on synthetic or XML topologies, without the hardware.
 */
#ifndef MX_TOPO_TEST_H
#define MX_TOPO_TEST_H

#include "util/status.h"

/* Replace the topology with an hwloc synthetic description, e.g.
 * "pack:2 numa:1 core:2 pu:1". MXU_ERR_UNSUPPORTED without hwloc. */
mxu_status_t mxo_init_from_synthetic(const char *description);
/* Replace the topology with an hwloc XML document (I/O objects kept). */
mxu_status_t mxo_init_from_xml_buffer(const char *xml, int len);
/* Pretend the calling thread runs on `cpu` (OS index); -1 asks the OS. */
void mxo_test_set_current_cpu(int cpu);

#endif
