#!/usr/bin/env bash
# test/mpi/ucx_overrides.sh - the UCX settings the library changes in its own
# UCX context (src/transport/ucx.c, mxt_ucx_overrides), and only there.
#
# Checks:
#   - mpixacc_info reports "library context sets RNDV_PIPELINE_SHM_ENABLE=n"
#     (UCX's rndv/rkey_ptr/mtype protocol deadlocks under stream waits; the
#     GPU side is test/gpu/ucx_protocols.sh);
#   - a user's UCX_RNDV_PIPELINE_SHM_ENABLE is kept and reported as the user's;
#   - in a 2-rank ring every rank's UCX context accepted the setting (the
#     debug log line, no "cannot set UCX" warning) and the ring passes.
#
#   test/mpi/ucx_overrides.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
info=$builddir/tools/mpixacc_info
ring=$builddir/test/mpi/ring
fail() { echo "[ucx_overrides] FAIL: $*"; exit 1; }
[ -x "$info" ] && [ -x "$ring" ] || fail "not built: $info, $ring"
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
unset UCX_RNDV_PIPELINE_SHM_ENABLE

line=$("$info" | grep 'library context sets') || fail "mpixacc_info has no 'library context sets' entry"
echo "$line" | grep -q 'RNDV_PIPELINE_SHM_ENABLE=n\b' ||
    fail "mpixacc_info: expected RNDV_PIPELINE_SHM_ENABLE=n, got: $line"
echo "$line" | grep -q '(failed)' && fail "UCX refused a setting: $line"
user=$(UCX_RNDV_PIPELINE_SHM_ENABLE=y "$info" | grep 'library context sets')
echo "$user" | grep -q "RNDV_PIPELINE_SHM_ENABLE=y (user's)" ||
    fail "a user's UCX_RNDV_PIPELINE_SHM_ENABLE=y was not kept: $user"

out=$(MPIX_ACC_LOG=debug timeout 120 mpiexec -n 2 "$ring" 2>&1) || fail "ring failed: $(echo "$out" | tail -3)"
echo "$out" | grep -q 'PASS' || fail "ring did not pass"
n=$(echo "$out" | grep -c "library's UCX context: RNDV_PIPELINE_SHM_ENABLE=n")
[ "$n" -eq 2 ] || fail "expected the setting in both ranks' UCX contexts, found $n"
echo "$out" | grep -q 'cannot set UCX' && fail "$(echo "$out" | grep 'cannot set UCX' | head -2)"
echo "[ucx_overrides] PASS: $line; the user's value is kept; both ranks' contexts set it"
