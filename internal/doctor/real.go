package doctor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/sysctl"
)

// RealOptions locate what NewRealView reads.
type RealOptions struct {
	// MetricsAddress is the daemon's metrics server (host:port); "" looks for no daemon.
	MetricsAddress string
	// Timeout bounds each request to the daemon and the API server (default 10 s).
	Timeout time.Duration
	// ServiceCIDRs lists the cluster's ServiceCIDR objects from the API server the
	// configuration names; nil when it names none. The caller builds the API client, so
	// this package does not depend on client-go.
	ServiceCIDRs func(ctx context.Context) ([]netip.Prefix, error)
}

// NewRealView opens a read-only view of the node doctor runs on, in its own network
// namespace: /proc, /sys and /lib/modules, netlink (links, routes, IPVS, ipset, ctnetlink),
// iptables-save, nft (its version, kipvs's tables), the daemon's metrics server and, when o.ServiceCIDRs is given, the API
// server's ServiceCIDR objects. What cannot be opened is reported by the checks that need it. The
// returned function releases the sockets.
func NewRealView(ctx context.Context, o RealOptions) (View, func()) {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	var closers []func() error
	ns := netns.None()
	var uts unix.Utsname
	release := ""
	if err := unix.Uname(&uts); err == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	v := View{
		KernelRelease: release,
		NumCPU:        runtime.NumCPU(),
		Modules:       &FSModules{Proc: "/proc", Sys: "/sys", Lib: filepath.Join("/lib/modules", release)},
		Sysctl:        sysctl.New(sysctl.DefaultRoot, ns),
		Net:           netlinkNet{},
		Now:           time.Now,
	}
	if c, err := ipvs.New(ns); err != nil {
		v.IPVS = brokenIPVS{fmt.Errorf("open IPVS generic netlink: %w", err)}
	} else {
		v.IPVS = c
		closers = append(closers, c.Close)
	}
	if s, err := ipset.New(ns); err != nil {
		v.IPSet = brokenIPSet{fmt.Errorf("open ipset netlink: %w", err)}
	} else {
		v.IPSet = s
		closers = append(closers, s.Close)
	}
	if c, err := conntrack.New(ns); err != nil {
		v.Conntrack = brokenConntrack{err}
	} else {
		v.Conntrack = c
		closers = append(closers, c.Close)
	}
	runner := netfilter.NewRunner(ns)
	v.NFTVersion = func(ctx context.Context) (string, error) {
		out, err := runner.Run(ctx, nil, "nft", "--version")
		return string(out), err
	}
	v.NFT, v.NFTErr = openNFT(ns, v.Modules)
	if _, err := exec.LookPath("nft"); err == nil {
		v.NFTIPv6 = func() error {
			_, err := os.Stat("/proc/net/if_inet6")
			return err
		}
	}
	if b, err := netfilter.Detect(ctx, runner, ""); err != nil {
		v.IptablesErr = err
	} else {
		v.Iptables = map[inet.Family]IptablesReader{
			inet.IPv4: &iptablesReader{runner: runner, family: inet.IPv4, backend: b},
			inet.IPv6: &iptablesReader{runner: runner, family: inet.IPv6, backend: b},
		}
		v.IPv6 = func() error { return netfilter.IPv6Usable(ctx, runner, b.Mode, "/proc/net/if_inet6") }
		other := netfilter.Backend{Mode: netfilter.ModeLegacy}
		if b.Mode == netfilter.ModeLegacy {
			other.Mode = netfilter.ModeNFT
		}
		if _, err := exec.LookPath("iptables-" + string(other.Mode) + "-save"); err == nil {
			v.OtherBackend = string(other.Mode)
			v.OtherIptables = map[inet.Family]IptablesReader{
				inet.IPv4: &iptablesReader{runner: runner, family: inet.IPv4, backend: other},
				inet.IPv6: &iptablesReader{runner: runner, family: inet.IPv6, backend: other},
			}
		}
	}
	if o.MetricsAddress != "" {
		v.Daemon = &httpDaemon{addr: o.MetricsAddress, client: &http.Client{Timeout: o.Timeout}}
	}
	if list := o.ServiceCIDRs; list != nil {
		v.APIServiceCIDRs = func(ctx context.Context) ([]netip.Prefix, error) {
			ctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			return list(ctx)
		}
	}
	return v, func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
}

// FSModules reads module presence from /proc/modules, /sys/module and /lib/modules/RELEASE
// (modules.builtin, modules.dep); the roots are fields so tests can point them elsewhere.
type FSModules struct {
	Proc, Sys, Lib string
}

// Module implements ModuleReader.
func (m *FSModules) Module(name string) ModuleState {
	name = strings.ReplaceAll(name, "-", "_")
	if listed(filepath.Join(m.Proc, "modules"), name, func(l string) string { return strings.SplitN(l, " ", 2)[0] }) {
		return ModuleLoaded
	}
	if _, err := os.Stat(filepath.Join(m.Sys, "module", name)); err == nil {
		return ModuleBuiltin // not in /proc/modules, so compiled in
	}
	koName := func(l string) string {
		l = strings.SplitN(l, ":", 2)[0]
		base := filepath.Base(strings.TrimSpace(l))
		if i := strings.Index(base, ".ko"); i >= 0 {
			base = base[:i]
		}
		return strings.ReplaceAll(base, "-", "_")
	}
	if listed(filepath.Join(m.Lib, "modules.builtin"), name, koName) {
		return ModuleBuiltin
	}
	if listed(filepath.Join(m.Lib, "modules.dep"), name, koName) {
		return ModuleAvailable
	}
	if _, err := os.Stat(filepath.Join(m.Lib, "modules.dep")); err != nil {
		return ModuleUnknown
	}
	return ModuleMissing
}

// listed reports whether a line of file names name (key extracts the name from a line).
func listed(file, name string, key func(string) string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if key(sc.Text()) == name {
			return true
		}
	}
	return false
}

// netlinkNet reads links and routes of the current network namespace.
type netlinkNet struct{}

// retryDump retries a netlink dump the kernel interrupted (the table changed meanwhile).
func retryDump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range 5 {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// Links implements NetReader.
func (netlinkNet) Links() ([]Link, error) {
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	byIndex := map[int]netlink.Link{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	out := make([]Link, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		lk := Link{Name: a.Name, Kind: l.Type(), Up: a.Flags&net.FlagUp != 0}
		if m, ok := byIndex[a.MasterIndex]; ok && a.MasterIndex != 0 {
			lk.Master = m.Attrs().Name
			if m.Type() == "bridge" {
				if pi, err := netlink.LinkGetProtinfo(l); err == nil {
					lk.Hairpin = pi.Hairpin
				}
			}
		}
		addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
		if err != nil {
			continue // the link went away meanwhile
		}
		for _, ad := range addrs {
			if p, ok := toPrefix(ad.IPNet); ok {
				lk.Addrs = append(lk.Addrs, p)
			}
		}
		out = append(out, lk)
	}
	return out, nil
}

// routeType names an rtnetlink route type as ip(8) does.
func routeType(t int) string {
	switch t {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_ANYCAST:
		return "anycast"
	case unix.RTN_MULTICAST:
		return "multicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_THROW:
		return "throw"
	case unix.RTN_NAT:
		return "nat"
	}
	return fmt.Sprintf("type-%d", t)
}

// linkNames maps link indexes to names.
type linkNames map[int]string

func readLinkNames() linkNames {
	names := linkNames{}
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return names
	}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	return names
}

func (n linkNames) name(index int) string {
	if index == 0 {
		return ""
	}
	if s, ok := n[index]; ok {
		return s
	}
	return fmt.Sprintf("if%d", index)
}

func toRoute(r netlink.Route, names linkNames) Route {
	out := Route{Table: r.Table, Type: routeType(r.Type), Dev: names.name(r.LinkIndex)}
	if p, ok := toPrefix(r.Dst); ok {
		out.Dst = p
	}
	if gw, ok := netip.AddrFromSlice(r.Gw); ok {
		out.Gateway = gw.Unmap()
	}
	return out
}

// Routes implements NetReader.
func (netlinkNet) Routes() ([]Route, error) {
	rs, err := retryDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	names := readLinkNames()
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		out = append(out, toRoute(r, names))
	}
	return out, nil
}

// RouteGet implements NetReader.
func (netlinkNet) RouteGet(dst netip.Addr) (Route, error) {
	rs, err := netlink.RouteGet(dst.AsSlice())
	if err != nil {
		return Route{}, fmt.Errorf("route get %s: %w", dst, err)
	}
	if len(rs) == 0 {
		return Route{}, fmt.Errorf("route get %s: no route", dst)
	}
	names := linkNames{}
	if rs[0].LinkIndex != 0 {
		if l, err := netlink.LinkByIndex(rs[0].LinkIndex); err == nil {
			names[rs[0].LinkIndex] = l.Attrs().Name
		}
	}
	return toRoute(rs[0], names), nil
}

// iptablesReader reads one family's tables with the backend's -save binary. It never runs
// anything else: the netfilter handle it builds for Owned gets a runner that refuses every
// other command.
type iptablesReader struct {
	runner  netfilter.Runner
	family  inet.Family
	backend netfilter.Backend
}

func (r *iptablesReader) saveBin() string {
	tool := "iptables"
	if r.family == inet.IPv6 {
		tool = "ip6tables"
	}
	return tool + "-" + string(r.backend.Mode) + "-save"
}

// Save implements IptablesReader.
func (r *iptablesReader) Save(ctx context.Context) (string, error) {
	out, err := r.runner.Run(ctx, nil, r.saveBin(), "-c")
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.saveBin(), err)
	}
	return string(out), nil
}

// Owned implements IptablesReader.
func (r *iptablesReader) Owned(ctx context.Context) (string, error) {
	readOnly := netfilter.RunnerFunc(func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		if name != r.saveBin() || stdin != nil {
			return nil, fmt.Errorf("kipvs doctor is read-only: refusing to run %s", name)
		}
		return r.runner.Run(ctx, nil, name, args...)
	})
	h, err := netfilter.New(netns.None(), r.family, r.backend, netfilter.WithRunner(readOnly))
	if err != nil {
		return "", err
	}
	rs, err := h.Observe(ctx)
	if err != nil {
		return "", err
	}
	return netfilter.Format(rs.Normalize()), nil
}

// openNFT opens kipvs's nftables table of each family for reading. Without nf_tables in
// the kernel no table exists, and nft is not run (its start-up check would load the
// module): every family reads as no table.
func openNFT(ns netns.NsHandle, mods ModuleReader) (map[inet.Family]NFTReader, error) {
	out := map[inet.Family]NFTReader{}
	var errs []error
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		if s := mods.Module("nf_tables"); s != ModuleLoaded && s != ModuleBuiltin {
			out[f] = noTable{name: nftTableName(f)}
			continue
		}
		conn, err := nft.New(ns, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		out[f] = NewNFTReader(conn)
	}
	return out, errors.Join(errs...)
}

// nftReader reads a kipvs table through package nft. It calls only the table's list
// methods: Chains, and through the nftables dataplane ListMembers and ObserveRules.
type nftReader struct {
	conn   nft.Interface
	filter *nftables.Filter
}

// NewNFTReader reads the kipvs table conn opens (nft.New, or nfttest's fake).
func NewNFTReader(conn nft.Interface) NFTReader {
	return &nftReader{conn: conn, filter: nftables.New(conn)}
}

func (r *nftReader) Name() string { return r.conn.Name() }

// Chains implements NFTReader.
func (r *nftReader) Chains(ctx context.Context) ([]nft.Chain, error) { return r.conn.Chains(ctx) }

// Rules implements NFTReader.
func (r *nftReader) Rules(ctx context.Context) (string, error) {
	rules, err := r.filter.ObserveRules(ctx)
	if err != nil {
		return "", err
	}
	return rules.String(), nil
}

// Members implements NFTReader.
func (r *nftReader) Members(ctx context.Context, set string) ([]string, error) {
	return r.filter.ListMembers(ctx, set)
}

// noTable is the table of a kernel without nf_tables: it does not exist.
type noTable struct{ name string }

func (t noTable) Name() string { return t.name }

func (t noTable) Chains(context.Context) ([]nft.Chain, error) {
	return nil, fmt.Errorf("table %s: nf_tables is not loaded: %w", t.name, kerr.ErrNotFound)
}

func (t noTable) Rules(context.Context) (string, error) { return "", nil }

func (t noTable) Members(_ context.Context, set string) ([]string, error) {
	return nil, fmt.Errorf("set %s %s: nf_tables is not loaded: %w", t.name, set, kerr.ErrNotFound)
}

// httpDaemon asks the daemon's metrics server for its state.
type httpDaemon struct {
	addr   string
	client *http.Client
}

func (d *httpDaemon) Address() string { return d.addr }

// State implements DaemonReader.
func (d *httpDaemon) State(ctx context.Context) (*debugapi.State, error) {
	url := "http://" + d.addr + debugapi.StatePath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w: %v", ErrNoDaemon, err)
		}
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && resp.Header.Get(debugapi.DebugHeader) == debugapi.DebugDisabled {
		return nil, fmt.Errorf("GET %s: %w", url, ErrDebugOff)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("GET %s: 404: something answers on %s without kipvs's state endpoint (kube-proxy, or a kipvs older than doctor)", url, d.addr)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var st debugapi.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decode %s: %w", url, err)
	}
	return &st, nil
}

type brokenIPVS struct{ err error }

func (b brokenIPVS) Info() (ipvs.Info, error)     { return ipvs.Info{}, b.err }
func (b brokenIPVS) Table() ([]ipvs.Entry, error) { return nil, b.err }

type brokenIPSet struct{ err error }

func (b brokenIPSet) List(string) (*ipset.SetInfo, error) { return nil, b.err }
func (b brokenIPSet) ListNames() ([]string, error)        { return nil, b.err }

type brokenConntrack struct{ err error }

func (b brokenConntrack) Count() (uint32, uint32, error) { return 0, 0, b.err }
