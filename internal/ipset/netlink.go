package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Real manages the ipsets of one network namespace through netlink.
//
// It holds two NETLINK_NETFILTER sockets opened in the namespace at New and reused for every
// request: the vishvananda/netlink handle's (flush, swap, and add, del and test of one hash
// set member) and one of its own for the requests that library cannot make right: create with
// a hash size and the kernel's newest type revision, the type query, destroy that reports a
// missing set, bitmap:port members, adds and deletes of many members in one request,
// header-only and name-only listings, and listings parsed in full without logging. The
// library keeps its socket private, hence two.
type Real struct {
	handle *netlink.Handle
	sock   *nl.SocketHandle
	socks  map[int]*nl.SocketHandle // for nl.NetlinkRequest.Sockets; read-only after New

	mu     sync.RWMutex // held shared by every call, exclusively by Close
	closed bool

	replaceMu sync.Mutex // serializes Replace: concurrent ones of a set would share its temp set

	revMu sync.Mutex
	revs  map[revKey]uint8 // newest kernel revision per type and family
}

type revKey struct {
	t   Type
	fam uint8
}

var _ Interface = (*Real)(nil)

// Command-level flags of IPSET_CMD_LIST (IPSET_FLAG_LIST_SETNAME, IPSET_FLAG_LIST_HEADER).
const (
	listNamesOnly  = 1 << 1
	listHeaderOnly = 1 << 2
)

// Attributes vishvananda/netlink has no name for.
const (
	attrInitval    = 17 // IPSET_ATTR_INITVAL, once IPSET_ATTR_GC
	attrBucketsize = 21 // IPSET_ATTR_BUCKETSIZE, once IPSET_ATTR_PROBES
)

// New opens the ipsets of namespace ns; netns.None() means the current namespace. It checks
// that the kernel speaks the ipset protocol (the ip_set module is loaded).
func New(ns netns.NsHandle) (*Real, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("ipset: open netlink handle in %s: %w", ns, err)
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("ipset: open netlink socket in %s: %w", ns, err)
	}
	r := &Real{handle: h, sock: &nl.SocketHandle{Socket: s}, revs: map[revKey]uint8{}}
	r.socks = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: r.sock}
	if _, _, err := h.IpsetProtocol(); err != nil {
		r.handle.Close()
		r.sock.Close()
		return nil, fmt.Errorf("ipset: query kernel protocol in %s (is ip_set loaded?): %w", ns, err)
	}
	return r, nil
}

// enter guards a public call against Close; the caller defers r.mu.RUnlock() on success.
// Internal helpers never call enter, so a call never takes the read lock twice.
func (r *Real) enter() error {
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Close implements Interface.
func (r *Real) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.handle.Close()
	r.sock.Close()
	return nil
}

// guard runs a vishvananda/netlink ipset call. That library asserts that every error from its
// netlink layer is a syscall.Errno and panics on the few that are not (e.g. a reply from an
// unexpected sender); guard turns such a panic into an error instead of a daemon crash.
func guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("netlink library failed: %v", p)
		}
	}()
	return fn()
}

// kernelErr wraps an error from the kernel: ipset's own error codes (from 4096 up) become the
// matching typed errors, plain errnos go through kerr.Errno. t (may be empty) picks the meaning
// of the type-specific codes. The original error stays in the chain.
func kernelErr(what string, t Type, err error) error {
	if err == nil {
		return nil
	}
	code := 0
	var ie nl.IPSetError
	var en syscall.Errno
	switch {
	case errors.As(err, &ie):
		code = int(ie)
	case errors.As(err, &en) && int(en) >= nl.IPSET_ERR_PRIVATE:
		code = int(en)
	default:
		return kerr.Errno(what, err)
	}
	kind, msg := ipsetErrno(code, t)
	if kind == nil {
		return fmt.Errorf("%s: %s (ipset error %d)", what, msg, code)
	}
	return fmt.Errorf("%s: %s: %w (ipset error %d)", what, msg, kind, code)
}

// ipsetErrno describes one of ipset's kernel error codes (include/uapi/linux/netfilter/ipset).
func ipsetErrno(code int, t Type) (error, string) {
	switch code {
	case nl.IPSET_ERR_PROTOCOL:
		return kerr.ErrInvalid, "malformed request"
	case nl.IPSET_ERR_FIND_TYPE:
		return kerr.ErrInvalid, "set type or revision unknown to the kernel"
	case nl.IPSET_ERR_MAX_SETS:
		return nil, "the kernel's limit of sets is reached"
	case nl.IPSET_ERR_BUSY:
		return kerr.ErrBusy, "the set is in use"
	case nl.IPSET_ERR_EXIST_SETNAME2:
		return kerr.ErrNotFound, "the second set does not exist"
	case nl.IPSET_ERR_TYPE_MISMATCH:
		return kerr.ErrInvalid, "the sets differ in type or family"
	case nl.IPSET_ERR_EXIST:
		return nil, "the member is already in the set, or not in it"
	case nl.IPSET_ERR_INVALID_CIDR:
		return kerr.ErrInvalid, "invalid prefix length"
	case nl.IPSET_ERR_INVALID_NETMASK:
		return kerr.ErrInvalid, "invalid netmask"
	case nl.IPSET_ERR_INVALID_FAMILY:
		return kerr.ErrInvalid, "invalid family"
	case nl.IPSET_ERR_TIMEOUT:
		return kerr.ErrInvalid, "the set has no timeout extension"
	case nl.IPSET_ERR_REFERENCED:
		return kerr.ErrBusy, "the set is referenced"
	case nl.IPSET_ERR_IPADDR_IPV4:
		return kerr.ErrInvalid, "an IPv4 address was expected"
	case nl.IPSET_ERR_IPADDR_IPV6:
		return kerr.ErrInvalid, "an IPv6 address was expected"
	case nl.IPSET_ERR_COUNTER:
		return kerr.ErrInvalid, "the set has no counters extension"
	case nl.IPSET_ERR_COMMENT:
		return kerr.ErrInvalid, "the set has no comment extension"
	case nl.IPSET_ERR_INVALID_MARKMASK:
		return kerr.ErrInvalid, "invalid markmask"
	case nl.IPSET_ERR_SKBINFO:
		return kerr.ErrInvalid, "the set has no skbinfo extension"
	}
	if code >= nl.IPSET_ERR_TYPE_SPECIFIC {
		switch {
		case t.IsHash() && code == nl.IPSET_ERR_TYPE_SPECIFIC:
			return ErrFull, "the hash set is full (maxelem)"
		case t.IsHash():
			return kerr.ErrInvalid, "the member is invalid for this hash type"
		case t == BitmapPort && code == nl.IPSET_ERR_TYPE_SPECIFIC:
			return kerr.ErrInvalid, "the port is outside the set's range"
		}
		return kerr.ErrInvalid, "type-specific error"
	}
	return kerr.ErrInvalid, "unknown ipset error"
}

// request starts a request of ours on r.sock: netfilter header and protocol attribute.
func (r *Real) request(cmd int, flags int) *nl.NetlinkRequest {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   unix.SizeofNlMsghdr,
			Type:  uint16(cmd | unix.NFNL_SUBSYS_IPSET<<8),
			Flags: uint16(unix.NLM_F_REQUEST | flags),
		},
		Sockets: r.socks,
	}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_PROTOCOL, nl.Uint8Attr(nl.IPSET_PROTOCOL)))
	return req
}

func familyNumber(f inet.Family) uint8 {
	switch f {
	case inet.IPv4:
		return unix.AF_INET // NFPROTO_IPV4
	case inet.IPv6:
		return unix.AF_INET6 // NFPROTO_IPV6
	}
	return 0 // NFPROTO_UNSPEC, bitmap:port
}

func familyOf(n uint8) inet.Family {
	switch n {
	case unix.AF_INET:
		return inet.IPv4
	case unix.AF_INET6:
		return inet.IPv6
	}
	return 0
}

// revision is the newest revision of type t the kernel has, as ipset(8) would create it
// (IPSET_CMD_TYPE). Cached per instance.
func (r *Real) revision(t Type, fam uint8) (uint8, error) {
	k := revKey{t, fam}
	r.revMu.Lock()
	rev, ok := r.revs[k]
	r.revMu.Unlock()
	if ok {
		return rev, nil
	}
	req := r.request(nl.IPSET_CMD_TYPE, 0)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_TYPENAME, nl.ZeroTerminated(string(t))))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_FAMILY, nl.Uint8Attr(fam)))
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil {
		return 0, kernelErr(fmt.Sprintf("ipset: query kernel revision of %s", t), t, err)
	}
	found := false
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		attrs, err := parseAttrs(m[4:])
		if err != nil {
			return 0, fmt.Errorf("ipset: query kernel revision of %s: %w", t, err)
		}
		for _, a := range attrs {
			if a.typ == nl.IPSET_ATTR_REVISION && len(a.val) >= 1 {
				rev, found = a.val[0], true
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("ipset: query kernel revision of %s: no revision in the reply", t)
	}
	r.revMu.Lock()
	r.revs[k] = rev
	r.revMu.Unlock()
	return rev, nil
}

// create sends IPSET_CMD_CREATE for a normalized set, exclusively: kerr.ErrExists when the
// name is taken.
func (r *Real) create(s Set) error {
	what := fmt.Sprintf("ipset: create %s (%s)", s.Name, s.String())
	fam := familyNumber(s.Family)
	rev, err := r.revision(s.Type, fam)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req := r.request(nl.IPSET_CMD_CREATE, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(s.Name)))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_TYPENAME, nl.ZeroTerminated(string(s.Type))))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_REVISION, nl.Uint8Attr(rev)))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_FAMILY, nl.Uint8Attr(fam)))
	data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|unix.NLA_F_NESTED, nil)
	if s.Type == BitmapPort {
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT_FROM|unix.NLA_F_NET_BYTEORDER, be16(s.PortFrom)))
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT_TO|unix.NLA_F_NET_BYTEORDER, be16(s.PortTo)))
	} else {
		data.AddChild(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_HASHSIZE | unix.NLA_F_NET_BYTEORDER, Value: s.HashSize})
		data.AddChild(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_MAXELEM | unix.NLA_F_NET_BYTEORDER, Value: s.MaxElem})
	}
	if s.Comment {
		data.AddChild(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_CADT_FLAGS | unix.NLA_F_NET_BYTEORDER, Value: nl.IPSET_FLAG_WITH_COMMENT})
	}
	req.AddData(data)
	_, err = req.Execute(unix.NETLINK_NETFILTER, 0)
	return kernelErr(what, s.Type, err)
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// Create implements Interface.
func (r *Real) Create(s Set) error {
	s, err := s.Normalize()
	if err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	err = r.create(s)
	if !kerr.IsExists(err) {
		return err
	}
	have, lerr := r.header("create", s.Name)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	return EnsureError(s, have)
}

// Destroy implements Interface.
func (r *Real) Destroy(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	return r.destroy(name)
}

// destroy is our own request: vishvananda/netlink sends IPSET_CMD_DESTROY without NLM_F_EXCL,
// which newer kernels (6.1 at least) answer for a missing set with success ("-exist").
func (r *Real) destroy(name string) error {
	req := r.request(nl.IPSET_CMD_DESTROY, unix.NLM_F_ACK|unix.NLM_F_EXCL)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(name)))
	_, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	return kernelErr("ipset: destroy set "+name, "", err)
}

// Flush implements Interface.
func (r *Real) Flush(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	err := guard(func() error { return r.handle.IpsetFlush(name) })
	return kernelErr("ipset: flush set "+name, "", err)
}

// Swap implements Interface.
func (r *Real) Swap(a, b string) error {
	for _, n := range []string{a, b} {
		if err := CheckName(n); err != nil {
			return err
		}
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	return r.swap(a, b)
}

func (r *Real) swap(a, b string) error {
	err := guard(func() error { return r.handle.IpsetSwap(a, b) })
	return kernelErr(fmt.Sprintf("ipset: swap set %s with %s", a, b), "", err)
}

// header lists one set's header only.
func (r *Real) header(what, name string) (Set, error) {
	sets, err := r.dump(what, name, listHeaderOnly)
	if err != nil {
		return Set{}, err
	}
	return sets[0].Set, nil
}

// toNL converts a checked member of a set of type t for vishvananda/netlink, with -exist
// semantics (Replace: no NLM_F_EXCL).
func toNL(t Type, e Entry) *netlink.IPSetEntry {
	ne := &netlink.IPSetEntry{Comment: e.Comment, Replace: true}
	port, proto := e.Port, uint8(e.Protocol)
	switch t {
	case HashIP:
		ne.IP = e.IP.AsSlice()
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		ne.IP = e.IP.AsSlice()
		ne.Port, ne.Protocol = &port, &proto
		if t == HashIPPortIP {
			ne.IP2 = e.IP2.AsSlice()
		}
		if t == HashIPPortNet {
			ne.IP2, ne.CIDR2 = e.Net.Addr().AsSlice(), uint8(e.Net.Bits())
		}
	case HashNet:
		ne.IP, ne.CIDR = e.Net.Addr().AsSlice(), uint8(e.Net.Bits())
	}
	return ne
}

// member sends an add, del or test of a checked member, with -exist semantics (no
// NLM_F_EXCL). Hash types go through vishvananda/netlink; bitmap:port members through our own
// request, because that library always adds a protocol attribute to a port, which the
// kernel's bitmap:port refuses (IPSET_ERR_PROTOCOL). For a test, the result is the answer.
func (r *Real) member(cmd int, hdr Set, e Entry) (bool, error) {
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		what := "ipset: test %s in %s"
		switch cmd {
		case nl.IPSET_CMD_ADD:
			what = "ipset: add %s to %s"
		case nl.IPSET_CMD_DEL:
			what = "ipset: delete %s from %s"
		}
		return kernelErr(fmt.Sprintf(what, e, hdr.Name), hdr.Type, err)
	}
	if hdr.Type == BitmapPort {
		req := r.request(cmd, unix.NLM_F_ACK)
		req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(hdr.Name)))
		data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|unix.NLA_F_NESTED, nil)
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT|unix.NLA_F_NET_BYTEORDER, be16(e.Port)))
		req.AddData(data)
		_, err := req.Execute(unix.NETLINK_NETFILTER, 0)
		if cmd == nl.IPSET_CMD_TEST && errors.Is(err, syscall.Errno(nl.IPSET_ERR_EXIST)) {
			return false, nil
		}
		return err == nil, wrap(err)
	}
	ne := toNL(hdr.Type, e)
	var ok bool
	err := guard(func() (err error) {
		switch cmd {
		case nl.IPSET_CMD_ADD:
			return r.handle.IpsetAdd(hdr.Name, ne)
		case nl.IPSET_CMD_DEL:
			return r.handle.IpsetDel(hdr.Name, ne)
		}
		ok, err = r.handle.IpsetTest(hdr.Name, ne)
		return err
	})
	return ok, wrap(err)
}

// Add implements Interface.
func (r *Real) Add(set string, entries ...Entry) error {
	if err := CheckName(set); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	hdr, err := r.header("add to", set)
	if err != nil {
		return err
	}
	entries, bad := Sift(hdr, entries)
	if err := r.add(hdr, entries); err != nil {
		return errors.Join(err, bad)
	}
	return bad
}

func (r *Real) add(hdr Set, entries []Entry) error {
	return r.members(nl.IPSET_CMD_ADD, hdr, entries)
}

// batchMax is how many members one batched add or delete request carries (about 8 KiB of
// hash:ip,port members; ipset(8) restore packs its requests the same way).
const batchMax = 256

// members adds or deletes checked members (-exist semantics) in requests of up to batchMax
// members each (IPSET_ATTR_ADT: one request, many IPSET_ATTR_DATA), in order. The kernel
// applies a request's members in order and stops at the first it refuses, saying only
// that one failed; a request that failed is sent again one member at a time (harmless for
// those already applied: -exist), so the error names its member and set as an unbatched
// request's would, and the members before it are applied, the ones after it not.
func (r *Real) members(cmd int, hdr Set, entries []Entry) error {
	for chunk := range slices.Chunk(entries, batchMax) {
		if len(chunk) > 1 && r.batch(cmd, hdr, chunk) == nil {
			continue
		}
		for _, e := range chunk {
			if _, err := r.member(cmd, hdr, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// batch sends one add or delete request of the members es (see members).
func (r *Real) batch(cmd int, hdr Set, es []Entry) error {
	req := r.request(cmd, unix.NLM_F_ACK)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(hdr.Name)))
	// The kernel takes IPSET_ATTR_ADT only with a line number (IPSET_ERR_PROTOCOL without),
	// where it reports the failed member's IPSET_ATTR_LINENO; the members carry none.
	req.AddData(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_LINENO | nl.NLA_F_NET_BYTEORDER, Value: 0})
	adt := nl.NewRtAttr(nl.IPSET_ATTR_ADT|unix.NLA_F_NESTED, nil)
	for _, e := range es {
		adt.AddChild(memberData(hdr.Type, e))
	}
	req.AddData(adt)
	_, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	return err
}

// memberData is a checked member of a set of type t as one IPSET_ATTR_DATA: the attributes
// ipset(8) sends for it (a bitmap:port member has no protocol).
func memberData(t Type, e Entry) *nl.RtAttr {
	data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|unix.NLA_F_NESTED, nil)
	if e.Comment != "" {
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_COMMENT, nl.ZeroTerminated(e.Comment)))
	}
	ip := func(typ int, a netip.Addr) {
		kind := nl.IPSET_ATTR_IPADDR_IPV4
		if a.Is6() {
			kind = nl.IPSET_ATTR_IPADDR_IPV6
		}
		addr := nl.NewRtAttr(typ|unix.NLA_F_NESTED, nil)
		addr.AddChild(nl.NewRtAttr(kind|unix.NLA_F_NET_BYTEORDER, a.AsSlice()))
		data.AddChild(addr)
	}
	net := func(typ, cidr int, p netip.Prefix) {
		ip(typ, p.Addr())
		data.AddChild(nl.NewRtAttr(cidr, nl.Uint8Attr(uint8(p.Bits()))))
	}
	switch t {
	case HashIP, HashIPPort, HashIPPortIP, HashIPPortNet:
		ip(nl.IPSET_ATTR_IP, e.IP)
	case HashNet:
		net(nl.IPSET_ATTR_IP, nl.IPSET_ATTR_CIDR, e.Net)
	}
	switch t {
	case HashIPPortIP:
		ip(nl.IPSET_ATTR_IP2, e.IP2)
	case HashIPPortNet:
		net(nl.IPSET_ATTR_IP2, nl.IPSET_ATTR_CIDR2, e.Net)
	}
	if t.parts() > 1 { // ip,port[,...]: the port's protocol
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PROTO, nl.Uint8Attr(uint8(e.Protocol))))
	}
	if t.parts() > 1 || t == BitmapPort {
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT|unix.NLA_F_NET_BYTEORDER, be16(e.Port)))
	}
	return data
}

// Del implements Interface.
func (r *Real) Del(set string, entries ...Entry) error {
	if err := CheckName(set); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	hdr, err := r.header("delete from", set)
	if err != nil {
		return err
	}
	entries, bad := Sift(hdr, entries)
	if err := r.members(nl.IPSET_CMD_DEL, hdr, entries); err != nil {
		return errors.Join(err, bad)
	}
	return bad
}

// Test implements Interface.
func (r *Real) Test(set string, e Entry) (bool, error) {
	if err := CheckName(set); err != nil {
		return false, err
	}
	if err := r.enter(); err != nil {
		return false, err
	}
	defer r.mu.RUnlock()
	hdr, err := r.header("test in", set)
	if err != nil {
		return false, err
	}
	es, err := Prepare(hdr, []Entry{e})
	if err != nil {
		return false, err
	}
	return r.member(nl.IPSET_CMD_TEST, hdr, es[0])
}

// List implements Interface.
func (r *Real) List(name string) (*SetInfo, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	return r.list(name)
}

func (r *Real) list(name string) (*SetInfo, error) {
	sets, err := r.dump("list", name, 0)
	if err != nil {
		return nil, err
	}
	return sets[0], nil
}

// Header implements Interface.
func (r *Real) Header(name string) (*SetInfo, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	sets, err := r.dump("list header", name, listHeaderOnly)
	if err != nil {
		return nil, err
	}
	return sets[0], nil
}

// ListNames implements Interface.
func (r *Real) ListNames() ([]string, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	sets, err := r.dump("list names", "", listNamesOnly)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
	}
	slices.Sort(names)
	return names, nil
}

// Dump implements Interface.
func (r *Real) Dump() (string, error) {
	if err := r.enter(); err != nil {
		return "", err
	}
	defer r.mu.RUnlock()
	sets, err := r.dump("dump", "", 0)
	if err != nil {
		return "", err
	}
	return FormatDump(sets), nil
}

// Replace implements Interface.
func (r *Real) Replace(s Set, entries []Entry) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	r.replaceMu.Lock()
	defer r.replaceMu.Unlock()
	return ReplaceWith(realPrimitives{r}, s, entries)
}

// dump lists one set (name given) or all, in full or as flags say, merging the messages the
// kernel splits a large set into. With a name it returns exactly that set or
// kerr.ErrNotFound.
func (r *Real) dump(what, name string, flags uint32) ([]*SetInfo, error) {
	if name != "" {
		what += " set " + name
	}
	what = "ipset: " + what
	req := r.request(nl.IPSET_CMD_LIST, unix.NLM_F_ACK|unix.NLM_F_DUMP)
	if name != "" {
		req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(name)))
	}
	if flags != 0 {
		req.AddData(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_FLAGS | unix.NLA_F_NET_BYTEORDER, Value: flags})
	}
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil {
		return nil, kernelErr(what, "", err)
	}
	sets, err := parseListing(msgs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if name != "" && (len(sets) != 1 || sets[0].Name != name) {
		return nil, fmt.Errorf("%s: the kernel listed %d other sets: %w", what, len(sets), kerr.ErrNotFound)
	}
	return sets, nil
}

// realPrimitives gives ReplaceWith the real implementation's single requests.
type realPrimitives struct{ r *Real }

func (p realPrimitives) ListSet(name string) (*SetInfo, error) { return p.r.list(name) }
func (p realPrimitives) CreateSet(s Set) error                 { return p.r.create(s) }
func (p realPrimitives) DestroySet(name string) error          { return p.r.destroy(name) }
func (p realPrimitives) AddEntries(s Set, es []Entry) error    { return p.r.add(s, es) }
func (p realPrimitives) SwapSets(a, b string) error            { return p.r.swap(a, b) }
