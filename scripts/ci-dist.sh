#!/usr/bin/env bash
# ci-dist.sh [BUILDDIR] - CI step: the release tarball and an installed
# prefix, in a configured build (default build/, made by scripts/test.sh):
#   1. make dist; scripts/check-dist.sh: every tracked file is in the tarball
#   2. make distcheck: the tarball configures (--with-ucx: the same UCX),
#      builds, passes a subset of the tests (MPIXACC_CHECK_ARGS below),
#      installs, passes `make installcheck` = test/install/consume.sh on the
#      installed prefix (pkg-config, CMake, preload, 2 ranks each, clean
#      environment), uninstalls cleanly and distcleans.
# The PASS/FAIL lines of the tests inside distcheck count in the totals;
# last line `N passed, N failed`.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
b=${1:-$root/build}
# shellcheck disable=SC1091
. "$root/scripts/mpixacc-env.sh" # MPIXACC_UCX_DIR: the tarball has no .deps-local
checks="unit/* mpi/ring:2 mpi/pingpong:3 mpi/errors:2 test/interpose/link_order.sh:- test/interpose/ucx_version.sh:-"
p=0
f=0
res() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then echo "PASS $1"; p=$((p + 1)); else echo "FAIL $1 (${3:-exit $2})"; f=$((f + 1)); fi
}
log=$b/test-logs/ci-dist.log
mkdir -p "$b/test-logs"
t0=$(date +%s)
rm -f "$b"/mpix-acc-*.tar.gz
make -C "$b" dist >"$log" 2>&1
rc=$?
res dist:make $rc "make dist failed: $(tail -n 3 "$log" | tr '\n' ' ')"
tarball=$(ls -t "$b"/mpix-acc-*.tar.gz 2>/dev/null | head -n 1)
if [ -n "$tarball" ]; then
    "$root/scripts/check-dist.sh" "$tarball"
    res dist:contents $?
fi
echo "ci-dist.sh: make dist in $(($(date +%s) - t0)) s; make distcheck (tests: $checks)"
t0=$(date +%s)
make -C "$b" distcheck MPIXACC_CHECK_ARGS="$checks" >"$log" 2>&1
rc=$?
grep -E '^(PASS|FAIL) ' "$log"
# the inner summaries (run-tests.sh subset, consume.sh) count in the totals
while read -r ip _ if_ _; do
    p=$((p + ip))
    f=$((f + if_))
done < <(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tr -d ',')
res distcheck $rc "make distcheck failed: see $log; $(grep -E 'Error|ERROR:' "$log" | head -n 3 | tr '\n' ' ')"
echo "ci-dist.sh: make distcheck in $(($(date +%s) - t0)) s (log $log)"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
