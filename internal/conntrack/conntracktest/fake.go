// Package conntracktest holds the in-memory fake of package conntrack's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package conntracktest

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/kerr"
)

// FaultFunc is consulted before the fake deletes each matching flow. A non-nil result
// stops Delete there with that error (wrapped), returning how many it had deleted, like a
// kernel error in the middle of a cleanup.
type FaultFunc func(f conntrack.Flow) error

// Fake holds flows in memory with the kernel's semantics: within a zone no two flows share
// a tuple (inserting one that clashes is kerr.ErrExists), and Delete removes what the
// filter matches and counts it. It is safe for concurrent use.
//
// SetFaulty (faulty.Switch) makes the fake fail requests at random as its Injector decides: List, and the
// dump Delete starts with, as reads (a failed dump deletes nothing); each flow Delete removes
// as a mutation, which stops Delete there with the flows before it deleted, as the fault hook
// does. Insert (the test's own traffic) and Dump never fail this way.
//
// SetFault (faulty.Hook) installs the fault hook (nil: removes it), asked before the Injector.
type Fake struct {
	faulty.Switch
	faulty.Hook[FaultFunc]
	mu    sync.Mutex
	flows []conntrack.Flow
}

var _ conntrack.Interface = (*Fake)(nil)

// NewFake returns a fake holding flows (see Insert); it panics on an invalid flow, as it
// is meant for tests.
func NewFake(flows ...conntrack.Flow) *Fake {
	f := &Fake{}
	for _, fl := range flows {
		if err := f.Insert(fl); err != nil {
			panic(err)
		}
	}
	return f
}

// Insert adds a flow, as `conntrack -I` or traffic would. Both tuples must hold valid
// addresses of one family; a flow with a tuple already in the zone is kerr.ErrExists.
func (f *Fake) Insert(fl conntrack.Flow) error {
	addrs := []netip.Addr{fl.Orig.Src.Addr(), fl.Orig.Dst.Addr(), fl.Reply.Src.Addr(), fl.Reply.Dst.Addr()}
	for _, a := range addrs {
		if !a.IsValid() || a.Is4() != addrs[0].Is4() || a.Zone() != "" {
			return fmt.Errorf("conntrack: insert flow %s: addresses: %w", fl, kerr.ErrInvalid)
		}
	}
	if fl.Protocol == 0 {
		return fmt.Errorf("conntrack: insert flow %s: no protocol: %w", fl, kerr.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.flows {
		if o.Zone == fl.Zone && o.Protocol == fl.Protocol &&
			(o.Orig == fl.Orig || o.Reply == fl.Reply || o.Orig == fl.Reply || o.Reply == fl.Orig) {
			return kerr.Errno(fmt.Sprintf("conntrack: insert flow %s", fl), syscall.EEXIST)
		}
	}
	f.flows = append(f.flows, fl)
	return nil
}

// List implements conntrack.Interface.
func (f *Fake) List() ([]conntrack.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Injector().Read("conntrack list"); err != nil {
		return nil, fmt.Errorf("conntrack: list flows: %w", err)
	}
	return f.list(), nil
}

// list copies the flows, sorted. Callers hold f.mu.
func (f *Fake) list() []conntrack.Flow {
	out := slices.Clone(f.flows)
	conntrack.SortFlows(out)
	return out
}

// Delete implements conntrack.Interface.
func (f *Fake) Delete(filters ...conntrack.Filter) (int, error) {
	if err := conntrack.ValidateFilters(filters); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Injector().Read("conntrack dump"); err != nil {
		return 0, fmt.Errorf("conntrack: delete flows: list: %w", err)
	}
	n := 0
	kept := f.flows[:0:0]
	var ferr error
	for _, fl := range f.flows {
		flt, ok := conntrack.MatchAny(filters, fl)
		if ferr != nil || !ok {
			kept = append(kept, fl)
			continue
		}
		if fault := f.Fault(); fault != nil {
			if err := fault(fl); err != nil {
				ferr = fmt.Errorf("delete flow %s (filter %s): %w", fl, flt, err)
				kept = append(kept, fl)
				continue
			}
		}
		if err := f.Injector().Mutation(fmt.Sprintf("conntrack delete flow %s", fl)); err != nil {
			ferr = fmt.Errorf("delete flow %s (filter %s): %w", fl, flt, err)
			kept = append(kept, fl)
			continue
		}
		n++
	}
	f.flows = kept
	return n, ferr
}

// Dump implements conntrack.Interface.
func (f *Fake) Dump() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return conntrack.FormatDump(f.list()), nil
}
