#!/usr/bin/env bash
# check-dist.sh TARBALL - the release tarball holds every file git tracks
# (but .gitignore): prints each one that is missing and exits 1 if any is.
# Run from a git checkout (CI: after `make dist`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tarball=${1:?usage: check-dist.sh TARBALL}
top=$(tar tzf "$tarball" | awk -F/ 'NR == 1 { print $1 }')
missing=$(comm -23 <(git -C "$root" ls-files | grep -vxF .gitignore | sort) \
    <(tar tzf "$tarball" | sed "s|^$top/||" | sort))
if [ -n "$missing" ]; then
    echo "check-dist.sh: $(wc -l <<<"$missing") tracked file(s) missing from $tarball:"
    sed 's/^/  /' <<<"$missing"
    exit 1
fi
echo "check-dist.sh: $tarball holds all $(git -C "$root" ls-files | grep -cvxF .gitignore) tracked files"
