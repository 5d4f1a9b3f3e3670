#!/usr/bin/env bash
# gpu-runtime.sh - assemble, HERE (Debian 12 x86-64), everything a GPU machine
# lacks to build and run mpix-acc's GPU tests, into the git-ignored folder
# <repo>/.gpu-runtime/ (see doc/gpu-testing.md). Then, on the GPU machine:
#     scripts/gpu-test.sh
#
# .gpu-runtime/ afterwards holds:
#   runtime.tar.xz   root/   Debian's MPICH 4.0.2 runtime + headers + hydra
#                            launcher, hwloc 2.9 runtime + headers, their
#                            library dependencies (apt-get download + dpkg -x;
#                            static libraries, docs and Fortran files dropped)
#                    ucx/    UCX 1.22 from the libucx-cu13 wheel: lib/*.so.0
#                            (stripped, plus .so links for linking), lib/ucx/
#                            modules (cma, cuda), the wheel's bundled libcudart
#                            (needed by libucm_cuda), include/, bin/ucx_info
#                    bin/    mpicc / mpicxx wrappers for the carried MPICH
#                    autotools/  the files ./autogen.sh generates (configure,
#                            Makefile.in, ...), for GPU machines without
#                            autotools, with the checksums of their inputs
#                    MANIFEST  what went in (package versions, sizes, date)
#   MANIFEST         a copy, readable without unpacking
#
# Usage: scripts/gpu-runtime.sh            (re-run after changing configure.ac
#                                           or a Makefile.am)
# Environment: UCX_WHEEL_DIR=<dir>   the wheel's libucx/ tree (default: the
#              first of <repo>/.deps-local/ucx and /tmp/whl/x/libucx)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RT="$ROOT/.gpu-runtime"
PKGS=(mpich libmpich12 libmpich-dev libhwloc15 libhwloc-dev libhwloc-plugins libpciaccess0
    libslurm38 libnuma1)
MA=x86_64-linux-gnu

say() { printf 'gpu-runtime: %s\n' "$*"; }
die() {
    printf 'gpu-runtime: ERROR: %s\n' "$*" >&2
    exit 1
}

[ "$(uname -m)" = x86_64 ] || die "must run on x86-64 (the GPU machines are x86-64)"
for t in apt-get dpkg tar xz strip sha256sum; do
    command -v "$t" >/dev/null 2>&1 || die "needs $t"
done

# ---------------------------------------------------------------- UCX source
UCX=""
for d in "${UCX_WHEEL_DIR:-}" "$ROOT/.deps-local/ucx" /tmp/whl/x/libucx; do
    if [ -n "$d" ] && [ -f "$d/lib/libucp.so.0" ] && [ -d "$d/lib/ucx" ]; then
        UCX=$(cd "$d" && pwd)
        break
    fi
done
[ -n "$UCX" ] || die "UCX 1.22 wheel tree not found (run scripts/install-deps.sh or set UCX_WHEEL_DIR)"
UCX_LIBS=$(cd "$UCX/.." && pwd)/libucx_cu13.libs
[ -d "$UCX_LIBS" ] || die "the wheel's bundled libraries are missing: $UCX_LIBS"
say "UCX from $UCX ($(cat "$UCX/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo '?'))"

STAGE=$(mktemp -d /tmp/mpixacc-gpurt.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
S="$STAGE/rt"
mkdir -p "$S/root" "$S/ucx/lib/ucx" "$S/ucx/bin" "$S/bin" "$STAGE/debs"

# ------------------------------------------------------- Debian packages
say "apt-get download ${PKGS[*]}"
(cd "$STAGE/debs" && apt-get download "${PKGS[@]}" >"$STAGE/apt.log" 2>&1) ||
    { cat "$STAGE/apt.log" >&2; die "apt-get download failed (apt-get update first?)"; }
for f in "$STAGE"/debs/*.deb; do
    dpkg -x "$f" "$S/root"
done
# drop what a run does not need
rm -rf "$S/root/usr/share" "$S/root/usr/lib/$MA/fortran" "$S/root/etc"
find "$S/root" \( -name '*.a' -o -name '*.la' -o -name 'libmpichfort*' -o -name 'libmpifort*' \
    -o -name 'mpif*.h' -o -name '*.mod' \) -exec rm -f {} +
# hwloc: keep only the PCI plugin (the others need libraries GPU machines lack)
if [ -d "$S/root/usr/lib/$MA/hwloc" ]; then
    find "$S/root/usr/lib/$MA/hwloc" -type f ! -name 'hwloc_pci.so' -delete
fi
for b in mpiexec.hydra hydra_pmi_proxy; do
    [ -x "$S/root/usr/bin/$b" ] || die "$b missing from the mpich package"
done
[ -f "$S/root/usr/include/$MA/mpich/mpi.h" ] || die "mpi.h missing from libmpich-dev"

# ------------------------------------------------------- UCX 1.22 (wheel)
for f in libucp libucs libuct libucm libucs_signal; do
    cp -L "$UCX/lib/$f.so.0" "$S/ucx/lib/$f.so.0"
    ln -s "$f.so.0" "$S/ucx/lib/$f.so"
done
for f in "$UCX"/lib/ucx/lib*.so.0; do
    case "$(basename "$f")" in
    libucx_perftest*) continue ;; # 10 MB, only for ucx_perftest
    esac
    cp -L "$f" "$S/ucx/lib/ucx/"
done
# .so names for configure's checks (UCX itself loads lib<fw>_<name>.so.0)
for f in "$S"/ucx/lib/ucx/lib*.so.0; do
    ln -s "$(basename "$f")" "${f%.0}"
done
cp -L "$UCX_LIBS"/libcudart-*.so.* "$S/ucx/lib/" # NEEDED by libucm_cuda
if [ -d "$UCX/lib/pkgconfig" ]; then             # configure reads the version there
    cp -r "$UCX/lib/pkgconfig" "$S/ucx/lib/pkgconfig"
fi
cp -L "$UCX/bin/ucx_info" "$S/ucx/bin/"
cp -r "$UCX/include" "$S/ucx/include"
find "$S/ucx" -type f -name '*.so*' -exec strip --strip-unneeded {} +
strip --strip-unneeded "$S/ucx/bin/ucx_info" || true

# ------------------------------------------------------- MPI wrappers
for w in mpicc:gcc:-lmpich mpicxx:g++:"-lmpichcxx -lmpich"; do
    name=${w%%:*}
    rest=${w#*:}
    comp=${rest%%:*}
    libs=${rest#*:}
    cat >"$S/bin/$name" <<EOF
#!/bin/sh
# $name for the carried Debian MPICH 4.0.2 (written by scripts/gpu-runtime.sh).
# Paths are relative to this script, so the runtime can live anywhere.
RT=\$(cd "\$(dirname "\$0")/.." && pwd)
L="\$RT/root/usr/lib/$MA"
inc="-I\$RT/root/usr/include/$MA/mpich"
lib="-L\$L -Wl,-rpath-link,\$L -Wl,-rpath-link,\$RT/ucx/lib $libs"
cc=\${MPICH_${name#mpi}:-$comp}
case "\${1:-}" in
-show) echo "\$cc \$inc \$lib"; exit 0 ;;
-compile_info | -compile-info) echo "\$cc \$inc"; exit 0 ;;
-link_info | -link-info) echo "\$cc \$inc \$lib"; exit 0 ;;
esac
link=1
for a in "\$@"; do
    case "\$a" in -c | -E | -S | -M | -MM) link=0 ;; esac
done
if [ \$link = 1 ]; then exec \$cc \$inc "\$@" \$lib; else exec \$cc \$inc "\$@"; fi
EOF
    chmod +x "$S/bin/$name"
done
sed -i 's/MPICH_cc/MPICH_CC/; s/MPICH_cxx/MPICH_CXX/' "$S/bin/mpicc" "$S/bin/mpicxx"

# ------------------------------------------------------- generated autotools files
if [ -f "$ROOT/configure.ac" ]; then
    say "generating configure (autogen) in a scratch copy of the tree"
    mkdir -p "$STAGE/src"
    (cd "$ROOT" && git ls-files -co --exclude-standard -z) >"$STAGE/srclist"
    (cd "$ROOT" && tar --null -T "$STAGE/srclist" -cf - 2>/dev/null) | (cd "$STAGE/src" && tar xf -)
    # the list of source files, to tell generated files apart
    tr '\0' '\n' <"$STAGE/srclist" | sort >"$STAGE/srcfiles"
    (
        cd "$STAGE/src"
        if [ -x ./autogen.sh ]; then ./autogen.sh; else autoreconf -fi; fi
    ) >"$STAGE/autogen.log" 2>&1 || { cat "$STAGE/autogen.log" >&2; die "autogen failed"; }
    [ -x "$STAGE/src/configure" ] || die "autogen produced no configure"
    (cd "$STAGE/src" && find . -path ./autom4te.cache -prune -o \( -type f -o -type l \) -print |
        sed 's|^\./||' | sort) >"$STAGE/allfiles"
    comm -13 "$STAGE/srcfiles" "$STAGE/allfiles" >"$STAGE/generated"
    mkdir -p "$S/autotools/files"
    (cd "$STAGE/src" && tar -cf - -T "$STAGE/generated") | (cd "$S/autotools/files" && tar xf -)
    cp "$STAGE/generated" "$S/autotools/FILES"
    # checksums of the inputs: gpu-test.sh refuses stale generated files
    (cd "$ROOT" && grep -E '(^|/)(configure\.ac|Makefile\.am|Makefile\.inc|autogen\.sh|mpix_acc\.h|[^/]*\.m4)$' \
        "$STAGE/srcfiles" | grep -v -x -F -f "$STAGE/generated" | tr '\n' '\0' |
        xargs -0 -r sha256sum) >"$S/autotools/INPUTS.sha256"
    say "autotools: $(wc -l <"$STAGE/generated") generated files, $(wc -l <"$S/autotools/INPUTS.sha256") inputs checksummed"
else
    say "no configure.ac yet: the runtime carries no generated configure"
fi

# ------------------------------------------------------- files that would not travel
# The device copy (and CI) only has tracked + untracked-not-ignored files: a
# project header that exists here but is git-ignored breaks the build there.
(cd "$ROOT" && git ls-files -co --exclude-standard) | sort >"$STAGE/visible"
bad=$(cd "$ROOT" && grep -rhoE '^#include "[^"]+"' src tools test mpix 2>/dev/null |
    sed 's/#include "\(.*\)"/\1/' | sort -u | while read -r h; do
    for d in src mpix src/accel test/gpu test/mpi test/unit .; do
        if [ -f "$d/$h" ]; then
            p=$(realpath --relative-to=. "$d/$h")
            [ "$p" = config.h ] || grep -qx -F "$p" "$STAGE/visible" || echo "$p"
            break
        fi
    done
done | sort -u)
if [ -n "$bad" ]; then
    say "WARNING: these headers exist here but git ignores them, so they will NOT reach"
    say "         the GPU machine (nor CI): $bad"
    say "         (fix .gitignore and git add them; the GPU build will fail otherwise)"
fi

# ------------------------------------------------------- check and pack
# every NEEDED library of the carried binaries must resolve inside the
# runtime or to a base system library (glibc, libstdc++, libgcc_s, libudev)
LDP="$S/ucx/lib:$S/root/usr/lib/$MA:$S/root/lib/$MA"
missing=$(for f in "$S/root/usr/bin/mpiexec.hydra" "$S/root/usr/bin/hydra_pmi_proxy" \
    "$S/root/usr/lib/$MA/libmpich.so.12" "$S/ucx/lib/libucp.so.0" "$S/ucx/lib/ucx/"*.so.0; do
    LD_LIBRARY_PATH="$LDP" ldd "$f" 2>/dev/null | awk '/not found/ {print $1}'
done | sort -u | grep -v -E '^(libcuda\.so\.1|libnvidia-ml\.so\.1)$' || true)
[ -z "$missing" ] || die "unresolved libraries: $missing"
glibc_max=$(find "$S" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1 || true)

{
    echo "mpix-acc GPU runtime, assembled $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
    echo "newest glibc symbol needed: ${glibc_max:-?}"
    echo "Debian packages:"
    for f in "$STAGE"/debs/*.deb; do
        echo "  $(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version)"
    done
    echo "UCX: $(cat "$UCX/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo '?') from $UCX"
    echo "files: $(find "$S" -type f | wc -l), unpacked size $(du -sh "$S" | cut -f1)"
} >"$S/MANIFEST"

say "packing (xz)"
rm -rf "$RT"
mkdir -p "$RT"
tar -C "$S" -cf - . | xz -6 -T2 >"$RT/runtime.tar.xz"
cp "$S/MANIFEST" "$RT/MANIFEST"
sha256sum "$RT/runtime.tar.xz" | cut -d' ' -f1 >"$RT/runtime.sha256"
say "done: $RT ($(du -sh "$RT" | cut -f1)); unpacked $(du -sh "$S" | cut -f1)"
cat "$RT/MANIFEST"
