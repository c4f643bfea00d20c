/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC-over-RDMA Version 1 transport header codec (RFC 8166 section 4
 * "RPC-over-RDMA in Operation" and its XDR definition, section 4.2 / the
 * rfc8166-rpcrdma-v1.x file): sans-I/O, no syscalls, no allocation.
 *
 * rr_hdr_decode() parses the fixed fields (rdma_xid, rdma_vers, rdma_credit,
 * rdma_proc) and the body of RDMA_MSG / RDMA_NOMSG (Read list, Write list,
 * Reply chunk), RDMA_ERROR (ERR_VERS low/high, ERR_CHUNK) and RDMA_DONE (xid
 * only), recognises RDMA_MSGP only to reject it, and checks meaning: Read
 * positions (RFC 8166 3.5.3 / 4.4.5 "Read Chunks", 4.4.5.1 round-up), where
 * the Payload stream lives (4.5.3 "Long Messages"), segment and chunk limits,
 * offset+length overflow, and that rdma_xid equals the RPC XID (4.1). Every
 * rejection is a verdict the transport acts on, chosen by direction as RFC
 * 8166 section 5.5 "Error Handling" mandates (RDMA_ERROR ERR_VERS or
 * ERR_CHUNK for a bad Call header, silent discard for a bad Reply header), plus
 * a reason code for statistics and tests. Read segments are grouped into Read
 * chunks by Position (segments sharing one Position form one chunk).
 *
 * struct rr_hdr is the one model of the header: the decoder fills it, the
 * transport core reads received headers from it and builds the headers it
 * sends in it (rr_hdr_init(), rr_hdr_add_read(), rr_hdr_add_write(),
 * rr_hdr_add_reply(), rr_hdr_add_seg()), and rr_hdr_encode() writes it
 * through the checked XDR cursor; RDMA_ERROR and RDMA_DONE have encoders of
 * their own. rr_hdr_size() gives the encoded size from counts so the
 * transport can decide what fits the inline threshold.
 *
 * Design choices (Position semantics, zero-length segments, trailing bytes,
 * the reasons) are explained in docs/header-codec.md. */
#ifndef RR_PROTO_HDR_H
#define RR_PROTO_HDR_H

#include "common/common.h"
#include "xdr/xdr.h"

/* ---- wire constants (RFC 8166 section 4.2) ---- */

#define RR_HDR_VERSION 1u

enum rr_hdr_proc {
	RR_HDR_MSG = 0,   /* RDMA_MSG */
	RR_HDR_NOMSG = 1, /* RDMA_NOMSG */
	RR_HDR_MSGP = 2,  /* RDMA_MSGP: "not to be used", rejected */
	RR_HDR_DONE = 3,  /* RDMA_DONE: only with the reliable-reply extension */
	RR_HDR_ERROR = 4, /* RDMA_ERROR */
};

enum rr_hdr_errcode {
	RR_HDR_ERR_VERS = 1,
	RR_HDR_ERR_CHUNK = 2,
};

/* Encoded sizes in bytes. */
#define RR_HDR_FIXED_SIZE 16u          /* xid, vers, credit, proc */
#define RR_HDR_MIN_MSG_SIZE 28u        /* fixed + three empty lists */
#define RR_HDR_ERR_VERS_SIZE 28u       /* fixed + err + low + high */
#define RR_HDR_ERR_CHUNK_SIZE 20u      /* fixed + err */
#define RR_HDR_DONE_SIZE 16u           /* fixed only */
#define RR_HDR_READ_SEG_SIZE 24u       /* 1 - P H L OO */
#define RR_HDR_WRITE_SEG_SIZE 16u      /* H L OO */

/* ---- compile-time capacity of a parsed header ----
 * A header that needs more than this is a protocol violation of the peer
 * (reason RR_HDR_R_CAPACITY or RR_HDR_R_TOO_MANY_CHUNKS), never an overflow. */
#define RR_HDR_MAX_SEGS 128u        /* all segments: Read + Write + Reply */
#define RR_HDR_MAX_READ_CHUNKS 16u  /* distinct Read positions */
#define RR_HDR_MAX_WRITE_CHUNKS 16u

/* ---- runtime limits and options (per connection) ---- */

#define RR_HDR_DEFAULT_SEGS_PER_CHUNK 16u /* as Linux */
#define RR_HDR_DEFAULT_READ_CHUNKS 8u
#define RR_HDR_DEFAULT_WRITE_CHUNKS 8u
#define RR_HDR_DEFAULT_INLINE 1024u /* RFC 8166 4.3.3, until RFC 8797 says more */

struct rr_hdr_limits {
	uint32_t max_segs_per_chunk; /* per Read, Write or Reply chunk */
	uint32_t max_read_chunks;    /* clamped to RR_HDR_MAX_READ_CHUNKS */
	uint32_t max_write_chunks;   /* clamped to RR_HDR_MAX_WRITE_CHUNKS */
	uint32_t max_chunk_len;      /* bytes in one chunk (sum of its segments) */
	uint32_t inline_threshold;   /* receive inline threshold: a longer
				      * message (header + inline payload) is
				      * a violation */
	uint32_t max_read_segs;      /* segments in the whole Read list */
	bool reliable_reply;         /* the reliable-reply extension is
				      * negotiated: a Position-zero Read chunk
				      * is allowed in an RDMA_NOMSG Reply and
				      * RDMA_DONE is accepted by a responder */
};

/* Fills @lim with the defaults above (max_chunk_len and max_read_segs
 * UINT32_MAX: no limit beyond the capacity; no extension). */
void rr_hdr_limits_init(struct rr_hdr_limits *lim);

/* ---- the parsed header ---- */

/* Which kind of message the receiver expects: a responder decodes Calls, a
 * requester decodes Replies (RFC 8166 5.5: the direction decides the answer
 * to a bad header). With bi-directional RPC the transport picks it per
 * message. */
enum rr_hdr_dir {
	RR_HDR_DIR_CALL = 0,
	RR_HDR_DIR_REPLY = 1,
};

/* What the transport does with a decoded message. */
enum rr_hdr_verdict {
	RR_HDR_OK = 0,             /* process it */
	RR_HDR_REPLY_ERR_VERS,     /* send RDMA_ERROR ERR_VERS low=high=1 */
	RR_HDR_REPLY_ERR_CHUNK,    /* send RDMA_ERROR ERR_CHUNK */
	RR_HDR_DISCARD,            /* drop it silently */
};

/* Why: one value per distinct check, for statistics and tests. When several
 * checks fail, the first one met in wire order is reported. */
enum rr_hdr_reason {
	RR_HDR_R_NONE = 0,
	RR_HDR_R_SHORT_XID,        /* fewer than 4 bytes: not even an xid */
	RR_HDR_R_TRUNCATED,        /* the header ends early (XDR error) */
	RR_HDR_R_VERS,             /* rdma_vers != 1 */
	RR_HDR_R_MSG_TOO_LONG,     /* message longer than the inline threshold */
	RR_HDR_R_PROC,             /* unknown rdma_proc */
	RR_HDR_R_MSGP,             /* RDMA_MSGP (RFC 8166 5.6.1) */
	RR_HDR_R_DONE_UNEXPECTED,  /* RDMA_DONE not negotiated / to a requester */
	RR_HDR_R_ERROR_TO_RESPONDER, /* RDMA_ERROR received by a responder */
	RR_HDR_R_ERR_UNDECODABLE,  /* RDMA_ERROR body truncated */
	RR_HDR_R_ERR_CODE,         /* RDMA_ERROR with an unknown rdma_err */
	RR_HDR_R_BAD_DISCRIM,      /* optional-data discriminator not 0 or 1 */
	RR_HDR_R_POS_ALIGN,        /* Read position not a multiple of 4 */
	RR_HDR_R_POS_ORDER,        /* Read positions decrease */
	RR_HDR_R_POS_OVERLAP,      /* Read chunk starts inside the previous one */
	RR_HDR_R_POS_BEYOND,       /* Read position beyond the Payload stream */
	RR_HDR_R_TOO_MANY_SEGS,    /* segments in one chunk > max_segs_per_chunk,
				    * or in the Read list > max_read_segs */
	RR_HDR_R_TOO_MANY_CHUNKS,  /* Read or Write chunks > limit */
	RR_HDR_R_CAPACITY,         /* total segments > RR_HDR_MAX_SEGS */
	RR_HDR_R_SEG_WRAP,         /* offset + length overflows 64 bits */
	RR_HDR_R_CHUNK_TOO_LONG,   /* chunk length > max_chunk_len */
	RR_HDR_R_NOMSG_NO_CHUNK,   /* RDMA_NOMSG without a chunk holding the
				    * Payload stream */
	RR_HDR_R_NOMSG_EMPTY,      /* that chunk is shorter than an XID */
	RR_HDR_R_NOMSG_AMBIGUOUS,  /* NOMSG Reply with both a Position-zero Read
				    * chunk and a Reply chunk */
	RR_HDR_R_MSG_POS_ZERO,     /* RDMA_MSG with a Position-zero Read chunk */
	RR_HDR_R_MSG_NO_PAYLOAD,   /* RDMA_MSG with fewer than 4 payload bytes */
	RR_HDR_R_XID_MISMATCH,     /* rdma_xid != XID at the start of the payload */
	RR_HDR_R_READ_IN_REPLY,    /* Read list in a Reply (not negotiated or
				    * not RDMA_NOMSG) */
	RR_HDR_R_REPLY_READ_POS,   /* reliable reply: Read chunk other than one
				    * Position-zero chunk in a Reply */
	RR_HDR_R_WRITE_MISMATCH,   /* rr_hdr_check_reply(): returned Write list
				    * does not match the Call's */
	RR_HDR_R_REPLY_MISMATCH,   /* rr_hdr_check_reply(): returned Reply
				    * chunk does not match the Call's */
	RR_HDR_R_COUNT
};

/* A plain RDMA segment (RFC 8166 4.4.3): handle, length, offset. */
struct rr_hdr_seg {
	uint32_t handle;
	uint32_t length;
	uint64_t offset;
};

/* A chunk of the header: segments segs[first .. first+nsegs-1] of struct
 * rr_hdr. @position is meaningful for Read chunks only. @length is the sum
 * of the segment lengths. */
struct rr_hdr_chunk {
	uint32_t position;
	uint16_t first;
	uint16_t nsegs;
	uint64_t length;
};

/* Every scalar comes first, the arrays last: decoding or building a
 * header resets the scalars only (memset up to @read), and a message
 * without chunks (a NULL Call, a small Reply) touches the first two cache
 * lines and nothing else of the ~2.6 KiB (Issue 16 part X: the scalars
 * were spread over four lines, each cold again after 99 other
 * connections' calls). */
struct rr_hdr {
	/* the outcome */
	enum rr_hdr_verdict verdict;
	enum rr_hdr_reason reason;

	/* fixed fields; @vers is 1 when the message was too short to hold it
	 * (that is the value an RDMA_ERROR then echoes) */
	uint32_t xid;
	uint32_t vers;
	uint32_t credit;
	uint32_t proc;

	/* RDMA_ERROR */
	uint32_t err;       /* RR_HDR_ERR_VERS or RR_HDR_ERR_CHUNK */
	uint32_t vers_low;  /* ERR_VERS only */
	uint32_t vers_high;

	/* layout of the received message */
	uint32_t hdr_len;     /* bytes of the transport header */
	uint32_t payload_off; /* RDMA_MSG: the inline Payload stream */
	uint32_t payload_len; /*   (0 for every other procedure) */
	uint32_t trailing;    /* other procedures: ignored bytes after the
			       * header */

	/* RDMA_MSG / RDMA_NOMSG: chunks in wire order (Read chunks grouped
	 * by Position: the segments sharing one Position form one chunk).
	 * Each chunk's segments are consecutive in segs[]; decoded, segs[]
	 * holds the Read list first, then each Write chunk, then the Reply
	 * chunk; built, whatever order the chunks were filled in. */
	uint32_t nread;
	uint32_t nwrite;
	uint32_t nsegs;
	bool has_reply;
	/* defined only while @has_reply: the decoder resets the scalars
	 * before it (RR_HDR_RESET bytes), not the chunk itself */
	struct rr_hdr_chunk reply;
	struct rr_hdr_chunk read[RR_HDR_MAX_READ_CHUNKS];
	struct rr_hdr_chunk write[RR_HDR_MAX_WRITE_CHUNKS];
	struct rr_hdr_seg segs[RR_HDR_MAX_SEGS];
};
/* What the decoders reset per message: the scalars, up to the Reply chunk
 * (set whole when one is decoded). */
#define RR_HDR_RESET offsetof(struct rr_hdr, reply)

/* Decodes the message @buf[0..@len) received in direction @dir under @lim
 * (NULL: defaults). Fills @h and sets h->verdict and h->reason; the fields
 * decoded before a rejection (at least xid when len >= 4, vers when len >= 8)
 * stay valid so the transport can answer with rr_hdr_encode_reject().
 * Returns 0 when h->verdict is RR_HDR_OK, -EPROTO when it is not, -EINVAL
 * when @h or @buf (with len > 0) is NULL. Borrows @buf for the duration of
 * the call; @h holds no pointer into it. */
int rr_hdr_decode(struct rr_hdr *h, const void *buf, size_t len,
		  enum rr_hdr_dir dir, const struct rr_hdr_limits *lim);

/* rr_hdr_decode() without its one-pass decoding of the short form (an
 * RDMA_MSG with three empty lists): every message through the general
 * decoder. The same results on every input; for the tests and fuzz_hdr that
 * prove it. */
int rr_hdr_decode_general(struct rr_hdr *h, const void *buf, size_t len,
			  enum rr_hdr_dir dir, const struct rr_hdr_limits *lim);

/* The verdict RFC 8166 5.5 mandates for @reason in direction @dir. */
enum rr_hdr_verdict rr_hdr_verdict_for(enum rr_hdr_dir dir,
				       enum rr_hdr_reason reason);

/* Static names, "none", "truncated", ... ("?" when out of range). */
const char *rr_hdr_reason_str(enum rr_hdr_reason reason);
const char *rr_hdr_verdict_str(enum rr_hdr_verdict verdict);

/* The Position-zero Read chunk (the Payload stream of a Long Call, or of a
 * reliable-reply Long Reply), or NULL when the header has none. */
const struct rr_hdr_chunk *rr_hdr_pos0_chunk(const struct rr_hdr *h);

/* ---- returned chunks (RFC 8166 4.4.6 "Write Chunks", 5.3.2, 5.3.3) ---- */

/* Requester side, after rr_hdr_decode() accepted a Reply: checks that the
 * Write list and Reply chunk the responder returned are those @call (the
 * header of the Call the requester sent) offered
 * (no more Write chunks; each returned chunk holds at most as many segments
 * as offered, each with the offered handle and offset and a length no
 * larger; a Reply chunk only if one was offered). Unconsumed segments may be
 * omitted or returned with length 0 (Linux). On a mismatch sets
 * reply->verdict DISCARD and reason RR_HDR_R_WRITE_MISMATCH or
 * RR_HDR_R_REPLY_MISMATCH and returns -EPROTO; 0 otherwise (also when
 * @reply was already rejected: nothing is changed then, -EPROTO). Borrows
 * both for the duration of the call. */
int rr_hdr_check_reply(struct rr_hdr *reply, const struct rr_hdr *call);

/* Responder side: the segments of the Call's chunk @c (of @call) that carry
 * @used bytes, filled in array order (RFC 8166 4.4.6: consumed segments with
 * their actual lengths, unconsumed ones omitted), written to @out (room for
 * @cap segments). Returns the number of segments (0 when @used is 0: an
 * unused Write chunk is returned with count 0), or -EMSGSIZE when @used is
 * larger than the chunk (the result does not fit: answer ERR_CHUNK) or @out
 * too small. */
int rr_hdr_consume_chunk(const struct rr_hdr *call, const struct rr_hdr_chunk *c,
			 uint64_t used, struct rr_hdr_seg *out, uint32_t cap);

/* ---- building a header ----
 * The headers the transport sends are built in struct rr_hdr: rr_hdr_init()
 * and then the chunks, each one's segments appended while it is the chunk
 * last extended (a chunk's segments are consecutive in segs[]); the chunks
 * may be filled in any order (rr_hdr_encode() writes them in wire order).
 * The builders check only capacity and structure: a header with a
 * malformed Read list (what tests and rogue peers send) can be built, and
 * rr_hdr_encode() refuses it. */

/* Starts an RDMA_MSG / RDMA_NOMSG (or any @proc: tests) header with
 * rdma_vers 1 and no chunks; verdict OK, reason none, layout fields 0. */
void rr_hdr_init(struct rr_hdr *h, uint32_t xid, uint32_t credit, uint32_t proc);

/* Appends the Read segment @s at @position: to the last Read chunk when it
 * has that position and its segments end segs[], else as a new Read chunk.
 * 0, or -EMSGSIZE when segs[] or read[] is full. */
int rr_hdr_add_read(struct rr_hdr *h, uint32_t position, const struct rr_hdr_seg *s);

/* Appends a Write chunk of the @n segments @segs (@n 0: empty, to be
 * filled by rr_hdr_add_seg(), or an unused chunk returned with count 0).
 * 0, -EMSGSIZE (no room), -EINVAL (@segs NULL with @n > 0). */
int rr_hdr_add_write(struct rr_hdr *h, const struct rr_hdr_seg *segs, uint32_t n);

/* Sets the Reply chunk to the @n segments @segs, as rr_hdr_add_write();
 * -EINVAL when the header already has one. */
int rr_hdr_add_reply(struct rr_hdr *h, const struct rr_hdr_seg *segs, uint32_t n);

/* Appends @s to chunk @c of @h (a Write chunk, the Reply chunk or a Read
 * chunk). 0, -EMSGSIZE when segs[] is full, -EINVAL when @c has segments
 * and they do not end segs[] (another chunk was extended since). */
int rr_hdr_add_seg(struct rr_hdr *h, struct rr_hdr_chunk *c, const struct rr_hdr_seg *s);

/* ---- encoding ---- */

/* Every encoder appends at the cursor @e and returns 0, -EMSGSIZE when @e
 * lacks room, or -EINVAL for an invalid request; on failure the cursor
 * position is unchanged (bytes past it may have been written). The caller
 * appends the Payload stream of an RDMA_MSG after the header. Encoders
 * borrow their inputs for the duration of the call. */

/* Encodes @h, decoded by rr_hdr_decode() or built as above: RDMA_MSG,
 * RDMA_NOMSG, RDMA_ERROR, RDMA_DONE, with h->vers in the version field.
 * -EINVAL for another procedure, chunk indices outside segs[], or a Read
 * position not a multiple of 4 or lower than the one before. A decoded
 * header encodes byte-identically to the bytes it was decoded from. */
int rr_hdr_encode(struct rr_xdr_enc *e, const struct rr_hdr *h);

/* As rr_hdr_encode() without the Position checks: for the malformed
 * headers tests and rogue peers send. */
int rr_hdr_encode_raw(struct rr_xdr_enc *e, const struct rr_hdr *h);

/* rr_hdr_encode() into @buf (@cap bytes): returns the encoded length, or
 * -EMSGSIZE / -EINVAL. */
int rr_hdr_encode_buf(const struct rr_hdr *h, uint8_t *buf, size_t cap);

/* The short form (RDMA_MSG, three empty lists; RFC 8166 4.2) into @buf
 * (@cap bytes): xid - 1 - credit - RDMA_MSG - 0 - 0 - 0. The bytes
 * rr_hdr_encode_buf() writes for rr_hdr_init(h, xid, credit, RR_HDR_MSG)
 * (test hdr_encode_short_as_general), without the struct. Returns
 * RR_HDR_MIN_MSG_SIZE or -EMSGSIZE (nothing written). */
int rr_hdr_encode_short(uint8_t *buf, size_t cap, uint32_t xid, uint32_t credit);

/* Encoded size of @h (as rr_hdr_encode() would write it). */
size_t rr_hdr_encoded_size(const struct rr_hdr *h);

/* RDMA_ERROR (RFC 8166 5.5): @xid and @vers echo the failing message. */
int rr_hdr_encode_err_vers(struct rr_xdr_enc *e, uint32_t xid, uint32_t vers,
			   uint32_t credit, uint32_t low, uint32_t high);
int rr_hdr_encode_err_chunk(struct rr_xdr_enc *e, uint32_t xid, uint32_t vers,
			    uint32_t credit);

/* The RDMA_ERROR a rejected Call calls for (h->verdict REPLY_ERR_VERS: ERR_VERS
 * 1..1; REPLY_ERR_CHUNK: ERR_CHUNK), echoing h->xid and h->vers. -EINVAL for
 * any other verdict. */
int rr_hdr_encode_reject(struct rr_xdr_enc *e, const struct rr_hdr *h,
			 uint32_t credit);

/* The RDMA_ERROR @err (RR_HDR_ERR_VERS: versions 1..1, or
 * RR_HDR_ERR_CHUNK) echoing @xid and @vers, written into @buf (@cap bytes):
 * returns its length (28 or 20), -EMSGSIZE or -EINVAL (another @err). */
int rr_hdr_encode_error_buf(uint32_t xid, uint32_t vers, uint32_t credit, uint32_t err,
			    uint8_t *buf, size_t cap);

/* RDMA_DONE (reliable-reply extension): the fixed fields only. */
int rr_hdr_encode_done(struct rr_xdr_enc *e, uint32_t xid, uint32_t credit);

/* Encoded size of an RDMA_MSG / RDMA_NOMSG header with @nread_segs Read
 * segments, @nwrite_chunks Write chunks holding @nwrite_segs segments in
 * all, and a Reply chunk of @nreply_segs segments when @reply. */
size_t rr_hdr_size(uint32_t nread_segs, uint32_t nwrite_chunks,
		   uint32_t nwrite_segs, bool reply, uint32_t nreply_segs);

#endif
