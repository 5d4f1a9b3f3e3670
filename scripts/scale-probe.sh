#!/usr/bin/env bash
# scale-probe.sh - per-process memory and set-up time against job size, on
# host streams, across simulated nodes (scripts/simnodes.sh; TCP between
# them, as between real nodes) -- the measured points of doc/scaling.md.
#
#   scripts/scale-probe.sh [BUILDDIR] [PPN] [NODES...]   (default: build 4 "1 2 4 8")
#
# One line per job size from test/bench/scaleprobe (min/median/max over the
# ranks): MPI_Init time, VmRSS after MPI_Init, after exchanges with the 2
# neighbours, after exchanges with every rank (N-1 UCX endpoints each).
# Timings on an oversubscribed machine (2 cores here) are not the
# cluster's; RSS is.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
b=${1:-$root/build}
ppn=${2:-4}
shift 2 2>/dev/null || shift $#
nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || nodes=(1 2 4 8)
. "$root/scripts/mpixacc-env.sh"
for n in "${nodes[@]}"; do
    # MPICH's own finalize over TCP may hang here (test/multinode/multinode.sh)
    MPIR_CVAR_NOLOCAL=1 timeout 240 "$root/scripts/simnodes.sh" run -N "$n" -p "$ppn" -- \
        -n $((n * ppn)) "$b/test/bench/scaleprobe" 2>&1 | grep '^scaleprobe' ||
        echo "scaleprobe $((n * ppn)) ranks: no result"
done
