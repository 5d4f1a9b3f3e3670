/*
 * finalize_pending.c - MPI_Finalize with pending stream-ordered operations.
 *
 * Run with MPIX_ACC_FINALIZE_TIMEOUT=2 (the test refuses to run without it).
 * Every rank enqueues on a host stream:
 *   - an Irecv (tag 999) that is never matched, followed by a stream wait
 *     and a launched function, and
 *   - a 256 KiB Isend (tag 998) that is never received (the transport may
 *     complete it locally, buffered at the receiver; it need not be reported);
 * and even ranks r (with r+1 < size) additionally enqueue a send to r+1 that
 * starts 0.5 s later (behind a launched sleep) and call MPI_Finalize right
 * away: that send must be drained (delivered), r+1 checks the data.
 *
 * MPI_Finalize must return within the timeout (+ 8 s of slack) and must
 * report the stuck operations: the test captures its own stdout/stderr
 * around MPI_Finalize and requires a report that mentions them (one of:
 * pending, stuck, cancel, timed out, timeout, outstanding, incomplete, not
 * complete, unfinished; case-insensitive). The captured text also goes to
 * stderr as it is written. Exit status 0 on success.
 */
#include "common.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/wait.h>

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "finalize_pending", 60);
    const char *to = getenv("MPIX_ACC_FINALIZE_TIMEOUT");
    T_CHECK(to && atof(to) > 0, "set MPIX_ACC_FINALIZE_TIMEOUT (e.g. 2) in the environment");
    double timeout = atof(to);
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    MPIX_Acc_stream S, D;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&D));

    t_phase("enqueue the stuck operations");
    static int never[16];
    static uint8_t big[262144];
    MPI_Request r1, r2;
    atomic_int after;
    atomic_store(&after, 0);
    T_MPI(MPIX_Acc_Irecv(S, never, 16, MPI_INT, next, 999, MPI_COMM_WORLD, &r1));
    T_MPI(MPIX_Acc_Wait(S, &r1, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_flag_fn, &after));
    T_MPI(MPIX_Acc_Isend(D, big, (int)sizeof big, MPI_BYTE, prev, 998, MPI_COMM_WORLD, &r2));
    T_MPI(MPIX_Acc_Wait(D, &r2, MPI_STATUS_IGNORE));

    t_phase("drainable send");
    enum { DN = 100000 };
    static uint8_t dbuf[DN];
    int sender = (t_rank % 2 == 0) && (t_rank + 1 < t_size);
    int receiver = (t_rank % 2 == 1);
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (sender) {
        static t_sleep_arg_t slp = {.ms = 500};
        MPIX_Acc_stream E;
        T_MPI(MPIX_Acc_Hoststream_create(&E));
        t_fill(dbuf, DN, 4242);
        MPI_Request rq;
        T_MPI(MPIX_Acc_Hoststream_launch(E, t_sleep_fn, &slp));
        T_MPI(MPIX_Acc_Isend(E, dbuf, DN, MPI_BYTE, t_rank + 1, 5, MPI_COMM_WORLD, &rq));
        T_MPI(MPIX_Acc_Wait(E, &rq, MPI_STATUS_IGNORE));
        /* no synchronize: MPI_Finalize must drain it */
    }
    if (receiver) {
        MPIX_Acc_stream E;
        T_MPI(MPIX_Acc_Hoststream_create(&E));
        MPI_Status st;
        memset(dbuf, 0, DN);
        T_MPI(MPIX_Acc_Recv(E, dbuf, DN, MPI_BYTE, t_rank - 1, 5, MPI_COMM_WORLD, &st));
        T_MPI(MPIX_Acc_Hoststream_synchronize(E));
        t_expect_pattern(dbuf, DN, 4242, "send drained by the sender's MPI_Finalize");
        t_expect_status(&st, t_rank - 1, 5, DN, MPI_BYTE, "drained send");
        T_MPI(MPIX_Acc_Hoststream_free(&E));
    }

    /* Capture stdout+stderr around MPI_Finalize through a pipe read by a
     * forked helper that copies everything to the real stderr at once (so a
     * crash inside MPI_Finalize still shows its output) and to a file that
     * is checked afterwards. The helper touches nothing but these fds. */
    t_phase("MPI_Finalize with pending operations");
    fflush(stdout);
    fflush(stderr);
    char path[] = "/tmp/mpixacc-finalize-XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0, "mkstemp failed");
    int pfd[2];
    T_CHECK(pipe(pfd) == 0, "pipe failed");
    int save1 = dup(1), save2 = dup(2);
    pid_t helper = fork();
    T_CHECK(helper >= 0, "fork failed");
    if (helper == 0) {
        close(pfd[1]);
        char b[4096];
        ssize_t n;
        while ((n = read(pfd[0], b, sizeof b)) > 0) {
            ssize_t w = write(save2, b, (size_t)n);
            w = write(fd, b, (size_t)n);
            (void)w;
        }
        _exit(0);
    }
    close(pfd[0]);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    close(pfd[1]);
    t_guard((int)timeout + 30);
    double t0 = t_now();
    int rc = MPI_Finalize();
    double dt = t_now() - t0;
    fflush(stdout);
    fflush(stderr);
    dup2(save1, 1);
    dup2(save2, 2);
    alarm(0);
    int wst;
    waitpid(helper, &wst, 0);

    char text[65536];
    ssize_t len = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    if (len < 0)
        len = 0;
    text[len] = 0;
    fprintf(stderr,
            "[finalize_pending] rank %d: MPI_Finalize returned %d after %.2f s; it "
            "printed %zd bytes (above)\n",
            t_rank, rc, dt, len);
    int fail = 0;
    if (rc != MPI_SUCCESS) {
        /* reporting through the return code is allowed; it must still return */
        fprintf(stderr, "[finalize_pending] rank %d: note: MPI_Finalize returned error code %d\n",
                t_rank, rc);
    }
    if (dt > timeout + T_SLOW(8.0)) {
        fprintf(stderr,
                "[finalize_pending] rank %d FAIL: MPI_Finalize took %.2f s with "
                "MPIX_ACC_FINALIZE_TIMEOUT=%s\n",
                t_rank, dt, to);
        fail = 1;
    }
    lower(text);
    const char *words[] = {"pending",     "stuck",      "cancel",       "timed out", "timeout",
                           "outstanding", "incomplete", "not complete", "unfinished"};
    int found = 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(text, words[i]))
            found = 1;
    if (!found) {
        fprintf(stderr,
                "[finalize_pending] rank %d FAIL: MPI_Finalize did not report the stuck "
                "operations (an Irecv tag 999 was never matched)\n",
                t_rank);
        fail = 1;
    }
    if (!fail && t_rank == 0)
        printf("[finalize_pending] PASS with %d ranks (finalize %.2f s)\n", t_size, dt);
    return fail;
}
