package daemon

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
)

// dualNode is one dual-stack node's kernel over the fakes: IPVS, ipsets and the dummy link
// are shared by both families, as in the kernel; iptables and ip6tables are separate.
type dualNode struct {
	ipvs     *ipvstest.Fake
	ipset    *ipsettest.Fake
	nf4, nf6 *netfiltertest.Fake
	// nft4 and nft6 are the nftables backend's tables (used when the scenario says so).
	nft4, nft6 *nfttest.Fake
	dummy      *dummyiftest.Fake
	sysctl     *sysctltest.Fake
}

func newDualNode() *dualNode {
	n := &dualNode{
		ipvs: ipvstest.NewFake(), ipset: ipsettest.NewFake(),
		nf4: netfiltertest.NewFake(inet.IPv4), nf6: netfiltertest.NewFake(inet.IPv6),
		nft4: nfttest.New(inet.IPv4), nft6: nfttest.New(inet.IPv6),
		dummy: dummyiftest.NewFake(ipvsmode.DummyName),
		sysctl: sysctltest.NewFake(map[string]string{
			"net/ipv4/vs/conntrack": "0", "net/ipv4/vs/expire_nodest_conn": "0", "net/ipv4/vs/expire_quiescent_template": "0",
			"net/ipv4/ip_forward": "0", "net/ipv6/conf/all/forwarding": "0", "net/netfilter/nf_conntrack_max": "65536",
			"net/netfilter/nf_conntrack_tcp_timeout_established": "432000", "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "60",
		}),
	}
	exists := func(name string) bool { _, err := n.ipset.List(name); return err == nil }
	n.nf4.SetIPSets(exists)
	n.nf6.SetIPSets(exists)
	return n
}

// nodeDump is every fake's Dump.
type nodeDump struct{ ipvs, ipset, iptables, ip6tables, nft4, nft6, dummy string }

func (d nodeDump) parts() []struct{ name, text string } {
	return []struct{ name, text string }{{"ipvs", d.ipvs}, {"ipset", d.ipset}, {"iptables", d.iptables}, {"ip6tables", d.ip6tables},
		{"nft ip kipvs", d.nft4}, {"nft ip6 kipvs", d.nft6}, {"kube-ipvs0", d.dummy}}
}

func (n *dualNode) dump() (nodeDump, error) {
	var d nodeDump
	var err error
	if d.ipvs, err = n.ipvs.Dump(); err != nil {
		return d, err
	}
	if d.ipset, err = n.ipset.Dump(); err != nil {
		return d, err
	}
	if d.iptables, err = n.nf4.Dump(context.Background()); err != nil {
		return d, err
	}
	if d.ip6tables, err = n.nf6.Dump(context.Background()); err != nil {
		return d, err
	}
	d.nft4, d.nft6 = n.nft4.Dump(), n.nft6.Dump()
	d.dummy, err = n.dummy.Dump()
	return d, err
}

// mutations counts the mutations of the fakes that count them.
func (n *dualNode) mutations() [2]int { return [2]int{n.ipvs.Mutations(), n.ipset.Mutations()} }

// fuzzDaemon is a Daemon over a dualNode and a memSource, driven by calling sync directly
// (the function the runner calls).
type fuzzDaemon struct {
	node *dualNode
	src  *memSource
	d    *Daemon
}

func newFuzzDaemon(localMode string) (*fuzzDaemon, error) { return newFuzzDaemonOn(localMode, false) }

// newFuzzDaemonOn is newFuzzDaemon over the nftables filter backend when nft.
func newFuzzDaemonOn(localMode string, nft bool) (*fuzzDaemon, error) {
	// Small per-Service server limits, so that a hostile product stays cheap to build.
	f, err := newFuzzDaemonWith(localMode, func(cfg *config.Config, _ *Deps) {
		cfg.Kipvs.MaxServiceVirtualServers = fuzzMaxServiceVirtualServers
		cfg.Kipvs.MaxServiceRealServers = fuzzMaxServiceRealServers
		if nft {
			cfg.Kipvs.FilterBackend = config.FilterNFTables
		}
	})
	if err != nil {
		return nil, err
	}
	n := f.node
	// The sets exist already, small (maxelem fuzzSetMaxElem, as a kernel with little room
	// would have them): a hostile Service must not overflow them, and growing one past it
	// is kipvs's business.
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, s := range proxy.AllSets() {
			set := iptables.IPSet(f, s)
			if set.Type.IsHash() && s != proxy.SetIPVSIPs {
				set.MaxElem = fuzzSetMaxElem
				if err := n.ipset.Create(set); err != nil {
					return nil, err
				}
			}
		}
	}
	return f, nil
}

// newFuzzDaemonWith is newFuzzDaemon with the configuration and dependencies changed by
// mutate (if not nil) before the daemon is created.
func newFuzzDaemonWith(localMode string, mutate func(*config.Config, *Deps)) (*fuzzDaemon, error) {
	n := newDualNode()
	src := newMemSource(fuzzNodeName)
	cfg := config.Defaults()
	cfg.ClusterCIDRs = slices.Clone(fuzzClusterCIDRs)
	cfg.DetectLocalMode = config.LocalMode(localMode)
	cfg.IPVS.MinSyncPeriod = 0
	cfg.IPVS.SyncPeriod = time.Hour
	cfg.Kipvs.MaxServiceSetMembers = fuzzMaxServiceSetMembers
	deps := Deps{
		Source: src, IPVS: n.ipvs,
		Kernel: func(f inet.Family) (reconcile.Kernel, error) {
			nf := n.nf4
			if f == inet.IPv6 {
				nf = n.nf6
			}
			k := reconcile.Kernel{IPVS: n.ipvs, Filter: iptables.New(f, n.ipset, nf), Dummy: n.dummy, Conntrack: conntracktest.NewFake()}
			if cfg.Kipvs.FilterBackend == config.FilterNFTables {
				k.Filter = nftables.New(map[inet.Family]*nfttest.Fake{inet.IPv4: n.nft4, inet.IPv6: n.nft6}[f])
			}
			return k, nil
		},
		Sysctl:            n.sysctl,
		HostAddrs:         func() ([]netip.Addr, error) { return slices.Clone(fuzzHostAddrs), nil },
		NodeLinks:         func() ([]netip.Prefix, error) { return slices.Clone(fuzzNodeLinks), nil },
		APIServerAddrs:    []netip.Addr{netip.MustParseAddr(fuzzAPIServer4)},
		IPv6:              func() error { return nil },
		KernelRelease:     "6.1.0-56-amd64",
		NumCPU:            4,
		Registry:          prometheus.NewRegistry(),
		HealthCheckListen: newMemListener,
	}
	if mutate != nil {
		mutate(&cfg, &deps)
	}
	// A GracefulPeriod of 0: removed real servers go at once, so removal converges exactly.
	d, err := build(cfg, fuzzNodeName, zap.NewNop(), deps, 0)
	if err != nil {
		return nil, err
	}
	if len(d.families) != 2 {
		return nil, fmt.Errorf("daemon runs %d families, want dual-stack", len(d.families))
	}
	if err := d.Prepare(context.Background()); err != nil {
		return nil, err
	}
	return &fuzzDaemon{node: n, src: src, d: d}, nil
}

func (f *fuzzDaemon) close() { f.d.hc.Close() }

// objects is one set of objects for the source.
type objects struct {
	services []*v1.Service
	slices   []*discoveryv1.EndpointSlice
	node     *v1.Node
}

// deepCopy returns fresh copies, so a re-set source sees new pointers with equal content.
func (o objects) deepCopy() objects {
	out := objects{node: o.node.DeepCopy()}
	for _, s := range o.services {
		out.services = append(out.services, s.DeepCopy())
	}
	for _, s := range o.slices {
		out.slices = append(out.slices, s.DeepCopy())
	}
	return out
}

func (f *fuzzDaemon) set(o objects, touchAll bool) {
	f.src.Set(o.services, o.slices, o.node, touchAll)
}

// fuzzCase is the outcome of the oracle over one scenario.
type fuzzCase struct {
	sc       *scenario
	verdicts []*verdict
	all      objects // run A: every object as generated
	clean    objects // run B: well-formed Services, and partial ones sanitized
}

func newFuzzCase(sc *scenario) *fuzzCase {
	c := &fuzzCase{sc: sc, all: objects{node: sc.node}, clean: objects{node: sc.node}}
	dns, dnsSlices := fuzzKubeDNS()
	for i, svc := range append([]*v1.Service{dns}, sc.services...) {
		sl := dnsSlices
		if i > 0 {
			sl = sc.slices[i-1]
		}
		v := judge(svc, sl)
		c.verdicts = append(c.verdicts, v)
		c.all.services = append(c.all.services, svc)
		c.all.slices = append(c.all.slices, sl...)
		if v.class != malformed {
			c.clean.services = append(c.clean.services, v.svc)
			c.clean.slices = append(c.clean.slices, v.slices...)
		}
	}
	return c
}

func (c *fuzzCase) describe() string {
	var b strings.Builder
	for _, v := range c.verdicts {
		fmt.Fprintf(&b, "  %s: %s", v.name, v.class)
		if len(v.reasons) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(v.reasons, "; "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkSync runs one scenario through every invariant and returns the first violation.
func checkSync(sc *scenario) (err error) {
	c := newFuzzCase(sc)
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\nservices:\n%s", err, c.describe())
		}
	}()
	ctx := context.Background()

	// Run A: every object; one full sync.
	a, err := newFuzzDaemonOn(sc.localMode, sc.nftables)
	if err != nil {
		return fmt.Errorf("build daemon: %w", err)
	}
	defer a.close()
	a.set(c.all, false)
	if err := a.d.sync(ctx, true); err != nil {
		return fmt.Errorf("INVARIANT sync-error: first full sync over every object: %w", err)
	}
	dumpA, err := a.node.dump()
	if err != nil {
		return err
	}
	// The ownership and claims checks read the ipsets' dump; they are about what the proxy
	// builds, which is the same for both backends.
	if !sc.nftables {
		if err := checkOwnership(c, dumpA, sc.localMode); err != nil {
			return err
		}
		if err := checkClaimsAndLimits(c, a.d, dumpA); err != nil {
			return err
		}
	}

	// A second sync, full then incremental over every Service, changes nothing.
	m := a.node.mutations()
	if err := a.d.sync(ctx, true); err != nil {
		return fmt.Errorf("INVARIANT sync-error: second full sync: %w", err)
	}
	if err := sameDump(a.node, dumpA, m, "INVARIANT idempotent: second full sync"); err != nil {
		return err
	}
	a.set(c.all.deepCopy(), true)
	if err := a.d.sync(ctx, false); err != nil {
		return fmt.Errorf("INVARIANT sync-error: incremental sync of every Service: %w", err)
	}
	if err := sameDump(a.node, dumpA, m, "INVARIANT idempotent: incremental sync of every Service"); err != nil {
		return err
	}

	// Run B: only the well-formed Services and the partial ones sanitized, on a fresh node.
	b, err := newFuzzDaemonOn(sc.localMode, sc.nftables)
	if err != nil {
		return fmt.Errorf("build daemon: %w", err)
	}
	defer b.close()
	b.set(c.clean, false)
	if err := b.d.sync(ctx, true); err != nil {
		return fmt.Errorf("INVARIANT sync-error: full sync over the well-formed objects only: %w", err)
	}
	dumpB, err := b.node.dump()
	if err != nil {
		return err
	}

	// Well-formed (and partial) Services are programmed in A exactly as in B; whatever A has
	// beyond B is made of a malformed Service's valid values (read from the ipsets' dump:
	// with the nftables backend, the convergence below is what is checked).
	if !sc.nftables {
		if err := compareRuns(c, dumpA, dumpB); err != nil {
			return err
		}
	}

	// Removing the bad objects converges to B, incrementally and then with a full sync.
	a.set(c.clean.deepCopy(), false)
	if err := a.d.sync(ctx, false); err != nil {
		return fmt.Errorf("INVARIANT sync-error: incremental sync removing the bad objects: %w", err)
	}
	if err := sameDump(a.node, dumpB, [2]int{-1, -1}, "INVARIANT converge: incremental sync removing the bad objects vs never having had them"); err != nil {
		return err
	}
	if err := a.d.sync(ctx, true); err != nil {
		return fmt.Errorf("INVARIANT sync-error: full sync after removing the bad objects: %w", err)
	}
	return sameDump(a.node, dumpB, [2]int{-1, -1}, "INVARIANT converge: full sync after removing the bad objects vs never having had them")
}

// ownersOnly returns the objects with every external IP and load balancer ingress IP
// removed: each cluster IP as it is with no claim on it.
func ownersOnly(o objects) objects {
	out := o.deepCopy()
	for _, s := range out.services {
		s.Spec.ExternalIPs = nil
		s.Status.LoadBalancer.Ingress = nil
	}
	return out
}

// checkOwnership is issue 23's invariant over a whole sync: every virtual server of a
// cluster IP holds in run A (every object) exactly what it holds with no external or
// ingress IP anywhere (run O): its -A line, its real servers and the set members of its
// address, protocol and port. No Service's claims, whatever the names, change the
// virtual servers another Service's cluster IP owns.
func checkOwnership(c *fuzzCase, a nodeDump, localMode string) error {
	o, err := newFuzzDaemon(localMode)
	if err != nil {
		return fmt.Errorf("build daemon: %w", err)
	}
	defer o.close()
	o.set(ownersOnly(c.all), false)
	if err := o.d.sync(context.Background(), true); err != nil {
		return fmt.Errorf("INVARIANT sync-error: full sync without external and ingress IPs: %w", err)
	}
	dumpO, err := o.node.dump()
	if err != nil {
		return err
	}
	clusterIPs := map[netip.Addr]bool{}
	for _, s := range c.all.services {
		if hostileSize(s) {
			// A Service over a per-Service limit is refused whole for its own
			// size, which its own ingress IPs count in: with them removed (run O) it may
			// fit. Its cluster IP says nothing of other Services' claims.
			continue
		}
		for _, ip := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(ip); err == nil {
				clusterIPs[a.Unmap()] = true
			}
		}
	}
	blocksA, blocksO := ipvsBlocks(a.ipvs), ipvsBlocks(dumpO.ipvs)
	keys := slices.SortedFunc(maps.Keys(blocksO), func(x, y vsKey) int { return strings.Compare(x.String(), y.String()) })
	for _, key := range keys {
		if !clusterIPs[key.addr.Addr()] {
			continue
		}
		if ba, bo := blocksA[key], blocksO[key]; ba != bo {
			return fmt.Errorf("INVARIANT ownership: cluster IP virtual server %s %s differs when other Services claim it:\n--- no claims ---\n%s\n--- every object ---\n%s", key.proto, key.addr, bo, ba)
		}
		if ma, mo := keyMembers(a.ipset, key), keyMembers(dumpO.ipset, key); ma != mo {
			return fmt.Errorf("INVARIANT ownership: set members of cluster IP %s %s differ when other Services claim it:\n--- no claims ---\n%s\n--- every object ---\n%s", key.proto, key.addr, mo, ma)
		}
	}
	return nil
}

// vsKey is a virtual server in an ipvsadm -Sn dump: its protocol option and address.
type vsKey struct {
	proto string // -t, -u, --sctp-service
	addr  netip.AddrPort
}

func (k vsKey) String() string { return k.proto + " " + k.addr.String() }

// ipvsBlocks splits an ipvsadm -Sn dump into each virtual server's -A line and its sorted
// -a lines.
func ipvsBlocks(dump string) map[vsKey]string {
	lines := map[vsKey][]string{}
	for _, l := range strings.Split(dump, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || (f[0] != "-A" && f[0] != "-a") {
			continue
		}
		ap, err := netip.ParseAddrPort(f[2])
		if err != nil {
			continue
		}
		k := vsKey{proto: f[1], addr: ap}
		lines[k] = append(lines[k], l)
	}
	out := map[vsKey]string{}
	for k, ls := range lines {
		slices.Sort(ls) // "-A" sorts before "-a"
		out[k] = strings.Join(ls, "\n")
	}
	return out
}

// keyMembers returns the ipset member lines of a virtual server's address, protocol and
// port, sorted.
func keyMembers(dump string, k vsKey) string {
	proto := map[string]string{"-t": "tcp", "-u": "udp"}[k.proto]
	if proto == "" {
		proto = "sctp"
	}
	prefix := fmt.Sprintf("%s,%s:%d", k.addr.Addr(), proto, k.addr.Port())
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "add" && (f[2] == prefix || strings.HasPrefix(f[2], prefix+",")) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// sameDump compares the node's dump with want and, unless m is {-1,-1}, its mutation counts.
func sameDump(n *dualNode, want nodeDump, m [2]int, what string) error {
	got, err := n.dump()
	if err != nil {
		return err
	}
	for i, p := range got.parts() {
		if w := want.parts()[i]; p.text != w.text {
			return fmt.Errorf("%s: %s differs:\n%s", what, p.name, lineDiff(w.text, p.text))
		}
	}
	if m != [2]int{-1, -1} && n.mutations() != m {
		return fmt.Errorf("%s: planned kernel changes (ipvs, ipset mutations %v -> %v) with an unchanged dump", what, m, n.mutations())
	}
	return nil
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := lineSet(want), lineSet(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if l != "" && !g[l] {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !w[l] {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "  (same lines, different order)\n"
	}
	return b.String()
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			m[l] = true
		}
	}
	return m
}

// compareRuns checks that every kernel line of run B is in run A (the well-formed and
// partial Services are fully programmed whatever else there is), and that every line of A
// that B lacks is explained by one malformed Service's valid values.
func compareRuns(c *fuzzCase, a, b nodeDump) error {
	setsA, setsB := nonEmptySets(a.ipset), nonEmptySets(b.ipset)
	for i, pa := range a.parts() {
		pb := b.parts()[i]
		la, lb := lineSet(pa.text), lineSet(pb.text)
		for _, l := range strings.Split(pb.text, "\n") {
			if l != "" && !la[l] && !lostToMalformed(c, l) && !emptiedByLoss(c, l, setsA, b.ipset) {
				return fmt.Errorf("INVARIANT well-formed-programmed: %s line %q of the well-formed objects alone is missing when the other objects are there too", pa.name, l)
			}
		}
		for _, l := range strings.Split(pa.text, "\n") {
			if l == "" || lb[l] {
				continue
			}
			if why := explain(c, pa.name, l, setsA, setsB); why != "" {
				return fmt.Errorf("INVARIANT bad-parts-skipped: %s line %q is not part of the well-formed objects and %s", pa.name, l, why)
			}
		}
	}
	return nil
}

// lostToMalformed reports whether line l (of run B) is about an address that is a cluster IP
// of a malformed Service of run A: a well-formed Service's external or ingress IP there
// loses to that cluster IP whenever kipvs programs the malformed Service anyway (it is
// lenient where the apiserver would have filled a field in, e.g. a missing ipFamilies), as
// a Service's own cluster IP always wins.
func lostToMalformed(c *fuzzCase, l string) bool {
	for i, v := range c.verdicts {
		if v.class != malformed {
			continue
		}
		for _, ip := range c.all.services[i].Spec.ClusterIPs {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(l) {
				f = strings.TrimPrefix(f, "[")
				if j := strings.IndexAny(f, ",/]"); j >= 0 {
					f = f[:j]
				}
				if j := strings.LastIndex(f, ":"); j >= 0 && strings.Contains(f, ".") {
					f = f[:j]
				}
				if f == a.String() {
					return true
				}
			}
		}
	}
	return false
}

// emptiedByLoss reports whether l is a rule on a set that run A leaves empty only because
// every member run B has in it lost to a malformed Service's cluster IP (lostToMalformed):
// kipvs writes a set's rules only while the set has members.
func emptiedByLoss(c *fuzzCase, l string, setsA map[string]bool, ipsetB string) bool {
	f := strings.Fields(l)
	i := slices.Index(f, "--match-set")
	if i < 0 || i+1 >= len(f) || setsA[f[i+1]] {
		return false
	}
	lost := false
	for _, m := range strings.Split(ipsetB, "\n") {
		mf := strings.Fields(m)
		if len(mf) < 3 || mf[0] != "add" || mf[1] != f[i+1] {
			continue
		}
		if !lostToMalformed(c, m) {
			return false
		}
		lost = true
	}
	return lost
}

// nonEmptySets lists the sets with members in an ipset dump.
func nonEmptySets(dump string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(dump, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "add" {
			m[f[1]] = true
		}
	}
	return m
}

// lineTokens are the values a kernel dump line is made of.
type lineTokens struct {
	pairs    []netip.AddrPort // an address with its port (ipvsadm ip:port, ipset ip,proto:port)
	addrs    []netip.Addr
	ports    []uint16
	nets     []netip.Prefix
	timeouts []uint32
	sets     []string // ipsets a rule matches
	bad      []string // values no valid object can produce
	// realServer: an ipvsadm "-a" line, pairs[0] the virtual server, pairs[1] the real one.
	realServer bool
}

func tokenize(part, line string) lineTokens {
	var t lineTokens
	f := strings.Fields(line)
	t.realServer = part == "ipvs" && len(f) > 0 && f[0] == "-a"
	num := func(s string) (uint64, bool) {
		n, err := strconv.ParseUint(s, 10, 64)
		return n, err == nil
	}
	port := func(s string) {
		if n, ok := num(s); ok && n >= 1 && n <= 65535 {
			t.ports = append(t.ports, uint16(n))
		} else {
			t.bad = append(t.bad, "port "+s)
		}
	}
	value := func(s string) {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			if ap.Port() == 0 {
				t.bad = append(t.bad, "port 0")
			}
			t.pairs = append(t.pairs, ap)
			return
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Bits() == p.Addr().BitLen() {
				t.addrs = append(t.addrs, p.Addr())
			} else {
				t.nets = append(t.nets, p)
			}
			return
		}
		if a, err := netip.ParseAddr(s); err == nil {
			t.addrs = append(t.addrs, a)
			return
		}
		for _, proto := range []string{"tcp:", "udp:", "sctp:"} {
			if rest, ok := strings.CutPrefix(s, proto); ok {
				port(rest)
			}
		}
	}
	for i := 0; i < len(f); i++ {
		next := ""
		if i+1 < len(f) {
			next = f[i+1]
		}
		switch {
		case part == "ipvs" && f[i] == "-p":
			if n, ok := num(next); ok && n >= 1 && n <= 86400 {
				t.timeouts = append(t.timeouts, uint32(n))
			} else {
				t.bad = append(t.bad, "persistence timeout "+next)
			}
			i++
		case part == "ipvs" && (f[i] == "-w" || f[i] == "-s" || f[i] == "-M" || f[i] == "-b" || f[i] == "-x" || f[i] == "-y"):
			i++
		case part == "ipset" && f[0] == "add" && i == 2:
			if _, ok := num(f[i]); ok {
				port(f[i])
				continue
			}
			vals := strings.Split(f[i], ",")
			if len(vals) >= 2 {
				if _, p, ok := strings.Cut(vals[1], ":"); ok {
					if n, ok := num(p); ok && n <= 65535 {
						if a, err := netip.ParseAddr(vals[0]); err == nil {
							vals[0], vals[1] = netip.AddrPortFrom(a, uint16(n)).String(), ""
						}
					}
				}
			}
			if len(vals) == 3 && strings.Contains(f[1], "SOURCE-CID") {
				// hash:ip,port,net: ipset prints a host net as a bare address.
				if a, err := netip.ParseAddr(vals[2]); err == nil {
					t.nets = append(t.nets, netip.PrefixFrom(a, a.BitLen()))
					vals[2] = ""
				}
			}
			for _, v := range vals {
				if v != "" {
					value(v)
				}
			}
		case part == "ipset" && i < 3:
		case strings.HasSuffix(part, "tables") && (f[i] == "--vport" || f[i] == "--dport"):
			port(next)
			i++
		case strings.HasSuffix(part, "tables") && f[i] == "--match-set":
			t.sets = append(t.sets, next)
			i++
		case strings.HasSuffix(part, "tables") && (f[i] == "--comment" || f[i] == "--vproto"):
			i++
		default:
			value(f[i])
		}
	}
	return t
}

// explain says why a line of run A that run B lacks cannot be attributed to a malformed
// Service ("" when it can): all its addresses, ports, source CIDRs and persistence timeouts
// must be valid values of one malformed Service (node addresses are anyone's), and a rule
// with no such values must match a set that only the malformed Services fill.
func explain(c *fuzzCase, part, line string, setsA, setsB map[string]bool) string {
	t := tokenize(part, line)
	for _, s := range t.sets {
		if setsA[s] && !setsB[s] {
			return "" // a rule that exists while the set has members, and only malformed Services fill it
		}
	}
	if len(t.bad) > 0 {
		return fmt.Sprintf("holds %s, which no valid object produces", strings.Join(t.bad, ", "))
	}
	for _, a := range append(slices.Clone(t.addrs), pairAddrs(t.pairs)...) {
		if why := vipProblem(a.String()); why != "" && why != "an address of the node" && endpointProblem(a.String(), "") != "" {
			return fmt.Sprintf("holds %s, which is %s", a, why)
		}
	}
	if len(t.pairs)+len(t.addrs)+len(t.ports)+len(t.nets)+len(t.timeouts) == 0 {
		return "nothing in it belongs to a malformed Service"
	}
	for _, v := range c.verdicts {
		if v.class == malformed && v.explains(t) {
			return ""
		}
	}
	return "no malformed Service has all of its values"
}

func pairAddrs(ps []netip.AddrPort) []netip.Addr {
	var out []netip.Addr
	for _, p := range ps {
		out = append(out, p.Addr())
	}
	return out
}

// explains reports whether every value of a line is a valid value of the Service, in its
// place: a virtual IP with a service port, a node address with a node port, an endpoint
// with an endpoint port.
func (v *verdict) explains(t lineTokens) bool {
	for _, ap := range t.pairs {
		a, p := ap.Addr(), ap.Port()
		if !(v.vips[a] && v.svcPorts[p]) && !(slices.Contains(fuzzHostAddrs, a) && v.nodePorts[p]) && !(v.eps[a] && v.epPorts[p]) {
			return false
		}
	}
	// An IPVS real server line: the real server's port must be an endpoint port of the
	// virtual server's service port (a wrapped port would pair them wrongly).
	if t.realServer && len(t.pairs) == 2 && !v.rsPorts[t.pairs[0].Port()][t.pairs[1].Port()] {
		return false
	}
	for _, a := range t.addrs {
		if !v.vips[a] && !v.eps[a] {
			return false
		}
	}
	for _, p := range t.ports {
		if !v.svcPorts[p] && !v.nodePorts[p] && p != v.hcPort {
			return false
		}
	}
	for _, n := range t.nets {
		ok := false
		for _, r := range v.nets {
			if r.Bits() <= n.Bits() && r.Contains(n.Addr()) && n.Bits() > 0 {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	for _, to := range t.timeouts {
		if !v.timeouts[to] && !v.anyTimeout {
			return false
		}
	}
	return true
}

// fuzzKubeDNS is a well-formed kube-system Service every scenario has (within the reserve of
// the node-wide budgets): whatever the other Services are, it is programmed.
func fuzzKubeDNS() (*v1.Service, []*discoveryv1.EndpointSlice) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"}}
	svc.Spec.Type = v1.ServiceTypeClusterIP
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = fuzzKubeDNSIP, []string{fuzzKubeDNSIP}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	pol := v1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy = &pol
	svc.Spec.SessionAffinity = v1.ServiceAffinityNone
	itp := v1.ServiceInternalTrafficPolicyCluster
	svc.Spec.InternalTrafficPolicy = &itp
	svc.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)}}
	name, proto, port, ready, node := "dns", v1.ProtocolUDP, int32(53), true, fuzzNodeName
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-0", Namespace: "kube-system",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.250.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &node}}}
	return svc, []*discoveryv1.EndpointSlice{sl}
}

const fuzzKubeDNSIP = "10.96.0.250"

// checkClaimsAndLimits is the hostile tenant's invariant over run A: no address of a pod (the
// cluster CIDR), of the node, its gateway or neighbours (its links' prefixes) or of the
// apiserver is bound on kube-ipvs0 or is the address of a Service's virtual server (a node
// port's virtual servers are on the node's addresses by design); no Service holds more
// virtual or real servers than the per-Service limits; and kube-system's kube-dns is
// programmed with its endpoint.
func checkClaimsAndLimits(c *fuzzCase, d *Daemon, dump nodeDump) error {
	forbidden := othersAddress
	for _, l := range strings.Split(dump.dummy, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != "addr" {
			continue
		}
		p, err := netip.ParsePrefix(f[1])
		if err != nil {
			return fmt.Errorf("kube-ipvs0 dump line %q: %w", l, err)
		}
		if why := forbidden(p.Addr()); why != "" || slices.Contains(fuzzHostAddrs, p.Addr()) {
			return fmt.Errorf("INVARIANT claims: %s is bound on kube-ipvs0 (%s%s)", p.Addr(), why, map[bool]string{true: "the node's address"}[why == ""])
		}
	}
	for k := range ipvsBlocks(dump.ipvs) {
		if slices.Contains(fuzzHostAddrs, k.addr.Addr()) {
			continue // a node port
		}
		if why := forbidden(k.addr.Addr()); why != "" {
			return fmt.Errorf("INVARIANT claims: virtual server %s (%s)", k, why)
		}
	}
	for _, f := range d.families {
		for _, svc := range c.all.services {
			st := f.desired.Service(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
			if st == nil {
				continue
			}
			reals := 0
			for _, vs := range st.VirtualServers {
				reals += len(vs.Destinations)
			}
			if len(st.VirtualServers) > fuzzMaxServiceVirtualServers || reals > fuzzMaxServiceRealServers {
				return fmt.Errorf("INVARIANT limits: %s/%s has %d virtual servers and %d real servers in %s, beyond the limits %d and %d",
					svc.Namespace, svc.Name, len(st.VirtualServers), reals, f.ipFamily, fuzzMaxServiceVirtualServers, fuzzMaxServiceRealServers)
			}
		}
	}
	dns := ipvsBlocks(dump.ipvs)[vsKey{proto: "-u", addr: netip.AddrPortFrom(netip.MustParseAddr(fuzzKubeDNSIP), 53)}]
	if !strings.Contains(dns, "-a -u "+fuzzKubeDNSIP+":53 -r 10.244.250.2:53") {
		return fmt.Errorf("INVARIANT reserve: kube-system/kube-dns is not programmed with its endpoint:\n%s", dns)
	}
	return nil
}
