#!/usr/bin/env bash
# ci-sysucx.sh - CI step: build mpix-acc against Debian's own UCX (1.13,
# libucx-dev: configure --with-ucx=/usr) in build-sysucx/ and run the CPU
# suite's core tests with that UCX and no library-path swap
# (MPIXACC_UCX_DIR=system: mpixacc-env.sh leaves LD_LIBRARY_PATH alone), the
# configuration of a site whose UCX is older than the one the project ships.
# Also checks that the processes really loaded the system libucp, that
# nothing points at .deps-local, and that this UCX has its verbs (ib) and
# rdmacm transports (a cluster's UCX; issue 22). Last line `N passed, N failed`.
#
#   scripts/ci-sysucx.sh [run-tests.sh name patterns]   (default: the list below)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
b=$root/build-sysucx
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=('unit/*' 'mpi/ring:*' 'mpi/pingpong:*' 'mpi/matching:*'
    'mpi/call_order:*' 'mpi/host_requests:*' 'mpi/stream_comm:*' 'mpi/errors:*'
    'mpi/outside_init:*' 'mpi/disable:2*' 'test/interpose/link_order.sh:-')
export MPIXACC_UCX_DIR=system
unset LD_LIBRARY_PATH UCX_MODULE_DIR
out=$(mktemp /tmp/mpixacc-sysucx.XXXXXX)
trap 'rm -f "$out"' EXIT
MPIXACC_CONFIGURE_FLAGS="--with-ucx=/usr ${MPIXACC_CONFIGURE_FLAGS:-}" \
    "$root/scripts/run-tests.sh" --builddir "$b" "${patterns[@]}" 2>&1 | tee "$out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
p=${line%% passed*}
f=${line#*, }
f=${f%% failed}
p=${p:-0}
f=${f:-1}
check() { # NAME CONDITION-STATUS WHY
    if [ "$2" -eq 0 ]; then echo "PASS $1"; p=$((p + 1)); else echo "FAIL $1 ($3)"; f=$((f + 1)); fi
}
if [ -x "$b/test/mpi/ring" ]; then
    # the libucp the ranks loaded (the library logs it at INFO)
    log=$(MPIX_ACC_LOG=info timeout 120 mpiexec -n 2 "$b/test/mpi/ring" 2>&1)
    sys=$(/sbin/ldconfig -p | awk '/libucp\.so\.0 / {print $NF; exit}')
    n=$(grep -c "UCX 1\.13\.[0-9]* loaded from " <<<"$log")
    check sysucx:loaded $([ "$n" -eq 2 ]; echo $?) "expected UCX 1.13 loaded on 2 ranks ($sys); got: $(grep 'loaded from' <<<"$log" | head -n 2)"
    grep -q 'UCX .* loaded from' <<<"$log" && sed -n 's/.*\(UCX .* loaded from .*\)/  ranks: \1/p' <<<"$log" | sort -u
    dl=$(readelf -d "$b/src/.libs/libmpixacc.so" "$b/tools/mpixacc_info" 2>&1 | grep -E 'RPATH|RUNPATH' | grep -c 'deps-local')
    check sysucx:no-deps-local $([ "$dl" -eq 0 ]; echo $?) "a RUNPATH names .deps-local"
    grep -q '^#define MPIXACC_UCX_VERSION "1\.13' "$b/config.h"
    check sysucx:configured $? "config.h: $(grep MPIXACC_UCX_VERSION "$b/config.h")"
    # a cluster's UCX: the build runs with verbs and rdmacm transports
    # present (no InfiniBand device here: they load and find none)
    info=$(timeout 60 "$b/tools/mpixacc_info" 2>&1)
    grep -qE 'UCX modules .*InfiniBand yes, rdmacm yes' <<<"$info"
    check sysucx:verbs-rdmacm $? "mpixacc_info: $(grep 'UCX modules' <<<"$info")"
    grep 'UCX modules' <<<"$info" | sed 's/^ */  /'
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
