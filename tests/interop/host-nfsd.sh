#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# rpcrdma-nfsd on the host, run by CTest (no VM; the kernel NFS client's
# checks are the lab's "nfsd" section, tests/interop/vm-nfsd.sh):
#   host-nfsd.sh libnfs RPCRDMA_NFSD             libnfs's tools (Debian
#       libnfs-utils) over tcp://: nfs-cp writes files of 1 B, 1001 B and
#       3 MiB and reads them back, nfs-ls lists the export and a directory
#       of 300 names; every byte compared with the exported directory
#   host-nfsd.sh own RPCRDMA_NFSD RR_LAB_NFS3 SCHEME   the project's NFSv3
#       client (rr_lab_nfs3) over SCHEME (tcp|rdma): MOUNT, FSINFO, GETATTR,
#       LOOKUP, READ (Write chunks on rdma), CREATE + WRITE (Read chunks),
#       READDIR (Reply chunk)
# The server runs on 127.0.0.1 with ephemeral ports (read from its first
# line), a fresh export and state directory, no rpcbind; it must stop
# cleanly on SIGTERM and print its summary. Needs root (the server does).
# Exit 0 = passed, 77 = libnfs-utils not installed (skipped), else failed.
set -u
mode=$1 nfsd=$2
[ "$(id -u)" = 0 ] || { echo "rpcrdma-nfsd needs root"; exit 1; }
if [ "$mode" = libnfs ] && ! command -v nfs-cp > /dev/null; then
	echo "libnfs-utils (nfs-cp, nfs-ls) not installed: skipped"; exit 77
fi
scheme=tcp
[ "$mode" = own ] && scheme=$4
top=$(mktemp -d /tmp/rr-host-nfsd-XXXXXX)
exp=$top/export
mkdir -p "$exp" "$top/state"
fail=0
ok() { echo "ok $*"; }
bad() { echo "not ok $*"; fail=1; }

"$nfsd" --export "$exp" --transport "$scheme" --listen 127.0.0.1:0 --mount-port 0 \
	--no-rpcbind --no-root-squash --state-dir "$top/state" --threads 4 > "$top/srv.log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q 'MOUNT v3 on' "$top/srv.log" && break; sleep 0.1; done
line=$(grep 'MOUNT v3 on' "$top/srv.log")
nport=$(sed -n 's/.*NFSv3 on [a-z]*:\/\/127.0.0.1:\([0-9]*\),.*/\1/p' <<< "$line")
mport=$(sed -n 's/.*MOUNT v3 on tcp:\/\/127.0.0.1:\([0-9]*\).*/\1/p' <<< "$line")
if [ -z "$nport" ] || [ -z "$mport" ]; then
	cat "$top/srv.log"; kill "$srv" 2>/dev/null; rm -rf "$top"; echo "server did not start"; exit 1
fi
echo "rpcrdma-nfsd: NFS $scheme port $nport, MOUNT port $mport"

case $mode in
libnfs)
	q="?nfsport=$nport&mountport=$mport&version=3"
	for size in 1 1001 3145728; do
		head -c "$size" /dev/urandom > "$top/in.$size"
		if timeout 60 nfs-cp "$top/in.$size" "nfs://127.0.0.1$exp/f.$size$q" > "$top/cp.log" 2>&1 &&
			cmp -s "$top/in.$size" "$exp/f.$size"; then
			ok "nfs-cp writes a $size-byte file, byte-exact on the server"
		else
			bad "nfs-cp write $size bytes: $(tail -n 1 "$top/cp.log")"
		fi
		if timeout 60 nfs-cp "nfs://127.0.0.1$exp/f.$size$q" "$top/out.$size" > "$top/cp.log" 2>&1 &&
			cmp -s "$top/in.$size" "$top/out.$size"; then
			ok "nfs-cp reads the $size-byte file back byte-exact"
		else
			bad "nfs-cp read $size bytes: $(tail -n 1 "$top/cp.log")"
		fi
	done
	mkdir "$exp/dir"
	for i in $(seq 300); do : > "$exp/dir/a-rather-long-file-name-for-listing-$i"; done
	n=$(timeout 60 nfs-ls "nfs://127.0.0.1$exp/dir$q" 2>&1 | grep -c 'a-rather-long-file-name-for-listing-')
	[ "$n" = 300 ] && ok "nfs-ls lists 300 names" || bad "nfs-ls listed $n of 300 names"
	ls_root=$(timeout 60 nfs-ls "nfs://127.0.0.1$exp$q" 2>&1)
	if grep -q ' f.3145728$' <<< "$ls_root" && grep -q ' dir$' <<< "$ls_root" &&
		grep -q ' 3145728 ' <<< "$ls_root"; then
		ok "nfs-ls of the export shows names, types and sizes"
	else
		bad "nfs-ls of the export: $ls_root"
	fi
	if timeout 30 nfs-ls "nfs://127.0.0.1$top$q" > "$top/ls.log" 2>&1; then
		bad "MOUNT of the export's parent was accepted"
	else
		ok "MOUNT of a path outside the export refused"
	fi
	;;
own)
	prog=$3
	head -c 3145851 /dev/urandom > "$exp/big.bin"
	mkdir "$exp/dir"
	for i in $(seq 600); do : > "$exp/dir/entry-with-a-fairly-long-name-for-readdir-$i"; done
	timeout 120 "$prog" -s 127.0.0.1 -m "$mport" -u "$scheme://127.0.0.1:$nport" -e "$exp" \
		-l "$exp" -w "written-$scheme.bin" || fail=1
	;;
*) echo "usage: host-nfsd.sh libnfs NFSD | own NFSD RR_LAB_NFS3 tcp|rdma" >&2; fail=1 ;;
esac

kill -TERM "$srv"
wait "$srv"; src=$?
echo "--- server (exit $src):"
cat "$top/srv.log"
[ "$src" = 0 ] && grep -q 'NFSv3 procedures served' "$top/srv.log" || { echo "not ok server stop"; fail=1; }
rm -rf "$top"
exit $fail
