#!/bin/bash
# link_order.sh - the library is linked after the MPI library: a WARN naming
# the fix ("link -lmpixacc before the MPI library, or preload it") at load
# time and once more (once per process) when an MPIX_Acc_* call finds the
# library inactive; none when it is linked first or preloaded.
#
# Programs (built from test/interpose/link_order.c): $MPIXACC_BUILDDIR/
# test/interpose/link_order_good and link_order_bad. Exit 0 on success,
# 1 on a failed check, 77 when the programs are missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
b=${MPIXACC_BUILDDIR:-$root/build}
good=$b/test/interpose/link_order_good
bad=$b/test/interpose/link_order_bad
for p in "$good" "$bad"; do
    [ -x "$p" ] || { echo "link_order.sh: SKIP: $p not built" >&2; exit 77; }
done
MPIEXEC=${MPIEXEC:-mpiexec}
TMO=${RUN_TIMEOUT:-120}
tmp=$(mktemp -d /tmp/mpixacc-linkorder.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "link_order.sh: FAIL: $*"; fail=1; }
fix='link -lmpixacc before the MPI library, or preload it'

# wrong order: 2 ranks, each warns at load and at the first failing call only
timeout "$TMO" "$MPIEXEC" -n 2 "$bad" >"$tmp/bad.out" 2>"$tmp/bad.err" || no "bad exited $?"
sed 's/^/  bad| /' "$tmp/bad.err" | head -n 20
n_load=$(grep -c "WARN.*MPI_Init resolves to .*libmpich.*$fix" "$tmp/bad.err")
n_call=$(grep -c "WARN.*an MPIX_Acc_\* call (MPIX_Acc_Hoststream_create) found the library inactive.*$fix" "$tmp/bad.err")
[ "$n_load" -eq 2 ] || no "expected 2 load-time warnings (one per rank), got $n_load"
[ "$n_call" -eq 2 ] || no "expected 2 call-time warnings (one per rank, not per call), got $n_call"
[ "$(grep -c 'create rc=ERR' "$tmp/bad.out")" -eq 6 ] || no "bad: expected 6 failed calls"

# right order, and preloaded into the wrongly linked program: no warning
timeout "$TMO" "$MPIEXEC" -n 2 "$good" >"$tmp/good.out" 2>"$tmp/good.err" || no "good exited $?"
grep -q "$fix" "$tmp/good.err" && no "good: unexpected warning: $(grep "$fix" "$tmp/good.err" | head -n 1)"
[ "$(grep -c 'create rc=OK' "$tmp/good.out")" -eq 6 ] || no "good: expected 6 successful calls"
lib=${MPIXACC_LIB:-$b/src/.libs/libmpixacc.so}
# a sanitizer build of the library can only be preloaded after its runtime
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
[ -n "$asan" ] && lib="$asan:$lib"
timeout "$TMO" "$MPIEXEC" -n 2 env LD_PRELOAD="$lib" "$bad" >"$tmp/pre.out" 2>"$tmp/pre.err" ||
    no "preloaded exited $?"
grep -q "$fix" "$tmp/pre.err" && no "preloaded: unexpected warning"
[ "$(grep -c 'create rc=OK' "$tmp/pre.out")" -eq 6 ] || no "preloaded: expected 6 successful calls"
# MPIX_ACC_DISABLE=1: the user switched the library off, no link advice
MPIX_ACC_DISABLE=1 timeout "$TMO" "$MPIEXEC" -n 2 "$bad" >/dev/null 2>"$tmp/dis.err"
grep -q "$fix" "$tmp/dis.err" && no "MPIX_ACC_DISABLE=1: unexpected warning"

[ $fail -eq 0 ] && echo "link_order.sh: PASS (load-time and call-time warnings, none when linked first/preloaded)"
exit $fail
