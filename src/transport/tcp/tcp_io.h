/* SPDX-License-Identifier: BSD-2-Clause */
/* Socket I/O of tcp:// shared by the client and the server: reading records
 * from a non-blocking socket through the record marking decoder (rm.h)
 * into recycled buffers (tcp_bufs.h), with optional read-ahead, and writing
 * one RPC message as one record with a gathering sendmsg. */
#ifndef RR_TRANSPORT_TCP_IO_H
#define RR_TRANSPORT_TCP_IO_H

#include <stdatomic.h>
#include <sys/uio.h>

#include "transport/tcp/rm.h"
#include "transport/tcp/tcp_bufs.h"
#include "transport/xprt.h"

/* A connection's reader: the decoder, its buffers and the read-ahead. */
struct rr_tcp_reader {
	struct rr_rm_dec dec;
	struct rr_tcp_bufs bufs;
	/* Optional read-ahead: bytes received beyond what the decoder asked
	 * for, so that a small record (header and body) costs one recv. Its
	 * user must come back for staged bytes without waiting for the socket
	 * (rr_tcp_reader_buffered): they may be all there is. */
	uint8_t *stage;
	size_t stage_cap, stage_off, stage_len;
	/* A stage borrowed from the reader's loop (shared by its readers;
	 * rr_tcp_reader_park), or NULL: the stage is the reader's own. */
	uint8_t *shared;
	size_t shared_cap;
	/* Most bytes one rr_tcp_read takes from the socket before it returns
	 * (0: no bound): a connection on a shared progress loop that streams a
	 * large record yields to the loop's others between two reads. */
	size_t turn_max;
	/* Optional bounce buffer (a server connection: its loop's, borrowed):
	 * a record's data beyond bounce_cap bytes is received into it, a
	 * piece of at most bounce_cap bytes at a time, and copied to the
	 * record's buffer; the last bounce_cap bytes go there directly. It
	 * never keeps bytes between calls (a piece is at most what the record
	 * still owes), so the connections of one loop share one. */
	uint8_t *bounce;
	size_t bounce_cap;
};

/* The bound of a server connection's turn (rr_tcp_reader.turn_max): large
 * enough that a record of 1 MiB of data with its RPC headers is read in
 * one turn when its bytes are there, small enough that a turn copies for
 * well under a millisecond before the loop's other connections are
 * served. */
#define RR_TCP_TURN_BYTES ((size_t)1024 * 1024 + 65536)
/* A server connection's read-ahead stage: a Call of up to 4.5 KiB (NULL,
 * a READ's or a GETATTR's arguments, a 4 KiB WRITE with its RPC and NFS
 * headers) is read with its fragment header in one recv; a larger one
 * copies at most this much through the stage, the rest lands in the
 * record's buffer (or comes through the bounce buffer). */
#define RR_TCP_SRV_STAGE ((size_t)4608)
/* The bounce buffer of a server's loop. Measured on the development
 * machine (docs/PERFORMANCE.md, issue 13): the server's CPU per WRITE
 * record of 256 KiB - 8 MiB halves when the kernel copies into 64 KiB that
 * stay in cache and user space copies on, against receiving straight
 * into the large record buffer; libtirpc reads through a 64 KiB buffer
 * too. */
#define RR_TCP_BOUNCE ((size_t)65536)

/* Records of up to @max bytes (@trust_len, @skip_oversize: rm.h); buffers
 * up to @spare_max kept by the reader, larger ones given to @pool (may be
 * NULL: freed). Borrows @pool for the life of @r. */
void rr_tcp_reader_init(struct rr_tcp_reader *r, const struct rpcrdma_env *env, size_t max,
			size_t spare_max, struct rr_tcp_cache *pool, bool trust_len,
			bool skip_oversize);
void rr_tcp_reader_fini(struct rr_tcp_reader *r);
/* Enables read-ahead with a @cap-byte staging buffer: 0 or -ENOMEM. */
int rr_tcp_reader_stage(struct rr_tcp_reader *r, size_t cap);
/* Enables read-ahead through @buf (@cap bytes), shared by the readers that
 * one thread runs: after each rr_tcp_read, before another of them may
 * read, rr_tcp_reader_park. Borrows @buf for the life of @r. */
void rr_tcp_reader_share_stage(struct rr_tcp_reader *r, uint8_t *buf, size_t cap);
/* Bytes still staged in the shared stage move to memory of the reader's
 * own, exactly their size (given back once they are read), so that the
 * stage is free for the next reader: 0, or -ENOMEM (the bytes are lost:
 * the stream is out of step). */
int rr_tcp_reader_park(struct rr_tcp_reader *r);
/* Forgets a partial record and staged bytes (new connection). */
void rr_tcp_reader_reset(struct rr_tcp_reader *r);
/* True when read-ahead bytes wait in the stage. */
bool rr_tcp_reader_buffered(const struct rr_tcp_reader *r);
/* Reads from @fd as far as the socket has bytes, straight into the
 * record's buffer, until a record is complete, the socket is empty or
 * r->turn_max bytes were read by this call. Returns RR_RM_RECORD when a
 * record is complete (rr_rm_dec_take on r->dec), 0 when the socket has no
 * more bytes now or the turn's bound was reached (the caller's
 * level-triggered watch of @fd brings it back),
 * RR_RM_SKIPPED when an oversized record was discarded (rr_rm_dec_skipped),
 * -ECONNRESET on EOF or error, or the decoder's errors: -EMSGSIZE,
 * -EBADMSG, -ENOMEM, -EPROTOTYPE (the connection starts with an MPA
 * frame). */
int rr_tcp_read(struct rr_tcp_reader *r, int fd);
/* rr_tcp_read on a blocking socket (no O_NONBLOCK): the first recv waits
 * for bytes, up to the socket's SO_RCVTIMEO (then returns 0, as for an
 * empty socket); the rest never wait. One system call where poll + recv
 * took two. */
int rr_tcp_read_wait(struct rr_tcp_reader *r, int fd);
/* Gives a taken record buffer back (any thread). */
void rr_tcp_reader_recycle(struct rr_tcp_reader *r, uint8_t *buf, size_t cap);

/* Sends @m as one record. Polls in slices; gives up when *@cancel becomes
 * true (before the first byte: -ECANCELED, stream intact; later: the stream
 * is broken, -ECONNABORTED) or after @timeout_ms without progress
 * (-ETIMEDOUT); -EMSGSIZE above one fragment, -ECONNRESET when the
 * connection failed. Borrows @m for the duration of the call. */
int rr_tcp_send_record(int fd, const struct rr_xprt_msg *m, atomic_bool *cancel, int timeout_ms);

#define RR_TCP_SEND_PIECES (1 + 3 * RR_RPC_MAX_DDP + 1)
#define RR_TCP_SEND_IOV (1 + RR_TCP_SEND_PIECES)

/* A record being sent in steps (rr_tcp_send_record in two halves): where
 * the next byte comes from. Refers to itself (@v, the marker): it stays
 * where it was initialised until the send ends. */
struct rr_tcp_send {
	struct iovec iov[RR_TCP_SEND_IOV];
	struct iovec *v;
	int niov;
	size_t total, sent;
	uint8_t marker[1][RR_RM_HDR_LEN];
};

/* Frames @m as one record into @s: 0, or -EMSGSIZE above one fragment.
 * Borrows @m until the send ends. */
int rr_tcp_send_init(struct rr_tcp_send *s, const struct rr_xprt_msg *m);
/* Sends what is left of @s, as rr_tcp_send_record; @timeout_ms 0: one
 * non-blocking try, -EAGAIN when bytes are left (the stream then holds
 * @s->sent bytes of the record, and the next rr_tcp_send_more goes on from
 * there). */
int rr_tcp_send_more(int fd, struct rr_tcp_send *s, atomic_bool *cancel, int timeout_ms);
/* The socket options of every tcp:// connection (TCP_NODELAY). */
void rr_tcp_sock_opts(int fd);
/* Clears @call's results before it is sent, forward or backward (no Reply
 * yet, status 0, every DDP item unplaced: tcp:// places none). */
void rr_tcp_call_reset(struct rr_xprt_call *call);

#endif
