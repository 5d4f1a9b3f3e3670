#!/usr/bin/env bash
# test/interpose/ipc_binding.sh - UCX's cuda module must call OUR
# cuIpcOpenMemHandle_v2 and cuIpcCloseMemHandle (src/accel/cuda_ipc.c), not the
# driver's, so that peers' buffers are mapped and unmapped in the library's
# own context (unmapping in the application's context deadlocks while its
# streams wait for the progress thread).
#
#   test/interpose/ipc_binding.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
#
# No GPU is needed: the CUDA toolkit's stub libcuda.so and a generated stand-in
# for libnvidia-ml.so.1 let UCX load libuct_cuda; with LD_BIND_NOW=1 the
# dynamic linker resolves every symbol at load time and LD_DEBUG=bindings
# shows where libuct_cuda's references go. Checks: libmpixacc.so exports
# both functions and nothing else outside MPI_*/MPIX_*, and both bindings go
# to libmpixacc for a relinked program (test/mpi/ring, 2 ranks).
# Builds without CUDA have nothing to check: they print so and pass only if
# the symbol is NOT exported there.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
lib=$builddir/src/.libs/libmpixacc.so
prog=$builddir/test/mpi/ring
fail() { echo "[ipc_binding] FAIL: $*"; exit 1; }
[ -f "$lib" ] && [ -x "$prog" ] || fail "not built: $lib, $prog"
exports=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ {print $3}' | grep -v -E '^(P?MPIX?_|MPIX_ACC_)' | sed 's/@.*//' | sort -u | tr '\n' ' ')
if ! grep -q '^#define MPIXACC_HAVE_CUDA 1' "$builddir/config.h"; then
    [ -z "$exports" ] || fail "a build without CUDA exports: $exports"
    echo "[ipc_binding] PASS: build without CUDA, nothing exported besides MPI_*/MPIX_*"
    exit 0
fi
[ "$exports" = "cuIpcCloseMemHandle cuIpcOpenMemHandle_v2 " ] ||
    fail "exported besides MPI_*/MPIX_*: '$exports' (expected cuIpcCloseMemHandle cuIpcOpenMemHandle_v2)"
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
cudahome=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
stub=""
for d in "$cudahome/lib64/stubs" "$cudahome/targets/x86_64-linux/lib/stubs" /usr/local/cuda/lib64/stubs; do
    [ -f "$d/libcuda.so" ] && { stub=$d/libcuda.so; break; }
done
[ -n "$stub" ] || fail "no stub libcuda.so in the CUDA toolkit ($cudahome)"
ucxmod=${UCX_MODULE_DIR:-}
[ -n "$ucxmod" ] && [ -f "$ucxmod/libuct_cuda.so.0" ] || fail "UCX's cuda module not found (UCX_MODULE_DIR=$ucxmod)"
tmp=$(mktemp -d /tmp/mpixacc-ipcbind.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ln -s "$stub" "$tmp/libcuda.so.1"
# a stand-in for every NVML function the module links (never called here)
nm -D "$ucxmod/libuct_cuda.so.0" | awk '$1 == "U" && $2 ~ /^nvml/ {sub(/@.*/, "", $2); print "int " $2 "(void) { return 999; }"}' | sort -u >"$tmp/nvml.c"
${CC:-cc} -shared -fPIC -o "$tmp/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 "$tmp/nvml.c" || fail "cannot build the NVML stand-in"
LD_LIBRARY_PATH="$tmp:${LD_LIBRARY_PATH:-}" LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" \
    timeout 120 mpiexec -n 2 "$prog" >"$tmp/out" 2>&1 || fail "ring did not run: $(tail -3 "$tmp/out")"
res=""
for sym in cuIpcOpenMemHandle_v2 cuIpcCloseMemHandle; do
    b=$(cat "$tmp"/ld.* 2>/dev/null | grep "binding file .*libuct_cuda.so.0 .*\`$sym'" | head -1)
    [ -n "$b" ] || fail "libuct_cuda.so.0 was not loaded or does not reference $sym"
    case "$b" in
    *"to $builddir/src/.libs/libmpixacc.so"* | *libmpixacc.so*) ;;
    *) fail "UCX's $sym binds elsewhere: $b" ;;
    esac
    res="$res; ${b##*binding file }"
done
echo "[ipc_binding] PASS: ${res#; }"
