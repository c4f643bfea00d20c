/* Benchmark of reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply-04,
 * section 5.1.1) on a directory-listing-like workload: the largest possible
 * Reply is large (64 KiB) but real Replies are usually small (9 in 10 are
 * 200 bytes, 1 in 10 is 20 KiB). Compares (A) RFC 8166 -- the requester must
 * provide a Reply chunk for every Call because the maximum exceeds the
 * 4096-byte inline threshold -- with (B) reliable reply negotiated, where the
 * requester provides none (draft 5.3.1: maximum large, minimum small) and the
 * rare large Reply comes as a responder-provided Read chunk. Prints requester
 * registrations per 1000 RPCs (Reply chunks; in B the pull sink of each Read
 * too), mean latency per synchronous RPC, and the ratios; over the software
 * iWARP provider on loopback. Timing is never asserted.
 * Usage: bench_rrep [iters] [large_every] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "transport/rdma_tp.h"

#define MAGIC 0xC0FFEEu

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct srv {
	struct rr_tp_server *tp;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rr_tp_sreq *q[256];
	unsigned head, tail;
	bool stop;
	pthread_t worker;
	uint8_t filler[65536];
};

static void *srv_worker(void *arg)
{
	struct srv *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct rr_tp_sreq *r;
		uint8_t hdr[16];
		struct rr_xprt_part parts[2];
		uint32_t n;

		while (s->head == s->tail && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->head == s->tail)
			break;
		r = s->q[s->head++ % 256];
		pthread_mutex_unlock(&s->lock);
		n = r->len >= 12 ? rr_get_be32(r->msg + 8) : 0;
		if (n > sizeof(s->filler))
			n = 0;
		rr_put_be32(hdr, r->xid);
		rr_put_be32(hdr + 4, 1);
		rr_put_be32(hdr + 8, 0);
		rr_put_be32(hdr + 12, n);
		parts[0] = (struct rr_xprt_part){hdr, 16, false};
		parts[1] = (struct rr_xprt_part){s->filler, n, false};
		(void)rr_tp_server_reply(s->tp, r, parts, 2, NULL);
		rr_tp_server_done(s->tp, r);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void srv_recv(void *ctx, struct rr_tp_sreq *r)
{
	struct srv *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->q[s->tail++ % 256] = r;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

struct cl {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done;
};

static void cl_complete(void *ctx, struct rr_tp_rpc *r)
{
	struct cl *c = ctx;

	(void)r;
	pthread_mutex_lock(&c->lock);
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

struct result {
	double us, regs_per_1000;
	uint64_t reply_chunks, pulled, ok;
};

static int run(bool rrep, long iters, long large_every, struct result *out)
{
	struct rr_tp_conf sc, cc;
	struct sockaddr_in a = {0};
	struct srv *s = calloc(1, sizeof(*s));
	struct cl c;
	struct rr_tp_client *tp;
	struct rr_xprt_stats st;
	uint64_t t0 = 0;
	int rc;

	if (!s)
		return -ENOMEM;
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	if (!rrep)
		sc.ext_caps = cc.ext_caps = 0;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	c.done = 0;
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rc = rr_tp_server_create(&sc, (struct sockaddr *)&a, sizeof(a), srv_recv, s, &s->tp);
	if (rc)
		return rc;
	pthread_create(&s->worker, NULL, srv_worker, s);
	a.sin_port = htons((uint16_t)rr_tp_server_port(s->tp));
	rc = rr_tp_client_create(&cc, (struct sockaddr *)&a, sizeof(a), cl_complete, &c, &tp);
	if (rc)
		return rc;
	out->ok = 0;
	for (long i = -50; i < iters; i++) {   /* 50 warm-up calls */
		struct rr_tp_rpc rpc;
		uint8_t call[16];
		struct rr_xprt_part part = {call, 16, false};
		uint32_t n = (i % large_every) == large_every - 1 ? 20000 : 200;

		if (i == 0)
			t0 = now_ns();
		memset(&rpc, 0, sizeof(rpc));
		rr_put_be32(call, 0x7000000u + (uint32_t)(i + 100));
		rr_put_be32(call + 4, 0);
		rr_put_be32(call + 8, n);
		rr_put_be32(call + 12, MAGIC);
		rpc.xid = rr_get_be32(call);
		rpc.parts = &part;
		rpc.nparts = 1;
		rpc.max_reply = 65536 + 16;     /* the largest listing */
		rpc.min_reply = 16;
		if (rr_tp_client_submit(tp, &rpc))
			break;
		rr_tp_client_wait(tp, &rpc, 5000);
		pthread_mutex_lock(&c.lock);
		while (c.done < (unsigned)(i + 51))
			pthread_cond_wait(&c.cond, &c.lock);
		pthread_mutex_unlock(&c.lock);
		out->ok += rpc.status == 0 && rpc.reply_len == 16 + n;
		rr_tp_client_release_reply(tp, &rpc);
		if (i == -1)
			rr_tp_client_stats(tp, &st);
	}
	out->us = (double)(now_ns() - t0) / 1000.0 / (double)iters;
	{
		struct rr_xprt_stats st2;

		rr_tp_client_stats(tp, &st2);
		out->reply_chunks = st2.reply_chunks - st.reply_chunks;
		out->pulled = st2.rrep_pulled - st.rrep_pulled;
	}
	out->regs_per_1000 = (double)(out->reply_chunks + out->pulled) * 1000.0 / (double)iters;
	rr_tp_client_destroy(tp);
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->worker, NULL);
	rr_tp_server_destroy(s->tp);
	free(s);
	return 0;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000;
	long every = argc > 2 ? atol(argv[2]) : 10;
	struct result a, b;

	if (iters <= 0 || every <= 0)
		return 2;
	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT)) {
		printf("soft provider not built in\n");
		return 0;
	}
	if (run(false, iters, every, &a) || run(true, iters, every, &b)) {
		printf("setup failed\n");
		return 1;
	}
	printf("workload: %ld sync RPCs, max Reply 64 KiB, 1 in %ld Replies 20 KiB, others 200 B\n",
	       iters, every);
	printf("%-34s %10s %12s %10s %8s\n", "", "us/RPC", "regs/1000", "replychk", "pulled");
	printf("%-34s %10.1f %12.1f %10llu %8llu  (ok %llu)\n", "RFC 8166: always a Reply chunk",
	       a.us, a.regs_per_1000, (unsigned long long)a.reply_chunks,
	       (unsigned long long)a.pulled, (unsigned long long)a.ok);
	printf("%-34s %10.1f %12.1f %10llu %8llu  (ok %llu)\n", "reliable reply (Read chunk)",
	       b.us, b.regs_per_1000, (unsigned long long)b.reply_chunks,
	       (unsigned long long)b.pulled, (unsigned long long)b.ok);
	printf("registrations avoided per 1000 RPCs: %.1f; latency ratio (reliable/RFC 8166): %.2f\n",
	       a.regs_per_1000 - b.regs_per_1000, b.us / a.us);
	return 0;
}
