#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Client user-space instructions per synchronous NULL call, measured with
# callgrind in one run for rdma://, tcp:// and libtirpc (issue 16 "Per-call
# cost"): for each transport a server (bench_nullcall server, handlers on
# the receiving thread) runs in the background, and the client makes 1000
# then 3000 calls under valgrind --tool=callgrind; the difference of the
# two instruction counts divided by 2000 is the cost of one call, the
# connection's setup and teardown cancelled out. Instructions are counted,
# not timed: the figures do not depend on the machine's load.
#
#   sh bench/callgrind-null.sh [--server] BUILD_DIR [N1 N2]
#
# Prints one line per transport (instructions per call, and the ratio to
# libtirpc's). RPCRDMA_SOFT_SPIN_US=off: a spinning wait's instruction
# count depends on timing (the figure would not be reproducible).
# Needs valgrind; tirpc needs a build with libtirpc (else reported n/a).
#
# --read SIZE counts a synchronous READ of SIZE bytes instead of a NULL call
# (bench_nullcall read: the result placed through a Write chunk into the
# client's sink on rdma://, inline on tcp:// and libtirpc), on either side
# (docs/PERFORMANCE.md "Issue 16 part AU"):
#
#   sh bench/callgrind-null.sh [--server] --read 65536 BUILD_DIR [N1 N2]
#
# --async (with --read, rdma:// and tcp:// only) makes the READs as
# rpcrdma-bench's scale workload does at N = 1: one asynchronous READ in
# flight, the next one started from the completion callback on the client's
# progress loop (bench_nullcall areads URL 1 N SIZE; its first synchronous
# NULL call, the connect's, is counted once in each run and cancels out).
#
# --server counts the server's instructions instead: the server runs under
# callgrind, a native client makes N1 then N2 calls, and callgrind_control
# dumps the server's counts before and after each client run; the
# difference of the two runs' counts over N2 - N1 is again one call (each
# run has one connection's accept and teardown). The server's idle work
# while the clients run (its loops' periodic wake-ups) is counted too: a
# few instructions per call at most at these lengths.
#
# --one-loop (with --server) runs the server with one progress thread
# (RPCRDMA_PROGRESS_THREADS=1). By default the server has one per core
# (two here) and they take connections in turn: the N1 run's connection
# lands on the listener's loop (its tick always armed), the N2 run's on
# another, so the default figure, (c2 * N2 - c1 * N1) / (N2 - N1) with c1,
# c2 the two runs' costs per call, mixes two loops and a saving on the
# first run's loop can show as a cost (docs/PERFORMANCE.md "Issue 16 part
# CF"). With --one-loop both runs are on the same loop (the listener's):
# the figure is that loop's cost per call. The default is kept so that
# earlier figures stay comparable; the two are different quantities
# (docs/PERFORMANCE.md "Issue 16 part CK").
#
#   sh bench/callgrind-null.sh --server --one-loop [--read SIZE] BUILD_DIR [N1 N2]
set -u
SIDE=client
SIZE=
ASYNC=
ONE_LOOP=
while :; do
	case "${1:-}" in
	--server) SIDE=server; shift ;;
	--read) SIZE=${2:?--read SIZE}; shift 2 ;;
	--async) ASYNC=1; shift ;;
	--one-loop) ONE_LOOP=1; shift ;;
	*) break ;;
	esac
done
B=${1:?usage: callgrind-null.sh [--server [--one-loop]] [--read SIZE [--async]] BUILD_DIR [N1 N2]}
N1=${2:-1000}
N2=${3:-3000}
BIN="$B/bench_nullcall"
[ -x "$BIN" ] || { echo "callgrind-null.sh: $BIN not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "callgrind-null.sh: valgrind not installed" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'kill $(cat "$TMP"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$TMP"' EXIT
export RPCRDMA_SOFT_SPIN_US=off
UNIT=call
[ -n "$SIZE" ] && UNIT=read
[ -n "$ASYNC" ] && [ -z "$SIZE" ] && { echo "callgrind-null.sh: --async needs --read SIZE" >&2; exit 2; }
[ -n "$ONE_LOOP" ] && [ "$SIDE" != server ] && { echo "callgrind-null.sh: --one-loop needs --server" >&2; exit 2; }

# the client's command line for $2 operations against $1
client_args() {
	if [ -n "$ASYNC" ]; then
		echo areads "$1" 1 "$2" "$SIZE"
	elif [ -n "$SIZE" ]; then
		echo read "$1" "$2" "$SIZE"
	else
		echo client "$1" "$2"
	fi
}

# instructions (Ir) of one client run of $2 calls to $1
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$BIN" $(client_args "$1" "$2") \
		>"$TMP/cg.log" 2>&1 || { echo fail; return; }
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$TMP/cg.out" | head -1
}

# the server's instructions (pid $1, callgrind output $2) during one native
# client run of $4 calls to $3: the dump after it (the counts since the
# previous dump)
srv_ir() {
	n=$(ls "$2".* 2>/dev/null | wc -l)
	"$BIN" $(client_args "$3" "$4") >/dev/null 2>&1 || { echo fail; return; }
	callgrind_control -d "$1" >/dev/null 2>&1 || { echo fail; return; }
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		[ -f "$2.$((n + 1))" ] && break
		sleep 0.3
	done
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$2.$((n + 1))" 2>/dev/null | head -1
}

TIRPC_PER=
TRANSPORTS="tirpc rdma tcp"
[ -n "$ASYNC" ] && TRANSPORTS="rdma tcp"   # libtirpc has no asynchronous calls
for t in $TRANSPORTS; do
	if [ "$SIDE" = server ]; then
		if [ -n "$ONE_LOOP" ]; then
			RPCRDMA_PROGRESS_THREADS=1 valgrind --tool=callgrind \
				--callgrind-out-file="$TMP/srv.$t" "$BIN" server "$t" \
				>"$TMP/$t.port" 2>"$TMP/$t.err" &
		else
			valgrind --tool=callgrind --callgrind-out-file="$TMP/srv.$t" "$BIN" server "$t" \
				>"$TMP/$t.port" 2>"$TMP/$t.err" &
		fi
	else
		"$BIN" server "$t" >"$TMP/$t.port" 2>"$TMP/$t.err" &
	fi
	echo $! >"$TMP/$t.pid"
	for i in $(seq 1 60); do
		grep -q port "$TMP/$t.port" 2>/dev/null && break
		sleep 0.3
	done
	PORT=$(sed -n 's/^port //p' "$TMP/$t.port")
	if [ -z "$PORT" ]; then
		printf '%-6s n/a (%s)\n' "$t" "$(grep -v '^==' "$TMP/$t.err" | head -1)"
		continue
	fi
	if [ "$SIDE" = server ]; then
		SP=$(cat "$TMP/$t.pid")
		callgrind_control -d "$SP" >/dev/null 2>&1   # start and setup apart
		for i in $(seq 1 20); do
			[ -f "$TMP/srv.$t.1" ] && break
			sleep 0.3
		done
		a=$(srv_ir "$SP" "$TMP/srv.$t" "$t://127.0.0.1:$PORT" "$N1")
		b=$(srv_ir "$SP" "$TMP/srv.$t" "$t://127.0.0.1:$PORT" "$N2")
	else
		a=$(ir "$t://127.0.0.1:$PORT" "$N1")
		b=$(ir "$t://127.0.0.1:$PORT" "$N2")
	fi
	kill "$(cat "$TMP/$t.pid")" 2>/dev/null
	if [ "$a" = fail ] || [ "$b" = fail ] || [ -z "$a" ] || [ -z "$b" ]; then
		printf '%-6s n/a (client failed)\n' "$t"
		continue
	fi
	per=$(( (b - a) / (N2 - N1) ))
	if [ "$t" = tirpc ]; then
		TIRPC_PER=$per
		printf '%-6s %6d instructions/%s\n' "$t" "$per" "$UNIT"
	elif [ -n "$TIRPC_PER" ]; then
		printf '%-6s %6d instructions/%s  %s x libtirpc\n' "$t" "$per" "$UNIT" \
			"$(awk "BEGIN{printf \"%.2f\", $per/$TIRPC_PER}")"
	else
		printf '%-6s %6d instructions/%s\n' "$t" "$per" "$UNIT"
	fi
done
