/*
 * ex_util.h - small helpers shared by the examples (timing, statistics,
 * option parsing, fatal errors). Header-only; C only.
 */
#ifndef EX_UTIL_H
#define EX_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <mpi.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* GCC >= 11 warns about MPI_STATUSES_IGNORE passed for an `MPI_Status x[]`
 * parameter: a false positive. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define EX_UNUSED __attribute__((unused))

static inline double ex_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Print a message prefixed with the program name and rank, abort the job. */
static void ex_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void ex_die(const char *fmt, ...)
{
    int rank = -1, init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] error: %s\n", rank, msg);
    fflush(stderr);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Check an MPI return code. */
#define EX_MPI(call)                                                                               \
    do {                                                                                           \
        int ex_rc_ = (call);                                                                       \
        if (ex_rc_ != MPI_SUCCESS) {                                                               \
            char ex_s_[MPI_MAX_ERROR_STRING];                                                      \
            int ex_l_ = 0;                                                                         \
            MPI_Error_string(ex_rc_, ex_s_, &ex_l_);                                               \
            ex_die("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, ex_s_);                      \
        }                                                                                          \
    } while (0)

static int ex_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Median, min and max of v[0..n-1] (v is sorted in place). */
static EX_UNUSED void ex_stats(double *v, int n, double *med, double *mn, double *mx)
{
    qsort(v, (size_t)n, sizeof *v, ex_cmp_double);
    *mn = v[0];
    *mx = v[n - 1];
    *med = (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Parse a size with an optional suffix k/K (1024), m/M (1024^2), g/G.
 * Returns -1 on a malformed value. */
static EX_UNUSED long long ex_parse_size(const char *s)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'B') /* tolerate KiB / kB forms */
        end++;
    if (*end == 'B')
        end++;
    return *end ? -1 : v;
}

/* Parse a comma-separated list of sizes into out[] (at most max entries).
 * Returns the count, or -1 on error. */
static EX_UNUSED int ex_parse_size_list(const char *s, long long *out, int max)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long v = ex_parse_size(tok);
        if (v < 0 || n >= max) {
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

/* Non-negative integer option value; dies with the option name on error. */
static EX_UNUSED long ex_parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "invalid value for %s: '%s' (expected an integer in [%ld, %ld])\n", opt, s,
                lo, hi);
        exit(2);
    }
    return v;
}

static EX_UNUSED double ex_parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "invalid value for %s: '%s' (expected a number in [%g, %g])\n", opt, s, lo,
                hi);
        exit(2);
    }
    return v;
}

/* Parse a comma-separated selection of names[0..count) (or "all") into
 * use[] (1 = selected); dies with "unknown WHAT 'x' (n1, n2, ..., all)" on
 * a name not listed. */
static EX_UNUSED void ex_parse_name_list(const char *arg, const char *const *names, int count,
                                         int *use, const char *what)
{
    memset(use, 0, sizeof(int) * (size_t)count);
    char *copy = strdup(arg), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int v = 0; v < count; v++)
            if (!strcmp(t, "all") || !strcmp(t, names[v]))
                use[v] = found = 1;
        if (!found) {
            fprintf(stderr, "unknown %s '%s' (", what, t);
            for (int v = 0; v < count; v++)
                fprintf(stderr, "%s, ", names[v]);
            fprintf(stderr, "all)\n");
            exit(2);
        }
    }
    free(copy);
}

/* ------------------------------------------------------------------ */
/* option parsing: the parts every example's parse_opts shares         */

/* Print the usage (on stdout for status 0, else stderr) and exit. */
static void ex_usage_exit(void (*usage)(FILE *), int status) __attribute__((noreturn, unused));
static void ex_usage_exit(void (*usage)(FILE *), int status)
{
    usage(status ? stderr : stdout);
    exit(status);
}

/* getopt_long plus what every example does the same: -h/--help (usage on
 * stdout, exit 0), an unknown option or a missing value (usage on stderr,
 * exit 2) and, at the end, an argument that is not an option ("unexpected
 * argument 'x'", usage on stderr, exit 2). Returns the next option, -1 at
 * the end. The long options map "help" to 'h'. */
static EX_UNUSED int ex_getopt(int argc, char **argv, const char *shortopts,
                               const struct option *longopts, void (*usage)(FILE *))
{
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c == 'h')
        ex_usage_exit(usage, 0);
    if (c == '?' || c == ':')
        ex_usage_exit(usage, 2);
    if (c == -1 && optind < argc) {
        fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
        ex_usage_exit(usage, 2);
    }
    return c;
}

/* --sizes LIST into out[] (at most max); dies with "invalid --sizes" (exit 2). */
static EX_UNUSED int ex_opt_sizes(const char *arg, long long *out, int max)
{
    int n = ex_parse_size_list(arg, out, max);
    if (n <= 0) {
        fprintf(stderr, "invalid --sizes '%s'\n", arg);
        exit(2);
    }
    return n;
}

/* A size sweep lo, lo*factor, ... up to hi into out[] (at most max entries;
 * 0 is followed by 1). Returns the count. */
static EX_UNUSED int ex_size_sweep(long long lo, long long hi, long long factor, long long *out,
                                   int max)
{
    int n = 0;
    for (long long s = lo; s <= hi && n < max; s = s ? s * factor : 1)
        out[n++] = s;
    return n;
}

/* Every message size in [1, 1G], else die (exit 2) naming the first bad one. */
static EX_UNUSED void ex_check_message_sizes(const long long *sizes, int n)
{
    for (int i = 0; i < n; i++)
        if (sizes[i] < 1 || sizes[i] > (1LL << 30)) {
            fprintf(stderr, "message size %lld out of range [1, 1G]\n", sizes[i]);
            exit(2);
        }
}

/* "8 B", "64 KiB", "16 MiB". */
static EX_UNUSED void ex_size_label(long long n, char *buf, size_t len)
{
    if (n >= (1 << 20) && n % (1 << 20) == 0)
        snprintf(buf, len, "%lld MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, len, "%lld KiB", n >> 10);
    else
        snprintf(buf, len, "%lld B", n);
}

/* CPU time of the calling thread, seconds. */
static inline double ex_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank within the node (for GPU selection). */
static EX_UNUSED int ex_local_rank(MPI_Comm comm)
{
    MPI_Comm node;
    int r;
    EX_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

/* A duplicate of comm with the MPI-4 assertions mpi_assert_no_any_source
 * and mpi_assert_no_any_tag (the acc-sx variants: mpix-acc's
 * stream-executed path may then carry messages within a node). */
static EX_UNUSED void ex_comm_dup_no_wildcards(MPI_Comm comm, MPI_Comm *out)
{
    MPI_Info info;
    EX_MPI(MPI_Info_create(&info));
    EX_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    EX_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    EX_MPI(MPI_Comm_dup_with_info(comm, info, out));
    EX_MPI(MPI_Info_free(&info));
}

/* Whether the MPI library takes device (CUDA) pointers: 1 yes, 0 no, -1
 * cannot tell (no query in this MPI). The `cuda-aware` variants run only
 * on 1: device pointers given to an MPI without CUDA support crash it. */
static EX_UNUSED int ex_mpi_cuda_support(void)
{
#if defined(MPIX_GPU_SUPPORT_CUDA) && defined(MPICH_NUMVERSION)
    int sup = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &sup) == MPI_SUCCESS && sup;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return -1;
#endif
}

/* Why a cuda-aware variant cannot run (s: ex_mpi_cuda_support()). */
static EX_UNUSED const char *ex_mpi_cuda_why(int s)
{
    return s == 0 ? "the MPI library reports no CUDA support (device pointers would crash it)"
                  : "the MPI library offers no way to ask for CUDA support";
}

#endif
