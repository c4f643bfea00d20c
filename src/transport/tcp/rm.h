/* SPDX-License-Identifier: BSD-2-Clause */
/* RFC 5531 section 11 record marking as a sans-I/O codec: bytes in, records
 * out (the decoder), and records in, fragments out (the encoder). No system
 * call, no thread, no socket: the tcp:// transport (transport/tcp/tcp_io.c)
 * moves the bytes, the fuzz target (fuzz/fuzz_rm.c) and the unit tests
 * (tests/wire/test_record_marking.c) drive the codec alone.
 *
 * Wire layout (RFC 5531 section 11, "Record Marking Standard"): a record is
 * one or more fragments; each fragment is a 4-byte big-endian header and
 * its data:
 *
 *   +-+-------------------------------+----------------------+
 *   |L|  fragment length (31 bits)    |  fragment data ...   |
 *   +-+-------------------------------+----------------------+
 *
 * L (the high bit) is set on the last fragment of a record.
 *
 * Decoder limits, each a clean error, never a crash or an unbounded
 * allocation:
 *  - the largest record (@max_record): a fragment header that would take the
 *    record above it is -EMSGSIZE, or, with @skip_oversize, the record is
 *    read and discarded (RR_RM_SKIPPED: its first 8 bytes are kept so the
 *    caller can fail the one RPC it was for) and the stream stays in step;
 *  - the number of fragments of one record (@max_frags): above it,
 *    -EBADMSG. Empty fragments are legal (RFC 5531 does not forbid them) but
 *    count, so a record ends within max_record + 4 * max_frags bytes: a
 *    peer cannot keep one open forever with empty fragments;
 *  - memory grows only as bytes arrive (at most double what arrived, from
 *    16 KiB), so a hostile length claim costs nothing; with @trust_len (a
 *    peer we chose: the client's server) the whole fragment at once;
 *  - a stream whose first four bytes are "MPA " is the start of an MPA
 *    Request or Reply frame (RFC 5044 section 7.1): the peer speaks iWARP
 *    (rdma://), not record marking: -EPROTOTYPE. As a fragment header it
 *    would announce a 1.3 GB non-last fragment, which no RPC peer sends
 *    first.
 * After a negative result the stream is out of step: the connection ends
 * (rr_rm_dec_reset before the decoder serves another one). */
#ifndef RR_TRANSPORT_TCP_RM_H
#define RR_TRANSPORT_TCP_RM_H

#include <sys/uio.h>

#include "common/common.h"

#define RR_RM_HDR_LEN 4u
#define RR_RM_LAST 0x80000000u
#define RR_RM_MAX_FRAG 0x7fffffffu   /* the largest fragment a header can announce */

/* Where the decoder's record buffers come from and go back to (e.g. a cache
 * of recycled buffers, transport/tcp/tcp_bufs.h). @get: a buffer of at least
 * @min bytes and of more than @above bytes, for a record that needs @need
 * bytes so far (@min <= @need); its capacity in *@cap; NULL when there is
 * none (the decoder answers -ENOMEM). @put: takes back a buffer of capacity
 * @cap. With @get NULL the decoder allocates @min bytes from its env and
 * frees with it. */
struct rr_rm_bufs {
	uint8_t *(*get)(void *arg, size_t min, size_t need, size_t above, size_t *cap);
	void (*put)(void *arg, uint8_t *buf, size_t cap);
	void *arg;
};

struct rr_rm_dec_conf {
	const struct rpcrdma_env *env;
	size_t max_record;        /* largest record, data bytes */
	unsigned max_frags;       /* most fragments per record; 0: no limit */
	bool skip_oversize;       /* discard a record above max_record */
	bool trust_len;           /* grow to the announced fragment at once */
	struct rr_rm_bufs bufs;
};

/* Results of rr_rm_dec_commit / rr_rm_dec_feed (or a negative errno). */
enum {
	RR_RM_MORE = 0,      /* the codec needs more bytes */
	RR_RM_RECORD = 1,    /* a record is complete: rr_rm_dec_take */
	RR_RM_SKIPPED = 2,   /* an oversized record was discarded: rr_rm_dec_skipped */
};

struct rr_rm_dec {
	struct rr_rm_dec_conf c;
	uint8_t hdr[RR_RM_HDR_LEN];
	unsigned hdr_got;
	bool in_frag;         /* the header of the current fragment is in */
	bool last;            /* the current fragment ends the record */
	bool started;         /* the stream's first header is in */
	bool skipping;        /* discarding an oversized record */
	bool complete;        /* a record waits for rr_rm_dec_take */
	uint32_t frag_left;   /* data bytes of the current fragment to come */
	unsigned nfrags;      /* fragments of the current record so far */
	unsigned skip_have;   /* bytes of head8 filled */
	uint8_t head8[8];     /* the first bytes of a discarded record */
	size_t offered;       /* what the last rr_rm_dec_space offered */
	uint8_t *buf;         /* the record being assembled */
	size_t cap;
	size_t len;
};

/* The fragment limit tcp:// uses for records of up to @max_record bytes:
 * 1024, or one fragment per KiB of the largest record when that is more
 * (glibc's xdrrec writes ~4000-byte fragments, libtirpc's 64 KiB ones,
 * Linux one per record). */
unsigned rr_rm_frags_default(size_t max_record);

/* Borrows nothing: @c is copied. */
void rr_rm_dec_init(struct rr_rm_dec *d, const struct rr_rm_dec_conf *c);
/* Forgets a partial or untaken record (its buffer goes back to the
 * provider): the next byte is the start of a new stream. */
void rr_rm_dec_reset(struct rr_rm_dec *d);
/* rr_rm_dec_reset; the decoder may then be freed. */
void rr_rm_dec_fini(struct rr_rm_dec *d);

/* Where the next bytes of the stream go: at most *@n bytes at *@dst, then
 * rr_rm_dec_commit with how many were put there. *@dst is NULL while a
 * discarded record's data is being skipped: the caller reads up to *@n
 * bytes anywhere and commits them. The buffer may grow here (it never
 * exceeds what the fragment headers announced). Returns 0, -ENOMEM (nothing
 * changed: calling again is allowed), or -EBUSY while a complete record was
 * not taken. The result points into the decoder's memory, valid until the
 * commit. */
int rr_rm_dec_space(struct rr_rm_dec *d, uint8_t **dst, size_t *n);
/* @n bytes (at most what rr_rm_dec_space offered) were placed. Returns
 * RR_RM_MORE, RR_RM_RECORD, RR_RM_SKIPPED, -EMSGSIZE (a record above
 * max_record without skip_oversize), -EBADMSG (more than max_frags
 * fragments), -EPROTOTYPE (the stream starts with an MPA frame), -EINVAL
 * (more bytes than offered). */
int rr_rm_dec_commit(struct rr_rm_dec *d, size_t n);
/* Copies bytes in: rr_rm_dec_space + memcpy + rr_rm_dec_commit until @len
 * bytes are consumed or an event happens. *@used: bytes consumed. Returns
 * what rr_rm_dec_commit or rr_rm_dec_space returned for the last step
 * (RR_RM_MORE once all @len bytes are in without an event). Borrows @in
 * for the duration of the call. */
int rr_rm_dec_feed(struct rr_rm_dec *d, const uint8_t *in, size_t len, size_t *used);
/* After RR_RM_RECORD: the record's *@len data bytes (NULL when empty);
 * otherwise NULL and 0. The caller owns the result (capacity *@cap) and
 * gives it back with the provider's put (rr_free on the env without a
 * provider). */
uint8_t *rr_rm_dec_take(struct rr_rm_dec *d, size_t *len, size_t *cap);
/* After RR_RM_SKIPPED: how many first bytes of the discarded record were
 * kept (up to 8; an RPC message has its XID and direction there); *@head
 * points into the decoder, valid until the next call. */
unsigned rr_rm_dec_skipped(const struct rr_rm_dec *d, const uint8_t **head);
/* True when no record is in progress (between records). */
bool rr_rm_dec_idle(const struct rr_rm_dec *d);

/* A fragment header: @len data bytes (at most RR_RM_MAX_FRAG), @last. */
void rr_rm_put_header(uint8_t out[RR_RM_HDR_LEN], uint32_t len, bool last);
/* How many fragments a record of @len bytes takes with fragments of at most
 * @max_frag data bytes (1 for an empty record; 0 when @max_frag is 0). */
size_t rr_rm_enc_frags(size_t len, uint32_t max_frag);
/* Frames a record given as @nin pieces (in order) into fragments of at
 * most @max_frag data bytes (1..RR_RM_MAX_FRAG): writes to @out the
 * fragment headers, stored in @hdrs, interleaved with the pieces, split
 * where a fragment ends. Empty pieces are left out. Returns the number of
 * iovecs written, -EINVAL for a bad @max_frag, -EMSGSIZE when the record
 * needs more than @nhdrs fragments, -ENOSPC when @out_cap iovecs are too
 * few. Borrows @in; @out points into @hdrs and the pieces. */
int rr_rm_enc_iov(const struct iovec *in, unsigned nin, uint32_t max_frag,
		  uint8_t (*hdrs)[RR_RM_HDR_LEN], unsigned nhdrs, struct iovec *out,
		  unsigned out_cap);

#endif
