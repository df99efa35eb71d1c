#!/usr/bin/env python3
"""Compares a ranks file written by `pagerank --ranks` with networkx's
pagerank on the same graph and prints the L1 difference.

    check_networkx.py EDGES RANKS [--damping 0.85] [--max-l1 1e-4]

EDGES is the SNAP-style edge list the driver read (or wrote with
--write-edges); it becomes a networkx DiGraph (duplicate edges merged,
self-loops kept), with every vertex of RANKS added so that isolated vertices
count as they do for the driver. Exit status 0 when the L1 difference is at
most --max-l1, 1 when not, 2 on bad input. Needs Debian's python3-networkx
(run it with /usr/bin/python3)."""
import argparse
import sys


def read_pairs(path, what):
    rows = []
    # As the driver reads it: a byte order mark skipped, comments in any
    # encoding (a byte that is not UTF-8 in an id still fails int()), lines
    # split at \n only (a lone \r inside a comment stays in the comment).
    with open(path, encoding="utf-8-sig", errors="replace", newline="\n") as f:
        for no, line in enumerate(f, 1):
            s = line.lstrip(" \t").rstrip(" \t\r\n")  # the driver's blanks
            if not s or s.startswith(("#", "%")):
                continue
            if "\r" in s:
                sys.exit(f"{path}:{no}: a carriage return before or between the fields ({what})")
            parts = s.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{no}: expected two fields ({what}), got {len(parts)}")
            rows.append(parts)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("edges")
    ap.add_argument("ranks")
    ap.add_argument("--damping", type=float, default=0.85)
    ap.add_argument("--max-l1", type=float, default=1e-4)
    a = ap.parse_args()
    try:
        import networkx as nx
    except ImportError:
        print("check_networkx: networkx is missing (apt install python3-networkx; use /usr/bin/python3)",
              file=sys.stderr)
        return 2
    try:
        g = nx.DiGraph()
        g.add_edges_from((int(u), int(v)) for u, v in read_pairs(a.edges, "source target"))
        ours = {int(v): float(r) for v, r in read_pairs(a.ranks, "vertex rank")}
    except (OSError, ValueError) as e:
        print(f"check_networkx: {e}", file=sys.stderr)
        return 2
    g.add_nodes_from(ours)
    if g.number_of_nodes() != len(ours):
        print(f"check_networkx: the graph has {g.number_of_nodes()} vertices, the ranks file {len(ours)}",
              file=sys.stderr)
        return 1
    # networkx stops once an iteration's L1 step is under n * tol, and its
    # error is then up to d / (1 - d) times that step: tol small enough that
    # the reference is within a hundredth of --max-l1, whatever n and d.
    n, d = max(1, g.number_of_nodes()), a.damping
    tol = 1e-12 if d <= 0 else min(1e-12, max(1e-17, a.max_l1 * (1 - d) / (100 * d * n)))
    max_iter = 100000
    try:
        ref = nx.pagerank(g, alpha=d, tol=tol, max_iter=max_iter)
    except nx.PowerIterationFailedConvergence:
        print(f"check_networkx: networkx did not converge in {max_iter} iterations at damping {d} "
              f"(tol {tol:.1e})", file=sys.stderr)
        return 2
    l1 = sum(abs(ours[v] - ref[v]) for v in ref)
    worst = max(ref, key=lambda v: abs(ours[v] - ref[v]))
    print(f"networkx check: {g.number_of_nodes()} vertices, {g.number_of_edges()} edges: "
          f"L1 difference {l1:.3e} (limit {a.max_l1:.0e}); largest at vertex {worst}: "
          f"ours {ours[worst]:.9g}, networkx {ref[worst]:.9g}")
    return 0 if l1 <= a.max_l1 else 1


if __name__ == "__main__":
    sys.exit(main())
