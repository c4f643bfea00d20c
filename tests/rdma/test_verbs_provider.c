/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the rdma-core provider through the public API (rdma.h):
 *  - without RDMA devices (this build host), opening "verbs" answers -ENODEV,
 *    and an unknown device name always does;
 *  - with devices (the lab VM, kernel siw / rxe), a two-context loopback
 *    over rdma_cm: private data both ways (RFC 8797 block), IRD/ORD, Send,
 *    RDMA Write, RDMA Read, memory-window bind + Send With Invalidate with
 *    IBV_WC_WITH_INV where the device has type 2 windows, local
 *    invalidation, reject with private data, disconnect with flushes.
 *    Enabled by RR_VERBS_SERVER_DEV / RR_VERBS_SERVER_ADDR /
 *    RR_VERBS_CLIENT_DEV / RR_VERBS_CLIENT_ADDR (e.g. siw1 192.0.2.2 siw0
 *    192.0.2.1); without them it checks nothing more and says so.
 *    In the lab VM (../shared/lab/vm-lab.sh, after `lab_net both`):
 *      RR_VERBS_SERVER_DEV=siw1 RR_VERBS_SERVER_ADDR=192.0.2.2 \
 *      RR_VERBS_CLIENT_DEV=siw0 RR_VERBS_CLIENT_ADDR=192.0.2.1 \
 *        ./rr-tests rdma_verbs_loopback      (and rxe1 .4 / rxe0 .3)
 *    Passed on Linux 6.1 siw and rxe with rdma-core 44 (2026-11-22).
 *  - the same, shared receive queues (rdma_verbs_srq). */
#include "test.h"
#include "rpcrdma/rdma.h"
#ifdef RPCRDMA_HAVE_VERBS
#include "rdma/verbs/verbs.h" /* verbs_counters, the granted CQ size */
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

static bool host_has_rdma_devices(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			any = true;
	closedir(d);
	return any;
}

TEST(rdma_verbs_open_without_devices)
{
	struct rpcrdma_context *ctx = (void *)1;
	struct rpcrdma_open_attr a = {.device = "no-such-device9"};
	int rc;

	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_VERBS)) {
		/* built without rdma-core: the name is unknown */
		CHECK_EQ(rpcrdma_open(RPCRDMA_PROVIDER_VERBS, NULL, &ctx), -ENOENT);
		return;
	}
	CHECK_EQ(rpcrdma_open(RPCRDMA_PROVIDER_VERBS, &a, &ctx), -ENODEV);
	CHECK(ctx == NULL);
	rc = rpcrdma_open(RPCRDMA_PROVIDER_VERBS, NULL, &ctx);
	if (!host_has_rdma_devices()) {
		CHECK_EQ(rc, -ENODEV);
		CHECK(ctx == NULL);
	} else if (rc == 0) {
		struct rpcrdma_caps caps;

		REQUIRE_EQ(rpcrdma_query(ctx, &caps), 0);
		CHECK(strcmp(caps.provider, "verbs") == 0);
		CHECK(caps.max_private_data_connect >= 56);
		/* Commit (FLUSH, rdma-core >= 45) comes with durable
		 * registrations and a region limit, or not at all */
		CHECK(!!(caps.flags & (RPCRDMA_CAP_COMMIT | RPCRDMA_CAP_COMMIT_VISIBLE)) ==
		      (caps.max_commit_regions > 0));
		CHECK(!!(caps.flags & RPCRDMA_CAP_COMMIT) == !!(caps.flags & RPCRDMA_CAP_DURABLE));
		CHECK(caps.commit[0] != 0);
		/* remote invalidation only with windows */
		CHECK(!(caps.flags & RPCRDMA_CAP_REMOTE_INV) ||
		      (caps.flags & RPCRDMA_CAP_INVALIDATABLE));
		CHECK_EQ(rpcrdma_close(ctx), 0);
	}
}

/* ---- loopback over real devices (lab) ---- */

struct side {
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *id;
	struct rpcrdma_caps caps;
	uint8_t *buf;
	struct rpcrdma_mr *mr;
	struct rpcrdma_cm_event q[4]; /* events taken while waiting for the peer */
	int nq;
};

static void side_up(struct side *s, const char *dev)
{
	struct rpcrdma_open_attr oa = {.device = dev};
	struct rpcrdma_cq_attr ca = {.cqe = 64};
	struct rpcrdma_qp_attr qa = {0};

	memset(s, 0, sizeof(*s));
	REQUIRE_EQ(rpcrdma_open(RPCRDMA_PROVIDER_VERBS, &oa, &s->ctx), 0);
	REQUIRE_EQ(rpcrdma_query(s->ctx, &s->caps), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(s->ctx, &s->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(s->ctx, &ca, &s->cq), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(s->ctx, &s->ch), 0);
	qa.send_cq = qa.recv_cq = s->cq;
	qa.max_send_wr = qa.max_recv_wr = 16;
	qa.max_send_sge = qa.max_recv_sge = 1;
	REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &s->qp), 0);
	s->buf = calloc(1, 65536);
	REQUIRE(s->buf);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s->pd, s->buf, 65536,
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_READ |
					 RPCRDMA_ACCESS_REMOTE_WRITE |
					 ((s->caps.flags & RPCRDMA_CAP_INVALIDATABLE)
						  ? RPCRDMA_ACCESS_MW_BIND : 0),
					 &s->mr), 0);
}

static void side_down(struct side *s)
{
	if (s->id)
		CHECK_EQ(rpcrdma_cm_id_destroy(s->id), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s->qp), 0);
	CHECK_EQ(rpcrdma_dereg_mr(s->mr), 0);
	CHECK_EQ(rpcrdma_cq_destroy(s->cq), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(s->ch), 0);
	CHECK_EQ(rpcrdma_pd_free(s->pd), 0);
	CHECK_EQ(rpcrdma_close(s->ctx), 0);
	free(s->buf);
}

/* Waits up to 10 s for the next CM event of @me, also polling @other's
 * channel (rdma_cm advances a connecting side's resolution only inside its
 * own rpcrdma_cm_get_event) and queueing what @other gets. */
static int wait_cm(struct side *me, struct side *other, struct rpcrdma_cm_event *ev)
{
	if (me->nq) {
		*ev = me->q[0];
		memmove(me->q, me->q + 1, (size_t)--me->nq * sizeof(me->q[0]));
		return 0;
	}
	for (int i = 0; i < 100; i++) {
		struct pollfd p[2] = {{.fd = rpcrdma_cm_channel_fd(me->ch), .events = POLLIN},
				      {.fd = rpcrdma_cm_channel_fd(other->ch), .events = POLLIN}};
		int rc = rpcrdma_cm_get_event(me->ch, ev);

		if (rc == 0)
			fprintf(stderr, "  cm event: %s status %d pdata %u ird %u ord %u\n",
				rpcrdma_cm_event_str(ev->type), ev->status, ev->private_data_len,
				ev->peer_ird, ev->peer_ord);
		if (rc != -EAGAIN)
			return rc;
		if (other->nq < 4) {
			rc = rpcrdma_cm_get_event(other->ch, &other->q[other->nq]);
			if (rc == 0) {
				other->nq++;
				continue;
			}
			if (rc != -EAGAIN)
				return rc;
		}
		poll(p, 2, 100);
	}
	return -ETIMEDOUT;
}

/* Polls @cq up to 10 s for one completion. */
static int wait_wc(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	for (int i = 0; i < 1000; i++) {
		struct pollfd p = {.fd = rpcrdma_cq_fd(cq), .events = POLLIN};
		int n = rpcrdma_cq_poll(cq, 1, wc);

		if (n != 0)
			return n;
		rpcrdma_cq_arm(cq, false);
		n = rpcrdma_cq_poll(cq, 1, wc);
		if (n != 0)
			return n;
		poll(&p, 1, 10);
		rpcrdma_cq_get_event(cq);
	}
	return -ETIMEDOUT;
}

static void fill_sin(struct sockaddr_in *sin, const char *addr, uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	inet_pton(AF_INET, addr, &sin->sin_addr);
}

/* Both sides on the devices the environment names (RR_VERBS_SERVER_DEV,
 * _ADDR, RR_VERBS_CLIENT_DEV, _ADDR: the lab, docs/interop.md); the test is
 * skipped without them. */
static void sides_up(struct side *s, struct side *c, const char **saddr, const char **caddr)
{
	const char *sdev = getenv("RR_VERBS_SERVER_DEV"), *cdev = getenv("RR_VERBS_CLIENT_DEV");

	*saddr = getenv("RR_VERBS_SERVER_ADDR");
	*caddr = getenv("RR_VERBS_CLIENT_ADDR");
	if (!rpcrdma_provider_available("verbs"))
		rr_test_skip("verbs provider not built in");
	if (!sdev || !*saddr || !cdev || !*caddr)
		rr_test_skip("RR_VERBS_SERVER_DEV/_ADDR, RR_VERBS_CLIENT_DEV/_ADDR not set "
			     "(needs two RDMA devices: the lab, docs/interop.md)");
	side_up(s, sdev);
	side_up(c, cdev);
}

static const uint8_t cli_pd[8] = {0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03};
static const uint8_t srv_pd[8] = {0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00, 0x03, 0x03};

TEST(rdma_verbs_loopback)
{
	const char *saddr, *caddr;
	struct side s, c;
	struct rpcrdma_cm_id *lid;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in sin, csin;
	struct sockaddr_storage ss;
	struct rpcrdma_conn_param cp = {0};
	struct rpcrdma_wc wc;
	struct rpcrdma_conn_info info;

	sides_up(&s, &c, &saddr, &caddr);
	CHECK(strcmp(c.caps.device, getenv("RR_VERBS_CLIENT_DEV")) == 0);
	CHECK_EQ(c.caps.max_private_data_connect,
		 c.caps.transport == RPCRDMA_TRANSPORT_IWARP ? 252 : 56);
	fill_sin(&sin, saddr, 0);
	REQUIRE_EQ(rpcrdma_listen(s.ch, (struct sockaddr *)&sin, sizeof(sin), 4, &s, &lid), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(lid, &ss), 0);
	sin.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	CHECK(sin.sin_port != 0);

	/* 1: reject with private data */
	fill_sin(&csin, caddr, 0);
	cp.private_data = cli_pd;
	cp.private_data_len = 8;
	/* asymmetric, as the Linux NFS client (IRD 128, ORD 0): the peer's
	 * values must arrive as its IRD and ORD, not swapped */
	cp.responder_resources = 6;
	cp.initiator_depth = 3;
	cp.src_addr = (struct sockaddr *)&csin;
	cp.src_addrlen = sizeof(csin);
	{
		struct rpcrdma_qp *qp2;
		struct rpcrdma_qp_attr qa = {.send_cq = c.cq, .recv_cq = c.cq, .max_send_wr = 4,
					     .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};
		struct rpcrdma_cm_id *cid;

		REQUIRE_EQ(rpcrdma_qp_create(c.pd, &qa, &qp2), 0);
		REQUIRE_EQ(rpcrdma_connect(c.ch, qp2, (struct sockaddr *)&sin, sizeof(sin), &cp,
					   NULL, &cid), 0);
		REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
		CHECK(ev.listen_id == lid);
		CHECK(ev.user_ctx == &s);
		REQUIRE(ev.private_data_len >= 8);
		CHECK_MEM(ev.private_data, cli_pd, 8);
		struct rpcrdma_cm_id *rid = ev.id;

		REQUIRE_EQ(rpcrdma_reject(rid, "nope", 4), 0);
		REQUIRE_EQ(wait_cm(&c, &s, &ev), 0);
		CHECK_EQ(ev.type, RPCRDMA_CM_REJECTED);
		if (ev.type == RPCRDMA_CM_REJECTED && ev.private_data_len >= 4)
			CHECK_MEM(ev.private_data, "nope", 4);
		CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
		CHECK_EQ(rpcrdma_qp_destroy(qp2), 0);
		CHECK_EQ(rpcrdma_cm_id_destroy(rid), 0);
	}

	/* 2: connect, accept */
	{
		struct rpcrdma_sge sge = {(uintptr_t)c.buf, 1024, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_recv_wr rw = {.wr_id = 77, .sg_list = &sge, .num_sge = 1};
		struct rpcrdma_sge ssge = {(uintptr_t)s.buf, 1024, rpcrdma_mr_lkey(s.mr)};
		struct rpcrdma_recv_wr srw = {.wr_id = 88, .sg_list = &ssge, .num_sge = 1};

		/* receives before connecting are held and posted later */
		REQUIRE_EQ(rpcrdma_post_recv(c.qp, &rw, NULL), 0);
		REQUIRE_EQ(rpcrdma_post_recv(s.qp, &srw, NULL), 0);
	}
	REQUIRE_EQ(rpcrdma_connect(c.ch, c.qp, (struct sockaddr *)&sin, sizeof(sin), &cp, &c,
				   &c.id), 0);
	REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	CHECK_EQ(ev.peer_ird, 6);
	CHECK_EQ(ev.peer_ord, 3);
	s.id = ev.id;
	cp.private_data = srv_pd;
	cp.src_addr = NULL;
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	REQUIRE_EQ(rpcrdma_accept(s.id, s.qp, &cp), 0);
	REQUIRE_EQ(wait_cm(&c, &s, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	CHECK(ev.user_ctx == &c);
	REQUIRE(ev.private_data_len >= 8);
	CHECK_MEM(ev.private_data, srv_pd, 8);
	REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	REQUIRE_EQ(rpcrdma_conn_query(c.id, &info), 0);
	CHECK(info.ord >= 1 && info.ord <= 3);
	{
		struct rpcrdma_conn_info si;

		/* the server may issue 4 (its wish, within the client's IRD 6)
		 * and serves at most 3 (the client's ORD) */
		REQUIRE_EQ(rpcrdma_conn_query(s.id, &si), 0);
		CHECK(si.ord >= 1 && si.ord <= 4);
		CHECK(si.ird <= 3);
	}

	/* Send client -> server */
	memcpy(c.buf + 4096, "hello verbs", 11);
	{
		struct rpcrdma_sge sge = {(uintptr_t)c.buf + 4096, 11, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_send_wr w = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
					    .opcode = RPCRDMA_WR_SEND,
					    .flags = RPCRDMA_SEND_SIGNALED};

		REQUIRE_EQ(rpcrdma_post_send(c.qp, &w, NULL), 0);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_SEND);
		CHECK(wc.qp == c.qp);
		REQUIRE_EQ(wait_wc(s.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 88);
		CHECK_EQ(wc.byte_len, 11);
		CHECK_MEM(s.buf, "hello verbs", 11);
	}
	/* RDMA Write then Read client -> server MR */
	memcpy(c.buf + 8192, "written-by-client", 17);
	{
		struct rpcrdma_sge sge = {(uintptr_t)c.buf + 8192, 17, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_send_wr w = {.wr_id = 2, .sg_list = &sge, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_WRITE,
					    .flags = RPCRDMA_SEND_SIGNALED};
		struct rpcrdma_sge rs = {(uintptr_t)c.buf + 12288, 17, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_send_wr r = {.wr_id = 3, .sg_list = &rs, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_READ,
					    .flags = RPCRDMA_SEND_SIGNALED};

		w.u.rdma.remote_offset = rpcrdma_mr_remote_offset(s.mr) + 20000;
		w.u.rdma.stag = rpcrdma_mr_rkey(s.mr);
		r.u.rdma = w.u.rdma;
		w.next = &r;
		REQUIRE_EQ(rpcrdma_post_send(c.qp, &w, NULL), 0);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RDMA_WRITE);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RDMA_READ);
		CHECK_MEM(s.buf + 20000, "written-by-client", 17);
		CHECK_MEM(c.buf + 12288, "written-by-client", 17);
	}
	/* RDMA Commit = InfiniBand FLUSH where the library, kernel and device
	 * have it (rdma-core >= 45, Linux rxe >= 6.2); else refused */
	fprintf(stderr, "  device %s: RDMA Commit: %s\n", c.caps.device, c.caps.commit);
	{
		static uint8_t target[8192];
		struct rpcrdma_mr *tmr = NULL;
		struct rpcrdma_mr_attr ta = {.addr = target, .length = sizeof(target),
					     .access = RPCRDMA_ACCESS_LOCAL_WRITE |
						       RPCRDMA_ACCESS_REMOTE_WRITE,
					     .flags = RPCRDMA_MR_VISIBLE, .durable_fd = -1};
		struct rpcrdma_sge sge = {(uintptr_t)c.buf + 8192, 17, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_remote_region rg = {0, 17, (uintptr_t)target + 100};
		struct rpcrdma_send_wr cm = {.wr_id = 11, .opcode = RPCRDMA_WR_RDMA_COMMIT,
					     .flags = RPCRDMA_SEND_SIGNALED | RPCRDMA_SEND_VISIBLE,
					     .u.commit = {.regions = &rg, .num_regions = 1}};
		struct rpcrdma_send_wr w = {.wr_id = 10, .sg_list = &sge, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_WRITE, .next = &cm};

		if (c.caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE) {
			/* connected without RPCRDMA_CONN_COMMIT: not yet */
			CHECK_EQ(rpcrdma_post_send(c.qp, &cm, NULL), -EOPNOTSUPP);
			REQUIRE_EQ(rpcrdma_qp_set_commit(c.qp, true), 0);
			REQUIRE_EQ(rpcrdma_reg_mr(s.pd, &ta, &tmr), 0);
			rg.stag = rpcrdma_mr_rkey(tmr);
			w.u.rdma.remote_offset = (uintptr_t)target + 100;
			w.u.rdma.stag = rg.stag;
			REQUIRE_EQ(rpcrdma_post_send(c.qp, &w, NULL), 0);
			REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
			CHECK_EQ(wc.wr_id, 11);
			CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
			CHECK_EQ(wc.opcode, RPCRDMA_WC_COMMIT);
			CHECK_MEM(target + 100, "written-by-client", 17);
			CHECK_EQ(rpcrdma_dereg_mr(tmr), 0);
		} else {
			CHECK_EQ(rpcrdma_reg_mr(s.pd, &ta, &tmr), -EOPNOTSUPP);
			CHECK_EQ(rpcrdma_qp_set_commit(c.qp, true),
				 (c.caps.flags & RPCRDMA_CAP_COMMIT) ? 0 : -EOPNOTSUPP);
			CHECK_EQ(rpcrdma_post_send(c.qp, &cm, NULL), -EOPNOTSUPP);
		}
		if (c.caps.flags & RPCRDMA_CAP_DURABLE) {
			/* ordinary memory: the device decides (rxe: persistent
			 * memory only, -EOPNOTSUPP here) */
			char path[] = "/tmp/rr-verbs-durable-XXXXXX";
			int fd = mkstemp(path);
			struct rpcrdma_durable_map map;
			struct rpcrdma_mr_attr da;
			int rc;

			REQUIRE(fd >= 0);
			close(fd);
			REQUIRE_EQ(rpcrdma_durable_map(path, 65536, &map), 0);
			REQUIRE_EQ(rpcrdma_durable_mr_attr(&map, map.addr, 65536,
							   RPCRDMA_ACCESS_LOCAL_WRITE |
							   RPCRDMA_ACCESS_REMOTE_WRITE, &da), 0);
			rc = rpcrdma_reg_mr(s.pd, &da, &tmr);
			fprintf(stderr, "  device %s: durable registration of a file: %s\n",
				s.caps.device, rc ? rpcrdma_strerror(rc) : "accepted");
			CHECK(rc == 0 || rc == -EOPNOTSUPP);
			if (rc == 0)
				CHECK_EQ(rpcrdma_dereg_mr(tmr), 0);
			CHECK_EQ(rpcrdma_durable_unmap(&map), 0);
			unlink(path);
		}
	}
	/* window + Send With Invalidate from the server, where supported */
	if (c.caps.flags & RPCRDMA_CAP_INVALIDATABLE) {
		struct rpcrdma_mw *mw;
		struct rpcrdma_sge sge = {(uintptr_t)c.buf, 1024, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_recv_wr rw = {.wr_id = 99, .sg_list = &sge, .num_sge = 1};
		struct rpcrdma_send_wr b = {.wr_id = 4, .opcode = RPCRDMA_WR_BIND_MW,
					    .flags = RPCRDMA_SEND_SIGNALED};
		uint32_t before, stag;

		REQUIRE_EQ(rpcrdma_mw_alloc(c.pd, &mw), 0);
		before = rpcrdma_mw_rkey(mw);
		b.u.bind.mw = mw;
		b.u.bind.mr = c.mr;
		b.u.bind.addr = (uintptr_t)c.buf + 32768;
		b.u.bind.length = 4096;
		b.u.bind.access = RPCRDMA_ACCESS_REMOTE_WRITE;
		REQUIRE_EQ(rpcrdma_post_send(c.qp, &b, NULL), 0);
		stag = rpcrdma_mw_rkey(mw);
		CHECK(stag != before);
		CHECK_EQ(stag >> 8, before >> 8);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		REQUIRE_EQ(rpcrdma_post_recv(c.qp, &rw, NULL), 0);
		{
			struct rpcrdma_sge s4 = {(uintptr_t)s.buf, 4, rpcrdma_mr_lkey(s.mr)};
			struct rpcrdma_send_wr w = {.wr_id = 5, .sg_list = &s4, .num_sge = 1,
						    .opcode = RPCRDMA_WR_SEND_WITH_INV,
						    .flags = RPCRDMA_SEND_SIGNALED};

			w.u.send.invalidate_stag = stag;
			REQUIRE_EQ(rpcrdma_post_send(s.qp, &w, NULL), 0);
			REQUIRE_EQ(wait_wc(s.cq, &wc), 1);
			CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		}
		/* lands in the first receive posted (77, before connecting) */
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 77);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
		CHECK(wc.flags & RPCRDMA_WC_WITH_INV);
		CHECK_EQ(wc.invalidated_stag, stag);
		/* the window really was invalidated: a type 2 window binds
		 * again only when invalid; then a local invalidate */
		before = stag;
		REQUIRE_EQ(rpcrdma_post_send(c.qp, &b, NULL), 0);
		stag = rpcrdma_mw_rkey(mw);
		CHECK(stag != before);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_BIND_MW);
		{
			struct rpcrdma_send_wr li = {.wr_id = 6, .opcode = RPCRDMA_WR_LOCAL_INV,
						     .flags = RPCRDMA_SEND_SIGNALED};

			li.u.local_inv.stag = stag;
			REQUIRE_EQ(rpcrdma_post_send(c.qp, &li, NULL), 0);
			REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
			CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
			CHECK_EQ(wc.opcode, RPCRDMA_WC_LOCAL_INV);
		}
		CHECK_EQ(rpcrdma_mw_free(mw), 0);
	} else {
		struct rpcrdma_mw *mw;

		fprintf(stderr, "  device %s: no type 2 windows (remote invalidation off)\n",
			c.caps.device);
		CHECK_EQ(rpcrdma_mw_alloc(c.pd, &mw), -EOPNOTSUPP);
	}
	/* disconnect: DISCONNECTED on both sides, posted receive flushed */
	REQUIRE_EQ(rpcrdma_disconnect(c.id), 0);
	REQUIRE_EQ(wait_cm(&c, &s, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
	REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
	/* the client's receive still posted is flushed */
	REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK(wc.wr_id == 77 || wc.wr_id == 99);
	CHECK_EQ(rpcrdma_cm_id_destroy(lid), 0);
	/* a channel with ids left is busy */
	CHECK_EQ(rpcrdma_cm_channel_destroy(c.ch), -EBUSY);
	side_down(&c);
	side_down(&s);
}

/* Shared receive queues on real devices (the lab: siw and rxe): two
 * connections whose server QPs share one SRQ of the server's PD; Sends on
 * both take its Receives in the order posted, each completion naming its
 * QP; the limit event (IBV_EVENT_SRQ_LIMIT_REACHED, read from the
 * context's asynchronous events) fires once below the armed limit; a QP of
 * another PD is refused (no RPCRDMA_CAP_SRQ_ANY_PD) and there is no receive
 * quota. Same environment variables as rdma_verbs_loopback. */
TEST(rdma_verbs_srq)
{
	const char *saddr, *caddr;
	struct rpcrdma_srq_attr sa = {.max_wr = 16, .max_sge = 1};
	struct rpcrdma_qp *sqp[2], *cqp[2], *other;
	struct rpcrdma_cm_id *sid[2], *cid[2], *lid;
	struct rpcrdma_qp_attr qa = {0};
	struct rpcrdma_cm_event ev;
	struct rpcrdma_conn_param cp = {0};
	struct sockaddr_in sin, csin;
	struct sockaddr_storage ss;
	struct rpcrdma_pd *pd2;
	struct rpcrdma_srq *srq;
	struct rpcrdma_wc wc;
	struct side s, c;
	bool fired = false;

	sides_up(&s, &c, &saddr, &caddr);
	if (!(s.caps.flags & RPCRDMA_CAP_SRQ)) {
		side_down(&c);
		side_down(&s);
		rr_test_skip("the server device has no SRQ");
	}
	fprintf(stderr, "  %s: SRQ of up to %u Receives\n", s.caps.device, s.caps.max_srq_wr);
	CHECK(!(s.caps.flags & RPCRDMA_CAP_SRQ_ANY_PD));
	CHECK(!(s.caps.flags & RPCRDMA_CAP_RECV_QUOTA));
	REQUIRE_EQ(rpcrdma_srq_create(s.pd, &sa, &srq), 0);
	qa.send_cq = qa.recv_cq = s.cq;
	qa.max_send_wr = 8;
	qa.max_send_sge = 1;
	qa.srq = srq;
	REQUIRE_EQ(rpcrdma_pd_alloc(s.ctx, &pd2), 0);
	CHECK_EQ(rpcrdma_qp_create(pd2, &qa, &other), -EINVAL);
	CHECK_EQ(rpcrdma_pd_free(pd2), 0);
	fill_sin(&sin, saddr, 0);
	REQUIRE_EQ(rpcrdma_listen(s.ch, (struct sockaddr *)&sin, sizeof(sin), 4, &s, &lid), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(lid, &ss), 0);
	sin.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	fill_sin(&csin, caddr, 0);
	cp.private_data = cli_pd;
	cp.private_data_len = 8;
	cp.responder_resources = cp.initiator_depth = 4;
	cp.src_addr = (struct sockaddr *)&csin;
	cp.src_addrlen = sizeof(csin);
	for (int i = 0; i < 2; i++) {
		struct rpcrdma_qp_attr ca = {.send_cq = c.cq, .recv_cq = c.cq, .max_send_wr = 8,
					     .max_recv_wr = 8, .max_send_sge = 1,
					     .max_recv_sge = 1};

		REQUIRE_EQ(rpcrdma_qp_create(s.pd, &qa, &sqp[i]), 0);
		CHECK_EQ(rpcrdma_qp_recv_quota(sqp[i], 1), -EOPNOTSUPP);
		REQUIRE_EQ(rpcrdma_qp_create(c.pd, &ca, &cqp[i]), 0);
		REQUIRE_EQ(rpcrdma_connect(c.ch, cqp[i], (struct sockaddr *)&sin, sizeof(sin), &cp,
					   NULL, &cid[i]), 0);
		REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
		sid[i] = ev.id;
		cp.private_data = srv_pd;
		REQUIRE_EQ(rpcrdma_accept(sid[i], sqp[i], &cp), 0);
		cp.private_data = cli_pd;
		REQUIRE_EQ(wait_cm(&c, &s, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
		REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	}
	for (uint64_t id = 0; id < 6; id++) {
		struct rpcrdma_sge sge = {(uintptr_t)s.buf + id * 1024, 1024, rpcrdma_mr_lkey(s.mr)};
		struct rpcrdma_recv_wr rw = {.wr_id = 500 + id, .sg_list = &sge, .num_sge = 1};

		REQUIRE_EQ(rpcrdma_post_srq_recv(srq, &rw, NULL), 0);
	}
	REQUIRE_EQ(rpcrdma_srq_arm_limit(srq, 3), 0);
	for (unsigned k = 0; k < 4; k++) {
		unsigned i = k % 2;
		struct rpcrdma_sge sge = {(uintptr_t)c.buf + 8192 + k * 64, 40,
					  rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_send_wr w = {.wr_id = 600 + k, .sg_list = &sge, .num_sge = 1,
					    .opcode = RPCRDMA_WR_SEND,
					    .flags = RPCRDMA_SEND_SIGNALED};

		memset(c.buf + 8192 + k * 64, 'a' + (int)k, 40);
		REQUIRE_EQ(rpcrdma_post_send(cqp[i], &w, NULL), 0);
		REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		REQUIRE_EQ(wait_wc(s.cq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 500 + k);
		CHECK(wc.qp == sqp[i]);
		CHECK_EQ(wc.byte_len, 40);
		CHECK_EQ(s.buf[k * 1024], 'a' + (int)k);
		if (k < 3)
			CHECK_EQ(rpcrdma_srq_get_event(srq), 0);   /* >= 3 left */
	}
	/* 2 left now, below 3: the event (asynchronous: give it a moment) */
	for (int t = 0; t < 100 && !fired; t++) {
		fired = rpcrdma_srq_get_event(srq) == 1;
		if (!fired)
			poll(NULL, 0, 10);
	}
	CHECK(fired);
	CHECK_EQ(rpcrdma_srq_get_event(srq), 0);
	CHECK_EQ(rpcrdma_srq_destroy(srq), -EBUSY);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(rpcrdma_disconnect(cid[i]), 0);
		CHECK_EQ(rpcrdma_cm_id_destroy(cid[i]), 0);
		CHECK_EQ(rpcrdma_cm_id_destroy(sid[i]), 0);
		CHECK_EQ(rpcrdma_qp_destroy(cqp[i]), 0);
		CHECK_EQ(rpcrdma_qp_destroy(sqp[i]), 0);
	}
	CHECK_EQ(rpcrdma_cm_id_destroy(lid), 0);
	CHECK_EQ(rpcrdma_srq_destroy(srq), 0);
	side_down(&c);
	side_down(&s);
}

/* Connects @cqp of @c to @sqp of @s through the listener @lid (its address
 * in @sin), with the RFC 8797 blocks both ways; the ids in @cid and @sid. */
static void pair_connect(struct side *s, struct side *c, const struct sockaddr_in *sin,
			 const char *caddr, struct rpcrdma_qp *sqp, struct rpcrdma_qp *cqp,
			 struct rpcrdma_cm_id **sid, struct rpcrdma_cm_id **cid)
{
	struct rpcrdma_conn_param cp = {.private_data = cli_pd, .private_data_len = 8,
					.responder_resources = 4, .initiator_depth = 4};
	struct rpcrdma_cm_event ev;
	struct sockaddr_in csin;

	fill_sin(&csin, caddr, 0);
	cp.src_addr = (struct sockaddr *)&csin;
	cp.src_addrlen = sizeof(csin);
	REQUIRE_EQ(rpcrdma_connect(c->ch, cqp, (const struct sockaddr *)sin, sizeof(*sin), &cp,
				   NULL, cid), 0);
	REQUIRE_EQ(wait_cm(s, c, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	*sid = ev.id;
	cp.private_data = srv_pd;
	cp.src_addr = NULL;
	REQUIRE_EQ(rpcrdma_accept(*sid, sqp, &cp), 0);
	REQUIRE_EQ(wait_cm(c, s, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	REQUIRE_EQ(wait_cm(s, c, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
}

#ifdef RPCRDMA_HAVE_VERBS
/* The CQ admission rule on a device (docs/rdma-provider.md "CQ sizing"):
 * against the capacity the device granted (siw rounds a CQ up to a power
 * of two, rxe to one less than a power of two), a QP whose queues fill
 * the CQ is taken, one more entry is refused -ENOSPC until the first QP is
 * destroyed; an SRQ's Receives are not counted (the consumer bounds them,
 * as on soft). */
static void cq_sizing_on_device(struct side *s)
{
	struct rpcrdma_cq_attr ca = {.cqe = 16};
	struct rpcrdma_qp *a, *b, *d;
	struct rpcrdma_srq *srq;
	struct rpcrdma_cq *cq;
	uint32_t g;

	REQUIRE_EQ(rpcrdma_cq_create(s->ctx, &ca, &cq), 0);
	g = RR_BASE(cq, cq)->cqe;
	fprintf(stderr, "  %s: a CQ of 16 is granted %u entries\n", s->caps.device, g);
	REQUIRE(g >= 16);
	{
		struct rpcrdma_qp_attr qa = {.send_cq = cq, .recv_cq = cq, .max_send_wr = g / 2,
					     .max_recv_wr = g - g / 2, .max_send_sge = 1,
					     .max_recv_sge = 1};
		struct rpcrdma_qp_attr qb = qa;

		qb.max_send_wr = 1;
		qb.max_recv_wr = 1;
		REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &a), 0);
		CHECK_EQ(rpcrdma_qp_create(s->pd, &qb, &b), -ENOSPC);
		CHECK_EQ(rpcrdma_qp_destroy(a), 0);
		REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qb, &b), 0);
		CHECK_EQ(rpcrdma_qp_destroy(b), 0);
	}
	if (s->caps.flags & RPCRDMA_CAP_SRQ) {
		/* an SRQ's Receives are not counted (the consumer bounds them:
		 * an SRQ deeper than the CQ is fine); two QPs of it sending
		 * g / 2 each fill the CQ, one more send entry does not fit */
		struct rpcrdma_srq_attr sa = {.max_wr = 4 * g, .max_sge = 1};
		struct rpcrdma_qp_attr qa = {.send_cq = cq, .recv_cq = cq,
					     .max_send_wr = g / 2, .max_send_sge = 1};
		struct rpcrdma_qp_attr qd = {.send_cq = cq, .recv_cq = cq, .max_send_wr = 1,
					     .max_send_sge = 1};

		REQUIRE_EQ(rpcrdma_srq_create(s->pd, &sa, &srq), 0);
		qa.srq = qd.srq = srq;
		REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &a), 0);
		qa.max_send_wr = g - g / 2;
		REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &b), 0);
		CHECK_EQ(rpcrdma_qp_create(s->pd, &qd, &d), -ENOSPC);
		CHECK_EQ(rpcrdma_qp_destroy(b), 0);
		REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qd, &d), 0);
		CHECK_EQ(rpcrdma_qp_destroy(d), 0);
		CHECK_EQ(rpcrdma_qp_destroy(a), 0);
		CHECK_EQ(rpcrdma_srq_destroy(srq), 0);
	}
	CHECK_EQ(rpcrdma_cq_destroy(cq), 0);
}
#endif

/* Asynchronous errors on real devices (docs/interop.md "Asynchronous
 * errors on verbs://"): the CQ admission rule, then a QP access error: the
 * client RDMA-Writes to a registration the server has deregistered (an
 * invalidated rkey). Where the device raises a QP event the server's
 * connection ends with that event's errno and qp_errors moves; siw raises
 * none but terminates the connection (DISCONNECTED, status 0, both ends);
 * rxe (Linux 6.1) raises none and keeps the connection: the requester's
 * Write completes REM_ACCESS_ERR and its disconnect ends it. What each
 * device does is printed (the findings of docs/interop.md). Same
 * environment variables as rdma_verbs_loopback. */
TEST(rdma_verbs_async_errors)
{
#ifdef RPCRDMA_HAVE_VERBS
	const char *saddr, *caddr;
	struct rpcrdma_cm_id *lid, *sid, *cid;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in sin;
	struct sockaddr_storage ss;
	struct rpcrdma_mr *gone;
	struct rpcrdma_wc wc;
	struct side s, c;
	uint64_t qp0 = atomic_load(&verbs_counters.qp_errors);
	uint64_t cq0 = atomic_load(&verbs_counters.cq_errors);
	uint64_t qpe;
	uint32_t stag;
	int st[2];
	bool iwarp;

	sides_up(&s, &c, &saddr, &caddr);
	iwarp = c.caps.transport == RPCRDMA_TRANSPORT_IWARP;
	cq_sizing_on_device(&s);
	fill_sin(&sin, saddr, 0);
	REQUIRE_EQ(rpcrdma_listen(s.ch, (struct sockaddr *)&sin, sizeof(sin), 4, &s, &lid), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(lid, &ss), 0);
	sin.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	pair_connect(&s, &c, &sin, caddr, s.qp, c.qp, &sid, &cid);
	s.id = sid;
	c.id = cid;
	/* an rkey the server had and gave up */
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, s.buf + 32768, 4096,
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE,
					 &gone), 0);
	stag = rpcrdma_mr_rkey(gone);
	{
		struct rpcrdma_sge sge = {(uintptr_t)c.buf, 64, rpcrdma_mr_lkey(c.mr)};
		struct rpcrdma_send_wr w = {.wr_id = 41, .sg_list = &sge, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_WRITE,
					    .flags = RPCRDMA_SEND_SIGNALED};

		w.u.rdma.remote_offset = rpcrdma_mr_remote_offset(gone);
		w.u.rdma.stag = stag;
		CHECK_EQ(rpcrdma_dereg_mr(gone), 0);
		REQUIRE_EQ(rpcrdma_post_send(c.qp, &w, NULL), 0);
	}
	REQUIRE_EQ(wait_wc(c.cq, &wc), 1);
	fprintf(stderr, "  %s -> %s: RDMA Write to deregistered stag 0x%08x completes %s "
		"(vendor_err 0x%x)\n", c.caps.device, s.caps.device, stag,
		rpcrdma_wc_status_str(wc.status), wc.vendor_err);
	CHECK_EQ(wc.wr_id, 41);
	if (iwarp) {
		/* an iWARP Write completes once sent; the responder (siw)
		 * answers with a Terminate (DDP, tagged buffer, invalid STag)
		 * and closes: both ends see DISCONNECTED */
		CHECK(wc.status == RPCRDMA_WC_SUCCESS || wc.status == RPCRDMA_WC_REM_ACCESS_ERR);
	} else {
		/* IB: the responder's NAK completes the Write in error, the
		 * requester's QP is in the error state */
		CHECK_EQ(wc.status, RPCRDMA_WC_REM_ACCESS_ERR);
	}
	for (int i = 0; i < 2; i++) {
		bool srv = i == 0;

		st[i] = wait_cm(srv ? &s : &c, srv ? &c : &s, &ev);
		if (st[i] == 0) {
			fprintf(stderr, "  %s (%s): %s status %d\n", srv ? "server" : "client",
				srv ? s.caps.device : c.caps.device,
				rpcrdma_cm_event_str(ev.type), ev.status);
			CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
			st[i] = ev.status;
		} else {
			fprintf(stderr, "  %s: no CM event in 10 s (%d)\n", srv ? "server" : "client",
				st[i]);
			st[i] = 1;
		}
	}
	qpe = atomic_load(&verbs_counters.qp_errors) - qp0;
	fprintf(stderr, "  counters: qp_errors +%llu, cq_errors +%llu\n", (unsigned long long)qpe,
		(unsigned long long)(atomic_load(&verbs_counters.cq_errors) - cq0));
	CHECK_EQ(atomic_load(&verbs_counters.cq_errors), cq0);
	if (qpe) {
		/* the device raised a QP event: the server's connection ended
		 * with its errno (docs/rdma-provider.md "Asynchronous errors"),
		 * and its QP keeps the event as the cause the transport counts
		 * (rpcrdma/stats.h faults: qp_access_errors, ...) */
		enum rr_async_event cause = rr_qp_async_event(s.qp);

		fprintf(stderr, "  server QP's recorded cause: %s\n", rr_async_name(cause));
		CHECK(st[0] == -EACCES || st[0] == -EIO || st[0] == -EPROTO);
		CHECK_EQ(rr_async_action(cause).err, st[0]);
	} else if (iwarp) {
		/* siw raises none: the Terminate ends the connection */
		CHECK_EQ(st[0], 0);
		CHECK_EQ(st[1], 0);
	} else {
		/* rxe (6.1) raises none and nothing disconnects: the
		 * requester, whose Write failed, ends it; both ends hear */
		CHECK_EQ(st[0], 1);
		CHECK_EQ(st[1], 1);
		REQUIRE_EQ(rpcrdma_disconnect(c.id), 0);
		REQUIRE_EQ(wait_cm(&c, &s, &ev), 0);
		CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
		REQUIRE_EQ(wait_cm(&s, &c, &ev), 0);
		CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
	}
	CHECK_EQ(rpcrdma_cm_id_destroy(lid), 0);
	side_down(&c);
	side_down(&s);
#else
	rr_test_skip("built without the rdma-core provider");
#endif
}
