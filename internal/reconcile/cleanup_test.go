package reconcile

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

var excluded = []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}

func (e *env) cleanupInput() CleanupInput {
	return CleanupInput{
		IPVS: e.ipvs, Dummy: e.dummy,
		Filter:       iptables.NewCleaner(e.ipset, []iptables.RuleHandle{{Name: "iptables", NF: e.nf}}),
		NodeAddrs:    e.opts.NodePortAddresses,
		ExcludeCIDRs: excluded,
	}
}

// whole is the fake kernel with the full nat and filter tables (foreign chains included), as
// iptables-save shows them.
func (e *env) whole() string {
	return e.dump() + e.nf.Save(netfilter.TableNAT) + "--\n" + e.nf.Save(netfilter.TableFilter)
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func tcpKey(ip string, port uint16) ipvs.ServiceKey {
	return ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr(ip), Port: port}
}

// A full proxy run followed by cleanup leaves the whole kernel as it was before the run,
// foreign objects included; planning alone (--dry-run) changes nothing; a second cleanup has
// nothing to do.
func TestCleanupRestoresPreRunState(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ExcludeCIDRs = excluded })
	// Foreign: a keepalived-style virtual server on a node address, one in excludeCIDRs,
	// somebody's ipset, somebody's chain.
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("192.168.1.10", 443), Scheduler: "wlc"}))
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("172.20.0.1", 80), Scheduler: "rr"}))
	e.must(e.ipvs.AddDestination(tcpKey("172.20.0.1", 80), ipvs.Destination{Addr: netip.MustParseAddr("10.1.0.1"), Port: 80, Weight: 1}))
	e.must(e.ipset.Create(ipset.Set{Name: "FOREIGN", Type: ipset.HashIP}))
	e.must(e.ipset.Add("FOREIGN", ipset.Entry{IP: netip.MustParseAddr("10.9.9.9")}))
	e.must(e.nf.Restore("*filter\n:FOREIGN - [0:0]\n-A FOREIGN -s 10.9.9.9/32 -j ACCEPT\n-A INPUT -j FOREIGN\nCOMMIT\n"))
	before := e.whole()
	if !strings.Contains(before, "-A INPUT -j FOREIGN") {
		t.Fatalf("the foreign chain is not in the compared state:\n%s", before)
	}

	e.set(svc("web", "10.96.0.10", nodePort(30080)), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
	e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 53, "10.244.1.7"))
	e.full()
	running := e.whole()
	if running == before {
		t.Fatal("the proxy run programmed nothing; the test would prove nothing")
	}

	in := e.cleanupInput()
	plan, err := PlanCleanup(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "cleanup-plan.golden", plan.String())
	if got := e.whole(); got != running {
		t.Errorf("planning (--dry-run) changed the kernel:\n%s\nwant\n%s", got, running)
	}
	if err := ExecuteCleanup(e.ctx, in, plan); err != nil {
		t.Fatal(err)
	}
	if got := e.whole(); got != before {
		t.Errorf("after cleanup the kernel differs from its pre-run state:\n%s\nwant\n%s", got, before)
	}

	again, err := PlanCleanup(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || again.String() != "nothing to clean up\n" {
		t.Errorf("second cleanup plan:\n%s", again)
	}
	if err := ExecuteCleanup(e.ctx, in, again); err != nil {
		t.Errorf("second cleanup: %v", err)
	}
}

// State upstream kube-proxy left (same names): its bound VIPs and sets are removed; a
// virtual server inside excludeCIDRs stays even though its VIP is bound and in a kipvs set,
// which would otherwise make it kipvs's.
func TestCleanupUpstreamLeftoversAndExcludeCIDRs(t *testing.T) {
	e := newEnv(t)
	_, err := e.dummy.EnsureLink()
	e.must(err)
	for _, ip := range []string{"10.96.0.99", "172.20.0.1"} {
		_, err := e.dummy.EnsureAddress(netip.MustParseAddr(ip))
		e.must(err)
	}
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("10.96.0.99", 80), Scheduler: "rr"}))
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("172.20.0.1", 80), Scheduler: "rr"}))
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("192.168.1.10", 31000), Scheduler: "rr"}))
	e.must(e.ipset.Create(ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort}))
	e.must(e.ipset.Add("KUBE-CLUSTER-IP",
		ipset.Entry{IP: netip.MustParseAddr("10.96.0.99"), Protocol: inet.TCP, Port: 80},
		ipset.Entry{IP: netip.MustParseAddr("172.20.0.1"), Protocol: inet.TCP, Port: 80}))
	e.must(e.ipset.Create(ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort}))
	e.must(e.ipset.Add("KUBE-NODE-PORT-TCP", ipset.Entry{Port: 31000}))

	in := e.cleanupInput()
	plan, err := PlanCleanup(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := "delete virtual server TCP 10.96.0.99:80\ndelete virtual server TCP 192.168.1.10:31000\n" +
		"delete link kube-ipvs0\ndestroy ipset KUBE-CLUSTER-IP\ndestroy ipset KUBE-NODE-PORT-TCP\n"
	if got := plan.String(); got != want {
		t.Errorf("plan:\n%s\nwant\n%s", got, want)
	}
	if err := ExecuteCleanup(e.ctx, in, plan); err != nil {
		t.Fatal(err)
	}
	table, err := e.ipvs.Table()
	e.must(err)
	var left []string
	for _, en := range table {
		left = append(left, en.Service.ServiceKey.String())
	}
	if !slices.Equal(left, []string{"TCP 172.20.0.1:80"}) {
		t.Errorf("virtual servers left = %v, want only the excluded one", left)
	}
}

// With no IPVS in the kernel (ip_vs not loaded) cleanup still removes rules, sets and the link.
func TestCleanupWithoutIPVS(t *testing.T) {
	e := newEnv(t)
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	in := e.cleanupInput()
	in.IPVS = nil
	plan, err := PlanCleanup(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.VirtualServers) != 0 || len(plan.Rules) != 1 || plan.Link == "" || len(plan.Sets) == 0 {
		t.Fatalf("plan without IPVS:\n%s", plan)
	}
	if err := ExecuteCleanup(e.ctx, in, plan); err != nil {
		t.Fatal(err)
	}
	if d, err := e.ipset.Dump(); err != nil || strings.Contains(d, "KUBE-") {
		t.Errorf("sets left: %q %v", d, err)
	}
}

// kipvs cleanup's cleaner joins both filter backends' (cmd/kipvs): with the iptables
// backend's KUBE-* ipset and the nftables backend's table ip kipvs on the node, the plan
// names both, a virtual server whose VIP is only in the table's set cluster-ip is kipvs's,
// and executing the plan removes everything without error (each cleaner removes only the
// sets it owns: the iptables cleaner must not try to destroy an ipset named "ip kipvs").
func TestCleanupBothFilterBackends(t *testing.T) {
	e := newEnv(t)
	e.must(e.ipset.Create(ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort}))
	e.must(e.ipset.Add("KUBE-CLUSTER-IP", ipset.Entry{IP: netip.MustParseAddr("10.96.0.99"), Protocol: inet.TCP, Port: 80}))
	table := nfttest.New(inet.IPv4)
	p := nftables.New(table)
	m := proxy.Member{Set: proxy.SetClusterIP, Addr: netip.MustParseAddr("10.96.0.98"), Proto: inet.TCP, Port: 80}
	res := p.Run(e.ctx, &dataplane.Tx{CreateSets: p.Sets(), AddMembers: []proxy.Member{m},
		Rules: p.Rules(proxy.FilterOf(e.opts, []proxy.Set{proxy.SetClusterIP}, nil))})
	if res.Rules != nil || len(res.Failed) > 0 {
		t.Fatalf("program the nftables table: rules %v, sets %v", res.Rules, res.Failed)
	}
	e.must(e.ipvs.AddService(ipvs.Service{ServiceKey: tcpKey("10.96.0.98", 80), Scheduler: "rr"}))

	in := e.cleanupInput()
	in.Filter = dataplane.JoinCleaners(in.Filter, nftables.NewCleaner([]nft.Interface{table}, nil))
	plan, err := PlanCleanup(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"remove nftables ip kipvs rules and chains\n", "delete virtual server TCP 10.96.0.98:80\n",
		"destroy ipset KUBE-CLUSTER-IP\n", "destroy ipset ip kipvs\n"} {
		if !strings.Contains(plan.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	if err := ExecuteCleanup(e.ctx, in, plan); err != nil {
		t.Fatalf("cleanup of both backends' objects: %v", err)
	}
	if _, err := table.Chains(e.ctx); !kerr.IsNotFound(err) {
		t.Errorf("table ip kipvs after cleanup: %v, want it gone", err)
	}
	if names, err := e.ipset.ListNames(); err != nil || len(names) > 0 {
		t.Errorf("ipsets after cleanup: %v %v", names, err)
	}
	if again, err := PlanCleanup(e.ctx, in); err != nil || !again.Empty() {
		t.Errorf("second cleanup plan: %v\n%s", err, again)
	}
}
