/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the RFC 5531 section 11 record marking codec
 * (src/transport/tcp/rm.h). The first four input bytes configure the
 * decoder (discard oversized records, trust lengths, the largest record,
 * the fragment limit) and a buffer provider that fails some allocations;
 * the rest is the byte stream. The stream is decoded twice: by a plain
 * reference model over the whole input, and by the codec in slices of
 * input-driven sizes, through rr_rm_dec_feed and through
 * rr_rm_dec_space/commit alternately, retrying after each failed
 * allocation. Both must give the same records, discarded-record heads and
 * final error. Every record is then framed again by the encoder with an
 * input-driven fragment size and must decode to the same bytes. The codec
 * must never read or write out of bounds (ASan), leak (every buffer the
 * provider gave is given back or taken), or exceed its limits. */
#include <stdlib.h>

#include "transport/tcp/rm.h"

#define MAX_EVENTS 4096

static void check(int cond)
{
	if (!cond)
		abort();
}

struct event {
	int kind;               /* RR_RM_RECORD, RR_RM_SKIPPED, or a -errno */
	size_t len;             /* record length, or kept head bytes */
	const uint8_t *data;    /* reference: points into its copy */
};

/* ---- reference model: the whole stream at once ---- */

struct ref {
	struct event ev[MAX_EVENTS];
	unsigned nev;
	uint8_t *rec;           /* all record bytes, one after another */
	size_t rec_used;
	uint8_t head[MAX_EVENTS][8];
};

static void ref_decode(struct ref *r, const struct rr_rm_dec_conf *c, const uint8_t *s,
		       size_t len)
{
	size_t pos = 0, cur = 0, head = 0;
	unsigned nfrags = 0;
	bool started = false, skipping = false;

	r->nev = 0;
	r->rec_used = 0;
	while (pos + 4 <= len && r->nev < MAX_EVENTS) {
		uint32_t h = rr_get_be32(s + pos), flen, take;
		bool last;
		struct event *e = &r->ev[r->nev];

		if (!started && !memcmp(s + pos, "MPA ", 4)) {
			*e = (struct event){.kind = -EPROTOTYPE};
			r->nev++;
			return;
		}
		started = true;
		pos += 4;
		last = (h & RR_RM_LAST) != 0;
		flen = h & RR_RM_MAX_FRAG;
		if (c->max_frags && ++nfrags > c->max_frags) {
			*e = (struct event){.kind = -EBADMSG};
			r->nev++;
			return;
		}
		if (!skipping && (flen > c->max_record || cur + flen > c->max_record)) {
			if (!c->skip_oversize) {
				*e = (struct event){.kind = -EMSGSIZE};
				r->nev++;
				return;
			}
			skipping = true;
			head = RR_MIN(cur, (size_t)8);
			memcpy(r->head[r->nev], r->rec + r->rec_used, head);
			cur = 0;
		}
		take = (uint32_t)RR_MIN((size_t)flen, len - pos);
		if (skipping) {
			size_t k = RR_MIN((size_t)(8 - head), (size_t)take);

			memcpy(r->head[r->nev] + head, s + pos, k);
			head += k;
		} else {
			memcpy(r->rec + r->rec_used + cur, s + pos, take);
			cur += take;
		}
		pos += take;
		if (take < flen || !last)
			continue;
		if (skipping) {
			*e = (struct event){.kind = RR_RM_SKIPPED, .len = head,
					    .data = r->head[r->nev]};
		} else {
			*e = (struct event){.kind = RR_RM_RECORD, .len = cur,
					    .data = r->rec + r->rec_used};
			r->rec_used += cur;
		}
		r->nev++;
		cur = head = 0;
		nfrags = 0;
		skipping = false;
	}
}

/* ---- a provider that fails some allocations and counts its buffers ---- */

struct prov {
	unsigned calls, fail_every;
	long live;
};

static uint8_t *p_get(void *arg, size_t min, size_t need, size_t above, size_t *cap)
{
	struct prov *p = arg;

	check(min <= need && min > above);
	if (p->fail_every && ++p->calls % p->fail_every == 0)
		return NULL;
	p->live++;
	*cap = min;
	return malloc(min);
}

static void p_put(void *arg, uint8_t *buf, size_t cap)
{
	struct prov *p = arg;

	(void)cap;
	check(buf != NULL);
	p->live--;
	free(buf);
}

static uint32_t next(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

/* Frames @rec again with fragments of @max_frag and decodes it alone. */
static void round_trip(const uint8_t *rec, size_t len, uint32_t max_frag)
{
	uint8_t hdrs[64][RR_RM_HDR_LEN];
	struct iovec in = {(void *)rec, len}, out[130];
	struct rr_rm_dec_conf c = {.max_record = len, .max_frags = 64};
	struct rr_rm_dec d;
	uint8_t *b;
	size_t blen, cap;
	int n, rc = RR_RM_MORE;

	if (rr_rm_enc_frags(len, max_frag) > 64)
		max_frag = (uint32_t)(len / 63 + 1);
	n = rr_rm_enc_iov(&in, 1, max_frag, hdrs, 64, out, 130);
	check(n > 0);
	rr_rm_dec_init(&d, &c);
	for (int i = 0; i < n; i++) {
		size_t used;

		check(rc == RR_RM_MORE);
		rc = rr_rm_dec_feed(&d, out[i].iov_base, out[i].iov_len, &used);
		check(used == out[i].iov_len);
	}
	check(rc == RR_RM_RECORD);
	b = rr_rm_dec_take(&d, &blen, &cap);
	check(blen == len && (len == 0 || !memcmp(b, rec, len)));
	rr_free(NULL, b);
	rr_rm_dec_fini(&d);
}

/* One step of the codec: @n bytes from @s through feed or space/commit. */
static int step(struct rr_rm_dec *d, const uint8_t *s, size_t n, bool direct, size_t *used)
{
	uint8_t *dst;
	size_t room;
	int rc;

	if (!direct)
		return rr_rm_dec_feed(d, s, n, used);
	*used = 0;
	rc = rr_rm_dec_space(d, &dst, &room);
	if (rc)
		return rc;
	room = RR_MIN(room, n);
	if (dst)
		memcpy(dst, s, room);
	*used = room;
	return rr_rm_dec_commit(d, room);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ref ref;
	struct prov prov = {0};
	struct rr_rm_dec_conf c = {0};
	struct rr_rm_dec d;
	const uint8_t *s;
	size_t len, pos = 0;
	unsigned nev = 0;
	uint32_t seed;
	int rc = RR_RM_MORE;

	if (size < 4)
		return 0;
	c.skip_oversize = data[0] & 1;
	/* trust_len allocates what a header announces: only with small
	 * records (it is for a peer we chose), never 2 GB ones here. */
	c.trust_len = (data[0] & 6) == 2;
	c.max_record = (size_t)data[1] * 8 + ((data[0] & 4) ? 0x7fffff00u : 0);
	c.max_frags = data[2];
	prov.fail_every = data[3] & 7;
	if (prov.fail_every == 1)
		prov.fail_every = 0;
	c.bufs = (struct rr_rm_bufs){.get = p_get, .put = p_put, .arg = &prov};
	s = data + 4;
	len = size - 4;
	seed = (uint32_t)size * 2654435761u ^ data[0];
	ref.rec = malloc(len ? len : 1);
	check(ref.rec != NULL);
	ref_decode(&ref, &c, s, len);

	rr_rm_dec_init(&d, &c);
	while (pos < len) {
		size_t used, n = 1 + next(&seed) % 97;

		rc = step(&d, s + pos, RR_MIN(n, len - pos), next(&seed) & 1, &used);
		pos += used;
		if (rc == -ENOMEM)
			continue;   /* nothing changed: the next try allocates */
		if (rc == RR_RM_RECORD) {
			size_t rlen, cap;
			uint8_t *b = rr_rm_dec_take(&d, &rlen, &cap);

			check(nev < ref.nev && ref.ev[nev].kind == rc);
			check(rlen == ref.ev[nev].len && rlen <= c.max_record && cap >= rlen);
			check(rlen == 0 || !memcmp(b, ref.ev[nev].data, rlen));
			check(rr_rm_dec_idle(&d));
			round_trip(b, rlen, 1 + next(&seed) % 300);
			if (b)
				p_put(&prov, b, cap);
			nev++;
		} else if (rc == RR_RM_SKIPPED) {
			const uint8_t *head;
			unsigned k = rr_rm_dec_skipped(&d, &head);

			check(nev < ref.nev && ref.ev[nev].kind == rc);
			check(k == ref.ev[nev].len && (k == 0 || !memcmp(head, ref.ev[nev].data, k)));
			nev++;
		} else if (rc < 0) {
			check(nev < ref.nev && ref.ev[nev].kind == rc);
			nev++;
			break;
		}
		if (nev == MAX_EVENTS)
			break;
	}
	check(nev == ref.nev);
	rr_rm_dec_fini(&d);
	check(prov.live == 0);
	free(ref.rec);
	return 0;
}
