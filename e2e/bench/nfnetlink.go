package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// This file reads nf_tables over netlink for the rule probe: the rules of one chain (or of
// a whole table) and the elements of one set, as `nft` and `iptables-nft` read them but
// without loading the rest of the ruleset, decoding only the expressions the probe needs.

// nftMessage is the netlink message type of an nf_tables message.
func nftMessage(msg int) netlink.HeaderType {
	return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msg)
}

// nfgenmsgLen is the length of struct nfgenmsg, which starts every nf_tables message:
// the family, the version and the resource id (in a dump's answers, the ruleset's
// generation).
const nfgenmsgLen = 4

// nftRequest is a dump request of the given type for family ip with attrs.
func nftRequest(msg int, attrs func(ae *netlink.AttributeEncoder)) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	attrs(ae)
	b, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, fmt.Errorf("bench: nf_tables request: %w", err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: nftMessage(msg), Flags: netlink.Request | netlink.Dump},
		Data:   append([]byte{unix.NFPROTO_IPV4, unix.NFNETLINK_V0, 0, 0}, b...),
	}, nil
}

// ruleDump is the request for the rules of table (family ip), of only chain when chain is
// not empty: the kernel looks the chain up and dumps its rules alone.
func ruleDump(table, chain string) (netlink.Message, error) {
	return nftRequest(unix.NFT_MSG_GETRULE, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_RULE_TABLE, table)
		if chain != "" {
			ae.String(unix.NFTA_RULE_CHAIN, chain)
		}
	})
}

// elemDump is the request for the elements of one set or map of table (family ip).
func elemDump(table, set string) (netlink.Message, error) {
	return nftRequest(unix.NFT_MSG_GETSETELEM, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, table)
		ae.String(unix.NFTA_SET_ELEM_LIST_SET, set)
	})
}

// genRequest is the request for the ruleset's generation, which every commit increments;
// the flag asks for an acknowledgement after the answer.
func genRequest() netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: nftMessage(unix.NFT_MSG_GETGEN), Flags: netlink.Request | netlink.Acknowledge},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
}

// nftSource answers the probe's requests with the kernel's messages: the rules of a table
// or of one of its chains (a chain that does not exist has none), the elements of a set,
// and the ruleset's generation. nftConn reads the kernel; the tests answer with recorded
// messages.
type nftSource interface {
	rules(table, chain string) ([]netlink.Message, error)
	elems(table, set string) ([]netlink.Message, error)
	gen() ([]netlink.Message, error)
}

// nftConn is an nftSource over a netlink socket of the current network namespace. It
// reads with a 32 KiB buffer: the kernel fills each part of a dump up to the largest read
// the socket has seen (32 KiB at most), and starts each part by walking the table from
// its start to where the last one ended, so a whole-table dump read with the usual
// page-sized buffer costs the kernel eight times the walking.
type nftConn struct {
	fd  int
	seq uint32
	buf []byte
}

// recvTimeout bounds a read of the kernel's answer.
const recvTimeout = 30 * time.Second

func dialNFT() (*nftConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("bench: nf_tables netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(recvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bench: nf_tables netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bench: nf_tables netlink socket: %w", err)
	}
	return &nftConn{fd: fd, buf: make([]byte, 32<<10)}, nil
}

func (n *nftConn) Close() error { return unix.Close(n.fd) }

// dumpTries is how many times nftConn sends a dump request whose answer the kernel marks
// interrupted (the ruleset changed while it was dumped: the answer may mix the two).
const dumpTries = 5

func (n *nftConn) execute(req netlink.Message) ([]netlink.Message, error) {
	for range dumpTries - 1 {
		msgs, err := n.exchange(req)
		if err != nil || !slices.ContainsFunc(msgs, func(m netlink.Message) bool { return m.Header.Flags&netlink.DumpInterrupted != 0 }) {
			return msgs, err
		}
	}
	return n.exchange(req) // decoding an interrupted answer is an error
}

// exchange sends a request (a dump, or one asking for an acknowledgement) and reads its
// answers up to NLMSG_DONE or the acknowledgement; an NLMSG_ERROR is its errno.
func (n *nftConn) exchange(req netlink.Message) ([]netlink.Message, error) {
	n.seq++
	req.Header.Sequence = n.seq
	req.Header.Length = uint32(unix.NLMSG_HDRLEN + len(req.Data))
	b, err := req.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("bench: netlink request: %w", err)
	}
	if err := unix.Sendto(n.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("bench: netlink send: %w", err)
	}
	var out []netlink.Message
	for {
		k, _, err := unix.Recvfrom(n.fd, n.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bench: netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(slices.Clone(n.buf[:k]))
		if err != nil {
			return nil, fmt.Errorf("bench: netlink receive: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != n.seq {
				continue // the answer to an earlier request that gave up
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE, unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, fmt.Errorf("bench: netlink %d message of %d bytes", m.Header.Type, len(m.Data))
				}
				if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return nil, syscall.Errno(errno)
				}
				return out, nil
			}
			out = append(out, netlink.Message{
				Header: netlink.Header{Length: m.Header.Len, Type: netlink.HeaderType(m.Header.Type),
					Flags: netlink.HeaderFlags(m.Header.Flags), Sequence: m.Header.Seq, PID: m.Header.Pid},
				Data: m.Data,
			})
		}
	}
}

func (n *nftConn) rules(table, chain string) ([]netlink.Message, error) {
	req, err := ruleDump(table, chain)
	if err != nil {
		return nil, err
	}
	msgs, err := n.execute(req)
	if err != nil {
		return nil, fmt.Errorf("bench: rules of %s %s: %w", table, chain, err)
	}
	return msgs, nil
}

func (n *nftConn) elems(table, set string) ([]netlink.Message, error) {
	req, err := elemDump(table, set)
	if err != nil {
		return nil, err
	}
	msgs, err := n.execute(req)
	if err != nil {
		return nil, fmt.Errorf("bench: elements of %s %s: %w", table, set, err)
	}
	return msgs, nil
}

func (n *nftConn) gen() ([]netlink.Message, error) {
	msgs, err := n.exchange(genRequest())
	if err != nil {
		return nil, fmt.Errorf("bench: nf_tables generation: %w", err)
	}
	return msgs, nil
}

// nftRule is what the probe decodes of one rule.
type nftRule struct {
	chain string
	// verdicts are the chains its jump and goto verdicts name, in order.
	verdicts []string
	// vmaps are the maps it looks a verdict up in (kube-proxy's `numgen ... vmap { ... }`
	// is an anonymous map, "__mapN").
	vmaps []string
	// dnat is its DNAT destination (an nft nat expression, or iptables' DNAT target);
	// invalid when it has none.
	dnat netip.AddrPort
	// dst is what it matches of the destination, each field zero when not matched: the
	// address (ip daddr ==), the protocol (meta l4proto ==) and the port (th dport ==), as
	// kube-proxy's iptables mode matches a Service in KUBE-SERVICES.
	dst VIP
}

// nftElem is one element of a verdict map: its key and the chain its verdict names.
type nftElem struct {
	key   []byte
	chain string
}

// checkDump checks a dump answer is of the type wanted and was not interrupted by a
// change of the ruleset, and returns its attributes (after the nfgenmsg).
func checkDump(m netlink.Message, msg int) ([]byte, error) {
	if m.Header.Type != nftMessage(msg) {
		return nil, fmt.Errorf("bench: nf_tables answer of type %#x, want %#x", m.Header.Type, nftMessage(msg))
	}
	if m.Header.Flags&netlink.DumpInterrupted != 0 {
		// The ruleset changed during the dump: the caller reads again.
		return nil, fmt.Errorf("bench: nf_tables dump interrupted by a change: %w", unix.EINTR)
	}
	if len(m.Data) < nfgenmsgLen {
		return nil, fmt.Errorf("bench: nf_tables answer of %d bytes", len(m.Data))
	}
	return m.Data[nfgenmsgLen:], nil
}

// attrs walks the netlink attributes in b without copying them: each one's type (without
// the nested and byte-order flags) and data. A whole-table read decodes every rule of the
// table, so the walk allocates nothing.
type attrs struct {
	b    []byte
	typ  uint16
	data []byte
	err  error
}

func (a *attrs) next() bool {
	if len(a.b) == 0 || a.err != nil {
		return false
	}
	if len(a.b) < 4 {
		a.err = fmt.Errorf("bench: netlink attribute header in %d bytes", len(a.b))
		return false
	}
	n := int(binary.NativeEndian.Uint16(a.b[0:2]))
	if n < 4 || n > len(a.b) {
		a.err = fmt.Errorf("bench: netlink attribute of length %d in %d bytes", n, len(a.b))
		return false
	}
	a.typ = binary.NativeEndian.Uint16(a.b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	a.data = a.b[4:n]
	a.b = a.b[min(len(a.b), (n+3)&^3):]
	return true
}

// be32 is a 32-bit attribute's value (nf_tables integers are in network byte order).
func be32(b []byte) (uint32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// decodeRules decodes the answers of a rule dump.
func decodeRules(msgs []netlink.Message) ([]nftRule, error) {
	out := make([]nftRule, 0, len(msgs))
	for _, m := range msgs {
		b, err := checkDump(m, unix.NFT_MSG_NEWRULE)
		if err != nil {
			return nil, err
		}
		var r nftRule
		a := attrs{b: b}
		for a.next() {
			switch a.typ {
			case unix.NFTA_RULE_CHAIN:
				r.chain = nlString(a.data)
			case unix.NFTA_RULE_EXPRESSIONS:
				err = r.decodeExprs(a.data)
			}
			if err != nil {
				break
			}
		}
		if err == nil {
			err = a.err
		}
		if err != nil {
			return nil, fmt.Errorf("bench: rule of chain %q: %w", r.chain, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// regs is what a rule's expressions so far left in the registers, by the 32-bit word
// where a register starts: a value (an immediate) or a field of the packet (a payload or
// meta load).
type regs struct {
	value [16][]byte
	field [16]string
}

// word is the 32-bit word where register r starts: NFT_REG_1..4 are 16 bytes each,
// NFT_REG32_00..15 one word each; both address the same 16 words. ok is false for the
// verdict register and any other.
func word(r uint32) (w uint32, ok bool) {
	switch {
	case r >= unix.NFT_REG32_00 && r <= unix.NFT_REG32_15:
		return r - unix.NFT_REG32_00, true
	case r >= unix.NFT_REG_1 && r <= unix.NFT_REG_4:
		return (r - unix.NFT_REG_1) * 4, true
	}
	return 0, false
}

// set notes what register r now holds: a value, or a field ("" for neither).
func (rg *regs) set(r uint32, value []byte, field string) {
	if w, ok := word(r); ok {
		rg.value[w], rg.field[w] = value, field
	}
}

func (rg *regs) get(r uint32) ([]byte, string) {
	if w, ok := word(r); ok {
		return rg.value[w], rg.field[w]
	}
	return nil, ""
}

// The fields a rule may load and compare (see nftRule.dst).
const (
	fieldDaddr   = "daddr"
	fieldL4proto = "l4proto"
	fieldDport   = "dport"
)

// decodeExprs decodes a rule's list of expressions, in order.
func (r *nftRule) decodeExprs(b []byte) error {
	var rg regs
	list := attrs{b: b}
	for list.next() {
		if list.typ != unix.NFTA_LIST_ELEM {
			continue
		}
		var name, data []byte
		a := attrs{b: list.data}
		for a.next() {
			switch a.typ {
			case unix.NFTA_EXPR_NAME:
				name = a.data
			case unix.NFTA_EXPR_DATA:
				data = a.data
			}
		}
		if a.err != nil {
			return a.err
		}
		if err := r.decodeExpr(&rg, nlString(name), data); err != nil {
			return fmt.Errorf("expression %s: %w", nlString(name), err)
		}
	}
	return list.err
}

// exprAttrs is the highest attribute type decodeExpr reads (NFTA_NAT_REG_PROTO_MIN).
const exprAttrs = unix.NFTA_NAT_REG_PROTO_MIN

// decodeExpr decodes one expression: verdicts (immediate), verdict map lookups (lookup),
// DNAT (nat, and iptables-nft's xt target), and the loads and comparisons of the
// destination (payload, meta, cmp). The others are skipped; one that writes a register
// the probe follows (bitwise) forgets what it held.
func (r *nftRule) decodeExpr(rg *regs, name string, data []byte) error {
	switch name {
	case "immediate", "lookup", "nat", "target", "payload", "meta", "bitwise", "cmp":
	default:
		return nil
	}
	var at [exprAttrs + 1][]byte
	a := attrs{b: data}
	for a.next() {
		if a.typ <= exprAttrs {
			at[a.typ] = a.data
		}
	}
	if a.err != nil {
		return a.err
	}
	switch name {
	case "immediate":
		dreg, _ := be32(at[unix.NFTA_IMMEDIATE_DREG])
		return decodeData(at[unix.NFTA_IMMEDIATE_DATA], func(v []byte) {
			rg.set(dreg, v, "")
		}, func(chain string) {
			r.verdicts = append(r.verdicts, chain)
		})
	case "lookup":
		// A map lookup has a destination register; the verdict register makes it a vmap.
		if dreg, ok := be32(at[unix.NFTA_LOOKUP_DREG]); ok && dreg == unix.NFT_REG_VERDICT {
			r.vmaps = append(r.vmaps, nlString(at[unix.NFTA_LOOKUP_SET]))
		}
	case "nat":
		typ, _ := be32(at[unix.NFTA_NAT_TYPE])
		areg, aok := be32(at[unix.NFTA_NAT_REG_ADDR_MIN])
		preg, pok := be32(at[unix.NFTA_NAT_REG_PROTO_MIN])
		if typ != unix.NFT_NAT_DNAT || !aok || !pok {
			return nil
		}
		a, _ := rg.get(areg)
		port, _ := rg.get(preg)
		addr, ok := netip.AddrFromSlice(a)
		if !ok || len(port) < 2 {
			return fmt.Errorf("dnat from registers %d and %d, which hold no address and port", areg, preg)
		}
		r.dnat = netip.AddrPortFrom(addr, binary.BigEndian.Uint16(port))
	case "target":
		if nlString(at[unix.NFTA_TARGET_NAME]) != "DNAT" {
			return nil
		}
		rev, _ := be32(at[unix.NFTA_TARGET_REV])
		ap, err := xtDNAT(rev, at[unix.NFTA_TARGET_INFO])
		if err != nil {
			return err
		}
		r.dnat = ap
	case "payload":
		dreg, ok := be32(at[unix.NFTA_PAYLOAD_DREG])
		if !ok {
			return nil // payload set
		}
		base, _ := be32(at[unix.NFTA_PAYLOAD_BASE])
		off, _ := be32(at[unix.NFTA_PAYLOAD_OFFSET])
		n, _ := be32(at[unix.NFTA_PAYLOAD_LEN])
		switch {
		case base == unix.NFT_PAYLOAD_NETWORK_HEADER && off == 16 && n == 4: // IPv4 destination
			rg.set(dreg, nil, fieldDaddr)
		case base == unix.NFT_PAYLOAD_TRANSPORT_HEADER && off == 2 && n == 2: // TCP, UDP, SCTP destination port
			rg.set(dreg, nil, fieldDport)
		default:
			rg.set(dreg, nil, "")
		}
	case "meta":
		dreg, ok := be32(at[unix.NFTA_META_DREG])
		if !ok {
			return nil // meta set
		}
		if key, _ := be32(at[unix.NFTA_META_KEY]); key == unix.NFT_META_L4PROTO {
			rg.set(dreg, nil, fieldL4proto)
		} else {
			rg.set(dreg, nil, "")
		}
	case "bitwise":
		dreg, ok := be32(at[unix.NFTA_BITWISE_DREG])
		if !ok {
			return nil
		}
		rg.set(dreg, nil, "")
	case "cmp":
		sreg, _ := be32(at[unix.NFTA_CMP_SREG])
		op, _ := be32(at[unix.NFTA_CMP_OP])
		if op != unix.NFT_CMP_EQ {
			return nil
		}
		_, field := rg.get(sreg)
		return decodeData(at[unix.NFTA_CMP_DATA], func(v []byte) { r.matched(field, v) }, nil)
	}
	return nil
}

// matched notes that the rule matches field == v.
func (r *nftRule) matched(field string, v []byte) {
	switch field {
	case fieldDaddr:
		if a, ok := netip.AddrFromSlice(v); ok {
			r.dst.Addr = a
		}
	case fieldL4proto:
		if len(v) == 1 {
			r.dst.Proto = protoName(v[0])
		}
	case fieldDport:
		if len(v) == 2 {
			r.dst.Port = binary.BigEndian.Uint16(v)
		}
	}
}

// decodeData decodes struct nft_data's attributes (NFTA_DATA_*): a value, or a verdict,
// whose chain (for jump and goto) is passed on.
func decodeData(b []byte, value func([]byte), verdict func(chain string)) error {
	a := attrs{b: b}
	for a.next() {
		switch a.typ {
		case unix.NFTA_DATA_VALUE:
			if value != nil {
				value(a.data)
			}
		case unix.NFTA_DATA_VERDICT:
			var code uint32
			var chain []byte
			v := attrs{b: a.data}
			for v.next() {
				switch v.typ {
				case unix.NFTA_VERDICT_CODE:
					code, _ = be32(v.data)
				case unix.NFTA_VERDICT_CHAIN:
					chain = v.data
				}
			}
			if v.err != nil {
				return v.err
			}
			if c := int32(code); (c == unix.NFT_JUMP || c == unix.NFT_GOTO) && verdict != nil {
				verdict(nlString(chain))
			}
		}
	}
	return a.err
}

// xtDNAT reads the destination of iptables' DNAT target from its xt info:
// struct nf_nat_ipv4_multi_range_compat (revision 0), struct nf_nat_range (1) or struct
// nf_nat_range2 (2, which adds to 1's end); the address and port in network byte order.
func xtDNAT(rev uint32, info []byte) (netip.AddrPort, error) {
	var a, p []byte
	switch rev {
	case 0: // rangesize, flags, min_ip, max_ip, min port, max port
		if len(info) >= 18 {
			a, p = info[8:12], info[16:18]
		}
	case 1, 2: // flags, min_addr (16 bytes), max_addr, min_proto, max_proto[, base_proto]
		if len(info) >= 38 {
			a, p = info[4:8], info[36:38]
		}
	default:
		return netip.AddrPort{}, fmt.Errorf("DNAT target revision %d", rev)
	}
	if a == nil {
		return netip.AddrPort{}, fmt.Errorf("DNAT target revision %d: %d bytes of info", rev, len(info))
	}
	addr, _ := netip.AddrFromSlice(a)
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(p)), nil
}

// decodeElems decodes the answers of a set element dump of a verdict map.
func decodeElems(msgs []netlink.Message) ([]nftElem, error) {
	var out []nftElem
	for _, m := range msgs {
		b, err := checkDump(m, unix.NFT_MSG_NEWSETELEM)
		if err != nil {
			return nil, err
		}
		a := attrs{b: b}
		for a.next() {
			if a.typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			list := attrs{b: a.data}
			for list.next() {
				if list.typ != unix.NFTA_LIST_ELEM {
					continue
				}
				var e nftElem
				ea := attrs{b: list.data}
				for ea.next() {
					switch ea.typ {
					case unix.NFTA_SET_ELEM_KEY:
						err = decodeData(ea.data, func(v []byte) { e.key = v }, nil)
					case unix.NFTA_SET_ELEM_DATA:
						err = decodeData(ea.data, nil, func(c string) { e.chain = c })
					}
					if err != nil {
						return nil, fmt.Errorf("bench: set element: %w", err)
					}
				}
				if ea.err != nil {
					return nil, fmt.Errorf("bench: set element: %w", ea.err)
				}
				out = append(out, e)
			}
			if list.err != nil {
				return nil, fmt.Errorf("bench: set elements: %w", list.err)
			}
		}
		if a.err != nil {
			return nil, fmt.Errorf("bench: set elements: %w", a.err)
		}
	}
	return out, nil
}

// decodeGen decodes the answer to genRequest.
func decodeGen(msgs []netlink.Message) (uint32, error) {
	for _, m := range msgs {
		if m.Header.Type != nftMessage(unix.NFT_MSG_NEWGEN) || len(m.Data) < nfgenmsgLen {
			continue
		}
		a := attrs{b: m.Data[nfgenmsgLen:]}
		for a.next() {
			if g, ok := be32(a.data); ok && a.typ == unix.NFTA_GEN_ID {
				return g, nil
			}
		}
		if a.err != nil {
			return 0, a.err
		}
	}
	return 0, fmt.Errorf("bench: nf_tables generation: no NFTA_GEN_ID in %d messages", len(msgs))
}

// serviceIPsKey decodes a key of kube-proxy's service-ips map, ipv4_addr . inet_proto .
// inet_service: each part in its own 32-bit words, the port in network byte order.
func serviceIPsKey(k []byte) (VIP, error) {
	if len(k) != 12 {
		return VIP{}, fmt.Errorf("bench: %s key of %d bytes, want 12 (address . protocol . port)", nftServiceIPs, len(k))
	}
	addr, _ := netip.AddrFromSlice(k[0:4])
	proto := protoName(k[4])
	if proto == "" {
		return VIP{}, fmt.Errorf("bench: %s key %x: protocol %d", nftServiceIPs, k, k[4])
	}
	return VIP{Addr: addr, Proto: proto, Port: binary.BigEndian.Uint16(k[8:10])}, nil
}

// protoName is VIP.Proto of an IP protocol number, "" for one a Service does not have.
func protoName(p byte) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	}
	return ""
}

// nlString is a NUL-terminated attribute's string.
func nlString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// splitMessages splits netlink messages as the kernel sends them (each header's length
// covering it, aligned to 4 bytes), as recorded in testdata.
func splitMessages(b []byte) ([]netlink.Message, error) {
	var out []netlink.Message
	for len(b) > 0 {
		if len(b) < 16 {
			return nil, fmt.Errorf("bench: netlink message of %d bytes", len(b))
		}
		n := int(binary.NativeEndian.Uint32(b[:4]))
		if n < 16 || n > len(b) {
			return nil, fmt.Errorf("bench: netlink message length %d of %d bytes", n, len(b))
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:n]); err != nil {
			return nil, fmt.Errorf("bench: netlink message: %w", err)
		}
		out = append(out, m)
		b = b[(n+3)&^3:]
	}
	return out, nil
}
