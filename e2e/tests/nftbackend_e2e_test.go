//go:build e2e

package tests

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// The live switch between kipvs's filter backends: kipvs with the iptables backend is
// replaced by kipvs with the nftables backend, which is replaced by kipvs with the iptables
// backend again, each with the scenarios' flags, while the live switch's traffic runs
// (switchTraffic: new connections from the node, a pod and outside the node to a ClusterIP
// and a NodePort, and two held connections).
//
//   - No request fails and the held connections carry data at every stage and at the end.
//   - Every start syncs without error, and once its first sync is done the new backend has
//     removed what the other one left: after the switch to nftables no KUBE- chain or rule
//     in iptables-save and ip6tables-save and no ipset, next to the table ip kipvs; after
//     the switch back neither kipvs table, next to the KUBE-SERVICES chain
//     (backendProblems).
func TestLiveSwitchFilterBackend(t *testing.T) {
	s := newScenario(t)
	w := newSwitchTraffic(t, s)
	stages := []filterBackend{iptablesBackend, nftablesBackend, iptablesBackend}
	var k *harness.Kipvs
	for i, b := range stages {
		if k != nil {
			k.Stop(t)
			w.wait(time.Now(), 3) // the kernel serves on its own while no kipvs runs
		}
		k = harness.StartKipvs(t, s.env, harness.RunArgs(s.env, b.args()...)...)
		d := waitProgrammed(t, k, startLimit, "kipvs's first sync with the "+string(b)+" backend", harness.IPVSHas(w.want))
		t.Logf("kipvs with the %s backend synced %.1fs after start", b, d.Seconds())
		d = k.Until(t, programLimit, "the "+string(b)+" backend's filter alone in the kernel", func() (bool, string) {
			p := backendProblems(b)
			return len(p) == 0, strings.Join(p, "\n")
		})
		t.Logf("the %s backend's filter alone in the kernel %.1fs after the first sync", b, d.Seconds())
		if i == 0 {
			w.start()
		}
		w.wait(time.Now(), 5)
		w.ping("under kipvs with the " + string(b) + " backend")
		expectHealthy(t, k)
	}
	w.finish("kipvs's iptables -> nftables -> iptables backends")
	k.Stop(t)
}

// The live switch kube-proxy (IPVS mode) -> kipvs with the nftables backend -> kube-proxy,
// under the live switch's traffic (switchTraffic):
//
//   - No request fails and the held connections carry data at every stage and at the end.
//   - kipvs syncs without error, and once its first sync is done kube-proxy's KUBE- chains
//     and ipsets are gone, next to the table ip kipvs (backendProblems).
//   - kube-proxy's first sync after kipvs programs its chains again. kube-proxy does not know
//     kipvs's tables: they are still there then (logged), and are deleted by hand (nft delete
//     table), under traffic.
func TestLiveSwitchKubeProxyNFTables(t *testing.T) {
	s := newScenario(t)
	w := newSwitchTraffic(t, s)
	kpArgs := switchKubeProxyArgs(s.env)
	kp := harness.StartKubeProxy(t, s.env, kpArgs...)
	d := kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy programmed the Service", harness.IPVSHas(w.want))
	families := []string{"IPv4"}
	if strings.Contains(kp.Log(), "kube-proxy running in dual-stack mode") {
		families = append(families, "IPv6")
		d += kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy's first IPv6 sync", switchFamiliesSynced(families))
	}
	t.Logf("kube-proxy synced %v %.1fs after start", families, d.Seconds())
	w.start()
	w.wait(time.Time{}, 5)
	w.ping("under kube-proxy")

	kp.Stop(t)
	w.wait(time.Now(), 3)
	k := harness.StartKipvs(t, s.env, harness.RunArgs(s.env, nftablesBackend.args()...)...)
	d = waitProgrammed(t, k, startLimit, "kipvs's first sync with the nftables backend", switchFamiliesSynced(families))
	t.Logf("kipvs with the nftables backend synced %.1fs after start", d.Seconds())
	d = k.Until(t, programLimit, "kube-proxy's chains and ipsets removed", func() (bool, string) {
		p := backendProblems(nftablesBackend)
		return len(p) == 0, strings.Join(p, "\n")
	})
	t.Logf("kube-proxy's chains and ipsets removed %.1fs after kipvs's first sync", d.Seconds())
	w.wait(time.Now(), 5)
	w.ping("under kipvs with the nftables backend")
	expectHealthy(t, k)

	k.Stop(t)
	w.wait(time.Now(), 3)
	kp = harness.StartKubeProxy(t, s.env, kpArgs...)
	d = kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy's first sync after kipvs", switchFamiliesSynced(families))
	t.Logf("kube-proxy synced %.1fs after start", d.Seconds())
	if rules := harness.DumpRules(t, "iptables-save"); !strings.Contains(rules, ":KUBE-SERVICES") {
		t.Errorf("kube-proxy's first sync after kipvs left no KUBE-SERVICES chain:\n%s", rules)
	}
	w.wait(time.Now(), 5)
	w.ping("back under kube-proxy")
	tables, err := harness.KipvsTables()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kipvs's tables kube-proxy leaves in place: %v", tables)
	for _, tab := range tables {
		harness.MustRun(t, "nft", append([]string{"delete"}, strings.Fields(tab)...)...) // "delete table ip kipvs"
	}
	w.wait(time.Now(), 5)
	w.ping("under kube-proxy, kipvs's tables deleted")
	w.finish("kube-proxy -> kipvs (nftables backend) -> kube-proxy")
	kp.Stop(t) // SIGTERM, as the kubelet or systemd stops it
}

// kipvs cleanup after the nftables backend ran: a LoadBalancer Service with an external IP
// and a source range is programmed by kipvs with the nftables backend (the table ip kipvs
// holds its addresses in its sets), then kipvs stops and `kipvs cleanup` removes both kipvs
// tables with the virtual servers and kube-ipvs0, nothing of kipvs's is left (Leftovers),
// and kube-proxy's nftables-mode table (ip kube-proxy, made by hand) stays; a second
// cleanup finds nothing to do; `kipvs cleanup --include-kube-proxy-nftables` removes the
// kube-proxy table.
func TestNFTablesBackendCleanup(t *testing.T) {
	s := newScenario(t)
	s.backend = nftablesBackend
	backends := s.pods("nc", 10, 2)
	vip := netip.MustParseAddr("10.96.40.10")
	extIP := netip.MustParseAddr("203.0.113.70")
	lbIP := netip.MustParseAddr("203.0.113.71")
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "nft-cleanup", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vip, ExternalIPs: []netip.Addr{extIP},
		Ports: []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		Mutate: func(svc *v1.Service) {
			svc.Spec.LoadBalancerSourceRanges = []string{harness.ExternalClientIP.Addr().String() + "/32"}
		},
	})
	svc = s.api.SetLoadBalancerIP(t, svc, lbIP)
	s.api.SetEndpoints(t, svc, backends...)
	all := harness.Weights(1, backends...)
	k := s.startChecked("the Service programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): all, vs(harness.TCP, extIP, 80): all, vs(harness.TCP, lbIP, 80): all,
	}))
	for set, want := range map[string]string{
		"cluster-ip":                vip.String() + " . tcp . 80",
		"external-ip":               extIP.String() + " . tcp . 80",
		"load-balancer-fw":          lbIP.String() + " . tcp . 80",
		"load-balancer-source-cidr": lbIP.String() + " . tcp . 80 . " + harness.ExternalClientIP.Addr().String(),
		"ipvs-ips":                  lbIP.String(),
	} {
		if got := harness.MustRun(t, "nft", "list", "set", "ip", "kipvs", set); !strings.Contains(got, want) {
			t.Errorf("set %s of table ip kipvs lacks %q:\n%s", set, want, got)
		}
	}
	k.Stop(t)

	tables, err := harness.KipvsTables()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kipvs's tables after it stopped: %v", tables)
	if !slices.Contains(tables, "table ip kipvs") {
		t.Fatalf("no table ip kipvs after kipvs ran with the nftables backend: %v", tables)
	}
	harness.MustRun(t, "nft", "add", "table", "ip", "kube-proxy")
	t.Cleanup(func() { _, _ = harness.Run("nft", "delete", "table", "ip", "kube-proxy") })
	kubeProxyTable := func() bool {
		return strings.Contains(harness.MustRun(t, "nft", "list", "tables"), "table ip kube-proxy\n")
	}

	out, err := harness.RunCleanup(s.env)
	if err != nil {
		t.Fatalf("kipvs cleanup: %v\n%s", err, out)
	}
	t.Logf("kipvs cleanup:\n%s", out)
	if left := harness.Leftovers(t); len(left) > 0 {
		t.Errorf("kipvs cleanup after the nftables backend left:\n%s", strings.Join(left, "\n"))
	}
	if !kubeProxyTable() {
		t.Errorf("kipvs cleanup without --include-kube-proxy-nftables removed table ip kube-proxy")
	}

	out, err = harness.RunCleanup(s.env)
	if err != nil || !strings.Contains(out, "nothing to clean up") {
		t.Errorf("a second kipvs cleanup: %v, want nothing to clean up:\n%s", err, out)
	}
	out, err = harness.Run(s.env.KipvsBin, "cleanup", "--include-kube-proxy-nftables")
	if err != nil {
		t.Fatalf("kipvs cleanup --include-kube-proxy-nftables: %v\n%s", err, out)
	}
	if kubeProxyTable() {
		t.Errorf("kipvs cleanup --include-kube-proxy-nftables left table ip kube-proxy:\n%s", out)
	}
}
