/*
 * mpixacc_prof.c - a preloadable sampling profiler of the main thread:
 *
 *   LD_PRELOAD=mpixacc_prof.so MPIX_ACC_PROF=PREFIX program ...
 *
 * samples the stack of the program's main thread (the thread that loads
 * it: the application thread of an MPI program) every MPIX_ACC_PROF_US
 * microseconds (default 200) of wall-clock time, or with
 * MPIX_ACC_PROF_CLOCK=cpu of that thread's CPU time (the kernel's tick
 * bounds that period from below), and writes, at exit, PREFIX.<pid>.prof: the
 * samples' return addresses and the process's mappings. scripts/prof-report.py
 * turns them into a table of functions (self and inclusive share of the
 * samples), with the binaries' debug information (addr2line).
 *
 * For the GPU machine, where no profiler is installed: which calls of the
 * library's host path on the application thread cost what, driver calls
 * included (counted in the library function that calls the driver).
 * Under mpiexec, preload it in the ranks only: mpiexec -n 2 env
 * LD_PRELOAD=... program. Without MPIX_ACC_PROF it does nothing.
 *
 * The variables are rows of the settings registry (src/util/settings.h),
 * so that `mpixacc_info -c` lists them; like tools/mpixacc_hangdump.c this
 * module does not link the library and reads them itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROF_DEPTH 32
#define PROF_MAX_SAMPLES 200000

typedef struct {
    int n;
    void *at; /* the interrupted instruction (the signal's context), or NULL */
    void *pc[PROF_DEPTH];
} prof_sample_t;

static prof_sample_t *prof_samples;
static atomic_int prof_count;
static atomic_int prof_lost;
static timer_t prof_timer;
static int prof_on;
static char prof_prefix[512];

static void *prof_context_pc(void *uc)
{
#if defined(__x86_64__)
    return (void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return NULL;
#endif
}

static void prof_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si;
    int i = atomic_fetch_add_explicit(&prof_count, 1, memory_order_relaxed);
    if (i >= PROF_MAX_SAMPLES) {
        atomic_fetch_add_explicit(&prof_lost, 1, memory_order_relaxed);
        return;
    }
    prof_samples[i].at = uc ? prof_context_pc(uc) : NULL;
    prof_samples[i].n = backtrace(prof_samples[i].pc, PROF_DEPTH);
}

static void prof_write(void)
{
    if (!prof_on)
        return;
    prof_on = 0;
    timer_delete(prof_timer);
    char path[600];
    snprintf(path, sizeof path, "%s.%ld.prof", prof_prefix, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    int n = atomic_load(&prof_count);
    if (n > PROF_MAX_SAMPLES)
        n = PROF_MAX_SAMPLES;
    fprintf(f, "# mpixacc_prof samples %d lost %d\n", n, atomic_load(&prof_lost));
    FILE *m = fopen("/proc/self/maps", "r");
    char line[1024];
    while (m && fgets(line, sizeof line, m))
        fprintf(f, "map %s", line);
    if (m)
        fclose(m);
    for (int i = 0; i < n; i++) {
        const prof_sample_t *p = &prof_samples[i];
        /* the stack from the interrupted instruction on: the frames above
         * it are the handler's, a sanitizer's wrapper of it and the signal
         * trampoline (two or more); without the context's address, two */
        int from = p->n > 2 ? 2 : p->n;
        for (int k = 0; k < p->n && p->at; k++)
            if (p->pc[k] == p->at) {
                from = k;
                break;
            }
        fputs("s", f);
        for (int k = from; k < p->n; k++)
            fprintf(f, " %lx", (unsigned long)(size_t)p->pc[k]);
        fputc('\n', f);
    }
    fclose(f);
}

/* a forked child has no timer (POSIX timers are not inherited) and its
 * copy of the samples is the parent's: it writes nothing */
static void prof_forked(void) { prof_on = 0; }

__attribute__((constructor)) static void prof_start(void)
{
    const char *p = getenv("MPIX_ACC_PROF");
    if (!p || !*p)
        return;
    const char *us = getenv("MPIX_ACC_PROF_US");
    long period_us = us && atol(us) > 0 ? atol(us) : 200;
    const char *clk = getenv("MPIX_ACC_PROF_CLOCK");
    clockid_t clock = clk && !strcmp(clk, "cpu") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    snprintf(prof_prefix, sizeof prof_prefix, "%s", p);
    prof_samples = calloc(PROF_MAX_SAMPLES, sizeof(*prof_samples));
    if (!prof_samples)
        return;
    void *warm[4];
    (void)backtrace(warm, 4); /* loads the unwinder outside the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prof_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0)
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(clock, &sev, &prof_timer) != 0)
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_interval.tv_sec = period_us / 1000000;
    its.it_interval.tv_nsec = (period_us % 1000000) * 1000;
    its.it_value = its.it_interval;
    if (timer_settime(prof_timer, 0, &its, NULL) != 0) {
        timer_delete(prof_timer);
        return;
    }
    prof_on = 1;
    pthread_atfork(NULL, NULL, prof_forked);
}

/* at exit (or unload): the samples and the mappings, once */
__attribute__((destructor)) static void prof_stop(void) { prof_write(); }
