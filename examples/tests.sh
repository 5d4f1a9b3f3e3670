#!/usr/bin/env bash
# examples/tests.sh - CI checks of the examples on host streams (no GPU).
#
#   examples/tests.sh [BUILDDIR]      (default: $MPIXACC_BUILDDIR, else <repo>/build)
#
# A purely numeric argument is ignored (scripts/run-tests.sh passes a rank
# count to the scripts of test/mpi/TESTS and exports MPIXACC_BUILDDIR), so the
# table can list it as `../examples/tests.sh 4`.
#
# stencil2d on 1, 2 and 4 ranks (several process grids), small sizes, all
# variants (mpi, acc, acc2, streamcomm) in one launch each: every run must be
# bitwise identical to the serial reference. ping_kernel_pong: a short run of
# the staged and acc variants with data validation. mpixacc_bench: the
# host-stream variants, CSV, --no-check, -t allreduce, option errors, 100k iterations
# enqueued ahead. Three fault-injection
# runs prove that the checks can fail: they must report FAIL and exit non-zero.
#
# Prints one PASS/FAIL line per check and ends with "N passed, N failed";
# exit status 0 only when nothing failed. Logs: $MPIXACC_TEST_LOGDIR
# (default: a temporary directory, kept and named when something fails).
# Runs in about a minute on 2 cores (4 ranks oversubscribe them).
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
    shift
fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
builddir=$(cd "$builddir" 2>/dev/null && pwd) || {
    echo "examples/tests.sh: build directory '${1:-${MPIXACC_BUILDDIR:-$root/build}}' not found" >&2
    exit 2
}
stencil=$builddir/examples/stencil2d/stencil2d
pkp=$builddir/examples/ping_kernel_pong/ping_kernel_pong
bench=$builddir/examples/bench/mpixacc_bench
for p in "$stencil" "$pkp" "$bench"; do
    if [ ! -x "$p" ]; then
        echo "examples/tests.sh: $p not built (run make in $builddir)" >&2
        exit 2
    fi
done

# one libucp per process (UCX 1.22 first on the library path)
if [ -f "$root/scripts/mpixacc-env.sh" ]; then
    # shellcheck disable=SC1091
    . "$root/scripts/mpixacc-env.sh"
fi

logdir=${MPIXACC_TEST_LOGDIR:-$(mktemp -d /tmp/mpixacc-examples-tests.XXXXXX)}
mkdir -p "$logdir"
TIMEOUT=${MPIXACC_TEST_TIMEOUT:-150}
passed=0
failed=0
n=0

pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1 ($2; log: $3)"; failed=$((failed + 1)); }

# run NAME NP -- ARGS...: runs mpiexec, leaves the log path in $log and the
# exit status in $rc
run() {
    local name=$1 np=$2
    shift 3
    n=$((n + 1))
    log=$logdir/$(printf '%02d' $n)-${name//[^A-Za-z0-9_.-]/_}.log
    echo "+ mpiexec -n $np $*" >"$log"
    timeout "$TIMEOUT" mpiexec -n "$np" "$@" >>"$log" 2>&1
    rc=$?
}

# stencil_ok NAME NP EXPECTED_ROWS ARGS...: exit 0, RESULT: OK, and exactly
# EXPECTED_ROWS result rows, each "bitwise"
stencil_ok() {
    local name=$1 np=$2 rows=$3
    shift 3
    run "$name" "$np" -- "$stencil" "$@"
    local good bad
    good=$(grep -cE '^(mpi|mpi-cuda-aware|acc|acc2|streamcomm|acc-sx|streamcomm-classic|graph|acc-graph) .* bitwise$' "$log")
    bad=$(grep -cE '^(mpi|mpi-cuda-aware|acc|acc2|streamcomm|acc-sx|streamcomm-classic|graph|acc-graph) .*(FAIL|unchecked)' "$log")
    if [ $rc -ne 0 ]; then
        fail "$name" "exit status $rc" "$log"
    elif ! grep -q '^RESULT: OK$' "$log"; then
        fail "$name" "no 'RESULT: OK'" "$log"
    elif [ "$good" -ne "$rows" ] || [ "$bad" -ne 0 ]; then
        fail "$name" "$good of $rows variant rows bitwise equal to the reference, $bad failed" "$log"
    else
        pass "$name ($rows variant runs bitwise equal to the reference)"
    fi
}

# expect_fail NAME NP ARGS...: must exit non-zero with RESULT: FAIL and every
# result row FAIL (the check catches an injected fault)
expect_fail() {
    local name=$1 np=$2 rowre=$3
    shift 3
    run "$name" "$np" -- "$@"
    local rows frows
    rows=$(grep -cE "$rowre" "$log")
    frows=$(grep -E "$rowre" "$log" | grep -c 'FAIL')
    if [ $rc -eq 0 ]; then
        fail "$name" "exit status 0 with an injected fault" "$log"
    elif [ $rc -ge 124 ]; then
        fail "$name" "exit status $rc (timeout or signal), not a detected fault" "$log"
    elif ! grep -qE '^(# )?RESULT: FAIL$' "$log" || [ "$rows" -eq 0 ] || [ "$rows" -ne "$frows" ]; then
        fail "$name" "fault not reported on every row ($frows of $rows FAIL)" "$log"
    else
        pass "$name (injected fault detected in $frows of $rows rows, exit status $rc)"
    fi
}

common=(--variant mpi,acc,acc2,streamcomm --steps 12 --warmup 1 --repeats 2)

stencil_ok "stencil2d 1 rank, sizes 1,8,33" 1 12 "${common[@]}" --sizes 1,8,33
stencil_ok "stencil2d 2 ranks (2x1), sizes 1,8,32,64" 2 16 "${common[@]}" --sizes 1,8,32,64
stencil_ok "stencil2d 2 ranks (1x2), sizes 5,16" 2 8 "${common[@]}" --px 1 --py 2 --sizes 5,16
stencil_ok "stencil2d 4 ranks (2x2), sizes 3,16" 4 8 "${common[@]}" --sizes 3,16
stencil_ok "stencil2d 4 ranks (4x1), size 8" 4 4 "${common[@]}" --px 4 --py 1 --sizes 8
stencil_ok "stencil2d 4 ranks (1x4), size 7" 4 4 "${common[@]}" --px 1 --py 4 --sizes 7
# the stream-executed path (acc-sx: a communicator with the no-wildcard
# assertions), 2 and 4 ranks
# the textbook step (vector-type columns, MPI_Sendrecv, MPI_Allreduce every 10
# steps) on a stream communicator: 2x1, 2x2 and 3x1 grids
stencil_ok "stencil2d streamcomm-classic 2 ranks, sizes 1,8,32" 2 6 --variant mpi,streamcomm-classic \
    --steps 21 --warmup 1 --repeats 2 --sizes 1,8,32
stencil_ok "stencil2d streamcomm-classic 4 ranks (2x2), sizes 3,16" 4 4 \
    --variant mpi,streamcomm-classic --steps 21 --warmup 1 --repeats 2 --sizes 3,16
stencil_ok "stencil2d streamcomm-classic 3 ranks (3x1), size 9" 3 1 --variant streamcomm-classic \
    --steps 21 --warmup 1 --repeats 2 --sizes 9
stencil_ok "stencil2d acc-sx 2 ranks, sizes 8,32" 2 4 --variant mpi,acc-sx --steps 12 \
    --warmup 1 --repeats 2 --sizes 8,32
stencil_ok "stencil2d acc-sx 4 ranks (2x2), size 16" 4 2 --variant mpi,acc-sx --steps 12 \
    --warmup 1 --repeats 2 --sizes 16
# a host graph: two steps captured with their messages, launched per pair of
# steps (13 steps: the odd last one as acc)
# (acc-graph: the same on the host backend; on CUDA a CUDA graph)
stencil_ok "stencil2d graph 2 ranks, sizes 1,8,32" 2 9 --variant mpi,graph,acc-graph --steps 13 \
    --warmup 1 --repeats 2 --sizes 1,8,32
stencil_ok "stencil2d graph 4 ranks (2x2), size 16" 4 3 --variant mpi,graph,acc-graph --steps 12 \
    --warmup 1 --repeats 2 --sizes 16
# ... on the counter protocol of CUDA graphs (fire/wait counters the
# progress thread watches)
MPIX_ACC_GRAPH_PROTOCOL=counter stencil_ok "stencil2d acc-graph counter protocol 4 ranks, size 16" \
    4 2 --variant mpi,acc-graph --steps 13 --warmup 1 --repeats 2 --sizes 16
# the CUDA-aware MPI anchor's loop (on host streams: the mpi loop on the
# buffers the kernels write)
stencil_ok "stencil2d mpi-cuda-aware 2 ranks, sizes 8,32" 2 4 --variant mpi,mpi-cuda-aware \
    --steps 12 --warmup 1 --repeats 2 --sizes 8,32

# fault injection: a stale halo (step 3's unpack skipped) must be caught
expect_fail "stencil2d detects a skipped halo unpack" 2 \
    '^(mpi|mpi-cuda-aware|acc|acc2|streamcomm) ' "$stencil" "${common[@]}" --variant \
    mpi,mpi-cuda-aware,acc,acc2,streamcomm --sizes 8 --inject-fault 3

# ping-kernel-pong: validation of every message, staged and acc
run "ping_kernel_pong 2 ranks" 2 -- "$pkp" --variant staged,cuda-aware,acc --sizes 1,64,4K,64K \
    --iters 30 --warmup 5 --repeats 2 --kernel-us 20
rows=$(grep -cE '^[0-9]+ (B|KiB|MiB) +(staged|cuda-aware|acc) .* ok$' "$log")
if [ $rc -eq 0 ] && grep -q '^RESULT: OK$' "$log" && [ "$rows" -eq 12 ]; then
    pass "ping_kernel_pong 2 ranks (12 validated variant runs)"
else
    fail "ping_kernel_pong 2 ranks" "exit status $rc, $rows of 12 rows ok" "$log"
fi
expect_fail "ping_kernel_pong detects a wrong reply" 2 \
    '^[0-9]+ (B|KiB) +(staged|cuda-aware|acc) ' "$pkp" --variant staged,cuda-aware,acc \
    --sizes 1,4K --iters 10 --warmup 0 --repeats 1 --inject-fault 4

# mpixacc_bench: every variant that runs on host streams, latency and
# bandwidth, data checked; CSV has one row per size and variant
csv=$logdir/bench.csv
run "mpixacc_bench 2 ranks" 2 -- "$bench" -b 1 -e 256K -f 16 -i 50 -r 2 -w 1 -W 4 --csv "$csv"
rows=$(grep -cE '^[0-9]+ (B|KiB) +(acc|acc-sync|staged|cuda-aware) .* ok$' "$log")
crows=$(grep -cE '^[0-9]+,(acc|acc-sync|staged|cuda-aware),host,.*,0,ok$' "$csv" 2>/dev/null)
skips=$(grep -cE '^# variant (nccl|mpich-enqueue) skipped: ' "$log")
# OSU/nccl-tests conventions: every line that is not a result row starts with '#'
# (the runner's own lines excepted), -w warm-up, -W window, MB/s
other=$(grep -cvE '^(\+ |# |#$|[0-9]+ (B|KiB) |\[mpix-acc )' "$log")
if [ $rc -eq 0 ] && grep -q '^# RESULT: OK$' "$log" && [ "$rows" -eq 20 ] && [ "$crows" -eq 20 ] &&
    [ "$skips" -eq 2 ] && [ "$other" -eq 0 ] &&
    grep -q 'windows of 4 messages .* MB/s .*2 repetitions after 1 warm-up' "$log" &&
    grep -qE '^# size +variant .* MB/s ' "$log"; then
    pass "mpixacc_bench 2 ranks (20 validated rows, CSV, 2 GPU-only variants skipped with a reason)"
else
    fail "mpixacc_bench 2 ranks" "exit status $rc, $rows/20 rows ok, $crows/20 CSV rows, $skips/2 skips, $other unprefixed non-row lines" "$log"
fi
# the plot script turns that CSV, and a second one of the same run, into
# Markdown tables and (with matplotlib) one set of PNGs per CSV plus the
# chart of every variant of the run: no CSV overwrites another's plots
if command -v python3 >/dev/null 2>&1; then
    n=$((n + 1))
    log=$logdir/$(printf '%02d' $n)-bench-plot.log
    cp "$csv" "$logdir/bench-second.csv"
    rm -rf "$logdir/plots"
    python3 "$root/scripts/bench-plot.py" --out "$logdir/plots" --tag ci "$csv" \
        "$logdir/bench-second.csv" >"$log" 2>&1
    rc=$?
    trows=$(grep -cE '^\| [0-9]+ (B|KiB) (\| [0-9.]+ ){4,}\|$' "$log")
    pngs=ok
    if python3 -c 'import matplotlib' 2>/dev/null; then
        for f in ci-bench-latency ci-bench-bandwidth ci-bench-second-latency \
            ci-bench-second-bandwidth ci-bench-all-latency ci-bench-all-bandwidth; do
            [ -s "$logdir/plots/$f.png" ] || pngs="no $f.png"
        done
    fi
    if [ $rc -eq 0 ] && [ "$trows" -eq 30 ] && [ "$pngs" = ok ]; then
        pass "bench-plot.py: tables of two CSVs (30 rows), one set of PNGs each and the run's chart"
    else
        fail "bench-plot.py" "exit status $rc, $trows of 30 table rows, PNGs: $pngs" "$log"
    fi
fi
run "mpixacc_bench 3 ranks (rank 2 idle), --no-check" 3 -- "$bench" --sizes 8,64K -v acc,staged,floor \
    -t lat -i 20 -r 1 --no-check --timeout 100
rows=$(grep -cE '^[0-9]+ (B|KiB) +(acc|staged) .* unchecked$' "$log")
if [ $rc -eq 0 ] && [ "$rows" -eq 4 ] && grep -q '^# variant floor skipped: needs the CUDA backend' "$log"; then
    pass "mpixacc_bench 3 ranks, --no-check (4 rows marked unchecked, floor skipped with its reason)"
else
    fail "mpixacc_bench 3 ranks, --no-check" "exit status $rc, $rows of 4 rows" "$log"
fi
# -t allreduce: acc, acc-sx, staged, cuda-aware (plain MPI on host memory), each
# result element checked; 3 ranks (the Allreduce is between ranks 0 and 1)
run "mpixacc_bench -t allreduce" 3 -- "$bench" --sizes 8,1K,300K -t allreduce \
    -v acc,acc-sx,staged,cuda-aware -i 30 -r 2
rows=$(grep -cE '^[0-9]+ (B|KiB) +allreduce-(acc|acc-sx|staged|cuda-aware) .* ok$' "$log")
if [ $rc -eq 0 ] && [ "$rows" -eq 12 ] && grep -q '^# RESULT: OK$' "$log"; then
    pass "mpixacc_bench -t allreduce (12 rows, every element checked)"
else
    fail "mpixacc_bench -t allreduce" "exit status $rc, $rows of 12 rows ok" "$log"
fi
expect_fail "mpixacc_bench detects wrong data" 2 '^[0-9]+ (B|KiB) +(acc|acc-sync|staged|cuda-aware) ' \
    "$bench" --sizes 1,4K -t bw -i 16 -r 1 -W 2 --inject-fault
run "mpixacc_bench --timeout names what it was doing" 2 -- "$bench" --sizes 8 -v acc -t lat \
    -i 10000000 -r 1 --timeout 3
if [ $rc -ne 0 ] && grep -q "TIMEOUT after 3 s in 'acc latency 8 B'" "$log"; then
    pass "mpixacc_bench --timeout names what it was doing (exit status $rc)"
else
    fail "mpixacc_bench --timeout" "exit status $rc, no TIMEOUT line naming the phase" "$log"
fi
# 100k round trips enqueued ahead with back-pressure out of the way: the
# library must free finished generalized requests while the loop runs
# (a reaper that kept inspecting the same incomplete entries let them pile
# up, and MPICH aborted with "req != NULL" near 128k live requests)
# (sanitizer runs are slower: MPIXACC_TEST_TIMEOUT_SCALE, set by run-tests.sh, stretches the limit)
tscale=${MPIXACC_TEST_TIMEOUT_SCALE:-1}
[[ $tscale =~ ^[0-9]+$ ]] || tscale=1
run "mpixacc_bench 100k iterations enqueued ahead" 2 -- env MPIX_ACC_MAX_PENDING=100000000 \
    "$bench" --sizes 8 -v acc -t lat -i 100000 -r 1 --timeout $((140 * tscale))
if [ $rc -eq 0 ] && grep -qE '^8 B +acc .* ok$' "$log"; then
    pass "mpixacc_bench 100k iterations enqueued ahead (requests freed while it runs)"
else
    fail "mpixacc_bench 100k iterations enqueued ahead" "exit status $rc" "$log"
fi
run "mpixacc_bench rejects a bad option" 2 -- "$bench" --min 0
if [ $rc -eq 2 ] && grep -q "invalid size '0'" "$log"; then
    pass "mpixacc_bench rejects a bad option (exit status 2 with the reason)"
else
    fail "mpixacc_bench rejects a bad option" "exit status $rc" "$log"
fi

echo "$passed passed, $failed failed"
if [ $failed -ne 0 ]; then
    echo "logs kept in $logdir"
    exit 1
fi
[ -n "${MPIXACC_TEST_LOGDIR:-}" ] || rm -rf "$logdir"
exit 0
