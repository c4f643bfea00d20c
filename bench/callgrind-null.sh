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
#   sh bench/callgrind-null.sh BUILD_DIR [N1 N2]
#
# Prints one line per transport (instructions per call, and the ratio to
# libtirpc's). RPCRDMA_SOFT_SPIN_US=off: a spinning wait's instruction
# count depends on timing (the figure would not be reproducible).
# Needs valgrind; tirpc needs a build with libtirpc (else reported n/a).
set -u
B=${1:?usage: callgrind-null.sh BUILD_DIR [N1 N2]}
N1=${2:-1000}
N2=${3:-3000}
BIN="$B/bench_nullcall"
[ -x "$BIN" ] || { echo "callgrind-null.sh: $BIN not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "callgrind-null.sh: valgrind not installed" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'kill $(cat "$TMP"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$TMP"' EXIT
export RPCRDMA_SOFT_SPIN_US=off

# instructions (Ir) of one client run of $2 calls to $1
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$BIN" client "$1" "$2" \
		>"$TMP/cg.log" 2>&1 || { echo fail; return; }
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$TMP/cg.out" | head -1
}

TIRPC_PER=
for t in tirpc rdma tcp; do
	"$BIN" server "$t" >"$TMP/$t.port" 2>"$TMP/$t.err" &
	echo $! >"$TMP/$t.pid"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		grep -q port "$TMP/$t.port" 2>/dev/null && break
		sleep 0.3
	done
	PORT=$(sed -n 's/^port //p' "$TMP/$t.port")
	if [ -z "$PORT" ]; then
		printf '%-6s n/a (%s)\n' "$t" "$(head -1 "$TMP/$t.err")"
		continue
	fi
	a=$(ir "$t://127.0.0.1:$PORT" "$N1")
	b=$(ir "$t://127.0.0.1:$PORT" "$N2")
	kill "$(cat "$TMP/$t.pid")" 2>/dev/null
	if [ "$a" = fail ] || [ "$b" = fail ] || [ -z "$a" ] || [ -z "$b" ]; then
		printf '%-6s n/a (client failed)\n' "$t"
		continue
	fi
	per=$(( (b - a) / (N2 - N1) ))
	if [ "$t" = tirpc ]; then
		TIRPC_PER=$per
		printf '%-6s %6d instructions/call\n' "$t" "$per"
	elif [ -n "$TIRPC_PER" ]; then
		printf '%-6s %6d instructions/call  %s x libtirpc\n' "$t" "$per" \
			"$(awk "BEGIN{printf \"%.2f\", $per/$TIRPC_PER}")"
	else
		printf '%-6s %6d instructions/call\n' "$t" "$per"
	fi
done
