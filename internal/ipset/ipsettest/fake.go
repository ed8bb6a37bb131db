// Package ipsettest holds the in-memory fake of package ipset's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package ipsettest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Fake is an in-memory model of one namespace's ipsets: headers, members and references. It
// rejects what the kernel rejects with the same typed errors (see ipset.Interface), so reconcile
// logic can be tested without root. Use Reference to model an iptables rule using a set, and
// FailNth to make a kernel request fail.
//
// SetFaulty (faulty.Switch) makes the fake fail kernel requests at random as its Injector decides. The
// requests are those FailNth counts, asked about as mutations, one by one: a failed member of
// an Add or Del stops the call there with the members before it applied, as an `ipset
// restore` batch stops at its failing line; a failed step of Replace leaves what the real
// Replace leaves. List, ListNames, Test and the set lookup Add and Del start with are asked
// about as reads; Dump never fails this way. FailNth is consulted first.
type Fake struct {
	faulty.Switch
	replaceMu sync.Mutex // serializes Replace, as in the real implementation
	mu        sync.Mutex
	sets      map[string]*fakeSet
	refs      map[string]int
	faults    map[int]error // mutation number -> error
	mutations int
	closed    bool
}

type fakeSet struct {
	hdr     ipset.Set
	members map[ipset.Entry]string // key -> comment
}

var _ ipset.Interface = (*Fake)(nil)

// NewFake returns an empty fake namespace.
func NewFake() *Fake {
	return &Fake{sets: map[string]*fakeSet{}, refs: map[string]int{}, faults: map[int]error{}}
}

// FailNth makes the nth kernel mutation from now (1 = the next) fail with err, changing
// nothing. Mutations are the requests Create, Destroy, Flush and Swap send, and one per member
// for Add and Del, including those Replace makes; a request rejected by the up-front checks
// (bad name, or a member of the wrong type, which is not sent) does not count.
func (f *Fake) FailNth(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[f.mutations+n] = err
}

// faultyRead asks the Injector about a read request. f.mu is held.
func (f *Fake) faultyRead(what string) error {
	if f.closed {
		return nil // get reports ipset.ErrClosed
	}
	if err := f.Injector().Read("ipset " + what); err != nil {
		return fmt.Errorf("ipset fake: %s: %w", what, err)
	}
	return nil
}

// Mutations is the number of kernel mutations so far.
func (f *Fake) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutations
}

// Reference models a kernel object (an iptables -m set rule) taking a reference on a set:
// Destroy then fails with kerr.ErrBusy until Unreference. References stay with the name
// across Swap, as in the kernel.
func (f *Fake) Reference(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sets[name] == nil {
		return fmt.Errorf("ipset fake: reference set %s: %w", name, kerr.ErrNotFound)
	}
	f.refs[name]++
	return nil
}

// Unreference drops a reference taken with Reference.
func (f *Fake) Unreference(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[name] == 0 {
		return fmt.Errorf("ipset fake: unreference set %s: no reference: %w", name, kerr.ErrNotFound)
	}
	f.refs[name]--
	return nil
}

// mutate counts one kernel mutation and returns an injected fault for it. f.mu is held.
func (f *Fake) mutate(what string) error {
	if f.closed {
		return ipset.ErrClosed
	}
	f.mutations++
	if err, ok := f.faults[f.mutations]; ok {
		delete(f.faults, f.mutations)
		return fmt.Errorf("ipset fake: %s: injected fault: %w", what, err)
	}
	if err := f.Injector().Mutation("ipset " + what); err != nil {
		return fmt.Errorf("ipset fake: %s: %w", what, err)
	}
	return nil
}

// get returns a set or kerr.ErrNotFound. f.mu is held.
func (f *Fake) get(what, name string) (*fakeSet, error) {
	if f.closed {
		return nil, ipset.ErrClosed
	}
	if err := ipset.CheckName(name); err != nil {
		return nil, err
	}
	s := f.sets[name]
	if s == nil {
		return nil, fmt.Errorf("ipset: %s: set %s: %w", what, name, kerr.ErrNotFound)
	}
	return s, nil
}

// Create implements ipset.Interface.
func (f *Fake) Create(s ipset.Set) error {
	s, err := s.Normalize()
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mutate("create " + s.Name); err != nil {
		return err
	}
	if have := f.sets[s.Name]; have != nil {
		return ipset.EnsureError(s, have.hdr)
	}
	f.sets[s.Name] = &fakeSet{hdr: s, members: map[ipset.Entry]string{}}
	return nil
}

func (f *Fake) create(s ipset.Set) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mutate("create " + s.Name); err != nil {
		return err
	}
	if f.sets[s.Name] != nil {
		return fmt.Errorf("ipset: create %s: %w", s.Name, kerr.ErrExists)
	}
	f.sets[s.Name] = &fakeSet{hdr: s, members: map[ipset.Entry]string{}}
	return nil
}

// Destroy implements ipset.Interface.
func (f *Fake) Destroy(name string) error { return f.destroy(name) }

func (f *Fake) destroy(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ipset.CheckName(name); err != nil {
		return err
	}
	if err := f.mutate("destroy " + name); err != nil {
		return err
	}
	if _, err := f.get("destroy", name); err != nil {
		return err
	}
	if f.refs[name] > 0 {
		return fmt.Errorf("ipset: destroy %s: referenced %d times: %w", name, f.refs[name], kerr.ErrBusy)
	}
	delete(f.sets, name)
	return nil
}

// Flush implements ipset.Interface.
func (f *Fake) Flush(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ipset.CheckName(name); err != nil {
		return err
	}
	if err := f.mutate("flush " + name); err != nil {
		return err
	}
	s, err := f.get("flush", name)
	if err != nil {
		return err
	}
	clear(s.members)
	return nil
}

// Swap implements ipset.Interface.
func (f *Fake) Swap(a, b string) error { return f.swap(a, b) }

func (f *Fake) swap(a, b string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range []string{a, b} {
		if err := ipset.CheckName(n); err != nil {
			return err
		}
	}
	if err := f.mutate("swap " + a + " " + b); err != nil {
		return err
	}
	what := "swap " + a + " with " + b
	sa, err := f.get(what, a)
	if err != nil {
		return err
	}
	sb, err := f.get(what, b)
	if err != nil {
		return err
	}
	if sa.hdr.Type != sb.hdr.Type || sa.hdr.Family != sb.hdr.Family {
		return fmt.Errorf("ipset: %s: %s is %s, %s is %s: type mismatch: %w", what, a, sa.hdr.String(), b, sb.hdr.String(), kerr.ErrInvalid)
	}
	sa.hdr.Name, sb.hdr.Name = b, a
	f.sets[a], f.sets[b] = sb, sa
	return nil
}

// header returns a set's header for the up-front member checks. f.mu is held.
func (f *Fake) header(what, name string) (ipset.Set, error) {
	if err := f.faultyRead(what + " " + name + " (list header)"); err != nil {
		return ipset.Set{}, err
	}
	s, err := f.get(what, name)
	if err != nil {
		return ipset.Set{}, err
	}
	return s.hdr, nil
}

// Add implements ipset.Interface.
func (f *Fake) Add(set string, entries ...ipset.Entry) error {
	f.mu.Lock()
	hdr, err := f.header("add to", set)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	entries, bad := ipset.Sift(hdr, entries)
	if err := f.add(hdr, entries); err != nil {
		return errors.Join(err, bad)
	}
	return bad
}

func (f *Fake) add(hdr ipset.Set, entries []ipset.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		what := fmt.Sprintf("add %s to %s", e, hdr.Name)
		if err := f.mutate(what); err != nil {
			return err
		}
		s, err := f.get(what, hdr.Name)
		if err != nil {
			return err
		}
		if s.hdr.Type != hdr.Type || s.hdr.Family != hdr.Family {
			return fmt.Errorf("ipset: %s: the set changed to %s: %w", what, s.hdr.String(), kerr.ErrInvalid)
		}
		k := e.Key()
		if _, ok := s.members[k]; !ok && s.hdr.Type.IsHash() && len(s.members) >= int(s.hdr.MaxElem) {
			return fmt.Errorf("ipset: %s: maxelem %d reached: %w", what, s.hdr.MaxElem, ipset.ErrFull)
		}
		s.members[k] = e.Comment
	}
	return nil
}

// Del implements ipset.Interface.
func (f *Fake) Del(set string, entries ...ipset.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	hdr, err := f.header("delete from", set)
	if err != nil {
		return err
	}
	entries, bad := ipset.Sift(hdr, entries)
	for _, e := range entries {
		if err := f.mutate(fmt.Sprintf("delete %s from %s", e, set)); err != nil {
			return errors.Join(err, bad)
		}
		delete(f.sets[set].members, e.Key())
	}
	return bad
}

// Test implements ipset.Interface.
func (f *Fake) Test(set string, e ipset.Entry) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.faultyRead("test in " + set); err != nil {
		return false, err
	}
	s, err := f.get("test in", set)
	if err != nil {
		return false, err
	}
	es, err := ipset.Prepare(s.hdr, []ipset.Entry{e})
	if err != nil {
		return false, err
	}
	k := es[0].Key()
	if _, ok := s.members[k]; ok {
		return true, nil
	}
	// The kernel tests a host address against every net size present.
	if s.hdr.Type == ipset.HashNet || s.hdr.Type == ipset.HashIPPortNet {
		if k.Net.Bits() == k.Net.Addr().BitLen() {
			host := k.Net.Addr()
			k.Net = netip.Prefix{}
			for m := range s.members {
				n := m.Net
				m.Net = netip.Prefix{}
				if m == k && n.Contains(host) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// List implements ipset.Interface.
func (f *Fake) List(name string) (*ipset.SetInfo, error) { return f.list(name) }

func (f *Fake) list(name string) (*ipset.SetInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.faultyRead("list " + name); err != nil {
		return nil, err
	}
	s, err := f.get("list", name)
	if err != nil {
		return nil, err
	}
	return f.info(s), nil
}

// Header implements ipset.Interface.
func (f *Fake) Header(name string) (*ipset.SetInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.faultyRead("list header " + name); err != nil {
		return nil, err
	}
	s, err := f.get("list header", name)
	if err != nil {
		return nil, err
	}
	return &ipset.SetInfo{Set: s.hdr, References: f.refs[name], Elements: len(s.members)}, nil
}

// info snapshots a set. f.mu is held.
func (f *Fake) info(s *fakeSet) *ipset.SetInfo {
	in := &ipset.SetInfo{Set: s.hdr, References: f.refs[s.hdr.Name], Elements: len(s.members)}
	for k, c := range s.members {
		k.Comment = c
		in.Entries = append(in.Entries, k)
	}
	slices.SortFunc(in.Entries, ipset.CompareEntries)
	return in
}

// ListNames implements ipset.Interface.
func (f *Fake) ListNames() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ipset.ErrClosed
	}
	if err := f.faultyRead("list names"); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(f.sets))
	for n := range f.sets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Replace implements ipset.Interface.
func (f *Fake) Replace(s ipset.Set, entries []ipset.Entry) error {
	f.replaceMu.Lock()
	defer f.replaceMu.Unlock()
	return ipset.ReplaceWith(fakePrimitives{f}, s, entries)
}

// Dump implements ipset.Interface.
func (f *Fake) Dump() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return "", ipset.ErrClosed
	}
	infos := make([]*ipset.SetInfo, 0, len(f.sets))
	for _, s := range f.sets {
		infos = append(infos, f.info(s))
	}
	return ipset.FormatDump(infos), nil
}

// Close implements ipset.Interface.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// fakePrimitives gives ipset.ReplaceWith the fake's single requests.
type fakePrimitives struct{ f *Fake }

func (p fakePrimitives) ListSet(name string) (*ipset.SetInfo, error)    { return p.f.list(name) }
func (p fakePrimitives) CreateSet(s ipset.Set) error                    { return p.f.create(s) }
func (p fakePrimitives) DestroySet(name string) error                   { return p.f.destroy(name) }
func (p fakePrimitives) AddEntries(s ipset.Set, es []ipset.Entry) error { return p.f.add(s, es) }
func (p fakePrimitives) SwapSets(a, b string) error                     { return p.f.swap(a, b) }
