#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs a command beside a contention generator: K busy-loop processes per
# core, each pinned to its core (taskset), so every CPU the command's
# processes run on is shared with a process that never sleeps (the
# "busy machine" of docs/PERFORMANCE.md "Issue 16 part JF": a spinning
# waiter there takes the CPU its peer needs). The loops are killed, by
# their own ids, when the command ends.
#
#   sh bench/contend.sh [-k K] [-c CPUS] -- COMMAND [ARGS...]
#
# -k K: busy loops per core (default 1); -c CPUS: the cores, as taskset's
# list (default: every online core, 0..nproc-1). Prints the command's
# output; exits with its status.
set -u
K=1
CPUS=
while [ $# -gt 0 ]; do
	case "$1" in
	-k) K=$2; shift 2 ;;
	-c) CPUS=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: sh bench/contend.sh [-k K] [-c CPUS] -- COMMAND..." >&2; exit 2; }
command -v taskset >/dev/null 2>&1 || { echo "contend.sh: needs taskset (util-linux)" >&2; exit 2; }
if [ -z "$CPUS" ]; then
	n=$(nproc)
	CPUS=$(seq 0 $((n - 1)) | tr '\n' ' ')
fi
PIDS=
for c in $(echo "$CPUS" | tr ',' ' '); do
	i=0
	while [ "$i" -lt "$K" ]; do
		taskset -c "$c" sh -c 'while :; do :; done' &
		PIDS="$PIDS $!"
		i=$((i + 1))
	done
done
trap 'kill $PIDS 2>/dev/null' EXIT INT TERM
"$@"
rc=$?
kill $PIDS 2>/dev/null
wait 2>/dev/null
trap - EXIT
exit $rc
