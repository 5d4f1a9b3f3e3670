/*
 * mpixacc_hangdump.c - a preloadable watchdog: a program run with
 *
 *   LD_PRELOAD=libmpixacc_hangdump.so MPIX_ACC_HANGDUMP_AFTER=S program ...
 *
 * that is still running after S seconds prints the backtrace of every one
 * of its threads to stderr (tools/stackdump.h) and exits with status 124.
 * For hangs on machines where no debugger attaches (scripts/gpu-test.sh and
 * hpgmg/gpu-check.sh use it on the GPU machine). Under mpiexec, preload it
 * in the ranks only: mpiexec -n 2 env LD_PRELOAD=... program.
 * A thread that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL) prints its own
 * stack before the signal's default action (where no handler is installed
 * yet: a sanitizer's runtime keeps its own).
 * Without MPIX_ACC_HANGDUMP_AFTER (or with 0) it does nothing.
 *
 * The variable is a row of the settings registry (src/util/settings.h), so
 * that `mpixacc_info -c` lists it and the library does not warn about an
 * unknown MPIX_ACC_* variable. This module is preloaded into any program and
 * does not link the library (the registry would bring UCX, hwloc and its own
 * warnings into every process it watches), so it reads the variable itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

#include "stackdump.h"

static void *hangdump_main(void *arg)
{
    double after = *(double *)arg;
    struct timespec ts = {(time_t)after, (long)((after - (double)(time_t)after) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    char msg[128];
    snprintf(msg, sizeof msg, "[hangdump] pid %ld still running after %g s: every thread's stack\n",
             (long)getpid(), after);
    sd_write(msg);
    sd_dump_all_threads();
    _exit(124);
    return NULL;
}

/* A fatal signal (a crash): the crashing thread's stack, then the signal's
 * default action (the handler is reset). */
static void hangdump_fatal(int sig)
{
    char msg[96];
    snprintf(msg, sizeof msg, "[hangdump] pid %ld: fatal signal %d, the thread's stack:\n",
             (long)getpid(), sig);
    sd_write(msg);
    sd_dump_own_stack();
    raise(sig);
}

__attribute__((constructor)) static void hangdump_start(void)
{
    static double after;
    const char *v = getenv("MPIX_ACC_HANGDUMP_AFTER");
    after = v ? atof(v) : 0.0;
    if (!(after > 0))
        return;
    sd_install("hangdump");
    struct sigaction fa;
    memset(&fa, 0, sizeof fa);
    fa.sa_handler = hangdump_fatal;
    sigemptyset(&fa.sa_mask);
    fa.sa_flags = (int)SA_RESETHAND;
    const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction old;
        /* only where nobody handles it yet (a sanitizer's runtime does) */
        if (sigaction(fatal[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(fatal[i], &fa, NULL);
    }
    pthread_attr_t at;
    pthread_t t;
    sigset_t all, old;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    sigfillset(&all); /* the watchdog takes no signals, SD_SIGNAL included */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_create(&t, &at, hangdump_main, &after);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
}
