package proxy

import (
	"github.com/kipvs/kipvs/internal/inet"
)

// Filter is everything the packet filter's rules depend on in one family, beyond the members
// of the sets: which sets have members, how traffic to Services is masqueraded, and which
// LoadBalancer virtual servers the node itself may not reach. A dataplane renders it into
// its rules (internal/dataplane); a fact a rule depends on belongs here, so the reconciler
// re-renders when it changes.
type Filter struct {
	Family inet.Family
	// MasqueradeMark is the fwmark bit that marks packets for SNAT (1 << MasqueradeBit).
	MasqueradeMark uint32
	// MasqueradeAll masquerades all traffic to cluster IPs, pod traffic included.
	MasqueradeAll bool
	// MasqueradeRandomFully fully randomizes the source ports of SNAT (Options).
	MasqueradeRandomFully bool
	// LocalDetector tells local pods' traffic apart: traffic to a cluster IP from anything
	// else is masqueraded.
	LocalDetector LocalDetector
	// OutFilter lists the LoadBalancer virtual servers node-originated traffic may not
	// reach (their source ranges exclude every node address), sorted.
	OutFilter []VSKey

	nonEmpty [numSets]bool
}

// BuildFilter returns the filter facts of d under o.
func BuildFilter(o *Options, d *Desired) *Filter {
	f := FilterOf(o, nil, d.OutFilter())
	for s := range numSets {
		f.nonEmpty[s] = d.setSize[s] > 0
	}
	return f
}

// HasMembers reports whether set s has members. Rules that match a set exist only while it
// has some, as upstream.
func (f *Filter) HasMembers(s Set) bool { return s < numSets && f.nonEmpty[s] }

// FilterOf returns the filter facts of a node under o whose sets with members are
// nonEmpty and whose out-filter is out: what a backend's start-up check renders to
// have every kind of rule.
func FilterOf(o *Options, nonEmpty []Set, out []VSKey) *Filter {
	f := &Filter{
		Family:                o.Family,
		MasqueradeMark:        o.masqMark(),
		MasqueradeAll:         o.MasqueradeAll,
		MasqueradeRandomFully: o.MasqueradeRandomFully,
		LocalDetector:         o.LocalDetector,
		OutFilter:             out,
	}
	for _, s := range nonEmpty {
		if s < numSets {
			f.nonEmpty[s] = true
		}
	}
	return f
}
