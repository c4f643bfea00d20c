/* SPDX-License-Identifier: BSD-2-Clause */
/* DDP segments in MPA FPDUs (RFC 5041 sections 4-8 over RFC 5044 section 4):
 * the transmit segmenter and the receive parser, both sans-I/O.
 *
 * FPDU (RFC 5044 4.1, as Linux siw sends it: no markers, CRC field always
 * present and zero when CRC is off):
 *   ULPDU_Length BE16 | DDP/RDMAP control BE16 | tagged: STag(4) TO(8)
 *   | untagged: InvSTag/rsvd(4) QN(4) MSN(4) MO(4) | payload | pad to 4 | CRC32c(4)
 *
 * TX: rr_ddp_tx_next() turns one RDMAP message into FPDUs of at most
 * fpdu_max bytes on the wire (one FPDU per TCP segment, as siw), each FPDU an
 * iovec array: header bytes, pointers into the caller's (registered) memory,
 * then pad + CRC. Nothing is copied.
 *
 * RX: a pull parser. rr_ddp_rx_want() says how many bytes it wants next and
 * where to put them: header scratch, or for a validated tagged segment the
 * registered memory itself, or for a Send the posted receive buffer at MO.
 * rr_ddp_rx_advance() is told how many arrived; it validates every field as
 * soon as the header is complete (before any payload byte is placed),
 * checks the CRC at the end and reports one event per segment. Any violation
 * fills rx->term with the Terminate to send (RFC 5040 7, RFC 5041 8) and
 * the parser stops for good. Input may arrive in any split.
 * rr_ddp_rx_send_one() takes a lone Send whole in a buffer in one pass,
 * with the same checks and outcome, and declines anything else untouched. */
#ifndef RR_SOFT_DDP_H
#define RR_SOFT_DDP_H

#include <sys/uio.h>

#include "rdma/soft/rdmap.h"

#define RR_DDP_MAX_SGE 16
#define RR_FPDU_MAX_IOV (RR_DDP_MAX_SGE + 2)
#define RR_FPDU_MIN 64          /* smallest fpdu_max accepted */
#define RR_FPDU_DEFAULT 1460    /* Ethernet MSS; the I/O layer uses the path MSS */
#define RR_ULPDU_MAX 65535

/* ---- transmit ---- */
struct rr_ddp_txmsg {
	uint8_t op;
	bool tagged;
	bool crc;
	uint16_t fpdu_max;     /* bytes on the wire per FPDU, >= RR_FPDU_MIN */
	uint32_t stag;         /* tagged: data sink STag */
	uint64_t to;           /* tagged: TO of the first payload byte */
	uint32_t qn, msn;      /* untagged */
	uint32_t inv_stag;     /* untagged: Invalidate STag (Send with Invalidate) */
	const struct iovec *iov; /* payload, borrowed until the last FPDU is sent */
	unsigned iovcnt;
	size_t total;          /* payload bytes (sum of iov) */
	/* progress */
	size_t done;
	unsigned iov_idx;
	size_t iov_off;
	bool started;
};

struct rr_fpdu {
	uint8_t hdr[RR_HDR_UNTAGGED];
	uint8_t trailer[3 + RR_CRC_LEN];
	struct iovec iov[RR_FPDU_MAX_IOV]; /* points into hdr, payload, trailer */
	unsigned iovcnt;
	size_t len;            /* bytes on the wire */
	size_t payload;        /* payload bytes in this FPDU */
	bool last;
};

/* Prepares @m for a message. Payload @iov (@iovcnt <= RR_DDP_MAX_SGE) is
 * borrowed until the last FPDU has been sent. Returns 0 or -EINVAL. */
int rr_ddp_txmsg_tagged(struct rr_ddp_txmsg *m, uint8_t op, uint32_t stag, uint64_t to,
			const struct iovec *iov, unsigned iovcnt);
int rr_ddp_txmsg_untagged(struct rr_ddp_txmsg *m, uint8_t op, uint32_t qn, uint32_t msn,
			  uint32_t inv_stag, const struct iovec *iov, unsigned iovcnt);
/* The rest of @m's payload, from byte m->done on, is now at @iov
 * (@iovcnt entries, at least total - done bytes; borrowed as in
 * rr_ddp_txmsg_tagged): a sender that copies a payload piecewise into a
 * bounce buffer points the message at each copy. */
void rr_ddp_txmsg_rebase(struct rr_ddp_txmsg *m, const struct iovec *iov, unsigned iovcnt);
/* Builds the next FPDU of @m into @f (which must stay in place while its iov
 * is in use). Returns 1 when an FPDU was built, 0 when the message is done
 * (a zero-length message yields one FPDU). */
int rr_ddp_tx_next(struct rr_ddp_txmsg *m, bool crc, size_t fpdu_max, struct rr_fpdu *f);
/* Builds a whole untagged message (@op on queue @qn, @msn, @inv_stag,
 * payload @iov of @iovcnt entries) as one FPDU into @out (@cap bytes), in
 * one pass: the same bytes as rr_ddp_txmsg_untagged + rr_ddp_tx_next.
 * Returns the FPDU's length, or 0 when the message needs more than one
 * FPDU of @fpdu_max, does not fit @cap, or its op / queue is not an
 * untagged one (the caller then segments it with rr_ddp_tx_next). */
size_t rr_ddp_tx_one(uint8_t op, uint32_t qn, uint32_t msn, uint32_t inv_stag,
		     const struct iovec *iov, unsigned iovcnt, bool crc, size_t fpdu_max,
		     uint8_t *out, size_t cap);
/* The Send of tx_send_bare in one pass (issue 16 part BM): the same bytes
 * as rr_ddp_tx_one(@op, RR_QN_SEND, @msn, @inv_stag, one piece @src of @n
 * bytes, @crc, fpdu_max, @out, cap) without its checks. The caller
 * guarantees @op one of the four Send opcodes and @n <=
 * rr_ddp_tx_send_max(fpdu_max, cap) (@out holds cap bytes); beyond that
 * limit rr_ddp_tx_one declines the same Send. Returns the FPDU's length. */
size_t rr_ddp_tx_send_max(size_t fpdu_max, size_t cap);
size_t rr_ddp_tx_send1(uint8_t op, uint32_t msn, uint32_t inv_stag, const void *src, size_t n,
		       bool crc, uint8_t *out);
/* Payload bytes per FPDU for a header size and fpdu_max (multiple of 4). */
size_t rr_ddp_seg_payload(size_t hdr, size_t fpdu_max);
/* Builds a complete Terminate FPDU (QN 2, @msn) into @out; returns its length. */
#define RR_TERM_FPDU_MAX (RR_HDR_UNTAGGED + RR_TERM_MAX_BODY + 3 + RR_CRC_LEN)
size_t rr_ddp_build_terminate(const struct rr_term *t, uint32_t msn, bool crc,
			      uint8_t out[RR_TERM_FPDU_MAX]);

/* ---- receive ---- */

/* Why a placement or an upper-layer check failed; the parser maps it to the
 * Terminate layer/type/code for the segment at hand. */
enum rr_rx_code {
	RR_RXC_OK = 0,
	RR_RXC_INVALID_STAG,   /* unknown, invalidated or wrong-key STag */
	RR_RXC_BOUNDS,         /* outside the registration / expected range */
	RR_RXC_ACCESS,         /* registration lacks the needed access right */
	RR_RXC_PD,             /* STag not in this connection's PD */
	RR_RXC_TO_WRAP,
	RR_RXC_NO_RECV,        /* no posted receive for this Send */
	RR_RXC_TOO_LONG,       /* Send longer than the posted receive */
	RR_RXC_CANNOT_INV,     /* Send with Invalidate of a non-invalidatable STag */
	RR_RXC_IRD,            /* more Read/Commit Requests outstanding than IRD */
	RR_RXC_UNEXPECTED,     /* response without a request, etc. */
	RR_RXC_CATASTROPHIC,
};

struct rr_ddp_rx_ops {
	/* A tagged segment (RDMA Write, Read Response) of @len bytes for
	 * [@to, @to + @len) of @stag. On success set *@dst to where the first
	 * payload byte goes (contiguous for @len bytes) and return RR_RXC_OK. */
	enum rr_rx_code (*tagged)(void *ctx, uint8_t op, uint32_t stag, uint64_t to,
				  uint32_t len, bool last, uint8_t **dst);
	/* A Send segment on QN 0 for message @msn at offset @mo. On success set
	 * *@iov / *@iovcnt to the whole posted receive buffer (the parser places
	 * at @mo and checks the length). */
	enum rr_rx_code (*untagged)(void *ctx, uint32_t msn, uint32_t mo, uint32_t len,
				    bool last, const struct iovec **iov, unsigned *iovcnt);
	/* Optional (NULL: memcpy). Every copy the parser makes itself of
	 * tagged payload (input given to rr_ddp_rx_feed) goes through it: @n
	 * bytes from @src to @dst, which is where the payload at Tagged Offset
	 * @to of @stag lands (segment opcode @op). The callee checks that the
	 * memory may still be written (an STag can be invalidated while its
	 * segment arrives) and copies, or returns why not: the parser then
	 * terminates as for that verdict at header time. Bytes the caller
	 * reads in place itself (rr_ddp_rx_want) it checks itself. */
	enum rr_rx_code (*place)(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint8_t *dst,
				 const uint8_t *src, size_t n);
};

enum rr_ddp_ev_type {
	RR_EV_NONE = 0,
	RR_EV_TAGGED,      /* a Write / Read Response segment was placed */
	RR_EV_SEND,        /* a Send segment was placed (complete when last) */
	RR_EV_READ_REQ,
	RR_EV_TERMINATE,   /* the peer terminated: the stream is finished */
	RR_EV_COMMIT_REQ,
	RR_EV_COMMIT_RESP,
};

struct rr_ddp_event {
	enum rr_ddp_ev_type type;
	uint8_t op;
	bool last;
	uint32_t len;      /* payload bytes of this segment */
	uint32_t stag;     /* tagged */
	uint64_t to;
	uint32_t msn, mo;  /* untagged */
	uint32_t inv_stag; /* Send with Invalidate */
	uint32_t msg_len;  /* Send: message length so far (total when last) */
	union {
		struct rr_rreq rreq;
		struct rr_term term;
		struct rr_commit_req creq;
		struct rr_commit_resp cresp;
	} u;
};

enum rr_rx_state { RR_RX_HDR, RR_RX_BODY, RR_RX_PAYLOAD, RR_RX_TRAILER, RR_RX_DEAD };

#define RR_RX_BODY_MAX (4 + RR_COMMIT_MAX_REGIONS * RR_COMMIT_REGION_LEN)

struct rr_ddp_rx {
	/* What a lone small Send reads and writes (rr_ddp_rx_send_one, the
	 * usual Call or Reply) first, in 156 bytes (issue 16 part CU: a
	 * message touches three of the struct's lines, not ten) */
	const struct rr_ddp_rx_ops *ops;
	void *ctx;
	bool crc;          /* MPA CRC negotiated */
	bool tagged, last;
	enum rr_rx_state state;
	/* current segment */
	size_t hdr_have, hdr_need;
	uint16_t ulpdu_len, ctrl;
	uint8_t op;
	uint32_t qn, msn, mo, inv_stag;
	uint32_t seg_len;  /* payload bytes in this segment */
	uint32_t placed;
	const struct iovec *uiov;
	unsigned uiovcnt, uidx;
	/* per queue */
	uint32_t msn_expect[RR_QN_COUNT];
	uint32_t mo_expect[RR_QN_COUNT];
	uint64_t segments, bytes;
	uint8_t hdr[RR_HDR_UNTAGGED];
	/* the rest: tagged segments, bodies, trailers read apart, failure */
	bool commit;       /* opcodes 0xC/0xD negotiated */
	uint32_t stag;
	uint64_t to;
	uint8_t *tdst;
	size_t uoff;
	uint8_t *want_ptr;
	uint32_t crc_state;
	size_t body_have, body_need;
	uint8_t trailer[3 + RR_CRC_LEN];
	size_t tr_have, tr_need;
	/* outcome */
	int err;           /* 0, or the negative errno once dead */
	bool term_valid;   /* @term should be sent to the peer */
	struct rr_term term;
	uint8_t body[RR_RX_BODY_MAX];
};

/* Initialises @rx; MSNs start at 1 (RFC 5041 5.1). */
void rr_ddp_rx_init(struct rr_ddp_rx *rx, const struct rr_ddp_rx_ops *ops, void *ctx,
		    bool crc, bool commit);
/* How many bytes the parser wants next and where (*@dst). Never 0 unless dead. */
size_t rr_ddp_rx_want(struct rr_ddp_rx *rx, uint8_t **dst);
/* @n bytes (<= the last want) were written to the last *dst. Returns 1 with
 * @ev filled when a segment completed, 0 when more bytes are needed, or a
 * negative errno when the stream must be terminated (rx->term_valid tells
 * whether rx->term is to be sent; -ECONNRESET after a peer's Terminate). */
int rr_ddp_rx_advance(struct rr_ddp_rx *rx, size_t n, struct rr_ddp_event *ev);
/* Copying convenience: consumes from @data until an event, an error or the
 * end; *@used tells how much. Same returns as rr_ddp_rx_advance. */
int rr_ddp_rx_feed(struct rr_ddp_rx *rx, const uint8_t *data, size_t len, size_t *used,
		   struct rr_ddp_event *ev);
/* A lone Send whole in @data (@len bytes), at a segment's start: one
 * FPDU of Send / Send with Invalidate / with Solicited Event, Last set, on
 * QN 0 with the next MSN at MO 0, its payload, pad and CRC all in @data.
 * Parsed, checked and placed into the posted Receive in one pass, with the
 * general parser's checks (version, opcode, length, QN, MSN, MO, the
 * Receive's length, the CRC when negotiated) and its outcome: returns 1
 * with @ev filled, or the negative errno with the same Terminate, or 0
 * (nothing consumed, nothing changed, ops->untagged not called) for
 * anything else, which the caller gives to rr_ddp_rx_feed. *@used: bytes
 * consumed. */
int rr_ddp_rx_send_one(struct rr_ddp_rx *rx, const uint8_t *data, size_t len, size_t *used,
		       struct rr_ddp_event *ev);
/* rr_ddp_rx_send_one with the Receive's look-up @untagged given by the
 * caller, who guarantees it is rx->ops->untagged: the same function (the
 * one body: rr_ddp_rx_send_one is this with rx->ops->untagged), for a
 * caller that names its own (the soft QP: rx.c rx_stage_parse), so that a
 * link-time optimised build calls it directly, not through the pointer
 * (issue 16 part DG). A build without NDEBUG aborts if it is not. */
int rr_ddp_rx_send_one_with(struct rr_ddp_rx *rx,
			    enum rr_rx_code (*untagged)(void *ctx, uint32_t msn, uint32_t mo,
							uint32_t len, bool last,
							const struct iovec **iov, unsigned *iovcnt),
			    const uint8_t *data, size_t len, size_t *used, struct rr_ddp_event *ev);
/* What a lone Send parsed in one pass (rr_ddp_rx_send1) is, for the
 * caller that completes its Receive: its opcode, length, the STag a Send
 * With Invalidate names (0 for the others) and the Receive it went to.
 * The event rr_ddp_rx_send_one_with reports is built from the first
 * three. */
struct rr_ddp_send1 {
	uint8_t op;
	uint32_t len;
	uint32_t inv_stag;
	const struct iovec *iov;   /* the Receive's, as ops->untagged gave it */
};
/* rr_ddp_rx_send_one_with, its outcome in @out (when it returns 1) instead
 * of an event: the one body (rr_ddp_rx_send_one_with is this and the event
 * built from @out). For the soft QP's receive path (rx.c rx_stage_parse),
 * which completes the Receive from these three values: inlined there (a
 * link-time optimised build), they stay in registers, where an event
 * inlined the same way was built on the stack (issue 16 part IA). */
int rr_ddp_rx_send1(struct rr_ddp_rx *rx,
		    enum rr_rx_code (*untagged)(void *ctx, uint32_t msn, uint32_t mo, uint32_t len,
						bool last, const struct iovec **iov,
						unsigned *iovcnt),
		    const uint8_t *data, size_t len, size_t *used, struct rr_ddp_send1 *out);
/* The upper layer rejects the segment just reported (e.g. a Read Request's
 * source STag, an IRD overflow, an Invalidate STag): builds the Terminate for
 * it and stops the parser. Returns the negative errno now in rx->err. */
int rr_ddp_rx_fail(struct rr_ddp_rx *rx, enum rr_rx_code code);

#endif
