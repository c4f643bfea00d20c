#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# nfs-workload.sh MNT [SERVER_DIR] - the file-system workload the interop lab
# runs through a kernel NFS mount (tests/interop/vm-nfsd.sh): once against
# rpcrdma-nfsd and once against the kernel's nfsd as the baseline. Prints one
# "ok NAME: detail" / "not ok NAME: detail" line per check and "perf NAME
# key=value..." lines (fio). SERVER_DIR is the exported directory as the
# server sees it (same VM): files written through the mount are compared
# with it byte for byte. Set WL_FIO=0 to skip fio, WL_FIO_JOBS to a list of
# job names (randrw-verify randread seqread seqwrite; default all),
# WL_PHASE=func|load to run only the functional checks or only the
# concurrency/fio part.
MNT=$1 SRV=${2:-} PHASE=${WL_PHASE:-all}
[ -d "$MNT" ] || { echo "not ok workload: $MNT is not a directory"; exit 1; }
W=$MNT/wl.$$
T=/tmp/wl.$$
fails=0
ok() { echo "ok $*"; }
bad() { echo "not ok $*"; fails=$((fails + 1)); }
chk() { # NAME CMD...: ok when CMD succeeds
	_n=$1; shift
	if "$@" > /tmp/wl.out 2>&1; then ok "$_n"; else bad "$_n: $(tail -n 2 /tmp/wl.out | tr '\n' ' ')"; fi
}
fails_with() { # NAME PATTERN CMD...: ok when CMD fails with PATTERN in its message
	_n=$1 _p=$2; shift 2
	if "$@" > /tmp/wl.out 2>&1; then bad "$_n: succeeded"
	elif grep -qi "$_p" /tmp/wl.out; then ok "$_n: $(head -n 1 /tmp/wl.out)"
	else bad "$_n: $(head -n 1 /tmp/wl.out)"; fi
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
same() { # NAME A B
	if cmp -s "$2" "$3"; then ok "$1"; else bad "$1: $2 and $3 differ"; fi
}
mkdir -p "$T"

if [ "$PHASE" != load ]; then
	mkdir -p "$W" || { echo "not ok workload: mkdir $W"; exit 1; }
	# ---- files written and read back after dropping caches
	head -c 1 /dev/urandom > "$T/f1"
	head -c 1001 /dev/urandom > "$T/f1001"        # unaligned: READ's extra pad segment
	head -c 65537 /dev/urandom > "$T/f65537"
	head -c 4194304 /dev/urandom > "$T/f4m"
	for f in f1 f1001 f65537 f4m; do cp "$T/$f" "$W/$f" || bad "write $f"; done
	drop
	for f in f1 f1001 f65537 f4m; do same "read back $f after drop_caches" "$T/$f" "$W/$f"; done
	if [ -n "$SRV" ]; then
		for f in f1001 f4m; do same "server's copy of $f byte-exact" "$T/$f" "$SRV/wl.$$/$f"; done
	fi
	# ---- large file with O_DIRECT (WRITE via Read chunks, READ via Write chunks)
	head -c 16777216 /dev/urandom > "$T/big"
	chk "O_DIRECT write 16 MiB (1 MiB blocks)" dd if="$T/big" of="$W/big" bs=1M oflag=direct status=none
	chk "O_DIRECT read 16 MiB (1 MiB blocks)" dd if="$W/big" of="$T/big.back" bs=1M iflag=direct status=none
	same "O_DIRECT data byte-exact" "$T/big" "$T/big.back"
	chk "O_DIRECT unaligned-length read" sh -c "dd if='$W/f1001' bs=4096 iflag=direct status=none > '$T/f1001.d'"
	same "O_DIRECT 1001-byte file byte-exact" "$T/f1001" "$T/f1001.d"
	# ---- a directory tree listed with READDIRPLUS
	i=0
	while [ $i -lt 8 ]; do
		mkdir -p "$W/tree/d$i/sub"
		j=0
		while [ $j -lt 60 ]; do : > "$W/tree/d$i/file-with-a-long-name-$j"; j=$((j + 1)); done
		echo "$i" > "$W/tree/d$i/sub/leaf"
		i=$((i + 1))
	done
	drop
	n=$(ls -lR "$W/tree" | grep -c 'file-with-a-long-name-')
	[ "$n" = 480 ] && ok "ls -lR tree: 480 entries with attributes" || bad "ls -lR tree: $n of 480 entries"
	n=$(find "$W/tree" | wc -l)
	[ "$n" = 505 ] && ok "find tree: 505 names" || bad "find tree: $n of 505 names"
	[ "$(cat "$W/tree/d7/sub/leaf")" = 7 ] && ok "tree leaf content" || bad "tree leaf content"
	# ---- rename, link, symlink, readlink, chmod, truncate
	echo data > "$W/a"
	chk "rename" mv "$W/a" "$W/b"
	[ ! -e "$W/a" ] && [ "$(cat "$W/b")" = data ] && ok "rename result" || bad "rename result"
	chk "hard link" ln "$W/b" "$W/c"
	[ "$(stat -c %h "$W/b")" = 2 ] && ok "link count 2" || bad "link count $(stat -c %h "$W/b")"
	chk "symlink" ln -s "some/where/../target" "$W/s"
	[ "$(readlink "$W/s")" = "some/where/../target" ] && ok "readlink" || bad "readlink: $(readlink "$W/s")"
	chk "symlink out of the export" ln -s /etc/passwd "$W/out"
	drop
	[ "$(readlink "$W/out")" = /etc/passwd ] && ok "readlink of a symlink leading out" || bad "readlink out"
	chk "chmod 640" chmod 640 "$W/b"
	[ "$(stat -c %a "$W/b")" = 640 ] && ok "mode 640" || bad "mode $(stat -c %a "$W/b")"
	chk "truncate to 3" truncate -s 3 "$W/b"
	[ "$(stat -c %s "$W/b")" = 3 ] && [ "$(cat "$W/b")" = dat ] && ok "truncated content" || bad "truncated content"
	chk "truncate to 1 GiB (sparse)" truncate -s 1G "$W/b"
	[ "$(stat -c %s "$W/c")" = 1073741824 ] && ok "size via the other link" || bad "size via link"
	chk "touch -d" touch -d "2001-02-03 04:05:06" "$W/c"
	[ "$(stat -c %Y "$W/c")" = "$(date -d '2001-02-03 04:05:06' +%s)" ] && ok "mtime set" || bad "mtime set"
	chk "mkfifo" mkfifo "$W/fifo"
	[ -p "$W/fifo" ] && ok "fifo type" || bad "fifo type"
	# ---- 255-byte names
	n255=$(printf 'n%.0s' $(seq 255))
	chk "create a 255-byte name" sh -c "echo x > '$W/$n255'"
	drop
	ls "$W" | grep -qx "$n255" && ok "255-byte name listed" || bad "255-byte name not listed"
	fails_with "256-byte name refused" "too long" sh -c "echo x > '$W/${n255}x'"
	# ---- the expected errors
	fails_with "missing file: ENOENT" "no such file" cat "$W/no-such-file"
	fails_with "mkdir existing: EEXIST" "exists" mkdir "$W/tree"
	fails_with "rmdir non-empty: ENOTEMPTY" "not empty" rmdir "$W/tree"
	fails_with "rmdir a file: ENOTDIR" "not a directory" rmdir "$W/c"
	fails_with "cd into a file: ENOTDIR" "not a directory" ls "$W/c/x"
	echo secret > "$W/rootonly"; chmod 600 "$W/rootonly"
	fails_with "other user reads a 0600 file: EACCES" "permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups cat "$W/rootonly"
	fails_with "other user writes a root file: EACCES" "permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo x >> '$W/b'"
	fails_with "other user creates in a root dir: EACCES" "permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups touch "$W/tree/nobody"
	chk "remove" rm "$W/c"
	[ "$(stat -c %h "$W/b")" = 1 ] && ok "link count back to 1" || bad "link count after remove"
fi

if [ "$PHASE" != func ]; then
	mkdir -p "$W"
	# ---- concurrent readers and writers
	head -c 8388608 /dev/urandom > "$T/shared"
	cp "$T/shared" "$W/shared"
	drop
	for k in 1 2 3 4; do
		head -c 4194304 /dev/urandom > "$T/w$k"
		( dd if="$T/w$k" of="$W/w$k" bs=256k status=none ) &
		( cat "$W/shared" > "$T/r$k" ) &
	done
	wait
	drop
	okc=0
	for k in 1 2 3 4; do
		cmp -s "$T/w$k" "$W/w$k" && okc=$((okc + 1))
		cmp -s "$T/shared" "$T/r$k" && okc=$((okc + 1))
	done
	[ $okc = 8 ] && ok "4 writers + 4 readers concurrently: all byte-exact" ||
		bad "concurrent readers/writers: $okc of 8 byte-exact"
	# ---- fio with verification: libaio, O_DIRECT, queue depth 16
	if [ "${WL_FIO:-1}" = 1 ] && command -v fio > /dev/null; then
		for spec in "randrw-verify --rw=randrw --bs=4k --size=16m --verify=crc32c --do_verify=1 --verify_fatal=1" \
			"randread --rw=randread --bs=4k --size=16m --time_based --runtime=15" \
			"seqread --rw=read --bs=256k --size=32m --time_based --runtime=15" \
			"seqwrite --rw=write --bs=256k --size=32m --time_based --runtime=15"; do
			set -- $spec
			name=$1; shift
			case " ${WL_FIO_JOBS:-randrw-verify randread seqread seqwrite} " in
			*" $name "*) ;;
			*) continue ;;
			esac
			if fio --name="$name" --filename="$W/fio.$name" --ioengine=libaio --direct=1 \
				--iodepth=16 --minimal "$@" > "$T/fio.$name" 2> "$T/fio.$name.err"; then
				# terse v3: 7 read bw KiB/s, 8 read IOPS, 48 write bw, 49 write IOPS
				awk -F';' -v n="$name" '{ printf "perf %s read_iops=%s read_kib_s=%s write_iops=%s write_kib_s=%s\n", n, $8, $7, $49, $48 }' "$T/fio.$name"
				ok "fio $name (libaio, direct, iodepth 16)$( [ "$name" = randrw-verify ] && echo ', crc32c verified')"
			else
				bad "fio $name: $(tail -n 2 "$T/fio.$name.err" | tr '\n' ' ')"
			fi
			rm -f "$W/fio.$name"
		done
	fi
fi
rm -rf "$W" "$T"
echo "workload: $fails failed"
[ $fails = 0 ]
