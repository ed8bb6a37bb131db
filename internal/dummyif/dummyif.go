package dummyif

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/kerr"
)

// ErrNotDummy is returned (wrapped, with the link's name and actual type) when a link of the
// configured name exists but is not a dummy: the adapter never touches such a link. It
// matches kerr.ErrInvalid as well.
var ErrNotDummy = fmt.Errorf("link is not a dummy: %w", kerr.ErrInvalid)

// Interface manages one named dummy link. Both the real implementation and the fake return
// kerr.ErrNotFound for a missing link or address, kerr.ErrExists for an address already
// there, kerr.ErrInvalid for an address that cannot be a VIP, and ErrNotDummy for a link of
// the name that is not a dummy.
type Interface interface {
	// Name returns the link's name.
	Name() string
	// EnsureLink creates the link, DOWN, unless a dummy link of that name exists (its
	// state and addresses are then left alone). It reports whether it created the link.
	EnsureLink() (created bool, err error)
	// DeleteLink deletes the link and with it all its addresses.
	DeleteLink() error
	// Addresses returns every address on the link, sorted (IPv4 first).
	Addresses() ([]netip.Prefix, error)
	// AddAddress adds addr as a host prefix (/32 or /128); kerr.ErrExists if it is there.
	AddAddress(addr netip.Addr) error
	// DeleteAddress deletes the host prefix of addr; kerr.ErrNotFound if it is not there.
	DeleteAddress(addr netip.Addr) error
	// EnsureAddress is AddAddress that treats an address already there as success; it
	// reports whether it added the address.
	EnsureAddress(addr netip.Addr) (added bool, err error)
	// EnsureAddresses is EnsureAddress for each of addrs, in as few requests as it can (a
	// first sync binds a VIP per Service): errs[i] is addrs[i]'s outcome, the error
	// EnsureAddress would have returned.
	EnsureAddresses(addrs []netip.Addr) (errs []error)
	// RemoveAddress is DeleteAddress that treats a missing address, or a missing link, as
	// success; it reports whether it deleted the address.
	RemoveAddress(addr netip.Addr) (removed bool, err error)
	// Dump returns the link and its addresses in the format shared by every
	// implementation: "link NAME type TYPE state UP|DOWN" then one "addr PREFIX" line per
	// address, sorted; or "no link NAME" when it does not exist.
	Dump() (string, error)
}

// HostPrefix returns addr as a /32 or /128 prefix, or kerr.ErrInvalid for an address that
// cannot be bound as a VIP: the zero value, an address with a zone, an IPv4-mapped IPv6
// address (use the IPv4 form), the unspecified address or a multicast address.
func HostPrefix(addr netip.Addr) (netip.Prefix, error) {
	switch {
	case !addr.IsValid():
		return netip.Prefix{}, fmt.Errorf("address %v: %w", addr, kerr.ErrInvalid)
	case addr.Zone() != "":
		return netip.Prefix{}, fmt.Errorf("address %s: has a zone: %w", addr, kerr.ErrInvalid)
	case addr.Is4In6():
		return netip.Prefix{}, fmt.Errorf("address %s: IPv4-mapped IPv6 (use %s): %w", addr, addr.Unmap(), kerr.ErrInvalid)
	case addr.IsUnspecified(), addr.IsMulticast():
		return netip.Prefix{}, fmt.Errorf("address %s: not a unicast address: %w", addr, kerr.ErrInvalid)
	}
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}

// KernelLinkLocal reports whether p is the IPv6 link-local address the kernel gives the
// link itself when it is up (an fe80::/64; never a VIP, since VIPs are host prefixes).
// Every other address on the link, link-local VIPs (169.254.169.254/32, fe80::1/128)
// included, is a VIP someone bound and must be read back.
func KernelLinkLocal(p netip.Prefix) bool {
	return p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() && p.Bits() != 128
}

// ValidName checks a link name the way the kernel does (dev_valid_name): 1 to 15 bytes,
// not "." or "..", no '/', ':' or whitespace. It returns kerr.ErrInvalid otherwise.
func ValidName(name string) error {
	bad := name == "" || len(name) > 15 || name == "." || name == ".." ||
		strings.ContainsAny(name, "/: \t\n\v\f\r")
	if bad {
		return fmt.Errorf("link name %q: %w", name, kerr.ErrInvalid)
	}
	return nil
}

// SortPrefixes sorts IPv4 before IPv6, then by address, then by prefix length.
func SortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
}

// FormatDump renders the shared Dump format. typ == "" means the link does not exist.
func FormatDump(name, typ string, up bool, addrs []netip.Prefix) string {
	if typ == "" {
		return "no link " + name + "\n"
	}
	var b strings.Builder
	state := "DOWN"
	if up {
		state = "UP"
	}
	fmt.Fprintf(&b, "link %s type %s state %s\n", name, typ, state)
	addrs = slices.Clone(addrs)
	SortPrefixes(addrs)
	for _, p := range addrs {
		fmt.Fprintf(&b, "addr %s\n", p)
	}
	return b.String()
}

// NotDummyError is the error for a link named name whose type typ is not dummy; it wraps
// ErrNotDummy.
func NotDummyError(name, typ string) error {
	return fmt.Errorf("link %s has type %q: %w", name, typ, ErrNotDummy)
}

// EnsureAddressVia is EnsureAddress built on i.AddAddress: it reports whether addr was
// added, and an address already bound is no error.
func EnsureAddressVia(i Interface, addr netip.Addr) (bool, error) {
	err := i.AddAddress(addr)
	if kerr.IsExists(err) {
		return false, nil
	}
	return err == nil, err
}

// EnsureAddressesVia is EnsureAddresses one address at a time.
func EnsureAddressesVia(i Interface, addrs []netip.Addr) []error {
	errs := make([]error, len(addrs))
	for j, a := range addrs {
		_, errs[j] = i.EnsureAddress(a)
	}
	return errs
}

// RemoveAddressVia is RemoveAddress built on i.DeleteAddress: it reports whether addr was
// removed, and an address not bound is no error.
func RemoveAddressVia(i Interface, addr netip.Addr) (bool, error) {
	err := i.DeleteAddress(addr)
	if kerr.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
