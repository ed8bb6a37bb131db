package netfilter

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/kipvs/kipvs/internal/kerr"
)

// tableState is one table as iptables-save printed it: every chain, foreign ones included.
type tableState struct {
	table  Table
	chains map[string]*chainState
}

type chainState struct {
	builtin bool // declared with a policy rather than "-"
	rules   []savedRule
}

// savedRule is one rule line: its text after `-A CHAIN` and its counters as printed
// ("[pkts:bytes]", or "" without -c).
type savedRule struct {
	spec     string
	counters string
}

// parseSave parses iptables-save output for one table; see parseTables.
func parseSave(table Table, out []byte) (*tableState, error) {
	st, err := parseTables(out, []Table{table})
	if err != nil {
		return nil, err
	}
	return st[table], nil
}

// parseTables parses iptables-save output (of all tables, or of one with -t) and returns the
// given tables. A table missing from the output (one that does not exist yet) reads as the table
// with its empty built-in chains; other tables are skipped.
func parseTables(out []byte, tables []Table) (map[Table]*tableState, error) {
	res := map[Table]*tableState{}
	for _, t := range tables {
		res[t] = &tableState{table: t, chains: map[string]*chainState{}}
	}
	seen := map[Table]bool{}
	var st *tableState // the section being read, nil when skipping one
	inSection := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	lineNo := 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("parse iptables-save output, line %d: %s: %w", lineNo, fmt.Sprintf(format, args...), kerr.ErrInvalid)
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			// iptables-nft-save reports a table it cannot represent in a comment.
			for t := range res {
				if strings.Contains(line, "incompatible") && strings.Contains(line, "`"+string(t)+"'") {
					return nil, fail("table %s: %s", t, strings.TrimPrefix(line, "# "))
				}
			}
			continue
		case strings.HasPrefix(line, "*"):
			if inSection {
				return nil, fail("table %s has no COMMIT", line[1:])
			}
			inSection = true
			t := Table(line[1:])
			st = res[t]
			if st != nil {
				if seen[t] {
					return nil, fail("table %s printed twice", t)
				}
				seen[t] = true
			}
			continue
		case line == "COMMIT":
			if !inSection {
				return nil, fail("COMMIT outside a table")
			}
			inSection, st = false, nil
			continue
		case !inSection:
			return nil, fail("unexpected line %q outside a table", line)
		case st == nil:
			continue
		}
		if strings.HasPrefix(line, ":") {
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, fail("bad chain line %q", line)
			}
			if _, dup := st.chains[f[0]]; dup {
				return nil, fail("chain %s declared twice", f[0])
			}
			st.chains[f[0]] = &chainState{builtin: f[1] != "-"}
			continue
		}
		counters := ""
		if strings.HasPrefix(line, "[") {
			end := strings.Index(line, "] ")
			if end < 0 {
				return nil, fail("bad counters in %q", line)
			}
			counters, line = line[:end+1], line[end+2:]
		}
		rest, ok := strings.CutPrefix(line, "-A ")
		if !ok {
			return nil, fail("unexpected line %q", line)
		}
		name, spec, _ := strings.Cut(rest, " ")
		c, ok := st.chains[name]
		if !ok {
			return nil, fail("rule for undeclared chain %s", name)
		}
		c.rules = append(c.rules, savedRule{spec: spec, counters: counters})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read iptables-save output: %w", err)
	}
	if inSection {
		return nil, fail("last table has no COMMIT")
	}
	for t, st := range res {
		for _, b := range Builtins(t) {
			if _, ok := st.chains[b]; !ok {
				st.chains[b] = &chainState{builtin: true}
			}
		}
	}
	return res, nil
}

// owned extracts what kipvs owns in the table: the owned chains present, sorted, and the rules
// in built-in chains that jump to an owned chain, in iptables-save order.
func (st *tableState) owned(own map[string]bool) TableRules {
	var tr TableRules
	for _, name := range sortedKeys(st.chains) {
		c := st.chains[name]
		if c.builtin || !own[name] {
			continue
		}
		tr.Chains = append(tr.Chains, Chain{Name: name, Rules: c.specs()})
	}
	for _, b := range Builtins(st.table) {
		c, ok := st.chains[b]
		if !ok {
			continue
		}
		for _, r := range c.rules {
			if own[ruleTarget(r.spec)] {
				tr.Jumps = append(tr.Jumps, Jump{Chain: b, Rule: r.spec})
			}
		}
	}
	return tr
}

func (c *chainState) specs() []string {
	out := make([]string, len(c.rules))
	for i, r := range c.rules {
		out[i] = r.spec
	}
	return out
}
