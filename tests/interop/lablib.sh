# SPDX-License-Identifier: BSD-2-Clause
# lablib.sh - shell helpers for tests/interop/vm-tests.sh inside the lab VM.
# Sourced as /lab/lablib.sh. The VM has no NIC; two veth pairs make the
# "wire" (rdma_cm refuses loopback addresses, and rxe would short-circuit two
# devices on one netdev so that no capture sees the frames):
#
#   siw:  vS0 192.0.2.1 (siw0)  <-veth->  vS1 192.0.2.2 (siw1)
#   rxe:  vR0 192.0.2.3 (rxe0)  <-veth->  vR1 192.0.2.4 (rxe1)
#
# Both ends live in one network namespace, so the local routes of the four
# addresses are moved to table 100, consulted only for packets that arrive on
# a veth: .1 -> .2 leaves through vS0 and comes in on vS1.
#
# Results: one line per check in $LAB_OUT/results.txt,
#   PASS <name> | FAIL <name> | SKIP <name>: <why it is not available>
LAB_OUT=${LAB_OUT:-/lab/out}
SIW_C=192.0.2.1 SIW_S=192.0.2.2 RXE_C=192.0.2.3 RXE_S=192.0.2.4
BIN=/share/tests/interop
# the lab programs link librpcrdma.so from the build tree (/share)
export LD_LIBRARY_PATH=/share${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

lab_say() { echo "LAB: $*"; }
lab_pass() { echo "PASS $*" | tee -a $LAB_OUT/results.txt; }
lab_fail() { echo "FAIL $*" | tee -a $LAB_OUT/results.txt; }
lab_skip() { echo "SKIP $*" | tee -a $LAB_OUT/results.txt; }

# lab_check NAME CMD...: PASS/FAIL by exit status (77 = SKIP, "not yet
# available": the program printed why on its last line)
lab_check() {
	_n=$1; shift
	"$@" > /tmp/check.out 2>&1; _rc=$?
	sed 's/^/    /' /tmp/check.out
	case $_rc in
	0) lab_pass "$_n" ;;
	77) lab_skip "$_n: $(grep -v '^ *$' /tmp/check.out | tail -n 1)" ;;
	*) lab_fail "$_n (rc=$_rc)" ;;
	esac
	return $_rc
}

# lab_section NAME: true when NAME is selected (LAB_ONLY, via /lab/only)
lab_section() {
	_only=$(cat /lab/only 2>/dev/null)
	[ -z "$_only" ] && return 0
	case " $_only " in *" $1 "*) return 0 ;; esac
	return 1
}

_lab_veth() { # A B addrA addrB
	ip link add "$1" type veth peer name "$2"
	ip addr add "$3/32" dev "$1"; ip addr add "$4/32" dev "$2"
	ip link set "$1" up; ip link set "$2" up
	for _d in "$1" "$2"; do
		sysctl -qw "net.ipv4.conf.$_d.rp_filter=0" "net.ipv4.conf.$_d.accept_local=1"
	done
	ip route del local "$3" table local; ip route del local "$4" table local
	ip route add local "$3" dev "$1" table 100; ip route add local "$4" dev "$2" table 100
	ip rule add iif "$1" lookup 100 pref 10; ip rule add iif "$2" lookup 100 pref 10
	ip route add "$4/32" dev "$1"; ip route add "$3/32" dev "$2"
}

lab_net() {
	sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	sysctl -qw net.ipv4.conf.all.accept_local=1
	# the local routes live in table 100 only, so binding .2/.4 (siw's kernel
	# listener, a user-space TCP listener) needs non-local bind
	sysctl -qw net.ipv4.ip_nonlocal_bind=1
	for _m in ib_uverbs rdma_ucm rdma_rxe siw; do modprobe $_m || lab_say "modprobe $_m failed"; done
	_lab_veth vS0 vS1 $SIW_C $SIW_S
	rdma link add siw0 type siw netdev vS0
	rdma link add siw1 type siw netdev vS1
	_lab_veth vR0 vR1 $RXE_C $RXE_S
	rdma link add rxe0 type rxe netdev vR0
	rdma link add rxe1 type rxe netdev vR1
	rdma link show
}

# lab_pair siw|rxe: C S (client/server address), IF (capture interface),
# DC DS (client/server rdma device)
lab_pair() {
	if [ "$1" = siw ]; then C=$SIW_C S=$SIW_S IF=vS0 DC=siw0 DS=siw1
	else C=$RXE_C S=$RXE_S IF=vR0 DC=rxe0 DS=rxe1; fi
}

# lab_cap_start NAME IFACE DECODE OURS FILTER WHAT [tcpdump filter...]:
# capture into $LAB_OUT/NAME.pcap; the host checks that each comma-separated
# tshark display filter of FILTER (no spaces) matches a frame and that none
# of OUR frames is malformed. OURS is a display filter for the frames our
# code sent (e.g. ip.src==192.0.2.1), "-" for all of them, "none" for a
# baseline capture of kernel peers only. DECODE is a tshark -d "decode as"
# rule (e.g. tcp.port==7401,rpc), "disable:PROTO" (tshark
# --disable-protocol, e.g. for test payloads that are not RPC but follow
# RFC 8797 private data, which the rpcordma heuristic would try),
# "pref:NAME:VALUE" (tshark -o, e.g. rpc.dissect_unknown_programs:TRUE for
# the Calls of a program tshark does not know), or "-".
# lab_cap_stop ends it.
lab_cap_start() {
	_cn=$1 _ci=$2 _cd=$3 _co=$4 _cf=$5 _cw=$6; shift 6
	tcpdump --immediate-mode -B 32768 -Z root -n -i "$_ci" -s 0 -w "/tmp/$_cn.pcap" "$@" \
		> "/tmp/td.$_cn.log" 2>&1 &
	LAB_TD=$!
	for _i in $(seq 100); do grep -q listening "/tmp/td.$_cn.log" && break; sleep 0.1; done
	echo "$_cn $_cd $_co $_cf $_cw" >> $LAB_OUT/pcaps.txt
	_cres=$(wc -l < $LAB_OUT/results.txt)
}
lab_cap_stop() {
	sleep 0.3; kill $LAB_TD 2>/dev/null; wait $LAB_TD 2>/dev/null
	# nothing ran (every result since the start is SKIP): no capture to check
	if ! tail -n +$((_cres + 1)) $LAB_OUT/results.txt | grep -q -E '^(PASS|FAIL)'; then
		sed -i "/^$_cn /d" $LAB_OUT/pcaps.txt
		rm -f "/tmp/$_cn.pcap"
		echo "(capture $_cn dropped: nothing ran)"
		return 0
	fi
	cp "/tmp/$_cn.pcap" $LAB_OUT/ && rm -f "/tmp/$_cn.pcap"
	grep -E 'captured|dropped by kernel' "/tmp/td.$_cn.log" | tr '\n' ' '; echo
}

# lab_wait_cm PORT [SECONDS]: until an rdma_cm id listens on PORT
lab_wait_cm() {
	_w=$(( ${2:-30} * 10 ))
	while [ $_w -gt 0 ]; do
		rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [^ ]*:$1 " && return 0
		sleep 0.1; _w=$((_w - 1))
	done
	lab_say "no rdma_cm listener on port $1"; return 1
}
# lab_wait_tcp ADDR PORT [SECONDS]: until a TCP socket listens there
lab_wait_tcp() {
	_w=$(( ${3:-30} * 10 ))
	while [ $_w -gt 0 ]; do
		ss -ltnH 2>/dev/null | awk '{print $4}' | grep -qE "^($1|0\.0\.0\.0|\*):$2\$" && return 0
		sleep 0.1; _w=$((_w - 1))
	done
	lab_say "no TCP listener on $1:$2"; return 1
}

# lab_serve_run TIMEOUT WAIT "server cmd" "client cmd": server in the
# background, client once WAIT ("cm PORT" | "tcp ADDR PORT" | "sleep N")
# holds; 0 only if both exit 0; 77 if either said 77 (not available) and
# none failed.
lab_serve_run() {
	_to=$1 _wait=$2
	timeout "$_to" sh -c "$3" > /tmp/srv.log 2>&1 &
	_sp=$!
	# wait for the server to listen, or to die (then no client runs)
	_w=200
	while [ $_w -gt 0 ] && kill -0 $_sp 2>/dev/null; do
		case $_wait in
		cm*) rdma resource show cm_id 2>/dev/null |
			grep -q "state LISTEN .*src-addr [^ ]*:${_wait#cm } " && break ;;
		tcp*) _wa=${_wait#tcp }
			ss -ltnH 2>/dev/null | awk '{print $4}' |
				grep -qE "^(${_wa% *}|0\.0\.0\.0|\*):${_wa#* }\$" && break ;;
		*) sleep 1; break ;;
		esac
		sleep 0.1; _w=$((_w - 1))
	done
	if kill -0 $_sp 2>/dev/null; then
		[ $_w = 0 ] && lab_say "server not listening after 20 s ($_wait); running the client anyway"
		timeout "$_to" sh -c "$4"; _cr=$?
		for _i in $(seq 300); do kill -0 $_sp 2>/dev/null || break; sleep 0.1; done
		kill $_sp 2>/dev/null
		wait $_sp; _sr=$?
	else
		wait $_sp; _sr=$?
		_cr=none
		echo "(server ended with status $_sr before a client ran)"
	fi
	echo "--- server (rc=$_sr):"; sed 's/^/  /' /tmp/srv.log
	echo "--- client rc=$_cr"
	[ "$_cr" = 0 ] && [ $_sr = 0 ] && return 0
	if [ "$_cr" = none ]; then
		[ $_sr = 77 ] && { tail -n 1 /tmp/srv.log; return 77; }
		return 1
	fi
	if [ $_cr = 77 ] || [ $_sr = 77 ]; then
		[ $_cr != 0 ] && [ $_cr != 77 ] && return 1
		[ $_sr != 0 ] && [ $_sr != 77 ] && [ $_sr != 143 ] && return 1
		[ $_sr = 77 ] && tail -n 1 /tmp/srv.log
		return 77
	fi
	return 1
}

# lab_nfsd: kernel nfsd exporting a tmpfs /export over TCP 2049 and RDMA 20049
lab_nfsd() {
	modprobe rpcrdma; modprobe nfsd
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p /export /var/lib/nfs/v4recovery
	mountpoint -q /export || mount -t tmpfs -o size=512m tmpfs /export
	echo '/export *(rw,no_root_squash,insecure,no_subtree_check,fsid=1)' > /etc/exports
	echo 10 > /proc/fs/nfsd/nfsv4gracetime 2>/dev/null
	echo 10 > /proc/fs/nfsd/nfsv4leasetime 2>/dev/null
	rpcbind -w 2>/dev/null || rpcbind
	rpc.mountd
	exportfs -ra
	rpc.nfsd 8
	echo 'rdma 20049' > /proc/fs/nfsd/portlist
	lab_say "nfsd listeners: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
}
