//go:build e2e

package tests

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Addresses the apiserver admits but no node can serve: a multicast externalIP
// (239.1.1.1) and a link-local LoadBalancer ingress IP (169.254.169.254, the cloud
// metadata address). Each is skipped with a Warning Event naming its field
// (spec.externalIPs[0], status.loadBalancer.ingress[0]): no virtual server on it, not
// bound on kube-ipvs0. Every sync succeeds, and the rest is served: the bad Services'
// ClusterIPs, the LoadBalancer's other ingress IP, and a good Service next to them (its
// ClusterIP and externalIP).
func TestUnusableServiceAddresses(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("ua", 60, 2)
	mcast := netip.MustParseAddr("239.1.1.1")
	linkLocal := netip.MustParseAddr("169.254.169.254")
	mcastVIP := netip.MustParseAddr("10.96.22.10")
	goodVIP := netip.MustParseAddr("10.96.22.11")
	goodExt := netip.MustParseAddr("203.0.113.80")
	lbVIP := netip.MustParseAddr("10.96.22.12")
	lbIP := netip.MustParseAddr("203.0.113.81")
	http := []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}

	bad := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-multicast-extip", ClusterIP: mcastVIP, ExternalIPs: []netip.Addr{mcast}, Ports: http})
	s.api.SetEndpoints(t, bad, backends...)
	good := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-good", ClusterIP: goodVIP, ExternalIPs: []netip.Addr{goodExt}, Ports: http})
	s.api.SetEndpoints(t, good, backends...)
	lb := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-linklocal-lb", Type: v1.ServiceTypeLoadBalancer, ClusterIP: lbVIP, Ports: http})
	lb = s.api.SetLoadBalancerIPs(t, lb, linkLocal, lbIP)
	s.api.SetEndpoints(t, lb, backends...)

	served := []netip.Addr{mcastVIP, goodVIP, goodExt, lbVIP, lbIP}
	all := harness.Weights(1, backends...)
	want := map[string]map[string]int{}
	for _, ip := range served {
		want[vs(harness.TCP, ip, 80)] = all
	}
	k := s.startChecked("the usable addresses programmed", harness.IPVSHas(want))
	expectHealthy(t, k)

	tab, err := harness.ReadIPVS()
	if err != nil {
		t.Fatal(err)
	}
	dummy := harness.DumpDummy(t)
	for _, ip := range []netip.Addr{mcast, linkLocal} {
		for _, name := range tab.Names() {
			if strings.Contains(name, " "+ip.String()+":") {
				t.Errorf("virtual server %s on the unusable address %s", name, ip)
			}
		}
		if strings.Contains(dummy, "\n"+ip.String()+"/") {
			t.Errorf("the unusable address %s is bound on %s:\n%s", ip, harness.DummyName, dummy)
		}
	}
	for _, c := range []struct {
		svc, field string
		ip         netip.Addr
	}{
		{bad.Name, "spec.externalIPs[0]", mcast},
		{lb.Name, "status.loadBalancer.ingress[0]", linkLocal},
	} {
		harness.Poll(t, programLimit, "a Warning Event on "+c.svc+" naming "+c.field, func() (bool, string) {
			evs := s.api.Events(t, c.svc, v1.EventTypeWarning)
			for _, e := range evs {
				if strings.Contains(e.Note, c.field) && strings.Contains(e.Note, c.ip.String()) {
					t.Logf("%s: %s %s", c.svc, e.Reason, e.Note)
					return true, ""
				}
			}
			return false, "events: " + harness.EventSummary(evs)
		})
	}
	if evs := s.api.Events(t, good.Name, v1.EventTypeWarning); len(evs) > 0 {
		t.Errorf("%s: unexpected Warning Events:\n%s", good.Name, harness.EventSummary(evs))
	}
	for _, ip := range served {
		expectSpread(t, "node -> tcp "+ip.String(), s.topo.NodeClient(), harness.TCP, ap(ip, 80), 4, harness.PodGateway.Addr(), backends...)
	}
	expectHealthy(t, k)
}
