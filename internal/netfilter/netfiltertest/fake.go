// Package netfiltertest holds the in-memory fake of package netfilter's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package netfiltertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
)

// Op names an Interface operation for fault injection.
type Op string

// The operations a fault can be injected into.
const (
	OpApply   Op = "apply"
	OpObserve Op = "observe"
	OpRemove  Op = "remove"
	OpDump    Op = "dump"
	OpCheck   Op = "check"
)

// Fake is an in-memory Interface. It models the kernel's tables (built-in chains, foreign chains
// and rules, kipvs's chains) and interprets the very iptables-restore payloads the real handle
// writes, with iptables-restore's semantics: --noflush, a `:CHAIN` line flushing a user chain,
// per-table atomic COMMIT, and the rejections kipvs could run into (a jump to a missing chain
// or an unknown target: kerr.ErrNotFound; deleting a chain that a rule references or that is not
// empty: kerr.ErrBusy; deleting a missing rule or chain: kerr.ErrNotFound; a rule matching a
// missing ipset, when SetIPSets is used: kerr.ErrNotFound). It is safe for concurrent use.
type Fake struct {
	handle *netfilter.Handle
	kernel *fakeKernel

	mu     sync.Mutex
	faults map[Op]error
}

var _ netfilter.Interface = (*Fake)(nil)

// NewFake returns a fake for family with empty tables. Of the options only the owned chains
// apply; it panics on an invalid family or owned set, which are programming errors in a test.
func NewFake(family inet.Family, opts ...netfilter.Option) *Fake {
	k := &fakeKernel{tables: map[netfilter.Table]*fakeTable{}}
	h, err := netfilter.NewWithTables(family, netfilter.Backend{Mode: "fake", Reason: "in-memory fake"}, k, opts...)
	if err != nil {
		panic("netfiltertest.NewFake: " + err.Error())
	}
	return &Fake{
		handle: h,
		kernel: k,
		faults: map[Op]error{},
	}
}

// FailNext makes the next call of op return err (wrapped) without touching the tables.
func (f *Fake) FailNext(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[op] = err
}

func (f *Fake) fault(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.faults[op]
	delete(f.faults, op)
	if err != nil {
		return fmt.Errorf("netfilter fake %s: injected fault: %w", op, err)
	}
	return nil
}

// Check implements netfilter.Interface; it fails only with an injected fault (FailNext(OpCheck, ...)).
func (f *Fake) Check(ctx context.Context, table netfilter.Table, rule string) error {
	return f.fault(OpCheck)
}

// Family implements netfilter.Interface.
func (f *Fake) Family() inet.Family { return f.handle.Family() }

// Backend implements netfilter.Interface.
func (f *Fake) Backend() netfilter.Backend { return f.handle.Backend() }

// Apply implements netfilter.Interface.
func (f *Fake) Apply(ctx context.Context, rs netfilter.Ruleset) (netfilter.Result, error) {
	if err := f.fault(OpApply); err != nil {
		return netfilter.Result{}, err
	}
	return f.handle.Apply(ctx, rs)
}

// Observe implements netfilter.Interface.
func (f *Fake) Observe(ctx context.Context) (netfilter.Ruleset, error) {
	if err := f.fault(OpObserve); err != nil {
		return nil, err
	}
	return f.handle.Observe(ctx)
}

// Remove implements netfilter.Interface.
func (f *Fake) Remove(ctx context.Context) (netfilter.Result, error) {
	if err := f.fault(OpRemove); err != nil {
		return netfilter.Result{}, err
	}
	return f.handle.Remove(ctx)
}

// Dump implements netfilter.Interface.
func (f *Fake) Dump(ctx context.Context) (string, error) {
	if err := f.fault(OpDump); err != nil {
		return "", err
	}
	return f.handle.Dump(ctx)
}

// Restore applies an iptables-restore --noflush --counters payload as another program would
// (to seed foreign chains and rules, or to cause drift), with the same rejections.
func (f *Fake) Restore(payload string) error {
	if err := f.kernel.run(payload, false); err != nil {
		return fmt.Errorf("netfilter fake restore: %w", err)
	}
	return nil
}

// Save returns what `iptables-save -t TABLE` would print (all chains, foreign ones included)
// without the comment lines and counters.
func (f *Fake) Save(table netfilter.Table) string {
	f.kernel.mu.Lock()
	defer f.kernel.mu.Unlock()
	t := f.kernel.table(table)
	if t == nil {
		return ""
	}
	return t.format(table, false)
}

// SetFaulty makes the fake's iptables-save and iptables-restore fail at random as in decides
// (nil: never), which Apply, Observe, Remove and Dump meet. A restore is asked about at each
// table's COMMIT, as a mutation: a failed COMMIT changes nothing in its table and stops the
// restore there, with the tables committed before it kept (iptables-restore commits table by
// table). A save is asked about as a read. Restore and Save (the test's own access) never
// fail this way; FailNext is consulted first.
// Tables returns the fake's model of the kernel's tables, to save and restore payloads as
// the iptables binaries would, bypassing the Handle.
func (f *Fake) Tables() netfilter.Tables { return f.kernel }

func (f *Fake) SetFaulty(in *faulty.Injector) { f.kernel.SetFaulty(in) }

// SetIPSets makes rules matching an ipset (-m set --match-set NAME) fail with kerr.ErrNotFound
// unless exists(NAME) is true, as the kernel does for a missing set. nil (the default) does not
// model ipsets.
func (f *Fake) SetIPSets(exists func(name string) bool) {
	f.kernel.mu.Lock()
	defer f.kernel.mu.Unlock()
	f.kernel.setExists = exists
}

// fakeKernel is the model of the tables of one family.
type fakeKernel struct {
	mu        sync.Mutex
	tables    map[netfilter.Table]*fakeTable
	setExists func(string) bool
	faulty.Switch
}

type fakeTable struct {
	chains map[string]*fakeChain
}

type fakeChain struct {
	builtin bool
	policy  string
	rules   []fakeRule
}

type fakeRule struct {
	spec     string // canonical text
	target   string
	counters string // "[pkts:bytes]"
}

// table returns the table, creating it with its empty built-in chains on first use (like the
// kernel creating it on demand); nil for an unknown table. Callers hold k.mu.
func (k *fakeKernel) table(name netfilter.Table) *fakeTable {
	if t, ok := k.tables[name]; ok {
		return t
	}
	bs := netfilter.Builtins(name)
	if bs == nil {
		return nil
	}
	t := &fakeTable{chains: map[string]*fakeChain{}}
	for _, b := range bs {
		t.chains[b] = &fakeChain{builtin: true, policy: "ACCEPT"}
	}
	k.tables[name] = t
	return t
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: make(map[string]*fakeChain, len(t.chains))}
	for n, ch := range t.chains {
		cc := *ch
		cc.rules = slices.Clone(ch.rules)
		c.chains[n] = &cc
	}
	return c
}

// format prints the table as iptables-save does: built-in chains in hook order, then user
// chains sorted by name; rules chain by chain in the same order.
func (t *fakeTable) format(name netfilter.Table, counters bool) string {
	order := netfilter.Builtins(name)
	var user []string
	for n, c := range t.chains {
		if !c.builtin {
			user = append(user, n)
		}
	}
	slices.Sort(user)
	order = append(order, user...)
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", name)
	for _, n := range order {
		c := t.chains[n]
		if c.builtin {
			fmt.Fprintf(&b, ":%s %s [0:0]\n", n, c.policy)
		} else {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
	}
	for _, n := range order {
		for _, r := range t.chains[n].rules {
			if counters {
				cnt := r.counters
				if cnt == "" {
					cnt = "[0:0]"
				}
				b.WriteString(cnt + " ")
			}
			netfilter.WriteRule(&b, n, r.spec)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// save prints every table that exists, in name order, with counters.
func (k *fakeKernel) Save(_ context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.Injector().Read("iptables-save"); err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(k.tables)) {
		b.WriteString(k.tables[name].format(name, true))
	}
	return []byte(b.String()), nil
}

// knownTarget reports the targets (other than chains) the fake accepts after -j.
func knownTarget(name string) bool {
	switch name {
	case "ACCEPT", "DROP", "RETURN", "QUEUE", "MARK", "MASQUERADE", "SNAT", "DNAT", "REDIRECT", "REJECT", "LOG",
		"NFLOG", "CONNMARK", "NOTRACK", "CT", "TCPMSS", "CLASSIFY", "NETMAP", "SET", "CHECKSUM", "DSCP", "TOS",
		"TTL", "HL", "TPROXY", "TEE", "AUDIT":
		return true
	}
	return false
}

// restore interprets a payload from the Handle, meeting the Injector.
func (k *fakeKernel) Restore(_ context.Context, payload string) error { return k.run(payload, true) }

// run interprets a payload. Each table section takes effect at its COMMIT, all or nothing;
// with inject, the Injector may fail a COMMIT.
func (k *fakeKernel) run(payload string, inject bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var (
		cur     *fakeTable
		curName netfilter.Table
	)
	lines := strings.Split(payload, "\n")
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fail := func(kind error, format string, args ...any) error {
			return &netfilter.RestoreError{Line: i + 1, Text: raw, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), kind)}
		}
		switch {
		case strings.HasPrefix(line, "*"):
			if cur != nil {
				return fail(kerr.ErrInvalid, "table %s has no COMMIT", curName)
			}
			curName = netfilter.Table(line[1:])
			t := k.table(curName)
			if t == nil {
				return fail(kerr.ErrNotFound, "table %q does not exist", curName)
			}
			cur = t.clone()
			continue
		case line == "COMMIT":
			if cur == nil {
				return fail(kerr.ErrInvalid, "COMMIT outside a table")
			}
			if inject {
				if err := k.Injector().Mutation("iptables-restore COMMIT *" + string(curName)); err != nil {
					return &netfilter.RestoreError{Line: i + 1, Text: raw, Err: err}
				}
			}
			k.tables[curName] = cur
			cur = nil
			continue
		case cur == nil:
			return fail(kerr.ErrInvalid, "line outside a table")
		case strings.HasPrefix(line, ":"):
			if err := cur.declare(curName, strings.Fields(line[1:])); err != nil {
				return &netfilter.RestoreError{Line: i + 1, Text: raw, Err: err}
			}
			continue
		}
		counters := ""
		if strings.HasPrefix(line, "[") {
			end := strings.Index(line, "] ")
			if end < 0 {
				return fail(kerr.ErrInvalid, "bad counters")
			}
			counters, line = line[:end+1], line[end+2:]
			if _, err := parseCounters(counters); err != nil {
				return fail(kerr.ErrInvalid, "bad counters %s", counters)
			}
		}
		words, err := netfilter.Tokenize(line)
		if err != nil {
			return fail(kerr.ErrInvalid, "%v", err)
		}
		if err := k.command(cur, curName, words, counters); err != nil {
			return &netfilter.RestoreError{Line: i + 1, Text: raw, Err: err}
		}
	}
	if cur != nil {
		return &netfilter.RestoreError{Err: fmt.Errorf("table %s has no COMMIT: %w", curName, kerr.ErrInvalid)}
	}
	return nil
}

func parseCounters(c string) ([2]uint64, error) {
	var out [2]uint64
	p, b, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(c, "["), "]"), ":")
	if !ok {
		return out, kerr.ErrInvalid
	}
	var err error
	if out[0], err = strconv.ParseUint(p, 10, 64); err != nil {
		return out, err
	}
	out[1], err = strconv.ParseUint(b, 10, 64)
	return out, err
}

// declare handles `:NAME POLICY [counters]`: a built-in chain gets its policy set; a user chain
// is created, or flushed when it exists (--noflush semantics).
func (t *fakeTable) declare(table netfilter.Table, f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("bad chain declaration: %w", kerr.ErrInvalid)
	}
	name, policy := f[0], f[1]
	if c, ok := t.chains[name]; ok && c.builtin {
		if policy != "-" {
			if policy != "ACCEPT" && policy != "DROP" {
				return fmt.Errorf("chain %s: bad policy %q: %w", name, policy, kerr.ErrInvalid)
			}
			c.policy = policy
		}
		return nil
	}
	if policy != "-" {
		return fmt.Errorf("chain %s: a user chain cannot have a policy: %w", name, kerr.ErrInvalid)
	}
	if c, ok := t.chains[name]; ok {
		c.rules = nil
		return nil
	}
	if err := netfilter.CheckChainName(table, name); err != nil {
		return err
	}
	t.chains[name] = &fakeChain{policy: "-"}
	return nil
}

func (k *fakeKernel) command(t *fakeTable, table netfilter.Table, w []string, counters string) error {
	if len(w) == 0 {
		return fmt.Errorf("empty command: %w", kerr.ErrInvalid)
	}
	chainArg := func() (*fakeChain, string, error) {
		if len(w) < 2 {
			return nil, "", fmt.Errorf("%s needs a chain: %w", w[0], kerr.ErrInvalid)
		}
		c, ok := t.chains[w[1]]
		if !ok {
			return nil, w[1], fmt.Errorf("chain %s: no chain/target/match by that name: %w", w[1], kerr.ErrNotFound)
		}
		return c, w[1], nil
	}
	switch w[0] {
	case "-A", "-I":
		c, name, err := chainArg()
		if err != nil {
			return err
		}
		spec := w[2:]
		pos := len(c.rules)
		if w[0] == "-I" {
			pos = 0
			if len(spec) > 0 {
				if n, err := strconv.Atoi(spec[0]); err == nil {
					if n < 1 || n > len(c.rules)+1 {
						return fmt.Errorf("chain %s: index of insertion too big: %w", name, kerr.ErrInvalid)
					}
					pos, spec = n-1, spec[1:]
				}
			}
		}
		r, err := k.newRule(t, spec, counters)
		if err != nil {
			return err
		}
		c.rules = slices.Insert(c.rules, pos, r)
	case "-D":
		c, name, err := chainArg()
		if err != nil {
			return err
		}
		spec := w[2:]
		if len(spec) == 1 {
			if n, err := strconv.Atoi(spec[0]); err == nil {
				if n < 1 || n > len(c.rules) {
					return fmt.Errorf("chain %s: index of deletion too big: %w", name, kerr.ErrNotFound)
				}
				c.rules = slices.Delete(c.rules, n-1, n)
				return nil
			}
		}
		text := netfilter.Render(spec)
		for i, r := range c.rules {
			if r.spec == text {
				c.rules = slices.Delete(c.rules, i, i+1)
				return nil
			}
		}
		return fmt.Errorf("chain %s: bad rule (does a matching rule exist in that chain?): %w", name, kerr.ErrNotFound)
	case "-N":
		if len(w) != 2 {
			return fmt.Errorf("-N needs one chain: %w", kerr.ErrInvalid)
		}
		if _, ok := t.chains[w[1]]; ok {
			return fmt.Errorf("chain %s: chain already exists: %w", w[1], kerr.ErrExists)
		}
		if err := netfilter.CheckChainName(table, w[1]); err != nil {
			return err
		}
		t.chains[w[1]] = &fakeChain{policy: "-"}
	case "-F":
		if len(w) == 1 {
			for _, c := range t.chains {
				c.rules = nil
			}
			return nil
		}
		c, _, err := chainArg()
		if err != nil {
			return err
		}
		c.rules = nil
	case "-X":
		c, name, err := chainArg()
		if err != nil {
			return err
		}
		if c.builtin {
			return fmt.Errorf("chain %s: cannot delete a built-in chain: %w", name, kerr.ErrInvalid)
		}
		if refs := t.references(name); refs > 0 {
			return fmt.Errorf("chain %s: device or resource busy (%d references): %w", name, refs, kerr.ErrBusy)
		}
		if len(c.rules) > 0 {
			return fmt.Errorf("chain %s: directory not empty: %w", name, kerr.ErrBusy)
		}
		delete(t.chains, name)
	case "-P":
		c, name, err := chainArg()
		if err != nil {
			return err
		}
		if !c.builtin || len(w) != 3 || (w[2] != "ACCEPT" && w[2] != "DROP") {
			return fmt.Errorf("chain %s: bad policy: %w", name, kerr.ErrInvalid)
		}
		c.policy = w[2]
	default:
		return fmt.Errorf("unknown command %q: %w", w[0], kerr.ErrInvalid)
	}
	return nil
}

func (k *fakeKernel) newRule(t *fakeTable, spec []string, counters string) (fakeRule, error) {
	r := fakeRule{spec: netfilter.Render(spec), target: netfilter.Target(spec), counters: counters}
	if r.target != "" {
		c, isChain := t.chains[r.target]
		switch {
		case isChain && c.builtin:
			return r, fmt.Errorf("cannot jump to built-in chain %s: %w", r.target, kerr.ErrInvalid)
		case !isChain && !knownTarget(r.target):
			return r, fmt.Errorf("chain '%s' does not exist: %w", r.target, kerr.ErrNotFound)
		}
	}
	if k.setExists != nil {
		for _, s := range netfilter.SetNames(spec) {
			if !k.setExists(s) {
				return r, fmt.Errorf("set %s doesn't exist: %w", s, kerr.ErrNotFound)
			}
		}
	}
	return r, nil
}

// references counts the rules in the table that jump or go to chain.
func (t *fakeTable) references(chain string) int {
	n := 0
	for _, c := range t.chains {
		for _, r := range c.rules {
			if r.target == chain {
				n++
			}
		}
	}
	return n
}
