#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# vm-tests.sh - the interop tests, run as root inside the lab VM by
# tests/interop/run-lab.sh (copied to /lab/test.sh). /share is the project
# build (read-only), /lab/out collects results.txt, pcaps.txt, *.pcap, logs.
# Sections (LAB_ONLY selects some): devices unit probe baseline iwarp rpc quiet nfsd nfs
# push (vm-push.sh) nfs41 (vm-nfs41.sh)
. /lab/lablib.sh
: > $LAB_OUT/results.txt
: > $LAB_OUT/pcaps.txt
T0=$(date +%s)
lab_say "start $(date -u +%FT%TZ), kernel $(uname -r)"

lab_net > $LAB_OUT/net.log 2>&1

# siw (6.1) refuses a user memory registration beyond RLIMIT_MEMLOCK, even
# for root (no CAP_IPC_LOCK exemption, unlike rxe's ib_umem_get): with the
# default 8 MiB, per-RPC registrations of 32 parallel 1 MiB calls or an NFS
# client's Reply chunks fail with ENOMEM. RDMA applications run with an
# unlimited memlock limit (rdma-core's advice); so do the lab's programs.
lab_say "RLIMIT_MEMLOCK was $(ulimit -l) KiB; raised to $(ulimit -l unlimited 2>&1; ulimit -l)"
ulimit -l unlimited || lab_say "ulimit -l unlimited failed"

# lab_sub PREFIX CMD...: a program printing "ok X" / "not ok X" / "skip X"
# lines; each becomes PASS/FAIL/SKIP "PREFIX: X". Exit 77 = the whole thing
# is not available yet (SKIP with the program's last line).
lab_sub() {
	_p=$1; shift
	"$@" > /tmp/sub.out 2>&1; _rc=$?
	sed 's/^/    /' /tmp/sub.out
	_sub_record "$_p" $_rc /tmp/sub.out
}
_sub_record() { # PREFIX RC FILE [server]
	if [ "$2" = 77 ]; then
		lab_skip "$1: $(grep -v '^ *$' "$3" | grep -v '^---' | tail -n 1)"
		return
	fi
	grep -E '^(ok|not ok|skip) ' "$3" | while IFS= read -r _l; do
		case $_l in
		"not ok "*) lab_fail "$1: ${_l#not ok }" ;;
		"ok "*) lab_pass "$1: ${_l#ok }" ;;
		"skip "*) lab_skip "$1: ${_l#skip }" ;;
		esac
	done
	if [ "$2" != 0 ] && ! grep -q '^not ok ' "$3"; then lab_fail "$1: exit status $2"; fi
	# a client must have checked something; a server may only serve
	if [ "$2" = 0 ] && [ -z "${4:-}" ] && ! grep -q '^ok ' "$3"; then lab_fail "$1: no check ran"; fi
}

# lab_pair_sub PREFIX TIMEOUT WAIT "server cmd" "client cmd": both sides'
# ok/not ok lines are recorded (the server's as "PREFIX [server]").
lab_pair_sub() {
	_p=$1; shift
	lab_serve_run "$@" > /tmp/pair.out 2>&1; _rc=$?
	sed 's/^/    /' /tmp/pair.out
	sed -n '/^--- server/,/^--- client/p' /tmp/pair.out | sed 's/^  //' > /tmp/pair.srv
	sed '/^--- server/,$d' /tmp/pair.out > /tmp/pair.cli
	if [ $_rc = 77 ]; then
		_sub_record "$_p" 77 /tmp/pair.out
		return
	fi
	# each side's own exit status (lab_serve_run prints both)
	_crc=$(sed -n 's/^--- client rc=//p' /tmp/pair.out | tail -n 1)
	_src=$(sed -n 's/^--- server (rc=\([0-9]*\)):.*/\1/p' /tmp/pair.out | tail -n 1)
	case $_crc in none) lab_fail "$_p: no client ran (server status $_src)"; return 0 ;; esac
	_sub_record "$_p" "$_crc" /tmp/pair.cli
	# every server here exits by itself once its client is done; one that had
	# to be killed (143) or timed out (124) fails
	_sub_record "$_p [server]" "$_src" /tmp/pair.srv server
	return 0
}

# ---------------------------------------------------------------- devices
if lab_section devices; then
	lab_say "=== devices"
	ibv_devinfo 2>&1 | grep -E 'hca_id|transport|state' | tee $LAB_OUT/devices.txt
	n=$(ibv_devices 2>/dev/null | grep -c -E '(siw|rxe)[01]')
	[ "$n" = 4 ] && lab_pass "devices: siw0 siw1 rxe0 rxe1 present" || lab_fail "devices: $n of 4 rdma devices"
fi

# ---------------------------------------------------------------- unit
if lab_section unit; then
	lab_say "=== unit tests (rr-tests) in the VM"
	# (bounded for a hang, not for speed: under TCG on a host shared with
	# other VMs, 297 of its ~375 tests were done when 300 s ran out, and
	# 703-706 of ~760 when 900 s did, with the host's CI beside both VMs)
	timeout 1800 /share/rr-tests > $LAB_OUT/rr-tests.log 2>&1; rc=$?
	tail -n 1 $LAB_OUT/rr-tests.log
	grep -E '^(FAIL|not ok)' $LAB_OUT/rr-tests.log | head -n 20
	[ $rc = 0 ] && lab_pass "unit: rr-tests in the VM: $(tail -n 1 $LAB_OUT/rr-tests.log)" ||
		lab_fail "unit: rr-tests in the VM (rc=$rc): $(tail -n 1 $LAB_OUT/rr-tests.log)"
	for p in siw rxe; do
		lab_pair $p
		lab_cap_start unit-verbs-$p $IF disable:rpcordma - $( [ $p = siw ] && echo iwarp_ddp_rdmap || echo infiniband ) "verbs provider loopback test over $p"
		RR_VERBS_SERVER_DEV=$DS RR_VERBS_SERVER_ADDR=$S RR_VERBS_CLIENT_DEV=$DC RR_VERBS_CLIENT_ADDR=$C \
			timeout 180 /share/rr-tests rdma_verbs_loopback rdma_verbs_srq rdma_verbs_async_errors > $LAB_OUT/rr-tests-verbs-$p.log 2>&1; rc=$?
		tail -n 15 $LAB_OUT/rr-tests-verbs-$p.log
		if grep -q 'nothing run' $LAB_OUT/rr-tests-verbs-$p.log; then
			lab_skip "unit: rdma_verbs_loopback, rdma_verbs_srq, rdma_verbs_async_errors on $p: $(grep 'nothing run' $LAB_OUT/rr-tests-verbs-$p.log | head -n 1)"
		elif [ $rc = 0 ]; then
			lab_pass "unit: rdma_verbs_loopback, rdma_verbs_srq, rdma_verbs_async_errors on $DS/$DC ($p): $(tail -n 1 $LAB_OUT/rr-tests-verbs-$p.log)"
		else
			lab_fail "unit: rdma_verbs_loopback, rdma_verbs_srq, rdma_verbs_async_errors on $DS/$DC ($p) rc=$rc"
		fi
		lab_cap_stop
	done
fi

# ---------------------------------------------------------------- probe
if lab_section probe; then
	lab_say "=== providers and devices through rdma.h"
	lab_sub "probe" $BIN/rr_lab_probe soft verbs:siw0:iwarp verbs:siw1:iwarp verbs:rxe0:roce verbs:rxe1:roce
fi

# ---------------------------------------------------------------- baseline
# the kernel peers among themselves, so a failure below is ours, not the lab's
if lab_section baseline; then
	for p in siw rxe; do
		lab_pair $p
		lab_say "=== baseline: rping over $p"
		lab_check "baseline: rping $DC -> $DS" lab_serve_run 60 "cm 7174" \
			"rping -s -a $S -p 7174 -C 5 -S 4096" \
			"rping -c -a $S -I $C -p 7174 -C 5 -S 4096 -V"
	done
fi

# ---------------------------------------------------------------- iwarp
# our soft iWARP against kernel siw (both roles, with and without MPA CRC),
# and the verbs provider against itself on siw and on rxe
if lab_section iwarp; then
	port=7300
	for crc in "" -c; do
		tag=nocrc; [ -n "$crc" ] && tag=crc
		mflt="iwarp_mpa.rep&&iwarp_mpa.crc_flag==0,iwarp_ddp_rdmap"
		[ -n "$crc" ] && mflt="iwarp_mpa.rep&&iwarp_mpa.crc_flag==1,iwarp_ddp_rdmap"
		port=$((port + 1))
		lab_say "=== iwarp: soft client -> kernel siw server ($tag)"
		lab_cap_start iwarp-soft-to-siw-$tag vS0 - ip.src==$SIW_C "$mflt" "soft client, siw1 server, $tag" tcp port $port
		lab_pair_sub "iwarp soft(client)->siw(server) $tag" 90 "cm $port" \
			"$BIN/rr_lab_iwarp server -p verbs -d siw1 -a $SIW_S -P $port" \
			"$BIN/rr_lab_iwarp client -p soft -a $SIW_S -P $port $crc"
		lab_cap_stop
		port=$((port + 1))
		lab_say "=== iwarp: kernel siw client -> soft server ($tag)"
		lab_cap_start iwarp-siw-to-soft-$tag vS0 - ip.src==$SIW_S "$mflt" "siw0 client, soft server, $tag" tcp port $port
		lab_pair_sub "iwarp siw(client)->soft(server) $tag" 90 "tcp $SIW_S $port" \
			"$BIN/rr_lab_iwarp server -p soft -a $SIW_S -P $port $crc" \
			"$BIN/rr_lab_iwarp client -p verbs -d siw0 -a $SIW_S -P $port"
		lab_cap_stop
	done
	# against the stock rping (rdma-core) on kernel siw, both roles; our
	# side speaks rping's wire protocol (rr_lab_iwarp rping-*)
	port=$((port + 1))
	lab_say "=== iwarp: kernel rping client (siw0) -> soft rping server"
	lab_cap_start iwarp-rping-siw-to-soft vS0 - ip.src==$SIW_S "iwarp_ddp_rdmap" "rping -c on siw0, soft server" tcp port $port
	lab_pair_sub "iwarp rping(siw client)->soft(server)" 90 "tcp $SIW_S $port" \
		"$BIN/rr_lab_iwarp rping-server -p soft -a $SIW_S -P $port -C 10" \
		"rping -c -a $SIW_S -I $SIW_C -p $port -C 10 -S 1000 -V && echo 'ok kernel rping -c -V: 10 pings of 1000 bytes validated' || { echo 'not ok kernel rping client'; exit 1; }"
	lab_cap_stop
	port=$((port + 1))
	lab_say "=== iwarp: soft rping client (CRC) -> kernel rping server (siw1)"
	lab_cap_start iwarp-rping-soft-to-siw vS0 - ip.src==$SIW_C "iwarp_mpa.rep&&iwarp_mpa.crc_flag==1,iwarp_ddp_rdmap" "soft client with CRC, rping -s on siw1" tcp port $port
	lab_pair_sub "iwarp soft(client crc)->rping(siw server)" 90 "cm $port" \
		"rping -s -a $SIW_S -p $port -S 1000 && echo 'ok kernel rping -s: served until disconnect' || { echo 'not ok kernel rping server'; exit 1; }" \
		"$BIN/rr_lab_iwarp rping-client -p soft -a $SIW_S -P $port -C 10 -S 1000 -c"
	lab_cap_stop
	port=$((port + 1))
	lab_say "=== iwarp: soft <-> soft over the veth"
	lab_cap_start iwarp-soft-to-soft vS0 - - "iwarp_ddp_rdmap" "soft client, soft server" tcp port $port
	lab_pair_sub "iwarp soft<->soft" 90 "tcp $SIW_S $port" \
		"$BIN/rr_lab_iwarp server -p soft -a $SIW_S -P $port" \
		"$BIN/rr_lab_iwarp client -p soft -a $SIW_S -P $port"
	lab_cap_stop
	for p in siw rxe; do
		lab_pair $p
		port=$((port + 1))
		flt=iwarp_ddp_rdmap; [ $p = rxe ] && flt=infiniband
		lab_say "=== verbs <-> verbs on $p"
		lab_cap_start verbs-$p $IF - - "$flt" "verbs provider both sides on $p"
		lab_pair_sub "verbs<->verbs on $p" 90 "cm $port" \
			"$BIN/rr_lab_iwarp server -p verbs -d $DS -a $S -P $port" \
			"$BIN/rr_lab_iwarp client -p verbs -d $DC -a $S -P $port"
		lab_cap_stop
	done
	# the verbs provider against the stock rping on rxe, both roles
	lab_pair rxe
	port=$((port + 1))
	lab_say "=== verbs rping server (rxe1) <- kernel rping client (rxe0)"
	lab_pair_sub "verbs(rxe server)<-rping(rxe client)" 90 "cm $port" \
		"$BIN/rr_lab_iwarp rping-server -p verbs -d $DS -a $S -P $port -C 10" \
		"rping -c -a $S -I $C -p $port -C 10 -S 1000 -V && echo 'ok kernel rping -c -V: 10 pings of 1000 bytes validated' || { echo 'not ok kernel rping client'; exit 1; }"
	port=$((port + 1))
	lab_say "=== verbs rping client (rxe0) -> kernel rping server (rxe1)"
	lab_pair_sub "verbs(rxe client)->rping(rxe server)" 90 "cm $port" \
		"rping -s -a $S -p $port -S 1000 && echo 'ok kernel rping -s: served until disconnect' || { echo 'not ok kernel rping server'; exit 1; }" \
		"$BIN/rr_lab_iwarp rping-client -p verbs -d $DC -a $S -P $port -C 10 -S 1000"
fi

# ---------------------------------------------------------------- rpc
# the RPC layer end to end: tcp:// on the veth, rdma:// (soft) and verbs://
if lab_section rpc; then
	port=7400
	for combo in "tcp tcp vS0 rpc" "rdma rdma vS0 rpcordma" "verbs-siw verbs vS0 rpcordma" \
		"verbs-rxe verbs vR0 rpcordma" "rdma-to-verbs-siw rdma vS0 rpcordma"; do
		set -- $combo
		name=$1 cs=$2 ifc=$3 flt=$4 ss=$2
		port=$((port + 1))
		addr=$SIW_S; [ $ifc = vR0 ] && addr=$RXE_S
		[ $name = rdma-to-verbs-siw ] && ss=verbs
		wait="tcp $addr $port"; [ $ss = verbs ] && wait="cm $port"
		lab_say "=== rpc: $name (server $ss://$addr:$port, client $cs://)"
		dec=-; [ $name = tcp ] && dec="tcp.port==$port,rpc"
		lab_cap_start rpc-$name $ifc "$dec" - "$flt" "RPC end to end, $name"
		lab_pair_sub "rpc $name" 180 "$wait" \
			"$BIN/rr_lab_rpc serve $ss://$addr:$port" \
			"$BIN/rr_lab_rpc call $cs://$addr:$port"
		lab_cap_stop
	done
fi

# ---------------------------------------------------------------- quiet
# the quiet Sends' probe (docs/security.md "Limits", conn.c tp_quiet_watch)
# sent to the kernel: our server with a 4 s send timeout (the test knob
# RPCRDMA_SERVER_SEND_TIMEOUT_MS) answers three ECHOs with quiet Replies,
# the client idles 6 s twice; each time the server must have posted a
# signaled zero-length RDMA Write (no SGE, STag 0, offset 0) and seen it
# complete, closed nothing by send_stalls, and answer the next call. The
# kernel is the peer that takes the probe: siw under our verbs:// client
# against the soft provider (rdma://), siw and rxe with our verbs:// on
# both sides (the kernel also sends it; but verbs:// on siw signals every
# Send, so there the check is that no probe goes and nothing closes). The
# capture must hold the probe:
# iWARP an RDMAP Write (opcode 0) in a DDP tagged segment with STag 0 and
# no payload (MPA ULPDU of the 14-byte tagged header only); RoCE an RDMA
# WRITE Only (BTH opcode 10) whose RETH DMA length is 0; from the server.
if lab_section quiet; then
	port=7450
	zw_iw="iwarp_ddp.tagged_flag==1&&iwarp_rdma.opcode==0&&iwarp_ddp.stag==0&&iwarp_ddp.tagged_offset==0&&iwarp_mpa.ulpdulength==14"
	zw_ib="infiniband.bth.opcode==10&&infiniband.reth.dmalen==0"
	for combo in "soft-to-verbs-siw rdma verbs vS0 $SIW_S" "verbs-siw verbs verbs vS0 $SIW_S none" \
		"verbs-rxe verbs verbs vR0 $RXE_S"; do
		set -- $combo
		name=$1 ss=$2 cs=$3 ifc=$4 addr=$5 none=${6:-}
		port=$((port + 1))
		wait="tcp $addr $port"; [ $ss = verbs ] && wait="cm $port"
		flt="iwarp_ddp_rdmap,ip.src==$addr&&$zw_iw"
		[ $ifc = vR0 ] && flt="infiniband,ip.src==$addr&&$zw_ib"
		# verbs:// on siw signals every Send (conn.c signal_writes: siw's
		# zero-copy of unsignaled work requests): no quiet Reply, no probe
		[ -n "$none" ] && flt="iwarp_ddp_rdmap"
		lab_say "=== quiet: $name (server $ss://$addr:$port, send timeout 4 s; client $cs://)"
		lab_cap_start quiet-$name $ifc - - "$flt" "quiet Replies' probe, $name"
		lab_pair_sub "quiet $name" 180 "$wait" \
			"RPCRDMA_SERVER_SEND_TIMEOUT_MS=4000 $BIN/rr_lab_rpc serve $ss://$addr:$port" \
			"$BIN/rr_lab_rpc quiet $cs://$addr:$port 4 $none"
		lab_cap_stop
	done
fi

# ---------------------------------------------------------------- nfsd
# the kernel NFS/RDMA client against rpcrdma-nfsd, with kernel nfsd as the
# baseline (tests/interop/vm-nfsd.sh); before "nfs", which leaves nfsd running
if lab_section nfsd; then
	. $BIN/vm-nfsd.sh
fi

# ---------------------------------------------------------------- nfs
if lab_section nfs; then
	lab_say "=== nfs: kernel nfsd, our NFSv3 client"
	lab_nfsd
	head -c 3145851 /dev/urandom > /export/big.bin
	mkdir -p /export/dir
	i=0
	while [ $i -lt 600 ]; do
		: > "/export/dir/entry-with-a-fairly-long-name-for-readdir-$i"
		i=$((i + 1))
	done
	for combo in "tcp tcp $SIW_S 2049 vS0 rpc $SIW_C" "rdma-siw rdma $SIW_S 20049 vS0 rpcordma $SIW_C" \
		"verbs-siw verbs $SIW_S 20049 vS0 rpcordma $SIW_C" "verbs-rxe verbs $RXE_S 20049 vR0 rpcordma $RXE_C"; do
		set -- $combo
		lab_say "=== nfs: $1 ($2://$3:$4)"
		lab_cap_start nfs3-$1 $5 - ip.src==$7 "$6,nfs" "NFSv3 client over $1"
		lab_sub "nfs3 $1" timeout 240 $BIN/rr_lab_nfs3 -s $3 -u $2://$3:$4 -e /export -l /export \
			-w "written-$1.bin"
		lab_cap_stop
	done
	# baseline: the kernel's own NFS/RDMA client (xprtrdma) against the same
	# nfsd, captured the same way, so tshark artefacts can be told apart
	# from problems of ours
	for p in siw rxe; do
		lab_pair $p
		flt=iwarp_ddp_rdmap; [ $p = rxe ] && flt=infiniband
		lab_say "=== baseline: kernel NFSv3/RDMA client over $p"
		mkdir -p /mnt/k$p
		lab_cap_start nfs3-kernel-$p $IF - none "$flt,rpcordma,nfs" "kernel xprtrdma client (baseline)"
		if timeout 120 mount -t nfs -o rdma,port=20049,vers=3,nolock,timeo=100 $S:/export /mnt/k$p; then
			a=$(timeout 120 md5sum < /mnt/k$p/big.bin); b=$(md5sum < /export/big.bin)
			umount /mnt/k$p
			if [ "$a" = "$b" ]; then lab_pass "baseline: kernel NFSv3/RDMA client over $p reads big.bin"
			else lab_fail "baseline: kernel NFSv3/RDMA client over $p reads big.bin"; fi
		else
			lab_fail "baseline: kernel NFSv3/RDMA mount over $p"
		fi
		lab_cap_stop
	done
fi

[ -f /lab/vm-push.sh ] && . /lab/vm-push.sh
[ -f /lab/vm-nfs41.sh ] && . /lab/vm-nfs41.sh

lab_say "dmesg warnings:"
dmesg | grep -i -E 'siw|rxe|rdma|nfsd|svcrdma' | grep -i -E 'error|fail|warn|not free|terminat' | tail -n 20
lab_say "done in $(( $(date +%s) - T0 )) s"
grep -c '^PASS' $LAB_OUT/results.txt | sed 's/$/ passed (in the VM)/'
! grep -q '^FAIL' $LAB_OUT/results.txt
