#!/bin/sh
# autogen.sh - generate configure and Makefile.in (autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
mkdir -p m4
autoreconf --install --force --warnings=all,no-portability "$@"
rm -f configure~ config.h.in~
echo "autogen.sh: done; now: CC=mpicc ./configure && make  (or scripts/test.sh)"
