#!/bin/busybox sh
# PID 1 of the kipvs kernel-test VM (see e2e/vm/README.md).
# Mounts the host root read-only over 9p, loads the IPVS/netfilter modules from the
# cached Debian kernel, chroots into the host root and runs /out/cmd.sh there.
# The command's exit code goes to /out/rc; its output to /out/output (and the console).
/bin/busybox --install -s /bin
/bin/busybox --install -s /sbin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

fail() {
	echo "vm-init: FATAL: $*" >/dev/console
	echo "$*" >/out/init-error 2>/dev/null
	poweroff -f
}

kver=$(uname -r)
for m in virtio_pci 9pnet_virtio 9p; do
	modprobe "$m" || fail "modprobe $m"
done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /out || fail "mount out share"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose host /host || fail "mount host share"
# shellcheck disable=SC1091
. /out/env
echo "vm-init: booted $kver" >/dev/console

# Modules come from the cache directory inside the host root.
mount --bind "/host$VM_MODULES" "/lib/modules/$kver" || fail "bind modules $VM_MODULES"
modprobe crc32c_generic || fail "modprobe crc32c_generic"
# dummy would create a stray dummy0 by default.
modprobe dummy numdummies=0 || fail "modprobe dummy"
for m in $VM_LOAD_MODULES; do
	modprobe "$m" || fail "modprobe $m"
done

# The VM covers /tmp, /run and /dev with its own file systems below. A work directory under
# one of them (a CI clone in /tmp, say) would vanish: keep a view of it to bind back after.
mkdir -p /keep
mount --bind "/host$VM_WORKDIR" /keep || fail "bind work directory $VM_WORKDIR"

mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/pts /host/dev/shm 2>/dev/null
mount -t devpts devpts /host/dev/pts
mount -t tmpfs shm /host/dev/shm
mount -t tmpfs tmp /host/tmp
mount -t tmpfs run /host/run
mkdir -p /host/run/vm /host/run/netns
mount --bind /out /host/run/vm
[ -d /host/sys/fs/bpf ] && mount -t bpf bpf /host/sys/fs/bpf 2>/dev/null
if [ ! -d "/host$VM_WORKDIR" ]; then
	mkdir -p "/host$VM_WORKDIR" && mount --bind /keep "/host$VM_WORKDIR" ||
		fail "work directory $VM_WORKDIR is hidden by the VM's own mounts"
fi

ip link set lo up || fail "lo up"
if [ "$VM_NET" = 1 ]; then
	modprobe virtio_net || fail "modprobe virtio_net"
	ip addr add 10.0.2.15/24 dev eth0 || fail "eth0 address"
	ip link set eth0 up || fail "eth0 up"
fi

echo "vm-init: running test command" >/dev/console
# The output goes to a file (streamed to the console by tail), not a pipe: processes the
# script leaves running in the background would hold a pipe open forever.
: >/out/output
tail -f /out/output >/dev/console 2>/dev/null &
# The command runs in a background subshell and PID 1 polls for its exit code: daemons the
# script leaves behind are re-parented to PID 1, and waiting on the command from PID 1
# itself could then block forever.
(
	chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/tmp TMPDIR=/tmp KIPVS_IN_VM=1 /bin/sh -c "cd '$VM_WORKDIR' && exec /bin/sh /run/vm/cmd.sh" \
		>>/out/output 2>&1 </dev/null
	echo $? >/out/rc.tmp
) &
while [ ! -f /out/rc.tmp ]; do
	sleep 0.2
done
sleep 1
# Whatever the script left behind (daemons, servers) ends with the VM; PID 1 survives kill -1.
kill -9 -1 2>/dev/null
mv /out/rc.tmp /out/rc
sync
echo "vm-init: done rc=$(cat /out/rc)" >/dev/console
poweroff -f
