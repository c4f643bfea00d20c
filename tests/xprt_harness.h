/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared scaffolding of the end-to-end transport tests (tests/transport:
 * test_xprt_e2e.c, test_reliable_reply_e2e.c, test_mr_fallback.c,
 * test_push_and_stats.c, test_server_cq_wait.c; tests/rpc: test_rdma_api.c,
 * test_rpc_api.c, test_tcp_wire.c; tests/soft/test_idle.c): the
 * soft-provider check, millisecond sleeps, a named thread's wake-ups,
 * loopback rr_tp endpoints, counter waits, a responder request queue with
 * its worker thread, rogue peers and their transport headers (struct rr_hdr
 * decoded and encoded as they are), and the ECHO/BULK RPC handlers several
 * tests register. Test code only; compiled into rr-tests
 * (tests/xprt_harness.c). */
#ifndef RR_TESTS_XPRT_HARNESS_H
#define RR_TESTS_XPRT_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/hdr.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "test.h"
#include "transport/rdma/tp.h"

/* True when the software iWARP provider is built in; otherwise marks the
 * test skipped (rr_test_mark_skipped: reported "skip", never "ok") and
 * returns false, and the test returns. */
bool rr_th_soft_ok(void);

void rr_th_sleep_ms(unsigned ms);

/* Voluntary context switches so far of this process's threads named @name
 * (/proc/self/task/N/status; the library names its threads: rr-soft, the
 * soft provider's progress thread; rr-progress-N, the engine's progress
 * threads); @name ending with '*': every thread whose name starts with the
 * rest (as for the functions below). -1 without /proc. */
long long rr_th_thread_wakeups(const char *name);
/* How many threads of this process are named @pattern (a trailing '*':
 * whose name starts with the rest); 0 without /proc. */
unsigned rr_th_threads_named(const char *pattern);
/* Runs @fn in a forked child (a process of its own: its own engine and
 * threads) and returns its result as the child's exit status; -1 when the
 * fork failed or the child did not exit (a crash). */
int rr_th_in_child(int (*fn)(void));

/* True when every thread of this process named @name is asleep (state S in
 * /proc/self/task/N/stat) and there is at least one; false otherwise or
 * without /proc. */
bool rr_th_thread_asleep(const char *name);
/* Until rr_th_thread_asleep(@name), at most @ms. */
bool rr_th_until_thread_asleep(const char *name, unsigned ms);
/* Until a thread named @name wakes up at most @max times in @window ms (its
 * loop went idle), at most @ms: true when it did. A window long enough that
 * a busy loop starved of CPU by a loaded machine still shows. */
bool rr_th_until_thread_idle(const char *name, long long max, unsigned window, unsigned ms);

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
	/* started on the test's thread: rr_th_cl_stop runs on a fatal check
	 * too (the client's threads call back into @c, on the test's stack) */
	struct rr_test_cleanup cleanup;
	bool cleanup_pushed;
};

/* A completion upcall that only counts (@ctx: the struct rr_th_cl). */
void rr_th_cl_count(void *ctx, struct rr_conn_rpc *rpc);
/* Zeroes @c and connects it to 127.0.0.1:@port; @complete gets @c as ctx.
 * Started on the test's thread, it is stopped by rr_th_cl_stop or by a
 * fatal check (rr_test_cleanup_push). */
int rr_th_cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port,
		   rr_tp_complete_fn complete);
void rr_th_cl_stop(struct rr_th_cl *c);
/* Waits as rr_th_wait_count until @n completions. */
bool rr_th_cl_wait(struct rr_th_cl *c, unsigned n, unsigned ms);

/* A small Call (12 bytes: XID, CALL, procedure 7) with room for a Reply of
 * 256 bytes; rr_th_small_fill zeroes @p and builds it, rr_th_small_submit
 * does that and submits it on @c. */
struct rr_th_small {
	struct rr_conn_rpc r;
	uint8_t call[12];
	struct rr_xprt_part part;
};
void rr_th_small_fill(struct rr_th_small *p, uint32_t xid);
void rr_th_small_submit(struct rr_th_cl *c, struct rr_th_small *p, uint32_t xid);

/* A responder's request queue drained by one worker thread that calls
 * @answer for each request (without the lock); with @hold set, arriving
 * requests are kept in @held instead until rr_th_sq_release_held. */
struct rr_th_sq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rr_conn_sreq *q[4096];
	unsigned head, tail;
	bool hold;
	struct rr_conn_sreq *held[1024];
	unsigned nheld;
	bool stop;
	pthread_t worker;
	void (*answer)(struct rr_th_sq *sq, struct rr_conn_sreq *r);
};

/* Initializes @sq (zeroed by the caller) with its lock and condition. */
void rr_th_sq_init(struct rr_th_sq *sq, void (*answer)(struct rr_th_sq *, struct rr_conn_sreq *));
/* Starts the worker thread. */
void rr_th_sq_start(struct rr_th_sq *sq);
/* rr_tp_recv_fn; @ctx is the struct rr_th_sq. */
void rr_th_sq_recv(void *ctx, struct rr_conn_sreq *r);
/* Requests held so far (read under the lock: the progress thread adds them). */
unsigned rr_th_sq_nheld(struct rr_th_sq *sq);
/* Clears hold and queues every held request. */
void rr_th_sq_release_held(struct rr_th_sq *sq);
/* Stops and joins the worker (it drains the queue first). */
void rr_th_sq_stop(struct rr_th_sq *sq);
/* Destroys the lock and condition (after the rr_tp server is gone). */
void rr_th_sq_destroy(struct rr_th_sq *sq);
/* Answers @r on @s with 16 bytes (its XID, REPLY, MSG_ACCEPTED, 0x600d)
 * and is done with it. */
void rr_th_answer16(struct rr_tp_server *s, struct rr_conn_sreq *r);
/* As rr_th_answer16, then 64 zero bytes: an 80-byte Reply, longer than
 * RR_CONN_REPLY_OWN, so that the client lends it its Receive (a Reply of
 * at most 64 bytes to a Call without sinks is copied into the call:
 * nothing lent). For the tests of lent Receives. */
void rr_th_answer80(struct rr_tp_server *s, struct rr_conn_sreq *r);

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
	/* Receives completed while only a Send was waited for: index,
	 * length; the next wait for a message takes them first */
	unsigned pend_idx[8], pend_len[8], npend;
	/* closes it when a fatal check ends the test first (an open rogue's
	 * buffers are registered with a live provider) */
	struct rr_test_cleanup cleanup;
	bool cleanup_pushed;
};

/* Reposts receive buffer @i. */
void rr_th_rogue_post_recv(struct rr_th_rogue *g, unsigned i);
/* Zeroes @g and connects to 127.0.0.1:@port with private data @pd/@pdlen
 * (RFC 8797); @pull registers g->pull. 0, -ECONNREFUSED or -ETIMEDOUT.
 * Once connected, a fatal check that ends the test closes it (a test
 * cleanup, popped by rr_th_rogue_close). */
int rr_th_rogue_open(struct rr_th_rogue *g, int port, const uint8_t *pd, uint16_t pdlen,
		     bool pull);
void rr_th_rogue_close(struct rr_th_rogue *g);
/* Sends @len raw bytes from the rogue; waits up to @ms for a message back
 * into @out. Returns its length, 0 when nothing came, -1 when the
 * connection broke (a failed completion or a DISCONNECTED/ERROR event). */
int rr_th_rogue_xchg(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint8_t *out,
		     unsigned ms);
/* Posts a Send (With Invalidate of @inv when nonzero) and waits up to @ms
 * for a Receive (copied to @out: the oldest not yet taken, also one that
 * came while an earlier call waited for its Send only) or, with @out NULL,
 * for the Send's completion only (a Receive meanwhile is kept for the next
 * call). Returns the received length, 0 (nothing), -1 (a failed
 * completion). CM events are left on the channel for the caller. */
/* Waits up to @ms for the next Receive, copied to @out: its length, 0
 * (nothing came), -1 (a failed completion). */
int rr_th_rogue_recv(struct rr_th_rogue *g, uint8_t *out, unsigned ms);
int rr_th_rogue_send(struct rr_th_rogue *g, const uint8_t *msg, size_t len, uint32_t inv,
		     uint8_t *out, unsigned ms);

/* A scripted rogue responder: listens on 127.0.0.1 (ephemeral port) and
 * serves one connection at a time on a raw soft-provider QP (a new CQ and
 * QP for each, one PD for all): RR_TH_RRESP_RECVS posted 4 KiB Receives
 * (wr_id = index), a 4 KiB send buffer and RR_TH_RRESP_DATA bytes at @data
 * registered for local and remote read and write: the source and sink of
 * its RDMA Writes and Reads, and the memory of a Read chunk it exposes
 * (@data_stag). It does what a responder may do and what no responder
 * should: Replies built by the caller, RDMA Reads and Writes of any STag,
 * Send With Invalidate of any STag. Test thread only (REQUIREs). */
#define RR_TH_RRESP_RECVS 16
#define RR_TH_RRESP_DATA (1u << 20)
struct rr_th_rresp {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *lid, *id;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_mr *rmr, *smr, *dmr;
	struct rpcrdma_mw *mw;   /* rr_th_rresp_window */
	uint8_t rbuf[RR_TH_RRESP_RECVS][4096];
	uint8_t sbuf[4096];
	uint8_t *data;
	uint32_t data_stag;
	int port;
	unsigned conns;          /* connections accepted so far */
	unsigned recvs;          /* Receives posted per connection (0: all
				    RR_TH_RRESP_RECVS); set before accepting */
	struct rpcrdma_cm_event req;  /* the last CONNECT_REQUEST (private data) */
	/* Receives completed while waiting for something else: index, length */
	uint32_t pend_idx[RR_TH_RRESP_RECVS], pend_len[RR_TH_RRESP_RECVS];
	unsigned npend;
	bool broken;             /* a completion failed on this connection */
	struct rr_test_cleanup cleanup;  /* rr_th_rresp_close on a fatal check */
};

/* Zeroes @g, listens. 0 or a negative errno. Open, it is closed by
 * rr_th_rresp_close or by a fatal check (the provider writes into @g's
 * posted Receives, wherever @g lives). */
int rr_th_rresp_open(struct rr_th_rresp *g);
/* Drops the connection (if any) and frees everything. */
void rr_th_rresp_close(struct rr_th_rresp *g);
/* Waits up to @ms for the next connection request (events of older
 * connections are passed over), drops the current connection, accepts with
 * private data @pd/@pdlen (RFC 8797; IRD/ORD 16) and waits for it to be
 * established. 0, -ETIMEDOUT, or a provider error. */
int rr_th_rresp_accept(struct rr_th_rresp *g, const uint8_t *pd, uint16_t pdlen, unsigned ms);
/* Runs @connect(@arg) -- a requester connecting to the rogue's port, which
 * returns once the connection is up -- on a thread of its own while the
 * rogue accepts with @pd/@pdlen (at most @ms): 0, or the first error. The
 * thread is not the test's: @connect must not REQUIRE. */
int rr_th_rresp_connect_with(struct rr_th_rresp *g, int (*connect)(void *arg), void *arg,
			     const uint8_t *pd, uint16_t pdlen, unsigned ms);
/* rr_th_rresp_connect_with for requester @c (rr_th_cl_start with @conf
 * and @complete). */
int rr_th_rresp_connect(struct rr_th_rresp *g, struct rr_th_cl *c, const struct rr_tp_conf *conf,
			rr_tp_complete_fn complete, const uint8_t *pd, uint16_t pdlen);
/* Disconnects and frees the current connection (the listener stays). */
void rr_th_rresp_drop(struct rr_th_rresp *g);
/* Waits up to @ms for the next message (in arrival order: one that came
 * while the rogue waited for something else is kept); copies it to @out
 * (4096 bytes) and reposts the Receive. Its length, -ETIMEDOUT, or -EPIPE
 * (a completion failed: the connection is gone). */
int rr_th_rresp_recv(struct rr_th_rresp *g, uint8_t *out, unsigned ms);
/* Sends @len bytes (Send With Invalidate of @inv when nonzero) and waits up
 * to @ms for the Send's completion: 0, -ETIMEDOUT, -EPIPE. */
int rr_th_rresp_send(struct rr_th_rresp *g, const uint8_t *m, size_t len, uint32_t inv,
		     unsigned ms);
/* Binds a memory window over [data + @off, + @len) on the current QP with
 * remote read (for a Read chunk a peer may invalidate); returns its STag,
 * its Tagged Offset in *@to. */
uint32_t rr_th_rresp_window(struct rr_th_rresp *g, uint32_t off, uint32_t len, uint64_t *to);
/* Touches the peer's memory: @write: an RDMA Write of @len bytes from
 * data + @loff to (@stag, @to), then a zero-length RDMA Read, which the peer
 * answers only after it placed the Write (a Write's own completion is local,
 * RFC 5040); else an RDMA Read of (@stag, @to, @len) into data + @loff.
 * Returns the status of the Read (RPCRDMA_WC_SUCCESS: the peer let it
 * through; an error: refused, *@vend = the Terminate's layer/type/code as
 * wc.vendor_err), or -ETIMEDOUT. A refusal ends the connection. */
int rr_th_rresp_rdma(struct rr_th_rresp *g, bool write, uint32_t stag, uint64_t to, uint32_t len,
		     uint32_t loff, uint32_t *vend, unsigned ms);

/* The transport header of a message a rogue peer received (@n bytes at
 * @m), decoded into @h as the transport core decodes a Call
 * (rr_xprt_hdr_limits: receive inline threshold @inline_max, 0 none):
 * rr_hdr_decode()'s result. */
int rr_th_hdr_call(struct rr_hdr *h, const uint8_t *m, int n, uint32_t inline_max);
/* @h encoded as it is, malformed ones too (rr_hdr_encode_raw: no Position
 * checks, h->vers as set), into @m (@cap bytes): its length, or -1. */
int rr_th_hdr_raw(const struct rr_hdr *h, uint8_t *m, size_t cap);

/* An RDMA Read by the rogue requester of @len bytes at (@stag, @off) into
 * g->pull (opened with a pull buffer): the completion's status
 * (RPCRDMA_WC_SUCCESS, or the peer's refusal: the connection then ends),
 * or -ETIMEDOUT after @ms. Receives met meanwhile are kept for the next
 * wait for a message. */
int rr_th_rogue_read(struct rr_th_rogue *g, uint32_t stag, uint64_t off, uint32_t len,
		     unsigned ms);

/* ECHO: u32 v -> u32 v + 1. */
int rr_th_h_echo(struct rpcrdma_req *r, void *ctx);
/* A synchronous ECHO call of procedure @proc (rr_th_h_echo's) on @c:
 * required to run; its result checked to be @v + 1. */
void rr_th_echo(struct rpcrdma_client *c, uint32_t proc, uint32_t v);

/* BULK: args = u32 seed, ddp opaque; checks data[i] == (seed + i) & 0xff and
 * returns u32 len, the same bytes as a DDP-eligible result referenced from the
 * request, u32 0x7a11. */
int rr_th_h_bulk_seeded(struct rpcrdma_req *r, void *ctx);

#endif
