package doctor

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/nft"
)

// View is a read-only view of the node: everything the checks look at. NewRealView reads
// the real node; tests fill it with fakes. Nothing in it changes the node.
type View struct {
	// KernelRelease is uname -r ("6.1.0-56-amd64").
	KernelRelease string
	NumCPU        int
	Modules       ModuleReader
	Sysctl        SysctlReader
	Net           NetReader
	IPVS          IPVSReader
	IPSet         IPSetReader
	// NFT holds a reader of kipvs's nftables table (the nftables backend's) per family nft
	// could open; NFTErr says why a family is missing (nil when both are there).
	NFT    map[inet.Family]NFTReader
	NFTErr error
	// NFTVersion runs `nft --version` ("nftables v1.0.6 (Lester Gooch #5)"); its error wraps
	// exec.ErrNotFound when nft is not installed. nil: nft is not installed.
	NFTVersion func(ctx context.Context) (string, error)
	// Iptables holds a reader per family whose iptables could be read; IptablesErr says
	// why a family is missing (nil when both are there).
	Iptables    map[inet.Family]IptablesReader
	IptablesErr error
	// OtherIptables reads the backend kipvs does not program (OtherBackend: "legacy" or
	// "nft"), when it is installed too: a packet traverses the chains of both, so a DROP
	// there (dockerd on the other backend) drops Service traffic all the same. Nil when
	// only one backend is installed.
	OtherIptables map[inet.Family]IptablesReader
	OtherBackend  string
	Conntrack     ConntrackReader
	// IPv6 says whether the daemon would run the IPv6 family with the iptables backend
	// (netfilter.IPv6Usable: ip6tables works and the kernel has IPv6), for when no daemon
	// answers. nil: IPv4 only.
	IPv6 func() error
	// NFTIPv6 is IPv6 for the nftables backend: the kernel has IPv6 and nft is installed.
	// nil: IPv4 only.
	NFTIPv6 func() error
	// Daemon reaches the running kipvs daemon; nil means no daemon is looked for.
	Daemon DaemonReader
	// APIServiceCIDRs lists the cluster's ServiceCIDR objects; nil when no API server is
	// configured.
	APIServiceCIDRs func(ctx context.Context) ([]netip.Prefix, error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// ModuleState is how a kernel module is present.
type ModuleState int

// The module states.
const (
	// ModuleMissing: not loaded, not built in, and not installed for the running kernel.
	ModuleMissing ModuleState = iota
	// ModuleLoaded: listed in /proc/modules.
	ModuleLoaded
	// ModuleBuiltin: compiled into the kernel.
	ModuleBuiltin
	// ModuleAvailable: installed but not loaded; the kernel loads it on first use.
	ModuleAvailable
	// ModuleUnknown: not loaded, and whether it is installed cannot be told (no
	// /lib/modules for the running kernel, as in most containers).
	ModuleUnknown
)

func (s ModuleState) String() string {
	return [...]string{"missing", "loaded", "built in", "available", "unknown"}[s]
}

// ModuleReader tells how a kernel module is present.
type ModuleReader interface {
	Module(name string) ModuleState
}

// SysctlReader reads kernel parameters (sysctl.Interface's read half): kerr.ErrNotFound
// for a key that does not exist.
type SysctlReader interface {
	Get(key string) (string, error)
}

// Link is a network interface.
type Link struct {
	Name string
	// Kind is "device" for hardware, else the rtnetlink kind (bridge, veth, vxlan, dummy...).
	Kind string
	Up   bool
	// Master is the bridge or bond the link is a port of ("" when none).
	Master string
	Addrs  []netip.Prefix
	// Hairpin is the bridge port's hairpin_mode (only meaningful for bridge ports).
	Hairpin bool
}

// Route is a route of any table, or the answer of a route lookup.
type Route struct {
	Table int
	// Type is the route type as ip(8) names it: unicast, local, broadcast, blackhole,
	// unreachable, prohibit, throw, ...
	Type string
	// Dst is the destination prefix; invalid for a default route.
	Dst     netip.Prefix
	Gateway netip.Addr
	Dev     string
}

// Route tables as the kernel numbers them.
const (
	TableMain  = 254
	TableLocal = 255
)

// NetReader reads links, addresses and routes.
type NetReader interface {
	Links() ([]Link, error)
	// Routes lists the routes of every table, both families.
	Routes() ([]Route, error)
	// RouteGet is `ip route get DST`: the route the node would use.
	RouteGet(dst netip.Addr) (Route, error)
}

// IPVSReader is the read half of ipvs.Interface.
type IPVSReader interface {
	Info() (ipvs.Info, error)
	Table() ([]ipvs.Entry, error)
}

// IPSetReader is the read half of ipset.Interface.
type IPSetReader interface {
	List(name string) (*ipset.SetInfo, error)
	// ListNames returns the names of all sets, sorted.
	ListNames() ([]string, error)
}

// nftTableName is family f's kipvs table as nft names it ("ip kipvs").
func nftTableName(f inet.Family) string { return string(nft.Family(f)) + " " + nft.Table }

// NFTReader reads one family's kipvs table, in the notation of the daemon's state document
// with the nftables backend. NewNFTReader reads it through package nft.
type NFTReader interface {
	// Name is the table as nft names it ("ip kipvs").
	Name() string
	// Chains reads the table's chains with their hooks and rules; kerr.ErrNotFound when the
	// table does not exist.
	Chains(ctx context.Context) ([]nft.Chain, error)
	// Rules is the table's chains as the state document writes a family's rules ("" when
	// the table does not exist).
	Rules(ctx context.Context) (string, error)
	// Members lists the members of the table's set name as the state document writes them;
	// kerr.ErrNotFound when the table or the set does not exist.
	Members(ctx context.Context, set string) ([]string, error)
}

// IptablesReader reads one family's iptables.
type IptablesReader interface {
	// Save returns iptables-save output for every table (counters allowed).
	Save(ctx context.Context) (string, error)
	// Owned returns kipvs's chains and the jumps into them as they are in the kernel, in
	// netfilter.Format text of the normalised ruleset.
	Owned(ctx context.Context) (string, error)
}

// ConntrackReader reads the conntrack table's size over ctnetlink.
type ConntrackReader interface {
	Count() (entries, limit uint32, err error)
}

// DaemonReader asks the running kipvs daemon for its desired state.
type DaemonReader interface {
	// Address is where the daemon is asked (its metrics server).
	Address() string
	// State returns the daemon's state document; ErrNoDaemon when nothing answers,
	// ErrDebugOff when kipvs answers without its debug endpoints.
	State(ctx context.Context) (*debugapi.State, error)
}

// ErrNoDaemon is DaemonReader.State's error when no kipvs daemon answers.
var ErrNoDaemon = errors.New("no kipvs daemon answers")

// ErrDebugOff is DaemonReader.State's error when a kipvs daemon answers but serves no state:
// it runs without --kipvs-debug-endpoints.
var ErrDebugOff = errors.New("the kipvs daemon's debug endpoints are off")
