#!/usr/bin/env python3
"""PageRank benchmark: the bridge's PageRank (the examples/pagerank driver
against a live bridge) side by side with a sparse power iteration on the same
graph, in one run: CuPy (cuSPARSE SpMV) on a GPU machine, SciPy on a CPU one.

    bench_pagerank.py --build BUILD --mode persistent --ref cupy --scales 20 22
    bench_pagerank.py --build BUILD --mode cpu --ref scipy --scales 16 18
    bench_pagerank.py --build BUILD --compare-build OLD_BUILD --mode persistent --ref cupy --scales 20 22

For each Kronecker scale (edge factor 16) a bridge is started, the driver loads the graph, iterates to the
tolerance and reports its time per iteration (every message round included;
--ways two also runs it with a senders' round per iteration, for comparing);
then the bridge is stopped (its resident kernels would share the GPU
with the reference) and the reference runs the same number of iterations of the same recurrence
(networkx's, float32 like the grains' ranks) on the CSR the driver wrote, timed
after a warm-up (the median of three runs): the speed comparison.

Accuracy is measured against the exact PageRank: the same recurrence in float64 run until it no
longer moves (L1 step below 1e-13), not against the float32 reference, whose own sums are float32.
Rows give the driver's L1 to it (l1_vs_exact), the float32 reference's (ref_l1_vs_exact), and the
driver's host-verified error bound.

--compare-build runs the same graphs with a second build (bridge and driver), in the same run and
on the same device: e.g. the build before the grains' sums went to double, for old-vs-new figures.
--devices 0 0,1 runs each graph on a bridge with each devices list (its config's `devices`), rows
labelled by list, and adds per scale the speed-up of every list over the first and the L1 between
their ranks. A run the arena refuses (a graph too large for one device's arena_mb) is a row marked
refused, not a failure: `--arena-mb 2048 --scales 24 --devices 0 0,1` shows one GPU refusing
what two hold.
--repeat N runs each build N times, alternating, so that a slow moment of a shared host does not
fall on one build only; "bridge ms/it" is then the median run, and "steady" the median iteration
after each run's first (which also pays for the first activation of the grains).
Prints a table and a JSON line."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np


def load_csr(path):
    with open(path, "rb") as f:
        magic = f.read(8)
        if magic != b"GBPRCSR1":
            sys.exit(f"{path}: not a GBPRCSR1 file")
        n, m = np.frombuffer(f.read(16), dtype="<u8")
        n, m = int(n), int(m)
        in_off = np.frombuffer(f.read(8 * (n + 1)), dtype="<u8")
        in_src = np.frombuffer(f.read(4 * m), dtype="<u4")
        outdeg = np.frombuffer(f.read(4 * n), dtype="<u4")
    return n, m, in_off, in_src, outdeg


def reference(ref, n, m, in_off, in_src, outdeg, iters, d):
    """Power iteration x' = d * (A x + dangling / n) + (1 - d) / n with
    A[v, u] = 1 / outdeg[u] for each edge u -> v, in float32. Returns (seconds
    per iteration, ranks as float64 numpy). iters None: the exact PageRank
    (float64, until it no longer moves), untimed."""
    inv = np.where(outdeg > 0, 1.0 / np.maximum(outdeg, 1), 0.0).astype(np.float32)
    data = inv[in_src]
    if ref == "cupy":
        import cupy as cp
        import cupyx.scipy.sparse as cps
        A = cps.csr_matrix((cp.asarray(data), cp.asarray(in_src.astype(np.int32)),
                            cp.asarray(in_off.astype(np.int64))), shape=(n, n))
        dangling = cp.asarray(outdeg == 0)
        xp = cp
        sync = cp.cuda.Device().synchronize
    else:
        import scipy.sparse as sps
        A = sps.csr_matrix((data, in_src.astype(np.int32), in_off.astype(np.int64)), shape=(n, n))
        dangling = outdeg == 0
        xp = np
        sync = lambda: None

    def run(k):
        x = xp.full(n, 1.0 / n, dtype=xp.float32)
        for _ in range(k):
            dsum = float(x[dangling].sum())  # one device->host read per iteration, as the driver's
            x = d * (A @ x) + xp.float32(d * dsum / n + (1.0 - d) / n)
        sync()
        return x

    if iters is None:  # the exact PageRank: float64, until it no longer moves
        A64 = A.astype(xp.float64)
        x = xp.full(n, 1.0 / n, dtype=xp.float64)
        for _ in range(2000):
            dsum = float(x[dangling].sum())
            nx_ = d * (A64 @ x) + (d * dsum / n + (1.0 - d) / n)
            step = float(xp.abs(nx_ - x).sum())
            x = nx_
            if step < 1e-13:
                break
        if ref == "cupy":
            x = x.get()
        return 0.0, np.asarray(x, dtype=np.float64)

    run(3)  # warm-up (cuSPARSE handles, kernels, memory pool)
    times = []
    for _ in range(3):  # the median of three timed runs: one run was seen 4x slow on a shared host
        t0 = time.perf_counter()
        x = run(iters)
        times.append((time.perf_counter() - t0) / max(iters, 1))
    dt = sorted(times)[1]
    if ref == "cupy":
        x = x.get()
    return dt, np.asarray(x, dtype=np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--compare-build", default=None,
                    help="a second build whose bridge and driver run the same graphs in the same run "
                         "(e.g. main before a change), rows labelled by build")
    ap.add_argument("--mode", default="persistent")
    ap.add_argument("--ref", choices=["cupy", "scipy"], default="cupy")
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    ap.add_argument("--edgefactor", type=int, default=16)
    ap.add_argument("--partitions", type=int, default=0, help="0: the driver's default for the mode")
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--arena-mb", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of the driver per build and way, builds alternating; a row gives the median "
                         "run (bridge ms/it) and the median iteration after each run's first (steady)")
    ap.add_argument("--ways", nargs="+", choices=["one", "two"], default=["one"],
                    help="one: a round of messages per iteration (the driver's default); "
                         "two: --two-rounds, a senders' round too; several: each in turn, same graph")
    ap.add_argument("--devices", nargs="+", default=[None],
                    help="devices lists (e.g. 0 0,1): each graph runs on a bridge with each, in turn")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="gbprbench.")
    sock = f"ipc://{tmp}/bridge.sock"
    cfg = os.path.join(tmp, "bridge.cfg")
    gbctl = os.path.join(a.build, "client/gbctl")

    def start_bridge(build, devices):
        with open(cfg, "w") as f:
            f.write(f'endpoints = [ "{sock}" ];\nmode = "{a.mode}";\narena_mb = {a.arena_mb};\n')
            if devices:
                f.write(f"devices = [{devices}];\n")
        log = open(os.path.join(tmp, "bridge.log"), "a")
        b = subprocess.Popen([os.path.join(build, "bridge/gpubridge"), "--config", cfg], stderr=log)
        for _ in range(300):
            if subprocess.run([gbctl, "--endpoint", sock, "--timeout", "200", "list"],
                              capture_output=True).returncode == 0:
                return b
            if b.poll() is not None:
                sys.exit(f"bridge exited: see {log.name}")
            time.sleep(0.1)
        sys.exit("bridge did not start")

    def stop_bridge(b):
        b.send_signal(signal.SIGTERM)
        try:
            b.wait(timeout=60)
        except subprocess.TimeoutExpired:
            b.kill()

    rows = []
    for s in a.scales:
        csr = os.path.join(tmp, f"k{s}.csr")
        rbin = os.path.join(tmp, f"k{s}.ranks")
        runs = []
        builds = [("new", a.build)] + ([("old", a.compare_build)] if a.compare_build else [])
        builds = [(lb if devs is None else (devs if len(builds) == 1 else f"{lb}@{devs}"), b, devs)
                  for lb, b in builds for devs in a.devices]
        if a.repeat < 1:
            sys.exit("--repeat: at least 1")
        per = {}  # (label, way) -> [(result, per-iteration ms)]
        refused = []
        for _, (label, build, devs), way in [(r, b, w) for r in range(a.repeat) for b in builds for w in a.ways]:
            cmd = [os.path.join(build, "examples/pagerank/pagerank"), "-e", sock, "--kron", str(s),
                   "--edgefactor", str(a.edgefactor), "-p", str(a.partitions), "-t", str(a.tolerance),
                   "-k", "0", "-j", "--write-csr", csr, "--ranks-bin", rbin]
            if way == "two":
                cmd.append("--two-rounds")
            print("$", " ".join(cmd), flush=True)
            bridge = start_bridge(build, devs)
            try:
                p = subprocess.run(cmd, capture_output=True, text=True)
            finally:
                stop_bridge(bridge)  # the reference runs on an idle device / idle cores
            sys.stderr.write("\n".join(l for l in p.stderr.splitlines() if not l.startswith("loading:"))[-3000:]
                             + "\n")
            if p.returncode != 0 and "arena_mb" in p.stderr:
                refused.append({"scale": s, "build": label, "refused": p.stderr.strip().splitlines()[-1]})
                continue
            if p.returncode != 0:
                print(p.stdout)
                sys.exit(f"driver failed at scale {s}")
            res = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
            its = [float(m.group(1)) for m in re.finditer(r"^iteration +\d+:.* ([0-9.]+) ms \(", p.stderr, re.M)]
            if (label, way) not in per:
                runs.append((label, way, res, np.fromfile(rbin, dtype="<f8")))
            per.setdefault((label, way), []).append((res, its))
        rows.extend(refused)
        if not runs:
            continue
        n, m, in_off, in_src, outdeg = load_csr(csr)
        _, exact = reference(a.ref, n, m, in_off, in_src, outdeg, None, 0.85)
        for label, way, res, ours in runs:
            tries = per[(label, way)]
            res = dict(res)
            res["ms_per_iter"] = float(np.median([t[0]["ms_per_iter"] for t in tries]))
            steady = [x for _, its in tries for x in its[1:]]
            ref_dt, ref_x = reference(a.ref, n, m, in_off, in_src, outdeg, res["iterations"], 0.85)
            rows.append({"scale": s, "build": label, "vertices": n, "edges": m, "iterations": res["iterations"],
                         "mode": res["mode"], "rounds": way, "partitions": res["partitions"],
                         "bridge_ms": res["ms_per_iter"], "runs": len(tries),
                         "bridge_runs_ms": [t[0]["ms_per_iter"] for t in tries],
                         "steady_ms": float(np.median(steady)) if steady else None,
                         "ref": a.ref, "ref_ms": ref_dt * 1e3,
                         "ratio": res["ms_per_iter"] / (ref_dt * 1e3),
                         "bridge_gedges": m / res["ms_per_iter"] / 1e6,
                         "l1_delta": res["l1_delta"], "error_bound": res.get("error_bound"),
                         "l1_vs_exact": float(np.abs(ours - exact).sum()),
                         "ref_l1_vs_exact": float(np.abs(ref_x - exact).sum()),
                         "l1_vs_ref": float(np.abs(ours - ref_x).sum())})
        first = [r for r in rows if r.get("scale") == s and "refused" not in r]
        for r, (_, _, _, ours) in zip(first[1:], runs[1:]):  # against the first list's run
            r["speedup_vs_first"] = first[0]["bridge_ms"] / r["bridge_ms"]
            r["l1_vs_first"] = float(np.abs(ours - runs[0][3]).sum())
        for f in (csr, rbin):
            if os.path.exists(f):
                os.unlink(f)
    print(f"\n{'scale':>5} {'build':>5} {'vertices':>10} {'edges':>11} {'iters':>5} {'mode':>10} {'rounds':>6} "
          f"{'bridge ms/it':>12} {'steady':>7} {a.ref + ' ms/it':>12} {'ratio':>6} {'G edges/s':>9} {'L1 vs exact':>11} "
          f"{'ref L1 vs exact':>15} {'bound':>9}")
    for r in rows:
        if "refused" in r:
            print(f"{r['scale']:>5} {r['build']:>5} refused: {r['refused']}")
            continue
        bound = f"{r['error_bound']:.2e}" if r["error_bound"] is not None else "-"
        print(f"{r['scale']:>5} {r['build']:>5} {r['vertices']:>10} {r['edges']:>11} {r['iterations']:>5} "
              f"{r['mode']:>10} {r['rounds']:>6} {r['bridge_ms']:>12.3f} "
              f"{r['steady_ms'] if r['steady_ms'] is not None else float('nan'):>7.3f} {r['ref_ms']:>12.3f} {r['ratio']:>6.2f} "
              f"{r['bridge_gedges']:>9.2f} {r['l1_vs_exact']:>11.2e} {r['ref_l1_vs_exact']:>15.2e} {bound:>9}")
    for r in rows:
        if "speedup_vs_first" in r:
            print(f"scale {r['scale']}: {r['build']} is {r['speedup_vs_first']:.2f}x the first list's speed per "
                  f"iteration; L1 between their ranks {r['l1_vs_first']:.2e}")
    print(json.dumps({"bench": "pagerank", "rows": rows}))


if __name__ == "__main__":
    main()
