/* SPDX-License-Identifier: BSD-2-Clause */
/* A Receive's completion as the soft provider's receive path writes it
 * (rx.c rx_send, issue 16 part IA): straight into a fast waiter's array
 * (cq.h rr_soft_cq_direct_slot) or built and pushed through the CQ's ring,
 * for each Send opcode (Send, with Invalidate, with Solicited Event, both):
 * every field of the completion, the window a Send With Invalidate names
 * invalidated first, the counts. And the parse loop's leave after a lone
 * Send that emptied the socket and the stage: a QP that went to the error
 * state meanwhile (its send side, another thread's, here a race hook in the
 * push) still has its Receives flushed by that same receive call, as the
 * loop's next turn did. The receive call's straight line (a look-ahead
 * read, then the parse; issue 16 part JC): a QP failed between the read
 * and the parse completes nothing, and the first read counts against the
 * QP's limit of reads per call. A soft QP connected over a socketpair, the peer's
 * FPDUs built with the DDP codec, received with rr_soft_qp_rx in this
 * thread (as tests/soft/test_terminate.c). */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma/soft/cq.h"
#include "rdma/soft/race.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/soft.h"
#include "rdma/soft/tx.h"
#include "soft/soft_socketpair.h"
#include "test.h"

struct rc_pair {
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct soft_qp *sq;
	struct rpcrdma_mr *mr;
	int peer;
	uint32_t msn;
};

static uint8_t rc_mem[8192];

/* A soft QP connected to @p->peer (MPA CRC @crc), no progress thread on
 * it; rc_mem registered for its Receives and windows. */
static void rc_up(struct rc_pair *p, bool crc)
{
	struct soft_sp s;

	soft_sp_up(&s, crc, 16);
	*p = (struct rc_pair){.ctx = s.ctx, .pd = s.pd, .cq = s.cq, .qp = s.qp, .sq = s.sq,
			      .peer = s.peer};
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p->pd, rc_mem, sizeof(rc_mem),
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND, &p->mr),
		   0);
	p->msn = 1;
}

static void rc_down(struct rc_pair *p)
{
	struct soft_sp s = {.ctx = p->ctx, .pd = p->pd, .cq = p->cq, .qp = p->qp, .sq = p->sq,
			    .peer = p->peer};

	soft_sp_down(&s, p->mr);
}

/* A Receive of 256 bytes at rc_mem + @off. */
static void rc_recv(struct rc_pair *p, uint64_t id, size_t off)
{
	struct rpcrdma_sge s = {.addr = (uintptr_t)rc_mem + off, .length = 256,
				.lkey = rpcrdma_mr_lkey(p->mr)};
	struct rpcrdma_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1};

	REQUIRE_EQ(rpcrdma_post_recv(p->qp, &w, NULL), 0);
}

/* A window over rc_mem + 4096 (512 bytes) bound on the QP: its STag. */
static uint32_t rc_window(struct rc_pair *p, struct rpcrdma_mw **mw)
{
	struct rpcrdma_send_wr b = {.wr_id = 1, .opcode = RPCRDMA_WR_BIND_MW,
				    .flags = RPCRDMA_SEND_SIGNALED};
	struct rpcrdma_wc wc;

	REQUIRE_EQ(rpcrdma_mw_alloc(p->pd, mw), 0);
	b.u.bind.mw = *mw;
	b.u.bind.mr = p->mr;
	b.u.bind.addr = (uintptr_t)rc_mem + 4096;
	b.u.bind.length = 512;
	b.u.bind.access = RPCRDMA_ACCESS_REMOTE_WRITE;
	REQUIRE_EQ(rpcrdma_post_send(p->qp, &b, NULL), 0);   /* transmits in this thread */
	REQUIRE_EQ(rpcrdma_cq_poll(p->cq, 1, &wc), 1);
	REQUIRE_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	return rpcrdma_mw_rkey(*mw);
}

/* The peer's lone Send @op of @len bytes (naming @inv for an Invalidate),
 * one FPDU, written to the QP's socket. */
static void rc_send(struct rc_pair *p, uint8_t op, uint32_t len, uint32_t inv)
{
	uint8_t data[256];
	struct iovec v = {data, len};
	struct rr_ddp_txmsg m;
	struct rr_fpdu f;

	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(p->msn * 31 + i);
	REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, op, RR_QN_SEND, p->msn++, inv, &v, 1), 0);
	REQUIRE_EQ(rr_ddp_tx_next(&m, p->sq->crc, RR_FPDU_DEFAULT, &f), 1);
	REQUIRE(f.last);
	for (unsigned i = 0; i < f.iovcnt; i++)
		REQUIRE_EQ(write(p->peer, f.iov[i].iov_base, f.iov[i].iov_len),
			   (ssize_t)f.iov[i].iov_len);
}

static int rc_rx(struct rc_pair *p)
{
	int r;

	rr_lock(&p->sq->rx_lock);
	r = rr_soft_qp_rx(p->sq);
	rr_unlock(&p->sq->rx_lock);
	return r;
}

/* Every field of a Receive's successful completion. */
static void rc_check_wc(const struct rc_pair *p, const struct rpcrdma_wc *wc, uint64_t id,
			uint32_t len, uint32_t flags, uint32_t inv)
{
	CHECK_EQ(wc->wr_id, id);
	CHECK_EQ(wc->status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc->opcode, RPCRDMA_WC_RECV);
	CHECK_EQ(wc->byte_len, len);
	CHECK_EQ(wc->flags, flags);
	CHECK_EQ(wc->invalidated_stag, inv);
	CHECK_EQ(wc->remote_status, 0);
	CHECK_EQ(wc->vendor_err, 0);
	CHECK(wc->qp == p->qp);
}

static void completion_fields(bool crc)
{
	static const uint8_t ops[] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE,
				      RR_OP_SEND_SE_INV};
	struct soft_cq *q;
	struct rc_pair p;
	uint64_t id = 100;

	rc_up(&p, crc);
	q = scq_of(RR_BASE(cq, p.cq));
	for (int direct = 0; direct < 2; direct++)
		for (size_t k = 0; k < RR_ARRAY_SIZE(ops); k++, id++) {
			uint8_t op = ops[k];
			bool inv = op == RR_OP_SEND_INV || op == RR_OP_SEND_SE_INV;
			bool se = op == RR_OP_SEND_SE || op == RR_OP_SEND_SE_INV;
			uint32_t len = (uint32_t)(20 + 11 * k + direct), stag = 0;
			uint32_t flags = (inv ? RPCRDMA_WC_WITH_INV : 0) | (se ? RPCRDMA_WC_SOLICITED : 0);
			uint64_t rq0 = atomic_load(&p.sq->cq_rq), fd0 = q->fast_direct;
			struct rpcrdma_mw *mw = NULL;
			struct rpcrdma_wc wc[4];

			memset(wc, 0xa5, sizeof(wc));
			if (inv)
				stag = rc_window(&p, &mw);
			rc_recv(&p, id, 256 * k);
			rc_send(&p, op, len, stag);
			if (direct) {
				/* as a fast waiter receives for itself
				 * (cq_wait.c cq_fast_wait) */
				struct soft_direct d = {.q = q, .wc = wc, .n = 4};

				rr_soft_tls_cq = q;
				rr_soft_tls_direct = &d;
				CHECK_EQ(rc_rx(&p), 0);
				rr_soft_tls_direct = NULL;
				rr_soft_tls_cq = NULL;
				CHECK_EQ(d.got, 1);
				CHECK_EQ(q->fast_direct, fd0 + 1);
				CHECK_EQ(rpcrdma_cq_poll(p.cq, 4, wc + 1), 0); /* nothing in the ring */
			} else {
				CHECK_EQ(rc_rx(&p), 0);
				CHECK_EQ(q->fast_direct, fd0);
				CHECK_EQ(rpcrdma_cq_poll(p.cq, 4, wc), 1);
			}
			rc_check_wc(&p, &wc[0], id, len, flags, inv ? stag : 0);
			CHECK_EQ(atomic_load(&p.sq->cq_rq), rq0 + 1);
			CHECK_EQ(rc_mem[256 * k + len - 1], (uint8_t)((p.msn - 1) * 31 + len - 1));
			if (inv) /* invalidated: the peer's access is refused now */
				CHECK_EQ(rr_mrt_check(&p.sq->ctx->mrt, stag, rpcrdma_mw_remote_offset(mw),
						      1, RPCRDMA_ACCESS_REMOTE_WRITE, &p.sq->pd->base,
						      &p.sq->base, NULL),
					 -ENOENT);
			if (mw)
				rpcrdma_mw_free(mw);
		}
	CHECK_EQ(p.sq->state, QPS_RTS);
	rc_down(&p);
}

TEST(soft_rx_completion_fields_direct_and_ring)
{
	completion_fields(false);
	completion_fields(true);
}

/* The QP's send side fails it (another thread in the library; here the
 * push of the Receive's completion, SOFT_RACE_PUSH, in the receiving
 * thread) while a lone Send is completed: the receive call that completed
 * it flushes the other Receives at once and answers -ENOTCONN, as the
 * loop's turn after the parse did before it could leave early. Fails with
 * the leave's look at the state taken out (rx.c qp_rx): the call answers
 * 0 and the Receives stay posted. */
static struct {
	struct soft_qp *qp;
	enum soft_race at;
	atomic_int armed;
} fail_race;

/* The race hook: fails the QP from its send side, once, at fail_race.at. */
static void fail_at(enum soft_race pt, void *obj)
{
	RR_UNUSED(obj);
	if (pt != fail_race.at || !atomic_exchange(&fail_race.armed, 0))
		return;
	rr_lock(&fail_race.qp->tx_lock);
	rr_soft_qp_error_tx_locked(fail_race.qp, NULL);
	rr_unlock(&fail_race.qp->tx_lock);
}

/* One Send of @len that fails @p's QP at @at: the receive call answers
 * -ENOTCONN, the hook fired, the QP is in error with its Receives flushed. */
static void send_failing_at(struct rc_pair *p, enum soft_race at, uint32_t len)
{
	fail_race.qp = p->sq;
	fail_race.at = at;
	atomic_store(&fail_race.armed, 1);
	rr_soft_test_set_race_hook(fail_at);
	rc_send(p, RR_OP_SEND, len, 0);
	CHECK_EQ(rc_rx(p), -ENOTCONN);
	rr_soft_test_set_race_hook(NULL);
	CHECK_EQ(atomic_load(&fail_race.armed), 0);
	CHECK_EQ(p->sq->state, QPS_ERROR);
	CHECK(p->sq->rq_flushed);
	CHECK_EQ(p->sq->rq_count, 0);
}

TEST(soft_rx_error_during_a_lone_send_flushes_at_once)
{
	struct rpcrdma_wc wc[8];
	struct rc_pair p;
	int got;

	rc_up(&p, false);
	for (unsigned i = 0; i < 3; i++)
		rc_recv(&p, 10 + i, 256 * i);
	/* a first Send, completed as usual */
	rc_send(&p, RR_OP_SEND, 40, 0);
	CHECK_EQ(rc_rx(&p), 0);
	REQUIRE_EQ(rpcrdma_cq_poll(p.cq, 8, wc), 1);
	rc_check_wc(&p, &wc[0], 10, 40, 0, 0);
	/* the second fails the QP as its completion is pushed */
	send_failing_at(&p, SOFT_RACE_PUSH, 52);
	/* its completion, then the last Receive's flush, in one poll */
	got = rpcrdma_cq_poll(p.cq, 8, wc);
	REQUIRE(got >= 2);
	rc_check_wc(&p, &wc[0], 11, 52, 0, 0);
	CHECK_EQ(wc[1].wr_id, 12);
	CHECK_EQ(wc[1].status, RPCRDMA_WC_WR_FLUSH_ERR);
	rc_down(&p);
}

/* The QP fails between the read and the parse (SOFT_RACE_RX_READ, as
 * another thread's failed Send would): the Send just read completes
 * nothing (the bytes of a failed QP are void), every Receive is flushed
 * and the call answers -ENOTCONN, as the loop's top did after every read.
 * Fails with the straight line's look at the state before its parse
 * taken out (rx.c qp_rx, "goto parse"): the Send completes first. */
TEST(soft_rx_error_after_the_read_completes_nothing)
{
	struct rpcrdma_wc wc[8];
	struct rc_pair p;

	rc_up(&p, false);
	for (unsigned i = 0; i < 3; i++)
		rc_recv(&p, 20 + i, 256 * i);
	send_failing_at(&p, SOFT_RACE_RX_READ, 52);
	REQUIRE_EQ(rpcrdma_cq_poll(p.cq, 8, wc), 3);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(wc[i].wr_id, 20 + i);
		CHECK_EQ(wc[i].status, RPCRDMA_WC_WR_FLUSH_ERR);
	}
	rc_down(&p);
}

/* The straight line's read is the call's first (rx.c qp_rx): with one read
 * allowed per call, a peer's sixteen Sends (more than the look-ahead of
 * SOFT_STAGE_LOOK bytes) take two calls, one read each: the first
 * completes the Sends whole in its read, the second the rest. Fails with
 * the straight line's read not counted (reads = 0): the first call reads
 * twice and completes all sixteen. */
TEST(soft_rx_first_read_counts_within_the_limit)
{
	struct rpcrdma_wc wc[16];
	struct rc_pair p;
	uint64_t reads0;
	int got;

	rc_up(&p, true);
	p.sq->ctx->rx_reads = 1;
	for (unsigned i = 0; i < 16; i++)
		rc_recv(&p, 40 + i, 256 * i);
	for (unsigned i = 0; i < 16; i++)
		rc_send(&p, RR_OP_SEND, 240, 0);   /* FPDUs of 264 bytes */
	REQUIRE(16 * 264 > SOFT_STAGE_LOOK);
	reads0 = p.sq->rx_reads;
	CHECK_EQ(rc_rx(&p), 0);
	CHECK_EQ(p.sq->rx_reads, reads0 + 1);
	got = rpcrdma_cq_poll(p.cq, 16, wc);
	CHECK_EQ(got, SOFT_STAGE_LOOK / 264);
	for (int i = 0; i < got; i++)
		rc_check_wc(&p, &wc[i], 40 + (uint64_t)i, 240, 0, 0);
	CHECK_EQ(rc_rx(&p), 0);
	CHECK_EQ(p.sq->rx_reads, reads0 + 2);
	REQUIRE_EQ(rpcrdma_cq_poll(p.cq, 16, wc), 16 - SOFT_STAGE_LOOK / 264);
	for (int i = 0; i < 16 - SOFT_STAGE_LOOK / 264; i++)
		rc_check_wc(&p, &wc[i], 40 + (uint64_t)(SOFT_STAGE_LOOK / 264 + i), 240, 0, 0);
	CHECK_EQ(rc_mem[256 * 15 + 239], (uint8_t)(16 * 31 + 239));
	CHECK_EQ(p.sq->state, QPS_RTS);
	rc_down(&p);
}
