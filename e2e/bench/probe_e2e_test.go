//go:build e2e

package bench

import (
	"errors"
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
// kipvs), or kube-proxy's nftables table or iptables nat table over nf_tables netlink
// (its other modes).
type probe interface {
	// begin starts a round of reads of vips. A probe that reads the state once for the
	// round returns when it started reading (the state read is no older); one whose
	// reads each read the kernel returns the zero time.
	begin(vips []VIP) (time.Time, error)
	// read returns the endpoints programmed for vip, false when it is not programmed.
	read(vip VIP) (map[netip.AddrPort]bool, bool)
	close() error
}

// newProbe is proxy's probe.
func newProbe(proxy string, cl *ipvs.Client) (probe, error) {
	mode := ProxyMode(proxy)
	if mode != "nftables" && mode != "iptables" {
		return ipvsProbe{cl: cl}, nil
	}
	if mode == "iptables" {
		// kube-proxy runs the iptables on the PATH, and the probe reads nf_tables.
		out, err := exec.Command("iptables", "--version").Output()
		if err != nil || !strings.Contains(string(out), "(nf_tables)") {
			return nil, fmt.Errorf("iptables --version: %q, %v: want iptables-nft, whose rules the probe reads over nf_tables netlink", strings.TrimSpace(string(out)), err)
		}
	}
	conn, err := dialNFT()
	if err != nil {
		return nil, err
	}
	r, err := newRuleReader(conn, mode)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &ruleProbe{conn: conn, r: r, chains: map[VIP]string{}}, nil
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

func (ipvsProbe) close() error { return nil }

// chainReadLimit is how many Services a round of a ruleProbe reads chain by chain rather
// than by reading the whole table once.
const chainReadLimit = 8

// ruleProbe reads kube-proxy's nftables table (ip kube-proxy) or iptables nat table (ip
// nat, iptables-nft) with a RuleReader: netlink dumps the kernel answers for one chain or
// one map, so a read costs what it reads, not the whole ruleset. A round of a few Services
// whose chains it has seen reads those chains alone (and the verdict map and the endpoint
// chains not seen before that each leads to). Any other round first reads only which
// cluster IPs are programmed (the service-ips map, the KUBE-SERVICES chain: N elements or
// rules, not the N x E endpoints) and, only once every Service of the round is there, the
// whole table: kube-proxy writes each sync in one transaction (nft -f, iptables-restore),
// so polling a first sync of 10,000 Services costs a short read each time, and the whole
// table is read (and every endpoint checked) once it may be complete.
type ruleProbe struct {
	conn   *nftConn
	r      *RuleReader
	chains map[VIP]string
	snap   map[VIP]map[netip.AddrPort]bool
}

func (p *ruleProbe) begin(vips []VIP) (time.Time, error) {
	start := time.Now()
	p.snap = map[VIP]map[netip.AddrPort]bool{}
	known := len(vips) <= chainReadLimit
	for _, v := range vips {
		known = known && p.chains[v] != ""
	}
	if !known {
		present, err := p.r.VIPs()
		if err != nil {
			return start, err
		}
		for _, v := range vips {
			if present[v] == "" {
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
	var errs []error
	for _, v := range vips {
		eps, ok, err := p.r.Endpoints(p.chains[v])
		if err != nil || !ok {
			delete(p.chains, v) // gone: the next round reads the table
			errs = append(errs, err)
			continue
		}
		p.snap[v] = eps
	}
	return start, errors.Join(errs...)
}

func (p *ruleProbe) read(vip VIP) (map[netip.AddrPort]bool, bool) {
	eps, ok := p.snap[vip]
	return eps, ok
}

// table reads the whole table; a table not there (yet) is an empty program.
func (p *ruleProbe) table() (Programmed, error) { return p.r.Programmed() }

func (p *ruleProbe) close() error { return p.conn.Close() }

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
