/* SPDX-License-Identifier: BSD-2-Clause */
/* An rdma:// client's first connection, whose MPA exchange the creating
 * thread runs itself (issue 16 part G; src/transport/rdma/client.c,
 * rr_cm_connect_drive), against peers that do not complete it: a TCP
 * listener that never answers (the connect timeout, -ETIMEDOUT), one that
 * answers with an MPA Reject (-ECONNREFUSED) and one that closes after the
 * Request (a connection error). Each create fails with its error and
 * leaves nothing behind (ASan), and a good server is still reached
 * afterwards from the same process. */
#include "test.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"

#define PROG 0x2f5a00c7u

enum peer_mode { PEER_SILENT, PEER_REJECT, PEER_CLOSE };

struct peer {
	int lfd;
	enum peer_mode mode;
	int got;                 /* bytes of the MPA Request read */
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	int fd = accept(p->lfd, NULL, NULL);
	uint8_t buf[64];
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf));
	p->got = n > 0 ? (int)n : 0;
	if (p->mode == PEER_REJECT) {
		/* "MPA ID Rep Frame", R set, revision 1, no private data */
		static const uint8_t rej[20] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p',
						' ', 'F', 'r', 'a', 'm', 'e', 0x20, 1, 0, 0};

		if (write(fd, rej, sizeof(rej)) != (ssize_t)sizeof(rej))
			p->got = -1;
		/* the client closes on reading it */
		while (read(fd, buf, sizeof(buf)) > 0) {
		}
	}
	close(fd);
	return NULL;
}

static int peer_listen(struct peer *p, enum peer_mode mode)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);

	p->mode = mode;
	p->got = 0;
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(p->lfd >= 0);
	REQUIRE_EQ(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(p->lfd, 4), 0);
	REQUIRE_EQ(getsockname(p->lfd, (struct sockaddr *)&a, &l), 0);
	return ntohs(a.sin_port);
}

static int h_one(struct rpcrdma_req *req, void *ctx)
{
	(void)req;
	(void)ctx;
	return RPCRDMA_SVC_OK;
}

TEST(rdma_client_driven_connect_failures)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 5000, .connect_timeout_ms = 300,
					.no_reconnect = true};
	struct rpcrdma_client *c = NULL;
	char url[64];

	if (!rpcrdma_provider_available("soft")) {
		fprintf(stderr, "soft provider not built in: skipped\n");
		return;
	}
	/* a peer that accepts TCP and never answers: the connect timeout */
	{
		struct peer p;
		int port = peer_listen(&p, PEER_SILENT);

		snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
		CHECK_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), -ETIMEDOUT);
		CHECK(c == NULL);
		close(p.lfd);
	}
	/* an MPA Reject */
	{
		struct peer p;
		pthread_t t;
		int port = peer_listen(&p, PEER_REJECT);

		REQUIRE_EQ(pthread_create(&t, NULL, peer_main, &p), 0);
		snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
		o.connect_timeout_ms = 10000;
		CHECK_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), -ECONNREFUSED);
		CHECK(c == NULL);
		pthread_join(t, NULL);
		CHECK(p.got >= 20);   /* it read our Request */
		close(p.lfd);
	}
	/* a peer that closes after the Request */
	{
		struct peer p;
		pthread_t t;
		int port = peer_listen(&p, PEER_CLOSE);
		int rc;

		REQUIRE_EQ(pthread_create(&t, NULL, peer_main, &p), 0);
		snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
		rc = rpcrdma_client_create(url, PROG, 1, &o, &c);
		CHECK(rc < 0);
		CHECK(c == NULL);
		pthread_join(t, NULL);
		close(p.lfd);
	}
	/* the process still reaches a good server */
	{
		struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE};
		struct rpcrdma_server *s;
		struct rpcrdma_call *call;

		REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, 1, h_one, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_start(s), 0);
		snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
		REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
		REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
		CHECK_EQ(rpcrdma_call_run(call), 0);
		rpcrdma_call_destroy(call);
		rpcrdma_client_destroy(c);
		rpcrdma_server_destroy(s);
	}
}
