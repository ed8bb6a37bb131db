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
// server, and the node's traffic to that pod still reaches the pod, not the tenant's.
func TestExternalIPOnPodAddressRefused(t *testing.T) {
	s := newScenario(t)
	victim := s.pods("vi", 50, 1)[0]
	evilPods := s.pods("ev", 60, 1)
	k := s.startKipvs()
	expectSpread(t, "node -> the victim pod before the claim", s.topo.NodeClient(), harness.TCP, victim.Endpoint(), 2, harness.PodGateway.Addr(), victim)

	ports := []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: harness.EchoPort}}
	evil := s.api.CreateService(t, harness.ServiceSpec{Name: "a-tenant-podip", Ports: ports, ExternalIPs: []netip.Addr{victim.IP}})
	s.api.SetEndpoints(t, evil, evilPods...)
	k.WaitSynced(t, programLimit, "the tenant's cluster IP programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, harness.ClusterIPOf(t, evil), harness.EchoPort): harness.Weights(1, evilPods...),
	}))
	// The sync that programmed the tenant's cluster IP has decided its external IP.
	d := harness.ReadDump(t)
	if l := linesWith(d.IPVS, "-A -t "+victim.IP.String()+":"); len(l) > 0 {
		t.Errorf("a virtual server on the victim pod's address:\n%s", strings.Join(l, "\n"))
	}
	if l := linesWith(d.Dummy, victim.IP.String()+"/"); len(l) > 0 {
		t.Errorf("the victim pod's address is bound on %s: %v", harness.DummyName, l)
	}
	expectSpread(t, "node -> the victim pod after the claim", s.topo.NodeClient(), harness.TCP, victim.Endpoint(), 4, harness.PodGateway.Addr(), victim)
	poll.Until(t, programLimit, "Warning Event ExternalIPInPodCIDR on "+evil.Name, func() (bool, string) {
		evs := s.api.Events(t, evil.Name, v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "ExternalIPInPodCIDR" && strings.HasPrefix(e.Note, "spec.externalIPs[0]") && strings.Contains(e.Note, victim.IP.String()) {
				t.Logf("%s: %s %s", evil.Name, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
}
