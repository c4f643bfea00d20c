/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_nfs41: a small NFSv4.1 client (RFC 8881) on the public RPC API
 * (include/rpcrdma/rpc.h), run by the interop lab against the Linux
 * kernel's nfsd to show that nfsd's callbacks arrive on our backchannel
 * (RFC 8167 over rdma:// and verbs://; over tcp:// the same connection
 * carries them, RFC 8881 section 2.10.3.1) and are answered there.
 *
 * What it does, each step one "ok NAME" / "not ok NAME: why" line:
 *   NULL; EXCHANGE_ID (SP4_NONE); CREATE_SESSION with
 *   CREATE_SESSION4_FLAG_CONN_BACK_CHAN, back channel attributes sized for
 *   inline messages, callback program 0x40000000 (the one Wireshark decodes
 *   as NFS CB) with AUTH_NONE; a CB_NULL probe of the back channel is
 *   answered if the server sends one (Linux nfsd does not for NFSv4.1:
 *   "skip" then); SEQUENCE's status flags carry no
 *   SEQ4_STATUS_CB_PATH_DOWN*; RECLAIM_COMPLETE; BIND_CONN_TO_SESSION
 *   (CDFC4_FORE_OR_BOTH: the server answers CDFS4_BOTH on this connection);
 *   OPEN of an existing file for reading with
 *   OPEN4_SHARE_ACCESS_WANT_READ_DELEG (retried while nfsd is in its grace
 *   period, and while it withholds delegations for a lock manager's grace:
 *   WND4_RESOURCE); with a read delegation, a local writer opens the same file in
 *   the exported directory (same VM), which breaks nfsd's lease: nfsd sends
 *   CB_COMPOUND { CB_SEQUENCE, CB_RECALL } on our backchannel, our handler
 *   answers NFS4_OK and the client returns the delegation (DELEGRETURN), so
 *   the local writer gets its file; CLOSE, DESTROY_SESSION,
 *   DESTROY_CLIENTID. Without a delegation the recall check says "skip" with
 *   nfsd's reason (OPEN_DELEGATE_NONE_EXT).
 *
 * Usage: rr_lab_nfs41 -u URL -e EXPORT -l LOCALDIR -f FILE [-s SLOTS]
 *   URL: tcp://host:2049, rdma://host:20049, verbs://host:20049
 *   EXPORT: the exported path as NFSv4 sees it (e.g. /export)
 *   LOCALDIR: the same directory as this machine sees it (the writer)
 *   FILE: an existing file in it (a fresh name per run: nfsd withholds
 *         delegations of a file recalled recently)
 * Exit 0 when all passed, 1 otherwise, 77 when URL's transport is not built
 * into the library. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "lab_check.h"

#define NFS_PROG 100003u
#define NFS_V4 4u
#define NFSPROC4_COMPOUND 1u
#define CB_PROG 0x40000000u   /* Linux's, and Wireshark's NFS CB */
#define CB_COMPOUND 1u

enum {
	OP_CLOSE = 4, OP_DELEGRETURN = 8, OP_GETFH = 10, OP_LOOKUP = 15, OP_OPEN = 18,
	OP_PUTFH = 22, OP_PUTROOTFH = 24, OP_BIND_CONN_TO_SESSION = 41, OP_EXCHANGE_ID = 42,
	OP_CREATE_SESSION = 43, OP_DESTROY_SESSION = 44, OP_SEQUENCE = 53,
	OP_DESTROY_CLIENTID = 57, OP_RECLAIM_COMPLETE = 58,
	OP_CB_RECALL = 4, OP_CB_SEQUENCE = 11,
};
enum { NFS4_OK = 0, NFS4ERR_DELAY = 10008, NFS4ERR_GRACE = 10013, NFS4ERR_NOTSUPP = 10004,
       NFS4ERR_SEQ_MISORDERED = 10063, NFS4ERR_BADSLOT = 10053, NFS4ERR_OP_ILLEGAL = 10044,
       NFS4ERR_BADXDR = 10036 };
#define CREATE_SESSION4_FLAG_CONN_BACK_CHAN 0x2u
#define SEQ4_STATUS_CB_PATH_DOWN 0x1u
#define SEQ4_STATUS_CB_PATH_DOWN_SESSION 0x200u
#define OPEN4_SHARE_ACCESS_READ 1u
#define OPEN4_SHARE_ACCESS_WANT_READ_DELEG 0x100u
#define CDFC4_FORE_OR_BOTH 3u
#define CDFS4_BOTH 3u
#define CB_SLOTS 4u            /* back channel slots = our callback_slots */
#define REPLY_HINT 4000u       /* our COMPOUND replies: inline */

struct stateid {
	uint32_t seqid;
	uint8_t other[12];
};

struct fh {
	uint32_t len;
	uint8_t data[128];
};

/* The client's state, shared with the callback handlers. */
static struct {
	struct rpcrdma_client *c;
	uint64_t clientid;
	uint32_t eid_seq;
	uint8_t sessionid[16];
	uint32_t seq;                  /* fore channel slot 0 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned cb_null, cb_compound, cb_recall;
	uint32_t cb_slot_seq[CB_SLOTS];
	bool recall_seen;
	struct stateid recalled;
	char cb_errors[256];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static const char *nfs4err(uint32_t st)
{
	static char b[32];

	switch (st) {
	case NFS4_OK: return "NFS4_OK";
	case NFS4ERR_GRACE: return "NFS4ERR_GRACE";
	case NFS4ERR_DELAY: return "NFS4ERR_DELAY";
	default: snprintf(b, sizeof(b), "nfsstat4 %u", st); return b;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- COMPOUND plumbing ---- */

struct compound {
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t status;
	uint32_t nres;
};

static int cpd_begin(struct compound *k, uint32_t nops)
{
	int rc = rpcrdma_call_create(g.c, NFSPROC4_COMPOUND, &k->call);

	if (rc)
		return rc;
	k->e = rpcrdma_call_args(k->call);
	rpcrdma_call_set_reply_hint(k->call, REPLY_HINT);
	rpcrdma_xdr_put_opaque(k->e, NULL, 0);     /* tag */
	rpcrdma_xdr_put_u32(k->e, 1);              /* minorversion */
	rpcrdma_xdr_put_u32(k->e, nops);
	return 0;
}

static void put_sequence(struct compound *k)
{
	rpcrdma_xdr_put_u32(k->e, OP_SEQUENCE);
	rpcrdma_xdr_put_fixed(k->e, g.sessionid, 16);
	rpcrdma_xdr_put_u32(k->e, ++g.seq);
	rpcrdma_xdr_put_u32(k->e, 0);   /* slot */
	rpcrdma_xdr_put_u32(k->e, 0);   /* highest slot */
	rpcrdma_xdr_put_bool(k->e, false);
}

/* Runs it; 0 with k->status (COMPOUND status) and the decoder at the first
 * result, or the RPC error. */
static int cpd_run(struct compound *k, const char *what)
{
	int rc = rpcrdma_xdr_enc_error(k->e);
	const void *tag;
	uint32_t tlen;

	if (!rc)
		rc = rpcrdma_call_run(k->call);
	if (rc) {
		struct rpcrdma_rpc_status st;

		memset(&st, 0, sizeof(st));
		rpcrdma_call_status(k->call, &st);
		fprintf(stderr, "%s: %s (reply_stat %u accept_stat %u)\n", what, strerror(-rc),
			st.reply_stat, st.accept_stat);
		return rc;
	}
	k->d = rpcrdma_call_results(k->call);
	if (rpcrdma_xdr_get_u32(k->d, &k->status) ||
	    rpcrdma_xdr_get_opaque(k->d, 1024, &tag, &tlen) ||
	    rpcrdma_xdr_get_u32(k->d, &k->nres))
		return -EBADMSG;
	return 0;
}

static void cpd_end(struct compound *k)
{
	rpcrdma_call_destroy(k->call);
	k->call = NULL;
}

/* The next result: its opcode must be @op; *@st its status. */
static int res_op(struct compound *k, uint32_t op, uint32_t *st)
{
	uint32_t got;

	if (rpcrdma_xdr_get_u32(k->d, &got) || got != op || rpcrdma_xdr_get_u32(k->d, st))
		return -EBADMSG;
	return 0;
}

static int skip_words(struct rpcrdma_xdr_dec *d, uint32_t n)
{
	uint32_t v;

	while (n--)
		if (rpcrdma_xdr_get_u32(d, &v))
			return -EBADMSG;
	return 0;
}

/* SEQUENCE4resok: sessionid, sequenceid, slotid, highest, target, flags */
static int res_sequence(struct compound *k, uint32_t *flags)
{
	uint32_t st;
	uint8_t sid[16];

	if (res_op(k, OP_SEQUENCE, &st))
		return -EBADMSG;
	if (st)
		return (int)st;
	if (rpcrdma_xdr_get_fixed(k->d, sid, 16) || skip_words(k->d, 4) ||
	    rpcrdma_xdr_get_u32(k->d, flags))
		return -EBADMSG;
	return 0;
}

/* ---- the callback program (our backchannel's server) ---- */

/* A CB_COMPOUND's results, built before they are encoded (their count and
 * the compound's status come first on the wire). */
struct cbres {
	uint8_t b[512];
	size_t n;
};

static void cbres_u32(struct cbres *r, uint32_t v)
{
	if (r->n + 4 > sizeof(r->b))
		return;
	r->b[r->n++] = (uint8_t)(v >> 24);
	r->b[r->n++] = (uint8_t)(v >> 16);
	r->b[r->n++] = (uint8_t)(v >> 8);
	r->b[r->n++] = (uint8_t)v;
}

static void cbres_fixed(struct cbres *r, const uint8_t *p, size_t n)
{
	if (r->n + n > sizeof(r->b))
		return;
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

/* CB_SEQUENCE4args -> resok (the slot's replay rules of RFC 8881 section
 * 20.9.3, simplified: the next sequence id, or a retry of the last). */
static uint32_t cb_sequence(struct rpcrdma_xdr_dec *d, struct cbres *e)
{
	uint8_t sid[16];
	uint32_t seq, slot, highest, nrcl;
	bool cachethis;
	uint32_t st = NFS4_OK;

	if (rpcrdma_xdr_get_fixed(d, sid, 16) || rpcrdma_xdr_get_u32(d, &seq) ||
	    rpcrdma_xdr_get_u32(d, &slot) || rpcrdma_xdr_get_u32(d, &highest) ||
	    rpcrdma_xdr_get_bool(d, &cachethis) || rpcrdma_xdr_get_u32(d, &nrcl))
		return NFS4ERR_BADXDR;
	for (uint32_t i = 0; i < nrcl; i++) {
		uint32_t n;

		if (skip_words(d, 4) || rpcrdma_xdr_get_u32(d, &n) || n > 1024 ||
		    skip_words(d, 2 * n))
			return NFS4ERR_BADXDR;
	}
	pthread_mutex_lock(&g.lock);
	if (memcmp(sid, g.sessionid, 16) != 0)
		st = 10052; /* NFS4ERR_BADSESSION */
	else if (slot >= CB_SLOTS)
		st = NFS4ERR_BADSLOT;
	else if (seq == g.cb_slot_seq[slot] + 1)
		g.cb_slot_seq[slot] = seq;
	else if (seq != g.cb_slot_seq[slot])
		st = NFS4ERR_SEQ_MISORDERED;
	pthread_mutex_unlock(&g.lock);
	cbres_u32(e, OP_CB_SEQUENCE);
	cbres_u32(e, st);
	if (st)
		return st;
	cbres_fixed(e, sid, 16);
	cbres_u32(e, seq);
	cbres_u32(e, slot);
	cbres_u32(e, CB_SLOTS - 1);
	cbres_u32(e, CB_SLOTS - 1);
	return NFS4_OK;
}

/* CB_RECALL4args: stateid, truncate, fh. Answered NFS4_OK; the main thread
 * returns the delegation (DELEGRETURN) as a client must. */
static uint32_t cb_recall(struct rpcrdma_xdr_dec *d, struct cbres *e)
{
	struct stateid sid;
	bool trunc;
	const void *fh;
	uint32_t fhlen;

	if (rpcrdma_xdr_get_u32(d, &sid.seqid) || rpcrdma_xdr_get_fixed(d, sid.other, 12) ||
	    rpcrdma_xdr_get_bool(d, &trunc) || rpcrdma_xdr_get_opaque(d, 128, &fh, &fhlen))
		return NFS4ERR_BADXDR;
	pthread_mutex_lock(&g.lock);
	g.cb_recall++;
	g.recall_seen = true;
	g.recalled = sid;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	cbres_u32(e, OP_CB_RECALL);
	cbres_u32(e, NFS4_OK);
	return NFS4_OK;
}

static void cb_note(const char *fmt, uint32_t v)
{
	pthread_mutex_lock(&g.lock);
	if (strlen(g.cb_errors) < sizeof(g.cb_errors) - 40)
		snprintf(g.cb_errors + strlen(g.cb_errors), 40, fmt, v);
	pthread_mutex_unlock(&g.lock);
}

/* CB_COMPOUND4args: tag, minorversion, callback_ident, ops. Results:
 * status, tag (empty), the results of the ops run (up to the first that
 * failed). */
static int h_cb_compound(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	struct cbres res = {.n = 0};
	const void *tag;
	uint32_t tlen, minor, ident, nops, st = NFS4_OK, done = 0;

	(void)ctx;
	if (rpcrdma_xdr_get_opaque(d, 1024, &tag, &tlen) || rpcrdma_xdr_get_u32(d, &minor) ||
	    rpcrdma_xdr_get_u32(d, &ident) || rpcrdma_xdr_get_u32(d, &nops))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	pthread_mutex_lock(&g.lock);
	g.cb_compound++;
	pthread_mutex_unlock(&g.lock);
	for (uint32_t i = 0; i < nops && i < 8 && st == NFS4_OK; i++) {
		uint32_t op;

		if (rpcrdma_xdr_get_u32(d, &op))
			return RPCRDMA_SVC_GARBAGE_ARGS;
		if (op == OP_CB_SEQUENCE && i == 0) {
			st = cb_sequence(d, &res);
		} else if (op == OP_CB_RECALL && i > 0) {
			st = cb_recall(d, &res);
		} else {
			/* only what a read delegation needs; the rest is not
			 * supported (and cannot be skipped: its arguments are
			 * not parsed) */
			cb_note(" op %u refused;", op);
			st = i == 0 ? 10071 /* NFS4ERR_OP_NOT_IN_SESSION */ : NFS4ERR_NOTSUPP;
			cbres_u32(&res, op);
			cbres_u32(&res, st);
		}
		done++;
	}
	rpcrdma_xdr_put_u32(e, st);
	rpcrdma_xdr_put_opaque(e, NULL, 0);
	rpcrdma_xdr_put_u32(e, done);
	rpcrdma_xdr_put_fixed(e, res.b, res.n);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static int h_cb_null(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	pthread_mutex_lock(&g.lock);
	g.cb_null++;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	return RPCRDMA_SVC_OK;
}

/* Waits up to @secs for *@counter > @above. */
static bool wait_count(const unsigned *counter, unsigned above, double secs)
{
	double end = now_s() + secs;
	bool ok;

	pthread_mutex_lock(&g.lock);
	while (!(ok = *counter > above) && now_s() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&g.cond, &g.lock, &ts);
	}
	pthread_mutex_unlock(&g.lock);
	return ok;
}

/* ---- the forward operations ---- */

static int exchange_id(void)
{
	struct compound k;
	uint8_t verf[8];
	char owner[64];
	uint32_t st, spr;
	int rc;

	snprintf(owner, sizeof(owner), "rr_lab_nfs41.%ld.%ld", (long)getpid(), (long)time(NULL));
	memcpy(verf, owner + strlen(owner) - 8, 8);
	if ((rc = cpd_begin(&k, 1)))
		return rc;
	rpcrdma_xdr_put_u32(k.e, OP_EXCHANGE_ID);
	rpcrdma_xdr_put_fixed(k.e, verf, 8);
	rpcrdma_xdr_put_opaque(k.e, owner, (uint32_t)strlen(owner));
	rpcrdma_xdr_put_u32(k.e, 0);   /* flags */
	rpcrdma_xdr_put_u32(k.e, 0);   /* SP4_NONE */
	rpcrdma_xdr_put_u32(k.e, 0);   /* no implementation id */
	rc = cpd_run(&k, "EXCHANGE_ID");
	if (!rc)
		rc = res_op(&k, OP_EXCHANGE_ID, &st);
	if (!rc && st)
		rc = (int)st;
	if (!rc && (rpcrdma_xdr_get_u64(k.d, &g.clientid) ||
		    rpcrdma_xdr_get_u32(k.d, &g.eid_seq) || skip_words(k.d, 1) ||
		    rpcrdma_xdr_get_u32(k.d, &spr) || spr != 0))
		rc = -EBADMSG;
	result(rc == 0, "EXCHANGE_ID", rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) :
		"clientid %016llx", (unsigned long long)g.clientid);
	cpd_end(&k);
	return rc;
}

/* channel_attrs4: headerpad, maxrequest, maxresponse, maxresponse_cached,
 * maxops, maxrequests, rdma_ird<1> */
static void put_attrs(struct rpcrdma_xdr_enc *e, uint32_t req, uint32_t resp, uint32_t cached,
		      uint32_t ops, uint32_t reqs)
{
	rpcrdma_xdr_put_u32(e, 0);
	rpcrdma_xdr_put_u32(e, req);
	rpcrdma_xdr_put_u32(e, resp);
	rpcrdma_xdr_put_u32(e, cached);
	rpcrdma_xdr_put_u32(e, ops);
	rpcrdma_xdr_put_u32(e, reqs);
	rpcrdma_xdr_put_u32(e, 0);
}

static int get_attrs(struct rpcrdma_xdr_dec *d, uint32_t *v6)
{
	uint32_t n;

	for (int i = 0; i < 6; i++)
		if (rpcrdma_xdr_get_u32(d, &v6[i]))
			return -EBADMSG;
	if (rpcrdma_xdr_get_u32(d, &n) || n > 1 || skip_words(d, n))
		return -EBADMSG;
	return 0;
}

static int create_session(void)
{
	struct compound k;
	uint32_t st, seq, flags = 0, fore[6] = {0}, back[6] = {0};
	int rc;

	if ((rc = cpd_begin(&k, 1)))
		return rc;
	rpcrdma_xdr_put_u32(k.e, OP_CREATE_SESSION);
	rpcrdma_xdr_put_u64(k.e, g.clientid);
	rpcrdma_xdr_put_u32(k.e, g.eid_seq);
	rpcrdma_xdr_put_u32(k.e, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	put_attrs(k.e, 1049620, 1049480, 4096, 8, 16);
	/* back channel: inline messages (RFC 8167), CB_SLOTS at once */
	put_attrs(k.e, 4096, 4096, 0, 4, CB_SLOTS);
	rpcrdma_xdr_put_u32(k.e, CB_PROG);
	rpcrdma_xdr_put_u32(k.e, 1);   /* one callback_sec_parms4: */
	rpcrdma_xdr_put_u32(k.e, 0);   /* AUTH_NONE */
	rc = cpd_run(&k, "CREATE_SESSION");
	if (!rc)
		rc = res_op(&k, OP_CREATE_SESSION, &st);
	if (!rc && st)
		rc = (int)st;
	if (!rc && (rpcrdma_xdr_get_fixed(k.d, g.sessionid, 16) ||
		    rpcrdma_xdr_get_u32(k.d, &seq) || rpcrdma_xdr_get_u32(k.d, &flags) ||
		    get_attrs(k.d, fore) || get_attrs(k.d, back)))
		rc = -EBADMSG;
	cpd_end(&k);
	result(rc == 0, "CREATE_SESSION", rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) :
		"flags %#x, fore %u slots %u/%u B, back %u slots %u/%u B", flags, fore[5], fore[1],
		fore[2], back[5], back[1], back[2]);
	if (!rc)
		result((flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN) != 0,
		       "CREATE_SESSION: back channel on this connection", "csr_flags %#x", flags);
	g.seq = 0;
	return rc;
}

/* SEQUENCE alone (or with RECLAIM_COMPLETE): *@flags its status flags. */
static int sequence(bool reclaim_complete, uint32_t *flags)
{
	struct compound k;
	uint32_t st;
	int rc;

	if ((rc = cpd_begin(&k, reclaim_complete ? 2 : 1)))
		return rc;
	put_sequence(&k);
	if (reclaim_complete) {
		rpcrdma_xdr_put_u32(k.e, OP_RECLAIM_COMPLETE);
		rpcrdma_xdr_put_bool(k.e, false);
	}
	rc = cpd_run(&k, "SEQUENCE");
	if (!rc)
		rc = res_sequence(&k, flags);
	if (!rc && reclaim_complete) {
		rc = res_op(&k, OP_RECLAIM_COMPLETE, &st);
		if (!rc && st)
			rc = (int)st;
	}
	cpd_end(&k);
	return rc;
}

static int bind_conn(void)
{
	struct compound k;
	uint32_t st, dir = 0;
	uint8_t sid[16];
	bool rdma_mode;
	int rc;

	if ((rc = cpd_begin(&k, 1)))
		return rc;
	rpcrdma_xdr_put_u32(k.e, OP_BIND_CONN_TO_SESSION);
	rpcrdma_xdr_put_fixed(k.e, g.sessionid, 16);
	rpcrdma_xdr_put_u32(k.e, CDFC4_FORE_OR_BOTH);
	rpcrdma_xdr_put_bool(k.e, false);
	rc = cpd_run(&k, "BIND_CONN_TO_SESSION");
	if (!rc)
		rc = res_op(&k, OP_BIND_CONN_TO_SESSION, &st);
	if (!rc && st)
		rc = (int)st;
	if (!rc && (rpcrdma_xdr_get_fixed(k.d, sid, 16) || rpcrdma_xdr_get_u32(k.d, &dir) ||
		    rpcrdma_xdr_get_bool(k.d, &rdma_mode)))
		rc = -EBADMSG;
	cpd_end(&k);
	result(rc == 0 && dir == CDFS4_BOTH, "BIND_CONN_TO_SESSION (fore or both)",
	       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "bctsr_dir %u", dir);
	return rc;
}

static void put_path(struct compound *k, const char *path)
{
	char buf[256], *save = NULL, *c;

	snprintf(buf, sizeof(buf), "%s", path);
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		rpcrdma_xdr_put_u32(k->e, OP_LOOKUP);
		rpcrdma_xdr_put_opaque(k->e, c, (uint32_t)strlen(c));
	}
}

static unsigned path_comps(const char *path)
{
	unsigned n = 0;

	for (const char *p = path; *p; p++)
		if (*p != '/' && (p == path || p[-1] == '/'))
			n++;
	return n;
}

static int get_stateid(struct rpcrdma_xdr_dec *d, struct stateid *s)
{
	return rpcrdma_xdr_get_u32(d, &s->seqid) || rpcrdma_xdr_get_fixed(d, s->other, 12) ?
		       -EBADMSG : 0;
}

static void put_stateid(struct rpcrdma_xdr_enc *e, const struct stateid *s)
{
	rpcrdma_xdr_put_u32(e, s->seqid);
	rpcrdma_xdr_put_fixed(e, s->other, 12);
}

/* The delegation part of OPEN4resok: *@type, its stateid, or nfsd's reason
 * for none (open_none_delegation4). */
static int get_delegation(struct rpcrdma_xdr_dec *d, uint32_t *type, struct stateid *ds,
			  uint32_t *why)
{
	uint32_t v;
	bool b;
	const void *who;

	*why = 0;
	if (rpcrdma_xdr_get_u32(d, type))
		return -EBADMSG;
	switch (*type) {
	case 0:
		return 0;
	case 1: /* read: stateid, recall, nfsace4 */
	case 2: /* write: stateid, recall, space limit, nfsace4 */
		if (get_stateid(d, ds) || rpcrdma_xdr_get_bool(d, &b))
			return -EBADMSG;
		if (*type == 2 && (rpcrdma_xdr_get_u32(d, &v) || skip_words(d, 2)))
			return -EBADMSG;
		if (skip_words(d, 3) || rpcrdma_xdr_get_opaque(d, 1024, &who, &v))
			return -EBADMSG;
		return 0;
	case 3: /* none, why (WND4_CONTENTION and WND4_RESOURCE carry a bool) */
		if (rpcrdma_xdr_get_u32(d, why))
			return -EBADMSG;
		if ((*why == 1 || *why == 2) && rpcrdma_xdr_get_bool(d, &b))
			return -EBADMSG;
		return 0;
	default:
		return -EBADMSG;
	}
}

/* SEQUENCE PUTROOTFH LOOKUP... OPEN(CLAIM_NULL @name, no create) GETFH */
static int open_file(const char *exp, const char *name, struct stateid *os, struct fh *fh,
		     uint32_t *dtype, struct stateid *ds, uint32_t *why)
{
	unsigned nl = path_comps(exp);
	struct compound k;
	uint32_t st, flags, rflags, nbm;
	char owner[32];
	int rc;

	snprintf(owner, sizeof(owner), "open-owner-%ld", (long)getpid());
	if ((rc = cpd_begin(&k, 4 + nl)))
		return rc;
	put_sequence(&k);
	rpcrdma_xdr_put_u32(k.e, OP_PUTROOTFH);
	put_path(&k, exp);
	rpcrdma_xdr_put_u32(k.e, OP_OPEN);
	rpcrdma_xdr_put_u32(k.e, 0);   /* seqid (ignored by 4.1) */
	rpcrdma_xdr_put_u32(k.e, OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG);
	rpcrdma_xdr_put_u32(k.e, 0);   /* deny none */
	rpcrdma_xdr_put_u64(k.e, g.clientid);
	rpcrdma_xdr_put_opaque(k.e, owner, (uint32_t)strlen(owner));
	rpcrdma_xdr_put_u32(k.e, 0);   /* OPEN4_NOCREATE */
	rpcrdma_xdr_put_u32(k.e, 0);   /* CLAIM_NULL */
	rpcrdma_xdr_put_opaque(k.e, name, (uint32_t)strlen(name));
	rpcrdma_xdr_put_u32(k.e, OP_GETFH);
	rc = cpd_run(&k, "OPEN");
	if (!rc)
		rc = res_sequence(&k, &flags);
	if (!rc) {
		rc = res_op(&k, OP_PUTROOTFH, &st);
		if (!rc && st)
			rc = (int)st;
	}
	for (unsigned i = 0; !rc && i < nl; i++) {
		rc = res_op(&k, OP_LOOKUP, &st);
		if (!rc && st)
			rc = (int)st;
	}
	if (!rc) {
		rc = res_op(&k, OP_OPEN, &st);
		if (!rc && st)
			rc = (int)st;
	}
	/* stateid, change_info4 (bool + 2 x u64), rflags, attrset, delegation */
	if (!rc && (get_stateid(k.d, os) || skip_words(k.d, 5) ||
		    rpcrdma_xdr_get_u32(k.d, &rflags) || rpcrdma_xdr_get_u32(k.d, &nbm) ||
		    nbm > 8 || skip_words(k.d, nbm) || get_delegation(k.d, dtype, ds, why)))
		rc = -EBADMSG;
	if (!rc) {
		const void *p;

		rc = res_op(&k, OP_GETFH, &st);
		if (!rc && st)
			rc = (int)st;
		if (!rc && rpcrdma_xdr_get_opaque(k.d, sizeof(fh->data), &p, &fh->len))
			rc = -EBADMSG;
		if (!rc)
			memcpy(fh->data, p, fh->len);
	}
	cpd_end(&k);
	return rc;
}

/* SEQUENCE PUTFH @op(stateid...) for DELEGRETURN and CLOSE. */
static int fh_stateid_op(uint32_t op, const struct fh *fh, const struct stateid *s)
{
	struct compound k;
	uint32_t st, flags;
	int rc;

	if ((rc = cpd_begin(&k, 3)))
		return rc;
	put_sequence(&k);
	rpcrdma_xdr_put_u32(k.e, OP_PUTFH);
	rpcrdma_xdr_put_opaque(k.e, fh->data, fh->len);
	rpcrdma_xdr_put_u32(k.e, op);
	if (op == OP_CLOSE)
		rpcrdma_xdr_put_u32(k.e, 0);   /* seqid */
	put_stateid(k.e, s);
	rc = cpd_run(&k, op == OP_CLOSE ? "CLOSE" : "DELEGRETURN");
	if (!rc)
		rc = res_sequence(&k, &flags);
	if (!rc) {
		rc = res_op(&k, OP_PUTFH, &st);
		if (!rc && st)
			rc = (int)st;
	}
	if (!rc) {
		rc = res_op(&k, op, &st);
		if (!rc && st)
			rc = (int)st;
	}
	cpd_end(&k);
	return rc;
}

static int destroy_op(uint32_t op)
{
	struct compound k;
	uint32_t st;
	int rc;

	if ((rc = cpd_begin(&k, 1)))
		return rc;
	rpcrdma_xdr_put_u32(k.e, op);
	if (op == OP_DESTROY_SESSION)
		rpcrdma_xdr_put_fixed(k.e, g.sessionid, 16);
	else
		rpcrdma_xdr_put_u64(k.e, g.clientid);
	rc = cpd_run(&k, op == OP_DESTROY_SESSION ? "DESTROY_SESSION" : "DESTROY_CLIENTID");
	if (!rc)
		rc = res_op(&k, op, &st);
	if (!rc && st)
		rc = (int)st;
	cpd_end(&k);
	return rc;
}

/* The local writer: opening the file for writing breaks nfsd's lease (the
 * delegation); open(2) returns once the delegation is returned. */
struct writer {
	char path[512];
	double t0, t1;
	int err;
	bool done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	int fd;

	w->t0 = now_s();
	fd = open(w->path, O_WRONLY | O_APPEND);
	w->err = fd < 0 ? errno : 0;
	if (fd >= 0) {
		if (write(fd, "w", 1) != 1)
			w->err = errno;
		close(fd);
	}
	w->t1 = now_s();
	pthread_mutex_lock(&g.lock);
	w->done = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

static void recall_check(const char *local, const char *name, const struct fh *fh,
			 const struct stateid *ds)
{
	struct writer w = {0};
	pthread_t th;
	unsigned before;
	bool served, came_back;
	int rc;

	snprintf(w.path, sizeof(w.path), "%s/%s", local, name);
	pthread_mutex_lock(&g.lock);
	before = g.cb_recall;
	pthread_mutex_unlock(&g.lock);
	if (pthread_create(&th, NULL, writer_main, &w)) {
		result(false, "CB_RECALL", "pthread_create failed");
		return;
	}
	served = wait_count(&g.cb_recall, before, 40);
	if (served)
		result(true, "CB_RECALL served on the backchannel",
		       "stateid seqid %u (a local writer opened %s)", g.recalled.seqid, w.path);
	else
		result(false, "CB_RECALL served on the backchannel", "none within 40 s");
	if (served) {
		result(memcmp(g.recalled.other, ds->other, 12) == 0, "CB_RECALL names our delegation",
		       "%s", "");
		rc = fh_stateid_op(OP_DELEGRETURN, fh, ds);
		result(rc == 0, "DELEGRETURN", "%s",
		       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "");
	}
	pthread_mutex_lock(&g.lock);
	for (double end = now_s() + 60; !w.done && now_s() < end;) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&g.cond, &g.lock, &ts);
	}
	came_back = w.done;
	pthread_mutex_unlock(&g.lock);
	if (came_back) {
		pthread_join(th, NULL);
		result(w.err == 0, "local writer got the file after the recall",
		       "open(2) took %.2f s%s%s", w.t1 - w.t0, w.err ? ": " : "",
		       w.err ? strerror(w.err) : "");
	} else {
		result(false, "local writer got the file after the recall", "still blocked");
		pthread_detach(th);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: rr_lab_nfs41 -u URL -e EXPORT -l LOCALDIR -f FILE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *url = NULL, *exp = NULL, *local = NULL, *name = NULL;
	struct rpcrdma_client_opts co = {.timeout_ms = 20000, .connect_timeout_ms = 10000,
					 .callback_slots = CB_SLOTS};
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_server *cbs = NULL;
	struct rpcrdma_auth_sys sys;
	struct stateid os, ds;
	struct fh fh;
	uint32_t flags = 0, dtype = 0, why = 0;
	int opt, rc;

	while ((opt = getopt(argc, argv, "u:e:l:f:")) != -1) {
		switch (opt) {
		case 'u': url = optarg; break;
		case 'e': exp = optarg; break;
		case 'l': local = optarg; break;
		case 'f': name = optarg; break;
		default: usage();
		}
	}
	if (!url || !exp || !local || !name)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = rpcrdma_client_create(url, NFS_PROG, NFS_V4, &co, &g.c);
	if (rc == -EPROTONOSUPPORT) {
		printf("%s: transport not built into the library\n", url);
		return 77;
	}
	if (rc) {
		result(false, "connect", "%s: %s", url, rpcrdma_strerror(rc));
		return 1;
	}
	rpcrdma_auth_sys_self(&sys);
	sys.uid = sys.gid = 0;
	sys.ngids = 0;
	rpcrdma_client_set_auth_sys(g.c, &sys);
	/* the callback program, served on this client's connection */
	rc = rpcrdma_client_callbacks(g.c, &so, &cbs);
	if (!rc)
		rc = rpcrdma_server_register(cbs, CB_PROG, 1, 0, h_cb_null, NULL);
	if (!rc)
		rc = rpcrdma_server_register(cbs, CB_PROG, 1, CB_COMPOUND, h_cb_compound, NULL);
	if (!rc)
		rc = rpcrdma_server_start(cbs);
	result(rc == 0, "callback server", "%s", rc ? rpcrdma_strerror(rc) : "program 0x40000000");
	if (rc)
		goto out;
	{
		struct rpcrdma_call *call = NULL;

		rc = rpcrdma_call_create(g.c, 0, &call);
		if (!rc)
			rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
		result(rc == 0, "NULL", "%s", rc ? rpcrdma_strerror(rc) : "");
	}
	if (exchange_id() || create_session())
		goto out;
	/* A CB_NULL probe of the new back channel, if the server sends one
	 * (Linux nfsd does not for NFSv4.1 and later: nfsd4_run_cb_work marks
	 * the channel up without a probe) */
	if (wait_count(&g.cb_null, 0, 5))
		result(true, "CB_NULL served on the backchannel", "%u", g.cb_null);
	else
		printf("skip CB_NULL: the server sent no probe on the new back channel "
		       "(Linux nfsd probes only NFSv4.0 callback channels)\n");
	rc = sequence(true, &flags);
	result(rc == 0, "SEQUENCE + RECLAIM_COMPLETE", "%s",
	       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "");
	rc = sequence(false, &flags);
	result(rc == 0 && !(flags & (SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION)),
	       "SEQUENCE: callback path up", "sr_status_flags %#x%s", flags,
	       rc ? " (SEQUENCE failed)" : "");
	(void)bind_conn();
	/* OPEN, retried while nfsd is in its grace period; without a
	 * delegation (nfsd withholds them while any lock manager, lockd too,
	 * is in grace: WND4_RESOURCE) closed and opened again */
	for (double end = now_s() + 100;;) {
		rc = open_file(exp, name, &os, &fh, &dtype, &ds, &why);
		if (rc == 0 && dtype == 3 && why == 2 && now_s() < end) {
			(void)fh_stateid_op(OP_CLOSE, &fh, &os);
			sleep(2);
			continue;
		}
		if ((rc != NFS4ERR_GRACE && rc != NFS4ERR_DELAY) || now_s() > end)
			break;
		sleep(1);
	}
	result(rc == 0, "OPEN (read, want a read delegation)", "%s",
	       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) :
	       dtype == 1 ? "read delegation granted" : dtype == 2 ? "write delegation granted" :
	       "no delegation");
	if (rc)
		goto out;
	if (dtype == 1 || dtype == 2)
		recall_check(local, name, &fh, &ds);
	else
		printf("skip CB_RECALL: nfsd granted no delegation (open_delegation_type4 %u, "
		       "why_no_delegation4 %u)\n", dtype, why);
	rc = fh_stateid_op(OP_CLOSE, &fh, &os);
	result(rc == 0, "CLOSE", "%s", rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "");
	rc = sequence(false, &flags);
	result(rc == 0 && !(flags & (SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION)),
	       "SEQUENCE after the callbacks: callback path up", "sr_status_flags %#x", flags);
	rc = destroy_op(OP_DESTROY_SESSION);
	result(rc == 0, "DESTROY_SESSION", "%s",
	       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "");
	rc = destroy_op(OP_DESTROY_CLIENTID);
	result(rc == 0, "DESTROY_CLIENTID", "%s",
	       rc ? (rc > 0 ? nfs4err((uint32_t)rc) : strerror(-rc)) : "");
out:
	printf("callbacks served: CB_NULL %u, CB_COMPOUND %u (CB_RECALL %u)%s%s\n", g.cb_null,
	       g.cb_compound, g.cb_recall, g.cb_errors[0] ? ";" : "", g.cb_errors);
	rpcrdma_server_destroy(cbs);
	rpcrdma_client_destroy(g.c);
	return failures ? 1 : 0;
}
