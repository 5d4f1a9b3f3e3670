#!/bin/bash
# ucx_version.sh - one libucp.so.0 serves a process: when an older one than
# the library was built with gets loaded first (here: the system libucp
# preloaded, as when the MPI library comes first and finds the system UCX),
# the library must say so clearly (which UCX, from where, the fix) and stay
# out of the way: MPI calls pass through, MPIX_Acc_* calls return an error,
# the program ends normally. Also: with the right UCX, the version actually
# loaded is logged at INFO.
# Passes trivially (prints why) when no older system libucp exists.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
b=${MPIXACC_BUILDDIR:-$root/build}
prog=$b/test/interpose/link_order_good
[ -x "$prog" ] || { echo "ucx_version.sh: FAIL: $prog not built"; exit 1; }
MPIEXEC=${MPIEXEC:-mpiexec}
TMO=${RUN_TIMEOUT:-120}
fail=0
no() { echo "ucx_version.sh: FAIL: $*"; fail=1; }

built=$(sed -n 's/^#define MPIXACC_UCX_VERSION "\(.*\)"/\1/p' "$b/config.h")
log=$(MPIX_ACC_LOG=info timeout "$TMO" "$MPIEXEC" -n 2 "$prog" 2>&1)
n=$(grep -c "INFO .*UCX [0-9.]* loaded from /.*libucp.so.0 (built against UCX $built)" <<<"$log")
[ "$n" -eq 2 ] || no "expected 'UCX x.y.z loaded from ...' at INFO on 2 ranks; got $n: $(grep -i 'ucx' <<<"$log" | head -n 3)"

sys=$(/sbin/ldconfig -p 2>/dev/null | awk '/libucp\.so\.0 / {print $NF; exit}')
sysver=
[ -n "$sys" ] && sysver=$(PKG_CONFIG_PATH= pkg-config --modversion ucx 2>/dev/null)
older=0
if [ -n "$sys" ] && [ -n "$sysver" ] && [ -n "$built" ]; then
    [ "$(printf '%s\n%s\n' "${sysver%.*}" "${built%.*}" | sort -V | head -n 1)" != "${built%.*}" ] && older=1
fi
# a sanitizer runtime must come first in the process: no preload there
[ "${MPIXACC_TEST_MODE:-plain}" = sanitize ] && older=0
if [ $older = 1 ]; then
    # the whole system UCX: its libucs/libuct and modules, not the ones of
    # the environment script
    log=$(timeout "$TMO" "$MPIEXEC" -n 2 env -u LD_LIBRARY_PATH -u UCX_MODULE_DIR LD_PRELOAD="$sys" "$prog" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || no "with the older system libucp preloaded the program exited $rc"
    n=$(grep -c "ERROR .*loaded UCX $sysver.*older than the UCX ${built%.*} the library was built with.*link -lmpixacc before the MPI library" <<<"$log")
    [ "$n" -eq 2 ] || no "expected the 'older UCX' error on 2 ranks, got $n: $(head -n 5 <<<"$log")"
    [ "$(grep -c 'create rc=ERR' <<<"$log")" -eq 6 ] || no "MPIX_Acc_* calls should fail cleanly"
    [ $fail = 0 ] && echo "ucx_version.sh: system UCX $sysver preloaded under a UCX $built build: reported, library off"
else
    echo "ucx_version.sh: no system libucp older than UCX $built here; only the INFO line checked"
fi
[ $fail = 0 ] && echo "ucx_version.sh: PASS"
exit $fail
