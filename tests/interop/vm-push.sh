# vm-push.sh - the "push" section of the interop lab, sourced by vm-tests.sh
# inside the VM (uses its lab_sub and lablib.sh): push mode, RDMA Write +
# RDMA Commit into a file-backed region a server exposed, with the server
# killed (kill -9) right after a Commit completed (tests/interop/rr_lab_push):
#   - verbs:// on kernel rxe, both ends: the Commit is an InfiniBand FLUSH
#     (IBV_WR_FLUSH; rdma-core >= 45, Linux >= 6.2: the Debian 13 guest). The
#     capture must show FLUSH requests (BTH opcode 28) with their FLUSH
#     extended header, which tshark 4.4 decodes (4.0 has no name for it);
#   - verbs:// on kernel siw: siw has no FLUSH: "not yet available", with
#     the provider's reason;
#   - rdma:// (soft iWARP) over the siw veth: RDMAP Commit 0xC/0xD.
# On the Debian 12 guest (rdma-core 44, Linux 6.1) verbs:// says why it has
# no Commit and the two verbs checks are SKIP.
if lab_section push; then
	port=7500
	lab_pair rxe
	port=$((port + 1))
	lab_say "=== push: verbs:// on rxe ($DC -> $DS), Commit as IB FLUSH"
	lab_cap_start push-verbs-rxe $IF - - "infiniband.bth.opcode==28,infiniband.feth.plt" \
		"push Write + FLUSH, verbs both ends on rxe"
	lab_sub "push verbs-rxe" timeout 240 $BIN/rr_lab_push verbs://$S:$port
	lab_cap_stop
	lab_pair siw
	port=$((port + 1))
	lab_say "=== push: verbs:// on siw (no FLUSH in siw)"
	lab_sub "push verbs-siw" timeout 120 $BIN/rr_lab_push verbs://$S:$port
	port=$((port + 1))
	lab_say "=== push: rdma:// (soft iWARP) over the siw veth, Commit as RDMAP 0xC/0xD"
	lab_cap_start push-rdma $IF - - "iwarp_ddp_rdmap" "push Write + RDMAP Commit, soft both ends" \
		tcp port $port
	lab_sub "push rdma-soft" timeout 240 $BIN/rr_lab_push rdma://$S:$port
	lab_cap_stop
fi
