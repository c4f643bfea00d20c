#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The scale table of docs/PERFORMANCE.md from `rpcrdma-bench --workloads scale --json` files.

    for i in 1 2 3; do
        build/rpcrdma-bench --workloads scale --transports rdma,tcp,tirpc,raw \\
            --duration 0.3 --json /tmp/s$i.json
    done
    python3 bench/scale_table.py /tmp/s[1-3].json

One Markdown row per number of connections N, one column per ratio of
rdma:// (or --transport's) to a baseline measured in the same run: NULL
ops/s over tcp://, libtirpc and raw TCP, 64 KiB READ ops/s over libtirpc,
connect + first call p50 over tcp:// (lower is better there). A file from a
run with rounds (`--rounds K`, K > 1) gives "median [min-max]" of the
per-round ratios (each round's slices of the transports measured side by
side); an older file, or one run with --rounds 1, gives its single ratio.
Several files: one value per file in a cell, in the order given,
separated by ", ". "n/a": not measured in that file (a transport not run,
a point not available). A line under the table gives each file's load
average (1 minute) at the start and the end of its run, where recorded.

With --spread, the same rows and columns give instead how far apart the
files are: per cell, the largest of the files' figures (the median of a
file with rounds, the single ratio otherwise) over the smallest; 1.00:
every run agrees (docs/PERFORMANCE.md, "Issue 16 part AM: the method").
"""
import argparse
import json
import statistics
import sys

# (column heading, op of the record, baseline transport, connect?)
COLUMNS = [
    ("NULL / tcp://", "null", "tcp", False),
    ("NULL / libtirpc", "null", "tirpc", False),
    ("NULL / raw", "null", "raw", False),
    ("64 KiB READ / libtirpc", "read64k", "tirpc", False),
    ("connect p50 / tcp://", "null", "tcp", True),
]


def load(path):
    """The scale records of one file, keyed by (transport, op, N), and the file's load averages."""
    with open(path) as f:
        recs = json.load(f)
    if not isinstance(recs, list):
        raise ValueError(f"{path}: not an rpcrdma-bench --json file (a list of records)")
    out, load_avg = {}, None
    for r in recs:
        if r.get("workload") != "scale" or not r.get("available"):
            continue
        n = r.get("conns", r.get("connections"))
        out[(r["transport"], r.get("op", r.get("variant")), n)] = r
        if load_avg is None and "loadavg_start" in r:
            load_avg = (r["loadavg_start"][0], r["loadavg_end"][0])
    return out, load_avg


def rounds_of(rec, base, prefix):
    """The per-round ratios the bench wrote for @rec over @base, or None."""
    v = rec.get(f"{prefix}_{base}_rounds")
    return v if isinstance(v, list) and len(v) > 1 else None


def single(rec, peer, base, connect):
    """The one ratio of a run without rounds: @rec over @peer (same N)."""
    if connect:
        a, b = rec.get("connect_p50_us", -1), peer.get("connect_p50_us", -1)
    else:
        a, b = rec.get("ops_per_s", -1), peer.get("ops_per_s", -1)
    if a is None or b is None or a < 0 or b <= 0:
        return None
    return a / b


def value(recs, tp, op, base, connect, n):
    """One file's figure for one cell: (median, min, max) of the rounds, (r, None, None) for a
    single ratio, or None."""
    rec = recs.get((tp, op, n))
    peer = recs.get((base, op, n))
    if rec is None or peer is None:
        return None
    per_round = rounds_of(rec, base, "connect_ratio" if connect else "ratio")
    if per_round:
        return statistics.median(per_round), min(per_round), max(per_round)
    r = single(rec, peer, base, connect)
    return None if r is None else (r, None, None)


def cell_one(recs, tp, op, base, connect, n):
    """One file's value for one cell: "m [lo-hi]", "r", or "n/a"."""
    v = value(recs, tp, op, base, connect, n)
    if v is None:
        return "n/a"
    if v[1] is None:
        return "%.2f" % v[0]
    return "%.2f [%.2f-%.2f]" % v


def spread_table(files, tp="rdma"):
    """How far apart the files' figures (medians, or single ratios) are in each cell: the
    largest over the smallest, "n/a" with fewer than two files measuring it."""
    ns = sorted({k[2] for recs, _ in files for k in recs if k[0] == tp})
    lines = ["| N | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---:|" + "---|" * len(COLUMNS)]
    for n in ns:
        cells = []
        for _, op, base, connect in COLUMNS:
            vs = [v[0] for v in (value(recs, tp, op, base, connect, n) for recs, _ in files)
                  if v is not None and v[0] > 0]
            cells.append("%.2f" % (max(vs) / min(vs)) if len(vs) > 1 else "n/a")
        lines.append("| %s | " % format(n, ",") + " | ".join(cells) + " |")
    return lines


def table(files, tp="rdma"):
    """The Markdown table (a list of lines) for the loaded @files [(recs, load)]."""
    ns = sorted({k[2] for recs, _ in files for k in recs if k[0] == tp})
    lines = ["| N | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---:|" + "---|" * len(COLUMNS)]
    for n in ns:
        cells = [", ".join(cell_one(recs, tp, op, base, connect, n) for recs, _ in files)
                 for _, op, base, connect in COLUMNS]
        lines.append("| %s | " % format(n, ",") + " | ".join(cells) + " |")
    loads = ["%.1f-%.1f" % la if la else "n/a" for _, la in files]
    lines.append("")
    lines.append("Load average (1 minute) at the start and the end of each run: " +
                 ", ".join(loads) + ".")
    return lines


def main(argv):
    ap = argparse.ArgumentParser(description="The scale table of docs/PERFORMANCE.md from "
                                 "rpcrdma-bench --workloads scale --json files.")
    ap.add_argument("files", nargs="+", metavar="FILE.json")
    ap.add_argument("--transport", default="rdma",
                    help="the transport over the baselines (default rdma)")
    ap.add_argument("--spread", action="store_true",
                    help="instead: per cell, the largest of the files' figures (medians, or "
                    "single ratios) over the smallest: how much they move between runs")
    args = ap.parse_args(argv)
    try:
        files = [load(p) for p in args.files]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        print(f"scale_table.py: {e}", file=sys.stderr)
        return 1
    if not any(k[0] == args.transport for recs, _ in files for k in recs):
        print(f"scale_table.py: no scale record of {args.transport} in the files",
              file=sys.stderr)
        return 1
    print("\n".join((spread_table if args.spread else table)(files, args.transport)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
