package nftables

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Cleaner is the nftables backend's dataplane.Cleaner: kipvs's table of each family given,
// and foreign tables named for removal (kube-proxy's nftables-mode "kube-proxy" table, only
// when asked). The rules of a kipvs table are its chains ("nftables ip kipvs"), its sets
// are the table itself, deleted last ("ip kipvs").
type Cleaner struct {
	own, foreign []nft.Interface
}

var _ dataplane.Cleaner = (*Cleaner)(nil)

// NewCleaner returns a Cleaner of the kipvs tables own and the whole tables foreign.
func NewCleaner(own, foreign []nft.Interface) *Cleaner {
	return &Cleaner{own: own, foreign: foreign}
}

// rulesName is how a plan names the chains of table t.
func rulesName(t nft.Interface) string { return "nftables " + t.Name() }

// Owned implements dataplane.Cleaner.
func (c *Cleaner) Owned(ctx context.Context) (dataplane.Owned, error) {
	o := dataplane.Owned{Members: map[inet.Family]map[proxy.Member]struct{}{}}
	for _, t := range c.own {
		chains, err := t.Chains(ctx)
		if kerr.IsNotFound(err) {
			continue
		}
		if err != nil {
			return o, err
		}
		if len(chains) > 0 {
			o.Rules = append(o.Rules, rulesName(t))
		}
		o.Sets = append(o.Sets, t.Name())
		ms, err := New(t).members(ctx)
		if err != nil {
			return o, err
		}
		o.Members[t.Family()] = ms
	}
	for _, t := range c.foreign {
		switch _, err := t.Chains(ctx); {
		case kerr.IsNotFound(err):
		case err != nil:
			return o, err
		default:
			o.Rules = append(o.Rules, rulesName(t))
		}
	}
	return o, nil
}

// RemoveRules implements dataplane.Cleaner: a kipvs table loses its chains (its sets stay
// until RemoveSets), a foreign table goes whole.
func (c *Cleaner) RemoveRules(ctx context.Context, names []string) error {
	var errs []error
	for _, t := range c.own {
		if !slices.Contains(names, rulesName(t)) {
			continue
		}
		chains, err := t.Chains(ctx)
		if kerr.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tx := t.NewTransaction()
		for _, ch := range chains {
			tx.Flush(&knftables.Chain{Name: ch.Name})
		}
		for _, ch := range chains {
			tx.Delete(&knftables.Chain{Name: ch.Name})
		}
		if err := nft.Typed("delete the chains of "+t.Name(), t.Run(ctx, tx)); err != nil && !kerr.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, t := range c.foreign {
		if slices.Contains(names, rulesName(t)) {
			errs = append(errs, deleteTable(ctx, t))
		}
	}
	return errors.Join(errs...)
}

// RemoveSets implements dataplane.Cleaner: each kipvs table named goes, with its sets.
func (c *Cleaner) RemoveSets(names []string) error {
	var errs []error
	for _, t := range c.own {
		if slices.Contains(names, t.Name()) {
			errs = append(errs, deleteTable(context.Background(), t))
		}
	}
	return errors.Join(errs...)
}

// RemoveTables deletes each kipvs table given whole, its chains and sets together, in one
// nft transaction per table and without reading it first; a missing table is nothing to do.
// It is how kipvs with the iptables backend removes the nftables backend's tables at start:
// Owned would first list every set's elements, one nft run per set and family, which takes
// seconds per run on a loaded or emulated machine.
func (c *Cleaner) RemoveTables(ctx context.Context) error {
	var errs []error
	for _, t := range c.own {
		errs = append(errs, deleteTable(ctx, t))
	}
	return errors.Join(errs...)
}

func deleteTable(ctx context.Context, t nft.Interface) error {
	tx := t.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := nft.Typed("delete table "+t.Name(), t.Run(ctx, tx))
	if err != nil && !kerr.IsNotFound(err) {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
