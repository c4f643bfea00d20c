/* SPDX-License-Identifier: BSD-2-Clause */
/* The mapping of a device's asynchronous errors onto what a provider does
 * (async_event.h): a CQ error fails the CQ and its QPs with -EOVERFLOW (a
 * verbs CQ error is an overrun, as the soft provider's), a QP's fatal
 * error fails that QP (-EIO; -EPROTO when the peer's request broke the
 * protocol, -EACCES when its access broke a registration), an SRQ error
 * the QPs of that SRQ (-EIO), a device's fatal error everything
 * (-ENODEV); an SRQ's limit is noted; the rest is informational. */
#include "rdma/async_event.h"

#include <errno.h>

struct rr_async_action rr_async_action(enum rr_async_event ev)
{
	struct rr_async_action a = {RR_ASYNC_NONE, 0};

	switch (ev) {
	case RR_ASYNC_CQ_ERR:
		a.scope = RR_ASYNC_FAIL_CQ;
		a.err = -EOVERFLOW;
		break;
	case RR_ASYNC_QP_FATAL:
		a.scope = RR_ASYNC_FAIL_QP;
		a.err = -EIO;
		break;
	case RR_ASYNC_QP_REQ_ERR:
		a.scope = RR_ASYNC_FAIL_QP;
		a.err = -EPROTO;
		break;
	case RR_ASYNC_QP_ACCESS_ERR:
		a.scope = RR_ASYNC_FAIL_QP;
		a.err = -EACCES;
		break;
	case RR_ASYNC_SRQ_ERR:
		a.scope = RR_ASYNC_FAIL_SRQ;
		a.err = -EIO;
		break;
	case RR_ASYNC_SRQ_LIMIT:
		a.scope = RR_ASYNC_NOTE_SRQ;
		break;
	case RR_ASYNC_DEVICE_FATAL:
		a.scope = RR_ASYNC_FAIL_ALL;
		a.err = -ENODEV;
		break;
	case RR_ASYNC_OTHER:
	default:
		break;
	}
	return a;
}

const char *rr_async_name(enum rr_async_event ev)
{
	switch (ev) {
	case RR_ASYNC_CQ_ERR: return "CQ error";
	case RR_ASYNC_QP_FATAL: return "QP fatal error";
	case RR_ASYNC_QP_REQ_ERR: return "QP invalid request error";
	case RR_ASYNC_QP_ACCESS_ERR: return "QP access error";
	case RR_ASYNC_SRQ_ERR: return "SRQ error";
	case RR_ASYNC_SRQ_LIMIT: return "SRQ limit reached";
	case RR_ASYNC_DEVICE_FATAL: return "device fatal error";
	case RR_ASYNC_OTHER:
	default: return "informational event";
	}
}
