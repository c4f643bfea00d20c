/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the responder session (proto/conn/conn.h, the
 * responder role of src/proto/conn: RFC 8166 with RFC 8797 negotiation and
 * reliable reply, draft-cel-nfsv4-rpcrdma-reliable-reply-04) driven by a
 * hostile requester. The session runs as the server's executor runs it
 * (src/transport/rdma): every io callback is answered by a model of the
 * provider -- registrations in a table of STags, Receives by index, send
 * slots, RDMA Reads and Writes against the requester's memory, Send With
 * Invalidate, completions queued and fed back later in order -- and of the
 * upper layer (Calls delivered, answered with Replies of chosen sizes,
 * refused, finished). The requester is a requester core (proto/xprt.h)
 * that builds real Calls (optionally corrupted) and checks every Reply.
 *
 * Input (docs/fuzzing.md "fuzz_rrep_rsp"): eight bytes of configuration
 * (R flags, windows, reliable reply, ORD, inline sizes, segment size,
 * credits, rrep_max, timeout, Reply memory budget, send slots, send
 * timeout), then operations: a Call, an RDMA_DONE (early, twice, forged,
 * for an unknown XID, plain or as Send With Invalidate naming its own,
 * another Reply's, a fenced or an unknown STag), an upper-layer Reply,
 * time passing on a virtual clock, raw bytes as a Send, a disconnect,
 * completions (succeeding or failing), pulling a Read-chunk Reply,
 * finishing or refusing a delivered Call, failing allocations.
 *
 * Checked after every operation: Receives posted are what the session
 * counts and cover every message the peer may send (rr_cred_rsp_safe); a
 * Receive is never posted twice; every grant sent is >= 1 and <= the
 * credits configured; the Reply memory held stays within its budget; the
 * Read-chunk Replies the session counts live are exactly the STags the
 * provider would still honour; a Send fits its slot and the peer's inline
 * size; every RDMA Write lands inside a Write or Reply chunk of its Call
 * and reads registered memory; every RDMA Read lands inside its sink. The
 * requester accepts every Reply to a well-formed Call with the payload the
 * upper layer gave (inline, Write chunk, Reply chunk or pulled), and Send
 * With Invalidate names only an STag of that Call. A well-formed Call is
 * never dropped silently: once the completions are in, it was delivered or
 * answered RDMA_ERROR. When a connection goes and its session is
 * destroyed, every registration was released exactly once (none left, none
 * released twice); nothing leaks (LSan). */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "proto/conn/conn_int.h"
#include "proto/rrep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_rrep_rsp"
#define FAIL FZ_FAIL

#define MAXCALLS 32
#define MAXREQS 16          /* requests the upper layer holds (the input names them) */
#define NUREQ (MAXREQS + 48) /* and those it has no room for: refused (settle) */
#define MAXREGS 128
#define MAXWORK 256
#define MAXSLOTS 8
#define MAXPULLS 8
#define NRECV_MAX 64

/* What the upper layer replied to a Call: head, DDP item, tail. */
struct reply {
	const uint8_t *head, *item, *tail;
	uint32_t hlen, ilen, tlen;
	bool has_item;
};

enum call_state { C_SENT, C_DELIVERED, C_ANSWERED };

/* A Call of the requester (the fuzzer's side). */
struct call {
	bool used;
	bool clean;                 /* sent as built: the responder must answer */
	enum call_state state;
	uint32_t xid;
	struct rr_xprt_rqst *rq;
	uint8_t *args, *item, *sink[2];
	uint32_t alen, ilen;
	struct rr_xprt_part parts[2];
	struct rr_xprt_sink sinks[2];
	bool replied;               /* the upper layer answered: @rp */
	struct reply rp;
	uint8_t *rhead;             /* @rp's head (the upper layer's is freed
				       when its request is done) */
};

/* A Call delivered to the upper layer. */
struct ureq {
	bool used;
	struct rr_conn_sreq *r;
	uint32_t xid;
	bool replied;               /* rr_conn_reply posted it (1) */
	bool sent;                  /* io->sent came */
	uint8_t *head;              /* the Reply's head, valid until sent */
};

/* A registration of the responder (the provider's STag table). */
struct mreg {
	bool used;
	bool valid;                 /* the peer may use its STag */
	bool remote;                /* a remote right */
	bool invalidatable;
	uint8_t *base;
	size_t len;
	uint32_t stag;
	uint64_t to;
};

enum work_kind { W_SEND, W_READ, W_INV };

struct work {
	enum work_kind kind;
	uint64_t token;
	uint32_t slot;              /* W_SEND */
	struct rr_conn_read rd;     /* W_READ */
	uint32_t stag;              /* W_INV */
};

/* A Read-chunk Reply the requester has not pulled yet. */
struct pull {
	bool used;
	struct call *c;
	uint32_t xid;
	struct rr_xprt_reply res;
};

struct fz {
	struct fz_in in;
	struct rpcrdma_env env;
	uint64_t now, rng;
	unsigned fail_allocs;
	/* configuration */
	struct rr_conn_config cfg;
	uint8_t pd[64];
	int pd_len;
	bool req_inline_ddp;        /* the requester's own choice */
	uint32_t nrecv;
	uint16_t ord;
	unsigned nslots;
	struct rr_xprt_stats stats;
	uint64_t mem_total_used;
	struct rr_conn_failed failed;
	/* the responder */
	struct rr_conn *c;
	struct rr_conn_io io;
	bool closing;               /* io->close came: the connection ends */
	bool posted[NRECV_MAX];
	uint32_t nposted;
	struct mreg regs[MAXREGS];
	struct work work[MAXWORK];
	unsigned nwork;
	bool slot_busy[MAXSLOTS];
	uint8_t *slots[MAXSLOTS];
	struct ureq ureqs[NUREQ];
	uint8_t **grave;            /* Reply heads of finished, orphaned Replies */
	unsigned ngrave;
	/* the requester */
	struct rr_xprt_params p;
	struct rr_xprt_requester req;
	bool req_init;
	struct call calls[MAXCALLS];
	struct pull pulls[MAXPULLS];
	uint32_t next_stag, next_xid;
	uint32_t dead_stags[8];
	unsigned ndead;
};

static uint8_t pattern[1u << 17];
static uint8_t zeros[4];

/* ---- environment ---- */

static void *fz_alloc(void *ctx, size_t n)
{
	struct fz *z = ctx;

	if (z->fail_allocs) {
		z->fail_allocs--;
		return NULL;
	}
	return malloc(n);
}

static void fz_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static uint64_t fz_now(void *ctx)
{
	return ((struct fz *)ctx)->now;
}

static void fz_random(void *ctx, void *buf, size_t len)
{
	struct fz *z = ctx;

	for (size_t i = 0; i < len; i++) {
		z->rng = z->rng * 6364136223846793005ull + 1442695040888963407ull;
		((uint8_t *)buf)[i] = (uint8_t)(z->rng >> 56);
	}
}

/* ---- the requester's memory ---- */

/* The requester's registration an RDMA access of the responder names. */
static uint8_t *req_mem(struct call *c, uint32_t stag, uint64_t remote, uint32_t len, bool write)
{
	for (unsigned i = 0; c && c->rq && i < c->rq->nregs; i++) {
		struct rr_xprt_reg *g = &c->rq->regs[i];

		if (!g->valid || g->stag != stag || remote < g->addr || remote - g->addr > g->len ||
		    len > g->len - (remote - g->addr))
			continue;
		if (write && !(g->access & RR_XPRT_ACC_REMOTE_WRITE))
			return NULL;
		if (!write && !(g->access & RR_XPRT_ACC_REMOTE_READ))
			return NULL;
		return (uint8_t *)g->base + (remote - g->addr);
	}
	return NULL;
}

/* Any Call's memory (a hostile Call may name another Call's STag). */
static uint8_t *any_req_mem(struct fz *z, uint32_t stag, uint64_t remote, uint32_t len, bool write,
			    struct call **owner)
{
	for (int i = 0; i < MAXCALLS; i++) {
		uint8_t *p = z->calls[i].used ? req_mem(&z->calls[i], stag, remote, len, write) : NULL;

		if (p) {
			*owner = &z->calls[i];
			return p;
		}
	}
	return NULL;
}

static struct call *call_by_xid(struct fz *z, uint32_t xid)
{
	for (int i = 0; i < MAXCALLS; i++)
		if (z->calls[i].used && z->calls[i].xid == xid)
			return &z->calls[i];
	return NULL;
}

static void call_free(struct fz *z, struct call *c)
{
	for (int i = 0; i < MAXPULLS; i++)
		if (z->pulls[i].used && z->pulls[i].c == c)
			z->pulls[i].used = false;
	if (c->rq)
		rr_xprt_rqst_release(&z->req, c->rq);
	free(c->args);
	free(c->item);
	free(c->sink[0]);
	free(c->sink[1]);
	free(c->rhead);
	memset(c, 0, sizeof(*c));
}

/* ---- the provider: registrations ---- */

static struct mreg *reg_of(struct fz *z, const struct rr_conn_mem *m)
{
	struct mreg *g = m->handle;

	if (g < z->regs || g >= z->regs + MAXREGS || !g->used || m->handle2 != g)
		FAIL("a registration the provider does not have");
	return g;
}

static int io_reg(void *ctx, struct rr_conn_mem *m)
{
	struct fz *z = ctx;
	struct mreg *g = NULL;

	if (!z->c || !rr_conn_is_up(z->c))
		return -ENOTCONN;
	if (!m->base || !m->len)
		FAIL("a registration of nothing");
	if (z->fail_allocs) {
		z->fail_allocs--;
		return -ENOMEM;
	}
	for (int i = 0; i < MAXREGS && !g; i++)
		if (!z->regs[i].used)
			g = &z->regs[i];
	if (!g)
		return -ENOMEM;
	*g = (struct mreg){.used = true, .valid = true, .base = m->base, .len = m->len,
			   .remote = (m->access & (RR_XPRT_ACC_REMOTE_READ | RR_XPRT_ACC_REMOTE_WRITE)) != 0,
			   .invalidatable = m->invalidatable};
	g->stag = 0x40000000u | ++z->next_stag;
	g->to = 0x5000000000ull + ((uint64_t)z->next_stag << 24);
	m->stag = g->stag;
	m->to = g->to;
	m->lkey = g->stag;
	m->handle = g;
	m->handle2 = g;
	m->window = z->cfg.use_windows && m->invalidatable;
	return 0;
}

static void io_unreg(void *ctx, struct rr_conn_mem *m)
{
	struct fz *z = ctx;
	struct mreg *g = reg_of(z, m);

	if (g->valid && g->remote && z->ndead < 8)
		z->dead_stags[z->ndead++] = g->stag;
	memset(g, 0, sizeof(*g));
	m->handle2 = NULL;
}

/* The registration of STag @stag valid for the peer (NULL: the provider
 * refuses the access). */
static struct mreg *reg_by_stag(struct fz *z, uint32_t stag)
{
	for (int i = 0; i < MAXREGS; i++)
		if (z->regs[i].used && z->regs[i].valid && z->regs[i].remote &&
		    z->regs[i].stag == stag)
			return &z->regs[i];
	return NULL;
}

/* ---- the provider: work requests ---- */

static int queue_work(struct fz *z, const struct work *w)
{
	if (z->nwork == MAXWORK)
		return -ENOSPC;   /* the send queue is full: fatal to the connection */
	z->work[z->nwork++] = *w;
	return 0;
}

static int io_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	struct fz *z = ctx;
	struct work w = {.kind = W_INV, .token = token, .stag = reg_of(z, m)->stag};

	if (!m->window)
		FAIL("Local Invalidate of an STag that is not a window");
	return queue_work(z, &w);
}

static uint8_t *io_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	struct fz *z = ctx;

	for (unsigned i = 0; i < z->nslots; i++)
		if (!z->slot_busy[i]) {
			z->slot_busy[i] = true;
			*slot = i;
			*cap = z->cfg.send_size;
			memset(z->slots[i], 0xa5, z->cfg.send_size);
			return z->slots[i];
		}
	return NULL;
}

static void io_slot_put(void *ctx, uint32_t slot)
{
	struct fz *z = ctx;

	if (slot >= z->nslots || !z->slot_busy[slot])
		FAIL("send slot %u put back twice", slot);
	z->slot_busy[slot] = false;
}

static void requester_gets(struct fz *z, const uint8_t *msg, uint32_t len, bool inv,
			   uint32_t inv_stag);

/* The Writes, then the Send: the requester receives it at once (in order on
 * the wire); the completion comes later. */
static int io_send(void *ctx, const struct rr_conn_send *s)
{
	struct fz *z = ctx;
	static uint8_t msg[65536];
	struct work w = {.kind = W_SEND, .token = s->token, .slot = s->slot};

	if (s->slot >= z->nslots || !z->slot_busy[s->slot])
		FAIL("a Send from a slot that is not taken");
	if (s->len > z->cfg.send_size || s->len > z->p.reply_inline || s->len < 16)
		FAIL("a Send of %u bytes (slot %u, peer's inline %u)", s->len, z->cfg.send_size,
		     z->p.reply_inline);
	memcpy(msg, z->slots[s->slot], s->len);
	{
		uint32_t proc = rr_get_be32(msg + 12), grant = rr_get_be32(msg + 8);

		if ((proc == RR_HDR_MSG || proc == RR_HDR_NOMSG || proc == RR_HDR_ERROR) &&
		    (grant == 0 || grant > z->cfg.credits))
			FAIL("grant %u (credits %u)", grant, z->cfg.credits);
	}
	for (unsigned i = 0; i < s->nwrites; i++) {
		const struct rr_conn_write *wr = &s->writes[i];
		struct call *owner = NULL;
		uint8_t *dst = any_req_mem(z, wr->stag, wr->to, wr->len, true, &owner);

		if (wr->mem) {
			struct mreg *g = reg_of(z, wr->mem);

			if (wr->src < g->base || wr->len > g->len ||
			    (size_t)(wr->src - g->base) > g->len - wr->len)
				FAIL("an RDMA Write reads outside its registration");
		} else if (wr->len >= 4 || memcmp(wr->src, zeros, wr->len)) {
			FAIL("an RDMA Write of unregistered memory");
		}
		if (!dst) {
			/* a Call that named memory the requester does not
			 * have (corrupted): its provider terminates */
			z->closing = true;
			return 0;
		}
		if (call_by_xid(z, rr_get_be32(msg)) && call_by_xid(z, rr_get_be32(msg))->clean &&
		    owner != call_by_xid(z, rr_get_be32(msg)))
			FAIL("an RDMA Write into another Call's chunk");
		memmove(dst, wr->src, wr->len);
	}
	if (queue_work(z, &w))
		return -ENOSPC;
	requester_gets(z, msg, s->len, s->inv, s->inv_stag);
	return 0;
}

static int io_read(void *ctx, const struct rr_conn_read *r)
{
	struct fz *z = ctx;
	struct work w = {.kind = W_READ, .token = r->token, .rd = *r};
	struct mreg *g = reg_of(z, r->mem);

	if (r->dst < g->base || r->len > g->len || (size_t)(r->dst - g->base) > g->len - r->len)
		FAIL("an RDMA Read lands outside its sink");
	return queue_work(z, &w);
}

static int io_post_recv(void *ctx, uint32_t idx)
{
	struct fz *z = ctx;

	if (idx >= z->nrecv || z->posted[idx])
		FAIL("Receive %u posted twice", idx);
	z->posted[idx] = true;
	z->nposted++;
	return 0;
}

static int io_lend(void *ctx, uint32_t idx, void **handle)
{
	(void)ctx, (void)idx, (void)handle;
	FAIL("a responder lent a Receive");
}

static void io_unlend(void *ctx, void *handle, uint32_t idx)
{
	(void)ctx, (void)handle, (void)idx;
	FAIL("a responder gave a Receive back");
}

static void io_deliver(void *ctx, struct rr_conn_sreq *r)
{
	struct fz *z = ctx;
	struct ureq *u = NULL;
	struct call *c = call_by_xid(z, r->xid);

	for (int i = 0; i < NUREQ && !u; i++)
		if (!z->ureqs[i].used)
			u = &z->ureqs[i];
	if (!u)
		FAIL("more Calls delivered in one operation than the model holds");
	*u = (struct ureq){.used = true, .r = r, .xid = r->xid};
	if (c && c->clean) {
		/* the Call as the requester built it: its arguments, then
		 * the item (Read chunk or inline) */
		if (c->state != C_SENT)
			FAIL("Call %08x delivered twice", c->xid);
		if (r->len < c->alen + c->ilen || memcmp(r->msg, c->args, c->alen) ||
		    memcmp(r->msg + c->alen, c->item, c->ilen))
			FAIL("Call %08x delivered with other bytes", c->xid);
		c->state = C_DELIVERED;
	}
}

static void io_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	(void)ctx, (void)rpc;
	FAIL("a responder completed a Call of its own");
}

static void io_sent(void *ctx, struct rr_conn_sreq *r, int status)
{
	struct fz *z = ctx;

	(void)status;
	for (int i = 0; i < NUREQ; i++)
		if (z->ureqs[i].used && z->ureqs[i].r == r) {
			if (z->ureqs[i].sent)
				FAIL("io->sent twice");
			z->ureqs[i].sent = true;
			return;
		}
	FAIL("io->sent for a request the upper layer does not have");
}

static void io_close(void *ctx)
{
	((struct fz *)ctx)->closing = true;
}

/* ---- the requester's view of a Reply ---- */

static void expect_payload(const struct reply *rp, const struct rr_xprt_reply *res)
{
	static uint8_t want[3 * 65536 + 8];
	uint32_t n;
	bool placed = rp->has_item && res->nsinks && res->sink_placed[0];

	memcpy(want, rp->head, rp->hlen);
	n = rp->hlen;
	if (rp->has_item && !placed) {
		memcpy(want + n, rp->item, rp->ilen);
		n += rp->ilen;
		memset(want + n, 0, RR_ALIGN4(rp->ilen) - rp->ilen);
		n += (uint32_t)(RR_ALIGN4(rp->ilen) - rp->ilen);
	}
	memcpy(want + n, rp->tail, rp->tlen);
	n += rp->tlen;
	if (res->payload_len != n || memcmp(res->payload, want, n)) {
		uint32_t at = 0;

		while (at < n && at < res->payload_len && res->payload[at] == want[at])
			at++;
		FAIL("the requester got another payload than the upper layer's (%u vs %u bytes, "
		     "from byte %u: %02x%02x%02x%02x vs %02x%02x%02x%02x)", res->payload_len, n, at,
		     res->payload[0], res->payload[1], res->payload[2], res->payload[3], want[0],
		     want[1], want[2], want[3]);
	}
	if (placed && res->sink_len[0] != rp->ilen)
		FAIL("Write chunk holds %u bytes of a %u-byte item", res->sink_len[0], rp->ilen);
}

static void expect_sink(const struct reply *rp, const struct rr_xprt_reply *res,
			const struct call *c)
{
	if (rp->has_item && res->nsinks && res->sink_placed[0] &&
	    memcmp(c->sink[0], rp->item, rp->ilen))
		FAIL("Write chunk data is not the item");
}

static void requester_gets(struct fz *z, const uint8_t *msg, uint32_t len, bool inv,
			   uint32_t inv_stag)
{
	static struct rr_xprt_reply res;
	struct call *c = call_by_xid(z, rr_get_be32(msg));

	rr_xprt_req_recv(&z->req, msg, len, inv, inv_stag, &res);
	if (!c || !c->clean) {
		/* a Reply to a corrupted Call, or to raw bytes: only what the
		 * core makes of it (a Read-chunk Reply may be pulled) */
		if (res.kind == RR_XPRT_R_PULL && c && res.call == c->rq) {
			for (int i = 0; i < MAXPULLS; i++)
				if (!z->pulls[i].used) {
					z->pulls[i] = (struct pull){true, c, res.xid, res};
					break;
				}
		}
		return;
	}
	if (inv) {
		bool own = false;

		for (unsigned i = 0; i < c->rq->nregs; i++)
			own |= c->rq->regs[i].stag == inv_stag;
		if (!own)
			FAIL("Send With Invalidate names an STag not of this Call");
	}
	switch (res.kind) {
	case RR_XPRT_R_REPLY:
		if (res.call != c->rq || !c->replied)
			FAIL("a Reply the upper layer did not give (xid %08x)", c->xid);
		expect_payload(&c->rp, &res);
		expect_sink(&c->rp, &res, c);
		c->state = C_ANSWERED;
		break;
	case RR_XPRT_R_ERROR:
		if (res.call != c->rq)
			FAIL("RDMA_ERROR for another Call");
		c->state = C_ANSWERED;
		break;
	case RR_XPRT_R_PULL:
		if (res.call != c->rq || !c->replied || res.pull_len == 0)
			FAIL("a Read-chunk Reply the requester cannot pull");
		c->state = C_ANSWERED;
		for (int i = 0; i < MAXPULLS; i++)
			if (!z->pulls[i].used) {
				z->pulls[i] = (struct pull){true, c, res.xid, res};
				return;
			}
		break;   /* never pulled (the peer's choice): the timeout fences it */
	default:
		FAIL("the requester dropped the Reply to its Call %08x", c->xid);
	}
}

/* ---- the connection ---- */

static const struct rr_conn_io io_model = {
	.reg = io_reg, .unreg = io_unreg, .inv = io_inv, .slot_get = io_slot_get,
	.slot_put = io_slot_put, .send = io_send, .read = io_read, .post_recv = io_post_recv,
	.lend = io_lend, .unlend = io_unlend, .deliver = io_deliver, .complete = io_complete,
	.sent = io_sent, .close = io_close,
};

static void ureq_free(struct ureq *u)
{
	free(u->head);
	memset(u, 0, sizeof(*u));
}

/* A new connection and its session (the executor makes one per
 * connection, with every Receive posted). */
static void conn_up(struct fz *z)
{
	z->io = io_model;
	z->io.ctx = z;
	z->nposted = z->nrecv;
	for (uint32_t i = 0; i < z->nrecv; i++)
		z->posted[i] = true;
	if (rr_conn_create(&z->cfg, &z->io, &z->c)) {
		z->c = NULL;   /* refused (no memory): the next operation retries */
		return;
	}
	rr_conn_up(z->c, z->pd, (size_t)z->pd_len, z->nrecv, z->ord, 0x1234);
	z->p = *rr_conn_params(z->c);
	z->p.local_r = rr_conn_params(z->c)->peer_r;
	z->p.peer_r = rr_conn_params(z->c)->local_r;
	z->p.inline_ddp = z->req_inline_ddp;
	if (z->req_init)
		rr_xprt_req_fini(&z->req);
	rr_xprt_req_init(&z->req, rpcrdma_env_default(), &z->p, NULL);   /* never fails */
	z->req_init = true;
	z->ndead = 0;
}

/* The connection is gone: the session is told, the upper layer finishes
 * every request it was given, the session is destroyed; every
 * registration must have been released by then. Then a new one. */
static void conn_down(struct fz *z, bool reconnect)
{
	unsigned left = 0;

	z->closing = false;
	if (z->c) {
		rr_conn_down(z->c);
		z->nwork = 0;   /* no completion of the lost connection comes */
		for (int i = 0; i < NUREQ; i++) {
			struct ureq *u = &z->ureqs[i];

			if (!u->used)
				continue;
			if (!rr_conn_done(z->c, u->r))
				FAIL("a request still sending after the connection went");
			ureq_free(u);
		}
		rr_conn_destroy(z->c);
		z->c = NULL;
	}
	for (unsigned i = 0; i < MAXSLOTS; i++)
		z->slot_busy[i] = false;
	for (int i = 0; i < MAXREGS; i++)
		left += z->regs[i].used;
	if (left)
		FAIL("%u registrations left when the session was destroyed", left);
	if (z->mem_total_used)
		FAIL("%llu bytes of Reply memory still counted with no session",
		     (unsigned long long)z->mem_total_used);
	for (unsigned i = 0; i < z->ngrave; i++)
		free(z->grave[i]);
	z->ngrave = 0;
	for (int i = 0; i < MAXCALLS; i++)
		if (z->calls[i].used)
			call_free(z, &z->calls[i]);
	if (reconnect)
		conn_up(z);
}

/* ---- invariants ---- */

FZ_MODEL static void check(struct fz *z)
{
	uint32_t live = 0;

	if (!z->c)
		return;
	if (z->nposted != z->c->scred.pool->posted)
		FAIL("Receives posted %u, the session counts %u", z->nposted,
		     z->c->scred.pool->posted);
	if (!rr_cred_rsp_safe(&z->c->scred))
		FAIL("Receives posted do not cover what the peer may send (posted %u, "
		     "reserved %u, may send %llu, in progress %llu, RDMA_DONE owed %u)",
		     z->c->scred.pool->posted, z->c->scred.pool->reserved,
		     (unsigned long long)rr_cred_rsp_sendable(&z->c->scred),
		     (unsigned long long)rr_cred_rsp_in_progress(&z->c->scred),
		     z->c->scred.done_owed);
	if ((z->c->scred.replies && z->c->scred.last_grant == 0) ||
	    z->c->scred.last_grant > z->cfg.credits)
		FAIL("grant %u", z->c->scred.last_grant);
	if (z->c->scred.done_owed > z->cfg.rrep_max)
		FAIL("RDMA_DONE owed above rrep_max");
	if (rr_conn_rrep_bytes(z->c) > z->cfg.reply_mem_per_conn ||
	    z->mem_total_used != rr_conn_rrep_bytes(z->c))
		FAIL("Reply memory held %llu (budget %llu, server total %llu)",
		     (unsigned long long)rr_conn_rrep_bytes(z->c),
		     (unsigned long long)z->cfg.reply_mem_per_conn,
		     (unsigned long long)z->mem_total_used);
	for (int i = 0; i < MAXREGS; i++)
		if (z->regs[i].used && z->regs[i].valid && z->regs[i].remote)
			live++;
	if (rr_conn_is_up(z->c) && live != rr_conn_rrep_live(z->c))
		FAIL("%u exposed STags valid at the provider, the session counts %u", live,
		     rr_conn_rrep_live(z->c));
}

/* After an operation: a connection that ended is replaced. */
static void refuse(struct fz *z, struct ureq *u);

/* After an operation: requests the upper layer has no room for are
 * refused (a hostile peer may keep more Calls in progress than credits
 * allow: each Receive is posted again at once); a connection that ended is
 * replaced. */
FZ_MODEL static void settle(struct fz *z)
{
	for (int i = MAXREQS; i < NUREQ && z->c && !z->closing; i++)
		if (z->ureqs[i].used)
			refuse(z, &z->ureqs[i]);   /* ERR_CHUNK: the requester sees it */
	if (z->closing || !z->c)
		conn_down(z, true);
	check(z);
}

/* ---- messages from the requester ---- */

/* A Send from the requester consumes a Receive (the provider terminates
 * the connection when none is posted or it is too long); Send With
 * Invalidate of @inv first invalidates it when it is a valid,
 * invalidatable STag of this connection, else terminates. */
static void peer_send(struct fz *z, const uint8_t *msg, uint32_t len, bool has_inv, uint32_t inv)
{
	static uint8_t rbuf[65536];
	uint32_t idx = 0;

	if (!z->c)
		return;
	if (has_inv) {
		struct mreg *g = reg_by_stag(z, inv);

		if (!g || !g->invalidatable) {
			z->closing = true;
			return;
		}
		g->valid = false;
	}
	while (idx < z->nrecv && !z->posted[idx])
		idx++;
	if (idx == z->nrecv || len > z->cfg.recv_size) {
		z->closing = true;
		return;
	}
	z->posted[idx] = false;
	z->nposted--;
	memcpy(rbuf, msg, len);
	rr_conn_on_recv(z->c, idx, rbuf, len, has_inv, inv);
	memset(rbuf, 0xee, len);   /* reposted: nothing may point into it */
}

/* ---- operations ---- */

static struct call *call_slot(struct fz *z)
{
	for (int i = 0; i < MAXCALLS; i++)
		if (!z->calls[i].used)
			return &z->calls[i];
	return NULL;
}

static void op_call(struct fz *z)
{
	static uint8_t sendbuf[65536];
	struct call *c = call_slot(z);
	uint32_t alen = 8 + (fz_u16(&z->in) % 6000 & ~3u), ilen = fz_u16(&z->in) % 9000;
	uint8_t k = fz_u8(&z->in);
	uint32_t slen = fz_u16(&z->in) % 9000;
	struct rr_xprt_rqst_desc d = {0};
	uint16_t cpos = fz_u16(&z->in);
	uint8_t cx = fz_u8(&z->in);
	int n;

	d.max_reply = fz_u16(&z->in);
	d.min_reply = fz_u16(&z->in);
	d.max_unknown = k & 4;
	if (!c || !z->c)
		return;
	c->used = true;
	c->xid = ++z->next_xid;
	c->alen = alen;
	c->ilen = ilen;
	c->args = malloc(alen);
	c->item = malloc(ilen ? ilen : 1);
	if (!c->args || !c->item)
		FAIL("oom");
	memcpy(c->args, pattern + (c->xid & 0xff), alen);
	rr_put_be32(c->args, c->xid);
	rr_put_be32(c->args + 4, 0);   /* CALL */
	memcpy(c->item, pattern + 3, ilen);
	c->parts[0] = (struct rr_xprt_part){c->args, alen, false};
	c->parts[1] = (struct rr_xprt_part){c->item, ilen, true};
	d.xid = c->xid;
	d.parts = c->parts;
	d.nparts = ilen ? 2 : 1;
	for (unsigned i = 0; i < (k & 3u) && i < 2; i++) {
		c->sink[i] = calloc(1, slen ? slen : 1);
		if (!c->sink[i])
			FAIL("oom");
		c->sinks[i] = (struct rr_xprt_sink){c->sink[i], slen};
	}
	d.sinks = c->sinks;
	d.nsinks = RR_MIN(k & 3u, 2u);
	if (rr_xprt_rqst_prepare(&z->req, &d, &c->rq)) {
		c->rq = NULL;
		call_free(z, c);
		return;
	}
	for (unsigned i = 0; i < c->rq->nregs; i++) {
		c->rq->regs[i].stag = ++z->next_stag;
		c->rq->regs[i].addr = 0x10000000ull * (i + 1) + (z->next_stag & 0xff);
		c->rq->regs[i].valid = true;
	}
	n = rr_xprt_rqst_marshal(&z->req, c->rq, 32, sendbuf, sizeof(sendbuf));
	if (n < 0 || (uint32_t)n > z->p.call_inline) {
		call_free(z, c);
		return;
	}
	c->clean = !(k & 0x80);
	if (!c->clean)   /* anything but the XID (it stays this Call's) */
		sendbuf[4 + cpos % ((uint32_t)n - 4)] ^= (uint8_t)(cx | 1);
	c->state = C_SENT;
	peer_send(z, sendbuf, (uint32_t)n, false, 0);
}

static void op_raw(struct fz *z)
{
	uint8_t k = fz_u8(&z->in);
	static uint8_t b[512];
	size_t n;
	const uint8_t *raw = fz_bytes(&z->in, (size_t)fz_u8(&z->in) * 2, &n);
	uint32_t inv = (k & 2) && z->ndead ? z->dead_stags[(k >> 2) % z->ndead]
					   : 0x40000000u | (z->next_stag - (k >> 2));

	/* its XID is none of the requester's Calls' (those are checked) */
	memcpy(b, raw, n);
	if (n >= 4)
		b[0] |= 0x80;
	peer_send(z, b, (uint32_t)n, k & 1, inv);
}

/* The valid exposure @sel names (a registration with a remote right). */
static struct mreg *exposure(struct fz *z, uint8_t sel)
{
	for (int i = 0; i < MAXREGS; i++) {
		struct mreg *g = &z->regs[(sel + i) % MAXREGS];

		if (g->used && g->remote)
			return g;
	}
	return NULL;
}

/* RDMA_DONE: for the XID of a Call (answered or not, or any), plain or as
 * Send With Invalidate of an exposed, a fenced or any STag. */
static void op_done(struct fz *z)
{
	uint8_t k = fz_u8(&z->in), sel = fz_u8(&z->in), credit = fz_u8(&z->in);
	struct call *c = &z->calls[sel % MAXCALLS];
	struct mreg *x = exposure(z, sel >> 1);
	uint32_t xid, inv = 0;
	uint8_t msg[16];

	switch (k % 4) {
	case 0: xid = c->xid; break;
	case 1: xid = z->next_xid - (sel & 7); break;
	case 2: xid = fz_u32(&z->in); break;
	default: xid = c->used ? c->xid : z->next_xid; break;
	}
	if (k & 4)
		inv = x ? x->stag : z->next_stag;
	if (k & 8)
		inv = 0x40000000u | (z->next_stag + 1 + (sel & 3));
	if (k & 16 && z->ndead)
		inv = z->dead_stags[sel % z->ndead];
	if (rr_rrep_encode_done(xid, credit, msg, sizeof(msg)) != 16)
		FAIL("RDMA_DONE encoding");
	peer_send(z, msg, sizeof(msg), (k & 28) != 0, inv);
}

/* The requester pulls a Read-chunk Reply by RDMA Read, then (unless told
 * not to) sends its RDMA_DONE, plain or as Send With Invalidate. */
static void op_pull(struct fz *z)
{
	static uint8_t pb[3 * 65536 + 8];
	static struct rr_xprt_reply r2;
	uint8_t k = fz_u8(&z->in);
	struct pull *p = &z->pulls[k % MAXPULLS];
	struct call *c = p->c;
	uint32_t off = 0, inv = 0;
	uint8_t msg[16];

	if (!p->used || !z->c)
		return;
	p->used = false;
	if (p->res.pull_len > sizeof(pb))
		FAIL("pull too long");
	for (uint32_t i = 0; i < p->res.pull_nsegs; i++) {
		const struct rr_hdr_seg *g = &p->res.pull_segs[i];
		struct mreg *m = reg_by_stag(z, g->handle);

		if (!m || g->offset < m->to || g->offset - m->to > m->len ||
		    g->length > m->len - (g->offset - m->to)) {
			/* fenced (timeout, or a forged RDMA_DONE) or never
			 * valid: the responder's provider terminates */
			if (c->clean && m)
				FAIL("Read chunk segment outside its exposure");
			z->closing = true;
			return;
		}
		memcpy(pb + off, m->base + (g->offset - m->to), g->length);
		off += g->length;
		inv = g->handle;
	}
	if (c->clean) {
		memset(&r2, 0, sizeof(r2));
		rr_xprt_req_pulled(&z->req, c->rq, pb, off, &r2);
		if (r2.kind != RR_XPRT_R_REPLY)
			FAIL("pulled Reply refused");
		r2.nsinks = p->res.nsinks;
		memcpy(r2.sink_len, p->res.sink_len, sizeof(r2.sink_len));
		memcpy(r2.sink_placed, p->res.sink_placed, sizeof(r2.sink_placed));
		expect_payload(&c->rp, &r2);
		expect_sink(&c->rp, &r2, c);
	}
	if (k & 0x80)
		return;   /* no RDMA_DONE: the timeout fences it */
	if (rr_rrep_encode_done(p->xid, 1, msg, sizeof(msg)) != 16)
		FAIL("RDMA_DONE encoding");
	peer_send(z, msg, sizeof(msg), (k & 0x40) && p->res.pull_inv, inv);
}

/* The upper layer cannot answer @u (no memory): the transport answers
 * ERR_CHUNK (rr_conn_refuse), then the request is done (the RPC layer's
 * req_refuse, then req_done). */
static void refuse(struct fz *z, struct ureq *u)
{
	rr_conn_refuse(z->c, u->r);
	if (!rr_conn_done(z->c, u->r))
		FAIL("a refused request is still sending");
	ureq_free(u);
}

/* The upper layer answers a delivered Call: head, DDP item, tail. */
static void op_reply(struct fz *z)
{
	struct ureq *u = &z->ureqs[fz_u8(&z->in) % MAXREQS];
	uint32_t hlen = 24 + (fz_u16(&z->in) % 3000 & ~3u), ilen = fz_u16(&z->in) % 65536;
	uint32_t tlen = fz_u16(&z->in) % 5000;
	uint8_t k = fz_u8(&z->in);
	struct rr_xprt_part parts[3];
	struct call *c;
	bool err_chunk;
	int rc;

	if (!u->used || u->replied || !z->c)
		return;
	c = call_by_xid(z, u->xid);
	free(u->head);
	u->head = malloc(hlen);
	if (!u->head)
		FAIL("oom");
	memcpy(u->head, pattern + 1, hlen);
	rr_put_be32(u->head, u->xid);
	rr_put_be32(u->head + 4, 1);   /* REPLY */
	parts[0] = (struct rr_xprt_part){u->head, hlen, false};
	parts[1] = (struct rr_xprt_part){pattern + 2, ilen, true};
	parts[2] = (struct rr_xprt_part){pattern + 5, tlen, false};
	if (!(k & 1))
		parts[1] = parts[2];
	if (c) {
		free(c->rhead);
		c->rhead = malloc(hlen);
		if (!c->rhead)
			FAIL("oom");
		memcpy(c->rhead, u->head, hlen);
		c->replied = true;
		c->rp = (struct reply){c->rhead, pattern + 2, pattern + 5, hlen, ilen, tlen, k & 1};
	}
	rc = rr_conn_reply(z->c, u->r, parts, (k & 1) ? 3 : 2, &err_chunk);
	if (rc == 1) {
		u->replied = true;
		return;
	}
	if (rc < 0) {
		if (c)
			c->replied = false;
		if (k & 2)
			refuse(z, u);   /* as the RPC layer does: ERR_CHUNK, done */
		return;
	}
	/* sent from the slot only: the parts are free, the request done */
	if (!rr_conn_done(z->c, u->r))
		FAIL("a Reply sent from the slot is still sending");
	ureq_free(u);
}

/* The upper layer is done with a request: after its Reply went, or without
 * one (its choice), or while its Reply is still being sent (a contract
 * breach the session tolerates: the Reply's memory is kept till the end). */
static void op_finish(struct fz *z)
{
	uint8_t k = fz_u8(&z->in);
	struct ureq *u = &z->ureqs[k % MAXREQS];
	struct call *c;

	if (!u->used || !z->c || (u->replied && !u->sent && !(k & 0x80)))
		return;
	c = call_by_xid(z, u->xid);
	if (c && !u->replied && c->state == C_DELIVERED)
		c->state = C_ANSWERED;   /* the upper layer dropped it, not the transport */
	if (!rr_conn_done(z->c, u->r)) {
		uint8_t **g = realloc(z->grave, sizeof(*g) * (z->ngrave + 1));

		if (!g)
			FAIL("oom");
		z->grave = g;
		z->grave[z->ngrave++] = u->head;
		u->head = NULL;
	}
	ureq_free(u);
}

static void op_refuse(struct fz *z)
{
	struct ureq *u = &z->ureqs[fz_u8(&z->in) % MAXREQS];

	if (u->used && !u->replied && z->c)
		refuse(z, u);
}

/* Time passes: what is due runs (Read-chunk Replies expire, parked ones
 * go ERR_CHUNK, a stalled peer loses its connection). */
static void op_time(struct fz *z)
{
	z->now += (uint64_t)fz_u16(&z->in) * 100000u;
	if (!z->c)
		return;
	rr_conn_tick(z->c, z->now);
	if (!z->closing && rr_conn_next_timeout(z->c, z->now) <= z->now)
		FAIL("something due is left after the tick");
}

/* The provider completes the next @n work requests, the first one failing
 * when the input says so (fatal to the connection). */
static void complete(struct fz *z, unsigned n, bool fail_first)
{
	while (n-- && z->nwork && z->c && !z->closing) {
		struct work w = z->work[0];
		int status = fail_first ? -EIO : 0;

		memmove(z->work, z->work + 1, sizeof(w) * --z->nwork);
		fail_first = false;
		switch (w.kind) {
		case W_SEND:
			z->slot_busy[w.slot] = false;   /* the executor takes it back */
			rr_conn_on_send(z->c, w.token, status);
			if (!status)
				rr_conn_on_slot(z->c);
			break;
		case W_READ: {
			struct call *owner = NULL;
			uint8_t *src = any_req_mem(z, w.rd.stag, w.rd.to, w.rd.len, false, &owner);

			if (!status && !src)
				status = -EREMOTEIO;   /* the requester's provider refuses */
			if (!status) {
				reg_of(z, w.rd.mem);   /* still registered */
				memcpy(w.rd.dst, src, w.rd.len);
			}
			rr_conn_on_work(z->c, w.token, status);
			break;
		}
		case W_INV:
			for (int i = 0; i < MAXREGS && !status; i++)
				if (z->regs[i].used && z->regs[i].stag == w.stag)
					z->regs[i].valid = false;
			rr_conn_on_work(z->c, w.token, status);
			break;
		}
		if (status)
			z->closing = true;
	}
}

static void op_complete(struct fz *z)
{
	uint8_t k = fz_u8(&z->in);

	complete(z, 1 + (k & 15), (k & 0xf0) == 0xf0);
}

static void run_op(struct fz *z, uint8_t op)
{
	switch (op % 11) {
	case 0: op_call(z); break;
	case 1: op_done(z); break;
	case 2: op_reply(z); break;
	case 3: op_time(z); break;
	case 4: op_raw(z); break;
	case 5: z->closing = true; break;   /* disconnect */
	case 6: op_complete(z); break;
	case 7: op_pull(z); break;
	case 8: op_finish(z); break;
	case 9: op_refuse(z); break;
	default: z->fail_allocs = fz_u8(&z->in) % 4; break;
	}
}

/* At the end of the input, all completions in: every well-formed Call
 * received on this connection was delivered or answered. */
FZ_MODEL static void check_answered(struct fz *z)
{
	unsigned guard = 0;

	z->fail_allocs = 0;
	while (z->nwork && z->c && !z->closing && guard++ < 4 * MAXWORK)
		complete(z, 1, false);
	if (z->closing || !z->c)
		return;
	for (int i = 0; i < MAXCALLS; i++) {
		struct call *c = &z->calls[i];

		if (c->used && c->clean && c->state == C_SENT)
			FAIL("Call %08x received and never delivered nor answered", c->xid);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz z;
	struct rr_pd_local peer;
	uint8_t f, f6, f7;

	if (!pattern[1])
		for (size_t i = 0; i < sizeof(pattern); i++)
			pattern[i] = (uint8_t)(i * 13 + 1);
	memset(&z, 0, sizeof(z));
	z.in = (struct fz_in){data, size};
	z.env = (struct rpcrdma_env){fz_alloc, fz_free, &z, fz_now, &z, fz_random, &z};
	z.now = 1000000000ull;
	f = fz_u8(&z.in);
	/* the responder, as the server configures it (tp_sess_config) */
	z.cfg.role = RR_CONN_RESPONDER;
	z.cfg.env = &z.env;
	z.cfg.stats = &z.stats;
	z.cfg.send_size = z.cfg.recv_size = 1024u + (uint32_t)fz_u8(&z.in) * 16u;
	z.cfg.local = (struct rr_pd_local){z.cfg.send_size, z.cfg.recv_size, (f & 2) != 0,
					   RR_PD_EXT_CAP_RELIABLE_REPLY};
	z.cfg.use_windows = f & 4;
	z.cfg.max_seg_len = 256u + (uint32_t)fz_u8(&z.in) * 256u;
	z.cfg.max_segs = 16;
	z.cfg.max_call = 1u << 20;
	z.cfg.inline_ddp = true;
	z.cfg.credits = 1 + fz_u8(&z.in) % 32;
	z.cfg.rrep_max = 1 + fz_u8(&z.in) % 8;
	z.cfg.rrep_timeout_ns = (uint64_t)(1 + fz_u8(&z.in)) * 1000000u;
	f6 = fz_u8(&z.in);
	z.cfg.reply_mem_per_conn = f6 == 255 ? 16u << 20 : 4096u * (1u + f6);
	z.cfg.reply_mem_total_used = &z.mem_total_used;
	z.cfg.reply_mem_total = 256u << 20;
	z.cfg.failed = &z.failed;
	f7 = fz_u8(&z.in);
	z.nslots = 1 + (f7 & 7);
	z.cfg.send_timeout_ns = (f7 & 8) ? 50000000u : 0;
	z.nrecv = z.cfg.credits + 4 + z.cfg.rrep_max;   /* as accept_new */
	z.ord = (uint16_t)(1 + (f >> 5));
	for (unsigned i = 0; i < z.nslots; i++)
		if (!(z.slots[i] = malloc(z.cfg.send_size)))
			FAIL("oom");
	/* the requester's private data (RFC 8797) */
	peer = (struct rr_pd_local){z.cfg.recv_size, z.cfg.send_size, (f & 1) != 0,
				    (f & 16) ? 0 : RR_PD_EXT_CAP_RELIABLE_REPLY};
	z.pd_len = rr_pd_encode(&peer, z.pd, sizeof(z.pd));
	if (z.pd_len < 0)
		FAIL("private data encoding");
	z.req_inline_ddp = f & 8;
	conn_up(&z);
	check(&z);
	while (z.in.left) {
		run_op(&z, fz_u8(&z.in));
		settle(&z);
	}
	check_answered(&z);
	z.fail_allocs = 0;
	conn_down(&z, false);
	if (z.req_init)
		rr_xprt_req_fini(&z.req);
	for (unsigned i = 0; i < z.nslots; i++)
		free(z.slots[i]);
	free(z.grave);
	return 0;
}
