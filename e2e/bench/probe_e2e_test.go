//go:build e2e

package bench

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// probe reads what a proxy programmed for some Services, for the first-sync and change
// measurements: IPVS over netlink one virtual server at a time (kube-proxy in IPVS mode,
// kipvs), or kube-proxy's nftables table or iptables nat table (its other modes).
type probe interface {
	// begin starts a round of reads of vips. A probe that reads the state once for the
	// round returns when it started reading (the state read is no older); one whose
	// reads each read the kernel returns the zero time.
	begin(vips []VIP) (time.Time, error)
	// read returns the endpoints programmed for vip, false when it is not programmed.
	read(vip VIP) (map[netip.AddrPort]bool, bool)
}

// newProbe is proxy's probe.
func newProbe(proxy string, cl *ipvs.Client) probe {
	switch ProxyMode(proxy) {
	case "nftables", "iptables":
		return &ruleProbe{mode: ProxyMode(proxy), chains: map[VIP]string{}}
	}
	return ipvsProbe{cl: cl}
}

type ipvsProbe struct{ cl *ipvs.Client }

func (ipvsProbe) begin([]VIP) (time.Time, error) { return time.Time{}, nil }

func (p ipvsProbe) read(vip VIP) (map[netip.AddrPort]bool, bool) {
	proto := inet.TCP
	if vip.Proto == "udp" {
		proto = inet.UDP
	}
	dests, err := p.cl.Destinations(ipvs.ServiceKey{Family: inet.IPv4, Protocol: proto, Addr: vip.Addr, Port: vip.Port})
	if err != nil {
		return nil, false
	}
	return activeSet(dests), true
}

// chainReadLimit is how many Services a round of a ruleProbe reads chain by chain (one
// process each) rather than by listing the whole table once.
const chainReadLimit = 8

// ruleProbe reads kube-proxy's nftables table (ip kube-proxy) or iptables nat table. A
// round of a few Services whose chains it has seen lists those chains alone. Any other round
// first lists only which cluster IPs are programmed (the service-ips map, the KUBE-SERVICES
// chain: N lines, not the N x E endpoints) and, only once every Service of the round is
// there, the whole table: kube-proxy writes each sync in one transaction (nft -f,
// iptables-restore), so polling a first sync of 10,000 Services costs a short listing
// each time, and the whole table is read (and every endpoint checked) once it may be
// complete.
type ruleProbe struct {
	mode     string // "nftables" or "iptables"
	chains   map[VIP]string
	snap     map[VIP]map[netip.AddrPort]bool
	iptables string // "iptables-nft" or "iptables-legacy": where kube-proxy's rules were found
}

func (p *ruleProbe) begin(vips []VIP) (time.Time, error) {
	start := time.Now()
	p.snap = map[VIP]map[netip.AddrPort]bool{}
	known := len(vips) <= chainReadLimit
	for _, v := range vips {
		known = known && p.chains[v] != ""
	}
	if !known {
		present, err := p.programmedVIPs()
		if err != nil {
			return start, err
		}
		for _, v := range vips {
			if !present[v] {
				return start, nil // not all there yet: every read misses
			}
		}
		prog, err := p.table()
		if err != nil {
			return start, err
		}
		p.snap = prog.Endpoints
		for v, c := range prog.Chains {
			p.chains[v] = c
		}
		return start, nil
	}
	for _, v := range vips {
		eps, err := p.chain(p.chains[v])
		if err != nil {
			delete(p.chains, v) // gone: the next round lists the table
			continue
		}
		p.snap[v] = eps
	}
	return start, nil
}

func (p *ruleProbe) read(vip VIP) (map[netip.AddrPort]bool, bool) {
	eps, ok := p.snap[vip]
	return eps, ok
}

// table lists the whole table; a table not there (yet) is an empty program.
func (p *ruleProbe) table() (Programmed, error) {
	if p.mode == "nftables" {
		out, err := exec.Command("nft", "-j", "list", "table", "ip", NFTTable).Output()
		if err != nil {
			return Programmed{}, nil // no table yet
		}
		return ParseNFT(out)
	}
	variants := []string{"iptables-nft", "iptables-legacy"}
	if p.iptables != "" {
		variants = []string{p.iptables}
	}
	for _, v := range variants {
		out, err := exec.Command(v+"-save", "-t", "nat").Output()
		if err != nil || !strings.Contains(string(out), ":KUBE-SERVICES ") {
			continue
		}
		p.iptables = v
		return ParseIPTablesSave(string(out))
	}
	return Programmed{}, nil
}

// programmedVIPs lists which cluster IPs, protocols and ports have a Service chain.
func (p *ruleProbe) programmedVIPs() (map[VIP]bool, error) {
	var prog Programmed
	var err error
	if p.mode == "nftables" {
		out, xerr := exec.Command("nft", "-j", "list", "map", "ip", NFTTable, nftServiceIPs).Output()
		if xerr != nil {
			return nil, nil // no table yet
		}
		prog, err = ParseNFT(out)
	} else {
		variants := []string{"iptables-nft", "iptables-legacy"}
		if p.iptables != "" {
			variants = []string{p.iptables}
		}
		for _, v := range variants {
			out, xerr := exec.Command(v, "-t", "nat", "-S", "KUBE-SERVICES").Output()
			if xerr != nil {
				continue // no chain (yet) in this variant
			}
			p.iptables = v
			prog, err = ParseIPTablesSave(string(out))
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out := map[VIP]bool{}
	for v := range prog.Chains {
		out[v] = true
	}
	return out, nil
}

// chain lists one Service's chain.
func (p *ruleProbe) chain(name string) (map[netip.AddrPort]bool, error) {
	if p.mode == "nftables" {
		out, err := exec.Command("nft", "-j", "list", "chain", "ip", NFTTable, name).Output()
		if err != nil {
			return nil, fmt.Errorf("nft list chain %s: %w", name, err)
		}
		return ParseNFTChain(out)
	}
	out, err := exec.Command(p.iptables, "-t", "nat", "-S", name).Output()
	if err != nil {
		return nil, fmt.Errorf("%s -S %s: %w", p.iptables, name, err)
	}
	return ParseIPTablesChain(string(out))
}

// vipOf is a benchmark Service's VIP.
func vipOf(k ipvs.ServiceKey) VIP {
	proto := "tcp"
	if k.Protocol == inet.UDP {
		proto = "udp"
	}
	return VIP{Addr: k.Addr, Proto: proto, Port: k.Port}
}

// leftovers is harness.Leftovers (IPVS, KUBE-* sets, KUBE- rules of iptables-save and
// ip6tables-save, kube-ipvs0) and what kube-proxy's other modes leave: a kube-proxy nft
// table of any family, KUBE- rules in the legacy iptables.
func leftovers(t testing.TB) []string {
	out := harness.Leftovers(t)
	for line := range strings.Lines(harness.MustRun(t, "nft", "list", "tables")) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" && f[2] == NFTTable {
			out = append(out, "nft: "+strings.TrimSpace(line))
		}
	}
	for _, save := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(save); err != nil {
			continue
		}
		for line := range strings.Lines(harness.MustRun(t, save)) {
			if strings.Contains(line, "KUBE-") {
				out = append(out, save+": "+strings.TrimSpace(line))
			}
		}
	}
	return out
}
