# The node, inside the VM (run by e2e/vm as root, chrooted into the host's root, which is
# read-only): writable directories on tmpfs, cgroup v2, the link to the host, containerd
# (Debian's, from the cache) with the images imported, then the kubelet. It serves until
# the host makes /run/vm/stop appear, then leaves the logs in /run/vm/artifacts.
# Every step prints what it does and waits a bounded time; a failure names the step.
# Environment (from the host): NODE_ROOT NODE_IP NODE_PREFIX NODE_NAME NODE_STATE NODE_BIN
# NODE_KUBECONFIG (the kubelet's) NODE_ROUTES (space-separated CIDR=VIA: the other nodes' pod
# CIDRs) NODE_IMAGES (space-separated archives) NODE_KVER_MODULES.
set -u
logs=/run/vm/artifacts
mkdir -p "$logs"
step() { echo "node: $(date -u +%H:%M:%S) $*"; }
fail() {
	echo "node: FAILED: $*"
	for f in "$logs"/*.log; do
		[ -f "$f" ] || continue
		echo "--- tail of $f"
		tail -n 30 "$f"
	done
	exit 1
}
# wait_for LIMIT_SECONDS WHAT COMMAND...: runs COMMAND every 0.5 s until it succeeds.
wait_for() {
	limit=$1 what=$2
	shift 2
	i=0
	while ! "$@" >/dev/null 2>&1; do
		[ ! -f /run/vm/stop ] || fail "$what: the host asked to stop"
		i=$((i + 1))
		[ "$i" -lt $((limit * 2)) ] || fail "$what: not reached after ${limit}s"
		sleep 0.5
	done
}

# e2e/vm chroots into the host root, mounted at /host on the initramfs. runc's pivot_root then
# puts a container's root at /host too, and `runc exec` (kubectl exec), which enters the
# container's mount namespace at the namespace's "/", would land in the initramfs. Moving
# the host root onto the initramfs's "/" (PID 1's root, as switch_root does) puts it where
# setns looks; PID 1 keeps its own view of the initramfs. (busybox: mount(2) follows the
# /proc/1/root magic link, util-linux's move_mount(2) refuses it.)
step "root: the host root moved onto the VM's /"
busybox mount -o move / /proc/1/root || fail "move the root onto the VM's /"

step "link: eth0 $NODE_IP/$NODE_PREFIX"
ip link set eth0 up || fail "link: eth0 up"
ip addr add "$NODE_IP/$NODE_PREFIX" dev eth0 || fail "link: address"
hostname "$NODE_NAME"
for r in $NODE_ROUTES; do
	step "route: ${r%%=*} via ${r#*=} (another node's pods)"
	ip route add "${r%%=*}" via "${r#*=}" dev eth0 || fail "route $r"
done

step "file systems: tmpfs on /var, /lib/modules, cgroup2 on /sys/fs/cgroup"
mount -t tmpfs -o mode=755 var /var || fail "tmpfs /var"
mkdir -p /var/lib/kubelet /var/lib/containerd /var/log /var/tmp /run/node/cni/net.d
ln -s /run /var/run
# /lib/modules: the VM kernel's modules (modprobe, and kipvs's hostPath mount). The host may
# have none (a container): then an overlay with a tmpfs upper layer over /usr/lib makes room.
kver=$(uname -r)
if [ -d /lib/modules ]; then
	mount -t tmpfs -o mode=755 modules /lib/modules || fail "tmpfs /lib/modules"
else
	libdir=$(readlink -f /lib)
	mkdir -p /run/node/lib/upper /run/node/lib/work
	mount -t overlay lib -o "lowerdir=$libdir,upperdir=/run/node/lib/upper,workdir=/run/node/lib/work" "$libdir" ||
		fail "overlay on $libdir for /lib/modules"
fi
mkdir -p "/lib/modules/$kver"
mount --bind "$NODE_KVER_MODULES" "/lib/modules/$kver" || fail "bind the kernel's modules"
mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "cgroup2"
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
	echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || fail "cgroup controller $c"
done
# The kubelet makes pods' shared mounts (projected volumes, propagation) under /var/lib/kubelet.
mount --make-rshared / 2>/dev/null || true

step "sysctls: forwarding, bridge netfilter"
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 ||
	fail "sysctls"

export PATH="$NODE_ROOT/usr/bin:$NODE_ROOT/usr/sbin:$PATH"
step "containerd $(containerd --version | cut -d' ' -f3)"
containerd --config "$NODE_STATE/containerd.toml" >"$logs/containerd.log" 2>&1 &
cpid=$!
wait_for 60 "containerd: socket answers" ctr --address /run/containerd/containerd.sock version

# Two imports at a time (the VM's two CPUs): unpacking an image under TCG takes about 2.5 s per MB.
import_one() {
	ctr --address /run/containerd/containerd.sock -n k8s.io images import --all-platforms "$1" >"$logs/import.$2.log" 2>&1 ||
		{ echo "$1" >>"$logs/import.failed"; return 1; }
}
n=0
running=""
for img in $NODE_IMAGES; do
	n=$((n + 1))
	step "import $img"
	import_one "$img" "$n" &
	running="$running $!"
	set -- $running
	if [ $# -ge 2 ]; then
		wait "$1"
		running="${running#* $1}"
	fi
done
for p in $running; do wait "$p"; done
cat "$logs"/import.*.log >"$logs/import.log" 2>/dev/null
rm -f "$logs"/import.[0-9]*.log
[ ! -f "$logs/import.failed" ] || fail "import $(tr '\n' ' ' <"$logs/import.failed")(see import.log)"
step "images imported"
ctr --address /run/containerd/containerd.sock -n k8s.io images ls | awk 'NR > 1 && $1 !~ /^sha256:/ {print "node: image " $1 " " $3}'

step "kubelet $("$NODE_BIN/kubelet" --version)"
"$NODE_BIN/kubelet" --config "$NODE_STATE/kubelet.yaml" --kubeconfig "$NODE_KUBECONFIG" \
	--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 2 >"$logs/kubelet.log" 2>&1 &
kpid=$!
step "serving until the host is done"
total=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
low=$total
while [ ! -f /run/vm/stop ]; do
	kill -0 "$cpid" 2>/dev/null || fail "containerd exited"
	kill -0 "$kpid" 2>/dev/null || fail "kubelet exited"
	avail=$(awk '/^MemAvailable:/ {print int($2/1024)}' /proc/meminfo)
	[ "$avail" -ge "$low" ] || low=$avail
	sleep 1
done
step "stop: memory: ${total} MiB, at least ${low} MiB available throughout (peak use $((total - low)) MiB)"
kill "$kpid" 2>/dev/null
exit 0
