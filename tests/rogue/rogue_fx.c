/* SPDX-License-Identifier: BSD-2-Clause */
/* Servers and well-behaved clients for the rogue suite (rogue_fx.h): the
 * file service of tools/fileservice/fileservice.h in process or as the rpcrdma-server
 * child process, probes, and a client that keeps calling in a thread. */
#include "rogue_fx.h"
#include "probe_diag.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t rr_fx_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

void rr_fx_pattern(uint8_t *p, size_t n, uint32_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] = rr_fx_byte(seed, off + i);
}

long long rr_fx_pattern_diff(const uint8_t *p, size_t n, uint32_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != rr_fx_byte(seed, off + i))
			return (long long)i;
	return -1;
}

/* ---- directories and files ---- */

int rr_fx_dir_make(struct rr_fx_dir *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/rr-rogue-XXXXXX");
	if (!mkdtemp(d->dir))
		return -errno;
	snprintf(d->export_dir, sizeof(d->export_dir), "%s/export", d->dir);
	if (mkdir(d->export_dir, 0755) < 0)
		return -errno;
	return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

void rr_fx_dir_remove(struct rr_fx_dir *d)
{
	if (strncmp(d->dir, "/tmp/rr-rogue-", 14) != 0)
		return;
	nftw(d->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	d->dir[0] = 0;
}

static void file_path(const struct rr_fx_dir *d, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", d->export_dir, name);
}

int rr_fx_file(const struct rr_fx_dir *d, const char *name, size_t len, uint32_t seed)
{
	char path[256];
	uint8_t buf[65536];
	size_t done = 0;
	int fd;

	file_path(d, name, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (done < len) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		rr_fx_pattern(buf, n, seed, done);
		if (write(fd, buf, n) != (ssize_t)n) {
			close(fd);
			return -EIO;
		}
		done += n;
	}
	close(fd);
	return 0;
}

long rr_fx_file_read(const struct rr_fx_dir *d, const char *name, uint64_t off, void *buf,
		     size_t cap)
{
	char path[256];
	ssize_t n;
	int fd;

	file_path(d, name, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, cap, (off_t)off);
	close(fd);
	return n < 0 ? -errno : (long)n;
}

long long rr_fx_file_size(const struct rr_fx_dir *d, const char *name)
{
	char path[256];
	struct stat sb;

	file_path(d, name, path, sizeof(path));
	if (stat(path, &sb) < 0)
		return -errno;
	return (long long)sb.st_size;
}

/* ---- in-process server ---- */

int rr_fx_srv_start(struct rr_fx_srv *f, const struct rpcrdma_server_opts *o)
{
	int rc;

	memset(f, 0, sizeof(*f));
	rc = rr_fx_dir_make(&f->d);
	if (rc)
		return rc;
	rc = fs_service_init(&f->svc, f->d.export_dir);
	if (rc) {
		rr_fx_dir_remove(&f->d);
		return rc;
	}
	rc = rpcrdma_server_create("rdma://127.0.0.1:0", o, &f->srv);
	if (!rc)
		rc = fs_service_register(f->srv, &f->svc);
	if (!rc)
		rc = rpcrdma_server_start(f->srv);
	if (rc) {
		rr_fx_srv_stop(f);
		return rc;
	}
	f->port = rpcrdma_server_port(f->srv);
	snprintf(f->url, sizeof(f->url), "rdma://127.0.0.1:%d", f->port);
	rr_diag_server_set(f->port, f->srv);   /* for a failed probe's dump */
	return 0;
}

void rr_fx_srv_stop(struct rr_fx_srv *f)
{
	if (f->srv) {
		rr_diag_server_set(f->port, NULL);
		rpcrdma_server_destroy(f->srv);
	}
	f->srv = NULL;
	fs_service_fini(&f->svc);
	rr_fx_dir_remove(&f->d);
}

int rr_fx_srv_stats(struct rr_fx_srv *f, struct rpcrdma_xprt_stats *st)
{
	return rpcrdma_server_stats(f->srv, st);
}

bool rr_fx_srv_wait_stat(struct rr_fx_srv *f, size_t field, uint64_t min, unsigned ms)
{
	uint64_t end = rr_fx_ms() + ms;

	for (;;) {
		struct rpcrdma_xprt_stats st;
		uint64_t v;

		if (rpcrdma_server_stats(f->srv, &st) == 0) {
			memcpy(&v, (const uint8_t *)&st + field, sizeof(v));
			if (v >= min)
				return true;
		}
		if (rr_fx_ms() > end)
			return false;
		nap_ms(2);
	}
}

bool rr_fx_srv_wait_conns(struct rr_fx_srv *f, uint32_t n, unsigned ms)
{
	uint64_t end = rr_fx_ms() + ms;

	for (;;) {
		struct rpcrdma_xprt_stats st;

		if (rpcrdma_server_stats(f->srv, &st) == 0 && st.connections <= n)
			return true;
		if (rr_fx_ms() > end)
			return false;
		nap_ms(2);
	}
}

/* ---- child process ---- */

static int server_path(char *out, size_t cap)
{
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -ENOENT;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	snprintf(out, cap, "%s/rpcrdma-server", self);
	return access(out, X_OK) == 0 ? 0 : -ENOENT;
}

int rr_fx_child_prepare(struct rr_fx_child *c)
{
	memset(c, 0, sizeof(*c));
	c->pid = -1;
	return rr_fx_dir_make(&c->d);
}

int rr_fx_child_run(struct rr_fx_child *c, unsigned long nofile, unsigned threads)
{
	char bin[600], th[16], line[512];
	char *argv[12];
	size_t have = 0;
	uint64_t end;
	int p[2], rc, a = 0;
	char *s;

	rc = server_path(bin, sizeof(bin));
	if (rc)
		return rc;
	snprintf(th, sizeof(th), "%u", threads ? threads : 4);
	argv[a++] = bin;
	argv[a++] = (char *)"--export";
	argv[a++] = c->d.export_dir;
	argv[a++] = (char *)"--listen";
	argv[a++] = (char *)"127.0.0.1:0";
	argv[a++] = (char *)"--transport";
	argv[a++] = (char *)(c->transport ? c->transport : "rdma");
	argv[a++] = (char *)"--threads";
	argv[a++] = th;
	argv[a++] = (char *)"--quiet";
	argv[a] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	c->pid = fork();
	if (c->pid < 0) {
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (c->pid == 0) {
		if (nofile) {
			struct rlimit rl = {nofile, nofile};

			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				_exit(126);
		}
		{
			const char *ao = getenv("ASAN_OPTIONS");
			char opts[1024];

			snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16:"
				 "allocator_release_to_os_interval_ms=0", ao ? ao : "", ao && *ao ? ":" : "");
			setenv("ASAN_OPTIONS", opts, 1);
		}
		dup2(p[1], 1);
		execv(bin, argv);
		_exit(127);
	}
	close(p[1]);
	end = rr_fx_ms() + 30000;
	line[0] = 0;
	while (have + 1 < sizeof(line) && !strchr(line, '\n')) {
		struct pollfd pfd = {p[0], POLLIN, 0};
		uint64_t now = rr_fx_ms();
		ssize_t n;

		if (now >= end || poll(&pfd, 1, (int)(end - now)) <= 0)
			break;
		n = read(p[0], line + have, sizeof(line) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		line[have] = 0;
	}
	close(p[0]);   /* later output: the child gets EPIPE, which it ignores */
	s = strstr(line, "listening on ");
	if (s)
		s = strstr(s, "://");
	if (s)
		s = strchr(s + 3, ':');
	c->port = s ? atoi(s + 1) : 0;
	if (c->port <= 0) {
		rr_fx_child_stop(c, 1000);
		return -EIO;
	}
	return 0;
}

int rr_fx_child_start(struct rr_fx_child *c, unsigned long nofile, unsigned threads)
{
	int rc = rr_fx_child_prepare(c);

	if (rc)
		return rc;
	rc = rr_fx_child_run(c, nofile, threads);
	if (rc)
		rr_fx_dir_remove(&c->d);
	return rc;
}

bool rr_fx_child_alive(struct rr_fx_child *c)
{
	if (c->pid <= 0 || c->reaped)
		return false;
	if (waitpid(c->pid, &c->status, WNOHANG) == c->pid) {
		c->reaped = true;
		return false;
	}
	return true;
}

/* Reads /proc/PID/@file into @buf. */
static int proc_read(pid_t pid, const char *file, char *buf, size_t cap)
{
	char path[400];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

double rr_fx_child_cpu(const struct rr_fx_child *c)
{
	char buf[1024], *p;
	unsigned long ut, st;

	if (proc_read(c->pid, "stat", buf, sizeof(buf)))
		return -1;
	p = strrchr(buf, ')');   /* the name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double rr_fx_child_runnable(const struct rr_fx_child *c)
{
	char path[64], buf[128];
	unsigned long long run, wait, sum = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)c->pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char file[300];

		if (e->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "task/%s/schedstat", e->d_name);
		if (proc_read(c->pid, file, buf, sizeof(buf)) == 0 &&
		    sscanf(buf, "%llu %llu", &run, &wait) == 2)
			sum += run + wait;
	}
	closedir(d);
	return (double)sum / 1e9;
}

long rr_fx_child_rss_kb(const struct rr_fx_child *c)
{
	char buf[4096], *p;

	if (proc_read(c->pid, "status", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "VmRSS:");
	return p ? atol(p + 6) : -1;
}

int rr_fx_child_nfds(const struct rr_fx_child *c)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)c->pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

bool rr_fx_child_wait_nfds(const struct rr_fx_child *c, int n, unsigned ms)
{
	uint64_t end = rr_fx_ms() + ms;

	for (;;) {
		int k = rr_fx_child_nfds(c);

		if (k >= 0 && k <= n)
			return true;
		if (k < 0 || rr_fx_ms() > end)
			return false;
		nap_ms(5);
	}
}

int rr_fx_child_stop(struct rr_fx_child *c, unsigned ms)
{
	uint64_t end = rr_fx_ms() + ms;
	int rc;

	if (c->pid > 0 && !c->reaped) {
		kill(c->pid, SIGTERM);
		while (rr_fx_child_alive(c) && rr_fx_ms() < end)
			nap_ms(5);
		if (!c->reaped) {
			kill(c->pid, SIGKILL);
			if (waitpid(c->pid, &c->status, 0) == c->pid)
				c->reaped = true;
		}
	}
	rr_fx_dir_remove(&c->d);
	if (!c->reaped)
		return -ECHILD;
	rc = WIFEXITED(c->status) ? WEXITSTATUS(c->status)
				  : -(WIFSIGNALED(c->status) ? WTERMSIG(c->status) : 1);
	c->pid = -1;
	return rc;
}

/* ---- clients ---- */

static int client_new(int port, unsigned ms, struct rpcrdma_client **out)
{
	struct rpcrdma_client_opts o;
	char url[64];

	memset(&o, 0, sizeof(o));
	o.timeout_ms = ms;
	o.connect_timeout_ms = ms;
	o.no_reconnect = true;
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
	return rpcrdma_client_create(url, FS_PROG, FS_VERS, &o, out);
}

/* A failed probe's report (@c: its client, NULL when the connect failed):
 * which step failed and when, what its connection carried (the Call sent,
 * a Reply received, credits waited for, lost), then the server's and the
 * process's state while both ends still stand (probe_diag.h). A lab VM's
 * rare probe timeouts (docs/interop.md) need it. */
static void probe_report(int port, struct rpcrdma_client *c, const char *step, uint64_t t0,
			 int rc)
{
	struct rpcrdma_xprt_stats st;

	fprintf(stderr, "  probe: %s failed after %llu ms: %s\n", step,
		(unsigned long long)(rr_fx_ms() - t0), strerror(rc < 0 ? -rc : rc));
	if (c && rpcrdma_client_stats(c, &st) == 0)
		fprintf(stderr, "  probe: client connections %u sends %llu recvs %llu "
				"credits_exhausted %llu fatal_errors %llu\n",
			st.connections, (unsigned long long)st.sends, (unsigned long long)st.recvs,
			(unsigned long long)st.credits_exhausted,
			(unsigned long long)st.fatal_errors);
	rr_diag_dump(port, stderr);
}

int rr_fx_probe(int port, unsigned ms)
{
	struct rpcrdma_client *c = NULL;
	uint8_t data[1000];
	void *back = NULL;
	uint32_t blen = 0;
	uint64_t t0 = rr_fx_ms();
	const char *step = "connect";
	int rc;

	rc = client_new(port, ms, &c);
	if (rc) {
		c = NULL;
	} else {
		step = "NULL";
		rc = fs_null(c, NULL, 0);
		if (!rc) {
			step = "ECHO";
			rr_fx_pattern(data, sizeof(data), 77, 0);
			rc = fs_echo(c, data, sizeof(data), &back, &blen);
			if (!rc && (blen != sizeof(data) || memcmp(back, data, sizeof(data))))
				rc = -EBADMSG;
			free(back);
		}
	}
	if (rc)
		probe_report(port, c, step, t0, rc);
	if (c)
		rpcrdma_client_destroy(c);
	return rc;
}

int rr_fx_client_read(int port, const char *path, uint32_t len, uint32_t seed, unsigned ms)
{
	struct rpcrdma_client *c;
	uint8_t *buf = malloc(len ? len : 1);
	uint32_t got = 0;
	bool eof;
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = client_new(port, ms, &c);
	if (!rc) {
		rc = fs_read(c, path, 0, buf, len, &got, &eof);
		if (rc > 0)
			rc = -EIO;   /* an fs_status */
		if (!rc && (got != len || rr_fx_pattern_diff(buf, len, seed, 0) >= 0))
			rc = -EBADMSG;
		rpcrdma_client_destroy(c);
	}
	free(buf);
	return rc;
}

static void *busy_main(void *arg)
{
	struct rr_fx_busy *b = arg;
	struct rpcrdma_client *c = NULL;
	uint8_t *data = b->len ? malloc(b->len) : NULL;

	if (data)
		rr_fx_pattern(data, b->len, b->seed, 0);
	while (!atomic_load(&b->stop)) {
		uint32_t n;
		int rc;

		if (!c && (rc = client_new(b->port, 10000, &c)) != 0) {
			c = NULL;
			goto failed;
		}
		rc = data ? fs_write(c, b->name, 0, FS_WRITE_CREATE, data, (uint32_t)b->len, &n)
			  : fs_null(c, NULL, 0);
		if (rc == 0) {
			atomic_fetch_add(&b->calls, 1);
			continue;
		}
		rpcrdma_client_destroy(c);
		c = NULL;
failed:
		if (rc == -ETIMEDOUT)
			atomic_fetch_add(&b->timeouts, 1);
		if (!atomic_fetch_add(&b->failures, 1))
			b->first_err = rc;
		nap_ms(10);
	}
	if (c)
		rpcrdma_client_destroy(c);
	free(data);
	return NULL;
}

int rr_fx_busy_start(struct rr_fx_busy *b, int port, const char *name, size_t len,
		     uint32_t seed)
{
	memset(b, 0, sizeof(*b));
	b->port = port;
	b->len = len;
	b->seed = seed;
	snprintf(b->name, sizeof(b->name), "%s", name ? name : "busy");
	atomic_init(&b->stop, false);
	atomic_init(&b->calls, 0);
	atomic_init(&b->failures, 0);
	atomic_init(&b->timeouts, 0);
	return -pthread_create(&b->th, NULL, busy_main, b);
}

void rr_fx_busy_stop(struct rr_fx_busy *b)
{
	atomic_store(&b->stop, true);
	pthread_join(b->th, NULL);
}
