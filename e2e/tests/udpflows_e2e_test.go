//go:build e2e

package tests

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, stale UDP flows when a UDP ClusterIP gains its first endpoint: a flow to the VIP
// recorded while the Service had no endpoint (here planted in the kernel's conntrack table
// with conntrack -I, answered by the VIP itself and good for 10 minutes) is deleted once
// kipvs programs the first endpoint, so the client's next datagram from that port is
// scheduled to the endpoint; a flow to another address stays.
func TestFirstUDPEndpointClearsStaleFlows(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("uf", 10, 1)
	client := s.topo.AddPod(t, "ufc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.21.10")
	other := netip.MustParseAddr("10.96.21.99")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-udp-first", ClusterIP: vip})
	k := s.startKipvs()
	udpVS := vs(harness.UDP, vip, 80)
	k.WaitSynced(t, programLimit, "UDP ClusterIP without endpoints", harness.IPVSHas(map[string]map[string]int{udpVS: {}}))

	plant := func(dst netip.Addr, sport string) {
		t.Helper()
		harness.MustRun(t, "conntrack", "-I", "-p", "udp", "-s", client.IP.String(), "-d", dst.String(),
			"--sport", sport, "--dport", "80", "--reply-src", dst.String(), "--reply-dst", client.IP.String(),
			"--reply-port-src", "80", "--reply-port-dst", sport, "--timeout", "600")
	}
	flows := func(dst netip.Addr) []string {
		t.Helper()
		out := harness.MustRun(t, "conntrack", "-L", "-p", "udp", "--orig-dst", dst.String(), "--orig-port-dst", "80")
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		return lines
	}
	plant(vip, "40001")
	plant(other, "40002")
	if len(flows(vip)) != 1 || len(flows(other)) != 1 {
		t.Fatalf("planted flows not in the table:\n%s\n%s", strings.Join(flows(vip), "\n"), strings.Join(flows(other), "\n"))
	}

	s.api.SetEndpoints(t, svc, backends...)
	k.WaitSynced(t, programLimit, "first endpoint programmed", harness.IPVSHas(map[string]map[string]int{udpVS: harness.Weights(1, backends...)}))
	d := poll.Until(t, programLimit, "the stale flow to "+vip.String()+" deleted", func() (bool, string) {
		f := flows(vip)
		return len(f) == 0, strings.Join(f, "\n")
	})
	t.Logf("stale flow to %s deleted %.1fs after the first endpoint was programmed", vip, d.Seconds())
	if f := flows(other); len(f) != 1 {
		t.Errorf("the flow to %s, which is no Service's, was touched:\n%s", other, strings.Join(f, "\n"))
	}
	expectSpread(t, "pod -> udp ClusterIP after the first endpoint", harness.In(&client.NS), harness.UDP, ap(vip, 80), 3, client.IP, backends...)
	harness.MustRun(t, "conntrack", "-D", "-p", "udp", "--orig-dst", other.String())
}
