/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the reliable-reply core (proto/rrep.h,
 * draft-cel-nfsv4-rpcrdma-reliable-reply-04). Part 1: the input is received
 * by a requester with reliable reply negotiated and one outstanding Call
 * (XID 0x01020304, one Write chunk): an R_PULL must carry only segments whose
 * lengths sum to pull_len, at most RR_XPRT_MAX_READS of them, and nothing to
 * read for an unknown XID; emulating the pull with a pattern never crashes.
 * Part 2: the input drives the responder's table as a sequence of
 * operations (add, RDMA_DONE with or without invalidation, expire on a
 * virtual clock, pop): the count stays consistent with what was added and
 * released, an entry is handed back once, nothing leaks. */
#include <stdio.h>
#include <stdlib.h>

#include "proto/rrep.h"

#define FAIL(msg)                                                              \
	do {                                                                   \
		fprintf(stderr, "fuzz_rrep: %s (line %d)\n", msg, __LINE__);   \
		abort();                                                       \
	} while (0)

static void requester(const uint8_t *data, size_t size)
{
	struct rr_xprt_params p;
	struct rr_xprt_requester r;
	struct rr_xprt_rqst *c;
	static struct rr_xprt_reply res;
	static uint8_t call[16], sink[5000];
	struct rr_xprt_part part = {call, 16, false};
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	struct rr_xprt_rqst_desc d = {.xid = 0x01020304, .parts = &part, .nparts = 1,
				      .sinks = &sk, .nsinks = 1, .max_reply = 100000,
				      .max_unknown = true};
	uint8_t buf[8];
	int n;

	rr_xprt_params_default(&p);
	p.reply_inline = p.call_inline = 4096;
	p.reliable_reply = true;
	p.local_r = p.peer_r = true;
	rr_put_be32(call, 0x01020304);
	rr_xprt_req_init(&r, NULL, &p, NULL);
	if (rr_xprt_rqst_prepare(&r, &d, &c))
		FAIL("prepare");
	for (unsigned i = 0; i < c->nregs; i++) {
		c->regs[i].stag = 0x100 + i;
		c->regs[i].addr = 0x10000;
		c->regs[i].valid = true;
	}
	{
		static uint8_t sendbuf[4096];

		if (rr_xprt_rqst_marshal(&r, c, 8, sendbuf, sizeof(sendbuf)) < 0)
			FAIL("marshal");
	}
	rr_xprt_req_recv(&r, data, size, size > 3 && (data[3] & 1), 0x100, &res);
	if (res.kind == RR_XPRT_R_PULL) {
		uint64_t sum = 0;

		if (res.pull_nsegs > RR_XPRT_MAX_READS)
			FAIL("too many segments");
		for (uint32_t i = 0; i < res.pull_nsegs; i++)
			sum += res.pull_segs[i].length;
		if (res.pull_nsegs && sum != res.pull_len)
			FAIL("segment lengths");
		if (!res.call && res.pull_nsegs)
			FAIL("read for an unknown XID");
		if (res.call && res.pull_nsegs && res.pull_len <= 70000) {
			uint8_t *pb = malloc(res.pull_len);
			struct rr_xprt_reply r2;

			if (!pb)
				FAIL("oom");
			memset(pb, 0x5a, res.pull_len);
			if (res.pull_len >= 8) {
				rr_put_be32(pb, 0x01020304);
				rr_put_be32(pb + 4, size & 1);
			}
			memset(&r2, 0, sizeof(r2));
			rr_xprt_req_pulled(&r, c, pb, res.pull_len, &r2);
			if (r2.kind == RR_XPRT_R_REPLY && r2.payload != pb)
				FAIL("payload outside the pulled buffer");
			free(pb);
		}
	}
	n = rr_rrep_encode_done(0x01020304, 1, buf, sizeof(buf));
	if (n != -EMSGSIZE)
		FAIL("done into 8 bytes");
	rr_xprt_rqst_release(&r, c);
	rr_xprt_req_fini(&r);
}

static void table(const uint8_t *data, size_t size)
{
	static uint64_t now;
	struct rpcrdma_env env;
	struct rr_rrep_table t;
	struct rr_rrep_entry *e;
	struct rr_rrep_done d;
	uint32_t added = 0, gone = 0;

	memset(&env, 0, sizeof(env));
	now = 0;
	rr_rrep_table_init(&t, rr_env(NULL), 1000, NULL);
	for (size_t i = 0; i + 3 <= size; i += 3) {
		uint32_t xid = data[i + 1] & 15, stag = 0x100 + (data[i + 2] & 31);

		switch (data[i] & 3) {
		case 0:
			if (t.count < 64 && rr_rrep_add(&t, xid, stag, NULL))
				added++;
			break;
		case 1:
			rr_rrep_on_done(&t, xid, data[i] & 4, stag, &d);
			if (d.release) {
				if (d.release == d.stolen)
					FAIL("released and stolen");
				rr_rrep_entry_free(&t, d.release);
				gone++;
			}
			break;
		case 2:
			now += (uint64_t)data[i + 1] * 10;
			while ((e = rr_rrep_expire(&t, now)) != NULL) {
				if (e->expires_ns > now)
					FAIL("expired early");
				rr_rrep_entry_free(&t, e);
				gone++;
			}
			break;
		default:
			if ((e = rr_rrep_pop(&t)) != NULL) {
				rr_rrep_entry_free(&t, e);
				gone++;
			}
			break;
		}
		if (t.count != added - gone)
			FAIL("count");
	}
	while ((e = rr_rrep_pop(&t)) != NULL) {
		rr_rrep_entry_free(&t, e);
		gone++;
	}
	if (added != gone || t.oldest || t.newest)
		FAIL("entries left");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	requester(data, size);
	table(data, size);
	return 0;
}
