#!/usr/bin/env bash
# test/gpu/ucx_protocols.sh - which UCX rendezvous protocols the library's own
# UCX context picks for managed and device memory (UCX_PROTO_INFO=y), run by
# scripts/gpu-test.sh as diag/ucx-protocols.
#
# Regression test for a deadlock (2xH200, managed -> managed ring at 8 B after
# 1 B): UCX's "rndv/rkey_ptr/mtype" protocol ("copy to attached" in UCX's
# tables) re-registers the peer's mapped staging buffer with
# cuMemHostUnregister on the progress thread, which waits for a GPU whose
# stream waits for that thread. The library turns the protocol off in its
# UCX context (UCX_RNDV_PIPELINE_SHM_ENABLE=n, src/transport/ucx.c). Checks:
#   1. default: the mpix-acc tables for cuda-managed memory exist and never
#      use "copy to attached"; the managed and device rings pass;
#   2. negative control: with UCX_RNDV_PIPELINE_SHM_ENABLE=y (user's choice,
#      kept by the library) and one message size (no re-registration, so no
#      hang) UCX does pick "copy to attached" - the check above can fail.
#
#   test/gpu/ucx_protocols.sh RING_BINARY MPIEXEC [LAUNCHER ARGS...]
set -u
ring=$1
shift
tmp=$(mktemp -d /tmp/mpixacc-protocols.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "[ucx-protocols] FAIL: $*"; exit 1; }

# tables FILE...: UCX_PROTO_INFO tables of the library's context ("mpix-acc ...")
tables() {
    sed 's/^\[[0-9.]*\] \[[^]]*\] *//' "$@" |
        awk '/^\| mpix-acc / { grab = 1; bars = 0 } grab { print } grab && /^\+-/ && ++bars == 3 { grab = 0 }'
}

run() { # NAME ENV... -- ring args
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    mkdir -p "$tmp/$name"
    env MPIX_ACC_MEMOPS=1 MPIX_ACC_LOG=warn UCX_PROTO_INFO=y UCX_LOG_FILE="$tmp/$name/ucx.%p" \
        "${envs[@]}" timeout 100 "$@" >"$tmp/$name/out" 2>&1
}

run default -- "$@" -n 2 "$ring" --combos=mm,dh,dd --max-size=65536 --scale=0.1 --timeout=60 ||
    fail "ring (mm, dh, dd up to 64 KiB) failed: $(tail -5 "$tmp/default/out")"
grep -q PASS "$tmp/default/out" || fail "ring did not pass: $(tail -3 "$tmp/default/out")"
tables "$tmp"/default/ucx.* >"$tmp/default.tables"
echo "--- the library's protocol tables for non-host memory (default):"
awk '/^\| mpix-acc / { if (blk ~ /cuda/) printf "%s", blk; blk = "" } { blk = blk $0 "\n" }
     END { if (blk ~ /cuda/) printf "%s", blk }' "$tmp/default.tables" | head -80
grep -q 'cuda-managed' "$tmp/default.tables" || fail "no mpix-acc protocol table for cuda-managed memory in the UCX_PROTO_INFO output"
grep -q 'copy to attached' "$tmp/default.tables" &&
    fail "the library's UCX context uses rndv/rkey_ptr/mtype ('copy to attached'): $(grep 'copy to attached' "$tmp/default.tables" | head -3)"

run control UCX_RNDV_PIPELINE_SHM_ENABLE=y -- "$@" -n 2 "$ring" --combos=mm --max-size=1 --scale=0.1 --timeout=60 ||
    fail "control run (UCX_RNDV_PIPELINE_SHM_ENABLE=y, mm 1 B) failed: $(tail -5 "$tmp/control/out")"
tables "$tmp"/control/ucx.* >"$tmp/control.tables"
grep -q 'copy to attached' "$tmp/control.tables" ||
    fail "control: with UCX_RNDV_PIPELINE_SHM_ENABLE=y UCX was expected to use 'copy to attached' (the check cannot tell)"
echo "[ucx-protocols] PASS: no rndv/rkey_ptr/mtype in the library's context (the control run with UCX_RNDV_PIPELINE_SHM_ENABLE=y uses it)"
