/* SPDX-License-Identifier: BSD-2-Clause */
/* Test-thread steps shared by the rogue suite's tests (tests/rogue/
 * test_rogue_*.c): open a rogue, send a file service Call and decode its
 * Reply, obtain a reliable-reply Read chunk, check pulled bytes, expect a
 * Terminate, check that a well-behaved client is still served. They use
 * REQUIRE/CHECK, so call them from the test's own thread only (helper
 * threads use rogue.h / rogue_fx.h, which return errors). */
#ifndef RR_TESTS_ROGUE_T_H
#define RR_TESTS_ROGUE_T_H

#include "rogue.h"
#include "rogue_fx.h"

/* A rogue connected to @port with @o (NULL: rr_rogue_opts_default). */
struct rr_rogue *rt_open(int port, const struct rr_rogue_opts *o);
/* A rogue with a small receive buffer (for stalls) and 1 KiB receives:
 * every Reply above ~1 KiB comes as a Read chunk. */
struct rr_rogue *rt_open_small(int port);

/* Waits (up to @ms) for the next Send and decodes it as a Reply. */
void rt_reply(struct rr_rogue *g, unsigned ms, struct rr_rogue_reply *rep);

/* READ(@path, @off, @count) with no Write chunk and no Reply chunk, so the
 * Reply (larger than the rogue's 1..4 KiB receives) must come as a
 * responder-provided Read chunk: REQUIREs an RDMA_NOMSG Reply with one. */
void rt_read_rrep(struct rr_rogue *g, uint32_t xid, const char *path, uint64_t off,
		  uint32_t count, struct rr_rogue_reply *rep);
/* Raises the server's grant to this rogue to @want at least, as a
 * well-behaved requester would see it happen (the server ends a connection
 * that sends beyond its grant: RFC 8166 section 4.3.1): rounds of as many
 * NULL Calls as the grant allows, each answered before the next (a server's
 * shared pool doubles the grant of a peer that uses all of it). Nothing may
 * be outstanding. Returns the grant. */
uint32_t rt_grant_up(struct rr_rogue *g, uint32_t want);
/* The same for @n Calls sent in one write (xid, xid+1, ...), after the
 * grant allows @n (rt_grant_up); the Replies are not waited for. */
void rt_send_reads(struct rr_rogue *g, uint32_t xid, unsigned n, const char *path,
		   uint32_t count);

/* Length of the RPC Reply of a READ of @count bytes (what a Read chunk
 * holds): RPC header 24 + status + eof + length + data + pad. */
static inline uint32_t rt_read_reply_len(uint32_t count)
{
	return 24 + 12 + ((count + 3) & ~3u);
}
/* Checks @p (@len bytes of a READ's RPC Reply, starting at byte @from of
 * the Reply) against what the Reply of @xid must be: FS_OK, @eof, @count
 * bytes of pattern @seed from file offset @off. Returns the first
 * offset that differs, or -1. */
long long rt_read_reply_diff(const uint8_t *p, size_t len, uint32_t from, uint32_t xid,
			     bool eof, uint32_t seed, uint64_t off, uint32_t count);

/* Expects the connection to end within @ms with a Terminate of
 * @layer/@etype/@ecode followed by EOF. */
void rt_expect_term(struct rr_rogue *g, unsigned ms, uint8_t layer, uint8_t etype,
		    uint8_t ecode);
/* After a burst the server could not take (@r: what the wait for an
 * answer returned, < 0): the connection ends, and the Terminate, if one
 * got through, is DDP "untagged buffer, no buffer for MSN" (RFC 5041
 * section 8). It may not get through: a server that closes with the
 * burst's bytes still unread makes its TCP reset the connection, and a
 * reset may drop what was in flight; then EOF is all there is. */
void rt_expect_burst_end(struct rr_rogue *g, int r, struct rr_fx_srv *f);
/* Expects a NULL call on @g to be answered (the connection still works). */
void rt_expect_null_ok(struct rr_rogue *g, uint32_t xid);

/* A well-behaved client on another connection completes calls within
 * 10 s. */
void rt_probe_ok(int port);

/* An STag that no connection was ever given (rotates the key byte of
 * @near and sets a high index): with the soft provider's STag layout the
 * index is the upper 24 bits, so this names a slot far beyond any table
 * a test fills. */
uint32_t rt_unknown_stag(uint32_t near);

/* The common start of the reliable-reply attacks: an in-process server,
 * file "r.bin" of @len bytes (pattern RT_SEED), a rogue (@small: 1 KiB
 * receives and a 4 KiB socket buffer, for stalls) and one READ of the
 * whole file whose Reply came as a Read chunk (XID RT_XID): its STag and
 * length, and a sink buffer for pulling it. */
struct rt_rrep {
	struct rr_fx_srv f;
	struct rr_rogue *g;
	struct rr_rogue_reply rep;
	uint32_t len;     /* file bytes read */
	uint32_t stag;    /* the Read chunk's STag (every segment has it) */
	uint64_t to;      /* its first segment's Tagged Offset */
	uint32_t total;   /* the Read chunk's length */
	uint8_t *sink;
};
#define RT_XID 0x6a000001u
#define RT_SEED 21u
void rt_rrep_setup(struct rt_rrep *x, uint32_t len, bool small);
void rt_rrep_teardown(struct rt_rrep *x);
/* Pulls the whole chunk into x->sink and checks every byte. */
void rt_rrep_pull_check(struct rt_rrep *x);

/* PUSH_OPEN(@path, @size) on @g: REQUIREs FS_OK and returns the region
 * (STag, Tagged Offset of its first byte) and where it starts in the file. */
struct rt_push {
	uint32_t stag;
	uint64_t to;
	uint64_t len;
	uint64_t file_off;
};
void rt_push_open(struct rr_rogue *g, uint32_t xid, const char *path, uint64_t size,
		  struct rt_push *p);
/* RDMA Commit of [@to, @to + @len) of @stag; returns the Commit Response's
 * Status, or -errno (no response: the connection ended). */
int rt_commit(struct rr_rogue *g, uint32_t id, uint32_t stag, uint64_t to, uint32_t len);

#define RT_MS 10000u   /* the wide bound of every wait */
/* The bound of a wait for the answers to Calls whose handlers read hundreds
 * of MiB before the Reply's budget refuses them (the finding 4 tests: 32
 * READs of 8 MiB each; 300 MiB over 20 connections). A liveness bound, not a
 * timing: under ASan on a host at load ~50 the 256 MiB took longer than
 * RT_MS. */
#define RT_BIG_MS 120000u

#endif
