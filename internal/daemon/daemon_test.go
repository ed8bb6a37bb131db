package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/poll"
	"github.com/kipvs/kipvs/internal/watch"
	"github.com/kipvs/kipvs/internal/watch/filesource"
)

const oneService = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.1.5]
`

// oneServiceIPVS is what oneService programs in IPVS.
const oneServiceIPVS = "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n"

type fakeNode struct {
	ipvs   *ipvstest.Fake
	ipset  *ipsettest.Fake
	nf     *netfiltertest.Fake
	dummy  *dummyiftest.Fake
	sysctl *sysctltest.Fake
}

func newFakeNode() *fakeNode {
	return &fakeNode{
		ipvs: ipvstest.NewFake(), ipset: ipsettest.NewFake(), nf: netfiltertest.NewFake(inet.IPv4),
		dummy: dummyiftest.NewFake(ipvsmode.DummyName),
		sysctl: sysctltest.NewFake(map[string]string{
			"net/ipv4/vs/conntrack": "0", "net/ipv4/vs/expire_nodest_conn": "0", "net/ipv4/vs/expire_quiescent_template": "0",
			"net/ipv4/ip_forward": "0", "net/netfilter/nf_conntrack_max": "65536",
			"net/netfilter/nf_conntrack_tcp_timeout_established": "432000", "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "60",
		}),
	}
}

func (n *fakeNode) deps(src watch.Source, reg *prometheus.Registry) Deps {
	return Deps{
		Source: src, IPVS: n.ipvs,
		Kernel: func(f inet.Family) (reconcile.Kernel, error) {
			return reconcile.Kernel{IPVS: n.ipvs, Filter: iptables.New(f, n.ipset, n.nf), Dummy: n.dummy, Conntrack: conntracktest.NewFake()}, nil
		},
		Sysctl:        n.sysctl,
		HostAddrs:     func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.168.1.10")}, nil },
		KernelRelease: "6.1.0-56-amd64",
		NumCPU:        4,
		Registry:      reg,
	}
}

func testConfig(t *testing.T) config.Config {
	cfg := config.Defaults()
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	cfg.IPVS.MinSyncPeriod = 0
	cfg.IPVS.SyncPeriod = time.Hour // only the first full sync, then incremental ones
	return cfg
}

func startFileSource(t *testing.T, ctx context.Context, path string, log *zap.Logger) *filesource.Source {
	src, err := filesource.New(filesource.Options{Path: path, NodeName: "node-a", PollInterval: 20 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// The source's goroutine logs through t: it must be gone before the test ends (a log
	// after the end panics), so it stops with a context of its own in a cleanup.
	ctx, cancel := context.WithCancel(ctx)
	if err := src.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-src.Done()
	})
	return src
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += metricValue(m)
			}
		}
	}
	return sum
}

func metricValue(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// waitLimit bounds the waits for the daemon's goroutines.
const waitLimit = 10 * time.Second

// fullSyncs is a poll condition: at least n full syncs on reg.
func fullSyncs(t *testing.T, reg *prometheus.Registry, n float64) func() (bool, string) {
	return func() (bool, string) {
		got := counter(t, reg, "kipvs_sync_full_total")
		return got >= n, fmt.Sprintf("%v full syncs", got)
	}
}

// running is a daemon of node-a whose Run a test starts (newDaemon, start, startDaemon).
type running struct {
	*Daemon
	firstSync chan struct{} // runHooks.firstSynced
	pace      passPace      // runHooks.pace
	runCancel context.CancelFunc
	runDone   chan error
	stopped   bool
	runErr    error
}

// newDaemon creates the daemon of node-a over deps, for a test that looks at it before it
// runs (Prepare, State); start runs it.
func newDaemon(t *testing.T, cfg config.Config, log *zap.Logger, deps Deps) *running {
	t.Helper()
	r := &running{firstSync: make(chan struct{}), runDone: make(chan error, 1)}
	d, err := New(cfg, "node-a", log, deps)
	if err != nil {
		t.Fatal(err)
	}
	r.Daemon = d
	return r
}

// start runs the daemon and returns after its first sync, failing the test when Run ends
// first. The test's cleanup stops it (if the test has not) and reports an error from Run.
func (r *running) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.runCancel = cancel
	go func() { r.runDone <- r.runWith(ctx, runHooks{firstSynced: r.firstSync, pace: r.pace}) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-r.firstSync:
	case err := <-r.runDone:
		r.stopped, r.runErr = true, err
		t.Fatalf("Run ended before the first sync: %v", err)
	case <-time.After(waitLimit):
		t.Fatalf("no first sync within %s", waitLimit)
	}
}

// stop cancels Run and returns what it returned; stopping again returns the same.
func (r *running) stop() error {
	if r.stopped {
		return r.runErr
	}
	r.stopped = true
	r.runCancel()
	select {
	case r.runErr = <-r.runDone:
	case <-time.After(waitLimit):
		r.runErr = fmt.Errorf("Run did not return within %s of its context's cancellation", waitLimit)
	}
	return r.runErr
}

// startDaemon is newDaemon and start.
func startDaemon(t *testing.T, cfg config.Config, log *zap.Logger, deps Deps) *running {
	t.Helper()
	r := newDaemon(t, cfg, log, deps)
	r.start(t)
	return r
}

// The daemon over a fake kernel: start-up sysctls, a first full sync, then a file change
// applied as an incremental sync that touches only the changed Service.
func TestDaemonFileSourceEndToEnd(t *testing.T) {
	log := zaptest.NewLogger(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	reg := prometheus.NewRegistry()
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d := newDaemon(t, cfg, log, node.deps(startFileSource(t, t.Context(), path, log), reg))
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, _ := node.sysctl.Get("net/ipv4/vs/conntrack"); v != "1" {
		t.Errorf("net/ipv4/vs/conntrack = %s after Prepare", v)
	}
	if v, _ := node.sysctl.Get("net/netfilter/nf_conntrack_max"); v != "131072" {
		t.Errorf("nf_conntrack_max = %s, want max(32768*4, 131072)", v)
	}
	d.start(t)
	if dump, _ := node.ipvs.Dump(); dump != oneServiceIPVS {
		t.Fatalf("IPVS after the first sync:\n%s\nwant:\n%s", dump, oneServiceIPVS)
	}

	// Scale to two endpoints and add a second Service.
	two := strings.Replace(oneService, "- addresses: [10.244.1.5]", "- addresses: [10.244.1.5]\n- addresses: [10.244.1.6]", 1) +
		"---\n" + strings.NewReplacer("web", "api", "10.96.0.10", "10.96.0.20", "10.244.1.5", "10.244.2.5").Replace(oneService)
	if err := os.WriteFile(path, []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	const twoServicesIPVS = "-A -t 10.96.0.10:80 -s rr\n" +
		"-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n" +
		"-a -t 10.96.0.10:80 -r 10.244.1.6:8080 -m -w 1\n" +
		"-A -t 10.96.0.20:80 -s rr\n" +
		"-a -t 10.96.0.20:80 -r 10.244.2.5:8080 -m -w 1\n"
	poll.Until(t, waitLimit, "the change to be programmed", func() (bool, string) {
		dump, _ := node.ipvs.Dump()
		return dump == twoServicesIPVS, "IPVS:\n" + dump + "want:\n" + twoServicesIPVS
	})
	if got := counter(t, reg, "kipvs_sync_incremental_total"); got < 1 {
		t.Errorf("incremental syncs = %v, want at least 1", got)
	}
	if got := counter(t, reg, "kipvs_sync_full_total"); got != 1 {
		t.Errorf("full syncs = %v, want exactly the first one", got)
	}
	if got := counter(t, reg, "kubeproxy_sync_proxy_rules_endpoint_changes_total"); got < 1 {
		t.Errorf("endpoint changes total = %v", got)
	}
	if got := counter(t, reg, "kipvs_source_file_last_good_timestamp_seconds"); got < 1 {
		t.Errorf("source file last good timestamp = %v, want the time of the revision in effect", got)
	}
}

// runUntilSynced runs a daemon over node until its first sync, stops it, and returns what
// it programmed: the iptables and IPVS dumps.
func runUntilSynced(t *testing.T, cfg config.Config, node *fakeNode, log *zap.Logger, reg *prometheus.Registry, ev EventSink) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	deps := node.deps(startFileSource(t, t.Context(), path, log), reg)
	deps.Events = ev
	cfg.Kipvs.SourceFile = path
	if err := startDaemon(t, cfg, log, deps).stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	nf, err := node.nf.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vs, _ := node.ipvs.Dump()
	return nf + "\n" + vs
}

// Seed-001: a clusterCIDR that is, or contains, the Service CIDR does not stop kipvs (kube-
// proxy runs too). It is left out of local-traffic detection, so kipvs programs exactly
// what it programs with no clusterCIDR (the node's own connections to cluster IPs are
// masqueraded), and says so loudly: ERROR log, Warning Event on the Node, metric at 1.
func TestDaemonClusterCIDROverlappingServiceCIDR(t *testing.T) {
	noCIDR := testConfig(t)
	noCIDR.ClusterCIDRs = nil
	reg := prometheus.NewRegistry()
	want := runUntilSynced(t, noCIDR, newFakeNode(), zaptest.NewLogger(t), reg, &recordedEvents{})
	if got := counter(t, reg, "kipvs_cluster_cidr_overlaps_service_cidr"); got != 0 {
		t.Errorf("no clusterCIDR: kipvs_cluster_cidr_overlaps_service_cidr = %v, want 0", got)
	}
	// With no clusterCIDR, the node's own connections to cluster IPs are masqueraded
	// (-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ).
	golden.Check(t, "no-cluster-cidr.txt", want)
	for _, tc := range []struct{ cluster, svc, finding string }{
		{"10.96.0.0/12", "10.96.0.0/12", "is the Service CIDR 10.96.0.0/12"},
		{"10.0.0.0/8", "10.96.0.0/12", "overlaps the Service CIDR 10.96.0.0/12"},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			core, logs := observer.New(zap.ErrorLevel)
			cfg := testConfig(t)
			cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix(tc.cluster)}
			cfg.Kipvs.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix(tc.svc)}
			reg := prometheus.NewRegistry()
			ev := &recordedEvents{}
			got := runUntilSynced(t, cfg, newFakeNode(), zap.New(core), reg, ev)
			if got != want {
				t.Errorf("programmed state differs from the one with no clusterCIDR:\n--- got ---\n%s\n--- want ---\n%s", got, want)
			}
			if v := counter(t, reg, "kipvs_cluster_cidr_overlaps_service_cidr"); v != 1 {
				t.Errorf("kipvs_cluster_cidr_overlaps_service_cidr = %v, want 1", v)
			}
			errs := logs.FilterMessage("clusterCIDR overlaps the Service CIDR").All()
			if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0].ContextMap()["error"]), tc.finding) {
				t.Errorf("ERROR logs: %v, want one naming %q", logs.All(), tc.finding)
			}
			evs := ev.all()
			if len(evs) != 1 || !strings.HasPrefix(evs[0], "Node/node-a ClusterCIDROverlapsServiceCIDR clusterCIDR "+tc.cluster+" is not used to detect local traffic") ||
				!strings.Contains(evs[0], tc.finding) {
				t.Errorf("events = %q, want one Warning on Node/node-a naming %q", evs, tc.finding)
			}
		})
	}
}

// A scheduler whose module is missing fails at start with the module name.
func TestPrepareSchedulerProbe(t *testing.T) {
	node := newFakeNode()
	cfg := testConfig(t)
	cfg.IPVS.Scheduler = "nosuch"
	d, err := New(cfg, "node-a", zaptest.NewLogger(t), node.deps(nil, prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	err = d.Prepare(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ip_vs_nosuch") {
		t.Fatalf("Prepare = %v, want a hint to load ip_vs_nosuch", err)
	}
	if dump, _ := node.ipvs.Dump(); dump != "" {
		t.Errorf("probe left a virtual server:\n%s", dump)
	}
}

// IPVS timeouts the kernel refuses are logged and the start goes on, as in kube-proxy
// (an ERROR line naming the three values, the kernel's timeouts unchanged).
func TestPrepareIPVSTimeoutsRefused(t *testing.T) {
	node := newFakeNode()
	cfg := testConfig(t)
	cfg.IPVS.TCPTimeout = 1000 * time.Second
	cfg.IPVS.UDPTimeout = (1 << 31) * time.Second // beyond the kernel's int: EINVAL
	core, logs := observer.New(zap.ErrorLevel)
	d, err := New(cfg, "node-a", zap.New(core), node.deps(nil, prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		t.Fatalf("Prepare = %v, want the start to go on", err)
	}
	errs := logs.FilterMessageSnippet("IPVS timeouts").All()
	if len(errs) != 1 || errs[0].ContextMap()["udpTimeout"] != uint32(1<<31) || errs[0].ContextMap()["tcpTimeout"] != uint32(1000) {
		t.Fatalf("ERROR logs = %v, want one naming the timeouts", logs.All())
	}
	if got, _ := node.ipvs.Timeouts(); got.TCP == 1000 {
		t.Errorf("timeouts = %+v: a refused set changed the kernel's", got)
	}
}

// A conntrack hash size /sys refuses as read-only gives kube-proxy's Node Event; other
// failures none.
func TestReadOnlySysEvent(t *testing.T) {
	ro := fmt.Errorf("set x: %w", &os.PathError{Op: "open", Path: "/sys/module/nf_conntrack/parameters/hashsize", Err: syscall.EROFS})
	if reason, msg, ok := readOnlySysEvent(ro); !ok || reason != "readOnlySysFS" || !strings.HasPrefix(msg, "CRI error: /sys is read-only") {
		t.Errorf("read-only /sys: %q %q %v", reason, msg, ok)
	}
	if _, _, ok := readOnlySysEvent(&os.PathError{Err: syscall.EACCES}); ok {
		t.Error("EACCES gave the read-only Event")
	}
}

// A read-only /proc/sys gives one clear error naming the key.
func TestSysctlReadOnlyNamesKey(t *testing.T) {
	s := sysctltest.NewFake(map[string]string{"net/ipv4/vs/conntrack": "0"})
	s.SetReadOnly(true)
	err := applySysctls(s, []ipvsmode.Sysctl{{Key: "net/ipv4/vs/conntrack", Value: "1", Why: "why"}}, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.vs.conntrack") {
		t.Fatalf("error = %v, want one naming net.ipv4.vs.conntrack", err)
	}
}

// recordedEvents records the Warning Events of problems (all) and the start-up Events of
// the Node (starts) apart.
type recordedEvents struct {
	mu     sync.Mutex
	events []string
	starts []string
}

func (r *recordedEvents) Warn(svc types.NamespacedName, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, svc.String()+" "+reason+" "+msg)
}

func (r *recordedEvents) WarnNode(node, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "Node/"+node+" "+reason+" "+msg)
}

func (r *recordedEvents) StartNode(node, eventType, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, "Node/"+node+" "+eventType+" "+reason+" "+msg)
}

func (r *recordedEvents) startEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.starts)
}

func (r *recordedEvents) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Problems become Warning Events once; an unloadable per-Service scheduler falls back to
// the global one; an ETP=Local LoadBalancer gets its health check server.
func TestDaemonEventsHealthChecksAndSchedulers(t *testing.T) {
	log := zaptest.NewLogger(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hcPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	stream := oneService + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default, annotations: {kipvs.io/scheduler: mh}}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.30
  externalTrafficPolicy: Local
  healthCheckNodePort: %d
  externalIPs: [192.168.1.10]
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
status:
  loadBalancer: {ingress: [{ip: 203.0.113.30}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-1, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.7], nodeName: node-a}
`, hcPort)
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	node.ipvs.SetFault(func(_ int, op ipvs.Op) error {
		if op.Kind == ipvs.OpAddService && op.Service.Scheduler == "mh" {
			return kerr.Errno("add service", syscall.ENOENT) // no ip_vs_mh module on this node
		}
		return nil
	})
	ev := &recordedEvents{}
	deps := node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry())
	deps.Events = ev
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d := startDaemon(t, cfg, log, deps)
	// The LB's virtual servers fall back to rr.
	dump, _ := node.ipvs.Dump()
	golden.Check(t, "scheduler-fallback-ipvs.txt", dump)
	got := strings.Join(ev.all(), "\n")
	if starts := ev.startEvents(); !slices.Equal(starts, []string{"Node/node-a Normal Starting "}) {
		t.Errorf("start-up Events %q, want one Normal Starting on the Node", starts)
	}
	for _, want := range []string{"default/lb SchedulerUnavailable", "default/lb ExternalIPIsNodeAddress"} {
		if !strings.Contains(got, want) {
			t.Errorf("events lack %q:\n%s", want, got)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", hcPort))
	if err != nil {
		t.Fatalf("health check not served: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"localEndpoints": 1`) {
		t.Errorf("health check = %d %s", resp.StatusCode, body)
	}
	// A resync does not repeat the events.
	n := len(ev.all())
	d.run.RequestFull()
	poll.Until(t, waitLimit, "a second full sync", fullSyncs(t, deps.Registry, 2))
	if len(ev.all()) != n {
		t.Errorf("events repeated on resync: %v", ev.all()[n:])
	}
}

// The IPv6 family runs whenever the node can run it (ip6tables works, the kernel has IPv6),
// as upstream decides, even on a host with no global IPv6 address: its rules are
// programmed, its metric series exist and /healthz reports its status. Without IPv6
// support only IPv4 runs. The MASQUERADE rule carries --random-fully exactly for the
// families whose iptables supports it.
func TestDaemonFamilies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ipv6     func() error
		families []string
		golden   string // the nat tables of both families
	}{
		{"IPv6 supported, no IPv6 address", func() error { return nil }, []string{"IPv4", "IPv6"}, "families-ipv6.txt"},
		{"no ip6tables", func() error { return errors.New("ip6tables-nft cannot list the nat table") }, []string{"IPv4"}, "families-ipv4-only.txt"},
		{"no check", nil, []string{"IPv4"}, "families-ipv4-only.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
				t.Fatal(err)
			}
			log := zaptest.NewLogger(t)
			node := newFakeNode()
			nf6 := netfiltertest.NewFake(inet.IPv6)
			reg := prometheus.NewRegistry()
			deps := node.deps(startFileSource(t, t.Context(), path, log), reg)
			deps.Kernel = func(f inet.Family) (reconcile.Kernel, error) {
				nf := node.nf
				if f == inet.IPv6 {
					nf = nf6
				}
				return reconcile.Kernel{IPVS: node.ipvs, Filter: iptables.New(f, node.ipset, nf), Dummy: node.dummy, Conntrack: conntracktest.NewFake()}, nil
			}
			deps.IPv6 = tc.ipv6
			deps.RandomFully = func(f inet.Family) bool { return f == inet.IPv4 }
			cfg := testConfig(t)
			cfg.Kipvs.SourceFile = path
			d := startDaemon(t, cfg, log, deps)
			var status []string
			for fam := range d.Health().Report().Status {
				status = append(status, fam)
			}
			slices.Sort(status)
			if !slices.Equal(status, tc.families) {
				t.Errorf("/healthz status families = %v, want %v", status, tc.families)
			}
			var series []string
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "kipvs_sync_full_total" {
					continue
				}
				for _, m := range mf.Metric {
					for _, l := range m.Label {
						series = append(series, l.GetValue())
					}
				}
			}
			slices.Sort(series)
			if !slices.Equal(series, tc.families) {
				t.Errorf("kipvs_sync_full_total series = %v, want %v", series, tc.families)
			}
			// IPv4's MASQUERADE rule has --random-fully, IPv6's not; no IPv6 rules
			// without IPv6 support.
			golden.Check(t, tc.golden, "# IPv4\n"+node.nf.Save(netfilter.TableNAT)+"# IPv6\n"+nf6.Save(netfilter.TableNAT))
		})
	}
}

// The Service CIDRs come from the ServiceCIDR objects, else --kipvs-service-cidr; with
// neither, default/kubernetes's cluster IP inside a clusterCIDR is the evidence. Only the
// overlapping clusterCIDRs of a dual-stack pair are left out.
func TestClusterCIDROverlaps(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		cluster   []netip.Prefix
		flag      []netip.Prefix
		sc        watch.ServiceCIDRs
		wantBad   []netip.Prefix
		wantError []string
	}{
		{name: "pod CIDR", cluster: pfx("10.244.0.0/16"), flag: pfx("10.96.0.0/12")},
		{name: "flag", cluster: pfx("10.96.0.0/12", "fd00:10:244::/56"), flag: pfx("10.96.0.0/12"),
			wantBad: pfx("10.96.0.0/12"), wantError: []string{"--kipvs-service-cidr", "is the Service CIDR 10.96.0.0/12"}},
		{name: "API over flag", cluster: pfx("10.244.0.0/16", "fd00:10:96::/112"), flag: pfx("10.244.0.0/16"),
			sc:      watch.ServiceCIDRs{CIDRs: pfx("10.96.0.0/16", "fd00:10:96::/108")},
			wantBad: pfx("fd00:10:96::/112"), wantError: []string{"ServiceCIDR objects", "overlaps the Service CIDR fd00:10:96::/108"}},
		{name: "default/kubernetes", cluster: pfx("10.96.0.0/12"),
			sc:      watch.ServiceCIDRs{KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}},
			wantBad: pfx("10.96.0.0/12"), wantError: []string{"contains 10.96.0.1, the cluster IP of default/kubernetes"}},
		{name: "nothing known", cluster: pfx("10.96.0.0/12")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.ClusterCIDRs, cfg.Kipvs.ServiceCIDRs = tc.cluster, tc.flag
			d := &Daemon{cfg: cfg}
			bad, err := d.clusterCIDROverlaps(tc.sc)
			if !slices.Equal(bad, tc.wantBad) {
				t.Errorf("overlapping = %v, want %v", bad, tc.wantBad)
			}
			if (err != nil) != (len(tc.wantError) > 0) {
				t.Fatalf("error = %v", err)
			}
			for _, w := range tc.wantError {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
