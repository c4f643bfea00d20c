/* SPDX-License-Identifier: BSD-2-Clause */
/* Rogue requesters against the server's budgets (docs/security.md
 * "Limits"; issue 12 findings 3 and 4): Read chunks that are never pulled,
 * Calls whose Replies would pin more memory than a connection or the server
 * may hold, more Calls in one TCP write than credits were granted (RFC 8166
 * section 4.3.1), and allocation failures in the server under load. The
 * decided answers: a Reply over a budget is sent as RDMA_ERROR ERR_CHUNK
 * (RFC 8166: a Reply that fits no offered form) -- every Call gets an
 * answer, none is dropped silently, no worker thread waits for a peer's
 * RDMA_DONE -- and an allocation failure while handling a Call is answered
 * (ERR_CHUNK or an RPC SYSTEM_ERR) or ends that connection; other clients
 * are served meanwhile. */
#include <execinfo.h>
#include <pthread.h>

#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

/* Collects the answers to @n Calls with XIDs @xid.. within @ms: each must
 * be a Reply with a Read chunk (its length is added to *@exposed) or
 * RDMA_ERROR ERR_CHUNK. Returns how many came. */
static unsigned collect_rrep_answers(struct rr_rogue *g, uint32_t xid, unsigned n,
				     uint64_t *exposed, unsigned *errs, unsigned ms)
{
	uint64_t end = rr_fx_ms() + ms;
	unsigned got = 0;

	while (got < n && rr_fx_ms() < end) {
		struct rr_rogue_reply rep;
		int len = rr_rogue_wait_msg(g, (unsigned)(end - rr_fx_ms()));

		if (len < 0) {
			fprintf(stderr, "  %u of %u answered, then: %s\n", got, n, strerror(-len));
			break;
		}
		if (rr_rogue_parse_reply(g, g->msg, (size_t)len, &rep)) {
			CHECK(false);
			continue;
		}
		CHECK(rep.hdr.xid - xid < n);
		if (rep.hdr.proc == RR_HDR_NOMSG && rep.rchunk) {
			*exposed += rep.rchunk->length;
		} else if (rep.hdr.proc == RR_HDR_ERROR) {
			CHECK_EQ(rep.hdr.err, RR_HDR_ERR_CHUNK);
			(*errs)++;
		} else {
			fprintf(stderr, "  answer of proc %u\n", rep.hdr.proc);
			CHECK(false);
		}
		got++;
	}
	return got;
}

/* Finding 3 of issue 12: 40 Calls whose Replies go out as Read chunks the
 * peer never pulls. On 630ae3a the Calls beyond rrep_max (32) each held a
 * worker thread for rrep_timeout_ms (30 s) waiting for an RDMA_DONE: another
 * client's READ took 59.5 s, and the last Calls got no answer for 30 s. Now
 * no thread waits for them (they are parked): another client's READ
 * completes within the bound, and all 40 Calls are answered (Read chunk, or
 * ERR_CHUNK once rrep_timeout_ms, 2 s here, passed without a reservation)
 * within it. */
TEST(rogue_finding3_unpulled_read_chunks_stall_nobody)
{
	enum { N = 40 };
	struct rpcrdma_server_opts so = {.rrep_timeout_ms = 2000};
	struct rr_fx_srv f;
	struct rr_rogue *g;
	uint64_t exposed = 0;
	unsigned errs = 0, got;
	uint64_t t0;
	int rc;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, &so), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "r.bin", 65536, 5), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "n.bin", 1u << 20, 6), 0);
	g = rt_open_small(f.port);
	rt_send_reads(g, 0x81000000, N, "r.bin", 65536);
	/* the server has all 40 before the other client asks */
	CHECK(rr_fx_srv_wait_stat(&f, RR_FX_STAT(msg_recv), N, RT_MS));
	t0 = rr_fx_ms();
	rc = rr_fx_client_read(f.port, "n.bin", 1u << 20, 6, RT_MS);
	printf("  the other client's READ: %s after %llu ms\n", rc ? strerror(-rc) : "done",
	       (unsigned long long)(rr_fx_ms() - t0));
	CHECK_EQ(rc, 0);
	got = collect_rrep_answers(g, 0x81000000, N, &exposed, &errs, RT_MS);
	CHECK_EQ(got, N);
	CHECK_EQ(errs, N - 32);   /* the 8 beyond rrep_max: ERR_CHUNK at the timeout */
	rr_rogue_free(g);
	rt_probe_ok(f.port);
	rr_fx_srv_stop(&f);
}

/* Finding 4 of issue 12, per connection: 32 READs of 8 MiB (about 100 bytes
 * each on the wire) whose Replies go out as Read chunks never pulled. On
 * 630ae3a they pinned 256 MiB of server memory for 30 s. The Read chunks
 * one connection holds exposed at once stay within reply_mem_per_conn
 * (default 16 MiB); the rest are ERR_CHUNK; all 32 are answered. As in the
 * per-server test below, the sum of the Read chunks sent is what is exposed
 * at once only if none is fenced by rrep_timeout_ms meanwhile: the timeout
 * is set beyond the test's length (the server reads 8 MiB per READ before
 * the budget refuses its Reply, which under load may take longer than the
 * default 30 s). */
TEST(rogue_finding4_reply_memory_per_connection)
{
	enum { N = 32 };
	struct rpcrdma_server_opts so = {.rrep_timeout_ms = 3600000};
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_opts o;
	uint64_t exposed = 0;
	unsigned errs = 0;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, &so), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "big.bin", FS_MAX_IO, 7), 0);
	rr_rogue_opts_default(&o);
	o.recv_size = 1024;
	g = rt_open(f.port, &o);
	rt_send_reads(g, 0x82000000, N, "big.bin", FS_MAX_IO);
	CHECK_EQ(collect_rrep_answers(g, 0x82000000, N, &exposed, &errs, RT_BIG_MS), N);
	if (exposed > (16u << 20))
		fprintf(stderr, "  %llu MiB exposed to one connection\n",
			(unsigned long long)(exposed >> 20));
	CHECK(exposed <= (16u << 20));
	CHECK(errs > 0);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}

/* Finding 4, per server: 20 connections each asking for 15 Replies of
 * 1 MiB (15 MiB each, under the per-connection budget; 300 MiB in all)
 * never pulled. What the server exposes at once stays within
 * reply_mem_total (default 256 MiB); every Call is answered. The test adds
 * up the Read chunks it is sent: that is what is exposed at once only if
 * none of them is fenced by rrep_timeout_ms meanwhile, so the timeout is
 * set far beyond the test's length (the Debian 13 lab guest, at a host
 * load of 47, took more than the default 30 s and was sent 300 MiB in
 * all, its first exposures fenced before the last came; a 10 ms timeout
 * does the same on the host). */
TEST(rogue_finding4_reply_memory_per_server)
{
	enum { CONNS = 20, PER = 15, COUNT = (1u << 20) - 36 };
	struct rpcrdma_server_opts so = {.rrep_timeout_ms = 3600000};
	struct rr_fx_srv f;
	struct rr_rogue *g[CONNS];
	uint64_t exposed = 0;
	unsigned errs = 0, got = 0;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, &so), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "m.bin", COUNT, 8), 0);
	REQUIRE_EQ(rt_read_reply_len(COUNT), 1u << 20);
	for (unsigned i = 0; i < CONNS; i++) {
		struct rr_rogue_opts o;

		rr_rogue_opts_default(&o);
		o.recv_size = 1024;
		g[i] = rt_open(f.port, &o);
		rt_send_reads(g[i], 0x83000000 + i * 0x100, PER, "m.bin", COUNT);
	}
	for (unsigned i = 0; i < CONNS; i++)
		got += collect_rrep_answers(g[i], 0x83000000 + i * 0x100, PER, &exposed, &errs,
					    RT_BIG_MS);
	CHECK_EQ(got, CONNS * PER);
	if (exposed > (256u << 20))
		fprintf(stderr, "  %llu MiB exposed by the server\n",
			(unsigned long long)(exposed >> 20));
	CHECK(exposed <= (256u << 20));
	rt_probe_ok(f.port);
	for (unsigned i = 0; i < CONNS; i++)
		rr_rogue_free(g[i]);
	rr_fx_srv_stop(&f);
}

/* More Calls in one TCP write than credits were granted: 600 NULL Calls
 * after a first Reply granted (at most) 64. The server either answers them
 * all, or the Sends that find no posted Receive end the connection with
 * the DDP Terminate "untagged buffer, no buffer for MSN" (as siw answers a
 * burst, rt_expect_burst_end); every Reply that comes is one of the Calls,
 * at most once, with a grant >= 1. Other clients are served. */
TEST(rogue_credit_overrun_one_write)
{
	enum { N = 600 };
	struct rr_fx_srv f;
	struct rr_rogue *g;
	static uint8_t seen[N];
	uint8_t rpc[64];
	unsigned answered = 0;
	int n;

	if (!rr_th_soft_ok())
		return;
	memset(seen, 0, sizeof(seen));
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	g = rt_open(f.port, NULL);
	rt_expect_null_ok(g, 0x84000000);
	rr_rogue_cork(g);
	for (uint32_t i = 0; i < N; i++) {
		n = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x84000001 + i, FS_PROG, FS_VERS, FS_NULL,
				      NULL, 0);
		REQUIRE(n > 0);
		REQUIRE_EQ(rr_rogue_send_call(g, 0x84000001 + i, rpc, (size_t)n), 0);
	}
	(void)rr_rogue_uncork(g);   /* the server may close while we write */
	while (answered < N) {
		struct rr_rogue_reply rep;
		uint32_t k;

		n = rr_rogue_wait_msg(g, RT_MS);
		if (n < 0)
			break;
		REQUIRE_EQ(rr_rogue_parse_reply(g, g->msg, (size_t)n, &rep), 0);
		k = rep.hdr.xid - 0x84000001;
		REQUIRE(k < N);
		CHECK(!seen[k]);
		seen[k] = 1;
		CHECK(rep.hdr.credit >= 1);
		answered++;
	}
	if (answered < N) {
		printf("  %u Replies, then the connection ended\n", answered);
		rt_expect_burst_end(g, n, &f);
	}
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}

/* ---- allocation failure under load ---- */

static pthread_mutex_t fa_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rr_test_env fa_te;
/* where the failed allocation was made: printed when its Call got no
 * answer (addresses: resolve with addr2line -e rr-tests) */
static void *fa_where[16];
static int fa_nwhere;
static size_t fa_size;

static void *fa_alloc(void *ctx, size_t n)
{
	void *p;

	pthread_mutex_lock(&fa_lock);
	p = fa_te.env.alloc(fa_te.env.alloc_ctx, n);
	if (!p) {
		fa_size = n;
		fa_nwhere = backtrace(fa_where, 16);
	}
	pthread_mutex_unlock(&fa_lock);
	(void)ctx;
	return p;
}

static void fa_free(void *ctx, void *p)
{
	pthread_mutex_lock(&fa_lock);
	fa_te.env.free(fa_te.env.alloc_ctx, p);
	pthread_mutex_unlock(&fa_lock);
	(void)ctx;
}

/* Makes allocation number (now + @k) fail, only that one. */
static void fa_fail_in(unsigned long k)
{
	pthread_mutex_lock(&fa_lock);
	if (k) {
		fa_nwhere = 0;
		fa_size = 0;
	}
	fa_te.fail_at = k ? fa_te.allocs + k : 0;
	fa_te.fail_all_after = false;
	pthread_mutex_unlock(&fa_lock);
}

static unsigned long fa_count(void)
{
	unsigned long n;

	pthread_mutex_lock(&fa_lock);
	n = fa_te.allocs;
	pthread_mutex_unlock(&fa_lock);
	return n;
}

/* One Call of kind @kind on @g (0: NULL inline, 1: READ 100 KB whose Reply
 * is a Read chunk, pulled and released; 2: WRITE 100 KB through a Read
 * chunk the server pulls from us). Returns 1 when answered (any RPC answer
 * or RDMA_ERROR), 0 when the connection ended, -1 when the server stayed
 * silent for RT_MS with the connection up. */
static int alloc_round(struct rr_rogue *g, int kind, uint32_t xid, uint8_t *buf, size_t cap)
{
	struct rr_rogue_reply rep;
	uint8_t args[256], rpc[512];
	int n, a;

	if (kind == 0) {
		n = rr_rogue_rpc_call(rpc, sizeof(rpc), xid, FS_PROG, FS_VERS, FS_NULL, NULL, 0);
		(void)rr_rogue_send_call(g, xid, rpc, (size_t)n);
	} else if (kind == 1) {
		a = rr_rogue_fs_read_args(args, sizeof(args), "r.bin", 0, 100000);
		(void)rr_rogue_fs_call(g, xid, FS_READ, args, (size_t)a, NULL, 0, NULL);
	} else {
		a = rr_rogue_fs_write_args(args, sizeof(args), "w.bin", 0, FS_WRITE_CREATE, NULL,
					   100000);
		n = rr_rogue_rpc_call(rpc, sizeof(rpc), xid, FS_PROG, FS_VERS, FS_WRITE, args,
				      (size_t)a);
		rr_rogue_mem_del(g, 0x9191);
		(void)rr_rogue_mem_add(g, 0x9191, 0, buf, 100000);
		{
			struct rr_hdr d;
			struct rr_hdr_seg rs = {0x9191, 100000, 0};

			rr_hdr_init(&d, xid, 8, RR_HDR_MSG);
			(void)rr_hdr_add_read(&d, (uint32_t)n, &rs);
			(void)rr_rogue_send_rpcrdma(g, &d, rpc, (size_t)n, false, 0);
		}
	}
	n = rr_rogue_wait_msg(g, RT_MS);
	if (n == -ETIMEDOUT)
		return -1;
	if (n < 0)
		return 0;
	if (rr_rogue_parse_reply(g, g->msg, (size_t)n, &rep))
		return 1;   /* answered, if oddly: the decoder's tests cover that */
	if (rep.hdr.proc == RR_HDR_NOMSG && rep.rchunk) {
		/* pull it and say RDMA_DONE, so nothing stays pinned */
		if (rr_rogue_pull_start(g, &rep, 0x9292, buf, cap) < 0 ||
		    rr_rogue_reads_wait(g, RT_MS))
			return 0;
		(void)rr_rogue_send_done(g, xid, false, 0);
	}
	return 1;
}

/* Allocation failure in the server under load: a busy client calls all
 * the time while the rogue's Calls (inline, reliable-reply Read chunk,
 * Read chunk pulled from it) run with allocation number 1, 2, ... (counted
 * from the start of each Call) failing, for as many allocations as such a
 * Call makes. Each Call is answered or its connection ends (then the rogue
 * reconnects): never silence with the connection up; the busy client's
 * calls fail at most with an error, never by a timeout; afterwards
 * everything works. */
TEST(rogue_alloc_failure_under_load)
{
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rpcrdma_server_opts so;
	struct rr_fx_srv f;
	struct rr_fx_busy b;
	struct rr_rogue *g;
	uint8_t *buf = malloc(200000);
	uint32_t xid = 0x85000000;
	unsigned silent = 0, ended = 0, rounds = 0;

	if (!rr_th_soft_ok())
		return;
	REQUIRE(buf);
	rr_test_env_init(&fa_te, 12);
	env.alloc = fa_alloc;
	env.free = fa_free;
	memset(&so, 0, sizeof(so));
	so.env = &env;
	REQUIRE_EQ(rr_fx_srv_start(&f, &so), 0);
	REQUIRE_EQ(rr_fx_file(&f.d, "r.bin", 100000, 4), 0);
	rr_fx_pattern(buf, 100000, 4, 0);
	g = rt_open(f.port, NULL);
	REQUIRE_EQ(rr_fx_busy_start(&b, f.port, "busy.bin", 3000, 5), 0);
	{
		/* the load is there before the failures start */
		uint64_t end = rr_fx_ms() + RT_MS;

		while (atomic_load(&b.calls) < 10 && rr_fx_ms() < end)
			rr_th_sleep_ms(1);
		CHECK(atomic_load(&b.calls) >= 10);
	}
	for (int kind = 0; kind < 3 && !silent; kind++) {
		unsigned long per;

		/* how many allocations one such Call makes (with the load) */
		per = fa_count();
		REQUIRE_EQ(alloc_round(g, kind, xid++, buf, 200000), 1);
		per = fa_count() - per;
		if (per > 200)
			per = 200;
		for (unsigned long k = 1; k <= per + 2 && !silent; k++) {
			int r;

			fa_fail_in(k);
			r = alloc_round(g, kind, xid++, buf, 200000);
			fa_fail_in(0);
			rounds++;
			if (r < 0) {
				fprintf(stderr, "  kind %d, allocation +%lu failing (%zu bytes): no "
					"answer; it was made at\n", kind, k, fa_size);
				pthread_mutex_lock(&fa_lock);
				backtrace_symbols_fd(fa_where, fa_nwhere, 2);
				pthread_mutex_unlock(&fa_lock);
				silent++;
			}
			if (r <= 0) {
				ended += r == 0;
				rr_rogue_free(g);
				g = rt_open(f.port, NULL);
			}
		}
	}
	rr_fx_busy_stop(&b);
	printf("  %u rounds, %u connections ended, busy client: %u calls, %u failed (first: %d), "
	       "%u without an answer\n", rounds, ended, atomic_load(&b.calls),
	       atomic_load(&b.failures), b.first_err, atomic_load(&b.timeouts));
	CHECK_EQ(silent, 0);
	CHECK_EQ(atomic_load(&b.timeouts), 0);
	rt_expect_null_ok(g, xid++);
	rt_probe_ok(f.port);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
	free(buf);
}

/* Fairness: a well-behaved client that calls as fast as it can (a
 * 3000-byte WRITE at a time, one thread; 1000 calls made before) must not
 * keep the server from another connection: the rogue's NULL Calls on its
 * own connection are each answered within the bound, 200 times over, and
 * the busy client's calls all succeed. */
TEST(rogue_busy_neighbour_starves_nobody)
{
	struct rr_fx_srv f;
	struct rr_fx_busy b;
	struct rr_rogue *g;
	unsigned answered = 0;
	uint64_t worst = 0;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	g = rt_open(f.port, NULL);
	REQUIRE_EQ(rr_fx_busy_start(&b, f.port, "busy.bin", 3000, 5), 0);
	{
		uint64_t end = rr_fx_ms() + RT_MS;

		while (atomic_load(&b.calls) < 1000 && rr_fx_ms() < end)
			rr_th_sleep_ms(1);
	}
	for (uint32_t i = 0; i < 200; i++) {
		uint8_t rpc[64];
		uint64_t t0 = rr_fx_ms();
		int n = rr_rogue_rpc_call(rpc, sizeof(rpc), 0x86000000 + i, FS_PROG, FS_VERS, FS_NULL,
					  NULL, 0);

		REQUIRE_EQ(rr_rogue_send_call(g, 0x86000000 + i, rpc, (size_t)n), 0);
		n = rr_rogue_wait_msg(g, RT_MS);
		if (n < 0) {
			fprintf(stderr, "  NULL Call %u: %s\n", i, strerror(-n));
			break;
		}
		worst = RR_MAX(worst, rr_fx_ms() - t0);
		answered++;
	}
	rr_fx_busy_stop(&b);
	printf("  %u of 200 answered (slowest %llu ms) beside a client making %u calls\n", answered,
	       (unsigned long long)worst, atomic_load(&b.calls));
	CHECK_EQ(answered, 200);
	CHECK_EQ(atomic_load(&b.failures), 0);
	rr_rogue_free(g);
	rr_fx_srv_stop(&f);
}
