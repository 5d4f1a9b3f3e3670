#!/usr/bin/env bash
# hpgmg/gpu-check.sh - on a GPU machine: check hpgmg-fv's GPU path, then
# measure MGSolve time on the GPU levels for every backend.
#
#   hpgmg/gpu-check.sh [--bench-only|--check-only] [--reps N] [--sizes L,...] [BINARY]
#
# BINARY defaults to build-gpu/hpgmg/hpgmg-fv (built by scripts/gpu-test.sh:
# `make all` of a CUDA build) and needs the mpi, acc and streamcomm backends
# and CUDA (`hpgmg-fv --features`).  MPI comes from .gpu-runtime (see
# scripts/gpu-runtime.sh; carry that folder), unless mpiexec is on the PATH
# and HPGMG_SYSTEM_MPI=1.  Two ranks: one GPU each when 2 GPUs are visible,
# else both on GPU 0.
#
# Checks (PASS/FAIL, last line "N passed, N failed"):
#   - GPU levels give the CPU's residual norms bit for bit (-fmad=false, same
#     per-cell arithmetic) with the default threshold, both operators
#   - every level on the GPU (threshold 0, bottom solve included) converges to
#     the CPU's answer within 1e-9 relative (BiCGStab's dots are summed in
#     another order on the GPU)
#   - the Richardson order of the GPU-level runs within its band (h, 2h, 4h solved)
#   - 2 ranks, GPU levels: acc, streamcomm, acc-sx and streamcomm-sx = mpi
#     (bit-identical), both operators (-sx: level communicators with the MPI-4
#     no-wildcard assertions, so mpix-acc's stream-executed path may carry them)
#   - 2 ranks, GPU levels: ki (the kernels send and receive through
#     partitioned requests) = mpi, both operators; memcheck and racecheck of
#     its kernels (2 ranks, every level on the GPUs)
#   - 2 ranks, GPU levels, --graph (each level's V-cycle legs captured as CUDA
#     graphs and launched): acc, streamcomm, acc-sx and ki = mpi, both
#     operators; acc and ki also with every level on the GPUs; memcheck and
#     racecheck of ki --graph there
#   - fv4 64^3 on 2 ranks with acc: HPGMG's published residual, Richardson order
#   - compute-sanitizer memcheck on a small GPU run
# Bench: log2 box 4, 5, 6 (--sizes: a subset, e.g. 4,5 -- 16^3 and 32^3 at
# --reps 5 fit one 10-minute device call, all three do not) with 8 boxes per
# rank, 2 ranks, each backend (ki also with CUDA graphs: issue 21), and
# two exchange-free bounds (mpi+bound, acc-sx+bound: --skip-exchange, the GPU
# levels skip their messages; their rel is not a result); prints MGSolve time
# on the GPU levels (median of N runs of the timed solves).
# HPGMG_BENCH_BACKENDS: the bench's backends (default: mpi acc streamcomm
# acc-sx streamcomm-sx ki ki+graph mpi+bound acc-sx+bound; also NAME-nopdl: backend
# NAME with the GPU kernels launched without programmatic dependent launch;
# NAME-rN: backend NAME with --ki-runs N; NAME+bound: with --skip-exchange;
# NAME+graph: with --graph (combinable); NAME@LABEL: backend NAME of the
# binary in $HPGMG_BIN_LABEL, an A/B of two builds in one run). Repetitions
# are interleaved across the backends.
# Logs go to $OUT (device tool) or ./hpgmg-gpu-logs.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG=${OUT:-$ROOT/hpgmg-gpu-logs}
MODE=all
REPS=3
SIZES="4 5 6"
BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
  --bench-only) MODE=bench ;;
  --check-only) MODE=check ;;
  --reps) REPS=$2; shift ;;
  --sizes) SIZES=${2//,/ }; shift ;;
  *) BIN=$1 ;;
  esac
  shift
done
case " $SIZES " in *[!0-9\ ]* | "  ") echo "gpu-check.sh: --sizes takes log2 box sizes, e.g. 4,5" >&2; exit 2 ;; esac
BIN=${BIN:-$ROOT/build-gpu/hpgmg/hpgmg-fv}
mkdir -p "$LOG"
say() { printf '%s\n' "$*" | tee -a "$LOG/gpu-check.log"; }
pass=0 fail=0
ok() { say "PASS: $*"; pass=$((pass + 1)); }
ko() { say "FAIL: $*"; fail=$((fail + 1)); }
finish() { say "$pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

# ---------------------------------------------------------------- runtime
if [ "${HPGMG_SYSTEM_MPI:-0}" = 1 ]; then
  MPIEXEC=${MPIEXEC:-mpiexec}
  LAUNCH=""
else
  . "$ROOT/scripts/gpu-env.sh" || { ko "no GPU runtime (scripts/gpu-runtime.sh, carry .gpu-runtime)"; finish; }
fi
[ -n "${HPGMG_LIBDIR:-}" ] && export LD_LIBRARY_PATH="$HPGMG_LIBDIR:$LD_LIBRARY_PATH"

say "=== hpgmg gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/    /' | tee -a "$LOG/gpu-check.log"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
feat=$("$BIN" --features 2>&1) || { ko "cannot run $BIN: $feat"; finish; }
say "    binary: $BIN ($feat); mpiexec: $MPIEXEC $LAUNCH; GPUs: $NGPU"
case "$feat" in *acc*cuda=yes*) ;; *) ko "$BIN lacks the acc backends or CUDA"; finish ;; esac
if [ "$NGPU" -lt 2 ]; then export CUDA_VISIBLE_DEVICES=0; RANKS="2 ranks on GPU 0"; else RANKS="rank r on GPU r"; fi

# run NAME RANKS ARGS...  ->  $LOG/NAME.log
# With HPGMG_HANGDUMP (tools' mpixacc_hangdump.so) a rank still running 10 s
# before the time limit prints every thread's stack (into the failure report).
run() {
  local name=$1 n=$2 t=${HPGMG_RUN_TIMEOUT:-300} wd=""
  shift 2
  [ -n "${HPGMG_HANGDUMP:-}" ] && [ -f "$HPGMG_HANGDUMP" ] && [ "$t" -gt 20 ] &&
    wd="env LD_PRELOAD=$HPGMG_HANGDUMP MPIX_ACC_HANGDUMP_AFTER=$((t - 10))"
  timeout "$t" "$MPIEXEC" $LAUNCH -n "$n" $wd "$BIN" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    ko "$name: exit $rc"
    if grep -q '^\[hangdump\]' "$LOG/$name.log"; then
      grep -v '^\[mpix-acc' "$LOG/$name.log" | sed -n '/^\[hangdump\]/,$p' | head -n 400
    else
      tail -8 "$LOG/$name.log"
    fi | sed 's/^/    /' | tee -a "$LOG/gpu-check.log"
  fi
  return $rc
}
res() { grep -E '^CHECK (solve|error|exact)' "$LOG/$1.log"; }
same() { # A B what
  if res "$1" >"$LOG/$1.res" && res "$2" >"$LOG/$2.res" && [ -s "$LOG/$1.res" ] && cmp -s "$LOG/$1.res" "$LOG/$2.res"; then
    ok "$3 (bit-identical)"
  else
    ko "$3"; diff "$LOG/$1.res" "$LOG/$2.res" | head -6 | sed 's/^/    /' | tee -a "$LOG/gpu-check.log"
  fi
}
rel() { grep '^CHECK solve=0' "$LOG/$1.log" | tr ' ' '\n' | sed -n 's/^rel=//p'; }
# richardson NAME WHAT: the run's Richardson analysis (h, 2h, 4h solved) is within its band
richardson() {
  local o
  o=$(grep -m1 '^CHECK error' "$LOG/$1.log" | tr ' ' '\n' | sed -n 's/^order=//p')
  if grep -q '^CHECK error.*band_ok=1' "$LOG/$1.log"; then ok "$2: Richardson order ${o:-?} within its band"
  else ko "$2: Richardson order ${o:-?} outside its band (or not computed)"; fi
}
Q="--check --min-solves 1 --min-time 0"

if [ "$MODE" != bench ]; then
  for op in fv4 7pt; do
    run "${op}_cpu" 1 4 8 --operator $op --gpu-threshold -1 $Q &&
      run "${op}_gpu" 1 4 8 --operator $op $Q &&
      { grep -q 'GPU (CUDA stream)' "$LOG/${op}_gpu.log" || ko "$op: no level ran on the GPU"; } &&
      same "${op}_cpu" "${op}_gpu" "$op 32^3: GPU levels = CPU" &&
      richardson "${op}_gpu" "$op 32^3, GPU levels"
    if run "${op}_allgpu" 1 4 8 --operator $op --gpu-threshold 0 $Q; then
      a=$(rel "${op}_cpu") b=$(rel "${op}_allgpu")
      if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * a) }'; then
        ok "$op 32^3: all levels on the GPU: rel=$b (CPU $a)"
      else ko "$op 32^3: all levels on the GPU: rel=$b, CPU $a"; fi
    fi
    for be in mpi acc streamcomm ki; do run "${op}_n2_$be" 2 4 4 --operator $op --backend $be $Q; done
    # (-sx with the library's statistics: their messages must take the
    # stream-executed path -- hpgmg makes its GPU current after MPI_Init, and
    # until 2026-11-28 that left the path off for the whole run)
    for be in acc-sx streamcomm-sx; do
      MPIX_ACC_STATS=1 run "${op}_n2_$be" 2 4 4 --operator $op --backend $be $Q &&
        if grep -q 'stats: path sx: sent [1-9]' "$LOG/${op}_n2_$be.log"; then ok "$op, $RANKS: $be: messages on the stream-executed path"
        else ko "$op, $RANKS: $be: no message took the stream-executed path"; grep -m3 -E 'path sx|SX' "$LOG/${op}_n2_$be.log" | sed 's/^/    /'; fi
    done
    same "${op}_n2_mpi" "${op}_n2_acc" "$op, $RANKS: acc = mpi"
    same "${op}_n2_mpi" "${op}_n2_streamcomm" "$op, $RANKS: streamcomm = mpi"
    # -sx: the level communicators carry the MPI-4 no-wildcard assertions, so
    # messages between the two GPUs may take the stream-executed path
    same "${op}_n2_mpi" "${op}_n2_acc-sx" "$op, $RANKS: acc-sx = mpi"
    same "${op}_n2_mpi" "${op}_n2_streamcomm-sx" "$op, $RANKS: streamcomm-sx = mpi"
    # ki: the GPU levels' kernels send and receive (partitioned requests)
    if grep -q 'GPU (CUDA stream), ki backend' "$LOG/${op}_n2_ki.log" 2>/dev/null; then
      same "${op}_n2_mpi" "${op}_n2_ki" "$op, $RANKS: ki = mpi"
    else ko "$op, $RANKS: ki: no level ran the ki backend"; fi
    same "${op}_cpu" "${op}_n2_mpi" "$op: 2 ranks on GPUs = 1 rank on the CPU"
    # --graph: each GPU level's V-cycle legs captured once as CUDA graphs
    # (their messages captured) and launched from then on; and with every
    # level on the GPUs (the coarse ones held by one rank: the ranks' legs
    # differ, session 22's two ki defects)
    for be in acc streamcomm acc-sx ki; do
      if run "${op}_n2_${be}_graph" 2 4 4 --operator $op --backend $be --graph $Q; then
        if grep -qE 'graphs \(--graph\) +[1-9]' "$LOG/${op}_n2_${be}_graph.log"; then
          same "${op}_n2_mpi" "${op}_n2_${be}_graph" "$op, $RANKS: $be --graph = mpi"
        else ko "$op, $RANKS: $be --graph launched no graph"; fi
      fi
    done
    if run "${op}_thr0_mpi" 2 4 4 --operator $op --gpu-threshold 0 $Q; then
      for be in acc ki; do
        run "${op}_thr0_${be}_graph" 2 4 4 --operator $op --gpu-threshold 0 --backend $be --graph $Q &&
          same "${op}_thr0_mpi" "${op}_thr0_${be}_graph" "$op, $RANKS, every level on the GPUs: $be --graph = mpi"
      done
    fi
  done
  # 64^3 (8 boxes of 16^3 per rank), stream-ordered on the GPUs: HPGMG's published
  # one-F-cycle residual and the Richardson order (h, 2h, 4h all solved)
  if run fv4_64_n2_acc 2 5 8 --backend acc $Q; then
    r=$(rel fv4_64_n2_acc)
    if awk -v r="$r" 'BEGIN { exit !(r > 7.13e-5 && r < 7.21e-5) }'; then
      ok "fv4 64^3, $RANKS, acc: rel=$r matches HPGMG's published 7.17e-05"
    else ko "fv4 64^3, $RANKS, acc: rel=$r, HPGMG publishes 7.17e-05"; fi
    richardson fv4_64_n2_acc "fv4 64^3, $RANKS, acc"
  fi
  if command -v compute-sanitizer >/dev/null 2>&1; then
    if timeout 600 "$MPIEXEC" $LAUNCH -n 1 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$BIN" 4 1 --gpu-threshold 0 $Q \
      >"$LOG/memcheck.log" 2>&1; then ok "compute-sanitizer memcheck: no errors (fv4 16^3, all levels on the GPU)"
    else ko "compute-sanitizer memcheck (memcheck.log)"; grep -m5 -E 'Invalid|ERROR' "$LOG/memcheck.log" | sed 's/^/    /'; fi
    # the ki backend's kernels (2 ranks, every level on the GPU: each level's
    # programs are ki), memcheck and racecheck; then the same in graphs
    for tool in memcheck racecheck; do
      if timeout 600 "$MPIEXEC" $LAUNCH -n 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 "$BIN" 4 4 --gpu-threshold 0 --backend ki --graph $Q \
        >"$LOG/ki-graph-$tool.log" 2>&1 && grep -qE 'graphs \(--graph\) +[1-9]' "$LOG/ki-graph-$tool.log"; then
        ok "compute-sanitizer $tool: no errors (ki --graph, 2 ranks, all levels on the GPUs)"
      else ko "compute-sanitizer $tool, ki --graph (ki-graph-$tool.log)"; grep -m5 -E 'Invalid|ERROR|hazard|Race' "$LOG/ki-graph-$tool.log" | sed 's/^/    /'; fi
    done
    for tool in memcheck racecheck; do
      if timeout 600 "$MPIEXEC" $LAUNCH -n 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 "$BIN" 4 4 --gpu-threshold 0 --backend ki $Q \
        >"$LOG/ki-$tool.log" 2>&1 && grep -q 'ki backend' "$LOG/ki-$tool.log"; then
        ok "compute-sanitizer $tool: no errors (ki backend, 2 ranks, all levels on the GPUs)"
      else ko "compute-sanitizer $tool, ki backend (ki-$tool.log)"; grep -m5 -E 'Invalid|ERROR|hazard|Race' "$LOG/ki-$tool.log" | sed 's/^/    /'; fi
    done
  fi
fi

if [ "$MODE" != check ]; then
  say ""
  say "=== MGSolve time on GPU levels, 2 ranks ($RANKS), 8 boxes per rank, fv4, median of $REPS runs"
  printf '%-10s %-14s %14s %14s %14s  %s\n' "box" "backend" "GPU levels [s]" "MGSolve [s]" "GPU levels" "rel" | tee -a "$LOG/gpu-check.log"
  # NAME+bound: the same with --skip-exchange (GPU levels skip their messages:
  # the time without communication, a bound; its rel is not a result)
  # the repetitions are interleaved (rep 1 of every backend, then rep 2, ...):
  # a drift of the machine's speed during the bench touches every row alike
  BES=${HPGMG_BENCH_BACKENDS:-mpi acc streamcomm acc-sx streamcomm-sx ki ki+graph mpi+bound acc-sx+bound}
  med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  for l in $SIZES; do
    declare -A TS=() MS=() NL=() RL=()
    for r in $(seq 1 "$REPS"); do
      for be in $BES; do
        # NAME@LABEL: backend NAME of the binary in $HPGMG_BIN_LABEL (an A/B
        # of two builds in one run)
        bin=$BIN name=$be
        case "$be" in
        *@*)
          v="HPGMG_BIN_${be##*@}"
          bin=${!v:-}
          name=${be%@*}
          [ -x "$bin" ] || { ko "$be: \$$v is not an executable"; continue; }
          ;;
        esac
        # NAME[-nopdl|-rN][+bound][+graph]
        base=${name%%+*}
        case "$base" in
        *-nopdl) bargs="--backend ${base%-nopdl} --no-pdl" ;;
        *-r[0-9]*) bargs="--backend ${base%-r*} --ki-runs ${base##*-r}" ;;
        *) bargs="--backend $base" ;;
        esac
        case "$name" in *+bound*) bargs="$bargs --skip-exchange" ;; esac
        case "$name" in *+graph*) bargs="$bargs --graph" ;; esac
        obin=$BIN BIN=$bin
        run "bench_${l}_${be}_$r" 2 $l 8 $bargs --min-solves 10 --min-time 1 --no-richardson
        rc=$? BIN=$obin
        [ $rc = 0 ] || continue
        f="$LOG/bench_${l}_${be}_$r.log"
        # the first Timing Breakdown is the h (finest) benchmark
        TS[$be]+=" $(grep -m1 'MGSolve on GPU levels' "$f" | awk '{print $5}')"
        MS[$be]+=" $(grep -m1 'Total time in MGSolve' "$f" | awk '{print $5}')"
        NL[$be]=$(grep -m1 'MGSolve on GPU levels' "$f" | sed 's/.*(\([0-9]* levels*\)).*/\1/')
        RL[$be]=$(grep -m1 'f-cycle' "$f" | sed 's/.*rel=\([^ ]*\).*/\1/')
      done
    done
    for be in $BES; do
      # shellcheck disable=SC2086 # the runs' times, one word each
      printf '%-10s %-14s %14s %14s %14s  %s\n' "$((1 << l))^3" "$be" "$(med ${TS[$be]:-})" "$(med ${MS[$be]:-})" "${NL[$be]:-?}" "${RL[$be]:-?}" |
        tee -a "$LOG/gpu-check.log"
    done
    unset TS MS NL RL
  done
fi
finish
