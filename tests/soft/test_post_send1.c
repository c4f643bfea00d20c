/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's one-SGE Send op (post_send1, rr_soft_post_send1:
 * the library's own lone Send through rdma/post_own.h
 * rr_post_send1_own_ops, no WQE when it can) against the general path of
 * post_send (the same Send as a work request: a WQE, sent in one pass by
 * tx_one_fast or by the batch loop): two QPs over socketpairs, in
 * lockstep, one posting each Send through the one op, the other through
 * the work-request path; the bytes each peer reads (the whole stream:
 * MPA framing, DDP and RDMAP headers, payload, pad, CRC) and the
 * completions each CQ gives must be equal, Send by Send, for payloads of
 * 0 to 300 bytes and larger ones (several FPDUs), Send and Send With
 * Invalidate, signaled or not, solicited or not, with and without CRC,
 * and at the end a Send whose lkey was deregistered (an error completion
 * on both, the QP in the error state on both). */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma/post_own.h"
#include "rdma/soft/soft.h"
#include "rdma/soft/tx.h"
#include "soft/soft_socketpair.h"

#define SRC_LEN 20000
#define WIRE_MAX 32768

/* Everything the peer @fd has to read now (non-blocking), into @buf. */
static size_t peer_read(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);

		if (n <= 0) {
			REQUIRE(n == 0 || errno == EAGAIN || errno == EWOULDBLOCK);
			return got;
		}
		got += (size_t)n;
		REQUIRE(got < cap);
	}
}

/* One Send of @len bytes from @src (@lkey), opcode @op, @flags, posted on
 * @s: through the one-SGE op (@one) or as a work request of two SGEs, the
 * second empty (the same Send; post_send's general path: a lone Send of
 * one SGE goes to the one op). Returns the post's result. */
static int post_one(struct soft_sp *s, bool one, const uint8_t *src, uint32_t len, uint32_t lkey,
		    enum rpcrdma_wr_opcode op, uint32_t flags, uint64_t id)
{
	struct rpcrdma_sge sge[2] = {{.addr = (uintptr_t)src, .length = len, .lkey = lkey},
				     {.addr = (uintptr_t)src, .length = 0, .lkey = lkey}};
	struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = sge, .num_sge = one ? 1 : 2,
				     .opcode = op, .flags = flags};
	struct rpcrdma_send_wr *bad = NULL;
	struct rr_qp *qp = RR_BASE(qp, s->qp);

	if (op == RPCRDMA_WR_SEND_WITH_INV)
		wr.u.send.invalidate_stag = 0x5a000000u | (uint32_t)id;
	if (one)
		return rr_post_send1_own_ops(qp->pd->ctx->ops, s->qp, &wr);
	return rr_soft_post_send(qp, &wr, &bad);
}

/* The completions of @s's CQ now, into @wc (at most 4). */
static int cq_take(struct soft_sp *s, struct rpcrdma_wc *wc)
{
	int n = rpcrdma_cq_poll(s->cq, 4, wc);

	REQUIRE(n >= 0);
	return n;
}

static void same_wcs(const struct rpcrdma_wc *a, const struct rpcrdma_wc *b, int n)
{
	for (int i = 0; i < n; i++) {
		CHECK_EQ(a[i].wr_id, b[i].wr_id);
		CHECK_EQ(a[i].status, b[i].status);
		CHECK_EQ(a[i].opcode, b[i].opcode);
		if (a[i].status == RPCRDMA_WC_SUCCESS)
			CHECK_EQ(a[i].byte_len, b[i].byte_len);
	}
}

static void one_as_general(bool crc)
{
	static uint8_t src[SRC_LEN], wa[WIRE_MAX], wb[WIRE_MAX];
	static const uint32_t big[] = {500, 1000, 2048, 4000, 9000, SRC_LEN};
	struct soft_sp a, b;   /* a: the work-request path; b: the one op */
	struct rpcrdma_mr *ma, *mb;
	struct rpcrdma_wc wca[4], wcb[4];
	uint64_t id = 1, bare0;
	uint32_t ka, kb;   /* the lkeys, kept for the Send after their MRs are gone */
	unsigned sends = 0, wires = 0;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 3);
	soft_sp_up(&a, crc, 4);
	soft_sp_up(&b, crc, 4);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(a.pd, src, sizeof(src), RPCRDMA_ACCESS_LOCAL_WRITE, &ma), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(b.pd, src, sizeof(src), RPCRDMA_ACCESS_LOCAL_WRITE, &mb), 0);
	bare0 = b.sq->tx_bare;
	for (unsigned k = 0; k < 301 + sizeof(big) / sizeof(big[0]); k++) {
		uint32_t len = k < 301 ? k : big[k - 301];
		enum rpcrdma_wr_opcode op = (k % 3 == 1) ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
		uint32_t flags = ((k % 2) ? RPCRDMA_SEND_SIGNALED : 0) |
				 ((k % 5 == 2) ? RPCRDMA_SEND_SOLICITED : 0);
		const uint8_t *p = src + (k * 13) % 64;
		size_t na, nb;
		int ga, gb;

		if (len > SRC_LEN - 64)
			len = SRC_LEN - 64;
		REQUIRE_EQ(post_one(&a, false, p, len, rpcrdma_mr_lkey(ma), op, flags, id), 0);
		REQUIRE_EQ(post_one(&b, true, p, len, rpcrdma_mr_lkey(mb), op, flags, id), 0);
		id++;
		sends++;
		na = peer_read(a.peer, wa, sizeof(wa));
		nb = peer_read(b.peer, wb, sizeof(wb));
		CHECK(na > 0);
		CHECK_EQ(na, nb);
		if (na == nb && na > 0) {
			CHECK_MEM(wa, wb, na);
			wires++;
		}
		ga = cq_take(&a, wca);
		gb = cq_take(&b, wcb);
		CHECK_EQ(ga, gb);
		CHECK_EQ(ga, (flags & RPCRDMA_SEND_SIGNALED) ? 1 : 0);
		if (ga == gb)
			same_wcs(wca, wcb, ga);
	}
	/* the one op went without a WQE (those that fit one small FPDU);
	 * the general path never did */
	CHECK(b.sq->tx_bare - bare0 >= 200);
	CHECK_EQ(a.sq->tx_bare, 0);
	CHECK_EQ(wires, sends);
	/* a Send whose lkey is gone: completed in error on both (though
	 * unsignaled), nothing on the wire, both QPs in the error state */
	ka = rpcrdma_mr_lkey(ma);
	kb = rpcrdma_mr_lkey(mb);
	REQUIRE_EQ(rpcrdma_dereg_mr(ma), 0);
	REQUIRE_EQ(rpcrdma_dereg_mr(mb), 0);
	(void)post_one(&a, false, src, 64, ka, RPCRDMA_WR_SEND, 0, id);
	(void)post_one(&b, true, src, 64, kb, RPCRDMA_WR_SEND, 0, id);
	REQUIRE_EQ(cq_take(&a, wca), 1);
	REQUIRE_EQ(cq_take(&b, wcb), 1);
	CHECK_EQ(wca[0].status, RPCRDMA_WC_LOC_PROT_ERR);
	same_wcs(wca, wcb, 1);
	CHECK_EQ(peer_read(a.peer, wa, sizeof(wa)), peer_read(b.peer, wb, sizeof(wb)));
	CHECK_EQ(a.sq->state, QPS_ERROR);
	CHECK_EQ(b.sq->state, QPS_ERROR);
	soft_sp_down(&a, NULL);
	soft_sp_down(&b, NULL);
}

TEST(soft_post_send1_as_post_send)
{
	one_as_general(false);
	one_as_general(true);
}
