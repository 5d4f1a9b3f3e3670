#!/bin/sh
# hpgmg/tests.sh - CI checks of hpgmg-fv (about 2-3 minutes on 2 cores).
#
#   hpgmg/tests.sh [path/to/hpgmg-fv]        (default: $HPGMG_FV, else hpgmg/hpgmg-fv)
#
# Small cases (log2 box 4; 1-8 boxes per rank; 1, 2 and 4 ranks) for both
# operators:
#   - residual reduction of one F-cycle, and V-cycle convergence to 1e-10
#   - Richardson order within the band of its grid size (hpgmg/README.md)
#   - 7-point: order of the true error against the manufactured solution
#   - fv4 64^3: the residual after one F-cycle equals HPGMG's published value
#   - determinism: repeated solves identical; 1, 2 and 4 ranks identical for
#     the same box layout (8 boxes of 16^3)
#   - backend equivalence: acc, streamcomm, acc-sx and streamcomm-sx give the
#     mpi backend's residual norms (required: relative difference <= 1e-12; the
#     script reports whether they are bit-identical, which they should be);
#     acc-sx (MPI-4 no-wildcard assertions on the level communicators) moves
#     messages on mpix-acc's stream-executed path (host streams here), and
#     --skip-exchange changes nothing without GPU levels; ki (kernel-initiated
#     on GPU levels) runs acc on every level here and equals mpi
#   - --graph (acc, streamcomm, acc-sx; 2 and 4 ranks): the V-cycle legs
#     captured as host graphs and launched give mpi's residuals bit for bit;
#     --graph with mpi is refused, and ki's with --ki-runs below 8
#   - streamcomm enqueues its norms and dot products with their MPI_Allreduce:
#     host waits per solve <= reductions on the streams per solve
# The acc/streamcomm checks run when the binary has them (`hpgmg-fv
# --features`); otherwise they are reported as FAIL unless HPGMG_MPI_ONLY=1.
# Each check prints PASS/FAIL; the last line is "N passed, N failed".
# Exit status 0 only if nothing failed.

BIN=${1:-${HPGMG_FV:-${MPIXACC_BUILDDIR:+$MPIXACC_BUILDDIR/}hpgmg/hpgmg-fv}}
MPIEXEC=${MPIEXEC:-mpiexec}
# one run's time limit: scripts/run-tests.sh passes RUN_TIMEOUT (a sixth of
# the script's own limit, so a hung run leaves time for the rest and its
# report); the runs take 1-7 s on 2 cores
TMO=${HPGMG_TIMEOUT:-${RUN_TIMEOUT:-300}}
here=$(cd "$(dirname "$0")" && pwd)
# tools' mpixacc_hangdump.so, preloaded into the ranks: a rank still running
# 10 s before TMO prints every thread's stack into its log (with a sanitizer
# runtime first in the list when the library was built with one)
HANGDUMP=${HPGMG_HANGDUMP-}
if [ -z "$HANGDUMP" ]; then
  hd=$(dirname "$(dirname "$BIN")")/tools/.libs/mpixacc_hangdump.so
  [ -f "$hd" ] && HANGDUMP=$hd
fi
if [ -n "$HANGDUMP" ] && [ "$TMO" -gt 20 ]; then
  asan=$(ldd "$HANGDUMP" 2>/dev/null | awk '/libasan/ { print $3; exit }')
  HANGDUMP="${asan:+$asan }$HANGDUMP"
else
  HANGDUMP=
fi

# one libucp per process (MPICH and mpix-acc), as scripts/mpixacc-env.sh sets up
if [ -f "$here/../scripts/mpixacc-env.sh" ]; then
  . "$here/../scripts/mpixacc-env.sh"
fi

pass=0
fail=0
failures=""
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
ko() {
  echo "FAIL: $*"
  fail=$((fail + 1))
  failures="$failures
FAIL: $*"
}
check() { if [ "$1" = 0 ]; then shift; ok "$@"; else shift; ko "$@"; fi; }

if ! features=$("$BIN" --features 2>/dev/null); then
  ko "cannot run $BIN --features"
  echo "$pass passed, $fail failed"
  exit 1
fi
echo "hpgmg-fv: $BIN ($features)"
case "$features" in
  *acc*) backends="acc streamcomm acc-sx streamcomm-sx" ;;
  *) backends="" ;;
esac

out=$(mktemp -d "${TMPDIR:-/tmp}/hpgmg-tests.XXXXXX")
# stacks: hangdump's report, one line per thread -- "pid P thread T (name):
# innermost < ... < outermost" by function (addr2line names the static ones;
# the watchdog's own frames and the signal trampoline left out)
stacks() {
  cur=""
  while IFS= read -r line; do
    case "$line" in
      "[hangdump] pid "*" thread "*)
        case "$cur" in *:) ;; ?*) echo "$cur" ;; esac
        cur=$(echo "$line" | sed 's/^\[hangdump\] //; s/ backtrace.*$//'):
        continue ;;
      "[hangdump]"*) continue ;;
    esac
    [ -n "$cur" ] || continue
    mod=${line%%(*}
    fn=${line#*(}
    fn=${fn%%)*}
    case "$fn" in
      +0x*)
        fn=""
        if [ -f "$mod" ] && command -v addr2line >/dev/null 2>&1; then
          fn=$(addr2line -f -e "$mod" "${line#*(+}" 2>/dev/null | head -n 1)
          fn=${fn%%)*}
        fi ;;
      *) fn=${fn%%+*} ;;
    esac
    case "$fn" in "" | "??") fn="$(basename "$mod")?" ;; sd_* | hangdump_* | __restore_rt | start_thread | clone3 | __libc_start_* | _start) continue ;; esac
    cur="$cur $fn <"
  done
  case "$cur" in *:) ;; ?*) echo "$cur" ;; esac
  return 0
}
# run NAME RANKS ARGS...: the log is $out/NAME.log
run() {
  name=$1
  n=$2
  shift 2
  # (without the watchdog the preload list stays as it is and the limit is unread)
  timeout "$TMO" "$MPIEXEC" -n "$n" env LD_PRELOAD="${HANGDUMP:-${LD_PRELOAD-}}" \
    MPIX_ACC_HANGDUMP_AFTER=$((TMO - 10)) \
    "$BIN" "$@" --check --min-solves 1 --min-time 0 >"$out/$name.log" 2>&1
  rc=$?
  echo "$rc" >"$out/$name.rc"
  if [ "$rc" != 0 ]; then
    ko "$name: exit status $rc (log: $out/$name.log)"
    # a hang: every rank's stacks (hangdump), else the log's end
    if grep -q '^\[hangdump\]' "$out/$name.log"; then
      grep -v '^\[mpix-acc' "$out/$name.log" | sed -n '/^\[hangdump\]/,$p' | stacks | sed 's/ <$//' 
    else
      tail -5 "$out/$name.log"
    fi | sed 's/^/    /' | tee "$out/$name.why"
    failures="$failures
$(cat "$out/$name.why")"
    return 1
  fi
  return 0
}
# value KEY NAME [LINE-PATTERN]: the value of KEY= on the first CHECK line matching
value() { grep "^CHECK ${3:-}" "$out/$2.log" | head -1 | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
# results NAME: the solve and error lines, which must agree across runs
results() { grep -E '^CHECK (solve|error|exact)' "$out/$1.log"; }
# fcmp A OP B (floating point, via awk)
fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; }

# compare two runs: bit-identical, or within 1e-12 relative
same() {
  a=$1
  b=$2
  what=$3
  if results "$a" >"$out/$a.res" && results "$b" >"$out/$b.res" && [ -s "$out/$a.res" ] &&
    cmp -s "$out/$a.res" "$out/$b.res"; then
    ok "$what (bit-identical residual norms and errors)"
    return
  fi
  # not bit-identical: compare the decimal values (rel=, errors) field by field
  worst=$(paste "$out/$a.res" "$out/$b.res" | awk '{
      n = 0
      for (i = 1; i <= NF; i++) {
        t = $i; sub(/^rel=/, "", t)
        if (t ~ /^-?[0-9][.0-9]*(e[-+]?[0-9]+)?$/ && t ~ /[.e]/) v[++n] = t
      }
      h = n / 2
      for (i = 1; i <= h; i++) {
        d = v[i] - v[i + h]; if (d < 0) d = -d; s = v[i] < 0 ? -v[i] : v[i]
        r = s > 0 ? d / s : d; if (r > m) m = r
      } } END { printf "%.3g", m + 0 }')
  if [ -s "$out/$a.res" ] && [ "$(wc -l <"$out/$a.res")" = "$(wc -l <"$out/$b.res")" ] && fcmp "$worst" "<=" 1e-12; then
    ok "$what (not bit-identical; max relative difference $worst <= 1e-12)"
  else
    ko "$what (max relative difference $worst; see $out/$a.log and $out/$b.log)"
  fi
}

for op in fv4 7pt; do
  # ---- 1 rank, 32^3 from 8 x 16^3 boxes: reduction, order, repeatability
  if run "${op}_n1_mpi" 1 4 8 --operator "$op"; then
    r=$(value rel "${op}_n1_mpi" solve=0)
    # one F-cycle: fv4 9.6e-4, 7-point 1.2e-2 (HPGMG's 7-point F-cycle uses
    # piecewise-constant / linear interpolation)
    bound=2e-3
    [ "$op" = 7pt ] && bound=2e-2
    fcmp "$r" "<" "$bound"
    check $? "$op 32^3: one F-cycle reduces the residual to rel=$r < $bound"
    o=$(value order "${op}_n1_mpi" error)
    [ "$(value band_ok "${op}_n1_mpi" error)" = 1 ]
    check $? "$op 32^3: Richardson order $o within its band"
    if [ "$op" = 7pt ]; then
      [ "$(value band_ok "${op}_n1_mpi" exact_order)" = 1 ]
      check $? "7pt 32^3: order of ||u-u_exact|| $(value exact_order 7pt_n1_mpi exact_order) within its band"
    fi
    n_rep=$(grep -c '^CHECK repeat .*identical=1' "$out/${op}_n1_mpi.log")
    [ "$n_rep" = 3 ]
    check $? "$op: repeated solves give identical residual norms (3 sizes)"
  fi

  # ---- V-cycles to 1e-10
  if run "${op}_n1_vcycle" 1 4 8 --operator "$op" --cycle v; then
    r=$(value rel "${op}_n1_vcycle" solve=0)
    c=$(value cycles "${op}_n1_vcycle" solve=0)
    maxc=8
    [ "$op" = 7pt ] && maxc=14
    fcmp "$r" "<" 1e-10 && [ "$c" -le "$maxc" ]
    check $? "$op 32^3: V-cycles converge to rel=$r < 1e-10 in $c <= $maxc cycles"
    [ "$(value band_ok "${op}_n1_vcycle" error)" = 1 ]
    check $? "$op 32^3 V-cycle: Richardson order $(value order "${op}_n1_vcycle" error) within its band"
  fi

  # ---- Chebyshev smoother
  if run "${op}_n1_cheby" 1 4 8 --operator "$op" --smoother cheby; then
    r=$(value rel "${op}_n1_cheby" solve=0)
    bound=2e-3
    [ "$op" = 7pt ] && bound=3e-2
    fcmp "$r" "<" "$bound" && [ "$(value band_ok "${op}_n1_cheby" error)" = 1 ]
    check $? "$op 32^3 Chebyshev: one F-cycle gives rel=$r < $bound, order within band"
  fi

  # ---- same box layout on 2 and 4 ranks: bit-identical to 1 rank
  run "${op}_n2_mpi" 2 4 4 --operator "$op" && same "${op}_n1_mpi" "${op}_n2_mpi" "$op: 2 ranks = 1 rank"
  run "${op}_n4_mpi" 4 4 2 --operator "$op" && same "${op}_n1_mpi" "${op}_n4_mpi" "$op: 4 ranks = 1 rank"

  # ---- backend equivalence
  if [ -n "$backends" ]; then
    for be in $backends; do
      for n in 1 2 4; do
        t=$((8 / n))
        run "${op}_n${n}_${be}" "$n" 4 "$t" --operator "$op" --backend "$be" &&
          same "${op}_n${n}_mpi" "${op}_n${n}_${be}" "$op: $be = mpi on $n rank(s)"
      done
    done
    # the -sx backends used the stream-executed path (MPIX_ACC_STATS=1: every
    # rank's "path sx" line shows messages sent and received)
    export MPIX_ACC_STATS=1
    if run "${op}_n2_acc-sx_stats" 2 4 4 --operator "$op" --backend acc-sx; then
      nsx=$(grep -cE 'stats: path sx: sent [1-9][0-9]* messages [0-9]+ bytes; received [1-9]' "$out/${op}_n2_acc-sx_stats.log")
      [ "$nsx" = 2 ]
      check $? "$op: acc-sx moved messages on the stream-executed path ($nsx of 2 ranks)"
    fi
    unset MPIX_ACC_STATS
    # streamcomm: norms and dots are enqueued with their MPI_Allreduce, and
    # the host waits only to read one (every level on host streams here): per
    # solve, host waits <= reductions on the streams, which are > 0
    lg="$out/${op}_n2_streamcomm.log"
    if [ -f "$lg" ]; then
      res=$(awk '/host waits on streams/ { w[++nw] = $5 }
                 /reductions on the streams/ { r[++nr] = $5 }
                 END { bad = (nw == 0 || nw != nr); s = ""
                       for (i = 1; i <= nw; i++) { s = s " " w[i] "/" r[i]; if (r[i] <= 0 || w[i] > r[i]) bad = 1 }
                       print bad ? "bad" s : "ok" s }' "$lg")
      case "$res" in ok*) rc=0 ;; *) rc=1 ;; esac
      detail=${res#ok}
      detail=${detail#bad}
      check $rc "$op: streamcomm waits on its streams only to read its reductions (waits/reductions per solve:$detail)"
    fi
    # ki: the GPU levels' kernels send; without GPU levels every level runs
    # acc (host streams here), which the execution plan says
    if run "${op}_n2_ki" 2 4 4 --operator "$op" --backend ki; then
      same "${op}_n2_mpi" "${op}_n2_ki" "$op: ki without GPU levels = mpi on 2 ranks"
      ! grep -q ', ki backend' "$out/${op}_n2_ki.log" && grep -q ', acc backend' "$out/${op}_n2_ki.log"
      check $? "$op: ki without GPU levels runs its levels with acc"
    fi
    # --graph: each level's V-cycle legs captured once as host graphs (host
    # streams here; CUDA graphs on GPU levels) and launched from then on --
    # bit-identical to mpi, with graphs launched in the timed solves
    for gc in acc:2 acc:4 streamcomm:2 acc-sx:2; do
      be=${gc%:*} n=${gc#*:} t=$((8 / ${gc#*:}))
      if run "${op}_n${n}_${be}_graph" "$n" 4 "$t" --operator "$op" --backend "$be" --graph; then
        same "${op}_n${n}_mpi" "${op}_n${n}_${be}_graph" "$op: $be --graph = mpi on $n ranks"
        gl=$(awk '/graphs \(--graph\)/ { print $3; exit }' "$out/${op}_n${n}_${be}_graph.log")
        fcmp "${gl:-0}" ">" 0
        check $? "$op: $be --graph launched its legs as graphs (${gl:-no} launches per solve)"
      fi
    done
    timeout "$TMO" "$BIN" 4 1 --graph >"$out/${op}_graph_mpi.log" 2>&1
    rc=$?
    [ "$rc" != 0 ] && grep -q -- '--graph needs a stream-ordered backend' "$out/${op}_graph_mpi.log"
    check $? "$op: --graph with the mpi backend is refused (exit status $rc)"
    timeout "$TMO" "$BIN" 4 1 --backend ki --graph --ki-runs 7 >"$out/${op}_graph_ki7.log" 2>&1
    rc=$?
    [ "$rc" != 0 ] && grep -q -- '--graph with --backend ki needs --ki-runs >= 8' "$out/${op}_graph_ki7.log"
    check $? "$op: --graph with ki and --ki-runs 7 is refused (exit status $rc)"
    # --skip-exchange touches GPU levels only: none here, so nothing changes
    run "${op}_n2_acc_skip" 2 4 4 --operator "$op" --backend acc --skip-exchange &&
      same "${op}_n2_mpi" "${op}_n2_acc_skip" "$op: --skip-exchange without GPU levels = mpi"
  elif [ "${HPGMG_MPI_ONLY:-0}" = 1 ]; then
    echo "SKIP: $op backend equivalence (mpi-only build, HPGMG_MPI_ONLY=1)"
  else
    ko "$op: backend equivalence not tested: $BIN has no acc/streamcomm backends"
  fi
done

# ---- fv4 64^3: HPGMG's published residual after one F-cycle (rel 7.17e-05)
if run fv4_64_n1_mpi 1 5 8; then
  r=$(value rel fv4_64_n1_mpi solve=0)
  fcmp "$r" ">" 7.13e-5 && fcmp "$r" "<" 7.21e-5
  check $? "fv4 64^3: rel=$r matches HPGMG's published 7.17e-05"
  [ "$(value band_ok fv4_64_n1_mpi error)" = 1 ]
  check $? "fv4 64^3: Richardson order $(value order fv4_64_n1_mpi error) within its band"
fi

echo "logs: $out"
# the failures again, last, where a report that shows the output's end sees them
[ -n "$failures" ] && printf 'failures:%s\n' "$failures"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
