#!/usr/bin/env bash
# test.sh - the README's test command: from a clean clone, with no manual
# steps, install the dependencies, build mpix-acc in build/ and run every
# test. Idempotent: re-running only rebuilds what changed.
#
#   ./scripts/test.sh [run-tests.sh options]     e.g. ./scripts/test.sh 'mpi/ring*'
#
# Steps: scripts/install-deps.sh (Debian packages, UCX 1.22 into
# .deps-local/ucx), ./autogen.sh (when configure is missing),
# CC=mpicc ../configure in build/ (when build/Makefile is missing), make,
# scripts/run-tests.sh. The last line is `N passed, N failed`; the exit
# status is non-zero when a test failed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

t0=$(date +%s)
if ! "$root/scripts/install-deps.sh"; then
    echo "test.sh: scripts/install-deps.sh failed" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
if [ ! -x "$root/configure" ] || [ ! -f "$root/Makefile.in" ]; then
    echo "test.sh: ./autogen.sh" >&2
    if ! "$root/autogen.sh" >"$root/.deps-local/autogen.log" 2>&1; then
        tail -n 30 "$root/.deps-local/autogen.log" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
fi
echo "test.sh: dependencies and autotools ready in $(($(date +%s) - t0)) s" >&2
exec "$root/scripts/run-tests.sh" --builddir "$root/build" "$@"
