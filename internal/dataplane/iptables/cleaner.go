package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/proxy"
)

// RuleHandle is one place kipvs's rules may live: one family on one iptables backend.
type RuleHandle struct {
	// Name is what a cleanup plan prints, e.g. "iptables" or "ip6tables-legacy".
	Name string
	NF   netfilter.Interface
}

// Cleaner is the iptables dataplane's dataplane.Cleaner: kipvs's (and kube-proxy's) chains
// on every handle given, and the KUBE-* ipsets of both families with ipset's leftover
// temporary sets.
type Cleaner struct {
	sets  ipset.Interface
	rules []RuleHandle
}

var _ dataplane.Cleaner = (*Cleaner)(nil)

// NewCleaner returns a Cleaner over the ipsets and the rule handles.
func NewCleaner(sets ipset.Interface, rules []RuleHandle) *Cleaner {
	return &Cleaner{sets: sets, rules: rules}
}

// Owned implements dataplane.Cleaner.
func (c *Cleaner) Owned(ctx context.Context) (dataplane.Owned, error) {
	o := dataplane.Owned{Members: map[inet.Family]map[proxy.Member]struct{}{}}
	for _, r := range c.rules {
		rs, err := r.NF.Observe(ctx)
		if err != nil {
			return o, fmt.Errorf("read %s rules: %w", r.Name, err)
		}
		if len(rs.Normalize()) > 0 {
			o.Rules = append(o.Rules, r.Name)
		}
	}
	names, err := c.sets.ListNames()
	if err != nil {
		return o, fmt.Errorf("list ipsets: %w", err)
	}
	type ownSet struct {
		family inet.Family
		set    proxy.Set
	}
	own := map[string]ownSet{}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		o.Members[f] = map[proxy.Member]struct{}{}
		for _, s := range proxy.AllSets() {
			own[SetName(f, s)] = ownSet{f, s}
		}
	}
	for _, n := range names {
		which, ok := own[n]
		if !ok && !strings.HasPrefix(n, ipset.TempPrefix) {
			continue
		}
		o.Sets = append(o.Sets, n)
		if !ok {
			continue
		}
		info, err := c.sets.List(n)
		if err != nil {
			return o, fmt.Errorf("list ipset %s: %w", n, err)
		}
		for _, e := range info.Entries {
			o.Members[which.family][MemberOf(which.set, e)] = struct{}{}
		}
	}
	return o, nil
}

// RemoveRules implements dataplane.Cleaner.
func (c *Cleaner) RemoveRules(ctx context.Context, names []string) error {
	var errs []error
	for _, r := range c.rules {
		if slices.Contains(names, r.Name) {
			if _, err := r.NF.Remove(ctx); err != nil {
				errs = append(errs, fmt.Errorf("remove %s rules: %w", r.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveSets implements dataplane.Cleaner: it destroys the names that are its sets (ownsSet)
// and leaves the others to the cleaners it is joined with (dataplane.JoinCleaners).
func (c *Cleaner) RemoveSets(names []string) error {
	var errs []error
	for _, s := range names {
		if !ownsSet(s) {
			continue
		}
		if err := c.sets.Destroy(s); err != nil && !kerr.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("destroy ipset %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// ownsSet reports whether name is a set Owned lists: a KUBE-* set of either family or one
// of ipset's leftover temporary sets.
func ownsSet(name string) bool {
	if strings.HasPrefix(name, ipset.TempPrefix) {
		return true
	}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, s := range proxy.AllSets() {
			if SetName(f, s) == name {
				return true
			}
		}
	}
	return false
}

// NodeRuleHandles returns the places kipvs's rules may live on this node, for cleanup: both
// families on the iptables backend run would use, and on the other one (nft or legacy) too
// when it holds KUBE-* chains (kube-proxy ran on it before, or the node's backend changed).
// A family that cannot be opened is reported in skipped and left out.
func NodeRuleHandles(ctx context.Context, ns netns.NsHandle) (handles []RuleHandle, skipped []error, err error) {
	runner := netfilter.NewRunner(ns)
	backend, err := netfilter.Detect(ctx, runner, "")
	if err != nil {
		return nil, nil, fmt.Errorf("find an iptables backend: %w", err)
	}
	backends := []netfilter.Backend{backend}
	other := netfilter.ModeLegacy
	if backend.Mode == netfilter.ModeLegacy {
		other = netfilter.ModeNFT
	}
	if netfilter.HoldsKubeChains(ctx, runner, other) {
		backends = append(backends, netfilter.Backend{Mode: other, Reason: "it holds KUBE-* chains"})
	}
	for i, b := range backends {
		for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
			h, err := netfilter.New(ns, f, b)
			if err != nil {
				skipped = append(skipped, fmt.Errorf("%s rules on %s: %w", f, b.Mode, err))
				continue
			}
			name := map[inet.Family]string{inet.IPv4: "iptables", inet.IPv6: "ip6tables"}[f]
			if i > 0 {
				name += "-" + string(b.Mode)
			}
			handles = append(handles, RuleHandle{Name: name, NF: h})
		}
	}
	return handles, skipped, nil
}
