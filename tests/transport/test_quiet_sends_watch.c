/* SPDX-License-Identifier: BSD-2-Clause */
/* A server's quiet Sends (Replies without Writes, posted unsignaled and told
 * to nobody: transport/rdma/conn.c "a client's unsignaled Sends") under the
 * send-stall watch (conn.c tp_quiet_watch): after N = 1..7 of them and
 * nothing else, a probe (a signaled zero-length RDMA Write) posted once
 * they waited half the send timeout proves them done and gives their slots
 * back when the peer reads; a peer whose path takes no more bytes loses
 * the connection by the send timeout (send_stalls), its slots with it.
 * And what proves a quiet Send done must come after it on the wire: quiet
 * Replies deferred in a batch go before a later Send of the general path
 * whose completion vouches for them (conn.c conn_send); a Reply alone on its
 * connection is posted at once, or joins the chain when one is deferred.
 * The server runs the send timeout on a virtual clock (rr_tp_conf
 * rrep_clock); the tests wait for events, never for time. Over the
 * software iWARP provider (RFC 5040 RDMA Write, RFC 8166 transport, RFC
 * 5531 RPC); not run without it. */
#include "test.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma/soft/soft.h"
#include "rogue/rogue.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

#define QW_TIMEOUT_MS 1000u   /* the send timeout, virtual */

static _Atomic uint64_t qw_vclock_ns;
static struct rpcrdma_env qw_env;
static struct rr_tp_server *qw_srv;

static uint64_t qw_now(void *ctx)
{
	(void)ctx;
	return atomic_load(&qw_vclock_ns);
}

static void qw_advance_ms(uint64_t ms)
{
	atomic_fetch_add(&qw_vclock_ns, ms * 1000000u);
}

static void qw_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer16(qw_srv, r);
}

/* What the server's one connection looks like (its shard's lock held). */
struct qw_look {
	bool found;
	uint32_t ucount, nsfree, nslots;
	bool qw_on, qprobe;
	int fd;   /* its soft QP's socket */
};

/* Runs @fn on the server's live connection under its shard's lock. */
static void qw_with_conn(void (*fn)(struct tp_conn *cn, void *arg), void *arg)
{
	for (unsigned i = 0; i < qw_srv->nshards; i++) {
		struct tp_shard *sh = qw_srv->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next)
			if (!cn->dead && cn->established && cn->qp)
				fn(cn, arg);
		rr_unlock(&sh->ep.lock);
	}
}

static void look_fn(struct tp_conn *cn, void *arg)
{
	struct qw_look *l = arg;
	struct soft_qp *sq = RR_CONTAINER_OF(RR_BASE(qp, cn->qp), struct soft_qp, base);

	*l = (struct qw_look){true,	   cn->ucount, cn->nsfree, cn->nslots,
			      cn->qw_on, cn->qprobe, sq->obj.fd};
}

static struct qw_look qw_look(void)
{
	struct qw_look l = {0};

	qw_with_conn(look_fn, &l);
	return l;
}

/* Slots taken until a second chunk was made, then all put back: room for
 * a run of TP_UNSIG_RUN quiet Sends with a free slot beside each. */
static void grow_fn(struct tp_conn *cn, void *arg)
{
	uint32_t slot[TP_SLOTS_FIRST + 1], cap, n = 0;

	(void)arg;
	while (n < TP_SLOTS_FIRST + 1 && tp_server_io.slot_get(cn, &slot[n], &cap))
		n++;
	while (n)
		tp_server_io.slot_put(cn, slot[--n]);
}

static bool conn_up(void *arg)
{
	(void)arg;
	return qw_look().found;
}

static bool seen_waiting(void *arg)
{
	(void)arg;
	return qw_look().qw_on;
}

static bool probe_posted(void *arg)
{
	(void)arg;
	return qw_look().qprobe;
}

static bool slots_back(void *arg)
{
	struct qw_look l = qw_look();

	(void)arg;
	return l.found && !l.qprobe && l.ucount == 0 && l.nsfree == l.nslots;
}

static bool stalled(void *arg)
{
	struct rr_xprt_stats st;

	(void)arg;
	rr_tp_server_stats(qw_srv, &st);
	return st.send_stalls > 0;
}

static bool no_conns(void *arg)
{
	(void)arg;
	return atomic_load(&qw_srv->nconns) == 0;
}

/* A server answering on a worker thread (each Reply posted alone, quiet
 * while a slot is left beside it), send timeout QW_TIMEOUT_MS on the
 * virtual clock, which starts at 1 s. */
static void qw_server(struct rr_th_sq *sq)
{
	struct rr_tp_conf sc;

	atomic_store(&qw_vclock_ns, 1000000000ull);
	qw_env = *rpcrdma_env_default();
	qw_env.now_ns = qw_now;
	qw_env.clock_ctx = NULL;
	rr_tp_conf_default(&sc);
	sc.send_timeout_ms = QW_TIMEOUT_MS;
	sc.rrep_clock = &qw_env;
	memset(sq, 0, sizeof(*sq));
	rr_th_sq_init(sq, qw_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, sq, &qw_srv), 0);
	rr_th_sq_start(sq);
}

static void qw_server_stop(struct rr_th_sq *sq)
{
	rr_th_sq_stop(sq);
	rr_tp_server_destroy(qw_srv);
	rr_th_sq_destroy(sq);
	qw_srv = NULL;
}

/* The connection up, its second chunk of slots made, then the walk sees
 * nothing waiting yet. */
static void qw_conn_ready(void)
{
	struct qw_look l;

	REQUIRE(rr_test_until(conn_up, NULL, RR_TEST_WAIT_MS));
	qw_with_conn(grow_fn, NULL);
	l = qw_look();
	REQUIRE(l.nslots > TP_UNSIG_RUN);
	CHECK_EQ(l.nsfree, l.nslots);
	CHECK_EQ(l.ucount, 0);
}

/* After @n quiet Replies: they wait, unproven; the walk notes them; half
 * the send timeout later (virtual) a probe goes. */
static void qw_probe_after(unsigned n)
{
	struct qw_look l = qw_look();

	CHECK_EQ(l.ucount, n);
	CHECK(!l.qprobe);
	CHECK(rr_test_until(seen_waiting, NULL, RR_TEST_WAIT_MS));
	qw_advance_ms(QW_TIMEOUT_MS / 2 + 100);
}

/* A peer that reads: N = 1..7 quiet Replies, then it goes silent. The
 * probe's completion proves them done: every slot back, the connection
 * kept (no stall) and still answering. Fails without the probe (the slots
 * wait for a later Reply's completion, or the idle timeout). */
TEST(quiet_sends_probe_gives_slots_back_to_a_reading_peer)
{
	if (!rr_th_soft_ok())
		return;
	for (unsigned n = 1; n <= TP_UNSIG_RUN; n++) {
		struct rr_th_small p[TP_UNSIG_RUN + 1];
		struct rr_xprt_stats st;
		struct rr_tp_conf cc;
		struct rr_th_sq sq;
		struct rr_th_cl c;

		qw_server(&sq);
		rr_tp_conf_default(&cc);
		REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(qw_srv), rr_th_cl_count), 0);
		qw_conn_ready();
		for (unsigned i = 0; i < n; i++) {
			rr_th_small_submit(&c, &p[i], 0x700 + i);
			REQUIRE(rr_th_cl_wait(&c, i + 1, RR_TEST_WAIT_MS));
			CHECK_EQ(p[i].r.status, 0);
			if (p[i].r.status == 0 && p[i].r.lent)
				rr_tp_client_release_reply(c.tp, &p[i].r);
		}
		qw_probe_after(n);
		if (!rr_test_until(slots_back, NULL, RR_TEST_WAIT_MS)) {
			struct qw_look l = qw_look();

			fprintf(stderr, "  n %u: %u quiet Sends still waiting, %u of %u slots free\n",
				n, l.ucount, l.nsfree, l.nslots);
			CHECK(false);
		}
		rr_tp_server_stats(qw_srv, &st);
		CHECK_EQ(st.send_stalls, 0);
		CHECK(qw_look().found);
		/* the connection goes on */
		rr_th_small_submit(&c, &p[n], 0x7ff);
		REQUIRE(rr_th_cl_wait(&c, n + 1, RR_TEST_WAIT_MS));
		CHECK_EQ(p[n].r.status, 0);
		if (p[n].r.status == 0 && p[n].r.lent)
			rr_tp_client_release_reply(c.tp, &p[n].r);
		rr_th_cl_stop(&c);
		qw_server_stop(&sq);
	}
}

/* A peer that stops reading after N = 1..7 quiet Replies (a raw rogue,
 * stalled), its path then full: the server QP's stream becomes a socket
 * that nobody reads, filled up (dup2 over the QP's descriptor: a TCP
 * socket's room comes back as the stalled receiver's window reopens by a
 * few bytes, which a probe of 21 bytes takes). The probe cannot go, and
 * the send timeout, counted from when the walk first saw the quiet Sends
 * waiting, ends the connection (send_stalls), its slots freed with it.
 * Fails without the probe: nothing is in flight for the stall watch, the
 * connection stays. */
TEST(quiet_sends_peer_that_stops_reading_closed_by_send_timeout)
{
	static uint8_t junk[4096];

	if (!rr_th_soft_ok())
		return;
	for (unsigned n = 1; n <= TP_UNSIG_RUN; n++) {
		struct rr_rogue_opts o;
		struct rr_xprt_stats st;
		struct rr_rogue *g = NULL;
		struct rr_th_sq sq;
		struct qw_look l;
		size_t filled = 0;
		int sp[2];
		ssize_t w;

		qw_server(&sq);
		rr_rogue_opts_default(&o);
		o.rcvbuf = 4096;
		REQUIRE_EQ(rr_rogue_open(&g, rr_tp_server_port(qw_srv), &o), 0);
		qw_conn_ready();
		for (unsigned i = 0; i < n; i++) {
			uint8_t rpc[64];
			int len = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x900 + i, 0x20000099u, 1, 1,
						    NULL, 0);

			REQUIRE(len > 0);
			REQUIRE_EQ(rr_rogue_send_call(g, 0x900 + i, rpc, (size_t)len), 0);
			REQUIRE(rr_rogue_wait_msg(g, RR_TEST_WAIT_MS) > 0);
		}
		rr_rogue_stall(g, true);
		l = qw_look();
		REQUIRE(l.found);
		/* its QP's stream from now on: a socket nobody reads, full */
		REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
		while ((w = send(sp[0], junk, sizeof(junk), MSG_DONTWAIT)) > 0)
			filled += (size_t)w;
		while (send(sp[0], junk, 1, MSG_DONTWAIT) == 1)
			filled++;
		CHECK(filled > 0);
		REQUIRE_EQ(dup2(sp[0], l.fd), l.fd);
		close(sp[0]);
		qw_probe_after(n);
		if (!rr_test_until(probe_posted, NULL, RR_TEST_WAIT_MS))
			fprintf(stderr, "  n %u: no probe posted\n", n);
		/* posted, not done: the Replies still wait, nothing stalled yet */
		l = qw_look();
		CHECK(l.qprobe);
		CHECK_EQ(l.ucount, n);
		rr_tp_server_stats(qw_srv, &st);
		CHECK_EQ(st.send_stalls, 0);
		/* the send timeout since they were first seen waiting */
		qw_advance_ms(QW_TIMEOUT_MS / 2);
		if (!rr_test_until(stalled, NULL, RR_TEST_WAIT_MS)) {
			fprintf(stderr, "  n %u: not closed by the send timeout\n", n);
			CHECK(false);
		} else {
			CHECK(rr_test_until(no_conns, NULL, RR_TEST_WAIT_MS));
		}
		rr_tp_server_stats(qw_srv, &st);
		CHECK_EQ(st.send_stalls, 1);
		CHECK_EQ(st.idle_closed, 0);
		close(sp[1]);
		rr_rogue_free(g);
		qw_server_stop(&sq);
	}
}

/* ---- a deferred quiet Send and a later Send of the general path ---- */

#define ORD_QUIET 3u
#define ORD_STAG 0x5a5a01u

struct ord {
	uint32_t qslot[ORD_QUIET], gslot;
	uint32_t ucount, ndefer, nsfree, nslots;
	bool gfree;
};

/* A free slot of @cn into @s, 32 bytes of @mark in it. */
static void ord_fill(struct tp_conn *cn, uint8_t mark, struct rr_conn_send *s)
{
	uint32_t cap;
	uint8_t *b = tp_server_io.slot_get(cn, &s->slot, &cap);

	REQUIRE(b != NULL);
	REQUIRE(cap >= 32);
	memset(b, mark, 32);
	s->len = 32;
}

/* As the progress thread's batch does (its Replies deferred, ep.defer):
 * ORD_QUIET quiet Sends, deferred, then a Send after 5 RDMA Writes (more
 * than a deferred Reply holds: the general path, signaled). */
static void ord_post_fn(struct tp_conn *cn, void *arg)
{
	struct ord *o = arg;
	struct rr_conn_write w[SV_DEFER_WR];
	struct rr_conn_send s;

	cn->ep->defer = true;
	for (unsigned i = 0; i < ORD_QUIET; i++) {
		memset(&s, 0, sizeof(s));
		ord_fill(cn, (uint8_t)('a' + i), &s);
		s.quiet = true;
		o->qslot[i] = s.slot;
		CHECK_EQ(tp_server_io.send(cn, &s), 1);   /* quiet: never told */
	}
	memset(&s, 0, sizeof(s));
	ord_fill(cn, 'G', &s);
	for (unsigned i = 0; i < SV_DEFER_WR; i++)   /* XDR pads: the zero bytes */
		w[i] = (struct rr_conn_write){NULL, NULL, 4, ORD_STAG, 4u * i};
	s.writes = w;
	s.nwrites = SV_DEFER_WR;
	o->gslot = s.slot;
	CHECK_EQ(tp_server_io.send(cn, &s), 0);
	cn->ep->defer = false;
	o->ucount = cn->ucount;
	o->ndefer = cn->ndefer;
	o->nsfree = cn->nsfree;
	o->nslots = cn->nslots;
}

static void ord_look_fn(struct tp_conn *cn, void *arg)
{
	struct ord *o = arg;

	o->ucount = cn->ucount;
	o->ndefer = cn->ndefer;
	o->nsfree = cn->nsfree;
	o->nslots = cn->nslots;
	o->gfree = tp_slot_is_free(cn, o->gslot);
}

static void ord_post_rest_fn(struct tp_conn *cn, void *arg)
{
	(void)arg;
	tp_post_all_deferred(cn->ep);
}

static bool ord_g_done(void *arg)
{
	qw_with_conn(ord_look_fn, arg);
	return ((struct ord *)arg)->gfree;
}

/* Quiet Replies deferred to the end of a batch, then in the same batch a
 * Reply whose Send goes by the general path (five RDMA Writes, signaled):
 * the deferred chain is posted first (conn.c conn_send), so the peer (a
 * raw rogue) sees the quiet Replies, then the Writes, then that Send; the
 * quiet ones' slots are held until its completion, which proves them sent
 * (its mark covers them), and every one of them was posted by then.
 * Fails (on the wire WWWWWGabc; after the general Send's post the quiet
 * ones still deferred, ndefer 3, though its mark vouches for them) with
 * the general path posting before the deferred chain. */
TEST(quiet_sends_deferred_then_general_path_in_order)
{
	static uint8_t region[64];
	struct rr_rogue *g = NULL;
	struct rr_th_sq sq;
	struct ord o;
	char seen[16];
	unsigned nseen = 0;

	if (!rr_th_soft_ok())
		return;
	qw_server(&sq);
	REQUIRE_EQ(rr_rogue_open(&g, rr_tp_server_port(qw_srv), NULL), 0);
	REQUIRE_EQ(rr_rogue_mem_add(g, ORD_STAG, 0, region, sizeof(region)), 0);
	qw_conn_ready();
	memset(&o, 0, sizeof(o));
	qw_with_conn(ord_post_fn, &o);
	/* posted, none still deferred; the quiet ones wait for a proof,
	 * their slots and the general Send's held */
	CHECK_EQ(o.ucount, ORD_QUIET);
	CHECK_EQ(o.ndefer, 0);
	CHECK_EQ(o.nsfree + ORD_QUIET + 1, o.nslots);
	/* the general Send's completion frees its slot and theirs together */
	REQUIRE(rr_test_until(ord_g_done, &o, RR_TEST_WAIT_MS));
	CHECK_EQ(o.ucount, 0);
	CHECK_EQ(o.nsfree, o.nslots);
	qw_with_conn(ord_post_rest_fn, NULL);   /* the batch's end */
	/* on the wire: a, b, c, five Writes (W), G */
	while (nseen < ORD_QUIET + SV_DEFER_WR + 1) {
		struct rr_rogue_ev ev;
		int t = rr_rogue_next(g, &ev, RR_TEST_WAIT_MS);

		if (t == RR_ROGUE_EV_MSG)
			seen[nseen++] = ev.msg_len == 32 ? (char)ev.msg[0] : '?';
		else if (t == RR_ROGUE_EV_WRITE)
			seen[nseen++] = ev.stag == ORD_STAG ? 'W' : '?';
		else
			break;
	}
	seen[nseen] = '\0';
	if (strcmp(seen, "abcWWWWWG") != 0)
		fprintf(stderr, "  on the wire: %s\n", seen);
	CHECK(strcmp(seen, "abcWWWWWG") == 0);
	rr_rogue_free(g);
	qw_server_stop(&sq);
}

/* A Reply marked alone (no other Call of its connection awaits a Reply:
 * proto/conn/reply.c) in a batch whose Replies are deferred (ep.defer) is
 * posted at once when nothing of its connection is deferred, and joins the
 * chain when something is (conn.c conn_send, issue 16 part HF): on the wire
 * in answer order. Fails with the alone Reply deferred like the others
 * (ndefer 1 after the first), and with one posted at once past a deferred
 * chain (ndefer 1 after the third; "acb" on the wire). */
struct al {
	uint32_t ndefer[3];
};

static void al_post_fn(struct tp_conn *cn, void *arg)
{
	struct al *a = arg;
	struct rr_conn_send s;

	cn->ep->defer = true;
	for (unsigned i = 0; i < 3; i++) {
		memset(&s, 0, sizeof(s));
		ord_fill(cn, (uint8_t)('a' + i), &s);
		s.quiet = true;
		s.alone = i != 1;   /* a and c alone, b not */
		CHECK(tp_server_io.send(cn, &s) >= 0);
		a->ndefer[i] = cn->ndefer;
	}
	cn->ep->defer = false;
	tp_post_all_deferred(cn->ep);   /* the batch's end */
}

TEST(quiet_sends_alone_posted_at_once)
{
	struct rr_rogue *g = NULL;
	struct rr_th_sq sq;
	struct al a = {{0}};
	char seen[8];
	unsigned nseen = 0;

	if (!rr_th_soft_ok())
		return;
	qw_server(&sq);
	REQUIRE_EQ(rr_rogue_open(&g, rr_tp_server_port(qw_srv), NULL), 0);
	qw_conn_ready();
	qw_with_conn(al_post_fn, &a);
	CHECK_EQ(a.ndefer[0], 0);   /* alone, nothing deferred: posted */
	CHECK_EQ(a.ndefer[1], 1);   /* not alone: deferred */
	CHECK_EQ(a.ndefer[2], 2);   /* alone, but a chain to join */
	while (nseen < 3) {
		struct rr_rogue_ev ev;

		if (rr_rogue_next(g, &ev, RR_TEST_WAIT_MS) != RR_ROGUE_EV_MSG)
			break;
		seen[nseen++] = ev.msg_len == 32 ? (char)ev.msg[0] : '?';
	}
	seen[nseen] = '\0';
	if (strcmp(seen, "abc") != 0)
		fprintf(stderr, "  on the wire: %s\n", seen);
	CHECK(strcmp(seen, "abc") == 0);
	rr_rogue_free(g);
	qw_server_stop(&sq);
}

/* The deferred Replies' work request storage sized by need (conn.c
 * defer_ready, issue 16 part CH): a connection's first deferred Reply
 * makes room for SV_DEFER_FIRST; a batch that fills it posts those and
 * makes room for SV_DEFER_MAX (taken while none is deferred: the chains
 * point into the arrays); on the wire every Reply in answer order.
 * Fails with room for SV_DEFER_MAX made at once (dcap 32 after the first),
 * with no growth (dcap 4 after the batch), and with the arrays replaced
 * while a chain points into them (order or bytes lost on the wire). */
#define DG_N (SV_DEFER_FIRST + 2u)

struct dg {
	uint32_t cap_first, cap_after, ndefer_after;
	uint64_t took_ns;   /* the batch, on the endpoint's clock */
};

static void dg_post_fn(struct tp_conn *cn, void *arg)
{
	struct dg *d = arg;
	struct rr_conn_send s;

	uint64_t t0 = tp_now_ns(cn->ep);

	cn->ep->defer = true;
	for (unsigned i = 0; i < DG_N; i++) {
		memset(&s, 0, sizeof(s));
		ord_fill(cn, (uint8_t)('a' + i), &s);
		s.quiet = true;
		CHECK(tp_server_io.send(cn, &s) >= 0);
		if (i == 0)
			d->cap_first = cn->dcap;
	}
	cn->ep->defer = false;
	d->took_ns = tp_now_ns(cn->ep) - t0;
	d->cap_after = cn->dcap;
	d->ndefer_after = cn->ndefer;
	tp_post_all_deferred(cn->ep);
}

TEST(quiet_sends_deferred_storage_sized_by_need)
{
	struct rr_rogue *g = NULL;
	struct rr_th_sq sq;
	struct dg d = {0};
	char seen[16], want[16];
	unsigned nseen = 0;

	if (!rr_th_soft_ok())
		return;
	qw_server(&sq);
	REQUIRE_EQ(rr_rogue_open(&g, rr_tp_server_port(qw_srv), NULL), 0);
	qw_conn_ready();
	qw_with_conn(dg_post_fn, &d);
	CHECK_EQ(d.cap_first, SV_DEFER_FIRST);
	/* The Replies deferred after the batch's first post: exactly the two
	 * over SV_DEFER_FIRST when the batch took at most SV_DEFER_NS; a
	 * slower one (a TCG lab VM: 1 left, 2026-11-27) may also have been
	 * posted by age (conn_send: "nor older than SV_DEFER_NS"), which is
	 * the rule, not a fault: then at least one (the last is deferred
	 * after any post by age), and at most what the room holds: where the
	 * ages ran out decides how many are left (the Debian 12 lab VM,
	 * 2026-11-28: a 2.2 ms batch, room 4, 4 left: the first two posted
	 * by age, the last four deferred in the first room). */
	if (d.took_ns <= SV_DEFER_NS) {
		CHECK_EQ(d.cap_after, SV_DEFER_MAX);
		CHECK_EQ(d.ndefer_after, DG_N - SV_DEFER_FIRST);
	} else {
		/* (Replies posted by age before the room filled: no growth
		 * needed; the Debian 12 lab VM, 2026-11-27: a 9.3 ms batch,
		 * room 4, 1 left) */
		printf("  the batch took %" PRIu64 " ns (> SV_DEFER_NS): room %u, deferred left %u\n",
		       d.took_ns, d.cap_after, d.ndefer_after);
		CHECK(d.cap_after == SV_DEFER_FIRST || d.cap_after == SV_DEFER_MAX);
		CHECK(d.ndefer_after >= 1 && d.ndefer_after <= d.cap_after);
	}
	for (unsigned i = 0; i < DG_N; i++)
		want[i] = (char)('a' + i);
	want[DG_N] = '\0';
	while (nseen < DG_N) {
		struct rr_rogue_ev ev;

		if (rr_rogue_next(g, &ev, RR_TEST_WAIT_MS) != RR_ROGUE_EV_MSG)
			break;
		seen[nseen++] = ev.msg_len == 32 ? (char)ev.msg[0] : '?';
	}
	seen[nseen] = '\0';
	if (strcmp(seen, want) != 0)
		fprintf(stderr, "  on the wire: %s\n", seen);
	CHECK(strcmp(seen, want) == 0);
	rr_rogue_free(g);
	qw_server_stop(&sq);
}
