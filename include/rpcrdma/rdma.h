/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: the RDMA provider interface. A verbs-shaped view of
 * an RDMA device that both the built-in user-space iWARP provider ("soft":
 * MPA/DDP/RDMAP over TCP, RFC 5044/5041/5040, plus the RDMA Commit extension
 * of draft-talpey-rdma-commit) and rdma-core ("verbs": libibverbs + librdmacm)
 * implement. It offers what RPC-over-RDMA Version 1 (RFC 8166) needs:
 * contexts, protection domains, memory registrations (long-lived MRs and
 * invalidatable memory windows, with a durability attribute), queue pairs
 * (Send, Send with Solicited Event, Send with Invalidate, RDMA Write, RDMA
 * Read, RDMA Commit, window bind, local invalidate), shared receive queues
 * (one pool of Receives for many queue pairs, with a limit event and
 * per-QP receive quotas), completion queues with a pollable file
 * descriptor, and a connection manager carrying private data (RFC 8797 uses
 * it) and IRD/ORD.
 *
 * Conventions: every function returns 0 (or a non-negative count) or a
 * negative errno. A missing capability answers -EOPNOTSUPP; callers query
 * rpcrdma_query()/rpcrdma_conn_query() first.
 *
 * STags (RFC 5040 section 2.1): 32 bits, a 24-bit index and an 8-bit key. The
 * key is unpredictable (drawn from the env's randomness) and changes on every
 * registration, re-registration and window bind; an invalidated or
 * deregistered STag never grants access again. Per provider: "soft" issues
 * every STag value at most once (src/rdma/mr_table.h); "verbs" draws window
 * keys from the env's randomness (never the current key) while MR keys are
 * the device's choice, and re-registration always yields new keys (the new
 * MR is registered before the old one is released). Remote offsets (Tagged
 * Offsets, RFC 8166 HLOO "offset") are virtual addresses, as with siw and
 * verbs: the offset of a byte is its address in the registrant's process.
 *
 * Thread safety (one rule per object):
 *  - provider registry, rpcrdma_open, rpcrdma_query: any thread, any time.
 *  - context: rpcrdma_close must not race any other call on the context or
 *    on objects made from it; every object must be destroyed first (-EBUSY
 *    otherwise, and nothing is freed).
 *  - PD, MR, MW: create/register/deregister are thread-safe with respect to
 *    each other and to traffic on every QP. Deregistering or deallocating
 *    memory still named by a posted WR or advertised to a peer is the
 *    caller's error (the peer then gets an invalid-STag error, never the
 *    memory).
 *  - QP: serves one connection in its life (after a disconnect, make a new
 *    QP). rpcrdma_post_send and rpcrdma_post_recv may be called from several
 *    threads at once (the provider serializes each queue). rpcrdma_qp_destroy
 *    must not race posting on that QP; it flushes nothing to the CQ.
 *  - SRQ: rpcrdma_post_srq_recv may be called from several threads at once,
 *    and while its QPs receive; rpcrdma_srq_get_event and
 *    rpcrdma_srq_arm_limit from one thread at a time; destroy after its QPs.
 *  - CQ: one consumer at a time: rpcrdma_cq_poll, rpcrdma_cq_arm and
 *    rpcrdma_cq_get_event must be serialized by the caller (the provider's own
 *    producers are internally synchronized with that consumer).
 *  - CM channel: rpcrdma_cm_get_event from one thread at a time; connect,
 *    listen, accept, reject, disconnect may run concurrently with it. Events
 *    of a destroyed id are dropped.
 *  - rpcrdma_durable_map/unmap: any thread; the mapping object itself is
 *    not shared-mutable after creation.
 *
 * Progress: providers move data on their own (hardware, or provider threads in
 * "soft"); the caller never has to call in to move data, it polls CQs and the
 * CM channel or waits on their file descriptors (or in rpcrdma_cq_wait).
 * Soft: while a CQ is attended (a thread waits in rpcrdma_cq_wait, it is
 * armed, or it was polled in the last 20 ms) its consumer's poll/get_event/wait
 * calls receive for its QPs, in the consumer's thread; a consumer that arms
 * must therefore come back when the fd is readable. Unattended CQs' QPs are
 * served by the provider thread. Connection setup may need the caller: with
 * rdma_cm ("verbs") the connecting side's address and route resolution advance
 * inside rpcrdma_cm_get_event on that side's channel, so a connecting caller
 * keeps polling its channel (or waits on its fd) until ESTABLISHED, REJECTED,
 * UNREACHABLE or ERROR. The fd may wake for such an internal step;
 * rpcrdma_cm_get_event then answers -EAGAIN. */
#ifndef RPCRDMA_RDMA_H
#define RPCRDMA_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "rpcrdma/env.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rpcrdma_context;
struct rpcrdma_pd;
struct rpcrdma_mr;
struct rpcrdma_mw;
struct rpcrdma_cq;
struct rpcrdma_qp;
struct rpcrdma_cm_channel;
struct rpcrdma_cm_id;
struct rpcrdma_srq;

/* ---- providers and contexts ------------------------------------------- */

/* Provider names: "soft" (always built), "verbs" (when built with rdma-core). */
#define RPCRDMA_PROVIDER_SOFT "soft"
#define RPCRDMA_PROVIDER_VERBS "verbs"

/* Stores up to @cap provider names (static strings) in @names and returns
 * how many providers are built in (may exceed @cap). @names may be NULL when
 * @cap is 0. */
RPCRDMA_API size_t rpcrdma_provider_list(const char **names, size_t cap);

/* True when a provider of that name is built in (not whether a device is
 * present: rpcrdma_open answers -ENODEV for that). */
RPCRDMA_API bool rpcrdma_provider_available(const char *name);

struct rpcrdma_open_attr {
	/* Environment (allocator, clock, randomness); NULL = defaults.
	 * Borrowed: must outlive the context. */
	const struct rpcrdma_env *env;
	/* Device name ("siw0", "rxe0"; verbs) or NULL for the first device.
	 * The soft provider has one device, "soft0", and ignores it. */
	const char *device;
	uint32_t flags; /* reserved, 0 */
	/* verbs, when @device is NULL: the device that owns @addr (@passive,
	 * a listen address) or to which the route to @addr leads (active, a
	 * peer address), as rdma_cm would pick it; a wildcard address or none
	 * (NULL) means the first device. Borrowed for the call; the soft
	 * provider ignores it. */
	const struct sockaddr *addr;
	bool passive;
	/* Soft provider: how long, in microseconds, a thread waiting alone on
	 * a one-QP CQ (rpcrdma_cq_wait) polls the connection before it sleeps
	 * ("spin, then sleep"; docs/soft-iwarp.md "Spinning"). Spinning saves
	 * the wake-up of every message (NULL RPC round trip ~29 -> ~14 us on
	 * loopback) for CPU time: at most this budget per wait, and a waiter
	 * whose budgets keep running out stops spinning for a while. 0: the
	 * default, RPCRDMA_SOFT_SPIN_US from the environment if set, else
	 * RPCRDMA_SPIN_US_DEFAULT; RPCRDMA_SPIN_OFF: never spin. Values above
	 * RPCRDMA_SPIN_US_MAX are taken as that. verbs ignores it. */
	uint32_t spin_us;
};

#define RPCRDMA_SPIN_US_DEFAULT 20u
#define RPCRDMA_SPIN_US_MAX 1000u
#define RPCRDMA_SPIN_OFF UINT32_MAX

/* Opens a context on provider @provider. @attr may be NULL. Errors: -ENOENT
 * unknown provider name, -ENODEV no usable device (e.g. verbs on a host
 * without RDMA devices), -ENOMEM. */
RPCRDMA_API int rpcrdma_open(const char *provider,
			     const struct rpcrdma_open_attr *attr,
			     struct rpcrdma_context **out);
/* Closes @ctx; -EBUSY (nothing freed) while objects made from it remain. */
RPCRDMA_API int rpcrdma_close(struct rpcrdma_context *ctx);
RPCRDMA_API const char *rpcrdma_context_provider(const struct rpcrdma_context *ctx);

enum rpcrdma_transport {
	RPCRDMA_TRANSPORT_IWARP = 1,
	RPCRDMA_TRANSPORT_IB = 2,
	RPCRDMA_TRANSPORT_ROCE = 3,
};

/* Capability flags. */
#define RPCRDMA_CAP_INVALIDATABLE (1u << 0) /* memory windows: bind + local inv */
#define RPCRDMA_CAP_REMOTE_INV    (1u << 1) /* Send with Invalidate both ways */
#define RPCRDMA_CAP_COMMIT        (1u << 2) /* RDMA Commit for persistence (soft:
					       0xC/0xD; verbs: IBV_WR_FLUSH with
					       IBV_FLUSH_PERSISTENT) */
#define RPCRDMA_CAP_DURABLE       (1u << 3) /* durable registrations (verbs: of
					       memory the device can persist;
					       rxe: persistent memory only) */
#define RPCRDMA_CAP_SOLICITED     (1u << 4) /* solicited-only CQ notification */
#define RPCRDMA_CAP_SEND_INV      (1u << 5) /* can post RPCRDMA_WR_SEND_WITH_INV
					       (responder side of RFC 8797 R) */
#define RPCRDMA_CAP_WC_SOLICITED  (1u << 6) /* receive completions report
					       RPCRDMA_WC_SOLICITED (verbs: no) */
#define RPCRDMA_CAP_COMMIT_VISIBLE (1u << 7) /* RDMA Commit for global visibility
					       only (RPCRDMA_SEND_VISIBLE) to
					       RPCRDMA_MR_VISIBLE registrations
					       (verbs: IBV_WR_FLUSH with
					       IBV_FLUSH_GLOBAL; soft: no) */
#define RPCRDMA_CAP_SRQ           (1u << 8) /* shared receive queues (verbs:
					       ibv_create_srq, when the device
					       has max_srq) */
#define RPCRDMA_CAP_SRQ_ANY_PD    (1u << 9) /* a QP may use an SRQ of another PD
					       of its context (soft); without
					       it the QP must be created in the
					       SRQ's PD (rxe and siw check a
					       Receive's lkey against the QP's
					       PD) */
#define RPCRDMA_CAP_RECV_QUOTA    (1u << 10) /* rpcrdma_qp_recv_quota (soft) */
/* Where RDMA Commit comes from on "verbs": IBV_WR_FLUSH (IBTA 1.5, Linux
 * rxe since 6.2) needs the library built against rdma-core >= 45 (Debian 12
 * has 44), a kernel and device that report IB_UVERBS_DEVICE_FLUSH_PERSISTENT
 * (COMMIT, DURABLE) or _FLUSH_GLOBAL (COMMIT_VISIBLE) in ibv_query_device_ex,
 * and, for persistence, registrations of memory the device can persist
 * (rxe 6.12 accepts IBV_ACCESS_FLUSH_PERSISTENT only on pages of persistent
 * memory; rpcrdma_reg_mr then answers -EOPNOTSUPP). Without them the flags are
 * clear and Commits answer -EOPNOTSUPP: never a silent no-op. */

/* Private data limits. Measured facts, per connection-manager message:
 *  - MPA (RFC 5044 section 7.1) allows 512 bytes; revision 2 puts its 4-byte
 *    IRD/ORD block inside them (RFC 6581). Linux siw caps the total at 256,
 *    so 252 bytes reach the upper layer: the soft provider offers 252 for
 *    connect, accept and reject.
 *  - IB CM via rdma_cm (IB, RoCE): REQ 92 bytes minus the 36-byte rdma_cm IP
 *    header = 56 for connect; REP 196 for accept; REJ 148 for reject.
 *  - iWARP devices via rdma_cm: the kernel's iw_cm, typically 252 (siw).
 * So the portable minimum is 56 on connect (RFC 8797 needs 8). */
#define RPCRDMA_PRIVATE_DATA_MAX 512 /* storage in events; no provider exceeds it */

struct rpcrdma_caps {
	uint32_t flags;                  /* RPCRDMA_CAP_* */
	enum rpcrdma_transport transport;
	uint32_t max_sge;                /* per work request */
	uint32_t max_inline;             /* RPCRDMA_SEND_INLINE bytes */
	uint32_t max_qp_wr;              /* per queue */
	uint32_t max_cqe;
	uint32_t max_ird;                /* responder resources */
	uint32_t max_ord;                /* initiator depth */
	uint32_t max_msg_size;           /* one Send / Read / Write */
	uint32_t max_commit_regions;     /* per Commit work request */
	uint64_t max_mr_size;
	uint16_t max_private_data_connect;
	uint16_t max_private_data_accept;
	uint16_t max_private_data_reject;
	char provider[16];
	char device[64];
	char commit[128];                /* how RDMA Commit travels here, or why
					    it cannot (library, kernel, device) */
	uint32_t max_srq_wr;             /* Receives of one SRQ (0: no SRQ) */
};

/* Fills @caps for the context's device. */
RPCRDMA_API int rpcrdma_query(struct rpcrdma_context *ctx, struct rpcrdma_caps *caps);

/* ---- protection domains and registrations ------------------------------ */

RPCRDMA_API int rpcrdma_pd_alloc(struct rpcrdma_context *ctx, struct rpcrdma_pd **out);
/* -EBUSY while registrations or QPs of the PD remain. */
RPCRDMA_API int rpcrdma_pd_free(struct rpcrdma_pd *pd);

/* Access flags (verbs values are different; providers translate). */
#define RPCRDMA_ACCESS_LOCAL_WRITE  (1u << 0)
#define RPCRDMA_ACCESS_REMOTE_WRITE (1u << 1) /* requires LOCAL_WRITE */
#define RPCRDMA_ACCESS_REMOTE_READ  (1u << 2)
#define RPCRDMA_ACCESS_MW_BIND      (1u << 3) /* MR may parent memory windows */
#define RPCRDMA_ACCESS_ALL          0xfu

/* Registration flags. */
#define RPCRDMA_MR_DURABLE (1u << 0) /* backed by durable_fd at durable_offset;
					target of Commits for persistence
					(verbs: IBV_ACCESS_FLUSH_PERSISTENT) */
#define RPCRDMA_MR_VISIBLE (1u << 1) /* target of Commits for global visibility
					(RPCRDMA_CAP_COMMIT_VISIBLE; verbs:
					IBV_ACCESS_FLUSH_GLOBAL). Soft: only
					with DURABLE (its Commits always
					persist), else -EOPNOTSUPP */

/* A registration request. [addr, addr + length) must be mapped memory of the
 * caller. Durable: the range is a MAP_SHARED mapping of @durable_fd, @addr
 * corresponding to file offset @durable_offset; RDMA Commit on it makes the
 * bytes durable before answering (msync; a persistent-memory flush on DAX).
 * A zero @length is refused (-EINVAL). */
struct rpcrdma_mr_attr {
	void *addr;
	uint64_t length;
	uint32_t access;       /* RPCRDMA_ACCESS_* */
	uint32_t flags;        /* RPCRDMA_MR_* */
	int durable_fd;
	uint64_t durable_offset;
};

/* Long-lived registration: STag valid until re-registration or dereg; it is
 * never invalidated by a peer (Send with Invalidate naming it fails on the
 * peer's side with "STag cannot be invalidated"). Borrows @attr. */
RPCRDMA_API int rpcrdma_reg_mr(struct rpcrdma_pd *pd, const struct rpcrdma_mr_attr *attr,
			       struct rpcrdma_mr **out);
/* Convenience: a non-durable registration. */
RPCRDMA_API int rpcrdma_reg_mr_simple(struct rpcrdma_pd *pd, void *addr, uint64_t length,
				      uint32_t access, struct rpcrdma_mr **out);
/* Re-registers @mr with new attributes: the old STag stops granting access
 * and a new STag with a new key is issued (read it back with
 * rpcrdma_mr_lkey/rkey). On failure the old registration is unchanged. */
RPCRDMA_API int rpcrdma_rereg_mr(struct rpcrdma_mr *mr, const struct rpcrdma_mr_attr *attr);
/* -EBUSY while windows bound through it remain valid. */
RPCRDMA_API int rpcrdma_dereg_mr(struct rpcrdma_mr *mr);
RPCRDMA_API uint32_t rpcrdma_mr_lkey(const struct rpcrdma_mr *mr);
RPCRDMA_API uint32_t rpcrdma_mr_rkey(const struct rpcrdma_mr *mr);
RPCRDMA_API void *rpcrdma_mr_addr(const struct rpcrdma_mr *mr);
RPCRDMA_API uint64_t rpcrdma_mr_length(const struct rpcrdma_mr *mr);
/* The Tagged Offset a peer names the first byte of @mr with (byte i is at
 * offset + i): what goes into the chunk segments and push regions given to
 * peers. Local SGEs and window binds keep using virtual addresses. The soft
 * provider draws it at random (a new one at each rereg), so no address of
 * this process reaches a peer; rdma-core (verbs) registrations use the
 * virtual address. */
RPCRDMA_API uint64_t rpcrdma_mr_remote_offset(const struct rpcrdma_mr *mr);

/* Invalidatable registrations: memory windows (type 2, QP-bound: FRWR/MW on
 * hardware). Allocated unbound; RPCRDMA_WR_BIND_MW over a range of an MR
 * that has RPCRDMA_ACCESS_MW_BIND makes a new STag (new key) valid for the
 * QP it was bound on; RPCRDMA_WR_LOCAL_INV or a peer's Send with Invalidate
 * ends it. Needs RPCRDMA_CAP_INVALIDATABLE (-EOPNOTSUPP otherwise). */
RPCRDMA_API int rpcrdma_mw_alloc(struct rpcrdma_pd *pd, struct rpcrdma_mw **out);
RPCRDMA_API int rpcrdma_mw_free(struct rpcrdma_mw *mw);
/* The window's current STag: after a successful post of a bind, the STag of
 * that bind (valid once the bind executes, which precedes every later WR on
 * the same send queue). */
RPCRDMA_API uint32_t rpcrdma_mw_rkey(const struct rpcrdma_mw *mw);
/* The Tagged Offset of the first byte of the window's latest bind (set with
 * the STag when the bind is posted; the bind's addr is a virtual address in
 * the MR). Random on the soft provider, the bind address on verbs. */
RPCRDMA_API uint64_t rpcrdma_mw_remote_offset(const struct rpcrdma_mw *mw);

/* Durable memory helper: creates or opens @path, sizes it to @size bytes
 * (never shrinking existing data below @size), maps it MAP_SHARED read/write.
 * The result is registered with RPCRDMA_MR_DURABLE, durable_fd = map->fd,
 * durable_offset = offset of addr within the map. @path may also name a
 * device-DAX character device (/dev/daxX.Y: persistent memory mapped
 * directly, which verbs devices such as rxe can persist with FLUSH): it is
 * not resized, and @size must be a multiple of its alignment (mmap answers
 * -EINVAL otherwise). Any other kind of file: -EINVAL. */
struct rpcrdma_durable_map {
	void *addr;
	uint64_t length;
	int fd;
};
RPCRDMA_API int rpcrdma_durable_map(const char *path, uint64_t size,
				    struct rpcrdma_durable_map *out);
/* Flushes (msync MS_SYNC) [addr, addr+len) of a durable map. */
RPCRDMA_API int rpcrdma_durable_sync(void *addr, uint64_t len);
RPCRDMA_API int rpcrdma_durable_unmap(struct rpcrdma_durable_map *map);

/* Fills an rpcrdma_mr_attr for [addr, addr+len) inside @map. -ERANGE if the
 * range is outside the map. */
RPCRDMA_API int rpcrdma_durable_mr_attr(const struct rpcrdma_durable_map *map, void *addr,
					uint64_t len, uint32_t access,
					struct rpcrdma_mr_attr *attr);

/* ---- completion queues ---------------------------------------------------- */

enum rpcrdma_wc_status {
	RPCRDMA_WC_SUCCESS = 0,
	RPCRDMA_WC_LOC_LEN_ERR,      /* receive buffer too small, SGE too long */
	RPCRDMA_WC_LOC_QP_OP_ERR,    /* malformed WR */
	RPCRDMA_WC_LOC_PROT_ERR,     /* lkey invalid, bounds, access, PD */
	RPCRDMA_WC_WR_FLUSH_ERR,     /* QP entered the error state */
	RPCRDMA_WC_MW_BIND_ERR,
	RPCRDMA_WC_REM_INV_REQ_ERR,  /* peer said: invalid request / opcode */
	RPCRDMA_WC_REM_ACCESS_ERR,   /* peer said: STag, bounds, access, PD */
	RPCRDMA_WC_REM_OP_ERR,       /* peer said: operation error */
	RPCRDMA_WC_REM_ABORT_ERR,    /* peer terminated the connection */
	RPCRDMA_WC_INV_STAG_ERR,     /* Send with Invalidate named a bad STag */
	RPCRDMA_WC_COMMIT_ERR,       /* Commit Response with non-zero Status */
	RPCRDMA_WC_RETRY_EXC_ERR,    /* transport timeout */
	RPCRDMA_WC_FATAL_ERR,
	RPCRDMA_WC_GENERAL_ERR,
};

enum rpcrdma_wc_opcode {
	RPCRDMA_WC_SEND = 1,
	RPCRDMA_WC_RDMA_WRITE,
	RPCRDMA_WC_RDMA_READ,
	RPCRDMA_WC_COMMIT,
	RPCRDMA_WC_BIND_MW,
	RPCRDMA_WC_LOCAL_INV,
	RPCRDMA_WC_RECV,
};

#define RPCRDMA_WC_WITH_INV   (1u << 0) /* receive of Send with Invalidate */
#define RPCRDMA_WC_SOLICITED  (1u << 1) /* receive of Send with Solicited Event */

struct rpcrdma_wc {
	uint64_t wr_id;
	enum rpcrdma_wc_status status;
	enum rpcrdma_wc_opcode opcode;  /* valid on success (verbs leaves it
					   undefined on errors; soft sets it) */
	uint32_t byte_len;              /* RECV: bytes received; READ: bytes read */
	uint32_t flags;                 /* RPCRDMA_WC_WITH_INV, _SOLICITED */
	uint32_t invalidated_stag;      /* with RPCRDMA_WC_WITH_INV */
	uint32_t remote_status;         /* COMMIT_ERR: the peer's Status */
	uint32_t vendor_err;            /* provider detail (verbs vendor_err,
					   soft: Terminate layer/type/code) */
	struct rpcrdma_qp *qp;
};

struct rpcrdma_cq_attr {
	uint32_t cqe;          /* capacity; overrun is an error state */
	void *user_ctx;
};

RPCRDMA_API int rpcrdma_cq_create(struct rpcrdma_context *ctx, const struct rpcrdma_cq_attr *attr,
				  struct rpcrdma_cq **out);
/* -EBUSY while a QP uses it. */
RPCRDMA_API int rpcrdma_cq_destroy(struct rpcrdma_cq *cq);
/* Moves up to @n completions to @wc; returns the count (0 = empty).
 * -EOVERFLOW once completions were lost to an overrun (after the ones still
 * held were returned): the CQ is then unusable, destroy it. Soft: its QPs
 * are then in the error state, their ids told RPCRDMA_CM_DISCONNECTED with
 * -EOVERFLOW (verbs: IBV_EVENT_CQ_ERR). */
RPCRDMA_API int rpcrdma_cq_poll(struct rpcrdma_cq *cq, int n, struct rpcrdma_wc *wc);
/* Requests one notification on the fd for the next completion (any, or only
 * solicited receives and errors when @solicited_only). Completions already
 * in the CQ do not notify: arm, then poll again before waiting. */
RPCRDMA_API int rpcrdma_cq_arm(struct rpcrdma_cq *cq, bool solicited_only);
/* A file descriptor that becomes readable when an armed notification fires
 * (the completion channel on verbs). Owned by the CQ. Soft: an epoll fd that
 * is also readable while data for the CQ's QPs waits in their sockets; the
 * wake-up may carry no completion yet: rpcrdma_cq_get_event and
 * rpcrdma_cq_poll receive that data in the calling thread. A consumer that
 * arms must come back (get_event or poll) when the fd is readable: an armed
 * or recently polled soft CQ is served by its consumer, not by the
 * provider's thread. */
RPCRDMA_API int rpcrdma_cq_fd(struct rpcrdma_cq *cq);
/* Consumes a pending notification without blocking: 1 if one was consumed,
 * 0 if none. Call it when the fd is readable, then arm, then poll. */
RPCRDMA_API int rpcrdma_cq_get_event(struct rpcrdma_cq *cq);
RPCRDMA_API void *rpcrdma_cq_user_ctx(const struct rpcrdma_cq *cq);
/* Blocking poll: moves up to @n (>= 1) completions to @wc and returns the
 * count once at least one is there, or 0 when @timeout_ms passed (-1: no
 * limit). The caller sleeps in the kernel; software providers progress the
 * CQ's connections in the waiting thread (soft: it waits on the QPs'
 * sockets and reads them itself, no thread hop). Same one-consumer rule as
 * rpcrdma_cq_poll; it may consume a pending notification (as get_event). */
RPCRDMA_API int rpcrdma_cq_wait(struct rpcrdma_cq *cq, int n, struct rpcrdma_wc *wc,
				int timeout_ms);

/* ---- queue pairs ------------------------------------------------------------ */

struct rpcrdma_qp_attr {
	struct rpcrdma_cq *send_cq;
	struct rpcrdma_cq *recv_cq;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline;
	bool sq_sig_all;       /* every send WR completes (else only SIGNALED) */
	void *user_ctx;
	/* Receives come from this shared receive queue (RPCRDMA_CAP_SRQ; NULL:
	 * the QP's own, max_recv_wr / max_recv_sge of them). Its Receive
	 * completions still go to @recv_cq, naming the QP; rpcrdma_post_recv
	 * on the QP answers -EINVAL. Without RPCRDMA_CAP_SRQ_ANY_PD the QP
	 * must be created in the SRQ's PD (-EINVAL otherwise). */
	struct rpcrdma_srq *srq;
};

/* -ENOSPC when the depths of the QP's work queues that complete on a CQ
 * (send queue on send_cq, its own receive queue on recv_cq; an SRQ's
 * Receives: soft, bounded by the receive quota instead; verbs, the SRQ's
 * depth once per CQ), with those of the CQ's other QPs, exceed the CQ's
 * cqe (an overrun would be possible); -EIO on a CQ that overran or failed.
 * Both providers (docs/rdma-provider.md "CQ sizing"). */
RPCRDMA_API int rpcrdma_qp_create(struct rpcrdma_pd *pd, const struct rpcrdma_qp_attr *attr,
				  struct rpcrdma_qp **out);
/* The QP must not be bound to a live cm id (disconnect + destroy the id
 * first, or -EBUSY). Work requests still queued are dropped without
 * completions. */
RPCRDMA_API int rpcrdma_qp_destroy(struct rpcrdma_qp *qp);
/* The capacities actually granted (may exceed the request). */
RPCRDMA_API int rpcrdma_qp_query(struct rpcrdma_qp *qp, struct rpcrdma_qp_attr *attr);
RPCRDMA_API void *rpcrdma_qp_user_ctx(const struct rpcrdma_qp *qp);
/* Enables (or disables) RDMA Commit on @qp, both ways: incoming Commit
 * Requests are served and Commit WRs may be posted. Call it once the upper
 * layer knows both peers advertise Commit (see RPCRDMA_CONN_COMMIT); any
 * time, before or after the connection is established. Disabled, incoming
 * 0xC/0xD draw the unexpected-opcode Terminate and posting a Commit answers
 * -EOPNOTSUPP. -EOPNOTSUPP when the provider has no RPCRDMA_CAP_COMMIT. */
RPCRDMA_API int rpcrdma_qp_set_commit(struct rpcrdma_qp *qp, bool enable);

/* Scatter/gather element: local memory named by an MR's lkey. A zero length
 * element is skipped (its lkey is not checked). */
struct rpcrdma_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* A remote region of a Commit (draft-talpey-rdma-commit section 4). */
struct rpcrdma_remote_region {
	uint32_t stag;
	uint32_t length;
	uint64_t offset;
};

enum rpcrdma_wr_opcode {
	RPCRDMA_WR_SEND = 1,         /* RDMAP Send (or Send+SE with SOLICITED) */
	RPCRDMA_WR_SEND_WITH_INV,    /* Send with Invalidate (+SE with SOLICITED) */
	RPCRDMA_WR_RDMA_WRITE,
	RPCRDMA_WR_RDMA_READ,        /* sg_list is the sink, needs LOCAL_WRITE */
	RPCRDMA_WR_RDMA_COMMIT,      /* needs RPCRDMA_CAP_COMMIT on the connection */
	RPCRDMA_WR_BIND_MW,
	RPCRDMA_WR_LOCAL_INV,
};

/* Send WR flags. */
#define RPCRDMA_SEND_SIGNALED  (1u << 0) /* produce a completion on success */
#define RPCRDMA_SEND_SOLICITED (1u << 1) /* Send with Solicited Event */
#define RPCRDMA_SEND_INLINE    (1u << 2) /* copy payload at post time */
#define RPCRDMA_SEND_FENCE     (1u << 3) /* wait for prior Reads/Commits */
#define RPCRDMA_SEND_VISIBLE   (1u << 4) /* Commit only: global visibility is
					    enough (verbs: IBV_FLUSH_GLOBAL, the
					    regions need RPCRDMA_MR_VISIBLE);
					    without: persistence. Soft sends its
					    one (persistent) Commit */

/* A send-queue work request. Every field (and sg_list, commit regions) is
 * borrowed for the duration of the post only: the provider copies what it
 * needs, but the memory the SGEs name must stay registered and untouched
 * until the WR completes. Errors always produce a completion (signaled or
 * not) and move the QP to the error state, flushing the rest. */
struct rpcrdma_send_wr {
	uint64_t wr_id;
	struct rpcrdma_send_wr *next;
	const struct rpcrdma_sge *sg_list;
	uint32_t num_sge;
	enum rpcrdma_wr_opcode opcode;
	uint32_t flags;                 /* RPCRDMA_SEND_* */
	union {
		struct {
			uint32_t invalidate_stag;   /* SEND_WITH_INV */
		} send;
		struct {
			uint64_t remote_offset;     /* Tagged Offset */
			uint32_t stag;
		} rdma;                             /* RDMA_WRITE, RDMA_READ */
		struct {
			const struct rpcrdma_remote_region *regions;
			uint32_t num_regions;
		} commit;
		struct {
			struct rpcrdma_mw *mw;
			struct rpcrdma_mr *mr;      /* parent, with MW_BIND */
			uint64_t addr;
			uint64_t length;
			uint32_t access;            /* REMOTE_READ / REMOTE_WRITE */
		} bind;
		struct {
			uint32_t stag;
		} local_inv;
	} u;
};

struct rpcrdma_recv_wr {
	uint64_t wr_id;
	struct rpcrdma_recv_wr *next;
	const struct rpcrdma_sge *sg_list;
	uint32_t num_sge;
};

/* Posts a chain of send WRs. On failure returns a negative errno and sets
 * *@bad_wr (if non-NULL) to the first WR not posted; the ones before it were
 * posted. -ENOTCONN before the QP is connected; -ENOMEM queue full;
 * -EINVAL malformed WR; -EOPNOTSUPP opcode not supported here. */
RPCRDMA_API int rpcrdma_post_send(struct rpcrdma_qp *qp, struct rpcrdma_send_wr *wr,
				  struct rpcrdma_send_wr **bad_wr);
/* Receives may be posted as soon as the QP exists (before connecting). */
RPCRDMA_API int rpcrdma_post_recv(struct rpcrdma_qp *qp, struct rpcrdma_recv_wr *wr,
				  struct rpcrdma_recv_wr **bad_wr);

/* ---- shared receive queues ------------------------------------------------- */

/* One queue of Receives many QPs draw from (verbs' SRQ): a Send arriving on
 * any of its QPs takes the oldest Receive posted; its completion goes to
 * that QP's receive CQ with that QP in wc.qp. A message that finds it
 * empty is a Receive overrun of that QP's connection (iWARP: Terminate,
 * the connection ends; IB: receiver-not-ready retries). The consumer is
 * responsible for keeping enough posted: the limit event tells when fewer
 * than a low-water mark remain. */
struct rpcrdma_srq_attr {
	uint32_t max_wr;       /* Receives it can hold (granted: may be more) */
	uint32_t max_sge;      /* per Receive */
	uint32_t srq_limit;    /* armed limit (rpcrdma_srq_arm_limit); 0: none */
	void *user_ctx;
};

/* Creates an SRQ on @pd: the Receives posted to it name memory of @pd.
 * -EOPNOTSUPP without RPCRDMA_CAP_SRQ, -EINVAL (max_wr 0 or above
 * caps.max_srq_wr). */
RPCRDMA_API int rpcrdma_srq_create(struct rpcrdma_pd *pd, const struct rpcrdma_srq_attr *attr,
				   struct rpcrdma_srq **out);
/* -EBUSY while a QP uses it. Receives still posted are dropped without
 * completions. */
RPCRDMA_API int rpcrdma_srq_destroy(struct rpcrdma_srq *srq);
/* The granted max_wr and max_sge, and the limit armed now (0: none). */
RPCRDMA_API int rpcrdma_srq_query(struct rpcrdma_srq *srq, struct rpcrdma_srq_attr *attr);
RPCRDMA_API void *rpcrdma_srq_user_ctx(const struct rpcrdma_srq *srq);
/* Posts a chain of Receives (as rpcrdma_post_recv; -ENOMEM when full). */
RPCRDMA_API int rpcrdma_post_srq_recv(struct rpcrdma_srq *srq, struct rpcrdma_recv_wr *wr,
				      struct rpcrdma_recv_wr **bad_wr);
/* Arms the limit event (verbs: ibv_modify_srq IBV_SRQ_LIMIT): once fewer
 * than @limit Receives are posted, the event fires, once, and the limit is
 * disarmed (arm it again after refilling). 0 disarms. -EINVAL when @limit
 * exceeds max_wr. */
RPCRDMA_API int rpcrdma_srq_arm_limit(struct rpcrdma_srq *srq, uint32_t limit);
/* Consumes the limit event without blocking: 1 if it fired since it was
 * armed (verbs: IBV_EVENT_SRQ_LIMIT_REACHED read from the context's
 * asynchronous events), 0 if not. */
RPCRDMA_API int rpcrdma_srq_get_event(struct rpcrdma_srq *srq);

/* Per-connection bound on a shared queue (RPCRDMA_CAP_RECV_QUOTA): from
 * the first call on, @qp may take only as many Receives from its SRQ as
 * the calls added in all (each message it receives takes one); a message
 * beyond is an overrun of that connection alone (Terminate, "no buffer for
 * MSN", as an empty queue) and never takes a Receive meant for another
 * connection. An upper layer that grants its peer credits adds each grant's
 * increase before the peer can learn of it. -EINVAL without an SRQ,
 * -EOPNOTSUPP when the provider cannot bound it (verbs: a device takes
 * Receives from an SRQ with no per-QP limit; detect overruns in software,
 * docs/protocol.md "Credits"). */
RPCRDMA_API int rpcrdma_qp_recv_quota(struct rpcrdma_qp *qp, uint32_t add);

/* ---- connection manager ------------------------------------------------------ */

enum rpcrdma_cm_event_type {
	RPCRDMA_CM_CONNECT_REQUEST = 1, /* on a listener: new id, peer's data */
	RPCRDMA_CM_ESTABLISHED,         /* both sides; active side gets the
					   accept's private data */
	RPCRDMA_CM_REJECTED,            /* active side: peer's reject data */
	RPCRDMA_CM_UNREACHABLE,         /* active side: no route / no listener /
					   timeout (status says which) */
	RPCRDMA_CM_DISCONNECTED,        /* the connection is gone */
	RPCRDMA_CM_ERROR,               /* protocol error (status) */
};

/* Connection flags (provider-specific bits; others ignore them). */
#define RPCRDMA_CONN_SOFT_CRC      (1u << 0) /* soft: request/accept MPA CRC */
#define RPCRDMA_CONN_SOFT_MPA_REV1 (1u << 1) /* soft: MPA revision 1 (tests) */
/* RDMA Commit (draft-talpey-rdma-commit) is never negotiated by the provider:
 * the upper layer advertises it in its own private data (the project's
 * extension block, src/proto/privdata.h) and uses it only when both peers
 * advertise it. This flag tells the provider what the upper layer did:
 *  - connect: "my private data offers Commit". From establishment on the QP
 *    accepts incoming Commit Requests (the peer may send one as soon as it
 *    has seen our offer); posting Commits stays refused (-EOPNOTSUPP) until
 *    the upper layer has read the peer's accept data and calls
 *    rpcrdma_qp_set_commit(qp, true) (or false if the peer did not agree).
 *  - accept: "the requester offered Commit and my accept data agrees". The
 *    QP accepts and may post Commits from establishment on.
 * Without it (and without rpcrdma_qp_set_commit) an incoming Commit Request
 * or Response is an unexpected opcode and draws the Terminate a peer that
 * does not implement Commit (Linux siw) would send. Providers without
 * RPCRDMA_CAP_COMMIT ignore the flag. */
#define RPCRDMA_CONN_COMMIT        (1u << 2)

struct rpcrdma_conn_param {
	const void *private_data;
	uint16_t private_data_len;  /* ≤ caps max for this message */
	uint16_t responder_resources; /* IRD: Reads/Commits we serve at once */
	uint16_t initiator_depth;     /* ORD: Reads/Commits we issue at once */
	uint32_t flags;               /* RPCRDMA_CONN_* */
	uint32_t timeout_ms;          /* connect/accept handshake; 0 = default */
	/* connect only: local address to connect from (selects the device
	 * with rdma_cm; soft binds the TCP socket); NULL = any. Borrowed. */
	const struct sockaddr *src_addr;
	socklen_t src_addrlen;
};

struct rpcrdma_cm_event {
	enum rpcrdma_cm_event_type type;
	int status;                   /* 0 or negative errno (REJECTED:
					 -ECONNREFUSED; UNREACHABLE: -ETIMEDOUT,
					 -ECONNREFUSED, -ENETUNREACH; ...) */
	struct rpcrdma_cm_id *id;     /* the connection (new one for requests) */
	struct rpcrdma_cm_id *listen_id; /* CONNECT_REQUEST: the listener */
	void *user_ctx;               /* of id (of listen_id for requests) */
	uint16_t peer_ird;            /* peer's responder resources */
	uint16_t peer_ord;            /* peer's initiator depth */
	uint16_t private_data_len;
	uint8_t private_data[RPCRDMA_PRIVATE_DATA_MAX];
};

RPCRDMA_API int rpcrdma_cm_channel_create(struct rpcrdma_context *ctx,
					  struct rpcrdma_cm_channel **out);
/* -EBUSY while ids of the channel remain. */
RPCRDMA_API int rpcrdma_cm_channel_destroy(struct rpcrdma_cm_channel *ch);
/* Readable while events are pending. Owned by the channel. */
RPCRDMA_API int rpcrdma_cm_channel_fd(struct rpcrdma_cm_channel *ch);
/* Takes the next event without blocking: 0 and *@ev filled, or -EAGAIN. */
RPCRDMA_API int rpcrdma_cm_get_event(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev);

/* Listens on @addr (port 0 picks one: read it with rpcrdma_cm_local_addr).
 * @backlog: the kernel's queue of connections not yet accepted (soft: 0
 * means 1024; a full queue makes the kernel drop SYNs, docs/security.md
 * "Limits"). Soft: at most 128 accepted connections may wait for their MPA
 * Request at once (one more closes the oldest), each at most 10 s. */
RPCRDMA_API int rpcrdma_listen(struct rpcrdma_cm_channel *ch, const struct sockaddr *addr,
			       socklen_t addrlen, int backlog, void *user_ctx,
			       struct rpcrdma_cm_id **out);
/* Starts connecting @qp to @dst; the outcome is an ESTABLISHED, REJECTED,
 * UNREACHABLE or ERROR event. Borrows @param (private data copied). */
RPCRDMA_API int rpcrdma_connect(struct rpcrdma_cm_channel *ch, struct rpcrdma_qp *qp,
				const struct sockaddr *dst, socklen_t dstlen,
				const struct rpcrdma_conn_param *param, void *user_ctx,
				struct rpcrdma_cm_id **out);
/* Accepts a CONNECT_REQUEST id onto @qp; ESTABLISHED follows. */
RPCRDMA_API int rpcrdma_accept(struct rpcrdma_cm_id *id, struct rpcrdma_qp *qp,
			       const struct rpcrdma_conn_param *param);
/* Rejects a CONNECT_REQUEST id with private data (may be NULL/0). The id
 * must still be destroyed. */
RPCRDMA_API int rpcrdma_reject(struct rpcrdma_cm_id *id, const void *private_data,
			       uint16_t private_data_len);
/* Starts an orderly disconnect; the QP flushes; DISCONNECTED follows. */
RPCRDMA_API int rpcrdma_disconnect(struct rpcrdma_cm_id *id);
RPCRDMA_API int rpcrdma_cm_id_destroy(struct rpcrdma_cm_id *id);
RPCRDMA_API void rpcrdma_cm_id_set_user_ctx(struct rpcrdma_cm_id *id, void *user_ctx);
RPCRDMA_API void *rpcrdma_cm_id_user_ctx(const struct rpcrdma_cm_id *id);
RPCRDMA_API int rpcrdma_cm_local_addr(struct rpcrdma_cm_id *id, struct sockaddr_storage *ss);
RPCRDMA_API int rpcrdma_cm_peer_addr(struct rpcrdma_cm_id *id, struct sockaddr_storage *ss);

/* What one connection supports, valid once ESTABLISHED (or on a
 * CONNECT_REQUEST id for the limits). caps.flags is the device's flags
 * narrowed to this connection: on an established connection COMMIT is set
 * only while Commit WRs may be posted on its QP (RPCRDMA_CONN_COMMIT on
 * accept, or rpcrdma_qp_set_commit); on a CONNECT_REQUEST id it says the
 * provider could carry Commit if the upper layers agree (whether the peer
 * implements Commit is for the upper layer to negotiate, RFC 8797 section
 * 5.2). */
struct rpcrdma_conn_info {
	struct rpcrdma_caps caps;
	uint16_t ird;   /* negotiated responder resources */
	uint16_t ord;   /* negotiated initiator depth */
};
RPCRDMA_API int rpcrdma_conn_query(struct rpcrdma_cm_id *id, struct rpcrdma_conn_info *info);

/* ---- names -------------------------------------------------------------------- */

RPCRDMA_API const char *rpcrdma_wc_status_str(enum rpcrdma_wc_status status);
RPCRDMA_API const char *rpcrdma_cm_event_str(enum rpcrdma_cm_event_type type);

#ifdef __cplusplus
}
#endif
#endif
