#!/bin/bash
# run-lab.sh - librpcrdma interoperability lab: the project against the Linux
# kernel's RDMA peers (soft-iWARP "siw", soft-RoCE "rxe", nfsd/svcrdma) in a
# throw-away VM. The one documented command (docs/interop.md):
#
#     sudo tests/interop/run-lab.sh            # = setup + build + vm + check
#
# What it does:
#   setup  host packages (apt-get: qemu, debootstrap, tshark, linux-headers,
#          linux-source), a Debian 12 root file system with rdma-core, perftest,
#          nfs-kernel-server and tcpdump (debootstrap), siw.ko built out of
#          tree (Debian's kernel has CONFIG_RDMA_SIW unset), a small initrd and
#          an ext4 image. Everything is cached under $LAB_DIR (.stamp-* files).
#   build  the project (Release, static) plus the lab programs of
#          tests/interop/ into $LAB_DIR/build.
#   vm     boots Debian's own kernel (linux-image-amd64) in qemu, no network
#          device, the build shared in read-only at /share (9p), the run dir
#          at /lab (9p); runs tests/interop/vm-tests.sh as root; powers off.
#          Bounded by LAB_TIMEOUT (whole VM) and per-test timeouts inside.
#   check  host side: tshark decodes every capture the VM wrote; a capture
#          passes when its expected protocol is present and no frame is
#          malformed. Prints "N passed, N failed, N not yet available".
# Exit status: 0 when nothing failed; 1 failures; 124 VM timed out; 125 VM
# died without writing results.
#
# Commands: all (default) | setup | build | vm [SCRIPT] | check [RUN_DIR] |
#           info | clean
# Environment:
#   LAB_DIR      cache + runs (default /var/tmp/rpcrdma-lab)
#   LAB_SEED     an existing lab dir whose rootfs/ (with .stamp-rootfs) may be
#                hard-linked instead of running debootstrap (saves ~2 min)
#   LAB_TIMEOUT  wall-clock limit of one VM run in seconds (default 1200)
#   LAB_ACCEL    auto | tcg | kvm (auto: kvm only with vmx/svm and /dev/kvm)
#   LAB_MEM      MiB (default 2048)   LAB_SMP  vCPUs (default 2)
#   LAB_ONLY     space-separated section names for vm-tests.sh (default all)
#   LAB_BUILD    build directory (default $LAB_DIR/build)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
LAB_DIR=${LAB_DIR:-/var/tmp/rpcrdma-lab}
LAB_TIMEOUT=${LAB_TIMEOUT:-1200}
LAB_MEM=${LAB_MEM:-2048}
LAB_SMP=${LAB_SMP:-2}
LAB_ACCEL=${LAB_ACCEL:-auto}
SUITE=bookworm
ROOTFS=$LAB_DIR/rootfs
IMG=$LAB_DIR/rpcrdma-lab.img
BUILD=${LAB_BUILD:-$LAB_DIR/build}
GUEST_PKGS="linux-image-amd64,kmod,iproute2,procps,busybox,rdma-core,ibverbs-providers,\
ibverbs-utils,rdmacm-utils,perftest,libibverbs1,librdmacm1,libtirpc3,nfs-kernel-server,\
nfs-common,rpcbind,tcpdump,fio"
HOST_PKGS="qemu-system-x86 debootstrap e2fsprogs tshark gcc make cmake ninja-build pkg-config
           libibverbs-dev librdmacm-dev libtirpc-dev rpcsvc-proto xz-utils"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

say() { printf '[run-lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
t_now() { date +%s; }

need_root() { [ "$(id -u)" = 0 ] || die "needs root (apt-get, debootstrap, chroot): run it with sudo"; }

# ------------------------------------------------------------------ setup
host_packages() {
	local p miss=()
	for p in $HOST_PKGS; do
		dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || miss+=("$p")
	done
	[ ${#miss[@]} = 0 ] && return 0
	say "apt-get install ${miss[*]}"
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	timeout 600 apt-get update -qq
	timeout 1200 apt-get install -y -qq --no-install-recommends "${miss[@]}" >/dev/null
}

# the Debian mirror this host's apt uses for $SUITE
mirror_url() {
	apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
		awk -v s="$SUITE" '$2 == s { print $1; exit }'
}

make_rootfs() {
	[ -f "$LAB_DIR/.stamp-rootfs" ] && return 0
	rm -rf "$ROOTFS"
	if [ -n "${LAB_SEED:-}" ] && [ -f "$LAB_SEED/.stamp-rootfs" ]; then
		say "hard-linking the root file system of $LAB_SEED"
		cp -al "$LAB_SEED/rootfs" "$ROOTFS"
	else
		local m; m=$(mirror_url); [ -n "$m" ] || die "this host's apt has no source for $SUITE"
		say "debootstrap $SUITE from $m (about 2 minutes)"
		timeout 1800 debootstrap --variant=minbase --include="$GUEST_PKGS" "$SUITE" "$ROOTFS" "$m" \
			> "$LAB_DIR/debootstrap.log" 2>&1 || { tail -n 20 "$LAB_DIR/debootstrap.log"; die "debootstrap failed"; }
		chroot "$ROOTFS" apt-get clean
		rm -rf "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
	fi
	touch "$LAB_DIR/.stamp-rootfs"
}

guest_kernel() { ls "$ROOTFS/lib/modules" | sort -V | tail -n 1; }

# Debian 12 kernels ship '# CONFIG_RDMA_SIW is not set': build the module from
# linux-source-6.1 against the guest kernel's headers.
make_siw() {
	local k ver d; k=$(guest_kernel)
	[ -f "$ROOTFS/lib/modules/$k/updates/siw.ko" ] && return 0
	ver=$(chroot "$ROOTFS" dpkg-query -W -f '${Version}' "linux-image-$k")
	say "building siw.ko for $k ($ver)"
	if ! dpkg-query -W -f '${Status}' "linux-headers-$k" 2>/dev/null | grep -q 'ok installed'; then
		timeout 1200 apt-get install -y -qq --no-install-recommends "linux-headers-$k" >/dev/null 2>&1 || {
			timeout 600 apt-get update -qq
			timeout 1200 apt-get install -y -qq --no-install-recommends "linux-headers-$k" >/dev/null
		}
	fi
	[ -f /usr/src/linux-source-6.1.tar.xz ] ||
		timeout 1200 apt-get install -y -qq --no-install-recommends "linux-source-6.1=$ver" >/dev/null 2>&1 ||
		timeout 1200 apt-get install -y -qq --no-install-recommends linux-source-6.1 >/dev/null
	d=$LAB_DIR/siw-src; rm -rf "$d"; mkdir -p "$d"
	tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$d" --strip-components=5 \
		--wildcards 'linux-source-6.1/drivers/infiniband/sw/siw/*'
	make -s -C "/usr/src/linux-headers-$k" M="$d" CONFIG_RDMA_SIW=m modules > "$LAB_DIR/siw-build.log" 2>&1 ||
		{ tail -n 20 "$LAB_DIR/siw-build.log"; die "siw.ko build failed"; }
	mkdir -p "$ROOTFS/lib/modules/$k/updates"
	rm -f "$ROOTFS/lib/modules/$k/updates/siw.ko"
	strip --strip-debug -o "$ROOTFS/lib/modules/$k/updates/siw.ko" "$d/siw.ko"
	chroot "$ROOTFS" depmod -a "$k"
}

# The image: the rootfs plus our PID 1 and a small initrd (virtio + ext4
# only). Our files have names of their own so a seeded (hard-linked) rootfs
# is never written through.
make_image() {
	local k; k=$(guest_kernel)
	if [ -f "$LAB_DIR/.stamp-image" ] && cmp -s "$HERE/lab-init.sh" "$ROOTFS/sbin/rpcrdma-lab-init"; then
		return 0
	fi
	say "building $IMG"
	rm -f "$ROOTFS/sbin/rpcrdma-lab-init"
	install -m 755 "$HERE/lab-init.sh" "$ROOTFS/sbin/rpcrdma-lab-init"
	rm -rf "$ROOTFS/etc/initramfs-rpcrdma-lab"
	mkdir -p "$ROOTFS/etc/initramfs-rpcrdma-lab"
	cp -r "$ROOTFS/etc/initramfs-tools/." "$ROOTFS/etc/initramfs-rpcrdma-lab/"
	rm -f "$ROOTFS/etc/initramfs-rpcrdma-lab/initramfs.conf" "$ROOTFS/etc/initramfs-rpcrdma-lab/modules"
	sed 's/^MODULES=.*/MODULES=list/; s/^COMPRESS=.*/COMPRESS=gzip/' \
		"$ROOTFS/etc/initramfs-tools/initramfs.conf" > "$ROOTFS/etc/initramfs-rpcrdma-lab/initramfs.conf"
	printf 'virtio_pci\nvirtio_blk\next4\n' > "$ROOTFS/etc/initramfs-rpcrdma-lab/modules"
	rm -f "$ROOTFS/boot/initrd-rpcrdma-lab.img"
	chroot "$ROOTFS" mkinitramfs -d /etc/initramfs-rpcrdma-lab -o /boot/initrd-rpcrdma-lab.img "$k" >/dev/null 2>&1
	chroot "$ROOTFS" dpkg-query -W -f '${Package} ${Version}\n' > "$LAB_DIR/guest-versions.txt"
	rm -f "$IMG"
	mke2fs -q -t ext4 -L rpcrdmalab -d "$ROOTFS" "$IMG" 1536M
	touch "$LAB_DIR/.stamp-image"
}

cmd_setup() {
	need_root
	mkdir -p "$LAB_DIR"
	exec 8> "$LAB_DIR/.lock"
	flock -w 1800 8 || die "another run-lab.sh setup holds $LAB_DIR/.lock"
	local t0; t0=$(t_now)
	host_packages; make_rootfs; make_siw; make_image
	flock -u 8
	say "setup ready in $(( $(t_now) - t0 )) s: kernel $(guest_kernel), image $IMG"
}

# ------------------------------------------------------------------ build
# Release, no sanitizer (the guest has no libasan). In the VM the build is
# /share and LD_LIBRARY_PATH=/share finds librpcrdma.so.
cmd_build() {
	say "building the project into $BUILD"
	mkdir -p "$BUILD"
	cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPCRDMA_SANITIZE=OFF \
		-DRPCRDMA_INTEROP=ON -DRPCRDMA_TESTS=ON > "$BUILD/lab-build.log" 2>&1 ||
		{ tail -n 30 "$BUILD/lab-build.log"; die "cmake failed"; }
	# everything: rr-tests runs the tools next to it (tests/test_tools.c)
	nice ninja -C "$BUILD" -j "${LAB_JOBS:-2}" \
		>> "$BUILD/lab-build.log" 2>&1 || { tail -n 30 "$BUILD/lab-build.log"; die "build failed"; }
	grep -E 'rdma-core provider|libtirpc' "$BUILD/lab-build.log" | sed 's/^-- /  /' >&2 || true
}

# ------------------------------------------------------------------ vm
pick_accel() {
	case $LAB_ACCEL in
	tcg | kvm) echo "$LAB_ACCEL" ;;
	*)	# /dev/kvm backed by kvm_pvm (no vmx/svm) hangs the guest: TCG there
		if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
			echo kvm
		else
			echo tcg
		fi ;;
	esac
}

# vm [SCRIPT]: one boot running SCRIPT (default vm-tests.sh); prints the run dir
cmd_vm() {
	local script=${1:-$HERE/vm-tests.sh} k run accel rc t0 inner
	[ -f "$LAB_DIR/.stamp-image" ] || cmd_setup
	[ -x "$BUILD/rr-tests" ] || cmd_build
	k=$(guest_kernel)
	run=$LAB_DIR/runs/$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$run/out" "$LAB_DIR/tmp"
	cp "$script" "$run/test.sh"; cp "$HERE/lablib.sh" "$run/lablib.sh"
	echo "${LAB_ONLY:-}" > "$run/only"
	ln -sfn "$run" "$LAB_DIR/runs/latest"
	accel=$(pick_accel)
	local cpu=(-accel "tcg,thread=multi" -cpu max)
	[ "$accel" = kvm ] && cpu=(-accel kvm -cpu host)
	inner=$(( LAB_TIMEOUT - 60 ))
	# one VM per LAB_DIR at a time: TCG needs both cores, and several
	# helpers may share the cache (wait for the other run to end)
	exec 7> "$LAB_DIR/.vm.lock"
	if ! flock -n 7; then
		say "another VM of $LAB_DIR is running; waiting for it (up to ${LAB_TIMEOUT}s)"
		flock -w "$LAB_TIMEOUT" 7 || die "$LAB_DIR/.vm.lock still held"
	fi
	say "booting $k ($accel, $LAB_SMP vCPU, $LAB_MEM MiB, limit ${LAB_TIMEOUT}s), run dir $run"
	t0=$(t_now)
	set +e
	TMPDIR=$LAB_DIR/tmp timeout -k 10 "$LAB_TIMEOUT" qemu-system-x86_64 "${cpu[@]}" \
		-smp "$LAB_SMP" -m "$LAB_MEM" -display none -monitor none -serial stdio -nic none -no-reboot \
		-kernel "$ROOTFS/boot/vmlinuz-$k" -initrd "$ROOTFS/boot/initrd-rpcrdma-lab.img" \
		-append "root=/dev/vda rw init=/sbin/rpcrdma-lab-init console=ttyS0 panic=-1 loglevel=4 fsck.mode=skip mitigations=off lab.timeout=$inner" \
		-drive "file=$IMG,if=virtio,format=raw,snapshot=on" \
		-virtfs "local,path=$run,mount_tag=lab,security_model=none,id=lab" \
		-virtfs "local,path=$BUILD,mount_tag=share,security_model=none,readonly=on,id=share" \
		< /dev/null 2>&1 | sed -u 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g; s/\r$//' > "$run/console.log"
	rc=${PIPESTATUS[0]}
	set -e
	echo $(( $(t_now) - t0 )) > "$run/vm-seconds"
	flock -u 7
	echo "$run"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "VM ran past ${LAB_TIMEOUT}s"; return 124; fi
	[ -f "$run/out/exit-status" ] || { say "VM ended (qemu rc $rc) without results"; return 125; }
	say "VM done in $(cat "$run/vm-seconds") s"
	return 0
}

# ------------------------------------------------------------------ check
# frame_counts PCAP FILTER... [-- tshark options]: one tshark pass; prints the
# number of frames matching each display filter (none may contain a comma),
# space separated, in order.
frame_counts() {
	local f=$1 spec=io,stat,0 n=0
	shift
	local filters=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do filters+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	for flt in "${filters[@]}"; do spec+=",$flt"; n=$((n + 1)); done
	tshark -r "$f" "$@" -q -z "$spec" 2>/dev/null |
		awk -F'|' -v n="$n" '/<>/ { for (i = 1; i <= n; i++) { v = $(3 + 2 * (i - 1)); gsub(/ /, "", v); printf "%s ", v } print ""; exit }'
}

# Every out/*.pcap listed in out/pcaps.txt ("NAME DECODE OURS FILTER WHAT") must
# contain frames matching each filter of FILTER (comma separated), and no frame
# matching OURS (the frames our code sent; "-" all, "none" a baseline of
# kernel peers only) may be malformed. Results go to out/host-results.txt in
# the VM's "PASS|FAIL|SKIP name" format, details to out/tshark.txt.
cmd_check() {
	local run=${1:-$LAB_DIR/runs/latest} name decode ours filter what f
	local hr=$run/out/host-results.txt
	: > "$hr"
	: > "$run/out/tshark.txt"
	if [ -f "$run/out/pcaps.txt" ]; then
		while read -r name decode ours filter what; do
			[ -n "$name" ] || continue
			f=$run/out/$name.pcap
			if [ ! -s "$f" ]; then echo "FAIL tshark $name: no capture" >> "$hr"; continue; fi
			local dopt=() flts=() counts total all_bad bad min=-1 c i
			case $decode in
			-) ;;
			disable:*) dopt=(--disable-protocol "${decode#disable:}") ;;
			*) dopt=(-d "$decode") ;;
			esac
			IFS=, read -r -a flts <<< "$filter"
			case $ours in
			-) counts=$(frame_counts "$f" frame _ws.malformed "${flts[@]}" -- "${dopt[@]}") ;;
			none) counts=$(frame_counts "$f" frame _ws.malformed "${flts[@]}" -- "${dopt[@]}") ;;
			*) counts=$(frame_counts "$f" frame _ws.malformed "_ws.malformed && ($ours)" "${flts[@]}" -- "${dopt[@]}") ;;
			esac
			read -r -a counts <<< "$counts"
			total=${counts[0]:-0}; all_bad=${counts[1]:-0}; i=2
			case $ours in
			-) bad=$all_bad ;;
			none) bad=0 ;;
			*) bad=${counts[2]:-0}; i=3 ;;
			esac
			for ((; i < ${#counts[@]}; i++)); do
				c=${counts[$i]}
				if [ "$min" -lt 0 ] || [ "$c" -lt "$min" ]; then min=$c; fi
			done
			[ "$min" -lt 0 ] && min=0
			{
				echo "== $name.pcap: $total frames, $min match each of '$filter'," \
					"$all_bad malformed, $bad of them ours (ours: $ours) ($what)"
				# (|| true: head closing early makes tshark die of SIGPIPE,
				# which pipefail + set -e turned into a silent exit of the
				# whole check when a capture had many malformed frames)
				tshark -r "$f" "${dopt[@]}" -T fields -e frame.protocols 2>/dev/null | sed 's/^eth:ethertype://' |
					sed -E 's/(:iwarp_ddp_rdmap(:data)?){2,}/:iwarp_ddp_rdmap...(several FPDUs)/' |
					sort | uniq -c | sort -rn | head -n 6 || true
				[ "$all_bad" = 0 ] || tshark -r "$f" "${dopt[@]}" -Y '_ws.malformed' 2>/dev/null | head -n 5 | sed 's/^/  MALFORMED /' || true
			} >> "$run/out/tshark.txt"
			if [ "$min" -gt 0 ] && [ "$bad" = 0 ]; then
				echo "PASS tshark $name: $min frames match each of '$filter', none of ours malformed ($all_bad in all)" >> "$hr"
			else
				echo "FAIL tshark $name: $min frames match each of '$filter', $bad of ours malformed ($all_bad in all)" >> "$hr"
			fi
		done < "$run/out/pcaps.txt"
	fi
	summary "$run"
}

summary() {
	local run=$1 all p f s
	all=$(cat "$run/out/results.txt" "$run/out/host-results.txt" 2>/dev/null || true)
	p=$(grep -c '^PASS' <<< "$all" || true); f=$(grep -c '^FAIL' <<< "$all" || true)
	s=$(grep -c '^SKIP' <<< "$all" || true)
	echo "===== results ($run)"
	printf '%s\n' "$all"
	echo "===== $p passed, $f failed, $s not yet available"
	[ "$f" = 0 ]
}

cmd_info() {
	echo "LAB_DIR=$LAB_DIR accel=$(pick_accel)"
	[ -d "$ROOTFS/lib/modules" ] && echo "guest kernel: $(guest_kernel)"
	grep -E '^(rdma-core|perftest|nfs-kernel-server|linux-image-6|tcpdump) ' "$LAB_DIR/guest-versions.txt" 2>/dev/null || true
	for p in qemu-system-x86 tshark; do dpkg-query -W -f '${Package} ${Version}\n' "$p" 2>/dev/null || true; done
}

cmd_all() {
	local rc=0 run
	cmd_setup
	cmd_build
	run=$(cmd_vm) || rc=$?
	[ "$rc" = 0 ] || { [ -n "${run:-}" ] && tail -n 40 "$run/console.log" >&2; return "$rc"; }
	cmd_check "$run"
}

case ${1:-all} in
all) cmd_all ;;
setup) cmd_setup ;;
build) cmd_build ;;
vm) shift; cmd_vm "$@" ;;
check) shift; cmd_check "$@" ;;
info) cmd_info ;;
clean) rm -rf "$LAB_DIR" ;;
-h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown command '$1' (try --help)" ;;
esac
