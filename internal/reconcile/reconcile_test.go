package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// env is one node: fake kernel, desired state, reconciler.
type env struct {
	t       testing.TB
	ipvs    *ipvstest.Fake
	ipset   *ipsettest.Fake
	nf      *netfiltertest.Fake
	dummy   *dummyiftest.Fake
	ct      *conntracktest.Fake
	clk     *clocktesting.FakeClock
	reg     *prometheus.Registry
	opts    *proxy.Options
	desired *proxy.Desired
	rec     *Reconciler
	ctx     context.Context
}

func newEnv(t testing.TB, mod ...func(*Options)) *env {
	e := &env{
		t:     t,
		ipvs:  ipvstest.NewFake(),
		ipset: ipsettest.NewFake(),
		nf:    netfiltertest.NewFake(inet.IPv4),
		dummy: dummyiftest.NewFake("kube-ipvs0"),
		ct:    conntracktest.NewFake(),
		clk:   clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		reg:   prometheus.NewRegistry(),
		ctx:   context.Background(),
		opts: &proxy.Options{
			Family: inet.IPv4, Scheduler: "rr", NodeName: "node-a", MasqueradeBit: 14,
			NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, NodeIP: netip.MustParseAddr("192.168.1.10"),
			LocalDetector: proxy.LocalDetector{Mode: proxy.LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		},
		desired: proxy.NewDesired(inet.IPv4),
	}
	o := Options{Family: inet.IPv4, GracefulPeriod: 30 * time.Second, Clock: e.clk, Metrics: metrics.New(e.reg)}
	for _, m := range mod {
		m(&o)
	}
	e.rec = New(Kernel{IPVS: e.ipvs, Filter: iptables.New(o.Family, e.ipset, e.nf), Dummy: e.dummy, Conntrack: e.ct}, o)
	return e
}

// set replaces a Service's contribution and returns what it touched.
func (e *env) set(s *v1.Service, slices ...*discoveryv1.EndpointSlice) *proxy.Touched {
	t := proxy.NewTouched()
	e.desired.Update(types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, proxy.BuildService(proxy.ServiceInput{Service: s, Slices: slices}, e.opts), t)
	return t
}

func (e *env) remove(ns, name string) *proxy.Touched {
	t := proxy.NewTouched()
	e.desired.Update(types.NamespacedName{Namespace: ns, Name: name}, nil, t)
	return t
}

func (e *env) full() Result {
	e.t.Helper()
	res, err := e.rec.FullSync(e.ctx, e.desired, e.opts)
	if err != nil {
		e.t.Fatalf("full sync: %v", err)
	}
	return res
}

func (e *env) sync(t *proxy.Touched) Result {
	e.t.Helper()
	res, err := e.rec.Sync(e.ctx, e.desired, e.opts, t)
	if err != nil {
		e.t.Fatalf("sync: %v", err)
	}
	return res
}

// dump is the whole fake kernel, as one text.
func (e *env) dump() string {
	e.t.Helper()
	var b strings.Builder
	for _, f := range []func() (string, error){
		e.ipvs.Dump, e.ipset.Dump, e.dummy.Dump, func() (string, error) { return e.nf.Dump(e.ctx) },
	} {
		s, err := f()
		if err != nil {
			e.t.Fatal(err)
		}
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("--\n")
	}
	return b.String()
}

func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.Metric {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// gauge is counter for a gauge (the sum of the series matching labels).
func (e *env) gauge(name string, labels map[string]string) float64 {
	e.t.Helper()
	return e.counter(name, labels)
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.Label {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func svc(name, clusterIP string, mods ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func udp(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP; s.Spec.Ports[0].Port = 53 }

func nodePort(port int32) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = port }
}

func eps(svcName string, proto v1.Protocol, port int32, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svcName + "-1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("p"), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("node-b")})
	}
	return s
}

// A first full sync on an empty node programs everything; an immediate second one changes
// nothing and reports no drift.
func TestFullSyncFromScratch(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.set(svc("dns", "10.96.0.53", udp, nodePort(30053)), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.7"))
	res := e.full()
	if res.Plan.Empty() {
		t.Fatal("first sync planned nothing")
	}
	golden.Check(t, "full-sync-from-scratch.golden", res.Plan.String()+"==\n"+e.dump())
	res = e.full()
	if !res.Plan.Empty() || len(res.Drift) != 0 {
		t.Fatalf("second full sync: plan\n%s drift %v", res.Plan, res.Drift)
	}
	if got := e.counter("kipvs_kernel_drift_repaired_total", nil); got != 0 {
		t.Errorf("drift counted on a clean resync: %v", got)
	}
}

// Incremental syncs touch only the changed objects and end in the same kernel state a full
// sync of the same desired state gives.
func TestIncrementalMatchesFull(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	steps := []func() *proxy.Touched{
		func() *proxy.Touched {
			return e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6", "10.244.3.7"))
		},
		func() *proxy.Touched {
			return e.set(svc("api", "10.96.0.20", nodePort(30080)), eps("api", v1.ProtocolTCP, 9000, "10.244.1.9"))
		},
		func() *proxy.Touched { return e.remove("default", "api") },
		func() *proxy.Touched {
			return e.set(svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
				eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6", "10.244.3.7"))
		},
	}
	var plans strings.Builder
	for i, step := range steps {
		touched := step()
		res := e.sync(touched)
		fmt.Fprintf(&plans, "== step %d\n%s", i+1, res.Plan)
		incremental := e.dump()
		// The same desired state through a full sync on a fresh node must match.
		f := newEnv(t)
		f.desired = e.desired
		f.full()
		if got := f.dump(); got != incremental {
			t.Fatalf("step %d: incremental kernel state differs from a full sync:\n--- incremental ---\n%s--- full ---\n%s", i+1, incremental, got)
		}
		if res := e.full(); !res.Plan.Empty() || len(res.Drift) != 0 {
			t.Fatalf("step %d: full sync after incremental found work:\n%s drift %v", i+1, res.Plan, res.Drift)
		}
	}
	golden.Check(t, "incremental-plans.golden", plans.String())
	if got := e.counter("kipvs_sync_objects_changed_total", map[string]string{"kind": "virtual_server", "op": "delete"}); got != 2 {
		t.Errorf("virtual servers deleted = %v, want 2 (api's cluster IP and node port)", got)
	}
}

// The first sync adopts what is there: live real servers are kept (no flush), leftovers of
// Services that no longer exist are removed, and foreign virtual servers stay.
func TestAdoptionKeepsLiveStateAndForeignObjects(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")} })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	key := func(ip string, port uint16) ipvs.ServiceKey {
		return ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr(ip), Port: port}
	}
	// What kube-proxy left: web (still wanted), old (gone), a node port of a gone Service.
	_, err := e.dummy.EnsureLink()
	must(err)
	for _, ip := range []string{"10.96.0.10", "10.96.0.99"} {
		_, err := e.dummy.EnsureAddress(netip.MustParseAddr(ip))
		must(err)
	}
	must(e.ipvs.AddService(ipvs.Service{ServiceKey: key("10.96.0.10", 80), Scheduler: "rr"}))
	must(e.ipvs.AddDestination(key("10.96.0.10", 80), ipvs.Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 1}))
	must(e.ipvs.SetDestinationConns(key("10.96.0.10", 80), netip.MustParseAddrPort("10.244.1.5:8080"), 5, 2, 0))
	must(e.ipvs.AddService(ipvs.Service{ServiceKey: key("10.96.0.99", 80), Scheduler: "rr"}))
	must(e.ipvs.AddService(ipvs.Service{ServiceKey: key("192.168.1.10", 31000), Scheduler: "rr"}))
	must(e.ipset.Create(ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort}))
	must(e.ipset.Add("KUBE-NODE-PORT-TCP", ipset.Entry{Port: 31000}))
	// Foreign: a keepalived-style VS on a node address, one in excludeCIDRs.
	must(e.ipvs.AddService(ipvs.Service{ServiceKey: key("192.168.1.10", 443), Scheduler: "wlc"}))
	must(e.ipvs.AddService(ipvs.Service{ServiceKey: key("172.20.0.1", 80), Scheduler: "rr"}))

	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	mutations := e.ipvs.Mutations()
	res := e.full()
	if len(res.Drift) != 0 {
		t.Errorf("adoption counted as drift: %v", res.Drift)
	}
	golden.Check(t, "adoption.golden", res.Plan.String()+"==\n"+e.dump())
	for _, line := range strings.Split(res.Plan.String(), "\n") {
		if strings.Contains(line, "10.96.0.10:80") {
			t.Errorf("adoption touched the live virtual server: %s", line)
		}
	}
	if got := e.ipvs.Mutations() - mutations; got != 2 {
		t.Errorf("IPVS mutations during adoption = %d, want 2 (the two leftovers)", got)
	}
}

// Someone flushes IPVS, an ipset and an address: the next full sync repairs all of it and
// counts it, by kind, in kipvs_kernel_drift_repaired_total.
func TestDriftRepairedAndCounted(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.full()
	want := e.dump()
	if err := e.ipvs.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.ipset.Flush("KUBE-CLUSTER-IP"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dummy.RemoveAddress(netip.MustParseAddr("10.96.0.10")); err != nil {
		t.Fatal(err)
	}
	res := e.full()
	wantDrift := map[string]int{"virtual_server": 1, "real_server": 2, "ipset_member": 1, "address": 1}
	if fmt.Sprint(res.Drift) != fmt.Sprint(wantDrift) {
		t.Errorf("drift = %v, want %v", res.Drift, wantDrift)
	}
	if got := e.dump(); got != want {
		t.Errorf("not repaired:\n--- got ---\n%s--- want ---\n%s", got, want)
	}
	for kind, n := range wantDrift {
		if got := e.counter("kipvs_kernel_drift_repaired_total", map[string]string{"kind": kind}); got != float64(n) {
			t.Errorf("drift metric %s = %v, want %d", kind, got, n)
		}
	}
}

// An apply error mid-plan fails only the object it hit: the reconciler keeps its model
// (no full sync needed), gives that virtual server a status with a retry time, leaves it
// alone until then, and an incremental sync at that time repairs it, ending in the state a
// fresh full sync makes.
func TestFaultMidPlanRetriesTheFailedObject(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	touched := e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6", "10.244.3.7"))
	api := e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 9000, "10.244.1.9"))
	maps.Copy(touched.VirtualServers, api.VirtualServers)
	maps.Copy(touched.Members, api.Members)
	maps.Copy(touched.Addresses, api.Addresses)
	e.ipvs.SetFault(ipvstest.FailNth(e.ipvs.Mutations()+2, syscall.ENOMEM))
	_, err := e.rec.Sync(e.ctx, e.desired, e.opts, touched)
	if !errors.Is(err, syscall.ENOMEM) || !IsApplyError(err) {
		t.Fatalf("sync error = %v, want an *ApplyError with the injected ENOMEM", err)
	}
	if e.rec.NeedsFull() {
		t.Fatal("one failed object must not discard the model (NeedsFull)")
	}
	failed := e.rec.Failed()
	if len(failed) != 1 || failed[0].Key.Kind != KindVirtualServer || failed[0].Attempts != 1 ||
		!failed[0].RetryAt.Equal(e.clk.Now().Add(time.Second)) {
		t.Fatalf("failed objects = %+v, want one virtual server, 1 attempt, retry in 1 s", failed)
	}
	if got := e.gauge("kipvs_sync_objects_out_of_sync", map[string]string{"kind": "virtual_server"}); got != 1 {
		t.Errorf("out-of-sync gauge = %v, want 1", got)
	}
	// Before its retry time an unrelated sync leaves it alone.
	before := e.ipvs.Mutations()
	if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, proxy.NewTouched()); err != nil {
		t.Fatal(err)
	}
	if e.ipvs.Mutations() != before || e.rec.RetryDue() {
		t.Fatal("the failed object was retried before its time")
	}
	e.ipvs.SetFault(nil)
	e.clk.Step(time.Second)
	if !e.rec.RetryDue() {
		t.Fatal("the retry is not due at its time")
	}
	res, err := e.rec.Sync(e.ctx, e.desired, e.opts, proxy.NewTouched())
	if err != nil || res.Plan.Empty() {
		t.Fatalf("the retry: err %v, plan %v", err, res.Plan)
	}
	if len(e.rec.Failed()) != 0 || e.gauge("kipvs_sync_objects_out_of_sync", map[string]string{"kind": "virtual_server"}) != 0 {
		t.Fatalf("still failed after a successful retry: %+v", e.rec.Failed())
	}
	e.expectConverged("after the retry")
}

// Removed TCP real servers drain at weight 0 until their connections end or the graceful
// period passes; a re-added one comes back at weight 1; UDP ones go at once with their
// conntrack flows.
func TestGracefulTermination(t *testing.T) {
	e := newEnv(t)
	vip := netip.MustParseAddr("10.96.0.10")
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: vip, Port: 80}
	a, b := netip.MustParseAddrPort("10.244.1.5:8080"), netip.MustParseAddrPort("10.244.2.6:8080")
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.full()
	weights := func() map[netip.AddrPort]int {
		ds, err := e.ipvs.Destinations(k)
		if err != nil {
			t.Fatal(err)
		}
		out := map[netip.AddrPort]int{}
		for _, d := range ds {
			out[d.AddrPort()] = d.Weight
		}
		return out
	}
	if err := e.ipvs.SetDestinationConns(k, b, 3, 1, 0); err != nil {
		t.Fatal(err)
	}
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5")))
	if w := weights(); w[a] != 1 || w[b] != 0 {
		t.Fatalf("after removing b: weights %v, want a=1 b=0 (draining)", w)
	}
	e.clk.Step(10 * time.Second)
	if res, err := e.rec.Drain(e.ctx); err != nil || !res.Plan.Empty() {
		t.Fatalf("drain with live connections before the period: %v %v", res.Plan, err)
	}
	// Re-added while draining: back to weight 1, no longer draining.
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6")))
	if w := weights(); w[b] != 1 || len(e.rec.Draining()) != 0 {
		t.Fatalf("re-added: weights %v draining %v", w, e.rec.Draining())
	}
	// Removed again; connections stay; the period runs out: deleted.
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5")))
	e.clk.Step(29 * time.Second)
	if res, _ := e.rec.Drain(e.ctx); !res.Plan.Empty() {
		t.Fatalf("deleted before the period: %v", res.Plan)
	}
	e.clk.Step(time.Second)
	if res, err := e.rec.Drain(e.ctx); err != nil || res.Plan.String() != "delete rs tcp/10.96.0.10:80 -> 10.244.2.6:8080\n" {
		t.Fatalf("after the period: plan %q err %v", res.Plan, err)
	}
	if w := weights(); len(w) != 1 {
		t.Fatalf("weights %v", w)
	}
	// No connections: deleted at the next drain check.
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.2.6")))
	if w := weights(); w[a] != 0 {
		t.Fatalf("a not draining: %v", w)
	}
	if res, _ := e.rec.Drain(e.ctx); res.Plan.String() != "delete rs tcp/10.96.0.10:80 -> 10.244.1.5:8080\n" {
		t.Fatalf("idle drain: %q", res.Plan)
	}

	// UDP: deleted at once, flows to the dead endpoint removed, others kept.
	dnsVIP := netip.MustParseAddr("10.96.0.53")
	e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.7", "10.244.1.8"))
	e.full()
	for i, ep := range []string{"10.244.1.7", "10.244.1.8"} {
		client := netip.AddrPortFrom(netip.MustParseAddr("10.244.9.9"), uint16(40000+i))
		if err := e.ct.Insert(conntrack.Flow{Protocol: inet.UDP,
			Orig:  conntrack.Tuple{Src: client, Dst: netip.AddrPortFrom(dnsVIP, 53)},
			Reply: conntrack.Tuple{Src: netip.MustParseAddrPort(ep + ":5353"), Dst: client}}); err != nil {
			t.Fatal(err)
		}
	}
	e.sync(e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.8")))
	flows, _ := e.ct.Dump()
	if strings.Contains(flows, "10.244.1.7") || !strings.Contains(flows, "10.244.1.8") {
		t.Errorf("conntrack after UDP endpoint removal:\n%s", flows)
	}
	ds, _ := e.ipvs.Destinations(ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.UDP, Addr: dnsVIP, Port: 53})
	if len(ds) != 1 {
		t.Errorf("UDP real servers %v, want only 10.244.1.8", ds)
	}
}

// After a restart (a new Reconciler over the same kernel), weight-0 real servers kipvs does
// not want are draining again, not reset to weight 1 (upstream issues 92019, 108319) and not
// cut off.
func TestDrainStateRebuiltAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.full()
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	_ = e.ipvs.SetDestinationConns(k, netip.MustParseAddrPort("10.244.2.6:8080"), 1, 0, 0)
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5")))

	restarted := New(Kernel{IPVS: e.ipvs, Filter: iptables.New(e.rec.opts.Family, e.ipset, e.nf), Dummy: e.dummy, Conntrack: e.ct},
		Options{Family: inet.IPv4, GracefulPeriod: 30 * time.Second, Clock: e.clk})
	res, err := restarted.FullSync(e.ctx, e.desired, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() {
		t.Errorf("restart changed the kernel:\n%s", res.Plan)
	}
	if d := restarted.Draining(); len(d) != 1 {
		t.Fatalf("draining after restart = %v, want the weight-0 real server", d)
	}
	e.clk.Step(30 * time.Second)
	if res, _ := restarted.Drain(e.ctx); res.Plan.Len() != 1 {
		t.Errorf("drain after restart + period: %q", res.Plan)
	}
}

// Removed SCTP real servers are deleted at once, connections or not, as kube-proxy does for
// UDP and SCTP (its IsRsGracefulTerminationNeeded): the whole IPVS table after the removal
// holds the remaining real server only, and nothing is left draining. A full sync over a
// weight-0 SCTP real server left by an older kipvs deletes it too.
func TestSCTPRealServersDeletedAtOnce(t *testing.T) {
	e := newEnv(t)
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.SCTP, Addr: netip.MustParseAddr("10.96.0.20"), Port: 3868}
	gone := netip.MustParseAddrPort("10.244.2.6:3868")
	e.set(svc("diameter", "10.96.0.20", sctp), eps("diameter", v1.ProtocolSCTP, 3868, "10.244.1.5", "10.244.2.6"))
	e.full()
	if err := e.ipvs.SetDestinationConns(k, gone, 3, 1, 0); err != nil {
		t.Fatal(err)
	}
	e.sync(e.set(svc("diameter", "10.96.0.20", sctp), eps("diameter", v1.ProtocolSCTP, 3868, "10.244.1.5")))
	got, err := e.ipvs.Dump()
	if err != nil {
		t.Fatal(err)
	}
	want := "-A --sctp-service 10.96.0.20:3868 -s rr\n-a --sctp-service 10.96.0.20:3868 -r 10.244.1.5:3868 -m -w 1\n"
	if got != want {
		t.Errorf("IPVS after removing an SCTP endpoint with connections:\n%s\nwant:\n%s", got, want)
	}
	if d := e.rec.Draining(); len(d) != 0 {
		t.Errorf("draining %v, want none", d)
	}

	// A weight-0 leftover (an older kipvs drained SCTP) goes at the next full sync.
	if err := e.ipvs.AddDestination(k, masq(gone.Addr(), gone.Port(), 0)); err != nil {
		t.Fatal(err)
	}
	e.full()
	if got, _ := e.ipvs.Dump(); got != want {
		t.Errorf("IPVS after a full sync over a weight-0 SCTP real server:\n%s\nwant:\n%s", got, want)
	}
	if d := e.rec.Draining(); len(d) != 0 {
		t.Errorf("draining after the full sync %v, want none", d)
	}
}

// With NoDrainLimit (--kipvs-graceful-period=0), a removed TCP real server drains at weight 0
// until its active and inactive connections reach 0, however long that takes, as kube-proxy
// does; it is then deleted at the next drain check.
func TestDrainWithoutLimitWaitsForConnections(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.GracefulPeriod = NoDrainLimit })
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	b := netip.MustParseAddrPort("10.244.2.6:8080")
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.full()
	if err := e.ipvs.SetDestinationConns(k, b, 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5")))
	draining := "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n-a -t 10.96.0.10:80 -r 10.244.2.6:8080 -m -w 0\n"
	for _, step := range []time.Duration{0, time.Minute, 24 * time.Hour} {
		e.clk.Step(step)
		if _, err := e.rec.Drain(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.ipvs.Dump(); got != draining {
			t.Fatalf("%s after the removal, connections open: IPVS\n%s\nwant\n%s", step, got, draining)
		}
	}
	// Only inactive connections left (FIN_WAIT, TIME_WAIT): still waiting, as kube-proxy.
	if err := e.ipvs.SetDestinationConns(k, b, 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.ipvs.Dump(); got != draining {
		t.Fatalf("inactive connections left: IPVS\n%s\nwant\n%s", got, draining)
	}
	if err := e.ipvs.SetDestinationConns(k, b, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	want := "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n"
	if got, _ := e.ipvs.Dump(); got != want || len(e.rec.Draining()) != 0 {
		t.Fatalf("connections ended: IPVS\n%s\nwant\n%s\ndraining %v", got, want, e.rec.Draining())
	}
}
