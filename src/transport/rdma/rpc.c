/* SPDX-License-Identifier: BSD-2-Clause */
/* The "rdma" URL scheme of the RPC layer (src/rpc/xprt.h contract): adapts
 * the RPC-over-RDMA v1 driver (transport/rdma/tp.h, RFC 8166 with RFC 8797
 * negotiation) to the RPC client and server. A Call's DDP-eligible items
 * (struct rr_rpc_ddp) become the driver's DDP-eligible parts (Read chunks when
 * the Call does not fit inline, RFC 8166 section 3.4.3), its result sinks
 * become Write chunks, and reply_hint (or max_msg) sizes the Reply chunk. On
 * the server side the Call is handed over rebuilt and contiguous (n_ext = 0)
 * and the Reply's items fill the requester's Write chunks. The RPC layer's
 * built-in table registers rr_xprt_rdma_class and rr_xprt_verbs_class
 * (src/rpc/xprt.c), so rdma://host:port and verbs://host:port work with
 * static and shared links. rdma:// uses the "soft" provider (user-space
 * iWARP over TCP); verbs:// the "verbs" provider (rdma-core, with the device
 * that owns the listen address or routes to the peer): -ENODEV when the host
 * has no usable RDMA device, -EPROTONOSUPPORT when the library was built
 * without rdma-core. Registrations follow the provider's capabilities
 * (transport/rdma/tp.h: windows and remote invalidation where offered, per-RPC
 * memory registration otherwise, e.g. on siw). */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>

#include "engine/engine.h"
#include "proto/conn/credits.h"
#include "proto/conn/privdata.h"
#include "transport/rdma/ext.h"
#include "transport/rdma/tp.h"
#include "transport/xprt.h"

struct rr_xprt_client {
	/* what a Call reads (cl_wrap, cl_start, cl_complete, cl_release), in
	 * one line of 64 bytes: p.complete, p.ctx and p.max_msg copied (they
	 * were in a line of p's, beside the spares' line; at 100 connections
	 * every line of a client is cold at its next Call: part CS) */
	struct rr_tp_client *tp;
	void (*complete)(void *ctx, struct rr_xprt_call *call);   /* p.complete */
	void *ctx;                    /* p.ctx */
	uint32_t max_reply;           /* p.max_msg, at most UINT32_MAX / 2: a
					 Call's max_reply without a hint */
	struct rr_xprt_client_params p;
	struct rdma_bc_srv *bc;       /* its callback server (bc_serve) */
	/* a callback client (bc_client) instead: on @srv's connection @bc_tp */
	struct rr_tp_server *srv;
	struct rr_tp_bc *bc_tp;
};
_Static_assert(offsetof(struct rr_xprt_client, p) <= 64,
	       "struct rr_xprt_client's per-call fields in one line");

/* @x's parameters, and the copies a Call reads. */
static void cl_params_set(struct rr_xprt_client *x, const struct rr_xprt_client_params *p)
{
	x->p = *p;
	x->complete = p->complete;
	x->ctx = p->ctx;
	x->max_reply = (uint32_t)RR_MIN(p->max_msg, (size_t)UINT32_MAX / 2);
}

/* A Call as the session sees it: in its call's transport-private storage
 * (rr_xprt_call.xp_area), from submit to release_reply (issue 16 part EC;
 * it was an object of the client's, taken from its spares per Call, cold at
 * 100 connections). A client's Call (cl_*) is marked in xp_flags
 * (CL_SUBMITTED) from its submit while the session may hold it; xp_priv is
 * left NULL, so that a Call whose Reply needs no release (the session's own
 * copy, released at the completion: cl_complete) costs the RPC layer no
 * release_reply (rpc/clnt.c call_free). A callback client's (bc_*) keeps
 * xp_priv pointing at it. */
#define CL_SUBMITTED 1u
struct rpc_wrap {
	struct rr_conn_rpc rpc;
	struct rr_xprt_part parts[2 * RR_RPC_MAX_DDP + 1];
	struct rr_xprt_sink sinks[RR_XPRT_MAX_ITEMS];
};
_Static_assert(sizeof(struct rpc_wrap) <= RR_XPRT_CALL_AREA &&
		       _Alignof(struct rpc_wrap) <= 16,
	       "a Call's wrapper fits its call's transport area");

/* The wrapper in @call's storage, and the call of a wrapper. */
static struct rpc_wrap *wrap_of(struct rr_xprt_call *call)
{
	return (struct rpc_wrap *)(void *)call->xp_area;
}

static struct rr_xprt_call *wrap_call(struct rpc_wrap *w)
{
	return RR_CONTAINER_OF(w, struct rr_xprt_call, xp_area);
}

/* The backchannel (transport/xprt.h section 4, RFC 8167): the callback
 * server of a client (bc_serve) and the callback clients of a server
 * (bc_client), below. */
struct rdma_bc_srv;

static int resolve(const struct rr_xprt_target *t, bool passive,
		   struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints, *res = NULL;
	const char *host = t->host[0] ? t->host : NULL;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (passive)
		hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host, t->port[0] ? t->port : "20049", &hints, &res);
	if (rc || !res)
		return -EHOSTUNREACH;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* The XDR stream of @m as driver parts: inline pieces split at each item. */
static unsigned msg_parts(const struct rr_xprt_msg *m, struct rr_xprt_part *parts)
{
	unsigned n = 0;
	size_t off = 0;

	for (unsigned i = 0; i < m->nddp; i++) {
		const struct rr_rpc_ddp *d = &m->ddp[i];

		parts[n++] = (struct rr_xprt_part){m->head + off,
						   (uint32_t)(d->inline_off - off), false};
		parts[n++] = (struct rr_xprt_part){d->ptr, d->len, true};
		off = d->inline_off;
	}
	parts[n++] = (struct rr_xprt_part){m->head + off, (uint32_t)(m->head_len - off), false};
	return n;
}

/* rr_tp_client_abort_asked's: the RPC layer's abort request of the
 * Call (xprt.h abort_req). */
static int cl_abort_req(struct rr_conn_rpc *rpc)
{
	struct rpc_wrap *w = RR_CONTAINER_OF(rpc, struct rpc_wrap, rpc);

	return atomic_load_explicit(&wrap_call(w)->abort_req, memory_order_acquire);
}

static void cl_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct rr_xprt_client *x = ctx;
	struct rr_xprt_call *call = wrap_call(RR_CONTAINER_OF(rpc, struct rpc_wrap, rpc));

	call->status = rpc->status;
	call->reply = rpc->reply;
	call->reply_len = rpc->reply_len;
	/* A Reply the session copied into @rpc (a short one, nothing lent) is
	 * released now (it touches @rpc alone; the bytes stay in the call's
	 * object until the call is made anew): no handle, no release_reply
	 * for it (rpc/clnt.c call_free tests reply_buf and xp_priv). */
	call->reply_buf = rr_conn_release_own(rpc) ? NULL : rpc->reply;
	call->reply_via_read = rpc->via_read;
	for (unsigned i = 0; i < call->nsinks && i < RR_RPC_MAX_DDP; i++)
		call->placed[i] = i < RR_XPRT_MAX_ITEMS && rpc->is_placed[i] ?
					  rpc->placed[i] : RR_RPC_NOT_PLACED;
	x->complete(x->ctx, call);
}

/* The transport's answer for a provider that is not built in (-ENOENT from
 * rpcrdma_open): the scheme is known but unsupported. */
static int provider_rc(int rc)
{
	return rc == -ENOENT ? -EPROTONOSUPPORT : rc;
}

static int cl_create_on(const char *provider, const struct rr_xprt_target *t,
			const struct rr_xprt_client_params *p, struct rr_xprt_client **out)
{
	const struct rpcrdma_env *env = rr_env(p->env);
	struct rr_xprt_client *x;
	struct sockaddr_storage ss;
	struct rr_tp_conf conf;
	socklen_t len;
	int rc;

	rc = resolve(t, false, &ss, &len);
	if (rc)
		return rc;
	x = rr_zalloc(env, sizeof(*x));
	if (!x)
		return -ENOMEM;
	cl_params_set(x, p);
	rr_tp_conf_default(&conf);
	conf.env = p->env;
	conf.loop = p->loop;   /* the RPC client's: one loop serves both */
	conf.provider = provider;
	if (p->connect_timeout_ms)
		conf.connect_timeout_ms = p->connect_timeout_ms;
	conf.no_reconnect = p->no_reconnect;
	conf.inline_ddp = !p->no_inline_ddp;
	/* 0: the provider's default (rdma/tp.h RR_TP_INLINE_SOFT on rdma://) */
	conf.inline_send = conf.inline_recv = p->inline_size;
	conf.spin_us = p->spin_us;
	conf.ext_caps |= RR_PD_EXT_CAP_RDMA_COMMIT;   /* push mode (masked if unsupported) */
	conf.bc_slots = p->bc_slots;                  /* backward credits granted */
	rc = rr_tp_client_create(&conf, (struct sockaddr *)&ss, len, cl_complete, x, &x->tp);
	if (rc) {
		rr_free(env, x);
		return provider_rc(rc);
	}
	rr_tp_client_abort_asked(x->tp, cl_abort_req);
	*out = x;
	return 0;
}

static int cl_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
		     struct rr_xprt_client **out)
{
	return cl_create_on(RPCRDMA_PROVIDER_SOFT, t, p, out);
}

static int cl_create_verbs(const struct rr_xprt_target *t,
			   const struct rr_xprt_client_params *p, struct rr_xprt_client **out)
{
	return cl_create_on(RPCRDMA_PROVIDER_VERBS, t, p, out);
}

/* The wrapper of @call, filled for the transport. */
static struct rpc_wrap *cl_wrap(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct rpc_wrap *w = wrap_of(call);

	/* Only the first nparts parts and nsinks sinks are read, and they
	 * are written here. Not cleared whole (~190 bytes, a string store per word): the
	 * inputs are written here, the outputs and `lent` by rr_conn_submit
	 * before the session reads them, xdone and xnext by the submit; the
	 * rest (xbc, a server's) is never read for a Call. */
	w->rpc.user = NULL;
	w->rpc.priv = NULL;
	w->rpc.lent = NULL;
	w->rpc.xid = call->xid;
	w->rpc.nparts = msg_parts(&call->msg, w->parts);
	w->rpc.parts = w->parts;
	for (unsigned i = 0; i < call->nsinks; i++) {
		w->sinks[i].base = call->sinks[i].buf;
		w->sinks[i].len = (uint32_t)RR_MIN(call->sinks[i].max, UINT32_MAX / 2);
	}
	w->rpc.sinks = w->sinks;
	w->rpc.nsinks = call->nsinks;
	w->rpc.max_reply = call->reply_hint ?
				   (uint32_t)RR_MIN(call->reply_hint, (size_t)UINT32_MAX / 2) :
				   x->max_reply;
	w->rpc.caller_waits = call->caller_waits;
	/* Reliable reply policy inputs (draft 5.3.1, proto/rrep.h). */
	w->rpc.max_unknown = call->reply_hint == 0;
	w->rpc.min_reply = (uint32_t)RR_MIN(call->reply_min, (size_t)UINT32_MAX / 2);
	return w;
}

typedef void (*submit_hook_fn)(void);
static _Atomic submit_hook_fn g_submit_hook;   /* rr_xprt_rdma_test_set_submit_hook */

void rr_xprt_rdma_test_set_submit_hook(void (*fn)(void))
{
	atomic_store_explicit(&g_submit_hook, fn, memory_order_release);
}

/* cl_submit (@wait_ms < 0) or cl_submit_wait. */
static int cl_start(struct rr_xprt_client *x, struct rr_xprt_call *call, int64_t wait_ms)
{
	struct rpc_wrap *w;
	int rc;

	if (call->msg.nddp > RR_RPC_MAX_DDP || call->nsinks > RR_XPRT_MAX_ITEMS)
		return -EINVAL;
	w = cl_wrap(x, call);
	call->xp_flags = CL_SUBMITTED;
	submit_hook_fn hook = atomic_load_explicit(&g_submit_hook, memory_order_acquire);
	if (RR_UNLIKELY(hook != NULL))
		hook();
	rc = wait_ms < 0 ? rr_tp_client_submit(x->tp, &w->rpc)
			 : rr_tp_client_submit_wait(x->tp, &w->rpc, (uint32_t)wait_ms);
	if (rc)
		call->xp_flags = 0;
	return rc;
}

static int cl_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	return cl_start(x, call, -1);
}

static int cl_submit_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	return cl_start(x, call, timeout_ms);
}

static void cl_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	if (call->xp_flags & CL_SUBMITTED)
		rr_tp_client_abort(x->tp, &wrap_of(call)->rpc, status);
}

static void cl_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	if (call->xp_flags & CL_SUBMITTED)
		rr_tp_client_wait(x->tp, &wrap_of(call)->rpc, timeout_ms);
}

static void cl_release(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	if (!(call->xp_flags & CL_SUBMITTED))
		return;
	/* the call's fields first: the release is then the last thing done
	 * (a tail call, no frame kept around it) */
	call->reply = NULL;
	call->reply_buf = NULL;
	call->reply_len = 0;
	call->xp_flags = 0;
	rr_tp_client_release_reply(x->tp, &wrap_of(call)->rpc);
}

static int cl_reliable_reply(struct rr_xprt_client *x)
{
	return rr_tp_client_reliable_reply(x->tp);
}

static void cl_destroy(struct rr_xprt_client *x)
{
	rr_tp_client_destroy(x->tp);
	rr_free(rr_env(x->p.env), x);
}

/* ---- server ---- */

/* The RPC layer's request of a received Call: in the Call's own request
 * (its executor area, rr_conn_sreq.xreq), not an object of its own taken
 * and put per Call (issue 16 part DH; it was a spare of the server's,
 * cleared per Call). It lives as long as the Call's request: until
 * rr_tp_server_done, or a Reply that finished it (sv_send_reply_done 0),
 * which is when the RPC layer is done with it (transport/xprt.h). */
struct sreq_wrap {
	struct rr_xprt_req xr;       /* xp_priv: the Call's rr_conn_sreq */
};
_Static_assert(sizeof(struct sreq_wrap) <= sizeof(((struct rr_conn_sreq *)0)->xreq),
	       "a Call's RPC request fits its executor area");

struct rr_xprt_server {
	struct rr_tp_server *tp;
	struct rr_xprt_server_params p;
	pthread_mutex_t lock;     /* held; started and stopped written */
	atomic_bool started, stopped;   /* read without the lock once started */
	/* received before start, linked by xnext (no upcall queue has
	 * them: delivered, not answered) */
	struct rr_conn_sreq *held;
};

static void sv_recv(void *ctx, struct rr_conn_sreq *sreq)
{
	struct rr_xprt_server *s = ctx;
	struct sreq_wrap *w = (struct sreq_wrap *)(void *)sreq->xreq;
	bool deliver;

	w->xr.msg = sreq->msg;
	w->xr.len = sreq->len;
	w->xr.ext = NULL;
	w->xr.n_ext = 0;
	w->xr.xp_priv = sreq;
	/* started (never undone) and not stopped: delivered without the
	 * lock, which orders nothing more here (a stop right after the look
	 * is the same race as one right after the unlock) */
	if (atomic_load_explicit(&s->started, memory_order_acquire) &&
	    !atomic_load_explicit(&s->stopped, memory_order_relaxed)) {
		s->p.recv(s->p.ctx, &w->xr);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (s->stopped) {
		pthread_mutex_unlock(&s->lock);
		rr_tp_server_done(s->tp, sreq);
		return;
	}
	deliver = s->started;
	if (!deliver) {
		sreq->xnext = s->held;
		s->held = sreq;
	}
	pthread_mutex_unlock(&s->lock);
	if (deliver)
		s->p.recv(s->p.ctx, &w->xr);
}

static int sv_create_on(const char *provider, const struct rr_xprt_target *t,
			const struct rr_xprt_server_params *p, struct rr_xprt_server **out)
{
	const struct rpcrdma_env *env = rr_env(p->env);
	struct rr_xprt_server *s;
	struct sockaddr_storage ss;
	struct rr_tp_conf conf;
	socklen_t len;
	int rc;

	rc = resolve(t, true, &ss, &len);
	if (rc)
		return rc;
	s = rr_zalloc(env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	pthread_mutex_init(&s->lock, NULL);
	rr_tp_conf_default(&conf);
	conf.env = p->env;
	conf.provider = provider;
	conf.credits = RR_CRED_GRANT_DEFAULT;
	if (p->credits) {
		/* a fixed grant: own Receives, as Linux svcrdma */
		conf.credits = RR_MIN(p->credits, 65535u);
		conf.no_srq = true;
	}
	if (p->max_msg)
		conf.max_call = (uint32_t)RR_MIN(p->max_msg, (size_t)UINT32_MAX / 2);
	conf.max_conns = p->max_conns;
	if (p->reply_mem_per_conn)
		conf.reply_mem_per_conn = p->reply_mem_per_conn;
	if (p->reply_mem_total)
		conf.reply_mem_total = p->reply_mem_total;
	if (p->rrep_timeout_ms)
		conf.rrep_timeout_ms = p->rrep_timeout_ms;
	if (p->send_timeout_ms)
		conf.send_timeout_ms = p->send_timeout_ms;
	conf.max_conns_per_host = p->max_conns_per_host;
	conf.max_handshakes = p->max_handshakes;
	conf.no_defer_accept = p->no_defer_accept;
	conf.idle_timeout_ms = p->idle_timeout_ms;
	conf.inline_send = conf.inline_recv = p->inline_size;
	conf.spin_us = p->spin_us;
	conf.ext_caps |= RR_PD_EXT_CAP_RDMA_COMMIT;   /* push mode (masked if unsupported) */
	conf.bc_slots = RR_TP_BC_SLOTS;               /* callbacks (bc_client) */
	rc = rr_tp_server_create(&conf, (struct sockaddr *)&ss, len, sv_recv, s, &s->tp);
	if (rc) {
		pthread_mutex_destroy(&s->lock);
		rr_free(env, s);
		return provider_rc(rc);
	}
	*out = s;
	return 0;
}

static int sv_create(const struct rr_xprt_target *t, const struct rr_xprt_server_params *p,
		     struct rr_xprt_server **out)
{
	return sv_create_on(RPCRDMA_PROVIDER_SOFT, t, p, out);
}

static int sv_create_verbs(const struct rr_xprt_target *t,
			   const struct rr_xprt_server_params *p, struct rr_xprt_server **out)
{
	return sv_create_on(RPCRDMA_PROVIDER_VERBS, t, p, out);
}

static int sv_port(const struct rr_xprt_server *s)
{
	return rr_tp_server_port(s->tp);
}

static int sv_start(struct rr_xprt_server *s)
{
	struct rr_conn_sreq *held;

	pthread_mutex_lock(&s->lock);
	s->started = true;
	held = s->held;
	s->held = NULL;
	pthread_mutex_unlock(&s->lock);
	while (held) {
		struct rr_conn_sreq *r = held;

		held = r->xnext;
		r->xnext = NULL;
		s->p.recv(s->p.ctx, &((struct sreq_wrap *)(void *)r->xreq)->xr);
	}
	return 0;
}

/* Replies through the transport: synchronous without @sent, else posted
 * and finished by @sent(@arg, status) on the Send's completion. */
static int sv_reply(struct rr_xprt_server *s, struct rr_xprt_req *req,
		    const struct rr_xprt_msg *msg, void (*sent)(void *arg, int status), void *arg)
{
	struct rr_conn_sreq *sreq = (struct rr_conn_sreq *)req->xp_priv;
	struct rr_xprt_part parts[2 * RR_RPC_MAX_DDP + 1];
	unsigned n;

	if (msg->nddp > RR_RPC_MAX_DDP)
		return -EINVAL;
	n = msg_parts(msg, parts);
	if (!sent)
		return rr_tp_server_reply(s->tp, sreq, parts, n, NULL);
	return rr_tp_server_reply_async(s->tp, sreq, parts, n, NULL, sent, arg);
}

static int sv_send_reply(struct rr_xprt_server *s, struct rr_xprt_req *req,
			 const struct rr_xprt_msg *msg)
{
	return sv_reply(s, req, msg, NULL, NULL);
}

static int sv_send_reply_async(struct rr_xprt_server *s, struct rr_xprt_req *req,
			       const struct rr_xprt_msg *msg, void (*sent)(void *arg, int status),
			       void *arg)
{
	return sent ? sv_reply(s, req, msg, sent, arg) : -EINVAL;
}

/* sv_send_reply_async, and a Reply that left nothing referenced (0)
 * finishes @req too (every NULL Call's: its own function, no flags to
 * look at on the way). */
static int sv_send_reply_done(struct rr_xprt_server *s, struct rr_xprt_req *req,
			      const struct rr_xprt_msg *msg, void (*sent)(void *arg, int status),
			      void *arg)
{
	struct rr_xprt_part parts[2 * RR_RPC_MAX_DDP + 1];

	if (!sent || msg->nddp > RR_RPC_MAX_DDP)
		return -EINVAL;
	/* 0: @req (in the Call's request) is gone with it, as sv_req_done */
	return rr_tp_server_reply_done(s->tp, (struct rr_conn_sreq *)req->xp_priv, parts,
				       msg_parts(msg, parts), sent, arg);
}

static void sv_req_done(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	rr_tp_server_done(s->tp, (struct rr_conn_sreq *)req->xp_priv);   /* @req with it */
}

static void sv_req_refuse(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	rr_tp_server_refuse(s->tp, (struct rr_conn_sreq *)req->xp_priv);
}

static void sv_stop(struct rr_xprt_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->stopped = true;
	pthread_mutex_unlock(&s->lock);
	rr_tp_server_stop(s->tp);   /* new connections refused, as TCP */
}

static void sv_destroy(struct rr_xprt_server *s)
{
	const struct rpcrdma_env *env = rr_env(s->p.env);

	sv_stop(s);
	/* the Calls held since before a start go with their requests */
	s->held = NULL;
	rr_tp_server_destroy(s->tp);
	pthread_mutex_destroy(&s->lock);
	rr_free(env, s);
}

/* ---- the callback server of a client (transport/xprt.h section 4) ---- */

struct rdma_bc_srv {
	struct rr_xprt_client *x;
	struct rr_xprt_server_params p;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, stopped;
	unsigned inflight;           /* delivered to the RPC layer, not done */
};

struct bc_req_wrap {
	struct rr_xprt_req xr;
	struct rr_conn_sreq *sreq;
};

/* A reverse Call, from the transport (no lock held): to the RPC layer,
 * or back at once once stopped. */
static void bc_recv(void *ctx, struct rr_conn_sreq *sreq)
{
	struct rdma_bc_srv *bc = ctx;
	struct bc_req_wrap *w = rr_zalloc(rr_env(bc->p.env), sizeof(*w));
	bool deliver;

	pthread_mutex_lock(&bc->lock);
	deliver = w && bc->started && !bc->stopped;
	if (deliver)
		bc->inflight++;
	pthread_mutex_unlock(&bc->lock);
	if (!deliver) {
		rr_free(rr_env(bc->p.env), w);
		rr_tp_client_bc_done(bc->x->tp, sreq);
		return;
	}
	w->sreq = sreq;
	w->xr.msg = sreq->msg;
	w->xr.len = sreq->len;
	w->xr.xp_priv = w;
	bc->p.recv(bc->p.ctx, &w->xr);
}

static int bc_port(const struct rr_xprt_server *s)
{
	(void)s;
	return -EOPNOTSUPP;   /* it listens on nothing */
}

static int bc_start(struct rr_xprt_server *s)
{
	struct rdma_bc_srv *bc = (struct rdma_bc_srv *)s;

	pthread_mutex_lock(&bc->lock);
	bc->started = true;
	pthread_mutex_unlock(&bc->lock);
	rr_tp_client_bc_enable(bc->x->tp, true);
	return 0;
}

/* Inline only: the Reply is copied into a send slot, so it is sent (or
 * refused) when this returns. */
static int bc_send_reply(struct rr_xprt_server *s, struct rr_xprt_req *req,
			 const struct rr_xprt_msg *msg)
{
	struct rdma_bc_srv *bc = (struct rdma_bc_srv *)s;
	struct bc_req_wrap *w = req->xp_priv;
	struct rr_xprt_part parts[2 * RR_RPC_MAX_DDP + 1];

	if (msg->nddp > RR_RPC_MAX_DDP)
		return -EINVAL;
	return rr_tp_client_bc_reply(bc->x->tp, w->sreq, parts, msg_parts(msg, parts));
}

static void bc_req_done(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	struct rdma_bc_srv *bc = (struct rdma_bc_srv *)s;
	struct bc_req_wrap *w = req->xp_priv;

	rr_tp_client_bc_done(bc->x->tp, w->sreq);
	rr_free(rr_env(bc->p.env), w);
	pthread_mutex_lock(&bc->lock);
	bc->inflight--;
	pthread_cond_broadcast(&bc->cond);
	pthread_mutex_unlock(&bc->lock);
}

static void bc_stop(struct rr_xprt_server *s)
{
	struct rdma_bc_srv *bc = (struct rdma_bc_srv *)s;

	rr_tp_client_bc_enable(bc->x->tp, false);
	pthread_mutex_lock(&bc->lock);
	bc->stopped = true;
	pthread_mutex_unlock(&bc->lock);
}

/* Every request delivered is done (the RPC layer waited); one being
 * delivered as it stopped is waited for. */
static void bc_destroy(struct rr_xprt_server *s)
{
	struct rdma_bc_srv *bc = (struct rdma_bc_srv *)s;

	bc_stop(s);
	rr_tp_client_bc_set(bc->x->tp, NULL, NULL);   /* nothing more comes */
	pthread_mutex_lock(&bc->lock);
	while (bc->inflight)
		(void)rr_engine_wait(&bc->cond, &bc->lock, NULL);
	pthread_mutex_unlock(&bc->lock);
	bc->x->bc = NULL;
	pthread_mutex_destroy(&bc->lock);
	pthread_cond_destroy(&bc->cond);
	rr_free(rr_env(bc->p.env), bc);
}

static const struct rr_xprt_server_ops bc_server_ops = {
	.port = bc_port,
	.start = bc_start,
	.send_reply = bc_send_reply,
	.req_done = bc_req_done,
	.stop = bc_stop,
	.destroy = bc_destroy,
	.inline_recv = false,   /* the progress thread must not run handlers */
};

static int cl_bc_serve(struct rr_xprt_client *x, const struct rr_xprt_server_params *p,
		       const struct rr_xprt_server_ops **ops, struct rr_xprt_server **out)
{
	struct rdma_bc_srv *bc;

	if (!x->p.bc_slots)
		return -EINVAL;
	if (x->bc)
		return -EBUSY;
	bc = rr_zalloc(rr_env(p->env), sizeof(*bc));
	if (!bc)
		return -ENOMEM;
	bc->x = x;
	bc->p = *p;
	pthread_mutex_init(&bc->lock, NULL);
	pthread_cond_init(&bc->cond, NULL);
	x->bc = bc;
	rr_tp_client_bc_set(x->tp, bc_recv, bc);
	*ops = &bc_server_ops;
	*out = (struct rr_xprt_server *)bc;
	return 0;
}

/* ---- callback clients of a server (transport/xprt.h section 4) ---- */

static void bc_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	(void)ctx;
	cl_complete(rpc->user, rpc);   /* @user: its rr_xprt_client */
}

static int bc_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct rpc_wrap *w = wrap_of(call);
	int rc;

	if (call->msg.nddp > RR_RPC_MAX_DDP)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->rpc.xid = call->xid;
	w->rpc.nparts = msg_parts(&call->msg, w->parts);
	w->rpc.parts = w->parts;
	w->rpc.caller_waits = call->caller_waits;
	w->rpc.user = x;
	/* results come inline (no Write chunks backwards): sinks not placed */
	call->xp_priv = w;
	rc = rr_tp_server_bc_submit(x->srv, x->bc_tp, &w->rpc);
	if (rc)
		call->xp_priv = NULL;
	return rc;
}

static void bc_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	struct rpc_wrap *w = call->xp_priv;

	if (w)
		rr_tp_server_bc_abort(x->srv, x->bc_tp, &w->rpc, status);
}

static void bc_release(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct rpc_wrap *w = call->xp_priv;

	if (!w)
		return;
	rr_tp_server_bc_release(x->srv, &w->rpc);
	call->reply = NULL;
	call->reply_buf = NULL;
	call->reply_len = 0;
	call->xp_priv = NULL;
}

/* Waiting is the RPC layer's; the op only lets submit see a caller that
 * would wait on the progress thread (caller_waits: -EDEADLK there). */
static void bc_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	(void)x;
	(void)call;
	(void)timeout_ms;
}

static void bc_client_destroy(struct rr_xprt_client *x)
{
	rr_tp_server_bc_close(x->srv, x->bc_tp);
	rr_free(rr_env(x->p.env), x);
}

static const struct rr_xprt_client_ops bc_client_ops = {
	.submit = bc_submit,
	.abort = bc_abort,
	.release_reply = bc_release,
	.destroy = bc_client_destroy,
	.wait = bc_wait,
};

static int sv_bc_client(struct rr_xprt_server *s, struct rr_xprt_req *req,
			const struct rr_xprt_client_params *p,
			const struct rr_xprt_client_ops **ops, struct rr_xprt_client **out)
{
	struct rr_conn_sreq *sreq = (struct rr_conn_sreq *)req->xp_priv;
	struct rr_xprt_client *x = rr_zalloc(rr_env(p->env), sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	cl_params_set(x, p);
	x->srv = s->tp;
	rc = rr_tp_server_bc_open(s->tp, sreq, bc_complete, NULL, &x->bc_tp);
	if (rc) {
		rr_free(rr_env(p->env), x);
		return rc;
	}
	*ops = &bc_client_ops;
	*out = x;
	return 0;
}

static int cl_ctl(struct rr_xprt_client *x, unsigned op, void *arg)
{
	return rr_rdma_client_ctl(x->tp, op, arg);
}

static int sv_ctl(struct rr_xprt_server *s, struct rr_xprt_req *req, unsigned op, void *arg)
{
	return rr_rdma_server_ctl(s->tp, req ? (struct rr_conn_sreq *)req->xp_priv : NULL,
				  op, arg);
}

/* rdma:// (the soft provider) and verbs:// (rdma-core) are the same
 * transport; their ops differ only in create, which opens the provider. */
#define RDMA_CLIENT_OPS(create_fn)                                             \
	{                                                                      \
		.create = create_fn, .submit = cl_submit, .abort = cl_abort,   \
		.release_reply = cl_release, .destroy = cl_destroy,            \
		.wait = cl_wait, .submit_wait = cl_submit_wait, .ctl = cl_ctl, \
		.reliable_reply = cl_reliable_reply, .bc_serve = cl_bc_serve,  \
	}

/* inline_recv false: the RPC layer queues Calls to its workers, except those
 * it answers itself and all of them under RPCRDMA_SERVER_INLINE, which run on
 * the progress thread. Replies go through send_reply_async: posted without
 * waiting for their RDMA Writes and Send, the RPC layer's memory released
 * by the Send completion, so one thread pipelines many Replies. */
#define RDMA_SERVER_OPS(create_fn)                                             \
	{                                                                      \
		.create = create_fn, .port = sv_port, .start = sv_start,       \
		.send_reply = sv_send_reply, .req_done = sv_req_done,          \
		.send_reply_async = sv_send_reply_async,                       \
		.send_reply_done = sv_send_reply_done,                         \
		.stop = sv_stop, .destroy = sv_destroy, .inline_recv = false,  \
		.ctl = sv_ctl, .req_refuse = sv_req_refuse,                    \
		.bc_client = sv_bc_client,                                     \
	}

static const struct rr_xprt_client_ops rdma_client_ops = RDMA_CLIENT_OPS(cl_create);
static const struct rr_xprt_server_ops rdma_server_ops = RDMA_SERVER_OPS(sv_create);
static const struct rr_xprt_client_ops verbs_client_ops = RDMA_CLIENT_OPS(cl_create_verbs);
static const struct rr_xprt_server_ops verbs_server_ops = RDMA_SERVER_OPS(sv_create_verbs);

const struct rr_xprt_class rr_xprt_rdma_class = {"rdma", &rdma_client_ops, &rdma_server_ops};
const struct rr_xprt_class rr_xprt_verbs_class = {"verbs", &verbs_client_ops, &verbs_server_ops};
