//go:build e2e

package tests

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, healthCheckNodePort taken by another process: kipvs reports it as a Warning
// Event FailedToStartServiceHealthcheck on the Service and goes on (the daemon keeps
// running and the Service's traffic is served); once the port is free a later sync opens
// the health check; when the Service goes, its health check closes.
func TestHealthCheckPortConflict(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("hp", 10, 1)
	ext := s.topo.AddExternal(t)
	vip := netip.MustParseAddr("10.96.20.10")
	lbIP := netip.MustParseAddr("203.0.113.42")
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i4-hc-conflict", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vip,
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
	})
	hcPort := int(svc.Spec.HealthCheckNodePort)
	if hcPort == 0 {
		t.Fatalf("the apiserver allocated no healthCheckNodePort")
	}
	svc = s.api.SetLoadBalancerIP(t, svc, lbIP)
	s.api.SetEndpoints(t, svc, backends...)

	// Another process holds the port on every address, as a host daemon would.
	squatter, err := net.Listen("tcp", ":"+strconv.Itoa(hcPort))
	if err != nil {
		t.Fatalf("hold port %d: %v", hcPort, err)
	}
	defer squatter.Close()

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "programmed with the health check port taken", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, lbIP, 80): harness.Weights(1, backends...),
	}))
	poll.Until(t, programLimit, "Warning Event FailedToStartServiceHealthcheck", func() (bool, string) {
		evs := s.api.Events(t, svc.Name, v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "FailedToStartServiceHealthcheck" && strings.Contains(e.Note, strconv.Itoa(hcPort)) {
				t.Logf("%s: %s %s", svc.Name, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
	c := harness.In(ext)
	expectSpread(t, "external -> LoadBalancer IP with the health check port taken", c, harness.TCP, ap(lbIP, 80), 4,
		harness.ExternalClientIP.Addr(), backends...)
	if k.Exited() {
		t.Fatalf("kipvs exited over a taken health check port; log:\n%s", k.Log())
	}

	// The port is freed: a later sync (at the latest the next periodic full sync) opens it.
	squatter.Close()
	hc := ap(harness.NodeIP, hcPort)
	limit, _ := fullSyncLimit(t, k)
	last, _ := waitHealth(t, c, hc, svc.Name, 200, 1, limit+programLimit)
	t.Logf("health check after the port was freed: %s", last)

	// The Service goes: its health check closes.
	s.api.DeleteService(t, svc.Name)
	poll.Until(t, programLimit, "health check closed with its Service", func() (bool, string) {
		code, _, err := c.HealthCheck(hc)
		if err == nil {
			return false, fmt.Sprintf("still answering HTTP %d", code)
		}
		return true, ""
	})
}
