#!/usr/bin/env bash
# test/mpi/nvtx.sh - the library's NVTX ranges, seen by a tool: the counting
# tool test/nvtx/nvtx_count.c, loaded by NVTX from NVTX_INJECTION64_PATH
# (as Nsight loads itself) into the 2-rank host-stream pingpong.
#
#   test/mpi/nvtx.sh [BUILDDIR]     (default: $MPIXACC_BUILDDIR, else <repo>/build)
#
# With MPIX_ACC_NVTX=1 (the default) each rank's tool must have been
# initialised by NVTX and must see the domain "mpix-acc" with balanced
# push/pop ranges (the enqueue calls: 240 "enqueue send", 240 "enqueue recv",
# 480 "enqueue stream wait" per rank: pingpong's 8 sizes x 30 round trips,
# each MPIX_Acc_Send/Recv an enqueue and a stream wait) and start/end ranges
# of the progress thread (240 "send", 240 "recv", and a "stream wait" per
# wait point: 240..480, a wait on complete operations makes none).
# With MPIX_ACC_NVTX=0 the tool, also preloaded (LD_PRELOAD) so that it
# reports even when NVTX never loads it, must see no NVTX call at all.
# A build without CUDA has no NVTX: the test says SKIP and passes.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
prog=$builddir/test/mpi/pingpong
tool=$builddir/test/nvtx/.libs/libnvtx_count.so
info=$builddir/tools/mpixacc_info
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
[ -x "$prog" ] || { echo "nvtx.sh: $prog not built" >&2; exit 2; }
if ! "$info" -f 2>/dev/null | grep -q 'NVTX *built: yes'; then
    echo "[nvtx] SKIP: this build has no NVTX (no CUDA toolkit at configure time)"
    exit 0
fi
[ -f "$tool" ] || { echo "nvtx.sh: $tool not built" >&2; exit 2; }

fail() { echo "[nvtx] FAIL: $*"; exit 1; }
dir=$(mktemp -d /tmp/mpixacc-nvtx.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# ---- on (the default)
mkdir "$dir/on"
NVTX_COUNT_DIR=$dir/on timeout 120 mpiexec -n 2 env NVTX_INJECTION64_PATH="$tool" "$prog" \
    >"$dir/on.log" 2>&1 || { tail -20 "$dir/on.log"; fail "pingpong with the tool: exit $?"; }
n=$(ls "$dir/on" | wc -l)
[ "$n" -eq 2 ] || { tail -20 "$dir/on.log"; fail "$n tool reports, 2 expected (one per rank)"; }
for f in "$dir"/on/*; do
    line=$(grep 'domain=mpix-acc ' "$f") || fail "no domain mpix-acc in $(cat "$f")"
    echo "  $line"
    field() { sed -n "s/.* $1=\\([0-9]*\\).*/\\1/p" <<<"$line"; }
    name() { tr ',' '\n' <<<"${line##* names=}" | sed -n "s/^$1:\\([0-9]*\\)\$/\\1/p"; }
    [[ $line == *" injected=1 "* ]] || fail "the tool was not initialised by NVTX: $line"
    [ "$(field push)" -eq 960 ] && [ "$(field pop)" -eq 960 ] || fail "push/pop: $line"
    # a stream wait whose operations are already complete when it is called
    # makes no wait point, so no progress-thread range: 240..480 of them
    # (timing: 479 seen once under ASan), start and end alike
    sw=$(name "stream wait")
    [ -n "$sw" ] && [ "$sw" -ge 240 ] && [ "$sw" -le 480 ] || fail "stream wait ranges: $line"
    [ "$(field start)" -eq $((480 + sw)) ] && [ "$(field end)" -eq $((480 + sw)) ] ||
        fail "start/end: $line"
    [ "$(field unbalanced)" -eq 0 ] || fail "a pop without a push: $line"
    for nv in "enqueue send:240" "enqueue recv:240" "enqueue stream wait:480" \
        "send:240" "recv:240"; do
        [ "$(name "${nv%:*}")" = "${nv##*:}" ] || fail "range '${nv%:*}' expected ${nv##*:} times: $line"
    done
done

# ---- off: not a single NVTX call
mkdir "$dir/off"
# a sanitizer build's tool needs its ASan runtime first in the preload list
preload=$tool
asan=$(ldd "$tool" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
[ -n "$asan" ] && preload="$asan:$tool"
NVTX_COUNT_DIR=$dir/off MPIX_ACC_NVTX=0 timeout 120 mpiexec -n 2 \
    env NVTX_INJECTION64_PATH="$tool" LD_PRELOAD="$preload" "$prog" >"$dir/off.log" 2>&1 ||
    { tail -20 "$dir/off.log"; fail "pingpong with MPIX_ACC_NVTX=0: exit $?"; }
n=$(ls "$dir/off" | wc -l)
[ "$n" -eq 2 ] || { tail -20 "$dir/off.log"; fail "$n tool reports with MPIX_ACC_NVTX=0, 2 expected"; }
for f in "$dir"/off/*; do
    echo "  MPIX_ACC_NVTX=0: $(cat "$f")"
    grep -qx 'nvtx-count pid=[0-9]* injected=0' "$f" || fail "MPIX_ACC_NVTX=0 still used NVTX: $(cat "$f")"
done
echo "[nvtx] PASS: domain mpix-acc, 960 enqueue ranges and balanced transfer/wait ranges per rank; none with MPIX_ACC_NVTX=0"
