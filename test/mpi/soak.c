/*
 * soak.c - at least 10^6 checked stream-ordered messages between two ranks
 * on host streams, with the process's resident memory sampled: after the
 * warm-up it must not grow (a leak of operations, requests, eager copies or
 * table entries shows up here long before it shows up anywhere else).
 *
 * Each rank exchanges batches of BATCH messages with its partner (ranks 2k
 * and 2k+1; an odd last rank exchanges with itself): sizes 8 B mostly, every
 * 16th message 1 KiB (still eager). Three ways to complete a batch rotate:
 * a stream wait (MPIX_Acc_Waitall) followed by a host-stream synchronize
 * every few batches, a host MPI_Waitall, and a stream communicator's
 * MPI_Waitall (stream-ordered). Every byte received is checked.
 *
 * SOAK_MESSAGES: messages per rank, sent plus received (default 500000, so
 * 10^6 in total between two ranks; scaled down under sanitizers/valgrind).
 * SOAK_RSS_SLACK_KB: allowed growth after the warm-up (default 4096); checked in
 * plain runs only (under ASan, TSan and valgrind the tool owns the heap and
 * checks leaks itself).
 */
#include "common.h"

#define BATCH 64
#define BIG 1024

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t msg_bytes(int k) { return (k % 16) == 15 ? BIG : 8; }

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "soak", 240);
    const char *mode_env = getenv("MPIXACC_TEST_MODE");
    int slow = mode_env && strcmp(mode_env, "plain") != 0;
    long total = slow ? 40000 : 500000;
    const char *e = getenv("SOAK_MESSAGES");
    if (e && atol(e) > 0)
        total = atol(e);
    long slack_kb = 4096;
    if ((e = getenv("SOAK_RSS_SLACK_KB")) && atol(e) > 0)
        slack_kb = atol(e);
    int peer = t_rank ^ 1;
    if (peer >= t_size)
        peer = t_rank;
    long batches = (total + 2 * BATCH - 1) / (2 * BATCH);
    if (batches < 10)
        batches = 10;

    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    MPI_Comm sc;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &sc));
    T_MPI(MPIX_Acc_Comm_set_stream(sc, s));

    uint8_t *sbuf = malloc((size_t)BATCH * BIG), *rbuf = malloc((size_t)BATCH * BIG);
    T_CHECK(sbuf && rbuf, "out of memory");
    MPI_Request reqs[2 * BATCH];
    long warm = batches / 5, rss_warm = 0, rss_max = 0, checked = 0;
    double t0 = t_now();
    for (long b = 0; b < batches; b++) {
        int way = (int)(b % 3);
        MPI_Comm comm = way == 2 ? sc : MPI_COMM_WORLD;
        t_phase(way == 0 ? "stream wait" : way == 1 ? "host MPI_Waitall" : "stream communicator");
        for (int k = 0; k < BATCH; k++) {
            size_t n = msg_bytes(k);
            uint8_t *r = rbuf + (size_t)k * BIG;
            memset(r, 0, n);
            if (way == 2)
                T_MPI(MPI_Irecv(r, (int)n, MPI_BYTE, peer, k, comm, &reqs[k]));
            else
                T_MPI(MPIX_Acc_Irecv(s, r, (int)n, MPI_BYTE, peer, k, comm, &reqs[k]));
        }
        for (int k = 0; k < BATCH; k++) {
            size_t n = msg_bytes(k);
            uint8_t *p = sbuf + (size_t)k * BIG;
            /* the previous batch's sends are complete: the buffer is free */
            t_fill(p, n, (uint64_t)b * 4096 + (uint64_t)k * 8 + (uint64_t)t_rank);
            if (way == 2)
                T_MPI(MPI_Isend(p, (int)n, MPI_BYTE, peer, k, comm, &reqs[BATCH + k]));
            else
                T_MPI(MPIX_Acc_Isend(s, p, (int)n, MPI_BYTE, peer, k, comm, &reqs[BATCH + k]));
        }
        if (way == 0)
            T_MPI(MPIX_Acc_Waitall(s, 2 * BATCH, reqs, MPI_STATUSES_IGNORE));
        else
            T_MPI(MPI_Waitall(2 * BATCH, reqs, MPI_STATUSES_IGNORE));
        if (way != 1)
            T_MPI(MPIX_Acc_Hoststream_synchronize(s));
        for (int k = 0; k < BATCH; k++) {
            char what[96];
            snprintf(what, sizeof what, "batch %ld message %d", b, k);
            t_expect_pattern(rbuf + (size_t)k * BIG, msg_bytes(k),
                             (uint64_t)b * 4096 + (uint64_t)k * 8 + (uint64_t)peer, what);
        }
        checked += 2 * BATCH;
        if (b == warm)
            rss_warm = rss_kb();
        if (b > warm && (b % 64) == 0) {
            long r = rss_kb();
            if (r > rss_max)
                rss_max = r;
        }
    }
    long rss_end = rss_kb();
    if (rss_end > rss_max)
        rss_max = rss_end;
    double dt = t_now() - t0;
    long all = 0;
    MPI_Reduce(&checked, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("[soak] rank %d: %ld messages checked in %.2f s; RSS after warm-up %ld KiB, max %ld "
           "KiB (growth %ld KiB, allowed %ld)\n",
           t_rank, checked, dt, rss_warm, rss_max, rss_max - rss_warm, slack_kb);
    if (t_rank == 0)
        printf("[soak] %ld messages checked in total\n", all);
    /* Under ASan (quarantine), TSan and valgrind the process's memory is the
     * tool's: they check leaks themselves, the RSS check is for plain runs. */
    if (!slow)
        T_CHECK(rss_max - rss_warm <= slack_kb,
                "resident memory grew by %ld KiB after the warm-up (allowed %ld KiB)",
                rss_max - rss_warm, slack_kb);
    else if (t_rank == 0)
        printf("[soak] RSS check skipped under %s (the tool checks leaks)\n", mode_env);
    free(sbuf);
    free(rbuf);
    MPI_Comm_free(&sc);
    T_MPI(MPIX_Acc_Hoststream_free(&s));
    return t_finish();
}
