package netfilter

import (
	"fmt"
	"slices"
	"strings"
)

// plan computes the iptables-restore --noflush --counters payload that takes one table from cur
// to want, or "" when the table already matches. Sections, in the order the kernel needs them:
//
//  1. `:CHAIN - [0:0]` for every owned chain to create, refill or delete: under --noflush this
//     creates a missing chain and flushes an existing one (and nothing else);
//  2. `-D BUILTIN RULE` for kipvs's jumps that are no longer wanted (or out of order);
//  3. `-A CHAIN RULE` refilling the declared chains, carrying each unchanged rule's counters;
//  4. `-I BUILTIN N RULE` for missing jumps, at positions computed on the chain as it is then;
//  5. `-X CHAIN` for owned chains no longer wanted, now empty and unreferenced by kipvs.
//
// Rules are deleted by their text, never by position, so a concurrent change makes the restore
// fail instead of deleting a foreign rule.
func plan(cur *tableState, want TableRules, own ownedSet) string {
	table := cur.table
	wantChains := chainMap(want.Chains)
	var decl, dels, adds, ins, xs []string

	for _, name := range own.sorted[table] {
		c, exists := cur.chains[name]
		exists = exists && !c.builtin
		rules, wanted := wantChains[name]
		switch {
		case wanted && exists && slices.Equal(c.specs(), rules):
			// unchanged: not touched, counters kept as they are
		case wanted:
			decl = append(decl, ":"+name+" - [0:0]")
			carry := map[string][]string{}
			if exists {
				for _, r := range c.rules {
					if r.counters != "" && r.counters != "[0:0]" {
						carry[r.spec] = append(carry[r.spec], r.counters)
					}
				}
			}
			for _, r := range rules {
				line := ruleLine("-A", name, r)
				if q := carry[r]; len(q) > 0 {
					line = q[0] + " " + line
					carry[r] = q[1:]
				}
				adds = append(adds, line)
			}
		case exists:
			decl = append(decl, ":"+name+" - [0:0]")
			xs = append(xs, "-X "+name)
		}
	}

	ownChains := own.chains[table]
	for _, b := range Builtins(table) {
		c, ok := cur.chains[b]
		if !ok {
			continue
		}
		d, i := planJumps(b, c.rules, jumpRules(want.Jumps, b), ownChains)
		dels = append(dels, d...)
		ins = append(ins, i...)
	}

	if len(decl)+len(dels)+len(adds)+len(ins)+len(xs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, sec := range [][]string{decl, dels, adds, ins, xs} {
		for _, l := range sec {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func ruleLine(op, chain, rule string) string {
	if rule == "" {
		return op + " " + chain
	}
	return op + " " + chain + " " + rule
}

// modelRule is a rule of a built-in chain while the plan edits it: foreign rules are never
// touched, kipvs's (jumps to owned chains) are matched against the wanted ones.
type modelRule struct {
	spec string
	ours bool
}

// planJumps returns the deletions and insertions that make the owned jumps of one built-in chain
// equal want, in want's order, leaving foreign rules where they are.
func planJumps(chain string, rules []savedRule, want []string, own map[string]bool) (dels, ins []string) {
	model := make([]*modelRule, len(rules))
	var ours []*modelRule
	for i, r := range rules {
		model[i] = &modelRule{spec: r.spec, ours: own[ruleTarget(r.spec)]}
		if model[i].ours {
			ours = append(ours, model[i])
		}
	}
	oursSpecs := make([]string, len(ours))
	for i, r := range ours {
		oursSpecs[i] = r.spec
	}
	if slices.Equal(oursSpecs, want) {
		return nil, nil
	}
	remove := func(r *modelRule) {
		// -D deletes the first rule with this text; identical rules are interchangeable.
		for i, m := range model {
			if m.spec == r.spec {
				model = slices.Delete(model, i, i+1)
				break
			}
		}
		dels = append(dels, ruleLine("-D", chain, r.spec))
	}

	// Keep as many existing jumps as want allows (each wanted rule once), delete the rest.
	budget := map[string]int{}
	for _, w := range want {
		budget[w]++
	}
	var kept []*modelRule
	for _, r := range ours {
		if budget[r.spec] > 0 {
			budget[r.spec]--
			kept = append(kept, r)
		} else {
			remove(r)
		}
	}
	// The kept jumps must already be in want's relative order; if not, start over for this chain.
	placed := map[int]*modelRule{} // index in want -> kept rule standing for it
	k := 0
	for i, w := range want {
		if k < len(kept) && kept[k].spec == w {
			placed[i] = kept[k]
			k++
		}
	}
	if k < len(kept) {
		for _, r := range kept {
			remove(r)
		}
		placed = map[int]*modelRule{}
	}

	last := -1 // model index of the previous wanted jump
	for i, w := range want {
		if r, ok := placed[i]; ok {
			last = slices.Index(model, r)
			continue
		}
		pos := last + 1
		r := &modelRule{spec: w, ours: true}
		model = slices.Insert(model, pos, r)
		ins = append(ins, fmt.Sprintf("-I %s %d %s", chain, pos+1, w))
		last = pos
	}
	return dels, ins
}
