/* Internal objects of the soft provider, shared by soft_verbs.c (objects,
 * work requests, the RDMAP state machine on top of the sans-I/O codecs) and
 * soft_io.c (the only file that touches sockets: TCP connection manager with
 * the MPA exchange, the progress thread, epoll, sendmsg/recvmsg).
 *
 * Threading (docs/soft-iwarp.md): post_send transmits in the caller's thread
 * (tx_lock). Each CQ owns an epoll fd (its public fd) over its QPs' sockets,
 * the ring's eventfd and a wake eventfd: rpcrdma_cq_wait sleeps in it and
 * receives in the waiting thread; poll_cq / get_event receive what is ready
 * (epoll_wait 0). One progress thread per context (epoll) does connection
 * setup and MPA timeouts, and serves the sockets of QPs whose CQs nobody
 * attends (no waiter, not armed, not polled for SOFT_LEASE_NS): passive
 * Read/Commit responders and Write targets; it sleeps until its next
 * deadline (ctx->sleep_until, soft_io_lease_check). A consumer that comes
 * back takes its QPs back (soft_io_reclaim). A lone waiter on a single-QP CQ sleeps in
 * the QP's recvmsg instead of epoll (fast wait, SOFT_FAST_BLOCK_MS; it reads
 * without rx_lock while qp->fast_rd, and a close waits for it). Lock order:
 * ctx->lock -> cq->qlock -> qp->rx_lock -> qp->tx_lock -> cq ring lock;
 * cq->qlock is never taken with rx_lock or tx_lock held. */
#ifndef RR_SOFT_H
#define RR_SOFT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "rdma/cq_ring.h"
#include "rdma/mr_table.h"
#include "rdma/provider.h"
#include "rdma/soft/ddp.h"
#include "rdma/soft/mpa.h"

#define SOFT_MAX_WR 4096
#define SOFT_MAX_SGE RR_DDP_MAX_SGE
#define SOFT_MAX_INLINE 4096
#define SOFT_MAX_IRD 128
#define SOFT_MAX_ORD 128
#define SOFT_DEFAULT_TIMEOUT_MS 10000u
#define SOFT_BATCH_FPDUS 64
#define SOFT_BATCH_IOV 1024
/* A batch that is one untagged FPDU of at most this many bytes on the wire
 * is copied into one buffer and sent with send(2) (RPCRDMA_SOFT_TXCOPY
 * overrides, 0 = never): cheaper than the kernel importing a 3-entry iovec
 * for a small Send. Tagged payloads are never copied. */
#define SOFT_TX_COPY_MAX 256
#define SOFT_STAGE 65536
/* bytes read behind a direct payload: pad + CRC + the next FPDU's header */
#define SOFT_STAGE_TAIL 64
/* bytes read when the parser wants a header: small FPDUs come whole */
#define SOFT_STAGE_LOOK 4096
/* A CQ polled, armed or waited on within this time is attended: its
 * consumer receives for its QPs; otherwise the progress thread does. */
#define SOFT_LEASE_NS 20000000ull
/* The progress thread sleeps until its next deadline (a handshake's MPA
 * timeout, the end of an attended CQ's lease) or without limit when there is
 * none; it may look up to SOFT_TICK_MS after a lease ended (the slack that
 * spares it a wake-up per consumer departure), and with an injected clock
 * (which may jump) it looks at least every SOFT_TICK_MS while any deadline
 * exists. docs/soft-iwarp.md "Idle progress thread". */
#define SOFT_TICK_MS 10
/* Fast wait (docs/soft-iwarp.md "Fast wait"): a lone waiter on a CQ with one
 * QP sleeps in a blocking recvmsg on the QP's socket (SO_RCVTIMEO) instead of
 * epoll_wait + recvmsg. Nothing can interrupt that sleep but data, EOF or
 * shutdown, so it is bounded: completions made by other threads meanwhile
 * are seen within SOFT_FAST_BLOCK_MS, and such an event turns the fast wait
 * off on that CQ for SOFT_FAST_COOLDOWN_NS (epoll waits, woken at once). */
#define SOFT_FAST_BLOCK_MS 5
#define SOFT_FAST_COOLDOWN_NS 1000000000ull
/* soft_cq.fast_blocked: a fast waiter sleeps in recv (nothing but data, EOF
 * or shutdown ends it: SOFT_FAST_RECV), or, on a context whose owner uses
 * interrupts and once the connection is quiet (its last sleep ended by its
 * timeout), in poll(2) over the socket and the CQ's wake eventfd, which
 * every other thread's event writes (SOFT_FAST_POLL; docs/soft-iwarp.md
 * "Interruptible sleep when quiet"). */
#define SOFT_FAST_RECV 1
#define SOFT_FAST_POLL 2
/* Spin, then sleep (docs/soft-iwarp.md "Spinning"): before that blocking
 * read a fast waiter polls the socket (recv MSG_DONTWAIT) for up to the
 * context's spin budget (rpcrdma_open_attr.spin_us, RPCRDMA_SOFT_SPIN_US,
 * default RPCRDMA_SPIN_US_DEFAULT). It adapts: after SOFT_SPIN_MISSES
 * budgets in a row that ran out with nothing read, the next SOFT_SPIN_SKIP
 * waits sleep at once, so an idle or oversubscribed waiter stops burning CPU
 * and tries again later. */
#define SOFT_SPIN_MISSES 4
#define SOFT_SPIN_SKIP 64
/* epoll tokens of a CQ's own eventfds (QP tokens are slot << 32 | gen) */
#define SOFT_TOK_RING UINT64_MAX
#define SOFT_TOK_WAKE (UINT64_MAX - 1)

/* RDMA Commit Response Status values (docs/soft-iwarp.md). */
#define SOFT_COMMIT_OK 0u
#define SOFT_COMMIT_NOT_DURABLE 1u   /* a region is not a durable registration */
#define SOFT_COMMIT_FLUSH_FAILED 2u  /* msync failed: data placed, not durable */

/* Process-wide counts of what soft QPs did with invalidatable registrations
 * (memory windows): binds executed, Local Invalidates executed, and Send
 * With Invalidate of a peer accepted (the window invalidated); and of the
 * spins of fast waiters (as soft_cq.spin_hits/_misses, for waits whose CQ
 * a test cannot reach, inside the RPC client). A Local Invalidate leaves no
 * trace on the wire; tests observe through these how a transport fenced
 * its windows (docs/testing.md). Relaxed atomics, never reset: a test
 * reads differences. */
struct soft_counters {
	_Atomic uint64_t mw_binds;
	_Atomic uint64_t local_invs;
	_Atomic uint64_t remote_invs;
	_Atomic uint64_t spin_hits;
	_Atomic uint64_t spin_misses;
};
extern struct soft_counters soft_counters;

struct soft_ctx;
struct soft_qp;

enum soft_obj_type { SOFT_OBJ_WAKE = 1, SOFT_OBJ_LISTEN, SOFT_OBJ_HANDSHAKE, SOFT_OBJ_QP };

struct soft_obj {
	enum soft_obj_type type;
	int fd;
	uint32_t events;
	bool in_epoll;
	struct soft_obj *prev, *next; /* ctx->live: objects in the epoll set */
};

struct soft_ctx {
	struct rr_context base;
	const struct rpcrdma_env *env;
	struct rr_mrt mrt;
	pthread_mutex_t lock;        /* objects, epoll registrations, CM state */
	pthread_t thread;
	bool thread_started, stop;
	int epfd;
	struct soft_obj wake;        /* eventfd */
	struct soft_id *ids;         /* every id, for timeouts */
	struct soft_obj live;        /* list head */
	uint32_t next_qpn;
	bool fast_wait;              /* fast waits allowed (RPCRDMA_SOFT_WAIT) */
	uint64_t spin_ns;            /* a fast waiter's spin budget; 0: none */
	char tcp_cc[16];             /* RPCRDMA_SOFT_TCP_CC, or "": the system's */
	uint32_t tx_copy_max;        /* SOFT_TX_COPY_MAX or RPCRDMA_SOFT_TXCOPY */
	pthread_mutex_t cq_lock;     /* cqs (a leaf lock: soft_chan_push) */
	struct soft_cq *cqs;         /* every CQ (cq_lock), for interrupts */
	/* The progress thread looks at its deadlines again by this time (the
	 * environment's clock), UINT64_MAX: not before something wakes it; 0:
	 * a wake-up is on its way. A consumer that leaves a CQ (its last
	 * waiter, a consumed arm, a reclaim) wakes it when that is too late
	 * for the CQ's lease (soft_io_lease_check). */
	_Atomic uint64_t sleep_until;
	/* rr_context_interrupt was used: the owner's CQ waits may end early,
	 * so CM events pushed to the context's channels interrupt them too */
	atomic_bool cm_intr;
	/* CLOCK_MONOTONIC_COARSE resolution when the default environment's
	 * clock is in use (leases and wait deadlines read the cheap coarse
	 * clock then); 0: always the environment's clock */
	uint64_t coarse_res_ns;
};

struct soft_pd {
	struct rr_pd base;
};

struct soft_mr {
	struct rr_mr base;
};

struct soft_mw {
	struct rr_mw base;
};

struct soft_cq_slot {
	struct soft_qp *qp;          /* NULL: free */
	uint32_t gen;
};

struct soft_cq {
	struct rr_cq base;
	struct rr_cq_ring ring;
	struct soft_ctx *ctx;
	int epfd;                    /* public fd: sockets + ring fd + wake fd */
	int wake_efd;                /* completions pushed by other threads
					while a consumer waits */
	atomic_int wake_pending;     /* a count may be left in wake_efd */
	pthread_mutex_t qlock;       /* slots */
	struct soft_cq_slot *slots;  /* QPs using this CQ (any number) */
	uint32_t nslots, slot_cap, gen;
	_Atomic uint64_t last_use_ns;
	atomic_int waiting;          /* threads inside rpcrdma_cq_wait */
	atomic_int handed;           /* its QPs served by the progress thread */
	uint32_t nlive;              /* QPs in slots (qlock) */
	/* fast wait: a waiter sleeps in recvmsg on a QP's socket (or polls
	 * it with wake_efd: SOFT_FAST_POLL); another thread's completion
	 * meanwhile turns it off until fast_off_until (SOFT_FAST_RECV only) */
	atomic_int fast_blocked;
	_Atomic uint64_t fast_off_until;
	_Atomic uint64_t fast_reads;   /* statistics: blocking reads done */
	_Atomic uint64_t spin_hits;    /* statistics: fast reads that found
					* data while spinning */
	_Atomic uint64_t spin_misses;  /* ... whose budget ran out */
	_Atomic uint64_t fast_foreign; /* events from other threads meanwhile */
	_Atomic uint64_t fast_wakes;   /* statistics: SOFT_FAST_POLL sleeps
					* ended by the wake eventfd */
	uint64_t fast_direct;          /* statistics: completions handed over
					* directly (written by the fast waiter) */
	atomic_int intr;             /* rr_context_interrupt latch */
	struct soft_cq *next_cq;     /* ctx->cqs (ctx->lock) */
};

enum soft_wqe_state { WQE_QUEUED = 0, WQE_INFLIGHT, WQE_AWAIT_RESP, WQE_DONE };

struct soft_wqe {
	uint64_t wr_id;
	enum rpcrdma_wr_opcode op;
	uint32_t flags;
	bool signaled;
	enum soft_wqe_state state;
	enum rpcrdma_wc_status status;
	uint32_t byte_len;
	uint32_t remote_status;
	uint32_t vendor_err;
	struct iovec iov[SOFT_MAX_SGE];
	unsigned iovcnt;
	uint32_t len;
	uint8_t *inline_buf;
	uint32_t stag;               /* remote STag / invalidate STag */
	uint64_t to;
	uint32_t sink_lkey;          /* Read: local sink */
	uint64_t sink_to;
	uint32_t rresp_done;
	uint32_t commit_id;
	uint8_t body[RR_RX_BODY_MAX];
	uint32_t body_len;
	/* bind / local invalidate */
	struct rr_mw *mw;
	struct rr_mr *mr;
	uint64_t bind_addr, bind_len;
	uint32_t bind_access;
};

/* An inbound Read or Commit Request waiting for its response (IRQ). */
struct soft_irqe {
	bool commit;
	uint32_t sink_stag;
	uint64_t sink_to;
	uint8_t *src;
	uint32_t len;
	uint32_t commit_id;
	unsigned nregions;
	struct rr_mrt_ref ref[RR_COMMIT_MAX_REGIONS];
	uint32_t rlen[RR_COMMIT_MAX_REGIONS];
	uint8_t body[RR_COMMIT_RESP_BODY];
	struct iovec iov0;
};

struct soft_rqe {
	uint64_t wr_id;
	struct iovec iov[SOFT_MAX_SGE];
	unsigned iovcnt;
};

enum soft_qp_state { QPS_IDLE = 0, QPS_RTS, QPS_ERROR };

struct soft_qp {
	struct rr_qp base;
	struct soft_obj obj;         /* fd once connected */
	struct soft_ctx *ctx;
	struct soft_pd *pd;
	struct soft_cq *scq, *rcq;
	uint64_t rtok, stok;         /* epoll tokens in rcq / scq */
	bool cq_watched;             /* socket in the CQs' epolls (rx+tx) */
	struct soft_id *id;
	enum soft_qp_state state;
	bool crc;
	/* RDMA Commit, enabled by the upper layer (RPCRDMA_CONN_COMMIT,
	 * rpcrdma_qp_set_commit): commit_rx serves incoming 0xC (rx.commit
	 * mirrors it, rx_lock), commit_tx permits posting (tx_lock). */
	bool commit_rx, commit_tx;
	uint16_t ird, ord;
	size_t fpdu_max;
	int last_err;
	bool disconnect_reported;
	bool rq_flushed;
	bool peer_term_valid;        /* the Terminate the peer sent us */
	struct rr_term peer_term;
	/* receive side (rx_lock) */
	pthread_mutex_t rx_lock;
	struct rr_ddp_rx rx;
	uint8_t *stage;
	size_t stage_off, stage_len;
	struct soft_rqe *rq;
	uint32_t rq_cap, rq_head, rq_count;
	/* send side (tx_lock) */
	pthread_mutex_t tx_lock;
	struct soft_wqe *sq;
	uint32_t sq_cap, sq_head, sq_count, sq_next; /* next = index (from head) to transmit */
	struct soft_irqe *irq;
	uint32_t irq_cap, irq_head, irq_count, irq_sent;
	uint32_t orq_out;            /* our Reads/Commits awaiting responses */
	uint32_t tx_msn[RR_QN_COUNT];
	uint32_t next_commit_id;
	/* the message being segmented */
	bool msg_active;
	bool msg_is_irq;
	struct rr_ddp_txmsg msg;
	/* the batch being written */
	struct rr_fpdu *fpdu;        /* SOFT_BATCH_FPDUS */
	struct iovec *biov;          /* SOFT_BATCH_IOV */
	unsigned bcnt, bpos;
	uint32_t b_sq_done;          /* SQ WQEs finished by this batch */
	uint32_t b_irq_done;
	bool want_out;
	bool term_pending;
	uint8_t term_fpdu[RR_TERM_FPDU_MAX];
	size_t term_len;
	uint8_t txcopy[SOFT_TX_COPY_MAX]; /* a small untagged FPDU, whole */
	uint64_t last_inline_ns;
	/* fast wait (rx_lock): fast_ok: the socket blocks (O_NONBLOCK off,
	 * SO_RCVTIMEO set; every other call passes MSG_DONTWAIT); fast_rd: a
	 * waiter reads the socket without rx_lock (nobody else reads it, the
	 * stage and the parser are its own until it relocks); fast_kill: the
	 * QP is closing, the reader leaves without parsing; fast_cv signals
	 * fast_rd cleared (with rx_lock). */
	bool fast_ok, fast_rd, fast_kill;
	/* the spin's adaptation (SOFT_SPIN_MISSES): the fast reader's own */
	uint16_t spin_miss, spin_skip;
	/* the fast reader's last sleep ended by its timeout with nothing
	 * read (the fast reader's own): the next one may be SOFT_FAST_POLL */
	bool fast_quiet;
	pthread_cond_t fast_cv;
};

enum soft_id_state {
	IDS_IDLE = 0,
	IDS_LISTEN,
	IDS_CONNECTING,      /* TCP connect in progress */
	IDS_AWAIT_REP,       /* request sent */
	IDS_AWAIT_REQ,       /* passive, waiting for the request */
	IDS_REQ_RCVD,        /* CONNECT_REQUEST delivered, waiting accept/reject */
	IDS_CONNECTED,
	IDS_CLOSED,
};

struct soft_chan {
	struct rr_cm_channel base;
	struct soft_ctx *ctx;
	pthread_mutex_t lock;
	int efd;
	struct rpcrdma_cm_event *evs;
	unsigned ev_cap, ev_head, ev_count;
	bool signaled;               /* efd written and not read back (lock) */
};

struct soft_id {
	struct rr_cm_id base;
	struct soft_obj obj;
	struct soft_ctx *ctx;
	struct soft_chan *ch;
	struct soft_id *next_all;
	struct soft_id *listen;      /* passive: the listener it came from */
	enum soft_id_state state;
	struct soft_qp *qp;
	struct rr_mpa_parser parser;
	struct rr_mpa_cfg cfg;
	struct rr_mpa_conn conn;
	struct rr_mpa_frame frame;   /* the peer's frame */
	bool commit;                 /* RPCRDMA_CONN_COMMIT on connect/accept */
	uint8_t out[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	size_t out_len, out_off;
	uint64_t deadline_ns;
	uint32_t timeout_ms;
	struct sockaddr_storage peer;
	socklen_t peerlen;
};

/* soft_io.c */
int soft_io_start(struct soft_ctx *ctx);
void soft_io_stop(struct soft_ctx *ctx);
void soft_io_wake(struct soft_ctx *ctx);
/* Writes as much of @iov as the socket takes now: bytes written, -EAGAIN, or
 * a negative errno. */
ssize_t soft_io_writev(int fd, const struct iovec *iov, unsigned cnt);
/* Reads into @iov without blocking: bytes, 0 at EOF, -EAGAIN or -errno. */
ssize_t soft_io_readv(int fd, struct iovec *iov, unsigned cnt);
/* The same, sleeping until data, EOF, shutdown or the socket's receive
 * timeout (SOFT_FAST_BLOCK_MS: then -EAGAIN). For fast waits only. */
ssize_t soft_io_readv_wait(int fd, struct iovec *iov, unsigned cnt);
/* The fast waiter's read of @qp's socket (qp->fast_rd held, rx_lock not):
 * spins up to the context's budget, then sleeps in soft_io_readv_wait, or
 * (@mode SOFT_FAST_POLL) in poll(2) over the socket and the CQ's wake
 * eventfd for up to SOFT_FAST_BLOCK_MS. Also -EAGAIN when, while spinning,
 * a completion, an interrupt or a transmit backlog appears, or the wake
 * eventfd ends the poll (the caller looks at the CQ again). */
ssize_t soft_io_readv_fast(struct soft_qp *qp, struct iovec *iov, unsigned cnt, int mode);
/* How the fast reader of @qp sleeps next: SOFT_FAST_POLL when its
 * connection is quiet and the context's owner uses interrupts, else
 * SOFT_FAST_RECV. */
int soft_io_fast_mode(const struct soft_qp *qp);
/* A connected socket made blocking with the fast wait's receive timeout:
 * 0, or -errno (then the QP never waits on it directly). */
int soft_io_fast_setup(int fd);
/* Makes the context's sockets use TCP congestion control @name (NULL or "":
 * the system's default): 0, -EINVAL (too long), -ENOENT (not available),
 * -EPERM (not in net.ipv4.tcp_allowed_congestion_control) or -errno. */
int soft_io_check_cc(struct soft_ctx *c, const char *name);
/* A fast-waiting reader of @qp (rx_lock held, released while waiting) is
 * made to leave before the socket is closed. */
void soft_io_fast_quiesce(struct soft_qp *qp);
/* A completion or transmit need arose in a thread other than the CQ's
 * fast-waiting one: no more fast waits on @q for a while. */
void soft_cq_fast_off(struct soft_cq *q);
void soft_io_want_out(struct soft_qp *qp, bool on);
/* Socket into / out of the CQs' epoll sets (rx_lock and tx_lock held). */
void soft_io_watch(struct soft_qp *qp);
void soft_io_unwatch(struct soft_qp *qp);
/* The CQ's epoll set (its public fd) with the ring's eventfd and a wake
 * eventfd; fini closes both. */
int soft_io_cq_init(struct soft_cq *q);
void soft_io_cq_fini(struct soft_cq *q);
/* Receives / transmits on the ready sockets of @q in the calling thread:
 * epoll_wait for up to @timeout_ms (0: what is ready now; -1: no limit).
 * @drain consumes the ring's notification too; @block waits for a QP's
 * locks instead of skipping it. Ready fds, 0, or -errno. */
int soft_io_cq_progress(struct soft_cq *q, int timeout_ms, bool drain, bool block);
/* Fast wait (SOFT_FAST_BLOCK_MS): when the calling waiter is the only one on
 * @q, @q has one connected QP (send and receive CQ both @q) with nothing to
 * transmit and the fast wait is not off, receives for it with a blocking
 * recvmsg and returns true (completions, if any, are in the ring); false
 * when the general epoll wait must be used. */
/* Completions a fast waiter receives for itself go straight into its
 * rpcrdma_cq_wait array (no ring push + poll) while the ring is empty and
 * not armed and room is left; see soft_cq_push. */
struct soft_direct {
	struct soft_cq *q;
	struct rpcrdma_wc *wc;
	int n, got;
};
bool soft_io_cq_fast_wait(struct soft_cq *q, struct soft_direct *d);
/* The non-blocking counterpart for poll_cq / get_event: on a CQ with one
 * connected QP (nothing to transmit), receives with one recvmsg instead of
 * epoll_wait(0) + recvmsg. false: use soft_io_cq_progress. */
bool soft_io_cq_fast_poll(struct soft_cq *q);
/* The interrupt op: latches every CQ of @ctx and wakes its waiters (a fast
 * waiter asleep in recvmsg sees it when its read ends, and the fast wait is
 * off on that CQ for SOFT_FAST_COOLDOWN_NS). From then on, every CM event
 * pushed to a channel of @ctx interrupts its CQs too, without the cool-down
 * (soft_chan_push; docs/soft-iwarp.md "CM events end CQ waits"). */
int soft_interrupt(struct rr_context *ctx);
/* @q's consumer may have left it (its last waiter left, a completion
 * consumed its arm, it took QPs back): wakes the progress thread when the
 * thread would look later than the end of @q's lease (+ SOFT_TICK_MS).
 * Callers store what changed (last_use_ns, waiting, the arm) first. */
void soft_io_lease_check(struct soft_cq *q);
/* qlock held: the live QP an epoll token names, or NULL. */
struct soft_qp *soft_cq_lookup(struct soft_cq *q, uint64_t tok);
/* The consumer of @q is back: its QPs leave the progress thread. */
void soft_io_reclaim(struct soft_cq *q);
bool soft_cq_attended(struct soft_cq *q, uint64_t now);
/* Appends a completion; wakes a consumer waiting in another thread. */
void soft_cq_push(struct soft_cq *q, const struct rpcrdma_wc *wc);
/* Calls @fn for every QP of @q; the caller holds q->qlock. */
void soft_cq_for_each_qp(struct soft_cq *q, void (*fn)(struct soft_qp *qp, void *arg), void *arg);
void soft_io_qp_closed(struct soft_qp *qp);
/* Shuts the QP's socket down both ways (the progress thread then sees EOF). */
void soft_io_shutdown(struct soft_qp *qp);
/* Reports DISCONNECTED (status @err) for the QP's id, once. */
void soft_io_report_disconnect(struct soft_qp *qp, int err);
void soft_chan_push(struct soft_chan *ch, const struct rpcrdma_cm_event *ev);
int soft_create_channel(struct rr_context *ctx, struct rr_cm_channel **out);
int soft_destroy_channel(struct rr_cm_channel *ch);
int soft_channel_fd(struct rr_cm_channel *ch);
int soft_get_event(struct rr_cm_channel *ch, struct rpcrdma_cm_event *ev);
int soft_listen(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		int backlog, void *user_ctx, struct rr_cm_id **out);
int soft_connect(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		 socklen_t dstlen, const struct rpcrdma_conn_param *param, void *user_ctx,
		 struct rr_cm_id **out);
int soft_accept(struct rr_cm_id *id, struct rr_qp *qp, const struct rpcrdma_conn_param *param);
int soft_reject(struct rr_cm_id *id, const void *data, uint16_t len);
int soft_disconnect(struct rr_cm_id *id);
int soft_destroy_id(struct rr_cm_id *id);
int soft_local_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);
int soft_peer_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);
int soft_conn_query(struct rr_cm_id *id, struct rpcrdma_conn_info *info);
int soft_query(struct rr_context *ctx, struct rpcrdma_caps *caps);

/* soft_verbs.c */
/* @commit_rx/@commit_tx enable Commit (added to what rpcrdma_qp_set_commit
 * already enabled). */
int soft_qp_connected(struct soft_qp *qp, int fd, const struct rr_mpa_conn *conn, bool commit_rx,
		      bool commit_tx);
int soft_set_commit(struct rr_qp *qp, bool enable);
/* Receives and processes what the socket holds. Returns 0, or a negative
 * errno once the connection is finished. */
int soft_qp_rx(struct soft_qp *qp);
/* The same for a fast wait: the first read sleeps (rx_lock is released
 * during it); returns with rx_lock RELEASED, and the QP may be gone then. */
int soft_qp_rx_fast(struct soft_qp *qp);
/* Transmits queued work; caller holds tx_lock. */
void soft_qp_tx_locked(struct soft_qp *qp);
void soft_qp_fatal(struct soft_qp *qp, int err, const struct rr_term *peer_term);

#endif
