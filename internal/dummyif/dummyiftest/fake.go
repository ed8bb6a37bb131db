// Package dummyiftest holds the in-memory fake of package dummyif's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package dummyiftest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// FaultFunc is consulted before every mutation of the fake (EnsureLink creating the link,
// DeleteLink, AddAddress, DeleteAddress) with the operation's description, e.g.
// "add address 10.96.0.1/32". A non-nil result fails that call with the returned error
// (wrapped with the description) and changes nothing.
type FaultFunc func(op string) error

// Fake models one namespace's view of the named link: absent, a dummy with its state and
// addresses, or a link of another type (see SetForeignLink). It rejects what the kernel
// rejects with the same typed errors and errnos and is safe for concurrent use.
//
// SetFaulty (faulty.Switch) makes the fake fail requests at random as its Injector decides: the mutations
// the fault hook sees (each changes nothing when it fails), and Addresses as a read. Dump
// never fails this way. The fault hook is consulted first.
//
// SetFault (faulty.Hook) installs the fault hook (nil: removes it), asked before the Injector.
type Fake struct {
	faulty.Switch
	faulty.Hook[FaultFunc]
	name  string
	mu    sync.Mutex
	typ   string // "" when there is no link
	up    bool
	addrs map[netip.Prefix]bool
}

var _ dummyif.Interface = (*Fake)(nil)

// NewFake returns a fake with no link called name ("" means ipvsmode.DummyName). It panics on an
// invalid name, as it is meant for tests.
func NewFake(name string) *Fake {
	if name == "" {
		name = ipvsmode.DummyName
	}
	if err := dummyif.ValidName(name); err != nil {
		panic(err)
	}
	return &Fake{name: name, addrs: map[netip.Prefix]bool{}}
}

// SetForeignLink replaces the link by one of type typ (e.g. "veth"), with no addresses,
// as if another program had created it; typ "" removes the link.
func (f *Fake) SetForeignLink(typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.typ, f.up = typ, false
	clear(f.addrs)
}

// LinkLocal is the link-local address the fake's link gets when it goes up: the kernel
// gives a dummy link (addrgenmode eui64, the default) an fe80::/64 address derived from its
// random MAC address; the fake uses this fixed one.
func (f *Fake) LinkLocal() netip.Prefix { return netip.MustParsePrefix("fe80::8c4f:a1ff:fe2b:7c10/64") }

// SetUp sets the link's administrative state, as `ip link set NAME up|down` would. It is a
// no-op without a link. Like the kernel, going up adds the link's own IPv6 link-local
// address (LinkLocal) and going down removes it. Not modelled: the kernel also removes
// the link's other IPv6 addresses when it goes down (net.ipv6.conf.*.keep_addr_on_down=0).
func (f *Fake) SetUp(up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.typ == "" || f.up == up {
		return
	}
	f.up = up
	if up {
		f.addrs[f.LinkLocal()] = true
	} else {
		delete(f.addrs, f.LinkLocal())
	}
}

// Name implements dummyif.Interface.
func (f *Fake) Name() string { return f.name }

func (f *Fake) check(op string) error {
	if fault := f.Fault(); fault != nil {
		if err := fault(op); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := f.Injector().Mutation("dummyif " + op); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// dummy returns nil if the link exists and is a dummy. Callers hold f.mu.
func (f *Fake) dummy() error {
	switch f.typ {
	case "":
		return fmt.Errorf("link %s: %w", f.name, kerr.ErrNotFound)
	case "dummy":
		return nil
	default:
		return dummyif.NotDummyError(f.name, f.typ)
	}
}

// EnsureLink implements dummyif.Interface.
func (f *Fake) EnsureLink() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.typ {
	case "dummy":
		return false, nil
	case "":
	default:
		return false, dummyif.NotDummyError(f.name, f.typ)
	}
	if err := f.check("add dummy link " + f.name); err != nil {
		return false, err
	}
	f.typ, f.up = "dummy", false
	return true, nil
}

// DeleteLink implements dummyif.Interface.
func (f *Fake) DeleteLink() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.dummy(); err != nil {
		return err
	}
	if err := f.check("delete link " + f.name); err != nil {
		return err
	}
	f.typ, f.up = "", false
	clear(f.addrs)
	return nil
}

// Addresses implements dummyif.Interface.
func (f *Fake) Addresses() ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.dummy(); err != nil {
		return nil, err
	}
	if err := f.Injector().Read("dummyif list addresses of " + f.name); err != nil {
		return nil, fmt.Errorf("list addresses of link %s: %w", f.name, err)
	}
	out := slices.Collect(maps.Keys(f.addrs))
	dummyif.SortPrefixes(out)
	return out, nil
}

// AddAddress implements dummyif.Interface.
func (f *Fake) AddAddress(addr netip.Addr) error {
	return f.changeAddress(addr, true)
}

// DeleteAddress implements dummyif.Interface.
func (f *Fake) DeleteAddress(addr netip.Addr) error {
	return f.changeAddress(addr, false)
}

// changeAddress adds (add) or deletes addr's host prefix, failing as the kernel does when it
// is already there (EEXIST) or not there (EADDRNOTAVAIL).
func (f *Fake) changeAddress(addr netip.Addr, add bool) error {
	p, err := dummyif.HostPrefix(addr)
	if err != nil {
		return err
	}
	verb, what, refusal := "delete", fmt.Sprintf("delete address %s from link %s", p, f.name), syscall.EADDRNOTAVAIL
	if add {
		verb, what, refusal = "add", fmt.Sprintf("add address %s to link %s", p, f.name), syscall.EEXIST
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.dummy(); err != nil {
		return fmt.Errorf("%s address %s: %w", verb, p, err)
	}
	if f.addrs[p] == add {
		return kerr.Errno(what, refusal)
	}
	if err := f.check(what); err != nil {
		return err
	}
	if add {
		f.addrs[p] = true
	} else {
		delete(f.addrs, p)
	}
	return nil
}

// EnsureAddress implements dummyif.Interface.
func (f *Fake) EnsureAddress(addr netip.Addr) (bool, error) { return dummyif.EnsureAddressVia(f, addr) }

// EnsureAddresses implements dummyif.Interface (one address at a time: each can fail alone).
func (f *Fake) EnsureAddresses(addrs []netip.Addr) []error {
	return dummyif.EnsureAddressesVia(f, addrs)
}

// RemoveAddress implements dummyif.Interface.
func (f *Fake) RemoveAddress(addr netip.Addr) (bool, error) { return dummyif.RemoveAddressVia(f, addr) }

// Dump implements dummyif.Interface.
func (f *Fake) Dump() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return dummyif.FormatDump(f.name, f.typ, f.up, slices.Collect(maps.Keys(f.addrs))), nil
}
