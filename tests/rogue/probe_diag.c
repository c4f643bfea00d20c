/* SPDX-License-Identifier: BSD-2-Clause */
/* The state dump of a failed probe (probe_diag.h): the probed server's
 * counters, the liveness of each engine loop (a task posted to it and
 * timed), the process's threads from /proc/self/task. */
#include "probe_diag.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "engine/engine.h"
#include "rpcrdma/stats.h"
#include "transport/rdma/tp.h"

#define DIAG_SERVERS 8
#define DIAG_LOOPS 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int port;
	struct rpcrdma_server *s;
} g_srv[DIAG_SERVERS];

/* One liveness task per loop, reused: posted again only once it ran. */
static struct diag_task {
	struct rr_loop_task t;
	atomic_bool pending;
	_Atomic uint64_t posted, ran;   /* ms */
} g_task[DIAG_LOOPS];

static uint64_t diag_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rr_diag_server_set(int port, struct rpcrdma_server *s)
{
	pthread_mutex_lock(&g_lock);
	for (unsigned i = 0; i < DIAG_SERVERS; i++)
		if (g_srv[i].port == port)
			g_srv[i].port = 0;
	for (unsigned i = 0; s && i < DIAG_SERVERS; i++)
		if (!g_srv[i].port) {
			g_srv[i].port = port;
			g_srv[i].s = s;
			break;
		}
	pthread_mutex_unlock(&g_lock);
}

static void diag_task_run(struct rr_loop_task *t)
{
	struct diag_task *d = RR_CONTAINER_OF(t, struct diag_task, t);

	atomic_store(&d->ran, diag_ms());
	atomic_store(&d->pending, false);
}

unsigned rr_diag_loops(unsigned wait_ms, long *ms, unsigned cap)
{
	unsigned n = rr_engine_nloops();
	uint64_t end;
	bool all;

	if (n > cap)
		n = cap;
	if (n > DIAG_LOOPS)
		n = DIAG_LOOPS;
	for (unsigned i = 0; i < n; i++) {
		if (atomic_load(&g_task[i].pending))
			continue;   /* the last one never ran: timed from its post */
		g_task[i].t.fn = diag_task_run;
		atomic_store(&g_task[i].posted, diag_ms());
		atomic_store(&g_task[i].pending, true);
		rr_loop_post(rr_engine_loop(i), &g_task[i].t);
	}
	end = diag_ms() + wait_ms;
	do {
		all = true;
		for (unsigned i = 0; i < n; i++)
			all = all && !atomic_load(&g_task[i].pending);
		if (!all) {
			struct timespec ts = {0, 1000000L};

			nanosleep(&ts, NULL);
		}
	} while (!all && diag_ms() < end);
	for (unsigned i = 0; i < n; i++)
		ms[i] = atomic_load(&g_task[i].pending)
				? -1
				: (long)(atomic_load(&g_task[i].ran) - atomic_load(&g_task[i].posted));
	return n;
}

static void dump_server(int port, FILE *f)
{
	struct rpcrdma_xprt_stats st;
	struct rpcrdma_server *s = NULL;

	pthread_mutex_lock(&g_lock);
	for (unsigned i = 0; i < DIAG_SERVERS; i++)
		if (g_srv[i].port == port)
			s = g_srv[i].s;
	if (s && rpcrdma_server_stats(s, &st) == 0) {
		fprintf(f, "  diag: server :%d: connections %u refused_conns %llu "
			   "handshakes_dropped %llu accept_backoffs %llu idle_closed %llu\n",
			port, st.connections, (unsigned long long)st.refused_conns,
			(unsigned long long)st.handshakes_dropped,
			(unsigned long long)st.accept_backoffs, (unsigned long long)st.idle_closed);
		fprintf(f, "  diag: server :%d: fatal_errors %llu send_stalls %llu sends %llu "
			   "recvs %llu dropped %llu rrep_parked %llu credit_overruns %llu\n",
			port, (unsigned long long)st.fatal_errors,
			(unsigned long long)st.send_stalls, (unsigned long long)st.sends,
			(unsigned long long)st.recvs, (unsigned long long)st.dropped,
			(unsigned long long)st.rrep_parked, (unsigned long long)st.credit_overruns);
	} else {
		fprintf(f, "  diag: server :%d: not a server of this process\n", port);
	}
	pthread_mutex_unlock(&g_lock);
}

static void dump_loops(FILE *f)
{
	long ms[DIAG_LOOPS];
	unsigned n = rr_diag_loops(2000, ms, DIAG_LOOPS);

	if (!n)
		fprintf(f, "  diag: engine not started\n");
	for (unsigned i = 0; i < n; i++) {
		if (ms[i] < 0)
			fprintf(f, "  diag: loop %u: no answer within 2000 ms (blocked or "
				   "starved)\n", i);
		else
			fprintf(f, "  diag: loop %u: ran a task in %ld ms\n", i, ms[i]);
	}
}

/* @path's first line into @buf (newline cut); "?" when unreadable. */
static void read_line(const char *path, char *buf, size_t cap)
{
	FILE *p = fopen(path, "r");

	if (!p || !fgets(buf, (int)cap, p))
		snprintf(buf, cap, "?");
	if (p)
		fclose(p);
	buf[strcspn(buf, "\n")] = 0;
}

static void dump_threads(FILE *f)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long tick = 100;   /* USER_HZ, as Linux reports it in stat */
	unsigned n = 0;

	if (!d) {
		fprintf(f, "  diag: no /proc/self/task\n");
		return;
	}
	while ((e = readdir(d)) != NULL) {
		char path[300], comm[64], stat[512], wchan[64];
		unsigned long long ut = 0, st = 0;
		char state = '?';
		const char *p;

		if (e->d_name[0] == '.')
			continue;
		if (++n > 96) {
			fprintf(f, "  diag: ... more threads\n");
			break;
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		read_line(path, comm, sizeof(comm));
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		read_line(path, stat, sizeof(stat));
		snprintf(path, sizeof(path), "/proc/self/task/%s/wchan", e->d_name);
		read_line(path, wchan, sizeof(wchan));
		/* after "pid (comm) ": state, then utime and stime are the
		 * 12th and 13th fields */
		p = strrchr(stat, ')');
		if (p && sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
				&state, &ut, &st) != 3)
			state = '?';
		fprintf(f, "  diag: thread %s %-16s %c cpu %llu ms wchan %s\n", e->d_name, comm,
			state, (ut + st) * 1000u / (unsigned long long)tick, wchan);
	}
	closedir(d);
}

/* The TCP sockets of the probed port, both ends (/proc/net/tcp, IPv4:
 * the rogue suite runs on 127.0.0.1): the listener's accept queue (a
 * LISTEN socket's rx_queue), each connection's state and the bytes no one
 * has read yet on either side (an MPA Request or a Call waiting for the
 * server, a Reply for the client). */
static void dump_sockets(int port, FILE *f)
{
	static const char *const st_name[] = {"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV",
					      "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE",
					      "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING"};
	FILE *p = fopen("/proc/net/tcp", "r");
	char line[256];
	unsigned n = 0;

	if (!p) {
		fprintf(f, "  diag: no /proc/net/tcp\n");
		return;
	}
	while (fgets(line, sizeof(line), p)) {
		unsigned lport, rport, st;
		unsigned long tx, rx;

		if (sscanf(line, " %*u: %*x:%x %*x:%x %x %lx:%lx", &lport, &rport, &st, &tx, &rx) != 5 ||
		    (lport != (unsigned)port && rport != (unsigned)port))
			continue;
		if (++n > 64) {
			fprintf(f, "  diag: ... more sockets\n");
			break;
		}
		if (st == 10)   /* LISTEN: rx_queue is the accept queue */
			fprintf(f, "  diag: tcp :%u LISTEN accept queue %lu\n", lport, rx);
		else
			fprintf(f, "  diag: tcp :%u -> :%u %s unsent %lu unread %lu\n", lport, rport,
				st < RR_ARRAY_SIZE(st_name) ? st_name[st] : "?", tx, rx);
	}
	if (!n)
		fprintf(f, "  diag: tcp: no socket on port %d\n", port);
	fclose(p);
}

/* The allocator's trims (common.h): they run on a progress loop. */
static void dump_trims(FILE *f)
{
	struct rr_mem_trim_stats t;

	rr_mem_trim_stats(&t);
	fprintf(f, "  diag: malloc_trim: %llu runs, longest %llu ms, ", (unsigned long long)t.runs,
		(unsigned long long)(t.longest_ns / 1000000u));
	if (t.running_since_ns)
		fprintf(f, "one running for %llu ms\n",
			(unsigned long long)((rr_now_ns(NULL) - t.running_since_ns) / 1000000u));
	else
		fprintf(f, "none running\n");
}

void rr_diag_dump_around(int port, FILE *f)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	fprintf(f, "  diag: state at %lld.%03ld (CLOCK_REALTIME)\n", (long long)now.tv_sec,
		now.tv_nsec / 1000000L);
	dump_sockets(port, f);
	dump_trims(f);
	rr_tp_debug_cqs(f);   /* who watches each CQ, who holds it, its ring, its QPs */
	dump_loops(f);
	dump_threads(f);
	fflush(f);
}

void rr_diag_dump(int port, FILE *f)
{
	dump_server(port, f);
	rr_diag_dump_around(port, f);
	/* again, after the loops' check (up to 2 s): a handshake the server
	 * was still timing out (10 s, as the probe's connect) shows here */
	dump_server(port, f);
	fflush(f);
}
