#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The lab's host-side subset, run by CTest: a lab program's server and client
# on 127.0.0.1 over the software iWARP provider (or TCP), no VM. The full lab
# (the same programs against kernel siw, rxe and nfsd) is tests/interop/run-lab.sh.
#   host-pair.sh iwarp RR_LAB_IWARP [-c]     soft <-> soft: CM private data,
#                                            Sends, RDMA Read/Write, Send With Invalidate
#   host-pair.sh rpc RR_LAB_RPC SCHEME      the RPC checks over SCHEME (rdma|tcp)
# Exit 0 when both ends report success. Ports are random, retried on collision.
set -u
kind=$1 prog=$2 extra=${3:-}

# Until the server's log shows @2 (it listens), at most 10 s; a server that
# died meanwhile ends the wait at once. No fixed sleep.
wait_ready() {
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$srv" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
for attempt in 1 2 3; do
	port=$((20000 + RANDOM % 30000))
	log=$(mktemp)
	case $kind in
	iwarp)
		timeout 60 "$prog" server -p soft -a 127.0.0.1 -P "$port" $extra >"$log.s" 2>&1 &
		srv=$!
		wait_ready "$log.s" '^# listening on'
		timeout 60 "$prog" client -p soft -a 127.0.0.1 -P "$port" $extra >"$log.c" 2>&1
		crc=$?
		wait "$srv"; src=$?
		;;
	rpc)
		url="$extra://127.0.0.1:$port"
		timeout 90 "$prog" serve "$url" >"$log.s" 2>&1 &
		srv=$!
		wait_ready "$log.s" '^serving '
		timeout 90 "$prog" call "$url" >"$log.c" 2>&1
		crc=$?
		# the client's QUIT call ends the server
		wait "$srv"; src=$?
		;;
	*) echo "usage: host-pair.sh iwarp|rpc PROGRAM [ARG]" >&2; exit 2 ;;
	esac
	if grep -qiE 'address already in use|EADDRINUSE' "$log.s"; then
		rm -f "$log" "$log.s" "$log.c"
		continue
	fi
	cat "$log.c"
	echo "--- server:"
	cat "$log.s"
	rm -f "$log" "$log.s" "$log.c"
	echo "client exit $crc, server exit $src"
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
	exit $?
done
echo "no free port after 3 attempts" >&2
exit 1
