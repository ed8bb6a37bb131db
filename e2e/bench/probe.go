package bench

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// VIP is a Service's address, protocol ("tcp", "udp") and port as a proxy programs it.
type VIP struct {
	Addr  netip.Addr
	Proto string
	Port  uint16
}

func (v VIP) String() string {
	return v.Proto + " " + netip.AddrPortFrom(v.Addr, v.Port).String()
}

// Programmed is what a rule-based proxy programmed for its cluster IPs: each VIP's
// endpoints (the DNAT destinations its rules choose from), and the name of the chain that
// chooses (kube-proxy's nftables service-* chain, its iptables KUBE-SVC-* chain), which a
// later read of one Service lists alone.
type Programmed struct {
	Endpoints map[VIP]map[netip.AddrPort]bool
	Chains    map[VIP]string
}

// NFTTable is the table kube-proxy's nftables mode programs (family ip for IPv4).
const NFTTable = "kube-proxy"

// nftServiceIPs is the map from cluster IP, protocol and port to the Service's chain.
const nftServiceIPs = "service-ips"

// IPTablesTable is the table kube-proxy's iptables mode programs its Services in: with
// iptables-nft, the nf_tables table nat of family ip.
const IPTablesTable = "nat"

// iptServices is the iptables chain whose rules send a cluster IP, protocol and port to
// the Service's KUBE-SVC-* chain.
const iptServices = "KUBE-SERVICES"

// RuleReader reads what kube-proxy's nftables or iptables mode (iptables-nft) programmed
// for its cluster IPs, over nf_tables netlink requests that the kernel answers for one
// chain or one map alone:
//
//   - nftables mode: the elements of the service-ips map (address . protocol . port :
//     goto CHAIN), each Service chain's rules, the anonymous verdict maps they look up
//     (`numgen random mod N vmap { I : goto endpoint-... }`) and their direct jump and goto
//     verdicts (session affinity), to endpoint-* chains, and each endpoint chain's dnat
//     (addresses and ports kept in registers by immediates, read by the nat expression);
//   - iptables mode: the rules of KUBE-SERVICES that match an address, protocol and port
//     (payload and meta loads compared for equality) and jump to a KUBE-SVC-* chain, those
//     chains' jumps to KUBE-SEP-* chains, and each KUBE-SEP-* chain's DNAT target (the xt
//     target's nf_nat_range).
//
// A Service whose chain leads to no endpoint chain has no endpoints; an endpoint chain
// without a DNAT is an error. A read of several requests (Programmed, Endpoints) reads
// one generation of the ruleset: it is made again while a commit comes between them.
type RuleReader struct {
	src  nftSource
	mode string // "nftables" or "iptables"
	// dnat holds the destination of each endpoint chain Endpoints read: kube-proxy names
	// an endpoint chain after its Service port and endpoint and writes it with its DNAT in
	// the transaction that first jumps to it, so a name's destination does not change.
	dnat map[string]netip.AddrPort
}

// newRuleReader reads kube-proxy's mode ("nftables" or "iptables") from src.
func newRuleReader(src nftSource, mode string) (*RuleReader, error) {
	if mode != "nftables" && mode != "iptables" {
		return nil, fmt.Errorf("bench: no rule reader for mode %q", mode)
	}
	return &RuleReader{src: src, mode: mode, dnat: map[string]netip.AddrPort{}}, nil
}

func (r *RuleReader) table() string {
	if r.mode == "nftables" {
		return NFTTable
	}
	return IPTablesTable
}

// isEndpointChain says whether a chain is one of kube-proxy's per-endpoint chains.
func (r *RuleReader) isEndpointChain(chain string) bool {
	if r.mode == "nftables" {
		return strings.HasPrefix(chain, "endpoint-")
	}
	return strings.HasPrefix(chain, "KUBE-SEP-")
}

func (r *RuleReader) rules(chain string) ([]nftRule, error) {
	msgs, err := r.src.rules(r.table(), chain)
	if err != nil {
		return nil, err
	}
	return decodeRules(msgs)
}

// VIPs reads which cluster IPs, protocols and ports lead to a Service chain, and the
// chain: the service-ips map's elements, the KUBE-SERVICES chain's rules (N elements or
// rules, not the N x E endpoints).
func (r *RuleReader) VIPs() (map[VIP]string, error) {
	if r.mode == "iptables" {
		rules, err := r.rules(iptServices)
		if err != nil {
			return nil, err
		}
		return iptVIPs(rules)
	}
	msgs, err := r.src.elems(NFTTable, nftServiceIPs)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return map[VIP]string{}, nil // no table (yet)
		}
		return nil, err
	}
	elems, err := decodeElems(msgs)
	if err != nil {
		return nil, err
	}
	out := map[VIP]string{}
	for _, e := range elems {
		vip, err := serviceIPsKey(e.key)
		if err != nil {
			return nil, err
		}
		if e.chain == "" {
			return nil, fmt.Errorf("bench: %s element %s: no goto", nftServiceIPs, vip)
		}
		out[vip] = e.chain
	}
	return out, nil
}

// iptVIPs is the VIP and KUBE-SVC-* chain of each KUBE-SERVICES rule jumping to one.
func iptVIPs(rules []nftRule) (map[VIP]string, error) {
	out := map[VIP]string{}
	for _, rl := range rules {
		if rl.chain != iptServices {
			continue
		}
		for _, c := range rl.verdicts {
			if !strings.HasPrefix(c, "KUBE-SVC-") {
				continue
			}
			if !rl.dst.Addr.IsValid() || rl.dst.Proto == "" || rl.dst.Port == 0 {
				return nil, fmt.Errorf("bench: iptables: %s -> %s: matches %s, want a destination address, protocol and port", iptServices, c, rl.dst)
			}
			out[rl.dst] = c
		}
	}
	return out, nil
}

// targets reads the endpoint chains a Service chain's rules jump or go to: directly, or
// through a verdict map.
func (r *RuleReader) targets(rules []nftRule) ([]string, error) {
	var out []string
	for _, rl := range rules {
		for _, c := range rl.verdicts {
			if r.isEndpointChain(c) {
				out = append(out, c)
			}
		}
		for _, m := range rl.vmaps {
			msgs, err := r.src.elems(r.table(), m)
			if err != nil {
				return nil, err
			}
			elems, err := decodeElems(msgs)
			if err != nil {
				return nil, err
			}
			for _, e := range elems {
				if r.isEndpointChain(e.chain) {
					out = append(out, e.chain)
				}
			}
		}
	}
	return out, nil
}

// readTries is how many times a RuleReader makes a read of several requests while a
// commit comes between them.
const readTries = 5

// consistent makes read, which makes several requests, between two reads of the
// ruleset's generation, and makes it again while they differ: a commit came between the
// requests, and what they read may mix the rulesets before and after it (kube-proxy
// replaces a Service chain's rules and its verdict map in one commit, and flushes the
// endpoint chains no longer used: a read of the old map can find them empty, or gone).
func (r *RuleReader) consistent(read func() error) error {
	var err error
	for range readTries {
		g0, gerr := r.gen()
		if gerr != nil {
			return gerr
		}
		err = read()
		g1, gerr := r.gen()
		if gerr != nil {
			return gerr
		}
		if g0 == g1 {
			return err
		}
	}
	return fmt.Errorf("bench: %s: the ruleset changed during each of %d reads (the last: %v)", r.mode, readTries, err)
}

func (r *RuleReader) gen() (uint32, error) {
	msgs, err := r.src.gen()
	if err != nil {
		return 0, err
	}
	return decodeGen(msgs)
}

// Programmed reads the whole table once: every rule, and the VIPs (KUBE-SERVICES among
// the rules, or the service-ips map) and each Service chain's verdict maps, all of one
// generation of the ruleset. A table not there (yet) is an empty program.
func (r *RuleReader) Programmed() (p Programmed, err error) {
	err = r.consistent(func() error {
		p, err = r.programmed()
		return err
	})
	return p, err
}

func (r *RuleReader) programmed() (Programmed, error) {
	rules, err := r.rules("")
	if err != nil {
		return Programmed{}, err
	}
	var vips map[VIP]string
	if r.mode == "iptables" {
		vips, err = iptVIPs(rules)
	} else {
		vips, err = r.VIPs()
	}
	if err != nil {
		return Programmed{}, err
	}
	byChain := map[string][]nftRule{}
	dnat := map[string]netip.AddrPort{}
	for _, rl := range rules {
		byChain[rl.chain] = append(byChain[rl.chain], rl)
		if rl.dnat.IsValid() {
			dnat[rl.chain] = rl.dnat
		}
	}
	p := Programmed{Endpoints: map[VIP]map[netip.AddrPort]bool{}, Chains: map[VIP]string{}}
	for vip, chain := range vips {
		ts, err := r.targets(byChain[chain])
		if err != nil {
			return Programmed{}, err
		}
		eps := map[netip.AddrPort]bool{}
		for _, t := range ts {
			ap, ok := dnat[t]
			if !ok {
				return Programmed{}, fmt.Errorf("bench: %s: %s jumps to %s, which has no DNAT", r.mode, chain, t)
			}
			eps[ap] = true
		}
		p.Chains[vip] = chain
		p.Endpoints[vip] = eps
	}
	return p, nil
}

// Endpoints reads one Service chain's endpoints, all of one generation of the ruleset:
// its rules, its verdict map, and the rules of the endpoint chains it leads to that no
// earlier read did. ok is false when the chain has no rules (it is not there, or
// kube-proxy flushed it).
func (r *RuleReader) Endpoints(chain string) (eps map[netip.AddrPort]bool, ok bool, err error) {
	err = r.consistent(func() error {
		eps, ok, err = r.endpoints(chain)
		return err
	})
	return eps, ok, err
}

func (r *RuleReader) endpoints(chain string) (map[netip.AddrPort]bool, bool, error) {
	rules, err := r.rules(chain)
	if err != nil || len(rules) == 0 {
		return nil, false, err
	}
	ts, err := r.targets(rules)
	if err != nil {
		return nil, false, err
	}
	eps := map[netip.AddrPort]bool{}
	for _, t := range ts {
		ap, ok := r.dnat[t]
		if !ok {
			trs, err := r.rules(t)
			if err != nil {
				return nil, false, err
			}
			for _, rl := range trs {
				if rl.dnat.IsValid() {
					ap, ok = rl.dnat, true
				}
			}
			if !ok {
				return nil, false, fmt.Errorf("bench: %s: %s jumps to %s, which has no DNAT", r.mode, chain, t)
			}
			r.dnat[t] = ap
		}
		eps[ap] = true
	}
	return eps, true, nil
}

// pollCost adds up a probe's polls: how many, how many Services they read, and how long
// they took (the probe's own cost, which a change's latency measured from outside
// includes up to once).
type pollCost struct {
	polls, services int
	total, max      time.Duration
}

func (c *pollCost) add(d time.Duration, services int) {
	c.polls++
	c.services += services
	c.total += d
	c.max = max(c.max, d)
}

func (c pollCost) String() string {
	if c.polls == 0 {
		return "no polls"
	}
	n := time.Duration(c.polls)
	return fmt.Sprintf("%d polls of %.1f Services on average, %s per poll on average, %s at most",
		c.polls, float64(c.services)/float64(c.polls), (c.total / n).Round(time.Microsecond), c.max.Round(time.Microsecond))
}
