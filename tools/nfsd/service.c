/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-nfsd's servers: NFS version 3 (program 100003) on the URL given
 * (rdma://, verbs:// or tcp://) and MOUNT version 3 (program 100005) on
 * tcp://, both through librpcrdma's public server API (include/rpcrdma/
 * rpc.h). One handler serves every NFSv3 procedure: it decodes the
 * arguments (nfs3_xdr.c; GARBAGE_ARGS when they do not decode), takes the
 * caller's identity (cred.c), runs the procedure, and counts it. The
 * library's duplicate request cache is on (RFC 8166 section 4.4 /
 * RFC 5531: a Call retransmitted after a reconnect must not run twice);
 * as nfsd, only the non-idempotent procedures are cached (SETATTR, WRITE,
 * CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK). With
 * identity threads (verbs://, see nfsd.h) the handler queues the procedure
 * to one of them and waits: the handler thread keeps the credentials the
 * RDMA devices were opened with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../faults.h"
#include "nfsd.h"

static const nfs3_proc_fn procs[NFS3_NPROC] = {
	[NFS3_GETATTR] = nfs3_getattr,   [NFS3_SETATTR] = nfs3_setattr,
	[NFS3_LOOKUP] = nfs3_lookup,     [NFS3_ACCESS] = nfs3_access,
	[NFS3_READLINK] = nfs3_readlink, [NFS3_READ] = nfs3_read,
	[NFS3_WRITE] = nfs3_write,       [NFS3_CREATE] = nfs3_create,
	[NFS3_MKDIR] = nfs3_mkdir,       [NFS3_SYMLINK] = nfs3_symlink,
	[NFS3_MKNOD] = nfs3_mknod,       [NFS3_REMOVE] = nfs3_remove,
	[NFS3_RMDIR] = nfs3_rmdir,       [NFS3_RENAME] = nfs3_rename,
	[NFS3_LINK] = nfs3_link,         [NFS3_READDIR] = nfs3_readdir,
	[NFS3_READDIRPLUS] = nfs3_readdirplus, [NFS3_FSSTAT] = nfs3_fsstat,
	[NFS3_FSINFO] = nfs3_fsinfo,     [NFS3_PATHCONF] = nfs3_pathconf,
	[NFS3_COMMIT] = nfs3_commit,
};

static const bool idempotent[NFS3_NPROC] = {
	[NFS3_NULL] = true, [NFS3_GETATTR] = true, [NFS3_LOOKUP] = true, [NFS3_ACCESS] = true,
	[NFS3_READLINK] = true, [NFS3_READ] = true, [NFS3_READDIR] = true,
	[NFS3_READDIRPLUS] = true, [NFS3_FSSTAT] = true, [NFS3_FSINFO] = true,
	[NFS3_PATHCONF] = true, [NFS3_COMMIT] = true,
};

/* A procedure run on an identity thread for a waiting handler. */
struct nfsd_job {
	struct nfs3_call *c;
	union nfs3_args *a;
	uint32_t proc;
	int result;
	bool done;
	pthread_cond_t cond;
	struct nfsd_job *next;
};

/* Runs procedure @proc as the caller: the identity switch, the procedure,
 * back to the server's identity. The nfsstat3 answered, or -1 when the
 * switch failed (nothing ran). */
static int run_as_caller(struct nfs3_call *c, uint32_t proc, union nfs3_args *a)
{
	int st;

	if (nfsd_cred_enter(&c->cred))
		return -1;
	c->as_caller = true;
	st = procs[proc](c, a);
	nfs3_as_server(c);
	return st;
}

static void *identity_thread(void *arg)
{
	struct nfsd *s = arg;
	struct nfsd_job *j;

	pthread_mutex_lock(&s->qlock);
	for (;;) {
		while (!s->qhead && !s->qstop)
			pthread_cond_wait(&s->qcond, &s->qlock);
		if (!s->qhead)
			break;
		j = s->qhead;
		s->qhead = j->next;
		if (!s->qhead)
			s->qtail = &s->qhead;
		pthread_mutex_unlock(&s->qlock);
		j->result = run_as_caller(j->c, j->proc, j->a);
		pthread_mutex_lock(&s->qlock);
		j->done = true;
		pthread_cond_signal(&j->cond);
	}
	pthread_mutex_unlock(&s->qlock);
	return NULL;
}

/* Hands @proc to an identity thread and waits for its result. */
static int run_on_identity_thread(struct nfsd *s, struct nfs3_call *c, uint32_t proc,
				  union nfs3_args *a)
{
	struct nfsd_job j = {.c = c, .a = a, .proc = proc};

	pthread_cond_init(&j.cond, NULL);
	pthread_mutex_lock(&s->qlock);
	*s->qtail = &j;
	s->qtail = &j.next;
	pthread_cond_signal(&s->qcond);
	while (!j.done)
		pthread_cond_wait(&j.cond, &s->qlock);
	pthread_mutex_unlock(&s->qlock);
	pthread_cond_destroy(&j.cond);
	return j.result;
}

static int nfs3_handler(struct rpcrdma_req *req, void *ctx)
{
	struct nfsd *s = ctx;
	uint32_t proc = rpcrdma_req_proc(req);
	struct nfs3_call c = {.s = s, .req = req, .res = rpcrdma_req_results(req)};
	union nfs3_args args;
	int st;

	if (proc >= NFS3_NPROC)
		return RPCRDMA_SVC_SYSTEM_ERR;   /* not registered: cannot happen */
	atomic_fetch_add(&s->nfs_calls[proc], 1);
	if (proc == NFS3_NULL)
		return rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)) ? RPCRDMA_SVC_GARBAGE_ARGS
									 : RPCRDMA_SVC_OK;
	if (nfs3_decode_args(rpcrdma_req_args(req), proc, &args)) {
		atomic_fetch_add(&s->garbage, 1);
		return RPCRDMA_SVC_GARBAGE_ARGS;
	}
	nfsd_cred_of(req, s->opts.root_squash, s->opts.anon_uid, s->opts.anon_gid, &c.cred);
	st = s->nid ? run_on_identity_thread(s, &c, proc, &args) : run_as_caller(&c, proc, &args);
	if (st < 0)
		return RPCRDMA_SVC_SYSTEM_ERR;
	if (st != NFS3_OK)
		atomic_fetch_add(&s->nfs_errors[proc], 1);
	return rpcrdma_xdr_enc_error(c.res) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

int nfsd_create(struct nfsd *s, const struct nfsd_opts *o)
{
	struct rpcrdma_server_opts so = {0}, mo = {0};
	int rc;

	memset(s, 0, sizeof(*s));
	s->opts = *o;
	memcpy(s->write_verf, o->write_verf, NFS3_VERF_SIZE);
	pthread_mutex_init(&s->mlock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	s->qtail = &s->qhead;
	rc = nfsd_export_open(&s->exp, o->export_dir, o->key);
	if (rc)
		return rc;
	so.threads = o->threads ? o->threads : 8;
	if (o->identity_threads) {
		s->idthreads = calloc(so.threads, sizeof(pthread_t));
		if (!s->idthreads) {
			rc = -ENOMEM;
			goto fail;
		}
		for (; s->nid < so.threads; s->nid++) {
			rc = -pthread_create(&s->idthreads[s->nid], NULL, identity_thread, s);
			if (rc)
				goto fail;
		}
	}
	so.drc_entries = o->drc_entries;
	so.drc_max_reply = 4096;
	/* READ/WRITE of NFSD_MAX_IO plus headers and READDIR replies */
	so.max_msg = NFSD_MAX_IO + 64 * 1024;
	rc = rpcrdma_server_create(o->url, &so, &s->nfs_srv);
	if (rc)
		goto fail;
	for (uint32_t p = 0; p < NFS3_NPROC && rc == 0; p++) {
		rc = rpcrdma_server_register(s->nfs_srv, NFS_PROG, NFS_V3, p, nfs3_handler, s);
		if (rc == 0 && idempotent[p] && p != NFS3_NULL)
			rc = rpcrdma_server_set_idempotent(s->nfs_srv, NFS_PROG, NFS_V3, p);
	}
	if (rc)
		goto fail;
	mo.threads = 2;
	rc = rpcrdma_server_create(o->mount_url, &mo, &s->mnt_srv);
	if (rc == 0)
		rc = mnt3_register(s, s->mnt_srv);
	if (rc)
		goto fail;
	return 0;
fail:
	nfsd_destroy(s);
	return rc;
}

int nfsd_start(struct nfsd *s)
{
	int rc = rpcrdma_server_start(s->mnt_srv);

	return rc ? rc : rpcrdma_server_start(s->nfs_srv);
}

int nfsd_nfs_port(const struct nfsd *s)
{
	return s->nfs_srv ? rpcrdma_server_port(s->nfs_srv) : -ENOTCONN;
}

int nfsd_mount_port(const struct nfsd *s)
{
	return s->mnt_srv ? rpcrdma_server_port(s->mnt_srv) : -ENOTCONN;
}

void nfsd_destroy(struct nfsd *s)
{
	if (s->mnt_srv)
		rpcrdma_server_destroy(s->mnt_srv);
	if (s->nfs_srv)
		rpcrdma_server_destroy(s->nfs_srv);
	s->mnt_srv = s->nfs_srv = NULL;
	pthread_mutex_lock(&s->qlock);
	s->qstop = true;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	for (unsigned i = 0; i < s->nid; i++)
		pthread_join(s->idthreads[i], NULL);
	s->nid = 0;
	free(s->idthreads);
	s->idthreads = NULL;
	nfsd_export_close(&s->exp);
}

void nfsd_print_summary(struct nfsd *s, FILE *f)
{
	struct rpcrdma_drc_stats d;
	struct rpcrdma_xprt_stats xs;
	unsigned long total = 0;

	fprintf(f, "rpcrdma-nfsd: NFSv3 procedures served (calls, of which not NFS3_OK):\n");
	for (uint32_t p = 0; p < NFS3_NPROC; p++) {
		unsigned long n = atomic_load(&s->nfs_calls[p]);

		total += n;
		if (n)
			fprintf(f, "  %-12s %10lu %10lu\n", nfs3_proc_name(p), n,
				atomic_load(&s->nfs_errors[p]));
	}
	fprintf(f, "  %-12s %10lu (undecodable arguments: %lu)\n", "total", total,
		atomic_load(&s->garbage));
	fprintf(f, "rpcrdma-nfsd: MOUNT procedures served:");
	for (uint32_t p = 0; p < MNT3_NPROC; p++)
		fprintf(f, " %s %lu", mnt3_proc_name(p), atomic_load(&s->mnt_calls[p]));
	fprintf(f, "\n");
	/* rdma://: the connections a fault of the RDMA provider ended, by
	 * cause (tcp:// has none) */
	if (s->nfs_srv && rpcrdma_server_stats(s->nfs_srv, &xs) == 0 &&
	    strcmp(xs.transport, "tcp") != 0)
		tool_faults_print(f, "rpcrdma-nfsd: transport faults:", &xs);
	if (s->nfs_srv && rpcrdma_server_drc_stats(s->nfs_srv, &d) == 0)
		fprintf(f,
			"rpcrdma-nfsd: duplicate request cache: %llu hits, %llu in progress, "
			"%llu remembered, %llu not cached\n",
			(unsigned long long)d.hits, (unsigned long long)d.drops_in_progress,
			(unsigned long long)d.insertions, (unsigned long long)d.not_cached);
}
