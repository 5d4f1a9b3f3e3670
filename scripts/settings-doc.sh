#!/usr/bin/env bash
# settings-doc.sh [--check | --update] [BUILDDIR] - the MPIX_ACC_* settings
# have one source, the registry (MXU_CONFIG_TABLE in src/util/settings.h):
#   README        the table between "<!-- BEGIN settings table" and
#                 "<!-- END settings table -->" is generated whole
#                 (tools/mpixacc_settings_doc --markdown: name, type and
#                 range, default, the registry's help text);
#   mpix_acc(3)   each ENVIRONMENT entry's header line
#                 `.BR MPIX_ACC_X " (TYPE, default " "DEF" )` is generated
#                 (--man); the prose under it is the page's own. Every
#                 registry row needs an entry, and no other MPIX_ACC_ entry
#                 may exist.
# --check (default): exit 1 and show the differences when the documents
# disagree with the registry (run by the test suite: test/mpi/TESTS);
# --update: rewrite both files (a missing man entry must still be written).
# BUILDDIR: a configured build with tools/mpixacc_settings_doc (default
# $MPIXACC_BUILDDIR, else build/; built when missing).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=check
case ${1:-} in --check) shift ;; --update) mode=update; shift ;; esac
b=${1:-${MPIXACC_BUILDDIR:-$root/build}}
gen=$b/tools/mpixacc_settings_doc
[ -x "$gen" ] || make -s -C "$b" tools/mpixacc_settings_doc >/dev/null
tmp=$(mktemp -d /tmp/mpixacc-settings.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$gen" --markdown >"$tmp/table.md"
"$gen" --man >"$tmp/man.txt"
python3 - "$mode" "$root/README" "$root/doc/man/mpix_acc.3" "$tmp/table.md" "$tmp/man.txt" <<'PY'
import difflib, re, sys
mode, readme, manpage, table_f, man_f = sys.argv[1:]
table = open(table_f).read()
want_hdr = open(man_f).read().splitlines()
bad = 0

# README: the generated block
text = open(readme).read()
m = re.search(r'(<!-- BEGIN settings table[^\n]*-->\n)(.*?)(<!-- END settings table -->)', text, re.S)
if not m:
    print("settings-doc: README has no '<!-- BEGIN settings table ... -->' ... "
          "'<!-- END settings table -->' block")
    sys.exit(1)
if m.group(2) != table:
    if mode == 'update':
        text = text[:m.start(2)] + table + text[m.end(2):]
        open(readme, 'w').write(text)
        print("settings-doc: README table regenerated")
    else:
        bad = 1
        print("settings-doc: README's settings table differs from the registry "
              "(scripts/settings-doc.sh --update rewrites it):")
        sys.stdout.writelines(difflib.unified_diff(m.group(2).splitlines(True),
                              table.splitlines(True), 'README', 'registry'))

# mpix_acc(3): entry headers
lines = open(manpage).read().split('\n')
name_of = lambda l: re.match(r'\.BR (MPIX_ACC_[A-Z0-9_]+) "', l)
want = {name_of(h).group(1): h for h in want_hdr}
have = {}
for i, l in enumerate(lines):
    n = name_of(l)
    if n:
        have.setdefault(n.group(1), []).append(i)
for n, idx in have.items():
    if n not in want:
        bad = 1
        print(f"settings-doc: mpix_acc.3 documents {n}, which the registry does not have")
    elif len(idx) > 1:
        bad = 1
        print(f"settings-doc: mpix_acc.3 has {len(idx)} entries for {n}")
for n, h in want.items():
    if n not in have:
        bad = 1
        print(f"settings-doc: mpix_acc.3 has no entry for {n}: add one under ENVIRONMENT, "
              f"headed\n  {h}")
        continue
    i = have[n][0]
    if lines[i] != h:
        if mode == 'update':
            lines[i] = h
        else:
            bad = 1
            print(f"settings-doc: mpix_acc.3 entry header of {n} differs from the registry:\n"
                  f"  page:     {lines[i]}\n  registry: {h}")
if mode == 'update':
    open(manpage, 'w').write('\n'.join(lines))
if bad:
    sys.exit(1)
print(f"settings-doc: README and mpix_acc.3 agree with the registry ({len(want)} settings)")
PY
