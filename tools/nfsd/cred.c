/* SPDX-License-Identifier: BSD-2-Clause */
/* The caller's identity for rpcrdma-nfsd's file-system accesses (RFC 1813
 * section 4.4 "Permission issues", RFC 5531 appendix A AUTH_SYS). Each
 * handler thread takes the caller's uid, gid and supplementary groups as its
 * file-system identity for the duration of the request: setfsuid(2) and
 * setfsgid(2) are per thread, and so is the raw setgroups system call (glibc's
 * setgroups() would change every thread of the process). Changing the fsuid
 * away from 0 drops the file-system capabilities of the thread (DAC override,
 * CAP_DAC_READ_SEARCH, chown, fowner, mknod), so the kernel checks every
 * access exactly as for a local process of that user; changing it back to 0
 * restores them. Root squash maps uid 0 (and gid 0) to the anonymous ids;
 * AUTH_NONE is anonymous. */
#include <errno.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nfsd.h"

void nfsd_cred_of(const struct rpcrdma_req *req, bool root_squash, uint32_t anon_uid,
		  uint32_t anon_gid, struct nfsd_cred *out)
{
	const struct rpcrdma_auth_sys *sys = rpcrdma_req_auth_sys(req);

	memset(out, 0, sizeof(*out));
	if (!sys) {
		out->uid = anon_uid;
		out->gid = anon_gid;
		return;
	}
	out->uid = sys->uid;
	out->gid = sys->gid;
	out->ngroups = sys->ngids <= RPCRDMA_AUTHSYS_MAXGIDS ? sys->ngids : RPCRDMA_AUTHSYS_MAXGIDS;
	memcpy(out->groups, sys->gids, out->ngroups * sizeof(out->groups[0]));
	if (root_squash) {
		if (out->uid == 0)
			out->uid = anon_uid;
		if (out->gid == 0)
			out->gid = anon_gid;
		for (uint32_t i = 0; i < out->ngroups; i++)
			if (out->groups[i] == 0)
				out->groups[i] = anon_gid;
	}
}

int nfsd_cred_enter(const struct nfsd_cred *c)
{
	gid_t g[RPCRDMA_AUTHSYS_MAXGIDS];

	for (uint32_t i = 0; i < c->ngroups; i++)
		g[i] = c->groups[i];
	if (syscall(SYS_setgroups, (size_t)c->ngroups, g) < 0)
		return -errno;
	setfsgid(c->gid);
	setfsuid(c->uid);
	/* setfsuid reports no error: read the identity back */
	if ((uint32_t)setfsuid((uid_t)-1) != c->uid || (uint32_t)setfsgid((gid_t)-1) != c->gid) {
		nfsd_cred_leave();
		return -EPERM;
	}
	return 0;
}

void nfsd_cred_leave(void)
{
	setfsuid(0);
	setfsgid(0);
	syscall(SYS_setgroups, (size_t)0, (gid_t *)NULL);
}
