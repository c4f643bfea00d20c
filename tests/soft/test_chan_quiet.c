/* SPDX-License-Identifier: BSD-2-Clause */
/* A quiet CM channel of the soft provider (rr_cm_channel_quiet,
 * src/rdma/provider.h; issue 16 part AZ): the events the quiet thread
 * queues itself (here: the server's ESTABLISHED that its accept makes) are
 * queued without making the channel's descriptor readable, the events
 * another thread queues meanwhile (the provider thread's ESTABLISHED of a
 * connecting client) make it readable as before, and ending the quiet
 * makes it readable when events are left. One thread at a time. */
#include "test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

struct other {
	struct rpcrdma_cm_channel *ch;
	int on, off;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;

	o->on = rr_cm_channel_quiet(o->ch, true);
	o->off = rr_cm_channel_quiet(o->ch, false);
	return NULL;
}

TEST(soft_chan_quiet_own_events_only)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *sch, *cch;
	struct rpcrdma_cm_id *l, *cid, *sid;
	struct soft_ep c, s;
	struct rpcrdma_cm_event ev;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct other o;
	pthread_t t;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	soft_ep_make(ctx, &c, 8, 1);
	soft_ep_make(ctx, &s, 8, 1);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &sch), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(ctx, &cch), 0);
	REQUIRE_EQ(rpcrdma_listen(sch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &l), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(l, &ss), 0);
	a.sin_port = ((struct sockaddr_in *)&ss)->sin_port;

	/* this thread keeps both channels quiet from here on */
	REQUIRE_EQ(rr_cm_channel_quiet(sch, true), 0);
	REQUIRE_EQ(rr_cm_channel_quiet(cch, true), 0);
	CHECK_EQ(rr_cm_channel_quiet(sch, true), -EBUSY);
	o.ch = sch;
	REQUIRE_EQ(pthread_create(&t, NULL, other_thread, &o), 0);
	pthread_join(t, NULL);
	CHECK_EQ(o.on, -EBUSY);   /* another thread's: not taken */
	CHECK_EQ(o.off, -EINVAL); /* nor ended by it */

	REQUIRE_EQ(rpcrdma_connect(cch, c.qp, (struct sockaddr *)&a, sizeof(a), NULL, NULL, &cid),
		   0);
	/* the provider thread accepts and reads the Request: its event makes
	 * the quiet channel readable */
	CHECK(soft_net_cm_readable(sch, 5000));
	REQUIRE_EQ(soft_net_get_cm(sch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	sid = ev.id;
	CHECK(!soft_net_cm_readable(sch, 0));
	REQUIRE_EQ(rpcrdma_accept(sid, s.qp, NULL), 0);
	/* the server's ESTABLISHED, queued by this thread's accept: queued,
	 * the descriptor left alone */
	CHECK(!soft_net_cm_readable(sch, 0));
	/* the client's, queued by the provider thread when it reads the
	 * Reply: readable although this thread keeps the channel quiet */
	CHECK(soft_net_cm_readable(cch, 5000));
	REQUIRE_EQ(soft_net_get_cm(cch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	CHECK_EQ(rr_cm_channel_quiet(cch, false), 0);
	CHECK(!soft_net_cm_readable(cch, 0)); /* nothing left: nothing signaled */
	/* the end of the quiet signals the event left on the server's */
	CHECK(!soft_net_cm_readable(sch, 0));
	CHECK_EQ(rr_cm_channel_quiet(sch, false), 0);
	CHECK(soft_net_cm_readable(sch, 0));
	REQUIRE_EQ(rpcrdma_cm_get_event(sch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	CHECK(ev.id == sid);
	CHECK(!soft_net_cm_readable(sch, 0));
	CHECK_EQ(rr_cm_channel_quiet(sch, false), -EINVAL); /* not quiet now */

	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(l), 0);
	soft_ep_free(&c);
	soft_ep_free(&s);
	CHECK_EQ(rpcrdma_cm_channel_destroy(cch), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(sch), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}
