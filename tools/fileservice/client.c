/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service's client side: one function per procedure over a
 * librpcrdma client (READ into the caller's buffer as the DDP sink, WRITE
 * from the caller's data, LIST with the reply hint that its maximum needs,
 * COMMIT, PUSH_OPEN, ECHO, NULL). Each returns a negative errno for an RPC
 * failure, otherwise the fs_status the server returned (0 = FS_OK). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileservice.h"
#include "rpcrdma/push.h"

/* Runs @call when @rc (the result of building its arguments) is 0, then reads
 * the fs_status that starts every result of the service into *@st and hands
 * out the results' cursor in *@d. */
static int fs_run(struct rpcrdma_call *call, int rc, struct rpcrdma_xdr_dec **d,
		  uint32_t *st)
{
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (rc)
		return rc;
	*d = rpcrdma_call_results(call);
	return rpcrdma_xdr_get_u32(*d, st);
}

/* READ @count bytes at @off into @buf (the DDP sink): *@got bytes, *@eof. */
int fs_read(struct rpcrdma_client *c, const char *path, uint64_t off, void *buf,
	    uint32_t count, uint32_t *got, bool *eof)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	struct rpcrdma_ddp_sink sink = {buf, count};
	uint32_t st = 0, len = 0;
	const void *p;
	bool b = false;
	int rc;

	rc = rpcrdma_call_create(c, FS_READ, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, count);
	rc = rpcrdma_xdr_enc_error(e);
	/* a zero-length sink is refused by some transports: no sink, no data */
	if (!rc && count)
		rc = rpcrdma_call_set_sinks(call, &sink, 1);
	/* the data comes in the Write chunk: the rest is small (no Reply
	 * chunk to register and invalidate) */
	if (count)
		rpcrdma_call_set_reply_hint(call, 64);
	rc = fs_run(call, rc, &d, &st);
	if (!rc) {
		if (st == FS_OK) {
			rc = rpcrdma_xdr_get_bool(d, &b);
			if (!rc)
				rc = rpcrdma_xdr_get_ddp(d, &p, &len);
			if (!rc && len > count)
				rc = -EBADMSG;
			if (!rc && len && p != buf)
				memcpy(buf, p, len);
		}
		if (!rc)
			rc = (int)st;
	}
	if (got)
		*got = len;
	if (eof)
		*eof = b;
	rpcrdma_call_destroy(call);
	return rc;
}

/* WRITE @len bytes of @data at @off (borrowed until the call completes). */
int fs_write(struct rpcrdma_client *c, const char *path, uint64_t off,
	     uint32_t flags, const void *data, uint32_t len, uint32_t *written)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0, n = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_WRITE, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, flags);
	rpcrdma_xdr_put_ddp(e, data, len);
	rc = rpcrdma_xdr_enc_error(e);
	rc = fs_run(call, rc, &d, &st);
	if (!rc) {
		if (st == FS_OK)
			rc = rpcrdma_xdr_get_u32(d, &n);
		if (!rc)
			rc = (int)st;
	}
	if (written)
		*written = n;
	rpcrdma_call_destroy(call);
	return rc;
}

/* COMMIT (fsync) @path. */
int fs_commit(struct rpcrdma_client *c, const char *path)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_COMMIT, &call);
	if (rc)
		return rc;
	rc = fs_run(call, rpcrdma_xdr_put_string(rpcrdma_call_args(call), path), &d, &st);
	if (!rc)
		rc = (int)st;
	rpcrdma_call_destroy(call);
	return rc;
}

/* PUSH_OPEN: a push-mode region of @size bytes appended to @path; *@reg
 * and *@file_off (where it starts in the file) when FS_OK. Then
 * rpcrdma_push_write(c, reg, ..., RPCRDMA_PUSH_COMMIT, ...). */
int fs_push_open(struct rpcrdma_client *c, const char *path, uint64_t size,
		 struct rpcrdma_push_region *reg, uint64_t *file_off)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_PUSH_OPEN, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, size);
	rc = rpcrdma_xdr_enc_error(e);
	rpcrdma_call_set_reply_hint(call, 64);
	rc = fs_run(call, rc, &d, &st);
	if (!rc && st == FS_OK) {
		rc = rpcrdma_xdr_get_push_region(d, reg);
		if (!rc)
			rc = rpcrdma_xdr_get_u64(d, file_off);
	}
	if (!rc)
		rc = (int)st;
	rpcrdma_call_destroy(call);
	return rc;
}

/* LIST with what the caller knows of the reply size: @min_reply is the
 * smallest Reply it expects (0: unknown). With reliable reply negotiated, a
 * known minimum above the inline threshold makes the transport provide a
 * Reply chunk (RFC 8166 Long Reply) instead of letting the server expose the
 * reply as a Read chunk (draft-cel-nfsv4-rpcrdma-reliable-reply 5.3.1). */
int fs_list_range(struct rpcrdma_client *c, const char *path, uint32_t cookie,
		  uint32_t max, size_t min_reply,
		  void (*cb)(void *, const struct fs_dirent *), void *arg,
		  uint32_t *n, bool *eof)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0, cnt = 0, i;
	bool b = false;
	size_t hint;
	int rc;

	rc = rpcrdma_call_create(c, FS_LIST, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u32(e, cookie);
	rpcrdma_xdr_put_u32(e, max);
	rc = rpcrdma_xdr_enc_error(e);
	hint = 64 + (size_t)(max < FS_LIST_MAX_ENTRIES ? max : FS_LIST_MAX_ENTRIES) *
			    FS_LIST_ENTRY_MAX;
	if (hint > FS_LIST_MAX_BYTES + 64)
		hint = FS_LIST_MAX_BYTES + 64;
	if (min_reply)
		rpcrdma_call_set_reply_range(call, min_reply < hint ? min_reply : hint, hint);
	else
		rpcrdma_call_set_reply_hint(call, hint);
	rc = fs_run(call, rc, &d, &st);
	if (!rc) {
		if (st == FS_OK) {
			rc = rpcrdma_xdr_get_u32(d, &cnt);
			for (i = 0; !rc && i < cnt; i++) {
				struct fs_dirent de;

				rc = rpcrdma_xdr_get_string(d, de.name, sizeof(de.name));
				if (!rc)
					rc = rpcrdma_xdr_get_u32(d, &de.type);
				if (!rc)
					rc = rpcrdma_xdr_get_u64(d, &de.size);
				if (!rc && cb)
					cb(arg, &de);
			}
			if (!rc)
				rc = rpcrdma_xdr_get_bool(d, &b);
		}
		if (!rc)
			rc = (int)st;
	}
	if (n)
		*n = cnt;
	if (eof)
		*eof = b;
	rpcrdma_call_destroy(call);
	return rc;
}

/* One LIST call from @cookie, at most @max entries: @cb(arg, entry) for
 * each; *@n entries, *@eof. The reply hint covers @max entries. */
int fs_list(struct rpcrdma_client *c, const char *path, uint32_t cookie,
	    uint32_t max, void (*cb)(void *, const struct fs_dirent *), void *arg,
	    uint32_t *n, bool *eof)
{
	return fs_list_range(c, path, cookie, max, 0, cb, arg, n, eof);
}

/* ECHO @len bytes (inline arguments and results): *@back gets a malloc'd
 * copy of the answer (free it), *@backlen its length. */
int fs_echo(struct rpcrdma_client *c, const void *data, uint32_t len, void **back,
	    uint32_t *backlen)
{
	struct rpcrdma_call *call;
	const void *p;
	uint32_t n = 0;
	int rc;

	*back = NULL;
	*backlen = 0;
	rc = rpcrdma_call_create(c, FS_ECHO, &call);
	if (rc)
		return rc;
	rc = rpcrdma_xdr_put_opaque(rpcrdma_call_args(call), data, len);
	rpcrdma_call_set_reply_hint(call, (size_t)len + 64);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_opaque(rpcrdma_call_results(call), FS_MAX_IO, &p, &n);
	if (!rc) {
		*back = malloc(n ? n : 1);
		if (!*back)
			rc = -ENOMEM;
		else
			memcpy(*back, p, n);
		*backlen = n;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* A NULL call: 0 or a negative errno. @pad bytes of opaque argument (ignored
 * by servers; used by rpcrdma-ping -s) when non-zero. */
int fs_null(struct rpcrdma_client *c, const void *pad, uint32_t padlen)
{
	struct rpcrdma_call *call;
	int rc;

	rc = rpcrdma_call_create(c, FS_NULL, &call);
	if (rc)
		return rc;
	if (padlen)
		rc = rpcrdma_xdr_put_fixed(rpcrdma_call_args(call), pad, padlen);
	if (!rc)
		rc = rpcrdma_call_run(call);
	rpcrdma_call_destroy(call);
	return rc;
}
