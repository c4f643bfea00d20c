/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's raw TCP backend, the floor the RPC transports are
 * compared with: a server with a thread per connection that answers each
 * [request length][response length] message with that many bytes, consumes
 * one-way streams, and on request waits the "pingspin" way (spin, then
 * sleep); the client side: ping-pongs of the sizes an RPC would have on TCP,
 * a one-way stream, and a pipeline of requests in flight. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench.h"

/* -- raw TCP server: a thread per connection --
 * [0xfffffffe][spin us] (answered with 4 bytes) makes the connection's
 * thread wait for the requests that follow as the client waits for the
 * responses: spin_read_full with that budget (the "pingspin" floor). */
static void *raw_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(MAXIO + 64);
	uint32_t h[2];
	struct spinner spin = {0, 0, 0};

	while (buf && spin_read_full(fd, h, 8, &spin) == 0) {
		uint32_t req = ntohl(h[0]), rsp = ntohl(h[1]);

		if (req == 0xfffffffeu) {
			uint32_t ack = 0;

			spin.us = rsp > BENCH_SPIN_MAX ? BENCH_SPIN_MAX : rsp;
			if (write_full(fd, &ack, 4))
				break;
			continue;
		}

		if (req == 0xffffffffu) {
			uint64_t total, got = 0;
			uint32_t ack = 0;

			if (read_full(fd, &total, 8))
				break;
			/* message-sized reads into a cache-warm buffer, like a
			 * receiver that consumes each message */
			uint32_t chunk;

			if (read_full(fd, &chunk, 4))
				break;
			chunk = ntohl(chunk);
			if (chunk == 0 || chunk > MAXIO)
				break;
			while (got < total) {
				size_t want = total - got < chunk ? (size_t)(total - got) : chunk;
				ssize_t r = read(fd, buf, want);

				if (r <= 0)
					goto out;
				got += (uint64_t)r;
			}
			if (write_full(fd, &ack, 4))
				break;
			continue;
		}
		if (req < 8 || req > MAXIO + 64 || rsp > MAXIO + 64)
			break;
		if (spin_read_full(fd, buf, req - 8, &spin) || write_full(fd, srcbuf, rsp))
			break;
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

void raw_server(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, raw_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

/* A raw TCP connection to the raw server. */
int raw_open(struct conn *c)
{
	c->fd = connect_loopback(tp_port[c->tp]);
	return c->fd < 0 ? c->fd : 0;
}

/* A raw connection becomes a "pingspin" one: both ends wait for each
 * message by spinning up to @us microseconds, then sleeping. */
int conn_set_spin(struct conn *c, unsigned us)
{
	uint32_t h[2] = {htonl(0xfffffffeu), htonl(us)}, ack;

	if (c->tp != TP_RAW)
		return -EINVAL;
	if (write_full(c->fd, h, 8) || read_full(c->fd, &ack, 4))
		return -EIO;
	c->spin.us = us;
	return 0;
}

static int raw_pingpong(int fd, uint32_t req, uint32_t rsp, uint8_t *buf, struct spinner *spin)
{
	uint32_t h[2] = {htonl(req), htonl(rsp)};
	struct iovec iov[2] = {{h, 8}, {srcbuf, req - 8}};
	ssize_t n = writev(fd, iov, 2);

	if (n < 0)
		return -errno;
	if ((size_t)n < req) {
		size_t done = (size_t)n;

		if (done < 8) {
			if (write_full(fd, (uint8_t *)h + done, 8 - done))
				return -EIO;
			done = 8;
		}
		if (write_full(fd, srcbuf + (done - 8), req - done))
			return -EIO;
	}
	return spin_read_full(fd, buf, rsp, spin) ? -EIO : 0;
}

/* One operation (conn_op) as a ping-pong of the sizes the RPC messages
 * would have on TCP. */
int raw_op(struct conn *c, int op, uint32_t size)
{
	uint32_t req = CALL_HDR, rsp = REPLY_HDR;

	if (op == 1)
		req += 4, rsp += 4 + XDR_ALIGN(size);
	else if (op == 2)
		req += 4 + XDR_ALIGN(size), rsp += 4;
	return raw_pingpong(c->fd, req, rsp, c->sink, &c->spin);
}

/* Raw one-way stream of @size-byte messages for the duration: MB/s. */
int raw_stream(int port, uint32_t size, struct rec *r)
{
	int fd = connect_loopback(port);
	uint64_t t0, now, total = 0, sent = 0;
	uint32_t h[2] = {htonl(0xffffffffu), 0}, ack;
	uint64_t msgs;

	if (fd < 0)
		return fd;
	/* calibrate: send in chunks of @size until the duration is over; the
	 * total is declared up front, so measure a short probe first */
	msgs = 4;
	for (int round = 0; round < 2; round++) {
		uint64_t tot = msgs * size;

		if (round == 1)
			cpu_begin(r);
		t0 = fs_now_ns();
		uint32_t chunk = htonl(size);

		if (write_full(fd, h, 8) || write_full(fd, &tot, 8) || write_full(fd, &chunk, 4))
			goto fail;
		for (uint64_t i = 0; i < msgs; i++)
			if (write_full(fd, srcbuf, size))
				goto fail;
		if (read_full(fd, &ack, 4))
			goto fail;
		now = fs_now_ns();
		if (round == 1)
			cpu_end(r, msgs);
		total = tot;
		sent = now - t0;
		if (round == 0) {
			double rate = (double)tot / ((double)sent / 1e9);
			double want = rate * dur;

			msgs = (uint64_t)(want / size);
			if (msgs < 4)
				msgs = 4;
			if (msgs * size > 64ull << 30)
				msgs = (64ull << 30) / size;
		}
	}
	close(fd);
	r->ops = msgs;
	r->secs = (double)sent / 1e9;
	r->mbps = (double)total / r->secs / 1e6;
	r->ops_s = (double)msgs / r->secs;
	return 0;
fail:
	close(fd);
	return -EIO;
}

/* Raw pipelining: @window requests in flight on one socket. */
int run_outstanding_raw(unsigned window, uint32_t size, struct rec *r)
{
	struct conn c;
	struct lat l;
	uint64_t *t0s, t0, end, ops = 0;
	uint32_t req = CALL_HDR + 4, rsp = REPLY_HDR + 4 + XDR_ALIGN(size);
	uint32_t h[2] = {htonl(req), htonl(rsp)};
	uint8_t msg[64];
	unsigned head = 0, inflight = 0;
	int rc;

	rc = conn_open(&c, TP_RAW);
	t0s = calloc(window, sizeof(*t0s));
	if (rc || !t0s) {
		free(t0s);
		conn_close(&c);
		return rc ? rc : -ENOMEM;
	}
	memset(msg, 0, sizeof(msg));
	memcpy(msg, h, 8);
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(dur * 1e9);
	for (; inflight < window; inflight++) {
		t0s[(head + inflight) % window] = fs_now_ns();
		if (write_full(c.fd, msg, req)) {
			rc = -EIO;
			break;
		}
	}
	while (!rc && inflight) {
		if (read_full(c.fd, c.sink, rsp)) {
			rc = -EIO;
			break;
		}
		lat_add(&l, fs_now_ns() - t0s[head]);
		head = (head + 1) % window;
		inflight--;
		ops++;
		if (fs_now_ns() < end) {
			t0s[(head + inflight) % window] = fs_now_ns();
			if (write_full(c.fd, msg, req))
				rc = -EIO;
			inflight++;
		}
	}
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	free(t0s);
	conn_close(&c);
	return rc;
}
