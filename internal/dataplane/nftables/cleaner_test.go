package nftables

import (
	"context"
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// readCounting is a fake table that counts the reads of its sets and chains.
type readCounting struct {
	*nfttest.Fake
	reads int
}

func (r *readCounting) Elements(ctx context.Context, s nft.SetDef) ([][]string, error) {
	r.reads++
	return r.Fake.Elements(ctx, s)
}

func (r *readCounting) Chains(ctx context.Context) ([]nft.Chain, error) {
	r.reads++
	return r.Fake.Chains(ctx)
}

// RemoveTables deletes a programmed table whole without reading it (no set listed, no chain
// read), and a family without a table is nothing to do.
func TestRemoveTablesReadsNothing(t *testing.T) {
	ctx := context.Background()
	v4 := &readCounting{Fake: nfttest.New(inet.IPv4)}
	v6 := &readCounting{Fake: nfttest.New(inet.IPv6)}
	p := New(v4)
	m := proxy.Member{Set: proxy.SetClusterIP, Addr: netip.MustParseAddr("10.96.0.10"), Proto: inet.TCP, Port: 80}
	res := p.Run(ctx, &dataplane.Tx{CreateSets: p.Sets(), AddMembers: []proxy.Member{m}, Rules: p.Rules(everything(inet.IPv4))})
	if res.Rules != nil || len(res.Failed) > 0 {
		t.Fatalf("program the table: rules %v, sets %v", res.Rules, res.Failed)
	}
	if err := NewCleaner([]nft.Interface{v4, v6}, nil).RemoveTables(ctx); err != nil {
		t.Fatal(err)
	}
	if v4.reads+v6.reads != 0 {
		t.Errorf("RemoveTables read the tables %d times, want none", v4.reads+v6.reads)
	}
	for _, f := range []*readCounting{v4, v6} {
		if _, err := f.Fake.Chains(ctx); !kerr.IsNotFound(err) {
			t.Errorf("%s after RemoveTables: %v, want no table", f.Name(), err)
		}
	}
}
