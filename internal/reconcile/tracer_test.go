package reconcile

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/netfilter"
)

// The tracer follows one new connection's first packet through the fake kernel state the
// reconciler programmed: the nat and filter chains kipvs owns (interpreted rule by rule,
// with set lookups against the fake ipsets), then IPVS scheduling, then POSTROUTING. It
// answers the questions an operator asks of a node: which backends can this packet reach,
// and is it masqueraded on the way?

type origin int

const (
	fromExternal origin = iota // arrives on a node interface from another host
	fromPod                    // arrives from a local pod (not bridged)
	fromNode                   // a process on the node itself
)

type packet struct {
	from  origin
	src   netip.Addr
	dst   netip.AddrPort
	proto string // tcp, udp, sctp
	iface string // input interface, for the interface-based detectors
}

type trace struct {
	verdict    string // "ipvs", "local" (no virtual server: the node's own stack), "drop", "reject"
	backends   []netip.AddrPort
	masquerade bool
	persistent bool
}

func (t trace) String() string {
	s := t.verdict
	if len(t.backends) > 0 {
		var b []string
		for _, a := range t.backends {
			b = append(b, a.String())
		}
		s += " [" + strings.Join(b, " ") + "]"
	}
	if t.masquerade {
		s += " masq"
	}
	if t.persistent {
		s += " persistent"
	}
	return s
}

type tracer struct {
	t      testing.TB
	rules  netfilter.Ruleset
	sets   ipset.Interface
	vs     []ipvs.Entry
	local  map[netip.Addr]bool
	mark   uint32
	vsSeen *ipvs.Entry
	// masqueraded is set when POSTROUTING reaches a MASQUERADE target.
	masqueraded bool
}

func newTracer(e *env) *tracer {
	e.t.Helper()
	rs, err := e.nf.Observe(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	table, err := e.ipvs.Table()
	if err != nil {
		e.t.Fatal(err)
	}
	local := map[netip.Addr]bool{}
	for _, a := range e.opts.NodePortAddresses {
		local[a] = true
	}
	addrs, _ := e.dummy.Addresses()
	for _, p := range addrs {
		local[p.Addr()] = true
	}
	return &tracer{t: e.t, rules: rs, sets: e.ipset, vs: table, local: local}
}

func (tr *tracer) trace(p packet) trace {
	tr.mark = 0
	tr.vsSeen = nil
	for _, e := range tr.vs {
		k := e.Service.ServiceKey
		if k.Addr == p.dst.Addr() && k.Port == p.dst.Port() && strings.EqualFold(k.Protocol.String(), p.proto) {
			tr.vsSeen = &e
		}
	}
	// nat PREROUTING or OUTPUT.
	hook := "PREROUTING"
	if p.from == fromNode {
		hook = "OUTPUT"
	}
	tr.runBuiltin("nat", hook, p, p.src)
	// filter INPUT (local destination) or OUTPUT; IPVS hooks after filter INPUT.
	var v string
	if p.from == fromNode {
		v = tr.runBuiltin("filter", "OUTPUT", p, p.src)
	} else if tr.local[p.dst.Addr()] {
		v = tr.runBuiltin("filter", "INPUT", p, p.src)
	} else {
		v = tr.runBuiltin("filter", "FORWARD", p, p.src)
	}
	if v == "DROP" || v == "REJECT" {
		return trace{verdict: strings.ToLower(v)}
	}
	if tr.vsSeen == nil || !tr.local[p.dst.Addr()] {
		return trace{verdict: "local"}
	}
	out := trace{verdict: "ipvs", persistent: tr.vsSeen.Service.Flags&ipvs.FlagPersistent != 0}
	for _, d := range tr.vsSeen.Destinations {
		if d.Weight > 0 {
			out.backends = append(out.backends, d.AddrPort())
		}
	}
	if len(out.backends) == 0 {
		return trace{verdict: "local"}
	}
	// POSTROUTING sees the packet after IPVS's DNAT; hairpin is checked against the first
	// backend (the set lookup is per backend; all backends behave alike for masquerading
	// unless one is the client itself).
	post := p
	post.dst = out.backends[0]
	for _, b := range out.backends {
		if b.Addr() == p.src {
			post.dst = b
		}
	}
	tr.runBuiltin("nat", "POSTROUTING", post, p.src)
	out.masquerade = tr.masqueraded
	return out
}

// runBuiltin evaluates the jumps kipvs placed in a built-in chain, in order, and returns a
// terminal verdict ("" when every chain returned).
func (tr *tracer) runBuiltin(table, chain string, p packet, origSrc netip.Addr) string {
	tr.masqueraded = false
	for _, j := range tr.rules[netfilter.Table(table)].Jumps {
		if j.Chain != chain {
			continue
		}
		if v := tr.rule(table, j.Rule, p, origSrc, 0); v != "" && v != "RETURN" {
			return v
		}
	}
	return ""
}

func (tr *tracer) chain(table, name string, p packet, origSrc netip.Addr, depth int) string {
	if depth > 10 {
		tr.t.Fatalf("chain loop at %s", name)
	}
	for _, c := range tr.rules[netfilter.Table(table)].Chains {
		if c.Name != name {
			continue
		}
		for _, r := range c.Rules {
			if v := tr.rule(table, r, p, origSrc, depth+1); v != "" {
				if v == "RETURN" {
					return ""
				}
				return v
			}
		}
		return ""
	}
	tr.t.Fatalf("jump to missing chain %s/%s", table, name)
	return ""
}

// rule evaluates one rule; it returns "" when the rule does not match or its target falls
// through, else the verdict.
func (tr *tracer) rule(table, rule string, p packet, origSrc netip.Addr, depth int) string {
	toks := splitRule(tr.t, rule)
	neg := false
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		arg := func() string {
			i++
			if i >= len(toks) {
				tr.t.Fatalf("rule %q: %s needs an argument", rule, tok)
			}
			return toks[i]
		}
		ok := true
		switch tok {
		case "!":
			neg = true
			continue
		case "-s":
			ok = prefix(tr.t, arg()).Contains(p.src)
		case "-d":
			ok = prefix(tr.t, arg()).Contains(p.dst.Addr())
		case "-i":
			name := arg()
			ok = p.iface == name || (strings.HasSuffix(name, "+") && strings.HasPrefix(p.iface, strings.TrimSuffix(name, "+")))
		case "-p":
			ok = arg() == p.proto
		case "-m":
			arg()
			continue
		case "--comment":
			arg()
			continue
		case "--match-set":
			name, flags := arg(), arg()
			ok = tr.inSet(name, flags, p, origSrc)
		case "--dst-type":
			arg()
			ok = tr.local[p.dst.Addr()]
		case "--src-type":
			arg()
			ok = p.from == fromNode
		case "--physdev-is-in":
			ok = false // no bridge in these traces
		case "--mark":
			v, m := mask(tr.t, arg())
			ok = tr.mark&m == v
		case "--ctstate":
			ok = strings.Contains(arg(), "NEW")
		case "--vaddr":
			ok = tr.vsSeen != nil && prefix(tr.t, arg()).Contains(tr.vsSeen.Service.Addr)
		case "--vproto":
			ok = tr.vsSeen != nil && arg() == strconv.Itoa(int(tr.vsSeen.Service.Protocol))
		case "--vport":
			ok = tr.vsSeen != nil && arg() == strconv.Itoa(int(tr.vsSeen.Service.Port))
		case "-j":
			return tr.target(table, toks[i+1:], p, origSrc, depth)
		default:
			tr.t.Fatalf("tracer does not understand %q in rule %q", tok, rule)
		}
		if ok == neg {
			return ""
		}
		neg = false
	}
	return ""
}

func (tr *tracer) target(table string, args []string, p packet, origSrc netip.Addr, depth int) string {
	switch args[0] {
	case "ACCEPT", "DROP", "RETURN":
		return args[0]
	case "REJECT":
		return "REJECT"
	case "MASQUERADE":
		tr.masqueraded = true
		return "ACCEPT"
	case "MARK":
		if len(args) != 3 || args[1] != "--set-xmark" {
			tr.t.Fatalf("MARK %v", args)
		}
		v, m := mask(tr.t, args[2])
		tr.mark = (tr.mark &^ m) ^ v
		return ""
	}
	return tr.chain(table, args[0], p, origSrc, depth)
}

// inSet tests the packet against a set the way xt_set does for the given direction flags.
func (tr *tracer) inSet(name, flags string, p packet, origSrc netip.Addr) bool {
	info, err := tr.sets.List(name)
	if err != nil {
		tr.t.Fatalf("set %s: %v", name, err)
	}
	proto := map[string]inet.Protocol{"tcp": inet.TCP, "udp": inet.UDP, "sctp": inet.SCTP}[p.proto]
	addr := func(dir string) netip.Addr {
		if dir == "src" {
			return p.src
		}
		return p.dst.Addr()
	}
	port := func(dir string) uint16 {
		if dir == "src" {
			tr.t.Fatalf("source ports are not used by kipvs's rules")
		}
		return p.dst.Port()
	}
	dirs := strings.Split(flags, ",")
	var e ipset.Entry
	switch info.Type {
	case ipset.HashIP:
		e = ipset.Entry{IP: addr(dirs[0])}
	case ipset.BitmapPort:
		e = ipset.Entry{Port: port(dirs[0])}
	case ipset.HashIPPort:
		e = ipset.Entry{IP: addr(dirs[0]), Protocol: proto, Port: port(dirs[1])}
	case ipset.HashIPPortIP:
		e = ipset.Entry{IP: addr(dirs[0]), Protocol: proto, Port: port(dirs[1]), IP2: addr(dirs[2])}
	case ipset.HashIPPortNet:
		a := addr(dirs[2])
		e = ipset.Entry{IP: addr(dirs[0]), Protocol: proto, Port: port(dirs[1]), Net: netip.PrefixFrom(a, a.BitLen())}
	default:
		tr.t.Fatalf("set type %s", info.Type)
	}
	ok, err := tr.sets.Test(name, e)
	if err != nil {
		tr.t.Fatalf("test %s %v: %v", name, e, err)
	}
	return ok
}

func splitRule(t testing.TB, r string) []string {
	var out []string
	for r = strings.TrimSpace(r); r != ""; r = strings.TrimSpace(r) {
		if r[0] == '"' {
			end := strings.Index(r[1:], `"`)
			if end < 0 {
				t.Fatalf("unbalanced quote in %q", r)
			}
			out = append(out, r[1:end+1])
			r = r[end+2:]
			continue
		}
		f, rest, _ := strings.Cut(r, " ")
		out = append(out, f)
		r = rest
	}
	return out
}

func prefix(t testing.TB, s string) netip.Prefix {
	if !strings.Contains(s, "/") {
		a := netip.MustParseAddr(s)
		return netip.PrefixFrom(a, a.BitLen())
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mask(t testing.TB, s string) (uint32, uint32) {
	v, m, ok := strings.Cut(s, "/")
	if !ok {
		m = "0xffffffff"
	}
	vv, err1 := strconv.ParseUint(v, 0, 32)
	mm, err2 := strconv.ParseUint(m, 0, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("mark %q", s)
	}
	return uint32(vv), uint32(mm)
}

func (p packet) String() string {
	from := [...]string{"external", "pod", "node"}[p.from]
	return fmt.Sprintf("%s %s %s -> %s", from, p.proto, p.src, p.dst)
}
