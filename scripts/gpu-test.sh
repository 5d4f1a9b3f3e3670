#!/usr/bin/env bash
# gpu-test.sh - on a GPU machine (x86-64 Linux, NVIDIA driver, nvcc, gcc,
# make): build mpix-acc with CUDA and run the GPU test suite, 2 ranks (one
# GPU each when >= 2 GPUs are visible, else sharing one). One command, no
# network, no MPI needed on the machine: it uses the runtime that
# scripts/gpu-runtime.sh assembled into .gpu-runtime/ (carry that folder).
#
#   scripts/gpu-test.sh [options]
#     --quick           smaller iteration counts everywhere (smoke run)
#     --only=REGEX      run only the tests whose name matches (e.g. 'memops/')
#     --shared-gpu      2 ranks on GPU 0 even when more GPUs are visible
#     --no-sanitizer    skip the compute-sanitizer runs
#     --cpu-suite       also run the CPU suite (make check) with this CUDA build
#     --apps            also build the examples and hpgmg with CUDA and run
#                       them on the GPUs: stencil2d (every variant, bitwise
#                       check), ping_kernel_pong, mpixacc_bench (every
#                       variant; floor in a run of its own), hpgmg/gpu-check.sh; their output is in
#                       tests.log, their CSVs and hpgmg's log in results.tar.gz
#                       in the log folder
#     --apps-only       only those (the suite is not run)
#     --cuda-aware      with --apps/--apps-only: when .gpu-mpich/mpich.tar.xz
#                       is carried (scripts/gpu-mpich.sh), also build mpix-acc
#                       and the examples against that CUDA-enabled MPICH (in
#                       build-gpu-ca) and run mpixacc_bench, ping_kernel_pong
#                       and stencil2d with their cuda-aware variants beside
#                       acc, staged and NCCL (apps-ca/*; default when the
#                       tarball is there; --no-cuda-aware skips it)
#     --rebuild         configure and build from scratch
#     --guard=S         the test programs' own time limit (default 280, 100
#                       with --quick): a hung test prints every thread's
#                       backtrace after S seconds and exits
#     --budget=S        stop starting tests S seconds after the start (default
#                       540; tests not run are reported as failures)
#     --no-gpu          check the runtime and the build on a machine without a
#                       GPU: build, mpixacc_info, a host-stream MPI test with
#                       the carried launcher (no GPU tests)
#
# Logs go to $OUT when set (the device tool brings them back), else to
# ./gpu-logs: gpu-test.log (this console), diag.txt, build.log, tests.log
# (every test's full output), summary.txt. The last line printed is
# "N passed, N failed"; the exit status is 0 only when nothing failed.
set -u -o pipefail
ARGS="$*"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RTDIR="$ROOT/.gpu-runtime"
LOGDIR=${OUT:-$ROOT/gpu-logs}
BUILD="$ROOT/build-gpu"
MA=x86_64-linux-gnu

GUARD_OPT="" QUICK=0 ONLY="" SHARED=0 SANITIZER=1 CPUSUITE=0 REBUILD=0 NOGPU=0 BUDGET=540 APPS=0 SUITE=1
CA=auto
for a in "$@"; do
    case "$a" in
    --quick) QUICK=1 ;;
    --only=*) ONLY=${a#--only=} ;;
    --shared-gpu) SHARED=1 ;;
    --no-sanitizer) SANITIZER=0 ;;
    --cpu-suite) CPUSUITE=1 ;;
    --apps) APPS=1 ;;
    --apps-only) APPS=1 SUITE=0 ;;
    --rebuild) REBUILD=1 ;;
    --cuda-aware) CA=1 ;;
    --no-cuda-aware) CA=0 ;;
    --no-gpu) NOGPU=1 ;;
    --budget=*) BUDGET=${a#--budget=} ;;
    --guard=*) GUARD_OPT=${a#--guard=} ;;
    -h | --help)
        sed -n '2,/^set /p' "$0" | grep '^#'
        exit 0
        ;;
    *)
        echo "gpu-test: unknown option $a" >&2
        exit 2
        ;;
    esac
done

mkdir -p "$LOGDIR"
CONSOLE="$LOGDIR/gpu-test.log"
DIAG="$LOGDIR/diag.txt"
BUILDLOG="$LOGDIR/build.log"
TESTLOG="$LOGDIR/tests.log"
SUMMARY="$LOGDIR/summary.txt"
: >"$CONSOLE"
: >"$DIAG"
: >"$BUILDLOG"
: >"$TESTLOG"
TMP=$(mktemp -d /tmp/mpixacc-gpu-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
T_START=$(date +%s)

say() { printf '%s\n' "$*" | tee -a "$CONSOLE"; }
step() { say "=== [$(date -u +%H:%M:%S) +$(($(date +%s) - T_START))s] $*"; }
diag() { printf '%s\n' "$*" >>"$DIAG"; }
# run a diagnostic command: full output to diag.txt, first N lines to the console
dcmd() {
    local n=$1
    shift
    {
        echo "\$ $*"
        "$@" 2>&1
        echo
    } >>"$DIAG"
    "$@" 2>&1 | head -n "$n" | sed 's/^/    /' | tee -a "$CONSOLE"
}

PASSED=0 FAILED=0
RESULTS=()
record() { # name result seconds note
    RESULTS+=("$(printf '%-34s %-5s %7s  %s' "$1" "$2" "$3" "${4:-}")")
    if [ "$2" = PASS ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
}

finish() {
    local elapsed=$(($(date +%s) - T_START))
    # the applications' CSVs and logs travel as one file (the device tool
    # brings back at most 8)
    if [ -d "$TMP/results" ] && [ -n "$(ls -A "$TMP/results" 2>/dev/null)" ]; then
        # the run's provenance (commit, machine, driver) for scripts/bench-plot.py
        {
            echo "command:  scripts/gpu-test.sh $ARGS"
            echo "machine:  $(hostname) - ${GPU_DESC:-no GPU found}"
            echo "driver:   ${DRIVER:-?}; nvcc ${NVCC_VER:-?}; ranks on GPUs: ${RANK_GPUS:-?}"
            echo "commit:   ${MPIXACC_COMMIT:-$(cat "$ROOT/MPIXACC_COMMIT" 2>/dev/null || echo '?')}"
        } >"$TMP/results/suite-summary.txt"
        tar -C "$TMP" -czf "$LOGDIR/results.tar.gz" results && say "results: $LOGDIR/results.tar.gz ($(ls "$TMP/results" | tr '\n' ' '))"
    fi
    {
        echo "mpix-acc GPU suite - $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "command:  scripts/gpu-test.sh $ARGS"
        echo "machine:  $(hostname) - ${GPU_DESC:-no GPU found}"
        echo "driver:   ${DRIVER:-?}; nvcc ${NVCC_VER:-?}; ranks on GPUs: ${RANK_GPUS:-?}"
        # the commit: $MPIXACC_COMMIT, else a file of that name in the tree
        # (a copy of a working tree on a GPU machine may carry a stale .git)
        echo "commit:   ${MPIXACC_COMMIT:-$(cat "$ROOT/MPIXACC_COMMIT" 2>/dev/null || (cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null) || echo '? (set MPIXACC_COMMIT)')}"
        echo "elapsed:  ${elapsed}s"
        echo
        printf '%-34s %-5s %7s  %s\n' test result seconds note
        for r in "${RESULTS[@]}"; do echo "$r"; done
        echo
        echo "$PASSED passed, $FAILED failed"
    } >"$SUMMARY"
    cat "$SUMMARY" | tee -a "$CONSOLE"
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
    exit $?
}

abort() { # a step without which nothing can run
    say "FATAL: $*"
    record "setup" FAIL "-" "$*"
    finish
}

# --------------------------------------------------------------- diagnostics
step "machine"
diag "date: $(date -u)"
dcmd 3 uname -srm
[ -r /etc/os-release ] && say "    $(. /etc/os-release && echo "$PRETTY_NAME")"
if command -v nvidia-smi >/dev/null 2>&1; then
    dcmd 16 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total \
        --format=csv,noheader
    { echo "\$ nvidia-smi"; nvidia-smi 2>&1; echo "\$ nvidia-smi topo -m"; nvidia-smi topo -m 2>&1; } >>"$DIAG"
    DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    GPU_DESC="$NGPU x $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
else
    say "    nvidia-smi not found"
    NGPU=0
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    NGPU=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
    say "    CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES ($NGPU visible)"
fi
[ "$NGPU" -ge 1 ] || [ "$NOGPU" = 1 ] || abort "no NVIDIA GPU visible"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")}
[ -x "$CUDA_HOME/bin/nvcc" ] || CUDA_HOME=/usr/local/cuda
[ -x "$CUDA_HOME/bin/nvcc" ] || abort "nvcc not found (set CUDA_HOME)"
NVCC_VER=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
say "    nvcc $NVCC_VER in $CUDA_HOME; $(gcc --version | head -1); $(make --version | head -1)"
SANITIZER_BIN=$(command -v compute-sanitizer || ls "$CUDA_HOME"/bin/compute-sanitizer 2>/dev/null | head -1 || true)
say "    compute-sanitizer: ${SANITIZER_BIN:-not found}; autoreconf: $(command -v autoreconf || echo no); nproc $(nproc)"
diag "env: CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-} CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-}"

# --------------------------------------------------------------- runtime
step "runtime (.gpu-runtime)"
[ -f "$RTDIR/runtime.tar.xz" ] ||
    abort "$RTDIR/runtime.tar.xz missing: run scripts/gpu-runtime.sh on the build machine and carry .gpu-runtime"
# unpack, PATH / LD_LIBRARY_PATH (wheel UCX first) / UCX_MODULE_DIR, MPIEXEC, LAUNCH
. "$ROOT/scripts/gpu-env.sh" || abort "cannot set up the runtime (scripts/gpu-env.sh)"
RT="$GPU_RT"
head -1 "$RT/MANIFEST" | sed 's/^/    /' | tee -a "$CONSOLE"
cat "$RT/MANIFEST" >>"$DIAG"
R="$RT/root"
U="$RT/ucx"
for f in "$MPIEXEC" "$R/usr/lib/$MA/libmpich.so.12" "$U/lib/libucp.so.0"; do
    missing=$(ldd "$f" 2>&1 | grep 'not found' | grep -v -E 'libcuda|libnvidia-ml' || true)
    [ -z "$missing" ] || abort "$f: unresolved libraries: $missing"
done
dcmd 1 "$U/bin/ucx_info" -v
TLS=$("$U/bin/ucx_info" -d 2>/dev/null | sed -n 's/.*Transport: *//p' | sort -u | tr '\n' ' ')
say "    UCX transports: $TLS"
diag "UCX transports: $TLS"
case " $TLS " in
*" cuda_copy "*) ;;
*) say "    WARNING: UCX has no cuda_copy transport: device buffers will fail" ;;
esac
[ -n "$LAUNCH" ] || abort "mpiexec.hydra cannot start 2 processes here"
say "    mpiexec: $MPIEXEC $LAUNCH"

# --------------------------------------------------------------- build
step "build (configure --with-cuda, make)"
cd "$ROOT" || abort "no $ROOT"
if [ ! -x "$ROOT/configure" ]; then
    AT="$RT/autotools"
    if [ -f "$AT/INPUTS.sha256" ] && (cd "$ROOT" && sha256sum -c --quiet "$AT/INPUTS.sha256") >>"$DIAG" 2>&1; then
        say "    using the configure generated by gpu-runtime.sh"
        (cd "$AT/files" && tar -cf - .) | (cd "$ROOT" && tar -xf -)
        # generated files must look newer than their inputs (no automake run)
        for f in aclocal.m4 configure config.h.in; do [ -e "$f" ] && touch "$f"; done
        find . -name Makefile.in -not -path './build*' -exec touch {} +
    elif command -v autoreconf >/dev/null 2>&1; then
        say "    carried configure missing or stale: running ./autogen.sh"
        # a failed run leaves a broken configure that the next call would use
        ./autogen.sh >>"$BUILDLOG" 2>&1 || { rm -f configure; abort "autogen.sh failed (build.log)"; }
    else
        abort "no configure: configure.ac/Makefile.am changed since gpu-runtime.sh ran and there are no autotools here; re-run scripts/gpu-runtime.sh and carry .gpu-runtime again"
    fi
fi
[ "$REBUILD" = 1 ] && rm -rf "$BUILD"
mkdir -p "$BUILD"
cd "$BUILD" || abort "no $BUILD"
if [ ! -f config.status ]; then
    echo "\$ ../configure ..." >>"$BUILDLOG"
    # CC explicitly: the machine's environment may name another compiler in CC
    ../configure CC="$RT/bin/mpicc" --with-cuda="$CUDA_HOME" --with-ucx="$U" --disable-static \
        CPPFLAGS="-I$R/usr/include" LDFLAGS="-L$R/usr/lib/$MA -Wl,-rpath-link,$R/usr/lib/$MA" \
        >>"$BUILDLOG" 2>&1 || {
        tail -30 "$BUILDLOG" | tee -a "$CONSOLE"
        abort "configure failed (build.log, config.log)"
    }
    cp config.log "$TMP/config.log" 2>/dev/null
fi
if grep -q 'configured$' "$BUILDLOG"; then
    sed -n '/configured$/,/version script/p' "$BUILDLOG" | sed 's/^/    /' | tee -a "$CONSOLE"
else
    say "    reusing the configured build in $BUILD ($(./config.status --config 2>/dev/null | head -c 200))"
fi
grep -q '^#define MPIXACC_HAVE_CUDA 1' config.h 2>/dev/null ||
    abort "configure did not enable CUDA (build.log, $BUILD/config.log)"
JOBS=$(nproc)
[ "$JOBS" -gt 16 ] && JOBS=16
# only what the suite needs: other parts of the tree (examples, hpgmg) cannot
# break or slow down the GPU run (--cpu-suite builds everything)
TARGETS="src/libmpixacc.la tools/mpixacc_info tools/mpixacc_hangdump.la tools/mpixacc_prof.la gpu-tests"
[ "$CPUSUITE" = 1 ] && TARGETS="all tests gpu-tests"
[ "$APPS" = 1 ] && TARGETS="$TARGETS examples/stencil2d/stencil2d examples/ping_kernel_pong/ping_kernel_pong examples/bench/mpixacc_bench hpgmg/hpgmg-fv"
[ "$NOGPU" = 1 ] && TARGETS="$TARGETS test/mpi/ring"
MK=(make)
if ! make -n gpu-tests >/dev/null 2>&1; then
    say "    note: Makefile.am does not include test/gpu/Makefile.inc; appending it to the make call"
    MK=(make -f Makefile -f "$ROOT/test/gpu/Makefile.inc")
fi
if ! "${MK[@]}" -j"$JOBS" $TARGETS >>"$BUILDLOG" 2>&1; then
    grep -E 'error|Error' "$BUILDLOG" | tail -20 | tee -a "$CONSOLE"
    abort "make failed (build.log)"
fi
say "    built: $(find test/gpu -maxdepth 1 -type f -perm -u+x -printf '%f ' 2>/dev/null)"
BIN="$BUILD/test/gpu"
INFO="$BUILD/tools/mpixacc_info"

# --------------------------------------------------------------- tests
if [ "$NOGPU" = 1 ]; then
    RANK_GPUS="none (--no-gpu)"
    NGPU_RUN=0
elif [ "$SHARED" = 1 ] || [ "$NGPU" -lt 2 ]; then
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES%%,*}
    RANK_GPUS="both ranks on GPU $CUDA_VISIBLE_DEVICES"
    NGPU_RUN=1
else
    RANK_GPUS="rank r on GPU r"
    NGPU_RUN=$NGPU
fi
say "    ranks: $RANK_GPUS"
SCALE=1
FB_SCALE=0.3
# one GPU shared by both ranks: fallback wait kernels spin in time slices
[ "$NGPU_RUN" -le 1 ] && FB_SCALE=0.1
SAN_SCALE=0.02
GUARD=280 # the programs' own time guard (prints the phase), below the runner's
if [ "$QUICK" = 1 ]; then
    GUARD=100
    SCALE=0.1
    FB_SCALE=0.05
    SAN_SCALE=0.01
fi
[ -n "$GUARD_OPT" ] && GUARD=$GUARD_OPT

selected() { [ -z "$ONLY" ] || [[ "$1" =~ $ONLY ]]; }

# run_test NAME TIMEOUT EXPECT(regex on the output, or "") -- command...
run_test() {
    local name=$1 tmo=$2 expect=$3
    shift 4
    selected "$name" || return 0
    local out="$TMP/out" t0 t1 rc note=""
    local left=$((BUDGET - ($(date +%s) - T_START)))
    if [ "$left" -lt 30 ]; then
        say "NOT RUN $name: time budget (${BUDGET}s) used up"
        record "$name" FAIL "-" "not run: time budget ${BUDGET}s used up"
        return 0
    fi
    [ "$tmo" -gt $((left - 10)) ] && tmo=$((left - 10))
    # --quick: a hang costs at most 2 minutes
    [ "$QUICK" = 1 ] && [ "$tmo" -gt 120 ] && tmo=120
    t0=$(date +%s.%N)
    # programs run under tools' mpixacc_hangdump.so (the apps) print every
    # thread's stack shortly before this limit
    MPIX_ACC_HANGDUMP_AFTER=$((tmo > 30 ? tmo - 15 : tmo - 5)) timeout -k 10 "$tmo" "$@" >"$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    local ok=1
    if [ $rc -ne 0 ]; then
        ok=0
        note="exit $rc"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && note="TIMEOUT after ${tmo}s"
    elif [ -n "$expect" ] && ! grep -q -E "$expect" "$out"; then
        ok=0
        note="output lacks /$expect/"
    fi
    {
        echo "=================================================================="
        echo "TEST $name: $([ $ok = 1 ] && echo PASS || echo "FAIL ($note)") in ${secs}s"
        echo "\$ $*"
        if [ "$(wc -l <"$out")" -gt 3000 ]; then
            head -n 500 "$out"
            echo "[... $(($(wc -l <"$out") - 3000)) lines cut ...]"
            tail -n 2500 "$out"
        else
            cat "$out"
        fi
    } >>"$TESTLOG"
    # a program that wrote a CSV: its output beside it (<stem>.txt: the
    # device and versions it printed, for scripts/bench-plot.py)
    local a prev=""
    for a in "$@"; do
        [ "$prev" = "--csv" ] && case "$a" in *.csv) cp "$out" "${a%.csv}.txt" 2>/dev/null ;; esac
        prev=$a
    done
    if [ $ok = 1 ]; then
        say "PASS $name (${secs}s)"
        record "$name" PASS "$secs"
    else
        say "FAIL $name (${secs}s): $note; last lines:"
        grep -v -E '^\s*$' "$out" | tail -n 15 | sed 's/^/    | /' | tee -a "$CONSOLE"
        record "$name" FAIL "$secs" "$note"
    fi
}

mpirun2() { "$MPIEXEC" $LAUNCH -n 2 "$@"; }
# (the stats line of messages staged through host memory, issue 22 item 1)
NETSTAGED='staged through host memory .MPIX_ACC_NET_STAGE=all, up to [0-9]+ bytes.: sent [1-9][0-9]* received [1-9]'

if [ "$NOGPU" = 1 ]; then
    step "runtime check without a GPU (--no-gpu)"
    run_test runtime/info 60 'CUDA +built: yes' -- "$INFO"
    run_test runtime/host-stream-ring 120 'PASS' -- "$MPIEXEC" $LAUNCH -n 2 "$BUILD/test/mpi/ring"
    finish
fi

if [ "$SUITE" = 1 ]; then
step "tests"
export MPIX_ACC_LOG=info # the per-context line shows the mode really in use
run_test info/memops 60 'mode: memops' -- env MPIX_ACC_MEMOPS=1 "$INFO"
run_test info/fallback 60 'mode: kernel-fallback' -- env MPIX_ACC_MEMOPS=0 "$INFO"

GPU_TESTS="ring stream_comm dtype_attr two_streams any_source truncate host_wait default_streams deep_queue call_order"
[ "$NGPU_RUN" -ge 2 ] && GPU_TESTS="$GPU_TESTS multi_device"
MODE_MEMOPS='CUDA backend: context .*: stream memory operations'
MODE_FALLBACK='CUDA backend: context .*: kernel fallback'
for t in $GPU_TESTS; do
    run_test "memops/$t" 300 "$MODE_MEMOPS" -- env MPIX_ACC_MEMOPS=1 \
        "$MPIEXEC" $LAUNCH -n 2 "$BIN/$t" --scale=$SCALE --timeout=$GUARD
done
# one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1): a wait point on the
# GPU would block the work it waits for (ring's host->device case failed at
# 9444181); stream waits then wait on the host and the tests must pass
for t in ring two_streams host_wait; do
    run_test "hwq1/$t" 300 'CUDA_DEVICE_MAX_CONNECTIONS=1: stream waits on CUDA streams wait' -- \
        env CUDA_DEVICE_MAX_CONNECTIONS=1 MPIX_ACC_MEMOPS=1 MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 "$BIN/$t" --scale=$SCALE --timeout=$GUARD
done
PP_ARGS=""
[ "$QUICK" = 1 ] && PP_ARGS="--iters=200 --reps=3 --bw-iters=3"
run_test "memops/pingpong" 300 'PASS' -- env MPIX_ACC_MEMOPS=1 MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/pingpong" $PP_ARGS
# which UCX protocols carry small and large device messages (UCX prints its
# selection tables with UCX_PROTO_INFO=y): doc/benchmarks.md section 3
run_test "diag/ucx-proto-info" 120 'PASS' -- env MPIX_ACC_MEMOPS=1 MPIX_ACC_LOG=warn \
    UCX_PROTO_INFO=y "$MPIEXEC" $LAUNCH -n 2 "$BIN/pingpong" --lat-sizes=8,65536 \
    --bw-size=1048576 --iters=20 --reps=1 --bw-iters=1
# no UCX protocol that re-registers memory under a stream wait (the
# managed-memory deadlock, test/gpu/ucx_protocols.sh), with a control run
run_test "diag/ucx-protocols" 240 'ucx-protocols\] PASS' -- \
    "$ROOT/test/gpu/ucx_protocols.sh" "$BIN/ring" "$MPIEXEC" $LAUNCH
if grep -q '^TEST memops/pingpong' "$TESTLOG"; then
    say "--- stream-ordered ping-pong (memops), $RANK_GPUS:"
    sed -n '/^TEST memops\/pingpong/,/^=====/p' "$TESTLOG" |
        grep -E '^\[pingpong\] stream|^size|^[0-9]+ |^host time' | sed 's/^/    /' | tee -a "$CONSOLE"
fi
for t in $GPU_TESTS; do
    run_test "fallback/$t" 300 "$MODE_FALLBACK" -- env MPIX_ACC_MEMOPS=0 \
        "$MPIEXEC" $LAUNCH -n 2 "$BIN/$t" --scale=$FB_SCALE --timeout=$GUARD
done

# the stream-executed path (test/gpu/sx_path): its receive steps poll, so
# where the ranks share a GPU it runs under MPS (started and stopped here);
# the stats line must show messages on the path
sx_mps_start() {
    SXMPS=""
    if [ "$NGPU_RUN" -lt 2 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        export CUDA_MPS_PIPE_DIRECTORY="$TMP/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/mps-log"
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d && SXMPS=1 && say "    MPS started (ranks share a GPU)"
    fi
}
sx_mps_stop() {
    if [ -n "$SXMPS" ]; then
        echo quit | nvidia-cuda-mps-control
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        SXMPS=""
    fi
}
if selected "sx/sx_path"; then
    sx_mps_start
    # (messages in device rings, bulk ones among them)
    run_test "sx/sx_path" 300 'messages sent into them [1-9][0-9]* .bulk [1-9]' -- env MPIX_ACC_SX=on \
        MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn "$MPIEXEC" $LAUNCH -n 2 "$BIN/sx_path" --timeout=$GUARD
    sx_mps_stop
fi
# the GPU made current after MPI_Init (HPGMG's order): the library meets
# the context at the first call; the SX path must carry the messages all
# the same (at 1b6cd0a it was off for the whole run: no context for its
# abort word at start-up)
if selected "sx/sx_path-late-device"; then
    sx_mps_start
    run_test "sx/sx_path-late-device" 300 'messages sent into them [1-9][0-9]* .bulk [1-9]' -- env \
        MPIX_ACC_SX=on MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn "$MPIEXEC" $LAUNCH -n 2 "$BIN/sx_path" \
        --timeout=$GUARD --device-after-init
    sx_mps_stop
fi
# non-blocking receives without a stream point (MPIX_ACC_SX_RECV_POINT=lazy):
# stream waits on their stream step them, others give late points or steps
if selected "sx/sx_path-lazy"; then
    sx_mps_start
    run_test "sx/sx_path-lazy" 300 'messages sent into them [1-9][0-9]* .bulk [1-9]' -- env \
        MPIX_ACC_SX=on MPIX_ACC_SX_RECV_POINT=lazy MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 "$BIN/sx_path" --timeout=$GUARD
    sx_mps_stop
fi
# (sizes up to 1 MiB + 1 on the UCX path below: >= 1 MiB peer allocations
# re-made at one address failed there until the library handed the
# driver's CUDA_ERROR_ALREADY_MAPPED back to UCX, src/accel/cuda_ipc.c)
# one hardware queue: a polling receive step would hold back the work it
# waits for (deadlock seen at 9444181), so the library turns the path off
# and the program must pass on the UCX path (issue 16: "must error or work")
if selected "sx/sx_path-1conn"; then
    sx_mps_start
    run_test "sx/sx_path-1conn" 300 'SX path off: CUDA_DEVICE_MAX_CONNECTIONS=1' -- env \
        CUDA_DEVICE_MAX_CONNECTIONS=1 MPIX_ACC_SX=on MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 "$BIN/sx_path" --timeout=$GUARD
    sx_mps_stop
fi
# one slot: most messages go by UCX and land in host staging, which the
# receive steps copy into device memory (the stall fixed at c606118)
if selected "sx/sx_path-staged"; then
    sx_mps_start
    run_test "sx/sx_path-staged" 300 'received by UCX into staging [1-9]' -- env MPIX_ACC_SX=on \
        MPIX_ACC_SX_SLOTS=1 MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn "$MPIEXEC" $LAUNCH -n 2 \
        "$BIN/sx_path" --timeout=$GUARD
    sx_mps_stop
fi
# a peer killed while receive steps wait on the GPU (issue 16's abort
# path): test/mpi/peer_fault.sh's errors-2 case with the GPU program; the
# survivor's receives (stream-waited: the step polls the device ring; and
# host-waited) end with the transport error, its stream is released and
# MPI_Finalize returns
if selected "sx/sx_fault"; then
    sx_mps_start
    run_test "sx/sx_fault" 200 'PASS survivor' -- env MPIX_ACC_SX=on MPIX_ACC_LOG=warn \
        PEER_FAULT_PROG="$BIN/sx_fault" PEER_FAULT_MPIEXEC="$MPIEXEC $LAUNCH" \
        PEER_FAULT_CASES=errors-2 "$ROOT/test/mpi/peer_fault.sh"
    sx_mps_stop
fi

# kernel-initiated partitioned requests (issue 19, test/gpu/partitioned):
# kernels make partitions ready and see them arrive; the direct protocol
# (LL lines into the peer's slots) where the GPUs reach each other, and the
# host proxy forced with MPIX_ACC_KI=proxy; phase H: an epoch captured into
# a CUDA graph and launched 10000 times (issue 21; on the proxy: refused)
# (the program's own guard first: it names the phase and dumps the stacks)
run_test "ki/partitioned" 150 'protocol: direct' -- env MPIX_ACC_LOG=warn MPIX_ACC_KI_TIMEOUT=20 \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/partitioned" --expect=direct --timeout=100
# (its 4108-byte partitions are bulk by default: here as LL lines too)
run_test "ki/partitioned-ll" 150 'protocol: direct' -- env MPIX_ACC_LOG=warn MPIX_ACC_KI_TIMEOUT=20 \
    MPIX_ACC_KI_LL_BYTES=1m "$MPIEXEC" $LAUNCH -n 2 "$BIN/partitioned" --expect=direct --timeout=100
run_test "ki/partitioned-proxy" 150 'protocol: proxy' -- env MPIX_ACC_LOG=warn MPIX_ACC_KI=proxy \
    MPIX_ACC_KI_TIMEOUT=20 "$MPIEXEC" $LAUNCH -n 2 "$BIN/partitioned" --expect=proxy --timeout=100

# stream-ordered collectives on CUDA streams (issue 20, test/gpu/collectives):
# reduction kernels, device scratch, bits against the documented order
# (messages up to 16 KiB: the one-kernel Allreduce, its set-up logged at info)
run_test "coll/collectives" 200 'one-kernel Allreduce on communicator context [0-9]+ .2 processes.: on' -- \
    env MPIX_ACC_LOG=info "$MPIEXEC" $LAUNCH -n 2 "$BIN/collectives" --timeout=180
run_test "coll/collectives-ll0" 200 'PASS' -- env MPIX_ACC_LOG=warn MPIX_ACC_COLL_LL_BYTES=0 \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/collectives" --timeout=180
run_test "coll/collectives-sx" 200 'PASS' -- env MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/collectives" --sx --timeout=180
run_test "coll/collectives-rsag" 200 'PASS' -- env MPIX_ACC_LOG=warn MPIX_ACC_ALLREDUCE_RSAG=64 \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/collectives" --sx --timeout=180
# three processes on two GPUs: the fold of the non-power-of-two count
run_test "coll/collectives-3" 300 'PASS' -- env MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 3 "$BIN/collectives" --quick --timeout=280

# non-contiguous datatypes on CUDA streams (issue 20, test/gpu/derived):
# the pack kernel on the stream, unpack behind the stream wait or on the host
run_test "dt/derived" 200 'PASS' -- env MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/derived" --timeout=180
run_test "dt/derived-sx" 200 'PASS' -- env MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/derived" --sx --timeout=180
# the SX send steps pack and the receive steps of MPI_Sendrecv unpack
# themselves (phase E; the stats line counts them), and the same test with
# separate pack and unpack kernels (MPIX_ACC_SX_FUSE_PACK=0)
run_test "dt/derived-sx-fused" 200 'steps with a fused pack [1-9][0-9]*, unpack [1-9]' -- \
    env MPIX_ACC_LOG=warn MPIX_ACC_STATS=1 "$MPIEXEC" $LAUNCH -n 2 "$BIN/derived" --sx --timeout=180
run_test "dt/derived-sx-unfused" 200 'PASS' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX_FUSE_PACK=0 \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/derived" --sx --timeout=180

# stream-ordered calls that cannot be captured into a CUDA graph (derived
# datatypes, collectives, a wait on a request made before) are refused and
# invalidate the capture, in every capture mode; the stream and matching
# stay sound
run_test "graph/capture" 150 '\[capture\] PASS' -- env MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/capture" --timeout=$((GUARD < 100 ? GUARD : 100))
# sends, receives and stream waits captured (issue 21, test/gpu/graph_p2p:
# fire and wait nodes of the counter protocol): a ring launched 10000 times
# with every launch checked, different graphs per rank, graphs beside plain
# enqueues and on a second stream, one channel shared (dynamic matching),
# cudaGraphExecUpdate, a stream communicator's calls, errors
run_test "graph/p2p" 300 '\[graph_p2p\] PASS' -- env MPIX_ACC_LOG=warn MPIX_ACC_STATS=1 \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/graph_p2p" --timeout=$GUARD

# device messages staged through pinned host memory (issue 22 item 1,
# MPIX_ACC_NET_STAGE; all: every peer, as auto does for peers on other
# nodes): the pack kernel writes the pinned block, the receive's copies out
# behind its wait or on a library stream; the stats line counts them
for t in ring truncate any_source host_wait; do
    run_test "net/$t" 300 "$NETSTAGED" -- env MPIX_ACC_NET_STAGE=all MPIX_ACC_NET_STAGE_BYTES=64k \
        MPIX_ACC_STATS=1 MPIX_ACC_LOG=warn "$MPIEXEC" $LAUNCH -n 2 "$BIN/$t" --scale=$SCALE \
        --timeout=$GUARD
done

if [ "$SANITIZER" = 1 ]; then
    if [ -z "$SANITIZER_BIN" ]; then
        say "compute-sanitizer not found: sanitizer runs not possible"
        record "sanitizer" FAIL "-" "compute-sanitizer not found (use --no-sanitizer to skip)"
    else
        # memops mode only: the sanitizer serializes kernels, so a spinning
        # fallback wait kernel would block the kernel that releases it
        SAN="$SANITIZER_BIN --error-exitcode 99 --report-api-errors no"
        for tool in memcheck racecheck; do
            # racecheck ends with "RACECHECK SUMMARY: 0 hazards displayed (0 errors, ...)"
            ok='ERROR SUMMARY: 0 errors'
            [ $tool = racecheck ] && ok='RACECHECK SUMMARY: 0 hazards'
            run_test "sanitizer-$tool/ring" 400 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/ring" --combos=dd,hd,mm \
                --max-size=1048576 --scale=$SAN_SCALE --timeout=380
            # the SX steps (send, receive) on device buffers; without MPS
            # (the sanitizer does not run under it), MPIX_ACC_SX=on
            run_test "sanitizer-$tool/sx_path" 300 "$ok" -- env MPIX_ACC_MEMOPS=1 MPIX_ACC_SX=on \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/sx_path" --basic=1 --timeout=280
            run_test "sanitizer-$tool/partitioned" 300 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/partitioned" --epochs=5 \
                --pp=50 --launches=50 --timeout=280
            run_test "sanitizer-$tool/graph_p2p" 300 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/graph_p2p" --launches=50 \
                --timeout=$GUARD
            run_test "sanitizer-$tool/collectives" 400 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/collectives" --quick \
                --timeout=380
            run_test "sanitizer-$tool/derived" 300 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/derived" --timeout=280
            run_test "sanitizer-$tool/derived-sx" 300 "$ok" -- env MPIX_ACC_MEMOPS=1 \
                MPIX_ACC_SX=on "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool "$BIN/derived" --sx \
                --timeout=280
            run_test "sanitizer-$tool/stream_comm" 400 "$ok" -- \
                env MPIX_ACC_MEMOPS=1 "$MPIEXEC" $LAUNCH -n 2 $SAN --tool $tool \
                "$BIN/stream_comm" --max-size=65536 --scale=$SAN_SCALE --timeout=380
        done
    fi
fi

run_test "fallback/pingpong" 300 'PASS' -- env MPIX_ACC_MEMOPS=0 MPIX_ACC_LOG=warn \
    "$MPIEXEC" $LAUNCH -n 2 "$BIN/pingpong" --iters=200 --reps=3 --bw-iters=3

fi

# The CUDA-aware MPI anchor (issue 17): mpix-acc and the examples built a
# second time, against the CUDA-enabled MPICH that scripts/gpu-mpich.sh packed
# (.gpu-mpich/mpich.tar.xz, ch4:ucx on the same UCX as the runtime: one libucp
# per process), then the three programs with every variant in one launch each
# (apps-ca/*). Same GPUs, same session as the apps/* launches above.
cuda_aware_apps() {
    local tarball="$ROOT/.gpu-mpich/mpich.tar.xz"
    if [ "$CA" = 0 ]; then
        return 0
    fi
    if [ ! -f "$tarball" ]; then
        [ "$CA" = 1 ] && record "apps-ca/setup" FAIL "-" \
            ".gpu-mpich/mpich.tar.xz not carried (run scripts/gpu-mpich.sh)"
        return 0
    fi
    local any=0 n
    for n in check mpixacc_bench ping_kernel_pong stencil2d; do
        selected "apps-ca/$n" && any=1
    done
    [ "$any" = 1 ] || return 0
    step "CUDA-aware MPI anchor (.gpu-mpich)"
    local M="$TMP/gpu-mpich" CAB="$ROOT/build-gpu-ca" log="$LOGDIR/build-ca.log"
    mkdir -p "$M"
    : >"$log"
    if ! tar -C "$M" -xJf "$tarball" >>"$log" 2>&1; then
        record "apps-ca/setup" FAIL "-" "cannot unpack $tarball"
        return 0
    fi
    head -3 "$ROOT/.gpu-mpich/MANIFEST" 2>/dev/null | sed 's/^/    /' | tee -a "$CONSOLE"
    cat "$ROOT/.gpu-mpich/MANIFEST" >>"$DIAG" 2>/dev/null
    local MP="$M/mpich"
    # MPICH's libmpi first (binaries have a RUNPATH to it, but the runtime's
    # LD_LIBRARY_PATH would otherwise win), the runtime's UCX before it
    local CALD="$U/lib:$MP/lib:$LD_LIBRARY_PATH"
    local CAEXEC="$MP/bin/mpiexec.hydra"
    [ -x "$CAEXEC" ] || CAEXEC="$MP/bin/mpiexec"
    [ "$REBUILD" = 1 ] && rm -rf "$CAB"
    mkdir -p "$CAB"
    if [ ! -f "$CAB/config.status" ]; then
        (cd "$CAB" && env LD_LIBRARY_PATH="$CALD" ../configure CC="$MP/bin/mpicc" \
            --with-cuda="$CUDA_HOME" --with-ucx="$U" --disable-static \
            CPPFLAGS="-I$R/usr/include" LDFLAGS="-L$R/usr/lib/$MA -Wl,-rpath-link,$R/usr/lib/$MA") \
            >>"$log" 2>&1 || {
            tail -20 "$log" | tee -a "$CONSOLE"
            record "apps-ca/setup" FAIL "-" "configure against the CUDA-enabled MPICH failed (build-ca.log)"
            return 0
        }
    fi
    if ! env LD_LIBRARY_PATH="$CALD" make -C "$CAB" -j"$JOBS" src/libmpixacc.la tools/mpixacc_info \
        examples/stencil2d/stencil2d examples/ping_kernel_pong/ping_kernel_pong \
        examples/bench/mpixacc_bench >>"$log" 2>&1; then
        grep -E 'error|Error' "$log" | tail -10 | tee -a "$CONSOLE"
        record "apps-ca/setup" FAIL "-" "build against the CUDA-enabled MPICH failed (build-ca.log)"
        return 0
    fi
    local CEX="$CAB/examples"
    say "    built in $CAB: $(env LD_LIBRARY_PATH="$CALD" ldd "$CEX/bench/mpixacc_bench" | grep -E 'libmpi|libucp' | awk '{print $1, $3}' | tr '\n' ' ')"
    local CALAUNCH
    CALAUNCH=$(LD_LIBRARY_PATH="$CALD" gpu_launch_opts "$CAEXEC")
    if [ -z "$CALAUNCH" ]; then
        record "apps-ca/setup" FAIL "-" "the CUDA-enabled MPICH's mpiexec cannot start 2 processes"
        return 0
    fi
    local CAENV=(env LD_LIBRARY_PATH="$CALD" MPIX_ACC_LOG=warn)
    # is it really CUDA-aware here: the library's answer and a device-buffer
    # ping-pong with data checked (the bench's cuda-aware rows, 8 B - 1 MiB)
    run_test "apps-ca/check" 120 'MPI library CUDA support: yes.*' -- "${CAENV[@]}" \
        "$CAEXEC" $CALAUNCH -n 2 "$CEX/bench/mpixacc_bench" --backend cuda --variant cuda-aware \
        --sizes 8,4K,1M -i 50 -r 2 --timeout 90
    run_test "apps-ca/mpixacc_bench" 300 'RESULT: OK' -- "${CAENV[@]}" \
        "$CAEXEC" $CALAUNCH -n 2 $(wd) "$CEX/bench/mpixacc_bench" --backend cuda \
        --variant acc,staged,cuda-aware,nccl --sizes 8,64,512,4K,64K,1M,16M,64M --timeout 240 \
        --csv "$RES/bench-ca.csv"
    run_test "apps-ca/bench-allreduce" 240 'RESULT: OK' -- "${CAENV[@]}" \
        "$CAEXEC" $CALAUNCH -n 2 $(wd) "$CEX/bench/mpixacc_bench" --backend cuda -t allreduce \
        --variant acc-sx,staged,cuda-aware,nccl --sizes 8,1K,256K,64M --timeout 200 \
        --csv "$RES/bench-allreduce-ca.csv"
    run_test "apps-ca/ping_kernel_pong" 240 'RESULT: OK' -- "${CAENV[@]}" \
        "$CAEXEC" $CALAUNCH -n 2 $(wd) "$CEX/ping_kernel_pong/ping_kernel_pong" --backend cuda \
        --variant staged,cuda-aware,acc,nccl --csv "$RES/pkp-ca.csv"
    run_test "apps-ca/stencil2d" 240 'RESULT: OK' -- "${CAENV[@]}" \
        "$CAEXEC" $CALAUNCH -n 2 $(wd) "$CEX/stencil2d/stencil2d" --backend cuda \
        --variant mpi,mpi-cuda-aware,acc,streamcomm --sizes 64,256,1024,4096 --steps 100 \
        --repeats 5 --csv "$RES/stencil-ca.csv"
}

if [ "$APPS" = 1 ]; then
    step "applications (examples, hpgmg)"
    EX="$BUILD/examples"
    RES="$TMP/results"
    mkdir -p "$RES"
    # the stencil: every variant in one launch, bitwise check against the
    # single-rank reference; 256^2 and 4096^2 points per GPU (issue targets)
    # a hung rank prints every thread's stack 15 s before the runner's limit
    # (run_test sets MPIX_ACC_HANGDUMP_AFTER; the ranks only get the preload)
    HD="$BUILD/tools/.libs/mpixacc_hangdump.so"
    wd() { [ -f "$HD" ] && echo "env LD_PRELOAD=$HD"; }
    run_test "apps/stencil2d" 300 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --sizes 64,256,1024,4096 --steps 100 --repeats 5 --csv "$RES/stencil.csv"
    # the textbook step on a stream communicator (issue 20) beside the mpi loop
    run_test "apps/stencil2d-classic" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --variant mpi,streamcomm,streamcomm-classic --sizes 64,256,1024,4096 --steps 100 \
        --repeats 5 --csv "$RES/stencil-classic.csv"
    # where classic's time goes: the library's counters and host time per call
    run_test "apps/stencil2d-classic-stats" 120 'RESULT: OK' -- env MPIX_ACC_LOG=info \
        MPIX_ACC_STATS=1 "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --variant streamcomm-classic --sizes 256 --steps 1000 --repeats 1 --no-check
    run_test "apps/ping_kernel_pong" 300 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/ping_kernel_pong/ping_kernel_pong" --backend cuda \
        --csv "$RES/pkp.csv"
    # latency / bandwidth, every variant side by side (issue 4's table rows)
    run_test "apps/mpixacc_bench" 300 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --sizes 8,64,512,4K,64K,1M,16M,64M --csv "$RES/bench.csv"
    # the previous transport set-up side by side: UCX endpoints in "peer" error
    # mode, which leaves out shared memory (within a node everything over TCP)
    run_test "apps/bench-peer-errors" 200 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_PEER_ERRORS=1 \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant acc --sizes 8,512,4K,64K,1M,64M --timeout 120 --csv "$RES/bench-peer-errors.csv"
    # the physical floor (peer copy, stream-to-stream flag round trip) next to acc,
    # with the kernel floors floor-spin and floor-fused that --variant floor brings
    run_test "apps/bench-floor" 200 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant floor,acc --sizes 8,64K,64M --timeout 120 --csv "$RES/bench-floor.csv"
    # the network path (issue 22 item 1): both ranks over TCP + cuda_copy only
    # (no shared memory, no cuda_ipc), as between nodes; acc with staging
    # (MPIX_ACC_NET_STAGE=all: these peers share a node), acc without, staged
    # MPI, and host-to-host MPI over the same transport (-d HH)
    NETENV=(env MPIX_ACC_LOG=warn UCX_TLS=tcp,cuda_copy)
    run_test "apps/bench-net" 240 "$NETSTAGED" -- "${NETENV[@]}" MPIX_ACC_NET_STAGE=all \
        MPIX_ACC_STATS=1 "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        -t lat --variant acc,staged --sizes 8,512,1K,2K,4K,8K,64K --timeout 200 --csv "$RES/bench-net.csv"
    run_test "apps/bench-net-off" 240 'RESULT: OK' -- "${NETENV[@]}" MPIX_ACC_NET_STAGE=off \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        -t lat --variant acc --sizes 8,512,1K,2K,4K,8K,64K --timeout 200 --csv "$RES/bench-net-off.csv"
    run_test "apps/bench-net-hh" 240 'RESULT: OK' -- "${NETENV[@]}" \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda -d HH \
        -t lat --variant staged --sizes 8,512,1K,2K,4K,8K,64K --timeout 200 --csv "$RES/bench-net-hh.csv"
    # stream-ordered Allreduce (issue 20) beside staged MPI and NCCL's
    run_test "apps/bench-allreduce" 300 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda -t allreduce \
        --variant acc,acc-sx,staged,nccl --sizes 8,64,1K,16K,256K,1M,16M,64M --timeout 240 \
        --csv "$RES/bench-allreduce.csv"
    # the stream-executed path (acc-sx) beside acc, staged, NCCL: its receive
    # steps poll, so where the two ranks share a GPU they run under MPS
    # (started here, stopped after) with MPIX_ACC_SX=on; MPIX_ACC_STATS=1
    # shows the messages per path and why sends fell back to UCX
    SXMPS=""
    if [ "$NGPU" -lt 2 ] || [ "$SHARED" = 1 ]; then
        if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
            export CUDA_MPS_PIPE_DIRECTORY="$TMP/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/mps-log"
            mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
            nvidia-cuda-mps-control -d && SXMPS=1 && say "    MPS started for apps/bench-sx"
        fi
    fi
    run_test "apps/bench-sx" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on MPIX_ACC_STATS=1 \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant acc,acc-sx,acc-sync,acc-sx-sync,staged,nccl --sizes 8,64,512,4K,64K,256K,1M,16M,64M --timeout 200 \
        --csv "$RES/bench-sx.csv"
    # kernel-initiated (issue 19): one kernel per rank runs every round trip
    # of a repetition through a partitioned request pair, beside NCCL,
    # acc-sx and staged MPI in the same launch
    run_test "apps/bench-ki" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant ki,ki-value,nccl,acc-sx,staged --sizes 8,16,64,512,4K,16K,64K --timeout 200 \
        --csv "$RES/bench-ki.csv"
    # NVSHMEM, the other anchor of issue 19 (examples/bench/nvshmem_pingpong.cu):
    # built here against the NVSHMEM wheel found on the machine (relocatable
    # device code), its remote transport off (no second libucp), bootstrapped
    # by a unique id over MPI; device put-with-signal and on-stream variants
    if selected "apps/bench-nvshmem"; then
        NVS=$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null || true)
        if [ -n "$NVS" ] && [ -f "$NVS/lib/libnvshmem_device.a" ]; then
            mkdir -p "$TMP/nvs"
            ln -sf "$NVS/lib/libnvshmem_host.so.3" "$TMP/nvs/libnvshmem_host.so"
            NVS_MPI=$("$RT/bin/mpicc" -show)
            NVS_INC=$(echo "$NVS_MPI" | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
            NVS_LIB=$(echo "$NVS_MPI" | tr ' ' '\n' | grep -E '^-(L|l)' | tr '\n' ' ')
            if "$CUDA_HOME/bin/nvcc" -std=c++17 -rdc=true -arch=sm_90 -I"$NVS/include" $NVS_INC \
                "$ROOT/examples/bench/nvshmem_pingpong.cu" -o "$TMP/nvshmem_pp" -L"$TMP/nvs" \
                -L"$NVS/lib" -lnvshmem_host -lnvshmem_device -Xlinker -rpath,"$NVS/lib" $NVS_LIB \
                -lcuda >>"$BUILDLOG" 2>&1; then
                run_test "apps/bench-nvshmem" 150 'RESULT: OK' -- env LD_LIBRARY_PATH="$NVS/lib:$LD_LIBRARY_PATH" \
                    NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo \
                    "$MPIEXEC" $LAUNCH -n 2 "$TMP/nvshmem_pp"
                grep -E '^(device|device-group|on-stream|# )' "$TMP/out" >"$RES/bench-nvshmem.txt" 2>/dev/null || true
            else
                record "apps/bench-nvshmem" FAIL "-" "could not build against $NVS (build.log)"
            fi
        else
            say "NVSHMEM not found (python3 nvidia.nvshmem): apps/bench-nvshmem not run"
        fi
    fi
    # the stencil's kernel-initiated variant (issue 19): one cooperative kernel
    # per run, partition k = step k, beside mpi, acc and acc-sx
    run_test "apps/stencil2d-ki" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --variant mpi,acc,acc-sx,ki --sizes 64,256,1024,4096 --steps 100 --repeats 5 \
        --csv "$RES/stencil-ki.csv"
    # CUDA graphs (issue 21): a ki epoch of 10 steps captured once, launched
    # 10 times per run, beside mpi and ki (bitwise against the reference)
    run_test "apps/stencil2d-graph" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --variant mpi,ki,graph,acc-graph --sizes 64,256,1024,4096 --steps 100 --repeats 5 \
        --csv "$RES/stencil-graph.csv"
    # point-to-point captured into CUDA graphs (fire/wait nodes) beside NCCL
    # captured the same way: 10 round trips per graph, launched per 10
    run_test "apps/bench-graph" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_STATS=1 \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant acc,acc-graph,nccl,nccl-graph --sizes 8,4K,64K,1M --timeout 200 \
        --csv "$RES/bench-graph.csv"
    # the same without programmatic dependent launch of the send steps
    run_test "apps/bench-sx-nopdl" 120 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
        MPIX_ACC_SX_PDL=0 "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" --backend cuda \
        --variant acc,acc-sx --sizes 8,64K --test lat --timeout 100 --csv "$RES/bench-sx-nopdl.csv"
    # the library's host time per call (MPIX_ACC_STATS=1 "host us per call"
    # line: p50/p99/mean of sends, receives, stream waits and the CUDA calls
    # inside them), one variant per launch so that the histograms are that
    # variant's: enqueued ahead (acc, acc-sx) and synchronized per iteration
    for hv in acc acc-sync acc-sx acc-sx-sync; do
        run_test "apps/hostcost-$hv" 60 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
            MPIX_ACC_STATS=1 "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/bench/mpixacc_bench" \
            --backend cuda --variant $hv --test lat --sizes 8 -i 2000 -r 3 --timeout 50
    done
    run_test "apps/stencil2d-sx" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/stencil2d/stencil2d" --backend cuda \
        --variant mpi,acc,streamcomm,acc-sx --sizes 64,256,1024,4096 --steps 100 --repeats 5 \
        --csv "$RES/stencil-sx.csv"
    run_test "apps/ping_kernel_pong-sx" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn MPIX_ACC_SX=on \
        "$MPIEXEC" $LAUNCH -n 2 $(wd) "$EX/ping_kernel_pong/ping_kernel_pong" --backend cuda \
        --variant staged,acc,acc-sx,nccl --csv "$RES/pkp-sx.csv"
    # 4 ranks on 2 GPUs, two per GPU (2 x 2 grid; issue 16): without MPS the
    # two processes of a GPU time-slice it; with MPS they share it (what a
    # user should run); the SX path only under MPS (its steps poll)
    if [ "$NGPU_RUN" -ge 2 ]; then
        run_test "apps/stencil2d-4ranks" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
            "$MPIEXEC" $LAUNCH -n 4 $(wd) "$EX/stencil2d/stencil2d" --backend cuda --px 2 --py 2 \
            --variant mpi,acc,streamcomm --sizes 256,1024,4096 --steps 100 --repeats 3 \
            --csv "$RES/stencil-4r.csv"
        if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
            export CUDA_MPS_PIPE_DIRECTORY="$TMP/mps4-pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/mps4-log"
            mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
            if nvidia-cuda-mps-control -d; then
                run_test "apps/stencil2d-4ranks-mps" 240 'RESULT: OK' -- env MPIX_ACC_LOG=warn \
                    MPIX_ACC_SX=on "$MPIEXEC" $LAUNCH -n 4 $(wd) "$EX/stencil2d/stencil2d" \
                    --backend cuda --px 2 --py 2 --variant mpi,acc,streamcomm,acc-sx \
                    --sizes 256,1024,4096 --steps 100 --repeats 3 --csv "$RES/stencil-4r-mps.csv"
                echo quit | nvidia-cuda-mps-control
            fi
            unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        fi
    fi
    if [ -n "$SXMPS" ]; then
        echo quit | nvidia-cuda-mps-control
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
    cuda_aware_apps
    run_test "apps/hpgmg" 400 '0 failed' -- env MPIX_ACC_LOG=warn OUT="$TMP/hpgmg" \
        HPGMG_RUN_TIMEOUT=${HPGMG_RUN_TIMEOUT:-90} HPGMG_HANGDUMP="$HD" \
        "$ROOT/hpgmg/gpu-check.sh" --reps 1 "$BUILD/hpgmg/hpgmg-fv"
    cp "$TMP/hpgmg/gpu-check.log" "$RES/hpgmg.txt" 2>/dev/null
fi

if [ "$CPUSUITE" = 1 ]; then
    run_test "cpu-suite (make check)" 580 '' -- make -C "$BUILD" check
fi

finish
