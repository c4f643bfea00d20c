/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's progress thread's epoll set (src/rdma/soft/lease.c):
 * an event read before its object left the set is dropped. The check the
 * thread makes per event (rr_soft_obj_live_since: the departures since its
 * wait, counted) must say what the walk over the whole set
 * (rr_soft_obj_live, what it was: O(objects in the set) per event) says,
 * for every object an event of that wait can name -- one in the set when
 * the thread forgot the departures before it, or added since: a
 * differential test over random adds and removals, fewer and more than the
 * departures counted (SOFT_GONE_MAX), objects leaving and coming back. */
#include "test.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma/soft/lease.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NOBJ 24

static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Objects of no type the thread acts on (never readable: an eventfd at
 * 0), added to and removed from a live context's set under its lock, as
 * the thread's own turn would between two waits. Fails when a departure
 * is not counted, when one that came back still counts, or when the
 * overflow does not fall back to the walk. */
TEST(soft_epoll_set_departures_equal_the_walk)
{
	struct net n;
	struct soft_ctx *c;
	struct soft_obj o[NOBJ];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	int differ = 0, over = 0, counted = 0, looked = 0;

	soft_net_up(&n, 16, 8);
	c = RR_CONTAINER_OF(RR_BASE(context, n.ctx), struct soft_ctx, base);
	for (int i = 0; i < NOBJ; i++) {
		o[i] = (struct soft_obj){.type = SOFT_OBJ_WAKE};
		o[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		REQUIRE(o[i].fd >= 0);
	}
	for (int round = 0; round < 400; round++) {
		bool eligible[NOBJ];
		int ops = (int)(rnd_next(&seed) % (round % 2 ? 40 : 12));

		pthread_mutex_lock(&c->lock);
		if (round % 4 == 1) /* all in the set, then all leave: more
				     * departures than counted */
			for (int i = 0; i < NOBJ; i++)
				rr_soft_obj_add(c, &o[i], EPOLLIN);
		rr_soft_gone_forget(c); /* the thread's wait begins */
		for (int i = 0; i < NOBJ; i++)
			eligible[i] = o[i].in_epoll;
		if (round % 4 == 1)
			for (int i = 0; i < NOBJ; i++)
				rr_soft_obj_del(c, &o[i]);
		for (int k = 0; k < ops; k++) {
			int i = (int)(rnd_next(&seed) % NOBJ);

			if (o[i].in_epoll) {
				rr_soft_obj_del(c, &o[i]);
			} else {
				rr_soft_obj_add(c, &o[i], EPOLLIN);
				CHECK(o[i].in_epoll);
				eligible[i] = true;
			}
		}
		if (c->gone_over)
			over++;
		else
			counted++;
		for (int i = 0; i < NOBJ; i++) {
			if (!eligible[i])
				continue; /* no event of this wait can name it */
			looked++;
			if (rr_soft_obj_live_since(c, &o[i]) != rr_soft_obj_live(c, &o[i]))
				differ++;
		}
		pthread_mutex_unlock(&c->lock);
	}
	CHECK_EQ(differ, 0);
	CHECK(over > 0);    /* both ways taken */
	CHECK(counted > 0);
	CHECK(looked > 1000);
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < NOBJ; i++)
		rr_soft_obj_del(c, &o[i]);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < NOBJ; i++)
		close(o[i].fd);
	soft_net_down(&n);
}
