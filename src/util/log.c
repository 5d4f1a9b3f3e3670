/*
 * log.c - backend of MXU_LOG.
 *
 * Every message is formatted completely in memory and handed to the kernel
 * with a single write(2) on stderr, so lines of concurrent threads (and, for
 * lines up to PIPE_BUF bytes, of concurrent processes sharing a pipe) never
 * interleave:
 *
 *   [mpix-acc <host>:<pid> r<rank>] LEVEL file.c:123: message
 *
 * <rank> is "?" until mxu_log_set_rank() is called (before MPI_Init).
 *
 * The threshold starts at a value that lets every message reach
 * mxu_log_emit(); the first emit (or the library constructor, whichever
 * comes first) reads MPIX_ACC_LOG from the environment. mxu_config_load()
 * sets it again from the parsed settings.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MXU_LOG_UNSET (MXU_LOG_DEBUG + 1) /* every message reaches emit() */

int mxu_log_threshold = MXU_LOG_UNSET;

static _Atomic int log_rank = -1;
static char log_host[64] = "?";
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

int mxu_log_parse_level(const char *name)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {
        {"error", MXU_LOG_ERROR},  {"err", MXU_LOG_ERROR}, {"warn", MXU_LOG_WARN},
        {"warning", MXU_LOG_WARN}, {"info", MXU_LOG_INFO}, {"debug", MXU_LOG_DEBUG},
        {"0", MXU_LOG_ERROR},      {"1", MXU_LOG_WARN},    {"2", MXU_LOG_INFO},
        {"3", MXU_LOG_DEBUG},
    };
    if (name == NULL)
        return -1;
    while (*name == ' ' || *name == '\t')
        name++;
    size_t len = strlen(name);
    while (len > 0 && (name[len - 1] == ' ' || name[len - 1] == '\t' || name[len - 1] == '\n'))
        len--;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && strncasecmp(names[i].name, name, len) == 0)
            return names[i].level;
    }
    return -1;
}

static void log_init(void)
{
    char host[sizeof(log_host)];
    if (gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        char *dot = strchr(host, '.');
        if (dot != NULL)
            *dot = '\0';
        memcpy(log_host, host, sizeof(host));
    }
    if (mxu_log_threshold == MXU_LOG_UNSET) {
        /* A malformed value is reported by mxu_config_load(); keep "warn". */
        int level = mxu_log_parse_level(getenv("MPIX_ACC_LOG"));
        mxu_log_threshold = level >= 0 ? level : MXU_LOG_WARN;
    }
}

/* Read the environment before main() so that no thread of the library ever
 * sees the threshold change under it. */
__attribute__((constructor)) static void log_constructor(void)
{
    pthread_once(&log_once, log_init);
}

void mxu_log_set_rank(int rank) { atomic_store_explicit(&log_rank, rank, memory_order_relaxed); }

static const char *level_name(mxu_log_level_t level)
{
    switch (level) {
    case MXU_LOG_ERROR:
        return "ERROR";
    case MXU_LOG_WARN:
        return "WARN";
    case MXU_LOG_INFO:
        return "INFO";
    case MXU_LOG_DEBUG:
        return "DEBUG";
    }
    return "LOG";
}

static const char *short_file(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash != NULL ? slash + 1 : file;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* nowhere to report a failing stderr */
        }
        buf += n;
        len -= (size_t)n;
    }
}

void mxu_log_emit(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    int saved_errno = errno; /* logging must not disturb errno-based callers */
    pthread_once(&log_once, log_init);
    if ((int)level > mxu_log_threshold) {
        errno = saved_errno;
        return;
    }

    char rank[16];
    int r = atomic_load_explicit(&log_rank, memory_order_relaxed);
    if (r >= 0)
        snprintf(rank, sizeof(rank), "%d", r);
    else
        strcpy(rank, "?");

    char stackbuf[1024];
    char *buf = stackbuf;
    size_t cap = sizeof(stackbuf);
    int prefix = snprintf(buf, cap, "[mpix-acc %s:%ld r%s] %s %s:%d: ", log_host, (long)getpid(),
                          rank, level_name(level), short_file(file ? file : "?"), line);
    if (prefix < 0 || (size_t)prefix >= cap) {
        errno = saved_errno;
        return;
    }

    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int body = vsnprintf(buf + prefix, cap - (size_t)prefix, fmt, ap);
    va_end(ap);
    if (body < 0) {
        va_end(ap2);
        errno = saved_errno;
        return;
    }
    size_t total = (size_t)prefix + (size_t)body + 2; /* '\n' and NUL */
    if (total > cap) {
        char *big = malloc(total);
        if (big != NULL) {
            memcpy(big, buf, (size_t)prefix);
            vsnprintf(big + prefix, total - (size_t)prefix, fmt, ap2);
            buf = big;
            cap = total;
        } else {
            body = (int)(cap - (size_t)prefix - 2); /* truncate */
        }
    }
    va_end(ap2);

    size_t len = (size_t)prefix + (size_t)body;
    if (len > cap - 2)
        len = cap - 2;
    while (len > (size_t)prefix && buf[len - 1] == '\n')
        len--; /* one newline per message, whatever the format had */
    buf[len++] = '\n';
    write_all(STDERR_FILENO, buf, len);
    if (buf != stackbuf)
        free(buf);
    errno = saved_errno;
}
