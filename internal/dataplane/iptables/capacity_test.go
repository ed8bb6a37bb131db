package iptables

import (
	"context"
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// clusterIPMembers returns n distinct KUBE-CLUSTER-IP members from first on: 1,000 ports
// per cluster IP, as many Services with many ports would give.
func clusterIPMembers(first, n int) []proxy.Member {
	out := make([]proxy.Member, 0, n)
	for i := first; i < first+n; i++ {
		a := netip.AddrFrom4([4]byte{10, 96, byte(i / 1000 >> 8), byte(i / 1000)})
		out = append(out, proxy.Member{Set: proxy.SetClusterIP, Addr: a, Proto: inet.TCP, Port: uint16(1 + i%1000)})
	}
	return out
}

func header(t *testing.T, sets ipset.Interface, name string) *ipset.SetInfo {
	t.Helper()
	h, err := sets.Header(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ~66,000 cluster-IP ports fill KUBE-CLUSTER-IP beyond ipset's default maxelem: the set
// grows (swapped in at a larger maxelem) instead of the add failing, keeps every member,
// and shrinks back to the default once most are gone, with hysteresis in between.
func TestSetGrowsAndShrinks(t *testing.T) {
	sets := ipsettest.NewFake()
	p := New(inet.IPv4, sets, netfiltertest.NewFake(inet.IPv4))
	name := SetName(inet.IPv4, proxy.SetClusterIP)
	runTx(t, p, dataplane.Tx{CreateSets: []dataplane.SetSpec{spec(inet.IPv4, proxy.SetClusterIP)}})
	if h := header(t, sets, name); h.MaxElem != ipset.DefaultMaxElem {
		t.Fatalf("a new set has maxelem %d, want upstream's %d", h.MaxElem, ipset.DefaultMaxElem)
	}
	all := clusterIPMembers(0, 66000)
	if res := runTx(t, p, dataplane.Tx{AddMembers: all}); res.Added != len(all) {
		t.Fatalf("add 66,000 members: %d added", res.Added)
	}
	if h := header(t, sets, name); h.MaxElem != 131072 || h.Elements != 66000 {
		t.Fatalf("after 66,000 adds: maxelem %d, %d members; want 131072, 66000", h.MaxElem, h.Elements)
	}
	// More adds within the new size do not resize.
	muts := sets.Mutations()
	runTx(t, p, dataplane.Tx{AddMembers: clusterIPMembers(66000, 100)})
	if got := sets.Mutations() - muts; got != 100 {
		t.Errorf("100 adds into a set with room took %d kernel mutations, want 100 (no resize)", got)
	}
	// Down to 40,000: still over a quarter of 131072, no shrink (hysteresis).
	runTx(t, p, dataplane.Tx{DeleteMembers: clusterIPMembers(40000, 26100)})
	if h := header(t, sets, name); h.MaxElem != 131072 || h.Elements != 40000 {
		t.Fatalf("at 40,000 members: maxelem %d, %d members; want 131072, 40000", h.MaxElem, h.Elements)
	}
	// Down to 30,000: shrunk back to the default, members intact.
	runTx(t, p, dataplane.Tx{DeleteMembers: clusterIPMembers(30000, 10000)})
	h := header(t, sets, name)
	if h.MaxElem != ipset.DefaultMaxElem || h.Elements != 30000 {
		t.Fatalf("at 30,000 members: maxelem %d, %d members; want %d, 30000", h.MaxElem, h.Elements, ipset.DefaultMaxElem)
	}
	got, _, err := p.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range clusterIPMembers(0, 30000) {
		if _, ok := got[m]; !ok {
			t.Fatalf("member %s lost in the resizes", m)
		}
	}
	if names, _ := sets.ListNames(); len(names) != 1 {
		t.Errorf("sets left after the resizes: %v (a temporary set leaked?)", names)
	}
}

// A set kube-proxy created (default maxelem, nearly full) is adopted and grown; a set kipvs
// grew is accepted by Check as it is.
func TestAdoptedSetGrowsAndCheckAcceptsGrownSet(t *testing.T) {
	sets := ipsettest.NewFake()
	p := New(inet.IPv4, sets, netfiltertest.NewFake(inet.IPv4))
	name := SetName(inet.IPv4, proxy.SetClusterIP)
	kubeProxy := ipset.Set{Name: name, Type: ipset.HashIPPort, HashSize: 1024, MaxElem: 65536}
	if err := sets.Create(kubeProxy); err != nil {
		t.Fatal(err)
	}
	if err := sets.Add(name, entries(clusterIPMembers(0, 65000))...); err != nil {
		t.Fatal(err)
	}
	runTx(t, p, dataplane.Tx{AddMembers: clusterIPMembers(65000, 5000)})
	if h := header(t, sets, name); h.MaxElem != 131072 || h.Elements != 70000 {
		t.Fatalf("maxelem %d, %d members; want 131072, 70000", h.MaxElem, h.Elements)
	}
	ips := IPSet(inet.IPv4, proxy.SetIPVSIPs)
	ips.MaxElem = 262144
	if err := sets.Create(ips); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background()); err != nil {
		t.Errorf("Check with a grown %s: %v", ips.Name, err)
	}
}

func entries(ms []proxy.Member) []ipset.Entry {
	out := make([]ipset.Entry, len(ms))
	for i, m := range ms {
		out[i] = Entry(m)
	}
	return out
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		need int
		want uint32
	}{{0, 65536}, {32768, 65536}, {32769, 65536}, {43690, 65536}, {43691, 65536}, {43692, 131072}, {66000, 131072}, {70000, 131072}, {100000, 262144}, {1 << 20, 1 << 21}} {
		if got := Target(tc.need); got != tc.want {
			t.Errorf("Target(%d) = %d, want %d", tc.need, got, tc.want)
		}
		if tc.need > 0 && (needsGrow(Target(tc.need), tc.need, 0) || needsShrink(Target(tc.need), tc.need)) {
			t.Errorf("Target(%d) = %d flaps", tc.need, Target(tc.need))
		}
	}
}
