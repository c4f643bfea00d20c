/* SPDX-License-Identifier: BSD-2-Clause */
/* Registration of rpcrdma-nfsd's programs with the local rpcbind (RFC 1833
 * section 2.2: RPCBPROC_SET = 1, RPCBPROC_UNSET = 2 of RPCBPROG 100000
 * version 4). rpcbind accepts SET and UNSET only from its own host over its
 * AF_LOCAL socket (over TCP it refuses them unless started with -i or -L),
 * which librpcrdma's transports do not speak, so this file carries the one
 * Call itself: ONC RPC (RFC 5531) with AUTH_NONE, record marking (section
 * 11), over a stream AF_LOCAL socket; rpcbind takes the owner from the
 * socket's credentials. rpcbind then answers GETADDR (v3/v4) and, for the
 * "tcp" netid, PMAP GETPORT (v2) for the program.
 *
 *   Call:  xid CALL(0) 2 100000 4 proc  AUTH_NONE(0,0)  AUTH_NONE(0,0)
 *          rpcb: uint32 r_prog; uint32 r_vers; string r_netid;
 *                string r_addr (universal address "h1.h2.h3.h4.p1.p2");
 *                string r_owner
 *   Reply: xid REPLY(1) MSG_ACCEPTED(0) verf(flavor, opaque<400>)
 *          SUCCESS(0) bool */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nfsd.h"

#define RPCB_SOCK "/run/rpcbind.sock"
#define RPCB_PROG 100000u
#define RPCB_VERS 4u

struct wbuf {
	uint8_t b[512];
	size_t n;
	bool over;
};

static void w32(struct wbuf *w, uint32_t v)
{
	if (w->n + 4 > sizeof(w->b)) {
		w->over = true;
		return;
	}
	w->b[w->n++] = (uint8_t)(v >> 24);
	w->b[w->n++] = (uint8_t)(v >> 16);
	w->b[w->n++] = (uint8_t)(v >> 8);
	w->b[w->n++] = (uint8_t)v;
}

static void wstr(struct wbuf *w, const char *s)
{
	size_t l = strlen(s);

	w32(w, (uint32_t)l);
	if (w->n + ((l + 3) & ~(size_t)3) > sizeof(w->b)) {
		w->over = true;
		return;
	}
	memcpy(w->b + w->n, s, l);
	memset(w->b + w->n + l, 0, ((l + 3) & ~(size_t)3) - l);
	w->n += (l + 3) & ~(size_t)3;
}

static uint32_t r32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* reads exactly @n bytes within @ms */
static int read_full(int fd, uint8_t *p, size_t n, int ms)
{
	while (n > 0) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&pf, 1, ms) <= 0)
			return -ETIMEDOUT;
		r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int nfsd_rpcb(const char *sock, bool set, uint32_t prog, uint32_t vers, const char *netid,
	      int port)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct wbuf w = {.n = 4};
	uint8_t rep[1024];
	char uaddr[64];
	uint32_t xid, mark, len, pos, vlen;
	int fd, rc;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock ? sock : RPCB_SOCK);
	if (getrandom(&xid, sizeof(xid), 0) != sizeof(xid))
		xid = (uint32_t)time(NULL);
	snprintf(uaddr, sizeof(uaddr), "0.0.0.0.%d.%d", (port >> 8) & 0xff, port & 0xff);
	w32(&w, xid);
	w32(&w, 0);                    /* CALL */
	w32(&w, 2);                    /* RPC version */
	w32(&w, RPCB_PROG);
	w32(&w, RPCB_VERS);
	w32(&w, set ? 1u : 2u);        /* RPCBPROC_SET / RPCBPROC_UNSET */
	w32(&w, 0); w32(&w, 0);        /* cred AUTH_NONE */
	w32(&w, 0); w32(&w, 0);        /* verf AUTH_NONE */
	w32(&w, prog);
	w32(&w, vers);
	wstr(&w, netid);
	wstr(&w, set ? uaddr : "");
	wstr(&w, "rpcrdma-nfsd");
	if (w.over)
		return -EMSGSIZE;
	mark = 0x80000000u | (uint32_t)(w.n - 4);
	w.b[0] = (uint8_t)(mark >> 24);
	w.b[1] = (uint8_t)(mark >> 16);
	w.b[2] = (uint8_t)(mark >> 8);
	w.b[3] = (uint8_t)mark;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = write(fd, w.b, w.n) == (ssize_t)w.n ? 0 : -EIO;
	if (rc == 0)
		rc = read_full(fd, rep, 4, 3000);
	if (rc == 0) {
		len = r32(rep) & 0x7fffffffu;   /* one fragment expected */
		if (len < 24 || len > sizeof(rep))
			rc = -EBADMSG;
	}
	if (rc == 0)
		rc = read_full(fd, rep, len, 3000);
	close(fd);
	if (rc)
		return rc;
	/* xid REPLY MSG_ACCEPTED verf{flavor len body} SUCCESS bool */
	if (r32(rep) != xid || r32(rep + 4) != 1)
		return -EBADMSG;
	if (r32(rep + 8) != 0)
		return -EACCES;              /* MSG_DENIED */
	vlen = r32(rep + 16);
	if (vlen > 400)
		return -EBADMSG;
	pos = 20 + ((vlen + 3) & ~3u);
	if (len < pos + 8)
		return -EBADMSG;
	if (r32(rep + pos) != 0)
		return -EACCES;              /* not SUCCESS */
	if (r32(rep + pos + 4) > 1)
		return -EBADMSG;
	return r32(rep + pos + 4) == 1 ? 0 : -EACCES;
}
