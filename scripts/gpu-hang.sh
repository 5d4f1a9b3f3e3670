#!/usr/bin/env bash
# gpu-hang.sh - run an MPI program on 2 ranks with a watchdog: after
# AFTER seconds (default 20) every thread of every rank is listed with its
# backtrace (cuda-gdb attaches; the machine has no gdb) and the program is
# killed. For diagnosing hangs on the GPU machine.
#
#   scripts/gpu-hang.sh [-a AFTER] [-n NP] -- program args...
# Needs the environment of scripts/gpu-env.sh (sourced here).
set -u
AFTER=20 NP=2
while [ $# -gt 0 ]; do
    case "$1" in
    -a) AFTER=$2; shift 2 ;;
    -n) NP=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
. "$(dirname "${BASH_SOURCE[0]}")/gpu-env.sh" || exit 1
"$MPIEXEC" $LAUNCH -n "$NP" "$@" &
launcher=$!
for _ in $(seq 1 "$AFTER"); do
    sleep 1
    kill -0 $launcher 2>/dev/null || { wait $launcher; echo "gpu-hang: exited with $? before the watchdog"; exit 0; }
done
prog=$(basename "$1")
echo "gpu-hang: still running after ${AFTER}s: stacks of every '$prog' process"
for pid in $(pgrep -x "$prog" | head -n 8); do
    echo "----- pid $pid"
    for t in /proc/"$pid"/task/*; do
        printf '  tid %s %s wchan=%s\n' "${t##*/}" "$(cat "$t/comm")" "$(cat "$t/wchan" 2>/dev/null)"
    done
    if command -v cuda-gdb >/dev/null 2>&1; then
        timeout -k 5 40 cuda-gdb -q -p "$pid" -batch -ex "set pagination off" \
            -ex "thread apply all bt 25" 2>&1 | grep -E '^Thread|^#' | head -n 300
    fi
done
kill -9 $launcher 2>/dev/null
pkill -9 -x "$prog" 2>/dev/null
wait 2>/dev/null
echo "gpu-hang: killed"
exit 1
