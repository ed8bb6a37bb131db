//go:build e2e

package tests

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Issue 4, topology-aware routing with real packets: a Service with trafficDistribution
// PreferClose sends this node's traffic only to the endpoints hinted for the node's zone
// (topology.kubernetes.io/zone on its Node); the node moving to another zone moves the
// traffic with it; hints are followed whatever the Service says (kube-proxy v1.34 does
// so; the EndpointSlice controller writes them only for Services that ask), and hints that
// are incomplete give every endpoint.
func TestTopologyAwareRouting(t *testing.T) {
	s := newScenario(t)
	pods := s.pods("tz", 10, 3)
	p1, p2, p3 := pods[0], pods[1], pods[2]
	client := s.topo.AddPod(t, "tzc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	s.api.LabelNode(t, v1.LabelTopologyZone, "zone-a")
	vip := netip.MustParseAddr("10.96.19.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-topology", ClusterIP: vip, Mutate: func(svc *v1.Service) {
		svc.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
	}})
	hinted := []harness.Endpoint{
		harness.ReadyEP(p1).InZones("zone-a"),
		harness.ReadyEP(p2).On(otherNode).InZones("zone-a"),
		harness.ReadyEP(p3).On(otherNode).InZones("zone-b"),
	}
	s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, hinted...)
	k := s.startKipvs()
	tcpVS, udpVS := vs(harness.TCP, vip, 80), vs(harness.UDP, vip, 80)
	// Draining TCP real servers (weight 0) of earlier phases are not counted.
	serving := func(what string, want ...*harness.Pod) {
		t.Helper()
		k.WaitSynced(t, programLimit, what, harness.IPVSServing(map[string]map[string]int{
			tcpVS: harness.Weights(1, want...), udpVS: harness.Weights(1, want...),
		}))
		c := harness.In(&client.NS)
		for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
			expectSpread(t, what+": pod -> "+string(p)+" ClusterIP", c, p, ap(vip, 80), 4*len(want), client.IP, want...)
		}
	}
	serving("PreferClose, node in zone-a", p1, p2)

	s.api.LabelNode(t, v1.LabelTopologyZone, "zone-b")
	serving("PreferClose, node moved to zone-b", p3)

	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) { svc.Spec.TrafficDistribution = nil })
	// As in kube-proxy v1.34, the hints decide, not the Service field: the EndpointSlice
	// controller removes them when the Service stops asking (this test writes its own).
	serving("no trafficDistribution, hints still there: followed", p3)

	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) {
		svc.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
	})
	serving("PreferClose again, node in zone-b", p3)
	incomplete := append([]harness.Endpoint(nil), hinted...)
	incomplete[0].Zones = nil
	s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, incomplete...)
	serving("PreferClose with an endpoint without hints: every endpoint", p1, p2, p3)
}
