//go:build e2e

package tests

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Scenario 2 (seed-001): the node reaches a ClusterIP whose backend has no route back to
// the Service CIDR (only its on-link pod subnet), which works only when kipvs masquerades
// the node's own connections: with --cluster-cidr set to the pod CIDR (! -s CIDR rule),
// and with it unset (the src,dst rule). A cluster CIDR equal to the Service CIDR, which
// would break exactly this, makes `kipvs run` refuse to start with an explanation. The
// second run reconfigures the state the first one left (as a restart with new flags does):
// the rule must change, not pile up.
func TestSeed001NodeToClusterIP(t *testing.T) {
	s := newScenario(t)
	lonely := s.topo.AddPod(t, "lonely", netip.MustParseAddr("10.244.0.31"), harness.PodOptions{NoDefaultRoute: true})
	vip := netip.MustParseAddr("10.96.2.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s2-seed001", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, lonely)
	programmed := harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, lonely),
		vs(harness.UDP, vip, 80): harness.Weights(1, lonely),
	})

	cases := []struct {
		name     string
		args     []string
		wantRule string // the KUBE-SERVICES rule that masquerades node -> ClusterIP
	}{
		{"cluster-cidr set", harness.RunArgs(s.env),
			`-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`},
		{"cluster-cidr unset", harness.WithoutFlag(harness.RunArgs(s.env), "--cluster-cidr"),
			`-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := harness.StartKipvs(t, s.env, c.args...)
			k.WaitSynced(t, startLimit, "s2 programmed", programmed)
			save := harness.MustRun(t, "iptables-save", "-t", "nat")
			if !strings.Contains(save, c.wantRule+"\n") {
				t.Errorf("nat table lacks the masquerade rule\n%s\n--- iptables-save -t nat:\n%s", c.wantRule, save)
			}
			for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
				a, err := s.topo.NodeClient().Do(p, ap(vip, 80))
				if err != nil {
					t.Errorf("node -> %s %s (backend without a route to the Service CIDR): %v", p, vip, err)
					continue
				}
				if a.Backend != lonely.PodName || a.Source.Addr() != harness.PodGateway.Addr() {
					t.Errorf("node -> %s %s: answer %q, want %s seeing the node's bridge address %s", p, vip, a, lonely.PodName, harness.PodGateway.Addr())
					continue
				}
				t.Logf("node -> %s %s: %s saw the client as %s (masqueraded)", p, vip, a.Backend, a.Source)
			}
			for _, other := range cases {
				if other.wantRule != c.wantRule && strings.Contains(save, other.wantRule+"\n") {
					t.Errorf("nat table still has the masquerade rule of %s:\n%s", other.name, other.wantRule)
				}
			}
			k.Stop(t)
		})
	}

	// A cluster CIDR that is the Service CIDR: refused, from the flag and, when the
	// apiserver serves ServiceCIDR objects (or from default/kubernetes otherwise), from the
	// API. The kernel state the runs above left must stay as it is.
	served := s.api.ServiceCIDRServed(t)
	t.Logf("apiserver serves networking.k8s.io/v1 ServiceCIDR: %v", served)
	type refusal struct {
		name string
		args []string
		want []string
	}
	refusals := []refusal{
		{"service-cidr flag", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String(), "--kipvs-service-cidr", harness.ServiceCIDR.String()),
			[]string{"10.96.0.0/16", "is the Service CIDR", "clusterCIDR must be the pod CIDR"}},
	}
	if served {
		refusals = append(refusals, refusal{"ServiceCIDR API", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String()),
			[]string{"ServiceCIDR objects", "10.96.0.0/16", "is the Service CIDR", "clusterCIDR must be the pod CIDR"}})
	} else {
		refusals = append(refusals, refusal{"default/kubernetes", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String()),
			[]string{"default/kubernetes", "clusterCIDR must be the pod CIDR"}})
	}
	for _, r := range refusals {
		t.Run("refused/"+r.name, func(t *testing.T) {
			before, err := harness.ReadIPVS()
			if err != nil {
				t.Fatal(err)
			}
			k := harness.StartKipvs(t, s.env, r.args...)
			out, err := k.Wait(t, startLimit)
			if err == nil {
				t.Fatalf("kipvs run %s exited 0, want a refusal; output:\n%s", strings.Join(r.args, " "), out)
			}
			for _, w := range r.want {
				if !strings.Contains(out, w) {
					t.Errorf("kipvs's refusal does not say %q; output:\n%s", w, out)
				}
			}
			if t.Failed() {
				return
			}
			t.Logf("refused (%v): %s", err, lastLine(out))
			if after, err := harness.ReadIPVS(); err != nil || !reflect.DeepEqual(before, after) {
				t.Errorf("a refused kipvs changed the IPVS table: %v -> %v (%v)", before, after, err)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
