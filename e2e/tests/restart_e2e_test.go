//go:build e2e

package tests

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// lineDiff renders the lines only in a and only in b.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if cb[l] < ca[l] {
			out = append(out, "- "+l)
			ca[l]--
		}
	}
	ca = count(a)
	for _, l := range strings.Split(b, "\n") {
		if ca[l] < cb[l] {
			out = append(out, "+ "+l)
			cb[l]--
		}
	}
	return strings.Join(out, "\n")
}

// Scenario 6: restarting kipvs under continuous requests (new TCP connections and UDP
// flows from the node to a ClusterIP, new TCP connections from outside to a NodePort and a
// LoadBalancer IP) loses no request, and leaves the kernel state exactly as it was: the
// IPVS table, the KUBE-* sets, the KUBE- iptables rules and kube-ipvs0.
func TestRestartUnderLoad(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("rs", 10, 2)
	ext := s.topo.AddExternal(t)
	vip := netip.MustParseAddr("10.96.6.10")
	extIP := netip.MustParseAddr("203.0.113.60")
	lbIP := netip.MustParseAddr("203.0.113.61")
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "s6-restart", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vip, ExternalIPs: []netip.Addr{extIP},
	})
	svc = s.api.SetLoadBalancerIP(t, svc, lbIP)
	s.api.SetEndpoints(t, svc, backends...)
	nodePort := int(harness.NodePortOf(t, svc, "http"))
	want := map[string]map[string]int{}
	for _, ip := range []netip.Addr{vip, extIP, lbIP} {
		want[vs(harness.TCP, ip, 80)] = harness.Weights(1, backends...)
		want[vs(harness.UDP, ip, 80)] = harness.Weights(1, backends...)
	}
	want[vs(harness.TCP, harness.ExternalNodeIP.Addr(), nodePort)] = harness.Weights(1, backends...)

	args := harness.RunArgs(s.env)
	k1 := s.startKipvsArgs(args)
	k1.WaitSynced(t, programLimit, "s6 programmed", harness.IPVSHas(want))

	loops := []*harness.Loop{
		harness.StartLoop(t, "node->tcp ClusterIP", s.topo.NodeClient(), harness.TCP, ap(vip, 80), loopInterval),
		harness.StartLoop(t, "node->udp ClusterIP", s.topo.NodeClient(), harness.UDP, ap(vip, 80), loopInterval),
		harness.StartLoop(t, "external->tcp NodePort", harness.In(ext), harness.TCP, ap(harness.ExternalNodeIP.Addr(), nodePort), loopInterval),
		harness.StartLoop(t, "external->tcp LoadBalancer", harness.In(ext), harness.TCP, ap(lbIP, 80), loopInterval),
	}
	for _, l := range loops {
		l.WaitSince(t, time.Time{}, 5, programLimit)
	}
	before := harness.ReadDump(t)

	k1.Stop(t)
	stopped := time.Now()
	for _, l := range loops {
		l.WaitSince(t, stopped, 3, programLimit) // requests while no kipvs runs
	}
	k2 := harness.StartKipvs(t, s.env, args...)
	d := k2.WaitSynced(t, startLimit, "restarted kipvs's first sync", nil)
	synced := time.Now()
	t.Logf("restarted kipvs synced %.1fs after start", d.Seconds())
	for _, l := range loops {
		l.WaitSince(t, synced, 10, programLimit)
		l.Stop()
	}
	after := harness.ReadDump(t)

	for _, l := range loops {
		sum := harness.Summarize(l.Results())
		t.Logf("%s: %s", l.Name, sum)
		if sum.Failed > 0 {
			t.Errorf("%s: %d of %d requests failed across the restart: %v", l.Name, sum.Failed, sum.Total, sum.FirstErrors)
		}
	}
	if before != after {
		t.Errorf("kernel state changed across the restart:\n%s\n--- before:\n%s", lineDiff(before.String(), after.String()), before)
	} else {
		t.Logf("kernel state identical before and after the restart (%d lines)", strings.Count(before.String(), "\n"))
	}
	// Adopting a kernel that already matches must change nothing at all.
	if n := k2.Metrics(t).Get("kipvs_sync_objects_changed_total"); n != 0 {
		t.Errorf("the restarted kipvs changed %v kernel objects (kipvs_sync_objects_changed_total), want 0", n)
	} else {
		t.Logf("the restarted kipvs changed no kernel object")
	}
}
