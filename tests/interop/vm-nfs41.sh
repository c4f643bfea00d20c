# SPDX-License-Identifier: BSD-2-Clause
# vm-nfs41.sh - the "nfs41" section of the interop lab, sourced by
# vm-tests.sh inside the VM (uses its lab_sub and lablib.sh): our NFSv4.1
# client (tests/interop/rr_lab_nfs41) against the kernel's nfsd, whose
# callbacks must arrive on our backchannel and be answered there: over
# tcp:// (the same TCP connection, RFC 8881 section 2.10.3.1), rdma://
# (soft iWARP -> kernel siw/svcrdma, RFC 8167), verbs:// on siw and on rxe.
# Each run: EXCHANGE_ID, CREATE_SESSION with a back channel (nfsd sends no
# CB_NULL probe for NFSv4.1), SEQUENCE without SEQ4_STATUS_CB_PATH_DOWN,
# BIND_CONN_TO_SESSION, OPEN with a read delegation, a local writer on the
# exported file making nfsd send CB_RECALL, DELEGRETURN, CLOSE, DESTROY.
# Every capture must hold the callback program's Calls (0x40000000, which
# tshark decodes as NFS CB), and CB_RECALL (CB_COMPOUND operation 4) when
# the client saw one; none of our frames may be malformed. First,
# the library's backchannel tests (tests/rpc/test_backchannel.c) on verbs://,
# both ends ours, over kernel siw and rxe.
if lab_section nfs41; then
	# the library's own backchannel tests on verbs://, both ends ours, on
	# kernel siw and rxe (they need two RDMA devices: skipped on the host)
	for p in siw rxe; do
		lab_pair $p
		lab_say "=== nfs41: backchannel unit tests on verbs:// over $p ($C -> $S)"
		# (tshark dissects the Calls of a program it does not know only
		# when asked: rpc.dissect_unknown_programs)
		lab_cap_start bc-verbs-$p $IF pref:rpc.dissect_unknown_programs:TRUE - \
			"rpcordma,rpc.program==1073742871" \
			"backchannel tests, verbs:// both ends on $p (callback program 0x40000417)"
		RR_VERBS_SERVER_ADDR=$S RR_VERBS_CLIENT_ADDR=$C timeout 240 /share/rr-tests \
			bc_verbs_both_roles bc_verbs_not_offered bc_verbs_credits_exhausted \
			bc_verbs_idle_reconnect \
			> $LAB_OUT/rr-tests-bc-$p.log 2>&1; rc=$?
		tail -n 8 $LAB_OUT/rr-tests-bc-$p.log
		if [ $rc = 0 ] && ! grep -q '^skip' $LAB_OUT/rr-tests-bc-$p.log; then
			lab_pass "nfs41: backchannel tests on verbs:// over $p: $(tail -n 1 $LAB_OUT/rr-tests-bc-$p.log)"
		else
			lab_fail "nfs41: backchannel tests on verbs:// over $p (rc=$rc): $(tail -n 1 $LAB_OUT/rr-tests-bc-$p.log)"
		fi
		lab_cap_stop
	done
	lab_say "=== nfs41: kernel nfsd, our NFSv4.1 client, nfsd's callbacks on our backchannel"
	# nfsd hands out no delegation while any lock manager is in its grace
	# period: lockd's is 50 s unless set (nfsv4gracetime is lab_nfsd's 10 s)
	modprobe lockd 2>/dev/null
	[ -w /proc/sys/fs/nfs/nlm_grace_period ] && echo 10 > /proc/sys/fs/nfs/nlm_grace_period
	lab_nfsd
	lab_say "lease-break-time $(cat /proc/sys/fs/lease-break-time 2>/dev/null) s, nfsd versions: $(cat /proc/fs/nfsd/versions 2>/dev/null)"
	for combo in "tcp tcp $SIW_S 2049 vS0 rpc $SIW_C" "rdma-siw rdma $SIW_S 20049 vS0 rpcordma $SIW_C" \
		"verbs-siw verbs $SIW_S 20049 vS0 rpcordma $SIW_C" "verbs-rxe verbs $RXE_S 20049 vR0 rpcordma $RXE_C"; do
		set -- $combo
		f=deleg-$1-$(date +%s).txt
		echo "a file for a read delegation" > /export/$f
		lab_say "=== nfs41: $1 ($2://$3:$4)"
		lab_cap_start nfs41-$1 $5 - ip.src==$7 "$6,nfs,rpc.program==1073741824" \
			"NFSv4.1 client over $1, nfsd's callbacks"
		lab_sub "nfs41 $1" timeout 240 $BIN/rr_lab_nfs41 -u $2://$3:$4 -e /export -l /export -f $f
		# the recall too, when the client saw one
		if grep -q '^PASS nfs41 '"$1"': CB_RECALL served' $LAB_OUT/results.txt; then
			sed -i "s/^\(nfs41-$1 [^ ]* [^ ]* [^ ]*\)/\1,nfs.cb.operation==4/" $LAB_OUT/pcaps.txt
		fi
		lab_cap_stop
	done
fi
