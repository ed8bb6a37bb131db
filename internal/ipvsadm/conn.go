package ipvsadm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// ConnFile is where the kernel lists IPVS connections. The IPVS generic netlink family has
// no command that dumps connections (only services, destinations, daemons, config and
// info), so ipvsadm -c reads this file, and so does kipvs status. It is per network
// namespace: a process sees the table of its own namespace.
const ConnFile = "/proc/net/ip_vs_conn"

// Conn is one line of the connection table.
type Conn struct {
	Protocol    string         `json:"protocol"`
	Client      netip.AddrPort `json:"client"`
	Virtual     netip.AddrPort `json:"virtual"`
	Destination netip.AddrPort `json:"destination"`
	State       string         `json:"state"`
	// Expires is the seconds left before the entry expires.
	Expires int64 `json:"expires"`
	// PEName and PEData are set for connections of a persistence engine (e.g. sip).
	PEName string `json:"peName,omitempty"`
	PEData string `json:"peData,omitempty"`

	fields int // how many fields ipvsadm's sscanf would have converted
}

// readConns parses the kernel's connection table (its header line first).
func readConns(r io.Reader) ([]Conn, error) {
	br := bufio.NewReader(r)
	if _, err := br.ReadString('\n'); err != nil {
		return nil, fmt.Errorf("unexpected input from %s: %w", ConnFile, err)
	}
	var conns []Conn
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			c, perr := parseConn(line)
			if perr != nil {
				return nil, fmt.Errorf("%s: line %q: %w", ConnFile, strings.TrimSpace(line), perr)
			}
			conns = append(conns, c)
		}
		if errors.Is(err, io.EOF) {
			return conns, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ConnFile, err)
		}
	}
}

// parseConn parses one line as ipvsadm's print_conn scans it
// ("%s %s %hX %s %hX %s %hX %s %d %s %s"): IPv4 addresses in hex, IPv6 ones as text.
func parseConn(line string) (Conn, error) {
	f := strings.Fields(line)
	if len(f) < 9 {
		return Conn{}, fmt.Errorf("%d fields, want at least 9", len(f))
	}
	c := Conn{Protocol: f[0], State: f[7], fields: min(len(f), 11)}
	ports := [3]uint16{}
	for i, idx := range []int{2, 4, 6} {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(f[idx], "0x"), "0X"), 16, 64)
		if err != nil {
			return Conn{}, fmt.Errorf("port %q: %w", f[idx], err)
		}
		ports[i] = uint16(v)
	}
	caddr, cv6, err := connAddr(f[1])
	if err != nil {
		return Conn{}, err
	}
	var vaddr netip.Addr
	if cv6 {
		vaddr, err = netip.ParseAddr(f[3])
	} else {
		vaddr, _, err = connAddr(f[3])
	}
	if err != nil {
		return Conn{}, fmt.Errorf("virtual address %q: %w", f[3], err)
	}
	daddr, _, err := connAddr(f[5])
	if err != nil {
		return Conn{}, err
	}
	c.Client = netip.AddrPortFrom(caddr, ports[0])
	c.Virtual = netip.AddrPortFrom(vaddr, ports[1])
	c.Destination = netip.AddrPortFrom(daddr, ports[2])
	exp, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return Conn{}, fmt.Errorf("expires %q: %w", f[8], err)
	}
	c.Expires = exp
	if len(f) >= 11 {
		c.PEName, c.PEData = f[9], f[10]
	}
	return c, nil
}

// connAddr parses an address field: IPv6 text, IPv4 dotted quad, or IPv4 as 8 hex digits.
func connAddr(s string) (netip.Addr, bool, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a, a.Is6(), nil
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("address %q: %w", s, err)
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), false, nil
}

// writeConns renders the connection table as `ipvsadm -Lnc` (with --persistent-conn, the
// persistence engine columns too).
func writeConns(w io.Writer, o Options, conns []Conn) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("IPVS connection entries\n")
	if o.PersistentConn {
		fmt.Fprintf(bw, "pro expire %-11s %-18s %-18s %-18s %-16s %s\n", "state", "source", "virtual", "destination", "pe name", "pe_data")
	} else {
		fmt.Fprintf(bw, "pro expire %-11s %-18s %-18s %s\n", "state", "source", "virtual", "destination")
	}
	for _, c := range conns {
		e := uint32(c.Expires)
		expire := fmt.Sprintf("%02d:%02d", int32(e/60), int32(e%60))
		cn, vn, dn := addrPort(c.Client.Addr(), c.Client.Port()), addrPort(c.Virtual.Addr(), c.Virtual.Port()),
			addrPort(c.Destination.Addr(), c.Destination.Port())
		if o.PersistentConn && c.fields == 11 {
			fmt.Fprintf(bw, "%-3s %-6s %-11s %-18s %-18s %-16s %-18s %s\n", c.Protocol, expire, c.State, cn, vn, dn, c.PEName, c.PEData)
		} else {
			fmt.Fprintf(bw, "%-3s %-6s %-11s %-18s %-18s %s\n", c.Protocol, expire, c.State, cn, vn, dn)
		}
	}
	return bw.Flush()
}
