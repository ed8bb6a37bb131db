package reconcile

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

type guardRules struct{}

func (guardRules) String() string                { return "rules" }
func (guardRules) Counts() map[string]int        { return nil }
func (guardRules) Diff(dataplane.Rules) []string { return nil }

// An empty Plan is not applied (and a drain with one is skipped): every group of changes
// must count in Len, apart from Drains, which only records what IPVS ops already do.
func TestPlanEmptyGuard(t *testing.T) {
	vs := proxy.VSKey{Protocol: inet.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	k := toIPVSKey(vs)
	m := proxy.Member{Set: proxy.SetClusterIP, Addr: vs.Address, Proto: inet.TCP, Port: 80}
	full := Plan{
		CreateSets: []dataplane.SetSpec{{Set: proxy.SetClusterIP, Name: "KUBE-CLUSTER-IP", Type: "hash:ip,port"}},
		AddAddrs:   []netip.Addr{vs.Address}, AddMembers: []proxy.Member{m},
		IPVS:       []ipvs.Op{ipvs.AddServiceOp(ipvs.Service{ServiceKey: k})},
		Rules:      guardRules{},
		IPVSDelete: []ipvs.Op{ipvs.DeleteServiceOp(k)},
		DelMembers: []proxy.Member{m}, DelAddrs: []netip.Addr{vs.Address},
		Conntrack: []conntrack.Filter{conntrack.ByOrigDst(inet.UDP, netip.AddrPortFrom(vs.Address, 53))},
		Drains:    []DrainKey{{VS: vs, Dest: netip.MustParseAddrPort("10.244.1.5:8080")}},
	}
	ignored := map[string]string{"Drains": "the real servers a plan drains are its IPVS weight-0 updates, which count"}
	fieldguard.CheckPresence(t, full, ignored, func(p Plan) bool { return p.Empty() })
}

// `kipvs cleanup` reports nothing to do when CleanupPlan.Empty: every kind of object counts.
func TestCleanupPlanEmptyGuard(t *testing.T) {
	full := CleanupPlan{Rules: []string{"IPv4 iptables-nft"}, VirtualServers: []ipvs.ServiceKey{{Family: inet.IPv4, Protocol: inet.TCP,
		Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}}, Link: "kube-ipvs0", Sets: []string{"KUBE-CLUSTER-IP"}}
	fieldguard.CheckPresence(t, full, nil, func(p CleanupPlan) bool { return p.Empty() })
}

// A Read whose journal is empty is valid without a model: every kind of recorded object
// must count.
func TestJournalEmptyGuard(t *testing.T) {
	full := journal{vs: map[proxy.VSKey]struct{}{{Protocol: inet.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}: {}},
		members: map[proxy.Member]struct{}{{Set: proxy.SetClusterIP}: {}}, addrs: map[netip.Addr]struct{}{netip.MustParseAddr("10.96.0.10"): {}},
		rules: true, invalid: true}
	ignored := map[string]string{"invalid": "not an object: it makes the Read invalid on its own (Read.valid)"}
	fieldguard.CheckPresence(t, full, ignored, func(j journal) bool { return j.empty() })
}
