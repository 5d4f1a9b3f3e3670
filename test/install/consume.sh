#!/usr/bin/env bash
# consume.sh PREFIX - use an installed mpix-acc the ways the README says,
# from outside the source and build trees, with a clean environment (no
# LD_LIBRARY_PATH, UCX_MODULE_DIR or LD_PRELOAD): each check prints
# `PASS name` or `FAIL name (why)`, the last line is `N passed, N failed`.
#
#   pkgconfig  mpicc $(pkg-config --cflags mpixacc) app.c $(pkg-config --libs mpixacc)
#   cmake      find_package(mpixacc CONFIG) + target_link_libraries(app mpixacc::mpixacc)
#   cmake-mpifirst  target_link_libraries(app MPI::MPI_C mpixacc::mpixacc): the
#              target depends on MPI::MPI_C, so CMake still links it first
#   preload    an unmodified MPI program, mpiexec -genv LD_PRELOAD <full path>
#   misorder   CMake with MPI::MPI_C before PkgConfig::MPIXACC (pkg_check_modules
#              knows nothing of MPI): MPI first on the link line, the library
#              is bypassed and each rank logs the link-order WARN
#   info       PREFIX/bin/mpixacc_info runs; env script and module file
#   ucxhdr     the UCX headers the device API needs compile from the prefix
#   devhdr     a .cu file using mpix_acc_device.cuh compiles with nvcc and
#              only -I<prefix>/include and the MPI compiler flags (issue 19)
# The two apps run with 2 ranks (mpiexec) and MPIX_ACC_LOG=info; a run
# passes when every rank exchanged data through MPIX_Acc_* calls, the log
# says the library is active on 2 ranks, and the libucp it loaded is the
# one installed with it (PREFIX/lib/mpix-acc/ucx), when there is one.
# Run by `make installcheck` (so by `make distcheck`) and by CI.
set -uo pipefail
prefix=${1:?usage: consume.sh PREFIX}
prefix=$(cd "$prefix" && pwd)
MPIEXEC=${MPIEXEC:-mpiexec}
TMO=${RUN_TIMEOUT:-120}
tmp=$(mktemp -d /tmp/mpixacc-consume.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
npass=0
nfail=0
pass() { echo "PASS $1"; npass=$((npass + 1)); }
fail() {
    echo "FAIL $1 ($2)"
    nfail=$((nfail + 1))
    [ -n "${3:-}" ] && [ -f "$3" ] && tail -n 15 "$3" | sed 's/^/    | /'
}
# a clean environment: nothing from the source tree's mpixacc-env.sh
clean_env=(env -u LD_LIBRARY_PATH -u UCX_MODULE_DIR -u LD_PRELOAD -u MPIXACC_UCX_DIR
    -u PKG_CONFIG_PATH -u CMAKE_PREFIX_PATH)
libdir=$prefix/lib
[ -f "$libdir/libmpixacc.so" ] || libdir=$(dirname "$(find "$prefix" -name libmpixacc.so | head -n 1)")
bundled_ucx=
[ -d "$libdir/mpix-acc/ucx/lib" ] && bundled_ucx=$libdir/mpix-acc/ucx/lib

cat >"$tmp/app.c" <<'C'
/* ring exchange on a host stream through MPIX_Acc_* calls */
#include <mpi.h>
#include <mpix_acc.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, in[64], out[64], ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPIX_Acc_stream s;
    if (MPIX_Acc_Hoststream_create(&s) != MPI_SUCCESS) {
        printf("consume-app: rank %d: MPIX_Acc_Hoststream_create failed\n", rank);
        MPI_Finalize();
        return 1;
    }
    for (int i = 0; i < 64; i++) { out[i] = rank * 1000 + i; in[i] = -1; }
    MPI_Request r[2];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    ok &= MPIX_Acc_Irecv(s, in, 64, MPI_INT, left, 7, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS;
    ok &= MPIX_Acc_Isend(s, out, 64, MPI_INT, right, 7, MPI_COMM_WORLD, &r[1]) == MPI_SUCCESS;
    ok &= MPIX_Acc_Waitall(s, 2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS;
    ok &= MPIX_Acc_Hoststream_synchronize(s) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++) ok &= in[i] == left * 1000 + i;
    MPIX_Acc_Hoststream_free(&s);
    printf("consume-app: rank %d %s\n", rank, ok ? "ok" : "WRONG");
    MPI_Finalize();
    return ok ? 0 : 1;
}
C
cat >"$tmp/plain.c" <<'C'
/* an unmodified MPI program */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, v;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&rank, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("plain: rank %d sum %d\n", rank, v);
    MPI_Finalize();
    return 0;
}
C

# run_app NAME BINARY [mpiexec args]: 2 ranks, checks as above
run_app() {
    local name=$1 bin=$2
    shift 2
    local log="$tmp/$name.log"
    "${clean_env[@]}" MPIX_ACC_LOG=info timeout "$TMO" "$MPIEXEC" -n 2 "$@" "$bin" >"$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then fail "$name" "exit $rc" "$log"; return; fi
    if [ "$(grep -c '^consume-app: rank [01] ok' "$log")" -ne 2 ]; then
        fail "$name" "not every rank exchanged its data" "$log"; return
    fi
    if ! grep -q 'mpix-acc [0-9.]* active on 2 ranks' "$log"; then
        fail "$name" "the library did not report itself active" "$log"; return
    fi
    if [ -n "$bundled_ucx" ] && [ "$(grep -c "UCX [0-9.]* loaded from $bundled_ucx/libucp.so" "$log")" -ne 2 ]; then
        fail "$name" "the ranks did not load the UCX installed with the library ($bundled_ucx)" "$log"; return
    fi
    pass "$name"
}

# ---- pkg-config with run paths
if ! PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --exists mpixacc; then
    fail pkgconfig "no mpixacc.pc in $libdir/pkgconfig"
elif ! "${clean_env[@]}" PKG_CONFIG_PATH="$libdir/pkgconfig" bash -c \
    'mpicc $(pkg-config --cflags mpixacc) "$1/app.c" -o "$1/app-pc" $(pkg-config --libs mpixacc)' \
    _ "$tmp" >"$tmp/pc-build.log" 2>&1; then
    fail pkgconfig "build failed" "$tmp/pc-build.log"
else
    run_app pkgconfig "$tmp/app-pc"
fi

# ---- CMake: find_package(mpixacc CONFIG), mpixacc::mpixacc alone
cmake_app() { # DIR FIND-COMMANDS LINK-LIBRARIES...
    local d=$1 find=$2
    shift 2
    mkdir -p "$d"
    cp "$tmp/app.c" "$d/app.c"
    cat >"$d/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.10)
project(consume C)
$find
add_executable(app app.c)
target_link_libraries(app PRIVATE $*)
CM
    "${clean_env[@]}" CMAKE_PREFIX_PATH="$prefix" PKG_CONFIG_PATH="$libdir/pkgconfig" \
        cmake -S "$d" -B "$d/b" >"$d/cmake.log" 2>&1 &&
        "${clean_env[@]}" cmake --build "$d/b" >>"$d/cmake.log" 2>&1
}
find_cfg='find_package(mpixacc 0.1 CONFIG REQUIRED)'
if ! command -v cmake >/dev/null; then
    fail cmake "cmake not installed"
else
    if ! cmake_app "$tmp/cm" "$find_cfg" mpixacc::mpixacc; then
        fail cmake "configure/build failed" "$tmp/cm/cmake.log"
    else
        run_app cmake "$tmp/cm/b/app"
    fi
    if ! cmake_app "$tmp/cm1" "find_package(MPI REQUIRED)
$find_cfg" MPI::MPI_C mpixacc::mpixacc; then
        fail cmake-mpifirst "configure/build failed" "$tmp/cm1/cmake.log"
    else
        run_app cmake-mpifirst "$tmp/cm1/b/app"
    fi
    # ---- MPI library first on the link line: nothing intercepted, a WARN says why
    if cmake_app "$tmp/cm2" "find_package(MPI REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(MPIXACC REQUIRED IMPORTED_TARGET mpixacc)" MPI::MPI_C PkgConfig::MPIXACC; then
        "${clean_env[@]}" timeout "$TMO" "$MPIEXEC" -n 2 "$tmp/cm2/b/app" >"$tmp/misorder.log" 2>&1
        if [ "$(grep -c 'WARN.*link -lmpixacc before the MPI library, or preload it' "$tmp/misorder.log")" -ge 2 ]; then
            pass misorder
        else
            fail misorder "no link-order warning from each rank" "$tmp/misorder.log"
        fi
    else
        fail misorder "configure/build failed" "$tmp/cm2/cmake.log"
    fi
fi

# ---- preload with a full path (MPICH -genv; Open MPI: -x LD_PRELOAD=...)
if ! mpicc "$tmp/plain.c" -o "$tmp/plain" >"$tmp/plain-build.log" 2>&1; then
    fail preload "build failed" "$tmp/plain-build.log"
else
    if "$MPIEXEC" --version 2>&1 | grep -qi 'open mpi\|openrte'; then
        pre=(-x LD_PRELOAD="$libdir/libmpixacc.so")
    else
        pre=(-genv LD_PRELOAD "$libdir/libmpixacc.so")
    fi
    "${clean_env[@]}" MPIX_ACC_LOG=info timeout "$TMO" "$MPIEXEC" -n 2 "${pre[@]}" "$tmp/plain" \
        >"$tmp/preload.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        fail preload "exit $rc" "$tmp/preload.log"
    elif ! grep -q 'mpix-acc [0-9.]* active on 2 ranks' "$tmp/preload.log" ||
        [ "$(grep -c '^plain: rank [01] sum 1' "$tmp/preload.log")" -ne 2 ]; then
        fail preload "the preloaded library did not start, or the program failed" "$tmp/preload.log"
    else
        pass preload
    fi
fi

# ---- mpixacc_info, the environment script, the module file
info_log=$tmp/info.log
if ! "${clean_env[@]}" timeout "$TMO" "$prefix/bin/mpixacc_info" >"$info_log" 2>&1; then
    fail info "PREFIX/bin/mpixacc_info failed" "$info_log"
elif [ -n "$bundled_ucx" ] && [[ $("${clean_env[@]}" ldd "$prefix/bin/mpixacc_info") != *"libucp.so.0 => $prefix/bin/../lib/mpix-acc/ucx/lib/"* ]]; then
    fail info "mpixacc_info does not load the installed UCX: $(ldd "$prefix/bin/mpixacc_info" | grep libucp)"
else
    env_sh=$(find "$prefix/share" -name mpixacc-env.sh | head -n 1)
    module=$(find "$prefix/share/modulefiles" -type f 2>/dev/null | head -n 1)
    got=$("${clean_env[@]}" bash -c '. "$1" && command -v mpixacc_info && echo "$MPIXACC_LIB" &&
        pkg-config --modversion mpixacc' _ "$env_sh" 2>&1)
    if [ -z "$env_sh" ] || [ "$(sed -n 1p <<<"$got")" != "$prefix/bin/mpixacc_info" ] ||
        [ ! -f "$(sed -n 2p <<<"$got")" ] || [ -z "$(sed -n 3p <<<"$got")" ]; then
        fail info "installed mpixacc-env.sh: '$env_sh' gave: $got"
    elif [ -z "$module" ] || ! head -n 1 "$module" | grep -q '^#%Module' ||
        { command -v tclsh >/dev/null &&
          ! printf 'proc module-whatis args {}\nproc conflict args {}\nproc prepend-path args {}\nproc setenv args {}\nsource {%s}\n' "$module" | tclsh; }; then
        fail info "module file missing or not valid Tcl: '$module'"
    else
        pass info
    fi
fi

# ---- the UCX headers of the device API, from the prefix
ucx_inc=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --variable=ucx_includedir mpixacc)
if [ ! -f "$ucx_inc/ucp/api/ucp.h" ]; then
    fail ucxhdr "pkg-config's ucx_includedir ($ucx_inc) has no ucp/api/ucp.h"
elif [ ! -f "$ucx_inc/ucp/api/device/ucp_host.h" ]; then
    pass "ucxhdr (this UCX has no device API)"
elif ! printf '#include <ucp/api/device/ucp_host.h>\n#include <ucp/api/device/ucp_device_types.h>\nint main(void) { return 0; }\n' |
    gcc -x c -I"$ucx_inc" -fsyntax-only - >"$tmp/hdr.log" 2>&1; then
    fail ucxhdr "ucp/api/device headers do not compile from $ucx_inc" "$tmp/hdr.log"
else
    pass ucxhdr
fi

# ---- the device header of partitioned requests, from the prefix alone
nvcc_bin=$(command -v nvcc 2>/dev/null || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [ ! -f "$prefix/include/mpix_acc_device.cuh" ] || [ ! -f "$prefix/include/mpix_acc_dreq.h" ]; then
    fail devhdr "mpix_acc_device.cuh or mpix_acc_dreq.h not installed in $prefix/include"
elif [ -z "$nvcc_bin" ]; then
    pass "devhdr (installed; no nvcc here to compile it)"
else
    mpi_inc=$(mpicc -show 2>/dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
    cat >"$tmp/dev.cu" <<'CU'
#include <mpix_acc.h>
#include <mpix_acc_device.cuh>
__global__ void step(mpix_acc_dreq_t *s, mpix_acc_dreq_t *r, int *rc)
{
    int a = mpix_acc_pready<MPIX_ACC_BLOCK>(s, blockIdx.x);
    int b = mpix_acc_parrived_wait<MPIX_ACC_WARP>(r, blockIdx.x, 0);
    int c = mpix_acc_pready_range<MPIX_ACC_THREAD>(s, 0, 1);
    if (threadIdx.x == 0)
        rc[blockIdx.x] = a + b + c + (mpix_acc_parrived(r, 0) ? 1 : 0) +
                         mpix_acc_parrived_wait(r, 1, 1000);
}
int main(void) { return 0; }
CU
    if ! (cd "$tmp" && "${clean_env[@]}" "$nvcc_bin" -std=c++17 -arch=sm_90 -I"$prefix/include" \
        $mpi_inc -c dev.cu -o dev.o) >"$tmp/dev.log" 2>&1; then
        fail devhdr "a .cu file using mpix_acc_device.cuh does not compile from $prefix/include" \
            "$tmp/dev.log"
    else
        pass devhdr
    fi
fi

echo "$npass passed, $nfail failed"
[ $nfail -eq 0 ]
