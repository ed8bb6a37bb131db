package dataplane

import (
	"context"
	"errors"
	"maps"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Filter makes the packet-filter state of one family what a proxy.Desired asks for. It
// reads with Members and ObserveRules and changes the kernel only through Run, one Tx at a
// time: the reconciler runs one transaction for each filter change it interleaves with the
// IPVS changes (sets and the members that mark a virtual server as kipvs's before it, the
// rules after the virtual servers change, the members that stop marking one after it is
// gone). A Filter is used by one reconciler at a time.
type Filter interface {
	// Check makes sure the node can run this dataplane (kernel modules, tools, rule
	// extensions), changing nothing that a sync would not; the daemon calls it at start-up.
	Check(ctx context.Context) error
	// Members reads the members of every set that exists and lists the sets that do not.
	Members() (members map[proxy.Member]struct{}, missing []SetSpec, err error)
	// Run applies tx and says what of it reached the kernel. A part that fails does not
	// stop the others: the failure is the failed set's (or the rules') alone.
	Run(ctx context.Context, tx *Tx) TxResult
	// Sets declares every set of this family as the backend names and types it, in the
	// order it creates them; MemberString renders a member as the backend writes it in its
	// set. Both are for documents and logs (the debug state, kipvs doctor).
	Sets() []SetSpec
	MemberString(m proxy.Member) string
	// Rules renders the rules f asks for.
	Rules(f *proxy.Filter) Rules
	// ObserveRules reads the rules the dataplane owns as they are in the kernel.
	ObserveRules(ctx context.Context) (Rules, error)
}

// Tx is one change of a family's filter state. Run applies its parts in field order: the
// sets (that Members reported missing), their new members, the owned rules (nil:
// unchanged; leaving foreign rules alone), then the members to delete. Members go one
// batch per set.
type Tx struct {
	CreateSets    []SetSpec
	AddMembers    []proxy.Member
	Rules         Rules
	DeleteMembers []proxy.Member
}

// Step names the part of a Tx a set failed in.
type Step string

// The parts of a Tx that act on one set.
const (
	StepCreate Step = "create"
	StepAdd    Step = "add"
	StepDelete Step = "delete"
)

// SetError is the failure of one set's part of a Tx: the set was not created, or its batch
// of members failed (what of that batch reached the kernel is then unknown).
type SetError struct {
	Set  proxy.Set
	Step Step
	Err  error
}

// TxResult is what of a Tx reached the kernel.
type TxResult struct {
	// Created, Added and Deleted count the sets created and the members added and deleted.
	Created, Added, Deleted int
	// Failed lists the sets whose part failed, in Tx order.
	Failed []SetError
	// Rules is the rules' error (nil: applied, or not asked for).
	Rules error
}

// FailedSets returns the sets that failed in step, with their errors.
func (r *TxResult) FailedSets(step Step) map[proxy.Set]error {
	out := map[proxy.Set]error{}
	for _, f := range r.Failed {
		if f.Step == step {
			out[f.Set] = f.Err
		}
	}
	return out
}

// SetSpec is a set as a backend declares it, for plans and logs.
type SetSpec struct {
	Set  proxy.Set
	Name string // the backend's name for it in this family
	Type string // the backend's type for it
}

// Rules is a backend's ruleset, opaque to the reconciler: it compares two by their text and
// hands one back to the Filter that rendered it.
type Rules interface {
	// String is the canonical text: two rulesets are the same rules exactly when their texts
	// are equal.
	String() string
	// Counts is the number of rules per table, for the rules metrics.
	Counts() map[string]int
	// Diff describes every difference from observed (a ruleset the same backend read back),
	// one line each, in a stable order; nil when they match.
	Diff(observed Rules) []string
}

// Cleaner finds and removes everything a backend may own on the node, in every family and
// every variant it may have written (kube-proxy's too: the names are the same), for
// `kipvs cleanup`. The reconciler's cleanup planner decides which virtual servers are
// kipvs's from the members it reports, and removes the rules before the virtual servers
// and the sets last (the kernel refuses to destroy a set a rule uses).
type Cleaner interface {
	// Owned lists what there is to remove.
	Owned(ctx context.Context) (Owned, error)
	// RemoveRules and RemoveSets remove the groups of rules and the sets named (from
	// Owned); one already gone is not an error.
	RemoveRules(ctx context.Context, names []string) error
	RemoveSets(names []string) error
}

// Owned is what a Cleaner found.
type Owned struct {
	// Rules names each group of rules that holds something, as the plan prints it (e.g.
	// "iptables", "ip6tables-legacy").
	Rules []string
	// Sets names every set to destroy (leftover temporary ones included).
	Sets []string
	// Members holds the members of the family's sets that exist: what marks a virtual
	// server as kipvs's.
	Members map[inet.Family]map[proxy.Member]struct{}
}

// JoinCleaners returns a Cleaner of everything cs own: Owned lists theirs together (the
// names of rules and sets must not collide), and each removal goes to every one of them,
// each removing only the names it owns.
func JoinCleaners(cs ...Cleaner) Cleaner { return joined(cs) }

type joined []Cleaner

func (j joined) Owned(ctx context.Context) (Owned, error) {
	out := Owned{Members: map[inet.Family]map[proxy.Member]struct{}{}}
	for _, c := range j {
		o, err := c.Owned(ctx)
		if err != nil {
			return out, err
		}
		out.Rules = append(out.Rules, o.Rules...)
		out.Sets = append(out.Sets, o.Sets...)
		for f, ms := range o.Members {
			if out.Members[f] == nil {
				out.Members[f] = map[proxy.Member]struct{}{}
			}
			maps.Copy(out.Members[f], ms)
		}
	}
	return out, nil
}

func (j joined) RemoveRules(ctx context.Context, names []string) error {
	var errs []error
	for _, c := range j {
		errs = append(errs, c.RemoveRules(ctx, names))
	}
	return errors.Join(errs...)
}

func (j joined) RemoveSets(names []string) error {
	var errs []error
	for _, c := range j {
		errs = append(errs, c.RemoveSets(names))
	}
	return errors.Join(errs...)
}
