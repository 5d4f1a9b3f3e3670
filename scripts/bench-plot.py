#!/usr/bin/env python3
"""bench-plot.py - turn the benchmarks' CSV files into PNG plots and Markdown tables.

    scripts/bench-plot.py [--out DIR] [--tag TAG] [--title T] [--info TEXT] FILE...

FILE: CSVs written with --csv by examples/bench/mpixacc_bench,
examples/ping_kernel_pong/ping_kernel_pong or examples/stencil2d/stencil2d
(recognised by their header), or a results.tar.gz from scripts/gpu-test.sh
--apps (its CSVs are read).

One set of outputs per input CSV, named after it, so that no input
overwrites another's: <tag>-<csv name>-latency.png and -bandwidth.png for
mpixacc_bench CSVs, <tag>-<csv name>.png for ping-kernel-pong and stencil
CSVs (bench.csv -> <tag>-bench-latency.png, bench-peer-errors.csv ->
<tag>-bench-peer-errors-latency.png, pkp.csv -> <tag>-pkp.png). Each chart
has every variant of its run, one line each, with min/max bars where the CSV
has them (mpixacc_bench). When several mpixacc_bench CSVs come from one run
(one folder or archive), <tag>-bench-all-latency.png and -bandwidth.png put
all their variants on one chart (a variant name that repeats is suffixed by
its CSV: "acc (peer-errors)").

Each chart says where it comes from, under its title: the commit, the
machine, the driver and compiler (suite-summary.txt of scripts/gpu-test.sh
next to the CSV), the device (the "backend" line of the program's output,
<csv name>.txt next to the CSV) and the versions the program printed (its
"# versions:" line), plus --info TEXT.

Markdown tables are printed and written to DIR/<tag>-tables.md.
Bandwidth is in MB/s (10^6 B/s); CSVs from before mpixacc_bench printed
MB/s (bw_GBs_* columns) are converted.

Needs matplotlib (pip install matplotlib) for the plots; without it the
tables are still printed.
"""
import argparse
import csv
import io
import os
import sys
import tarfile
import textwrap
from collections import OrderedDict, defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # tables only
    plt = None


def size_label(n):
    n = int(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def provenance(texts):
    """Where a run comes from, from the text files beside its CSV: a list of
    short strings (commit, machine, driver, device, versions)."""
    info = []
    summary = texts.get("suite-summary.txt", "")
    for key in ("commit", "machine", "driver"):
        for line in summary.splitlines():
            if line.startswith(key + ":"):
                info.append(f"{key} {line.split(':', 1)[1].strip()}")
                break
    return info


def program_info(text):
    """The device and versions mpixacc_bench (or another example) printed."""
    info, dev = [], False
    for line in text.splitlines():
        line = line.lstrip("# ").strip()
        if "; backend " in line and not dev:
            info.append(line.split("; backend ", 1)[1].split(";")[0].strip())
            dev = True
        elif line.startswith("versions:"):
            info.append(line.split(":", 1)[1].strip())
    return info


def read_inputs(paths):
    """Yield (name, rows, run, texts) for every CSV in paths (files or
    .tar.gz): run identifies the folder or archive it came from, texts maps
    the names of the .txt files beside it to their contents."""
    for p in paths:
        if p.endswith((".tar.gz", ".tgz")):
            with tarfile.open(p) as tf:
                members = [m for m in tf.getmembers() if m.isfile()]
                texts = {os.path.basename(m.name): tf.extractfile(m).read().decode(errors="replace")
                         for m in members if m.name.endswith(".txt")}
                for m in members:
                    if m.name.endswith(".csv"):
                        text = tf.extractfile(m).read().decode()
                        yield m.name, list(csv.DictReader(io.StringIO(text))), p, texts
        else:
            d = os.path.dirname(os.path.abspath(p))
            texts = {}
            for f in os.listdir(d):
                if f.endswith(".txt"):
                    with open(os.path.join(d, f), errors="replace") as fh:
                        texts[f] = fh.read()
            with open(p, newline="") as f:
                yield p, list(csv.DictReader(f)), d, texts


def stem_of(name):
    base = os.path.basename(name)
    return base[:-4] if base.endswith(".csv") else base


def bw_mbs(r, which="med"):
    """Bandwidth of a row in MB/s (new CSVs: bw_MBs_*, old ones: bw_GBs_*)."""
    if f"bw_MBs_{which}" in r:
        return float(r[f"bw_MBs_{which}"])
    return float(r[f"bw_GBs_{which}"]) * 1000.0


def kind_of(rows):
    if not rows:
        return None
    keys = rows[0].keys()
    if "lat_us_med" in keys:
        return "bench"
    if "us_per_iter_med" in keys:
        return "pkp"
    if "t_step_med_us" in keys:
        return "stencil"
    return None


def by_variant(rows, xkey, yfn, lofn=None, hifn=None):
    """{variant: [(x, y, lo, hi)]}; yfn/lofn/hifn take a row (lo/hi: bars)."""
    lines = OrderedDict()
    for r in rows:
        try:
            y = yfn(r)
            lo = lofn(r) if lofn else y
            hi = hifn(r) if hifn else y
        except (TypeError, ValueError, KeyError):
            continue
        if y <= 0:
            continue
        lines.setdefault(r["variant"], []).append((float(r[xkey]), y, lo, hi))
    return lines


def col(key):
    return lambda r: float(r[key])


def plot(lines, xlabel, ylabel, title, path, info=(), logy=True, xfmt=size_label,
         legend_title=None):
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, pts in lines.items():
        pts.sort()
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        lo = [max(p[1] - p[2], 0) for p in pts]
        hi = [max(p[3] - p[1], 0) for p in pts]
        if any(lo) or any(hi):
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3, label=name)
        else:
            ax.plot(xs, ys, marker="o", ms=4, label=name)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    xs = sorted({p[0] for pts in lines.values() for p in pts})
    if xs:
        ax.set_xticks(xs)
        ax.set_xticklabels([xfmt(x) for x in xs], rotation=45, ha="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    sub = textwrap.fill(" · ".join(i for i in info if i), 105)
    ax.set_title(title + ("\n" + sub if sub else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, title=legend_title, title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def pivot(rows, xkey, fmt_cell, variants_first=()):
    """One row per x, one column per variant."""
    variants = list(OrderedDict.fromkeys(r["variant"] for r in rows))
    order = list(variants)
    variants.sort(key=lambda v: (v not in variants_first, order.index(v)))
    cells = defaultdict(dict)
    for r in rows:
        cells[int(float(r[xkey]))][r["variant"]] = fmt_cell(r)
    body = []
    for x in sorted(cells):
        body.append([size_label(x) if xkey == "bytes" else f"{x}²"] +
                    [cells[x].get(v, "-") for v in variants])
    return variants, body


BARS = "median; bars: min to max"


def bench_charts(rows, name, out, title, info):
    """Latency and bandwidth charts of mpixacc_bench rows, <name>-*.png."""
    lat_rows = [r for r in rows if int(r["lat_iters"]) > 0]
    bw_rows = [r for r in rows if int(r["bw_windows"]) > 0]
    pngs = []
    if lat_rows:
        pngs.append(plot(by_variant(lat_rows, "bytes", col("lat_us_med"), col("lat_us_min"),
                                    col("lat_us_max")),
                         "message size", "half-RTT, us", f"{title}: latency",
                         os.path.join(out, f"{name}-latency.png"), info, legend_title=BARS))
    if bw_rows:
        pngs.append(plot(by_variant(bw_rows, "bytes", bw_mbs, lambda r: bw_mbs(r, "min"),
                                    lambda r: bw_mbs(r, "max")),
                         "message size", "MB/s (10^6 B/s)", f"{title}: bandwidth",
                         os.path.join(out, f"{name}-bandwidth.png"), info, legend_title=BARS))
    return pngs


def fmt_mbs(x):
    return "%.0f" % x if x >= 100 else "%.2f" % x


def do_bench(rows, name, out, title, info):
    md = []
    lat_rows = [r for r in rows if int(r["lat_iters"]) > 0]
    bw_rows = [r for r in rows if int(r["bw_windows"]) > 0]
    pngs = bench_charts(rows, name, out, title, info)
    if lat_rows:
        v, body = pivot(lat_rows, "bytes", lambda r: "%.2f" % float(r["lat_us_med"]) +
                        ("" if r["check"] in ("ok", "unchecked") else " FAIL"))
        md.append("Half-RTT, µs (median; `floor*` timed on the GPU, the others with rank 0's "
                  "wall clock)\n\n" + md_table(["size"] + v, body))
        v, body = pivot(lat_rows, "bytes", lambda r: "%.2f" % float(r["cpu_us_per_iter"]))
        md.append("Calling thread's CPU time per round trip, µs (rank 0)\n\n" +
                  md_table(["size"] + v, body))
    if bw_rows:
        v, body = pivot(bw_rows, "bytes", lambda r: fmt_mbs(bw_mbs(r)))
        md.append("Bandwidth, MB/s (median)\n\n" + md_table(["size"] + v, body))
    return md, [p for p in pngs if p]


def do_pkp(rows, name, out, title, info):
    png = plot(by_variant(rows, "bytes", col("us_per_iter_med")), "message size",
               "time per iteration (us, median)", f"{title}: ping-kernel-pong",
               os.path.join(out, f"{name}.png"), info, logy=False)

    def cell(r):
        s = "%.2f" % float(r["us_per_iter_med"])
        if r.get("vs_staged_pct"):
            s += " (%+.1f%%)" % float(r["vs_staged_pct"])
        return s + ("" if r["check"] == "ok" else " FAIL")

    v, body = pivot(rows, "bytes", cell, ("staged",))
    k = rows[0].get("kernel_us", "?")
    md = [f"Ping-kernel-pong, µs per iteration (median; kernel {float(k):.0f} µs; in "
          "parentheses: vs staged)\n\n" + md_table(["size"] + v, body)]
    return md, [png] if png else []


def do_stencil(rows, name, out, title, info):
    png = plot(by_variant(rows, "n_per_rank", col("t_step_med_us")), "points per rank (n x n)",
               "time per step (us, median)", f"{title}: 2D stencil",
               os.path.join(out, f"{name}.png"), info, xfmt=lambda x: f"{int(x)}²")
    base = {int(r["n_per_rank"]): float(r["t_step_med_us"]) for r in rows
            if r["variant"] == "mpi"}

    def cell(r):
        t = float(r["t_step_med_us"])
        s = "%.1f" % t
        b = base.get(int(r["n_per_rank"]))
        if b and r["variant"] != "mpi":
            s += " (%+.1f%%)" % (100.0 * (t - b) / b)
        return s + ("" if r["check"] == "bitwise" else " " + r["check"])

    v, body = pivot(rows, "n_per_rank", cell, ("mpi",))
    r0 = rows[0]
    md = [f"2D stencil, {r0['ranks']} ranks ({r0['px']}×{r0['py']}), µs per step (median; "
          "in parentheses: vs mpi)\n\n" + md_table(["points/rank"] + v, body)]
    v, body = pivot(rows, "n_per_rank", lambda r: "%.0f%%" % float(r["blocked_pct"]), ("mpi",))
    md.append("Host thread blocked, % of the step\n\n" + md_table(["points/rank"] + v, body))
    return md, [png] if png else []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".", help="folder for the PNGs and tables (default .)")
    ap.add_argument("--tag", default="run", help="file name prefix (e.g. h200x2)")
    ap.add_argument("--title", default="", help="plot title prefix (default: the tag)")
    ap.add_argument("--info", action="append", default=[],
                    help="more provenance for the charts (repeatable), e.g. 'UCX 1.22.0'")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    handlers = {"bench": do_bench, "pkp": do_pkp, "stencil": do_stencil}
    title = a.title or a.tag
    all_md, all_png = [], []
    used = set()
    runs = OrderedDict()  # run -> [(stem, rows, info)] of its mpixacc_bench CSVs
    for name, rows, run, texts in read_inputs(a.files):
        k = kind_of(rows)
        if k is None:
            print(f"bench-plot: {name}: not a known benchmark CSV, skipped", file=sys.stderr)
            continue
        stem = stem_of(name)
        out_name = f"{a.tag}-{stem}"
        if out_name in used:  # the same CSV name from two runs: keep both
            out_name = f"{a.tag}-{os.path.basename(run.rstrip('/'))}-{stem}"
        used.add(out_name)
        info = provenance(texts) + program_info(texts.get(stem + ".txt", "")) + a.info
        md, png = handlers[k](rows, out_name, a.out, title, info)
        all_md += [f"#### {os.path.basename(name)}\n"] + md
        all_png += png
        if k == "bench":
            runs.setdefault(run, []).append((stem, rows, info))
    # every variant of a run on one chart, when the run has several bench CSVs
    for run, csvs in runs.items():
        if len(csvs) < 2:
            continue
        csvs.sort(key=lambda c: (c[0] != "bench", c[0]))  # the main run's names stay plain
        merged, seen = [], set()
        for stem, rows, _ in csvs:
            suffix = stem[len("bench-"):] if stem.startswith("bench-") else stem
            names = {r["variant"] for r in rows}
            for r in rows:
                r = dict(r)
                if r["variant"] in seen:
                    r["variant"] = f"{r['variant']} ({suffix})"
                merged.append(r)
            seen |= names
        name = f"{a.tag}-bench-all"
        if name in used:
            name = f"{a.tag}-{os.path.basename(run.rstrip('/'))}-bench-all"
        used.add(name)
        info = csvs[0][2]
        all_png += [p for p in bench_charts(merged, name, a.out,
                                            f"{title} (" + ", ".join(c[0] for c in csvs) + ")",
                                            info) if p]
    text = "\n\n".join(all_md) + "\n"
    with open(os.path.join(a.out, f"{a.tag}-tables.md"), "w") as f:
        f.write(text)
    print(text)
    if plt is None:
        print("bench-plot: matplotlib not installed, no PNGs (pip install matplotlib)",
              file=sys.stderr)
    for p in all_png:
        print(f"bench-plot: wrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
