#!/usr/bin/env bash
# test/mpi/wait_report.sh - "no silent hang": every blocking path of the
# library reports what it waits for after MPIX_ACC_WAIT_REPORT seconds.
#
#   test/mpi/wait_report.sh [BUILDDIR]   (default: $MPIXACC_BUILDDIR, else <repo>/build)
#
# Runs test/mpi/wait_report with 2 ranks and MPIX_ACC_WAIT_REPORT=1 (rank 1
# holds each message back 2.5 s) and checks that rank 0 reported, in order:
# the host wait (MPI_Wait and MPI_Waitall: "still waiting after ... on the
# host for N stream-ordered operation(s)"), the host-stream synchronize
# ("synchronize is still waiting after"), the library's agreement in
# MPI_Comm_set_info and the barrier of MPI_Finalize ("still waiting ... in
# the collective ..."). A control
# run with MPIX_ACC_WAIT_REPORT=0 must print none of them.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=$builddir/test/mpi/wait_report
[ -x "$prog" ] || { echo "wait_report.sh: $prog not built" >&2; exit 2; }
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
log=$(mktemp /tmp/mpixacc-waitrep.XXXXXX)
trap 'rm -f "$log"' EXIT
fail=0
check() { # pattern what
    if ! grep -qE "$1" "$log"; then
        echo "[wait_report] FAIL: no report for $2 (pattern: $1)"
        fail=1
    fi
}
MPIX_ACC_WAIT_REPORT=1 timeout 120 "${MPIEXEC:-mpiexec}" -n 2 "$prog" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "[wait_report] FAIL: exit status $rc"; fail=1; }
grep -q 'PASS' "$log" || { echo "[wait_report] FAIL: no PASS"; fail=1; }
# each phase's report must come after its phase marker
awk '/phase 1:/{p=1} /phase 2:/{p=2} /phase 3:/{p=3} /phase 4:/{p=4} /phase 5:/{p=5}
     /still waiting after [0-9]+ s on the host for 1 stream-ordered operation;/ && p==1 {print "R1"}
     /still waiting after [0-9]+ s on the host for 2 stream-ordered operations;/ && p==2 {print "R2"}
     /synchronize is still waiting after/ && p==3 {print "R3"}
     /still waiting .* in the collective MPI_Comm_set_info/ && p==4 {print "R4"}
     /still waiting .* in the collective MPI_Barrier of MPI_Finalize/ && p==5 {print "R5"}' "$log" | sort -u >"$log.r"
for r in R1 R2 R3 R4 R5; do
    grep -qx $r "$log.r" || { echo "[wait_report] FAIL: no report in phase ${r#R}"; fail=1; }
done
rm -f "$log.r"
if [ $fail -ne 0 ]; then sed 's/^/    | /' "$log" | tail -40; fi
# control: reports off
MPIX_ACC_WAIT_REPORT=0 WAIT_REPORT_DELAY_S=1.2 timeout 120 "${MPIEXEC:-mpiexec}" -n 2 "$prog" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "[wait_report] FAIL: control run exit status $rc"; fail=1; }
if grep -q 'still waiting' "$log"; then
    echo "[wait_report] FAIL: MPIX_ACC_WAIT_REPORT=0 still reported: $(grep -m1 'still waiting' "$log")"
    fail=1
fi
if [ $fail -eq 0 ]; then
    echo "[wait_report] PASS: host MPI_Wait, MPI_Waitall, host-stream synchronize, MPI_Comm_set_info and the finalize barrier reported; none with reports off"
    exit 0
fi
exit 1
