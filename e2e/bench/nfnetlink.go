package bench

import (
	"encoding/binary"
	"fmt"
	"net/netip"

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

// nftSource answers the probe's two requests with the kernel's messages: the rules of a
// table or of one of its chains (a chain that does not exist has none), and the elements
// of a set. nftConn reads the kernel; the tests answer with recorded messages.
type nftSource interface {
	rules(table, chain string) ([]netlink.Message, error)
	elems(table, set string) ([]netlink.Message, error)
}

// nftConn is an nftSource over a netlink socket of the current network namespace.
type nftConn struct{ c *netlink.Conn }

func dialNFT() (*nftConn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: nf_tables netlink socket: %w", err)
	}
	return &nftConn{c: c}, nil
}

func (n *nftConn) Close() error { return n.c.Close() }

func (n *nftConn) rules(table, chain string) ([]netlink.Message, error) {
	req, err := ruleDump(table, chain)
	if err != nil {
		return nil, err
	}
	msgs, err := n.c.Execute(req)
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
	msgs, err := n.c.Execute(req)
	if err != nil {
		return nil, fmt.Errorf("bench: elements of %s %s: %w", table, set, err)
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

// decoder is an attribute decoder of nf_tables data (integers in network byte order).
func decoder(b []byte) (*netlink.AttributeDecoder, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("bench: nf_tables attributes: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	return ad, nil
}

// decodeRules decodes the answers of a rule dump.
func decodeRules(msgs []netlink.Message) ([]nftRule, error) {
	var out []nftRule
	for _, m := range msgs {
		b, err := checkDump(m, unix.NFT_MSG_NEWRULE)
		if err != nil {
			return nil, err
		}
		ad, err := decoder(b)
		if err != nil {
			return nil, err
		}
		var r nftRule
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_RULE_CHAIN:
				r.chain = ad.String()
			case unix.NFTA_RULE_EXPRESSIONS:
				ad.Nested(r.decodeExprs)
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("bench: rule of chain %q: %w", r.chain, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// regs is what a rule's expressions so far left in the registers, by the index of a
// register's first 32-bit word: a value (an immediate) or a field of the packet (a
// payload or meta load).
type regs struct {
	value map[uint32][]byte
	field map[uint32]string
}

// reg32 is the 32-bit word where register r starts: NFT_REG_1..4 are 16 bytes each,
// NFT_REG32_00.. one word each; both address the same space.
func reg32(r uint32) uint32 {
	if r >= unix.NFT_REG32_00 {
		return r - unix.NFT_REG32_00
	}
	return (r - unix.NFT_REG_1) * 4
}

// The fields a rule may load and compare (see nftRule.dst).
const (
	fieldDaddr   = "daddr"
	fieldL4proto = "l4proto"
	fieldDport   = "dport"
)

// decodeExprs decodes a rule's list of expressions, in order.
func (r *nftRule) decodeExprs(ad *netlink.AttributeDecoder) error {
	rg := regs{value: map[uint32][]byte{}, field: map[uint32]string{}}
	for ad.Next() {
		if ad.Type() != unix.NFTA_LIST_ELEM {
			continue
		}
		ad.Nested(func(ad *netlink.AttributeDecoder) error {
			var name string
			var data []byte
			for ad.Next() {
				switch ad.Type() {
				case unix.NFTA_EXPR_NAME:
					name = ad.String()
				case unix.NFTA_EXPR_DATA:
					data = ad.Bytes()
				}
			}
			if err := ad.Err(); err != nil {
				return err
			}
			return r.decodeExpr(&rg, name, data)
		})
	}
	return ad.Err()
}

// decodeExpr decodes one expression: verdicts (immediate), verdict map lookups (lookup),
// DNAT (nat, and iptables-nft's xt target), and the loads and comparisons of the
// destination (payload, meta, cmp). The others are skipped; one that writes a register
// the probe follows (bitwise) forgets what it held.
func (r *nftRule) decodeExpr(rg *regs, name string, data []byte) error {
	ad, err := decoder(data)
	if err != nil {
		return fmt.Errorf("expression %s: %w", name, err)
	}
	attrs := map[uint16][]byte{}
	for ad.Next() {
		attrs[ad.Type()] = ad.Bytes()
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("expression %s: %w", name, err)
	}
	u32 := func(typ uint16) (uint32, bool) {
		b, ok := attrs[typ]
		if !ok || len(b) != 4 {
			return 0, false
		}
		return binary.BigEndian.Uint32(b), true
	}
	switch name {
	case "immediate":
		dreg, _ := u32(unix.NFTA_IMMEDIATE_DREG)
		return decodeData(attrs[unix.NFTA_IMMEDIATE_DATA], func(v []byte) {
			rg.value[reg32(dreg)] = v
			delete(rg.field, reg32(dreg))
		}, func(chain string) {
			r.verdicts = append(r.verdicts, chain)
		})
	case "lookup":
		// A map lookup has a destination register; the verdict register makes it a vmap.
		if dreg, ok := u32(unix.NFTA_LOOKUP_DREG); ok && dreg == unix.NFT_REG_VERDICT {
			r.vmaps = append(r.vmaps, nlString(attrs[unix.NFTA_LOOKUP_SET]))
		}
	case "nat":
		typ, _ := u32(unix.NFTA_NAT_TYPE)
		areg, aok := u32(unix.NFTA_NAT_REG_ADDR_MIN)
		preg, pok := u32(unix.NFTA_NAT_REG_PROTO_MIN)
		if typ != unix.NFT_NAT_DNAT || !aok || !pok {
			return nil
		}
		addr, ok := netip.AddrFromSlice(rg.value[reg32(areg)])
		port := rg.value[reg32(preg)]
		if !ok || len(port) < 2 {
			return fmt.Errorf("dnat from registers %d and %d, which hold no address and port", areg, preg)
		}
		r.dnat = netip.AddrPortFrom(addr, binary.BigEndian.Uint16(port))
	case "target":
		if nlString(attrs[unix.NFTA_TARGET_NAME]) != "DNAT" {
			return nil
		}
		rev, _ := u32(unix.NFTA_TARGET_REV)
		ap, err := xtDNAT(rev, attrs[unix.NFTA_TARGET_INFO])
		if err != nil {
			return err
		}
		r.dnat = ap
	case "payload":
		dreg, ok := u32(unix.NFTA_PAYLOAD_DREG)
		if !ok {
			return nil // payload set
		}
		base, _ := u32(unix.NFTA_PAYLOAD_BASE)
		off, _ := u32(unix.NFTA_PAYLOAD_OFFSET)
		n, _ := u32(unix.NFTA_PAYLOAD_LEN)
		delete(rg.value, reg32(dreg))
		switch {
		case base == unix.NFT_PAYLOAD_NETWORK_HEADER && off == 16 && n == 4: // IPv4 destination
			rg.field[reg32(dreg)] = fieldDaddr
		case base == unix.NFT_PAYLOAD_TRANSPORT_HEADER && off == 2 && n == 2: // TCP, UDP, SCTP destination port
			rg.field[reg32(dreg)] = fieldDport
		default:
			delete(rg.field, reg32(dreg))
		}
	case "meta":
		dreg, ok := u32(unix.NFTA_META_DREG)
		if !ok {
			return nil // meta set
		}
		delete(rg.value, reg32(dreg))
		if key, _ := u32(unix.NFTA_META_KEY); key == unix.NFT_META_L4PROTO {
			rg.field[reg32(dreg)] = fieldL4proto
		} else {
			delete(rg.field, reg32(dreg))
		}
	case "bitwise":
		dreg, ok := u32(unix.NFTA_BITWISE_DREG)
		if !ok {
			return nil
		}
		delete(rg.value, reg32(dreg))
		delete(rg.field, reg32(dreg))
	case "cmp":
		sreg, _ := u32(unix.NFTA_CMP_SREG)
		op, _ := u32(unix.NFTA_CMP_OP)
		if op != unix.NFT_CMP_EQ {
			return nil
		}
		return decodeData(attrs[unix.NFTA_CMP_DATA], func(v []byte) {
			r.matched(rg.field[reg32(sreg)], v)
		}, nil)
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
	ad, err := decoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_DATA_VALUE:
			if value != nil {
				value(ad.Bytes())
			}
		case unix.NFTA_DATA_VERDICT:
			ad.Nested(func(ad *netlink.AttributeDecoder) error {
				var code int32
				var chain string
				for ad.Next() {
					switch ad.Type() {
					case unix.NFTA_VERDICT_CODE:
						code = ad.Int32()
					case unix.NFTA_VERDICT_CHAIN:
						chain = ad.String()
					}
				}
				if (code == unix.NFT_JUMP || code == unix.NFT_GOTO) && verdict != nil {
					verdict(chain)
				}
				return ad.Err()
			})
		}
	}
	return ad.Err()
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
		ad, err := decoder(b)
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			ad.Nested(func(ad *netlink.AttributeDecoder) error {
				for ad.Next() {
					if ad.Type() != unix.NFTA_LIST_ELEM {
						continue
					}
					ad.Nested(func(ad *netlink.AttributeDecoder) error {
						var e nftElem
						for ad.Next() {
							switch ad.Type() {
							case unix.NFTA_SET_ELEM_KEY:
								if err := decodeData(ad.Bytes(), func(v []byte) { e.key = v }, nil); err != nil {
									return err
								}
							case unix.NFTA_SET_ELEM_DATA:
								if err := decodeData(ad.Bytes(), nil, func(c string) { e.chain = c }); err != nil {
									return err
								}
							}
						}
						out = append(out, e)
						return ad.Err()
					})
				}
				return ad.Err()
			})
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("bench: set elements: %w", err)
		}
	}
	return out, nil
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
