/* SPDX-License-Identifier: BSD-2-Clause */
/* The tagged-buffer rules of the soft provider, each seen from the wire by
 * more than one test (RFC 5040 section 5.1 / RFC 5041 section 7: every
 * tagged access names a valid STag of the stream's PD -- a window only on
 * the QP it is bound to --, holds the needed right, stays inside the
 * registration, and does not wrap the 64-bit Tagged Offset): for each rule
 * an access that just fits is let through (the bytes land or come back)
 * and one that breaks it by the smallest amount (one byte, one bit) is
 * refused with the Terminate RFC 5040 section 7 names for it, by RDMA
 * Write and by RDMA Read, on a long-lived MR and on a memory window, and
 * for Writes also when the access spans many DDP segments (each segment is
 * checked, not just the first byte). tests/rdma/test_mr_table.c checks the same
 * rules on the STag table directly; tests/soft/test_provider.c
 * (soft_violation_*) the Terminate in both layouts and the culprit's side.
 *
 * Each access is made by a fresh connection (a refusal ends it): a Write is
 * followed by a zero-length RDMA Read, which the target answers only after
 * it placed the Write, so the Read's completion tells whether the Write
 * went through (a Write's own completion is local). */
#include "test.h"

#include <stdlib.h>

#include "rdma/soft/rdmap.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define TGT_OFF (512u * 1024u)  /* the target region inside n->buf */
#define TGT_LEN 64u
#define BIG (256u * 1024u)      /* a multi-segment Write */
#define NET_BUF (1u << 20)

#define DDP_T(code) ((uint32_t)RR_TL_DDP << 16 | (uint32_t)RR_DDP_ET_TAGGED << 8 | (code))
#define RDMAP_P(code) ((uint32_t)RR_TL_RDMAP << 16 | (uint32_t)RR_RDMAP_ET_PROTECTION << 8 | (code))

/* The target of the accesses: a registration over n->buf + TGT_OFF on the
 * server side, an MR (@mw false) or a window bound on the server QP. */
struct tgt {
	struct rpcrdma_mr *mr;      /* the MR (parent of the window) */
	struct rpcrdma_mw *mw;
	uint32_t stag;
	uint64_t base;              /* local address (the bind's) */
	uint64_t to;                /* Tagged Offset of @base for the peer */
	uint64_t len;
};

/* The outcome of one access. */
struct res {
	int status;       /* of the decisive completion, or -ETIMEDOUT */
	uint32_t vend;    /* its vendor_err: the Terminate's layer/type/code */
};

static void tgt_make(struct net *n, struct tgt *t, uint64_t len, uint32_t access, bool mw,
		     struct rpcrdma_qp *bind_qp)
{
	memset(t, 0, sizeof(*t));
	t->base = (uintptr_t)n->buf + TGT_OFF;
	t->len = len;
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n->pd, n->buf + TGT_OFF, len,
					 RPCRDMA_ACCESS_LOCAL_WRITE | (mw ? RPCRDMA_ACCESS_MW_BIND
									  : access),
					 &t->mr), 0);
	t->stag = rpcrdma_mr_rkey(t->mr);
	t->to = rpcrdma_mr_remote_offset(t->mr);
	if (mw) {
		struct rpcrdma_send_wr b = {.wr_id = 77, .opcode = RPCRDMA_WR_BIND_MW,
					    .flags = RPCRDMA_SEND_SIGNALED};
		struct rpcrdma_wc wc;

		REQUIRE_EQ(rpcrdma_mw_alloc(n->pd, &t->mw), 0);
		b.u.bind.mw = t->mw;
		b.u.bind.mr = t->mr;
		b.u.bind.addr = t->base;
		b.u.bind.length = len;
		b.u.bind.access = access;
		REQUIRE_EQ(rpcrdma_post_send(bind_qp, &b, NULL), 0);
		REQUIRE_EQ(rpcrdma_cq_wait(n->scq, 1, &wc, 5000), 1);
		REQUIRE_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		t->stag = rpcrdma_mw_rkey(t->mw);
		t->to = rpcrdma_mw_remote_offset(t->mw);
	}
}

static void tgt_free(struct tgt *t)
{
	if (t->mw)
		CHECK_EQ(rpcrdma_mw_free(t->mw), 0);
	CHECK_EQ(rpcrdma_dereg_mr(t->mr), 0);
}

/* The client QP @c writes @len bytes (n->buf[0..) = @fill) to, or reads
 * @len bytes from, (@stag, @to) into n->buf[0..). */
static struct res access1(struct net *n, struct rpcrdma_qp *c, bool write, uint32_t stag,
			  uint64_t to, uint32_t len, uint8_t fill)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_send_wr w = {.wr_id = 1, .opcode = RPCRDMA_WR_RDMA_WRITE, .sg_list = &sg,
				    .num_sge = 1};
	struct rpcrdma_send_wr r = {.wr_id = 2, .opcode = RPCRDMA_WR_RDMA_READ,
				    .flags = RPCRDMA_SEND_SIGNALED};
	struct res out = {-ETIMEDOUT, 0};
	uint64_t end = rr_now_ns(NULL) + 10000000000ull;

	memset(n->buf, write ? fill : 0, len);
	w.u.rdma.stag = r.u.rdma.stag = stag;
	w.u.rdma.remote_offset = r.u.rdma.remote_offset = to;
	if (write) {
		w.next = &r;      /* zero bytes: the fence */
	} else {
		r.sg_list = &sg;
		r.num_sge = 1;
	}
	REQUIRE_EQ(rpcrdma_post_send(c, write ? &w : &r, NULL), 0);
	while (rr_now_ns(NULL) < end) {
		struct rpcrdma_wc wc;

		if (rpcrdma_cq_wait(n->ccq, 1, &wc, 1000) != 1)
			continue;
		if (wc.wr_id == 2 || wc.status != RPCRDMA_WC_SUCCESS) {
			out.status = (int)wc.status;
			out.vend = wc.vendor_err;
			break;
		}
	}
	return out;
}

enum rule { R_END, R_BELOW, R_WRAP, R_STAG, R_ACCESS, R_PD, R_QP };

/* One access against a fresh target and connection; @rule chooses what
 * the access breaks (@ok: nothing -- the same access, made to fit). */
static struct res one(enum rule rule, bool ok, bool write, bool mw, uint32_t len)
{
	struct net n;
	struct rpcrdma_qp *c, *s, *c2 = NULL, *s2 = NULL;
	struct rpcrdma_cm_id *cid, *sid, *cid2 = NULL, *sid2 = NULL;
	struct rpcrdma_pd *opd = NULL;
	struct rpcrdma_mr *omr = NULL;
	uint32_t right = write ? RPCRDMA_ACCESS_REMOTE_WRITE : RPCRDMA_ACCESS_REMOTE_READ;
	uint64_t tlen = len;
	struct tgt t;
	struct res r;
	uint32_t stag;
	uint64_t to;

	soft_net_up_buf(&n, 64, 8, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	if (rule == R_QP && mw)
		soft_net_pair(&n, 16, &c2, &s2, &cid2, &sid2);
	if (rule == R_ACCESS && !ok)
		right = write ? RPCRDMA_ACCESS_REMOTE_READ : RPCRDMA_ACCESS_REMOTE_WRITE;
	/* R_QP: the window is bound on another connection's QP of the PD */
	tgt_make(&n, &t, tlen, right, mw, rule == R_QP && !ok ? s2 : s);
	stag = t.stag;
	to = t.to;
	if (!ok) {
		switch (rule) {
		case R_END:    /* one byte past the end */
			to += 1;
			break;
		case R_BELOW:  /* one byte below the base */
			to -= 1;
			break;
		case R_WRAP:   /* the offset's last byte beyond 2^64 - 1 */
			to = UINT64_MAX - len + 2;
			break;
		case R_STAG:   /* another key of the same index */
			stag ^= 0x01;
			break;
		case R_PD:     /* a registration of another PD */
			REQUIRE_EQ(rpcrdma_pd_alloc(n.ctx, &opd), 0);
			REQUIRE_EQ(rpcrdma_reg_mr_simple(opd, n.buf + TGT_OFF, tlen,
							 RPCRDMA_ACCESS_LOCAL_WRITE | right, &omr), 0);
			stag = rpcrdma_mr_rkey(omr);
			break;
		default:
			break;
		}
	}
	memset(n.buf + TGT_OFF - 1, 0x11, len + 2);   /* the region and a byte each side */
	r = access1(&n, c, write, stag, to, len, 0xa7);
	if (ok) {
		/* it went through: the bytes landed, or came back */
		const uint8_t *p = write ? n.buf + TGT_OFF : n.buf;
		uint8_t want = write ? 0xa7 : 0x11;

		for (uint32_t i = 0; i < len; i++)
			if (p[i] != want) {
				CHECK_EQ(p[i], want);
				break;
			}
	} else if (write) {
		/* refused: nothing landed outside the region (segments before
		 * the violating one may have been placed inside it) */
		CHECK_EQ(n.buf[TGT_OFF - 1], 0x11);
		CHECK_EQ(n.buf[TGT_OFF + len], 0x11);
		/* a one-segment access: nothing at all */
		if (len == TGT_LEN)
			for (uint32_t i = 0; i < len; i++)
				if (n.buf[TGT_OFF + i] != 0x11) {
					CHECK_EQ(n.buf[TGT_OFF + i], 0x11);
					break;
				}
	}
	if (omr)
		CHECK_EQ(rpcrdma_dereg_mr(omr), 0);
	if (opd)
		CHECK_EQ(rpcrdma_pd_free(opd), 0);
	tgt_free(&t);
	if (c2)
		soft_net_unpair(c2, s2, cid2, sid2);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
	return r;
}

/* @rule by Write and Read: the fitting access passes, the breaking one is
 * refused with @wcode (Write: a DDP tagged or RDMAP code) / @rcode (Read:
 * RDMAP). */
static void rule_both_ways(enum rule rule, bool mw, uint32_t len, uint32_t wcode, uint32_t rcode)
{
	for (int write = 1; write >= 0; write--) {
		struct res r = one(rule, true, write, mw, len);

		CHECK_EQ(r.status, RPCRDMA_WC_SUCCESS);
		r = one(rule, false, write, mw, len);
		if (r.status != RPCRDMA_WC_REM_ACCESS_ERR || r.vend != (write ? wcode : rcode))
			printf("  rule %d %s %s len %u: status %d vendor %#x\n", rule,
			       write ? "write" : "read", mw ? "window" : "MR", len, r.status, r.vend);
		CHECK_EQ(r.status, RPCRDMA_WC_REM_ACCESS_ERR);
		CHECK_EQ(r.vend, write ? wcode : rcode);
	}
}

/* End of the registration: exactly to its last byte passes, one byte
 * further is a base-or-bounds violation. */
TEST(soft_bounds_end_mr)
{
	rule_both_ways(R_END, false, TGT_LEN, DDP_T(RR_DDP_EC_T_BOUNDS), RDMAP_P(RR_RDMAP_EC_BOUNDS));
}

TEST(soft_bounds_end_window)
{
	rule_both_ways(R_END, true, TGT_LEN, DDP_T(RR_DDP_EC_T_BOUNDS), RDMAP_P(RR_RDMAP_EC_BOUNDS));
}

/* The same over many DDP segments: only the last one leaves the region. */
TEST(soft_bounds_end_multi_segment)
{
	rule_both_ways(R_END, false, BIG, DDP_T(RR_DDP_EC_T_BOUNDS), RDMAP_P(RR_RDMAP_EC_BOUNDS));
	rule_both_ways(R_END, true, BIG, DDP_T(RR_DDP_EC_T_BOUNDS), RDMAP_P(RR_RDMAP_EC_BOUNDS));
}

/* Base: one byte below the registration is a violation. */
TEST(soft_bounds_below_base)
{
	rule_both_ways(R_BELOW, false, TGT_LEN, DDP_T(RR_DDP_EC_T_BOUNDS),
		       RDMAP_P(RR_RDMAP_EC_BOUNDS));
	rule_both_ways(R_BELOW, true, TGT_LEN, DDP_T(RR_DDP_EC_T_BOUNDS),
		       RDMAP_P(RR_RDMAP_EC_BOUNDS));
}

/* A Tagged Offset whose range wraps 2^64 (RFC 5041 "Tagged Offset wrap",
 * RFC 5040 "Tagged Offset wrap"). */
TEST(soft_bounds_to_wrap)
{
	rule_both_ways(R_WRAP, false, TGT_LEN, DDP_T(RR_DDP_EC_T_TO_WRAP),
		       RDMAP_P(RR_RDMAP_EC_TO_WRAP));
	rule_both_ways(R_WRAP, true, TGT_LEN, DDP_T(RR_DDP_EC_T_TO_WRAP),
		       RDMAP_P(RR_RDMAP_EC_TO_WRAP));
}

/* An STag differing in one key bit is invalid. */
TEST(soft_bounds_wrong_key)
{
	rule_both_ways(R_STAG, false, TGT_LEN, DDP_T(RR_DDP_EC_T_INVALID_STAG),
		       RDMAP_P(RR_RDMAP_EC_INVALID_STAG));
	rule_both_ways(R_STAG, true, TGT_LEN, DDP_T(RR_DDP_EC_T_INVALID_STAG),
		       RDMAP_P(RR_RDMAP_EC_INVALID_STAG));
}

/* The other right only: a Write needs remote write, a Read remote read. */
TEST(soft_bounds_access_rights)
{
	rule_both_ways(R_ACCESS, false, TGT_LEN, RDMAP_P(RR_RDMAP_EC_ACCESS),
		       RDMAP_P(RR_RDMAP_EC_ACCESS));
	rule_both_ways(R_ACCESS, true, TGT_LEN, RDMAP_P(RR_RDMAP_EC_ACCESS),
		       RDMAP_P(RR_RDMAP_EC_ACCESS));
}

/* An STag of another protection domain is refused as an unknown one (no
 * oracle: docs/security.md). */
TEST(soft_bounds_other_pd)
{
	rule_both_ways(R_PD, false, TGT_LEN, DDP_T(RR_DDP_EC_T_INVALID_STAG),
		       RDMAP_P(RR_RDMAP_EC_INVALID_STAG));
}

/* A window is bound to one QP (type 2): the same PD's other connection
 * cannot use it (and learns no more than from an unknown STag). */
TEST(soft_bounds_window_other_qp)
{
	rule_both_ways(R_QP, true, TGT_LEN, DDP_T(RR_DDP_EC_T_INVALID_STAG),
		       RDMAP_P(RR_RDMAP_EC_INVALID_STAG));
}
