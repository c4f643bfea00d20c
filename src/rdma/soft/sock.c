/* SPDX-License-Identifier: BSD-2-Clause */
/* Socket I/O of the soft provider, the only file of src/rdma/soft/ that makes
 * socket system calls (docs/CONVENTIONS.md): the data path's send/recv and
 * sendmsg/recvmsg, the fast waiter's read (spin, then sleep in a blocking
 * recv or in poll(2) over the socket and the CQ's wake eventfd), socket
 * options (TCP_NODELAY, congestion control, the fast wait's receive
 * timeout), the FPDU size from the path MTU, and for the connection manager
 * (cm.c) socket/bind/listen/accept4/connect, the listener's
 * TCP_DEFER_ACCEPT, SO_ERROR, addresses and shutdown. Other files hold
 * socket fds only to register them with epoll and to close them. Nothing
 * here parses or decides anything of a protocol. */
#include "rdma/soft/sock.h"

#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/spin_adapt.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/race.h"

/* ------------------------------------------------------- data path -- */

/* One buffer goes through send/recv: no msghdr and no iovec array for the
 * kernel to copy in and check (sendmsg/recvmsg do both on every call;
 * measurable per message on a paravirtualised VM, docs/perf-notes/fast2.md).
 * The msghdr of the others is built apart (sock_sendmsg, sock_recvmsg), so
 * that the one-buffer call does not fill one it never uses. */
static ssize_t sock_sendmsg(int fd, const struct iovec *iov, unsigned cnt)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = cnt};
	ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);

	return n < 0 ? -errno : n;
}

static ssize_t sock_recvmsg(int fd, struct iovec *iov, unsigned cnt, int flags)
{
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = cnt};
	ssize_t n = recvmsg(fd, &m, flags);

	return n < 0 ? -errno : n;
}

/* The one-buffer send and recv as the bare system calls (sendto and
 * recvfrom without an address, which is what libc's send and recv make):
 * libc's wrappers are cancellation points, and entering and leaving one
 * (__pthread_enable_asynccancel, _disable) cost more than the call's own
 * user-space work, twice per Call or Reply (docs/PERFORMANCE.md "Issue 16
 * part BC"). Nothing of the library is cancellable (no thread of it is
 * cancelled, and a caller's thread cancelled inside a call would leave the
 * QP's locks and flags behind at any of its points anyway), so they are
 * not cancellation points here. On x86-64 Linux the system call is made in
 * place (SOCK_SYS_INLINE: the kernel's convention, number in rax,
 * arguments in rdi, rsi, rdx, r10, r8, r9, the result or -errno in rax,
 * rcx and r11 clobbered), not through libc's syscall(2): that is a call,
 * its arguments moved one register down, the seventh through the stack,
 * and errno set on failure for the caller to read back from thread-local
 * storage (issue 16 part DG); elsewhere libc's syscall(2). Under
 * ThreadSanitizer libc's send and recv (TSan intercepts them and orders a
 * send before the receive of its bytes: with a client and a server in one
 * process, as the tests run, what one side did before its message is seen
 * to come before what the other does after it; docs/testing.md "Race
 * detectors"). Where the system has no sendto/recvfrom number (socketcall
 * systems), libc's. Each returns what moved, or -errno (never -1). */
#if defined(__x86_64__) && defined(__linux__) && defined(SYS_sendto) && \
	defined(SYS_recvfrom) && !defined(RR_TSAN)
#define SOCK_SYS_INLINE 1
static inline long sock_sys6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#endif

static inline ssize_t sock_send1(int fd, const void *buf, size_t len, int flags)
{
#if defined(SOCK_SYS_INLINE)
	return sock_sys6(SYS_sendto, fd, (long)(uintptr_t)buf, (long)len, flags, 0, 0);
#else
#if defined(SYS_sendto) && !defined(RR_TSAN)
	ssize_t n = (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
#else
	ssize_t n = send(fd, buf, len, flags);
#endif
	return n < 0 ? -errno : n;
#endif
}

static inline ssize_t sock_recv1(int fd, void *buf, size_t len, int flags)
{
#if defined(SOCK_SYS_INLINE)
	return sock_sys6(SYS_recvfrom, fd, (long)(uintptr_t)buf, (long)len, flags, 0, 0);
#else
#if defined(SYS_recvfrom) && !defined(RR_TSAN)
	ssize_t n = (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
#else
	ssize_t n = recv(fd, buf, len, flags);
#endif
	return n < 0 ? -errno : n;
#endif
}

ssize_t rr_soft_sock_writev(int fd, const struct iovec *iov, unsigned cnt)
{
	ssize_t n;

	do
		n = cnt == 1 ? sock_send1(fd, iov[0].iov_base, iov[0].iov_len,
					  MSG_NOSIGNAL | MSG_DONTWAIT)
			     : sock_sendmsg(fd, iov, cnt);
	while (n == -EINTR);
	return n == -EWOULDBLOCK ? -EAGAIN : n;
}

static ssize_t readv_flags(int fd, struct iovec *iov, unsigned cnt, int flags)
{
	ssize_t n;

	do
		n = cnt == 1 ? sock_recv1(fd, iov[0].iov_base, iov[0].iov_len, flags)
			     : sock_recvmsg(fd, iov, cnt, flags);
	while (n == -EINTR);
	return n == -EWOULDBLOCK ? -EAGAIN : n;
}

ssize_t rr_soft_sock_readv(int fd, struct iovec *iov, unsigned cnt)
{
	return readv_flags(fd, iov, cnt, MSG_DONTWAIT);
}

/* The same as rr_soft_sock_readv, sleeping until data, EOF, shutdown or the
 * socket's receive timeout (SOFT_FAST_BLOCK_MS: then -EAGAIN). For fast
 * waits only. */
static ssize_t readv_wait(int fd, struct iovec *iov, unsigned cnt)
{
	return readv_flags(fd, iov, cnt, 0);
}

/* ------------------------------------------------------- fast wait -- */

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
		rr_soft_cq_wake_drain(q);
		atomic_fetch_add_explicit(&q->fast_wakes, 1, memory_order_relaxed);
	}
	if (!(p[0].revents & (POLLIN | POLLERR | POLLHUP)))
		return -EAGAIN;
	return readv_flags(qp->obj.fd, iov, cnt, MSG_DONTWAIT);
}

/* The spin of a fast read with @budget > 0 (spin, then sleep): looks at
 * the socket until data comes or the budget runs out. Returns what a look
 * read (data, EOF, an error), or -EAGAIN: nothing (*@miss: the budget ran
 * out; else a completion, an interrupt or a transmit backlog ended it).
 * The adaptive budget (@adapt: qp->spin_adapt, common/spin_adapt.c) is
 * told what it found; the fixed one counts its misses (SOFT_SPIN_MISSES). */
static ssize_t fast_spin(struct soft_qp *qp, struct iovec *iov, unsigned cnt, uint64_t max,
			 uint64_t budget, bool adapt, bool *miss)
{
	struct soft_cq *q = qp->rcq;
	/* the default environment's clock (real time), never the context's:
	 * a budget of CPU spent spinning, which must end also under a test's
	 * frozen virtual clock */
	uint64_t t0 = rr_now_ns(NULL);
	bool empty = false;   /* a look found nothing */

	for (;;) {
		ssize_t n = readv_flags(qp->obj.fd, iov, cnt, MSG_DONTWAIT);

		if (n != -EAGAIN && !empty) {
			/* there at the first look (the rest of a message): no
			 * spin, neither hit nor miss */
			atomic_fetch_add_explicit(&q->spin_ready, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&soft_counters.spin_ready, 1, memory_order_relaxed);
			return n;
		}
		if (n != -EAGAIN) {
			qp->spin_miss = 0;
			atomic_fetch_add_explicit(&q->spin_hits, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&soft_counters.spin_hits, 1, memory_order_relaxed);
			if (adapt) /* how late: a descheduled spinner's is a miss */
				rr_spin_adapt_end(&qp->spin_adapt, max, budget, RR_SPIN_HIT,
						  rr_now_ns(NULL) - t0);
			return n;
		}
		empty = true;
		if (rr_cq_ring_pending(&q->ring) || atomic_load(&q->intr) ||
		    __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST))
			return -EAGAIN;
		if (rr_now_ns(NULL) - t0 >= budget)
			break;
		soft_race(SOFT_RACE_SPIN, qp);   /* another look follows */
	}
	*miss = true;
	atomic_fetch_add_explicit(&q->spin_misses, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&soft_counters.spin_misses, 1, memory_order_relaxed);
	if (adapt) {
		rr_spin_adapt_end(&qp->spin_adapt, max, budget, RR_SPIN_MISS, 0);
	} else if (++qp->spin_miss >= SOFT_SPIN_MISSES) {
		qp->spin_miss = 0;
		qp->spin_skip = SOFT_SPIN_SKIP;
	}
	return -EAGAIN;
}

ssize_t rr_soft_sock_readv_fast(struct soft_qp *qp, struct iovec *iov, unsigned cnt, int mode)
{
	/* A waiter for one QP of a shared CQ (rr_soft_wait_qp) sleeps at
	 * once: it is one of several callers waiting at the same time, and
	 * their spins took the CPU from the peers that answer them
	 * (docs/PERFORMANCE.md "Issue 16 part R": p99 of a 64 KiB READ on 8
	 * connections ~4x). */
	uint64_t max = qp->own_wait ? 0 : qp->ctx->spin_ns, budget = max;
	bool adapt = max && qp->ctx->spin_adaptive;
	ssize_t got;

	if (adapt) {
		budget = rr_spin_adapt_begin(&qp->spin_adapt, max);
	} else if (budget && qp->spin_skip) {
		qp->spin_skip--;
		budget = 0;
	}
	if (budget) {
		bool miss = false;

		got = fast_spin(qp, iov, cnt, max, budget, adapt, &miss);
		if (got != -EAGAIN || !miss)
			return got;
	}
	got = mode == SOFT_FAST_POLL ? readv_poll(qp, iov, cnt) : readv_wait(qp->obj.fd, iov, cnt);
	/* quiet: a sleep that ran out (a poll ended by the wake eventfd
	 * leaves it as it was) */
	if (got != -EAGAIN)
		qp->fast_quiet = false;
	else if (mode == SOFT_FAST_RECV)
		qp->fast_quiet = true;
	return got;
}

int rr_soft_sock_fast_setup(int fd)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = SOFT_FAST_BLOCK_MS * 1000};

	/* Every other call on the socket passes MSG_DONTWAIT. Its status
	 * flags are ours, O_NONBLOCK alone (socket(2) and accept4(2) with
	 * SOCK_NONBLOCK): set, not read first (one system call less on the
	 * path from the MPA Reply to the first Call: issue 16 part AT). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    fcntl(fd, F_SETFL, 0) != 0)
		return -errno;
	return 0;
}

/* ----------------------------------------------------- connections -- */

/* TCP_NODELAY always (every FPDU is a whole message); the congestion
 * control RPCRDMA_SOFT_TCP_CC names, when set (checked at open:
 * rr_soft_sock_check_cc), else the system's. */
void rr_soft_sock_opts(struct soft_ctx *c, int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rr_soft_sock_accepted_opts(c, fd);
}

/* An accepted socket's: the congestion control alone. TCP_NODELAY it has
 * from its listening socket (rr_soft_sock_listen sets it there; Linux
 * clones the listener's TCP options into each connection it accepts), so
 * accept costs no setsockopt for it (issue 16 part BX;
 * soft_qp_socket_set_up_at_rts_both_sides checks both sides). */
void rr_soft_sock_accepted_opts(struct soft_ctx *c, int fd)
{
	if (c->tcp_cc[0])
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, c->tcp_cc, strlen(c->tcp_cc));
}

int rr_soft_sock_check_cc(struct soft_ctx *c, const char *name)
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

size_t rr_soft_sock_fpdu_max(int fd, int family)
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
	/* the socket's family: the caller's (its peer's address), else asked */
	if (family == AF_UNSPEC && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		family = ss.ss_family;
	if (family == AF_INET && getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) == 0 && mtu - 52 > mss)
		mss = mtu - 52;
	else if (family == AF_INET6 && getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &l) == 0 &&
		 mtu - 72 > mss)
		mss = mtu - 72;
	return (size_t)mss;
}

/* Writes a small frame completely (MPA frames are < 600 bytes). */
int rr_soft_sock_write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		struct iovec v = {(void *)b, n};
		ssize_t w = rr_soft_sock_writev(fd, &v, 1);

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

void rr_soft_sock_shutdown(struct soft_qp *qp)
{
	if (qp->obj.fd >= 0)
		shutdown(qp->obj.fd, SHUT_RDWR);
}

/* A listening socket on @addr (SO_REUSEADDR, TCP_NODELAY for the sockets
 * it accepts, non-blocking): its fd, or -errno. */
int rr_soft_sock_listen(const struct sockaddr *addr, socklen_t addrlen, int backlog)
{
	int fd, one = 1;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, addr, addrlen) != 0 ||
	    listen(fd, backlog > 0 ? backlog : RR_LISTEN_BACKLOG) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int rr_soft_sock_defer_accept(int lfd, unsigned secs)
{
	int v = (int)RR_MIN(secs, (unsigned)INT_MAX);
	socklen_t len = sizeof(v);

	if (setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v)) != 0 ||
	    getsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &len) != 0)
		return -errno;
	return v;
}

int rr_soft_sock_accept(int lfd, struct sockaddr_storage *peer, socklen_t *peerlen)
{
	int fd;

	*peerlen = sizeof(*peer);
	fd = accept4(lfd, (struct sockaddr *)peer, peerlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int rr_soft_sock_open(struct soft_ctx *c, int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	rr_soft_sock_opts(c, fd);
	return fd;
}

int rr_soft_sock_connect(int fd, const struct sockaddr *dst, socklen_t dstlen)
{
	if (connect(fd, dst, dstlen) != 0 && errno != EINPROGRESS)
		return -errno;
	return 0;
}

int rr_soft_sock_error(int fd)
{
	int err = 0;
	socklen_t l = sizeof(err);

	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
	return -err;
}

int rr_soft_sock_name(int fd, struct sockaddr_storage *ss, bool peer)
{
	socklen_t l = sizeof(*ss);
	int r = peer ? getpeername(fd, (struct sockaddr *)ss, &l)
		     : getsockname(fd, (struct sockaddr *)ss, &l);

	return r ? -errno : 0;
}
