package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// OracleSysctls are the kernel settings kube-proxy (IPVS mode) or kipvs may set: IPVS's,
// forwarding, strict ARP, and the conntrack ones. The differential test dumps them and
// restores them between the two proxies, so a value one set cannot pass for the other's.
var OracleSysctls = []string{
	"net/ipv4/vs/conntrack",
	"net/ipv4/vs/conn_reuse_mode",
	"net/ipv4/vs/expire_nodest_conn",
	"net/ipv4/vs/expire_quiescent_template",
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/arp_ignore",
	"net/ipv4/conf/all/arp_announce",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/netfilter/nf_conntrack_udp_timeout",
	"net/netfilter/nf_conntrack_udp_timeout_stream",
}

// conntrackHashsize is not a sysctl but kube-proxy sets it with nf_conntrack_max.
const conntrackHashsize = "/sys/module/nf_conntrack/parameters/hashsize"

// Sysctls reads OracleSysctls and the conntrack hash size: path -> value ("absent" when the
// kernel has no such file).
func Sysctls(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range append(sysctlPaths(), conntrackHashsize) {
		b, err := os.ReadFile(p)
		switch {
		case os.IsNotExist(err):
			out[p] = "absent"
		case err != nil:
			t.Fatalf("read %s: %v", p, err)
		default:
			out[p] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// RestoreSysctls writes back values read by Sysctls (those that differ now).
func RestoreSysctls(t testing.TB, want map[string]string) {
	t.Helper()
	now := Sysctls(t)
	for p, v := range want {
		if v == "absent" || now[p] == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatalf("restore %s to %s: %v", p, v, err)
		}
	}
}

func sysctlPaths() []string {
	var out []string
	for _, s := range OracleSysctls {
		out = append(out, filepath.Join("/proc/sys", s))
	}
	return out
}

// OracleDump is the kernel state the differential test compares, by section (the
// sections of e2e/oracle's data file): each a list of normalised lines.
type OracleDump map[string][]string

// OracleSections lists OracleDump's sections in the order they are printed.
var OracleSections = []string{"ipvs", "ipvs-timeouts", "ipset", "iptables", "ip6tables", "dummy", "sysctl"}

// ReadOracleDump reads the state kube-proxy and kipvs program: the IPVS table (ipvsadm -Sn:
// schedulers, flags, persistence, real servers, forwarding methods and weights; sorted),
// the IPVS timeouts, the KUBE-* sets with their members, the iptables and ip6tables lines
// naming KUBE- (chains sorted by table and name, rules in order within a chain), the
// addresses on kube-ipvs0, and the OracleSysctls.
func ReadOracleDump(t testing.TB) OracleDump {
	t.Helper()
	d := OracleDump{}
	ipvs := lines(DumpIPVS(t))
	slices.Sort(ipvs)
	d["ipvs"] = ipvs
	d["ipvs-timeouts"] = lines(MustRun(t, "ipvsadm", "-L", "--timeout"))
	d["ipset"] = lines(initval.ReplaceAllString(DumpSets(t), ""))
	d["iptables"] = ruleLines(DumpRules(t, "iptables-save"))
	d["ip6tables"] = ruleLines(DumpRules(t, "ip6tables-save"))
	d["dummy"] = lines(DumpDummy(t))
	sys := Sysctls(t)
	for _, p := range mapsKeys(sys) {
		d["sysctl"] = append(d["sysctl"], fmt.Sprintf("%s = %s", strings.TrimPrefix(p, "/proc/sys/"), sys[p]))
	}
	return d
}

func mapsKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// String prints the dump by section.
func (d OracleDump) String() string {
	var b strings.Builder
	for _, s := range OracleSections {
		b.WriteString("== " + s + "\n")
		for _, l := range d[s] {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// initval is the random hash seed in a set's create line: it differs on every creation.
var initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " "); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// ruleLines normalises DumpRules output: the order in which chains were created is not
// kernel behaviour that matters (and differs between two programs that create the same
// chains), the order of rules within a chain is. So: per table, the chain declarations
// sorted, then each chain's rules in their order, chains sorted by name; every line
// prefixed with its table. A chain whose rules all end in the same verdict (DROP, ACCEPT,
// RETURN) is sorted too: its order changes nothing, and kube-proxy writes such chains
// (KUBE-IPVS-OUT-FILTER) in Go map order, a different one on each sync.
func ruleLines(save string) []string {
	type table struct {
		decls []string
		rules map[string][]string
	}
	tables := map[string]*table{}
	var names []string
	var cur *table
	var curName string
	for _, l := range lines(save) {
		switch {
		case strings.HasPrefix(l, "*"):
			curName = l[1:]
			if tables[curName] == nil {
				tables[curName] = &table{rules: map[string][]string{}}
				names = append(names, curName)
			}
			cur = tables[curName]
		case cur == nil:
		case strings.HasPrefix(l, ":"):
			cur.decls = append(cur.decls, curName+" "+l)
		default:
			chain := ""
			if f := strings.Fields(l); len(f) >= 2 && (f[0] == "-A" || f[0] == "-I") {
				chain = f[1]
			}
			cur.rules[chain] = append(cur.rules[chain], curName+" "+l)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		tb := tables[n]
		slices.Sort(tb.decls)
		out = append(out, tb.decls...)
		chains := make([]string, 0, len(tb.rules))
		for c := range tb.rules {
			chains = append(chains, c)
		}
		slices.Sort(chains)
		for _, c := range chains {
			rules := tb.rules[c]
			if sameVerdict(rules) {
				rules = slices.Clone(rules)
				slices.Sort(rules)
			}
			out = append(out, rules...)
		}
	}
	return out
}

// sameVerdict reports whether every rule (more than one) ends in the same -j DROP, ACCEPT
// or RETURN and matches nothing else that depends on order.
func sameVerdict(rules []string) bool {
	if len(rules) < 2 {
		return false
	}
	var verdict string
	for _, r := range rules {
		i := strings.LastIndex(r, " -j ")
		if i < 0 {
			return false
		}
		v := r[i+4:]
		switch v {
		case "DROP", "ACCEPT", "RETURN":
		default:
			return false
		}
		if verdict != "" && v != verdict {
			return false
		}
		verdict = v
	}
	return true
}

// LineDiff compares two sequences line by line (longest common subsequence, so a rule that
// moved within its chain counts as removed and added) and returns the lines only in a and
// the lines only in b.
func LineDiff(a, b []string) (onlyA, onlyB []string) {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			onlyA = append(onlyA, a[i])
			i++
		default:
			onlyB = append(onlyB, b[j])
			j++
		}
	}
	onlyA = append(onlyA, a[i:]...)
	onlyB = append(onlyB, b[j:]...)
	return onlyA, onlyB
}

// SectionDiff returns, per section, the lines only in d and only in o (LineDiff).
func (d OracleDump) SectionDiff(o OracleDump) (onlyD, onlyO map[string][]string) {
	onlyD, onlyO = map[string][]string{}, map[string][]string{}
	for _, s := range OracleSections {
		x, y := LineDiff(d[s], o[s])
		if len(x) > 0 {
			onlyD[s] = x
		}
		if len(y) > 0 {
			onlyO[s] = y
		}
	}
	return onlyD, onlyO
}

// Diff renders d's difference from base by section ("-" lines only in base, "+" only in
// d); "" when they are equal.
func (d OracleDump) Diff(base OracleDump) string {
	onlyBase, onlyD := base.SectionDiff(d)
	var out strings.Builder
	for _, s := range OracleSections {
		if len(onlyBase[s]) == 0 && len(onlyD[s]) == 0 {
			continue
		}
		out.WriteString("== " + s + "\n")
		for _, l := range onlyBase[s] {
			out.WriteString("- " + l + "\n")
		}
		for _, l := range onlyD[s] {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}
