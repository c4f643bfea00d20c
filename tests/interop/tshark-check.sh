#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# tshark-check.sh RUN_LAB: the lab's capture check (run-lab.sh check, the
# "malformed" count of out/tshark.txt) on constructed RoCEv2 captures
# (roce_pcap.py), on the host: RDMA WRITE packets of ours whose payload
# Wireshark dissects as a malformed ethertype frame are not counted as our
# malformed frames (the lab's nfsd-verbs-rxe artefact), a malformed Send of
# ours still is, and so is nothing of the peer's. Exit 0 when all holds, 1
# otherwise, 77 (skipped) without tshark or python3.
set -euo pipefail

lab=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v tshark > /dev/null && command -v python3 > /dev/null || {
	echo "tshark-check.sh: needs tshark and python3: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/run/out
mkdir -p "$out"
python3 "$here/roce_pcap.py" "$out"
cp "$out/roce-writes.pcap" "$out/roce-writes-all.pcap"
: > "$out/results.txt"
cat > "$out/pcaps.txt" << 'LIST'
roce-writes - ip.src==192.0.2.1 infiniband,rpcordma Writes of ours, a malformed frame of the peer
roce-send - ip.src==192.0.2.1 infiniband,rpcordma the same and a malformed Send of ours
roce-writes-all - - infiniband every frame counted as ours
LIST
LAB_SUITE=bookworm LAB_DIR=$work/lab bash "$lab" check "$work/run" > "$work/log" 2>&1 || true
fail=0
expect() { # PATTERN: a line of host-results.txt matches
	if grep -qE "$1" "$out/host-results.txt"; then echo "ok   $1"
	else echo "FAIL no line matches: $1"; fail=1; fi
}
expect "^PASS tshark roce-writes: 1 frames match each of 'infiniband,rpcordma', none of ours malformed \(5 in all\)$"
expect "^FAIL tshark roce-send: [0-9]+ frames match each of 'infiniband,rpcordma', 1 of ours malformed \(6 in all\)$"
expect "^PASS tshark roce-writes-all: 6 frames match each of 'infiniband', none of ours malformed \(5 in all\)$"
# what was left out is said in tshark.txt
expect_ts() {
	if grep -qE "$1" "$out/tshark.txt"; then echo "ok   tshark.txt: $1"
	else echo "FAIL tshark.txt has no line matching: $1"; fail=1; fi
}
expect_ts "NOT COUNTED \(RDMA WRITE data\) .*192\.0\.2\.1 . 192\.0\.2\.2 +LOOP"
if [ "$fail" != 0 ]; then
	echo "--- host-results.txt"; cat "$out/host-results.txt"
	echo "--- tshark.txt"; cat "$out/tshark.txt"
	echo "--- run-lab.sh check"; tail -n 40 "$work/log"
fi
exit "$fail"
