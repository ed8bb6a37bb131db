package dummyif

import (
	"fmt"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What a node's main table holds: connected routes, an onlink gateway outside them, a
// CNI's host routes to pods, routes on kube-ipvs0, an IPv6 link-local prefix and gateway,
// an ECMP route, a blackhole.
func TestLinkPrefixes(t *testing.T) {
	const eth0, eth1, cali, ipvs0, ppp0 = 2, 3, 7, 9, 11
	cidr := func(s string) *net.IPNet {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	routes := []netlink.Route{
		{LinkIndex: eth0, Dst: nil, Gw: net.ParseIP("192.168.1.1"), Type: unix.RTN_UNICAST},               // default via 192.168.1.1
		{LinkIndex: eth0, Dst: cidr("192.168.1.0/24"), Type: unix.RTN_UNICAST},                            // connected
		{LinkIndex: eth1, Dst: cidr("10.0.0.0/8"), Gw: net.ParseIP("172.31.0.1"), Type: unix.RTN_UNICAST}, // onlink gateway
		{LinkIndex: cali, Dst: cidr("10.244.1.5/32"), Type: unix.RTN_UNICAST},                             // a pod's host route
		{LinkIndex: ipvs0, Dst: cidr("10.96.0.0/12"), Type: unix.RTN_UNICAST},                             // kube-ipvs0
		{LinkIndex: ipvs0, Dst: nil, Gw: net.ParseIP("10.96.0.254"), Type: unix.RTN_UNICAST},
		{LinkIndex: eth0, Dst: cidr("2001:db8:1::/64"), Type: unix.RTN_UNICAST},
		{LinkIndex: eth0, Dst: cidr("fe80::/64"), Type: unix.RTN_UNICAST},
		{LinkIndex: eth0, Dst: nil, Gw: net.ParseIP("fe80::1"), Type: unix.RTN_UNICAST},
		{LinkIndex: ppp0, Dst: nil, Type: unix.RTN_UNICAST}, // default dev ppp0
		{Dst: cidr("198.51.100.0/24"), Type: unix.RTN_UNICAST, MultiPath: []*netlink.NexthopInfo{
			{LinkIndex: eth0, Gw: net.ParseIP("192.168.1.2")}, {LinkIndex: ipvs0, Gw: net.ParseIP("10.96.0.253")}}},
		{Dst: cidr("203.0.113.0/24"), Type: unix.RTN_BLACKHOLE},
	}
	got := fmt.Sprint(linkPrefixes(routes, ipvs0))
	want := "[172.31.0.1/32 192.168.1.0/24 192.168.1.1/32 192.168.1.2/32 2001:db8:1::/64]"
	if got != want {
		t.Errorf("linkPrefixes = %s\nwant           %s", got, want)
	}
}
