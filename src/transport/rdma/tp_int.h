/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Internals of the RDMA transport's executor (transport/rdma/tp.h), shared
 * by its files: provider contexts shared by the process (ctx.c), what one
 * progress loop of the engine (src/engine) has for one context -- a CM
 * channel and completion queues shared by its connections (port.c) -- the
 * endpoint (a client, a server's listener, a server's shard: the
 * connections of one server on one loop), one connection's provider
 * resources (PD, QP, Receive buffers, send slots) and the session that
 * makes its protocol decisions (proto/conn/conn.h), and the work request
 * ids. The executor turns the session's actions into provider work
 * requests and the provider's completions into session inputs; it makes no
 * protocol decision. Lock: one mutex per endpoint (ep->lock) held around
 * every session call; an endpoint lives on one loop, so its lock is taken
 * by other threads only when they call the API (or receive for themselves
 * as a synchronous caller). */
#ifndef RR_TRANSPORT_RDMA_TP_INT_H
#define RR_TRANSPORT_RDMA_TP_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/listen.h"
#include "engine/engine.h"
#include "proto/conn/conn.h"
#include "rdma/provider.h"
#include "transport/rdma/tp.h"

/* Work request ids: type in the low 4 bits, index or pointer above. */
enum { WR_RECV = 1, WR_SEND = 2, WR_TOKEN = 3, WR_BIND = 4, WR_WRITE = 5, WR_PUSH = 6 };
#define WRID(t, v) (((uint64_t)(uintptr_t)(v) << 4) | (uint64_t)(t))
#define WRID_TOK(tok) (((uint64_t)(tok) << 4) | (uint64_t)WR_TOKEN)
#define WRTYPE(id) ((unsigned)((id) & 15u))
#define WRVAL(id) ((id) >> 4)
#define WRPTR(id) ((void *)(uintptr_t)WRVAL(id))

/* Receives a requester lends out as inline Replies at once. */
#define TP_LEND_MAX 4u
/* A client posts its Receives by demand, this many at most per post (one
 * chain): a post per TP_RECV_BATCH Calls, as many Receives posted beyond
 * the demand at most TP_RECV_BATCH - 1 (conn.c "Receives by demand"). */
#define TP_RECV_BATCH 4u
/* ... and this many posted beyond what its peer may send (a few messages
 * it may send unasked, a rogue's or a lost Call's, received while nobody
 * looks: dropped, not an overrun of the queue) */
#define TP_RECV_SLACK 4u
/* A client's Receive buffers beyond its credits and bc_slots: the slack,
 * the batch's surplus and those lent (conn.c "Receives by demand"). */
#define TP_CL_RECV_EXTRA (TP_RECV_SLACK + TP_RECV_BATCH - 1 + TP_LEND_MAX)
/* Deferred Replies (server, answered on the progress thread). */
#define SV_DEFER_WR 5u   /* a deferred Reply: up to 4 RDMA Writes + Send */
#define SV_DEFER_MAX 32u /* deferred Replies per connection before a post */
/* Room for this many first (cn->dcap), SV_DEFER_MAX once a batch filled
 * it: a connection's first Reply asks for 2.4 KiB, not 15 (part CH). */
#define SV_DEFER_FIRST 4u
#define SV_DEFER_NS 200000u  /* nor older than this (slow inline handlers) */
#define TP_EXPO_MAX 64   /* push-mode regions per connection */

struct tp_ep;
struct tp_expo;
struct tp_pool;

/* Send slots are grown by need: chunks of TP_SLOTS_FIRST, then doubling,
 * up to the connection's nsend, each mapped and registered once. */
#define TP_SLOTS_FIRST 4u
#define TP_SLOT_CHUNKS 24
/* Free slots kept as bits in struct tp_conn (the rest on a stack): issue
 * 16 part DC. */
#define TP_SFREE_BITS 64u

/* A client's Sends, and a server's quiet ones (Replies without Writes), go
 * unsignaled, at most TP_UNSIG_RUN in a row, then one signaled, whose
 * completion tells that those before it are done too (a send queue
 * completes in order): unsig_* in conn.c. At most TP_UNSIG_MAX
 * wait for that completion; their sequence numbers ride, TP_UNSIG_MASK
 * wide, in the signaled Send's wr_id (above its slot). A synchronous
 * client's signaled Send costs no turn of its own on soft: the own wait
 * keeps its completion for the Reply that comes in its first slice and
 * returns both in one batch (soft cq_wait.c, issue 16 part IB), fed by
 * tp_cq_wait_once through feed_ex. A run holds its slots until that
 * completion, so a client's first chunk of slots (TP_CL_SLOTS_FIRST) holds
 * a whole run and its signaled Send: fewer, and the run would end when
 * the slots do (the last free one is sent signaled). A server's first
 * chunk (TP_SLOTS_FIRST) ends its run at three: one Reply in four signaled
 * at one Call at a time, its loop's turn for that completion saved. */
#define TP_UNSIG_RUN 7u
#define TP_CL_SLOTS_FIRST (TP_UNSIG_RUN + 1u)
#define TP_UNSIG_MAX 8u
#define TP_UNSIG_MASK 0x0fffffffu
#define WRID_SEND(slot, mark) \
	(((((uint64_t)(mark) & TP_UNSIG_MASK) << 32 | (uint32_t)(slot)) << 4) | (uint64_t)WR_SEND)
#define WRMARK(id) ((uint32_t)(WRVAL(id) >> 32) & TP_UNSIG_MASK)
/* The slot number of a quiet Sends' probe (tp_quiet_watch): none. */
#define TP_PROBE_SLOT 0xffffffffu
struct tp_slots {
	uint8_t *mem;
	struct rpcrdma_mr *mr;
	uint32_t first, n;           /* slots [first, first + n) */
	uint32_t lkey;               /* @mr's, read once (each Send's SGE) */
};
struct tp_conn;
struct tp_port;

/* A provider context shared by the endpoints of one provider, device,
 * environment, spin budget and role (ctx.c): one soft "NIC" thread per
 * context, not per connection. */
struct tp_ctx {
	struct rpcrdma_context *ctx;
	struct rpcrdma_caps caps;    /* queried once */
	char provider[16];
	char device[64];             /* as asked ("" : by address) */
	const struct rpcrdma_env *env;
	uint32_t spin_us;
	bool passive;
	unsigned refs;               /* endpoints (ctx.c lock) */
	struct tp_port *ports;       /* one per loop, made on demand */
	struct tp_ctx *next;
};

/* A completion queue shared by connections of one port, up to its
 * capacity (soft: many per CQ, a CQ costs three fds; verbs: one). One
 * consumer at a time polls it: the loop, or a caller thread receiving for
 * itself (owner). Its fd is watched by the loop while some connection on
 * it wants the loop to drain it (want: every server connection, a client
 * with asynchronous work) and no caller holds it. */
enum { TP_CQ_FREE = 0, TP_CQ_LOOP = 1, TP_CQ_CALLER = 2 };
struct tp_cq {
	struct tp_port *port;
	struct rpcrdma_cq *cq;
	struct rr_loop_src src;
	uint32_t cap, used;          /* cqe reserved by its QPs (port lock) */
	unsigned nconn;              /* port lock */
	unsigned creating;           /* reserved, their QP not created yet (port lock) */
	unsigned releasing;          /* a destroyed QP's last completions are
					being polled, dropped by its pointer:
					no QP is created on it meanwhile, which
					could reuse that address (port lock) */
	bool closed;                 /* the provider refused a QP on it (it
					overran, or its entries are taken by
					its QPs' queues), or it failed: no new
					connection is placed on it (port lock) */
	atomic_int err;              /* failed for good (a poll, an arm or a
					wait answered this errno: tp_cq_failed):
					never polled, armed or watched again */
	struct tp_conn *conns;       /* its connections whose QP was created
					and whose id is not destroyed yet
					(linked by qnext, port lock) */
	pthread_mutex_t lock;        /* want, watched, armed */
	unsigned want;
	atomic_bool wanted;          /* want > 0, for a look without the lock */
	bool armed;                  /* the loop armed it and no notification
					was consumed since: the provider counts
					on the loop to come (soft: nobody else
					serves its sockets), so it is watched.
					Written only by the holder of the role
					(owner), under the lock */
	bool watched;                /* its fd is in the loop's set */
	bool added;                  /* ever added to the loop's set */
	atomic_int owner;
	atomic_bool missed;          /* the loop must serve it once its holder
					lets go (tp_cq_release posts the task):
					the loop found it held, or the holder
					may have used up the loop's arm */
	atomic_bool no_qp_wait;      /* the provider has no wait_qp (a hint,
					written once, read without a lock) */
	struct rr_loop_task task;    /* a drain, after a caller let go; fn
					set once, under the lock, atomically
					(tp_cq_release reads it without) */
	struct tp_cq *next;
};

/* What one loop has for one context (port.c): a CM channel (connection
 * requests of listeners made here, events of connections made here) and
 * CQs. cm_lock orders reading the channel against destroying ids: an
 * event taken from the channel is handed to its endpoint under it, and an
 * id destroyed under it has no event in flight any more. */
struct tp_port {
	struct tp_ctx *tc;
	struct rr_loop *loop;
	struct rpcrdma_cm_channel *ch;
	struct rr_loop_src ch_src;
	pthread_mutex_t cm_lock;
	pthread_mutex_t lock;        /* cqs, refs */
	struct tp_cq *cqs;
	unsigned refs;
	struct rr_loop_task gc;      /* frees the CQs left without connection */
	struct tp_port *next;
};

/* A CM event handed to its endpoint's loop (its connection's slots, or
 * allocated: connection requests). */
struct tp_ev {
	struct rpcrdma_cm_event ev;
	struct tp_conn *cn;
	bool heap, used;
	struct tp_ev *next;
};
#define TP_CONN_EVS 2

/* What an endpoint kind does with what its loop brings (function
 * pointers: port.c and progress.c name no endpoint kind). */
struct tp_ep_ops {
	/* a CM event of one of its connections (lock held) */
	void (*on_cm)(struct tp_ep *ep, const struct rpcrdma_cm_event *ev);
	/* after completions of its connections were fed in (lock held; may
	 * drop and take it again): ends asked for, upcalls, deferred posts */
	void (*after)(struct tp_ep *ep);
	/* its turn on its loop (lock held): posted by tp_ep_kick */
	void (*turn)(struct tp_ep *ep);
	/* a connection's ESTABLISHED waits for the endpoint's next turn
	 * (kicked by something else, or its timer, which must then be
	 * armed while it has connections): no kick, no wake-up of its own.
	 * For an endpoint whose on_cm does nothing with it that the first
	 * messages need (a server's shard: the ORD, 1 until then, and the
	 * idle sweep's eligibility) */
	bool lazy_established;
};

/* One connection (either role). Issue 16 part BJ: the fields a call
 * touches (either side: its completions, its slot, its Send, its Receive)
 * come first, packed into ~4 lines of 64 bytes, then the first chunk of
 * slots (read by every Send), then the cold ones; a call at 100
 * connections finds every line of its connection evicted since its last
 * call, so each line spread out costs a miss per call. Keep new per-call
 * fields in the hot part and the rest below @sch. */
struct tp_conn {
	/* ---- hot: every call ---- */
	struct tp_ep *ep;
	struct rr_conn *sess;        /* its session (client: the client's) */
	struct rr_qp_seen seen;      /* its completions fed from the CQ
					(progress.c feed_ex, lock held) */
	struct rpcrdma_qp *qp;
	struct rpcrdma_cq *cq;       /* tcq->cq */
	struct tp_cq *tcq;           /* its share of a port's CQ */
	struct tp_pool *pool;        /* responder: Receives of a shared queue */
	uint8_t *rbuf;               /* its own Receives (no pool) */
	uint64_t *stoken;            /* per slot: the session's token of its Send */
	/* the free send slots: those below TP_SFREE_BITS as bits here (the
	 * lowest taken first), the rest on the stack @sfree (part DC: no
	 * line of an array of its own per call) */
	uint64_t sfree_bits;
	uint32_t nsfree;             /* free slots, bits and stack together */
	uint32_t nsch, nslots;       /* chunks and slots allocated */
	uint32_t ssize, rsize;       /* bytes of a slot, of a Receive */
	/* its unsignaled Sends not known done, oldest first (their slots, a
	 * ring at uhead; their sequence numbers consecutive, the newest
	 * uposted - 1), how many were posted (the next one's sequence
	 * number), how many since the last signaled one */
	uint32_t uhead, ucount, uposted, urun;
	uint32_t ndefer;
	bool established, dead;
	bool closing;                /* the session asked to end it (io close) */
	bool signal_writes;          /* RDMA Writes signaled: see conn_new */
	bool in_wait;                /* a caller thread waits on cq unlocked: not freed */
	bool dlisted;                /* in ep->deferred (a look, not a walk) */
	/* read at every call (tp_cq_want, cl_settle): beside the flags above,
	 * in the bytes before nrx (issue 16 part CI) */
	bool wants;                  /* counted in tcq->want */
	bool cm_lost;                /* an event could not be handed: it ends */
	uint32_t nrx, idle_nrx;      /* its Receives; responder: as the last idle sweep saw them */
	uint64_t last_rx_ns;         /* responder: its last Receive, or a time
				      * after it (idle: tp_sv_idle_sweep) */
	uint32_t lent;               /* Receives lent as rpc->reply */
	/* client: its own Receives posted by demand (conn.c "Receives by
	 * demand"): how many are posted now, how many of them are for the
	 * backward direction (bc_slots: always posted), how many are free
	 * (on @rfree, the most recently freed on top) */
	uint32_t rposted, rbase, nrfree;
	uint32_t *rfree;             /* client: its free Receives, a stack of
					@nrecv (NULL: a server's) */
	/* client: Receives given back by released Replies without the
	 * endpoint's lock (tp_conn_unlend_later), TP_LEND_MAX lanes of 16
	 * bits, each a Receive's index + 1 (0: empty); still counted in @lent
	 * until taken under the lock (tp_conn_unlend_drain) */
	_Atomic uint64_t rel;
	uint32_t uslot[TP_UNSIG_MAX];
	/* responder, Replies answered on the progress thread: their work
	 * requests (SV_DEFER_WR each, in answer order), chained and posted at
	 * once after the batch of upcalls (tp_post_deferred). */
	struct rpcrdma_send_wr *dwr;
	struct rpcrdma_sge *dsge;
	uint32_t dcap;               /* Replies dwr has room for (0: none yet) */
	bool dgrow;                  /* a batch filled dcap: SV_DEFER_MAX next */
	/* a client's connection without signal_writes: any of its Sends
	 * without Writes or invalidation may go unsignaled (a server's only
	 * when quiet); set with signal_writes (conn_new, tp_conn_unsig_setup),
	 * read at every Send (tp_unsig_choose). In the hole after dgrow: no
	 * field moved. */
	bool unsig_calls;
	struct tp_conn *dnext;       /* ep->deferred: connections with some */
	uint64_t defer_t0;           /* ns: when the first of them was deferred */
	struct tp_slots sch[TP_SLOT_CHUNKS]; /* send slots; after the first
					chunk's, 4 zero bytes (pad source) */
	/* server: the quiet Sends' watch (tp_quiet_watch): the oldest one's
	 * sequence number as its walk last saw it, and since when (the
	 * session's clock); a probe posted, its completion not yet come */
	uint32_t qw_seq;
	bool qw_on, qprobe;
	uint64_t qw_t0;
	/* ---- cold: set up, torn down, rare paths ---- */
	uint32_t *sfree;             /* free slots from TP_SFREE_BITS on, a stack
					(NULL: nsend <= TP_SFREE_BITS) */
	uint32_t nsfree_hi;          /* on @sfree */
	struct rpcrdma_pd *pd;
	struct tp_conn *qnext;       /* tcq->conns (port lock) */
	uint32_t cqe;                /* reserved in it */
	struct rpcrdma_cm_id *id;
	struct tp_port *chport;      /* whose channel has its id (NULL: ep's) */
	bool own_pd;                 /* @pd is the connection's (else its pool's) */
	uint32_t caps_drop;          /* RR_PD_EXT_CAP_* it goes without (its
					pool's shared PD: pool_caps_drop) */
	struct rpcrdma_mr *rmr;
	uint32_t rlkey;              /* @rmr's, read once (each Receive's SGE) */
	uint32_t nrecv;
	uint32_t nsend;              /* slots at most */
	uint16_t ord;
	bool use_mw;
	bool closing_idle;           /* closed for idleness: not a fatal error */
	int err;                     /* conn_new: what failed (conn_ok false) */
	uint32_t pushing;            /* client: pushes with an MR in pd: not freed */
	unsigned refs;               /* server: its own + iteration guards */
	struct tp_conn *next;
	struct sockaddr_storage peer; /* responder: the requester's address */
	bool has_peer;
	bool commit;                 /* RDMA Commit negotiated and enabled */
	struct tp_expo *expo;        /* responder: exposed push-mode regions */
	struct tp_ev evs[TP_CONN_EVS];   /* its CM events on their way */
	struct rr_tp_bc *bcs;        /* responder: opened for backward Calls */
	/* server: its session's actions (ctx: it), copied by the session
	 * when made */
	struct rr_conn_io io;
};
/* The hot part and the first chunk of slots (read by every Send) stay
 * within 5 lines of 64 bytes (280 + 32 bytes now): a field added there
 * that does not fit belongs below. (Part DC's tokens of the first slots
 * inline here pushed sch[0] into a sixth line and saved nothing: gone.) */
_Static_assert(offsetof(struct tp_conn, sch) + sizeof(struct tp_slots) <= 5 * 64,
	       "struct tp_conn's per-call fields and first chunk of slots fit 5 cache lines");

/* The free send slots (conn.c): @n slots from @first made free (a new
 * chunk); the lowest free one taken (false: none); @slot put back (one
 * not taken, or >= nslots, is ignored). */
void tp_slots_add(struct tp_conn *cn, uint32_t first, uint32_t n);
bool tp_slot_take(struct tp_conn *cn, uint32_t *slot);
void tp_slot_put(struct tp_conn *cn, uint32_t slot);
/* Whether @slot is free (a look for tests: the stack walked). */
bool tp_slot_is_free(const struct tp_conn *cn, uint32_t slot);
/* A Send in @slot was posted, unsignaled (@unsig: its slot into the ring
 * of those waiting) or signaled (the run ends). */
void tp_unsig_posted(struct tp_conn *cn, uint32_t slot, bool unsig);
/* A Send completion carrying @mark came (the Send in @self): the
 * unsignaled Sends posted before the mark are done, their slots put back
 * (as tp_slot_put). Returns whether @self was one of them; *@nother: how
 * many others. */
bool tp_unsig_release(struct tp_conn *cn, uint32_t mark, uint32_t self, unsigned *nother);

/* A server connection opened for backward Calls (tp.h). */
struct rr_tp_bc {
	struct tp_shard *sh;         /* the connection's (its lock) */
	struct tp_conn *cn;          /* NULL once the connection is gone */
	rr_tp_complete_fn complete;
	void *ctx;
	struct rr_tp_bc *next;       /* the connection's */
};

/* What every endpoint has: a client, a server's listener, a server's
 * shard (its connections on one loop). */
struct tp_ep {
	/* (its configuration, read at set-up, is last: a client's hot
	 * fields, which precede its endpoint, run on into the endpoint's
	 * own, docs/PERFORMANCE.md "Issue 16 part CS") */
	const struct rpcrdma_env *env;
	struct tp_ctx *tc;               /* shared context */
	struct rpcrdma_context *ctx;     /* tc->ctx */
	struct tp_port *port;            /* on its loop */
	/* What a drain touches per endpoint it feeds (progress.c feed_ex,
	 * touched_after, tp_ep_unpin), together: two cache lines at most
	 * rather than four (stop, the touched list's and the pins' fields
	 * and stats.cq_polls were each in a line of their own; a client at
	 * 100 connections is one endpoint per completion, docs/PERFORMANCE.md
	 * "Issue 16 part CQ"). */
	struct rr_loop *loop;
	const struct tp_ep_ops *ops;
	struct rr_lock lock;             /* the library's own (common/lock.h):
					    taken ~3 times per Call by a
					    server (issue 16 part BV) */
	struct rr_cond cond;             /* waited on with rr_engine_cond_wait */
	struct tp_ep *touched_next;      /* a drain's list (its consumer's) */
	/* stats.cq_polls, counted here (under the lock, its only writer;
	 * atomic: tp_fault_fold reads it without the lock) */
	_Atomic uint64_t cq_polls;
	unsigned pins;           /* in a drain's list, or in its turn: not
				    freed before 0 (tp_ep_quiesce) */
	/* A shard's waits on @cond are all counted in cond_waits (server.c
	 * sv_wait, under the lock): its last pin going wakes @cond only when
	 * a thread waits there, or once stopping (tp_ep_unpin). A client's
	 * and a listener's are not counted: theirs always wake it (a
	 * synchronous caller waits for its completions fed by another
	 * thread's drain through that wake-up, tp_cq_wait_once). */
	unsigned cond_waits;
	bool waits_counted;
	bool touched;
	bool stop;
	/* read per message (conn.c conn_send, unsig_*, tp_on_wc): here, in
	 * the line above, not in one of their own (part CS) */
	bool is_server;
	bool defer;              /* server: Sends posted now may wait for the
				    end of the batch (sv_post_deferred) */
	bool adv_r;              /* the R bit we advertise */
	struct rr_loop_task kick;        /* its turn (ops->turn) */
	bool detached;                   /* under evq_lock: off its loop, the
					    kick is never posted again (a
					    queued task of freed memory would
					    cut the loop's task list) */
	struct rr_loop_timer timer;      /* client: reconnect; shard: ticks;
					    both: a sweep put off */
	bool timer_ok;
	struct rr_lock evq_lock;         /* a leaf: its CM events */
	struct tp_ev *evq, **evq_tail;
	bool cm_lost;                    /* (evq_lock) an event of one of its
					    connections was lost (cn->cm_lost) */
	struct rr_xprt_stats stats;
	_Atomic uint64_t cq_refused;     /* stats.cq_refused, counted where
					    the lock may not be held
					    (faults.c tp_fault_fold) */
	struct tp_conn *grave;   /* dead connections, freed by grave_sweep */
	/* server: connections with deferred Replies (linked by dnext), and
	 * how many asked to be closed since the last look: the work after a
	 * batch does not walk every connection */
	struct tp_conn *deferred;
	unsigned closing_asked;
	struct rr_tp_conf conf;
};
/* What a drain and a message read of the endpoint (env .. adv_r) fits in
 * two lines of 64 bytes, from its start (part CS). */
_Static_assert(offsetof(struct tp_ep, kick) <= 2 * 64,
	       "struct tp_ep's per-message fields fit 2 cache lines");

/* Lock held: a pin of @ep goes (tp_ep_quiesce waits for the last; so do
 * the waiters of a drain's after-work, woken by it). A shard's last pin
 * wakes nobody when nobody waits: the loop's drain unpins its shard twice
 * per call (the Call's round, its Reply's Send's round), a broadcast each
 * with nobody to wake (issue 16 part AO). */
static inline void tp_ep_unpin(struct tp_ep *ep)
{
	if (--ep->pins == 0 && (!ep->waits_counted || ep->cond_waits || ep->stop))
		rr_cond_broadcast(&ep->cond);
}

/* A push-mode operation of the client, waited for by its caller (push.c). */
struct tp_push_op {
	uint32_t seq;
	bool done;
	bool commit;
	enum rpcrdma_wc_status status;
	uint32_t remote_status;
	uint32_t len;
	struct tp_push_op *next;
};


/* A client. Issue 16 part CS: what a Call reads or writes of it (submit,
 * its Send, its completions, the upcall) comes first, followed at once by
 * the endpoint's own per-message fields (struct tp_ep starts with them):
 * three lines of 64 bytes where they were spread over eight (at 100
 * connections every line of a client is cold at its next Call). Keep new
 * per-call fields above @ep, the rest below it. */
struct rr_tp_client {
	/* ---- hot: every Call ---- */
	struct rr_conn *sess;
	struct tp_conn *conn;
	struct rr_conn_rpc *done, **done_tail;   /* completed, upcall pending */
	rr_tp_complete_fn complete;
	void *cctx;
	struct rr_conn_rpc *wait_for; /* submit reserved the waiter role for it */
	struct tp_push_op *pushes;  /* push-mode operations in flight */
	/* backchannel: reverse Calls to the upper layer, without the lock */
	struct rr_conn_sreq *bc_in, **bc_in_tail;
	uint64_t reconnect_at;  /* ns; 0: none scheduled */
	int connect_status;     /* 1 while the first connect is pending */
	bool destroying;
	bool waiter;            /* a caller thread is receiving (rr_tp_client_wait) */
	bool bc_on;
	struct tp_ep ep;
	/* ---- cold: set up, tests, rare paths ---- */
	rr_tp_abort_asked_fn abort_asked;   /* rr_tp_client_abort_asked */
	struct rr_conn_io io;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	rr_tp_destroy_hook_fn destroy_hook;   /* tests (rr_tp_client_destroy_hook) */
	void *destroy_hook_arg;
	uint32_t push_seq;
	rr_tp_push_hook_fn push_hook;   /* tests (rr_tp_client_push_hook) */
	void *push_hook_arg;
	rr_tp_bc_recv_fn bc_recv;
	void *bc_ctx;
	unsigned bc_running;        /* bc_recv upcalls running (unlocked) */
};
_Static_assert(offsetof(struct rr_tp_client, ep) <= 2 * 64 - 16,
	       "struct rr_tp_client's per-call fields precede its endpoint's within 2 lines");

/* A shared receive pool (pool.c). */
#define TP_POOL_CHUNK 64u        /* Receives mapped and registered at once */
#define TP_POOL_SPARE 32u        /* free Receives kept posted (rr_cred_pool) */
struct tp_chunk {
	uint8_t *mem;                /* NULL: not allocated */
	struct rpcrdma_mr *mr;
	uint16_t free[TP_POOL_CHUNK]; /* buffers neither posted nor held */
	uint32_t nfree;
};
struct tp_pool {
	struct tp_ep *ep;
	unsigned key;                /* its progress thread */
	struct rpcrdma_pd *pd;       /* its buffers' (and, with share_pd, its
					connections') */
	struct rpcrdma_srq *srq;
	struct rr_cred_pool cred;    /* the accounting its sessions share */
	bool share_pd;               /* the provider needs the QPs in @pd */
	bool quota;                  /* the provider bounds each QP's take */
	/* with @quota: the provider's op behind rpcrdma_qp_recv_quota, called
	 * directly per Reply (s_recv_quota): its checks hold by construction
	 * (every QP of the pool was made on @srq; the op exists, @quota says
	 * so), and the public entry's walk qp -> pd -> ctx -> ops read the
	 * connection's own PD, a cold line per call at 100 connections */
	int (*quota_op)(struct rr_qp *qp, uint32_t add);
	uint32_t rsize;
	struct tp_chunk *chunks;
	uint32_t nchunks;
	uint32_t hi;                 /* chunks [hi, nchunks) are not mapped */
	uint32_t limit;              /* low-water mark armed (0: none) */
	uint32_t conns;              /* connections made on it, not yet freed */
	uint64_t empty_since;        /* ns: when its last connection was freed */
};
/* A pool whose connections are all gone is freed after this long (its
 * queue's posted Receives can go back to the system no other way). */
#define TP_POOL_RETIRE_NS 1000000000ull

/* A server's connections on one progress loop: they are served there,
 * under the shard's lock, independently of the other shards. */
struct tp_shard {
	struct tp_ep ep;
	struct rr_tp_server *srv;
	/* its shared receive pool (made with its first connection; none:
	 * no_pool), and whether a Read-chunk Reply of one of its connections
	 * may wait for a free Receive (tp_sv_pools_refill looks then) */
	struct tp_pool *pool;
	bool no_pool;
	bool parked;
	struct tp_conn *conns;
	unsigned nconns;
	struct rr_conn_sreq *deliver, **deliver_tail;   /* upcall outside the lock */
	/* Replies of rr_tp_server_reply_async whose Send completed (or
	 * failed): their sent upcalls run without the lock (sv_sent_upcalls). */
	struct rr_conn_sreq *sent_head, **sent_tail;
	/* backward Calls completed: their upcalls run without the lock
	 * (tp_sv_bc_upcalls) */
	struct rr_conn_rpc *bc_done, **bc_done_tail;
	uint64_t idle_look_ns;     /* next idle sweep (sv_idle_sweep) */
	uint64_t timers_ns;        /* next walk of its connections' timers
				      (sv_turn; real time) */
	/* freed requests and Call contexts of its sessions, for the next
	 * Call of any of them (still in cache; issue 16 part GF); emptied
	 * in shard_free after the last of them */
	struct rr_conn_spares spares;
};

struct rr_tp_server {
	/* the listener: its loop reads the listener's CM channel and sets
	 * connections up (admission, resources), each on a shard chosen
	 * round-robin */
	struct tp_ep ep;
	struct tp_conn lconn;      /* user context of the listening id */
	struct rpcrdma_cm_id *listen_id;
	int port;                  /* listening port */
	atomic_bool stopping;      /* rr_tp_server_stop: refuse new connections */
	rr_tp_recv_fn recv;
	void *rctx;
	struct rr_conn_io io;
	struct tp_shard **shards;  /* one per engine loop */
	unsigned nshards, next_shard;
	atomic_uint nconns;        /* every shard's (limits) */
	/* shared by every shard's sessions (atomics there) */
	struct rr_conn_failed failed;   /* XIDs whose RDMA Read failed */
	uint64_t rrep_bytes;       /* Read-chunk Reply bytes held, all
				      connections (reply_mem_total) */
	atomic_uint_fast64_t expo_seq;  /* ids of exposed push-mode regions */
	struct rr_listen_stats lstats_gone;   /* of the listener stop destroyed */
	/* the listening socket watched by the listener's loop, which accepts
	 * and reads the MPA Requests itself (rr_cm_listen_drive; the soft
	 * provider): ldriven under ep.lock */
	struct rr_loop_src lsrc;
	bool ldriven;
	rr_tp_destroy_hook_fn destroy_hook;   /* tests (rr_tp_server_destroy_hook) */
	void *destroy_hook_arg;
};

static inline struct tp_shard *tp_shard_of(struct tp_ep *ep)
{
	return RR_CONTAINER_OF(ep, struct tp_shard, ep);
}

/* ctx.c */
/* The shared context for @conf's provider, device, environment and spin
 * budget in role @passive (opened on first use; verbs with no device named:
 * the one @addr routes to, shared with others on that device): 0 or the
 * provider's error. tp_ctx_put: an endpoint is done with it (closed with
 * the last one unless it uses the default environment, which keeps it). */
int tp_ctx_get(const struct rr_tp_conf *conf, const struct sockaddr *addr, bool passive,
	       struct tp_ctx **out);
void tp_ctx_put(struct tp_ctx *tc);
struct tp_ctx *tp_ctx_ref(struct tp_ctx *tc);
/* Runs @fn(tc, @arg) for each open context, the contexts' lock held
 * (rr_tp_debug_cqs). */
void tp_ctx_each(void (*fn)(struct tp_ctx *tc, void *arg), void *arg);

/* port.c */
/* @tc's port on @l (made on first use): 0 or -errno. tp_port_put: done. */
int tp_port_get(struct tp_ctx *tc, struct rr_loop *l, struct tp_port **out);
void tp_port_put(struct tp_port *p);
/* Reads @p's CM channel and hands what is there to the endpoints (on the
 * port's loop: what the channel's readiness does). */
void tp_port_read_events(struct tp_port *p);
/* On @p's loop, around work that makes events on its channel in this
 * thread (the listener's drive and accepts): begin keeps the channel's
 * descriptor quiet for them (rr_cm_channel_quiet; false when the provider
 * cannot); end (@quiet: what begin returned) reads the channel, then ends
 * the quiet, the descriptor readable if events are left. */
bool tp_port_quiet_begin(struct tp_port *p);
void tp_port_quiet_end(struct tp_port *p, bool quiet);
/* Reserves @cqe entries of a CQ of @p for one connection (a new CQ when
 * none has room, or only CQs between tp_cq_quiet_begin and _end): 0 or
 * -errno; the caller then creates its QP on it and says tp_cq_created
 * (whether or not that worked). */
int tp_cq_reserve(struct tp_port *p, uint32_t cqe, struct tp_cq **out);
/* As tp_cq_created, for a QP the provider refused on @q with -ENOSPC or
 * -EIO (an overrun CQ): @q takes no new connection from now on. */
void tp_cq_refused(struct tp_cq *q);
/* @cn's QP was created on @q, or not (@cn or cn->qp NULL): when it was, @cn is
 * linked into q->conns until tp_cq_unlink, which its release calls before
 * its id is destroyed (so that tp_cq_failed can end it). */
void tp_cq_created(struct tp_cq *q, struct tp_conn *cn);
void tp_cq_unlink(struct tp_conn *cn);
/* A poll, arm or wait of @q answered @rc (< 0): when that is an error of
 * the CQ (not -EAGAIN, -EINTR, -ETIMEDOUT), @q fails for good (q->err,
 * once): it takes no new connection, its loop no longer watches, arms or
 * polls it, and each of its connections is handed an
 * RPCRDMA_CM_DISCONNECTED with @rc as its status (as a provider's overrun
 * would: docs/transport.md "A CQ that fails"). Returns whether @q has
 * failed. Any thread, no lock held but the CQ's role. */
bool tp_cq_failed(struct tp_cq *q, int rc);
void tp_cq_unreserve(struct tp_cq *q, uint32_t cqe);
/* Around destroying a QP of @q and polling what it left there (dropped by
 * its freed pointer): no QP is created on @q in between (waits for one
 * being created; new reservations go to other CQs). */
void tp_cq_quiet_begin(struct tp_cq *q);
void tp_cq_quiet_end(struct tp_cq *q);
/* The consumer role of @q (one thread polls it at a time): claim as the
 * loop or as a caller thread; the loop, finding it held, has the holder
 * drain for it when it lets go (tp_cq_release). */
bool tp_cq_claim(struct tp_cq *q, int who);
void tp_cq_release(struct tp_cq *q);
/* Connection @cn wants (or no longer wants) the loop to drain its CQ. */
void tp_cq_want(struct tp_conn *cn, bool want);
/* Destroys @cn's id with no CM event of it on its way (none handed to
 * its endpoint after; those handed and not yet taken are dropped). */
void tp_port_id_destroy(struct tp_conn *cn);
/* The CM events handed to @ep, oldest first (the caller frees them with
 * tp_ev_free after handling). */
struct tp_ev *tp_ep_take_events(struct tp_ep *ep);
/* Takes the CM events handed to @ep and gives each to ops->on_cm (lock
 * held), oldest first. */
void tp_ep_handle_events(struct tp_ep *ep);
void tp_ev_free(struct tp_ep *ep, struct tp_ev *e);
/* Hands @ev (taken from a port's channel) to its endpoint's loop. */
bool tp_ev_hand(struct tp_port *p, const struct rpcrdma_cm_event *ev);
/* Whether queued event @e (NULL: none, for want of memory) waits for
 * @ep's next turn without a kick (tp_ep_ops.lazy_established). */
bool tp_ev_lazy(const struct tp_ep *ep, const struct tp_ev *e);

/* ep.c */
uint64_t tp_now_ns(const struct tp_ep *ep);
/* Posts @ep's turn on its loop. */
void tp_ep_kick(struct tp_ep *ep);
/* Runs @ep's turn on its loop now and returns once it ran (tests; no lock
 * of @ep held). */
void tp_ep_turn_now(struct tp_ep *ep);
bool tp_on_progress_thread(const struct tp_ep *ep);
/* Takes the shared context and the port of @l (NULL: one picked) and
 * prepares @ep: 0 or -errno. */
int tp_ep_init(struct tp_ep *ep, const struct rr_tp_conf *conf, bool server,
	       const struct sockaddr *addr, struct rr_loop *l, const struct tp_ep_ops *ops);
/* A second endpoint on the same context, on loop @l (a server's shard). */
int tp_ep_init_like(struct tp_ep *ep, const struct tp_ep *like, struct rr_loop *l,
		    const struct tp_ep_ops *ops);
/* Runs on @ep's loop: nothing of @ep runs there after (its kick and timer
 * off). */
void tp_ep_detach(struct tp_ep *ep);
/* Destroy's first wait (lock held, dropped meanwhile): no after-work and
 * no turn of @ep starts any more, and those running on a loop (their
 * upcalls, which run without the lock and may still use a connection and
 * its requests) have returned. Its connections are freed only after. Not
 * on a thread inside @ep's own after-work or turn. */
void tp_ep_quiesce(struct tp_ep *ep);
void tp_ep_fini(struct tp_ep *ep);
void tp_abs_deadline(struct timespec *ts, uint32_t ms);
/* What we advertise (RFC 8797 block + extension block). */
struct rr_pd_local tp_local_pd(const struct tp_ep *ep);
/* ... without the capabilities in @drop (RR_PD_EXT_CAP_*). */
int tp_encode_pd(const struct tp_ep *ep, uint32_t drop, uint8_t *buf, size_t cap);
/* A session configuration for a connection of @ep. */
void tp_sess_config(const struct tp_ep *ep, struct rr_conn_config *cfg);

/* pool.c */
/* A pool for progress loop @key (@ep: its shard's): -EOPNOTSUPP without shared receive
 * queues, or a provider error. */
int tp_pool_create(struct tp_ep *ep, unsigned key, struct tp_pool **out);
/* After every connection of it was freed. */
void tp_pool_destroy(struct tp_pool *p);
uint8_t *tp_pool_buf(const struct tp_pool *p, uint32_t id);
/* Posts what the accounting wants (rr_cred_pool_want) and arms the
 * low-water mark. */
void tp_pool_fill(struct tp_pool *p);
/* Receive @id completed and was taken out: posted again (0), released (1:
 * the pool shrinks, rr_cred_pool_keep), or a negative errno. */
int tp_pool_repost(struct tp_pool *p, uint32_t id);
/* Receive @id completed with no session to count it (a dead connection's,
 * a flush): counted lost, then as tp_pool_repost. */
void tp_pool_consumed(struct tp_pool *p, uint32_t id);
/* Each turn of the progress loop: the limit event, then tp_pool_fill. */
void tp_pool_tick(struct tp_pool *p);

/* conn.c */
/* A connection with its own Receives; without @bufs, its buffers come
 * from tp_conn_bufs (after the MPA Request went out: client.c). */
struct tp_conn *tp_conn_new(struct tp_ep *ep, uint32_t nrecv, uint32_t nsend, bool bufs);
/* A client's Reply that was Receive @idx of @cn (lent), released without
 * the endpoint's lock: noted in @cn, given back by the next holder of the
 * lock (tp_conn_unlend_drain). Returns false when no place was found (the
 * caller gives it back under the lock). Reads nothing of @cn but its
 * slots: @cn stays allocated while it is counted lent. */
bool tp_conn_unlend_later(struct tp_conn *cn, uint32_t idx);
/* Under the endpoint's lock: the Receives noted by tp_conn_unlend_later
 * are no longer lent, and free again (the next to post: conn.c "Receives
 * by demand") when @cn is @current and alive. */
void tp_conn_unlend_drain(struct tp_conn *cn, struct tp_conn *current);
/* The buffers of a connection made without them (receive buffer, send
 * slots): 0 or -ENOMEM. */
int tp_conn_bufs(struct tp_conn *cn);
/* A responder connection whose Receives come from @pool. */
struct tp_conn *tp_conn_new_pooled(struct tp_ep *ep, struct tp_pool *pool, uint32_t nsend);
bool tp_conn_ok(const struct tp_conn *cn);
/* Frees @cn; its QP must never have been connected, or be destroyed
 * already (tp_conn_release). */
void tp_conn_free(struct tp_conn *cn);
void tp_conn_bury(struct tp_conn *cn);
int tp_post_recv(struct tp_conn *cn, uint32_t idx);
/* A connection's own Receives at connect: all of them (a server's), or a
 * client's first @n (its backward ones and a batch; the rest free, posted
 * by demand). 0 or -errno (the caller drops the connection). */
int tp_post_all_recvs(struct tp_conn *cn);
int tp_post_first_recvs(struct tp_conn *cn, uint32_t n);
/* The session's io for connection @cn (server) or for whatever connection
 * the client has (tp_conn_of). */
extern const struct rr_conn_io tp_server_io;
extern const struct rr_conn_io tp_client_io;
/* Feeds a completion of @cn to its session. */
void tp_on_wc(struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* tp_on_wc for a completion of @cn, a client's connection whose own
 * caller waits (tp_cq_wait_once): its successful Receive straight to the
 * requester (rr_conn_on_recv_rq), anything else through tp_on_wc. */
void tp_on_wc_own(struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* Posts the deferred Replies of @cn as one chain. */
void tp_post_deferred(struct tp_conn *cn);
/* The RDMA Writes of @s (one SGE each) chained before its signaled Send
 * into @wr/@sge (s->nwrites + 1 of each; conn.c). */
void tp_send_wrs_build(const struct tp_conn *cn, const struct rr_conn_send *s,
		       struct rpcrdma_send_wr *wr, struct rpcrdma_sge *sge);
/* The signaled Send of @s (one SGE @sge, its slot of @cn's send slots)
 * into @wr, the last of its chain: every field of a Send's work request
 * set, none read (conn.c; @wr and @sge may hold anything before). */
void tp_send_wr_fill(const struct tp_conn *cn, const struct rr_conn_send *s,
		     struct rpcrdma_send_wr *wr, struct rpcrdma_sge *sge);
/* Sets @cn->unsig_calls from its endpoint's role and @cn->signal_writes
 * (conn_new, once both are known). */
static inline void tp_conn_unsig_setup(struct tp_conn *cn)
{
	cn->unsig_calls = !cn->ep->is_server && !cn->signal_writes;
}

/* The Send @w of @s on @cn, built signaled (tp_send_wr_fill): made
 * unsignaled when conn.c's rule lets it ("a client's unsignaled Sends":
 * no Writes, no invalidation, a client's or a quiet one, not
 * signal_writes, fewer than TP_UNSIG_RUN in a row, room in the ring, a
 * free slot left beside it), its wr_id given the mark its completion
 * (signaled, or an error: an unsignaled Send's own failure completion
 * releases it too) releases up to. Returns whether it is unsignaled. The
 * connection's part of the rule is one flag (unsig_calls, set at
 * conn_new; it replaced a look at the endpoint's role and at
 * signal_writes per Send, issue 16 part IG). Here, not in conn.c, so the
 * test sees the body conn.c inlines (test tp_unsig_choose_follows_the_rule). */
static inline bool tp_unsig_choose(const struct tp_conn *cn, const struct rr_conn_send *s,
				   struct rpcrdma_send_wr *w)
{
	bool unsig = (cn->unsig_calls || (s->quiet && !cn->signal_writes)) && !s->nwrites &&
		     !s->inv && cn->urun < TP_UNSIG_RUN && cn->ucount < TP_UNSIG_MAX &&
		     cn->nsfree;

	if (unsig)
		w->flags = 0;
	w->wr_id = WRID_SEND(s->slot, cn->uposted + (unsig ? 1u : 0u));
	return unsig;
}
/* Server, its timer walk (lock held), @now on the session's clock: quiet
 * Sends left waiting for half the send timeout get a probe whose
 * completion proves them done, watched by the send-stall timer. */
void tp_quiet_watch(struct tp_conn *cn, uint64_t now);
/* Posts those of every connection of @ep that has some (lock held). */
void tp_post_all_deferred(struct tp_ep *ep);

/* faults.c (the counters of group faults, rpcrdma/stats.h) */
/* @cn ends (the endpoint's lock held, once per connection): counted under
 * its cause when a fault ended it -- the asynchronous error recorded on its
 * QP, else its CQ's failure -- and not at all otherwise. */
void tp_fault_conn_lost(const struct tp_conn *cn, struct rr_xprt_stats *st);
/* A completion of @cn that did not succeed (lock held): counted in
 * wr_errors when it is a send-queue work request's own failure (not a
 * flush, not a Commit Status, not a Receive). */
void tp_fault_wc(struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* A CQ refused a QP of @ep (no lock needed). tp_fault_fold: adds those,
 * and the CQ polls counted in ep->cq_polls, to @st, a snapshot of @ep's
 * counters (no lock needed). */
void tp_fault_cq_refused(struct tp_ep *ep);
void tp_fault_fold(struct tp_ep *ep, struct rr_xprt_stats *st);

/* progress.c */
/* Arms @q and drains it until a poll after the arm finds nothing (no lost
 * notification): whether it is armed. false: the loop serves it once the
 * caller lets go (missed). */
bool tp_cq_arm_drain(struct tp_cq *q, struct tp_ep **touched);
/* Serves @q now, as its loop does when its fd is readable (on that loop,
 * no endpoint lock held): what waits in it is fed to its connections and
 * their after-work run. false: a caller holds its role (the loop serves it
 * once the caller lets go), and what waits in it may not have been fed. */
bool tp_cq_serve_now(struct tp_cq *q);
/* Runs ops->after of each endpoint of @touched (under its lock) when it
 * lives on the caller's loop, else posts its turn; @self's is left to the
 * caller. */
void tp_touched_after(struct tp_ep *touched, struct tp_ep *self);
/* A caller holding @ep's lock receives on @cn's CQ for up to @ms
 * (rpcrdma_cq_wait; the lock dropped meanwhile) when no other thread
 * consumes it, else waits for @ep's cond as long: returns rpcrdma_cq_wait's
 * result or 0. Completions of other endpoints go to them. @again (may be
 * NULL), asked with the lock held after a wait that brought completions of
 * @ep alone: true to wait once more at once, holding the CQ (what the
 * caller waits for has not come: a Call's Send completion before its
 * Reply), instead of returning to the caller's loop for it. */
int tp_cq_wait_once(struct tp_ep *ep, struct tp_conn *cn, int ms,
		    bool (*again)(struct tp_ep *ep, struct tp_conn *cn));
/* Frees the dead connections of @ep that nothing holds any more (lock
 * held; dropped while their ids and QPs are destroyed and their CQ drained
 * of what they left): a connection whose CQ a caller holds is tried again
 * on a later turn. */
void tp_grave_sweep(struct tp_ep *ep);
/* Frees @cn now (no endpoint lock held): its id and QP destroyed and what
 * they left in its CQ drained (waiting for a caller that holds the CQ). */
void tp_conn_release(struct tp_conn *cn);

/* client.c */
void tp_cl_conn_lost(struct rr_tp_client *c, struct tp_conn *cn);
/* Connects c->conn anew. @driven non-NULL: the caller drives the handshake
 * itself when the provider can (*@driven true; rr_cm_connect_drive). */
int tp_cl_connect(struct rr_tp_client *c, bool *driven);
void tp_cl_schedule_reconnect(struct rr_tp_client *c, uint32_t delay_ms);
bool tp_cl_busy(const struct rr_tp_client *c);
bool tp_cl_needs_progress(const struct rr_tp_client *c, const struct tp_conn *cn);
int tp_cl_wait_once(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns);

/* server_conns.c */
extern const struct tp_ep_ops tp_listener_ops;
void tp_sv_conn_lost(struct tp_shard *sh, struct tp_conn *cn);
void tp_sv_conn_put(struct tp_shard *sh, struct tp_conn *cn);
void tp_sv_after_upcalls(struct tp_shard *sh);
/* The clock of the sessions' timers (the configuration's rrep_clock, else
 * the environment's), read once per walk of tp_sv_timers. */
static inline uint64_t tp_sv_clock(const struct tp_shard *sh)
{
	return rr_now_ns(sh->ep.conf.rrep_clock ? sh->ep.conf.rrep_clock : sh->ep.env);
}
void tp_sv_timers(struct tp_shard *sh, struct tp_conn *cn, uint64_t now);
void tp_sv_idle_sweep(struct tp_shard *sh);
void tp_sv_sent_upcalls(struct tp_shard *sh);
/* Backward Calls' completion upcalls, without the lock (lock held on entry
 * and return). */
void tp_sv_bc_upcalls(struct tp_shard *sh);
/* A CM event of a shard's connection (lock held). */
void tp_sv_on_cm(struct tp_ep *ep, const struct rpcrdma_cm_event *ev);
/* Shard @sh's shared receive pool, made with its first connection (its
 * lock held); NULL: each connection has its own Receives. */
struct tp_pool *tp_sv_pool_of(struct tp_shard *sh);
/* The pool's turn (limit events, refills, retirement), then the Read-chunk
 * Replies that waited for a free Receive resumed (shard lock held). */
void tp_sv_pools_refill(struct tp_shard *sh);

/* push_wc.c */
void tp_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* push_region.c */
void tp_expo_release_all(struct tp_conn *cn);

#endif
