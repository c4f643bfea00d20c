/* SPDX-License-Identifier: BSD-2-Clause */
/* Micro-benchmark of the RPC-over-RDMA v1 header codec (RFC 8166 4.2):
 * nanoseconds per encode and per decode for (a) a Short RDMA_MSG Call
 * (empty chunk lists, inline RPC message) and (b) a Chunked Call with one
 * 16-segment Read chunk and a Write list of one 16-segment Write chunk.
 * Each figure is the best of several rounds (least disturbed by the other
 * jobs on the machine). Usage: bench_hdr [iterations] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proto/hdr.h"

#define ROUNDS 7

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct bcase {
	const char *name;
	struct rr_hdr d;   /* built with the builders of proto/hdr.h */
	uint8_t msg[2048];
	size_t len;
	size_t hdr_len;
};

static volatile uint32_t sink;

static double bench_encode(const struct bcase *c, long iters)
{
	static uint8_t out[2048];
	double best = 1e30;

	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = now_ns();

		for (long i = 0; i < iters; i++) {
			struct rr_xdr_enc e;

			rr_xdr_enc_init(&e, out, sizeof(out));
			if (rr_hdr_encode(&e, &c->d) != 0)
				abort();
			sink += out[(size_t)i & 15];
		}
		best = RR_MIN(best, (double)(now_ns() - t0) / (double)iters);
	}
	return best;
}

static double bench_decode(const struct bcase *c, long iters)
{
	static struct rr_hdr h;
	double best = 1e30;

	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = now_ns();

		for (long i = 0; i < iters; i++) {
			if (rr_hdr_decode(&h, c->msg, c->len, RR_HDR_DIR_CALL, NULL) != 0)
				abort();
			sink += h.nsegs;
		}
		best = RR_MIN(best, (double)(now_ns() - t0) / (double)iters);
	}
	return best;
}

static void setup(struct bcase *c, size_t payload)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, c->msg, sizeof(c->msg));
	if (rr_hdr_encode(&e, &c->d) != 0)
		abort();
	c->hdr_len = rr_xdr_enc_len(&e);
	rr_put_be32(c->msg + c->hdr_len, c->d.xid);
	memset(c->msg + c->hdr_len + 4, 0, payload - 4);
	c->len = c->hdr_len + payload;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000000;
	static struct bcase shortc, chunked;
	struct rr_hdr_seg rs[16], ws[16];
	double enc[2], dec[2];

	if (iters <= 0)
		iters = 2000000;
	shortc.name = "short RDMA_MSG";
	rr_hdr_init(&shortc.d, 0x11223344, 128, RR_HDR_MSG);
	setup(&shortc, 120);

	for (uint32_t i = 0; i < 16; i++) {
		rs[i] = (struct rr_hdr_seg){0x1000 + i, 4096, 0x7f0000000000ull + 4096u * i};
		ws[i] = (struct rr_hdr_seg){0x2000 + i, 4096, 0x7f1000000000ull + 4096u * i};
	}
	chunked.name = "16-seg Read + Write list";
	rr_hdr_init(&chunked.d, 0x55667788, 128, RR_HDR_MSG);
	for (uint32_t i = 0; i < 16; i++)
		if (rr_hdr_add_read(&chunked.d, 136, &rs[i]) != 0)
			abort();
	if (rr_hdr_add_write(&chunked.d, ws, 16) != 0)
		abort();
	setup(&chunked, 140);

	enc[0] = bench_encode(&shortc, iters);
	dec[0] = bench_decode(&shortc, iters);
	enc[1] = bench_encode(&chunked, iters / 4);
	dec[1] = bench_decode(&chunked, iters / 4);

	printf("%-26s %10s %12s %12s\n", "header", "hdr bytes", "encode ns", "decode ns");
	printf("%-26s %10zu %12.1f %12.1f\n", shortc.name, shortc.hdr_len, enc[0], dec[0]);
	printf("%-26s %10zu %12.1f %12.1f\n", chunked.name, chunked.hdr_len, enc[1], dec[1]);
	printf("ratio chunked/short: encode %.1fx, decode %.1fx (best of %d rounds, %ld / %ld iterations)\n",
	       enc[1] / enc[0], dec[1] / dec[0], ROUNDS, iters, iters / 4);
	return sink == 0xdeadbeef;
}
