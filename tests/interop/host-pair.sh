#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The lab's host-side subset, run by CTest: a lab program's server and client
# on 127.0.0.1 over the software iWARP provider (or TCP), no VM. The full lab
# (the same programs against kernel siw, rxe and nfsd) is tests/interop/run-lab.sh.
#   host-pair.sh iwarp RR_LAB_IWARP [-c]     soft <-> soft: CM private data,
#                                            Sends, RDMA Read/Write, Send With Invalidate
#   host-pair.sh rpc RR_LAB_RPC SCHEME      the RPC checks over SCHEME (rdma|tcp)
# Exit 0 when both ends report success. The server listens on a port the
# system picks (port 0) and prints it; the client is given that port. (A
# random port picked here collided, on a machine whose loopback held some
# 12,000 sockets of parallel tests, with a port in use: "no free port after
# 3 attempts", interop_host_rpc_tcp under load.)
set -u
kind=$1 prog=$2 extra=${3:-}

# Until the server's log has a line matching @2 (it listens), at most about
# 10 s of polls; a server that died meanwhile ends the wait at once. No
# fixed sleep.
wait_ready() {
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$srv" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
log=$(mktemp)
port=
case $kind in
iwarp)
	timeout 60 "$prog" server -p soft -a 127.0.0.1 -P 0 $extra >"$log.s" 2>&1 &
	srv=$!
	wait_ready "$log.s" '^# listening on ' &&
		port=$(sed -n 's/^# listening on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$log.s")
	if [ -n "$port" ]; then
		timeout 60 "$prog" client -p soft -a 127.0.0.1 -P "$port" $extra >"$log.c" 2>&1
		crc=$?
	fi
	;;
rpc)
	timeout 90 "$prog" serve "$extra://127.0.0.1:0" >"$log.s" 2>&1 &
	srv=$!
	wait_ready "$log.s" '^serving ' &&
		port=$(sed -n 's/^serving .* (port \([0-9][0-9]*\))$/\1/p' "$log.s")
	if [ -n "$port" ]; then
		# the client's QUIT call ends the server
		timeout 90 "$prog" call "$extra://127.0.0.1:$port" >"$log.c" 2>&1
		crc=$?
	fi
	;;
*) echo "usage: host-pair.sh iwarp|rpc PROGRAM [ARG]" >&2; rm -f "$log"; exit 2 ;;
esac
if [ -z "$port" ]; then
	echo "the server did not report a listening port:"
	kill "$srv" 2>/dev/null
	wait "$srv"
	cat "$log.s"
	rm -f "$log" "$log.s"
	exit 1
fi
wait "$srv"; src=$?
cat "$log.c"
echo "--- server:"
cat "$log.s"
rm -f "$log" "$log.s" "$log.c"
echo "client exit $crc, server exit $src"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
