/* SPDX-License-Identifier: BSD-2-Clause */
/* MOUNT version 3 (RFC 1813 appendix I) of rpcrdma-nfsd, served over
 * tcp://: NULL, MNT, DUMP, UMNT, UMNTALL, EXPORT. MNT answers the root
 * handle of the export for the path exactly as given to --export (a
 * trailing "/" ignored), or the handle of a directory below it reached one
 * component at a time without following symbolic links or "..". The list
 * DUMP shows is kept in memory by client host name (the AUTH_SYS machine
 * name; "(unknown)" without one), bounded to NFSD_MAX_MOUNTS entries, and,
 * as with every mountd, only informative. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd.h"

static void host_of(struct rpcrdma_req *req, char *out)
{
	const struct rpcrdma_auth_sys *sys = rpcrdma_req_auth_sys(req);

	snprintf(out, MNT_NAME_MAX + 1, "%s",
		 sys && sys->machinename[0] ? sys->machinename : "(unknown)");
}

/* length of @p without trailing slashes (but "/" stays "/") */
static size_t trimmed(const char *p, size_t n)
{
	while (n > 1 && p[n - 1] == '/')
		n--;
	return n;
}

/* Resolves the MNT path @p (@n bytes) to a handle: the export or a
 * directory below it. A mountstat3. */
static uint32_t resolve(struct nfsd *s, const char *p, size_t n, uint8_t *fh, uint32_t *fhlen)
{
	const struct nfsd_export *x = &s->exp;
	size_t xl = trimmed(x->path, strlen(x->path));
	char comp[NFS3_NAME_MAX + 1];
	struct stat st;
	int fd, nfd, rc;

	n = trimmed(p, n);
	if (n < xl || memcmp(p, x->path, xl) != 0 || (n > xl && p[xl] != '/' && xl > 1))
		return MNT3ERR_NOENT;
	if (n == xl) {
		memcpy(fh, x->root_fh, x->root_fh_len);
		*fhlen = x->root_fh_len;
		return MNT3_OK;
	}
	fd = openat(x->rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return MNT3ERR_IO;
	for (size_t i = xl; i < n;) {
		size_t j;

		while (i < n && p[i] == '/')
			i++;
		for (j = i; j < n && p[j] != '/'; j++)
			;
		if (j == i)
			break;
		if (j - i > NFS3_NAME_MAX) {
			close(fd);
			return MNT3ERR_NAMETOOLONG;
		}
		memcpy(comp, p + i, j - i);
		comp[j - i] = '\0';
		i = j;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			close(fd);
			return MNT3ERR_ACCES;
		}
		nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return errno == ENOENT ? MNT3ERR_NOENT : MNT3ERR_ACCES;
		fd = nfd;
		if (fstat(fd, &st) < 0 || st.st_dev != x->dev) {
			close(fd);
			return MNT3ERR_ACCES;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(fd);
			return MNT3ERR_NOTDIR;
		}
	}
	rc = nfsd_fh_make(x, fd, "", fh, fhlen);
	close(fd);
	return rc ? MNT3ERR_ACCES : MNT3_OK;
}

static void count(struct nfsd *s, uint32_t proc)
{
	if (proc < MNT3_NPROC)
		atomic_fetch_add(&s->mnt_calls[proc], 1);
}

static int mnt_null(struct rpcrdma_req *req, void *ctx)
{
	count(ctx, MNT3_NULL);
	return rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)) ? RPCRDMA_SVC_GARBAGE_ARGS
								 : RPCRDMA_SVC_OK;
}

/* MNT(dirpath) -> mountstat3; OK: fhandle3 fhandle (opaque<FHSIZE3>);
 *                 int auth_flavors<> */
static int mnt_mnt(struct rpcrdma_req *req, void *ctx)
{
	struct nfsd *s = ctx;
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	struct nfs3_str path;
	uint8_t fh[NFS3_FHSIZE];
	uint32_t fhlen = 0, st;

	count(s, MNT3_MNT);
	if (mnt3_decode_dirpath(rpcrdma_req_args(req), &path))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	st = resolve(s, path.p, path.len, fh, &fhlen);
	rpcrdma_xdr_put_u32(e, st);
	if (st == MNT3_OK) {
		struct nfsd_mount_entry m;
		bool known = false;

		rpcrdma_xdr_put_opaque(e, fh, fhlen);
		rpcrdma_xdr_put_u32(e, 1);
		rpcrdma_xdr_put_u32(e, RPCRDMA_AUTH_SYS);
		host_of(req, m.host);
		snprintf(m.path, sizeof(m.path), "%.*s", (int)path.len, path.p);
		pthread_mutex_lock(&s->mlock);
		for (unsigned i = 0; i < s->nmounts && !known; i++)
			known = strcmp(s->mounts[i].host, m.host) == 0 &&
				strcmp(s->mounts[i].path, m.path) == 0;
		if (!known && s->nmounts < NFSD_MAX_MOUNTS)
			s->mounts[s->nmounts++] = m;
		pthread_mutex_unlock(&s->mlock);
	}
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

/* DUMP() -> mountlist: *mountbody { name ml_hostname; dirpath ml_directory;
 *                                     mountlist ml_next } */
static int mnt_dump(struct rpcrdma_req *req, void *ctx)
{
	struct nfsd *s = ctx;
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);

	count(s, MNT3_DUMP);
	if (rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	pthread_mutex_lock(&s->mlock);
	for (unsigned i = 0; i < s->nmounts; i++) {
		rpcrdma_xdr_put_bool(e, true);
		rpcrdma_xdr_put_string(e, s->mounts[i].host);
		rpcrdma_xdr_put_string(e, s->mounts[i].path);
	}
	pthread_mutex_unlock(&s->mlock);
	rpcrdma_xdr_put_bool(e, false);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

/* forgets the mounts of @host (@path NULL: all of them) */
static void forget(struct nfsd *s, const char *host, const char *path)
{
	pthread_mutex_lock(&s->mlock);
	for (unsigned i = 0; i < s->nmounts;) {
		if (strcmp(s->mounts[i].host, host) == 0 &&
		    (!path || strcmp(s->mounts[i].path, path) == 0))
			s->mounts[i] = s->mounts[--s->nmounts];
		else
			i++;
	}
	pthread_mutex_unlock(&s->mlock);
}

/* UMNT(dirpath) -> void */
static int mnt_umnt(struct rpcrdma_req *req, void *ctx)
{
	struct nfs3_str path;
	char host[MNT_NAME_MAX + 1], p[MNT_PATH_MAX + 1];

	count(ctx, MNT3_UMNT);
	if (mnt3_decode_dirpath(rpcrdma_req_args(req), &path))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	host_of(req, host);
	snprintf(p, sizeof(p), "%.*s", (int)path.len, path.p);
	forget(ctx, host, p);
	return RPCRDMA_SVC_OK;
}

/* UMNTALL() -> void */
static int mnt_umntall(struct rpcrdma_req *req, void *ctx)
{
	char host[MNT_NAME_MAX + 1];

	count(ctx, MNT3_UMNTALL);
	if (rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	host_of(req, host);
	forget(ctx, host, NULL);
	return RPCRDMA_SVC_OK;
}

/* EXPORT() -> exports: *exportnode { dirpath ex_dir; groups ex_groups
 *             (*groupnode { name gr_name; groups gr_next }); exports ex_next }
 * One export, to every host: an empty group list. */
static int mnt_export(struct rpcrdma_req *req, void *ctx)
{
	struct nfsd *s = ctx;
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);

	count(s, MNT3_EXPORT);
	if (rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_bool(e, true);
	rpcrdma_xdr_put_string(e, s->exp.path);
	rpcrdma_xdr_put_bool(e, false);
	rpcrdma_xdr_put_bool(e, false);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

int mnt3_register(struct nfsd *s, struct rpcrdma_server *srv)
{
	static const rpcrdma_handler_fn fns[MNT3_NPROC] = {
		mnt_null, mnt_mnt, mnt_dump, mnt_umnt, mnt_umntall, mnt_export};
	int rc = 0;

	for (uint32_t p = 0; p < MNT3_NPROC && rc == 0; p++)
		rc = rpcrdma_server_register(srv, MOUNT_PROG, MOUNT_V3, p, fns[p], s);
	return rc;
}
