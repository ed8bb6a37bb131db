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

// Issue 4, loadBalancerSourceRanges: with the range 192.168.100.2/32 the external client
// at that address gets through to the LoadBalancer IP, a second external client
// (192.168.101.2) is dropped (its connection times out), and so is the node itself, since
// no range covers a node address (KUBE-IPVS-OUT-FILTER). Adding the node's InternalIP to the
// ranges lets the node in (and removes its OUT-FILTER rule); the clients keep their fate.
//
// It runs once per filter backend (eachBackend).
func TestLoadBalancerSourceRanges(t *testing.T) { eachBackend(t, testLoadBalancerSourceRanges) }

func testLoadBalancerSourceRanges(t *testing.T, s *scenario) {
	backends := s.pods("sr", 10, 2)
	allowed := s.topo.AddExternal(t)
	other := s.topo.AddClient(t, "ext2", "vx-ext2", netip.MustParsePrefix("192.168.101.1/24"), netip.MustParsePrefix("192.168.101.2/24"))
	vip := netip.MustParseAddr("10.96.16.10")
	lbIP := netip.MustParseAddr("203.0.113.50")
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i4-sourceranges", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vip,
		Ports: []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		Mutate: func(svc *v1.Service) {
			svc.Spec.LoadBalancerSourceRanges = []string{harness.ExternalClientIP.Addr().String() + "/32"}
		},
	})
	svc = s.api.SetLoadBalancerIP(t, svc, lbIP)
	s.api.SetEndpoints(t, svc, backends...)
	k := s.startKipvs()
	lbVS := vs(harness.TCP, lbIP, 80)
	k.WaitSynced(t, programLimit, "source ranges programmed", func() (bool, string) {
		if ok, why := harness.IPVSHas(map[string]map[string]int{lbVS: harness.Weights(1, backends...)})(); !ok {
			return false, why
		}
		return true, ""
	})

	short := 2 * time.Second
	clients := []struct {
		who    string
		c      harness.Client
		passes [2]bool // in phase 1 (client range only), in phase 2 (node address added)
	}{
		{"client 192.168.100.2 (in range)", harness.In(allowed).WithTimeout(short), [2]bool{true, true}},
		{"client 192.168.101.2 (not in range)", harness.In(other).WithTimeout(short), [2]bool{false, false}},
		{"node (no range covers a node address, then its InternalIP added)", s.topo.NodeClient().WithTimeout(short), [2]bool{false, true}},
	}
	expect := func(phase int) {
		t.Helper()
		for _, c := range clients {
			for i := range 2 {
				a, err := c.c.HTTP(ap(lbIP, 80))
				switch {
				case c.passes[phase] && err != nil:
					t.Errorf("phase %d: %s -> LoadBalancer IP: %v, want an answer", phase+1, c.who, err)
				case !c.passes[phase] && err == nil:
					t.Errorf("phase %d: %s -> LoadBalancer IP answered by %s, want the packets dropped", phase+1, c.who, a)
				case !c.passes[phase] && !harness.IsTimeout(err):
					t.Errorf("phase %d: %s -> LoadBalancer IP: %v, want a timeout (dropped), not a refusal", phase+1, c.who, err)
				case i == 0 && err == nil:
					t.Logf("phase %d: %s -> LoadBalancer IP: answered by %s", phase+1, c.who, a)
				case i == 0:
					t.Logf("phase %d: %s -> LoadBalancer IP: %v (dropped)", phase+1, c.who, err)
				}
			}
		}
	}
	if drops, rules := outFilterDrops(t, s.backend, lbIP, 80); !drops {
		t.Errorf("no range covers a node address but the out filter does not drop the node's packets to %s:80:\n%s", lbIP, rules)
	}
	expect(0)

	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) {
		svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, harness.NodeIP.String()+"/32")
	})
	k.WaitSynced(t, programLimit, "node address added to the source ranges", func() (bool, string) {
		if drops, _ := outFilterDrops(t, s.backend, lbIP, 80); drops {
			return false, "the out filter still drops the node's packets to " + lbIP.String()
		}
		return true, ""
	})
	expect(1)
}

// outFilterDrops reports whether the backend's out filter (KUBE-IPVS-OUT-FILTER, the
// nftables backend's chain ipvs-out-filter) drops the node's own TCP packets to the IPv4
// virtual server ip:port, with the chain's rules.
func outFilterDrops(t *testing.T, b filterBackend, ip netip.Addr, port int) (bool, string) {
	t.Helper()
	if b == nftablesBackend {
		rules := harness.MustRun(t, "nft", "list", "chain", "ip", "kipvs", "ipvs-out-filter")
		rule := fmt.Sprintf("ip saddr %s meta l4proto tcp ct original ip daddr %s ct original proto-dst %d drop", ip, ip, port)
		return strings.Contains(rules, rule+"\n"), rules
	}
	rules := harness.DumpRules(t, "iptables-save")
	rule := fmt.Sprintf("-A KUBE-IPVS-OUT-FILTER -s %s/32 -m ipvs --vproto 6 --vaddr %s --vport %d -j DROP", ip, ip, port)
	return strings.Contains(rules, rule), rules
}
