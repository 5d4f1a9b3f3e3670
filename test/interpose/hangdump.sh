#!/usr/bin/env bash
# test/interpose/hangdump.sh - the preloadable watchdog (tools/mpixacc_hangdump.c):
# a program still running after MPIX_ACC_HANGDUMP_AFTER seconds prints the
# backtrace of each of its threads and exits 124; without the setting the
# program runs untouched.
#
#   test/interpose/hangdump.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
lib=$builddir/tools/.libs/mpixacc_hangdump.so
fail() { echo "[hangdump] FAIL: $*"; exit 1; }
[ -f "$lib" ] || fail "not built: $lib"
tmp=$(mktemp -d /tmp/mpixacc-hangdump.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# a program with a main thread and two more, all asleep for 30 s
cat >"$tmp/sleepers.c" <<'C'
#include <pthread.h>
#include <unistd.h>
static void *nap(void *a) { (void)a; sleep(30); return 0; }
int main(void) { pthread_t t[2]; for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, nap, 0); sleep(30); return 0; }
C
${CC:-cc} -o "$tmp/sleepers" "$tmp/sleepers.c" -pthread || fail "cannot build the test program"
# a sanitizer build's library needs the ASan runtime first in the list
preload=$lib
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ {print $3; exit}')
[ -n "$asan" ] && preload="$asan $lib"
start=$(date +%s)
LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 MPIX_ACC_HANGDUMP_AFTER=1 "$tmp/sleepers" 2>"$tmp/err"
rc=$?
secs=$(($(date +%s) - start))
[ $rc = 124 ] || fail "exit $rc, expected 124; stderr: $(tail -3 "$tmp/err")"
[ $secs -lt 15 ] || fail "took ${secs}s, expected ~1"
grep -q "still running after 1 s" "$tmp/err" || fail "no announcement: $(head -3 "$tmp/err")"
n=$(grep -c "backtrace (" "$tmp/err")
[ "$n" = 4 ] || fail "$n thread backtraces, expected 4 (main, 2 sleepers, the watchdog)"
grep -q "no backtrace within" "$tmp/err" && fail "a thread did not answer: $(grep 'no backtrace' "$tmp/err")"
grep -q "sleepers" "$tmp/err" || fail "no frame of the program in the backtraces"
LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 true || fail "a program without MPIX_ACC_HANGDUMP_AFTER failed"
# a crash: the crashing thread's stack, then the signal's default action
# (not with a sanitizer's runtime preloaded: it keeps its own SIGSEGV report)
crash="skipped (sanitizer runtime)"
if [ -z "$asan" ]; then
    cat >"$tmp/crasher.c" <<'C'
#include <signal.h>
void crash_here(void) { raise(SIGSEGV); }
int main(void) { crash_here(); return 0; }
C
    ${CC:-cc} -rdynamic -o "$tmp/crasher" "$tmp/crasher.c" || fail "cannot build the crash program"
    # (the subshell reports the signal, to /dev/null, and writes the status)
    (
        LD_PRELOAD=$preload MPIX_ACC_HANGDUMP_AFTER=30 "$tmp/crasher" 2>"$tmp/crash"
        echo $? >"$tmp/rc"
    ) 2>/dev/null
    rc=$(cat "$tmp/rc")
    [ $rc = 139 ] || fail "crash: exit $rc, expected 139 (SIGSEGV); stderr: $(tail -3 "$tmp/crash")"
    grep -q "fatal signal 11" "$tmp/crash" || fail "crash: no announcement: $(head -3 "$tmp/crash")"
    grep -q "crash_here" "$tmp/crash" || fail "crash: the crashing frame is not in the stack: $(cat "$tmp/crash")"
    crash="a crash prints its stack (exit 139)"
fi
# the variable is a registry row: listed by mpixacc_info -c, no unknown-setting warning
info=$builddir/tools/mpixacc_info
if [ -x "$info" ]; then
    MPIX_ACC_HANGDUMP_AFTER=7 "$info" -c >"$tmp/info" 2>"$tmp/info.err" || fail "mpixacc_info -c failed"
    grep -q "^MPIX_ACC_HANGDUMP_AFTER=7 " "$tmp/info" || fail "mpixacc_info -c does not list MPIX_ACC_HANGDUMP_AFTER"
    grep -q "unknown setting" "$tmp/info.err" && fail "unknown-setting warning: $(cat "$tmp/info.err")"
fi
echo "[hangdump] PASS: 4 thread backtraces after 1 s, exit 124; inactive without the setting; $crash; a registry row"
