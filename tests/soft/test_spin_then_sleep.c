/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's "spin, then sleep" (docs/soft-iwarp.md "Spinning") and
 * its TCP congestion-control knob: how the spin budget is chosen
 * (rpcrdma_open_attr.spin_us, RPCRDMA_SOFT_SPIN_US, the default, the cap,
 * "off"); that a fast waiter whose peer answers at once finds the data while
 * spinning and a waiter with spinning off never spins; that an idle waiter
 * stops spinning after SOFT_SPIN_MISSES budgets in a row ran out and tries
 * again after SOFT_SPIN_SKIP waits; that a completion another thread pushes
 * while the waiter spins or sleeps reaches it; that RPCRDMA_SOFT_TCP_CC puts the named
 * congestion control on both ends' sockets or makes the open fail clearly;
 * that the RPC client's spin_us option reaches the provider; that a wake
 * count left for a waiter that has gone does not keep the CQ's fd
 * readable; and that only a spin that found data after an empty look (a
 * hit) counts as one and resets the back-off, not a read that finds data
 * at its first look (docs/PERFORMANCE.md "Issue 16 part AA").
 * Two endpoints over loopback TCP through the public API (RFC 5040 Send). */
#include "test.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "soft_net.h"

#define NET_BUF (1u << 16)

/* A connected pair on a context opened with RPCRDMA_SOFT_SPIN_US=@spin and
 * the fixed budget (RPCRDMA_SOFT_SPIN=fixed: the rule these tests check;
 * both read at open, unset again after). The adaptive budget's rule is
 * tests/engine/test_spin_adapt.c's. */
static void pair_with_spin_mode(struct net *n, const char *spin, const char *mode,
				struct rpcrdma_qp **c, struct rpcrdma_qp **s,
				struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid)
{
	setenv("RPCRDMA_SOFT_SPIN_US", spin, 1);
	setenv("RPCRDMA_SOFT_SPIN", mode, 1);
	soft_net_up_buf(n, 256, 16, NET_BUF);
	unsetenv("RPCRDMA_SOFT_SPIN_US");
	unsetenv("RPCRDMA_SOFT_SPIN");
	soft_net_pair(n, 16, c, s, cid, sid);
}

static void pair_with_spin(struct net *n, const char *spin, struct rpcrdma_qp **c,
			   struct rpcrdma_qp **s, struct rpcrdma_cm_id **cid,
			   struct rpcrdma_cm_id **sid)
{
	pair_with_spin_mode(n, spin, "fixed", c, s, cid, sid);
}

/* The budget: explicit values win (capped), RPCRDMA_SPIN_OFF is none, 0
 * reads RPCRDMA_SOFT_SPIN_US ("off" or a number; anything else is the
 * default) and falls back to RPCRDMA_SPIN_US_DEFAULT. */
TEST(soft_spin_budget_resolution)
{
	unsetenv("RPCRDMA_SOFT_SPIN_US");
	CHECK_EQ(rr_spin_us(0), RPCRDMA_SPIN_US_DEFAULT);
	CHECK_EQ(rr_spin_us(7), 7);
	CHECK_EQ(rr_spin_us(RPCRDMA_SPIN_OFF), 0);
	CHECK_EQ(rr_spin_us(RPCRDMA_SPIN_US_MAX + 1), RPCRDMA_SPIN_US_MAX);
	setenv("RPCRDMA_SOFT_SPIN_US", "35", 1);
	CHECK_EQ(rr_spin_us(0), 35);
	CHECK_EQ(rr_spin_us(9), 9); /* the caller's value over the environment */
	setenv("RPCRDMA_SOFT_SPIN_US", "0", 1);
	CHECK_EQ(rr_spin_us(0), 0);
	setenv("RPCRDMA_SOFT_SPIN_US", "off", 1);
	CHECK_EQ(rr_spin_us(0), 0);
	setenv("RPCRDMA_SOFT_SPIN_US", "99999999", 1);
	CHECK_EQ(rr_spin_us(0), RPCRDMA_SPIN_US_MAX);
	setenv("RPCRDMA_SOFT_SPIN_US", "12abc", 1);
	CHECK_EQ(rr_spin_us(0), RPCRDMA_SPIN_US_DEFAULT);
	setenv("RPCRDMA_SOFT_SPIN_US", "-5", 1);
	CHECK_EQ(rr_spin_us(0), RPCRDMA_SPIN_US_DEFAULT);
	setenv("RPCRDMA_SOFT_SPIN_US", "", 1);
	CHECK_EQ(rr_spin_us(0), RPCRDMA_SPIN_US_DEFAULT);
	unsetenv("RPCRDMA_SOFT_SPIN_US");
}

struct echo {
	struct net *n;
	struct rpcrdma_qp *s;
	int rounds;
	int fails;
};

/* The server side of the ping-pong: answers each Send at once. A thread of
 * its own: CHECK, never REQUIRE. */
static void *echo_main(void *arg)
{
	struct echo *e = arg;
	struct rpcrdma_wc wc;

	for (int i = 0; i < e->rounds; i++) {
		if (rpcrdma_cq_wait(e->n->scq, 1, &wc, 5000) != 1 ||
		    wc.status != RPCRDMA_WC_SUCCESS) {
			e->fails++;
			return NULL;
		}
		CHECK_EQ(soft_net_try_post_recv(e->n, e->s, 100, 4096, 256), 0);
		CHECK_EQ(soft_net_try_post_send(e->n, e->s, 2, RPCRDMA_WR_SEND, 4096, 32, 0, false),
			 0);
	}
	return NULL;
}

/* Until the client QP's socket holds bytes (the echo's answer), at most 5 s. */
static bool answer_waiting(struct rpcrdma_qp *c)
{
	struct pollfd p = {.fd = soft_net_qp_of(c)->obj.fd, .events = POLLIN};

	return poll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
}

/* Ping-pong with the answer sent by another thread. The client's CQ stays
 * armed between its waits, so it stays attended and no other thread reads
 * its QP's socket (rpcrdma_cq_fd: an armed soft CQ is served by its
 * consumer); the client looks at the socket itself until the answer is
 * there, then waits: a wait with a spin budget reads the answer at its
 * first look (ready: neither hit nor miss, whatever the machine's load),
 * one with spinning off reads it without spinning (not counted at all).
 * Returns the hits. */
static uint64_t ping_pong(const char *spin, uint64_t *misses, uint64_t *fast_reads,
			  uint64_t *ready)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct echo e = {.rounds = 100};
	pthread_t th;
	uint64_t hits;

	pair_with_spin(&n, spin, &c, &s, &cid, &sid);
	e.n = &n;
	e.s = s;
	for (int i = 0; i < 16; i++)
		soft_net_post_recv(&n, s, 100, 4096, 256);
	REQUIRE_EQ(pthread_create(&th, NULL, echo_main, &e), 0);
	for (int i = 0; i < e.rounds; i++) {
		soft_net_post_recv(&n, c, 200, 8192, 256);
		REQUIRE_EQ(rpcrdma_cq_arm(n.ccq, false), 0);
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
		REQUIRE(answer_waiting(c));
		REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
		CHECK_EQ(wc.wr_id, 200);
		(void)rpcrdma_cq_get_event(n.ccq);
	}
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(e.fails, 0);
	hits = atomic_load(&soft_net_cq_of(n.ccq)->spin_hits);
	*misses = atomic_load(&soft_net_cq_of(n.ccq)->spin_misses);
	*fast_reads = atomic_load(&soft_net_cq_of(n.ccq)->fast_reads);
	*ready = atomic_load(&soft_net_cq_of(n.ccq)->spin_ready);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
	return hits;
}

/* Deterministic (was timing-dependent: it failed ~1 run in 100 when the
 * answer was expected within the budget): every answer is in the socket
 * when the wait starts, so a spinning waiter finds each at its first look
 * (ready, not a hit: nothing was spun) and a non-spinning one reads it
 * without a look of the spin. */
TEST(soft_spin_finds_prompt_answers)
{
	uint64_t misses = 0, reads = 0, ready = 0, hits = ping_pong("1000", &misses, &reads, &ready);

	CHECK_EQ(hits, 0);
	CHECK_EQ(misses, 0);
	CHECK_EQ(ready, 100);
	CHECK(reads >= 100);
	hits = ping_pong("off", &misses, &reads, &ready);
	CHECK_EQ(hits, 0);
	CHECK_EQ(misses, 0);
	CHECK_EQ(ready, 0);
	CHECK(reads >= 100);   /* the same fast reads, without a spin */
}

/* The race hook of soft_spin_hit_after_empty_look: at the spin's first
 * empty look, the server sends and the hook returns once the answer is in
 * the client's socket, so the spin's next look finds it. */
struct spin_race {
	struct net *n;
	struct rpcrdma_qp *c, *s;
	int sent;
};
static struct spin_race spin_race;

static void send_in_spin(enum soft_race pt, void *obj)
{
	(void)obj;
	if (pt != SOFT_RACE_SPIN || spin_race.sent++)
		return;
	CHECK_EQ(soft_net_try_post_send(spin_race.n, spin_race.s, 2, RPCRDMA_WR_SEND, 4096, 32, 0,
					false),
		 0);
	CHECK(answer_waiting(spin_race.c));
}

/* A message that arrives while the waiter spins (after a look that found
 * nothing) is a hit; the same wait with the message there before it is
 * not (soft_spin_finds_prompt_answers). Fails without SOFT_RACE_SPIN (the
 * wait would time out) and with a first-look read counted as a hit. */
TEST(soft_spin_hit_after_empty_look)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_cq *q;
	rr_soft_race_fn old = atomic_load(&rr_soft_race_hook);

	pair_with_spin(&n, "1000", &c, &s, &cid, &sid);
	soft_net_post_recv(&n, c, 200, 8192, 256);
	q = soft_net_cq_of(n.ccq);
	spin_race = (struct spin_race){&n, c, s, 0};
	rr_soft_test_set_race_hook(send_in_spin);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	rr_soft_test_set_race_hook(old);
	CHECK_EQ(wc.wr_id, 200);
	CHECK(spin_race.sent >= 1);
	CHECK_EQ(atomic_load(&q->spin_hits), 1);
	CHECK_EQ(atomic_load(&q->spin_misses), 0);
	CHECK_EQ(atomic_load(&q->spin_ready), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The waiter on @q stopped spinning: at least @min_reads fast reads, whose
 * misses came SOFT_SPIN_MISSES at a time with SOFT_SPIN_SKIP sleeps at once
 * between, and no hit. */
static void check_backed_off(struct soft_cq *q, uint64_t min_reads)
{
	uint64_t reads = atomic_load(&q->fast_reads);
	uint64_t misses = atomic_load(&q->spin_misses);

	CHECK(reads >= min_reads);
	CHECK(misses >= SOFT_SPIN_MISSES);
	CHECK(misses <= SOFT_SPIN_MISSES * (1 + reads / SOFT_SPIN_SKIP));
	CHECK_EQ(atomic_load(&q->spin_hits), 0);
}

/* The waits of a 64 KiB READ's caller whose Reply comes after the budget
 * (docs/PERFORMANCE.md "Issue 16 part AA"): a wait that spins its budget
 * out with nothing there, then one that finds the message at its first
 * look (as the rest of a Reply read in two waits). That first look is not
 * a hit, so the misses add up and the waiter stops spinning after
 * SOFT_SPIN_MISSES of them; when it reset the count (before), every round
 * spun its budget out (12 misses, not 4). */
TEST(soft_spin_backs_off_for_late_answers)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_cq *q;
	const int rounds = 12;

	pair_with_spin(&n, "200", &c, &s, &cid, &sid);
	q = soft_net_cq_of(n.ccq);
	for (int i = 0; i < rounds; i++) {
		soft_net_post_recv(&n, c, 200 + (uint64_t)i, 8192, 256);
		/* nothing there: the fast read spins, then sleeps until its
		 * timeout */
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 1), 0);
		soft_net_post_send(&n, s, 1, RPCRDMA_WR_SEND, 0, 16, 0, false);
		REQUIRE(answer_waiting(c));
		REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 200 + (uint64_t)i);
	}
	check_backed_off(q, (uint64_t)rounds);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* Nothing arrives for a while (waits until 8 fast reads were made, ~40 ms
 * on an idle machine): the waiter's blocking reads end every
 * SOFT_FAST_BLOCK_MS and it waits again. Without the
 * adaptation each of them would spin its budget out; with it, after
 * SOFT_SPIN_MISSES misses the next SOFT_SPIN_SKIP waits sleep at once. */
TEST(soft_spin_backs_off_when_idle)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_cq *q;

	pair_with_spin(&n, "200", &c, &s, &cid, &sid);
	soft_net_post_recv(&n, c, 200, 8192, 256);
	q = soft_net_cq_of(n.ccq);
	/* waits of 50 ms until 8 fast reads were made (a loaded machine may
	 * give the waiter fewer per wait; the property is per read) */
	for (int i = 0; i < RR_TEST_WAIT_MS / 50 && atomic_load(&q->fast_reads) < 8; i++)
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 50), 0);
	check_backed_off(q, 8);
	/* still works: an answer after the idle time arrives */
	soft_net_post_send(&n, s, 1, RPCRDMA_WR_SEND, 0, 16, 0, false);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.wr_id, 200);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The adaptive budget (RPCRDMA_SOFT_SPIN=adaptive; the default is fixed) in the
 * fast waiter (sock.c rr_soft_sock_readv_fast): nothing arrives for 40
 * fast reads (each a SOFT_FAST_BLOCK_MS sleep that runs out): its misses
 * halve the budget in threes down to 0 (RR_SPIN_ADAPT_OFF halvings), then
 * only a probe in RR_SPIN_ADAPT_PROBE waits spins; an answer after the
 * idle time still arrives. Fails if the waiter never backs off (a miss
 * per read). */
TEST(soft_spin_adaptive_backs_off_when_idle)
{
	const uint64_t down = RR_SPIN_ADAPT_OFF * RR_SPIN_ADAPT_MISSES;
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_cq *q;
	uint64_t reads, misses;

	pair_with_spin_mode(&n, "200", "adaptive", &c, &s, &cid, &sid);
	REQUIRE(soft_net_qp_of(c)->ctx->spin_adaptive);
	soft_net_post_recv(&n, c, 200, 8192, 256);
	q = soft_net_cq_of(n.ccq);
	for (int i = 0; i < RR_TEST_WAIT_MS / 50 && atomic_load(&q->fast_reads) < 40; i++)
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 50), 0);
	reads = atomic_load(&q->fast_reads);
	misses = atomic_load(&q->spin_misses);
	CHECK(reads >= 40);
	CHECK(misses >= down);
	CHECK(misses <= down + 1 + reads / RR_SPIN_ADAPT_PROBE);
	CHECK_EQ(atomic_load(&q->spin_hits), 0);
	CHECK_EQ(rr_spin_adapt_budget(&soft_net_qp_of(c)->spin_adapt, 200000), 0u);
	soft_net_post_send(&n, s, 1, RPCRDMA_WR_SEND, 0, 16, 0, false);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.wr_id, 200);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

struct poster {
	struct net *n;
	struct rpcrdma_qp *c;
	struct soft_qp *sq;
};

/* Posts a signaled Send on the client QP once the waiter is in its fast
 * read: its completion is pushed by this thread, not read from the socket. */
static void *poster_main(void *arg)
{
	struct poster *p = arg;

	for (uint64_t dl_ = rr_test_deadline();
	     !__atomic_load_n(&p->sq->fast_rd, __ATOMIC_SEQ_CST) &&
	     rr_test_wait_left(dl_, "!__atomic_load_n(&p->sq->fast_rd, __ATOMIC_SEQ_CST to turn false");)
		usleep(500);
	/* a thread of its own: CHECK, never REQUIRE */
	CHECK_EQ(soft_net_try_post_send(p->n, p->c, 7, RPCRDMA_WR_SEND, 0, 16, 0, true), 0);
	return NULL;
}

/* A waiter that spins (1000 us budgets, the cap, between its 5 ms blocking
 * reads) gets a completion another thread pushes meanwhile: the wait ends
 * with it, promptly, and nothing is lost or duplicated. */
TEST(soft_spin_sees_foreign_completion)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct poster p;
	pthread_t th;
	uint64_t t0;

	pair_with_spin(&n, "1000", &c, &s, &cid, &sid);
	soft_net_post_recv(&n, s, 300, 4096, 256);
	p = (struct poster){&n, c, soft_net_qp_of(c)};
	REQUIRE_EQ(pthread_create(&th, NULL, poster_main, &p), 0);
	t0 = rr_now_ns(NULL);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK(rr_now_ns(NULL) - t0 < RR_TEST_PROMPT_NS);   /* not at its timeout */
	CHECK_EQ(wc.wr_id, 7);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.wr_id, 300);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

static void sock_cc(int fd, char *out, size_t len)
{
	socklen_t l = (socklen_t)len;

	memset(out, 0, len);
	REQUIRE_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out, &l), 0);
}

/* RPCRDMA_SOFT_TCP_CC=reno (always built in): both ends' sockets use it,
 * and messages flow; a name the kernel does not know fails the open with
 * -ENOENT instead of being ignored; unset: the system's default. */
TEST(soft_tcp_cc_env)
{
	struct rpcrdma_open_attr oa = {0};
	struct rpcrdma_context *ctx = NULL;
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	char cc[16], sys[16];
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	sock_cc(fd, sys, sizeof(sys));
	close(fd);

	setenv("RPCRDMA_SOFT_TCP_CC", "no-such-cc", 1);
	CHECK_EQ(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, &oa, &ctx), -ENOENT);
	CHECK(ctx == NULL);
	setenv("RPCRDMA_SOFT_TCP_CC", "a-name-longer-than-sixteen", 1);
	CHECK_EQ(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, &oa, &ctx), -EINVAL);

	setenv("RPCRDMA_SOFT_TCP_CC", "reno", 1);
	soft_net_up_buf(&n, 256, 16, NET_BUF);
	unsetenv("RPCRDMA_SOFT_TCP_CC");
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	sock_cc(soft_net_qp_of(c)->obj.fd, cc, sizeof(cc));
	CHECK_EQ(strcmp(cc, "reno"), 0);
	sock_cc(soft_net_qp_of(s)->obj.fd, cc, sizeof(cc));
	CHECK_EQ(strcmp(cc, "reno"), 0);
	soft_net_post_recv(&n, s, 5, 4096, 256);
	soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.wr_id, 5);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	sock_cc(soft_net_qp_of(c)->obj.fd, cc, sizeof(cc));
	CHECK_EQ(strcmp(cc, sys), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* ---- the RPC client's spin_us option reaches the provider ---- */

#define SPIN_PROG 0x2000051au

static int h_slow(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	usleep(3000); /* longer than any budget: every wait of the caller misses */
	return RPCRDMA_SVC_OK;
}

/* Spins (hits + misses) of every fast waiter of the process over 12 slow
 * calls of a client with @spin_us. */
static uint64_t slow_calls_spins(const char *url, uint32_t spin_us)
{
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .spin_us = spin_us};
	struct rpcrdma_client *c = NULL;
	uint64_t s0;

	REQUIRE_EQ(rpcrdma_client_create(url, SPIN_PROG, 1, &co, &c), 0);
	s0 = atomic_load(&soft_counters.spin_hits) + atomic_load(&soft_counters.spin_misses);
	for (int i = 0; i < 12; i++) {
		struct rpcrdma_call *call;

		REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
		CHECK_EQ(rpcrdma_call_run(call), 0);
		rpcrdma_call_destroy(call);
	}
	s0 = atomic_load(&soft_counters.spin_hits) + atomic_load(&soft_counters.spin_misses) - s0;
	rpcrdma_client_destroy(c);
	return s0;
}

/* rpcrdma_client_opts.spin_us reaches the provider: at the cap (1000 us)
 * the caller's waits spin before sleeping (the handler takes 3 ms: misses,
 * at least SOFT_SPIN_MISSES before the adaptation pauses them; a hit only
 * when the caller was kept off the CPU for as long); with
 * RPCRDMA_SPIN_OFF no wait spins. The server spins never (its own option)
 * and nothing else of the process waits meanwhile: the provider's
 * process-wide counts of spins tell which happened (before, the calling
 * thread's CPU time did, a timing comparison). */
TEST(soft_spin_rpc_client_option)
{
	struct rpcrdma_server_opts so = {.threads = 2, .spin_us = RPCRDMA_SPIN_OFF};
	struct rpcrdma_server *s = NULL;
	char url[64];

	unsetenv("RPCRDMA_SOFT_SPIN_US");
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, SPIN_PROG, 1, 1, h_slow, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	CHECK_EQ(slow_calls_spins(url, RPCRDMA_SPIN_OFF), 0);
	CHECK(slow_calls_spins(url, RPCRDMA_SPIN_US_MAX) >= SOFT_SPIN_MISSES);
	rpcrdma_server_destroy(s);
}

/* A count written into a CQ's wake eventfd for a waiter (here: another
 * thread's completion while the waiter sleeps in a fast read) does not keep
 * the CQ's fd readable once that waiter has left: the next poll drains it.
 * Otherwise a poll(2) user of the fd (the RPC server loop with several
 * connections) is woken on every turn for nothing. */
TEST(soft_wake_count_drained_by_poll)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_net_waiter w;
	struct pollfd pfd;

	pair_with_spin(&n, "off", &c, &s, &cid, &sid);
	soft_net_post_recv(&n, s, 300, 4096, 256);
	soft_net_wait_start(&w, n.ccq, 5000);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	/* the Send's completion is pushed by this thread, not the waiter */
	soft_net_post_send(&n, c, 7, RPCRDMA_WR_SEND, 0, 16, 0, true);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 7);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.wr_id, 300);
	CHECK_EQ(rpcrdma_cq_poll(n.ccq, 1, &wc), 0);
	pfd = (struct pollfd){.fd = rpcrdma_cq_fd(n.ccq), .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
