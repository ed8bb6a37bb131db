package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	gnft "github.com/google/nftables"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// SetDef is a set of the table as kipvs declares it.
type SetDef struct {
	Name string
	// Type is the set's nft type: one field ("ipv4_addr", "inet_service") or a
	// concatenation ("ipv4_addr . inet_proto . inet_service").
	Type string
	// Interval: the set has flags interval, and its last field holds prefixes.
	Interval bool
}

// The field types kipvs's sets use, with their size in a key.
var fieldSize = map[string]int{"ipv4_addr": 4, "ipv6_addr": 16, "inet_proto": 1, "inet_service": 2}

// codec turns an element written as its fields in nft's notation ("10.96.0.1", "tcp", "80",
// "192.168.0.0/16") into the key bytes nf_tables holds and back.
type codec struct {
	fields   []string
	interval bool
}

func newCodec(s SetDef) (codec, error) {
	c := codec{fields: strings.Split(s.Type, " . "), interval: s.Interval}
	for _, f := range c.fields {
		if fieldSize[f] == 0 {
			return c, fmt.Errorf("set %s: field type %q: %w", s.Name, f, kerr.ErrInvalid)
		}
	}
	return c, nil
}

// width is the bytes field f takes in the key: in a concatenation each field takes a
// multiple of 4 bytes (a 32-bit register), alone its own size.
func (c codec) width(f string) int {
	if len(c.fields) == 1 {
		return fieldSize[f]
	}
	return (fieldSize[f] + 3) &^ 3
}

// encode returns the key of elem and, for an interval set, the end of its range.
func (c codec) encode(elem []string) (key, end []byte, err error) {
	if len(elem) != len(c.fields) {
		return nil, nil, fmt.Errorf("element %q: %d fields, the set has %d: %w", elem, len(elem), len(c.fields), kerr.ErrInvalid)
	}
	for i, f := range c.fields {
		w := c.width(f)
		lo, hi := make([]byte, w), make([]byte, w)
		last := c.interval && i == len(c.fields)-1
		switch f {
		case "ipv4_addr", "ipv6_addr":
			p, perr := parsePrefix(elem[i], last)
			if perr != nil || p.Addr().BitLen() != 8*fieldSize[f] {
				return nil, nil, fmt.Errorf("element %q: %s %q: %w", elem, f, elem[i], kerr.ErrInvalid)
			}
			copy(lo, p.Masked().Addr().AsSlice())
			copy(hi, lastAddr(p).AsSlice())
		case "inet_proto":
			n, ok := protoNumber(elem[i])
			if !ok {
				return nil, nil, fmt.Errorf("element %q: protocol %q: %w", elem, elem[i], kerr.ErrInvalid)
			}
			lo[0], hi[0] = n, n
		case "inet_service":
			n, perr := strconv.ParseUint(elem[i], 10, 16)
			if perr != nil {
				return nil, nil, fmt.Errorf("element %q: port %q: %w", elem, elem[i], kerr.ErrInvalid)
			}
			binary.BigEndian.PutUint16(lo, uint16(n))
			binary.BigEndian.PutUint16(hi, uint16(n))
		}
		key, end = append(key, lo...), append(end, hi...)
	}
	if !c.interval {
		end = nil
	}
	return key, end, nil
}

// decode is encode's inverse: a prefix is written as nft lists it (a host as its address).
func (c codec) decode(key, end []byte) ([]string, error) {
	var out []string
	off := 0
	for i, f := range c.fields {
		w := c.width(f)
		if len(key) < off+w || (c.interval && len(end) < off+w) {
			return nil, fmt.Errorf("key of %d bytes for %q", len(key), c.fields)
		}
		b := key[off : off+fieldSize[f]]
		switch f {
		case "ipv4_addr", "ipv6_addr":
			a, _ := netip.AddrFromSlice(b)
			if c.interval && i == len(c.fields)-1 {
				hi, _ := netip.AddrFromSlice(end[off : off+fieldSize[f]])
				p, ok := prefixOf(a, hi)
				if !ok {
					return nil, fmt.Errorf("range %s-%s is not a prefix", a, hi)
				}
				if p.IsSingleIP() {
					out = append(out, a.String())
				} else {
					out = append(out, p.String())
				}
				break
			}
			out = append(out, a.String())
		case "inet_proto":
			out = append(out, protoName(b[0]))
		case "inet_service":
			out = append(out, strconv.Itoa(int(binary.BigEndian.Uint16(b))))
		}
		off += w
	}
	return out, nil
}

func parsePrefix(s string, prefixOK bool) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	if !prefixOK {
		return netip.Prefix{}, kerr.ErrInvalid
	}
	return netip.ParsePrefix(s)
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// prefixOf is the prefix whose first and last addresses are lo and hi, if there is one.
func prefixOf(lo, hi netip.Addr) (netip.Prefix, bool) {
	for bits := lo.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(lo, bits)
		if p.Masked().Addr() == lo && lastAddr(p) == hi {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func protoNumber(s string) (byte, bool) {
	for _, p := range []inet.Protocol{inet.TCP, inet.UDP, inet.SCTP, inet.ICMP, inet.ICMPv6} {
		if p.String() == s {
			return byte(p), true
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	return byte(n), err == nil
}

func protoName(n byte) string {
	switch p := inet.Protocol(n); p {
	case inet.TCP, inet.UDP, inet.SCTP, inet.ICMP, inet.ICMPv6:
		return p.String()
	}
	return strconv.Itoa(int(n))
}

// setOf is the google/nftables handle of set s of the table.
func (c *conn) setOf(s SetDef) *gnft.Set {
	fam := gnft.TableFamilyIPv4
	if c.family == inet.IPv6 {
		fam = gnft.TableFamilyIPv6
	}
	return &gnft.Set{Table: &gnft.Table{Family: fam, Name: c.table}, Name: s.Name,
		Concatenation: strings.Contains(s.Type, " . "), Interval: s.Interval}
}

// notFound types a google/nftables read error: it keeps the errno only as text.
func notFound(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), syscall.ENOENT.Error()) {
		return fmt.Errorf("%s: %w: %w", what, kerr.ErrNotFound, err)
	}
	return kerr.Errno(what, err)
}
