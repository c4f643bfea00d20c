/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC server (include/rpcrdma/rpc.h) over any registered transport
 * (src/transport/xprt.h): decodes each Call header (RFC 5531 section 9), checks
 * the credential (AUTH_NONE, AUTH_SYS per appendix A; anything else is
 * AUTH_ERROR/AUTH_BADCRED, a non-null verifier AUTH_BADVERF), dispatches on
 * (prog, vers, proc) to handlers on a pool of worker threads, and answers as
 * RFC 5531 requires: RPC_MISMATCH 2..2 for rpcvers != 2, PROG_UNAVAIL,
 * PROG_MISMATCH with the lowest and highest registered versions,
 * PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR; procedure 0 (NULL) is answered for
 * every registered (prog, vers). Undecodable messages and Replies are
 * dropped without an answer. Shutdown is graceful: stop accepting, finish the
 * requests in flight (deferred ones included), close. With a duplicate
 * request cache (src/rpc/drc.h) a retransmitted Call (same XID, arguments
 * and client host) of a cached procedure does not run its handler again:
 * it gets the first Call's reply, re-sent from the cache or, while the
 * first still runs, once it completes. */
#include "rpc/bc.h"
#include "rpc/drc.h"
#include "rpc/rpcmsg.h"
#include "rpc/svcint.h"
#include "transport/xprt.h"
#include "rpc/ctl.h"
#include "engine/engine.h"
#include "common/spare.h"

#include <netinet/in.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#define DEFAULT_THREADS 4u
#define DEFAULT_MAX_MSG ((size_t)8 * 1024 * 1024 + 65536)
#define DEFAULT_MAX_CONNS 1024u
/* Connection limits (docs/security.md "Limits") */
#define DEFAULT_MAX_CONNS_PER_HOST 64u
#define DEFAULT_MAX_HANDSHAKES 128u
#define DEFAULT_IDLE_TIMEOUT_MS 360000u   /* nfsd closes idle TCP after 6 min */
#define REPLY_HDR_LEN 24u  /* xid, REPLY, MSG_ACCEPTED, verf AUTH_NONE, accept_stat */
#define DEFAULT_DRC_MAX_REPLY 4096u
#define DEFAULT_DRC_TTL_MS 120000u   /* as nfsd's RC_EXPIRE */

struct svc_proc {
	uint32_t prog, vers, proc;
	rpcrdma_handler_fn fn;
	rpcrdma_svc_dispatch_fn tirpc;   /* or an rpcgen dispatch function */
	rr_svc_program_fn run_tirpc;     /* that runs it (tirpc.c) */
	void *ctx;
};

struct rpcrdma_req {
	/* Cleared for every request (req_new): read before anything of this
	 * request writes them. */
	bool have_sys;
	uint32_t auth_stat;
	void (*release)(void *);
	void *release_arg;
	struct rpcrdma_req *next;
	struct rr_drc_entry *drc_ent;   /* IN PROGRESS entry of this Call */
	struct rr_drc_reply *drc_rep;   /* a cached reply being re-sent */
	/* Not cleared when a spare request is reused (req_new), each written
	 * before it is read: @srv and @xreq by svc_recv; @call by the header's
	 * decoding (dispatch; a Call that does not decode is dropped, and
	 * its fields are read only once it did, or for RPC_MISMATCH its xid,
	 * decoded first); @args by dispatch before a handler runs (nothing
	 * else reads it); the results buffer is emptied instead, and @sys,
	 * read only with @have_sys, is written whole when an AUTH_SYS
	 * credential is decoded (req_auth): its 336 bytes zeroed per Call
	 * were ~50 of a NULL Call's instructions (docs/PERFORMANCE.md "Issue
	 * 16 part BE"); @call and @args cleared were ~30 more (part CM). */
	struct rpcrdma_server *srv;
	struct rr_xprt_req *xreq;
	struct rr_rpc_call call;
	struct rpcrdma_xdr_dec args;
	struct rpcrdma_xdr_enc res;
	struct rpcrdma_auth_sys sys;
};

struct svc_idem {
	uint32_t prog, vers, proc;
};

struct rpcrdma_server {
	const struct rpcrdma_env *env;
	const struct rr_xprt_server_ops *ops;   /* its transport's */
	struct rr_xprt_server *xs;
	size_t max_msg;
	unsigned nthreads;
	unsigned nworkers;       /* started: nthreads, or 0 when handlers run
				    inline */
	bool inline_handlers;    /* RPCRDMA_SERVER_INLINE */
	bool all_here;           /* ops->inline_recv || inline_handlers: every
				    request runs on the receiving thread */
	pthread_t *threads;
	bool started;
	bool shut;
	pthread_mutex_t lock;
	pthread_cond_t cv;       /* queue non-empty or stopping */
	pthread_cond_t idle_cv;  /* inflight dropped (while stopping) */
	/* A request is counted in inflight before stopping is looked at, and
	 * shutdown sets stopping before it looks at inflight (both seq_cst):
	 * a request either sees stopping or is waited for. Neither takes
	 * the lock on a request's way while the server runs (inflight_put). */
	atomic_bool stopping;    /* set under lock */
	_Atomic unsigned inflight;   /* delivered and not yet done */
	struct rpcrdma_req *qhead, *qtail;
	struct svc_proc *procs;
	unsigned nprocs, procs_cap;
	struct rr_drc *drc;            /* NULL: no duplicate request cache */
	struct svc_idem *idem;         /* procedures marked idempotent */
	unsigned nidem, idem_cap;
	struct rr_spare spare;         /* finished requests kept for reuse */
};


/* Inlined in its two callers: a Call answered on the receiving thread
 * (svc_recv) makes one call less. */
static inline __attribute__((always_inline)) void dispatch(struct rpcrdma_server *s,
							   struct rpcrdma_req *r);

/* True when no registered handler would run for @x: the RPC layer answers
 * it alone (NULL procedure, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, a
 * header that does not decode), which never blocks, so it is answered on
 * the receiving thread without a hop to a worker. */
static bool svc_answers_itself(const struct rpcrdma_server *s, const struct rr_xprt_req *x)
{
	struct rr_xdr_dec d;
	struct rr_rpc_call call;

	rr_xdr_dec_init(&d, x->msg, x->len);
	if (rr_rpcmsg_decode_call(&d, &call))
		return true;
	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct svc_proc *p = &s->procs[i];

		if (p->prog == call.prog && p->vers == call.vers &&
		    (p->tirpc || p->proc == call.proc))
			return false;
	}
	return true;
}

/* @xreq cannot be processed, or its reply could not be sent (no memory):
 * the transport's own answer (rdma: RDMA_ERROR/ERR_CHUNK), else an RPC
 * SYSTEM_ERR built on the stack. Never a silent drop (docs/security.md). */
static void svc_refuse(struct rpcrdma_server *s, struct rr_xprt_req *xreq)
{
	uint8_t buf[32];
	struct rr_xdr_enc e;
	struct rr_rpc_reply rep = {.stat = RR_RPC_MSG_ACCEPTED, .accept_stat = RR_RPC_SYSTEM_ERR};
	struct rr_xprt_msg m;

	if (s->ops->req_refuse) {
		s->ops->req_refuse(s->xs, xreq);
		return;
	}
	if (xreq->len < 4)
		return;
	rep.xid = rr_get_be32(xreq->msg);
	rr_xdr_enc_init(&e, buf, sizeof(buf));
	if (rr_rpcmsg_encode_reply(&e, &rep))
		return;
	memset(&m, 0, sizeof(m));
	m.head = buf;
	m.head_len = rr_xdr_enc_len(&e);
	m.xdr_len = m.head_len;
	(void)s->ops->send_reply(s->xs, xreq, &m);
}

/* A request object for @s: a spare one (every field before @srv cleared,
 * the results buffer emptied, the rest left as it was: see the struct) or
 * a new one; NULL: no memory. */
static struct rpcrdma_req *req_new(struct rpcrdma_server *s)
{
	bool fresh;
	struct rpcrdma_req *r = rr_spare_take_zeroed(&s->spare, s->env, sizeof(*r),
						     offsetof(struct rpcrdma_req, srv),
						     sizeof(*r) - offsetof(struct rpcrdma_req, srv),
						     &fresh);

	if (!r)
		return NULL;
	if (fresh)
		rr_xbuf_enc_init(&r->res, s->env, s->max_msg);
	else
		rr_xbuf_enc_reset(&r->res);
	return r;
}

/* @r, done with, kept as a spare of @s or freed. */
static void req_drop(struct rpcrdma_server *s, struct rpcrdma_req *r)
{
	if (r->res.cap > RR_XBUF_SPARE_CAP || !rr_spare_put(&s->spare, r)) {
		rr_xbuf_enc_free(&r->res);
		rr_free(s->env, r);
	}
}

/* One request less in flight. While the server runs this is the
 * request's last access to @s (shutdown, which looks at inflight at least
 * every 10 ms, may free @s right after); once stopping, under the lock
 * with a wake-up of shutdown. */
static void inflight_put(struct rpcrdma_server *s)
{
	if (atomic_load(&s->stopping)) {
		pthread_mutex_lock(&s->lock);
		atomic_fetch_sub(&s->inflight, 1);
		pthread_cond_broadcast(&s->idle_cv);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	atomic_fetch_sub(&s->inflight, 1);
}

static void svc_recv(void *ctx, struct rr_xprt_req *xreq)
{
	struct rpcrdma_server *s = ctx;
	struct rpcrdma_req *r;
	bool here;

	r = req_new(s);
	if (!r) {
		svc_refuse(s, xreq);
		s->ops->req_done(s->xs, xreq);
		return;
	}
	r->srv = s;
	r->xreq = xreq;
	atomic_fetch_add(&s->inflight, 1);
	here = s->all_here || svc_answers_itself(s, xreq);
	if (here && !atomic_load(&s->stopping)) {
		/* Run it here: no handoff (see xprt.h), no lock. */
		dispatch(s, r);
		return;
	}
	if (!here)
		pthread_mutex_lock(&s->lock);
	if (here || s->stopping) {
		if (!here)
			pthread_mutex_unlock(&s->lock);
		req_drop(s, r);
		s->ops->req_done(s->xs, xreq);
		inflight_put(s);
		return;
	}
	if (s->qtail)
		s->qtail->next = r;
	else
		s->qhead = r;
	s->qtail = r;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->lock);
}

static void req_release(struct rpcrdma_req *r);
static void req_release_after(struct rpcrdma_req *r);

/* send_reply_async: the transport no longer references the Reply. */
static void req_sent(void *arg, int status)
{
	(void)status;   /* a lost Reply is lost, as on any transport */
	req_release(arg);
}

static void res_msg(const struct rpcrdma_req *r, struct rr_xprt_msg *m)
{
	m->head = r->res.buf;
	m->head_len = r->res.len;
	m->ddp = r->res.ddp;
	m->nddp = r->res.nddp;
	m->xdr_len = r->res.xdr_len;
}

/* Sends @m (the reply of @r, in memory that stays valid until req_release)
 * or nothing (@m NULL) and finishes: at once, or when the transport is done
 * with the Reply's memory (send_reply_async, so that a thread answering many
 * Calls does not wait for each Send). */
static void req_send(struct rpcrdma_req *r, const struct rr_xprt_msg *m)
{
	struct rpcrdma_server *s = r->srv;

	if (m) {
		int rc;

		if (s->ops->send_reply_done && !r->release) {
			/* nothing to release before the transport's done:
			 * a Reply that left nothing referenced finishes the
			 * request at the transport in the same step */
			rc = s->ops->send_reply_done(s->xs, r->xreq, m, req_sent, r);
			if (rc == 1)
				return;
			if (rc == 0) {
				req_release_after(r);
				return;
			}
		} else if (s->ops->send_reply_async) {
			rc = s->ops->send_reply_async(s->xs, r->xreq, m, req_sent, r);
			if (rc == 1)
				return;
		} else {
			rc = s->ops->send_reply(s->xs, r->xreq, m);
		}
		if (rc < 0 && rc != -ENOTCONN)
			svc_refuse(s, r->xreq);   /* not built or not posted */
	}
	req_release(r);
}

/* Sends the reply in r->res (header already in place), or nothing, and
 * finishes. */
static void req_finish(struct rpcrdma_req *r, bool send)
{
	struct rr_xprt_msg m;

	if (send) {
		res_msg(r, &m);
		req_send(r, &m);
		return;
	}
	req_send(r, NULL);
}

/* Answers the duplicate @r with the cached reply @rep (takes that
 * reference: dropped when the transport is done with it). */
static void req_replay(struct rpcrdma_req *r, struct rr_drc_reply *rep)
{
	struct rr_xprt_msg m;

	r->drc_rep = rep;
	rr_drc_reply_msg(rep, &m);
	req_send(r, &m);
}

/* The rest of req_release once the transport is done with @r->xreq. */
static void req_release_after(struct rpcrdma_req *r)
{
	struct rpcrdma_server *s = r->srv;

	if (r->drc_rep)
		rr_drc_reply_put(s->drc, r->drc_rep);
	req_drop(s, r);
	inflight_put(s);
}

/* The Reply's memory is free: release the results and the request. */
static void req_release(struct rpcrdma_req *r)
{
	struct rpcrdma_server *s = r->srv;

	if (r->release)
		r->release(r->release_arg);
	s->ops->req_done(s->xs, r->xreq);
	req_release_after(r);
}

/* Room for a header-only Reply of @n bytes (at most SET_REPLY_ROOM) in
 * r->res, emptied of whatever was encoded (DDP items included): where it
 * goes, or NULL (no memory: the sticky error set). */
#define SET_REPLY_ROOM 32u
static uint8_t *reply_room(struct rpcrdma_req *r)
{
	rr_xbuf_enc_reset(&r->res);
	return rr_xbuf_enc_room(&r->res, SET_REPLY_ROOM);
}

/* r->res holds the header of @len bytes its room got (nothing after it). */
static void reply_len(struct rpcrdma_req *r, size_t len)
{
	r->res.len = len;
	r->res.xdr_len = len;
}

/* Replaces whatever was encoded with a header-only Reply. */
static void set_reply(struct rpcrdma_req *r, const struct rr_rpc_reply *rep)
{
	struct rr_xdr_enc e;
	uint8_t *p = reply_room(r);

	if (!p)
		return;
	rr_xdr_enc_init(&e, p, SET_REPLY_ROOM);
	if (rr_rpcmsg_encode_reply(&e, rep))
		return;
	reply_len(r, rr_xdr_enc_len(&e));
}

/* rr_svc_reply_accepted for an accept_stat @stat that no more words follow
 * (SUCCESS, PROG_UNAVAIL, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR): what
 * set_reply leaves, the header written at once (the answer of every NULL
 * or handled Call; test rpcmsg_accepted_none_as_general). */
static inline void reply_accepted_none(struct rpcrdma_req *r, uint32_t stat)
{
	uint8_t *p = reply_room(r);

	if (p) {
		rr_rpcmsg_encode_accepted_none(p, r->call.xid, stat);
		reply_len(r, RR_RPC_ACCEPTED_NONE_SIZE);
	}
}

void rr_svc_reply_accepted(struct rpcrdma_req *r, uint32_t stat, uint32_t low, uint32_t high)
{
	struct rr_rpc_reply rep = {.xid = r->call.xid, .stat = RR_RPC_MSG_ACCEPTED,
				   .accept_stat = stat, .low = low, .high = high};

	if (stat <= RR_RPC_SYSTEM_ERR && stat != RR_RPC_PROG_MISMATCH) {
		reply_accepted_none(r, stat);
		return;
	}
	set_reply(r, &rep);
}

void rr_svc_reply_denied(struct rpcrdma_req *r, uint32_t rstat, uint32_t auth_stat)
{
	struct rr_rpc_reply rep = {.xid = r->call.xid, .stat = RR_RPC_MSG_DENIED,
				   .reject_stat = rstat, .auth_stat = auth_stat,
				   .low = RR_RPC_VERSION, .high = RR_RPC_VERSION};

	set_reply(r, &rep);
}

/* True when r->res holds an MSG_ACCEPTED/SUCCESS Reply (read from its
 * bytes: an rpcgen service may have set an error reply and returned OK). */
static bool reply_is_success(const struct rpcrdma_req *r)
{
	return !r->res.error && r->res.len >= REPLY_HDR_LEN &&
	       rr_get_be32(r->res.buf + 8) == RR_RPC_MSG_ACCEPTED &&
	       rr_get_be32(r->res.buf + 20) == RR_RPC_SUCCESS;
}

/* The handler of @r (which holds an IN PROGRESS cache entry) is done and
 * its reply is in r->res (@sent: a reply goes out; @success: it is a
 * SUCCESS reply). Keeps a copy of a SUCCESS reply small enough, and answers
 * the duplicates that came meanwhile with the same bytes (or drops them
 * when there is no reply or no memory for a copy). */
static void drc_settle(struct rpcrdma_req *r, bool sent, bool success)
{
	struct rpcrdma_server *s = r->srv;
	struct rr_drc_reply *rep = NULL;
	void *waiters[RR_DRC_MAX_WAITERS];
	struct rr_xprt_msg m;
	unsigned n;
	bool kept;

	res_msg(r, &m);
	if (sent && success && rr_drc_keepable(s->drc, &m))
		rep = rr_drc_reply_copy(s->drc, &m);
	n = rr_drc_complete(s->drc, r->drc_ent, rep, success, waiters, &kept);
	r->drc_ent = NULL;
	if (n && sent && !rep)
		rep = rr_drc_reply_copy(s->drc, &m);   /* not kept; for the waiters */
	for (unsigned i = 0; i < n; i++) {
		if (rep) {
			rr_drc_reply_get(rep);
			req_replay(waiters[i], rep);
		} else {
			req_finish(waiters[i], false);
		}
	}
	if (rep && !kept)
		rr_drc_reply_put(s->drc, rep);
}

/* Turns a handler's verdict into the reply and finishes the request. */
static void req_verdict(struct rpcrdma_req *r, int stat)
{
	if (stat == RPCRDMA_SVC_DROP) {
		if (r->drc_ent)
			drc_settle(r, false, false);
		req_finish(r, false);
		return;
	}
	if (stat == RPCRDMA_SVC_OK && r->res.error)
		stat = RPCRDMA_SVC_SYSTEM_ERR; /* results did not encode */
	switch (stat) {
	case RPCRDMA_SVC_OK:
		break;
	case RPCRDMA_SVC_GARBAGE_ARGS:
		reply_accepted_none(r, RR_RPC_GARBAGE_ARGS);
		break;
	case RPCRDMA_SVC_AUTH_ERROR:
		rr_svc_reply_denied(r, RR_RPC_AUTH_ERROR,
			     r->auth_stat ? r->auth_stat : RR_RPC_AUTH_TOOWEAK);
		break;
	default:
		reply_accepted_none(r, RR_RPC_SYSTEM_ERR);
		break;
	}
	if (r->drc_ent)
		drc_settle(r, true, reply_is_success(r));
	req_finish(r, true);
}

static bool drc_cacheable(const struct rpcrdma_server *s, const struct rr_rpc_call *c)
{
	if (c->proc == 0)
		return false;
	for (unsigned i = 0; i < s->nidem; i++)
		if (s->idem[i].prog == c->prog && s->idem[i].vers == c->vers &&
		    s->idem[i].proc == c->proc)
			return false;
	return true;
}

/* The cache key of @r whose arguments start at inline offset @pos: the
 * complete XDR arguments (the inline bytes with every item the transport
 * delivered apart, e.g. an RDMA Read chunk, put back in place with its pad)
 * are summed over their first RR_DRC_SUM_BYTES bytes, so the key does not
 * depend on how the transport carried them. */
static void drc_key(struct rpcrdma_req *r, size_t pos, struct rr_drc_key *k)
{
	static const uint8_t zero[4];
	const struct rr_xprt_req *x = r->xreq;
	struct sockaddr_storage ss;
	size_t len = 0, left = RR_DRC_SUM_BYTES, at = pos;
	uint64_t h = RR_DRC_SUM_INIT;

	memset(k, 0, sizeof(*k));
	k->xid = r->call.xid;
	k->prog = r->call.prog;
	k->vers = r->call.vers;
	k->proc = r->call.proc;
	for (unsigned i = 0; i <= x->n_ext; i++) {
		size_t end = i < x->n_ext ? x->ext[i].inline_off : x->len;
		size_t n;

		if (end < at || end > x->len)
			end = at;   /* not in order: sum what is inline */
		n = end - at;
		h = rr_drc_sum(h, x->msg + at, RR_MIN(n, left));
		left -= RR_MIN(n, left);
		len += n;
		at = end;
		if (i < x->n_ext) {
			size_t d = x->ext[i].len, pad = RR_ALIGN4(d) - d;

			h = rr_drc_sum(h, x->ext[i].ptr, RR_MIN(d, left));
			left -= RR_MIN(d, left);
			h = rr_drc_sum(h, zero, RR_MIN(pad, left));
			left -= RR_MIN(pad, left);
			len += d + pad;
		}
	}
	k->arg_len = (uint32_t)len;
	k->arg_sum = h;
	memset(&ss, 0, sizeof(ss));
	if (rr_rpc_req_ctl(r, RR_CTL_PEER_ADDR, &ss) == 0) {
		const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;

		if (ss.ss_family == AF_INET) {
			k->family = 4;
			memcpy(k->addr, &((const struct sockaddr_in *)&ss)->sin_addr, 4);
		} else if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
			k->family = 4;   /* the same host as over IPv4 */
			memcpy(k->addr, &a6->sin6_addr.s6_addr[12], 4);
		} else if (ss.ss_family == AF_INET6) {
			k->family = 6;
			memcpy(k->addr, &a6->sin6_addr, 16);
		}
	}
}

/* Authentication (RFC 5531 section 9 reject_stat AUTH_ERROR): AUTH_NONE,
 * or AUTH_SYS whose body decodes (kept in r->sys); any other flavor, a bad
 * body or a verifier that is not AUTH_NONE sets the AUTH_ERROR Reply and
 * returns false. */
static bool req_auth(struct rpcrdma_req *r)
{
	switch (r->call.cred.flavor) {
	case RR_RPC_AUTH_NONE:
		break;
	case RR_RPC_AUTH_SYS: {
		struct rr_rpc_authsys w;

		if (rr_rpcmsg_decode_authsys(r->call.cred.body, r->call.cred.len, &w)) {
			rr_svc_reply_denied(r, RR_RPC_AUTH_ERROR, RR_RPC_AUTH_BADCRED);
			return false;
		}
		/* whole: a reused request holds the last one's bytes beyond
		 * the name's NUL and the groups counted (another client's) */
		memset(&r->sys, 0, sizeof(r->sys));
		r->have_sys = true;
		r->sys.stamp = w.stamp;
		memcpy(r->sys.machinename, w.machinename, w.machinename_len);
		r->sys.machinename[w.machinename_len] = '\0';
		r->sys.uid = w.uid;
		r->sys.gid = w.gid;
		r->sys.ngids = w.ngids;
		memcpy(r->sys.gids, w.gids, w.ngids * sizeof(uint32_t));
		break;
	}
	default:
		rr_svc_reply_denied(r, RR_RPC_AUTH_ERROR, RR_RPC_AUTH_BADCRED);
		return false;
	}
	if (r->call.verf.flavor != RR_RPC_AUTH_NONE || r->call.verf.len != 0) {
		rr_svc_reply_denied(r, RR_RPC_AUTH_ERROR, RR_RPC_AUTH_BADVERF);
		return false;
	}
	return true;
}

static inline __attribute__((always_inline)) void dispatch(struct rpcrdma_server *s,
							   struct rpcrdma_req *r)
{
	struct rr_xprt_req *x = r->xreq;
	struct rr_xdr_dec d;
	const struct svc_proc *match = NULL;
	bool prog_known = false, vers_known = false;
	uint32_t low = UINT32_MAX, high = 0;
	int rc;

	rr_xdr_dec_init(&d, x->msg, x->len);
	rc = rr_rpcmsg_decode_call(&d, &r->call);
	if (rc == -EPROTONOSUPPORT) {
		rr_svc_reply_denied(r, RR_RPC_RPC_MISMATCH, 0);
		req_finish(r, true);
		return;
	}
	if (rc) {
		/* Not a decodable Call (or a Reply): nothing to answer
		 * (RFC 5531 gives no reply for a message without a valid
		 * header; an xid alone is not enough to trust). */
		req_finish(r, false);
		return;
	}

	/* (AUTH_NONE and an empty AUTH_NONE verifier, req_auth's first
	 * case, without a call: it has nothing more to do for them) */
	if ((r->call.cred.flavor != RR_RPC_AUTH_NONE || r->call.verf.flavor != RR_RPC_AUTH_NONE ||
	     r->call.verf.len != 0) && !req_auth(r)) {
		req_finish(r, true);
		return;
	}

	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct svc_proc *p = &s->procs[i];

		if (p->prog != r->call.prog)
			continue;
		prog_known = true;
		low = RR_MIN(low, p->vers);
		high = RR_MAX(high, p->vers);
		if (p->vers != r->call.vers)
			continue;
		vers_known = true;
		if (p->tirpc || p->proc == r->call.proc) {
			match = p;
			if (!p->tirpc)
				break;
		}
	}
	if (!prog_known) {
		reply_accepted_none(r, RR_RPC_PROG_UNAVAIL);
		req_finish(r, true);
		return;
	}
	if (!vers_known) {
		rr_svc_reply_accepted(r, RR_RPC_PROG_MISMATCH, low, high);
		req_finish(r, true);
		return;
	}
	/* Success header in place; results follow. */
	reply_accepted_none(r, RR_RPC_SUCCESS);
	if (!match) {
		if (r->call.proc == 0) {
			req_finish(r, true); /* NULL procedure: void result */
			return;
		}
		reply_accepted_none(r, RR_RPC_PROC_UNAVAIL);
		req_finish(r, true);
		return;
	}
	/* the arguments, for the handler (not read before) */
	rr_xbuf_dec_init(&r->args, x->msg, x->len);
	r->args.x.pos = rr_xdr_dec_pos(&d);
	r->args.ext = x->ext;
	r->args.n_ext = x->n_ext;
	if (s->drc && drc_cacheable(s, &r->call)) {
		struct rr_drc_key k;
		struct rr_drc_reply *rep;

		drc_key(r, r->args.x.pos, &k);
		switch (rr_drc_lookup(s->drc, &k, r, &r->drc_ent, &rep)) {
		case RR_DRC_REPLAY:
			req_replay(r, rep);
			return;
		case RR_DRC_PARKED:
			return;   /* answered when the first Call completes */
		case RR_DRC_DROP:
			req_finish(r, false);
			return;
		case RR_DRC_RUN:
			break;
		}
	}
	if (match->tirpc) {
		rc = match->run_tirpc(r, match->tirpc);
	} else {
		rc = match->fn(r, match->ctx);
		if (rc < 0)
			rc = RPCRDMA_SVC_SYSTEM_ERR;
	}
	if (rc == RPCRDMA_SVC_DEFER)
		return;
	req_verdict(r, rc);
}

static void *worker_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rr-svc-worker");   /* for top -H, gdb */
	struct rpcrdma_server *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct rpcrdma_req *r;

		while (!s->qhead && !s->shut)
			pthread_cond_wait(&s->cv, &s->lock);
		if (!s->qhead)
			break;
		r = s->qhead;
		s->qhead = r->next;
		if (!s->qhead)
			s->qtail = NULL;
		r->next = NULL;
		pthread_mutex_unlock(&s->lock);
		dispatch(s, r);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* The test knob RPCRDMA_SERVER_SEND_TIMEOUT_MS (docs/api.md "Environment";
 * rpcrdma_server_opts has no room for it without changing the ABI): the
 * send-stall timeout of an rdma:// or verbs:// server's connections, and
 * so when quiet Replies get their probe (half of it). @v: the variable's
 * value, NULL or empty for the default (0). Decimal milliseconds,
 * RR_SVC_SEND_TIMEOUT_MIN..RR_SVC_SEND_TIMEOUT_MAX; anything else is
 * -EINVAL. */
int rr_svc_send_timeout_parse(const char *v, uint32_t *ms)
{
	uint64_t n = 0;
	const char *p = v;

	*ms = 0;
	if (!v || !*v)
		return 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || n > RR_SVC_SEND_TIMEOUT_MAX)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (n < RR_SVC_SEND_TIMEOUT_MIN || n > RR_SVC_SEND_TIMEOUT_MAX)
		return -EINVAL;
	*ms = (uint32_t)n;
	return 0;
}

int rr_svc_create_with(const struct rpcrdma_server_opts *opts, unsigned default_threads,
		       rr_svc_open_fn open, void *arg, struct rpcrdma_server **out)
{
	struct rr_xprt_server_params xp = {0};
	const struct rpcrdma_env *env = opts ? opts->env : NULL;
	struct rpcrdma_server *s;
	int rc;

	if (!out)
		return -EINVAL;
	rc = rr_svc_send_timeout_parse(getenv("RPCRDMA_SERVER_SEND_TIMEOUT_MS"),
				       &xp.send_timeout_ms);
	if (rc)
		return rc;
	s = rr_zalloc(env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->env = env;
	s->nthreads = opts && opts->threads ? opts->threads : default_threads;
	s->inline_handlers = opts && (opts->flags & RPCRDMA_SERVER_INLINE);
	s->max_msg = opts && opts->max_msg ? opts->max_msg : DEFAULT_MAX_MSG;
	if (s->max_msg > 0x7fffffffu)
		s->max_msg = 0x7fffffffu;
	if (opts && opts->drc_entries) {
		struct rr_drc_conf dc = {
			.env = env,
			.max_entries = opts->drc_entries,
			.max_reply = opts->drc_max_reply ? opts->drc_max_reply
							 : DEFAULT_DRC_MAX_REPLY,
			.ttl_ns = (uint64_t)(opts->drc_ttl_ms ? opts->drc_ttl_ms
							      : DEFAULT_DRC_TTL_MS) * 1000000u,
		};

		rc = rr_drc_create(&dc, &s->drc);
		if (rc) {
			rr_free(env, s);
			return rc;
		}
	}
	/* idle_cv: waited on with a deadline (rpcrdma_server_shutdown), on
	 * CLOCK_MONOTONIC as every deadline of the library */
	rc = rr_engine_cond_init(&s->idle_cv);
	if (rc) {
		rr_drc_destroy(s->drc);
		rr_free(env, s);
		return rc;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cv, NULL);
	xp.env = env;
	xp.max_msg = s->max_msg;
	xp.max_conns = opts && opts->max_conns ? opts->max_conns : DEFAULT_MAX_CONNS;
	xp.max_conns_per_host = opts && opts->max_conns_per_host ? opts->max_conns_per_host
								 : DEFAULT_MAX_CONNS_PER_HOST;
	if (xp.max_conns_per_host == UINT_MAX)
		xp.max_conns_per_host = 0;   /* no limit */
	xp.max_handshakes = opts && opts->max_handshakes ? opts->max_handshakes
							 : DEFAULT_MAX_HANDSHAKES;
	xp.no_defer_accept = opts && (opts->flags & RPCRDMA_SERVER_NO_DEFER_ACCEPT);
	xp.idle_timeout_ms = opts && opts->idle_timeout_ms ? opts->idle_timeout_ms
							   : DEFAULT_IDLE_TIMEOUT_MS;
	if (xp.idle_timeout_ms == UINT32_MAX)
		xp.idle_timeout_ms = 0;      /* never */
	xp.threads = s->nthreads;
	xp.inline_size = opts ? opts->inline_size : 0;
	xp.spin_us = opts ? opts->spin_us : 0;
	xp.reply_mem_per_conn = opts ? opts->reply_mem_per_conn : 0;
	xp.reply_mem_total = opts ? opts->reply_mem_total : 0;
	xp.rrep_timeout_ms = opts ? opts->rrep_timeout_ms : 0;
	xp.credits = opts ? opts->credits : 0;
	xp.recv = svc_recv;
	xp.ctx = s;
	rc = open(arg, &xp, &s->ops, &s->xs);
	s->all_here = !rc && (s->ops->inline_recv || s->inline_handlers);
	if (rc) {
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cv);
		pthread_cond_destroy(&s->idle_cv);
		rr_drc_destroy(s->drc);
		rr_free(env, s);
		return rc;
	}
	*out = s;
	return 0;
}

/* Listens on a URL (rr_svc_open_fn). */
static int open_url(void *arg, const struct rr_xprt_server_params *p,
		    const struct rr_xprt_server_ops **ops, struct rr_xprt_server **xs)
{
	struct rr_xprt_target t;
	const struct rr_xprt_class *cls;
	int rc = rr_xprt_resolve(arg, true, &t, &cls);

	if (rc)
		return rc;
	*ops = cls->server;
	return cls->server->create(&t, p, xs);
}

RPCRDMA_API int rpcrdma_server_create(const char *url, const struct rpcrdma_server_opts *opts,
				      struct rpcrdma_server **out)
{
	struct rr_xprt_target t;
	const struct rr_xprt_class *cls;
	int rc;

	if (!out)
		return -EINVAL;
	rc = rr_xprt_resolve(url, true, &t, &cls);   /* before any allocation */
	if (rc)
		return rc;
	return rr_svc_create_with(opts, DEFAULT_THREADS, open_url, (void *)(uintptr_t)url, out);
}

int rr_svc_req_bc_client(struct rpcrdma_req *r, const struct rr_xprt_client_params *p,
			 const struct rr_xprt_client_ops **ops, struct rr_xprt_client **x)
{
	if (!r || !r->xreq)
		return -EINVAL;
	if (!r->srv->ops->bc_client)
		return -EOPNOTSUPP;
	return r->srv->ops->bc_client(r->srv->xs, r->xreq, p, ops, x);
}

static int add_proc(struct rpcrdma_server *s, const struct svc_proc *p)
{
	if (s->started)
		return -EBUSY;
	for (unsigned i = 0; i < s->nprocs; i++) {
		struct svc_proc *q = &s->procs[i];

		if (q->prog == p->prog && q->vers == p->vers &&
		    (q->tirpc || p->tirpc || q->proc == p->proc))
			return -EEXIST;
	}
	if (s->nprocs == s->procs_cap) {
		unsigned ncap = s->procs_cap ? s->procs_cap * 2 : 16;
		struct svc_proc *np = rr_alloc(s->env, ncap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		if (s->nprocs)
			memcpy(np, s->procs, s->nprocs * sizeof(*np));
		rr_free(s->env, s->procs);
		s->procs = np;
		s->procs_cap = ncap;
	}
	s->procs[s->nprocs++] = *p;
	return 0;
}

RPCRDMA_API int rpcrdma_server_register(struct rpcrdma_server *s, uint32_t prog,
					uint32_t vers, uint32_t proc,
					rpcrdma_handler_fn fn, void *ctx)
{
	struct svc_proc p = {.prog = prog, .vers = vers, .proc = proc, .fn = fn, .ctx = ctx};

	if (!s || !fn)
		return -EINVAL;
	return add_proc(s, &p);
}

int rr_svc_add_program(struct rpcrdma_server *s, uint32_t prog, uint32_t vers,
		       rr_svc_program_fn run, rpcrdma_svc_dispatch_fn fn)
{
	struct svc_proc p = {.prog = prog, .vers = vers, .tirpc = fn, .run_tirpc = run};

	return add_proc(s, &p);
}

RPCRDMA_API int rpcrdma_server_set_idempotent(struct rpcrdma_server *s, uint32_t prog,
					      uint32_t vers, uint32_t proc)
{
	if (!s)
		return -EINVAL;
	if (s->started)
		return -EBUSY;
	for (unsigned i = 0; i < s->nidem; i++)
		if (s->idem[i].prog == prog && s->idem[i].vers == vers && s->idem[i].proc == proc)
			return 0;
	if (s->nidem == s->idem_cap) {
		unsigned ncap = s->idem_cap ? s->idem_cap * 2 : 8;
		struct svc_idem *n = rr_alloc(s->env, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		if (s->nidem)
			memcpy(n, s->idem, s->nidem * sizeof(*n));
		rr_free(s->env, s->idem);
		s->idem = n;
		s->idem_cap = ncap;
	}
	s->idem[s->nidem++] = (struct svc_idem){prog, vers, proc};
	return 0;
}

RPCRDMA_API int rpcrdma_server_drc_stats(struct rpcrdma_server *s, struct rpcrdma_drc_stats *st)
{
	struct rr_drc_counters c;

	if (!s || !st)
		return -EINVAL;
	if (!s->drc)
		return -EOPNOTSUPP;
	rr_drc_counters(s->drc, &c);
	memset(st, 0, sizeof(*st));
	st->hits = c.hits;
	st->drops_in_progress = c.drops_in_progress;
	st->insertions = c.insertions;
	st->evictions = c.evictions;
	st->expirations = c.expirations;
	st->not_cached = c.not_cached;
	st->entries = c.entries;
	return 0;
}

RPCRDMA_API int rpcrdma_server_start(struct rpcrdma_server *s)
{
	int rc;

	if (!s)
		return -EINVAL;
	if (s->started)
		return -EBUSY;
	s->threads = rr_zalloc(s->env, s->nthreads * sizeof(pthread_t));
	if (!s->threads)
		return -ENOMEM;
	/* Inline transports run requests on their own threads, inline
	 * handlers run on the transport's progress loops: no workers. */
	s->nworkers = s->ops->inline_recv || s->inline_handlers ? 0 : s->nthreads;
	for (unsigned i = 0; i < s->nworkers; i++) {
		rc = pthread_create(&s->threads[i], NULL, worker_main, s);
		if (rc) {
			pthread_mutex_lock(&s->lock);
			s->shut = true;
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->lock);
			for (unsigned j = 0; j < i; j++)
				pthread_join(s->threads[j], NULL);
			rr_free(s->env, s->threads);
			s->threads = NULL;
			s->shut = false;
			return -rc;
		}
	}
	s->started = true;
	rc = s->ops->start(s->xs);
	if (rc) {
		rpcrdma_server_shutdown(s);
		return rc;
	}
	return 0;
}

RPCRDMA_API int rpcrdma_server_port(const struct rpcrdma_server *s)
{
	return s->ops->port(s->xs);
}

RPCRDMA_API void rpcrdma_server_shutdown(struct rpcrdma_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	s->ops->stop(s->xs);
	/* Finish what was delivered (queued, running and deferred). A
	 * request that ended without seeing stopping gave no wake-up: look
	 * again every 10 ms. */
	pthread_mutex_lock(&s->lock);
	while (atomic_load(&s->inflight)) {
		struct timespec ts;

		rr_engine_deadline(&ts, 10);
		(void)rr_engine_wait(&s->idle_cv, &s->lock, &ts);
	}
	s->shut = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	if (s->threads) {
		for (unsigned i = 0; i < s->nworkers; i++)
			pthread_join(s->threads[i], NULL);
		rr_free(s->env, s->threads);
		s->threads = NULL;
	}
}

RPCRDMA_API void rpcrdma_server_destroy(struct rpcrdma_server *s)
{
	if (!s)
		return;
	rpcrdma_server_shutdown(s);
	s->ops->destroy(s->xs);
	for (struct rpcrdma_req *r; (r = rr_spare_take(&s->spare));) {
		rr_xbuf_enc_free(&r->res);
		rr_free(s->env, r);
	}
	rr_drc_destroy(s->drc);
	rr_free(s->env, s->idem);
	rr_free(s->env, s->procs);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->idle_cv);
	rr_free(s->env, s);
}

RPCRDMA_API struct rpcrdma_xdr_dec *rpcrdma_req_args(struct rpcrdma_req *r)
{
	return &r->args;
}

RPCRDMA_API struct rpcrdma_xdr_enc *rpcrdma_req_results(struct rpcrdma_req *r)
{
	return &r->res;
}

RPCRDMA_API uint32_t rpcrdma_req_xid(const struct rpcrdma_req *r)
{
	return r->call.xid;
}

RPCRDMA_API uint32_t rpcrdma_req_prog(const struct rpcrdma_req *r)
{
	return r->call.prog;
}

RPCRDMA_API uint32_t rpcrdma_req_vers(const struct rpcrdma_req *r)
{
	return r->call.vers;
}

RPCRDMA_API uint32_t rpcrdma_req_proc(const struct rpcrdma_req *r)
{
	return r->call.proc;
}

RPCRDMA_API uint32_t rpcrdma_req_cred_flavor(const struct rpcrdma_req *r)
{
	return r->call.cred.flavor;
}

RPCRDMA_API const struct rpcrdma_auth_sys *rpcrdma_req_auth_sys(const struct rpcrdma_req *r)
{
	return r->have_sys ? &r->sys : NULL;
}

RPCRDMA_API void rpcrdma_req_set_auth_error(struct rpcrdma_req *r, uint32_t auth_stat)
{
	r->auth_stat = auth_stat;
}

RPCRDMA_API void rpcrdma_req_set_release(struct rpcrdma_req *r, void (*fn)(void *), void *arg)
{
	r->release = fn;
	r->release_arg = arg;
}

RPCRDMA_API void rpcrdma_req_complete(struct rpcrdma_req *r, int stat)
{
	if (!r)
		return;
	if (stat < 0 || stat == RPCRDMA_SVC_DEFER)
		stat = RPCRDMA_SVC_SYSTEM_ERR;
	req_verdict(r, stat);
}

const struct rr_rpc_call *rr_svc_req_call(const struct rpcrdma_req *r)
{
	return &r->call;
}

/* Transport controls (transport/xprt_ctl.h): counters and push mode. */
int rr_rpc_server_ctl(struct rpcrdma_server *s, unsigned op, void *arg)
{
	if (!s)
		return -EINVAL;
	if (!s->ops->ctl)
		return -EOPNOTSUPP;
	return s->ops->ctl(s->xs, NULL, op, arg);
}

int rr_rpc_req_ctl(struct rpcrdma_req *r, unsigned op, void *arg)
{
	if (!r || !r->xreq)
		return -EINVAL;
	if (!r->srv->ops->ctl)
		return -EOPNOTSUPP;
	return r->srv->ops->ctl(r->srv->xs, r->xreq, op, arg);
}
