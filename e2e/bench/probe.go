package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
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

// nftEndpointPrefix starts the name of kube-proxy's per-endpoint chains.
const nftEndpointPrefix = "endpoint-"

// ParseNFT reads `nft -j list table ip kube-proxy`: the service-ips map's elements, the
// chains they jump to, the endpoint chains those jump to (by a numgen vmap, or an affinity
// rule) and each endpoint chain's dnat destination. A Service whose chain leads to no
// endpoint chain has no endpoints; an endpoint chain without a dnat is an error.
func ParseNFT(b []byte) (Programmed, error) {
	objs, err := nftObjects(b)
	if err != nil {
		return Programmed{}, err
	}
	p := Programmed{Endpoints: map[VIP]map[netip.AddrPort]bool{}, Chains: map[VIP]string{}}
	targets := map[string][]string{}    // chain -> the endpoint chains its rules jump to
	dnat := map[string]netip.AddrPort{} // endpoint chain -> its destination
	for _, o := range objs {
		if m, ok := o["map"].(map[string]any); ok && m["name"] == nftServiceIPs && m["table"] == NFTTable {
			elems, _ := m["elem"].([]any)
			for _, e := range elems {
				vip, chain, err := nftServiceElem(e)
				if err != nil {
					return Programmed{}, err
				}
				p.Chains[vip] = chain
			}
			continue
		}
		r, ok := o["rule"].(map[string]any)
		if !ok || r["table"] != NFTTable {
			continue
		}
		chain, _ := r["chain"].(string)
		walkJSON(r["expr"], func(m map[string]any) {
			for _, verdict := range []string{"goto", "jump"} {
				if v, ok := m[verdict].(map[string]any); ok {
					if t, _ := v["target"].(string); strings.HasPrefix(t, nftEndpointPrefix) {
						targets[chain] = append(targets[chain], t)
					}
				}
			}
			if d, ok := m["dnat"].(map[string]any); ok {
				if ap, err := nftDNAT(d); err == nil {
					dnat[chain] = ap
				}
			}
		})
	}
	for vip, chain := range p.Chains {
		eps := map[netip.AddrPort]bool{}
		for _, t := range targets[chain] {
			ap, ok := dnat[t]
			if !ok {
				return Programmed{}, fmt.Errorf("bench: nft: %s jumps to %s, which has no dnat", chain, t)
			}
			eps[ap] = true
		}
		p.Endpoints[vip] = eps
	}
	return p, nil
}

// ParseNFTChain reads `nft -j list chain ip kube-proxy CHAIN` of a Service's chain: the
// endpoints it chooses from, by the names of the endpoint chains it jumps to
// ("endpoint-HASH-NS/NAME/PROTO/PORT__ADDR/PORT"; kube-proxy creates an endpoint chain with
// its dnat in the transaction that first jumps to it).
func ParseNFTChain(b []byte) (map[netip.AddrPort]bool, error) {
	objs, err := nftObjects(b)
	if err != nil {
		return nil, err
	}
	out := map[netip.AddrPort]bool{}
	var bad error
	for _, o := range objs {
		r, ok := o["rule"].(map[string]any)
		if !ok {
			continue
		}
		walkJSON(r["expr"], func(m map[string]any) {
			for _, verdict := range []string{"goto", "jump"} {
				v, ok := m[verdict].(map[string]any)
				if !ok {
					continue
				}
				t, _ := v["target"].(string)
				if !strings.HasPrefix(t, nftEndpointPrefix) {
					continue
				}
				ap, err := endpointChainAddr(t)
				if err != nil {
					bad = err
					continue
				}
				out[ap] = true
			}
		})
	}
	return out, bad
}

// endpointChainAddr is the endpoint address at the end of an endpoint chain's name.
func endpointChainAddr(chain string) (netip.AddrPort, error) {
	i := strings.LastIndex(chain, "__")
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("bench: nft: endpoint chain %q: no __ADDR/PORT", chain)
	}
	a, port, ok := strings.Cut(chain[i+2:], "/")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bench: nft: endpoint chain %q: no /PORT", chain)
	}
	return parseAddrPort(a, port)
}

func parseAddrPort(a, port string) (netip.AddrPort, error) {
	addr, err := netip.ParseAddr(strings.Trim(a, "[]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bench: address %q: %w", a, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bench: port %q: %w", port, err)
	}
	return netip.AddrPortFrom(addr, uint16(n)), nil
}

// nftObjects decodes nft's JSON output into its list of objects.
func nftObjects(b []byte) ([]map[string]any, error) {
	var doc struct {
		Nftables []map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("bench: nft -j output: %w", err)
	}
	return doc.Nftables, nil
}

// nftServiceElem reads one service-ips element: [KEY, {"goto": {"target": CHAIN}}], where
// KEY is {"concat": [ADDR, PROTO, PORT]}, wrapped in {"elem": {"val": ..., "comment": ...}}
// when the element has a comment.
func nftServiceElem(e any) (VIP, string, error) {
	pair, ok := e.([]any)
	if !ok || len(pair) != 2 {
		return VIP{}, "", fmt.Errorf("bench: nft: %s element %v: want [key, verdict]", nftServiceIPs, e)
	}
	key := pair[0]
	if w, ok := key.(map[string]any)["elem"].(map[string]any); ok {
		key = w["val"]
	}
	km, _ := key.(map[string]any)
	parts, _ := km["concat"].([]any)
	if len(parts) != 3 {
		return VIP{}, "", fmt.Errorf("bench: nft: %s key %v: want address . protocol . port", nftServiceIPs, pair[0])
	}
	a, _ := parts[0].(string)
	proto, _ := parts[1].(string)
	port, ok := parts[2].(float64)
	addr, err := netip.ParseAddr(a)
	if err != nil || proto == "" || !ok {
		return VIP{}, "", fmt.Errorf("bench: nft: %s key %v: want address . protocol . port", nftServiceIPs, pair[0])
	}
	var chain string
	walkJSON(pair[1], func(m map[string]any) {
		for _, verdict := range []string{"goto", "jump"} {
			if v, ok := m[verdict].(map[string]any); ok {
				chain, _ = v["target"].(string)
			}
		}
	})
	if chain == "" {
		return VIP{}, "", fmt.Errorf("bench: nft: %s element %v: no goto", nftServiceIPs, e)
	}
	return VIP{Addr: addr, Proto: proto, Port: uint16(port)}, chain, nil
}

// nftDNAT reads {"addr": ADDR, "port": PORT} of a dnat statement.
func nftDNAT(d map[string]any) (netip.AddrPort, error) {
	a, _ := d["addr"].(string)
	port, _ := d["port"].(float64)
	return parseAddrPort(a, strconv.Itoa(int(port)))
}

// walkJSON calls f on every object in v, outermost first.
func walkJSON(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, c := range x {
			walkJSON(c, f)
		}
	case []any:
		for _, c := range x {
			walkJSON(c, f)
		}
	}
}

// ParseIPTablesSave reads `iptables-save -t nat` as kube-proxy's iptables mode writes it:
// the KUBE-SERVICES rules that send a cluster IP, protocol and port to a KUBE-SVC-* chain,
// the KUBE-SEP-* chains those jump to, and each KUBE-SEP-* chain's DNAT destination.
func ParseIPTablesSave(save string) (Programmed, error) {
	p := Programmed{Endpoints: map[VIP]map[netip.AddrPort]bool{}, Chains: map[VIP]string{}}
	seps := map[string][]string{}
	dnat := map[string]netip.AddrPort{}
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r, ok, err := parseRule(sc.Text())
		if err != nil {
			return Programmed{}, err
		}
		if !ok {
			continue
		}
		switch {
		case r.chain == "KUBE-SERVICES" && strings.HasPrefix(r.jump, "KUBE-SVC-"):
			vip, err := r.vip()
			if err != nil {
				return Programmed{}, err
			}
			p.Chains[vip] = r.jump
		case strings.HasPrefix(r.chain, "KUBE-SVC-") && strings.HasPrefix(r.jump, "KUBE-SEP-"):
			seps[r.chain] = append(seps[r.chain], r.jump)
		case strings.HasPrefix(r.chain, "KUBE-SEP-") && r.jump == "DNAT":
			a, port, ok := strings.Cut(r.opts["--to-destination"], ":")
			if !ok {
				return Programmed{}, fmt.Errorf("bench: iptables: %s: DNAT without ADDR:PORT", r.chain)
			}
			ap, err := parseAddrPort(a, port)
			if err != nil {
				return Programmed{}, fmt.Errorf("bench: iptables: %s: %w", r.chain, err)
			}
			dnat[r.chain] = ap
		}
	}
	if err := sc.Err(); err != nil {
		return Programmed{}, fmt.Errorf("bench: iptables-save output: %w", err)
	}
	for vip, chain := range p.Chains {
		eps := map[netip.AddrPort]bool{}
		for _, s := range seps[chain] {
			ap, ok := dnat[s]
			if !ok {
				return Programmed{}, fmt.Errorf("bench: iptables: %s jumps to %s, which has no DNAT", chain, s)
			}
			eps[ap] = true
		}
		p.Endpoints[vip] = eps
	}
	return p, nil
}

// ParseIPTablesChain reads `iptables -t nat -S KUBE-SVC-...`: the endpoints its rules jump
// to, by their comments ("NS/NAME:PORT -> ADDR:PORT", kube-proxy's comment on each jump to
// a KUBE-SEP-* chain, which it writes in the same restore as the chain's DNAT).
func ParseIPTablesChain(rules string) (map[netip.AddrPort]bool, error) {
	out := map[netip.AddrPort]bool{}
	for line := range strings.Lines(rules) {
		r, ok, err := parseRule(line)
		if err != nil {
			return nil, err
		}
		if !ok || !strings.HasPrefix(r.jump, "KUBE-SEP-") {
			continue
		}
		_, dst, ok := strings.Cut(r.opts["--comment"], " -> ")
		if !ok {
			return nil, fmt.Errorf("bench: iptables: %s: jump to %s without an endpoint comment", r.chain, r.jump)
		}
		i := strings.LastIndex(dst, ":")
		if i < 0 {
			return nil, fmt.Errorf("bench: iptables: %s: comment %q: no ADDR:PORT", r.chain, r.opts["--comment"])
		}
		ap, err := parseAddrPort(dst[:i], dst[i+1:])
		if err != nil {
			return nil, err
		}
		out[ap] = true
	}
	return out, nil
}

// rule is one "-A CHAIN ..." line of iptables-save or iptables -S.
type rule struct {
	chain, jump string
	opts        map[string]string // option -> its value (the last one given)
}

func (r rule) vip() (VIP, error) {
	a, _, _ := strings.Cut(r.opts["-d"], "/")
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return VIP{}, fmt.Errorf("bench: iptables: %s -> %s: destination %q: %w", r.chain, r.jump, r.opts["-d"], err)
	}
	port, err := strconv.ParseUint(r.opts["--dport"], 10, 16)
	if err != nil || r.opts["-p"] == "" {
		return VIP{}, fmt.Errorf("bench: iptables: %s -> %s: protocol %q port %q", r.chain, r.jump, r.opts["-p"], r.opts["--dport"])
	}
	return VIP{Addr: addr, Proto: r.opts["-p"], Port: uint16(port)}, nil
}

// parseRule parses an "-A" line (ok false for any other line).
func parseRule(line string) (rule, bool, error) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "-A ") {
		return rule{}, false, nil
	}
	words, err := splitQuoted(line)
	if err != nil {
		return rule{}, false, err
	}
	r := rule{chain: words[1], opts: map[string]string{}}
	for i := 2; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			continue
		}
		v := ""
		if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			v = words[i+1]
			i++
		}
		if w == "-j" {
			r.jump = v
		}
		r.opts[w] = v
	}
	return r, true, nil
}

// splitQuoted splits a line into words at spaces, a double-quoted part (with \" inside)
// being one word without its quotes.
func splitQuoted(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			in, have = !in, true
		case c == ' ' && !in:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if in {
		return nil, fmt.Errorf("bench: iptables: unterminated quote in %q", line)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}
