#!/usr/bin/python3
"""Plots from the benchmarks' JSON lines.

Every benchmark (bench_ring, bench_bridge, bench_pr_rounds, bench_pagerank.py,
soak) ends its output with one JSON line, {"bench": NAME, ...}. Give this
script their outputs (whole logs are fine: lines that are not JSON objects
are skipped), or docs/perf/recorded.jsonl, the figures docs/performance.md
quotes. Each input record is one series in the plots; several runs of one
benchmark are drawn side by side.

    /usr/bin/python3 bench/plot.py --out /tmp/plots docs/perf/recorded.jsonl
    build/bench/bench_ring > ring.log; /usr/bin/python3 bench/plot.py ring.log
    /usr/bin/python3 bench/plot.py --summary ring.log     # a text table, no matplotlib

The series label is the record's "label" key if it has one (recorded.jsonl
does), else FILE:LINE. Drawing needs Debian's python3-matplotlib
(apt-get install python3-matplotlib); --summary needs nothing beyond Python.
"""
import argparse
import json
import os
import sys


def read_records(paths):
    """(label, record) for every JSON object line with a "bench" key."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    sys.exit(f"{path}:{no}: not valid JSON: {e}")
                if isinstance(rec, dict) and "bench" in rec:
                    out.append((rec.get("label", f"{os.path.basename(path)}:{no}"), rec))
    return out


# What each benchmark's rows hold: (row key naming a bar group, [(field, axis title, scale)]).
RING_LATENCY = [("median_us", "median round trip (us)", 1), ("p99_us", "p99 round trip (us)", 1)]
RING_RATES = [("batch_256_msgs_per_s", "batches of 256 (M msg/s)", 1e-6),
              ("batch_4096_msgs_per_s", "batches of 4096 (M msg/s)", 1e-6),
              ("stream_256_msgs_per_s", "streamed, 256 a publish (M msg/s)", 1e-6),
              ("stream_4096_msgs_per_s", "streamed, 4096 a publish (M msg/s)", 1e-6),
              ("drain_msgs_per_s", "drain (M msg/s)", 1e-6)]
BRIDGE = [("median_us", "median round trip (us)", 1), ("p99_us", "p99 round trip (us)", 1),
          ("single_msgs_per_s", "one request at a time (M msg/s)", 1e-6),
          ("batch64_msgs_per_s", "batches of 64 (M msg/s)", 1e-6)]
PAGERANK = [("bridge_ms", "bridge ms per iteration", 1), ("ref_ms", "reference ms per iteration", 1),
            ("bridge_gedges", "bridge G edges/s", 1)]
PR_ROUNDS = [("sender_ms", "senders' round (ms)", 1), ("aggregator_ms", "aggregators' round (ms)", 1),
             ("aggregator_next_ms", "aggregators with next contributions (ms)", 1)]
SOAK = [("ok", "requests answered correctly", 1), ("rss_end_kib", "bridge RSS at the end (KiB)", 1)]


def pagerank_key(row):
    return f"s{row.get('scale')} {row.get('mode')} {row.get('rounds')}"


def tables(records):
    """bench name -> list of (figure name, metrics, {label: {group: row}}, group order)."""
    by = {}
    for label, rec in records:
        by.setdefault(rec["bench"], []).append((label, rec))
    out = {}

    def collect(name, recs, rows_of, key_of, metrics):
        series, groups = {}, []
        for label, rec in recs:
            for row in rows_of(rec):
                g = key_of(row)
                if g not in groups:
                    groups.append(g)
                series.setdefault(label, {})[g] = row
        out.setdefault(name.split("_")[0], []).append((name, metrics, series, groups))

    for label_recs in [by.get("ring", [])]:
        if label_recs:
            collect("ring_latency", label_recs, lambda r: r.get("rows", []), lambda r: r["path"], RING_LATENCY)
            collect("ring_rates", label_recs, lambda r: r.get("rows", []), lambda r: r["path"], RING_RATES)
            collect("ring_ratios", label_recs, lambda r: r.get("paired_ratios", []), lambda r: r["what"],
                    [("median", "paired ratio to its floor (median; bars: min-max)", 1)])
    if by.get("bridge"):
        collect("bridge", by["bridge"], lambda r: r.get("rows", []), lambda r: r["path"], BRIDGE)
    if by.get("pagerank"):
        collect("pagerank", by["pagerank"], lambda r: r.get("rows", []), pagerank_key, PAGERANK)
    if by.get("pr_rounds"):
        collect("pr_rounds", by["pr_rounds"], lambda r: [r], lambda r: f"scale {r.get('scale')} {r.get('mode')}",
                PR_ROUNDS)
    if by.get("soak"):
        collect("soak", by["soak"], lambda r: [r], lambda r: f"{r.get('mode', '?')}, {r.get('seconds')} s", SOAK)
    return out


def summary(figs):
    for bench in figs.values():
        for name, metrics, series, groups in bench:
            print(f"== {name}")
            for label, rows in series.items():
                print(f"-- {label}")
                for g in groups:
                    row = rows.get(g)
                    if row is None:
                        continue
                    vals = [f"{field}={row[field] * scale:.4g}" for field, _, scale in metrics
                            if isinstance(row.get(field), (int, float))]
                    print(f"   {g}: {', '.join(vals) if vals else '-'}")


def draw(figs, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: drawing needs matplotlib: apt-get install python3-matplotlib "
                 "(or use --summary for a text table)")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for bench in figs.values():
        for name, metrics, series, groups in bench:
            used = [m for m in metrics
                    if any(isinstance(rows.get(g, {}).get(m[0]), (int, float)) for rows in series.values()
                           for g in groups)]
            if not used:
                continue
            groups = [g for g in groups
                      if any(isinstance(rows.get(g, {}).get(m[0]), (int, float)) for rows in series.values()
                             for m in used)]
            fig, axes = plt.subplots(len(used), 1, figsize=(max(6, 1.1 * len(groups) + 3), 2.8 * len(used)),
                                     squeeze=False)
            width = 0.8 / max(1, len(series))
            for ax, (field, title, scale) in zip(axes[:, 0], used):
                for k, (label, rows) in enumerate(series.items()):
                    xs, ys, lo, hi = [], [], [], []
                    for i, g in enumerate(groups):
                        v = rows.get(g, {}).get(field)
                        if not isinstance(v, (int, float)):
                            continue
                        xs.append(i - 0.4 + width * (k + 0.5))
                        ys.append(v * scale)
                        lo.append(v * scale - rows[g].get("min", v) * scale)
                        hi.append(rows[g].get("max", v) * scale - v * scale)
                    err = [lo, hi] if any(lo) or any(hi) else None
                    ax.bar(xs, ys, width, yerr=err, capsize=3, label=label)
                ax.set_title(title, fontsize=10)
                ax.set_xticks(range(len(groups)))
                ax.set_xticklabels(groups, rotation=25, ha="right", fontsize=8)
                ax.grid(axis="y", alpha=0.3)
            axes[0, 0].legend(fontsize=8)
            fig.tight_layout()
            path = os.path.join(out_dir, f"{name}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="benchmark outputs or JSON-line files")
    ap.add_argument("--out", default="plots", help="folder for the PNG files (default: plots)")
    ap.add_argument("--summary", action="store_true", help="print the figures as text; draw nothing")
    a = ap.parse_args()
    records = read_records(a.files)
    if not records:
        sys.exit("plot.py: no benchmark JSON lines ({\"bench\": ...}) in " + ", ".join(a.files))
    figs = tables(records)
    if a.summary:
        summary(figs)
        return
    for path in draw(figs, a.out):
        print(path)


if __name__ == "__main__":
    main()
