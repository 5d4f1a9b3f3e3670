# mpixacc-env.sh - source this (bash/sh) before running MPI programs with
# shellcheck shell=bash
# mpix-acc:   . scripts/mpixacc-env.sh
#
# Debian's MPICH 4.0.2 (ch4:ucx) is built against Debian's UCX 1.13, while
# mpix-acc uses UCX 1.22 from the project-local prefix .deps-local/ucx
# (scripts/install-deps.sh). A process must map exactly ONE libucp, shared by
# the MPI library and mpix-acc, so the 1.22 libraries go FIRST on
# LD_LIBRARY_PATH (UCX keeps its ABI backward compatible, so MPICH runs on
# 1.22) and UCX loads its transport modules from the same prefix.
#
# Sets:   LD_LIBRARY_PATH  <ucx>/lib first (not duplicated when sourced twice)
#         UCX_MODULE_DIR   <ucx>/lib/ucx
#         MPIXACC_UCX_DIR  the UCX prefix used
#         MPIXACC_ROOT     the repository root (source tree only)
# The installed copy (<prefix>/share/mpix-acc/mpixacc-env.sh, written by
# `make install`) uses the UCX installed with the library (or the one named
# with configure --with-ucx) and also sets PATH, MANPATH, PKG_CONFIG_PATH,
# CMAKE_PREFIX_PATH and MPIXACC_LIB (full path of libmpixacc.so, to preload).
# Override the prefix with MPIXACC_UCX_DIR=/some/ucx before sourcing;
# MPIXACC_UCX_DIR=system changes nothing (a build against the system UCX,
# configure --with-ucx=/usr: the loader's default libucp serves both).
# Nothing else is needed: MPICH's hydra mpiexec oversubscribes (-n 4 on 2
# cores) without a flag, and no MPIR_CVAR_* setting is required.
#
# Check it:  scripts/mpixacc-env.sh --check   (builds and runs a tiny MPI
# program with 2 ranks and shows which libucp each rank mapped).

# `make install` writes the installed copy (DATADIR/mpix-acc/mpixacc-env.sh)
# with these set; there the script also puts the installation on PATH,
# MANPATH, PKG_CONFIG_PATH and CMAKE_PREFIX_PATH and sets MPIXACC_LIB (the
# library's full path, for LD_PRELOAD). Empty _mxenv_ucx: a system UCX.
_mxenv_installed=
_mxenv_prefix=
_mxenv_bindir=
_mxenv_libdir=
_mxenv_mandir=
_mxenv_ucx=

_mxenv_prepend() { # VAR DIR: DIR first on the colon list VAR, not duplicated
    eval "_mxenv_old=\${$1:-}"
    # shellcheck disable=SC2154
    _mxenv_old=$(printf '%s' "$_mxenv_old" | tr ':' '\n' | grep -vxF "$2" | grep -v '^$' | paste -sd: -) || :
    eval "$1=\"\$2\${_mxenv_old:+:\$_mxenv_old}\""
    eval "export $1"
    unset _mxenv_old
}

if [ -n "$_mxenv_installed" ]; then
    _mxenv_prepend PATH "$_mxenv_bindir"
    # an empty MANPATH element keeps man's default path
    case ":${MANPATH:-}:" in *":$_mxenv_mandir:"*) ;; *) MANPATH="$_mxenv_mandir:${MANPATH:-}"; export MANPATH ;; esac
    _mxenv_prepend PKG_CONFIG_PATH "$_mxenv_libdir/pkgconfig"
    _mxenv_prepend CMAKE_PREFIX_PATH "$_mxenv_prefix"
    export MPIXACC_LIB="$_mxenv_libdir/libmpixacc.so"
    if [ -z "${MPIXACC_UCX_DIR:-}" ] && [ -n "$_mxenv_ucx" ]; then
        MPIXACC_UCX_DIR=$_mxenv_ucx
    fi
else
    if [ -n "${BASH_SOURCE:-}" ]; then
        _mxenv_self=${BASH_SOURCE[0]}
    else
        _mxenv_self=$0
    fi
    MPIXACC_ROOT=$(cd "$(dirname "$_mxenv_self")/.." && pwd)
    export MPIXACC_ROOT
    if [ -z "${MPIXACC_UCX_DIR:-}" ]; then
        MPIXACC_UCX_DIR="$MPIXACC_ROOT/.deps-local/ucx"
    fi
fi
if [ "${MPIXACC_UCX_DIR:-}" = system ] || { [ -n "$_mxenv_installed" ] && [ -z "${MPIXACC_UCX_DIR:-}" ]; }; then
    : # a system UCX: the loader's default, nothing to set
elif [ -e "$MPIXACC_UCX_DIR/lib/libucp.so.0" ]; then
    export MPIXACC_UCX_DIR
    case ":${LD_LIBRARY_PATH:-}:" in
    ":$MPIXACC_UCX_DIR/lib:"*) ;; # already first
    *)
        # drop it from anywhere else, then put it first
        _mxenv_rest=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' |
            grep -vxF "$MPIXACC_UCX_DIR/lib" | grep -v '^$' | paste -sd: -)
        LD_LIBRARY_PATH="$MPIXACC_UCX_DIR/lib${_mxenv_rest:+:$_mxenv_rest}"
        unset _mxenv_rest
        ;;
    esac
    export LD_LIBRARY_PATH
    export UCX_MODULE_DIR="$MPIXACC_UCX_DIR/lib/ucx"
else
    echo "mpixacc-env.sh: warning: no UCX in $MPIXACC_UCX_DIR (run scripts/install-deps.sh);" \
        "MPI and mpix-acc use whatever libucp the loader finds" >&2
fi
unset _mxenv_self _mxenv_installed _mxenv_prefix _mxenv_bindir _mxenv_libdir _mxenv_mandir _mxenv_ucx
unset -f _mxenv_prepend

# --check: only when executed (bash scripts/mpixacc-env.sh --check), not sourced
if [ "${1:-}" = "--check" ] && [ -n "${BASH_SOURCE:-}" ] && [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -eu
    tmp=$(mktemp -d /tmp/mpixacc-envcheck.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    cat >"$tmp/ucpcheck.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <string.h>
/* prints every distinct libucp*.so mapped in this process */
int main(int argc, char **argv)
{
    int rank, n = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], seen[16][1024];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char *p = strchr(line, '/');
        if (p == NULL || strstr(p, "/libucp.so") == NULL) continue;
        p[strcspn(p, "\n")] = '\0';
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= strcmp(seen[i], p) == 0;
        if (!dup && n < 16) snprintf(seen[n++], sizeof seen[0], "%s", p);
    }
    if (f != NULL) fclose(f);
    for (int i = 0; i < n; i++) printf("rank %d maps %s\n", rank, seen[i]);
    printf("rank %d: %d libucp mapped\n", rank, n);
    MPI_Finalize();
    return n == 1 ? 0 : 1;
}
EOF
    mpicc -o "$tmp/ucpcheck" "$tmp/ucpcheck.c"
    echo "ldd (with this environment):"
    ldd "$tmp/ucpcheck" | grep -E 'libucp|libucs|libuct|libmpich' | sed 's/^/  /'
    timeout 60 mpiexec -n 2 "$tmp/ucpcheck"
    echo "mpixacc-env.sh: OK: one libucp per process"
fi
