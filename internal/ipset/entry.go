package ipset

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// protoText is the protocol in ipset notation ("tcp", "udp", "sctp"), or its number.
func protoText(p inet.Protocol) string {
	switch p {
	case inet.TCP, inet.UDP, inet.SCTP:
		return p.String()
	}
	return strconv.Itoa(int(p))
}

func parseProtocol(s string) (inet.Protocol, bool) {
	switch s {
	case "tcp":
		return inet.TCP, true
	case "udp":
		return inet.UDP, true
	case "sctp":
		return inet.SCTP, true
	}
	return 0, false
}

// Entry is a set member. Which fields a member uses depends on the set type:
//
//	hash:ip           IP                        10.0.0.1
//	hash:ip,port      IP, Protocol, Port        10.0.0.1,tcp:80
//	hash:ip,port,ip   IP, Protocol, Port, IP2   10.0.0.1,tcp:80,10.0.0.2
//	hash:ip,port,net  IP, Protocol, Port, Net   10.0.0.1,tcp:80,10.1.0.0/16
//	hash:net          Net                       10.1.0.0/16
//	bitmap:port       Port                      8080
//
// The other fields must be zero. Comment is not part of a member's identity.
type Entry struct {
	IP       netip.Addr
	Protocol inet.Protocol
	Port     uint16
	IP2      netip.Addr
	Net      netip.Prefix
	Comment  string
}

// maxCommentLen is the kernel's IPSET_MAX_COMMENT_SIZE.
const maxCommentLen = 255

// String is the member in ipset's own notation (see Entry), without the comment. A net of
// full length prints as a bare address, as ipset prints it.
func (e Entry) String() string {
	var parts []string
	if e.IP.IsValid() {
		parts = append(parts, e.IP.String())
	}
	switch {
	case e.Protocol != 0:
		parts = append(parts, protoText(e.Protocol)+":"+strconv.Itoa(int(e.Port)))
	case e.Port != 0 || (!e.IP.IsValid() && !e.Net.IsValid()):
		parts = append(parts, strconv.Itoa(int(e.Port)))
	}
	if e.IP2.IsValid() {
		parts = append(parts, e.IP2.String())
	}
	if e.Net.IsValid() {
		parts = append(parts, netString(e.Net))
	}
	return strings.Join(parts, ",")
}

func netString(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// Key is the member's identity: the entry without its comment, with its net masked.
func (e Entry) Key() Entry {
	e.Comment = ""
	if e.Net.IsValid() {
		e.Net = e.Net.Masked()
	}
	return e
}

// CompareEntries orders members by address, protocol, port, second address and net.
func CompareEntries(a, b Entry) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Protocol, b.Protocol); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	if c := a.IP2.Compare(b.IP2); c != 0 {
		return c
	}
	if c := a.Net.Addr().Compare(b.Net.Addr()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Net.Bits(), b.Net.Bits()); c != 0 {
		return c
	}
	return strings.Compare(a.Comment, b.Comment)
}

// ParseEntry parses a member of a set of type t in ipset notation (see Entry). A missing
// protocol defaults to tcp, as in ipset(8); a net given as a bare address is a host net. The
// result is not checked against a family: Add/Del/Test do that.
func ParseEntry(t Type, s string) (Entry, error) {
	bad := func(why string) (Entry, error) {
		return Entry{}, fmt.Errorf("ipset: member %q of a %s set: %s: %w", s, t, why, kerr.ErrInvalid)
	}
	if !t.Supported() {
		return bad("unsupported set type")
	}
	parts := strings.Split(s, ",")
	if len(parts) != t.parts() {
		return bad(fmt.Sprintf("%d comma-separated parts, want %d", len(parts), t.parts()))
	}
	var e Entry
	var err error
	switch t {
	case BitmapPort:
		p, err := strconv.ParseUint(parts[0], 10, 16)
		if err != nil {
			return bad("not a port number")
		}
		e.Port = uint16(p)
		return e, nil
	case HashNet:
		if e.Net, err = parseNet(parts[0]); err != nil {
			return bad(err.Error())
		}
		return e, nil
	}
	if e.IP, err = parseAddr(parts[0]); err != nil {
		return bad(err.Error())
	}
	if t == HashIP {
		return e, nil
	}
	proto, port, ok := strings.Cut(parts[1], ":")
	if !ok {
		proto, port = "tcp", parts[1]
	}
	if e.Protocol, ok = parseProtocol(proto); !ok {
		return bad(fmt.Sprintf("protocol %q is not tcp, udp or sctp", proto))
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return bad(fmt.Sprintf("port %q is not a number from 0 to 65535", port))
	}
	e.Port = uint16(p)
	switch t {
	case HashIPPortIP:
		if e.IP2, err = parseAddr(parts[2]); err != nil {
			return bad(err.Error())
		}
	case HashIPPortNet:
		if e.Net, err = parseNet(parts[2]); err != nil {
			return bad(err.Error())
		}
	}
	return e, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, fmt.Errorf("%q is not an IP address", s)
	}
	return a, nil
}

func parseNet(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := parseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%q is not a net in CIDR notation", s)
	}
	return p.Masked(), nil
}

// checkEntry reports (as kerr.ErrInvalid, naming the set and the member) a member that does
// not fit a normalized set: wrong shape for the type, wrong family, a net of length 0 (which
// the kernel rejects), a port outside a bitmap's range, a comment on a set without them.
func checkEntry(s Set, e Entry) error {
	why := entryProblem(s, e)
	if why == "" {
		return nil
	}
	return fmt.Errorf("ipset: member %q for set %s (%s): %s: %w", e.String(), s.Name, s.String(), why, kerr.ErrInvalid)
}

func entryProblem(s Set, e Entry) string {
	usesIP, usesPort, usesIP2, usesNet := false, false, false, false
	switch s.Type {
	case HashIP:
		usesIP = true
	case HashIPPort:
		usesIP, usesPort = true, true
	case HashIPPortIP:
		usesIP, usesPort, usesIP2 = true, true, true
	case HashIPPortNet:
		usesIP, usesPort, usesNet = true, true, true
	case HashNet:
		usesNet = true
	case BitmapPort:
	default:
		return "unsupported set type"
	}
	switch {
	case usesIP != e.IP.IsValid():
		return presence("an address", usesIP, s.Type)
	case usesIP2 != e.IP2.IsValid():
		return presence("a second address", usesIP2, s.Type)
	case usesNet != e.Net.IsValid():
		return presence("a net", usesNet, s.Type)
	case usesPort && e.Protocol == 0:
		return "no protocol; " + string(s.Type) + " members need tcp, udp or sctp"
	case !usesPort && s.Type != BitmapPort && (e.Protocol != 0 || e.Port != 0):
		return presence("a port", false, s.Type)
	case s.Type == BitmapPort && e.Protocol != 0:
		return "a protocol; bitmap:port members are bare port numbers"
	}
	if usesPort && e.Protocol != inet.TCP && e.Protocol != inet.UDP && e.Protocol != inet.SCTP {
		return fmt.Sprintf("protocol %d is not tcp, udp or sctp", e.Protocol)
	}
	if s.Type == BitmapPort && (e.Port < s.PortFrom || e.Port > s.PortTo) {
		return fmt.Sprintf("port %d is outside the set's range %d-%d", e.Port, s.PortFrom, s.PortTo)
	}
	for _, a := range []netip.Addr{e.IP, e.IP2, e.Net.Addr()} {
		if !a.IsValid() {
			continue
		}
		if a.Zone() != "" {
			return fmt.Sprintf("address %s has a zone", a)
		}
		if s.Family == inet.IPv4 && !a.Is4() {
			return fmt.Sprintf("address %s is not IPv4, the set is family inet", a)
		}
		if s.Family == inet.IPv6 && (!a.Is6() || a.Is4In6()) {
			return fmt.Sprintf("address %s is not IPv6, the set is family inet6", a)
		}
	}
	if e.Net.IsValid() && e.Net.Bits() < 1 {
		return "a net of length 0; the kernel takes lengths from 1"
	}
	if e.Comment != "" {
		if !s.Comment {
			return "a comment, but the set has no comment extension"
		}
		if len(e.Comment) > maxCommentLen {
			return fmt.Sprintf("comment of %d bytes, longer than %d", len(e.Comment), maxCommentLen)
		}
		for _, c := range e.Comment {
			if c < ' ' || c == '"' || c == 0x7f {
				return "comment has a quote or control character"
			}
		}
	}
	return ""
}

func presence(what string, want bool, t Type) string {
	if want {
		return "no " + what + "; " + string(t) + " members have one"
	}
	return what + "; " + string(t) + " members have none"
}

// Prepare normalizes and checks a batch of members for a normalized set; one bad member fails
// the whole batch (Test, Replace: the set's content is all or nothing).
func Prepare(s Set, entries []Entry) ([]Entry, error) {
	out, err := Sift(s, entries)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Sift normalizes and checks a batch of members for a normalized set and returns the good
// ones, in order, and an error (kerr.ErrInvalid) naming every bad one. Add and Del send the
// good ones anyway, so one bad member never keeps the others out of (or in) the set.
func Sift(s Set, entries []Entry) ([]Entry, error) {
	out := make([]Entry, 0, len(entries))
	var errs []error
	for _, e := range entries {
		if e.Net.IsValid() {
			e.Net = e.Net.Masked()
		}
		if err := checkEntry(s, e); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}
