// Package nfttest is the fake of package nft: knftables' Fake, which models one family's
// table, its sets, elements and chains and answers not-found and exists errors as the
// kernel does, wrapped as an nft.Interface with a faulty mode.
package nfttest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
)

// Fake is an nft.Interface over knftables.Fake. SetFaulty (faulty.Switch) makes it fail at
// random: Run and Check as mutations ("nft run", "nft check"), Elements, Chains and Sets as
// reads ("nft list ..."). A failed Run changes nothing, as an nft transaction.
type Fake struct {
	faulty.Switch
	// NFT is the knftables fake: its Dump is the whole table, deterministic.
	NFT    *knftables.Fake
	family inet.Family
}

var _ nft.Interface = (*Fake)(nil)

// New returns an empty fake of family f's kipvs table.
func New(f inet.Family) *Fake {
	return &Fake{NFT: knftables.NewFake(nft.Family(f), nft.Table), family: f}
}

// Name implements nft.Interface.
func (f *Fake) Name() string { return string(nft.Family(f.family)) + " " + nft.Table }

// Family implements nft.Interface.
func (f *Fake) Family() inet.Family { return f.family }

// NewTransaction implements nft.Interface.
func (f *Fake) NewTransaction() *knftables.Transaction { return f.NFT.NewTransaction() }

// Run implements nft.Interface.
func (f *Fake) Run(ctx context.Context, tx *knftables.Transaction) error {
	if err := f.Injector().Mutation("nft run " + firstLine(tx)); err != nil {
		return err
	}
	return f.NFT.Run(ctx, tx)
}

// Check implements nft.Interface.
func (f *Fake) Check(ctx context.Context, tx *knftables.Transaction) error {
	if err := f.Injector().Mutation("nft check " + firstLine(tx)); err != nil {
		return err
	}
	return f.NFT.Check(ctx, tx)
}

// SetElements implements nft.Interface.
func (f *Fake) SetElements(ctx context.Context) (map[string][]*knftables.Element, error) {
	what := "list table " + string(nft.Family(f.family)) + " " + nft.Table
	if err := f.Injector().Read("nft " + what); err != nil {
		return nil, err
	}
	names, err := f.NFT.List(ctx, "set")
	if err != nil {
		return nil, nft.Typed(what, err)
	}
	out := map[string][]*knftables.Element{}
	for _, n := range names {
		els, err := f.NFT.ListElements(ctx, "set", n)
		if err != nil {
			return nil, nft.Typed(what, err)
		}
		out[n] = els
	}
	return out, nil
}

// Sets implements nft.Interface.
func (f *Fake) Sets(ctx context.Context) ([]string, error) {
	what := "list sets of " + string(nft.Family(f.family)) + " " + nft.Table
	if err := f.Injector().Read("nft " + what); err != nil {
		return nil, err
	}
	names, err := f.NFT.List(ctx, "set")
	slices.Sort(names)
	return names, nft.Typed(what, err)
}

// Chains implements nft.Interface: the fake's chains sorted by name, each rule as it was
// written (the kernel test checks that kipvs writes rules as nft prints them).
func (f *Fake) Chains(_ context.Context) ([]nft.Chain, error) {
	what := "list table " + string(nft.Family(f.family)) + " " + nft.Table
	if err := f.Injector().Read("nft " + what); err != nil {
		return nil, err
	}
	f.NFT.RLock()
	defer f.NFT.RUnlock()
	if f.NFT.Table == nil {
		return nil, fmt.Errorf("%s: %w", what, kerr.ErrNotFound)
	}
	var out []nft.Chain
	for _, c := range f.NFT.Table.Chains {
		ch := nft.Chain{Name: c.Name, Base: nft.BaseSpec(&c.Chain)}
		for _, r := range c.Rules {
			text := r.Rule
			if r.Comment != nil {
				text += ` comment "` + *r.Comment + `"`
			}
			ch.Rules = append(ch.Rules, text)
		}
		out = append(out, ch)
	}
	slices.SortFunc(out, func(a, b nft.Chain) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func firstLine(tx *knftables.Transaction) string {
	s := tx.String()
	line, _, _ := strings.Cut(s, "\n")
	return line
}
