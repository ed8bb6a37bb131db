package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Filter is the dataplane.Filter of one family over its kipvs table.
type Filter struct {
	family inet.Family
	conn   nft.Interface
}

var _ dataplane.Filter = (*Filter)(nil)

// New returns the dataplane of conn's family.
func New(conn nft.Interface) *Filter { return &Filter{family: conn.Family(), conn: conn} }

// Check asks the kernel to validate, without applying it, a transaction that creates the
// whole table with every rule kipvs can write, so a kernel without nf_tables or one of the
// expressions the rules use (fib, ct, masq, reject, nat chains) stops the start instead of
// every sync.
func (p *Filter) Check(ctx context.Context) error {
	tx := p.conn.NewTransaction()
	p.addTable(tx)
	for _, s := range proxy.AllSets() {
		tx.Add(nftSet(p.family, s))
	}
	addChains(tx, Render(everything(p.family)))
	if err := p.conn.Check(ctx, tx); err != nil {
		return fmt.Errorf("the kernel refuses kipvs's nftables table (nf_tables, nft_chain_nat, nft_fib, nft_ct, nft_masq, nft_reject: is the kernel 5.6 or later, with those modules?): %w", err)
	}
	return nil
}

// everything is a filter with every set non-empty and every option on: it renders every
// kind of rule.
func everything(f inet.Family) *proxy.Filter {
	o := &proxy.Options{Family: f, MasqueradeBit: 14, MasqueradeRandomFully: true,
		LocalDetector: proxy.LocalDetector{Mode: proxy.LocalInterfaceNamePrefix, Interface: "veth"}}
	vip := netip.MustParseAddr("192.0.2.1")
	if f == inet.IPv6 {
		vip = netip.MustParseAddr("2001:db8::1")
	}
	return proxy.FilterOf(o, proxy.AllSets(), []proxy.VSKey{{Protocol: inet.TCP, Address: vip, Port: 80}})
}

func (p *Filter) addTable(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("kipvs: IPVS proxy rules")})
}

// Members lists every set of the family.
func (p *Filter) Members() (map[proxy.Member]struct{}, []dataplane.SetSpec, error) {
	members := map[proxy.Member]struct{}{}
	missing, err := p.list(context.Background(), members)
	return members, missing, err
}

// members lists the members of the sets that exist.
func (p *Filter) members(ctx context.Context) (map[proxy.Member]struct{}, error) {
	members := map[proxy.Member]struct{}{}
	_, err := p.list(ctx, members)
	return members, err
}

// list adds the members of every set to members and returns the sets missing, from one
// listing of the table (no table: every set is missing).
func (p *Filter) list(ctx context.Context, members map[proxy.Member]struct{}) ([]dataplane.SetSpec, error) {
	all, err := p.conn.SetElements(ctx)
	if err != nil && !kerr.IsNotFound(err) {
		return nil, err
	}
	var missing []dataplane.SetSpec
	for _, s := range proxy.AllSets() {
		els, ok := all[SetName(s)]
		if !ok {
			missing = append(missing, p.spec(s))
			continue
		}
		for _, e := range els {
			m, err := memberOf(s, e.Key)
			if err != nil {
				return nil, err
			}
			members[m] = struct{}{}
		}
	}
	return missing, nil
}

// Sets implements dataplane.Filter.
func (p *Filter) Sets() []dataplane.SetSpec {
	out := make([]dataplane.SetSpec, 0, len(proxy.AllSets()))
	for _, s := range proxy.AllSets() {
		out = append(out, p.spec(s))
	}
	return out
}

func (p *Filter) spec(s proxy.Set) dataplane.SetSpec {
	return dataplane.SetSpec{Set: s, Name: SetName(s), Type: setType(p.family, s)}
}

// MemberString implements dataplane.Filter: the element as nft writes it.
func (p *Filter) MemberString(m proxy.Member) string { return strings.Join(key(m), " . ") }

// Run implements dataplane.Filter. The whole Tx is first sent as one nft transaction; if
// the kernel refuses it (nothing of it is then applied), its parts are sent one by one, in
// Tx order, so the failure is the failed set's (or the rules') alone: each set's creation,
// each set's batch of new members, the rules, each set's batch of members to delete.
func (p *Filter) Run(ctx context.Context, tx *dataplane.Tx) dataplane.TxResult {
	adds, addOrder := bySet(tx.AddMembers)
	dels, delOrder := bySet(tx.DeleteMembers)
	var chains []nft.Chain
	if tx.Rules != nil {
		r, ok := tx.Rules.(*rules)
		if !ok {
			return dataplane.TxResult{Rules: fmt.Errorf("apply rules of another dataplane (%T): %w", tx.Rules, kerr.ErrInvalid)}
		}
		chains = r.chains
	}
	all := p.conn.NewTransaction()
	p.addTable(all)
	for _, s := range tx.CreateSets {
		all.Add(nftSet(p.family, s.Set))
	}
	for _, s := range addOrder {
		addElements(all, adds[s])
	}
	if tx.Rules != nil {
		addChains(all, chains)
	}
	for _, s := range delOrder {
		deleteElements(all, dels[s])
	}
	if all.NumOperations() == 1 {
		return dataplane.TxResult{}
	}
	if p.conn.Run(ctx, all) == nil {
		return dataplane.TxResult{Created: len(tx.CreateSets), Added: len(tx.AddMembers), Deleted: len(tx.DeleteMembers)}
	}
	return p.runParts(ctx, tx, chains, adds, addOrder, dels, delOrder)
}

// runParts applies a Tx part by part (Run).
func (p *Filter) runParts(ctx context.Context, tx *dataplane.Tx, chains []nft.Chain, adds map[proxy.Set][]proxy.Member, addOrder []proxy.Set,
	dels map[proxy.Set][]proxy.Member, delOrder []proxy.Set) dataplane.TxResult {
	var res dataplane.TxResult
	notCreated := map[proxy.Set]error{}
	for _, s := range tx.CreateSets {
		err := p.run(ctx, func(t *knftables.Transaction) { t.Add(nftSet(p.family, s.Set)) })
		if err != nil {
			err = fmt.Errorf("create set %s: %w", s.Name, err)
			notCreated[s.Set] = err
			res.Failed = append(res.Failed, dataplane.SetError{Set: s.Set, Step: dataplane.StepCreate, Err: err})
			continue
		}
		res.Created++
	}
	for _, s := range addOrder {
		ms := adds[s]
		err, ok := notCreated[s]
		if ok {
			err = fmt.Errorf("set %s was not created: %w", SetName(s), err)
		} else {
			err = p.run(ctx, func(t *knftables.Transaction) { addElements(t, ms) })
		}
		if err != nil {
			err = fmt.Errorf("add %d members to set %s: %w", len(ms), SetName(s), err)
			res.Failed = append(res.Failed, dataplane.SetError{Set: s, Step: dataplane.StepAdd, Err: err})
			continue
		}
		res.Added += len(ms)
	}
	if tx.Rules != nil {
		if err := p.run(ctx, func(t *knftables.Transaction) { addChains(t, chains) }); err != nil {
			res.Rules = fmt.Errorf("apply %s nftables rules: %w", p.family, err)
		}
	}
	for _, s := range delOrder {
		ms := dels[s]
		if err := p.run(ctx, func(t *knftables.Transaction) { deleteElements(t, ms) }); err != nil {
			err = fmt.Errorf("delete %d members from set %s: %w", len(ms), SetName(s), err)
			res.Failed = append(res.Failed, dataplane.SetError{Set: s, Step: dataplane.StepDelete, Err: err})
			continue
		}
		res.Deleted += len(ms)
	}
	return res
}

// run applies one transaction of the table and what fill adds.
func (p *Filter) run(ctx context.Context, fill func(*knftables.Transaction)) error {
	t := p.conn.NewTransaction()
	p.addTable(t)
	fill(t)
	return nft.Typed("nft transaction", p.conn.Run(ctx, t))
}

// bySet groups members by set, the sets in the order they first appear.
func bySet(ms []proxy.Member) (map[proxy.Set][]proxy.Member, []proxy.Set) {
	out := map[proxy.Set][]proxy.Member{}
	var order []proxy.Set
	for _, m := range ms {
		if _, ok := out[m.Set]; !ok {
			order = append(order, m.Set)
		}
		out[m.Set] = append(out[m.Set], m)
	}
	return out, order
}

func addElements(t *knftables.Transaction, ms []proxy.Member) {
	for _, m := range ms {
		t.Add(&knftables.Element{Set: SetName(m.Set), Key: key(m)})
	}
}

func deleteElements(t *knftables.Transaction, ms []proxy.Member) {
	for _, m := range ms {
		t.Delete(&knftables.Element{Set: SetName(m.Set), Key: key(m)})
	}
}

// addChains makes every chain of the table hold exactly its rules: every chain is declared
// and flushed, then filled (a jump needs its target declared), in the same transaction, so
// the rules change atomically.
func addChains(t *knftables.Transaction, chains []nft.Chain) {
	defs := map[string]*knftables.Chain{}
	for _, d := range chainDefs() {
		defs[d.name] = d.base
	}
	for _, c := range chains {
		ch := &knftables.Chain{Name: c.Name}
		if b := defs[c.Name]; b != nil {
			ch.Type, ch.Hook, ch.Priority = b.Type, b.Hook, b.Priority
		}
		t.Add(ch)
		t.Flush(ch)
	}
	for _, c := range chains {
		for _, r := range c.Rules {
			t.Add(&knftables.Rule{Chain: c.Name, Rule: r})
		}
	}
}

// rules is a rendered or observed ruleset: the table's chains, sorted by name.
type rules struct {
	chains []nft.Chain
	text   string
}

func newRules(chains []nft.Chain) *rules {
	chains = slices.Clone(chains)
	slices.SortFunc(chains, func(a, b nft.Chain) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, c := range chains {
		b.WriteString("chain " + c.Name + "\n")
		if c.Base != "" {
			b.WriteString("\t" + c.Base + "\n")
		}
		for _, r := range c.Rules {
			b.WriteString("\t\t" + r + "\n")
		}
	}
	return &rules{chains: chains, text: b.String()}
}

func (r *rules) String() string { return r.text }

// Counts implements dataplane.Rules: rules per group ("nat", "filter": the iptables table
// the same rule lives in with the iptables backend), so the rules metrics keep their labels.
func (r *rules) Counts() map[string]int {
	group := map[string]string{}
	for _, d := range chainDefs() {
		group[d.name] = d.group
	}
	out := map[string]int{}
	for _, c := range r.chains {
		g := group[c.Name]
		if g == "" {
			g = "other"
		}
		out[g] += len(c.Rules)
	}
	return out
}

// Diff implements dataplane.Rules: each chain missing, extra or different, with its rules.
func (r *rules) Diff(observed dataplane.Rules) []string {
	o, ok := observed.(*rules)
	if !ok {
		return []string{fmt.Sprintf("observed rules of another dataplane (%T)", observed)}
	}
	have := map[string]nft.Chain{}
	for _, c := range o.chains {
		have[c.Name] = c
	}
	var out []string
	for _, c := range r.chains {
		h, ok := have[c.Name]
		delete(have, c.Name)
		switch {
		case !ok:
			out = append(out, "chain "+c.Name+": missing")
		case h.Base != c.Base:
			out = append(out, fmt.Sprintf("chain %s: hook %q, want %q", c.Name, h.Base, c.Base))
		case !slices.Equal(h.Rules, c.Rules):
			out = append(out, fmt.Sprintf("chain %s: rules %q, want %q", c.Name, h.Rules, c.Rules))
		}
	}
	extra := make([]string, 0, len(have))
	for n := range have {
		extra = append(extra, "chain "+n+": not kipvs's")
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// Rules implements dataplane.Filter (Render).
func (p *Filter) Rules(f *proxy.Filter) dataplane.Rules { return newRules(Render(f)) }

// ObserveRules implements dataplane.Filter: the table's chains as nft lists them; no table
// is no chain.
func (p *Filter) ObserveRules(ctx context.Context) (dataplane.Rules, error) {
	chains, err := p.conn.Chains(ctx)
	if kerr.IsNotFound(err) {
		return newRules(nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("observe %s nftables rules: %w", p.family, err)
	}
	return newRules(chains), nil
}
