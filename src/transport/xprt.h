/* SPDX-License-Identifier: BSD-2-Clause */
/* The transport interface: what a transport (tcp://, ONC RPC over TCP with
 * RFC 5531 section 11 record marking, in src/transport/tcp/; rdma:// and
 * verbs://, RPC-over-RDMA v1, RFC 8166, in src/transport/) implements so
 * that the public RPC API (include/rpcrdma/rpc.h, src/rpc/) runs on it
 * unchanged, and the registry that finds a transport by URL scheme
 * (src/transport/registry.c). The RPC layer names no transport: it resolves
 * the URL here. This file is the contract; read it whole.
 *
 * ---------------------------------------------------------------------------
 * 1. Messages and DDP-eligible items
 *
 * An outgoing RPC message (a Call from a client, a Reply from a server) is a
 * struct rr_xprt_msg: the INLINE bytes (@head, @head_len: the RPC header and
 * every XDR item that is not DDP-eligible, in order) plus an ordered list of
 * REFERENCED DDP-eligible items (struct rr_rpc_ddp in rpc/xbuf.h). For each
 * item, the XDR length word is in the inline bytes, immediately before
 * @inline_off; the item's data (@ptr, @len) and its XDR pad
 * (RR_ALIGN4(len) - len zero bytes) are NOT in the inline bytes. The complete
 * XDR message (@xdr_len bytes) is the inline bytes with, at each item's
 * @inline_off, its data and its pad inserted; @xdr_pos is the item's data
 * offset in that complete message (the RPC XID is at offset 0).
 *
 *   TCP sends the complete message (writev: inline pieces, item data, pad).
 *   RDMA (RFC 8166 section 3.4.3, "XDR Reduction"): a Call's items become
 *   Read chunks (Position = @xdr_pos when the Payload stream is the whole RPC
 *   message; pad removed from both the chunk and the Payload stream); or it
 *   sends them inline when it so decides (e.g. small items: then it must
 *   insert data AND pad). A Reply's items become Write chunk data when the
 *   requester provided Write chunks (one per item in order; pad never
 *   written; unused chunk returned with count 0), else inline.
 *
 * Result sinks (client side). A Call carries @sinks[0..nsinks): buffers the
 * caller supplied for the DDP-eligible RESULT items, in the order the results
 * decoder meets them (sink i = i-th DDP-eligible result item). An RDMA
 * transport registers them as Write chunks (sink i -> Write chunk i, sized
 * @max) -- or, when the largest possible Reply (@reply_hint plus every
 * sink's @max, padded) fits the reply inline threshold, provides none and
 * reports every sink RR_RPC_NOT_PLACED (the items come inline) -- and, for a Reply whose reply_hint or maximum size exceeds the reply
 * inline threshold, provides a Reply chunk sized @reply_hint (0 = maximum
 * message size). On completion the transport reports for each sink
 * @placed[i] = the number of bytes the responder wrote into sink i (the
 * Write chunk's returned segment lengths summed), or RR_RPC_NOT_PLACED if the
 * item did not come by RDMA Write (chunk unused: the data, if present, is in
 * the inline Reply). The inline Reply handed back keeps the item's XDR length
 * word; the results decoder checks that word equals @placed[i] and does not
 * look for data inline. TCP reports RR_RPC_NOT_PLACED for all: the decoder
 * copies inline data into the sink.
 *
 * Incoming items (server side). An RDMA responder that pulled Read chunks
 * may hand the Call as inline bytes WITHOUT the chunk data (length word kept,
 * data and pad absent) plus @ext[0..n_ext): per item, @inline_off = offset in
 * the inline bytes right after its length word, and where its data landed.
 * @ext must be sorted by @inline_off. The args decoder returns @ext data when
 * the handler decodes a DDP-eligible item at that position. Alternatively the
 * transport may rebuild a contiguous Payload stream (then n_ext = 0). TCP
 * always has n_ext = 0.
 *
 * ---------------------------------------------------------------------------
 * 2. Client (requester) side: struct rr_xprt_client_ops
 *
 *  create(target, params, &x): connect (may block up to
 *      params->connect_timeout_ms); -ECONNREFUSED etc. on failure. The
 *      transport keeps @params->complete/@params->ctx for upcalls.
 *  submit(x, call): start a Call. The RPC layer owns @call; the transport
 *      borrows it (and the message bytes, referenced items and sinks) until
 *      it calls params->complete(ctx, call). After submit returns 0, the
 *      transport calls complete exactly ONCE for that call, from a transport
 *      thread, from abort(), or from inside submit itself (the Reply may
 *      overtake the end of a long send; the RPC layer then defers the user's
 *      callback). It may block for flow control (socket buffer, credits) but
 *      must not wait for the Reply.
 *      Nonzero return: the call was not taken; no complete upcall.
 *      The XID is call->xid (already in the message); the transport matches
 *      Replies to Calls by it (RFC 8166: rdma_xid == RPC XID). Replies with
 *      unknown XIDs or that are not RPC Replies are discarded silently.
 *  abort(x, call, status): the RPC layer gives up on the call (timeout,
 *      cancel, client destroy). If the call is still pending in the
 *      transport, it completes with @status (a negative errno) as soon as the
 *      transport no longer touches the call's memory: for RDMA, after every
 *      STag of that call is invalidated (RFC 8166 "Memory"); for TCP, after
 *      any writev in progress for it has returned. complete() may be called
 *      from inside abort(); the RPC layer calls abort without its own locks.
 *      A call that already completed (or is completing) is a no-op, and
 *      so is one the transport does not hold yet (its submit has not
 *      taken it): the RPC layer then aborts it again once submit returned
 *      0 (src/rpc/clnt.c abort_again), so an abort may come twice for one
 *      call.
 *  release_reply(x, call): the RPC layer is done with call->reply (its
 *      bytes are freed or its receive buffer reposted). Called once a
 *      submitted call completed, when call->reply_buf or call->xp_priv is
 *      set (a transport whose completed call holds nothing, e.g. rdma://'s
 *      Reply copied into the call's own storage, leaves both NULL: no
 *      call; its call->reply stays valid while the call object lives).
 *  destroy(x): every submitted call has completed (the RPC layer aborts
 *      them first); close the connection and free.
 *  wait(x, call, timeout_ms) (optional): for a synchronous call
 *      (call->caller_waits), the waiting thread offers itself to receive,
 *      saving the handoff from a receive thread (TCP: the "reader role").
 *      Returning early is always correct.
 *
 * On completion (complete upcall), the transport has set:
 *   call->status: 0 if a Reply arrived, else a negative errno (-ECONNRESET
 *                 when the connection was lost and no reconnect is
 *                 allowed, -EREMOTEIO for RDMA_ERROR, -ETIMEDOUT/-ECANCELED
 *                 from abort).
 *   call->reply, call->reply_len: the inline Reply bytes (RPC header first),
 *                 valid until release_reply; and call->placed[] (see 1).
 * Reconnect: on connection loss the transport reconnects (unless
 * params->no_reconnect) and retransmits every pending Call with the SAME XID
 * (RFC 5531 section 9; RFC 8166 section 4.x "Retransmissions"); calls keep
 * their deadlines in the RPC layer, which aborts them when they expire.
 *
 * ---------------------------------------------------------------------------
 * 3. Server (responder) side: struct rr_xprt_server_ops
 *
 *  create(target, params, &s): bind and listen (port 0: ephemeral).
 *  port(s): the bound port.
 *  start(s): begin accepting connections and delivering Calls. Each
 *      received Call is a struct rr_xprt_req given to params->recv(ctx, req)
 *      from a transport thread. Unless the ops set inline_recv, recv does not
 *      block (the RPC layer queues the request to its workers); with
 *      inline_recv, recv runs the handler and send_reply before returning,
 *      so the transport must call it from a pool of params->threads threads
 *      and keep reading other Calls meanwhile (TCP: EPOLLONESHOT threads,
 *      the connection re-armed before recv). Bytes that are not a well-formed transport message, or
 *      records above params->max_msg, close that connection only.
 *  send_reply(s, req, msg): send the Reply for @req. Synchronous: when it
 *      returns, the transport no longer uses @msg's inline bytes or
 *      referenced items (RDMA: Write chunk RDMA Writes and the Send have
 *      completed, or failed). Returns 0 or a negative errno (e.g. -ENOTCONN
 *      when the connection is gone: the Reply is lost, as on any transport).
 *      An RDMA responder picks the reply form (inline, Write chunks, Reply
 *      chunk, or RDMA_ERROR ERR_CHUNK when nothing fits).
 *  send_reply_async(s, req, msg, sent, arg) (optional, preferred when set):
 *      the same Reply without waiting; 1 means sent(arg, status) follows
 *      once the transport no longer references @msg (RDMA: the Send
 *      completed or failed), and only then does the RPC layer release the
 *      results and call req_done. rdma:// uses it so that one thread
 *      answers many Calls without waiting for each Send.
 *  send_reply_done(s, req, msg, sent, arg) (optional): send_reply_async,
 *      and when that returns 0 (nothing of @msg referenced any more) also
 *      req_done(@req) in the same step: @req is then finished (one hold
 *      of the transport's lock instead of two per call). The RPC layer
 *      uses it only when nothing is left to release before req_done (no
 *      results release hook: the Call's buffers may go at once).
 *  req_done(s, req): the RPC layer is done with @req (after send_reply, or
 *      without any reply for a dropped Call). Frees its receive buffers.
 *      Called exactly once per delivered req.
 *  stop(s): stop accepting connections and delivering Calls (graceful
 *      shutdown, first step); reqs already delivered stay valid and may
 *      still be answered.
 *  destroy(s): every delivered req is done; close all connections, free.
 *
 * ---------------------------------------------------------------------------
 * 4. Backchannel (RFC 8167 on rdma:// and verbs://; on tcp:// as NFSv4.1
 *    does it over TCP, RFC 8881 section 2.10.3.1: one record-marked stream
 *    carries Calls both ways and the RFC 5531 msg_type tells them apart)
 *
 * Both ends of a connection may send Calls on it. The RPC layer reuses its
 * two roles for the reverse direction, through two optional ops:
 *
 *  client ops bc_serve(x, params, &ops, &xs): the server role of the client's
 *      connection -- and of the connections it reconnects on -- for Calls
 *      the peer sends (reverse Calls). Returns a server object with its own
 *      ops (start, send_reply, req_done, stop, destroy, port; create is
 *      NULL) that behaves as section 3 says: params->recv(ctx, req) for each
 *      reverse Call, never before start; no connection is accepted. At most
 *      one per client (-EBUSY); -EINVAL when the client was created without
 *      bc_slots. Reverse Calls beyond bc_slots at once
 *      (delivered and not done), or that arrive while none is started, are
 *      dropped and counted. A Reply to a reverse Call goes on the connection
 *      the Call came on, or nowhere (-ENOTCONN) once that one is gone.
 *      Destroyed before its client.
 *
 *  server ops bc_client(s, req, params, &ops, &x): a client for Calls to the
 *      peer that sent @req, on @req's connection (section 2 applies, except:
 *      no reconnection -- only the peer can connect --, so Calls fail with
 *      -ENOTCONN once that connection is gone and the pending ones complete
 *      with -ECONNRESET; create is NULL). It stays valid after @req is done,
 *      until destroyed, and is destroyed before its server.
 *
 * Reverse messages are inline only (an RDMA transport never offers or
 * accepts chunks in them): a reverse Call or Reply that does not fit the
 * inline threshold of its direction is -EMSGSIZE at submit / send_reply.
 *
 * ---------------------------------------------------------------------------
 * 5. Registration
 *
 * rr_xprt_register(cls) adds or replaces the transport of cls->scheme.
 * "tcp", "rdma" and "verbs" are built in (rr_xprt_builtin_init() in
 * src/transport/registry.c names the three classes, so a static link pulls
 * them in). A known scheme without a transport is answered
 * -EPROTONOSUPPORT. */
#ifndef RR_TRANSPORT_XPRT_H
#define RR_TRANSPORT_XPRT_H

#include <stdatomic.h>

#include "common/common.h"
#include "rpc/xbuf.h"

/* A parsed target URL: scheme://host:port (host may be [IPv6]). */
struct rr_xprt_target {
	char scheme[16];
	char host[256];
	char port[16];
};

int rr_xprt_parse_url(const char *url, struct rr_xprt_target *t);

struct rr_xprt_msg {
	const uint8_t *head;
	size_t head_len;
	const struct rr_rpc_ddp *ddp;
	unsigned nddp;
	size_t xdr_len;
};

/* Bytes of a call's transport-private storage (xp_area). */
#define RR_XPRT_CALL_AREA 992u

struct rr_xprt_call {
	/* Cleared when the RPC layer makes the call (these first
	 * RR_XPRT_CALL_CLEAR bytes, kept within 64: a few stores, not a
	 * string instruction per word); every field after them is written
	 * before it is read. */
	size_t reply_hint;            /* 0: unknown (RPC layer) */
	size_t reply_min;             /* smallest Reply expected (0: none known) */
	void *reply_buf;              /* transport's handle for release_reply */
	/* Transport-private. */
	void *xp_priv;
	struct rr_xprt_call *xp_next;
	uint32_t xp_flags;
	int xp_status;
	bool caller_waits;            /* wait() follows submit() (sync call;
					 RPC layer) */
	bool reply_via_read;          /* RDMA: pulled from a responder-provided
					 Read chunk (reliable reply); set by the
					 transport before the complete upcall */
	_Atomic int abort_req;        /* an abort's status when it came while
					 the call was in submit (0: none):
					 stored by the RPC layer before that
					 abort, from any thread; a transport
					 whose submit_wait waits reads it after
					 every turn of that wait that did not
					 complete the call, and aborts
					 the call itself (the first abort may
					 have come before its hold: found
					 nothing) */
	/* Set by the RPC layer before submit, read-only for the transport. */
	uint32_t xid;
	struct rr_xprt_msg msg;
	const struct rpcrdma_ddp_sink *sinks;
	unsigned nsinks;
	/* Set by the transport before the complete upcall (and placed,
	 * below). */
	int status;
	const uint8_t *reply;
	size_t reply_len;
	/* Transport-private storage for the call's own per-call state (the
	 * rdma:// adapter's wrapper of the Call for its session, rpc.c
	 * struct rpc_wrap, a static assertion there), kept in the call's
	 * object rather than an object of the transport's taken per call:
	 * the RPC layer's call objects come warm from its thread's cache,
	 * and the state lives exactly as long as the call (issue 16 part
	 * EC: at 100 connections the transport's own spare was cold, ~4
	 * L1 misses per call). Not cleared: the transport writes what it
	 * reads. */
	_Alignas(16) unsigned char xp_area[RR_XPRT_CALL_AREA];
	/* Set by the transport before the complete upcall, for each of the
	 * first nsinks (after xp_area: a call without sinks never touches
	 * it, and the transport's per-call fields follow status and reply
	 * directly). */
	uint32_t placed[RR_RPC_MAX_DDP];
};

#define RR_XPRT_CALL_CLEAR offsetof(struct rr_xprt_call, xid)

/* The longest wait the RPC layer asks of submit_wait: a synchronous call's
 * deadline is dated by a clock read after that wait (rpc/clnt.c
 * run_dated), so its timeout fires at most that wait late. Half of a
 * 20 ms wait slice: the provider's wait may overrun what it was asked
 * (the soft provider's by its 5 ms fast slice and its coarse clock's
 * tick). */
#define RR_XPRT_FIRST_WAIT_MS 10u
_Static_assert(RR_XPRT_CALL_CLEAR <= 64, "a call's cleared fields within 64 bytes");

struct rr_xprt_client;
struct rr_loop;
struct rr_xprt_server;
struct rr_xprt_server_params;
struct rr_xprt_server_ops;

struct rr_xprt_client_params {
	const struct rpcrdma_env *env;
	struct rr_loop *loop;         /* the client's progress loop (src/engine),
					 which serves its connection too;
					 NULL: the transport picks one */
	size_t max_msg;
	uint32_t connect_timeout_ms;
	bool no_reconnect;
	bool no_inline_ddp;           /* RDMA: Write chunks for every sink */
	uint32_t inline_size;         /* RDMA: advertised inline sizes; 0: default */
	uint32_t spin_us;             /* soft provider spin budget; 0: default */
	unsigned bc_slots;            /* reverse Calls served at once (section
					 4; RDMA: the backward credits and
					 the Receives posted for them); 0: no
					 backchannel */
	void (*complete)(void *ctx, struct rr_xprt_call *call);
	void *ctx;
};

struct rr_xprt_client_ops {
	int (*create)(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
		      struct rr_xprt_client **out);
	int (*submit)(struct rr_xprt_client *x, struct rr_xprt_call *call);
	void (*abort)(struct rr_xprt_client *x, struct rr_xprt_call *call, int status);
	void (*release_reply)(struct rr_xprt_client *x, struct rr_xprt_call *call);
	void (*destroy)(struct rr_xprt_client *x);
	/* Optional. Called once, right after submit() returned 0, for a call
	 * with caller_waits set, by the thread that will wait for it: the
	 * transport may use this thread to receive (and complete) Replies for
	 * up to @timeout_ms, saving a thread handoff; it returns when the
	 * call completed, when the time is up, or at once if another thread
	 * is receiving. The RPC layer then waits for the completion as usual,
	 * so returning early is always correct. */
	void (*wait)(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms);
	/* Optional, with wait: submit() then, when it returned 0 and the call
	 * has caller_waits set, the first wait() in one step, reading no clock
	 * (the transport saves what separate entries would repeat: rdma:// a
	 * hold of its lock; and a synchronous call answered at once reads no
	 * clock at all: the RPC layer's lazy deadline, rpc/clnt.c run_fast):
	 * one wait of at most @timeout_ms (the RPC layer passes at most
	 * RR_XPRT_FIRST_WAIT_MS; a wait may overrun by the scheduler's delay,
	 * as any). Returns submit's result; 0: submitted, the call completed
	 * or not (the RPC layer then waits again through wait()). */
	int (*submit_wait)(struct rr_xprt_client *x, struct rr_xprt_call *call,
			   uint32_t timeout_ms);
	/* Optional: transport controls (counters, push mode), see
	 * transport/xprt_ctl.h; NULL or an unknown @op: -EOPNOTSUPP. */
	int (*ctl)(struct rr_xprt_client *x, unsigned op, void *arg);
	/* Optional: 1/0 whether the current connection negotiated reliable
	 * reply, -ENOTCONN (absent: -EOPNOTSUPP). */
	int (*reliable_reply)(struct rr_xprt_client *x);
	/* Optional: the server role of this client's connections (section 4;
	 * absent: -EOPNOTSUPP). */
	int (*bc_serve)(struct rr_xprt_client *x, const struct rr_xprt_server_params *p,
			const struct rr_xprt_server_ops **ops, struct rr_xprt_server **out);
};

struct rr_xprt_req {
	const uint8_t *msg;           /* inline Call bytes, RPC header first */
	size_t len;
	const struct rr_rpc_ext *ext; /* see section 1 */
	unsigned n_ext;
	void *xp_priv;                /* transport-private */
};

struct rr_xprt_server_params {
	const struct rpcrdma_env *env;
	size_t max_msg;
	unsigned max_conns;
	unsigned max_conns_per_host;  /* from one source address; 0: no limit */
	unsigned max_handshakes;      /* RDMA: half-open connections; 0: the
					 provider's default */
	bool no_defer_accept;         /* rdma://: the listener without
					 TCP_DEFER_ACCEPT */
	uint32_t idle_timeout_ms;     /* close a silent connection with nothing
					 in progress after this; 0: never */
	unsigned threads;             /* threads for inline_recv transports */
	uint32_t inline_size;         /* RDMA: advertised inline sizes; 0: default */
	uint32_t spin_us;             /* soft provider spin budget; 0: default */
	size_t reply_mem_per_conn;    /* RDMA: reply memory budgets; 0: default */
	size_t reply_mem_total;
	uint32_t rrep_timeout_ms;     /* RDMA: reliable-reply timeout; 0: default */
	uint32_t send_timeout_ms;     /* RDMA: the send-stall timeout (and the
					 quiet Sends' probe at half of it);
					 0: default (60 s) */
	uint32_t credits;             /* RDMA: a fixed grant and Receives per
					 connection; 0: grants follow demand
					 from a shared receive pool */
	void (*recv)(void *ctx, struct rr_xprt_req *req);
	void *ctx;
};

struct rr_xprt_server_ops {
	int (*create)(const struct rr_xprt_target *t, const struct rr_xprt_server_params *p,
		      struct rr_xprt_server **out);
	int (*port)(const struct rr_xprt_server *s);
	int (*start)(struct rr_xprt_server *s);
	int (*send_reply)(struct rr_xprt_server *s, struct rr_xprt_req *req,
			  const struct rr_xprt_msg *msg);
	void (*req_done)(struct rr_xprt_server *s, struct rr_xprt_req *req);
	/* Optional: send_reply without waiting for the transport to be done
	 * with @msg's memory. Returns 1: sent(arg, status) follows exactly
	 * once, from a transport thread, once @msg's inline bytes and items
	 * are no longer referenced; until then they stay valid and req_done
	 * waits. 0 or a negative errno: as send_reply (sent not called). */
	int (*send_reply_async)(struct rr_xprt_server *s, struct rr_xprt_req *req,
				const struct rr_xprt_msg *msg,
				void (*sent)(void *arg, int status), void *arg);
	/* Optional: send_reply_async, and on 0 req_done(@req) as well (@req
	 * finished: req_done is not called for it). 1 or a negative errno:
	 * as send_reply_async, req_done still owed. */
	int (*send_reply_done)(struct rr_xprt_server *s, struct rr_xprt_req *req,
			       const struct rr_xprt_msg *msg,
			       void (*sent)(void *arg, int status), void *arg);
	void (*stop)(struct rr_xprt_server *s);
	void (*destroy)(struct rr_xprt_server *s);
	/* true: the transport calls recv() from params->threads threads of its
	 * own and lets recv() run the request to completion (handler, reply)
	 * before returning; the RPC layer then dispatches inline, without a
	 * handoff to a worker. false: recv() only queues. */
	bool inline_recv;
	/* Optional: transport controls (transport/xprt_ctl.h) for the endpoint
	 * (@req NULL) or for the connection of @req (a delivered request not
	 * yet done). NULL or an unknown @op: -EOPNOTSUPP. */
	int (*ctl)(struct rr_xprt_server *s, struct rr_xprt_req *req, unsigned op, void *arg);
	/* Optional: @req cannot be processed or its reply could not be sent
	 * (no memory): the transport answers it with what it can send
	 * without allocating (rdma: RDMA_ERROR/ERR_CHUNK) or ends its
	 * connection; @req is then finished with req_done. Without it the RPC
	 * layer answers SYSTEM_ERR through send_reply. Never a silent drop. */
	void (*req_refuse)(struct rr_xprt_server *s, struct rr_xprt_req *req);
	/* Optional: a client for Calls to the peer of @req's connection
	 * (section 4; absent: -EOPNOTSUPP). */
	int (*bc_client)(struct rr_xprt_server *s, struct rr_xprt_req *req,
			 const struct rr_xprt_client_params *p,
			 const struct rr_xprt_client_ops **ops, struct rr_xprt_client **out);
};

struct rr_xprt_class {
	const char *scheme;
	const struct rr_xprt_client_ops *client;  /* NULL: no client role */
	const struct rr_xprt_server_ops *server;  /* NULL: no server role */
};

/* Adds or replaces the transport for cls->scheme (borrowed for the life of
 * the process). Returns 0, -EINVAL, or -ENOSPC when the table is full. */
int rr_xprt_register(const struct rr_xprt_class *cls);
/* The transport for @scheme: 0 and *@out, -EPROTONOSUPPORT for a known
 * scheme without a transport (rdma, verbs) or no such role, -EINVAL for an
 * unknown scheme. */
int rr_xprt_lookup(const char *scheme, const struct rr_xprt_class **out);
/* Parses @url into *@t and looks up its transport into *@out, which must
 * offer the server role when @server, else the client role: 0, the errors of
 * rr_xprt_parse_url/rr_xprt_lookup, or -EPROTONOSUPPORT for a missing role. */
int rr_xprt_resolve(const char *url, bool server, struct rr_xprt_target *t,
		    const struct rr_xprt_class **out);

/* Built-in transports (the registry's table). */
extern const struct rr_xprt_class rr_xprt_tcp_class;    /* src/transport/tcp/tcp.c */
extern const struct rr_xprt_class rr_xprt_rdma_class;   /* src/transport/rdma/rpc.c */
/* Tests only: @fn (NULL: none) runs on the thread of every rdma:// Call's
 * submit, with no lock held, between the RPC layer's registration of the
 * call and the transport's hold of it (rdma/rpc.c cl_start, before the
 * session sees the Call): the window a cancel may land in. */
void rr_xprt_rdma_test_set_submit_hook(void (*fn)(void));
extern const struct rr_xprt_class rr_xprt_verbs_class;  /* src/transport/rdma/rpc.c */

#endif
