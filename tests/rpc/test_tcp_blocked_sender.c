/* SPDX-License-Identifier: BSD-2-Clause */
/* A tcp:// Call submitted while another sender holds the socket (its
 * record larger than the socket takes, the peer not reading) is in the
 * client's XID table while it waits its turn, so its timeout aborts it:
 * rpcrdma_call_run returns -ETIMEDOUT once the other send gives the socket
 * up (src/transport/tcp/tcp_client.c tcp_clnt_submit: send_lock is only
 * tried before the call is in the table). A call that waited outside the
 * table would miss its abort and wait for a Reply forever. The peer is a
 * listening socket that never accepts: the connection completes in its
 * backlog and nothing is read. */
#include "test.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"

#define PROG 0x20000a13u
#define BIG ((size_t)8 * 1024 * 1024)

struct blocked {
	struct rpcrdma_client *c;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int big_rc, small_rc;
	bool big_done, small_done;
};

/* A caller thread's end: its call's result and "done", under the lock,
 * told to the test's waiter. */
static void *finished(struct blocked *b, int *rcp, bool *donep, int rc)
{
	pthread_mutex_lock(&b->lock);
	*rcp = rc;
	*donep = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static void *big_main(void *arg)
{
	struct blocked *b = arg;
	struct rpcrdma_call *call;
	uint8_t *data = calloc(1, BIG);
	int rc = -ENOMEM;

	if (data && rpcrdma_call_create(b->c, 1, &call) == 0) {
		rpcrdma_xdr_put_opaque(rpcrdma_call_args(call), data, (uint32_t)BIG);
		rpcrdma_call_set_timeout(call, 1500);
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	free(data);
	return finished(b, &b->big_rc, &b->big_done, rc);
}

static void *small_main(void *arg)
{
	struct blocked *b = arg;
	struct rpcrdma_call *call;
	int rc = -ENOMEM;

	if (rpcrdma_call_create(b->c, 0, &call) == 0) {
		rpcrdma_call_set_timeout(call, 300);
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	return finished(b, &b->small_rc, &b->small_done, rc);
}

/* Waits up to @s seconds for *@flag (b->lock held). */
static bool wait_flag(struct blocked *b, const bool *flag, int s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += s;
	while (!*flag && !pthread_cond_timedwait(&b->cv, &b->lock, &ts))
		;
	return *flag;
}

TEST(rpc_tcp_call_behind_a_blocked_sender_times_out)
{
	struct blocked b = {.big_rc = 1, .small_rc = 1};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	struct timespec pause = {0, 300000000};
	pthread_t bt, st;
	bool done;
	char url[64];
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	REQUIRE(lfd >= 0);
	REQUIRE_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	REQUIRE_EQ(listen(lfd, 4), 0);
	REQUIRE_EQ(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cv, NULL);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &b.c), 0);

	/* the big Call fills the socket and holds it */
	REQUIRE_EQ(pthread_create(&bt, NULL, big_main, &b), 0);
	nanosleep(&pause, NULL);   /* ordering only: the outcome is the same either way */
	REQUIRE_EQ(pthread_create(&st, NULL, small_main, &b), 0);

	pthread_mutex_lock(&b.lock);
	done = wait_flag(&b, &b.small_done, 20);
	CHECK(done);
	CHECK_EQ(b.small_rc, -ETIMEDOUT);
	CHECK(wait_flag(&b, &b.big_done, 20));
	CHECK_EQ(b.big_rc, -ETIMEDOUT);
	pthread_mutex_unlock(&b.lock);
	if (!done)
		return;   /* a thread still waits: nothing safe to free */
	pthread_join(bt, NULL);
	pthread_join(st, NULL);
	rpcrdma_client_destroy(b.c);
	close(lfd);
	pthread_mutex_destroy(&b.lock);
	pthread_cond_destroy(&b.cv);
}
