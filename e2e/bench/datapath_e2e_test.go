//go:build e2e

package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The data path's network: dataPathPods backends on the pod bridge (10.244.0.10 and up,
// in the cluster CIDR) and a client namespace linked to the node by its own veth pair.
const dataPathPods = 10

var (
	benchClientNode = netip.MustParsePrefix("192.168.102.1/24")
	benchClientAddr = netip.MustParsePrefix("192.168.102.2/24")
)

// affinityConnections is how many new connections the session affinity check makes.
const affinityConnections = 20

// heldTimeout is how long the held connection's request waits for an answer once its
// endpoint was removed before it counts as black-holed.
const heldTimeout = 5 * time.Second

// dataPathSetup is the backends and the client, made once per VM boot and used by every
// proxy in turn.
type dataPathSetup struct {
	pods    []*harness.Pod
	client  *harness.NS
	loadgen string
	pin     int // the CPU the load generator runs on; -1: not pinned
	cfg     Config
}

// newDataPathSetup turns forwarding on (the client's traffic crosses the node) and builds the
// network: the backends with an echo server each, the client with routes to the Service
// CIDR, the node's IP and the pods (the floor goes straight to a pod).
func newDataPathSetup(t *testing.T, env harness.Env, api *harness.Cluster, cfg Config) *dataPathSetup {
	t.Helper()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		t.Fatalf("turn IPv4 forwarding on: %v", err)
	}
	d := &dataPathSetup{loadgen: os.Getenv(LoadgenEnv), pin: -1, cfg: cfg}
	if _, err := os.Stat(d.loadgen); err != nil {
		t.Fatalf("%s: %v", LoadgenEnv, err)
	}
	if n := runtime.NumCPU(); n >= 2 {
		d.pin = n - 1
	}
	tp := harness.NewTopology(t, env)
	for i := range dataPathPods {
		ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(10 + i)})
		d.pods = append(d.pods, tp.AddPod(t, fmt.Sprintf("bp%d", i), ip, harness.PodOptions{}))
	}
	d.client = tp.AddClient(t, "bench-client", "vc-bench", benchClientNode, benchClientAddr)
	h, err := netlink.NewHandleAt(d.client.Handle)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", d.client.Name, err)
	}
	defer h.Close()
	pods := harness.NodePodCIDR
	route := &netlink.Route{Dst: &net.IPNet{IP: pods.Addr().AsSlice(), Mask: net.CIDRMask(pods.Bits(), 32)}, Gw: benchClientNode.Addr().AsSlice()}
	if err := h.RouteAdd(route); err != nil {
		t.Fatalf("route to %s in %s: %v", pods, d.client.Name, err)
	}
	t.Logf("data path: %d echo backends, client %s, load generator %s (pinned to CPU %d)", len(d.pods), benchClientAddr.Addr(), d.loadgen, d.pin)
	return d
}

// load runs the load generator in the client's namespace for mode against target.
func (d *dataPathSetup) load(t *testing.T, path, mode string, target netip.AddrPort) (LoadResult, error) {
	args := []string{"netns", "exec", d.client.Name}
	if d.pin >= 0 {
		args = append(args, "taskset", "-c", strconv.Itoa(d.pin))
	}
	args = append(args, d.loadgen, "-mode", mode, "-target", target.String(),
		"-workers", strconv.Itoa(d.cfg.LoadWorkers), "-duration", d.cfg.LoadDuration.String())
	out, err := harness.RunWithin(d.cfg.LoadDuration+2*time.Minute, "ip", args...)
	if err != nil {
		return LoadResult{}, fmt.Errorf("loadgen %s %s: %w\n%s", mode, target, err, out)
	}
	r, err := ParseLoadResult(out)
	if err != nil {
		return LoadResult{}, err
	}
	r.Path = path
	t.Logf("data path %s %s (%s): %.0f/s, p50 %.2f ms, p99 %.2f ms, %d errors, generator %.2f cores",
		path, mode, target, r.Rate, r.P50*1e3, r.P99*1e3, r.Errors, r.CPUCores)
	return r, nil
}

// podEndpoints is the pods' endpoints on EchoPort.
func podEndpoints(pods []*harness.Pod) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, p := range pods {
		out[p.Endpoint()] = true
	}
	return out
}

// measureDataPath creates the data path Service (NodePort, TCP and UDP port 80) last, with
// the backends as its endpoints, waits until the proxy programmed it and it answers on
// every path, and measures every load mode through the floor, the cluster IP and the node
// port; then the connection behaviour. A failure is an error of the test, not fatal: the
// control-plane figures stand.
func (r *runner) measureDataPath(proxy string) {
	t, d := r.t, r.dp
	const name = "bench-datapath"
	svc := r.api.CreateService(t, harness.ServiceSpec{Name: name, Type: v1.ServiceTypeNodePort})
	defer r.api.DeleteService(t, name)
	r.api.SetEndpoints(t, svc, d.pods...)
	cip := harness.ClusterIPOf(t, svc)
	tcpNode := netip.AddrPortFrom(harness.NodeIP, uint16(harness.NodePortOf(t, svc, "http")))
	udpNode := netip.AddrPortFrom(harness.NodeIP, uint16(harness.NodePortOf(t, svc, "udp")))
	clusterTCP, clusterUDP := netip.AddrPortFrom(cip, 80), netip.AddrPortFrom(cip, 80)
	created := time.Now()
	if !r.waitEndpoints(VIP{Addr: cip, Proto: "tcp", Port: 80}, podEndpoints(d.pods)) {
		return
	}
	c := harness.In(d.client).WithTimeout(2 * time.Second)
	if _, err := poll.Wait(r.cfg.ChangeLimit, proxy+" answering on the data path Service", func() (bool, string) {
		for _, try := range []struct {
			p    harness.Proto
			addr netip.AddrPort
		}{{harness.TCP, clusterTCP}, {harness.UDP, clusterUDP}, {harness.TCP, tcpNode}, {harness.UDP, udpNode}} {
			if _, err := c.Do(try.p, try.addr); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	}); err != nil {
		t.Errorf("%s: the data path Service: %v", proxy, err)
		return
	}
	t.Logf("%s: the data path Service answers %.1fs after its creation", proxy, time.Since(created).Seconds())
	dp := &DataPath{Endpoints: len(d.pods), PinnedCPU: d.pin}
	floor := d.pods[0].Endpoint()
	targets := map[string]map[string]netip.AddrPort{
		PathFloor:     {LoadTCPNew: floor, LoadTCPKeepAlive: floor, LoadUDP: floor},
		PathClusterIP: {LoadTCPNew: clusterTCP, LoadTCPKeepAlive: clusterTCP, LoadUDP: clusterUDP},
		PathNodePort:  {LoadTCPNew: tcpNode, LoadTCPKeepAlive: tcpNode, LoadUDP: udpNode},
	}
	for _, path := range DataPaths() {
		for _, mode := range LoadModes() {
			res, err := d.load(t, path, mode, targets[path][mode])
			if err != nil {
				t.Errorf("%s: %v", proxy, err)
				continue
			}
			dp.Results = append(dp.Results, res)
		}
	}
	r.rec.DataPath = dp
	b := &Behaviour{HeldAfterRemoval: r.heldAfterRemoval(svc, clusterTCP)}
	b.AffinityBackends, b.AffinityConnections = r.affinity()
	r.rec.Behaviour = b
	t.Logf("%s: held connection after its endpoint's removal: %s; session affinity: %d backends answered %d connections",
		proxy, b.HeldAfterRemoval, b.AffinityBackends, b.AffinityConnections)
}

// waitEndpoints waits (up to ChangeLimit) until the proxy programmed exactly want for vip.
func (r *runner) waitEndpoints(vip VIP, want map[netip.AddrPort]bool) bool {
	if _, err := poll.Wait(r.cfg.ChangeLimit, fmt.Sprintf("%s programming %s", r.proc.Name, vip), func() (bool, string) {
		r.alive()
		if _, err := r.probe.begin([]VIP{vip}); err != nil {
			return false, err.Error()
		}
		eps, ok := r.probe.read(vip)
		return ok && sameSet(eps, want), fmt.Sprintf("%d endpoints programmed, want %d", len(eps), len(want))
	}); err != nil {
		r.t.Errorf("%v", err)
		return false
	}
	return true
}

// heldAfterRemoval holds a connection through addr (the cluster IP), removes the endpoint
// that answered from the Service's slice (its backend keeps running), waits until the
// proxy programmed the removal and sends a request over the held connection.
func (r *runner) heldAfterRemoval(svc *v1.Service, addr netip.AddrPort) string {
	t, d := r.t, r.dp
	held, err := harness.In(d.client).WithTimeout(heldTimeout).Hold(addr)
	if err != nil {
		t.Errorf("hold a connection through %s: %v", addr, err)
		return "error: " + err.Error()
	}
	defer held.Close()
	var rest []*harness.Pod
	for _, p := range d.pods {
		if p.PodName != held.Answer.Backend {
			rest = append(rest, p)
		}
	}
	if len(rest) != len(d.pods)-1 {
		t.Errorf("the held connection was answered by %q, not one of the backends", held.Answer.Backend)
		return "error: answered by " + held.Answer.Backend
	}
	r.api.SetEndpoints(t, svc, rest...)
	if !r.waitEndpoints(VIP{Addr: addr.Addr(), Proto: "tcp", Port: addr.Port()}, podEndpoints(rest)) {
		return "error: the removal was not programmed"
	}
	err = held.Ping()
	switch {
	case err == nil:
		return HeldAnswered
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE):
		return HeldReset
	case harness.IsTimeout(err):
		return HeldTimeout
	}
	return "error: " + err.Error()
}

// affinity creates a ClusterIP Service with sessionAffinity ClientIP on the backends, waits
// until the proxy programmed it and answers, and counts the distinct backends that answer
// affinityConnections new connections from the client.
func (r *runner) affinity() (backends, conns int) {
	t, d := r.t, r.dp
	const name = "bench-affinity"
	svc := r.api.CreateService(t, harness.ServiceSpec{Name: name,
		Ports:  []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		Mutate: func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }})
	defer r.api.DeleteService(t, name)
	r.api.SetEndpoints(t, svc, d.pods...)
	addr := netip.AddrPortFrom(harness.ClusterIPOf(t, svc), 80)
	if !r.waitEndpoints(VIP{Addr: addr.Addr(), Proto: "tcp", Port: 80}, podEndpoints(d.pods)) {
		return 0, 0
	}
	c := harness.In(d.client).WithTimeout(2 * time.Second)
	if _, err := poll.Wait(r.cfg.ChangeLimit, "the affinity Service answering", func() (bool, string) {
		_, err := c.HTTP(addr)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Errorf("%v", err)
		return 0, 0
	}
	seen := map[string]bool{}
	for range affinityConnections {
		a, err := c.HTTP(addr)
		if err != nil {
			t.Errorf("session affinity: %v", err)
			continue
		}
		seen[a.Backend] = true
		conns++
	}
	return len(seen), conns
}
