#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs the rpcgen example: starts calc_server on an ephemeral loopback port,
# runs calc_client against it over librpcrdma (scheme $3: tcp, the default,
# or rdma), stops the server. Bounded in time; exits non-zero on failure.
set -u
SERVER=$1
CLIENT=$2
SCHEME=${3:-tcp}
OUT=$(mktemp)
timeout 60 "$SERVER" "$SCHEME://127.0.0.1:0" > "$OUT" &
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
timeout 30 "$CLIENT" "$SCHEME://127.0.0.1:$PORT"
RC=$?
kill -TERM "$SPID"
wait "$SPID"
SRC=$?
[ $RC -eq 0 ] && [ $SRC -eq 0 ]
