/* SPDX-License-Identifier: BSD-2-Clause */
/* Rogue FPDUs and withheld work (RFC 5040 sections 4-7, RFC 5041 sections
 * 4-8, RFC 5044 section 4): FPDUs a provider must refuse -- wrong DDP or
 * RDMAP version, unknown opcode, wrong queue, MSN or MO, a ULPDU shorter
 * than its header, a Send longer than any Receive, a Read Response nobody
 * asked for, Commit without negotiation, a CRC error -- each drawing its
 * documented Terminate (docs/soft-iwarp.md "Terminate table") and ending
 * only that connection; a Terminate from the peer in the middle of
 * operations; and RDMA Read Requests of the server that the rogue never
 * answers. The server stays up, forgets the connection, serves the others
 * and nothing it owes waits on a worker thread. */
#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

#define CTRL(t, l, dv, rv, op)                                                           \
	(uint16_t)(((t) ? RR_DDP_T : 0) | ((l) ? RR_DDP_L : 0) | (dv) << RR_DDP_DV_SHIFT | \
		   (rv) << RR_RDMAP_RV_SHIFT | (op))

/* The 16 header bytes after an untagged control field. */
static void untagged_hdr(uint8_t h[16], uint32_t qn, uint32_t msn, uint32_t mo)
{
	rr_put_be32(h, 0);
	rr_put_be32(h + 4, qn);
	rr_put_be32(h + 8, msn);
	rr_put_be32(h + 12, mo);
}

enum bad {
	B_DDP_VERSION, B_RDMAP_VERSION, B_OPCODE, B_QN, B_MSN, B_MO, B_SHORT_ULPDU, B_TOO_LONG,
	B_READ_RESP, B_COMMIT, B_CRC, B_COUNT
};

static const struct {
	const char *what;
	uint8_t layer, etype, ecode;
} bad_want[B_COUNT] = {
	[B_DDP_VERSION] = {"DDP version 2", RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_VERSION},
	[B_RDMAP_VERSION] = {"RDMAP version 2", RR_TL_RDMAP, RR_RDMAP_ET_OPERATION,
			     RR_RDMAP_EC_VERSION},
	[B_OPCODE] = {"opcode 0x9", RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE},
	[B_QN] = {"Send on QN 1", RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN},
	[B_MSN] = {"Send with MSN 5", RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_RANGE},
	[B_MO] = {"Send with MO 4", RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MO},
	[B_SHORT_ULPDU] = {"ULPDU shorter than its header", RR_TL_RDMAP, RR_RDMAP_ET_OPERATION,
			   RR_RDMAP_EC_UNSPECIFIED},
	[B_TOO_LONG] = {"Send longer than the Receives", RR_TL_DDP, RR_DDP_ET_UNTAGGED,
			RR_DDP_EC_U_TOO_LONG},
	[B_READ_RESP] = {"Read Response never asked for", RR_TL_RDMAP, RR_RDMAP_ET_OPERATION,
			 RR_RDMAP_EC_OPCODE},
	[B_COMMIT] = {"Commit Request, Commit not negotiated", RR_TL_RDMAP,
		      RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE},
	[B_CRC] = {"CRC error (CRC negotiated)", RR_TL_LLP, 0, RR_LLP_EC_CRC},
};

/* Sends the bad FPDU @b on a fresh connection (after one good NULL Call,
 * so the connection is in use). */
static void send_bad(int port, enum bad b)
{
	struct rr_rogue_opts o;
	struct rr_rogue *g;
	uint8_t h[16], body[32] = {0};

	rr_rogue_opts_default(&o);
	if (b == B_COMMIT)
		o.ext_caps = RR_PD_EXT_CAP_RELIABLE_REPLY;
	if (b == B_CRC)
		o.crc = true;
	g = rt_open(port, &o);
	if (b == B_CRC)
		CHECK(g->mpa.crc);
	rt_expect_null_ok(g, 0xb1000001);
	if (b == B_SHORT_ULPDU) {
		uint8_t f[8] = {0, 4};   /* ULPDU_Length 4: less than a DDP header */

		rr_put_be16(f + 2, CTRL(0, 1, 1, 1, RR_OP_SEND));
		REQUIRE_EQ(rr_rogue_raw(g, f, sizeof(f)), 0);
	} else if (b == B_TOO_LONG) {
		/* 1 KiB more than the Receives the server advertised, in FPDUs
		 * of 1 KiB: little is left unread when the server refuses it,
		 * so its close does not reset the connection before the
		 * Terminate is read */
		size_t len = g->peer.recv_size + 1024u;
		uint8_t *m = calloc(1, len);

		REQUIRE(m != NULL);
		g->o.fpdu_max = 1024;
		(void)rr_rogue_send(g, RR_OP_SEND, 0, m, len);   /* may be cut short */
		free(m);
	} else if (b == B_READ_RESP) {
		uint8_t t[12];

		rr_put_be32(t, 0x1234);   /* tagged header: STag, TO 0 */
		rr_put_be64(t + 4, 0);
		REQUIRE_EQ(rr_rogue_fpdu(g, CTRL(1, 1, 1, 1, RR_OP_READ_RESP), t, 12, body, 16), 0);
	} else {
		/* an untagged FPDU: a Send on QN 0 unless the case says otherwise */
		uint16_t ctrl = CTRL(0, 1, 1, 1, RR_OP_SEND);
		uint32_t qn = RR_QN_SEND, msn = g->tx_msn[RR_QN_SEND], mo = 0;
		size_t plen = 16;

		if (b == B_DDP_VERSION)
			ctrl = CTRL(0, 1, 2, 1, RR_OP_SEND);
		if (b == B_RDMAP_VERSION)
			ctrl = CTRL(0, 1, 1, 2, RR_OP_SEND);
		if (b == B_OPCODE)
			ctrl = CTRL(0, 1, 1, 1, 0x9);
		if (b == B_QN)
			qn = RR_QN_READ;
		if (b == B_MSN)
			msn += 3;
		if (b == B_MO)
			mo = 4;
		if (b == B_COMMIT) {
			ctrl = CTRL(0, 1, 1, 1, RR_OP_COMMIT_REQ);
			qn = RR_QN_READ;
			msn = g->tx_msn[RR_QN_READ];
			plen = 20;   /* one region */
		}
		untagged_hdr(h, qn, msn, mo);
		rr_rogue_cork(g);
		REQUIRE_EQ(rr_rogue_fpdu(g, ctrl, h, 16, body, plen), 0);
		if (b == B_CRC)
			g->out[g->out_len - 1] ^= 1;   /* one bit of the CRC */
		REQUIRE_EQ(rr_rogue_uncork(g), 0);
	}
	rt_expect_term(g, RT_MS, bad_want[b].layer, bad_want[b].etype, bad_want[b].ecode);
	rr_rogue_free(g);
}

TEST(rogue_malformed_fpdus)
{
	struct rr_fx_srv f;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	for (int b = 0; b < B_COUNT; b++) {
		printf("  %s\n", bad_want[b].what);
		send_bad(f.port, (enum bad)b);
	}
	CHECK(rr_fx_srv_wait_conns(&f, 0, RT_MS));
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Sends @n WRITE Calls of 200 KB whose data is in a Read chunk of the
 * rogue's memory (STag 0xd0d0). */
static void send_writes(struct rr_rogue *g, uint32_t xid, unsigned n, uint8_t *data)
{
	uint8_t args[256], rpc[512];
	int a = rr_rogue_fs_write_args(args, sizeof(args), "w.bin", 0, FS_WRITE_CREATE, NULL,
				       200000);

	REQUIRE(a > 0);
	REQUIRE_EQ(rr_rogue_mem_add(g, 0xd0d0, 0, data, 200000), 0);
	rt_grant_up(g, n + 1);   /* and a NULL Call while they are held */
	rr_rogue_cork(g);
	for (unsigned i = 0; i < n; i++) {
		int len = rr_rogue_rpc_call(rpc, sizeof(rpc), xid + i, FS_PROG, FS_VERS, FS_WRITE,
					    args, (size_t)a);
		struct rr_hdr d;
		struct rr_hdr_seg rs = {0xd0d0, 200000, 0};

		rr_hdr_init(&d, xid + i, 32, RR_HDR_MSG);
		REQUIRE_EQ(rr_hdr_add_read(&d, (uint32_t)len, &rs), 0);
		REQUIRE_EQ(rr_rogue_send_rpcrdma(g, &d, rpc, (size_t)len, false, 0), 0);
	}
	REQUIRE_EQ(rr_rogue_uncork(g), 0);
}

/* 20 WRITEs whose Read chunks the server asks for and the rogue never
 * serves: other clients are served meanwhile, and so is the rogue's own
 * NULL Call on the same connection (the pulls wait, nothing else does);
 * when the rogue goes, the server forgets all of it. */
TEST(rogue_read_requests_never_answered)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	uint8_t *data = calloc(1, 200000);

	if (!rr_th_soft_ok())
		return;
	REQUIRE(data);
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	g = rt_open(f.port, NULL);
	g->serve = RR_ROGUE_SERVE_HOLD;
	send_writes(g, 0xb2000001, 20, data);
	/* the server asks (as many Reads as the negotiated ORD allows) */
	CHECK_EQ(rr_rogue_wait_held(g, RT_MS), 0);
	rt_probe_ok(f.port);
	rt_expect_null_ok(g, 0xb2000100);
	rr_rogue_free(g);
	CHECK(rr_fx_srv_wait_conns(&f, 0, RT_MS));
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
	free(data);
}

/* A Terminate from the rogue while the server is pulling its Read chunks
 * (held Read Requests) and has a Reply exposed as a Read chunk: the server
 * ends the connection, never answers a Terminate with one (RFC 5040 7.1),
 * forgets everything and serves others. Its first RDMA Read completes with
 * the Terminate's error (the rest are flushed): one work request in error
 * in the server's counters (rpcrdma_server_stats wr_errors), and no CQ or
 * QP fault. */
TEST(rogue_terminate_mid_operations)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	struct rr_term t;
	struct rpcrdma_xprt_stats st;
	uint8_t *data = calloc(1, 200000);
	int r;

	if (!rr_th_soft_ok())
		return;
	REQUIRE(data);
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "r.bin", 100000, 3), 0);
	g = rt_open(f.port, NULL);
	rt_read_rrep(g, 0xb3000001, "r.bin", 0, 100000, &rep);
	g->serve = RR_ROGUE_SERVE_HOLD;
	send_writes(g, 0xb3000002, 4, data);
	CHECK_EQ(rr_rogue_wait_held(g, RT_MS), 0);
	memset(&t, 0, sizeof(t));
	t.layer = RR_TL_RDMAP;
	t.etype = RR_RDMAP_ET_CATASTROPHIC;
	t.ecode = RR_RDMAP_EC_UNSPECIFIED;
	REQUIRE_EQ(rr_rogue_terminate(g, &t), 0);
	r = rr_rogue_wait_end(g, RT_MS);
	CHECK_EQ(r, 0);   /* closed, and no Terminate back */
	CHECK(rr_fx_srv_wait_conns(&f, 0, RT_MS));
	CHECK(rr_fx_srv_wait_stat(&f, offsetof(struct rpcrdma_xprt_stats, wr_errors), 1, RT_MS));
	REQUIRE_EQ(rr_fx_srv_stats(&f, &st), 0);
	CHECK_EQ(st.wr_errors, 1);
	CHECK_EQ(st.cq_overruns + st.cq_failures + st.qp_fatal + st.qp_req_errors +
			 st.qp_access_errors, 0);
	rr_rogue_free(g);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
	free(data);
}
