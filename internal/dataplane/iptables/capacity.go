package iptables

import (
	"fmt"
	"math/bits"

	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Set capacity. ipset's hash sets refuse a member beyond their maxelem ("Hash is full"), and
// upstream kube-proxy creates every set with the default, 65,536. kipvs keeps that size while
// the content fits, so a set it leaves behind is one kube-proxy can adopt (kube-proxy's
// `ipset create ... -exist` fails on a set of the same name with another maxelem), and grows
// a set before an add would overflow it: it builds a set of the larger maxelem holding the
// current members and swaps it in (ipset.Replace), in one kernel step, so matching never
// sees a half-filled set and iptables references stay. A set that has grown shrinks back once
// its content falls below a quarter of its maxelem; since a resize leaves at least a third
// free (Target), a set never flaps between two sizes.

// Target is the maxelem kipvs gives a hash set that must hold need members: ipset's
// default while need fits in half of it, otherwise the power of two at or above 1.5 x need.
func Target(need int) uint32 {
	if need <= ipset.DefaultMaxElem/2 {
		return ipset.DefaultMaxElem
	}
	want := uint64(need) + uint64(need)/2
	if want >= 1<<32 {
		return 1<<32 - 1
	}
	return max(ipset.DefaultMaxElem, uint32(1)<<bits.Len64(want-1))
}

// needsGrow reports whether a set of maxelem max holding have members must grow before
// taking adding more (each of which may be new).
func needsGrow(max uint32, have, adding int) bool {
	return uint64(have)+uint64(adding) > uint64(max)
}

// needsShrink reports whether a set of maxelem max holding have members is far larger than
// it needs to be: larger than ipset's default and over four times its content.
func needsShrink(max uint32, have int) bool {
	return max > ipset.DefaultMaxElem && uint64(have)*4 < uint64(max)
}

// grow makes set name able to take adding more members, resizing it when it cannot.
func (p *Filter) grow(name string, adding int) error {
	hdr, err := p.sets.Header(name)
	if err != nil {
		return fmt.Errorf("read the size of ipset %s: %w", name, err)
	}
	if !hdr.Type.IsHash() || !needsGrow(hdr.MaxElem, hdr.Elements, adding) {
		return nil
	}
	return p.resize(name, Target(hdr.Elements+adding))
}

// shrink gives set name a smaller maxelem when it is far larger than its content needs.
func (p *Filter) shrink(name string) error {
	hdr, err := p.sets.Header(name)
	if err != nil {
		return fmt.Errorf("read the size of ipset %s: %w", name, err)
	}
	if !hdr.Type.IsHash() || !needsShrink(hdr.MaxElem, hdr.Elements) {
		return nil
	}
	return p.resize(name, Target(hdr.Elements))
}

// resize swaps in a copy of set name with maxelem max (ipset.Replace: a temporary set with
// the new header is filled with the members and swapped with the set). The set keeps its old
// size and content when a step fails.
func (p *Filter) resize(name string, max uint32) error {
	info, err := p.sets.List(name)
	if err != nil {
		return fmt.Errorf("resize ipset %s: %w", name, err)
	}
	if len(info.Entries) > int(max) {
		return fmt.Errorf("resize ipset %s to maxelem %d: it holds %d members: %w", name, max, len(info.Entries), kerr.ErrInvalid)
	}
	want := info.Set
	want.MaxElem = max
	if err := p.sets.Replace(want, info.Entries); err != nil {
		return fmt.Errorf("resize ipset %s from maxelem %d to %d: %w", name, info.MaxElem, max, err)
	}
	return nil
}
