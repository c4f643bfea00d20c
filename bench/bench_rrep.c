/* SPDX-License-Identifier: BSD-2-Clause */
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
 * Usage: bench_rrep [iters] [large_every] [rounds] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "transport/rdma/tp.h"

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
	struct rr_conn_sreq *q[256];
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
		struct rr_conn_sreq *r;
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

static void srv_recv(void *ctx, struct rr_conn_sreq *r)
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

static void cl_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct cl *c = ctx;

	(void)r;
	pthread_mutex_lock(&c->lock);
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

struct result {
	double us, regs_per_1000, med_small, med_large;
	uint64_t reply_chunks, pulled, ok;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, long n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return (double)v[n / 2] / 1000.0;
}

static int run(bool rrep, long iters, long large_every, struct result *out)
{
	struct rr_tp_conf sc, cc;
	struct sockaddr_in a = {0};
	struct srv *s = calloc(1, sizeof(*s));
	struct cl c;
	struct rr_tp_client *tp;
	struct rr_xprt_stats st;
	uint64_t t0 = 0;
	uint64_t *lat_s = calloc((size_t)iters + 1, sizeof(uint64_t));
	uint64_t *lat_l = calloc((size_t)iters + 1, sizeof(uint64_t));
	long ns = 0, nl = 0;
	int rc;

	if (!s || !lat_s || !lat_l)
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
		struct rr_conn_rpc rpc;
		uint8_t call[16];
		struct rr_xprt_part part = {call, 16, false};
		uint32_t n = (i % large_every) == large_every - 1 ? 20000 : 200;
		uint64_t t1;

		if (i == 0)
			t0 = now_ns();
		t1 = now_ns();
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
		if (i >= 0) {
			if (n == 200)
				lat_s[ns++] = now_ns() - t1;
			else
				lat_l[nl++] = now_ns() - t1;
		}
		out->ok += rpc.status == 0 && rpc.reply_len == 16 + n;
		rr_tp_client_release_reply(tp, &rpc);
		if (i == -1)
			rr_tp_client_stats(tp, &st);
	}
	out->us = (double)(now_ns() - t0) / 1000.0 / (double)iters;
	out->med_small = median_us(lat_s, ns);
	out->med_large = median_us(lat_l, nl);
	free(lat_s);
	free(lat_l);
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
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	double ratio[16], rs[16], rl[16];

	if (iters <= 0 || every <= 0 || rounds <= 0 || rounds > 16)
		return 2;
	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT)) {
		printf("soft provider not built in\n");
		return 0;
	}
	printf("workload: %ld sync RPCs per run, max Reply 64 KiB, 1 in %ld Replies 20 KiB, "
	       "others 200 B; %d alternating rounds\n", iters, every, rounds);
	printf("%-5s %-32s %9s %11s %11s %10s %8s %6s\n", "round", "", "mean us", "med small",
	       "med large", "regs/1000", "replychk", "pulled");
	for (int r = 0; r < rounds; r++) {
		struct result a, b;

		if (run(false, iters, every, &a) || run(true, iters, every, &b)) {
			printf("setup failed\n");
			return 1;
		}
		printf("%-5d %-32s %9.1f %11.1f %11.1f %10.1f %8llu %6llu (ok %llu)\n", r,
		       "RFC 8166: always a Reply chunk", a.us, a.med_small, a.med_large,
		       a.regs_per_1000, (unsigned long long)a.reply_chunks,
		       (unsigned long long)a.pulled, (unsigned long long)a.ok);
		printf("%-5d %-32s %9.1f %11.1f %11.1f %10.1f %8llu %6llu (ok %llu)\n", r,
		       "reliable reply (Read chunk)", b.us, b.med_small, b.med_large,
		       b.regs_per_1000, (unsigned long long)b.reply_chunks,
		       (unsigned long long)b.pulled, (unsigned long long)b.ok);
		ratio[r] = b.us / a.us;
		rs[r] = b.med_small / a.med_small;
		rl[r] = b.med_large / a.med_large;
		if (r == 0)
			printf("registrations avoided per 1000 RPCs: %.1f\n",
			       a.regs_per_1000 - b.regs_per_1000);
	}
	for (int i = 0; i < rounds; i++)
		for (int j = i + 1; j < rounds; j++) {
			double t;
#define SWAP(v) do { if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t; } } while (0)
			SWAP(ratio);
			SWAP(rs);
			SWAP(rl);
		}
	printf("median per-round ratios (reliable / RFC 8166): mean latency %.2f, "
	       "small-reply median %.2f, large-reply median %.2f\n",
	       ratio[rounds / 2], rs[rounds / 2], rl[rounds / 2]);
	return 0;
}
