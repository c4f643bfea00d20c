#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# What each process asks of the kernel per NULL call with C connections
# active (issue 16 "NULL at 100 connections >= 1.0x tcp://"), for rdma://
# and tcp:// alike: bench_nullcall serves (server rdma|tcp) and its
# "clients" mode keeps one asynchronous call in flight on each of C
# connections, K calls each; `perf stat` counts, on both processes, system
# calls by kind (epoll_wait split into non-blocking looks, timeout 0, and
# waits that may sleep), context switches, wake-ups made and packets sent,
# and prints them per call with each process's CPU per call (task-clock;
# the client's user and system split from its getrusage, the server's per
# thread from /proc, 10 ms ticks). Counts do not depend on the machine's
# load; the CPU figures do (a shared machine: compare in alternated runs).
# The progress threads' spin is off unless --spin US is given, so that a
# wait is a system call and not a spin of the budget.
#   bash bench/percall-counts.sh [--spin US] BUILD rdma|tcp [C [K]]
# (BUILD: the build directory holding bench_nullcall; C 100, K 2000 by
# default; needs perf with tracepoint access.) docs/PERFORMANCE.md "Issue
# 16 part JA" has the table this prints, and what it showed.
set -e
spin=off
if [ "$1" = "--spin" ]; then spin=$2; shift 2; fi
B=${1:?usage: percall-counts.sh [--spin US] BUILD rdma|tcp [C [K]]}
T=${2:?transport rdma or tcp}
C=${3:-100}
K=${4:-2000}
BIN=$B/bench_nullcall
[ -x "$BIN" ] || BIN=$B/bench/bench_nullcall
export RPCRDMA_SOFT_SPIN_US=$spin
W=$(mktemp -d /tmp/percall.XXXXXX)
trap 'rm -rf "$W"' EXIT
EV=task-clock,context-switches,raw_syscalls:sys_enter
for s in recvfrom recvmsg read sendto sendmsg write epoll_ctl futex; do
	EV=$EV,syscalls:sys_enter_$s
done
EV="$EV,sched:sched_wakeup,net:net_dev_xmit"
EW=(-e syscalls:sys_enter_epoll_wait --filter 'timeout == 0'
    -e syscalls:sys_enter_epoll_wait --filter 'timeout != 0')

"$BIN" server "$T" > "$W/srv" 2>&1 &
SP=$!
for _ in $(seq 50); do grep -q port "$W/srv" && break; sleep 0.1; done
P=$(sed -n 's/^port \([0-9]*\).*/\1/p' "$W/srv")
[ -n "$P" ] || { echo "no server port" >&2; kill $SP; exit 1; }
snap() { for t in /proc/$SP/task/*; do
	echo "$(cat "$t/comm" | tr ' ' _) $(awk '{print $14, $15}' "$t/stat")"; done; }
perf stat -x, -e "$EV" "${EW[@]}" -p $SP -o "$W/s.stat" &
PP=$!
sleep 0.5
snap > "$W/t0"
perf stat -x, -e "$EV" "${EW[@]}" -o "$W/c.stat" -- \
	"$BIN" clients "$T://127.0.0.1:$P" "$C" "$K" > "$W/cout" 2>&1
snap > "$W/t1"
kill -INT $PP; wait $PP 2>/dev/null || true
kill $SP; wait $SP 2>/dev/null || true
grep calls "$W/cout" || { cat "$W/cout" >&2; exit 1; }
python3 - "$W" $((C * K)) <<'EOF'
import sys
w, n = sys.argv[1], int(sys.argv[2])
def rd(f):
    d, ew = {}, 0
    for l in open(f):
        p = l.strip().split(',')
        if len(p) < 3 or l.startswith('#'):
            continue
        try:
            v = float(p[0])
        except ValueError:
            continue
        k = p[2].replace('syscalls:sys_enter_', '')
        if k == 'epoll_wait':   # the two filtered counters, in order
            k = 'epoll_wait(0)' if ew == 0 else 'epoll_wait(may sleep)'
            ew += 1
        d[k] = d.get(k, 0) + v
    return d
c, s = rd(w + '/c.stat'), rd(w + '/s.stat')
print('per call            client     server')
for k in s:
    f = 1000.0 if k == 'task-clock' else 1.0   # msec -> us
    name = 'CPU us (task-clock)' if k == 'task-clock' else k
    print('  %-24s %8.3f %10.3f' % (name, c.get(k, 0) * f / n, s[k] * f / n))
t0 = {l.split()[0]: l.split()[1:] for l in open(w + '/t0')}
print('server threads, us per call (user, system):')
for l in open(w + '/t1'):
    p = l.split()
    if p[0] in t0:
        a = t0[p[0]]
        print('  %-24s %6.2f %6.2f' % (p[0], (int(p[1]) - int(a[0])) * 1e4 / n,
                                       (int(p[2]) - int(a[1])) * 1e4 / n))
EOF
