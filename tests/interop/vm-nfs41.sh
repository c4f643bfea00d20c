# SPDX-License-Identifier: BSD-2-Clause
# vm-nfs41.sh - the "nfs41" section of the interop lab, sourced by
# vm-tests.sh inside the VM (uses its lab_sub and lablib.sh): our NFSv4.1
# client (tests/interop/rr_lab_nfs41) against the kernel's nfsd, whose
# callbacks must arrive on our backchannel and be answered there: over
# tcp:// (the same TCP connection, RFC 8881 section 2.10.3.1), rdma://
# (soft iWARP -> kernel siw/svcrdma, RFC 8167), verbs:// on siw and on rxe.
# Each run: EXCHANGE_ID, CREATE_SESSION with a back channel, nfsd's CB_NULL
# probes (after CREATE_SESSION and BIND_CONN_TO_SESSION), SEQUENCE without
# SEQ4_STATUS_CB_PATH_DOWN, OPEN with a read delegation, a local writer on
# the exported file making nfsd send CB_RECALL, DELEGRETURN, CLOSE, DESTROY.
# Every capture must hold the callback program's Calls (0x40000000, which
# tshark decodes as NFS CB) and CB_NULL, and CB_RECALL (CB_COMPOUND operation
# 4) when the client saw one; none of our frames may be malformed.
if lab_section nfs41; then
	lab_say "=== nfs41: kernel nfsd, our NFSv4.1 client, nfsd's callbacks on our backchannel"
	lab_nfsd
	lab_say "lease-break-time $(cat /proc/sys/fs/lease-break-time 2>/dev/null) s, nfsd versions: $(cat /proc/fs/nfsd/versions 2>/dev/null)"
	for combo in "tcp tcp $SIW_S 2049 vS0 rpc $SIW_C" "rdma-siw rdma $SIW_S 20049 vS0 rpcordma $SIW_C" \
		"verbs-siw verbs $SIW_S 20049 vS0 rpcordma $SIW_C" "verbs-rxe verbs $RXE_S 20049 vR0 rpcordma $RXE_C"; do
		set -- $combo
		f=deleg-$1-$(date +%s).txt
		echo "a file for a read delegation" > /export/$f
		lab_say "=== nfs41: $1 ($2://$3:$4)"
		lab_cap_start nfs41-$1 $5 - ip.src==$7 "$6,nfs,rpc.program==1073741824,nfs.cb_procedure==0" \
			"NFSv4.1 client over $1, nfsd's callbacks"
		lab_sub "nfs41 $1" timeout 240 $BIN/rr_lab_nfs41 -u $2://$3:$4 -e /export -l /export -f $f
		# the recall too, when the client saw one
		if grep -q '^PASS nfs41 '"$1"': CB_RECALL served' $LAB_OUT/results.txt; then
			sed -i "s/^\(nfs41-$1 [^ ]* [^ ]* [^ ]*\)/\1,nfs.cb.operation==4/" $LAB_OUT/pcaps.txt
		fi
		lab_cap_stop
	done
fi
