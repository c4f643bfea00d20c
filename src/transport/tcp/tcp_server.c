/* SPDX-License-Identifier: BSD-2-Clause */
/* The server role of tcp:// (transport/xprt.h section 3): ONC RPC over TCP
 * with record marking (RFC 5531 section 11), on the process's progress
 * loops (src/engine): the listener's loop accepts connections (within
 * max_conns and max_conns_per_host; out of descriptors or memory, the
 * listener pauses with a back-off) and gives each to a loop, round-robin,
 * which reads its records (at most one, and at most RR_TCP_TURN_BYTES, per
 * turn: the others of the loop are served between two; a small Call with
 * its header in one recv, through the loop's read-ahead stage, a large
 * record's bulk through its bounce buffer) and hands each Call
 * to the RPC layer's recv upcall (queued to its workers, or run there
 * under RPCRDMA_SERVER_INLINE); the
 * listener's loop also closes connections silent for idle_timeout_ms
 * (docs/security.md "Limits").
 * Replies are written by whoever answers (tcp_io.c). A record above the
 * maximum message, bytes that are not record marking, or a peer closing
 * mid-record close that connection only; a connection that opens with an
 * MPA frame (an rdma:// client) is answered RPC_MISMATCH first.
 * Backchannel (transport/xprt.h section 4, as NFSv4.1 over TCP: RFC 8881
 * section 2.10.3.1): a callback client (bc_client) writes Calls on a
 * client's connection; records whose RFC 5531 msg_type is REPLY are matched
 * by XID to those Calls instead of being delivered, and when the connection
 * closes its pending callbacks fail. */
#include "transport/tcp/tcp_server.h"
#include "transport/tcp/tcp_io.h"
#include "transport/xprt_ctl.h"
#include "common/listen.h"
#include "engine/engine.h"
#include "common/spare.h"

#include "rpc/rpcmsg.h"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct tcp_srv;

/* What a server keeps per progress loop for the connections it reads. */
#define SRV_LOOP_BYTES (RR_TCP_BOUNCE + RR_TCP_SRV_STAGE)

struct tcp_conn {
	struct tcp_srv *srv;
	int fd;
	struct rr_loop *loop;      /* its progress loop: the only reader */
	struct rr_loop_src src;
	struct rr_tcp_reader rd;        /* with a read-ahead stage */
	struct rr_loop_task more;       /* staged bytes left: read next turn */
	pthread_mutex_t send_lock;
	/* its loop + one per delivered req + one per callback client: taken
	 * and dropped without the server's lock (the last one unlinks the
	 * connection under it, conn_put) */
	_Atomic int refs;
	atomic_bool closed;        /* set under lock; read without by a Reply */
	bool idle_shut;            /* shut down by the idle sweep (lock) */
	_Atomic uint64_t last_rx_ns;    /* its last read (idle timeout) */
	/* Records read ahead into its stage wait for its `more` task (its
	 * loop writes it, the idle sweep reads it) */
	atomic_bool staged;
	struct sockaddr_storage peer;   /* from accept (RR_CTL_PEER_ADDR) */
	struct tcp_conn *next, *prev;
	/* backchannel: Calls of its callback clients awaiting a Reply */
	pthread_mutex_t bc_lock;
	struct rr_xprt_call *bc_calls;  /* bc_lock */
	bool bc_dead;                   /* closed: no more callbacks (bc_lock) */
	unsigned bc_refs;               /* of refs, held by callback clients (lock) */
	_Atomic unsigned bc_npending;   /* Calls in bc_calls (idle timeout) */
};

/* A callback client (bc_client) on one connection. */
struct tcp_bc_clnt {
	struct rr_xprt_client_params p;
	struct tcp_srv *s;
	struct tcp_conn *cn;
};

/* Per callback Call (xp_priv): its client, the cancel flag of its write,
 * its Reply's record buffer capacity. */
struct bc_call_priv {
	struct tcp_bc_clnt *bc;
	atomic_bool cancel;
	size_t reply_cap;
};


#define BC_SENDING 1u
#define BC_REPLIED 2u
#define BC_ABORTED 4u

struct tcp_req {
	struct rr_xprt_req req;
	struct tcp_conn *conn;
	uint8_t *buf;
	size_t cap;
};

struct tcp_srv {
	struct rr_xprt_server_params p;
	int lfd;
	int port;
	struct rr_loop *lloop;      /* the listener's loop: accept, timers */
	struct rr_loop_src lsrc;
	bool lsrc_added;
	struct rr_loop_timer tick;
	unsigned next_loop;         /* the next connection's loop */
	bool started;
	pthread_mutex_t lock;
	atomic_bool stopping;       /* set under lock; read without by a read */
	struct tcp_conn *conns;
	unsigned nconns;
	/* limits (docs/security.md "Limits"), under lock */
	uint32_t tick_ms;           /* the listener loop's timer period */
	uint64_t idle_look_ns;      /* next idle sweep */
	struct rr_backoff backoff;  /* accept back-off */
	uint64_t resume_ns;         /* listener out of epoll until; 0: not */
	uint64_t refused, idle_closed;
	struct rr_tcp_cache pool;   /* large record buffers, all connections */
	struct rr_spare req_spare;  /* finished tcp_reqs kept for reuse */
	/* per loop (nbounce), for its connections: RR_TCP_BOUNCE bytes of
	 * bounce buffer, then RR_TCP_SRV_STAGE bytes of shared stage */
	uint8_t *bounce;
	unsigned nbounce;
};

/* @cn, its last reference dropped, leaves the server's list (lock). */
static void conn_unlink_locked(struct tcp_srv *s, struct tcp_conn *cn)
{
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	s->nconns--;
}

static void conn_free(struct tcp_srv *s, struct tcp_conn *cn)
{
	close(cn->fd);
	rr_tcp_reader_fini(&cn->rd);
	pthread_mutex_destroy(&cn->send_lock);
	pthread_mutex_destroy(&cn->bc_lock);
	rr_free(s->p.env, cn);
	rr_mem_trim_due(s->p.env);   /* the listener's timer gives it back */
}

/* Drops a reference on @cn: the last one unlinks and frees it. */
static void conn_put(struct tcp_srv *s, struct tcp_conn *cn)
{
	if (atomic_fetch_sub(&cn->refs, 1) != 1)
		return;
	pthread_mutex_lock(&s->lock);
	conn_unlink_locked(s, cn);
	pthread_mutex_unlock(&s->lock);
	conn_free(s, cn);
}

/* Removes @call from @cn's callbacks awaiting a Reply (bc_lock held). */
static void bc_unlink(struct tcp_conn *cn, struct rr_xprt_call *call)
{
	for (struct rr_xprt_call **pp = &cn->bc_calls; *pp; pp = &(*pp)->xp_next)
		if (*pp == call) {
			*pp = call->xp_next;
			call->xp_next = NULL;
			atomic_fetch_sub(&cn->bc_npending, 1);
			return;
		}
}

/* Completes a callback Call (no lock held). */
static void bc_complete(struct rr_xprt_call *call, int status)
{
	struct tcp_bc_clnt *bc = ((struct bc_call_priv *)call->xp_priv)->bc;

	call->status = status;
	bc->p.complete(bc->p.ctx, call);
}

/* The connection closed: no more callbacks on it, and those awaiting a
 * Reply fail (-ECONNRESET; one being written fails when its write does). */
static void bc_conn_closed(struct tcp_conn *cn)
{
	struct rr_xprt_call *fail = NULL, *call, *nx;

	pthread_mutex_lock(&cn->bc_lock);
	cn->bc_dead = true;
	for (call = cn->bc_calls; call; call = nx) {
		nx = call->xp_next;
		if (call->xp_flags & BC_SENDING)
			continue;
		bc_unlink(cn, call);
		call->xp_next = fail;
		fail = call;
	}
	pthread_mutex_unlock(&cn->bc_lock);
	for (call = fail; call; call = nx) {
		nx = call->xp_next;
		call->xp_next = NULL;
		bc_complete(call, -ECONNRESET);
	}
}

/* Its loop gives up its reference (on the loop): no more reads on this
 * connection. */
static void conn_close(struct tcp_srv *s, struct tcp_conn *cn)
{
	rr_loop_del(cn->loop, &cn->src);
	rr_loop_task_cancel(cn->loop, &cn->more);
	pthread_mutex_lock(&s->lock);
	cn->closed = true;
	pthread_mutex_unlock(&s->lock);
	shutdown(cn->fd, SHUT_RDWR);
	bc_conn_closed(cn);
	conn_put(s, cn);
}

/* A Reply arrived on @cn (msg_type REPLY): it completes the callback Call
 * of its XID, or is discarded (RFC 5531 section 9; a Reply to a Call
 * aborted meanwhile too). Takes ownership of @buf. */
static void bc_on_reply(struct tcp_conn *cn, uint32_t xid, uint8_t *buf, size_t len, size_t cap)
{
	struct rr_xprt_call *call;
	bool done = false;

	pthread_mutex_lock(&cn->bc_lock);
	for (call = cn->bc_calls; call && call->xid != xid; call = call->xp_next)
		;
	if (call && !(call->xp_flags & (BC_REPLIED | BC_ABORTED))) {
		((struct bc_call_priv *)call->xp_priv)->reply_cap = cap;
		call->reply = buf;
		call->reply_buf = buf;
		call->reply_len = len;
		call->xp_flags |= BC_REPLIED;
		if (!(call->xp_flags & BC_SENDING)) {
			bc_unlink(cn, call);
			done = true;
		}
		buf = NULL;
	}
	pthread_mutex_unlock(&cn->bc_lock);
	if (buf)
		rr_tcp_reader_recycle(&cn->rd, buf, cap);
	if (done)
		bc_complete(call, 0);
}

/* accept4 failed for want of file descriptors or memory (@err; lock held):
 * the listener leaves the epoll set for a while (rr_backoff_begin; srv_tick
 * puts it back); pending connections wait in the kernel's queue and
 * established ones are served. */
static void srv_backoff_locked(struct tcp_srv *s, int err)
{
	s->resume_ns = rr_backoff_begin(&s->backoff, s->p.env, "tcp server", err);
	if (s->lsrc_added)
		rr_loop_del(s->lloop, &s->lsrc);
	s->lsrc_added = false;
}

/* Whether a connection from @peer would exceed max_conns or
 * max_conns_per_host (lock held). */
static bool srv_over_limits(struct tcp_srv *s, const struct sockaddr_storage *peer)
{
	unsigned same = 0;

	if (s->nconns >= s->p.max_conns)
		return true;
	if (!s->p.max_conns_per_host)
		return false;
	for (struct tcp_conn *cn = s->conns; cn; cn = cn->next)
		if (rr_addr_same_host(&cn->peer, peer) && ++same >= s->p.max_conns_per_host)
			return true;
	return false;
}

static void srv_read(struct rr_loop_src *src, uint32_t ev);
static void srv_more(struct rr_loop_task *t);

/* A connection's state before its socket is known: its loop (round-robin
 * over the loops, the server's own turn), its reader on that loop's
 * shared stage and bounce buffer. NULL without memory or loop. */
static struct tcp_conn *srv_conn_new(struct tcp_srv *s)
{
	struct tcp_conn *cn = rr_zalloc(s->p.env, sizeof(*cn));
	unsigned i = s->next_loop++ % s->nbounce;

	if (!cn)
		return NULL;
	cn->loop = rr_engine_loop(i);
	rr_tcp_reader_init(&cn->rd, s->p.env, s->p.max_msg, RR_TCP_SPARE_MAX, &s->pool, false,
			   false);
	cn->rd.turn_max = RR_TCP_TURN_BYTES;
	cn->rd.bounce = s->bounce + (size_t)i * SRV_LOOP_BYTES;
	cn->rd.bounce_cap = RR_TCP_BOUNCE;
	rr_tcp_reader_share_stage(&cn->rd, cn->rd.bounce + RR_TCP_BOUNCE, RR_TCP_SRV_STAGE);
	if (!cn->loop) {
		rr_tcp_reader_fini(&cn->rd);
		rr_free(s->p.env, cn);
		return NULL;
	}
	cn->more.fn = srv_more;
	cn->srv = s;
	atomic_init(&cn->refs, 1);
	atomic_store(&cn->last_rx_ns, rr_now_ns(s->p.env));
	return cn;
}

static void srv_accept(struct rr_loop_src *lsrc, uint32_t events)
{
	struct tcp_srv *s = RR_CONTAINER_OF(lsrc, struct tcp_srv, lsrc);

	(void)events;
	for (;;) {
		struct tcp_conn *cn;
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = -1, e;

		/* Under the lock: stop() closes the listener concurrently. */
		memset(&peer, 0, sizeof(peer));
		pthread_mutex_lock(&s->lock);
		if (s->stopping || s->lfd < 0 || s->resume_ns) {
			pthread_mutex_unlock(&s->lock);
			return;
		}
		fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			e = errno;
			if (rr_backoff_wanted(e))
				srv_backoff_locked(s, e);
			pthread_mutex_unlock(&s->lock);
			if (e == EAGAIN || e == EWOULDBLOCK || rr_backoff_wanted(e))
				return;
			continue;   /* that connection failed before we took it */
		}
		s->backoff.ms = 0;
		if (srv_over_limits(s, &peer)) {
			/* refused: the peer sees its connection closed */
			s->refused++;
			pthread_mutex_unlock(&s->lock);
			close(fd);
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		cn = srv_conn_new(s);
		if (!cn) {
			pthread_mutex_lock(&s->lock);
			s->refused++;
			pthread_mutex_unlock(&s->lock);
			close(fd);
			continue;
		}
		rr_tcp_sock_opts(fd);
		cn->fd = fd;
		cn->peer = peer;
		pthread_mutex_init(&cn->send_lock, NULL);
		pthread_mutex_init(&cn->bc_lock, NULL);
		pthread_mutex_lock(&s->lock);
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
		/* from here on its loop reads it (maybe at once) */
		if (rr_loop_add(cn->loop, &cn->src, fd, EPOLLIN, srv_read) < 0) {
			pthread_mutex_lock(&s->lock);
			cn->closed = true;
			pthread_mutex_unlock(&s->lock);
			conn_put(s, cn);
		}
	}
}

/* Whether bytes wait unread in @fd's socket (FIONREAD: on TCP, Linux's
 * SIOCINQ): a Call that came while its loop was held up (by the other
 * connections of that loop, say) and not read yet. */
static bool srv_bytes_wait(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* Whether @cn is idle at @now (the sweep's look, lock held): it has read
 * nothing for @to, has no request in progress (each holds a reference),
 * no Reply of a callback pending, no bytes waiting unread in its socket
 * and none read ahead into its stage and not yet handled (its loop held
 * up longer than the timeout: not idle). Its last read is read again
 * after the socket and the stage: a read by its loop in between (it
 * notes the time before it reads the socket, and the stage after) is
 * seen. A read after @now was taken counts as recent. */
static bool srv_conn_idle(struct tcp_conn *cn, uint64_t now, uint64_t to)
{
	uint64_t last;

	if (cn->closed || cn->idle_shut || cn->refs - cn->bc_refs > 1 ||
	    atomic_load(&cn->bc_npending))
		return false;
	last = atomic_load(&cn->last_rx_ns);
	if (last >= now || now - last < to)
		return false;
	if (srv_bytes_wait(cn->fd) || atomic_load(&cn->staged))
		return false;
	return atomic_load(&cn->last_rx_ns) == last;
}

/* The listener loop's timer (lock taken here): the end of an accept
 * back-off, and the idle timeout: a connection idle (srv_conn_idle) for
 * idle_timeout_ms is shut down; its loop then reads EOF and closes it.
 * Set again for the next look. */
static void srv_tick(struct rr_loop_timer *t)
{
	struct tcp_srv *s = RR_CONTAINER_OF(t, struct tcp_srv, tick);
	uint64_t now = rr_now_ns(s->p.env), to = (uint64_t)s->p.idle_timeout_ms * 1000000u;
	uint64_t sleep_ns = (uint64_t)s->tick_ms * 1000000u;

	pthread_mutex_lock(&s->lock);
	if (s->resume_ns && !s->stopping && s->lfd >= 0) {
		if (now >= s->resume_ns) {
			s->resume_ns = 0;
			s->lsrc_added = rr_loop_add(s->lloop, &s->lsrc, s->lfd, EPOLLIN,
						    srv_accept) == 0;
		} else {
			sleep_ns = RR_MIN(sleep_ns, s->resume_ns - now);
		}
	}
	if (to && now >= s->idle_look_ns) {
		s->idle_look_ns = now + RR_MIN(to / 10, 100000000ull);
		for (struct tcp_conn *cn = s->conns; cn; cn = cn->next) {
			/* callback clients do not keep it open; a callback
			 * awaiting its Reply does */
			if (!srv_conn_idle(cn, now, to))
				continue;
			cn->idle_shut = true;
			s->idle_closed++;
			shutdown(cn->fd, SHUT_RDWR);
		}
	}
	if (!s->stopping)
		rr_loop_timer_set(s->lloop, &s->tick, rr_now_ns(NULL) + RR_MAX(sleep_ns, 1000000u));
	pthread_mutex_unlock(&s->lock);
	rr_mem_trim_tick();
}

/* The connection started with an MPA Request (an rdma:// client: RFC 5044
 * section 7.1): answer in record marking, which that client recognises
 * (rr_mpa_looks_like_rpc) and reports as a tcp:// server, instead of the
 * silence it would wait out: a Reply with XID 0, MSG_DENIED, RPC_MISMATCH
 * 2..2 (RFC 5531 section 9). The rest of the Request (at most 532 bytes)
 * is read first, so closing sends a FIN, not a reset that could overtake
 * the Reply.
 *   last|24 | XID 0 | REPLY 1 | MSG_DENIED 1 | RPC_MISMATCH 0 | 2 | 2 */
static void srv_answer_mpa(int fd)
{
	static const uint8_t rec[28] = {
		0x80, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2,
	};
	uint8_t sink[1024];

	(void)recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
	(void)send(fd, rec, sizeof(rec), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Reads up to one complete record from @cn (on its loop, the only reader),
 * as far as the socket has bytes but at most RR_TCP_TURN_BYTES, then
 * delivers it. False when the connection was closed. */
static bool srv_take_record(struct tcp_conn *cn)
{
	struct tcp_srv *s = cn->srv;
	struct tcp_req *r;
	bool stopping;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	if (s->p.idle_timeout_ms)
		atomic_store(&cn->last_rx_ns, rr_now_ns(s->p.env));
	rc = rr_tcp_read(&cn->rd, cn->fd);
	if (rc == RR_RM_RECORD)
		buf = rr_rm_dec_take(&cn->rd.dec, &len, &cap);
	/* the loop's stage is free for its others before anything runs */
	if (rc >= 0 && rr_tcp_reader_park(&cn->rd) < 0) {
		rr_tcp_reader_recycle(&cn->rd, buf, cap);
		rc = -ENOMEM;
	}
	if (rc == 0)
		return true;
	if (rc == -EPROTOTYPE)
		srv_answer_mpa(cn->fd);
	if (rc < 0) {
		conn_close(s, cn);
		return false;
	}
	{
		uint32_t xid, mt;

		if (rr_rpcmsg_peek(buf, len, &xid, &mt) == 0 && mt == RR_RPC_REPLY) {
			/* to one of our callbacks, not a Call */
			bc_on_reply(cn, xid, buf, len, cap);
			return true;
		}
	}
	stopping = atomic_load(&s->stopping);
	if (stopping) {
		/* Shutting down: no new Calls; the connection is kept until
		 * destroy so replies in flight still go out. (A Call read as
		 * stop begins still goes: the RPC layer refuses it, svc_recv.) */
		rr_tcp_reader_recycle(&cn->rd, buf, cap);
		return true;
	}
	r = rr_spare_take(&s->req_spare);
	if (!r)
		r = rr_alloc(s->p.env, sizeof(*r));
	if (!r) {
		rr_tcp_reader_recycle(&cn->rd, buf, cap);
		conn_close(s, cn);
		return false;
	}
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->cap = cap;
	r->req.len = len;
	r->req.msg = r->buf;
	r->req.xp_priv = r;
	r->conn = cn;
	atomic_fetch_add(&cn->refs, 1);   /* its loop holds one: cn lives */
	s->p.recv(s->p.ctx, &r->req);
	return true;
}

/* @cn is readable (level-triggered), or bytes wait in its stage: one
 * record (srv_take_record). What is left in the socket keeps it readable
 * for the next turn, after the loop's other connections; what was read
 * ahead into the stage (a pipelining client's next records) is read on
 * the next turn through its task, the socket may be empty by then. A peer
 * streaming a huge record never holds the loop for longer than one bound. */
static void srv_read(struct rr_loop_src *src, uint32_t events)
{
	struct tcp_conn *cn = RR_CONTAINER_OF(src, struct tcp_conn, src);

	bool more;

	(void)events;
	if (!srv_take_record(cn))
		return;   /* closed (and maybe freed) */
	more = rr_tcp_reader_buffered(&cn->rd);
	if (more)
		rr_loop_post(cn->loop, &cn->more);
	/* for the idle sweep, after the read's time (srv_conn_idle); its
	 * loop is the only writer */
	if (more != atomic_load_explicit(&cn->staged, memory_order_relaxed))
		atomic_store(&cn->staged, more);
}

static void srv_more(struct rr_loop_task *t)
{
	struct tcp_conn *cn = RR_CONTAINER_OF(t, struct tcp_conn, more);

	srv_read(&cn->src, 0);
}

static int tcp_srv_create(const struct rr_xprt_target *t, const struct rr_xprt_server_params *p,
			  struct rr_xprt_server **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE};
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_srv *s;
	int fd, one = 1, rc;

	rc = getaddrinfo(t->host, t->port, &hints, &ai);
	if (rc)
		return -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, RR_LISTEN_BACKLOG) < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		close(fd);
		return rc;
	}
	freeaddrinfo(ai);
	s = rr_zalloc(p->env, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->p = *p;
	s->lfd = fd;
	/* io threads wake at least this often: idle sweeps (a tenth of the
	 * timeout), at most every second */
	s->tick_ms = p->idle_timeout_ms ? RR_MAX(RR_MIN(p->idle_timeout_ms / 10, 1000u), 10u)
					: 1000u;
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	pthread_mutex_init(&s->lock, NULL);
	rr_tcp_cache_init(&s->pool);
	rc = rr_engine_pick(&s->lloop);
	if (!rc) {
		/* the engine is started: its loops are fixed */
		s->nbounce = RR_MAX(rr_engine_nloops(), 1u);
		s->bounce = rr_alloc(p->env, (size_t)s->nbounce * SRV_LOOP_BYTES);
		rc = s->bounce ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = rr_loop_timer_init(s->lloop, &s->tick, srv_tick);
	if (rc) {
		close(fd);
		rr_free(p->env, s->bounce);
		rr_tcp_cache_fini(&s->pool, s->p.env);
		pthread_mutex_destroy(&s->lock);
		rr_free(p->env, s);
		return rc;
	}
	*out = (struct rr_xprt_server *)s;
	return 0;
}

static int tcp_srv_port(const struct rr_xprt_server *x)
{
	return ((const struct tcp_srv *)x)->port;
}

static int tcp_srv_start(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	int rc;

	pthread_mutex_lock(&s->lock);
	if (s->started) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	rc = rr_loop_add(s->lloop, &s->lsrc, s->lfd, EPOLLIN, srv_accept);
	if (!rc) {
		s->lsrc_added = true;
		s->started = true;
		rr_loop_timer_set(s->lloop, &s->tick,
				  rr_now_ns(NULL) + (uint64_t)s->tick_ms * 1000000u);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int tcp_srv_send_reply(struct rr_xprt_server *x, struct rr_xprt_req *req,
			      const struct rr_xprt_msg *msg)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	struct tcp_req *r = req->xp_priv;
	struct tcp_conn *cn = r->conn;
	bool closed;
	int rc;

	if (msg->xdr_len > s->p.max_msg)
		return -EMSGSIZE;
	pthread_mutex_lock(&cn->send_lock);
	closed = atomic_load(&cn->closed);   /* the req's reference keeps cn->fd */
	if (closed) {
		pthread_mutex_unlock(&cn->send_lock);
		return -ENOTCONN;
	}
	rc = rr_tcp_send_record(cn->fd, msg, NULL, 30000);
	if (rc)
		shutdown(cn->fd, SHUT_RDWR);
	pthread_mutex_unlock(&cn->send_lock);
	return rc;
}

static void tcp_srv_req_done(struct rr_xprt_server *x, struct rr_xprt_req *req)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	struct tcp_req *r = req->xp_priv;
	struct tcp_conn *cn = r->conn;

	rr_tcp_reader_recycle(&cn->rd, r->buf, r->cap);
	if (!rr_spare_put(&s->req_spare, r))
		rr_free(s->p.env, r);
	conn_put(s, cn);
}

/* On the listener's loop: it accepts no more and its timer is off. */
static void srv_unlisten(void *arg)
{
	struct tcp_srv *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->lsrc_added)
		rr_loop_del(s->lloop, &s->lsrc);
	s->lsrc_added = false;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	rr_loop_timer_cancel(s->lloop, &s->tick);
	pthread_mutex_unlock(&s->lock);
}

static void tcp_srv_stop(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;

	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	rr_engine_call(s->lloop, srv_unlisten, s);
}

/* On one loop: its connections of @arg are no longer read. */
static void srv_detach_loop(void *arg)
{
	struct tcp_srv *s = arg;
	struct rr_loop *l = rr_loop_current();

	pthread_mutex_lock(&s->lock);
	for (struct tcp_conn *cn = s->conns; cn; cn = cn->next)
		if (cn->loop == l && !cn->closed) {
			rr_loop_del(l, &cn->src);
			rr_loop_task_cancel(l, &cn->more);
		}
	pthread_mutex_unlock(&s->lock);
}

static void tcp_srv_destroy(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	unsigned n = rr_engine_nloops();

	tcp_srv_stop(x);
	for (unsigned i = 0; i < n; i++)
		rr_engine_call(rr_engine_loop(i), srv_detach_loop, s);
	rr_engine_call(s->lloop, srv_unlisten, s);
	rr_loop_timer_fini(s->lloop, &s->tick);
	/* Only the loops' references remain (every req is done). */
	while (s->conns) {
		struct tcp_conn *cn = s->conns;

		s->conns = cn->next;
		conn_free(s, cn);
	}
	rr_tcp_cache_fini(&s->pool, s->p.env);
	for (void *r; (r = rr_spare_take(&s->req_spare));)
		rr_free(s->p.env, r);
	rr_free(s->p.env, s->bounce);
	pthread_mutex_destroy(&s->lock);
	rr_free(s->p.env, s);
}

/* Controls (transport/xprt_ctl.h): the peer address of a request, and the
 * server's counters that mean something on TCP (connections and their
 * limits; RPC-over-RDMA's are 0). */
static int tcp_srv_ctl(struct rr_xprt_server *x, struct rr_xprt_req *req, unsigned op, void *arg)
{
	struct tcp_srv *s = (struct tcp_srv *)x;

	if (op == RR_CTL_STATS) {
		struct rpcrdma_xprt_stats *st = arg;

		if (req || !st)
			return -EINVAL;
		memset(st, 0, sizeof(*st));
		pthread_mutex_lock(&s->lock);
		st->connections = s->nconns;
		st->refused_conns = s->refused;
		st->idle_closed = s->idle_closed;
		st->accept_backoffs = s->backoff.count;
		pthread_mutex_unlock(&s->lock);
		snprintf(st->transport, sizeof(st->transport), "tcp");
		return 0;
	}
	if (op != RR_CTL_PEER_ADDR)
		return -EOPNOTSUPP;
	if (!req || !arg)
		return -EINVAL;
	memcpy(arg, &((struct tcp_req *)req->xp_priv)->conn->peer, sizeof(struct sockaddr_storage));
	return 0;
}

/* ---- callback clients (transport/xprt.h section 4) ---- */

/* Writes @call's record (flagged BC_SENDING), then completes it if a Reply,
 * an abort or a failed write came meanwhile. */
static void bc_send(struct tcp_bc_clnt *bc, struct rr_xprt_call *call)
{
	struct bc_call_priv *cp = call->xp_priv;
	struct tcp_conn *cn = bc->cn;
	int rc, status = 0;
	bool done = false;

	pthread_mutex_lock(&cn->send_lock);
	rc = rr_tcp_send_record(cn->fd, &call->msg, &cp->cancel, 30000);
	if (rc && rc != -ECANCELED)
		shutdown(cn->fd, SHUT_RDWR);   /* its loop closes it */
	pthread_mutex_unlock(&cn->send_lock);
	pthread_mutex_lock(&cn->bc_lock);
	call->xp_flags &= ~BC_SENDING;
	if (call->xp_flags & BC_REPLIED) {
		done = true;
	} else if (call->xp_flags & BC_ABORTED) {
		status = call->xp_status;
		done = true;
	} else if (rc) {
		status = rc == -EMSGSIZE ? rc : -ECONNRESET;
		done = true;
	} else if (cn->bc_dead) {
		status = -ECONNRESET;   /* closed while it was written */
		done = true;
	}
	if (done)
		bc_unlink(cn, call);
	pthread_mutex_unlock(&cn->bc_lock);
	if (done)
		bc_complete(call, status);
}

static int bc_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct tcp_bc_clnt *bc = (struct tcp_bc_clnt *)x;
	struct tcp_conn *cn = bc->cn;
	struct bc_call_priv *cp;

	if (call->msg.xdr_len > bc->p.max_msg || call->msg.xdr_len > RR_RM_MAX_FRAG)
		return -EMSGSIZE;
	/* Its Reply is read by the connection's loop: waiting for it on that
	 * loop would never end. */
	if (call->caller_waits && rr_loop_current() == cn->loop)
		return -EDEADLK;
	cp = rr_zalloc(bc->p.env, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	cp->bc = bc;
	atomic_init(&cp->cancel, false);
	rr_tcp_call_reset(call);
	pthread_mutex_lock(&cn->bc_lock);
	if (cn->bc_dead) {
		pthread_mutex_unlock(&cn->bc_lock);
		rr_free(bc->p.env, cp);
		return -ENOTCONN;
	}
	call->xp_priv = cp;
	call->xp_flags = BC_SENDING;
	call->xp_next = cn->bc_calls;
	cn->bc_calls = call;
	atomic_fetch_add(&cn->bc_npending, 1);
	pthread_mutex_unlock(&cn->bc_lock);
	bc_send(bc, call);
	return 0;
}

static void bc_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	struct tcp_bc_clnt *bc = (struct tcp_bc_clnt *)x;
	struct tcp_conn *cn = bc->cn;
	struct rr_xprt_call *p;

	pthread_mutex_lock(&cn->bc_lock);
	for (p = cn->bc_calls; p && p != call; p = p->xp_next)
		;
	if (!p || (call->xp_flags & (BC_REPLIED | BC_ABORTED))) {
		pthread_mutex_unlock(&cn->bc_lock);
		return;
	}
	if (call->xp_flags & BC_SENDING) {
		call->xp_flags |= BC_ABORTED;
		call->xp_status = status;
		atomic_store(&((struct bc_call_priv *)call->xp_priv)->cancel, true);
		pthread_mutex_unlock(&cn->bc_lock);
		return;   /* bc_send completes it */
	}
	bc_unlink(cn, call);
	pthread_mutex_unlock(&cn->bc_lock);
	bc_complete(call, status);
}

static void bc_release_reply(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	struct tcp_bc_clnt *bc = (struct tcp_bc_clnt *)x;
	struct bc_call_priv *cp = call->xp_priv;

	if (call->reply_buf)
		rr_tcp_reader_recycle(&bc->cn->rd, call->reply_buf, cp ? cp->reply_cap : 0);
	call->reply_buf = NULL;
	call->reply = NULL;
	rr_free(bc->p.env, cp);
	call->xp_priv = NULL;
}

/* Waiting is the RPC layer's; the op only lets submit see a synchronous
 * caller (caller_waits) that would wait on the thread reading its Reply. */
static void bc_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	(void)x;
	(void)call;
	(void)timeout_ms;
}

static void bc_clnt_destroy(struct rr_xprt_client *x)
{
	struct tcp_bc_clnt *bc = (struct tcp_bc_clnt *)x;
	struct tcp_srv *s = bc->s;

	pthread_mutex_lock(&s->lock);
	bc->cn->bc_refs--;
	pthread_mutex_unlock(&s->lock);
	conn_put(s, bc->cn);
	rr_free(bc->p.env, bc);
}

static const struct rr_xprt_client_ops bc_client_ops = {
	.submit = bc_submit,
	.abort = bc_abort,
	.release_reply = bc_release_reply,
	.destroy = bc_clnt_destroy,
	.wait = bc_wait,
};

static int tcp_srv_bc_client(struct rr_xprt_server *x, struct rr_xprt_req *req,
			     const struct rr_xprt_client_params *p,
			     const struct rr_xprt_client_ops **ops, struct rr_xprt_client **out)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	struct tcp_conn *cn = ((struct tcp_req *)req->xp_priv)->conn;
	struct tcp_bc_clnt *bc = rr_zalloc(p->env, sizeof(*bc));

	if (!bc)
		return -ENOMEM;
	bc->p = *p;
	bc->s = s;
	bc->cn = cn;
	pthread_mutex_lock(&s->lock);
	if (cn->closed) {
		pthread_mutex_unlock(&s->lock);
		rr_free(p->env, bc);
		return -ENOTCONN;
	}
	atomic_fetch_add(&cn->refs, 1);   /* the connection outlives the request */
	cn->bc_refs++;
	pthread_mutex_unlock(&s->lock);
	*ops = &bc_client_ops;
	*out = (struct rr_xprt_client *)bc;
	return 0;
}

/* inline_recv false: the RPC layer queues Calls to its workers, except
 * those it answers itself and all of them under RPCRDMA_SERVER_INLINE,
 * which run on the connection's progress loop. */
const struct rr_xprt_server_ops rr_tcp_server_ops = {
	.ctl = tcp_srv_ctl,
	.inline_recv = false,
	.create = tcp_srv_create,
	.port = tcp_srv_port,
	.start = tcp_srv_start,
	.send_reply = tcp_srv_send_reply,
	.req_done = tcp_srv_req_done,
	.stop = tcp_srv_stop,
	.destroy = tcp_srv_destroy,
	.bc_client = tcp_srv_bc_client,
};
