#!/bin/bash
# compare.sh - interposition test: an unmodified MPI program must give
# identical results plain, relinked with libmpixacc and with libmpixacc
# preloaded (also with MPIX_ACC_DISABLE=1).
#
# Usage: test/interpose/compare.sh [NP ...]
#   NP list: the arguments, else $COMPARE_NP (e.g. "2" or "2 3 4"), else 2 3 4
#
# Runs, for each NP:
#   plain     mpiexec -n NP $INTERPOSE_PLAIN                 (library absent)
#   relinked  mpiexec -n NP $INTERPOSE_RELINKED              (library present)
#   preload   mpiexec -n NP env LD_PRELOAD=$MPIXACC_LIB $INTERPOSE_PLAIN
#   preload + MPIX_ACC_DISABLE=1, relinked + MPIX_ACC_DISABLE=1
# and compares the "section ..." and "DIGEST ..." lines of every run with the
# plain run. Each run must exit 0 and print "SELFCHECK ok"; the program's
# "mpixacc symbols present: yes|no" line must say "no" for the plain run and
# "yes" for the others (otherwise the comparison would prove nothing).
#
# Environment (defaults are searched relative to the repository root):
#   INTERPOSE_PLAIN     interpose_prog built WITHOUT libmpixacc
#   INTERPOSE_RELINKED  interpose_prog linked with -lmpixacc before the MPI library
#   MPIXACC_LIB         libmpixacc.so for LD_PRELOAD
#   MPIEXEC             launcher (default: mpiexec)
#   RUN_TIMEOUT         seconds per run (default: 120)
# Exit status: 0 when all digests match, 1 on a mismatch or failed run,
# 77 (skip) when a binary is missing.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ -f "$root/scripts/mpixacc-env.sh" ]; then
    # shellcheck disable=SC1091
    . "$root/scripts/mpixacc-env.sh"
else
    ucx=/tmp/whl/x/libucx
    [ -d "$root/.deps-local/ucx/lib" ] && ucx="$root/.deps-local/ucx"
    export LD_LIBRARY_PATH="$ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export UCX_MODULE_DIR="$ucx/lib/ucx"
fi

first() { # first existing file among the arguments
    for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done
    return 1
}
PLAIN=${INTERPOSE_PLAIN:-$(first "$root/build/test/interpose/interpose_plain" \
    "$root/test/interpose/interpose_plain" "$here/interpose_plain")}
RELINKED=${INTERPOSE_RELINKED:-$(first "$root/build/test/interpose/interpose_relinked" \
    "$root/test/interpose/interpose_relinked" "$here/interpose_relinked")}
LIB=${MPIXACC_LIB:-$(first "$root/build/.libs/libmpixacc.so" "$root/build/src/.libs/libmpixacc.so" \
    "$root/src/.libs/libmpixacc.so" "$root/.libs/libmpixacc.so")}
MPIEXEC=${MPIEXEC:-mpiexec}
TMO=${RUN_TIMEOUT:-120}

for v in PLAIN RELINKED LIB; do
    if [ -z "${!v}" ] || [ ! -e "${!v}" ]; then
        echo "compare.sh: SKIP: $v not found (set INTERPOSE_PLAIN / INTERPOSE_RELINKED / MPIXACC_LIB)" >&2
        exit 77
    fi
done
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
# a sanitizer build of the library can only be preloaded after its runtime
PRELOAD=$LIB
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
[ -n "$asan" ] && PRELOAD="$asan:$LIB"

nps=("$@")
# shellcheck disable=SC2206
[ ${#nps[@]} -eq 0 ] && nps=(${COMPARE_NP:-2 3 4})

tmp=$(mktemp -d /tmp/mpixacc-interpose.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0

# run NAME NP EXPECT_PRESENT cmd...
run() {
    local name=$1 np=$2 present=$3
    shift 3
    local out="$tmp/$name.$np.out" err="$tmp/$name.$np.err"
    timeout "$TMO" "$MPIEXEC" -n "$np" "$@" >"$out" 2>"$err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "compare.sh: FAIL: $name (np=$np) exited $rc"
        sed 's/^/    /' "$err" | tail -n 20
        fail=1
        return
    fi
    if ! grep -q '^SELFCHECK ok' "$out"; then
        echo "compare.sh: FAIL: $name (np=$np) self-check failed"
        sed 's/^/    /' "$out" "$err" | tail -n 20
        fail=1
    fi
    if ! grep -q "mpixacc symbols present: $present" "$err"; then
        echo "compare.sh: FAIL: $name (np=$np): expected 'mpixacc symbols present: $present'; got:"
        grep 'mpixacc symbols present' "$err" | sed 's/^/    /'
        fail=1
    fi
    grep -E '^(section|DIGEST) ' "$out" >"$tmp/$name.$np.digest"
}

for np in "${nps[@]}"; do
    run plain "$np" no "$PLAIN"
    run relinked "$np" yes "$RELINKED"
    run preload "$np" yes env LD_PRELOAD="$PRELOAD" "$PLAIN"
    run preload_disabled "$np" yes env LD_PRELOAD="$PRELOAD" MPIX_ACC_DISABLE=1 "$PLAIN"
    run relinked_disabled "$np" yes env MPIX_ACC_DISABLE=1 "$RELINKED"
    ref="$tmp/plain.$np.digest"
    if [ ! -s "$ref" ]; then
        echo "compare.sh: FAIL: no digest from the plain run (np=$np)"
        fail=1
        continue
    fi
    for name in relinked preload preload_disabled relinked_disabled; do
        d="$tmp/$name.$np.digest"
        if [ -f "$d" ] && cmp -s "$ref" "$d"; then
            echo "compare.sh: np=$np $name: digest matches plain ($(awk '/^DIGEST/{print $2}' "$d"))"
        else
            echo "compare.sh: FAIL: np=$np $name: digest differs from plain:"
            diff "$ref" "$d" 2>&1 | sed 's/^/    /'
            fail=1
        fi
    done
done

if [ $fail -eq 0 ]; then
    echo "compare.sh: PASS (np: ${nps[*]})"
fi
exit $fail
