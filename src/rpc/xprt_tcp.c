/* SPDX-License-Identifier: BSD-2-Clause */
/* The TCP transport of the RPC layer (URL scheme "tcp"): ONC RPC over TCP
 * with record marking (RFC 5531 section 11: each record is one or more
 * fragments, each preceded by a 4-byte header whose high bit marks the last
 * fragment and whose low 31 bits are the fragment length). Implements the
 * client and server roles of src/rpc/xprt.h: Calls are sent with writev
 * (inline bytes, referenced DDP-eligible data and XDR pad), Replies are
 * matched by XID, a lost connection is re-established and pending Calls are
 * retransmitted with the same XID. The server runs one epoll thread that
 * accepts and reads; replies are written by the RPC layer's workers.
 * Records above the maximum message size, or a peer closing mid-record,
 * close that connection only. Receive buffers grow only as bytes arrive, so
 * a hostile length claim allocates nothing; a used buffer is kept for the
 * next record (per connection up to RM_SPARE_MAX, the client up to its
 * maximum message, and one larger buffer per server shared by its
 * connections), so repeated large records cost no growth copies and no
 * fresh pages. */
#include "transport/xprt.h"
#include "rpc/rpcmsg.h"
#include "rpc/xprt_tcp.h"
#include "transport/xprt_ctl.h"
#include "common/listen.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RM_LAST 0x80000000u
#define RM_MAXFRAG 0x7fffffffu
#define RM_MPA_KEY4 "MPA "

/* ---- record marking reader ---- */

/* Recycled record buffers (a few slots under a lock), so that steady
 * traffic does not allocate, copy while growing, or fault in fresh pages
 * for every message. Two slots: with a synchronous peer the next record
 * often arrives while the previous one's buffer is still in use (its Reply
 * is being sent), and one slot would then be empty every time. */
#define RM_SLOTS 2

struct rm_cache {
	pthread_mutex_t lock;
	uint8_t *buf[RM_SLOTS];
	size_t cap[RM_SLOTS];
};

static void rm_cache_init(struct rm_cache *k)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
}

static void rm_cache_fini(struct rm_cache *k, const struct rpcrdma_env *env)
{
	for (unsigned i = 0; i < RM_SLOTS; i++)
		rr_free(env, k->buf[i]);
	pthread_mutex_destroy(&k->lock);
}

/* Keeps @buf (capacity @cap) in an empty slot or in place of a smaller
 * one; frees what is not kept. */
static void rm_cache_put(struct rm_cache *k, const struct rpcrdma_env *env, uint8_t *buf,
			 size_t cap)
{
	unsigned small = 0;

	pthread_mutex_lock(&k->lock);
	for (unsigned i = 1; i < RM_SLOTS; i++)
		if (!k->buf[i] || (k->buf[small] && k->cap[i] < k->cap[small]))
			small = i;
	if (!k->buf[small] || k->cap[small] < cap) {
		uint8_t *t = k->buf[small];

		k->buf[small] = buf;
		k->cap[small] = cap;
		buf = t;
	}
	pthread_mutex_unlock(&k->lock);
	rr_free(env, buf);
}

/* The smallest kept buffer of at least @want bytes and more than @above
 * (*@cap), or NULL. */
static uint8_t *rm_cache_take(struct rm_cache *k, size_t want, size_t above, size_t *cap)
{
	uint8_t *b = NULL;
	int pick = -1;

	pthread_mutex_lock(&k->lock);
	for (unsigned i = 0; i < RM_SLOTS; i++)
		if (k->buf[i] && k->cap[i] >= want && k->cap[i] > above &&
		    (pick < 0 || k->cap[i] < k->cap[pick]))
			pick = (int)i;
	if (pick >= 0) {
		b = k->buf[pick];
		*cap = k->cap[pick];
		k->buf[pick] = NULL;
		k->cap[pick] = 0;
	}
	pthread_mutex_unlock(&k->lock);
	return b;
}

struct rm_reader {
	const struct rpcrdma_env *env;
	size_t max;
	bool skip_oversize;   /* client: discard an oversized record, keep its
				 first 8 bytes (XID, msg_type) */
	bool trust_len;       /* client: allocate whole fragments up front */
	bool skipping;
	bool started;         /* the connection's first header is in */
	unsigned skip_have;
	uint8_t head8[8];
	/* Optional read-ahead (client): bytes received beyond what the parser
	 * asked for. Never used by the server, whose EPOLLONESHOT re-arm
	 * relies on unread bytes staying in the socket. */
	uint8_t *stage;
	size_t stage_cap, stage_off, stage_len;
	/* Recycled record buffers (rm_recycle): this reader's own, up to
	 * spare_max bytes each (client: its maximum message; server:
	 * RM_SPARE_MAX per connection); larger ones go to @pool, shared by a
	 * server's connections so that idle connections hold no large
	 * buffer each. */
	struct rm_cache spare;
	size_t spare_max;
	struct rm_cache *pool;      /* NULL: none (client) */
	uint8_t hdr[4];
	unsigned hdr_got;
	bool in_frag;
	bool last;
	uint32_t frag_left;
	uint8_t *buf;
	size_t cap;
	size_t len;
};

#define RM_SPARE_MAX ((size_t)256 * 1024 + 4096)

/* @spare_max: the largest recycled buffer the reader keeps itself; larger
 * ones go to @pool (may be NULL: freed). */
static void rm_init(struct rm_reader *r, const struct rpcrdma_env *env, size_t max,
		    size_t spare_max, struct rm_cache *pool)
{
	memset(r, 0, sizeof(*r));
	r->env = env;
	r->max = max;
	r->spare_max = spare_max;
	r->pool = pool;
	rm_cache_init(&r->spare);
}

/* Takes back a record buffer of capacity @cap once its consumer is done
 * (any thread). */
static void rm_recycle(struct rm_reader *r, uint8_t *buf, size_t cap)
{
	if (!buf)
		return;
	if (cap <= r->spare_max)
		rm_cache_put(&r->spare, r->env, buf, cap);
	else if (r->pool)
		rm_cache_put(r->pool, r->env, buf, cap);
	else
		rr_free(r->env, buf);
}

static void rm_free(struct rm_reader *r)
{
	rr_free(r->env, r->buf);
	r->buf = NULL;
	r->cap = r->len = 0;
	rr_free(r->env, r->stage);
	r->stage = NULL;
	r->stage_cap = r->stage_off = r->stage_len = 0;
	rm_cache_fini(&r->spare, r->env);
}

/* Enables read-ahead with a @cap-byte staging buffer. */
static int rm_stage(struct rm_reader *r, size_t cap)
{
	r->stage = rr_alloc(r->env, cap);
	if (!r->stage)
		return -ENOMEM;
	r->stage_cap = cap;
	return 0;
}

/* Forgets a partial record and staged bytes (new connection). */
static void rm_reset(struct rm_reader *r)
{
	rr_free(r->env, r->buf);
	r->buf = NULL;
	r->cap = r->len = 0;
	r->hdr_got = 0;
	r->in_frag = false;
	r->skipping = false;
	r->started = false;
	r->stage_off = r->stage_len = 0;
}

static bool rm_buffered(const struct rm_reader *r)
{
	return r->stage_off < r->stage_len;
}

/* recv() through the staging buffer: small reads fill the stage (one
 * syscall for header and body), large ones go straight to @dst. */
static ssize_t rm_recv(struct rm_reader *r, int fd, void *dst, size_t want)
{
	ssize_t n;
	size_t k;

	if (r->stage_off < r->stage_len) {
		k = RR_MIN(want, r->stage_len - r->stage_off);
		memcpy(dst, r->stage + r->stage_off, k);
		r->stage_off += k;
		return (ssize_t)k;
	}
	if (!r->stage || want >= r->stage_cap / 2)
		return recv(fd, dst, want, 0);
	n = recv(fd, r->stage, r->stage_cap, 0);
	if (n <= 0)
		return n;
	k = RR_MIN(want, (size_t)n);
	memcpy(dst, r->stage, k);
	r->stage_off = k;
	r->stage_len = (size_t)n;
	return (ssize_t)k;
}

/* Hands the completed record to the caller, who frees it with rr_free or
 * gives it back with rm_recycle (capacity *@cap). */
static uint8_t *rm_take(struct rm_reader *r, size_t *len, size_t *cap)
{
	uint8_t *b = r->buf;

	*len = r->len;
	*cap = r->cap;
	r->buf = NULL;
	r->cap = r->len = 0;
	r->hdr_got = 0;
	r->in_frag = false;
	return b;
}

/* Reads from @fd. Returns 1 when a record is complete (rm_take), 0 when
 * the socket has no more bytes now (non-blocking), -ECONNRESET on EOF or
 * error, -EMSGSIZE when the record exceeds the maximum, -ENOMEM,
 * -EPROTOTYPE when the connection starts with an MPA frame. With
 * skip_oversize, an oversized record is read and discarded instead and 2 is
 * returned once it ended (head8 holds its first bytes if skip_have >= 8):
 * the stream stays in step, so only that one message is lost. */
static int rm_read(struct rm_reader *r, int fd)
{
	for (;;) {
		ssize_t n;

		if (!r->in_frag) {
			n = rm_recv(r, fd, r->hdr + r->hdr_got, 4 - r->hdr_got);
			if (n == 0)
				return -ECONNRESET;
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				return -ECONNRESET;
			}
			r->hdr_got += (unsigned)n;
			if (r->hdr_got < 4)
				continue;
			/* The connection starts with an MPA frame (RFC 5044
			 * section 7.1: "MPA ID Req Frame" / "MPA ID Rep
			 * Frame"): the peer speaks iWARP (rdma://). As a
			 * fragment header it would be a 1.3 GB non-last
			 * fragment, which no RPC peer sends first. */
			if (!r->started && !memcmp(r->hdr, RM_MPA_KEY4, 4))
				return -EPROTOTYPE;
			r->started = true;
			{
				uint32_t h = rr_get_be32(r->hdr);

				r->last = (h & RM_LAST) != 0;
				r->frag_left = h & RM_MAXFRAG;
			}
			if (!r->skipping &&
			    (r->frag_left > r->max || r->len > r->max - r->frag_left)) {
				if (!r->skip_oversize)
					return -EMSGSIZE;
				r->skipping = true;
				r->skip_have = (unsigned)RR_MIN(r->len, (size_t)8);
				if (r->skip_have)
					memcpy(r->head8, r->buf, r->skip_have);
				rr_free(r->env, r->buf);
				r->buf = NULL;
				r->cap = r->len = 0;
			}
			r->in_frag = true;
			r->hdr_got = 0;
		}
		if (r->frag_left == 0) {
			r->in_frag = false;
			if (r->last) {
				if (r->skipping) {
					r->skipping = false;
					return 2;
				}
				return 1;
			}
			continue;
		}
		if (r->skipping) {
			uint8_t scratch[4096];

			n = rm_recv(r, fd, scratch, RR_MIN((size_t)r->frag_left, sizeof(scratch)));
			if (n == 0)
				return -ECONNRESET;
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				return -ECONNRESET;
			}
			if (r->skip_have < 8) {
				unsigned k = (unsigned)RR_MIN((size_t)(8 - r->skip_have), (size_t)n);

				memcpy(r->head8 + r->skip_have, scratch, k);
				r->skip_have += k;
			}
			r->frag_left -= (uint32_t)n;
			continue;
		}
		if (r->cap == r->len) {
			/* Server: grow as bytes arrive (at most double what
			 * was received), so a hostile length claim costs
			 * nothing. Client (trust_len): the fragment at once,
			 * it is within max_msg and came from the server we
			 * chose. Never beyond what the header announced. */
			size_t need = r->len + r->frag_left;
			size_t ncap = r->trust_len ? need : RR_MAX(r->cap * 2, (size_t)16384);
			size_t got = 0;
			uint8_t *nb = NULL;

			if (ncap > need)
				ncap = need;
			/* A recycled buffer, if large enough: its memory is
			 * already ours, so using it whole costs nothing. A
			 * fragment above spare_max takes a pool buffer only
			 * when the whole fragment fits it: no growth steps. */
			if (need > r->spare_max && r->pool)
				nb = rm_cache_take(r->pool, need, r->cap, &got);
			if (!nb)
				nb = rm_cache_take(&r->spare, need, r->cap, &got);
			if (!nb)
				nb = rm_cache_take(&r->spare, ncap, r->cap, &got);
			if (!nb) {
				nb = rr_alloc(r->env, ncap);
				got = ncap;
			}
			if (!nb)
				return -ENOMEM;
			if (r->len)
				memcpy(nb, r->buf, r->len);
			rm_recycle(r, r->buf, r->cap);
			r->buf = nb;
			r->cap = got;
		}
		n = rm_recv(r, fd, r->buf + r->len, RR_MIN((size_t)r->frag_left, r->cap - r->len));
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -ECONNRESET;
		}
		r->len += (size_t)n;
		r->frag_left -= (uint32_t)n;
	}
}

/* ---- record writer ---- */

#define MAX_IOV (2 + 3 * RR_RPC_MAX_DDP + 1)

/* Builds the iovec of one single-fragment record for @m. */
static int build_iov(const struct rr_xprt_msg *m, uint8_t marker[4], struct iovec *iov)
{
	const uint8_t *pad = rr_xbuf_zero_pad();
	size_t off = 0;
	int n = 0;

	rr_put_be32(marker, RM_LAST | (uint32_t)m->xdr_len);
	iov[n].iov_base = marker;
	iov[n++].iov_len = 4;
	for (unsigned i = 0; i < m->nddp; i++) {
		const struct rr_rpc_ddp *d = &m->ddp[i];
		size_t padlen = RR_ALIGN4((size_t)d->len) - d->len;

		if (d->inline_off > off) {
			iov[n].iov_base = (void *)(m->head + off);
			iov[n++].iov_len = d->inline_off - off;
			off = d->inline_off;
		}
		if (d->len) {
			iov[n].iov_base = (void *)d->ptr;
			iov[n++].iov_len = d->len;
		}
		if (padlen) {
			iov[n].iov_base = (void *)pad;
			iov[n++].iov_len = padlen;
		}
	}
	if (m->head_len > off) {
		iov[n].iov_base = (void *)(m->head + off);
		iov[n++].iov_len = m->head_len - off;
	}
	return n;
}

/* Sends @m as one record. Polls in slices; gives up when *@cancel becomes
 * true (before the first byte: -ECANCELED, stream intact; later: the stream
 * is broken, -ECONNABORTED) or after @timeout_ms without progress. */
static int send_record(int fd, const struct rr_xprt_msg *m, atomic_bool *cancel,
		       int timeout_ms)
{
	struct iovec iov[MAX_IOV];
	uint8_t marker[4];
	int niov, idle_ms = 0;
	size_t total = 0, sent = 0;
	struct iovec *v = iov;

	if (m->xdr_len > RM_MAXFRAG)
		return -EMSGSIZE;
	niov = build_iov(m, marker, iov);
	for (int i = 0; i < niov; i++)
		total += iov[i].iov_len;
	while (sent < total) {
		struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)niov};
		ssize_t n;

		if (cancel && atomic_load(cancel))
			return sent ? -ECONNABORTED : -ECANCELED;
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -ECONNRESET;
			if (idle_ms >= timeout_ms)
				return -ETIMEDOUT;
			if (poll(&pfd, 1, 100) == 0)
				idle_ms += 100;
			continue;
		}
		idle_ms = 0;
		sent += (size_t)n;
		while (n > 0 && niov > 0) {
			if ((size_t)n >= v->iov_len) {
				n -= (ssize_t)v->iov_len;
				v++;
				niov--;
			} else {
				v->iov_base = (uint8_t *)v->iov_base + n;
				v->iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

static void set_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ======================= client ======================= */

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
	struct rm_reader rd;        /* used only by the reader-role holder */
};

/* Per-call transport state, kept in xp_priv: the cancel flag for
 * send_record (atomic) and the connection generation the call was last
 * written on (c->lock; 0: not yet written). */
struct call_priv {
	atomic_bool cancel;
	size_t reply_cap;           /* capacity of reply_buf (rm_recycle) */
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
		set_sock_opts(fd);
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
			rc = send_record(c->fd, &call->msg, &cp->cancel, 30000);
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

	if (call->msg.xdr_len > c->p.max_msg || call->msg.xdr_len > RM_MAXFRAG)
		return -EMSGSIZE;
	cp = rr_zalloc(c->p.env, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	atomic_init(&cp->cancel, false);
	for (unsigned i = 0; i < RR_RPC_MAX_DDP; i++)
		call->placed[i] = RR_RPC_NOT_PLACED;
	call->reply = NULL;
	call->reply_len = 0;
	call->reply_buf = NULL;
	call->status = 0;
	call->xp_status = 0;

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
		rm_recycle(&c->rd, call->reply_buf, cp ? cp->reply_cap : 0);
	call->reply_buf = NULL;
	call->reply = NULL;
	rr_free(c->p.env, call->xp_priv);
	call->xp_priv = NULL;
}

/* A record arrived: match it to a pending Call by XID (RFC 5531 section 9);
 * anything else is discarded. Returns the call it completed (only to be
 * compared: it may be gone), or NULL. */
static struct rr_xprt_call *clnt_on_record(struct tcp_clnt *c, uint8_t *buf, size_t len,
					   size_t cap)
{
	struct rr_xprt_call *call;
	uint32_t xid, mt;
	bool done = false;

	if (rr_rpcmsg_peek(buf, len, &xid, &mt) || mt != RR_RPC_REPLY) {
		rm_recycle(&c->rd, buf, cap);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	call = find_xid(c, xid);
	if (!call || (call->xp_flags & (CF_REPLIED | CF_ABORTED))) {
		pthread_mutex_unlock(&c->lock);
		rm_recycle(&c->rd, buf, cap);
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

	if (!rm_buffered(&c->rd)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		rc = poll(&pfd, 1, timeout_ms);
		if (rc <= 0)
			return 0;
	}
	for (;;) {
		rc = rm_read(&c->rd, fd);
		if (rc == 1) {
			size_t len, cap;
			uint8_t *buf = rm_take(&c->rd, &len, &cap);

			if (clnt_on_record(c, buf, len, cap) == mine && mine &&
			    !rm_buffered(&c->rd))
				return 0;
			continue;
		}
		if (rc == 2) {
			/* A Reply above max_msg: fail its call only. */
			if (c->rd.skip_have >= 8)
				clnt_on_oversize(c, c->rd.head8);
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
	if (c->broken || c->closing || c->n_pending > c->n_self)
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
	rm_reset(&c->rd);
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
			/* Serve the calls no caller reads for. */
			if (c->reader_busy || c->n_pending <= c->n_self) {
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
	rm_init(&c->rd, p->env, p->max_msg, p->max_msg, NULL);
	c->rd.skip_oversize = true;
	c->rd.trust_len = true;
	rc = rm_stage(&c->rd, STAGE_BYTES);
	if (rc) {
		close(fd);
		rr_free(p->env, c);
		return rc;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = pthread_create(&c->rx, NULL, clnt_rx_main, c);
	if (rc) {
		close(fd);
		rm_free(&c->rd);
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
	rm_free(&c->rd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	pthread_cond_destroy(&c->cv);
	rr_free(c->p.env, c);
}

static const struct rr_xprt_client_ops tcp_client_ops = {
	.create = tcp_clnt_create,
	.submit = tcp_clnt_submit,
	.abort = tcp_clnt_abort,
	.release_reply = tcp_clnt_release_reply,
	.destroy = tcp_clnt_destroy,
	.wait = tcp_clnt_wait,
};

/* ======================= server ======================= */

struct tcp_srv;

struct tcp_conn {
	struct tcp_srv *srv;
	int fd;
	struct rm_reader rd;
	pthread_mutex_t rd_lock;   /* EPOLLONESHOT already serialises readers;
				      this makes it explicit (and TSan-visible) */
	pthread_mutex_t send_lock;
	int refs;                  /* io thread + one per delivered req */
	bool closed;
	bool idle_shut;            /* shut down by the idle sweep (lock) */
	_Atomic uint64_t last_rx_ns;    /* its last read (idle timeout) */
	struct sockaddr_storage peer;   /* from accept (RR_CTL_PEER_ADDR) */
	struct tcp_conn *next, *prev;
};

struct tcp_req {
	struct rr_xprt_req req;
	struct tcp_conn *conn;
	uint8_t *buf;
	size_t cap;
};

struct tcp_srv {
	struct rr_xprt_server_params p;
	int lfd;
	int epfd;
	int evfd;
	int port;
	pthread_t *io;              /* io threads: accept, read, run requests */
	unsigned nio;
	bool io_started;
	pthread_mutex_t lock;
	bool stopping;
	bool quit;
	struct tcp_conn *conns;
	unsigned nconns;
	/* limits (docs/security.md "Limits"), under lock */
	uint32_t tick_ms;           /* io threads' longest sleep */
	uint64_t idle_look_ns;      /* next idle sweep */
	struct rr_backoff backoff;  /* accept back-off */
	uint64_t resume_ns;         /* listener out of epoll until; 0: not */
	uint64_t refused, idle_closed;
	struct rm_cache pool;       /* large record buffers, all connections */
};

static void conn_put_locked(struct tcp_srv *s, struct tcp_conn *cn, bool *free_it)
{
	*free_it = --cn->refs == 0;
	if (*free_it) {
		if (cn->prev)
			cn->prev->next = cn->next;
		else
			s->conns = cn->next;
		if (cn->next)
			cn->next->prev = cn->prev;
		s->nconns--;
	}
}

static void conn_free(struct tcp_srv *s, struct tcp_conn *cn)
{
	close(cn->fd);
	rm_free(&cn->rd);
	pthread_mutex_destroy(&cn->send_lock);
	pthread_mutex_destroy(&cn->rd_lock);
	rr_free(s->p.env, cn);
	rr_mem_trim_due(s->p.env);   /* the io threads give it back */
}

static void conn_put(struct tcp_srv *s, struct tcp_conn *cn)
{
	bool f;

	pthread_mutex_lock(&s->lock);
	conn_put_locked(s, cn, &f);
	pthread_mutex_unlock(&s->lock);
	if (f)
		conn_free(s, cn);
}

/* The io thread gives up its reference: no more reads on this connection. */
static void conn_close(struct tcp_srv *s, struct tcp_conn *cn)
{
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, cn->fd, NULL);
	pthread_mutex_lock(&s->lock);
	cn->closed = true;
	pthread_mutex_unlock(&s->lock);
	shutdown(cn->fd, SHUT_RDWR);
	conn_put(s, cn);
}

/* accept4 failed for want of file descriptors or memory (@err; lock held):
 * the listener leaves the epoll set for a while (rr_backoff_begin; srv_tick
 * puts it back); pending connections wait in the kernel's queue and
 * established ones are served. */
static void srv_backoff_locked(struct tcp_srv *s, int err)
{
	s->resume_ns = rr_backoff_begin(&s->backoff, s->p.env, "tcp server", err);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
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

static void srv_accept(struct tcp_srv *s)
{
	for (;;) {
		struct tcp_conn *cn;
		struct epoll_event ev;
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
		cn = rr_zalloc(s->p.env, sizeof(*cn));
		if (!cn) {
			pthread_mutex_lock(&s->lock);
			s->refused++;
			pthread_mutex_unlock(&s->lock);
			close(fd);
			continue;
		}
		set_sock_opts(fd);
		cn->srv = s;
		cn->fd = fd;
		cn->refs = 1;
		cn->peer = peer;
		atomic_store(&cn->last_rx_ns, rr_now_ns(s->p.env));
		rm_init(&cn->rd, s->p.env, s->p.max_msg, RM_SPARE_MAX, &s->pool);
		pthread_mutex_init(&cn->send_lock, NULL);
		pthread_mutex_init(&cn->rd_lock, NULL);
		pthread_mutex_lock(&s->lock);
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
		ev.events = EPOLLIN | EPOLLONESHOT;
		ev.data.ptr = cn;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			conn_close(s, cn);
	}
}

/* Timers of the io threads (any of them, lock taken here): the end of an
 * accept back-off, and the idle timeout: a connection that has read nothing
 * for idle_timeout_ms and has no request in progress (each holds a
 * reference) is shut down; its io thread then reads EOF and closes it.
 * Returns how long the caller may sleep, in ms. */
static int srv_tick(struct tcp_srv *s)
{
	uint64_t now = rr_now_ns(s->p.env), to = (uint64_t)s->p.idle_timeout_ms * 1000000u;
	uint64_t sleep_ns = (uint64_t)s->tick_ms * 1000000u;

	pthread_mutex_lock(&s->lock);
	if (s->resume_ns && !s->stopping && s->lfd >= 0) {
		if (now >= s->resume_ns) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};

			s->resume_ns = 0;
			epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
		} else {
			sleep_ns = RR_MIN(sleep_ns, s->resume_ns - now);
		}
	}
	if (to && now >= s->idle_look_ns) {
		s->idle_look_ns = now + RR_MIN(to / 10, 100000000ull);
		for (struct tcp_conn *cn = s->conns; cn; cn = cn->next) {
			if (cn->closed || cn->idle_shut || cn->refs > 1 ||
			    now - atomic_load(&cn->last_rx_ns) < to)
				continue;
			cn->idle_shut = true;
			s->idle_closed++;
			shutdown(cn->fd, SHUT_RDWR);
		}
	}
	pthread_mutex_unlock(&s->lock);
	rr_mem_trim_tick();
	return (int)((sleep_ns + 999999u) / 1000000u);
}

/* Lets the next ready event of @cn reach a thread (EPOLLONESHOT). */
static void conn_rearm(struct tcp_srv *s, struct tcp_conn *cn)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = cn};

	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, cn->fd, &ev) < 0)
		conn_close(s, cn);
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

/* Reads up to one complete record from @cn (only this thread reads it until
 * it is re-armed), re-arms, then delivers the record: another io thread may
 * read the connection's next record while this one runs the request. */
static void srv_read(struct tcp_srv *s, struct tcp_conn *cn)
{
	struct tcp_req *r;
	bool stopping;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	if (s->p.idle_timeout_ms)
		atomic_store(&cn->last_rx_ns, rr_now_ns(s->p.env));
	pthread_mutex_lock(&cn->rd_lock);
	rc = rm_read(&cn->rd, cn->fd);
	if (rc == 1)
		buf = rm_take(&cn->rd, &len, &cap);
	pthread_mutex_unlock(&cn->rd_lock);

	if (rc == 0) {
		conn_rearm(s, cn);
		return;
	}
	if (rc == -EPROTOTYPE)
		srv_answer_mpa(cn->fd);
	if (rc < 0) {
		conn_close(s, cn);
		return;
	}
	r = rr_zalloc(s->p.env, sizeof(*r));
	if (!r) {
		rm_recycle(&cn->rd, buf, cap);
		conn_close(s, cn);
		return;
	}
	r->buf = buf;
	r->cap = cap;
	r->req.len = len;
	r->req.msg = r->buf;
	r->req.xp_priv = r;
	r->conn = cn;
	pthread_mutex_lock(&s->lock);
	stopping = s->stopping;
	if (!stopping)
		cn->refs++;
	pthread_mutex_unlock(&s->lock);
	if (stopping) {
		/* Shutting down: no new Calls; the connection is kept until
		 * destroy so replies in flight still go out. */
		rm_recycle(&cn->rd, r->buf, r->cap);
		rr_free(s->p.env, r);
		conn_rearm(s, cn);
		return;
	}
	conn_rearm(s, cn);
	s->p.recv(s->p.ctx, &r->req);
}

static void *srv_io_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rr-tcp-srv");   /* for top -H, gdb */
	struct tcp_srv *s = arg;

	int timeout = (int)s->tick_ms;

	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(s->epfd, &ev, 1, timeout);
		bool quit;

		pthread_mutex_lock(&s->lock);
		quit = s->quit;
		pthread_mutex_unlock(&s->lock);
		if (quit)
			break;
		if (n == 1 && ev.data.ptr == &s->lfd)
			srv_accept(s);
		else if (n == 1 && ev.data.ptr != &s->evfd)
			srv_read(s, ev.data.ptr);
		timeout = srv_tick(s);   /* after: a back-off it began counts */
	}
	return NULL;
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
	struct epoll_event ev;

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
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&s->lock, NULL);
	rm_cache_init(&s->pool);
	if (s->epfd < 0 || s->evfd < 0) {
		rc = -errno;
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &s->evfd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev) < 0) {
		rc = -errno;
		goto fail;
	}
	*out = (struct rr_xprt_server *)s;
	return 0;
fail:
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	close(fd);
	rm_cache_fini(&s->pool, s->p.env);
	pthread_mutex_destroy(&s->lock);
	rr_free(p->env, s);
	return rc;
}

static int tcp_srv_port(const struct rr_xprt_server *x)
{
	return ((const struct tcp_srv *)x)->port;
}

static int tcp_srv_start(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};
	int rc;

	if (s->io_started)
		return -EBUSY;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) < 0)
		return -errno;
	s->nio = s->p.threads ? s->p.threads : 1;
	s->io = rr_zalloc(s->p.env, s->nio * sizeof(pthread_t));
	if (!s->io)
		return -ENOMEM;
	for (unsigned i = 0; i < s->nio; i++) {
		rc = pthread_create(&s->io[i], NULL, srv_io_main, s);
		if (rc) {
			s->nio = i;
			s->io_started = true; /* destroy joins those started */
			return -rc;
		}
	}
	s->io_started = true;
	return 0;
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
	pthread_mutex_lock(&s->lock);
	closed = cn->closed;
	pthread_mutex_unlock(&s->lock);
	if (closed) {
		pthread_mutex_unlock(&cn->send_lock);
		return -ENOTCONN;
	}
	rc = send_record(cn->fd, msg, NULL, 30000);
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

	rm_recycle(&cn->rd, r->buf, r->cap);
	rr_free(s->p.env, r);
	conn_put(s, cn);
}

static void tcp_srv_stop(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;

	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	if (s->lfd >= 0) {
		if (s->io_started)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		close(s->lfd);
		s->lfd = -1;
	}
	pthread_mutex_unlock(&s->lock);
}

static void tcp_srv_destroy(struct rr_xprt_server *x)
{
	struct tcp_srv *s = (struct tcp_srv *)x;
	uint64_t one = 1;

	tcp_srv_stop(x);
	pthread_mutex_lock(&s->lock);
	s->quit = true;
	pthread_mutex_unlock(&s->lock);
	/* Never consumed: wakes every io thread (they also wake each second). */
	if (write(s->evfd, &one, sizeof(one)) < 0) {
		/* nothing else to do */
	}
	if (s->io_started) {
		for (unsigned i = 0; i < s->nio; i++)
			pthread_join(s->io[i], NULL);
	}
	rr_free(s->p.env, s->io);
	/* Only io-thread references remain (every req is done). */
	while (s->conns) {
		struct tcp_conn *cn = s->conns;

		s->conns = cn->next;
		conn_free(s, cn);
	}
	close(s->epfd);
	close(s->evfd);
	rm_cache_fini(&s->pool, s->p.env);
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

static const struct rr_xprt_server_ops tcp_server_ops = {
	.ctl = tcp_srv_ctl,
	.inline_recv = true,
	.create = tcp_srv_create,
	.port = tcp_srv_port,
	.start = tcp_srv_start,
	.send_reply = tcp_srv_send_reply,
	.req_done = tcp_srv_req_done,
	.stop = tcp_srv_stop,
	.destroy = tcp_srv_destroy,
};

const struct rr_xprt_class rr_xprt_tcp_class = {
	.scheme = "tcp",
	.client = &tcp_client_ops,
	.server = &tcp_server_ops,
};
