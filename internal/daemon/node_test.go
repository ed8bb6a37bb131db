package daemon

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/proxy"
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
	for _, f := range []proxy.Family{proxy.IPv4, proxy.IPv6} {
		o := buildOptions(&cfg, f, "node-a", node, nil)
		for _, a := range o.NodePortAddresses {
			if a.Zone() != "" || !a.IsGlobalUnicast() {
				t.Errorf("%s: NodePortAddresses holds %s", f, a)
			}
		}
	}
}
