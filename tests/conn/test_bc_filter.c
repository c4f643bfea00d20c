/* SPDX-License-Identifier: BSD-2-Clause */
/* The requester's one-word test before the backchannel's decode
 * (proto/conn/conn_int.h bc_may_be_call, issue 16 part AE): a reverse Call
 * (RFC 8167 section 4.2: RDMA_MSG, three empty chunk lists, then an RPC
 * Call) passes to bc_on_recv; a forward Reply, or anything shorter than
 * the nine words that tell, does not. The delivery of reverse Calls end to
 * end is the bc_* tests'. The responder's two-word test likewise (below). */
#include "test.h"

#include <string.h>

#include "proto/conn/conn_int.h"

/* rdma_xid | 1 | credit | RDMA_MSG | 0 | 0 | 0 | xid | @mtype | 0... */
static uint32_t reverse_msg(uint8_t *buf, uint32_t mtype)
{
	uint32_t w[12] = {0x1234, 1, 8, RR_HDR_MSG, 0, 0, 0, 0x1234, mtype, 2, 0, 0};

	for (unsigned i = 0; i < 12; i++)
		rr_put_be32(buf + 4 * i, w[i]);
	return sizeof(w);
}

TEST(conn_bc_filter_reverse_call_passes)
{
	uint8_t buf[48];
	uint32_t len = reverse_msg(buf, 0 /* CALL */);

	CHECK(bc_may_be_call(buf, len));
	CHECK(bc_may_be_call(buf, 36));   /* the nine words are enough to tell */
}

TEST(conn_bc_filter_reply_and_short_skip)
{
	uint8_t buf[48];
	uint32_t len = reverse_msg(buf, 1 /* REPLY */);

	CHECK(!bc_may_be_call(buf, len));   /* a forward Reply */
	reverse_msg(buf, 0);
	CHECK(!bc_may_be_call(buf, 35));    /* word 8 not all there */
	CHECK(!bc_may_be_call(buf, 0));
	/* a word other than 8 being CALL (the XID, word 7) does not pass */
	rr_put_be32(buf + 28, 0);
	rr_put_be32(buf + 32, 1);
	CHECK(!bc_may_be_call(buf, len));
}

/* The responder's two-word test (bc_may_be_reply, issue 16 part BE): a
 * reverse Reply, or an RDMA_ERROR (which may name a backward Call), passes
 * to bc_on_recv; a forward Call, or anything too short to tell, does not. */
TEST(conn_bc_filter_reverse_reply_and_error_pass)
{
	uint8_t buf[48];
	uint32_t len = reverse_msg(buf, 1 /* REPLY */);

	CHECK(bc_may_be_reply(buf, len));
	CHECK(bc_may_be_reply(buf, 36));
	CHECK(!bc_may_be_reply(buf, 35));   /* word 8 not all there */
	reverse_msg(buf, 0 /* CALL */);
	CHECK(!bc_may_be_reply(buf, len));  /* a forward Call */
	CHECK(!bc_may_be_reply(buf, 0));
	/* RDMA_ERROR: xid | 1 | credit | RDMA_ERROR | ERR_CHUNK, word 8
	 * anything (or not there) */
	rr_put_be32(buf + 12, RR_HDR_ERROR);
	CHECK(bc_may_be_reply(buf, 20));
	CHECK(bc_may_be_reply(buf, 16));
	CHECK(!bc_may_be_reply(buf, 15));
	CHECK(bc_may_be_reply(buf, len));
}

/* What bc_on_recv's first tests at a responder look for (backchannel.c
 * bc_maybe(.., 1) or bc_maybe_error): the filter must pass every such
 * message. Random messages of 0..48 bytes whose words come mostly from
 * the values that matter (0..4), a third of them forward Calls. */
static bool responder_bc_looks(const uint8_t *buf, uint32_t len)
{
	uint32_t w[9];

	for (unsigned i = 0; i < 9; i++)
		w[i] = 4 * i + 4 <= len ? rr_get_be32(buf + 4 * i) : 0xdeadbeefu;
	return (len >= 36 && w[3] == RR_HDR_MSG && !w[4] && !w[5] && !w[6] && w[8] == 1) ||
	       (len >= 16 && w[3] == RR_HDR_ERROR);
}

TEST(conn_bc_filter_reply_passes_all_bc_on_recv_takes)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned looks = 0, passed = 0;

	for (unsigned i = 0; i < 200000; i++) {
		uint8_t buf[48];
		uint32_t len;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		len = (uint32_t)(seed >> 33) % 49;
		for (unsigned k = 0; k < 12; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			rr_put_be32(buf + 4 * k, (seed >> 60) < 12 ? (uint32_t)(seed >> 61)
								   : (uint32_t)(seed >> 32));
		}
		if (i % 3 == 0)
			reverse_msg(buf, (uint32_t)(seed >> 40) & 1);
		if (responder_bc_looks(buf, len)) {
			looks++;
			CHECK(bc_may_be_reply(buf, len));
		}
		passed += bc_may_be_reply(buf, len);
	}
	CHECK(looks > 1000);   /* the inputs reach both branches */
	printf("  %u of 200000 look like reverse Replies or errors; the filter passes %u\n",
	       looks, passed);
}
