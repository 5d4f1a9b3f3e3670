#!/usr/bin/env bash
# test/mpi/env_check.sh - the README's `bash scripts/mpixacc-env.sh --check`,
# as written: 2 ranks, each maps exactly one libucp (the one the library was
# built against), and the script says OK.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(cd "$root" && timeout 120 bash scripts/mpixacc-env.sh --check 2>&1)
rc=$?
echo "$out" | tail -n 5
if [ $rc -eq 0 ] && echo "$out" | grep -q 'OK: one libucp per process' &&
    [ "$(echo "$out" | grep -c ': 1 libucp mapped')" -eq 2 ]; then
    echo "[env_check] PASS: mpixacc-env.sh --check, one libucp in each of 2 ranks"
    exit 0
fi
echo "[env_check] FAIL: exit status $rc"
exit 1
