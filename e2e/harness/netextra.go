package harness

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// AddClient creates a client namespace name linked to the node by a veth pair (hostIf with
// nodeSide on the node, eth0 with clientSide in the namespace) and routes via the node to
// the Service CIDR, the public range and the node's IP, like AddExternal with other
// addresses: a second external client.
func (tp *Topology) AddClient(t testing.TB, name, hostIf string, nodeSide, clientSide netip.Prefix) *NS {
	t.Helper()
	ns, err := tp.newNS(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.vethInto(ns, hostIf, clientSide); err != nil {
		t.Fatal(err)
	}
	if err := linkUp(netns.None(), hostIf, nodeSide); err != nil {
		t.Fatal(err)
	}
	if err := addRoutes(ns, nodeSide.Addr(), ServiceCIDR, PublicNet, netip.PrefixFrom(NodeIP, 32)); err != nil {
		t.Fatal(err)
	}
	return ns
}

// AddAddr puts addr on link in ns (netns.None() for the node) without duplicate address
// detection, so an IPv6 address is usable at once.
func AddAddr(t testing.TB, ns netns.NsHandle, link string, addr netip.Prefix) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		t.Fatalf("link %s: %v", link, err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatalf("address %s on %s: %v", addr, link, err)
	}
}

// AddIPv6 gives the pod addr (on its eth0, no DAD) and a default IPv6 route via gw, the
// node's address on the pod bridge.
func (p *Pod) AddIPv6(t testing.TB, addr netip.Prefix, gw netip.Addr) {
	t.Helper()
	AddAddr(t, p.Handle, "eth0", addr)
	if err := addRoutes(&p.NS, gw, netip.MustParsePrefix("::/0")); err != nil {
		t.Fatal(fmt.Errorf("pod %s: %w", p.PodName, err))
	}
}

// IPv6 addresses of the dual-stack scenario.
var (
	// ServiceCIDR6 is the apiserver's IPv6 --service-cluster-ip-range (see
	// cluster.DefaultServiceCIDR).
	ServiceCIDR6 = netip.MustParsePrefix("fd00:10:96::/112")
	// PodGateway6 is the node's IPv6 address on the pod bridge; ClusterCIDR6 the IPv6
	// --cluster-cidr.
	PodGateway6  = netip.MustParsePrefix("fd00:10:244::1/64")
	ClusterCIDR6 = netip.MustParsePrefix("fd00:10:244::/56")
)
