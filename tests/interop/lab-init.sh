#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# /sbin/rpcrdma-lab-init: PID 1 of the librpcrdma lab VM (installed into the
# image by tests/interop/run-lab.sh). Mounts the pseudo file systems and the
# two 9p shares (/lab: the run dir, read-write; /share: the project build,
# read-only), runs /lab/test.sh bounded by lab.timeout= from the kernel
# command line, stores its exit status in /lab/out/exit-status, powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /run /tmp /lab /share
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /run/lock /run/rpcbind /var/lib/nfs/rpc_pipefs
hostname rpcrdmalab
ip link set lo up
echo "LAB: init at uptime $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r)"
modprobe -a 9pnet_virtio 9p
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 lab /lab || echo "LAB: no /lab share"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro share /share || echo "LAB: no /share"
limit=$(sed -n 's/.*lab\.timeout=\([0-9]*\).*/\1/p' /proc/cmdline)
mkdir -p /lab/out
rc=125
if [ -f /lab/test.sh ]; then
	cd /lab && timeout -k 5 "${limit:-600}" sh /lab/test.sh > /lab/out/test.log 2>&1
	rc=$?
	cd /
	[ $rc = 124 ] && echo "LAB: test.sh ran past ${limit:-600}s" | tee -a /lab/out/test.log
	tail -n 5 /lab/out/test.log
fi
dmesg > /lab/out/dmesg.txt
echo $rc > /lab/out/exit-status
echo "LAB: test.sh exit status $rc, power off at uptime $(cut -d' ' -f1 /proc/uptime)s"
sync
umount /share 2>/dev/null
umount /lab 2>/dev/null
busybox poweroff -f
