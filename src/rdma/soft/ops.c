/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's ops table (src/rdma/provider.h), named by the
 * registry (src/rdma/providers.c) through soft_provider.h: which file
 * serves each op. */
#include "rdma/soft/soft_provider.h"

#include "rdma/soft/chan.h"
#include "rdma/soft/cm.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/cq_wait.h"
#include "rdma/soft/describe.h"
#include "rdma/soft/objects.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/srq.h"
#include "rdma/soft/tx.h"

const struct rr_provider_ops rr_soft_ops = {
	.name = "soft",
	.open = rr_soft_open,
	.close = rr_soft_close,
	.query = rr_soft_query,
	.alloc_pd = rr_soft_alloc_pd,
	.dealloc_pd = rr_soft_dealloc_pd,
	.reg_mr = rr_soft_reg_mr,
	.rereg_mr = rr_soft_rereg_mr,
	.dereg_mr = rr_soft_dereg_mr,
	.alloc_mw = rr_soft_alloc_mw,
	.dealloc_mw = rr_soft_dealloc_mw,
	.create_cq = rr_soft_create_cq,
	.destroy_cq = rr_soft_destroy_cq,
	.poll_cq = rr_soft_poll_cq,
	.wait_cq = rr_soft_wait_cq,
	.arm_cq = rr_soft_arm_cq,
	.cq_fd = rr_soft_cq_fd,
	.cq_get_event = rr_soft_cq_get_event,
	.create_qp = rr_soft_create_qp,
	.destroy_qp = rr_soft_destroy_qp,
	.post_send = rr_soft_post_send,
	.post_recv = rr_soft_post_recv,
	.post_send1 = rr_soft_post_send1,
	.create_srq = rr_soft_create_srq,
	.destroy_srq = rr_soft_destroy_srq,
	.post_srq_recv = rr_soft_post_srq_recv,
	.arm_srq_limit = rr_soft_arm_srq_limit,
	.srq_get_event = rr_soft_srq_get_event,
	.qp_recv_quota = rr_soft_qp_recv_quota,
	.create_channel = rr_soft_create_channel,
	.destroy_channel = rr_soft_destroy_channel,
	.channel_fd = rr_soft_channel_fd,
	.get_event = rr_soft_get_event,
	.channel_quiet = rr_soft_channel_quiet,
	.listen = rr_soft_listen,
	.connect = rr_soft_connect,
	.connect_drive = rr_soft_connect_drive,
	.accept = rr_soft_accept,
	.reject = rr_soft_reject,
	.disconnect = rr_soft_disconnect,
	.destroy_id = rr_soft_destroy_id,
	.local_addr = rr_soft_local_addr,
	.peer_addr = rr_soft_peer_addr,
	.conn_query = rr_soft_conn_query,
	.listen_limits = rr_soft_listen_limits,
	.listen_stats = rr_soft_listen_stats,
	.listen_shed = rr_soft_listen_shed,
	.listen_driven = rr_soft_listen_driven,
	.listen_drive = rr_soft_listen_drive,
	.set_commit = rr_soft_set_commit,
	.interrupt = rr_soft_interrupt,
	.wait_qp = rr_soft_wait_qp,
	.wait_cq_own = rr_soft_wait_cq_own,
	.cq_describe = rr_soft_cq_describe,
};
