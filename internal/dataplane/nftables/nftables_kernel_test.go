//go:build kernel

package nftables_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// The kernel lists every member as kipvs wrote it (a /0 and a host source in the interval
// set, IPv6 included), and deletes what kipvs deletes; and the nft program, which kipvs
// does not use for elements, lists the same elements as kipvs's netlink reader: kipvs's
// encoding is nf_tables' own, checked by an independent reader.
func TestMembersRoundTripKernel(t *testing.T) {
	ctx := context.Background()
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			ns := netnstest.New(t)
			conn, err := nft.New(ns.Handle, f)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			membersRoundTrip(t, conn)
			// What is left after the round trip, through nft and through kipvs's reader.
			var prog knftables.Interface
			if err := netnsutil.Do(ns.Handle, func() error {
				var err error
				prog, err = knftables.New(nft.Family(f), nft.Table)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			p := nftables.New(conn)
			for _, spec := range p.Sets() {
				var els []*knftables.Element
				if err := netnsutil.Do(ns.Handle, func() error {
					var err error
					els, err = prog.ListElements(ctx, "set", spec.Name)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				var byProgram []string
				for _, e := range els {
					byProgram = append(byProgram, strings.Join(e.Key, " . "))
				}
				ours, err := conn.Elements(ctx, p.Def(spec.Set))
				if err != nil {
					t.Fatal(err)
				}
				var byKipvs []string
				for _, k := range ours {
					byKipvs = append(byKipvs, strings.Join(k, " . "))
				}
				slices.Sort(byProgram)
				slices.Sort(byKipvs)
				if !slices.Equal(byProgram, byKipvs) {
					t.Errorf("set %s: nft lists %q, kipvs reads %q", spec.Name, byProgram, byKipvs)
				}
			}
			if out := ns.MustRun(t, "nft", "list", "set", string(nft.Family(f)), nft.Table, "load-balancer-source-cidr"); testing.Verbose() {
				t.Log(out)
			}
		})
	}
}
