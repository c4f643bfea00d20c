/* SPDX-License-Identifier: BSD-2-Clause */
/* Test-thread steps of the rogue suite (rogue_t.h). */
#include "rogue_t.h"

#include "test.h"

struct rr_rogue *rt_open(int port, const struct rr_rogue_opts *o)
{
	struct rr_rogue *g = NULL;
	int rc = rr_rogue_open(&g, port, o);

	if (rc)
		fprintf(stderr, "  rogue open: %s\n", strerror(-rc));
	REQUIRE_EQ(rc, 0);
	return g;
}

struct rr_rogue *rt_open_small(int port)
{
	struct rr_rogue_opts o;

	rr_rogue_opts_default(&o);
	o.recv_size = 1024;
	o.rcvbuf = 4096;
	return rt_open(port, &o);
}

void rt_reply(struct rr_rogue *g, unsigned ms, struct rr_rogue_reply *rep)
{
	int n = rr_rogue_wait_msg(g, ms);

	if (n < 0)
		fprintf(stderr, "  no Reply: %s\n", strerror(-n));
	REQUIRE(n >= 0);
	REQUIRE_EQ(rr_rogue_parse_reply(g, g->msg, (size_t)n, rep), 0);
}

void rt_read_rrep(struct rr_rogue *g, uint32_t xid, const char *path, uint64_t off,
		  uint32_t count, struct rr_rogue_reply *rep)
{
	uint8_t args[256];
	int n = rr_rogue_fs_read_args(args, sizeof(args), path, off, count);

	REQUIRE(n > 0);
	REQUIRE_EQ(rr_rogue_fs_call(g, xid, FS_READ, args, (size_t)n, NULL, 0, NULL), 0);
	rt_reply(g, RT_MS, rep);
	REQUIRE_EQ(rep->hdr.xid, xid);
	REQUIRE_EQ(rep->hdr.proc, RR_HDR_NOMSG);
	REQUIRE(rep->rchunk != NULL);
	REQUIRE_EQ(rep->rchunk->length, rt_read_reply_len(count));
}

uint32_t rt_grant_up(struct rr_rogue *g, uint32_t want)
{
	for (int round = 0; round < 16 && g->grant < want; round++) {
		uint32_t n = g->grant, first = 0x7e000000u + g->ramp_xid;
		uint8_t rpc[64];

		rr_rogue_cork(g);
		for (uint32_t i = 0; i < n; i++) {
			int len = rr_rogue_rpc_call(rpc, sizeof(rpc), first + i, FS_PROG, FS_VERS,
						    FS_NULL, NULL, 0);

			REQUIRE(len > 0);
			REQUIRE_EQ(rr_rogue_send_call(g, first + i, rpc, (size_t)len), 0);
		}
		REQUIRE_EQ(rr_rogue_uncork(g), 0);
		g->ramp_xid += n;
		for (uint32_t i = 0; i < n; i++) {
			struct rr_rogue_reply rep;

			rt_reply(g, RT_MS, &rep);
			REQUIRE(rep.hdr.xid - first < n);
		}
	}
	REQUIRE(g->grant >= want);
	return g->grant;
}

void rt_send_reads(struct rr_rogue *g, uint32_t xid, unsigned n, const char *path,
		   uint32_t count)
{
	uint8_t args[256];
	int len = rr_rogue_fs_read_args(args, sizeof(args), path, 0, count);

	REQUIRE(len > 0);
	rt_grant_up(g, n);
	rr_rogue_cork(g);
	for (unsigned i = 0; i < n; i++)
		REQUIRE_EQ(rr_rogue_fs_call(g, xid + i, FS_READ, args, (size_t)len, NULL, 0, NULL),
			   0);
	REQUIRE_EQ(rr_rogue_uncork(g), 0);
}

long long rt_read_reply_diff(const uint8_t *p, size_t len, uint32_t from, uint32_t xid,
			     bool eof, uint32_t seed, uint64_t off, uint32_t count)
{
	uint8_t head[36];

	rr_put_be32(head, xid);
	rr_put_be32(head + 4, RR_RPC_REPLY);
	rr_put_be32(head + 8, RR_RPC_MSG_ACCEPTED);
	rr_put_be32(head + 12, RR_RPC_AUTH_NONE);
	rr_put_be32(head + 16, 0);
	rr_put_be32(head + 20, RR_RPC_SUCCESS);
	rr_put_be32(head + 24, FS_OK);
	rr_put_be32(head + 28, eof ? 1 : 0);
	rr_put_be32(head + 32, count);
	for (size_t i = 0; i < len; i++) {
		uint64_t at = (uint64_t)from + i;
		uint8_t want;

		if (at < sizeof(head))
			want = head[at];
		else if (at - sizeof(head) < count)
			want = rr_fx_byte(seed, off + (at - sizeof(head)));
		else
			want = 0;   /* XDR pad */
		if (p[i] != want)
			return (long long)i;
	}
	return -1;
}

void rt_expect_term(struct rr_rogue *g, unsigned ms, uint8_t layer, uint8_t etype,
		    uint8_t ecode)
{
	char a[32], b[32];
	struct rr_term want = {.layer = layer, .etype = etype, .ecode = ecode};
	int r = rr_rogue_wait_end(g, ms);

	if (r != 1)
		fprintf(stderr, "  connection %s without a Terminate (wanted %s)\n",
			r == -ETIMEDOUT ? "still open" : "ended",
			rr_rogue_term_str(&want, b, sizeof(b)));
	CHECK_EQ(r, 1);
	if (r == 1 && !rr_rogue_term_is(&g->term, layer, etype, ecode)) {
		fprintf(stderr, "  Terminate %s, wanted %s\n", rr_rogue_term_str(&g->term, a, sizeof(a)),
			rr_rogue_term_str(&want, b, sizeof(b)));
		CHECK(rr_rogue_term_is(&g->term, layer, etype, ecode));
	}
}

void rt_expect_burst_end(struct rr_rogue *g, int r, struct rr_fx_srv *f)
{
	char a[32];

	CHECK(r == -ECONNRESET || r == -EPIPE);
	if (r != -ECONNRESET && r != -EPIPE)
		fprintf(stderr, "  after the burst: %s\n", strerror(-r));
	if (g->got_term && !rr_rogue_term_is(&g->term, RR_TL_DDP, RR_DDP_ET_UNTAGGED,
					     RR_DDP_EC_U_MSN_NOBUF)) {
		fprintf(stderr, "  Terminate %s, wanted DDP/2/0x02\n",
			rr_rogue_term_str(&g->term, a, sizeof(a)));
		CHECK(false);
	}
	CHECK(rr_rogue_wait_end(g, RT_MS) >= 0);
	CHECK(rr_fx_srv_wait_conns(f, 0, RT_MS));
}

void rt_expect_null_ok(struct rr_rogue *g, uint32_t xid)
{
	struct rr_rogue_reply rep;
	uint8_t rpc[64];
	int n = rr_rogue_rpc_call(rpc, sizeof(rpc), xid, FS_PROG, FS_VERS, FS_NULL, NULL, 0);

	REQUIRE(n > 0);
	REQUIRE_EQ(rr_rogue_send_call(g, xid, rpc, (size_t)n), 0);
	rt_reply(g, RT_MS, &rep);
	CHECK_EQ(rep.hdr.xid, xid);
	CHECK(rep.has_rpc);
	CHECK_EQ(rep.rpc.stat, RR_RPC_MSG_ACCEPTED);
	CHECK_EQ(rep.rpc.accept_stat, RR_RPC_SUCCESS);
}

void rt_probe_ok(int port)
{
	int rc = rr_fx_probe(port, RT_MS);

	if (rc)
		fprintf(stderr, "  probe client: %s\n", strerror(-rc));
	CHECK_EQ(rc, 0);
}

uint32_t rt_unknown_stag(uint32_t near)
{
	return 0xfffff000u | ((near ^ 0x5au) & 0xffu);
}

void rt_rrep_setup(struct rt_rrep *x, uint32_t len, bool small)
{
	memset(x, 0, sizeof(*x));
	REQUIRE_EQ(rr_fx_srv_start(&x->f, NULL), 0);
	REQUIRE_EQ(rr_fx_file(&x->f.d, "r.bin", len, RT_SEED), 0);
	x->g = small ? rt_open_small(x->f.port) : rt_open(x->f.port, NULL);
	x->len = len;
	rt_read_rrep(x->g, RT_XID, "r.bin", 0, len, &x->rep);
	x->stag = x->rep.hdr.segs[x->rep.rchunk->first].handle;
	x->to = x->rep.hdr.segs[x->rep.rchunk->first].offset;
	x->total = (uint32_t)x->rep.rchunk->length;
	x->sink = calloc(1, x->total);
	REQUIRE(x->sink != NULL);
}

void rt_rrep_teardown(struct rt_rrep *x)
{
	rr_rogue_free(x->g);   /* first: a server never waits for a closed peer */
	x->g = NULL;
	rr_fx_srv_stop(&x->f);
	free(x->sink);
	x->sink = NULL;
}

void rt_rrep_pull_check(struct rt_rrep *x)
{
	REQUIRE_EQ(rr_rogue_pull_start(x->g, &x->rep, 0x5151, x->sink, x->total), x->total);
	REQUIRE_EQ(rr_rogue_reads_wait(x->g, RT_MS), 0);
	CHECK_EQ(rt_read_reply_diff(x->sink, x->total, 0, RT_XID, true, RT_SEED, 0, x->len), -1);
}

void rt_push_open(struct rr_rogue *g, uint32_t xid, const char *path, uint64_t size,
		  struct rt_push *p)
{
	struct rr_rogue_reply rep;
	uint8_t args[256];
	int n = rr_rogue_fs_push_args(args, sizeof(args), path, size);

	REQUIRE(n > 0);
	REQUIRE_EQ(rr_rogue_fs_call(g, xid, FS_PUSH_OPEN, args, (size_t)n, NULL, 0, NULL), 0);
	rt_reply(g, RT_MS, &rep);
	REQUIRE(rep.has_rpc);
	/* status, region (STag, offset, length, levels: rpcrdma_xdr_put_push_region),
	 * file offset */
	REQUIRE_EQ(rep.res_len, 4 + 24 + 8);
	REQUIRE_EQ(rr_get_be32(rep.res), FS_OK);
	p->stag = rr_get_be32(rep.res + 4);
	p->to = rr_get_be64(rep.res + 8);
	p->len = rr_get_be64(rep.res + 16);
	p->file_off = rr_get_be64(rep.res + 28);
	REQUIRE_EQ(p->len, size);
}

int rt_commit(struct rr_rogue *g, uint32_t id, uint32_t stag, uint64_t to, uint32_t len)
{
	struct rr_commit_req c;
	struct rr_rogue_ev ev;
	int r;

	memset(&c, 0, sizeof(c));
	c.id = id;
	c.nregions = 1;
	c.region[0].stag = stag;
	c.region[0].to = to;
	c.region[0].len = len;
	r = rr_rogue_commit(g, &c);
	if (!r)
		r = rr_rogue_wait_event(g, RR_ROGUE_EV_COMMIT_RESP, RT_MS, &ev);
	if (r < 0)
		return r;
	return ev.cresp.id == id ? (int)ev.cresp.status : -EPROTO;
}
