package netfilter

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// validFamily reports whether f is IPv4 or IPv6.
func validFamily(f inet.Family) bool { return f == inet.IPv4 || f == inet.IPv6 }

// tool is the binary name prefix for the family: iptables or ip6tables.
func tool(f inet.Family) string {
	if f == inet.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

func hostBits(f inet.Family) int {
	if f == inet.IPv6 {
		return 128
	}
	return 32
}

func defaultReject(f inet.Family) string {
	if f == inet.IPv6 {
		return "icmp6-port-unreachable"
	}
	return "icmp-port-unreachable"
}

// Table is an iptables table.
type Table string

// The tables kipvs writes to.
const (
	TableNAT    Table = "nat"
	TableFilter Table = "filter"
)

// Builtins returns the built-in chains of a table in the order iptables-save prints them, nil
// for a table the package does not know.
func Builtins(table Table) []string {
	switch table {
	case TableNAT:
		return []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}
	case TableFilter:
		return []string{"INPUT", "FORWARD", "OUTPUT"}
	case "mangle":
		return []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
	case "raw":
		return []string{"PREROUTING", "OUTPUT"}
	}
	return nil
}

// isBuiltin reports whether chain is a built-in chain of table.
func isBuiltin(table Table, chain string) bool { return slices.Contains(Builtins(table), chain) }

// maxChainNameLen is the longest chain name iptables accepts (XT_EXTENSION_MAXNAMELEN minus
// the NUL).
const maxChainNameLen = 28

// isStandardTarget reports the verdicts, which cannot be chain names.
func isStandardTarget(name string) bool {
	switch name {
	case "ACCEPT", "DROP", "RETURN", "QUEUE":
		return true
	}
	return false
}

// ownedChains names the chains kipvs owns in each table. Apply deletes an owned chain that the Ruleset
// does not declare, and treats every rule in a built-in chain that jumps to an owned chain as its
// own. Chains not listed here are foreign and never touched.
type ownedChains map[Table][]string

// defaultOwned is upstream kube-proxy's IPVS-mode chain set.
func defaultOwned() ownedChains {
	return ownedChains{
		TableNAT:    {ipvsmode.ChainServices, ipvsmode.ChainPostrouting, ipvsmode.ChainMarkMasq, ipvsmode.ChainNodePort, ipvsmode.ChainLoadBalancer},
		TableFilter: {ipvsmode.ChainForward, ipvsmode.ChainNodePort, ipvsmode.ChainProxyFirewall, ipvsmode.ChainSourceRangesFirewall, ipvsmode.ChainIPVSFilter, ipvsmode.ChainIPVSOutFilter},
	}
}

// ownedSet is ownedChains checked and indexed.
type ownedSet struct {
	tables []Table                   // sorted
	chains map[Table]map[string]bool // table -> owned chain names
	sorted map[Table][]string        // table -> owned chain names, sorted
}

func newOwnedSet(o ownedChains) (ownedSet, error) {
	s := ownedSet{chains: map[Table]map[string]bool{}, sorted: map[Table][]string{}}
	for table, names := range o {
		if Builtins(table) == nil {
			return s, fmt.Errorf("owned chains: unknown table %q: %w", table, kerr.ErrInvalid)
		}
		set := map[string]bool{}
		for _, n := range names {
			if err := CheckChainName(table, n); err != nil {
				return s, fmt.Errorf("owned chains: %w", err)
			}
			set[n] = true
		}
		if len(set) == 0 {
			continue
		}
		s.tables = append(s.tables, table)
		s.chains[table] = set
		s.sorted[table] = sortedKeys(set)
	}
	slices.Sort(s.tables)
	return s, nil
}

// CheckChainName checks that name can name a user chain of table the way iptables does:
// 1 to 28 characters, no leading '-' or '!', no blank or quote, and not a standard target
// or one of the table's built-in chains. It returns kerr.ErrInvalid otherwise.
func CheckChainName(table Table, name string) error {
	switch {
	case name == "" || len(name) > maxChainNameLen:
		return fmt.Errorf("table %s chain %q: name must be 1 to %d characters: %w", table, name, maxChainNameLen, kerr.ErrInvalid)
	case strings.HasPrefix(name, "-") || strings.HasPrefix(name, "!") || strings.ContainsAny(name, " \t\n\"'\\"):
		return fmt.Errorf("table %s chain %q: not a valid chain name: %w", table, name, kerr.ErrInvalid)
	case isStandardTarget(name) || isBuiltin(table, name):
		return fmt.Errorf("table %s chain %q: reserved name: %w", table, name, kerr.ErrInvalid)
	}
	return nil
}

// Ruleset is the desired (Apply) or observed (Observe) content of the owned chains, per table.
// A table that is absent, or present with no chains and jumps, holds nothing of kipvs's: Apply
// removes whatever kipvs owns there.
type Ruleset map[Table]TableRules

// TableRules is what kipvs owns in one table.
type TableRules struct {
	// Chains are the owned chains that must exist, each with its full rule list. Their order
	// does not matter; Observe returns them sorted by name.
	Chains []Chain
	// Jumps are kipvs's rules in built-in chains. Within one built-in chain they are kept in the
	// listed order; a missing jump is inserted right after the jump listed before it, or at the
	// top of the chain (where upstream prepends its jumps) when it is the first. Foreign rules
	// are never moved, so a foreign rule inserted above kipvs's jumps stays there.
	Jumps []Jump
}

// Chain is an owned chain and its rules, each written as the arguments that follow `-A NAME` in
// iptables-save output, in that canonical form (see Canonical).
type Chain struct {
	Name  string
	Rules []string
}

// Jump is a rule in a built-in chain (Chain) that jumps to an owned chain. Rule is the text after
// `-A CHAIN` in canonical form, usually `-m comment --comment "COMMENT" -j TARGET`.
type Jump struct {
	Chain string
	Rule  string
}

// target is the chain the jump leads to.
func (j Jump) target() string { return ruleTarget(j.Rule) }

// Result reports what Apply or Remove wrote.
type Result struct {
	// Restored lists, in order, the tables that were written; a table that already matched is
	// not written and not listed.
	Restored []Table
	// Payloads holds the iptables-restore input written for each restored table.
	Payloads map[Table]string
}

// Changed reports whether anything was written.
func (r Result) Changed() bool { return len(r.Restored) > 0 }

// Interface is the netfilter adapter for one namespace and one address family.
type Interface interface {
	// Family is the address family the handle manages.
	Family() inet.Family
	// Backend is the iptables backend in use and why it was chosen.
	Backend() Backend
	// Apply makes the owned chains and jumps match rs; see the package comment.
	Apply(ctx context.Context, rs Ruleset) (Result, error)
	// Observe reads back the owned chains and kipvs's jumps as they are in the kernel, in
	// canonical order (see Diff).
	Observe(ctx context.Context) (Ruleset, error)
	// Remove deletes kipvs's jumps and every owned chain, in the order the kernel needs (per
	// table: flush, delete the jumps, delete the chains). A foreign rule that references an
	// owned chain makes it fail with kerr.ErrBusy, changing nothing in that table (tables
	// before it in name order are already done and listed in the Result).
	Remove(ctx context.Context) (Result, error)
	// Dump is the iptables-save text of what kipvs owns (see Format).
	Dump(ctx context.Context) (string, error)
	// Check asks iptables-restore to parse and build (not commit) rule in a scratch chain of
	// table, so a missing match or target (kernel module or iptables extension) shows up at
	// start-up instead of at the first sync. Nothing changes in the kernel.
	Check(ctx context.Context, table Table, rule string) error
}

// validate checks rs against the owned chains: known tables, owned and unique chain names,
// jumps from built-in chains to declared owned chains, rules in canonical form, and no rule
// leading to an owned chain that rs does not declare (Apply would delete it).
func validate(family inet.Family, owned ownedSet, rs Ruleset) error {
	for table, tr := range rs {
		own, ok := owned.chains[table]
		if !ok {
			if len(tr.Chains) == 0 && len(tr.Jumps) == 0 {
				continue
			}
			return fmt.Errorf("ruleset: table %q holds no owned chains: %w", table, kerr.ErrInvalid)
		}
		declared := map[string]bool{}
		for _, c := range tr.Chains {
			if !own[c.Name] {
				return fmt.Errorf("ruleset: table %s chain %q is not an owned chain: %w", table, c.Name, kerr.ErrInvalid)
			}
			if declared[c.Name] {
				return fmt.Errorf("ruleset: table %s chain %s declared twice: %w", table, c.Name, kerr.ErrInvalid)
			}
			declared[c.Name] = true
		}
		checkRule := func(where, rule string) error {
			if err := Canonical(family, rule); err != nil {
				return fmt.Errorf("ruleset: table %s %s: %w", table, where, err)
			}
			if t := ruleTarget(rule); own[t] && !declared[t] {
				return fmt.Errorf("ruleset: table %s %s: rule %q leads to owned chain %s, which the ruleset does not declare: %w",
					table, where, rule, t, kerr.ErrInvalid)
			}
			return nil
		}
		for _, c := range tr.Chains {
			for i, r := range c.Rules {
				if err := checkRule(fmt.Sprintf("chain %s rule %d", c.Name, i+1), r); err != nil {
					return err
				}
			}
		}
		seen := map[Jump]bool{}
		for _, j := range tr.Jumps {
			if !isBuiltin(table, j.Chain) {
				return fmt.Errorf("ruleset: table %s jump %q: %q is not a built-in chain of the table: %w", table, j.Rule, j.Chain, kerr.ErrInvalid)
			}
			if err := checkRule("jump from "+j.Chain, j.Rule); err != nil {
				return err
			}
			if !own[j.target()] {
				return fmt.Errorf("ruleset: table %s jump from %s %q: target %q is not an owned chain: %w", table, j.Chain, j.Rule, j.target(), kerr.ErrInvalid)
			}
			if seen[j] {
				return fmt.Errorf("ruleset: table %s jump from %s %q listed twice: %w", table, j.Chain, j.Rule, kerr.ErrInvalid)
			}
			seen[j] = true
		}
	}
	return nil
}

// Normalize returns rs in the canonical order Observe uses: empty tables dropped, chains sorted
// by name, jumps grouped by built-in chain in iptables-save order (their order within a chain
// kept). Rule slices are copied.
func (rs Ruleset) Normalize() Ruleset {
	out := Ruleset{}
	for table, tr := range rs {
		if len(tr.Chains) == 0 && len(tr.Jumps) == 0 {
			continue
		}
		var n TableRules
		for _, c := range tr.Chains {
			n.Chains = append(n.Chains, Chain{Name: c.Name, Rules: slices.Clone(c.Rules)})
		}
		sort.SliceStable(n.Chains, func(i, j int) bool { return n.Chains[i].Name < n.Chains[j].Name })
		n.Jumps = slices.Clone(tr.Jumps)
		order := Builtins(table)
		sort.SliceStable(n.Jumps, func(i, j int) bool {
			return slices.Index(order, n.Jumps[i].Chain) < slices.Index(order, n.Jumps[j].Chain)
		})
		out[table] = n
	}
	return out
}

// Diff compares a desired ruleset with an observed one (drift detection) and describes every
// difference, one line each, in a stable order; nil means they match.
func Diff(desired, observed Ruleset) []string {
	d, o := desired.Normalize(), observed.Normalize()
	var out []string
	tables := map[Table]bool{}
	for t := range d {
		tables[t] = true
	}
	for t := range o {
		tables[t] = true
	}
	for _, table := range sortedKeys(tables) {
		dt, ot := d[table], o[table]
		dc, oc := chainMap(dt.Chains), chainMap(ot.Chains)
		names := map[string]bool{}
		for n := range dc {
			names[n] = true
		}
		for n := range oc {
			names[n] = true
		}
		for _, n := range sortedKeys(names) {
			want, wok := dc[n]
			got, gok := oc[n]
			switch {
			case !gok:
				out = append(out, fmt.Sprintf("%s: chain %s is missing", table, n))
			case !wok:
				out = append(out, fmt.Sprintf("%s: chain %s is not wanted", table, n))
			case !slices.Equal(want, got):
				out = append(out, fmt.Sprintf("%s: chain %s: %s", table, n, describeRuleDiff(want, got)))
			}
		}
		for _, b := range Builtins(table) {
			want, got := jumpRules(dt.Jumps, b), jumpRules(ot.Jumps, b)
			if !slices.Equal(want, got) {
				out = append(out, fmt.Sprintf("%s: %s jumps: want %q, have %q", table, b, want, got))
			}
		}
	}
	return out
}

func describeRuleDiff(want, got []string) string {
	for i := 0; i < len(want) || i < len(got); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("rule %d %q is missing (have %d rules, want %d)", i+1, want[i], len(got), len(want))
		case i >= len(want):
			return fmt.Sprintf("unwanted rule %d %q (have %d rules, want %d)", i+1, got[i], len(got), len(want))
		case want[i] != got[i]:
			return fmt.Sprintf("rule %d is %q, want %q", i+1, got[i], want[i])
		}
	}
	return "rules differ"
}

func chainMap(cs []Chain) map[string][]string {
	m := make(map[string][]string, len(cs))
	for _, c := range cs {
		m[c.Name] = c.Rules
	}
	return m
}

func jumpRules(js []Jump, chain string) []string {
	var out []string
	for _, j := range js {
		if j.Chain == chain {
			out = append(out, j.Rule)
		}
	}
	return out
}

// Format renders rs as iptables-save text: per table (sorted by name, empty tables left out)
// `*TABLE`, the owned chains' declarations sorted by name, kipvs's jumps in built-in chain
// order, the owned chains' rules chain by chain, `COMMIT`. No counters, no comment lines. This is
// exactly what `iptables-save -t TABLE` prints for those chains and rules, in the same order.
func Format(rs Ruleset) string {
	n := rs.Normalize()
	var b strings.Builder
	tables := make([]Table, 0, len(n))
	for t := range n {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, table := range tables {
		tr := n[table]
		fmt.Fprintf(&b, "*%s\n", table)
		for _, c := range tr.Chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c.Name)
		}
		for _, j := range tr.Jumps {
			WriteRule(&b, j.Chain, j.Rule)
		}
		for _, c := range tr.Chains {
			for _, r := range c.Rules {
				WriteRule(&b, c.Name, r)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// WriteRule writes one "-A chain rule" line of a restore payload or save output to b.
func WriteRule(b *strings.Builder, chain, rule string) {
	b.WriteString("-A ")
	b.WriteString(chain)
	if rule != "" {
		b.WriteByte(' ')
		b.WriteString(rule)
	}
	b.WriteByte('\n')
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Programs lists every program kipvs runs for backend m, both families: the tool itself
// (--version, the nat table check), its -save and its -restore. An image must ship them all.
func Programs(m Mode) []string {
	var out []string
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		base := tool(f) + "-" + string(m)
		out = append(out, base, base+"-save", base+"-restore")
	}
	return out
}
