/*
 * scaleprobe.c - per-process memory and set-up time against job size
 * (benchmark, not a test; doc/scaling.md). Run by scripts/scale-probe.sh.
 *
 * Each rank measures, on host streams:
 *   init      MPI_Init wall time (the library's address exchange included)
 *   rss0      VmRSS after MPI_Init (kB)
 *   ring      one 8-byte stream-ordered exchange with each neighbour (2 endpoints)
 *   rss1      VmRSS after it
 *   all       one 8-byte stream-ordered exchange with every other rank (N-1 endpoints)
 *   rss2      VmRSS after it
 * Rank 0 prints one line: ranks, then min/median/max over the ranks of each.
 */
#include <mpi.h>
#include <mpix_acc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void exchange(MPIX_Acc_stream s, int peer, int tag)
{
    static long sb, rb;
    MPI_Request r[2];
    MPI_Status st[2];
    MPIX_Acc_Irecv(s, &rb, 1, MPI_LONG, peer, tag, MPI_COMM_WORLD, &r[0]);
    MPIX_Acc_Isend(s, &sb, 1, MPI_LONG, peer, tag, MPI_COMM_WORLD, &r[1]);
    MPIX_Acc_Waitall(s, 2, r, st);
    MPIX_Acc_Hoststream_synchronize(s);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    double t0 = now();
    MPI_Init(&argc, &argv);
    double init = now() - t0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double v[6];
    v[0] = init;
    v[1] = (double)rss_kb();
    MPIX_Acc_stream s;
    MPIX_Acc_Hoststream_create(&s);
    if (size > 1) { /* neighbours: even ranks send first, in tag order */
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        exchange(s, rank % 2 ? prev : next, 1);
        exchange(s, rank % 2 ? next : prev, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    v[2] = (double)rss_kb();
    double t1 = now();
    for (int d = 1; d < size; d++) { /* shifts: to rank+d, from rank-d */
        int to = (rank + d) % size, from = (rank + size - d) % size;
        static long sb, rb;
        MPI_Request r[2];
        MPI_Status st[2];
        MPIX_Acc_Irecv(s, &rb, 1, MPI_LONG, from, 2, MPI_COMM_WORLD, &r[0]);
        MPIX_Acc_Isend(s, &sb, 1, MPI_LONG, to, 2, MPI_COMM_WORLD, &r[1]);
        MPIX_Acc_Waitall(s, 2, r, st);
        MPIX_Acc_Hoststream_synchronize(s);
    }
    v[3] = now() - t1;
    MPI_Barrier(MPI_COMM_WORLD);
    v[4] = (double)rss_kb();
    v[5] = 0;
    double *all = rank == 0 ? malloc(sizeof(double) * 6 * (size_t)size) : NULL;
    MPI_Gather(v, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        const char *name[5] = {"init_s", "rss_init_kB", "rss_ring_kB", "all_pairs_s", "rss_all_kB"};
        printf("scaleprobe ranks %d", size);
        double *col = malloc(sizeof(double) * (size_t)size);
        for (int k = 0; k < 5; k++) {
            for (int r = 0; r < size; r++)
                col[r] = all[6 * r + k];
            qsort(col, (size_t)size, sizeof(double), cmp);
            printf(" | %s %.3g/%.3g/%.3g", name[k], col[0], col[size / 2], col[size - 1]);
        }
        printf("\n");
        free(col);
        free(all);
    }
    MPI_Finalize();
    return 0;
}
