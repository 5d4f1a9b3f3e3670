/*
 * topo.c - placement with hwloc (see topo.h) and the verbs capability probe.
 *
 * Both dependencies are optional at build time (MPIXACC_HAVE_HWLOC,
 * MPIXACC_HAVE_VERBS). Without hwloc: a forced CPU is still honoured and
 * bound with sched_setaffinity, nothing else is chosen, no NIC is known.
 *
 * Progress CPU policy (mxo_choose_progress_cpu):
 *   forced >= 0            that CPU (MPIX_ACC_PROGRESS_CPU)
 *   forced == -2           no binding
 *   GPU PCI bus id known   the cpuset of the GPU's first non-I/O ancestor
 *   otherwise              the NUMA node of the CPU the calling thread runs on
 * restricted to the allowed CPUs; within that set the calling thread's core
 * (else its PU) is avoided when something else remains, and the LAST PU is
 * taken (OS index), away from where ranks and application threads usually
 * start. The choice is logged at info level.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "topo/topo.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_test.h"
#include "util/log.h"

#ifdef MPIXACC_HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef MPIXACC_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static int test_current_cpu = -1;
static int app_cpu = -1; /* the application thread's CPU at init */
static int local_rank, local_size;
static char nic_buf[96];

/* Bind with the OS directly (no hwloc, or a test topology). */
static mxu_status_t bind_os(int cpu)
{
    if (cpu >= CPU_SETSIZE)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "cannot bind to CPU %d: beyond CPU_SETSIZE", cpu);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0) {
        MXU_LOG(MXU_LOG_WARN, "cannot bind the thread to CPU %d: %s", cpu, strerror(rc));
        return MXU_ERR_SYSTEM;
    }
    return MXU_OK;
}

#ifdef MPIXACC_HAVE_HWLOC

static hwloc_topology_t topo;
static int topo_loaded;

static void unload_locked(void)
{
    if (topo_loaded) {
        hwloc_topology_destroy(topo);
        topo_loaded = 0;
    }
}

/* Load the real machine (synthetic == NULL && xml == NULL) or a test one. */
static mxu_status_t load_locked(const char *synthetic, const char *xml, int xmllen)
{
    unload_locked();
    if (hwloc_topology_init(&topo) != 0) {
        MXU_LOG(MXU_LOG_WARN, "hwloc: topology init failed (%s)", strerror(errno));
        return MXU_ERR_SYSTEM;
    }
    /* PCI devices and OS devices (GPUs, NICs) are needed for placement. */
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if defined(__linux__) && HWLOC_API_VERSION >= 0x00020100
    /* Linux sysfs discovery (hwloc's linux/linuxio component) finds PCI
     * devices by itself; the libpciaccess-based "pci" plugin adds nothing we
     * use and leaks memory when it is loaded (seen with LeakSanitizer). */
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
    int rc = 0;
    if (synthetic != NULL)
        rc = hwloc_topology_set_synthetic(topo, synthetic);
    else if (xml != NULL)
        rc = hwloc_topology_set_xmlbuffer(topo, xml, xmllen);
    if (rc == 0)
        rc = hwloc_topology_load(topo);
    if (rc != 0) {
        MXU_LOG(MXU_LOG_WARN, "hwloc: cannot load the %s topology (%s)",
                synthetic ? "synthetic"
                : xml     ? "XML"
                          : "machine",
                strerror(errno));
        hwloc_topology_destroy(topo);
        return synthetic != NULL || xml != NULL ? MXU_ERR_INVALID_PARAM : MXU_ERR_SYSTEM;
    }
    topo_loaded = 1;
    return MXU_OK;
}

mxu_status_t mxo_init(void)
{
    pthread_mutex_lock(&topo_lock);
    if (!topo_loaded)
        (void)load_locked(NULL, NULL, 0); /* degrade to "unknown" on failure */
    pthread_mutex_unlock(&topo_lock);
    return MXU_OK;
}

void mxo_finalize(void)
{
    pthread_mutex_lock(&topo_lock);
    unload_locked();
    pthread_mutex_unlock(&topo_lock);
}

mxu_status_t mxo_init_from_synthetic(const char *description)
{
    if (description == NULL)
        return MXU_ERR_INVALID_PARAM;
    pthread_mutex_lock(&topo_lock);
    mxu_status_t st = load_locked(description, NULL, 0);
    pthread_mutex_unlock(&topo_lock);
    return st;
}

mxu_status_t mxo_init_from_xml_buffer(const char *xml, int len)
{
    if (xml == NULL || len <= 0)
        return MXU_ERR_INVALID_PARAM;
    pthread_mutex_lock(&topo_lock);
    mxu_status_t st = load_locked(NULL, xml, len);
    pthread_mutex_unlock(&topo_lock);
    return st;
}

static int current_cpu_locked(void)
{
    if (test_current_cpu >= 0)
        return test_current_cpu;
    if (app_cpu >= 0)
        return app_cpu;
    int cpu = -1;
    if (hwloc_topology_is_thissystem(topo)) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        if (set != NULL && hwloc_get_last_cpu_location(topo, set, HWLOC_CPUBIND_THREAD) == 0)
            cpu = hwloc_bitmap_first(set);
        hwloc_bitmap_free(set);
    }
    if (cpu < 0)
        cpu = sched_getcpu();
    return cpu;
}

static hwloc_obj_t numa_of_cpu_locked(int cpu)
{
    if (cpu < 0)
        return NULL;
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != NULL) {
        if (node->cpuset != NULL && hwloc_bitmap_isset(node->cpuset, (unsigned)cpu))
            return node;
    }
    return NULL;
}

static int choose_locked(const char *gpu_busid, char *why, size_t whylen)
{
    int cur = current_cpu_locked();
    hwloc_bitmap_t cand = hwloc_bitmap_alloc();
    hwloc_bitmap_t tmp = hwloc_bitmap_alloc();
    int cpu = -1;
    if (cand == NULL || tmp == NULL)
        goto out;

    int have = 0;
    if (gpu_busid != NULL && gpu_busid[0] != '\0') {
        hwloc_obj_t gpu = hwloc_get_pcidev_by_busidstring(topo, gpu_busid);
        hwloc_obj_t anc = gpu != NULL ? hwloc_get_non_io_ancestor_obj(topo, gpu) : NULL;
        if (anc != NULL && anc->cpuset != NULL && !hwloc_bitmap_iszero(anc->cpuset)) {
            hwloc_bitmap_copy(cand, anc->cpuset);
            snprintf(why, whylen, "near GPU %s (%s L#%u)", gpu_busid,
                     hwloc_obj_type_string(anc->type), anc->logical_index);
            have = 1;
        } else {
            MXU_LOG(MXU_LOG_INFO, "GPU %s not found in the hwloc topology", gpu_busid);
        }
    }
    if (!have) {
        hwloc_obj_t node = numa_of_cpu_locked(cur);
        if (node != NULL && node->cpuset != NULL && !hwloc_bitmap_iszero(node->cpuset)) {
            hwloc_bitmap_copy(cand, node->cpuset);
            snprintf(why, whylen, "NUMA node %u of the calling thread (CPU %d)", node->os_index,
                     cur);
            have = 1;
        }
    }
    if (!have) {
        hwloc_bitmap_copy(cand, hwloc_topology_get_topology_cpuset(topo));
        snprintf(why, whylen, "any CPU (calling thread's NUMA node unknown)");
    }
    hwloc_bitmap_and(cand, cand, hwloc_topology_get_allowed_cpuset(topo));
    if (hwloc_bitmap_iszero(cand))
        goto out;

    /* Avoid the calling thread's core, else its PU, if anything remains. */
    if (cur >= 0) {
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, (unsigned)cur);
        hwloc_obj_t core =
            pu != NULL ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu) : NULL;
        if (core != NULL && core->cpuset != NULL) {
            hwloc_bitmap_andnot(tmp, cand, core->cpuset);
            if (!hwloc_bitmap_iszero(tmp))
                hwloc_bitmap_copy(cand, tmp);
        }
        hwloc_bitmap_copy(tmp, cand);
        hwloc_bitmap_clr(tmp, (unsigned)cur);
        if (!hwloc_bitmap_iszero(tmp))
            hwloc_bitmap_copy(cand, tmp);
    }
    /* Ranks of one node (sharing a GPU or a NUMA node) take distinct
     * candidates, counted from the last. */
    int ncand = hwloc_bitmap_weight(cand);
    int skip = ncand > 0 ? local_rank % ncand : 0;
    for (cpu = hwloc_bitmap_last(cand); cpu >= 0 && skip > 0; skip--) {
        hwloc_bitmap_clr(cand, (unsigned)cpu);
        cpu = hwloc_bitmap_last(cand);
    }
out:
    hwloc_bitmap_free(cand);
    hwloc_bitmap_free(tmp);
    return cpu;
}

int mxo_choose_progress_cpu(int forced, const char *gpu_pci_busid)
{
    if (forced >= 0) {
        MXU_LOG(MXU_LOG_INFO, "progress thread CPU %d (MPIX_ACC_PROGRESS_CPU)", forced);
        return forced;
    }
    if (forced == -2) {
        MXU_LOG(MXU_LOG_INFO, "progress thread not bound (MPIX_ACC_PROGRESS_CPU=-2)");
        return -1;
    }
    pthread_mutex_lock(&topo_lock);
    if (!topo_loaded) {
        pthread_mutex_unlock(&topo_lock);
        MXU_LOG(MXU_LOG_INFO, "progress thread not bound (no hwloc topology)");
        return -1;
    }
    if (local_size > 0) {
        int allowed = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(topo));
        if (allowed > 0 && 2 * local_size > allowed) {
            pthread_mutex_unlock(&topo_lock);
            MXU_LOG(MXU_LOG_INFO,
                    "progress thread not bound: %d processes on this node "
                    "share %d CPUs (binding needs 2 per process); "
                    "MPIX_ACC_PROGRESS_CPU=<cpu> forces a core",
                    local_size, allowed);
            return -1;
        }
    }
    char why[160] = "";
    int cpu = choose_locked(gpu_pci_busid, why, sizeof(why));
    pthread_mutex_unlock(&topo_lock);
    if (cpu >= 0)
        MXU_LOG(MXU_LOG_INFO, "progress thread CPU %d: %s", cpu, why);
    else
        MXU_LOG(MXU_LOG_INFO, "progress thread not bound (no allowed CPU found)");
    return cpu;
}

mxu_status_t mxo_bind_self(int cpu)
{
    if (cpu < 0)
        return MXU_OK;
    pthread_mutex_lock(&topo_lock);
    if (!topo_loaded || !hwloc_topology_is_thissystem(topo)) {
        pthread_mutex_unlock(&topo_lock);
        return bind_os(cpu);
    }
    mxu_status_t st = MXU_OK;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL) {
        st = MXU_ERR_NO_MEMORY;
    } else {
        hwloc_bitmap_only(set, (unsigned)cpu);
        if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0) {
            MXU_LOG(MXU_LOG_WARN, "cannot bind the thread to CPU %d: %s", cpu, strerror(errno));
            st = MXU_ERR_SYSTEM;
        }
        hwloc_bitmap_free(set);
    }
    pthread_mutex_unlock(&topo_lock);
    return st;
}

/* Position of `obj` in the ancestor chain of `from` (0 = from itself), or -1. */
static int chain_index(hwloc_obj_t from, hwloc_obj_t obj)
{
    int i = 0;
    for (hwloc_obj_t o = from; o != NULL; o = o->parent, i++) {
        if (o == obj)
            return i;
    }
    return -1;
}

/* How close `dev` is to `gpu`: index in the GPU's ancestor chain of their
 * lowest common ancestor (smaller is closer). */
static int closeness(hwloc_obj_t gpu, hwloc_obj_t dev)
{
    for (hwloc_obj_t o = dev; o != NULL; o = o->parent) {
        int i = chain_index(gpu, o);
        if (i >= 0)
            return i;
    }
    return -1;
}

static void openfabrics_name(hwloc_obj_t dev, char *buf, size_t len)
{
    /* First ACTIVE port (sysfs state 4), else port 1. */
    int port = 1;
    for (unsigned p = 1; p <= 16; p++) {
        char key[32];
        snprintf(key, sizeof(key), "Port%uState", p);
        const char *state = hwloc_obj_get_info_by_name(dev, key);
        if (state != NULL && strcmp(state, "4") == 0) {
            port = (int)p;
            break;
        }
    }
    snprintf(buf, len, "%s:%d", dev->name, port);
}

const char *mxo_nic_near_gpu(const char *gpu_pci_busid)
{
    if (gpu_pci_busid == NULL || gpu_pci_busid[0] == '\0')
        return NULL;
    pthread_mutex_lock(&topo_lock);
    const char *result = NULL;
    if (!topo_loaded)
        goto out;
    hwloc_obj_t gpu = hwloc_get_pcidev_by_busidstring(topo, gpu_pci_busid);
    if (gpu == NULL)
        goto out;
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo, gpu);
    int limit = local != NULL ? chain_index(gpu, local) : -1;

    hwloc_obj_t best = NULL;
    int best_close = -1, best_ib = 0;
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, NULL); os != NULL;
         os = hwloc_get_next_osdev(topo, os)) {
        hwloc_obj_osdev_type_t t = os->attr->osdev.type;
        if (t != HWLOC_OBJ_OSDEV_OPENFABRICS && t != HWLOC_OBJ_OSDEV_NETWORK)
            continue;
        if (os->name == NULL)
            continue;
        int c = closeness(gpu, os);
        if (c < 0 || (limit >= 0 && c > limit))
            continue; /* not under the GPU's PCI hierarchy / locality */
        int ib = t == HWLOC_OBJ_OSDEV_OPENFABRICS;
        if (best == NULL || c < best_close || (c == best_close && ib && !best_ib)) {
            best = os;
            best_close = c;
            best_ib = ib;
        }
    }
    if (best != NULL) {
        if (best_ib)
            openfabrics_name(best, nic_buf, sizeof(nic_buf));
        else
            snprintf(nic_buf, sizeof(nic_buf), "%s", best->name);
        result = nic_buf;
    }
out:
    pthread_mutex_unlock(&topo_lock);
    return result;
}

static int count_type(hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(topo, type);
    return n < 0 ? 0 : n;
}

void mxo_describe(char *buf, unsigned len)
{
    if (buf == NULL || len == 0)
        return;
    pthread_mutex_lock(&topo_lock);
    if (!topo_loaded) {
        pthread_mutex_unlock(&topo_lock);
        snprintf(buf, len, "hwloc: topology not loaded");
        return;
    }
    const char *version = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "hwlocVersion");
    char vbuf[32];
    if (version == NULL) {
        unsigned api = hwloc_get_api_version();
        snprintf(vbuf, sizeof(vbuf), "API %u.%u", api >> 16, (api >> 8) & 0xff);
        version = vbuf;
    }
    int gpus = 0, pcidevs = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o != NULL;
         o = hwloc_get_next_pcidev(topo, o)) {
        pcidevs++;
        if ((o->attr->pcidev.class_id >> 8) == 0x03)
            gpus++;
    }
    char nets[128] = "";
    size_t used = 0;
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, NULL); os != NULL;
         os = hwloc_get_next_osdev(topo, os)) {
        hwloc_obj_osdev_type_t t = os->attr->osdev.type;
        if ((t != HWLOC_OBJ_OSDEV_OPENFABRICS && t != HWLOC_OBJ_OSDEV_NETWORK) || !os->name)
            continue;
        int n = snprintf(nets + used, sizeof(nets) - used, "%s%s", used ? "," : "", os->name);
        if (n < 0 || (size_t)n >= sizeof(nets) - used)
            break;
        used += (size_t)n;
    }
    int pk = count_type(HWLOC_OBJ_PACKAGE), co = count_type(HWLOC_OBJ_CORE),
        pu = count_type(HWLOC_OBJ_PU), nu = count_type(HWLOC_OBJ_NUMANODE);
    snprintf(buf, len,
             "hwloc %s: %d package%s, %d core%s, %d PU%s, %d NUMA node%s; %d PCI device%s "
             "(%d GPU%s); network: %s",
             version, pk, pk == 1 ? "" : "s", co, co == 1 ? "" : "s", pu, pu == 1 ? "" : "s", nu,
             nu == 1 ? "" : "s", pcidevs, pcidevs == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s",
             used ? nets : "none");
    pthread_mutex_unlock(&topo_lock);
}

#else /* !MPIXACC_HAVE_HWLOC */

mxu_status_t mxo_init(void) { return MXU_OK; }

void mxo_finalize(void) {}

mxu_status_t mxo_init_from_synthetic(const char *description)
{
    (void)description;
    return MXU_ERR_UNSUPPORTED;
}

mxu_status_t mxo_init_from_xml_buffer(const char *xml, int len)
{
    (void)xml;
    (void)len;
    return MXU_ERR_UNSUPPORTED;
}

int mxo_choose_progress_cpu(int forced, const char *gpu_pci_busid)
{
    (void)gpu_pci_busid;
    if (forced >= 0) {
        MXU_LOG(MXU_LOG_INFO, "progress thread CPU %d (MPIX_ACC_PROGRESS_CPU)", forced);
        return forced;
    }
    MXU_LOG(MXU_LOG_INFO, "progress thread not bound (built without hwloc)");
    return -1;
}

mxu_status_t mxo_bind_self(int cpu)
{
    if (cpu < 0)
        return MXU_OK;
    return bind_os(cpu);
}

const char *mxo_nic_near_gpu(const char *gpu_pci_busid)
{
    (void)gpu_pci_busid;
    (void)nic_buf;
    return NULL;
}

void mxo_describe(char *buf, unsigned len)
{
    if (buf != NULL && len > 0)
        snprintf(buf, len, "hwloc: not available (built without hwloc)");
}

#endif /* MPIXACC_HAVE_HWLOC */

void mxo_set_placement_context(int rank, int size)
{
    pthread_mutex_lock(&topo_lock);
    local_rank = rank > 0 ? rank : 0;
    local_size = size > 0 ? size : 0;
    app_cpu = sched_getcpu();
    pthread_mutex_unlock(&topo_lock);
}

void mxo_test_set_current_cpu(int cpu)
{
    pthread_mutex_lock(&topo_lock);
    test_current_cpu = cpu;
    pthread_mutex_unlock(&topo_lock);
}

int mxo_verbs_device_count(void)
{
#ifdef MPIXACC_HAVE_VERBS
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL)
        return 0;
    ibv_free_device_list(list);
    return n;
#else
    return 0;
#endif
}
