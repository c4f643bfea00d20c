/* SPDX-License-Identifier: BSD-2-Clause */
/* The client role of tcp:// (transport/xprt.h section 2): ONC RPC over TCP
 * with record marking (RFC 5531 section 11). Calls are written as one
 * record each (tcp_io.c) and Replies matched to them by XID (RFC 5531
 * section 9); one thread at a time holds the "reader role" (the client's
 * progress loop, src/engine, or a synchronous caller reading its own
 * Reply): a client costs no thread and one file descriptor. A lost
 * connection is re-established by the loop (a non-blocking connect, with
 * back-off) and every pending Call is retransmitted with its XID; a Reply
 * above the maximum message fails its Call only; a server that answers in
 * MPA (it speaks rdma://) fails every Call with -EPROTOTYPE instead of a
 * reconnect loop. Backchannel (transport/xprt.h section 4, as NFSv4.1 over
 * TCP: RFC 8881 section 2.10.3.1): records whose RFC 5531 msg_type is CALL
 * are reverse Calls, delivered to the client's callback server (bc_serve)
 * within its slots and answered on the connection they came on; the loop
 * reads for them while that server runs. */
#include "transport/tcp/tcp_client.h"
#include "transport/tcp/tcp_io.h"
#include "rpc/rpcmsg.h"
#include "engine/engine.h"
#include "common/spare.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
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
 * and completes whatever Replies it finds. The client's loop takes the role
 * while calls are pending that no caller serves itself (the socket is
 * armed in the loop's epoll set, EPOLLONESHOT, only then: a synchronous
 * caller's Reply wakes that caller alone); a synchronous caller (RPC
 * layer's wait op) takes it to read its own Reply without a thread
 * handoff. Connection loss and reconnection are handled by the loop.
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
#define MAX_ADDRS 8u

struct tcp_clnt {
	struct rr_xprt_client_params p;
	struct rr_xprt_target t;
	pthread_mutex_t lock;       /* table, flags, counters, role, fd swap */
	pthread_mutex_t send_lock;  /* one record at a time on fd */
	pthread_cond_t cv;          /* role and state changes */
	unsigned cv_waiters;        /* threads waiting on cv (cv_wait) */
	int fd;                     /* -1 while disconnected */
	/* the progress loop: the connection's socket (EPOLLONESHOT, armed
	 * while the loop holds the reading of some call), a connecting
	 * socket, the back-off and connect timer, the task that handles a
	 * broken connection */
	struct rr_loop *loop;
	struct rr_loop_src rx_src;
	bool rx_added, rx_armed;
	struct rr_loop_src conn_src;   /* a reconnect in progress (fd >= 0) */
	struct rr_loop_timer timer;
	struct rr_loop_task work;
	unsigned backoff_ms;
	unsigned next_addr;
	struct sockaddr_storage addrs[MAX_ADDRS];
	socklen_t addrlens[MAX_ADDRS];
	unsigned naddrs;
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
	struct rr_xprt_call *bucket[NBUCKET];
	struct rr_tcp_reader rd;    /* used only by the reader-role holder */
	struct tcp_bc_srv *bc;      /* the callback server (c->lock) */
	struct rr_spare spare;      /* released call_privs kept for reuse */
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
	/* The caller took the reader role for this call in submit (a
	 * synchronous call: its wait follows on the same thread) and reads
	 * @fd: set and read by that thread only. */
	bool role;
	int fd;
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

/* Waits on c->cv (c->lock held) until a cv_wake. */
static void cv_wait(struct tcp_clnt *c)
{
	c->cv_waiters++;
	(void)rr_engine_wait(&c->cv, &c->lock, NULL);
	c->cv_waiters--;
}

/* Wakes the waiters of c->cv (c->lock held); none, no broadcast (the
 * reader role given back after every synchronous call pays none). */
static void cv_wake(struct tcp_clnt *c)
{
	if (c->cv_waiters)
		pthread_cond_broadcast(&c->cv);
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

static void rx_ready(struct rr_loop_src *src, uint32_t ev);
static bool bc_listening(const struct tcp_clnt *c);

/* The loop reads for the calls no caller reads for, and for reverse Calls
 * while the callback server runs: the socket is armed in its epoll set
 * while there are some and no reader holds the role (c->lock; one
 * epoll_ctl, and only when that changes). */
static void arm_rx(struct tcp_clnt *c)
{
	if (!c->rx_added || c->rx_armed || c->reader_busy || !c->connected || c->broken ||
	    c->closing || (c->n_pending <= c->n_self && !bc_listening(c)))
		return;
	if (rr_loop_mod(c->loop, &c->rx_src, EPOLLIN | EPOLLONESHOT) == 0)
		c->rx_armed = true;
}

/* The connection broke (c->lock): the loop tears it down and reconnects. */
static void post_work(struct tcp_clnt *c)
{
	rr_loop_post(c->loop, &c->work);
}

/* The caller no longer reads for @call: the loop will (c->lock). */
static void unflag_self(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	if ((call->xp_flags & CF_SELF) && find_slot(c, call)) {
		call->xp_flags &= ~CF_SELF;
		c->n_self--;
		arm_rx(c);
	}
}

/* Resolves @t once, at create: reconnections use these addresses (no name
 * lookup on the loop). */
static int tcp_resolve(struct tcp_clnt *c, const struct rr_xprt_target *t)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai, *a;

	if (getaddrinfo(t->host, t->port, &hints, &ai))
		return -EHOSTUNREACH;
	for (a = ai; a && c->naddrs < MAX_ADDRS; a = a->ai_next) {
		if (a->ai_addrlen > sizeof(c->addrs[0]))
			continue;
		memcpy(&c->addrs[c->naddrs], a->ai_addr, a->ai_addrlen);
		c->addrlens[c->naddrs++] = a->ai_addrlen;
	}
	freeaddrinfo(ai);
	return c->naddrs ? 0 : -EHOSTUNREACH;
}

/* Starts a non-blocking connect to address @i: the socket, or -errno. */
static int connect_start(const struct tcp_clnt *c, unsigned i)
{
	int fd = socket(c->addrs[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&c->addrs[i], c->addrlens[i]) < 0 &&
	    errno != EINPROGRESS) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* The outcome of a connect started on @fd: 0 or -errno. */
static int connect_result(int fd)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -errno;
	return -soerr;
}

/* A synchronous caller waits for its Reply in slices of this many ms (an
 * abort from another thread is seen between two). */
#define READ_SLICE_MS 50

/* A connected socket made ready for use: no Nagle; blocking, with receives
 * that wait at most one slice (SO_RCVTIMEO), so that a caller waiting for
 * its Reply sleeps in recv itself (rr_tcp_read_wait: one system call where
 * poll + recv took two). Every other recv and send on it passes
 * MSG_DONTWAIT, so the loop's thread never blocks on it. 0 or -errno. */
static int clnt_sock_setup(int fd)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = READ_SLICE_MS * 1000};
	int fl = fcntl(fd, F_GETFL);

	rr_tcp_sock_opts(fd);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/* The first connection, in the creating thread: every address in turn. */
static int tcp_connect(const struct tcp_clnt *c, uint32_t timeout_ms, int *out)
{
	int err = -ECONNREFUSED;

	for (unsigned i = 0; i < c->naddrs; i++) {
		struct pollfd pfd;
		int fd = connect_start(c, i), rc;

		if (fd < 0) {
			err = fd;
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
		rc = connect_result(fd);
		if (rc) {
			err = rc;
			close(fd);
			continue;
		}
		rc = clnt_sock_setup(fd);
		if (rc) {
			err = rc;
			close(fd);
			continue;
		}
		*out = fd;
		return 0;
	}
	return err;
}

/* Completes @call outside the lock. */
static void clnt_complete(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	c->p.complete(c->p.ctx, call);
}

/* A send of @call (marked CF_SENDING) on connection generation @gen ended
 * with @rc (@wrote: the record went, or some of it): completes the call if
 * a reply or an abort arrived meanwhile. Returns true when it must be
 * written again (the connection was replaced meanwhile). */
static bool send_ended(struct tcp_clnt *c, struct rr_xprt_call *call, uint64_t gen, int rc,
		       bool wrote)
{
	struct call_priv *cp = call->xp_priv;
	bool done = false;

	if (wrote)
		test_hook(RR_TCP_TEST_SENT, call->xid, gen);
	pthread_mutex_lock(&c->lock);
	if (wrote)
		cp->gen = gen;
	if (rc != -ECANCELED && rc != -EMSGSIZE && !c->dead && !c->closing && c->connected &&
	    !c->broken && c->gen != gen && !(call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
		/* The connection was replaced after this call was written to
		 * the old one (or failed to be): the reconnect's retransmit
		 * scan skipped it while it was CF_SENDING, so retransmit it on
		 * the new connection here (same XID). Without a live
		 * connection it stays pending with an old generation, and the
		 * next reconnect's scan retransmits it. */
		pthread_mutex_unlock(&c->lock);
		return true;
	}
	if (rc && rc != -ECANCELED && rc != -EMSGSIZE) {
		/* Make sure someone handles the failed connection. */
		c->broken = c->connected && c->gen == gen ? true : c->broken;
		unflag_self(c, call);
		if (c->broken)
			post_work(c);
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
	if (done)
		clnt_complete(c, call);
	return false;
}

/* Whether a send of @rc left bytes of the record on the stream. */
static bool send_wrote(int rc)
{
	return rc != -ECANCELED && rc != -EMSGSIZE;
}

/* Sends @call (marked CF_SENDING by the caller) and then completes it if a
 * reply or an abort arrived meanwhile. */
static void clnt_send_one(struct tcp_clnt *c, struct rr_xprt_call *call)
{
	struct call_priv *cp = call->xp_priv;

	for (;;) {
		uint64_t gen;
		bool wrote = false;
		int rc = -ENOTCONN;

		pthread_mutex_lock(&c->send_lock);
		gen = c->gen;
		if (c->fd >= 0) {
			rc = rr_tcp_send_record(c->fd, &call->msg, &cp->cancel, 30000);
			wrote = send_wrote(rc);
			if (rc && rc != -ECANCELED)
				shutdown(c->fd, SHUT_RDWR); /* the reader notices */
		}
		pthread_mutex_unlock(&c->send_lock);
		if (!send_ended(c, call, gen, rc, wrote))
			break;
	}
}

/* @cp, no call's any more: kept as a spare of @c or freed. */
static void call_priv_put(struct tcp_clnt *c, struct call_priv *cp)
{
	if (!rr_spare_put(&c->spare, cp))
		rr_free(c->p.env, cp);
}

static void role_release(struct tcp_clnt *c, int rc);

/* Enters @call in the table and takes the reader role for it when its
 * caller will wait for it and the role is free (c->lock). */
static void table_enter(struct tcp_clnt *c, struct rr_xprt_call *call, bool may_take_role)
{
	struct call_priv *cp = call->xp_priv;

	call->xp_flags = 0;
	call->xp_next = c->bucket[call->xid % NBUCKET];
	c->bucket[call->xid % NBUCKET] = call;
	c->n_pending++;
	if (!call->caller_waits) {
		arm_rx(c);   /* the loop serves it */
		return;
	}
	call->xp_flags |= CF_SELF;
	c->n_self++;
	if (may_take_role && c->connected && !c->broken && !c->reader_busy &&
	    !rr_engine_app_driven()) {
		c->reader_busy = true;
		cp->role = true;
		cp->fd = c->fd;
	}
}

/* Submit: the Call enters the table and, while the connection is up, is
 * written at once. Normally the record goes whole in one non-blocking
 * sendmsg with both locks held (send_lock, then c->lock: nobody sees the
 * call half-sent, so no CF_SENDING and no second critical section), and a
 * synchronous caller takes the reader role in the same critical section
 * (its wait then takes no lock to start reading). A record the socket
 * does not take whole goes on with send_lock alone, CF_SENDING set and the
 * role given back, as clnt_send_one. send_lock is only tried: a caller
 * never waits for it before its call is in the table (an abort, a timeout,
 * must find the call while another sender holds the socket), so when
 * another sender has it, and with a test hook set (the hook waits for the
 * loop in the window after a write), the send is clnt_send_one's. */
static int tcp_clnt_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;
	struct rr_tcp_send s;
	struct call_priv *cp;
	uint64_t gen = 0;
	bool send_now, fast;
	int rc = 0;

	if (call->msg.xdr_len > c->p.max_msg || call->msg.xdr_len > RR_RM_MAX_FRAG)
		return -EMSGSIZE;
	cp = rr_spare_take(&c->spare);
	if (!cp) {
		cp = rr_alloc(c->p.env, sizeof(*cp));
		if (!cp)
			return -ENOMEM;
	}
	memset(cp, 0, sizeof(*cp));
	atomic_init(&cp->cancel, false);
	rr_tcp_call_reset(call);

	fast = !atomic_load_explicit(&g_test_hook, memory_order_relaxed) &&
	       pthread_mutex_trylock(&c->send_lock) == 0;
	pthread_mutex_lock(&c->lock);
	if (c->dead || c->closing) {
		rc = c->closing ? -ESHUTDOWN : c->dead_status ? c->dead_status : -ENOTCONN;
		pthread_mutex_unlock(&c->lock);
		if (fast)
			pthread_mutex_unlock(&c->send_lock);
		call_priv_put(c, cp);
		return rc;
	}
	call->xp_priv = cp;
	table_enter(c, call, fast);
	send_now = c->connected;
	if (send_now && fast) {
		gen = c->gen;
		rc = rr_tcp_send_init(&s, &call->msg);
		if (!rc)
			rc = rr_tcp_send_more(c->fd, &s, NULL, 0);
		if (!rc) {
			cp->gen = gen;   /* sent whole */
			send_now = false;
		} else if (cp->role) {
			cp->role = false;   /* not while a send may block */
			role_release(c, 0);
		}
	}
	if (send_now)
		call->xp_flags |= CF_SENDING;
	pthread_mutex_unlock(&c->lock);
	if (!fast) {
		if (send_now)
			clnt_send_one(c, call);
		return 0;
	}
	if (send_now) {
		/* c->fd is stable under send_lock */
		if (rc == -EAGAIN)
			rc = rr_tcp_send_more(c->fd, &s, &cp->cancel, 30000);
		if (rc && rc != -ECANCELED)
			shutdown(c->fd, SHUT_RDWR); /* the reader notices */
	}
	pthread_mutex_unlock(&c->send_lock);
	if (send_now && send_ended(c, call, gen, rc, send_wrote(rc)))
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
	if (cp)
		call_priv_put(c, cp);
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
 * discarded. When the Reply is that of @mine (the call the role holder
 * reads for) and no received byte is left staged, the reader role is given
 * back in the same critical section: returns true then (@mine may be
 * gone by the return). */
static bool clnt_on_record(struct tcp_clnt *c, uint8_t *buf, size_t len, size_t cap,
			   const struct rr_xprt_call *mine)
{
	struct rr_xprt_call *call;
	uint32_t xid, mt;
	bool done = false, released = false;

	if (rr_rpcmsg_peek(buf, len, &xid, &mt)) {
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return false;
	}
	if (mt == RR_RPC_CALL) {
		clnt_on_call(c, buf, len, cap);
		return false;
	}
	if (mt != RR_RPC_REPLY) {
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return false;
	}
	pthread_mutex_lock(&c->lock);
	call = find_xid(c, xid);
	if (!call || (call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
		pthread_mutex_unlock(&c->lock);
		rr_tcp_reader_recycle(&c->rd, buf, cap);
		return false;
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
		if (call == mine && !rr_tcp_reader_buffered(&c->rd)) {
			role_release(c, 0);
			released = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (done)
		clnt_complete(c, call);
	return released;
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

/* With the reader role: waits up to @timeout_ms for bytes (< 0: the
 * socket is known to be readable, no wait; READ_SLICE_MS: in recv itself,
 * clnt_sock_setup), then handles every complete
 * record available without blocking, or, with @mine, stops once @mine
 * completed and no received byte is left staged (the rest stays in the
 * socket for the next reader: no recv that would only say EAGAIN) and
 * then returns 1, the role given back (clnt_on_record). Else returns 0,
 * or a negative errno when the connection failed. */
static int clnt_read_some(struct tcp_clnt *c, int fd, int timeout_ms,
			  const struct rr_xprt_call *mine)
{
	bool wait = false;
	int rc;

	if (timeout_ms >= 0 && !rr_tcp_reader_buffered(&c->rd)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		wait = timeout_ms == READ_SLICE_MS;
		if (!wait && poll(&pfd, 1, timeout_ms) <= 0)
			return 0;
	}
	for (;;) {
		rc = wait ? rr_tcp_read_wait(&c->rd, fd) : rr_tcp_read(&c->rd, fd);
		wait = false;
		if (rc == RR_RM_RECORD) {
			size_t len, cap;
			uint8_t *buf = rr_rm_dec_take(&c->rd.dec, &len, &cap);

			if (clnt_on_record(c, buf, len, cap, mine))
				return 1;
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

/* The reader role is given back (c->lock): a broken connection goes to
 * the loop, calls nobody reads for re-arm the socket. */
static void role_release(struct tcp_clnt *c, int rc)
{
	c->reader_busy = false;
	cv_wake(c);   /* destroy waits for the reader */
	if (rc < 0)
		c->broken = true;
	if (c->broken || c->closing)
		post_work(c);
	else
		arm_rx(c);
}

/* RPC layer's wait op: the caller reads for its own call (with the reader
 * role its submit took, or taking it now) until the call left the table or
 * @timeout_ms passed; if the role is taken, the loop or the role holder
 * serves it instead. When its own Reply ends the read, the role was given
 * back with it (clnt_on_record): no lock here. */
static void tcp_clnt_wait(struct rr_xprt_client *x, struct rr_xprt_call *call,
			  uint32_t timeout_ms)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;
	struct call_priv *cp = call->xp_priv;
	uint64_t now = rr_coarse_now_ns(NULL), end_ns;
	int rc = 0, fd;

	if (cp && cp->role) {
		cp->role = false;
		fd = cp->fd;
		goto read;
	}
	pthread_mutex_lock(&c->lock);
	/* When the application drives progress, the caller's wait drives the
	 * loop, which reads (a thread asleep on the socket would not run the
	 * loop that the server may be served by). */
	if (!find_slot(c, call) || !c->connected || c->broken || c->closing ||
	    c->reader_busy || rr_engine_app_driven()) {
		unflag_self(c, call);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->reader_busy = true;
	fd = c->fd;
	pthread_mutex_unlock(&c->lock);
read:
	end_ns = now + (uint64_t)timeout_ms * 1000000u;
	while (now < end_ns) {
		bool pending;

		/* Slices of 50 ms: an abort (timeout, cancel) from another
		 * thread removes the call from the table meanwhile. */
		rc = clnt_read_some(c, fd,
				    (int)RR_MIN((end_ns - now) / 1000000u + 1, READ_SLICE_MS), call);
		if (rc == 1)
			return;   /* done, the role given back */
		pthread_mutex_lock(&c->lock);
		pending = find_slot(c, call) != NULL && !c->closing;
		pthread_mutex_unlock(&c->lock);
		if (rc < 0 || !pending)
			break;
		now = rr_coarse_now_ns(NULL);
	}
	pthread_mutex_lock(&c->lock);
	unflag_self(c, call);
	/* The loop has something to do only if the connection failed or
	 * calls remain that no caller reads for (or reverse Calls may come):
	 * waking it after every synchronous call would cost a context switch
	 * per call. */
	role_release(c, rc);
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

/* The connection failed (reader role held by the caller, on the loop):
 * close it; with no_reconnect, fail what is pending. Returns whether to
 * reconnect. */
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
	if (c->rx_added) {
		rr_loop_del(c->loop, &c->rx_src);
		c->rx_added = c->rx_armed = false;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->connected = false;
	c->broken = false;
	if (c->p.no_reconnect || c->closing || c->dead_status) {
		c->dead = true;
		why = c->dead_status ? c->dead_status : why;
		list = take_unsent(c);
		keep_going = false;
	}
	c->reader_busy = false;
	cv_wake(c);
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

/* Reconnected on @fd (on the loop): publish it and retransmit, with its
 * XID, every pending call that has no Reply and was not written on this
 * connection yet. A call a sender is writing now (CF_SENDING) is skipped:
 * that sender retransmits it itself if it wrote it on an older connection
 * (see clnt_send_one). The retransmissions are written by the loop: a
 * peer that does not read stalls it up to the send timeout. */
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
	c->backoff_ms = 50;
	c->rx_added = rr_loop_add(c->loop, &c->rx_src, fd, EPOLLONESHOT, rx_ready) == 0;
	if (!c->rx_added)
		c->broken = true;
	arm_rx(c);   /* reverse Calls may come before any Reply */
	cv_wake(c);
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
	pthread_mutex_lock(&c->lock);
	if (c->broken)
		post_work(c);
	else
		arm_rx(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- the loop's side ---- */

/* The socket is readable and the loop reads for calls nobody else reads
 * for (EPOLLONESHOT: disarmed until arm_rx). */
static void rx_ready(struct rr_loop_src *src, uint32_t ev)
{
	struct tcp_clnt *c = RR_CONTAINER_OF(src, struct tcp_clnt, rx_src);
	int rc, fd;

	(void)ev;
	pthread_mutex_lock(&c->lock);
	c->rx_armed = false;
	if (c->reader_busy || !c->connected || c->broken || c->closing) {
		/* the reader re-arms when it gives the role back */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->reader_busy = true;
	fd = c->fd;
	pthread_mutex_unlock(&c->lock);
	rc = clnt_read_some(c, fd, -1, NULL);
	pthread_mutex_lock(&c->lock);
	role_release(c, rc);
	pthread_mutex_unlock(&c->lock);
}

static void reconnect_later(struct tcp_clnt *c)
{
	rr_loop_timer_set(c->loop, &c->timer, rr_now_ns(NULL) + (uint64_t)c->backoff_ms * 1000000u);
	c->backoff_ms = RR_MIN(c->backoff_ms * 2, 2000u);
}

static void conn_ready(struct rr_loop_src *src, uint32_t ev);

/* Starts connecting to the next address (on the loop): a connect in
 * progress watched for EPOLLOUT with a timeout, or the back-off. */
static void reconnect_start(struct tcp_clnt *c)
{
	for (unsigned tries = 0; tries < c->naddrs; tries++) {
		int fd = connect_start(c, c->next_addr++ % c->naddrs);

		if (fd < 0)
			continue;
		if (rr_loop_add(c->loop, &c->conn_src, fd, EPOLLOUT, conn_ready)) {
			close(fd);
			continue;
		}
		rr_loop_timer_set(c->loop, &c->timer,
				  rr_now_ns(NULL) + (uint64_t)c->p.connect_timeout_ms * 1000000u);
		return;
	}
	c->conn_src.fd = -1;
	reconnect_later(c);
}

/* The connect in progress ended (@ok false: it timed out). */
static void conn_end(struct tcp_clnt *c, bool ok)
{
	int fd = c->conn_src.fd;
	bool closing;

	rr_loop_del(c->loop, &c->conn_src);
	c->conn_src.fd = -1;
	rr_loop_timer_cancel(c->loop, &c->timer);
	pthread_mutex_lock(&c->lock);
	closing = c->closing;
	pthread_mutex_unlock(&c->lock);
	if (ok && !closing && connect_result(fd) == 0 && clnt_sock_setup(fd) == 0) {
		clnt_reconnected(c, fd);
		return;
	}
	close(fd);
	if (!closing)
		reconnect_later(c);
}

static void conn_ready(struct rr_loop_src *src, uint32_t ev)
{
	(void)ev;
	conn_end(RR_CONTAINER_OF(src, struct tcp_clnt, conn_src), true);
}

/* The back-off ended, or a connect timed out. */
static void timer_fire(struct rr_loop_timer *t)
{
	struct tcp_clnt *c = RR_CONTAINER_OF(t, struct tcp_clnt, timer);
	bool go;

	if (c->conn_src.fd >= 0) {
		conn_end(c, false);
		return;
	}
	pthread_mutex_lock(&c->lock);
	go = !c->connected && !c->dead && !c->closing;
	pthread_mutex_unlock(&c->lock);
	if (go)
		reconnect_start(c);
}

/* A broken connection (posted by whoever saw it fail): taken down when no
 * reader holds the role (the holder posts this again when it gives it
 * back), then a reconnection. */
static void work_run(struct rr_loop_task *t)
{
	struct tcp_clnt *c = RR_CONTAINER_OF(t, struct tcp_clnt, work);

	pthread_mutex_lock(&c->lock);
	if (!c->connected || !c->broken || c->reader_busy || c->closing) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->reader_busy = true;
	pthread_mutex_unlock(&c->lock);
	if (clnt_lost(c))
		reconnect_start(c);
}

static int tcp_clnt_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
			   struct rr_xprt_client **out)
{
	struct tcp_clnt *c;
	int rc, fd;

	c = rr_zalloc(p->env, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->p = *p;
	c->t = *t;
	c->fd = -1;
	c->conn_src.fd = -1;
	c->backoff_ms = 50;
	c->work.fn = work_run;
	c->loop = p->loop;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = tcp_resolve(c, t);
	if (!rc && !c->loop)
		rc = rr_engine_pick(&c->loop);
	if (!rc)
		rc = rr_loop_timer_init(c->loop, &c->timer, timer_fire);
	if (!rc)
		rc = tcp_connect(c, p->connect_timeout_ms, &fd);
	if (rc)
		goto fail;
	c->fd = fd;
	c->gen = 1; /* 0 in call_priv.gen: never written */
	c->connected = true;
	/* One connection: its spare may be as large as its largest Reply. */
	rr_tcp_reader_init(&c->rd, p->env, p->max_msg, p->max_msg, NULL, true, true);
	rc = rr_tcp_reader_stage(&c->rd, STAGE_BYTES);
	if (!rc)
		rc = rr_loop_add(c->loop, &c->rx_src, fd, EPOLLONESHOT, rx_ready);
	if (rc) {
		close(fd);
		rr_tcp_reader_fini(&c->rd);
		goto fail;
	}
	c->rx_added = true;
	*out = (struct rr_xprt_client *)c;
	return 0;
fail:
	if (c->loop)
		rr_loop_timer_fini(c->loop, &c->timer);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	pthread_cond_destroy(&c->cv);
	rr_free(p->env, c);
	return rc;
}

/* On the loop: nothing of the client is watched or runs there after. */
static void clnt_detach(void *arg)
{
	struct tcp_clnt *c = arg;

	if (c->rx_added)
		rr_loop_del(c->loop, &c->rx_src);
	c->rx_added = false;
	if (c->conn_src.fd >= 0) {
		rr_loop_del(c->loop, &c->conn_src);
		close(c->conn_src.fd);
		c->conn_src.fd = -1;
	}
	rr_loop_timer_fini(c->loop, &c->timer);
	rr_loop_task_cancel(c->loop, &c->work);
}

static void tcp_clnt_destroy(struct rr_xprt_client *x)
{
	struct tcp_clnt *c = (struct tcp_clnt *)x;

	pthread_mutex_lock(&c->lock);
	c->closing = true;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	/* a reader (the loop, a caller) finishes its read first */
	while (c->reader_busy)
		cv_wait(c);
	pthread_mutex_unlock(&c->lock);
	rr_engine_call(c->loop, clnt_detach, c);
	if (c->fd >= 0)
		close(c->fd);
	rr_tcp_reader_fini(&c->rd);
	for (void *cp; (cp = rr_spare_take(&c->spare));)
		rr_free(c->p.env, cp);
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
	arm_rx(c);   /* the loop reads for reverse Calls from now on */
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
		cv_wake(c);
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
		cv_wait(c);
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
