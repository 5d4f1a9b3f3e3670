/*
 * mpixacc_info - what this mpix-acc build can do and how it is configured:
 * version and build provenance (configure date, commit, compiler, the MPI
 * and UCX it was built with), the UCX and MPI libraries actually loaded,
 * build features (CUDA, UCX and its transports, hwloc, verbs, NVTX), the
 * devices it sees, and every MPIX_ACC_* setting in effect with its help.
 * Warns when the loaded UCX is older than the headers the library was built
 * against, or lacks its CUDA or InfiniBand transports.
 *
 * Not an MPI program: it never calls MPI_Init (MPI_Get_library_version may
 * be called before it). It links the core library and asks its layers
 * directly.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpix_acc.h"

#include "accel/accel.h"
#include "accel/sx.h"
#include "topo/topo.h"
#include "transport/transport.h"
#include "util/settings.h"
#include "util/log.h"
#include "util/trace.h"

#ifdef MPIXACC_HAVE_CUDA
#define HAVE_CUDA_STR "yes"
#else
#define HAVE_CUDA_STR "no"
#endif
#ifdef MPIXACC_HAVE_HWLOC
#define HAVE_HWLOC_STR "yes"
#else
#define HAVE_HWLOC_STR "no"
#endif
#ifdef MPIXACC_HAVE_VERBS
#define HAVE_VERBS_STR "yes"
#else
#define HAVE_VERBS_STR "no"
#endif

#ifndef MPIXACC_GIT_COMMIT
#define MPIXACC_GIT_COMMIT "unknown"
#endif
#ifndef MPIXACC_CONFIGURE_DATE
#define MPIXACC_CONFIGURE_DATE "unknown"
#endif
#ifndef MPIXACC_CC
#define MPIXACC_CC "cc"
#endif
#ifndef MPIXACC_UCX_VERSION
#define MPIXACC_UCX_VERSION "?"
#endif
#ifndef MPIXACC_UCX_PREFIX
#define MPIXACC_UCX_PREFIX "?"
#endif

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [-c | -f | -V | -h]\n"
            "Show the mpix-acc version, build provenance, the UCX and MPI libraries\n"
            "loaded, build features, devices and settings.\n"
            "  -c, --settings   settings only (every MPIX_ACC_* variable in effect, with\n"
            "                   help, range and default)\n"
            "  -f, --features   version, provenance, libraries, build features and\n"
            "                   devices only\n"
            "  -V, --version    version and build provenance only\n"
            "  -h, --help       this help\n"
            "Settings are read from the environment (MPIX_ACC_*); unknown variables and\n"
            "malformed or out-of-range values are reported on stderr, as are a UCX older\n"
            "than the one the library was built with and missing UCX transports.\n",
            prog);
}

static void print_version(void)
{
    printf("mpix-acc %d.%d.%d: stream-ordered MPI point-to-point communication\n",
           MPIX_ACC_VERSION_MAJOR, MPIX_ACC_VERSION_MINOR, MPIX_ACC_VERSION_PATCH);
}

/* What the library was built from and with (configure and compile time). */
static void print_provenance(void)
{
    printf("\nBuild:\n");
    printf("  commit       %s (at configure time)\n", MPIXACC_GIT_COMMIT);
    printf("  configured   %s\n", MPIXACC_CONFIGURE_DATE);
#if defined(__clang__)
    printf("  compiler     %s: clang %s\n", MPIXACC_CC, __clang_version__);
#elif defined(__GNUC__)
    printf("  compiler     %s: gcc %s\n", MPIXACC_CC, __VERSION__);
#else
    printf("  compiler     %s\n", MPIXACC_CC);
#endif
#if defined(MPICH_VERSION)
    printf("  MPI          MPICH %s headers (MPI %d.%d)\n", MPICH_VERSION, MPI_VERSION,
           MPI_SUBVERSION);
#elif defined(OMPI_MAJOR_VERSION)
    printf("  MPI          Open MPI %d.%d.%d headers (MPI %d.%d)\n", OMPI_MAJOR_VERSION,
           OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION, MPI_VERSION, MPI_SUBVERSION);
#else
    printf("  MPI          MPI %d.%d headers\n", MPI_VERSION, MPI_SUBVERSION);
#endif
    mxt_ucx_loaded_t u;
    mxt_ucx_loaded(&u);
    printf("  UCX          %s headers (API %u.%u) from %s\n", MPIXACC_UCX_VERSION, u.hdr_major,
           u.hdr_minor, MPIXACC_UCX_PREFIX);
}

/* The libraries this process actually loaded, with warnings about them. */
static void print_loaded(int cuda_built)
{
    printf("\nLoaded:\n");
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
        mpi[len > 0 && len < (int)sizeof(mpi) ? len : (int)sizeof(mpi) - 1] = '\0';
        char *nl = strchr(mpi, '\n');
        if (nl != NULL)
            *nl = '\0';
        for (char *t = mpi; *t != '\0'; t++)
            if (*t == '\t')
                *t = ' ';
        printf("  MPI          %s\n", mpi);
    }
    mxt_ucx_loaded_t u;
    mxt_ucx_loaded(&u);
    printf("  UCX          %u.%u.%u from %s\n", u.major, u.minor, u.release,
           u.path[0] ? u.path : "(path unknown)");
    printf("  UCX modules  %s: cuda %s, InfiniBand %s, rdmacm %s\n",
           u.module_dir[0] ? u.module_dir : "(unknown)",
           u.has_cuda > 0    ? "yes"
           : u.has_cuda == 0 ? "no"
                             : "?",
           u.has_ib > 0    ? "yes"
           : u.has_ib == 0 ? "no"
                           : "?",
           u.has_rdmacm > 0    ? "yes"
           : u.has_rdmacm == 0 ? "no"
                               : "?");
    fflush(stdout);
    if (u.older)
        MXU_LOG(MXU_LOG_WARN,
                "the UCX loaded (%u.%u.%u, %s) is older than the headers the library was built "
                "with (%u.%u, %s): some features may fail; put the UCX of %s first in "
                "LD_LIBRARY_PATH (or link the program with that UCX)",
                u.major, u.minor, u.release, u.path[0] ? u.path : "?", u.hdr_major, u.hdr_minor,
                MPIXACC_UCX_VERSION, MPIXACC_UCX_PREFIX);
    if (cuda_built && u.has_cuda == 0)
        MXU_LOG(MXU_LOG_WARN,
                "the UCX loaded (%s) has no CUDA transports (no libuct_cuda in %s): device "
                "buffers cannot be sent",
                u.path[0] ? u.path : "?", u.module_dir);
    if (u.has_ib == 0)
        MXU_LOG(MXU_LOG_WARN,
                "the UCX loaded (%s) has no InfiniBand transports (no libuct_ib in %s): "
                "messages between nodes go over TCP",
                u.path[0] ? u.path : "?", u.module_dir);
}

static void print_features(void)
{
    mxa_features_t f;
    mxa_get_features(&f);

    printf("\nBuild features:\n");
    printf("  CUDA         built: %s; active: %s; mode: %s\n", f.cuda_built ? "yes" : "no",
           f.cuda_active ? "yes" : "no", f.cuda_mode[0] ? f.cuda_mode : "?");
    char ucx[512];
    ucx[0] = '\0';
    mxt_describe(ucx, sizeof(ucx)); /* version, API and memory types */
    if (ucx[0] == '\0') {
        const char *v = mxt_ucx_version();
        snprintf(ucx, sizeof(ucx), "UCX %s", v != NULL ? v : "?");
    }
    printf("  UCX          %s\n", ucx);
    printf("  hwloc        built: %s\n", HAVE_HWLOC_STR);
    printf("  verbs        built: %s\n", HAVE_VERBS_STR);
    printf("  NVTX         built: %s%s\n", mxu_trace_built() ? "yes" : "no",
           mxu_trace_built() ? (mxu_config.nvtx ? " (ranges in domain mpix-acc; MPIX_ACC_NVTX=1)"
                                                : " (off: MPIX_ACC_NVTX=0)")
                             : " (needs the CUDA toolkit at configure time)");
    printf("  host streams yes (one library thread per stream)\n");

    printf("\nDevices:\n");
    if (f.cuda_active)
        printf("  CUDA devices %d (driver %s)%s\n", f.cuda_device_count,
               f.cuda_driver[0] ? f.cuda_driver : "?",
               f.cuda_memops ? ", stream memory operations" : "");
    if (f.cuda_active && f.cuda_ipc[0])
        printf("  peer GPU memory mapped in the %s\n", f.cuda_ipc);
    if (!f.cuda_active)
        printf("  CUDA devices none (%s)\n", f.cuda_mode[0] ? f.cuda_mode : "off");
    printf("  RDMA devices %d (verbs%s)\n", mxo_verbs_device_count(),
#ifdef MPIXACC_HAVE_VERBS
           ""
#else
           " not built"
#endif
    );
    size_t sx_shared, sx_device;
    mxa_sx_link_memory(&sx_shared, &sx_device);
    printf("  SX memory    per peer process of the node and direction: %zu bytes shared "
           "(control page, %ld slots of %zu bytes as LL words), device ring %zu bytes "
           "(with %ld bulk slots of %zu bytes; GPU rings rounded up to the allocation "
           "granularity)\n",
           sx_shared, mxu_config.sx_slots, mxu_config.sx_slot_bytes, sx_device,
           mxu_config.sx_bulk_slots, mxu_config.sx_bulk_bytes);
    char topo[512];
    mxo_describe(topo, sizeof(topo));
    printf("  topology     %s\n", topo);
    long forced = mxu_config.progress_cpu;
    int cpu = mxo_choose_progress_cpu(forced >= -2 && forced < 1000000 ? (int)forced : -1, NULL);
    if (cpu >= 0)
        printf("  progress CPU %d for a process started here (no GPU context)\n", cpu);
    else
        printf("  progress CPU not bound\n");
}

static void print_settings(void)
{
    printf("\n# Settings in effect (MPIX_ACC_*). \"# set in the environment\" marks values\n"
           "# that do not come from the defaults.\n");
    mxu_config_print(stdout, 1);
}

int main(int argc, char **argv)
{
    int settings = 1, features = 1, version_only = 0;
    int opt;
    static const struct option longopts[] = {
        {"settings", no_argument, NULL, 'c'},
        {"features", no_argument, NULL, 'f'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    while ((opt = getopt_long(argc, argv, "cfVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            settings = 1;
            features = 0;
            break;
        case 'f':
            features = 1;
            settings = 0;
            break;
        case 'V':
            version_only = 1;
            break;
        case 'h':
            usage(stdout, argv[0]);
            return 0;
        default:
            usage(stderr, argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
        usage(stderr, argv[0]);
        return 2;
    }

    if (version_only) {
        print_version();
        print_provenance();
        fflush(stdout);
        return ferror(stdout) ? 1 : 0;
    }

    mxu_config_load(); /* warns about unknown / malformed MPIX_ACC_* variables */

    if (features) {
        print_version();
        print_provenance();
        mxa_features_t f;
        mxa_get_features(&f);
        fflush(stdout); /* warnings go to stderr after what they are about */
        print_loaded(f.cuda_built);
        mxa_init();
        mxo_init();
        print_features();
        mxo_finalize();
        mxa_finalize();
    }
    if (settings) {
        if (!features)
            printf("# mpix-acc %d.%d.%d\n", MPIX_ACC_VERSION_MAJOR, MPIX_ACC_VERSION_MINOR,
                   MPIX_ACC_VERSION_PATCH);
        print_settings();
    }
    fflush(stdout);
    return ferror(stdout) ? 1 : 0;
}
