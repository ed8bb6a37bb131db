//go:build e2e

package tests

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// On the real kernel and a real apiserver: a tenant's Service claiming another pod's
// address as an external IP, on the port that pod serves, is refused (ExternalIPInPodCIDR,
// naming spec.externalIPs[0]): the address is not bound on kube-ipvs0 and has no virtual
// server, and the node's traffic to that pod still reaches the pod, not the tenant's. Its
// claim on a neighbour's address (the external client's, on the node's link vx-ext, read
// from the kernel's routes) is refused too (ExternalIPOnNodeLink, spec.externalIPs[1]).
func TestExternalIPOnPodAddressRefused(t *testing.T) {
	s := newScenario(t)
	victim := s.pods("vi", 50, 1)[0]
	evilPods := s.pods("ev", 60, 1)
	s.topo.AddExternal(t)
	neighbour := harness.ExternalClientIP.Addr()
	k := s.startKipvs()
	expectSpread(t, "node -> the victim pod before the claim", s.topo.NodeClient(), harness.TCP, victim.Endpoint(), 2, harness.PodGateway.Addr(), victim)

	ports := []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: harness.EchoPort}}
	evil := s.api.CreateService(t, harness.ServiceSpec{Name: "a-tenant-podip", Ports: ports, ExternalIPs: []netip.Addr{victim.IP, neighbour}})
	s.api.SetEndpoints(t, evil, evilPods...)
	k.WaitSynced(t, programLimit, "the tenant's cluster IP programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, harness.ClusterIPOf(t, evil), harness.EchoPort): harness.Weights(1, evilPods...),
	}))
	// The sync that programmed the tenant's cluster IP has decided its external IP.
	d := harness.ReadDump(t)
	for _, a := range []netip.Addr{victim.IP, neighbour} {
		if l := linesWith(d.IPVS, "-A -t "+a.String()+":"); len(l) > 0 {
			t.Errorf("a virtual server on %s:\n%s", a, strings.Join(l, "\n"))
		}
		if l := linesWith(d.Dummy, a.String()+"/"); len(l) > 0 {
			t.Errorf("%s is bound on %s: %v", a, harness.DummyName, l)
		}
	}
	expectSpread(t, "node -> the victim pod after the claim", s.topo.NodeClient(), harness.TCP, victim.Endpoint(), 4, harness.PodGateway.Addr(), victim)
	for _, c := range []struct {
		reason, field string
		addr          netip.Addr
	}{{"ExternalIPInPodCIDR", "spec.externalIPs[0]", victim.IP}, {"ExternalIPOnNodeLink", "spec.externalIPs[1]", neighbour}} {
		poll.Until(t, programLimit, "Warning Event "+c.reason+" on "+evil.Name, func() (bool, string) {
			evs := s.api.Events(t, evil.Name, v1.EventTypeWarning)
			for _, e := range evs {
				if e.Reason == c.reason && strings.HasPrefix(e.Note, c.field) && strings.Contains(e.Note, c.addr.String()) {
					t.Logf("%s: %s %s", evil.Name, e.Reason, e.Note)
					return true, ""
				}
			}
			return false, "events: " + harness.EventSummary(evs)
		})
	}
}
