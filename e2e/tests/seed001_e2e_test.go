//go:build e2e

package tests

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Scenario 2 (seed-001): the node reaches a ClusterIP whose backend has no route back to
// the Service CIDR (only its on-link pod subnet), which works only when kipvs masquerades
// the node's own connections: with --cluster-cidr set to the pod CIDR (! -s CIDR rule),
// and with it unset (the src,dst rule). A cluster CIDR equal to the Service CIDR, which
// breaks exactly this under kube-proxy, does not stop kipvs (kube-proxy runs too): kipvs
// leaves it out of local-traffic detection, so it programs the src,dst rule and the node
// still reaches the ClusterIP, and reports the mistake (ERROR log, Warning Event on the
// Node, kipvs_cluster_cidr_overlaps_service_cidr 1). Each run reconfigures the state the
// one before left (as a restart with new flags does): the rule must change, not pile up.
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

	// A cluster CIDR that is the Service CIDR, named by the flag and, when the apiserver
	// serves ServiceCIDR objects (or from default/kubernetes otherwise), by the API: kipvs
	// runs, masquerades the node's own connections (the src,dst rule) and reports it.
	served := s.api.ServiceCIDRServed(t)
	t.Logf("apiserver serves networking.k8s.io/v1 ServiceCIDR: %v", served)
	type overlap struct {
		name string
		args []string
		want []string // in kipvs's log
	}
	overlaps := []overlap{
		{"service-cidr flag", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String(), "--kipvs-service-cidr", harness.ServiceCIDR.String()),
			[]string{"10.96.0.0/16", "is the Service CIDR", "clusterCIDR must be the pod CIDR"}},
	}
	if served {
		overlaps = append(overlaps, overlap{"ServiceCIDR API", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String()),
			[]string{"ServiceCIDR objects", "10.96.0.0/16", "is the Service CIDR", "clusterCIDR must be the pod CIDR"}})
	} else {
		overlaps = append(overlaps, overlap{"default/kubernetes", harness.RunArgs(s.env, "--cluster-cidr", harness.ServiceCIDR.String()),
			[]string{"default/kubernetes", "clusterCIDR must be the pod CIDR"}})
	}
	unset := cases[1].wantRule
	for _, o := range overlaps {
		t.Run("overlap/"+o.name, func(t *testing.T) {
			k := harness.StartKipvs(t, s.env, o.args...)
			k.WaitSynced(t, startLimit, "s2 programmed", programmed)
			save := harness.MustRun(t, "iptables-save", "-t", "nat")
			if !strings.Contains(save, unset+"\n") || strings.Contains(save, "! -s "+harness.ServiceCIDR.String()) {
				t.Errorf("nat table: want the src,dst rule and no ! -s %s rule\n%s\n--- iptables-save -t nat:\n%s", harness.ServiceCIDR, unset, save)
			}
			for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
				a, err := s.topo.NodeClient().Do(p, ap(vip, 80))
				if err != nil || a.Backend != lonely.PodName || a.Source.Addr() != harness.PodGateway.Addr() {
					t.Errorf("node -> %s %s with clusterCIDR = Service CIDR: answer %q, %v; want %s seeing %s", p, vip, a, err, lonely.PodName, harness.PodGateway.Addr())
				}
			}
			if got := k.Metrics(t).Get("kipvs_cluster_cidr_overlaps_service_cidr"); got != 1 {
				t.Errorf("kipvs_cluster_cidr_overlaps_service_cidr = %v, want 1", got)
			}
			log := k.Log()
			// An error line in klog's header (kube-proxy's text format): "E1206 08:00:00.123456 ...".
			if !regexp.MustCompile(`(?m)^\s*E\d{4} \d\d:\d\d:\d\d\.\d{6} .*"clusterCIDR overlaps the Service CIDR"`).MatchString(log) {
				t.Errorf("kipvs's log has no error line saying the clusterCIDR overlaps the Service CIDR:\n%s", log)
			}
			for _, w := range append([]string{"clusterCIDR overlaps the Service CIDR"}, o.want...) {
				if !strings.Contains(log, w) {
					t.Errorf("kipvs's log does not say %q:\n%s", w, log)
				}
			}
			// The event broadcaster writes asynchronously.
			// With it, kube-proxy's Normal Starting Event (action StartKubeProxy) on the Node.
			_, err := poll.Wait(30*time.Second, "a Warning Event ClusterCIDROverlapsServiceCIDR and a Normal Starting on Node "+harness.NodeName, func() (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				evs, err := s.api.CS.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				var overlap, starting bool
				for _, e := range evs.Items {
					if e.Regarding.Kind != "Node" || e.Regarding.Name != harness.NodeName || e.ReportingController != "kipvs" {
						continue
					}
					overlap = overlap || e.Type == "Warning" && e.Reason == "ClusterCIDROverlapsServiceCIDR"
					starting = starting || e.Type == "Normal" && e.Reason == "Starting" && e.Action == "StartKubeProxy"
				}
				return overlap && starting, fmt.Sprintf("%d Events in default (overlap %v, starting %v)", len(evs.Items), overlap, starting)
			})
			if err != nil {
				t.Error(err)
			}
			if k.Exited() {
				t.Errorf("kipvs exited: %s", lastLine(k.Log()))
			}
			k.Stop(t)
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
