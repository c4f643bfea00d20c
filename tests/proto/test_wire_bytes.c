/* SPDX-License-Identifier: BSD-2-Clause */
/* The exact bytes the transport core sends (RFC 8166 section 4.2 XDR): every
 * message form the requester marshals (Short, with Write and Reply chunks,
 * Chunked with Read chunks, Long Call, the reliable-reply policy's Call
 * without a Reply chunk) and every one the responder builds (inline Reply,
 * Write list echo with consumed segments and an unused chunk, Long Reply
 * through the Reply chunk, RDMA_ERROR ERR_VERS / ERR_CHUNK, the
 * reliable-reply Read-chunk Reply after rr_rrep_rsp_patch(), RDMA_DONE),
 * compared with vectors recorded from the implementation before the header
 * model was unified (issue 15): a change of representation must not change
 * one byte on the wire. Registrations get fixed STags and addresses, so the
 * bytes depend on nothing but the code. RR_WIRE_PRINT=1 prints what was
 * sent, in the form of the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/rrep.h"
#include "test.h"

static bool wire_print;

/* Recorded from main 303eb58 (before issue 15's one header model) with
 * RR_WIRE_PRINT=1: name, then the bytes in hex (Sends) or the RDMA Writes
 * and the Send With Invalidate choice of a Reply plan. */
static const struct {
	const char *name;
	const char *want;
} vectors[] = {
	{"short call",
	 "c0de0001000000010000002000000000000000000000000000000000c0de000100000000"
	 "3940474e555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b12"},
	{"call with write list and reply chunk",
	 "c0de00010000000100000020000000000000000000000001000000030000500000000040"
	 "00007f0000000000000050000000004000007f0000000040000050000000001600007f00"
	 "000000800000000100000001000050010000001400007f00001000000000000000000001"
	 "00000005000050020000004000007f0000200000000050020000004000007f0000200040"
	 "000050020000004000007f0000200080000050020000004000007f00002000c000005002"
	 "0000002c00007f0000200100c0de0001000000003940474e555c636a71787f868d949ba2"
	 "a9b0b7bec5ccd3dae1e8eff6fd040b120000eeee0000eeee3a41484f565d646b72798087"
	 "8e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f363d444b525960676e757c83"
	 "8a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f"
	 "868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e353c434a51585f666d747b"
	 "828900000000fefe0000fefe3b424950"},
	{"chunked call",
	 "c0de00010000000100000020000000000000000100000028000050000000004000007f00"
	 "000000000000000100000028000050000000004000007f00000000400000000100000028"
	 "000050000000000200007f000000008000000001000000b8000050010000004000007f00"
	 "0010000000000001000000b8000050010000000600007f00001000400000000000000000"
	 "00000000c0de0001000000003940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da"
	 "e1e8eff6fd040b120000fefe0000fefe3b424950"},
	{"long call",
	 "c0de00010000000100000020000000010000000100000000000050000000004000007f00"
	 "000000000000000100000000000050000000004000007f00000000400000000100000000"
	 "000050000000004000007f00000000800000000100000000000050000000004000007f00"
	 "000000c00000000100000000000050000000004000007f00000001000000000100000000"
	 "000050000000004000007f00000001400000000100000000000050000000004000007f00"
	 "000001800000000100000000000050000000004000007f00000001c00000000100000000"
	 "000050000000004000007f00000002000000000100000000000050000000002400007f00"
	 "000002400000000100000258000050010000004000007f00001000000000000100000258"
	 "000050010000004000007f00001000400000000100000258000050010000000200007f00"
	 "0010008000000001000002e8000050020000004000007f000020000000000001000002e8"
	 "000050020000000600007f00002000400000000000000001000000030000500300000040"
	 "00007f0000300000000050030000004000007f0000300040000050030000001600007f00"
	 "003000800000000000000000"},
	{"reliable-reply call",
	 "c0de00010000000100000020000000000000000000000001000000030000500000000040"
	 "00007f0000000000000050000000004000007f0000000040000050000000001600007f00"
	 "000000800000000000000000c0de0001000000003940474e555c636a71787f868d949ba2"
	 "a9b0b7bec5ccd3dae1e8eff6fd040b12"},
	{"inline reply",
	 "c0de0001000000010000000900000000000000000000000000000000c0de000100000001"
	 "3d444b525960676e757c838a91989fa6adb4bbc2c9d0d7de"},
	{"inline reply: writes",
	 "inv=0:0"},
	{"write list reply",
	 "c0de00010000000100000009000000000000000000000001000000020000500000000040"
	 "00007f0000000000000050000000002400007f0000000040000000010000000000000000"
	 "00000000c0de0001000000013d444b525960676e757c838a91989fa6adb4bbc2c9d0d7de"
	 "0000abab0000abab"},
	{"write list reply: writes",
	 "5000@7f0000000000+64 5000@7f0000000040+36 inv=1:5000"},
	{"long reply",
	 "c0de00010000000100000009000000010000000000000000000000010000000500005000"
	 "0000004000007f0000000000000050000000004000007f00000000400000500000000040"
	 "00007f0000000080000050000000004000007f00000000c0000050000000002200007f00"
	 "00000100"},
	{"long reply: writes",
	 "5000@7f0000000000+64 5000@7f0000000040+64 5000@7f0000000080+64 5000@7f00000000c0+64 5000@7f0000000100+34 inv=1:5000"},
	{"oversize reply",
	 "c0de000100000001000000090000000400000002"},
	{"oversize reply: writes",
	 "inv=0:0"},
	{"reliable-reply read chunk reply",
	 "c0de00010000000100000009000000010000000100000000000099990000004000007e00"
	 "000000000000000100000000000099990000004000007e00000000400000000100000000"
	 "000099990000004000007e00000000800000000100000000000099990000004000007e00"
	 "000000c00000000100000000000099990000002c00007e00000001000000000000000001"
	 "00000002000050000000004000007f0000000000000050000000003800007f0000000040"
	 "0000000000000000"},
	{"reliable-reply read chunk reply: writes",
	 "5000@7f0000000000+64 5000@7f0000000040+56 inv=1:5000"},
	{"err_vers",
	 "c0de0002000000020000000700000004000000010000000100000001"},
	{"err_chunk",
	 "c0de000200000001000000070000000400000002"},
	{"done",
	 "c0de0003000000010000000b00000003"},
	{NULL, NULL},
};

static const char *vector(const char *name)
{
	for (size_t i = 0; vectors[i].name; i++)
		if (strcmp(vectors[i].name, name) == 0)
			return vectors[i].want;
	return "(no vector)";
}

static void wire_compare(const char *name, const char *got)
{
	const char *want = vector(name);

	if (wire_print)
		printf("\t{\"%s\",\n\t \"%s\"},\n", name, got);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "  %s: sent %s\n  %s: want %s\n", name, got, name, want);
		CHECK(strcmp(got, want) == 0);
	}
}

/* Compares the @n bytes at @got with the vector @name. */
static void wire_check(const char *name, const uint8_t *got, size_t n)
{
	static char hex[16384];
	size_t k = 0;

	REQUIRE(2 * n < sizeof(hex));
	for (size_t i = 0; i < n; i++)
		k += (size_t)snprintf(hex + k, sizeof(hex) - k, "%02x", got[i]);
	hex[k] = 0;
	wire_compare(name, hex);
}

/* A registration as a driver would fill it: STag 0x5000 + i, remote
 * address 0x7f00_0000_0000 + 1 MiB * i (nothing is read or written). */
static void fake_register(struct rr_xprt_rqst *c)
{
	for (unsigned i = 0; i < c->nregs; i++) {
		c->regs[i].stag = 0x5000u + i;
		c->regs[i].addr = 0x7f0000000000ull + ((uint64_t)i << 20);
		c->regs[i].valid = true;
	}
}

static void pattern(uint8_t *p, size_t len, uint32_t xid, uint32_t msg_type, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, msg_type);
}

struct wire {
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_requester req;
	struct rr_xprt_responder rsp;
	uint8_t send[8192];
	int send_len;
	struct rr_xprt_rqst *call;
};

static void wire_init(struct wire *w, void (*tune)(struct rr_xprt_params *))
{
	memset(w, 0, sizeof(*w));
	rr_test_env_init(&w->te, 3);
	rr_xprt_params_default(&w->p);
	w->p.inline_ddp = false;
	w->p.call_inline = 512;
	w->p.reply_inline = 256;
	w->p.max_seg_len = 64;
	w->p.local_r = w->p.peer_r = true;
	if (tune)
		tune(&w->p);
	rr_xprt_req_init(&w->req, &w->te.env, &w->p, NULL);
	rr_xprt_rsp_init(&w->rsp, &w->te.env, &w->p, NULL);
}

static void wire_fini(struct wire *w)
{
	if (w->call)
		rr_xprt_rqst_release(&w->req, w->call);
	rr_xprt_req_fini(&w->req);
	rr_xprt_rsp_fini(&w->rsp);
	CHECK_EQ(w->te.live, 0);
}

/* Marshals the Call @d with credit request 32 into w->send. */
static void wire_call(struct wire *w, const struct rr_xprt_rqst_desc *d)
{
	REQUIRE_EQ(rr_xprt_rqst_prepare(&w->req, d, &w->call), 0);
	fake_register(w->call);
	w->send_len = rr_xprt_rqst_marshal(&w->req, w->call, 32, w->send, sizeof(w->send));
	REQUIRE(w->send_len > 0);
}

/* The responder's view of w->send: a Call context whose RDMA Reads are
 * served from the requester's registrations. */
static struct rr_xprt_rcall *wire_receive(struct wire *w)
{
	struct rr_xprt_rcall *rc = NULL;
	uint8_t err[28];
	size_t elen;
	enum rr_xprt_rsp_action a;

	a = rr_xprt_rsp_recv(&w->rsp, w->send, (size_t)w->send_len, 16, err, &elen, &rc);
	if (a == RR_XPRT_A_READ) {
		for (uint32_t i = 0; i < rc->nreads; i++) {
			const struct rr_xprt_read_op *o = &rc->reads[i];
			const struct rr_xprt_reg *g = &w->call->regs[o->stag - 0x5000u];

			REQUIRE(o->stag - 0x5000u < w->call->nregs);
			REQUIRE(o->remote >= g->addr && o->remote - g->addr + o->len <= g->len);
			memcpy(rc->buf + o->local_off, (uint8_t *)g->base + (o->remote - g->addr),
			       o->len);
		}
		a = rr_xprt_rsp_assemble(&w->rsp, rc, 16, err, &elen);
	}
	REQUIRE_EQ(a, RR_XPRT_A_DELIVER);
	return rc;
}

/* The RDMA Writes of @plan ("stag@remote+len" each) and its invalidation
 * choice, compared with the vector @name. */
static void wire_writes(const char *name, const struct rr_xprt_reply_plan *plan)
{
	char s[2048];
	size_t k = 0;

	for (uint32_t i = 0; i < plan->nwrites && k < sizeof(s) - 64; i++)
		k += (size_t)snprintf(s + k, sizeof(s) - k, "%x@%llx+%u ", plan->writes[i].stag,
				      (unsigned long long)plan->writes[i].remote,
				      plan->writes[i].len);
	(void)snprintf(s + k, sizeof(s) - k, "inv=%d:%x", plan->send_inv,
		       plan->send_inv ? plan->inv_stag : 0u);
	wire_compare(name, s);
}

static uint8_t head[600], item[300], item2[300], res[400], tail_[64];

static void wire_patterns(void)
{
	wire_print = getenv("RR_WIRE_PRINT") != NULL;
	pattern(head, sizeof(head), 0xc0de0001, 0, 1);
	pattern(item, sizeof(item), 0xeeee, 0xeeee, 2);
	pattern(item2, sizeof(item2), 0xdddd, 0xdddd, 4);
	pattern(tail_, sizeof(tail_), 0xfefe, 0xfefe, 3);
}

static void tune_rrep(struct rr_xprt_params *p)
{
	p->reliable_reply = true;
}

static void tune_small_call(struct rr_xprt_params *p)
{
	p->call_inline = 224;
}

/* ---- the requester's Calls ---- */

TEST(wire_bytes_calls)
{
	static struct wire w;
	struct rr_xprt_sink sinks[2] = {{res, 150}, {res + 200, 20}};
	struct rr_xprt_part parts[4] = {{head, 40, false}, {item, 130, true}, {tail_, 12, false},
					{item2, 70, true}};
	struct rr_xprt_rqst_desc d;

	wire_patterns();

	/* Short Call: RDMA_MSG, empty lists, the whole RPC inline. */
	wire_init(&w, NULL);
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = parts, .nparts = 1,
				       .max_reply = 64};
	wire_call(&w, &d);
	wire_check("short call", w.send, (size_t)w.send_len);
	wire_fini(&w);

	/* Two Write chunks (150 bytes in 64-byte segments: 3 segments; 20
	 * bytes: 1) and a Reply chunk (max_reply 300: 5 segments), the DDP
	 * argument inline with its pad. */
	wire_init(&w, NULL);
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = parts, .nparts = 3,
				       .sinks = sinks, .nsinks = 2, .max_reply = 300};
	wire_call(&w, &d);
	wire_check("call with write list and reply chunk", w.send, (size_t)w.send_len);
	wire_fini(&w);

	/* Chunked Call: both DDP arguments move to Read chunks (3 and 2
	 * segments, positions in the unreduced stream), the rest inline. */
	wire_init(&w, tune_small_call);
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = parts, .nparts = 4,
				       .max_reply = 64};
	wire_call(&w, &d);
	REQUIRE_EQ(w.call->form, RR_XPRT_FORM_READ);
	wire_check("chunked call", w.send, (size_t)w.send_len);
	wire_fini(&w);

	/* Long Call: RDMA_NOMSG, the reduced stream (600 + 12 bytes) in a
	 * Position-zero Read chunk of 10 segments, the DDP items after it,
	 * and a Write chunk. */
	wire_init(&w, NULL);
	parts[0].len = 600;
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = parts, .nparts = 4,
				       .sinks = sinks, .nsinks = 1, .max_reply = 64};
	wire_call(&w, &d);
	REQUIRE_EQ(w.call->form, RR_XPRT_FORM_LONG);
	wire_check("long call", w.send, (size_t)w.send_len);
	wire_fini(&w);
	parts[0].len = 40;

	/* Reliable reply negotiated, maximum unknown: no Reply chunk (draft
	 * 5.3.1), a Write chunk. */
	wire_init(&w, tune_rrep);
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = parts, .nparts = 1,
				       .sinks = sinks, .nsinks = 1, .max_reply = 1u << 20,
				       .max_unknown = true};
	wire_call(&w, &d);
	wire_check("reliable-reply call", w.send, (size_t)w.send_len);
	wire_fini(&w);
}

/* ---- the responder's Replies ---- */

/* The Reply to the Call @d whose reply stream is @rparts, under @tune. */
static void wire_reply(const char *name, void (*tune)(struct rr_xprt_params *),
		       const struct rr_xprt_rqst_desc *d, const struct rr_xprt_part *rparts,
		       unsigned nrparts)
{
	static struct wire w;
	static uint8_t out[8192];
	struct rr_xprt_reply_plan plan;
	struct rr_xprt_rcall *rc;
	char wname[128];

	wire_init(&w, tune);
	wire_call(&w, d);
	rc = wire_receive(&w);
	REQUIRE_EQ(rr_xprt_rsp_reply(&w.rsp, rc, rparts, nrparts, 9, out, sizeof(out), &plan), 0);
	if (plan.read_chunk) {
		rr_rrep_rsp_patch(out, &plan, 0x9999, 0x7e0000000000ull);
		rr_free(&w.te.env, plan.rr_buf);
	}
	wire_check(name, out, plan.send_len);
	snprintf(wname, sizeof(wname), "%s: writes", name);
	wire_writes(wname, &plan);
	rr_xprt_rcall_release(&w.rsp, rc);
	wire_fini(&w);
}

TEST(wire_bytes_replies)
{
	struct rr_xprt_sink sinks[2] = {{res, 150}, {res + 200, 20}};
	struct rr_xprt_part cparts[2] = {{head, 40, false}, {item, 130, true}};
	struct rr_xprt_part rparts[3];
	uint8_t rhead[300], rtail[8];
	struct rr_xprt_rqst_desc d;

	wire_patterns();
	pattern(rhead, sizeof(rhead), 0xc0de0001, 1, 5);
	pattern(rtail, sizeof(rtail), 0xabab, 0xabab, 6);

	/* Inline Reply to a Short Call. */
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = cparts, .nparts = 1,
				       .max_reply = 64};
	rparts[0] = (struct rr_xprt_part){rhead, 32, false};
	wire_reply("inline reply", NULL, &d, rparts, 1);

	/* A 100-byte result in the first of two Write chunks (two segments
	 * consumed, the second partly; the unused chunk echoed with count 0),
	 * the rest inline; Send With Invalidate names the first Write
	 * chunk's STag. */
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = cparts, .nparts = 2,
				       .sinks = sinks, .nsinks = 2, .max_reply = 64};
	rparts[0] = (struct rr_xprt_part){rhead, 32, false};
	rparts[1] = (struct rr_xprt_part){item, 100, true};
	rparts[2] = (struct rr_xprt_part){rtail, 8, false};
	wire_reply("write list reply", NULL, &d, rparts, 3);

	/* Long Reply: 290 bytes through the Reply chunk (5 x 64-byte
	 * segments, the consumed ones returned). */
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = cparts, .nparts = 1,
				       .max_reply = 300};
	rparts[0] = (struct rr_xprt_part){rhead, 290, false};
	wire_reply("long reply", NULL, &d, rparts, 1);

	/* A Reply that fits nowhere: ERR_CHUNK (RFC 8166), or with reliable
	 * reply a Position-zero Read chunk over the responder's buffer. */
	d = (struct rr_xprt_rqst_desc){.xid = 0xc0de0001, .parts = cparts, .nparts = 1,
				       .sinks = sinks, .nsinks = 1, .max_reply = 64};
	rparts[0] = (struct rr_xprt_part){rhead, 300, false};
	rparts[1] = (struct rr_xprt_part){item, 120, true};
	wire_reply("oversize reply", NULL, &d, rparts, 2);
	d.max_reply = 1u << 20;
	d.max_unknown = true;
	wire_reply("reliable-reply read chunk reply", tune_rrep, &d, rparts, 2);
}

/* RDMA_ERROR answers to bad Calls, and RDMA_DONE. */
TEST(wire_bytes_errors_and_done)
{
	static struct wire w;
	static uint8_t call[64];
	struct rr_xprt_rcall *rc = NULL;
	uint8_t err[28], done[16];
	size_t elen = 0;

	wire_patterns();
	wire_init(&w, NULL);
	memset(call, 0, sizeof(call));
	rr_put_be32(call, 0xc0de0002);
	rr_put_be32(call + 4, 2);           /* rdma_vers 2 */
	rr_put_be32(call + 8, 5);
	CHECK_EQ(rr_xprt_rsp_recv(&w.rsp, call, 40, 7, err, &elen, &rc), RR_XPRT_A_ERROR);
	wire_check("err_vers", err, elen);
	rr_put_be32(call + 4, 1);
	rr_put_be32(call + 12, 9);          /* unknown rdma_proc */
	CHECK_EQ(rr_xprt_rsp_recv(&w.rsp, call, 40, 7, err, &elen, &rc), RR_XPRT_A_ERROR);
	wire_check("err_chunk", err, elen);
	REQUIRE_EQ(rr_rrep_encode_done(0xc0de0003, 11, done, sizeof(done)), 16);
	wire_check("done", done, 16);
	wire_fini(&w);
}

/* The big-endian helpers of src/common/common.h (one load or store and a
 * byte swap since issue 16 part AP) write and read exactly the wire order
 * at every alignment, and touch no byte beside theirs. */
TEST(wire_bytes_be_helpers)
{
	static const uint8_t w64[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
	uint8_t buf[24];

	for (size_t off = 0; off < 8; off++) {
		memset(buf, 0xa5, sizeof(buf));
		rr_put_be16(buf + off, 0x0123);
		CHECK_MEM(buf + off, w64, 2);
		CHECK_EQ(buf[off + 2], 0xa5);
		CHECK_EQ(rr_get_be16(buf + off), 0x0123);

		memset(buf, 0xa5, sizeof(buf));
		rr_put_be32(buf + off, 0x01234567u);
		CHECK_MEM(buf + off, w64, 4);
		CHECK_EQ(buf[off + 4], 0xa5);
		if (off)
			CHECK_EQ(buf[off - 1], 0xa5);
		CHECK_EQ(rr_get_be32(buf + off), 0x01234567u);

		memset(buf, 0xa5, sizeof(buf));
		rr_put_be64(buf + off, 0x0123456789abcdefull);
		CHECK_MEM(buf + off, w64, 8);
		CHECK_EQ(buf[off + 8], 0xa5);
		CHECK_EQ(rr_get_be64(buf + off), 0x0123456789abcdefull);
		CHECK_EQ(rr_get_be32(buf + off + 4), 0x89abcdefu);
	}
}
