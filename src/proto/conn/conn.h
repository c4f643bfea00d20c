/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* One RPC-over-RDMA Version 1 connection as a sans-I/O session (RFC 8166
 * with RFC 8797 negotiation, remote invalidation, the reliable-reply
 * extension), in either role. It owns every protocol decision of the
 * connection: credits (applied where the header is decoded), chunk planning,
 * which STags to invalidate and how, reliable reply and RDMA_DONE
 * accounting, the timers (next_timeout) and the statistics. It makes no
 * system call, starts no thread and includes no provider header.
 *
 * Inputs: the upper layer's Calls and Replies (rr_conn_submit,
 * rr_conn_reply, ...), received messages and the completions of the work
 * the session asked for (rr_conn_on_recv, rr_conn_on_send,
 * rr_conn_on_work), connection events (rr_conn_up, rr_conn_down) and time
 * (rr_conn_tick). Outputs: actions, through the executor's struct
 * rr_conn_io: register and deregister memory, post a Receive, post a Send (or
 * Send With Invalidate) from a send slot with the RDMA Writes before it, post
 * an RDMA Read, post a Local Invalidate, deliver a Call or a completed Call,
 * end the connection.
 *
 * Roles:
 *   requester (rr_conn_requester): one session per client endpoint, across
 *     connections: Calls queue under the credit grant, are planned and
 *     marshalled when sent, retransmitted with the same XID on the next
 *     connection; every STag a Call exposed is invalid before the Call
 *     completes (RFC 8166 section 3.4: remotely by Send With Invalidate, or
 *     by Local Invalidate, also for aborted Calls); Read-chunk Replies are
 *     pulled and answered with RDMA_DONE (proto/rrep.h).
 *   responder (rr_conn_responder): one session per connection: Calls are
 *     answered RDMA_ERROR, dropped, pulled (RDMA Read under ORD) or
 *     delivered; Replies go inline, by RDMA Write into Write chunks, through
 *     the Reply chunk, or as a responder Read chunk (parked while rrep_max of
 *     them await their RDMA_DONE), with a grant never 0.
 *   backchannel (RFC 8167), both roles: the requester also receives Calls
 *     (delivered within the bc_slots it grants, answered inline) and the
 *     responder also sends them (inline, under the backward credits the
 *     requester grants); backward credits and Receives are accounted apart
 *     from the forward ones (backchannel.c).
 *
 * Files by job (src/proto/conn/, bottom up: conn_int.h): io.c (the io
 * callbacks, message-form counters), credits.c (the credit rules, both
 * roles), privdata.c (RFC 8797), invalidate.c (fencing a Call's STags, Send
 * With Invalidate received), call.c (a Call's completion),
 * reliable_reply_pull.c (pulling a Read-chunk Reply, sending RDMA_DONE),
 * requester.c (Calls out, Replies in), request.c (a received Call's life,
 * RDMA_ERROR), reliable_reply.c (exposing a Read-chunk Reply, RDMA_DONE
 * received), reply.c (Replies out, parked Replies), responder.c (Calls in,
 * RDMA Reads), backchannel.c (RFC 8167: reverse Calls and Replies in both
 * roles), conn.c (life, negotiation, dispatch, timers).
 *
 * Threads: none; the executor serializes every call into a session and
 * receives the io callbacks synchronously, from inside those calls. */
#ifndef RR_PROTO_CONN_H
#define RR_PROTO_CONN_H

#include "proto/conn/credits.h"
#include "proto/conn/privdata.h"
#include "proto/rrep.h"
#include "proto/xprt.h"

struct rr_conn;

/* ---- memory the executor registers for the session ---- */

/* A registration: the session fills @base, @len, @access (RR_XPRT_ACC_*)
 * and @invalidatable (an STag it will invalidate: a memory window where the
 * provider has them); the executor fills the rest. */
struct rr_conn_mem {
	void *base;
	size_t len;
	unsigned access;
	bool invalidatable;
	/* by the executor */
	uint32_t stag;          /* what the peer names */
	uint64_t to;            /* Tagged Offset of @base for the peer */
	uint32_t lkey;          /* for local work requests on it */
	void *handle, *handle2; /* the executor's own (NULL: not registered) */
	bool window;            /* the STag is a window (invalidatable) */
};

/* One RDMA Write before a Send: @len bytes at @src (inside @mem, or the
 * executor's zero bytes when @mem is NULL: an XDR pad) to (@stag, @to). */
struct rr_conn_write {
	const struct rr_conn_mem *mem;
	const uint8_t *src;
	uint32_t len;
	uint32_t stag;
	uint64_t to;
};

/* A Send of @len bytes from send slot @slot, after @nwrites RDMA Writes,
 * with Send With Invalidate of @inv_stag when @inv. @token (0: none) comes
 * back in rr_conn_on_send once the Send completed or failed (without
 * Writes it asks for nothing at completion: the executor may tell such
 * Sends by count, rr_conn_on_sends). @quiet: nothing
 * of the session rides on its completion (a Reply copied whole into its
 * slot, no Writes): the executor may post it without one and then tells
 * nothing of it (rr_conn_io.send returns 1). */
struct rr_conn_send {
	uint32_t slot;
	uint32_t len;
	bool inv;
	bool quiet;
	/* a Reply while no other Call of its connection awaits one (nothing
	 * to chain it with: an executor that defers Replies to the end of a
	 * batch may post it now) */
	bool alone;
	uint32_t inv_stag;
	const struct rr_conn_write *writes;
	unsigned nwrites;
	uint64_t token;
};

/* An RDMA Read of (@stag, @to, @len) into @dst (inside @mem); completes in
 * rr_conn_on_work(@token). */
struct rr_conn_read {
	const struct rr_conn_mem *mem;
	uint8_t *dst;
	uint32_t len;
	uint32_t stag;
	uint64_t to;
	uint64_t token;
};

struct rr_conn_sreq;
struct rr_conn_rpc;

/* The executor's side. Each returns 0 or a negative errno; a failure to post
 * is fatal to the connection (the session ends it through @close). */
struct rr_conn_io {
	/* (Order: the set-up and error paths' ops first, then the requester's
	 * lending, then what every call uses, @ctx to @sent: the last 64 bytes,
	 * beside the session's env, st and up that follow the copy in struct
	 * rr_conn (conn.c asserts it). At 100 connections the copy is cold at
	 * every call; spread over 128 bytes it cost a line more per call:
	 * docs/PERFORMANCE.md "Issue 16 part CT".) */
	/* Registers @m (for the peer when @m->access has a remote right); a
	 * window is bound before any later work request of the connection.
	 * -ENOTCONN without a connection. */
	int (*reg)(void *ctx, struct rr_conn_mem *m);
	/* Deregisters @m: once it returns nothing of the provider touches the
	 * memory again (docs/security.md "Lifetime rule"). */
	void (*unreg)(void *ctx, struct rr_conn_mem *m);
	/* Posts a Local Invalidate of @m's STag; rr_conn_on_work(@token). */
	int (*inv)(void *ctx, struct rr_conn_mem *m, uint64_t token);
	int (*read)(void *ctx, const struct rr_conn_read *r);
	/* Ends the connection (disconnect); rr_conn_down follows. */
	void (*close)(void *ctx);
	/* the requester's per call (a Reply lent) and a backward Call's end */
	/* Keeps Receive @idx out of the Receive queue: its bytes are handed
	 * to the upper layer as a Reply in place. 0 and *@handle, or
	 * -ENOBUFS when no more may be lent (the session copies then). */
	int (*lend)(void *ctx, uint32_t idx, void **handle);
	/* The lent Receive is released: posted again if its connection is
	 * still the one up. */
	void (*unlend)(void *ctx, void *handle, uint32_t idx);
	void (*complete)(void *ctx, struct rr_conn_rpc *rpc);      /* a Call done
							  (the responder: a
							  backward Call) */
	/* ---- per call ---- */
	void *ctx;
	/* A free send slot (*@cap bytes at the returned address), or NULL. */
	uint8_t *(*slot_get)(void *ctx, uint32_t *slot, uint32_t *cap);
	void (*slot_put)(void *ctx, uint32_t slot);
	/* Posts the Writes and the Send of @s; takes the slot back itself once
	 * the Send completed. 0: its completion is told (rr_conn_on_send;
	 * rr_conn_on_sends, by count, for Sends without Writes); 1 (only when @s->quiet): posted, and never told
	 * (its slot comes back once a later completion proves it sent, or
	 * with the connection); negative errno: not posted. */
	int (*send)(void *ctx, const struct rr_conn_send *s);
	/* Posts Receive @idx again: 0; 1 when the executor released it
	 * instead (a shared pool that shrinks: rr_cred_pool_keep), negative
	 * errno when it could not. */
	int (*post_recv)(void *ctx, uint32_t idx);
	/* Optional (responder, shared receive queue): the peer may send @add
	 * more messages (a grant grew, an RDMA_DONE was reserved): the executor
	 * lets the connection take that many more Receives from the queue
	 * (rpcrdma_qp_recv_quota), so a peer's burst never takes more than its
	 * grant of the pool. */
	void (*recv_quota)(void *ctx, uint32_t add);
	/* Upcalls (the executor may queue them to run without its lock). */
	void (*deliver)(void *ctx, struct rr_conn_sreq *r);        /* a Call (the
							  requester: a reverse
							  Call) */
	void (*sent)(void *ctx, struct rr_conn_sreq *r, int status); /* a Reply's
							  memory is free */
};

/* ---- configuration ---- */

enum rr_conn_role { RR_CONN_REQUESTER, RR_CONN_RESPONDER };

/* Freed responder objects kept for every session of one progress loop
 * (the transport server's shard): the next Call, on whichever connection,
 * takes the request and Call context its loop freed last, still in
 * cache, where a connection's own spares are cold at 100 connections
 * (issue 16 part GF). Stacks of at most RR_CONN_SPARES requests (and
 * RR_XPRT_RSP_SHARED contexts and small buffers); a session falls back
 * on its own spares when they are empty or full. No lock of its own:
 * every session sharing one is called under one lock (the shard's) and
 * allocates on the same env; a session being destroyed no longer uses it
 * (rs_destroy), and its owner empties it with rr_conn_spares_drain once
 * every one of them is destroyed. */
#define RR_CONN_SPARES 32u
struct rr_conn_spares {
	struct rr_xprt_rsp_shared rsp;    /* first: rs_shared_reqs */
	unsigned nreqs;
	void *reqs[RR_CONN_SPARES];
};

/* Frees what @sp keeps (allocated on @env): no session uses it any more. */
void rr_conn_spares_drain(struct rr_conn_spares *sp, const struct rpcrdma_env *env);

struct rr_conn_config {
	enum rr_conn_role role;
	const struct rpcrdma_env *env;     /* allocation */
	const struct rpcrdma_env *clock;   /* timers (rrep, stalls); NULL: @env */
	struct rr_xprt_stats *stats;       /* counters, borrowed */
	struct rr_pd_local local;          /* what we advertise (RFC 8797) */
	uint32_t credits;                  /* requester: request; responder: largest grant */
	uint32_t max_seg_len, max_segs, max_call;
	bool inline_ddp;
	bool use_windows;                  /* invalidatable registrations */
	uint32_t send_size, recv_size;     /* our send slot and Receive sizes */
	/* responder */
	struct rr_cred_pool *pool;         /* a shared receive queue's Receives
					      (the executor's, one per queue);
					      NULL: the connection's own */
	uint32_t rrep_max;                 /* Read-chunk Replies awaiting RDMA_DONE */
	uint64_t rrep_timeout_ns;
	uint64_t reply_mem_per_conn;
	uint64_t *reply_mem_total_used;    /* shared by a server's sessions */
	uint64_t reply_mem_total;
	uint64_t send_timeout_ns;          /* 0: never */
	struct rr_conn_failed *failed;     /* shared: XIDs whose Read failed */
	struct rr_conn_spares *spares;     /* shared by one loop's sessions; NULL:
					      each keeps its own only */
	/* backchannel (RFC 8167): requester: reverse Calls it serves at once,
	 * the backward credits it grants; responder: backward Calls it may
	 * have outstanding (its credit request). Either way as many of the
	 * Receives posted (rr_conn_up's @nrecv) are for the backward
	 * direction and not counted in the forward credits. 0: none. */
	uint32_t bc_slots;
};

/* ---- requester ---- */

/* A Call as the upper layer gives it (moved from rr_conn_rpc). */
/* The largest Reply the session copies into its rr_conn_rpc (a Call's
 * without sinks) rather than lending its Receive (a NULL procedure's
 * accepted Reply is 24 bytes). */
#define RR_CONN_REPLY_OWN 64u

struct rr_conn_rpc {
	/* The Call's description, field by field, or as the planner's
	 * description whole (@desc, the same fields at the same offsets:
	 * asserted below): the session plans from it in place, not from a
	 * copy built per Call (issue 16 part GC). */
	union {
		struct rr_xprt_rqst_desc desc;
		struct {
			uint32_t xid;                       /* XID of the Call (in the parts) */
			const struct rr_xprt_part *parts;   /* the Call's XDR stream */
			unsigned nparts;
			const struct rr_xprt_sink *sinks;   /* DDP-eligible result buffers */
			unsigned nsinks;
			uint32_t max_reply;                 /* largest reduced Reply */
			uint32_t min_reply;                 /* smallest expected (draft 5.3.1) */
			bool max_unknown;                   /* @max_reply is only a ceiling */
		};
	};
	void *user;
	/* outputs */
	int status;                  /* 0, -EREMOTEIO (RDMA_ERROR ERR_CHUNK),
					-EPROTONOSUPPORT (ERR_VERS), -ECONNRESET,
					abort's status */
	uint8_t *reply;              /* reduced Reply, valid until release
					(an inline one may be the Receive
					buffer itself, reposted at release) */
	uint32_t reply_len;
	bool via_read;               /* reliable reply: pulled from a
					responder-provided Read chunk */
	void *priv;                  /* session-private */
	void *lent;                  /* session-private: @reply's Receive */
	uint32_t lent_idx;
	struct rr_conn_rpc *xnext;   /* executor-private (its upcall queue) */
	bool xdone;                  /* executor-private */
	bool caller_waits;           /* the executor's: its caller waits (in
					the hole after @xdone: the Call's
					description above is the planner's
					whole) */
	void *xbc;                   /* executor-private (a backward Call's) */
	/* Per sink, the first @nsinks only (the others are not written):
	 * after the fields every Call writes and reads, which fit two lines
	 * of 64 bytes (issue 16 part CS: at 100 connections a Call's object
	 * is cold at its submit and at its Reply, each line a miss). */
	union {
		struct {
			uint32_t placed[RR_XPRT_MAX_ITEMS];   /* bytes written per sink */
			bool is_placed[RR_XPRT_MAX_ITEMS];    /* that Write chunk was used */
		};
		/* session-private, a Call without sinks only (nsinks 0:
		 * placed and is_placed unused): its Reply of at most
		 * RR_CONN_REPLY_OWN bytes is copied here (@reply points at
		 * it): its Receive goes back at once, nothing is lent, and
		 * its release touches only this object
		 * (rr_conn_release_own). In the space the sinks' results
		 * take (the call's wrapper fills its area: rpc.c). */
		uint8_t reply_own[RR_CONN_REPLY_OWN];
	};
};
_Static_assert(RR_CONN_REPLY_OWN <= RR_XPRT_MAX_ITEMS * sizeof(uint32_t),
	       "reply_own within the sinks' results");
#define RR_CONN_RPC_DESC_AT(f)                                                                     \
	_Static_assert(offsetof(struct rr_conn_rpc, f) == offsetof(struct rr_xprt_rqst_desc, f) && \
			       sizeof(((struct rr_conn_rpc *)0)->f) ==                             \
				       sizeof(((struct rr_xprt_rqst_desc *)0)->f),                 \
		       "rr_conn_rpc's " #f " is its desc's")
RR_CONN_RPC_DESC_AT(xid);
RR_CONN_RPC_DESC_AT(parts);
RR_CONN_RPC_DESC_AT(nparts);
RR_CONN_RPC_DESC_AT(sinks);
RR_CONN_RPC_DESC_AT(nsinks);
RR_CONN_RPC_DESC_AT(max_reply);
RR_CONN_RPC_DESC_AT(min_reply);
RR_CONN_RPC_DESC_AT(max_unknown);
#undef RR_CONN_RPC_DESC_AT

/* ---- responder ---- */

/* A received Call, delivered to the upper layer (io->deliver). */
struct rr_conn_sreq {
	const uint8_t *msg;          /* the Call, RPC header first */
	uint32_t len;
	uint32_t xid;
	void *user;                  /* the upper layer's */
	/* executor-private */
	void *xconn;                 /* its connection */
	struct rr_conn_sreq *xnext;  /* upcall queues */
	void (*xsent)(void *arg, int status);
	void *xsent_arg;
	bool xsent_done;
	int xsent_status;
	/* the executor's own request object for its upper layer, kept here
	 * rather than allocated per Call (the rdma:// RPC adapter's struct
	 * rr_xprt_req, transport/rdma/rpc.c, a static assertion there). Not
	 * cleared when the request is made: written whole by the executor
	 * before it is read. Issue 16 part DH. */
	_Alignas(8) unsigned char xreq[40];
};

/* XIDs whose RDMA Read failed (fatal to their connection), per peer host:
 * when the same peer retransmits that XID on a new connection it gets
 * ERR_CHUNK instead of another failing Read (RFC 8166: do not loop). Shared
 * by a server's sessions; the hosts are opaque keys of the executor. */
#define RR_CONN_FAILED_MAX 32u
struct rr_conn_failed {
	struct {
		uint64_t host;
		uint32_t xid;
		bool used;
	} e[RR_CONN_FAILED_MAX];
	unsigned next;
};

/* ---- the session ---- */

/* Creates a session (not connected). Borrows @cfg's pointers and @io for
 * its life. 0 or -ENOMEM. */
int rr_conn_create(const struct rr_conn_config *cfg, const struct rr_conn_io *io,
		   struct rr_conn **out);
/* Frees it; every registration it still holds is deregistered and every
 * Call it still holds completes with -ECANCELED (requester) or is dropped
 * (responder: the executor must have finished the requests it delivered).
 * A responder gives its Receive reservation back to its pool here, not at
 * rr_conn_down: destroy it once its queue pair can take no more Receives
 * and their completions were counted (rr_cred_rsp_leave). */
void rr_conn_destroy(struct rr_conn *c);

/* The connection is established: the peer's private data (RFC 8797) decides
 * the parameters; @nrecv Receives are posted (Receives 0..nrecv-1; a
 * responder on a shared pool: 0, the pool counts its own), @ord the RDMA
 * Reads we may have outstanding. @peer_host keys the failed-Read table
 * (responder). Queued Calls go out. A responder joins its pool (the
 * executor made sure it has room: rr_cred_pool_room; without, the
 * connection ends). */
void rr_conn_up(struct rr_conn *c, const void *peer_pd, size_t pd_len, uint32_t nrecv,
		uint16_t ord, uint64_t peer_host);
/* The connection is gone (disconnect, a failed completion, the peer's
 * Terminate): every STag is invalid with the QP; requester: Calls without a
 * Reply go back to the head of the queue (retransmitted on the next
 * connection with the same XID), pulls end; responder: parked Replies are
 * told -ENOTCONN, exposed ones fenced. No completion of the lost
 * connection's work is fed to the session afterwards: it settled it all. */
void rr_conn_down(struct rr_conn *c);
/* Responder: the RDMA Reads it may have outstanding, once known (the
 * connection established). */
void rr_conn_set_ord(struct rr_conn *c, uint16_t ord);
bool rr_conn_is_up(const struct rr_conn *c);
/* The negotiated parameters (valid while up). */
const struct rr_xprt_params *rr_conn_params(const struct rr_conn *c);
/* Whether RDMA Commit was negotiated by both (our ext_caps and the peer's). */
bool rr_conn_commit(const struct rr_conn *c);

/* A Receive (@idx, @len bytes at @buf) completed; @inv_stag is the STag the
 * peer invalidated when @has_inv. The session reposts it (io->post_recv) or
 * keeps it lent to a Reply until rr_conn_release_reply. */
void rr_conn_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len,
		     bool has_inv, uint32_t inv_stag);
/* rr_conn_on_recv for a requester's session (made with RR_CONN_REQUESTER),
 * the same body: for an executor that knows the role of the connection it
 * receives on (a client's own Receive; the responder's test skipped). */
void rr_conn_on_recv_rq(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len,
			bool has_inv, uint32_t inv_stag);
/* Completions of what the session posted (@status 0 or a negative errno;
 * a failure also ends the connection: rr_conn_down follows). */
void rr_conn_on_send(struct rr_conn *c, uint64_t token, int status);
/* @n Sends without RDMA Writes (@s->nwrites 0 at io->send) completed
 * successfully together (the unsignaled Sends a later completion tells
 * of): as rr_conn_on_send for each, with one turn of what waits for a free
 * slot (rr_conn_on_slot) after all. Their tokens are not needed: the
 * session gives a Send without Writes a token with nothing to do at its
 * completion (only a Reply with Writes has one: its memory's release). */
void rr_conn_on_sends(struct rr_conn *c, unsigned n);
/* A Read or Local Invalidate (io->read, io->inv) completed: the token
 * says which, so an executor whose failed completions carry no reliable
 * opcode passes it on as it is -- before it closes the connection, so a
 * failed Read is remembered (struct rr_conn_failed). */
void rr_conn_on_work(struct rr_conn *c, uint64_t token, int status);
/* A send slot was freed (more RDMA_DONEs may go). */
void rr_conn_on_slot(struct rr_conn *c);
/* The executor posted a signaled work request of its own whose
 * completion it tells as a Send's (rr_conn_on_send, token 0): counted in
 * flight, so the send-stall watch covers it; when it is the only one, the
 * watch counts from @since (the clock's ns: the quiet Sends it vouches
 * for were seen waiting then). */
void rr_conn_send_watch(struct rr_conn *c, uint64_t since);

/* Time: runs what is due at @now (the clock's ns): Read-chunk Reply
 * expiry, parked Replies, stalled Sends. */
void rr_conn_tick(struct rr_conn *c, uint64_t now);
/* When rr_conn_tick has something to do next (UINT64_MAX: nothing). */
uint64_t rr_conn_next_timeout(const struct rr_conn *c, uint64_t now);
/* Responder: whether Read-chunk Replies wait for an RDMA_DONE reservation
 * (parked); rr_conn_resume sends those that have one now (its shared pool
 * got Receives: the executor calls it after posting them). */
bool rr_conn_parked(const struct rr_conn *c);
void rr_conn_resume(struct rr_conn *c);

/* requester */
/* Takes @rpc (validated now: -EINVAL, -EMSGSIZE, -ENOMEM are synchronous,
 * nothing follows); io->complete(@rpc) follows exactly once otherwise. */
int rr_conn_submit(struct rr_conn *c, struct rr_conn_rpc *rpc);
/* Ends @rpc with @status (its STags are fenced first; a Reply that comes
 * later is dropped, and only then frees the credit a sent Call holds). No
 * effect when it already completed. */
void rr_conn_abort(struct rr_conn *c, struct rr_conn_rpc *rpc, int status);
/* Completes every Call not sent yet with @status (no reconnection). */
void rr_conn_fail_queued(struct rr_conn *c, int status);
/* Aborts every Call with @status (destroy): queued ones complete now, sent
 * ones once their STags are fenced. */
void rr_conn_abort_all(struct rr_conn *c, int status);
/* Frees @rpc's reply (reposts a lent Receive). */
void rr_conn_release_reply(struct rr_conn *c, struct rr_conn_rpc *rpc);
/* Releases @rpc's reply when the session copied it into @rpc itself
 * (reply_own): touches @rpc alone, so it needs no lock of the session's.
 * Returns whether it did; false: the reply is elsewhere, for
 * rr_conn_release_reply. */
bool rr_conn_release_own(struct rr_conn_rpc *rpc);
/* Calls not yet completed, or other work only receiving moves on (pulls,
 * RDMA_DONEs waiting for a slot, a Call aborted after its Send). */
bool rr_conn_busy(const struct rr_conn *c);
bool rr_conn_has_calls(const struct rr_conn *c);
/* STags exposed by Calls and still valid (tests). */
uint32_t rr_conn_live_stags(const struct rr_conn *c);
uint32_t rr_conn_grant(const struct rr_conn *c);
/* Requester: Replies the peer may send now, each into a Receive of ours:
 * one per Call holding a credit (sent, or about to be: the credit is taken
 * before the Send), a Call aborted after its Send included until its Reply
 * came (RFC 8166 section 4.3.1). Never above the credits requested. */
uint32_t rr_conn_replies_owed(const struct rr_conn *c);
/* Whether reliable reply was negotiated (up only). */
bool rr_conn_reliable_reply(const struct rr_conn *c);

/* responder */
/* Replies to @r with @parts (the RPC Reply's XDR stream, DDP items
 * flagged). Returns 1: posted (or parked): io->sent(@r) follows once @parts
 * is no longer referenced; 0: sent from the slot only, @parts is free now
 * (*@err_chunk set when ERR_CHUNK went instead); negative errno: nothing
 * posted (the caller may rr_conn_refuse). */
int rr_conn_reply(struct rr_conn *c, struct rr_conn_sreq *r, const struct rr_xprt_part *parts,
		  unsigned nparts, bool *err_chunk);
/* @r cannot be answered (no memory): RDMA_ERROR/ERR_CHUNK for its XID, or
 * the connection ends when not even that can be sent. */
void rr_conn_refuse(struct rr_conn *c, struct rr_conn_sreq *r);
/* The upper layer is done with @r (after its Reply's io->sent, or without a
 * Reply). Returns true when @r is freed now; false when its Reply is still
 * being sent (freed when it completes; io->sent is not called then). */
bool rr_conn_done(struct rr_conn *c, struct rr_conn_sreq *r);
/* Work in progress that keeps the connection from being idle (Calls being
 * read or answered, Replies awaiting RDMA_DONE). */
bool rr_conn_in_progress(const struct rr_conn *c);
/* Read-chunk Replies exposed and still valid / awaiting RDMA_DONE (tests). */
uint32_t rr_conn_rrep_live(const struct rr_conn *c);
uint32_t rr_conn_rrep_waiting(const struct rr_conn *c);
/* Reply bytes held for the peer (exposed, parked, fenced not yet freed). */
uint64_t rr_conn_rrep_bytes(const struct rr_conn *c);

/* ---- backchannel (RFC 8167; backchannel.c) ----
 * Reverse messages are inline only: RDMA_MSG with three empty lists, the
 * RPC message's msg_type telling a Call from a Reply (RFC 8167 section 4;
 * Linux tells them apart the same way). */

/* Requester: reverse Calls are delivered (io->deliver, an rr_conn_sreq
 * whose @msg the session owns until rr_conn_bc_done) while @on, at most
 * cfg.bc_slots at once on a connection; others are dropped and counted
 * (bc_calls_dropped). */
void rr_conn_bc_enable(struct rr_conn *c, bool on);
/* Requester: answers reverse Call @r with @parts (DDP-eligible items
 * inline, padded), with the backward credit grant. 0: sent from a send
 * slot (@parts free at once); -ENOTCONN: @r's connection is gone (the Reply
 * is lost); -EMSGSIZE: above the inline threshold; -ENOBUFS: no send slot.
 * Borrows @parts for the call. */
int rr_conn_bc_reply(struct rr_conn *c, struct rr_conn_sreq *r, const struct rr_xprt_part *parts,
		     unsigned nparts);
/* Requester: the upper layer is done with @r (answered or not): freed. */
void rr_conn_bc_done(struct rr_conn *c, struct rr_conn_sreq *r);

/* Responder: sends backward Call @rpc (its XDR stream in @parts, inline)
 * under the backward credits the requester grants (1 before its first
 * backward Reply; queued beyond). Takes @rpc: io->complete(@rpc) follows
 * exactly once -- its Reply (status 0, @reply/@reply_len the RPC Reply, a
 * copy allocated from cfg.env that the executor frees with rr_free when
 * the upper layer is done; it outlives the connection and the session),
 * -EREMOTEIO (RDMA_ERROR for it),
 * -ECONNRESET (the connection went: never retransmitted, only the
 * requester can connect), or rr_conn_bc_abort's status. Synchronous errors
 * (nothing follows): -ENOTCONN, -EOPNOTSUPP (cfg.bc_slots 0), -EMSGSIZE
 * (above the inline threshold), -EINVAL, -ENOMEM. */
int rr_conn_bc_submit(struct rr_conn *c, struct rr_conn_rpc *rpc);
/* Responder: ends backward Call @rpc with @status (a timeout, a cancel);
 * its credit comes back (a Reply that comes later matches nothing). No
 * effect once it completed. */
void rr_conn_bc_abort(struct rr_conn *c, struct rr_conn_rpc *rpc, int status);
/* Responder: backward Calls not completed (keeps the connection from
 * being idle). */
bool rr_conn_bc_busy(const struct rr_conn *c);

#endif
