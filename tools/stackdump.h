/*
 * stackdump.h - print the backtrace of every thread of this process to
 * stderr, for diagnosing hangs where no debugger can attach (the GPU test
 * machine). Header-only, C and C++ (the GPU tests include it; so does
 * tools/mpixacc_hangdump.c, a preloadable watchdog for any program).
 *
 * sd_dump_all_threads() prints the calling thread's stack, then sends
 * SD_SIGNAL to every other thread in turn (raw getdents64 on
 * /proc/self/task: nothing that allocates) and waits up to 3 s for it to
 * print its own (it then stays in the signal handler: call _exit() after
 * this, the process cannot go on); threads that block SD_SIGNAL are
 * skipped. It arms alarm(60) with the default action as a backstop, should
 * unwinding block. Call sd_install() first (from normal context): it installs
 * the handler and loads the unwinder. Frames in libraries without exported
 * symbols print as lib(+offset): `addr2line -f -e lib offset` resolves them.
 */
#ifndef MPIXACC_STACKDUMP_H
#define MPIXACC_STACKDUMP_H

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SD_SIGNAL (SIGRTMIN + 7)

static volatile long sd_ack; /* tid of the thread that printed last */
static const char *sd_label = "stackdump";

static void sd_write(const char *s)
{
    ssize_t w = write(2, s, strlen(s));
    (void)w;
}

static void sd_dump_own_stack(void)
{
    void *frames[48];
    char head[160], comm[32] = "?";
    char path[64];
    long tid = (long)syscall(SYS_gettid);
    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, comm, sizeof comm - 1);
        comm[n > 0 ? n : 0] = '\0';
        char *nl = strchr(comm, '\n');
        if (nl)
            *nl = '\0';
        close(fd);
    }
    int n = backtrace(frames, 48);
    snprintf(head, sizeof head, "[%s] pid %ld thread %ld (%s) backtrace (%d frames):\n", sd_label,
             (long)getpid(), tid, comm, n);
    sd_write(head);
    backtrace_symbols_fd(frames, n, 2);
}

/* A signalled thread prints its stack and then stays in the handler: the
 * signal may have interrupted a blocking call, and the program must not
 * go on meanwhile (the dumping thread ends the process afterwards). */
static void sd_handler(int sig)
{
    (void)sig;
    sd_dump_own_stack();
    __atomic_store_n(&sd_ack, (long)syscall(SYS_gettid), __ATOMIC_RELEASE);
    for (;;)
        pause();
}

static void sd_install(const char *label)
{
    void *prime[4];
    struct sigaction sa;
    if (label)
        sd_label = label;
    backtrace(prime, 4); /* loads the unwinder now, not in a signal handler */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sd_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SD_SIGNAL, &sa, NULL);
}

/* Whether thread tid blocks SD_SIGNAL (SigBlk in its status): it would
 * never answer. Read with raw calls only. */
static int sd_blocks_signal(long tid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "SigBlk:");
    if (p == NULL)
        return 0;
    unsigned long long mask = strtoull(p + 7, NULL, 16);
    int bit = SD_SIGNAL - 1;
    return bit < 64 && ((mask >> bit) & 1ull);
}

static void sd_dump_all_threads(void)
{
    long self = (long)syscall(SYS_gettid);
    /* backstop: if unwinding blocks (a loader lock held by a stuck thread),
     * the kernel still ends the process */
    signal(SIGALRM, SIG_DFL);
    alarm(60);
    sd_dump_own_stack();
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return;
    char buf[4096];
    long nread;
    while ((nread = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < nread;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            off += reclen;
            long tid = atol(name);
            if (tid <= 0 || tid == self)
                continue;
            if (sd_blocks_signal(tid)) {
                char m[96];
                snprintf(m, sizeof m, "[%s] thread %ld blocks the dump signal: skipped\n", sd_label,
                         tid);
                sd_write(m);
                continue;
            }
            __atomic_store_n(&sd_ack, 0, __ATOMIC_RELEASE);
            if (syscall(SYS_tgkill, (long)getpid(), tid, SD_SIGNAL) != 0)
                continue;
            for (int w = 0; w < 300 && __atomic_load_n(&sd_ack, __ATOMIC_ACQUIRE) != tid; w++) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            if (__atomic_load_n(&sd_ack, __ATOMIC_ACQUIRE) != tid) {
                char m[96];
                snprintf(m, sizeof m, "[%s] thread %ld: no backtrace within 3 s\n", sd_label, tid);
                sd_write(m);
            }
        }
    }
    close(fd);
}

#endif
