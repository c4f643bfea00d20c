/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the RPC server's duplicate request cache (src/rpc/drc.c,
 * src/rpc/svc.c; RFC 5531 section 9: a retransmitted Call keeps its XID).
 * The cache alone (states, LRU eviction, expiry on virtual time, DDP reply
 * copies, every allocation failing in turn); then servers over tcp:// with a
 * raw record-marking client (RFC 5531 section 11) that sends the same XID
 * twice, and over rdma:// with a raw RPC-over-RDMA requester (RFC 8166)
 * that does the same, once with a Write chunk so that the cached reply's
 * DDP-eligible result is placed again by RDMA Write. Finally the real
 * client's own retransmission: a TCP proxy between client and server cuts
 * the connection while the first Call's handler runs, the client reconnects
 * and retransmits the XID, and the handler still runs once (tcp:// and
 * rdma://, whose soft iWARP provider also runs over TCP). The handlers count
 * their runs and put the count in the reply, so a second run is visible in
 * the bytes. Every wait is bounded. */
#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/drc.h"
#include "rpc/ctl.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpc_raw.h"
#include "xprt_harness.h"

#define PROG 0x200001dcu
#define P_COUNT 1u    /* u32 v -> u32 v, u32 run number */
#define P_BLOCK 2u    /* as COUNT, waits for the gate first */
#define P_GARBAGE 3u  /* counts, answers GARBAGE_ARGS */
#define P_BIG 4u      /* u32 n -> u32 run, opaque<n> inline */
#define P_GEN 5u      /* u32 n -> u32 run, opaque<n> DDP, byte i = run + i */
#define P_DROP 6u     /* counts, sends no reply */
#define P_IDEM 7u     /* as COUNT, marked idempotent */

/* ======================= the cache alone ======================= */

static struct rr_drc_key ukey(uint32_t xid, uint64_t sum)
{
	struct rr_drc_key k;

	memset(&k, 0, sizeof(k));
	k.xid = xid;
	k.prog = PROG;
	k.vers = 1;
	k.proc = P_COUNT;
	k.arg_len = 4;
	k.arg_sum = sum;
	k.family = 4;
	k.addr[0] = 127;
	k.addr[3] = 1;
	return k;
}

static struct rr_drc *ucache(struct rr_test_env *te, unsigned entries, size_t max_reply)
{
	struct rr_drc_conf c = {&te->env, entries, max_reply, 1000000000ull};
	struct rr_drc *d = NULL;

	REQUIRE_EQ(rr_drc_create(&c, &d), 0);
	return d;
}

/* Runs @k to completion with a 8-byte reply "R" xid; returns the verdict
 * of the lookup (and completes when it was RUN with an entry). */
static enum rr_drc_verdict urun(struct rr_drc *d, const struct rr_drc_key *k, uint8_t tag)
{
	uint8_t bytes[8] = {0, 0, 0, 0, tag, tag, tag, tag};
	struct rr_xprt_msg m = {bytes, 8, NULL, 0, 8};
	struct rr_drc_entry *e;
	struct rr_drc_reply *rep, *copy;
	void *w[RR_DRC_MAX_WAITERS];
	enum rr_drc_verdict v;
	bool kept;

	rr_put_be32(bytes, k->xid);
	v = rr_drc_lookup(d, k, NULL, &e, &rep);
	if (v == RR_DRC_REPLAY)
		rr_drc_reply_put(d, rep);
	if (v == RR_DRC_RUN && e) {
		copy = rr_drc_reply_copy(d, &m);
		CHECK_EQ(rr_drc_complete(d, e, copy, true, w, &kept), 0);
		if (copy && !kept)
			rr_drc_reply_put(d, copy);
	}
	return v;
}

TEST(drc_unit_states)
{
	struct rr_test_env te;
	struct rr_drc *d;
	struct rr_drc_key k = ukey(0x10, 77), k2;
	struct rr_drc_entry *e, *e2;
	struct rr_drc_reply *rep, *copy;
	struct rr_drc_counters n;
	struct rr_xprt_msg m;
	void *w[RR_DRC_MAX_WAITERS];
	uint8_t bytes[12] = {0, 0, 0, 0x10, 1, 2, 3, 4, 5, 6, 7, 8};
	int waiter[RR_DRC_MAX_WAITERS + 1];
	bool kept;

	rr_test_env_init(&te, 1);
	d = ucache(&te, 16, 4096);
	/* New: RUN with an IN PROGRESS entry. */
	REQUIRE_EQ(rr_drc_lookup(d, &k, NULL, &e, &rep), RR_DRC_RUN);
	REQUIRE(e != NULL);
	/* Duplicates while it runs: parked up to the limit, then dropped. */
	for (unsigned i = 0; i < RR_DRC_MAX_WAITERS; i++)
		CHECK_EQ(rr_drc_lookup(d, &k, &waiter[i], &e2, &rep), RR_DRC_PARKED);
	CHECK_EQ(rr_drc_lookup(d, &k, &waiter[RR_DRC_MAX_WAITERS], &e2, &rep), RR_DRC_DROP);
	CHECK(e2 == NULL);
	/* Same XID, other arguments (checksum, length) or host: not a duplicate. */
	k2 = k;
	k2.arg_sum++;
	CHECK_EQ(urun(d, &k2, 1), RR_DRC_RUN);
	k2 = k;
	k2.arg_len++;
	CHECK_EQ(urun(d, &k2, 1), RR_DRC_RUN);
	k2 = k;
	k2.addr[3] = 2;
	CHECK_EQ(urun(d, &k2, 1), RR_DRC_RUN);
	k2 = k;
	k2.proc = P_BLOCK;
	CHECK_EQ(urun(d, &k2, 1), RR_DRC_RUN);
	/* Completion hands back the parked waiters in order. */
	m = (struct rr_xprt_msg){bytes, sizeof(bytes), NULL, 0, sizeof(bytes)};
	copy = rr_drc_reply_copy(d, &m);
	REQUIRE(copy != NULL);
	REQUIRE_EQ(rr_drc_complete(d, e, copy, true, w, &kept), RR_DRC_MAX_WAITERS);
	CHECK(kept);
	for (unsigned i = 0; i < RR_DRC_MAX_WAITERS; i++)
		CHECK(w[i] == &waiter[i]);
	/* DONE: the same bytes, replayed. */
	REQUIRE_EQ(rr_drc_lookup(d, &k, NULL, &e2, &rep), RR_DRC_REPLAY);
	rr_drc_reply_msg(rep, &m);
	CHECK_EQ(m.head_len, sizeof(bytes));
	CHECK_EQ(m.nddp, 0u);
	CHECK_MEM(m.head, bytes, sizeof(bytes));
	rr_drc_reply_put(d, rep);
	rr_drc_counters(d, &n);
	CHECK_EQ(n.hits, 1);
	CHECK_EQ(n.drops_in_progress, RR_DRC_MAX_WAITERS + 1);
	CHECK_EQ(n.insertions, 5);
	CHECK_EQ(n.entries, 5u);
	rr_drc_destroy(d);
	CHECK_EQ(te.live, 0);
}

/* A reply not kept (not SUCCESS, too large, or no copy) removes the entry:
 * the next duplicate runs again. */
TEST(drc_unit_not_kept)
{
	struct rr_test_env te;
	struct rr_drc *d;
	struct rr_drc_key k = ukey(0x20, 1);
	struct rr_drc_entry *e;
	struct rr_drc_reply *rep;
	struct rr_drc_counters n;
	void *w[RR_DRC_MAX_WAITERS];
	uint8_t big[64] = {0};
	struct rr_xprt_msg m = {big, sizeof(big), NULL, 0, sizeof(big)};
	bool kept;

	rr_test_env_init(&te, 2);
	d = ucache(&te, 4, 32);
	CHECK(!rr_drc_keepable(d, &m));
	m.head_len = m.xdr_len = 32;
	CHECK(rr_drc_keepable(d, &m));
	REQUIRE_EQ(rr_drc_lookup(d, &k, NULL, &e, &rep), RR_DRC_RUN);
	CHECK_EQ(rr_drc_complete(d, e, NULL, false, w, &kept), 0);
	CHECK(!kept);
	REQUIRE_EQ(rr_drc_lookup(d, &k, NULL, &e, &rep), RR_DRC_RUN);
	CHECK_EQ(rr_drc_complete(d, e, NULL, true, w, &kept), 0);   /* no copy */
	CHECK(!kept);
	CHECK_EQ(urun(d, &k, 3), RR_DRC_RUN);
	CHECK_EQ(urun(d, &k, 3), RR_DRC_REPLAY);
	rr_drc_counters(d, &n);
	CHECK_EQ(n.not_cached, 2);
	CHECK_EQ(n.entries, 1u);
	rr_drc_destroy(d);
	CHECK_EQ(te.live, 0);
}

/* Capacity: the least recently used DONE entry goes; a hit counts as a
 * use; IN PROGRESS entries are never evicted (the newcomer is then simply
 * not cached). */
TEST(drc_unit_lru_capacity)
{
	struct rr_test_env te;
	struct rr_drc *d;
	struct rr_drc_key a = ukey(1, 0), b = ukey(2, 0), c = ukey(3, 0), x = ukey(4, 0);
	struct rr_drc_entry *e1, *e2, *e3;
	struct rr_drc_reply *rep;
	struct rr_drc_counters n;
	void *w[RR_DRC_MAX_WAITERS];
	bool kept;

	rr_test_env_init(&te, 3);
	d = ucache(&te, 2, 4096);
	CHECK_EQ(urun(d, &a, 1), RR_DRC_RUN);
	CHECK_EQ(urun(d, &b, 2), RR_DRC_RUN);
	CHECK_EQ(urun(d, &a, 1), RR_DRC_REPLAY);   /* a is now the newest */
	CHECK_EQ(urun(d, &c, 3), RR_DRC_RUN);      /* evicts b */
	CHECK_EQ(urun(d, &a, 1), RR_DRC_REPLAY);
	CHECK_EQ(urun(d, &c, 3), RR_DRC_REPLAY);
	CHECK_EQ(urun(d, &b, 2), RR_DRC_RUN);      /* b was forgotten; evicts a */
	rr_drc_counters(d, &n);
	CHECK_EQ(n.evictions, 2);
	CHECK_EQ(n.entries, 2u);
	rr_drc_destroy(d);

	/* Both slots IN PROGRESS: a third request runs uncached. */
	d = ucache(&te, 2, 4096);
	REQUIRE_EQ(rr_drc_lookup(d, &a, NULL, &e1, &rep), RR_DRC_RUN);
	REQUIRE_EQ(rr_drc_lookup(d, &b, NULL, &e2, &rep), RR_DRC_RUN);
	REQUIRE(e1 && e2);
	CHECK_EQ(rr_drc_lookup(d, &x, NULL, &e3, &rep), RR_DRC_RUN);
	CHECK(e3 == NULL);
	CHECK_EQ(rr_drc_lookup(d, &a, NULL, &e3, &rep), RR_DRC_PARKED);
	CHECK_EQ(rr_drc_complete(d, e1, NULL, false, w, &kept), 1);
	CHECK_EQ(rr_drc_complete(d, e2, NULL, false, w, &kept), 0);
	rr_drc_counters(d, &n);
	CHECK_EQ(n.evictions, 0);
	CHECK_EQ(n.not_cached, 3);
	CHECK_EQ(n.entries, 0u);
	rr_drc_destroy(d);
	CHECK_EQ(te.live, 0);
}

/* Age on the injected clock: a DONE entry lives ttl after its last use. */
TEST(drc_unit_expiry_virtual_time)
{
	struct rr_test_env te;
	struct rr_drc *d;
	struct rr_drc_key a = ukey(1, 0), b = ukey(2, 0);
	struct rr_drc_counters n;

	rr_test_env_init(&te, 4);
	te.now_ns = 5000000000ull;
	d = ucache(&te, 8, 4096);   /* ttl 1 s */
	CHECK_EQ(urun(d, &a, 1), RR_DRC_RUN);
	CHECK_EQ(urun(d, &b, 2), RR_DRC_RUN);
	te.now_ns += 600000000ull;
	CHECK_EQ(urun(d, &a, 1), RR_DRC_REPLAY);   /* a used again at 0.6 s */
	te.now_ns += 600000000ull;                 /* b is 1.2 s old, a 0.6 s */
	CHECK_EQ(urun(d, &a, 1), RR_DRC_REPLAY);
	CHECK_EQ(urun(d, &b, 2), RR_DRC_RUN);      /* expired: runs again */
	te.now_ns += 999999999ull;
	CHECK_EQ(urun(d, &b, 2), RR_DRC_REPLAY);   /* just under 1 s */
	te.now_ns += 2000000000ull;
	CHECK_EQ(urun(d, &a, 1), RR_DRC_RUN);
	rr_drc_counters(d, &n);
	CHECK_EQ(n.expirations, 3);   /* b once; then a and b */
	CHECK_EQ(n.evictions, 0);
	rr_drc_destroy(d);
	CHECK_EQ(te.live, 0);
}

/* A reply with DDP-eligible items is copied whole: inline bytes and item
 * data, each item pointing into the copy with its XDR positions kept. The
 * limit counts the item data. */
TEST(drc_unit_ddp_copy)
{
	struct rr_test_env te;
	struct rr_drc *d;
	uint8_t head[16], d0[5] = {1, 2, 3, 4, 5}, d1[8] = {9, 9, 9, 9, 8, 8, 8, 8};
	struct rr_rpc_ddp items[2] = {{8, 8, d0, 5}, {12, 20, d1, 8}};
	struct rr_xprt_msg m = {head, 16, items, 2, 16 + 8 + 8}, r;
	struct rr_drc_reply *rep;

	rr_test_env_init(&te, 5);
	for (unsigned i = 0; i < 16; i++)
		head[i] = (uint8_t)(0xa0 + i);
	d = ucache(&te, 4, 29);
	CHECK_EQ(rr_drc_keepable(d, &m), true);   /* 16 + 5 + 8 = 29 */
	rep = rr_drc_reply_copy(d, &m);
	REQUIRE(rep != NULL);
	d0[0] = d1[0] = 0;   /* the copy is independent of the original */
	rr_drc_reply_msg(rep, &r);
	CHECK_EQ(r.head_len, 16u);
	CHECK_EQ(r.xdr_len, 32u);
	CHECK_MEM(r.head, head, 16);
	REQUIRE_EQ(r.nddp, 2u);
	CHECK_EQ(r.ddp[0].inline_off, 8u);
	CHECK_EQ(r.ddp[0].xdr_pos, 8u);
	CHECK_EQ(r.ddp[0].len, 5u);
	CHECK_EQ(r.ddp[0].ptr[0], 1);
	CHECK_EQ(r.ddp[0].ptr[4], 5);
	CHECK_EQ(r.ddp[1].inline_off, 12u);
	CHECK_EQ(r.ddp[1].xdr_pos, 20u);
	CHECK_EQ(r.ddp[1].ptr[0], 9);
	CHECK_EQ(r.ddp[1].ptr[7], 8);
	rr_drc_reply_put(d, rep);
	items[1].len = 9;
	CHECK_EQ(rr_drc_keepable(d, &m), false);
	rr_drc_destroy(d);
	CHECK_EQ(te.live, 0);
}

/* Every allocation failing in turn (creation, entries, reply copies):
 * creation fails cleanly or the cache degrades to running uncached; never
 * a crash or a leak, and a duplicate is never answered with wrong bytes. */
TEST(drc_unit_alloc_failure_sweep)
{
	for (unsigned long f = 1; f < 40; f++) {
		for (int all = 0; all < 2; all++) {
			struct rr_test_env te;
			struct rr_drc_conf c;
			struct rr_drc *d = NULL;
			struct rr_drc_key k[3] = {ukey(1, 0), ukey(2, 0), ukey(3, 0)};

			rr_test_env_init(&te, f);
			te.fail_at = f;
			te.fail_all_after = all;
			c = (struct rr_drc_conf){&te.env, 2, 4096, 1000000000ull};
			if (rr_drc_create(&c, &d)) {
				CHECK(d == NULL);
				CHECK_EQ(te.live, 0);
				continue;
			}
			for (unsigned round = 0; round < 3; round++) {
				for (unsigned i = 0; i < 3; i++) {
					struct rr_drc_entry *e;
					struct rr_drc_reply *rep;
					enum rr_drc_verdict v = rr_drc_lookup(d, &k[i], NULL, &e, &rep);

					if (v == RR_DRC_REPLAY) {
						struct rr_xprt_msg m;

						rr_drc_reply_msg(rep, &m);
						REQUIRE_EQ(m.head_len, 8u);
						CHECK_EQ(rr_get_be32(m.head), k[i].xid);
						CHECK_EQ(m.head[4], (uint8_t)i);
						rr_drc_reply_put(d, rep);
						continue;
					}
					CHECK_EQ(v, RR_DRC_RUN);
					if (e) {
						uint8_t b[8] = {0, 0, 0, 0, (uint8_t)i, 0, 0, 0};
						struct rr_xprt_msg m = {b, 8, NULL, 0, 8};
						struct rr_drc_reply *cp;
						void *w[RR_DRC_MAX_WAITERS];
						bool kept;

						rr_put_be32(b, k[i].xid);
						cp = rr_drc_reply_copy(d, &m);
						rr_drc_complete(d, e, cp, true, w, &kept);
						if (cp && !kept)
							rr_drc_reply_put(d, cp);
					}
				}
			}
			rr_drc_destroy(d);
			CHECK_EQ(te.live, 0);
		}
	}
}

/* ======================= servers ======================= */

struct hstate {
	atomic_uint runs;          /* handler runs, all procedures */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool gate_open;
	unsigned entered;          /* P_BLOCK handlers that reached the gate */
};

static struct hstate H = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void h_reset(void)
{
	atomic_store(&H.runs, 0);
	pthread_mutex_lock(&H.lock);
	H.gate_open = false;
	H.entered = 0;
	pthread_mutex_unlock(&H.lock);
}

static void gate_open(void)
{
	pthread_mutex_lock(&H.lock);
	H.gate_open = true;
	pthread_cond_broadcast(&H.cv);
	pthread_mutex_unlock(&H.lock);
}

static bool wait_entered(unsigned n, unsigned ms)
{
	bool ok;

	pthread_mutex_lock(&H.lock);
	for (unsigned t = 0; H.entered < n && t < ms; t += 5) {
		pthread_mutex_unlock(&H.lock);
		rr_th_sleep_ms(5);
		pthread_mutex_lock(&H.lock);
	}
	ok = H.entered >= n;
	pthread_mutex_unlock(&H.lock);
	return ok;
}

static int h_count(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v;
	unsigned run;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	run = atomic_fetch_add(&H.runs, 1) + 1;
	if (rpcrdma_req_proc(r) == P_BLOCK) {
		pthread_mutex_lock(&H.lock);
		H.entered++;
		for (unsigned t = 0; !H.gate_open && t < 1000; t++) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&H.cv, &H.lock, &ts);
		}
		pthread_mutex_unlock(&H.lock);
	}
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), run);
	return RPCRDMA_SVC_OK;
}

static int h_garbage(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	atomic_fetch_add(&H.runs, 1);
	return RPCRDMA_SVC_GARBAGE_ARGS;
}

static int h_drop(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	atomic_fetch_add(&H.runs, 1);
	return RPCRDMA_SVC_DROP;
}

static int h_big(struct rpcrdma_req *r, void *ctx)
{
	static const uint8_t zero[8192];
	uint32_t n;
	unsigned run;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > sizeof(zero))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	run = atomic_fetch_add(&H.runs, 1) + 1;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), run);
	rpcrdma_xdr_put_opaque(rpcrdma_req_results(r), zero, n);
	return RPCRDMA_SVC_OK;
}

/* P_GEN: the result data is the handler's own buffer, released after the
 * reply (rpcrdma_req_set_release), bytes = run + i. */
static int h_gen(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;
	unsigned run;
	uint8_t *buf;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > 65536)
		return RPCRDMA_SVC_GARBAGE_ARGS;
	run = atomic_fetch_add(&H.runs, 1) + 1;
	buf = malloc(n ? n : 1);
	if (!buf)
		return RPCRDMA_SVC_SYSTEM_ERR;
	for (uint32_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(run + i);
	rpcrdma_req_set_release(r, free, buf);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), run);
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), buf, n) ? RPCRDMA_SVC_SYSTEM_ERR
								   : RPCRDMA_SVC_OK;
}

/* A thread-safe environment for servers: a virtual clock and an allocator
 * that fails every block of one size (the cache's entries) on demand. */
struct tenv {
	struct rpcrdma_env env;
	_Atomic uint64_t now;
	atomic_size_t fail_size;
	atomic_long live;
};

static void *tenv_alloc(void *ctx, size_t size)
{
	struct tenv *t = ctx;
	void *p;

	if (size == atomic_load(&t->fail_size))
		return NULL;
	p = malloc(size);
	if (p)
		atomic_fetch_add(&t->live, 1);
	return p;
}

static void tenv_free(void *ctx, void *p)
{
	struct tenv *t = ctx;

	if (p)
		atomic_fetch_sub(&t->live, 1);
	free(p);
}

static uint64_t tenv_now(void *ctx)
{
	return atomic_load(&((struct tenv *)ctx)->now);
}

static void tenv_random(void *ctx, void *buf, size_t len)
{
	const struct rpcrdma_env *d = rpcrdma_env_default();

	(void)ctx;
	d->random(d->random_ctx, buf, len);
}

static void tenv_init(struct tenv *t)
{
	memset(t, 0, sizeof(*t));
	t->env.alloc = tenv_alloc;
	t->env.free = tenv_free;
	t->env.alloc_ctx = t;
	t->env.now_ns = tenv_now;
	t->env.clock_ctx = t;
	t->env.random = tenv_random;
	t->env.random_ctx = t;
	atomic_store(&t->now, 1000000000ull);
}

static struct rpcrdma_server *srv_start(const char *url, const struct rpcrdma_server_opts *o)
{
	struct rpcrdma_server *s = NULL;

	h_reset();
	REQUIRE_EQ(rpcrdma_server_create(url, o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_COUNT, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_BLOCK, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_GARBAGE, h_garbage, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_BIG, h_big, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_GEN, h_gen, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_DROP, h_drop, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_IDEM, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_set_idempotent(s, PROG, 1, P_IDEM), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	CHECK_EQ(rpcrdma_server_set_idempotent(s, PROG, 1, P_COUNT), -EBUSY);
	return s;
}

/* srv_start on @url (port 0) with 4 threads and a cache of @drc entries
 * (0: none); its port in *@port. */
static struct rpcrdma_server *drc_server(const char *url, unsigned drc, int *port)
{
	struct rpcrdma_server_opts o = {.threads = 4, .drc_entries = drc};
	struct rpcrdma_server *s = srv_start(url, &o);

	*port = rpcrdma_server_port(s);
	return s;
}

static struct rr_drc_counters drc_stats(struct rpcrdma_server *s)
{
	struct rpcrdma_drc_stats st;
	struct rr_drc_counters c;

	REQUIRE_EQ(rpcrdma_server_drc_stats(s, &st), 0);
	memset(&c, 0, sizeof(c));
	c.hits = st.hits;
	c.drops_in_progress = st.drops_in_progress;
	c.insertions = st.insertions;
	c.evictions = st.evictions;
	c.expirations = st.expirations;
	c.not_cached = st.not_cached;
	c.entries = st.entries;
	return c;
}

/* ---- tcp:// with a raw record-marking client ---- */

static void tcp_send_call(int fd, uint32_t xid, uint32_t proc, const uint32_t *args,
			  unsigned nargs)
{
	rpc_raw_send_call(fd, xid, PROG, 1, proc, args, nargs);
}

/* Reads one Reply record (single fragment) into @out; its length, or 0
 * when none came within @ms. */
/* Until the server counted @n duplicates of requests in progress (the
 * counter is cumulative), at most 5 s. */
static bool wait_in_progress(struct rpcrdma_server *s, uint64_t n)
{
	for (int t = 0; t < 1000; t++) {
		if (drc_stats(s).drops_in_progress >= n)
			return true;
		rr_th_sleep_ms(5);
	}
	return false;
}

static size_t tcp_recv_reply(int fd, uint8_t *out, size_t cap, int ms)
{
	uint8_t m[4];
	uint32_t len;

	if (rpc_raw_recv_n(fd, m, 4, ms) != 4)
		return 0;
	len = rr_get_be32(m) & 0x7fffffffu;
	REQUIRE(rr_get_be32(m) & 0x80000000u);
	REQUIRE(len <= cap);
	return rpc_raw_recv_n(fd, out, len, ms) == len ? len : 0;
}

/* A SUCCESS Reply to @xid carrying u32 results: returns result @i. */
static uint32_t reply_u32(const uint8_t *r, size_t n, uint32_t xid, unsigned i)
{
	REQUIRE(n >= 24 + 4 * (i + 1));
	CHECK_EQ(rr_get_be32(r), xid);
	CHECK_EQ(rr_get_be32(r + 4), 1);    /* REPLY */
	CHECK_EQ(rr_get_be32(r + 8), 0);    /* MSG_ACCEPTED */
	CHECK_EQ(rr_get_be32(r + 20), 0);   /* SUCCESS */
	return rr_get_be32(r + 24 + 4 * i);
}

/* Sends @xid(@proc, @v) on @fd and returns the run number in the Reply
 * (also copies the Reply to @out when set). */
static uint32_t tcp_xchg(int fd, uint32_t xid, uint32_t proc, uint32_t v, uint8_t *out,
			 size_t *outlen)
{
	uint8_t r[256];
	size_t n;

	tcp_send_call(fd, xid, proc, &v, 1);
	n = tcp_recv_reply(fd, r, sizeof(r), 5000);
	REQUIRE(n > 0);
	if (out) {
		memcpy(out, r, n);
		*outlen = n;
	}
	CHECK_EQ(reply_u32(r, n, xid, 0), v);
	return reply_u32(r, n, xid, 1);
}

/* The same Call twice: with the cache the handler runs once and both
 * Replies are byte for byte the same; also on a second connection (a
 * reconnecting client). Without the cache it runs twice. */
TEST(drc_tcp_retransmit_runs_once)
{
	struct rr_drc_counters c;
	struct rpcrdma_drc_stats st;
	struct rpcrdma_server *s;
	uint8_t r1[256], r2[256], r3[256];
	size_t n1, n2, n3;
	int port, fd, fd2;

	s = drc_server("tcp://127.0.0.1:0", 64, &port);
	fd = rpc_raw_connect(port);
	CHECK_EQ(tcp_xchg(fd, 0x1001, P_COUNT, 7, r1, &n1), 1);
	CHECK_EQ(tcp_xchg(fd, 0x1001, P_COUNT, 7, r2, &n2), 1);
	REQUIRE_EQ(n1, n2);
	CHECK_MEM(r1, r2, n1);
	fd2 = rpc_raw_connect(port);
	CHECK_EQ(tcp_xchg(fd2, 0x1001, P_COUNT, 7, r3, &n3), 1);
	REQUIRE_EQ(n1, n3);
	CHECK_MEM(r1, r3, n1);
	CHECK_EQ(atomic_load(&H.runs), 1);
	/* A new XID runs. */
	CHECK_EQ(tcp_xchg(fd, 0x1002, P_COUNT, 7, NULL, NULL), 2);
	c = drc_stats(s);
	CHECK_EQ(c.hits, 2);
	CHECK_EQ(c.insertions, 2);
	CHECK_EQ(c.entries, 2u);
	close(fd);
	close(fd2);
	rpcrdma_server_destroy(s);

	s = drc_server("tcp://127.0.0.1:0", 0, &port);
	CHECK_EQ(rpcrdma_server_drc_stats(s, &st), -EOPNOTSUPP);
	fd = rpc_raw_connect(port);
	CHECK_EQ(tcp_xchg(fd, 0x1001, P_COUNT, 7, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(fd, 0x1001, P_COUNT, 7, NULL, NULL), 2);
	CHECK_EQ(atomic_load(&H.runs), 2);
	close(fd);
	rpcrdma_server_destroy(s);
}

/* Same XID, other arguments: a new request, not a duplicate. Idempotent
 * procedures, non-SUCCESS replies and dropped requests are not cached. */
TEST(drc_tcp_what_is_not_a_hit)
{
	struct rr_drc_counters c;
	struct rpcrdma_server *s;
	uint8_t r[256];
	uint32_t v = 1;
	int port, fd;

	s = drc_server("tcp://127.0.0.1:0", 64, &port);
	fd = rpc_raw_connect(port);
	CHECK_EQ(tcp_xchg(fd, 0x2001, P_COUNT, 7, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(fd, 0x2001, P_COUNT, 8, NULL, NULL), 2);
	CHECK_EQ(tcp_xchg(fd, 0x2001, P_COUNT, 7, NULL, NULL), 1);   /* the first again */
	CHECK_EQ(tcp_xchg(fd, 0x2002, P_IDEM, 7, NULL, NULL), 3);
	CHECK_EQ(tcp_xchg(fd, 0x2002, P_IDEM, 7, NULL, NULL), 4);
	for (unsigned i = 0; i < 2; i++) {
		size_t n;

		tcp_send_call(fd, 0x2003, P_GARBAGE, &v, 1);
		n = tcp_recv_reply(fd, r, sizeof(r), 5000);
		REQUIRE_EQ(n, 24u);
		CHECK_EQ(rr_get_be32(r + 20), RPCRDMA_GARBAGE_ARGS);
	}
	CHECK_EQ(atomic_load(&H.runs), 6);
	/* DROP: no reply, and the retransmission runs again (sent once the
	 * first has run, else it would wait on it and be dropped with it). */
	for (unsigned i = 0; i < 2; i++) {
		tcp_send_call(fd, 0x2004, P_DROP, &v, 1);
		for (unsigned t = 0; t < 500 && atomic_load(&H.runs) < 7 + i; t++)
			rr_th_sleep_ms(10);
	}
	CHECK_EQ(tcp_xchg(fd, 0x2005, P_COUNT, 1, NULL, NULL), 9);   /* after both drops */
	/* NULL (procedure 0) is never cached. */
	for (unsigned i = 0; i < 2; i++) {
		tcp_send_call(fd, 0x2006, 0, NULL, 0);
		CHECK_EQ(tcp_recv_reply(fd, r, sizeof(r), 5000), 24u);
	}
	c = drc_stats(s);
	CHECK_EQ(c.hits, 1);
	CHECK_EQ(c.not_cached, 4);   /* two GARBAGE_ARGS, two DROPs */
	close(fd);
	rpcrdma_server_destroy(s);
}

/* A reply above drc_max_reply is not kept: the retransmission runs again. */
TEST(drc_tcp_large_reply_not_kept)
{
	struct rpcrdma_server_opts o = {.threads = 2, .drc_entries = 8, .drc_max_reply = 256};
	struct rpcrdma_server *s = srv_start("tcp://127.0.0.1:0", &o);
	uint8_t r[4096];
	int fd = rpc_raw_connect(rpcrdma_server_port(s));
	uint32_t sizes[2] = {200, 300}, runs[4];

	for (unsigned i = 0; i < 4; i++) {
		size_t n;

		tcp_send_call(fd, 0x3000 + i / 2, P_BIG, &sizes[i / 2], 1);
		n = tcp_recv_reply(fd, r, sizeof(r), 5000);
		REQUIRE_EQ(n, 24u + 8u + sizes[i / 2]);
		runs[i] = rr_get_be32(r + 24);
	}
	CHECK_EQ(runs[0], 1);
	CHECK_EQ(runs[1], 1);   /* 232 bytes: kept */
	CHECK_EQ(runs[2], 2);
	CHECK_EQ(runs[3], 3);   /* 332 bytes: not kept */
	close(fd);
	rpcrdma_server_destroy(s);
}

/* A duplicate that arrives while the first Call's handler runs does not
 * run the handler: it waits and gets the first Call's reply, also when it
 * came on a new connection and the first one is gone by then (what a
 * reconnecting client does: the first reply is then lost with its
 * connection). */
TEST(drc_tcp_duplicate_in_progress)
{
	struct rpcrdma_server *s;
	uint8_t r[256], r2[256];
	uint32_t v = 5;
	size_t n, n2;
	int port, fd, fd2, fd3;

	s = drc_server("tcp://127.0.0.1:0", 64, &port);
	fd = rpc_raw_connect(port);
	fd2 = rpc_raw_connect(port);
	tcp_send_call(fd, 0x4001, P_BLOCK, &v, 1);
	REQUIRE(wait_entered(1, 5000));
	tcp_send_call(fd2, 0x4001, P_BLOCK, &v, 1);   /* parked */
	tcp_send_call(fd, 0x4001, P_BLOCK, &v, 1);    /* same connection: parked */
	REQUIRE(wait_in_progress(s, 2));
	/* both parked while the handler is held: no answer can exist */
	CHECK_EQ(tcp_recv_reply(fd2, r2, sizeof(r2), 0), 0u);
	gate_open();
	n = tcp_recv_reply(fd, r, sizeof(r), 5000);
	CHECK_EQ(reply_u32(r, n, 0x4001, 1), 1);
	n = tcp_recv_reply(fd, r, sizeof(r), 5000);
	CHECK_EQ(reply_u32(r, n, 0x4001, 1), 1);
	n2 = tcp_recv_reply(fd2, r2, sizeof(r2), 5000);
	REQUIRE_EQ(n, n2);
	CHECK_MEM(r, r2, n);
	CHECK_EQ(atomic_load(&H.runs), 1);
	CHECK_EQ(drc_stats(s).drops_in_progress, 2);
	close(fd);
	close(fd2);

	/* The first connection closes before its reply: the duplicate on the
	 * new connection still gets it. */
	h_reset();
	fd = rpc_raw_connect(port);
	fd3 = rpc_raw_connect(port);
	tcp_send_call(fd, 0x4002, P_BLOCK, &v, 1);
	REQUIRE(wait_entered(1, 5000));
	close(fd);
	tcp_send_call(fd3, 0x4002, P_BLOCK, &v, 1);
	REQUIRE(wait_in_progress(s, 3));   /* the duplicate is parked */
	gate_open();
	n = tcp_recv_reply(fd3, r, sizeof(r), 5000);
	CHECK_EQ(reply_u32(r, n, 0x4002, 1), 1);
	CHECK_EQ(atomic_load(&H.runs), 1);
	/* And later retransmissions are answered from the cache. */
	CHECK_EQ(tcp_xchg(fd3, 0x4002, P_BLOCK, 5, NULL, NULL), 1);
	CHECK_EQ(atomic_load(&H.runs), 1);
	close(fd3);
	rpcrdma_server_destroy(s);
}

/* More duplicates while it runs than can wait: the extra ones are dropped
 * (RFC 5531 lets a server drop a Call), the others answered. */
TEST(drc_tcp_waiters_bounded)
{
	struct rpcrdma_server *s;
	uint8_t r[256];
	uint32_t v = 9;
	unsigned replies = 0;
	int port, fd;

	s = drc_server("tcp://127.0.0.1:0", 64, &port);
	fd = rpc_raw_connect(port);
	tcp_send_call(fd, 0x4101, P_BLOCK, &v, 1);
	REQUIRE(wait_entered(1, 5000));
	for (unsigned i = 0; i < RR_DRC_MAX_WAITERS + 3; i++)
		tcp_send_call(fd, 0x4101, P_BLOCK, &v, 1);
	for (unsigned t = 0; t < 200 && drc_stats(s).drops_in_progress < RR_DRC_MAX_WAITERS + 3;
	     t++)
		rr_th_sleep_ms(10);
	CHECK_EQ(drc_stats(s).drops_in_progress, RR_DRC_MAX_WAITERS + 3);
	gate_open();
	while (tcp_recv_reply(fd, r, sizeof(r), 500) > 0)
		replies++;
	CHECK_EQ(replies, 1 + RR_DRC_MAX_WAITERS);
	CHECK_EQ(atomic_load(&H.runs), 1);
	close(fd);
	rpcrdma_server_destroy(s);
}

/* Eviction by capacity and by age on the server's injected clock. */
TEST(drc_tcp_eviction_capacity_and_age)
{
	static struct tenv te;
	struct rpcrdma_server_opts o = {.threads = 2, .drc_entries = 2, .drc_ttl_ms = 1000};
	struct rpcrdma_server *s;
	struct rr_drc_counters c;
	int fd;

	tenv_init(&te);
	o.env = &te.env;
	s = srv_start("tcp://127.0.0.1:0", &o);
	fd = rpc_raw_connect(rpcrdma_server_port(s));
	CHECK_EQ(tcp_xchg(fd, 0x5001, P_COUNT, 1, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(fd, 0x5002, P_COUNT, 1, NULL, NULL), 2);
	CHECK_EQ(tcp_xchg(fd, 0x5001, P_COUNT, 1, NULL, NULL), 1);   /* hit: 5001 newest */
	CHECK_EQ(tcp_xchg(fd, 0x5003, P_COUNT, 1, NULL, NULL), 3);   /* evicts 5002 */
	CHECK_EQ(tcp_xchg(fd, 0x5001, P_COUNT, 1, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(fd, 0x5002, P_COUNT, 1, NULL, NULL), 4);   /* forgotten: runs */
	c = drc_stats(s);
	CHECK_EQ(c.evictions, 2);   /* 5002, then 5003 */
	/* Age: 0.9 s later still there, 1.1 s after its last use gone. */
	atomic_fetch_add(&te.now, 900000000ull);
	CHECK_EQ(tcp_xchg(fd, 0x5002, P_COUNT, 1, NULL, NULL), 4);
	atomic_fetch_add(&te.now, 1100000000ull);
	CHECK_EQ(tcp_xchg(fd, 0x5002, P_COUNT, 1, NULL, NULL), 5);
	c = drc_stats(s);
	CHECK_EQ(c.expirations, 2);   /* 5001 and 5002 */
	CHECK_EQ(atomic_load(&H.runs), 5);
	close(fd);
	rpcrdma_server_destroy(s);
	CHECK_EQ(atomic_load(&te.live), 0);
}

/* The cache cannot allocate its entries: every Call runs (uncached), none
 * fails, nothing leaks. */
TEST(drc_tcp_alloc_failure_runs_uncached)
{
	static struct tenv te;
	struct rpcrdma_server_opts o = {.threads = 2, .drc_entries = 8};
	struct rpcrdma_server *s;
	int fd;

	tenv_init(&te);
	o.env = &te.env;
	s = srv_start("tcp://127.0.0.1:0", &o);
	fd = rpc_raw_connect(rpcrdma_server_port(s));
	atomic_store(&te.fail_size, sizeof(struct rr_drc_entry));
	CHECK_EQ(tcp_xchg(fd, 0x6001, P_COUNT, 1, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(fd, 0x6001, P_COUNT, 1, NULL, NULL), 2);
	CHECK_EQ(drc_stats(s).not_cached, 2);
	CHECK_EQ(drc_stats(s).entries, 0u);
	atomic_store(&te.fail_size, 0);
	CHECK_EQ(tcp_xchg(fd, 0x6001, P_COUNT, 1, NULL, NULL), 3);
	CHECK_EQ(tcp_xchg(fd, 0x6001, P_COUNT, 1, NULL, NULL), 3);
	close(fd);
	rpcrdma_server_destroy(s);
	CHECK_EQ(atomic_load(&te.live), 0);

	/* Creation itself: the table cannot be allocated. */
	tenv_init(&te);
	o.env = &te.env;
	o.drc_entries = 1000;   /* 1024 buckets */
	atomic_store(&te.fail_size, 1024 * sizeof(void *));
	s = NULL;
	CHECK_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &o, &s), -ENOMEM);
	CHECK(s == NULL);
	CHECK_EQ(atomic_load(&te.live), 0);
}

/* ---- rdma:// with a raw RPC-over-RDMA requester ---- */

struct rq {
	struct rr_th_rogue g;
	uint8_t wbuf[65536];       /* a Write chunk target */
	struct rpcrdma_mr *wmr;
};

static void rq_open(struct rq *q, int port)
{
	/* RFC 8797 private data: version 1, no remote invalidation, 4 KiB. */
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};

	REQUIRE_EQ(rr_th_rogue_open(&q->g, port, pd, 8, false), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(q->g.pd, q->wbuf, sizeof(q->wbuf),
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE,
					 &q->wmr), 0);
}

static void rq_close(struct rq *q)
{
	(void)rpcrdma_dereg_mr(q->wmr);
	rr_th_rogue_close(&q->g);
}

/* An RDMA_MSG Call (RFC 8166 section 4.2) of @xid: transport header with
 * an empty Read list, a Write list of one chunk of one segment covering
 * wbuf's first @wlen bytes when @wlen > 0, no Reply chunk; then the RPC
 * Call. */
static size_t rq_msg(struct rq *q, uint8_t *b, uint32_t xid, uint32_t proc, uint32_t arg,
		     uint32_t wlen)
{
	size_t n = 0;

	rr_put_be32(b + n, xid), n += 4;
	rr_put_be32(b + n, 1), n += 4;   /* version */
	rr_put_be32(b + n, 8), n += 4;   /* credits */
	rr_put_be32(b + n, 0), n += 4;   /* RDMA_MSG */
	rr_put_be32(b + n, 0), n += 4;   /* Read list: empty */
	if (wlen) {
		rr_put_be32(b + n, 1), n += 4;
		rr_put_be32(b + n, 1), n += 4;   /* one segment */
		rr_put_be32(b + n, rpcrdma_mr_rkey(q->wmr)), n += 4;
		rr_put_be32(b + n, wlen), n += 4;
		rr_put_be64(b + n, rpcrdma_mr_remote_offset(q->wmr)), n += 8;
	}
	rr_put_be32(b + n, 0), n += 4;   /* end of Write list */
	rr_put_be32(b + n, 0), n += 4;   /* no Reply chunk */
	return n + rpc_raw_call(b + n, xid, PROG, 1, proc, &arg, 1);
}

/* Parses an RDMA_MSG Reply: the Write list's first chunk length (0 when
 * none) into *@wlen, and the offset of the RPC Reply. 0 when malformed. */
static size_t rq_parse(const uint8_t *r, size_t n, uint32_t *wlen)
{
	size_t at = 16;

	*wlen = 0;
	if (n < 28 || rr_get_be32(r + 12) != 0 || rr_get_be32(r + 16) != 0)
		return 0;
	at = 20;
	while (at + 4 <= n && rr_get_be32(r + at) == 1) {
		uint32_t cnt;

		if (at + 8 > n)
			return 0;
		cnt = rr_get_be32(r + at + 4);
		if (cnt > 16 || at + 8 + 16 * cnt > n)
			return 0;
		for (uint32_t i = 0; i < cnt; i++)
			*wlen += rr_get_be32(r + at + 8 + 16 * i + 4);
		at += 8 + 16 * cnt;
	}
	at += 4;   /* end of Write list */
	if (at + 4 > n || rr_get_be32(r + at) != 0)
		return 0;   /* no Reply chunk expected */
	return at + 4;
}

/* Sends @m and waits for the RPC Reply: its run number (result 1, or
 * result 0 for P_GEN); the RPC Reply bytes into @out/@outlen. */
static uint32_t rq_xchg(struct rq *q, const uint8_t *m, size_t len, uint32_t xid, unsigned ri,
			uint8_t *out, size_t *outlen, uint32_t *wlen)
{
	uint8_t r[4096];
	uint32_t wl;
	int n = rr_th_rogue_xchg(&q->g, m, len, r, 5000);
	size_t at;

	REQUIRE(n > 0);
	at = rq_parse(r, (size_t)n, &wl);
	REQUIRE(at > 0);
	CHECK_EQ(rr_get_be32(r), xid);
	if (out) {
		memcpy(out, r + at, (size_t)n - at);
		*outlen = (size_t)n - at;
	}
	if (wlen)
		*wlen = wl;
	return reply_u32(r + at, (size_t)n - at, xid, ri);
}

/* The next message on @q, the Reply to a Call sent before (at most
 * RR_TEST_WAIT_MS): its RPC Reply into @out (@cap bytes); its length. */
static size_t rq_recv(struct rq *q, uint8_t *out, size_t cap)
{
	uint8_t r[4096];
	uint32_t wl;
	int n = rr_th_rogue_recv(&q->g, r, RR_TEST_WAIT_MS);
	size_t at;

	REQUIRE(n > 0);
	at = rq_parse(r, (size_t)n, &wl);
	REQUIRE(at > 0 && (size_t)n - at <= cap);
	memcpy(out, r + at, (size_t)n - at);
	return (size_t)n - at;
}

TEST(drc_rdma_retransmit_runs_once)
{
	static struct rq q;
	struct rpcrdma_server *s;
	uint8_t m[512], r1[256], r2[256];
	size_t l, n1, n2;
	int port;

	if (!rr_th_soft_ok())
		return;
	s = drc_server("rdma://127.0.0.1:0", 64, &port);
	rq_open(&q, port);
	l = rq_msg(&q, m, 0x7001, P_COUNT, 3, 0);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7001, 1, r1, &n1, NULL), 1);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7001, 1, r2, &n2, NULL), 1);
	REQUIRE_EQ(n1, n2);
	CHECK_MEM(r1, r2, n1);
	l = rq_msg(&q, m, 0x7001, P_COUNT, 4, 0);   /* same XID, other argument */
	CHECK_EQ(rq_xchg(&q, m, l, 0x7001, 1, NULL, NULL, NULL), 2);
	CHECK_EQ(atomic_load(&H.runs), 2);
	CHECK_EQ(drc_stats(s).hits, 1);
	rq_close(&q);
	rpcrdma_server_destroy(s);

	s = drc_server("rdma://127.0.0.1:0", 0, &port);
	rq_open(&q, port);
	l = rq_msg(&q, m, 0x7001, P_COUNT, 3, 0);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7001, 1, NULL, NULL, NULL), 1);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7001, 1, NULL, NULL, NULL), 2);
	rq_close(&q);
	rpcrdma_server_destroy(s);
}

/* A DDP-eligible result placed by RDMA Write into the requester's Write
 * chunk: the retransmission (with its own Write chunk) gets the same data
 * written again from the cache's copy, without a second run. Above
 * drc_max_reply the reply is not kept and the handler runs again. */
TEST(drc_rdma_write_chunk_reply_replayed)
{
	static struct rq q;
	struct rpcrdma_server_opts o = {.threads = 2, .drc_entries = 16, .drc_max_reply = 8192};
	struct rpcrdma_server *s;
	uint8_t m[512];
	uint32_t wlen, n = 6000, bad = 0;
	size_t l;

	if (!rr_th_soft_ok())
		return;
	s = srv_start("rdma://127.0.0.1:0", &o);
	rq_open(&q, rpcrdma_server_port(s));
	l = rq_msg(&q, m, 0x7101, P_GEN, n, n);
	memset(q.wbuf, 0, sizeof(q.wbuf));
	CHECK_EQ(rq_xchg(&q, m, l, 0x7101, 0, NULL, NULL, &wlen), 1);
	CHECK_EQ(wlen, n);
	for (uint32_t i = 0; i < n; i++)
		bad += q.wbuf[i] != (uint8_t)(1 + i);
	CHECK_EQ(bad, 0);
	memset(q.wbuf, 0, sizeof(q.wbuf));
	CHECK_EQ(rq_xchg(&q, m, l, 0x7101, 0, NULL, NULL, &wlen), 1);   /* replayed */
	CHECK_EQ(wlen, n);
	for (uint32_t i = 0; i < n; i++)
		bad += q.wbuf[i] != (uint8_t)(1 + i);
	CHECK_EQ(bad, 0);
	CHECK_EQ(atomic_load(&H.runs), 1);
	CHECK_EQ(drc_stats(s).hits, 1);
	/* 12000 bytes of result: above 8192, not kept. */
	n = 12000;
	l = rq_msg(&q, m, 0x7102, P_GEN, n, n);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7102, 0, NULL, NULL, &wlen), 2);
	CHECK_EQ(rq_xchg(&q, m, l, 0x7102, 0, NULL, NULL, &wlen), 3);
	CHECK_EQ(wlen, n);
	CHECK_EQ(q.wbuf[0], 3);
	rq_close(&q);
	rpcrdma_server_destroy(s);
}

/* A duplicate while the first runs, over rdma://: parked, then answered.
 * Credits (RFC 8166 section 3.3.1): before its first Reply a requester may
 * have one Call outstanding. q's retransmission therefore waits for q's own
 * Reply; sent before it (the server answers the parked duplicate on q2
 * before it posts q's Reply, svc.c req_verdict), it would be a second Call
 * beyond the grant of 1, and the server ends q's connection
 * (drc_rdma_retransmit_beyond_first_credit_ends_connection). */
TEST(drc_rdma_duplicate_in_progress)
{
	static struct rq q, q2;
	struct rpcrdma_server *s;
	uint8_t m[512], r1[256], r2[256], r3[256];
	size_t l, n1, n2, n3;
	int port;

	if (!rr_th_soft_ok())
		return;
	s = drc_server("rdma://127.0.0.1:0", 64, &port);
	rq_open(&q, port);
	rq_open(&q2, port);
	l = rq_msg(&q, m, 0x7201, P_BLOCK, 11, 0);
	CHECK_EQ(rr_th_rogue_xchg(&q.g, m, l, r1, 0), 0);   /* send only */
	REQUIRE(wait_entered(1, 5000));
	CHECK_EQ(rr_th_rogue_send(&q2.g, m, l, 0, NULL, 3000), 0);
	REQUIRE(wait_in_progress(s, 1));   /* parked (no answer while the gate is shut) */
	CHECK_EQ(q2.g.npend, 0);
	gate_open();
	/* q2's Reply (the replay) comes now; q's own Reply as well */
	n2 = rq_recv(&q2, r2, sizeof(r2));
	CHECK_EQ(reply_u32(r2, n2, 0x7201, 1), 1);
	n1 = rq_recv(&q, r1, sizeof(r1));
	REQUIRE_EQ(n1, n2);
	CHECK_MEM(r1, r2, n1);
	/* q, its Call answered, retransmits: from the cache */
	CHECK_EQ(rq_xchg(&q, m, l, 0x7201, 1, r3, &n3, NULL), 1);
	REQUIRE_EQ(n3, n1);
	CHECK_MEM(r3, r1, n1);
	CHECK_EQ(atomic_load(&H.runs), 1);
	CHECK_EQ(drc_stats(s).drops_in_progress, 1);
	CHECK_EQ(drc_stats(s).hits, 1);
	rq_close(&q);
	rq_close(&q2);
	rpcrdma_server_destroy(s);
}

/* What drc_rdma_duplicate_in_progress used to do when the server was slow
 * to post q's Reply, made certain: q retransmits while its first Call is
 * still running (the gate shut), a second Call before any Reply, beyond the
 * credit of 1 a requester has until its first Reply (RFC 8166 section
 * 3.3.1). The server ends that connection (the soft provider's receive
 * quota: DDP "no buffer for MSN", docs/protocol.md "Receive quotas"),
 * without a cache lookup and without running the handler again; the Call
 * that was running finishes, and other connections are served. */
TEST(drc_rdma_retransmit_beyond_first_credit_ends_connection)
{
	static struct rq q, q2;
	struct rpcrdma_server *s;
	uint8_t m[512], r[4096];
	size_t l;
	int port;

	if (!rr_th_soft_ok())
		return;
	s = drc_server("rdma://127.0.0.1:0", 64, &port);
	rq_open(&q, port);
	l = rq_msg(&q, m, 0x7301, P_BLOCK, 12, 0);
	CHECK_EQ(rr_th_rogue_xchg(&q.g, m, l, r, 0), 0);   /* send only */
	REQUIRE(wait_entered(1, 5000));
	/* q's first Call cannot have been answered: the gate is shut */
	CHECK_EQ(rr_th_rogue_xchg(&q.g, m, l, r, RR_TEST_WAIT_MS), -1);
	gate_open();
	CHECK_EQ(drc_stats(s).drops_in_progress, 0);
	CHECK_EQ(drc_stats(s).hits, 0);
	/* the server still serves others; the handler ran once for 0x7301 */
	rq_open(&q2, port);
	l = rq_msg(&q2, m, 0x7302, P_COUNT, 13, 0);
	CHECK_EQ(rq_xchg(&q2, m, l, 0x7302, 1, NULL, NULL, NULL), 2);
	CHECK_EQ(atomic_load(&H.runs), 2);
	rq_close(&q);
	rq_close(&q2);
	rpcrdma_server_destroy(s);
}

/* ---- the real client's retransmission, through a TCP proxy ---- */

/* A byte-forwarding TCP proxy to 127.0.0.1:@backend, one thread, at most 8
 * connection pairs; proxy_cut() closes every current pair (both sides), as
 * a network failure would. */
struct proxy {
	int lfd, port, backend;
	pthread_t th;
	atomic_bool stop;
	atomic_bool cut;
	int fds[8][2];
	unsigned npairs;
	atomic_uint accepted;
};

static void pair_close(struct proxy *p, unsigned i)
{
	shutdown(p->fds[i][0], SHUT_RDWR);
	shutdown(p->fds[i][1], SHUT_RDWR);
	close(p->fds[i][0]);
	close(p->fds[i][1]);
	p->fds[i][0] = p->fds[p->npairs - 1][0];
	p->fds[i][1] = p->fds[p->npairs - 1][1];
	p->npairs--;
}

static bool fwd(int from, int to)
{
	uint8_t b[65536];
	ssize_t k = recv(from, b, sizeof(b), 0);

	if (k <= 0)
		return false;
	for (ssize_t off = 0; off < k;) {
		ssize_t w = send(to, b + off, (size_t)(k - off), MSG_NOSIGNAL);

		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;

	while (!atomic_load(&p->stop)) {
		struct pollfd pf[17];
		unsigned n = 0;

		if (atomic_exchange(&p->cut, false))
			while (p->npairs)
				pair_close(p, 0);
		pf[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
		for (unsigned i = 0; i < p->npairs; i++) {
			pf[n++] = (struct pollfd){.fd = p->fds[i][0], .events = POLLIN};
			pf[n++] = (struct pollfd){.fd = p->fds[i][1], .events = POLLIN};
		}
		if (poll(pf, n, 10) <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			int c = accept(p->lfd, NULL, NULL);

			int b = c >= 0 && p->npairs < 8 ? rpc_raw_try_connect(p->backend) : -1;

			/* this thread is not the test's: CHECK, no REQUIRE */
			CHECK(c < 0 || p->npairs == 8 || b >= 0);
			if (c >= 0 && b >= 0) {
				p->fds[p->npairs][0] = c;
				p->fds[p->npairs][1] = b;
				p->npairs++;
				atomic_fetch_add(&p->accepted, 1);
			} else if (c >= 0) {
				close(c);
			}
			continue;   /* the pair table changed */
		}
		for (unsigned i = 0; i < p->npairs; i++) {
			short r0 = pf[1 + 2 * i].revents, r1 = pf[2 + 2 * i].revents;
			bool ok = true;

			if (r0 & (POLLIN | POLLHUP | POLLERR))
				ok = fwd(p->fds[i][0], p->fds[i][1]);
			if (ok && (r1 & (POLLIN | POLLHUP | POLLERR)))
				ok = fwd(p->fds[i][1], p->fds[i][0]);
			if (!ok) {
				pair_close(p, i);
				break;   /* indices changed */
			}
		}
	}
	while (p->npairs)
		pair_close(p, 0);
	return NULL;
}

static void proxy_start(struct proxy *p, int backend)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int one = 1;

	memset(p, 0, sizeof(*p));
	p->backend = backend;
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(p->lfd >= 0);
	setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE_EQ(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(p->lfd, 8), 0);
	REQUIRE_EQ(getsockname(p->lfd, (struct sockaddr *)&a, &al), 0);
	p->port = ntohs(a.sin_port);
	REQUIRE_EQ(pthread_create(&p->th, NULL, proxy_main, p), 0);
}

static void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stop, true);
	pthread_join(p->th, NULL);
	close(p->lfd);
}

/* A P_BLOCK call whose connection is cut while its handler runs: the client
 * reconnects and retransmits the same XID. With the cache the handler runs
 * once and the call gets that run's reply (sent to the waiting
 * retransmission); without it, twice. */
static void cut_while_running(const char *scheme, unsigned drc)
{
	struct rpcrdma_server_opts so = {.threads = 4, .drc_entries = drc};
	struct rpcrdma_client_opts co = {.timeout_ms = 15000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	static struct proxy px;   /* static: outlives an aborted test */
	uint32_t v = 0, run = 0;
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	s = srv_start(url, &so);
	proxy_start(&px, rpcrdma_server_port(s));
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, px.port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &c), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, P_BLOCK, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 42), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	REQUIRE(wait_entered(1, 5000));
	atomic_store(&px.cut, true);
	/* The retransmission reaches the server: it waits on the first run
	 * (cache) or runs a second handler (no cache). */
	for (unsigned t = 0; t < 1000; t++) {
		if (drc ? drc_stats(s).drops_in_progress >= 1 : atomic_load(&H.runs) >= 2)
			break;
		rr_th_sleep_ms(10);
	}
	CHECK(atomic_load(&px.accepted) >= 2);
	gate_open();
	rc = rpcrdma_call_wait(call, 15000);
	REQUIRE_EQ(rc, 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &run), 0);
	CHECK_EQ(v, 42);
	if (drc) {
		CHECK_EQ(run, 1);
		CHECK_EQ(atomic_load(&H.runs), 1);
		CHECK_EQ(drc_stats(s).drops_in_progress, 1);
	} else {
		CHECK_EQ(atomic_load(&H.runs), 2);
	}
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	proxy_stop(&px);
}

TEST(drc_tcp_client_reconnect_retransmission)
{
	cut_while_running("tcp", 64);
	cut_while_running("tcp", 0);
}

TEST(drc_rdma_client_reconnect_retransmission)
{
	if (!rr_th_soft_ok())
		return;
	cut_while_running("rdma", 64);
	cut_while_running("rdma", 0);
}

/* ---- keying on the client's host, and load ---- */

/* tcp:// keys on the peer's host: the same XID and arguments from another
 * host (127.0.0.2) is another request; from the same host on another port
 * (a reconnection) it is the same. */
TEST(drc_tcp_keyed_on_client_host)
{
	struct rpcrdma_server *s;
	int port, a1, a2, b1;

	s = drc_server("tcp://127.0.0.1:0", 64, &port);
	a1 = rpc_raw_connect_from(port, "127.0.0.1");
	a2 = rpc_raw_connect_from(port, "127.0.0.1");
	b1 = rpc_raw_connect_from(port, "127.0.0.2");
	CHECK_EQ(tcp_xchg(a1, 0x8001, P_COUNT, 1, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(a2, 0x8001, P_COUNT, 1, NULL, NULL), 1);
	CHECK_EQ(tcp_xchg(b1, 0x8001, P_COUNT, 1, NULL, NULL), 2);
	CHECK_EQ(tcp_xchg(b1, 0x8001, P_COUNT, 1, NULL, NULL), 2);
	CHECK_EQ(atomic_load(&H.runs), 2);
	close(a1);
	close(a2);
	close(b1);
	rpcrdma_server_destroy(s);
}

/* Many clients and threads against a small cache (constant eviction):
 * every call answered with its own result, the handler run once per call,
 * the counters consistent. Run under ASan/TSan this is the cache's
 * thread-safety test. */
struct load_arg {
	struct rpcrdma_client *c;
	unsigned calls;
	unsigned ok;
};

static void *load_main(void *arg)
{
	struct load_arg *a = arg;

	for (unsigned i = 0; i < a->calls; i++) {
		struct rpcrdma_call *call;
		uint32_t v = 0, run = 0;

		if (rpcrdma_call_create(a->c, P_COUNT, &call))
			continue;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), i);
		if (rpcrdma_call_run(call) == 0 &&
		    rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v) == 0 &&
		    rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &run) == 0 && v == i && run > 0)
			a->ok++;
		rpcrdma_call_destroy(call);
	}
	return NULL;
}

static void load(const char *scheme)
{
	struct rpcrdma_server_opts so = {.threads = 4, .drc_entries = 16};
	struct rpcrdma_client_opts co = {.timeout_ms = 20000};
	struct rpcrdma_server *s;
	struct load_arg a[4];
	pthread_t th[4];
	struct rr_drc_counters c;
	char url[64];

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	s = srv_start(url, &so);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	for (unsigned i = 0; i < 4; i++) {
		a[i] = (struct load_arg){NULL, 200, 0};
		REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &a[i].c), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		REQUIRE_EQ(pthread_create(&th[i], NULL, load_main, &a[i]), 0);
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(a[i].ok, 200);
		rpcrdma_client_destroy(a[i].c);
	}
	c = drc_stats(s);
	CHECK_EQ(atomic_load(&H.runs), 800);
	CHECK_EQ(c.insertions + c.not_cached, 800);
	CHECK_EQ(c.hits, 0);   /* XIDs start at random values per client */
	CHECK(c.entries <= 16);
	CHECK_EQ(c.insertions - c.evictions - c.expirations, c.entries);
	rpcrdma_server_destroy(s);
}

TEST(drc_load_tcp)
{
	load("tcp");
}

TEST(drc_load_rdma)
{
	if (!rr_th_soft_ok())
		return;
	load("rdma");
}

/* ---- rdma:// reports the requester's address (the cache's host key) ---- */

static struct sockaddr_storage peer_seen;
static atomic_int peer_rc = 1;

static int h_peer(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	atomic_store(&peer_rc, rr_rpc_req_ctl(r, RR_CTL_PEER_ADDR, &peer_seen));
	return RPCRDMA_SVC_OK;
}

TEST(drc_rdma_peer_address)
{
	struct rpcrdma_server_opts o = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 10000};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&peer_seen;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 0x2000052bu, 1, 1, h_peer, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, 0x2000052bu, 1, &co, &c), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), 0);
	rpcrdma_call_destroy(call);
	CHECK_EQ(atomic_load(&peer_rc), 0);
	CHECK_EQ(peer_seen.ss_family, AF_INET);
	CHECK_EQ(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
	CHECK(ntohs(sin->sin_port) != 0);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}
