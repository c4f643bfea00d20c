/* SPDX-License-Identifier: BSD-2-Clause */
/* libtirpc interoperability: rpcgen-generated xdrproc_t routines encode and
 * decode arguments and results through XDR memory streams (inline data
 * only), a libtirpc CLIENT handle whose clnt_call goes through librpcrdma,
 * and an SVCXPRT shim so an rpcgen dispatch function (svc_getargs,
 * svc_sendreply, svcerr_*) serves requests of a librpcrdma server. The RPC
 * semantics (RFC 5531 sections 9 and 10) are librpcrdma's; libtirpc only
 * provides the XDR stream and the rpcgen calling conventions. Built when
 * libtirpc is found (RPCRDMA_HAVE_TIRPC); otherwise every entry point
 * answers -ENOSYS / NULL. */
#include "rpc/svcint.h"
#include "rpc/xbuf.h"

#include <stdlib.h>

#ifdef RPCRDMA_HAVE_TIRPC
#include <rpc/rpc.h>

/* Encodes @argp with @proc into the call's arguments, in place. */
static int encode_xdrproc(struct rpcrdma_xdr_enc *enc, rpcrdma_xdrproc_t proc, void *argp)
{
	xdrproc_t xp = (xdrproc_t)proc;
	unsigned long n;
	void *p;
	XDR x;
	int rc;

	if (!proc)
		return 0;
	n = xdr_sizeof(xp, argp);
	if (n > UINT32_MAX)
		return -EMSGSIZE;
	rc = rpcrdma_xdr_put_space(enc, n, &p);
	if (rc)
		return rc;
	if (n == 0)
		return 0;
	xdrmem_create(&x, p, (u_int)n, XDR_ENCODE);
	rc = xp(&x, argp) ? 0 : -EINVAL;
	xdr_destroy(&x);
	return rc;
}

static int decode_xdrproc(struct rpcrdma_xdr_dec *dec, rpcrdma_xdrproc_t proc, void *resp)
{
	xdrproc_t xp = (xdrproc_t)proc;
	size_t n = rpcrdma_xdr_dec_remaining(dec);
	XDR x;
	int rc;

	if (!proc)
		return 0;
	xdrmem_create(&x, (char *)(uintptr_t)rr_xdr_dec_ptr(&dec->x), (u_int)RR_MIN(n, (size_t)UINT32_MAX),
		      XDR_DECODE);
	rc = xp(&x, resp) ? 0 : -EBADMSG;
	if (!rc)
		dec->x.pos += xdr_getpos(&x);
	xdr_destroy(&x);
	return rc;
}

RPCRDMA_API int rpcrdma_call_xdrproc(struct rpcrdma_client *c, uint32_t proc,
				     rpcrdma_xdrproc_t args, void *argp,
				     rpcrdma_xdrproc_t res, void *resp, uint32_t timeout_ms)
{
	struct rpcrdma_call *call;
	int rc;

	rc = rpcrdma_call_create(c, proc, &call);
	if (rc)
		return rc;
	rc = encode_xdrproc(rpcrdma_call_args(call), args, argp);
	if (!rc) {
		rpcrdma_call_set_timeout(call, timeout_ms);
		rc = rpcrdma_call_run(call);
	}
	if (!rc)
		rc = decode_xdrproc(rpcrdma_call_results(call), res, resp);
	rpcrdma_call_destroy(call);
	return rc;
}

/* ---- CLIENT shim ---- */

struct rr_tirpc_clnt {
	CLIENT cl;
	struct rpcrdma_client *c;
	struct rpc_err err;
	uint32_t timeout_ms;
	bool timeout_set;
};

/* Follows cl_auth: AUTH_NONE, or AUTH_SYS whose body is parsed and used. */
static int sync_auth(struct rr_tirpc_clnt *t)
{
	AUTH *a = t->cl.cl_auth;
	struct rr_rpc_authsys w;
	struct rpcrdma_auth_sys sys;

	if (!a || a->ah_cred.oa_flavor == AUTH_NONE)
		return rpcrdma_client_set_auth_none(t->c);
	if (a->ah_cred.oa_flavor != AUTH_SYS)
		return -EOPNOTSUPP;
	if (rr_rpcmsg_decode_authsys((const uint8_t *)a->ah_cred.oa_base,
				     a->ah_cred.oa_length, &w))
		return -EINVAL;
	memset(&sys, 0, sizeof(sys));
	sys.stamp = w.stamp;
	memcpy(sys.machinename, w.machinename, w.machinename_len);
	sys.uid = w.uid;
	sys.gid = w.gid;
	sys.ngids = w.ngids;
	memcpy(sys.gids, w.gids, w.ngids * sizeof(uint32_t));
	return rpcrdma_client_set_auth_sys(t->c, &sys);
}

static enum clnt_stat map_status(struct rr_tirpc_clnt *t, struct rpcrdma_call *call, int rc)
{
	struct rpcrdma_rpc_status st;

	memset(&t->err, 0, sizeof(t->err));
	if (rc == 0)
		return t->err.re_status = RPC_SUCCESS;
	if (rc == -EREMOTEIO && rpcrdma_call_status(call, &st) == 0) {
		if (st.reply_stat == RPCRDMA_MSG_DENIED) {
			if (st.reject_stat == RPCRDMA_AUTH_ERROR) {
				t->err.re_why = (enum auth_stat)st.auth_stat;
				return t->err.re_status = RPC_AUTHERROR;
			}
			t->err.re_vers.low = st.low;
			t->err.re_vers.high = st.high;
			return t->err.re_status = RPC_VERSMISMATCH;
		}
		switch (st.accept_stat) {
		case RPCRDMA_PROG_UNAVAIL:
			return t->err.re_status = RPC_PROGUNAVAIL;
		case RPCRDMA_PROG_MISMATCH:
			t->err.re_vers.low = st.low;
			t->err.re_vers.high = st.high;
			return t->err.re_status = RPC_PROGVERSMISMATCH;
		case RPCRDMA_PROC_UNAVAIL:
			return t->err.re_status = RPC_PROCUNAVAIL;
		case RPCRDMA_GARBAGE_ARGS:
			return t->err.re_status = RPC_CANTDECODEARGS;
		default:
			return t->err.re_status = RPC_SYSTEMERROR;
		}
	}
	t->err.re_errno = -rc;
	switch (rc) {
	case -ETIMEDOUT:
		return t->err.re_status = RPC_TIMEDOUT;
	case -EBADMSG:
		return t->err.re_status = RPC_CANTDECODERES;
	case -EINVAL:
	case -EMSGSIZE:
		return t->err.re_status = RPC_CANTENCODEARGS;
	case -ECONNRESET:
	case -ENOTCONN:
		return t->err.re_status = RPC_CANTRECV;
	default:
		return t->err.re_status = RPC_CANTSEND;
	}
}

static enum clnt_stat shim_call(CLIENT *cl, rpcproc_t proc, xdrproc_t xargs, void *argp,
				xdrproc_t xres, void *resp, struct timeval tv)
{
	struct rr_tirpc_clnt *t = (struct rr_tirpc_clnt *)cl;
	struct rpcrdma_call *call;
	enum clnt_stat st;
	uint64_t ms;
	int rc;

	rc = sync_auth(t);
	if (rc) {
		memset(&t->err, 0, sizeof(t->err));
		t->err.re_why = AUTH_BADCRED;
		return t->err.re_status = RPC_AUTHERROR;
	}
	ms = t->timeout_set ? t->timeout_ms
			    : (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
	if (ms == 0 || ms > UINT32_MAX)
		ms = ms ? UINT32_MAX : 1;
	rc = rpcrdma_call_create(t->c, (uint32_t)proc, &call);
	if (rc)
		return map_status(t, NULL, rc);
	rc = encode_xdrproc(rpcrdma_call_args(call), (rpcrdma_xdrproc_t)xargs, argp);
	if (rc) {
		rpcrdma_call_destroy(call);
		memset(&t->err, 0, sizeof(t->err));
		return t->err.re_status = RPC_CANTENCODEARGS;
	}
	rpcrdma_call_set_timeout(call, (uint32_t)ms);
	rc = rpcrdma_call_run(call);
	st = map_status(t, call, rc);
	if (st == RPC_SUCCESS &&
	    decode_xdrproc(rpcrdma_call_results(call), (rpcrdma_xdrproc_t)xres, resp))
		st = t->err.re_status = RPC_CANTDECODERES;
	rpcrdma_call_destroy(call);
	return st;
}

static void shim_abort(CLIENT *cl)
{
	(void)cl;
}

static void shim_geterr(CLIENT *cl, struct rpc_err *e)
{
	*e = ((struct rr_tirpc_clnt *)cl)->err;
}

static bool_t shim_freeres(CLIENT *cl, xdrproc_t xres, void *resp)
{
	(void)cl;
	xdr_free(xres, resp);
	return TRUE;
}

static void shim_destroy(CLIENT *cl)
{
	struct rr_tirpc_clnt *t = (struct rr_tirpc_clnt *)cl;

	rpcrdma_client_destroy(t->c);
	if (cl->cl_auth)
		auth_destroy(cl->cl_auth);
	free(t);
}

static bool_t shim_control(CLIENT *cl, u_int req, void *info)
{
	struct rr_tirpc_clnt *t = (struct rr_tirpc_clnt *)cl;

	switch (req) {
	case CLSET_TIMEOUT: {
		const struct timeval *tv = info;

		t->timeout_ms = (uint32_t)RR_MIN((uint64_t)tv->tv_sec * 1000u +
						 (uint64_t)tv->tv_usec / 1000u,
						 (uint64_t)UINT32_MAX);
		t->timeout_set = true;
		return TRUE;
	}
	case CLGET_TIMEOUT: {
		struct timeval *tv = info;

		tv->tv_sec = t->timeout_ms / 1000;
		tv->tv_usec = (suseconds_t)(t->timeout_ms % 1000) * 1000;
		return TRUE;
	}
	default:
		return FALSE;
	}
}

static struct clnt_ops shim_ops = {
	.cl_call = shim_call,
	.cl_abort = shim_abort,
	.cl_geterr = shim_geterr,
	.cl_freeres = shim_freeres,
	.cl_destroy = shim_destroy,
	.cl_control = shim_control,
};

RPCRDMA_API struct __rpc_client *rpcrdma_clnt_create(const char *url, uint32_t prog,
						     uint32_t vers)
{
	struct rr_tirpc_clnt *t = calloc(1, sizeof(*t));
	int rc;

	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	rc = rpcrdma_client_create(url, prog, vers, NULL, &t->c);
	if (rc) {
		free(t);
		/* What clnt_pcreateerror() reports. */
		rpc_createerr.cf_stat = rc == -EPROTONOSUPPORT ? RPC_UNKNOWNPROTO : RPC_SYSTEMERROR;
		rpc_createerr.cf_error.re_errno = -rc;
		errno = -rc;
		return NULL;
	}
	t->cl.cl_ops = &shim_ops;
	t->cl.cl_auth = authnone_create();
	t->cl.cl_netid = NULL;
	t->cl.cl_tp = NULL;
	return &t->cl;
}

/* ---- SVCXPRT shim ---- */

struct rr_tirpc_svc {
	SVCXPRT xprt;
	struct svc_req rq;
	struct authunix_parms aup;
	gid_t gids[RPCRDMA_AUTHSYS_MAXGIDS];
	struct rpcrdma_req *r;
	bool replied;
};

static bool_t shim_getargs(SVCXPRT *xp, xdrproc_t xargs, void *argsp)
{
	struct rr_tirpc_svc *t = xp->xp_p1;

	return decode_xdrproc(rpcrdma_req_args(t->r), (rpcrdma_xdrproc_t)xargs, argsp) == 0;
}

static bool_t shim_freeargs(SVCXPRT *xp, xdrproc_t xargs, void *argsp)
{
	(void)xp;
	xdr_free(xargs, argsp);
	return TRUE;
}

static bool_t shim_reply(SVCXPRT *xp, struct rpc_msg *msg)
{
	struct rr_tirpc_svc *t = xp->xp_p1;
	struct rpcrdma_req *r = t->r;

	t->replied = true;
	if (msg->rm_reply.rp_stat == MSG_ACCEPTED) {
		uint32_t stat = (uint32_t)msg->acpted_rply.ar_stat;

		if (stat > RR_RPC_SYSTEM_ERR)
			stat = RR_RPC_SYSTEM_ERR;
		rr_svc_reply_accepted(r, stat, msg->acpted_rply.ar_vers.low,
				      msg->acpted_rply.ar_vers.high);
		if (stat == RR_RPC_SUCCESS &&
		    encode_xdrproc(rpcrdma_req_results(r),
				   (rpcrdma_xdrproc_t)msg->acpted_rply.ar_results.proc,
				   msg->acpted_rply.ar_results.where)) {
			rr_svc_reply_accepted(r, RR_RPC_SYSTEM_ERR, 0, 0);
			return FALSE;
		}
		return TRUE;
	}
	if (msg->rjcted_rply.rj_stat == AUTH_ERROR)
		rr_svc_reply_denied(r, RR_RPC_AUTH_ERROR, (uint32_t)msg->rjcted_rply.rj_why);
	else
		rr_svc_reply_denied(r, RR_RPC_RPC_MISMATCH, 0);
	return TRUE;
}

static bool_t shim_recv(SVCXPRT *xp, struct rpc_msg *m)
{
	(void)xp;
	(void)m;
	return FALSE;
}

static enum xprt_stat shim_stat(SVCXPRT *xp)
{
	(void)xp;
	return XPRT_IDLE;
}

static void shim_xdestroy(SVCXPRT *xp)
{
	(void)xp;
}

static bool_t shim_xcontrol(SVCXPRT *xp, const u_int rq, void *in)
{
	(void)xp;
	(void)rq;
	(void)in;
	return FALSE;
}

static const struct xp_ops svc_shim_ops = {
	.xp_recv = shim_recv,
	.xp_stat = shim_stat,
	.xp_getargs = shim_getargs,
	.xp_reply = shim_reply,
	.xp_freeargs = shim_freeargs,
	.xp_destroy = shim_xdestroy,
};

static const struct xp_ops2 svc_shim_ops2 = {
	.xp_control = shim_xcontrol,
};

/* Runs the rpcgen dispatch function @fn for @r (rr_svc_program_fn). */
static int tirpc_dispatch(struct rpcrdma_req *r, rpcrdma_svc_dispatch_fn fn)
{
	const struct rr_rpc_call *c = rr_svc_req_call(r);
	const struct rpcrdma_auth_sys *sys = rpcrdma_req_auth_sys(r);
	struct rr_tirpc_svc *t = calloc(1, sizeof(*t));

	if (!t)
		return RPCRDMA_SVC_SYSTEM_ERR;
	t->r = r;
	t->xprt.xp_fd = -1;
	t->xprt.xp_ops = &svc_shim_ops;
	t->xprt.xp_ops2 = &svc_shim_ops2;
	t->xprt.xp_verf = _null_auth;
	t->xprt.xp_p1 = t;
	t->rq.rq_prog = c->prog;
	t->rq.rq_vers = c->vers;
	t->rq.rq_proc = c->proc;
	t->rq.rq_cred.oa_flavor = (enum_t)c->cred.flavor;
	t->rq.rq_cred.oa_base = (caddr_t)(uintptr_t)c->cred.body;
	t->rq.rq_cred.oa_length = c->cred.len;
	t->rq.rq_xprt = &t->xprt;
	if (sys) {
		t->aup.aup_time = sys->stamp;
		t->aup.aup_machname = (char *)(uintptr_t)sys->machinename;
		t->aup.aup_uid = sys->uid;
		t->aup.aup_gid = sys->gid;
		t->aup.aup_len = sys->ngids;
		for (unsigned i = 0; i < sys->ngids; i++)
			t->gids[i] = (gid_t)sys->gids[i];
		t->aup.aup_gids = t->gids;
		t->rq.rq_clntcred = &t->aup;
	}
	fn(&t->rq, &t->xprt);
	{
		bool replied = t->replied;

		free(t);
		/* No reply: the service sent none (a NULL result). */
		return replied ? RPCRDMA_SVC_OK : RPCRDMA_SVC_DROP;
	}
}

RPCRDMA_API int rpcrdma_server_register_svc(struct rpcrdma_server *s, uint32_t prog,
					    uint32_t vers, rpcrdma_svc_dispatch_fn fn)
{
	if (!s || !fn)
		return -EINVAL;
	return rr_svc_add_program(s, prog, vers, tirpc_dispatch, fn);
}

#else /* !RPCRDMA_HAVE_TIRPC */

RPCRDMA_API int rpcrdma_call_xdrproc(struct rpcrdma_client *c, uint32_t proc,
				     rpcrdma_xdrproc_t args, void *argp,
				     rpcrdma_xdrproc_t res, void *resp, uint32_t timeout_ms)
{
	(void)c; (void)proc; (void)args; (void)argp; (void)res; (void)resp; (void)timeout_ms;
	return -ENOSYS;
}

RPCRDMA_API struct __rpc_client *rpcrdma_clnt_create(const char *url, uint32_t prog,
						     uint32_t vers)
{
	(void)url; (void)prog; (void)vers;
	errno = ENOSYS;
	return NULL;
}

RPCRDMA_API int rpcrdma_server_register_svc(struct rpcrdma_server *s, uint32_t prog,
					    uint32_t vers, rpcrdma_svc_dispatch_fn fn)
{
	(void)prog;
	(void)vers;
	if (!s || !fn)
		return -EINVAL;
	return -ENOSYS;
}

#endif
