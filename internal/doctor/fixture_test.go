package doctor

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/daemon"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/sysctl/sysctltest"
)

// The fixture is a healthy node: a kipvs daemon (its desired state built by the real proxy
// builder and applied by the real reconciler to the kernel fakes) with a ClusterIP Service
// whose endpoint is a pod on bridge cbr0, the sysctls kipvs sets, every module loaded.

// epoch is the fixture's "now".
func epoch() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

type fakeModules map[string]ModuleState

// Module implements ModuleReader: every module not listed is loaded.
func (m fakeModules) Module(name string) ModuleState {
	if s, ok := m[name]; ok {
		return s
	}
	return ModuleLoaded
}

type fakeNet struct {
	links    []Link
	routes   []Route
	get      map[netip.Addr]Route
	linksErr error
}

func (n *fakeNet) Links() ([]Link, error) {
	out := make([]Link, len(n.links))
	for i, l := range n.links {
		l.Addrs = append([]netip.Prefix(nil), l.Addrs...)
		out[i] = l
	}
	return out, n.linksErr
}

func (n *fakeNet) Routes() ([]Route, error) { return n.routes, nil }

// RouteGet is local for an address on any link, else the default route.
func (n *fakeNet) RouteGet(dst netip.Addr) (Route, error) {
	if r, ok := n.get[dst]; ok {
		return r, nil
	}
	for _, l := range n.links {
		for _, p := range l.Addrs {
			if p.Addr() == dst {
				return Route{Table: TableLocal, Type: "local", Dev: l.Name}, nil
			}
		}
	}
	return Route{Table: TableMain, Type: "unicast", Gateway: netip.MustParseAddr("192.168.50.1"), Dev: "eth0"}, nil
}

func (n *fakeNet) link(name string) *Link {
	for i := range n.links {
		if n.links[i].Name == name {
			return &n.links[i]
		}
	}
	return nil
}

// fakeIptables reads a netfilter fake; policy overrides the FORWARD policy it saves.
type fakeIptables struct {
	nf         *netfiltertest.Fake
	forwardPol string
	// empty makes Save return nothing (no table created yet).
	empty bool
	// err makes Save and Owned fail.
	err error
}

func (f *fakeIptables) Save(context.Context) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	if f.empty {
		return "", nil
	}
	s := f.nf.Save(netfilter.TableFilter) + f.nf.Save(netfilter.TableNAT)
	if f.forwardPol != "" {
		s = strings.Replace(s, ":FORWARD ACCEPT", ":FORWARD "+f.forwardPol, 1)
	}
	return s, nil
}

func (f *fakeIptables) Owned(ctx context.Context) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	rs, err := f.nf.Observe(ctx)
	if err != nil {
		return "", err
	}
	return netfilter.Format(rs.Normalize()), nil
}

type fakeConntrack struct {
	entries uint32
	err     error
}

func (f fakeConntrack) Count() (uint32, uint32, error) { return f.entries, 262144, f.err }

// fakeDaemon serves states in turn (the last one forever), or err.
type fakeDaemon struct {
	mu     sync.Mutex
	states []*debugapi.State
	err    error
	calls  int
}

func (d *fakeDaemon) Address() string { return "127.0.0.1:10249" }

func (d *fakeDaemon) State(context.Context) (*debugapi.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	st := d.states[0]
	if len(d.states) > 1 {
		d.states = d.states[1:]
	}
	return st, nil
}

// fixture is one node; tests break it, then run doctor over it.
type fixture struct {
	t       *testing.T
	cfg     config.Config
	release string
	mods    fakeModules
	sysctl  *sysctltest.Fake
	net     *fakeNet
	ipvs    *ipvstest.Fake
	ipset   *ipsettest.Fake
	nf      *netfiltertest.Fake
	ipt     *fakeIptables
	// other is iptables-legacy beside kipvs's iptables-nft (nil: not installed).
	other *fakeIptables
	// nft holds kipvs's nftables table of each family (the nftables backend's; empty with
	// the iptables backend).
	nft map[inet.Family]*nfttest.Fake
	// nftRead replaces a family's table reader (a broken one).
	nftRead map[inet.Family]NFTReader
	// nftVersion and nftErr are what `nft --version` answers; noNFT: nft is not installed.
	nftVersion string
	nftErr     error
	noNFT      bool
	// nftIPv6: the nftables backend can run the IPv6 family (View.NFTIPv6).
	nftIPv6 func() error
	// noIptables: no iptables is installed.
	noIptables bool
	// ipsetNames replaces the ipsets' ListNames (a broken one).
	ipsetNames IPSetReader
	ct         fakeConntrack
	daemon     *fakeDaemon
	state      *debugapi.State
	apiCIDR    []netip.Prefix
	noAPI      bool
	// noDaemon: no daemon address (metrics server disabled).
	noDaemon bool
	// ipv6: the node can run the IPv6 family (View.IPv6; nil: it cannot).
	ipv6 func() error
	now  time.Time
}

type fixtureOpts struct {
	// lb adds a LoadBalancer Service with ingress 203.0.113.10.
	lb bool
	// nft runs the daemon with the nftables filter backend (table ip kipvs, no ipset, no
	// iptables rule).
	nft bool
}

func webService(lb bool) (*v1.Service, *discoveryv1.EndpointSlice) {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	if lb {
		s.Name = "lb"
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"}
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: s.Name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.11"}, NodeName: ptr.To("node-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	return s, es
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, release: "6.1.0-56-amd64", mods: fakeModules{}, ipvs: ipvstest.NewFake(), ipset: ipsettest.NewFake(),
		nf: netfiltertest.NewFake(inet.IPv4), now: epoch(), nftVersion: "nftables v1.0.6 (Lester Gooch #5)\n",
		nft: map[inet.Family]*nfttest.Fake{inet.IPv4: nfttest.New(inet.IPv4), inet.IPv6: nfttest.New(inet.IPv6)}}
	f.ipt = &fakeIptables{nf: f.nf}
	f.cfg = config.Defaults()
	f.cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	f.cfg.Kipvs.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	f.cfg.HostnameOverride = "node-a"

	nodeIP := netip.MustParseAddr("192.168.50.10")
	opts := &proxy.Options{Family: inet.IPv4, Scheduler: "rr", NodeName: "node-a", MasqueradeBit: 14,
		NodePortAddresses: []netip.Addr{nodeIP}, NodeIP: nodeIP, LocalAddresses: []netip.Addr{nodeIP, netip.MustParseAddr("10.244.0.1")},
		LocalDetector: proxy.LocalDetector{Mode: proxy.LocalClusterCIDR, CIDRs: f.cfg.ClusterCIDRs}}
	desired := proxy.NewDesired(inet.IPv4)
	for _, lb := range []bool{false, true} {
		if lb && !o.lb {
			continue
		}
		s, es := webService(lb)
		desired.Update(types.NamespacedName{Namespace: s.Namespace, Name: s.Name},
			proxy.BuildService(proxy.ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{es}}, opts), nil)
	}
	dummy := dummyiftest.NewFake(ipvsmode.DummyName)
	var filter dataplane.Filter = iptables.New(inet.IPv4, f.ipset, f.nf)
	if o.nft {
		f.cfg.Kipvs.FilterBackend = config.FilterNFTables
		filter = nftables.New(f.nft[inet.IPv4])
	}
	rec := reconcile.New(reconcile.Kernel{IPVS: f.ipvs, Filter: filter, Dummy: dummy},
		reconcile.Options{Family: inet.IPv4, GracefulPeriod: 30 * time.Second, Clock: clocktesting.NewFakeClock(epoch())})
	if _, err := rec.FullSync(context.Background(), desired, opts); err != nil {
		t.Fatalf("full sync of the fixture: %v", err)
	}
	fs := daemon.FamilyState(filter, desired, opts, rec.Draining())
	fs.Synced = true
	f.state = &debugapi.State{Dummy: ipvsmode.DummyName, FilterBackend: string(f.cfg.Kipvs.FilterBackend), GracefulPeriod: "30s", Schedulers: map[string]bool{"rr": true},
		ServiceCIDRs: []string{}, Families: []debugapi.FamilyState{fs}}
	f.daemon = &fakeDaemon{}

	vips, err := dummy.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	f.net = &fakeNet{links: []Link{
		{Name: "lo", Kind: "device", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: "eth0", Kind: "device", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("192.168.50.10/24")}},
		{Name: "cbr0", Kind: "bridge", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.1/24")}},
		{Name: "veth1", Kind: "veth", Up: true, Master: "cbr0", Hairpin: true},
		{Name: ipvsmode.DummyName, Kind: "dummy", Addrs: vips},
	}, routes: []Route{
		{Table: TableMain, Type: "unicast", Gateway: netip.MustParseAddr("192.168.50.1"), Dev: "eth0"},
		{Table: TableMain, Type: "unicast", Dst: netip.MustParsePrefix("192.168.50.0/24"), Dev: "eth0"},
		{Table: TableMain, Type: "unicast", Dst: netip.MustParsePrefix("10.244.0.0/24"), Dev: "cbr0"},
		{Table: TableMain, Type: "blackhole", Dst: netip.MustParsePrefix("10.96.0.0/12")},
		{Table: TableLocal, Type: "local", Dst: netip.MustParsePrefix("10.96.0.10/32"), Dev: ipvsmode.DummyName},
	}}

	kv, err := ipvsmode.ParseKernelVersion(f.release)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ipvsmode.DesiredSysctls(kv, f.cfg.SysctlOptions(2))
	values := map[string]string{
		"net/ipv4/vs/conn_reuse_mode":    "1",
		keyArpIgnoreAll:                  "0",
		"net/ipv4/conf/all/arp_announce": "0",
		keyBridgeIptables:                "1",
		keyBridgeIp6:                     "1",
		keyConntrackCount:                "1000",
		rpFilterKey("all"):               "0",
		rpFilterKey("eth0"):              "0",
		rpFilterKey("cbr0"):              "0",
		rpFilterKey("lo"):                "0",
	}
	for _, s := range want {
		values[s.Key] = s.Value
	}
	f.sysctl = sysctltest.NewFake(values)
	return f
}

// view builds the View of the fixture as it is now.
func (f *fixture) view() View {
	f.daemon.states = []*debugapi.State{f.state}
	v := View{
		KernelRelease: f.release,
		NumCPU:        2,
		Modules:       f.mods,
		Sysctl:        f.sysctl,
		Net:           f.net,
		IPVS:          f.ipvs,
		IPSet:         f.ipset,
		Iptables:      map[inet.Family]IptablesReader{inet.IPv4: f.ipt},
		Conntrack:     f.ct,
		Daemon:        f.daemon,
		IPv6:          f.ipv6,
		Now:           func() time.Time { return f.now },
	}
	if f.other != nil {
		v.OtherBackend = "legacy"
		v.OtherIptables = map[inet.Family]IptablesReader{inet.IPv4: f.other}
	}
	if f.noIptables {
		v.Iptables, v.IptablesErr = nil, errors.New("no iptables-restore found")
	}
	if f.ipsetNames != nil {
		v.IPSet = f.ipsetNames
	}
	if f.noNFT {
		notFound := &exec.Error{Name: "nft", Err: exec.ErrNotFound}
		v.NFTErr = notFound
		v.NFTVersion = func(context.Context) (string, error) { return "", notFound }
	} else {
		v.NFT = map[inet.Family]NFTReader{}
		for fam, t := range f.nft {
			v.NFT[fam] = NewNFTReader(t)
			if r := f.nftRead[fam]; r != nil {
				v.NFT[fam] = r
			}
		}
		version, err := f.nftVersion, f.nftErr
		v.NFTVersion = func(context.Context) (string, error) { return version, err }
		v.NFTIPv6 = f.nftIPv6
	}
	if f.noDaemon {
		v.Daemon = nil
	}
	if !f.noAPI {
		cidrs := f.apiCIDR
		v.APIServiceCIDRs = func(context.Context) ([]netip.Prefix, error) { return cidrs, nil }
	}
	return v
}

func (f *fixture) run() *Report {
	f.t.Helper()
	return Run(context.Background(), &f.cfg, f.view())
}

// setSysctl changes a value of the fixture's node.
func (f *fixture) setSysctl(key, value string) {
	f.t.Helper()
	if _, _, err := f.sysctl.Set(key, value); err != nil {
		f.t.Fatal(err)
	}
}

// restore applies an iptables-restore payload to the fixture's tables.
func (f *fixture) restore(payload string) {
	f.t.Helper()
	if err := f.nf.Restore(payload); err != nil {
		f.t.Fatal(err)
	}
}

// dropSysctl removes a key, as when the module that provides it is not loaded.
func (f *fixture) dropSysctl(key string) {
	vals := f.sysctl.Values()
	p, err := sysctl.Path(key)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, ok := vals[p]; !ok {
		f.t.Fatalf("dropSysctl: no key %s", p)
	}
	delete(vals, p)
	f.sysctl = sysctltest.NewFake(vals)
}

func errBoom() error { return errors.New("boom") }

// brokenNFT is a table nft cannot read.
type brokenNFT struct {
	name string
	err  error
}

func (b brokenNFT) Name() string                                      { return b.name }
func (b brokenNFT) Chains(context.Context) ([]nft.Chain, error)       { return nil, b.err }
func (b brokenNFT) Rules(context.Context) (string, error)             { return "", b.err }
func (b brokenNFT) Members(context.Context, string) ([]string, error) { return nil, b.err }

// brokenIPSetNames is the fixture's ipsets, whose names cannot be listed.
type brokenIPSetNames struct{ *ipsettest.Fake }

func (brokenIPSetNames) ListNames() ([]string, error) { return nil, errBoom() }

// nftRun applies a transaction to the fixture's table of family fam.
func (f *fixture) nftRun(fam inet.Family, fill func(tx *knftables.Transaction)) {
	f.t.Helper()
	tx := f.nft[fam].NewTransaction()
	fill(tx)
	if err := f.nft[fam].Run(context.Background(), tx); err != nil {
		f.t.Fatal(err)
	}
}
