package dummyif

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NodeLinkPrefixes reads, from the main routing table of the current namespace, what the
// node reaches directly on its links other than the dummy link called dummy: the prefix of
// every route without a gateway (the connected route of each address, and any onlink
// route), and every gateway as a single address (a gateway need not be inside a connected
// prefix: "via 172.31.0.1 dev eth0 onlink"). The node's neighbours live there, so no
// external or load balancer IP may take one of them. Host routes (/32, /128; a CNI's route
// to each pod), default routes without a gateway, link-local and multicast prefixes are
// left out. Sorted, without duplicates.
func NodeLinkPrefixes(dummy string) ([]netip.Prefix, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	skip := -1
	for _, l := range links {
		if l.Attrs().Name == dummy {
			skip = l.Attrs().Index
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return linkPrefixes(routes, skip), nil
}

// linkPrefixes is NodeLinkPrefixes over a route list, leaving out the link of index skip.
func linkPrefixes(routes []netlink.Route, skip int) []netip.Prefix {
	var out []netip.Prefix
	gateway := func(ip net.IP) {
		if a, ok := netip.AddrFromSlice(ip); ok {
			if a = a.Unmap(); a.IsGlobalUnicast() {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	for _, r := range routes {
		if r.Type != 0 && r.Type != unix.RTN_UNICAST {
			continue
		}
		if len(r.MultiPath) > 0 {
			for _, nh := range r.MultiPath {
				if nh.LinkIndex != skip {
					gateway(nh.Gw)
				}
			}
			continue
		}
		if r.LinkIndex == skip {
			continue
		}
		if r.Gw != nil {
			gateway(r.Gw)
			continue
		}
		if r.Dst == nil {
			continue // a default route through a device (point-to-point): no neighbours
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		a = a.Unmap()
		ones, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(a, ones).Masked()
		if ones == 0 || ones >= a.BitLen() || !p.Addr().IsGlobalUnicast() {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}
