package doctor

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// DrainSlack is how long past the graceful period a draining real server may stay before it
// counts as stuck: the daemon looks at draining real servers every 5 s.
const DrainSlack = 15 * time.Second

// stateAttempts bounds how often the kernel is read again when the daemon's state changed
// while it was being read (a sync or a drain ran meanwhile).
const stateAttempts = 3

// setRef names a set of the state document: the family's, by its name (the nftables
// backend's sets have the same names in both families).
type setRef struct{ family, name string }

// kernelSnap is the kernel state the drift checks compare with the daemon's.
type kernelSnap struct {
	// sets holds each set's members as the backend lists them, in the state document's
	// notation.
	sets     map[setRef][]string
	setErrs  map[setRef]error
	table    []ipvs.Entry
	tableErr error
	// owned is kipvs's rules of each family as the state document writes them:
	// netfilter.Format text with iptables, the table's chains with nftables.
	owned    map[string]string
	ownedErr map[string]error
	dummy    []netip.Addr
	dummyOK  bool
	linksErr error
}

// readKernel reads what the drift checks need for the daemon's families.
func (c *checkup) readKernel(st *debugapi.State) *kernelSnap {
	k := &kernelSnap{sets: map[setRef][]string{}, setErrs: map[setRef]error{}, owned: map[string]string{}, ownedErr: map[string]error{}}
	for _, f := range st.Families {
		if c.nftables() {
			c.readTable(k, f)
			continue
		}
		for _, s := range f.Sets {
			ref := setRef{f.Family, s.Name}
			info, err := c.view.IPSet.List(s.Name)
			if err != nil {
				k.setErrs[ref] = err
				continue
			}
			have := make([]string, len(info.Entries))
			for i, e := range info.Entries {
				have[i] = e.String()
			}
			k.sets[ref] = have
		}
		r := c.view.Iptables[familyOf(f.Family)]
		if r == nil {
			k.ownedErr[f.Family] = cmp.Or(c.view.IptablesErr, errors.New("no iptables backend found"))
		} else {
			k.owned[f.Family], k.ownedErr[f.Family] = r.Owned(c.ctx)
		}
	}
	k.table, k.tableErr = c.view.IPVS.Table()
	links, err := c.view.Net.Links()
	k.linksErr = err
	for _, l := range links {
		if l.Name != ipvsmode.DummyName {
			continue
		}
		k.dummyOK = true
		for _, p := range l.Addrs {
			if a := p.Addr().Unmap(); !dummyif.KernelLinkLocal(p) {
				k.dummy = append(k.dummy, a)
			}
		}
	}
	return k
}

// readTable reads the sets and chains of family f's kipvs table into k.
func (c *checkup) readTable(k *kernelSnap, f debugapi.FamilyState) {
	r := c.view.NFT[familyOf(f.Family)]
	if r == nil {
		err := cmp.Or(c.view.NFTErr, errors.New("nft cannot open the table"))
		for _, s := range f.Sets {
			k.setErrs[setRef{f.Family, s.Name}] = err
		}
		k.ownedErr[f.Family] = err
		return
	}
	for _, s := range f.Sets {
		ref := setRef{f.Family, s.Name}
		if have, err := r.Members(c.ctx, s.Name); err != nil {
			k.setErrs[ref] = err
		} else {
			k.sets[ref] = have
		}
	}
	k.owned[f.Family], k.ownedErr[f.Family] = r.Rules(c.ctx)
}

func familyOf(name string) inet.Family {
	if name == inet.IPv6.String() {
		return inet.IPv6
	}
	return inet.IPv4
}

// checkDaemon: a kipvs daemon answers, its families are synced, and the kernel matches what
// it wants (the sets and chains of its filter backend, kube-ipvs0 addresses, virtual
// servers); no foreign
// virtual server shares its addresses, and no real server drains past the graceful period.
func (c *checkup) checkDaemon() {
	const check = "daemon"
	if c.view.Daemon == nil {
		c.add(check, OK, "the metrics server is disabled (--metrics-bind-address): the daemon cannot be asked, drift is not checked", "")
		return
	}
	addr := c.view.Daemon.Address()
	if c.stateErr != nil {
		if errors.Is(c.stateErr, ErrNoDaemon) {
			detail := ""
			if d := strings.TrimPrefix(c.stateErr.Error(), ErrNoDaemon.Error()+": "); d != ErrNoDaemon.Error() {
				detail = " (" + d + ")"
			}
			c.add(check, Warn, fmt.Sprintf("no kipvs daemon answers on %s%s: drift checks skipped", addr, detail),
				"start kipvs run, or give the --metrics-bind-address it serves metrics on")
		} else if errors.Is(c.stateErr, ErrDebugOff) {
			c.add(check, Warn, fmt.Sprintf("kipvs on %s serves no %s (its debug endpoints are off, the default): drift checks skipped", addr, debugapi.StatePath),
				debugapi.DebugDisabledHint)
		} else {
			c.add(check, Warn, fmt.Sprintf("cannot read the kipvs daemon's state from %s: %v: drift checks skipped", addr, c.stateErr), "")
		}
		return
	}
	var k *kernelSnap
	for range stateAttempts {
		k = c.readKernel(c.state)
		again, err := c.view.Daemon.State(c.ctx)
		if err != nil || reflect.DeepEqual(again, c.state) {
			break
		}
		c.state = again // a sync or drain ran meanwhile: read the kernel again
	}
	var unsynced []string
	nvs := 0
	for _, f := range c.state.Families {
		nvs += len(f.VirtualServers)
		if !f.Synced {
			unsynced = append(unsynced, f.Family)
		}
	}
	c.checkFailedObjects(addr)
	if len(unsynced) > 0 {
		c.add(check, Warn, fmt.Sprintf("the kipvs daemon on %s has not synced %s (its first sync is pending, or its last apply failed; see its log): the kernel may differ from what it wants until it does",
			addr, strings.Join(unsynced, ", ")), "read kipvs's log for the failing sync")
	} else {
		c.add(check, OK, fmt.Sprintf("the kipvs daemon on %s is synced (%d virtual servers)", addr, nvs), "")
	}
	c.checkDriftSets(k)
	c.checkDriftRules(k)
	c.checkDriftAddresses(k)
	c.checkDriftVirtualServers(k)
	c.checkForeignVirtualServers(k)
	c.checkDraining()
}

// checkFailedObjects reports the objects the daemon failed to apply and retries: drift
// findings on them are expected until a retry succeeds.
func (c *checkup) checkFailedObjects(addr string) {
	const check = "daemon: failed objects"
	var lines []string
	for _, f := range c.state.Families {
		for _, o := range f.Failed {
			lines = append(lines, fmt.Sprintf("%s%s %s: %s (%d attempts, next retry %s)", famPrefix(f.Family), o.Kind, o.Object, o.Error,
				o.Attempts, o.RetryAt.Format(time.RFC3339)))
		}
	}
	if len(lines) == 0 {
		return
	}
	const show = 5
	more := ""
	if len(lines) > show {
		more = fmt.Sprintf("; and %d more", len(lines)-show)
		lines = lines[:show]
	}
	c.add(check, Warn, fmt.Sprintf("the kipvs daemon on %s could not apply %s%s; it retries each with backoff, and the drift checks below may name them",
		addr, strings.Join(lines, "; "), more), "read the error: a kernel out of memory or a table limit (see docs/bad-input.md); kipvs_sync_objects_out_of_sync counts them")
}

// driftFix is the fix of every drift finding.
func (c *checkup) driftFix() string {
	return fmt.Sprintf("kipvs repairs drift at its next full sync (every ipvs.syncPeriod, %s); if it comes back, find the other program that changes kipvs's objects", c.cfg.IPVS.SyncPeriod)
}

// famPrefix is "" for IPv4 and "IPv6 " for IPv6, to keep IPv4-only findings short.
func famPrefix(f string) string {
	if f == inet.IPv6.String() {
		return "IPv6 "
	}
	return ""
}

// diffLists returns what is in want but not in have, and the reverse.
func diffLists(want, have []string) (missing, extra []string) {
	w := map[string]bool{}
	for _, s := range want {
		w[s] = true
	}
	h := map[string]bool{}
	for _, s := range have {
		h[s] = true
		if !w[s] {
			extra = append(extra, s)
		}
	}
	for _, s := range want {
		if !h[s] {
			missing = append(missing, s)
		}
	}
	return missing, extra
}

// checkDriftSets compares the members of kipvs's sets (ipsets, or the sets of its nftables
// tables) with the daemon's.
func (c *checkup) checkDriftSets(k *kernelSnap) {
	check := "drift: ipsets"
	if c.nftables() {
		check = "drift: nftables sets"
	}
	var bad []string
	nsets, nmembers := 0, 0
	for _, f := range c.state.Families {
		if !f.Synced {
			continue
		}
		for _, s := range f.Sets {
			nsets++
			nmembers += len(s.Members)
			ref := setRef{f.Family, s.Name}
			name := s.Name
			if c.nftables() {
				name = nftTableName(familyOf(f.Family)) + " " + s.Name // as nft list set names it
			}
			have, ok := k.sets[ref]
			if !ok {
				err := k.setErrs[ref]
				if kerr.IsNotFound(err) {
					bad = append(bad, fmt.Sprintf("set %s is missing", name))
				} else {
					bad = append(bad, fmt.Sprintf("set %s: %v", name, err))
				}
				continue
			}
			missing, extra := diffLists(s.Members, have)
			if len(missing) > 0 {
				bad = append(bad, fmt.Sprintf("%s lacks %s", name, listSome(missing, 3)))
			}
			if len(extra) > 0 {
				bad = append(bad, fmt.Sprintf("%s has unwanted %s", name, listSome(extra, 3)))
			}
		}
	}
	if len(bad) > 0 {
		c.add(check, Warn, listSome(bad, 4), c.driftFix())
		return
	}
	c.add(check, OK, fmt.Sprintf("%d sets hold exactly the %d members the daemon wants", nsets, nmembers), "")
}

// tableLines keys the lines of netfilter.Format text by table ("filter: -A FORWARD ...").
func tableLines(text string) []string {
	var out []string
	table := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "" || l == "COMMIT":
		case strings.HasPrefix(l, "*"):
			table = strings.TrimPrefix(l, "*")
		default:
			out = append(out, table+": "+l)
		}
	}
	return out
}

// chainLines keys the lines of an nftables rules text (the state document's with the
// nftables backend) by chain: "chain services" for the chain itself, "services: RULE" for
// each rule, "nat-output: type nat hook output priority -100" for a base chain's hook.
func chainLines(text string) []string {
	var out []string
	chain := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "chain "):
			chain = strings.TrimPrefix(l, "chain ")
			out = append(out, l)
		default:
			out = append(out, chain+": "+strings.TrimSpace(l))
		}
	}
	return out
}

// checkDriftRules compares kipvs's rules (its iptables chains and the jumps into them, or
// the chains of its nftables tables) with the daemon's.
func (c *checkup) checkDriftRules(k *kernelSnap) {
	check, lines, ok := "drift: iptables", tableLines, "kipvs's chains and jumps are exactly what the daemon wants"
	if c.nftables() {
		check, lines, ok = "drift: nftables chains", chainLines, "the chains of kipvs's nftables tables are exactly what the daemon wants"
	}
	var bad []string
	for _, f := range c.state.Families {
		if !f.Synced {
			continue
		}
		if err := k.ownedErr[f.Family]; err != nil {
			bad = append(bad, fmt.Sprintf("%scannot read kipvs's chains: %v", famPrefix(f.Family), err))
			continue
		}
		have := k.owned[f.Family]
		if have == f.Rules {
			continue
		}
		missing, extra := diffLists(lines(f.Rules), lines(have))
		if len(missing) == 0 && len(extra) == 0 {
			bad = append(bad, famPrefix(f.Family)+"kipvs's rules are in another order than it wants")
			continue
		}
		if len(missing) > 0 {
			bad = append(bad, fmt.Sprintf("%smissing %s", famPrefix(f.Family), listSome(quoteAll(missing), 3)))
		}
		if len(extra) > 0 {
			bad = append(bad, fmt.Sprintf("%sunwanted %s", famPrefix(f.Family), listSome(quoteAll(extra), 3)))
		}
	}
	if len(bad) > 0 {
		c.add(check, Warn, strings.Join(bad, "; "), c.driftFix())
		return
	}
	c.add(check, OK, ok, "")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "[" + s + "]"
	}
	return out
}

func (c *checkup) checkDriftAddresses(k *kernelSnap) {
	const check = "drift: " + ipvsmode.DummyName
	if k.linksErr != nil {
		c.add(check, Warn, fmt.Sprintf("cannot list links: %v", k.linksErr), "")
		return
	}
	var bad []string
	n := 0
	for _, f := range c.state.Families {
		if !f.Synced {
			continue
		}
		fam := familyOf(f.Family)
		var have []string
		for _, a := range k.dummy {
			if fam.Matches(a) {
				have = append(have, a.String())
			}
		}
		n += len(f.Addresses)
		if !k.dummyOK && len(f.Addresses) > 0 {
			bad = append(bad, ipvsmode.DummyName+" does not exist")
			continue
		}
		missing, extra := diffLists(f.Addresses, have)
		if len(missing) > 0 {
			bad = append(bad, fmt.Sprintf("%s lacks %s", ipvsmode.DummyName, listSome(missing, 3)))
		}
		if len(extra) > 0 {
			bad = append(bad, fmt.Sprintf("%s has unwanted %s", ipvsmode.DummyName, listSome(extra, 3)))
		}
	}
	if len(bad) > 0 {
		c.add(check, Warn, strings.Join(bad, "; "), c.driftFix())
		return
	}
	c.add(check, OK, fmt.Sprintf("%s holds exactly the %d VIPs the daemon wants", ipvsmode.DummyName, n), "")
}

// vsID renders a virtual server as ipvsadm lists it ("TCP 10.96.0.10:80").
func vsID(proto string, addr netip.Addr, port uint16) string {
	return proto + " " + netip.AddrPortFrom(addr, port).String()
}

func (c *checkup) checkDriftVirtualServers(k *kernelSnap) {
	const check = "drift: virtual servers"
	if k.tableErr != nil {
		c.add(check, Warn, fmt.Sprintf("cannot read the IPVS table: %v", k.tableErr), "")
		return
	}
	have := map[string]bool{}
	for _, e := range k.table {
		s := e.Service
		if s.FWMark == 0 {
			have[vsID(s.Protocol.Name(), s.Addr, s.Port)] = true
		}
	}
	var missing []string
	n := 0
	for _, f := range c.state.Families {
		if !f.Synced {
			continue
		}
		for _, v := range f.VirtualServers {
			a, err := netip.ParseAddr(v.Address)
			if err != nil {
				continue
			}
			n++
			if id := vsID(v.Protocol, a, v.Port); !have[id] {
				missing = append(missing, id+" ("+v.Kind+" "+v.Namespace+"/"+v.Name+")")
			}
		}
	}
	if len(missing) > 0 {
		c.add(check, Warn, "IPVS lacks "+listSome(missing, 3), c.driftFix())
		return
	}
	c.add(check, OK, fmt.Sprintf("IPVS holds all %d virtual servers the daemon wants", n), "")
}

func (c *checkup) checkForeignVirtualServers(k *kernelSnap) {
	const check = "foreign virtual servers"
	if k.tableErr != nil {
		return // reported by the virtual server drift check
	}
	want := map[string]bool{}
	kipvsAddr := map[netip.Addr]string{}
	for _, f := range c.state.Families {
		for _, v := range f.VirtualServers {
			a, err := netip.ParseAddr(v.Address)
			if err != nil {
				continue
			}
			want[vsID(v.Protocol, a, v.Port)] = true
			if kipvsAddr[a] == "" {
				kipvsAddr[a] = v.Kind + " of " + v.Namespace + "/" + v.Name
			}
		}
	}
	onDummy := map[netip.Addr]bool{}
	for _, a := range k.dummy {
		onDummy[a] = true
		if kipvsAddr[a] == "" {
			kipvsAddr[a] = "bound on " + ipvsmode.DummyName
		}
	}
	var bad, fixes []string
	for _, e := range k.table {
		s := e.Service
		if s.FWMark != 0 {
			continue
		}
		id := vsID(s.Protocol.Name(), s.Addr, s.Port)
		owner, shared := kipvsAddr[s.Addr]
		if want[id] || !shared {
			continue
		}
		what := fmt.Sprintf("%s shares %s with kipvs's %s", id, s.Addr, owner)
		switch {
		case c.excluded(s.Addr):
			what += " (inside --ipvs-exclude-cidrs, so kipvs leaves it alone)"
		case onDummy[s.Addr]:
			what += " (its VIP is on " + ipvsmode.DummyName + ", so kipvs deletes it at its next full sync)"
		}
		bad = append(bad, what)
		fixes = append(fixes, ipvsadmDelete(s.ServiceKey))
	}
	if len(bad) > 0 {
		c.add(check, Warn, listSome(bad, 3)+": packets to that address and port go to another program's virtual server",
			"move the other program's virtual server to an address kipvs does not use ("+listSome(fixes, 2)+" removes it)")
		return
	}
	c.add(check, OK, "no virtual server of another program shares an address with kipvs's", "")
}

func ipvsadmDelete(k ipvs.ServiceKey) string {
	opt := map[inet.Protocol]string{inet.TCP: "-t", inet.UDP: "-u", inet.SCTP: "--sctp-service"}[k.Protocol]
	return "ipvsadm -D " + opt + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

func (c *checkup) excluded(a netip.Addr) bool {
	for _, p := range c.cfg.IPVS.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (c *checkup) checkDraining() {
	const check = "draining real servers"
	grace, err := time.ParseDuration(c.state.GracefulPeriod)
	if err != nil {
		grace = c.cfg.Kipvs.GracefulPeriod
	}
	now := c.view.Now()
	var stuck []string
	n := 0
	for _, f := range c.state.Families {
		for _, d := range f.Draining {
			n++
			age := now.Sub(d.Since)
			if grace > 0 && age > grace+DrainSlack {
				a, _ := netip.ParseAddr(d.Address)
				stuck = append(stuck, fmt.Sprintf("%s of %s at weight 0 since %s (%s ago)", d.RealServer, vsID(d.Protocol, a, d.Port),
					d.Since.UTC().Format(time.RFC3339), age.Truncate(time.Second)))
			}
		}
	}
	slices.Sort(stuck)
	if len(stuck) > 0 {
		c.add(check, Warn, fmt.Sprintf("%s, longer than the graceful period %s: kipvs fails to delete drained real servers", listSome(stuck, 3), grace),
			"read kipvs's log for failed drains (\"draining real servers failed\"); ipvsadm -d removes one by hand")
		return
	}
	if grace == 0 {
		c.add(check, OK, fmt.Sprintf("%d real servers draining until their connections end (--kipvs-graceful-period=0: no time limit)", n), "")
		return
	}
	c.add(check, OK, fmt.Sprintf("%d real servers draining, none for longer than the graceful period %s", n, grace), "")
}
