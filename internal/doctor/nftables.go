package doctor

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
)

// The oldest nft and kernel the nftables backend runs on: knftables refuses nft before
// 1.0.1, and the kernel takes a concatenation with an interval (the source-range set) from
// 5.6 on.
var (
	nftMinVersion = netfilter.Version{Major: 1, Minor: 0, Patch: 1}
	nftMinKernel  = ipvsmode.KernelVersion{Major: 5, Minor: 6}
)

// nftables reports whether the node runs the nftables backend.
func (c *checkup) nftables() bool { return c.backend == config.FilterNFTables }

// kubeSetNames returns the names that are ipsets of the iptables backend (KUBE-*, both
// families), as the daemon's own test for leftovers does.
func kubeSetNames(names []string) []string {
	own := map[string]bool{}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, s := range proxy.AllSets() {
			own[iptables.SetName(f, s)] = true
		}
	}
	var out []string
	for _, n := range names {
		if own[n] {
			out = append(out, n)
		}
	}
	return out
}

// readFilterObjects reads what each backend leaves on the node: the KUBE-* ipsets, and
// which kipvs nftables tables exist. Without ip_set in the kernel no ipset exists, and the
// ipsets are not listed (the request would load the module).
func (c *checkup) readFilterObjects() {
	if s := c.view.Modules.Module("ip_set"); s == ModuleLoaded || s == ModuleBuiltin {
		names, err := c.view.IPSet.ListNames()
		if err != nil {
			c.kubeSetsErr = fmt.Errorf("list ipsets: %w", err)
		}
		c.kubeSets = kubeSetNames(names)
	}
	var errs []error
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		r := c.view.NFT[f]
		if r == nil {
			continue
		}
		switch _, err := r.Chains(c.ctx); {
		case err == nil:
			c.tables = append(c.tables, f)
		case !kerr.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	c.tablesErr = errors.Join(errs...)
}

// tablesText names the kipvs tables that exist ("table ip kipvs", "tables ip kipvs and
// ip6 kipvs").
func (c *checkup) tablesText() string {
	names := make([]string, len(c.tables))
	for i, f := range c.tables {
		names[i] = nftTableName(f)
	}
	if len(names) > 1 {
		return "tables " + strings.Join(names, " and ")
	}
	return "table " + strings.Join(names, " and ")
}

// detectBackend returns the filter backend the node runs and how doctor knows: the
// daemon's state document, else what the node holds (kipvs's table and no KUBE-* ipset:
// nftables; KUBE-* ipsets and no table: iptables), else doctor's --kipvs-filter-backend.
func (c *checkup) detectBackend() (config.FilterBackend, string) {
	if c.state != nil && c.state.FilterBackend != "" {
		return config.FilterBackend(c.state.FilterBackend), "the kipvs daemon on " + c.view.Daemon.Address() + " runs it"
	}
	why := "no kipvs daemon says which it runs"
	if c.state != nil {
		why = "the kipvs daemon does not say which it runs (it predates the state document's filterBackend)"
	}
	flag := c.cfg.Kipvs.FilterBackend
	switch sets, tables := len(c.kubeSets) > 0, len(c.tables) > 0; {
	case tables && !sets:
		return config.FilterNFTables, why + "; the node holds " + c.tablesText() + " and no KUBE-* ipset"
	case sets && !tables:
		return config.FilterIPTables, why + "; the node holds KUBE-* ipsets (" + listSome(c.kubeSets, 2) + ") and no kipvs nftables table"
	case sets && tables:
		return flag, why + "; the node holds both " + c.tablesText() + " and KUBE-* ipsets (a switch between backends not finished, or leftovers): doctor's --kipvs-filter-backend decides"
	}
	return flag, why + "; the node holds neither a kipvs nftables table nor KUBE-* ipsets: doctor's --kipvs-filter-backend decides"
}

// checkFilterBackend names the backend the checks below follow, and how doctor knows it.
func (c *checkup) checkFilterBackend() {
	finding := fmt.Sprintf("%s: %s", c.backend, c.backendFrom)
	if c.backend != c.cfg.Kipvs.FilterBackend {
		finding += fmt.Sprintf(" (doctor runs with --kipvs-filter-backend=%s; the checks below follow the node)", c.cfg.Kipvs.FilterBackend)
	}
	c.add("filter backend", OK, finding, "")
}

// nftModules are the modules the nftables backend's table needs: kipvs run checks its whole
// table with the kernel at start and exits when the kernel refuses it.
func (c *checkup) nftModules() []module {
	mods := []module{
		{name: "nf_tables", why: "the nftables filter backend (tables ip kipvs, ip6 kipvs, their sets)", severity: Fail},
		{name: "nft_chain_nat", why: "the nat base chains of kipvs's table (nat-prerouting, nat-output, nat-postrouting)", severity: Fail},
		{name: "nft_fib_ipv4", why: "fib expressions of table ip kipvs (node ports and external IPs: fib daddr type local)", severity: Fail},
	}
	if c.hasFamily(inet.IPv6) {
		mods = append(mods, module{name: "nft_fib_ipv6", why: "fib expressions of table ip6 kipvs", severity: Fail})
	}
	mods = append(mods,
		module{name: "nft_ct", why: "ct expressions of kipvs's table (ct state, the out-filter's ct original)", severity: Fail},
		module{name: "nft_masq", why: "masquerade in kipvs's postrouting chain", severity: Fail},
		module{name: "nft_reject_ipv4", why: "reject in the ipvs-filter chain of table ip kipvs", severity: Fail},
	)
	if c.hasFamily(inet.IPv6) {
		mods = append(mods, module{name: "nft_reject_ipv6", why: "reject in the ipvs-filter chain of table ip6 kipvs", severity: Fail})
	}
	return mods
}

// checkNFTProgram: with the nftables backend, nft is installed and 1.0.1 or later.
func (c *checkup) checkNFTProgram() {
	const check = "nft program"
	if !c.nftables() {
		return
	}
	install := "install nftables 1.0.1 or later (Debian, Ubuntu: apt-get install nftables; the kipvs image has it)"
	out, err := "", error(&exec.Error{Name: "nft", Err: exec.ErrNotFound})
	if c.view.NFTVersion != nil {
		out, err = c.view.NFTVersion(c.ctx)
	}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		c.add(check, Fail, "nft is not installed (not in PATH): the nftables backend runs nft for every change of its table, and kipvs run exits at start without it", install)
		return
	case err != nil:
		c.add(check, Fail, fmt.Sprintf("nft --version fails (%v): the nftables backend runs nft for every change of its table", err), install)
		return
	}
	v, err := netfilter.ParseVersion(out)
	if err != nil {
		c.add(check, Warn, fmt.Sprintf("cannot read nft's version: %v", err), "nft --version must print nftables v1.0.1 or later; "+install)
		return
	}
	if !v.AtLeast(nftMinVersion) {
		c.add(check, Fail, fmt.Sprintf("nft is %s, older than %s: knftables, through which kipvs runs nft, refuses it and kipvs run exits at start", v, nftMinVersion), install)
		return
	}
	c.add(check, OK, fmt.Sprintf("nft %s (%s or later)", v, nftMinVersion), "")
}

// checkKernelRelease: with the nftables backend, the kernel is 5.6 or later.
func (c *checkup) checkKernelRelease() {
	const check = "kernel release"
	if !c.nftables() {
		return
	}
	kv, err := ipvsmode.ParseKernelVersion(c.view.KernelRelease)
	if err != nil {
		c.add(check, Warn, fmt.Sprintf("cannot tell the kernel's version: %v", err), "the nftables backend needs kernel "+nftMinKernel.String()+" or later (uname -r)")
		return
	}
	if kv.Major < nftMinKernel.Major || (kv.Major == nftMinKernel.Major && kv.Minor < nftMinKernel.Minor) {
		c.add(check, Fail, fmt.Sprintf("kernel %s is older than %s: its nf_tables has no concatenation with an interval, which the set load-balancer-source-cidr is, so the kernel refuses kipvs's table and kipvs run exits at start",
			c.view.KernelRelease, nftMinKernel), "run a kernel "+nftMinKernel.String()+" or later, or --kipvs-filter-backend=iptables")
		return
	}
	c.add(check, OK, fmt.Sprintf("kernel %s is %s or later (nf_tables concatenations with intervals)", c.view.KernelRelease, nftMinKernel), "")
}

// synced reports whether a daemon answered and has synced family f.
func (c *checkup) synced(f inet.Family) bool {
	if c.state == nil {
		return false
	}
	for _, fs := range c.state.Families {
		if familyOf(fs.Family) == f {
			return fs.Synced
		}
	}
	return false
}

// checkNFTTables: with the nftables backend, kipvs's table of each family it runs exists
// with every chain kipvs declares, the base chains at their hooks. It fails when a daemon
// has synced the family (the table should be there), and warns otherwise.
func (c *checkup) checkNFTTables() {
	if !c.nftables() {
		return
	}
	for _, f := range c.families {
		name := nftTableName(f)
		check := "table " + name
		r := c.view.NFT[f]
		if r == nil {
			why := "nft cannot open it"
			if c.view.NFTErr != nil {
				why = c.view.NFTErr.Error()
			}
			c.add(check, Warn, fmt.Sprintf("cannot read table %s: %s", name, why), "install nftables 1.0.1 or later (the nft program check), and run kipvs doctor as root")
			continue
		}
		sev := Warn
		fix := "start kipvs run --kipvs-filter-backend=nftables, or wait for its first sync: kipvs creates the table then"
		if c.synced(f) {
			sev = Fail
			fix = fmt.Sprintf("kipvs restores it at its next full sync (every ipvs.syncPeriod, %s); if it is lost again, find what deletes it: often a firewall service reloading its rules with nft flush ruleset",
				c.cfg.IPVS.SyncPeriod)
		}
		chains, err := r.Chains(c.ctx)
		switch {
		case kerr.IsNotFound(err) && sev == Fail:
			c.add(check, sev, fmt.Sprintf("table %s does not exist, though the kipvs daemon has synced %s: Service traffic is neither masqueraded nor filtered (source ranges, the IPVS access filter)",
				name, f), fix)
			continue
		case kerr.IsNotFound(err):
			c.add(check, sev, fmt.Sprintf("table %s does not exist: kipvs creates it at its first sync", name), fix)
			continue
		case err != nil:
			c.add(check, Warn, fmt.Sprintf("cannot read table %s: %v", name, err), "nft list table "+name+" shows the error")
			continue
		}
		have := map[string]nft.Chain{}
		for _, ch := range chains {
			have[ch.Name] = ch
		}
		var bad []string
		bases := 0
		want := nftables.DeclaredChains()
		for _, w := range want {
			h, ok := have[w.Name]
			switch {
			case !ok:
				bad = append(bad, "chain "+w.Name+" is missing")
			case h.Base != w.Base && w.Base == "":
				bad = append(bad, fmt.Sprintf("chain %s is a base chain (%s), kipvs declares a regular one", w.Name, h.Base))
			case h.Base != w.Base:
				bad = append(bad, fmt.Sprintf("chain %s is hooked %q, kipvs declares %q", w.Name, h.Base, w.Base))
			}
			if w.Base != "" {
				bases++
			}
		}
		if len(bad) > 0 {
			c.add(check, sev, fmt.Sprintf("table %s: %s", name, listSome(bad, 3)), fix)
			continue
		}
		c.add(check, OK, fmt.Sprintf("table %s holds kipvs's %d chains, the %d base chains at their hooks", name, len(want), bases), "")
	}
}

// ownedChainNames returns the chain names declared in netfilter.Format text (IptablesReader.Owned).
func ownedChainNames(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if name, ok := strings.CutPrefix(l, ":"); ok {
			name, _, _ = strings.Cut(name, " ")
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// checkLeftovers: what the backend kipvs does not run left on the node. Its rules still
// see every packet and act by what their sets held when they were last written.
func (c *checkup) checkLeftovers() {
	const check = "filter backend leftovers"
	cleanup := "or, with kipvs stopped, kipvs cleanup (it removes kube-ipvs0 and the virtual servers too, which kipvs run recreates)"
	pending := ""
	for _, f := range c.families {
		if c.state != nil && !c.synced(f) {
			pending = " (the kipvs daemon removes them after its first sync, which is pending)"
		}
	}
	if c.nftables() {
		if c.kubeSetsErr != nil {
			c.add(check, Warn, fmt.Sprintf("cannot look for the iptables backend's KUBE-* ipsets: %v", c.kubeSetsErr), "ipset list -n shows the error")
			return
		}
		var chains, errs []string
		readers := func(rs map[inet.Family]IptablesReader, backend string) {
			for _, f := range c.families {
				r := rs[f]
				if r == nil {
					continue
				}
				tool := map[inet.Family]string{inet.IPv4: "iptables", inet.IPv6: "ip6tables"}[f] + backend
				owned, err := r.Owned(c.ctx)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", tool, err))
					continue
				}
				if names := ownedChainNames(owned); len(names) > 0 {
					chains = append(chains, tool+" "+listSome(names, 3))
				}
			}
		}
		readers(c.view.Iptables, "")
		if c.view.OtherBackend != "" {
			readers(c.view.OtherIptables, "-"+c.view.OtherBackend)
		}
		if len(errs) > 0 {
			c.add(check, Warn, "cannot look for the iptables backend's KUBE-* chains: "+strings.Join(errs, "; "), "iptables-save shows the error")
			return
		}
		var what []string
		if len(c.kubeSets) > 0 {
			what = append(what, "KUBE-* ipsets "+listSome(c.kubeSets, 3))
		}
		if len(chains) > 0 {
			what = append(what, "KUBE-* chains ("+strings.Join(chains, "; ")+")")
		}
		if len(what) == 0 {
			c.add(check, OK, "no KUBE-* ipset or chain of the iptables backend (or kube-proxy's IPVS mode) is left", "")
			return
		}
		fix := "restart kipvs: after its first sync it removes the KUBE-* chains and ipsets (if they come back, kube-proxy or a kipvs with --kipvs-filter-backend=iptables still runs on this node); " + cleanup
		if len(c.kubeSets) == 0 {
			fix = "with kipvs stopped, kipvs cleanup (it removes kube-ipvs0 and the virtual servers too, which kipvs run recreates): kipvs run removes KUBE-* chains only when KUBE-* ipsets are left with them"
		}
		harm := "no rule of kipvs's uses them, they only hold stale members"
		if len(chains) > 0 {
			harm = "their rules still see every packet and act by what the sets held when last written"
		}
		c.add(check, Warn, strings.Join(what, " and ")+" are left from the iptables backend or kube-proxy's IPVS mode on a node that runs the nftables backend: "+harm+pending, fix)
		return
	}
	if c.tablesErr != nil {
		c.add(check, Warn, fmt.Sprintf("cannot look for the nftables backend's tables: %v", c.tablesErr), "nft list tables shows the error")
		return
	}
	if len(c.tables) > 0 {
		verb := "is"
		if len(c.tables) > 1 {
			verb = "are"
		}
		c.add(check, Warn, c.tablesText()+" of the nftables backend "+verb+" left on a node that runs the iptables backend: their base chains still see every packet and act by what their sets held when last written"+pending,
			"restart kipvs: with --kipvs-filter-backend=iptables it deletes tables ip kipvs and ip6 kipvs after its first sync (if they come back, a kipvs with --kipvs-filter-backend=nftables still runs on this node); "+cleanup)
		return
	}
	if len(c.view.NFT) == 0 {
		why := "nft is not installed"
		if c.view.NFTErr != nil && !errors.Is(c.view.NFTErr, exec.ErrNotFound) {
			why = "nft cannot be run (" + c.view.NFTErr.Error() + ")"
		}
		c.add(check, OK, why+": no table of the nftables backend looked for", "")
		return
	}
	c.add(check, OK, "no table ip kipvs or ip6 kipvs of the nftables backend is left", "")
}
