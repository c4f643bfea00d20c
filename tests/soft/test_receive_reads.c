/* SPDX-License-Identifier: BSD-2-Clause */
/* How many socket reads the soft provider's receiver makes for one RDMA
 * Write followed by a Send (docs/soft-iwarp.md "Receive"): the header
 * look-ahead, the payload straight into place with a tail, and a short
 * remainder (the last FPDU of a Write just over one FPDU, as a 64 KiB
 * READ's result on loopback) never placed with a tail that leaves the Send
 * for one read more (SOFT_PLACE_MIN): behind a long payload it comes in the
 * long tail of the payload's read with the Send (SOFT_STAGE_TAIL_LONG),
 * behind a shorter one in the look-ahead. Every byte is checked. Two
 * endpoints over loopback TCP through the public API (RFC 5040 RDMA Write
 * and Send). */
#include "test.h"

#include <stdlib.h>

#include "rdma/provider.h"
#include "rdma/soft/ddp.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (2u << 20)
#define TARGET (1u << 20)   /* the Write's target and the Send's buffer in n.buf */
#define SEND_LEN 100u       /* more than the 64-byte tail could take with the trailer */

/* One Write of @len bytes of payload, or when @len is 0 of one full FPDU
 * plus @extra bytes, then a Send of SEND_LEN, all in the server's socket
 * before the server's consumer reads: the reads it makes for them (its QP's
 * rx_reads) over 3 rounds, every byte checked. */
static uint64_t write_len_then_send(uint32_t len, uint32_t extra)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_qp *sq;
	uint32_t full, wire;
	uint64_t reads = 0;
	int counted = 0;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	sq = soft_net_qp_of(s);
	full = (uint32_t)rr_ddp_seg_payload(RR_HDR_TAGGED, soft_net_qp_of(c)->fpdu_max);
	/* the tagged FPDUs on the wire (16-byte header each, CRC field; the
	 * last one's payload padded) */
	if (!len) {
		len = full + extra;
		wire = full + 20 + 20 + ((extra + 3) & ~3u);
	} else {
		REQUIRE(len <= full);
		wire = 20 + ((len + 3) & ~3u);
	}
	REQUIRE(len + SEND_LEN <= TARGET);
	for (uint32_t i = 0; i < len + SEND_LEN; i++)
		n.buf[i] = (uint8_t)(i * 13 + 5);
	/* the server CQ's consumer attends it (until then the progress
	 * thread serves the new QP and would read as the bytes come) */
	for (int i = 0; i < 5000; i++) {
		CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 1), 0);
		if (!soft_net_handed(s))
			break;
	}
	REQUIRE(!soft_net_handed(s));
	/* rounds 0-7 open the TCP receive window (it grows as the receiver
	 * reads; before, a Write waits for reads to be sent whole); then 3
	 * rounds are counted, each wholly in the socket before the first
	 * read and read by the consumer alone (a round where the progress
	 * thread took the QP over, the consumer's 20 ms lease run out on a
	 * loaded machine, is not counted) */
	for (int r = 0; r < 40 && counted < 3; r++) {
		bool count = r >= 8;
		uint64_t before;

		memset(n.buf + TARGET, 0, len + SEND_LEN);
		soft_net_post_recv(&n, s, 7, TARGET + len, SEND_LEN);
		before = sq->rx_reads;
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_RDMA_WRITE, 0, len, TARGET, false);
		soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, len, SEND_LEN, 0, false);
		/* the tagged FPDUs and the Send */
		if (count)
			count = soft_net_until_socket_holds(s, wire + soft_net_send_fpdu(SEND_LEN)) &&
				!soft_net_handed(s);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 7);
		CHECK_EQ(wc.byte_len, SEND_LEN);
		CHECK_EQ(memcmp(n.buf + TARGET, n.buf, len + SEND_LEN), 0);
		if (count) {
			reads += sq->rx_reads - before;
			counted++;
		}
	}
	REQUIRE_EQ(counted, 3);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
	return reads;
}

static uint64_t write_then_send(uint32_t extra)
{
	return write_len_then_send(0, extra);
}

/* The short last FPDU (73 bytes of payload, as a 64 KiB Write's on
 * loopback) and the Send come in the long tail of the first FPDU's
 * payload read: 2 reads per Write + Send (look-ahead, payload in place +
 * tail); with a 64-byte tail, the rest came with the look-ahead, 3; with
 * the remainder placed and a 64-byte tail, 4. */
TEST(soft_short_last_fpdu_read_with_the_send_behind_it)
{
	CHECK_EQ(write_then_send(73), 3 * 2);
}

/* A long last FPDU is still placed straight into the target memory (the
 * first ~1,000 bytes of its payload, brought by the long tail, copied from
 * the stage): the same 2 reads plus the one of the last FPDU's payload and
 * its (short) tail, and the look-ahead of the rest of the Send. */
TEST(soft_long_last_fpdu_still_placed)
{
	CHECK_EQ(write_then_send(20000), 3 * 4);
}

/* Behind a payload shorter than SOFT_TAIL_LONG_MIN (one FPDU of 20,000
 * bytes, as on a link of small segments) the tail stays short: the Send
 * is read with the look-ahead, 3 reads per Write + Send (look-ahead,
 * payload in place + tail, look-ahead); with the long tail, 2. */
TEST(soft_short_payload_keeps_the_short_tail)
{
	CHECK_EQ(write_len_then_send(20000, 0), 3 * 3);
}
