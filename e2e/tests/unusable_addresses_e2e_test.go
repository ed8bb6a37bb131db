//go:build e2e

package tests

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// A multicast externalIP (239.1.1.1), which the apiserver admits (only link-local
// multicast is refused) but no node can serve: it is skipped with a Warning Event naming
// spec.externalIPs[0] on its Service (no virtual server on it, not bound on kube-ipvs0),
// every sync succeeds, a full sync finds nothing to repair, and the rest is served: that Service's ClusterIP, and a good
// Service next to it (its ClusterIP and externalIP), which gets no Warning Event.
func TestMulticastExternalIP(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("mc", 60, 2)
	mcast := netip.MustParseAddr("239.1.1.1")
	badVIP := netip.MustParseAddr("10.96.22.10")
	goodVIP := netip.MustParseAddr("10.96.22.11")
	goodExt := netip.MustParseAddr("203.0.113.80")
	http := []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	bad := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-multicast-extip", ClusterIP: badVIP, ExternalIPs: []netip.Addr{mcast}, Ports: http})
	s.api.SetEndpoints(t, bad, backends...)
	good := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-good", ClusterIP: goodVIP, ExternalIPs: []netip.Addr{goodExt}, Ports: http})
	s.api.SetEndpoints(t, good, backends...)

	served := []netip.Addr{badVIP, goodVIP, goodExt}
	k := s.startChecked("the usable addresses programmed", harness.IPVSHas(tcp80(served, backends)))
	expectHealthy(t, k)
	expectUnused(t, mcast)
	expectWarning(t, s, bad.Name, "spec.externalIPs[0]", mcast)
	if evs := s.api.Events(t, good.Name, v1.EventTypeWarning); len(evs) > 0 {
		t.Errorf("%s: unexpected Warning Events:\n%s", good.Name, harness.EventSummary(evs))
	}
	for _, ip := range served {
		expectSpread(t, "node -> tcp "+ip.String(), s.topo.NodeClient(), harness.TCP, ap(ip, 80), 4, harness.PodGateway.Addr(), backends...)
	}
	expectNoDrift(t, k)
	expectHealthy(t, k)
}

// Issue 23, finding 4: one Service with 2,000 multicast externalIPs made 2,000 Warning
// Events from one node (through the watches' client), and as many after every restart.
// Now: one Event, counting the 2,000, and one more after a restart; a good Service next to
// it is programmed all the while and /healthz stays 200.
func TestMulticastExternalIPFlood(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("mf", 62, 2)
	badVIP := netip.MustParseAddr("10.96.22.20")
	goodVIP := netip.MustParseAddr("10.96.22.21")
	var mcast []netip.Addr
	for i := range 2000 {
		mcast = append(mcast, netip.AddrFrom4([4]byte{239, 3, byte(i / 250), byte(i%250 + 1)}))
	}
	http := []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	bad := s.api.CreateService(t, harness.ServiceSpec{Name: "i23-flood", ClusterIP: badVIP, ExternalIPs: mcast, Ports: http})
	s.api.SetEndpoints(t, bad, backends...)
	good := s.api.CreateService(t, harness.ServiceSpec{Name: "i23-flood-good", ClusterIP: goodVIP, Ports: http})
	s.api.SetEndpoints(t, good, backends...)

	warnings := func() []string {
		var out []string
		for _, e := range s.api.Events(t, bad.Name, v1.EventTypeWarning) {
			if e.Reason == "UnusableExternalIP" {
				out = append(out, e.Note)
			}
		}
		return out
	}
	for run := 1; run <= 2; run++ {
		k := s.startChecked("the usable addresses programmed", harness.IPVSHas(tcp80([]netip.Addr{badVIP, goodVIP}, backends)))
		expectHealthy(t, k)
		poll.Until(t, programLimit, "the Warning Event of run "+strconv.Itoa(run), func() (bool, string) {
			evs := warnings()
			return len(evs) >= run, strconv.Itoa(len(evs)) + " Events"
		})
		// A full sync later, nothing more was sent.
		expectNoDrift(t, k)
		// 2000 problems (4000 if both families found them).
		evs := warnings()
		n := 0
		if len(evs) > 0 {
			n, _ = strconv.Atoi(strings.Fields(evs[len(evs)-1] + " x")[0])
		}
		if len(evs) != run || n == 0 || n%2000 != 0 || !strings.Contains(evs[len(evs)-1], " problems (at most one Event per ") {
			t.Errorf("run %d: %d UnusableExternalIP Events, want %d, the last counting the 2000 problems; the first notes:\n%s",
				run, len(evs), run, strings.Join(evs[:min(len(evs), 3)], "\n"))
		}
		k.Stop(t)
	}
}

// A link-local LoadBalancer ingress IP (169.254.169.254, the cloud metadata address) next
// to a usable one on the same Service: the link-local one is skipped with a Warning Event
// naming status.loadBalancer.ingress[0] (no virtual server on it, not bound on
// kube-ipvs0), every sync succeeds, a full sync finds nothing to repair, and the Service's other ingress IP and its ClusterIP
// are served.
func TestLinkLocalLoadBalancerIngress(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("ll", 70, 2)
	linkLocal := netip.MustParseAddr("169.254.169.254")
	lbVIP := netip.MustParseAddr("10.96.22.12")
	lbIP := netip.MustParseAddr("203.0.113.81")
	lb := s.api.CreateService(t, harness.ServiceSpec{Name: "i5-linklocal-lb", Type: v1.ServiceTypeLoadBalancer, ClusterIP: lbVIP,
		Ports: []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}})
	lb = s.api.SetLoadBalancerIPs(t, lb, linkLocal, lbIP)
	s.api.SetEndpoints(t, lb, backends...)

	served := []netip.Addr{lbVIP, lbIP}
	k := s.startChecked("the usable addresses programmed", harness.IPVSHas(tcp80(served, backends)))
	expectHealthy(t, k)
	expectUnused(t, linkLocal)
	expectWarning(t, s, lb.Name, "status.loadBalancer.ingress[0]", linkLocal)
	for _, ip := range served {
		expectSpread(t, "node -> tcp "+ip.String(), s.topo.NodeClient(), harness.TCP, ap(ip, 80), 4, harness.PodGateway.Addr(), backends...)
	}
	expectNoDrift(t, k)
	expectHealthy(t, k)
}

// tcp80 is the IPVSHas expectation of a virtual server on TCP port 80 of every ip, with
// every backend at weight 1.
func tcp80(ips []netip.Addr, backends []*harness.Pod) map[string]map[string]int {
	want := map[string]map[string]int{}
	for _, ip := range ips {
		want[vs(harness.TCP, ip, 80)] = harness.Weights(1, backends...)
	}
	return want
}

// expectUnused checks that no IPVS virtual server is on ip and that ip is not bound on
// kube-ipvs0.
func expectUnused(t *testing.T, ip netip.Addr) {
	t.Helper()
	tab, err := harness.ReadIPVS()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tab.Names() {
		if strings.Contains(name, " "+ip.String()+":") {
			t.Errorf("virtual server %s on the unusable address %s", name, ip)
		}
	}
	if d := harness.DumpDummy(t); strings.Contains(d, "\n"+ip.String()+"/") {
		t.Errorf("the unusable address %s is bound on %s:\n%s", ip, harness.DummyName, d)
	}
}

// expectWarning waits for a Warning Event from kipvs on Service svc whose note names
// field and ip.
func expectWarning(t *testing.T, s *scenario, svc, field string, ip netip.Addr) {
	t.Helper()
	poll.Until(t, programLimit, "a Warning Event on "+svc+" naming "+field+" and "+ip.String(), func() (bool, string) {
		evs := s.api.Events(t, svc, v1.EventTypeWarning)
		for _, e := range evs {
			if strings.Contains(e.Note, field) && strings.Contains(e.Note, ip.String()) {
				t.Logf("%s: %s %s", svc, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
}
