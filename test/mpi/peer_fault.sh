#!/usr/bin/env bash
# test/mpi/peer_fault.sh - a peer killed mid-exchange (test/mpi/peer_fault.c
# raises SIGKILL in the last rank), in both modes, with the outcome checked
# here (mpiexec reports the killed rank as a failure).
#
# Cases (each bounded; about 15-25 s in all on 2 cores):
#   errors-2, errors-3  MPIX_ACC_PEER_ERRORS=1, a launcher that does not clean
#                 up: rank 0's sends and receives with the victim, a stream
#                 wait on one, and a pending MPI_ANY_SOURCE receive on
#                 MPI_COMM_WORLD complete with the transport error (checked by
#                 the program), MPI_Finalize reports the failed rank and
#                 returns within a bound; with 3 ranks the other survivor,
#                 which never talked to the victim, returns after
#                 MPIX_ACC_FINALIZE_PEER_TIMEOUT.
#   default-hold  default mode, a launcher that does not clean up: the
#                 survivor's MPI_Finalize reports the stuck operations after
#                 MPIX_ACC_FINALIZE_TIMEOUT, gives up waiting for the dead
#                 rank after MPIX_ACC_FINALIZE_PEER_TIMEOUT and returns.
#   default-hydra default mode with hydra's clean-up: mpiexec returns non-zero
#                 within 30 s.
# "A launcher that does not clean up" is emulated: every rank runs under
# this script's --rank wrapper, which keeps every rank's slot open until the
# survivors are done, so hydra sees no process end early.
#
#   test/mpi/peer_fault.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
#   PEER_FAULT_CASES="errors-2 default-hold" runs only those cases.
#   PEER_FAULT_PROG=<program> runs another survivor/victim program (the GPU
#   one, test/gpu/sx_fault, case errors-2: scripts/gpu-test.sh), with
#   PEER_FAULT_MPIEXEC="<mpiexec and its options>" (default: mpiexec from
#   the environment scripts/mpixacc-env.sh sets up, which is then skipped).
set -u
if [ "${1:-}" = --rank ]; then
    # per-rank wrapper: --rank DIR PROG...
    dir=$2; shift 2
    r=${PMI_RANK:-${PMIX_RANK:-x}}
    "$@" >"$dir/out.$r" 2>&1
    rc=$?
    echo "$rc $(date +%s.%N)" >"$dir/rc.$r.tmp" && mv "$dir/rc.$r.tmp" "$dir/rc.$r"
    # stay until every survivor is done: hydra ends the job when one of its
    # processes exits before MPI's finalize (killed, or a survivor whose
    # MPI_Finalize gave up)
    for _ in $(seq 1 600); do [ -e "$dir/done" ] && break; sleep 0.1; done
    exit $rc
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
self=$root/test/mpi/peer_fault.sh
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=${PEER_FAULT_PROG:-$builddir/test/mpi/peer_fault}
scale=${MPIXACC_TEST_TIMEOUT_SCALE:-1}
fail() { echo "[peer_fault.sh] FAIL: $*"; exit 1; }
[ -x "$prog" ] || fail "not built: $prog"
if [ -n "${PEER_FAULT_MPIEXEC:-}" ]; then
    read -r -a mpiexec <<<"$PEER_FAULT_MPIEXEC"
else
    mpiexec=(mpiexec)
    [ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
fi
tmp=$(mktemp -d /tmp/mpixacc-peer-fault.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ "${MPIXACC_TEST_MODE:-}" = sanitize ]; then
    # A survivor whose MPI_Finalize gave up skips MPICH's finalize on
    # purpose (it would wait forever), so MPICH's UCX endpoints and shared
    # memory segments are never freed. UCX-internal frames only (they never
    # call back into mpix-acc): the library's own leaks are still reported.
    # (one suppressions= is used: the run's own list is included)
    { cat "$root/test/lsan.supp"
      printf '%s\n' leak:ucp_wireup_iface_ep_create leak:uct_mem_alloc \
          leak:uct_mm_ep_attach_remote_seg; } >"$tmp/lsan.supp"
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$tmp/lsan.supp"
fi
bound() { awk -v a="$1" -v s="$scale" 'BEGIN { print a * s }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# held CASE NP ENV...: run under the non-cleaning wrapper; sets $d, $t0
held() {
    local name=$1 np=$2; shift 2
    d=$tmp/$name; mkdir -p "$d"
    t0=$(date +%s.%N)
    env "$@" timeout "$(bound 90)" "${mpiexec[@]}" -n "$np" "$self" --rank "$d" "$prog" >"$d/mpiexec.out" 2>&1 &
    local mpid=$! deadline
    deadline=$(awk -v t="$t0" -v b="$(bound 60)" 'BEGIN { printf "%.3f", t + b }')
    # the survivors (ranks 0..np-2) end on their own; then release the victim
    while :; do
        local all=1
        for r in $(seq 0 $((np - 2))); do [ -e "$d/rc.$r" ] || all=0; done
        [ $all = 1 ] && break
        lt "$(date +%s.%N)" "$deadline" || break
        sleep 0.2
    done
    touch "$d/done"
    wait $mpid
    for r in $(seq 0 $((np - 1))); do
        [ -e "$d/out.$r" ] && sed "s/^/[$name r$r] /" "$d/out.$r"
    done
    for r in $(seq 0 $((np - 2))); do
        [ -e "$d/rc.$r" ] || fail "$name: survivor rank $r did not end within $(bound 60) s (hang)"
    done
    [ "$(cut -d' ' -f1 "$d/rc.$((np - 1))")" = 137 ] || fail "$name: the victim was not killed"
}
# took NAME R MAX: survivor R ended within MAX s of the start
took() {
    local t1 dt
    t1=$(cut -d' ' -f2 "$d/rc.$2")
    dt=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
    lt "$dt" "$(bound "$3")" || fail "$1: survivor rank $2 took $dt s, more than $(bound "$3") s"
    echo "[peer_fault.sh] $1: survivor rank $2 ended after $dt s"
}
need() { grep -q -- "$3" "$d/out.$2" || fail "$1: rank $2 did not print '$3'"; }

cases=" ${PEER_FAULT_CASES:-errors-2 errors-3 default-hold default-hydra} "
want() { [[ $cases == *" $1 "* ]]; }

# --- MPIX_ACC_PEER_ERRORS=1 ---
for np in 2 3; do
    c=errors-$np
    want $c || continue
    held $c $np MPIX_ACC_PEER_ERRORS=1 PEER_FAULT_EXPECT=errors MPIX_ACC_FINALIZE_TIMEOUT=2 \
        MPIX_ACC_FINALIZE_PEER_TIMEOUT=4
    [ "$(cut -d' ' -f1 "$d/rc.0")" = 0 ] || fail "$c: rank 0 failed: $(tail -3 "$d/out.0")"
    need $c 0 "PASS survivor"
    need $c 0 "rank $((np - 1)) (in MPI_COMM_WORLD) failed"
    need $c 0 "MPI_Finalize: 1 rank(s) failed ($((np - 1)), ranks in MPI_COMM_WORLD)"
    need $c 0 "MPI_Finalize returned"
    took $c 0 20
    if [ $np = 3 ]; then
        # rank 1 never talked to the victim: the bounded barrier ends it
        need $c 1 "MPIX_ACC_FINALIZE_PEER_TIMEOUT=4s"
        need $c 1 "MPI_Finalize returned"
        took $c 1 25
    fi
done

# --- default mode, a launcher that does not clean up ---
c=default-hold
want $c && {
held $c 2 PEER_FAULT_EXPECT=finalize MPIX_ACC_FINALIZE_TIMEOUT=2 MPIX_ACC_FINALIZE_PEER_TIMEOUT=3
need $c 0 "pending at finalize: receive of 64 bytes from rank 1"
need $c 0 "not every rank reached MPI_Finalize within MPIX_ACC_FINALIZE_PEER_TIMEOUT=3s"
need $c 0 "MPI_Finalize returned"
took $c 0 20
}

# --- default mode, hydra cleans up: the job ends promptly ---
c=default-hydra
want $c && {
t0=$(date +%s.%N)
PEER_FAULT_EXPECT=finalize timeout 120 "${mpiexec[@]}" -n 2 "$prog" >"$tmp/hydra.out" 2>&1
rc=$?
dt=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
sed "s/^/[$c] /" "$tmp/hydra.out"
[ $rc -ne 0 ] || fail "$c: mpiexec returned 0 although a rank was killed"
lt "$dt" "$(bound 30)" || fail "$c: mpiexec returned after $dt s (more than $(bound 30) s)"
echo "[peer_fault.sh] $c: mpiexec returned $rc after $dt s"
}

echo "[peer_fault.sh] PASS: peer killed mid-exchange ($(echo $cases))"
