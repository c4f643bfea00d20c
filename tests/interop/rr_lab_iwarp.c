/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_iwarp: RDMA operations between two peers on the public provider API
 * (include/rpcrdma/rdma.h), each side on any provider: the lab runs our
 * user-space iWARP ("soft": RFC 5044 MPA, RFC 5041 DDP, RFC 5040 RDMAP)
 * against the Linux kernel's siw through rdma-core ("verbs"), in both the
 * client and the server role, with and without MPA CRC, and verbs against
 * verbs on rxe. Checked, byte-exact:
 *   CM      connect/accept with private data both ways (RFC 5044 section 7.1
 *           MPA Request/Reply private data; IB CM on rxe);
 *   SEND    a burst of 32 Sends of 1 .. 4096 bytes client -> server;
 *   READ    each side RDMA Reads the other's 256 KiB buffer (RFC 5040
 *           section 4.4 Read Request / Read Response);
 *   WRITE   each side RDMA Writes the other's buffer, then a Send tells it;
 *           Write placement is complete when the Send arrives (RFC 5040
 *           section 5.5 ordering);
 *   INV     Send with Invalidate (RFC 5040 section 6.10) naming the peer's
 *           memory window STag, when the peer has one (soft and rxe do; siw
 *           offers no memory windows to user space): the receiver sees
 *           RPCRDMA_WC_WITH_INV and the STag it named;
 *   DISC    an orderly disconnect.
 * Output: "ok NAME" / "not ok NAME: why" / "skip NAME: why" lines. Exit 0 all
 * passed; 1 a failure; 77 when the provider or an operation it needs is not
 * available (-ENOENT / -ENODEV / -EOPNOTSUPP): "not yet available".
 *
 * Usage: rr_lab_iwarp server|client -p soft|verbs [-d DEV] -a ADDR -P PORT [-c]
 *   server: listens on ADDR:PORT (PORT 0: a port the system picks, printed
 *   in its "# listening on ADDR:PORT" line); client: connects to ADDR:PORT.
 *   -c asks for MPA CRC (soft provider only; siw honours a peer's request).
 *
 * rping mode: "rping-server" / "rping-client" [-C COUNT] [-S SIZE] speak the
 * wire protocol of rdma-core's rping (librdmacm/examples/rping.c, written
 * here from its description): the client Sends {addr BE64, rkey BE32, size
 * BE32} of its source buffer, the server RDMA Reads it and Sends a 16-byte
 * "go ahead", the client Sends its sink buffer, the server RDMA Writes the
 * data back and Sends "go ahead"; COUNT times, then the client disconnects.
 * Our client checks the echo byte for byte; our server checks that it served
 * COUNT pings and that the client disconnected. This runs our providers
 * against the stock rping on kernel siw/rxe in both roles. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"

#define BUF_LEN (256u * 1024u)
#define RECV_N 64u
#define RECV_LEN 8192u
#define BURST 32u
#define MAGIC 0x52524c42u /* "RRLB" */

enum { M_INFO = 1, M_DATA, M_WROTE, M_INV, M_BYE };

struct msg {
	uint32_t magic, type, index, seed;
	uint32_t buf_stag, inv_stag, buf_len, pad;
	uint64_t buf_addr;
};

struct peer {
	struct rpcrdma_context *ctx;
	struct rpcrdma_caps caps;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *lid, *id;
	struct rpcrdma_mr *buf_mr, *scratch_mr, *recv_mr, *send_mr;
	struct rpcrdma_mw *mw;
	uint8_t *buf, *scratch, *recvs, *sends;
	uint32_t inv_stag, seed;
	struct msg peer_info;
	bool server;
};

static int failures, skips;
static const char *prov = "soft";

static void result(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ok: 1 pass, 0 fail, -1 skip */
static void result(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok == 0)
		failures++;
	if (ok < 0)
		skips++;
	printf("%s %s", ok > 0 ? "ok" : ok == 0 ? "not ok" : "skip", name);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}

static void na(const char *what, int rc)
{
	printf("not yet available: %s provider: %s: %s\n", prov, what, strerror(-rc));
	fflush(stdout);
	exit(77);
}

static void die(const char *what, int rc)
{
	if (rc == -EOPNOTSUPP || rc == -ENOENT || rc == -ENOSYS)
		na(what, rc);
	result(0, what, "%s", strerror(-rc));
	printf("%d failed\n", failures);
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 7;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static bool check_fill(const uint8_t *p, size_t n, uint32_t seed)
{
	uint8_t *w = malloc(n);
	bool ok;

	if (!w)
		return false;
	fill(w, n, seed);
	ok = memcmp(w, p, n) == 0;
	free(w);
	return ok;
}

/* ---- CM and CQ waiting ---- */

static int wait_cm(struct peer *p, enum rpcrdma_cm_event_type want, struct rpcrdma_cm_event *ev,
		   int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int rc = rpcrdma_cm_get_event(p->ch, ev);

		if (rc == 0) {
			if (ev->type == want)
				return 0;
			fprintf(stderr, "cm event %s (status %d), waiting for %s\n",
				rpcrdma_cm_event_str(ev->type), ev->status, rpcrdma_cm_event_str(want));
			return ev->status ? ev->status : -EPROTO;
		}
		if (rc != -EAGAIN)
			return rc;
		if (now_ms() >= end)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = rpcrdma_cm_channel_fd(p->ch), .events = POLLIN};
		poll(&pfd, 1, 100);
	}
}

/* Next completion (any), polling; -ETIMEDOUT after @timeout_ms. */
static int next_wc(struct peer *p, struct rpcrdma_wc *wc, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int n = rpcrdma_cq_poll(p->cq, 1, wc);

		if (n == 1)
			return 0;
		if (n < 0)
			return n;
		if (now_ms() >= end)
			return -ETIMEDOUT;
		usleep(200);
	}
}

/* Waits for the completion of send WR @wr_id, or for a receive (stored in
 * @rwc when wr_id == 0: "any receive"). Sends complete in order, so a
 * receive that arrives first is kept in @pending for the next wait_recv. */
static struct rpcrdma_wc pending[RECV_N];
static unsigned npending;

static int wait_send(struct peer *p, uint64_t wr_id, const char *what)
{
	struct rpcrdma_wc wc;

	for (;;) {
		int rc = next_wc(p, &wc, 30000);

		if (rc) {
			fprintf(stderr, "%s: waiting for completion: %s\n", what, strerror(-rc));
			return rc;
		}
		if (wc.opcode == RPCRDMA_WC_RECV && wc.status == RPCRDMA_WC_SUCCESS) {
			if (npending < RECV_N)
				pending[npending++] = wc;
			continue;
		}
		if (wc.status != RPCRDMA_WC_SUCCESS) {
			fprintf(stderr, "%s: completion wr_id %llu: %s (vendor_err 0x%x)\n", what,
				(unsigned long long)wc.wr_id, rpcrdma_wc_status_str(wc.status),
				wc.vendor_err);
			return -EIO;
		}
		if (wc.wr_id == wr_id)
			return 0;
	}
}

static int wait_recv(struct peer *p, struct rpcrdma_wc *out, const char *what)
{
	if (npending) {
		*out = pending[0];
		memmove(pending, pending + 1, --npending * sizeof(pending[0]));
		return 0;
	}
	for (;;) {
		int rc = next_wc(p, out, 30000);

		if (rc) {
			fprintf(stderr, "%s: waiting for a receive: %s\n", what, strerror(-rc));
			return rc;
		}
		if (out->status != RPCRDMA_WC_SUCCESS) {
			fprintf(stderr, "%s: completion wr_id %llu: %s (vendor_err 0x%x)\n", what,
				(unsigned long long)out->wr_id, rpcrdma_wc_status_str(out->status),
				out->vendor_err);
			return -EIO;
		}
		if (out->opcode == RPCRDMA_WC_RECV)
			return 0;
	}
}

static int post_recv(struct peer *p, uint32_t slot)
{
	struct rpcrdma_sge sge = {.addr = (uintptr_t)(p->recvs + (size_t)slot * RECV_LEN),
				  .length = RECV_LEN, .lkey = rpcrdma_mr_lkey(p->recv_mr)};
	struct rpcrdma_recv_wr wr = {.wr_id = 1000u + slot, .sg_list = &sge, .num_sge = 1};

	return rpcrdma_post_recv(p->qp, &wr, NULL);
}

/* Receives one message of @type; returns a pointer into the receive buffer
 * (valid until the slot is reposted, which this does before returning: the
 * message is copied to @m and the payload to @payload when non-NULL). */
static int recv_msg(struct peer *p, uint32_t type, struct msg *m, uint8_t *payload,
		    uint32_t *len, struct rpcrdma_wc *wcout, const char *what)
{
	struct rpcrdma_wc wc;
	int rc = wait_recv(p, &wc, what);
	uint32_t slot;
	const uint8_t *b;

	if (rc)
		return rc;
	slot = (uint32_t)(wc.wr_id - 1000u);
	if (slot >= RECV_N || wc.byte_len < sizeof(*m)) {
		fprintf(stderr, "%s: bad receive wr_id %llu len %u\n", what,
			(unsigned long long)wc.wr_id, wc.byte_len);
		return -EBADMSG;
	}
	b = p->recvs + (size_t)slot * RECV_LEN;
	memcpy(m, b, sizeof(*m));
	if (payload)
		memcpy(payload, b + sizeof(*m), wc.byte_len - sizeof(*m));
	if (len)
		*len = wc.byte_len - (uint32_t)sizeof(*m);
	if (wcout)
		*wcout = wc;
	rc = post_recv(p, slot);
	if (rc)
		return rc;
	if (m->magic != MAGIC || m->type != type) {
		fprintf(stderr, "%s: got message type %u, wanted %u\n", what, m->type, type);
		return -EBADMSG;
	}
	return 0;
}

static uint64_t send_ids = 1;

/* Sends @m (+ @extra payload bytes from the send buffer); with @inv != 0 as
 * Send with Invalidate of that STag. Waits for its completion. */
static int send_msg(struct peer *p, const struct msg *m, uint32_t extra, uint32_t inv,
		    const char *what)
{
	struct rpcrdma_sge sge = {.addr = (uintptr_t)p->sends,
				  .length = (uint32_t)sizeof(*m) + extra,
				  .lkey = rpcrdma_mr_lkey(p->send_mr)};
	struct rpcrdma_send_wr wr = {.wr_id = ++send_ids, .sg_list = &sge, .num_sge = 1,
				     .opcode = inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND,
				     .flags = RPCRDMA_SEND_SIGNALED};
	int rc;

	wr.u.send.invalidate_stag = inv;
	memcpy(p->sends, m, sizeof(*m));
	rc = rpcrdma_post_send(p->qp, &wr, NULL);
	if (rc) {
		fprintf(stderr, "%s: post_send: %s\n", what, strerror(-rc));
		return rc;
	}
	return wait_send(p, wr.wr_id, what);
}

static int rdma_op(struct peer *p, bool read, void *local, uint32_t lkey, uint32_t len,
		   uint32_t stag, uint64_t addr, const char *what)
{
	struct rpcrdma_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct rpcrdma_send_wr wr = {.wr_id = ++send_ids, .sg_list = &sge, .num_sge = 1,
				     .opcode = read ? RPCRDMA_WR_RDMA_READ : RPCRDMA_WR_RDMA_WRITE,
				     .flags = RPCRDMA_SEND_SIGNALED};
	int rc;

	wr.u.rdma.stag = stag;
	wr.u.rdma.remote_offset = addr;
	rc = rpcrdma_post_send(p->qp, &wr, NULL);
	if (rc) {
		fprintf(stderr, "%s: post_send: %s\n", what, strerror(-rc));
		return rc;
	}
	return wait_send(p, wr.wr_id, what);
}

/* ---- setup ---- */

static void *xalloc(size_t n)
{
	void *b = NULL;

	if (posix_memalign(&b, 4096, n))
		die("posix_memalign", -ENOMEM);
	memset(b, 0, n);
	return b;
}

static void setup(struct peer *p, const char *dev)
{
	struct rpcrdma_open_attr oa = {.device = dev};
	struct rpcrdma_cq_attr ca = {.cqe = 1024};
	int rc;

	rc = rpcrdma_open(prov, &oa, &p->ctx);
	if (rc)
		na("rpcrdma_open", rc);
	rc = rpcrdma_query(p->ctx, &p->caps);
	if (rc)
		die("rpcrdma_query", rc);
	printf("# %s device %s transport %d flags 0x%x max_ird %u max_ord %u\n", p->caps.provider,
	       p->caps.device, p->caps.transport, p->caps.flags, p->caps.max_ird, p->caps.max_ord);
	if ((rc = rpcrdma_pd_alloc(p->ctx, &p->pd)) || (rc = rpcrdma_cq_create(p->ctx, &ca, &p->cq)))
		die("pd/cq", rc);
	p->buf = xalloc(BUF_LEN);
	p->scratch = xalloc(BUF_LEN);
	p->recvs = xalloc((size_t)RECV_N * RECV_LEN);
	p->sends = xalloc(RECV_LEN);
	fill(p->buf, BUF_LEN, p->seed);
	if ((rc = rpcrdma_reg_mr_simple(p->pd, p->buf, BUF_LEN,
					RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE |
					RPCRDMA_ACCESS_REMOTE_READ |
					((p->caps.flags & RPCRDMA_CAP_INVALIDATABLE) ? RPCRDMA_ACCESS_MW_BIND : 0),
					&p->buf_mr)) ||
	    (rc = rpcrdma_reg_mr_simple(p->pd, p->scratch, BUF_LEN, RPCRDMA_ACCESS_LOCAL_WRITE,
					&p->scratch_mr)) ||
	    (rc = rpcrdma_reg_mr_simple(p->pd, p->recvs, (uint64_t)RECV_N * RECV_LEN,
					RPCRDMA_ACCESS_LOCAL_WRITE, &p->recv_mr)) ||
	    (rc = rpcrdma_reg_mr_simple(p->pd, p->sends, RECV_LEN, RPCRDMA_ACCESS_LOCAL_WRITE,
					&p->send_mr)))
		die("reg_mr", rc);
	if ((rc = rpcrdma_cm_channel_create(p->ctx, &p->ch)))
		die("cm_channel_create", rc);
}

static void make_qp(struct peer *p)
{
	struct rpcrdma_qp_attr qa = {.send_cq = p->cq, .recv_cq = p->cq, .max_send_wr = 128,
				     .max_recv_wr = RECV_N, .max_send_sge = 2, .max_recv_sge = 1,
				     .sq_sig_all = true};
	int rc = rpcrdma_qp_create(p->pd, &qa, &p->qp);

	if (rc)
		die("qp_create", rc);
	for (uint32_t i = 0; i < RECV_N; i++)
		if ((rc = post_recv(p, i)))
			die("post_recv", rc);
}

/* An invalidatable STag over our buffer (memory window), when offered. */
static void make_mw(struct peer *p)
{
	struct rpcrdma_send_wr wr = {.wr_id = ++send_ids, .opcode = RPCRDMA_WR_BIND_MW,
				     .flags = RPCRDMA_SEND_SIGNALED};
	int rc;

	if (!(p->caps.flags & RPCRDMA_CAP_INVALIDATABLE))
		return;
	rc = rpcrdma_mw_alloc(p->pd, &p->mw);
	if (rc) {
		printf("# mw_alloc: %s\n", strerror(-rc));
		return;
	}
	wr.u.bind.mw = p->mw;
	wr.u.bind.mr = p->buf_mr;
	wr.u.bind.addr = (uintptr_t)p->buf;
	wr.u.bind.length = 4096;
	wr.u.bind.access = RPCRDMA_ACCESS_REMOTE_WRITE | RPCRDMA_ACCESS_REMOTE_READ;
	rc = rpcrdma_post_send(p->qp, &wr, NULL);
	if (rc == 0)
		rc = wait_send(p, wr.wr_id, "bind memory window");
	result(rc == 0, "BIND memory window", "rc %d stag 0x%08x", rc, rpcrdma_mw_rkey(p->mw));
	if (rc == 0)
		p->inv_stag = rpcrdma_mw_rkey(p->mw);
}

static const char pd_client[] = "rr-lab client private data";
static const char pd_server[] = "rr-lab server private data!";

static int parse_addr(const char *a, int port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, a, &sin->sin_addr) == 1 ? 0 : -EINVAL;
}

/* ---- the exchange ---- */

static void send_info(struct peer *p)
{
	struct msg m = {.magic = MAGIC, .type = M_INFO, .seed = p->seed,
			.buf_stag = rpcrdma_mr_rkey(p->buf_mr), .inv_stag = p->inv_stag,
			.buf_len = BUF_LEN, .buf_addr = rpcrdma_mr_remote_offset(p->buf_mr)};
	int rc = send_msg(p, &m, 0, 0, "send INFO");

	if (rc)
		die("send INFO", rc);
}

static void recv_info(struct peer *p)
{
	int rc = recv_msg(p, M_INFO, &p->peer_info, NULL, NULL, NULL, "receive INFO");

	result(rc == 0 && p->peer_info.buf_len == BUF_LEN, "SEND/RECV buffer info", "rc %d", rc);
	if (rc)
		die("receive INFO", rc);
}

/* Read the peer's buffer, check it; write ours over it; tell it. */
static void act(struct peer *p, const char *who)
{
	struct msg m = {.magic = MAGIC, .type = M_WROTE};
	char name[96];
	int rc;

	snprintf(name, sizeof(name), "RDMA READ %u KiB (%s reads)", BUF_LEN / 1024, who);
	memset(p->scratch, 0, BUF_LEN);
	rc = rdma_op(p, true, p->scratch, rpcrdma_mr_lkey(p->scratch_mr), BUF_LEN,
		     p->peer_info.buf_stag, p->peer_info.buf_addr, name);
	result(rc == 0 && check_fill(p->scratch, BUF_LEN, p->peer_info.seed), name, "rc %d", rc);
	if (rc)
		die(name, rc);
	fill(p->scratch, BUF_LEN, p->peer_info.seed + 1);
	snprintf(name, sizeof(name), "RDMA WRITE %u KiB (%s writes)", BUF_LEN / 1024, who);
	rc = rdma_op(p, false, p->scratch, rpcrdma_mr_lkey(p->scratch_mr), BUF_LEN,
		     p->peer_info.buf_stag, p->peer_info.buf_addr, name);
	if (rc)
		die(name, rc);
	rc = send_msg(p, &m, 0, 0, "send WROTE");
	if (rc)
		die("send WROTE", rc);
}

static void check_written(struct peer *p, const char *who)
{
	struct msg m;
	char name[96];
	int rc = recv_msg(p, M_WROTE, &m, NULL, NULL, NULL, "receive WROTE");

	snprintf(name, sizeof(name), "RDMA WRITE %u KiB placed before the Send (%s wrote)",
		 BUF_LEN / 1024, who);
	result(rc == 0 && check_fill(p->buf, BUF_LEN, p->seed + 1), name, "rc %d", rc);
	if (rc)
		die(name, rc);
}

/* Send with Invalidate of the peer's window when it has one. */
static void send_inv(struct peer *p, const char *who)
{
	struct msg m = {.magic = MAGIC, .type = M_INV, .inv_stag = p->peer_info.inv_stag};
	char name[96];
	int rc;

	snprintf(name, sizeof(name), "SEND WITH INVALIDATE (%s sends)", who);
	rc = send_msg(p, &m, 0, p->peer_info.inv_stag, name);
	if (rc)
		die(name, rc);
}

static void recv_inv(struct peer *p, const char *who)
{
	struct rpcrdma_wc wc;
	struct msg m;
	char name[96];
	int rc = recv_msg(p, M_INV, &m, NULL, NULL, &wc, "receive INV");

	snprintf(name, sizeof(name), "SEND WITH INVALIDATE (%s sends)", who);
	if (rc)
		die(name, rc);
	if (!p->inv_stag) {
		result(-1, name, "this side (%s %s) has no memory windows to invalidate", prov,
		       p->caps.device);
		result(!(wc.flags & RPCRDMA_WC_WITH_INV), "plain Send has no WITH_INV flag",
		       "flags 0x%x", wc.flags);
		return;
	}
	result((wc.flags & RPCRDMA_WC_WITH_INV) && wc.invalidated_stag == p->inv_stag, name,
	       "flags 0x%x stag 0x%08x (ours 0x%08x)", wc.flags, wc.invalidated_stag, p->inv_stag);
}

static void burst_send(struct peer *p)
{
	for (uint32_t i = 0; i < BURST; i++) {
		uint32_t len = i == 0 ? 1 : (i * 131u) % 4096u + 1u;
		struct msg m = {.magic = MAGIC, .type = M_DATA, .index = i, .seed = len};
		int rc;

		fill(p->sends + sizeof(m), len, 500 + i);
		rc = send_msg(p, &m, len, 0, "send DATA");
		if (rc)
			die("send DATA burst", rc);
	}
}

static void burst_recv(struct peer *p)
{
	uint8_t *payload = malloc(RECV_LEN);
	unsigned bad = 0;
	int rc = 0;

	for (uint32_t i = 0; i < BURST && rc == 0 && payload; i++) {
		struct msg m;
		uint32_t len = 0;

		rc = recv_msg(p, M_DATA, &m, payload, &len, NULL, "receive DATA");
		if (rc == 0 && (m.index != i || len != m.seed || !check_fill(payload, len, 500 + i)))
			bad++;
	}
	free(payload);
	result(rc == 0 && bad == 0, "SEND x32 of 1..4096 bytes in order, byte-exact",
	       "rc %d bad %u", rc, bad);
	if (rc)
		die("receive DATA burst", rc);
}

static void disconnect(struct peer *p)
{
	struct rpcrdma_cm_event ev;
	int rc = rpcrdma_disconnect(p->id);

	if (rc == 0)
		rc = wait_cm(p, RPCRDMA_CM_DISCONNECTED, &ev, 10000);
	result(rc == 0, "DISCONNECT", "rc %d", rc);
}

static void check_pd(const struct rpcrdma_cm_event *ev, const char *want, const char *name)
{
	/* The peer's private data: ours first (transports may append or pad). */
	bool ok = ev->private_data_len >= strlen(want) &&
		  memcmp(ev->private_data, want, strlen(want)) == 0;

	result(ok, name, "%u bytes", ev->private_data_len);
}

/* ---- rping-compatible peer ---- */

struct rping_info {
	uint64_t buf;  /* big-endian on the wire */
	uint32_t rkey;
	uint32_t size;
};

static void put_be(uint8_t *b, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *b, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | b[i];
	return v;
}

/* Sends a raw 16-byte rping message from the send buffer. */
static int rping_send(struct peer *p, uint64_t addr, uint32_t rkey, uint32_t size)
{
	struct rpcrdma_sge sge = {.addr = (uintptr_t)p->sends, .length = 16,
				  .lkey = rpcrdma_mr_lkey(p->send_mr)};
	struct rpcrdma_send_wr wr = {.wr_id = ++send_ids, .sg_list = &sge, .num_sge = 1,
				     .opcode = RPCRDMA_WR_SEND, .flags = RPCRDMA_SEND_SIGNALED};
	int rc;

	put_be(p->sends, addr, 8);
	put_be(p->sends + 8, rkey, 4);
	put_be(p->sends + 12, size, 4);
	rc = rpcrdma_post_send(p->qp, &wr, NULL);
	return rc ? rc : wait_send(p, wr.wr_id, "rping send");
}

/* Next 16-byte rping message; 1 when the peer disconnected instead. */
static int rping_recv(struct peer *p, struct rping_info *in)
{
	uint64_t end = now_ms() + 30000;

	for (;;) {
		struct rpcrdma_cm_event ev;
		struct rpcrdma_wc wc;
		int n;

		if (npending) {
			wc = pending[0];
			memmove(pending, pending + 1, --npending * sizeof(pending[0]));
			n = 1;
		} else {
			n = rpcrdma_cq_poll(p->cq, 1, &wc);
		}
		if (n < 0)
			return n;
		if (n == 1 && wc.status == RPCRDMA_WC_SUCCESS && wc.opcode == RPCRDMA_WC_RECV) {
			uint32_t slot = (uint32_t)(wc.wr_id - 1000u);
			const uint8_t *b;

			if (slot >= RECV_N || wc.byte_len != 16) {
				fprintf(stderr, "rping: receive of %u bytes (want 16)\n", wc.byte_len);
				return -EBADMSG;
			}
			b = p->recvs + (size_t)slot * RECV_LEN;
			in->buf = get_be(b, 8);
			in->rkey = (uint32_t)get_be(b + 8, 4);
			in->size = (uint32_t)get_be(b + 12, 4);
			return post_recv(p, slot);
		}
		if (n == 1 && wc.status != RPCRDMA_WC_SUCCESS && wc.status != RPCRDMA_WC_WR_FLUSH_ERR) {
			fprintf(stderr, "rping: completion %s\n", rpcrdma_wc_status_str(wc.status));
			return -EIO;
		}
		if (rpcrdma_cm_get_event(p->ch, &ev) == 0) {
			if (ev.type == RPCRDMA_CM_DISCONNECTED)
				return 1;
			fprintf(stderr, "rping: cm event %s\n", rpcrdma_cm_event_str(ev.type));
		}
		if (now_ms() >= end)
			return -ETIMEDOUT;
		if (n == 0)
			usleep(200);
	}
}

/* Our rping server: serve pings until the client disconnects. */
static int rping_serve(struct peer *p, int count)
{
	int pings = 0, rc;

	for (;;) {
		struct rping_info src, sink;
		uint32_t len;

		rc = rping_recv(p, &src);
		if (rc == 1)
			break;
		if (rc)
			return rc;
		len = src.size;
		if (len == 0 || len > BUF_LEN) {
			fprintf(stderr, "rping: bad size %u\n", len);
			return -EBADMSG;
		}
		rc = rdma_op(p, true, p->scratch, rpcrdma_mr_lkey(p->scratch_mr), len, src.rkey,
			     src.buf, "rping RDMA Read");
		rc = rc ? rc : rping_send(p, 0, 0, 0);
		if (rc)
			return rc;
		rc = rping_recv(p, &sink);
		if (rc)
			return rc == 1 ? -ECONNRESET : rc;
		rc = rdma_op(p, false, p->scratch, rpcrdma_mr_lkey(p->scratch_mr),
			     len < sink.size ? len : sink.size, sink.rkey, sink.buf, "rping RDMA Write");
		rc = rc ? rc : rping_send(p, 0, 0, 0);
		if (rc)
			return rc;
		pings++;
	}
	result(count == 0 || pings == count, "rping server: pings served, then disconnect",
	       "%d pings (expected %d)", pings, count);
	return 0;
}

/* Our rping client: COUNT pings of SIZE bytes, each echo checked. */
static int rping_ping(struct peer *p, int count, uint32_t size)
{
	uint8_t *src = p->buf, *sink = p->buf + BUF_LEN / 2;
	uint32_t rkey = rpcrdma_mr_rkey(p->buf_mr);
	/* what the peer names: Tagged Offsets, not our addresses (the soft
	 * provider's are random; docs/security.md) */
	uint64_t to = rpcrdma_mr_remote_offset(p->buf_mr);
	int bad = 0, done = 0, rc = 0;

	for (int i = 0; i < count && rc == 0; i++) {
		struct rping_info ack;
		int n = snprintf((char *)src, size, "rdma-ping-%d: ", i);

		for (uint32_t k = (uint32_t)n; k < size; k++)
			src[k] = (uint8_t)('A' + (k + (uint32_t)i) % 58);
		src[size - 1] = 0;
		memset(sink, 0, size);
		rc = rping_send(p, to, rkey, size);
		rc = rc ? rc : rping_recv(p, &ack);
		rc = rc ? rc : rping_send(p, to + (uint64_t)(sink - src), rkey, size);
		rc = rc ? rc : rping_recv(p, &ack);
		if (rc == 1)
			rc = -ECONNRESET;
		if (rc == 0) {
			done++;
			bad += memcmp(src, sink, size) != 0;
		}
	}
	result(rc == 0 && done == count && bad == 0, "rping client: pings echoed byte-exact",
	       "%d of %d pings of %u bytes, %d mismatched, rc %d", done, count, size, bad, rc);
	return rc;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *addr = NULL;
	struct peer p = {0};
	struct rpcrdma_cm_event ev;
	struct rpcrdma_conn_param cp = {.responder_resources = 16, .initiator_depth = 16};
	struct sockaddr_in sin;
	int port = 0, opt, rc;
	bool crc = false, rping = false;
	int count = 10;
	uint32_t size = 1000;

	if (argc < 2)
		goto usage;
	if (!strncmp(argv[1], "rping-", 6)) {
		rping = true;
		argv[1] += 6;
	}
	p.server = !strcmp(argv[1], "server");
	if (!p.server && strcmp(argv[1], "client"))
		goto usage;
	optind = 2;
	while ((opt = getopt(argc, argv, "p:d:a:P:cC:S:")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'd': dev = optarg; break;
		case 'a': addr = optarg; break;
		case 'P': port = atoi(optarg); break;
		case 'c': crc = true; break;
		case 'C': count = atoi(optarg); break;
		case 'S': size = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (count < 0 || size < 32 || size > BUF_LEN / 2)
		goto usage;
	if (!addr || port < 0 || port > 65535 || (!port && !p.server) ||
	    parse_addr(addr, port, &sin))
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	p.seed = p.server ? 0x5e77e7 : 0xc11e47;
	setup(&p, dev);
	if (crc)
		cp.flags |= RPCRDMA_CONN_SOFT_CRC;

	if (p.server) {
		rc = rpcrdma_listen(p.ch, (struct sockaddr *)&sin, sizeof(sin), 4, NULL, &p.lid);
		if (rc)
			die("listen", rc);
		if (!port) {
			struct sockaddr_storage ss;

			rc = rpcrdma_cm_local_addr(p.lid, &ss);
			if (rc)
				die("local address of the listener", rc);
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		}
		printf("# listening on %s:%d (%s)\n", addr, port, prov);
		rc = wait_cm(&p, RPCRDMA_CM_CONNECT_REQUEST, &ev, 60000);
		if (rc)
			die("CONNECT_REQUEST", rc);
		p.id = ev.id;
		printf("# connect request: peer IRD %u ORD %u\n", ev.peer_ird, ev.peer_ord);
		if (!rping) /* rping sends no private data */
			check_pd(&ev, pd_client, "CM private data client -> server");
		make_qp(&p);
		cp.private_data = pd_server;
		cp.private_data_len = sizeof(pd_server);
		rc = rpcrdma_accept(p.id, p.qp, &cp);
		if (rc == 0)
			rc = wait_cm(&p, RPCRDMA_CM_ESTABLISHED, &ev, 30000);
		result(rc == 0, "ACCEPT -> ESTABLISHED", "rc %d", rc);
		if (rc)
			die("accept", rc);
	} else {
		make_qp(&p);
		cp.private_data = pd_client;
		cp.private_data_len = sizeof(pd_client);
		rc = rpcrdma_connect(p.ch, p.qp, (struct sockaddr *)&sin, sizeof(sin), &cp, NULL, &p.id);
		if (rc)
			die("connect", rc);
		rc = wait_cm(&p, RPCRDMA_CM_ESTABLISHED, &ev, 30000);
		result(rc == 0, "CONNECT -> ESTABLISHED", "rc %d", rc);
		if (rc)
			die("connect", rc);
		if (!rping)
			check_pd(&ev, pd_server, "CM private data server -> client");
	}
	{
		struct rpcrdma_conn_info ci;

		if (rpcrdma_conn_query(p.id, &ci) == 0)
			printf("# connection: ird %u ord %u flags 0x%x\n", ci.ird, ci.ord,
			       ci.caps.flags);
	}
	if (rping) {
		if (p.server) {
			rc = rping_serve(&p, count);
		} else {
			rc = rping_ping(&p, count, size);
			disconnect(&p);
		}
		if (rc)
			result(0, "rping exchange", "%s", strerror(-rc));
		printf("%d failed (rping %s)\n", failures, p.server ? "server" : "client");
		return failures ? 1 : 0;
	}
	make_mw(&p);

	if (p.server) {
		recv_info(&p);
		send_info(&p);
		burst_recv(&p);
		act(&p, "server");
		check_written(&p, "client");
		send_inv(&p, "server");
		recv_inv(&p, "client");
		{
			struct msg m;

			rc = recv_msg(&p, M_BYE, &m, NULL, NULL, NULL, "receive BYE");
			result(rc == 0, "BYE", "rc %d", rc);
		}
		rc = wait_cm(&p, RPCRDMA_CM_DISCONNECTED, &ev, 15000);
		result(rc == 0, "DISCONNECTED by the client", "rc %d", rc);
	} else {
		send_info(&p);
		recv_info(&p);
		burst_send(&p);
		check_written(&p, "server");
		act(&p, "client");
		recv_inv(&p, "server");
		send_inv(&p, "client");
		{
			struct msg m = {.magic = MAGIC, .type = M_BYE};

			rc = send_msg(&p, &m, 0, 0, "send BYE");
			if (rc)
				die("send BYE", rc);
		}
		usleep(200000);
		disconnect(&p);
	}
	printf("%d failed, %d skipped (%s)\n", failures, skips, p.server ? "server" : "client");
	return failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: rr_lab_iwarp [rping-]server|[rping-]client -p soft|verbs [-d DEV] "
			"-a ADDR -P PORT [-c] [-C COUNT] [-S SIZE]\n");
	return 2;
}
