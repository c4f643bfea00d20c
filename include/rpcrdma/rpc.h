/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: ONC RPC (RFC 5531) clients and servers over
 * RPC-over-RDMA (rdma://, verbs://) or plain TCP with record marking
 * (tcp://, RFC 5531 section 11). The same calls work on every transport;
 * only the URL changes. See docs/api.md for a guide.
 *
 * Client
 *   rpcrdma_client_create("tcp://host:port", prog, vers, NULL, &clnt);
 *   rpcrdma_call_create(clnt, proc, &call);
 *   enc = rpcrdma_call_args(call); rpcrdma_xdr_put_u32(enc, 42); ...
 *   rpcrdma_call_run(call);                    (synchronous; or _start)
 *   dec = rpcrdma_call_results(call); rpcrdma_xdr_get_u32(dec, &x); ...
 *   rpcrdma_call_destroy(call);
 *
 * Server
 *   rpcrdma_server_create("tcp://0.0.0.0:0", NULL, &srv);
 *   rpcrdma_server_register(srv, prog, vers, proc, handler, ctx);
 *   rpcrdma_server_start(srv);  ...  rpcrdma_server_destroy(srv);
 *
 * Return values: 0 or a negative errno. An RPC the server answered with
 * anything other than MSG_ACCEPTED/SUCCESS completes with -EREMOTEIO and
 * rpcrdma_call_status() tells which answer it was; -EREMOTEIO with no RPC
 * reply (rpcrdma_call_status() == -ENOENT) means the transport peer
 * reported an error instead (RPC-over-RDMA RDMA_ERROR, e.g. ERR_CHUNK when
 * a result does not fit the caller's sink). Transport errors:
 * -ETIMEDOUT (no reply within the timeout), -ECANCELED (cancelled),
 * -ECONNREFUSED/-ECONNRESET/-ENOTCONN, -EPROTONOSUPPORT (URL scheme whose
 * transport is not available in this build), -EMSGSIZE (message above the
 * maximum size), -EBADMSG (undecodable reply). */
#ifndef RPCRDMA_RPC_H
#define RPCRDMA_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpcrdma/env.h"
#include "rpcrdma/xdr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RFC 5531 constants ---- */
enum rpcrdma_auth_flavor {
	RPCRDMA_AUTH_NONE = 0,
	RPCRDMA_AUTH_SYS = 1,
};

enum rpcrdma_reply_stat { RPCRDMA_MSG_ACCEPTED = 0, RPCRDMA_MSG_DENIED = 1 };

enum rpcrdma_accept_stat {
	RPCRDMA_SUCCESS = 0,
	RPCRDMA_PROG_UNAVAIL = 1,
	RPCRDMA_PROG_MISMATCH = 2,
	RPCRDMA_PROC_UNAVAIL = 3,
	RPCRDMA_GARBAGE_ARGS = 4,
	RPCRDMA_SYSTEM_ERR = 5,
};

enum rpcrdma_reject_stat { RPCRDMA_RPC_MISMATCH = 0, RPCRDMA_AUTH_ERROR = 1 };

enum rpcrdma_auth_stat {
	RPCRDMA_AUTH_OK = 0,
	RPCRDMA_AUTH_BADCRED = 1,
	RPCRDMA_AUTH_REJECTEDCRED = 2,
	RPCRDMA_AUTH_BADVERF = 3,
	RPCRDMA_AUTH_REJECTEDVERF = 4,
	RPCRDMA_AUTH_TOOWEAK = 5,
	RPCRDMA_AUTH_INVALIDRESP = 6,
	RPCRDMA_AUTH_FAILED = 7,
};

/* AUTH_SYS parameters (RFC 5531 appendix A). @machinename is copied. */
#define RPCRDMA_AUTHSYS_MAXGIDS 16
struct rpcrdma_auth_sys {
	uint32_t stamp;
	char machinename[256];   /* NUL-terminated, at most 255 bytes */
	uint32_t uid;
	uint32_t gid;
	uint32_t ngids;
	uint32_t gids[RPCRDMA_AUTHSYS_MAXGIDS];
};

/* How the server answered a call (valid once it completed with 0 or
 * -EREMOTEIO). */
struct rpcrdma_rpc_status {
	uint32_t reply_stat;   /* enum rpcrdma_reply_stat */
	uint32_t accept_stat;  /* if MSG_ACCEPTED */
	uint32_t reject_stat;  /* if MSG_DENIED */
	uint32_t auth_stat;    /* if AUTH_ERROR */
	uint32_t low, high;    /* PROG_MISMATCH / RPC_MISMATCH versions */
};

/* A caller-provided buffer for one DDP-eligible result item. */
struct rpcrdma_ddp_sink {
	void *buf;
	size_t max;
};

/* ---- client ---- */
struct rpcrdma_client;
struct rpcrdma_call;

struct rpcrdma_client_opts {
	const struct rpcrdma_env *env;  /* NULL: process defaults */
	uint32_t timeout_ms;            /* default per-call timeout; 0: 30000 */
	uint32_t connect_timeout_ms;    /* 0: 10000 */
	size_t max_msg;                 /* largest Call/Reply; 0: 8 MiB + 64 KiB */
	bool no_reconnect;              /* fail pending calls on connection loss
					   instead of reconnecting and
					   retransmitting with the same XID */
	bool no_inline_ddp;             /* RDMA: a Write chunk for every result
					   sink, even when the largest possible
					   Reply fits the reply inline threshold
					   (default: such results, up to 16 KiB
					   of sinks, come inline, no
					   registration, as with Linux
					   xprtrdma) */
	uint32_t inline_size;           /* RDMA: the Send and Receive sizes this
					   end advertises in its RFC 8797
					   private data, 1024..262144 (larger
					   is taken as 262144); each direction
					   then uses the smaller of both ends'
					   sizes, so a Linux peer (4096) keeps
					   4096. 0: the transport's choice:
					   132 KiB on rdma:// (TCP-carried: an
					   argument up to 128 KiB travels in
					   the Call instead of an RDMA Read
					   round trip; results larger than 16
					   KiB still get Write chunks, which
					   save two copies), 4096
					   on verbs://. Ignored by tcp://.
					   Memory and credits: docs/transport.md
					   "Inline thresholds" */
	uint32_t spin_us;               /* rdma://: how long a thread waiting
					   for this client's Reply polls the
					   connection before it sleeps
					   (rpcrdma_open_attr.spin_us: 0 the
					   default, 20 us or
					   RPCRDMA_SOFT_SPIN_US;
					   RPCRDMA_SPIN_OFF never) */
	unsigned callback_slots;        /* backchannel (RFC 8167; see
					   rpcrdma_client_callbacks): Calls
					   the server may send back on this
					   client's connection and have served
					   at once. RDMA: the backward credits
					   granted, with as many Receives
					   posted for them (inline Calls only,
					   each at most the inline threshold).
					   At most RPCRDMA_CALLBACK_SLOTS_MAX.
					   0: no backchannel; reverse Calls
					   are dropped */
};

/* Largest rpcrdma_client_opts.callback_slots (Linux offers 16). */
#define RPCRDMA_CALLBACK_SLOTS_MAX 64u

/* Connects to @url ("tcp://host:port"; "rdma://host:port" on the software
 * iWARP provider; "verbs://host:port" on rdma-core, through the RDMA device
 * the route to host leads to: -ENODEV when there is none, -EPROTONOSUPPORT
 * when the library was built without rdma-core) for program @prog version
 * @vers. @opts may be NULL. The connection is made here; a refused
 * connection is an error. */
RPCRDMA_API int rpcrdma_client_create(const char *url, uint32_t prog, uint32_t vers,
				      const struct rpcrdma_client_opts *opts,
				      struct rpcrdma_client **out);
/* Cancels every pending call (-ECANCELED), waits for their completion
 * callbacks, closes the connection, frees. Destroy every call of this client
 * before (a call must not outlive its client). Never call it from a
 * completion callback. */
RPCRDMA_API void rpcrdma_client_destroy(struct rpcrdma_client *c);
/* Credential for later calls (default AUTH_NONE). @sys is copied. */
RPCRDMA_API int rpcrdma_client_set_auth_none(struct rpcrdma_client *c);
RPCRDMA_API int rpcrdma_client_set_auth_sys(struct rpcrdma_client *c,
					    const struct rpcrdma_auth_sys *sys);
/* Fills @sys from this process: time stamp, host name, uid, gid, groups. */
RPCRDMA_API int rpcrdma_auth_sys_self(struct rpcrdma_auth_sys *sys);

/* Creates a call of @proc. Its arguments are empty until encoded. */
RPCRDMA_API int rpcrdma_call_create(struct rpcrdma_client *c, uint32_t proc,
				    struct rpcrdma_call **out);
/* The argument encoder (valid until the call is destroyed; arguments may be
 * encoded only before the call is started: afterwards every put fails with
 * -EBUSY). */
RPCRDMA_API struct rpcrdma_xdr_enc *rpcrdma_call_args(struct rpcrdma_call *call);
/* Buffers for the DDP-eligible result items, in the order the results
 * decoder will meet them. Borrows @sinks[i].buf until the call completes;
 * the array itself is copied. At most 16 sinks. */
RPCRDMA_API int rpcrdma_call_set_sinks(struct rpcrdma_call *call,
				       const struct rpcrdma_ddp_sink *sinks, unsigned n);
/* Largest expected Reply in bytes, DDP-eligible items excluded (an RDMA
 * transport provides a Reply chunk when it exceeds the inline threshold).
 * 0: unknown (the transport uses the maximum message size). */
RPCRDMA_API void rpcrdma_call_set_reply_hint(struct rpcrdma_call *call, size_t bytes);
/* The range of the Reply's size as the caller knows it (same units as the
 * hint above): @min bytes at least, @max at most, @max 0 when no maximum can
 * be computed. With reliable reply negotiated (draft-cel-nfsv4-rpcrdma-
 * reliable-reply, docs/protocol.md) an RDMA transport chooses per call: no
 * Reply chunk when the maximum fits inline, is unknown, or the minimum does
 * (a large Reply then comes as a responder-provided Read chunk); a Reply
 * chunk only when even the minimum exceeds the inline threshold. Without it,
 * as rpcrdma_call_set_reply_hint(call, max). */
RPCRDMA_API void rpcrdma_call_set_reply_range(struct rpcrdma_call *call, size_t min,
					      size_t max);
/* 1 when the Reply of this completed call came through a responder-provided
 * Read chunk (reliable reply), 0 otherwise. */
RPCRDMA_API int rpcrdma_call_reply_via_read(const struct rpcrdma_call *call);
/* 1 when the client's current RDMA connection negotiated reliable reply
 * (both peers advertise it in the connection private data), 0 when not,
 * -ENOTCONN without a connection, -EOPNOTSUPP on a transport without it
 * (tcp://). */
RPCRDMA_API int rpcrdma_client_reliable_reply(const struct rpcrdma_client *c);
/* Timeout of this call in milliseconds (0: the client's default). It never
 * fires early: the call ends with -ETIMEDOUT no sooner than @ms after it
 * started. A synchronous call (rpcrdma_call_run) on rdma:// and verbs://
 * reads no clock before its first wait for the Reply (at most 10 ms): one
 * answered in it reads none at all; one that is not counts its timeout
 * from the clock read after that wait, so it fires at most one wait slice
 * (20 ms) late, besides the scheduler's delay that any timer has. */
RPCRDMA_API void rpcrdma_call_set_timeout(struct rpcrdma_call *call, uint32_t ms);

/* Sends the call and waits for its completion. Returns its status: 0 when
 * the server answered SUCCESS (decode the results), otherwise the error. */
RPCRDMA_API int rpcrdma_call_run(struct rpcrdma_call *call);

/* Completion callback of an asynchronous call, called exactly once, from a
 * library thread (never from inside rpcrdma_call_start; possibly from the
 * transport's receive thread or from a thread inside rpcrdma_call_run that
 * is receiving for the client, so it must not block: no rpcrdma_call_run or
 * rpcrdma_call_wait in it). It may decode the results, destroy the call, and
 * start new calls. */
typedef void (*rpcrdma_call_done_fn)(struct rpcrdma_call *call, int status, void *arg);
/* Sends the call; @done runs on completion. Returns 0, or an error without
 * calling @done. */
RPCRDMA_API int rpcrdma_call_start(struct rpcrdma_call *call, rpcrdma_call_done_fn done,
				   void *arg);
/* Waits up to @timeout_ms (-1: forever) for a started call; returns its
 * status, or -EAGAIN if still pending after the wait. */
RPCRDMA_API int rpcrdma_call_wait(struct rpcrdma_call *call, int timeout_ms);
/* Cancels a started call: it completes with -ECANCELED unless it already
 * completed. Safe from any thread, also concurrently with completion. */
RPCRDMA_API void rpcrdma_call_cancel(struct rpcrdma_call *call);
/* The results decoder of a call completed with status 0 (NULL otherwise),
 * valid until the call is destroyed. */
RPCRDMA_API struct rpcrdma_xdr_dec *rpcrdma_call_results(struct rpcrdma_call *call);
/* How the server answered (-ENOENT if no reply was received). */
RPCRDMA_API int rpcrdma_call_status(const struct rpcrdma_call *call,
				    struct rpcrdma_rpc_status *st);
RPCRDMA_API uint32_t rpcrdma_call_xid(const struct rpcrdma_call *call);
/* Frees the call. A call still pending is cancelled first (its callback
 * runs before this returns, unless this is called from that callback). */
RPCRDMA_API void rpcrdma_call_destroy(struct rpcrdma_call *call);

/* ---- rpcgen / libtirpc interoperability (inline data only) ----
 * xdrproc_t routines generated by rpcgen (libtirpc) encode the arguments and
 * decode the results through an XDR memory stream. Available when the
 * library was built with libtirpc (otherwise -ENOSYS / NULL). */
struct __rpc_xdr;     /* libtirpc's XDR */
struct __rpc_client;  /* libtirpc's CLIENT */
struct __rpc_svcxprt; /* libtirpc's SVCXPRT */
struct svc_req;
typedef int32_t (*rpcrdma_xdrproc_t)(struct __rpc_xdr *, ...);

/* One call: @args encodes @argp, @res decodes into @resp (free it with
 * xdr_free(res, resp) as with clnt_call). 0: SUCCESS. */
RPCRDMA_API int rpcrdma_call_xdrproc(struct rpcrdma_client *c, uint32_t proc,
				     rpcrdma_xdrproc_t args, void *argp,
				     rpcrdma_xdrproc_t res, void *resp,
				     uint32_t timeout_ms);
/* A libtirpc CLIENT handle whose calls go through librpcrdma: the one line
 * that moves an rpcgen client from clnt_create(host, P, V, "tcp") to
 * librpcrdma. clnt_call/clnt_destroy/clnt_perror/clnt_freeres work on it.
 * NULL on failure (errno set). */
RPCRDMA_API struct __rpc_client *rpcrdma_clnt_create(const char *url, uint32_t prog,
						     uint32_t vers);
/* ---- server ---- */
struct rpcrdma_server;
struct rpcrdma_req;

/* An rpcgen-generated dispatch function (PROG_VERS(struct svc_req *,
 * SVCXPRT *)), registered for every procedure of (@prog, @vers): its
 * svc_getargs/svc_sendreply/svcerr_* calls are served by librpcrdma. */
typedef void (*rpcrdma_svc_dispatch_fn)(struct svc_req *, struct __rpc_svcxprt *);
RPCRDMA_API int rpcrdma_server_register_svc(struct rpcrdma_server *s, uint32_t prog,
					    uint32_t vers, rpcrdma_svc_dispatch_fn fn);

struct rpcrdma_server_opts {
	const struct rpcrdma_env *env;  /* NULL: process defaults */
	unsigned threads;               /* worker threads; 0: 4 */
	size_t max_msg;                 /* largest Call/Reply; 0: 8 MiB + 64 KiB */
	unsigned max_conns;             /* 0: 1024 */
	unsigned flags;                 /* RPCRDMA_SERVER_* */
	uint32_t inline_size;           /* RDMA: advertised Send and Receive
					   sizes, as rpcrdma_client_opts */
	uint32_t spin_us;               /* rdma://: the soft provider's spin
					   budget (rpcrdma_open_attr.spin_us,
					   values as rpcrdma_client_opts) where
					   a server thread waits on one CQ
					   itself; the progress loops never
					   spin (docs/transport.md) */
	unsigned drc_entries;           /* duplicate request cache (docs/api.md
					   "Duplicate request cache"): most
					   requests remembered; 0: no cache */
	uint32_t drc_max_reply;         /* largest reply kept, bytes (inline
					   bytes plus DDP-eligible data);
					   0: 4096 */
	uint32_t drc_ttl_ms;            /* a kept reply is forgotten this long
					   after its last use; 0: 120000 */
	/* Memory a client can make the server hold (docs/security.md
	 * "Limits"); rdma:// and verbs://: bytes of replies exposed to the
	 * client as Read chunks (reliable reply) and not yet released. A
	 * reply that would go over is answered RDMA_ERROR/ERR_CHUNK. */
	size_t reply_mem_per_conn;      /* one connection; 0: 16 MiB */
	size_t reply_mem_total;         /* all connections; 0: 256 MiB */
	uint32_t rrep_timeout_ms;       /* rdma://, verbs://: a reply exposed
					   as a Read chunk is fenced this long
					   after it went out without the
					   client's RDMA_DONE, and one waiting
					   for a reservation (32 per
					   connection) is answered ERR_CHUNK
					   after as long; 0: 30000 */
	/* Connection limits (docs/security.md "Limits"; the same on every
	 * transport unless said): */
	uint32_t idle_timeout_ms;       /* an established connection that has
					   received nothing for this long, with
					   no call in progress and no reply
					   pending, is closed; 0: 360000 (6 min,
					   as nfsd); UINT32_MAX: never */
	unsigned max_conns_per_host;    /* connections from one source IP
					   address; more are refused; 0: 64;
					   UINT_MAX: no limit */
	unsigned max_handshakes;        /* rdma://: TCP connections accepted
					   whose MPA Request has not come yet;
					   one more closes the oldest; 0: 128
					   (each also times out after 10 s;
					   one that has sent nothing waits in
					   the kernel first, uncounted, see
					   RPCRDMA_SERVER_NO_DEFER_ACCEPT).
					   tcp:// has no such phase; verbs://
					   leaves it to the kernel's CM */
	uint32_t credits;               /* rdma://, verbs:// (docs/protocol.md
					   "Credits"): 0, the default: every
					   connection's grant follows its
					   demand (from 1, doubled while the
					   client keeps it all in use, cut
					   back when it does not), its Receives
					   drawn from one shared receive queue
					   that grows and shrinks with the
					   messages in flight (per connection
					   Receives where the provider has no
					   such queues); N: every connection
					   gets its own N + 4 Receives and a
					   grant of N from its first Reply on,
					   as Linux svcrdma (64). tcp:// has no
					   credits */
};

/* Handlers run on the thread that received the Call, without a hop to a
 * worker thread (lower latency; what libtirpc's svc_run and the tcp://
 * transport do). For handlers that never block for long: while one runs,
 * the transport's receiving thread serves nothing else (on rdma:// that is
 * every connection of the server). A handler may still DEFER. */
#define RPCRDMA_SERVER_INLINE 1u
/* rdma://: the listening socket without TCP_DEFER_ACCEPT. By default the
 * kernel hands the server a TCP connection only once its first bytes (the
 * MPA Request) have come, or when the deferral ends (the 10 s handshake
 * timeout rounded up by the kernel to 15 s): the listener wakes once per
 * connect instead of twice, and a peer that connects and stays silent
 * holds no descriptor and no max_handshakes slot meanwhile, only an entry
 * of the kernel's SYN queue (docs/security.md "Half-open connections and
 * TCP_DEFER_ACCEPT"). With this flag every TCP connection is accepted at
 * once and counts against max_handshakes from then. tcp:// and verbs://
 * ignore it. */
#define RPCRDMA_SERVER_NO_DEFER_ACCEPT 2u

/* Handler results. A handler returns RPCRDMA_SVC_OK after encoding its
 * results; GARBAGE_ARGS when its arguments did not decode; SYSTEM_ERR on an
 * internal failure (a negative errno is treated the same); DEFER to keep the
 * request and finish it later with rpcrdma_req_complete() from any thread;
 * DROP to send no reply at all. */
enum rpcrdma_svc_stat {
	RPCRDMA_SVC_OK = 0,
	RPCRDMA_SVC_GARBAGE_ARGS = 1,
	RPCRDMA_SVC_SYSTEM_ERR = 2,
	RPCRDMA_SVC_DEFER = 3,
	RPCRDMA_SVC_DROP = 4,
	RPCRDMA_SVC_AUTH_ERROR = 5, /* reply MSG_DENIED/AUTH_ERROR with the
				       stat set by rpcrdma_req_set_auth_error */
};

typedef int (*rpcrdma_handler_fn)(struct rpcrdma_req *req, void *ctx);

/* Listens on @url ("tcp://addr:port", "rdma://addr:port" or
 * "verbs://addr:port"; port 0 for an ephemeral one; verbs:// uses the RDMA
 * device owning addr, the first one for a wildcard address, and answers as
 * rpcrdma_client_create). Not yet serving: register handlers, then
 * rpcrdma_server_start(). */
RPCRDMA_API int rpcrdma_server_create(const char *url, const struct rpcrdma_server_opts *opts,
				      struct rpcrdma_server **out);
/* Registers @fn for (@prog, @vers, @proc). Procedure 0 (NULL) is answered
 * automatically for every registered (prog, vers) unless registered
 * explicitly. Must be called before rpcrdma_server_start(). */
RPCRDMA_API int rpcrdma_server_register(struct rpcrdma_server *s, uint32_t prog,
					uint32_t vers, uint32_t proc,
					rpcrdma_handler_fn fn, void *ctx);
RPCRDMA_API int rpcrdma_server_start(struct rpcrdma_server *s);
/* The bound port (useful with port 0). */
RPCRDMA_API int rpcrdma_server_port(const struct rpcrdma_server *s);
/* Graceful shutdown: stop accepting, finish requests in flight (waits for
 * deferred requests to be completed), close connections. Idempotent. */
RPCRDMA_API void rpcrdma_server_shutdown(struct rpcrdma_server *s);
/* Shuts down (if not yet) and frees. */
RPCRDMA_API void rpcrdma_server_destroy(struct rpcrdma_server *s);

/* Duplicate request cache (opts.drc_entries > 0). With it, a Call that
 * repeats a previous one (same XID, program, version, procedure, client
 * host and arguments) does not run the handler again: it gets the first
 * Call's reply. Every procedure but NULL is cached unless marked idempotent
 * here (as nfsd caches only non-idempotent procedures): an idempotent one
 * simply runs again. Before rpcrdma_server_start(): 0, -EBUSY after,
 * -ENOMEM. Without a cache the mark is accepted and has no effect. */
RPCRDMA_API int rpcrdma_server_set_idempotent(struct rpcrdma_server *s, uint32_t prog,
					      uint32_t vers, uint32_t proc);
struct rpcrdma_drc_stats {
	uint64_t hits;               /* duplicates answered from the cache */
	uint64_t drops_in_progress;  /* duplicates that came while the first
					Call still ran (answered with its
					reply when it completes, or dropped) */
	uint64_t insertions;         /* requests remembered */
	uint64_t evictions;          /* kept replies evicted for room (LRU) */
	uint64_t expirations;        /* kept replies forgotten by age */
	uint64_t not_cached;         /* requests run but not remembered: reply
					not SUCCESS or too large, dropped,
					cache full of running requests, no
					memory */
	uint32_t entries;            /* requests remembered now */
};
/* Snapshot of the cache's counters: 0, -EINVAL, -EOPNOTSUPP without a
 * cache. */
RPCRDMA_API int rpcrdma_server_drc_stats(struct rpcrdma_server *s,
					 struct rpcrdma_drc_stats *st);

/* Inside a handler (or until rpcrdma_req_complete for deferred requests): */
RPCRDMA_API struct rpcrdma_xdr_dec *rpcrdma_req_args(struct rpcrdma_req *r);
RPCRDMA_API struct rpcrdma_xdr_enc *rpcrdma_req_results(struct rpcrdma_req *r);
RPCRDMA_API uint32_t rpcrdma_req_xid(const struct rpcrdma_req *r);
RPCRDMA_API uint32_t rpcrdma_req_prog(const struct rpcrdma_req *r);
RPCRDMA_API uint32_t rpcrdma_req_vers(const struct rpcrdma_req *r);
RPCRDMA_API uint32_t rpcrdma_req_proc(const struct rpcrdma_req *r);
/* The credential flavor; for AUTH_SYS, the parsed parameters (NULL
 * otherwise). */
RPCRDMA_API uint32_t rpcrdma_req_cred_flavor(const struct rpcrdma_req *r);
RPCRDMA_API const struct rpcrdma_auth_sys *rpcrdma_req_auth_sys(const struct rpcrdma_req *r);
RPCRDMA_API void rpcrdma_req_set_auth_error(struct rpcrdma_req *r, uint32_t auth_stat);
/* Runs @fn(@arg) once the reply has been sent (or dropped): the moment
 * buffers referenced with rpcrdma_xdr_put_ddp() may be reused. */
RPCRDMA_API void rpcrdma_req_set_release(struct rpcrdma_req *r, void (*fn)(void *), void *arg);
/* Finishes a deferred request with @stat (enum rpcrdma_svc_stat, not DEFER). */
RPCRDMA_API void rpcrdma_req_complete(struct rpcrdma_req *r, int stat);

/* ---- backchannel: Calls from the server to the client on the client's
 * connection (RFC 8167 on rdma:// and verbs://; on tcp:// the record-marked
 * stream carries Calls both ways as NFSv4.1 does, RFC 5531 msg_type telling
 * them apart). See docs/api.md "Backchannel". ---- */

/* Server side: a client for Calls of (@prog, @vers) to the peer that sent
 * @req, on @req's connection. Call it from a handler (or before
 * rpcrdma_req_complete of a deferred request); the client stays usable
 * after the request is done, until rpcrdma_client_destroy, which must come
 * before rpcrdma_server_destroy. It never connects: once that connection is
 * gone its pending calls complete with -ECONNRESET and new ones fail with
 * -ENOTCONN (a client that reconnects brings a new connection: call back
 * on a request that came on it). Messages are inline only: a Call or Reply
 * above the connection's inline threshold is -EMSGSIZE (RDMA). A handler
 * must not wait for a callback's Reply on the thread that receives it:
 * rpcrdma_call_run returns -EDEADLK on the rdma:// progress thread
 * (RPCRDMA_SERVER_INLINE) or on the only io thread of a tcp:// server;
 * use rpcrdma_call_start there. From @opts only env, timeout_ms and
 * max_msg apply (NULL: defaults). 0, -EINVAL, -ENOMEM, -EOPNOTSUPP
 * (transport without a backchannel), -ENOTCONN. */
RPCRDMA_API int rpcrdma_server_callback(struct rpcrdma_req *req, uint32_t prog, uint32_t vers,
					const struct rpcrdma_client_opts *opts,
					struct rpcrdma_client **out);

/* Client side: a server for the Calls its server sends back on this
 * client's connection -- and on the connections it reconnects on -- (the
 * client must have been created with opts.callback_slots > 0). Register
 * handlers on it with rpcrdma_server_register / rpcrdma_server_register_svc,
 * then rpcrdma_server_start: before that, reverse Calls are dropped (so are
 * those beyond callback_slots at once); afterwards they are answered as on
 * any server (PROG_UNAVAIL, AUTH_ERROR, ... included). Handlers run on the
 * callback server's threads (@opts->threads, 0: 1), so one may make a
 * synchronous call on the same client. rpcrdma_server_port answers
 * -EOPNOTSUPP; rpcrdma_server_destroy must come before
 * rpcrdma_client_destroy. From @opts: env, threads, flags, max_msg and the
 * duplicate request cache (NULL: defaults). 0, -EINVAL (no callback_slots),
 * -EBUSY (the client has one), -EOPNOTSUPP (transport without a
 * backchannel), -ENOMEM. */
RPCRDMA_API int rpcrdma_client_callbacks(struct rpcrdma_client *c,
					 const struct rpcrdma_server_opts *opts,
					 struct rpcrdma_server **out);

#ifdef __cplusplus
}
#endif
#endif
