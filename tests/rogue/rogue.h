/* SPDX-License-Identifier: BSD-2-Clause */
/* A wire-level rogue RPC-over-RDMA requester for the hostile-peer suite
 * (tests/rogue/test_rogue_*.c, docs/security.md "The rogue suite"). It owns
 * a plain TCP socket and speaks the iWARP stack by hand: the MPA
 * Request/Reply (RFC 5044 section 7, RFC 6581 revision 2) with the RFC 8797
 * private data block and the project's extension block (docs/protocol.md),
 * then FPDUs (RFC 5044 section 4, RFC 5041 DDP, RFC 5040 RDMAP, RDMA Commit
 * of draft-talpey-rdma-commit-00) built with the project's transmit
 * segmenter and parsed with its receive parser (src/rdma/soft/ddp.h,
 * rdmap.h, mpa.h), and RPC-over-RDMA Version 1 headers (RFC 8166, src/proto/
 * hdr.h) around ONC RPC messages (RFC 5531, src/rpc/rpcmsg.h). There is no
 * queue pair: nothing it sends is checked or ordered by a provider, so a test
 * can send what a hostile requester sends -- Calls with chunk lists naming
 * its own "memory" (regions it serves when the server RDMA Reads them and
 * into which it accepts RDMA Writes), RDMA Read Requests for any STag,
 * RDMA_DONE plain or as Send With Invalidate naming any STag, Terminates,
 * arbitrary tagged or raw FPDUs, several messages in one TCP write -- and it
 * can stop reading its socket (to stall the server's transmit), flood, or
 * open and abandon TCP connections. What comes back is decoded into events:
 * Send messages (Replies, RDMA_ERROR), completed Read Responses with their
 * bytes, RDMA Writes placed into its regions, the server's Read Requests,
 * Commit Responses, Terminates with their layer/type/code, EOF.
 *
 * Test code, no TEST() here, and no REQUIRE: every function returns 0 (or a
 * count) or a negative errno, so helper threads may use it too (one thread
 * per rogue). Not thread-safe per object. */
#ifndef RR_TESTS_ROGUE_H
#define RR_TESTS_ROGUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/hdr.h"
#include "proto/conn/privdata.h"
#include "rdma/soft/ddp.h"
#include "rdma/soft/mpa.h"
#include "rpc/rpcmsg.h"

/* ---- connection ---- */

struct rr_rogue_opts {
	uint32_t send_size;   /* RFC 8797 Send Size advertised (0: 4096) */
	uint32_t recv_size;   /* RFC 8797 Receive Size advertised (0: 4096); the
			       * server's reply threshold is at most this */
	bool remote_inv;      /* R: the server may Send With Invalidate */
	uint32_t ext_caps;    /* extension block capabilities (RR_PD_EXT_CAP_*);
			       * 0: no extension block */
	bool no_pd;           /* send no private data at all */
	uint16_t ird, ord;    /* MPA IRD/ORD offered (0: 16 each) */
	bool crc;             /* ask for MPA CRC */
	int rcvbuf;           /* SO_RCVBUF set before connecting (0: system) */
	const char *src;      /* local IPv4 address to connect from ("127.0.0.2":
			       * another host for the server's per-host limits);
			       * NULL: the system's choice */
	uint32_t fpdu_max;    /* largest FPDU it sends (0: 65483, loopback MSS) */
	unsigned timeout_ms;  /* TCP connect + MPA exchange (0: 10000) */
};

/* Fills @o with a well-behaved requester's settings: 4096/4096, R, reliable
 * reply and RDMA Commit offered, IRD/ORD 16. */
void rr_rogue_opts_default(struct rr_rogue_opts *o);

#define RR_ROGUE_MAX_REGIONS 32
#define RR_ROGUE_MAX_READS 256     /* own Read Requests outstanding */
#define RR_ROGUE_MAX_HELD 256      /* server Read Requests held */
#define RR_ROGUE_RECV_MAX (RR_PD_SIZE_MAX + 4096u) /* largest Send accepted */

/* Memory the rogue "registered": the server may RDMA Read it (when the
 * rogue named it in a Read chunk) and RDMA Write into it (Write / Reply
 * chunks); the rogue also places Read Responses of its own Read Requests
 * into it. [to, to + len) of STag @stag is @buf. */
struct rr_rogue_region {
	uint32_t stag;
	uint64_t to;
	uint8_t *buf;
	uint64_t len;
	uint64_t written;      /* bytes the server RDMA Wrote into it */
	uint64_t read;         /* bytes the server RDMA Read from it */
	bool used;
};

/* One of the rogue's RDMA Read Requests, in the order sent. */
struct rr_rogue_rreq {
	struct rr_rreq r;
	uint32_t got;          /* Read Response bytes placed so far */
	uint32_t tag;          /* caller's tag, reported with the event */
};

enum rr_rogue_serve {
	RR_ROGUE_SERVE_AUTO = 0,   /* answer the server's Read Requests at once */
	RR_ROGUE_SERVE_HOLD,       /* keep them (rr_rogue_serve_held answers) */
	RR_ROGUE_SERVE_REFUSE,     /* answer with a Terminate (Invalid STag) */
};

struct rr_rogue {
	int fd;
	bool eof;              /* the server closed (or reset) the connection */
	bool stalled;          /* rr_rogue_stall: the socket is not read */
	bool corked;           /* FPDUs accumulate until rr_rogue_uncork */
	struct rr_rogue_opts o;
	/* what was negotiated */
	struct rr_mpa_frame rep;   /* the server's MPA Reply */
	struct rr_mpa_conn mpa;
	struct rr_pd_info peer;    /* the server's private data */
	struct rr_pd_conn neg;     /* thresholds, R, extensions in use */
	bool commit;               /* RDMA Commit opcodes enabled */
	/* transmit */
	uint32_t tx_msn[RR_QN_COUNT];
	uint8_t *out;
	size_t out_len, out_cap;
	uint64_t bytes_sent;
	/* receive */
	struct rr_ddp_rx rx;
	uint8_t *stage;            /* bytes read from the socket, not parsed yet */
	size_t st_off, st_len, st_cap;
	uint8_t *msg;              /* the Send message being received */
	struct iovec msg_iov;
	uint64_t bytes_read;
	/* memory and RDMA Reads */
	struct rr_rogue_region reg[RR_ROGUE_MAX_REGIONS];
	struct rr_rogue_rreq rreq[RR_ROGUE_MAX_READS];
	unsigned rreq_head, rreq_count;
	enum rr_rogue_serve serve;
	struct rr_rreq held[RR_ROGUE_MAX_HELD];
	unsigned nheld;
	/* what went wrong on the server's side of the wire */
	bool violation;            /* the server broke a rule (see vterm) */
	struct rr_term vterm;      /* the Terminate the rogue would send */
	bool got_term;
	struct rr_term term;       /* the server's Terminate */
	/* counters */
	uint64_t msgs, writes, write_bytes, rreqs_served, rresp_bytes;
};

/* Connects to 127.0.0.1:@port and runs the MPA exchange as an initiator
 * with @o (NULL: rr_rogue_opts_default). On success *@out is a new rogue
 * (rr_rogue_free) in RDMA mode. Returns 0, -ECONNREFUSED (TCP refused or
 * MPA Reject; *@out is then NULL), -ETIMEDOUT, -EPROTO (a Reply that
 * breaks MPA), -ECONNRESET (closed during the exchange), -ENOMEM. */
int rr_rogue_open(struct rr_rogue **out, int port, const struct rr_rogue_opts *o);
/* Closes the socket (a plain close: no Terminate) and frees. NULL is fine. */
void rr_rogue_free(struct rr_rogue *g);
/* Half-close / abort without freeing: RST when @reset (SO_LINGER 0). */
void rr_rogue_shutdown(struct rr_rogue *g, bool reset);

/* A TCP connection to 127.0.0.1:@port from @src (NULL: any) that says
 * nothing (half-open for the server's MPA layer), or -errno. @rcvbuf as in
 * the options. The caller closes it. */
int rr_rogue_tcp(int port, int rcvbuf, const char *src);
/* The MPA Request the rogue would send with @o, written to @buf (cap 600);
 * its length or -errno. For handshakes driven by hand. */
int rr_rogue_mpa_request(const struct rr_rogue_opts *o, uint8_t *buf, size_t cap);

/* ---- memory ---- */

/* Adds a region (see struct rr_rogue_region); @buf is borrowed until it is
 * removed or the rogue freed. -ENOSPC when the table is full, -EEXIST for
 * a used STag. */
int rr_rogue_mem_add(struct rr_rogue *g, uint32_t stag, uint64_t to, void *buf, uint64_t len);
void rr_rogue_mem_del(struct rr_rogue *g, uint32_t stag);
struct rr_rogue_region *rr_rogue_mem_find(struct rr_rogue *g, uint32_t stag);

/* ---- transmit: one FPDU train per call; all return 0 or -errno
 * (-EPIPE once the connection is gone, -ETIMEDOUT when 10 s passed with the
 * socket full). While corked, nothing is written until rr_rogue_uncork,
 * which sends everything in one write(2). ---- */

void rr_rogue_cork(struct rr_rogue *g);
int rr_rogue_uncork(struct rr_rogue *g);
/* Stops (true) or resumes (false) reading the socket: while stalled the
 * rogue never reads, not even while its own writes wait for room. */
void rr_rogue_stall(struct rr_rogue *g, bool on);

/* A Send (@op RR_OP_SEND, _SEND_INV, _SEND_SE, _SEND_SE_INV) of @len bytes
 * on QN 0 with the next MSN; @inv_stag goes in the Invalidate STag field. */
int rr_rogue_send(struct rr_rogue *g, uint8_t op, uint32_t inv_stag, const void *msg,
		  size_t len);
/* An RDMA Read Request on QN 1 with the next MSN; remembered (with @tag) so
 * that its Read Responses are placed into the sink region and reported. */
int rr_rogue_read_req(struct rr_rogue *g, const struct rr_rreq *r, uint32_t tag);
/* An RDMA Write of @len bytes at (@stag, @to): tagged FPDUs. */
int rr_rogue_write(struct rr_rogue *g, uint32_t stag, uint64_t to, const void *data,
		   size_t len);
/* An RDMA Commit Request (QN 1); -EOPNOTSUPP unless Commit was negotiated
 * (use rr_rogue_raw to send one anyway). */
int rr_rogue_commit(struct rr_rogue *g, const struct rr_commit_req *c);
/* A Terminate (QN 2). */
int rr_rogue_terminate(struct rr_rogue *g, const struct rr_term *t);
/* Any bytes (a forged FPDU, garbage). */
int rr_rogue_raw(struct rr_rogue *g, const void *bytes, size_t len);
/* One FPDU built by hand: ctrl word fields and a header of @hlen bytes after
 * the control field (tagged: 12, untagged: 16), then @payload, pad, CRC. */
int rr_rogue_fpdu(struct rr_rogue *g, uint16_t ctrl, const uint8_t *hdr, size_t hlen,
		  const void *payload, size_t plen);

/* ---- receive ---- */

enum rr_rogue_ev_type {
	RR_ROGUE_EV_TIMEOUT = 0,
	RR_ROGUE_EV_MSG,          /* a whole Send: msg/msg_len/op/inv_stag */
	RR_ROGUE_EV_READ_DONE,    /* all Read Responses of one own Read Request */
	RR_ROGUE_EV_WRITE,        /* an RDMA Write segment placed in a region */
	RR_ROGUE_EV_READ_REQ,     /* the server's Read Request (served, held or
				   * refused as g->serve says) */
	RR_ROGUE_EV_COMMIT_RESP,
	RR_ROGUE_EV_TERMINATE,    /* the server's Terminate (term); the stream
				   * ends, EOF follows */
	RR_ROGUE_EV_EOF,          /* TCP connection closed or reset */
	RR_ROGUE_EV_VIOLATION,    /* the server broke a rule; g->vterm */
};

struct rr_rogue_ev {
	enum rr_rogue_ev_type type;
	uint8_t op;
	/* MSG: valid until the next receive call */
	const uint8_t *msg;
	uint32_t msg_len;
	uint32_t inv_stag;
	/* WRITE */
	uint32_t stag;
	uint64_t to;
	uint32_t len;
	/* READ_DONE: the request; READ_REQ: the server's request */
	struct rr_rreq rreq;
	uint32_t tag;
	struct rr_commit_resp cresp;
	struct rr_term term;
};

/* The next event within @ms milliseconds (type TIMEOUT when none). Returns
 * the type (>= 0) or -errno for a local failure. After EOF it keeps
 * returning EOF. */
int rr_rogue_next(struct rr_rogue *g, struct rr_rogue_ev *ev, unsigned ms);
/* Waits up to @ms for an event of @type (in @ev), serving the server's
 * Read Requests and taking its Writes meanwhile. Returns @type, or
 * -ECONNRESET (a Terminate came: g->term), -EPIPE (EOF), -ETIMEDOUT,
 * -EPROTO (violation) when the connection ends or time runs out first. */
int rr_rogue_wait_event(struct rr_rogue *g, enum rr_rogue_ev_type type, unsigned ms,
			struct rr_rogue_ev *ev);
/* Waits up to @ms for a Send message, serving the server's Read Requests
 * and taking its Writes meanwhile. Returns the message length (the bytes
 * are at g->msg), or -ECONNRESET (a Terminate came: g->term), -EPIPE (EOF),
 * -ETIMEDOUT, -EPROTO (violation). */
int rr_rogue_wait_msg(struct rr_rogue *g, unsigned ms);
/* Waits up to @ms until the connection ends, skipping what comes. Returns
 * 1 when a Terminate came first (in g->term), 0 for EOF without one,
 * -ETIMEDOUT while it stays open. */
int rr_rogue_wait_end(struct rr_rogue *g, unsigned ms);
/* Waits up to @ms until at least one Read Request of the server is held
 * (RR_ROGUE_SERVE_HOLD): 0, or the errors of rr_rogue_wait_event. */
int rr_rogue_wait_held(struct rr_rogue *g, unsigned ms);
/* True when the bytes received so far end inside an FPDU (the stream
 * stopped mid-segment). */
static inline bool rr_rogue_mid_fpdu(const struct rr_rogue *g)
{
	return g->rx.state == RR_RX_PAYLOAD || g->rx.state == RR_RX_TRAILER ||
	       g->rx.state == RR_RX_BODY || (g->rx.state == RR_RX_HDR && g->rx.hdr_have);
}
/* Answers the held Read Requests (all of them). */
int rr_rogue_serve_held(struct rr_rogue *g);

/* ---- RPC-over-RDMA ---- */

/* An ONC RPC Call (RFC 5531: AUTH_NONE credential and verifier) followed by
 * @alen bytes of arguments, into @buf. Its length, or -EMSGSIZE. */
int rr_rogue_rpc_call(uint8_t *buf, size_t cap, uint32_t xid, uint32_t prog, uint32_t vers,
		      uint32_t proc, const void *args, size_t alen);
/* Sends the transport header @h (RDMA_MSG or RDMA_NOMSG, encoded without
 * the Position checks: rr_hdr_encode_raw) followed by @payload as one Send
 * (with @inv: Send With Invalidate of @inv_stag, whatever its value). */
int rr_rogue_send_rpcrdma(struct rr_rogue *g, const struct rr_hdr *h, const void *payload,
			  size_t plen, bool inv, uint32_t inv_stag);
/* RDMA_DONE for @xid, as a plain Send or (@inv) as Send With Invalidate of
 * @inv_stag, whatever its value (0 included). */
int rr_rogue_send_done(struct rr_rogue *g, uint32_t xid, bool inv, uint32_t inv_stag);
/* An RDMA_MSG Call carrying @rpc (@rlen bytes, the whole RPC message inline)
 * with no chunks and credit request 32. */
int rr_rogue_send_call(struct rr_rogue *g, uint32_t xid, const void *rpc, size_t rlen);

/* A decoded Reply (what the server sent in one Send). */
struct rr_rogue_reply {
	struct rr_hdr hdr;         /* transport header (verdict RR_HDR_OK) */
	bool has_rpc;              /* RDMA_MSG: RPC Reply inline */
	struct rr_rpc_reply rpc;
	const uint8_t *res;        /* results after the RPC Reply header */
	uint32_t res_len;
	const struct rr_hdr_chunk *rchunk; /* reliable reply: the Read chunk */
};
/* Decodes @msg as a Reply under what @g negotiated. 0, or -EPROTO when the
 * transport header is rejected (out->hdr.reason says why), -EBADMSG when
 * the inline RPC Reply does not decode. The result points into @msg. */
int rr_rogue_parse_reply(const struct rr_rogue *g, const uint8_t *msg, size_t len,
			 struct rr_rogue_reply *out);

/* Sends RDMA Read Requests for every segment of the Position-zero Read
 * chunk of @rep (a reliable-reply Reply) into @sink (@cap bytes), which is
 * added as region @sink_stag at TO 0. The segments are read in order into
 * consecutive bytes of @sink. Inside rr_rogue_cork they wait for the
 * caller's uncork. Returns the total length, -EMSGSIZE when it does not
 * fit, -EINVAL without a Read chunk. */
long rr_rogue_pull_start(struct rr_rogue *g, const struct rr_rogue_reply *rep,
			 uint32_t sink_stag, uint8_t *sink, size_t cap);
/* Waits up to @ms until the rogue has no Read Request outstanding. 0, or
 * -ECONNRESET / -EPIPE / -ETIMEDOUT / -EPROTO. Messages that arrive
 * meanwhile are lost (use only when none is expected). */
int rr_rogue_reads_wait(struct rr_rogue *g, unsigned ms);

/* ---- the file service (tools/fileservice/fileservice.h) arguments ---- */

/* READ(path, offset, count). Length of the arguments or -EMSGSIZE. */
int rr_rogue_fs_read_args(uint8_t *b, size_t cap, const char *path, uint64_t off,
			  uint32_t count);
/* WRITE(path, offset, flags, data<len>): with @data NULL the data item is
 * left out (it goes in a Read chunk at the returned length: the Position). */
int rr_rogue_fs_write_args(uint8_t *b, size_t cap, const char *path, uint64_t off,
			   uint32_t flags, const void *data, uint32_t len);
/* PUSH_OPEN(path, size). */
int rr_rogue_fs_push_args(uint8_t *b, size_t cap, const char *path, uint64_t size);

/* ---- one-shot helpers on top (FS_PROG / FS_VERS) ---- */

/* Sends an RDMA_MSG Call of the file service: @proc with @args inline,
 * @nwrites Write chunks (one segment each: @writes[i]) and an optional
 * Reply chunk (@reply, one segment). */
int rr_rogue_fs_call(struct rr_rogue *g, uint32_t xid, uint32_t proc, const void *args,
		     size_t alen, const struct rr_hdr_seg *writes, unsigned nwrites,
		     const struct rr_hdr_seg *reply);

/* Terminate comparison for assertions. */
static inline bool rr_rogue_term_is(const struct rr_term *t, uint8_t layer, uint8_t etype,
				    uint8_t ecode)
{
	return t->layer == layer && t->etype == etype && t->ecode == ecode;
}

/* "RDMAP/1/0x00" style text of @t in @buf (for messages). */
const char *rr_rogue_term_str(const struct rr_term *t, char *buf, size_t cap);

#endif
