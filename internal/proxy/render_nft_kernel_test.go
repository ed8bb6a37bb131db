//go:build kernel

package proxy_test

import (
	"context"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// Every rule the nftables backend can render is accepted by the real kernel and listed by
// nft exactly as kipvs wrote it: for each node of the corpus (both families in one fresh
// namespace, as on a dual-stack node) the sets are created and the rules applied through
// the backend, read back with `nft -t list table`, and the read-back must equal the
// rendering; a second apply of the same rules changes nothing. If the listing differed,
// kipvs would "repair" drift forever.
func TestNFTRenderedRulesLoadKernel(t *testing.T) {
	ctx := context.Background()
	nodes, order := variantsByNode()
	for _, node := range order {
		t.Run(node, func(t *testing.T) {
			ns := netnstest.New(t)
			for _, v := range nodes[node] {
				conn, err := nft.New(ns.Handle, v.Filter.Family)
				if err != nil {
					t.Fatal(err)
				}
				p := nftables.New(conn)
				want := p.Rules(v.Filter)
				res := p.Run(ctx, &dataplane.Tx{CreateSets: p.Sets(), Rules: want})
				if res.Rules != nil || len(res.Failed) > 0 {
					t.Fatalf("%s: apply: rules %v, sets %v\n%s", v.Name, res.Rules, res.Failed, want)
				}
				got, err := p.ObserveRules(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if d := want.Diff(got); len(d) > 0 {
					t.Errorf("%s: nft lists the rules otherwise than kipvs writes them:\n%s", v.Name, d)
				}
				if got.String() != want.String() {
					t.Errorf("%s: read-back text differs:\n--- got\n%s--- want\n%s", v.Name, got, want)
				}
				members, missing, err := p.Members()
				if err != nil || len(members) > 0 || len(missing) > 0 {
					t.Errorf("%s: members %v, missing %v, err %v", v.Name, members, missing, err)
				}
			}
		})
	}
}
