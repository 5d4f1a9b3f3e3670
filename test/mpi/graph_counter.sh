#!/usr/bin/env bash
# test/mpi/graph_counter.sh - host graphs on the counter protocol that CUDA
# graphs use (MPIX_ACC_GRAPH_PROTOCOL=counter; interpose/graph.c): a fire
# node increments a counter that the progress thread watches and makes the
# launch's operations from; a wait node takes a ticket and waits until the
# progress thread has published that launch's completion.
#
#   test/mpi/graph_counter.sh [BUILDDIR]  (default: $MPIXACC_BUILDDIR, else <repo>/build)
#
# Runs test/mpi/hostgraph (every phase: 10 000 ring launches, different
# graphs per rank, graphs beside plain enqueues, MPI_PROC_NULL lines, the
# captured collectives, errors) with 2 ranks and MPIX_ACC_STATS=1: PASS, and
# on both ranks the counter protocol's statistics line -- it only appears
# where captures used counters -- with at least 10 captures, 20 000
# operations made by the poller and 10 000 launches whose waits it released
# (the ring phase alone: 10 000 launches, 2 messages each). Then one run
# with the default protocol: PASS and no such line (the setting selects).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=$builddir/test/mpi/hostgraph
[ -x "$prog" ] || { echo "graph_counter.sh: $prog not built" >&2; exit 2; }
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
tmo=${RUN_TIMEOUT:-300}
log=$(mktemp /tmp/mpixacc-graphcnt.XXXXXX)
trap 'rm -f "$log"' EXIT
fails=0
fail() {
    echo "graph_counter.sh: FAIL ($1): $2"
    tail -20 "$log" | sed 's/^/    /'
    fails=$((fails + 1))
}

MPIX_ACC_STATS=1 MPIX_ACC_GRAPH_PROTOCOL=counter timeout "$tmo" mpiexec -n 2 "$prog" >"$log" 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc"
grep -q "\[hostgraph\] PASS" "$log" || why="${why:+$why, }no PASS"
nok=$(grep -oE "stats: graphs \(counter protocol\): captures [0-9]+; operations made for launches [0-9]+; launches whose waits completed [0-9]+" "$log" |
    awk '{ c = $6 + 0; m = $11 + 0; d = $NF + 0; if (c >= 10 && m >= 20000 && d >= 10000) ok++ } END { print ok + 0 }')
[ "$nok" -eq 2 ] || why="${why:+$why, }$nok of 2 ranks counted >= 10 captures, 20000 operations, 10000 launches"
if [ -n "$why" ]; then fail counter "$why"; else
    echo "graph_counter.sh: ok (counter): $(grep -m1 -oE 'captures [0-9]+; .*' "$log")"
fi

MPIX_ACC_STATS=1 timeout "$tmo" mpiexec -n 2 "$prog" >"$log" 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc"
grep -q "\[hostgraph\] PASS" "$log" || why="${why:+$why, }no PASS"
! grep -q "stats: graphs (counter protocol)" "$log" || why="${why:+$why, }the default protocol used counters"
if [ -n "$why" ]; then fail default "$why"; else echo "graph_counter.sh: ok (default: entries on the stream's thread)"; fi

[ $fails -eq 0 ] && echo "graph_counter.sh: PASS" || echo "graph_counter.sh: $fails case(s) failed"
[ $fails -eq 0 ]
