/* Shared scaffolding of the end-to-end transport tests (tests/test_xprt_e2e.c,
 * tests/test_rrep_e2e.c, tests/test_verbsx.c, tests/test_push.c,
 * tests/test_xprt_rpc.c, tests/test_rpc_tcp.c, tests/test_rpc_wire.c,
 * tests/test_fast_server.c, tests/test_soft_idle.c): the soft-provider check,
 * millisecond sleeps, a named thread's wake-ups, loopback rr_tp endpoints, counter
 * waits, a responder request queue with its worker thread, and the ECHO/BULK
 * RPC handlers several tests register. Test code only; compiled into rr-tests
 * (tests/xprt_harness.c). */
#ifndef RR_TESTS_XPRT_HARNESS_H
#define RR_TESTS_XPRT_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "transport/rdma_tp.h"

/* True when the software iWARP provider is built in; otherwise marks the
 * test skipped (rr_test_mark_skipped: reported "skip", never "ok") and
 * returns false, and the test returns. */
bool rr_th_soft_ok(void);

void rr_th_sleep_ms(unsigned ms);

/* Voluntary context switches so far of this process's threads named @name
 * (/proc/self/task/N/status; the library names its threads: rr-soft, the
 * soft provider's progress thread; rr-rdma-srv, the rdma:// server loop);
 * -1 without /proc. */
long long rr_th_thread_wakeups(const char *name);

/* An rr_tp responder listening on 127.0.0.1, ephemeral port; @recv/@ctx as
 * for rr_tp_server_create. Returns 0 or a negative errno. */
int rr_th_tp_server(const struct rr_tp_conf *conf, rr_tp_recv_fn recv, void *ctx,
		    struct rr_tp_server **out);

/* An rr_tp requester connected to 127.0.0.1:@port. */
int rr_th_tp_client(const struct rr_tp_conf *conf, int port, rr_tp_complete_fn complete,
		    void *ctx, struct rr_tp_client **out);

/* Waits (about @ms plus up to 1 s) under @lock/@cond until *@count >= @n;
 * true when reached. */
bool rr_th_wait_count(pthread_mutex_t *lock, pthread_cond_t *cond, const unsigned *count,
		      unsigned n, unsigned ms);

/* Sets *@stop under @lock, wakes @cond and joins @worker. */
void rr_th_worker_stop(pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop,
		       pthread_t worker);

/* A requester over rr_tp: @done counts completions (under @lock). */
struct rr_th_cl {
	struct rr_tp_client *tp;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done;
};

/* Zeroes @c and connects it to 127.0.0.1:@port; @complete gets @c as ctx. */
int rr_th_cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port,
		   rr_tp_complete_fn complete);
void rr_th_cl_stop(struct rr_th_cl *c);
/* Waits as rr_th_wait_count until @n completions. */
bool rr_th_cl_wait(struct rr_th_cl *c, unsigned n, unsigned ms);

/* A responder's request queue drained by one worker thread that calls
 * @answer for each request (without the lock); with @hold set, arriving
 * requests are kept in @held instead until rr_th_sq_release_held. */
struct rr_th_sq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rr_tp_sreq *q[4096];
	unsigned head, tail;
	bool hold;
	struct rr_tp_sreq *held[1024];
	unsigned nheld;
	bool stop;
	pthread_t worker;
	void (*answer)(struct rr_th_sq *sq, struct rr_tp_sreq *r);
};

/* Initializes @sq (zeroed by the caller) with its lock and condition. */
void rr_th_sq_init(struct rr_th_sq *sq, void (*answer)(struct rr_th_sq *, struct rr_tp_sreq *));
/* Starts the worker thread. */
void rr_th_sq_start(struct rr_th_sq *sq);
/* rr_tp_recv_fn; @ctx is the struct rr_th_sq. */
void rr_th_sq_recv(void *ctx, struct rr_tp_sreq *r);
/* Requests held so far (read under the lock: the progress thread adds them). */
unsigned rr_th_sq_nheld(struct rr_th_sq *sq);
/* Clears hold and queues every held request. */
void rr_th_sq_release_held(struct rr_th_sq *sq);
/* Stops and joins the worker (it drains the queue first). */
void rr_th_sq_stop(struct rr_th_sq *sq);
/* Destroys the lock and condition (after the rr_tp server is gone). */
void rr_th_sq_destroy(struct rr_th_sq *sq);

/* A scripted rogue peer: a raw soft-provider QP connected to a responder,
 * 8 posted 4 KiB receive buffers (wr_id = index), one 4 KiB send buffer and,
 * when opened with a pull buffer, a 64 KiB RDMA Read target. */
struct rr_th_rogue {
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *id;
	uint8_t rbuf[8][4096];
	uint8_t sbuf[4096];
	uint8_t pull[65536];
	struct rpcrdma_mr *rmr, *smr, *pmr;
	bool disconnected;
};

/* Reposts receive buffer @i. */
void rr_th_rogue_post_recv(struct rr_th_rogue *g, unsigned i);
/* Zeroes @g and connects to 127.0.0.1:@port with private data @pd/@pdlen
 * (RFC 8797); @pull registers g->pull. 0, -ECONNREFUSED or -ETIMEDOUT. */
int rr_th_rogue_open(struct rr_th_rogue *g, int port, const uint8_t *pd, uint16_t pdlen,
		     bool pull);
void rr_th_rogue_close(struct rr_th_rogue *g);
/* Sends @len raw bytes from the rogue; waits up to @ms for a message back
 * into @out. Returns its length, 0 when nothing came, -1 when the
 * connection broke (a failed completion or a DISCONNECTED/ERROR event). */
int rr_th_rogue_xchg(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint8_t *out,
		     unsigned ms);
/* Posts a Send (With Invalidate of @inv when nonzero) and waits up to @ms
 * for a Receive (copied to @out) or, with @out NULL, for the Send's
 * completion only. Returns the received length, 0 (nothing), -1 (a failed
 * completion). CM events are left on the channel for the caller. */
int rr_th_rogue_send(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint32_t inv,
		     uint8_t *out, unsigned ms);

/* ECHO: u32 v -> u32 v + 1. */
int rr_th_h_echo(struct rpcrdma_req *r, void *ctx);

/* BULK: args = u32 seed, ddp opaque; checks data[i] == (seed + i) & 0xff and
 * returns u32 len, the same bytes as a DDP-eligible result referenced from the
 * request, u32 0x7a11. */
int rr_th_h_bulk_seeded(struct rpcrdma_req *r, void *ctx);

#endif
