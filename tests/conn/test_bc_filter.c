/* SPDX-License-Identifier: BSD-2-Clause */
/* The requester's one-word test before the backchannel's decode
 * (proto/conn/conn_int.h bc_may_be_call, issue 16 part AE): a reverse Call
 * (RFC 8167 section 4.2: RDMA_MSG, three empty chunk lists, then an RPC
 * Call) passes to bc_on_recv; a forward Reply, or anything shorter than
 * the nine words that tell, does not. The delivery of reverse Calls end to
 * end is the bc_* tests'. */
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
