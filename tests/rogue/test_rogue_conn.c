/* SPDX-License-Identifier: BSD-2-Clause */
/* Rogue connections (docs/security.md "Limits", issue 12 findings 5 and
 * 7): storms of connections opened and abandoned at every step of the
 * setup, file-descriptor exhaustion of the server process by half-open
 * connections (a lowered RLIMIT_NOFILE), connections that stay silent, and
 * memory after connection churn. The answers: a storm delays nobody and
 * leaves nothing behind; on EMFILE the server backs off without a busy
 * loop and keeps serving its connections; a connection silent for
 * idle_timeout_ms (default 6 min, on the server's clock) is closed; the
 * memory of closed connections is given back. CPU and time bounds here are
 * wide, and only guard against busy loops and blocking. */
#include <poll.h>
#include <sys/socket.h>

#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

/* Ways to abandon a connection during its setup. */
enum vanish { V_TCP_CLOSE, V_TCP_RESET, V_HALF_MPA, V_MPA_NO_READ, V_RDMA_CLOSE, V_KINDS };

static void set_reset(int fd)
{
	struct linger lg = {1, 0};

	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* The storms come from another host than the clients that must be served
 * meanwhile (the server's per-host limits are meant to refuse the storm,
 * not its victims). */
#define STORM_SRC "127.0.0.2"

/* Opens one connection to @port (from STORM_SRC) and abandons it the way
 * @k says; raw sockets and a prepared MPA Request, so that the storm costs
 * its threads little CPU (on a 2-core machine the attacker and the server
 * share the CPUs). 0, -ECONNREFUSED / -ECONNRESET (refused), or another
 * -errno (no answer in time). */
static int vanish_once(int port, enum vanish k, const uint8_t *req, size_t rlen)
{
	int fd = rr_rogue_tcp(port, 0, STORM_SRC);
	int rc = 0;

	if (fd < 0)
		return fd;
	if (k == V_HALF_MPA)
		(void)send(fd, req, 10, MSG_NOSIGNAL);
	if (k == V_MPA_NO_READ || k == V_RDMA_CLOSE)
		(void)send(fd, req, rlen, MSG_NOSIGNAL);
	if (k == V_RDMA_CLOSE) {
		/* the MPA Reply: the connection is established (or refused) */
		uint8_t rep[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n = 0;

		if (poll(&pfd, 1, RT_MS) == 1)
			n = recv(fd, rep, sizeof(rep), 0);
		if (n <= 0)
			rc = n == 0 || errno == ECONNRESET ? -ECONNRESET : -ETIMEDOUT;
		else if (n > RR_MPA_KEY_LEN && (rep[RR_MPA_KEY_LEN] & RR_MPA_F_REJECT))
			rc = -ECONNREFUSED;
	}
	if (k == V_TCP_RESET || k == V_MPA_NO_READ || k == V_RDMA_CLOSE)
		set_reset(fd);
	close(fd);
	return rc;
}

#define STORM_THREADS 8

/* @n connections abandoned by STORM_THREADS threads in parallel. */
struct storm {
	int port;
	unsigned n;
	int kind;             /* enum vanish, or -1: every kind in turn */
	atomic_uint next;     /* attempts handed out */
	atomic_bool stop;     /* end now (rr_storm_stop) */
	atomic_uint done;
	atomic_uint refused;  /* refused (MPA Reject, TCP RST): a limit's answer */
	atomic_uint failed;   /* anything else: no answer in time */
	pthread_t th[STORM_THREADS];
};

static void *storm_main(void *arg)
{
	struct storm *s = arg;
	struct rr_rogue_opts o;
	uint8_t req[600];
	int rlen;
	unsigned i;

	rr_rogue_opts_default(&o);
	rlen = rr_rogue_mpa_request(&o, req, sizeof(req));
	while (!atomic_load(&s->stop) && (i = atomic_fetch_add(&s->next, 1)) < s->n) {
		enum vanish k = s->kind < 0 ? (enum vanish)(i % V_KINDS) : (enum vanish)s->kind;
		int rc = rlen > 0 ? vanish_once(s->port, k, req, (size_t)rlen) : rlen;

		if (rc == -ECONNREFUSED || rc == -ECONNRESET)
			atomic_fetch_add(&s->refused, 1);
		else if (rc)
			atomic_fetch_add(&s->failed, 1);
		atomic_fetch_add(&s->done, 1);
	}
	return NULL;
}

static void storm_start(struct storm *s, int port, unsigned n, int kind)
{
	memset(s, 0, sizeof(*s));
	s->port = port;
	s->n = n;
	s->kind = kind;
	for (int t = 0; t < STORM_THREADS; t++)
		REQUIRE_EQ(pthread_create(&s->th[t], NULL, storm_main, s), 0);
}

/* Ends the storm early and joins its threads. */
static void storm_stop(struct storm *s)
{
	atomic_store(&s->stop, true);
	for (int t = 0; t < STORM_THREADS; t++)
		pthread_join(s->th[t], NULL);
}

static void storm_join(struct storm *s)
{
	for (int t = 0; t < STORM_THREADS; t++)
		pthread_join(s->th[t], NULL);
}

/* 500 connections abandoned at every step of the setup (TCP close, TCP
 * reset, half an MPA Request, a whole Request then reset, an established
 * connection reset), 8 at a time, while a client keeps calling: each
 * attempt is served or refused (the per-host limits may refuse some: that
 * is their answer), none hangs; the client never fails; the server ends
 * with no connection left and serves a new client. */
TEST(rogue_storm_abandoned_connections)
{
	struct rr_fx_srv f;
	struct rr_fx_busy b;
	struct storm s;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	REQUIRE_EQ(rr_fx_busy_start(&b, f.port, "busy.bin", 2000, 3), 0);
	storm_start(&s, f.port, 500, -1);
	storm_join(&s);
	rr_fx_busy_stop(&b);
	printf("  %u refused (connection limits), %u failed\n", atomic_load(&s.refused),
	       atomic_load(&s.failed));
	CHECK_EQ(atomic_load(&s.failed), 0);
	CHECK(atomic_load(&b.calls) > 0);
	CHECK_EQ(atomic_load(&b.failures), 0);
	CHECK(rr_fx_srv_wait_conns(&f, 0, RT_MS));
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* 8 threads keep setting up connections from another host (the MPA
 * exchange done, then a reset) to a server started with @so (NULL:
 * defaults) while, after every 50 of them, a new client arrives: it must be
 * connected and served (connect, NULL, ECHO) without being kept waiting
 * while the storm is served -- never for the limit or more during which 20
 * storm connections or more were set up. (Normally it takes 2-100 ms, while
 * 0-300 storm connections come and go; a slow machine or build that
 * serves everyone slowly does not fail it, a server that serves the storm
 * first does.) The limit is 1 s, or 25 times the slowest of two probes of
 * the same server before the storm when that is more: a machine on which
 * a lone client's connect and two calls take 40 ms or more (a TCG lab
 * guest on a loaded host: 1,146 ms with 22 storm connections served once,
 * 2026-11-27) is measured against itself. Native runs on the 2-core
 * development machine: the probes take 2-10 ms (30-40 ms with the slow
 * setup of the next test): the limit stays 1 s, where the regressions
 * this test was written for took 1.1-13 s. */
static void storm_new_clients(const struct rpcrdma_server_opts *so)
{
	struct rr_fx_srv f;
	struct storm s;
	unsigned slow = 0;
	uint64_t base = 0, limit;

	REQUIRE_EQ(rr_fx_srv_start(&f, so), 0);
	for (int k = 0; k < 2; k++) {
		uint64_t t0 = rr_fx_ms(), dt;

		REQUIRE_EQ(rr_fx_probe(f.port, RT_MS), 0);
		dt = rr_fx_ms() - t0;
		base = dt > base ? dt : base;
	}
	limit = base * 25 > 1000 ? base * 25 : 1000;
	printf("  a lone client (no storm) served in %llu ms at most: the limit is %llu ms\n",
	       (unsigned long long)base, (unsigned long long)limit);
	storm_start(&s, f.port, 1000000, V_RDMA_CLOSE);
	for (int k = 0; k < 3; k++) {
		unsigned d0, d1, want = atomic_load(&s.done) + 50;
		uint64_t t0, dt, end = rr_fx_ms() + RT_MS;
		int rc;

		while (atomic_load(&s.done) < want && rr_fx_ms() < end)
			rr_th_sleep_ms(1);
		d0 = atomic_load(&s.done);
		t0 = rr_fx_ms();
		rc = rr_fx_probe(f.port, RT_MS);
		dt = rr_fx_ms() - t0;
		d1 = atomic_load(&s.done);
		printf("  new client after %u storm connections: %s in %llu ms, %u storm connections "
		       "served meanwhile\n", d0, rc ? strerror(-rc) : "served",
		       (unsigned long long)dt, d1 - d0);
		CHECK_EQ(rc, 0);
		/* kept waiting while the storm was served */
		slow += dt >= limit && d1 - d0 >= 20;
	}
	storm_stop(&s);
	CHECK_EQ(slow, 0);
	CHECK_EQ(atomic_load(&s.failed), 0);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Finding 7 of issue 12, the storm (storm_new_clients): on 630ae3a, 500
 * connect-and-vanish attempts delayed a new client by 3.9 s; there new
 * clients waited 1.3-2.9 s while about 500 storm connections were served.
 * Under ASan on f4c5460 (a setup cost 50-75 ms there, see the next test)
 * 5-13 s while 160-620 were. */
TEST(rogue_finding7_storm_delays_no_new_client)
{
	if (!rr_th_soft_ok())
		return;
	storm_new_clients(NULL);
}

#if defined(__SANITIZE_ADDRESS__)
#define ROGUE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROGUE_ASAN 1
#endif
#endif

/* The server's allocations of 1 MiB or more (a connection's Receive and
 * Send buffers) take 3 ms longer: setting a connection up costs
 * milliseconds, in any build, as under ASan (50-75 ms on a loaded machine
 * before rr_zalloc used calloc, 7 ms after) or with a provider that pins
 * and registers megabytes. A cost, not a synchronisation. */
static void *slow_alloc(void *ctx, size_t size)
{
	(void)ctx;
	if (size >= (1u << 20))
		rr_th_sleep_ms(3);
	return malloc(size);
}

static void slow_free(void *ctx, void *ptr)
{
	(void)ctx;
	free(ptr);
}

/* The storm of the previous test against a server whose connection setup
 * is slow. On f4c5460 its loop took every connection request queued before
 * it served a CQ again, and the storm's requests came as fast as it set
 * them up: established connections waited for as long as the storm lasted
 * (the new client's NULL Call 7.5 s under ASan; a busy client's Call timed
 * out after 10 s in rogue_storm_abandoned_connections); here, in Release,
 * new clients waited 3.5-13 s while 190-900 storm connections were served,
 * and with the per-turn budget alone (the lock still held during a setup)
 * 1.1-4 s while 60-240 were. Now the loop handles a few requests per turn
 * and no longer holds its lock while it sets a connection up (the threads
 * answering Calls need it). */
TEST(rogue_finding7_storm_slow_setup_delays_no_new_client)
{
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rpcrdma_server_opts so;

	if (!rr_th_soft_ok())
		return;
#ifdef ROGUE_ASAN
	/* There the buffers an injected allocator gives are written whole
	 * (rr_zalloc): 50-75 ms a setup, and a fair server keeps a new
	 * client for the 8 storm requests queued before its own and a few
	 * more, about 1 s, at the bounds of the test. The storm itself is
	 * tested there by the previous test. */
	printf("  skipped under ASan (a setup costs 50-75 ms there already)\n");
	return;
#endif
	env.alloc = slow_alloc;
	env.free = slow_free;
	env.alloc_ctx = NULL;
	memset(&so, 0, sizeof(so));
	so.env = &env;
	storm_new_clients(&so);
}

/* Finding 7 of issue 12, churn: on 630ae3a the server kept 1.72 GB RSS
 * after 12,200 connections had been opened and closed. Here the
 * rpcrdma-server child process serves 4 rounds of 48 connections open at
 * once (each makes a NULL Call, then all close); its RSS after the last
 * round is within 20 MB of what it was after the first (on 630ae3a,
 * Release: 9 MB after the first round, 197 MB after the second, 375 MB
 * after the fourth; the ASan allocator does not keep that memory, so under
 * ASan this passes there too). */
TEST(rogue_finding7_churn_memory_returned)
{
	enum { BATCH = 48, ROUNDS = 4 };
	struct rr_fx_child c;
	struct rr_rogue *g[BATCH];
	long first = 0, last = 0;

	int idle_fds;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_child_start(&c, 0, 2), 0);
	idle_fds = rr_fx_child_nfds(&c);
	REQUIRE(idle_fds > 0);
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < BATCH; i++)
			g[i] = rt_open(c.port, NULL);
		for (int i = 0; i < BATCH; i++)
			rt_expect_null_ok(g[i], 0xa1000000u + (uint32_t)(r * BATCH + i));
		for (int i = 0; i < BATCH; i++)
			rr_rogue_shutdown(g[i], false), rr_rogue_free(g[i]);
		/* the server has closed them all (their sockets are gone) */
		CHECK(rr_fx_child_wait_nfds(&c, idle_fds, RT_MS));
		last = rr_fx_child_rss_kb(&c);
		rt_probe_ok(c.port);
		if (r == 0)
			first = last;
		printf("  round %d: RSS %ld KiB\n", r, last);
	}
	CHECK(first > 0);
	CHECK(last - first < 20 * 1024);
	CHECK_EQ(rr_fx_child_stop(&c, RT_MS), 0);
}

/* Finding 5 of issue 12: with RLIMIT_NOFILE reached by half-open TCP
 * connections (accepted, no MPA Request), the provider's thread of
 * 630ae3a spun at 100% CPU in accept4 (EMFILE). Now, in the
 * rpcrdma-server child process limited to 64 descriptors: while 100
 * half-open connections hold (or wait for) its descriptors it uses less
 * than 0.5 s of CPU and its threads are runnable for less than 1 s of a 2 s
 * window (no busy loop, whatever the load of the machine), it still
 * serves its established connection, and serves new clients once they are
 * gone. */
TEST(rogue_finding5_fd_exhaustion_no_busy_loop)
{
	enum { HALF = 100 };
	struct rr_fx_child c;
	struct rr_rogue *g;
	int fds[HALF];
	double cpu0, cpu1, run0, run1;
	uint64_t end;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_child_start(&c, 64, 2), 0);
	g = rt_open(c.port, NULL);
	rt_expect_null_ok(g, 0xa3000001);
	for (int i = 0; i < HALF; i++)
		fds[i] = rr_rogue_tcp(c.port, 0, STORM_SRC);   /* beyond the limit: in the backlog */
	/* the server has taken what it can (bounded: the measure runs anyway) */
	end = rr_fx_ms() + 5000;
	while (rr_fx_child_nfds(&c) < 62 && rr_fx_ms() < end)
		rr_th_sleep_ms(10);
	printf("  server descriptors: %d of 64\n", rr_fx_child_nfds(&c));
	cpu0 = rr_fx_child_cpu(&c);
	run0 = rr_fx_child_runnable(&c);
	rr_th_sleep_ms(2000);   /* the measurement window, not a synchronisation */
	cpu1 = rr_fx_child_cpu(&c);
	run1 = rr_fx_child_runnable(&c);
	printf("  server in a 2 s window at the limit: CPU %.2f s, runnable %.2f s\n", cpu1 - cpu0,
	       run1 - run0);
	CHECK(cpu0 >= 0 && cpu1 >= 0 && run0 >= 0 && run1 >= 0);
	/* CPU, and runnable time: a spinning thread on a loaded machine may
	 * get little CPU but is runnable all the time (2 s); a sleeping one
	 * waits for a CPU a little after each wake-up (0.3 s seen at load 4) */
	CHECK(cpu1 - cpu0 < 0.5);
	CHECK(run1 - run0 < 1.0);
	rt_expect_null_ok(g, 0xa3000002);   /* its connection is still served */
	for (int i = 0; i < HALF; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	rt_probe_ok(c.port);
	rr_rogue_free(g);
	CHECK(rr_fx_child_alive(&c));
	CHECK_EQ(rr_fx_child_stop(&c, RT_MS), 0);
}

/* A virtual clock for the server (struct rpcrdma_env.now_ns). */
static _Atomic uint64_t vclock_ns = 1000000000ull;

static uint64_t vclock_now(void *ctx)
{
	(void)ctx;
	return atomic_load(&vclock_ns);
}

/* Finding 7 of issue 12, idle connections: on 630ae3a an established
 * connection that never sends was kept forever (about 4 MiB RSS and 4 fds
 * each). The server runs on a virtual clock; a silent rogue connection is
 * closed once the clock passed the default idle_timeout_ms (6 min), while
 * new clients keep being served (their calls also give the server occasions
 * to look at its timers). */
TEST(rogue_finding7_idle_connection_closed)
{
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rpcrdma_server_opts so;
	struct rr_fx_srv f;
	struct rr_rogue *g;
	uint64_t end;
	int r = -ETIMEDOUT;

	if (!rr_th_soft_ok())
		return;
	env.now_ns = vclock_now;
	env.clock_ctx = NULL;
	memset(&so, 0, sizeof(so));
	so.env = &env;
	REQUIRE_EQ(rr_fx_srv_start(&f, &so), 0);
	g = rt_open(f.port, NULL);
	rt_expect_null_ok(g, 0xa4000001);
	rt_probe_ok(f.port);
	atomic_fetch_add(&vclock_ns, 361ull * 1000000000ull);
	end = rr_fx_ms() + RT_MS;
	while (r == -ETIMEDOUT && rr_fx_ms() < end) {
		r = rr_rogue_wait_end(g, 250);
		if (r == -ETIMEDOUT)
			rt_probe_ok(f.port);
	}
	if (r < 0)
		fprintf(stderr, "  the silent connection is still open after 6 min (virtual)\n");
	CHECK(r >= 0);
	CHECK(rr_fx_srv_wait_conns(&f, 0, RT_MS));
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}
