#!/usr/bin/env bash
# run-tests.sh - build (if needed) and run every mpix-acc test.
#
# Usage: scripts/run-tests.sh [MODE] [options] [NAME-PATTERN...]
#   MODE (one):
#     (none)       build/       unit tests + multi-rank tests
#     --sanitize   build-asan/  ASan+UBSan build; unit + multi-rank tests
#     --valgrind   build/       multi-rank tests under valgrind (memcheck)
#     --tsan       build-tsan/  TSan build; unit tests + the multi-rank
#                               tests of test/mpi/TESTS.tsan
#   options:
#     --builddir DIR   build directory (default: see MODE, under the repo root)
#     --no-build       do not configure/make (the build must exist)
#     --unit | --mpi   only the unit tests / only the multi-rank tests
#     --timeout S      seconds per test (default 120 unit, 300 multi-rank;
#                      x3 under --sanitize/--tsan, x10 under --valgrind)
#     -v               print the tail of every failing test's log (always on
#                      when CI is set)
#   NAME-PATTERN       run only tests whose name matches (bash glob, e.g. 'mpi/ring*')
#
# Tests:
#   unit  every program of MX_UNIT_TESTS in Makefile.am (test/unit), run alone
#   mpi   every line of test/mpi/TESTS:  <program> <ranks> [VAR=value ...]
#         program: a name in test/mpi (built), or a path relative to the
#         build dir or the source dir (e.g. test/interpose/compare.sh);
#         ranks: N runs `mpiexec -n N program`, '-' runs the program itself
#         (a script that launches mpiexec; not run under --valgrind).
#         '#' starts a comment. Without the table every test/mpi program runs
#         with 2 ranks.
# Every test runs under `timeout`, with scripts/mpixacc-env.sh sourced (one
# libucp per process). Output: one line per test, `PASS name` or
# `FAIL name (rc)`, logs in <builddir>/test-logs/<mode>/, and the last line
# `N passed, N failed`. Exit status 0 only when nothing failed.
#
# Environment: CC (default mpicc), MPIXACC_CONFIGURE_FLAGS (extra configure
# options), MPIXACC_MAKE_JOBS (default 2), MPIEXEC (default mpiexec).
# Exported to tests: MPIXACC_TEST_MODE (plain|sanitize|valgrind|tsan),
# MPIXACC_TEST_TIMEOUT_SCALE (1, 3 or 10), MPIXACC_BUILDDIR, MPIXACC_LIB,
# INTERPOSE_PLAIN, INTERPOSE_RELINKED (for test/interpose/compare.sh), and
# MPIEXEC (under --valgrind a wrapper is not provided: scripts see plain mpiexec).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=plain
builddir=
do_build=1
only=
timeout_s=
verbose=0
[ -n "${CI:-}" ] && verbose=1
patterns=()
while [ $# -gt 0 ]; do
    case $1 in
    --sanitize) mode=sanitize ;;
    --valgrind) mode=valgrind ;;
    --tsan) mode=tsan ;;
    --builddir) builddir=$2; shift ;;
    --builddir=*) builddir=${1#*=} ;;
    --no-build) do_build=0 ;;
    --unit) only=unit ;;
    --mpi) only=mpi ;;
    --timeout) timeout_s=$2; shift ;;
    --timeout=*) timeout_s=${1#*=} ;;
    -v) verbose=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-tests.sh: unknown option $1" >&2; exit 2 ;;
    *) patterns+=("$1") ;;
    esac
    shift
done

cflags_default="-g -O1"
# shellcheck disable=SC2054
case $mode in
plain | valgrind) def_dir=build; cfg_flags=(); cflags_default="-g -O2" ;;
sanitize) def_dir=build-asan; cfg_flags=(--enable-sanitizers=address,undefined --disable-static) ;;
tsan) def_dir=build-tsan; cfg_flags=(--enable-sanitizers=thread --disable-static) ;;
esac
builddir=${builddir:-$root/$def_dir}
mkdir -p "$builddir"
builddir=$(cd "$builddir" && pwd)
logdir="$builddir/test-logs/$mode"
rm -rf "$logdir"
mkdir -p "$logdir"
jobs=${MPIXACC_MAKE_JOBS:-2}
scale=1
case $mode in sanitize | tsan) scale=3 ;; valgrind) scale=10 ;; esac

npass=0
nfail=0
pass() { echo "PASS $1"; npass=$((npass + 1)); }
fail() { # name rc [log]
    echo "FAIL $1 ($2)"
    nfail=$((nfail + 1))
    if [ $verbose = 1 ] && [ -n "${3:-}" ] && [ -s "$3" ]; then
        tail -n 25 "$3" | sed 's/^/    | /'
    fi
}
finish() {
    echo "$npass passed, $nfail failed"
    [ $nfail -eq 0 ]
    exit $?
}

# ------------------------------------------------------------------ build
if [ $do_build = 1 ]; then
    t0=$(date +%s)
    blog="$builddir/test-logs/build-$mode.log"
    : >"$blog"
    if [ ! -x "$root/configure" ] || [ ! -f "$root/Makefile.in" ]; then
        echo "run-tests.sh: autogen.sh" >&2
        (cd "$root" && ./autogen.sh) >>"$blog" 2>&1 || { fail build:autogen $? "$blog"; finish; }
    fi
    if [ ! -f "$builddir/Makefile" ]; then
        echo "run-tests.sh: configure in $builddir: ${cfg_flags[*]} ${MPIXACC_CONFIGURE_FLAGS:-}" >&2
        # shellcheck disable=SC2086
        (cd "$builddir" && CC=${CC:-mpicc} CFLAGS=${CFLAGS:-$cflags_default} \
            "$root/configure" "${cfg_flags[@]}" ${MPIXACC_CONFIGURE_FLAGS:-}) >>"$blog" 2>&1 ||
            { fail build:configure $? "$blog"; finish; }
        sed -n '/^mpix-acc .* configured/,$p' "$blog" >&2
    fi
    echo "run-tests.sh: make -j$jobs tests in $builddir" >&2
    make -C "$builddir" -j"$jobs" tests >>"$blog" 2>&1 || { fail build:make $? "$blog"; finish; }
    nwarn=$(grep -c 'warning:' "$blog")
    echo "run-tests.sh: build ok in $(($(date +%s) - t0)) s ($nwarn compiler warnings; log $blog)" >&2
fi
[ -f "$builddir/Makefile" ] || { echo "run-tests.sh: no build in $builddir" >&2; fail build:missing 1; finish; }

# test lists from the Makefile (one source of truth)
lists=$(make -s -C "$builddir" print-tests 2>/dev/null) || { fail build:print-tests 1; finish; }
read -r -a unit_tests <<<"$(sed -n 's/^UNIT //p' <<<"$lists")"
read -r -a mpi_progs <<<"$(sed -n 's/^MPI //p' <<<"$lists")"
srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$builddir/Makefile")
srcdir=${srcdir:-$root}

# ------------------------------------------------------------------ environment
# shellcheck disable=SC1091
. "$root/scripts/mpixacc-env.sh"
export MPIXACC_TEST_MODE=$mode MPIXACC_TEST_TIMEOUT_SCALE=$scale MPIXACC_BUILDDIR=$builddir
export MPIXACC_LIB="$builddir/src/.libs/libmpixacc.so"
export INTERPOSE_PLAIN="$builddir/test/interpose/interpose_plain"
export INTERPOSE_RELINKED="$builddir/test/interpose/interpose_relinked"
MPIEXEC=${MPIEXEC:-mpiexec}
export MPIEXEC
case $mode in
sanitize)
    # leaks: checked, with MPICH/UCX/hwloc allocations suppressed (test/lsan.supp)
    export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:halt_on_error=1:abort_on_error=0:detect_odr_violation=0:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LSAN_OPTIONS="suppressions=$srcdir/test/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    # Known, not worked around: ASan's process_vm_readv interceptor crashes
    # now and then (SEGV in AddressIsPoisoned) in UCX's CMA reachability
    # probe (uct_cma_iface_is_reachable_v2) -- twice in CI so far, the
    # second in session 27 (mpi/hostgraph:4, on the library's progress
    # thread). Excluding CMA (UCX_TLS=^cma) was tried and made MPICH's own
    # MPI_Finalize hang with 3 ranks under ASan, even with
    # MPIX_ACC_DISABLE=1; excluding it in the library's UCX context only
    # (session 27) moved the node peers' bandwidth lanes to TCP, failed
    # test/multinode's 2x2 cases and left sx_path-2x2 in MPI_Finalize. So
    # the sanitizer runs use UCX's defaults, and a test that dies of exactly
    # that crash (its log names AddressSanitizer's SEGV and
    # uct_cma_iface_is_reachable) runs once more (run_one, "RETRY" line).
    ;;
tsan)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    # UCX's memory hooks (libucm patches madvise/mmap) crash TSan at thread
    # exit: ucm_madvise takes a TSan-intercepted rwlock after TSan's thread
    # state is gone
    export UCX_MEM_MMAP_HOOK_MODE=${UCX_MEM_MMAP_HOOK_MODE:-none}
    ;;
esac
vg=(valgrind --error-exitcode=97 --suppressions="$srcdir/test/valgrind.supp" --gen-suppressions=all
    --track-origins=no --num-callers=30 --child-silent-after-fork=yes --trace-children=no
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite)

selected() { # name
    [ ${#patterns[@]} -eq 0 ] && return 0
    local p
    for p in "${patterns[@]}"; do
        # shellcheck disable=SC2053
        [[ $1 == $p ]] && return 0
    done
    return 1
}
safe() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.=+-' '_'; }

# run NAME TIMEOUT cmd... (environment already set by the caller)
run_one() {
    local name=$1 tmo=$2
    shift 2
    local log
    log="$logdir/$(safe "$name").log"
    echo "+ $*" >"$log"
    local t0 rc f attempt
    t0=${EPOCHREALTIME/[.,]/}
    for attempt in 1 2; do
        timeout -k 15 "$tmo" "$@" >>"$log" 2>&1 </dev/null
        rc=$?
        # the known crash of ASan's process_vm_readv interceptor in UCX's
        # CMA probe (above: not our code, no workaround): run it once more,
        # said in the output, the first run's log kept in the test's log
        if [ $rc -ne 0 ] && [ $attempt = 1 ] && [ $mode = sanitize ] &&
            grep -q 'AddressSanitizer: SEGV' "$log" && grep -q 'uct_cma_iface_is_reachable' "$log"; then
            echo "RETRY $name: ASan crashed in UCX's CMA probe (known, scripts/run-tests.sh); once more"
            echo "# rc=$rc: the known ASan/UCX CMA crash; the test runs once more" >>"$log"
            continue
        fi
        break
    done
    # per-process logs (valgrind --log-file=...%p) go into the test's log
    if [ -n "${extra_logs:-}" ]; then
        for f in "$extra_logs".*; do
            [ -f "$f" ] || continue
            { echo "=== $(basename "$f")"; cat "$f"; } >>"$log"
            rm -f "$f"
        done
    fi
    echo "# rc=$rc, $(((${EPOCHREALTIME/[.,]/} - t0) / 1000)) ms" >>"$log"
    if [ $rc -eq 0 ]; then pass "$name"; else fail "$name" "$rc" "$log"; fi
}

# ------------------------------------------------------------------ consistency
# a test source that no list names would be skipped silently: fail instead
check_listed() {
    local f n
    for f in "$srcdir"/test/unit/test_*.c; do
        [ -e "$f" ] || continue
        n=test/unit/$(basename "$f" .c)
        [[ " ${unit_tests[*]} " == *" $n "* ]] || fail "listed:$n" "not in MX_UNIT_TESTS of Makefile.am"
    done
    for f in "$srcdir"/test/mpi/*.c; do
        [ -e "$f" ] || continue
        n=test/mpi/$(basename "$f" .c)
        [[ " ${mpi_progs[*]} " == *" $n "* ]] || fail "listed:$n" "not in MX_MPI_TESTS of Makefile.am"
    done
}
[ ${#patterns[@]} -eq 0 ] && [ $mode = plain ] && check_listed

# ------------------------------------------------------------------ unit tests
if [ "$only" != mpi ] && [ $mode != valgrind ]; then
    tmo=$((${timeout_s:-120} * scale))
    for t in "${unit_tests[@]}"; do
        name=unit/$(basename "$t")
        selected "$name" || continue
        if [ ! -x "$builddir/$t" ]; then fail "$name" "not built"; continue; fi
        run_one "$name" "$tmo" "$builddir/$t"
    done
fi

# ------------------------------------------------------------------ multi-rank tests
if [ "$only" != unit ]; then
    tmo=$((${timeout_s:-300} * scale))
    table="$srcdir/test/mpi/TESTS"
    # TSan: the races of the progress engine against the host calls only
    [ $mode = tsan ] && table="$srcdir/test/mpi/TESTS.tsan"
    entries=()
    if [ -f "$table" ]; then
        while IFS= read -r line || [ -n "$line" ]; do
            line=${line%%#*}
            [[ $line =~ ^[[:space:]]*$ ]] && continue
            entries+=("$line")
        done <"$table"
    else
        echo "run-tests.sh: no test/mpi/TESTS: every test/mpi program with 2 ranks" >&2
        for p in "${mpi_progs[@]}"; do entries+=("$(basename "$p") 2"); done
    fi
    for e in "${entries[@]}"; do
        read -r -a w <<<"$e"
        prog=${w[0]}
        np=${w[1]:-}
        envs=("${w[@]:2}")
        # scripts given by path keep their directory in the name (two tests.sh)
        if [[ $prog == */* ]]; then name="$prog:$np"; else name="mpi/$prog:$np"; fi
        [ ${#envs[@]} -gt 0 ] && name="${name}[$(IFS=,; echo "${envs[*]}")]"
        selected "$name" || continue
        if [[ ! $np =~ ^([0-9]+|-)$ ]]; then fail "$name" "bad line in test/mpi/TESTS: $e"; continue; fi
        if [[ $prog == */* ]]; then
            if [ -e "$builddir/$prog" ]; then path="$builddir/$prog"; else path="$srcdir/$prog"; fi
        else
            path="$builddir/test/mpi/$prog"
        fi
        if [ ! -x "$path" ]; then fail "$name" "not built: $path"; continue; fi
        bad=0
        for a in "${envs[@]}"; do [[ $a == [A-Za-z_]*=* ]] || bad=1; done
        if [ $bad = 1 ]; then fail "$name" "bad environment assignment in: $e"; continue; fi
        if [ "$np" = - ]; then
            if [ $mode = valgrind ]; then
                echo "# not under valgrind (launches its own processes): $name" >&2
                continue
            fi
            run_one "$name" "$tmo" env "${envs[@]}" RUN_TIMEOUT=$((tmo / 6)) "$path"
        elif [ $mode = valgrind ]; then
            extra_logs="$logdir/$(safe "$name").vg"
            run_one "$name" "$tmo" env "${envs[@]}" "$MPIEXEC" -n "$np" \
                "${vg[@]}" --log-file="$extra_logs.%p" "$path"
            extra_logs=
        else
            run_one "$name" "$tmo" env "${envs[@]}" "$MPIEXEC" -n "$np" "$path"
        fi
    done
fi

finish
