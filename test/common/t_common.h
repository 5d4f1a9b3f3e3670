/*
 * t_common.h - the helpers shared by the multi-rank tests (test/mpi, C) and
 * the GPU tests (test/gpu, CUDA C++): plain C that also compiles as C++.
 *
 *   - state: t_name, t_rank/t_size, the phase (t_phase), the clock (t_now);
 *   - failures: t_fail() prints one line to stderr
 *     ("[name] rank r/n<t_where> FAIL in phase 'p': what") and aborts the
 *     whole job (exit != 0); T_MPI (a call that must succeed) and T_CHECK;
 *   - the hard SIGALRM time guard (t_start, t_guard): the process dies with
 *     "[name] rank r/n FAIL: TIMEOUT after S s in phase 'p' (hang?)" and
 *     exit status 124, after calling t_on_timeout (GPU tests: stack dumps);
 *   - t_need_ranks, t_end (final barrier, "PASS" line on rank 0, MPI_Finalize);
 *   - the byte pattern of the data checks (t_pat, usable in CUDA kernels;
 *     t_fill, t_verify, t_expect_pattern on host memory).
 *
 * test/mpi/common.h adds t_init/t_finish, the watchdog and the host-stream
 * work items; test/gpu/gpu_common.h adds gt_init/gt_finish (device
 * selection), CUDA checks, kernels and memory kinds.
 *
 * MPIXACC_TEST_TIMEOUT_SCALE (set by scripts/run-tests.sh: 3 under
 * sanitizers, 10 under valgrind) stretches every time limit of the tests:
 * the hard guard and the "must be fast" bounds (T_SLOW).
 */
#ifndef MPIXACC_TEST_T_COMMON_H
#define MPIXACC_TEST_T_COMMON_H

#include <mpi.h>
#include <mpix_acc.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define T_UNUSED __attribute__((unused))
#ifdef __CUDACC__
#define T_HOST_DEVICE __host__ __device__
#else
#define T_HOST_DEVICE
#endif

/* ------------------------------------------------------------------ */
/* state                                                               */

static int t_rank = -1, t_size = 0;
static const char *t_name = "test";
static const char *volatile t_phase_name = "init";
static int t_timeout_s = 60;
static double t_scale = 1.0;
#define T_SLOW(seconds) ((seconds)*t_scale)
/* Printed after "rank r/n" in failure lines (GPU tests: " (GPU d)"). */
T_UNUSED static char t_where[32];
/* Called by the time guard after its message (GPU tests: every thread's stack). */
T_UNUSED static void (*t_on_timeout)(void);

static inline void t_phase(const char *p) { t_phase_name = p; }

static inline double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void t_sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - 1000.0 * (double)ts.tv_sec) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ */
/* failures                                                            */

static void t_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void t_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s] rank %d/%d%s FAIL in phase '%s': %s\n", t_name, t_rank, t_size, t_where,
            t_phase_name, msg);
    fflush(stderr);
    fflush(stdout);
    /* give the launcher time to forward the message before the abort kills
     * the job (hydra drops output still in flight) */
    t_sleep_ms(500);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static inline const char *t_errstr(int code)
{
    static char buf[MPI_MAX_ERROR_STRING + 64];
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    s[0] = 0;
    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "(MPI_Error_string failed)");
    MPI_Error_class(code, &cls);
    snprintf(buf, sizeof buf, "code %d class %d \"%s\"", code, cls, s);
    return buf;
}

/* A call that must succeed. T_MPI_ENTER/T_MPI_LEAVE, when defined before
 * this header, record the call the main thread is in (test/mpi/common.h:
 * its watchdog and gates name it). */
#ifndef T_MPI_ENTER
#define T_MPI_ENTER(text) ((void)0)
#define T_MPI_LEAVE() ((void)0)
#endif
#define T_MPI(call)                                                                                \
    do {                                                                                           \
        T_MPI_ENTER(#call);                                                                        \
        int t_rc_ = (call);                                                                        \
        T_MPI_LEAVE();                                                                             \
        if (t_rc_ != MPI_SUCCESS)                                                                  \
            t_fail("%s:%d: %s returned %s, expected MPI_SUCCESS", __FILE__, __LINE__, #call,       \
                   t_errstr(t_rc_));                                                               \
    } while (0)

#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            t_fail(__VA_ARGS__);                                                                   \
    } while (0)

/* Complete a request on the host: MPI_Wait, or (poll != 0) MPI_Test in a
 * loop, failing after limit_s seconds (times the time scale). */
static inline void t_host_complete(MPI_Request *r, MPI_Status *st, int poll, double limit_s,
                                   const char *what)
{
    if (!poll) {
        T_MPI(MPI_Wait(r, st));
        return;
    }
    int flag = 0;
    double t0 = t_now();
    while (!flag) {
        T_MPI(MPI_Test(r, &flag, st));
        T_CHECK(t_now() - t0 < T_SLOW(limit_s), "%s: MPI_Test never completed", what);
    }
}

/* ------------------------------------------------------------------ */
/* time guard                                                          */

T_UNUSED static void t_alarm_handler(int sig)
{
    (void)sig;
    char msg[256];
    int n = snprintf(msg, sizeof msg,
                     "[%s] rank %d/%d FAIL: TIMEOUT after %d s in phase '%s' (hang?)\n", t_name,
                     t_rank, t_size, t_timeout_s, t_phase_name);
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t)n);
        (void)w;
    }
    if (t_on_timeout)
        t_on_timeout();
    _exit(124);
}

/* Restart the hard time guard: the process dies with a message after s s. */
static inline void t_guard(int s)
{
    t_timeout_s = (int)(s * t_scale);
    alarm((unsigned)t_timeout_s);
}

/* Name the test, read the time scale, arm the guard (before MPI_Init). */
static inline void t_start(const char *name, int timeout_s)
{
    t_name = name;
    const char *sc = getenv("MPIXACC_TEST_TIMEOUT_SCALE");
    if (sc && atof(sc) >= 1.0)
        t_scale = atof(sc);
    signal(SIGALRM, t_alarm_handler);
    t_guard(timeout_s);
}

/* A failed peer or link: rc must be the library's transport error
 * ("transport failure ... peer"), of one class for every call checked,
 * within bound_s seconds of t0 (test/mpi/peer_fault.c, link_down.c,
 * test/gpu/sx_fault.cu). */
T_UNUSED static void t_expect_transport_error(int rc, const char *what, double t0, double bound_s)
{
    static int transport_class = -1;
    double dt = t_now() - t0;
    T_CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected the transport error", what);
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    MPI_Error_string(rc, s, &len);
    MPI_Error_class(rc, &cls);
    T_CHECK(strstr(s, "transport failure") != NULL && strstr(s, "peer") != NULL,
            "%s: expected the library's transport error (\"transport failure ... peer is "
            "gone\"), got %s",
            what, t_errstr(rc));
    if (transport_class < 0)
        transport_class = cls;
    T_CHECK(cls == transport_class, "%s: error class %d, the other failures had class %d", what,
            cls, transport_class);
    T_CHECK(dt < bound_s, "%s: took %.1f s to fail (bound %.0f s)", what, dt, bound_s);
    fprintf(stderr, "[%s] rank %d: %s failed after %.2f s as expected: %s\n", t_name, t_rank, what,
            dt, s);
}

/* The victim of a fault test: wait for rank `from`'s go (an int, tag
 * `tag`, MPI_COMM_WORLD), then die by SIGKILL (never returns). */
T_UNUSED static void t_victim_die_on(int from, int tag)
{
    t_phase("victim");
    int go = 0;
    T_MPI(MPI_Recv(&go, 1, MPI_INT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    fprintf(stderr, "[%s] rank %d: raise(SIGKILL) now\n", t_name, t_rank);
    fflush(stderr);
    raise(SIGKILL);
    t_fail("still alive after raise(SIGKILL)");
}

/* MPI_Finalize with a failed peer or link: reported before and after
 * ("[name] rank R: MPI_Finalize returned RC after S s", which the fault
 * scripts check), bounded by a guard of guard_s seconds. */
T_UNUSED static int t_finalize_timed(int guard_s)
{
    fprintf(stderr, "[%s] rank %d: calling MPI_Finalize\n", t_name, t_rank);
    fflush(stderr);
    t_guard(guard_s);
    double tf = t_now();
    int rc = MPI_Finalize();
    alarm(0);
    fprintf(stderr, "[%s] rank %d: MPI_Finalize returned %d after %.2f s\n", t_name, t_rank, rc,
            t_now() - tf);
    return rc;
}

/* ------------------------------------------------------------------ */
/* ranks, end                                                          */

/* Require at least `n` ranks; with fewer, fail (the test's table is wrong). */
/* A duplicate of MPI_COMM_WORLD, with the MPI-4 assertions
 * mpi_assert_no_any_source/_tag when no_wildcards (mpix-acc's
 * stream-executed path may then carry messages within a node), and
 * MPI_ERRORS_RETURN. */
T_UNUSED static MPI_Comm t_comm_dup(int no_wildcards)
{
    MPI_Info info;
    MPI_Comm c;
    T_MPI(MPI_Info_create(&info));
    if (no_wildcards) {
        T_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
        T_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    }
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    T_MPI(MPI_Info_free(&info));
    T_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    return c;
}

/* A duplicate of MPI_COMM_WORLD on stream s (mpix_acc_stream: a stream
 * communicator), with the MPI-4 no-wildcard assertions when no_wildcards
 * (its messages within a node take the stream-executed path), errors
 * returned. */
T_UNUSED static MPI_Comm t_stream_comm_dup(MPIX_Acc_stream s, int no_wildcards)
{
    MPI_Info info;
    MPI_Comm c;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPIX_Acc_Info_set_stream(info, s));
    if (no_wildcards) {
        T_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
        T_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    }
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    T_MPI(MPI_Info_free(&info));
    T_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    return c;
}

/* The MPI error class of an error code */
T_UNUSED static int t_err_class(int rc)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls;
}

static inline void t_need_ranks(int n)
{
    if (t_size < n)
        t_fail("this test needs at least %d ranks, got %d", n, t_size);
}

/* Final barrier, "[name] PASS with N ranks<detail>" on rank 0, MPI_Finalize,
 * guard off. The caller has checked what it owns first. */
static inline int t_end(const char *detail)
{
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        printf("[%s] PASS with %d ranks%s\n", t_name, t_size, detail);
        fflush(stdout);
    }
    t_phase("MPI_Finalize");
    T_MPI(MPI_Finalize());
    alarm(0);
    return 0;
}

/* ------------------------------------------------------------------ */
/* data patterns                                                       */

T_HOST_DEVICE static inline uint8_t t_pat(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    return (uint8_t)x;
}

static inline void t_fill(void *buf, size_t n, uint64_t seed)
{
    uint8_t *b = (uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        b[i] = t_pat(seed, i);
}

/* Returns -1 when buf matches the pattern, else the first bad index. */
static inline long t_verify(const void *buf, size_t n, uint64_t seed)
{
    const uint8_t *b = (const uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != t_pat(seed, i))
            return (long)i;
    return -1;
}

/* Fail with a clear message when buf does not hold pattern `seed`. */
static inline void t_expect_pattern(const void *buf, size_t n, uint64_t seed, const char *what)
{
    long bad = t_verify(buf, n, seed);
    if (bad >= 0)
        t_fail("%s: data mismatch at byte %ld of %zu: expected 0x%02x got 0x%02x", what, bad, n,
               t_pat(seed, (size_t)bad), ((const uint8_t *)buf)[bad]);
}

#endif
