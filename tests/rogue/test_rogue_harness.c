/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the rogue peer itself (rogue.h) against the current server: a
 * well-behaved exchange driven through the rogue's own MPA, DDP and RPC
 * code works byte-exact -- the negotiation (RFC 8797 block and extension
 * block, MPA revision 2), a NULL call's Reply (RFC 8166 section 4 header,
 * RFC 5531 Reply), a WRITE whose data the server pulls from the rogue's
 * memory by RDMA Read (Read chunk), a READ whose data the server RDMA
 * Writes into it (Write chunk), a Reply pulled as a responder-provided Read
 * chunk and released with RDMA_DONE (reliable reply, plain and Send With
 * Invalidate), a push-mode region written and committed (RDMA Commit), and
 * the rpcrdma-server child process. If these fail, the attack tests mean
 * nothing. */
#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

TEST(rogue_harness_null_call)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	uint8_t rpc[64], want[52];
	uint32_t xid = 0x52474e31;
	int n;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	g = rt_open(f.port, NULL);
	/* MPA revision 2 with IRD/ORD, no CRC, no markers (RFC 6581) */
	CHECK_EQ(g->rep.rev, 2);
	CHECK(g->mpa.enhanced);
	CHECK(!g->mpa.crc);
	CHECK(g->mpa.ird >= 1);
	CHECK(g->mpa.ord >= 1);
	/* the server's RFC 8797 block and extension block */
	CHECK_EQ(g->peer.status, RR_PD_PRESENT);
	CHECK_EQ(g->peer.ext_status, RR_PD_EXT_PRESENT);
	CHECK(g->neg.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY);
	CHECK(g->neg.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT);
	CHECK_EQ(g->neg.send_threshold, 4096);
	CHECK_EQ(g->neg.recv_threshold, 4096);

	n = rr_rogue_rpc_call(rpc, sizeof(rpc), xid, FS_PROG, FS_VERS, FS_NULL, NULL, 0);
	REQUIRE_EQ(n, 40);
	REQUIRE_EQ(rr_rogue_send_call(g, xid, rpc, (size_t)n), 0);
	n = rr_rogue_wait_msg(g, RT_MS);
	REQUIRE_EQ(n, (int)sizeof(want));
	/* RDMA_MSG, no chunks (RFC 8166 4.2), then the RPC Reply: xid, REPLY,
	 * MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS (RFC 5531 section 9) */
	rr_test_hex("52474e31 00000001 00000000 00000000 00000000 00000000 00000000"
		    "52474e31 00000001 00000000 00000000 00000000 00000000",
		    want, sizeof(want));
	CHECK(rr_get_be32(g->msg + 8) >= 1);   /* a grant, never 0 */
	rr_put_be32(want + 8, rr_get_be32(g->msg + 8));
	CHECK_MEM(g->msg, want, sizeof(want));
	CHECK(!g->violation);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}

TEST(rogue_harness_write_read_chunks)
{
	enum { LEN = 300001 };
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	uint8_t *src = malloc(LEN), *dst = malloc(LEN + 3), *back = malloc(LEN);
	uint8_t args[256], rpc[512];
	int n, alen;

	if (!rr_th_soft_ok())
		return;
	REQUIRE(src && dst && back);
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	g = rt_open(f.port, NULL);
	rr_fx_pattern(src, LEN, 5, 0);

	/* WRITE: the data item goes in a Read chunk at its Position (RFC 8166
	 * 3.5.3); the server pulls it from the rogue's region by RDMA Read */
	REQUIRE_EQ(rr_rogue_mem_add(g, 0x1111aa01, 0x10000, src, LEN), 0);
	alen = rr_rogue_fs_write_args(args, sizeof(args), "w.bin", 0,
				      FS_WRITE_CREATE | FS_WRITE_TRUNC, NULL, LEN);
	REQUIRE(alen > 0);
	n = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x1001, FS_PROG, FS_VERS, FS_WRITE, args,
			      (size_t)alen);
	REQUIRE(n > 0);
	{
		struct rr_hdr d;
		struct rr_hdr_seg rs = {0x1111aa01, LEN, 0x10000};

		rr_hdr_init(&d, 0x1001, 8, RR_HDR_MSG);
		REQUIRE_EQ(rr_hdr_add_read(&d, (uint32_t)n, &rs), 0);
		REQUIRE_EQ(rr_rogue_send_rpcrdma(g, &d, rpc, (size_t)n, false, 0), 0);
	}
	rt_reply(g, RT_MS, &rep);
	CHECK_EQ(rep.hdr.xid, 0x1001);
	REQUIRE(rep.has_rpc);
	CHECK_EQ(rep.rpc.accept_stat, RR_RPC_SUCCESS);
	REQUIRE_EQ(rep.res_len, 8);
	CHECK_EQ(rr_get_be32(rep.res), FS_OK);
	CHECK_EQ(rr_get_be32(rep.res + 4), LEN);
	CHECK_EQ(rr_rogue_mem_find(g, 0x1111aa01)->read, LEN);
	CHECK_EQ(rr_fx_file_read(&f.d, "w.bin", 0, back, LEN), LEN);
	CHECK_MEM(back, src, LEN);

	/* READ into a Write chunk: the server RDMA Writes the data into the
	 * rogue's region and returns the chunk with its actual length (RFC 8166
	 * 4.4.6); the pad is not written */
	memset(dst, 0xee, LEN + 3);
	REQUIRE_EQ(rr_rogue_mem_add(g, 0x2222bb02, 0x777000, dst, LEN + 3), 0);
	alen = rr_rogue_fs_read_args(args, sizeof(args), "w.bin", 0, LEN);
	{
		struct rr_hdr_seg w = {0x2222bb02, LEN + 3, 0x777000};

		REQUIRE_EQ(rr_rogue_fs_call(g, 0x1002, FS_READ, args, (size_t)alen, &w, 1, NULL), 0);
	}
	rt_reply(g, RT_MS, &rep);
	CHECK_EQ(rep.hdr.proc, RR_HDR_MSG);
	REQUIRE_EQ(rep.hdr.nwrite, 1);
	REQUIRE_EQ(rep.hdr.write[0].nsegs, 1);
	CHECK_EQ(rep.hdr.segs[rep.hdr.write[0].first].handle, 0x2222bb02);
	CHECK_EQ(rep.hdr.segs[rep.hdr.write[0].first].length, LEN);
	CHECK_EQ(rep.hdr.segs[rep.hdr.write[0].first].offset, 0x777000);
	REQUIRE(rep.has_rpc);
	REQUIRE_EQ(rep.res_len, 12);   /* status, eof, length: the data was placed */
	CHECK_EQ(rr_get_be32(rep.res), FS_OK);
	CHECK_EQ(rr_get_be32(rep.res + 4), 1);
	CHECK_EQ(rr_get_be32(rep.res + 8), LEN);
	CHECK_MEM(dst, src, LEN);
	CHECK_EQ(dst[LEN], 0xee);      /* no pad written */
	CHECK_EQ(rr_rogue_mem_find(g, 0x2222bb02)->written, LEN);
	CHECK(!g->violation);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
	free(src);
	free(dst);
	free(back);
}

/* A READ whose Reply comes as a responder-provided Read chunk, pulled and
 * released with RDMA_DONE (@inv: as Send With Invalidate of its STag). */
static void reliable_reply(bool inv)
{
	enum { LEN = 200000 };
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	uint32_t total = rt_read_reply_len(LEN), stag;
	uint8_t *sink = malloc(total);
	long got;

	if (!rr_th_soft_ok())
		return;
	REQUIRE(sink);
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "r.bin", LEN, 9), 0);
	g = rt_open(f.port, NULL);
	CHECK(g->neg.send_inv);
	rt_read_rrep(g, 0x2001, "r.bin", 0, LEN, &rep);
	stag = rep.hdr.segs[rep.rchunk->first].handle;
	for (uint32_t i = 1; i < rep.rchunk->nsegs; i++)
		CHECK_EQ(rep.hdr.segs[rep.rchunk->first + i].handle, stag);   /* one STag */
	got = rr_rogue_pull_start(g, &rep, 0x5151, sink, total);
	REQUIRE_EQ(got, total);
	REQUIRE_EQ(rr_rogue_reads_wait(g, RT_MS), 0);
	CHECK_EQ(rt_read_reply_diff(sink, total, 0, 0x2001, true, 9, 0, LEN), -1);
	REQUIRE_EQ(rr_rogue_send_done(g, 0x2001, inv, stag), 0);
	/* the connection goes on, the server is owed nothing */
	rt_expect_null_ok(g, 0x2002);
	CHECK(!g->violation);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
	free(sink);
}

TEST(rogue_harness_reliable_reply_plain_done)
{
	reliable_reply(false);
}

TEST(rogue_harness_reliable_reply_inv_done)
{
	reliable_reply(true);
}

/* PUSH_OPEN, RDMA Write into the region, RDMA Commit: the Commit Response
 * says durable and the bytes are in the file. */
TEST(rogue_harness_push_commit)
{
	enum { LEN = 65536 };
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rt_push p;
	uint8_t *data = malloc(LEN), *back = malloc(LEN);

	if (!rr_th_soft_ok())
		return;
	REQUIRE(data && back);
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "p.bin", 100, 3), 0);
	g = rt_open(f.port, NULL);
	REQUIRE(g->commit);
	rt_push_open(g, 0x3001, "p.bin", LEN, &p);
	CHECK_EQ(p.file_off, 100);   /* appended after the existing 100 bytes */
	rr_fx_pattern(data, LEN, 11, 0);
	REQUIRE_EQ(rr_rogue_write(g, p.stag, p.to, data, LEN), 0);
	CHECK_EQ(rt_commit(g, 77, p.stag, p.to, LEN), 0);   /* Status 0: durable */
	CHECK_EQ(rr_fx_file_read(&f.d, "p.bin", p.file_off, back, LEN), LEN);
	CHECK_MEM(back, data, LEN);
	rt_expect_null_ok(g, 0x3002);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
	free(data);
	free(back);
}

/* The rpcrdma-server executable as a child process: the rogue and a probe
 * are served; SIGTERM ends it with status 0; its CPU time, RSS and fds are
 * readable. */
TEST(rogue_harness_child_server)
{
	struct rr_fx_child c;
	struct rr_rogue *g;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_child_start(&c, 0, 2), 0);
	CHECK(rr_fx_child_alive(&c));
	CHECK(rr_fx_child_cpu(&c) >= 0);
	CHECK(rr_fx_child_rss_kb(&c) > 0);
	CHECK(rr_fx_child_nfds(&c) > 2);
	g = rt_open(c.port, NULL);
	rt_expect_null_ok(g, 0x4001);
	rr_rogue_free(g);
	rt_probe_ok(c.port);
	CHECK_EQ(rr_fx_child_stop(&c, RT_MS), 0);
}
