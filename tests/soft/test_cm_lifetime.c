/* SPDX-License-Identifier: BSD-2-Clause */
/* Connection-manager lifetimes on the soft provider (include/rpcrdma/rdma.h,
 * src/rdma/provider.h): destroying an id drops the events still queued for
 * it (no consumer ever reads a destroyed id), a listener or channel
 * destroyed first frees the connections still waiting for their MPA Request
 * (RFC 5044 section 7.1) and the CONNECT_REQUESTs nobody consumed, and the
 * user_ctx given to listen/connect is set before the id can produce events.
 * Memory is counted by an allocator of the test (struct rpcrdma_env). */
#include "test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rpcrdma/env.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

struct cm_env {
	struct rpcrdma_env env;
	atomic_long live;
};

static void *ce_alloc(void *ctx, size_t size)
{
	struct cm_env *e = ctx;

	atomic_fetch_add(&e->live, 1);
	return malloc(size);
}

static void ce_free(void *ctx, void *ptr)
{
	struct cm_env *e = ctx;

	if (ptr)
		atomic_fetch_sub(&e->live, 1);
	free(ptr);
}

static uint16_t listen_port(struct rpcrdma_cm_channel *ch, void *uctx, struct rpcrdma_cm_id **l)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;

	REQUIRE_EQ(rpcrdma_listen(ch, (struct sockaddr *)&a, sizeof(a), 8, uctx, l), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(*l, &ss), 0);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static struct sockaddr_in loop_addr(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(port)};
	return a;
}

/* An ESTABLISHED event queued for an id that is destroyed before anyone
 * consumed it: get_event must not return it (it used to, and reading the
 * dead id's user_ctx was a use-after-free). */
TEST(soft_cm_destroy_id_drops_queued_events)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *sch, *cch;
	struct rpcrdma_cm_id *l, *cid, *sid;
	struct soft_ep c, s;
	struct rpcrdma_cm_event ev;
	int lmark, cmark;
	struct sockaddr_in a;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	soft_ep_make(ctx, &c, 8, 1);
	soft_ep_make(ctx, &s, 8, 1);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &sch), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &cch), 0);
	a = loop_addr(listen_port(sch, &lmark, &l));
	REQUIRE_EQ(rpcrdma_connect(cch, c.qp, (struct sockaddr *)&a, sizeof(a), NULL, &cmark, &cid), 0);
	REQUIRE_EQ(soft_net_get_cm(sch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	CHECK(ev.user_ctx == &lmark); /* the listener's, set before any event */
	sid = ev.id;
	REQUIRE_EQ(rpcrdma_accept(sid, s.qp, NULL), 0);
	/* the client's ESTABLISHED is queued: destroy its id unconsumed */
	REQUIRE(soft_net_cm_readable(cch, 5000));
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_get_event(cch, &ev), -EAGAIN);
	/* the server's ESTABLISHED (queued by accept: the channel is
	 * readable) and the DISCONNECTED that may follow: dropped with the id
	 * too */
	REQUIRE(soft_net_cm_readable(sch, 5000));
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_cm_get_event(sch, &ev), -EAGAIN);
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	soft_ep_free(&c);
	soft_ep_free(&s);
	CHECK_EQ(rpcrdma_cm_channel_destroy(cch), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(sch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* user_ctx of a connecting id is on its very first event. */
TEST(soft_cm_connect_user_ctx_on_first_event)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *l, *cid, *sid = NULL;
	struct soft_ep c, s;
	struct rpcrdma_cm_event ev;
	int cmark;
	struct sockaddr_in a;
	bool cest = false;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	soft_ep_make(ctx, &c, 8, 1);
	soft_ep_make(ctx, &s, 8, 1);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &ch), 0);
	a = loop_addr(listen_port(ch, NULL, &l));
	REQUIRE_EQ(rpcrdma_connect(ch, c.qp, (struct sockaddr *)&a, sizeof(a), NULL, &cmark, &cid), 0);
	while (!cest) {
		REQUIRE_EQ(soft_net_get_cm(ch, &ev), 0);
		if (ev.type == RPCRDMA_CM_CONNECT_REQUEST) {
			sid = ev.id;
			REQUIRE_EQ(rpcrdma_accept(sid, s.qp, NULL), 0);
		} else if (ev.id == cid) {
			CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
			CHECK(ev.user_ctx == &cmark);
			cest = true;
		}
	}
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	if (sid)
		CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	soft_ep_free(&c);
	soft_ep_free(&s);
	CHECK_EQ(rpcrdma_cm_channel_destroy(ch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* A listener destroyed while one connection waits for its MPA Request (a
 * raw TCP peer that sends its first byte and no more: one that sends
 * nothing would wait in the kernel, under the listener's TCP_DEFER_ACCEPT,
 * never accepted) and another's CONNECT_REQUEST sits
 * unconsumed: both are freed then, the channel can be destroyed and every
 * allocation of the context is returned. */
TEST(soft_cm_listener_destroy_frees_pending)
{
	struct cm_env ce = {{0}};
	struct rpcrdma_open_attr oa = {0};
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *sch, *cch;
	struct rpcrdma_cm_id *l, *cid;
	struct soft_ep c;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in a;
	int raw;
	char b;

	ce.env = *rpcrdma_env_default();
	ce.env.alloc = ce_alloc;
	ce.env.free = ce_free;
	ce.env.alloc_ctx = &ce;
	oa.env = &ce.env;
	REQUIRE_EQ(rpcrdma_open("soft", &oa, &ctx), 0);
	soft_ep_make(ctx, &c, 8, 1);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &sch), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &cch), 0);
	a = loop_addr(listen_port(sch, NULL, &l));
	raw = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(raw >= 0);
	{
		struct timeval tv = {3, 0}; /* a leaked connection stays silent */

		setsockopt(raw, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	REQUIRE_EQ(connect(raw, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(send(raw, "M", 1, MSG_NOSIGNAL), 1);
	REQUIRE_EQ(rpcrdma_connect(cch, c.qp, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &cid), 0);
	/* CONNECT_REQUEST queued: the listener took the connections in
	 * order, so the raw peer's (connected first) was accepted before it
	 * and waits in its MPA exchange */
	REQUIRE(soft_net_cm_readable(sch, 5000));
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	CHECK_EQ(rpcrdma_cm_get_event(sch, &ev), -EAGAIN);
	CHECK_EQ(rpcrdma_cm_channel_destroy(sch), 0);
	/* the raw peer sees its connection closed (EOF or reset), not a
	 * timeout */
	errno = 0;
	CHECK(recv(raw, &b, 1, 0) <= 0);
	CHECK(errno != EAGAIN && errno != EWOULDBLOCK);
	close(raw);
	/* the client's connection attempt ends */
	REQUIRE_EQ(soft_net_get_cm(cch, &ev), 0);
	CHECK(ev.type != RPCRDMA_CM_ESTABLISHED);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	soft_ep_free(&c);
	CHECK_EQ(rpcrdma_cm_channel_destroy(cch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
	CHECK_EQ(atomic_load(&ce.live), 0);
}
