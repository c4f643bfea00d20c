#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Medians over several `rpcrdma-bench --json` files: issue 7's targets.

    for i in 1 2 3 4 5; do build/rpcrdma-bench --quick --json /tmp/b$i.json; done
    python3 bench/summary.py /tmp/b*.json

Every ratio is taken inside one run (rdma:// against raw TCP or libtirpc
measured by the same run), then the median of the per-run ratios is printed
with the per-run values, so a load burst in one run shows as an outlier
instead of moving the verdict.

A second section follows (runs from an rpcrdma-bench that writes
`ratio_raw_spin` and `cpu_*_us_per_op`; older files print n/a there): per
target, the ratio against the raw TCP floor that waits the same way as the
library (variant "pingspin": spin up to the budget, then sleep) and the CPU
time per operation, client + server, of each side of the comparison.
"""
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        return [r for r in json.load(f) if r.get("available")]


def find(recs, wl, tp, size=None, variant=None, outs=None):
    for r in recs:
        if r["workload"] != wl or r["transport"] != tp:
            continue
        if size is not None and r["size"] != size:
            continue
        if variant is not None and r["variant"] != variant:
            continue
        if outs is not None and r["outstanding"] != outs:
            continue
        return r
    return None


def line(name, vals, target, better_high):
    vals = [v for v in vals if v is not None]
    if not vals:
        print(f"{name:44s} n/a")
        return
    med = statistics.median(vals)
    ok = med >= target if better_high else med <= target
    runs = " ".join(f"{v:.2f}" for v in vals)
    cmp = ">=" if better_high else "<="
    print(f"{name:44s} median {med:5.2f}  (runs: {runs})  target {cmp} {target}: "
          f"{'met' if ok else 'NOT met'}")


def main(paths):
    runs = [load(p) for p in paths]
    print(f"{len(runs)} runs: {' '.join(paths)}")

    def ratio(f):
        out = []
        for recs in runs:
            try:
                out.append(f(recs))
            except (TypeError, ZeroDivisionError, KeyError):
                out.append(None)
        return out

    line("NULL p50 rdma / raw ping-pong p50",
         ratio(lambda r: find(r, "null", "rdma")["p50_us"] /
               find(r, "null", "raw", variant="pingpong")["p50_us"]), 1.10, False)
    line("NULL p50 rdma / libtirpc p50",
         ratio(lambda r: find(r, "null", "rdma")["p50_us"] /
               find(r, "null", "tirpc")["p50_us"]), 1.0, False)
    sizes = sorted({r["size"] for recs in runs for r in recs if r["workload"] == "read"})
    for wl in ("read", "write"):
        for s in sizes:
            label = f"{s >> 20}M" if s >= 1 << 20 else f"{s >> 10}K"
            line(f"{wl.upper()} {label} MB/s rdma / libtirpc",
                 ratio(lambda r: find(r, wl, "rdma", s)["throughput_MBps"] /
                       find(r, wl, "tirpc", s)["throughput_MBps"]), 1.0, True)
            if s == 1 << 20:
                line(f"{wl.upper()} {label} MB/s rdma / raw stream",
                     ratio(lambda r: find(r, wl, "rdma", s)["throughput_MBps"] /
                           find(r, wl, "raw", s, "stream")["throughput_MBps"]), 0.95, True)
    line("32 outstanding / 1 (READ 4K ops/s, rdma)",
         ratio(lambda r: find(r, "read_outstanding", "rdma", outs=32)["ops_per_s"] /
               find(r, "read_outstanding", "rdma", outs=1)["ops_per_s"]), 1.8, True)
    for var in ("tmpfs", "disk"):
        line(f"push / durable pull WRITE 4K p50 ({var})",
             ratio(lambda r: find(r, "write_4k_push_commit", "rdma", variant=var)["p50_us"] /
                   find(r, "write_4k_pull_sync", "rdma", variant=var)["p50_us"]), 1.0, False)
    line("push (tmpfs) / non-durable pull WRITE 4K p50",
         ratio(lambda r: find(r, "write_4k_push_commit", "rdma", variant="tmpfs")["p50_us"] /
               find(r, "write_4k_pull", "rdma")["p50_us"]), 1.0, False)
    rt = ratio(lambda r: (find(r, "write_4k_push_commit", "rdma", variant="tmpfs")
                          ["round_trips_per_op"],
                          find(r, "write_4k_pull", "rdma")["round_trips_per_op"]))
    rt = [x for x in rt if x]
    if rt:
        print(f"{'round trips per op, push / pull WRITE 4K':44s} "
              + " ".join(f"{a:.2f}/{b:.2f}" for a, b in rt))
    spin_and_cpu(runs, ratio)


def cpu(rec):
    """(client, server) CPU us per operation of a record; None if unmeasured."""
    if rec is None:
        return None
    c = rec.get("cpu_client_us_per_op", -1)
    s = rec.get("cpu_server_us_per_op", -1)
    if c is None or s is None or c < 0 or s < 0:
        return None
    return (c, s)


def info(name, vals):
    """A ratio without a target: median and per-run values."""
    vals = [v for v in vals if v is not None]
    if not vals:
        print(f"{name:44s} n/a")
        return
    runs = " ".join(f"{v:.2f}" for v in vals)
    print(f"{name:44s} median {statistics.median(vals):5.2f}  (runs: {runs})")


def cpu_line(name, sides):
    """CPU us/op medians over runs of each (label, per-run (client, server))."""
    parts = []
    for label, pairs in sides:
        pairs = [p for p in pairs if p is not None]
        if not pairs:
            parts.append(f"{label} n/a")
            continue
        c = statistics.median(p[0] for p in pairs)
        s = statistics.median(p[1] for p in pairs)
        tot = statistics.median(p[0] + p[1] for p in pairs)
        parts.append(f"{label} {tot:.1f} ({c:.1f}+{s:.1f})")
    print(f"{name:44s} " + "  ".join(parts))


def spin_and_cpu(runs, ratio):
    budgets = sorted({r["spin_us"] for recs in runs for r in recs if "spin_us" in r})
    print()
    print("-- against the raw floor that waits the same way (raw ping-spin: spin up to the "
          "budget, then sleep; budget "
          + (", ".join(f"{b} us" for b in budgets) if budgets else "n/a")
          + ") and CPU us per op, medians: total (client+server)")

    def cpus(wl, tp, size=None, variant=None, outs=None):
        return [cpu(find(recs, wl, tp, size, variant, outs)) for recs in runs]

    line("NULL p50 rdma / raw ping-spin p50",
         ratio(lambda r: find(r, "null", "rdma")["p50_us"] /
               find(r, "null", "raw", variant="pingspin")["p50_us"]), 1.10, False)
    info("NULL p50 raw ping-spin / raw ping-pong",
         ratio(lambda r: find(r, "null", "raw", variant="pingspin")["p50_us"] /
               find(r, "null", "raw", variant="pingpong")["p50_us"]))
    cpu_line("NULL CPU us/op",
             [("rdma", cpus("null", "rdma")), ("tirpc", cpus("null", "tirpc")),
              ("raw", cpus("null", "raw", variant="pingpong")),
              ("raw-spin", cpus("null", "raw", variant="pingspin"))])
    sizes = sorted({r["size"] for recs in runs for r in recs if r["workload"] == "read"})
    for wl in ("read", "write"):
        for s in sizes:
            label = f"{s >> 20}M" if s >= 1 << 20 else f"{s >> 10}K"
            info(f"{wl.upper()} {label} MB/s rdma / raw ping-spin",
                 ratio(lambda r: find(r, wl, "rdma", s)["throughput_MBps"] /
                       find(r, wl, "raw", s, "pingspin")["throughput_MBps"]))
            cpu_line(f"{wl.upper()} {label} CPU us/op",
                     [("rdma", cpus(wl, "rdma", s)), ("tirpc", cpus(wl, "tirpc", s)),
                      ("raw-spin", cpus(wl, "raw", s, "pingspin")),
                      ("stream", cpus(wl, "raw", s, "stream"))])
    cpu_line("READ 4K outstanding CPU us/op rdma",
             [(f"{o}:", cpus("read_outstanding", "rdma", outs=o)) for o in (1, 32)])
    for var in ("tmpfs", "disk"):
        cpu_line(f"WRITE 4K ({var}) CPU us/op rdma",
                 [("push", cpus("write_4k_push_commit", "rdma", variant=var)),
                  ("durable pull", cpus("write_4k_pull_sync", "rdma", variant=var))])

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
