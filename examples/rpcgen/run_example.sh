#!/bin/sh
# Runs the rpcgen example: starts calc_server on an ephemeral loopback port,
# runs calc_client against it over librpcrdma (tcp://), stops the server.
# Bounded in time; exits non-zero on any failure.
set -u
SERVER=$1
CLIENT=$2
OUT=$(mktemp)
timeout 60 "$SERVER" tcp://127.0.0.1:0 > "$OUT" &
SPID=$!
PORT=
i=0
while [ $i -lt 100 ]; do
	PORT=$(head -n1 "$OUT" 2>/dev/null)
	[ -n "$PORT" ] && break
	sleep 0.05
	i=$((i + 1))
done
rm -f "$OUT"
if [ -z "$PORT" ]; then
	echo "server did not start"; kill "$SPID" 2>/dev/null; exit 1
fi
timeout 30 "$CLIENT" "tcp://127.0.0.1:$PORT"
RC=$?
kill -TERM "$SPID"
wait "$SPID"
SRC=$?
[ $RC -eq 0 ] && [ $SRC -eq 0 ]
