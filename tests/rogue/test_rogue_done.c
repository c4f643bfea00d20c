/* SPDX-License-Identifier: BSD-2-Clause */
/* Rogue RDMA_DONE (draft-cel-nfsv4-rpcrdma-reliable-reply-04 section 4.1.3,
 * docs/security.md "Lifetime rule"): a requester that sends RDMA_DONE for a
 * Reply exposed as a responder-provided Read chunk before, during and after
 * its RDMA Read Responses, as a plain Send or as Send With Invalidate of
 * the chunk's STag, twice, for XIDs that were never exposed, and in floods;
 * and one that invalidates the chunk's STag with a Call instead.
 * The answers: once RDMA_DONE is processed the chunk's STag is invalid (a
 * Read Request for it draws the Terminate "RDMAP, Remote Protection Error,
 * Invalid STag", RFC 5040 section 7.2); during the Read Responses the rogue
 * gets bytes of its own Reply only, then that Terminate for the requests
 * not answered yet, and the connection closes; a duplicate or unknown
 * RDMA_DONE is dropped (draft 4.1.3) and the connection goes on; a peer
 * that floods beyond the Receives posted for it loses its own connection
 * (DDP "no buffer" Terminate) and nobody else's. Each case also checks that
 * a well-behaved client on another connection is served afterwards. */
#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

/* The Read chunk is fenced: a Read Request for its first byte now draws
 * the Invalid STag Terminate and the connection closes. */
static void expect_fenced(struct rt_rrep *x)
{
	struct rr_rreq rq = {.sink_stag = 0x5151, .sink_to = 0, .size = 1,
			     .src_stag = x->stag, .src_to = x->to};

	rr_rogue_mem_del(x->g, 0x5151);
	REQUIRE_EQ(rr_rogue_mem_add(x->g, 0x5151, 0, x->sink, x->total), 0);
	REQUIRE_EQ(rr_rogue_read_req(x->g, &rq, 0), 0);
	rt_expect_term(x->g, RT_MS, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_INVALID_STAG);
	CHECK(rr_fx_srv_wait_conns(&x->f, 0, RT_MS));
}

/* RDMA_DONE first, then (after a round trip proving the server took it)
 * the Read Requests: they find an invalid STag. */
static void done_before_reads(bool inv)
{
	struct rt_rrep x;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 65536, false);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, inv, x.stag), 0);
	rt_expect_null_ok(x.g, 0x6b000001);
	REQUIRE_EQ(rr_rogue_pull_start(x.g, &x.rep, 0x5151, x.sink, x.total), x.total);
	rt_expect_term(x.g, RT_MS, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_INVALID_STAG);
	CHECK_EQ(x.g->rresp_bytes, 0);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

TEST(rogue_done_before_reads_plain)
{
	done_before_reads(false);
}

TEST(rogue_done_before_reads_inv)
{
	done_before_reads(true);
}

/* The well-behaved order, then the STag is fenced. */
static void done_after_reads(bool inv)
{
	struct rt_rrep x;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 300000, false);
	rt_rrep_pull_check(&x);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, inv, x.stag), 0);
	rt_expect_null_ok(x.g, 0x6b000002);
	expect_fenced(&x);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

TEST(rogue_done_after_reads_plain)
{
	done_after_reads(false);
}

TEST(rogue_done_after_reads_inv)
{
	done_after_reads(true);
}

/* Waits until the server has taken the rogue's RDMA_DONE (its counter) or
 * has already closed the connection over it. */
static bool done_taken(struct rr_fx_srv *f, uint64_t done_before)
{
	uint64_t end = rr_fx_ms() + RT_MS;

	while (rr_fx_ms() < end) {
		struct rpcrdma_xprt_stats st;

		if (rr_fx_srv_stats(f, &st) == 0 &&
		    (st.done_recv > done_before || st.connections == 0))
			return true;
		rr_th_sleep_ms(2);
	}
	return false;
}

/* RDMA_DONE while the server is still sending the Read Responses: the
 * rogue asks for its whole 8 MiB Reply, sends its RDMA_DONE in the same
 * write and does not read its socket, so the server's transmit stalls with
 * the Reply's memory under it. Meanwhile another client writes other data
 * (@busy): memory the server frees too early is reused for it. Then the
 * rogue reads on: every byte it gets must be its own Reply's, and unless
 * every Read Response came the connection ends: with the Invalid STag
 * Terminate, or in the middle of an FPDU (the server stopped a Read
 * Response it could no longer send; nothing can follow that). */
static void done_during_reads(bool inv, bool busy)
{
	struct rt_rrep x;
	struct rr_fx_busy b;
	struct rpcrdma_xprt_stats st0;
	uint64_t placed;
	bool ended = false;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, FS_MAX_IO, true);
	REQUIRE_EQ(rr_fx_srv_stats(&x.f, &st0), 0);
	if (busy)
		REQUIRE_EQ(rr_fx_busy_start(&b, x.f.port, "other.bin", 1536u << 10, 99), 0);
	rr_rogue_stall(x.g, true);
	rr_rogue_cork(x.g);
	REQUIRE_EQ(rr_rogue_pull_start(x.g, &x.rep, 0x5151, x.sink, x.total), x.total);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, inv, x.stag), 0);
	REQUIRE_EQ(rr_rogue_uncork(x.g), 0);
	CHECK(done_taken(&x.f, st0.done_recv));
	if (busy) {
		/* a few of the other client's WRITEs after the RDMA_DONE */
		unsigned c0 = atomic_load(&b.calls);
		uint64_t end = rr_fx_ms() + RT_MS;

		while (atomic_load(&b.calls) < c0 + 3 && rr_fx_ms() < end)
			rr_th_sleep_ms(5);
	}
	rr_rogue_stall(x.g, false);
	while (x.g->rreq_count) {
		struct rr_rogue_ev ev;
		int t = rr_rogue_next(x.g, &ev, RT_MS);

		if (t == RR_ROGUE_EV_EOF) {
			ended = true;
			break;
		}
		if (t == RR_ROGUE_EV_TIMEOUT || t == RR_ROGUE_EV_VIOLATION || t < 0) {
			fprintf(stderr, "  rogue: %s after %llu of %u bytes\n",
				t == RR_ROGUE_EV_TIMEOUT ? "nothing more, connection open" : "violation",
				(unsigned long long)x.g->rresp_bytes, x.total);
			break;
		}
	}
	placed = x.g->rresp_bytes;
	/* the bytes of its own Reply only, never anyone else's */
	{
		long long d = rt_read_reply_diff(x.sink, placed, 0, RT_XID, true, RT_SEED, 0, x.len);

		if (d >= 0)
			fprintf(stderr, "  byte %lld of the Read Responses is not the rogue's Reply\n", d);
		CHECK_EQ(d, -1);
	}
	if (placed < x.total) {
		char a[32];

		/* not every Read was answered: the connection ends, with the
		 * Invalid STag Terminate unless the server had to stop in the
		 * middle of an FPDU (then nothing can follow it) */
		CHECK(ended);
		CHECK(x.g->got_term || rr_rogue_mid_fpdu(x.g));
		if (x.g->got_term && !rr_rogue_term_is(&x.g->term, RR_TL_RDMAP,
						       RR_RDMAP_ET_PROTECTION,
						       RR_RDMAP_EC_INVALID_STAG)) {
			fprintf(stderr, "  Terminate %s, wanted RDMAP/1/0x00\n",
				rr_rogue_term_str(&x.g->term, a, sizeof(a)));
			CHECK(false);
		}
		printf("  %llu of %u bytes came, then %s\n", (unsigned long long)placed, x.total,
		       x.g->got_term ? "the Terminate" : "EOF in the middle of an FPDU");
	}
	if (busy) {
		rr_fx_busy_stop(&b);
		CHECK(atomic_load(&b.calls) > 0);
		CHECK_EQ(atomic_load(&b.failures), 0);
	}
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

TEST(rogue_done_during_reads_plain)
{
	done_during_reads(false, true);
}

/* Finding 1 of issue 12: RDMA_DONE as Send With Invalidate of the chunk's
 * STag while its Read Responses are being transmitted. On 630ae3a the
 * server freed the Reply buffer under sendmsg: heap-use-after-free (ASan
 * aborts the test), another client's WRITE data in the Read Responses
 * (Release, long-lived process), or EFAULT and a wedged connection (fresh
 * process: no Terminate, no EOF). */
TEST(rogue_finding1_done_inv_during_read_responses)
{
	done_during_reads(true, true);
}

/* RDMA_DONE twice: the second plain one is dropped (nothing waits for that
 * XID, draft 4.1.3) and the connection goes on; a second Send With
 * Invalidate names an STag that is invalid by now: the Invalid STag
 * Terminate, the same as for any invalid STag. */
static void done_twice(bool inv)
{
	struct rt_rrep x;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 100000, false);
	rt_rrep_pull_check(&x);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, inv, x.stag), 0);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, inv, x.stag), 0);
	if (inv) {
		rt_expect_term(x.g, RT_MS, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION,
			       RR_RDMAP_EC_INVALID_STAG);
	} else {
		rt_expect_null_ok(x.g, 0x6b000003);
		expect_fenced(&x);
	}
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

TEST(rogue_done_twice_plain)
{
	done_twice(false);
}

TEST(rogue_done_twice_inv)
{
	done_twice(true);
}

/* A Call (here NULL) sent as Send With Invalidate of the Read chunk's STag,
 * before the chunk's RDMA_DONE: the provider invalidates the STag all the
 * same, and the server counts it as the peer's invalidation (remote_inv);
 * the Reply is stolen, so its plain RDMA_DONE afterwards posts no Local
 * Invalidate of an STag already invalid (local_inv unchanged). Found by
 * fuzz_rrep_rsp: the session attributed Send With Invalidate only to an
 * RDMA_DONE and kept counting that STag valid. */
TEST(rogue_call_with_invalidate_steals_the_chunk)
{
	struct rt_rrep x;
	struct rpcrdma_xprt_stats st0, st1, st2;
	struct rr_rogue_reply rep;
	struct rr_hdr h;
	uint8_t rpc[64];
	int n;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 100000, false);
	REQUIRE_EQ(rr_fx_srv_stats(&x.f, &st0), 0);
	n = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x6b000011, FS_PROG, FS_VERS, FS_NULL, NULL, 0);
	REQUIRE(n > 0);
	rr_hdr_init(&h, 0x6b000011, 32, RR_HDR_MSG);
	REQUIRE_EQ(rr_rogue_send_rpcrdma(x.g, &h, rpc, (size_t)n, true, x.stag), 0);
	rt_reply(x.g, RT_MS, &rep);
	CHECK_EQ(rep.hdr.xid, 0x6b000011);
	REQUIRE_EQ(rr_fx_srv_stats(&x.f, &st1), 0);
	CHECK_EQ(st1.remote_inv - st0.remote_inv, 1);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, false, 0), 0);
	rt_expect_null_ok(x.g, 0x6b000012);
	REQUIRE_EQ(rr_fx_srv_stats(&x.f, &st2), 0);
	CHECK_EQ(st2.local_inv - st1.local_inv, 0);
	CHECK_EQ(st2.done_recv - st1.done_recv, 1);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

/* RDMA_DONE for XIDs that were never exposed, while a real Read chunk
 * waits: dropped, and they do not release the Reply that waits (it is
 * still pulled whole). */
TEST(rogue_done_unknown_xids)
{
	struct rt_rrep x;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 100000, false);
	rr_rogue_cork(x.g);
	for (uint32_t i = 1; i <= 8; i++)
		REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID + 0x100 * i, false, 0), 0);
	REQUIRE_EQ(rr_rogue_send_done(x.g, 0, false, 0), 0);
	REQUIRE_EQ(rr_rogue_send_done(x.g, 0xffffffffu, false, 0), 0);
	REQUIRE_EQ(rr_rogue_uncork(x.g), 0);
	rt_expect_null_ok(x.g, 0x6b000004);
	rt_rrep_pull_check(&x);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, true, x.stag), 0);
	rt_expect_null_ok(x.g, 0x6b000005);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

/* A flood of RDMA_DONEs that stays within the Receives: 200 rounds of 16
 * unknown-XID RDMA_DONEs and a NULL Call in one write each. Every NULL
 * Call is answered, the waiting Read chunk survives it all. */
TEST(rogue_done_flood_paced)
{
	struct rt_rrep x;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 100000, false);
	for (uint32_t r = 0; r < 200; r++) {
		rr_rogue_cork(x.g);
		for (uint32_t i = 0; i < 16; i++)
			REQUIRE_EQ(rr_rogue_send_done(x.g, 0x7c000000u + r * 16 + i, false, 0), 0);
		REQUIRE_EQ(rr_rogue_uncork(x.g), 0);
		rt_expect_null_ok(x.g, 0x6c000000u + r);
	}
	rt_rrep_pull_check(&x);
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, false, 0), 0);
	rt_expect_null_ok(x.g, 0x6b000006);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

/* 20,000 RDMA_DONEs in one write, far beyond the Receives posted for the
 * connection: either the server keeps up (all dropped, the connection
 * answers a NULL Call afterwards) or the burst finds no posted Receive and
 * the connection ends (rt_expect_burst_end: with the DDP Terminate
 * "untagged buffer, no buffer for MSN", RFC 5041 section 8, as siw answers
 * a burst, if it gets through). Nothing else: no crash, no hang, other
 * clients served. */
TEST(rogue_done_flood_burst)
{
	enum { N = 20000 };
	struct rt_rrep x;
	int r;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 100000, false);
	rr_rogue_cork(x.g);
	for (uint32_t i = 0; i < N; i++)
		REQUIRE_EQ(rr_rogue_send_done(x.g, 0x7d000000u + i, false, 0), 0);
	REQUIRE_EQ(rr_rogue_uncork(x.g), 0);
	{
		uint8_t rpc[64];
		int n = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x6b000007, FS_PROG, FS_VERS, FS_NULL,
					  NULL, 0);

		/* may fail: the server may have ended the connection already */
		(void)rr_rogue_send_call(x.g, 0x6b000007, rpc, (size_t)n);
	}
	r = rr_rogue_wait_msg(x.g, RT_MS);
	if (r >= 0)
		CHECK_EQ(rr_get_be32(x.g->msg), 0x6b000007);
	else
		rt_expect_burst_end(x.g, r, &x.f);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}
