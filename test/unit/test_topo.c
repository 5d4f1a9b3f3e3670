/*
 * test_topo.c - placement decisions of src/topo/topo.c on topologies that
 * need no hardware (hwloc synthetic descriptions and an XML document with
 * GPUs and NICs), plus binding on the real machine.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_test.h"
#include "unit_check.h"
#include "util/log.h"

#ifdef MPIXACC_HAVE_HWLOC
/* 2 packages x (1 NUMA node, 2 cores x 2 PUs); PUs 0-3 in package 0, 4-7 in
 * package 1. Package 0: GPU 0000:01:00.0 and an InfiniBand HCA mlx5_0 (port
 * 1 down, port 2 active) + ib0. Package 1: GPU 0000:81:00.0 and an Ethernet
 * NIC eth1. */
static const char topo_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">\n"
    " <object type=\"Machine\" os_index=\"0\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" "
    "allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" "
    "allowed_nodeset=\"0x00000003\">\n"
    "  <object type=\"Package\" os_index=\"0\" cpuset=\"0x0000000f\" "
    "complete_cpuset=\"0x0000000f\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
    "   <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x0000000f\" "
    "complete_cpuset=\"0x0000000f\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
    "local_memory=\"1073741824\"/>\n"
    "   <object type=\"Core\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
    "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
    "    <object type=\"PU\" os_index=\"1\" cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
    "   </object>\n"
    "   <object type=\"Core\" os_index=\"1\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
    "    <object type=\"PU\" os_index=\"2\" cpuset=\"0x00000004\" complete_cpuset=\"0x00000004\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
    "    <object type=\"PU\" os_index=\"3\" cpuset=\"0x00000008\" complete_cpuset=\"0x00000008\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
    "   </object>\n"
    "   <object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[00-0f]\">\n"
    "    <object type=\"PCIDev\" pci_busid=\"0000:01:00.0\" pci_type=\"0302 [10de:2330] "
    "[10de:16c1] a1\" pci_link_speed=\"0.000000\">\n"
    "     <object type=\"OSDev\" name=\"cuda0\" osdev_type=\"5\"/>\n"
    "    </object>\n"
    "    <object type=\"PCIDev\" pci_busid=\"0000:02:00.0\" pci_type=\"0207 [15b3:101b] "
    "[15b3:0007] 00\" pci_link_speed=\"0.000000\">\n"
    "     <object type=\"OSDev\" name=\"mlx5_0\" osdev_type=\"3\">\n"
    "      <info name=\"Port1State\" value=\"1\"/>\n"
    "      <info name=\"Port2State\" value=\"4\"/>\n"
    "     </object>\n"
    "     <object type=\"OSDev\" name=\"ib0\" osdev_type=\"2\"/>\n"
    "    </object>\n"
    "   </object>\n"
    "  </object>\n"
    "  <object type=\"Package\" os_index=\"1\" cpuset=\"0x000000f0\" "
    "complete_cpuset=\"0x000000f0\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
    "   <object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x000000f0\" "
    "complete_cpuset=\"0x000000f0\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" "
    "local_memory=\"1073741824\"/>\n"
    "   <object type=\"Core\" os_index=\"2\" cpuset=\"0x00000030\" complete_cpuset=\"0x00000030\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
    "    <object type=\"PU\" os_index=\"4\" cpuset=\"0x00000010\" complete_cpuset=\"0x00000010\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
    "    <object type=\"PU\" os_index=\"5\" cpuset=\"0x00000020\" complete_cpuset=\"0x00000020\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
    "   </object>\n"
    "   <object type=\"Core\" os_index=\"3\" cpuset=\"0x000000c0\" complete_cpuset=\"0x000000c0\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
    "    <object type=\"PU\" os_index=\"6\" cpuset=\"0x00000040\" complete_cpuset=\"0x00000040\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
    "    <object type=\"PU\" os_index=\"7\" cpuset=\"0x00000080\" complete_cpuset=\"0x00000080\" "
    "nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
    "   </object>\n"
    "   <object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[80-8f]\">\n"
    "    <object type=\"PCIDev\" pci_busid=\"0000:81:00.0\" pci_type=\"0302 [10de:2330] "
    "[10de:16c1] a1\" pci_link_speed=\"0.000000\">\n"
    "     <object type=\"OSDev\" name=\"cuda1\" osdev_type=\"5\"/>\n"
    "    </object>\n"
    "    <object type=\"PCIDev\" pci_busid=\"0000:82:00.0\" pci_type=\"0200 [8086:1572] "
    "[8086:0000] 01\" pci_link_speed=\"0.000000\">\n"
    "     <object type=\"OSDev\" name=\"eth1\" osdev_type=\"2\"/>\n"
    "    </object>\n"
    "   </object>\n"
    "  </object>\n"
    " </object>\n"
    "</topology>\n";

static void test_synthetic(void)
{
    CHECK(mxo_init_from_synthetic("pack:2 numa:1 core:2 pu:1") == MXU_OK);
    /* calling thread on CPU 0: last PU of NUMA node 0 that is not CPU 0 */
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 1);
    mxo_test_set_current_cpu(1);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 0);
    mxo_test_set_current_cpu(2);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 3);
    mxo_test_set_current_cpu(3);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 2);
    /* forced wins; -2 disables */
    CHECK_EQ_LL(mxo_choose_progress_cpu(5, NULL), 5);
    CHECK_EQ_LL(mxo_choose_progress_cpu(0, "0000:01:00.0"), 0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-2, NULL), -1);
    /* no PCI devices here: a GPU bus id falls back to the NUMA rule */
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:01:00.0"), 1);
    CHECK(mxo_nic_near_gpu("0000:01:00.0") == NULL);

    char d[256];
    mxo_describe(d, sizeof(d));
    CHECK(strstr(d, "2 packages, 4 cores, 4 PUs, 2 NUMA nodes") != NULL, "%s", d);
    CHECK(strncmp(d, "hwloc ", 6) == 0, "%s", d);
    char tiny[8];
    mxo_describe(tiny, sizeof(tiny));
    CHECK(strlen(tiny) == 7);

    /* SMT: the calling thread's core is avoided while another core exists */
    CHECK(mxo_init_from_synthetic("pack:1 numa:1 core:2 pu:2") == MXU_OK);
    mxo_test_set_current_cpu(3);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 1);
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 3);
    /* one core: its other PU; one PU: that PU */
    CHECK(mxo_init_from_synthetic("pack:1 numa:1 core:1 pu:2") == MXU_OK);
    mxo_test_set_current_cpu(1);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 0);
    CHECK(mxo_init_from_synthetic("pack:1 numa:1 core:1 pu:1") == MXU_OK);
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 0);
    /* calling CPU unknown to the topology: still a valid CPU */
    CHECK(mxo_init_from_synthetic("pack:1 numa:1 core:4 pu:1") == MXU_OK);
    mxo_test_set_current_cpu(77);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 3);

    capture_begin();
    CHECK(mxo_init_from_synthetic("this is not a topology") != MXU_OK);
    char *out = capture_end();
    CHECK(strstr(out, "cannot load the synthetic topology") != NULL, "%s", out);
    free(out);
}

static void test_xml(void)
{
    CHECK(mxo_init_from_xml_buffer(topo_xml, (int)sizeof(topo_xml)) == MXU_OK);
    /* near GPU 01:00.0 (package 0), calling thread elsewhere: last PU 3 */
    mxo_test_set_current_cpu(6);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:01:00.0"), 3);
    /* calling thread on core {2,3}: the other core of the package */
    mxo_test_set_current_cpu(3);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:01:00.0"), 1);
    /* GPU 81:00.0 is on package 1 */
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:81:00.0"), 7);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "81:00.0"), 7); /* domain optional */
    /* two ranks sharing GPU 81:00.0 get distinct cores (regression: on the
     * H100 both progress threads were bound to CPU 15) */
    mxo_set_placement_context(1, 2);
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:81:00.0"), 6);
    mxo_set_placement_context(0, 2);
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:81:00.0"), 7);
    /* oversubscribed: 5 processes need 10 CPUs, 8 are allowed: no binding;
     * a forced CPU still wins */
    mxo_set_placement_context(3, 5);
    mxo_test_set_current_cpu(0);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:81:00.0"), -1);
    CHECK_EQ_LL(mxo_choose_progress_cpu(2, NULL), 2);
    mxo_set_placement_context(0, 0); /* unknown: as before */
    /* unknown GPU: NUMA node of the calling thread (CPU 5 -> node 1) */
    mxo_test_set_current_cpu(5);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, "0000:55:00.0"), 7);
    mxo_test_set_current_cpu(1);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), 3);

    /* NICs: OpenFabrics preferred, first active port */
    CHECK_STR(mxo_nic_near_gpu("0000:01:00.0"), "mlx5_0:2");
    CHECK_STR(mxo_nic_near_gpu("0000:81:00.0"), "eth1");
    CHECK(mxo_nic_near_gpu("0000:55:00.0") == NULL);
    CHECK(mxo_nic_near_gpu(NULL) == NULL);
    CHECK(mxo_nic_near_gpu("") == NULL);

    char d[256];
    mxo_describe(d, sizeof(d));
    CHECK(strstr(d, "(2 GPUs)") != NULL && strstr(d, "mlx5_0") != NULL && strstr(d, "eth1") != NULL,
          "%s", d);
    mxo_finalize();
    CHECK_EQ_LL(mxo_choose_progress_cpu(-1, NULL), -1); /* nothing loaded */
    CHECK(mxo_nic_near_gpu("0000:01:00.0") == NULL);
}
#endif

/* ---- the real machine ---- */

typedef struct {
    int cpu;
    int rc;
    int ok;
} bind_arg_t;

static void *bind_thread(void *p)
{
    bind_arg_t *a = p;
    a->rc = mxo_bind_self(a->cpu);
    cpu_set_t set;
    CPU_ZERO(&set);
    a->ok = pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0 &&
            CPU_COUNT(&set) == 1 && CPU_ISSET(a->cpu, &set);
    return NULL;
}

static void test_machine(void)
{
    mxo_test_set_current_cpu(-1);
    CHECK(mxo_init() == MXU_OK);
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);

    int cpu = mxo_choose_progress_cpu(-1, NULL);
#ifdef MPIXACC_HAVE_HWLOC
    CHECK(cpu >= 0 && CPU_ISSET(cpu, &allowed), "chose CPU %d", cpu);
#else
    CHECK_EQ_LL(cpu, -1);
#endif
    if (cpu < 0)
        for (cpu = 0; !CPU_ISSET(cpu, &allowed); cpu++)
            ;

    /* bind a helper thread: its affinity becomes exactly {cpu} */
    bind_arg_t a = {cpu, -1, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bind_thread, &a) == 0);
    pthread_join(th, NULL);
    CHECK(a.rc == MXU_OK && a.ok, "binding to CPU %d: rc %d, affinity ok %d", cpu, a.rc, a.ok);

    CHECK(mxo_bind_self(-1) == MXU_OK); /* no-op */
    mxu_log_threshold = MXU_LOG_ERROR;  /* the failure below is expected */
    bind_arg_t b = {CPU_SETSIZE + 5, 0, 0};
    CHECK(pthread_create(&th, NULL, bind_thread, &b) == 0);
    pthread_join(th, NULL);
    CHECK(b.rc != MXU_OK, "binding to a CPU that does not exist succeeded");

    char d[256];
    mxo_describe(d, sizeof(d));
    CHECK(strlen(d) > 5);
    printf("machine: %s; progress CPU %d; verbs devices %d\n", d, cpu, mxo_verbs_device_count());
    CHECK(mxo_verbs_device_count() >= 0);
    mxo_finalize();
}

int main(void)
{
#ifdef MPIXACC_HAVE_HWLOC
    test_synthetic();
    test_xml();
#else
    CHECK(mxo_init_from_synthetic("pack:1 core:1 pu:1") == MXU_ERR_UNSUPPORTED);
    CHECK_EQ_LL(mxo_choose_progress_cpu(3, NULL), 3);
    CHECK_EQ_LL(mxo_choose_progress_cpu(-2, NULL), -1);
    CHECK(mxo_nic_near_gpu("0000:01:00.0") == NULL);
#endif
    test_machine();
    TEST_PASS("test_topo");
}
