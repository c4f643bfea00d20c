/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Internals of the RDMA transport's executor (transport/rdma/tp.h), shared
 * by its files: the endpoint both roles share (provider context, CM channel,
 * progress thread), one connection's provider resources (PD, CQ, QP,
 * Receive buffers, send slots) and the session that makes its protocol
 * decisions (proto/conn/conn.h), the client and the server objects, and the
 * work request ids. The executor turns the session's actions into provider
 * work requests and the provider's completions into session inputs; it
 * makes no protocol decision. Lock: one mutex per endpoint (ep->lock) held
 * around every session call. */
#ifndef RR_TRANSPORT_RDMA_TP_INT_H
#define RR_TRANSPORT_RDMA_TP_INT_H

#include <poll.h>
#include <pthread.h>

#include "common/listen.h"
#include "proto/conn/conn.h"
#include "rdma/provider.h"
#include "transport/rdma/tp.h"

/* Work request ids: type in the low 4 bits, index or pointer above. */
enum { WR_RECV = 1, WR_SEND = 2, WR_TOKEN = 3, WR_BIND = 4, WR_WRITE = 5, WR_PUSH = 6 };
#define WRID(t, v) (((uint64_t)(uintptr_t)(v) << 4) | (uint64_t)(t))
#define WRID_TOK(tok) (((uint64_t)(tok) << 4) | (uint64_t)WR_TOKEN)
#define WRTYPE(id) ((unsigned)((id) & 15u))
#define WRVAL(id) ((id) >> 4)
#define WRPTR(id) ((void *)(uintptr_t)WRVAL(id))

/* Receives a requester lends out as inline Replies at once. */
#define TP_LEND_MAX 4u
/* Deferred Replies (server, answered on the progress thread). */
#define SV_DEFER_WR 5u   /* a deferred Reply: up to 4 RDMA Writes + Send */
#define SV_DEFER_MAX 32u /* deferred Replies per connection before a post */
#define SV_DEFER_NS 200000u  /* nor older than this (slow inline handlers) */
#define TP_EXPO_MAX 64   /* push-mode regions per connection */

struct tp_ep;
struct tp_expo;

/* One connection (either role). */
struct tp_conn {
	struct tp_ep *ep;
	struct rr_conn *sess;        /* its session (client: the client's) */
	struct rr_conn_io io;        /* server: its session's actions (ctx: it) */
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_id *id;
	uint8_t *rbuf;
	struct rpcrdma_mr *rmr;
	uint32_t nrecv, rsize;
	uint8_t *sbuf;               /* send slots, then 4 zero bytes (pad source) */
	struct rpcrdma_mr *smr;
	uint32_t nsend, ssize;
	uint32_t *sfree;
	uint32_t nsfree;
	uint64_t *stoken;            /* per slot: the session's token of its Send */
	/* responder, Replies answered on the progress thread: their work
	 * requests per send slot (SV_DEFER_WR each), chained and posted at once
	 * after the batch of upcalls (sv_post_deferred). */
	struct rpcrdma_send_wr *dwr;
	struct rpcrdma_sge *dsge;
	uint32_t *dslot;             /* slots waiting, in answer order */
	uint32_t ndefer;
	uint64_t defer_t0;           /* ns: when the first of them was deferred */
	uint16_t ord;
	bool established, dead, use_mw;
	bool closing;                /* the session asked to end it (io close) */
	bool closing_idle;           /* closed for idleness: not a fatal error */
	bool serve;                  /* server loop: its CQ is served this turn */
	bool in_set;                 /* server loop: its CQ fd is in this turn's
					poll set */
	bool armed;                  /* server loop: armed by it since it last
					served the CQ (a notification wakes it) */
	bool signal_writes;          /* RDMA Writes signaled: see conn_new */
	int err;                     /* conn_new: what failed (conn_ok false) */
	bool in_wait;                /* a caller thread waits on cq unlocked: not freed */
	uint32_t lent;               /* Receives lent as rpc->reply */
	unsigned refs;               /* server: its own + iteration guards */
	struct tp_conn *next;
	struct sockaddr_storage peer; /* responder: the requester's address */
	bool has_peer;
	uint64_t last_rx_ns;         /* responder: its last Receive (idle) */
	bool commit;                 /* RDMA Commit negotiated and enabled */
	struct tp_expo *expo;        /* responder: exposed push-mode regions */
	struct rr_tp_bc *bcs;        /* responder: opened for backward Calls */
};

/* A server connection opened for backward Calls (tp.h). */
struct rr_tp_bc {
	struct tp_conn *cn;          /* NULL once the connection is gone */
	rr_tp_complete_fn complete;
	void *ctx;
	struct rr_tp_bc *next;       /* the connection's */
};

/* What both endpoint kinds share. */
struct tp_ep {
	struct rr_tp_conf conf;
	const struct rpcrdma_env *env;
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	int evfd;
	bool stop;
	bool defer;              /* server: Sends posted now may wait for the
				    end of the batch (sv_post_deferred) */
	struct rr_xprt_stats stats;
	bool is_server;
	bool adv_r;              /* the R bit we advertise */
	struct tp_conn *grave;   /* dead connections, freed by grave_sweep */
};

/* A push-mode operation of the client, waited for by its caller (push.c). */
struct tp_push_op {
	uint32_t seq;
	bool done;
	bool commit;
	enum rpcrdma_wc_status status;
	uint32_t remote_status;
	uint32_t len;
	struct tp_push_op *next;
};


struct rr_tp_client {
	struct tp_ep ep;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	rr_tp_complete_fn complete;
	void *cctx;
	struct rr_conn *sess;
	struct rr_conn_io io;
	struct tp_conn *conn;
	int connect_status;     /* 1 while the first connect is pending */
	uint64_t reconnect_at;  /* ns; 0: none scheduled */
	struct rr_conn_rpc *done, **done_tail;   /* completed, upcall pending */
	bool destroying;
	bool waiter;            /* a caller thread is receiving (rr_tp_client_wait) */
	struct rr_conn_rpc *wait_for; /* submit reserved the waiter role for it */
	struct tp_push_op *pushes;  /* push-mode operations in flight */
	uint32_t push_seq;
	/* backchannel: reverse Calls to the upper layer, without the lock */
	rr_tp_bc_recv_fn bc_recv;
	void *bc_ctx;
	bool bc_on;
	unsigned bc_running;        /* bc_recv upcalls running (unlocked) */
	struct rr_conn_sreq *bc_in, **bc_in_tail;
};

struct rr_tp_server {
	struct tp_ep ep;
	struct rpcrdma_cm_id *listen_id;
	int port;                /* listening port */
	bool stopping;           /* rr_tp_server_stop: refuse new connections */
	rr_tp_recv_fn recv;
	void *rctx;
	struct rr_conn_io io;
	struct tp_conn *conns;
	unsigned nconns;
	struct rr_conn_sreq *deliver, **deliver_tail;   /* upcall outside the lock */
	struct rr_conn_failed failed;   /* XIDs whose RDMA Read failed */
	uint64_t expo_seq;         /* ids of exposed push-mode regions */
	/* Replies of rr_tp_server_reply_async whose Send completed (or
	 * failed): their sent upcalls run without the lock (sv_sent_upcalls). */
	struct rr_conn_sreq *sent_head, **sent_tail;
	uint64_t rrep_bytes;       /* Read-chunk Reply bytes held, all
				      connections (reply_mem_total) */
	unsigned idle_waits;       /* progress: CQ waits in a row that got nothing */
	/* progress: poll(2) set, 2 + one fd per connection, grown with the
	 * connections (the loop's own; freed at destroy) */
	struct pollfd *pfd;
	struct tp_conn **pcns;
	unsigned pcap;             /* connections they hold */
	uint64_t idle_look_ns;     /* next idle sweep (sv_idle_sweep) */
	struct rr_listen_stats lstats_gone;   /* of the listener stop destroyed */
	/* backward Calls completed: their upcalls run without the lock
	 * (tp_sv_bc_upcalls) */
	struct rr_conn_rpc *bc_done, **bc_done_tail;
};

/* ep.c */
uint64_t tp_now_ns(const struct tp_ep *ep);
void tp_wake(struct tp_ep *ep);
bool tp_on_progress_thread(const struct tp_ep *ep);
int tp_ep_init(struct tp_ep *ep, const struct rr_tp_conf *conf, bool server,
	       const struct sockaddr *addr);
/* Starts @loop (the role's progress thread) with @ep as its argument. */
int tp_ep_start(struct tp_ep *ep, void *(*loop)(void *));
void tp_ep_stop(struct tp_ep *ep);
void tp_ep_fini(struct tp_ep *ep);
void tp_abs_deadline(struct timespec *ts, uint32_t ms);
/* What we advertise (RFC 8797 block + extension block). */
struct rr_pd_local tp_local_pd(const struct tp_ep *ep);
int tp_encode_pd(const struct tp_ep *ep, uint8_t *buf, size_t cap);
/* A session configuration for a connection of @ep. */
void tp_sess_config(const struct tp_ep *ep, struct rr_conn_config *cfg);

/* conn.c */
struct tp_conn *tp_conn_new(struct tp_ep *ep, uint32_t nrecv, uint32_t nsend);
bool tp_conn_ok(const struct tp_conn *cn);
void tp_conn_free(struct tp_conn *cn);
void tp_conn_bury(struct tp_conn *cn);
void tp_grave_sweep(struct tp_ep *ep);
int tp_post_recv(struct tp_conn *cn, uint32_t idx);
int tp_post_all_recvs(struct tp_conn *cn);
/* The session's io for connection @cn (server) or for whatever connection
 * the client has (tp_conn_of). */
extern const struct rr_conn_io tp_server_io;
extern const struct rr_conn_io tp_client_io;
/* Feeds a completion of @cn to its session. */
void tp_on_wc(struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* Posts the deferred Replies of @cn as one chain. */
void tp_post_deferred(struct tp_conn *cn);

/* progress.c */
int tp_drain_cq(struct tp_ep *ep, struct tp_conn *cn);
bool tp_arm_drain(struct tp_ep *ep, struct tp_conn *cn);
/* Unlocks, polls @pfd (pfd[0]: the eventfd, pfd[1]: the CM channel),
 * locks, and consumes the eventfd's wake-ups. */
void tp_poll(struct tp_ep *ep, struct pollfd *pfd, unsigned n, int timeout);

/* client.c */
void tp_cl_on_cm(struct rr_tp_client *c, const struct rpcrdma_cm_event *ev);
void tp_cl_conn_lost(struct rr_tp_client *c, struct tp_conn *cn);
int tp_cl_connect(struct rr_tp_client *c);
void tp_cl_schedule_reconnect(struct rr_tp_client *c, uint32_t delay_ms);
bool tp_cl_busy(const struct rr_tp_client *c);
bool tp_cl_needs_progress(const struct rr_tp_client *c, const struct tp_conn *cn);
int tp_cl_wait_once(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns);

/* server_conns.c */
void tp_sv_on_cm(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev);
/* Handles a few queued CM events (lock held): a storm of connection
 * requests does not keep the loop from the established connections. */
void tp_sv_cm_turn(struct rr_tp_server *s);
void tp_sv_conn_lost(struct rr_tp_server *s, struct tp_conn *cn);
void tp_sv_conn_put(struct rr_tp_server *s, struct tp_conn *cn);
void tp_sv_after_upcalls(struct rr_tp_server *s);
void tp_sv_timers(struct rr_tp_server *s, struct tp_conn *cn);
void tp_sv_idle_sweep(struct rr_tp_server *s);
void tp_sv_poll_grow(struct rr_tp_server *s);
void tp_sv_sent_upcalls(struct rr_tp_server *s);
/* Backward Calls' completion upcalls, without the lock (lock held on entry
 * and return). */
void tp_sv_bc_upcalls(struct rr_tp_server *s);

/* push_wc.c */
void tp_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc);
/* push_region.c */
void tp_expo_release_all(struct tp_conn *cn);

#endif
