/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared scaffolding of the end-to-end transport tests (see xprt_harness.h):
 * loopback rr_tp endpoints over the software iWARP provider, waits and the
 * ECHO/BULK handlers. No TEST() here. */
#include "xprt_harness.h"
#include "test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool rr_th_soft_ok(void)
{
	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT)) {
		rr_test_mark_skipped("soft provider not built in");
		return false;
	}
	return true;
}

void rr_th_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Calls @fn(@arg, name, fp) for each thread of this process, with its
 * name and its /proc/self/task/N/@file opened; -1 without /proc. */
static int each_task(const char *file, void (*fn)(void *arg, const char *name, FILE *f),
		     void *arg)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		snprintf(path, sizeof(path), "/proc/self/task/%s/%s", e->d_name, file);
		f = fopen(path, "r");
		if (!f)
			continue;
		fn(arg, comm, f);
		fclose(f);
	}
	closedir(d);
	return 0;
}

/* @name matches @pattern, or its start when @pattern ends with '*'. */
static bool name_match(const char *name, const char *pattern)
{
	size_t n = strlen(pattern);

	if (n && pattern[n - 1] == '*')
		return strncmp(name, pattern, n - 1) == 0;
	return strcmp(name, pattern) == 0;
}

struct count_arg {
	const char *pattern;
	unsigned n;
};

static void count_one(void *arg, const char *name, FILE *f)
{
	struct count_arg *c = arg;

	(void)f;
	if (name_match(name, c->pattern))
		c->n++;
}

int rr_th_in_child(int (*fn)(void))
{
	pid_t pid;
	int st = 0;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn());
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

unsigned rr_th_threads_named(const char *pattern)
{
	struct count_arg c = {pattern, 0};

	(void)each_task("comm", count_one, &c);
	return c.n;
}

struct task_q {
	const char *name;
	long long sum;      /* wake-ups */
	int found, awake;   /* threads of that name, not asleep */
};

static void task_wakeups(void *arg, const char *name, FILE *f)
{
	struct task_q *q = arg;
	char line[128];

	if (!name_match(name, q->name))
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "voluntary_ctxt_switches:", 24))
			q->sum += atoll(line + 24);
}

long long rr_th_thread_wakeups(const char *name)
{
	struct task_q q = {name, 0, 0, 0};

	return each_task("status", task_wakeups, &q) ? -1 : q.sum;
}

/* stat: pid (comm) state ... (comm may hold spaces: the last ')') */
static void task_state(void *arg, const char *name, FILE *f)
{
	struct task_q *q = arg;
	char line[512], *rp;

	if (!name_match(name, q->name))
		return;
	if (fgets(line, sizeof(line), f) && (rp = strrchr(line, ')')) != NULL) {
		q->found++;
		q->awake += rp[2] != 'S';
	}
}

bool rr_th_thread_asleep(const char *name)
{
	struct task_q q = {name, 0, 0, 0};

	return each_task("stat", task_state, &q) == 0 && q.found && !q.awake;
}

static bool asleep(void *name)
{
	return rr_th_thread_asleep(name);
}

bool rr_th_until_thread_asleep(const char *name, unsigned ms)
{
	return rr_test_until(asleep, (void *)(uintptr_t)name, ms);
}

bool rr_th_until_thread_idle(const char *name, long long max, unsigned window, unsigned ms)
{
	for (unsigned t = 0; t < ms; t += window) {
		long long w0 = rr_th_thread_wakeups(name), w1;

		rr_th_sleep_ms(window);   /* the window measured */
		w1 = rr_th_thread_wakeups(name);
		if (w0 >= 0 && w1 - w0 <= max)
			return true;
	}
	return false;
}

static void loopback(struct sockaddr_in *a, int port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->sin_port = htons((uint16_t)port);
}

int rr_th_tp_server(const struct rr_tp_conf *conf, rr_tp_recv_fn recv, void *ctx,
		    struct rr_tp_server **out)
{
	struct sockaddr_in a;

	loopback(&a, 0);
	return rr_tp_server_create(conf, (struct sockaddr *)&a, sizeof(a), recv, ctx, out);
}

int rr_th_tp_client(const struct rr_tp_conf *conf, int port, rr_tp_complete_fn complete,
		    void *ctx, struct rr_tp_client **out)
{
	struct sockaddr_in a;

	loopback(&a, port);
	return rr_tp_client_create(conf, (struct sockaddr *)&a, sizeof(a), complete, ctx, out);
}

bool rr_th_wait_count(pthread_mutex_t *lock, pthread_cond_t *cond, const unsigned *count,
		      unsigned n, unsigned ms)
{
	struct timespec ts;
	bool ok = true;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000 + 1;
	pthread_mutex_lock(lock);
	while (*count < n && ok)
		ok = pthread_cond_timedwait(cond, lock, &ts) == 0;
	ok = *count >= n;
	pthread_mutex_unlock(lock);
	return ok;
}

void rr_th_worker_stop(pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop,
		       pthread_t worker)
{
	pthread_mutex_lock(lock);
	*stop = true;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(lock);
	pthread_join(worker, NULL);
}

void rr_th_cl_count(void *ctx, struct rr_conn_rpc *rpc)
{
	struct rr_th_cl *c = ctx;

	(void)rpc;
	pthread_mutex_lock(&c->lock);
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void rr_th_small_fill(struct rr_th_small *p, uint32_t xid)
{
	memset(p, 0, sizeof(*p));
	rr_put_be32(p->call, xid);
	rr_put_be32(p->call + 4, 0);   /* CALL */
	rr_put_be32(p->call + 8, 7);
	p->part = (struct rr_xprt_part){p->call, 12, false};
	p->r.xid = xid;
	p->r.parts = &p->part;
	p->r.nparts = 1;
	p->r.max_reply = 256;
}

void rr_th_small_submit(struct rr_th_cl *c, struct rr_th_small *p, uint32_t xid)
{
	rr_th_small_fill(p, xid);
	REQUIRE_EQ(rr_tp_client_submit(c->tp, &p->r), 0);
}

static void cl_release(void *arg)
{
	struct rr_th_cl *c = arg;

	c->cleanup_pushed = false;
	rr_tp_client_destroy(c->tp);
	c->tp = NULL;
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
}

/* Registers @c's stop for a fatal check, once, on the test's thread. */
static void cl_push_cleanup(struct rr_th_cl *c)
{
	if (!c->cleanup_pushed && rr_test_on_test_thread()) {
		rr_test_cleanup_push(&c->cleanup, cl_release, c);
		c->cleanup_pushed = true;
	}
}

int rr_th_cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port,
		   rr_tp_complete_fn complete)
{
	int rc;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	rc = rr_th_tp_client(conf, port, complete, c, &c->tp);
	if (rc == 0)
		cl_push_cleanup(c);
	return rc;
}

void rr_th_cl_stop(struct rr_th_cl *c)
{
	if (c->cleanup_pushed)
		rr_test_cleanup_pop(&c->cleanup);
	cl_release(c);
}

bool rr_th_cl_wait(struct rr_th_cl *c, unsigned n, unsigned ms)
{
	return rr_th_wait_count(&c->lock, &c->cond, &c->done, n, ms);
}

void rr_th_sq_init(struct rr_th_sq *sq, void (*answer)(struct rr_th_sq *, struct rr_conn_sreq *))
{
	pthread_mutex_init(&sq->lock, NULL);
	pthread_cond_init(&sq->cond, NULL);
	sq->answer = answer;
}

static void *sq_worker(void *arg)
{
	struct rr_th_sq *sq = arg;

	pthread_mutex_lock(&sq->lock);
	for (;;) {
		struct rr_conn_sreq *r;

		while (sq->head == sq->tail && !sq->stop)
			pthread_cond_wait(&sq->cond, &sq->lock);
		if (sq->head == sq->tail && sq->stop)
			break;
		r = sq->q[sq->head++ % RR_ARRAY_SIZE(sq->q)];
		pthread_mutex_unlock(&sq->lock);
		sq->answer(sq, r);
		pthread_mutex_lock(&sq->lock);
	}
	pthread_mutex_unlock(&sq->lock);
	return NULL;
}

void rr_th_sq_start(struct rr_th_sq *sq)
{
	pthread_create(&sq->worker, NULL, sq_worker, sq);
}

void rr_th_sq_recv(void *ctx, struct rr_conn_sreq *r)
{
	struct rr_th_sq *sq = ctx;

	pthread_mutex_lock(&sq->lock);
	if (sq->hold && sq->nheld < RR_ARRAY_SIZE(sq->held)) {
		sq->held[sq->nheld++] = r;
	} else {
		sq->q[sq->tail++ % RR_ARRAY_SIZE(sq->q)] = r;
		pthread_cond_broadcast(&sq->cond);
	}
	pthread_mutex_unlock(&sq->lock);
}

void rr_th_answer16(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	uint8_t hdr[16];
	struct rr_xprt_part part = {hdr, sizeof(hdr), false};

	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 8, 0);
	rr_put_be32(hdr + 12, 0x600d);
	(void)rr_tp_server_reply(s, r, &part, 1, NULL);
	rr_tp_server_done(s, r);
}

void rr_th_answer80(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	uint8_t hdr[80] = {0};
	struct rr_xprt_part part = {hdr, sizeof(hdr), false};

	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 12, 0x600d);
	(void)rr_tp_server_reply(s, r, &part, 1, NULL);
	rr_tp_server_done(s, r);
}

unsigned rr_th_sq_nheld(struct rr_th_sq *sq)
{
	unsigned n;

	pthread_mutex_lock(&sq->lock);
	n = sq->nheld;
	pthread_mutex_unlock(&sq->lock);
	return n;
}

void rr_th_sq_release_held(struct rr_th_sq *sq)
{
	pthread_mutex_lock(&sq->lock);
	sq->hold = false;
	for (unsigned i = 0; i < sq->nheld; i++)
		sq->q[sq->tail++ % RR_ARRAY_SIZE(sq->q)] = sq->held[i];
	sq->nheld = 0;
	pthread_cond_broadcast(&sq->cond);
	pthread_mutex_unlock(&sq->lock);
}

void rr_th_sq_stop(struct rr_th_sq *sq)
{
	rr_th_worker_stop(&sq->lock, &sq->cond, &sq->stop, sq->worker);
}

void rr_th_sq_destroy(struct rr_th_sq *sq)
{
	pthread_mutex_destroy(&sq->lock);
	pthread_cond_destroy(&sq->cond);
}

void rr_th_rogue_post_recv(struct rr_th_rogue *g, unsigned i)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->rbuf[i], 4096, rpcrdma_mr_lkey(g->rmr)};
	struct rpcrdma_recv_wr wr = {i, NULL, &sge, 1};

	REQUIRE_EQ(rpcrdma_post_recv(g->qp, &wr, NULL), 0);
}

static void rogue_release(struct rr_th_rogue *g);

static void rogue_cleanup(void *arg)
{
	rogue_release(arg);
}

int rr_th_rogue_open(struct rr_th_rogue *g, int port, const uint8_t *pd, uint16_t pdlen,
		     bool pull)
{
	struct rpcrdma_cq_attr ca = {64, NULL};
	struct rpcrdma_qp_attr qa = {0};
	struct rpcrdma_conn_param prm = {0};
	struct sockaddr_in a;
	struct rpcrdma_cm_event ev;

	memset(g, 0, sizeof(*g));
	REQUIRE_EQ(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &g->ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(g->ctx, &g->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(g->ctx, &ca, &g->cq), 0);
	qa.send_cq = qa.recv_cq = g->cq;
	qa.max_send_wr = 16;
	qa.max_recv_wr = 8;
	qa.max_send_sge = qa.max_recv_sge = 1;
	REQUIRE_EQ(rpcrdma_qp_create(g->pd, &qa, &g->qp), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->rbuf, sizeof(g->rbuf),
					 RPCRDMA_ACCESS_LOCAL_WRITE, &g->rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->sbuf, sizeof(g->sbuf),
					 RPCRDMA_ACCESS_LOCAL_WRITE, &g->smr), 0);
	if (pull)
		REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->pull, sizeof(g->pull),
						 RPCRDMA_ACCESS_LOCAL_WRITE, &g->pmr), 0);
	for (unsigned i = 0; i < 8; i++)
		rr_th_rogue_post_recv(g, i);
	REQUIRE_EQ(rpcrdma_cm_channel_create(g->ctx, &g->ch), 0);
	loopback(&a, port);
	prm.private_data = pd;
	prm.private_data_len = pdlen;
	prm.responder_resources = 4;
	prm.initiator_depth = 4;
	REQUIRE_EQ(rpcrdma_connect(g->ch, g->qp, (struct sockaddr *)&a, sizeof(a), &prm, g,
				   &g->id), 0);
	for (int t = 0; t < 300; t++) {
		if (rpcrdma_cm_get_event(g->ch, &ev) == 0) {
			if (ev.type != RPCRDMA_CM_ESTABLISHED)
				return -ECONNREFUSED;
			rr_test_cleanup_push(&g->cleanup, rogue_cleanup, g);
			g->cleanup_pushed = true;
			return 0;
		}
		rr_th_sleep_ms(10);
	}
	return -ETIMEDOUT;
}

void rr_th_rogue_close(struct rr_th_rogue *g)
{
	if (g->cleanup_pushed)
		rr_test_cleanup_pop(&g->cleanup);
	rogue_release(g);
}

/* rr_th_rogue_close without the pop: its cleanup (popped by the runner),
 * and its body. */
static void rogue_release(struct rr_th_rogue *g)
{
	g->cleanup_pushed = false;
	/* the disconnect may find the connection gone already; every
	 * destroy must succeed (one that failed left the rogue's context,
	 * default allocator, to a leak report at exit) */
	(void)rpcrdma_disconnect(g->id);
	CHECK_EQ(rpcrdma_cm_id_destroy(g->id), 0);
	CHECK_EQ(rpcrdma_qp_destroy(g->qp), 0);
	CHECK_EQ(rpcrdma_dereg_mr(g->rmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(g->smr), 0);
	if (g->pmr)
		CHECK_EQ(rpcrdma_dereg_mr(g->pmr), 0);
	CHECK_EQ(rpcrdma_cq_destroy(g->cq), 0);
	CHECK_EQ(rpcrdma_pd_free(g->pd), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(g->ch), 0);
	CHECK_EQ(rpcrdma_close(g->ctx), 0);
}

int rr_th_h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v + 1);
	return RPCRDMA_SVC_OK;
}

void rr_th_echo(struct rpcrdma_client *c, uint32_t proc, uint32_t v)
{
	struct rpcrdma_call *call;
	uint32_t r = 0;

	REQUIRE_EQ(rpcrdma_call_create(c, proc, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r), 0);
	CHECK_EQ(r, v + 1);
	rpcrdma_call_destroy(call);
}

int rr_th_h_bulk_seeded(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	const void *p;
	uint32_t seed, len;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(d, &seed) || rpcrdma_xdr_get_ddp(d, &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	for (uint32_t i = 0; i < len; i++)
		if (((const uint8_t *)p)[i] != (uint8_t)(seed + i))
			return RPCRDMA_SVC_SYSTEM_ERR;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len);
	rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), p, len);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), 0x7a11);
	return RPCRDMA_SVC_OK;
}

/* A signaled Send of @sge, With Invalidate of @inv when nonzero. */
static void send_wr_init(struct rpcrdma_send_wr *wr, uint64_t id, const struct rpcrdma_sge *sge,
			 uint32_t inv)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
	wr->u.send.invalidate_stag = inv;
	wr->flags = RPCRDMA_SEND_SIGNALED;
}

/* A message that came while only a Send was waited for (kept, in order):
 * copied to @out and its Receive posted again; its length, or -2 when none
 * is kept. */
static int take_pending(struct rr_th_rogue *g, uint8_t *out)
{
	unsigned idx;
	int got;

	if (!g->npend)
		return -2;
	idx = g->pend_idx[0];
	got = (int)g->pend_len[0];
	memcpy(out, g->rbuf[idx], (size_t)got);
	rr_th_rogue_post_recv(g, idx);
	g->npend--;
	memmove(g->pend_idx, g->pend_idx + 1, g->npend * sizeof(g->pend_idx[0]));
	memmove(g->pend_len, g->pend_len + 1, g->npend * sizeof(g->pend_len[0]));
	return got;
}

/* Waits up to @ms for a Receive (copied to @out), or with @out NULL for a
 * Send completion: a message that comes meanwhile is kept for the next
 * wait for one. @watch_cm: a DISCONNECTED or ERROR event on the channel
 * also ends it (-1). */
static int rogue_wait(struct rr_th_rogue *g, uint8_t *out, unsigned ms, bool watch_cm)
{
	struct rpcrdma_cm_event ev;
	bool sent = false;

	for (unsigned t = 0; t < ms; t += 2) {
		struct rpcrdma_wc wc[4];
		int n = rpcrdma_cq_poll(g->cq, 4, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != RPCRDMA_WC_SUCCESS)
				return -1;
			if (wc[i].opcode == RPCRDMA_WC_RECV) {
				unsigned idx = (unsigned)wc[i].wr_id;
				int l = (int)wc[i].byte_len;

				if (!out) {
					if (g->npend < RR_ARRAY_SIZE(g->pend_idx)) {
						g->pend_idx[g->npend] = idx;
						g->pend_len[g->npend++] = (unsigned)l;
					}
					continue;
				}
				memcpy(out, g->rbuf[idx], (size_t)l);
				rr_th_rogue_post_recv(g, idx);
				return l;
			} else {
				sent = true;
			}
		}
		if (!out && sent)
			return 0;
		if (watch_cm && rpcrdma_cm_get_event(g->ch, &ev) == 0 &&
		    (ev.type == RPCRDMA_CM_DISCONNECTED || ev.type == RPCRDMA_CM_ERROR)) {
			g->disconnected = true;
			return -1;
		}
		rr_th_sleep_ms(2);
	}
	return 0;
}

/* The rogue's Send and wait: rr_th_rogue_send. A message that came while
 * an earlier call waited for its Send only is the answer now (then only
 * the Send's completion is waited for). */
static int rogue_send_wait(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint32_t inv,
			   uint8_t *out, unsigned ms, bool watch_cm)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->sbuf, (uint32_t)len,
				  rpcrdma_mr_lkey(g->smr)};
	struct rpcrdma_send_wr wr;
	int got = -2, rc;

	memcpy(g->sbuf, msg, len);
	send_wr_init(&wr, 1000, &sge, inv);
	if (rpcrdma_post_send(g->qp, &wr, NULL))
		return -1;
	if (out && (got = take_pending(g, out)) >= 0)
		out = NULL;
	rc = rogue_wait(g, out, ms, watch_cm);
	return got >= 0 && rc >= 0 ? got : rc;
}

int rr_th_rogue_send(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint32_t inv,
		     uint8_t *out, unsigned ms)
{
	return rogue_send_wait(g, msg, len, inv, out, ms, false);
}

int rr_th_rogue_xchg(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint8_t *out,
		     unsigned ms)
{
	return rogue_send_wait(g, msg, len, 0, out, ms, true);
}

int rr_th_rogue_recv(struct rr_th_rogue *g, uint8_t *out, unsigned ms)
{
	int got = take_pending(g, out);

	return got >= 0 ? got : rogue_wait(g, out, ms, false);
}

int rr_th_rogue_read(struct rr_th_rogue *g, uint32_t stag, uint64_t off, uint32_t len,
		     unsigned ms)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->pull, len, rpcrdma_mr_lkey(g->pmr)};
	struct rpcrdma_send_wr wr;
	uint64_t end = rr_now_ns(NULL) + (uint64_t)ms * 1000000u;

	REQUIRE(g->pmr && len <= sizeof(g->pull));
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2000;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = RPCRDMA_WR_RDMA_READ;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	wr.u.rdma.stag = stag;
	wr.u.rdma.remote_offset = off;
	if (rpcrdma_post_send(g->qp, &wr, NULL))
		return RPCRDMA_WC_WR_FLUSH_ERR;
	for (;;) {
		uint64_t now = rr_now_ns(NULL);
		struct rpcrdma_wc wc;

		if (now >= end)
			return -ETIMEDOUT;
		if (rpcrdma_cq_wait(g->cq, 1, &wc, (int)((end - now) / 1000000u) + 1) != 1)
			continue;
		if (wc.status == RPCRDMA_WC_SUCCESS && wc.opcode == RPCRDMA_WC_RECV) {
			if (g->npend < RR_ARRAY_SIZE(g->pend_idx)) {   /* for the next wait */
				g->pend_idx[g->npend] = (unsigned)wc.wr_id;
				g->pend_len[g->npend++] = wc.byte_len;
			}
			continue;
		}
		if (wc.wr_id == 2000 || wc.status != RPCRDMA_WC_SUCCESS)
			return (int)wc.status;
	}
}

/* ---- the rogue responder ---- */

static void rresp_release(void *arg);

int rr_th_rresp_open(struct rr_th_rresp *g)
{
	struct sockaddr_in a;
	struct sockaddr_storage ss;
	int rc;

	memset(g, 0, sizeof(*g));
	g->data = calloc(1, RR_TH_RRESP_DATA);
	REQUIRE(g->data);
	REQUIRE_EQ(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &g->ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(g->ctx, &g->pd), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->rbuf, sizeof(g->rbuf),
					 RPCRDMA_ACCESS_LOCAL_WRITE, &g->rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->sbuf, sizeof(g->sbuf),
					 RPCRDMA_ACCESS_LOCAL_WRITE, &g->smr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(g->pd, g->data, RR_TH_RRESP_DATA,
					 RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE |
						 RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_MW_BIND,
					 &g->dmr), 0);
	REQUIRE_EQ(rpcrdma_mw_alloc(g->pd, &g->mw), 0);
	g->data_stag = rpcrdma_mr_rkey(g->dmr);
	REQUIRE_EQ(rpcrdma_cm_channel_create(g->ctx, &g->ch), 0);
	loopback(&a, 0);
	rc = rpcrdma_listen(g->ch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &g->lid);
	if (rc)
		return rc;
	REQUIRE_EQ(rpcrdma_cm_local_addr(g->lid, &ss), 0);
	g->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	rr_test_cleanup_push(&g->cleanup, rresp_release, g);
	return 0;
}

void rr_th_rresp_drop(struct rr_th_rresp *g)
{
	if (g->id) {
		(void)rpcrdma_disconnect(g->id);
		CHECK_EQ(rpcrdma_cm_id_destroy(g->id), 0);
		g->id = NULL;
	}
	if (g->qp) {
		CHECK_EQ(rpcrdma_qp_destroy(g->qp), 0);
		g->qp = NULL;
	}
	if (g->cq) {
		CHECK_EQ(rpcrdma_cq_destroy(g->cq), 0);
		g->cq = NULL;
	}
	g->npend = 0;
	g->broken = false;
}

void rr_th_rresp_close(struct rr_th_rresp *g)
{
	rr_test_cleanup_pop(&g->cleanup);
	rresp_release(g);
}

/* rr_th_rresp_close without the pop: its cleanup, and its body. */
static void rresp_release(void *arg)
{
	struct rr_th_rresp *g = arg;
	struct rpcrdma_cm_event ev;

	rr_th_rresp_drop(g);
	while (rpcrdma_cm_get_event(g->ch, &ev) == 0)
		if (ev.type == RPCRDMA_CM_CONNECT_REQUEST)
			(void)rpcrdma_reject(ev.id, NULL, 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(g->lid), 0);
	CHECK_EQ(rpcrdma_mw_free(g->mw), 0);
	CHECK_EQ(rpcrdma_dereg_mr(g->rmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(g->smr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(g->dmr), 0);
	CHECK_EQ(rpcrdma_pd_free(g->pd), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(g->ch), 0);
	CHECK_EQ(rpcrdma_close(g->ctx), 0);
	free(g->data);
	g->data = NULL;
}

/* The next CM event of @ch before @end (rr_now_ns; poll(2) on its fd): 0
 * or -ETIMEDOUT. */
static int cm_event_until(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev,
			  uint64_t end)
{
	for (;;) {
		struct pollfd p = {.fd = rpcrdma_cm_channel_fd(ch), .events = POLLIN};
		uint64_t now;

		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return 0;
		now = rr_now_ns(NULL);
		if (now >= end)
			return -ETIMEDOUT;
		(void)poll(&p, 1, (int)((end - now) / 1000000u) + 1);
	}
}

static void rresp_post_recv(struct rr_th_rresp *g, unsigned i)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->rbuf[i], 4096, rpcrdma_mr_lkey(g->rmr)};
	struct rpcrdma_recv_wr wr = {i, NULL, &sge, 1};

	REQUIRE_EQ(rpcrdma_post_recv(g->qp, &wr, NULL), 0);
}

int rr_th_rresp_accept(struct rr_th_rresp *g, const uint8_t *pd, uint16_t pdlen, unsigned ms)
{
	struct rpcrdma_cq_attr ca = {256, NULL};
	struct rpcrdma_qp_attr qa = {0};
	struct rpcrdma_conn_param prm = {0};
	struct rpcrdma_cm_event ev;
	uint64_t end = rr_now_ns(NULL) + (uint64_t)ms * 1000000u;
	int rc;

	do {
		if (cm_event_until(g->ch, &ev, end))
			return -ETIMEDOUT;
	} while (ev.type != RPCRDMA_CM_CONNECT_REQUEST);
	rr_th_rresp_drop(g);
	g->req = ev;
	REQUIRE_EQ(rpcrdma_cq_create(g->ctx, &ca, &g->cq), 0);
	qa.send_cq = qa.recv_cq = g->cq;
	qa.max_send_wr = 64;
	qa.max_recv_wr = RR_TH_RRESP_RECVS;
	qa.max_send_sge = qa.max_recv_sge = 1;
	REQUIRE_EQ(rpcrdma_qp_create(g->pd, &qa, &g->qp), 0);
	REQUIRE(g->recvs <= RR_TH_RRESP_RECVS);
	for (unsigned i = 0; i < (g->recvs ? g->recvs : RR_TH_RRESP_RECVS); i++)
		rresp_post_recv(g, i);
	g->id = ev.id;
	prm.private_data = pd;
	prm.private_data_len = pdlen;
	prm.responder_resources = 16;
	prm.initiator_depth = 16;
	rc = rpcrdma_accept(g->id, g->qp, &prm);
	if (rc)
		return rc;
	for (;;) {
		if (cm_event_until(g->ch, &ev, end))
			return -ETIMEDOUT;
		if (ev.id == g->id && ev.type == RPCRDMA_CM_ESTABLISHED)
			break;
		if (ev.id == g->id)
			return -ECONNRESET;
	}
	g->conns++;
	return 0;
}

struct rresp_conn {
	int (*connect)(void *arg);
	void *arg;
	int rc;
};

/* Not the test's thread: no REQUIRE. */
static void *rresp_connect_main(void *a)
{
	struct rresp_conn *x = a;

	x->rc = x->connect(x->arg);
	return NULL;
}

int rr_th_rresp_connect_with(struct rr_th_rresp *g, int (*connect)(void *arg), void *arg,
			     const uint8_t *pd, uint16_t pdlen, unsigned ms)
{
	struct rresp_conn x = {connect, arg, -1};
	pthread_t th;
	int rc;

	REQUIRE_EQ(pthread_create(&th, NULL, rresp_connect_main, &x), 0);
	rc = rr_th_rresp_accept(g, pd, pdlen, ms);
	REQUIRE_EQ(pthread_join(th, NULL), 0);
	return rc ? rc : x.rc;
}

struct cl_conn {
	struct rr_th_cl *c;
	const struct rr_tp_conf *conf;
	rr_tp_complete_fn complete;
	int port;
};

/* rr_th_cl_start has no REQUIRE. */
static int cl_connect(void *a)
{
	struct cl_conn *x = a;

	return rr_th_cl_start(x->c, x->conf, x->port, x->complete);
}

int rr_th_rresp_connect(struct rr_th_rresp *g, struct rr_th_cl *c, const struct rr_tp_conf *conf,
			rr_tp_complete_fn complete, const uint8_t *pd, uint16_t pdlen)
{
	struct cl_conn x = {c, conf, complete, g->port};
	int rc = rr_th_rresp_connect_with(g, cl_connect, &x, pd, pdlen,
					  (conf->connect_timeout_ms ? conf->connect_timeout_ms
								    : 5000) + 1000);

	/* started on another thread: registered here, on the test's */
	if (rc == 0)
		cl_push_cleanup(c);
	return rc;
}

/* One completion of the rogue's CQ within @ms: 1, 0 (none), or -EPIPE
 * after a failed one (kept in *@wc). Receives are queued in pend[]. */
static int rresp_wc(struct rr_th_rresp *g, struct rpcrdma_wc *wc, unsigned ms)
{
	int n = rpcrdma_cq_wait(g->cq, 1, wc, (int)ms);

	if (n <= 0)
		return 0;
	if (wc->status != RPCRDMA_WC_SUCCESS) {
		g->broken = true;
		return -EPIPE;
	}
	if (wc->opcode == RPCRDMA_WC_RECV && g->npend < RR_TH_RRESP_RECVS) {
		g->pend_idx[g->npend] = (uint32_t)wc->wr_id;
		g->pend_len[g->npend++] = wc->byte_len;
	}
	return 1;
}

int rr_th_rresp_recv(struct rr_th_rresp *g, uint8_t *out, unsigned ms)
{
	uint64_t end = rr_now_ns(NULL) + (uint64_t)ms * 1000000u;
	struct rpcrdma_wc wc;

	while (!g->npend) {
		uint64_t now = rr_now_ns(NULL);

		if (g->broken)
			return -EPIPE;
		if (now >= end)
			return -ETIMEDOUT;
		if (rresp_wc(g, &wc, (unsigned)((end - now) / 1000000u) + 1) < 0)
			return -EPIPE;
	}
	{
		uint32_t idx = g->pend_idx[0], len = g->pend_len[0];

		memcpy(out, g->rbuf[idx], RR_MIN(len, 4096u));
		g->npend--;
		memmove(g->pend_idx, g->pend_idx + 1, g->npend * sizeof(g->pend_idx[0]));
		memmove(g->pend_len, g->pend_len + 1, g->npend * sizeof(g->pend_len[0]));
		rresp_post_recv(g, idx);
		return (int)len;
	}
}

/* Posts @wr and waits up to @ms for the completion of the WR named
 * @want_id: its status, -ETIMEDOUT, or the failed completion's status. */
static int rresp_post_wait(struct rr_th_rresp *g, struct rpcrdma_send_wr *wr, uint64_t want_id,
			   uint32_t *vend, unsigned ms)
{
	uint64_t end = rr_now_ns(NULL) + (uint64_t)ms * 1000000u;
	struct rpcrdma_wc wc;

	if (g->broken || rpcrdma_post_send(g->qp, wr, NULL))
		return RPCRDMA_WC_WR_FLUSH_ERR;
	for (;;) {
		uint64_t now = rr_now_ns(NULL);
		int r;

		if (now >= end)
			return -ETIMEDOUT;
		r = rresp_wc(g, &wc, (unsigned)((end - now) / 1000000u) + 1);
		if (r == 0)
			continue;
		if (wc.opcode == RPCRDMA_WC_RECV && r > 0)
			continue;
		if (r < 0 || wc.wr_id == want_id) {
			if (vend)
				*vend = wc.vendor_err;
			return (int)wc.status;
		}
	}
}

int rr_th_rresp_send(struct rr_th_rresp *g, const uint8_t *m, size_t len, uint32_t inv,
		     unsigned ms)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->sbuf, (uint32_t)len,
				  rpcrdma_mr_lkey(g->smr)};
	struct rpcrdma_send_wr wr;
	int st;

	REQUIRE(len <= sizeof(g->sbuf));
	memcpy(g->sbuf, m, len);
	send_wr_init(&wr, 7001, &sge, inv);
	st = rresp_post_wait(g, &wr, wr.wr_id, NULL, ms);
	return st == RPCRDMA_WC_SUCCESS ? 0 : st == -ETIMEDOUT ? -ETIMEDOUT : -EPIPE;
}

uint32_t rr_th_rresp_window(struct rr_th_rresp *g, uint32_t off, uint32_t len, uint64_t *to)
{
	struct rpcrdma_send_wr b;

	REQUIRE(off <= RR_TH_RRESP_DATA && len <= RR_TH_RRESP_DATA - off);
	/* a fresh window each time (the last one may still be bound) */
	REQUIRE_EQ(rpcrdma_mw_free(g->mw), 0);
	REQUIRE_EQ(rpcrdma_mw_alloc(g->pd, &g->mw), 0);
	memset(&b, 0, sizeof(b));
	b.wr_id = 7004;
	b.opcode = RPCRDMA_WR_BIND_MW;
	b.flags = RPCRDMA_SEND_SIGNALED;
	b.u.bind.mw = g->mw;
	b.u.bind.mr = g->dmr;
	b.u.bind.addr = (uint64_t)(uintptr_t)(g->data + off);
	b.u.bind.length = len;
	b.u.bind.access = RPCRDMA_ACCESS_REMOTE_READ;
	REQUIRE_EQ(rresp_post_wait(g, &b, b.wr_id, NULL, 5000), RPCRDMA_WC_SUCCESS);
	*to = rpcrdma_mw_remote_offset(g->mw);
	return rpcrdma_mw_rkey(g->mw);
}

int rr_th_hdr_call(struct rr_hdr *h, const uint8_t *m, int n, uint32_t inline_max)
{
	struct rr_hdr_limits lim;

	rr_xprt_hdr_limits(&lim, inline_max, 0, false);
	return rr_hdr_decode(h, m, n > 0 ? (size_t)n : 0, RR_HDR_DIR_CALL, &lim);
}

int rr_th_hdr_raw(const struct rr_hdr *h, uint8_t *m, size_t cap)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, m, cap);
	return rr_hdr_encode_raw(&e, h) ? -1 : (int)rr_xdr_enc_len(&e);
}

int rr_th_rresp_rdma(struct rr_th_rresp *g, bool write, uint32_t stag, uint64_t to, uint32_t len,
		     uint32_t loff, uint32_t *vend, unsigned ms)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)(g->data + loff), len,
				  rpcrdma_mr_lkey(g->dmr)};
	struct rpcrdma_send_wr w, r;

	REQUIRE(loff <= RR_TH_RRESP_DATA && len <= RR_TH_RRESP_DATA - loff);
	*vend = 0;
	memset(&w, 0, sizeof(w));
	memset(&r, 0, sizeof(r));
	r.wr_id = 7003;
	r.opcode = RPCRDMA_WR_RDMA_READ;
	r.flags = RPCRDMA_SEND_SIGNALED;
	if (write) {
		/* the fence: zero bytes, nothing named but the Read itself */
		w.wr_id = 7002;
		w.opcode = RPCRDMA_WR_RDMA_WRITE;
		w.sg_list = &sge;
		w.num_sge = 1;
		w.u.rdma.stag = stag;
		w.u.rdma.remote_offset = to;
		w.next = &r;
		r.u.rdma.stag = stag;
		r.u.rdma.remote_offset = to;
		return rresp_post_wait(g, &w, r.wr_id, vend, ms);
	}
	r.sg_list = &sge;
	r.num_sge = 1;
	r.u.rdma.stag = stag;
	r.u.rdma.remote_offset = to;
	return rresp_post_wait(g, &r, r.wr_id, vend, ms);
}
