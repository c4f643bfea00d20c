#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks the scale records of an `rpcrdma-bench --workloads scale --rounds K --json` file.

    python3 bench/check_scale_json.py FILE.json K      (CTest: bench_scale_rounds)
    python3 bench/check_scale_json.py FILE.json K N,N  (CTest: bench_scale_conns)

What is checked is the bookkeeping, never a timing: every measured scale
record keeps the fields it always had and has K rounds (each slice's ops/s
and each connect round's p50, K of each); each per-round ratio to tcp://,
libtirpc and raw equals the two records' figures of that round divided
(null when a round of either has no figure: a slice with no call), and its median, min and max are those of the list; a record's ratio to its
own transport is null; every record carries the run's load average.
With a third argument (the run's --conns list), the scale records are of
exactly those connection counts, each measured.
Exits 0 when all holds, 1 with the first few faults otherwise.
"""
import json
import statistics
import sys

KEEP = ["workload", "transport", "variant", "size", "outstanding", "connections", "available",
        "ops", "seconds", "p50_us", "p99_us", "throughput_MBps", "ops_per_s", "ratio_raw",
        "ratio_tirpc", "cpu_client_us_per_op", "cpu_server_us_per_op", "conns", "op",
        "server_rss_kib_per_conn", "client_rss_kib_per_conn", "client_threads",
        "server_threads", "fds_per_conn", "server_fds_per_conn", "connect_p50_us"]


def close(a, b):
    return abs(a - b) <= 1e-3 * max(1.0, abs(a), abs(b))


def check(recs, k):
    faults = []
    scale = {(r["transport"], r["op"], r["conns"]): r for r in recs
             if r.get("workload") == "scale" and r.get("available")}
    if not scale:
        faults.append("no measured scale record")
    for r in recs:
        for f in ("loadavg_start", "loadavg_end"):
            if not (isinstance(r.get(f), list) and len(r[f]) == 3):
                faults.append("%s %s: no %s" % (r.get("workload"), r.get("transport"), f))
    for (tp, op, n), r in scale.items():
        where = "%s %s N=%d" % (tp, op, n)
        faults += ["%s: field %s missing" % (where, f) for f in KEEP if f not in r]
        if r.get("rounds") != k or len(r.get("round_ops_per_s", [])) != k:
            faults.append("%s: %r rounds, %d slices, want %d" %
                          (where, r.get("rounds"), len(r.get("round_ops_per_s", [])), k))
            continue
        if r.get("connect_rounds") != k or len(r.get("round_connect_p50_us", [])) != k:
            faults.append("%s: %r connect rounds, want %d" % (where, r.get("connect_rounds"), k))
            continue
        for base, connect in (("tcp", False), ("tirpc", False), ("raw", False), ("tcp", True)):
            prefix = ("connect_ratio_" if connect else "ratio_") + base
            peer = scale.get((base, op, n))
            got = r.get(prefix + "_rounds")
            if base == tp or peer is None:
                if got is not None:
                    faults.append("%s: %s_rounds should be null" % (where, prefix))
                continue
            key = "round_connect_p50_us" if connect else "round_ops_per_s"
            if any(b <= 0 or a < 0 for a, b in zip(r[key], peer[key])):
                # a round with no figure (a loaded machine can finish a
                # baseline's short slice with no call): no ratio at all
                if got is not None:
                    faults.append("%s: %s_rounds %r, want null (a round with no figure)" %
                                  (where, prefix, got))
                continue
            want = [a / b for a, b in zip(r[key], peer[key])]
            if not isinstance(got, list) or len(got) != k or \
                    not all(close(x, y) for x, y in zip(got, want)):
                faults.append("%s: %s_rounds %r, want %r" % (where, prefix, got, want))
                continue
            for stat, fn in (("median", statistics.median), ("min", min), ("max", max)):
                if not close(r.get("%s_%s" % (prefix, stat), -1), fn(want)):
                    faults.append("%s: %s_%s %r, want %r" %
                                  (where, prefix, stat, r.get(prefix + "_" + stat), fn(want)))
    return faults


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: check_scale_json.py FILE.json K [N,N...]", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        recs = json.load(f)
    faults = check(recs, int(argv[1]))
    if len(argv) == 3:
        want = sorted(int(n) for n in argv[2].split(","))
        got = sorted({r["conns"] for r in recs if r.get("workload") == "scale"})
        done = sorted({r["conns"] for r in recs
                       if r.get("workload") == "scale" and r.get("available")})
        if got != want or done != want:
            faults.append("connection counts %r (measured %r), want %r" % (got, done, want))
    for f in faults[:10]:
        print("FAULT: " + f)
    print("check_scale_json: %d scale records, %s" %
          (sum(1 for r in recs if r.get("workload") == "scale"),
           "%d faults" % len(faults) if faults else "all consistent"))
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
