#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Per thread of the benchmark's processes, over one point of an
rpcrdma-bench --ops file: how often it was woken per operation and how long
it then waited for a CPU, from a scheduler trace of the same run; and how
much of the point no operation at all completed (stalls over 1 ms).

    perf record -a -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_wakeup \\
        -o wake.data -- build/rpcrdma-bench --transports rdma,tirpc \\
        --workloads conns --duration 0.5 --ops run.ops
    perf script --ns -i wake.data -F comm,pid,tid,cpu,time,event,trace > wake.txt
    python3 bench/ops_wake.py wake.txt run.ops rdma 4

Record every CPU (-a): a thread's switch-in after another process's thread
is that thread's event, missing from a trace of the benchmark's processes
alone. A thread's "wait" runs from its wake-up (sched_wakeup), or from a
switch-out while runnable (preempted), to its next switch-in: time it was
runnable and not on a CPU; a wake-up that came while the thread was still
on its CPU, going to sleep, starts none. Per thread: wake-ups and
preemptions per operation, the waits' p50, p99 and sum, the part of the sum
that followed a wake-up, and the waits over 1 ms after a wake-up / after a
preemption. Only the threads of the processes with a thread named
rpcrdma-bench are listed (the benchmark and its forked servers: the
library's loops and provider threads, the callers, libtirpc's server).
docs/PERFORMANCE.md "Issue 16 part AD" shows what it found: the counts per
operation (wake-ups, preemptions) hardly move with the load; the waits do.
"""
import collections
import re
import sys

from ops_point import LINE, read_point


def point(opsf, tp, conns):
    t0, ops = read_point(opsf, tp, conns)
    if not ops:
        sys.exit("no point %s with %d connections in %s" % (tp, conns, opsf))
    return t0, [(s, e) for s, e, _tid in ops]


def main(a):
    if len(a) != 4:
        sys.exit(__doc__)
    txt, opsf, tp, conns = a[0], a[1], a[2], int(a[3])
    t0, ops = point(opsf, tp, conns)
    end = max(e for _, e in ops)
    n = len(ops)
    ends = sorted(e for _, e in ops)
    gaps = [b - x for x, b in zip(ends, ends[1:]) if b - x > 1e6]
    who = {}
    woken = collections.Counter()
    preempted = collections.Counter()
    since = {}
    waits = collections.defaultdict(list)
    after_wake = collections.Counter()
    long_after = collections.Counter()
    with open(txt) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            comm, pid, tid, _cpu, ts, ev, rest = m.groups()
            who[tid] = (pid, comm)
            t = float(ts) * 1e9
            if t < t0 or t > end:
                continue
            if ev.endswith('sched_wakeup'):
                p = re.search(r' pid=(\d+)', rest)
                if p:
                    woken[p.group(1)] += 1
                    since.setdefault(p.group(1), (t, 'w'))
            elif ev.endswith('sched_switch'):
                p = re.search(r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+)', rest)
                nx = re.search(r'next_pid=(\d+)', rest)
                if p and p.group(2).startswith('R'):
                    preempted[p.group(1)] += 1
                    since.setdefault(p.group(1), (t, 'p'))
                elif p:
                    # a wake-up while it was still on its CPU, going to
                    # sleep: it did not wait for a CPU from there
                    since.pop(p.group(1), None)
                if nx and nx.group(1) in since:
                    t1, why = since.pop(nx.group(1))
                    waits[nx.group(1)].append(t - t1)
                    if why == 'w':
                        after_wake[nx.group(1)] += t - t1
                    long_after[nx.group(1), why] += t - t1 > 1e6
    span = (end - t0) / 1e6
    print("%s, %d connections: %d operations in %.1f ms; no operation completed "
          "for %.1f ms (%d stalls over 1 ms, longest %.1f ms)"
          % (tp, conns, n, span, sum(gaps) / 1e6, len(gaps), max(gaps, default=0) / 1e6))
    print("%-7s %-7s %-16s %9s %9s %12s %12s %11s %11s %11s"
          % ("pid", "tid", "thread", "woken/op", "preempt/op", "wait p50 us", "wait p99 us",
             "wait sum ms", "of it woken", ">1ms w/p"))
    # the benchmark's processes: those with a thread named rpcrdma-bench
    # (its forked servers keep the name); others' rr-tests are not ours
    ours = {pid for pid, comm in who.values() if comm == 'rpcrdma-bench'}
    rows = []
    for tid, (pid, comm) in who.items():
        if pid not in ours or not (comm.startswith('rr-') or comm == 'rpcrdma-bench'):
            continue
        w = sorted(waits.get(tid, []))
        if not w and not woken[tid]:
            continue
        rows.append((-sum(w), pid, tid, comm, w))
    for _, pid, tid, comm, w in sorted(rows):
        q = (lambda p: w[int(p * (len(w) - 1))] / 1e3) if w else (lambda p: 0.0)
        print("%-7s %-7s %-16s %9.3f %9.3f %12.0f %12.0f %11.1f %11.1f %5d/%-5d"
              % (pid, tid, comm, woken[tid] / n, preempted[tid] / n, q(0.5), q(0.99),
                 sum(w) / 1e6, after_wake[tid] / 1e6, long_after[tid, 'w'],
                 long_after[tid, 'p']))


if __name__ == '__main__':
    main(sys.argv[1:])
