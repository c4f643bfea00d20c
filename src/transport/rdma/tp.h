/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC-over-RDMA Version 1 transport driver: binds the sans-I/O core
 * (proto/xprt.h), the RFC 8797 private data negotiation (proto/conn/privdata.h) and
 * the credit accounting (proto/conn/credits.h) to a provider (rpcrdma/rdma.h).
 *
 * Client (requester, active side): connects with the RFC 8797 block plus the
 * project's extension block in the private data, negotiates the two inline
 * thresholds and remote invalidation (RFC 8797 sections 4, 5), posts at least
 * as many Receives as it requests credits, registers each RPC's memory with
 * invalidatable registrations (memory windows bound per RPC when the provider
 * has them), queues Calls beyond the grant (RFC 8166 section 4.3.1), and
 * before a completion reaches the upper layer every STag of that RPC is
 * invalid: remotely invalidated (the Receive says which) or locally with
 * Local Invalidate (also for aborted RPCs). On connection loss it reconnects,
 * renegotiates, and retransmits every Call without a Reply with the same XID.
 *
 * Server (responder, passive side): listens, answers each connection request
 * with its private data, grants credits (never 0), keeps Receives posted,
 * answers header errors with RDMA_ERROR, pulls Read chunks with RDMA Read
 * (never more than the negotiated ORD outstanding), delivers the rebuilt Call,
 * and sends Replies (Write chunks by RDMA Write, Long Replies through the
 * Reply chunk, ERR_CHUNK when nothing fits; Send With Invalidate when both
 * peers set R). A failed RDMA Read/Write or Send is fatal to the connection.
 *
 * Threads: none of its own. A client lives on one progress loop of the
 * process's engine (src/engine), a server's connections are spread over
 * all of them round-robin (one shard per loop), and each loop polls the CM
 * channels and the completion queues of what lives on it; upcalls
 * (completion, incoming Call) run on the connection's loop (or on a
 * synchronous caller's thread, see rr_tp_client_wait) and must not block.
 * Submit, abort and reply may be called from any thread.
 * rr_tp_server_reply() is synchronous (on the progress thread it drains the
 * CQ itself while it waits); rr_tp_server_reply_async() posts and returns,
 * the Reply's memory being released by an upcall once its Send completed. */
#ifndef RR_TRANSPORT_RDMA_TP_H
#define RR_TRANSPORT_RDMA_TP_H

#include <stdio.h>
#include <sys/socket.h>

#include "proto/conn/conn.h"
#include "proto/xprt.h"
#include "rpcrdma/rdma.h"

struct rr_loop;

struct rr_tp_conf {
	const struct rpcrdma_env *env;  /* NULL: defaults */
	struct rr_loop *loop;           /* client: its progress loop (src/engine;
					   the RPC client's); NULL: one picked
					   round-robin. A server uses every loop
					   of the engine. */
	const char *provider;           /* "soft" unless set; "verbs": rdma-core */
	const char *device;             /* provider's device name; NULL: the
					   one owning the listen address /
					   routing to the peer (verbs), or the
					   first */
	uint32_t spin_us;               /* rpcrdma_open_attr.spin_us */
	uint32_t inline_send;           /* advertised Send size (4096);
					   0: the provider's default
					   (RR_TP_INLINE_SOFT on the soft
					   provider, 4096 otherwise); larger
					   than 262144: 262144 (RFC 8797) */
	uint32_t inline_recv;           /* advertised Receive size (4096; 0
					   and the cap as inline_send) */
	uint32_t inline_mem;            /* bytes of Receive buffers + send
					   slots per connection (32 MiB): when
					   the sizes above need more with
					   @credits, the credits requested
					   (requester) or granted and rrep_max
					   (responder) are lowered to fit, not
					   below RR_TP_MIN_CREDITS (nor ever
					   raised); 0: no cap */
	uint32_t credits;               /* requester: request (128);
					   responder: largest grant (64) */
	bool remote_inv;                /* advertise R (true) */
	bool use_windows;               /* invalidatable registrations (true);
					   false, or a provider without them
					   (siw): per-RPC memory registrations,
					   deregistered before completion, and
					   no R bit */
	uint32_t max_seg_len;           /* largest segment exposed (1 MiB) */
	uint32_t max_segs;              /* segments per chunk (16) */
	uint32_t max_call;              /* responder: largest Call (16 MiB) */
	bool inline_ddp;                /* requester: small DDP-eligible
					   results inline, no Write chunk and no
					   registration, when the largest Reply
					   fits the negotiated reply threshold
					   (true); false: always Write chunks
					   (proto/xprt.h) */
	uint32_t connect_timeout_ms;    /* 5000 */
	uint32_t reconnect_delay_ms;    /* 50 */
	bool no_reconnect;
	uint16_t ord, ird;              /* RDMA Read depth each way (16) */
	uint32_t max_conns;             /* responder: 0 = no limit */
	/* Responder, connection limits (docs/security.md "Limits"; the RPC
	 * layer supplies the public defaults): */
	uint32_t max_conns_per_host;    /* connections from one source address
					   (refused beyond); 0 = no limit */
	uint32_t max_handshakes;        /* half-open connections of the
					   listener (struct rr_listen_limits;
					   the soft provider only); 0 = the
					   provider's default */
	bool no_defer_accept;           /* soft listener: no TCP_DEFER_ACCEPT
					   (struct rr_listen_limits) */
	uint32_t idle_timeout_ms;       /* an established connection with no
					   Receive, no Call in progress and no
					   Reply awaiting RDMA_DONE for this long
					   is disconnected; 0 = never */
	uint32_t ext_caps;              /* extension block capabilities
					   (RR_PD_EXT_CAP_*, proto/conn/privdata.h);
					   0: no extension block. Default:
					   RELIABLE_REPLY (used only when the
					   peer advertises it too). RDMA_COMMIT
					   (push mode) is set by rdma/rpc.c. */
	/* Reliable reply (proto/rrep.h, docs/protocol.md): */
	uint32_t rrep_timeout_ms;       /* responder: an exposed Reply is fenced
					   when no RDMA_DONE came (30000) */
	uint32_t rrep_max;              /* responder: Read-chunk Replies awaiting
					   RDMA_DONE at once; as many extra
					   Receives are posted (32); more wait
					   (parked, no thread held) up to
					   rrep_timeout_ms, then ERR_CHUNK */
	/* Memory a peer can make the responder hold (docs/security.md
	 * "Limits"): bytes of Read-chunk Replies exposed, parked or fenced and
	 * not yet freed, per connection and for the whole server; a Reply that
	 * would go over is answered ERR_CHUNK at once. */
	uint64_t reply_mem_per_conn;    /* 16 MiB */
	uint64_t reply_mem_total;       /* 256 MiB */
	/* responder: a connection whose Sends made no progress this long (the
	 * peer does not read its socket, so the Replies it holds are never
	 * released) is closed (60000; 0: never) */
	uint32_t send_timeout_ms;
	const struct rpcrdma_env *rrep_clock; /* clock of those timeouts
					   (NULL: @env); tests: virtual */
	/* Responder, Receives (docs/protocol.md "Credits"): with a provider
	 * that has shared receive queues (RPCRDMA_CAP_SRQ) the connections of
	 * a progress thread draw their Receives from one queue, grown and
	 * shrunk with the messages in flight, each connection's grant
	 * following its demand; without, or with @no_srq, each connection has
	 * its own credits + 4 (+ rrep_max) Receives. */
	bool no_srq;
	/* Tests: the shared receive queue takes QPs of its own PD only, as
	 * with verbs (the pool's connections share one PD), whatever the
	 * provider allows. */
	bool pool_share_pd;
	uint32_t pool_recvs;            /* Receives one shared queue may hold
					   (0: RR_TP_POOL_RECVS, at most the
					   provider's max_srq_wr): a connection
					   needs one at least (admission) */
	/* Backchannel (RFC 8167, proto/conn/backchannel.c): requester:
	 * reverse Calls served at once (the backward credits granted);
	 * responder: backward Calls outstanding per connection (its credit
	 * request). As many Receives and send slots are added for them
	 * (counted in inline_mem). 0 (the default here; the RPC layer sets
	 * RR_TP_BC_SLOTS on a server): none. */
	uint32_t bc_slots;
};

/* Backward Calls a server connection may have outstanding (Linux svcrdma
 * keeps 2; NFSv4.1 callbacks are few: probes and recalls). */
#define RR_TP_BC_SLOTS 4u

/* Inline threshold policy (docs/transport.md "Inline thresholds"). On the
 * software (TCP-carried) provider an RDMA Read or Write of a chunk costs a
 * full TCP round trip while a Send lands in a posted Receive, so the soft
 * default lets DDP items up to 128 KiB plus their RPC header travel inline
 * (measured crossover: docs/perf-notes/wpath.md); Linux
 * peers advertise 4096 and the smaller size wins (RFC 8797 section 4.2). */
#define RR_TP_INLINE_SOFT (131072u + 4096u)
#define RR_TP_INLINE_DEFAULT 4096u
#define RR_TP_INLINE_MEM (32u << 20)
#define RR_TP_MIN_CREDITS 8u
#define RR_TP_REPLY_MEM_PER_CONN (16ull << 20)
#define RR_TP_REPLY_MEM_TOTAL (256ull << 20)
#define RR_TP_POOL_RECVS 65536u

void rr_tp_conf_default(struct rr_tp_conf *c);
/* The policy as applied by rr_tp_client_create / rr_tp_server_create (for
 * tests): inline sizes of 0 become the default of @provider, sizes above
 * 262144 become 262144, and when credits + the extra buffers of the role
 * (requester: credits + 8 Receives and as many send slots; responder:
 * credits + 4 + rrep_max Receives and 8 more send slots) at those sizes
 * exceed inline_mem, credits (and on the responder rrep_max, to a third of
 * the room at most) are lowered to fit, not below RR_TP_MIN_CREDITS; a
 * configuration is never raised by it. */
void rr_tp_conf_inline(struct rr_tp_conf *c, const char *provider, bool server);

/* ---- client ---- */

/* One RPC. The caller fills the inputs, the transport the outputs before
 * the completion upcall; the caller owns the object and everything it names,
 * which the transport borrows from submit until completion. */
/* (struct rr_conn_rpc: proto/conn/conn.h) */

struct rr_tp_client;

typedef void (*rr_tp_complete_fn)(void *ctx, struct rr_conn_rpc *rpc);

/* Connects to @addr and waits for the connection (conf->connect_timeout_ms).
 * Returns 0, -ECONNREFUSED / -ETIMEDOUT / -ENETUNREACH, -ENOMEM, or a
 * provider error. @conf is copied. */
int rr_tp_client_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_complete_fn complete, void *ctx,
			struct rr_tp_client **out);
/* Starts a Call; the completion upcall follows exactly once. Returns 0, or
 * -EINVAL / -EMSGSIZE (not taken: no upcall), -ESHUTDOWN after destroy began. */
int rr_tp_client_submit(struct rr_tp_client *c, struct rr_conn_rpc *rpc);
/* Gives up on @rpc: it completes with @status once none of its STags is
 * valid. No-op when it already completed. */
void rr_tp_client_abort(struct rr_tp_client *c, struct rr_conn_rpc *rpc, int status);
/* Optional, for a caller about to block on @rpc's completion: lends this
 * thread to receive and complete Replies (saving a thread handoff) until
 * @rpc completed or @timeout_ms passed; returns at once when another thread
 * already does this. The completion upcall may run on this thread. A
 * successful submit of an @rpc with caller_waits set reserves this role for
 * the submitting thread when it is free (the progress thread is then not
 * woken at all); that thread must call rr_tp_client_wait for @rpc next. */
void rr_tp_client_wait(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint32_t timeout_ms);
/* rr_tp_client_submit then, when it succeeded and @rpc has caller_waits,
 * one turn of rr_tp_client_wait of at most @timeout_ms, in one hold of the
 * endpoint's lock (a synchronous Call: one lock pair fewer), reading no
 * clock (one wait on the CQ, which may hold it for a Send's completion and
 * then the Reply; the RPC layer's lazy deadline, transport/xprt.h
 * submit_wait). Returns submit's result; with 0 @rpc completed or not, and
 * a caller that must wait more calls rr_tp_client_wait. */
int rr_tp_client_submit_wait(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint32_t timeout_ms);
/* The status of an abort @rpc's caller asked for while the Call was in its
 * submit (0: none), read without the endpoint's lock: such an abort may
 * have come before the client held the Call and found nothing (the RPC
 * layer's rr_xprt_call abort_req). A caller's wait (rr_tp_client_wait,
 * rr_tp_client_submit_wait) reads it after every turn of its wait that did
 * not complete the Call (nothing came, or other traffic) and then aborts
 * the Call itself with that status, so that it ends now, not at the end of
 * the wait. Set once, before the first Call (NULL: never). */
typedef int (*rr_tp_abort_asked_fn)(struct rr_conn_rpc *rpc);
void rr_tp_client_abort_asked(struct rr_tp_client *c, rr_tp_abort_asked_fn fn);
/* Frees rpc->reply (or gives back the Receive it lives in: without the
 * endpoint's lock, free again -- the next to post, conn.c "Receives by
 * demand" -- from the next Reply kept in a Receive of that connection or
 * the client's next turn; never more than TP_LEND_MAX lent). Any thread;
 * every reply must be released before rr_tp_client_destroy. */
void rr_tp_client_release_reply(struct rr_tp_client *c, struct rr_conn_rpc *rpc);
/* Aborts what remains (-ECANCELED), disconnects, frees. */
void rr_tp_client_destroy(struct rr_tp_client *c);
/* Tests: destroy's steps, told to @fn (called on destroy's thread with no
 * lock of the endpoint held): RR_TP_DESTROY_WAIT_LOOP when the endpoint
 * on engine loop @loop (rr_engine_loop), its connections marked dead,
 * starts waiting for the upcalls that loop is running, and
 * RR_TP_DESTROY_RELEASED when it has freed its connections. A test holding
 * an upcall on that loop lets it go at either and so meets destroy at a
 * known step. Set before destroy. */
enum { RR_TP_DESTROY_WAIT_LOOP = 1, RR_TP_DESTROY_RELEASED = 2 };
typedef void (*rr_tp_destroy_hook_fn)(void *arg, int phase, unsigned loop);
void rr_tp_client_destroy_hook(struct rr_tp_client *c, rr_tp_destroy_hook_fn fn, void *arg);
/* Counters (a snapshot). */
void rr_tp_client_stats(struct rr_tp_client *c, struct rr_xprt_stats *out);
/* STags exposed for RPCs and not yet invalidated (0 when idle). */
uint32_t rr_tp_client_live_stags(struct rr_tp_client *c);
/* Reliable reply negotiated on the current connection: 1, 0, or -ENOTCONN. */
int rr_tp_client_reliable_reply(struct rr_tp_client *c);
/* Tests: cut the current connection (as a network failure would). */
int rr_tp_client_cut(struct rr_tp_client *c);
/* Tests: runs a turn of @c on its loop now (its CM events, a lost
 * connection settled, dead connections freed when nothing holds them) and
 * returns once it ran; then the connections that died and are not freed. */
void rr_tp_client_turn(struct rr_tp_client *c);
unsigned rr_tp_client_dead_conns(struct rr_tp_client *c);
/* Tests' diagnostics: one line per CQ of the process's transport
 * contexts (its loop, connections, wanted, armed, watched by the loop, the
 * consumer role's holder: 0 free, 1 loop, 2 caller; the loop must serve it
 * again: missed), then the provider's lines for it (rr_cq_describe: its
 * ring, each QP with its connection, client or server). Reads without
 * stopping anything. */
void rr_tp_debug_cqs(FILE *f);
/* Negotiated parameters of the current connection (-ENOTCONN if none). */
int rr_tp_client_params(struct rr_tp_client *c, struct rr_xprt_params *out,
			uint32_t *grant);

/* ---- backchannel, client (RFC 8167: Calls the server sends back) ---- */

typedef void (*rr_tp_bc_recv_fn)(void *ctx, struct rr_conn_sreq *req);
/* Reverse Calls go to @recv(@ctx, req) -- on the progress thread or a
 * waiting caller's, without the endpoint's lock; it must not block -- from
 * rr_tp_client_bc_enable(true) on, within conf.bc_slots at once on a
 * connection (the others are dropped and counted). @req->msg/len is the
 * RPC Call, valid until rr_tp_client_bc_done. @recv NULL: none delivered.
 * Once it returns, no upcall of the previous @recv is running (never call
 * it from one). */
void rr_tp_client_bc_set(struct rr_tp_client *c, rr_tp_bc_recv_fn recv, void *ctx);
void rr_tp_client_bc_enable(struct rr_tp_client *c, bool on);
/* Answers reverse Call @req inline (rr_conn_bc_reply): 0, or -ENOTCONN
 * (its connection is gone), -EMSGSIZE, -ENOBUFS. @parts are free when it
 * returns. */
int rr_tp_client_bc_reply(struct rr_tp_client *c, struct rr_conn_sreq *req,
			  const struct rr_xprt_part *parts, unsigned nparts);
/* Done with @req (after its Reply, or instead of one). */
void rr_tp_client_bc_done(struct rr_tp_client *c, struct rr_conn_sreq *req);

/* ---- push mode (draft-talpey-rdma-commit section 2) ----
 * RDMA Commit is used only when both peers advertised
 * RR_PD_EXT_CAP_RDMA_COMMIT in the extension block of their private data
 * (conf.ext_caps, masked off when the provider cannot carry Commit) and the
 * provider enabled it on the QP (RPCRDMA_CONN_COMMIT, rpcrdma_qp_set_commit). */

/* 0 when the current connection can post RDMA Commits; -EOPNOTSUPP when it
 * cannot (not configured, provider without Commit, peer did not advertise
 * it), -ENOTCONN without a connection. */
int rr_tp_client_commit_ok(struct rr_tp_client *c);

/* One push operation: an RDMA Write of [buf, buf+len) to (stag, offset) of
 * the peer's region, then (commit) an RDMA Commit of @region, on the current
 * connection. */
struct rr_tp_push {
	const void *buf;
	uint32_t len;                          /* 0: Commit only */
	uint32_t stag;
	uint64_t offset;                       /* Tagged Offset of the Write */
	bool commit;
	bool visible;                          /* Commit for global visibility only */
	struct rpcrdma_remote_region region;   /* what the Commit names */
	uint32_t timeout_ms;                   /* 0: 30000 */
	/* outputs */
	enum rpcrdma_wc_status wc_status;      /* of the last WR */
	uint32_t commit_status;                /* Commit Response Status */
};

/* Posts the Write (unsignaled when a Commit follows) and the Commit, and
 * waits (receiving on this thread when no other thread does) until the last
 * completes: 0 once the Commit Response said durable (Status 0) or, without
 * commit, once the Write completed. -EIO: Status != 0 (commit_status; the
 * connection stays, draft 5.1). -EACCES: the peer refused the STag/range
 * (Terminate: the connection is lost and re-established, RFC 5040 7).
 * -EOPNOTSUPP: Commit not negotiated here. -ECONNRESET/-ETIMEDOUT/-ENOTCONN.
 * @buf is registered on the connection's PD for the duration of the call. */
int rr_tp_client_push(struct rr_tp_client *c, struct rr_tp_push *p);
/* Tests: @fn(@arg) runs on the thread of each push of @c once its work
 * requests are posted and before it waits for them, with no lock of @c
 * held (the window in which a wait releases the lock: the connection may
 * die and the loop run meanwhile). Set before pushing. */
typedef void (*rr_tp_push_hook_fn)(void *arg);
void rr_tp_client_push_hook(struct rr_tp_client *c, rr_tp_push_hook_fn fn, void *arg);

/* ---- server ---- */

/* A received Call. @msg/@len: the rebuilt RPC Call (Read chunk data in
 * place), valid until rr_tp_server_done(). */
/* (struct rr_conn_sreq: proto/conn/conn.h) */

struct rr_tp_server;
typedef void (*rr_tp_recv_fn)(void *ctx, struct rr_conn_sreq *req);

/* Listens on @addr (port 0: ephemeral) and starts serving. */
int rr_tp_server_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_recv_fn recv, void *ctx,
			struct rr_tp_server **out);
int rr_tp_server_port(struct rr_tp_server *s);
/* Sends the Reply to @req (the RPC Reply's XDR stream with DDP-eligible items
 * flagged). Synchronous: returns once the RDMA Writes and the Send completed.
 * 0, or -ENOTCONN (connection gone: Reply lost), -EIO. When nothing fits,
 * ERR_CHUNK is sent and 0 returned with *@err_chunk set (may be NULL). */
int rr_tp_server_reply(struct rr_tp_server *s, struct rr_conn_sreq *req,
		       const struct rr_xprt_part *parts, unsigned nparts,
		       bool *err_chunk);
/* @req cannot be processed or answered (no memory, a Reply that could not be
 * built or posted): answers it with RDMA_ERROR/ERR_CHUNK (no allocation;
 * the connection ends when not even that can be sent), unless a Reply is on
 * its way or was sent. @req is then finished with rr_tp_server_done as
 * usual. A Call is never dropped silently (docs/security.md). */
void rr_tp_server_refuse(struct rr_tp_server *s, struct rr_conn_sreq *req);
/* Told once the memory of a Reply posted by rr_tp_server_reply_async is no
 * longer referenced: its Send completed (@status 0) or failed or was flushed
 * (-EIO; -ENOTCONN at rr_tp_server_destroy). Runs on the progress thread
 * without the endpoint's lock, exactly once; may call rr_tp_server_done. */
typedef void (*rr_tp_sent_fn)(void *arg, int status);
/* As rr_tp_server_reply, without waiting for the completion: builds the
 * Reply, posts its RDMA Writes and Send and returns (callable from the
 * progress thread: inline handlers pipeline their Replies). Returns 1: posted
 * with RDMA Writes that read @parts; @parts' memory must stay valid and @req
 * must not be done until @sent(@arg, status) is called. 0: posted entirely
 * from the transport's send slot (inline Reply, Reply chunk, ERR_CHUNK with
 * *@err_chunk set): @parts is free at once, @sent is not called. Negative
 * errno as rr_tp_server_reply (not posted; @sent is not called). The grant
 * and remote invalidation are as for rr_tp_server_reply; a Send completion
 * with an error is fatal to the connection and still calls @sent. */
int rr_tp_server_reply_async(struct rr_tp_server *s, struct rr_conn_sreq *req,
			     const struct rr_xprt_part *parts, unsigned nparts,
			     bool *err_chunk, rr_tp_sent_fn sent, void *arg);
/* As rr_tp_server_reply_async, and when that would return 0 (the Reply
 * posted from the send slot: nothing of @parts referenced any more) also
 * rr_tp_server_done(@req) under the same hold of the endpoint's lock: @req
 * is then finished and must not be used again. 1 or a negative errno: as
 * rr_tp_server_reply_async, @req not done. */
int rr_tp_server_reply_done(struct rr_tp_server *s, struct rr_conn_sreq *req,
			    const struct rr_xprt_part *parts, unsigned nparts,
			    rr_tp_sent_fn sent, void *arg);
/* Done with @req (after the reply, or instead of one). */
void rr_tp_server_done(struct rr_tp_server *s, struct rr_conn_sreq *req);
/* Graceful shutdown, first step: stops listening (new connections are
 * refused, requests not yet taken are dropped); established connections
 * keep their Calls and Replies until rr_tp_server_destroy. */
void rr_tp_server_stop(struct rr_tp_server *s);
void rr_tp_server_destroy(struct rr_tp_server *s);
void rr_tp_server_stats(struct rr_tp_server *s, struct rr_xprt_stats *out);
/* Live connections. */
unsigned rr_tp_server_conns(struct rr_tp_server *s);
/* Tests: the accounting of the shared receive pool of progress loop @key (a
 * copy): 0, or -ENOENT when it has none (no connection yet, retired, or
 * connections with their own Receives). */
int rr_tp_server_pool(struct rr_tp_server *s, unsigned key, struct rr_cred_pool *out);
/* Reliable reply, test hooks: registrations exposing Replies whose STag is
 * still valid (0 once every Read chunk was invalidated), and Replies waiting
 * in the per-connection tables for their RDMA_DONE. */
uint32_t rr_tp_server_rrep_live(struct rr_tp_server *s);
uint32_t rr_tp_server_rrep_waiting(struct rr_tp_server *s);
/* Tests: cut every connection (as a network failure would). */
void rr_tp_server_cut(struct rr_tp_server *s);
/* Tests and benchmarks: how synchronous callers of rdma:// clients waited,
 * process-wide, since it started: holding their connection's CQ (@cq),
 * waiting for their own QP while another thread held the CQ (@qp: the
 * provider's wait_qp; @qp_refused: the provider could not then), or asleep
 * on their endpoint's condition variable until the CQ's holder fed them
 * (@cond). */
struct rr_tp_wait_counts {
	uint64_t cq, qp, qp_refused, cond;
};
void rr_tp_wait_counts(struct rr_tp_wait_counts *out);

/* Tests: rr_tp_client_destroy_hook's steps, for each shard of the server
 * (the endpoint on @loop). */
void rr_tp_server_destroy_hook(struct rr_tp_server *s, rr_tp_destroy_hook_fn fn, void *arg);
/* Tests: the engine loop the listener is on (destroy needs it to run
 * before any shard is taken down; a test holding a loop holds another). */
unsigned rr_tp_server_listen_loop(struct rr_tp_server *s);

/* Push mode, responder. 0 when @req's connection negotiated RDMA Commit,
 * -EOPNOTSUPP when not, -ENOTCONN when it is gone. */
int rr_tp_server_commit_ok(struct rr_tp_server *s, struct rr_conn_sreq *req);
/* The address of the peer that sent @req (the duplicate request cache keys
 * on its host): 0, or -ENOTCONN when the provider gave none. */
int rr_tp_server_peer_addr(struct rr_tp_server *s, struct rr_conn_sreq *req,
			   struct sockaddr_storage *out);
/* Registers @attr (RPCRDMA_MR_DURABLE and/or RPCRDMA_MR_VISIBLE: the Commit
 * levels accepted; access becomes LOCAL_WRITE | REMOTE_WRITE) on the PD of
 * @req's connection, so only that connection's peer can write and commit
 * it, and returns its STag, the Tagged Offset of its first byte (@to), an id
 * for rr_tp_server_revoke and in @levels the
 * RPCRDMA_PUSH_REGION_* levels it serves (see rpcrdma_req_push_expose). The
 * registration lives until revoked or until the connection is lost or
 * freed; then @released(@arg) runs (with the transport's lock held: it must
 * not call into the transport), after which the memory is no longer
 * referenced. -EOPNOTSUPP when the connection did not negotiate Commit or no
 * accepted level is possible, -ENOTCONN, -ENOSPC (64 regions per
 * connection). */
int rr_tp_server_expose(struct rr_tp_server *s, struct rr_conn_sreq *req,
			const struct rpcrdma_mr_attr *attr, void (*released)(void *arg),
			void *arg, uint32_t *stag, uint64_t *to, uint64_t *id, uint32_t *levels);
/* Deregisters region @id at once (later Writes/Commits naming it draw a
 * protection error, fatal to that connection). 0 or -ENOENT (already gone). */
int rr_tp_server_revoke(struct rr_tp_server *s, uint64_t id);

/* ---- backchannel, server (RFC 8167: Calls to the client of a
 * connection) ---- */

/* A server connection held for backward Calls; it does not keep the
 * connection: once that is gone, submits answer -ENOTCONN. */
struct rr_tp_bc;

/* Opens the backward direction of @req's connection (a delivered request,
 * not yet done): @complete(@ctx, rpc) is the completion upcall of its
 * backward Calls (from the progress thread, without the lock). 0,
 * -ENOTCONN, -EOPNOTSUPP (conf.bc_slots 0), -ENOMEM. */
int rr_tp_server_bc_open(struct rr_tp_server *s, struct rr_conn_sreq *req,
			 rr_tp_complete_fn complete, void *ctx, struct rr_tp_bc **out);
/* Sends backward Call @rpc (inline: rr_conn_bc_submit); @complete follows
 * exactly once unless this returns an error (-ENOTCONN, -EMSGSIZE,
 * -EINVAL, -ENOMEM, and -EDEADLK for a Call whose caller would wait for it
 * on the progress thread, which receives its Reply). */
int rr_tp_server_bc_submit(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc);
void rr_tp_server_bc_abort(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc,
			   int status);
/* Frees @rpc's Reply. */
void rr_tp_server_bc_release(struct rr_tp_server *s, struct rr_conn_rpc *rpc);
/* Closes @b; every backward Call of it has completed. */
void rr_tp_server_bc_close(struct rr_tp_server *s, struct rr_tp_bc *b);

#endif
