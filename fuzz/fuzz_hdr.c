/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the RPC-over-RDMA v1 header decoder (RFC 8166
 * section 4.2 XDR, 5.5 error handling). Every input is decoded as a Call and
 * as a Reply, with and without the reliable-reply extension, under generous
 * and default limits. Checked on every decode:
 *  - the verdict is the one RFC 8166 5.5 mandates for the reason and
 *    direction (a Reply is never answered with RDMA_ERROR);
 *  - a rejected Call can be answered: rr_hdr_encode_reject() succeeds;
 *  - an accepted header re-encodes byte-identically to the input header, and
 *    decoding that re-encoding (plus the original inline payload) yields a
 *    structurally equal header;
 *  - the same header rebuilt chunk by chunk with the builders (the Reply
 *    chunk first, then the Write chunks, then the Read segments: any order
 *    of filling encodes in wire order) encodes to the same bytes;
 *  - an accepted Reply checked against a fixed Call header by
 *    rr_hdr_check_reply() is either kept or discarded with a mismatch
 *    reason;
 *  - rr_hdr_decode() (with its one-pass decoding of the short form) and
 *    rr_hdr_decode_general() return the same and leave the same bytes in
 *    the whole struct rr_hdr, both started from the same contents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hdr.h"

#define FAIL(msg)                                                              \
	do {                                                                   \
		fprintf(stderr, "fuzz_hdr: %s (line %d)\n", msg, __LINE__);    \
		abort();                                                       \
	} while (0)

static bool chunk_eq(const struct rr_hdr *a, const struct rr_hdr_chunk *ca,
		     const struct rr_hdr *b, const struct rr_hdr_chunk *cb)
{
	if (ca->position != cb->position || ca->nsegs != cb->nsegs ||
	    ca->length != cb->length)
		return false;
	for (uint32_t i = 0; i < ca->nsegs; i++) {
		const struct rr_hdr_seg *sa = &a->segs[ca->first + i];
		const struct rr_hdr_seg *sb = &b->segs[cb->first + i];

		if (sa->handle != sb->handle || sa->length != sb->length ||
		    sa->offset != sb->offset)
			return false;
	}
	return true;
}

static bool hdr_eq(const struct rr_hdr *a, const struct rr_hdr *b)
{
	if (a->verdict != b->verdict || a->reason != b->reason || a->xid != b->xid ||
	    a->vers != b->vers || a->credit != b->credit || a->proc != b->proc ||
	    a->hdr_len != b->hdr_len || a->payload_len != b->payload_len)
		return false;
	if (a->proc == RR_HDR_ERROR)
		return a->err == b->err && a->vers_low == b->vers_low &&
		       a->vers_high == b->vers_high;
	if (a->proc != RR_HDR_MSG && a->proc != RR_HDR_NOMSG)
		return true;
	if (a->nread != b->nread || a->nwrite != b->nwrite ||
	    a->has_reply != b->has_reply || a->nsegs != b->nsegs)
		return false;
	for (uint32_t i = 0; i < a->nread; i++)
		if (!chunk_eq(a, &a->read[i], b, &b->read[i]))
			return false;
	for (uint32_t i = 0; i < a->nwrite; i++)
		if (!chunk_eq(a, &a->write[i], b, &b->write[i]))
			return false;
	return !a->has_reply || chunk_eq(a, &a->reply, b, &b->reply);
}

/* The Call a requester might have sent: two Write chunks and a Reply chunk,
 * handles 1.. and offsets 0x1000 * handle, as the seeds use small numbers. */
static const struct rr_hdr call_hdr = {
	.xid = 0x11223344, .vers = 1, .proc = RR_HDR_MSG,
	.nwrite = 2, .write = {{0, 0, 2, 8192}, {0, 2, 1, 65536}},
	.has_reply = true, .reply = {0, 3, 2, 16384},
	.nsegs = 5, .segs = {{1, 4096, 0x1000}, {2, 4096, 0x2000}, {3, 65536, 0x3000},
			     {4, 8192, 0x4000}, {5, 8192, 0x5000}},
};

/* @c of @h added to @b as a chunk of the same kind (@kind: 'r' Read, 'w'
 * Write, 'p' Reply). */
static void rebuild_chunk(struct rr_hdr *b, const struct rr_hdr *h, const struct rr_hdr_chunk *c,
			  char kind)
{
	const struct rr_hdr_seg *segs = &h->segs[c->first];
	int rc = 0;

	if (kind == 'w')
		rc = rr_hdr_add_write(b, segs, c->nsegs);
	else if (kind == 'p')
		rc = rr_hdr_add_reply(b, segs, c->nsegs);
	for (uint32_t i = 0; kind == 'r' && rc == 0 && i < c->nsegs; i++)
		rc = rr_hdr_add_read(b, c->position, &segs[i]);
	if (rc)
		FAIL("a decoded header does not fit the builders");
}

/* The RDMA_MSG / RDMA_NOMSG header @h rebuilt with the builders, Reply
 * chunk first and Read segments last, encoded: the same bytes as @data. */
static void check_rebuilt(const struct rr_hdr *h, const uint8_t *data)
{
	static struct rr_hdr b;
	static uint8_t out[70000];
	int n;

	rr_hdr_init(&b, h->xid, h->credit, h->proc);
	if (h->has_reply)
		rebuild_chunk(&b, h, &h->reply, 'p');
	for (uint32_t i = 0; i < h->nwrite; i++)
		rebuild_chunk(&b, h, &h->write[i], 'w');
	for (uint32_t i = 0; i < h->nread; i++)
		rebuild_chunk(&b, h, &h->read[i], 'r');
	if (b.nread != h->nread || rr_hdr_encoded_size(&b) != h->hdr_len)
		FAIL("rebuilt header differs in shape");
	n = rr_hdr_encode_buf(&b, out, sizeof(out));
	if (n != (int)h->hdr_len || memcmp(out, data, h->hdr_len) != 0)
		FAIL("rebuilt header encodes differently");
}

static void one(const uint8_t *data, size_t size, enum rr_hdr_dir dir,
		const struct rr_hdr_limits *lim)
{
	static struct rr_hdr h, h2;
	static uint8_t out[70000];
	struct rr_xdr_enc e;
	int rc;

	memset(&h, 0x5a, sizeof(h));
	memset(&h2, 0x5a, sizeof(h2));
	rc = rr_hdr_decode(&h, data, size, dir, lim);
	if (rr_hdr_decode_general(&h2, data, size, dir, lim) != rc ||
	    memcmp(&h, &h2, sizeof(h)) != 0)
		FAIL("the short form's decoding differs from the general decoder's");
	if ((rc == 0) != (h.verdict == RR_HDR_OK) || (rc && rc != -EPROTO))
		FAIL("return value does not match the verdict");
	if (h.verdict != rr_hdr_verdict_for(dir, h.reason))
		FAIL("verdict is not the one mandated for the reason");
	if (dir == RR_HDR_DIR_REPLY && h.verdict != RR_HDR_OK &&
	    h.verdict != RR_HDR_DISCARD)
		FAIL("a requester answered a Reply");
	if (h.verdict == RR_HDR_REPLY_ERR_VERS || h.verdict == RR_HDR_REPLY_ERR_CHUNK) {
		rr_xdr_enc_init(&e, out, sizeof(out));
		if (rr_hdr_encode_reject(&e, &h, 1) != 0)
			FAIL("cannot encode the mandated RDMA_ERROR");
		if (size < 4)
			FAIL("answering a message without an xid");
	}
	if (h.verdict != RR_HDR_OK)
		return;
	if (h.hdr_len > size || h.payload_off + (size_t)h.payload_len > size)
		FAIL("layout outside the input");

	rr_xdr_enc_init(&e, out, sizeof(out));
	if (rr_hdr_encode(&e, &h) != 0)
		FAIL("cannot re-encode an accepted header");
	if (rr_xdr_enc_len(&e) != h.hdr_len || memcmp(out, data, h.hdr_len) != 0)
		FAIL("re-encoding differs from the input header");
	if (h.proc == RR_HDR_MSG) {
		memcpy(out + h.hdr_len, data + h.payload_off, h.payload_len);
		rc = rr_hdr_decode(&h2, out, h.hdr_len + (size_t)h.payload_len, dir, lim);
	} else {
		rc = rr_hdr_decode(&h2, out, h.hdr_len, dir, lim);
	}
	if (rc != 0 || !hdr_eq(&h, &h2))
		FAIL("decode(encode(x)) != x");
	if (h.proc == RR_HDR_MSG || h.proc == RR_HDR_NOMSG)
		check_rebuilt(&h, data);
	if (dir == RR_HDR_DIR_REPLY) {
		rc = rr_hdr_check_reply(&h, &call_hdr);
		if (rc == 0 ? h.verdict != RR_HDR_OK
			    : (h.verdict != RR_HDR_DISCARD ||
			       (h.reason != RR_HDR_R_WRITE_MISMATCH &&
				h.reason != RR_HDR_R_REPLY_MISMATCH)))
			FAIL("rr_hdr_check_reply verdict");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rr_hdr_limits lim;

	for (int rr = 0; rr < 2; rr++) {
		rr_hdr_limits_init(&lim);
		lim.inline_threshold = 65536;
		lim.max_read_chunks = RR_HDR_MAX_READ_CHUNKS;
		lim.max_write_chunks = RR_HDR_MAX_WRITE_CHUNKS;
		lim.reliable_reply = rr;
		one(data, size, RR_HDR_DIR_CALL, &lim);
		one(data, size, RR_HDR_DIR_REPLY, &lim);
	}
	one(data, size, RR_HDR_DIR_CALL, NULL);
	one(data, size, RR_HDR_DIR_REPLY, NULL);
	return 0;
}
