package dummyif

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"

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
	// batch is a socket of its own for EnsureAddresses (many requests to a message); seq
	// numbers them.
	batch *nl.NetlinkSocket
	seq   uint32
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
	if err := ValidName(name); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("dummyif %s: open rtnetlink socket in %s: %w", name, ns, err)
	}
	batch, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("dummyif %s: open rtnetlink socket in %s: %w", name, ns, err)
	}
	// Room for a batch's acks (each takes up to a kilobyte of the receive buffer, which the
	// kernel makes twice this: 2 MB for addrBatch's 1,024); an ack that does not fit is
	// lost and its address sent again alone. Short acks for errors.
	_ = batch.SetReceiveBufferSize(1<<20, true)
	_ = unix.SetsockoptInt(batch.GetFd(), unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return &Dummy{name: name, rtnl: h, batch: batch}, nil
}

// Close releases the socket.
func (d *Dummy) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rtnl != nil {
		d.rtnl.Close()
		d.rtnl = nil
	}
	if d.batch != nil {
		d.batch.Close()
		d.batch = nil
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
		return nil, NotDummyError(d.name, l.Type())
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
			return false, NotDummyError(d.name, l.Type())
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
	SortPrefixes(out)
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
	p, err := HostPrefix(addr)
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
func (d *Dummy) EnsureAddress(addr netip.Addr) (bool, error) { return EnsureAddressVia(d, addr) }

// addrBatch is how many address requests EnsureAddresses sends in one message (40 bytes
// each for IPv4, 64 for IPv6: well within a socket's default send buffer). Each message is
// one system call that binds for as long as its adds take (about 0.8 ms each at 50,000
// VIPs in the VM): the fewer calls, the fewer times a Go program waits for its scheduler
// on the way out (reconcile's bindGroup).
const addrBatch = 1024

// EnsureAddresses implements Interface. The adds go addrBatch to a message, each its own
// RTM_NEWADDR with its own ack (the kernel handles the requests of a message one after the
// other, whatever the outcome of the others): at 50,000 VIPs, 49 round trips instead of
// 50,000. An add the kernel refused, or whose ack was not read, is sent again alone through
// EnsureAddress, for its own error (and a link looked up again).
func (d *Dummy) EnsureAddresses(addrs []netip.Addr) []error {
	errs := make([]error, len(addrs))
	todo := make([]int, 0, len(addrs))
	for i, a := range addrs {
		if _, err := HostPrefix(a); err != nil {
			_, errs[i] = d.EnsureAddress(a) // its error as EnsureAddress words it
		} else {
			todo = append(todo, i)
		}
	}
	var alone []int
	for len(todo) > 0 {
		n := min(len(todo), addrBatch)
		alone = append(alone, d.addBatch(addrs, todo[:n])...)
		todo = todo[n:]
	}
	for _, i := range alone {
		_, errs[i] = d.EnsureAddress(addrs[i])
	}
	return errs
}

// addBatch sends the adds of the addresses addrs[idx...] (valid host addresses) in one
// message and returns the indexes of those not known to be bound: refused, or no ack read.
func (d *Dummy) addBatch(addrs []netip.Addr, idx []int) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rtnl == nil || d.batch == nil {
		return idx
	}
	l := d.known
	if l == nil {
		var err error
		if l, err = d.dummy(); err != nil {
			return idx
		}
	}
	fd := d.batch.GetFd()
	rb := make([]byte, 1<<16)
	drain(fd, rb) // acks a batch before did not wait for
	seq := d.seq
	d.seq += uint32(len(idx))
	buf := make([]byte, 0, len(idx)*newAddrLen(true))
	for j, i := range idx {
		p, _ := HostPrefix(addrs[i])
		buf = appendNewAddr(buf, seq+uint32(j), uint32(l.Attrs().Index), p)
	}
	if err := unix.Sendto(fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return idx
	}
	// The kernel handles the requests within the send: every ack is queued, or was lost
	// (ENOBUFS), once it returns, so reading never waits.
	ok := make([]bool, len(idx))
	for acked := 0; acked < len(idx); {
		n, _, err := unix.Recvfrom(fd, rb, unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		msgs, err := syscall.ParseNetlinkMessage(rb[:n])
		if err != nil {
			break
		}
		for _, m := range msgs {
			j := m.Header.Seq - seq
			if m.Header.Type != unix.NLMSG_ERROR || j >= uint32(len(idx)) || len(m.Data) < 4 {
				continue
			}
			acked++
			errno := -int32(binary.NativeEndian.Uint32(m.Data[:4]))
			ok[j] = errno == 0 || syscall.Errno(errno) == unix.EEXIST
		}
	}
	var left []int
	for j, i := range idx {
		if !ok[j] {
			left = append(left, i)
		}
	}
	return left
}

// drain reads whatever is queued on the socket fd, without waiting.
func drain(fd int, rb []byte) {
	for {
		if _, _, err := unix.Recvfrom(fd, rb, unix.MSG_DONTWAIT); err != nil && !errors.Is(err, unix.ENOBUFS) {
			return
		}
	}
}

// newAddrLen is the length of an RTM_NEWADDR request for a host address (appendNewAddr).
func newAddrLen(v6 bool) int {
	n := 4
	if v6 {
		n = 16
	}
	return unix.SizeofNlMsghdr + unix.SizeofIfAddrmsg + 2*unix.SizeofRtAttr + 2*n
}

// appendNewAddr appends to b the request that adds host prefix p to link index, as
// AddAddress sends it: IFA_LOCAL and IFA_ADDRESS, scope global, no DAD for IPv6; created,
// an error if it exists, acked.
func appendNewAddr(b []byte, seq, index uint32, p netip.Prefix) []byte {
	a := p.Addr().AsSlice()
	family, flags := uint8(unix.AF_INET), uint8(0)
	if p.Addr().Is6() {
		family, flags = unix.AF_INET6, unix.IFA_F_NODAD
	}
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, uint32(newAddrLen(p.Addr().Is6())))
	b = ne.AppendUint16(b, unix.RTM_NEWADDR)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	b = append(b, family, uint8(p.Bits()), flags, unix.RT_SCOPE_UNIVERSE)
	b = ne.AppendUint32(b, index)
	for _, typ := range []uint16{unix.IFA_LOCAL, unix.IFA_ADDRESS} {
		b = ne.AppendUint16(b, uint16(unix.SizeofRtAttr+len(a)))
		b = ne.AppendUint16(b, typ)
		b = append(b, a...)
	}
	return b
}

// RemoveAddress implements Interface.
func (d *Dummy) RemoveAddress(addr netip.Addr) (bool, error) { return RemoveAddressVia(d, addr) }

// Dump implements Interface.
func (d *Dummy) Dump() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.link()
	if err != nil {
		return "", err
	}
	if l == nil {
		return FormatDump(d.name, "", false, nil), nil
	}
	addrs, err := d.addrs(l)
	if err != nil {
		return "", err
	}
	return FormatDump(d.name, l.Type(), l.Attrs().Flags&net.FlagUp != 0, addrs), nil
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
