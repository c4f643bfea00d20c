# SPDX-License-Identifier: BSD-2-Clause
"""What bench/ops_sched.py and bench/ops_wake.py share: the pattern of a
`perf sched script` line, and one point of an rpcrdma-bench --ops file (its
operations placed on CLOCK_MONOTONIC, with the thread that ran each).
"""
import re
import sys

# `perf sched script`: comm pid/tid [cpu] time: event: rest
LINE = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$')


def read_point(opsf, tp, conns):
    """The point of transport @tp with @conns connections in @opsf: its
    start (t0, ns) and its operations as (start_ns, end_ns, thread), in
    file order; exits with a message when the file has no such point."""
    t0, ops = None, []
    with open(opsf) as f:
        for line in f:
            w = line.split()
            if line.startswith('#'):
                if w[2] == tp and int(w[9]) == conns:
                    t0 = int(w[13])
            elif w[1] == tp and int(w[2]) == conns:
                ops.append((int(w[4]), int(w[5]), w[3]))
    if t0 is None:
        sys.exit("no point %s with %d connections in %s" % (tp, conns, opsf))
    return t0, [(s + t0, s + t0 + d, tid) for s, d, tid in ops]
