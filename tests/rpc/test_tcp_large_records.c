/* SPDX-License-Identifier: BSD-2-Clause */
/* Large records on tcp:// (RFC 5531 section 11 record marking): the guard
 * of the 8 MiB pathology fix in src/transport/tcp/. Each end runs on an
 * environment whose allocator counts allocations of 1 MiB and more. After a
 * first 8 MiB WRITE (Call) and READ (Reply), the next ones are received into
 * memory already held (the server's shared large-record buffer, the
 * client's spare): no large allocation, hence no growth copies and no fresh
 * pages to fault in. Before the fix every 8 MiB Call grew its buffer by
 * doubling (1, 2, 4, 8 MiB: copied each time) and every 8 MiB Reply was a
 * new allocation. Counts, not timings. Also a large WRITE read while the
 * previous one's buffer is still held (its handler held here, as its Reply
 * still being sent holds it under load): one allocation, the record's, and
 * none after that. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rpcrdma/rpc.h"

#define BIG_PROG 0x2000009au
#define P_WRITE 1u
#define P_READ 2u
#define P_SYNC 3u
#define BIG (8u * 1024 * 1024)
#define LARGE_ALLOC ((size_t)1024 * 1024)

struct counting {
	atomic_ulong large;      /* allocations >= LARGE_ALLOC */
	atomic_ulong large_bytes;
};

static void *count_alloc(void *ctx, size_t size)
{
	struct counting *k = ctx;

	if (size >= LARGE_ALLOC) {
		atomic_fetch_add(&k->large, 1);
		atomic_fetch_add(&k->large_bytes, size);
	}
	return malloc(size);
}

static void count_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void counting_env(struct rpcrdma_env *e, struct counting *k)
{
	*e = *rpcrdma_env_default();
	e->alloc = count_alloc;
	e->free = count_free;
	e->alloc_ctx = k;
	atomic_init(&k->large, 0);
	atomic_init(&k->large_bytes, 0);
}

static uint8_t *g_data;   /* BIG bytes, the READ result */

static void deadline_in(struct timespec *dl, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_sec += ms / 1000;
}

/* Holding one WRITE in its handler, so that its record buffer stays held
 * while the next WRITE's record is read: armed by the test, taken by the
 * next WRITE, which says so (held) and waits for release. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool armed, held, release;
} g_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false};

static void hold_in_handler(void)
{
	pthread_mutex_lock(&g_hold.lock);
	if (g_hold.armed) {
		g_hold.armed = false;
		g_hold.held = true;
		pthread_cond_broadcast(&g_hold.cv);
		while (!g_hold.release)
			pthread_cond_wait(&g_hold.cv, &g_hold.lock);
	}
	pthread_mutex_unlock(&g_hold.lock);
}

/* Waits (bounded) until the armed WRITE is held: false after
 * RR_TEST_WAIT_MS. */
static bool hold_wait_held(void)
{
	struct timespec dl;
	int rc = 0;
	bool held;

	deadline_in(&dl, RR_TEST_WAIT_MS);
	pthread_mutex_lock(&g_hold.lock);
	while (!g_hold.held && rc == 0)
		rc = pthread_cond_timedwait(&g_hold.cv, &g_hold.lock, &dl);
	held = g_hold.held;
	pthread_mutex_unlock(&g_hold.lock);
	return held;
}

static void hold_set(bool armed, bool release)
{
	pthread_mutex_lock(&g_hold.lock);
	g_hold.armed = armed;
	g_hold.release = release;
	if (armed)
		g_hold.held = false;
	pthread_cond_broadcast(&g_hold.cv);
	pthread_mutex_unlock(&g_hold.lock);
}

/* Two SYNC Calls meet in their handlers (each waits, bounded, for the
 * other): both workers are then inside a handler, so both have finished
 * their previous requests, their record buffers given back
 * (tcp_srv_req_done runs before a worker takes its next Call). The
 * client's Reply to a WRITE does not say that: it is sent before. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned in;
} g_sync = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static int h_sync(struct rpcrdma_req *r, void *ctx)
{
	struct timespec dl;
	int rc = 0;

	(void)r;
	(void)ctx;
	deadline_in(&dl, RR_TEST_WAIT_MS);
	pthread_mutex_lock(&g_sync.lock);
	g_sync.in++;
	pthread_cond_broadcast(&g_sync.cv);
	while (g_sync.in % 2 && rc == 0)
		rc = pthread_cond_timedwait(&g_sync.cv, &g_sync.lock, &dl);
	pthread_mutex_unlock(&g_sync.lock);
	return rc ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static int h_write(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	hold_in_handler();
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(r)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len) ? RPCRDMA_SVC_SYSTEM_ERR
								: RPCRDMA_SVC_OK;
}

static int h_read(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), g_data, BIG) ? RPCRDMA_SVC_SYSTEM_ERR
									: RPCRDMA_SVC_OK;
}

static int big_write(struct rpcrdma_client *c, const uint8_t *buf)
{
	struct rpcrdma_call *call;
	uint32_t n = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_WRITE, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), buf, BIG), 0);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &n);
	if (!rc && n != BIG)
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

static int big_read(struct rpcrdma_client *c, uint8_t *sink)
{
	struct rpcrdma_call *call;
	struct rpcrdma_ddp_sink s = {sink, BIG};
	const void *p;
	uint32_t len = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_READ, &call), 0);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &s, 1), 0);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
	if (!rc && (len != BIG || memcmp(sink, g_data, BIG) != 0))
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

/* A server (2 workers) and a client, each on an environment that counts
 * its large allocations, and the data. */
struct big {
	struct counting ks, kc;
	struct rpcrdma_env es, ec;
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	uint8_t *buf, *sink;
};

static void big_setup(struct big *b)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 60000};
	char url[64];

	b->buf = malloc(BIG);
	b->sink = malloc(BIG);
	g_data = malloc(BIG);
	REQUIRE(b->buf && b->sink && g_data);
	for (uint32_t i = 0; i < BIG; i++) {
		b->buf[i] = (uint8_t)(i * 7u);
		g_data[i] = (uint8_t)(i * 13u + 1);
	}
	counting_env(&b->es, &b->ks);
	counting_env(&b->ec, &b->kc);
	so.env = &b->es;
	co.env = &b->ec;
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &so, &b->s), 0);
	REQUIRE_EQ(rpcrdma_server_register(b->s, BIG_PROG, 1, P_WRITE, h_write, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(b->s, BIG_PROG, 1, P_READ, h_read, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(b->s, BIG_PROG, 1, P_SYNC, h_sync, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(b->s), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(b->s));
	REQUIRE_EQ(rpcrdma_client_create(url, BIG_PROG, 1, &co, &b->c), 0);
}

static void big_teardown(struct big *b)
{
	rpcrdma_client_destroy(b->c);
	rpcrdma_server_destroy(b->s);
	free(b->buf);
	free(b->sink);
	free(g_data);
	g_data = NULL;
}

TEST(rpc_tcp_8mib_records_reuse_buffers)
{
	struct big b;

	big_setup(&b);
	/* the first ones allocate */
	REQUIRE_EQ(big_write(b.c, b.buf), 0);
	REQUIRE_EQ(big_read(b.c, b.sink), 0);
	fprintf(stderr, "first 8 MiB WRITE + READ: server %lu large allocations (%lu bytes), "
			"client %lu (%lu bytes)\n",
		atomic_load(&b.ks.large), atomic_load(&b.ks.large_bytes), atomic_load(&b.kc.large),
		atomic_load(&b.kc.large_bytes));
	/* a record grows geometrically, not by small steps */
	CHECK(atomic_load(&b.ks.large) <= 8);

	atomic_store(&b.ks.large, 0);
	atomic_store(&b.kc.large, 0);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(big_write(b.c, b.buf), 0);
		CHECK_EQ(big_read(b.c, b.sink), 0);
	}
	fprintf(stderr, "next 4 WRITE + READ: server %lu large allocations, client %lu\n",
		atomic_load(&b.ks.large), atomic_load(&b.kc.large));
	/* A WRITE's record buffer is held until its worker is done with the
	 * request, after the Reply was sent; a synchronous client may send
	 * its next Calls before that, so a WRITE can be read while the
	 * previous WRITE's buffer is still held (at most one: the worker that
	 * answered the READ between them finished its previous request
	 * first). The first time that happens the server needs a second
	 * record-sized buffer: one allocation (the growth steps up to it are
	 * served by the pool's largest buffer, the first record's last step;
	 * rpc_tcp_large_write_while_one_is_held forces it). From then on the
	 * pool keeps both. So at most 1 here, whether it happens or not; a
	 * server that did not reuse its buffers would allocate for every one
	 * of the 4 WRITEs. */
	CHECK(atomic_load(&b.ks.large) <= 1);
	CHECK_EQ(atomic_load(&b.kc.large), 0);
	big_teardown(&b);
}

static void ignore_done(struct rpcrdma_call *call, int status, void *arg)
{
	(void)call;
	(void)status;
	(void)arg;
}

/* Returns once both server workers have finished every earlier request
 * (two SYNC Calls in flight meet in their handlers): 0 or the first error. */
static int workers_idle(struct rpcrdma_client *c)
{
	struct rpcrdma_call *k[2];
	int rc = 0;

	for (int i = 0; i < 2; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, P_SYNC, &k[i]), 0);
		REQUIRE_EQ(rpcrdma_call_start(k[i], ignore_done, NULL), 0);
	}
	for (int i = 0; i < 2; i++) {
		int r = rpcrdma_call_wait(k[i], 2 * RR_TEST_WAIT_MS);

		if (!rc)
			rc = r;
		rpcrdma_call_destroy(k[i]);
	}
	return rc;
}

/* One WRITE held in its handler (its record buffer held) while the next
 * WRITE of the same size is read: the state a synchronous client's WRITE
 * meets when it overtakes the previous WRITE's request being finished (its
 * Reply sent, its buffer not yet given back), forced. The second record
 * needs a second record-sized buffer: exactly one large allocation, the
 * pool's largest buffer (the first record's last growth step, 8 MiB)
 * serving the steps below it. Then both buffers are kept: the same
 * interleaving again allocates nothing. Before the fix (a large record took
 * a pool buffer only if the whole record fitted it) the second record
 * allocated every growth step again: 5 (1, 2, 4, 8 MiB and the record). */
TEST(rpc_tcp_large_write_while_one_is_held)
{
	struct big b;

	big_setup(&b);
	REQUIRE_EQ(big_write(b.c, b.buf), 0);   /* the first one allocates */
	for (int round = 0; round < 2; round++) {
		struct rpcrdma_call *held;

		/* the previous records' buffers given back: what the pool
		 * holds is known */
		REQUIRE_EQ(workers_idle(b.c), 0);
		atomic_store(&b.ks.large, 0);
		hold_set(true, false);
		REQUIRE_EQ(rpcrdma_call_create(b.c, P_WRITE, &held), 0);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(held), b.buf, BIG), 0);
		REQUIRE_EQ(rpcrdma_call_start(held, ignore_done, NULL), 0);
		REQUIRE(hold_wait_held());
		CHECK_EQ(big_write(b.c, b.buf), 0);   /* read while held's buffer is */
		hold_set(false, true);
		CHECK_EQ(rpcrdma_call_wait(held, RR_TEST_WAIT_MS), 0);
		rpcrdma_call_destroy(held);
		fprintf(stderr, "round %d: a WRITE read while one is held: %lu large allocations\n",
			round, atomic_load(&b.ks.large));
		CHECK_EQ(atomic_load(&b.ks.large), round == 0 ? 1 : 0);
	}
	CHECK_EQ(atomic_load(&b.kc.large), 0);
	big_teardown(&b);
}
