#!/usr/bin/env bash
# install-deps.sh - install everything mpix-acc needs to build and test on
# Debian 12, with no manual steps. Idempotent: a second run changes nothing.
#
#  1. Debian packages (apt-get update + install only when some are missing):
#     MPICH 4.0.2 (ch4:ucx), hwloc, verbs, autotools, compiler, valgrind,
#     cmake, Debian's UCX headers (libucx-dev),
#     and python3 + pip when `python3 -m pip` is not usable.
#  2. UCX 1.22 with CUDA transports and the UCP device API from the PyPI
#     wheel libucx-cu13==1.22.0, unpacked into the project-local prefix
#     <repo>/.deps-local/ucx (the wheel's libucx/ tree) and
#     <repo>/.deps-local/libucx_cu13.libs (the wheel's bundled libraries, kept
#     at the same relative place so the RPATHs of ucx_perftest still work).
#     The pkg-config, libtool and cmake files get the real prefix; byte-equal
#     copies of each shared library (wheels cannot hold symlinks) are turned
#     back into symlinks.
#
# Runs as root (CI) or as a user with sudo. Environment:
#   MPIXACC_UCX_WHEEL=/path/to/libucx_cu13-1.22.0-*.whl   use this file (offline)
#   MPIXACC_SKIP_APT=1                                     do not touch packages
# Run scripts/mpixacc-env.sh (sourced) to use the UCX prefix at run time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UCX_DIST=libucx-cu13
UCX_VERSION=1.22.0
deps="$root/.deps-local"
prefix="$deps/ucx"
cache="$deps/cache"
marker="$prefix/.mpixacc-wheel"
want_marker="$UCX_DIST==$UCX_VERSION"

say() { printf 'install-deps: %s\n' "$*"; }

SUDO=
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    fi
fi

# ---------------------------------------------------------------- packages
# cmake: the install-and-consume test (find_package(mpixacc)); libucx-dev:
# CI's build against Debian's own UCX (scripts/ci-sysucx.sh); iproute2 and
# util-linux (ip, unshare, nsenter): simulated nodes (scripts/simnodes.sh)
packages=(mpich libmpich-dev libhwloc-dev libibverbs-dev autoconf automake libtool
    pkg-config make gcc libc6-dev valgrind coreutils cmake libucx-dev iproute2 util-linux)

pkg_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

if [ "${MPIXACC_SKIP_APT:-0}" = 1 ]; then
    say "MPIXACC_SKIP_APT=1: not checking Debian packages"
elif ! command -v dpkg-query >/dev/null 2>&1; then
    say "no dpkg-query: not a Debian system, not installing packages (need: ${packages[*]})"
else
    need_python=0
    python3 -m pip --version >/dev/null 2>&1 || need_python=1
    if [ $need_python = 1 ]; then
        packages+=(python3 python3-pip ca-certificates)
    fi
    missing=()
    for p in "${packages[@]}"; do
        pkg_installed "$p" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "Debian packages: all ${#packages[@]} present (${packages[*]})"
    else
        if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
            say "ERROR: missing packages (${missing[*]}), not root and no sudo" >&2
            exit 1
        fi
        say "Debian packages missing: ${missing[*]}; running apt-get update + install"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${missing[@]}"
        say "Debian packages installed: ${missing[*]}"
    fi
fi

# ---------------------------------------------------------------- UCX wheel
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$want_marker" ] &&
    [ -e "$prefix/lib/libucp.so.0" ] && [ -f "$prefix/include/ucp/api/ucp.h" ]; then
    say "UCX: $want_marker already in $prefix (version $(cat "$prefix/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo ?))"
    exit 0
fi

mkdir -p "$cache"
wheel=${MPIXACC_UCX_WHEEL:-}
if [ -z "$wheel" ]; then
    # a wheel downloaded earlier is reused (offline re-runs)
    for f in "$cache"/libucx_cu13-"$UCX_VERSION"-*.whl; do
        [ -f "$f" ] && wheel=$f && break
    done
fi
if [ -z "$wheel" ]; then
    say "UCX: downloading $want_marker from PyPI into $cache"
    python3 -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
        -d "$cache" "$want_marker"
    for f in "$cache"/libucx_cu13-"$UCX_VERSION"-*.whl; do
        [ -f "$f" ] && wheel=$f && break
    done
fi
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
    say "ERROR: no wheel for $want_marker (set MPIXACC_UCX_WHEEL=/path/to/wheel)" >&2
    exit 1
fi
say "UCX: unpacking $wheel"

tmp=$(mktemp -d "$deps/unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# zipfile's extract drops the permission bits: restore them from the
# archive (executables in bin/, shared libraries).
python3 - "$wheel" "$tmp" <<'EOF'
import os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        if not (info.filename.startswith("libucx/") or
                info.filename.startswith("libucx_cu13.libs/")):
            continue
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
EOF
[ -f "$tmp/libucx/include/ucp/api/ucp.h" ] || {
    say "ERROR: $wheel has no libucx/include/ucp/api/ucp.h" >&2
    exit 1
}
got=$(cat "$tmp/libucx/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo "?")
if [ "$got" != "$UCX_VERSION" ]; then
    say "ERROR: wheel says version '$got', expected $UCX_VERSION" >&2
    exit 1
fi

# Real prefix into pkg-config, libtool and cmake files. The build prefix is
# read from ucx.pc, not guessed.
old=$(sed -n 's/^prefix *= *//p' "$tmp/libucx/lib/pkgconfig/ucx.pc" | head -n 1)
if [ -n "$old" ]; then
    while IFS= read -r -d '' f; do
        if grep -qF "$old" "$f"; then
            sed -i "s|$old|$prefix|g" "$f"
        fi
    done < <(find "$tmp/libucx/lib" -maxdepth 3 -type f \
        \( -name '*.pc' -o -name '*.la' -o -name '*.cmake' \) -print0)
    say "UCX: pkg-config/libtool/cmake prefix $old -> $prefix"
fi

# libfoo.so and libfoo.so.0 are byte-equal copies of libfoo.so.0.0.0.
nlinks=0
for real in "$tmp"/libucx/lib/lib*.so.*.*.* "$tmp"/libucx/lib/ucx/lib*.so.*.*.*; do
    [ -f "$real" ] || continue
    d=$(dirname "$real")
    b=$(basename "$real")
    base=${b%%.so.*}
    major=${b#"$base".so.}
    major=${major%%.*}
    for alias in "$base.so.$major" "$base.so"; do
        if [ -f "$d/$alias" ] && [ ! -L "$d/$alias" ] && cmp -s "$real" "$d/$alias"; then
            ln -sf "$b" "$d/$alias"
            nlinks=$((nlinks + 1))
        fi
    done
done
say "UCX: replaced $nlinks duplicate shared-library copies with symlinks"

rm -rf "$prefix" "$deps/libucx_cu13.libs"
mv "$tmp/libucx" "$prefix"
if [ -d "$tmp/libucx_cu13.libs" ]; then
    mv "$tmp/libucx_cu13.libs" "$deps/libucx_cu13.libs"
fi
echo "$want_marker" >"$marker"
say "UCX: $want_marker installed in $prefix ($(du -sh "$prefix" | cut -f1));" \
    "pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig"
