/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's librpcrdma backend, for rdma:// and tcp:// alike: the
 * memory-only benchmark service (READ, WRITE, a durable WRITE, PUSH_OPEN of a
 * push-mode region) on an rpcrdma_server, and the client side: one RPC per
 * operation, push-mode RDMA Write + Commit, many asynchronous calls in
 * flight on one connection, and the round trips per operation read from
 * the client's transport counters. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "rpcrdma/push.h"
#include "rpcrdma/stats.h"

/* RDMA inline size the next connections advertise (rpcrdma_client_opts
 * inline_size); 0: the transport's choice. The pull-mode 4K records use 4096
 * (RFC 8797 sizes as Linux advertises them), so their 4 KiB argument travels
 * as a Read chunk the server pulls, as "pull mode" means, rather than inline
 * in the Call under the soft provider's 132 KiB default. */
uint32_t conn_inline;

/* -- librpcrdma bench service -- */
static int h_read(struct rpcrdma_req *req, void *ctx)
{
	uint32_t count;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &count) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (count > MAXIO)
		count = MAXIO;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(req), srcbuf, count) ? RPCRDMA_SVC_SYSTEM_ERR
									    : RPCRDMA_SVC_OK;
}

static int h_write(struct rpcrdma_req *req, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(req), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(req), len) ? RPCRDMA_SVC_SYSTEM_ERR
								  : RPCRDMA_SVC_OK;
}

/* Durable pull-mode WRITE: the data is written at offset 0 of a file in the
 * directory of the push-mode region (@ctx: a struct sync_file) and
 * fdatasync'd before the Reply, so it compares like with like with Write +
 * Commit (msync). Two backings: the disk (/tmp on the machine's file system:
 * a synchronous write-back) and tmpfs (/dev/shm: fdatasync and msync return
 * at once; the stand-in for a persistent-memory mapping, where making bytes
 * durable is a CPU cache flush and the network round trips dominate). */
struct sync_file {
	const char *dir;
	pthread_mutex_t lock;
	int fd;
};

static struct sync_file sync_disk = {"/tmp", PTHREAD_MUTEX_INITIALIZER, -1};
static struct sync_file sync_mem = {"/dev/shm", PTHREAD_MUTEX_INITIALIZER, -1};

static int h_write_sync(struct rpcrdma_req *req, void *ctx)
{
	struct sync_file *sf = ctx;
	const void *p;
	uint32_t len;
	int rc = 0;

	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(req), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	pthread_mutex_lock(&sf->lock);
	if (sf->fd < 0) {
		char path[96];

		snprintf(path, sizeof(path), "%s/rpcrdma-bench-sync-%d", sf->dir, (int)getpid());
		sf->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (sf->fd >= 0)
			unlink(path);
	}
	if (sf->fd < 0 || pwrite(sf->fd, p, len, 0) != (ssize_t)len || fdatasync(sf->fd))
		rc = -1;
	pthread_mutex_unlock(&sf->lock);
	if (rc)
		return RPCRDMA_SVC_SYSTEM_ERR;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(req), len) ? RPCRDMA_SVC_SYSTEM_ERR
								  : RPCRDMA_SVC_OK;
}

/* Push mode: a 64 KiB durable region (a file under @ctx's directory,
 * unlinked at once) exposed to the calling connection; unmapped when the
 * transport releases it. */
struct bench_region {
	struct rpcrdma_durable_map map;
};

static void bench_region_released(void *arg)
{
	struct bench_region *g = arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
}

static int h_push_open(struct rpcrdma_req *req, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	struct bench_region *g = calloc(1, sizeof(*g));
	struct rpcrdma_push_region reg;
	struct rpcrdma_mr_attr a;
	const struct sync_file *sf = ctx;
	char path[96];
	uint64_t id;
	int rc;

	if (!g)
		return RPCRDMA_SVC_SYSTEM_ERR;
	g->map.fd = -1;
	snprintf(path, sizeof(path), "%s/rpcrdma-bench-push-%d-%p", sf->dir, (int)getpid(),
		 (void *)g);
	rc = rpcrdma_req_push_capable(req);
	if (!rc)
		rc = rpcrdma_durable_map(path, 65536, &g->map);
	unlink(path);
	if (!rc)
		rc = rpcrdma_durable_mr_attr(&g->map, g->map.addr, 65536, 0, &a);
	if (!rc)
		rc = rpcrdma_req_push_expose(req, &a, bench_region_released, g, &reg, &id);
	if (rc) {
		(void)rpcrdma_durable_unmap(&g->map);
		free(g);
		return rpcrdma_xdr_put_i32(e, rc) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
	}
	rpcrdma_xdr_put_i32(e, 0);
	rpcrdma_xdr_put_push_region(e, &reg);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

/* @scale: connection limits out of the way (every client comes from
 * 127.0.0.1). */
int rr_server(const char *scheme, int *port, bool scale)
{
	struct rpcrdma_server *srv;
	/* Memory-only handlers (the durable WRITE's fdatasync aside): run on
	 * the receiving thread, as libtirpc's svc_run and tcp:// do. */
	struct rpcrdma_server_opts so = {.threads = 4, .flags = getenv("BENCH_NOINLINE") ? 0 : RPCRDMA_SERVER_INLINE};
	char url[64];
	int rc;

	if (scale) {
		so.max_conns = 1000000;
		so.max_conns_per_host = UINT_MAX;
		so.max_handshakes = 100000;
	}
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, &srv);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_READ, h_read, NULL);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE, h_write, NULL);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE_SYNC,
					     h_write_sync, &sync_disk);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE_SYNC_MEM,
					     h_write_sync, &sync_mem);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_PUSH_OPEN,
					     h_push_open, &sync_disk);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_PUSH_OPEN_MEM,
					     h_push_open, &sync_mem);
	if (!rc)
		rc = rpcrdma_server_start(srv);
	if (!rc)
		*port = rpcrdma_server_port(srv);
	return rc;
}

/* A librpcrdma client on the transport's URL (rdma:// or tcp://). */
int rr_open(struct conn *c)
{
	struct rpcrdma_client_opts o = {.inline_size = conn_inline};
	char url[64];

	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", tp_name[c->tp], tp_port[c->tp]);
	return rpcrdma_client_create(url, BENCH_PROG, BENCH_VERS, &o, &c->rc);
}

/* One operation (conn_op) as an RPC: NULL, READ (into the DDP sink), WRITE
 * (a DDP-eligible argument), durable WRITE to disk or tmpfs. */
int rr_op(struct conn *c, int op, uint32_t size)
{
	struct rpcrdma_call *call;
	int rc = rpcrdma_call_create(c->rc, op == 0 ? 0 : op == 1 ? BENCH_READ :
					     op == 2 ? BENCH_WRITE : op == 3 ? BENCH_WRITE_SYNC
						   : BENCH_WRITE_SYNC_MEM, &call);

	if (rc)
		return rc;
	if (op == 1) {
		struct rpcrdma_ddp_sink sk = {c->sink, size};

		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), size);
		rc = rpcrdma_call_set_sinks(call, &sk, 1);
		/* the reduced Reply is 28 bytes (header, length word):
		 * a known bound lets small results come inline */
		rpcrdma_call_set_reply_hint(call, 64);
	} else if (op >= 2) {
		rc = rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), srcbuf, size);
	}
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
		const void *p;
		uint32_t len = 0;

		if (op == 1)
			rc = rpcrdma_xdr_get_ddp(d, &p, &len);
		else if (op >= 2)
			rc = rpcrdma_xdr_get_u32(d, &len);
		if (!rc && op && len != size)
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* Round trips the client's counters show between @a and now, over @ops
 * operations: one per Call sent (Call, Reply), one per Read chunk it offered
 * (the server's RDMA Read request and response), one per Commit (request,
 * response). RDMA Writes, Write chunks and Reply chunks travel one way. */
uint64_t rtrips_now(struct conn *c)
{
	struct rpcrdma_xprt_stats s;

	if (c->tp != TP_RDMA || rpcrdma_client_stats(c->rc, &s))
		return 0;
	return s.msg_sent + s.nomsg_sent + s.read_chunks + s.commits;
}

/* Push mode: PUSH_OPEN (@mem: the tmpfs-backed region) once, then RDMA Write
 * 4 KiB + RDMA Commit per operation (completes when the Commit Response says
 * durable: msync). */
int run_push(struct conn *c, uint32_t size, bool mem, struct rec *r)
{
	struct rpcrdma_call *call;
	struct rpcrdma_push_region reg;
	struct rpcrdma_xdr_dec *d;
	struct lat l;
	uint64_t t0, end, trips0, ops = 0;
	int32_t st = 0;
	int rc;

	rc = rpcrdma_client_push_capable(c->rc);
	if (rc)
		return rc;
	rc = rpcrdma_call_create(c->rc, mem ? BENCH_PUSH_OPEN_MEM : BENCH_PUSH_OPEN, &call);
	if (rc)
		return rc;
	rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_i32(d, &st);
		if (!rc)
			rc = st;
		if (!rc)
			rc = rpcrdma_xdr_get_push_region(d, &reg);
	}
	rpcrdma_call_destroy(call);
	if (rc)
		return rc;
	if (size > reg.length)
		return -EMSGSIZE;
	for (int i = 0; i < 2 && !rc; i++)   /* warm up */
		rc = rpcrdma_push_write(c->rc, &reg, 0, srcbuf, size, RPCRDMA_PUSH_COMMIT, NULL);
	if (rc)
		return rc;
	trips0 = rtrips_now(c);
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(dur * 1e9);
	do {
		uint64_t a = fs_now_ns();

		rc = rpcrdma_push_write(c->rc, &reg, 0, srcbuf, size, RPCRDMA_PUSH_COMMIT, NULL);
		if (rc)
			break;
		lat_add(&l, fs_now_ns() - a);
		ops++;
	} while (fs_now_ns() < end || ops < 3);
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	if (ops)
		r->rtrips = (double)(rtrips_now(c) - trips0) / (double)ops;
	return rc;
}

/* -- asynchronous calls: one in flight per slot for the duration -- */
void actx_init(struct actx *a, int op, uint32_t size)
{
	memset(a, 0, sizeof(*a));
	a->op = op;
	a->size = op ? size : 0;
	lat_init(&a->l);
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cv, NULL);
}

void actx_fini(struct actx *a)
{
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cv);
}

static void async_done(struct rpcrdma_call *call, int status, void *arg);

static int async_start(struct aslot *s)
{
	struct rpcrdma_call *call;
	struct rpcrdma_ddp_sink sk = {s->sink, s->a->size};
	int rc = rpcrdma_call_create(s->clnt, s->a->op ? BENCH_READ : 0, &call);

	if (rc)
		return rc;
	if (s->a->op) {
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), s->a->size);
		rc = rpcrdma_call_set_sinks(call, &sk, 1);
	}
	s->t0 = fs_now_ns();
	if (!rc)
		rc = rpcrdma_call_start(call, async_done, s);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void async_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct aslot *s = arg;
	struct actx *a = s->a;
	uint64_t now = fs_now_ns();
	int rc = status;

	if (!rc && a->op) {
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && len != a->size)
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	lat_add(&a->l, now - s->t0);
	pthread_mutex_lock(&a->lock);
	if (!rc)
		a->ops++;
	else if (!a->err)
		a->err = rc;
	pthread_mutex_unlock(&a->lock);
	if (!rc && now < a->end)
		rc = async_start(s);
	else if (!rc)
		rc = 1;   /* done */
	if (rc) {
		pthread_mutex_lock(&a->lock);
		if (rc < 0 && !a->err)
			a->err = rc;
		a->inflight--;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->lock);
	}
}

int async_run(struct aslot *slots, unsigned n, struct actx *a)
{
	for (unsigned i = 0; i < n; i++) {
		slots[i].a = a;
		pthread_mutex_lock(&a->lock);
		a->inflight++;
		pthread_mutex_unlock(&a->lock);
		if ((a->op && !slots[i].sink) || async_start(&slots[i])) {
			pthread_mutex_lock(&a->lock);
			a->inflight--;
			a->err = a->err ? a->err : -EIO;
			pthread_mutex_unlock(&a->lock);
			break;
		}
	}
	pthread_mutex_lock(&a->lock);
	while (a->inflight)
		pthread_cond_wait(&a->cv, &a->lock);
	pthread_mutex_unlock(&a->lock);
	return a->err;
}

/* -- outstanding calls on one connection -- */
int run_outstanding_rr(enum tp tp, unsigned window, uint32_t size, struct rec *r)
{
	struct conn c;
	struct actx a;
	struct aslot *slots;
	uint64_t t0;
	int rc;

	rc = conn_open(&c, tp);
	if (!rc)
		rc = conn_op(&c, 1, size);
	slots = calloc(window, sizeof(*slots));
	if (rc || !slots) {
		free(slots);
		conn_close(&c);
		return rc ? rc : -ENOMEM;
	}
	for (unsigned i = 0; i < window; i++) {
		slots[i].clnt = c.rc;
		slots[i].sink = malloc(size ? size : 1);   /* NULL: async_run fails */
	}
	actx_init(&a, 1, size);
	cpu_begin(r);
	t0 = fs_now_ns();
	a.end = t0 + (uint64_t)(dur * 1e9);
	rc = async_run(slots, window, &a);
	cpu_end(r, a.ops);
	lat_finish(&a.l, r, a.ops, a.ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	for (unsigned i = 0; i < window; i++)
		free(slots[i].sink);
	free(slots);
	actx_fini(&a);
	conn_close(&c);
	return rc;
}
