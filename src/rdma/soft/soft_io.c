/* The soft provider's only file that touches sockets: the TCP connection
 * manager with the MPA Request/Reply exchange (RFC 5044 section 7.1,
 * RFC 6581), its timeout on the injected clock, the per-context progress
 * thread (epoll) and the sendmsg/recvmsg wrappers the data path uses.
 * Everything protocol-shaped is decided by mpa.c / ddp.c / soft_verbs.c;
 * this file moves bytes and connection events. */
#include "rdma/soft/soft.h"

#include <stdlib.h>
#include <stdio.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SOFT_DEFAULT_DEPTH 16

/* -------------------------------------------------------- syscalls -- */

/* One buffer goes through send/recv: no msghdr and no iovec array for the
 * kernel to copy in and check (sendmsg/recvmsg do both on every call;
 * measurable per message on a paravirtualised VM, docs/perf-notes/fast2.md). */
ssize_t soft_io_writev(int fd, const struct iovec *iov, unsigned cnt)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = cnt};
	ssize_t n;

	do
		n = cnt == 1 ? send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT)
			     : sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

static ssize_t readv_flags(int fd, struct iovec *iov, unsigned cnt, int flags)
{
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = cnt};
	ssize_t n;

	do
		n = cnt == 1 ? recv(fd, iov[0].iov_base, iov[0].iov_len, flags)
			     : recvmsg(fd, &m, flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

ssize_t soft_io_readv(int fd, struct iovec *iov, unsigned cnt)
{
	return readv_flags(fd, iov, cnt, MSG_DONTWAIT);
}

ssize_t soft_io_readv_wait(int fd, struct iovec *iov, unsigned cnt)
{
	return readv_flags(fd, iov, cnt, 0);
}

int soft_io_fast_mode(const struct soft_qp *qp)
{
	return qp->fast_quiet && atomic_load_explicit(&qp->ctx->cm_intr, memory_order_relaxed) ?
		       SOFT_FAST_POLL : SOFT_FAST_RECV;
}

/* The CQ's wake eventfd: written for a thread that waits (epoll, or a
 * SOFT_FAST_POLL fast wait); wake_pending says a count may be left in it,
 * so that a consumer which does not look through epoll (fast poll) drains
 * it and the CQ's fd does not stay readable (a poll(2) user of that fd
 * would otherwise be woken on every turn for nothing). */
static void cq_wake(struct soft_cq *q)
{
	uint64_t one = 1;

	atomic_store(&q->wake_pending, 1);
	if (write(q->wake_efd, &one, sizeof(one)) < 0) {
		/* saturated counter: still readable */
	}
}

static void cq_wake_drain(struct soft_cq *q)
{
	uint64_t v;

	atomic_store(&q->wake_pending, 0);
	if (read(q->wake_efd, &v, sizeof(v)) < 0) {
		/* raced with another drain */
	}
}

/* SOFT_FAST_POLL: sleeps in poll(2) over the socket and the CQ's wake
 * eventfd (precise timer, unlike SO_RCVTIMEO's jiffies), then reads without
 * blocking. One system call more than a blocking recv, paid only by the
 * first message after a quiet spell. */
static ssize_t readv_poll(struct soft_qp *qp, struct iovec *iov, unsigned cnt)
{
	struct soft_cq *q = qp->rcq;
	struct pollfd p[2] = {{.fd = qp->obj.fd, .events = POLLIN},
			      {.fd = q->wake_efd, .events = POLLIN}};
	int r;

	r = poll(p, 2, SOFT_FAST_BLOCK_MS);
	if (r < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	if (p[1].revents & POLLIN) {
		cq_wake_drain(q);
		atomic_fetch_add_explicit(&q->fast_wakes, 1, memory_order_relaxed);
	}
	if (!(p[0].revents & (POLLIN | POLLERR | POLLHUP)))
		return -EAGAIN;
	return readv_flags(qp->obj.fd, iov, cnt, MSG_DONTWAIT);
}

ssize_t soft_io_readv_fast(struct soft_qp *qp, struct iovec *iov, unsigned cnt, int mode)
{
	uint64_t budget = qp->ctx->spin_ns;
	struct soft_cq *q = qp->rcq;
	int fd = qp->obj.fd;
	ssize_t got;

	if (budget && qp->spin_skip) {
		qp->spin_skip--;
	} else if (budget) {
		/* the default environment's clock (real time), never the
		 * context's: a budget of CPU spent spinning, which must end
		 * also under a test's frozen virtual clock */
		uint64_t t0 = rr_now_ns(NULL);

		for (;;) {
			ssize_t n = readv_flags(fd, iov, cnt, MSG_DONTWAIT);

			if (n != -EAGAIN) {
				qp->spin_miss = 0;
				atomic_fetch_add_explicit(&q->spin_hits, 1, memory_order_relaxed);
				atomic_fetch_add_explicit(&soft_counters.spin_hits, 1,
							  memory_order_relaxed);
				return n;
			}
			if (rr_cq_ring_pending(&q->ring) || atomic_load(&q->intr) ||
			    __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST))
				return -EAGAIN;
			if (rr_now_ns(NULL) - t0 >= budget)
				break;
		}
		atomic_fetch_add_explicit(&q->spin_misses, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&soft_counters.spin_misses, 1, memory_order_relaxed);
		if (++qp->spin_miss >= SOFT_SPIN_MISSES) {
			qp->spin_miss = 0;
			qp->spin_skip = SOFT_SPIN_SKIP;
		}
	}
	got = mode == SOFT_FAST_POLL ? readv_poll(qp, iov, cnt) : soft_io_readv_wait(fd, iov, cnt);
	/* quiet: a sleep that ran out (a poll ended by the wake eventfd
	 * leaves it as it was) */
	if (got != -EAGAIN)
		qp->fast_quiet = false;
	else if (mode == SOFT_FAST_RECV)
		qp->fast_quiet = true;
	return got;
}

int soft_io_fast_setup(int fd)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = SOFT_FAST_BLOCK_MS * 1000};
	int fl = fcntl(fd, F_GETFL);

	/* Every other call on the socket passes MSG_DONTWAIT. */
	if (fl < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
		return -errno;
	return 0;
}

static void obj_add(struct soft_ctx *c, struct soft_obj *o, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = o};

	if (o->in_epoll || o->fd < 0)
		return;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, o->fd, &ev) == 0) {
		o->in_epoll = true;
		o->events = events;
		o->next = c->live.next;
		o->prev = &c->live;
		c->live.next->prev = o;
		c->live.next = o;
	}
}

static void obj_mod(struct soft_ctx *c, struct soft_obj *o, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = o};

	if (!o->in_epoll)
		return;
	o->events = events;
	epoll_ctl(c->epfd, EPOLL_CTL_MOD, o->fd, &ev);
}

static void obj_del(struct soft_ctx *c, struct soft_obj *o)
{
	if (!o->in_epoll)
		return;
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, o->fd, NULL);
	o->in_epoll = false;
	o->prev->next = o->next;
	o->next->prev = o->prev;
	o->prev = o->next = NULL;
}

static bool obj_live(struct soft_ctx *c, struct soft_obj *o)
{
	for (struct soft_obj *p = c->live.next; p != &c->live; p = p->next)
		if (p == o)
			return true;
	return false;
}

void soft_io_wake(struct soft_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->wake.fd, &one, sizeof(one)) < 0) {
		/* a full counter still wakes the thread */
	}
}

/* Another thread's event (a transmit backlog, a new QP) that a fast waiter
 * of @q asleep now does not watch: an interruptible one (SOFT_FAST_POLL) is
 * woken, a recv one is left to its timeout and the fast wait is off for a
 * while (caller: the event is stored, then this look). */
static void fast_poke(struct soft_cq *q)
{
	int b = atomic_load(&q->fast_blocked);

	if (b == SOFT_FAST_RECV) {
		soft_cq_fast_off(q);
	} else if (b == SOFT_FAST_POLL) {
		cq_wake(q);
	}
}

static void cq_epoll(struct soft_qp *qp, int op, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = qp->rtok};

	epoll_ctl(qp->rcq->epfd, op, qp->obj.fd, &ev);
	if (qp->scq != qp->rcq) {
		ev.data.u64 = qp->stok;
		epoll_ctl(qp->scq->epfd, op, qp->obj.fd, &ev);
	}
}

/* tx_lock held (and rx_lock for watch/unwatch): every epoll set that holds
 * the socket follows want_out. */
void soft_io_want_out(struct soft_qp *qp, bool on)
{
	uint32_t ev = EPOLLIN | (on ? EPOLLOUT : 0);

	/* Set, then look: a waiter asleep in this socket's recvmsg would not
	 * transmit (qp_rx looks at want_out after setting fast_blocked). */
	__atomic_store_n(&qp->want_out, on, __ATOMIC_SEQ_CST);
	if (on)
		fast_poke(qp->rcq);

	obj_mod(qp->ctx, &qp->obj, ev);
	if (qp->cq_watched)
		cq_epoll(qp, EPOLL_CTL_MOD, ev);
}

void soft_io_watch(struct soft_qp *qp)
{
	if (qp->cq_watched || qp->obj.fd < 0)
		return;
	/* a socket a fast waiter of these CQs does not look at */
	atomic_thread_fence(memory_order_seq_cst);
	fast_poke(qp->rcq);
	if (qp->scq != qp->rcq)
		fast_poke(qp->scq);
	cq_epoll(qp, EPOLL_CTL_ADD, EPOLLIN | (qp->want_out ? EPOLLOUT : 0));
	qp->cq_watched = true;
}

void soft_io_unwatch(struct soft_qp *qp)
{
	if (!qp->cq_watched)
		return;
	cq_epoll(qp, EPOLL_CTL_DEL, 0);
	qp->cq_watched = false;
}

/* The progress thread serves (@on) or leaves the QP's socket; ctx->lock
 * held. The CQs count how many of their QPs it serves. */
static void qp_hand(struct soft_qp *qp, bool on)
{
	struct soft_ctx *c = qp->ctx;

	pthread_mutex_lock(&qp->tx_lock);
	if (on && !qp->obj.in_epoll && qp->obj.fd >= 0 && qp->state == QPS_RTS) {
		obj_add(c, &qp->obj, EPOLLIN | (qp->want_out ? EPOLLOUT : 0));
		if (qp->obj.in_epoll) {
			atomic_fetch_add(&qp->rcq->handed, 1);
			if (qp->scq != qp->rcq)
				atomic_fetch_add(&qp->scq->handed, 1);
		}
	} else if (!on && qp->obj.in_epoll) {
		obj_del(c, &qp->obj);
		atomic_fetch_sub(&qp->rcq->handed, 1);
		if (qp->scq != qp->rcq)
			atomic_fetch_sub(&qp->scq->handed, 1);
	}
	pthread_mutex_unlock(&qp->tx_lock);
}

static void reclaim_one(struct soft_qp *qp, void *arg)
{
	RR_UNUSED(arg);
	qp_hand(qp, false);
}

void soft_io_reclaim(struct soft_cq *q)
{
	pthread_mutex_lock(&q->ctx->lock);
	pthread_mutex_lock(&q->qlock);
	soft_cq_for_each_qp(q, reclaim_one, NULL);
	pthread_mutex_unlock(&q->qlock);
	pthread_mutex_unlock(&q->ctx->lock);
	/* QPs the progress thread served need no deadline; now their CQ's
	 * lease is one */
	soft_io_lease_check(q);
}

void soft_io_lease_check(struct soft_cq *q)
{
	struct soft_ctx *c = q->ctx;
	uint64_t su, end;

	/* the caller's stores (last_use_ns, waiting, the arm), then this
	 * look; the progress thread stores sleep_until, then looks at the
	 * CQs (balance): one of the two sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	su = atomic_load(&c->sleep_until);
	end = atomic_load_explicit(&q->last_use_ns, memory_order_relaxed) + SOFT_LEASE_NS +
	      (uint64_t)SOFT_TICK_MS * 1000000u;
	if (su <= end)
		return; /* it looks in time (or a wake-up is on its way: 0) */
	if (atomic_compare_exchange_strong(&c->sleep_until, &su, 0))
		soft_io_wake(c);
}

void soft_io_shutdown(struct soft_qp *qp)
{
	if (qp->obj.fd >= 0)
		shutdown(qp->obj.fd, SHUT_RDWR);
}

/* ctx->lock, rx_lock and tx_lock held (destroy paths). */
void soft_io_qp_closed(struct soft_qp *qp)
{
	if (qp->obj.in_epoll) {
		obj_del(qp->ctx, &qp->obj);
		atomic_fetch_sub(&qp->rcq->handed, 1);
		if (qp->scq != qp->rcq)
			atomic_fetch_sub(&qp->scq->handed, 1);
	}
	soft_io_unwatch(qp);
	if (qp->id) {
		qp->id->qp = NULL;
		qp->id = NULL;
	}
	soft_io_fast_quiesce(qp);
	if (qp->obj.fd >= 0)
		close(qp->obj.fd);
	qp->obj.fd = -1;
	qp->state = QPS_ERROR;
}

/* rx_lock held (and possibly ctx->lock, tx_lock: the reader then needs only
 * rx_lock to leave, as fast_kill tells it not to parse). */
void soft_io_fast_quiesce(struct soft_qp *qp)
{
	if (!qp->fast_rd)
		return;
	qp->fast_kill = true;
	if (qp->obj.fd >= 0)
		shutdown(qp->obj.fd, SHUT_RDWR); /* ends its recvmsg now */
	while (qp->fast_rd)
		pthread_cond_wait(&qp->fast_cv, &qp->rx_lock);
}

/* ---------------------------------------------------- CQ wait sets -- */

int soft_io_cq_init(struct soft_cq *q)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int r = 0;

	q->epfd = epoll_create1(EPOLL_CLOEXEC);
	q->wake_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->epfd < 0 || q->wake_efd < 0)
		r = -errno;
	ev.data.u64 = SOFT_TOK_RING;
	if (!r && epoll_ctl(q->epfd, EPOLL_CTL_ADD, rr_cq_ring_fd(&q->ring), &ev) != 0)
		r = -errno;
	ev.data.u64 = SOFT_TOK_WAKE;
	if (!r && epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->wake_efd, &ev) != 0)
		r = -errno;
	if (r) {
		if (q->epfd >= 0)
			close(q->epfd);
		if (q->wake_efd >= 0)
			close(q->wake_efd);
	}
	return r;
}

void soft_io_cq_fini(struct soft_cq *q)
{
	close(q->epfd);
	close(q->wake_efd);
}

/* The CQ this thread is progressing inline: completions it pushes there need
 * no wake-up (for itself; tls_inline_waiter: it is one of q->waiting). */
static __thread struct soft_cq *tls_inline_cq;
static __thread bool tls_inline_waiter;
/* The fast waiter's own array (soft_io_cq_fast_wait), or NULL. */
static __thread struct soft_direct *tls_direct;

void soft_cq_fast_off(struct soft_cq *q)
{
	atomic_store(&q->fast_off_until, rr_now_ns(q->ctx->env) + SOFT_FAST_COOLDOWN_NS);
	atomic_fetch_add(&q->fast_foreign, 1);
}

void soft_cq_push(struct soft_cq *q, const struct rpcrdma_wc *wc)
{
	bool own = tls_inline_cq == q;
	struct soft_direct *d = tls_direct;
	bool armed;

	/* The fast waiter's own completion, nothing older in the ring: hand
	 * it over directly. Per work queue order holds: pushes of one queue
	 * are serialized by its lock (rx_lock / tx_lock), so a completion
	 * another thread pushed earlier is seen here as a pending ring and
	 * everything after it goes to the ring too. An armed ring takes the
	 * push (its notification semantics stay the ring's). */
	if (d && d->q == q && own && d->got < d->n && !rr_cq_ring_pending(&q->ring) &&
	    !rr_cq_ring_armed(&q->ring)) {
		d->wc[d->got++] = *wc;
		q->fast_direct++;
		return;
	}
	/* Pushed by the consumer's own inline progress: it polls the ring
	 * next (poll, wait, get_event then poll), so no fd notification. */
	armed = rr_cq_ring_armed(&q->ring);
	rr_cq_ring_push_ex(&q->ring, wc, own);
	/* A fast waiter asleep in recvmsg sees this only when its read
	 * returns (<= SOFT_FAST_BLOCK_MS): no more fast waits for a while. */
	atomic_thread_fence(memory_order_seq_cst); /* push, then look (qp_rx) */
	if (!own && atomic_load(&q->fast_blocked) == SOFT_FAST_RECV)
		soft_cq_fast_off(q); /* a SOFT_FAST_POLL one: the wake-up below */
	/* This push consumed the arm: without a waiter the CQ is attended
	 * only until its lease ends, and the progress thread, which counted
	 * on the arm, must look by then (the consumer may not come back). */
	if (armed && !rr_cq_ring_armed(&q->ring) && atomic_load(&q->waiting) == 0)
		soft_io_lease_check(q);
	/* Other waiters (in epoll) are woken. */
	if (atomic_load(&q->waiting) > (own && tls_inline_waiter ? 1 : 0))
		cq_wake(q);
}

/* qlock held: the live QP an epoll token names, or NULL (destroyed since). */
struct soft_qp *soft_cq_lookup(struct soft_cq *q, uint64_t tok)
{
	uint32_t slot = (uint32_t)(tok >> 32), gen = (uint32_t)tok;

	if (slot >= q->nslots || !q->slots[slot].qp || q->slots[slot].gen != gen)
		return NULL;
	return q->slots[slot].qp;
}

/* Receives / transmits on the ready sockets of @q in the calling thread:
 * epoll_wait for up to @timeout_ms (0: what is ready now). @drain consumes
 * the ring's notification too (a waiter would spin on it). Returns the
 * number of ready fds, 0, or -errno. */
int soft_io_cq_progress(struct soft_cq *q, int timeout_ms, bool drain, bool block)
{
	struct epoll_event evs[32];
	int n;

	do
		n = epoll_wait(q->epfd, evs, 32, timeout_ms);
	while (n < 0 && errno == EINTR && timeout_ms == 0);
	if (n <= 0)
		return n < 0 && errno != EINTR ? -errno : 0;
	tls_inline_cq = q;
	tls_inline_waiter = drain; /* drain: called by rpcrdma_cq_wait */
	pthread_mutex_lock(&q->qlock);
	for (int i = 0; i < n; i++) {
		uint64_t tok = evs[i].data.u64;
		struct soft_qp *qp;

		if (tok == SOFT_TOK_RING) {
			if (drain)
				rr_cq_ring_get_event(&q->ring);
			continue;
		}
		if (tok == SOFT_TOK_WAKE) {
			cq_wake_drain(q);
			continue;
		}
		qp = soft_cq_lookup(q, tok);
		if (!qp)
			continue;
		if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
			if (block ? pthread_mutex_lock(&qp->rx_lock) == 0
				  : pthread_mutex_trylock(&qp->rx_lock) == 0) {
				soft_qp_rx(qp);
				pthread_mutex_unlock(&qp->rx_lock);
			}
		}
		if (evs[i].events & EPOLLOUT) {
			if (block ? pthread_mutex_lock(&qp->tx_lock) == 0
				  : pthread_mutex_trylock(&qp->tx_lock) == 0) {
				soft_qp_tx_locked(qp);
				pthread_mutex_unlock(&qp->tx_lock);
			}
		}
	}
	pthread_mutex_unlock(&q->qlock);
	tls_inline_cq = NULL;
	return n;
}

/* Latches every CQ of @c and wakes its waiters. A fast reader sees the
 * latch when its read ends (<= SOFT_FAST_BLOCK_MS; while it spins, at
 * once); @cool: the fast wait is then off on that CQ for
 * SOFT_FAST_COOLDOWN_NS, so that further interrupts meanwhile wake an
 * epoll waiter at once. */
static void cqs_interrupt(struct soft_ctx *c, bool cool)
{
	pthread_mutex_lock(&c->cq_lock);
	for (struct soft_cq *q = c->cqs; q; q = q->next_cq) {
		atomic_store(&q->intr, 1); /* seq_cst, then look (qp_rx) */
		if (atomic_load(&q->waiting) == 0)
			continue; /* the latch ends its next wait at once */
		if (cool && atomic_load(&q->fast_blocked) == SOFT_FAST_RECV)
			soft_cq_fast_off(q);
		/* epoll and SOFT_FAST_POLL waiters wake now */
		cq_wake(q);
	}
	pthread_mutex_unlock(&c->cq_lock);
}

int soft_interrupt(struct rr_context *base)
{
	struct soft_ctx *c = RR_CONTAINER_OF(base, struct soft_ctx, base);

	/* its user is prepared for waits that end early: CM events end
	 * them from now on as well (soft_chan_push) */
	atomic_store(&c->cm_intr, true);
	cqs_interrupt(c, true);
	return 0;
}

/* qlock held: the CQ's only QP when it serves both directions of it. */
static struct soft_qp *cq_single_qp(struct soft_cq *q)
{
	struct soft_qp *qp = NULL;

	if (q->nlive == 1)
		for (uint32_t i = 0; i < q->nslots && !qp; i++)
			qp = q->slots[i].qp;
	return qp && qp->rcq == q && qp->scq == q ? qp : NULL;
}

bool soft_io_cq_fast_poll(struct soft_cq *q)
{
	struct soft_qp *qp;

	if (!q->ctx->fast_wait)
		return false;
	pthread_mutex_lock(&q->qlock);
	qp = cq_single_qp(q);
	/* the receive side alone: what wants EPOLLOUT goes the general way */
	if (!qp || qp->state != QPS_RTS || !qp->cq_watched ||
	    __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&q->qlock);
		return false;
	}
	if (atomic_load_explicit(&q->wake_pending, memory_order_relaxed))
		cq_wake_drain(q); /* nobody waits now: a count left behind */
	if (pthread_mutex_trylock(&qp->rx_lock) == 0) {
		pthread_mutex_unlock(&q->qlock);
		tls_inline_cq = q;
		tls_inline_waiter = false;
		soft_qp_rx(qp);
		tls_inline_cq = NULL;
		pthread_mutex_unlock(&qp->rx_lock);
	} else {
		pthread_mutex_unlock(&q->qlock); /* someone receives for it now */
	}
	return true;
}

bool soft_io_cq_fast_wait(struct soft_cq *q, struct soft_direct *d)
{
	struct soft_qp *qp = NULL;
	bool ok;

	uint64_t off = atomic_load(&q->fast_off_until);

	if (!q->ctx->fast_wait || atomic_load(&q->waiting) != 1)
		return false;
	if (off) { /* no clock read unless a cool-down was set */
		if (rr_now_ns(q->ctx->env) < off)
			return false;
		atomic_compare_exchange_strong(&q->fast_off_until, &off, 0);
	}
	pthread_mutex_lock(&q->qlock);
	qp = cq_single_qp(q);
	if (!qp) {
		pthread_mutex_unlock(&q->qlock);
		return false;
	}
	/* qlock -> rx_lock; a destroy takes the QP out of the slots (qlock),
	 * then waits for this reader under rx_lock (soft_io_fast_quiesce). */
	pthread_mutex_lock(&qp->rx_lock);
	pthread_mutex_unlock(&q->qlock);
	/* The transmit side's flags are read without tx_lock: one set by
	 * another thread just after this look finds fast_blocked set (it is
	 * set before the read sleeps) and turns the fast wait off; the read
	 * ends within SOFT_FAST_BLOCK_MS anyway. in_epoll cannot become true
	 * while this thread waits (the CQ is attended). */
	ok = qp->fast_ok && qp->state == QPS_RTS && qp->cq_watched && !qp->fast_rd &&
	     qp->stage_off == qp->stage_len && !__atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST) &&
	     !__atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED) &&
	     !__atomic_load_n(&qp->term_pending, __ATOMIC_RELAXED);
	if (!ok) {
		pthread_mutex_unlock(&qp->rx_lock);
		return false;
	}
	tls_inline_cq = q;
	tls_inline_waiter = true;
	tls_direct = d;
	soft_qp_rx_fast(qp); /* releases rx_lock */
	tls_direct = NULL;
	tls_inline_cq = NULL;
	return true;
}

/* ------------------------------------------------------------ channel -- */

static struct soft_chan *chan_of(struct rr_cm_channel *ch)
{
	return RR_CONTAINER_OF(ch, struct soft_chan, base);
}

static struct soft_id *id_of(struct rr_cm_id *id)
{
	return RR_CONTAINER_OF(id, struct soft_id, base);
}

int soft_create_channel(struct rr_context *ctx, struct rr_cm_channel **out)
{
	struct soft_chan *ch = rr_zalloc(ctx->env, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	ch->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ch->efd < 0) {
		int e = -errno;

		rr_free(ctx->env, ch);
		return e;
	}
	ch->ctx = RR_CONTAINER_OF(ctx, struct soft_ctx, base);
	pthread_mutex_init(&ch->lock, NULL);
	*out = &ch->base;
	return 0;
}

static void id_discard(struct soft_id *id, bool counted);

/* Ids on @ch the consumer never received (c->lock held; with @ch NULL, all
 * of them: the context is closing). The dispatch layer refuses to destroy a
 * channel with counted ids, so only uncounted ones can be left here. */
static void ids_discard_uncounted(struct soft_ctx *c, struct soft_chan *ch)
{
	struct soft_id *id = c->ids, *next;

	for (; id; id = next) {
		next = id->next_all;
		if (!ch || id->ch == ch)
			id_discard(id, false);
	}
}

int soft_destroy_channel(struct rr_cm_channel *base)
{
	struct soft_chan *ch = chan_of(base);

	pthread_mutex_lock(&ch->ctx->lock);
	ids_discard_uncounted(ch->ctx, ch);
	pthread_mutex_unlock(&ch->ctx->lock);
	close(ch->efd);
	pthread_mutex_destroy(&ch->lock);
	rr_free(ch->ctx->env, ch->evs);
	rr_free(ch->ctx->env, ch);
	return 0;
}

int soft_channel_fd(struct rr_cm_channel *ch)
{
	return chan_of(ch)->efd;
}

void soft_chan_push(struct soft_chan *ch, const struct rpcrdma_cm_event *ev)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ch->lock);
	if (ch->ev_count == ch->ev_cap) {
		unsigned cap = ch->ev_cap ? ch->ev_cap * 2 : 16;
		struct rpcrdma_cm_event *n = rr_alloc(ch->ctx->env, sizeof(*n) * cap);

		if (!n) {
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (unsigned i = 0; i < ch->ev_count; i++)
			n[i] = ch->evs[(ch->ev_head + i) % ch->ev_cap];
		rr_free(ch->ctx->env, ch->evs);
		ch->evs = n;
		ch->ev_cap = cap;
		ch->ev_head = 0;
	}
	ch->evs[(ch->ev_head + ch->ev_count++) % ch->ev_cap] = *ev;
	/* under the lock: the fd is readable exactly while signaled */
	if (!ch->signaled && write(ch->efd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		ch->signaled = true;
	pthread_mutex_unlock(&ch->lock);
	/* A context whose owner uses interrupts (the RPC responder sleeps in
	 * its one connection's CQ and looks at the channel after each wait):
	 * the event ends its CQ waits. No cool-down: CM events are rare, and
	 * the existing connection keeps its fast waits. */
	if (atomic_load(&ch->ctx->cm_intr))
		cqs_interrupt(ch->ctx, false);
}

int soft_get_event(struct rr_cm_channel *base, struct rpcrdma_cm_event *ev)
{
	struct soft_chan *ch = chan_of(base);
	int r = -EAGAIN;

	pthread_mutex_lock(&ch->lock);
	if (ch->ev_count) {
		*ev = ch->evs[ch->ev_head];
		ch->ev_head = (ch->ev_head + 1) % ch->ev_cap;
		ch->ev_count--;
		r = 0;
	}
	/* empty: the fd goes quiet (no system call when it already is, so
	 * that a loop looking at the channel on every turn stays cheap) */
	if (!ch->ev_count && ch->signaled) {
		uint64_t v;

		if (read(ch->efd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
		ch->signaled = false;
	}
	pthread_mutex_unlock(&ch->lock);
	return r;
}

static void id_event(struct soft_id *id, enum rpcrdma_cm_event_type type, int status,
		     const struct rr_mpa_frame *f)
{
	struct rpcrdma_cm_event ev;

	memset(&ev, 0, offsetof(struct rpcrdma_cm_event, private_data));
	ev.type = type;
	ev.status = status;
	ev.id = RR_PUB(cm_id, &id->base);
	/* ev.user_ctx is filled by the dispatch layer when the event is consumed
	 * (rpcrdma_cm_get_event): reading it here, in the progress thread, would
	 * race with rpcrdma_listen/connect storing it after the op returns. */
	if (f) {
		ev.peer_ird = f->enhanced ? (f->ird & RR_MPA_IRDORD_MASK) : 0;
		ev.peer_ord = f->enhanced ? (f->ord & RR_MPA_IRDORD_MASK) : 0;
		ev.private_data_len = f->pd_len;
		memcpy(ev.private_data, f->pd, f->pd_len);
	}
	soft_chan_push(id->ch, &ev);
}

void soft_io_report_disconnect(struct soft_qp *qp, int err)
{
	if (qp->disconnect_reported || !qp->id)
		return;
	qp->disconnect_reported = true;
	if (qp->id->state == IDS_CONNECTED)
		id_event(qp->id, RPCRDMA_CM_DISCONNECTED, err, NULL);
}

/* ----------------------------------------------------------------- ids -- */

static struct soft_id *id_new(struct soft_chan *ch, int fd)
{
	struct soft_id *id = rr_zalloc(ch->ctx->env, sizeof(*id));

	if (!id)
		return NULL;
	id->ch = ch;
	id->ctx = ch->ctx;
	id->obj.type = SOFT_OBJ_HANDSHAKE;
	id->obj.fd = fd;
	id->next_all = ch->ctx->ids;
	ch->ctx->ids = id;
	return id;
}

static void id_unlink(struct soft_id *id)
{
	for (struct soft_id **p = &id->ctx->ids; *p; p = &(*p)->next_all)
		if (*p == id) {
			*p = id->next_all;
			break;
		}
}

static void id_close_fd(struct soft_id *id)
{
	obj_del(id->ctx, &id->obj);
	if (id->obj.fd >= 0 && !(id->qp && id->qp->obj.fd == id->obj.fd))
		close(id->obj.fd);
	id->obj.fd = -1;
}

/* TCP_NODELAY always (every FPDU is a whole message); the congestion
 * control RPCRDMA_SOFT_TCP_CC names, when set (checked at open:
 * soft_io_check_cc), else the system's. */
static void set_sockopts(struct soft_ctx *c, int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (c->tcp_cc[0])
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, c->tcp_cc, strlen(c->tcp_cc));
}

int soft_io_check_cc(struct soft_ctx *c, const char *name)
{
	size_t n = name ? strlen(name) : 0;
	int fd, r = 0;

	c->tcp_cc[0] = 0;
	if (!n)
		return 0;
	if (n >= sizeof(c->tcp_cc))
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)n) != 0)
		r = -errno; /* -ENOENT: not available; -EPERM: not allowed */
	close(fd);
	if (!r)
		memcpy(c->tcp_cc, name, n + 1);
	return r;
}

static size_t path_fpdu_max(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int mss = 0, mtu = 0;
	socklen_t l = sizeof(mss);

	/* One FPDU per TCP segment, as siw: the MSS of the path. TCP_MAXSEG
	 * early in a connection is bounded by half the peer's window seen so
	 * far (about 32 KiB on loopback), so take the path MTU minus the
	 * IP + TCP headers with timestamps when it is larger (65483 on
	 * loopback, 1448 on Ethernet: the MSS TCP settles at). */
	if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) != 0 || mss < RR_FPDU_MIN)
		mss = RR_FPDU_DEFAULT;
	l = sizeof(mtu);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET &&
		    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) == 0 && mtu - 52 > mss)
			mss = mtu - 52;
		else if (ss.ss_family == AF_INET6 &&
			 getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &l) == 0 && mtu - 72 > mss)
			mss = mtu - 72;
	}
	return (size_t)mss;
}

/* Writes a small frame completely (MPA frames are < 600 bytes). */
static int write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		struct iovec v = {(void *)b, n};
		ssize_t w = soft_io_writev(fd, &v, 1);

		if (w == -EAGAIN) {
			usleep(100);
			continue;
		}
		if (w < 0)
			return (int)w;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static uint64_t deadline(struct soft_ctx *c, uint32_t ms)
{
	return rr_now_ns(c->env) + (uint64_t)(ms ? ms : SOFT_DEFAULT_TIMEOUT_MS) * 1000000u;
}

static void fill_cfg(struct rr_mpa_cfg *cfg, const struct rpcrdma_conn_param *p)
{
	cfg->rev = (p && (p->flags & RPCRDMA_CONN_SOFT_MPA_REV1)) ? 1 : 2;
	cfg->crc = p && (p->flags & RPCRDMA_CONN_SOFT_CRC);
	cfg->ird = p && p->responder_resources ? p->responder_resources : SOFT_DEFAULT_DEPTH;
	cfg->ord = p && p->initiator_depth ? p->initiator_depth : SOFT_DEFAULT_DEPTH;
	cfg->ird = RR_MIN(cfg->ird, (uint16_t)SOFT_MAX_IRD);
	cfg->ord = RR_MIN(cfg->ord, (uint16_t)SOFT_MAX_ORD);
}

static int encode_out(struct soft_id *id, struct rr_mpa_frame *f)
{
	int n = rr_mpa_encode(f, id->out, sizeof(id->out));

	if (n < 0)
		return n;
	id->out_len = (size_t)n;
	id->out_off = 0;
	return 0;
}

int soft_listen(struct rr_cm_channel *base, const struct sockaddr *addr, socklen_t addrlen,
		int backlog, void *user_ctx, struct rr_cm_id **out)
{
	struct soft_chan *ch = chan_of(base);
	struct soft_ctx *c = ch->ctx;
	struct soft_id *id;
	int fd, one = 1;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, addr, addrlen) != 0 || listen(fd, backlog > 0 ? backlog : 64) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	pthread_mutex_lock(&c->lock);
	id = id_new(ch, fd);
	if (!id) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return -ENOMEM;
	}
	id->obj.type = SOFT_OBJ_LISTEN;
	id->state = IDS_LISTEN;
	rr_cm_id_init(base, &id->base, user_ctx, NULL, true); /* before events */
	obj_add(c, &id->obj, EPOLLIN);
	pthread_mutex_unlock(&c->lock);
	*out = &id->base;
	return 0;
}

int soft_connect(struct rr_cm_channel *base, struct rr_qp *qpb, const struct sockaddr *dst,
		 socklen_t dstlen, const struct rpcrdma_conn_param *param, void *user_ctx,
		 struct rr_cm_id **out)
{
	struct soft_chan *ch = chan_of(base);
	struct soft_ctx *c = ch->ctx;
	struct soft_qp *qp = RR_CONTAINER_OF(qpb, struct soft_qp, base);
	struct rr_mpa_frame f;
	struct soft_id *id;
	int fd, r;

	if (qp->state != QPS_IDLE || qp->id)
		return -EINVAL;
	fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	set_sockopts(c, fd);
	pthread_mutex_lock(&c->lock);
	id = id_new(ch, fd);
	if (!id) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return -ENOMEM;
	}
	fill_cfg(&id->cfg, param);
	r = rr_mpa_make_request(&id->cfg, param ? param->private_data : NULL,
				param ? param->private_data_len : 0, &f);
	if (!r)
		r = encode_out(id, &f);
	id->commit = param && (param->flags & RPCRDMA_CONN_COMMIT);
	if (!r && connect(fd, dst, dstlen) != 0 && errno != EINPROGRESS)
		r = -errno;
	if (r) {
		id_unlink(id);
		pthread_mutex_unlock(&c->lock);
		close(fd);
		rr_free(c->env, id);
		return r;
	}
	memcpy(&id->peer, dst, RR_MIN((size_t)dstlen, sizeof(id->peer)));
	id->peerlen = dstlen;
	id->qp = qp;
	qp->id = id;
	id->state = IDS_CONNECTING;
	id->timeout_ms = param ? param->timeout_ms : 0;
	id->deadline_ns = deadline(c, id->timeout_ms);
	rr_mpa_parser_init(&id->parser, true);
	rr_cm_id_init(base, &id->base, user_ctx, qpb, false); /* before events */
	obj_add(c, &id->obj, EPOLLOUT | EPOLLIN);
	pthread_mutex_unlock(&c->lock);
	soft_io_wake(c);
	*out = &id->base;
	return 0;
}

/* The QP takes over the socket: data path from now on. Commit: an initiator
 * that offered it serves the peer's Commit Requests from now on (before any
 * FPDU of the peer is read: race-free) and posts Commits once the upper
 * layer has seen the peer agree; a responder that agreed does both. */
static void go_rdma(struct soft_id *id, bool active)
{
	struct soft_qp *qp = id->qp;
	int fd = id->obj.fd;

	obj_del(id->ctx, &id->obj);
	qp->fpdu_max = path_fpdu_max(fd);
	/* before the QP is shared (soft_qp_connected publishes it) */
	qp->fast_ok = id->ctx->fast_wait && soft_io_fast_setup(fd) == 0;
	soft_qp_connected(qp, fd, &id->conn, id->commit, id->commit && !active);
	id->state = IDS_CONNECTED;
	/* the progress thread serves it until its consumer shows up */
	qp_hand(qp, true);
}

/* Until when @q is attended, as of @now: the end of its lease (a time
 * after @now); UINT64_MAX when only its consumer's leaving can end it (a
 * waiter inside, or armed, since longer than the lease: the leaving one
 * calls soft_io_lease_check); 0: not attended. As soft_cq_attended. Reads
 * waiting and the arm before last_use_ns: a waiter that left stored its
 * last use before it left. */
static uint64_t cq_attended_until(struct soft_cq *q, uint64_t now)
{
	bool held = atomic_load(&q->waiting) > 0 || rr_cq_ring_armed(&q->ring);
	uint64_t end = atomic_load(&q->last_use_ns) + SOFT_LEASE_NS;

	if (end > now)
		return end;
	return held ? UINT64_MAX : 0;
}

/* Until when @qp is attended: while either of its CQs is. */
static uint64_t qp_attended_until(struct soft_qp *qp, uint64_t now)
{
	uint64_t until = cq_attended_until(qp->rcq, now);

	if (qp->scq != qp->rcq)
		until = RR_MAX(until, cq_attended_until(qp->scq, now));
	return until;
}

/* Hands QPs nobody attends to the progress thread and takes attended ones
 * back from it (ctx->lock held). Returns the earliest moment a QP left
 * with its consumer could stop being attended (UINT64_MAX: none). */
static uint64_t balance(struct soft_ctx *c, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (struct soft_id *id = c->ids; id; id = id->next_all) {
		struct soft_qp *qp = id->qp;
		uint64_t until;

		if (!qp || id->state != IDS_CONNECTED)
			continue; /* qp_hand checks the QP state under tx_lock */
		until = qp_attended_until(qp, now);
		if ((until != 0) == qp->obj.in_epoll)
			qp_hand(qp, until == 0);
		if (until == 0 && qp->obj.in_epoll) {
			/* Handed (handed++), then look again: a waiter that
			 * entered meanwhile (waiting++, then it looks at
			 * handed) is seen here, or it sees handed and takes
			 * the QP back itself. No waiter is left in epoll with
			 * its QP here and no deadline to fix that. */
			atomic_thread_fence(memory_order_seq_cst);
			until = qp_attended_until(qp, now);
			if (until != 0)
				qp_hand(qp, false);
		}
		if (until != 0 && until < next &&
		    __atomic_load_n(&qp->state, __ATOMIC_RELAXED) == QPS_RTS)
			next = until;
	}
	return next;
}

int soft_accept(struct rr_cm_id *base, struct rr_qp *qpb, const struct rpcrdma_conn_param *param)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp = RR_CONTAINER_OF(qpb, struct soft_qp, base);
	struct rr_mpa_frame f;
	int r;

	pthread_mutex_lock(&c->lock);
	if (id->state != IDS_REQ_RCVD || qp->state != QPS_IDLE || qp->id) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	fill_cfg(&id->cfg, param);
	r = rr_mpa_responder_check(&id->cfg, &id->frame, &id->conn);
	if (!r)
		r = rr_mpa_make_reply(&id->conn, false, param ? param->private_data : NULL,
				      param ? param->private_data_len : 0, &f);
	if (!r)
		r = encode_out(id, &f);
	if (!r)
		r = write_all(id->obj.fd, id->out, id->out_len);
	if (r) {
		pthread_mutex_unlock(&c->lock);
		return r;
	}
	id->commit = param && (param->flags & RPCRDMA_CONN_COMMIT);
	id->qp = qp;
	qp->id = id;
	go_rdma(id, false);
	id_event(id, RPCRDMA_CM_ESTABLISHED, 0, NULL);
	pthread_mutex_unlock(&c->lock);
	/* the progress thread serves the new QP: it gives it back at its next
	 * look if the CQ is attended, and times that CQ's lease */
	soft_io_wake(c);
	return 0;
}

int soft_reject(struct rr_cm_id *base, const void *data, uint16_t len)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct rr_mpa_frame f;
	int r;

	pthread_mutex_lock(&c->lock);
	if (id->state != IDS_REQ_RCVD) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	r = rr_mpa_make_reply(&id->conn, true, data, len, &f);
	if (!r)
		r = encode_out(id, &f);
	if (!r)
		r = write_all(id->obj.fd, id->out, id->out_len);
	id_close_fd(id);
	id->state = IDS_CLOSED;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int soft_disconnect(struct rr_cm_id *base)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp;

	pthread_mutex_lock(&c->lock);
	qp = id->qp;
	if (qp && id->state == IDS_CONNECTED) {
		pthread_mutex_lock(&qp->rx_lock);
		soft_qp_fatal(qp, 0, NULL);
		pthread_mutex_unlock(&qp->rx_lock);
	} else if (id->state != IDS_LISTEN && id->state != IDS_CLOSED) {
		id_close_fd(id);
		id->state = IDS_CLOSED;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* Frees an id the consumer never received (c->lock held): a passive one
 * still waiting for its MPA Request, or one whose CONNECT_REQUEST is dropped
 * (@counted: then it is uncounted). Closing the socket tells the peer. */
static void id_discard(struct soft_id *id, bool counted)
{
	id_close_fd(id);
	id_unlink(id);
	if (counted)
		rr_cm_id_dropped(&id->ch->base, &id->base);
	rr_free(id->ctx->env, id);
}

/* Drops the queued events naming @id (c->lock held), so that no consumer
 * ever reads a destroyed id. A CONNECT_REQUEST that came through the
 * listener @id names a new id nobody will receive: it is freed too. */
static void chan_purge(struct soft_id *id)
{
	struct soft_chan *ch = id->ch;
	struct rpcrdma_cm_id *pub = RR_PUB(cm_id, &id->base);
	unsigned keep = 0;

	pthread_mutex_lock(&ch->lock);
	for (unsigned i = 0; i < ch->ev_count; i++) {
		struct rpcrdma_cm_event *e = &ch->evs[(ch->ev_head + i) % ch->ev_cap];

		if (e->listen_id == pub && e->type == RPCRDMA_CM_CONNECT_REQUEST && e->id) {
			id_discard(id_of(RR_BASE(cm_id, e->id)), true);
			continue;
		}
		if (e->id == pub || e->listen_id == pub)
			continue;
		ch->evs[(ch->ev_head + keep++) % ch->ev_cap] = *e;
	}
	ch->ev_count = keep;
	if (!keep && ch->signaled) {
		uint64_t v;

		if (read(ch->efd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
		ch->signaled = false;
	}
	pthread_mutex_unlock(&ch->lock);
}

/* A listener going away takes the connections still waiting for their MPA
 * Request with it (c->lock held); delivered ones forget it. */
static void listener_gone(struct soft_id *l)
{
	struct soft_id *id = l->ctx->ids, *next;

	for (; id; id = next) {
		next = id->next_all;
		if (id->listen != l)
			continue;
		if (id->state == IDS_AWAIT_REQ)
			id_discard(id, false);
		else
			id->listen = NULL;
	}
}

int soft_destroy_id(struct rr_cm_id *base)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp;

	pthread_mutex_lock(&c->lock);
	qp = id->qp;
	if (qp) {
		pthread_mutex_lock(&qp->rx_lock);
		if (qp->state == QPS_RTS) {
			qp->disconnect_reported = true; /* the id is going away */
			soft_qp_fatal(qp, -ECONNABORTED, NULL);
		}
		pthread_mutex_lock(&qp->tx_lock);
		soft_io_qp_closed(qp);
		pthread_mutex_unlock(&qp->tx_lock);
		pthread_mutex_unlock(&qp->rx_lock);
		id->obj.fd = -1;
	}
	if (id->state == IDS_LISTEN)
		listener_gone(id);
	chan_purge(id);
	id_close_fd(id);
	id_unlink(id);
	pthread_mutex_unlock(&c->lock);
	rr_free(c->env, id);
	return 0;
}

int soft_local_addr(struct rr_cm_id *base, struct sockaddr_storage *ss)
{
	struct soft_id *id = id_of(base);
	int fd = id->obj.fd >= 0 ? id->obj.fd : (id->qp ? id->qp->obj.fd : -1);
	socklen_t l = sizeof(*ss);

	if (fd < 0)
		return -ENOTCONN;
	return getsockname(fd, (struct sockaddr *)ss, &l) ? -errno : 0;
}

int soft_peer_addr(struct rr_cm_id *base, struct sockaddr_storage *ss)
{
	struct soft_id *id = id_of(base);
	int fd = id->obj.fd >= 0 ? id->obj.fd : (id->qp ? id->qp->obj.fd : -1);
	socklen_t l = sizeof(*ss);

	if (fd < 0)
		return -ENOTCONN;
	return getpeername(fd, (struct sockaddr *)ss, &l) ? -errno : 0;
}

int soft_conn_query(struct rr_cm_id *base, struct rpcrdma_conn_info *info)
{
	struct soft_id *id = id_of(base);

	memset(info, 0, sizeof(*info));
	soft_query(&id->ctx->base, &info->caps);
	if (id->state == IDS_CONNECTED && id->qp) {
		pthread_mutex_lock(&id->qp->tx_lock);
		if (!id->qp->commit_tx)
			info->caps.flags &= ~RPCRDMA_CAP_COMMIT;
		pthread_mutex_unlock(&id->qp->tx_lock);
		info->ird = id->qp->ird;
		info->ord = id->qp->ord;
	} else if (id->state == IDS_REQ_RCVD) {
		info->ird = id->conn.ird;
		info->ord = id->conn.ord;
	} else {
		info->caps.flags &= ~RPCRDMA_CAP_COMMIT;
	}
	return 0;
}

/* ---------------------------------------------------- the handshake -- */

static void id_fail(struct soft_id *id, enum rpcrdma_cm_event_type type, int status,
		    const struct rr_mpa_frame *f)
{
	bool active = id->qp != NULL;

	id_close_fd(id);
	id->state = IDS_CLOSED;
	if (active) {
		id->qp->id = NULL;
		id->qp = NULL;
		id_event(id, type, status, f);
	}
}

/* Reads exactly what the MPA parser asks for: never a byte of FPDU data. */
static void handshake_read(struct soft_id *id)
{
	for (;;) {
		uint8_t *dst;
		size_t w = rr_mpa_want(&id->parser, &dst);
		struct iovec v = {dst, w};
		ssize_t n;
		int r;

		if (!w)
			break;
		n = soft_io_readv(id->obj.fd, &v, 1);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, n == 0 ? -ECONNRESET : (int)n, NULL);
			return;
		}
		r = rr_mpa_advance(&id->parser, (size_t)n);
		if (r < 0) {
			id_fail(id, RPCRDMA_CM_ERROR, r, NULL);
			return;
		}
		if (r == 1)
			break;
	}
	if (rr_mpa_parser_frame(&id->parser, &id->frame) != 0) {
		id_fail(id, RPCRDMA_CM_ERROR, -EPROTO, NULL);
		return;
	}
	if (id->state == IDS_AWAIT_REP) {
		struct rr_term t;
		int r = rr_mpa_initiator_check(&id->cfg, &id->frame, &id->conn, &t);

		if (r == -ECONNREFUSED) {
			id_fail(id, RPCRDMA_CM_REJECTED, r, &id->frame);
			return;
		}
		if (r) {
			id_fail(id, RPCRDMA_CM_ERROR, r, NULL);
			return;
		}
		go_rdma(id, true);
		id_event(id, RPCRDMA_CM_ESTABLISHED, 0, &id->frame);
		return;
	}
	/* passive: a Request */
	{
		struct rr_mpa_cfg prov = {.rev = 2, .ird = SOFT_MAX_IRD, .ord = SOFT_MAX_ORD};
		int r = rr_mpa_responder_check(&prov, &id->frame, &id->conn);
		struct rpcrdma_cm_event ev;

		if (r) {
			struct rr_mpa_frame f;

			/* siw: reject with R set, markers cleared */
			if (rr_mpa_make_reply(&id->conn, true, NULL, 0, &f) == 0 && encode_out(id, &f) == 0)
				write_all(id->obj.fd, id->out, id->out_len);
			id_discard(id, false);
			return;
		}
		id->state = IDS_REQ_RCVD;
		obj_del(id->ctx, &id->obj);
		rr_cm_id_created(&id->ch->base, &id->base);
		memset(&ev, 0, offsetof(struct rpcrdma_cm_event, private_data));
		ev.type = RPCRDMA_CM_CONNECT_REQUEST;
		ev.id = RR_PUB(cm_id, &id->base);
		ev.listen_id = RR_PUB(cm_id, id->listen ? &id->listen->base : NULL);
		/* ev.user_ctx: filled at consumption by the dispatch layer. */
		ev.peer_ird = id->frame.enhanced ? (id->frame.ird & RR_MPA_IRDORD_MASK) : 0;
		ev.peer_ord = id->frame.enhanced ? (id->frame.ord & RR_MPA_IRDORD_MASK) : 0;
		ev.private_data_len = id->frame.pd_len;
		memcpy(ev.private_data, id->frame.pd, id->frame.pd_len);
		soft_chan_push(id->ch, &ev);
	}
}

static void handle_listen(struct soft_id *l)
{
	for (;;) {
		int fd = accept4(l->obj.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct soft_id *id;

		if (fd < 0)
			return;
		set_sockopts(l->ctx, fd);
		id = id_new(l->ch, fd);
		if (!id) {
			close(fd);
			continue;
		}
		id->listen = l;
		id->state = IDS_AWAIT_REQ;
		id->deadline_ns = deadline(l->ctx, 0);
		rr_mpa_parser_init(&id->parser, false);
		obj_add(l->ctx, &id->obj, EPOLLIN);
	}
}

static void handle_handshake(struct soft_id *id, uint32_t events)
{
	if (id->state == IDS_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		getsockopt(id->obj.fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -err, NULL);
			return;
		}
		if (write_all(id->obj.fd, id->out, id->out_len) != 0) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -ECONNRESET, NULL);
			return;
		}
		id->state = IDS_AWAIT_REP;
		obj_mod(id->ctx, &id->obj, EPOLLIN);
		return;
	}
	if (id->state == IDS_AWAIT_REP || id->state == IDS_AWAIT_REQ)
		handshake_read(id);
}

/* MPA timeout on a silent peer, on the injected clock. Returns the earliest
 * deadline of the handshakes still running (UINT64_MAX: none). */
static uint64_t check_timeouts(struct soft_ctx *c, uint64_t now)
{
	struct soft_id *id = c->ids, *next;
	uint64_t first = UINT64_MAX;

	for (; id; id = next) {
		next = id->next_all;
		if (id->state != IDS_CONNECTING && id->state != IDS_AWAIT_REP &&
		    id->state != IDS_AWAIT_REQ)
			continue;
		if (now < id->deadline_ns) {
			first = RR_MIN(first, id->deadline_ns);
			continue;
		}
		if (id->state == IDS_AWAIT_REQ) {
			id_discard(id, false);
		} else {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -ETIMEDOUT, NULL);
		}
	}
	return first;
}

/* epoll_wait's timeout until @next (UINT64_MAX: none, -1). An injected
 * clock may jump: then at most SOFT_TICK_MS while a deadline exists. */
static int sleep_ms(const struct soft_ctx *c, uint64_t next, uint64_t now)
{
	uint64_t ms;

	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	ms = (next - now + 999999u) / 1000000u;
	if (!c->coarse_res_ns && ms > SOFT_TICK_MS)
		ms = SOFT_TICK_MS;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static void *progress_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rr-soft");   /* for top -H, gdb */
	struct soft_ctx *c = arg;
	struct epoll_event evs[64];
	uint64_t next = 0; /* the next look at deadlines (0: at once) */
	int timeout = 0;

	/* Sleeps until the next deadline, not on a tick: an idle context's
	 * thread does not wake at all. What makes an earlier deadline wakes
	 * it through c->wake (connect, accept, soft_io_lease_check); a
	 * wake-up, a handshake step or a due deadline makes it look. */
	for (;;) {
		int n = epoll_wait(c->epfd, evs, 64, timeout);
		bool look = false;
		uint64_t now;

		pthread_mutex_lock(&c->lock);
		if (c->stop) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct soft_obj *o = evs[i].data.ptr;

			if (o == &c->wake) {
				uint64_t v;

				if (read(c->wake.fd, &v, sizeof(v)) < 0) {
					/* spurious */
				}
				look = true;
				continue;
			}
			if (!obj_live(c, o))
				continue;
			switch (o->type) {
			case SOFT_OBJ_LISTEN:
				handle_listen(RR_CONTAINER_OF(o, struct soft_id, obj));
				look = true; /* new handshake deadlines */
				break;
			case SOFT_OBJ_HANDSHAKE:
				handle_handshake(RR_CONTAINER_OF(o, struct soft_id, obj), evs[i].events);
				look = true; /* maybe connected: a QP to balance */
				break;
			case SOFT_OBJ_QP: {
				struct soft_qp *qp = RR_CONTAINER_OF(o, struct soft_qp, obj);

				if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
					int r;

					pthread_mutex_lock(&qp->rx_lock);
					r = soft_qp_rx(qp);
					pthread_mutex_unlock(&qp->rx_lock);
					if (r < 0)
						qp_hand(qp, false);
				}
				if ((evs[i].events & EPOLLOUT) && qp->obj.in_epoll) {
					pthread_mutex_lock(&qp->tx_lock);
					soft_qp_tx_locked(qp);
					pthread_mutex_unlock(&qp->tx_lock);
				}
				break;
			}
			default:
				break;
			}
		}
		now = rr_now_ns(c->env);
		if (look || now >= next) {
			/* announce the look before it (soft_io_lease_check):
			 * a consumer leaving meanwhile wakes the thread */
			atomic_store(&c->sleep_until, UINT64_MAX);
			atomic_thread_fence(memory_order_seq_cst);
			next = check_timeouts(c, now);
			next = RR_MIN(next, balance(c, now));
		}
		timeout = sleep_ms(c, next, now);
		atomic_store(&c->sleep_until, next);
		pthread_mutex_unlock(&c->lock);
	}
	return NULL;
}

int soft_io_start(struct soft_ctx *c)
{
	c->live.next = c->live.prev = &c->live;
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0)
		return -errno;
	c->wake.type = SOFT_OBJ_WAKE;
	c->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wake.fd < 0) {
		int e = -errno;

		close(c->epfd);
		return e;
	}
	{
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->wake};

		epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->wake.fd, &ev);
	}
	if (pthread_create(&c->thread, NULL, progress_main, c) != 0) {
		close(c->wake.fd);
		close(c->epfd);
		return -EAGAIN;
	}
	c->thread_started = true;
	return 0;
}

void soft_io_stop(struct soft_ctx *c)
{
	if (c->thread_started) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_mutex_unlock(&c->lock);
		soft_io_wake(c);
		pthread_join(c->thread, NULL);
	}
	ids_discard_uncounted(c, NULL);
	close(c->wake.fd);
	close(c->epfd);
}
