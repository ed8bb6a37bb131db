//go:build e2e

package tests

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Scenario 1: a ClusterIP Service with TCP and UDP ports over three backends, reached from
// the node and from a pod. Every backend answers; the node's connections are masqueraded
// (the backend sees the node's bridge address), the pod's are not (it is in the cluster
// CIDR).
//
// It runs once per filter backend (eachBackend).
func TestClusterIPFromNodeAndPod(t *testing.T) { eachBackend(t, testClusterIPFromNodeAndPod) }

func testClusterIPFromNodeAndPod(t *testing.T, s *scenario) {
	backends := s.pods("be", 10, 3)
	client := s.topo.AddPod(t, "client", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.1.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s1-clusterip", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, backends...)

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s1 programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, backends...),
		vs(harness.UDP, vip, 80): harness.Weights(1, backends...),
	}))

	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectSpread(t, "node -> "+string(p)+" ClusterIP", s.topo.NodeClient(), p, ap(vip, 80), 9, harness.PodGateway.Addr(), backends...)
		expectSpread(t, "pod -> "+string(p)+" ClusterIP", harness.In(&client.NS), p, ap(vip, 80), 9, client.IP, backends...)
	}
}

// Scenario 3: hairpin. A pod reaching its own Service is eventually answered by itself,
// and then sees the connection coming from the node's bridge address (KUBE-LOOP-BACK
// masquerade), not from its own address, or it would answer itself directly and the
// connection would break.
//
// It runs once per filter backend (eachBackend).
func TestHairpin(t *testing.T) { eachBackend(t, testHairpin) }

func testHairpin(t *testing.T, s *scenario) {
	backends := s.pods("hp", 10, 3)
	vip := netip.MustParseAddr("10.96.3.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s3-hairpin", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, backends...)

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s3 programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, backends...),
		vs(harness.UDP, vip, 80): harness.Weights(1, backends...),
	}))

	self := backends[0]
	c := harness.In(&self.NS)
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		hit := false
		var others []string
		// Round robin over three backends reaches every one within three new flows; allow
		// more in case other traffic moved the scheduler on.
		for i := 0; i < 12 && !hit; i++ {
			a, err := c.Do(p, ap(vip, 80))
			if err != nil {
				t.Fatalf("%s: %s -> its own Service: %v", p, self.PodName, err)
			}
			if a.Backend != self.PodName {
				others = append(others, a.Backend)
				continue
			}
			hit = true
			switch a.Source.Addr() {
			case self.IP:
				t.Errorf("%s: %s answered itself and saw its own address %s as the client: hairpin traffic not masqueraded", p, self.PodName, self.IP)
			case harness.PodGateway.Addr():
				t.Logf("%s: %s reached itself through %s after %d other answers %v; it saw the client as %s", p, self.PodName, vip, len(others), others, a.Source)
			default:
				t.Errorf("%s: %s saw its hairpin connection from %s, want the node's bridge address %s", p, self.PodName, a.Source.Addr(), harness.PodGateway.Addr())
			}
		}
		if !hit {
			t.Errorf("%s: %s never reached itself through its Service in 12 requests (answers: %v)", p, self.PodName, others)
		}
	}
}
