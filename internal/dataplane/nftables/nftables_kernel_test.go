//go:build kernel

package nftables_test

import (
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// The kernel lists every member as kipvs wrote it (a /0 and a host source in the interval
// set, IPv6 included), and deletes what kipvs deletes.
func TestMembersRoundTripKernel(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			ns := netnstest.New(t)
			conn, err := nft.New(ns.Handle, f)
			if err != nil {
				t.Fatal(err)
			}
			membersRoundTrip(t, conn)
			if out := ns.MustRun(t, "nft", "list", "set", string(nft.Family(f)), nft.Table, "load-balancer-source-cidr"); testing.Verbose() {
				t.Log(out)
			}
		})
	}
}
