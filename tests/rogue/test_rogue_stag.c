/* SPDX-License-Identifier: BSD-2-Clause */
/* Rogue STags (RFC 5040 sections 5.1 and 7.2, RFC 5041 section 8,
 * docs/security.md "No oracle"): Send With Invalidate of every class of
 * STag a peer can name, and tagged accesses at every boundary of the
 * regions a server exposes (a push-mode region: RDMA Write and Commit; a
 * reliable-reply Read chunk: RDMA Read Request).
 *
 * Answers: an STag that is not valid for this peer -- never issued, 0,
 * another connection's Read chunk or push region, already invalidated --
 * draws one and the same Terminate, "RDMAP, Remote Protection Error,
 * Invalid STag", so that a sweep learns nothing (the decided rule for issue
 * 12); on the peer's own valid STag, bounds, wrap and access-rights
 * violations keep their distinct codes (DDP tagged bounds 0x01 / TO wrap
 * 0x03 for Writes; RDMAP protection bounds 0x01 / wrap 0x04 / access 0x02
 * for Read Requests and Writes without the right) and Send With Invalidate
 * of a region that cannot be invalidated is "RDMAP, Remote Operation Error,
 * STag cannot be invalidated". First byte, last byte, whole region and
 * zero-length accesses are served. A Terminate ends only the rogue's
 * connection: the other connection attacked (its Read chunk, its region)
 * keeps working, and a new client is served. */
#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

#define INVALID_STAG RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_INVALID_STAG

/* A second connection whose Read chunk must survive the attack. */
struct victim {
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	uint32_t stag;
	uint8_t *sink;
};

static void victim_open(struct victim *v, struct rr_fx_srv *f)
{
	v->g = rt_open(f->port, NULL);
	rt_read_rrep(v->g, 0x7a000001, "v.bin", 0, 70000, &v->rep);
	v->stag = v->rep.hdr.segs[v->rep.rchunk->first].handle;
	v->sink = calloc(1, v->rep.rchunk->length);
	REQUIRE(v->sink != NULL);
}

/* The victim pulls its whole Reply, byte-exact, and releases it. */
static void victim_check(struct victim *v)
{
	uint32_t total = (uint32_t)v->rep.rchunk->length;

	REQUIRE_EQ(rr_rogue_pull_start(v->g, &v->rep, 0x5252, v->sink, total), total);
	CHECK_EQ(rr_rogue_reads_wait(v->g, RT_MS), 0);
	CHECK_EQ(rt_read_reply_diff(v->sink, total, 0, 0x7a000001, true, 33, 0, 70000), -1);
	CHECK_EQ(rr_rogue_send_done(v->g, 0x7a000001, true, v->stag), 0);
	rt_expect_null_ok(v->g, 0x7a000002);
	rr_rogue_free(v->g);
	free(v->sink);
}

/* A rogue connection sends an RDMA_DONE (for an XID it never got a Read
 * chunk for) as Send With Invalidate of @stag and must get the Terminate
 * @layer/@etype/@ecode. */
static void inv_expect(struct rr_fx_srv *f, uint32_t stag, uint8_t layer, uint8_t etype,
		       uint8_t ecode)
{
	struct rr_rogue *g = rt_open(f->port, NULL);

	REQUIRE_EQ(rr_rogue_send_done(g, 0x7b000001, true, stag), 0);
	rt_expect_term(g, RT_MS, layer, etype, ecode);
	rr_rogue_free(g);
}

static bool start(struct rr_fx_srv *f)
{
	if (!rr_th_soft_ok())
		return false;
	REQUIRE_EQ(rr_fx_srv_start(f, NULL), 0);
	REQUIRE_EQ(rr_fx_file(&f->d, "v.bin", 70000, 33), 0);
	return true;
}

/* Another connection's Read chunk STag. */
TEST(rogue_sendinv_other_conn_read_chunk)
{
	struct rr_fx_srv f;
	struct victim v;

	if (!start(&f))
		return;
	victim_open(&v, &f);
	inv_expect(&f, v.stag, INVALID_STAG);
	victim_check(&v);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Another connection's push region STag; the region keeps taking Writes
 * and Commits. */
TEST(rogue_sendinv_other_conn_push_region)
{
	struct rr_fx_srv f;
	struct rr_rogue *v;
	struct rt_push p;
	uint8_t data[4096], back[4096];

	if (!start(&f))
		return;
	v = rt_open(f.port, NULL);
	rt_push_open(v, 0x7c000001, "push.bin", sizeof(data), &p);
	inv_expect(&f, p.stag, INVALID_STAG);
	rr_fx_pattern(data, sizeof(data), 44, 0);
	REQUIRE_EQ(rr_rogue_write(v, p.stag, p.to, data, sizeof(data)), 0);
	CHECK_EQ(rt_commit(v, 1, p.stag, p.to, sizeof(data)), 0);
	CHECK_EQ(rr_fx_file_read(&f.d, "push.bin", p.file_off, back, sizeof(back)), sizeof(back));
	CHECK_MEM(back, data, sizeof(data));
	rr_rogue_free(v);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Its own push region: valid, but a registration that cannot be
 * invalidated (RFC 5040 7.2 "STag cannot be invalidated"). */
TEST(rogue_sendinv_own_push_region)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rt_push p;

	if (!start(&f))
		return;
	g = rt_open(f.port, NULL);
	rt_push_open(g, 0x7c000002, "push.bin", 4096, &p);
	REQUIRE_EQ(rr_rogue_send_done(g, 0x7b000002, true, p.stag), 0);
	rt_expect_term(g, RT_MS, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION,
		       RR_RDMAP_EC_CANNOT_INVALIDATE);
	rr_rogue_free(g);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Its own Read chunk's STag in another XID's RDMA_DONE: the peer may
 * invalidate what was exposed to it (nothing else is harmed); the
 * connection goes on and that STag is dead. */
TEST(rogue_sendinv_own_chunk_other_xid)
{
	struct rt_rrep x;
	struct rr_rogue_reply rep2;
	uint32_t stag2;
	struct rr_rreq rq;

	if (!rr_th_soft_ok())
		return;
	rt_rrep_setup(&x, 50000, false);
	rt_read_rrep(x.g, RT_XID + 1, "r.bin", 0, 50000, &rep2);
	stag2 = rep2.hdr.segs[rep2.rchunk->first].handle;
	REQUIRE_EQ(rr_rogue_send_done(x.g, RT_XID, true, stag2), 0);
	rt_expect_null_ok(x.g, 0x7b000003);
	REQUIRE_EQ(rr_rogue_mem_add(x.g, 0x5151, 0, x.sink, x.total), 0);
	rq = (struct rr_rreq){.sink_stag = 0x5151, .size = 1, .src_stag = stag2,
			      .src_to = rep2.hdr.segs[rep2.rchunk->first].offset};
	REQUIRE_EQ(rr_rogue_read_req(x.g, &rq, 0), 0);
	rt_expect_term(x.g, RT_MS, INVALID_STAG);
	rt_probe_ok(x.f.port);
	rt_rrep_teardown(&x);
}

/* An STag never issued, and STag 0. */
TEST(rogue_sendinv_unknown_and_zero)
{
	struct rr_fx_srv f;
	struct victim v;

	if (!start(&f))
		return;
	victim_open(&v, &f);
	inv_expect(&f, rt_unknown_stag(v.stag), INVALID_STAG);
	inv_expect(&f, 0, INVALID_STAG);
	victim_check(&v);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* ---- tagged accesses at the boundaries of the regions exposed ---- */

/* One access: @len bytes at region offset @delta (added to the region's
 * first Tagged Offset; with @abs the Tagged Offset @abs_to instead), served
 * (@ok) or answered with the Terminate @layer/@etype/@ecode. */
struct bcase {
	int64_t delta;
	bool abs;
	uint64_t abs_to;
	uint32_t len;
	bool ok;
	uint8_t layer, etype, ecode;
};

#define OK_AT(d, n) {(d), false, 0, (n), true, 0, 0, 0}
#define TERM_AT(d, n, ...) {(d), false, 0, (n), false, __VA_ARGS__}   /* layer, type, code */
#define TERM_TO(to, n, ...) {0, true, (to), (n), false, __VA_ARGS__}

static uint64_t bcase_to(const struct bcase *c, uint64_t first)
{
	return c->abs ? c->abs_to : first + (uint64_t)c->delta;
}

/* Runs every case of @cs on a fresh connection each, @one doing the access. */
static void run_cases(const struct bcase *cs, size_t n,
		      void (*one)(struct rr_fx_srv *, struct rr_rogue *, const struct bcase *))
{
	struct rr_fx_srv f;

	if (!start(&f))
		return;
	for (size_t i = 0; i < n; i++) {
		struct rr_rogue *g = rt_open(f.port, NULL);

		one(&f, g, &cs[i]);
		if (!cs[i].ok)
			rt_expect_term(g, RT_MS, cs[i].layer, cs[i].etype, cs[i].ecode);
		rr_rogue_free(g);
	}
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

enum { REGION = 8192 };

/* RDMA Write into a push region of 8 KiB; a Write that is served is
 * committed durable and its bytes are in the file. */
static void write_one(struct rr_fx_srv *f, struct rr_rogue *g, const struct bcase *c)
{
	struct rt_push p;
	uint8_t data[16], back[16];
	uint64_t to;

	rt_push_open(g, 0x7d000001, "b.bin", REGION, &p);
	to = bcase_to(c, p.to);
	rr_fx_pattern(data, sizeof(data), (uint32_t)c->delta, 0);
	REQUIRE(c->len <= sizeof(data));
	REQUIRE_EQ(rr_rogue_write(g, p.stag, to, data, c->len), 0);
	if (!c->ok)
		return;
	if (c->len) {
		CHECK_EQ(rt_commit(g, 5, p.stag, to, c->len), 0);
		CHECK_EQ(rr_fx_file_read(&f->d, "b.bin", p.file_off + (uint64_t)c->delta, back,
					 c->len), c->len);
		CHECK_MEM(back, data, c->len);
	}
	rt_expect_null_ok(g, 0x7d000002);
}

#define DDP_TAGGED(c) RR_TL_DDP, RR_DDP_ET_TAGGED, (c)

TEST(rogue_tagged_write_boundaries)
{
	static const struct bcase cs[] = {
		OK_AT(0, 1),                      /* first byte */
		OK_AT(REGION - 1, 1),             /* last byte */
		OK_AT(REGION - 16, 16),           /* up to the end */
		OK_AT(REGION, 0),                 /* zero length, one past the end */
		TERM_AT(REGION, 1, DDP_TAGGED(RR_DDP_EC_T_BOUNDS)),       /* one past */
		TERM_AT(REGION - 1, 2, DDP_TAGGED(RR_DDP_EC_T_BOUNDS)),   /* across the end */
		TERM_AT(-1, 1, DDP_TAGGED(RR_DDP_EC_T_BOUNDS)),           /* one before */
		TERM_TO(UINT64_MAX - 3, 8, DDP_TAGGED(RR_DDP_EC_T_TO_WRAP)),
	};

	run_cases(cs, RR_ARRAY_SIZE(cs), write_one);
}

/* RDMA Read Request of the connection's own Read chunk (a READ of 70000
 * bytes); a Read that is served brings exactly those bytes of the Reply. */
static void read_one(struct rr_fx_srv *f, struct rr_rogue *g, const struct bcase *c)
{
	struct rr_rogue_reply rep;
	struct rr_rreq rq;
	uint8_t sink[64];
	uint32_t stag;

	(void)f;
	rt_read_rrep(g, 0x7e000001, "v.bin", 0, 70000, &rep);
	REQUIRE_EQ(rep.rchunk->nsegs, 1);
	stag = rep.hdr.segs[rep.rchunk->first].handle;
	REQUIRE_EQ(rr_rogue_mem_add(g, 0x5353, 0, sink, sizeof(sink)), 0);
	REQUIRE(c->len <= sizeof(sink));
	rq = (struct rr_rreq){.sink_stag = 0x5353, .size = c->len, .src_stag = stag,
			      .src_to = bcase_to(c, rep.hdr.segs[rep.rchunk->first].offset)};
	REQUIRE_EQ(rr_rogue_read_req(g, &rq, 0), 0);
	if (!c->ok)
		return;
	CHECK_EQ(rr_rogue_reads_wait(g, RT_MS), 0);
	CHECK_EQ(rt_read_reply_diff(sink, c->len, (uint32_t)c->delta, 0x7e000001, true, 33, 0,
				    70000), -1);
	CHECK_EQ(rr_rogue_send_done(g, 0x7e000001, true, stag), 0);
	rt_expect_null_ok(g, 0x7e000002);
}

#define RDMAP_PROT(c) RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, (c)
#define T_LEN ((int64_t)(24 + 12 + 70000))   /* rt_read_reply_len(70000) */

TEST(rogue_tagged_read_boundaries)
{
	static const struct bcase cs[] = {
		OK_AT(0, 1),                      /* first byte */
		OK_AT(T_LEN - 1, 1),              /* last byte */
		OK_AT(T_LEN - 64, 64),            /* up to the end */
		OK_AT(T_LEN + 100, 0),            /* zero length, beyond the end */
		TERM_AT(T_LEN, 1, RDMAP_PROT(RR_RDMAP_EC_BOUNDS)),        /* one past */
		TERM_AT(T_LEN - 1, 2, RDMAP_PROT(RR_RDMAP_EC_BOUNDS)),    /* across the end */
		TERM_AT(-1, 1, RDMAP_PROT(RR_RDMAP_EC_BOUNDS)),           /* one before */
		TERM_TO(UINT64_MAX - 3, 8, RDMAP_PROT(RR_RDMAP_EC_TO_WRAP)),
	};

	REQUIRE_EQ(T_LEN, rt_read_reply_len(70000));
	run_cases(cs, RR_ARRAY_SIZE(cs), read_one);
}

/* Access rights of the peer's own STags: a Read chunk is read-only (an RDMA
 * Write into it), a push region is write-only (an RDMA Read Request of
 * it): "RDMAP, Remote Protection Error, Access rights violation". */
TEST(rogue_tagged_access_rights)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	struct rt_push p;
	uint8_t sink[16] = {0};

	if (!start(&f))
		return;
	g = rt_open(f.port, NULL);
	rt_read_rrep(g, 0x7f000001, "v.bin", 0, 70000, &rep);
	REQUIRE_EQ(rr_rogue_write(g, rep.hdr.segs[rep.rchunk->first].handle,
				  rep.hdr.segs[rep.rchunk->first].offset, sink, 8), 0);
	rt_expect_term(g, RT_MS, RDMAP_PROT(RR_RDMAP_EC_ACCESS));
	rr_rogue_free(g);

	g = rt_open(f.port, NULL);
	rt_push_open(g, 0x7f000002, "a.bin", 4096, &p);
	REQUIRE_EQ(rr_rogue_mem_add(g, 0x5454, 0, sink, sizeof(sink)), 0);
	{
		struct rr_rreq rq = {.sink_stag = 0x5454, .size = 8, .src_stag = p.stag,
				     .src_to = p.to};

		REQUIRE_EQ(rr_rogue_read_req(g, &rq, 0), 0);
	}
	rt_expect_term(g, RT_MS, RDMAP_PROT(RR_RDMAP_EC_ACCESS));
	rr_rogue_free(g);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* ---- finding 6 of issue 12: no STag oracle, no addresses ---- */

enum probe_op { P_READ, P_WRITE, P_INV };

/* One access of kind @op to (@stag, @to) on a fresh connection; the
 * Terminate it drew goes to @t. */
static void probe_stag(struct rr_fx_srv *f, enum probe_op op, uint32_t stag, uint64_t to,
		       struct rr_term *t)
{
	struct rr_rogue *g = rt_open(f->port, NULL);
	uint8_t buf[8] = {0};
	int r;

	memset(t, 0, sizeof(*t));
	t->layer = 0xf;   /* "none" */
	if (op == P_READ) {
		struct rr_rreq rq = {.sink_stag = 0x5555, .size = 8, .src_stag = stag, .src_to = to};

		REQUIRE_EQ(rr_rogue_mem_add(g, 0x5555, 0, buf, sizeof(buf)), 0);
		REQUIRE_EQ(rr_rogue_read_req(g, &rq, 0), 0);
	} else if (op == P_WRITE) {
		REQUIRE_EQ(rr_rogue_write(g, stag, to, buf, sizeof(buf)), 0);
	} else {
		REQUIRE_EQ(rr_rogue_send_done(g, 0x7b00000f, true, stag), 0);
	}
	r = rr_rogue_wait_end(g, RT_MS);
	if (r == 1)
		*t = g->term;
	rr_rogue_free(g);
}

/* A sweep of STags from other connections gets exactly the answer a sweep
 * of STags that never existed gets: "RDMAP, Remote Protection Error,
 * Invalid STag" for RDMA Read Requests and Send With Invalidate; for RDMA
 * Writes one and the same Invalid STag Terminate (RDMAP's, or DDP's tagged
 * buffer code, which is where a tagged segment is checked). On 630ae3a an
 * existing foreign STag drew "STag not associated with RDMAP stream"
 * (RDMAP/1/0x03, DDP/1/0x02 for Writes) and a foreign push region "cannot
 * be invalidated" (RDMAP/2/0x09): a sweep told which STags exist. */
TEST(rogue_finding6_no_stag_oracle)
{
	struct rr_fx_srv f;
	struct victim v;
	struct rr_rogue *pv;
	struct rt_push p;
	uint64_t sto;
	struct {
		const char *what;
		enum probe_op op;
		uint32_t stag;
		uint64_t to;
		struct rr_term t;
	} c[] = {
		{"Read Request, other connection's Read chunk", P_READ, 0, 0, {0}},
		{"Read Request, other connection's push region", P_READ, 0, 0, {0}},
		{"Read Request, never issued", P_READ, 0, 0, {0}},
		{"RDMA Write, other connection's push region", P_WRITE, 0, 0, {0}},
		{"RDMA Write, other connection's Read chunk", P_WRITE, 0, 0, {0}},
		{"RDMA Write, never issued", P_WRITE, 0, 0, {0}},
		{"Send With Invalidate, other connection's Read chunk", P_INV, 0, 0, {0}},
		{"Send With Invalidate, other connection's push region", P_INV, 0, 0, {0}},
		{"Send With Invalidate, never issued", P_INV, 0, 0, {0}},
	};
	char a[32];

	if (!start(&f))
		return;
	victim_open(&v, &f);
	pv = rt_open(f.port, NULL);
	rt_push_open(pv, 0x7c000009, "push.bin", 4096, &p);
	sto = v.rep.hdr.segs[v.rep.rchunk->first].offset;
	c[0].stag = v.stag, c[0].to = sto;
	c[1].stag = p.stag, c[1].to = p.to;
	c[2].stag = rt_unknown_stag(v.stag), c[2].to = sto;
	c[3].stag = p.stag, c[3].to = p.to;
	c[4].stag = v.stag, c[4].to = sto;
	c[5].stag = rt_unknown_stag(p.stag), c[5].to = p.to;
	c[6].stag = v.stag;
	c[7].stag = p.stag;
	c[8].stag = rt_unknown_stag(v.stag ^ 0x10);
	for (size_t i = 0; i < RR_ARRAY_SIZE(c); i++) {
		probe_stag(&f, c[i].op, c[i].stag, c[i].to, &c[i].t);
		printf("  %-55s %s\n", c[i].what,
		       c[i].t.layer == 0xf ? "no Terminate" : rr_rogue_term_str(&c[i].t, a, sizeof(a)));
		if (c[i].op == P_WRITE) {
			/* a tagged Write's invalid STag may be reported by DDP
			 * (RFC 5041 8, tagged buffer, Invalid STag) or RDMAP,
			 * but the same for all three */
			CHECK(rr_rogue_term_is(&c[i].t, INVALID_STAG) ||
			      rr_rogue_term_is(&c[i].t, RR_TL_DDP, RR_DDP_ET_TAGGED,
					       RR_DDP_EC_T_INVALID_STAG));
			if (i == 5) {
				CHECK(rr_rogue_term_is(&c[3].t, c[5].t.layer, c[5].t.etype, c[5].t.ecode));
				CHECK(rr_rogue_term_is(&c[4].t, c[5].t.layer, c[5].t.etype, c[5].t.ecode));
			}
		} else {
			CHECK(rr_rogue_term_is(&c[i].t, INVALID_STAG));
		}
	}
	/* the attacked connections never noticed */
	victim_check(&v);
	{
		uint8_t data[4096];

		rr_fx_pattern(data, sizeof(data), 45, 0);
		REQUIRE_EQ(rr_rogue_write(pv, p.stag, p.to, data, sizeof(data)), 0);
		CHECK_EQ(rt_commit(pv, 2, p.stag, p.to, sizeof(data)), 0);
	}
	rr_rogue_free(pv);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* True when @addr lies in a mapping of this process (/proc/self/maps). */
static bool is_mapped(uint64_t addr)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	bool hit = false;

	if (!m)
		return false;
	while (!hit && fgets(line, sizeof(line), m)) {
		unsigned long long lo, hi;

		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi)
			hit = true;
	}
	fclose(m);
	return hit;
}

/* The Tagged Offsets a server exposes (Read chunk segments, push regions)
 * are not its virtual addresses: none of them lies in a mapping of the
 * server's process (this one). On 630ae3a every one of them did. */
TEST(rogue_finding6_tagged_offsets_not_addresses)
{
	struct rr_fx_srv f;
	struct rr_rogue *g;
	unsigned mapped = 0, n = 0;

	if (!start(&f))
		return;
	g = rt_open(f.port, NULL);
	for (uint32_t k = 0; k < 3; k++) {
		struct rr_rogue_reply rep;
		struct rt_push p;

		rt_read_rrep(g, 0x7e100000 + k, "v.bin", 0, 70000, &rep);
		for (uint32_t i = 0; i < rep.rchunk->nsegs; i++, n++)
			mapped += is_mapped(rep.hdr.segs[rep.rchunk->first + i].offset);
		rt_push_open(g, 0x7e200000 + k, "push.bin", 8192, &p);
		mapped += is_mapped(p.to);
		n++;
	}
	printf("  %u of %u exposed Tagged Offsets are addresses of the server\n", mapped, n);
	CHECK_EQ(mapped, 0);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}
