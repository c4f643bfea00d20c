/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider end to end: two endpoints in one process over loopback
 * TCP through the public API (include/rpcrdma/rdma.h): Send / Send+SE /
 * Send with Invalidate, RDMA Write, RDMA Read, RDMA Commit, CRC on and off,
 * MPA revision 1 and 2, payloads from 0 bytes to 8 MiB with odd lengths;
 * protection violations each producing its Terminate and no memory access;
 * reject with private data; the MPA timeout; Commit into a durable file
 * mapping in a child killed with SIGKILL right after the Commit Response. */
#include "test.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"

struct ep {
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_id *id;
};

struct pair {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *listen;
	struct ep c, s;
	uint16_t port;
};

/* The next CM event of @ch, an event that must come: 0, or -ETIMEDOUT
 * after RR_TEST_WAIT_MS (named). */
static int wait_cm(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev)
{
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "a CM event");) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/* The next completion of @cq, one that must come: 1 (or a poll's error),
 * or -ETIMEDOUT after RR_TEST_WAIT_MS (named). */
static int wait_wc(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "a completion");) {
		int n = rpcrdma_cq_poll(cq, 1, wc);

		if (n)
			return n;
		usleep(10);
	}
	return -ETIMEDOUT;
}

static void ep_make(struct pair *p, struct ep *e)
{
	struct rpcrdma_cq_attr ca = {.cqe = 256};
	struct rpcrdma_qp_attr qa;

	REQUIRE_EQ(rpcrdma_pd_alloc(p->ctx, &e->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(p->ctx, &ca, &e->cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = e->cq;
	qa.max_send_wr = qa.max_recv_wr = 64;
	qa.max_send_sge = qa.max_recv_sge = 4;
	REQUIRE_EQ(rpcrdma_qp_create(e->pd, &qa, &e->qp), 0);
}

static void listen_on(struct pair *p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;

	REQUIRE_EQ(rpcrdma_cm_channel_create(p->ctx, &p->ch), 0);
	REQUIRE_EQ(rpcrdma_listen(p->ch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &p->listen), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(p->listen, &ss), 0);
	p->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int connect_to(struct pair *p, uint32_t cflags, uint32_t sflags, uint16_t ird)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(p->port)};
	struct rpcrdma_conn_param cp = {.private_data = "hello", .private_data_len = 5,
					.responder_resources = 4, .initiator_depth = 4, .flags = cflags};
	struct rpcrdma_conn_param sp = {.private_data = "world!", .private_data_len = 6,
					.responder_resources = ird, .initiator_depth = 4, .flags = sflags};
	struct rpcrdma_cm_event ev;
	int est = 0;

	REQUIRE_EQ(rpcrdma_connect(p->ch, p->c.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &p->c.id), 0);
	REQUIRE_EQ(wait_cm(p->ch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	REQUIRE_EQ(ev.private_data_len, 5);
	CHECK_MEM(ev.private_data, "hello", 5);
	p->s.id = ev.id;
	REQUIRE_EQ(rpcrdma_accept(p->s.id, p->s.qp, &sp), 0);
	while (est < 2) {
		REQUIRE_EQ(wait_cm(p->ch, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
		if (ev.id == p->c.id) {
			CHECK_EQ(ev.private_data_len, 6);
			CHECK_MEM(ev.private_data, "world!", 6);
		}
		est++;
	}
	return 0;
}

static void pair_up(struct pair *p, uint32_t cflags, uint32_t sflags)
{
	memset(p, 0, sizeof(*p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p->ctx), 0);
	ep_make(p, &p->c);
	ep_make(p, &p->s);
	listen_on(p);
	connect_to(p, cflags, sflags, 4);
}

static void ep_free(struct ep *e)
{
	if (e->id)
		rpcrdma_cm_id_destroy(e->id);
	if (e->qp)
		CHECK_EQ(rpcrdma_qp_destroy(e->qp), 0);
	if (e->cq)
		CHECK_EQ(rpcrdma_cq_destroy(e->cq), 0);
}

static void pair_down(struct pair *p, struct rpcrdma_mr **mrs, int nmr)
{
	struct rpcrdma_pd *pc = p->c.pd, *ps = p->s.pd;

	ep_free(&p->c);
	ep_free(&p->s);
	for (int i = 0; i < nmr; i++)
		if (mrs[i])
			CHECK_EQ(rpcrdma_dereg_mr(mrs[i]), 0);
	CHECK_EQ(rpcrdma_pd_free(pc), 0);
	CHECK_EQ(rpcrdma_pd_free(ps), 0);
	rpcrdma_cm_id_destroy(p->listen);
	CHECK_EQ(rpcrdma_cm_channel_destroy(p->ch), 0);
	CHECK_EQ(rpcrdma_close(p->ctx), 0);
}

/* A QP's state, read under its locks (the progress thread changes it). */
static enum soft_qp_state qp_state(struct soft_qp *q)
{
	enum soft_qp_state st;

	rr_lock(&q->rx_lock);
	rr_lock(&q->tx_lock);
	st = q->state;
	rr_unlock(&q->tx_lock);
	rr_unlock(&q->rx_lock);
	return st;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + seed + (i >> 9));
}

static struct rpcrdma_sge sge_of(struct rpcrdma_mr *mr, void *addr, uint32_t len)
{
	return (struct rpcrdma_sge){.addr = (uintptr_t)addr, .length = len, .lkey = rpcrdma_mr_lkey(mr)};
}

static void one_config(uint32_t flags)
{
	static const uint32_t sizes[] = {0, 1, 3, 4, 1461, 65537, (1u << 20) + 3};
	const size_t big = 8u << 20;
	struct pair p;
	uint8_t *sbuf = malloc(big + 8), *rbuf = malloc(big + 8), *tbuf = calloc(1, big + 8);
	struct rpcrdma_mr *smr, *rmr, *tmr;
	struct rpcrdma_wc wc;

	REQUIRE(sbuf && rbuf && tbuf);
	fill(sbuf, big + 8, flags);
	pair_up(&p, flags, flags);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, sbuf, big + 8, RPCRDMA_ACCESS_LOCAL_WRITE, &smr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, rbuf, big + 8, RPCRDMA_ACCESS_LOCAL_WRITE, &rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, tbuf, big + 8,
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE |
						 RPCRDMA_ACCESS_REMOTE_READ, &tmr), 0);
	/* Sends of every size, two SGEs each side */
	for (size_t i = 0; i < RR_ARRAY_SIZE(sizes); i++) {
		uint32_t n = sizes[i];
		struct rpcrdma_sge rs[2] = {sge_of(rmr, rbuf, n / 2 + 1), sge_of(rmr, rbuf + n / 2 + 1, n)};
		struct rpcrdma_sge ss[2] = {sge_of(smr, sbuf + 1, n / 3), sge_of(smr, sbuf + 1 + n / 3, n - n / 3)};
		struct rpcrdma_recv_wr rw = {.wr_id = 100 + i, .sg_list = rs, .num_sge = 2};
		struct rpcrdma_send_wr sw = {.wr_id = 200 + i, .sg_list = ss, .num_sge = 2,
					     .opcode = RPCRDMA_WR_SEND, .flags = RPCRDMA_SEND_SIGNALED |
					     (i & 1 ? RPCRDMA_SEND_SOLICITED : 0)};

		memset(rbuf, 0, n + 2);
		REQUIRE_EQ(rpcrdma_post_recv(p.s.qp, &rw, NULL), 0);
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &sw, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 200 + i);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_SEND);
		REQUIRE_EQ(wait_wc(p.s.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
		CHECK_EQ(wc.byte_len, n);
		CHECK_EQ(!!(wc.flags & RPCRDMA_WC_SOLICITED), i & 1);
		CHECK_MEM(rbuf, sbuf + 1, n);
		CHECK_EQ(rbuf[n], 0);
	}
	/* RDMA Write 8 MiB + 5 at an odd offset, then Read it back */
	{
		uint32_t n = (uint32_t)big + 5;
		struct rpcrdma_sge s = sge_of(smr, sbuf + 1, n);
		struct rpcrdma_send_wr w = {.wr_id = 1, .sg_list = &s, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_WRITE, .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(tmr) + 2,
						       .stag = rpcrdma_mr_rkey(tmr)}};
		struct rpcrdma_sge d = sge_of(smr, sbuf, n);
		struct rpcrdma_send_wr r = {.wr_id = 2, .sg_list = &d, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_READ, .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(tmr) + 2,
						       .stag = rpcrdma_mr_rkey(tmr)}};
		uint8_t *copy = malloc(n);

		REQUIRE(copy);
		memcpy(copy, sbuf + 1, n);
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &w, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		/* the Read is placed after the Write by the target (one stream,
		 * in order: RFC 5040 5.5), no need to wait */
		memset(sbuf, 0, n);
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &r, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RDMA_READ);
		CHECK_EQ(wc.byte_len, n);
		CHECK_MEM(tbuf + 2, copy, n);
		CHECK_MEM(sbuf, copy, n);
		CHECK_EQ(tbuf[1], 0);
		CHECK_EQ(tbuf[n + 2], 0);
		fill(sbuf, big + 8, flags);
		free(copy);
	}
	/* zero-length Write and Read */
	{
		struct rpcrdma_send_wr w = {.wr_id = 3, .opcode = RPCRDMA_WR_RDMA_WRITE,
					    .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(tmr), .stag = rpcrdma_mr_rkey(tmr)}};
		struct rpcrdma_send_wr r = w;

		r.wr_id = 4;
		r.opcode = RPCRDMA_WR_RDMA_READ;
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &w, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &r, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 4);
	}
	{
		struct soft_qp *sq = RR_CONTAINER_OF(RR_BASE(qp, p.c.qp), struct soft_qp, base);

		CHECK_EQ(sq->crc, !!(flags & RPCRDMA_CONN_SOFT_CRC));
		CHECK(!sq->commit_rx); /* nobody offered Commit */
		CHECK(!sq->commit_tx);
	}
	{
		struct rpcrdma_mr *mrs[] = {smr, rmr, tmr};

		pair_down(&p, mrs, 3);
	}
	free(sbuf);
	free(rbuf);
	free(tbuf);
}

TEST(soft_ops_crc_off_rev2)
{
	one_config(0);
}

TEST(soft_ops_crc_on_rev2)
{
	one_config(RPCRDMA_CONN_SOFT_CRC);
}

TEST(soft_ops_crc_on_rev1)
{
	one_config(RPCRDMA_CONN_SOFT_CRC | RPCRDMA_CONN_SOFT_MPA_REV1);
}

TEST(soft_ops_crc_off_rev1)
{
	one_config(RPCRDMA_CONN_SOFT_MPA_REV1);
}

/* ---- the lkey cache (rr_mrt_check_local) ---- */

/* A QP checks the lkey it posts again without the table's lock (one-entry
 * cache per queue): a deregistered MR's lkey, accepted a moment before,
 * must be refused all the same, on the receive queue (post_recv fails) and
 * the send queue (the Send completes with a protection error). Without the
 * table's generation moving at dereg, the cached copy would pass both. */
TEST(soft_lkey_cache_follows_dereg)
{
	struct pair p;
	uint8_t *a = malloc(256), *b = malloc(256);
	struct rpcrdma_mr *ma, *mb, *mr = NULL;
	struct rpcrdma_recv_wr rw = {0}, *bad = NULL;
	struct rpcrdma_send_wr sw = {0}, *sbad = NULL;
	struct rpcrdma_sge sg;
	struct rpcrdma_wc wc;

	REQUIRE(a && b);
	memset(a, 'a', 256);
	pair_up(&p, 0, 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, a, 256, RPCRDMA_ACCESS_LOCAL_WRITE, &ma), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, b, 256, RPCRDMA_ACCESS_LOCAL_WRITE, &mb), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, b, 256, RPCRDMA_ACCESS_LOCAL_WRITE, &mr), 0);
	/* receive queue: twice through the cache, then after the dereg */
	sg = sge_of(ma, a, 128);
	rw.sg_list = &sg;
	rw.num_sge = 1;
	rw.wr_id = 100;
	REQUIRE_EQ(rpcrdma_post_recv(p.s.qp, &rw, &bad), 0);
	REQUIRE_EQ(rpcrdma_post_recv(p.s.qp, &rw, &bad), 0);
	REQUIRE_EQ(rpcrdma_dereg_mr(ma), 0);
	ma = NULL;
	CHECK_EQ(rpcrdma_post_recv(p.s.qp, &rw, &bad), -EINVAL);
	/* send queue: one Send through the cache, delivered (the peer has a
	 * Receive for it) ... */
	sg = sge_of(mb, b, 128);
	rw.wr_id = 200;
	REQUIRE_EQ(rpcrdma_post_recv(p.c.qp, &rw, &bad), 0);
	sg = sge_of(mr, b, 64);
	sw.sg_list = &sg;
	sw.num_sge = 1;
	sw.opcode = RPCRDMA_WR_SEND;
	sw.flags = RPCRDMA_SEND_SIGNALED;
	sw.wr_id = 1;
	REQUIRE_EQ(rpcrdma_post_send(p.s.qp, &sw, &sbad), 0);
	REQUIRE_EQ(wait_wc(p.s.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	/* ... then the same lkey once its MR is gone: a protection error */
	REQUIRE_EQ(rpcrdma_dereg_mr(mr), 0);
	mr = NULL;
	sw.wr_id = 2;
	(void)rpcrdma_post_send(p.s.qp, &sw, &sbad);
	/* (the QP then ends: its two Receives come back flushed, wr_id 100) */
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(wait_wc(p.s.cq, &wc), 1);
		if (wc.wr_id != 100)
			break;
	}
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.status, RPCRDMA_WC_LOC_PROT_ERR);
	{
		struct rpcrdma_mr *mrs[] = {mb};

		pair_down(&p, mrs, 1);
	}
	free(a);
	free(b);
}

/* ---- protection violations ---- */

enum viol { V_BAD_STAG, V_BOUNDS, V_NO_WRITE, V_OTHER_PD, V_INVALIDATED, V_NO_READ, V_EXCESS_READS,
	    V_INV_MR, V_READ_BOUNDS };

static struct rpcrdma_mw *g_mw;
static struct rpcrdma_mr *g_bmr;

/* What the culprit's completion queue shows of its violation (@vend: the
 * Terminate's layer/type/code as wc.vendor_err has them): an RDMA Read
 * fails itself with @st; a Write or a Send completes locally (RFC 5040:
 * its completion says nothing of the peer), so the RDMA Read of a valid
 * region posted right behind it (@probe_id), which the victim never
 * answers, fails with @st instead. Nothing of the culprit's completes in
 * error before that one, and the probe never succeeds. */
struct culprit_wcs {
	unsigned errors;
	struct rpcrdma_wc first_err;
	bool probe_ok;
};

static void culprit_poll(struct rpcrdma_cq *cq, struct culprit_wcs *c, uint64_t probe_id)
{
	struct rpcrdma_wc wc;

	while (rpcrdma_cq_poll(cq, 1, &wc) == 1) {
		if (wc.status == RPCRDMA_WC_SUCCESS) {
			c->probe_ok |= wc.wr_id == probe_id;
			continue;
		}
		if (!c->errors++)
			c->first_err = wc;
	}
}

static void violation(enum viol v, uint8_t layer, uint8_t etype, uint8_t ecode,
		      enum rpcrdma_wc_status st)
{
	struct pair p;
	static uint8_t local[4096], target[4096], other[4096], pbuf[64];
	struct rpcrdma_mr *lmr, *tmr, *ro_mr, *omr, *pmr, *cread;
	struct rpcrdma_pd *opd;
	struct rpcrdma_wc wc;
	struct rpcrdma_sge s, ps;
	struct rpcrdma_send_wr w, probe;
	struct soft_qp *cq_, *sq_;
	struct culprit_wcs cw = {0};
	const uint64_t probe_id = 99;
	uint32_t stag;
	uint64_t to;

	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	ep_make(&p, &p.s);
	listen_on(&p);
	connect_to(&p, 0, 0, 2); /* server IRD 2 */
	memset(target, 0x11, sizeof(target));
	memset(other, 0x22, sizeof(other));
	memset(local, 0x77, sizeof(local));
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, local, sizeof(local), RPCRDMA_ACCESS_LOCAL_WRITE, &lmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, target, 2048, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE | RPCRDMA_ACCESS_REMOTE_READ, &tmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, target + 2048, 2048, RPCRDMA_ACCESS_LOCAL_WRITE, &ro_mr), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(p.ctx, &opd), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(opd, other, sizeof(other), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE | RPCRDMA_ACCESS_REMOTE_READ, &omr), 0);
	/* the probe: 4 bytes of a readable region of the victim into pbuf */
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, pbuf, 32, RPCRDMA_ACCESS_LOCAL_WRITE, &pmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, pbuf + 32, 32, RPCRDMA_ACCESS_LOCAL_WRITE, &cread),
		   0);
	memset(&probe, 0, sizeof(probe));
	probe.wr_id = probe_id;
	probe.opcode = RPCRDMA_WR_RDMA_READ;
	probe.flags = RPCRDMA_SEND_SIGNALED;
	probe.num_sge = 1;
	probe.sg_list = &ps;
	stag = rpcrdma_mr_rkey(tmr);
	to = rpcrdma_mr_remote_offset(tmr);
	memset(&w, 0, sizeof(w));
	w.wr_id = 1;
	s = sge_of(lmr, local, 100);
	w.sg_list = &s;
	w.num_sge = 1;
	w.opcode = RPCRDMA_WR_RDMA_WRITE;
	w.flags = RPCRDMA_SEND_SIGNALED;
	switch (v) {
	case V_BAD_STAG: {
		/* another index with the same key byte: one the victim's
		 * table does not hold for its PD and QP (keys are random: a
		 * neighbour, e.g. ro_mr, may have drawn the same byte, and
		 * would draw an access error instead) */
		struct soft_qp *vq = RR_CONTAINER_OF(RR_BASE(qp, p.s.qp), struct soft_qp, base);
		uint32_t k = 1;

		while (rr_mrt_check(&vq->ctx->mrt, stag ^ k << 8, to, 0, RPCRDMA_ACCESS_REMOTE_WRITE,
				    &vq->pd->base, &vq->base, NULL) != -ENOENT)
			k++;
		stag ^= k << 8;
		break;
	}
	case V_BOUNDS: to += 2000; break;
	case V_NO_WRITE: stag = rpcrdma_mr_rkey(ro_mr); to = rpcrdma_mr_remote_offset(ro_mr); break;
	case V_OTHER_PD: stag = rpcrdma_mr_rkey(omr); to = rpcrdma_mr_remote_offset(omr); break;
	case V_INVALIDATED: {
		/* a window bound on the server QP, invalidated locally */
		struct rpcrdma_mw *mw;
		struct rpcrdma_mr *bmr;

		struct rpcrdma_send_wr b = {.wr_id = 9, .opcode = RPCRDMA_WR_BIND_MW,
					    .flags = RPCRDMA_SEND_SIGNALED};
		struct rpcrdma_send_wr li = {.wr_id = 10, .opcode = RPCRDMA_WR_LOCAL_INV,
					     .flags = RPCRDMA_SEND_SIGNALED};

		REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, target + 1024, 512, RPCRDMA_ACCESS_LOCAL_WRITE |
						 RPCRDMA_ACCESS_MW_BIND, &bmr), 0);
		REQUIRE_EQ(rpcrdma_mw_alloc(p.s.pd, &mw), 0);
		g_mw = mw;
		g_bmr = bmr;
		b.u.bind.mw = mw;
		b.u.bind.mr = bmr;
		b.u.bind.addr = (uintptr_t)target + 1024;
		b.u.bind.length = 512;
		b.u.bind.access = RPCRDMA_ACCESS_REMOTE_WRITE;
		REQUIRE_EQ(rpcrdma_post_send(p.s.qp, &b, NULL), 0);
		REQUIRE_EQ(wait_wc(p.s.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		stag = rpcrdma_mw_rkey(mw);
		li.u.local_inv.stag = stag;
		REQUIRE_EQ(rpcrdma_post_send(p.s.qp, &li, NULL), 0);
		REQUIRE_EQ(wait_wc(p.s.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		to = rpcrdma_mw_remote_offset(mw);
		break;
	}
	case V_NO_READ:
		w.opcode = RPCRDMA_WR_RDMA_READ;
		stag = rpcrdma_mr_rkey(ro_mr);
		to = rpcrdma_mr_remote_offset(ro_mr);
		break;
	case V_READ_BOUNDS:
		w.opcode = RPCRDMA_WR_RDMA_READ;
		to += 1990;
		break;
	case V_EXCESS_READS: {
		/* Our ORD limits us; raise it past the peer's IRD to misbehave. */
		struct soft_qp *q = RR_CONTAINER_OF(RR_BASE(qp, p.c.qp), struct soft_qp, base);
		struct soft_qp *r = RR_CONTAINER_OF(RR_BASE(qp, p.s.qp), struct soft_qp, base);

		/* play a peer that ignores the IRD it was given: the server
		 * answers at most 0 outstanding (as after a Linux-style IRD 0
		 * reply) and the client's ORD is raised past it */
		r->ird = 0;
		q->ord = 8;
		w.opcode = RPCRDMA_WR_RDMA_READ;
		break;
	}
	case V_INV_MR: {
		struct rpcrdma_recv_wr rw = {.wr_id = 5, .sg_list = &s, .num_sge = 1};

		/* the server invalidates the client's long-lived MR; its probe
		 * reads the client's lmr... which has no remote right: were
		 * the Send With Invalidate accepted, the probe would still fail,
		 * but with another status and code */
		REQUIRE_EQ(rpcrdma_post_recv(p.c.qp, &rw, NULL), 0);
		w.opcode = RPCRDMA_WR_SEND_WITH_INV;
		w.num_sge = 0;
		w.u.send.invalidate_stag = rpcrdma_mr_rkey(lmr);
		ps = sge_of(cread, pbuf + 32, 4);
		probe.u.rdma.stag = rpcrdma_mr_rkey(lmr);
		probe.u.rdma.remote_offset = (uintptr_t)local;
		w.next = &probe;
		REQUIRE_EQ(rpcrdma_post_send(p.s.qp, &w, NULL), 0);
		goto wait;
	}
	}
	w.u.rdma.stag = stag;
	w.u.rdma.remote_offset = to;
	if (v == V_EXCESS_READS) {
		struct rpcrdma_send_wr ws[3];

		for (int i = 0; i < 3; i++) {
			ws[i] = w;
			ws[i].wr_id = 50 + i;
			ws[i].next = i < 2 ? &ws[i + 1] : NULL;
		}
		s.length = 10;
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, ws, NULL), 0);
	} else {
		if (w.opcode == RPCRDMA_WR_RDMA_WRITE) {
			ps = sge_of(pmr, pbuf, 4);
			probe.u.rdma.stag = rpcrdma_mr_rkey(tmr);
			probe.u.rdma.remote_offset = (uintptr_t)target;
			w.next = &probe;
		}
		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &w, NULL), 0);
	}
wait:
	/* wait until both QPs are in error and the culprit's error completion
	 * is in */
	cq_ = RR_CONTAINER_OF(RR_BASE(qp, p.c.qp), struct soft_qp, base);
	sq_ = RR_CONTAINER_OF(RR_BASE(qp, p.s.qp), struct soft_qp, base);
	for (uint64_t dl = rr_test_deadline();
	     (qp_state(cq_) != QPS_ERROR || qp_state(sq_) != QPS_ERROR || !cw.errors) &&
	     rr_test_wait_left(dl, "both QPs in error and the culprit's error completion");) {
		culprit_poll(v == V_INV_MR ? p.s.cq : p.c.cq, &cw, probe_id);
		rpcrdma_cq_poll(v == V_INV_MR ? p.c.cq : p.s.cq, 1, &wc);
		usleep(1000);
	}
	culprit_poll(v == V_INV_MR ? p.s.cq : p.c.cq, &cw, probe_id);
	{
		struct soft_qp *victim = v == V_INV_MR ? cq_ : sq_;
		struct soft_qp *culprit = v == V_INV_MR ? sq_ : cq_;

		CHECK_EQ(qp_state(victim), QPS_ERROR);
		CHECK_EQ(qp_state(culprit), QPS_ERROR);
		CHECK(victim->rx.term_valid);
		CHECK_EQ(victim->rx.term.layer, layer);
		CHECK_EQ(victim->rx.term.etype, etype);
		CHECK_EQ(victim->rx.term.ecode, ecode);
		/* the culprit received that Terminate, in the RFC layout */
		REQUIRE(culprit->peer_term_valid);
		CHECK(!culprit->peer_term.siw_layout);
		CHECK_EQ(culprit->peer_term.layer, layer);
		CHECK_EQ(culprit->peer_term.etype, etype);
		CHECK_EQ(culprit->peer_term.ecode, ecode);
	}
	/* no memory access happened */
	for (size_t i = 0; i < sizeof(target); i++)
		if (target[i] != 0x11) {
			CHECK(target[i] == 0x11);
			break;
		}
	for (size_t i = 0; i < sizeof(other); i++)
		if (other[i] != 0x22) {
			CHECK(other[i] == 0x22);
			break;
		}
	if (v != V_EXCESS_READS && v != V_INV_MR)
		for (size_t i = 0; i < sizeof(local); i++)
			if (local[i] != 0x77) {
				CHECK(local[i] == 0x77);
				break;
			}
	/* the culprit's completions: the violating Read, or the probe behind
	 * the violating Write or Send, failed with the Terminate's status
	 * and code; the probe never succeeded */
	CHECK(cw.errors >= 1);
	CHECK(!cw.probe_ok);
	CHECK_EQ(cw.first_err.status, st);
	CHECK_EQ(cw.first_err.vendor_err, (uint32_t)layer << 16 | (uint32_t)etype << 8 | ecode);
	CHECK_EQ(cw.first_err.wr_id, w.opcode == RPCRDMA_WR_RDMA_READ ? (v == V_EXCESS_READS ? 50 : 1)
								      : probe_id);
	{
		struct rpcrdma_mr *mrs[] = {lmr, tmr, ro_mr, omr, pmr, cread};

		for (int i = 0; i < 6; i++)
			if (mrs[i] == omr) {
				CHECK_EQ(rpcrdma_dereg_mr(omr), 0);
				mrs[i] = NULL;
			}
		CHECK_EQ(rpcrdma_pd_free(opd), 0);
		if (g_mw) {
			CHECK_EQ(rpcrdma_mw_free(g_mw), 0);
			CHECK_EQ(rpcrdma_dereg_mr(g_bmr), 0);
			g_mw = NULL;
		}
		pair_down(&p, mrs, 6);
	}
}

TEST(soft_violation_invalid_stag)
{
	violation(V_BAD_STAG, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_bounds)
{
	violation(V_BOUNDS, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_BOUNDS, RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_no_remote_write)
{
	violation(V_NO_WRITE, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_ACCESS,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
/* Another PD's STag draws the same Terminate as an unknown one: a peer's
 * sweep cannot tell STags that exist (docs/security.md "No oracle"). */
TEST(soft_violation_other_pd)
{
	violation(V_OTHER_PD, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_invalidated_window)
{
	violation(V_INVALIDATED, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_no_remote_read)
{
	violation(V_NO_READ, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_ACCESS,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_read_bounds)
{
	violation(V_READ_BOUNDS, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_BOUNDS,
		  RPCRDMA_WC_REM_ACCESS_ERR);
}
TEST(soft_violation_excess_reads)
{
	violation(V_EXCESS_READS, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_CATA_STREAM,
		  RPCRDMA_WC_REM_INV_REQ_ERR);
}
TEST(soft_violation_invalidate_long_lived_mr)
{
	violation(V_INV_MR, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_CANNOT_INVALIDATE,
		  RPCRDMA_WC_INV_STAG_ERR);
}

/* ---- RDMA Commit ---- */

/* Child: responder exposing a durable file mapping; reports port and STag
 * through @wfd, then serves until killed. */
static void commit_child(int wfd, const char *path)
{
	struct pair p;
	struct rpcrdma_durable_map map;
	struct rpcrdma_mr_attr a;
	struct rpcrdma_mr *mr;
	struct rpcrdma_cm_event ev;
	struct rpcrdma_conn_param sp = {.responder_resources = 4, .initiator_depth = 4,
					.flags = RPCRDMA_CONN_COMMIT};
	uint64_t info[3];

	memset(&p, 0, sizeof(p));
	if (rpcrdma_open("soft", NULL, &p.ctx) || rpcrdma_durable_map(path, 1 << 20, &map))
		_exit(2);
	ep_make(&p, &p.s);
	listen_on(&p);
	if (rpcrdma_durable_mr_attr(&map, map.addr, 1 << 20, RPCRDMA_ACCESS_LOCAL_WRITE |
				    RPCRDMA_ACCESS_REMOTE_WRITE, &a) || rpcrdma_reg_mr(p.s.pd, &a, &mr))
		_exit(3);
	info[0] = p.port;
	info[1] = rpcrdma_mr_rkey(mr);
	info[2] = rpcrdma_mr_remote_offset(mr);
	if (write(wfd, info, sizeof(info)) != sizeof(info))
		_exit(4);
	if (wait_cm(p.ch, &ev) || ev.type != RPCRDMA_CM_CONNECT_REQUEST)
		_exit(5);
	if (rpcrdma_accept(ev.id, p.s.qp, &sp))
		_exit(6);
	for (;;)
		pause();
}

TEST(soft_commit_durable_survives_sigkill)
{
	char path[] = "/tmp/rr-commit-XXXXXX";
	int pfd[2], fd = mkstemp(path);
	pid_t pid;
	uint64_t info[3];
	struct pair p;
	static uint8_t data[300000];
	struct rpcrdma_mr *lmr;
	struct rpcrdma_wc wc;
	struct rpcrdma_cm_event ev;
	int status;

	REQUIRE(fd >= 0);
	close(fd);
	REQUIRE_EQ(pipe(pfd), 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		commit_child(pfd[1], path);
		_exit(0);
	}
	close(pfd[1]);
	REQUIRE_EQ(read(pfd[0], info, sizeof(info)), (ssize_t)sizeof(info));
	close(pfd[0]);
	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(p.ctx, &p.ch), 0);
	{
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					.sin_port = htons((uint16_t)info[0])};
		struct rpcrdma_conn_param cp = {.responder_resources = 4, .initiator_depth = 4,
						.flags = RPCRDMA_CONN_COMMIT};

		REQUIRE_EQ(rpcrdma_connect(p.ch, p.c.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL,
					   &p.c.id), 0);
		REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
		REQUIRE_EQ(rpcrdma_qp_set_commit(p.c.qp, true), 0);
	}
	fill(data, sizeof(data), 77);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, data, sizeof(data), RPCRDMA_ACCESS_LOCAL_WRITE, &lmr), 0);
	{
		struct rpcrdma_sge s = sge_of(lmr, data, sizeof(data));
		struct rpcrdma_remote_region rg = {.stag = (uint32_t)info[1], .length = sizeof(data),
						   .offset = info[2] + 4096};
		struct rpcrdma_send_wr c = {.wr_id = 2, .opcode = RPCRDMA_WR_RDMA_COMMIT,
					    .flags = RPCRDMA_SEND_SIGNALED,
					    .u.commit = {.regions = &rg, .num_regions = 1}};
		struct rpcrdma_send_wr w = {.wr_id = 1, .sg_list = &s, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_WRITE, .next = &c,
					    .u.rdma = {.remote_offset = info[2] + 4096, .stag = (uint32_t)info[1]}};

		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &w, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		kill(pid, SIGKILL); /* right after the Commit Response */
		CHECK_EQ(wc.wr_id, 2);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_COMMIT);
		CHECK_EQ(wc.remote_status, 0);
	}
	REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	{
		FILE *f = fopen(path, "rb");
		static uint8_t back[300000];

		REQUIRE(f);
		REQUIRE_EQ(fseek(f, 4096, SEEK_SET), 0);
		REQUIRE_EQ(fread(back, 1, sizeof(back), f), sizeof(back));
		fclose(f);
		CHECK_MEM(back, data, sizeof(data));
	}
	unlink(path);
	{
		struct rpcrdma_mr *mrs[] = {lmr};
		struct rpcrdma_pd *pc = p.c.pd;

		ep_free(&p.c);
		CHECK_EQ(rpcrdma_dereg_mr(mrs[0]), 0);
		CHECK_EQ(rpcrdma_pd_free(pc), 0);
		CHECK_EQ(rpcrdma_cm_channel_destroy(p.ch), 0);
		CHECK_EQ(rpcrdma_close(p.ctx), 0);
	}
}

TEST(soft_commit_not_durable_status)
{
	struct pair p;
	static uint8_t target[4096];
	struct rpcrdma_mr *tmr;
	struct rpcrdma_wc wc;
	struct rpcrdma_remote_region rg;
	struct rpcrdma_send_wr c = {.wr_id = 7, .opcode = RPCRDMA_WR_RDMA_COMMIT,
				    .flags = RPCRDMA_SEND_SIGNALED};

	pair_up(&p, RPCRDMA_CONN_COMMIT, RPCRDMA_CONN_COMMIT);
	REQUIRE_EQ(rpcrdma_qp_set_commit(p.c.qp, true), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, target, sizeof(target), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &tmr), 0);
	rg = (struct rpcrdma_remote_region){rpcrdma_mr_rkey(tmr), 100, rpcrdma_mr_remote_offset(tmr)};
	c.u.commit.regions = &rg;
	c.u.commit.num_regions = 1;
	REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &c, NULL), 0);
	REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_COMMIT_ERR);
	CHECK_EQ(wc.remote_status, SOFT_COMMIT_NOT_DURABLE);
	/* no Terminate: the connection still works (draft 5.1) */
	REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &c, NULL), 0);
	REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
	CHECK_EQ(wc.remote_status, SOFT_COMMIT_NOT_DURABLE);
	{
		struct rpcrdma_mr *mrs[] = {tmr};

		pair_down(&p, mrs, 1);
	}
}

/* Commit levels on the soft provider: it has one Commit, which persists, so
 * it reports no RPCRDMA_CAP_COMMIT_VISIBLE, refuses a visibility-only
 * registration, and carries an RPCRDMA_SEND_VISIBLE Commit as its persistent
 * Commit (a durable region: Status 0; a plain one: "not durable"). */
TEST(soft_commit_visible_levels)
{
	struct pair p;
	char path[] = "/tmp/rr-commit-vis-XXXXXX";
	int fd = mkstemp(path);
	struct rpcrdma_durable_map map;
	struct rpcrdma_mr_attr a;
	struct rpcrdma_caps caps;
	static uint8_t plain[4096], src[64];
	struct rpcrdma_mr *dmr = NULL, *pmr, *smr, *bad;
	struct rpcrdma_remote_region rg;
	struct rpcrdma_wc wc;
	struct rpcrdma_sge sg;
	struct rpcrdma_send_wr c = {.wr_id = 9, .opcode = RPCRDMA_WR_RDMA_COMMIT,
				    .flags = RPCRDMA_SEND_SIGNALED | RPCRDMA_SEND_VISIBLE};
	struct rpcrdma_send_wr w = {.wr_id = 8, .opcode = RPCRDMA_WR_RDMA_WRITE,
				    .flags = RPCRDMA_SEND_SIGNALED | RPCRDMA_SEND_VISIBLE};

	REQUIRE(fd >= 0);
	close(fd);
	pair_up(&p, RPCRDMA_CONN_COMMIT, RPCRDMA_CONN_COMMIT);
	REQUIRE_EQ(rpcrdma_qp_set_commit(p.c.qp, true), 0);
	REQUIRE_EQ(rpcrdma_query(p.ctx, &caps), 0);
	CHECK(caps.flags & RPCRDMA_CAP_COMMIT);
	CHECK(!(caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE));
	REQUIRE_EQ(rpcrdma_durable_map(path, 65536, &map), 0);
	REQUIRE_EQ(rpcrdma_durable_mr_attr(&map, map.addr, 65536, RPCRDMA_ACCESS_LOCAL_WRITE |
					   RPCRDMA_ACCESS_REMOTE_WRITE, &a), 0);
	a.flags = RPCRDMA_MR_VISIBLE;
	CHECK_EQ(rpcrdma_reg_mr(p.s.pd, &a, &bad), -EOPNOTSUPP);
	a.flags = RPCRDMA_MR_VISIBLE | RPCRDMA_MR_DURABLE;
	REQUIRE_EQ(rpcrdma_reg_mr(p.s.pd, &a, &dmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, plain, sizeof(plain), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &pmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, src, sizeof(src), RPCRDMA_ACCESS_LOCAL_WRITE, &smr), 0);
	/* the flag belongs to Commits only */
	sg = sge_of(smr, src, sizeof(src));
	w.sg_list = &sg;
	w.num_sge = 1;
	w.u.rdma.stag = rpcrdma_mr_rkey(dmr);
	w.u.rdma.remote_offset = rpcrdma_mr_remote_offset(dmr);
	CHECK_EQ(rpcrdma_post_send(p.c.qp, &w, NULL), -EINVAL);
	/* durable region: the visibility Commit persisted it, Status 0 */
	rg = (struct rpcrdma_remote_region){rpcrdma_mr_rkey(dmr), 4096, rpcrdma_mr_remote_offset(dmr)};
	c.u.commit.regions = &rg;
	c.u.commit.num_regions = 1;
	REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &c, NULL), 0);
	REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_COMMIT);
	/* plain region: the same answer as a persistent Commit gets */
	rg = (struct rpcrdma_remote_region){rpcrdma_mr_rkey(pmr), 100, rpcrdma_mr_remote_offset(pmr)};
	REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &c, NULL), 0);
	REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_COMMIT_ERR);
	CHECK_EQ(wc.remote_status, SOFT_COMMIT_NOT_DURABLE);
	{
		struct rpcrdma_mr *mrs[] = {dmr, pmr, smr};

		pair_down(&p, mrs, 3);
	}
	CHECK_EQ(rpcrdma_durable_unmap(&map), 0);
	unlink(path);
}

TEST(soft_reject_with_private_data)
{
	struct pair p;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_cm_event ev;

	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	listen_on(&p);
	a.sin_port = htons(p.port);
	REQUIRE_EQ(rpcrdma_connect(p.ch, p.c.qp, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &p.c.id), 0);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	REQUIRE_EQ(rpcrdma_reject(ev.id, "go away", 7), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(ev.id), 0);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_REJECTED);
	CHECK_EQ(ev.status, -ECONNREFUSED);
	REQUIRE_EQ(ev.private_data_len, 7);
	CHECK_MEM(ev.private_data, "go away", 7);
	{
		struct rpcrdma_pd *pc = p.c.pd;

		ep_free(&p.c);
		CHECK_EQ(rpcrdma_pd_free(pc), 0);
		rpcrdma_cm_id_destroy(p.listen);
		CHECK_EQ(rpcrdma_cm_channel_destroy(p.ch), 0);
		CHECK_EQ(rpcrdma_close(p.ctx), 0);
	}
}

TEST(soft_mpa_timeout_on_silent_peer)
{
	/* a TCP listener that never answers the MPA Request */
	struct pair p;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct rpcrdma_conn_param cp = {.timeout_ms = 300};
	struct rpcrdma_cm_event ev;

	REQUIRE(lfd >= 0);
	REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(lfd, 1), 0);
	REQUIRE_EQ(getsockname(lfd, (struct sockaddr *)&a, &l), 0);
	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(p.ctx, &p.ch), 0);
	REQUIRE_EQ(rpcrdma_connect(p.ch, p.c.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &p.c.id), 0);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_UNREACHABLE);
	CHECK_EQ(ev.status, -ETIMEDOUT);
	close(lfd);
	{
		struct rpcrdma_pd *pc = p.c.pd;

		ep_free(&p.c);
		CHECK_EQ(rpcrdma_pd_free(pc), 0);
		CHECK_EQ(rpcrdma_cm_channel_destroy(p.ch), 0);
		CHECK_EQ(rpcrdma_close(p.ctx), 0);
	}
}

/* ---- Commit enablement (no MPA bit; the upper layer decides) ---- */

static bool conn_has_commit(struct rpcrdma_cm_id *id)
{
	struct rpcrdma_conn_info ci;

	REQUIRE_EQ(rpcrdma_conn_query(id, &ci), 0);
	return ci.caps.flags & RPCRDMA_CAP_COMMIT;
}

/* Posts a Commit of the first 16 bytes of @tmr (registered on the other
 * side) from @from and returns its completion status. */
static enum rpcrdma_wc_status post_commit(struct ep *from, struct rpcrdma_mr *tmr, int *post_rc)
{
	struct rpcrdma_remote_region rg = {rpcrdma_mr_rkey(tmr), 16, rpcrdma_mr_remote_offset(tmr)};
	struct rpcrdma_send_wr c = {.wr_id = 33, .opcode = RPCRDMA_WR_RDMA_COMMIT,
				    .flags = RPCRDMA_SEND_SIGNALED,
				    .u.commit = {.regions = &rg, .num_regions = 1}};
	struct rpcrdma_wc wc;

	*post_rc = rpcrdma_post_send(from->qp, &c, NULL);
	if (*post_rc)
		return RPCRDMA_WC_GENERAL_ERR;
	REQUIRE_EQ(wait_wc(from->cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 33);
	return wc.status;
}

TEST(soft_commit_enabled_both_ways)
{
	struct pair p;
	static uint8_t ct[64], st[64];
	struct rpcrdma_mr *cmr, *smr;
	int rc;

	pair_up(&p, RPCRDMA_CONN_COMMIT, RPCRDMA_CONN_COMMIT);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, ct, sizeof(ct), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &cmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, st, sizeof(st), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &smr), 0);
	/* responder agreed at accept: may send at once; the initiator only
	 * offered: it serves Commits but may not post one yet */
	CHECK(conn_has_commit(p.s.id));
	CHECK(!conn_has_commit(p.c.id));
	CHECK_EQ(post_commit(&p.s, cmr, &rc), RPCRDMA_WC_COMMIT_ERR); /* not durable: Status 1 */
	CHECK_EQ(rc, 0);
	post_commit(&p.c, smr, &rc);
	CHECK_EQ(rc, -EOPNOTSUPP);
	/* the upper layer saw the peer's accept data agree */
	REQUIRE_EQ(rpcrdma_qp_set_commit(p.c.qp, true), 0);
	CHECK(conn_has_commit(p.c.id));
	CHECK_EQ(post_commit(&p.c, smr, &rc), RPCRDMA_WC_COMMIT_ERR);
	CHECK_EQ(rc, 0);
	{
		struct soft_qp *a = RR_CONTAINER_OF(RR_BASE(qp, p.c.qp), struct soft_qp, base);
		struct soft_qp *b = RR_CONTAINER_OF(RR_BASE(qp, p.s.qp), struct soft_qp, base);

		CHECK_EQ(a->state, QPS_RTS);
		CHECK_EQ(b->state, QPS_RTS);
	}
	{
		struct rpcrdma_mr *mrs[] = {cmr, smr};

		pair_down(&p, mrs, 2);
	}
}

/* One side did not enable Commit: the other's Commit Request gets the
 * unexpected-opcode Terminate, as from siw. @responder_disabled: the
 * responder accepted without RPCRDMA_CONN_COMMIT and the initiator forces
 * Commit on; otherwise the initiator did not offer and the responder
 * forces it on. */
static void commit_one_side(bool responder_disabled)
{
	struct pair p;
	static uint8_t tg[64];
	struct rpcrdma_mr *tmr;
	struct ep *from, *to;
	struct soft_qp *victim, *culprit;
	int rc;

	memset(tg, 0x33, sizeof(tg));
	if (responder_disabled)
		pair_up(&p, RPCRDMA_CONN_COMMIT, 0);
	else
		pair_up(&p, 0, RPCRDMA_CONN_COMMIT);
	from = responder_disabled ? &p.c : &p.s;
	to = responder_disabled ? &p.s : &p.c;
	CHECK(!conn_has_commit(responder_disabled ? p.s.id : p.c.id));
	CHECK_EQ(conn_has_commit(p.s.id), !responder_disabled);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(to->pd, tg, sizeof(tg), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &tmr), 0);
	if (responder_disabled) {
		post_commit(from, tmr, &rc);
		CHECK_EQ(rc, -EOPNOTSUPP); /* not enabled: refused locally */
		REQUIRE_EQ(rpcrdma_qp_set_commit(from->qp, true), 0);
	}
	CHECK_EQ(post_commit(from, tmr, &rc), RPCRDMA_WC_REM_INV_REQ_ERR);
	CHECK_EQ(rc, 0);
	victim = RR_CONTAINER_OF(RR_BASE(qp, to->qp), struct soft_qp, base);
	culprit = RR_CONTAINER_OF(RR_BASE(qp, from->qp), struct soft_qp, base);
	for (uint64_t dl = rr_test_deadline();
	     qp_state(victim) != QPS_ERROR && rr_test_wait_left(dl, "the victim QP in error");)
		usleep(1000);
	CHECK_EQ(qp_state(victim), QPS_ERROR);
	CHECK(victim->rx.term_valid);
	CHECK_EQ(victim->rx.term.layer, RR_TL_RDMAP);
	CHECK_EQ(victim->rx.term.etype, RR_RDMAP_ET_OPERATION);
	CHECK_EQ(victim->rx.term.ecode, RR_RDMAP_EC_OPCODE);
	REQUIRE(culprit->peer_term_valid);
	CHECK_EQ(culprit->peer_term.ecode, RR_RDMAP_EC_OPCODE);
	for (size_t i = 0; i < sizeof(tg); i++)
		CHECK_EQ(tg[i], 0x33);
	{
		struct rpcrdma_mr *mrs[] = {tmr};

		pair_down(&p, mrs, 1);
	}
}

TEST(soft_commit_responder_disabled_terminates)
{
	commit_one_side(true);
}

TEST(soft_commit_initiator_disabled_terminates)
{
	commit_one_side(false);
}

/* Writes an MPA Request of @cfg on raw TCP socket @fd. */
static void raw_request(int fd, const struct rr_mpa_cfg *cfg)
{
	struct rr_mpa_frame f;
	uint8_t out[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	int n;

	REQUIRE_EQ(rr_mpa_make_request(cfg, NULL, 0, &f), 0);
	n = rr_mpa_encode(&f, out, sizeof(out));
	REQUIRE(n > 0);
	REQUIRE_EQ(write(fd, out, (size_t)n), n);
}

/* The MPA Request and Reply of a Commit-offering connection keep the
 * reserved flag bits zero (RFC 5044 section 7.1). */
TEST(soft_commit_mpa_reserved_bits_zero)
{
	struct pair p;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd, cfd;
	struct rpcrdma_conn_param cp = {.flags = RPCRDMA_CONN_COMMIT | RPCRDMA_CONN_SOFT_CRC,
					.timeout_ms = 2000};
	struct rpcrdma_cm_event ev;
	uint8_t req[RR_MPA_HDR_LEN + 4];
	struct rr_mpa_cfg cfg = {.rev = 2, .ird = 4, .ord = 4};

	/* our Request, read by a raw TCP listener */
	REQUIRE(lfd >= 0);
	REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(lfd, 1), 0);
	REQUIRE_EQ(getsockname(lfd, (struct sockaddr *)&a, &l), 0);
	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	ep_make(&p, &p.s);
	listen_on(&p);
	REQUIRE_EQ(rpcrdma_connect(p.ch, p.c.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &p.c.id), 0);
	fd = accept(lfd, NULL, NULL);
	REQUIRE(fd >= 0);
	REQUIRE_EQ(recv(fd, req, sizeof(req), MSG_WAITALL), (ssize_t)sizeof(req));
	CHECK_EQ(req[16] & 0x0f, 0);
	CHECK_EQ(req[16] & RR_MPA_F_CRC, RR_MPA_F_CRC);
	close(fd);
	close(lfd);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	CHECK(ev.type == RPCRDMA_CM_UNREACHABLE || ev.type == RPCRDMA_CM_ERROR);
	rpcrdma_cm_id_destroy(p.c.id);
	p.c.id = NULL;
	/* our Reply, to a raw TCP client */
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons(p.port);
	REQUIRE_EQ(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	raw_request(cfd, &cfg);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	p.s.id = ev.id;
	CHECK(conn_has_commit(p.s.id)); /* the provider could carry it */
	REQUIRE_EQ(rpcrdma_accept(p.s.id, p.s.qp, &cp), 0);
	REQUIRE_EQ(recv(cfd, req, sizeof(req), MSG_WAITALL), (ssize_t)sizeof(req));
	CHECK_EQ(req[16] & 0x0f, 0);
	CHECK(conn_has_commit(p.s.id));
	close(cfd);
	pair_down(&p, NULL, 0);
}

/* A passive connection's peer is the address accept gave (issue 16 part
 * Y: no getpeername per question on the listener's path to its Reply):
 * still known once the peer reset the connection, which getpeername
 * refuses (ENOTCONN). */
TEST(soft_passive_peer_address_from_accept)
{
	struct pair p;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	struct sockaddr_storage ss;
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	struct rpcrdma_cm_event ev;
	struct rr_mpa_cfg cfg = {.rev = 1, .ird = 4, .ord = 4};
	int cfd;

	memset(&p, 0, sizeof(p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p.ctx), 0);
	ep_make(&p, &p.c);
	ep_make(&p, &p.s);
	listen_on(&p);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(cfd >= 0);
	a.sin_port = htons(p.port);
	REQUIRE_EQ(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(getsockname(cfd, (struct sockaddr *)&me, &ml), 0);
	raw_request(cfd, &cfg);
	REQUIRE_EQ(wait_cm(p.ch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	REQUIRE_EQ(rpcrdma_cm_peer_addr(ev.id, &ss), 0);
	CHECK_EQ(ss.ss_family, AF_INET);
	CHECK_MEM(&((struct sockaddr_in *)&ss)->sin_addr, &me.sin_addr, sizeof(me.sin_addr));
	CHECK_EQ(((struct sockaddr_in *)&ss)->sin_port, me.sin_port);
	/* reset by the peer: the address is still the one accept gave */
	REQUIRE_EQ(setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(cfd);
	memset(&ss, 0, sizeof(ss));
	REQUIRE_EQ(rpcrdma_cm_peer_addr(ev.id, &ss), 0);
	CHECK_EQ(((struct sockaddr_in *)&ss)->sin_port, me.sin_port);
	(void)rpcrdma_reject(ev.id, NULL, 0);
	rpcrdma_cm_id_destroy(ev.id);
	pair_down(&p, NULL, 0);
}

/* Tagged Offsets are not addresses (docs/security.md "No oracle"): the soft
 * provider draws an MR's and a window's offsets at random, two
 * registrations of the same bytes get unrelated offsets, and remote access
 * works through them. */
TEST(soft_remote_offsets_are_not_addresses)
{
	struct pair p;
	static uint8_t buf[8192], got[64];
	struct rpcrdma_mr *a, *b, *lmr;
	struct rpcrdma_wc wc;

	pair_up(&p, 0, 0);
	memset(buf, 0x5a, sizeof(buf));
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &a), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &b), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, got, sizeof(got), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &lmr), 0);
	CHECK(rpcrdma_mr_remote_offset(a) != (uint64_t)(uintptr_t)buf);
	CHECK(rpcrdma_mr_remote_offset(b) != (uint64_t)(uintptr_t)buf);
	CHECK(rpcrdma_mr_remote_offset(a) != rpcrdma_mr_remote_offset(b));
	/* the page offset is kept, the page number is not */
	CHECK_EQ(rpcrdma_mr_remote_offset(a) & 0xfff, (uint64_t)(uintptr_t)buf & 0xfff);
	{
		struct rpcrdma_sge s = sge_of(lmr, got, sizeof(got));
		struct rpcrdma_send_wr r = {.wr_id = 1, .sg_list = &s, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_READ,
					    .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.stag = rpcrdma_mr_rkey(a),
						       .remote_offset = rpcrdma_mr_remote_offset(a) + 100}};

		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &r, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(got[0], 0x5a);
	}
	{
		struct rpcrdma_mr *mrs[] = {a, b, lmr};

		pair_down(&p, mrs, 3);
	}
}

/* A region no remote access can reach (no REMOTE_READ, REMOTE_WRITE or
 * MW_BIND: the source of a Reply's Writes) gets a fixed Tagged Offset
 * (mr_table.h rr_mrt_local_to: 2^32 plus the page offset, no random bytes
 * drawn), which tells no address either; one with MW_BIND alone still gets
 * random ones; a peer's RDMA Read through the local region's STag at that
 * offset is refused (a remote access error, nothing read). */
TEST(soft_local_only_offsets_fixed_and_refused)
{
	struct pair p;
	static uint8_t buf[8192], got[64];
	struct rpcrdma_mr *a, *b, *w1, *w2, *lmr;
	struct rpcrdma_wc wc;
	uint64_t fixed = (1ull << 32) | ((uint64_t)(uintptr_t)buf & 0xfff);

	pair_up(&p, 0, 0);
	memset(buf, 0x5a, sizeof(buf));
	memset(got, 0, sizeof(got));
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &a), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), 0, &b), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_MW_BIND, &w1), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_MW_BIND, &w2), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.pd, got, sizeof(got), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &lmr), 0);
	CHECK_EQ(rpcrdma_mr_remote_offset(a), fixed);
	CHECK_EQ(rpcrdma_mr_remote_offset(b), fixed);
	CHECK(rpcrdma_mr_remote_offset(w1) != rpcrdma_mr_remote_offset(w2));
	CHECK_EQ(rpcrdma_mr_remote_offset(w1) & 0xfff, (uint64_t)(uintptr_t)buf & 0xfff);
	{
		struct rpcrdma_sge s = sge_of(lmr, got, sizeof(got));
		struct rpcrdma_send_wr r = {.wr_id = 1, .sg_list = &s, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_READ,
					    .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.stag = rpcrdma_mr_rkey(a),
						       .remote_offset = fixed + 100}};

		REQUIRE_EQ(rpcrdma_post_send(p.c.qp, &r, NULL), 0);
		REQUIRE_EQ(wait_wc(p.c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_REM_ACCESS_ERR);
		CHECK_EQ(got[0], 0);
	}
	{
		struct rpcrdma_mr *mrs[] = {a, b, w1, w2, lmr};

		pair_down(&p, mrs, 5);
	}
}
