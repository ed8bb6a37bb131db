//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/e2e/oracle"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// switchCase is the corpus case name under which e2e/oracle's differences are looked up
// for the live switch (an entry limited to other cases does not apply).
const switchCase = "live-switch"

// switchLoopInterval paces each of the scenario's eight request loops: half the other
// scenarios' rate, so that under TCG kube-proxy's syncs (tens of seconds, mostly starting
// ipset and iptables processes) are not slowed further.
const switchLoopInterval = 200 * time.Millisecond

// switchKubeProxyLimit bounds kube-proxy's start to its first sync of every family: under
// TCG it took 65 to 82 s (startLimit, kipvs's, is 90 s).
const switchKubeProxyLimit = 3 * time.Minute

// The live switch: a node runs kube-proxy (IPVS mode), which is replaced by kipvs with the
// same flags, which is replaced by kube-proxy again, while clients on the node, in a pod and
// outside the node open new connections to a ClusterIP and a NodePort (TCP; UDP from the
// node too) and two connections held through the ClusterIP and the NodePort stay open.
//
//   - No request fails and the held connections carry data at every stage and at the end.
//   - kipvs's first sync (its adoption plan, logged at -v 4) changes only what a deliberate
//     difference from kube-proxy explains: each change must be visible in the kernel dump
//     (IPVS, KUBE-* sets, KUBE-* rules, kube-ipvs0, sysctls) taken before kipvs started and
//     after its first sync, and every line of that dump's difference must be explained by
//     e2e/oracle's differences.yaml. kipvs_sync_objects_changed_total counts exactly the
//     plan's changes, through a periodic full sync after it: nothing else was changed.
//   - kube-proxy's first sync after kipvs is logged (what it changes back), and it must
//     restore kube-proxy's own state exactly: kipvs leaves nothing kube-proxy keeps.
func TestLiveSwitchKubeProxy(t *testing.T) {
	s := newScenario(t)
	diffs, err := oracle.Load()
	if err != nil {
		t.Fatal(err)
	}
	sysctls := harness.Sysctls(t)
	t.Cleanup(func() { harness.RestoreSysctls(t, sysctls) })

	w := newSwitchTraffic(t, s)

	// kube-proxy as a node would run it, with the scenarios' settings.
	kpArgs := switchKubeProxyArgs(s.env)
	kp := harness.StartKubeProxy(t, s.env, kpArgs...)
	d := kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy programmed the Service", harness.IPVSHas(w.want))
	t.Logf("kube-proxy synced IPv4 %.1fs after start", d.Seconds())
	families := []string{"IPv4"}
	if strings.Contains(kp.Log(), "kube-proxy running in dual-stack mode") {
		families = append(families, "IPv6")
		d += kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy's first IPv6 sync", switchFamiliesSynced(families))
		t.Logf("kube-proxy synced both families %.1fs after start", d.Seconds())
	}

	w.start()
	waitLoops, ping := w.wait, w.ping
	waitLoops(time.Time{}, 5)
	ping("under kube-proxy")

	// kube-proxy -> kipvs.
	byKubeProxy := harness.ReadOracleDump(t)
	kp.Stop(t)               // SIGTERM, as the kubelet or systemd stops it
	waitLoops(time.Now(), 3) // the kernel serves on its own while no proxy runs
	k := harness.StartKipvs(t, s.env, harness.RunArgs(s.env, "--v=4", "--logging-format=json")...)
	d = k.WaitSynced(t, startLimit, "kipvs's first sync", switchFamiliesSynced(families))
	t.Logf("kipvs synced %.1fs after start", d.Seconds())
	byKipvs := harness.ReadOracleDump(t)
	ping("kipvs adopted kube-proxy's state")
	plans := harness.AdoptionPlans(k.Log())
	checkSwitchAdoption(t, diffs, plans, byKubeProxy, byKipvs)

	// kipvs keeps what it adopted: a periodic full sync (every family) changes nothing more,
	// so kipvs_sync_objects_changed_total counts the adoption plans' changes and no other.
	m := k.Metrics(t)
	poll.Until(t, 2*harness.SyncPeriod+programLimit, "a periodic full sync of every family after adoption", func() (bool, string) {
		now, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		for _, f := range families {
			fam := `ip_family="` + f + `"`
			if now.Get("kipvs_sync_full_total", fam) <= m.Get("kipvs_sync_full_total", fam) {
				return false, "no full sync of " + f + " yet"
			}
		}
		return true, ""
	})
	k.WaitSynced(t, programLimit, "kipvs idle after its periodic full sync", nil)
	changed := k.Metrics(t).Get("kipvs_sync_objects_changed_total")
	planned := 0
	for _, p := range plans {
		for _, c := range p.Changes {
			if !strings.HasPrefix(c, "conntrack delete ") { // flows, not kernel objects
				planned++
			}
		}
	}
	if changed != float64(planned) {
		t.Errorf("kipvs changed %v kernel objects (kipvs_sync_objects_changed_total), but its adoption plans hold %d changes: it changed something after adopting", changed, planned)
	} else {
		t.Logf("kipvs changed %d kernel objects in all, all of them in its adoption plans", planned)
	}
	waitLoops(time.Now(), 5)
	ping("under kipvs")

	// kipvs -> kube-proxy.
	byKipvs = harness.ReadOracleDump(t)
	k.Stop(t)
	waitLoops(time.Now(), 3)
	kp = harness.StartKubeProxy(t, s.env, kpArgs...)
	d = kp.WaitSynced(t, switchKubeProxyLimit, "kube-proxy's first sync after kipvs", switchFamiliesSynced(families))
	t.Logf("kube-proxy synced %.1fs after start", d.Seconds())
	back := harness.ReadOracleDump(t)
	if diff := back.Diff(byKipvs); diff == "" {
		t.Logf("kube-proxy's first sync after kipvs changed nothing in the dump")
	} else {
		t.Logf("kube-proxy's first sync after kipvs changed (- kipvs's, + kube-proxy's):\n%s", diff)
	}
	if diff := back.Diff(byKubeProxy); diff != "" {
		t.Errorf("after kube-proxy -> kipvs -> kube-proxy the kernel differs from kube-proxy's own state (- before, + after):\n%s", diff)
	}
	waitLoops(time.Now(), 5)
	ping("back under kube-proxy")

	w.finish("kube-proxy -> kipvs -> kube-proxy")
	kp.Stop(t) // SIGTERM, as the kubelet or systemd stops it
}

// switchTraffic is a live switch's Service and traffic: a NodePort Service (TCP and UDP)
// over two backends; once started, eight request loops (new connections from the node, a
// pod and the external client to the ClusterIP and the NodePort, TCP, and UDP from the
// node) and two connections held through the ClusterIP (from the pod) and the NodePort
// (from the external client).
type switchTraffic struct {
	t *testing.T
	// want are the Service's virtual servers, for IPVSHas.
	want map[string]map[string]int
	// The clients and the addresses they use.
	node, pod, ext               harness.Client
	clusterIP, nodeIP, extNodeIP netip.AddrPort
	held                         []switchHeld
	loops                        []*harness.Loop
}

// switchHeld is a connection held open across a switch.
type switchHeld struct {
	what string
	h    *harness.Held
}

// newSwitchTraffic creates the Service, its backends and the clients in s (no traffic
// yet: start).
func newSwitchTraffic(t *testing.T, s *scenario) *switchTraffic {
	t.Helper()
	backends := s.pods("lsw", 10, 2)
	client := s.topo.AddPod(t, "lswc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	ext := s.topo.AddExternal(t)
	vip := netip.MustParseAddr("10.96.30.10")
	const nodePort = 30090
	svc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "live-switch", Type: v1.ServiceTypeNodePort, ClusterIP: vip,
		Ports: []harness.Port{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: nodePort},
			{Name: "udp", Protocol: v1.ProtocolUDP, Port: 80, NodePort: nodePort},
		},
	})
	s.api.SetEndpoints(t, svc, backends...)
	w := &switchTraffic{t: t, want: map[string]map[string]int{},
		node: s.topo.NodeClient(), pod: harness.In(&client.NS), ext: harness.In(ext),
		clusterIP: ap(vip, 80), nodeIP: ap(harness.NodeIP, nodePort), extNodeIP: ap(harness.ExternalNodeIP.Addr(), nodePort)}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		w.want[vs(p, vip, 80)] = harness.Weights(1, backends...)
		for _, ip := range []netip.Addr{harness.NodeIP, harness.ExternalNodeIP.Addr()} {
			w.want[vs(p, ip, nodePort)] = harness.Weights(1, backends...)
		}
	}
	return w
}

// start opens the held connections and starts the request loops; the Service must be
// programmed.
func (w *switchTraffic) start() {
	t := w.t
	t.Helper()
	w.held = []switchHeld{
		{what: "pod -> ClusterIP", h: switchHold(t, w.pod, w.clusterIP)},
		{what: "external -> NodePort", h: switchHold(t, w.ext, w.extNodeIP)},
	}
	w.loops = []*harness.Loop{
		harness.StartLoop(t, "node -> tcp ClusterIP", w.node, harness.TCP, w.clusterIP, switchLoopInterval),
		harness.StartLoop(t, "node -> udp ClusterIP", w.node, harness.UDP, w.clusterIP, switchLoopInterval),
		harness.StartLoop(t, "node -> tcp NodePort", w.node, harness.TCP, w.nodeIP, switchLoopInterval),
		harness.StartLoop(t, "node -> udp NodePort", w.node, harness.UDP, w.nodeIP, switchLoopInterval),
		harness.StartLoop(t, "pod -> tcp ClusterIP", w.pod, harness.TCP, w.clusterIP, switchLoopInterval),
		harness.StartLoop(t, "pod -> tcp NodePort", w.pod, harness.TCP, w.nodeIP, switchLoopInterval),
		harness.StartLoop(t, "external -> tcp ClusterIP", w.ext, harness.TCP, w.clusterIP, switchLoopInterval),
		harness.StartLoop(t, "external -> tcp NodePort", w.ext, harness.TCP, w.extNodeIP, switchLoopInterval),
	}
}

// wait waits until every loop has completed n requests started at or after since.
func (w *switchTraffic) wait(since time.Time, n int) {
	w.t.Helper()
	for _, l := range w.loops {
		l.WaitSince(w.t, since, n, programLimit)
	}
}

// ping checks that every held connection still carries data.
func (w *switchTraffic) ping(phase string) {
	w.t.Helper()
	for _, c := range w.held {
		if err := c.h.Ping(); err != nil {
			w.t.Errorf("%s: the connection held %s (%s) was cut: %v", phase, c.what, c.h.Answer.Backend, err)
		}
	}
}

// finish stops the loops, fails the test for every loop with a failed request across the
// switches (named by across), and pings the held connections a last time.
func (w *switchTraffic) finish(across string) {
	t := w.t
	t.Helper()
	for _, l := range w.loops {
		l.Stop()
		sum := harness.Summarize(l.Results())
		t.Logf("%s: %s", l.Name, sum)
		if sum.Failed > 0 {
			t.Errorf("%s: %d of %d requests failed across %s: %v", l.Name, sum.Failed, sum.Total, across, sum.FirstErrors)
		}
	}
	w.ping("at the end")
}

// switchKubeProxyArgs are harness.RunArgs's settings as kube-proxy flags, in IPVS mode.
func switchKubeProxyArgs(env harness.Env) []string {
	return []string{
		"--proxy-mode=ipvs",
		"--kubeconfig", env.Kubeconfig,
		"--hostname-override", harness.NodeName,
		"--cluster-cidr", harness.ClusterCIDR.String(),
		"--ipvs-min-sync-period", "0",
		"--ipvs-sync-period", harness.SyncPeriod.String(),
		"--metrics-bind-address", harness.MetricsAddr,
		"--healthz-bind-address", harness.HealthAddr,
		"--bind-address-hard-fail",
	}
}

// switchHold opens a held connection, closed at the end of the test.
func switchHold(t *testing.T, c harness.Client, addr netip.AddrPort) *harness.Held {
	t.Helper()
	h, err := c.Hold(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// switchFamilies lists the IP families a proxy's metrics show a completed sync of.
func switchFamilies(m harness.Metrics) []string {
	var out []string
	for _, f := range []string{"IPv4", "IPv6"} {
		if m.Get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", `ip_family="`+f+`"`) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// switchFamiliesSynced is a WaitSynced condition: every family in want has completed a sync.
func switchFamiliesSynced(want []string) func() (bool, string) {
	return func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		if got := switchFamilies(m); !slices.Equal(got, want) {
			return false, fmt.Sprintf("families synced %v, want %v", got, want)
		}
		return true, ""
	}
}

// checkSwitchAdoption asserts what kipvs's first sync did to kube-proxy's state. Each change of
// the adoption plans must show in the dump's difference (a change that shows nowhere
// rewrote an object with what it was: kipvs saw a difference that is not there), and every
// line of the dump's difference must be explained by a deliberate difference in e2e/oracle
// (anything else is kipvs changing what kube-proxy had right).
func checkSwitchAdoption(t *testing.T, diffs oracle.Differences, plans []harness.AdoptionPlan, byKubeProxy, byKipvs harness.OracleDump) {
	t.Helper()
	onlyKP, onlyKipvs := byKubeProxy.SectionDiff(byKipvs)
	var planText strings.Builder
	for _, p := range plans {
		fmt.Fprintf(&planText, "%s:\n", p.Family)
		for _, c := range p.Changes {
			fmt.Fprintf(&planText, "  %s\n", c)
		}
		for _, r := range p.Rules {
			fmt.Fprintf(&planText, "  (rules) %s\n", r)
		}
	}
	if len(plans) == 0 {
		t.Logf("kipvs's adoption changed nothing (no adoption plan logged)")
	} else {
		t.Logf("kipvs's adoption plans:\n%s", planText.String())
	}
	if diff := byKipvs.Diff(byKubeProxy); diff != "" {
		t.Logf("kernel dump, kube-proxy's (-) vs after kipvs's first sync (+):\n%s", diff)
	} else {
		t.Logf("kernel dump identical before kipvs and after its first sync")
	}

	for _, p := range plans {
		for _, c := range p.Changes {
			if why := switchPlanChangeShows(p.Family, c, onlyKP, onlyKipvs); why != "" {
				t.Errorf("kipvs's adoption (%s) planned %q, but %s", p.Family, c, why)
			}
		}
	}
	var unexplained []string
	explained := map[string][]string{}
	for _, s := range harness.OracleSections {
		for _, side := range []struct {
			side  oracle.Side
			sign  string
			lines []string
		}{{oracle.KubeProxy, "-", onlyKP[s]}, {oracle.Kipvs, "+", onlyKipvs[s]}} {
			for _, l := range side.lines {
				if d := diffs.ExplainKernel(switchCase, s, side.side, l); d != nil {
					explained[d.ID] = append(explained[d.ID], s+" "+side.sign+" "+l)
				} else {
					unexplained = append(unexplained, s+" "+side.sign+" "+l)
				}
			}
		}
	}
	for _, id := range switchKeys(explained) {
		t.Logf("adoption difference explained by %s:\n  %s", id, strings.Join(explained[id], "\n  "))
	}
	if len(unexplained) > 0 {
		t.Errorf("kipvs's adoption changed kernel state that no deliberate difference (e2e/oracle/differences.yaml) explains (- kube-proxy's line, + kipvs's):\n  %s",
			strings.Join(unexplained, "\n  "))
	}
}

// switchPlanChangeShows checks that change, one line of family's adoption plan, shows in the dump
// difference (onlyKP: lines kipvs removed or replaced; onlyKipvs: lines it wrote); it
// returns why not, or "".
func switchPlanChangeShows(family, change string, onlyKP, onlyKipvs map[string][]string) string {
	f := strings.Fields(change)
	has := func(lines []string, match func(string) bool) bool { return slices.ContainsFunc(lines, match) }
	prefixed := func(p string) func(string) bool {
		return func(l string) bool { return l == p || strings.HasPrefix(l, p+" ") }
	}
	need := func(section string, kp, kipvs bool, match func(string) bool) string {
		var missing []string
		if kp && !has(onlyKP[section], match) {
			missing = append(missing, "no line of kube-proxy's "+section+" dump went")
		}
		if kipvs && !has(onlyKipvs[section], match) {
			missing = append(missing, "no line of kipvs's "+section+" dump came")
		}
		return strings.Join(missing, " and ")
	}
	switch {
	case change == "apply iptables rules":
		section := "iptables"
		if family == "IPv6" {
			section = "ip6tables"
		}
		if len(onlyKP[section]) == 0 && len(onlyKipvs[section]) == 0 {
			return "the " + section + " dump is the same before and after: kipvs rewrote the rules kube-proxy had"
		}
		return ""
	case strings.HasPrefix(change, "conntrack delete "):
		return ""
	case len(f) >= 3 && f[0] == "create" && f[1] == "set":
		return need("ipset", false, true, prefixed("create "+f[2]))
	case len(f) >= 4 && f[1] == "member" && (f[0] == "add" || f[0] == "del"):
		return need("ipset", f[0] == "del", f[0] == "add", prefixed("add "+f[2]+" "+f[3]))
	case len(f) == 2 && (f[0] == "bind" || f[0] == "unbind"):
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			return "the plan line does not parse: " + err.Error()
		}
		p := netip.PrefixFrom(a, a.BitLen()).String()
		return need("dummy", f[0] == "unbind", f[0] == "bind", func(l string) bool { return l == p })
	case len(f) >= 3 && (f[1] == "vs" || f[1] == "rs"):
		vsFlag, addr, err := switchIPVSService(f[2])
		if err != nil {
			return "the plan line does not parse: " + err.Error()
		}
		match := prefixed("-A " + vsFlag + " " + addr)
		if f[1] == "rs" {
			if len(f) < 5 {
				return "the plan line does not parse"
			}
			match = prefixed("-a " + vsFlag + " " + addr + " -r " + f[4])
		}
		return need("ipvs", f[0] != "add", f[0] != "delete", match)
	}
	return "the test does not know this kind of change"
}

// switchIPVSService turns a plan's virtual server key ("tcp/10.96.0.10:80", "udp/[fd00::1]:53")
// into ipvsadm -Sn's protocol flag and address.
func switchIPVSService(key string) (string, string, error) {
	proto, addr, ok := strings.Cut(key, "/")
	if !ok {
		return "", "", fmt.Errorf("virtual server %q", key)
	}
	flag, ok := map[string]string{"tcp": "-t", "udp": "-u", "sctp": "--sctp-service"}[strings.ToLower(proto)]
	if !ok {
		return "", "", fmt.Errorf("virtual server %q: protocol %q", key, proto)
	}
	return flag, addr, nil
}

func switchKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
