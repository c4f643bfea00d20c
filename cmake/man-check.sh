#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# man-check.sh - the man pages against the tools and against groff (CTest
# test man_pages). `man-check.sh [ROOT]` fails when a tool (tools/*.c and
# tools/*/rpcrdma-*.c, each an installed program) has no man/<tool>.1, when
# a required page is missing (rpcrdma.7, rpcrdma.3 and the API group
# pages), when a page's .TH name or section does not match its file name,
# or when groff reports a warning rendering a page (-ww: all warnings; -z:
# no output). Exit 77 (skipped) when groff is not installed.
set -eu

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
if ! command -v groff >/dev/null 2>&1; then
	echo "groff not installed: man pages not checked" >&2
	exit 77
fi

bad=0
need="man/rpcrdma.7 man/rpcrdma.3 man/rpcrdma_client.3 man/rpcrdma_server.3
      man/rpcrdma_xdr.3 man/rpcrdma_push.3 man/rpcrdma_rdma.3 man/rpcrdma_stats.3"
# a program in one file (tools/NAME.c) or in a folder of its own
# (tools/DIR/rpcrdma-NAME.c beside its other parts)
for src in tools/*.c tools/*/rpcrdma-*.c; do
	[ -f "$src" ] || continue
	need="$need man/$(basename "$src" .c).1"
done
for page in $need; do
	if [ ! -f "$page" ]; then
		echo "missing man page: $page" >&2
		bad=$((bad + 1))
	fi
done

for page in man/*.[1-8]; do
	[ -f "$page" ] || continue
	base=$(basename "$page")
	name=${base%.*}
	sect=${base##*.}
	th=$(sed -n 's/^\.TH  *"\{0,1\}\([^" ]*\)"\{0,1\}  *"\{0,1\}\([0-9]\).*/\1 \2/p' "$page" | head -n 1)
	want=$(echo "$name" | tr '[:lower:]' '[:upper:]')
	if [ "$th" != "$want $sect" ]; then
		echo "$page: .TH says '$th', expected '$want $sect'" >&2
		bad=$((bad + 1))
	fi
	warn=$(LC_ALL=C.UTF-8 groff -ww -z -man -Tutf8 "$page" 2>&1 || echo "groff failed")
	if [ -n "$warn" ]; then
		echo "$page: groff warnings:" >&2
		echo "$warn" >&2
		bad=$((bad + 1))
	fi
done

if [ "$bad" -ne 0 ]; then
	echo "$bad man page problem(s)" >&2
	exit 1
fi
echo "man pages: $(ls man/*.[1-8] | wc -l) checked"
