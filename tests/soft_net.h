/* SPDX-License-Identifier: BSD-2-Clause */
/* Two endpoints of the soft provider in one process over loopback TCP, for
 * the provider tests (tests/soft/test_progress.c, tests/soft/test_fast_wait.c,
 * tests/soft/test_spin_then_sleep.c, tests/soft/test_idle.c): one context,
 * PD, CM channel with a listener on an ephemeral port, a client CQ and a
 * server CQ; queue pairs made on either CQ and connected pairwise through the
 * public CM calls (RFC 5044 MPA exchange underneath); work requests on the
 * registered buffer of soft_net_up_buf; a thread asleep in rpcrdma_cq_wait,
 * and looks at the provider's state behind a public CQ or QP. */
#ifndef RR_TESTS_SOFT_NET_H
#define RR_TESTS_SOFT_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpcrdma/rdma.h"

struct net {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *listen;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *ccq, *scq;
	uint16_t port;
	uint8_t *buf;              /* net_up_buf: @buf_len bytes, registered */
	uint32_t buf_len;
	struct rpcrdma_mr *mr;
};

/* The next CM event of @ch within RR_TEST_WAIT_MS at least: 0, or -ETIMEDOUT. */
int soft_net_get_cm(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev);
/* Whether @ch's descriptor signals an event within @ms (none consumed). */
bool soft_net_cm_readable(struct rpcrdma_cm_channel *ch, int ms);
/* Everything but buffers; CQs of @cqe entries, a listen backlog of @backlog. */
void soft_net_up(struct net *n, int cqe, int backlog);
/* soft_net_up plus @len zeroed bytes registered local + remote write. */
void soft_net_up_buf(struct net *n, int cqe, int backlog, uint32_t len);
void soft_net_down(struct net *n);
/* A context's clock that a test can hold still: while @held_ns is
 * non-zero the context reads it (its CQs' leases end only when the test
 * moves it), else the real monotonic clock. Atomic: the progress thread
 * and the test's waiters read it. soft_net_held_env() gives an environment
 * (the default one with this clock) for rpcrdma_open. */
struct soft_net_clock {
	_Atomic uint64_t held_ns;
};
uint64_t soft_net_real_now_ns(void);
void soft_net_held_env(struct rpcrdma_env *env, struct soft_net_clock *clk);
/* soft_net_up_buf with the context opened on @env (NULL: the default). */
void soft_net_up_env(struct net *n, int cqe, int backlog, uint32_t len,
		     const struct rpcrdma_env *env);
/* One endpoint of its own on @ctx: a PD, a CQ of 64 entries and a QP on
 * it with @depth work requests and @sge entries each way (the CM tests'
 * sides, which do not share struct net's PD). */
struct soft_ep {
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
};
void soft_ep_make(struct rpcrdma_context *ctx, struct soft_ep *e, uint32_t depth, uint32_t sge);
void soft_ep_free(struct soft_ep *e);
/* A QP whose send and receive CQ is @cq, @depth work requests each way. */
struct rpcrdma_qp *soft_net_qp(struct net *n, struct rpcrdma_cq *cq, uint32_t depth);
/* Starts connecting @cqp to the listener (rpcrdma_connect, no private
 * data); the id in *@cid. */
void soft_net_connect(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_cm_id **cid);
/* Connects @cqp to @sqp through the listener; returns the two ids. */
void soft_net_link(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid);
/* soft_net_qp on the client CQ (*@cqp) and on the server CQ (*@sqp), @depth
 * work requests each way, then soft_net_link. */
void soft_net_pair(struct net *n, uint32_t depth, struct rpcrdma_qp **cqp, struct rpcrdma_qp **sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid);
/* Undoes soft_net_pair: destroys @cid, @sid, then @cqp, @sqp (each checked). */
void soft_net_unpair(struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp, struct rpcrdma_cm_id *cid,
		     struct rpcrdma_cm_id *sid);

/* A receive of @len bytes at @off of n->buf (soft_net_up_buf), wr_id @id.
 * REQUIREd to post: the test's thread only. */
void soft_net_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			uint32_t len);
/* A work request @op of @len bytes at @off of n->buf, signaled when @sig;
 * an RDMA Write/Read targets @roff of n->buf through its rkey (ignored by
 * Sends). REQUIREd to post: the test's thread only. */
void soft_net_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff, bool sig);
/* The client's RDMA Read of @len bytes (at most 4096) of n->buf at 0,
 * filled with a pattern of @id and registered for remote reads, into n->buf
 * at 4096, wr_id @id, completes on n->ccq within RR_TEST_WAIT_MS with those bytes:
 * someone serves the server's socket. The test's thread only. */
void soft_net_read_check(struct net *n, struct rpcrdma_qp *c, uint64_t id, uint32_t len);
/* The same for any thread: rpcrdma_post_recv's / rpcrdma_post_send's
 * result. */
int soft_net_try_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			   uint32_t len);
int soft_net_try_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			   enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff,
			   bool sig);

/* A thread asleep in rpcrdma_cq_wait(@cq, one entry, @timeout_ms). */
struct soft_net_waiter {
	struct rpcrdma_cq *cq;
	int timeout_ms;
	bool again;                /* soft_net_wait_start_again */
	int rc;                    /* what the (last) wait returned */
	struct rpcrdma_wc wc;
	uint64_t ns;               /* how long the wait took */
	uint64_t end_ns;           /* when it returned (rr_now_ns) */
	pthread_t th;
};

/* Resets @w and starts its thread waiting on @cq. */
void soft_net_wait_start(struct soft_net_waiter *w, struct rpcrdma_cq *cq, int timeout_ms);
/* As soft_net_wait_start, but a wait that ends with nothing before its time
 * (a CM event of a context that uses interrupts ends CQ waits on it) is
 * waited again, as the RPC responder's loop does. */
void soft_net_wait_start_again(struct soft_net_waiter *w, struct rpcrdma_cq *cq, int timeout_ms);
/* Joins @w's thread; its results are then in @w. */
void soft_net_wait_join(struct soft_net_waiter *w);

/* The soft provider's objects behind the public handles (rdma/soft/soft.h). */
struct soft_cq;
struct soft_qp;
struct soft_cq *soft_net_cq_of(struct rpcrdma_cq *cq);
struct soft_qp *soft_net_qp_of(struct rpcrdma_qp *qp);
/* Whether the progress thread serves @qp's socket (read under its tx_lock,
 * where the hand-over changes it). */
bool soft_net_handed(struct rpcrdma_qp *qp);
/* Until a waiter sleeps in a fast read on @cq (true) or RR_TEST_WAIT_MS passed
 * (false). */
bool soft_net_until_fast_blocked(struct rpcrdma_cq *cq);
/* Until the progress thread of @ctx sleeps with no deadline at all (it
 * then holds no lease to end and no handshake to time out), or
 * RR_TEST_WAIT_MS. */
bool soft_net_until_thread_asleep(struct rpcrdma_context *ctx);
/* Until @n threads wait in rpcrdma_cq_wait on @cq, or RR_TEST_WAIT_MS passed. */
bool soft_net_until_waiting(struct rpcrdma_cq *cq, int n);
/* Until @qp's socket holds at least @bytes unread (FIONREAD), or 5 s (kept
 * short: tests/soft/test_receive_reads.c uses it as a condition that may
 * stay false, a round not counted). */
bool soft_net_until_socket_holds(struct rpcrdma_qp *qp, size_t bytes);
/* Bytes on the wire of an RDMA Send of @len bytes in one FPDU (MPA length,
 * untagged DDP/RDMAP header, payload, pad, CRC field: RFC 5044, 5041). */
size_t soft_net_send_fpdu(uint32_t len);

#endif
