/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Internals of the session (proto/conn/conn.h), shared by its files: the
 * session object, the requester's Call, the responder's request, the
 * reliable-reply objects, completion tokens, and the functions one file of
 * the session offers another. Not for the executor. */
#ifndef RR_PROTO_CONN_INT_H
#define RR_PROTO_CONN_INT_H

#include "common/spare.h"
#include "proto/conn/conn.h"
#include "xdr/xdr.h"

/* Completion tokens: an object pointer (16-byte aligned allocations) with
 * the kind of work in the low 4 bits. */
enum rr_conn_tok {
	TOK_NONE = 0,
	TOK_SEND = 1,        /* a Send with nothing to tell (Call, RDMA_DONE, error) */
	TOK_REPLY = 2,       /* a Reply with RDMA Writes: struct rs_req */
	TOK_CALL_INV = 3,    /* Local Invalidate of a Call's STag: struct rq_call */
	TOK_PULL_READ = 4,   /* RDMA Read of a Read-chunk Reply: struct rq_pull */
	TOK_REQ_READ = 5,    /* RDMA Read of a Call's Read chunk: struct rs_req */
	TOK_EXP_INV = 6,     /* Local Invalidate of an exposed Reply: struct rs_exp */
};
#define TOK(kind, p) ((uint64_t)(uintptr_t)(p) | (uint64_t)(kind))
#define TOK_KIND(t) ((unsigned)((t) & 15u))
#define TOK_PTR(t) ((void *)(uintptr_t)((t) & ~(uint64_t)15u))

/* ---- requester ---- */

enum rq_state { RQ_QUEUED, RQ_SENT, RQ_INVAL, RQ_DONE };

struct rq_pull;

struct rq_call {
	struct rr_conn_rpc *rpc;
	struct rr_xprt_rqst *rq;
	struct rr_cred_node node;
	unsigned nmem;               /* registered entries of @mem */
	enum rq_state state;
	bool has_credit;
	bool sent_once;
	unsigned inv_pending;
	int result;
	bool result_set;
	struct rq_pull *pull;        /* its Reply being pulled */
	struct rq_call *prev, *next;
	/* last: not cleared when the Call is made (2.4 KiB; an entry is
	 * written before it counts in @nmem) */
	struct rr_conn_mem mem[RR_XPRT_MAX_REGS];
} __attribute__((aligned(16)));

/* A Read-chunk Reply being pulled (draft 4.1.2). */
struct rq_pull {
	struct rq_call *k;           /* NULL once the Call is gone */
	uint32_t xid;
	bool inv;                    /* name @stag in Send With Invalidate */
	uint32_t stag;
	uint8_t *buf;
	uint32_t len;
	struct rr_conn_mem mem;
	bool registered;
	struct rr_hdr_seg segs[RR_XPRT_MAX_READS];
	uint32_t nsegs, next, done;
	struct rq_pull *qnext;       /* pulls with Reads still to issue */
	struct rq_pull *anext;       /* every pull */
} __attribute__((aligned(16)));

/* An RDMA_DONE waiting for a send slot. */
struct rq_done {
	uint32_t xid;
	bool inv;
	uint32_t stag;
	struct rq_done *next;
};

/* ---- responder ---- */

/* Fields a request's every Call touches first, reset by one memset up to
 * @read_mem when the request is made (Issue 16 part AF: the reset was 3.9
 * cold lines per call; a static assertion in responder.c keeps it within
 * two); @read_mem is written only for a Call with Read chunks (start_reads,
 * which sets @read_reg), @wmem entry by entry. */
struct rs_req {
	/* cleared when the request is made (up to pub.xreq: RS_REQ_CLEAR) */
	struct rr_xprt_rcall *rc;
	bool read_reg;                /* @read_mem written (start_reads) */
	bool failed;                  /* its Reads failed or its connection went */
	bool delivered;
	bool credited;                /* its Reply is accounted (rs_credit) */
	bool send_pending;            /* a Reply with Writes (or parked) is on its way */
	bool send_done;
	bool orphan;                  /* done before its Reply's Send completed */
	bool reading;                 /* in @reading of the session */
	int send_status;
	unsigned nwmem;               /* registered entries of @wmem */
	/* its @xreq, the executor's, is written whole by the executor: with
	 * the fields above, two lines of 64 bytes (a static assertion in
	 * responder.c; issue 16 part DH) */
	struct rr_conn_sreq pub;
	/* not cleared when the request is made: written before they are
	 * read (the Read path's by start_reads, @snext by a Reply with
	 * Writes) */
	uint32_t next_read, reads_done;
	struct rs_req *next;          /* read queue */
	struct rs_req *rnext;         /* every request reading */
	struct rs_req *snext;         /* every Reply with Writes on its way */
	/* not cleared when the request is made: valid when @read_reg */
	struct rr_conn_mem read_mem;  /* the Read sink */
	/* last: not cleared when the request is made (2.4 KiB; an entry is
	 * cleared and written before it counts in @nwmem) */
	struct rr_conn_mem wmem[RR_XPRT_MAX_ITEMS * 2 + 2];   /* Write sources */
} __attribute__((aligned(16)));
/* The bytes of a request cleared when it is made (rs_on_recv). */
#define RS_REQ_CLEAR offsetof(struct rs_req, pub.xreq)

/* One exposed Read-chunk Reply (draft 4.1.1). */
struct rs_exp {
	struct rr_conn_mem mem;
	uint8_t *buf;
	uint32_t len;
	bool valid;                   /* the peer may still use its STag */
	bool stolen;                  /* invalidated by another XID's RDMA_DONE */
	struct rs_exp *next;          /* rrep_fencing while its Local Invalidate
					 is in flight; rrep_dead once fenced,
					 freed when the connection goes */
} __attribute__((aligned(16)));

/* A Read-chunk Reply waiting for a reservation (reply.c). */
struct rs_park {
	struct rs_req *r;
	struct rr_xprt_reply_plan *plan;
	uint32_t slot;
	uint8_t *buf;                 /* the slot's bytes */
	struct rr_xprt_part *parts;
	unsigned nparts;
	uint64_t deadline;
	struct rs_park *next;
};

/* ---- backchannel (RFC 8167) ---- */

/* A backward Call of the responder: queued under the backward credits,
 * or sent and awaiting its Reply. */
struct bc_call {
	struct rr_conn_rpc *rpc;
	uint32_t xid;
	struct rr_cred_node node;
	bool sent;
	bool has_credit;
	struct bc_call *next;
} __attribute__((aligned(16)));

/* A reverse Call the requester delivered: its own copy of the message. */
struct bc_req {
	struct rr_conn_sreq pub;
	uint8_t *buf;
	uint32_t gen;                 /* the connection it came on */
	bool counted;                 /* holds one of the slots granted */
	struct bc_req *next;
} __attribute__((aligned(16)));

/* ---- the session ---- */

struct rr_conn {
	struct rr_conn_config cfg;
	/* at a line (the session is line-aligned: rr_conn_create), so that
	 * its per-call ops (@ctx to @sent, its last 64 bytes) are one line,
	 * not two, before env, st and up */
	_Alignas(64) struct rr_conn_io io;
	const struct rpcrdma_env *env;
	const struct rpcrdma_env *clock;
	struct rr_xprt_stats *st;
	bool up;
	/* cfg.role == RR_CONN_RESPONDER, and rr_conn_tx_watched's answer,
	 * set once at creation: read at every message, where cfg's lines
	 * were read for nothing else (issue 16 part CT) */
	bool responder, tx_watched;
	uint32_t reads_inflight;
	uint32_t sends_inflight;          /* Sends posted, not completed (a quiet
					     one never told: not counted) */
	uint64_t tx_progress;             /* clock: a Send completed or the
					     first of those in flight went;
					     kept only when watched
					     (rr_conn_tx_watched) */
	/* The fields a Call or a Reply reads or writes, each role's
	 * together, before the large and the rarely used ones: at 100
	 * connections every call finds its connection's lines cold, so
	 * each line here is a cache miss per call (issue 16 part CI). */
	/* requester */
	struct rq_call *calls;            /* every Call not completed, newest first */
	struct rq_call *fresh;            /* the Call rr_conn_submit planned, during
					     its own pump: sent without a replan */
	uint32_t live_stags;
	uint32_t stray_credits;           /* credits of Calls aborted after their
					     Send, taken until their Replies come
					     (the responder counts them until it
					     answers) */
	bool stray;                       /* a Call aborted after its Send: its
					     Reply may still come */
	/* completed Calls kept for reuse: at most RQ_SPARE_CALLS, linked by
	 * their @next (rq_call_take, rq_call_keep). A plain list: the session
	 * is called under its executor's serialization (conn.h "Threads"), so
	 * common/spare.h's atomic exchange and compare-and-swap (for owners
	 * any thread may use) are not needed here (issue 16 part JD). */
	struct rq_call *spare_calls;
	uint32_t nspare_calls;
	struct rr_cred_req rcred;
	struct rq_pull *pullq, *pulls;
	struct rq_done *doneq;            /* RDMA_DONEs to send (rr_conn_on_slot) */
	/* the requester's codec core (its per-call fields first), right
	 * after the requester's fields above */
	struct rr_xprt_requester req;
	/* responder: the fields a Call or a Reply reads or writes, together
	 * (issue 16 part EB: they were ten lines apart, around the
	 * requester's core of 3.3 KiB, in nine lines of 64 bytes), on four
	 * lines of the line-aligned session (part HF: six before): the
	 * reliable Replies' table, whose count (read by every Reply and
	 * rr_conn_in_progress) is its last field, at a line's start; the
	 * credit accounting, its private pool @own first (unused once
	 * joined to a shared pool: the rest of the count's line), its
	 * per-call fields last, on the next line; what a Call touches
	 * (nreqs, plan_tls, the parked Replies and the backward Calls looked
	 * at by every Reply and rr_conn_in_progress); then the codec core,
	 * its per-call fields first (struct rr_xprt_responder). Static
	 * assertions in responder.c. */
	_Alignas(64) unsigned char rrep_pad[(64 - offsetof(struct rr_rrep_table, count) % 64) % 64];
	struct rr_rrep_table rrep;
	struct rr_cred_rsp scred;
	unsigned nreqs;                   /* requests not done */
	/* the plan of the next Reply (request.c rs_plan_get): the thread's
	 * when plan_tls (default allocator), else the connection's own */
	bool plan_tls;
	struct rs_park *parkq;
	struct bc_call *bcalls;           /* responder: backward Calls */
	struct rr_xprt_responder rsp;
	struct rs_park **park_tail;
	struct rr_spare spare_reqs;       /* freed requests kept for reuse (2.5 KiB
					     each, when the loop's shared ones
					     are full: no allocation per Call) */
	/* responder, not read by a Call without Read chunks or Writes */
	struct rs_req *readq;             /* requests with Reads to issue */
	struct rs_req *reading;           /* every request whose Reads are not over */
	struct rs_req *replying;          /* Replies with RDMA Writes, Send pending */
	struct rr_xprt_reply_plan *plan_cache;
	/* responder: reliable Replies (reliable_reply.c; the table's @rrep
	 * above) */
	struct rs_exp *rrep_fencing;      /* Local Invalidate in flight */
	struct rs_exp *rrep_dead;
	uint32_t rrep_forged;
	uint32_t rrep_live;
	uint64_t rrep_bytes;
	/* backchannel (backchannel.c) */
	uint32_t gen;                     /* connections so far (rr_conn_up) */
	bool bc_on;                       /* requester: reverse Calls delivered */
	uint32_t bc_held;                 /* requester: slots taken on this connection */
	struct bc_req *breqs;             /* requester: delivered, not done */
	struct rr_cred_req bcred;         /* responder: backward credits */
	uint32_t bc_orphans;              /* responder: sent backward Calls
					     aborted: a late Reply of one
					     is owed its Receive */
	bool bc_wait_room;                /* responder: a backward Call waits
					     for a free Receive for its Reply
					     (rr_conn_parked, rr_conn_resume) */
	/* set up once, read at connect or not per call */
	struct rr_xprt_stats own_stats;   /* when the config gives none */
	struct rr_pd_conn neg;
	struct rr_xprt_params params;
	uint16_t ord;
	uint64_t peer_host;
};

/* The session's files, bottom up: each calls only the ones above it in
 * this list (cmake/layout-check.py: no call loops). conn.c, the entry
 * points, is the top; what a lower file cannot do itself (send queued
 * Calls when a credit came back, resume parked Replies when a reservation
 * was freed) conn.c does after it. */

/* io.c */
uint64_t rr_conn_now(const struct rr_conn *c);
/* rr_conn_count_proc's @proc for a message shorter than the fixed header
 * (no rdma_proc: its bytes alone counted; no proc has this value). */
#define RR_CONN_PROC_NONE UINT32_MAX
/* Counts a Send posted or a Receive completed of rdma_proc @proc. */
void rr_conn_count_proc(struct rr_conn *c, uint32_t proc, uint32_t len, bool sent);
/* Counts the form of a Send posted or a Receive completed (rdma_proc read
 * from @buf's header). */
void rr_conn_count_form(struct rr_conn *c, const uint8_t *buf, uint32_t len, bool sent);
/* Posts @s and counts it as rdma_proc @proc (the header's, which the
 * caller built); a post failure ends the connection. */
int rr_conn_post_send_proc(struct rr_conn *c, const struct rr_conn_send *s, uint32_t proc);
/* rr_conn_post_send_proc with the rdma_proc read from the header in @slot_buf. */
int rr_conn_post_send(struct rr_conn *c, const struct rr_conn_send *s, const uint8_t *slot_buf);
/* Registration through the executor, counted in live_stags when remote. */
int rr_conn_reg(struct rr_conn *c, struct rr_conn_mem *m);
void rr_conn_unreg(struct rr_conn *c, struct rr_conn_mem *m);
/* Ends the connection (io->close), once. */
void rr_conn_fail(struct rr_conn *c);

/* invalidate.c */
/* Frees the registrations of @k (each still valid counts as locally
 * invalidated: deregistering invalidates it). */
void rq_free_mem(struct rr_conn *c, struct rq_call *k);
/* Posts a Local Invalidate of every STag of @k still valid; returns how
 * many are in flight (0: @k is fenced). */
unsigned rq_invalidate(struct rr_conn *c, struct rq_call *k);
/* One of them completed: true when it was @k's last (@k is fenced). */
bool rq_inv_done(struct rr_conn *c, struct rq_call *k, int status);
/* The peer invalidated @stag with a Send With Invalidate carrying the Reply
 * of @rq (or another Call's STag, an error of the peer's): accounting. */
void rq_remote_inv(struct rr_conn *c, struct rr_xprt_rqst *rq, unsigned valid_before);

/* call.c */
void rq_list_add(struct rr_conn *c, struct rq_call *k);
void rq_set_result(struct rq_call *k, int status);
/* @k is over: its memory and plan go, the upper layer is told. */
void rq_finish(struct rr_conn *c, struct rq_call *k);
/* Fences @k's STags, then finishes it (now or when the last Local
 * Invalidate completes: rq_on_inv). */
void rq_fence(struct rr_conn *c, struct rq_call *k);
/* rq_fence with the finish inlined (rq_on_recv's). */
void rq_fence_reply(struct rr_conn *c, struct rq_call *k);
void rq_on_inv(struct rr_conn *c, struct rq_call *k, int status);
void rq_pull_detach(struct rq_call *k);

/* reliable_reply_pull.c */
void rq_pull_start(struct rr_conn *c, const struct rr_xprt_reply *res);
void rq_pull_on_read(struct rr_conn *c, struct rq_pull *p, int status);
void rq_done_flush(struct rr_conn *c);
void rq_pull_down(struct rr_conn *c);

/* requester.c */
void rq_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len, bool has_inv,
		uint32_t inv_stag);
/* Sends queued Calls while credits allow. */
void rq_pump(struct rr_conn *c);
void rq_up(struct rr_conn *c);
void rq_down(struct rr_conn *c);
void rq_destroy(struct rr_conn *c);

/* request.c */
void rs_reading_del(struct rr_conn *c, struct rs_req *r);
void rs_req_free(struct rr_conn *c, struct rs_req *r);
/* The shared spare requests of @c's loop (cfg.spares), found from the
 * responder core's pointer to its shared spares, which the Call reads
 * anyway, not from cfg's cold lines: NULL when none. */
static inline struct rr_conn_spares *rs_shared_reqs(struct rr_conn *c)
{
	struct rr_xprt_rsp_shared *sh = c->rsp.shared;

	return sh ? RR_CONTAINER_OF(sh, struct rr_conn_spares, rsp) : NULL;
}
/* A freed request, the loop's first (rs_shared_reqs), else the session's
 * own; NULL: none kept. The caller owns it. */
struct rs_req *rs_spare_take(struct rr_conn *c);
/* Keeps @r: true, and it is kept; false (no free slot), the caller still
 * owns it. */
bool rs_spare_put(struct rr_conn *c, struct rs_req *r);
int rs_credit(struct rr_conn *c, struct rs_req *r, bool read_chunk, uint32_t *grant);
/* Tells the executor how many more messages the peer may send (io
 * recv_quota), after any change of the credit accounting. */
void rs_quota(struct rr_conn *c);
/* A message that gets no Reply is settled as one (its grant stays). */
void rs_settle(struct rr_conn *c);
/* A message beyond the peer's permission (RFC 8166 section 4.3.1): counted,
 * the connection ends. */
void rs_overrun(struct rr_conn *c);
/* The grant of a Reply whose accounting was already taken. */
uint32_t rs_last_grant(const struct rr_conn *c);
void rs_send_error(struct rr_conn *c, struct rs_req *r, const uint8_t *msg, size_t len);
void rs_refuse_xid(struct rr_conn *c, struct rs_req *r, uint32_t xid);
struct rr_xprt_reply_plan *rs_plan_get(struct rr_conn *c);
void rs_plan_put(struct rr_conn *c, struct rr_xprt_reply_plan *plan);
void rs_replying_del(struct rr_conn *c, struct rs_req *r);
void rs_release_wmem(struct rr_conn *c, struct rs_req *r);
void rs_reply_sent(struct rr_conn *c, struct rs_req *r, int status);

/* reliable_reply.c */
bool rs_rrep_room(const struct rr_conn *c, uint32_t len);
/* Read-chunk Reply bytes held for the peer change by @delta. */
void rs_rrep_account(struct rr_conn *c, int64_t delta);
void rs_rrep_on_done(struct rr_conn *c, uint32_t idx, uint32_t xid, bool has_inv,
		     uint32_t inv_stag);
void rs_rrep_on_inv(struct rr_conn *c, struct rs_exp *x, int status);
/* A message other than RDMA_DONE came as Send With Invalidate of
 * @inv_stag (a requester has no reason to: the provider invalidated one of
 * our STags all the same): the Reply it exposed is treated as stolen. */
void rs_rrep_on_stray_inv(struct rr_conn *c, uint32_t inv_stag);
void rs_rrep_to_err_chunk(struct rr_conn *c, struct rs_req *r, struct rr_xprt_reply_plan *plan,
			  uint8_t *buf, uint32_t *grant);
int rs_rrep_expose(struct rr_conn *c, struct rs_req *r, struct rr_xprt_reply_plan *plan,
		   uint8_t *buf, uint32_t *grant);
void rs_rrep_tick(struct rr_conn *c, uint64_t now);
uint64_t rs_rrep_next(const struct rr_conn *c);
void rs_rrep_down(struct rr_conn *c);
void rs_rrep_free_all(struct rr_conn *c);

/* reply.c */
int rs_reply_finish(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
		    unsigned nparts, struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf,
		    bool settled, bool *err_chunk);
void rs_tick_stall(struct rr_conn *c, uint64_t now);
/* Whether the Sends' progress is watched (rs_tick_stall: a responder with
 * a send timeout); else tx_progress is not kept (no clock read per Send
 * and per Send completion on a requester). */
/* The session's kept completed Calls (struct rr_conn spare_calls): at
 * most this many, as common/spare.h keeps for its owners. */
#define RQ_SPARE_CALLS RR_SPARE_SLOTS

/* A kept Call (its fields as its last user left them: the caller clears
 * them), or NULL: none kept. */
static inline struct rq_call *rq_call_take(struct rr_conn *c)
{
	struct rq_call *k = c->spare_calls;

	if (k) {
		c->spare_calls = k->next;
		c->nspare_calls--;
	}
	return k;
}

/* Keeps completed Call @k (out of c->calls) for reuse: true, and @c owns
 * it; false (RQ_SPARE_CALLS kept), and the caller still owns it. */
static inline bool rq_call_keep(struct rr_conn *c, struct rq_call *k)
{
	if (c->nspare_calls >= RQ_SPARE_CALLS)
		return false;
	k->next = c->spare_calls;
	c->spare_calls = k;
	c->nspare_calls++;
	return true;
}

static inline bool rr_conn_tx_watched(const struct rr_conn *c)
{
	return c->tx_watched;   /* cfg.role == RR_CONN_RESPONDER && cfg.send_timeout_ns */
}
void rs_park_resume(struct rr_conn *c, uint64_t now);
void rs_park_fail_all(struct rr_conn *c);
uint64_t rs_park_next(const struct rr_conn *c);

/* responder.c */
void rs_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len);
void rs_on_read(struct rr_conn *c, struct rs_req *r, int status);
void rs_down(struct rr_conn *c);
void rs_destroy(struct rr_conn *c);
/* The failed-Read table (struct rr_conn_failed). */
void rs_failed_note(struct rr_conn *c, uint32_t xid);

/* backchannel.c */
/* A received message of the reverse direction (requester: a Call;
 * responder: a Reply, or an RDMA_ERROR for a backward Call) is taken here
 * (true: its Receive reposted); false: not one, the role's own path takes
 * it. */
bool bc_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len);
/* Requester: whether @buf may be a reverse Call, the one word that tells
 * (RFC 8167 section 4.2: a reverse message has three empty chunk lists, so
 * its RPC msg_type is word 8, CALL = 0). False exactly where bc_on_recv
 * would say false at a requester (its first test, bc_maybe, needs that word
 * to be CALL): a forward Reply skips the call and its nine-word decode. */
static inline bool bc_may_be_call(const uint8_t *buf, uint32_t len)
{
	struct rr_xdr_dec d;
	const uint8_t *hdr;
	uint32_t mtype;

	rr_xdr_dec_init(&d, buf, len);
	return !rr_xdr_get_fixed_ref(&d, 8 * 4, &hdr) && !rr_xdr_get_u32(&d, &mtype) &&
	       mtype == 0 /* CALL */;
}
/* Responder: whether @buf may be a reverse Reply or an RDMA_ERROR, the two
 * words that tell: word 8 (the RPC msg_type of a message with three empty
 * chunk lists) is REPLY = 1, or word 3 (rdma_proc, RFC 8166 section 4.2.1)
 * is RDMA_ERROR. False exactly where bc_on_recv would say false at a
 * responder (its first tests, bc_maybe and bc_maybe_error, need one of the
 * two): a forward Call skips the call and its nine-word and four-word
 * decodes (issue 16 part BE). */
static inline bool bc_may_be_reply(const uint8_t *buf, uint32_t len)
{
	struct rr_xdr_dec d;
	const uint8_t *skip;
	uint32_t w;

	rr_xdr_dec_init(&d, buf, len);
	if (rr_xdr_get_fixed_ref(&d, 3 * 4, &skip) || rr_xdr_get_u32(&d, &w))
		return false;
	if (w == RR_HDR_ERROR)
		return true;
	return !rr_xdr_get_fixed_ref(&d, 4 * 4, &skip) && !rr_xdr_get_u32(&d, &w) &&
	       w == 1 /* REPLY */;
}
void bc_up(struct rr_conn *c);
void bc_down(struct rr_conn *c);
/* Responder: sends queued backward Calls while credits and slots allow. */
void bc_pump(struct rr_conn *c);
void bc_destroy(struct rr_conn *c);

#endif
