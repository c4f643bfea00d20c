/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC client (include/rpcrdma/rpc.h) over any registered transport
 * (src/transport/xprt.h): Call headers (RFC 5531 section 9) with a random first
 * XID incremented per call, AUTH_NONE and AUTH_SYS credentials (section 10.1,
 * appendix A), synchronous and asynchronous calls, timeouts enforced by a
 * timer of the client's progress loop (src/engine: no thread of its own),
 * cancellation, Reply header decoding into a status
 * (accepted/denied states) and a results decoder that yields DDP-eligible
 * items through the caller's result sinks. */
#include "rpc/rpcmsg.h"
#include "transport/xprt.h"
#include "rpc/bc.h"
#include "rpc/clnt_int.h"
#include "rpc/ctl.h"
#include "engine/engine.h"
#include "common/lock.h"
#include "common/spare.h"
#include "common/tls_exit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 30000u
#define DEFAULT_CONNECT_MS 10000u
#define DEFAULT_MAX_MSG ((size_t)8 * 1024 * 1024 + 65536)

enum call_state { CALL_NEW, CALL_PENDING, CALL_DONE };

/* Laid out by use (issue 16 part CL): the fields every call writes come
 * first and together (a NULL call touches 6 or 7 of the object's 20
 * cache lines, not 9 or 10: at 100 connections the calls of one client
 * are cold when they come back from the spare list), the arrays only a
 * call with items or sinks reads (sinks, xc.placed, enc.ddp) after them. */
struct rpcrdma_call {
	/* Not cleared: each written before it is read. clnt in call_new;
	 * done and done_arg in call_fill; deadline when the call is dated
	 * (call_date: call_start, or sync_take for a call run_fast started
	 * undated), before it is listed; run_thread with sync_run;
	 * rst with have_reply, res_pos when the call succeeded (on_complete);
	 * dec with dec_ready (rpcrdma_call_results: made at the first ask,
	 * from the Reply, which stays until the destroy's release_reply, and
	 * res_pos); the argument buffer and the sinks keep what a
	 * spare call held (the buffer is emptied; only the first nsinks sinks
	 * are read); abort_status and abort_thread with aborting. */
	struct rpcrdma_client *clnt;
	rpcrdma_call_done_fn done;
	void *done_arg;
	uint64_t deadline;
	uintptr_t run_thread;     /* its thread's rr_clnt_self() */
	struct rpcrdma_rpc_status rst;
	uint32_t res_pos;         /* the results' offset in the Reply */
	struct rpcrdma_xdr_dec dec;
	/* Cleared for every call (call_new, from next to xc), with the first
	 * RR_XPRT_CALL_CLEAR bytes of xc: within 64 bytes each. */
	struct rpcrdma_call *next, *prev;  /* client's pending list */
	unsigned nsinks;
	uint32_t timeout_ms;
	enum call_state state;
	int status;
	bool have_reply;
	bool dec_ready;           /* dec made (rpcrdma_call_results) */
	bool aborting;
	bool cb_running;
	bool destroy_in_cb;       /* destroyed from its own callback (by
				     its thread: run_callback) */
	bool in_submit;           /* inside the transport's submit(); for a
				     call run synchronously, until its
				     completion is seen (run_settle) */
	bool sync_run;            /* rpcrdma_call_run's, by run_thread */
	bool settled;             /* done, and nothing but its owner holds it
				     any more: the owner's thread only */
	bool fast;                /* run without the lock: registered in
				     clnt->sync_call by its run_thread
				     (run_fast), written before that */
	atomic_bool abort_early;  /* an abort came while in_submit (it may
				     have found nothing in the transport):
				     read without the lock by the run thread
				     between its submit and the transport's
				     wait (rpcrdma_call_run) */
	int refs;                 /* timer/canceller holds while unlocked */
	struct rr_xprt_call xc;
	struct rpcrdma_xdr_enc enc;
	int abort_status;         /* abort_call's, while aborting */
	pthread_t abort_thread;   /* the thread inside the transport's abort()
				     while aborting && refs */
	struct rpcrdma_ddp_sink sinks[RR_RPC_MAX_DDP];
};

#define CALL_CLEAR_FROM offsetof(struct rpcrdma_call, next)
_Static_assert(offsetof(struct rpcrdma_call, xc) - CALL_CLEAR_FROM <= 64,
	       "a call's cleared fields within 64 bytes");

struct rpcrdma_client {
	/* What a call reads or writes of its client (create, start, its
	 * completion, its callback, destroy) first, in two lines of 64
	 * bytes (they were over five: the 400-byte credential body sat
	 * between next_xid and the pending list, and at 100 connections
	 * every line of a client is cold at its next call: docs/PERFORMANCE.md
	 * "Issue 16 part CS"); the loop's timer and task, the spares and the
	 * credential after them. */
	const struct rpcrdma_env *env;
	const struct rr_xprt_client_ops *ops;   /* its transport's */
	struct rr_xprt_client *xp;
	uint32_t prog, vers;
	uint32_t timeout_ms;
	bool call_tls;            /* default allocator: its calls go through
				     the thread's cache (tls_calls) */
	bool stopping;
	/* the credential: read and written under the lock, except that
	 * cred_none (written under the lock too) says it is AUTH_NONE, which
	 * a call's creation encodes without the lock */
	atomic_bool cred_none;
	size_t max_msg;
	struct rr_lock lock;      /* common/lock.h: zero-filled is free */
	struct rr_cond cv;        /* call state changes */
	unsigned cv_waiters;      /* threads in clnt_wait (lock held) */
	_Atomic uint32_t next_xid;   /* taken without the lock */
	uint64_t timer_at;        /* deadline (env clock) the timer is set
				     for; UINT64_MAX: not set */
	struct rpcrdma_call *pending;
	unsigned cb_active;       /* completion callbacks running or queued */
	struct rpcrdma_call *deferred;  /* callbacks for the loop (cb_task) */
	/* The one synchronous call run without the lock (run_fast), NULL
	 * when none: set by its run thread, and cleared exactly once, by the
	 * thread that wins the exchange: that thread when it sees its own
	 * Reply (on_complete, no lock), or a thread holding the lock that
	 * takes the call into the pending list (sync_take) or completes it. */
	_Atomic(struct rpcrdma_call *) sync_call;
	/* The client's progress loop (shared with its connection): its timer
	 * looks for expired calls, its task runs deferred callbacks. */
	struct rr_loop *loop;
	struct rr_loop_timer timer;
	struct rr_loop_task cb_task;
	struct rr_spare spare;    /* destroyed calls kept for reuse */
	struct rr_rpc_auth cred;
	uint8_t cred_body[RR_RPC_AUTH_MAXBODY];
};
_Static_assert(offsetof(struct rpcrdma_client, loop) <= 2 * 64,
	       "struct rpcrdma_client's per-call fields fit 2 cache lines");

/* Waits on c->cv (c->lock held) until a clnt_wake, or until @abs
 * (rr_engine_cond_wait's result: 0, or -ETIMEDOUT once @abs passed). */
static int clnt_wait(struct rpcrdma_client *c, const struct timespec *abs)
{
	int rc;

	c->cv_waiters++;
	rc = rr_engine_cond_wait(&c->cv, &c->lock, abs);
	c->cv_waiters--;
	return rc;
}

/* Wakes the waiters of c->cv (c->lock held); none, no broadcast (a call
 * with nobody waiting on it pays no condition variable). */
static void clnt_wake(struct rpcrdma_client *c)
{
	if (c->cv_waiters)
		rr_cond_broadcast(&c->cv);
}

/* The calls a thread destroyed last, kept for the next call it creates on
 * any client (issue 16 part CR): at 100 connections with one call each, a
 * client's own spare (c->spare) is the object of its previous call, not
 * touched since the 99 other connections' calls, cold (8.8 L1 data misses
 * per call in call_new alone); the one this thread freed a moment ago (the
 * completion callback destroys a call and creates the next on another
 * connection) is still in the cache. Last in, first out, at most
 * TLS_CALLS. Only for clients on the default allocator (c->call_tls), so
 * that an injected allocator sees every block of its clients and gets back
 * only what it gave: the cache holds no client's or env's pointer, only
 * memory of the default allocator, and is freed when the thread exits
 * (tls_calls_exit, common/tls_exit.h). A call that moves to another client gets
 * that client's clnt, env and max_msg (call_new). */
#define TLS_CALLS 4
static __thread struct rpcrdma_call *tls_calls[TLS_CALLS];
static __thread unsigned tls_ncalls;
static __thread unsigned tls_calls_cap;  /* TLS_CALLS once the thread's exit
					    frees the cache (keyed), else 0 */
static _Atomic unsigned long tls_calls_freed;   /* rr_rpc_client_tls_freed */

/* Frees this thread's cached calls (the default allocator's: not through
 * their enc.env, whose env may be gone). */
static void tls_calls_drain(void)
{
	const struct rpcrdma_env *def = rpcrdma_env_default();

	while (tls_ncalls) {
		struct rpcrdma_call *call = tls_calls[--tls_ncalls];

		tls_calls[tls_ncalls] = NULL;
		rr_free(def, call->enc.buf);
		rr_free(def, call);
		atomic_fetch_add_explicit(&tls_calls_freed, 1, memory_order_relaxed);
	}
}

unsigned rr_rpc_client_tls_calls(void)
{
	return tls_ncalls;
}

unsigned long rr_rpc_client_tls_freed(void)
{
	return atomic_load_explicit(&tls_calls_freed, memory_order_relaxed);
}

static struct rr_tls_exit tls_calls_exit = {.drain = tls_calls_drain};

/* Keeps @call in this thread's cache when call_drop's usual put could not:
 * the thread's first put (it registers the thread's exit; true, and the
 * cache owns it), or a full cache (false, and the caller still owns it). */
__attribute__((noinline)) static bool tls_calls_put_slow(struct rpcrdma_call *call)
{
	if (tls_calls_cap)
		return false;   /* full */
	if (!rr_tls_exit_arm(&tls_calls_exit))
		return false;
	tls_calls_cap = TLS_CALLS;
	tls_calls[tls_ncalls++] = call;
	return true;
}

/* Clears the per-call fields of @call, a call object taken for reuse (the
 * fields from next to xc in struct rpcrdma_call, the first
 * RR_XPRT_CALL_CLEAR bytes of xc) and empties its argument buffer. */
static inline void call_reset(struct rpcrdma_call *call)
{
	memset((char *)call + CALL_CLEAR_FROM, 0,
	       offsetof(struct rpcrdma_call, xc) - CALL_CLEAR_FROM);
	memset(&call->xc, 0, RR_XPRT_CALL_CLEAR);
	rr_xbuf_enc_reset(&call->enc);
}

/* A call object for @c when this thread's cache has nothing for it
 * (call_take_tls): a spare of @c (reset: call_reset) or a new object; NULL:
 * no memory. Out of line (issue 16 part JE): rpcrdma_call_create's usual
 * way (a call object from the thread's cache, AUTH_NONE) keeps no frame. */
__attribute__((noinline)) static struct rpcrdma_call *call_new(struct rpcrdma_client *c)
{
	struct rpcrdma_call *call = rr_spare_take(&c->spare);

	if (call) {
		call_reset(call);
	} else {
		call = rr_zalloc(c->env, sizeof(*call));
		if (!call)
			return NULL;
		rr_xbuf_enc_init(&call->enc, c->env, c->max_msg);
		/* the transport's view of the call's own arrays, for the
		 * object's life (never written elsewhere: call_fill fills the
		 * rest of it per call) */
		call->xc.msg.ddp = call->enc.ddp;
		call->xc.sinks = call->sinks;
	}
	_Static_assert(offsetof(struct rr_xprt_call, msg) >= RR_XPRT_CALL_CLEAR &&
			       offsetof(struct rr_xprt_call, sinks) >= RR_XPRT_CALL_CLEAR,
		       "xc.msg.ddp and xc.sinks kept from the object's making");
	call->clnt = c;
	return call;
}

/* A call object for @c from this thread's cache (c->call_tls, the cache
 * not empty: the caller tested both), given @c's env and limit and reset
 * (call_reset). */
static inline struct rpcrdma_call *call_take_tls(struct rpcrdma_client *c)
{
	struct rpcrdma_call *call = tls_calls[--tls_ncalls];

	call->enc.env = c->env;
	call->enc.max = c->max_msg;
	call_reset(call);
	call->clnt = c;
	return call;
}

/* call_drop's usual way: @call into this thread's cache (c->call_tls, the
 * cache registered and not full, a buffer a spare may keep): true, and the
 * cache owns it; false, and the caller still owns it. */
static inline bool call_drop_tls(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	unsigned n = tls_ncalls;

	if (RR_UNLIKELY(!c->call_tls || n >= tls_calls_cap || call->enc.cap > RR_XBUF_SPARE_CAP))
		return false;
	tls_calls[n] = call;
	tls_ncalls = n + 1;
	return true;
}

/* call_drop's way when @call does not go into this thread's cache by
 * call_drop_tls: the cache's first put on this thread, else a spare of @c,
 * else freed. Out of line, as call_new. */
__attribute__((noinline)) static void call_drop_cold(struct rpcrdma_client *c,
						     struct rpcrdma_call *call)
{
	if (call->enc.cap > RR_XBUF_SPARE_CAP ||
	    (!(c->call_tls && tls_calls_put_slow(call)) && !rr_spare_put(&c->spare, call))) {
		rr_xbuf_enc_free(&call->enc);
		rr_free(c->env, call);
	}
}

/* @call, done with (no transport state left), kept in this thread's cache
 * (c->call_tls) or as a spare of @c, or freed. */
static inline void call_drop(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	if (!call_drop_tls(c, call))
		call_drop_cold(c, call);
}

/* call_free's way when @call holds a Reply of the transport's or does not
 * go into this thread's cache. Out of line: the usual call_free (a
 * settled synchronous call's destroy) keeps no frame. */
__attribute__((noinline)) static void call_free_cold(struct rpcrdma_call *call)
{
	struct rpcrdma_client *c = call->clnt;

	if (call->xc.reply_buf || call->xc.xp_priv)
		c->ops->release_reply(c->xp, &call->xc);
	call_drop(c, call);
}

/* @call's Reply given back to the transport (when it holds one: xprt.h
 * release_reply), then the object dropped (call_drop). */
static inline void call_free(struct rpcrdma_call *call)
{
	if (RR_LIKELY(!call->xc.reply_buf && !call->xc.xp_priv) &&
	    call_drop_tls(call->clnt, call))
		return;
	call_free_cold(call);
}

/* The completion callbacks this thread is running, innermost first (a
 * callback may run a synchronous call whose wait delivers another call's
 * completion, whose callback then runs inside it): rpcrdma_call_destroy
 * from one of them only marks its call (destroy_in_cb), without the lock.
 * Only this thread reads or writes its chain. */
struct cb_frame {
	const struct rpcrdma_call *call;
	const struct cb_frame *up;
};
static _Thread_local const struct cb_frame *cb_frames;

/* Whether this thread is inside @call's completion callback. */
static bool in_own_callback(const struct rpcrdma_call *call)
{
	for (const struct cb_frame *f = cb_frames; f; f = f->up)
		if (f->call == call)
			return true;
	return false;
}

/* Runs the completion callback of @call (cb_running and cb_active set by
 * the caller), then frees the call if the callback destroyed it. One
 * critical section when it did not (cb_running and cb_active in the same
 * one), two when it did (the call is freed without the lock, before
 * cb_active drops: rpcrdma_client_destroy waits for that). */
static void run_callback(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	struct cb_frame f = {call, cb_frames};

	cb_frames = &f;
	call->done(call, call->status, call->done_arg);
	cb_frames = f.up;
	/* (destroy_in_cb: written by this thread alone, the destroy inside
	 * the callback, without the lock) */
	rr_lock(&c->lock);
	call->cb_running = false;
	if (!call->destroy_in_cb) {
		c->cb_active--;
		clnt_wake(c);
		rr_unlock(&c->lock);
		return;
	}
	/* rpcrdma_call_destroy from inside the callback only marked the
	 * call; it is freed here, once no other thread holds it. */
	while (call->refs || call->in_submit)
		(void)clnt_wait(c, NULL);
	clnt_wake(c);
	rr_unlock(&c->lock);
	call_free(call);
	rr_lock(&c->lock);
	c->cb_active--;
	clnt_wake(c);
	rr_unlock(&c->lock);
}

static void timer_arm(struct rpcrdma_client *c, uint64_t deadline);

/* Puts @call in c->pending, the timer set for its deadline if earlier
 * than planned (lock held). */
static void pending_link(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	call->next = c->pending;
	call->prev = NULL;
	if (c->pending)
		c->pending->prev = call;
	c->pending = call;
	if (call->deadline < c->timer_at)
		timer_arm(c, call->deadline);
}

/* Takes @call out of c->pending if it is there (lock held). */
static void pending_unlink(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	if (call->prev)
		call->prev->next = call->next;
	else if (c->pending == call)
		c->pending = call->next;
	if (call->next)
		call->next->prev = call->prev;
	call->next = call->prev = NULL;
}

/* Clears c->sync_call if it is @call: true when this thread did (then
 * nobody else will: the call is this thread's to complete or to list). */
static bool sync_clear(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	struct rpcrdma_call *expect = call;

	return atomic_compare_exchange_strong_explicit(&c->sync_call, &expect, NULL,
						       memory_order_acq_rel, memory_order_acquire);
}

static inline void call_date(struct rpcrdma_call *call, uint64_t now);

/* With c->lock held: @call, if it is still the client's lock-free
 * synchronous call, goes into the pending list as call_start would have
 * put it there, dated from @now (such a call has no deadline until then:
 * run_fast reads no clock) and its timer armed, so that the timer, a
 * cancel or a destroy finds it; its own Reply then takes the lock
 * (on_complete). */
static void sync_take(struct rpcrdma_client *c, struct rpcrdma_call *call, uint64_t now)
{
	if (!call->fast || !sync_clear(c, call))
		return;
	call_date(call, now);
	pending_link(c, call);
}

/* A successful Reply's status into @call, its results at @pos: what both
 * Reply decoders leave for an accepted, successful Reply (every other field
 * zero; no copy from a decoded struct). The results' decoder is made when
 * asked for (rpcrdma_call_results), not per Reply: ~20 instructions per call
 * that reads no results. */
static inline void reply_success(struct rpcrdma_call *call, uint32_t pos)
{
	call->have_reply = true;
	call->rst = (struct rpcrdma_rpc_status){.reply_stat = RR_RPC_MSG_ACCEPTED,
						.accept_stat = RR_RPC_SUCCESS};
	call->res_pos = pos;
}

/* The Reply of @xc (status 0) that is not the short successful form
 * (rr_rpcmsg_reply_success_short) decoded into @call: 0 (a successful
 * Reply, with a verifier), -EREMOTEIO (its status in call->rst) or
 * -EBADMSG (complete_decoded's, out of on_complete's usual way). */
static int reply_decode(struct rpcrdma_call *call, const struct rr_xprt_call *xc)
{
	struct rr_xdr_dec d;
	struct rr_rpc_reply r;

	rr_xdr_dec_init(&d, xc->reply, xc->reply_len);
	if (rr_rpcmsg_decode_reply(&d, &r) || r.xid != xc->xid)
		return -EBADMSG;
	if (r.stat == RR_RPC_MSG_ACCEPTED && r.accept_stat == RR_RPC_SUCCESS) {
		reply_success(call, (uint32_t)rr_xdr_dec_pos(&d));
		return 0;
	}
	call->have_reply = true;
	call->rst.reply_stat = r.stat;
	call->rst.accept_stat = r.accept_stat;
	call->rst.reject_stat = r.reject_stat;
	call->rst.auth_stat = r.auth_stat;
	call->rst.low = r.low;
	call->rst.high = r.high;
	return -EREMOTEIO;
}

/* on_complete's way under the lock: @call completed with @status. Out of
 * line: a synchronous call's own Reply seen on its thread (complete_as)
 * keeps no frame for it. */
__attribute__((noinline)) static void complete_locked(struct rpcrdma_client *c,
						      struct rpcrdma_call *call, int status)
{
	rpcrdma_call_done_fn done;

	rr_lock(&c->lock);
	if (call->fast)
		(void)sync_clear(c, call);   /* completed here: never listed */
	call->status = status;
	call->state = CALL_DONE;
	pending_unlink(c, call);
	done = call->done;
	if (!done && call->sync_run && !call->refs &&
	    call->run_thread == rr_clnt_self()) {
		/* The thread that runs the call saw it complete (it read its
		 * own Reply): nothing else holds the call now (it left the
		 * pending list, no timer or canceller holds it), so its
		 * rpcrdma_call_run returns without another critical section,
		 * and its destroy takes none. */
		call->in_submit = false;
		call->settled = true;
	}
	if (done) {
		call->cb_running = true;
		c->cb_active++;
		if (call->in_submit ||
		    (call->aborting && call->refs &&
		     pthread_equal(call->abort_thread, pthread_self()))) {
			/* Completed inside submit (the Reply overtook the end of
			 * the send): the callback must not run inside
			 * rpcrdma_call_start, so the client's loop runs it.
			 * Likewise inside abort (a timeout, a cancel, a client
			 * destroy): this thread holds a reference on the call
			 * until abort returns, and a callback that destroys the
			 * call waits for every reference to drop. */
			call->next = c->deferred;
			c->deferred = call;
			rr_loop_post(c->loop, &c->cb_task);
			done = NULL;
		}
	}
	clnt_wake(c);
	rr_unlock(&c->lock);
	if (done)
		run_callback(c, call);
}

/* @call completed with @status (its Reply decoded): settled here without
 * the lock when it is a fast call's own Reply on its thread, else
 * complete_locked (a tail call). One body for on_complete and
 * complete_decoded. */
static inline __attribute__((always_inline)) void complete_as(struct rpcrdma_client *c,
							      struct rpcrdma_call *call,
							      int status)
{
	if (call->fast && !call->done && call->run_thread == rr_clnt_self() &&
	    sync_clear(c, call)) {
		/* Its own Reply, on the thread that runs it, and no other
		 * thread took it (it was never listed; a timer, a cancel or a
		 * destroy only reach a call through the list): nothing else
		 * holds it, no lock (run_fast). */
		call->status = status;
		call->state = CALL_DONE;
		call->in_submit = false;
		call->settled = true;
		return;
	}
	complete_locked(c, call, status);
}

/* on_complete of a Reply that is not the short successful form: decoded
 * (reply_decode), then completed. Out of line, as the decoder. */
__attribute__((noinline)) static void complete_decoded(struct rpcrdma_client *c,
						       struct rpcrdma_call *call)
{
	complete_as(c, call, reply_decode(call, &call->xc));
}

/* Upcall from the transport: the call completed (exactly once). The usual
 * Reply (accepted, SUCCESS, an empty verifier) is checked in one pass over
 * its words; any other goes through the decoder (complete_decoded). Every
 * way out of here is a return or a tail call: a synchronous call's own
 * Reply keeps no frame. */
static void on_complete(void *ctx, struct rr_xprt_call *xc)
{
	struct rpcrdma_client *c = ctx;
	struct rpcrdma_call *call = RR_CONTAINER_OF(xc, struct rpcrdma_call, xc);
	int status = xc->status;

	if (status == 0) {
		uint32_t pos = rr_rpcmsg_reply_success_short(xc->reply, xc->reply_len, xc->xid);

		if (RR_UNLIKELY(pos == 0)) {
			complete_decoded(c, call);
			return;
		}
		reply_success(call, pos);
	}
	complete_as(c, call, status);
}

/* Aborts @call with @status through the transport: called and returns
 * with c->lock held, dropped around the transport's abort; the call stays
 * allocated throughout (a reference). */
static void abort_call(struct rpcrdma_client *c, struct rpcrdma_call *call, int status)
{
	call->aborting = true;
	call->abort_status = status;
	if (call->in_submit) {
		atomic_store_explicit(&call->abort_early, true, memory_order_relaxed);
		/* for the transport's wait, which ends the call itself if
		 * this abort finds nothing (xprt.h abort_req) */
		atomic_store_explicit(&call->xc.abort_req, status, memory_order_release);
	}
	call->refs++;
	call->abort_thread = pthread_self();
	rr_unlock(&c->lock);
	c->ops->abort(c->xp, &call->xc, status);
	rr_lock(&c->lock);
	call->refs--;
	clnt_wake(c);
}

/* After @call's submit returned 0, by the thread that submitted it, with
 * c->lock held and in_submit still set (the call stays allocated): an
 * abort made between the call's listing and the transport's hold of it
 * (a cancel, the timer at its deadline, a call or client destroy) found
 * nothing to abort (xprt.h: a call the transport does not hold), and the
 * call, marked aborting, is skipped by the timer and by later cancels: it
 * would wait for a Reply that may never come. Such an abort is made again
 * now that the transport holds the call, with its status, once the first
 * one returned (one thread inside the transport's abort per call): a
 * no-op for a call completed or completing (an abort that did reach the
 * transport). Drops the lock around the abort, as abort_call. */
static void abort_again(struct rpcrdma_client *c, struct rpcrdma_call *call)
{
	if (!call->aborting)
		return;
	while (call->refs && call->state != CALL_DONE)
		(void)clnt_wait(c, NULL);   /* the first abort returns */
	if (call->state != CALL_DONE)
		abort_call(c, call, call->abort_status);
}

/* Sets the loop's timer for @deadline (c->env's clock; lock held). An
 * injected clock may be virtual: the timer then looks at least every
 * 200 ms of real time. */
static void timer_arm(struct rpcrdma_client *c, uint64_t deadline)
{
	uint64_t now = rr_now_ns(c->env), real = rr_now_ns(NULL), d;

	c->timer_at = deadline;
	if (rr_env(c->env) == rpcrdma_env_default()) {
		rr_loop_timer_set(c->loop, &c->timer, deadline);
		return;
	}
	d = deadline > now ? deadline - now : 0;
	rr_loop_timer_set(c->loop, &c->timer, real + RR_MIN(d, 200000000ull));
}

/* The client's timer (on its loop): aborts the calls whose deadline
 * passed, then waits for the earliest of the others. A call completing
 * does not move the timer: at most one look per deadline that was set. */
static void timer_fire(struct rr_loop_timer *t)
{
	struct rpcrdma_client *c = RR_CONTAINER_OF(t, struct rpcrdma_client, timer);

	rr_lock(&c->lock);
	for (;;) {
		uint64_t now = rr_now_ns(c->env), next = UINT64_MAX;
		struct rpcrdma_call *expired = NULL;

		for (struct rpcrdma_call *p = c->pending; p; p = p->next) {
			if (p->aborting)
				continue;
			if (p->deadline <= now) {
				expired = p;
				break;
			}
			if (p->deadline < next)
				next = p->deadline;
		}
		if (expired) {
			abort_call(c, expired, -ETIMEDOUT);
			continue;
		}
		c->timer_at = UINT64_MAX;
		if (next != UINT64_MAX && !c->stopping)
			timer_arm(c, next);
		break;
	}
	rr_unlock(&c->lock);
}

/* Callbacks of calls that completed inside submit or abort (on_complete),
 * run by the client's loop. */
static void deferred_run(struct rr_loop_task *t)
{
	struct rpcrdma_client *c = RR_CONTAINER_OF(t, struct rpcrdma_client, cb_task);

	rr_lock(&c->lock);
	while (c->deferred) {
		struct rpcrdma_call *call = c->deferred;

		c->deferred = call->next;
		call->next = NULL;
		rr_unlock(&c->lock);
		run_callback(c, call);
		rr_lock(&c->lock);
	}
	rr_unlock(&c->lock);
}

/* On the loop: nothing of the client runs there after this. */
static void client_detach(void *arg)
{
	struct rpcrdma_client *c = arg;

	rr_loop_timer_fini(c->loop, &c->timer);
	rr_loop_task_cancel(c->loop, &c->cb_task);
}

int rr_rpc_client_create_with(uint32_t prog, uint32_t vers,
			      const struct rpcrdma_client_opts *opts, rr_rpc_client_open_fn open,
			      void *arg, struct rpcrdma_client **out)
{
	struct rr_xprt_client_params xp = {0};
	const struct rpcrdma_env *env = opts ? opts->env : NULL;
	struct rpcrdma_client *c;
	int rc;

	if (!out)
		return -EINVAL;
	c = rr_zalloc(env, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->env = env;
	c->call_tls = rr_env_default_alloc(env);
	c->prog = prog;
	c->vers = vers;
	c->timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->max_msg = opts && opts->max_msg ? opts->max_msg : DEFAULT_MAX_MSG;
	if (c->max_msg > 0x7fffffffu)
		c->max_msg = 0x7fffffffu;
	{
		uint32_t xid0;

		rr_random(env, &xid0, sizeof(xid0));
		atomic_init(&c->next_xid, xid0);
	}
	c->cred.flavor = RR_RPC_AUTH_NONE;
	atomic_init(&c->cred_none, true);
	c->timer_at = UINT64_MAX;
	c->cb_task.fn = deferred_run;
	rc = rr_engine_pick(&c->loop);
	if (!rc)
		rc = rr_loop_timer_init(c->loop, &c->timer, timer_fire);
	if (rc) {
		rr_free(env, c);
		return rc;
	}

	xp.env = env;
	xp.loop = c->loop;
	xp.max_msg = c->max_msg;
	xp.connect_timeout_ms = opts && opts->connect_timeout_ms ? opts->connect_timeout_ms
							       : DEFAULT_CONNECT_MS;
	xp.no_reconnect = opts && opts->no_reconnect;
	xp.no_inline_ddp = opts && opts->no_inline_ddp;
	xp.inline_size = opts ? opts->inline_size : 0;
	xp.spin_us = opts ? opts->spin_us : 0;
	xp.bc_slots = opts ? RR_MIN(opts->callback_slots, RPCRDMA_CALLBACK_SLOTS_MAX) : 0;
	xp.complete = on_complete;
	xp.ctx = c;
	rc = open(arg, &xp, &c->ops, &c->xp);
	if (rc) {
		rr_engine_call(c->loop, client_detach, c);
		rr_free(env, c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Opens the transport of a URL (rr_rpc_client_open_fn). */
static int open_url(void *arg, const struct rr_xprt_client_params *p,
		    const struct rr_xprt_client_ops **ops, struct rr_xprt_client **x)
{
	struct rr_xprt_target t;
	const struct rr_xprt_class *cls;
	int rc = rr_xprt_resolve(arg, false, &t, &cls);

	if (rc)
		return rc;
	*ops = cls->client;
	return cls->client->create(&t, p, x);
}

RPCRDMA_API int rpcrdma_client_create(const char *url, uint32_t prog, uint32_t vers,
				      const struct rpcrdma_client_opts *opts,
				      struct rpcrdma_client **out)
{
	struct rr_xprt_target t;
	const struct rr_xprt_class *cls;
	int rc;

	if (!out)
		return -EINVAL;
	rc = rr_xprt_resolve(url, false, &t, &cls);   /* before any allocation */
	if (rc)
		return rc;
	return rr_rpc_client_create_with(prog, vers, opts, open_url, (void *)(uintptr_t)url, out);
}

int rr_rpc_client_bc_serve(struct rpcrdma_client *c, const struct rr_xprt_server_params *p,
			   const struct rr_xprt_server_ops **ops, struct rr_xprt_server **xs)
{
	if (!c->ops->bc_serve)
		return -EOPNOTSUPP;
	return c->ops->bc_serve(c->xp, p, ops, xs);
}

RPCRDMA_API void rpcrdma_client_destroy(struct rpcrdma_client *c)
{
	if (!c)
		return;
	/* Abort every pending call and wait until all completed. */
	rr_lock(&c->lock);
	for (;;) {
		struct rpcrdma_call *p = c->pending;

		while (p && p->aborting)
			p = p->next;
		if (!p)
			break;
		abort_call(c, p, -ECANCELED);
	}
	while (c->pending || c->cb_active)
		(void)clnt_wait(c, NULL);
	c->stopping = true;
	rr_unlock(&c->lock);
	rr_engine_call(c->loop, client_detach, c);
	c->ops->destroy(c->xp);
	for (struct rpcrdma_call *call; (call = rr_spare_take(&c->spare));) {
		rr_xbuf_enc_free(&call->enc);
		rr_free(c->env, call);
	}
	rr_free(c->env, c);
}

RPCRDMA_API int rpcrdma_client_set_auth_none(struct rpcrdma_client *c)
{
	rr_lock(&c->lock);
	c->cred.flavor = RR_RPC_AUTH_NONE;
	c->cred.len = 0;
	c->cred.body = NULL;
	atomic_store_explicit(&c->cred_none, true, memory_order_release);
	rr_unlock(&c->lock);
	return 0;
}

static int authsys_to_wire(const struct rpcrdma_auth_sys *sys, struct rr_rpc_authsys *w)
{
	size_t n = strnlen(sys->machinename, sizeof(sys->machinename));

	if (n > RR_RPC_AUTHSYS_MAXNAME || sys->ngids > RR_RPC_AUTHSYS_MAXGIDS)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->stamp = sys->stamp;
	w->machinename = (const uint8_t *)sys->machinename;
	w->machinename_len = (uint32_t)n;
	w->uid = sys->uid;
	w->gid = sys->gid;
	w->ngids = sys->ngids;
	memcpy(w->gids, sys->gids, sys->ngids * sizeof(uint32_t));
	return 0;
}

RPCRDMA_API int rpcrdma_client_set_auth_sys(struct rpcrdma_client *c,
					    const struct rpcrdma_auth_sys *sys)
{
	struct rr_rpc_authsys w;
	struct rr_rpc_auth a;
	uint8_t body[RR_RPC_AUTH_MAXBODY];
	int rc;

	if (!sys)
		return -EINVAL;
	rc = authsys_to_wire(sys, &w);
	if (!rc)
		rc = rr_rpcmsg_make_authsys(&w, body, sizeof(body), &a);
	if (rc)
		return rc;
	rr_lock(&c->lock);
	memcpy(c->cred_body, body, a.len);
	c->cred.flavor = RR_RPC_AUTH_SYS;
	c->cred.len = a.len;
	c->cred.body = c->cred_body;
	atomic_store_explicit(&c->cred_none, false, memory_order_release);
	rr_unlock(&c->lock);
	return 0;
}

RPCRDMA_API int rpcrdma_auth_sys_self(struct rpcrdma_auth_sys *sys)
{
	gid_t groups[RPCRDMA_AUTHSYS_MAXGIDS];
	int n;

	if (!sys)
		return -EINVAL;
	memset(sys, 0, sizeof(*sys));
	sys->stamp = (uint32_t)time(NULL);
	if (gethostname(sys->machinename, sizeof(sys->machinename) - 1) < 0)
		sys->machinename[0] = '\0';
	sys->machinename[sizeof(sys->machinename) - 1] = '\0';
	sys->uid = (uint32_t)getuid();
	sys->gid = (uint32_t)getgid();
	n = getgroups(RPCRDMA_AUTHSYS_MAXGIDS, groups);
	if (n < 0) /* more than 16 groups: send the first 16 like Linux */
		n = 0;
	for (int i = 0; i < n; i++)
		sys->gids[i] = (uint32_t)groups[i];
	sys->ngids = (uint32_t)n;
	return 0;
}

/* rpcrdma_call_create's Call header for @call with the client's
 * credential (not AUTH_NONE), under the lock (the credential may change
 * meanwhile): 0 or the encoding's error. Out of line: AUTH_NONE's way
 * (every NULL call of the benchmarks) stays without the frame of
 * struct rr_rpc_call and the general encoder. */
__attribute__((noinline)) static int call_header_cred(struct rpcrdma_client *c,
						      struct rpcrdma_call *call, uint32_t proc)
{
	struct rr_rpc_call h = {0};   /* verifier: AUTH_NONE */
	size_t n;
	uint8_t *p;
	int rc;

	rr_lock(&c->lock);
	h.cred = c->cred;
	h.xid = atomic_fetch_add_explicit(&c->next_xid, 1, memory_order_relaxed);
	h.prog = c->prog;
	h.vers = c->vers;
	h.proc = proc;
	/* Encode the header into place (the credential is copied). */
	n = 24 + 8 + RR_ALIGN4((size_t)h.cred.len) + 8;
	p = rr_xbuf_enc_room(&call->enc, n);
	if (p) {
		struct rr_xdr_enc e;

		rr_xdr_enc_init(&e, p, n);
		rc = rr_rpcmsg_encode_call(&e, &h);
	} else {
		rc = call->enc.error;
	}
	rr_unlock(&c->lock);
	call->xc.xid = h.xid;
	return rc;
}

/* The AUTH_NONE Call header of @call (its buffer emptied by its reset)
 * with the next XID of @c: true; false when the buffer has no room for it
 * (call->enc.error says why). No lock: the XID is an atomic counter and
 * nothing else of the client is read but what never changes. */
static inline bool call_header_none(struct rpcrdma_client *c, struct rpcrdma_call *call,
				    uint32_t proc)
{
	uint8_t *p = rr_xbuf_enc_room_empty(&call->enc, RR_RPC_CALL_NONE_SIZE);
	uint32_t xid;

	if (RR_UNLIKELY(p == NULL))
		return false;   /* (call->enc.error set) */
	xid = atomic_fetch_add_explicit(&c->next_xid, 1, memory_order_relaxed);
	rr_rpcmsg_encode_call_none(p, xid, c->prog, c->vers, proc);
	call->xc.xid = xid;
	return true;
}

/* rpcrdma_call_create but for its usual way: @call is the object taken
 * from this thread's cache (NULL: none taken, call_new makes one).
 * Out of line: the usual way makes no call and keeps no frame. */
__attribute__((noinline)) static int call_create_cold(struct rpcrdma_client *c,
						      struct rpcrdma_call *call, uint32_t proc,
						      struct rpcrdma_call **out)
{
	int rc;

	if (!call) {
		call = call_new(c);
		if (!call)
			return -ENOMEM;
	}
	if (atomic_load_explicit(&c->cred_none, memory_order_acquire))
		rc = call_header_none(c, call, proc) ? 0 : call->enc.error;
	else
		rc = call_header_cred(c, call, proc);
	if (rc) {
		call_drop(c, call);
		return rc;
	}
	*out = call;
	return 0;
}

RPCRDMA_API int rpcrdma_call_create(struct rpcrdma_client *c, uint32_t proc,
				    struct rpcrdma_call **out)
{
	struct rpcrdma_call *call = NULL;

	if (!c || !out)
		return -EINVAL;
	/* the usual way: an object of this thread's cache, AUTH_NONE (its
	 * flag read with acquire: a credential set before it is seen) */
	if (RR_LIKELY(c->call_tls && tls_ncalls)) {
		call = call_take_tls(c);
		/* (a buffer with room for the header: no call to grow it here,
		 * so no frame either) */
		if (RR_LIKELY(atomic_load_explicit(&c->cred_none, memory_order_acquire) &&
			      rr_xbuf_enc_fits(&call->enc, RR_RPC_CALL_NONE_SIZE) &&
			      call_header_none(c, call, proc))) {
			*out = call;
			return 0;
		}
	}
	return call_create_cold(c, call, proc, out);
}

RPCRDMA_API struct rpcrdma_xdr_enc *rpcrdma_call_args(struct rpcrdma_call *call)
{
	return &call->enc;
}

RPCRDMA_API int rpcrdma_call_set_sinks(struct rpcrdma_call *call,
				       const struct rpcrdma_ddp_sink *sinks, unsigned n)
{
	if (n > RR_RPC_MAX_DDP || (n && !sinks) || call->state != CALL_NEW)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (sinks[i].max && !sinks[i].buf)
			return -EINVAL;
	memcpy(call->sinks, sinks, n * sizeof(*sinks));
	call->nsinks = n;
	return 0;
}

RPCRDMA_API void rpcrdma_call_set_reply_hint(struct rpcrdma_call *call, size_t bytes)
{
	call->xc.reply_hint = bytes;
}

RPCRDMA_API void rpcrdma_call_set_reply_range(struct rpcrdma_call *call, size_t min,
					      size_t max)
{
	call->xc.reply_hint = max;
	call->xc.reply_min = min;
}

RPCRDMA_API int rpcrdma_call_reply_via_read(const struct rpcrdma_call *call)
{
	return call->have_reply && call->xc.reply_via_read ? 1 : 0;
}

RPCRDMA_API int rpcrdma_client_reliable_reply(const struct rpcrdma_client *c)
{
	if (!c->ops->reliable_reply)
		return -EOPNOTSUPP;
	return c->ops->reliable_reply(c->xp);
}

RPCRDMA_API void rpcrdma_call_set_timeout(struct rpcrdma_call *call, uint32_t ms)
{
	call->timeout_ms = ms;
}

RPCRDMA_API uint32_t rpcrdma_call_xid(const struct rpcrdma_call *call)
{
	return call->xc.xid;
}

/* @call's timeout in ms: its own, else its client's. */
static inline uint32_t call_timeout(const struct rpcrdma_call *call)
{
	return call->timeout_ms ? call->timeout_ms : call->clnt->timeout_ms;
}

/* The transport's view of @call's message, its callback @done(@arg). */
static void call_fill(struct rpcrdma_call *call, rpcrdma_call_done_fn done, void *arg)
{
	/* (xc.msg.ddp and xc.sinks point at the call's own arrays since
	 * call_new made the object; status is 0 since call_new: only a
	 * completion writes it, and a completed call is not started again) */
	call->xc.msg.head = call->enc.buf;
	call->xc.msg.head_len = call->enc.len;
	call->xc.msg.nddp = call->enc.nddp;
	call->xc.msg.xdr_len = call->enc.xdr_len;
	call->xc.nsinks = call->nsinks;
	call->done = done;
	call->done_arg = arg;
}

/* @call's deadline, its timeout after @now (a reading of the client's
 * clock taken at or after the call's start: never early; the precise
 * clock, as a deadline on the coarse one could be early, common.h). */
static inline void call_date(struct rpcrdma_call *call, uint64_t now)
{
	call->deadline = now + (uint64_t)call_timeout(call) * 1000000ull;
}

/* rpcrdma_call_start; with @sync (rpcrdma_call_run: no callback, the
 * caller waits next on this thread) in_submit stays set after a successful
 * submit, and is cleared where the completion is seen (on_complete on this
 * thread, or run_settle): one critical section fewer per call. @wait_ms
 * (sync only; 0: none): the transport's submit_wait instead of submit, its
 * first wait (at most RR_XPRT_FIRST_WAIT_MS of @wait_ms) over when this
 * returns 0. The call is dated here, at its start. */
static int call_start(struct rpcrdma_call *call, rpcrdma_call_done_fn done, void *arg,
		      bool sync, uint32_t wait_ms)
{
	struct rpcrdma_client *c = call->clnt;
	int rc;

	if (call->state != CALL_NEW)
		return -EBUSY;
	if (call->enc.error)
		return call->enc.error;
	call_fill(call, done, arg);
	call_date(call, rr_now_ns(c->env));

	rr_lock(&c->lock);
	if (c->stopping) {
		rr_unlock(&c->lock);
		return -ESHUTDOWN;
	}
	call->state = CALL_PENDING;
	/* The message now belongs to the transport: no more encoding (a
	 * growing buffer would move under it). */
	call->enc.error = -EBUSY;
	call->in_submit = true;
	call->sync_run = sync;
	if (sync)
		call->run_thread = rr_clnt_self();
	pending_link(c, call);
	rr_unlock(&c->lock);

	rc = wait_ms ? c->ops->submit_wait(c->xp, &call->xc, RR_MIN(wait_ms, RR_XPRT_FIRST_WAIT_MS))
		     : c->ops->submit(c->xp, &call->xc);
	if (!rc && sync)
		return 0;

	/* From here on the call may have completed and (for a callback call)
	 * been destroyed by its callback once the lock is released: do not
	 * touch it after the unlock below. */
	rr_lock(&c->lock);
	if (!rc) {
		abort_again(c, call);   /* an abort that came before the hold */
	} else {
		/* not taken: an abort of the window found nothing and no
		 * completion comes; the call is new again, unmarked */
		while (call->refs)
			(void)clnt_wait(c, NULL);
		call->aborting = false;
		atomic_store_explicit(&call->abort_early, false, memory_order_relaxed);
		atomic_store_explicit(&call->xc.abort_req, 0, memory_order_relaxed);
		call->enc.error = 0;
		pending_unlink(c, call);
		call->state = CALL_NEW;
		call->sync_run = false;
	}
	call->in_submit = false;
	clnt_wake(c);
	rr_unlock(&c->lock);
	return rc;
}

RPCRDMA_API int rpcrdma_call_start(struct rpcrdma_call *call, rpcrdma_call_done_fn done,
				   void *arg)
{
	if (!call)
		return -EINVAL;
	return call_start(call, done, arg, false, 0);
}

RPCRDMA_API int rpcrdma_call_wait(struct rpcrdma_call *call, int timeout_ms)
{
	struct rpcrdma_client *c = call->clnt;
	struct timespec ts;
	int rc;

	rr_lock(&c->lock);
	if (call->state == CALL_NEW) {
		rr_unlock(&c->lock);
		return -EINVAL;
	}
	if (call->in_submit && call->sync_run && call->run_thread == rr_clnt_self()) {
		/* its run thread, its submit returned (call_start, run_fast) */
		abort_again(c, call);
		call->in_submit = false;
	}
	if (timeout_ms >= 0)
		rr_engine_deadline(&ts, (uint32_t)timeout_ms);
	while (call->state != CALL_DONE || call->cb_running) {
		if (timeout_ms < 0) {
			(void)clnt_wait(c, NULL);
		} else if (clnt_wait(c, &ts) == -ETIMEDOUT) {
			if (call->state != CALL_DONE) {
				rr_unlock(&c->lock);
				return -EAGAIN;
			}
			/* Done but callback still running: keep waiting. */
			timeout_ms = -1;
		}
	}
	if (call->sync_run && call->run_thread == rr_clnt_self()) {
		call->in_submit = false;
		call->settled = !call->refs;
	}
	rc = call->status;
	rr_unlock(&c->lock);
	return rc;
}

/* run_fast's @call, not taken by the transport's submit_wait (no completion
 * comes): new again, out of c->sync_call or of the pending list (a cancel
 * may have listed it meanwhile), unmarked. Out of line: run_fast keeps no
 * frame for it. */
__attribute__((noinline)) static void run_fast_undo(struct rpcrdma_call *call)
{
	struct rpcrdma_client *c = call->clnt;

	rr_lock(&c->lock);
	if (!sync_clear(c, call))
		pending_unlink(c, call);   /* listed by a cancel meanwhile */
	while (call->refs)
		(void)clnt_wait(c, NULL);   /* a cancel's abort returns first */
	call->fast = false;
	call->aborting = false;
	atomic_store_explicit(&call->abort_early, false, memory_order_relaxed);
	atomic_store_explicit(&call->xc.abort_req, 0, memory_order_relaxed);
	call->in_submit = false;
	call->sync_run = false;
	call->enc.error = 0;
	call->state = CALL_NEW;
	clnt_wake(c);
	rr_unlock(&c->lock);
}

/* rpcrdma_call_run through the transport's submit_wait (@wait_ms) without
 * the client's lock, when no other synchronous call of the client runs
 * so: the call is registered in c->sync_call instead of the pending list
 * (no timer armed), and its own Reply seen on this thread settles it
 * without the lock (on_complete). Any other thread that must reach it does
 * so under the lock through c->sync_call (sync_take: a cancel lists it;
 * another thread that delivers its Reply completes it there); so does this
 * thread once its waits ended without it (run_dated). No clock is read
 * here (the lazy deadline): submit_wait makes one wait of at most
 * RR_XPRT_FIRST_WAIT_MS without a clock read (transport/xprt.h), and a call
 * answered within it never reads the clock; one that is not is dated
 * after that wait (run_dated), so its timeout never fires early and fires
 * at most that wait late. Returns 1 when not run so (the caller runs it
 * through call_start), else submit_wait's result. */
static int run_fast(struct rpcrdma_call *call, uint32_t wait_ms)
{
	struct rpcrdma_client *c = call->clnt;
	struct rpcrdma_call *none = NULL;
	int rc;

	if (call->enc.error || atomic_load_explicit(&c->sync_call, memory_order_relaxed))
		return 1;
	call_fill(call, NULL, NULL);
	call->state = CALL_PENDING;
	call->enc.error = -EBUSY;   /* the message is the transport's now */
	call->in_submit = true;
	call->sync_run = true;
	call->run_thread = rr_clnt_self();
	call->fast = true;
	if (!atomic_compare_exchange_strong_explicit(&c->sync_call, &none, call,
						     memory_order_acq_rel, memory_order_relaxed)) {
		call->fast = false;   /* another thread's: the general way */
		call->sync_run = false;
		call->in_submit = false;
		call->enc.error = 0;
		call->state = CALL_NEW;
		return 1;
	}
	rc = c->ops->submit_wait(c->xp, &call->xc, RR_MIN(wait_ms, RR_XPRT_FIRST_WAIT_MS));
	if (RR_UNLIKELY(rc))
		run_fast_undo(call);
	return rc;
}

/* A fast call (run_fast) not seen complete on its thread when the
 * transport's undated wait ended: dated now (its deadline its timeout
 * after this clock read, which is after its start: never early; late by
 * at most that first wait) and listed if still unlisted (sync_take: the
 * client's timer aborts it at its deadline), then waited for on this
 * thread through the transport's wait (@wait_ms from the transport's own
 * clock read: it ends after the deadline) and as rpcrdma_call_wait, which
 * first makes again a cancel that took the call before the transport held
 * it (abort_again). Not the usual way: one clock read, a lock pair. */
__attribute__((noinline)) static int run_dated(struct rpcrdma_call *call, uint32_t wait_ms)
{
	struct rpcrdma_client *c = call->clnt;
	uint64_t now = rr_now_ns(c->env);

	rr_lock(&c->lock);
	sync_take(c, call, now);
	rr_unlock(&c->lock);
	/* (abort_early: a cancel that listed the call while it was in submit,
	 * which may have found nothing in the transport: the wait would not
	 * end for it; rpcrdma_call_wait's abort_again makes it again) */
	if (RR_LIKELY(!atomic_load_explicit(&call->abort_early, memory_order_relaxed)))
		c->ops->wait(c->xp, &call->xc, wait_ms);
	if (call->settled)
		return call->status;   /* seen complete on this thread */
	return rpcrdma_call_wait(call, -1);
}

/* rpcrdma_call_run's general way (@rc 1: not run by run_fast): through
 * call_start, dated at the start and listed, then waited for on this
 * thread (@left_ms: the transport's wait, 0 when it has none). Out of line:
 * the usual synchronous call (run_fast's, settled in its first wait) keeps
 * no frame for it. */
__attribute__((noinline)) static int run_general(struct rpcrdma_call *call, uint64_t left_ms)
{
	struct rpcrdma_client *c = call->clnt;
	int rc = call_start(call, NULL, NULL, true,
			    left_ms && c->ops->submit_wait ? (uint32_t)left_ms : 0);

	call->xc.caller_waits = false;
	if (rc)
		return rc;
	if (call->settled && c->ops->submit_wait)
		return call->status;   /* seen complete in submit_wait's wait */
	/* (not when an abort came before the transport held the call: the
	 * wait would last until the Reply or the deadline, and the abort is
	 * made again by rpcrdma_call_wait. The flag, stored before that
	 * abort reached the transport and found nothing there, is seen here:
	 * the transport's hold of the call, which submit made after that,
	 * orders them.) */
	if (left_ms && RR_LIKELY(!atomic_load_explicit(&call->abort_early, memory_order_relaxed)))
		c->ops->wait(c->xp, &call->xc, (uint32_t)left_ms);
	if (call->settled)
		return call->status;   /* seen complete on this thread */
	return rpcrdma_call_wait(call, -1);
}

RPCRDMA_API int rpcrdma_call_run(struct rpcrdma_call *call)
{
	struct rpcrdma_client *c;
	uint64_t left_ms;
	int rc;

	if (!call)
		return -EINVAL;
	c = call->clnt;
	if (call->state != CALL_NEW)
		return -EBUSY;
	/* Let the transport receive on this thread (no handoff); the
	 * client's timer still enforces the deadline. The whole timeout and
	 * 1 ms (wait counts from its own clock read, at or after the one the
	 * call was dated by: it ends once the deadline passed); submit_wait's
	 * first wait is at most RR_XPRT_FIRST_WAIT_MS of it. */
	left_ms = 0;
	if (c->ops->wait) {
		left_ms = (uint64_t)call_timeout(call) + 1;
		left_ms = RR_MIN(left_ms, (uint64_t)UINT32_MAX);
	}
	call->xc.caller_waits = left_ms != 0;
	/* submit and wait in one entry when the transport has it, without
	 * the lock when it may */
	if (left_ms && c->ops->submit_wait) {
		rc = run_fast(call, (uint32_t)left_ms);
		if (rc != 1) {
			call->xc.caller_waits = false;
			if (RR_UNLIKELY(rc))
				return rc;   /* not taken (run_fast_undo) */
			/* settled: seen complete on this thread */
			return call->settled ? call->status : run_dated(call, (uint32_t)left_ms);
		}
	}
	return run_general(call, left_ms);
}

RPCRDMA_API void rpcrdma_call_cancel(struct rpcrdma_call *call)
{
	struct rpcrdma_client *c = call->clnt;

	rr_lock(&c->lock);
	if (atomic_load_explicit(&c->sync_call, memory_order_acquire) == call)
		sync_take(c, call, rr_now_ns(c->env));   /* run without the lock: listed now */
	/* Pending calls are listed (a fast call not listed completed, or
	 * completes now on its run thread: its state is not read here) */
	if ((!call->prev && c->pending != call) || call->state != CALL_PENDING ||
	    call->aborting) {
		rr_unlock(&c->lock);
		return;
	}
	abort_call(c, call, -ECANCELED);
	rr_unlock(&c->lock);
}

RPCRDMA_API struct rpcrdma_xdr_dec *rpcrdma_call_results(struct rpcrdma_call *call)
{
	if (call->state != CALL_DONE || call->status != 0)
		return NULL;
	if (!call->dec_ready) {
		/* the first ask (on_complete left the results' offset) */
		struct rr_xprt_call *xc = &call->xc;

		rr_xbuf_dec_init(&call->dec, xc->reply, xc->reply_len);
		call->dec.x.pos = call->res_pos;
		call->dec.sinks = call->sinks;
		call->dec.nsinks = call->nsinks;
		call->dec.placed = xc->placed;
		call->dec_ready = true;
	}
	return &call->dec;
}

RPCRDMA_API int rpcrdma_call_status(const struct rpcrdma_call *call,
				    struct rpcrdma_rpc_status *st)
{
	if (call->state != CALL_DONE || !call->have_reply)
		return -ENOENT;
	*st = call->rst;
	return 0;
}

/* rpcrdma_call_destroy of a call others may still hold (not settled).
 * Out of line: a settled call's destroy (every synchronous call's end)
 * stays without its frame (five registers saved and restored around a
 * jump to call_free: 12 instructions per call). */
__attribute__((noinline)) static void call_destroy_held(struct rpcrdma_call *call)
{
	struct rpcrdma_client *c = call->clnt;

	if (in_own_callback(call)) {
		call->destroy_in_cb = true;   /* freed when it returns */
		return;
	}
	rr_lock(&c->lock);
	/* rpcrdma_call_cancel, in the same critical section. */
	if (call->state == CALL_PENDING && !call->aborting)
		abort_call(c, call, -ECANCELED);
	while (call->state == CALL_PENDING || call->cb_running || call->refs ||
	       call->in_submit)
		(void)clnt_wait(c, NULL);
	rr_unlock(&c->lock);
	call_free(call);
}

RPCRDMA_API void rpcrdma_call_destroy(struct rpcrdma_call *call)
{
	if (!call)
		return;
	if (call->settled)
		call_free(call);   /* nothing else holds it */
	else
		call_destroy_held(call);
}

bool rr_rpc_client_sync_busy(const struct rpcrdma_client *c)
{
	return atomic_load_explicit(&((struct rpcrdma_client *)(uintptr_t)c)->sync_call,
				    memory_order_acquire) != NULL;
}

bool rr_rpc_client_runs_unlocked(const void *ctx, const struct rr_xprt_call *xc)
{
	struct rpcrdma_client *c = (struct rpcrdma_client *)(uintptr_t)ctx;
	struct rpcrdma_call *cur = atomic_load_explicit(&c->sync_call, memory_order_acquire);

	return cur && &cur->xc == xc;
}

/* Transport controls (transport/xprt_ctl.h): counters and push mode. */
int rr_rpc_client_ctl(struct rpcrdma_client *c, unsigned op, void *arg)
{
	if (!c)
		return -EINVAL;
	if (!c->ops->ctl)
		return -EOPNOTSUPP;
	return c->ops->ctl(c->xp, op, arg);
}
