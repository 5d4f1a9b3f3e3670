#!/usr/bin/env python3
"""Turn tools/mpixacc_prof.c's PREFIX.<pid>.prof files into tables.

usage: scripts/prof-report.py [--top N] [--focus LIB] [--within F] [--exclude F] FILE.prof...

For each file: the share of the sampled thread's CPU time per function,
self (the interrupted frame) and inclusive (anywhere on the stack), and
"by innermost LIB frame" (default libmpixacc): each sample counted in the
deepest frame inside that library, so that the driver's and libc's time is
charged to the library function that called them. Symbols come from
addr2line (binutils) and the binaries' debug information; stripped
libraries (libcuda) show as their file name. --within F keeps only the
samples with function F on their stack (e.g. the timed loop), --exclude F
drops those with F on it (e.g. a throttle's sleep); both may be repeated.
"""
import collections
import os
import signal
import subprocess
import sys


def parse(path):
    maps, samples = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("map "):
                parts = line[4:].split()
                if len(parts) < 6 or "x" not in parts[1]:
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps.append((lo, hi, int(parts[2], 16), parts[5]))
            elif line.startswith("s"):
                samples.append([int(x, 16) for x in line[1:].split()])
    return maps, samples


def locate(maps, addr):
    for lo, hi, off, name in maps:
        if lo <= addr < hi:
            return name, addr - lo + off
    return None, addr


def symbolize(maps, samples):
    want = collections.defaultdict(set)
    frames = []
    for s in samples:
        fs = []
        for k, a in enumerate(s):
            a2 = a if k == 0 else a - 1  # return addresses point past the call
            mod, off = locate(maps, a2)
            fs.append((mod, off))
            if mod:
                want[mod].add(off)
        frames.append(fs)
    names = {}
    for mod, offs in want.items():
        offs = sorted(offs)
        base = os.path.basename(mod)
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", mod] + [hex(o) for o in offs],
                                 capture_output=True, text=True, timeout=300).stdout.split("\n")
        except (OSError, subprocess.TimeoutExpired):
            out = []
        for i, o in enumerate(offs):
            fn = out[2 * i] if 2 * i < len(out) else "??"
            names[(mod, o)] = base if fn in ("??", "") else fn
    res = []
    for fs in frames:
        res.append([(names.get(f, "??") if f[0] else "??", os.path.basename(f[0] or "?"))
                    for f in fs])
    return res


def table(title, counter, total, top):
    print(f"\n{title}")
    print(f"{'share':>7} {'samples':>8}  function")
    for fn, c in counter.most_common(top):
        print(f"{100.0 * c / total:6.1f}% {c:8d}  {fn}")


def main():
    args = sys.argv[1:]
    top, focus, within, exclude = 40, "libmpixacc", [], []
    while args and args[0].startswith("--"):
        if args[0] in ("--within", "--exclude"):
            (within if args[0] == "--within" else exclude).append(args[1])
            args = args[2:]
        elif args[0] == "--top":
            top = int(args[1])
            args = args[2:]
        elif args[0] == "--focus":
            focus = args[1]
            args = args[2:]
        else:
            sys.exit(__doc__)
    if not args:
        sys.exit(__doc__)
    for path in args:
        maps, samples = parse(path)
        if not samples:
            print(f"{path}: no samples")
            continue
        stacks = symbolize(maps, samples)
        every = len(stacks)
        stacks = [st for st in stacks
                  if all(any(fn == w for fn, _ in st) for w in within)
                  and not any(fn == x for fn, _ in st for x in exclude)]
        total = len(stacks)
        if not total:
            print(f"{path}: no samples left of {every}")
            continue
        selfc, incl, inner, mods = (collections.Counter() for _ in range(4))
        for st in stacks:
            if not st:
                continue
            selfc[st[0][0]] += 1
            mods[st[0][1]] += 1
            for fn in set(fn for fn, _ in st):
                incl[fn] += 1
            deep = next((fn for fn, m in st if m.startswith(focus)), None)
            inner[deep or f"(outside {focus}) {st[0][1]}"] += 1
        print(f"== {path}: {total} samples (of {every}; within {within or '-'}, "
              f"excluding {exclude or '-'})")
        table("by module (self)", mods, total, top)
        table("self", selfc, total, top)
        table(f"by innermost {focus} frame", inner, total, top)
        table("inclusive", incl, total, top)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a reader that stops early (head, grep -q)
    main()
