# SPDX-License-Identifier: BSD-2-Clause
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
#   - verbs:// on rxe into persistent memory, when the VM has an emulated
#     NVDIMM (run-lab.sh LAB_PMEM=MiB): a device-DAX namespace, a persistent
#     FLUSH (placement type 2), kill -9, read back; without one: SKIP;
#   - rdma:// (soft iWARP) over the siw veth: RDMAP Commit 0xC/0xD.
# On the Debian 12 guest (rdma-core 44, Linux 6.1) verbs:// says why it has
# no Commit and the two verbs checks are SKIP.
if lab_section push; then
	port=7500
	lab_pair rxe
	port=$((port + 1))
	lab_say "=== push: verbs:// on rxe ($DC -> $DS), Commit as IB FLUSH"
	lab_cap_start push-verbs-rxe $IF - - "infiniband.bth.opcode==28,infiniband.feth.plt==1" \
		"push Write + FLUSH (global visibility), verbs both ends on rxe"
	lab_sub "push verbs-rxe" timeout 240 $BIN/rr_lab_push verbs://$S:$port
	lab_cap_stop
	port=$((port + 1))
	modprobe -a nfit nd_pmem dax_pmem device_dax 2>/dev/null
	if tail -n 1 $LAB_OUT/results.txt | grep -q '^SKIP push verbs-rxe:'; then
		lab_skip "push verbs-rxe-pmem: no FLUSH on rxe here (see push verbs-rxe)"
	elif ndctl list -R 2>/dev/null | grep -q '"dev":"region'; then
		lab_say "=== push: verbs:// on rxe into persistent memory (emulated NVDIMM, device DAX)"
		ndctl create-namespace -f -e namespace0.0 -m devdax -a 2M > $LAB_OUT/ndctl.log 2>&1 ||
			lab_say "ndctl create-namespace failed: $(tail -n 1 $LAB_OUT/ndctl.log)"
		dax=$(ls /dev/dax* 2>/dev/null | head -n 1)
		grep -i 'persistent' /proc/iomem | sed 's/^/    iomem: /'
		if [ -n "$dax" ]; then
			lab_cap_start push-verbs-rxe-pmem $IF - - "infiniband.bth.opcode==28,infiniband.feth.plt==2" \
				"push Write + FLUSH (persistent) into device DAX, verbs both ends on rxe"
			lab_sub "push verbs-rxe-pmem" timeout 240 $BIN/rr_lab_push verbs://$S:$port -x $dax
			lab_cap_stop
		else
			lab_fail "push verbs-rxe-pmem: no device-DAX node after ndctl create-namespace"
		fi
	else
		lab_skip "push verbs-rxe-pmem: no persistent memory in this VM (run-lab.sh LAB_PMEM=MiB adds an emulated NVDIMM)"
	fi
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
