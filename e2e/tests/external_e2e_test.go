//go:build e2e

package tests

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Scenario 4: from a client outside the node (its own subnet, routed via the node), a
// LoadBalancer Service with externalTrafficPolicy Cluster is reachable on its NodePort (on
// the node's address facing the client and on its InternalIP), its externalIP, its
// LoadBalancer IP (set through the status subresource after kipvs started) and its
// ClusterIP, over TCP and UDP; the backends see the node's bridge address (masqueraded),
// never the client's.
//
// It runs once per filter backend (eachBackend).
func TestExternalAccess(t *testing.T) { eachBackend(t, testExternalAccess) }

func testExternalAccess(t *testing.T, s *scenario) {
	backends := s.pods("ex", 10, 2)
	ext := s.topo.AddExternal(t)
	vip := netip.MustParseAddr("10.96.4.10")
	extIP := netip.MustParseAddr("203.0.113.10")
	lbIP := netip.MustParseAddr("203.0.113.20")
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "s4-external", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vip, ExternalIPs: []netip.Addr{extIP},
		Ports: []harness.Port{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "udp", Protocol: v1.ProtocolUDP, Port: 80, NodePort: 30080},
		},
	})
	s.api.SetEndpoints(t, svc, backends...)
	nodePort := int(harness.NodePortOf(t, svc, "http"))

	want := map[string]map[string]int{}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		for _, ip := range []netip.Addr{vip, extIP} {
			want[vs(p, ip, 80)] = harness.Weights(1, backends...)
		}
		for _, ip := range []netip.Addr{harness.NodeIP, harness.ExternalNodeIP.Addr(), harness.PodGateway.Addr()} {
			want[vs(p, ip, nodePort)] = harness.Weights(1, backends...)
		}
	}
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s4 programmed", harness.IPVSHas(want))

	// The LoadBalancer IP arrives later, as from a cloud controller.
	s.api.SetLoadBalancerIP(t, svc, lbIP)
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		want[vs(p, lbIP, 80)] = harness.Weights(1, backends...)
	}
	d := k.WaitSynced(t, programLimit, "s4 LoadBalancer IP programmed", harness.IPVSHas(want))
	t.Logf("LoadBalancer IP %s programmed %.1fs after the status update", lbIP, d.Seconds())

	c := harness.In(ext)
	targets := []struct {
		what string
		addr netip.AddrPort
	}{
		{"NodePort on the node's address facing the client", ap(harness.ExternalNodeIP.Addr(), nodePort)},
		{"NodePort on the node's InternalIP", ap(harness.NodeIP, nodePort)},
		{"externalIP", ap(extIP, 80)},
		{"LoadBalancer IP", ap(lbIP, 80)},
		{"ClusterIP", ap(vip, 80)},
	}
	for _, tg := range targets {
		for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
			expectSpread(t, "external -> "+string(p)+" "+tg.what+" "+tg.addr.String(), c, p, tg.addr, 4, harness.PodGateway.Addr(), backends...)
		}
	}
}
