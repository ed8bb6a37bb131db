package daemon

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/inet"
)

// A Node from the source file is not validated by an apiserver: with nodePortAddresses
// "primary", an InternalIP with a zone, or one no virtual server can be bound to, must not
// become a NodePort address (it would fail the NodePort virtual servers and the set batch
// of every NodePort Service). The next usable address of the family is taken instead.
func TestNodePrimaryIPsSkipUnusable(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "fe80::1%eth0"},
		{Type: v1.NodeInternalIP, Address: "0.0.0.0"},
		{Type: v1.NodeInternalIP, Address: "239.1.1.1"},
		{Type: v1.NodeInternalIP, Address: "127.0.0.1"},
		{Type: v1.NodeInternalIP, Address: "255.255.255.255"},
		{Type: v1.NodeInternalIP, Address: "192.0.2.10"},
		{Type: v1.NodeInternalIP, Address: "2001:db8::10"},
	}}}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}
	if got := nodePrimaryIPs(node); !slices.Equal(got, want) {
		t.Fatalf("nodePrimaryIPs = %v, want %v", got, want)
	}
	cfg := config.Config{NodePortPrimary: true}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		o := buildOptions(&cfg, f, "node-a", node, nil)
		for _, a := range o.NodePortAddresses {
			if a.Zone() != "" || !a.IsGlobalUnicast() {
				t.Errorf("%s: NodePortAddresses holds %s", f, a)
			}
		}
	}
}

// --nodeport-addresses as kube-proxy's NewNodePortAddresses reads it: per family, only that
// family's CIDRs count, and a family with none of them gets every address of its own
// (found by the differential test: kipvs had no IPv6 node port with an IPv4-only list).
func TestNodePortAddressesPerFamily(t *testing.T) {
	host := []netip.Addr{
		netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("10.244.0.1"),
		netip.MustParseAddr("fec0::5054:ff:fe12:3456"), netip.MustParseAddr("fd00:10:244::1"),
	}
	for _, tc := range []struct {
		cidrs []string
		want4 []string
		want6 []string
	}{
		{nil, []string{"10.0.2.15", "10.244.0.1"}, []string{"fec0::5054:ff:fe12:3456", "fd00:10:244::1"}},
		{[]string{"10.0.2.0/24"}, []string{"10.0.2.15"}, []string{"fec0::5054:ff:fe12:3456", "fd00:10:244::1"}},
		{[]string{"fd00:10:244::/64"}, []string{"10.0.2.15", "10.244.0.1"}, []string{"fd00:10:244::1"}},
		{[]string{"10.0.2.0/24", "fd00:10:244::/64"}, []string{"10.0.2.15"}, []string{"fd00:10:244::1"}},
		{[]string{"192.0.2.0/24"}, nil, []string{"fec0::5054:ff:fe12:3456", "fd00:10:244::1"}},
	} {
		cfg := config.Config{}
		for _, c := range tc.cidrs {
			cfg.NodePortAddresses = append(cfg.NodePortAddresses, netip.MustParsePrefix(c))
		}
		for f, want := range map[inet.Family][]string{inet.IPv4: tc.want4, inet.IPv6: tc.want6} {
			var got []string
			for _, a := range buildOptions(&cfg, f, "node-a", nil, host).NodePortAddresses {
				got = append(got, a.String())
			}
			if !slices.Equal(got, want) {
				t.Errorf("--nodeport-addresses=%v, %s: node port addresses %v, want %v", tc.cidrs, f, got, want)
			}
		}
	}
}

// --bind-address (bindAddress) is the node's IP of its family, as kube-proxy's
// detectNodeIPs: it is the one NodePort address of that family with nodePortAddresses
// "primary", and the node IP a load balancer source range must contain to let the node in;
// the other family keeps the Node's address. Unspecified, the Node's addresses are used,
// and without a Node the loopback address (kube-proxy's fallback).
func TestBindAddressIsTheNodeIP(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "192.0.2.10"},
		{Type: v1.NodeInternalIP, Address: "2001:db8::10"},
	}}}
	host := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::10")}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name    string
		bind    netip.Addr
		node    *v1.Node
		primary bool
		family  inet.Family
		nodeIP  netip.Addr
		ports   []netip.Addr
	}{
		{"bind, primary", a("192.0.2.20"), node, true, inet.IPv4, a("192.0.2.20"), []netip.Addr{a("192.0.2.20")}},
		{"bind of the other family", a("192.0.2.20"), node, true, inet.IPv6, a("2001:db8::10"), []netip.Addr{a("2001:db8::10")}},
		{"bind, every address", a("192.0.2.20"), node, false, inet.IPv4, a("192.0.2.20"), []netip.Addr{a("192.0.2.10"), a("192.0.2.20")}},
		{"unspecified bind", netip.IPv4Unspecified(), node, true, inet.IPv4, a("192.0.2.10"), []netip.Addr{a("192.0.2.10")}},
		{"bind without a Node", a("192.0.2.20"), nil, true, inet.IPv4, a("192.0.2.20"), []netip.Addr{a("192.0.2.20")}},
		{"no bind, no Node", netip.IPv4Unspecified(), nil, false, inet.IPv4, a("127.0.0.1"), []netip.Addr{a("192.0.2.10"), a("192.0.2.20")}},
		{"no bind, no Node, IPv6", netip.IPv4Unspecified(), nil, false, inet.IPv6, a("::1"), []netip.Addr{a("2001:db8::10")}},
	} {
		cfg := config.Config{BindAddress: tc.bind, NodePortPrimary: tc.primary}
		o := buildOptions(&cfg, tc.family, "node-a", tc.node, host)
		if o.NodeIP != tc.nodeIP || !slices.Equal(o.NodePortAddresses, tc.ports) {
			t.Errorf("%s: NodeIP %s, NodePortAddresses %v; want %s, %v", tc.name, o.NodeIP, o.NodePortAddresses, tc.nodeIP, tc.ports)
		}
	}
}

// nodePortAddresses "primary" as kube-proxy v1.34's newProxyServer turns it into CIDRs: the
// node IP of each family that has one other than loopback (a Node's first InternalIP of
// the family, else its first ExternalIP of the family; --bind-address for its family), as
// a /32 or /128. A family without one is not limited (every address of the family), and a
// node IP that is not one of the node's addresses gives that family no NodePort address.
func TestNodePortPrimaryAsKubeProxy(t *testing.T) {
	a := netip.MustParseAddr
	host := []netip.Addr{a("192.0.2.10"), a("192.0.2.20"), a("2001:db8::10"), a("2001:db8::20")}
	internal4External6 := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "2001:db8::20"},
		{Type: v1.NodeInternalIP, Address: "192.0.2.10"},
	}}}
	internal4 := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.20"}}}}
	elsewhere := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.7"}}}}
	for _, tc := range []struct {
		name   string
		bind   netip.Addr
		node   *v1.Node
		family inet.Family
		nodeIP netip.Addr
		ports  []netip.Addr
	}{
		{"InternalIP of the family", netip.IPv4Unspecified(), internal4External6, inet.IPv4, a("192.0.2.10"), []netip.Addr{a("192.0.2.10")}},
		{"ExternalIP of the other family", netip.IPv4Unspecified(), internal4External6, inet.IPv6, a("2001:db8::20"), []netip.Addr{a("2001:db8::20")}},
		{"no node IP of the family", netip.IPv4Unspecified(), internal4, inet.IPv6, a("::1"), []netip.Addr{a("2001:db8::10"), a("2001:db8::20")}},
		{"no Node", netip.IPv4Unspecified(), nil, inet.IPv4, a("127.0.0.1"), []netip.Addr{a("192.0.2.10"), a("192.0.2.20")}},
		{"loopback --bind-address", a("127.0.0.1"), internal4, inet.IPv4, a("127.0.0.1"), []netip.Addr{a("192.0.2.10"), a("192.0.2.20")}},
		{"node IP not on the node", netip.IPv4Unspecified(), elsewhere, inet.IPv4, a("198.51.100.7"), nil},
	} {
		cfg := config.Config{BindAddress: tc.bind, NodePortPrimary: true}
		o := buildOptions(&cfg, tc.family, "node-a", tc.node, host)
		if o.NodeIP != tc.nodeIP || !slices.Equal(o.NodePortAddresses, tc.ports) {
			t.Errorf("%s: NodeIP %s, NodePortAddresses %v; want %s, %v", tc.name, o.NodeIP, o.NodePortAddresses, tc.nodeIP, tc.ports)
		}
	}
}
