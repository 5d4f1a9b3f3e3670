#!/usr/bin/env bash
# test/mpi/trunc_report.sh - what the library reports about truncated
# receives waited on a stream (MPIX_Acc_Wait(3), MPIX_Acc_Waitall(3): "If the
# status was ignored, MPI_Finalize logs how many stream-waited operations
# ended with an error").
#
# Runs test/mpi/trunc_report with MPIX_ACC_LOG=warn, TRUNC_NP ranks (default 2):
#   - "status": every truncated receive's error is delivered in the user's
#     status (the program checks it): no WARN and no ERROR line at all;
#   - "ignore": the same waits with MPI_STATUS(ES)_IGNORE: one WARN "was
#     truncated" per truncated receive and, on every rank, the ERROR
#     "MPI_Finalize: N stream-waited operation(s) ended with an error";
#   - "coll" (2 ranks): an MPIX_Acc_Bcast whose root sends more than rank 1
#     expects: one WARN about the truncated collective message and the ERROR
#     "MPI_Finalize: 1 message(s) of stream-ordered collectives ended with an
#     error" (collective messages have no request or status to carry it).
#
#   test/mpi/trunc_report.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=$builddir/test/mpi/trunc_report
fail() { echo "[trunc_report] FAIL: $*"; exit 1; }
[ -x "$prog" ] || fail "not built: $prog"
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
np=${TRUNC_NP:-2}
run() { MPIX_ACC_LOG=warn timeout "${RUN_TIMEOUT:-120}" mpiexec -n "$np" "$prog" "$1" 2>&1; }
show() { echo "$1" | sed 's/^/    | /' | tail -20; }

out=$(run status) || { show "$out"; fail "the 'status' run failed"; }
echo "$out" | grep -q 'PASS' || { show "$out"; fail "the 'status' run did not pass"; }
if echo "$out" | grep -qwE 'WARN|ERROR'; then
    show "$out"
    fail "errors delivered in the user's statuses were reported again: $(echo "$out" | grep -m1 -wE 'WARN|ERROR')"
fi

out=$(run ignore) || { show "$out"; fail "the 'ignore' run failed"; }
echo "$out" | grep -q 'PASS' || { show "$out"; fail "the 'ignore' run did not pass"; }
per=$(echo "$out" | sed -n 's/.*truncated receives per rank: \([0-9][0-9]*\).*/\1/p' | head -1)
[ -n "$per" ] || { show "$out"; fail "the 'ignore' run did not say how many receives it truncated"; }
w=$(echo "$out" | grep -w WARN | grep -c 'was truncated')
[ "$w" -eq $((per * np)) ] || { show "$out"; fail "ignored statuses: expected $((per * np)) 'was truncated' warnings, got $w"; }
e=$(echo "$out" | grep -w ERROR | grep -c "MPI_Finalize: $per stream-waited operation(s) ended with an error")
[ "$e" -eq "$np" ] || { show "$out"; fail "ignored statuses: expected the finalize report of $per errors on each of $np ranks, got $e"; }

# a stream-ordered collective's truncated message (no request, no status):
# with 2 ranks rank 1 gets it from the root: one WARN, one finalize ERROR
if [ "$np" = 2 ]; then
    out=$(run coll) || { show "$out"; fail "the 'coll' run failed"; }
    echo "$out" | grep -q 'PASS' || { show "$out"; fail "the 'coll' run did not pass"; }
    cw=$(echo "$out" | grep -w WARN | grep -c 'stream-ordered collective: the message from rank 0 was longer')
    ce=$(echo "$out" | grep -w ERROR | grep -c 'MPI_Finalize: 1 message(s) of stream-ordered collectives ended with an error')
    [ "$cw" -eq 1 ] && [ "$ce" -eq 1 ] ||
        { show "$out"; fail "mismatched Bcast: expected 1 truncation warning and 1 finalize report, got $cw and $ce"; }
fi

echo "[trunc_report] PASS: $np ranks; statuses given: nothing reported; statuses ignored: $w warnings, finalize reports $per on every rank; a mismatched stream-ordered Bcast reported"
