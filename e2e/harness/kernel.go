package harness

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/nft"
)

// DummyName is the link kipvs binds the Service IPs on.
const DummyName = ipvsmode.DummyName

// IPVSTable is the IPVS table as `ipvsadm -Sn` shows it: virtual server ("tcp
// 10.96.0.1:443", "udp ...", "sctp ...") -> real server ("10.244.0.11:8080") -> weight.
type IPVSTable map[string]map[string]int

// ReadIPVS reads the IPVS table over generic netlink (kipvs's adapter, checked against
// ipvsadm by its kernel tests): polling with ipvsadm costs a process start per poll, which
// is slow under TCG.
func ReadIPVS() (IPVSTable, error) {
	c, err := ipvs.New(netns.None())
	if err != nil {
		return nil, fmt.Errorf("open IPVS: %w", err)
	}
	defer c.Close()
	out, err := c.Dump()
	if err != nil {
		return nil, fmt.Errorf("read the IPVS table: %w", err)
	}
	return parseIPVS(out)
}

func parseIPVS(out string) (IPVSTable, error) {
	tab := IPVSTable{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		var proto string
		switch f[1] {
		case "-t":
			proto = "tcp"
		case "-u":
			proto = "udp"
		case "--sctp-service":
			proto = "sctp"
		case "-f":
			proto = "fwm"
		default:
			return nil, fmt.Errorf("ipvsadm -Sn: unexpected line %q", line)
		}
		vs := proto + " " + f[2]
		switch f[0] {
		case "-A":
			if tab[vs] == nil {
				tab[vs] = map[string]int{}
			}
		case "-a":
			i := slices.Index(f, "-r")
			j := slices.Index(f, "-w")
			if i < 0 || j < 0 || i+1 >= len(f) || j+1 >= len(f) {
				return nil, fmt.Errorf("ipvsadm -Sn: unexpected line %q", line)
			}
			w, err := strconv.Atoi(f[j+1])
			if err != nil {
				return nil, fmt.Errorf("ipvsadm -Sn: weight in %q: %w", line, err)
			}
			if tab[vs] == nil {
				tab[vs] = map[string]int{}
			}
			tab[vs][f[i+1]] = w
		}
	}
	return tab, nil
}

// Matches reports whether the table has virtual server vs with exactly the real servers
// and weights in want, with a description of the difference.
func (tab IPVSTable) Matches(vs string, want map[string]int) (bool, string) {
	got, ok := tab[vs]
	if !ok {
		return false, "no virtual server " + vs
	}
	if len(got) != len(want) {
		return false, fmt.Sprintf("%s has real servers %v, want %v", vs, got, want)
	}
	for rs, w := range want {
		if gw, ok := got[rs]; !ok || gw != w {
			return false, fmt.Sprintf("%s has real servers %v, want %v", vs, got, want)
		}
	}
	return true, ""
}

// Weights builds a real-server map with weight w for each pod's endpoint.
func Weights(w int, pods ...*Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		out[p.Endpoint().String()] = w
	}
	return out
}

// IPVSHas returns a condition for WaitSynced: every virtual server in want has exactly
// those real servers and weights.
func IPVSHas(want map[string]map[string]int) func() (bool, string) {
	return func() (bool, string) {
		tab, err := ReadIPVS()
		if err != nil {
			return false, err.Error()
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, vs := range keys {
			if ok, why := tab.Matches(vs, want[vs]); !ok {
				return false, why
			}
		}
		return true, ""
	}
}

// Dump is a normalised view of the kernel state kipvs owns.
type Dump struct {
	IPVS      string // ipvsadm -Sn (no counters)
	IPSets    string // ipset save of the KUBE-* sets, members sorted within each set
	IPTables  string // iptables-save lines naming KUBE- chains, counters removed, per table
	IP6Tables string // the same for ip6tables-save
	Dummy     string // kube-ipvs0's flags and addresses, sorted
}

func (d Dump) String() string {
	return "== ipvsadm -Sn\n" + d.IPVS + "== ipset save (KUBE-*)\n" + d.IPSets +
		"== iptables-save (KUBE-*)\n" + d.IPTables + "== ip6tables-save (KUBE-*)\n" + d.IP6Tables +
		"== " + DummyName + "\n" + d.Dummy
}

var counters = regexp.MustCompile(`\s*\[\d+:\d+\]`)

// ReadDump reads the kernel state with the standard tools.
func ReadDump(t testing.TB) Dump {
	t.Helper()
	return Dump{IPVS: DumpIPVS(t), IPSets: DumpSets(t), IPTables: DumpRules(t, "iptables-save"),
		IP6Tables: DumpRules(t, "ip6tables-save"), Dummy: DumpDummy(t)}
}

// DumpIPVS is Dump.IPVS: `ipvsadm -Sn`.
func DumpIPVS(t testing.TB) string {
	t.Helper()
	return MustRun(t, "ipvsadm", "-Sn")
}

// DumpSets is Dump.IPSets: `ipset save` of the KUBE-* sets, each set's members sorted.
func DumpSets(t testing.TB) string {
	t.Helper()
	return dumpSets(t, func(name string) bool { return strings.HasPrefix(name, "KUBE-") })
}

// dumpSets is `ipset save` of the sets keep accepts, each set's members sorted.
func dumpSets(t testing.TB, keep func(name string) bool) string {
	t.Helper()
	sets := map[string][]string{}
	var names []string
	for _, line := range strings.Split(MustRun(t, "ipset", "save"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !keep(f[1]) {
			continue
		}
		if f[0] == "create" {
			names = append(names, f[1])
			sets[f[1]] = append([]string{line}, sets[f[1]]...)
			continue
		}
		sets[f[1]] = append(sets[f[1]], line)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		lines := sets[n]
		slices.Sort(lines[1:])
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// DumpRules is Dump.IPTables (save is "iptables-save") or Dump.IP6Tables
// ("ip6tables-save"): the lines naming KUBE- chains, without counters.
func DumpRules(t testing.TB, save string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(MustRun(t, save), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			b.WriteString(line + "\n")
		case strings.Contains(line, "KUBE-"):
			b.WriteString(counters.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String()
}

// DumpDummy is Dump.Dummy: kube-ipvs0's type, flags and addresses ("" when absent).
func DumpDummy(t testing.TB) string {
	t.Helper()
	if l, err := netlink.LinkByName(DummyName); err == nil {
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatalf("addresses of %s: %v", DummyName, err)
		}
		var as []string
		for _, a := range addrs {
			as = append(as, a.IPNet.String())
		}
		slices.Sort(as)
		return fmt.Sprintf("type %s flags %s\n%s\n", l.Type(), l.Attrs().Flags, strings.Join(as, "\n"))
	}
	return ""
}

// WholeKernel is the node's whole networking state as the standard tools print it, kipvs's
// and everybody else's, for before/after comparisons: every IPVS virtual server (ipvsadm
// -Sn), every ipset (members sorted), every iptables and ip6tables chain and rule, and every
// link with its addresses. Left out of the rules: counters, comment lines, and built-in
// chains with policy ACCEPT and no rule, so a table that iptables-restore instantiated
// empty (it stays once created, with kube-proxy too) is no difference.
func WholeKernel(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("== ipvsadm -Sn\n" + DumpIPVS(t))
	b.WriteString("== ipset save\n" + dumpSets(t, func(string) bool { return true }))
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		b.WriteString("== " + save + "\n" + wholeRules(MustRun(t, save)))
	}
	b.WriteString("== links\n")
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	var ls []string
	for _, l := range links {
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatalf("addresses of %s: %v", l.Attrs().Name, err)
		}
		as := []string{}
		for _, a := range addrs {
			as = append(as, a.IPNet.String())
		}
		slices.Sort(as)
		ls = append(ls, fmt.Sprintf("%s %s %v", l.Attrs().Name, l.Type(), as))
	}
	slices.Sort(ls)
	b.WriteString(strings.Join(ls, "\n") + "\n")
	return b.String()
}

var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// wholeRules normalizes *-save output for WholeKernel.
func wholeRules(save string) string {
	var b strings.Builder
	var table string
	var lines []string
	flush := func() {
		if table != "" && len(lines) > 0 {
			b.WriteString(table + "\n" + strings.Join(lines, "\n") + "\n")
		}
		table, lines = "", nil
	}
	for _, l := range strings.Split(save, "\n") {
		l = strings.TrimSpace(counters.ReplaceAllString(l, ""))
		switch {
		case strings.HasPrefix(l, "*"):
			flush()
			table = l
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l)
			if len(f) >= 2 && builtinChains[f[0][1:]] && f[1] == "ACCEPT" {
				continue
			}
			lines = append(lines, l)
		case strings.HasPrefix(l, "-"):
			lines = append(lines, l)
		}
	}
	flush()
	return b.String()
}

// QuickLeftovers is a cheap Leftovers over netlink (no process starts): IPVS virtual
// servers, KUBE-* sets and kube-ipvs0, but not iptables.
func QuickLeftovers() ([]string, error) {
	var out []string
	tab, err := ReadIPVS()
	if err != nil {
		return nil, err
	}
	for vs := range tab {
		out = append(out, "ipvs: "+vs)
	}
	sets, err := ipset.New(netns.None())
	if err != nil {
		return nil, fmt.Errorf("open ipset: %w", err)
	}
	defer sets.Close()
	names, err := sets.ListNames()
	if err != nil {
		return nil, fmt.Errorf("list ipsets: %w", err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "KUBE-") {
			out = append(out, "ipset: "+n)
		}
	}
	if _, err := netlink.LinkByName(DummyName); err == nil {
		out = append(out, "link: "+DummyName)
	}
	slices.Sort(out)
	return out, nil
}

// KipvsTables lists the nftables filter backend's tables on the node, as `nft list tables`
// prints them ("table ip kipvs", "table ip6 kipvs").
func KipvsTables() ([]string, error) {
	text, err := Run("nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "table" && f[2] == nft.Table {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out, nil
}

// Leftovers lists kernel state kipvs (or kube-proxy) would own that is still on the node:
// IPVS virtual servers, KUBE-* sets, KUBE- iptables and ip6tables chains and rules, the
// nftables backend's kipvs tables, kube-ipvs0.
func Leftovers(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(MustRun(t, "ipvsadm", "-Sn"), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, "ipvs: "+l)
		}
	}
	for _, l := range strings.Split(MustRun(t, "ipset", "list", "-n"), "\n") {
		if strings.HasPrefix(l, "KUBE-") {
			out = append(out, "ipset: "+l)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		for _, l := range strings.Split(MustRun(t, save), "\n") {
			if strings.Contains(l, "KUBE-") {
				out = append(out, strings.TrimSuffix(save, "-save")+": "+l)
			}
		}
	}
	tables, err := KipvsTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tab := range tables {
		out = append(out, "nft: "+tab)
	}
	if _, err := netlink.LinkByName(DummyName); err == nil {
		out = append(out, "link: "+DummyName)
	}
	return out
}
