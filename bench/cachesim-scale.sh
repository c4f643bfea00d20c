#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Cache misses per NULL call with C connections active (issue 16 "NULL at
# 100 connections"), from callgrind's cache simulator, which does not
# depend on the machine's load: bench_nullcall serves (server rdma|tcp) and
# drives C connections with one asynchronous NULL call in flight on each,
# K calls each (clients URL C K --pause, as rpcrdma-bench's scale workload
# does); one side runs under valgrind --tool=callgrind --cache-sim=yes, the
# other natively. The counts are zeroed when every connection is up
# (callgrind_control -z at "connected") and dumped when the calls are over
# (-d at "called"): connect and teardown are not counted. The cache model
# is fixed (L1 data and instruction 32 KiB 8-way, LL 4 MiB 16-way, 64-byte
# lines), not the host's, so that figures compare across machines.
#
#   sh bench/cachesim-scale.sh [--client] [--keep DIR] BUILD_DIR rdma|tcp [C K]
#
# C defaults to 100, K to 200 (20,000 calls). Prints the per-call totals
# (instructions, L1 data read and write misses, LL data read and write
# misses) and the 25 functions with the most L1 data misses (self, per
# call). --client measures the client instead of the server. --keep DIR
# keeps the callgrind dump there (callgrind_annotate DIR/cg.dump) for a
# look by source line (a -g build). RPCRDMA_SOFT_SPIN_US=off, as
# callgrind-null.sh: a spinning wait's counts depend on timing.
set -u
SIDE=server
KEEP=
while :; do
	case "${1:-}" in
	--client) SIDE=client; shift ;;
	--keep) KEEP=${2:?--keep DIR}; shift 2 ;;
	--help|-h) sed -n '3,23s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
B=${1:?usage: cachesim-scale.sh [--client] [--keep DIR] BUILD_DIR rdma|tcp [C K]}
T=${2:?usage: cachesim-scale.sh [--client] [--keep DIR] BUILD_DIR rdma|tcp [C K]}
C=${3:-100}
K=${4:-200}
BIN="$B/bench_nullcall"
[ -x "$BIN" ] || { echo "cachesim-scale.sh: $BIN not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "cachesim-scale.sh: valgrind not installed" >&2; exit 2; }
case "$T" in rdma|tcp) ;; *) echo "cachesim-scale.sh: transport rdma or tcp" >&2; exit 2 ;; esac
TMP=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null; kill $(cat "$TMP"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$TMP"' EXIT
export RPCRDMA_SOFT_SPIN_US=off
CG="valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=4194304,16,64
    --dump-instr=no --callgrind-out-file=$TMP/cg.out"

# waits (up to $3 s) until file $1 holds a line matching $2
wait_for() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -gt $(($3 * 10)) ] && { echo "cachesim-scale.sh: no '$2' in $1" >&2; cat "$1" >&2; exit 1; }
		sleep 0.1
	done
}

SRV=; CLI=
[ "$SIDE" = server ] && SRV=$CG
[ "$SIDE" = client ] && CLI=$CG
$SRV "$BIN" server "$T" >"$TMP/srv.out" 2>"$TMP/srv.err" &
echo $! >"$TMP/srv.pid"
wait_for "$TMP/srv.out" '^port' 120
PORT=$(sed -n 's/^port \([0-9]*\).*/\1/p' "$TMP/srv.out")
mkfifo "$TMP/in"
$CLI "$BIN" clients "$T://127.0.0.1:$PORT" "$C" "$K" --pause <"$TMP/in" >"$TMP/cli.out" 2>"$TMP/cli.err" &
echo $! >"$TMP/cli.pid"
exec 3>"$TMP/in"
wait_for "$TMP/cli.err" '^connected' 600
P=$(cat "$TMP/cli.pid")
[ "$SIDE" = server ] && P=$(cat "$TMP/srv.pid")
callgrind_control -z "$P" >/dev/null
echo go >&3
wait_for "$TMP/cli.err" '^called' 1200
callgrind_control -d "$P" >/dev/null
echo end >&3
exec 3>&-
wait "$(cat "$TMP/cli.pid")" 2>/dev/null
rm -f "$TMP/cli.pid"
D=$(ls -t "$TMP"/cg.out.* 2>/dev/null | grep -v '\.pid$' | head -1)
[ -n "$D" ] || D=$(ls "$TMP"/cg.out* | head -1)
N=$((C * K))
[ -n "$KEEP" ] && { mkdir -p "$KEEP"; cp "$D" "$KEEP/cg.dump"; }
echo "$SIDE $T C=$C K=$K ($N calls), per call:"
callgrind_annotate --show=Ir,D1mr,D1mw,DLmr,DLmw --threshold=100 "$D" 2>/dev/null |
	sed 's/([ 0-9.]*%)//g' >"$TMP/ann"
awk -v n="$N" '
	function num(s) { gsub(/,/, "", s); return s + 0 }
	/PROGRAM TOTALS/ { printf "  Ir %.0f  D1mr %.1f  D1mw %.1f  DLmr %.2f  DLmw %.2f\n",
		num($1) / n, num($2) / n, num($3) / n, num($4) / n, num($5) / n }' "$TMP/ann"
TOT=$(awk '/PROGRAM TOTALS/ { print $1 }' "$TMP/ann")
# (callgrind_annotate lists the threads' entries, clone and start_thread,
# with the whole thread's counts: left out)
awk -v n="$N" -v tot="$TOT" '
	function num(s) { gsub(/,/, "", s); return s + 0 }
	$1 != tot && NF >= 6 && $1 ~ /^[0-9,]+$/ && $6 ~ /:/ && !/PROGRAM TOTALS/ {
		fn = $6; sub(/^.*:/, "", fn)
		if (fn == "clone" || fn == "start_thread") next
		m = num($2) + num($3)
		if (m / n >= 0.05)
			printf "  %7.2f D1 (%5.2f r + %5.2f w)  %6.0f Ir  %s\n", m / n, num($2) / n, num($3) / n, num($1) / n, fn
	}' "$TMP/ann" | sort -k1,1nr -s | head -25
