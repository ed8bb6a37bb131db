package conntrack

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Tuple is one direction of a flow. Ports are 0 for protocols without ports.
type Tuple struct {
	Src, Dst netip.AddrPort
}

// Flow is a tracked connection: the original direction (as the first packet was seen)
// and the reply direction (as the answer is expected, after NAT).
type Flow struct {
	Protocol    inet.Protocol
	Orig, Reply Tuple
	Zone        uint16
	Mark        uint32
}

// String renders the flow in the Dump format, e.g.
// "udp orig 10.0.0.1:1234 -> 10.96.0.10:53 reply 10.244.1.5:53 -> 10.0.0.1:1234", then
// " zone=N" and " mark=N" when not zero.
func (f Flow) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s orig %s reply %s", f.Protocol, f.Orig.format(f.Protocol), f.Reply.format(f.Protocol))
	if f.Zone != 0 {
		fmt.Fprintf(&b, " zone=%d", f.Zone)
	}
	if f.Mark != 0 {
		fmt.Fprintf(&b, " mark=%d", f.Mark)
	}
	return b.String()
}

func (t Tuple) format(p inet.Protocol) string {
	if !p.HasPorts() {
		return t.Src.Addr().String() + " -> " + t.Dst.Addr().String()
	}
	return t.Src.String() + " -> " + t.Dst.String()
}

// Filter selects flows of one protocol. Every field that is set must match; at least one
// besides Protocol must be set, so a filter never selects a whole protocol by accident.
type Filter struct {
	Protocol inet.Protocol
	// OrigDst is the original destination address (the service address as the client
	// addressed it); OrigDstPort its port.
	OrigDst     netip.Addr
	OrigDstPort uint16
	// ReplySrc is the reply source address (the endpoint that answers, after DNAT);
	// ReplySrcPort its port.
	ReplySrc     netip.Addr
	ReplySrcPort uint16
}

// ByOrigDst selects the flows of proto sent to dst (a stale service address): dst's port 0
// means any port, an invalid dst address with a port means that port on any address
// (a node port).
func ByOrigDst(proto inet.Protocol, dst netip.AddrPort) Filter {
	return Filter{Protocol: proto, OrigDst: dst.Addr(), OrigDstPort: dst.Port()}
}

// ByReplySrc selects the flows of proto answered by src (a stale endpoint address).
func ByReplySrc(proto inet.Protocol, src netip.Addr) Filter {
	return Filter{Protocol: proto, ReplySrc: src}
}

// String describes the filter in conntrack(8) terms.
func (f Filter) String() string {
	parts := []string{"-p " + f.Protocol.String()}
	if f.OrigDst.IsValid() {
		parts = append(parts, "--orig-dst "+f.OrigDst.String())
	}
	if f.OrigDstPort != 0 {
		parts = append(parts, fmt.Sprintf("--orig-port-dst %d", f.OrigDstPort))
	}
	if f.ReplySrc.IsValid() {
		parts = append(parts, "--reply-src "+f.ReplySrc.String())
	}
	if f.ReplySrcPort != 0 {
		parts = append(parts, fmt.Sprintf("--reply-port-src %d", f.ReplySrcPort))
	}
	return strings.Join(parts, " ")
}

// Validate returns kerr.ErrInvalid for a filter that selects nothing sensible: no
// protocol, nothing but a protocol, ports for a protocol without ports, addresses that are
// IPv4-mapped, zoned or of two families.
func (f Filter) Validate() error {
	bad := func(why string) error {
		return fmt.Errorf("conntrack filter %s: %s: %w", f, why, kerr.ErrInvalid)
	}
	if f.Protocol == 0 {
		return bad("no protocol")
	}
	if !f.OrigDst.IsValid() && f.OrigDstPort == 0 && !f.ReplySrc.IsValid() && f.ReplySrcPort == 0 {
		return bad("nothing to match besides the protocol")
	}
	if (f.OrigDstPort != 0 || f.ReplySrcPort != 0) && !f.Protocol.HasPorts() {
		return bad("ports for a protocol without ports")
	}
	for _, a := range []netip.Addr{f.OrigDst, f.ReplySrc} {
		if a.IsValid() && (a.Is4In6() || a.Zone() != "") {
			return bad("IPv4-mapped or zoned address " + a.String())
		}
	}
	if f.OrigDst.IsValid() && f.ReplySrc.IsValid() && f.OrigDst.Is4() != f.ReplySrc.Is4() {
		return bad("addresses of two families")
	}
	return nil
}

// Match reports whether the filter selects fl.
func (f Filter) Match(fl Flow) bool {
	return fl.Protocol == f.Protocol &&
		(!f.OrigDst.IsValid() || fl.Orig.Dst.Addr() == f.OrigDst) &&
		(f.OrigDstPort == 0 || fl.Orig.Dst.Port() == f.OrigDstPort) &&
		(!f.ReplySrc.IsValid() || fl.Reply.Src.Addr() == f.ReplySrc) &&
		(f.ReplySrcPort == 0 || fl.Reply.Src.Port() == f.ReplySrcPort)
}

// Interface lists and deletes the flows of one network namespace, IPv4 and IPv6 alike.
type Interface interface {
	// List returns every flow of the table, sorted by zone, protocol, family, then the
	// original and reply tuples.
	List() ([]Flow, error)
	// Delete deletes the flows any of the filters selects, reading the table once, and
	// returns how many it deleted. An invalid filter is kerr.ErrInvalid and deletes
	// nothing; no filter deletes nothing.
	Delete(filters ...Filter) (int, error)
	// Dump returns every flow, one per line in the Flow.String format, sorted.
	Dump() (string, error)
}

// ValidateFilters validates every filter.
func ValidateFilters(filters []Filter) error {
	for _, f := range filters {
		if err := f.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// MatchAny returns the first filter that selects fl.
func MatchAny(filters []Filter, fl Flow) (Filter, bool) {
	for _, f := range filters {
		if f.Match(fl) {
			return f, true
		}
	}
	return Filter{}, false
}

// SortFlows sorts by zone, protocol, family, then the original and reply tuples.
func SortFlows(fs []Flow) {
	slices.SortFunc(fs, func(a, b Flow) int {
		return cmp.Or(
			cmp.Compare(a.Zone, b.Zone),
			cmp.Compare(a.Protocol, b.Protocol),
			a.Orig.Src.Compare(b.Orig.Src),
			a.Orig.Dst.Compare(b.Orig.Dst),
			a.Reply.Src.Compare(b.Reply.Src),
			a.Reply.Dst.Compare(b.Reply.Dst),
			cmp.Compare(a.Mark, b.Mark),
		)
	})
}

// FormatDump is Interface.Dump's text for fs: one flow per line in the Flow.String format,
// sorted by SortFlows. It does not modify fs.
func FormatDump(fs []Flow) string {
	fs = slices.Clone(fs)
	SortFlows(fs)
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
