/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the soft provider's receive state machine end to end
 * (RFC 5044 framing, RFC 5041 DDP, RFC 5040 RDMAP, draft-talpey-rdma-commit,
 * and the lifetime rule of docs/security.md): a soft context with a PD,
 * registered regions (read-write, remote-read-only, a window's parent with
 * the window bound to the QP, a local Read sink, a durable region over a
 * file), Receives, and a QP "connected" over a socketpair with no progress
 * thread serving it (rr_soft_qp_connected; this thread receives with
 * rr_soft_qp_rx and transmits with rr_soft_qp_tx_locked, src/rdma/soft/rx.c
 * and tx.c). The fuzzer is the rogue peer on the other end of the socketpair: the input is a sequence of
 * operations (docs/fuzzing.md "fuzz_soft_rx" has the table) -- FPDUs it
 * builds (Write, Send, Send With Invalidate, Read Request and Response,
 * Terminate, Commit Request and Response, raw bytes, a corrupted byte) and
 * writes in fuzzer-chosen pieces, and local events between the pieces
 * (deregister a region, invalidate or rebind the window, truncate the
 * durable file, post a local Read, Commit, Send or Write, post Receives,
 * poll, fail allocations, read what the QP sent, close the peer's side).
 *
 * Checked after every operation: the QP's state and queues are consistent;
 * nothing is placed outside registered memory (guard bytes around every
 * region, the remote-read-only region, the window's parent outside the
 * bound range and, once the window is invalid, all of it; the durable
 * file outside its registration and, after deregistration, all of it);
 * deregistered memory is freed (ASan: any later access by the provider is
 * a use-after-free; the durable mapping is poisoned); completions name
 * posted work, once, Receives in order; what the QP sends is a well-formed
 * FPDU stream that ends after a Terminate, and -- when the input holds no
 * raw or corrupted bytes -- Read Responses answer the peer's requests in
 * order, carry the read-only region's own bytes, and a Commit is answered
 * "durable" only for durable memory within the file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/soft.h"
#include "rdma/soft/tx.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#ifdef FZ_ASAN
#include <sanitizer/asan_interface.h>
#define FZ_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define FZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define FZ_POISON(p, n) ((void)(p), (void)(n))
#define FZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_soft_rx"
#define FAIL FZ_FAIL

#define GUARD 32
#define GUARD_BYTE 0xa5
#define OUT_MAX (256u * 1024)
#define NSLOTS 8
#define SLOT_LEN 128
#define FILE_LEN 8192u
#define DUR_LEN 6144u          /* registered part of the durable file */
#define WIN_LO 256u            /* the window's first binding in the parent */
#define WIN_HI 768u
#define MAXQ 64                /* tracked requests / work requests */

enum { R_RW, R_RO, R_PARENT, R_SINK, R_DUR, R_RECV, NREG };

static const uint32_t reg_len[NREG] = {512, 512, 1024, 512, DUR_LEN,
				       NSLOTS * (SLOT_LEN + GUARD)};

struct region {
	uint8_t *alloc;            /* GUARD + len + GUARD (not the durable one) */
	uint8_t *p;
	uint32_t len;
	struct rpcrdma_mr *mr;     /* NULL once deregistered */
	uint32_t stag;             /* kept after deregistration: stale */
	uint64_t to;
};

/* What the peer expects back for each of its Read/Commit Requests (in
 * order: RFC 5040 5.3, commit draft 3.2.3). */
struct expect {
	bool commit;
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size, done;
	int src;                   /* region read, or -1 */
	uint32_t src_off;
	uint32_t id;
	bool durable_ok;           /* commit: "durable" is a possible answer */
};

/* A local Read or Commit the QP sent (or will send) to the peer. */
struct orq {
	bool commit;
	uint32_t sink_lkey;
	uint64_t sink_addr;
	uint32_t len, done;
	uint32_t id;
};

struct fz {
	struct fz_in in;
	/* provider objects */
	uint64_t rng;
	unsigned fail_allocs;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qpub;
	struct soft_qp *qp;
	struct rpcrdma_mw *mw;
	struct region reg[NREG];
	bool crc, commit;
	uint32_t win_stag;
	uint64_t win_to;
	uint32_t win_lo, win_hi;   /* union of every range the window had */
	bool par_frozen;
	uint8_t par_snap[1024];
	uint32_t sink_lo, sink_hi; /* union of local Read sinks in R_SINK */
	uint32_t dead_stag;
	uint64_t dead_to;
	bool dur_frozen;           /* durable MR deregistered: file is fixed */
	uint8_t dur_snap[FILE_LEN];
	size_t dur_snap_len;
	uint64_t file_size;
	bool was_error;
	/* the peer */
	int pfd;
	bool crc_peer;
	uint32_t msn[RR_QN_COUNT];
	uint8_t *out;
	size_t out_len, out_off;
	bool dirty;                /* raw or corrupted bytes were sent */
	struct rr_ddp_rx prx;      /* parses what the QP sends */
	bool prx_dead, peer_term;
	struct expect exp[MAXQ];
	unsigned nexp;
	struct orq orq[MAXQ];
	unsigned norq;
	/* posted work */
	uint64_t recv_fifo[NSLOTS];
	unsigned recv_head, recv_count;
	bool slot_busy[NSLOTS];
	uint64_t send_ids[MAXQ];
	unsigned nsend;
	uint64_t next_wr;
};

/* One context for the process (a context per input would cost a thread
 * start and join each); its STag table is made afresh for every input, so
 * that STags and Tagged Offsets depend on the input alone. */
static struct rpcrdma_env g_env;
static struct rpcrdma_context *g_ctx;
static struct soft_ctx *g_sctx;
static uint8_t pattern[65536];
static uint8_t scratch[65536 + 4096];
static struct iovec scratch_iov = {scratch, sizeof(scratch)};
static int dur_fd = -1;
static uint8_t *dur_map;

/* ---- environment: deterministic randomness, injectable allocation failure ---- */

/* Large blocks (a QP's queues and staging buffer, a CQ's ring: a few
 * hundred KiB per input) are kept for the next input instead of being
 * unmapped and faulted in again (a quarter of the time per input went
 * there); poisoned while kept, so a use after free is still seen. */
#define BIG_BLOCK 16384u
#define NCACHE 16

static struct {
	void *p;
	size_t n;
} cache[NCACHE];

static void *fz_alloc(void *ctx, size_t n)
{
	struct fz *z = ctx;
	uint8_t *b;

	if (z->fail_allocs) {
		z->fail_allocs--;
		return NULL;
	}
	if (n >= BIG_BLOCK)
		for (int i = 0; i < NCACHE; i++)
			if (cache[i].p && cache[i].n == n) {
				void *p = cache[i].p;

				cache[i].p = NULL;
				FZ_UNPOISON(p, n);
				memset(p, 0xbe, 4096);   /* not zero, as ASan's malloc */
				return p;
			}
	b = malloc(n + sizeof(size_t));
	if (!b)
		return NULL;
	memcpy(b, &n, sizeof(n));
	return b + sizeof(size_t);
}

static void fz_free(void *ctx, void *p)
{
	size_t n;

	(void)ctx;
	if (!p)
		return;
	memcpy(&n, (uint8_t *)p - sizeof(size_t), sizeof(n));
	if (n >= BIG_BLOCK)
		for (int i = 0; i < NCACHE; i++)
			if (!cache[i].p) {
				cache[i].p = p;
				cache[i].n = n;
				FZ_POISON(p, n);
				return;
			}
	free((uint8_t *)p - sizeof(size_t));
}

static void fz_random(void *ctx, void *buf, size_t len)
{
	struct fz *z = ctx;
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++) {
		uint64_t x = (z->rng += 0x9e3779b97f4a7c15ull);

		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		b[i] = (uint8_t)(x ^ (x >> 31));
	}
}

/* ---- regions ---- */

static void fill_slow(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* fill(p, n, seed) is ring7 from index 183 * seed (183 = 1/7 mod 256):
 * compared with memcmp, not a byte loop (the checks run after every
 * operation, and every compare of a loop is instrumented) */
static uint8_t ring7[256 + FILE_LEN];
static uint8_t guard_bytes[GUARD];

FZ_MODEL static bool same_fill(const uint8_t *p, size_t n, uint8_t seed)
{
	return n <= FILE_LEN && memcmp(p, ring7 + (183u * seed & 255u), n) == 0;
}

/* p[i] = seed + 7 i, for n <= FILE_LEN */
static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	memcpy(p, ring7 + (183u * seed & 255u), n);
}

FZ_MODEL static bool guards_ok(const struct region *r)
{
	return !memcmp(r->alloc, guard_bytes, GUARD) && !memcmp(r->p + r->len, guard_bytes, GUARD);
}

static int reg_alloc(struct fz *z, int i, uint32_t access)
{
	struct region *r = &z->reg[i];
	struct rpcrdma_mr_attr a = {.access = access};

	r->len = reg_len[i];
	if (i == R_DUR) {
		r->p = dur_map;
		a.flags = RPCRDMA_MR_DURABLE;
		a.durable_fd = dur_fd;
		a.durable_offset = 0;
	} else {
		r->alloc = malloc(r->len + 2 * GUARD);
		if (!r->alloc)
			return -ENOMEM;
		r->p = r->alloc + GUARD;
		memset(r->alloc, GUARD_BYTE, GUARD);
		memset(r->p + r->len, GUARD_BYTE, GUARD);
		fill(r->p, r->len, (uint8_t)(i * 31));
		if (i == R_RECV)
			for (unsigned s = 0; s < NSLOTS; s++)
				memset(r->p + s * (SLOT_LEN + GUARD) + SLOT_LEN, GUARD_BYTE, GUARD);
	}
	a.addr = r->p;
	a.length = r->len;
	if (rpcrdma_reg_mr(z->pd, &a, &r->mr)) {
		free(r->alloc);
		r->alloc = NULL;
		return -ENOMEM;
	}
	r->stag = rpcrdma_mr_rkey(r->mr);
	r->to = rpcrdma_mr_remote_offset(r->mr);
	return 0;
}

static void file_read(uint8_t *buf, size_t *len)
{
	ssize_t n = pread(dur_fd, buf, FILE_LEN, 0);

	*len = n > 0 ? (size_t)n : 0;
}

/* Deregisters region @i; once that returned the memory is gone (freed, or
 * for the durable region poisoned and its file fixed). */
static void reg_dead(struct fz *z, int i)
{
	struct region *r = &z->reg[i];

	if (!r->mr)
		return;
	if (rpcrdma_dereg_mr(r->mr) != 0)
		return;   /* -EBUSY: a window is bound through it */
	r->mr = NULL;
	z->dead_stag = r->stag;
	z->dead_to = r->to;
	if (i == R_DUR) {
		FZ_POISON(dur_map, FILE_LEN);
		z->dur_frozen = true;
		file_read(z->dur_snap, &z->dur_snap_len);
		return;
	}
	if (!guards_ok(r))
		FAIL("guard bytes of region %d overwritten", i);
	free(r->alloc);
	r->alloc = NULL;
}

/* A target of a tagged access chosen by @sel: STag and Tagged Offset. */
static int target(struct fz *z, uint8_t sel, uint16_t off, uint32_t *stag, uint64_t *to)
{
	static const int map[6] = {R_RW, R_RO, -1, R_PARENT, R_DUR, R_SINK};
	unsigned k = sel % 8;
	int reg = -1;

	if (k < 6 && map[k] >= 0) {
		reg = map[k];
		*stag = z->reg[reg].stag;
		*to = z->reg[reg].to;
	} else if (k == 2) {
		*stag = z->win_stag;
		*to = z->win_to;
	} else if (k == 6) {
		*stag = z->dead_stag;
		*to = z->dead_to;
	} else {
		*stag = fz_u32(&z->in);
		*to = 0;
	}
	if (reg < 0)   /* a stale or raw STag may still name a live region */
		for (int i = 0; i < NREG; i++)
			if (z->reg[i].mr && z->reg[i].stag == *stag)
				reg = i;
	if (!(sel & 0x10))
		off &= 0x3ff;
	*to += off;
	if (sel & 0x08)
		*to -= 0x8000;
	return reg;
}

/* ---- the peer's FPDUs ---- */

static void out_put(struct fz *z, const void *p, size_t n)
{
	if (z->out_len + n > OUT_MAX) {
		z->dirty = true;   /* what the peer sends is no longer known */
		return;
	}
	memcpy(z->out + z->out_len, p, n);
	z->out_len += n;
}

static void emit(struct fz *z, struct rr_ddp_txmsg *m, size_t fpdu)
{
	struct rr_fpdu f;

	if (fpdu < RR_FPDU_MIN)
		fpdu = RR_FPDU_MIN;
	while (rr_ddp_tx_next(m, z->crc_peer, fpdu, &f) == 1) {
		for (unsigned i = 0; i < f.iovcnt; i++)
			out_put(z, f.iov[i].iov_base, f.iov[i].iov_len);
		if (f.last)
			break;
	}
}

static void emit_untagged(struct fz *z, uint8_t op, uint32_t qn, uint32_t inv, const void *body,
			  size_t len, size_t fpdu)
{
	struct rr_ddp_txmsg m;
	struct iovec v = {(void *)body, len};

	if (rr_ddp_txmsg_untagged(&m, op, qn, z->msn[qn]++, inv, &v, len ? 1 : 0) == 0)
		emit(z, &m, fpdu);
}

static void emit_tagged(struct fz *z, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
			size_t fpdu)
{
	struct rr_ddp_txmsg m;
	struct iovec v = {pattern, len};

	if (rr_ddp_txmsg_tagged(&m, op, stag, to, &v, len ? 1 : 0) == 0)
		emit(z, &m, fpdu);
}

static void expect_add(struct fz *z, const struct expect *e)
{
	if (z->nexp < MAXQ)
		z->exp[z->nexp++] = *e;
	else
		z->dirty = true;   /* no longer tracked exactly */
}

/* ---- driving the QP ---- */

static void qp_rx(struct fz *z)
{
	rr_lock(&z->qp->rx_lock);
	rr_soft_qp_rx(z->qp);
	rr_unlock(&z->qp->rx_lock);
}

static void qp_tx(struct fz *z)
{
	rr_lock(&z->qp->tx_lock);
	rr_soft_qp_tx_locked(z->qp);
	rr_unlock(&z->qp->tx_lock);
}

/* Writes up to @n bytes (0: all) of what the peer built, then lets the QP
 * receive. */
static void push(struct fz *z, size_t n)
{
	size_t want = z->out_len - z->out_off;
	bool retried = false;

	if (n == 0 || n > want)
		n = want;
	while (n) {
		ssize_t w = send(z->pfd, z->out + z->out_off, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0) {
			z->out_off += (size_t)w;
			n -= (size_t)w;
			retried = false;
			continue;
		}
		if (w < 0 && errno == EAGAIN && !retried) {
			retried = true;
			qp_rx(z);   /* the QP drains its socket */
			continue;
		}
		break;
	}
	if (z->out_off == z->out_len)
		z->out_off = z->out_len = 0;
	qp_rx(z);
}

/* ---- what the QP sends, seen by the peer ---- */

static enum rr_rx_code p_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
				bool last, uint8_t **dst)
{
	struct fz *z = ctx;
	uint64_t off = 0;

	(void)last;
	if (op == RR_OP_WRITE) {   /* a local RDMA Write: any place of ours */
		*dst = scratch;
		return RR_RXC_OK;
	}
	if (!z->dirty) {
		struct expect *e = z->nexp ? &z->exp[0] : NULL;

		if (!e || e->commit)
			FAIL("Read Response without a Read Request");
		if (stag != e->sink_stag || to != e->sink_to + e->done)
			FAIL("Read Response to the wrong sink");
		if ((uint64_t)e->done + len > e->size)
			FAIL("Read Response longer than the request");
		off = e->done;
	}
	if (off + len > sizeof(scratch))
		off = 0;
	*dst = scratch + off;
	return RR_RXC_OK;
}

static enum rr_rx_code p_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				  const struct iovec **iov, unsigned *iovcnt)
{
	(void)ctx, (void)msn, (void)mo, (void)len, (void)last;
	*iov = &scratch_iov;
	*iovcnt = 1;
	return RR_RXC_OK;
}

static const struct rr_ddp_rx_ops peer_ops = {.tagged = p_tagged, .untagged = p_untagged};

static void expect_pop(struct fz *z)
{
	memmove(&z->exp[0], &z->exp[1], sizeof(z->exp[0]) * --z->nexp);
}

static void peer_event(struct fz *z, const struct rr_ddp_event *ev)
{
	struct expect *e = z->nexp ? &z->exp[0] : NULL;

	switch (ev->type) {
	case RR_EV_TAGGED:
		if (z->dirty || !e || ev->op != RR_OP_READ_RESP)
			break;
		e->done += ev->len;
		if (!ev->last)
			break;
		if (e->done != e->size)
			FAIL("Read Response of %u bytes for a request of %u", e->done, e->size);
		if (e->src == R_RO && e->size &&
		    ((uint64_t)e->src_off + e->size > reg_len[R_RO] ||
		     !same_fill(scratch, e->size, (uint8_t)(R_RO * 31 + e->src_off * 7))))
			FAIL("Read Response carries bytes that are not the region's");
		expect_pop(z);
		break;
	case RR_EV_COMMIT_RESP:
		if (z->dirty)
			break;
		if (!e || !e->commit || e->id != ev->u.cresp.id)
			FAIL("Commit Response without its request");
		if (ev->u.cresp.status == SOFT_COMMIT_OK && !e->durable_ok)
			FAIL("Commit answered durable for memory that is not");
		if (ev->u.cresp.status > SOFT_COMMIT_PAST_EOF)
			FAIL("Commit status %u", ev->u.cresp.status);
		expect_pop(z);
		break;
	case RR_EV_TERMINATE:
		z->peer_term = true;
		break;
	default:
		break;
	}
}

static void peer_read(struct fz *z)
{
	uint8_t buf[16384];

	for (;;) {
		ssize_t n = recv(z->pfd, buf, sizeof(buf), MSG_DONTWAIT);
		size_t off = 0;

		if (n <= 0)
			return;
		if (z->peer_term)
			FAIL("the QP sent bytes after its Terminate");
		while (off < (size_t)n && !z->prx_dead) {
			struct rr_ddp_event ev;
			size_t used = 0;
			int r = rr_ddp_rx_feed(&z->prx, buf + off, (size_t)n - off, &used, &ev);

			off += used;
			if (r == 1) {
				peer_event(z, &ev);
			} else if (r == -ECONNRESET) {
				z->prx_dead = true;   /* a Terminate */
				if (off < (size_t)n)
					FAIL("the QP sent bytes after its Terminate");
			} else if (r < 0 && z->prx.term_valid && z->prx.term.layer == RR_TL_LLP &&
				   z->prx.term.ecode == RR_LLP_EC_CRC) {
				/* memory changed under an FPDU after its CRC was
				 * computed (a Write into a region being read; not
				 * durable memory, which is sent from a copy): the
				 * peer terminates; not a framing error */
				z->prx_dead = true;
			} else if (r < 0) {
				FAIL("the QP sent a malformed stream (%d: %s)", r,
				     z->prx.term_valid ? rr_rdmap_term_str(&z->prx.term) : "-");
			}
		}
	}
}

/* ---- completions ---- */

static void check_wc(struct fz *z, const struct rpcrdma_wc *wc)
{
	if (wc->opcode == RPCRDMA_WC_RECV) {
		unsigned slot;

		if (!z->recv_count || wc->wr_id != z->recv_fifo[z->recv_head])
			FAIL("Receive completion out of order");
		slot = (unsigned)(wc->wr_id & 0xff);
		z->slot_busy[slot] = false;
		z->recv_head = (z->recv_head + 1) % NSLOTS;
		z->recv_count--;
		if (wc->status == RPCRDMA_WC_SUCCESS) {
			if (wc->byte_len > SLOT_LEN)
				FAIL("Receive of %u bytes into %u", wc->byte_len, SLOT_LEN);
			if ((wc->flags & RPCRDMA_WC_WITH_INV) &&
			    rr_mrt_check(&z->qp->ctx->mrt, wc->invalidated_stag, 0, 0,
					 RPCRDMA_ACCESS_REMOTE_WRITE, &z->qp->pd->base, &z->qp->base,
					 NULL) == 0)
				FAIL("an STag reported invalidated is still valid");
		}
		return;
	}
	for (unsigned i = 0; i < z->nsend; i++)
		if (z->send_ids[i] == wc->wr_id) {
			z->send_ids[i] = z->send_ids[--z->nsend];
			return;
		}
	FAIL("completion for work never posted (wr_id %llu)", (unsigned long long)wc->wr_id);
}

static void drain_cq(struct fz *z, bool public_poll)
{
	struct rpcrdma_wc wc[16];
	struct soft_cq *q = RR_CONTAINER_OF(RR_BASE(cq, z->cq), struct soft_cq, base);
	int n;

	do {
		n = public_poll ? rpcrdma_cq_poll(z->cq, 16, wc) : rr_cq_ring_poll(&q->ring, 16, wc);
		for (int i = 0; i < n; i++)
			check_wc(z, &wc[i]);
		public_poll = false;
	} while (n > 0);
	if (n < 0)
		FAIL("CQ overrun");
}

/* ---- invariants ---- */

/* The window is invalid: from now on its parent does not change at all
 * (remote access only went through the window, and an invalidation cuts a
 * segment already being placed: not one more byte lands once it is
 * complete, as siw; issue 12, docs/fuzzing.md "Findings"). */
static void par_freeze(struct fz *z, const struct region *r)
{
	memcpy(z->par_snap, r->p, r->len);
	z->par_frozen = true;
}

/* The QP's Write cache (rx_tagged's rr_mrt_check_remote) answers as the
 * table (rr_mrt_check) in the state the input reached: for the STag it
 * holds, the window's and a dead one, at its region's edges and beyond,
 * both asked (through a copy: the QP's own cache is left as it is). */
FZ_MODEL static void check_wr_cache(struct fz *z)
{
	struct soft_qp *qp = z->qp;
	const uint32_t stags[] = {qp->wr_rc.stag, z->win_stag, z->dead_stag};
	const uint32_t needs[] = {RPCRDMA_ACCESS_REMOTE_WRITE, RPCRDMA_ACCESS_REMOTE_READ};

	if (!qp->wr_rc.gen)
		return;
	for (unsigned s = 0; s < 3; s++) {
		for (unsigned k = 0; k < 6; k++) {
			const uint64_t l = qp->wr_rc.r.length;
			const uint64_t tos[] = {0, 1, l / 2, l, l + 1, (uint64_t)0 - 1};
			uint64_t to = qp->wr_rc.r.base_to + tos[k];
			struct rr_mrt_rcache c = qp->wr_rc;
			struct rr_mrt_ref a, b;
			uint32_t need = needs[k & 1];
			uint64_t len = k < 3 ? l - tos[k] : 1;
			int ra = rr_mrt_check_remote(&qp->ctx->mrt, &c, stags[s], to, len, need,
						     &qp->pd->base, &qp->base, &a);
			int rb = rr_mrt_check(&qp->ctx->mrt, stags[s], to, len, need,
					      &qp->pd->base, &qp->base, &b);

			if (ra != rb || (!ra && (a.ptr != b.ptr || a.owner != b.owner ||
						 a.kind != b.kind || a.durable != b.durable ||
						 a.durable_offset != b.durable_offset)))
				FAIL("Write cache: %d, table: %d (STag %08x)", ra, rb, stags[s]);
		}
	}
}

FZ_MODEL static void check(struct fz *z)
{
	struct soft_qp *qp = z->qp;
	struct region *r;

	drain_cq(z, false);
	/* the QP */
	if (qp->state != QPS_RTS && qp->state != QPS_ERROR)
		FAIL("QP state %d", qp->state);
	if (z->was_error && qp->state != QPS_ERROR)
		FAIL("QP left the error state");
	z->was_error = qp->state == QPS_ERROR;
	if (qp->irq_count > qp->ird || qp->irq_sent > qp->irq_count || qp->orq_out > qp->ord ||
	    qp->sq_count > qp->sq_cap || qp->sq_next > qp->sq_count || qp->rq_count > qp->rq_cap ||
	    qp->stage_off > qp->stage_len || qp->stage_len > SOFT_STAGE || qp->bpos > qp->bcnt ||
	    qp->bcnt > SOFT_BATCH_IOV)
		FAIL("QP queues inconsistent");
	if (qp->rq_count != z->recv_count && qp->state == QPS_RTS)
		FAIL("Receives posted %u, QP holds %u", z->recv_count, qp->rq_count);
	/* memory */
	for (int i = 0; i < NREG; i++) {
		r = &z->reg[i];
		if (r->alloc && !guards_ok(r))
			FAIL("guard bytes of region %d overwritten", i);
	}
	r = &z->reg[R_RECV];
	for (unsigned s = 0; s < NSLOTS; s++)
		if (memcmp(r->p + s * (SLOT_LEN + GUARD) + SLOT_LEN, guard_bytes, GUARD))
			FAIL("a Receive wrote past its buffer");
	if (z->reg[R_RO].mr && !same_fill(z->reg[R_RO].p, reg_len[R_RO], (uint8_t)(R_RO * 31)))
		FAIL("remote-read-only memory changed");
	r = &z->reg[R_PARENT];
	if (r->mr) {
		bool valid = z->mw && rr_mrt_check(&qp->ctx->mrt, z->win_stag, z->win_to, 0,
						   RPCRDMA_ACCESS_REMOTE_WRITE, &qp->pd->base,
						   &qp->base, NULL) == 0;

		if (!same_fill(r->p, z->win_lo, (uint8_t)(R_PARENT * 31)) ||
		    !same_fill(r->p + z->win_hi, r->len - z->win_hi,
			       (uint8_t)(R_PARENT * 31 + z->win_hi * 7)))
			FAIL("window's parent changed outside the window");
		if (!valid && !z->par_frozen) {
			par_freeze(z, r);
		} else if (valid) {
			z->par_frozen = false;
		} else if (memcmp(z->par_snap, r->p, r->len)) {
			FAIL("placed through an invalidated window");
		}
	}
	check_wr_cache(z);
	r = &z->reg[R_SINK];
	if (r->mr && (!same_fill(r->p, z->sink_lo, (uint8_t)(R_SINK * 31)) ||
		      !same_fill(r->p + z->sink_hi, r->len - z->sink_hi,
				 (uint8_t)(R_SINK * 31 + z->sink_hi * 7))))
		FAIL("Read sink changed outside the Reads' sinks");
	{
		uint8_t buf[FILE_LEN];
		size_t n;

		file_read(buf, &n);
		if (z->dur_frozen && (n != z->dur_snap_len || memcmp(buf, z->dur_snap, n)))
			FAIL("durable file written after its deregistration");
		if (n > DUR_LEN && !same_fill(buf + DUR_LEN, n - DUR_LEN,
					      (uint8_t)(R_DUR * 31 + DUR_LEN * 7)))
			FAIL("durable file written outside its registration");
	}
}

/* ---- operations ---- */

static uint64_t wr_id(struct fz *z)
{
	return ++z->next_wr << 8;
}

static int post_send(struct fz *z, struct rpcrdma_send_wr *wr)
{
	int rc;

	if (z->nsend >= MAXQ)
		return -ENOSPC;
	wr->wr_id = wr_id(z);
	wr->flags |= RPCRDMA_SEND_SIGNALED;
	rc = rpcrdma_post_send(z->qpub, wr, NULL);
	if (rc == 0)
		z->send_ids[z->nsend++] = wr->wr_id;
	return rc;
}

static void post_recv(struct fz *z, unsigned n)
{
	struct region *r = &z->reg[R_RECV];

	for (unsigned k = 0; k < n && r->mr && z->recv_count < NSLOTS; k++) {
		unsigned s = (z->recv_head + z->recv_count) % NSLOTS;
		struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)(r->p + s * (SLOT_LEN + GUARD)),
					  SLOT_LEN, rpcrdma_mr_lkey(r->mr)};
		struct rpcrdma_recv_wr wr = {.sg_list = &sge, .num_sge = 1};

		if (z->slot_busy[s])
			break;
		wr.wr_id = wr_id(z) | s;
		if (rpcrdma_post_recv(z->qpub, &wr, NULL) != 0)
			break;
		z->slot_busy[s] = true;
		z->recv_fifo[s] = wr.wr_id;
		z->recv_count++;
	}
}

static void op_write(struct fz *z)
{
	uint8_t sel = fz_u8(&z->in);
	uint16_t off = fz_u16(&z->in);
	uint32_t len = fz_u16(&z->in), stag;
	uint8_t seg = fz_u8(&z->in);
	uint64_t to;

	if (!(sel & 0x20))
		len %= 600;
	target(z, sel, off, &stag, &to);
	emit_tagged(z, RR_OP_WRITE, stag, to, len, 64u + seg * 16u);
}

static void op_send(struct fz *z)
{
	static const uint8_t ops[4] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE, RR_OP_SEND_SE_INV};
	uint8_t k = fz_u8(&z->in), isel = fz_u8(&z->in);
	uint32_t len = fz_u16(&z->in) % 300, inv = 0;
	uint64_t to;

	if (k & 1)
		target(z, isel, 0, &inv, &to);
	emit_untagged(z, ops[k % 4], RR_QN_SEND, inv, pattern, len, 64u + (k >> 2) * 16u);
}

static void op_read_req(struct fz *z)
{
	uint8_t sel = fz_u8(&z->in);
	uint16_t off = fz_u16(&z->in);
	uint32_t size = fz_u16(&z->in);
	uint16_t sto = fz_u16(&z->in);
	struct expect e = {0};
	struct rr_rreq rq;
	uint8_t body[RR_RREQ_BODY];

	if (!(sel & 0x20))
		size %= 700;
	e.src = target(z, sel, off, &rq.src_stag, &rq.src_to);
	rq.sink_stag = 0x51510000u | sel;
	rq.sink_to = sto;
	rq.size = size;
	rr_rdmap_rreq_encode(&rq, body);
	emit_untagged(z, RR_OP_READ_REQ, RR_QN_READ, 0, body, sizeof(body), 1460);
	e.sink_stag = rq.sink_stag;
	e.sink_to = rq.sink_to;
	e.size = size;
	e.src_off = e.src >= 0 ? (uint32_t)(rq.src_to - z->reg[e.src].to) : 0;
	expect_add(z, &e);
}

static void op_read_resp(struct fz *z)
{
	uint32_t n = fz_u16(&z->in) % 512;
	uint8_t adj = fz_u8(&z->in), seg = fz_u8(&z->in);
	struct orq *o = z->norq ? &z->orq[0] : NULL;
	uint32_t stag = z->reg[R_SINK].stag;
	uint64_t to = (uint64_t)(uintptr_t)z->reg[R_SINK].p;

	if (o && !o->commit) {
		stag = o->sink_lkey;
		to = o->sink_addr + o->done;
		if (n == 0 || n > o->len - o->done)
			n = o->len - o->done;
		o->done += n;
		if (o->done >= o->len) {
			memmove(&z->orq[0], &z->orq[1], sizeof(z->orq[0]) * --z->norq);
		}
	}
	if (adj & 0x80)
		to += (int8_t)(adj << 1);
	emit_tagged(z, RR_OP_READ_RESP, stag, to, n, 64u + seg * 16u);
}

static void op_term(struct fz *z)
{
	struct rr_term t;
	uint8_t b[RR_TERM_FPDU_MAX];
	size_t n;

	memset(&t, 0, sizeof(t));
	t.layer = fz_u8(&z->in) % 3;
	t.etype = fz_u8(&z->in) % 3;
	t.ecode = fz_u8(&z->in);
	n = rr_ddp_build_terminate(&t, z->msn[RR_QN_TERM]++, z->crc_peer, b);
	out_put(z, b, n);
}

static void op_commit_req(struct fz *z)
{
	struct rr_commit_req c;
	struct expect e = {.commit = true, .src = -1, .durable_ok = true};
	uint8_t body[RR_RX_BODY_MAX];
	int n;

	c.nregions = 1 + fz_u8(&z->in) % 4;
	c.id = fz_u8(&z->in);
	for (unsigned i = 0; i < c.nregions; i++) {
		uint8_t sel = fz_u8(&z->in);
		uint16_t off = fz_u16(&z->in);
		int reg = target(z, sel, off, &c.region[i].stag, &c.region[i].to);

		c.region[i].len = fz_u16(&z->in) % 9000;
		if (c.region[i].len && reg == R_DUR) {
			uint64_t fo = c.region[i].to - z->reg[R_DUR].to;

			if (fo > z->file_size || c.region[i].len > z->file_size - fo)
				e.durable_ok = false;
		} else if (c.region[i].len) {
			e.durable_ok = false;
		}
	}
	n = rr_rdmap_commit_req_encode(&c, body, sizeof(body));
	if (n < 0)
		return;
	emit_untagged(z, RR_OP_COMMIT_REQ, RR_QN_READ, 0, body, (size_t)n, 1460);
	e.id = c.id;
	expect_add(z, &e);
}

static void op_commit_resp(struct fz *z)
{
	struct rr_commit_resp r = {.status = fz_u8(&z->in) % 5};
	uint8_t adj = fz_u8(&z->in);
	uint8_t body[RR_COMMIT_RESP_BODY];
	struct orq *o = z->norq ? &z->orq[0] : NULL;

	if (o && o->commit) {
		r.id = o->id;
		memmove(&z->orq[0], &z->orq[1], sizeof(z->orq[0]) * --z->norq);
	}
	r.id += adj & 1;
	rr_rdmap_commit_resp_encode(&r, body);
	emit_untagged(z, RR_OP_COMMIT_RESP, RR_QN_RESP, 0, body, sizeof(body), 1460);
}

static void op_raw(struct fz *z)
{
	size_t n;
	const uint8_t *b = fz_bytes(&z->in, fz_u8(&z->in), &n);

	out_put(z, b, n);
	z->dirty = true;
}

static void op_corrupt(struct fz *z)
{
	uint16_t pos = fz_u16(&z->in);
	uint8_t x = fz_u8(&z->in);
	size_t pend = z->out_len - z->out_off;

	if (!pend)
		return;
	z->out[z->out_off + pos % pend] ^= (uint8_t)(x | 1);
	z->dirty = true;
}

static void op_dereg(struct fz *z)
{
	static const int which[5] = {R_RW, R_RO, R_PARENT, R_SINK, R_DUR};

	reg_dead(z, which[fz_u8(&z->in) % 5]);
}

static void op_local_inv(struct fz *z)
{
	struct rpcrdma_send_wr wr = {.opcode = RPCRDMA_WR_LOCAL_INV};

	if (!z->mw)
		return;
	wr.u.local_inv.stag = z->win_stag;
	(void)post_send(z, &wr);
}

static void op_rebind(struct fz *z)
{
	uint32_t off = fz_u8(&z->in) * 4u, len = fz_u8(&z->in) * 4u;
	uint8_t acc = fz_u8(&z->in);
	struct rpcrdma_send_wr wr = {.opcode = RPCRDMA_WR_BIND_MW};
	struct region *par = &z->reg[R_PARENT];

	if (!z->mw || !par->mr)
		return;
	wr.u.bind.mw = z->mw;
	wr.u.bind.mr = par->mr;
	wr.u.bind.addr = (uint64_t)(uintptr_t)par->p + off;
	wr.u.bind.length = len;
	wr.u.bind.access = (acc & 1 ? RPCRDMA_ACCESS_REMOTE_READ : 0) |
			   (acc & 2 ? RPCRDMA_ACCESS_REMOTE_WRITE : 0);
	if (post_send(z, &wr) == 0 && rpcrdma_mw_rkey(z->mw) != z->win_stag) {
		z->win_stag = rpcrdma_mw_rkey(z->mw);
		z->win_to = rpcrdma_mw_remote_offset(z->mw);
		if (off + len <= par->len && len) {
			z->win_lo = RR_MIN(z->win_lo, off);
			z->win_hi = RR_MAX(z->win_hi, off + len);
		}
	}
}

static void op_truncate(struct fz *z)
{
	uint64_t n = fz_u16(&z->in) % (FILE_LEN + 1);

	if (n < z->file_size && !z->dur_frozen && ftruncate(dur_fd, (off_t)n) == 0)
		z->file_size = n;
}

static void op_post_read(struct fz *z)
{
	static const int sinks[3] = {R_SINK, R_DUR, R_RW};
	uint8_t sel = fz_u8(&z->in), size = fz_u8(&z->in), soff = fz_u8(&z->in);
	uint16_t sto = fz_u16(&z->in);
	int si = sinks[sel % 3];
	struct region *r = &z->reg[si];
	struct rpcrdma_sge sge;
	struct rpcrdma_send_wr wr = {.opcode = RPCRDMA_WR_RDMA_READ, .sg_list = &sge, .num_sge = 1};
	uint32_t lkey = r->mr ? rpcrdma_mr_lkey(r->mr) : r->stag;

	if (!(sel & 0x80) && (uint32_t)soff + size > r->len)
		size = (uint8_t)(r->len - soff);
	sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)r->p + soff, size, lkey};
	wr.u.rdma.stag = 0x70000000u | (sel >> 2);
	wr.u.rdma.remote_offset = sto;
	if (si == R_SINK) {
		/* the bytes this Read may place (even when refused later) */
		z->sink_lo = RR_MIN(z->sink_lo, soff);
		z->sink_hi = RR_MAX(z->sink_hi, RR_MIN((uint32_t)soff + size, r->len));
	}
	if (post_send(z, &wr) == 0 && z->norq < MAXQ)
		z->orq[z->norq++] = (struct orq){.sink_lkey = lkey,
						 .sink_addr = (uint64_t)(uintptr_t)r->p + soff,
						 .len = size};
}

static void op_post_commit(struct fz *z)
{
	struct rpcrdma_remote_region rg[3];
	struct rpcrdma_send_wr wr = {.opcode = RPCRDMA_WR_RDMA_COMMIT};
	unsigned n = 1 + fz_u8(&z->in) % 3;

	for (unsigned i = 0; i < n; i++) {
		rg[i].stag = 0x70000000u | fz_u8(&z->in);
		rg[i].length = fz_u16(&z->in);
		rg[i].offset = fz_u16(&z->in);
	}
	wr.u.commit.regions = rg;
	wr.u.commit.num_regions = n;
	if (post_send(z, &wr) == 0 && z->norq < MAXQ)
		z->orq[z->norq++] = (struct orq){.commit = true, .id = z->qp->next_commit_id};
}

static void op_post_send(struct fz *z, bool write)
{
	uint8_t off = fz_u8(&z->in), k = fz_u8(&z->in);
	uint32_t len = fz_u16(&z->in) % 320;
	struct region *r = &z->reg[R_RW];
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)r->p + off * 2u, len,
				  r->mr ? rpcrdma_mr_lkey(r->mr) : r->stag};
	struct rpcrdma_send_wr wr = {.sg_list = &sge, .num_sge = 1};

	if ((k & 4) && (!r->mr || off * 2u + len > r->len))
		return;   /* an inline copy reads the memory at post time, unchecked */
	if (write) {
		wr.opcode = RPCRDMA_WR_RDMA_WRITE;
		wr.u.rdma.stag = 0x70000000u | (k >> 4);
		wr.u.rdma.remote_offset = off;
	} else {
		wr.opcode = (k & 1) ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
		wr.u.send.invalidate_stag = 0x70000000u | (k >> 4);
	}
	wr.flags = (k & 2 ? RPCRDMA_SEND_SOLICITED : 0) | (k & 4 ? RPCRDMA_SEND_INLINE : 0) |
		   (k & 8 ? RPCRDMA_SEND_FENCE : 0);
	(void)post_send(z, &wr);
}

static void run_op(struct fz *z, uint8_t op)
{
	switch (op % 26) {
	case 0: op_write(z); break;
	case 1: op_send(z); break;
	case 2: op_read_req(z); break;
	case 3: op_read_resp(z); break;
	case 4: op_term(z); break;
	case 5: op_commit_req(z); break;
	case 6: op_commit_resp(z); break;
	case 7: op_raw(z); break;
	case 8: op_corrupt(z); break;
	case 9: push(z, fz_u16(&z->in)); break;
	case 10: qp_rx(z); break;
	case 11: qp_tx(z); break;
	case 12: peer_read(z); break;
	case 13: op_dereg(z); break;
	case 14: op_local_inv(z); break;
	case 15: op_rebind(z); break;
	case 16: op_truncate(z); break;
	case 17: op_post_read(z); break;
	case 18: op_post_commit(z); break;
	case 19: op_post_send(z, false); break;
	case 20: op_post_send(z, true); break;
	case 21: post_recv(z, 1 + fz_u8(&z->in) % 4); break;
	case 22: drain_cq(z, true); break;
	case 23: z->fail_allocs = fz_u8(&z->in) % 4; break;
	case 24: (void)rpcrdma_qp_set_commit(z->qpub, fz_u8(&z->in) & 1); break;
	default: shutdown(z->pfd, SHUT_WR); break;
	}
}

/* ---- setup and teardown ---- */

static void once(struct fz *z)
{
	char path[] = "/dev/shm/fuzz_soft_rx.XXXXXX";
	char alt[] = "/tmp/fuzz_soft_rx.XXXXXX";

	fill_slow(pattern, sizeof(pattern), 0x40);
	fill_slow(ring7, sizeof(ring7), 0);
	memset(guard_bytes, GUARD_BYTE, GUARD);
	dur_fd = mkstemp(path);
	if (dur_fd < 0) {
		dur_fd = mkstemp(alt);
		if (dur_fd >= 0)
			unlink(alt);
	} else {
		unlink(path);
	}
	if (dur_fd < 0 || ftruncate(dur_fd, FILE_LEN) != 0)
		FAIL("no temporary file");
	dur_map = mmap(NULL, FILE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, dur_fd, 0);
	if (dur_map == MAP_FAILED)
		FAIL("mmap");
	g_env = *rpcrdma_env_default();
	g_env.alloc = fz_alloc;
	g_env.free = fz_free;
	g_env.alloc_ctx = z;
	g_env.random = fz_random;
	g_env.random_ctx = z;
	{
		struct rpcrdma_open_attr oa = {.env = &g_env};

		if (rpcrdma_open("soft", &oa, &g_ctx))
			FAIL("no soft context");
	}
	g_sctx = RR_CONTAINER_OF(RR_BASE(context, g_ctx), struct soft_ctx, base);
}

static int setup(struct fz *z)
{
	struct rpcrdma_cq_attr ca = {.cqe = 256};
	struct rpcrdma_qp_attr qa = {.max_send_wr = 32, .max_recv_wr = NSLOTS, .max_send_sge = 2,
				     .max_recv_sge = 1, .max_inline = 512};
	struct rr_mpa_conn conn = {.rev = 2, .enhanced = true};
	uint8_t flags = fz_u8(&z->in), fpdu = fz_u8(&z->in), nrecv = fz_u8(&z->in);
	uint8_t fbuf[FILE_LEN];
	int sv[2];

	z->rng = fz_u8(&z->in);
	/* a fresh STag table (every registration of the last input is gone) */
	if (rr_mrt_live(&g_sctx->mrt) != 0)
		FAIL("registrations left by the last input");
	rr_mrt_fini(&g_sctx->mrt);
	if (rr_mrt_init(&g_sctx->mrt, &g_env, 16))
		FAIL("STag table");
	z->crc = z->crc_peer = flags & 1;
	z->commit = flags & 2;
	conn.crc = z->crc;
	conn.ird = (uint16_t)(1u << ((flags >> 3) & 3));
	conn.ord = (uint16_t)(1u << ((flags >> 5) & 3));
	/* the durable file as every input starts */
	fill(fbuf, sizeof(fbuf), (uint8_t)(R_DUR * 31));
	if (ftruncate(dur_fd, FILE_LEN) != 0 || pwrite(dur_fd, fbuf, FILE_LEN, 0) != FILE_LEN)
		FAIL("durable file");
	z->file_size = FILE_LEN;
	if (rpcrdma_pd_alloc(g_ctx, &z->pd) || rpcrdma_cq_create(g_ctx, &ca, &z->cq))
		return -1;
	qa.send_cq = qa.recv_cq = z->cq;
	if (rpcrdma_qp_create(z->pd, &qa, &z->qpub))
		return -1;
	z->qp = RR_CONTAINER_OF(RR_BASE(qp, z->qpub), struct soft_qp, base);
	if (reg_alloc(z, R_RW, RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE |
				       RPCRDMA_ACCESS_REMOTE_READ) ||
	    reg_alloc(z, R_RO, RPCRDMA_ACCESS_REMOTE_READ) ||
	    reg_alloc(z, R_PARENT, RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND) ||
	    reg_alloc(z, R_SINK, RPCRDMA_ACCESS_LOCAL_WRITE) ||
	    reg_alloc(z, R_DUR, RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE |
					RPCRDMA_ACCESS_REMOTE_READ) ||
	    reg_alloc(z, R_RECV, RPCRDMA_ACCESS_LOCAL_WRITE))
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	z->pfd = sv[1];
	if (flags & 4) {
		int small = 4096;

		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	}
	z->qp->fpdu_max = 64u + fpdu * 8u;
	if (rr_soft_qp_connected(z->qp, sv[0], &conn, z->commit, z->commit)) {
		close(sv[0]);
		return -1;
	}
	for (int q = 0; q < RR_QN_COUNT; q++)
		z->msn[q] = 1;
	rr_ddp_rx_init(&z->prx, &peer_ops, z, z->crc, true);
	/* the window over [WIN_LO, WIN_HI) of its parent, bound to this QP */
	z->win_lo = WIN_LO;
	z->win_hi = WIN_HI;
	z->sink_lo = reg_len[R_SINK];
	if (rpcrdma_mw_alloc(z->pd, &z->mw) == 0) {
		struct rpcrdma_send_wr wr = {.opcode = RPCRDMA_WR_BIND_MW};

		wr.u.bind.mw = z->mw;
		wr.u.bind.mr = z->reg[R_PARENT].mr;
		wr.u.bind.addr = (uint64_t)(uintptr_t)z->reg[R_PARENT].p + WIN_LO;
		wr.u.bind.length = WIN_HI - WIN_LO;
		wr.u.bind.access = RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_REMOTE_WRITE;
		if (post_send(z, &wr) == 0) {
			z->win_stag = rpcrdma_mw_rkey(z->mw);
			z->win_to = rpcrdma_mw_remote_offset(z->mw);
		}
	}
	post_recv(z, nrecv % (NSLOTS + 1));
	return 0;
}

static void teardown(struct fz *z)
{
	if (z->mw)
		(void)rpcrdma_mw_free(z->mw);
	for (int i = 0; i < NREG; i++) {
		if (z->reg[i].mr && i != R_DUR && !guards_ok(&z->reg[i]))
			FAIL("guard bytes of region %d overwritten", i);
		if (z->reg[i].mr && rpcrdma_dereg_mr(z->reg[i].mr) != 0)
			FAIL("deregistration failed at the end");
		free(z->reg[i].alloc);
	}
	FZ_UNPOISON(dur_map, FILE_LEN);
	if (z->qpub)
		rpcrdma_qp_destroy(z->qpub);
	if (z->cq)
		rpcrdma_cq_destroy(z->cq);
	if (z->pd)
		rpcrdma_pd_free(z->pd);
	if (atomic_load(&RR_BASE(context, g_ctx)->nobjs) != 0)
		FAIL("objects left in the context");
	if (z->pfd > 0)
		close(z->pfd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz z;
	static uint8_t out[OUT_MAX];

	if (dur_fd < 0)
		once(&z);
	memset(&z, 0, sizeof(z));
	z.in = (struct fz_in){data, size};
	z.out = out;
	z.pfd = -1;
	if (setup(&z) == 0) {
		check(&z);
		while (z.in.left) {
			run_op(&z, fz_u8(&z.in));
			check(&z);
		}
		push(&z, 0);
		qp_tx(&z);
		peer_read(&z);
		drain_cq(&z, true);
		check(&z);
	}
	z.fail_allocs = 0;
	teardown(&z);
	return 0;
}
