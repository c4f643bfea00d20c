/* SPDX-License-Identifier: BSD-2-Clause */
/* Deterministic tests of the tcp:// client's reconnect and retransmission
 * (RFC 5531 section 9: a Call is retransmitted with its XID; section 11:
 * record marking), against a scripted server in this file: its first
 * connection(s) never answer, later ones answer each Call (optionally
 * twice). The test hooks of src/transport/tcp/tcp_client.h stop the thread
 * that wrote a Call right after the write, while the connection is cut,
 * replaced and the reconnect's retransmit scan runs: the interleaving that
 * lost a call across a server restart (rpc_tcp_server_restart_under_load,
 * about 1 run in 5 under load before the fix). Also: a duplicate Reply
 * completes a call once, a cancel inside that window, cancel and client
 * destroy while reconnecting.
 * Every wait is bounded. */
#include "test.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/tcp_client.h"
#include "xprt_harness.h"
#include "rpc_raw.h"
#include "rpcrdma/rpc.h"

#define PROG 0x20000098u
#define P_ECHO 1u
#define FK_MAXCONN 8
#define FK_MAXSEEN 64

/* ---- scripted server ---- */

struct fk_conn {
	int fd;                 /* -1 once closed */
	uint8_t buf[8192];
	size_t len;
};

struct fake {
	int lfd;
	int port;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool stop;
	bool unlisten;          /* close the listening socket */
	unsigned mute;          /* connections [0, mute) never answer */
	unsigned dup;           /* Replies per Call on the others (1 or 2) */
	unsigned nconn;
	struct fk_conn conn[FK_MAXCONN];
	unsigned nseen;         /* Calls received: XID and connection */
	uint32_t seen_xid[FK_MAXSEEN];
	unsigned seen_conn[FK_MAXSEEN];
};

/* One Call record (without its marker): CALL header (RFC 5531 section 9)
 * xid, 0, 2, prog, vers, proc, cred, verf, then the u32 argument. The
 * Reply: MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, arg + 1, vers. */
static void fk_on_call(struct fake *f, unsigned ci, const uint8_t *r, size_t len)
{
	uint8_t out[4 + 32];
	uint32_t xid, vers, v, clen, vlen;
	size_t off;

	if (len < 32 || rr_get_be32(r + 4) != 0)
		return;
	xid = rr_get_be32(r);
	vers = rr_get_be32(r + 16);
	clen = rr_get_be32(r + 28);
	off = 32 + RR_ALIGN4((size_t)clen);
	if (clen > 400 || len < off + 8)
		return;
	vlen = rr_get_be32(r + off + 4);
	off += 8 + RR_ALIGN4((size_t)vlen);
	if (vlen > 400 || len < off + 4)
		return;
	v = rr_get_be32(r + off);
	pthread_mutex_lock(&f->lock);
	if (f->nseen < FK_MAXSEEN) {
		f->seen_xid[f->nseen] = xid;
		f->seen_conn[f->nseen] = ci;
		f->nseen++;
	}
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
	if (ci < f->mute)
		return;
	rr_put_be32(out, 0x80000000u | 32u);
	rr_put_be32(out + 4, xid);
	rr_put_be32(out + 8, 1);        /* REPLY */
	rr_put_be32(out + 12, 0);       /* MSG_ACCEPTED */
	rr_put_be32(out + 16, 0);       /* verf AUTH_NONE */
	rr_put_be32(out + 20, 0);
	rr_put_be32(out + 24, 0);       /* SUCCESS */
	rr_put_be32(out + 28, v + 1);
	rr_put_be32(out + 32, vers);
	for (unsigned i = 0; i < f->dup; i++)
		rpc_raw_send_all(f->conn[ci].fd, out, sizeof(out));
}

static void fk_close(struct fake *f, unsigned ci)
{
	pthread_mutex_lock(&f->lock);
	close(f->conn[ci].fd);
	f->conn[ci].fd = -1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
}

/* Reads what @ci has; handles every complete single-fragment record. */
static void fk_read(struct fake *f, unsigned ci)
{
	struct fk_conn *cn = &f->conn[ci];
	ssize_t n = recv(cn->fd, cn->buf + cn->len, sizeof(cn->buf) - cn->len, 0);

	if (n <= 0) {
		fk_close(f, ci);
		return;
	}
	cn->len += (size_t)n;
	while (cn->len >= 4) {
		uint32_t h = rr_get_be32(cn->buf);
		size_t flen = h & 0x7fffffffu;

		if (!(h & 0x80000000u) || flen > sizeof(cn->buf) - 4) {
			fk_close(f, ci); /* not what the client sends */
			return;
		}
		if (cn->len < 4 + flen)
			break;
		fk_on_call(f, ci, cn->buf + 4, flen);
		memmove(cn->buf, cn->buf + 4 + flen, cn->len - 4 - flen);
		cn->len -= 4 + flen;
	}
}

static void *fk_main(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		struct pollfd pfd[1 + FK_MAXCONN];
		unsigned idx[1 + FK_MAXCONN];
		nfds_t n = 0;

		pthread_mutex_lock(&f->lock);
		if (f->stop) {
			pthread_mutex_unlock(&f->lock);
			return NULL;
		}
		if (f->unlisten && f->lfd >= 0) {
			close(f->lfd);
			f->lfd = -1;
			pthread_cond_broadcast(&f->cv);
		}
		if (f->lfd >= 0) {
			pfd[n] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
			idx[n++] = FK_MAXCONN;
		}
		for (unsigned i = 0; i < f->nconn; i++) {
			if (f->conn[i].fd >= 0) {
				pfd[n] = (struct pollfd){.fd = f->conn[i].fd, .events = POLLIN};
				idx[n++] = i;
			}
		}
		pthread_mutex_unlock(&f->lock);
		if (poll(pfd, n, 20) <= 0)
			continue;
		for (nfds_t k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (idx[k] == FK_MAXCONN) {
				int fd = accept(f->lfd, NULL, NULL);

				if (fd < 0)
					continue;
				pthread_mutex_lock(&f->lock);
				if (f->nconn == FK_MAXCONN) {
					close(fd);
				} else {
					f->conn[f->nconn].fd = fd;
					f->conn[f->nconn].len = 0;
					f->nconn++;
				}
				pthread_cond_broadcast(&f->cv);
				pthread_mutex_unlock(&f->lock);
			} else {
				fk_read(f, idx[k]);
			}
		}
	}
}

static int fk_start(struct fake *f, unsigned mute, unsigned dup)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);

	memset(f, 0, sizeof(*f));
	f->mute = mute;
	f->dup = dup;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(f->lfd, 8) < 0 || getsockname(f->lfd, (struct sockaddr *)&sa, &sl) < 0)
		return -errno;
	f->port = ntohs(sa.sin_port);
	return -pthread_create(&f->th, NULL, fk_main, f);
}

/* Cuts connection @ci (as a server restart would), once accepted. */
static void fk_cut(struct fake *f, unsigned ci)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&f->lock);
	while (ci >= f->nconn && !pthread_cond_timedwait(&f->cv, &f->lock, &ts))
		;
	if (ci < f->nconn && f->conn[ci].fd >= 0)
		shutdown(f->conn[ci].fd, SHUT_RDWR); /* the server thread closes it */
	pthread_mutex_unlock(&f->lock);
}

/* Stops listening: later connects are refused. */
static void fk_unlisten(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->unlisten = true;
	while (f->lfd >= 0)
		pthread_cond_wait(&f->cv, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void fk_stop(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->th, NULL);
	for (unsigned i = 0; i < f->nconn; i++)
		if (f->conn[i].fd >= 0)
			close(f->conn[i].fd);
	if (f->lfd >= 0)
		close(f->lfd);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cv);
}

/* How often the server received @xid on connection @ci. */
static unsigned fk_seen(struct fake *f, uint32_t xid, unsigned ci)
{
	unsigned n = 0;

	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nseen; i++)
		n += f->seen_xid[i] == xid && f->seen_conn[i] == ci;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* Waits (up to about @ms) until the server received @n Calls in all. */
static bool fk_wait_seen(struct fake *f, unsigned n, unsigned ms)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000 + 1;
	pthread_mutex_lock(&f->lock);
	while (f->nseen < n && !pthread_cond_timedwait(&f->cv, &f->lock, &ts))
		;
	ok = f->nseen >= n;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

/* ---- the hook: cut the connection in the window after a write ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct fake *f;
	bool armed;             /* fire on the next SENT on generation 1 */
	bool fired;
	uint64_t resent_gen;    /* last RESENT seen */
	struct rpcrdma_call *cancel; /* cancel this call inside the window */
} hk = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void hook(enum rr_tcp_test_point pt, uint32_t xid, uint64_t gen)
{
	struct timespec ts;
	struct rpcrdma_call *cancel;
	uint64_t rgen;

	(void)xid;
	pthread_mutex_lock(&hk.lock);
	if (pt == RR_TCP_TEST_RESENT) {
		hk.resent_gen = gen;
		pthread_cond_broadcast(&hk.cv);
		pthread_mutex_unlock(&hk.lock);
		return;
	}
	if (!hk.armed || gen != 1) {
		pthread_mutex_unlock(&hk.lock);
		return;
	}
	hk.armed = false;
	hk.fired = true;
	/* The Call is on connection 0 now. Cut it and let the receive thread
	 * see the loss, reconnect and finish its retransmit scan before this
	 * writer goes on. */
	fk_cut(hk.f, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	while (hk.resent_gen < 2 && !pthread_cond_timedwait(&hk.cv, &hk.lock, &ts))
		;
	cancel = hk.cancel;
	rgen = hk.resent_gen;
	pthread_mutex_unlock(&hk.lock);
	CHECK(rgen >= 2);
	if (cancel)
		rpcrdma_call_cancel(cancel);
}

static void hk_arm(struct fake *f, struct rpcrdma_call *cancel)
{
	pthread_mutex_lock(&hk.lock);
	hk.f = f;
	hk.armed = true;
	hk.fired = false;
	hk.resent_gen = 0;
	hk.cancel = cancel;
	pthread_mutex_unlock(&hk.lock);
	rr_tcp_test_set_hook(hook);
}

/* Removes the hook; true when it fired (the window was forced). */
static bool hk_disarm(void)
{
	bool fired;

	rr_tcp_test_set_hook(NULL);
	pthread_mutex_lock(&hk.lock);
	hk.armed = false;
	hk.f = NULL;
	hk.cancel = NULL;
	fired = hk.fired;
	pthread_mutex_unlock(&hk.lock);
	return fired;
}

/* ---- client helpers ---- */

struct done_ctx {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint32_t v, vers;
};

static void on_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct done_ctx *d = arg;
	struct rpcrdma_xdr_dec *dec = status == 0 ? rpcrdma_call_results(call) : NULL;

	pthread_mutex_lock(&d->lock);
	if (dec && (rpcrdma_xdr_get_u32(dec, &d->v) || rpcrdma_xdr_get_u32(dec, &d->vers)))
		status = -EBADMSG;
	d->status = status;
	d->done = true;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->lock);
}

static void done_init(struct done_ctx *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cv, NULL);
}

/* Waits for the callback (bounded by the call timeout plus slack). */
static bool done_wait(struct done_ctx *d)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&d->lock);
	while (!d->done && !pthread_cond_timedwait(&d->cv, &d->lock, &ts))
		;
	ok = d->done;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

static struct rpcrdma_client *connect_fake(struct fake *f, uint32_t timeout_ms)
{
	struct rpcrdma_client_opts o = {.timeout_ms = timeout_ms};
	struct rpcrdma_client *c = NULL;
	char url[64];

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", f->port);
	if (rpcrdma_client_create(url, PROG, 1, &o, &c))
		return NULL;
	return c;
}

/* An asynchronous call written on connection 0, the connection cut and
 * replaced (scan finished) before its writer records the write: the call
 * must be retransmitted on connection 1 with its XID, exactly once, and
 * complete with the Reply. Before the fix it ended in -ETIMEDOUT. */
TEST(rpc_tcp_retransmit_call_written_during_reconnect)
{
	struct fake f;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call, *call2;
	struct done_ctx d;
	uint32_t xid;

	REQUIRE_EQ(fk_start(&f, 1, 1), 0);
	c = connect_fake(&f, 3000);
	REQUIRE(c != NULL);
	done_init(&d);
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 41);
	xid = rpcrdma_call_xid(call);
	hk_arm(&f, NULL);
	REQUIRE_EQ(rpcrdma_call_start(call, on_done, &d), 0);
	CHECK(done_wait(&d));
	CHECK(hk_disarm());
	CHECK_EQ(d.status, 0);
	CHECK_EQ(d.v, 42);
	CHECK_EQ(fk_seen(&f, xid, 1), 1);
	rpcrdma_call_destroy(call);
	/* The new connection is in step: a synchronous call works. */
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call2), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call2), 7);
	CHECK_EQ(rpcrdma_call_run(call2), 0);
	rpcrdma_call_destroy(call2);
	rpcrdma_client_destroy(c);
	fk_stop(&f);
}

/* The case CI saw: a synchronous call (its caller reads for it) written on
 * the old connection while another pending call keeps the receive thread
 * reading, which notices the loss, reconnects and retransmits that other
 * call. Both complete, each XID once on the new connection. */
TEST(rpc_tcp_retransmit_sync_call_written_during_reconnect)
{
	struct fake f;
	struct rpcrdma_client *c;
	struct rpcrdma_call *a, *b;
	struct done_ctx d;
	struct rpcrdma_xdr_dec *dec;
	uint32_t xa, xb, v = 0;

	REQUIRE_EQ(fk_start(&f, 1, 1), 0);
	c = connect_fake(&f, 3000);
	REQUIRE(c != NULL);
	done_init(&d);
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &a), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(a), 1);
	xa = rpcrdma_call_xid(a);
	REQUIRE_EQ(rpcrdma_call_start(a, on_done, &d), 0);
	CHECK(fk_wait_seen(&f, 1, RR_TEST_WAIT_MS)); /* a is on connection 0 */
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &b), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(b), 100);
	xb = rpcrdma_call_xid(b);
	hk_arm(&f, NULL);
	CHECK_EQ(rpcrdma_call_run(b), 0);
	CHECK(hk_disarm());
	dec = rpcrdma_call_results(b);
	CHECK(dec != NULL);
	if (dec)
		CHECK_EQ(rpcrdma_xdr_get_u32(dec, &v), 0);
	CHECK_EQ(v, 101);
	CHECK(done_wait(&d));
	CHECK_EQ(d.status, 0);
	CHECK_EQ(d.v, 2);
	CHECK_EQ(fk_seen(&f, xa, 1), 1);
	CHECK_EQ(fk_seen(&f, xb, 1), 1);
	rpcrdma_call_destroy(a);
	rpcrdma_call_destroy(b);
	rpcrdma_client_destroy(c);
	fk_stop(&f);
}

/* A cancel inside that window: the call completes once with -ECANCELED
 * and is not retransmitted. */
TEST(rpc_tcp_cancel_during_reconnect_window)
{
	struct fake f;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call, *call2;
	struct done_ctx d;
	uint32_t xid;

	REQUIRE_EQ(fk_start(&f, 1, 1), 0);
	c = connect_fake(&f, 3000);
	REQUIRE(c != NULL);
	done_init(&d);
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 5);
	xid = rpcrdma_call_xid(call);
	hk_arm(&f, call);
	REQUIRE_EQ(rpcrdma_call_start(call, on_done, &d), 0);
	CHECK(done_wait(&d));
	CHECK(hk_disarm());
	CHECK_EQ(d.status, -ECANCELED);
	CHECK_EQ(fk_seen(&f, xid, 1), 0);
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call2), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call2), 7);
	CHECK_EQ(rpcrdma_call_run(call2), 0);
	rpcrdma_call_destroy(call2);
	rpcrdma_client_destroy(c);
	fk_stop(&f);
}

/* Calls pending across a plain cut (no hook) are retransmitted once each;
 * the new connection answers every Call twice (as a server replaying its
 * reply cache might): each call completes exactly once, the duplicate is
 * discarded, and later calls still work. */
TEST(rpc_tcp_retransmit_with_duplicate_replies)
{
	enum { N = 8 };
	struct fake f;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call[N], *last;
	struct done_ctx d[N];
	uint32_t xid[N];

	REQUIRE_EQ(fk_start(&f, 1, 2), 0);
	c = connect_fake(&f, 3000);
	REQUIRE(c != NULL);
	for (int i = 0; i < N; i++) {
		done_init(&d[i]);
		REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call[i]), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call[i]), (uint32_t)i * 10);
		xid[i] = rpcrdma_call_xid(call[i]);
		REQUIRE_EQ(rpcrdma_call_start(call[i], on_done, &d[i]), 0);
	}
	CHECK(fk_wait_seen(&f, N, RR_TEST_WAIT_MS));
	fk_cut(&f, 0);
	for (int i = 0; i < N; i++) {
		CHECK(done_wait(&d[i]));
		CHECK_EQ(d[i].status, 0);
		CHECK_EQ(d[i].v, (uint32_t)i * 10 + 1);
		CHECK_EQ(fk_seen(&f, xid[i], 0), 1);
		CHECK_EQ(fk_seen(&f, xid[i], 1), 1);
		rpcrdma_call_destroy(call[i]);
	}
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &last), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(last), 1000);
	CHECK_EQ(rpcrdma_call_run(last), 0);
	rpcrdma_call_destroy(last);
	rpcrdma_client_destroy(c);
	fk_stop(&f);
}

/* While the receive thread retries a refused reconnect: a pending call is
 * cancelled (completes once, -ECANCELED), then the client is destroyed
 * (returns; the receive thread ends during its backoff). */
TEST(rpc_tcp_cancel_and_destroy_while_reconnecting)
{
	struct fake f;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	struct done_ctx d;
	long long w0;

	REQUIRE_EQ(fk_start(&f, 1, 1), 0);
	c = connect_fake(&f, 30000);
	REQUIRE(c != NULL);
	done_init(&d);
	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 5);
	REQUIRE_EQ(rpcrdma_call_start(call, on_done, &d), 0);
	CHECK(fk_wait_seen(&f, 1, RR_TEST_WAIT_MS));
	fk_unlisten(&f);
	w0 = rr_th_thread_wakeups("rr-progress-*");
	fk_cut(&f, 0);
	/* a few refused reconnects: the client's progress loop, woken by the
	 * cut, then sleeps out each backoff (50, 100, ... ms) between
	 * attempts */
	for (uint64_t dl_ = rr_test_deadline();
	     rr_th_thread_wakeups("rr-progress-*") - w0 < 3 &&
	     rr_test_wait_left(dl_, "rr_th_thread_wakeups(\"rr-progress-*\") - w0 < 3 to turn false");)
		usleep(10000);
	CHECK(rr_th_thread_wakeups("rr-progress-*") - w0 >= 3);
	rpcrdma_call_cancel(call);
	CHECK(done_wait(&d));
	CHECK_EQ(d.status, -ECANCELED);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	fk_stop(&f);
}
