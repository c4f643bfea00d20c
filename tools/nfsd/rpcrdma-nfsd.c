/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-nfsd: an NFSv3 server (RFC 1813) over RPC-over-RDMA (RFC 8166,
 * with the NFS upper-layer binding of RFC 8267) or TCP, exporting one local
 * directory, built on librpcrdma's public API. With the library's own
 * software iWARP (rdma://) a machine without an RDMA NIC serves the Linux
 * kernel's NFS/RDMA client (which runs over kernel siw); with verbs:// it
 * uses an RDMA device through rdma-core. MOUNT v3 is served over TCP and
 * both programs are registered with the local rpcbind. See docs/nfsd.md and
 * rpcrdma-nfsd(1); the service itself is tools/nfsd/service.c. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: rpcrdma-nfsd --export DIR [options]\n"
"Serves DIR over NFS version 3 on RPC-over-RDMA (or TCP), with MOUNT v3 on TCP.\n"
"\n"
"  -e, --export DIR        the directory to export; clients mount it by this path\n"
"  -t, --transport T       rdma (librpcrdma's software iWARP: no RDMA NIC needed;\n"
"                          the default), verbs (an RDMA device through rdma-core),\n"
"                          or tcp\n"
"  -l, --listen ADDR:PORT  NFS listen address (default 0.0.0.0:20049 for rdma and\n"
"                          verbs, as RFC 8267 assigns; 0.0.0.0:2049 for tcp)\n"
"  -m, --mount-port N      MOUNT's TCP port (default: any free port, registered\n"
"                          with rpcbind; give one on machines without rpcbind and\n"
"                          mount with -o mountproto=tcp,mountport=N)\n"
"      --no-rpcbind        do not register with the local rpcbind\n"
"      --rpcbind-socket P  rpcbind's AF_LOCAL socket (default /run/rpcbind.sock)\n"
"      --no-root-squash    let AUTH_SYS uid 0 act as root (default: squash it\n"
"                          to the anonymous ids)\n"
"      --anon-uid N, --anon-gid N\n"
"                          ids of squashed and AUTH_NONE callers (default 65534)\n"
"  -r, --read-only         refuse every change (NFS3ERR_ROFS)\n"
"  -s, --state-dir DIR     where the file handle key is kept (default\n"
"                          /var/lib/rpcrdma-nfsd); handles stay valid across\n"
"                          restarts as long as the key does\n"
"  -T, --threads N         worker threads for NFS requests (default 8)\n"
"      --drc N             duplicate request cache entries (default 1024; 0: off)\n"
"  -h, --help              this text\n"
"  -V, --version           the version of rpcrdma-nfsd and librpcrdma\n"
"\n"
"Runs as root: it needs CAP_DAC_READ_SEARCH (open_by_handle_at) and\n"
"CAP_SETUID/CAP_SETGID (to act as each caller). SIGTERM or SIGINT stops it;\n"
"it then unregisters from rpcbind and prints the procedures it served.\n"
"Example: rpcrdma-nfsd --export /srv/data, then on a client with kernel siw:\n"
"  mount -t nfs -o vers=3,proto=rdma,port=20049 SERVER:/srv/data /mnt\n");
}

enum { O_NO_RPCBIND = 256, O_RPCB_SOCK, O_NO_SQUASH, O_ANON_UID, O_ANON_GID, O_DRC };

static const struct option longopts[] = {
	{"export", required_argument, NULL, 'e'},
	{"transport", required_argument, NULL, 't'},
	{"listen", required_argument, NULL, 'l'},
	{"mount-port", required_argument, NULL, 'm'},
	{"no-rpcbind", no_argument, NULL, O_NO_RPCBIND},
	{"rpcbind-socket", required_argument, NULL, O_RPCB_SOCK},
	{"no-root-squash", no_argument, NULL, O_NO_SQUASH},
	{"anon-uid", required_argument, NULL, O_ANON_UID},
	{"anon-gid", required_argument, NULL, O_ANON_GID},
	{"read-only", no_argument, NULL, 'r'},
	{"state-dir", required_argument, NULL, 's'},
	{"threads", required_argument, NULL, 'T'},
	{"drc", required_argument, NULL, O_DRC},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return *s && !*end && errno == 0 && *out <= max;
}

/* "ADDR:PORT", "[ADDR]:PORT" or ":PORT"/"PORT"; the host part is kept */
static int split_listen(const char *s, char *host, size_t cap, unsigned long *port)
{
	const char *colon = strrchr(s, ':');

	if (!colon) {
		snprintf(host, cap, "0.0.0.0");
		return parse_uint(s, 65535, port) ? 0 : -EINVAL;
	}
	if ((size_t)(colon - s) >= cap)
		return -EINVAL;
	if (colon == s)
		snprintf(host, cap, "0.0.0.0");
	else
		snprintf(host, cap, "%.*s", (int)(colon - s), s);
	return parse_uint(colon + 1, 65535, port) ? 0 : -EINVAL;
}

static void die_usage(const char *msg, const char *arg)
{
	fprintf(stderr, "rpcrdma-nfsd: %s%s%s\n(rpcrdma-nfsd --help for the options)\n", msg,
		arg ? ": " : "", arg ? arg : "");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *export = NULL, *transport = "rdma", *listen = NULL, *rpcb_sock = NULL;
	const char *state_dir = "/var/lib/rpcrdma-nfsd";
	unsigned long mount_port = 0, threads = 8, drc = 1024;
	unsigned long anon_uid = NFSD_ANON_ID, anon_gid = NFSD_ANON_ID;
	bool use_rpcbind = true, squash = true, read_only = false, persistent = false;
	bool reg_mnt = false, reg_nfs = false;
	uint8_t key[NFSD_KEY_SIZE], verf[NFS3_VERF_SIZE];
	char host[256], url[320], murl[320], keyfile[PATH_MAX + 16];
	const char *netid;
	struct nfsd_opts o = {0};
	static struct nfsd s;
	struct nfsd_cred probe = {.uid = NFSD_ANON_ID, .gid = NFSD_ANON_ID};
	unsigned long port;
	sigset_t sigs;
	int opt, rc, sig;

	while ((opt = getopt_long(argc, argv, "e:t:l:m:rs:T:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'e': export = optarg; break;
		case 't': transport = optarg; break;
		case 'l': listen = optarg; break;
		case 'm':
			if (!parse_uint(optarg, 65535, &mount_port))
				die_usage("bad --mount-port", optarg);
			break;
		case O_NO_RPCBIND: use_rpcbind = false; break;
		case O_RPCB_SOCK: rpcb_sock = optarg; break;
		case O_NO_SQUASH: squash = false; break;
		case O_ANON_UID:
			if (!parse_uint(optarg, UINT32_MAX - 1, &anon_uid))
				die_usage("bad --anon-uid", optarg);
			break;
		case O_ANON_GID:
			if (!parse_uint(optarg, UINT32_MAX - 1, &anon_gid))
				die_usage("bad --anon-gid", optarg);
			break;
		case 'r': read_only = true; break;
		case 's': state_dir = optarg; break;
		case 'T':
			if (!parse_uint(optarg, 256, &threads) || threads == 0)
				die_usage("bad --threads (1..256)", optarg);
			break;
		case O_DRC:
			if (!parse_uint(optarg, 1u << 20, &drc))
				die_usage("bad --drc (0..1048576)", optarg);
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("rpcrdma-nfsd (librpcrdma %s)\n", rpcrdma_version());
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		die_usage("unexpected argument", argv[optind]);
	if (!export)
		die_usage("--export DIR is required", NULL);
	if (strcmp(transport, "rdma") && strcmp(transport, "verbs") && strcmp(transport, "tcp"))
		die_usage("--transport must be rdma, verbs or tcp", transport);
	port = strcmp(transport, "tcp") == 0 ? 2049 : 20049;
	snprintf(host, sizeof(host), "0.0.0.0");
	if (listen && split_listen(listen, host, sizeof(host), &port))
		die_usage("bad --listen (ADDR:PORT)", listen);
	netid = strcmp(transport, "tcp") == 0 ? "tcp" : "rdma";
	snprintf(url, sizeof(url), "%s://%s:%lu", transport, host, port);
	snprintf(murl, sizeof(murl), "tcp://%s:%lu", host, mount_port);

	/* the identity switch must work before anything is served as root */
	if (nfsd_cred_enter(&probe)) {
		fprintf(stderr, "rpcrdma-nfsd: cannot act as another user (setfsuid/setgroups "
				"need CAP_SETUID and CAP_SETGID): run it as root\n");
		return 1;
	}
	nfsd_cred_leave();
	umask(0);   /* modes come from the clients, which applied their umask */

	snprintf(keyfile, sizeof(keyfile), "%s/fh-key", state_dir);
	mkdir(state_dir, 0700);
	rc = nfsd_key_load(keyfile, key, &persistent);
	if (rc) {
		fprintf(stderr, "rpcrdma-nfsd: %s is not a handle key (%d bytes expected): %s\n",
			keyfile, NFSD_KEY_SIZE, strerror(-rc));
		return 1;
	}
	if (!persistent)
		fprintf(stderr, "rpcrdma-nfsd: warning: cannot keep the handle key in %s: file "
				"handles will not survive a restart of the server\n", keyfile);
	if (getrandom(verf, sizeof(verf), 0) != sizeof(verf)) {
		fprintf(stderr, "rpcrdma-nfsd: getrandom: %s\n", strerror(errno));
		return 1;
	}

	/* signals are taken by sigwait below; library threads inherit the mask */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	o.export_dir = export;
	o.url = url;
	o.mount_url = murl;
	o.root_squash = squash;
	o.anon_uid = (uint32_t)anon_uid;
	o.anon_gid = (uint32_t)anon_gid;
	o.threads = (unsigned)threads;
	o.drc_entries = (unsigned)drc;
	o.read_only = read_only;
	/* see nfsd.h: verbs devices refuse threads that changed credentials */
	o.identity_threads = strcmp(transport, "verbs") == 0;
	o.key = key;
	o.write_verf = verf;
	rc = nfsd_create(&s, &o);
	if (rc == -EPERM)
		fprintf(stderr, "rpcrdma-nfsd: %s: open_by_handle_at refused: the server needs "
				"CAP_DAC_READ_SEARCH (run it as root)\n", export);
	else if (rc == -EOPNOTSUPP || rc == -EOVERFLOW)
		fprintf(stderr, "rpcrdma-nfsd: %s: its file system has no file handles that fit "
				"NFSv3 (name_to_handle_at)\n", export);
	else if (rc == -EPROTONOSUPPORT)
		fprintf(stderr, "rpcrdma-nfsd: %s: transport not built into librpcrdma\n", url);
	else if (rc == -ENODEV)
		fprintf(stderr, "rpcrdma-nfsd: %s: no RDMA device for this address\n", url);
	else if (rc)
		fprintf(stderr, "rpcrdma-nfsd: cannot serve %s on %s: %s\n", export, url,
			strerror(-rc));
	if (rc)
		return 1;
	rc = nfsd_start(&s);
	if (rc) {
		fprintf(stderr, "rpcrdma-nfsd: start: %s\n", strerror(-rc));
		nfsd_destroy(&s);
		return 1;
	}
	if (use_rpcbind) {
		/* nothing is unregistered first: that could be another
		 * server's (rpc.mountd, nfsd); rpcbind refuses a second SET */
		rc = nfsd_rpcb(rpcb_sock, true, MOUNT_PROG, MOUNT_V3, "tcp", nfsd_mount_port(&s));
		reg_mnt = rc == 0;
		if (rc == 0) {
			rc = nfsd_rpcb(rpcb_sock, true, NFS_PROG, NFS_V3, netid, nfsd_nfs_port(&s));
			reg_nfs = rc == 0;
		}
		if (rc == -EACCES)
			fprintf(stderr, "rpcrdma-nfsd: rpcbind refused the registration of %s: "
					"another server has it (rpc.mountd, nfsd, or a killed "
					"rpcrdma-nfsd: rpcinfo -p; rpcinfo -d PROG VERS)\n",
				reg_mnt ? "NFS v3" : "MOUNT v3");
		else if (rc)
			fprintf(stderr, "rpcrdma-nfsd: no rpcbind registration (%s)\n", strerror(-rc));
		if (rc && !mount_port)
			fprintf(stderr, "rpcrdma-nfsd: clients must be told the MOUNT port: "
					"mountproto=tcp,mountport=%d\n", nfsd_mount_port(&s));
	}
	printf("rpcrdma-nfsd: exporting %s: NFSv3 on %s://%s:%d, MOUNT v3 on tcp://%s:%d%s%s\n",
	       export, transport, host, nfsd_nfs_port(&s), host, nfsd_mount_port(&s),
	       reg_nfs ? ", registered with rpcbind" : "", squash ? ", root squashed" : "");
	printf("rpcrdma-nfsd: mount -t nfs -o vers=3,%s,port=%d%s%.0d SERVER:%s MOUNTPOINT\n",
	       strcmp(transport, "tcp") == 0 ? "proto=tcp" : "proto=rdma", nfsd_nfs_port(&s),
	       reg_mnt ? "" : ",mountproto=tcp,mountport=", reg_mnt ? 0 : nfsd_mount_port(&s),
	       export);
	fflush(stdout);

	do {
		rc = sigwait(&sigs, &sig);
	} while (rc == 0 && sig == SIGHUP);
	printf("rpcrdma-nfsd: signal %d, stopping\n", sig);
	if (reg_nfs)
		nfsd_rpcb(rpcb_sock, false, NFS_PROG, NFS_V3, netid, 0);
	if (reg_mnt)
		nfsd_rpcb(rpcb_sock, false, MOUNT_PROG, MOUNT_V3, "tcp", 0);
	rpcrdma_server_shutdown(s.nfs_srv);
	rpcrdma_server_shutdown(s.mnt_srv);
	nfsd_print_summary(&s, stdout);
	nfsd_destroy(&s);
	return 0;
}
