/*
 * common.h - shared helpers for the multi-rank tests in test/mpi.
 *
 * The parts shared with the GPU tests (failures, T_MPI/T_CHECK, the time
 * guard, data patterns) are in test/common/t_common.h. Every test:
 *   - calls t_init() (MPI_Init, rank/size, a hard SIGALRM time guard, the
 *     watchdog),
 *   - reports failures with t_fail() (rank, phase, what, expected vs got),
 *     which prints one line to stderr and aborts the whole job (exit != 0),
 *   - ends with t_finish() (barrier, "PASS" line on rank 0, MPI_Finalize).
 *
 * Functions launched on host streams must not call MPI; they record failures
 * with t_async_fail(), which the main thread turns into a test failure with
 * t_check_async() after synchronizing the stream.
 *
 * Only mpi.h, mpix_acc.h and the C/POSIX libraries are used.
 */
#ifndef MPIXACC_TEST_COMMON_H
#define MPIXACC_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <mpi.h>
#include <mpix_acc.h>

/* GCC >= 11 warns about MPI_STATUSES_IGNORE passed for an `MPI_Status x[]`
 * parameter (also for MPICH's own MPI_Waitall): a false positive. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#include <inttypes.h>
#include <stdatomic.h>
#include <pthread.h>

/* The MPI call the main thread is in (or last made), for reports from
 * other threads: a gate that times out names it; T_MPI records it. */
static const char *_Atomic t_in_call = "";
static _Atomic int t_in_line;
static _Atomic double t_in_since; /* 0: not inside a T_MPI call */
#define T_MPI_ENTER(text)                                                                          \
    (atomic_store(&t_in_call, (text)), atomic_store(&t_in_line, __LINE__),                         \
     atomic_store(&t_in_since, t_now()))
#define T_MPI_LEAVE() atomic_store(&t_in_since, 0.0)

#include "../common/t_common.h"

/* ------------------------------------------------------------------ */
/* host-stream failures                                                */

static atomic_int t_async_failed;
static char t_async_msg[512];

/* Record a failure from a host-stream function (no MPI calls there). */
T_UNUSED static void t_async_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
T_UNUSED static void t_async_fail(const char *fmt, ...)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&t_async_failed, &expected, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t_async_msg, sizeof t_async_msg, fmt, ap);
        va_end(ap);
    } else {
        atomic_fetch_add(&t_async_failed, 1);
    }
}

static inline void t_check_async(void)
{
    int n = atomic_load(&t_async_failed);
    if (n)
        t_fail("%d failure(s) recorded on a stream; first: %s", n, t_async_msg);
}

/* Watchdog: names the MPI call the main thread has been inside for more
 * than 10 s (once per call), so a rank that blocks where it must not says
 * where, even when another rank's failure ends the job first. */
static void *t_watchdog(void *arg)
{
    (void)arg;
    double reported = -1.0;
    for (;;) {
        sleep(1);
        double since = atomic_load(&t_in_since);
        if (since > 0.0 && since != reported && t_now() - since > T_SLOW(10.0)) {
            reported = since;
            fprintf(stderr, "[%s] rank %d: main thread inside line %d: %s for %.0f s\n", t_name,
                    t_rank, atomic_load(&t_in_line), atomic_load(&t_in_call), t_now() - since);
            /* debugging hook, e.g. a script that prints every rank's stacks */
            const char *cmd = getenv("MPIXACC_TEST_HANG_CMD");
            if (cmd && *cmd && system(cmd) != 0)
                fprintf(stderr, "[%s] rank %d: MPIXACC_TEST_HANG_CMD failed\n", t_name, t_rank);
        }
    }
    return NULL;
}

static inline void t_init(int *argc, char ***argv, const char *name, int timeout_s)
{
    t_start(name, timeout_s);
    t_phase("MPI_Init");
    T_MPI(MPI_Init(argc, argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    pthread_t wd;
    if (pthread_create(&wd, NULL, t_watchdog, NULL) == 0)
        pthread_detach(wd);
    t_phase("start");
}

static inline int t_finish(void)
{
    t_phase("final barrier");
    t_check_async();
    return t_end("");
}

/* A stream communicator on a new host stream: a duplicate of
 * MPI_COMM_WORLD with the stream attached (MPIX_Acc_Comm_set_stream) and
 * MPI_ERRORS_RETURN; *s gets the stream. Undo with t_stream_comm_free. */
T_UNUSED static MPI_Comm t_stream_comm(MPIX_Acc_stream *s)
{
    MPI_Comm c;
    T_MPI(MPIX_Acc_Hoststream_create(s));
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    T_MPI(MPIX_Acc_Comm_set_stream(c, *s));
    T_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    return c;
}

/* Synchronize the stream, free the communicator and the stream. */
T_UNUSED static void t_stream_comm_free(MPI_Comm *c, MPIX_Acc_stream *s)
{
    T_MPI(MPIX_Acc_Hoststream_synchronize(*s));
    T_MPI(MPI_Comm_free(c));
    T_MPI(MPIX_Acc_Hoststream_free(s));
}

/* ------------------------------------------------------------------ */
/* host-stream work items                                              */

/* A gate blocks its stream until the host opens it (or 30 s pass). */
typedef struct {
    atomic_int entered; /* the stream reached the gate */
    atomic_int open;
} t_gate_t;

T_UNUSED static void t_gate_fn(void *arg)
{
    t_gate_t *g = (t_gate_t *)arg;
    atomic_store(&g->entered, 1);
    double t0 = t_now();
    while (!atomic_load(&g->open)) {
        if (t_now() - t0 > T_SLOW(30.0)) {
            t_async_fail("gate was never opened (%.0f s); main thread in or after line %d: %s",
                         T_SLOW(30.0), atomic_load(&t_in_line), atomic_load(&t_in_call));
            fprintf(stderr, "[rank %d] gate timeout: main thread in or after line %d: %s\n", t_rank,
                    atomic_load(&t_in_line), atomic_load(&t_in_call));
            return;
        }
        t_sleep_ms(0.2);
    }
}

static inline void t_gate_init(t_gate_t *g)
{
    atomic_store(&g->entered, 0);
    atomic_store(&g->open, 0);
}

/* Sleep `ms` on the stream. */
typedef struct {
    double ms;
} t_sleep_arg_t;
T_UNUSED static void t_sleep_fn(void *arg) { t_sleep_ms(((t_sleep_arg_t *)arg)->ms); }

/* Ranks 0 and 1 (the only callers): hold host stream s for hold_ms, then
 * enqueue iters ping-pong iterations of one uint64_t on it (rank 0 sends
 * i + 1 and receives the echo, rank 1 echoes), synchronize s. Returns the
 * seconds the enqueue loop took; *last_echo is the last value rank 0
 * received (iters when every message arrived). */
T_UNUSED static double t_pingpong_behind_hold(MPIX_Acc_stream s, int iters, double hold_ms,
                                              uint64_t *last_echo)
{
    int peer = 1 - t_rank;
    uint64_t buf[2] = {0, 0};
    t_sleep_arg_t hold = {.ms = hold_ms};
    T_MPI(MPIX_Acc_Hoststream_launch(s, t_sleep_fn, &hold));
    double t0 = t_now();
    for (int i = 0; i < iters; i++) {
        MPI_Request rq[2];
        if (t_rank == 0) {
            buf[0] = (uint64_t)i + 1;
            /* the value is read when the stream reaches the send */
            T_MPI(MPIX_Acc_Isend(s, &buf[0], 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD, &rq[0]));
            T_MPI(MPIX_Acc_Irecv(s, &buf[1], 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD, &rq[1]));
            T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
        } else {
            T_MPI(MPIX_Acc_Irecv(s, &buf[1], 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD, &rq[0]));
            T_MPI(MPIX_Acc_Wait(s, &rq[0], MPI_STATUS_IGNORE));
            T_MPI(MPIX_Acc_Isend(s, &buf[1], 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD, &rq[1]));
            T_MPI(MPIX_Acc_Wait(s, &rq[1], MPI_STATUS_IGNORE));
        }
    }
    double t_enq = t_now() - t0;
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    *last_echo = buf[1];
    return t_enq;
}

/* Rank 1 of a "limit error" phase: receive from rank 0 how many receives
 * (tag 2) it managed to post (an int, tag 3), then send value base + i to
 * each on host stream s (stream-ordered messages match stream-ordered
 * receives only), wait for them and synchronize s. vals and rq hold at
 * least that many entries. */
T_UNUSED static void t_send_to_posted(MPIX_Acc_stream s, uint64_t *vals, MPI_Request *rq,
                                      uint64_t base)
{
    int posted = 0;
    T_MPI(MPI_Recv(&posted, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < posted; i++) {
        vals[i] = base + (uint64_t)i;
        T_MPI(MPIX_Acc_Isend(s, &vals[i], 1, MPI_UINT64_T, 0, 2, MPI_COMM_WORLD, &rq[i]));
    }
    T_MPI(MPIX_Acc_Waitall(s, posted, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
}

/* Rank 0's side: vals[i] == base + i for the n receives. */
T_UNUSED static void t_expect_posted(const uint64_t *vals, int n, uint64_t base)
{
    for (int i = 0; i < n; i++)
        T_CHECK(vals[i] == base + (uint64_t)i, "receive %d got %llu, expected %llu", i,
                (unsigned long long)vals[i], (unsigned long long)(base + (uint64_t)i));
}

/* Fill a buffer with a pattern on the stream (after an optional sleep). */
typedef struct {
    void *buf;
    size_t n;
    uint64_t seed;
    double sleep_ms;
    atomic_int done;
} t_fill_arg_t;
T_UNUSED static void t_fill_fn(void *arg)
{
    t_fill_arg_t *a = (t_fill_arg_t *)arg;
    if (a->sleep_ms > 0)
        t_sleep_ms(a->sleep_ms);
    t_fill(a->buf, a->n, a->seed);
    atomic_store(&a->done, 1);
}

/* Check a buffer against a pattern on the stream. */
typedef struct {
    const void *buf;
    size_t n;
    uint64_t seed;
    const char *what;
    atomic_int ran;
} t_verify_arg_t;
T_UNUSED static void t_verify_fn(void *arg)
{
    t_verify_arg_t *a = (t_verify_arg_t *)arg;
    long bad = t_verify(a->buf, a->n, a->seed);
    if (bad >= 0)
        t_async_fail("%s: stream-side check: data mismatch at byte %ld of %zu: expected 0x%02x "
                     "got 0x%02x",
                     a->what, bad, a->n, t_pat(a->seed, (size_t)bad),
                     ((const uint8_t *)a->buf)[bad]);
    atomic_store(&a->ran, 1);
}

/* Set a flag on the stream. */
T_UNUSED static void t_flag_fn(void *arg) { atomic_store((atomic_int *)arg, 1); }

/* One stream-ordered exchange of n bytes with peer on s, synchronized and
 * checked: sends pattern `mine`, expects the peer's pattern `theirs`. */
T_UNUSED static void t_exchange_checked(MPIX_Acc_stream s, uint8_t *sbuf, uint8_t *rbuf, size_t n,
                                        int peer, int tag, MPI_Comm comm, uint64_t mine,
                                        uint64_t theirs, const char *what)
{
    MPI_Request rq[2];
    t_fill(sbuf, n, mine);
    T_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, peer, tag, comm, &rq[0]));
    T_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, peer, tag, comm, &rq[1]));
    T_MPI(MPIX_Acc_Waitall(s, 2, rq, MPI_STATUSES_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(s));
    t_expect_pattern(rbuf, n, theirs, what);
}

/* Format a stream handle the way the info keys want it ("0x..." hex). */
static inline void t_stream_str(MPIX_Acc_stream s, char *buf, size_t len)
{
    snprintf(buf, len, "0x%" PRIxPTR, (uintptr_t)s);
}

/* Check an MPI status of a completed receive. */
static inline void t_expect_status(const MPI_Status *st, int source, int tag, int count,
                                   MPI_Datatype dt, const char *what)
{
    int c = -12345;
    T_CHECK(st->MPI_SOURCE == source, "%s: status.MPI_SOURCE expected %d got %d", what, source,
            st->MPI_SOURCE);
    T_CHECK(st->MPI_TAG == tag, "%s: status.MPI_TAG expected %d got %d", what, tag, st->MPI_TAG);
    T_MPI(MPI_Get_count(st, dt, &c));
    T_CHECK(c == count, "%s: MPI_Get_count expected %d got %d", what, count, c);
}

#endif
