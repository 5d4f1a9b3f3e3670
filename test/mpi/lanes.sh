#!/usr/bin/env bash
# test/mpi/lanes.sh - which UCX transports carry the library's messages
# within a node (UCX_PROTO_INFO=y, 2 ranks of test/mpi/ring).
#
# Regression test: the library's endpoints were created in UCX's "peer"
# error-handling mode, which leaves out UCX's shared-memory transports, so
# every message between two processes of a node went over TCP loopback
# (seen on 2xH200: 8 B of device memory took ~18 us to send). Checks:
#   - by default, tagged host-memory messages to the other process of the
#     node are carried by shared memory (sysv/posix/cma), never tcp;
#   - with MPIX_ACC_PEER_ERRORS=1 (the opt-in "peer" mode) the same protocol
#     table uses tcp, and the ring still passes.
#
#   test/mpi/lanes.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=$builddir/test/mpi/ring
fail() { echo "[lanes] FAIL: $*"; exit 1; }
[ -x "$prog" ] || fail "not built: $prog"
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
tmp=$(mktemp -d /tmp/mpixacc-lanes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# lanes FILE: the transports of the library's first intra-node table for
# tagged host-memory sends ("Config" column), one per line
lanes() {
    sed 's/^\[[0-9.]*\] \[[^]]*\] *//' "$1" |
        awk '/\| mpix-acc intra-node cfg#/ { getline; if ($0 ~ /tagged message by ucp_tag_send\* from host memory/) grab = 1; next }
             grab && /^\+-/ { if (++bars == 3) exit; next }
             grab && /^\|/ && !/Range/ { n = split($0, f, "|"); gsub(/ /, "", f[n - 1]); print f[n - 1] }'
}

for mode in default peer; do
    env=""
    [ $mode = peer ] && env="MPIX_ACC_PEER_ERRORS=1"
    # one UCX log file per process: the ranks' tables do not interleave
    env $env UCX_PROTO_INFO=y UCX_LOG_FILE="$tmp/$mode.ucx.%p" timeout 120 mpiexec -n 2 "$prog" \
        >"$tmp/$mode.out" 2>&1 || fail "$mode: ring failed: $(tail -3 "$tmp/$mode.out")"
    grep -q "PASS" "$tmp/$mode.out" || fail "$mode: ring did not pass"
    for f in "$tmp/$mode".ucx.*; do [ -f "$f" ] && lanes "$f"; done | sort -u >"$tmp/$mode.lanes"
    [ -s "$tmp/$mode.lanes" ] || fail "$mode: no 'mpix-acc intra-node' protocol table in UCX_PROTO_INFO output"
done
d=$(tr '\n' ' ' <"$tmp/default.lanes")
p=$(tr '\n' ' ' <"$tmp/peer.lanes")
grep -q tcp "$tmp/default.lanes" && fail "default mode sends within the node over TCP: $d"
grep -q -E '^(sysv|posix|cma)/' "$tmp/default.lanes" || fail "default mode uses no shared-memory transport: $d"
grep -q tcp "$tmp/peer.lanes" || fail "MPIX_ACC_PEER_ERRORS=1 was expected to use TCP (UCX's shm has no peer failure reporting): $p"
echo "[lanes] PASS: within a node, default: $d; MPIX_ACC_PEER_ERRORS=1: $p"
