package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// Status is a check's verdict.
type Status string

// The statuses: FAIL means kipvs (or Services through it) does not work as configured,
// WARN that something works worse than it should or could not be checked.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Result is one check's outcome.
type Result struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Finding string `json:"finding"`
	// Fix is a command or setting that resolves the finding ("" for OK).
	Fix string `json:"fix,omitempty"`
}

// Report is every check's outcome, in check order.
type Report struct {
	Results []Result `json:"results"`
}

// Count returns how many results have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.Count(Fail) > 0 }

// Find returns the results of one check.
func (r *Report) Find(check string) []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Check == check {
			out = append(out, res)
		}
	}
	return out
}

// WriteTable writes the report as an aligned table (CHECK STATUS FINDING FIX) and a
// summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tFINDING\tFIX")
	for _, res := range r.Results {
		fix := res.Fix
		if fix == "" {
			fix = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", oneLine(res.Check), res.Status, oneLine(res.Finding), oneLine(fix))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d OK, %d WARN, %d FAIL\n", r.Count(OK), r.Count(Warn), r.Count(Fail))
	return err
}

// jsonReport is the -o json document.
type jsonReport struct {
	Results []Result       `json:"results"`
	Summary map[Status]int `json:"summary"`
}

// WriteJSON writes the report as JSON: {"results": [...], "summary": {"OK": n, ...}}.
func (r *Report) WriteJSON(w io.Writer) error {
	res := r.Results
	if res == nil {
		res = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{Results: res, Summary: map[Status]int{OK: r.Count(OK), Warn: r.Count(Warn), Fail: r.Count(Fail)}})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkup is one run: the configuration, the view, and facts several checks share.
type checkup struct {
	ctx  context.Context
	cfg  *config.Config
	view View
	rep  *Report

	links    []Link
	linksErr error
	// dummy is kube-ipvs0 (nil when it does not exist).
	dummy *Link
	// families are the IP families kipvs runs (the daemon's, else derived like it does).
	families []inet.Family

	state    *debugapi.State
	stateErr error

	// backend is the filter backend the node runs, backendFrom how doctor knows.
	backend     config.FilterBackend
	backendFrom string
	// kubeSets are the iptables backend's KUBE-* ipsets on the node; tables the families
	// whose kipvs nftables table exists.
	kubeSets    []string
	kubeSetsErr error
	tables      []inet.Family
	tablesErr   error

	svcCIDRs  []netip.Prefix
	svcSource string
}

// Run checks the node in v against cfg and returns the report.
func Run(ctx context.Context, cfg *config.Config, v View) *Report {
	if v.Now == nil {
		v.Now = time.Now
	}
	c := &checkup{ctx: ctx, cfg: cfg, view: v, rep: &Report{}}
	c.gather()

	c.checkFilterBackend()
	c.checkIPVS()
	c.checkModules()
	c.checkNFTProgram()
	c.checkKernelRelease()
	c.checkConntrackNetlink()
	c.checkSysctls()
	c.checkARP()
	c.checkBridgeNetfilter()
	c.checkRPFilter()
	c.checkConntrackTable()
	c.checkHairpin()
	c.checkLocalDetector()
	c.checkClusterCIDR()
	c.checkNodeAddressVIPs()
	c.checkServiceRoutes()
	c.checkForward()
	c.checkNFTTables()
	c.checkLeftovers()
	c.checkDaemon()
	c.checkCapacity()
	return c.rep
}

func (c *checkup) add(check string, st Status, finding, fix string) {
	if st == OK {
		fix = ""
	}
	c.rep.Results = append(c.rep.Results, Result{Check: check, Status: st, Finding: finding, Fix: fix})
}

// gather reads the facts several checks share: the links, the daemon's state, the filter
// backend, the IP families and the Service CIDRs.
func (c *checkup) gather() {
	c.links, c.linksErr = c.view.Net.Links()
	for i := range c.links {
		if c.links[i].Name == ipvsmode.DummyName {
			c.dummy = &c.links[i]
		}
	}
	if c.view.Daemon != nil {
		c.state, c.stateErr = c.view.Daemon.State(c.ctx)
	} else {
		c.stateErr = ErrNoDaemon
	}
	c.readFilterObjects()
	c.backend, c.backendFrom = c.detectBackend()
	c.families = c.deriveFamilies()
	c.svcCIDRs, c.svcSource = c.serviceCIDRs()
}

// deriveFamilies returns the daemon's families, or the ones it would run: IPv4, plus IPv6
// when the backend can (ip6tables works, or nft is there) and the kernel has IPv6 (the
// daemon's test, upstream's), whatever the node's addresses.
func (c *checkup) deriveFamilies() []inet.Family {
	if c.state != nil && len(c.state.Families) > 0 {
		var out []inet.Family
		for _, f := range c.state.Families {
			if f.Family == inet.IPv6.String() {
				out = append(out, inet.IPv6)
			} else {
				out = append(out, inet.IPv4)
			}
		}
		return out
	}
	out := []inet.Family{inet.IPv4}
	ipv6 := c.view.IPv6
	if c.nftables() {
		ipv6 = c.view.NFTIPv6
	}
	if ipv6 != nil && ipv6() == nil {
		out = append(out, inet.IPv6)
	}
	return out
}

// serviceCIDRs returns the Service CIDRs and where they come from: --kipvs-service-cidr,
// else the API's ServiceCIDR objects, else what the daemon learned.
func (c *checkup) serviceCIDRs() ([]netip.Prefix, string) {
	if len(c.cfg.Kipvs.ServiceCIDRs) > 0 {
		return c.cfg.Kipvs.ServiceCIDRs, "--kipvs-service-cidr"
	}
	if c.view.APIServiceCIDRs != nil {
		if ps, err := c.view.APIServiceCIDRs(c.ctx); err == nil && len(ps) > 0 {
			return ps, "the cluster's ServiceCIDR objects"
		}
	}
	if c.state != nil {
		var out []netip.Prefix
		for _, s := range c.state.ServiceCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			return out, "the daemon's ServiceCIDR objects"
		}
	}
	return nil, ""
}

// hasFamily reports whether kipvs runs family f.
func (c *checkup) hasFamily(f inet.Family) bool {
	for _, g := range c.families {
		if g == f {
			return true
		}
	}
	return false
}

// dummyAddrs returns the addresses bound on kube-ipvs0.
func (c *checkup) dummyAddrs() []netip.Addr {
	if c.dummy == nil {
		return nil
	}
	var out []netip.Addr
	for _, p := range c.dummy.Addrs {
		if a := p.Addr().Unmap(); !dummyif.KernelLinkLocal(p) {
			out = append(out, a)
		}
	}
	return out
}

// inServiceCIDR reports whether a lies in a known Service CIDR.
func (c *checkup) inServiceCIDR(a netip.Addr) bool {
	for _, p := range c.svcCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// listSome renders up to max items, then "and N more".
func listSome(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
}
