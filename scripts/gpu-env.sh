#!/usr/bin/env bash
# gpu-env.sh - sourced on a GPU machine: unpack .gpu-runtime (assembled by
# scripts/gpu-runtime.sh) and export what running mpix-acc programs needs:
# PATH, LD_LIBRARY_PATH (the wheel's UCX first: one libucp per process),
# UCX_MODULE_DIR, HWLOC_PLUGINS_PATH; sets MPIEXEC and LAUNCH (hydra options
# that start 2 processes here).
#
#   . scripts/gpu-env.sh && "$MPIEXEC" $LAUNCH -n 2 build-gpu/test/gpu/ring
_ge_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_ge_rtdir="$_ge_root/.gpu-runtime"
if [ ! -f "$_ge_rtdir/runtime.tar.xz" ]; then
    echo "gpu-env: $_ge_rtdir/runtime.tar.xz missing (run scripts/gpu-runtime.sh, carry .gpu-runtime)" >&2
    return 1 2>/dev/null || exit 1
fi
GPU_RT="$_ge_rtdir/unpacked"
_ge_want=$(cat "$_ge_rtdir/runtime.sha256" 2>/dev/null || sha256sum "$_ge_rtdir/runtime.tar.xz" | cut -d' ' -f1)
if [ "$(cat "$GPU_RT/.stamp" 2>/dev/null)" != "$_ge_want" ]; then
    rm -rf "$GPU_RT" && mkdir -p "$GPU_RT"
    if command -v xz >/dev/null 2>&1; then
        tar -C "$GPU_RT" -xJf "$_ge_rtdir/runtime.tar.xz"
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$_ge_rtdir/runtime.tar.xz" "$GPU_RT"
    fi || { echo "gpu-env: cannot unpack the runtime" >&2; return 1 2>/dev/null || exit 1; }
    echo "$_ge_want" >"$GPU_RT/.stamp"
fi
_ge_ma=x86_64-linux-gnu
_ge_r="$GPU_RT/root"
_ge_u="$GPU_RT/ucx"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$GPU_RT/bin:$_ge_r/usr/bin:$CUDA_HOME/bin:$PATH"
export LD_LIBRARY_PATH="$_ge_u/lib:$_ge_r/usr/lib/$_ge_ma:$_ge_r/lib/$_ge_ma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$_ge_u/lib/ucx"
export HWLOC_PLUGINS_PATH="$_ge_r/usr/lib/$_ge_ma/hwloc"
export UCX_WARN_UNUSED_ENV_VARS=n
MPIEXEC="$_ge_r/usr/bin/mpiexec.hydra"
# gpu_launch_opts MPIEXEC: the first hydra options that start 2 processes
# here (printed; nothing when none does). Also for another MPI's hydra
# (scripts/gpu-test.sh's CUDA-aware MPICH).
gpu_launch_opts() {
    local o
    for o in "-launcher fork" "-launcher fork -iface lo" "-launcher fork -localhost 127.0.0.1"; do
        if timeout 30 "$1" $o -n 2 true >/dev/null 2>&1; then
            echo "$o"
            return 0
        fi
    done
    return 1
}
LAUNCH=$(gpu_launch_opts "$MPIEXEC")
[ -n "$LAUNCH" ] || echo "gpu-env: mpiexec.hydra cannot start 2 processes here" >&2
unset _ge_root _ge_rtdir _ge_want _ge_ma _ge_r _ge_u
