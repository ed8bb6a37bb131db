package ipset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink/nl"

	"github.com/kipvs/kipvs/internal/inet"
)

// attrTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an attribute type.
const attrTypeMask = 0x3fff

type rawAttr struct {
	typ uint16 // without flags
	val []byte
}

// parseAttrs splits a block of netlink attributes.
func parseAttrs(b []byte) ([]rawAttr, error) {
	var out []rawAttr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & attrTypeMask
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("malformed netlink attribute: type %d, length %d, %d bytes left", t, l, len(b))
		}
		out = append(out, rawAttr{typ: t, val: b[4:l]})
		next := (l + 3) &^ 3
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return out, nil
}

// rawEntry is a member as the kernel lists it, before the set type gives it a shape.
type rawEntry struct {
	ip, ip2     netip.Addr
	cidr, cidr2 uint8
	port        uint16
	proto       uint8
	comment     string
}

func be32(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func cstring(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// parseListing decodes the replies to IPSET_CMD_LIST. A set's first message carries its
// header; a set too large for one message continues in more that repeat only its name.
func parseListing(msgs [][]byte) ([]*SetInfo, error) {
	var order []*SetInfo
	byName := map[string]*SetInfo{}
	raws := map[*SetInfo][]rawEntry{}
	for _, m := range msgs {
		if len(m) < 4 { // nfgenmsg
			continue
		}
		attrs, err := parseAttrs(m[4:])
		if err != nil {
			return nil, err
		}
		var cur *SetInfo
		for _, a := range attrs {
			if a.typ == nl.IPSET_ATTR_SETNAME {
				name := cstring(a.val)
				if cur = byName[name]; cur == nil {
					cur = &SetInfo{Set: Set{Name: name}}
					byName[name] = cur
					order = append(order, cur)
				}
			}
		}
		if cur == nil {
			continue
		}
		for _, a := range attrs {
			switch a.typ {
			case nl.IPSET_ATTR_TYPENAME:
				cur.Type = Type(cstring(a.val))
			case nl.IPSET_ATTR_FAMILY:
				if len(a.val) > 0 {
					cur.Family = familyOf(a.val[0])
				}
			case nl.IPSET_ATTR_DATA:
				if err := parseHeader(cur, a.val); err != nil {
					return nil, fmt.Errorf("set %s header: %w", cur.Name, err)
				}
			case nl.IPSET_ATTR_ADT:
				es, err := parseMembers(a.val)
				if err != nil {
					return nil, fmt.Errorf("set %s members: %w", cur.Name, err)
				}
				raws[cur] = append(raws[cur], es...)
			}
		}
	}
	for _, s := range order {
		if s.Type == BitmapPort {
			s.Family = 0
		}
		if !s.Type.Supported() {
			continue
		}
		for _, re := range raws[s] {
			s.Entries = append(s.Entries, shape(s.Type, re))
		}
		slices.SortFunc(s.Entries, CompareEntries)
	}
	return order, nil
}

func parseHeader(s *SetInfo, b []byte) error {
	attrs, err := parseAttrs(b)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		switch a.typ {
		case nl.IPSET_ATTR_HASHSIZE:
			s.HashSize = be32(a.val)
		case nl.IPSET_ATTR_MAXELEM:
			s.MaxElem = be32(a.val)
		case nl.IPSET_ATTR_REFERENCES:
			s.References = int(be32(a.val))
		case nl.IPSET_ATTR_ELEMENTS:
			s.Elements = int(be32(a.val))
		case nl.IPSET_ATTR_CADT_FLAGS:
			s.Comment = be32(a.val)&nl.IPSET_FLAG_WITH_COMMENT != 0
		case nl.IPSET_ATTR_PORT_FROM:
			if len(a.val) >= 2 {
				s.PortFrom = binary.BigEndian.Uint16(a.val)
			}
		case nl.IPSET_ATTR_PORT_TO:
			if len(a.val) >= 2 {
				s.PortTo = binary.BigEndian.Uint16(a.val)
			}
		}
		// Ignored: memsize, bucketsize, initval, timeout and other extensions kipvs never sets.
	}
	return nil
}

func parseMembers(b []byte) ([]rawEntry, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	var out []rawEntry
	for _, a := range attrs {
		if a.typ != nl.IPSET_ATTR_DATA {
			continue
		}
		fields, err := parseAttrs(a.val)
		if err != nil {
			return nil, err
		}
		var e rawEntry
		for _, f := range fields {
			switch f.typ {
			case nl.IPSET_ATTR_IP:
				if e.ip, err = parseAddrAttr(f.val); err != nil {
					return nil, err
				}
			case nl.IPSET_ATTR_IP2:
				if e.ip2, err = parseAddrAttr(f.val); err != nil {
					return nil, err
				}
			case nl.IPSET_ATTR_CIDR:
				if len(f.val) > 0 {
					e.cidr = f.val[0]
				}
			case nl.IPSET_ATTR_CIDR2:
				if len(f.val) > 0 {
					e.cidr2 = f.val[0]
				}
			case nl.IPSET_ATTR_PORT:
				if len(f.val) >= 2 {
					e.port = binary.BigEndian.Uint16(f.val)
				}
			case nl.IPSET_ATTR_PROTO:
				if len(f.val) > 0 {
					e.proto = f.val[0]
				}
			case nl.IPSET_ATTR_COMMENT:
				e.comment = cstring(f.val)
			}
			// Ignored: counters, timeouts, skbinfo, the nomatch flag.
		}
		out = append(out, e)
	}
	return out, nil
}

// parseAddrAttr decodes a nested IPSET_ATTR_IPADDR_IPV4/IPV6.
func parseAddrAttr(b []byte) (netip.Addr, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range attrs {
		switch {
		case a.typ == nl.IPSET_ATTR_IPADDR_IPV4 && len(a.val) == 4:
			return netip.AddrFrom4([4]byte(a.val)), nil
		case a.typ == nl.IPSET_ATTR_IPADDR_IPV6 && len(a.val) == 16:
			return netip.AddrFrom16([16]byte(a.val)), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("address attribute without an IPv4 or IPv6 address")
}

// shape turns a listed member into the Entry of a supported set type.
func shape(t Type, re rawEntry) Entry {
	prefix := func(a netip.Addr, bits uint8) netip.Prefix {
		if bits == 0 {
			bits = uint8(a.BitLen())
		}
		return netip.PrefixFrom(a, int(bits))
	}
	e := Entry{Comment: re.comment}
	switch t {
	case HashIP:
		e.IP = re.ip
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		e.IP, e.Protocol, e.Port = re.ip, inet.Protocol(re.proto), re.port
		if t == HashIPPortIP {
			e.IP2 = re.ip2
		}
		if t == HashIPPortNet {
			e.Net = prefix(re.ip2, re.cidr2)
		}
	case HashNet:
		e.Net = prefix(re.ip, re.cidr)
	case BitmapPort:
		e.Port = re.port
	}
	return e
}
