/* SPDX-License-Identifier: BSD-2-Clause */
/* The test knob RPCRDMA_SERVER_SEND_TIMEOUT_MS (rpc/svc.c, docs/api.md
 * "Environment"): the send timeout of an rdma:// server's connections,
 * and so when quiet Replies (RFC 8166 Replies posted unsignaled, told to
 * nobody) get their probe, a signaled zero-length RDMA Write (RFC 5040;
 * transport/rdma/conn.c tp_quiet_watch), counted in quiet_probes and
 * quiet_probes_done. Bad values are refused with -EINVAL. The server runs
 * on a virtual clock (opts.env) stepped a second at a time, each step
 * waiting for the probe's counter (bounded: a walk runs every 10-100 ms);
 * the test asserts on virtual time only. Over the software iWARP
 * provider; the rdma:// part is not run without it. */
#include "test.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/loop.h"
#include "rpc/svcint.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"
#include "xprt_harness.h"

#define PROG 0x2000019au
#define T_ECHO 1u
#define KNOB "RPCRDMA_SERVER_SEND_TIMEOUT_MS"

TEST(server_send_timeout_knob_parse)
{
	static const struct {
		const char *v;
		int rc;
		uint32_t ms;
	} cases[] = {
		{NULL, 0, 0}, {"", 0, 0}, {"100", 0, 100}, {"4000", 0, 4000},
		{"0004000", 0, 4000}, {"3600000", 0, 3600000},
		{"99", -EINVAL, 0}, {"0", -EINVAL, 0}, {"3600001", -EINVAL, 0},
		{"-4000", -EINVAL, 0}, {"+4000", -EINVAL, 0}, {"4000ms", -EINVAL, 0},
		{"4s", -EINVAL, 0}, {"4.5", -EINVAL, 0}, {" 4000", -EINVAL, 0},
		{"4000 ", -EINVAL, 0}, {"0x1000", -EINVAL, 0},
		{"4294971296", -EINVAL, 0},              /* 2^32 + 4000 */
		{"18446744073709555616", -EINVAL, 0},    /* 2^64 + 4000 */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t ms = 12345;
		int rc = rr_svc_send_timeout_parse(cases[i].v, &ms);

		if (rc != cases[i].rc || ms != cases[i].ms)
			fprintf(stderr, "  '%s': rc %d ms %u\n", cases[i].v ? cases[i].v : "(null)",
				rc, ms);
		CHECK_EQ(rc, cases[i].rc);
		CHECK_EQ(ms, cases[i].ms);
	}
}

/* A bad value makes the server fail to be created, on every transport. */
TEST(server_send_timeout_knob_bad_value_refused)
{
	static const char *const bad[] = {"4s", "-1", "99", "3600001", "1e4"};
	struct rpcrdma_server *s = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(KNOB, bad[i], 1);
		CHECK_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", NULL, &s), -EINVAL);
		CHECK(s == NULL);
		CHECK_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", NULL, &s), -EINVAL);
		CHECK(s == NULL);
	}
	setenv(KNOB, "4000", 1);
	CHECK_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", NULL, &s), 0);
	if (s)
		rpcrdma_server_destroy(s);
	unsetenv(KNOB);
}

static _Atomic uint64_t vclock_ns;
static atomic_uint vclock_loop_reads;   /* of the time last stepped to */

/* The server's clock; counts the reads made on a progress loop (the
 * shard's walk of its connections' timers reads it there). */
static uint64_t vnow(void *ctx)
{
	(void)ctx;
	if (rr_loop_current())
		atomic_fetch_add(&vclock_loop_reads, 1);
	return atomic_load(&vclock_ns);
}

static bool vclock_read_4(void *arg)
{
	(void)arg;
	return atomic_load(&vclock_loop_reads) >= 4;
}

struct probe_wait {
	struct rpcrdma_server *s;
	uint64_t probes;
};

static bool probe_done(void *arg)
{
	struct probe_wait *w = arg;
	struct rpcrdma_xprt_stats st;

	return rpcrdma_server_stats(w->s, &st) == 0 && st.quiet_probes_done > w->probes;
}

/* Three ECHOs answered by quiet Replies, then the virtual clock stepped
 * a second at a time, each step waiting (bounded) for a probe completed.
 * Returns the step (virtual seconds since the calls) at which one was,
 * 0 if none by 25 s; @st the server's counters then. */
static unsigned probe_second(const char *knob, struct rpcrdma_xprt_stats *st)
{
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rpcrdma_server_opts so = {.threads = 2, .env = &env};
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c = NULL;
	struct probe_wait w = {0};
	unsigned sec = 0;
	char url[64];

	env.now_ns = vnow;
	atomic_store(&vclock_ns, 1000000000ull);
	if (knob)
		setenv(KNOB, knob, 1);
	else
		unsetenv(KNOB);
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	unsetenv(KNOB);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, rr_th_h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &c), 0);
	for (uint32_t v = 0; v < 3; v++)
		rr_th_echo(c, T_ECHO, v);
	w.s = s;
	REQUIRE_EQ(rpcrdma_server_stats(s, st), 0);
	CHECK_EQ(st->quiet_probes, 0);   /* no virtual time has passed */
	w.probes = 0;
	for (unsigned k = 1; k <= 25 && !sec; k++) {
		/* one second of virtual time, read by the loops four times
		 * (the walk, every 10-100 ms of real time, has seen it: a read
		 * that counts began after the step, and a later read of the
		 * same loop follows that walk); a probe it sent is then
		 * awaited (an event that must come) within the same second.
		 * Before, a bound of 300 ms of real time per second: a slow
		 * walk or completion moved the clock on, past the stall
		 * timeout at worst. */
		atomic_store(&vclock_loop_reads, 0);
		atomic_fetch_add(&vclock_ns, 1000000000ull);
		REQUIRE(rr_test_wait_for(vclock_read_4, NULL, "the walk reads the stepped clock"));
		REQUIRE_EQ(rpcrdma_server_stats(s, st), 0);
		if (st->quiet_probes > 0 || probe_done(&w)) {
			CHECK(rr_test_wait_for(probe_done, &w, "the quiet probe's completion"));
			sec = k;
		}
	}
	REQUIRE_EQ(rpcrdma_server_stats(s, st), 0);
	if (sec)
		rr_th_echo(c, T_ECHO, 41);   /* the connection kept and answering after the probe */
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	return sec;
}

/* The knob reaches the quiet Sends' watch: with 4 s, the probe goes
 * once the quiet Replies waited 2 s (virtual; not at 1 s), completes,
 * and the connection stays; without it (60 s) none goes by 25 s. Fails
 * when the knob is not read (no probe by 25 s) or not passed on to the
 * watch's timeout. */
TEST(server_send_timeout_knob_reaches_the_quiet_watch)
{
	struct rpcrdma_xprt_stats st;
	unsigned sec;

	if (!rr_th_soft_ok())
		return;
	sec = probe_second("4000", &st);
	fprintf(stderr, "  knob 4000 ms: probe completed at virtual second %u (probes %llu, "
		"done %llu, send_stalls %llu)\n", sec, (unsigned long long)st.quiet_probes,
		(unsigned long long)st.quiet_probes_done, (unsigned long long)st.send_stalls);
	CHECK(sec != 0);
	CHECK(sec >= 2);   /* half the timeout, not before */
	CHECK_EQ(st.quiet_probes, 1);
	CHECK_EQ(st.quiet_probes_done, 1);
	CHECK_EQ(st.send_stalls, 0);
	CHECK_EQ(st.fatal_errors, 0);
	sec = probe_second(NULL, &st);
	fprintf(stderr, "  no knob: probe at virtual second %u (0: none by 25)\n", sec);
	CHECK_EQ(sec, 0);
	CHECK_EQ(st.quiet_probes, 0);
}
