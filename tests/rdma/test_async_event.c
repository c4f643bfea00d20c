/* SPDX-License-Identifier: BSD-2-Clause */
/* The asynchronous-error rule both providers follow (src/rdma/async_event.h):
 * which objects each device event fails and the errno their connections
 * end with, and (when the rdma-core provider is built) the translation of
 * every verbs event type onto it (verbs_async.c vb_async_event). No device
 * is needed: both are pure. What the verbs provider then does with a
 * device's real events is the lab's to exercise (docs/interop.md
 * "Asynchronous errors on verbs://"). */
#include <errno.h>

#include "rdma/async_event.h"
#include "test.h"

#ifdef RPCRDMA_HAVE_VERBS
#include "rdma/verbs/verbs.h"
#endif

TEST(rdma_async_event_actions)
{
	struct rr_async_action a;

	a = rr_async_action(RR_ASYNC_CQ_ERR);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_CQ);
	CHECK_EQ(a.err, -EOVERFLOW); /* as the soft provider's overrun */
	a = rr_async_action(RR_ASYNC_QP_FATAL);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_QP);
	CHECK_EQ(a.err, -EIO);
	a = rr_async_action(RR_ASYNC_QP_REQ_ERR);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_QP);
	CHECK_EQ(a.err, -EPROTO);
	a = rr_async_action(RR_ASYNC_QP_ACCESS_ERR);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_QP);
	CHECK_EQ(a.err, -EACCES);
	a = rr_async_action(RR_ASYNC_SRQ_ERR);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_SRQ);
	CHECK_EQ(a.err, -EIO);
	a = rr_async_action(RR_ASYNC_DEVICE_FATAL);
	CHECK_EQ(a.scope, RR_ASYNC_FAIL_ALL);
	CHECK_EQ(a.err, -ENODEV);
	a = rr_async_action(RR_ASYNC_SRQ_LIMIT);
	CHECK_EQ(a.scope, RR_ASYNC_NOTE_SRQ);
	CHECK_EQ(a.err, 0);
	a = rr_async_action(RR_ASYNC_OTHER);
	CHECK_EQ(a.scope, RR_ASYNC_NONE);
	CHECK_EQ(a.err, 0);
	/* a value no event has (a newer library's, memory gone bad): nothing */
	a = rr_async_action((enum rr_async_event)1000);
	CHECK_EQ(a.scope, RR_ASYNC_NONE);
	CHECK_EQ(a.err, 0);
	/* every failing action names an errno, every other none */
	for (int e = RR_ASYNC_OTHER; e <= RR_ASYNC_DEVICE_FATAL; e++) {
		a = rr_async_action((enum rr_async_event)e);
		CHECK((a.err < 0) == (a.scope >= RR_ASYNC_FAIL_CQ));
		CHECK(rr_async_name((enum rr_async_event)e)[0] != '\0');
	}
}

TEST(rdma_verbs_async_event_mapping)
{
#ifdef RPCRDMA_HAVE_VERBS
	static const struct {
		enum ibv_event_type t;
		enum rr_async_event e;
	} map[] = {
		{IBV_EVENT_CQ_ERR, RR_ASYNC_CQ_ERR},
		{IBV_EVENT_QP_FATAL, RR_ASYNC_QP_FATAL},
		{IBV_EVENT_QP_REQ_ERR, RR_ASYNC_QP_REQ_ERR},
		{IBV_EVENT_QP_ACCESS_ERR, RR_ASYNC_QP_ACCESS_ERR},
		{IBV_EVENT_SRQ_ERR, RR_ASYNC_SRQ_ERR},
		{IBV_EVENT_SRQ_LIMIT_REACHED, RR_ASYNC_SRQ_LIMIT},
		{IBV_EVENT_DEVICE_FATAL, RR_ASYNC_DEVICE_FATAL},
		/* informational: no object fails */
		{IBV_EVENT_COMM_EST, RR_ASYNC_OTHER},
		{IBV_EVENT_SQ_DRAINED, RR_ASYNC_OTHER},
		{IBV_EVENT_PATH_MIG, RR_ASYNC_OTHER},
		{IBV_EVENT_PATH_MIG_ERR, RR_ASYNC_OTHER},
		{IBV_EVENT_PORT_ACTIVE, RR_ASYNC_OTHER},
		{IBV_EVENT_PORT_ERR, RR_ASYNC_OTHER},
		{IBV_EVENT_LID_CHANGE, RR_ASYNC_OTHER},
		{IBV_EVENT_PKEY_CHANGE, RR_ASYNC_OTHER},
		{IBV_EVENT_SM_CHANGE, RR_ASYNC_OTHER},
		{IBV_EVENT_QP_LAST_WQE_REACHED, RR_ASYNC_OTHER},
		{IBV_EVENT_CLIENT_REREGISTER, RR_ASYNC_OTHER},
		{IBV_EVENT_GID_CHANGE, RR_ASYNC_OTHER},
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		CHECK_EQ(vb_async_event(map[i].t), map[i].e);
	/* the four the issue names end their connections with an errno */
	CHECK_EQ(rr_async_action(vb_async_event(IBV_EVENT_CQ_ERR)).err, -EOVERFLOW);
	CHECK_EQ(rr_async_action(vb_async_event(IBV_EVENT_QP_FATAL)).err, -EIO);
	CHECK_EQ(rr_async_action(vb_async_event(IBV_EVENT_QP_REQ_ERR)).err, -EPROTO);
	CHECK_EQ(rr_async_action(vb_async_event(IBV_EVENT_QP_ACCESS_ERR)).err, -EACCES);
	CHECK_EQ(vb_async_event((enum ibv_event_type)1000), RR_ASYNC_OTHER);
#else
	rr_test_skip("built without the rdma-core provider");
#endif
}
