package iptables

import (
	"context"
	"errors"
	"fmt"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Filter is the dataplane.Filter of one family over an ipset and a netfilter adapter.
type Filter struct {
	family inet.Family
	sets   ipset.Interface
	rules  netfilter.Interface
}

var _ dataplane.Filter = (*Filter)(nil)

// New returns the dataplane of family f over sets and rules (a handle of family f).
func New(f inet.Family, sets ipset.Interface, rules netfilter.Interface) *Filter {
	return &Filter{family: f, sets: sets, rules: rules}
}

// Check creates kipvs's KUBE-IPVS-IPS set and asks iptables-restore to build, not commit, a
// rule matching it, so a missing ip_set or xt_set module (or an iptables without the set
// extension) stops the start instead of every sync.
func (p *Filter) Check(ctx context.Context) error {
	s := IPSet(p.family, proxy.SetIPVSIPs)
	if err := p.ensure(s); err != nil {
		return fmt.Errorf("create ipset %s (is the ip_set kernel module available? modprobe ip_set ip_set_hash_ip): %w", s.Name, err)
	}
	if err := p.rules.Check(ctx, netfilter.TableFilter, "-m set --match-set "+s.Name+" dst -j RETURN"); err != nil {
		return fmt.Errorf("iptables cannot match ipsets: load the xt_set kernel module (modprobe xt_set) and use an iptables package with the set extension (libxt_set): %w", err)
	}
	return nil
}

// ensure creates set s, or accepts a set of its name, type and family whatever its size
// (kipvs may have grown it, see capacity.go).
func (p *Filter) ensure(s ipset.Set) error {
	err := p.sets.Create(s)
	if !kerr.IsExists(err) {
		return err
	}
	have, herr := p.sets.Header(s.Name)
	if herr != nil {
		return errors.Join(err, herr)
	}
	want := s
	want.MaxElem = have.MaxElem
	if p.sets.Create(want) == nil {
		return nil
	}
	return err
}

// Members lists every set of the family.
func (p *Filter) Members() (map[proxy.Member]struct{}, []dataplane.SetSpec, error) {
	members := map[proxy.Member]struct{}{}
	var missing []dataplane.SetSpec
	for _, s := range proxy.AllSets() {
		name := SetName(p.family, s)
		info, err := p.sets.List(name)
		if kerr.IsNotFound(err) {
			missing = append(missing, spec(p.family, s))
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list ipset %s: %w", name, err)
		}
		for _, e := range info.Entries {
			members[MemberOf(s, e)] = struct{}{}
		}
	}
	return members, missing, nil
}

// Sets implements dataplane.Filter: upstream's ipsets of this family, in its creation order.
func (p *Filter) Sets() []dataplane.SetSpec {
	out := make([]dataplane.SetSpec, 0, len(proxy.AllSets()))
	for _, s := range proxy.AllSets() {
		out = append(out, spec(p.family, s))
	}
	return out
}

// MemberString implements dataplane.Filter: the member in ipset's notation.
func (p *Filter) MemberString(m proxy.Member) string { return Entry(m).String() }

func spec(f inet.Family, s proxy.Set) dataplane.SetSpec {
	set := IPSet(f, s)
	return dataplane.SetSpec{Set: s, Name: set.Name, Type: string(set.Type)}
}

// Run implements dataplane.Filter. A set that could not be created gets none of the
// members to add; a set that could not take its batch of members is first grown
// (capacity.go), and a set left far larger than its content after a delete is shrunk (a
// failed shrink is not an error: the set still holds what it should, and the next delete
// retries it).
func (p *Filter) Run(ctx context.Context, tx *dataplane.Tx) dataplane.TxResult {
	var res dataplane.TxResult
	notCreated := map[proxy.Set]error{}
	for _, s := range tx.CreateSets {
		if err := p.createSet(s); err != nil {
			notCreated[s.Set] = err
			res.Failed = append(res.Failed, dataplane.SetError{Set: s.Set, Step: dataplane.StepCreate, Err: err})
			continue
		}
		res.Created++
	}
	res.Added = p.update(tx.AddMembers, dataplane.StepAdd, &res, func(s proxy.Set, name string, es []ipset.Entry) error {
		if err, ok := notCreated[s]; ok {
			return fmt.Errorf("ipset %s was not created: %w", name, err)
		}
		if err := p.grow(name, len(es)); err != nil {
			return err
		}
		return p.sets.Add(name, es...)
	})
	if tx.Rules != nil {
		res.Rules = p.applyRules(ctx, tx.Rules)
	}
	res.Deleted = p.update(tx.DeleteMembers, dataplane.StepDelete, &res, func(_ proxy.Set, name string, es []ipset.Entry) error {
		if err := p.sets.Del(name, es...); err != nil {
			return err
		}
		_ = p.shrink(name)
		return nil
	})
	return res
}

// createSet creates the ipset of s.Set.
func (p *Filter) createSet(s dataplane.SetSpec) error {
	set := IPSet(p.family, s.Set)
	if err := p.sets.Create(set); err != nil {
		return fmt.Errorf("create ipset %s: %w", set.Name, err)
	}
	return nil
}

// update sends ms to op, one batch per set in the order the sets first appear, records the
// sets whose batch failed in res and returns how many members changed.
func (p *Filter) update(ms []proxy.Member, step dataplane.Step, res *dataplane.TxResult, op func(proxy.Set, string, []ipset.Entry) error) int {
	bySet := map[proxy.Set][]ipset.Entry{}
	var order []proxy.Set
	for _, m := range ms {
		if _, ok := bySet[m.Set]; !ok {
			order = append(order, m.Set)
		}
		bySet[m.Set] = append(bySet[m.Set], Entry(m))
	}
	n := 0
	for _, s := range order {
		name := SetName(p.family, s)
		if err := op(s, name, bySet[s]); err != nil {
			err = fmt.Errorf("%s %d members of ipset %s: %w", step, len(bySet[s]), name, err)
			res.Failed = append(res.Failed, dataplane.SetError{Set: s, Step: step, Err: err})
			continue
		}
		n += len(bySet[s])
	}
	return n
}

// rules is a rendered or observed iptables ruleset.
type rules struct {
	rs   netfilter.Ruleset
	text string // netfilter.Format of the normalized ruleset
}

func newRules(rs netfilter.Ruleset) *rules {
	return &rules{rs: rs, text: netfilter.Format(rs.Normalize())}
}

func (r *rules) String() string { return r.text }

func (r *rules) Counts() map[string]int {
	out := map[string]int{}
	for table, tr := range r.rs {
		n := len(tr.Jumps)
		for _, c := range tr.Chains {
			n += len(c.Rules)
		}
		out[string(table)] = n
	}
	return out
}

func (r *rules) Diff(observed dataplane.Rules) []string {
	o, ok := observed.(*rules)
	if !ok {
		return []string{fmt.Sprintf("observed rules of another dataplane (%T)", observed)}
	}
	return netfilter.Diff(r.rs, o.rs)
}

// Rules renders f (Ruleset).
func (p *Filter) Rules(f *proxy.Filter) dataplane.Rules { return newRules(Ruleset(f)) }

// ObserveRules reads kipvs's chains and jumps back.
func (p *Filter) ObserveRules(ctx context.Context) (dataplane.Rules, error) {
	rs, err := p.rules.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("observe %s iptables rules: %w", p.family, err)
	}
	return newRules(rs), nil
}

// applyRules writes the difference between r (from Rules) and the kernel with
// iptables-restore.
func (p *Filter) applyRules(ctx context.Context, r dataplane.Rules) error {
	want, ok := r.(*rules)
	if !ok {
		return fmt.Errorf("apply rules of another dataplane (%T): %w", r, kerr.ErrInvalid)
	}
	if _, err := p.rules.Apply(ctx, want.rs); err != nil {
		return fmt.Errorf("apply %s iptables rules: %w", p.family, err)
	}
	return nil
}
