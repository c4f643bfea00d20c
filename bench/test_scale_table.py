#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Unit test of bench/scale_table.py on constructed rpcrdma-bench --json files.

    python3 bench/test_scale_table.py        (CTest: bench_scale_table)

Two files: one as a run with rounds writes it (per-round ratios, of which
the table gives median [min-max]: odd and even counts, a READ point not
available, a baseline not run) and one as a run without rounds (the single
ratios, computed from ops/s and the connect p50s). The table printed for
both together is compared line by line with the one worked out by hand,
and so is their --spread (how far apart the two files are); then the errors: a file that is not a list of records, no record of the
transport asked for. Last, bench/check_scale_json.py (CTest
bench_scale_rounds' checker) on a run whose libtirpc round made no call:
the bench writes that ratio null, and the checker must take it (it divided
by zero once) and refuse a ratio there. Exits 0 when every check passes, 1 otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scale_table.py")
CHECK = os.path.join(HERE, "check_scale_json.py")


def rec(tp, op, n, **kw):
    r = {"workload": "scale", "transport": tp, "variant": op, "op": op, "conns": n,
         "connections": n, "available": True, "ops_per_s": 100.0, "connect_p50_us": 100.0,
         "loadavg_start": [3.25, 2.0, 1.0], "loadavg_end": [4.5, 2.5, 1.0]}
    r.update(kw)
    return r


def with_rounds():
    """A run with rounds: ratios per round as the bench writes them."""
    recs = []
    for n in (1, 1000):
        for tp in ("tcp", "tirpc", "raw"):
            recs.append(rec(tp, "null", n, rounds=3))
            if n == 1:
                recs.append(rec(tp, "read64k", n, rounds=3))
    recs.append(rec("rdma", "null", 1, rounds=5,
                    ratio_tcp_rounds=[1.0, 0.5, 2.0, 1.5, 0.9],      # median 1.0
                    ratio_tirpc_rounds=[0.8, 0.7, 0.9],              # 0.8
                    ratio_raw_rounds=[1.1, 1.3],                     # even: 1.2
                    connect_ratio_tcp_rounds=[3.0, 2.0, 14.0]))      # 3.0
    recs.append(rec("rdma", "read64k", 1, rounds=4,
                    ratio_tirpc_rounds=[2.0, 3.0, 1.0, 4.0]))        # even: 2.5
    recs.append(rec("rdma", "null", 1000, rounds=2,
                    ratio_tcp_rounds=[0.25, 0.75], ratio_tirpc_rounds=[1.0, 1.0],
                    ratio_raw_rounds=[2.0, 4.0], connect_ratio_tcp_rounds=[3.5, 4.5]))
    recs.append({"workload": "scale", "transport": "rdma", "variant": "read64k",
                 "conns": 1000, "available": False, "reason": "failed: x"})
    recs.append({"workload": "null", "transport": "rdma", "available": True})   # not scale
    return recs


def without_rounds():
    """A run of a bench without rounds: only the single figures; no libtirpc at 1000."""
    recs = [
        rec("rdma", "null", 1, ops_per_s=200.0, connect_p50_us=300.0),
        rec("tcp", "null", 1, ops_per_s=100.0, connect_p50_us=100.0),
        rec("tirpc", "null", 1, ops_per_s=400.0),
        rec("raw", "null", 1, ops_per_s=250.0),
        rec("rdma", "read64k", 1, ops_per_s=50.0),
        rec("tirpc", "read64k", 1, ops_per_s=40.0),
        rec("rdma", "null", 1000, ops_per_s=90.0, connect_p50_us=330.0),
        rec("tcp", "null", 1000, ops_per_s=100.0, connect_p50_us=110.0),
        rec("raw", "null", 1000, ops_per_s=300.0),
    ]
    for r in recs:
        del r["loadavg_start"], r["loadavg_end"]
    return recs


EXPECTED = [
    "| N | NULL / tcp:// | NULL / libtirpc | NULL / raw | 64 KiB READ / libtirpc "
    "| connect p50 / tcp:// |",
    "|---:|---|---|---|---|---|",
    "| 1 | 1.00 [0.50-2.00], 2.00 | 0.80 [0.70-0.90], 0.50 | 1.20 [1.10-1.30], 0.80 "
    "| 2.50 [1.00-4.00], 1.25 | 3.00 [2.00-14.00], 3.00 |",
    "| 1,000 | 0.50 [0.25-0.75], 0.90 | 1.00 [1.00-1.00], n/a | 3.00 [2.00-4.00], 0.30 "
    "| n/a, n/a | 4.00 [3.50-4.50], 3.00 |",
    "",
    "Load average (1 minute) at the start and the end of each run: 3.2-4.5, n/a.",
]


def zero_round(tirpc_ratio):
    """Two rounds at N = 1; libtirpc's first slice made no call (a loaded
    machine); rdma's ratio to libtirpc is @tirpc_ratio (the bench: null)."""
    import check_scale_json
    recs = []
    ops = {"rdma": [100.0, 200.0], "tcp": [50.0, 100.0], "tirpc": [0.0, 100.0],
           "raw": [100.0, 100.0]}
    for tp, v in ops.items():
        r = {f: 0 for f in check_scale_json.KEEP}
        r.update(rec(tp, "null", 1, rounds=2, round_ops_per_s=v, connect_rounds=2,
                     round_connect_p50_us=[100.0, 100.0]))
        for base in ("tcp", "tirpc", "raw"):
            if base == tp:
                want = None
            elif 0 in ops[base]:
                want = tirpc_ratio if tp == "rdma" else None
            else:
                want = [x / y for x, y in zip(v, ops[base])]
            r["ratio_%s_rounds" % base] = want
            for stat, fn in (("median", lambda w: sum(w) / len(w)), ("min", min), ("max", max)):
                r["ratio_%s_%s" % (base, stat)] = fn(want) if want else None
        c = None if tp == "tcp" else [1.0, 1.0]
        r["connect_ratio_tcp_rounds"] = c
        for stat in ("median", "min", "max"):
            r["connect_ratio_tcp_" + stat] = 1.0 if c else None
        recs.append(r)
    return recs


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        a, b, bad = (os.path.join(d, x) for x in ("a.json", "b.json", "bad.json"))
        with open(a, "w") as f:
            json.dump(with_rounds(), f)
        with open(b, "w") as f:
            json.dump(without_rounds(), f)
        with open(bad, "w") as f:
            json.dump({"workload": "scale"}, f)

        rc, out, err = run(a, b)
        got = out.rstrip("\n").split("\n")
        if rc != 0 or got != EXPECTED:
            fails += 1
            print("FAIL: table of two files (rc %d, stderr %r)" % (rc, err))
            for i in range(max(len(got), len(EXPECTED))):
                g = got[i] if i < len(got) else "<none>"
                e = EXPECTED[i] if i < len(EXPECTED) else "<none>"
                if g != e:
                    print("  line %d\n    got:      %s\n    expected: %s" % (i + 1, g, e))

        # --spread: per cell, largest over smallest of the two files' figures (the first
        # file's median, the second's single ratio); one file alone: n/a
        rc, out, err = run("--spread", a, b)
        want = "| 1 | 2.00 | 1.60 | 1.50 | 2.00 | 1.00 |"
        if rc != 0 or want not in out.split("\n") or "| 1,000 | 1.80 | n/a | 10.00 | n/a | 1.33 |" \
                not in out.split("\n"):
            fails += 1
            print("FAIL: --spread: rc %d, out %r" % (rc, out))

        rc, out, err = run(bad)
        if rc != 1 or "not an rpcrdma-bench --json file" not in err:
            fails += 1
            print("FAIL: a file that is not a list: rc %d, stderr %r" % (rc, err))

        rc, out, err = run("--transport", "tirpc", b)
        if rc != 0 or "| 1 | 4.00 | 1.00 | 1.60 |" not in out:
            fails += 1
            print("FAIL: --transport tirpc: rc %d, out %r" % (rc, out))

        rc, out, err = run("--transport", "nosuch", a)
        if rc != 1 or "no scale record of nosuch" not in err:
            fails += 1
            print("FAIL: unknown transport: rc %d, stderr %r" % (rc, err))
    sys.path.insert(0, HERE)
    with tempfile.TemporaryDirectory() as d:
        for ratio, rc_want in ((None, 0), ([1.0, 2.0], 1)):
            f = os.path.join(d, "zero.json")
            with open(f, "w") as fh:
                json.dump(zero_round(ratio), fh)
            p = subprocess.run([sys.executable, CHECK, f, "2"], capture_output=True, text=True)
            if p.returncode != rc_want or (rc_want and "want null" not in p.stdout):
                fails += 1
                print("FAIL: check_scale_json, libtirpc round of 0 calls, rdma ratio %r: "
                      "rc %d, out %r, err %r" % (ratio, p.returncode, p.stdout, p.stderr))
    print("scale_table: %s" % ("FAILED" if fails else "all checks passed"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
