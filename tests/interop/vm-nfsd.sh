# SPDX-License-Identifier: BSD-2-Clause
# vm-nfsd.sh - section "nfsd" of the interop lab, sourced by vm-tests.sh
# inside the VM (the build copies it to /share/tests/interop/): the Linux
# kernel's NFS/RDMA client (xprtrdma) mounts rpcrdma-nfsd and runs
# nfs-workload.sh through the mount, over three paths:
#   rdma-siw   kernel siw (siw0) -> rpcrdma-nfsd on rdma:// (the library's
#              user-space iWARP on 192.0.2.2:20049); MOUNT found through
#              rpcbind (plain "mount -o rdma,port=20049")
#   verbs-siw  kernel siw -> rpcrdma-nfsd on verbs:// (rdma-core, siw1)
#   verbs-rxe  kernel rxe -> rpcrdma-nfsd on verbs:// (rdma-core, rxe1)
# (the verbs paths give MOUNT's port: mountproto=tcp,mountport=20048).
# Then the same workload against the kernel's nfsd over siw and rxe is the
# baseline. Performance is measured last, A/B: rpcrdma-nfsd (port 20050)
# and the kernel's nfsd (20049) mounted at once over the same device, fio
# jobs alternating between the two mounts (2 rounds of 4 jobs, 10 s each),
# so that both see the same load on the shared, emulated machine; fio's
# figures and the per-round ratios go to out/nfsd-perf.txt.
# Checks per path: the workload's own, /proc/self/mountstats (the RDMA
# transport in use, no bad XIDs, no bad replies, chunks of each kind seen),
# the server's clean exit after SIGTERM, and tshark on the capture of the
# functional part (host side: none of the server's frames malformed).
# Must run before the "nfs" section, which leaves the kernel's nfsd
# listening on 20049.
NFSD_BIN=/share/tools/nfsd/rpcrdma-nfsd
NFSD_WL=/share/tests/interop/nfs-workload.sh
NFSD_PERF=$LAB_OUT/nfsd-perf.txt
: > "$NFSD_PERF"

# nfsd_mountstats MOUNTPOINT NAME: the mount's xprt line must be "rdma"
# with bad_xids and bad_reply_count 0 (xprtrdma's field order:
# xprt: rdma port bind connect ctime idle sends recvs bad_xids req bklog
# read_chunks write_chunks reply_chunks rdma_req rdma_rep pullup fixup
# hardway failed_marshal bad_reply nomsg ...)
nfsd_mountstats() {
	_mn=$2
	_l=$(awk -v m="$1" '$1 == "device" { on = ($5 == m) } on && $1 == "xprt:" { print; exit }' /proc/self/mountstats)
	echo "    mountstats $_mn: $_l"
	set -- $_l
	if [ "${2:-}" != rdma ]; then lab_fail "nfsd $_mn: mountstats: transport '${2:-none}', not rdma"; return; fi
	if [ "${10}" = 0 ] && [ "${22}" = 0 ] && [ "${13}" -gt 0 ] && [ "${14}" -gt 0 ] && [ "${15}" -gt 0 ]; then
		lab_pass "nfsd $_mn: mountstats: 0 bad XIDs, 0 bad replies; read/write/reply chunks ${13}/${14}/${15}"
	else
		lab_fail "nfsd $_mn: mountstats: bad XIDs ${10}, bad replies ${22}, read/write/reply chunks ${13}/${14}/${15}"
	fi
}

modprobe rpcrdma
rpcbind -w 2>/dev/null || rpcbind
mkdir -p /rrexport /var/lib/rpcrdma-nfsd
mountpoint -q /rrexport || mount -t tmpfs -o size=768m tmpfs /rrexport
for combo in "rdma-siw rdma $SIW_S vS0 iwarp_ddp_rdmap rpcbind" \
	"verbs-siw verbs $SIW_S vS0 iwarp_ddp_rdmap 20048" \
	"verbs-rxe verbs $RXE_S vR0 infiniband 20048"; do
	set -- $combo
	name=$1 tr=$2 addr=$3 ifc=$4 proto=$5 mport=$6
	lab_say "=== nfsd: kernel NFSv3/RDMA client -> rpcrdma-nfsd $name ($tr://$addr:20049)"
	mopt="" sopt=""
	if [ "$mport" != rpcbind ]; then mopt=",mountproto=tcp,mountport=$mport"; sopt="-m $mport"; fi
	$NFSD_BIN -e /rrexport -t $tr -l $addr:20049 $sopt --no-root-squash \
		> $LAB_OUT/rpcrdma-nfsd-$name.log 2>&1 &
	spid=$!
	if [ $tr = rdma ]; then lab_wait_tcp $addr 20049 20; else lab_wait_cm 20049 20; fi
	mkdir -p /mnt/rr-$name
	filt="tcp port 20049"; [ $proto = infiniband ] && filt="udp port 4791"
	# ours: every frame the server sent, except READ replies that carry a
	# Write chunk, which Wireshark 4.0 marks malformed whoever sends them
	# (docs/interop.md finding 7; the kernel nfsd baseline capture below
	# shows the same for nfsd's own)
	lab_cap_start nfsd-$name $ifc - \
		"ip.src==$addr&&!(nfs.procedure_v3==6&&rpc.msgtyp==1&&rpcordma.writes_count>0)" \
		"$proto,rpcordma,nfs" "kernel NFS client -> rpcrdma-nfsd $name" $filt
	if timeout 120 mount -t nfs -o vers=3,proto=rdma,port=20049,nolock,timeo=100$mopt \
		$addr:/rrexport /mnt/rr-$name; then
		lab_pass "nfsd $name: mount -o vers=3,proto=rdma,port=20049$mopt"
		WL_PHASE=func lab_sub "nfsd $name" timeout 600 sh $NFSD_WL /mnt/rr-$name /rrexport
		lab_cap_stop
		WL_PHASE=load WL_FIO_JOBS=randrw-verify lab_sub "nfsd $name" timeout 900 \
			sh $NFSD_WL /mnt/rr-$name /rrexport
		nfsd_mountstats /mnt/rr-$name $name
		timeout 60 umount /mnt/rr-$name || { lab_fail "nfsd $name: umount"; umount -l /mnt/rr-$name; }
	else
		lab_fail "nfsd $name: mount -o vers=3,proto=rdma,port=20049$mopt"
		lab_cap_stop
	fi
	kill -TERM $spid 2>/dev/null
	_w=100; while [ $_w -gt 0 ] && kill -0 $spid 2>/dev/null; do sleep 0.1; _w=$((_w - 1)); done
	kill -0 $spid 2>/dev/null && kill -KILL $spid
	wait $spid; src=$?
	sed 's/^/    server: /' $LAB_OUT/rpcrdma-nfsd-$name.log | tail -n 40
	[ $src = 0 ] && lab_pass "nfsd $name: server stopped cleanly on SIGTERM" ||
		lab_fail "nfsd $name: server exit status $src"
done

# the baseline: the kernel's nfsd, same workload, same client
lab_nfsd
for p in siw rxe; do
	lab_pair $p
	lab_say "=== nfsd baseline: kernel NFSv3/RDMA client -> kernel nfsd over $p"
	mkdir -p /mnt/k$p
	flt=iwarp_ddp_rdmap; filt="tcp port 20049"
	[ $p = rxe ] && { flt=infiniband; filt="udp port 4791"; }
	lab_cap_start nfsd-baseline-kernel-nfsd-$p $IF - none "$flt,rpcordma,nfs" \
		"kernel NFS client -> kernel nfsd over $p (baseline)" $filt
	if timeout 120 mount -t nfs -o vers=3,proto=rdma,port=20049,nolock,timeo=100 $S:/export /mnt/k$p; then
		WL_PHASE=func lab_sub "nfsd baseline kernel-nfsd-$p" timeout 600 sh $NFSD_WL /mnt/k$p /export
		lab_cap_stop
		WL_PHASE=load WL_FIO_JOBS=randrw-verify lab_sub "nfsd baseline kernel-nfsd-$p" \
			timeout 900 sh $NFSD_WL /mnt/k$p /export
		timeout 60 umount /mnt/k$p || umount -l /mnt/k$p
	else
		lab_fail "nfsd baseline: mount kernel nfsd over $p"
		lab_cap_stop
	fi
done
# A/B performance: both servers mounted at once, fio alternating
# nfsd_fio MOUNT JOB: one fio job (libaio, O_DIRECT, iodepth 16, 10 s);
# prints "read_iops read_kib_s write_iops write_kib_s"
nfsd_fio() {
	case $2 in
	randread) _a="--rw=randread --bs=4k" ;;
	randrw) _a="--rw=randrw --bs=4k" ;;
	seqread) _a="--rw=read --bs=256k" ;;
	seqwrite) _a="--rw=write --bs=256k" ;;
	esac
	# shellcheck disable=SC2086
	timeout 120 fio --name="$2" --filename="$1/ab.$2" --ioengine=libaio --direct=1 --iodepth=16 \
		--size=32m --time_based --runtime=10 --minimal $_a 2>/dev/null |
		awk -F';' '{ print $8, $7, $49, $48 }'
}
mkdir -p /mnt/ab-k /mnt/ab-ours
for combo in "rdma-siw rdma siw" "verbs-siw verbs siw" "verbs-rxe verbs rxe"; do
	set -- $combo
	name=$1 tr=$2
	lab_pair $3
	lab_say "=== nfsd A/B performance: rpcrdma-nfsd $name vs kernel nfsd over $3"
	$NFSD_BIN -e /rrexport -t $tr -l $S:20050 -m 20048 --no-rpcbind --no-root-squash \
		> $LAB_OUT/rpcrdma-nfsd-ab-$name.log 2>&1 &
	spid=$!
	if [ $tr = rdma ]; then lab_wait_tcp $S 20050 20; else lab_wait_cm 20050 20; fi
	if timeout 120 mount -t nfs -o vers=3,proto=rdma,port=20050,nolock,timeo=100,mountproto=tcp,mountport=20048 \
		$S:/rrexport /mnt/ab-ours &&
		timeout 120 mount -t nfs -o vers=3,proto=rdma,port=20049,nolock,timeo=100 $S:/export /mnt/ab-k; then
		for job in randread randrw seqread seqwrite; do
			for round in 1 2; do
				o=$(nfsd_fio /mnt/ab-ours $job); k=$(nfsd_fio /mnt/ab-k $job)
				echo "ab $name $job $round rpcrdma-nfsd $o kernel-nfsd $k" >> "$NFSD_PERF"
			done
			rm -f /mnt/ab-ours/ab.$job /mnt/ab-k/ab.$job
		done
		lab_pass "nfsd A/B fio $name: $(grep -c "^ab $name " "$NFSD_PERF") job pairs measured"
	else
		lab_fail "nfsd A/B $name: mounts"
	fi
	umount /mnt/ab-ours 2>/dev/null || umount -l /mnt/ab-ours
	umount /mnt/ab-k 2>/dev/null || umount -l /mnt/ab-k
	kill -TERM $spid 2>/dev/null; wait $spid
done
# per round: rpcrdma-nfsd / nfsd for IOPS and KiB/s of the job's direction(s)
awk '$1 == "ab" && NF == 14 {
	split("read_iops read_kib_s write_iops write_kib_s", m, " ")
	for (i = 1; i <= 4; i++) {
		o = $(5 + i); k = $(10 + i)
		if (o > 0 && k > 0)
			printf "ratio %s %s round %s %s rpcrdma-nfsd/nfsd = %.2f (%s / %s)\n", $2, $3, $4, m[i], o / k, o, k
	} }' "$NFSD_PERF" >> "$NFSD_PERF"
lab_say "nfsd performance (fio in the TCG VM, A/B; ratios only mean something):"
sed 's/^/    /' "$NFSD_PERF"
