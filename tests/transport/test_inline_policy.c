/* SPDX-License-Identifier: BSD-2-Clause */
/* The inline threshold policy (transport/rdma/tp.h rr_tp_conf_inline,
 * docs/transport.md "Inline thresholds"): on the software (TCP-carried)
 * provider both ends advertise RR_TP_INLINE_SOFT by default (RFC 8797 section
 * 4.2 allows up to 262144), so a 64 KiB DDP-eligible argument travels
 * inline (RFC 8166 section 3.4.2: a DDP-eligible item may be sent inline),
 * and so does a result of up to RR_XPRT_INLINE_DDP_MAX (16 KiB; a larger
 * one is RDMA Written into its sink: no copy, no round trip more); a peer
 * advertising 4096 (Linux) brings both directions back to
 * 4096 and the same item becomes a Read / Write chunk again; items larger
 * than the threshold keep their chunks; the per-connection buffer memory is
 * bounded by lowering credits; a peer that sends more than it negotiated gets
 * RFC 8166 ERR_CHUNK, and a Reply never exceeds what the peer advertised. */
#include <stdlib.h>
#include <string.h>

#include "proto/conn/privdata.h"
#include "proto/xprt.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"
#include "rpcrdma/xdr.h"
#include "test.h"
#include "xprt_harness.h"

/* ---- the policy as a pure function ---- */

static uint64_t client_bytes(const struct rr_tp_conf *c)
{
	return ((uint64_t)c->credits + 8) * ((uint64_t)c->inline_send + c->inline_recv);
}

static uint64_t server_bytes(const struct rr_tp_conf *c)
{
	uint64_t n = (uint64_t)c->credits + 4 +
		     ((c->ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) ? c->rrep_max : 0);

	return n * c->inline_recv + (n + 8) * c->inline_send;
}

TEST(inline_policy_conf)
{
	struct rr_tp_conf c;

	/* Explicit sizes (rr_tp_conf_default: 4096, Linux's) are kept, on
	 * either provider, and so are the credits. */
	rr_tp_conf_default(&c);
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, false);
	CHECK_EQ(c.inline_send, 4096u);
	CHECK_EQ(c.inline_recv, 4096u);
	CHECK_EQ(c.credits, 128u);
	/* 0: the provider's default. */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 0;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_VERBS, false);
	CHECK_EQ(c.inline_send, RR_TP_INLINE_DEFAULT);
	CHECK_EQ(c.inline_recv, RR_TP_INLINE_DEFAULT);
	CHECK_EQ(c.credits, 128u);
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 0;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, false);
	CHECK_EQ(c.inline_send, RR_TP_INLINE_SOFT);
	CHECK_EQ(c.inline_recv, RR_TP_INLINE_SOFT);
	CHECK(RR_TP_INLINE_SOFT >= 65536u + 1024u);   /* a 64 KiB item + header */
	/* the memory bound: fewer credits, within inline_mem */
	CHECK(c.credits < 128u);
	CHECK(c.credits >= 64u);                       /* >= the RPC server's grant */
	CHECK(client_bytes(&c) <= c.inline_mem);
	CHECK(((uint64_t)c.credits + 9) * 2 * RR_TP_INLINE_SOFT > c.inline_mem); /* no waste */
	/* the responder (the RPC layer's grant of 64): within the default
	 * budget, nothing lowered */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 0;
	c.credits = 64;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, true);
	CHECK(server_bytes(&c) <= c.inline_mem);
	CHECK_EQ(c.credits, 64u);
	CHECK_EQ(c.rrep_max, 32u);
	/* a smaller budget: grant and reliable-reply Receives lowered to fit */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 0;
	c.inline_mem = 12u << 20;
	c.credits = 64;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, true);
	CHECK(server_bytes(&c) <= c.inline_mem);
	CHECK(c.credits >= RR_TP_MIN_CREDITS && c.credits < 64u);
	CHECK(c.rrep_max >= 1u && c.rrep_max < 32u);
	/* the largest size RFC 8797 can advertise; a tiny budget: the floor */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 1u << 20;
	c.inline_mem = 1u << 20;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, false);
	CHECK_EQ(c.inline_send, RR_PD_SIZE_MAX);
	CHECK_EQ(c.inline_recv, RR_PD_SIZE_MAX);
	CHECK_EQ(c.credits, RR_TP_MIN_CREDITS);
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 1u << 20;
	c.inline_mem = 1u << 20;
	c.credits = 64;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, true);
	CHECK_EQ(c.credits, RR_TP_MIN_CREDITS);
	CHECK_EQ(c.rrep_max, 1u);
	/* the budget never raises what was configured */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 1u << 20;
	c.inline_mem = 1u << 20;
	c.credits = 4;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, false);
	CHECK_EQ(c.credits, 4u);
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 1u << 20;
	c.inline_mem = 1u << 20;
	c.credits = 2;
	c.rrep_max = 0;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, true);
	CHECK_EQ(c.credits, 2u);
	CHECK_EQ(c.rrep_max, 0u);
	/* inline_mem 0: no cap */
	rr_tp_conf_default(&c);
	c.inline_send = c.inline_recv = 0;
	c.inline_mem = 0;
	rr_tp_conf_inline(&c, RPCRDMA_PROVIDER_SOFT, false);
	CHECK_EQ(c.credits, 128u);
}

/* ---- negotiation between transport endpoints ---- */

static void nop_recv(void *ctx, struct rr_conn_sreq *r)
{
	(void)ctx;
	(void)r;
}

static void nop_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	(void)ctx;
	(void)rpc;
}

/* Thresholds a requester with sizes @cl negotiates with a responder with
 * sizes @sv (0: the soft provider's default). */
static void negotiated(uint32_t cl, uint32_t sv, struct rr_xprt_params *p)
{
	struct rr_tp_conf sc, cc;
	struct rr_tp_server *s = NULL;
	struct rr_tp_client *c = NULL;
	uint32_t grant = 0;

	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	sc.inline_send = sc.inline_recv = sv;
	cc.inline_send = cc.inline_recv = cl;
	memset(p, 0, sizeof(*p));
	REQUIRE_EQ(rr_th_tp_server(&sc, nop_recv, NULL, &s), 0);
	REQUIRE_EQ(rr_th_tp_client(&cc, rr_tp_server_port(s), nop_complete, NULL, &c), 0);
	CHECK_EQ(rr_tp_client_params(c, p, &grant), 0);
	CHECK(grant >= 1);
	rr_tp_client_destroy(c);
	rr_tp_server_destroy(s);
}

TEST(inline_policy_negotiation)
{
	struct rr_xprt_params p;

	if (!rr_th_soft_ok())
		return;
	negotiated(0, 0, &p);            /* two of ours, defaults */
	CHECK_EQ(p.call_inline, RR_TP_INLINE_SOFT);
	CHECK_EQ(p.reply_inline, RR_TP_INLINE_SOFT);
	negotiated(0, 4096, &p);         /* a Linux-like responder */
	CHECK_EQ(p.call_inline, 4096u);
	CHECK_EQ(p.reply_inline, 4096u);
	negotiated(4096, 0, &p);         /* a Linux-like requester */
	CHECK_EQ(p.call_inline, 4096u);
	CHECK_EQ(p.reply_inline, 4096u);
	negotiated(262144, 0, &p);       /* the smaller size wins */
	CHECK_EQ(p.call_inline, RR_TP_INLINE_SOFT);
	CHECK_EQ(p.reply_inline, RR_TP_INLINE_SOFT);
}

/* ---- message forms through the public API ---- */

#define PROG 0x2000019eu
#define P_SUM 1u   /* opaque<> (DDP) -> u32 len, u32 sum */
#define P_GEN 2u   /* u32 n -> opaque<n> (DDP) */
#define P_FAT 3u   /* u32 n -> n bytes of plain results (not DDP-eligible) */
#define BIG (256u * 1024u)

static uint8_t gen_buf[BIG];

static uint32_t sum_of(const uint8_t *p, uint32_t len)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i < len; i++)
		s = s * 31u + p[i];
	return s;
}

static int h_sum(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), sum_of(p, len));
	return RPCRDMA_SVC_OK;
}

static int h_gen(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > sizeof(gen_buf))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), gen_buf, n) ? RPCRDMA_SVC_SYSTEM_ERR
								       : RPCRDMA_SVC_OK;
}

static int h_fat(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > sizeof(gen_buf) || n % 4)
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_fixed(rpcrdma_req_results(r), gen_buf, n) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
}

static struct rpcrdma_server *server_start(uint32_t inline_size, char *url, size_t n)
{
	struct rpcrdma_server_opts so = {.threads = 2, .inline_size = inline_size};
	struct rpcrdma_server *s = NULL;

	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_SUM, h_sum, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_GEN, h_gen, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_FAT, h_fat, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, n, "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	return s;
}

static struct rpcrdma_client *client_start(const char *url, uint32_t inline_size)
{
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .connect_timeout_ms = 5000,
					 .inline_size = inline_size};
	struct rpcrdma_client *c = NULL;

	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &c), 0);
	return c;
}

/* WRITE-like: @len bytes as a DDP-eligible argument; client counters in @dc. */
static void do_sum(struct rpcrdma_client *c, uint32_t len, struct rpcrdma_xprt_stats *dc)
{
	struct rpcrdma_xprt_stats c0, c1;
	struct rpcrdma_call *call;
	uint8_t *src = malloc(len);
	uint32_t rlen = 0, rsum = 0;

	REQUIRE(src);
	for (uint32_t i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 7u + len);
	REQUIRE_EQ(rpcrdma_client_stats(c, &c0), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, P_SUM, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, len), 0);
	rpcrdma_call_set_reply_hint(call, 64);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rsum), 0);
	CHECK_EQ(rlen, len);
	CHECK_EQ(rsum, sum_of(src, len));
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_client_stats(c, &c1), 0);
	rpcrdma_xprt_stats_diff(&c1, &c0, dc);
	free(src);
}

/* READ-like: @n bytes of DDP-eligible result into a sink of @n bytes. */
static void do_gen(struct rpcrdma_client *c, uint32_t n, struct rpcrdma_xprt_stats *dc)
{
	struct rpcrdma_xprt_stats c0, c1;
	struct rpcrdma_call *call;
	uint8_t *sink = malloc(n);
	struct rpcrdma_ddp_sink sk = {sink, n};
	const void *p = NULL;
	uint32_t len = 0;

	REQUIRE(sink);
	memset(sink, 0xee, n);
	REQUIRE_EQ(rpcrdma_client_stats(c, &c0), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, P_GEN, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), n), 0);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
	rpcrdma_call_set_reply_hint(call, 64);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
	CHECK_EQ(len, n);
	CHECK(p == sink);
	CHECK(memcmp(sink, gen_buf, n) == 0);
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_client_stats(c, &c1), 0);
	rpcrdma_xprt_stats_diff(&c1, &c0, dc);
	free(sink);
}

static void fill_gen(void)
{
	for (uint32_t i = 0; i < BIG; i++)
		gen_buf[i] = (uint8_t)(i * 13u + 5u);
}

/* Between two of our peers (defaults), a 64 KiB argument goes inline: a
 * Short Call, nothing registered, nothing invalidated. A result comes in
 * the Reply up to RR_XPRT_INLINE_DDP_MAX (16 KiB); 64 KiB gets its Write
 * chunk although the Reply would fit the threshold. 256 KiB exceeds the
 * threshold: a Read chunk / Write chunk. */
TEST(inline_policy_rpc_forms_default)
{
	struct rpcrdma_xprt_stats dc, ss;
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	fill_gen();
	s = server_start(0, url, sizeof(url));
	c = client_start(url, 0);
	do_sum(c, 65536, &dc);
	CHECK_EQ(dc.short_msgs, 1);
	CHECK_EQ(dc.msg_sent, 1);
	CHECK_EQ(dc.read_chunks, 0);
	CHECK_EQ(dc.total_rdma_req, 0);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 0);
	CHECK(dc.inline_sent_bytes > 65536);
	do_gen(c, RR_XPRT_INLINE_DDP_MAX, &dc);
	CHECK_EQ(dc.write_chunks, 0);
	CHECK_EQ(dc.total_rdma_rep, 0);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 0);
	CHECK(dc.inline_recv_bytes > RR_XPRT_INLINE_DDP_MAX);
	do_gen(c, 65536, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 65536);
	CHECK(dc.inline_recv_bytes < 400);
	/* the largest argument that fits: header 28 + RPC Call + 4 + item */
	do_sum(c, 128u * 1024u, &dc);
	CHECK_EQ(dc.short_msgs, 1);
	CHECK_EQ(dc.read_chunks, 0);
	/* beyond the threshold: chunks, as before */
	do_sum(c, BIG, &dc);
	CHECK_EQ(dc.read_chunks, 1);
	CHECK_EQ(dc.chunked_msgs, 1);
	CHECK_EQ(dc.total_rdma_req, BIG);
	CHECK(dc.inline_sent_bytes < 400);
	do_gen(c, BIG, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, BIG);
	CHECK_EQ(rpcrdma_server_stats(s, &ss), 0);
	CHECK_EQ(ss.err_chunk_sent, 0);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* Against a peer advertising 4096 (as Linux does), on either side, the
 * same 64 KiB items go as a Read chunk and a Write chunk. */
TEST(inline_policy_rpc_forms_4k_peer)
{
	struct rpcrdma_xprt_stats dc;
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	fill_gen();
	for (int side = 0; side < 2; side++) {
		s = server_start(side == 0 ? 4096 : 0, url, sizeof(url));
		c = client_start(url, side == 1 ? 4096 : 0);
		do_sum(c, 65536, &dc);
		CHECK_EQ(dc.short_msgs, 0);
		CHECK_EQ(dc.chunked_msgs, 1);
		CHECK_EQ(dc.read_chunks, 1);
		CHECK_EQ(dc.total_rdma_req, 65536);
		CHECK(dc.inline_sent_bytes < 400);
		do_gen(c, 65536, &dc);
		CHECK_EQ(dc.write_chunks, 1);
		CHECK_EQ(dc.total_rdma_rep, 65536);
		/* small items still inline at 4096 */
		do_sum(c, 1024, &dc);
		CHECK_EQ(dc.short_msgs, 1);
		CHECK_EQ(dc.read_chunks, 0);
		rpcrdma_client_destroy(c);
		rpcrdma_server_destroy(s);
	}
}

/* A large plain (not DDP-eligible) result that fits the larger threshold
 * comes inline; one that does not travels by RDMA as before (Reply chunk,
 * or a responder-provided Read chunk under reliable reply). */
TEST(inline_policy_rpc_long_reply)
{
	struct rpcrdma_xprt_stats c0, c1, dc;
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	const uint32_t sizes[2] = {100000, 200000};
	char url[64];
	int via_read;

	if (!rr_th_soft_ok())
		return;
	fill_gen();
	s = server_start(0, url, sizeof(url));
	c = client_start(url, 0);
	for (unsigned i = 0; i < 2; i++) {
		uint8_t *p = malloc(sizes[i]);

		REQUIRE(p);

		REQUIRE_EQ(rpcrdma_client_stats(c, &c0), 0);
		REQUIRE_EQ(rpcrdma_call_create(c, P_FAT, &call), 0);
		REQUIRE_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), sizes[i]), 0);
		rpcrdma_call_set_reply_hint(call, sizes[i] + 64);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		CHECK_EQ(rpcrdma_xdr_get_fixed(rpcrdma_call_results(call), p, sizes[i]), 0);
		CHECK(memcmp(p, gen_buf, sizes[i]) == 0);
		via_read = rpcrdma_call_reply_via_read(call);
		free(p);
		rpcrdma_call_destroy(call);
		REQUIRE_EQ(rpcrdma_client_stats(c, &c1), 0);
		rpcrdma_xprt_stats_diff(&c1, &c0, &dc);
		if (i == 0) {   /* inline: one RDMA_MSG carrying it all */
			CHECK_EQ(dc.reply_chunks, 0);
			CHECK_EQ(via_read, 0);
			CHECK(dc.inline_recv_bytes > sizes[i]);
		} else {        /* by RDMA: Reply chunk or reliable reply */
			CHECK_EQ(dc.reply_chunks + (uint64_t)(via_read == 1), 1);
			CHECK(dc.inline_recv_bytes < 1024);
		}
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* ---- a peer breaking the negotiated sizes ---- */

/* RDMA_MSG header (28) + an RPC Call of (PROG, 1, @proc), AUTH_NONE, then
 * @args (a u32 each), padded with zeros to @total bytes when larger. */
static size_t rogue_rpc(uint8_t *b, uint32_t xid, uint32_t proc, uint32_t arg, size_t total)
{
	size_t n = 0;
	const uint32_t w[] = {xid, 1, 32, 0 /* RDMA_MSG */, 0, 0, 0,
			      xid, 0 /* CALL */, 2, PROG, 1, proc, 0, 0, 0, 0, arg};

	for (unsigned i = 0; i < RR_ARRAY_SIZE(w); i++, n += 4)
		rr_put_be32(b + n, w[i]);
	if (total > n) {
		memset(b + n, 0, total - n);
		n = total;
	}
	return n;
}

/* A requester advertising Send 1024 / Receive 4096 against our responder
 * with its (larger) default: a 2000-byte Call exceeds what it negotiated and
 * is answered ERR_CHUNK (the Receive had room: the check is the negotiated
 * threshold, not the buffer); a Reply larger than its 4096-byte Receive
 * becomes ERR_CHUNK instead of a Send it cannot take; the connection keeps
 * serving. */
TEST(inline_policy_violations)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 0 /* send 1024 */,
				      3 /* recv 4096 */};
	struct rpcrdma_server *s;
	struct rr_th_rogue g;
	uint8_t m[4096], r[4096];
	char url[64];
	size_t l;
	int n;

	if (!rr_th_soft_ok())
		return;
	fill_gen();
	s = server_start(0, url, sizeof(url));
	REQUIRE_EQ(rr_th_rogue_open(&g, rpcrdma_server_port(s), pd, 8, false), 0);
	/* within the limits: P_FAT of 64 bytes, answered inline */
	l = rogue_rpc(m, 0x300, P_FAT, 64, 0);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE(n >= 28 + 24 + 64);
	CHECK_EQ(rr_get_be32(r), 0x300);
	CHECK_EQ(rr_get_be32(r + 12), 0u);   /* RDMA_MSG */
	/* a 2000-byte Call: more than the 1024 it advertised */
	l = rogue_rpc(m, 0x301, P_FAT, 64, 2000);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE_EQ(n, 20);
	CHECK_EQ(rr_get_be32(r), 0x301);
	CHECK_EQ(rr_get_be32(r + 12), 4u);   /* RDMA_ERROR */
	CHECK_EQ(rr_get_be32(r + 16), 2u);   /* ERR_CHUNK */
	/* a 6000-byte Reply (no Reply chunk offered) against its 4096 */
	l = rogue_rpc(m, 0x302, P_FAT, 6000, 0);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE_EQ(n, 20);
	CHECK_EQ(rr_get_be32(r), 0x302);
	CHECK_EQ(rr_get_be32(r + 12), 4u);
	CHECK_EQ(rr_get_be32(r + 16), 2u);
	/* still served */
	l = rogue_rpc(m, 0x303, P_FAT, 3000, 0);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	CHECK_EQ(n, 28 + 24 + 3000);
	CHECK_EQ(rr_get_be32(r), 0x303);
	rr_th_rogue_close(&g);
	rpcrdma_server_destroy(s);
}

/* ---- inline Replies handed over in their Receive buffer ---- */

/* Responder: Reply = xid, REPLY, then 64 bytes (xid + i) & 0xff. */
static struct rr_tp_server *lend_srv;

static void lend_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	uint8_t hdr[8], body[64];
	struct rr_xprt_part parts[2] = {{hdr, 8, false}, {body, 64, false}};

	(void)sq;
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	for (unsigned i = 0; i < 64; i++)
		body[i] = (uint8_t)(r->xid + i);
	(void)rr_tp_server_reply(lend_srv, r, parts, 2, NULL);
	rr_tp_server_done(lend_srv, r);
}

/* @p completed with a Reply of 8 + @n bytes: its XID first, then @n
 * bytes of the pattern xid + i from byte 8. */
static bool reply_bytes_ok(const struct rr_th_small *p, uint32_t n)
{
	if (p->r.status || p->r.reply_len != 8 + n || rr_get_be32(p->r.reply) != p->r.xid)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (p->r.reply[8 + i] != (uint8_t)(p->r.xid + i))
			return false;
	return true;
}

static bool lend_ok(const struct rr_th_small *p)
{
	return reply_bytes_ok(p, 64);
}

/* The first TP_LEND_MAX (4) unreleased inline Replies are the Receive
 * buffers themselves, later ones copies; the lent ones stay intact (ASan:
 * no use after free) across a cut connection and a reconnection; releasing
 * reposts (or, on the dead connection, drops) them, and 300 more calls with
 * their Replies lent and released one by one run on one connection with
 * credits + 8 Receives, which a missing repost would exhaust (the peer's
 * Send finding no Receive ends the connection: a reconnection). */
TEST(inline_policy_lent_replies)
{
	struct rr_tp_conf sc, cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *held = calloc(8, sizeof(*held)), *one = calloc(1, sizeof(*one));
	struct rr_xprt_params prm;
	struct rr_xprt_stats st;
	unsigned lent = 0, done = 0;

	if (!rr_th_soft_ok()) {
		free(held);
		free(one);
		return;
	}
	REQUIRE(held && one);
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	cc.credits = 8;   /* 16 Receives */
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, lend_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &lend_srv), 0);
	rr_th_sq_start(&sq);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(lend_srv), rr_th_cl_count), 0);
	for (unsigned i = 0; i < 8; i++) {
		rr_th_small_submit(&c, &held[i], 0x1000 + i);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		CHECK(lend_ok(&held[i]));
		lent += held[i].r.lent != NULL;
		CHECK_EQ(held[i].r.lent != NULL, i < 4);
	}
	CHECK_EQ(lent, 4u);
	REQUIRE_EQ(rr_tp_client_cut(c.tp), 0);
	for (int t = 0; t < 400 && rr_tp_client_params(c.tp, &prm, NULL) != 0; t++)
		rr_th_sleep_ms(5);
	rr_th_small_submit(&c, one, 0x2000);   /* on the new connection */
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK(lend_ok(one));
	CHECK(one->r.lent != NULL);
	rr_tp_client_release_reply(c.tp, &one->r);
	for (unsigned i = 0; i < 8; i++) {
		CHECK(lend_ok(&held[i]));   /* still intact after the cut */
		rr_tp_client_release_reply(c.tp, &held[i].r);
	}
	for (unsigned i = 0; i < 300; i++) {
		rr_th_small_submit(&c, one, 0x3000 + i);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		CHECK(lend_ok(one));
		CHECK(one->r.lent != NULL);
		rr_tp_client_release_reply(c.tp, &one->r);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0u);
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.reconnects, 1u);   /* the cut, nothing else */
	rr_th_cl_stop(&c);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(lend_srv);
	rr_th_sq_destroy(&sq);
	free(held);
	free(one);
}

/* ---- short Replies copied into the call (issue 16 part FB) ---- */

/* Responder: Reply = xid, REPLY, then (xid & 0x1f) * 4 bytes (xid + i) &
 * 0xff: Payloads of 8 to 132 bytes by the XID. */
static struct rr_tp_server *short_srv;

static void short_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	uint8_t hdr[8], body[128];
	uint32_t n = (r->xid & 0x1f) * 4;
	struct rr_xprt_part parts[2] = {{hdr, 8, false}, {body, n, false}};

	(void)sq;
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	for (unsigned i = 0; i < n; i++)
		body[i] = (uint8_t)(r->xid + i);
	(void)rr_tp_server_reply(short_srv, r, parts, n ? 2 : 1, NULL);
	rr_tp_server_done(short_srv, r);
}

static bool short_ok(const struct rr_th_small *p)
{
	return reply_bytes_ok(p, (p->r.xid & 0x1f) * 4) && rr_get_be32(p->r.reply + 4) == 1;
}

/* A Reply of at most RR_CONN_REPLY_OWN (64) bytes to a Call without sinks
 * is copied whole into the call's rr_conn_rpc (reply_own): its Receive is
 * not lent, so more of them than TP_LEND_MAX (4) can be held unreleased
 * at once, each intact while later ones arrive into the reposted
 * Receives; a longer one is lent as before. Every Payload length of 8 to
 * 132 bytes (each branch of the copy) comes back byte for byte, and a
 * release of a copied Reply clears it without the session. */
TEST(inline_policy_short_replies_copied)
{
	struct rr_tp_conf sc, cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *held = calloc(32, sizeof(*held));
	unsigned done = 0;

	if (!rr_th_soft_ok()) {
		free(held);
		return;
	}
	REQUIRE(held);
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	cc.credits = 2;   /* 15 copied Replies held: more than credits and TP_LEND_MAX */
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, short_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &short_srv), 0);
	rr_th_sq_start(&sq);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(short_srv), rr_th_cl_count), 0);
	/* Payloads 8..64: copied, none lent, all held at once */
	for (unsigned i = 0; i <= 14; i++) {
		rr_th_small_submit(&c, &held[i], 0x4000 + i);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		CHECK(short_ok(&held[i]));
		CHECK(held[i].r.lent == NULL);
		CHECK(held[i].r.reply == held[i].r.reply_own);
	}
	for (unsigned i = 0; i <= 14; i++)
		CHECK(short_ok(&held[i]));   /* intact: not a Receive reused since */
	/* Payloads 68..132: lent (released one by one) */
	for (unsigned i = 15; i < 32; i++) {
		rr_th_small_submit(&c, &held[i], 0x4000 + i);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		CHECK(short_ok(&held[i]));
		CHECK(held[i].r.lent != NULL);
		rr_tp_client_release_reply(c.tp, &held[i].r);
	}
	for (unsigned i = 0; i <= 14; i++) {
		CHECK(short_ok(&held[i]));
		rr_tp_client_release_reply(c.tp, &held[i].r);
		CHECK(held[i].r.reply == NULL && held[i].r.reply_len == 0);
	}
	rr_th_cl_stop(&c);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(short_srv);
	rr_th_sq_destroy(&sq);
	free(held);
}
