/*
 * log.c - backend of MXU_LOG.
 *
 * Every message is formatted completely in memory and handed to the kernel
 * with a single write(2) on stderr (or the MPIX_ACC_LOG_FILE), so lines of
 * concurrent threads (and, for lines up to PIPE_BUF bytes, of concurrent
 * processes sharing a pipe or a file opened O_APPEND) never interleave:
 *
 *   [mpix-acc <host>:<pid> r<rank> t<tid> <hh:mm:ss.uuuuuu>] LEVEL file.c:123: message
 *
 * <rank> is "?" until mxu_log_set_rank() is called (before MPI_Init); <tid>
 * is the kernel's thread id (what gdb, top -H and Nsight show); the time is
 * the local wall-clock time with microseconds, so that lines of different
 * ranks of one node can be put in order.
 *
 * The threshold starts at a value that lets every message reach
 * mxu_log_emit(); the first emit (or the library constructor, whichever
 * comes first) reads MPIX_ACC_LOG and MPIX_ACC_LOG_FILE from the
 * environment. mxu_config_load() sets both again from the parsed settings.
 * The file is opened (created, appended to) at the first message after its
 * name is set, so a process that logs nothing creates none; a file that
 * cannot be opened is reported once on stderr, and stderr is used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MXU_LOG_UNSET (MXU_LOG_DEBUG + 1) /* every message reaches emit() */

int mxu_log_threshold = MXU_LOG_UNSET;

static _Atomic int log_rank = -1;
static char log_host[64] = "?";
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* MPIX_ACC_LOG_FILE: the pattern (as set), and the descriptor messages go to.
 * log_fd is -1 until the first message after the pattern was set opens it;
 * a descriptor once opened stays open (a thread may be writing to it), so a
 * pattern changed later leaves the old file's descriptor behind. */
static pthread_mutex_t log_file_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_pattern[4096];   /* "" = stderr */
static _Atomic int log_fd = -1;  /* -1: not opened yet (or stderr) */
static _Atomic int log_fd_ready; /* 1: log_fd is what the pattern says */

static void write_all(int fd, const char *buf, size_t len);

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
    const char *file = getenv("MPIX_ACC_LOG_FILE");
    if (file != NULL && log_pattern[0] == '\0')
        mxu_log_set_file(file);
}

int mxu_log_expand_path(const char *pattern, char *out, size_t len)
{
    if (pattern == NULL || out == NULL || len == 0)
        return -1;
    pthread_once(&log_once, log_init); /* the host name */
    size_t o = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        char piece[80];
        const char *add = piece;
        if (p[0] == '%' && p[1] == 'h') {
            add = log_host;
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof(piece), "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            strcpy(piece, "%");
            p++;
        } else {
            piece[0] = *p; /* anything else, "%x" included, is kept as written */
            piece[1] = '\0';
        }
        size_t n = strlen(add);
        if (o + n >= len)
            return -1;
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

void mxu_log_set_file(const char *pattern)
{
    pthread_mutex_lock(&log_file_lock);
    const char *p = pattern != NULL ? pattern : "";
    if (strcmp(p, log_pattern) != 0 || !atomic_load(&log_fd_ready)) {
        snprintf(log_pattern, sizeof(log_pattern), "%s", p);
        atomic_store(&log_fd_ready, 0); /* the next message opens it */
    }
    pthread_mutex_unlock(&log_file_lock);
}

/* The descriptor of the log: opens MPIX_ACC_LOG_FILE at the first message. */
static int log_output_fd(void)
{
    if (atomic_load_explicit(&log_fd_ready, memory_order_acquire)) {
        int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
        return fd >= 0 ? fd : STDERR_FILENO;
    }
    pthread_mutex_lock(&log_file_lock);
    if (!atomic_load(&log_fd_ready)) {
        int fd = -1;
        if (log_pattern[0] != '\0') {
            char path[sizeof(log_pattern) + 256];
            if (mxu_log_expand_path(log_pattern, path, sizeof(path)) == 0)
                fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0) {
                char msg[sizeof(path) + 200];
                int n = snprintf(msg, sizeof(msg),
                                 "[mpix-acc %s:%ld] WARN log.c: MPIX_ACC_LOG_FILE=%s: cannot "
                                 "open it (%s); logging to stderr\n",
                                 log_host, (long)getpid(), log_pattern, strerror(errno));
                if (n > 0)
                    write_all(STDERR_FILENO, msg, strnlen(msg, sizeof(msg)));
            }
        }
        atomic_store_explicit(&log_fd, fd, memory_order_relaxed);
        atomic_store_explicit(&log_fd_ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&log_file_lock);
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    return fd >= 0 ? fd : STDERR_FILENO;
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

static long log_tid(void)
{
    static _Thread_local long tid;
    if (tid == 0)
        tid = (long)syscall(SYS_gettid);
    return tid;
}

static void log_vemit(mxu_log_level_t level, const char *file, int line, int forced,
                      const char *fmt, va_list ap);

void mxu_log_emit(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, file, line, 0, fmt, ap);
    va_end(ap);
}

void mxu_log_emit_forced(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, file, line, 1, fmt, ap);
    va_end(ap);
}

static void log_vemit(mxu_log_level_t level, const char *file, int line, int forced,
                      const char *fmt, va_list ap)
{
    int saved_errno = errno; /* logging must not disturb errno-based callers */
    pthread_once(&log_once, log_init);
    if ((int)level > mxu_log_threshold && !forced) {
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
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    time_t secs = tv.tv_sec;
    if (localtime_r(&secs, &tm) == NULL)
        memset(&tm, 0, sizeof(tm));
    int prefix =
        snprintf(buf, cap, "[mpix-acc %s:%ld r%s t%ld %02d:%02d:%02d.%06ld] %s %s:%d: ", log_host,
                 (long)getpid(), rank, log_tid(), tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (long)tv.tv_usec, level_name(level), short_file(file ? file : "?"), line);
    if (prefix < 0 || (size_t)prefix >= cap) {
        errno = saved_errno;
        return;
    }

    va_list ap1, ap2;
    va_copy(ap1, ap);
    va_copy(ap2, ap);
    int body = vsnprintf(buf + prefix, cap - (size_t)prefix, fmt, ap1);
    va_end(ap1);
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
    write_all(log_output_fd(), buf, len);
    if (buf != stackbuf)
        free(buf);
    errno = saved_errno;
}
