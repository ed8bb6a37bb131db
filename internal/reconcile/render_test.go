package reconcile

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// resyncIsClean runs a second full sync and fails unless it plans nothing and finds no drift.
func resyncIsClean(t *testing.T, e *env) {
	t.Helper()
	res := e.full()
	if !res.Plan.Empty() || len(res.Drift) != 0 {
		t.Errorf("second full sync: plan\n%sdrift %v", res.Plan, res.Drift)
	}
	if got := e.counter("kipvs_kernel_drift_repaired_total", nil); got != 0 {
		t.Errorf("kipvs_kernel_drift_repaired_total = %v after a clean resync, want 0", got)
	}
}

func lb(ip string, nodePort int32, ranges ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = nodePort
		s.Spec.LoadBalancerSourceRanges = ranges
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
	}
}

func sctp(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP; s.Spec.Ports[0].Port = 3868 }

// An SCTP NodePort and an SCTP LoadBalancer with externalTrafficPolicy=Local: their rules
// carry upstream's set comments, which hold single quotes; the sync must program them (the
// netfilter layer rejected the whole ruleset when the quotes were not escaped as
// iptables-save escapes them) and a resync must find them unchanged.
func TestSCTPNodePortAndLoadBalancerSync(t *testing.T) {
	e := newEnv(t)
	e.set(svc("diameter", "10.96.0.70", sctp, nodePort(30868)), eps("diameter", v1.ProtocolSCTP, 3868, "10.244.1.5"))
	e.set(svc("diameter-lb", "10.96.0.71", sctp, lb("203.0.113.71", 30869), func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}), withLocal(eps("diameter-lb", v1.ProtocolSCTP, 3868, "10.244.1.6"), "10.244.1.6"))
	e.full()
	dump := e.dump()
	for _, want := range []string{
		`-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ`,
		`-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type \'hash ip:port\'" -m set --match-set KUBE-NODE-PORT-LOCAL-SCTP-HASH dst,dst -j RETURN`,
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("rule %s missing from the node:\n%s", want, dump)
		}
	}
	resyncIsClean(t, e)
}

// loadBalancerSourceRanges as an operator writes them: a /32 host range, 0.0.0.0/0 ("allow
// every source"), a mix of /0 with a narrower range, and ::/0 alone on this IPv4 node (a range
// of the other family only: nothing of this family is allowed, as before). The node's whole
// state is pinned by a golden file, the observable behaviour by the packet tracer, and a
// second full sync must plan nothing (a /32 was written as "…/32" but listed back bare, so
// every full sync deleted the live member).
func TestLoadBalancerSourceRangesSync(t *testing.T) {
	e := newEnv(t)
	e.set(svc("host", "10.96.0.80", lb("203.0.113.80", 30880, "198.51.100.7/32", "192.0.2.0/24")), eps("host", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("open", "10.96.0.81", lb("203.0.113.81", 30881, "0.0.0.0/0")), eps("open", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("open-mixed", "10.96.0.82", lb("203.0.113.82", 30882, "10.0.0.0/8", "0.0.0.0/0", "::/0")), eps("open-mixed", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.set(svc("v6-open-only", "10.96.0.83", lb("203.0.113.83", 30883, "::/0")), eps("v6-open-only", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	golden.Check(t, "source-ranges.golden", e.dump())
	resyncIsClean(t, e)

	tr := newTracer(e)
	outside, node := ip("203.0.113.200"), ip("192.168.1.10")
	var all strings.Builder
	for _, f := range []struct {
		p    packet
		want string
	}{
		{packet{fromExternal, ip("198.51.100.7"), ap("203.0.113.80:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{packet{fromExternal, ip("198.51.100.8"), ap("203.0.113.80:80"), "tcp", "eth0"}, "drop"},
		{packet{fromExternal, ip("192.0.2.9"), ap("203.0.113.80:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{packet{fromExternal, outside, ap("203.0.113.81:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{packet{fromNode, ip("203.0.113.81"), ap("203.0.113.81:80"), "tcp", ""}, "ipvs [10.244.1.5:8080] masq"},
		{packet{fromExternal, outside, ap("203.0.113.82:80"), "tcp", "eth0"}, "ipvs [10.244.1.5:8080] masq"},
		{packet{fromExternal, outside, ap("203.0.113.83:80"), "tcp", "eth0"}, "drop"},
		{packet{fromExternal, node, ap("203.0.113.83:80"), "tcp", "eth0"}, "drop"},
	} {
		got := tr.trace(f.p).String()
		fmt.Fprintf(&all, "%-70s %s\n", f.p, got)
		if got != f.want {
			t.Errorf("%s = %q, want %q", f.p, got, f.want)
		}
	}
	golden.Check(t, "source-ranges-flows.golden", all.String())
}
