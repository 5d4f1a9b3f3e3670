#!/usr/bin/env bash
# demo.sh - the README's "run the main demo" command. From a clean clone on
# Debian 12, with no manual steps:
#
#   1. scripts/install-deps.sh      Debian packages, UCX 1.22 into .deps-local/
#   2. ./autogen.sh                 when configure is missing
#   3. configure in build/          when build/Makefile is missing, exactly as
#                                   scripts/test.sh (run-tests.sh) does:
#                                   CC=mpicc CFLAGS="-g -O2" ../configure
#                                   $MPIXACC_CONFIGURE_FLAGS
#   4. make -j2 in build/           the library, tools and the examples
#   5. the 2D stencil (examples/stencil2d) on 2 ranks, every variant in one
#      launch: plain MPI (`mpi`), per-call MPIX_Acc on one stream (`acc`) and
#      on two streams (`acc2`), and the unmodified MPI loop on a stream
#      communicator (`streamcomm`); each run checked bitwise against a
#      single-rank reference of the same grid. Prints the per-size tables
#      and the comparison summary.
#
# Backend: CUDA kernels when the build has CUDA and GPUs are visible (2 ranks:
# one per GPU with 2+ GPUs, sharing the GPU with one), host streams otherwise.
#
#   scripts/demo.sh [stencil2d options]     e.g. scripts/demo.sh --sizes 32,512 --steps 20
#
# Environment: MPIXACC_DEMO_RANKS (default 2), MPIXACC_MAKE_JOBS (default 2),
# MPIXACC_CONFIGURE_FLAGS, CC (default mpicc), MPIEXEC (default mpiexec).
# Exit status: 0 when every variant agreed with the reference.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builddir=$root/build
jobs=${MPIXACC_MAKE_JOBS:-2}
ranks=${MPIXACC_DEMO_RANKS:-2}
say() { printf 'demo: %s\n' "$*" >&2; }
die() {
    printf 'demo: ERROR: %s\n' "$*" >&2
    exit 1
}

cd "$root"
t0=$(date +%s)

# 1. dependencies
"$root/scripts/install-deps.sh" || die "scripts/install-deps.sh failed"

# 2.-4. build (the same steps and flags as scripts/test.sh -> run-tests.sh)
mkdir -p "$builddir"
blog=$builddir/demo-build.log
: >"$blog"
if [ ! -x "$root/configure" ] || [ ! -f "$root/Makefile.in" ]; then
    say "./autogen.sh"
    (cd "$root" && ./autogen.sh) >>"$blog" 2>&1 || { tail -n 30 "$blog" >&2; die "autogen.sh failed (log: $blog)"; }
fi
if [ ! -f "$builddir/Makefile" ]; then
    say "configure in $builddir ${MPIXACC_CONFIGURE_FLAGS:-}"
    # shellcheck disable=SC2086
    (cd "$builddir" && CC=${CC:-mpicc} CFLAGS=${CFLAGS:--g -O2} \
        "$root/configure" ${MPIXACC_CONFIGURE_FLAGS:-}) >>"$blog" 2>&1 ||
        { tail -n 30 "$blog" >&2; die "configure failed (log: $blog)"; }
    sed -n '/^mpix-acc .* configured/,/^Run programs/p' "$blog" >&2
fi
say "make -j$jobs in $builddir (log: $blog)"
make -C "$builddir" -j"$jobs" >>"$blog" 2>&1 || { tail -n 40 "$blog" >&2; die "make failed (log: $blog)"; }
stencil=$builddir/examples/stencil2d/stencil2d
[ -x "$stencil" ] || die "$stencil was not built (log: $blog)"
say "build ready in $(($(date +%s) - t0)) s"

# 5. run
# (sourced without -e/pipefail: with an empty LD_LIBRARY_PATH a grep in it
# finds nothing and returns 1, which would end this script)
set +e +o pipefail
# shellcheck disable=SC1091
. "$root/scripts/mpixacc-env.sh"
set -e -o pipefail
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if grep -q '^#define MPIXACC_HAVE_CUDA 1' "$builddir/config.h" 2>/dev/null && [ "$ngpu" -gt 0 ]; then
    where="$ngpu GPU(s), CUDA kernels"
    defaults=(--sizes 64,256,1024,4096 --steps 200 --warmup 2 --repeats 7)
else
    [ "$ngpu" -gt 0 ] && say "GPUs present but the build has no CUDA: using host streams"
    where="no GPU: host functions on library host streams"
    defaults=(--sizes 16,64,256 --steps 50 --warmup 1 --repeats 5)
fi
cmd=(${MPIEXEC:-mpiexec} -n "$ranks" "$stencil" --variant all "${defaults[@]}" "$@")
cat <<EOF

=== mpix-acc main demo: 2D Jacobi stencil with a halo exchange every step
    $ranks ranks ($where; $(nproc) CPU cores)
    variants: mpi        = stream sync before the sends + host MPI_Isend/Irecv/Waitall
              acc        = the same loop with MPIX_Acc_Isend/Irecv/Waitall on the stream
              acc2       = two streams (interior | halo exchange + boundary) joined by events
              streamcomm = the unmodified mpi loop on a communicator made stream-ordered
                           by one MPI_Comm_set_info call
              streamcomm-classic = a textbook step (vector-type columns, MPI_Sendrecv,
                           MPI_Allreduce residual) on such a communicator
              (acc-sx, ki, mpi-cuda-aware: where they can run)
    every run is compared bit for bit with a single-rank reference of the same grid
    \$ ${cmd[*]}

EOF
set +e
timeout 1800 "${cmd[@]}"
rc=$?
set -e
echo
if [ $rc -eq 0 ]; then
    echo "demo: all variants bitwise equal to the single-rank reference ($(($(date +%s) - t0)) s in all)"
else
    echo "demo: FAILED (exit status $rc)"
fi
exit $rc
