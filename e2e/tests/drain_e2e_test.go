//go:build e2e

package tests

import (
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, graceful termination across a restart and back: an endpoint that leaves while a
// client holds an established connection to it drains at weight 0 (new connections go
// elsewhere, the held one keeps working); kipvs restarts and rebuilds the drain from the
// kernel (the real server is neither deleted, which would cut the connection, nor put
// back to weight 1); the endpoint returns and its real server is restored to weight 1 in
// place, the held connection still working throughout.
func TestDrainRestoredAndRebuiltAfterRestart(t *testing.T) {
	s := newScenario(t)
	pods := s.pods("gd", 10, 2)
	a, b := pods[0], pods[1]
	client := s.topo.AddPod(t, "gdc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.18.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-drain", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, a, b)
	// A graceful period far longer than the test: only an idle real server ends a drain.
	args := []string{"--kipvs-graceful-period", "30m"}
	k := s.startKipvs(args...)
	tcpVS, udpVS := vs(harness.TCP, vip, 80), vs(harness.UDP, vip, 80)
	k.WaitSynced(t, programLimit, "drain: both pods programmed", harness.IPVSHas(map[string]map[string]int{
		tcpVS: harness.Weights(1, a, b), udpVS: harness.Weights(1, a, b),
	}))

	c := harness.In(&client.NS)
	var held *harness.Held
	for i := 0; i < 6 && held == nil; i++ {
		h, err := c.Hold(ap(vip, 80))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		if h.Answer.Backend == a.PodName {
			held = h
		}
	}
	if held == nil {
		t.Fatalf("no held connection reached %s in 6 tries", a.PodName)
	}
	ping := func(phase string) {
		t.Helper()
		if err := held.Ping(); err != nil {
			t.Fatalf("%s: the connection held to %s was cut: %v", phase, a.PodName, err)
		}
	}
	ping("both endpoints ready")

	draining := harness.Weights(1, b)
	draining[a.Endpoint().String()] = 0
	s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, harness.ReadyEP(b))
	k.WaitSynced(t, programLimit, a.PodName+" left: TCP real server draining", harness.IPVSHas(map[string]map[string]int{
		tcpVS: draining, udpVS: harness.Weights(1, b),
	}))
	ping(a.PodName + " draining")
	expectSpread(t, "new connections while "+a.PodName+" drains", c, harness.TCP, ap(vip, 80), 6, client.IP, b)

	k.Stop(t)
	k = s.startKipvs(args...)
	// The drain must survive kipvs's adoption and a periodic full sync after the restart.
	full := k.Metrics(t).Get("kipvs_sync_full_total", `ip_family="IPv4"`)
	limit, _ := fullSyncLimit(t, k)
	poll.Until(t, limit, "a periodic full sync after the restart", func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		return m.Get("kipvs_sync_full_total", `ip_family="IPv4"`) > full, "no full sync yet"
	})
	k.WaitSynced(t, programLimit, "drain rebuilt after the restart", harness.IPVSHas(map[string]map[string]int{
		tcpVS: draining, udpVS: harness.Weights(1, b),
	}))
	ping("after kipvs restarted")
	expectSpread(t, "new connections after the restart", c, harness.TCP, ap(vip, 80), 6, client.IP, b)

	s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, harness.ReadyEP(a), harness.ReadyEP(b))
	k.WaitSynced(t, programLimit, a.PodName+" back: real server restored to weight 1", harness.IPVSHas(map[string]map[string]int{
		tcpVS: harness.Weights(1, a, b), udpVS: harness.Weights(1, a, b),
	}))
	ping(a.PodName + " restored")
	expectSpread(t, "new connections after "+a.PodName+" returned", c, harness.TCP, ap(vip, 80), 8, client.IP, a, b)
}
