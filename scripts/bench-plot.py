#!/usr/bin/env python3
"""bench-plot.py - turn the benchmarks' CSV files into PNG plots and Markdown tables.

    scripts/bench-plot.py [--out DIR] [--tag TAG] FILE...

FILE: CSVs written with --csv by examples/bench/mpixacc_bench,
examples/ping_kernel_pong/ping_kernel_pong or examples/stencil2d/stencil2d
(recognised by their header), or a results.tar.gz from scripts/gpu-test.sh
--apps (its CSVs are read). For each CSV kind it writes, into DIR (default
.), PNG plots with one line per variant - bench: latency and bandwidth vs
message size; ping-kernel-pong: time per iteration vs size; stencil: time
per step vs points per rank - named <tag>-<kind>-*.png, and it prints the
Markdown tables (also written to DIR/<tag>-tables.md).

Needs matplotlib (pip install matplotlib) for the plots; without it the
tables are still printed.
"""
import argparse
import csv
import io
import os
import sys
import tarfile
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


def read_inputs(paths):
    """Yield (name, rows) for every CSV in paths (files or .tar.gz)."""
    for p in paths:
        if p.endswith((".tar.gz", ".tgz")):
            with tarfile.open(p) as tf:
                for m in tf.getmembers():
                    if m.isfile() and m.name.endswith(".csv"):
                        text = tf.extractfile(m).read().decode()
                        yield m.name, list(csv.DictReader(io.StringIO(text)))
        else:
            with open(p, newline="") as f:
                yield p, list(csv.DictReader(f))


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


def by_variant(rows, xkey, ykey):
    lines = OrderedDict()
    for r in rows:
        try:
            y = float(r[ykey])
        except (TypeError, ValueError):
            continue
        if y <= 0:
            continue
        lines.setdefault(r["variant"], []).append((float(r[xkey]), y))
    return lines


def plot(lines, xlabel, ylabel, title, path, logy=True, xfmt=size_label):
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in lines.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    xs = sorted({p[0] for pts in lines.values() for p in pts})
    if xs:
        ax.set_xticks(xs)
        ax.set_xticklabels([xfmt(x) for x in xs], rotation=45, ha="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
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


def do_bench(rows, tag, out, title):
    md = []
    lat_rows = [r for r in rows if int(r["lat_iters"]) > 0]
    bw_rows = [r for r in rows if int(r["bw_windows"]) > 0]
    pngs = []
    if lat_rows:
        pngs.append(plot(by_variant(lat_rows, "bytes", "lat_us_med"), "message size",
                         "half-RTT (us, median)", f"{title}: latency",
                         os.path.join(out, f"{tag}-bench-latency.png")))
        v, body = pivot(lat_rows, "bytes", lambda r: "%.2f" % float(r["lat_us_med"]) +
                        ("" if r["check"] in ("ok", "unchecked") else " FAIL"))
        md.append("Half-RTT, µs (median; `floor` timed on the GPU, the others with rank 0's "
                  "wall clock)\n\n" + md_table(["size"] + v, body))
        v, body = pivot(lat_rows, "bytes", lambda r: "%.2f" % float(r["cpu_us_per_iter"]))
        md.append("Calling thread's CPU time per round trip, µs (rank 0)\n\n" +
                  md_table(["size"] + v, body))
    if bw_rows:
        pngs.append(plot(by_variant(bw_rows, "bytes", "bw_GBs_med"), "message size",
                         "GB/s (median)", f"{title}: bandwidth",
                         os.path.join(out, f"{tag}-bench-bandwidth.png")))
        v, body = pivot(bw_rows, "bytes", lambda r: "%.1f" % float(r["bw_GBs_med"]))
        md.append("Bandwidth, GB/s (median)\n\n" + md_table(["size"] + v, body))
    return md, [p for p in pngs if p]


def do_pkp(rows, tag, out, title):
    png = plot(by_variant(rows, "bytes", "us_per_iter_med"), "message size",
               "time per iteration (us, median)", f"{title}: ping-kernel-pong",
               os.path.join(out, f"{tag}-pkp.png"), logy=False)

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


def do_stencil(rows, tag, out, title):
    png = plot(by_variant(rows, "n_per_rank", "t_step_med_us"), "points per rank (n x n)",
               "time per step (us, median)", f"{title}: 2D stencil",
               os.path.join(out, f"{tag}-stencil.png"), xfmt=lambda x: f"{int(x)}²")
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
    ap.add_argument("--tag", default="run", help="file name prefix (e.g. h200x2-2026-11-22)")
    ap.add_argument("--title", default="", help="plot title prefix (e.g. 2xH200)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    handlers = {"bench": do_bench, "pkp": do_pkp, "stencil": do_stencil}
    all_md, all_png = [], []
    for name, rows in read_inputs(a.files):
        k = kind_of(rows)
        if k is None:
            print(f"bench-plot: {name}: not a known benchmark CSV, skipped", file=sys.stderr)
            continue
        md, png = handlers[k](rows, a.tag, a.out, a.title or a.tag)
        all_md += [f"#### {os.path.basename(name)}\n"] + md
        all_png += png
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
