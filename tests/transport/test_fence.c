/* SPDX-License-Identifier: BSD-2-Clause */
/* Every STag a requester exposed is fenced before its RPC completes (RFC
 * 8166's memory protection: the requester invalidates or deregisters every
 * STag of an RPC before the RPC completes for the upper layer, also when it
 * is aborted; src/transport/rdma/tp.h), checked from outside:
 * a rogue responder (tests/xprt_harness.h rr_th_rresp) that first uses each
 * STag the Call carries as a responder may (so each was valid), completes
 * the RPC one way or another, and once the requester reported the
 * completion tries each STag again, one per connection (a refused access
 * ends the connection; a Call makes the requester connect again): every try must be refused
 * by the requester's provider (a Terminate; the rogue's RDMA Read fails with
 * a remote access error) and no byte of it may land.
 *
 * Matrix: the paths (a Write chunk, a Read chunk, a Reply chunk, a Long Call
 * by a Position-zero Read chunk) x the completions (a Reply; a Reply by
 * Send With Invalidate; a timeout and a cancel, i.e. rr_tp_client_abort; a
 * connection lost with the Call outstanding, then its retransmission
 * answered; RDMA_ERROR; a Reply pulled from a responder-provided Read chunk,
 * draft-cel-nfsv4-rpcrdma-reliable-reply) x memory windows and plain MRs.
 * With windows the soft provider's counts (rdma/soft/soft.h soft_counters)
 * also show how each window ended: exactly one bind per STag on the wire,
 * and each window of a connection still up invalidated by a Local
 * Invalidate the requester's QP executed or by the rogue's Send With
 * Invalidate (a Local Invalidate leaves no trace on the wire).
 *
 * The responder's own exposures are fenced too, seen by the rogue
 * requester rr_th_rogue: Read chunks of reliable reply in
 * tests/transport/test_reliable_reply_e2e.c (rrep_e2e_fenced_on_the_wire),
 * push-mode regions in tests/transport/test_push_and_stats.c
 * (push_revoke_then_write). */
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

enum path { P_WRITE, P_READ, P_REPLY, P_LONG, P_COUNT };
enum how { H_REPLY, H_REPLY_INV, H_TIMEOUT, H_CANCEL, H_RECONNECT, H_ERROR, H_PULL };

static const char *const path_name[P_COUNT] = {"Write chunk", "Read chunk", "Reply chunk",
					       "Long Call"};

/* The rogue's private data: RFC 8797 block (R, 4096/4096) and the
 * extension block offering reliable reply (docs/protocol.md). */
static const uint8_t rogue_pd[20] = {0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3,
				     0xac, 0x3a, 0x36, 0x3d, 1, 12, 0, 0, 0, 0, 0, 1};

/* One RPC of the requester and the memory it names. */
struct frpc {
	struct rr_conn_rpc r;
	uint8_t hdr[8 + 6000];
	uint8_t item[6000];
	uint8_t sink[3000];
	uint8_t sink_after[3000];
	struct rr_xprt_part parts[3];
	struct rr_xprt_sink sinks[1];
};

/* What the rogue saw of one transmission of a Call. */
struct seen {
	unsigned nstags;
	uint32_t stag[RR_XPRT_MAX_REGS];
	uint64_t to[RR_XPRT_MAX_REGS];
	uint32_t len[RR_XPRT_MAX_REGS];
	bool write[RR_XPRT_MAX_REGS];   /* the peer may write it (else read) */
};

struct fx {
	struct rr_th_rresp g;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	bool windows;
	uint32_t xid;
};

static struct rr_hdr h, rh;

/* Every wait of this file is FENCE_WAIT_MS and names itself (issue 16 part
 * CC): one ran out once under load (part CA, docs/testing.md "Flakes found
 * under load") and the output did not say which. A wait that ran out, or
 * took longer than a second, prints the RPC's path and completion, the wait
 * and how many waits of that RPC came before it, so that the next failure
 * names it. Not raised to RR_TEST_WAIT_MS: a late event rescued by some
 * periodic look after 5 s would then pass unseen. */
#define FENCE_WAIT_MS 5000u

static const char *const how_name[] = {"Reply", "Reply by Send With Invalidate", "timeout",
				       "cancel", "reconnect", "RDMA_ERROR", "pulled Reply"};
static enum path g_path;
static enum how g_how;
static unsigned g_nwait;

static uint64_t wait_begin(void)
{
	return rr_now_ns(NULL);
}

static void waited(const char *what, uint64_t t0, long long rv)
{
	uint64_t ms = (rr_now_ns(NULL) - t0) / 1000000u;

	g_nwait++;
	if (ms >= 1000)
		fprintf(stderr, "  fence %s, %s: wait %u (%s) %s after %llu ms (returned %lld)\n",
			path_name[g_path], how_name[g_how], g_nwait, what,
			ms >= FENCE_WAIT_MS ? "RAN OUT" : "ended late", (unsigned long long)ms, rv);
}

static int w_recv(struct fx *f, uint8_t *m, const char *what)
{
	uint64_t t0 = wait_begin();
	int n = rr_th_rresp_recv(&f->g, m, FENCE_WAIT_MS);

	waited(what, t0, n);
	return n;
}

static int w_send(struct fx *f, const uint8_t *m, size_t len, uint32_t inv, const char *what)
{
	uint64_t t0 = wait_begin();
	int rc = rr_th_rresp_send(&f->g, m, len, inv, FENCE_WAIT_MS);

	waited(what, t0, rc);
	return rc;
}

static int w_rdma(struct fx *f, bool write, uint32_t stag, uint64_t to, uint32_t len,
		  uint32_t *vend, const char *what)
{
	uint64_t t0 = wait_begin();
	int st = rr_th_rresp_rdma(&f->g, write, stag, to, len, 0, vend, FENCE_WAIT_MS);

	waited(what, t0, st);
	return st;
}

static int w_accept(struct fx *f, const char *what)
{
	uint64_t t0 = wait_begin();
	int rc = rr_th_rresp_accept(&f->g, rogue_pd, sizeof(rogue_pd), FENCE_WAIT_MS);

	waited(what, t0, rc);
	return rc;
}

static bool w_done(struct fx *f, unsigned n, const char *what)
{
	uint64_t t0 = wait_begin();
	bool ok = rr_th_cl_wait(&f->c, n, FENCE_WAIT_MS);

	waited(what, t0, ok);
	return ok;
}

/* The rogue listens; the requester (windows or plain MRs) connects to it. */
static void fx_up(struct fx *f, bool windows)
{
	memset(f, 0, sizeof(*f));
	f->windows = windows;
	f->xid = 0x5e000;
	REQUIRE_EQ(rr_th_rresp_open(&f->g), 0);
	rr_tp_conf_default(&f->cc);
	f->cc.use_windows = windows;
	f->cc.inline_ddp = false;          /* a Write chunk for the small sink */
	f->cc.reconnect_delay_ms = 1;
	f->cc.credits = 16;
	REQUIRE_EQ(rr_th_rresp_connect(&f->g, &f->c, &f->cc, rr_th_cl_count, rogue_pd, sizeof(rogue_pd)),
		   0);
	CHECK_EQ(rr_tp_client_reliable_reply(f->c.tp), 1);
}

static void fx_down(struct fx *f)
{
	rr_th_cl_stop(&f->c);
	rr_th_rresp_close(&f->g);
}

/* A Call exposing @p. */
static void mk(struct fx *f, struct frpc *k, enum path p)
{
	unsigned np = 0;
	uint32_t fill = p == P_LONG ? 6000 : 0;

	memset(k, 0, sizeof(*k));
	k->r.xid = ++f->xid;
	rr_put_be32(k->hdr, k->r.xid);
	rr_put_be32(k->hdr + 4, 0);          /* CALL */
	for (uint32_t i = 0; i < fill; i++)
		k->hdr[8 + i] = (uint8_t)(i * 7 + 1);
	k->parts[np++] = (struct rr_xprt_part){k->hdr, 8 + fill, false};
	if (p == P_READ) {
		for (uint32_t i = 0; i < sizeof(k->item); i++)
			k->item[i] = (uint8_t)(i * 3 + 5);
		k->parts[np++] = (struct rr_xprt_part){k->item, sizeof(k->item), true};
	}
	k->r.parts = k->parts;
	k->r.nparts = np;
	if (p == P_WRITE) {
		memset(k->sink, 0x11, sizeof(k->sink));
		k->sinks[0] = (struct rr_xprt_sink){k->sink, sizeof(k->sink)};
		k->r.sinks = k->sinks;
		k->r.nsinks = 1;
	}
	k->r.max_reply = p == P_REPLY ? 10000 : 256;
	/* with reliable reply a Reply chunk only for a certainly large Reply
	 * (draft 5.3.1) */
	k->r.min_reply = p == P_REPLY ? 10000 : 0;
}

/* Notes the segments of chunk @c of h (@write: the peer may write them). */
static void note_chunk(struct seen *s, const struct rr_hdr_chunk *c, bool write)
{
	for (uint32_t j = 0; j < c->nsegs; j++) {
		REQUIRE(s->nstags < RR_XPRT_MAX_REGS);
		s->stag[s->nstags] = h.segs[c->first + j].handle;
		s->to[s->nstags] = h.segs[c->first + j].offset;
		s->len[s->nstags] = h.segs[c->first + j].length;
		s->write[s->nstags++] = write;
	}
}

/* Receives the Call @xid and notes its STags. */
static void take_call(struct fx *f, uint32_t xid, struct seen *s)
{
	uint8_t m[4096];
	int n = w_recv(f, m, "the rogue receives the Call");

	memset(s, 0, sizeof(*s));
	REQUIRE(n >= 28);
	REQUIRE_EQ(rr_th_hdr_call(&h, m, n, 4096), 0);
	REQUIRE_EQ(h.xid, xid);
	for (uint32_t i = 0; i < h.nread; i++)
		note_chunk(s, &h.read[i], false);
	for (uint32_t i = 0; i < h.nwrite; i++)
		note_chunk(s, &h.write[i], true);
	if (h.has_reply)
		note_chunk(s, &h.reply, true);
	/* one registration per chunk here (segments of at most 1 MiB) */
	for (unsigned i = 0; i < s->nstags; i++)
		for (unsigned j = 0; j < i; j++)
			CHECK(s->stag[i] != s->stag[j]);
}

/* The responder's legitimate use: every Read chunk read, every Write and
 * Reply chunk written whole. Each must succeed: the STags were valid. */
static void use_all(struct fx *f, const struct seen *s)
{
	for (unsigned i = 0; i < s->nstags; i++) {
		uint32_t vend;

		memset(f->g.data, 0x5a, s->len[i]);
		CHECK_EQ(w_rdma(f, s->write[i], s->stag[i], s->to[i], s->len[i], &vend,
				"the rogue uses an STag of the Call"),
			 RPCRDMA_WC_SUCCESS);
	}
}

/* Echoes the Write list of the Call (each segment used whole) into rh. */
static void echo_writes(void)
{
	for (uint32_t i = 0; i < h.nwrite; i++)
		REQUIRE_EQ(rr_hdr_add_write(&rh, &h.segs[h.write[i].first], h.write[i].nsegs), 0);
}

/* Completes the Call in h as @how says (Replies only: the aborts are the
 * caller's). */
static void answer(struct fx *f, enum how how, const struct seen *s)
{
	uint8_t m[4096], body[16];
	int hl;

	rr_put_be32(body, h.xid);
	rr_put_be32(body + 4, 1);   /* REPLY */
	rr_put_be32(body + 8, 0);
	rr_put_be32(body + 12, 0);
	rr_hdr_init(&rh, h.xid, 8, RR_HDR_MSG);
	if (how == H_ERROR) {
		hl = rr_hdr_encode_error_buf(h.xid, 1, 8, RR_HDR_ERR_CHUNK, m, sizeof(m));
		REQUIRE(hl > 0);
		REQUIRE_EQ(w_send(f, m, (size_t)hl, 0, "the rogue's RDMA_ERROR completes"), 0);
		return;
	}
	echo_writes();
	if (how == H_PULL) {
		/* RDMA_NOMSG with a Position-zero Read chunk of our memory */
		memcpy(f->g.data, body, sizeof(body));
		struct rr_hdr_seg g = {0, sizeof(body), 0};

		rh.proc = RR_HDR_NOMSG;
		/* a window, so that the requester (R on both sides) may name
		 * it in the Send With Invalidate of its RDMA_DONE */
		g.handle = rr_th_rresp_window(&f->g, 0, sizeof(body), &g.offset);
		REQUIRE_EQ(rr_hdr_add_read(&rh, 0, &g), 0);
		hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
		REQUIRE(hl > 0);
		REQUIRE_EQ(w_send(f, m, (size_t)hl, 0, "the rogue's RDMA_NOMSG completes"), 0);
		return;
	}
	if (h.has_reply && how == H_REPLY) {
		/* a Long Reply through the Reply chunk */
		struct rr_hdr_seg g = h.segs[h.reply.first];
		uint32_t vend;

		memcpy(f->g.data, body, sizeof(body));
		CHECK_EQ(w_rdma(f, true, g.handle, g.offset, sizeof(body), &vend,
				"the rogue writes the Reply chunk"),
			 RPCRDMA_WC_SUCCESS);
		rh.proc = RR_HDR_NOMSG;
		g.length = sizeof(body);
		REQUIRE_EQ(rr_hdr_add_reply(&rh, &g, 1), 0);
		hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
		REQUIRE(hl > 0);
		REQUIRE_EQ(w_send(f, m, (size_t)hl, 0, "the rogue's Long Reply completes"), 0);
		return;
	}
	hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
	REQUIRE(hl > 0);
	memcpy(m + hl, body, sizeof(body));
	REQUIRE_EQ(w_send(f, m, (size_t)hl + sizeof(body), how == H_REPLY_INV ? s->stag[0] : 0,
			  "the rogue's Reply completes"),
		   0);
}

/* The requester connects again after a Terminate once it has a Call to
 * send: a Short Call (exposing nothing), answered inline by the rogue (a
 * Call left unanswered would keep its credit: RFC 8166 section 4.3.1). */
static void redial(struct fx *f)
{
	static struct frpc k;
	uint8_t m[4096];
	unsigned before = f->c.done;
	int n;

	memset(&k, 0, sizeof(k));
	k.r.xid = ++f->xid;
	rr_put_be32(k.hdr, k.r.xid);
	k.parts[0] = (struct rr_xprt_part){k.hdr, 8, false};
	k.r.parts = k.parts;
	k.r.nparts = 1;
	k.r.max_reply = 256;
	REQUIRE_EQ(rr_tp_client_submit(f->c.tp, &k.r), 0);
	REQUIRE_EQ(w_accept(f, "the requester redials after the probe"), 0);
	n = w_recv(f, m, "the rogue receives the redial's Short Call");
	REQUIRE(n >= 28);
	REQUIRE_EQ(rr_th_hdr_call(&h, m, n, 4096), 0);
	answer(f, H_REPLY, NULL);
	REQUIRE(w_done(f, before + 1, "the redial's RPC completes"));
	CHECK_EQ(k.r.status, 0);
	if (k.r.reply)
		rr_tp_client_release_reply(f->c.tp, &k.r);
}

/* After the completion: each STag of @s, tried on a connection of its own,
 * must be refused, and nothing of the try may reach the sink. */
static void probe_all(struct fx *f, struct frpc *k, const struct seen *s, unsigned ns,
		      enum path p)
{
	memcpy(k->sink_after, k->sink, sizeof(k->sink));
	for (unsigned t = 0; t < ns; t++)
		for (unsigned i = 0; i < s[t].nstags; i++) {
			uint32_t vend = 0;
			int st;

			memset(f->g.data, 0xba, s[t].len[i]);
			st = w_rdma(f, s[t].write[i], s[t].stag[i], s[t].to[i], s[t].len[i], &vend,
				    "the rogue's probe of a fenced STag");
			if (st != RPCRDMA_WC_REM_ACCESS_ERR)
				printf("  %s: STag %#x (%s, transmission %u) after completion: "
				       "status %d\n", path_name[p], s[t].stag[i],
				       s[t].write[i] ? "write" : "read", t, st);
			CHECK_EQ(st, RPCRDMA_WC_REM_ACCESS_ERR);
			redial(f);
		}
	CHECK_MEM(k->sink, k->sink_after, sizeof(k->sink));
}

static uint64_t ctr(_Atomic uint64_t *c)
{
	return atomic_load(c);
}

/* One RPC of path @p completed as @how, then every STag it exposed tried. */
static void one(struct fx *f, enum path p, enum how how)
{
	static struct frpc k;
	struct seen s[2];
	unsigned ns = 0, before = f->c.done;
	uint64_t b0 = ctr(&soft_counters.mw_binds), l0 = ctr(&soft_counters.local_invs),
		 r0 = ctr(&soft_counters.remote_invs);
	int want = 0;

	g_path = p;
	g_how = how;
	g_nwait = 0;
	mk(f, &k, p);
	REQUIRE_EQ(rr_tp_client_submit(f->c.tp, &k.r), 0);
	take_call(f, k.r.xid, &s[ns]);
	CHECK(s[ns].nstags >= 1);
	use_all(f, &s[ns++]);
	switch (how) {
	case H_TIMEOUT:
	case H_CANCEL:
		want = how == H_TIMEOUT ? -ETIMEDOUT : -ECANCELED;
		rr_tp_client_abort(f->c.tp, &k.r, want);
		break;
	case H_RECONNECT:
		rr_th_rresp_drop(&f->g);
		REQUIRE_EQ(w_accept(f, "the requester reconnects"), 0);
		take_call(f, k.r.xid, &s[ns]);   /* retransmitted, same XID */
		use_all(f, &s[ns]);
		answer(f, H_REPLY, &s[ns++]);
		break;
	case H_ERROR:
		want = -EREMOTEIO;
		answer(f, how, &s[0]);
		break;
	default:
		answer(f, how, &s[0]);
		break;
	}
	REQUIRE(w_done(f, before + 1, "the RPC completes"));
	CHECK_EQ(k.r.status, want);
	if (how == H_PULL) {
		uint8_t m[4096];
		int n = w_recv(f, m, "the rogue receives the RDMA_DONE owed");

		CHECK_EQ(n, 16);
		CHECK_EQ(rr_get_be32(m), k.r.xid);
		CHECK_EQ(rr_get_be32(m + 12), RR_HDR_DONE);
		CHECK(k.r.via_read);
	}
	if (k.r.reply)
		rr_tp_client_release_reply(f->c.tp, &k.r);
	/* How the windows ended, as the provider saw it (the counts are the
	 * process's: the rogue's own window of a pulled Reply is bound once
	 * and, when the requester set R, invalidated by its RDMA_DONE). */
	{
		unsigned rogue_binds = how == H_PULL, rogue_rinv = how == H_PULL && f->windows;
		uint64_t binds = ctr(&soft_counters.mw_binds) - b0 - rogue_binds;
		uint64_t rinv = ctr(&soft_counters.remote_invs) - r0 - rogue_rinv;
		uint64_t inv = ctr(&soft_counters.local_invs) - l0 + rinv;
		unsigned exposed = s[0].nstags + (ns > 1 ? s[1].nstags : 0);

		if (f->windows) {
			CHECK_EQ(binds, exposed);
			/* the connection of the last transmission was up at
			 * completion: every one of its windows invalidated on
			 * the QP (the first transmission's went with its
			 * connection) */
			CHECK_EQ(inv, s[ns - 1].nstags);
			CHECK_EQ(rinv, how == H_REPLY_INV ? 1 : 0);
		} else {
			CHECK_EQ(binds, 0);
			CHECK_EQ(inv, 0);
		}
	}
	probe_all(f, &k, s, ns, p);
	CHECK_EQ(rr_tp_client_live_stags(f->c.tp), 0);
}

static void matrix(enum how how, bool windows)
{
	struct fx f;

	if (!rr_th_soft_ok())
		return;
	fx_up(&f, windows);
	for (enum path p = 0; p < P_COUNT; p++)
		one(&f, p, how);
	fx_down(&f);
}

TEST(fence_reply_windows)
{
	matrix(H_REPLY, true);
}

TEST(fence_reply_mrs)
{
	matrix(H_REPLY, false);
}

/* The rogue names the Call's first STag in a Send With Invalidate (the
 * requester set R): that window is invalidated by the peer, every other one
 * locally. (Plain MRs cannot be invalidated remotely: not advertised.) */
TEST(fence_reply_with_invalidate_windows)
{
	matrix(H_REPLY_INV, true);
}

TEST(fence_timeout_windows)
{
	matrix(H_TIMEOUT, true);
}

TEST(fence_timeout_mrs)
{
	matrix(H_TIMEOUT, false);
}

TEST(fence_cancel_windows)
{
	matrix(H_CANCEL, true);
}

TEST(fence_cancel_mrs)
{
	matrix(H_CANCEL, false);
}

TEST(fence_reconnect_windows)
{
	matrix(H_RECONNECT, true);
}

TEST(fence_reconnect_mrs)
{
	matrix(H_RECONNECT, false);
}

TEST(fence_rdma_error_windows)
{
	matrix(H_ERROR, true);
}

TEST(fence_rdma_error_mrs)
{
	matrix(H_ERROR, false);
}

TEST(fence_pulled_reply_windows)
{
	matrix(H_PULL, true);
}

TEST(fence_pulled_reply_mrs)
{
	matrix(H_PULL, false);
}
