/* SPDX-License-Identifier: BSD-2-Clause */
/* A synchronous call (rpcrdma_call_run) through a transport's submit_wait
 * runs without the client's lock when no other synchronous call of the
 * client does: registered in the client instead of its pending list, and
 * settled without the lock when its own thread sees its Reply (rpc/clnt.c
 * run_fast). Every other thread that may complete it or must reach it is
 * tried here with a scripted transport: the Reply delivered by another
 * thread (one that holds the transport's receiving role, a shared CQ's
 * progress loop, a reconnection's retransmission), the deadline (the
 * client's timer), a cancel from another thread while the transport waits,
 * a cancel that comes before the transport holds the call (its abort finds
 * nothing: made again once the transport has it), an asynchronous call of
 * the same client completed by the synchronous caller's wait, and several
 * threads running calls at once (one runs unlocked, the others the locked
 * way). Each checks the call's status and results, and that the call ran
 * unlocked (or not) as it should.
 *
 * The same transport, with and without submit_wait (as tcp://, which has
 * none), also tries the locked way's window between a call's listing and
 * the transport's hold of it (own_window): a cancel, the client's timer at
 * the call's deadline, or a client destroy whose abort lands there finds
 * nothing to abort; the call must still complete with that abort's status
 * (made again once the transport holds it), for a synchronous call run the
 * locked way and for an asynchronous one, against a transport that never
 * answers.
 *
 * Last, completion callbacks nested on one thread: the inner one destroys
 * the outer one's call (rpc_async_nested_callback_destroys_outer_call). */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rpc/clnt_int.h"
#include "rpcrdma/rpc.h"
#include "transport/xprt.h"

enum own_mode { OWN_SELF, OWN_OTHER, OWN_NEVER, OWN_CANCEL, OWN_CANCEL_EARLY };

struct rr_xprt_client {
	struct rr_xprt_client_params p;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct rr_xprt_call *held[8];   /* taken, not completed */
	unsigned nheld;
	uint8_t other_reply[64];        /* OWN_OTHER's (one call at a time) */
};

/* The next calls' mode: set by the test (and by own_run, which the threads
 * of rpc_sync_call_unlocked_many_threads run at once, all with the same
 * mode), read by the transport's submit on any thread: atomic. */
static _Atomic(enum own_mode) own_mode;
static _Atomic unsigned own_unlocked, own_locked, own_aborts;
static struct rpcrdma_call *own_cancel_call;   /* OWN_CANCEL, OWN_CANCEL_EARLY */
static struct rr_xprt_client *own_x;            /* the last one created */

/* What lands in the window before the transport holds the call of XID
 * own_early_xid (own_window). */
enum own_early { EARLY_NONE, EARLY_CANCEL, EARLY_TIMER, EARLY_DESTROY };
static enum own_early own_early;
static uint32_t own_early_xid;
static _Atomic unsigned own_early_aborts;       /* the transport's aborts of it */
static struct rpcrdma_call *own_early_call;     /* EARLY_CANCEL's */
static struct rpcrdma_client *own_early_clnt;   /* EARLY_DESTROY's */
static pthread_t own_destroyer;                 /* EARLY_DESTROY's thread */
/* An unlocked call that waits in submit_wait while own_block (so that
 * the client's other synchronous calls go the locked way). */
static bool own_block, own_blocked;
/* own_destroy leaves the transport to the test (EARLY_DESTROY: the test
 * still reads it while another thread destroys the client). */
static bool own_keep;
static _Thread_local uint8_t own_reply[2][64];  /* a caller's and an async one's */

static int own_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
		      struct rr_xprt_client **out)
{
	struct rr_xprt_client *x = calloc(1, sizeof(*x));

	(void)t;
	if (!x)
		return -ENOMEM;
	x->p = *p;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cv, NULL);
	own_x = x;
	*out = x;
	return 0;
}

static void own_destroy(struct rr_xprt_client *x)
{
	CHECK_EQ(x->nheld, 0);
	if (own_keep)
		return;   /* the test frees it (own_free) */
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cv);
	free(x);
}

/* The Reply to @call (SUCCESS, one word: the XID + 1), written in @r. */
static void own_answer(struct rr_xprt_call *call, uint8_t *r)
{
	rr_put_be32(r, call->xid);
	rr_put_be32(r + 4, 1);
	memset(r + 8, 0, 16);   /* accepted, empty verifier, SUCCESS */
	rr_put_be32(r + 24, call->xid + 1);
	call->reply = r;
	call->reply_len = 28;
	call->reply_buf = NULL;
	for (unsigned k = 0; k < RR_RPC_MAX_DDP; k++)
		call->placed[k] = RR_RPC_NOT_PLACED;
	call->status = 0;
}

/* Takes @call (held until completed or aborted). */
static void own_hold(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	pthread_mutex_lock(&x->lock);
	x->held[x->nheld++] = call;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->lock);
}

/* Removes @call from the held ones: false if it was not held. */
static bool own_unhold(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	bool found = false;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < x->nheld; i++)
		if (x->held[i] == call) {
			x->held[i] = x->held[--x->nheld];
			found = true;
			break;
		}
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->lock);
	return found;
}

/* Until @call is no longer held (completed or aborted; untimed). */
static void own_wait_unheld(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	pthread_mutex_lock(&x->lock);
	for (;;) {
		bool held = false;

		for (unsigned i = 0; i < x->nheld; i++)
			held |= x->held[i] == call;
		if (!held)
			break;
		pthread_cond_wait(&x->cv, &x->lock);
	}
	pthread_mutex_unlock(&x->lock);
}

static void *own_destroy_client(void *arg)
{
	rpcrdma_client_destroy(arg);
	return NULL;
}

/* Called by submit before the transport holds @call: when it is the call
 * of own_early_xid, what own_early says lands there, and its abort has
 * returned (cancel) or has at least reached the transport (found nothing:
 * the timer's, the destroy's; waited for untimed: the timer fires at the
 * call's deadline, the destroy aborts every listed call). */
static void own_window(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	if (own_early == EARLY_NONE || call->xid != own_early_xid)
		return;
	if (own_early == EARLY_CANCEL)
		rpcrdma_call_cancel(own_early_call);
	if (own_early == EARLY_DESTROY)
		REQUIRE_EQ(pthread_create(&own_destroyer, NULL, own_destroy_client, own_early_clnt),
			   0);
	if (own_early != EARLY_CANCEL) {
		pthread_mutex_lock(&x->lock);
		while (!own_early_aborts)
			pthread_cond_wait(&x->cv, &x->lock);
		pthread_mutex_unlock(&x->lock);
	}
	CHECK_EQ(own_early_aborts, 1);   /* made, and found nothing */
	own_early = EARLY_NONE;
}

static int own_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	own_window(x, call);
	own_hold(x, call);   /* an asynchronous call: answered by a later wait */
	return 0;
}

/* OWN_OTHER's thread: the Reply delivered by another thread. */
static void *own_other(void *arg)
{
	struct rr_xprt_call *call = arg;
	struct rr_xprt_client *x = call->xp_priv;

	if (own_unhold(x, call)) {
		own_answer(call, x->other_reply);
		x->p.complete(x->p.ctx, call);
	}
	return NULL;
}

/* OWN_CANCEL's thread: a cancel while the transport waits. */
static void *own_canceller(void *arg)
{
	rpcrdma_call_cancel(arg);
	return NULL;
}

static int own_submit_wait(struct rr_xprt_client *x, struct rr_xprt_call *call,
			   uint32_t timeout_ms)
{
	pthread_t t;

	(void)timeout_ms;
	if (rr_rpc_client_runs_unlocked(x->p.ctx, call))
		own_unlocked++;
	else
		own_locked++;
	call->xp_priv = x;
	if (own_block && rr_rpc_client_runs_unlocked(x->p.ctx, call)) {
		/* holds the client's unlocked registration until released,
		 * then answers itself */
		pthread_mutex_lock(&x->lock);
		own_blocked = true;
		pthread_cond_broadcast(&x->cv);
		while (own_block)
			pthread_cond_wait(&x->cv, &x->lock);
		pthread_mutex_unlock(&x->lock);
		own_answer(call, own_reply[0]);
		x->p.complete(x->p.ctx, call);
		return 0;
	}
	switch (own_mode) {
	case OWN_SELF:
		/* first the asynchronous calls this wait receives too */
		for (;;) {
			struct rr_xprt_call *a = NULL;

			pthread_mutex_lock(&x->lock);
			if (x->nheld)
				a = x->held[--x->nheld];
			pthread_mutex_unlock(&x->lock);
			if (!a)
				break;
			own_answer(a, own_reply[1]);
			x->p.complete(x->p.ctx, a);
		}
		own_answer(call, own_reply[0]);
		x->p.complete(x->p.ctx, call);   /* its own Reply, on its thread */
		return 0;
	case OWN_OTHER:
		own_hold(x, call);
		REQUIRE_EQ(pthread_create(&t, NULL, own_other, call), 0);
		REQUIRE_EQ(pthread_detach(t), 0);
		return 0;   /* another thread receives: this one returns */
	case OWN_NEVER:
		own_window(x, call);
		own_hold(x, call);
		return 0;   /* the wait ended without the Reply */
	case OWN_CANCEL:
		own_hold(x, call);
		REQUIRE_EQ(pthread_create(&t, NULL, own_canceller, own_cancel_call), 0);
		/* until the abort took it (untimed: the canceller runs) */
		own_wait_unheld(x, call);
		REQUIRE_EQ(pthread_join(t, NULL), 0);
		return 0;
	case OWN_CANCEL_EARLY:
		/* a cancel before the transport holds the call: its abort
		 * finds nothing to abort */
		rpcrdma_call_cancel(own_cancel_call);
		own_hold(x, call);
		return 0;
	}
	return -EINVAL;
}

static void own_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	own_aborts++;
	if (call->xid == own_early_xid)
		own_early_aborts++;
	if (!own_unhold(x, call))
		return;   /* not held (not yet, or completed): nothing */
	call->status = status;
	call->reply = NULL;
	call->reply_len = 0;
	x->p.complete(x->p.ctx, call);   /* from inside abort */
}

static void own_release(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	(void)x;
	call->reply = NULL;
}

/* (rpcrdma_call_run enters submit_wait only with a wait op present) */
static void own_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	(void)x;
	(void)call;
	(void)timeout_ms;
}

static const struct rr_xprt_client_ops own_ops = {
	.create = own_create,
	.submit = own_submit,
	.abort = own_abort,
	.release_reply = own_release,
	.destroy = own_destroy,
	.wait = own_wait,
	.submit_wait = own_submit_wait,
};
static const struct rr_xprt_class own_class = {"syncown", &own_ops, NULL};
/* tcp://'s wait (the reader role): until the call completes (the
 * transport no longer holds it) or its time is up; here the server never
 * answers and the time is never up (untimed). */
static void own_wait_held(struct rr_xprt_client *x, struct rr_xprt_call *call,
			  uint32_t timeout_ms)
{
	(void)timeout_ms;
	own_wait_unheld(x, call);
}

/* The same without submit_wait: every synchronous call goes the locked
 * way, submit then wait (as on tcp://). */
static const struct rr_xprt_client_ops own_ops_nosw = {
	.create = own_create,
	.submit = own_submit,
	.abort = own_abort,
	.release_reply = own_release,
	.destroy = own_destroy,
	.wait = own_wait_held,
};
static const struct rr_xprt_class own_class_nosw = {"syncownw", &own_ops_nosw, NULL};

static struct rpcrdma_client *own_client(void)
{
	struct rpcrdma_client *c = NULL;

	REQUIRE_EQ(rr_xprt_register(&own_class), 0);
	REQUIRE_EQ(rpcrdma_client_create("syncown://x:1", 7, 1, NULL, &c), 0);
	own_unlocked = own_locked = own_aborts = 0;
	return c;
}

/* Runs one call of @c in @mode (@timeout_ms, 0: the default); returns its
 * status and checks a SUCCESS's result word. */
static int own_run(struct rpcrdma_client *c, enum own_mode mode, uint32_t timeout_ms)
{
	struct rpcrdma_call *call;
	uint32_t v = 0;
	int rc;

	own_mode = mode;
	rc = rpcrdma_call_create(c, 1, &call);
	CHECK_EQ(rc, 0);   /* (may run on another thread: no REQUIRE) */
	if (rc)
		return rc;
	if (timeout_ms)
		rpcrdma_call_set_timeout(call, timeout_ms);
	if (mode == OWN_CANCEL || mode == OWN_CANCEL_EARLY)
		own_cancel_call = call;
	rc = rpcrdma_call_run(call);
	if (rc == 0) {
		CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
		CHECK_EQ(v, rpcrdma_call_xid(call) + 1);
	} else {
		CHECK(rpcrdma_call_results(call) == NULL);
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* Its own Reply on its own thread: unlocked, settled there; a second
 * call runs unlocked again (the registration was given back). */
TEST(rpc_sync_call_unlocked_own_reply)
{
	struct rpcrdma_client *c = own_client();

	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(own_unlocked, 2);
	CHECK_EQ(own_locked, 0);
	rpcrdma_client_destroy(c);
}

/* The Reply delivered by another thread (the transport's receiving role
 * held elsewhere, a shared CQ's loop, a reconnection's retransmission
 * answered there) while the caller's wait already returned: completed
 * under the lock there, the caller waits for it. Then the next call runs
 * unlocked again. */
TEST(rpc_sync_call_unlocked_reply_on_other_thread)
{
	struct rpcrdma_client *c = own_client();

	for (unsigned i = 0; i < 20; i++)
		CHECK_EQ(own_run(c, OWN_OTHER, 0), 0);
	CHECK_EQ(own_unlocked, 20);
	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(own_unlocked, 21);
	rpcrdma_client_destroy(c);
}

/* No Reply: the wait ends, the call is listed, the client's timer aborts
 * it at its deadline (-ETIMEDOUT); the next call runs unlocked. */
TEST(rpc_sync_call_unlocked_timeout)
{
	struct rpcrdma_client *c = own_client();

	CHECK_EQ(own_run(c, OWN_NEVER, 50), -ETIMEDOUT);
	CHECK_EQ(own_aborts, 1);
	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(own_unlocked, 2);
	rpcrdma_client_destroy(c);
}

/* A cancel from another thread while the transport waits: the call is
 * taken into the list and aborted there (-ECANCELED). */
TEST(rpc_sync_call_unlocked_cancelled_by_other_thread)
{
	struct rpcrdma_client *c = own_client();

	CHECK_EQ(own_run(c, OWN_CANCEL, 0), -ECANCELED);
	CHECK_EQ(own_aborts, 1);
	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(own_unlocked, 2);
	rpcrdma_client_destroy(c);
}

/* A cancel whose abort comes before the transport holds the call (found
 * nothing): aborted again once the wait returned, so the call completes
 * (-ECANCELED) instead of waiting for a Reply that may never come (a
 * call marked aborting is skipped by the timer). Without the second
 * abort, this test does not return. */
TEST(rpc_sync_call_unlocked_cancel_before_transport_holds_it)
{
	struct rpcrdma_client *c = own_client();

	CHECK_EQ(own_run(c, OWN_CANCEL_EARLY, 0), -ECANCELED);
	CHECK_EQ(own_aborts, 2);
	rpcrdma_client_destroy(c);
}

static void own_cb(struct rpcrdma_call *call, int status, void *arg)
{
	uint32_t v = 0;

	if (status == 0 && rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v) == 0 &&
	    v == rpcrdma_call_xid(call) + 1)
		atomic_store((_Atomic int *)arg, 1);
	else
		atomic_store((_Atomic int *)arg, -1);
}

/* An asynchronous call of the same client, completed by the synchronous
 * caller's wait (its callback on that thread): both right, the
 * synchronous one unlocked. */
TEST(rpc_sync_call_unlocked_completes_async_call)
{
	struct rpcrdma_client *c = own_client();
	struct rpcrdma_call *a;
	_Atomic int got = 0;

	REQUIRE_EQ(rpcrdma_call_create(c, 1, &a), 0);
	REQUIRE_EQ(rpcrdma_call_start(a, own_cb, (void *)&got), 0);
	CHECK_EQ(own_run(c, OWN_SELF, 0), 0);
	CHECK_EQ(rpcrdma_call_wait(a, 10000), 0);
	CHECK_EQ(atomic_load(&got), 1);
	rpcrdma_call_destroy(a);
	CHECK_EQ(own_unlocked, 1);
	rpcrdma_client_destroy(c);
}

static void *own_runner(void *arg)
{
	for (unsigned i = 0; i < 200; i++)
		CHECK_EQ(own_run(arg, OWN_SELF, 0), 0);
	return NULL;
}

/* Four threads running calls on one client at once: each call completes
 * right, whichever way it ran (one at a time unlocked, the others the
 * locked way). */
TEST(rpc_sync_call_unlocked_many_threads)
{
	struct rpcrdma_client *c = own_client();
	pthread_t t[4];

	own_mode = OWN_SELF;
	for (unsigned i = 0; i < 4; i++)
		REQUIRE_EQ(pthread_create(&t[i], NULL, own_runner, c), 0);
	for (unsigned i = 0; i < 4; i++)
		REQUIRE_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(own_unlocked + own_locked, 800);
	CHECK(own_unlocked > 0);
	rpcrdma_client_destroy(c);
}

/* ---- the locked way's window between listing and submit ---- */

static void own_free(struct rr_xprt_client *x)
{
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cv);
	free(x);
}

/* Only when the abort was lost: how long the test waits for a call that
 * would otherwise wait for ever, before it fails and completes the call
 * itself (never reached when the abort is made again: the call then
 * completes at once). */
#define OWN_RESCUE_MS 20000

/* Completes every call the transport holds with -ETIME (a status no abort
 * gives: the test then fails on it too). */
static void own_rescue(struct rr_xprt_client *x)
{
	for (;;) {
		struct rr_xprt_call *a = NULL;

		pthread_mutex_lock(&x->lock);
		if (x->nheld)
			a = x->held[--x->nheld];
		pthread_cond_broadcast(&x->cv);
		pthread_mutex_unlock(&x->lock);
		if (!a)
			break;
		a->status = -ETIME;
		a->reply = NULL;
		a->reply_len = 0;
		x->p.complete(x->p.ctx, a);
	}
}

static pthread_mutex_t own_watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t own_watch_cv = PTHREAD_COND_INITIALIZER;
static bool own_watch_done;

/* The test's own bound on a synchronous call (OWN_RESCUE_MS): a call
 * still running then lost its abort (it waits for a Reply that never
 * comes): recorded as a failure, and the call completed with -ETIME. */
static void *own_watchdog(void *arg)
{
	struct timespec ts;
	bool done;

	(void)arg;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += OWN_RESCUE_MS / 1000;
	pthread_mutex_lock(&own_watch_lock);
	while (!own_watch_done && pthread_cond_timedwait(&own_watch_cv, &own_watch_lock, &ts) == 0)
		;
	done = own_watch_done;
	pthread_mutex_unlock(&own_watch_lock);
	CHECK(done);   /* else: the abort was lost, the call waits for ever */
	if (!done)
		own_rescue(own_x);
	return NULL;
}

/* rpcrdma_call_run(@call) under the watchdog; its status. */
static int own_run_watched(struct rpcrdma_call *call)
{
	pthread_t w;
	int rc;

	own_watch_done = false;
	REQUIRE_EQ(pthread_create(&w, NULL, own_watchdog, NULL), 0);
	rc = rpcrdma_call_run(call);
	pthread_mutex_lock(&own_watch_lock);
	own_watch_done = true;
	pthread_cond_broadcast(&own_watch_cv);
	pthread_mutex_unlock(&own_watch_lock);
	REQUIRE_EQ(pthread_join(w, NULL), 0);
	return rc;
}

/* @call (of @c) is the one whose window gets @e. */
static void own_arm(struct rpcrdma_client *c, struct rpcrdma_call *call, enum own_early e)
{
	own_early_xid = rpcrdma_call_xid(call);
	own_early_call = call;
	own_early_clnt = c;
	own_early_aborts = 0;
	own_early = e;
}

static struct rpcrdma_client *own_client_of(const struct rr_xprt_class *cls)
{
	struct rpcrdma_client *c = NULL;
	char url[32];

	snprintf(url, sizeof(url), "%s://x:1", cls->scheme);
	REQUIRE_EQ(rr_xprt_register(cls), 0);
	REQUIRE_EQ(rpcrdma_client_create(url, 7, 1, NULL, &c), 0);
	own_unlocked = own_locked = own_aborts = 0;
	return c;
}

static void *own_blocker(void *arg)
{
	CHECK_EQ(own_run(arg, OWN_SELF, 0), 0);
	return NULL;
}

/* A synchronous call run the locked way through submit_wait (another
 * thread's call holds the unlocked registration), a transport that never
 * answers, and a cancel from inside submit_wait before the transport holds
 * the call: its abort finds nothing; the call must end with -ECANCELED
 * (the abort made again once submit_wait returned) instead of waiting for
 * ever (on main: the watchdog's failure and -ETIME). */
TEST(rpc_sync_call_locked_cancel_before_transport_holds_it)
{
	struct rpcrdma_client *c = own_client();
	struct rpcrdma_call *call;
	pthread_t b;

	own_block = true;
	own_blocked = false;
	REQUIRE_EQ(pthread_create(&b, NULL, own_blocker, c), 0);
	pthread_mutex_lock(&own_x->lock);
	while (!own_blocked)
		pthread_cond_wait(&own_x->cv, &own_x->lock);
	pthread_mutex_unlock(&own_x->lock);
	own_mode = OWN_NEVER;
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	own_arm(c, call, EARLY_CANCEL);
	CHECK_EQ(own_run_watched(call), -ECANCELED);
	CHECK_EQ(own_early_aborts, 2);   /* the lost one, then the one made again */
	CHECK_EQ(own_locked, 1);         /* it did go the locked way */
	rpcrdma_call_destroy(call);
	pthread_mutex_lock(&own_x->lock);
	own_block = false;
	pthread_cond_broadcast(&own_x->cv);
	pthread_mutex_unlock(&own_x->lock);
	REQUIRE_EQ(pthread_join(b, NULL), 0);
	CHECK_EQ(own_unlocked, 1);
	rpcrdma_client_destroy(c);
}

/* The same on a transport without submit_wait (every synchronous call the
 * locked way, submit then wait, as tcp://): a cancel (-ECANCELED) or the
 * client's timer at the call's deadline (-ETIMEDOUT: a 1 ms timeout, the
 * submit waits until the timer's abort found nothing) in the window. The
 * transport's wait lasts until the call completes (as tcp://'s, up to the
 * deadline): the call must not enter it (abort_early), the abort is made
 * at once. */
static void own_sync_window(enum own_early e, uint32_t timeout_ms, int want)
{
	struct rpcrdma_client *c = own_client_of(&own_class_nosw);
	struct rpcrdma_call *call;

	own_mode = OWN_NEVER;
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	if (timeout_ms)
		rpcrdma_call_set_timeout(call, timeout_ms);
	own_arm(c, call, e);
	CHECK_EQ(own_run_watched(call), want);
	CHECK_EQ(own_early_aborts, 2);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
}

TEST(rpc_sync_call_locked_no_submit_wait_cancel_in_window)
{
	own_sync_window(EARLY_CANCEL, 0, -ECANCELED);
}

TEST(rpc_sync_call_locked_no_submit_wait_deadline_in_window)
{
	own_sync_window(EARLY_TIMER, 1, -ETIMEDOUT);
}

struct own_async {
	_Atomic unsigned calls;
	_Atomic int status;
	bool destroy;   /* the callback destroys the call */
};

static void own_async_cb(struct rpcrdma_call *call, int status, void *arg)
{
	struct own_async *a = arg;

	a->calls++;
	a->status = status;
	if (a->destroy)
		rpcrdma_call_destroy(call);
}

/* An asynchronous call, a transport that never answers, and @e in the
 * window of its submit: once rpcrdma_call_start returned, the transport
 * must no longer hold the call (its abort made again there; on main it
 * still holds it: the call would wait for ever, so the test completes it
 * with -ETIME), and the callback runs exactly once, with @want. With
 * EARLY_DESTROY another thread destroys the client (its destroy waits for
 * the call; the callback destroys the call). */
static void own_async_window(enum own_early e, uint32_t timeout_ms, int want)
{
	struct rpcrdma_client *c = own_client_of(&own_class_nosw);
	struct own_async a = {.destroy = e == EARLY_DESTROY};
	struct rpcrdma_call *call;
	struct rr_xprt_client *x = own_x;
	unsigned held;

	own_keep = e == EARLY_DESTROY;
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	if (timeout_ms)
		rpcrdma_call_set_timeout(call, timeout_ms);
	own_arm(c, call, e);
	REQUIRE_EQ(rpcrdma_call_start(call, own_async_cb, &a), 0);
	pthread_mutex_lock(&x->lock);
	held = x->nheld;
	pthread_mutex_unlock(&x->lock);
	CHECK_EQ(held, 0);
	CHECK_EQ(own_early_aborts, 2);
	if (held)
		own_rescue(x);
	if (e == EARLY_DESTROY) {
		REQUIRE_EQ(pthread_join(own_destroyer, NULL), 0);   /* the callback ran */
		own_keep = false;
		own_free(x);
	} else {
		CHECK_EQ(rpcrdma_call_wait(call, -1), want);
		rpcrdma_call_destroy(call);
		rpcrdma_client_destroy(c);
	}
	CHECK_EQ(a.calls, 1);
	CHECK_EQ(a.status, want);
}

TEST(rpc_async_call_cancel_before_transport_holds_it)
{
	own_async_window(EARLY_CANCEL, 0, -ECANCELED);
}

TEST(rpc_async_call_deadline_before_transport_holds_it)
{
	own_async_window(EARLY_TIMER, 1, -ETIMEDOUT);
}

TEST(rpc_async_call_client_destroy_before_transport_holds_it)
{
	own_async_window(EARLY_DESTROY, 0, -ECANCELED);
}

/* Completion callbacks nested on one thread (issue 16 part CL: a
 * thread-local chain of the callbacks a thread runs tells
 * rpcrdma_call_destroy that it is inside its call's callback, where each
 * call's cb_thread did): call A's callback completes call B on the same
 * thread (as a synchronous call's wait delivers the other calls' Replies),
 * and B's callback destroys A, the outer one, then B. Each destroy only
 * marks its call, freed once its callback returned; a destroy that did not
 * see A's callback running on this thread would wait for that callback to
 * end: for ever (the test's timeout). */
struct own_nest {
	struct rr_xprt_client *x;
	struct rpcrdma_call *a;
	struct rr_xprt_call *b_xc;   /* B, as the transport holds it */
	unsigned a_calls, b_calls;
	bool a_ended;
};

static void own_nest_b(struct rpcrdma_call *call, int status, void *arg)
{
	struct own_nest *n = arg;

	CHECK_EQ(status, 0);
	CHECK(!n->a_ended);   /* inside A's callback */
	n->b_calls++;
	rpcrdma_call_destroy(n->a);   /* the outer callback's call */
	rpcrdma_call_destroy(call);
}

static void own_nest_a(struct rpcrdma_call *call, int status, void *arg)
{
	struct own_nest *n = arg;

	CHECK_EQ(status, 0);
	CHECK(rpcrdma_call_results(call) != NULL);
	n->a_calls++;
	REQUIRE(own_unhold(n->x, n->b_xc));
	own_answer(n->b_xc, own_reply[1]);
	n->x->p.complete(n->x->p.ctx, n->b_xc);   /* B's callback runs here */
	CHECK_EQ(n->b_calls, 1);
	n->a_ended = true;
}

TEST(rpc_async_nested_callback_destroys_outer_call)
{
	struct rpcrdma_client *c = own_client_of(&own_class_nosw);
	struct rr_xprt_client *x = own_x;
	struct own_nest n = {.x = x};
	struct rpcrdma_call *b;
	struct rr_xprt_call *a_xc = NULL;

	REQUIRE_EQ(rpcrdma_call_create(c, 1, &n.a), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &b), 0);
	REQUIRE_EQ(rpcrdma_call_start(n.a, own_nest_a, &n), 0);
	REQUIRE_EQ(rpcrdma_call_start(b, own_nest_b, &n), 0);
	pthread_mutex_lock(&x->lock);
	REQUIRE_EQ(x->nheld, 2);
	for (unsigned i = 0; i < 2; i++) {
		if (x->held[i]->xid == rpcrdma_call_xid(n.a))
			a_xc = x->held[i];
		else if (x->held[i]->xid == rpcrdma_call_xid(b))
			n.b_xc = x->held[i];
	}
	pthread_mutex_unlock(&x->lock);
	REQUIRE(a_xc != NULL && n.b_xc != NULL);
	REQUIRE(own_unhold(x, a_xc));
	own_answer(a_xc, own_reply[0]);
	x->p.complete(x->p.ctx, a_xc);   /* A's callback, on this thread */
	CHECK_EQ(n.a_calls, 1);
	CHECK_EQ(n.b_calls, 1);
	CHECK(n.a_ended);
	rpcrdma_client_destroy(c);   /* both calls freed: no callback left */
}

/* rr_clnt_self, the identity rpcrdma_call_run records as its run_thread
 * and on_complete compares with (a Reply settled without the lock only on
 * that thread): the same value each time on one thread, and a different
 * one on each of several threads alive at once (issue 16 part BM: the
 * thread pointer instead of pthread_self). */
struct self_seen {
	pthread_barrier_t *all_alive;
	uintptr_t first, second;
};

static void *self_thread(void *arg)
{
	struct self_seen *s = arg;

	s->first = rr_clnt_self();
	(void)pthread_barrier_wait(s->all_alive);   /* every thread alive */
	s->second = rr_clnt_self();
	return NULL;
}

TEST(rpc_clnt_self_tells_threads_apart)
{
	enum { N = 4 };
	pthread_barrier_t b;
	pthread_t t[N];
	struct self_seen s[N];
	uintptr_t me = rr_clnt_self();

	CHECK_EQ(me, rr_clnt_self());
	REQUIRE_EQ(pthread_barrier_init(&b, NULL, N), 0);
	for (int i = 0; i < N; i++) {
		s[i] = (struct self_seen){.all_alive = &b};
		REQUIRE_EQ(pthread_create(&t[i], NULL, self_thread, &s[i]), 0);
	}
	for (int i = 0; i < N; i++)
		REQUIRE_EQ(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&b);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(s[i].first, s[i].second);
		CHECK(s[i].first != me);
		for (int j = 0; j < i; j++)
			CHECK(s[i].first != s[j].first);
	}
}
