/*
 * test_log.c - MXU_LOG (util/log.c): format (host, pid, rank, thread id,
 * wall-clock time), threshold, forced messages, one write per message under
 * concurrency, threshold and MPIX_ACC_LOG_FILE from the environment, the
 * log file with %h/%p/%% substitution and its fallback to stderr.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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

/* Checks the per-line fields " t<tid> <hh:mm:ss.uuuuuu>" at the end of each
 * line's prefix and returns a malloc'd copy of `out` without them
 * ("[mpix-acc host:pid rN] LEVEL ..."); each line's tid goes to tids[] (up to
 * max lines) and the number of lines to *nlines. */
static char *strip_tid_time(const char *out, long *tids, int max, int *nlines)
{
    regex_t re;
    CHECK(regcomp(&re, " t([0-9]+) ([0-9]{2}):([0-9]{2}):([0-9]{2})\\.[0-9]{6}\\] ",
                  REG_EXTENDED) == 0);
    char *res = malloc(strlen(out) + 1), *r = res;
    CHECK(res != NULL);
    int lines = 0;
    for (const char *p = out; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        CHECK(nl != NULL, "line without newline: %s", p);
        char line[8192];
        size_t n = (size_t)(nl - p);
        CHECK(n < sizeof(line));
        memcpy(line, p, n);
        line[n] = '\0';
        regmatch_t m[5];
        CHECK(regexec(&re, line, 5, m, 0) == 0, "no thread id and time in: %s", line);
        CHECK(strchr(line, ']') == line + m[0].rm_eo - 2, "fields not at the end of the prefix: %s",
              line);
        long tid = strtol(line + m[1].rm_so, NULL, 10);
        int hh = atoi(line + m[2].rm_so), mm = atoi(line + m[3].rm_so),
            ss = atoi(line + m[4].rm_so);
        CHECK(hh < 24 && mm < 60 && ss < 61, "time %02d:%02d:%02d", hh, mm, ss);
        time_t now = time(NULL); /* within a minute of now (local time) */
        struct tm tm;
        localtime_r(&now, &tm);
        long d = ((long)tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec) -
                 ((long)hh * 3600 + mm * 60 + ss);
        CHECK(d >= -1 && (d <= 60 || d >= 86400 - 60), "log time %02d:%02d:%02d is %ld s off", hh,
              mm, ss, d);
        if (lines < max)
            tids[lines] = tid;
        lines++;
        memcpy(r, line, (size_t)m[0].rm_so);
        r += m[0].rm_so;
        r += sprintf(r, "] %s\n", line + m[0].rm_eo);
        p = nl + 1;
    }
    *r = '\0';
    regfree(&re);
    if (nlines)
        *nlines = lines;
    return res;
}

static long my_tid(void) { return (long)syscall(SYS_gettid); }

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
    char *raw = capture_end();
    long tids[3];
    int nl = 0;
    char *out = strip_tid_time(raw, tids, 3, &nl);
    free(raw);
    CHECK_EQ_LL(nl, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_LL(tids[i], my_tid());

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

/* MXU_LOG_FORCED: printed above the threshold, labelled with its level. */
static void test_forced(void)
{
    mxu_log_threshold = MXU_LOG_ERROR;
    mxu_log_set_rank(1);
    capture_begin();
    MXU_LOG(MXU_LOG_INFO, "quiet");
    MXU_LOG_FORCED(MXU_LOG_INFO, "stats: %d", 7);
    char *raw = capture_end();
    char *out = strip_tid_time(raw, NULL, 0, NULL);
    char expect[256];
    snprintf(expect, sizeof(expect), "[mpix-acc %s:%ld r1] INFO test_log.c:", host, (long)getpid());
    CHECK(strncmp(out, expect, strlen(expect)) == 0 && strstr(out, ": stats: 7\n") != NULL &&
              strstr(out, "quiet") == NULL,
          "got: %s", out);
    free(raw);
    free(out);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

static void test_expand(void)
{
    char out[256], expect[256];
    CHECK_EQ_LL(mxu_log_expand_path("/tmp/a-%h-%p.log", out, sizeof(out)), 0);
    snprintf(expect, sizeof(expect), "/tmp/a-%s-%ld.log", host, (long)getpid());
    CHECK_STR(out, expect);
    CHECK_EQ_LL(mxu_log_expand_path("100%%-%x-%", out, sizeof(out)), 0);
    CHECK_STR(out, "100%-%x-%"); /* unknown conversions and a trailing % are kept */
    CHECK_EQ_LL(mxu_log_expand_path("plain", out, sizeof(out)), 0);
    CHECK_STR(out, "plain");
    CHECK_EQ_LL(mxu_log_expand_path("%p%p%p", out, 4), -1); /* does not fit */
    CHECK_EQ_LL(mxu_log_expand_path("abc", out, 4), 0);
    CHECK_EQ_LL(mxu_log_expand_path("abcd", out, 4), -1);
}

/* MPIX_ACC_LOG_FILE: messages go to the expanded file (appended), nothing to
 * stderr; a file that cannot be opened is reported once and stderr is used. */
static void test_file(void)
{
    mxu_log_threshold = MXU_LOG_INFO;
    mxu_log_set_rank(2);
    char pattern[256], path[512];
    snprintf(pattern, sizeof(pattern), "/tmp/mx-unit-log-%%h-%%p-%ld-%%%%.log", (long)time(NULL));
    CHECK_EQ_LL(mxu_log_expand_path(pattern, path, sizeof(path)), 0);
    CHECK(strstr(path, host) != NULL && strstr(path, "-%.log") != NULL, "%s", path);
    unlink(path);
    capture_begin();
    mxu_log_set_file(pattern);
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "%s created before the first message", path);
    MXU_LOG(MXU_LOG_WARN, "to the file %d", 1);
    MXU_LOG(MXU_LOG_INFO, "to the file %d", 2);
    mxu_log_set_file(pattern); /* the same name again: still appended */
    MXU_LOG(MXU_LOG_INFO, "to the file %d", 3);
    char *err = capture_end();
    CHECK(err[0] == '\0', "stderr got: %s", err);
    free(err);
    char *raw = slurp(path);
    CHECK(raw != NULL, "no log file %s", path);
    int nl = 0;
    char *out = strip_tid_time(raw, NULL, 0, &nl);
    CHECK_EQ_LL(nl, 3);
    CHECK(count_substr(out, "] WARN test_log.c:") == 1 &&
              count_substr(out, ": to the file ") == 3 && strstr(out, "r2]") != NULL,
          "%s", out);
    free(raw);
    free(out);
    unlink(path);

    /* not writable: one warning naming the setting, messages on stderr */
    capture_begin();
    mxu_log_set_file("/nonexistent-dir/x-%p.log");
    MXU_LOG(MXU_LOG_INFO, "fallback one");
    MXU_LOG(MXU_LOG_INFO, "fallback two");
    err = capture_end();
    CHECK(count_substr(err, "MPIX_ACC_LOG_FILE=/nonexistent-dir/x-%p.log: cannot open") == 1 &&
              count_substr(err, "fallback") == 2,
          "%s", err);
    free(err);

    /* back to stderr */
    mxu_log_set_file("");
    capture_begin();
    MXU_LOG(MXU_LOG_INFO, "stderr again");
    err = capture_end();
    CHECK(count_substr(err, "stderr again") == 1, "%s", err);
    free(err);
}

#define NTHREADS 8
#define NMSG 400

static long thread_tid[NTHREADS];

static void *log_thread(void *arg)
{
    int t = (int)(long)arg;
    thread_tid[t] = my_tid();
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
    char *raw = capture_end();
    static long tids[NTHREADS * NMSG];
    int nl = 0;
    char *out = strip_tid_time(raw, tids, NTHREADS * NMSG, &nl);
    free(raw);
    CHECK_EQ_LL(nl, NTHREADS * NMSG);

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
        CHECK(tids[lines] == thread_tid[t], "line of thread %d shows thread id %ld, not %ld", t,
              tids[lines], thread_tid[t]);
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
        /* and MPIX_ACC_LOG_FILE: this message goes to the file */
        MXU_LOG(MXU_LOG_DEBUG, "child message");
        return 0;
    }

    test_parse();
    test_format();
    test_long_message();
    test_forced();
    test_expand();
    test_file();
    test_threads();

    /* threshold from the environment at start-up (re-run ourselves) */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("MPIX_ACC_LOG", "debug", 1);
        setenv("MPIX_ACC_LOG_FILE", "/tmp/mx-unit-log-child-%p.log", 1);
        const char *self = strchr(argv[0], '/') != NULL ? argv[0] : "/proc/self/exe";
        execl(self, argv[0], "--child-threshold", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    char child_log[128];
    snprintf(child_log, sizeof(child_log), "/tmp/mx-unit-log-child-%ld.log", (long)pid);
    char *child = slurp(child_log);
    CHECK(child != NULL && count_substr(child, "] DEBUG test_log.c:") == 1 &&
              count_substr(child, ": child message\n") == 1,
          "MPIX_ACC_LOG_FILE from the environment: %s", child ? child : "(no file)");
    free(child);
    unlink(child_log);

    TEST_PASS("test_log");
}
