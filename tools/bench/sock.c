/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's loopback sockets: listening and connecting on 127.0.0.1,
 * and the reads and writes of whole messages that the raw TCP floor uses,
 * among them the reads that wait the way the soft provider's lone waiter
 * does (spin, then sleep: the "pingspin" floor). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

int listen_loopback(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

int connect_loopback(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One end of a "pingspin" connection waits the way the soft provider's
 * lone waiter does (src/rdma/soft: spin, then sleep): for each receive it
 * polls the socket with recv(MSG_DONTWAIT) for up to @us microseconds, then
 * blocks in recv. The same adaptation: after SPIN_MISSES budgets in a row
 * that ran out with nothing read, the next SPIN_SKIP receives block at once
 * (so two spinners sharing one CPU do not starve each other for the whole
 * budget on every message). */
#define SPIN_MISSES 4u
#define SPIN_SKIP 64u

static ssize_t spin_recv(int fd, void *buf, size_t n, struct spinner *sp)
{
	if (sp->us && sp->skip) {
		sp->skip--;
	} else if (sp->us) {
		uint64_t t0 = fs_now_ns();

		for (;;) {
			ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);

			if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				sp->miss = 0;
				return r;
			}
			if (fs_now_ns() - t0 >= (uint64_t)sp->us * 1000u)
				break;
		}
		if (++sp->miss >= SPIN_MISSES) {
			sp->miss = 0;
			sp->skip = SPIN_SKIP;
		}
	}
	return recv(fd, buf, n, 0);
}

/* Reads exactly @n bytes: 0, or -1 on EOF or error. Each receive goes
 * through spin_recv (@sp NULL or budget 0: a plain blocking read). */
int spin_read_full(int fd, void *buf, size_t n, struct spinner *sp)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = sp && sp->us ? spin_recv(fd, (uint8_t *)buf + done, n - done, sp)
					 : read(fd, (uint8_t *)buf + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int read_full(int fd, void *buf, size_t n)
{
	return spin_read_full(fd, buf, n, NULL);
}

int write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, (const uint8_t *)buf + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}
