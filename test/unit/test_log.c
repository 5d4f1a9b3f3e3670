/*
 * test_log.c - MPIX_ACC_LOG (util/log.c): format, threshold, rank, one
 * write per message under concurrency, threshold from the environment.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit_check.h"
#include "util/log.h"

static char host[64];

static void short_host(void)
{
    CHECK(gethostname(host, sizeof(host)) == 0);
    host[sizeof(host) - 1] = '\0';
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
}

static void test_parse(void)
{
    CHECK_EQ_LL(mxu_log_parse_level("error"), MXU_LOG_ERROR);
    CHECK_EQ_LL(mxu_log_parse_level("WARN"), MXU_LOG_WARN);
    CHECK_EQ_LL(mxu_log_parse_level("warning"), MXU_LOG_WARN);
    CHECK_EQ_LL(mxu_log_parse_level("Info"), MXU_LOG_INFO);
    CHECK_EQ_LL(mxu_log_parse_level(" debug "), MXU_LOG_DEBUG);
    CHECK_EQ_LL(mxu_log_parse_level("3"), MXU_LOG_DEBUG);
    CHECK_EQ_LL(mxu_log_parse_level("trace"), -1);
    CHECK_EQ_LL(mxu_log_parse_level(""), -1);
    CHECK_EQ_LL(mxu_log_parse_level(NULL), -1);
}

static void test_format(void)
{
    mxu_log_threshold = MXU_LOG_INFO;
    mxu_log_set_rank(3);
    capture_begin();
    int line = __LINE__ + 1;
    MXU_LOG(MXU_LOG_WARN, "hello %d %s", 42, "world");
    MXU_LOG(MXU_LOG_DEBUG, "not shown");     /* above the threshold */
    MXU_LOG(MXU_LOG_INFO, "with newline\n"); /* one newline only */
    mxu_log_set_rank(-1);
    MXU_LOG(MXU_LOG_ERROR, "before rank");
    char *out = capture_end();

    char expect[512];
    snprintf(expect, sizeof(expect),
             "[mpix-acc %s:%ld r3] WARN test_log.c:%d: hello 42 world\n"
             "[mpix-acc %s:%ld r3] INFO test_log.c:%d: with newline\n"
             "[mpix-acc %s:%ld r?] ERROR test_log.c:%d: before rank\n",
             host, (long)getpid(), line, host, (long)getpid(), line + 2, host, (long)getpid(),
             line + 4);
    CHECK(strcmp(out, expect) == 0, "got:\n%s\nexpected:\n%s", out, expect);
    free(out);

    /* threshold error: warnings suppressed */
    mxu_log_threshold = MXU_LOG_ERROR;
    capture_begin();
    MXU_LOG(MXU_LOG_WARN, "suppressed");
    MXU_LOG(MXU_LOG_ERROR, "kept");
    out = capture_end();
    CHECK(strstr(out, "suppressed") == NULL && count_substr(out, "kept\n") == 1, "%s", out);
    free(out);

    /* errno is preserved across a log call */
    mxu_log_threshold = MXU_LOG_DEBUG;
    capture_begin();
    errno = ERANGE;
    MXU_LOG(MXU_LOG_DEBUG, "errno test");
    int e = errno;
    out = capture_end();
    free(out);
    CHECK_EQ_LL(e, ERANGE);
}

static void test_long_message(void)
{
    mxu_log_threshold = MXU_LOG_DEBUG;
    size_t n = 5000;
    char *big = malloc(n + 1);
    CHECK(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 26);
    big[n] = '\0';
    capture_begin();
    MXU_LOG(MXU_LOG_INFO, "big:%s:end", big);
    char *out = capture_end();
    CHECK(strstr(out, big) != NULL, "long message truncated");
    CHECK(count_substr(out, ":end\n") == 1 && count_substr(out, "\n") == 1);
    free(out);
    free(big);
}

#define NTHREADS 8
#define NMSG 400

static void *log_thread(void *arg)
{
    int t = (int)(long)arg;
    char pad[201];
    memset(pad, 'x', 200);
    pad[200] = '\0';
    for (int i = 0; i < NMSG; i++)
        MXU_LOG(MXU_LOG_INFO, "thread %d msg %d %s", t, i, pad);
    return NULL;
}

static void test_threads(void)
{
    mxu_log_threshold = MXU_LOG_INFO;
    mxu_log_set_rank(0);
    capture_begin();
    pthread_t th[NTHREADS];
    for (long t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, log_thread, (void *)t) == 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    char *out = capture_end();

    static char seen[NTHREADS][NMSG];
    int lines = 0;
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "[mpix-acc %s:%ld r0] INFO test_log.c:", host, (long)getpid());
    for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        CHECK(strncmp(l, prefix, strlen(prefix)) == 0, "interleaved line: %.120s", l);
        const char *msg = strstr(l, ": thread ");
        CHECK(msg != NULL, "malformed line: %.120s", l);
        int t, i, len = 0;
        CHECK(sscanf(msg, ": thread %d msg %d %n", &t, &i, &len) == 2, "%.120s", l);
        CHECK(t >= 0 && t < NTHREADS && i >= 0 && i < NMSG);
        CHECK(strlen(msg + len) == 200 && strspn(msg + len, "x") == 200, "torn line: %.120s", l);
        CHECK(!seen[t][i], "duplicate line");
        seen[t][i] = 1;
        lines++;
    }
    CHECK_EQ_LL(lines, NTHREADS * NMSG);
    free(out);
}

int main(int argc, char **argv)
{
    short_host();
    if (argc > 1 && strcmp(argv[1], "--child-threshold") == 0) {
        /* Started with MPIX_ACC_LOG=debug: the threshold comes from the
         * environment before any explicit initialisation. */
        if (mxu_log_threshold != MXU_LOG_DEBUG) {
            fprintf(stderr, "threshold %d, expected %d\n", mxu_log_threshold, MXU_LOG_DEBUG);
            return 1;
        }
        return 0;
    }

    test_parse();
    test_format();
    test_long_message();
    test_threads();

    /* threshold from the environment at start-up (re-run ourselves) */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("MPIX_ACC_LOG", "debug", 1);
        const char *self = strchr(argv[0], '/') != NULL ? argv[0] : "/proc/self/exe";
        execl(self, argv[0], "--child-threshold", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);

    TEST_PASS("test_log");
}
