# e2e/bench/cmd/firstsync: runs in the kernel-test VM. KIPVS, DIR (the generated files) and
# FLOOR are set before this.
set -eu
P=/run/vm/artifacts/profiles
mkdir -p "$P"
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
if [ "$FLOOR" = 1 ]; then
	ip netns add floor
	ip -n floor link add kube-ipvs0 type dummy
	t=$(date +%s.%N)
	ip -n floor -batch "$DIR/addresses.ip"
	echo "FLOOR ip -batch: $(wc -l <"$DIR/addresses.ip") VIPs bound on kube-ipvs0 in $(since "$t") s"
	t=$(date +%s.%N)
	ip netns exec floor sh -c "ipvsadm -R <'$DIR/ipvs.restore'"
	echo "FLOOR ipvsadm -R: $(grep -c '^-A' "$DIR/ipvs.restore") virtual servers and $(grep -c '^-a' "$DIR/ipvs.restore") real servers in $(since "$t") s"
	ip netns exec floor ipvsadm -C
	# Unbind the VIPs before the namespace goes: the kernel's teardown of a namespace is
	# asynchronous and holds the rtnl lock while it removes a link's addresses (quadratic
	# too, minutes at 50,000), which would overlap kipvs's binds below and slow them down.
	t=$(date +%s.%N)
	ip -n floor address flush dev kube-ipvs0
	echo "FLOOR ip address flush: the VIPs unbound in $(since "$t") s"
	ip -n floor link del kube-ipvs0
	ip netns del floor
	sleep 10 # the rest of the namespace's teardown
fi
t0=$(date +%s.%N)
"$KIPVS" run --kipvs-source-file "$DIR/services.json" --hostname-override firstsync --profiling \
	--kipvs-service-cidr 10.96.0.0/12 >/tmp/kipvs.log 2>&1 &
pid=$!
(
	i=0
	while kill -0 $pid 2>/dev/null; do
		i=$((i + 1))
		curl -s -m 120 -o "$P/cpu-$(printf %03d $i).pprof" "http://127.0.0.1:10249/debug/pprof/profile?seconds=30" || sleep 1
	done
) &
loaded=
until grep -q 'full sync applied changes.*"IPv4"' /tmp/kipvs.log; do
	if ! kill -0 $pid 2>/dev/null; then
		cat /tmp/kipvs.log
		exit 1
	fi
	if [ -z "$loaded" ] && grep -q 'loaded source file' /tmp/kipvs.log; then
		loaded=$(since "$t0")
	fi
	sleep 1
done
total=$(since "$t0")
read -r ut st <<EOT
$(awk '{print $14/100, $15/100}' /proc/$pid/stat)
EOT
echo "FIRSTSYNC $total s from kipvs's start to its first IPv4 sync (source file loaded at ${loaded:-?} s); CPU user $ut s, system $st s; $(grep VmHWM /proc/$pid/status | tr -s ' \t' ' ')"
sleep 35
kill $pid
wait $pid || true
grep -E 'loaded source file|full sync applied' /tmp/kipvs.log | cut -c1-400
cp /tmp/kipvs.log /run/vm/artifacts/kipvs.log
