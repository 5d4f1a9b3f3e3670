#!/usr/bin/env bash
# test/interpose/prof.sh - the preloadable sampling profiler
# (tools/mpixacc_prof.c) and its report (scripts/prof-report.py): a program
# whose main thread spends its time in one function and a second thread in
# another gets PREFIX.<pid>.prof written at exit, with samples of the main
# thread only, and the report names the main thread's function first (self,
# and with --within main); a forked child writes nothing; without
# MPIX_ACC_PROF nothing is written; the variables are registry rows.
#
#   test/interpose/prof.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
lib=$builddir/tools/.libs/mpixacc_prof.so
fail() { echo "[prof] FAIL: $*"; exit 1; }
[ -f "$lib" ] || fail "not built: $lib"
command -v python3 >/dev/null || { echo "[prof] SKIP: no python3"; exit 77; }
command -v addr2line >/dev/null || { echo "[prof] SKIP: no addr2line"; exit 77; }
tmp=$(mktemp -d /tmp/mpixacc-prof.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# main forks a child that exits at once (it must write no profile: its
# samples would be the parent's), then spins in main_work for ~0.6 s of CPU
# time; a second thread spins in other_work meanwhile (its samples must not
# appear: the timer is the main thread's)
cat >"$tmp/busy.c" <<'C'
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static volatile double sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
__attribute__((noinline)) void other_work(double until) { while (now() < until) for (int i = 0; i < 100000; i++) sink = sink * 0.5 + 1.0; }
static void *other(void *a) { other_work(*(double *)a); return 0; }
__attribute__((noinline)) void main_work(double until) { while (now() < until) for (int i = 0; i < 100000; i++) sink = sink * 0.5 + 2.0; }
int main(void) { if (fork() == 0) exit(0); wait(0); double until = now() + 0.6; pthread_t t; pthread_create(&t, 0, other, &until); main_work(until); pthread_join(t, 0); return 0; }
C
${CC:-cc} -g -O1 -o "$tmp/busy" "$tmp/busy.c" -pthread || fail "cannot build the test program"
# a sanitizer build's library needs the ASan runtime first in the list
preload=$lib
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ {print $3; exit}')
[ -n "$asan" ] && preload="$asan $lib"
for clock in wall cpu; do
    rm -f "$tmp"/p.*.prof
    LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 MPIX_ACC_PROF="$tmp/p" MPIX_ACC_PROF_US=1000 \
        MPIX_ACC_PROF_CLOCK=$clock "$tmp/busy" || fail "$clock: the program failed under the profiler"
    f=$(ls "$tmp"/p.*.prof 2>/dev/null | head -1)
    [ -n "$f" ] || fail "$clock: no PREFIX.<pid>.prof written"
    nf=$(ls "$tmp"/p.*.prof | wc -l)
    [ "$nf" = 1 ] || fail "$clock: $nf profiles written, expected 1 (a forked child writes none)"
    n=$(grep -c '^s' "$f")
    # 0.6 s at 1 ms: ~600 wall samples; the CPU clock ticks at the kernel's
    # HZ (100-1000 per second)
    [ "$n" -ge 30 ] || fail "$clock: $n samples, expected at least 30"
    grep -q '^map .*busy' "$f" || fail "$clock: the mappings are missing"
    python3 "$root/scripts/prof-report.py" --top 5 --focus busy "$f" >"$tmp/report" 2>&1 ||
        fail "$clock: the report failed: $(tail -3 "$tmp/report")"
    top=$(awk '/^self$/ { getline; getline; print $3; exit }' "$tmp/report")
    [ "$top" = main_work ] || fail "$clock: the first self function is '$top', expected main_work: $(cat "$tmp/report")"
    grep -q other_work "$tmp/report" && fail "$clock: the other thread was sampled: $(cat "$tmp/report")"
    python3 "$root/scripts/prof-report.py" --within main_work "$f" | grep -q "samples (of $n; within \['main_work'\]" ||
        fail "$clock: --within main_work does not keep the samples"
done
rm -f "$tmp"/p.*.prof
LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 "$tmp/busy" || fail "a program without MPIX_ACC_PROF failed"
ls "$tmp"/p.*.prof >/dev/null 2>&1 && fail "a profile was written without MPIX_ACC_PROF"
# the variables are registry rows: listed by mpixacc_info -c, no unknown-setting warning
info=$builddir/tools/mpixacc_info
if [ -x "$info" ]; then
    MPIX_ACC_PROF=/tmp/x MPIX_ACC_PROF_US=50 MPIX_ACC_PROF_CLOCK=cpu "$info" -c >"$tmp/info" 2>"$tmp/info.err" ||
        fail "mpixacc_info -c failed"
    for v in MPIX_ACC_PROF=/tmp/x MPIX_ACC_PROF_US=50 MPIX_ACC_PROF_CLOCK=cpu; do
        grep -q "^$v " "$tmp/info" || fail "mpixacc_info -c does not list $v"
    done
    grep -q "unknown setting" "$tmp/info.err" && fail "unknown-setting warning: $(cat "$tmp/info.err")"
fi
echo "[prof] PASS: wall and cpu clocks sample the main thread only, the report names its function; a forked child writes none; inactive without the setting; registry rows"
