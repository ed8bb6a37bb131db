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

// Elements implements nft.Interface.
func (f *Fake) Elements(ctx context.Context, s nft.SetDef) ([][]string, error) {
	what := "list set " + f.Name() + " " + s.Name
	if err := f.Injector().Read("nft " + what); err != nil {
		return nil, err
	}
	els, err := f.NFT.ListElements(ctx, "set", s.Name)
	if err != nil {
		return nil, nft.Typed(what, err)
	}
	out := make([][]string, 0, len(els))
	for _, e := range els {
		out = append(out, e.Key)
	}
	return out, nil
}

// Update implements nft.Interface: one knftables transaction, so all of it or nothing.
func (f *Fake) Update(ctx context.Context, s nft.SetDef, add, del [][]string) error {
	what := fmt.Sprintf("update set %s %s (+%d -%d)", f.Name(), s.Name, len(add), len(del))
	if err := f.Injector().Mutation("nft " + what); err != nil {
		return err
	}
	tx := f.NFT.NewTransaction()
	for _, k := range add {
		tx.Add(&knftables.Element{Set: s.Name, Key: k})
	}
	for _, k := range del {
		tx.Delete(&knftables.Element{Set: s.Name, Key: k})
	}
	return nft.Typed(what, f.NFT.Run(ctx, tx))
}

// Close implements nft.Interface.
func (f *Fake) Close() error { return nil }

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

// Dump is the whole table as knftables' Fake dumps it, with each set's elements sorted: the
// kernel keeps no order of a set's elements, so two tables that hold the same dump the same.
func (f *Fake) Dump() string {
	lines := strings.SplitAfter(f.NFT.Dump(), "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "add element ") {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "")
}
