package harness

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// BridgeName is the pod bridge on the node.
const BridgeName = "kbr0"

// BridgeMAC is the pod bridge's fixed (locally administered) MAC address.
var BridgeMAC = net.HardwareAddr{0x02, 0x6b, 0x62, 0x72, 0x00, 0x01}

// NS is a named network namespace.
type NS struct {
	Name   string
	Handle netns.NsHandle
	ports  *sourcePorts
}

// NodeClient is a client in the node's namespace, with UDP source ports from the
// topology's sequence.
func (tp *Topology) NodeClient() Client { return Client{NS: netns.None(), ports: tp.ports} }

// Pod is a network namespace on the pod bridge, usually running an echo backend.
type Pod struct {
	NS
	PodName string
	IP      netip.Addr
	env     Env
	sctp    bool // the echo backend also answers on SCTP

	mu     sync.Mutex
	echo   *exec.Cmd
	exited chan struct{} // closed when echo has exited and been waited for
	log    *bytes.Buffer // echo's output; read only after exited is closed
}

// PodOptions tune AddPod.
type PodOptions struct {
	// NoDefaultRoute leaves the pod with only its on-link route (the pod subnet): it
	// cannot answer a source outside it.
	NoDefaultRoute bool
	// NoEcho starts no echo backend (a pure client).
	NoEcho bool
	// SCTP makes the echo backend answer on SCTP too (EchoPort).
	SCTP bool
}

// Topology is a scenario's network: the pod bridge with the node's gateway address, the
// pods on it, and optionally an external client. NewTopology registers its removal with
// t.Cleanup.
type Topology struct {
	env   Env
	ports *sourcePorts // UDP source ports of the clients in the topology and on the node
	pods  []*Pod
	nss   []*NS
	links []string // created in the node's namespace
}

// NewTopology creates the pod bridge kbr0 with PodGateway on it.
func NewTopology(t testing.TB, env Env) *Topology {
	t.Helper()
	tp := &Topology{env: env, ports: newSourcePorts()}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Errorf("remove the topology: %v", err)
		}
	})
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}}); err != nil {
		t.Fatalf("create bridge %s: %v", BridgeName, err)
	}
	tp.links = append(tp.links, BridgeName)
	// A bridge without an address of its own takes the lowest MAC of its ports, so adding
	// a pod could change it under traffic: the pods' neighbour entries for the gateway
	// would point at a MAC the node no longer answers to, and their packets would be
	// dropped until the entries expire (tens of seconds). A set address stays.
	br, err := netlink.LinkByName(BridgeName)
	if err != nil {
		t.Fatalf("link %s: %v", BridgeName, err)
	}
	if err := netlink.LinkSetHardwareAddr(br, BridgeMAC); err != nil {
		t.Fatalf("set the MAC address of %s: %v", BridgeName, err)
	}
	if err := linkUp(netns.None(), BridgeName, PodGateway); err != nil {
		t.Fatal(err)
	}
	return tp
}

// Close stops the echo backends and removes the namespaces (and so the veths) and the
// bridge.
func (tp *Topology) Close() error {
	var errs []error
	for _, p := range tp.pods {
		p.StopEcho()
	}
	// Links first: deleting the node's end of a veth removes the pair at once, whereas a
	// deleted namespace takes its end (and so the pair) down only when the kernel gets to
	// it, which under TCG can be after the next scenario creates a pod of the same name.
	for _, name := range tp.links {
		if l, err := netlink.LinkByName(name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete link %s: %w", name, err))
			}
		}
	}
	for _, ns := range tp.nss {
		ns.Handle.Close()
		if err := netns.DeleteNamed(ns.Name); err != nil {
			errs = append(errs, fmt.Errorf("delete netns %s: %w", ns.Name, err))
		}
	}
	tp.pods, tp.nss, tp.links = nil, nil, nil
	return errors.Join(errs...)
}

// linkUp puts addr (if valid) on the named link in ns and brings the link up.
func linkUp(ns netns.NsHandle, name string, addr netip.Prefix) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink handle in %s: %w", ns, err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if addr.IsValid() {
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
			return fmt.Errorf("address %s on %s: %w", addr, name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// newNS creates a named namespace (as `ip netns add` does: bound under /run/netns, so the
// standard tools find it) with lo up.
func (tp *Topology) newNS(name string) (*NS, error) {
	h, err := newNamed(name)
	if err != nil {
		return nil, err
	}
	ns := &NS{Name: name, Handle: h, ports: tp.ports}
	tp.nss = append(tp.nss, ns)
	if err := linkUp(h, "lo", netip.Prefix{}); err != nil {
		return nil, err
	}
	return ns, nil
}

// newNamed creates a named namespace from a locked thread that returns to its namespace
// afterwards (or, if it cannot, stays locked so the runtime discards it).
func newNamed(name string) (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("netns %s: get current namespace: %w", name, err)
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		if err == nil {
			h.Close()
		}
		return netns.None(), fmt.Errorf("netns %s: return to the node's namespace: %w", name, serr)
	}
	runtime.UnlockOSThread()
	if err != nil {
		return netns.None(), fmt.Errorf("create netns %s: %w", name, err)
	}
	return h, nil
}

// vethInto creates a veth pair whose end host stays in the node's namespace (recorded for
// Close) and whose other end is eth0 in ns, with addr, up.
func (tp *Topology) vethInto(ns *NS, host string, addr netip.Prefix) error {
	if len(host) > 15 {
		return fmt.Errorf("interface name %q longer than 15 characters", host)
	}
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns.Handle))}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s <-> %s/eth0: %w", host, ns.Name, err)
	}
	tp.links = append(tp.links, host)
	return linkUp(ns.Handle, "eth0", addr)
}

// addRoutes adds routes to dsts via gw inside ns.
func addRoutes(ns *NS, gw netip.Addr, dsts ...netip.Prefix) error {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return fmt.Errorf("netlink handle in %s: %w", ns.Name, err)
	}
	defer h.Close()
	for _, d := range dsts {
		if err := h.RouteAdd(&netlink.Route{Dst: ipNet(d), Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w", d, gw, ns.Name, err)
		}
	}
	return nil
}

// AddPod creates pod name (namespace pod-NAME, bridge port vp-NAME) with ip on the pod
// bridge, hairpin mode on its bridge port as the CNI bridge plugin sets it, a default route
// via the gateway unless o.NoDefaultRoute, and an echo backend answering as name on
// EchoPort unless o.NoEcho.
func (tp *Topology) AddPod(t testing.TB, name string, ip netip.Addr, o PodOptions) *Pod {
	t.Helper()
	ns, err := tp.newNS("pod-" + name)
	if err != nil {
		t.Fatal(err)
	}
	host := "vp-" + name
	if err := tp.vethInto(ns, host, netip.PrefixFrom(ip, PodGateway.Bits())); err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(host)
	if err != nil {
		t.Fatalf("link %s: %v", host, err)
	}
	br, err := netlink.LinkByName(BridgeName)
	if err != nil {
		t.Fatalf("link %s: %v", BridgeName, err)
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		t.Fatalf("attach %s to %s: %v", host, BridgeName, err)
	}
	if err := netlink.LinkSetHairpin(l, true); err != nil {
		t.Fatalf("hairpin mode on %s: %v", host, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", host, err)
	}
	if !o.NoDefaultRoute {
		if err := addRoutes(ns, PodGateway.Addr(), netip.MustParsePrefix("0.0.0.0/0")); err != nil {
			t.Fatal(err)
		}
	}
	p := &Pod{NS: *ns, PodName: name, IP: ip, env: tp.env, sctp: o.SCTP}
	tp.pods = append(tp.pods, p)
	if !o.NoEcho {
		p.StartEcho(t)
	}
	return p
}

// AddExternal creates the external client's namespace "ext": a veth pair to the node
// (vx-ext with ExternalNodeIP on the node, eth0 with ExternalClientIP in ext) and routes
// via the node to the Service CIDR, the public range (externalIPs, LoadBalancer IPs) and
// the node's IP. ext has no default route.
func (tp *Topology) AddExternal(t testing.TB) *NS {
	t.Helper()
	ns, err := tp.newNS("ext")
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.vethInto(ns, "vx-ext", ExternalClientIP); err != nil {
		t.Fatal(err)
	}
	if err := linkUp(netns.None(), "vx-ext", ExternalNodeIP); err != nil {
		t.Fatal(err)
	}
	if err := addRoutes(ns, ExternalNodeIP.Addr(), ServiceCIDR, PublicNet, netip.PrefixFrom(NodeIP, 32)); err != nil {
		t.Fatal(err)
	}
	return ns
}

// Endpoint returns the pod's backend address (EchoPort).
func (p *Pod) Endpoint() netip.AddrPort { return netip.AddrPortFrom(p.IP, EchoPort) }

// StartEcho starts the pod's echo backend and waits until it answers on TCP.
func (p *Pod) StartEcho(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.echo != nil {
		t.Fatalf("pod %s: echo already running", p.PodName)
	}
	args := []string{"-name", p.PodName, "-listen", fmt.Sprintf(":%d", EchoPort)}
	if p.sctp {
		args = append(args, "-sctp")
	}
	cmd := exec.Command(p.env.EchoBin, args...)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := netnsutil.Do(p.Handle, cmd.Start); err != nil {
		t.Fatalf("pod %s: start echo: %v", p.PodName, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.echo, p.exited, p.log = cmd, exited, log

	c := Client{NS: p.Handle, Timeout: time.Second}
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), EchoPort)
	_, err := poll.Wait(30*time.Second, "echo in pod "+p.PodName, func() (bool, string) {
		select {
		case <-exited:
			return true, ""
		default:
		}
		a, err := c.HTTP(target)
		if err != nil {
			return false, err.Error()
		}
		return a.Backend == p.PodName, "answered as " + a.Backend
	})
	select {
	case <-exited:
		t.Fatalf("pod %s: echo exited: %s", p.PodName, log.String())
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
}

// StopEcho kills the pod's echo backend (as a deleted pod's process ends) and waits for it.
func (p *Pod) StopEcho() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.echo == nil {
		return
	}
	_ = p.echo.Process.Kill()
	<-p.exited
	p.echo = nil
}
