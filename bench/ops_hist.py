#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Latency histograms of rpcrdma-bench --ops files.

Reads one or more files written by `rpcrdma-bench --ops FILE` (several runs
are pooled per point) and prints, per transport and number of connections:
operations, mean, p50, p99, p99.9 and max latency (us), the share of the
point's time spent in operations over 1 ms, how many took over 1 and 3 ms,
and a histogram of the latencies (bucket upper bounds in us in the heading).
The mean against the p50 says how much of a throughput ratio is decided by
the tail (docs/PERFORMANCE.md "Issue 16 part AA").

    python3 bench/ops_hist.py run1.ops run2.ops ...
"""
import sys
from collections import OrderedDict

EDGES = [20, 40, 60, 80, 100, 150, 200, 300, 500, 1000, 2000, 3000, 4000, 5000, 8000, float("inf")]


def main(paths):
    pts = OrderedDict()
    for fn in paths:
        with open(fn) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                wl, tp, conns, _tid, _start, ns = line.split()
                pts.setdefault((wl, tp, int(conns)), []).append(int(ns))
    print("%-12s %-6s %5s %7s %8s %8s %8s %8s %9s %7s %6s %6s  | ops per bucket, us <= %s" % (
        "workload", "xprt", "conns", "ops", "mean", "p50", "p99", "p99.9", "max", ">1ms %t",
        "n>1ms", "n>3ms", ",".join(str(int(e)) for e in EDGES[:-1]) + ",more"))
    for (wl, tp, n), v in sorted(pts.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        v.sort()
        k = len(v)
        tot = sum(v)
        q = lambda p: v[min(k - 1, int(k * p))] / 1e3
        b = [0] * len(EDGES)
        for d in v:
            for i, e in enumerate(EDGES):
                if d / 1e3 <= e:
                    b[i] += 1
                    break
        slow = sum(d for d in v if d > 1e6)
        print("%-12s %-6s %5d %7d %8.1f %8.1f %8.1f %8.1f %9.1f %6.1f%% %6d %6d  | %s" % (
            wl, tp, n, k, tot / k / 1e3, q(0.5), q(0.99), q(0.999), v[-1] / 1e3,
            100.0 * slow / tot if tot else 0, sum(1 for d in v if d > 1e6),
            sum(1 for d in v if d > 3e6), " ".join(map(str, b))))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    main(sys.argv[1:])
