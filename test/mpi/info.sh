#!/usr/bin/env bash
# test/mpi/info.sh - mpixacc_info: --help and --version (build provenance:
# commit, configure date, compiler, the MPI and UCX headers), the UCX and MPI
# libraries actually loaded (the libucp path must be the file the process
# mapped), and the warnings about the loaded UCX:
#   - no transport warning with a module directory that has libuct_cuda and
#     libuct_ib (UCX_MODULE_DIR pointing at empty stand-in files);
#   - both the CUDA (in a CUDA build) and the InfiniBand warning with an
#     empty module directory;
#   - the "older than the headers" warning with Debian's UCX 1.13 first in
#     LD_LIBRARY_PATH (only where /usr/lib/<triplet>/libucp.so.0 is older).
#
#   test/mpi/info.sh [BUILDDIR]     (default: $MPIXACC_BUILDDIR, else <repo>/build)
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
info=$builddir/tools/mpixacc_info
[ -x "$info" ] || { echo "info.sh: $info not built" >&2; exit 2; }
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
fail() { echo "[info] FAIL: $*"; exit 1; }
tmp=$(mktemp -d /tmp/mpixacc-info.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$info" --help >"$tmp/help" 2>&1 || fail "--help: exit $?"
grep -q -- '--version' "$tmp/help" && grep -q -- '--help' "$tmp/help" || fail "--help: $(cat "$tmp/help")"
"$info" -h | cmp -s - "$tmp/help" || fail "-h differs from --help"
"$info" --bogus >/dev/null 2>&1 && fail "an unknown option was accepted"

"$info" --version >"$tmp/version" 2>&1 || fail "--version: exit $?"
for re in '^mpix-acc [0-9]+\.[0-9]+\.[0-9]+' '^  commit +[0-9a-f]{7,}(-dirty)? \(at configure time\)$|^  commit +unknown' \
    '^  configured +[0-9]{4}-[0-9]{2}-[0-9]{2} ' '^  compiler +[^ ]+: (gcc|clang) ' \
    '^  MPI +.*headers \(MPI [0-9]\.[0-9]\)$' '^  UCX +[0-9.]+ headers \(API [0-9]+\.[0-9]+\) from /'; do
    grep -qE "$re" "$tmp/version" || fail "--version lacks /$re/: $(cat "$tmp/version")"
done
grep -q '^Loaded:' "$tmp/version" && fail "--version printed more than the version"

# the libucp loaded: a file, and the one the process mapped (compare with
# what the dynamic linker says for the same binary and environment)
"$info" -f >"$tmp/f" 2>"$tmp/f.err" || fail "-f: exit $?"
path=$(sed -n 's/^  UCX  *[0-9.]* from \(\/.*\)$/\1/p' "$tmp/f")
[ -f "$path" ] || fail "loaded UCX path '$path' is not a file: $(cat "$tmp/f")"
ldd_path=$(ldd "$info" | sed -n 's/^[[:space:]]*libucp\.so\.0 => \([^ ]*\).*/\1/p')
[ "$(readlink -f "$ldd_path")" = "$(readlink -f "$path")" ] ||
    fail "mpixacc_info says $path, ldd says $ldd_path"
ver=$(sed -n 's/^  UCX  *\([0-9.]*\) from .*/\1/p' "$tmp/f")
grep -qE '^  MPI +.+' <(sed -n '/^Loaded:/,/^$/p' "$tmp/f") || fail "no loaded MPI: $(cat "$tmp/f")"
echo "  loaded UCX $ver from $path"
# the stream-executed path's memory per peer follows its settings: one more
# bulk slot (512 KiB by default) adds exactly that to the device ring
dev_of() { sed -n 's/.*device ring \([0-9]*\) bytes.*/\1/p' "$1"; }
MPIX_ACC_SX_BULK_SLOTS=2 "$info" -f >"$tmp/b2" 2>/dev/null
MPIX_ACC_SX_BULK_SLOTS=3 "$info" -f >"$tmp/b3" 2>/dev/null
d2=$(dev_of "$tmp/b2") d3=$(dev_of "$tmp/b3")
[ -n "$d2" ] && [ -n "$d3" ] && [ $((d3 - d2)) -eq 524288 ] ||
    fail "SX memory line: device ring $d2 with 2 bulk slots, $d3 with 3: $(grep 'SX memory' "$tmp/b3")"
echo "  SX memory per peer: device ring $d2 bytes with 2 bulk slots, $d3 with 3"

cuda_built=0
grep -q 'CUDA *built: yes' "$tmp/f" && cuda_built=1
# modules present (stand-ins): no transport warning
mkdir "$tmp/mods" "$tmp/empty"
touch "$tmp/mods/libuct_cuda.so.0" "$tmp/mods/libuct_ib.so.0"
UCX_MODULE_DIR=$tmp/mods "$info" -f >"$tmp/m" 2>"$tmp/m.err" || fail "-f with modules: exit $?"
grep -q "modules  *$tmp/mods: cuda yes, InfiniBand yes" "$tmp/m" || fail "modules not seen: $(grep modules "$tmp/m")"
grep -q 'has no .* transports' "$tmp/m.err" && fail "transport warning with both modules: $(cat "$tmp/m.err")"
# none present: the warnings
UCX_MODULE_DIR=$tmp/empty "$info" -f >"$tmp/e" 2>"$tmp/e.err" || fail "-f without modules: exit $?"
grep -q '\] WARN .*has no InfiniBand transports' "$tmp/e.err" || fail "no InfiniBand warning: $(cat "$tmp/e.err")"
if [ $cuda_built = 1 ]; then
    grep -q '\] WARN .*has no CUDA transports' "$tmp/e.err" || fail "no CUDA warning: $(cat "$tmp/e.err")"
fi

# an older UCX first in the search path: the version warning
old=
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64; do
    [ -e "$d/libucp.so.0" ] && { old=$d; break; }
done
if [ -n "$old" ]; then
    LD_LIBRARY_PATH=$old${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$info" -f >"$tmp/o" 2>"$tmp/o.err"
    over=$(sed -n 's/^  UCX  *\([0-9.]*\) from .*/\1/p' "$tmp/o")
    if [ "$(printf '%s\n%s\n' "$over" "$ver" | sort -V | head -1)" = "$over" ] && [ "$over" != "$ver" ]; then
        grep -q "\] WARN .*the UCX loaded ($over, .*) is older than the headers" "$tmp/o.err" ||
            fail "no warning for UCX $over: $(cat "$tmp/o.err")"
        echo "  UCX $over from $old: warned"
    else
        echo "  $old has UCX $over, not older: version warning not tested"
    fi
fi
echo "[info] PASS: --help, --version with provenance, loaded UCX $ver at $path, transport and version warnings"
