/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* An in-memory RDMA "wire" for the sans-I/O session of src/proto/conn, on
 * virtual time (the test of issue 15, in the manner of quicly's t/test.c):
 * no provider, no socket, no thread. Three parts:
 *
 * - struct vt_mem: the injected environment of both sessions -- an
 *   allocator that can fail allocations (seeded), a virtual clock, a seeded
 *   random generator -- and a tracker of every live memory block (the
 *   sessions' and the test's own), so that every registration and every
 *   RDMA access is checked against memory that is really allocated.
 * - struct vt_net: the executor, one struct rr_conn_io per side. A
 *   registration is an entry of a table keyed by STag (base, length,
 *   access, valid); a Send with the RDMA Writes before it (Send With
 *   Invalidate) becomes operations queued on the wire to the other side, in
 *   order (RC); a Send that arrives consumes the next posted Receive (and
 *   invalidates the STag it names) at once, the session hears of it when
 *   the Receive completion runs; an RDMA Read reads the peer's registered
 *   memory and its Response comes back on its own ordered channel; a Local
 *   Invalidate takes effect when its completion is executed; completions
 *   wait in per-class queues (Send, Read, Local Invalidate, Receive: each
 *   in order, the classes in any order). Every access is checked: an STag
 *   no longer valid is a fatal error of the connection where the real
 *   provider gives one and the protocol allows it (an aborted Call, a
 *   Read-chunk Reply fenced by its timeout), otherwise a violation of the
 *   session's invariants; so are a Send arriving without a posted Receive
 *   (Receive overrun), a foreign STag, an access out of bounds or to memory
 *   deregistered or freed, a Send larger than the peer's Receives, more
 *   Reads than ORD, a slot or Receive used twice.
 * - a violation calls the world's fail hook, which does not return.
 *
 * The scheduler and the invariants that need the upper layers are in
 * vt_world.c. */
#ifndef RR_TESTS_CONN_VT_NET_H
#define RR_TESTS_CONN_VT_NET_H

#include <stdarg.h>

#include "proto/conn/conn.h"
#include "test.h"

/* ---- memory: allocator, clock, randomness, live blocks ---- */

struct vt_block {
	uintptr_t addr;
	size_t size;
	unsigned long seq;   /* allocation number (RR_VT_TRAP_ALLOC) */
	bool session;        /* allocated by a session through the environment */
};

struct vt_mem {
	/* te.env: the clock (te.now_ns) and random generator of tests/test.h,
	 * with the allocator below */
	struct rr_test_env te;
	uint64_t fail_rng;       /* allocation failures */
	unsigned fail_permille;  /* 0: never */
	bool fail_on;
	unsigned long allocs, fails;
	unsigned long trap;      /* prints a backtrace at this allocation */
	long session_live;       /* blocks of the sessions not freed */
	struct vt_block *blk;    /* live blocks, sorted by address */
	size_t nblk, cap;
	void *ctx;               /* of @fail */
	/* Before a block is freed (registrations over it are checked). */
	void (*on_free)(void *free_ctx, const struct vt_block *b);
	void *free_ctx;
	void (*fail)(void *ctx, const char *fmt, ...)
		__attribute__((noreturn, format(printf, 2, 3)));
};

void vt_mem_init(struct vt_mem *m, uint64_t seed);
void vt_mem_fini(struct vt_mem *m);
/* The test's own memory (never fails), tracked as the sessions' is. */
void *vt_mem_alloc(struct vt_mem *m, size_t size);
void vt_mem_free(struct vt_mem *m, void *p);
/* The live block holding [@p, @p + @len), or NULL. */
const struct vt_block *vt_mem_find(const struct vt_mem *m, const void *p, size_t len);
/* The first @max session blocks still live, as "seq:size" (leaks). */
void vt_mem_leaks(const struct vt_mem *m, char *out, size_t cap, unsigned max);
/* The array @arr (of *@cap elements of @elem bytes), doubled when it does
 * not hold more than @n (the test's own arrays; aborts without memory). */
void *vt_grow(void *arr, size_t *cap, size_t n, size_t elem);
/* One draw of the failure generator: true with fail_permille / @div per
 * mille while fail_on (for posting failures: rarer than allocations). */
bool vt_mem_fail_now(struct vt_mem *m, unsigned div);

/* ---- the executor ---- */

#define VT_REQ 0
#define VT_RSP 1
#define VT_STAG_BASE 0x4000u
#define VT_LEND_MAX 4u     /* as the RDMA executor (TP_LEND_MAX) */

/* A registration, kept for the whole run (the history explains a failed
 * access). */
struct vt_reg {
	uint32_t stag;         /* also its lkey */
	uint8_t side;
	uint32_t epoch;
	uint8_t *base;
	size_t len;
	uint64_t to;           /* Tagged Offset of @base */
	unsigned access;       /* RR_XPRT_ACC_* */
	bool window;
	bool registered;       /* not deregistered */
	bool invalid;          /* invalidated (locally executed or remotely) */
	bool inv_posted;       /* a Local Invalidate waits for execution */
	bool remote_inv;
	bool fenced_in_tick;   /* invalidated or deregistered by rr_conn_tick */
	bool has_xid;
	uint32_t xid;          /* the message that exposed it */
	int active;            /* index in the net's active list, -1 */
};

enum vt_op_kind { VT_OP_WRITE, VT_OP_SEND, VT_OP_READ, VT_OP_RESP };

struct vt_op {
	enum vt_op_kind kind;
	uint8_t from;          /* issuing side */
	uint32_t len;
	/* WRITE: source (src_stag 0: the executor's zero bytes) */
	const uint8_t *src;
	uint32_t src_stag;
	/* WRITE, READ: the peer's memory */
	uint32_t stag;
	uint64_t to;
	/* SEND */
	uint32_t slot;
	bool inv;
	uint32_t inv_stag;
	uint32_t xid;
	uint64_t sum;          /* checksum of the slot when posted */
	/* READ, RESP: the issuer's sink */
	uint8_t *dst;
	uint32_t dst_stag;
	uint8_t *data;         /* RESP: the bytes read */
	uint64_t token;
	struct vt_op *next;
};

struct vt_fifo {
	struct vt_op *head, *tail;
	unsigned n;
};

enum vt_cq_class { VT_CQ_SEND, VT_CQ_READ, VT_CQ_INV, VT_CQ_RECV, VT_CQ_N };

struct vt_cqe {
	uint64_t token;
	uint32_t slot;        /* SEND; RECV: the Receive */
	uint32_t stag;        /* INV; RECV: the STag invalidated (@inv) */
	uint32_t len;         /* RECV */
	bool inv;             /* RECV: Send With Invalidate */
	int status;           /* 0, -EIO, or VT_FLUSH */
	struct vt_cqe *next;
};
#define VT_FLUSH 1

struct vt_cq {
	struct vt_cqe *head, *tail;
	unsigned n;
};

/* A Receive: idle, posted, consumed by a Send (its completion not yet run),
 * held by the session during rr_conn_on_recv, lent as a Reply. */
enum { VT_R_IDLE, VT_R_POSTED, VT_R_ARRIVED, VT_R_HELD, VT_R_LENT };
/* A send slot: free, held by the session, posted (its completion told),
 * posted quiet (struct rr_conn_send quiet, taken by the executor: its
 * completion only frees the slot, as the transport's unsignaled Sends). */
enum { VT_S_FREE, VT_S_HELD, VT_S_POSTED, VT_S_QUIET };

struct vt_conn;

/* One side of one connection (its QP, Receives, send slots, CQ). */
struct vt_qp {
	struct vt_conn *conn;
	uint8_t side;
	struct rr_conn *sess;
	bool up;              /* rr_conn_up was called */
	bool closing;         /* the session or a failed completion ended it */
	bool down;            /* rr_conn_down was called */
	uint32_t nrecv, rsize;
	uint8_t *rbuf, *rstate;
	uint32_t *rfifo, rhead, rcount;
	uint32_t nsend, ssize;
	uint8_t *sbuf, *sstate;
	uint32_t *sfree, nsfree;
	uint32_t lent;
	uint16_t ord;
	uint32_t reads_out;
	struct vt_cq cq[VT_CQ_N];
	struct rr_conn_io io;
};

/* One connection: both sides and the wire between them. */
struct vt_conn {
	struct vt_net *net;
	uint32_t epoch;
	bool broken;              /* nothing more is delivered */
	struct vt_qp qp[2];
	struct vt_fifo ops[2];    /* Writes, Sends, Read Requests to side i */
	struct vt_fifo resp[2];   /* Read Responses to side i */
	/* RDMA_DONEs the requester owes on this connection, by XID: one per
	 * Read-chunk Reply its session received */
	struct vt_owed {
		uint32_t xid;
		int owed;
	} *done;
	unsigned ndone;
	size_t capdone;
	/* the credit rule (RFC 8166 section 4.3.1), from the wire: Calls the
	 * requester sent, Replies its session took, the grant of the last */
	uint32_t calls, replies, grant;
	struct vt_conn *next;
};

struct vt_side_cfg {
	uint32_t credits;   /* the requester's credit request */
	uint32_t nrecv, rsize, nsend, ssize;
	uint16_t ord;
	bool use_windows;
};

struct vt_net {
	struct vt_mem *mem;
	struct vt_reg *regs;
	uint32_t nregs;
	size_t capregs;
	uint32_t *active;         /* registered entries */
	uint32_t nactive;
	size_t capactive;
	struct vt_conn *conns;    /* every connection not freed */
	struct vt_conn *cur;      /* the requester's connection (NULL: none) */
	uint32_t epochs;
	bool in_tick;             /* the world runs rr_conn_tick */
	struct vt_side_cfg cfg[2];
	struct rr_conn_io req_io; /* the requester's io (ctx: the net) */
	/* the world */
	void *ctx;
	void (*fail)(void *ctx, const char *fmt, ...)
		__attribute__((noreturn, format(printf, 2, 3)));
	bool (*xid_aborted)(void *ctx, uint32_t xid);
	void (*err_sent)(void *ctx, uint32_t xid);
	void (*call_sent)(void *ctx, uint32_t xid);   /* a Call went on the wire */
	void (*deliver)(void *ctx, struct vt_qp *qp, struct rr_conn_sreq *r);
	void (*complete)(void *ctx, struct rr_conn_rpc *rpc);
	void (*sent)(void *ctx, struct vt_qp *qp, struct rr_conn_sreq *r, int status);
	/* requests of @qp's responder session its upper layer holds (delivered,
	 * not done): a Reply's Send marked alone finds at most its own */
	unsigned (*held)(void *ctx, struct vt_qp *qp);
	void (*trace)(void *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
	/* counters */
	unsigned long sends, writes, reads, recvs, legit_fatal, swi, linv;
	unsigned long side_sends[2];   /* Sends posted by each side (VT_REQ, VT_RSP) */
};

void vt_net_init(struct vt_net *n, struct vt_mem *mem);
/* Frees the connections and the tables (after the sessions). */
void vt_net_fini(struct vt_net *n);

/* A new connection (epoch) with both sides' Receives posted; the
 * requester's current connection becomes it. */
struct vt_conn *vt_net_connect(struct vt_net *n);
/* The wire breaks (disconnect, fatal error): what is in flight is flushed;
 * each side's rr_conn_down follows (vt_net_down). */
void vt_net_break(struct vt_net *n, struct vt_conn *c);
/* Side @side of @c learns the connection is gone: rr_conn_down of its
 * session, its completions flushed, then the checks (no registration of
 * that side left, no send slot held). */
void vt_net_down(struct vt_net *n, struct vt_conn *c, int side);
/* Frees @c when nothing refers to it any more; returns whether it did. */
bool vt_net_reap(struct vt_net *n, struct vt_conn *c);

/* Delivers the head of @c's wire to @to (@resp: the Read Response channel). */
void vt_net_deliver(struct vt_net *n, struct vt_conn *c, int to, bool resp);
/* Runs the head completion of class @cl of @qp. */
void vt_net_complete(struct vt_net *n, struct vt_qp *qp, int cl);

/* Registrations of @side (@epoch; UINT32_MAX: any) still registered. */
unsigned vt_net_registered(const struct vt_net *n, int side, uint32_t epoch);
/* Remote STags of @side in @epoch valid for the peer and no Local
 * Invalidate posted (what rr_conn_live_stags / rrep_live count). */
unsigned vt_net_live_remote(const struct vt_net *n, int side, uint32_t epoch);
/* Every STag exposed for @xid by the requester is invalid; the first
 * valid one otherwise (0: none). */
uint32_t vt_net_xid_valid_stag(const struct vt_net *n, uint32_t xid);
/* An RDMA_DONE the requester owes on @c and has not sent (0: none). */
uint32_t vt_net_done_owed(const struct vt_conn *c);
/* A registration of @side still registered over [@p, @p + @len) (0: none). */
uint32_t vt_net_reg_over(const struct vt_net *n, int side, const void *p, size_t len);

static inline struct vt_reg *vt_net_reg(const struct vt_net *n, uint32_t stag)
{
	if (stag < VT_STAG_BASE || stag - VT_STAG_BASE >= n->nregs)
		return NULL;
	return &n->regs[stag - VT_STAG_BASE];
}

/* Responder io of a connection (ctx: its qp). */
extern const struct rr_conn_io vt_rsp_io;

#endif
