/* SPDX-License-Identifier: BSD-2-Clause */
/* Socket I/O of tcp:// (tcp_io.h). Reading: the record marking decoder
 * (rm.h) says where the next bytes go (the 4-byte fragment header, or
 * the record buffer) and recv puts them there, through a read-ahead stage
 * so that a small record costs one system call (a server loop's stage is
 * shared: what one connection read ahead is parked in its own memory),
 * and on a server through its loop's bounce buffer for the bulk of a
 * large record, within a bound per call; every recv passes MSG_DONTWAIT
 * but the first of rr_tcp_read_wait (a tcp:// client caller asleep in recv
 * on its blocking socket); EAGAIN ends a read, EOF or an
 * error is -ECONNRESET. Writing: an RPC message (its inline bytes,
 * referenced DDP-eligible data and XDR pad, transport/xprt.h section 1) is
 * framed by the encoder as one fragment and sent with sendmsg, polling
 * when the socket buffer is full, or, for a caller that must not block,
 * resumed later from where it stopped (struct rr_tcp_send). */
#include "transport/tcp/tcp_io.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- record reader ---- */

void rr_tcp_reader_init(struct rr_tcp_reader *r, const struct rpcrdma_env *env, size_t max,
			size_t spare_max, struct rr_tcp_cache *pool, bool trust_len,
			bool skip_oversize)
{
	struct rr_rm_dec_conf dc = {
		.env = env,
		.max_record = max,
		.max_frags = rr_rm_frags_default(max),
		.skip_oversize = skip_oversize,
		.trust_len = trust_len,
	};

	memset(r, 0, sizeof(*r));
	rr_tcp_bufs_init(&r->bufs, env, spare_max, pool);
	dc.bufs = rr_tcp_bufs_provider(&r->bufs);
	rr_rm_dec_init(&r->dec, &dc);
}

void rr_tcp_reader_recycle(struct rr_tcp_reader *r, uint8_t *buf, size_t cap)
{
	rr_tcp_bufs_put(&r->bufs, buf, cap);
}

void rr_tcp_reader_fini(struct rr_tcp_reader *r)
{
	rr_rm_dec_fini(&r->dec);
	if (r->stage != r->shared)
		rr_free(r->bufs.env, r->stage);
	r->stage = r->shared = NULL;
	r->stage_cap = r->stage_off = r->stage_len = 0;
	rr_tcp_bufs_fini(&r->bufs);
}

int rr_tcp_reader_stage(struct rr_tcp_reader *r, size_t cap)
{
	r->stage = rr_alloc(r->bufs.env, cap);
	if (!r->stage)
		return -ENOMEM;
	r->stage_cap = cap;
	return 0;
}

void rr_tcp_reader_share_stage(struct rr_tcp_reader *r, uint8_t *buf, size_t cap)
{
	r->stage = r->shared = buf;
	r->stage_cap = r->shared_cap = cap;
	r->stage_off = r->stage_len = 0;
}

/* Back to the shared stage once the bytes parked in the reader's own
 * memory are read. */
static void stage_unpark(struct rr_tcp_reader *r)
{
	if (!r->shared || r->stage == r->shared || r->stage_off < r->stage_len)
		return;
	rr_free(r->bufs.env, r->stage);
	r->stage = r->shared;
	r->stage_cap = r->shared_cap;
	r->stage_off = r->stage_len = 0;
}

int rr_tcp_reader_park(struct rr_tcp_reader *r)
{
	size_t k = r->stage_len - r->stage_off;
	uint8_t *own;

	stage_unpark(r);
	if (!r->shared || r->stage != r->shared)
		return 0;   /* not shared, or parked already */
	if (!k) {
		r->stage_off = r->stage_len = 0;
		return 0;
	}
	own = rr_alloc(r->bufs.env, k);
	if (!own) {
		r->stage_off = r->stage_len = 0;
		return -ENOMEM;
	}
	memcpy(own, r->stage + r->stage_off, k);
	r->stage = own;
	r->stage_cap = k;
	r->stage_off = 0;
	r->stage_len = k;
	return 0;
}

void rr_tcp_reader_reset(struct rr_tcp_reader *r)
{
	rr_rm_dec_reset(&r->dec);
	r->stage_off = r->stage_len = 0;
	stage_unpark(r);
}

bool rr_tcp_reader_buffered(const struct rr_tcp_reader *r)
{
	return r->stage_off < r->stage_len;
}

/* recv() through the staging buffer: small reads fill the stage (one
 * syscall for header and body), large ones go to @dst, through the bounce
 * buffer while more than it holds is wanted. @flags: MSG_DONTWAIT, or 0 to
 * wait on a blocking socket (rr_tcp_read_wait). */
static ssize_t rm_recv(struct rr_tcp_reader *r, int fd, void *dst, size_t want, int flags)
{
	ssize_t n;
	size_t k;

	if (r->stage_off < r->stage_len) {
		k = RR_MIN(want, r->stage_len - r->stage_off);
		memcpy(dst, r->stage + r->stage_off, k);
		r->stage_off += k;
		return (ssize_t)k;
	}
	stage_unpark(r);   /* read empty: its own memory goes */
	if (!r->stage || want >= r->stage_cap / 2) {
		if (!r->bounce || want <= r->bounce_cap)
			return recv(fd, dst, want, flags);
		n = recv(fd, r->bounce, r->bounce_cap, flags);
		if (n > 0)
			memcpy(dst, r->bounce, (size_t)n);
		return n;
	}
	n = recv(fd, r->stage, r->stage_cap, flags);
	if (n <= 0)
		return n;
	k = RR_MIN(want, (size_t)n);
	memcpy(dst, r->stage, k);
	r->stage_off = k;
	r->stage_len = (size_t)n;
	return (ssize_t)k;
}

/* rr_tcp_read; with @wait, the first recv waits (a blocking socket's
 * SO_RCVTIMEO bounds it), every later one does not. */
static int tcp_read(struct rr_tcp_reader *r, int fd, bool wait)
{
	size_t turn = 0;   /* bytes this call took from the socket */
	int flags = wait ? 0 : MSG_DONTWAIT;

	for (;;) {
		uint8_t scratch[4096], *dst;
		size_t want;
		ssize_t n;
		int rc = rr_rm_dec_space(&r->dec, &dst, &want);

		if (rc)
			return rc;
		if (!dst) {   /* an oversized record's data, discarded */
			dst = scratch;
			want = RR_MIN(want, sizeof(scratch));
		}
		if (r->turn_max) {
			if (turn >= r->turn_max)
				return 0;   /* the loop's others first */
			want = RR_MIN(want, r->turn_max - turn);
		}
		n = rm_recv(r, fd, dst, want, flags);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -ECONNRESET;
		}
		flags = MSG_DONTWAIT;
		turn += (size_t)n;
		rc = rr_rm_dec_commit(&r->dec, (size_t)n);
		if (rc)
			return rc;
	}
}

int rr_tcp_read(struct rr_tcp_reader *r, int fd)
{
	return tcp_read(r, fd, false);
}

int rr_tcp_read_wait(struct rr_tcp_reader *r, int fd)
{
	return tcp_read(r, fd, true);
}

/* ---- record writer ---- */

/* Builds the pieces of the complete XDR message @m, in order: inline bytes,
 * each referenced item's data and its pad (transport/xprt.h section 1). */
static int build_iov(const struct rr_xprt_msg *m, struct iovec *iov)
{
	const uint8_t *pad = rr_xbuf_zero_pad();
	size_t off = 0;
	int n = 0;

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

int rr_tcp_send_init(struct rr_tcp_send *s, const struct rr_xprt_msg *m)
{
	struct iovec piece[RR_TCP_SEND_PIECES];
	int niov;

	if (!m->nddp && m->head_len <= RR_RM_MAX_FRAG) {
		/* inline bytes only (a NULL Call, a small Reply): the header
		 * and one piece, as rr_rm_enc_iov would frame them */
		rr_rm_put_header(s->marker[0], (uint32_t)m->head_len, true);
		s->iov[0].iov_base = s->marker[0];
		s->iov[0].iov_len = RR_RM_HDR_LEN;
		s->iov[1].iov_base = (void *)m->head;
		s->iov[1].iov_len = m->head_len;
		s->v = s->iov;
		s->niov = m->head_len ? 2 : 1;
		s->sent = 0;
		s->total = RR_RM_HDR_LEN + m->head_len;
		return 0;
	}
	/* one fragment: -EMSGSIZE above RR_RM_MAX_FRAG */
	niov = rr_rm_enc_iov(piece, (unsigned)build_iov(m, piece), RR_RM_MAX_FRAG, s->marker, 1,
			     s->iov, RR_TCP_SEND_IOV);
	if (niov < 0)
		return niov;
	s->v = s->iov;
	s->niov = niov;
	s->total = s->sent = 0;
	for (int i = 0; i < niov; i++)
		s->total += s->iov[i].iov_len;
	return 0;
}

/* Polls in slices of 100 ms while the socket buffer is full. */
int rr_tcp_send_more(int fd, struct rr_tcp_send *s, atomic_bool *cancel, int timeout_ms)
{
	int idle_ms = 0;

	while (s->sent < s->total) {
		struct msghdr mh = {.msg_iov = s->v, .msg_iovlen = (size_t)s->niov};
		ssize_t n;

		if (cancel && atomic_load(cancel))
			return s->sent ? -ECONNABORTED : -ECANCELED;
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -ECONNRESET;
			if (!timeout_ms)
				return -EAGAIN;
			if (idle_ms >= timeout_ms)
				return -ETIMEDOUT;
			if (poll(&pfd, 1, 100) == 0)
				idle_ms += 100;
			continue;
		}
		idle_ms = 0;
		s->sent += (size_t)n;
		while (n > 0 && s->niov > 0) {
			if ((size_t)n >= s->v->iov_len) {
				n -= (ssize_t)s->v->iov_len;
				s->v++;
				s->niov--;
			} else {
				s->v->iov_base = (uint8_t *)s->v->iov_base + n;
				s->v->iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

int rr_tcp_send_record(int fd, const struct rr_xprt_msg *m, atomic_bool *cancel, int timeout_ms)
{
	struct rr_tcp_send s;
	int rc = rr_tcp_send_init(&s, m);

	return rc ? rc : rr_tcp_send_more(fd, &s, cancel, timeout_ms);
}

void rr_tcp_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}


void rr_tcp_call_reset(struct rr_xprt_call *call)
{
	for (unsigned i = 0; i < RR_RPC_MAX_DDP; i++)
		call->placed[i] = RR_RPC_NOT_PLACED;
	call->reply = NULL;
	call->reply_len = 0;
	call->reply_buf = NULL;
	call->status = 0;
	call->xp_status = 0;
}
