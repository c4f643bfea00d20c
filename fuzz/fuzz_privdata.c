/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the connection private data parser (RFC 8797 block +
 * the project's extension block) and the negotiation built on it. For any
 * input: the parse never fails or reads out of bounds and its result is
 * self-consistent; when a block was found, re-encoding what was parsed and
 * parsing that again gives the same fields; negotiating against the input in
 * both roles always yields thresholds within [1024, own size] and an extension
 * set within what we asked for. Violations abort. */
#include <stdlib.h>

#include "proto/conn/privdata.h"

#define FZ_ASSERT(c)                                                            \
	do {                                                                    \
		if (!(c))                                                       \
			abort();                                                \
	} while (0)

static void check_info(const struct rr_pd_info *i, size_t len)
{
	FZ_ASSERT(i->send_size >= RR_PD_SIZE_MIN && i->send_size <= RR_PD_SIZE_MAX);
	FZ_ASSERT(i->recv_size >= RR_PD_SIZE_MIN && i->recv_size <= RR_PD_SIZE_MAX);
	FZ_ASSERT(i->send_size % 1024 == 0 && i->recv_size % 1024 == 0);
	FZ_ASSERT((i->ext_caps & ~RR_PD_EXT_CAPS_KNOWN) == 0);
	if (i->status != RR_PD_PRESENT) {
		FZ_ASSERT(!i->remote_inv && i->send_size == 1024 && i->recv_size == 1024);
		FZ_ASSERT(i->ext_status == RR_PD_EXT_NO_BASE && i->ext_caps == 0);
		return;
	}
	FZ_ASSERT(i->offset + RR_PD_LEN <= len);
	FZ_ASSERT(i->ext_status != RR_PD_EXT_NO_BASE);
	if (i->ext_status == RR_PD_EXT_PRESENT)
		FZ_ASSERT(i->offset + RR_PD_LEN + i->ext_len <= len &&
			  i->ext_len >= RR_PD_EXT_LEN && i->ext_version == RR_PD_EXT_VERSION);
	else
		FZ_ASSERT(i->ext_caps == 0);
	if (i->ext_status == RR_PD_EXT_NONE)
		FZ_ASSERT(i->offset + RR_PD_LEN == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rr_pd_info a, b;
	struct rr_pd_local l;
	struct rr_pd_conn c;
	uint8_t buf[RR_PD_MAX_LEN];
	int n;

	FZ_ASSERT(rr_pd_parse(size ? data : NULL, size, &a) == 0);
	check_info(&a, size);

	if (a.status == RR_PD_PRESENT) {
		l.send_size = a.send_size;
		l.recv_size = a.recv_size;
		l.remote_inv = a.remote_inv;
		l.ext_caps = a.ext_caps;
		n = rr_pd_encode(&l, buf, sizeof(buf));
		FZ_ASSERT(n == (a.ext_caps ? 20 : 8));
		FZ_ASSERT(rr_pd_parse(buf, (size_t)n, &b) == 0);
		FZ_ASSERT(b.status == RR_PD_PRESENT && b.offset == 0);
		FZ_ASSERT(b.send_size == a.send_size && b.recv_size == a.recv_size);
		FZ_ASSERT(b.remote_inv == a.remote_inv && b.ext_caps == a.ext_caps);
		FZ_ASSERT(b.ext_status ==
			  (a.ext_caps ? RR_PD_EXT_PRESENT : RR_PD_EXT_NONE));
		/* the original bytes of the block re-encode identically (except
		 * the reserved flag bits, which are sent as zero) */
		FZ_ASSERT(memcmp(buf, data + a.offset, 5) == 0);
		FZ_ASSERT(buf[5] == (data[a.offset + 5] & RR_PD_FLAG_R));
		FZ_ASSERT(memcmp(buf + 6, data + a.offset + 6, 2) == 0);
	}

	for (int role = 0; role < 2; role++) {
		struct rr_pd_local me = {6000, 300000, role == 0, RR_PD_EXT_CAPS_KNOWN};

		FZ_ASSERT(rr_pd_negotiate(&me, (enum rr_pd_role)role,
					  size ? data : NULL, size, &c) == 0);
		FZ_ASSERT(c.send_threshold >= 1024 && c.send_threshold <= 5120);
		FZ_ASSERT(c.recv_threshold >= 1024 && c.recv_threshold <= 262144);
		FZ_ASSERT(c.peer_present == (a.status == RR_PD_PRESENT));
		FZ_ASSERT(c.send_inv == (me.remote_inv && a.remote_inv));
		FZ_ASSERT(c.ext_caps == a.ext_caps);
		if (!c.peer_present)
			FZ_ASSERT(c.send_threshold == 1024 && c.recv_threshold == 1024);
	}
	return 0;
}
