package ipset

import (
	"fmt"
	"slices"
	"strings"
)

// Dump format, shared by the real implementation and the fake: `ipset save` notation, made
// deterministic.
//
//	create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
//	add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
//	create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
//	add KUBE-NODE-PORT-TCP 30080
//
// Sets are sorted by name; each create line is followed by its members' add lines, sorted as
// text. A set with the comment extension has " comment" at the end of its create line and
// ` comment "TEXT"` after each member that has one. No counters, no references, no revision.
// hashsize is the kernel's current table size. A set of a type the package does not support
// gets a line "# NAME: N members of an unsupported type not shown" instead of add lines.
//
// NormalizeSave turns real `ipset save` output into this format.

// FormatDump renders sets in the Dump format.
func FormatDump(sets []*SetInfo) string {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, func(a, b *SetInfo) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, s := range sets {
		fmt.Fprintf(&b, "create %s %s\n", s.Name, s.Set.String())
		if !s.Type.Supported() {
			fmt.Fprintf(&b, "# %s: %d members of an unsupported type not shown\n", s.Name, s.Elements)
			continue
		}
		adds := make([]string, 0, len(s.Entries))
		for _, e := range s.Entries {
			adds = append(adds, addLine(s.Name, e))
		}
		slices.Sort(adds)
		for _, a := range adds {
			b.WriteString(a)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func addLine(set string, e Entry) string {
	if e.Comment != "" {
		// Comments hold no quotes or control characters (checkEntry), so print them raw as ipset does.
		return fmt.Sprintf("add %s %s comment \"%s\"", set, e.String(), e.Comment)
	}
	return fmt.Sprintf("add %s %s", set, e.String())
}

// NormalizeSave turns the output of `ipset save` into the Dump format, so it can be compared
// with Dump() for the same namespace. It drops the create options "bucketsize N" and
// "initval 0x..." (kernel tuning that ipset(8) prints only for sets created at the newest type
// revision; initval is a random hash seed), then sorts as Dump does. Everything else is kept
// as printed, so a difference in notation shows up.
func NormalizeSave(save string) string {
	type block struct {
		create string
		adds   []string
	}
	blocks := map[string]*block{}
	var names []string
	get := func(name string) *block {
		b := blocks[name]
		if b == nil {
			b = &block{}
			blocks[name] = b
			names = append(names, name)
		}
		return b
	}
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "create":
			var keep []string
			for i := 0; i < len(f); i++ {
				if i >= 3 && (f[i] == "bucketsize" || f[i] == "initval") && i+1 < len(f) {
					i++
					continue
				}
				keep = append(keep, f[i])
			}
			get(f[1]).create = strings.Join(keep, " ")
		case "add":
			b := get(f[1])
			b.adds = append(b.adds, line)
		}
	}
	slices.Sort(names)
	var out strings.Builder
	for _, n := range names {
		b := blocks[n]
		if b.create != "" {
			out.WriteString(b.create)
			out.WriteByte('\n')
		}
		slices.Sort(b.adds)
		for _, a := range b.adds {
			out.WriteString(a)
			out.WriteByte('\n')
		}
	}
	return out.String()
}
