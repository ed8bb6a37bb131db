package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
)

// expect is one result a case must produce.
type expect struct {
	check   string
	status  Status
	finding []string // substrings of the finding
	fix     []string // substrings of the fix
}

func (e expect) match(r Result) error {
	if r.Status != e.status {
		return fmt.Errorf("status %s, want %s (finding %q)", r.Status, e.status, r.Finding)
	}
	for _, s := range e.finding {
		if !strings.Contains(r.Finding, s) {
			return fmt.Errorf("finding %q lacks %q", r.Finding, s)
		}
	}
	for _, s := range e.fix {
		if !strings.Contains(r.Fix, s) {
			return fmt.Errorf("fix %q lacks %q", r.Fix, s)
		}
	}
	if e.status != OK && r.Fix == "" {
		return fmt.Errorf("a %s without a fix: %q", r.Status, r.Finding)
	}
	return nil
}

// checkReport asserts that every expected result is there and that every result that is
// not OK was expected.
func checkReport(t *testing.T, rep *Report, want []expect) {
	t.Helper()
	expected := map[string]bool{}
	for _, w := range want {
		expected[w.check] = true
		got := rep.Find(w.check)
		if len(got) != 1 {
			t.Errorf("check %q: %d results, want 1", w.check, len(got))
			continue
		}
		if err := w.match(got[0]); err != nil {
			t.Errorf("check %q: %v", w.check, err)
		}
	}
	for _, r := range rep.Results {
		if r.Status != OK && !expected[r.Check] {
			t.Errorf("unexpected %s %q: %s (fix: %s)", r.Status, r.Check, r.Finding, r.Fix)
		}
		if r.Finding == "" {
			t.Errorf("check %q has no finding", r.Check)
		}
	}
	if t.Failed() {
		var b bytes.Buffer
		_ = rep.WriteTable(&b)
		t.Logf("report:\n%s", b.String())
	}
}

// The healthy fixture is all OK, and every check is there.
func TestHealthyNode(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	rep := f.run()
	checkReport(t, rep, []expect{
		{check: "ipvs", status: OK, finding: []string{"1.2.1", "size=4096"}},
		{check: "module ip_vs", status: OK},
		{check: "module ip_vs_rr", status: OK},
		{check: "module ip_set_hash_ipportnet", status: OK},
		{check: "module ip_set_bitmap_port", status: OK},
		{check: "module xt_set", status: OK},
		{check: "module nf_conntrack", status: OK},
		{check: "module br_netfilter", status: OK},
		{check: "conntrack netlink", status: OK},
		{check: "sysctl net.ipv4.vs.conntrack", status: OK, finding: []string{"= 1"}},
		{check: "sysctl net.ipv4.vs.conn_reuse_mode", status: OK, finding: []string{"5.9 or later"}},
		{check: "sysctl net.ipv4.vs.expire_nodest_conn", status: OK},
		{check: "sysctl net.ipv4.vs.expire_quiescent_template", status: OK},
		{check: "sysctl net.ipv4.ip_forward", status: OK},
		{check: "sysctl net.netfilter.nf_conntrack_max", status: OK},
		{check: "sysctl net.bridge.bridge-nf-call-iptables", status: OK},
		{check: "ARP for LoadBalancer IPs", status: OK},
		{check: "rp_filter", status: OK},
		{check: "conntrack table", status: OK},
		{check: "bridge hairpin", status: OK},
		{check: "local traffic detector", status: OK, finding: []string{"10.244.0.0/16"}},
		{check: "cluster CIDR", status: OK, finding: []string{"10.244.0.0/16", "10.96.0.0/12", "--kipvs-service-cidr"}},
		{check: "kube-ipvs0 addresses", status: OK},
		{check: "service routes", status: OK, finding: []string{"all 1 VIPs"}},
		{check: "FORWARD policy", status: OK, finding: []string{"ACCEPT", "KUBE-FORWARD"}},
		{check: "daemon", status: OK, finding: []string{"127.0.0.1:10249", "1 virtual servers"}},
		{check: "drift: ipsets", status: OK},
		{check: "drift: iptables", status: OK},
		{check: "drift: kube-ipvs0", status: OK, finding: []string{"1 VIPs"}},
		{check: "drift: virtual servers", status: OK},
		{check: "foreign virtual servers", status: OK},
		{check: "draining real servers", status: OK},
	})
	if rep.Failed() || rep.Count(Warn) != 0 {
		t.Errorf("healthy node: %d FAIL, %d WARN", rep.Count(Fail), rep.Count(Warn))
	}
}

func TestBrokenNode(t *testing.T) {
	cases := []struct {
		name  string
		opts  fixtureOpts
		breaK func(f *fixture)
		want  []expect
	}{
		{
			name:  "ip_vs not available",
			breaK: func(f *fixture) { f.mods["ip_vs"] = ModuleMissing },
			want:  []expect{{check: "module ip_vs", status: Fail, finding: []string{"ip_vs is not loaded", "6.1.0-56-amd64"}, fix: []string{"modprobe ip_vs"}}},
		},
		{
			name:  "configured scheduler missing",
			breaK: func(f *fixture) { f.cfg.IPVS.Scheduler = "sh"; f.mods["ip_vs_sh"] = ModuleMissing },
			want:  []expect{{check: "module ip_vs_sh", status: Fail, finding: []string{"--ipvs-scheduler"}, fix: []string{"modprobe ip_vs_sh"}}},
		},
		{
			name: "annotation scheduler missing",
			breaK: func(f *fixture) {
				f.state.Schedulers["mh"] = false
				f.mods["ip_vs_mh"] = ModuleMissing
			},
			want: []expect{{check: "module ip_vs_mh", status: Warn, finding: []string{"kipvs.io/scheduler", "fall back to rr"}, fix: []string{"modprobe ip_vs_mh"}}},
		},
		{
			name: "annotation scheduler loaded after the daemon probed it",
			breaK: func(f *fixture) {
				f.state.Schedulers["mh"] = false
			},
			want: []expect{{check: "module ip_vs_mh", status: Warn, finding: []string{"found it unavailable"}, fix: []string{"restart kipvs"}}},
		},
		{
			name:  "module installed but not loaded",
			breaK: func(f *fixture) { f.mods["xt_set"] = ModuleAvailable },
			want:  []expect{{check: "module xt_set", status: OK, finding: []string{"loads it on first use"}}},
		},
		{
			name:  "module presence unknown",
			breaK: func(f *fixture) { f.mods["ip_set_bitmap_port"] = ModuleUnknown },
			want:  []expect{{check: "module ip_set_bitmap_port", status: Warn, finding: []string{"/lib/modules"}, fix: []string{"modprobe ip_set_bitmap_port"}}},
		},
		{
			name:  "ipset type missing",
			breaK: func(f *fixture) { f.mods["ip_set_hash_ipportnet"] = ModuleMissing },
			want:  []expect{{check: "module ip_set_hash_ipportnet", status: Fail, finding: []string{"hash:ip,port,net"}, fix: []string{"modprobe ip_set_hash_ipportnet"}}},
		},
		{
			name: "br_netfilter missing with a bridge CNI",
			breaK: func(f *fixture) {
				f.mods["br_netfilter"] = ModuleMissing
				f.dropSysctl(keyBridgeIptables)
			},
			want: []expect{
				{check: "module br_netfilter", status: Fail, fix: []string{"modprobe br_netfilter"}},
				{check: "sysctl net.bridge.bridge-nf-call-iptables", status: Fail, finding: []string{"does not exist", "br_netfilter"}, fix: []string{"modprobe br_netfilter"}},
			},
		},
		{
			name:  "ctnetlink unreachable",
			breaK: func(f *fixture) { f.ct.err = errBoom() },
			want:  []expect{{check: "conntrack netlink", status: Warn, finding: []string{"boom", "UDP"}, fix: []string{"modprobe nf_conntrack_netlink"}}},
		},
		{
			name:  "vs/conntrack off",
			breaK: func(f *fixture) { f.setSysctl("net.ipv4.vs.conntrack", "0") },
			want: []expect{{check: "sysctl net.ipv4.vs.conntrack", status: Fail, finding: []string{"net.ipv4.vs.conntrack = 0, kipvs needs 1"},
				fix: []string{"sysctl -w net.ipv4.vs.conntrack=1"}}},
		},
		{
			name:  "ip_forward off",
			breaK: func(f *fixture) { f.setSysctl("net.ipv4.ip_forward", "0") },
			want:  []expect{{check: "sysctl net.ipv4.ip_forward", status: Fail, finding: []string{"= 0"}, fix: []string{"sysctl -w net.ipv4.ip_forward=1"}}},
		},
		{
			name:  "expire_nodest_conn off",
			breaK: func(f *fixture) { f.setSysctl("net.ipv4.vs.expire_nodest_conn", "0") },
			want:  []expect{{check: "sysctl net.ipv4.vs.expire_nodest_conn", status: Warn, fix: []string{"=1"}}},
		},
		{
			name:  "ip_vs sysctls missing",
			breaK: func(f *fixture) { f.dropSysctl("net/ipv4/vs/conntrack") },
			want:  []expect{{check: "sysctl net.ipv4.vs.conntrack", status: Fail, finding: []string{"does not exist (ip_vs not loaded)"}, fix: []string{"modprobe ip_vs"}}},
		},
		{
			name:  "nf_conntrack_max too low",
			breaK: func(f *fixture) { f.setSysctl("net.netfilter.nf_conntrack_max", "65536") },
			want:  []expect{{check: "sysctl net.netfilter.nf_conntrack_max", status: Warn, finding: []string{"= 65536, kipvs needs 131072"}}},
		},
		{
			name:  "nf_conntrack_max higher is fine",
			breaK: func(f *fixture) { f.setSysctl("net.netfilter.nf_conntrack_max", "1048576") },
			want:  []expect{{check: "sysctl net.netfilter.nf_conntrack_max", status: OK, finding: []string{"at least 131072"}}},
		},
		{
			name: "conn_reuse_mode on a 5.4 kernel",
			breaK: func(f *fixture) {
				f.release = "5.4.0-1-amd64"
			},
			want: []expect{{check: "sysctl net.ipv4.vs.conn_reuse_mode", status: Warn, finding: []string{"= 1, kipvs needs 0", "before 5.9"}, fix: []string{"conn_reuse_mode=0"}}},
		},
		{
			name:  "conn_reuse_mode on a 4.0 kernel",
			breaK: func(f *fixture) { f.release = "4.0.9" },
			want:  []expect{{check: "sysctl net.ipv4.vs.conn_reuse_mode", status: Warn, finding: []string{"older than 4.1"}, fix: []string{"5.9"}}},
		},
		{
			name:  "strictARP configured, arp_ignore reset",
			breaK: func(f *fixture) { f.cfg.IPVS.StrictARP = true; f.setSysctl("net.ipv4.conf.all.arp_announce", "2") },
			want:  []expect{{check: "sysctl net.ipv4.conf.all.arp_ignore", status: Warn, finding: []string{"= 0, kipvs needs 1"}, fix: []string{"arp_ignore=1"}}},
		},
		{
			name:  "LoadBalancer IP bound without strictARP",
			opts:  fixtureOpts{lb: true},
			breaK: func(f *fixture) {},
			want: []expect{{check: "ARP for LoadBalancer IPs", status: Warn, finding: []string{"203.0.113.10 (LoadBalancer of default/lb)", "arp_ignore = 0"},
				fix: []string{"--ipvs-strict-arp"}}},
		},
		{
			name:  "LoadBalancer IP bound, arp_ignore set by hand",
			opts:  fixtureOpts{lb: true},
			breaK: func(f *fixture) { f.setSysctl(keyArpIgnoreAll, "1") },
			want:  []expect{{check: "ARP for LoadBalancer IPs", status: OK, finding: []string{"arp_ignore = 1"}}},
		},
		{
			name:  "bridge-nf-call-iptables off",
			breaK: func(f *fixture) { f.setSysctl(keyBridgeIptables, "0") },
			want: []expect{{check: "sysctl net.bridge.bridge-nf-call-iptables", status: Fail, finding: []string{"= 0", "cbr0"},
				fix: []string{"sysctl -w net.bridge.bridge-nf-call-iptables=1"}}},
		},
		{
			name: "overlay with strict rp_filter on all",
			breaK: func(f *fixture) {
				f.net.links = append(f.net.links, Link{Name: "flannel.1", Kind: "vxlan", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/32")}})
				f.setSysctl(rpFilterKey("all"), "1")
			},
			want: []expect{{check: "rp_filter", status: Warn, finding: []string{"flannel.1 (vxlan)", "eth0 (all=1, eth0=0)"},
				fix: []string{"net.ipv4.conf.eth0.rp_filter=2"}}},
		},
		{
			name: "overlay with loose rp_filter on the link",
			breaK: func(f *fixture) {
				f.net.links = append(f.net.links, Link{Name: "flannel.1", Kind: "vxlan", Up: true})
				f.setSysctl(rpFilterKey("all"), "1")
				f.setSysctl(rpFilterKey("eth0"), "2")
			},
			want: []expect{{check: "rp_filter", status: OK, finding: []string{"flannel.1"}}},
		},
		{
			name:  "strict rp_filter without an overlay",
			breaK: func(f *fixture) { f.setSysctl(rpFilterKey("all"), "1") },
			want:  []expect{{check: "rp_filter", status: OK, finding: []string{"no overlay"}}},
		},
		{
			name:  "conntrack table nearly full",
			breaK: func(f *fixture) { f.setSysctl(keyConntrackCount, "120000") },
			want: []expect{{check: "conntrack table", status: Warn, finding: []string{"120000 of net.netfilter.nf_conntrack_max = 131072 (91%)"},
				fix: []string{"--conntrack-max-per-core"}}},
		},
		{
			name:  "hairpin off",
			breaK: func(f *fixture) { f.net.link("veth1").Hairpin = false },
			want:  []expect{{check: "bridge hairpin", status: Warn, finding: []string{"veth1 (bridge cbr0)"}, fix: []string{"hairpinMode", "ip link set dev veth1 type bridge_slave hairpin on"}}},
		},
		{
			name:  "no local traffic detector",
			breaK: func(f *fixture) { f.cfg.ClusterCIDRs = nil },
			want: []expect{
				{check: "local traffic detector", status: Warn, finding: []string{"KUBE-CLUSTER-IP src,dst", "node's own"}, fix: []string{"--cluster-cidr"}},
				{check: "cluster CIDR", status: OK, finding: []string{"not set"}},
			},
		},
		{
			name: "NodeCIDR detector",
			breaK: func(f *fixture) {
				f.cfg.ClusterCIDRs = nil
				f.cfg.DetectLocalMode = config.LocalModeNodeCIDR
			},
			want: []expect{{check: "local traffic detector", status: OK, finding: []string{"spec.podCIDRs"}}},
		},
		{
			name:  "clusterCIDR is the Service CIDR (flag)",
			breaK: func(f *fixture) { f.cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")} },
			want: []expect{
				{check: "local traffic detector", status: Warn, finding: []string{"clusterCIDR 10.96.0.0/12 overlaps the Service CIDR", "does not use it", "src,dst"}},
				{check: "cluster CIDR", status: Fail, finding: []string{"clusterCIDR 10.96.0.0/12 is the Service CIDR 10.96.0.0/12 (from --kipvs-service-cidr)"},
					fix: []string{"--cluster-cidr", "pod CIDR"}}},
		},
		{
			name: "clusterCIDR overlaps the API's Service CIDR",
			breaK: func(f *fixture) {
				f.cfg.Kipvs.ServiceCIDRs = nil
				f.apiCIDR = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
				f.cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			},
			want: []expect{
				{check: "local traffic detector", status: Warn, finding: []string{"clusterCIDR 10.0.0.0/8 overlaps the Service CIDR", "does not use it"}},
				{check: "cluster CIDR", status: Fail, finding: []string{"10.0.0.0/8 overlaps the Service CIDR 10.96.0.0/16", "ServiceCIDR objects"}}},
		},
		{
			name: "Service CIDR from the daemon",
			breaK: func(f *fixture) {
				f.cfg.Kipvs.ServiceCIDRs = nil
				f.noAPI = true
				f.state.ServiceCIDRs = []string{"10.96.0.0/12"}
			},
			want: []expect{{check: "cluster CIDR", status: OK, finding: []string{"daemon's ServiceCIDR objects"}}},
		},
		{
			name: "Service CIDR unknown, a cluster IP inside clusterCIDR",
			breaK: func(f *fixture) {
				f.cfg.Kipvs.ServiceCIDRs = nil
				f.cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
			},
			want: []expect{{check: "cluster CIDR", status: Fail, finding: []string{"cluster IP 10.96.0.10 lies in clusterCIDR 10.96.0.0/12"}}},
		},
		{
			name:  "Service CIDR unknown",
			breaK: func(f *fixture) { f.cfg.Kipvs.ServiceCIDRs = nil },
			want: []expect{
				{check: "cluster CIDR", status: Warn, finding: []string{"Service CIDR unknown", "1 cluster IPs"}, fix: []string{"--kipvs-service-cidr"}},
				{check: "service routes", status: OK, finding: []string{"routes not checked"}},
			},
		},
		{
			name: "node address bound on kube-ipvs0",
			breaK: func(f *fixture) {
				d := f.net.link("kube-ipvs0")
				d.Addrs = append(d.Addrs, netip.MustParsePrefix("192.168.50.10/32"))
			},
			want: []expect{
				{check: "kube-ipvs0 addresses", status: Fail, finding: []string{"192.168.50.10 is on kube-ipvs0 and is a node address on eth0"},
					fix: []string{"ip addr del 192.168.50.10/32 dev kube-ipvs0"}},
				{check: "drift: kube-ipvs0", status: Warn, finding: []string{"unwanted 192.168.50.10"}},
			},
		},
		{
			// The metadata address left bound by an older kipvs is a VIP like any other;
			// the link's own fe80::/64 (the kernel's, when the link is up) is not.
			name: "link-local VIP left on kube-ipvs0",
			breaK: func(f *fixture) {
				d := f.net.link("kube-ipvs0")
				d.Addrs = append(d.Addrs, netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("fe80::8c4f:a1ff:fe2b:7c10/64"))
			},
			want: []expect{
				{check: "drift: kube-ipvs0", status: Warn, finding: []string{"unwanted 169.254.169.254"}},
			},
		},
		{
			name: "route sends the Service CIDR off the node",
			breaK: func(f *fixture) {
				f.net.routes = append(f.net.routes, Route{Table: TableMain, Type: "unicast", Dst: netip.MustParsePrefix("10.96.0.0/12"),
					Gateway: netip.MustParseAddr("192.168.50.1"), Dev: "eth0"})
			},
			want: []expect{{check: "service routes", status: Fail,
				finding: []string{"route unicast 10.96.0.0/12 via 192.168.50.1 dev eth0 table main sends the Service CIDR 10.96.0.0/12"},
				fix:     []string{"ip route del 10.96.0.0/12 via 192.168.50.1 dev eth0 table main"}}},
		},
		{
			name: "a wider VPN route covers the Service CIDR",
			breaK: func(f *fixture) {
				f.net.routes = append(f.net.routes, Route{Table: 100, Type: "unicast", Dst: netip.MustParsePrefix("10.0.0.0/8"), Dev: "tun0"})
			},
			want: []expect{{check: "service routes", status: Fail, finding: []string{"10.0.0.0/8 dev tun0 table 100"}}},
		},
		{
			name: "a VIP does not route locally",
			breaK: func(f *fixture) {
				f.net.get = map[netip.Addr]Route{netip.MustParseAddr("10.96.0.10"): {Table: 100, Type: "unicast", Gateway: netip.MustParseAddr("192.168.50.1"), Dev: "eth0"}}
			},
			want: []expect{{check: "service routes", status: Fail, finding: []string{"ip route get 10.96.0.10 gives unicast via 192.168.50.1 dev eth0 table 100, not local"},
				fix: []string{"ip rule show"}}},
		},
		{
			name:  "FORWARD policy DROP with kipvs's jump",
			breaK: func(f *fixture) { f.ipt.forwardPol = "DROP" },
			want:  []expect{{check: "FORWARD policy", status: OK, finding: []string{"policy DROP", "KUBE-FORWARD at position"}}},
		},
		{
			name: "FORWARD policy DROP without kipvs's jump",
			breaK: func(f *fixture) {
				f.ipt.forwardPol = "DROP"
				f.restore("*filter\n-D FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\nCOMMIT\n")
			},
			want: []expect{
				{check: "FORWARD policy", status: Fail, finding: []string{"policy is DROP", "no jump to KUBE-FORWARD"},
					fix: []string{`iptables -I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`}},
				{check: "drift: iptables", status: Warn, finding: []string{`missing [filter: -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD]`}},
			},
		},
		{
			name:  "the other iptables backend has FORWARD policy ACCEPT",
			breaK: func(f *fixture) { f.other = &fakeIptables{nf: netfiltertest.NewFake(inet.IPv4)} },
			want: []expect{{check: "FORWARD policy", status: OK,
				finding: []string{"KUBE-FORWARD at position", "; iptables-legacy filter FORWARD policy ACCEPT"}}},
		},
		{
			name: "dockerd's FORWARD DROP on the other iptables backend",
			breaK: func(f *fixture) {
				f.ipt.forwardPol = "DROP"
				f.other = &fakeIptables{nf: netfiltertest.NewFake(inet.IPv4), forwardPol: "DROP"}
			},
			want: []expect{{check: "FORWARD policy", status: Fail,
				finding: []string{"iptables-legacy filter FORWARD policy is DROP", "kipvs programs the other backend"},
				fix:     []string{"iptables-legacy -P FORWARD ACCEPT", "same iptables backend"}}},
		},
		{
			name:  "no filter table",
			breaK: func(f *fixture) { f.ipt.empty = true },
			want: []expect{
				{check: "FORWARD policy", status: OK, finding: []string{"no filter FORWARD chain"}},
			},
		},
		{
			name:  "an unconditional DROP ahead of kipvs's jump",
			breaK: func(f *fixture) { f.restore("*filter\n-I FORWARD 1 -j DROP\nCOMMIT\n") },
			want:  []expect{{check: "FORWARD policy", status: Fail, finding: []string{`"-A FORWARD -j DROP" before any jump to KUBE-FORWARD`}}},
		},
		{
			name:  "masqueradeAll without a detector",
			breaK: func(f *fixture) { f.cfg.ClusterCIDRs = nil; f.cfg.MasqueradeAll = true },
			want:  []expect{{check: "local traffic detector", status: OK, finding: []string{"masqueradeAll"}}},
		},
		{
			name:  "metrics server disabled",
			breaK: func(f *fixture) { f.noDaemon = true },
			want:  []expect{{check: "daemon", status: OK, finding: []string{"drift is not checked"}}},
		},
		{
			// As the daemon decides: the node can run IPv6, whatever its addresses (none here).
			name: "IPv6 supported without a daemon",
			breaK: func(f *fixture) {
				f.daemon.err = ErrNoDaemon
				f.ipv6 = func() error { return nil }
			},
			want: []expect{
				{check: "daemon", status: Warn},
				{check: "local traffic detector (IPv6)", status: OK, finding: []string{"single-stack cluster"}},
				{check: "FORWARD policy (IPv6)", status: Warn, finding: []string{"cannot read ip6tables"}},
				{check: "sysctl net.bridge.bridge-nf-call-ip6tables", status: OK},
				{check: "local traffic detector", status: OK},
			},
		},
		{
			// A dual-stack cluster whose IPv6 pods have no clusterCIDR: IPv6 pod traffic to
			// cluster IPs cannot be told apart.
			name: "IPv6 Service CIDR without an IPv6 clusterCIDR",
			breaK: func(f *fixture) {
				f.daemon.err = ErrNoDaemon
				f.ipv6 = func() error { return nil }
				f.cfg.Kipvs.ServiceCIDRs = append(f.cfg.Kipvs.ServiceCIDRs, netip.MustParsePrefix("fd00:10:96::/112"))
			},
			want: []expect{
				{check: "daemon", status: Warn},
				{check: "local traffic detector (IPv6)", status: Warn, finding: []string{"KUBE-6-CLUSTER-IP src,dst"}},
				{check: "FORWARD policy (IPv6)", status: Warn, finding: []string{"cannot read ip6tables"}},
				{check: "sysctl net.bridge.bridge-nf-call-ip6tables", status: OK},
				{check: "local traffic detector", status: OK},
			},
		},
		{
			name: "no daemon",
			breaK: func(f *fixture) {
				f.daemon.err = fmt.Errorf("%w: dial tcp 127.0.0.1:10249: connection refused", ErrNoDaemon)
			},
			want: []expect{{check: "daemon", status: Warn, finding: []string{"no kipvs daemon answers on 127.0.0.1:10249", "drift checks skipped"}, fix: []string{"kipvs run"}}},
		},
		{
			name: "debug endpoints off",
			breaK: func(f *fixture) {
				f.daemon.err = fmt.Errorf("GET http://127.0.0.1:10249/debug/kipvs/state: %w", ErrDebugOff)
			},
			want: []expect{{check: "daemon", status: Warn, finding: []string{"debug endpoints are off", "drift checks skipped"}, fix: []string{"--kipvs-debug-endpoints"}}},
		},
		{
			name:  "daemon not synced",
			breaK: func(f *fixture) { f.state.Families[0].Synced = false },
			want:  []expect{{check: "daemon", status: Warn, finding: []string{"has not synced IPv4"}}},
		},
		{
			name: "ipset member removed behind kipvs's back",
			breaK: func(f *fixture) {
				e, err := ipset.ParseEntry(ipset.Type("hash:ip,port"), "10.96.0.10,tcp:80")
				if err != nil {
					t.Fatal(err)
				}
				if err := f.ipset.Del("KUBE-CLUSTER-IP", e); err != nil {
					t.Fatal(err)
				}
			},
			want: []expect{{check: "drift: ipsets", status: Warn, finding: []string{"KUBE-CLUSTER-IP lacks 10.96.0.10,tcp:80"}, fix: []string{"next full sync"}}},
		},
		{
			name: "ipset destroyed",
			breaK: func(f *fixture) {
				if err := f.ipset.Destroy("KUBE-LOAD-BALANCER-SOURCE-CIDR"); err != nil {
					t.Fatal(err)
				}
			},
			want: []expect{{check: "drift: ipsets", status: Warn, finding: []string{"set KUBE-LOAD-BALANCER-SOURCE-CIDR is missing"}}},
		},
		{
			name: "virtual server deleted",
			breaK: func(f *fixture) {
				if err := f.ipvs.DeleteService(ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}); err != nil {
					t.Fatal(err)
				}
			},
			want: []expect{{check: "drift: virtual servers", status: Warn, finding: []string{"IPVS lacks TCP 10.96.0.10:80 (ClusterIP default/web)"}}},
		},
		{
			name: "foreign virtual server on a kipvs VIP",
			breaK: func(f *fixture) {
				if err := f.ipvs.AddService(ipvs.Service{ServiceKey: ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 8443}, Scheduler: "wrr"}); err != nil {
					t.Fatal(err)
				}
			},
			want: []expect{{check: "foreign virtual servers", status: Warn,
				finding: []string{"TCP 10.96.0.10:8443 shares 10.96.0.10 with kipvs's ClusterIP of default/web", "deletes it at its next full sync"},
				fix:     []string{"ipvsadm -D -t 10.96.0.10:8443"}}},
		},
		{
			name: "foreign virtual server on an excluded VIP",
			breaK: func(f *fixture) {
				f.cfg.IPVS.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32")}
				if err := f.ipvs.AddService(ipvs.Service{ServiceKey: ipvs.ServiceKey{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53}, Scheduler: "rr"}); err != nil {
					t.Fatal(err)
				}
			},
			want: []expect{{check: "foreign virtual servers", status: Warn, finding: []string{"UDP 10.96.0.10:53", "--ipvs-exclude-cidrs"}}},
		},
		{
			name: "real server draining past the graceful period",
			breaK: func(f *fixture) {
				f.state.Families[0].Draining = []debugapi.DrainingRealServer{
					{Protocol: "TCP", Address: "10.96.0.10", Port: 80, RealServer: "10.244.0.12:8080", Since: f.now.Add(-10 * time.Minute)},
					{Protocol: "TCP", Address: "10.96.0.10", Port: 80, RealServer: "10.244.0.13:8080", Since: f.now.Add(-20 * time.Second)},
				}
			},
			want: []expect{{check: "draining real servers", status: Warn,
				finding: []string{"10.244.0.12:8080 of TCP 10.96.0.10:80 at weight 0 since 2025-06-01T11:50:00Z (10m0s ago)", "graceful period 30s"}}},
		},
		{
			name: "real servers draining within the graceful period",
			breaK: func(f *fixture) {
				f.state.Families[0].Draining = []debugapi.DrainingRealServer{
					{Protocol: "TCP", Address: "10.96.0.10", Port: 80, RealServer: "10.244.0.13:8080", Since: f.now.Add(-40 * time.Second)},
				}
			},
			want: []expect{{check: "draining real servers", status: OK, finding: []string{"1 real servers draining"}}},
		},
		{
			name: "real server draining for hours with no time limit",
			breaK: func(f *fixture) {
				f.state.GracefulPeriod = "0s"
				f.state.Families[0].Draining = []debugapi.DrainingRealServer{
					{Protocol: "TCP", Address: "10.96.0.10", Port: 80, RealServer: "10.244.0.12:8080", Since: f.now.Add(-5 * time.Hour)},
				}
			},
			want: []expect{{check: "draining real servers", status: OK,
				finding: []string{"1 real servers draining until their connections end", "--kipvs-graceful-period=0"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			tc.breaK(f)
			checkReport(t, f.run(), tc.want)
		})
	}
}

// A state that changes while the kernel is read (a sync ran meanwhile) is read again with
// the kernel, so a finished sync is not reported as drift.
func TestDriftRereadsAfterSync(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	stale := *f.state
	fam := stale.Families[0]
	fam.Addresses = append([]string{"10.96.0.99"}, fam.Addresses...)
	stale.Families = []debugapi.FamilyState{fam}
	v := f.view()
	f.daemon.states = []*debugapi.State{&stale, f.state}
	rep := Run(t.Context(), &f.cfg, v)
	checkReport(t, rep, nil)
	if f.daemon.calls != 3 {
		t.Errorf("daemon asked %d times, want 3 (stale, fresh, fresh again)", f.daemon.calls)
	}
}

func TestReportOutput(t *testing.T) {
	rep := &Report{Results: []Result{
		{Check: "ipvs", Status: OK, Finding: "IP Virtual Server version 1.2.1 (size=4096)"},
		{Check: "cluster CIDR", Status: Fail, Finding: "clusterCIDR 10.96.0.0/12 is the Service CIDR", Fix: "set --cluster-cidr"},
		{Check: "rp_filter", Status: Warn, Finding: "strict\non eth0", Fix: "sysctl -w x=2"},
	}}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := "CHECK         STATUS  FINDING                                       FIX\n" +
		"ipvs          OK      IP Virtual Server version 1.2.1 (size=4096)   -\n" +
		"cluster CIDR  FAIL    clusterCIDR 10.96.0.0/12 is the Service CIDR  set --cluster-cidr\n" +
		"rp_filter     WARN    strict on eth0                                sysctl -w x=2\n" +
		"\n1 OK, 1 WARN, 1 FAIL\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	if !rep.Failed() {
		t.Error("Failed() = false with a FAIL")
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []Result       `json:"results"`
		Summary map[Status]int `json:"summary"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 3 || doc.Results[1] != rep.Results[1] || doc.Summary[Fail] != 1 || doc.Summary[OK] != 1 || doc.Summary[Warn] != 1 {
		t.Errorf("json: %s", b.String())
	}
	if (&Report{}).Failed() {
		t.Error("empty report failed")
	}
}

func TestDotted(t *testing.T) {
	for in, want := range map[string]string{
		"net/ipv4/vs/conntrack":            "net.ipv4.vs.conntrack",
		"net/ipv4/conf/eth0.100/rp_filter": "net.ipv4.conf.eth0/100.rp_filter",
	} {
		if got := dotted(in); got != want {
			t.Errorf("dotted(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuiltinChain(t *testing.T) {
	save := `# Generated by iptables-nft-save
*nat
:FORWARD ACCEPT [0:0]
-A FORWARD -j KUBE-FORWARD
COMMIT
*filter
:INPUT ACCEPT [10:20]
:FORWARD DROP [5:300]
[1:2] -A FORWARD -j DOCKER-USER
[0:0] -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A INPUT -j KUBE-FIREWALL
COMMIT
`
	policy, rules := builtinChain(save, "filter", "FORWARD")
	if policy != "DROP" || len(rules) != 2 || rules[0] != "-j DOCKER-USER" || !strings.HasSuffix(rules[1], "-j KUBE-FORWARD") {
		t.Errorf("builtinChain = %q %q", policy, rules)
	}
}

// Objects the daemon failed to apply and retries are named, with their error and retry.
func TestFailedObjectsReported(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.state.Families[0].Failed = []debugapi.FailedObject{{Kind: "virtual_server", Object: "tcp/10.96.0.99:80",
		Error: "add service: cannot allocate memory", Attempts: 3, RetryAt: time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)}}
	rep := Run(t.Context(), &f.cfg, f.view())
	checkReport(t, rep, []expect{{check: "daemon: failed objects", status: Warn,
		finding: []string{"virtual_server tcp/10.96.0.99:80: add service: cannot allocate memory (3 attempts, next retry 2026-11-28T05:00:00Z)"},
		fix:     []string{"kipvs_sync_objects_out_of_sync"}}})
}

// A daemon holding Services back for capacity: the doctor warns, naming the count by reason
// and the namespace that holds the most of the fullest budget.
func TestCapacityNamesTheTopNamespace(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.state.Families[0].Capacity = &debugapi.Capacity{
		NotProgrammed: map[string]int{"SetCapacityExceeded": 2, "TooManyRealServers": 0},
		Budgets: []debugapi.Budget{{Name: "cluster-ip", Used: 983043, Limit: 1048576, TopNamespace: "tenant-a", TopUsed: 983040},
			{Name: "real-servers", Used: 20, Limit: 1048576, TopNamespace: "default", TopUsed: 20}},
	}
	rep := f.run()
	got := rep.Find("capacity")
	if len(got) != 1 || got[0].Status != Warn ||
		!strings.Contains(got[0].Finding, "2 Services not programmed (SetCapacityExceeded 2)") ||
		!strings.Contains(got[0].Finding, "cluster-ip holds 983,043 of 1,048,576: namespace tenant-a holds 983,040") {
		t.Errorf("capacity results %+v", got)
	}
}
