/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the per-RPC caches (docs/perf-notes/lean.md): the requester's
 * kept header (RFC 8166 section 4.1 transport header, marshalled and decoded
 * once per message), the responder's kept rebuilt-Call buffer (section 3.4.5
 * Read chunks with XDR round-up: the pad bytes must be zeros, never a
 * previous Call's bytes), the responder's partially zeroed Call contexts, and
 * the STag table's pooled key randomness (RFC 5040 section 2.1 STags: keys
 * stay drawn from rr_random, one draw per many registrations). Every cache is
 * bounded, freed by its fini (the test allocator's live count), and leaks
 * nothing of one message into the next. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "rpcrdma/rpc.h"
#include "proto/xprt.h"
#include "rdma/mr_table.h"
#include "rpcrdma/rdma.h"

/* A simulated memory space: an STag is an index into lean_regs. */
static struct rr_xprt_reg *lean_regs[64];
static unsigned lean_nregs;

static void lean_register(struct rr_xprt_reg *g)
{
	REQUIRE(lean_nregs < 64);
	g->stag = 0x500 + lean_nregs;
	g->addr = (uint64_t)(uintptr_t)g->base;
	g->valid = true;
	lean_regs[lean_nregs++] = g;
}

static bool lean_read(void *dst, uint32_t stag, uint64_t addr, uint32_t len)
{
	struct rr_xprt_reg *g;

	if (stag < 0x500 || stag - 0x500 >= lean_nregs)
		return false;
	g = lean_regs[stag - 0x500];
	if (!g->valid || addr < g->addr || addr + len > g->addr + g->len)
		return false;
	memcpy(dst, (void *)(uintptr_t)addr, len);
	return true;
}

struct lean {
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats rst, sst;
	struct rr_xprt_requester req;
	struct rr_xprt_responder rsp;
	uint8_t send[70000];
	uint32_t send_len;
};

static void lean_init(struct lean *t, bool keep)
{
	memset(t, 0, sizeof(*t));
	rr_test_env_init(&t->te, 3);
	rr_xprt_params_default(&t->p);
	t->p.inline_ddp = false;
	t->p.call_inline = t->p.reply_inline = 1024;
	t->p.max_call = 4u << 20;
	rr_xprt_req_init(&t->req, &t->te.env, &t->p, &t->rst);
	rr_xprt_rsp_init(&t->rsp, &t->te.env, &t->p, &t->sst);
	if (keep)
		rr_xprt_rsp_keep_spares(&t->rsp, RR_XPRT_RSP_SPARES);
	lean_nregs = 0;
}

/* Sends @d's Call through the responder; returns its delivered context (the
 * caller releases it) and the requester's call in *@cp. */
static struct rr_xprt_rcall *lean_call(struct lean *t, const struct rr_xprt_rqst_desc *d,
				       struct rr_xprt_rqst **cp)
{
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc = NULL;
	enum rr_xprt_rsp_action a;
	uint8_t err[28];
	size_t elen;
	int n;

	REQUIRE_EQ(rr_xprt_rqst_prepare(&t->req, d, &c), 0);
	for (unsigned i = 0; i < c->nregs; i++)
		lean_register(&c->regs[i]);
	n = rr_xprt_rqst_marshal(&t->req, c, 8, t->send, sizeof(t->send));
	REQUIRE(n > 0);
	t->send_len = (uint32_t)n;
	a = rr_xprt_rsp_recv(&t->rsp, t->send, t->send_len, 8, err, &elen, &rc);
	if (a == RR_XPRT_A_READ) {
		for (uint32_t i = 0; i < rc->nreads; i++) {
			const struct rr_xprt_read_op *o = &rc->reads[i];

			REQUIRE(o->local_off + o->len <= rc->buf_len);
			REQUIRE(lean_read(rc->buf + o->local_off, o->stag, o->remote, o->len));
		}
		a = rr_xprt_rsp_assemble(&t->rsp, rc, 8, err, &elen);
	}
	REQUIRE_EQ(a, RR_XPRT_A_DELIVER);
	*cp = c;
	return rc;
}

static void lean_call_hdr(uint8_t *p, uint32_t xid, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, 0);
}

static uint8_t big_item[300000], small_item[5000], head[2000], tail[16], expect[310000];

/* A large Call fills the responder's buffer with 0xEE bytes; the next,
 * smaller Call reuses that buffer: its rebuilt stream is byte-exact and its
 * Read chunk's round-up pad is zeros. A Long Call reuses it too (its staging
 * area lies behind the stream). */
TEST(cache_rsp_buffer_reuse_no_stale_bytes)
{
	static struct lean t;
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc;
	uint8_t *first_buf;

	lean_init(&t, true);
	memset(big_item, 0xEE, sizeof(big_item));
	lean_call_hdr(head, 11, 100, 1);
	{
		struct rr_xprt_part cp[2] = {{head, 100, false}, {big_item, 200000, true}};
		struct rr_xprt_rqst_desc d = {.xid = 11, .parts = cp, .nparts = 2,
					      .max_reply = 64};

		rc = lean_call(&t, &d, &c);
		CHECK_EQ(rc->msg_len, 100 + 200000);
		first_buf = rc->buf;
		CHECK(rc->buf_cap >= rc->buf_len);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
		CHECK(t.rsp.spare_buf == first_buf);
	}
	/* Item of 4093 bytes: three pad bytes. */
	lean_call_hdr(head, 12, 100, 2);
	for (size_t i = 0; i < sizeof(small_item); i++)
		small_item[i] = (uint8_t)(i * 31 + 5);
	memcpy(tail, "0123456789ab", 12);
	{
		struct rr_xprt_part cp[3] = {{head, 100, false}, {small_item, 4093, true},
					     {tail, 12, false}};
		struct rr_xprt_rqst_desc d = {.xid = 12, .parts = cp, .nparts = 3,
					      .max_reply = 64};

		rc = lean_call(&t, &d, &c);
		CHECK(rc->buf == first_buf);      /* the kept buffer was reused */
		REQUIRE_EQ(rc->msg_len, 100 + 4096 + 12);
		memcpy(expect, head, 100);
		memcpy(expect + 100, small_item, 4093);
		memset(expect + 100 + 4093, 0, 3);
		memcpy(expect + 4196, tail, 12);
		CHECK_MEM(rc->msg, expect, rc->msg_len);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
	}
	/* A Long Call (RDMA_NOMSG) of 3001 bytes through the same buffer. */
	{
		struct rr_xprt_part cp[2] = {{head, 1601, false}, {head + 1601, 399, false}};
		struct rr_xprt_rqst_desc d = {.xid = 13, .parts = cp, .nparts = 2,
					      .max_reply = 64};

		lean_call_hdr(head, 13, 2000, 3);
		rc = lean_call(&t, &d, &c);
		CHECK(rc->buf == first_buf);
		REQUIRE_EQ(rc->msg_len, 2000);
		CHECK_MEM(rc->msg, head, 2000);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
	}
	rr_xprt_req_fini(&t.req);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK(t.rsp.spare_buf == NULL);
	CHECK_EQ(t.te.live, 0);
}

/* The kept buffer is bounded: a Call's buffer above RR_XPRT_RSP_BUF_KEEP is
 * freed, not kept; without spares (the default) nothing is kept at all. */
TEST(cache_rsp_buffer_bounded)
{
	static struct lean t;
	static uint8_t huge[(1u << 20) + 70000];
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc;
	struct rr_xprt_part cp[2] = {{head, 100, false}, {huge, sizeof(huge), true}};
	struct rr_xprt_rqst_desc d = {.xid = 21, .parts = cp, .nparts = 2, .max_reply = 64};

	for (int keep = 0; keep <= 1; keep++) {
		lean_init(&t, keep);
		t.p.max_seg_len = 1u << 20;
		rr_xprt_req_set_params(&t.req, &t.p);
		lean_call_hdr(head, 21, 100, 4);
		rc = lean_call(&t, &d, &c);
		CHECK(rc->buf_len > RR_XPRT_RSP_BUF_KEEP);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
		CHECK(t.rsp.spare_buf == NULL);
		{
			struct rr_xprt_part sp[1] = {{head, 100, false}};
			struct rr_xprt_rqst_desc sd = {.xid = 21, .parts = sp, .nparts = 1,
						       .max_reply = 64};

			rc = lean_call(&t, &sd, &c);
			rr_xprt_rcall_release(&t.rsp, rc);
			rr_xprt_rqst_release(&t.req, c);
			/* Kept only with spares on. */
			CHECK_EQ(t.rsp.spare_buf != NULL, keep);
			CHECK(t.rsp.spare_buf_cap <= RR_XPRT_RSP_BUF_KEEP);
		}
		rr_xprt_req_fini(&t.req);
		rr_xprt_rsp_fini(&t.rsp);
		CHECK_EQ(t.te.live, 0);
	}
}

/* Two small Calls of different sizes in flight at once, again and again
 * (a server whose next Call arrives before the previous Reply's Send
 * completed): once warm, their rebuilt-Call buffers come from the kept
 * ones, never from the allocator (with the single kept buffer alone, the
 * second of each pair allocated and freed its own). The small slots are
 * bounded and freed by fini. */
TEST(cache_rsp_small_buffers_overlap_no_alloc)
{
	static struct lean t;
	struct rr_test_env rte;   /* the responder's own: its allocations alone */
	unsigned long allocs = 0;

	lean_init(&t, true);
	rr_xprt_rsp_fini(&t.rsp);
	rr_test_env_init(&rte, 4);
	rr_xprt_rsp_init(&t.rsp, &rte.env, &t.p, &t.sst);
	rr_xprt_rsp_keep_spares(&t.rsp, RR_XPRT_RSP_SPARES);
	for (int round = 0; round < 12; round++) {
		struct rr_xprt_rqst *c1, *c2;
		struct rr_xprt_rcall *r1, *r2;
		static uint8_t h1[64], h2[96];

		if (round == 2)
			allocs = rte.allocs;   /* warm */
		lean_call_hdr(h1, 100 + (uint32_t)round, 40 + (size_t)(round % 3) * 4, 5);
		lean_call_hdr(h2, 200 + (uint32_t)round, 56 + (size_t)(round % 2) * 8, 6);
		{
			struct rr_xprt_part p1[1] = {{h1, 40 + (uint32_t)(round % 3) * 4, false}};
			struct rr_xprt_part p2[1] = {{h2, 56 + (uint32_t)(round % 2) * 8, false}};
			struct rr_xprt_rqst_desc d1 = {.xid = 100 + (uint32_t)round, .parts = p1,
						       .nparts = 1, .max_reply = 64};
			struct rr_xprt_rqst_desc d2 = {.xid = 200 + (uint32_t)round, .parts = p2,
						       .nparts = 1, .max_reply = 64};

			r1 = lean_call(&t, &d1, &c1);
			r2 = lean_call(&t, &d2, &c2);
			CHECK(r1->buf != r2->buf);
			CHECK_MEM(r1->msg, h1, p1[0].len);
			CHECK_MEM(r2->msg, h2, p2[0].len);
		}
		/* released in the other order every second round */
		if (round & 1) {
			rr_xprt_rcall_release(&t.rsp, r2);
			rr_xprt_rcall_release(&t.rsp, r1);
		} else {
			rr_xprt_rcall_release(&t.rsp, r1);
			rr_xprt_rcall_release(&t.rsp, r2);
		}
		rr_xprt_rqst_release(&t.req, c1);
		rr_xprt_rqst_release(&t.req, c2);
	}
	CHECK_EQ(rte.allocs - allocs, 0);
	CHECK(t.rsp.nsmall <= RR_XPRT_RSP_SMALL_BUFS);
	rr_xprt_req_fini(&t.req);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK_EQ(t.rsp.nsmall, 0);
	CHECK_EQ(t.te.live, 0);
	CHECK_EQ(rte.live, 0);
}

/* A reused Call context starts with its scalars zeroed: a chunked Call then
 * a Short one through the same spare context; the second has no reads, no
 * items and its own XID, and its header's lists are its own. */
TEST(cache_rsp_context_reuse_fresh_scalars)
{
	static struct lean t;
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc, *first;

	lean_init(&t, true);
	lean_call_hdr(head, 31, 100, 5);
	{
		struct rr_xprt_part cp[2] = {{head, 100, false}, {small_item, 3000, true}};
		struct rr_xprt_rqst_desc d = {.xid = 31, .parts = cp, .nparts = 2,
					      .max_reply = 64};

		rc = lean_call(&t, &d, &c);
		CHECK(rc->nreads > 0);
		CHECK_EQ(rc->nitems, 1);
		CHECK(rc->read_bytes == 3000);
		first = rc;
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
	}
	lean_call_hdr(head, 32, 200, 6);
	{
		struct rr_xprt_part cp[1] = {{head, 200, false}};
		struct rr_xprt_rqst_desc d = {.xid = 32, .parts = cp, .nparts = 1,
					      .max_reply = 64};

		rc = lean_call(&t, &d, &c);
		CHECK(rc == first);   /* the spare context was reused */
		CHECK_EQ(rc->xid, 32);
		CHECK_EQ(rc->nreads, 0);
		CHECK_EQ(rc->nitems, 0);
		CHECK_EQ(rc->read_bytes, 0);
		CHECK_EQ(rc->hdr.nread, 0);
		CHECK_EQ(rc->hdr.nwrite, 0);
		CHECK(rc->user == NULL);
		CHECK_EQ(rc->msg_len, 200);
		CHECK_MEM(rc->msg, head, 200);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
	}
	rr_xprt_req_fini(&t.req);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK_EQ(t.te.live, 0);
}

/* Building a Reply allocates nothing and leaves nothing held, with or
 * without spares (its header is on the stack: a responder that answered
 * once held a 2.6 KiB header per connection before, and one without
 * spares allocated and freed it per Reply); with every allocation failing
 * the Reply is still built, byte for byte the same. */
TEST(cache_rsp_reply_header_not_held)
{
	static struct lean t;
	static uint8_t out[2][1024];
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc;
	struct rr_xprt_reply_plan plan;
	int len[2];

	for (int keep = 0; keep < 2; keep++) {
		struct rr_xprt_part rp[1] = {{head, 40, false}};
		struct rr_xprt_part cp[1] = {{head, 60, false}};
		struct rr_xprt_rqst_desc d = {.xid = 41, .parts = cp, .nparts = 1,
					      .max_reply = 64};
		unsigned long allocs;
		long live;

		lean_init(&t, keep != 0);
		lean_call_hdr(head, 41, 60, 9);
		rc = lean_call(&t, &d, &c);
		allocs = t.te.allocs;
		live = t.te.live;
		t.te.fail_at = t.te.allocs + 1;   /* every allocation from now on fails */
		t.te.fail_all_after = true;
		REQUIRE_EQ(rr_xprt_rsp_reply(&t.rsp, rc, rp, 1, 5, out[keep], sizeof(out[keep]),
					     &plan), 0);
		t.te.fail_at = 0;
		t.te.fail_all_after = false;
		CHECK_EQ(t.te.allocs, allocs);
		CHECK_EQ(t.te.live, live);
		CHECK_EQ(plan.nwrites, 0);
		len[keep] = (int)plan.send_len;
		CHECK(len[keep] > 40);
		rr_xprt_rcall_release(&t.rsp, rc);
		rr_xprt_rqst_release(&t.req, c);
		rr_xprt_req_fini(&t.req);
		rr_xprt_rsp_fini(&t.rsp);
		CHECK_EQ(t.te.live, 0);
	}
	CHECK_EQ(len[0], len[1]);
	CHECK_MEM(out[0], out[1], (size_t)len[0]);
}

/* The requester's kept header: a Call with Write and Reply chunks, then a
 * Short Call; the Short Call's transport header is byte-identical to the one
 * a fresh requester marshals (nothing of the earlier chunks is sent), and
 * marshalling allocates nothing. */
TEST(cache_req_header_reuse_byte_exact)
{
	static struct lean t, fresh;
	static uint8_t sink[100000];
	struct rr_xprt_rqst *c, *c2;
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	uint8_t body[64];
	struct rr_xprt_part cp = {body, sizeof(body), false};
	struct rr_xprt_rqst_desc big = {.xid = 41, .parts = &cp, .nparts = 1,
					.sinks = &sk, .nsinks = 1, .max_reply = 200000};
	struct rr_xprt_rqst_desc small = {.xid = 42, .parts = &cp, .nparts = 1,
					  .max_reply = 64};
	unsigned long allocs;
	int n1, n2;

	lean_init(&t, false);
	lean_call_hdr(body, 41, sizeof(body), 7);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &big, &c), 0);
	for (unsigned i = 0; i < c->nregs; i++)
		lean_register(&c->regs[i]);
	allocs = t.te.allocs;
	n1 = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	REQUIRE(n1 > 0);
	CHECK_EQ(t.te.allocs, allocs);   /* no header allocation per Call */
	CHECK_EQ(t.req.hdr.nwrite, 1);
	CHECK(t.req.hdr.has_reply);
	rr_xprt_rqst_release(&t.req, c);

	lean_call_hdr(body, 42, sizeof(body), 7);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &small, &c), 0);
	n1 = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	lean_init(&fresh, false);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&fresh.req, &small, &c2), 0);
	n2 = rr_xprt_rqst_marshal(&fresh.req, c2, 8, fresh.send, sizeof(fresh.send));
	REQUIRE(n1 > 0);
	REQUIRE_EQ(n1, n2);
	CHECK_MEM(t.send, fresh.send, (size_t)n1);
	rr_xprt_rqst_release(&t.req, c);
	rr_xprt_rqst_release(&fresh.req, c2);
	rr_xprt_req_fini(&t.req);
	rr_xprt_req_fini(&fresh.req);
	rr_xprt_rsp_fini(&t.rsp);
	rr_xprt_rsp_fini(&fresh.rsp);
	CHECK_EQ(t.te.live, 0);
	CHECK_EQ(fresh.te.live, 0);
}

/* ---- STag key randomness ---- */

struct lean_rng {
	unsigned calls;
	size_t bytes;
	uint8_t next;
};

static void lean_random(void *ctx, void *buf, size_t len)
{
	struct lean_rng *r = ctx;
	uint8_t *p = buf;

	r->calls++;
	r->bytes += len;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(r->next++ * 97u + 13u);   /* a permutation of 0..255 */
}

/* Keys come from rr_random (each fresh slot's key is the next drawn byte),
 * drawn RR_MRT_RND_POOL bytes at a time: 200 registrations make one draw,
 * not 200; after fini the pool is wiped. */
TEST(cache_mrt_key_randomness_pooled)
{
	struct rr_test_env te;
	struct rpcrdma_env env;
	struct lean_rng rng = {0};
	static struct rr_mrt t;
	static uint32_t stags[200];
	uint8_t buf[64];
	struct rr_mrt_region r = {.addr = buf, .length = sizeof(buf),
				  .access = RPCRDMA_ACCESS_LOCAL_WRITE, .durable_fd = -1};

	rr_test_env_init(&te, 5);
	env = te.env;
	env.random = lean_random;
	env.random_ctx = &rng;
	REQUIRE_EQ(rr_mrt_init(&t, &env, 10), 0);
	for (unsigned i = 0; i < 200; i++) {
		REQUIRE_EQ(rr_mrt_reg(&t, &r, &te, buf, &stags[i]), 0);
		/* Fresh slots, empty key maps: the first drawn byte is the key. */
		CHECK_EQ(stags[i] & 0xff, (uint8_t)(i * 97u + 13u));
	}
	CHECK_EQ(rng.calls, 1);
	CHECK_EQ(rng.bytes, RR_MRT_RND_POOL);
	for (unsigned i = 0; i < 200; i++)
		CHECK_EQ(rr_mrt_dereg(&t, stags[i]), 0);
	/* Re-registration of freed slots keeps drawing from the pool. */
	for (unsigned i = 0; i < 100; i++) {
		REQUIRE_EQ(rr_mrt_reg(&t, &r, &te, buf, &stags[i]), 0);
		for (unsigned j = 0; j < i; j++)
			CHECK(stags[j] != stags[i]);
	}
	CHECK(rng.calls >= 2 && rng.calls <= 3);
	rr_mrt_fini(&t);
	for (size_t i = 0; i < sizeof(t.rnd); i++)
		CHECK_EQ(t.rnd[i], 0);
	CHECK_EQ(te.live, 0);
}

/* The requester's kept call: a Long Call (pull-up buffer, Reply chunk) is
 * released, and the next prepared call is the same memory with nothing of
 * the first left: no pull-up, no Reply chunk, its own form, registrations
 * and XID; a second released call (one is already kept) is freed. */
TEST(cache_req_call_reuse_fresh)
{
	static struct lean t;
	struct rr_xprt_rqst *c, *c2, *c3;
	struct rr_xprt_part lp = {head, 2000, false}, sp = {head, 64, false};
	struct rr_xprt_rqst_desc ld = {.xid = 51, .parts = &lp, .nparts = 1,
				       .max_reply = 200000};
	struct rr_xprt_rqst_desc sd = {.xid = 52, .parts = &sp, .nparts = 1, .max_reply = 64};
	long live;

	lean_init(&t, false);
	lean_call_hdr(head, 51, 2000, 8);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &ld, &c), 0);
	CHECK_EQ(c->form, RR_XPRT_FORM_LONG);
	CHECK(c->pullup != NULL && c->reply_buf != NULL && c->reply_reg >= 0);
	CHECK_EQ(c->nregs, 2);
	rr_xprt_rqst_release(&t.req, c);
	CHECK(t.req.spare == c);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &sd, &c2), 0);
	CHECK(c2 == c);
	CHECK(t.req.spare == NULL);
	CHECK_EQ(c2->xid, 52);
	CHECK_EQ(c2->form, RR_XPRT_FORM_SHORT);
	CHECK(c2->pullup == NULL && c2->reply_buf == NULL);
	CHECK_EQ(c2->pullup_reg, -1);
	CHECK_EQ(c2->reply_reg, -1);
	CHECK_EQ(c2->nregs, 0);
	CHECK(!c2->outstanding && c2->next == NULL && c2->user == NULL);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &sd, &c3), 0);
	CHECK(c3 != c2);
	rr_xprt_rqst_release(&t.req, c2);
	live = t.te.live;
	rr_xprt_rqst_release(&t.req, c3);   /* one kept already: freed */
	CHECK_EQ(t.te.live, live - 1);
	rr_xprt_req_fini(&t.req);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK(t.req.spare == NULL);
	CHECK_EQ(t.te.live, 0);
}

/* The client's deadline clock (default environment: the coarse monotonic
 * clock plus its resolution) is never early: a Call to a peer that accepts
 * and never answers times out no sooner than its timeout by
 * CLOCK_MONOTONIC, and not much later; then destroying the call (one
 * critical section with the cancel) and the client returns. */
TEST(cache_rpc_deadline_never_early)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	struct timespec t0, t1;
	char url[64];
	uint64_t ms;

	REQUIRE(ls >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE_EQ(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	REQUIRE_EQ(listen(ls, 4), 0);
	REQUIRE_EQ(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
	REQUIRE_EQ(rpcrdma_client_create(url, 0x2f5a0099, 1, NULL, &c), 0);
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
		rpcrdma_call_set_timeout(call, 60);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK_EQ(rpcrdma_call_run(call), -ETIMEDOUT);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = ((uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
		      (uint64_t)t0.tv_nsec) / 1000000u;
		CHECK(ms >= 60);                                 /* never early */
		CHECK(ms * 1000000u < RR_TEST_PROMPT_NS);        /* the timer fired */
		rpcrdma_call_destroy(call);
	}
	/* A pending asynchronous call destroyed: cancelled, freed (ASan). */
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	close(ls);
}
