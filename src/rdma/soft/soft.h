/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal objects of the soft provider (user-space iWARP over TCP), shared
 * by its files, which are split by job as Linux siw is (docs/soft-iwarp.md
 * "Files"): objects.c (context, PD, MR, MW, QP), srq.c (shared receive
 * queues), cq.c and cq_wait.c (CQs and
 * their consumers), tx.c and rx.c (the RDMAP data path over the sans-I/O
 * codecs mpa.c, ddp.c, rdmap.c), cm.c and chan.c (connections and their
 * events), lease.c and progress.c (who serves a socket, the progress
 * thread), sock.c (every socket system call), ops.c (the ops table). Each
 * file's functions are declared in its own header; a file calls only files
 * below it in this order (no loop): ops -> objects -> progress -> cm ->
 * rx -> tx -> chan -> sock -> cq -> lease (cq_wait: below objects, above rx;
 * srq: below objects and rx, calls nothing).
 *
 * Threading (docs/soft-iwarp.md): post_send transmits in the caller's thread
 * (tx_lock). Each CQ owns an epoll fd (its public fd) over its QPs' sockets,
 * the ring's eventfd and a wake eventfd: rpcrdma_cq_wait sleeps in it and
 * receives in the waiting thread; poll_cq / get_event receive what is ready
 * (epoll_wait 0). One progress thread per context (epoll) does connection
 * setup and MPA timeouts, and serves the sockets of QPs whose CQs nobody
 * attends (no waiter, not armed, not polled for SOFT_LEASE_NS): passive
 * Read/Commit responders and Write targets; it sleeps until its next
 * deadline (ctx->sleep_until, rr_soft_lease_check). A consumer that comes
 * back takes its QPs back (cq_wait.c cq_reclaim). A lone waiter on a
 * single-QP CQ sleeps in the QP's recvmsg instead of epoll (fast wait,
 * SOFT_FAST_BLOCK_MS; it reads without rx_lock while qp->fast_rd, and a close
 * waits for it).
 *
 * Lock order (a thread holding a lock takes only locks to its right):
 * ctx->lock or pd->lock -> cq->qlock -> qp->rx_lock -> qp->tx_lock -> the
 * CQ ring's lock. An SRQ's lock (its ring) is a leaf taken with a QP's
 * rx_lock held; its list of QPs is under its PD's lock, which goes before
 * the QPs' rx_lock as for the PD's own QPs.
 * cq->qlock is never taken with rx_lock or tx_lock held;
 * pd->lock and ctx->lock are never held together. ch->lock (a channel's
 * event queue), ctx->cq_lock (the list of CQs) and the STag table's lock are
 * leaves: taken with any of the above held (rx_lock when a disconnect is
 * reported, ctx->lock when an id's events are purged), never one under
 * another. */
#ifndef RR_SOFT_H
#define RR_SOFT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "common/listen.h"
#include "common/spin_adapt.h"
#include "rdma/cq_ring.h"
#include "rdma/mr_table.h"
#include "rdma/provider.h"
#include "rdma/soft/ddp.h"
#include "common/lock.h"
#include "rdma/soft/mpa.h"

#define SOFT_MAX_WR 4096
#define SOFT_MAX_SGE RR_DDP_MAX_SGE
#define SOFT_MAX_INLINE 4096
#define SOFT_MAX_IRD 128
#define SOFT_MAX_ORD 128
/* MPA exchange timeout, both sides (siw: MPA_REQ timeout 10 s). */
#define SOFT_DEFAULT_TIMEOUT_MS 10000u
/* Connections one turn of the progress thread (or a listener's driver)
 * accepts at most: the handshakes of those accepted before are read in
 * between, so a burst of silent connections does not push a live one out
 * of the half-open limit before its MPA Request is read. A turn ends
 * sooner, after the first connection whose handshake ended at its accept
 * (rr_soft_cm_listen_ready). */
#define SOFT_ACCEPT_BATCH 32
#define SOFT_BATCH_FPDUS 64
#define SOFT_BATCH_IOV 1024
/* A QP's first batch arrays, in its own block: room for this many FPDUs
 * of the most pieces each (2.5 KiB, not the full batch's 38 KiB). A small
 * message never needs more; the first batch that a message's FPDUs fill
 * while more of it wait asks for the full arrays (qp->bgrow), which the
 * next batch takes when they can be had (a batch of the first size
 * otherwise: the same bytes on the wire, in more writes). Issue 16 part
 * CH: sized by need, not for a busy connection before its first message. */
#define SOFT_BATCH_FPDUS_FIRST 4
#define SOFT_BATCH_IOV_FIRST (SOFT_BATCH_FPDUS_FIRST * RR_FPDU_MAX_IOV)
/* The bounce buffer of durable Read Responses (qp->bnc): at most this many
 * payload bytes of them per batch. */
#define SOFT_BOUNCE (256u * 1024u)
/* A batch that is one untagged FPDU of at most this many bytes on the wire
 * is copied into one buffer and sent with send(2) (RPCRDMA_SOFT_TXCOPY
 * overrides, 0 = never): cheaper than the kernel importing a 3-entry iovec
 * for a small Send. Tagged payloads are never copied. */
#define SOFT_TX_COPY_MAX 256
/* Reads one receive pass makes on a socket at most (qp_rx): what is left is
 * read on the next readiness, after the other sockets of the thread. */
#define SOFT_RX_READS 64
/* bytes read behind a direct payload: pad + CRC + the next FPDU's header */
#define SOFT_STAGE_TAIL 64
/* Behind a payload of at least SOFT_TAIL_LONG_MIN bytes placed in one read,
 * the tail is SOFT_STAGE_TAIL_LONG: room for the trailer, a short last FPDU
 * of the same Write (under SOFT_PLACE_MIN: a 64 KiB Write is 65,463 + 73
 * bytes of payload on loopback) and a small Send behind it (the Reply), so
 * that they come with the payload's read and not in one read more. What it
 * brings of a long next payload is copied from the stage: at most
 * SOFT_STAGE_TAIL_LONG bytes per SOFT_TAIL_LONG_MIN placed (3 %); behind
 * shorter payloads (a link's small FPDUs) the short tail keeps that copy
 * small. */
#define SOFT_STAGE_TAIL_LONG 1024
#define SOFT_TAIL_LONG_MIN (32u * 1024u)
/* bytes read when the parser wants a header: small FPDUs come whole */
#define SOFT_STAGE_LOOK 4096
/* A payload remainder shorter than this is not read straight into place
 * but with the look-ahead, and copied from the stage: the short last FPDU
 * of an RDMA Write (a 64 KiB Write is 65,463 + 73 bytes of payload on
 * loopback) then comes in one read with its trailer and the Send behind
 * it, where the 64-byte tail left the Send for one read more (a copy of a
 * few hundred bytes costs less than a system call). */
#define SOFT_PLACE_MIN 512
_Static_assert(SOFT_PLACE_MIN < SOFT_STAGE_LOOK, "a short remainder fits the look-ahead");
/* The stage (qp->stage): what one read into it brings at most (qp_rx reads
 * SOFT_STAGE_LOOK, SOFT_STAGE_TAIL or SOFT_STAGE_TAIL_LONG bytes into it,
 * and only when the
 * parser took all it held before). It was 64 KiB, 60 of them never used. */
#define SOFT_STAGE SOFT_STAGE_LOOK
_Static_assert(SOFT_STAGE_TAIL <= SOFT_STAGE, "the tail read fits the stage");
_Static_assert(SOFT_STAGE_TAIL_LONG <= SOFT_STAGE, "the long tail read fits the stage");
_Static_assert(SOFT_STAGE_TAIL_LONG > SOFT_PLACE_MIN + 64, "a short remainder fits the long tail");
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
 * default RPCRDMA_SPIN_US_DEFAULT), the most it spins. By default
 * (RPCRDMA_SOFT_SPIN=adaptive) each QP's fast reader learns its budget
 * (soft_qp.spin_adapt, src/common/spin_adapt.c): misses and late hits halve
 * it down to 0, honest hits double it back, a probe's hit restores it.
 * With RPCRDMA_SOFT_SPIN=fixed the budget is the one set and adapts the
 * older way: after SOFT_SPIN_MISSES
 * budgets in a row that ran out with nothing read, the next SOFT_SPIN_SKIP
 * waits sleep at once, so an idle or oversubscribed waiter stops burning CPU
 * and tries again later. Only a spin that found data after an empty look
 * (a hit) resets that count: a read that finds data at its first look (the
 * rest of a message already in the socket) says nothing about whether
 * spinning pays, and reset it after every 64 KiB Reply, so a waiter whose
 * Replies always came after the budget spun it out on every call
 * (docs/PERFORMANCE.md "Issue 16 part AA"). */
#define SOFT_SPIN_MISSES 4
#define SOFT_SPIN_SKIP 64
/* The look after a Send (docs/soft-iwarp.md "The look after a Send"): the
 * poll that follows an arm reads once (recv MSG_DONTWAIT) the socket of the
 * QP its consumer last received for, when a Send went out on that QP since,
 * so that a Reply already there is taken without the consumer going back
 * to epoll_wait. Adaptive: after SOFT_LOOK_MISSES looks in a row that
 * completed nothing, the next SOFT_LOOK_SKIP polls after an arm do not look;
 * a look that completes something resets the count. */
#define SOFT_LOOK_MISSES 4
#define SOFT_LOOK_SKIP 64
/* epoll tokens of a CQ's own eventfds (QP tokens are slot << 32 | gen) */
#define SOFT_TOK_RING UINT64_MAX
#define SOFT_TOK_WAKE (UINT64_MAX - 1)

/* RDMA Commit Response Status values (docs/soft-iwarp.md). */
#define SOFT_COMMIT_OK 0u
#define SOFT_COMMIT_NOT_DURABLE 1u   /* a region is not a durable registration */
#define SOFT_COMMIT_FLUSH_FAILED 2u  /* msync failed: data placed, not durable */
#define SOFT_COMMIT_PAST_EOF 3u      /* a region reaches past the end of its
					file (it shrank): not durable */

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
	_Atomic uint64_t spin_ready;
	_Atomic uint64_t cq_overflows; /* completions lost to a full CQ ring
					  (cq.c rr_soft_cq_push) */
};
extern struct soft_counters soft_counters;

struct soft_ctx;
struct soft_qp;

enum soft_obj_type { SOFT_OBJ_WAKE = 1, SOFT_OBJ_LISTEN, SOFT_OBJ_HANDSHAKE, SOFT_OBJ_QP };

/* Objects that may leave the progress thread's epoll set during one turn
 * of it before its liveness check falls back to a walk over the set. */
#define SOFT_GONE_MAX 16

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
	_Atomic uint64_t qp_hands;   /* QPs handed to the thread's epoll set
					(rr_soft_qp_hand): tests read it */
	struct soft_obj wake;        /* eventfd */
	struct soft_id *ids;         /* every id */
	struct soft_id *timed;       /* the ids with a deadline: handshakes,
					listeners in back-off (and, until the
					next walk, ids that just left that) */
	struct soft_obj live;        /* list head */
	uint32_t next_qpn;
	bool fast_wait;              /* fast waits allowed (RPCRDMA_SOFT_WAIT) */
	uint64_t spin_ns;            /* a fast waiter's spin budget; 0: none */
	bool spin_adaptive;          /* RPCRDMA_SOFT_SPIN: the budget adapts per QP
					(common/spin_adapt.c), or fixed */
	char tcp_cc[16];             /* RPCRDMA_SOFT_TCP_CC, or "": the system's */
	uint32_t tx_copy_max;        /* SOFT_TX_COPY_MAX or RPCRDMA_SOFT_TXCOPY */
	uint32_t rx_reads;           /* SOFT_RX_READS or RPCRDMA_SOFT_PERTURB's */
	pthread_mutex_t cq_lock;     /* cqs (a leaf lock: rr_soft_chan_push) */
	struct soft_cq *cqs;         /* every CQ, for interrupts and the lease
					walk: changed with lock and cq_lock
					held, read with either */
	/* The progress thread looks at its deadlines again by this time (the
	 * environment's clock), UINT64_MAX: not before something wakes it; 0:
	 * a wake-up is on its way. A consumer that leaves a CQ (its last
	 * waiter, a consumed arm, a reclaim) wakes it when that is too late
	 * for the CQ's lease (rr_soft_lease_check). */
	_Atomic uint64_t sleep_until;
	/* (lock) When a QP's lease must be looked at next (rr_soft_balance;
	 * a wake-up of the thread looks at once): a handshake step is not a
	 * walk over every connected QP (the one it connected is balanced
	 * alone, rr_soft_balance_one). */
	uint64_t bal_next;
	/* (lock) connected QPs the walks looked at (rr_soft_balance, _all):
	 * tests read it */
	uint64_t bal_visits;
	/* (lock) the objects that left the epoll set since the progress
	 * thread last went to wait (rr_soft_obj_del; one that comes back,
	 * rr_soft_obj_add, is taken off), compared by address, never read:
	 * an event of one of them is dropped (rr_soft_obj_live_since).
	 * gone_over: more than SOFT_GONE_MAX left, the walk over live
	 * decides until the next wait. */
	struct soft_obj *gone[SOFT_GONE_MAX];
	uint32_t ngone;
	bool gone_over;
	/* a consumer left a CQ (rr_soft_lease_check): the wake-up that
	 * follows balances every connected QP; the other wake-ups (a new
	 * handshake's or QP's deadline) only look at the deadlines */
	atomic_bool bal_wanted;
	/* rr_context_interrupt was used: the owner's CQ waits may end early,
	 * so CM events pushed to the context's channels interrupt them too */
	atomic_bool cm_intr;
	/* The placement fence (tx.c rr_soft_place_*): the QPs writing a piece
	 * of a tagged payload into registered memory right now (each under
	 * its STag, qp->place_stag), so that an invalidation can wait for the
	 * pieces through its STag that passed their check before it.
	 * place_lock is a leaf (the STag table's lock is taken under it).
	 * place_gen counts the STags invalidated or freed (every fence adds
	 * one, under place_lock): a segment whose STag was checked at a
	 * generation still current needs no new check for its next piece. */
	pthread_mutex_t place_lock;
	pthread_cond_t place_cv;     /* a piece ended and a fence waits */
	atomic_uint place_waiters;   /* changed under place_lock */
	struct soft_qp *placing;     /* QPs in a tagged message: qp->place_next */
	_Atomic uint64_t place_gen;
	/* CLOCK_MONOTONIC_COARSE resolution when the default environment's
	 * clock is in use (leases and wait deadlines read the cheap coarse
	 * clock then); 0: always the environment's clock */
	uint64_t coarse_res_ns;
};

/* A PD knows its QPs: deregistering memory of the PD looks at what they
 * are still doing with it (soft_pd_revoke). Lock order: pd->lock before a
 * QP's rx_lock. */
struct soft_srq;

struct soft_pd {
	struct rr_pd base;
	pthread_mutex_t lock;
	struct soft_qp *qps;         /* qp->pd_next */
	struct soft_srq *srqs;       /* srq->pd_next: their QPs see a revoke of
					this PD's memory too */
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
	uint32_t need;               /* completions it may have outstanding on
					the CQ (cq.c cq_need), in reserved */
};

struct soft_cq {
	struct rr_cq base;
	struct rr_cq_ring ring;
	struct soft_ctx *ctx;
	int epfd;                    /* public fd: sockets + ring fd + wake fd */
	int wake_efd;                /* completions pushed by other threads
					while a consumer waits */
	atomic_int wake_pending;     /* a count may be left in wake_efd */
	/* Armed and not polled, waited on or got_event since: the next poll
	 * takes the ring only (cq_wait.c). Relaxed: several threads may poll
	 * and wait on one CQ, and a stale read costs one look at the sockets
	 * or one poll that finds the ring only */
	atomic_bool arm_fresh;
	/* A get_event renewed the lease and no poll came since: the next
	 * poll is the same use (cq_wait.c rr_soft_poll_cq: no clock read).
	 * Relaxed, as arm_fresh: a stale read dates one poll at an earlier
	 * get_event's time (its lease ends earlier, never later) */
	atomic_bool got_fresh;
	/* The look after a Send (cq_wait.c cq_look; SOFT_LOOK_MISSES), these
	 * fields together: the epoll token of the QP the consumer last
	 * received for (0: none) and that QP's Send MSN (tx_msn[RR_QN_SEND])
	 * when noted or last looked at; the adaptation's misses in a row and
	 * polls left to skip; statistics (tests): looks that completed
	 * something, looks that did not. Hints written by the consumers,
	 * relaxed: a stale or mixed pair costs one look or misses one. */
	_Atomic uint64_t look_tok;
	_Atomic uint32_t look_msn;
	_Atomic uint16_t look_miss, look_skip;
	_Atomic uint64_t look_hits, look_misses;
	pthread_mutex_t qlock;       /* slots */
	struct soft_cq_slot *slots;  /* QPs using this CQ (any number) */
	uint32_t nslots, slot_cap, gen;
	_Atomic uint64_t last_use_ns;
	atomic_int waiting;          /* threads inside rpcrdma_cq_wait */
	atomic_int handed;           /* its QPs served by the progress thread */
	uint32_t nlive;              /* QPs in slots (qlock) */
	/* The CQ's only QP when it serves both directions of it, else NULL:
	 * written under qlock (cq.c cq_one_set), read without it by a fast
	 * wait or fast poll, which counts itself in fast_hold from before
	 * that read until it holds the QP's rx_lock (cq_wait.c cq_one_hold);
	 * rr_soft_cq_del_qp waits for fast_hold to be 0 after its write, so
	 * that no such reader locks a QP being freed. */
	_Atomic(struct soft_qp *) one_qp;
	atomic_int fast_hold;
	uint64_t reserved;           /* sum of the slots' need (qlock) */
	/* completions lost to an overrun of the ring (the pushers' count) and
	 * the count its consumer last acted on (cq_wait.c cq_check_lost: its
	 * QPs to the error state) */
	_Atomic uint64_t lost;
	_Atomic uint64_t lost_seen;
	/* fast wait: a waiter sleeps in recvmsg on a QP's socket (or polls
	 * it with wake_efd: SOFT_FAST_POLL); another thread's completion
	 * meanwhile turns it off until fast_off_until (SOFT_FAST_RECV only) */
	atomic_int fast_blocked;
	_Atomic uint64_t fast_off_until;
	_Atomic uint64_t fast_reads;   /* statistics: blocking reads done */
	_Atomic uint64_t spin_hits;    /* statistics: fast reads whose spin
					* found data after an empty look */
	_Atomic uint64_t spin_misses;  /* ... whose budget ran out */
	_Atomic uint64_t spin_ready;   /* ... that found data at the first
					* look (no spin: neither) */
	_Atomic uint64_t fast_foreign; /* events from other threads meanwhile */
	_Atomic uint64_t fast_wakes;   /* statistics: SOFT_FAST_POLL sleeps
					* ended by the wake eventfd */
	uint64_t fast_direct;          /* statistics: completions handed over
					* directly (written by the fast waiter) */
	_Atomic uint64_t qp_waits;     /* statistics: rr_soft_wait_qp calls
					* that served their QP */
	_Atomic uint64_t qp_direct;    /* ... completions they handed over */
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

/* An inbound Read or Commit Request waiting for its response (IRQ). Its
 * STags were checked when it arrived and are checked again when its
 * response starts (tx_pick): memory deregistered meanwhile is never read. */
struct soft_irqe {
	bool commit;
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t src_stag;
	uint64_t src_to;
	uint8_t *src;                /* resolved when the response starts */
	bool durable;                /* @src is durable memory: file @dfd at
					offset @doff (tx_irq_src_ok) */
	int dfd;
	uint64_t doff;
	uint32_t len;
	uint32_t commit_id;
	unsigned nregions;
	struct rr_commit_region creg[RR_COMMIT_MAX_REGIONS];
	struct rr_mrt_ref ref[RR_COMMIT_MAX_REGIONS];
	uint32_t rlen[RR_COMMIT_MAX_REGIONS];
	uint8_t body[RR_COMMIT_RESP_BODY];
	struct iovec iov0;
};

/* wr_id and iovcnt first: a one-SGE Receive's fields in its first 32 bytes */
struct soft_rqe {
	uint64_t wr_id;
	unsigned iovcnt;
	struct iovec iov[SOFT_MAX_SGE];
};

/* One Receive posted to a QP's own queue: @iovcnt of the QP's max_recv_sge
 * iovecs. The ring's entries are as wide as the SGEs the QP was created
 * for (soft_rq_at), not SOFT_MAX_SGE: a one-SGE Receive is 32 bytes, so
 * posting an rdma:// client's 124 Receives touches 1 page of the lazily
 * mapped ring instead of 9 (272-byte entries; a page fault costs
 * microseconds: issue 16 part J, docs/PERFORMANCE.md). */
struct soft_qrqe {
	uint64_t wr_id;
	unsigned iovcnt;
	struct iovec iov[];
};

/* A shared receive queue: a ring of Receives (their SGEs resolved against
 * the SRQ's PD when posted), taken by its QPs as messages begin. */
/* Entries of an SRQ's cache of checked lkeys (a power of two). */
#define SOFT_SRQ_LC 16u

struct soft_srq {
	struct rr_srq base;
	struct soft_ctx *ctx;
	struct soft_pd *pd;
	struct soft_srq *pd_next;    /* pd->srqs (pd->lock) */
	struct soft_qp *qps;         /* attached QPs, qp->srq_next (pd->lock) */
	struct rr_lock lock;         /* the ring and the limit (a leaf; common/lock.h) */
	struct soft_rqe *rq;         /* a stack, mapped lazily (rr_alloc_pages) */
	uint32_t cap, count;         /* rq[count - 1]: the newest, taken first */
	uint32_t limit;              /* armed limit; 0: none */
	atomic_int event;            /* the limit fired, not consumed */
	/* Its Receives' lkeys checked last (lock), one entry per STag index
	 * modulo SOFT_SRQ_LC: a responder's pool registers its buffers in
	 * chunks, each an MR of its own, and reposts them in the order their
	 * messages came, across the chunks (one entry would miss about every
	 * other repost with 100 connections, and take the table's lock). */
	struct rr_mrt_lcache lc[SOFT_SRQ_LC];
};

enum soft_qp_state { QPS_IDLE = 0, QPS_RTS, QPS_ERROR };

struct soft_qp {
	struct rr_qp base;
	struct soft_obj obj;         /* fd once connected */
	/* Issue 16 part CU: the fields are laid out by use. What both a Send
	 * and a Receive read (ctx .. tx_send_max) fill the rest of obj's
	 * second line; then the receive side's per-message fields with the
	 * DDP parser's (rx: its Send fields first, ddp.h), then the send
	 * side's from tx_lock on in three lines; everything else (set-up,
	 * errors and Terminate, tagged and Read/Commit state, statistics a
	 * message does not write) after them. src/rdma/soft/tx.c asserts
	 * the bounds. */
	struct soft_ctx *ctx;
	struct soft_pd *pd;
	struct soft_cq *scq, *rcq;
	/* a shared receive queue instead of the QP's own (rx_lock): the
	 * Receive taken for the message being placed is srq_cur */
	struct soft_srq *srq;
	/* written with the QP's locks held (connect, error, close); the
	 * lease walk (lease.c balance_qp) and describe look without them:
	 * atomic stores, relaxed (a hint there: nothing is published through
	 * it), a plain store on x86-64 */
	enum soft_qp_state state;
	/* rr_ddp_tx_send_max(fpdu_max, ctx->tx_copy_max), set with them by
	 * rr_soft_qp_connected: tx_send_bare's one-pass Send up to it */
	uint32_t tx_send_max;
	/* receive side (rx_lock): what every message reads or writes */
	struct rr_lock rx_lock;
	/* fast wait (rx_lock): fast_ok: the socket blocks (O_NONBLOCK off,
	 * SO_RCVTIMEO set; every other call passes MSG_DONTWAIT; written
	 * once, at connect, atomically: cm.c go_rdma); fast_rd: a
	 * waiter reads the socket without rx_lock (nobody else reads it, the
	 * stage and the parser are its own until it relocks); fast_kill: the
	 * QP is closing, the reader leaves without parsing; fast_cv signals
	 * fast_rd cleared (with rx_lock). */
	bool fast_ok, fast_rd, fast_kill;
	/* own_wait (set under rx_lock, read atomically by the progress
	 * thread's balance): a caller of rr_soft_wait_qp receives for this QP
	 * on a CQ that other QPs share; its socket is out of the CQs' epoll
	 * sets meanwhile and the progress thread does not take it. */
	bool own_wait;
	uint32_t rq_cap, rq_head, rq_count;
	uint32_t rq_sge;             /* iovecs per entry: max_recv_sge, >= 1 */
	void *rq;                    /* rq_cap entries of soft_rq_esize() bytes */
	uint8_t *stage;
	size_t stage_off, stage_len;
	bool srq_have;               /* srq_cur holds a Receive (rx_lock) */
	/* the receive quota (rpcrdma_qp_recv_quota): taken from under
	 * rx_lock (its only decrement), added to without it
	 * (rr_soft_qp_recv_quota, once per Reply) */
	atomic_bool quota_on;
	_Atomic uint32_t quota;
	/* Completions of this QP handed out through its CQ (ring pushes and
	 * a CQ fast waiter's direct ones; counted before they are pushed),
	 * receive ones (cq_rq) and others (cq_sq, with the send side's), and
	 * what rr_soft_wait_qp took from the ring (own_wait's, rx_lock): with
	 * the caller's count of what it had from the CQ, how many its CQ's
	 * other consumers hold now. */
	_Atomic uint64_t cq_rq;
	uint64_t rx_reads;           /* socket reads qp_rx made (tests count them) */
	struct rr_ddp_rx rx;
	/* the message's Receive taken from the SRQ (rx_lock, while srq_have) */
	struct soft_rqe srq_cur;
	/* the Receives' lkey checked last (rx_lock): its hit's fields in
	 * one line */
	_Alignas(64) struct rr_mrt_lcache rq_lc;
	/* send side (tx_lock): what every Send reads or writes (tx_idle,
	 * tx_send_bare), the message's and the batch's state */
	_Alignas(64) struct rr_lock tx_lock;
	bool crc;
	bool msg_active;             /* the message being segmented: msg */
	bool msg_is_irq;
	bool want_out;
	bool term_pending;
	unsigned bcnt;               /* the batch being written: biov */
	uint32_t sq_cap, sq_count;
	uint32_t irq_count, irq_sent;
	uint32_t tx_msn[RR_QN_COUNT];
	/* Sends built in one pass by post_send (tx_one_fast, tx_send_bare), of
	 * those the ones the socket did not take whole (tx_one_left: left to
	 * the batch loop), and the unsignaled ones sent without a WQE: for
	 * tests */
	uint64_t tx_one, tx_bare;
	struct rr_mrt_lcache sq_lc;  /* the Sends' lkey checked last */
	/* what a Send through a WQE uses besides */
	unsigned bpos;
	uint32_t sq_head, sq_next;   /* next = index (from head) to transmit */
	uint32_t orq_out;            /* our Reads/Commits awaiting responses */
	struct soft_wqe *sq;
	_Atomic uint64_t cq_sq;
	size_t fpdu_max;
	uint64_t tx_one_left;
	/* ---- cold: set-up, errors, tagged and Read/Commit state ---- */
	void *blk;                   /* the QP's block as allocated (objects.c) */
	struct soft_qp *pd_next;     /* pd->qps (pd->lock) */
	uint64_t rtok, stok;         /* epoll tokens in rcq / scq */
	bool cq_watched;             /* socket in the CQs' epolls (rx+tx) */
	struct soft_id *id;
	/* RDMA Commit, enabled by the upper layer (RPCRDMA_CONN_COMMIT,
	 * rpcrdma_qp_set_commit): commit_rx serves incoming 0xC (rx.commit
	 * mirrors it, rx_lock), commit_tx permits posting (tx_lock). */
	bool commit_rx, commit_tx;
	uint16_t ird, ord;
	int last_err;
	bool disconnect_reported;
	bool rq_flushed;
	bool peer_term_valid;        /* the Terminate the peer sent us */
	struct rr_term peer_term;
	/* a tagged segment for durable (file-backed) memory is received into
	 * place_buf and written to the file when it is complete and checked
	 * (rx_place_durable): no store into a file mapping that may have
	 * shrunk (SIGBUS) */
	uint8_t *place_buf;          /* RR_ULPDU_MAX bytes, on first use */
	struct {
		bool on;
		int fd;
		uint64_t off;            /* file offset of the segment's first byte */
		uint8_t *va;             /* where it is mapped */
		uint32_t len;
	} rxd;
	/* a piece of a tagged payload being written now (no lock: stored by
	 * the receive side, read by a fence; tx.c rr_soft_place_begin): the
	 * STag it passed the check through, 0: none */
	_Atomic uint32_t place_stag;
	/* in ctx->placing (changed by the receive side under place_lock) */
	bool place_linked;
	struct soft_qp *place_next, *place_prev; /* ctx->placing */
	/* ctx->place_gen read before the current tagged segment's STag was
	 * last checked (rx_lock; compared under ctx->place_lock) */
	uint64_t place_gen;
	/* the STag a Write's last tagged segment was checked through (rx_lock;
	 * rx_tagged): the next segment of the same Write takes no table lock */
	struct rr_mrt_rcache wr_rc;
	struct soft_qp *srq_next;    /* srq->qps (the SRQ's pd->lock) */
	/* send side, the rest (tx_lock) */
	uint32_t sq_touched;         /* slots [0, sq_touched) ever posted into (the
					ring's pages beyond were never written) */
	struct soft_irqe *irq;       /* irq_cap entries, mapped on the first request (rx_request) */
	uint32_t irq_cap, irq_head;
	uint32_t next_commit_id;
	/* A small untagged FPDU, whole, that the socket did not take whole
	 * (tx_send_bare and tx_one_fast build it in the thread's own buffer,
	 * tx.c, and copy what is left here; the batch loop's short batches
	 * are copied into it too) */
	uint8_t txcopy[SOFT_TX_COPY_MAX];
	struct rr_ddp_txmsg msg;
	/* the batch being written */
	struct rr_fpdu *fpdu;        /* bfcap entries */
	struct iovec *biov;          /* SOFT_BATCH_IOV_FIRST or SOFT_BATCH_IOV */
	unsigned bnf;                /* FPDUs in the batch */
	bool bpart;                  /* biov[bpos] is partly written */
	bool bgrow;                  /* a batch was full with more to send: grow */
	uint16_t bfcap;              /* _FIRST in the QP's block, or the full batch */
	void *bbig;                  /* the full batch's arrays (NULL: not yet) */
	uint16_t bend[SOFT_BATCH_FPDUS]; /* biov index after each FPDU */
	bool term_fatal;             /* the pending Terminate ends the QP */
	uint32_t b_sq_done;          /* SQ WQEs finished by this batch */
	uint32_t b_irq_done;
	uint8_t term_fpdu[RR_TERM_FPDU_MAX];
	size_t term_len;
	/* The payload of a Read Response from durable (file-backed) memory
	 * is copied from the file with pread into this bounce buffer
	 * (SOFT_BOUNCE bytes, on first use), a batch at a time, and sent and
	 * CRC'd from there: never read through the mapping (a file that
	 * shrank would fault). bnc_used: bytes of it the batch being built
	 * holds; bnc_end: the message offset up to which the current
	 * message's payload is in it (valid while bnc_ok). */
	uint8_t *bnc;
	size_t bnc_used;
	size_t bnc_end;
	bool bnc_ok;
	uint64_t last_inline_ns;
	uint64_t took_rq, took_sq;   /* see cq_rq */
	/* what the fast reader reads into while fast_rd (a revoke waits when
	 * that is the memory going away) and how many revokes wait */
	uint8_t *fast_dst;
	size_t fast_len;
	unsigned revoke_waiters;
	/* the spin's adaptation (SOFT_SPIN_MISSES): the fast reader's own */
	uint16_t spin_miss, spin_skip;
	/* the adaptive spin budget (ctx spin_adaptive): the fast reader's own */
	struct rr_spin_adapt spin_adapt;
	/* the fast reader's last sleep ended by its timeout with nothing
	 * read (the fast reader's own): the next one may be SOFT_FAST_POLL */
	bool fast_quiet;
	struct rr_cond fast_cv;
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
	bool quiet;                  /* quiet_tid's pushes leave efd alone */
	pthread_t quiet_tid;         /* (lock; rr_soft_channel_quiet) */
};

struct soft_id {
	struct rr_cm_id base;
	struct soft_obj obj;
	struct soft_ctx *ctx;
	struct soft_chan *ch;
	struct soft_id *next_all;
	struct soft_id *tm_next, *tm_prev; /* ctx->timed, when on it */
	bool timed;
	/* the creating thread drives the handshake (RR_CONN_DRIVEN, no
	 * epoll registration); its end goes to *drive_ev while it does */
	bool driven, drive_done;
	struct rpcrdma_cm_event *drive_ev;
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
	/* (lock) a driven connect's early send failed (connect_early): the
	 * socket's error, which that send took from SO_ERROR; 0: none */
	int early_err;
	/* (lock) a driven connect's socket set up by its driver while the
	 * peer answers (drive_prep): go_rdma takes these instead of asking */
	bool prepped, pre_fast;
	size_t pre_fpdu;
	uint64_t deadline_ns;
	uint32_t timeout_ms;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	bool peer_known;             /* passive: peer is accept's (id_addr) */
	uint64_t hs_seq;             /* passive, IDS_AWAIT_REQ: accept order */
	/* listener (IDS_LISTEN): its half-open connections (IDS_AWAIT_REQ,
	 * struct rr_listen_limits) and accept back-off, under ctx->lock */
	unsigned max_hs, nhs;
	uint32_t hs_timeout_ms;      /* 0: SOFT_DEFAULT_TIMEOUT_MS */
	uint32_t defer_s;            /* TCP_DEFER_ACCEPT held, s; 0: off */
	uint64_t hs_next;
	struct rr_backoff backoff;   /* accept back-off */
	uint64_t resume_ns;          /* paused (out of epoll) until; 0: not */
	struct rr_listen_stats lstats;
	/* listener: its consumer's thread accepts and reads the Requests
	 * (rr_soft_listen_driven, rr_soft_listen_drive), the progress
	 * thread does not watch it; lep: the epoll set that thread watches
	 * (the listening socket and the handshakes waiting for their
	 * Request, valid while lep_ok). Handshake: in_lep, in its
	 * listener's lep instead of the progress thread's set; lep_hs: how
	 * many handshakes the listener's lep holds (c->lock). */
	bool ldriven, lep_ok, in_lep;
	int lep;
	unsigned lep_hs;
};

/* Completions a fast waiter receives for itself go straight into its
 * rpcrdma_cq_wait array (no ring push + poll) while the ring is empty and
 * not armed and room is left (cq.c rr_soft_cq_push, cq_wait.c). */
struct soft_direct {
	struct soft_cq *q;
	struct rpcrdma_wc *wc;
	int n, got;
	/* non-NULL (rr_soft_wait_qp): the array takes this QP's completions
	 * alone, while the ring holds none of them; the rest go to the ring
	 * as from any other thread (the CQ's consumer is someone else) */
	const struct rpcrdma_qp *qp;
};

static inline struct soft_ctx *sctx(struct rr_context *c)
{
	return RR_CONTAINER_OF(c, struct soft_ctx, base);
}

static inline struct soft_cq *scq_of(struct rr_cq *cq)
{
	return RR_CONTAINER_OF(cq, struct soft_cq, base);
}

static inline struct soft_chan *chan_of(struct rr_cm_channel *ch)
{
	return RR_CONTAINER_OF(ch, struct soft_chan, base);
}

static inline struct soft_id *id_of(struct rr_cm_id *id)
{
	return RR_CONTAINER_OF(id, struct soft_id, base);
}

/* (@a + @b) mod @cap for @a < @cap and @b <= @cap: ring indices without a
 * division (a div costs tens of cycles; several per message). */
static inline uint32_t ring_idx(uint32_t a, uint32_t b, uint32_t cap)
{
	uint32_t i = a + b;

	return i >= cap ? i - cap : i;
}

static inline struct soft_wqe *sq_at(struct soft_qp *qp, uint32_t i)
{
	return &qp->sq[ring_idx(qp->sq_head, i, qp->sq_cap)];
}

static inline size_t soft_rq_esize(const struct soft_qp *qp)
{
	return sizeof(struct soft_qrqe) + sizeof(struct iovec) * qp->rq_sge;
}

/* Entry @i (0 .. rq_cap - 1) of the QP's own receive ring. */
static inline struct soft_qrqe *soft_rq_at(const struct soft_qp *qp, uint32_t i)
{
	return (struct soft_qrqe *)(void *)((uint8_t *)qp->rq + soft_rq_esize(qp) * i);
}

/* The oldest WQE waiting for a Read or Commit Response (tx_lock held). */
static inline struct soft_wqe *orq_head(struct soft_qp *qp)
{
	for (uint32_t i = 0; i < qp->sq_next; i++) {
		struct soft_wqe *w = sq_at(qp, i);

		if (w->state == WQE_AWAIT_RESP)
			return w;
	}
	return NULL;
}

/* Resolves @n local SGEs (access RR_MRT_LOCAL | @need) to addresses through
 * the STag table @t (PD @pd) and the one-entry cache @lc (rr_mrt_local_ptr;
 * the caller's lock guards it): @iov/@cnt (the SGEs of length 0 left out),
 * *@total bytes. 0 or the table's -errno; on failure *@cnt holds as many as
 * resolved before the one that failed and *@total is not written. The
 * general path: any number of SGEs (sge_resolve takes it for all but one). */
static inline int sge_resolve_all(struct rr_mrt *t, const void *pd, struct rr_mrt_lcache *lc,
				  const struct rpcrdma_sge *sg, uint32_t n, uint32_t need,
				  struct iovec *iov, unsigned *cnt, uint32_t *total)
{
	uint64_t tot = 0;
	unsigned c = 0;   /* *@cnt written once (as many as resolved) */

	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = sg[i].length;
		uint8_t *p;
		int r;

		if (!len)
			continue;
		r = rr_mrt_local_ptr(t, lc, sg[i].lkey, sg[i].addr, len, RR_MRT_LOCAL | need, pd,
				     &p);
		if (r) {
			*cnt = c;
			return r;
		}
		iov[c].iov_base = p;
		iov[c++].iov_len = len;
		tot += len;
	}
	*cnt = c;
	if (tot > UINT32_MAX)
		return -EMSGSIZE;
	*total = (uint32_t)tot;
	return 0;
}

/* sge_resolve_all of one SGE (@n 1: every Send and Receive the transport
 * posts), without the loop, the 64-bit sum and its limit (one length of
 * 32 bits never passes it): the same result and the same outputs, written
 * in the same cases (issue 16 part DG; test soft_sge_resolve_one_as_all
 * compares the two over random SGEs, caches and table changes). */
static inline __attribute__((always_inline)) int
sge_resolve_one(struct rr_mrt *t, const void *pd, struct rr_mrt_lcache *lc,
		const struct rpcrdma_sge *sg, uint32_t need, struct iovec *iov, unsigned *cnt,
		uint32_t *total)
{
	uint32_t len = sg->length;
	uint8_t *p;
	int r;

	if (!len) {
		*cnt = 0;
		*total = 0;
		return 0;
	}
	r = rr_mrt_local_ptr(t, lc, sg->lkey, sg->addr, len, RR_MRT_LOCAL | need, pd, &p);
	if (r) {
		*cnt = 0;
		return r;
	}
	iov[0].iov_base = p;
	iov[0].iov_len = len;
	*cnt = 1;
	*total = len;
	return 0;
}

/* sge_resolve_all on @qp's table and PD, one SGE by sge_resolve_one.
 * Inline: post_send (tx.c) and post_recv (rx.c) run it per work request. */
static inline int sge_resolve(struct soft_qp *qp, struct rr_mrt_lcache *lc,
			      const struct rpcrdma_sge *sg, uint32_t n, uint32_t need,
			      struct iovec *iov, unsigned *cnt, uint32_t *total)
{
	if (n == 1)
		return sge_resolve_one(&qp->ctx->mrt, &qp->pd->base, lc, sg, need, iov, cnt,
				       total);
	return sge_resolve_all(&qp->ctx->mrt, &qp->pd->base, lc, sg, n, need, iov, cnt, total);
}

/* Whether [@p, @p + @n) meets [@lo, @hi). */
static inline bool range_hits(const void *p, size_t n, uintptr_t lo, uintptr_t hi)
{
	uintptr_t a = (uintptr_t)p;

	return n && a < hi && a + n > lo;
}

#endif
