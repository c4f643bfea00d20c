/* SPDX-License-Identifier: BSD-2-Clause */
/* The transport core's parameters: their defaults (RFC 8166 section 3.3.3
 * inline thresholds of 1024 bytes, 1 MiB segments, 16 segments per chunk)
 * and the limits under which both roles decode a received header with the
 * header codec (proto/hdr.h: RFC 8166 section 5.5 verdicts), so the
 * requester and the responder accept the same headers. See xprt.h. */
#include "proto/xprt.h"

void rr_xprt_params_default(struct rr_xprt_params *p)
{
	memset(p, 0, sizeof(*p));
	p->call_inline = RR_HDR_DEFAULT_INLINE;
	p->reply_inline = RR_HDR_DEFAULT_INLINE;
	p->max_seg_len = 1u << 20;
	p->max_segs = 16;
	p->max_call = 1u << 24;
	p->max_pull = 1u << 28;
	p->inline_ddp = true;
	p->inline_ddp_max = RR_XPRT_INLINE_DDP_MAX;
}

void rr_xprt_hdr_limits(struct rr_hdr_limits *lim, uint32_t inline_max, uint32_t max_chunk,
			bool reliable_reply)
{
	rr_hdr_limits_init(lim);
	lim->max_segs_per_chunk = RR_XPRT_MAX_SEGS;
	lim->max_read_chunks = RR_HDR_MAX_READ_CHUNKS;
	lim->max_write_chunks = RR_XPRT_MAX_WCHUNKS;
	lim->max_read_segs = RR_XPRT_MAX_READS;
	lim->max_chunk_len = max_chunk ? max_chunk : UINT32_MAX;
	lim->inline_threshold = inline_max ? inline_max : UINT32_MAX;
	lim->reliable_reply = reliable_reply;
}
