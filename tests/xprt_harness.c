/* Shared scaffolding of the end-to-end transport tests (see xprt_harness.h):
 * loopback rr_tp endpoints over the software iWARP provider, waits and the
 * ECHO/BULK handlers. No TEST() here. */
#include "xprt_harness.h"
#include "test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

long long rr_th_thread_wakeups(const char *name)
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

int rr_th_cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port,
		   rr_tp_complete_fn complete)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	return rr_th_tp_client(conf, port, complete, c, &c->tp);
}

void rr_th_cl_stop(struct rr_th_cl *c)
{
	rr_tp_client_destroy(c->tp);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
}

bool rr_th_cl_wait(struct rr_th_cl *c, unsigned n, unsigned ms)
{
	return rr_th_wait_count(&c->lock, &c->cond, &c->done, n, ms);
}

void rr_th_sq_init(struct rr_th_sq *sq, void (*answer)(struct rr_th_sq *, struct rr_tp_sreq *))
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
		struct rr_tp_sreq *r;

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

void rr_th_sq_recv(void *ctx, struct rr_tp_sreq *r)
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
		if (rpcrdma_cm_get_event(g->ch, &ev) == 0)
			return ev.type == RPCRDMA_CM_ESTABLISHED ? 0 : -ECONNREFUSED;
		rr_th_sleep_ms(10);
	}
	return -ETIMEDOUT;
}

void rr_th_rogue_close(struct rr_th_rogue *g)
{
	(void)rpcrdma_disconnect(g->id);
	(void)rpcrdma_cm_id_destroy(g->id);
	(void)rpcrdma_qp_destroy(g->qp);
	(void)rpcrdma_dereg_mr(g->rmr);
	(void)rpcrdma_dereg_mr(g->smr);
	if (g->pmr)
		(void)rpcrdma_dereg_mr(g->pmr);
	(void)rpcrdma_cq_destroy(g->cq);
	(void)rpcrdma_pd_free(g->pd);
	(void)rpcrdma_cm_channel_destroy(g->ch);
	(void)rpcrdma_close(g->ctx);
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

/* The rogue's Send and wait: rr_th_rogue_send; @watch_cm: a DISCONNECTED
 * or ERROR event on the channel also ends it (-1). */
static int rogue_send_wait(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint32_t inv,
			   uint8_t *out, unsigned ms, bool watch_cm)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)g->sbuf, (uint32_t)len,
				  rpcrdma_mr_lkey(g->smr)};
	struct rpcrdma_send_wr wr;
	struct rpcrdma_cm_event ev;
	bool sent = false;

	memcpy(g->sbuf, msg, len);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1000;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
	wr.u.send.invalidate_stag = inv;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	if (rpcrdma_post_send(g->qp, &wr, NULL))
		return -1;
	for (unsigned t = 0; t < ms; t += 2) {
		struct rpcrdma_wc wc[4];
		int n = rpcrdma_cq_poll(g->cq, 4, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != RPCRDMA_WC_SUCCESS)
				return -1;
			if (wc[i].opcode == RPCRDMA_WC_RECV) {
				unsigned idx = (unsigned)wc[i].wr_id;
				int l = (int)wc[i].byte_len;

				if (out)
					memcpy(out, g->rbuf[idx], (size_t)l);
				rr_th_rogue_post_recv(g, idx);
				if (out)
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
