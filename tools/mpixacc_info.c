/*
 * mpixacc_info - what this mpix-acc build can do and how it is configured:
 * version, build features (CUDA, UCX and its transports, hwloc, verbs), the
 * devices it sees, and every MPIX_ACC_* setting in effect with its help.
 *
 * Not an MPI program: it never calls MPI_Init. It links the core library
 * and asks its layers directly.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpix_acc.h"

#include "accel/accel.h"
#include "topo/topo.h"
#include "transport/transport.h"
#include "util/settings.h"
#include "util/log.h"

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

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [-c | -f | -h]\n"
            "Show the mpix-acc version, build features, devices and settings.\n"
            "  -c   settings only (every MPIX_ACC_* variable in effect, with help, range\n"
            "       and default)\n"
            "  -f   version, build features and devices only\n"
            "  -h   this help\n"
            "Settings are read from the environment (MPIX_ACC_*); unknown variables and\n"
            "malformed or out-of-range values are reported on stderr.\n",
            prog);
}

static void print_version(void)
{
    printf("mpix-acc %d.%d.%d: stream-ordered MPI point-to-point communication\n",
           MPIX_ACC_VERSION_MAJOR, MPIX_ACC_VERSION_MINOR, MPIX_ACC_VERSION_PATCH);
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
    int settings = 1, features = 1;
    int opt;
    while ((opt = getopt(argc, argv, "cfh")) != -1) {
        switch (opt) {
        case 'c':
            settings = 1;
            features = 0;
            break;
        case 'f':
            features = 1;
            settings = 0;
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

    mxu_config_load(); /* warns about unknown / malformed MPIX_ACC_* variables */

    if (features) {
        print_version();
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
