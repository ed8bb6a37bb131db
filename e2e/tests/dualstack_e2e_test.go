//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Issue 4, dual-stack: the node and the pods get IPv6 addresses too and kipvs runs with an
// IPv4 and an IPv6 --cluster-cidr. An IPv6-only Service and a RequireDualStack Service
// (the apiserver has a dual-stack Service CIDR) carry TCP and UDP traffic on every
// cluster IP of theirs; kube-ipvs0 holds the IPv6 cluster IPs as /128; the IPv6 sets
// hold them and the family's rules are there: with the iptables backend the KUBE-6-*
// ipsets and kipvs's ip6tables chains, with the nftables backend the set cluster-ip and
// the chains of table ip6 kipvs.
//
// It runs once per filter backend (eachBackend).
func TestDualStack(t *testing.T) { eachBackend(t, testDualStack) }

func testDualStack(t *testing.T, s *scenario) {
	backends := s.pods("ds", 10, 2)
	harness.AddAddr(t, netns.None(), harness.BridgeName, harness.PodGateway6)
	v6 := map[*harness.Pod]netip.Addr{}
	for i, p := range backends {
		a := netip.MustParseAddr(fmt.Sprintf("fd00:10:244::%d", 0x11+i))
		p.AddIPv6(t, netip.PrefixFrom(a, harness.PodGateway6.Bits()), harness.PodGateway6.Addr())
		v6[p] = a
	}
	v6only := netip.MustParseAddr("fd00:10:96::a")
	dual4, dual6 := netip.MustParseAddr("10.96.20.11"), netip.MustParseAddr("fd00:10:96::b")
	svc6 := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-ipv6-only", ClusterIP: v6only, Mutate: func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	}})
	svcDual := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-dual-stack", ClusterIP: dual4, Mutate: func(svc *v1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		svc.Spec.ClusterIPs = []string{dual4.String(), dual6.String()}
	}})
	if got := svcDual.Spec.ClusterIPs; !slices.Equal(got, []string{dual4.String(), dual6.String()}) {
		t.Fatalf("dual-stack Service got clusterIPs %v", got)
	}
	var eps6 []harness.Endpoint
	for _, p := range backends {
		eps6 = append(eps6, harness.ReadyEP(p).WithAddr(v6[p]))
	}
	s.api.SetSlice(t, svc6, "", discoveryv1.AddressTypeIPv6, eps6...)
	s.api.SetEndpoints(t, svcDual, backends...)
	s.api.SetSlice(t, svcDual, "-v6", discoveryv1.AddressTypeIPv6, eps6...)

	k := s.startKipvs("--cluster-cidr", harness.ClusterCIDR.String()+","+harness.ClusterCIDR6.String())
	w6 := map[string]int{}
	for _, p := range backends {
		w6[netip.AddrPortFrom(v6[p], harness.EchoPort).String()] = 1
	}
	want := map[string]map[string]int{}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		want[vs(p, v6only, 80)] = w6
		want[vs(p, dual6, 80)] = w6
		want[vs(p, dual4, 80)] = harness.Weights(1, backends...)
	}
	k.WaitSynced(t, programLimit, "dual-stack programmed", harness.IPVSHas(want))

	for _, ip := range []netip.Addr{v6only, dual6, dual4} {
		for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
			seen := map[string]int{}
			var src netip.Addr
			for range 6 {
				a, err := s.topo.NodeClient().Do(p, ap(ip, 80))
				if err != nil {
					t.Fatalf("node -> %s %s: %v", p, ap(ip, 80), err)
				}
				seen[a.Backend]++
				src = a.Source.Addr()
				if ip.Is6() != src.Is6() {
					t.Errorf("node -> %s %s: backend saw the client as %s, another family", p, ap(ip, 80), src)
				}
			}
			if len(seen) != len(backends) {
				t.Errorf("node -> %s %s: answers %v, want every backend", p, ap(ip, 80), seen)
			}
			t.Logf("node -> %s %s: answered by %v, client seen as %s", p, ap(ip, 80), seen, src)
		}
	}

	dummy := harness.DumpDummy(t)
	for _, ip := range []netip.Addr{v6only, dual6} {
		if !strings.Contains(dummy, ip.String()+"/128") {
			t.Errorf("%s does not hold %s/128:\n%s", harness.DummyName, ip, dummy)
		}
	}
	if !strings.Contains(dummy, dual4.String()+"/32") {
		t.Errorf("%s does not hold %s/32:\n%s", harness.DummyName, dual4, dummy)
	}
	if s.backend == nftablesBackend {
		expectDualStackTables(t, v6only, dual6, dual4)
	} else {
		expectDualStackSets(t, v6only, dual6, dual4)
	}
	// Both families are reconciled, and measured, apart: the metrics carry ip_family.
	m := k.Metrics(t)
	for _, fam := range []string{`ip_family="IPv4"`, `ip_family="IPv6"`} {
		if n := m.Get("kubeproxy_sync_proxy_rules_duration_seconds_count", fam); n < 1 {
			t.Errorf("kubeproxy_sync_proxy_rules_duration_seconds_count{%s} = %v, want syncs counted", fam, n)
		}
		if s.backend == nftablesBackend {
			// No iptables rule to count: the rule failures' counter is the backend's own.
			if n := m.Get("kubeproxy_sync_proxy_rules_iptables_total", `table="nat"`, fam); n != 0 {
				t.Errorf(`kubeproxy_sync_proxy_rules_iptables_total{table="nat",%s} = %v with the nftables backend, want none`, fam, n)
			}
			continue
		}
		if n := m.Get("kubeproxy_sync_proxy_rules_iptables_total", `table="nat"`, fam); n < 1 {
			t.Errorf(`kubeproxy_sync_proxy_rules_iptables_total{table="nat",%s} = %v, want the family's own rules`, fam, n)
		}
	}
}

// expectDualStackSets checks the iptables backend's IPv6 sets (KUBE-6-*) and ip6tables
// chains for TestDualStack's cluster IPs.
func expectDualStackSets(t *testing.T, v6only, dual6, dual4 netip.Addr) {
	t.Helper()
	sets := harness.DumpSets(t)
	for _, want := range []string{
		"add KUBE-6-CLUSTER-IP " + v6only.String() + ",tcp:80",
		"add KUBE-6-CLUSTER-IP " + dual6.String() + ",udp:80",
		"add KUBE-CLUSTER-IP " + dual4.String() + ",tcp:80",
	} {
		if !strings.Contains(sets, want) {
			t.Errorf("ipset save lacks %q", want)
		}
	}
	if !strings.Contains(sets, "create KUBE-6-CLUSTER-IP hash:ip,port family inet6") {
		t.Errorf("no IPv6 set KUBE-6-CLUSTER-IP:\n%s", sets)
	}
	rules6 := harness.DumpRules(t, "ip6tables-save")
	for _, want := range []string{":KUBE-SERVICES", "KUBE-6-CLUSTER-IP", ":KUBE-POSTROUTING"} {
		if !strings.Contains(rules6, want) {
			t.Errorf("ip6tables-save lacks %q:\n%s", want, rules6)
		}
	}
}

// expectDualStackTables checks the nftables backend's sets (cluster-ip of ip6 kipvs and ip
// kipvs) and ip6 kipvs's chains for TestDualStack's cluster IPs.
func expectDualStackTables(t *testing.T, v6only, dual6, dual4 netip.Addr) {
	t.Helper()
	for fam, want := range map[string][]string{
		"ip6": {v6only.String() + " . tcp . 80", dual6.String() + " . udp . 80", "type ipv6_addr . inet_proto . inet_service"},
		"ip":  {dual4.String() + " . tcp . 80"},
	} {
		set := harness.MustRun(t, "nft", "list", "set", fam, "kipvs", "cluster-ip")
		for _, w := range want {
			if !strings.Contains(set, w) {
				t.Errorf("nft list set %s kipvs cluster-ip lacks %q:\n%s", fam, w, set)
			}
		}
	}
	table6 := harness.MustRun(t, "nft", "-t", "list", "table", "ip6", "kipvs")
	for _, want := range []string{"chain services {", "chain postrouting {", "@cluster-ip"} {
		if !strings.Contains(table6, want) {
			t.Errorf("nft list table ip6 kipvs lacks %q:\n%s", want, table6)
		}
	}
}
