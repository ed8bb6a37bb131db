# make demo: runs inside the kernel-test VM (see e2e/vm). Three "pods" (network namespaces on
# a bridge, each running the echo backend), kipvs on the standalone source
# e2e/demo/services.yaml, then requests to the ClusterIP answered by the backends in turn.
set -eu
R=$(pwd)
say() { printf '\n### %s\n' "$*"; }

say "creating three pods (network namespaces) on bridge cbr0, pod CIDR 10.244.0.0/24"
ip link add cbr0 type bridge
ip addr add 10.244.0.1/24 dev cbr0
ip link set cbr0 up
for i in 1 2 3; do
	ip netns add pod-$i
	ip link add veth$i type veth peer name eth0 netns pod-$i
	ip link set veth$i master cbr0 up
	echo 1 >/sys/class/net/cbr0/brif/veth$i/hairpin_mode
	ip -n pod-$i addr add 10.244.0.1$i/24 dev eth0
	ip -n pod-$i link set eth0 up
	ip -n pod-$i link set lo up
	ip -n pod-$i route add default via 10.244.0.1
	ip netns exec pod-$i "$R/bin/echo" -name hello-$i -listen :8080 &
done

say "starting: kipvs run --kipvs-source-file e2e/demo/services.yaml"
"$R/bin/kipvs" run --kipvs-source-file "$R/e2e/demo/services.yaml" --hostname-override demo-node \
	--cluster-cidr 10.244.0.0/16 >/tmp/kipvs.log 2>&1 &
for _ in $(seq 1 100); do
	ipvsadm -Ln | grep -q '10.244.0.13:8080' && break
	sleep 0.3
done

say "six requests to the ClusterIP http://10.96.0.10/ (backend name, then the client address it saw)"
for _ in 1 2 3 4 5 6; do curl -s -m 5 http://10.96.0.10/; done

say "the same from inside pod-1 (no SNAT: the backend sees the pod's own address)"
for _ in 1 2 3; do ip netns exec pod-1 curl -s -m 5 http://10.96.0.10/; done

say "ipvsadm -Ln"
ipvsadm -Ln

say "kube-ipvs0 and the ipsets kipvs keeps"
ip -br addr show kube-ipvs0
ipset list KUBE-CLUSTER-IP | sed -n '/Members/,$p'

say "kipvs log"
cat /tmp/kipvs.log
