/* SPDX-License-Identifier: BSD-2-Clause */
/* What a provider does with an asynchronous error of its device (verbs:
 * the context's async events, ibv_get_async_event(3); soft: its CQ overrun),
 * as one pure mapping that both providers follow (docs/rdma-provider.md
 * "Asynchronous errors"): which objects fail and the errno their
 * connections end with (the RPCRDMA_CM_DISCONNECTED status), or nothing. */
#ifndef RR_RDMA_ASYNC_EVENT_H
#define RR_RDMA_ASYNC_EVENT_H

/* The events a provider acts on, named by the library (verbs: the
 * ibv_event_type each stands for). */
enum rr_async_event {
	RR_ASYNC_OTHER = 0,      /* informational (COMM_EST, PORT_ACTIVE, ...) */
	RR_ASYNC_CQ_ERR,         /* IBV_EVENT_CQ_ERR: the CQ overran; soft: cq_lost */
	RR_ASYNC_QP_FATAL,       /* IBV_EVENT_QP_FATAL: the QP cannot go on */
	RR_ASYNC_QP_REQ_ERR,     /* IBV_EVENT_QP_REQ_ERR: the peer's request broke
				    the protocol (invalid request) */
	RR_ASYNC_QP_ACCESS_ERR,  /* IBV_EVENT_QP_ACCESS_ERR: the peer's access
				    violated a registration */
	RR_ASYNC_SRQ_ERR,        /* IBV_EVENT_SRQ_ERR: the shared receive queue failed */
	RR_ASYNC_SRQ_LIMIT,      /* IBV_EVENT_SRQ_LIMIT_REACHED: the low-water mark */
	RR_ASYNC_DEVICE_FATAL,   /* IBV_EVENT_DEVICE_FATAL: the device is gone */
};

/* Which objects an event fails. */
enum rr_async_scope {
	RR_ASYNC_NONE = 0,   /* nothing fails */
	RR_ASYNC_NOTE_SRQ,   /* the SRQ's limit event is noted (rpcrdma_srq_get_event) */
	RR_ASYNC_FAIL_CQ,    /* the CQ: for good (poll answers err, takes no new QP),
				every QP completing there to the error state */
	RR_ASYNC_FAIL_QP,    /* that QP to the error state */
	RR_ASYNC_FAIL_SRQ,   /* every QP taking Receives from that SRQ */
	RR_ASYNC_FAIL_ALL,   /* every QP of the context, and the CQs they complete on */
};

struct rr_async_action {
	enum rr_async_scope scope;
	int err;   /* negative errno the failed QPs' connections end with; 0: none */
};

/* The action for @ev. Pure: no state, no system call. */
struct rr_async_action rr_async_action(enum rr_async_event ev);

/* A short name of @ev for messages ("CQ error", ...). */
const char *rr_async_name(enum rr_async_event ev);

#endif
