/* The soft provider's progress thread ("rr-soft") when there is nothing to
 * do, and CM events reaching a thread asleep in a CQ (docs/soft-iwarp.md
 * "Threading, waiting and zero copy", "Idle progress thread", "CM events
 * end CQ waits"). The thread sleeps until its next real deadline -- a
 * handshake's MPA timeout (RFC 5044 section 7.1 exchange) or the end of a
 * CQ's attendance lease -- and not at all when there is none; whatever
 * creates an earlier deadline wakes it: a CQ whose waiter leaves or whose
 * arm a completion consumes is still taken over after the lease (a passive
 * RDMA Read responder, RFC 5040 section 4.5, keeps answering), a new
 * connection attempt still times out. On a context whose owner uses
 * rr_context_interrupt, a CM event pushed to a channel ends its CQ waits
 * (the RPC responder sleeps in its one connection's CQ). Two endpoints over
 * loopback TCP through the public API. */
#include "test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF 65536u

static struct soft_cq *scq_of(struct rpcrdma_cq *cq)
{
	return RR_CONTAINER_OF(RR_BASE(cq, cq), struct soft_cq, base);
}

static struct soft_qp *sqp_of(struct rpcrdma_qp *qp)
{
	return RR_CONTAINER_OF(RR_BASE(qp, qp), struct soft_qp, base);
}

/* Whether the progress thread serves @q's socket (under its tx_lock, where
 * the hand-over changes it). */
static bool handed(struct soft_qp *q)
{
	bool on;

	pthread_mutex_lock(&q->tx_lock);
	on = q->obj.in_epoll;
	pthread_mutex_unlock(&q->tx_lock);
	return on;
}

/* Until the progress thread serves @q (true) or @ms passed (false). */
static bool until_handed(struct soft_qp *q, unsigned ms)
{
	for (unsigned i = 0; i < ms; i++) {
		if (handed(q))
			return true;
		usleep(1000);
	}
	return handed(q);
}

/* Voluntary context switches so far of this process's threads named @name
 * (the soft provider names its progress thread rr-soft). */
static long long thread_wakeups(const char *name)
{
	long long sum = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char path[300], line[128];
		bool match = false;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Name:", 5)) {
				line[strcspn(line, "\n")] = 0;
				match = !strcmp(line + 5 + strspn(line + 5, " \t"), name);
			}
			if (match && !strncmp(line, "voluntary_ctxt_switches:", 24))
				sum += atoll(line + 24);
		}
		fclose(f);
	}
	closedir(d);
	return sum;
}

static void post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off, uint32_t len)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_recv_wr rw = {.wr_id = id, .sg_list = &sg, .num_sge = 1};

	REQUIRE_EQ(rpcrdma_post_recv(qp, &rw, NULL), 0);
}

static void post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id, enum rpcrdma_wr_opcode op,
		      size_t off, uint32_t len, size_t roff, bool sig)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				     .flags = sig ? RPCRDMA_SEND_SIGNALED : 0,
				     .u.rdma = {.remote_offset = (uintptr_t)n->buf + roff,
						.stag = rpcrdma_mr_rkey(n->mr)}};

	REQUIRE_EQ(rpcrdma_post_send(qp, &wr, NULL), 0);
}

struct waiter {
	struct rpcrdma_cq *cq;
	int timeout_ms;
	int rc;
	struct rpcrdma_wc wc;
	uint64_t ns;               /* how long the wait took */
	uint64_t end_ns;           /* when it returned */
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0 = rr_now_ns(NULL);

	w->rc = rpcrdma_cq_wait(w->cq, 1, &w->wc, w->timeout_ms);
	w->end_ns = rr_now_ns(NULL);
	w->ns = w->end_ns - t0;
	return NULL;
}

/* As wait_thread, but a wait that ends with nothing before its time (a
 * CM event of this context, which ends CQ waits on it) is waited again,
 * as the RPC responder's loop does. */
static void *wait_thread_until(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0 = rr_now_ns(NULL), end = t0 + (uint64_t)w->timeout_ms * 1000000u;

	do
		w->rc = rpcrdma_cq_wait(w->cq, 1, &w->wc, w->timeout_ms);
	while (w->rc == 0 && rr_now_ns(NULL) < end);
	w->end_ns = rr_now_ns(NULL);
	w->ns = w->end_ns - t0;
	return NULL;
}

/* Until a waiter sleeps in a fast read on @q (or 2 s). */
static bool until_fast_blocked(struct soft_cq *q)
{
	for (int i = 0; i < 2000; i++) {
		if (atomic_load(&q->fast_blocked))
			return true;
		usleep(1000);
	}
	return false;
}

/* The client's RDMA Read of the server's buffer (bytes 0..255 into 4096..)
 * completes: someone serves the server's socket. */
static void read_served(struct net *n, struct rpcrdma_qp *c, uint64_t id)
{
	struct rpcrdma_wc wc;
	struct rpcrdma_mr *src;

	for (uint32_t i = 0; i < 256; i++)
		n->buf[i] = (uint8_t)(i ^ id);
	memset(n->buf + 4096, 0, 256);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n->pd, n->buf, 256, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &src), 0);
	{
		struct rpcrdma_sge sg = {(uintptr_t)n->buf + 4096, 256, rpcrdma_mr_lkey(n->mr)};
		struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_RDMA_READ,
					     .flags = RPCRDMA_SEND_SIGNALED,
					     .u.rdma = {.remote_offset = (uintptr_t)n->buf,
							.stag = rpcrdma_mr_rkey(src)}};

		REQUIRE_EQ(rpcrdma_post_send(c, &wr, NULL), 0);
	}
	REQUIRE_EQ(rpcrdma_cq_wait(n->ccq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id);
	CHECK_MEM(n->buf + 4096, n->buf, 256);
	CHECK_EQ(rpcrdma_dereg_mr(src), 0);
}

/* An idle context whose connected QPs' CQs are attended for good -- the
 * client's by a thread asleep in rpcrdma_cq_wait, the server's armed --
 * leaves its progress thread asleep: no 10 ms tick (~50 wake-ups in 500 ms
 * before). Both consumers still get what comes afterwards. */
TEST(soft_idle_progress_thread_sleeps)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct waiter w = {0};
	struct rpcrdma_wc wc;
	struct pollfd p;
	pthread_t th;
	long long w0, w1;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	post_recv(&n, c, 1, 0, 64);
	post_recv(&n, s, 2, 64, 64);
	w = (struct waiter){.cq = n.ccq, .timeout_ms = 20000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	while (rpcrdma_cq_get_event(n.scq) == 1)
		;
	REQUIRE_EQ(rpcrdma_cq_arm(n.scq, false), 0);
	CHECK_EQ(rpcrdma_cq_poll(n.scq, 1, &wc), 0);
	usleep(150 * 1000); /* past the leases of the last touches */
	CHECK(!handed(sqp_of(c)));
	CHECK(!handed(sqp_of(s)));
	w0 = thread_wakeups("rr-soft");
	usleep(500 * 1000);
	w1 = thread_wakeups("rr-soft");
	REQUIRE(w0 > 0 && w1 > 0); /* the thread is there, by that name */
	/* 10 ms tick: ~50; asleep until something happens: 0 */
	CHECK(w1 - w0 <= 3);
	if (getenv("RR_VERBOSE") || w1 - w0 > 3)
		fprintf(stderr, "  rr-soft: %lld wake-ups in 500 ms of idleness\n", w1 - w0);
	/* the waiter still gets its Receive, the armed CQ its notification */
	post_send(&n, s, 3, RPCRDMA_WR_SEND, 128, 8, 0, false);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 1);
	post_send(&n, c, 4, RPCRDMA_WR_SEND, 192, 8, 0, false);
	p = (struct pollfd){.fd = rpcrdma_cq_fd(n.scq), .events = POLLIN};
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK(rpcrdma_cq_get_event(n.scq) >= 0);
	for (int i = 0; i < 500 && rpcrdma_cq_poll(n.scq, 1, &wc) == 0; i++)
		usleep(1000);
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* A waiter that leaves after a long wait (the thread slept with no
 * deadline meanwhile) and does not come back: its QP still goes to the
 * progress thread after the lease, which then answers the peer's Reads. */
TEST(soft_idle_takeover_after_wait_leaves)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct waiter w = {0};
	pthread_t th;
	uint64_t t;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	w = (struct waiter){.cq = n.scq, .timeout_ms = 300};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 0);
	/* lease (20 ms) + a look of the thread; a lost wake-up: never */
	REQUIRE(until_handed(sqp_of(s), 2000));
	t = rr_now_ns(NULL) - w.end_ns;
	CHECK(t < 1000000000ull);
	if (getenv("RR_VERBOSE"))
		fprintf(stderr, "  taken over %.1f ms after the waiter left\n", (double)t / 1e6);
	read_served(&n, c, 10);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* An armed CQ (no deadline: attended until a completion consumes the arm)
 * whose arm is consumed by a completion made in another thread -- a
 * signaled RDMA Write finishing inside post_send -- and whose consumer
 * then stays away: the progress thread takes its QP after the lease. */
TEST(soft_idle_takeover_after_arm_consumed)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	uint64_t t0;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	while (rpcrdma_cq_get_event(n.scq) == 1)
		;
	REQUIRE_EQ(rpcrdma_cq_arm(n.scq, false), 0);
	CHECK_EQ(rpcrdma_cq_poll(n.scq, 1, &wc), 0);
	usleep(100 * 1000); /* the lease of the arm's touch is over */
	CHECK(!handed(sqp_of(s)));
	t0 = rr_now_ns(NULL);
	post_send(&n, s, 20, RPCRDMA_WR_RDMA_WRITE, 0, 64, 8192, true);
	REQUIRE(until_handed(sqp_of(s), 2000));
	CHECK(rr_now_ns(NULL) - t0 < 1000000000ull);
	read_served(&n, c, 21);
	CHECK_EQ(rpcrdma_cq_get_event(n.scq), 1);
	REQUIRE_EQ(rpcrdma_cq_poll(n.scq, 1, &wc), 1);
	CHECK_EQ(wc.wr_id, 20);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* A connection attempt made while the progress thread sleeps without a
 * deadline still ends at its MPA timeout: the peer (a plain TCP listener)
 * accepts and never answers the MPA Request. */
TEST(soft_idle_connect_timeout_while_asleep)
{
	struct net n;
	struct rpcrdma_qp *c;
	struct rpcrdma_cm_id *cid;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_conn_param cp = {.timeout_ms = 200};
	socklen_t al = sizeof(a);
	uint64_t t0, t;
	int l;

	soft_net_up(&n, 64, 16);
	c = soft_net_qp(&n, n.ccq, 8);
	l = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(l >= 0);
	REQUIRE_EQ(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(l, 4), 0);
	REQUIRE_EQ(getsockname(l, (struct sockaddr *)&a, &al), 0);
	usleep(100 * 1000); /* nothing to do: the thread sleeps for good */
	t0 = rr_now_ns(NULL);
	REQUIRE_EQ(rpcrdma_connect(n.ch, c, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &cid), 0);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	t = rr_now_ns(NULL) - t0;
	CHECK_EQ(ev.type, RPCRDMA_CM_UNREACHABLE);
	CHECK_EQ(ev.status, -ETIMEDOUT);
	CHECK(t >= 190000000ull);
	CHECK(t < 1500000000ull);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	close(l);
	soft_net_down(&n);
}

/* The RPC responder's situation (src/transport/rdma_tp.c progress()): its
 * thread sleeps in its one connection's CQ (fast wait: a blocking read on
 * that socket) and looks at the CM channel after each wait. On a context
 * whose owner uses rr_context_interrupt, a CONNECT_REQUEST for a second
 * connection ends that wait (0, long before its 3 s), without turning the
 * fast wait off for the existing connection. */
TEST(soft_cm_event_ends_cq_wait)
{
	struct net n;
	struct rpcrdma_qp *c, *s, *c2;
	struct rpcrdma_cm_id *cid, *sid, *cid2;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct waiter w = {0};
	struct rpcrdma_wc wc;
	struct soft_cq *q;
	uint64_t reads0, wakes0, t0;
	pthread_t th;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	q = scq_of(n.scq);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	c2 = soft_net_qp(&n, n.ccq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	/* the owner uses interrupts (as the RPC responder: ep_wake); the
	 * latch it leaves is consumed by a first wait */
	REQUIRE_EQ(rr_context_interrupt(n.ctx), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 0), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 0), 0);
	/* the connection goes quiet (a sleep runs out): the waiter then
	 * sleeps in poll(2) over the socket and the CQ's wake eventfd, which
	 * the event writes (a blocking recv would sleep on until its
	 * timeout, 5 ms nominal, 8-16 ms with jiffies) */
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 40), 0);
	reads0 = atomic_load(&q->fast_reads);
	wakes0 = atomic_load(&q->fast_wakes);
	w = (struct waiter){.cq = n.scq, .timeout_ms = 3000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE(until_fast_blocked(q));
	CHECK_EQ(atomic_load(&q->fast_blocked), SOFT_FAST_POLL);
	a.sin_port = htons(n.port);
	t0 = rr_now_ns(NULL);
	REQUIRE_EQ(rpcrdma_connect(n.ch, c2, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &cid2), 0);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 0);
	/* ended by the event: the wait would have lasted 3 s; a fast read
	 * ends within SOFT_FAST_BLOCK_MS, this bound is for loaded machines */
	CHECK(w.end_ns - t0 < 1000000000ull);
	CHECK(w.ns < 2000000000ull);
	if (getenv("RR_VERBOSE"))
		fprintf(stderr, "  wait ended %.2f ms after connect\n", (double)(w.end_ns - t0) / 1e6);
	CHECK(atomic_load(&q->fast_reads) > reads0); /* it was a fast wait */
	CHECK(atomic_load(&q->fast_wakes) > wakes0); /* ended by the eventfd */
	/* no cool-down: the next wait on this CQ is a fast one again */
	CHECK_EQ(atomic_load(&q->fast_off_until), 0);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	CHECK_EQ(rpcrdma_reject(ev.id, NULL, 0), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(ev.id), 0);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_REJECTED);
	/* the first connection still works, through fast waits */
	post_recv(&n, s, 30, 0, 64);
	reads0 = atomic_load(&q->fast_reads);
	w = (struct waiter){.cq = n.scq, .timeout_ms = 5000};
	while (rpcrdma_cq_wait(n.scq, 1, &wc, 0) != 0)
		; /* latches left by the events above */
	/* a later CM event of the rejected attempt may still end a wait */
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread_until, &w), 0);
	REQUIRE(until_fast_blocked(q));
	post_send(&n, c, 31, RPCRDMA_WR_SEND, 128, 8, 0, false);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 30);
	CHECK(atomic_load(&q->fast_reads) > reads0);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid2), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c2), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* Without that opt-in, rpcrdma_cq_wait keeps its contract (0 only when the
 * timeout passed): a CM event on the context does not end it. */
TEST(soft_cm_event_keeps_cq_wait_without_interrupts)
{
	struct net n;
	struct rpcrdma_qp *c, *s, *c2;
	struct rpcrdma_cm_id *cid, *sid, *cid2;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct waiter w = {0};
	pthread_t th;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	c2 = soft_net_qp(&n, n.ccq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	w = (struct waiter){.cq = n.scq, .timeout_ms = 400};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE(until_fast_blocked(scq_of(n.scq)));
	a.sin_port = htons(n.port);
	REQUIRE_EQ(rpcrdma_connect(n.ch, c2, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &cid2), 0);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 0);
	CHECK(w.ns >= 390000000ull);
	CHECK_EQ(rpcrdma_reject(ev.id, NULL, 0), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(ev.id), 0);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_REJECTED);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid2), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c2), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* A quiet connection's fast waiter on a context that uses interrupts sleeps
 * interruptibly (SOFT_FAST_POLL): a completion another thread makes (a
 * signaled RDMA Write finishing inside post_send, nothing on the socket)
 * and an interrupt each wake it through the CQ's wake eventfd, and neither
 * turns the fast wait off (no cool-down: the next wait is a fast one). */
TEST(soft_quiet_fast_wait_woken_without_cooldown)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct waiter w = {0};
	struct rpcrdma_wc wc;
	struct soft_cq *q;
	uint64_t wakes0, reads0;
	pthread_t th;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	q = scq_of(n.ccq);
	c = soft_net_qp(&n, n.ccq, 8);
	s = soft_net_qp(&n, n.scq, 8);
	soft_net_link(&n, c, s, &cid, &sid);
	REQUIRE_EQ(rr_context_interrupt(n.ctx), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 0), 0); /* the latch */
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 40), 0); /* quiet now */
	/* a completion made by this thread */
	wakes0 = atomic_load(&q->fast_wakes);
	w = (struct waiter){.cq = n.ccq, .timeout_ms = 3000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE(until_fast_blocked(q));
	CHECK_EQ(atomic_load(&q->fast_blocked), SOFT_FAST_POLL);
	post_send(&n, c, 40, RPCRDMA_WR_RDMA_WRITE, 0, 64, 8192, true);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 40);
	CHECK(w.ns < 1000000000ull);
	CHECK(atomic_load(&q->fast_wakes) > wakes0);
	CHECK_EQ(atomic_load(&q->fast_off_until), 0);
	CHECK_EQ(atomic_load(&q->fast_foreign), 0);
	/* an interrupt */
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 40), 0); /* quiet again */
	wakes0 = atomic_load(&q->fast_wakes);
	w = (struct waiter){.cq = n.ccq, .timeout_ms = 3000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE(until_fast_blocked(q));
	CHECK_EQ(atomic_load(&q->fast_blocked), SOFT_FAST_POLL);
	CHECK_EQ(rr_context_interrupt(n.ctx), 0);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 0);
	CHECK(w.ns < 1000000000ull);
	CHECK(atomic_load(&q->fast_wakes) > wakes0);
	CHECK_EQ(atomic_load(&q->fast_off_until), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 0), 0); /* the other CQ's latch */
	/* data still ends a quiet sleep, through the fast path */
	post_recv(&n, c, 41, 4096, 64);
	reads0 = atomic_load(&q->fast_reads);
	w = (struct waiter){.cq = n.ccq, .timeout_ms = 5000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	REQUIRE(until_fast_blocked(q));
	post_send(&n, s, 42, RPCRDMA_WR_SEND, 128, 8, 0, false);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 41);
	CHECK_EQ(w.wc.byte_len, 8);
	CHECK(atomic_load(&q->fast_reads) > reads0);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* A connection accepted onto a CQ that a thread already waits on (the
 * progress thread serves every new QP first) goes to that waiter without
 * a tick: the waiter receives the first Send itself. The server has its own
 * context, so that no other handshake step makes that thread look. */
TEST(soft_idle_new_qp_joins_waited_cq)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rpcrdma_cq_attr ca = {.cqe = 64};
	struct rpcrdma_context *sctx;
	struct rpcrdma_cm_channel *sch;
	struct rpcrdma_cm_id *l, *cid, *sid;
	struct rpcrdma_pd *spd;
	struct rpcrdma_cq *scq;
	struct rpcrdma_mr *smr;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_event ev;
	struct sockaddr_storage ss;
	static uint8_t sbuf[64];
	struct net n;
	struct waiter w = {0};
	pthread_t th;
	bool back = false;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &sctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(sctx, &spd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(sctx, &ca, &scq), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(sctx, &sch), 0);
	REQUIRE_EQ(rpcrdma_listen(sch, (struct sockaddr *)&a, sizeof(a), 4, NULL, &l), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(l, &ss), 0);
	a.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	REQUIRE_EQ(rpcrdma_reg_mr_simple(spd, sbuf, sizeof(sbuf), RPCRDMA_ACCESS_LOCAL_WRITE, &smr), 0);
	{
		struct rpcrdma_qp_attr qa = {.send_cq = scq, .recv_cq = scq, .max_send_wr = 8,
					     .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1};
		struct rpcrdma_sge sg = {(uintptr_t)sbuf, sizeof(sbuf), rpcrdma_mr_lkey(smr)};
		struct rpcrdma_recv_wr rw = {.wr_id = 50, .sg_list = &sg, .num_sge = 1};

		REQUIRE_EQ(rpcrdma_qp_create(spd, &qa, &s), 0);
		REQUIRE_EQ(rpcrdma_post_recv(s, &rw, NULL), 0);
	}
	c = soft_net_qp(&n, n.ccq, 8);
	w = (struct waiter){.cq = scq, .timeout_ms = 5000};
	REQUIRE_EQ(pthread_create(&th, NULL, wait_thread, &w), 0);
	usleep(100 * 1000); /* the waiter sleeps; the thread has no deadline */
	REQUIRE_EQ(rpcrdma_connect(n.ch, c, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &cid), 0);
	REQUIRE_EQ(soft_net_get_cm(sch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	sid = ev.id;
	REQUIRE_EQ(rpcrdma_accept(sid, s, NULL), 0);
	REQUIRE_EQ(soft_net_get_cm(sch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	for (int i = 0; i < 1000 && !back; i++) {
		back = !handed(sqp_of(s));
		if (!back)
			usleep(1000);
	}
	CHECK(back);
	post_send(&n, c, 51, RPCRDMA_WR_SEND, 128, 8, 0, false);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 50);
	CHECK(!handed(sqp_of(s)));
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	CHECK_EQ(rpcrdma_dereg_mr(smr), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(sch), 0);
	CHECK_EQ(rpcrdma_cq_destroy(scq), 0);
	CHECK_EQ(rpcrdma_pd_free(spd), 0);
	CHECK_EQ(rpcrdma_close(sctx), 0);
	soft_net_down(&n);
}
