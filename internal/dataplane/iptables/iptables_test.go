package iptables

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
)

func TestSetNames(t *testing.T) {
	for _, s := range proxy.AllSets() {
		want := "KUBE-" + strings.ToUpper(s.String())
		if strings.HasSuffix(want, "-SCTP") {
			want += "-HASH" // upstream's SCTP node port sets are hash:ip,port
		}
		if got := SetName(inet.IPv4, s); got != want {
			t.Errorf("IPv4 name of %s = %s, want %s", s, got, want)
		}
		name := SetName(inet.IPv6, s)
		if len(name) > maxSetNameLen {
			t.Errorf("%s is %d characters", name, len(name))
		}
		if !strings.HasPrefix(name, "KUBE-6-") {
			t.Errorf("IPv6 set %s lacks the KUBE-6- prefix", name)
		}
	}
	if got := SetName(inet.IPv6, proxy.SetLoadBalancerSourceNet); got != "KUBE-6-LOAD-BALANCER-SOURCE-CID" {
		t.Errorf("truncated name = %s", got)
	}
	if got := SetName(inet.IPv4, proxy.SetLoadBalancerSourceNet); got != "KUBE-LOAD-BALANCER-SOURCE-CIDR" {
		t.Errorf("v4 name = %s", got)
	}
}

// Members sort by set as the sets' ipset names do, in both families (proxy.Set's order), so
// plans list them as they did when members were ipset text.
func TestSetOrderIsNameOrder(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		byValue := slices.Sorted(slices.Values(proxy.AllSets()))
		byName := slices.SortedFunc(slices.Values(proxy.AllSets()), func(a, b proxy.Set) int {
			return strings.Compare(SetName(f, a), SetName(f, b))
		})
		if !slices.Equal(byValue, byName) {
			t.Errorf("%s: sets by value %v, by name %v", f, byValue, byName)
		}
	}
}

// The set comments stay upstream kube-proxy's text, single quotes included.
func TestSetCommentsAreUpstreams(t *testing.T) {
	want := map[proxy.Set]string{
		proxy.SetNodePortSCTP:      "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
		proxy.SetNodePortLocalSCTP: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
	}
	for s, w := range want {
		if got := s.Comment(); got != w {
			t.Errorf("set %s comment %q, want upstream's %q", s, got, w)
		}
	}
	for _, s := range proxy.AllSets() {
		if s.Comment() == s.String() {
			t.Errorf("set %s has no comment", s)
		}
	}
}

// netfilter.Quote, which the rules' comments go through, must print a comment exactly as
// iptables-save does (xtables_save_string): bare when made only of letters, digits,
// underscores and dashes, otherwise in double quotes with every double quote, backslash and
// single quote escaped by a backslash. Checked against iptables 1.8.9, nft and legacy.
func TestQuoteComment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"KUBE-NODE-PORT", "KUBE-NODE-PORT"},
		{"under_score-9", "under_score-9"},
		{"", `""`},
		{"kubernetes service portals", `"kubernetes service portals"`},
		{"a.b", `"a.b"`},
		{"ip:port", `"ip:port"`},
		{"x=y+z/1", `"x=y+z/1"`},
		{"a+b=c,d/e:f", `"a+b=c,d/e:f"`},
		{"has space", `"has space"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"it's", `"it\'s"`},
		{proxy.SetNodePortSCTP.Comment(),
			`"Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'"`},
		{proxy.SetNodePortLocalSCTP.Comment(),
			`"Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type \'hash ip:port\'"`},
	} {
		if got := netfilter.Quote(tc.in); got != tc.want {
			t.Errorf("netfilter.Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// membersOfEverySet returns members of every set of family f, in the shapes proxy builds
// (host and wider source nets, SCTP node ports on node addresses, bare node ports).
func membersOfEverySet(f inet.Family) []proxy.Member {
	a := func(v4, v6 string) netip.Addr {
		if f == inet.IPv6 {
			return netip.MustParseAddr(v6)
		}
		return netip.MustParseAddr(v4)
	}
	p := func(v4, v6 string) netip.Prefix {
		if f == inet.IPv6 {
			return netip.MustParsePrefix(v6)
		}
		return netip.MustParsePrefix(v4)
	}
	vip, lbIP, node, ep := a("10.96.0.10", "fd00::10"), a("203.0.113.9", "2001:db8::9"), a("192.168.1.10", "fd00:1::10"), a("10.244.1.5", "fd00:10:244::5")
	ipPort := func(s proxy.Set, addr netip.Addr, proto inet.Protocol, port uint16) proxy.Member {
		return proxy.Member{Set: s, Addr: addr, Proto: proto, Port: port}
	}
	lbSrc := func(s proxy.Set) proxy.Member { return ipPort(s, lbIP, inet.TCP, 443) }
	withNet := func(n netip.Prefix) proxy.Member {
		m := lbSrc(proxy.SetLoadBalancerSourceNet)
		m.Source = n
		return m
	}
	srcIP := lbSrc(proxy.SetLoadBalancerSourceIP)
	srcIP.Source = proxy.HostSource(lbIP)
	loop := ipPort(proxy.SetLoopBack, ep, inet.UDP, 5353)
	loop.Source = proxy.HostSource(ep)
	return []proxy.Member{
		ipPort(proxy.SetClusterIP, vip, inet.TCP, 80),
		ipPort(proxy.SetClusterIP, vip, inet.UDP, 53),
		ipPort(proxy.SetClusterIP, vip, inet.SCTP, 3868),
		ipPort(proxy.SetExternalIP, lbIP, inet.TCP, 80),
		ipPort(proxy.SetExternalIPLocal, lbIP, inet.UDP, 80),
		ipPort(proxy.SetLoadBalancer, lbIP, inet.TCP, 443),
		ipPort(proxy.SetLoadBalancerLocal, lbIP, inet.TCP, 443),
		lbSrc(proxy.SetLoadBalancerFW),
		withNet(p("198.51.100.0/24", "2001:db8:1::/48")),
		withNet(p("198.51.100.7/32", "2001:db8:2::7/128")),
		srcIP,
		loop,
		{Set: proxy.SetNodePortTCP, Port: 30080},
		{Set: proxy.SetNodePortLocalTCP, Port: 30081},
		{Set: proxy.SetNodePortUDP, Port: 30053},
		{Set: proxy.SetNodePortLocalUDP, Port: 30054},
		ipPort(proxy.SetNodePortSCTP, node, inet.SCTP, 31868),
		ipPort(proxy.SetNodePortLocalSCTP, node, inet.SCTP, 31869),
		{Set: proxy.SetHealthCheckNodePort, Port: 32000},
		{Set: proxy.SetIPVSIPs, Addr: vip},
	}
}

// Members written through the dataplane read back as the same typed members from the
// kernel's listing (the fake's here; iptables_kernel_test.go runs the same on the kernel), so
// a full sync finds nothing to change; and every set of the family exists once created.
func TestMembersRoundTrip(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) { roundTrip(t, New(f, ipsettest.NewFake(), netfiltertest.NewFake(f)), f, nil) })
	}
}

// roundTrip creates every set of family f through p, adds a member of every shape, reads
// them back, and deletes them; afterAdd (if not nil) runs while they are in.
func roundTrip(t *testing.T, p *Filter, f inet.Family, afterAdd func()) {
	t.Helper()
	got, missing, err := p.Members()
	if err != nil || len(got) != 0 || len(missing) != len(proxy.AllSets()) {
		t.Fatalf("fresh node: members %v, missing %d sets, err %v", got, len(missing), err)
	}
	want := membersOfEverySet(f)
	if res := runTx(t, p, dataplane.Tx{CreateSets: missing, AddMembers: want}); res.Created != len(missing) || res.Added != len(want) {
		t.Fatalf("created %d of %d sets, added %d of %d members", res.Created, len(missing), res.Added, len(want))
	}
	got, missing, err = p.Members()
	if err != nil || len(missing) > 0 {
		t.Fatalf("read back: missing %v, err %v", missing, err)
	}
	if !maps.Equal(got, setOf(want)) {
		t.Errorf("read back:\n%v\nwant:\n%v", slices.SortedFunc(maps.Keys(got), proxy.Member.Compare), want)
	}
	if afterAdd != nil {
		afterAdd()
	}
	if res := runTx(t, p, dataplane.Tx{DeleteMembers: want}); res.Deleted != len(want) {
		t.Fatalf("delete: %d of %d deleted", res.Deleted, len(want))
	}
	if got, _, _ := p.Members(); len(got) != 0 {
		t.Errorf("left after delete: %v", got)
	}
}

func setOf(ms []proxy.Member) map[proxy.Member]struct{} {
	out := map[proxy.Member]struct{}{}
	for _, m := range ms {
		out[m] = struct{}{}
	}
	return out
}

// runTx runs tx on p and fails the test when any part of it failed.
func runTx(t testing.TB, p *Filter, tx dataplane.Tx) dataplane.TxResult {
	t.Helper()
	res := p.Run(context.Background(), &tx)
	if len(res.Failed) > 0 || res.Rules != nil {
		t.Fatalf("run %+v: failed sets %v, rules: %v", tx, res.Failed, res.Rules)
	}
	return res
}

// TestRunFailureStaysWithItsSet: in one transaction, a set the kernel refuses to create
// gets none of its members (the error says why) and a delete batch that fails is that
// set's alone; every other set, and the rules, are applied.
func TestRunFailureStaysWithItsSet(t *testing.T) {
	sets := ipsettest.NewFake()
	p := New(inet.IPv4, sets, netfiltertest.NewFake(inet.IPv4))
	_, missing, err := p.Members()
	if err != nil {
		t.Fatal(err)
	}
	nodePort := SetName(inet.IPv4, proxy.SetNodePortTCP)
	loop := SetName(inet.IPv4, proxy.SetLoopBack)
	in := faulty.New(1, 1)
	in.SetFilter(func(op string) bool {
		return op == "ipset create "+nodePort || strings.HasPrefix(op, "ipset delete ") && strings.HasSuffix(op, " from "+loop)
	})
	sets.SetFaulty(in)

	all := membersOfEverySet(inet.IPv4)
	perSet := map[proxy.Set]int{}
	for _, m := range all {
		perSet[m.Set]++
	}
	res := p.Run(context.Background(), &dataplane.Tx{CreateSets: missing, AddMembers: all, Rules: p.Rules(&proxy.Filter{})})
	if res.Created != len(missing)-1 || res.Added != len(all)-perSet[proxy.SetNodePortTCP] || res.Rules != nil {
		t.Errorf("created %d of %d sets, added %d of %d members, rules: %v", res.Created, len(missing), res.Added, len(all), res.Rules)
	}
	if f := res.FailedSets(dataplane.StepCreate); len(f) != 1 || f[proxy.SetNodePortTCP] == nil {
		t.Errorf("failed creates: %v", f)
	}
	add := res.FailedSets(dataplane.StepAdd)
	if len(add) != 1 || add[proxy.SetNodePortTCP] == nil || !strings.Contains(add[proxy.SetNodePortTCP].Error(), "was not created") {
		t.Errorf("failed adds: %v", add)
	}

	res = p.Run(context.Background(), &dataplane.Tx{DeleteMembers: all})
	del := res.FailedSets(dataplane.StepDelete)
	if len(del) != 2 || del[proxy.SetNodePortTCP] == nil || del[proxy.SetLoopBack] == nil {
		t.Errorf("failed deletes: %v", res.Failed)
	}
	want := len(all) - perSet[proxy.SetNodePortTCP] - perSet[proxy.SetLoopBack]
	if res.Deleted != want {
		t.Errorf("deleted %d members, want %d", res.Deleted, want)
	}
	got, _, err := p.Members()
	if err != nil {
		t.Fatal(err)
	}
	for m := range got {
		if m.Set != proxy.SetLoopBack {
			t.Errorf("member %s left in a set whose delete succeeded", m)
		}
	}
}
