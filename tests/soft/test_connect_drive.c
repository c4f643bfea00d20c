/* SPDX-License-Identifier: BSD-2-Clause */
/* A connect whose creating thread drives its own handshake (issue 16 part
 * G; src/rdma/provider.h connect_drive, src/rdma/soft/cm.c): the MPA
 * exchange runs in the caller's thread and its end comes back to it, not
 * through the channel; a silent peer still meets the handshake deadline;
 * an application cannot ask for it through rpcrdma_connect. And the soft
 * provider's list of the ids with a deadline (the timeouts' walk) holds
 * the handshakes running, not the connections already established. And,
 * on such a connection, the poll that follows an arm (issue 16 part BA);
 * and the socket's set-up for the data path made by the driver while the
 * peer answers, before the Reply (issue 16 part DI). */
#include "test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

struct dep {
	struct soft_ep e;
	struct rpcrdma_cm_id *id;
};

static void dep_make(struct rpcrdma_context *ctx, struct dep *d)
{
	soft_ep_make(ctx, &d->e, 16, 2);
}

static void dep_free(struct dep *d)
{
	if (d->id)
		CHECK_EQ(rpcrdma_cm_id_destroy(d->id), 0);
	soft_ep_free(&d->e);
}

static int wait_ev(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/* The ids on the soft context's timed list (under its lock). */
static unsigned timed_count(struct rpcrdma_context *pctx)
{
	struct soft_ctx *c = RR_CONTAINER_OF(RR_BASE(context, pctx), struct soft_ctx, base);
	unsigned n = 0;

	pthread_mutex_lock(&c->lock);
	for (struct soft_id *id = c->timed; id; id = id->tm_next)
		n++;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* The server side, in its own thread while the client's drives: takes the
 * CONNECT_REQUEST and accepts with private data. */
struct acceptor {
	struct rpcrdma_cm_channel *ch;
	struct dep *s;
	int rc;
	uint16_t req_pd_len;
};

static void *acceptor_main(void *arg)
{
	struct acceptor *a = arg;
	struct rpcrdma_conn_param sp = {.private_data = "world!", .private_data_len = 6,
					.responder_resources = 4, .initiator_depth = 4};
	struct rpcrdma_cm_event ev;

	a->rc = wait_ev(a->ch, &ev, RR_TEST_WAIT_MS);
	if (a->rc)
		return NULL;
	if (ev.type != RPCRDMA_CM_CONNECT_REQUEST) {
		a->rc = -EPROTO;
		return NULL;
	}
	a->req_pd_len = ev.private_data_len;
	a->s->id = ev.id;
	a->rc = rpcrdma_accept(ev.id, a->s->e.qp, &sp);
	return NULL;
}

static struct sockaddr_in listen_addr(struct rpcrdma_cm_id *l)
{
	struct sockaddr_storage ss;
	struct sockaddr_in a;

	REQUIRE_EQ(rpcrdma_cm_local_addr(l, &ss), 0);
	memcpy(&a, &ss, sizeof(a));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A Send of "ping" from @c reaches a Receive posted on @s (both CQs
 * polled by this thread). */
static void ping_flows(struct dep *c, struct dep *s)
{
	static char rbuf[64], sbuf[16] = "ping";
	struct rpcrdma_mr *rmr, *smr;
	struct rpcrdma_sge rs, ss;
	struct rpcrdma_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
	struct rpcrdma_send_wr sw = {.wr_id = 2, .opcode = RPCRDMA_WR_SEND,
				     .flags = RPCRDMA_SEND_SIGNALED, .sg_list = &ss, .num_sge = 1};
	struct rpcrdma_wc wc;
	int got = 0;

	memset(rbuf, 0, sizeof(rbuf));
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s->e.pd, rbuf, sizeof(rbuf), RPCRDMA_ACCESS_LOCAL_WRITE, &rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(c->e.pd, sbuf, sizeof(sbuf), 0, &smr), 0);
	rs = (struct rpcrdma_sge){(uint64_t)(uintptr_t)rbuf, sizeof(rbuf), rpcrdma_mr_lkey(rmr)};
	ss = (struct rpcrdma_sge){(uint64_t)(uintptr_t)sbuf, 4, rpcrdma_mr_lkey(smr)};
	REQUIRE_EQ(rpcrdma_post_recv(s->e.qp, &rw, NULL), 0);
	REQUIRE_EQ(rpcrdma_post_send(c->e.qp, &sw, NULL), 0);
	for (int i = 0; i < 500000 && !got; i++) {
		if (rpcrdma_cq_poll(s->e.cq, 1, &wc) == 1)
			got = 1;
		else
			usleep(10);
	}
	CHECK(got);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 4u);
	CHECK_MEM(rbuf, "ping", 4);
	for (int i = 0; i < 500000; i++) {
		if (rpcrdma_cq_poll(c->e.cq, 1, &wc) == 1)
			break;
		usleep(10);
	}
	CHECK_EQ(rpcrdma_dereg_mr(rmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(smr), 0);
}

TEST(soft_connect_drive_established_in_caller)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *cch, *sch;
	struct rpcrdma_cm_id *l;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.private_data = "hello", .private_data_len = 5,
					.responder_resources = 4, .initiator_depth = 4};
	struct dep c = {0}, s = {0};
	struct acceptor acc = {0};
	struct rpcrdma_cm_event ev;
	pthread_t t;
	bool driven = false;
	int tag = 7;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	dep_make(ctx, &s);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &cch), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &sch), 0);
	REQUIRE_EQ(rpcrdma_listen(sch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &l), 0);
	a = listen_addr(l);

	/* an application cannot set the internal flag */
	{
		struct rpcrdma_conn_param bad = cp;
		struct rpcrdma_cm_id *x = NULL;

		bad.flags = RR_CONN_DRIVEN;
		CHECK_EQ(rpcrdma_connect(cch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &bad, NULL, &x),
			 -EINVAL);
		CHECK(x == NULL);
	}
	acc.ch = sch;
	acc.s = &s;
	REQUIRE_EQ(pthread_create(&t, NULL, acceptor_main, &acc), 0);
	REQUIRE_EQ(rr_cm_connect_driven(cch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, &tag,
					&c.id, &driven), 0);
	CHECK(driven);
	/* its handshake running: on the timed list (with, once the
	 * listener accepted the TCP connection, the server's half-open id) */
	CHECK(timed_count(ctx) >= 1u);
	REQUIRE_EQ(rr_cm_connect_drive(c.id, 5000, &ev), 0);
	/* a second drive of the same id is refused */
	{
		struct rpcrdma_cm_event ev2;

		CHECK_EQ(rr_cm_connect_drive(c.id, 10, &ev2), -EINVAL);
	}
	pthread_join(t, NULL);
	REQUIRE_EQ(acc.rc, 0);
	CHECK_EQ(acc.req_pd_len, 5);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	CHECK_EQ(ev.status, 0);
	CHECK(ev.id == c.id);
	CHECK(ev.user_ctx == &tag);
	CHECK_EQ(ev.private_data_len, 6);
	CHECK_MEM(ev.private_data, "world!", 6);
	/* the end went to the driver, not to the client's channel */
	CHECK_EQ(rpcrdma_cm_get_event(cch, &ev), -EAGAIN);
	/* the server's ESTABLISHED still comes through its channel */
	REQUIRE_EQ(wait_ev(sch, &ev, RR_TEST_WAIT_MS), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	CHECK(ev.id == s.id);

	/* data flows on the driven connection: a Send from the client */
	ping_flows(&c, &s);
	/* established connections are off the timed list after a walk (the
	 * progress thread walks when woken) */
	{
		struct rpcrdma_cm_id *l2;
		struct sockaddr_in b = {.sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		unsigned n = 99;

		/* a listen wakes nobody; a connect to a closed port does and
		 * fails at once, which makes the thread walk the list */
		for (int i = 0; i < RR_TEST_WAIT_MS / 2 && n; i++) {
			struct dep x = {0};
			struct rpcrdma_cm_event e2;

			REQUIRE_EQ(rpcrdma_listen(sch, (struct sockaddr *)&b, sizeof(b), 1, NULL, &l2), 0);
			b = listen_addr(l2);
			CHECK_EQ(rpcrdma_cm_id_destroy(l2), 0);
			dep_make(ctx, &x);
			REQUIRE_EQ(rpcrdma_connect(cch, x.e.qp, (struct sockaddr *)&b, sizeof(b), NULL, NULL,
						   &x.id), 0);
			REQUIRE_EQ(wait_ev(cch, &e2, RR_TEST_WAIT_MS), 0);
			CHECK_EQ(e2.type, RPCRDMA_CM_UNREACHABLE);
			dep_free(&x);
			usleep(2000);
			n = timed_count(ctx);
		}
		CHECK_EQ(n, 0u);
	}
	dep_free(&c);
	dep_free(&s);
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(cch), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(sch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* A plain TCP listener on loopback (a peer that never speaks MPA unless
 * the test does): *@fd listens at *@a. Returns false on any failure. */
static bool raw_listen(struct sockaddr_in *a, int *fd)
{
	socklen_t al = sizeof(*a);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	return *fd >= 0 && bind(*fd, (struct sockaddr *)a, sizeof(*a)) == 0 &&
	       listen(*fd, 4) == 0 && getsockname(*fd, (struct sockaddr *)a, &al) == 0;
}

/* A driven connect to a peer that accepts TCP and never answers the MPA
 * Request ends at the handshake's deadline with the event a plain connect
 * gets, in the caller; one whose caller's own limit comes first gets
 * -ETIMEDOUT and can be destroyed. */
TEST(soft_connect_drive_silent_peer_times_out)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int lfd;
	struct rpcrdma_conn_param cp = {.timeout_ms = 200};
	struct rpcrdma_cm_event ev;
	struct dep c = {0};
	bool driven = false;

	REQUIRE(raw_listen(&a, &lfd));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	REQUIRE_EQ(rr_cm_connect_driven(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id,
					&driven), 0);
	REQUIRE(driven);
	REQUIRE_EQ(rr_cm_connect_drive(c.id, 10000, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_UNREACHABLE);
	CHECK_EQ(ev.status, -ETIMEDOUT);
	CHECK_EQ(rpcrdma_cm_get_event(ch, &ev), -EAGAIN);
	CHECK_EQ(rpcrdma_cm_id_destroy(c.id), 0);
	c.id = NULL;

	/* the caller's limit first (the handshake's is 10 s) */
	cp.timeout_ms = 10000;
	REQUIRE_EQ(rr_cm_connect_driven(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id,
					&driven), 0);
	CHECK_EQ(rr_cm_connect_drive(c.id, 100, &ev), -ETIMEDOUT);
	CHECK_EQ(rpcrdma_cm_id_destroy(c.id), 0);
	c.id = NULL;
	dep_free(&c);   /* (its QP went to error with the id) */
	/* a plain connect's id cannot be driven */
	memset(&c, 0, sizeof(c));
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_connect(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id), 0);
	CHECK_EQ(rr_cm_connect_drive(c.id, 10, &ev), -EINVAL);
	dep_free(&c);
	close(lfd);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* A plain connect destroyed during its handshake (the peer accepted the
 * TCP connection and never answers the MPA Request) closes its socket: the
 * peer reads the end of the stream. The destroy used to drop the id's
 * descriptor without closing it when the id had a QP (as if the QP owned
 * it, which is so only once connected), so the socket leaked and stayed in
 * the progress thread's epoll set naming the freed id (an ASan
 * use-after-free in soft_connect_drive_silent_peer_times_out once the
 * thread stopped walking its set per event). */
TEST(soft_connect_destroyed_in_handshake_closes_its_socket)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.timeout_ms = 10000};
	struct pollfd p;
	struct dep c = {0};
	bool eof = false;
	char buf[256];
	int lfd, afd;

	REQUIRE(raw_listen(&a, &lfd));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	REQUIRE_EQ(rpcrdma_connect(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id), 0);
	p = (struct pollfd){lfd, POLLIN, 0};
	REQUIRE_EQ(poll(&p, 1, RR_TEST_WAIT_MS), 1);
	afd = accept(lfd, NULL, NULL);
	REQUIRE(afd >= 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(c.id), 0);
	c.id = NULL;
	/* the MPA Request (if it was sent), then the end of the stream */
	for (;;) {
		ssize_t n;

		p = (struct pollfd){afd, POLLIN, 0};
		if (poll(&p, 1, RR_TEST_WAIT_MS) != 1)
			break;
		n = recv(afd, buf, sizeof(buf), 0);
		if (n <= 0) {
			eof = n == 0 || errno == ECONNRESET;
			break;
		}
	}
	CHECK(eof);
	close(afd);
	dep_free(&c);
	close(lfd);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* A driven connect whose socket connected at once sends its MPA Request
 * before rr_cm_connect_driven returns, before any drive (the client sets
 * its buffers up while the server reads it: issue 16 part Q); the drive
 * then waits for the Reply, and its end is the same (here a Reject from a
 * raw peer that read the whole Request). */
/* The MPA Request read from the raw peer's socket @sfd into @mp (recv
 * with @flags: MSG_DONTWAIT where it must be there already). */
static void mpa_read_request(int sfd, struct rr_mpa_parser *mp, int flags)
{
	rr_mpa_parser_init(mp, false);
	for (;;) {
		uint8_t *dst;
		size_t w = rr_mpa_want(mp, &dst);
		ssize_t got;
		int r;

		if (!w)
			return;
		got = recv(sfd, dst, w, flags);
		REQUIRE(got > 0);
		r = rr_mpa_advance(mp, (size_t)got);
		REQUIRE(r >= 0);
		if (r == 1)
			return;
	}
}

TEST(soft_connect_drive_request_sent_at_connect)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int lfd, sfd;
	struct rpcrdma_conn_param cp = {.timeout_ms = 5000};
	struct rpcrdma_cm_event ev;
	struct rr_mpa_parser mp;
	struct rr_mpa_frame f;
	struct dep c = {0};
	bool driven = false;
	uint8_t rej[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	int n;

	REQUIRE(raw_listen(&a, &lfd));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	REQUIRE_EQ(rr_cm_connect_driven(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id,
					&driven), 0);
	REQUIRE(driven);
	sfd = accept(lfd, NULL, NULL);
	REQUIRE(sfd >= 0);
	/* the whole Request is there, nobody having driven the handshake */
	mpa_read_request(sfd, &mp, MSG_DONTWAIT);
	REQUIRE_EQ(rr_mpa_parser_frame(&mp, &f), 0);
	CHECK(!f.reply);
	/* the peer refuses it: the drive ends with REJECTED */
	{
		struct rr_mpa_conn conn = {.rev = 1};
		struct rr_mpa_frame rf;

		REQUIRE_EQ(rr_mpa_make_reply(&conn, true, NULL, 0, &rf), 0);
		n = rr_mpa_encode(&rf, rej, sizeof(rej));
		REQUIRE(n > 0);
		REQUIRE_EQ(send(sfd, rej, (size_t)n, 0), n);
	}
	REQUIRE_EQ(rr_cm_connect_drive(c.id, 5000, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_REJECTED);
	CHECK_EQ(rpcrdma_cm_id_destroy(c.id), 0);
	c.id = NULL;
	close(sfd);
	close(lfd);
	dep_free(&c);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* Two endpoints on one soft context, connected by a driven connect with
 * both CQs armed from the start (attended: their QPs stay with this
 * thread), the server's side accepted by acceptor_main. */
struct apair {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *cch, *sch;
	struct rpcrdma_cm_id *l;
	struct dep c, s;
};

/* Sets @p up; *@hands (when given): the context's hand-over count once
 * both CQs are armed, before the connect. */
static void apair_up(struct apair *p, uint64_t *hands)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.responder_resources = 4, .initiator_depth = 4};
	struct acceptor acc = {0};
	struct rpcrdma_cm_event ev;
	bool driven = false;
	pthread_t t;

	memset(p, 0, sizeof(*p));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &p->ctx), 0);
	dep_make(p->ctx, &p->c);
	dep_make(p->ctx, &p->s);
	REQUIRE_EQ(rpcrdma_cm_channel_create(p->ctx, &p->cch), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(p->ctx, &p->sch), 0);
	REQUIRE_EQ(rpcrdma_listen(p->sch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &p->l), 0);
	a = listen_addr(p->l);
	REQUIRE_EQ(rpcrdma_cq_arm(p->c.e.cq, false), 0);
	REQUIRE_EQ(rpcrdma_cq_arm(p->s.e.cq, false), 0);
	if (hands)
		*hands = atomic_load(&RR_CONTAINER_OF(RR_BASE(context, p->ctx), struct soft_ctx,
						      base)->qp_hands);
	acc.ch = p->sch;
	acc.s = &p->s;
	REQUIRE_EQ(pthread_create(&t, NULL, acceptor_main, &acc), 0);
	REQUIRE_EQ(rr_cm_connect_driven(p->cch, p->c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp,
					NULL, &p->c.id, &driven), 0);
	REQUIRE_EQ(rr_cm_connect_drive(p->c.id, 5000, &ev), 0);
	pthread_join(t, NULL);
	REQUIRE_EQ(acc.rc, 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
}

static void apair_down(struct apair *p)
{
	dep_free(&p->c);
	dep_free(&p->s);
	CHECK_EQ(rpcrdma_cm_id_destroy(p->l), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(p->cch), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(p->sch), 0);
	CHECK_EQ(rpcrdma_close(p->ctx), 0);
}

/* A QP whose CQ is attended when its connection comes up (armed: its
 * consumer waits for its notification) stays with that consumer: it is
 * never handed to the provider's thread and taken back, on either side
 * (issue 16 part Y: two epoll_ctl calls per connect on each side, and the
 * add woke the thread). Data still flows, read by the consumer's polls. */
TEST(soft_connect_attended_cq_keeps_its_qp)
{
	struct apair p;
	struct soft_ctx *sc;
	uint64_t h0;

	apair_up(&p, &h0);
	sc = RR_CONTAINER_OF(RR_BASE(context, p.ctx), struct soft_ctx, base);
	CHECK_EQ(atomic_load(&sc->qp_hands) - h0, 0);
	ping_flows(&p.c, &p.s);
	apair_down(&p);
}

/* Posts a Receive on @s and a Send of "ping" from @c, then waits (no time
 * limit but the check's) until @s's CQ fd is readable: the message is in
 * @s's socket, not read yet (nobody polls @s's CQ meanwhile). */
static void ping_in_socket(struct dep *c, struct dep *s, char *rbuf, struct rpcrdma_mr *rmr,
			   struct rpcrdma_mr *smr, const char *sbuf, uint64_t id)
{
	struct rpcrdma_sge rs = {(uint64_t)(uintptr_t)rbuf, 64, rpcrdma_mr_lkey(rmr)};
	struct rpcrdma_sge ss = {(uint64_t)(uintptr_t)sbuf, 4, rpcrdma_mr_lkey(smr)};
	struct rpcrdma_recv_wr rw = {.wr_id = id, .sg_list = &rs, .num_sge = 1};
	struct rpcrdma_send_wr sw = {.wr_id = id, .opcode = RPCRDMA_WR_SEND,
				     .sg_list = &ss, .num_sge = 1};
	struct pollfd pf = {.fd = rpcrdma_cq_fd(s->e.cq), .events = POLLIN};

	REQUIRE_EQ(rpcrdma_post_recv(s->e.qp, &rw, NULL), 0);
	REQUIRE_EQ(rpcrdma_post_send(c->e.qp, &sw, NULL), 0);
	REQUIRE_EQ(poll(&pf, 1, 10000), 1);
}

/* The poll that follows an arm takes what the ring holds only, not what
 * waits in the CQ's sockets (issue 16 part BA: the look was a system call
 * that at 1,000 connections found nothing 5 times in 6): the CQ's fd stays
 * readable for it, so a consumer that waits on the fd is woken and its
 * get_event receives it; and a consumer that polls again is served. */
TEST(soft_poll_after_arm_takes_the_ring_only)
{
	struct apair p;
	struct rpcrdma_mr *rmr, *smr;
	static char rbuf[2][64], sbuf[16] = "ping";
	struct rpcrdma_wc wc;
	struct pollfd pf;

	apair_up(&p, NULL);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.s.e.pd, rbuf, sizeof(rbuf), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(p.c.e.pd, sbuf, sizeof(sbuf), 0, &smr), 0);

	/* a waiting consumer: arm, poll (nothing), the fd readable, get_event
	 * receives, the poll takes it */
	ping_in_socket(&p.c, &p.s, rbuf[1], rmr, smr, sbuf, 2);
	REQUIRE_EQ(rpcrdma_cq_arm(p.s.e.cq, false), 0);
	CHECK_EQ(rpcrdma_cq_poll(p.s.e.cq, 1, &wc), 0); /* the property */
	pf = (struct pollfd){.fd = rpcrdma_cq_fd(p.s.e.cq), .events = POLLIN};
	CHECK_EQ(poll(&pf, 1, 0), 1);
	CHECK(rpcrdma_cq_get_event(p.s.e.cq) >= 0);
	REQUIRE_EQ(rpcrdma_cq_poll(p.s.e.cq, 1, &wc), 1);
	CHECK_EQ(wc.wr_id, 2u);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 4u);
	CHECK_MEM(rbuf[1], "ping", 4);

	/* a polling consumer: arm, poll (nothing), poll again takes it */
	ping_in_socket(&p.c, &p.s, rbuf[0], rmr, smr, sbuf, 3);
	REQUIRE_EQ(rpcrdma_cq_arm(p.s.e.cq, false), 0);
	CHECK_EQ(rpcrdma_cq_poll(p.s.e.cq, 1, &wc), 0); /* the property */
	REQUIRE_EQ(rpcrdma_cq_poll(p.s.e.cq, 1, &wc), 1);
	CHECK_EQ(wc.wr_id, 3u);
	CHECK_EQ(wc.byte_len, 4u);

	CHECK_EQ(rpcrdma_dereg_mr(rmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(smr), 0);
	apair_down(&p);
}

/* A driven connect to a loopback port nobody listens on: the Request's
 * early send (connect_early, which no longer asks poll and SO_ERROR
 * first: issue 16 part BX) takes the refusal from the socket, and the
 * drive must still end with it (UNREACHABLE, -ECONNREFUSED), not with a
 * reset or a wait for the handshake's deadline. (When connect itself
 * already reports the refusal, the connect fails with it instead.) */
TEST(soft_connect_drive_refused_keeps_its_status)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.timeout_ms = 10000};
	struct rpcrdma_cm_event ev;
	struct dep c = {0};
	bool driven = false;
	int lfd, r, drove = 0;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	for (int i = 0; i < 20; i++) {
		socklen_t al = sizeof(a);

		/* a port held bound and never listened on: refused, and no
		 * other socket of the machine can take it meanwhile */
		a.sin_port = 0;
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		REQUIRE(lfd >= 0);
		REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
		REQUIRE_EQ(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
		r = rr_cm_connect_driven(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL,
					 &c.id, &driven);
		if (r) {
			close(lfd);
			CHECK_EQ(r, -ECONNREFUSED);
			continue;
		}
		REQUIRE(driven);
		REQUIRE_EQ(rr_cm_connect_drive(c.id, 5000, &ev), 0);
		CHECK_EQ(ev.type, RPCRDMA_CM_UNREACHABLE);
		CHECK_EQ(ev.status, -ECONNREFUSED);
		CHECK_EQ(rpcrdma_cm_id_destroy(c.id), 0);
		c.id = NULL;
		close(lfd);
		drove++;
	}
	CHECK(drove > 0);   /* the early send's path was exercised */
	dep_free(&c);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* The client's side of a driven connect to a raw peer, in its own thread. */
struct driver {
	struct rpcrdma_cm_id *id;
	struct rpcrdma_cm_event ev;
	int rc;
};

static void *driver_main(void *arg)
{
	struct driver *d = arg;

	d->rc = rr_cm_connect_drive(d->id, RR_TEST_WAIT_MS, &d->ev);
	return NULL;
}

/* Whether the socket (an int *) is blocking. */
static bool sock_blocking(void *arg)
{
	int fl = fcntl(*(int *)arg, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* A driven connect sets its socket up for the data path while the peer
 * answers (issue 16 part DI: drive_prep), not between the Reply and the
 * first Call: once its Request is out and before any Reply, the socket is
 * blocking with the fast wait's receive timeout (fails while go_rdma, at
 * the Reply, is the first to set it: the wait for it runs out); the Reply
 * then establishes the connection with the FPDU size and the fast wait
 * that go_rdma used to find itself. */
TEST(soft_connect_drive_sets_its_socket_up_before_the_reply)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.timeout_ms = RR_TEST_WAIT_MS};
	struct rr_mpa_cfg prov = {.rev = 2, .ird = SOFT_MAX_IRD, .ord = SOFT_MAX_ORD};
	struct rr_mpa_parser mp;
	struct rr_mpa_frame f, rf;
	struct rr_mpa_conn conn;
	struct driver d = {0};
	struct dep c = {0};
	struct soft_qp *q;
	struct timeval tv = {0};
	socklen_t tl = sizeof(tv);
	uint8_t rep[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	bool driven = false;
	pthread_t t;
	int lfd, sfd, cfd, n;

	REQUIRE(raw_listen(&a, &lfd));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	dep_make(ctx, &c);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	REQUIRE_EQ(rr_cm_connect_driven(ch, c.e.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &c.id,
					&driven), 0);
	REQUIRE(driven);
	cfd = id_of(RR_BASE(cm_id, c.id))->obj.fd;   /* fixed until the id goes */
	REQUIRE(cfd >= 0);
	CHECK(!sock_blocking(&cfd));   /* connect's: non-blocking */
	d.id = c.id;
	REQUIRE_EQ(pthread_create(&t, NULL, driver_main, &d), 0);
	sfd = accept(lfd, NULL, NULL);
	REQUIRE(sfd >= 0);
	mpa_read_request(sfd, &mp, 0);
	REQUIRE_EQ(rr_mpa_parser_frame(&mp, &f), 0);
	/* no Reply yet: the driver waits for it with its socket set up */
	CHECK(rr_test_wait_for(sock_blocking, &cfd, "the driven socket blocking before the Reply"));
	CHECK_EQ(getsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl), 0);
	CHECK(tv.tv_sec * 1000 + tv.tv_usec / 1000 >= SOFT_FAST_BLOCK_MS);
	CHECK_EQ(d.rc, 0);   /* still driving */
	REQUIRE_EQ(rr_mpa_responder_check(&prov, &f, &conn), 0);
	REQUIRE_EQ(rr_mpa_make_reply(&conn, false, NULL, 0, &rf), 0);
	n = rr_mpa_encode(&rf, rep, sizeof(rep));
	REQUIRE(n > 0);
	REQUIRE_EQ(send(sfd, rep, (size_t)n, 0), n);
	pthread_join(t, NULL);
	REQUIRE_EQ(d.rc, 0);
	CHECK_EQ(d.ev.type, RPCRDMA_CM_ESTABLISHED);
	q = soft_net_qp_of(c.e.qp);
	CHECK_EQ(q->obj.fd, cfd);
	CHECK(q->fast_ok);
	CHECK(q->fpdu_max > 32768);
	CHECK(q->fpdu_max <= 65535 - 52);
	CHECK(sock_blocking(&cfd));
	dep_free(&c);
	close(sfd);
	close(lfd);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}
