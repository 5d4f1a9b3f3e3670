#!/usr/bin/env bash
# format.sh - apply the project's C/CUDA style (.clang-format) to every
# tracked source file, or check it.
#
#   scripts/format.sh            reformat in place
#   scripts/format.sh --check    list files that differ; exit 1 if any
#
# Files: src/ mpix/ test/ tools/ examples/ hpgmg/ (*.c *.h *.cu *.cuh).
# The style was applied to the whole tree in one commit; commits since keep it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
    echo "format.sh: $cf not found (apt-get install clang-format)" >&2
    exit 2
fi
mapfile -t files < <(git ls-files 'src/*.[ch]' 'src/*.cu' 'mpix/*.h' 'test/*.[ch]' 'test/*.cu' \
    'tools/*.[ch]' 'examples/*.[ch]' 'examples/*.cu' 'hpgmg/*.[ch]' 'hpgmg/*.cu' 'hpgmg/*.cuh')
if [ "${1:-}" = --check ]; then
    bad=0
    for f in "${files[@]}"; do
        if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
            echo "format.sh: not formatted: $f"
            bad=$((bad + 1))
        fi
    done
    echo "format.sh: ${#files[@]} files, $bad not formatted ($("$cf" --version | head -n 1))"
    [ $bad -eq 0 ]
    exit
fi
"$cf" -i --style=file "${files[@]}"
