#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Where the slow operations of an rpcrdma-bench --ops file spent their time,
from a scheduler trace of the same run.

    perf sched record -k CLOCK_MONOTONIC -o sched.data -- \\
        build/rpcrdma-bench --transports rdma,tirpc --workloads conns \\
        --duration 0.5 --ops run.ops
    perf script --ns -i sched.data -F comm,pid,tid,cpu,time,event,trace > sched.txt
    python3 bench/ops_sched.py sched.txt run.ops rdma 1 PIDS [MIN_US [SERVER_TIDS]]

PIDS: comma-separated process ids (the bench client and the transport's
forked server; `awk '{print $1, $2}' sched.txt | sort | uniq -c` shows
them). For every operation of the point (transport, connections) that took
more than MIN_US (default 1000), the trace is replayed and each stretch of
the operation (several at once with several connections) is put in one class: one of those processes' threads on a
CPU; none on a CPU but some runnable (waiting for a CPU: the names of the
runnable ones and of what ran on the CPUs meanwhile); all of them asleep
(waiting for a timer, the wire or a wake-up that did not come). With
SERVER_TIDS (comma-separated thread ids) the class is instead the state of
the operation's caller and of those threads (run, rq: runnable, sl:
asleep). Prints the classes by time, largest first.
docs/PERFORMANCE.md "Issue 16 part AA" shows what it found.

A wake-up that comes while its target is still on its CPU, going to sleep,
shows as the target's switch-out after its waking: it is counted asleep
until it runs again, though it was runnable; look at such stretches with
the trace itself before calling them lost wake-ups.
"""
import collections
import re
import sys

from ops_point import LINE, read_point


def main(a):
    sched, opsf, tp, conns, pids = a[0], a[1], a[2], int(a[3]), set(a[4].split(','))
    min_ns = float(a[5]) * 1e3 if len(a) > 5 else 1e6
    srv = a[6].split(',') if len(a) > 6 else None
    _t0, ops = read_point(opsf, tp, conns)
    slow = sorted((s, e, tid) for s, e, tid in ops if e - s > min_ns)
    tgid, events = {}, []
    with open(sched) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            comm, pid, tid, cpu, ts, ev, rest = m.groups()
            tgid[tid] = pid
            events.append((int(ts.replace('.', '')), cpu, ev, rest))
    ours = lambda t: tgid.get(t) in pids
    state, name, oncpu = {}, {}, {}
    total = collections.Counter()
    nxt, active, last = 0, [], None

    def klass(op):
        if srv:
            return 'caller %s | %s' % (state.get(op[2], '?'),
                                       ' '.join('%s %s' % (t, state.get(t, '?')) for t in srv))
        sts = [state[t] for t in state if ours(t)]
        if 'run' in sts:
            return 'ours on a CPU'
        if 'rq' in sts:
            return 'runnable: %s | on the CPUs: %s' % (
                ','.join(sorted(name.get(t, t) for t in state if ours(t) and state[t] == 'rq')),
                ','.join(sorted(oncpu.values())))
        return 'all ours asleep'

    for t, cpu, ev, rest in events:
        if last is not None:
            # the stretch [last, t) of every slow operation it overlaps
            # (several at once with several connections)
            while nxt < len(slow) and slow[nxt][0] < t:
                active.append(slow[nxt])
                nxt += 1
            active = [op for op in active if op[1] > last]
            for op in active:
                lo, hi = max(last, op[0]), min(t, op[1])
                if hi > lo:
                    total[klass(op)] += hi - lo
        last = t
        if ev == 'sched:sched_switch':
            m = re.search(r'prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)', rest)
            if not m:
                continue
            prev, st, ncomm, npid = m.groups()
            state[prev] = 'rq' if st.startswith('R') else 'sl'
            state[npid] = 'run'
            mark = '*' if ours(npid) else ''
            oncpu[cpu] = mark + ncomm
            name[npid] = '%s%s/%s' % (mark, ncomm, npid)
        elif ev in ('sched:sched_waking', 'sched:sched_wakeup_new'):
            m = re.search(r' pid=(\d+)', rest)
            if m and state.get(m.group(1)) != 'run':
                state[m.group(1)] = 'rq'
    print('%d operations over %.0f us of %d, %.1f ms in all' % (
        len(slow), min_ns / 1e3, len(ops), sum(b - a for a, b, _ in slow) / 1e6))
    if True:
        coarse = collections.Counter()
        for c, v in total.items():
            coarse[c.split(':')[0] if not srv else c.split(' |')[0]] += v
        print('  ' + ', '.join('%s %.1f%%' % (c, 100.0 * v / max(1, sum(coarse.values())))
                               for c, v in coarse.most_common()))
    for c, v in total.most_common(15):
        print('  %9.2f ms  %s' % (v / 1e6, c))


if __name__ == '__main__':
    if len(sys.argv) < 6:
        print(__doc__.strip())
        sys.exit(2)
    main(sys.argv[1:])
