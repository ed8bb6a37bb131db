package dummyif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// dumpRetries bounds the retries of an address dump the kernel reports as interrupted
// (the address list changed while it was being dumped).
const dumpRetries = 5

// Dummy is the real implementation: an rtnetlink socket bound to a network namespace. The
// link is looked up by name on every call but address changes, so a link deleted and
// re-created by someone else is found again. An address change uses the link as last looked
// up (one round trip per address instead of two: a first sync binds a VIP per Service) and
// looks it up again when the kernel no longer knows that link (ENODEV). It is safe for
// concurrent use.
type Dummy struct {
	name string
	mu   sync.Mutex
	rtnl *netlink.Handle
	// known is the link as last looked up, a dummy called name; nil when not looked up
	// yet, or found missing or of another type since.
	known netlink.Link
}

var _ Interface = (*Dummy)(nil)

// New opens an rtnetlink socket in ns (netns.None(): the current namespace) for the dummy
// link called name ("" means ipvsmode.DummyName). It neither creates nor checks the link.
func New(name string, ns netns.NsHandle) (*Dummy, error) {
	if name == "" {
		name = ipvsmode.DummyName
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("dummyif %s: open rtnetlink socket in %s: %w", name, ns, err)
	}
	return &Dummy{name: name, rtnl: h}, nil
}

// Close releases the socket.
func (d *Dummy) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rtnl != nil {
		d.rtnl.Close()
		d.rtnl = nil
	}
	return nil
}

// Name implements Interface.
func (d *Dummy) Name() string { return d.name }

func (d *Dummy) handle() (*netlink.Handle, error) {
	if d.rtnl == nil {
		return nil, fmt.Errorf("dummyif %s: closed", d.name)
	}
	return d.rtnl, nil
}

// link returns the link of that name, or nil if there is none. Callers hold d.mu.
func (d *Dummy) link() (netlink.Link, error) {
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	d.known = nil
	l, err := h.LinkByName(d.name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return nil, nil
	}
	if err != nil {
		return nil, kerr.Errno("get link "+d.name, err)
	}
	if l.Type() == "dummy" {
		d.known = l
	}
	return l, nil
}

// dummy returns the link, kerr.ErrNotFound if it does not exist or ErrNotDummy.
func (d *Dummy) dummy() (netlink.Link, error) {
	l, err := d.link()
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("link %s: %w", d.name, kerr.ErrNotFound)
	}
	if l.Type() != "dummy" {
		return nil, notDummy(d.name, l.Type())
	}
	return l, nil
}

// EnsureLink implements Interface.
func (d *Dummy) EnsureLink() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.link()
	if err != nil {
		return false, err
	}
	if l != nil {
		if l.Type() != "dummy" {
			return false, notDummy(d.name, l.Type())
		}
		return false, nil
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = d.name
	if err := d.rtnl.LinkAdd(&netlink.Dummy{LinkAttrs: attrs}); err != nil {
		if errors.Is(err, unix.EEXIST) {
			// Created concurrently by someone else: check what it is.
			if _, err := d.dummy(); err != nil {
				return false, err
			}
			return false, nil
		}
		return false, kerr.Errno("add dummy link "+d.name, err)
	}
	return true, nil
}

// DeleteLink implements Interface.
func (d *Dummy) DeleteLink() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.dummy()
	if err != nil {
		return err
	}
	if err := d.rtnl.LinkDel(l); err != nil {
		return kerr.Errno("delete link "+d.name, err)
	}
	d.known = nil
	return nil
}

// addrs lists the addresses of l. Callers hold d.mu.
func (d *Dummy) addrs(l netlink.Link) ([]netip.Prefix, error) {
	var (
		list []netlink.Addr
		err  error
	)
	for range dumpRetries {
		list, err = d.rtnl.AddrList(l, netlink.FAMILY_ALL)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, kerr.Errno("list addresses of link "+d.name, err)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, a := range list {
		p, err := toPrefix(a.IPNet)
		if err != nil {
			return nil, fmt.Errorf("address on link %s: %w", d.name, err)
		}
		out = append(out, p)
	}
	sortPrefixes(out)
	return out, nil
}

// Addresses implements Interface.
func (d *Dummy) Addresses() ([]netip.Prefix, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.dummy()
	if err != nil {
		return nil, err
	}
	return d.addrs(l)
}

func toPrefix(n *net.IPNet) (netip.Prefix, error) {
	if n == nil {
		return netip.Prefix{}, errors.New("no address in netlink message")
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("bad address %v", n.IP)
	}
	ones, _ := n.Mask.Size()
	if len(n.IP) == net.IPv4len || a.Is4In6() {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, ones), nil
}

func toAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: &net.IPNet{
		IP:   p.Addr().AsSlice(),
		Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
	}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// AddAddress implements Interface.
func (d *Dummy) AddAddress(addr netip.Addr) error {
	return d.changeAddress(addr, "add", "to", (*netlink.Handle).AddrAdd)
}

// DeleteAddress implements Interface.
func (d *Dummy) DeleteAddress(addr netip.Addr) error {
	return d.changeAddress(addr, "delete", "from", (*netlink.Handle).AddrDel)
}

// changeAddress adds or deletes (verb, and the preposition of the error text) the host
// prefix of addr on the link with change.
func (d *Dummy) changeAddress(addr netip.Addr, verb, prep string, change func(*netlink.Handle, netlink.Link, *netlink.Addr) error) error {
	p, err := hostPrefix(addr)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.handle(); err != nil {
		return fmt.Errorf("%s address %s: %w", verb, p, err)
	}
	l, cached := d.known, true
	if l == nil {
		if l, err = d.dummy(); err != nil {
			return fmt.Errorf("%s address %s: %w", verb, p, err)
		}
		cached = false
	}
	err = change(d.rtnl, l, toAddr(p))
	if cached && errors.Is(err, unix.ENODEV) {
		// The link we knew is gone (deleted, perhaps re-created with another index):
		// look it up again, as every other call does.
		if l, err = d.dummy(); err != nil {
			return fmt.Errorf("%s address %s: %w", verb, p, err)
		}
		err = change(d.rtnl, l, toAddr(p))
	}
	if err != nil {
		return kerr.Errno(fmt.Sprintf("%s address %s %s link %s", verb, p, prep, d.name), err)
	}
	return nil
}

// EnsureAddress implements Interface.
func (d *Dummy) EnsureAddress(addr netip.Addr) (bool, error) { return ensureAddress(d, addr) }

// RemoveAddress implements Interface.
func (d *Dummy) RemoveAddress(addr netip.Addr) (bool, error) { return removeAddress(d, addr) }

// Dump implements Interface.
func (d *Dummy) Dump() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.link()
	if err != nil {
		return "", err
	}
	if l == nil {
		return formatDump(d.name, "", false, nil), nil
	}
	addrs, err := d.addrs(l)
	if err != nil {
		return "", err
	}
	return formatDump(d.name, l.Type(), l.Attrs().Flags&net.FlagUp != 0, addrs), nil
}

// HostAddrs reads the node's own addresses from the kernel of the current namespace: every
// address on every link except the dummy link called dummy, without loopback and IPv6
// link-local ones (kube-proxy's set for NodePorts), sorted.
//
// It runs at every sync, and the dummy link holds a VIP per Service, so it asks the kernel
// for each other link's addresses alone (a dump filtered by the kernel under
// NETLINK_GET_STRICT_CHK, Linux 4.20 and later) instead of dumping every address and
// filtering here; an older kernel gets one unfiltered dump.
func HostAddrs(dummy string) ([]netip.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var lists [][]netip.Addr
	if sock, err := strictSocket(); err == nil {
		defer sock.Close()
		sh := &nl.SocketHandle{Socket: sock}
		for _, l := range links {
			if l.Attrs().Name == dummy {
				continue
			}
			addrs, err := linkAddrs(sh, l.Attrs().Index)
			if err != nil {
				continue // the link may have gone away meanwhile
			}
			lists = append(lists, addrs)
		}
	} else {
		all, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("list addresses: %w", err)
		}
		skip := map[int]bool{}
		for _, l := range links {
			skip[l.Attrs().Index] = l.Attrs().Name == dummy
		}
		var addrs []netip.Addr
		for _, a := range all {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && !skip[a.LinkIndex] {
				addrs = append(addrs, ip)
			}
		}
		lists = append(lists, addrs)
	}
	var out []netip.Addr
	for _, addrs := range lists {
		for _, ip := range addrs {
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() || slices.Contains(out, ip) {
				continue
			}
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// strictSocket opens an rtnetlink socket with NETLINK_GET_STRICT_CHK on.
func strictSocket() (*nl.NetlinkSocket, error) {
	sock, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(sock.GetFd(), unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err != nil {
		sock.Close()
		return nil, err
	}
	return sock, nil
}

// linkAddrs dumps the addresses of one link over sh, whose socket has strict checking on,
// so that the kernel honours the index in the request.
func linkAddrs(sh *nl.SocketHandle, index int) ([]netip.Addr, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETADDR, unix.NLM_F_DUMP)
	msg := nl.NewIfAddrmsg(netlink.FAMILY_ALL)
	msg.Index = uint32(index)
	req.AddData(msg)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sh}
	var msgs [][]byte
	var err error
	for range dumpRetries {
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWADDR)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, m := range msgs {
		ifa := nl.DeserializeIfAddrmsg(m)
		if int(ifa.Index) != index {
			continue // a kernel that ignored the filter after all
		}
		attrs, err := nl.ParseRouteAttr(m[ifa.Len():])
		if err != nil {
			return nil, err
		}
		// IFA_LOCAL is the address itself on point-to-point links, where IFA_ADDRESS is the
		// peer's; elsewhere only IFA_ADDRESS is set, or both are equal.
		var addr, local []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFA_ADDRESS:
				addr = a.Value
			case unix.IFA_LOCAL:
				local = a.Value
			}
		}
		if local != nil {
			addr = local
		}
		if ip, ok := netip.AddrFromSlice(addr); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}
