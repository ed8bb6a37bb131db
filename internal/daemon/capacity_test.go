package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/proxy"
)

// capService is a Service with nports TCP ports from 8000 on and one endpoint on another
// node; lbIP (if not "") makes it a LoadBalancer with ranges loadBalancerSourceRanges.
func capService(ns, name, clusterIP, lbIP string, ranges, nports int) (*v1.Service, *discoveryv1.EndpointSlice) {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol}},
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.9.9"}, NodeName: ptr.To("node-b"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	for i := range nports {
		pn := fmt.Sprintf("p%d", i)
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: pn, Protocol: v1.ProtocolTCP, Port: int32(8000 + i), TargetPort: intstr.FromInt32(9000)})
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(pn), Port: ptr.To[int32](9000), Protocol: ptr.To(v1.ProtocolTCP)})
	}
	if lbIP != "" {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbIP}}
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = int32(30000 + i + int(netipLast(clusterIP))*20)
		}
		for i := range ranges {
			s.Spec.LoadBalancerSourceRanges = append(s.Spec.LoadBalancerSourceRanges, fmt.Sprintf("100.%d.%d.0/24", 64+i/256, i%256))
		}
	}
	return s, sl
}

func netipLast(ip string) byte {
	var a, b, c, d byte
	_, _ = fmt.Sscanf(ip, "%d.%d.%d.%d", &a, &b, &c, &d)
	return d
}

// capObjects are the Services of the capacity tests: three ordinary ones around (in name
// order) a LoadBalancer with hugeRanges source ranges on 10 ports (none: left out).
func capObjects(hugeRanges int) objects {
	o := objects{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNodeName}}}
	add := func(s *v1.Service, sl *discoveryv1.EndpointSlice) {
		o.services = append(o.services, s)
		o.slices = append(o.slices, sl)
	}
	add(capService("a", "allowed", "10.96.0.10", "203.0.113.10", 3, 2))
	add(capService("b", "plain", "10.96.0.11", "", 0, 1))
	if hugeRanges > 0 {
		add(capService("m", "huge", "10.96.0.12", "203.0.113.12", hugeRanges, 10))
	}
	add(capService("z", "late", "10.96.0.13", "203.0.113.13", 2, 1))
	return o
}

// capDaemon is a fuzz daemon with the capacity settings of mutate, a fake clock and an
// Event recorder.
func capDaemon(t *testing.T, mutate func(*config.Config)) (*fuzzDaemon, *recordedEvents, *testingclock.FakeClock) {
	t.Helper()
	ev := &recordedEvents{}
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	f, err := newFuzzDaemonWith("ClusterCIDR", func(c *config.Config, d *Deps) {
		c.Kipvs.MaxServiceSetMembers = config.Defaults().Kipvs.MaxServiceSetMembers // not the fuzzer's small limit
		if mutate != nil {
			mutate(c)
		}
		d.Events = ev
		d.Clock = clk
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f, ev, clk
}

// reference is the whole kernel state a fresh node reaches with o: what the node under test
// must hold.
func reference(t *testing.T, o objects) nodeDump {
	t.Helper()
	f, _, _ := capDaemon(t, nil)
	f.set(o.deepCopy(), false)
	if err := f.d.sync(context.Background(), true); err != nil {
		t.Fatalf("reference sync: %v", err)
	}
	d, err := f.node.dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameKernel(t *testing.T, what string, got, want nodeDump) {
	t.Helper()
	g, w := got.parts(), want.parts()
	for i := range g {
		if g[i].text != w[i].text {
			t.Errorf("%s: %s differs from the reference node's:\n%s", what, g[i].name, lineDiff(w[i].text, g[i].text))
		}
	}
}

// syncOnce runs one sync the way the runner does (the change queued for /healthz first)
// and returns its error and /healthz's status code once the health timeout has passed.
func syncOnce(t *testing.T, f *fuzzDaemon, clk *testingclock.FakeClock, full bool) (error, int) {
	t.Helper()
	for _, fam := range f.d.families {
		f.d.health.QueuedUpdate(fam.ipFamily.String())
	}
	err := f.d.sync(context.Background(), full)
	clk.Step(2*f.d.cfg.IPVS.SyncPeriod + time.Second)
	rec := httptest.NewRecorder()
	f.d.Health().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return err, rec.Code
}

// One LoadBalancer Service with 7,000 loadBalancerSourceRanges x 10 ports (70,000 members
// of KUBE-LOAD-BALANCER-SOURCE-CIDR, beyond ipset's default maxelem) among ordinary ones.
// Whichever limit stops it (the per-Service one by default, or the set limit), it alone is
// not programmed: every other Service is, source-range allow lists included (the whole
// kernel equals a node that never saw it), the sync succeeds and /healthz stays 200; one
// Warning Event names the Service and the field; the metric counts it; and the sync after
// the Service is fixed, or deleted, converges in one pass.
func TestOversizedServiceFailsAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func(*config.Config)
		reason string
	}{
		{"per-service limit (default)", nil, "TooManySetMembers"},
		{"set limit", func(c *config.Config) { c.Kipvs.MaxServiceSetMembers, c.Kipvs.MaxSetMembers = 0, 65536 }, "SetCapacityExceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ev, clk := capDaemon(t, tc.cfg)
			f.set(capObjects(7000).deepCopy(), false)
			err, code := syncOnce(t, f, clk, true)
			if err != nil || code != http.StatusOK {
				t.Fatalf("sync with the oversized Service: err %v, /healthz %d; want success and 200", err, code)
			}
			got, err := f.node.dump()
			if err != nil {
				t.Fatal(err)
			}
			sameKernel(t, "with the oversized Service", got, reference(t, capObjects(0)))
			var events []string
			for _, e := range ev.all() {
				if !strings.HasPrefix(e, "Node/") {
					events = append(events, e)
				}
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "m/huge "+tc.reason+" spec.loadBalancerSourceRanges: ") {
				t.Errorf("events %q, want one %s on m/huge naming spec.loadBalancerSourceRanges", events, tc.reason)
			}
			if n := gauge(t, f.d, "kipvs_services_not_programmed", "reason", tc.reason, "ip_family", "IPv4"); n != 1 {
				t.Errorf("kipvs_services_not_programmed{reason=%s,ip_family=IPv4} = %v, want 1", tc.reason, n)
			}

			// Fixed (100 ranges): programmed by the next sync, in one pass.
			f.set(capObjects(100).deepCopy(), false)
			if err, code := syncOnce(t, f, clk, false); err != nil || code != http.StatusOK {
				t.Fatalf("sync after the fix: err %v, /healthz %d", err, code)
			}
			got, _ = f.node.dump()
			sameKernel(t, "one sync after the fix", got, reference(t, capObjects(100)))
			if n := gauge(t, f.d, "kipvs_services_not_programmed", "reason", tc.reason, "ip_family", "IPv4"); n != 0 {
				t.Errorf("kipvs_services_not_programmed after the fix = %v, want 0", n)
			}
			// Oversized again, then deleted: one sync each.
			f.set(capObjects(7000).deepCopy(), false)
			if err, _ := syncOnce(t, f, clk, false); err != nil {
				t.Fatalf("sync oversized again: %v", err)
			}
			got, _ = f.node.dump()
			sameKernel(t, "oversized again", got, reference(t, capObjects(0)))
			f.set(capObjects(0).deepCopy(), false)
			if err, code := syncOnce(t, f, clk, false); err != nil || code != http.StatusOK {
				t.Fatalf("sync after the delete: err %v, /healthz %d", err, code)
			}
			got, _ = f.node.dump()
			sameKernel(t, "one sync after the delete", got, reference(t, capObjects(0)))
		})
	}
}

// Without limits the 70,000-member Service is programmed: its set grows past ipset's
// default maxelem by swap instead of failing.
func TestOversizedServiceWithoutLimitsGrowsTheSet(t *testing.T) {
	f, _, clk := capDaemon(t, func(c *config.Config) { c.Kipvs.MaxServiceSetMembers, c.Kipvs.MaxSetMembers = 0, 0 })
	f.set(capObjects(7000).deepCopy(), false)
	if err, code := syncOnce(t, f, clk, true); err != nil || code != http.StatusOK {
		t.Fatalf("sync: err %v, /healthz %d", err, code)
	}
	h, err := f.node.ipset.Header("KUBE-LOAD-BALANCER-SOURCE-CIDR")
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxElem != 131072 || h.Elements != 70000+6+2 {
		t.Errorf("KUBE-LOAD-BALANCER-SOURCE-CIDR: maxelem %d, %d members; want 131072, 70008", h.MaxElem, h.Elements)
	}
}

// ~66,000 cluster-IP ports across many Services fill KUBE-CLUSTER-IP beyond ipset's default
// maxelem: the set grows, every Service is programmed, and it shrinks back once they go.
func TestManyClusterIPPortsGrowTheSet(t *testing.T) {
	f, _, clk := capDaemon(t, nil)
	o := objects{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNodeName}}}
	for i := range 33 {
		s, sl := capService("ports", fmt.Sprintf("s%02d", i), fmt.Sprintf("10.96.1.%d", i+1), "", 0, 2000)
		sl.Endpoints = nil // no endpoints: a virtual server each, no real servers
		o.services, o.slices = append(o.services, s), append(o.slices, sl)
	}
	f.set(o.deepCopy(), false)
	if err, code := syncOnce(t, f, clk, true); err != nil || code != http.StatusOK {
		t.Fatalf("sync of 66,000 cluster-IP ports: err %v, /healthz %d", err, code)
	}
	h, err := f.node.ipset.Header("KUBE-CLUSTER-IP")
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxElem != 131072 || h.Elements != 66000 {
		t.Errorf("KUBE-CLUSTER-IP: maxelem %d, %d members; want 131072, 66000", h.MaxElem, h.Elements)
	}
	if vs, err := f.node.ipvs.Services(); err != nil || len(vs) != 66000 {
		t.Errorf("%d virtual servers (err %v), want 66000", len(vs), err)
	}
	o.services, o.slices = o.services[:1], o.slices[:1]
	f.set(o.deepCopy(), false)
	if err, _ := syncOnce(t, f, clk, false); err != nil {
		t.Fatal(err)
	}
	if h, _ := f.node.ipset.Header("KUBE-CLUSTER-IP"); h.MaxElem != 65536 || h.Elements != 2000 {
		t.Errorf("after 32 Services went: maxelem %d, %d members; want 65536, 2000", h.MaxElem, h.Elements)
	}
}

// gauge reads one series of a gauge by its labels (name, value pairs).
func gauge(t *testing.T, d *Daemon, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := d.deps.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// The flags' defaults are the limits package proxy documents.
func TestCapacityDefaults(t *testing.T) {
	k := config.Defaults().Kipvs
	if k.MaxServiceSetMembers != proxy.DefaultMaxServiceSetMembers || k.MaxSetMembers != proxy.DefaultMaxSetMembers {
		t.Errorf("defaults %d, %d; want proxy's %d, %d", k.MaxServiceSetMembers, k.MaxSetMembers, proxy.DefaultMaxServiceSetMembers, proxy.DefaultMaxSetMembers)
	}
	if k.MaxServiceVirtualServers != proxy.DefaultMaxServiceVirtualServers || k.MaxServiceRealServers != proxy.DefaultMaxServiceRealServers ||
		k.MaxRealServers != proxy.DefaultMaxRealServers {
		t.Errorf("defaults %d, %d, %d; want proxy's %d, %d, %d", k.MaxServiceVirtualServers, k.MaxServiceRealServers, k.MaxRealServers,
			proxy.DefaultMaxServiceVirtualServers, proxy.DefaultMaxServiceRealServers, proxy.DefaultMaxRealServers)
	}
}

// A namespace flood over the fakes, the set limit at 4,096 (ordinary namespaces 3,840):
// 32 Services of 120 ports in tenant-a fill what ordinary namespaces may; kube-system's
// Service is programmed in the reserve; tenant-b's is held, its one Warning Event names
// tenant-a and how much it holds, and kipvs_capacity_top_namespace says the same. Once a
// hog is deleted, the next (incremental) sync programs tenant-b's Service and clears the
// count, without a restart.
func TestNamespaceFloodOverTheFakes(t *testing.T) {
	f, ev, clk := capDaemon(t, func(c *config.Config) { c.Kipvs.MaxSetMembers = 4096 })
	o := objects{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNodeName}}}
	add := func(s *v1.Service, sl *discoveryv1.EndpointSlice) {
		o.services, o.slices = append(o.services, s), append(o.slices, sl)
	}
	for i := range 32 {
		add(capService("tenant-a", fmt.Sprintf("hog%02d", i), fmt.Sprintf("10.96.2.%d", i+1), "", 0, 120))
	}
	f.set(o.deepCopy(), false)
	if err, _ := syncOnce(t, f, clk, true); err != nil {
		t.Fatal(err)
	}
	add(capService("kube-system", "kube-dns", "10.96.0.10", "", 0, 3))
	add(capService("tenant-b", "web", "10.96.3.1", "", 0, 2))
	f.set(o.deepCopy(), false)
	if err, _ := syncOnce(t, f, clk, false); err != nil {
		t.Fatal(err)
	}
	vs := func(addr string) int {
		all, err := f.node.ipvs.Services()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range all {
			if s.Addr.String() == addr {
				n++
			}
		}
		return n
	}
	if n := vs("10.96.0.10"); n != 3 {
		t.Errorf("kube-system/kube-dns has %d virtual servers, want 3", n)
	}
	if n := vs("10.96.3.1"); n != 0 {
		t.Errorf("tenant-b/web has %d virtual servers while the set is full, want 0", n)
	}
	var events []string
	for _, e := range ev.all() {
		if strings.HasPrefix(e, "tenant-b/") {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "SetCapacityExceeded spec.ports: ") ||
		!strings.Contains(events[0], "set cluster-ip is full: namespace tenant-a holds 3,840 of 4,096 members") {
		t.Errorf("events on tenant-b %q, want one SetCapacityExceeded naming tenant-a", events)
	}
	if n := gauge(t, f.d, "kipvs_capacity_top_namespace", "budget", "cluster-ip", "namespace", "tenant-a", "ip_family", "IPv4"); n != 3840 {
		t.Errorf("kipvs_capacity_top_namespace{budget=cluster-ip,namespace=tenant-a} = %v, want 3840", n)
	}
	if n := gauge(t, f.d, "kipvs_services_not_programmed", "reason", "SetCapacityExceeded", "ip_family", "IPv4"); n != 1 {
		t.Errorf("kipvs_services_not_programmed{SetCapacityExceeded} = %v, want 1", n)
	}
	// What kipvs doctor reads: the state document's capacity part.
	c := f.d.State().Families[0].Capacity
	if c == nil || c.NotProgrammed["SetCapacityExceeded"] != 1 || !slices.ContainsFunc(c.Budgets, func(b debugapi.Budget) bool {
		return b.Name == "cluster-ip" && b.TopNamespace == "tenant-a" && b.TopUsed == 3840 && b.Limit == 4096
	}) {
		t.Errorf("state's capacity %+v, want SetCapacityExceeded 1 and cluster-ip held by tenant-a (3,840 of 4,096)", c)
	}

	// A hog goes: the next sync programs tenant-b/web.
	o.services, o.slices = o.services[1:], o.slices[1:]
	f.set(o.deepCopy(), false)
	if err, _ := syncOnce(t, f, clk, false); err != nil {
		t.Fatal(err)
	}
	if n := vs("10.96.3.1"); n != 2 {
		t.Errorf("tenant-b/web has %d virtual servers once a hog went, want 2", n)
	}
	if n := gauge(t, f.d, "kipvs_services_not_programmed", "reason", "SetCapacityExceeded", "ip_family", "IPv4"); n != 0 {
		t.Errorf("kipvs_services_not_programmed{SetCapacityExceeded} once a hog went = %v, want 0", n)
	}
}

// A Service asking for more real servers than the per-Service limit is refused whole over
// the fakes, with its Event and count.
func TestTooManyRealServersOverTheFakes(t *testing.T) {
	f, ev, clk := capDaemon(t, func(c *config.Config) { c.Kipvs.MaxServiceRealServers = 100 })
	o := capObjects(0)
	s, sl := capService("m", "wide", "10.96.0.12", "", 0, 20)
	for i := range 10 {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.8.%d", i+1)},
			NodeName: ptr.To("node-b"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	o.services, o.slices = append(o.services, s), append(o.slices, sl)
	f.set(o.deepCopy(), false)
	if err, _ := syncOnce(t, f, clk, true); err != nil {
		t.Fatal(err)
	}
	got, err := f.node.dump()
	if err != nil {
		t.Fatal(err)
	}
	sameKernel(t, "with the wide Service", got, reference(t, capObjects(0)))
	var events []string
	for _, e := range ev.all() {
		if strings.HasPrefix(e, "m/wide ") {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "m/wide TooManyRealServers endpoints: ") {
		t.Errorf("events %q, want one TooManyRealServers on m/wide", events)
	}
	if n := gauge(t, f.d, "kipvs_services_not_programmed", "reason", "TooManyRealServers", "ip_family", "IPv4"); n != 1 {
		t.Errorf("kipvs_services_not_programmed{TooManyRealServers} = %v, want 1", n)
	}
}
