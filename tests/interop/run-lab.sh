#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# run-lab.sh - librpcrdma interoperability lab: the project against the Linux
# kernel's RDMA peers (soft-iWARP "siw", soft-RoCE "rxe", nfsd/svcrdma) in a
# throw-away VM. The one documented command (docs/interop.md):
#
#     tests/interop/run-lab.sh                 # as root: setup + build + vm + check
#
# What it does:
#   setup  host packages (apt-get: qemu, debootstrap, tshark, linux-headers,
#          linux-source), a Debian root file system ($LAB_SUITE: 12 bookworm,
#          kernel 6.1, or 13 trixie, kernel 6.12) with rdma-core, perftest,
#          nfs-kernel-server and tcpdump (debootstrap), siw.ko built out of
#          tree when the guest kernel has CONFIG_RDMA_SIW unset, a small
#          initrd and an ext4 image. Everything is cached under $LAB_DIR
#          (.stamp-* files).
#   build  the project (Release) plus the lab programs of tests/interop/
#          into $LAB_BUILD: on the host for bookworm (the host is Debian 12:
#          same rdma-core 44); in the trixie root file system (chroot, its
#          gcc and rdma-core 56 headers) for trixie, so that the guest runs
#          what its own release compiles (IBV_WR_FLUSH needs rdma-core >= 45).
#   vm     boots Debian's own kernel (linux-image-amd64) in qemu, no network
#          device, the build shared in read-only at /share (9p), the run dir
#          at /lab (9p); runs tests/interop/vm-tests.sh as root; powers off.
#          Bounded by LAB_TIMEOUT (whole VM) and per-test timeouts inside.
#   check  host side: tshark decodes every capture the VM wrote (the host's
#          tshark 4.0 for bookworm, the trixie root's tshark 4.4 through
#          chroot for trixie); a capture passes when its expected protocol is
#          present and no frame is malformed. Prints "N passed, N failed, N
#          not yet available".
# Exit status: 0 when nothing failed; 1 failures; 124 VM timed out; 125 VM
# died without writing results.
#
# Commands: all (default) | setup | build | vm [SCRIPT] | check [RUN_DIR] |
#           info | clean
# Environment:
#   LAB_SUITE    bookworm (Debian 12, kernel 6.1; default) | trixie (Debian 13,
#                kernel 6.12, rdma-core 56, Wireshark 4.4)
#   LAB_DIR      cache + runs (default /var/tmp/rpcrdma-lab for bookworm,
#                /var/tmp/rpcrdma-lab-trixie for trixie)
#   LAB_SEED     an existing lab dir of the same suite whose rootfs/ (with
#                .stamp-rootfs) may be hard-linked instead of running
#                debootstrap (saves ~2 min)
#   LAB_MIRROR   Debian mirror for debootstrap (default: the one this host's
#                apt uses for the suite, else for any suite)
#   LAB_TIMEOUT  wall-clock limit of one VM run in seconds (default 1200)
#   LAB_ACCEL    auto | tcg | kvm (auto: kvm only with vmx/svm and /dev/kvm)
#   LAB_MEM      MiB (default 2048)   LAB_SMP  vCPUs (default 2)
#   LAB_PMEM     MiB of emulated NVDIMM (persistent memory) for the guest
#                (default 512 for trixie: rxe's persistent FLUSH wants
#                persistent memory; 0 for bookworm, whose rxe has no FLUSH)
#   LAB_ONLY     space-separated section names for vm-tests.sh (default all)
#   LAB_BUILD    build directory (default $LAB_DIR/build)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SUITE=${LAB_SUITE:-bookworm}
case $SUITE in
bookworm) LAB_DIR=${LAB_DIR:-/var/tmp/rpcrdma-lab} ;;
trixie) LAB_DIR=${LAB_DIR:-/var/tmp/rpcrdma-lab-trixie} ;;
*) echo "run-lab.sh: LAB_SUITE must be bookworm or trixie, not '$SUITE'" >&2; exit 2 ;;
esac
LAB_TIMEOUT=${LAB_TIMEOUT:-1200}
LAB_MEM=${LAB_MEM:-2048}
LAB_SMP=${LAB_SMP:-2}
LAB_ACCEL=${LAB_ACCEL:-auto}
if [ "$SUITE" = trixie ]; then LAB_PMEM=${LAB_PMEM:-512}; else LAB_PMEM=${LAB_PMEM:-0}; fi
ROOTFS=$LAB_DIR/rootfs
IMG=$LAB_DIR/rpcrdma-lab.img
BUILD=${LAB_BUILD:-$LAB_DIR/build}
GUEST_PKGS="linux-image-amd64,kmod,iproute2,procps,busybox,e2fsprogs,rdma-core,ibverbs-providers,\
ibverbs-utils,rdmacm-utils,perftest,nfs-kernel-server,nfs-common,rpcbind,tcpdump,fio"
if [ "$SUITE" = bookworm ]; then
	GUEST_PKGS+=",libibverbs1,librdmacm1,libtirpc3"
else
	# trixie: the root file system is also the build root (its gcc and
	# rdma-core 56 headers; cmd_build) and the capture checker (tshark 4.4;
	# cmd_check); ndctl/daxctl for an emulated NVDIMM (LAB_PMEM)
	GUEST_PKGS+=",gcc,libc6-dev,make,cmake,ninja-build,pkg-config,libibverbs-dev,librdmacm-dev,\
libtirpc-dev,rpcsvc-proto,tshark,ndctl,daxctl"
fi
HOST_PKGS="qemu-system-x86 debootstrap e2fsprogs tshark gcc make cmake ninja-build pkg-config
           libibverbs-dev librdmacm-dev libtirpc-dev rpcsvc-proto xz-utils"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

say() { printf '[run-lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
t_now() { date +%s; }

need_root() { [ "$(id -u)" = 0 ] || die "needs root (apt-get, debootstrap, chroot): run it as root"; }

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

# the Debian mirror this host's apt uses for $SUITE, else the one it uses for
# its own release (one archive serves every suite)
mirror_url() {
	[ -n "${LAB_MIRROR:-}" ] && { echo "$LAB_MIRROR"; return; }
	apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
		awk -v s="$SUITE" '$2 == s { print $1; exit }
			$1 ~ /debian\/?$/ && !f { f = $1 } END { if (f) print f }' | head -n 1
}

# the suite a stamped root file system was made from (stamps of before the
# switch are empty: bookworm)
stamp_suite() { local s; s=$(cat "$1/.stamp-rootfs" 2>/dev/null); echo "${s:-bookworm}"; }

make_rootfs() {
	if [ -f "$LAB_DIR/.stamp-rootfs" ]; then
		[ "$(stamp_suite "$LAB_DIR")" = "$SUITE" ] && return 0
		die "$LAB_DIR holds a $(stamp_suite "$LAB_DIR") root file system, not $SUITE: use another LAB_DIR (or 'clean')"
	fi
	unmount_below || die "mounts left below $LAB_DIR: see /proc/mounts"
	rm -rf "$ROOTFS"
	if [ -n "${LAB_SEED:-}" ] && [ -f "$LAB_SEED/.stamp-rootfs" ] &&
		[ "$(stamp_suite "$LAB_SEED")" = "$SUITE" ]; then
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
	echo "$SUITE" > "$LAB_DIR/.stamp-rootfs"
}

# unmount_below: lazily unmounts every mount point below $LAB_DIR (what an
# interrupted in_root or check left), deepest first; fails if one stays.
# Nothing below $LAB_DIR is removed or copied into an image before this:
# rm -rf through a bind mount of /dev or of the source tree would destroy
# them.
unmount_below() {
	local m
	local d; d=$(realpath -m "$LAB_DIR")/
	awk -v d="$d" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
	! awk -v d="$d" 'index($2, d) == 1 { f = 1 } END { exit !f }' /proc/mounts
}

# in_root CMD...: CMD in the root file system with /proc, /sys and /dev, the
# source tree read-only at /rpcrdma-src and $BUILD at /rpcrdma-build (the
# trixie build root); the mounts are undone whatever CMD does (also on
# SIGINT/SIGTERM)
in_root() {
	local rc=0
	mkdir -p "$ROOTFS/rpcrdma-src" "$ROOTFS/rpcrdma-build" "$BUILD"
	trap 'unmount_below; exit 130' INT TERM
	mount -t proc proc "$ROOTFS/proc"
	mount --rbind /sys "$ROOTFS/sys"; mount --make-rslave "$ROOTFS/sys"
	mount --rbind /dev "$ROOTFS/dev"; mount --make-rslave "$ROOTFS/dev"
	mount --bind "$SRC" "$ROOTFS/rpcrdma-src"; mount -o remount,bind,ro "$ROOTFS/rpcrdma-src"
	mount --bind "$BUILD" "$ROOTFS/rpcrdma-build"
	chroot "$ROOTFS" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
		DEBIAN_FRONTEND=noninteractive "$@" || rc=$?
	unmount_below || die "mounts left below $LAB_DIR: see /proc/mounts"
	trap - INT TERM
	return $rc
}

# whether the guest kernel has siw (Debian 12's 6.1 has '# CONFIG_RDMA_SIW is
# not set'; the answer for 6.12 is read from its config, never assumed)
kernel_has_siw() {
	local k=$1
	grep -q '^CONFIG_RDMA_SIW=[ym]' "$ROOTFS/boot/config-$k" 2>/dev/null
}

guest_kernel() { ls "$ROOTFS/lib/modules" | sort -V | tail -n 1; }

# siw.ko for the guest kernel when its config lacks CONFIG_RDMA_SIW: built
# out of tree from Debian's linux-source-X.Y against linux-headers-$k. For
# bookworm on the host (a Debian 12 host installs both with apt-get); for
# trixie inside its root file system (the host's apt has no trixie source),
# whose apt then drops the sources again.
make_siw() {
	local k ver mm d log=$LAB_DIR/siw-build.log; k=$(guest_kernel)
	[ -f "$ROOTFS/lib/modules/$k/updates/siw.ko" ] && return 0
	if kernel_has_siw "$k"; then
		[ -f "$LAB_DIR/.siw-in-kernel" ] ||
			say "kernel $k has $(grep '^CONFIG_RDMA_SIW=' "$ROOTFS/boot/config-$k"): no out-of-tree siw.ko"
		touch "$LAB_DIR/.siw-in-kernel"
		return 0
	fi
	ver=$(chroot "$ROOTFS" dpkg-query -W -f '${Version}' "linux-image-$k")
	mm=$(echo "$k" | cut -d. -f1,2)
	say "building siw.ko for $k ($ver; CONFIG_RDMA_SIW is not set) from linux-source-$mm"
	if [ "$SUITE" = bookworm ]; then
		if ! dpkg-query -W -f '${Status}' "linux-headers-$k" 2>/dev/null | grep -q 'ok installed'; then
			timeout 1200 apt-get install -y -qq --no-install-recommends "linux-headers-$k" >/dev/null 2>&1 || {
				timeout 600 apt-get update -qq
				timeout 1200 apt-get install -y -qq --no-install-recommends "linux-headers-$k" >/dev/null
			}
		fi
		[ -f "/usr/src/linux-source-$mm.tar.xz" ] ||
			timeout 1200 apt-get install -y -qq --no-install-recommends "linux-source-$mm=$ver" >/dev/null 2>&1 ||
			timeout 1200 apt-get install -y -qq --no-install-recommends "linux-source-$mm" >/dev/null
		d=$LAB_DIR/siw-src; rm -rf "$d"; mkdir -p "$d"
		tar -xJf "/usr/src/linux-source-$mm.tar.xz" -C "$d" --strip-components=5 \
			--wildcards "linux-source-$mm/drivers/infiniband/sw/siw/*"
		make -s -C "/usr/src/linux-headers-$k" M="$d" CONFIG_RDMA_SIW=m modules > "$log" 2>&1 ||
			{ tail -n 20 "$log"; die "siw.ko build failed"; }
	else
		d=$ROOTFS/var/tmp/siw-src
		in_root sh -ec "apt-get update -qq
			apt-get install -y -qq --no-install-recommends linux-headers-$k linux-source-$mm xz-utils
			rm -rf /var/tmp/siw-src; mkdir -p /var/tmp/siw-src
			tar -xJf /usr/src/linux-source-$mm.tar.xz -C /var/tmp/siw-src --strip-components=5 \
				--wildcards 'linux-source-$mm/drivers/infiniband/sw/siw/*'
			make -s -C /usr/src/linux-headers-$k M=/var/tmp/siw-src CONFIG_RDMA_SIW=m modules
			apt-get purge -y -qq linux-source-$mm
			apt-get clean" > "$log" 2>&1 || { tail -n 20 "$log"; die "siw.ko build failed (in the $SUITE root)"; }
	fi
	mkdir -p "$ROOTFS/lib/modules/$k/updates"
	rm -f "$ROOTFS/lib/modules/$k/updates/siw.ko"
	strip --strip-debug -o "$ROOTFS/lib/modules/$k/updates/siw.ko" "$d/siw.ko"
	[ "$SUITE" = bookworm ] || rm -rf "$d"
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
	# the trixie root also holds the build tools: size the image from the root
	unmount_below || die "mounts left below $LAB_DIR: see /proc/mounts"
	mke2fs -q -t ext4 -L rpcrdmalab -d "$ROOTFS" "$IMG" \
		"$(( $(du -sm --exclude=rpcrdma-src --exclude=rpcrdma-build "$ROOTFS" | cut -f1) + 768 ))M"
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
# /share and LD_LIBRARY_PATH=/share finds librpcrdma.so. bookworm: on the
# host (Debian 12, the guest's rdma-core 44). trixie: in the trixie root
# (chroot), against its rdma-core 56 headers and libraries, so the FLUSH
# code (RPCRDMA_HAVE_IBV_FLUSH) is compiled and runs in the guest.
cmd_build() {
	local cm=cmake nj="nice ninja" src=$SRC bld=$BUILD
	say "building the project into $BUILD ($SUITE)"
	mkdir -p "$BUILD"
	if [ "$SUITE" != bookworm ]; then
		need_root
		[ -f "$LAB_DIR/.stamp-rootfs" ] || cmd_setup
		# a build tree configured elsewhere (host paths) cannot be reused
		if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q '^CMAKE_HOME_DIRECTORY:INTERNAL=/rpcrdma-src$' "$BUILD/CMakeCache.txt"; then
			rm -rf "${BUILD:?}"/*
		fi
		cm="in_root cmake" nj="in_root nice ninja" src=/rpcrdma-src bld=/rpcrdma-build
	fi
	$cm -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPCRDMA_SANITIZE=OFF \
		-DRPCRDMA_INTEROP=ON -DRPCRDMA_TESTS=ON > "$BUILD/lab-build.log" 2>&1 ||
		{ tail -n 30 "$BUILD/lab-build.log"; die "cmake failed"; }
	# everything: rr-tests runs the tools next to it (tests/tools/test_tools.c)
	$nj -C "$bld" -j "${LAB_JOBS:-2}" \
		>> "$BUILD/lab-build.log" 2>&1 || { tail -n 30 "$BUILD/lab-build.log"; die "build failed"; }
	grep -E 'rdma-core provider|IBV_FLUSH|libtirpc' "$BUILD/lab-build.log" | sed 's/^-- /  /' >&2 || true
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
	# the sections vm-tests.sh sources (vm-push.sh, ...)
	for f in "$HERE"/vm-*.sh; do [ "$f" = "$HERE/vm-tests.sh" ] || cp "$f" "$run/"; done
	echo "${LAB_ONLY:-}" > "$run/only"
	echo "$SUITE" > "$run/suite"
	ln -sfn "$run" "$LAB_DIR/runs/latest"
	accel=$(pick_accel)
	local cpu=(-accel "tcg,thread=multi" -cpu max) mem=(-m "$LAB_MEM")
	[ "$accel" = kvm ] && cpu=(-accel kvm -cpu host)
	# LAB_PMEM MiB of emulated NVDIMM (ACPI NFIT: persistent memory, which
	# rxe's persistent FLUSH wants), backed by a file of the lab dir
	if [ "${LAB_PMEM:-0}" -gt 0 ]; then
		[ "$(stat -c %s "$LAB_DIR/pmem0.img" 2>/dev/null)" = $((LAB_PMEM * 1048576)) ] ||
			{ rm -f "$LAB_DIR/pmem0.img"; truncate -s "${LAB_PMEM}M" "$LAB_DIR/pmem0.img"; }
		cpu+=(-machine pc,nvdimm=on)
		mem=(-m "$LAB_MEM,slots=2,maxmem=$((LAB_MEM + LAB_PMEM + 1024))M"
			-object "memory-backend-file,id=pmem0,share=on,mem-path=$LAB_DIR/pmem0.img,size=${LAB_PMEM}M"
			-device "nvdimm,id=nvdimm0,memdev=pmem0")
	fi
	inner=$(( LAB_TIMEOUT - 60 ))
	# one VM per LAB_DIR at a time: TCG needs both cores, and several
	# helpers may share the cache (wait for the other run to end)
	exec 7> "$LAB_DIR/.vm.lock"
	if ! flock -n 7; then
		say "another VM of $LAB_DIR is running; waiting for it (up to ${LAB_TIMEOUT}s)"
		flock -w "$LAB_TIMEOUT" 7 || die "$LAB_DIR/.vm.lock still held"
	fi
	say "booting $SUITE $k ($accel, $LAB_SMP vCPU, $LAB_MEM MiB, NVDIMM ${LAB_PMEM:-0} MiB, limit ${LAB_TIMEOUT}s), run dir $run"
	t0=$(t_now)
	set +e
	TMPDIR=$LAB_DIR/tmp timeout -k 10 "$LAB_TIMEOUT" qemu-system-x86_64 "${cpu[@]}" \
		-smp "$LAB_SMP" "${mem[@]}" -display none -monitor none -serial stdio -nic none -no-reboot \
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
# tshark of the suite: the host's for bookworm (4.0, as the guest); for
# trixie the trixie root's (4.4, which knows the InfiniBand FLUSH opcodes),
# through chroot with the run dir at /rpcrdma-run (ts_begin/ts_end).
TS_RUN=
ts() {
	if [ "$SUITE" = bookworm ]; then tshark "$@"
	else chroot "$ROOTFS" env -i PATH=/usr/bin:/bin HOME=/root LC_ALL=C tshark "$@"; fi
}
ts_begin() { # RUN_DIR
	TS_RUN=$1
	[ "$SUITE" = bookworm ] && return 0
	need_root
	mkdir -p "$ROOTFS/rpcrdma-run"
	mount -t proc proc "$ROOTFS/proc"
	mount --bind "$1" "$ROOTFS/rpcrdma-run"
	TS_RUN=/rpcrdma-run
}
ts_end() {
	[ "$SUITE" = bookworm ] && return 0
	unmount_below || say "WARNING: mounts left below $LAB_DIR (see /proc/mounts)"
}

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
	ts -r "$f" "$@" -q -z "$spec" 2>/dev/null |
		awk -F'|' -v n="$n" '/<>/ { for (i = 1; i <= n; i++) { v = $(3 + 2 * (i - 1)); gsub(/ /, "", v); printf "%s ", v } print ""; exit }'
}

# RoCE RDMA WRITE packets (InfiniBand BTH opcodes of the RC transport: 6
# First, 7 Middle, 8 Last, 10 Only; not 9 and 11, with Immediate, which our
# code never posts): their payload is the data of a Write chunk or a Reply
# chunk, never an RPC-over-RDMA message (ours travel in Sends, opcodes 0-5
# and 22-23, which stay counted). Wireshark 4.0 dissects a short payload of
# such a packet heuristically as an ethertype frame, e.g. the last byte of
# a 65,537-byte READ result with its 3 pad bytes (0x90 0x00: "LOOP"), and
# marks it malformed (docs/interop.md, 2026-11-26 09:05): a dissector
# artefact, not a malformed frame of ours, so it is not counted as ours.
# The check's tshark-check.sh test shows both sides of it.
TS_WRITE_DATA='infiniband.bth.opcode==6||infiniband.bth.opcode==7||infiniband.bth.opcode==8||infiniband.bth.opcode==10'
# ours_malformed OURS: the display filter of our malformed frames (OURS as
# in out/pcaps.txt, not "none").
ours_malformed() {
	if [ "$1" = - ]; then echo "_ws.malformed && !($TS_WRITE_DATA)"
	else echo "_ws.malformed && ($1) && !($TS_WRITE_DATA)"; fi
}

# Every out/*.pcap listed in out/pcaps.txt ("NAME DECODE OURS FILTER WHAT") must
# contain frames matching each filter of FILTER (comma separated), and no frame
# matching OURS (the frames our code sent; "-" all, "none" a baseline of
# kernel peers only) may be malformed. Results go to out/host-results.txt in
# the VM's "PASS|FAIL|SKIP name" format, details to out/tshark.txt.
cmd_check() {
	local run=${1:-$LAB_DIR/runs/latest} name decode ours filter what f
	run=$(cd "$run" && pwd -P)
	local hr=$run/out/host-results.txt
	: > "$hr"
	: > "$run/out/tshark.txt"
	if [ -f "$run/out/pcaps.txt" ]; then
		ts_begin "$run"
		trap ts_end EXIT
		echo "tshark: $(ts --version 2>/dev/null | head -n 1)" >> "$run/out/tshark.txt"
		while read -r name decode ours filter what; do
			[ -n "$name" ] || continue
			if [ ! -s "$run/out/$name.pcap" ]; then echo "FAIL tshark $name: no capture" >> "$hr"; continue; fi
			f=$TS_RUN/out/$name.pcap
			local dopt=() flts=() counts total all_bad bad min=-1 c i
			case $decode in
			-) ;;
			disable:*) dopt=(--disable-protocol "${decode#disable:}") ;;
			pref:*) dopt=(-o "${decode#pref:}") ;;
			*) dopt=(-d "$decode") ;;
			esac
			IFS=, read -r -a flts <<< "$filter"
			case $ours in
			none) counts=$(frame_counts "$f" frame _ws.malformed "${flts[@]}" -- "${dopt[@]}") ;;
			*) counts=$(frame_counts "$f" frame _ws.malformed "$(ours_malformed "$ours")" "${flts[@]}" -- "${dopt[@]}") ;;
			esac
			read -r -a counts <<< "$counts"
			total=${counts[0]:-0}; all_bad=${counts[1]:-0}; i=2
			case $ours in
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
				ts -r "$f" "${dopt[@]}" -T fields -e frame.protocols 2>/dev/null | sed 's/^eth:ethertype://' |
					sed -E 's/(:iwarp_ddp_rdmap(:data)?){2,}/:iwarp_ddp_rdmap...(several FPDUs)/' |
					sort | uniq -c | sort -rn | head -n 6 || true
				[ "$all_bad" = 0 ] || ts -r "$f" "${dopt[@]}" -Y '_ws.malformed' 2>/dev/null | head -n 5 | sed 's/^/  MALFORMED /' || true
				# what ours_malformed leaves out, said
				[ "$ours" = none ] || [ "$all_bad" = 0 ] || ts -r "$f" "${dopt[@]}" \
					-Y "_ws.malformed && ($TS_WRITE_DATA)$([ "$ours" = - ] || echo " && ($ours)")" \
					2>/dev/null | head -n 5 | sed 's/^/  NOT COUNTED (RDMA WRITE data) /' || true
			} >> "$run/out/tshark.txt"
			if [ "$min" -gt 0 ] && [ "$bad" = 0 ]; then
				echo "PASS tshark $name: $min frames match each of '$filter', none of ours malformed ($all_bad in all)" >> "$hr"
			else
				echo "FAIL tshark $name: $min frames match each of '$filter', $bad of ours malformed ($all_bad in all)" >> "$hr"
			fi
		done < "$run/out/pcaps.txt"
		ts_end
		trap - EXIT
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
	echo "LAB_SUITE=$SUITE LAB_DIR=$LAB_DIR accel=$(pick_accel)"
	[ -d "$ROOTFS/lib/modules" ] && echo "guest kernel: $(guest_kernel)"
	grep -E '^(rdma-core|perftest|nfs-kernel-server|linux-image-6|tcpdump) ' "$LAB_DIR/guest-versions.txt" 2>/dev/null || true
	dpkg-query -W -f '${Package} ${Version}\n' qemu-system-x86 2>/dev/null || true
	if [ "$SUITE" = bookworm ]; then dpkg-query -W -f '${Package} ${Version} (host)\n' tshark 2>/dev/null || true
	else grep -E '^tshark ' "$LAB_DIR/guest-versions.txt" 2>/dev/null || true; fi
	[ -d "$ROOTFS/lib/modules" ] && { kernel_has_siw "$(guest_kernel)" && echo "siw: in the kernel" ||
		echo "siw: out of tree ($(ls "$ROOTFS/lib/modules/$(guest_kernel)/updates/siw.ko" 2>/dev/null || echo 'not built yet'))"; }
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
clean) if [ -d "$LAB_DIR" ]; then unmount_below || die "mounts left below $LAB_DIR"; fi
	rm -rf "$LAB_DIR" ;;
-h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown command '$1' (try --help)" ;;
esac
