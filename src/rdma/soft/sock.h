/* SPDX-License-Identifier: BSD-2-Clause */
/* Socket I/O of the soft provider (sock.c): the only place of src/rdma/soft/
 * that makes socket system calls. Functions return what they moved or 0, or
 * a negative errno. */
#ifndef RR_SOFT_SOCK_H
#define RR_SOFT_SOCK_H

#include "rdma/soft/soft.h"

/* Writes as much of @iov as the socket takes now: bytes written, -EAGAIN, or
 * a negative errno. */
ssize_t rr_soft_sock_writev(int fd, const struct iovec *iov, unsigned cnt);
/* Reads into @iov without blocking: bytes, 0 at EOF, -EAGAIN or -errno. */
ssize_t rr_soft_sock_readv(int fd, struct iovec *iov, unsigned cnt);
/* The fast waiter's read of @qp's socket (qp->fast_rd held, rx_lock not):
 * spins up to the context's budget, then sleeps in a blocking recv until
 * data, EOF, shutdown or the receive timeout (SOFT_FAST_BLOCK_MS: then
 * -EAGAIN), or (@mode SOFT_FAST_POLL) in poll(2) over the socket and the
 * CQ's wake eventfd for up to SOFT_FAST_BLOCK_MS. Also -EAGAIN when, while
 * spinning, a completion, an interrupt or a transmit backlog appears, or the
 * wake eventfd ends the poll (the caller looks at the CQ again). */
ssize_t rr_soft_sock_readv_fast(struct soft_qp *qp, struct iovec *iov, unsigned cnt, int mode);
/* How the fast reader of @qp sleeps next: SOFT_FAST_POLL when its
 * connection is quiet and the context's owner uses interrupts, else
 * SOFT_FAST_RECV. Inline: asked before every fast read. */
static inline int rr_soft_sock_fast_mode(const struct soft_qp *qp)
{
	return qp->fast_quiet && atomic_load_explicit(&qp->ctx->cm_intr, memory_order_relaxed) ?
		       SOFT_FAST_POLL : SOFT_FAST_RECV;
}
/* A connected socket made blocking with the fast wait's receive timeout:
 * 0, or -errno (then the QP never waits on it directly). */
int rr_soft_sock_fast_setup(int fd);
/* Makes the context's sockets use TCP congestion control @name (NULL or "":
 * the system's default): 0, -EINVAL (too long), -ENOENT (not available),
 * -EPERM (not in net.ipv4.tcp_allowed_congestion_control) or -errno. */
int rr_soft_sock_check_cc(struct soft_ctx *c, const char *name);
/* TCP_NODELAY and the context's congestion control on a new socket. */
void rr_soft_sock_opts(struct soft_ctx *c, int fd);
/* rr_soft_sock_opts for a socket accept4 returned from a listening socket
 * of rr_soft_sock_listen: what it does not inherit from it. */
void rr_soft_sock_accepted_opts(struct soft_ctx *c, int fd);
/* The FPDU size for a connected socket of address family @family
 * (AF_UNSPEC: asked of the socket): the path's MSS (one FPDU per TCP
 * segment, as siw). */
size_t rr_soft_sock_fpdu_max(int fd, int family);
/* Writes a small frame (an MPA Request, Reply or Reject) completely: 0 or
 * -errno. */
int rr_soft_sock_write_all(int fd, const uint8_t *b, size_t n);
/* Shuts the QP's socket down both ways (whoever reads it then sees EOF). */
void rr_soft_sock_shutdown(struct soft_qp *qp);
/* A non-blocking listening socket bound to @addr: its fd, or -errno. */
int rr_soft_sock_listen(const struct sockaddr *addr, socklen_t addrlen, int backlog);
/* TCP_DEFER_ACCEPT on listening socket @lfd for @secs seconds (0: off): a
 * connection is handed to accept only once its first data has come, or
 * when the deferral ends (the kernel rounds @secs up to a number of SYN-ACK
 * retransmissions: 1, 3, 7, 15, 31 s...; docs/security.md "Half-open
 * connections and TCP_DEFER_ACCEPT"). Returns the deferral the kernel
 * then holds, seconds (0: off), or -errno. */
int rr_soft_sock_defer_accept(int lfd, unsigned secs);
/* The next connection waiting on listening socket @lfd (non-blocking): its
 * fd, or -errno (-EAGAIN: none); its peer's address in *@peer, *@peerlen. */
int rr_soft_sock_accept(int lfd, struct sockaddr_storage *peer, socklen_t *peerlen);
/* A non-blocking TCP socket of @family with rr_soft_sock_opts: fd or -errno. */
int rr_soft_sock_open(struct soft_ctx *c, int family);
/* Starts connecting @fd to @dst: 0 (connected or in progress) or -errno. */
int rr_soft_sock_connect(int fd, const struct sockaddr *dst, socklen_t dstlen);
/* The error a connect in progress ended with: 0 or -errno (SO_ERROR). */
int rr_soft_sock_error(int fd);
/* The local (or with @peer the remote) address of @fd: 0 or -errno. */
int rr_soft_sock_name(int fd, struct sockaddr_storage *ss, bool peer);

#endif
