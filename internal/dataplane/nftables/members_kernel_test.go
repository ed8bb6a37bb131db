//go:build kernel

package nftables

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// Every kind of member kipvs writes reads back from the kernel as written, through one
// `nft --json list table` per family: an address-protocol-port element (TCP and SCTP), one
// with a source address, one with a source prefix and one with a host as source in the
// interval set, a port, an address. A full sync compares these with what it wants; a member
// that read back otherwise would be "repaired" forever.
func TestNFTMembersReadBackKernel(t *testing.T) {
	ctx := context.Background()
	ns := netnstest.New(t)
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		conn, err := nft.New(ns.Handle, f)
		if err != nil {
			t.Fatal(err)
		}
		p := New(conn)
		if _, missing, err := p.Members(); err != nil || len(missing) != len(proxy.AllSets()) {
			t.Fatalf("%s before the table exists: %d sets missing, %v; want all %d missing", f, len(missing), err, len(proxy.AllSets()))
		}
		want := members(f)
		res := p.Run(ctx, &dataplane.Tx{CreateSets: p.Sets(), AddMembers: slices.Collect(maps.Keys(want))})
		if res.Rules != nil || len(res.Failed) > 0 {
			t.Fatalf("%s: apply: %v %v", f, res.Rules, res.Failed)
		}
		got, missing, err := p.Members()
		if err != nil || len(missing) > 0 {
			t.Fatalf("%s: members: missing %v, %v", f, missing, err)
		}
		for m := range want {
			if _, ok := got[m]; !ok {
				t.Errorf("%s: %s (%s) did not read back", f, m, p.MemberString(m))
			}
		}
		for m := range got {
			if _, ok := want[m]; !ok {
				t.Errorf("%s: read back %s (%s), never written", f, m, p.MemberString(m))
			}
		}
	}
}

// members is one member or two of every set of family f, of every shape kipvs writes.
func members(f inet.Family) map[proxy.Member]struct{} {
	vip, src, host := netip.MustParseAddr("10.96.0.10"), netip.MustParsePrefix("192.168.0.0/24"), netip.MustParseAddr("192.168.1.7")
	if f == inet.IPv6 {
		vip, src, host = netip.MustParseAddr("fd00:10:96::a"), netip.MustParsePrefix("fd00:1::/64"), netip.MustParseAddr("fd00:2::7")
	}
	out := map[proxy.Member]struct{}{}
	for _, s := range proxy.AllSets() {
		base := proxy.Member{Set: s, Addr: vip, Proto: inet.TCP, Port: 80}
		switch kindOf(s) {
		case kindPort:
			out[proxy.Member{Set: s, Port: 30080}] = struct{}{}
		case kindAddr:
			out[proxy.Member{Set: s, Addr: vip}] = struct{}{}
		case kindAddrProtoPortAddr:
			base.Source = proxy.HostSource(vip)
			out[base] = struct{}{}
		case kindAddrProtoPortNet:
			base.Source = src
			out[base] = struct{}{}
			base.Source = proxy.HostSource(host)
			out[base] = struct{}{}
		default:
			out[base] = struct{}{}
			base.Proto, base.Port = inet.SCTP, 9000
			out[base] = struct{}{}
		}
	}
	return out
}
