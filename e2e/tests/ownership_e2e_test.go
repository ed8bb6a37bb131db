//go:build e2e

package tests

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 23, finding 1, on the real kernel and a real apiserver: a tenant's externalIP on
// the kube-dns cluster IP, and another tenant's LoadBalancer ingress IP on it, both on
// kube-dns's ports (53/UDP and 53/TCP) and both named to sort before kube-dns, leave
// kube-dns's virtual servers, real servers and set members exactly as they were; the
// Warning Events land on the tenants, none on kube-dns; DNS-port traffic to the cluster
// IP still reaches kube-dns's pods only.
func TestHostileClaimOnKubeDNSClusterIP(t *testing.T) {
	s := newScenario(t)
	dnsPods := s.pods("dn", 30, 2)
	evilPods := s.pods("ev", 40, 1)
	dnsIP := netip.MustParseAddr("10.96.0.10")
	dnsPorts := []harness.Port{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53}}
	dns := s.api.CreateService(t, harness.ServiceSpec{Name: "kube-dns", ClusterIP: dnsIP, Ports: dnsPorts})
	s.api.SetEndpoints(t, dns, dnsPods...)
	want := map[string]map[string]int{
		vs(harness.UDP, dnsIP, 53): harness.Weights(1, dnsPods...),
		vs(harness.TCP, dnsIP, 53): harness.Weights(1, dnsPods...),
	}
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "kube-dns programmed", harness.IPVSHas(want))
	before := harness.ReadDump(t)

	ext := s.api.CreateService(t, harness.ServiceSpec{Name: "a-tenant-extip", Ports: dnsPorts, ExternalIPs: []netip.Addr{dnsIP}})
	s.api.SetEndpoints(t, ext, evilPods...)
	lb := s.api.CreateService(t, harness.ServiceSpec{Name: "a-tenant-lb", Type: v1.ServiceTypeLoadBalancer, Ports: dnsPorts,
		Mutate: func(svc *v1.Service) { svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"} }})
	s.api.SetEndpoints(t, lb, evilPods...)
	s.api.SetLoadBalancerIP(t, lb, dnsIP)

	// The tenants' own cluster IPs are programmed: the sync that saw them is done.
	k.WaitSynced(t, programLimit, "the tenants' cluster IPs programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.UDP, harness.ClusterIPOf(t, ext), 53): harness.Weights(1, evilPods...),
		vs(harness.UDP, harness.ClusterIPOf(t, lb), 53):  harness.Weights(1, evilPods...),
	}))

	untouched := func(when string) {
		t.Helper()
		after := harness.ReadDump(t)
		if b, a := linesWith(before.IPVS, dnsIP.String()+":53"), linesWith(after.IPVS, dnsIP.String()+":53"); !slices.Equal(b, a) {
			t.Errorf("%s: kube-dns's virtual servers changed:\n--- before ---\n%s\n--- after ---\n%s", when, strings.Join(b, "\n"), strings.Join(a, "\n"))
		}
		if b, a := linesWith(before.IPSets, dnsIP.String()+","), linesWith(after.IPSets, dnsIP.String()+","); !slices.Equal(b, a) {
			t.Errorf("%s: set members on kube-dns's address changed:\n--- before ---\n%s\n--- after ---\n%s", when, strings.Join(b, "\n"), strings.Join(a, "\n"))
		}
	}
	untouched("once the tenants are programmed")
	for _, c := range []struct{ svc, reason, field string }{
		{ext.Name, "ExternalIP", "spec.externalIPs"},
		{lb.Name, "LoadBalancerIP", "status.loadBalancer.ingress"},
	} {
		poll.Until(t, programLimit, "Warning Event on "+c.svc, func() (bool, string) {
			evs := s.api.Events(t, c.svc, v1.EventTypeWarning)
			for _, e := range evs {
				// Refused as inside the Service CIDR (the apiserver serves ServiceCIDR
				// objects), or, were the range unknown, lost to the cluster IP.
				refused := strings.HasPrefix(e.Reason, c.reason) && strings.Contains(e.Note, dnsIP.String())
				lost := e.Reason == "VirtualServerConflict" && strings.Contains(e.Note, "kube-dns")
				if (refused || lost) && strings.HasPrefix(e.Note, c.field) {
					t.Logf("%s: %s %s", c.svc, e.Reason, e.Note)
					return true, ""
				}
			}
			return false, "events: " + harness.EventSummary(evs)
		})
	}
	untouched("once both tenants have their Events") // the ingress IP may come a sync later
	if evs := s.api.Events(t, dns.Name, v1.EventTypeWarning); len(evs) > 0 {
		t.Errorf("Warning Events on the victim kube-dns:\n%s", harness.EventSummary(evs))
	}
	for _, p := range []harness.Proto{harness.UDP, harness.TCP} {
		expectSpread(t, "node -> "+string(p)+" kube-dns", s.topo.NodeClient(), p, ap(dnsIP, 53), 4, harness.PodGateway.Addr(), dnsPods...)
	}
}

// linesWith returns the lines of text that contain sub, sorted.
func linesWith(text, sub string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
