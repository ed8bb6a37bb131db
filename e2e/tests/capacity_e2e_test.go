//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// hostileLimit bounds the waits that involve the 70,000-member Service: the apiserver
// stores and kipvs decodes a 7,000-range Service under TCG.
const hostileLimit = 3 * time.Minute

// Issue 23, finding 2, on the real kernel and a real apiserver, with kipvs's default limits:
// a tenant's LoadBalancer Service with 7,000 loadBalancerSourceRanges on 10 ports (70,000
// KUBE-LOAD-BALANCER-SOURCE-CIDR members, beyond ipset's default maxelem of 65,536) next to
// a ClusterIP Service and a LoadBalancer Service with a short allow list. The hostile
// Service is refused whole (Warning Event TooManySetMembers naming
// spec.loadBalancerSourceRanges, kipvs_services_not_programmed{reason="TooManySetMembers"}
// 1): the kernel state stays exactly what it was before it arrived, the other Services stay
// served (a request to the ClusterIP reaches its backends through IPVS; the other LB's
// allow list is in the set), /healthz stays 200 through full syncs, and once the hostile
// Service is deleted the first sync that sees it leaves the kernel equal to before.
func TestHostileSourceRangesLeaveOthersServed(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("cp", 50, 2)
	plainIP := netip.MustParseAddr("10.96.23.10")
	plain := s.api.CreateService(t, harness.ServiceSpec{Name: "i23-plain", ClusterIP: plainIP})
	s.api.SetEndpoints(t, plain, backends...)

	lbIP := netip.MustParseAddr("203.0.113.61")
	lbRanges := []string{"192.0.2.0/24", "198.51.100.0/24", "10.20.0.0/16"}
	lb := s.api.CreateService(t, harness.ServiceSpec{Name: "i23-lb", Type: v1.ServiceTypeLoadBalancer,
		Ports:  []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		Mutate: func(svc *v1.Service) { svc.Spec.LoadBalancerSourceRanges = lbRanges }})
	s.api.SetEndpoints(t, lb, backends...)
	s.api.SetLoadBalancerIP(t, lb, lbIP)

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "the ordinary Services programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, plainIP, 80): harness.Weights(1, backends...),
		vs(harness.UDP, plainIP, 80): harness.Weights(1, backends...),
		vs(harness.TCP, lbIP, 80):    harness.Weights(1, backends...),
	}))
	before := harness.ReadDump(t)

	hostileIP := netip.MustParseAddr("203.0.113.60")
	const nRanges, nPorts = 7000, 10
	ranges := make([]string, nRanges)
	for i := range ranges {
		ranges[i] = fmt.Sprintf("11.%d.%d.0/24", i/256, i%256)
	}
	ports := make([]harness.Port, nPorts)
	for i := range ports {
		ports[i] = harness.Port{Name: fmt.Sprintf("p%d", i+1), Protocol: v1.ProtocolTCP, Port: int32(8001 + i)}
	}
	start := time.Now()
	hostile := s.api.CreateService(t, harness.ServiceSpec{Name: "i23-hostile", Type: v1.ServiceTypeLoadBalancer, Ports: ports,
		Mutate: func(svc *v1.Service) { svc.Spec.LoadBalancerSourceRanges = ranges }})
	s.api.SetEndpoints(t, hostile, backends...)
	s.api.SetLoadBalancerIP(t, hostile, hostileIP)
	t.Logf("created %s: %d loadBalancerSourceRanges x %d ports, ingress %s (%.1fs)", hostile.Name, nRanges, nPorts, hostileIP, time.Since(start).Seconds())
	hostileCIP := harness.ClusterIPOf(t, hostile)

	refused := func(m harness.Metrics) float64 {
		return m.Get("kipvs_services_not_programmed", `reason="TooManySetMembers"`, `ip_family="IPv4"`)
	}
	k.Until(t, hostileLimit, "Warning Event TooManySetMembers on "+hostile.Name, func() (bool, string) {
		evs := s.api.Events(t, hostile.Name, v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "TooManySetMembers" && strings.Contains(e.Note, "spec.loadBalancerSourceRanges") {
				t.Logf("%s: Warning %s: %s", hostile.Name, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
	k.WaitSynced(t, hostileLimit, `kipvs_services_not_programmed{reason="TooManySetMembers",ip_family="IPv4"} 1`, func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		if n := refused(m); n != 1 {
			return false, fmt.Sprintf("kipvs_services_not_programmed TooManySetMembers IPv4 = %v", n)
		}
		return true, ""
	})
	t.Logf(`kipvs_services_not_programmed{reason="TooManySetMembers",ip_family="IPv4"} = 1, %.1fs after the hostile Service was created`, time.Since(start).Seconds())

	// A full sync after the refusal (the periodic one) must succeed too.
	fullCount := func() float64 {
		return k.Metrics(t).Get("kubeproxy_sync_full_proxy_rules_duration_seconds_count", `ip_family="IPv4"`)
	}
	full := fullCount()
	k.Until(t, hostileLimit, "a full sync after the refusal", func() (bool, string) {
		if n := fullCount(); n <= full {
			return false, fmt.Sprintf("full syncs: %v", n)
		}
		return true, ""
	})
	healthyAt(t, k, "with the hostile Service refused")

	tab, err := harness.ReadIPVS()
	if err != nil {
		t.Fatal(err)
	}
	for name := range tab {
		if strings.Contains(name, " "+hostileIP.String()+":") || strings.Contains(name, " "+hostileCIP.String()+":") {
			t.Errorf("virtual server %s of the refused Service %s", name, hostile.Name)
		}
	}
	during := harness.ReadDump(t)
	sameKernel(t, "with the hostile Service refused", before, during)
	for _, r := range lbRanges {
		member := fmt.Sprintf("add KUBE-LOAD-BALANCER-SOURCE-CIDR %s,tcp:80,%s", lbIP, r)
		if !strings.Contains(during.IPSets, member+"\n") {
			t.Errorf("%s's allow list lost %q:\n%s", lb.Name, member, strings.Join(linesWith(during.IPSets, "KUBE-LOAD-BALANCER-SOURCE-CIDR"), "\n"))
		}
	}
	t.Logf("%s's allow list in the kernel:\n%s", lb.Name, strings.Join(linesWith(during.IPSets, "KUBE-LOAD-BALANCER-SOURCE-CIDR "+lbIP.String()), "\n"))
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectSpread(t, "node -> "+string(p)+" "+plain.Name, s.topo.NodeClient(), p, ap(plainIP, 80), 4, harness.PodGateway.Addr(), backends...)
	}

	syncs := func() float64 {
		return k.Metrics(t).Get("kubeproxy_sync_proxy_rules_duration_seconds_count", `ip_family="IPv4"`)
	}
	n0 := syncs()
	s.api.DeleteService(t, hostile.Name)
	k.WaitSynced(t, programLimit, "the deletion of "+hostile.Name+" synced", func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		if n := refused(m); n != 0 {
			return false, fmt.Sprintf("kipvs_services_not_programmed TooManySetMembers IPv4 = %v", n)
		}
		return true, ""
	})
	// No polling: the sync that saw the deletion must have left the kernel as before.
	sameKernel(t, "after the first sync that saw the deletion", before, harness.ReadDump(t))
	t.Logf("%s deleted: kernel as before once the first sync that saw the deletion ended (%v sync(s) ran: the Service's and its EndpointSlice's deletions)", hostile.Name, syncs()-n0)
	healthyAt(t, k, "after the deletion")
}

// healthyAt is expectHealthy (/healthz 200, no failed sync), with the answer logged.
func healthyAt(t *testing.T, k *harness.Kipvs, when string) {
	t.Helper()
	expectHealthy(t, k)
	code, body, err := harness.Healthz()
	t.Logf("%s: /healthz HTTP %d %v: %s", when, code, err, strings.TrimSpace(body))
}

// sameKernel fails the test when the kernel state kipvs owns differs between two dumps,
// showing the lines only one of them has.
func sameKernel(t *testing.T, when string, before, after harness.Dump) {
	t.Helper()
	b, a := strings.Split(before.String(), "\n"), strings.Split(after.String(), "\n")
	only := func(x, y []string) []string {
		in := make(map[string]bool, len(y))
		for _, l := range y {
			in[l] = true
		}
		var out []string
		for _, l := range x {
			if !in[l] {
				out = append(out, l)
			}
		}
		return out
	}
	gone, added := only(b, a), only(a, b)
	if len(gone)+len(added) > 0 {
		t.Errorf("%s: the kernel state differs from before the hostile Service (%d lines gone, %d added)\n--- gone (first 20) ---\n%s\n--- added (first 20) ---\n%s",
			when, len(gone), len(added), strings.Join(gone[:min(20, len(gone))], "\n"), strings.Join(added[:min(20, len(added))], "\n"))
	}
}
