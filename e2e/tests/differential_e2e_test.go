//go:build e2e

package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/e2e/oracle"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// diffCase is one configuration of the differential test: the same KubeProxyConfiguration
// file is given to kube-proxy and to kipvs.
type diffCase struct {
	name string
	// config edits the common configuration (diffBaseConfig).
	config func(c map[string]any)
	// foreignVS, when set, is a virtual server neither proxy owns, added before each proxy
	// starts ("-t 10.200.0.1:80"): both must leave it alone when excludeCIDRs covers it.
	foreignVS string
}

// diffCases: every configuration knob that changes what is programmed, grouped so that the
// corpus runs four times, not once per knob (kube-proxy needs tens of seconds per start
// under TCG).
var diffCases = []diffCase{
	{name: "default"},
	{name: "strict-arp-masquerade-all-wrr-timeouts", config: func(c map[string]any) {
		c["iptables"] = map[string]any{"masqueradeAll": true}
		ipvs := c["ipvs"].(map[string]any)
		ipvs["strictARP"] = true
		ipvs["scheduler"] = "wrr"
		ipvs["tcpTimeout"] = "900s"
		ipvs["tcpFinTimeout"] = "60s"
		ipvs["udpTimeout"] = "20s"
	}},
	{name: "no-cluster-cidr-nodeport-primary", config: func(c map[string]any) {
		delete(c, "clusterCIDR")
		c["nodePortAddresses"] = []string{"primary"}
	}},
	{name: "dual-stack-cidr-nodeport-addresses-exclude-cidrs", foreignVS: "-t 10.200.0.1:80 -s rr", config: func(c map[string]any) {
		c["clusterCIDR"] = harness.ClusterCIDR.String() + ",fd00:10:244::/56"
		c["nodePortAddresses"] = []string{"10.0.2.0/24"}
		c["ipvs"].(map[string]any)["excludeCIDRs"] = []string{"10.200.0.0/16"}
	}},
}

// diffBaseConfig is what every case starts from: the scenarios' settings as a file.
func diffBaseConfig(env harness.Env) map[string]any {
	return map[string]any{
		"apiVersion":          "kubeproxy.config.k8s.io/v1alpha1",
		"kind":                "KubeProxyConfiguration",
		"mode":                "ipvs",
		"clientConnection":    map[string]any{"kubeconfig": env.Kubeconfig},
		"hostnameOverride":    harness.NodeName,
		"clusterCIDR":         harness.ClusterCIDR.String(),
		"metricsBindAddress":  harness.MetricsAddr,
		"healthzBindAddress":  harness.HealthAddr,
		"bindAddressHardFail": true,
		"ipvs":                map[string]any{"minSyncPeriod": "0s", "syncPeriod": harness.SyncPeriod.String()},
	}
}

// Issue 13, the oracle: for each configuration in diffCases, the real kube-proxy v1.34.10
// (--proxy-mode=ipvs) and then kipvs program the same corpus of Services, EndpointSlices
// and a Node; each proxy's kernel state is dumped once it has synced and a further sync
// changed nothing (harness.ReadOracleDump: IPVS table with schedulers, flags, persistence
// and weights, the IPVS timeouts, the KUBE-* sets and members, the KUBE- iptables and
// ip6tables rules, kube-ipvs0's addresses, the sysctls); between the two, the node is
// cleaned and the sysctls restored. A line in one dump only fails the test unless an entry
// of e2e/oracle/differences.yaml explains it (which also renders
// docs/differences-from-kube-proxy.md).
func TestDifferentialKubeProxy(t *testing.T) {
	s := newScenario(t)
	s.env.RequireKubeProxy(t) // stage it now, not inside the first case's timing
	diffs, err := oracle.Load()
	if err != nil {
		t.Fatal(err)
	}
	s.api.LabelNode(t, v1.LabelTopologyZone, "zone-a")
	diffCorpus(t, s.api)
	baseline := harness.Sysctls(t)
	baseTimeouts := harness.MustRun(t, "ipvsadm", "-L", "--timeout")

	used := map[string]bool{}
	ran := 0
	for _, c := range diffCases {
		t.Run(c.name, func(t *testing.T) {
			ran++
			cfg := diffBaseConfig(s.env)
			if c.config != nil {
				c.config(cfg)
			}
			file := writeConfig(t, cfg)
			kp := diffRun(t, s, c, "kube-proxy", baseline, baseTimeouts, func() *harness.Kipvs {
				return harness.StartKubeProxy(t, s.env, "--config", file)
			})
			kv := diffRun(t, s, c, "kipvs", baseline, baseTimeouts, func() *harness.Kipvs {
				return harness.StartKipvs(t, s.env, "run", "--config", file)
			})
			var unexplained []string
			explained := map[string]int{}
			for _, sec := range harness.OracleSections {
				onlyKP, onlyKV := harness.LineDiff(kp[sec], kv[sec])
				for _, side := range []struct {
					side  oracle.Side
					lines []string
				}{{oracle.KubeProxy, onlyKP}, {oracle.Kipvs, onlyKV}} {
					for _, l := range side.lines {
						if d := diffs.ExplainKernel(c.name, sec, side.side, l); d != nil {
							explained[d.ID]++
							used[d.ID] = true
							continue
						}
						unexplained = append(unexplained, fmt.Sprintf("%s, %s only: %s", sec, side.side, l))
					}
				}
			}
			for id, n := range explained {
				t.Logf("%d line(s) differ as differences.yaml entry %q explains", n, id)
			}
			if len(unexplained) > 0 {
				t.Errorf("%d kernel difference(s) between kube-proxy and kipvs that e2e/oracle/differences.yaml does not explain:\n%s\n--- kube-proxy's dump:\n%s--- kipvs's dump:\n%s",
					len(unexplained), strings.Join(unexplained, "\n"), kp, kv)
			} else {
				t.Logf("kube-proxy and kipvs programmed the same kernel state apart from listed differences (%d lines compared)", countLines(kp))
			}
		})
	}
	var unused []string
	for _, d := range diffs {
		if len(d.Kernel) > 0 && !used[d.ID] && !d.Intermittent {
			unused = append(unused, d.ID)
		}
	}
	if len(unused) > 0 && !t.Failed() && ran == len(diffCases) {
		// Every case ran: a kernel entry that explained nothing describes a difference
		// that is gone, and the page would say something untrue.
		t.Errorf("differences.yaml entries with kernel lines that matched nothing in any case (remove them, or their lines): %v", unused)
	}
}

func countLines(d harness.OracleDump) int {
	n := 0
	for _, ls := range d {
		n += len(ls)
	}
	return n
}

func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("configuration:\n%s", b)
	return p
}

// diffRun starts one proxy on a clean node, waits until it has synced and a further sync
// changed nothing, dumps the kernel, stops the proxy and cleans the node.
func diffRun(t *testing.T, s *scenario, c diffCase, name string, sysctls map[string]string, timeouts string, start func() *harness.Kipvs) harness.OracleDump {
	t.Helper()
	if c.foreignVS != "" {
		harness.MustRun(t, "ipvsadm", append([]string{"-A"}, strings.Fields(c.foreignVS)...)...)
	}
	began := time.Now()
	p := start()
	first := p.WaitSynced(t, 3*startLimit, name+"'s first sync", nil)
	dump := harness.ReadOracleDump(t)
	rounds := 0
	// Settled: a sync that started after the dump leaves the same state (kube-proxy
	// programs some objects only on its second sync; both resync every SyncPeriod).
	poll.Until(t, 3*startLimit, name+" settled", func() (bool, string) {
		rounds++
		since := float64(time.Now().UnixNano()) / 1e9
		poll.Until(t, 2*startLimit, name+"'s next sync", func() (bool, string) {
			m, err := harness.FetchMetrics()
			if err != nil {
				return false, err.Error()
			}
			last := m.Get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", `ip_family="IPv4"`)
			return last > since, fmt.Sprintf("last sync at %.3f, waiting for one after %.3f", last, since)
		})
		again := harness.ReadOracleDump(t)
		if again.String() == dump.String() {
			return true, ""
		}
		a, b := harness.LineDiff(strings.Split(dump.String(), "\n"), strings.Split(again.String(), "\n"))
		dump = again
		return false, fmt.Sprintf("the kernel state still changed: removed %q, added %q", a, b)
	})
	m := p.Metrics(t)
	fam := `ip_family="IPv4"`
	n := m.Get("kubeproxy_sync_proxy_rules_duration_seconds_count", fam)
	t.Logf("%s: first sync done %.1fs after start, settled after %d more sync(s), %.1fs after start; %v IPv4 syncs, %.2fs each on average",
		name, first.Seconds(), rounds, time.Since(began).Seconds(), n, m.Get("kubeproxy_sync_proxy_rules_duration_seconds_sum", fam)/max(n, 1))
	p.Stop(t)
	diffClean(t, s, c, name, sysctls, timeouts)
	return dump
}

// diffClean removes what a proxy programmed (kube-proxy --cleanup, then kipvs cleanup,
// then a check that nothing is left) and restores the sysctls and IPVS timeouts.
func diffClean(t *testing.T, s *scenario, c diffCase, name string, sysctls map[string]string, timeouts string) {
	t.Helper()
	if out, err := harness.Run(s.env.RequireKubeProxy(t), "--cleanup", "--proxy-mode=ipvs"); err != nil {
		t.Logf("kube-proxy --cleanup after %s: %v\n%s", name, err, out)
	}
	if out, err := harness.RunCleanup(s.env); err != nil {
		t.Fatalf("kipvs cleanup after %s: %v\n%s", name, err, out)
	}
	if c.foreignVS != "" {
		if out, err := harness.Run("ipvsadm", append([]string{"-D"}, strings.Fields(c.foreignVS)[:2]...)...); err != nil {
			t.Logf("the foreign virtual server is gone after %s: %v %s", name, err, out)
		}
	}
	if left := harness.Leftovers(t); len(left) > 0 {
		t.Fatalf("state left after %s and both cleanups:\n%s", name, strings.Join(left, "\n"))
	}
	harness.RestoreSysctls(t, sysctls)
	f := strings.Fields(timeouts) // "Timeout (tcp tcpfin udp): 900 120 300"
	if len(f) >= 3 {
		harness.MustRun(t, "ipvsadm", "--set", f[len(f)-3], f[len(f)-2], f[len(f)-1])
	}
	if _, err := harness.Run("conntrack", "-F"); err != nil {
		t.Logf("conntrack -F: %v", err)
	}
}

// diffCorpus creates the corpus: one Service for each feature (types, protocols incl. SCTP,
// traffic policies, affinity, source ranges, external IPs, LB ingress in both IP modes,
// terminating, not-ready and remote endpoints, topology hints, dual-stack, headless,
// ExternalName, no endpoints), each with its EndpointSlices, all deleted when the test
// ends. Endpoints on this node are 10.244.0.x, on another node 10.244.1.x.
func diffCorpus(t *testing.T, api *harness.Cluster) {
	t.Helper()
	tcp := func(name string, port int32) v1.ServicePort {
		return v1.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(harness.EchoPort)}
	}
	udp := func(name string, port int32) v1.ServicePort {
		return v1.ServicePort{Name: name, Protocol: v1.ProtocolUDP, Port: port, TargetPort: intstr.FromInt32(harness.EchoPort)}
	}
	sctp := func(name string, port int32) v1.ServicePort {
		return v1.ServicePort{Name: name, Protocol: v1.ProtocolSCTP, Port: port, TargetPort: intstr.FromInt32(harness.EchoPort)}
	}
	local := func(ip string) discoveryv1.Endpoint { return ep(ip, harness.NodeName, true, true, false) }
	remote := func(ip string) discoveryv1.Endpoint { return ep(ip, "node-b", true, true, false) }
	type item struct {
		svc    v1.Service
		slices [][]discoveryv1.Endpoint // IPv4 slices (one per entry), then IPv6 via v6
		v6     []discoveryv1.Endpoint
		lb     []v1.LoadBalancerIngress
	}
	lbVIP := func(ip string) v1.LoadBalancerIngress {
		return v1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(v1.LoadBalancerIPModeVIP)}
	}
	etpLocal := v1.ServiceExternalTrafficPolicyLocal
	items := []item{
		{svc: svcOf("diff-multi", "10.96.201.1", v1.ServiceTypeClusterIP, tcp("http", 80), udp("dns", 53), sctp("sctp", 9000)),
			slices: [][]discoveryv1.Endpoint{{local("10.244.0.11"), remote("10.244.1.11"), ep("10.244.0.12", harness.NodeName, false, false, false)}}},
		{svc: svcOf("diff-nodeport", "10.96.201.2", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30101), nodePort(udp("udp", 80), 30102), nodePort(sctp("sctp", 9001), 30103)),
			slices: [][]discoveryv1.Endpoint{{local("10.244.0.21"), remote("10.244.1.21")}}},
		{svc: with(svcOf("diff-nodeport-local", "10.96.201.3", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30111), nodePort(udp("udp", 80), 30112)), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = etpLocal
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.31"), remote("10.244.1.31")}}},
		{svc: with(svcOf("diff-nodeport-local-none", "10.96.201.4", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30121)), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = etpLocal
		}), slices: [][]discoveryv1.Endpoint{{remote("10.244.1.32")}}},
		{svc: with(svcOf("diff-lb-local", "10.96.201.5", v1.ServiceTypeLoadBalancer, nodePort(tcp("http", 80), 30131)), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = etpLocal
			s.Spec.HealthCheckNodePort = 30139
			s.Spec.LoadBalancerSourceRanges = []string{"192.168.100.0/24", "203.0.113.99/32"}
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.41"), remote("10.244.1.41")}}, lb: []v1.LoadBalancerIngress{lbVIP("203.0.113.10")}},
		{svc: with(svcOf("diff-lb-cluster", "10.96.201.6", v1.ServiceTypeLoadBalancer, nodePort(tcp("http", 80), 30141), nodePort(udp("udp", 80), 30142)), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"192.168.100.0/24"}
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.42"), remote("10.244.1.42")}},
			lb: []v1.LoadBalancerIngress{lbVIP("203.0.113.11"), {IP: "203.0.113.12", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}}},
		{svc: with(svcOf("diff-external-ips", "10.96.201.7", v1.ServiceTypeClusterIP, tcp("http", 80), udp("udp", 80)), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.20", "203.0.113.21"}
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.51"), remote("10.244.1.51")}}},
		{svc: with(svcOf("diff-external-ips-local", "10.96.201.8", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30151)), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.22"}
			s.Spec.ExternalTrafficPolicy = etpLocal
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.52"), remote("10.244.1.52")}}},
		{svc: with(svcOf("diff-affinity", "10.96.201.9", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30161), nodePort(udp("udp", 80), 30162)), func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.61"), remote("10.244.1.61")}}},
		{svc: with(svcOf("diff-internal-local", "10.96.201.10", v1.ServiceTypeClusterIP, tcp("http", 80)), func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.71"), remote("10.244.1.71")}}},
		{svc: with(svcOf("diff-internal-local-none", "10.96.201.11", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30181)), func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}), slices: [][]discoveryv1.Endpoint{{remote("10.244.1.72")}}},
		{svc: svcOf("diff-terminating", "10.96.201.12", v1.ServiceTypeClusterIP, tcp("http", 80)),
			slices: [][]discoveryv1.Endpoint{{local("10.244.0.81"), ep("10.244.0.82", harness.NodeName, false, true, true), ep("10.244.0.83", harness.NodeName, false, false, true)}}},
		{svc: svcOf("diff-terminating-only", "10.96.201.13", v1.ServiceTypeClusterIP, tcp("http", 80)),
			slices: [][]discoveryv1.Endpoint{{ep("10.244.0.84", harness.NodeName, false, true, true), ep("10.244.1.84", "node-b", false, true, true)}}},
		{svc: svcOf("diff-topology", "10.96.201.14", v1.ServiceTypeClusterIP, tcp("http", 80)),
			slices: [][]discoveryv1.Endpoint{{hinted(local("10.244.0.91"), "zone-a"), hinted(remote("10.244.1.91"), "zone-b"), hinted(remote("10.244.1.92"), "zone-b")}}},
		{svc: svcOf("diff-two-slices", "10.96.201.15", v1.ServiceTypeClusterIP, tcp("http", 80)),
			slices: [][]discoveryv1.Endpoint{{local("10.244.0.93")}, {remote("10.244.1.93"), local("10.244.0.93")}}},
		{svc: svcOf("diff-no-endpoints", "10.96.201.16", v1.ServiceTypeClusterIP, tcp("http", 80))},
		{svc: with(svcOf("diff-headless", v1.ClusterIPNone, v1.ServiceTypeClusterIP, tcp("http", 80)), func(*v1.Service) {}),
			slices: [][]discoveryv1.Endpoint{{local("10.244.0.94")}}},
		{svc: with(svcOf("diff-external-name", "", v1.ServiceTypeExternalName), func(s *v1.Service) { s.Spec.ExternalName = "example.com" })},
		{svc: with(svcOf("diff-dual-stack", "10.96.201.19", v1.ServiceTypeNodePort, nodePort(tcp("http", 80), 30171), nodePort(udp("udp", 80), 30172)), func(s *v1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			s.Spec.ClusterIPs = []string{"10.96.201.19", "fd00:10:96::c913"}
		}), slices: [][]discoveryv1.Endpoint{{local("10.244.0.95")}}, v6: []discoveryv1.Endpoint{local("fd00:10:244::95"), remote("fd00:10:244:1::95")}},
	}
	ctx, cancel := apiCtxLong()
	defer cancel()
	cs := api.CS
	for _, it := range items {
		svc, err := cs.CoreV1().Services(harness.Namespace).Create(ctx, &it.svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create Service %s: %v", it.svc.Name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := apiCtxLong()
			defer cancel()
			if err := cs.CoreV1().Services(harness.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete Service %s: %v", svc.Name, err)
			}
		})
		if len(it.lb) > 0 {
			svc.Status.LoadBalancer.Ingress = it.lb
			if _, err := cs.CoreV1().Services(harness.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("Service %s: status: %v", svc.Name, err)
			}
		}
		var all []*discoveryv1.EndpointSlice
		for i, eps := range it.slices {
			all = append(all, sliceOf(svc, fmt.Sprintf("%s-%d", svc.Name, i), discoveryv1.AddressTypeIPv4, eps))
		}
		if len(it.v6) > 0 {
			all = append(all, sliceOf(svc, svc.Name+"-v6", discoveryv1.AddressTypeIPv6, it.v6))
		}
		for _, sl := range all {
			if _, err := cs.DiscoveryV1().EndpointSlices(harness.Namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create EndpointSlice %s: %v", sl.Name, err)
			}
			t.Cleanup(func() {
				ctx, cancel := apiCtxLong()
				defer cancel()
				if err := cs.DiscoveryV1().EndpointSlices(harness.Namespace).Delete(ctx, sl.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete EndpointSlice %s: %v", sl.Name, err)
				}
			})
		}
	}
}

// svcOf is a Service with a fixed cluster IP ("" for none), so that the dumps read the
// same on every run and differences.yaml can name exact lines.
func svcOf(name, ip string, typ v1.ServiceType, ports ...v1.ServicePort) v1.Service {
	return v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: harness.Namespace},
		Spec:       v1.ServiceSpec{Type: typ, Ports: ports, ClusterIP: ip},
	}
}

// nodePort sets a fixed node port.
func nodePort(p v1.ServicePort, n int32) v1.ServicePort {
	p.NodePort = n
	return p
}

func with(s v1.Service, edit func(*v1.Service)) v1.Service {
	edit(&s)
	return s
}

func ep(ip, node string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
		NodeName:   ptr.To(node),
	}
}

func hinted(e discoveryv1.Endpoint, zone string) discoveryv1.Endpoint {
	e.Zone = ptr.To(zone)
	e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	return e
}

func sliceOf(svc *v1.Service, name string, family discoveryv1.AddressType, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: harness.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "kipvs-e2e",
		}},
		AddressType: family,
		Endpoints:   eps,
	}
	for _, p := range svc.Spec.Ports {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To[int32](harness.EchoPort)})
	}
	slices.SortFunc(sl.Endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
	return sl
}

func apiCtxLong() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}
