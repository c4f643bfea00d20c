/* SPDX-License-Identifier: BSD-2-Clause */
/* The client role of tcp:// (transport/xprt.h section 2): ONC RPC over TCP
 * with record marking (RFC 5531 section 11). Calls are written as one
 * record each (tcp_io.c) and Replies matched to them by XID (RFC 5531
 * section 9); one thread at a time holds the "reader role" (the receive
 * thread, or a synchronous caller reading its own Reply). A lost connection
 * is re-established with back-off and every pending Call is retransmitted
 * with its XID; a Reply above the maximum message fails its Call only; a
 * server that answers in MPA (it speaks rdma://) fails every Call with
 * -EPROTOTYPE instead of a reconnect loop. Backchannel (transport/xprt.h
 * section 4, as NFSv4.1 over TCP: RFC 8881 section 2.10.3.1): records whose
 * RFC 5531 msg_type is CALL are reverse Calls, delivered to the client's
 * callback server (bc_serve) within its slots and answered on the
 * connection they came on. */
#include "transport/tcp/tcp_client.h"
#include "transport/tcp/tcp_io.h"
#include "rpc/rpcmsg.h"

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static _Atomic(rr_tcp_test_hook_fn) g_test_hook;

void rr_tcp_test_set_hook(rr_tcp_test_hook_fn fn)
{
	atomic_store(&g_test_hook, fn);
}

static void test_hook(enum rr_tcp_test_point pt, uint32_t xid, uint64_t gen)
{
	rr_tcp_test_hook_fn fn = atomic_load_explicit(&g_test_hook, memory_order_acquire);

	if (fn)
		fn(pt, xid, gen);
}

/* Reception follows a "reader role": one thread at a time reads the socket
 * and completes whatever Replies it finds. The receive thread takes the role
 * while calls are pending that no caller serves itself; a synchronous caller
 * (RPC layer's wait op) takes it to read its own Reply without a thread
 * handoff. Connection loss and reconnection are handled by the receive
 * thread.
 *
 * Retransmission: each connection has a generation (c->gen, changed only
 * with both locks held), and each call remembers the generation it was last
 * written on (call_priv.gen). After a reconnect the receive thread writes
 * every pending call whose generation is older than the new connection's,
 * except those a sender is writing right now (CF_SENDING). Such a sender
 * finds, when it takes c->lock after its write, that the generation moved
 * on, and writes the call again on the new connection itself. So a call is
 * never left written only on a dead connection, whichever thread wins. */

#define CF_SENDING 1u
#define CF_REPLIED 2u
#define CF_ABORTED 4u
#define CF_SELF 8u       /* the caller will read for this call itself */
#define NBUCKET 256u
#define STAGE_BYTES 65536u

struct tcp_clnt {
	struct rr_xprt_client_params p;
	struct rr_xprt_target t;
	pthread_mutex_t lock;       /* table, flags, counters, role, fd swap */
	pthread_mutex_t send_lock;  /* one record at a time on fd */
	pthread_cond_t cv;          /* role and state changes */
	int fd;                     /* -1 while disconnected */
	uint64_t gen;               /* connection generation */
	bool connected;
	bool broken;                /* a reader saw the connection fail */
	bool dead;                  /* lost and no reconnect */
	int dead_status;            /* 0, or why: -EPROTOTYPE (the server
				       answered in MPA: it speaks rdma://) */
	bool closing;
	bool reader_busy;           /* someone holds the reader role */
	unsigned n_pending;         /* calls in the table */
	unsigned n_self;            /* of those, flagged CF_SELF */
	pthread_t rx;
	struct rr_xprt_call *bucket[NBUCKET];
	struct rr_tcp_reader rd;    /* used only by the reader-role holder */
	struct tcp_bc_srv *bc;      /* the callback server (c->lock) */
};

/* The server role of the client's connections (bc_serve): reverse Calls
 * are delivered while started, at most the client's bc_slots at once. */
struct tcp_bc_srv {
	struct tcp_clnt *c;
	struct rr_xprt_server_params p;
	bool started, stopped;      /* c->lock */
	unsigned inflight;          /* delivered, not done (c->lock) */
};

/* A reverse Call delivered: its record buffer, and the connection it came
 * on (the Reply goes there or nowhere). */
struct tcp_bc_req {
	struct rr_xprt_req req;
	struct tcp_bc_srv *bc;
	uint8_t *buf;
	size_t cap;
	uint64_t gen;
	bool counted;               /* holds one of bc->inflight (c->lock) */
};

/* Per-call transport state, kept in xp_priv: the cancel flag for
 * send_record (atomic) and the connection generation the call was last
 * written on (c->lock; 0: not yet written). */
struct call_priv {
	atomic_bool cancel;
	size_t reply_cap;           /* capacity of reply_buf (recycled) */
	uint64_t gen;
};

static struct rr_xprt_call **find_slot(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	struct rr_xprt_call **pp = &c->bucket[call->xid % NBUCKET];

	while (*pp && *pp != call)
		pp = &(*pp)->xp_next;
	return *pp ? pp : NULL;
}

static struct rr_xprt_call *find_xid(struct tcp_clnt *c, uint32_t xid)
{
	struct rr_xprt_call *p = c->bucket[xid % NBUCKET];

	while (p && p->xid != xid)
		p = p->xp_next;
	return p;
}

/* Removes @call from the table (c->lock held). */
static void table_remove(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	struct rr_xprt_call **pp = find_slot(c, call);

	if (!pp)
		return;
	*pp = call->xp_next;
	c->n_pending--;
	if (call->xp_flags & CF_SELF) {
		call->xp_flags &= ~CF_SELF;
		c->n_self--;
	}
}

/* The caller no longer reads for @call: the receive thread will (c->lock). */
static void unflag_self(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	if ((call->xp_flags & CF_SELF) && find_slot(c, call)) {
		call->xp_flags &= ~CF_SELF;
		c->n_self--;
		pthread_cond_broadcast(&c->cv);
	}
}

static int tcp_connect(const struct rr_xprt_target *t, uint32_t timeout_ms, int *out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai, *a;
	int rc, err = -ECONNREFUSED;

	rc = getaddrinfo(t->host, t->port, &hints, &ai);
	if (rc)
		return -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		struct pollfd pfd;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (fd < 0) {
			err = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			err = -errno;
			close(fd);
			continue;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		rc = poll(&pfd, 1, (int)timeout_ms);
		if (rc <= 0) {
			err = -ETIMEDOUT;
			close(fd);
			continue;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			err = -soerr;
			close(fd);
			continue;
		}
		/* The socket stays non-blocking: readers poll, senders poll. */
		rr_tcp_sock_opts(fd);
		*out = fd;
		freeaddrinfo(ai);
		return 0;
	}
	freeaddrinfo(ai);
	return err;
}

/* Completes @call outside the lock. */
static void clnt_complete(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	c->p.complete(c->p.ctx, call);
}

/* Sends @call (marked CF_SENDING by the caller) and then completes it if a
 * reply or an abort arrived meanwhile. */
static void clnt_send_one(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	struct call_priv *cp = call->xp_priv;
	bool done = false;

	for (;;) {
		uint64_t gen;
		bool wrote = false;
		int rc = -ENOTCONN;

		pthread_mutex_lock(&c->send_lock);
		gen = c->gen;
		if (c->fd >= 0) {
			rc = rr_tcp_send_record(c->fd, &call->msg, &cp->cancel, 30000);
			wrote = rc != -ECANCELED && rc != -EMSGSIZE;
			if (rc && rc != -ECANCELED)
				shutdown(c->fd, SHUT_RDWR); /* the reader notices */
		}
		pthread_mutex_unlock(&c->send_lock);
		if (wrote)
			test_hook(RR_TCP_TEST_SENT, call->xid, gen);

		pthread_mutex_lock(&c->lock);
		if (wrote)
			cp->gen = gen;
		if (rc != -ECANCELED && rc != -EMSGSIZE && !c->dead && !c->closing &&
		    c->connected && !c->broken && c->gen != gen &&
		    !(call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
			/* The connection was replaced after this call was
			 * written to the old one (or failed to be): the
			 * reconnect's retransmit scan skipped it while it was
			 * CF_SENDING, so retransmit it on the new connection
			 * here (same XID). Without a live connection it stays
			 * pending with an old generation, and the next
			 * reconnect's scan retransmits it. */
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		if (rc && rc != -ECANCELED && rc != -EMSGSIZE) {
			/* Make sure someone handles the failed connection. */
			c->broken = c->connected && c->gen == gen ? true : c->broken;
			unflag_self(c, call);
			pthread_cond_broadcast(&c->cv);
		}
		call->xp_flags &= ~CF_SENDING;
		if (call->xp_flags & (CF_REPLIED | CF_ABORTED)) {
			if (!(call->xp_flags & CF_REPLIED))
				call->status = call->xp_status;
			done = true;
		} else if (rc == -EMSGSIZE) {
			call->status = rc;
			done = true;
		} else if (c->dead) {
			call->status = c->dead_status ? c->dead_status : -ECONNRESET;
			done = true;
		}
		if (done)
			table_remove(c, call);
		pthread_mutex_unlock(&c->lock);
		break;
	}
	if (done)
		clnt_complete(c, call);
}

static int tcp_clnt_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;
	struct call_priv *cp;
	bool send_now;

	if (call->msg.xdr_len > c->p.max_msg || call->msg.xdr_len > RR_RM_MAX_FRAG)
		return -EMSGSIZE;
	cp = rr_zalloc(c->p.env, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	atomic_init(&cp->cancel, false);
	rr_tcp_call_reset(call);

	pthread_mutex_lock(&c->lock);
	if (c->dead || c->closing) {
		pthread_mutex_unlock(&c->lock);
		rr_free(c->p.env, cp);
		return c->closing ? -ESHUTDOWN : c->dead_status ? c->dead_status : -ENOTCONN;
	}
	call->xp_priv = cp;
	call->xp_flags = 0;
	call->xp_next = c->bucket[call->xid % NBUCKET];
	c->bucket[call->xid % NBUCKET] = call;
	c->n_pending++;
	if (call->caller_waits) {
		call->xp_flags |= CF_SELF;
		c->n_self++;
	} else {
		pthread_cond_broadcast(&c->cv); /* the receive thread serves it */
	}
	send_now = c->connected;
	if (send_now)
		call->xp_flags |= CF_SENDING;
	pthread_mutex_unlock(&c->lock);

	if (send_now)
		clnt_send_one(c, call);
	return 0;
}

static void tcp_clnt_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;

	pthread_mutex_lock(&c->lock);
	if (!find_slot(c, call) || (call->xp_flags & (CF_ABORTED | CF_REPLIED))) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (call->xp_flags & CF_SENDING) {
		struct call_priv *cp = call->xp_priv;

		call->xp_flags |= CF_ABORTED;
		call->xp_status = status;
		atomic_store(&cp->cancel, true);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	table_remove(c, call);
	pthread_mutex_unlock(&c->lock);
	call->status = status;
	clnt_complete(c, call);
}

static void tcp_clnt_release_reply(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;

	struct call_priv *cp = call->xp_priv;

	if (call->reply_buf)
		rr_tcp_reader_recycle(&c->rd, call->reply_buf, cp ? cp->reply_cap : 0);
	call->reply_buf = NULL;
	call->reply = NULL;
	rr_free(c->p.env, call->xp_priv);
	call->xp_priv = NULL;
}

/* Whether reverse Calls are served now (c->lock): the receive thread then
 * reads even with no Call of ours pending. */
static bool bc_listening(const struct tcp_clnt *c)
{
	return c->bc && c->bc->started && !c->bc->stopped;
}

/* A reverse Call arrived (a record whose msg_type is CALL): delivered to
 * the callback server within its slots, else dropped (nobody offered to
 * serve it, or the peer exceeded what it was offered). */
static void clnt_on_call(struct tcp_clnt *c, uint8_t *buf, size_t len, size_t cap)
{
	struct tcp_bc_req *r = NULL;
	struct tcp_bc_srv *bc;

	pthread_mutex_lock(&c->lock);
	bc = c->bc;
	if (bc_listening(c) && bc->inflight < c->p.bc_slots) {
		r = rr_zalloc(c->p.env, sizeof(*r));
		if (r) {
			bc->inflight++;
			r->counted = true;
			r->bc = bc;
			r->gen = c->gen;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!r) {
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return;
	}
	r->buf = buf;
	r->cap = cap;
	r->req.msg = buf;
	r->req.len = len;
	r->req.xp_priv = r;
	bc->p.recv(bc->p.ctx, &r->req);
}

/* A record arrived: a Reply is matched to a pending Call by XID (RFC 5531
 * section 9), a Call goes to the callback server; anything else is
 * discarded. Returns the call it completed (only to be compared: it may be
 * gone), or NULL. */
static struct rr_xprt_call *clnt_on_record(struct tcp_clnt *c, uint8_t *buf, size_t len,
					   size_t cap)
{
	struct rr_xprt_call *call;
	uint32_t xid, mt;
	bool done = false;

	if (rr_rpcmsg_peek(buf, len, &xid, &mt) == 0 && mt == RR_RPC_CALL) {
		clnt_on_call(c, buf, len, cap);
		return NULL;
	}
	if (rr_rpcmsg_peek(buf, len, &xid, &mt) || mt != RR_RPC_REPLY) {
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	call = find_xid(c, xid);
	if (!call || (call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
		pthread_mutex_unlock(&c->lock);
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return NULL;
	}
	((struct call_priv *)call->xp_priv)->reply_cap = cap;
	call->reply_buf = buf;
	call->reply = buf;
	call->reply_len = len;
	call->status = 0;
	call->xp_flags |= CF_REPLIED;
	if (!(call->xp_flags & CF_SENDING)) {
		table_remove(c, call);
		done = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (!done)
		return NULL;
	clnt_complete(c, call);
	return call;
}

/* A Reply too large for max_msg was discarded: its call fails with
 * -EMSGSIZE (retransmitting would only bring the same Reply again). */
static void clnt_on_oversize(struct tcp_clnt *c, const uint8_t head8[8])
{
	struct rr_xprt_call *call;
	uint32_t xid, mt;
	bool done = false;

	if (rr_rpcmsg_peek(head8, 8, &xid, &mt) || mt != RR_RPC_REPLY)
		return;
	pthread_mutex_lock(&c->lock);
	call = find_xid(c, xid);
	if (call && !(call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
		if (call->xp_flags & CF_SENDING) {
			call->xp_flags |= CF_ABORTED;
			call->xp_status = -EMSGSIZE;
		} else {
			table_remove(c, call);
			call->status = -EMSGSIZE;
			done = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (done)
		clnt_complete(c, call);
}

/* With the reader role: waits up to @timeout_ms for bytes, then handles
 * every complete record available without blocking, or, with @mine, stops
 * once @mine completed and no received byte is left staged (the rest stays
 * in the socket for the next reader: no recv that would only say EAGAIN).
 * Returns 0, or a negative errno when the connection failed. */
static int clnt_read_some(struct tcp_clnt *c, int fd, int timeout_ms,
			  const struct rr_xprt_call *mine)
{
	int rc;

	if (!rr_tcp_reader_buffered(&c->rd)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		rc = poll(&pfd, 1, timeout_ms);
		if (rc <= 0)
			return 0;
	}
	for (;;) {
		rc = rr_tcp_read(&c->rd, fd);
		if (rc == RR_RM_RECORD) {
			size_t len, cap;
			uint8_t *buf = rr_rm_dec_take(&c->rd.dec, &len, &cap);

			if (clnt_on_record(c, buf, len, cap) == mine && mine &&
			    !rr_tcp_reader_buffered(&c->rd))
				return 0;
			continue;
		}
		if (rc == RR_RM_SKIPPED) {
			/* A Reply above max_msg: fail its call only. */
			const uint8_t *head8;

			if (rr_rm_dec_skipped(&c->rd.dec, &head8) >= 8)
				clnt_on_oversize(c, head8);
			continue;
		}
		if (rc == -EPROTOTYPE) {
			/* Another transport's server: reconnecting would
			 * only meet it again (clnt_lost fails the calls). */
			pthread_mutex_lock(&c->lock);
			c->dead_status = rc;
			pthread_mutex_unlock(&c->lock);
		}
		return rc;
	}
}

/* RPC layer's wait op: the caller reads for its own call (taking the reader
 * role) until the call left the table or @timeout_ms passed; if the role is
 * taken, the receive thread or the role holder serves it instead. */
static void tcp_clnt_wait(struct rr_xprt_client *x, struct rr_xprt_call *call,
			  uint32_t timeout_ms)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;
	uint64_t end_ms;
	struct timespec ts;
	int rc = 0, fd;

	pthread_mutex_lock(&c->lock);
	if (!find_slot(c, call) || !c->connected || c->broken || c->closing ||
	    c->reader_busy) {
		unflag_self(c, call);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->reader_busy = true;
	fd = c->fd;
	pthread_mutex_unlock(&c->lock);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	end_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + timeout_ms;
	for (;;) {
		uint64_t now_ms;
		bool pending;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
		if (now_ms >= end_ms)
			break;
		/* Slices of 50 ms: an abort (timeout, cancel) from another
		 * thread removes the call from the table meanwhile. */
		rc = clnt_read_some(c, fd, (int)RR_MIN(end_ms - now_ms, (uint64_t)50), call);
		pthread_mutex_lock(&c->lock);
		pending = find_slot(c, call) != NULL && !c->closing;
		pthread_mutex_unlock(&c->lock);
		if (rc < 0 || !pending)
			break;
	}
	pthread_mutex_lock(&c->lock);
	c->reader_busy = false;
	if (rc < 0)
		c->broken = true;
	unflag_self(c, call);
	/* The receive thread (the only waiter on c->cv) has something to do
	 * only if the connection failed or calls remain that no caller reads
	 * for; waking it after every synchronous call cost a context switch
	 * per call. */
	if (c->broken || c->closing || c->n_pending > c->n_self || bc_listening(c))
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
}

/* Fails every pending call that is not being sent (the senders finish the
 * others) with -ECONNRESET. Called with c->lock held; returns the list. */
static struct rr_xprt_call *take_unsent(struct tcp_clnt *c)
{
	struct rr_xprt_call *list = NULL;

	for (unsigned b = 0; b < NBUCKET; b++) {
		struct rr_xprt_call *p = c->bucket[b];

		while (p) {
			struct rr_xprt_call *next = p->xp_next;

			if (!(p->xp_flags & CF_SENDING)) {
				table_remove(c, p);
				p->xp_next = list;
				list = p;
			}
			p = next;
		}
	}
	return list;
}

/* The connection failed (reader role held by the caller): close it; with
 * no_reconnect, fail what is pending. Returns false when the receive thread
 * should end. */
static bool clnt_lost(struct tcp_clnt *c)
{
	struct rr_xprt_call *list = NULL;
	bool keep_going = true;
	int why = -ECONNRESET;

	pthread_mutex_lock(&c->lock);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR); /* wake blocked senders first */
	pthread_mutex_unlock(&c->lock);
	rr_tcp_reader_reset(&c->rd);
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->connected = false;
	c->broken = false;
	if (c->p.no_reconnect || c->closing || c->dead_status) {
		c->dead = true;
		why = c->dead_status ? c->dead_status : why;
		list = take_unsent(c);
		keep_going = !c->p.no_reconnect;
	}
	c->reader_busy = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	while (list) {
		struct rr_xprt_call *next = list->xp_next;

		list->status = why;
		clnt_complete(c, list);
		list = next;
	}
	return keep_going;
}

/* Reconnected on @fd: publish it and retransmit, with its XID, every
 * pending call that has no Reply and was not written on this connection
 * yet. A call a sender is writing now (CF_SENDING) is skipped: that sender
 * retransmits it itself if it wrote it on an older connection (see
 * clnt_send_one). */
static void clnt_reconnected(struct tcp_clnt *c, int fd)
{
	struct rr_xprt_call *resend[64];
	uint64_t gen;
	unsigned n;
	bool more;

	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	c->fd = fd;
	gen = ++c->gen;
	c->connected = true;
	c->broken = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	/* In batches; calls submitted from now on are sent by submitters.
	 * Each call is taken at most once per connection: its generation
	 * becomes @gen when written (even if the write fails, which breaks
	 * this connection: the next one's scan takes it again). */
	do {
		n = 0;
		more = false;
		pthread_mutex_lock(&c->lock);
		if (c->closing || c->broken || c->gen != gen) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		for (unsigned b = 0; b < NBUCKET && !more; b++) {
			for (struct rr_xprt_call *p = c->bucket[b]; p; p = p->xp_next) {
				struct call_priv *cp = p->xp_priv;

				if ((p->xp_flags & (CF_SENDING | CF_REPLIED | CF_ABORTED)) ||
				    cp->gen == gen)
					continue;
				if (n == RR_ARRAY_SIZE(resend)) {
					more = true;
					break;
				}
				p->xp_flags |= CF_SENDING;
				resend[n++] = p;
			}
		}
		pthread_mutex_unlock(&c->lock);
		for (unsigned i = 0; i < n; i++)
			clnt_send_one(c, resend[i]);
	} while (more);
	test_hook(RR_TCP_TEST_RESENT, 0, gen);
}

static void *clnt_rx_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rr-tcp-clnt");   /* for top -H, gdb */
	struct tcp_clnt *c = arg;
	unsigned backoff_ms = 50;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		int fd, rc;

		if (c->closing)
			break;
		if (c->connected && c->broken) {
			/* Take the role to tear down the connection. */
			if (c->reader_busy) {
				pthread_cond_wait(&c->cv, &c->lock);
				continue;
			}
			c->reader_busy = true;
			pthread_mutex_unlock(&c->lock);
			if (!clnt_lost(c))
				return NULL;
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (c->connected) {
			/* Serve the calls no caller reads for, and the
			 * reverse Calls that may come at any time. */
			if (c->reader_busy || (c->n_pending <= c->n_self && !bc_listening(c))) {
				pthread_cond_wait(&c->cv, &c->lock);
				continue;
			}
			c->reader_busy = true;
			fd = c->fd;
			pthread_mutex_unlock(&c->lock);
			rc = clnt_read_some(c, fd, 100, NULL);
			pthread_mutex_lock(&c->lock);
			c->reader_busy = false;
			if (rc < 0)
				c->broken = true;
			pthread_cond_broadcast(&c->cv);
			backoff_ms = 50;
			continue;
		}
		if (c->dead) {
			pthread_cond_wait(&c->cv, &c->lock);
			continue;
		}
		/* Disconnected: reconnect with backoff. */
		pthread_mutex_unlock(&c->lock);
		rc = tcp_connect(&c->t, c->p.connect_timeout_ms, &fd);
		if (rc) {
			struct timespec ts;

			pthread_mutex_lock(&c->lock);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)backoff_ms * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			if (!c->closing)
				pthread_cond_timedwait(&c->cv, &c->lock, &ts);
			backoff_ms = RR_MIN(backoff_ms * 2, 2000u);
			continue;
		}
		clnt_reconnected(c, fd);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static int tcp_clnt_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
			   struct rr_xprt_client **out)
{
	struct tcp_clnt *c;
	int rc, fd;

	rc = tcp_connect(t, p->connect_timeout_ms, &fd);
	if (rc)
		return rc;
	c = rr_zalloc(p->env, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->p = *p;
	c->t = *t;
	c->fd = fd;
	c->gen = 1; /* 0 in call_priv.gen: never written */
	c->connected = true;
	/* One connection: its spare may be as large as its largest Reply. */
	rr_tcp_reader_init(&c->rd, p->env, p->max_msg, p->max_msg, NULL, true, true);
	rc = rr_tcp_reader_stage(&c->rd, STAGE_BYTES);
	if (rc) {
		close(fd);
		rr_tcp_reader_fini(&c->rd);
		rr_free(p->env, c);
		return rc;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = pthread_create(&c->rx, NULL, clnt_rx_main, c);
	if (rc) {
		close(fd);
		rr_tcp_reader_fini(&c->rd);
		pthread_mutex_destroy(&c->lock);
		pthread_mutex_destroy(&c->send_lock);
		pthread_cond_destroy(&c->cv);
		rr_free(p->env, c);
		return -rc;
	}
	*out = (struct rr_xprt_client *)c;
	return 0;
}

static void tcp_clnt_destroy(struct rr_xprt_client *x)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;

	pthread_mutex_lock(&c->lock);
	c->closing = true;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->rx, NULL);
	if (c->fd >= 0)
		close(c->fd);
	rr_tcp_reader_fini(&c->rd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	pthread_cond_destroy(&c->cv);
	rr_free(c->p.env, c);
}

/* ---- the callback server (transport/xprt.h section 4) ---- */

static int bc_port(const struct rr_xprt_server *x)
{
	(void)x;
	return -EOPNOTSUPP;   /* it listens on nothing */
}

static int bc_start(struct rr_xprt_server *x)
{
	struct tcp_bc_srv *bc = (struct tcp_bc_srv *)x;
	struct tcp_clnt *c = bc->c;

	pthread_mutex_lock(&c->lock);
	bc->started = true;
	pthread_cond_broadcast(&c->cv);   /* the receive thread reads from now on */
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* The slot of @r is free again (its Reply is about to go, or it is done
 * without one). */
static void bc_uncount(struct tcp_clnt *c, struct tcp_bc_req *r)
{
	pthread_mutex_lock(&c->lock);
	if (r->counted) {
		r->counted = false;
		r->bc->inflight--;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->lock);
}

/* The Reply goes on the connection its Call came on; once that one is gone
 * it is lost (-ENOTCONN), as a server's Reply on a closed connection. The
 * slot is given back before the Reply is sent: a server may send the next
 * Call on that slot as soon as it has the Reply (NFSv4.1 does), before
 * req_done runs. */
static int bc_send_reply(struct rr_xprt_server *x, struct rr_xprt_req *req,
			 const struct rr_xprt_msg *msg)
{
	struct tcp_bc_srv *bc = (struct tcp_bc_srv *)x;
	struct tcp_bc_req *r = req->xp_priv;
	struct tcp_clnt *c = bc->c;
	int rc = -ENOTCONN;

	if (msg->xdr_len > c->p.max_msg || msg->xdr_len > RR_RM_MAX_FRAG)
		return -EMSGSIZE;
	bc_uncount(c, r);
	pthread_mutex_lock(&c->send_lock);   /* c->gen and c->fd change under it */
	if (c->fd >= 0 && c->gen == r->gen) {
		rc = rr_tcp_send_record(c->fd, msg, NULL, 30000);
		if (rc)
			shutdown(c->fd, SHUT_RDWR);   /* the reader notices */
	}
	pthread_mutex_unlock(&c->send_lock);
	return rc;
}

static void bc_req_done(struct rr_xprt_server *x, struct rr_xprt_req *req)
{
	struct tcp_bc_srv *bc = (struct tcp_bc_srv *)x;
	struct tcp_bc_req *r = req->xp_priv;
	struct tcp_clnt *c = bc->c;

	bc_uncount(c, r);
	rr_tcp_reader_recycle(&c->rd, r->buf, r->cap);
	rr_free(c->p.env, r);
}

static void bc_stop(struct rr_xprt_server *x)
{
	struct tcp_bc_srv *bc = (struct tcp_bc_srv *)x;

	pthread_mutex_lock(&bc->c->lock);
	bc->stopped = true;
	pthread_mutex_unlock(&bc->c->lock);
}

/* Every request delivered is done (the RPC layer waited); a delivery the
 * reader decided on just before stop is waited for too. */
static void bc_destroy(struct rr_xprt_server *x)
{
	struct tcp_bc_srv *bc = (struct tcp_bc_srv *)x;
	struct tcp_clnt *c = bc->c;

	pthread_mutex_lock(&c->lock);
	bc->stopped = true;
	while (bc->inflight)
		pthread_cond_wait(&c->cv, &c->lock);
	c->bc = NULL;
	pthread_mutex_unlock(&c->lock);
	rr_free(c->p.env, bc);
}

static const struct rr_xprt_server_ops bc_server_ops = {
	.port = bc_port,
	.start = bc_start,
	.send_reply = bc_send_reply,
	.req_done = bc_req_done,
	.stop = bc_stop,
	.destroy = bc_destroy,
	.inline_recv = false,   /* the reader must not run handlers */
};

static int tcp_clnt_bc_serve(struct rr_xprt_client *x, const struct rr_xprt_server_params *p,
			     const struct rr_xprt_server_ops **ops, struct rr_xprt_server **out)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;
	struct tcp_bc_srv *bc;

	if (!c->p.bc_slots)
		return -EINVAL;
	bc = rr_zalloc(c->p.env, sizeof(*bc));
	if (!bc)
		return -ENOMEM;
	bc->c = c;
	bc->p = *p;
	pthread_mutex_lock(&c->lock);
	if (c->bc) {
		pthread_mutex_unlock(&c->lock);
		rr_free(c->p.env, bc);
		return -EBUSY;
	}
	c->bc = bc;
	pthread_mutex_unlock(&c->lock);
	*ops = &bc_server_ops;
	*out = (struct rr_xprt_server *)bc;
	return 0;
}

const struct rr_xprt_client_ops rr_tcp_client_ops = {
	.create = tcp_clnt_create,
	.submit = tcp_clnt_submit,
	.abort = tcp_clnt_abort,
	.release_reply = tcp_clnt_release_reply,
	.destroy = tcp_clnt_destroy,
	.wait = tcp_clnt_wait,
	.bc_serve = tcp_clnt_bc_serve,
};
