package nftables_test

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// oneOfEach is a member of every set of family f, with every shape of source.
func oneOfEach(f inet.Family) []proxy.Member {
	a, b := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.244.1.5")
	net, all := netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("0.0.0.0/0")
	if f == inet.IPv6 {
		a, b = netip.MustParseAddr("fd00:96::a"), netip.MustParseAddr("fd00:244::5")
		net, all = netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("::/0")
	}
	var out []proxy.Member
	for _, s := range proxy.AllSets() {
		m := proxy.Member{Set: s, Addr: a, Proto: inet.TCP, Port: 80}
		switch s {
		case proxy.SetNodePortTCP, proxy.SetNodePortLocalTCP, proxy.SetNodePortUDP, proxy.SetNodePortLocalUDP, proxy.SetHealthCheckNodePort:
			m = proxy.Member{Set: s, Port: 30080}
		case proxy.SetIPVSIPs:
			m = proxy.Member{Set: s, Addr: a}
		case proxy.SetNodePortSCTP, proxy.SetNodePortLocalSCTP:
			m.Proto = inet.SCTP
		case proxy.SetLoopBack, proxy.SetLoadBalancerSourceIP:
			m.Addr, m.Source = b, proxy.HostSource(b)
		case proxy.SetLoadBalancerSourceNet:
			out = append(out, proxy.Member{Set: s, Addr: a, Proto: inet.UDP, Port: 53, Source: all},
				proxy.Member{Set: s, Addr: a, Proto: inet.TCP, Port: 443, Source: proxy.HostSource(b)})
			m.Source = net
		}
		out = append(out, m)
	}
	return out
}

func set(ms ...proxy.Member) map[proxy.Member]struct{} {
	out := map[proxy.Member]struct{}{}
	for _, m := range ms {
		out[m] = struct{}{}
	}
	return out
}

// Members reads back exactly what Run added, for every set of both families, and what
// Run deleted is gone; sets not created are reported missing.
func TestMembersRoundTrip(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) { membersRoundTrip(t, nfttest.New(f)) })
	}
}

// membersRoundTrip is TestMembersRoundTrip over conn: the fake here, the kernel in the VM.
func membersRoundTrip(t *testing.T, conn nft.Interface) {
	ctx := context.Background()
	f := conn.Family()
	{
		{
			p := nftables.New(conn)
			_, missing, err := p.Members()
			if err != nil || len(missing) != len(proxy.AllSets()) {
				t.Fatalf("empty table: missing %d sets, err %v", len(missing), err)
			}
			ms := oneOfEach(f)
			res := p.Run(ctx, &dataplane.Tx{CreateSets: missing, AddMembers: ms})
			if len(res.Failed) > 0 || res.Created != len(missing) || res.Added != len(ms) {
				t.Fatalf("run: %+v", res)
			}
			got, missing, err := p.Members()
			if err != nil || len(missing) > 0 {
				t.Fatalf("missing %v, err %v", missing, err)
			}
			if !maps.Equal(got, set(ms...)) {
				t.Errorf("members read back:\n%v\nwant\n%v", slices.Collect(maps.Keys(got)), ms)
			}
			// ListMembers names them as the state document does.
			for _, s := range proxy.AllSets() {
				var want []string
				for _, m := range ms {
					if m.Set == s {
						want = append(want, p.MemberString(m))
					}
				}
				listed, err := p.ListMembers(ctx, nftables.SetName(s))
				slices.Sort(want)
				slices.Sort(listed)
				if err != nil || !slices.Equal(listed, want) {
					t.Errorf("ListMembers(%s) = %q, %v; want %q", nftables.SetName(s), listed, err, want)
				}
			}
			res = p.Run(ctx, &dataplane.Tx{DeleteMembers: ms[:3]})
			if len(res.Failed) > 0 || res.Deleted != 3 {
				t.Fatalf("delete: %+v", res)
			}
			got, _, _ = p.Members()
			if !maps.Equal(got, set(ms[3:]...)) {
				t.Errorf("after delete: %v", slices.Collect(maps.Keys(got)))
			}
		}
	}
}

// A Tx the kernel refuses as a whole is applied part by part: the failure is the failed
// set's alone, and the other parts reach the kernel.
func TestRunKeepsFailuresWithTheirSet(t *testing.T) {
	ctx := context.Background()
	fake := nfttest.New(inet.IPv4)
	p := nftables.New(fake)
	_, missing, _ := p.Members()
	if res := p.Run(ctx, &dataplane.Tx{CreateSets: missing}); len(res.Failed) > 0 {
		t.Fatal(res.Failed)
	}
	vip := netip.MustParseAddr("10.96.0.1")
	add := proxy.Member{Set: proxy.SetClusterIP, Addr: vip, Proto: inet.TCP, Port: 443}
	gone := proxy.Member{Set: proxy.SetIPVSIPs, Addr: netip.MustParseAddr("10.96.0.99")} // not in the set
	f := proxy.FilterOf(&proxy.Options{Family: inet.IPv4, MasqueradeBit: 14}, []proxy.Set{proxy.SetClusterIP}, nil)
	res := p.Run(ctx, &dataplane.Tx{AddMembers: []proxy.Member{add}, Rules: p.Rules(f), DeleteMembers: []proxy.Member{gone}})
	if res.Added != 1 || res.Rules != nil || len(res.Failed) != 1 {
		t.Fatalf("result %+v", res)
	}
	if fl := res.Failed[0]; fl.Set != proxy.SetIPVSIPs || fl.Step != dataplane.StepDelete || !kerr.IsNotFound(fl.Err) {
		t.Errorf("failure %+v (%v), want the ipvs-ips delete, not found", fl, fl.Err)
	}
	got, _, _ := p.Members()
	if !maps.Equal(got, set(add)) {
		t.Errorf("members %v", got)
	}
	obs, err := p.ObserveRules(ctx)
	if err != nil || obs.String() != p.Rules(f).String() {
		t.Errorf("rules not applied (%v):\n%s", err, obs)
	}
}

// A refused set creation keeps that set's members out and is reported as a creation
// failure; the other set is created and filled.
func TestRunNotCreatedSetGetsNoMembers(t *testing.T) {
	ctx := context.Background()
	fake := nfttest.New(inet.IPv4)
	p := nftables.New(fake)
	in := faulty.New(1, 1)
	in.SetFilter(func(op string) bool { return strings.HasPrefix(op, "nft run") })
	fake.SetFaulty(in)
	specs := p.Sets()
	var cluster, ips dataplane.SetSpec
	for _, s := range specs {
		switch s.Set {
		case proxy.SetClusterIP:
			cluster = s
		case proxy.SetIPVSIPs:
			ips = s
		}
	}
	tx := &dataplane.Tx{CreateSets: []dataplane.SetSpec{cluster, ips}, AddMembers: []proxy.Member{
		{Set: proxy.SetClusterIP, Addr: netip.MustParseAddr("10.96.0.1"), Proto: inet.TCP, Port: 443},
		{Set: proxy.SetIPVSIPs, Addr: netip.MustParseAddr("10.96.0.1")}}}
	res := p.Run(ctx, tx)
	if res.Created != 0 || res.Added != 0 || len(res.Failed) != 4 {
		t.Fatalf("every transaction refused: %+v", res)
	}
	if res.Failed[0].Step != dataplane.StepCreate || res.Failed[2].Step != dataplane.StepAdd ||
		!strings.Contains(res.Failed[2].Err.Error(), "was not created") {
		t.Errorf("failures %+v", res.Failed)
	}
	fake.SetFaulty(nil)
	if res := p.Run(ctx, tx); res.Created != 2 || res.Added != 2 || len(res.Failed) > 0 {
		t.Errorf("after the faults: %+v", res)
	}
}

// Drift of the rules is seen: a rule deleted behind kipvs's back, a chain added.
func TestObserveRulesSeesDrift(t *testing.T) {
	ctx := context.Background()
	fake := nfttest.New(inet.IPv4)
	p := nftables.New(fake)
	_, missing, _ := p.Members()
	f := proxy.FilterOf(&proxy.Options{Family: inet.IPv4, MasqueradeBit: 14}, proxy.AllSets(), nil)
	want := p.Rules(f)
	if res := p.Run(ctx, &dataplane.Tx{CreateSets: missing, Rules: want}); res.Rules != nil {
		t.Fatal(res.Rules)
	}
	tx := fake.NewTransaction()
	tx.Flush(&knftables.Chain{Name: "services"})
	tx.Add(&knftables.Chain{Name: "intruder"})
	if err := fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	got, err := p.ObserveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := want.Diff(got)
	if len(d) != 2 || !strings.HasPrefix(d[0], "chain services: rules") || d[1] != "chain intruder: not kipvs's" {
		t.Errorf("diff %q", d)
	}
	if got.String() == want.String() {
		t.Error("texts equal")
	}
}

// The cleaner removes kipvs's chains first, then its table with its sets; a foreign table
// goes with the rules; both are reported only while they exist.
func TestCleaner(t *testing.T) {
	ctx := context.Background()
	own := nfttest.New(inet.IPv4)
	p := nftables.New(own)
	_, missing, _ := p.Members()
	m := proxy.Member{Set: proxy.SetIPVSIPs, Addr: netip.MustParseAddr("10.96.0.1")}
	f := proxy.FilterOf(&proxy.Options{Family: inet.IPv4, MasqueradeBit: 14}, []proxy.Set{proxy.SetIPVSIPs}, nil)
	if res := p.Run(ctx, &dataplane.Tx{CreateSets: missing, AddMembers: []proxy.Member{m}, Rules: p.Rules(f)}); res.Rules != nil || len(res.Failed) > 0 {
		t.Fatal(res)
	}
	c := nftables.NewCleaner([]nft.Interface{own, nfttest.New(inet.IPv6)}, nil)
	o, err := c.Owned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Rules, []string{"nftables ip kipvs"}) || !slices.Equal(o.Sets, []string{"ip kipvs"}) || !maps.Equal(o.Members[inet.IPv4], set(m)) {
		t.Fatalf("owned %+v", o)
	}
	if err := c.RemoveRules(ctx, o.Rules); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := p.Members(); !maps.Equal(got, set(m)) {
		t.Errorf("the sets went with the rules: %v", got)
	}
	if err := c.RemoveSets(o.Sets); err != nil {
		t.Fatal(err)
	}
	if o, err := c.Owned(ctx); err != nil || len(o.Rules)+len(o.Sets) > 0 {
		t.Errorf("left: %+v, %v", o, err)
	}
	if d := own.Dump(); d != "" {
		t.Errorf("table left:\n%s", d)
	}
}

// ListMembers: a set that does not exist (or no table) is not found; a name that is no set
// of kipvs's is invalid.
func TestListMembersErrors(t *testing.T) {
	ctx := context.Background()
	p := nftables.New(nfttest.New(inet.IPv4))
	if _, err := p.ListMembers(ctx, "cluster-ip"); !kerr.IsNotFound(err) {
		t.Errorf("no table: %v, want not found", err)
	}
	if _, err := p.ListMembers(ctx, "KUBE-CLUSTER-IP"); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("an ipset's name: %v, want invalid", err)
	}
}

// DeclaredChains is what Render declares: the same chains and hooks, without rules.
func TestDeclaredChains(t *testing.T) {
	rendered := nftables.Render(proxy.FilterOf(&proxy.Options{Family: inet.IPv4, MasqueradeBit: 14}, nil, nil))
	declared := nftables.DeclaredChains()
	if len(declared) != len(rendered) {
		t.Fatalf("%d chains declared, %d rendered", len(declared), len(rendered))
	}
	bases := 0
	for i, c := range declared {
		if c.Name != rendered[i].Name || c.Base != rendered[i].Base || len(c.Rules) != 0 {
			t.Errorf("declared %+v, rendered %s %q", c, rendered[i].Name, rendered[i].Base)
		}
		if c.Base != "" {
			bases++
		}
	}
	if bases != 6 {
		t.Errorf("%d base chains, want 6", bases)
	}
}
