/*
 * hostcost.c - host-side cost per enqueued operation (benchmark, not a test).
 *
 * Rank 0 sends to rank 1 (other ranks idle). For each operation kind, N
 * operations (argv[1], default 10000) of 8 bytes are enqueued on a host stream
 * and the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), the wall time
 * and the process CPU time (all threads: includes the library's progress and
 * host-stream threads) are measured around the enqueue calls only:
 *
 *   held     the stream is held by a gate while enqueuing: pure enqueue cost
 *   running  the stream runs while enqueuing (the progress thread competes)
 *
 * Rows: MPIX_Acc_Isend, MPIX_Acc_Irecv, MPIX_Acc_Waitall (one call over N
 * requests; per request), Isend+MPIX_Acc_Wait pairs (per pair), and the
 * plain MPI_Isend / MPI_Irecv for reference (their cost includes the actual
 * send/receive posting by MPICH). Target of issue 2: <= 2 us per operation.
 *
 * Build: mpicc -std=c11 -O2 -I<repo>/mpix hostcost.c -L<lib> -lmpixacc -o hostcost
 * Run:   mpiexec -n 2 ./hostcost [N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <mpix_acc.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static int rank, size;

static double clk(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double wall, tcpu, pcpu;
} tm_t;
static tm_t tnow(void)
{
    tm_t t = {clk(CLOCK_MONOTONIC), clk(CLOCK_THREAD_CPUTIME_ID), clk(CLOCK_PROCESS_CPUTIME_ID)};
    return t;
}

typedef struct {
    char name[48];
    char mode[8];
    long n;
    double wall_us, tcpu_us, pcpu_us;
} row_t;
#define MAXROWS 32
static row_t rows[MAXROWS];
static int nrows;

static void record(const char *name, const char *mode, long n, tm_t a, tm_t b)
{
    if (nrows >= MAXROWS)
        return;
    row_t *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->mode, sizeof r->mode, "%s", mode);
    r->n = n;
    r->wall_us = 1e6 * (b.wall - a.wall) / (double)n;
    r->tcpu_us = 1e6 * (b.tcpu - a.tcpu) / (double)n;
    r->pcpu_us = 1e6 * (b.pcpu - a.pcpu) / (double)n;
}

typedef struct {
    atomic_int open;
} gate_t;
static void gate_fn(void *arg)
{
    gate_t *g = arg;
    struct timespec ts = {0, 100000};
    while (!atomic_load(&g->open))
        nanosleep(&ts, NULL);
}

#define CHK(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            fprintf(stderr, "hostcost rank %d: %s failed (%d)\n", rank, #call, rc_);               \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    /* the "held" rows enqueue N operations behind a closed gate: without this
     * the calls would wait once MPIX_ACC_STREAM_DEPTH points are queued (and
     * fail after 10 s); a user's setting is kept */
    setenv("MPIX_ACC_STREAM_DEPTH", "0", 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long N = argc > 1 ? atol(argv[1]) : 10000;
    if (size < 2 || N < 1) {
        if (rank == 0)
            fprintf(stderr, "hostcost: needs 2 ranks and N >= 1\n");
        MPI_Finalize();
        return 1;
    }
    MPIX_Acc_stream S;
    CHK(MPIX_Acc_Hoststream_create(&S));
    long *buf = calloc((size_t)N, sizeof(long));
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)N);
    int peer = rank == 0 ? 1 : 0;
    int active = rank < 2;

    for (int rep = 0; rep < 3; rep++) { /* rep 0 is a warm-up, not recorded */
        for (int held = 1; held >= 0; held--) {
            const char *mode = held ? "held" : "running";
            gate_t g;
            atomic_store(&g.open, 0);
            MPI_Barrier(MPI_COMM_WORLD);
            if (active) {
                if (held)
                    CHK(MPIX_Acc_Hoststream_launch(S, gate_fn, &g));
                tm_t a = tnow();
                for (long i = 0; i < N; i++) {
                    if (rank == 0)
                        CHK(MPIX_Acc_Isend(S, &buf[i], 1, MPI_LONG, peer, 1, MPI_COMM_WORLD,
                                           &rq[i]));
                    else
                        CHK(MPIX_Acc_Irecv(S, &buf[i], 1, MPI_LONG, peer, 1, MPI_COMM_WORLD,
                                           &rq[i]));
                }
                tm_t b = tnow();
                CHK(MPIX_Acc_Waitall(S, (int)N, rq, MPI_STATUSES_IGNORE));
                tm_t c = tnow();
                atomic_store(&g.open, 1);
                CHK(MPIX_Acc_Hoststream_synchronize(S));
                if (rep == 2) {
                    record(rank == 0 ? "MPIX_Acc_Isend" : "MPIX_Acc_Irecv", mode, N, a, b);
                    record("MPIX_Acc_Waitall (per request)", mode, N, b, c);
                }
            }
            /* Isend/Irecv + MPIX_Acc_Wait pairs */
            atomic_store(&g.open, 0);
            MPI_Barrier(MPI_COMM_WORLD);
            if (active) {
                if (held)
                    CHK(MPIX_Acc_Hoststream_launch(S, gate_fn, &g));
                tm_t a = tnow();
                for (long i = 0; i < N; i++) {
                    MPI_Request r;
                    if (rank == 0)
                        CHK(MPIX_Acc_Isend(S, &buf[i], 1, MPI_LONG, peer, 2, MPI_COMM_WORLD, &r));
                    else
                        CHK(MPIX_Acc_Irecv(S, &buf[i], 1, MPI_LONG, peer, 2, MPI_COMM_WORLD, &r));
                    CHK(MPIX_Acc_Wait(S, &r, MPI_STATUS_IGNORE));
                }
                tm_t b = tnow();
                atomic_store(&g.open, 1);
                CHK(MPIX_Acc_Hoststream_synchronize(S));
                if (rep == 2)
                    record(rank == 0 ? "Isend+MPIX_Acc_Wait (pair)" : "Irecv+MPIX_Acc_Wait (pair)",
                           mode, N, a, b);
            }
        }
        /* plain MPI reference */
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) {
            tm_t a = tnow();
            for (long i = 0; i < N; i++) {
                if (rank == 0)
                    CHK(MPI_Isend(&buf[i], 1, MPI_LONG, peer, 3, MPI_COMM_WORLD, &rq[i]));
                else
                    CHK(MPI_Irecv(&buf[i], 1, MPI_LONG, peer, 3, MPI_COMM_WORLD, &rq[i]));
            }
            tm_t b = tnow();
            CHK(MPI_Waitall((int)N, rq, MPI_STATUSES_IGNORE));
            if (rep == 2)
                record(rank == 0 ? "MPI_Isend (plain)" : "MPI_Irecv (plain)", "-", N, a, b);
        }
    }

    /* print rank 0's and rank 1's rows from rank 0 */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        MPI_Send(rows, (int)(sizeof(row_t) * (size_t)nrows), MPI_BYTE, 0, 99, MPI_COMM_WORLD);
    if (rank == 0) {
        row_t other[MAXROWS];
        MPI_Status st;
        int cnt;
        MPI_Recv(other, (int)sizeof other, MPI_BYTE, 1, 99, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        int no = cnt / (int)sizeof(row_t);
        printf("hostcost: %ld operations of 8 bytes per row, %d ranks, host stream\n", N, size);
        printf("%-4s %-32s %-8s %12s %14s %14s\n", "rank", "operation", "stream", "wall us/op",
               "thread CPU us", "process CPU us");
        for (int k = 0; k < 2; k++) {
            row_t *rs = k == 0 ? rows : other;
            int nr = k == 0 ? nrows : no;
            for (int i = 0; i < nr; i++)
                printf("%-4d %-32s %-8s %12.3f %14.3f %14.3f\n", k, rs[i].name, rs[i].mode,
                       rs[i].wall_us, rs[i].tcpu_us, rs[i].pcpu_us);
        }
        fflush(stdout);
    }
    CHK(MPIX_Acc_Hoststream_free(&S));
    free(buf);
    free(rq);
    MPI_Finalize();
    return 0;
}
