/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: MPA Request/Reply parsing and negotiation (RFC 5044 7.1,
 * RFC 6581). Input byte 0 selects request/reply and the split size; the rest
 * is the peer's byte stream. Every complete frame goes through the responder
 * or initiator checks, the reply is built, encoded and parsed back and must
 * round-trip. The record-marking classifier reads the same stream. */
#include <stdio.h>
#include <stdlib.h>

#include "rdma/soft/mpa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rr_mpa_parser p;
	struct rr_mpa_frame f, g, rep;
	struct rr_mpa_conn conn;
	struct rr_term term;
	struct rr_mpa_cfg cfg = {.rev = 2, .ird = 8, .ord = 8};
	uint8_t buf[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	size_t off = 1, chunk;
	bool reply;
	int r = 0;

	if (size < 1)
		return 0;
	(void)rr_mpa_looks_like_rpc(data + 1, size - 1);
	reply = data[0] & 1;
	cfg.crc = data[0] & 2;
	chunk = 1 + (data[0] >> 2);
	rr_mpa_parser_init(&p, reply);
	while (off < size) {
		size_t used;

		r = rr_mpa_feed(&p, data + off, RR_MIN(chunk, size - off), &used);
		off += used;
		if (r)
			break;
	}
	if (r != 1 || rr_mpa_parser_frame(&p, &f) != 0)
		return 0;
	if (reply) {
		(void)rr_mpa_initiator_check(&cfg, &f, &conn, &term);
		return 0;
	}
	r = rr_mpa_responder_check(&cfg, &f, &conn);
	if (rr_mpa_make_reply(&conn, r != 0, f.pd, RR_MIN(f.pd_len, (uint16_t)RR_MPA_ULP_PD_MAX),
			      &rep) != 0)
		abort();
	r = rr_mpa_encode(&rep, buf, sizeof(buf));
	if (r < 0)
		abort();
	rr_mpa_parser_init(&p, true);
	{
		size_t used;

		if (rr_mpa_feed(&p, buf, (size_t)r, &used) != 1 || used != (size_t)r)
			abort();
	}
	if (rr_mpa_parser_frame(&p, &g) != 0 || g.pd_len != rep.pd_len ||
	    memcmp(g.pd, rep.pd, g.pd_len) != 0 || g.enhanced != rep.enhanced)
		abort();
	return 0;
}
