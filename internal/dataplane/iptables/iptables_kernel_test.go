//go:build kernel

package iptables

import (
	"context"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// The round trip of TestMembersRoundTrip on the kernel: members of every shape go in through
// netlink and come back from the kernel's listing as the same typed members. While they are
// in, `ipset save` (the tool, read independently) holds exactly what a fake given the same
// members holds. Check passes on a node with ipset and the iptables set extension.
func TestMembersRoundTripKernel(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			ns := netnstest.New(t)
			sets, err := ipset.New(ns.Handle)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sets.Close() })
			rules, err := netfilter.New(ns.Handle, f, netfilter.Backend{Mode: netfilter.ModeNFT, Reason: "test"})
			if err != nil {
				t.Fatal(err)
			}
			p := New(f, sets, rules)

			fake := ipsettest.NewFake()
			mirror := New(f, fake, netfiltertest.NewFake(f))
			_, missing, _ := mirror.Members()
			runTx(t, mirror, dataplane.Tx{CreateSets: missing, AddMembers: membersOfEverySet(f)})
			want, err := fake.Dump()
			if err != nil {
				t.Fatal(err)
			}

			roundTrip(t, p, f, func() {
				if got := ipset.NormalizeSave(ns.MustRun(t, "ipset", "save")); got != want {
					t.Errorf("ipset save:\n%s\nwant (the fake's dump):\n%s", got, want)
				}
			})

			if err := p.Check(context.Background()); err != nil {
				t.Errorf("check: %v", err)
			}
			if _, err := sets.List(SetName(f, proxy.SetIPVSIPs)); err != nil {
				t.Errorf("check left no %s: %v", SetName(f, proxy.SetIPVSIPs), err)
			}
		})
	}
}
