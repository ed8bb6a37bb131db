package conntrack_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// This file holds the operation table shared by the fake (conntrack_test.go) and the
// kernel (conntrack_kernel_test.go): the same flows are inserted (Fake.Insert, or
// `conntrack -I` in the test's namespace), the same deletes run, and the transcript
// (counts, typed errors, dumps) must equal testdata/ops.golden.

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// nat is a flow from client to service, answered by endpoint (DNAT).
func nat(p inet.Protocol, client, service, endpoint string) conntrack.Flow {
	c := ap(client)
	return conntrack.Flow{Protocol: p, Orig: conntrack.Tuple{c, ap(service)}, Reply: conntrack.Tuple{ap(endpoint), c}}
}

// seedFlows covers IPv4 and IPv6, UDP, TCP and SCTP, several flows per service address
// and per endpoint, another port of the same service address, a node port, and a
// conntrack zone.
func seedFlows() []conntrack.Flow {
	zoned := nat(inet.UDP, "10.0.0.1:40006", "10.96.0.10:53", "10.96.0.10:53")
	zoned.Zone = 7
	return []conntrack.Flow{
		nat(inet.UDP, "10.0.0.1:40001", "10.96.0.10:53", "10.244.1.5:53"),
		nat(inet.UDP, "10.0.0.2:40002", "10.96.0.10:53", "10.244.2.6:53"),
		nat(inet.UDP, "10.0.0.1:40003", "10.96.0.10:5353", "10.244.1.5:5353"),
		nat(inet.TCP, "10.0.0.1:40004", "10.96.0.10:53", "10.244.1.5:53"),
		nat(inet.UDP, "10.0.0.3:40005", "10.96.0.11:53", "10.244.1.5:53"),
		zoned,
		nat(inet.UDP, "[fd00::1]:40001", "[fd00::10]:53", "[fd01::5]:53"),
		nat(inet.UDP, "[fd00::2]:40002", "[fd00::10]:53", "[fd01::6]:53"),
		nat(inet.TCP, "[fd00::1]:40004", "[fd00::10]:53", "[fd01::5]:53"),
		nat(inet.SCTP, "10.0.0.4:40007", "10.96.0.12:9999", "10.244.3.7:9999"),
		nat(inet.UDP, "10.0.0.5:40008", "192.168.0.10:30053", "10.244.4.8:53"),
		nat(inet.UDP, "10.0.0.6:40009", "192.168.0.11:30054", "10.244.2.6:53"),
	}
}

type step struct {
	name string
	run  func(i conntrack.Interface) (string, error)
}

func del(name string, f ...conntrack.Filter) step {
	return step{"delete " + name, func(i conntrack.Interface) (string, error) {
		n, err := i.Delete(f...)
		return fmt.Sprintf("deleted=%d", n), err
	}}
}

func byOrigDst(p inet.Protocol, s string) step {
	return step{fmt.Sprintf("delete %s orig dst %s", p, s), func(i conntrack.Interface) (string, error) {
		n, err := deleteByOrigDst(i, p, ap(s))
		return fmt.Sprintf("deleted=%d", n), err
	}}
}

func byReplySrc(p inet.Protocol, s string) step {
	return step{fmt.Sprintf("delete %s reply src %s", p, s), func(i conntrack.Interface) (string, error) {
		n, err := deleteByReplySrc(i, p, netip.MustParseAddr(s))
		return fmt.Sprintf("deleted=%d", n), err
	}}
}

func dump() step {
	return step{"dump", func(i conntrack.Interface) (string, error) {
		d, err := i.Dump()
		return "\n" + strings.TrimSuffix(d, "\n"), err
	}}
}

func opTable() []step {
	return []step{
		dump(),
		del("empty filter", conntrack.Filter{}),
		del("protocol only", conntrack.Filter{Protocol: inet.UDP}),
		del("icmp with a port", conntrack.Filter{Protocol: inet.ICMP, OrigDstPort: 53}),
		del("IPv4-mapped address", conntrack.Filter{Protocol: inet.UDP, OrigDst: netip.MustParseAddr("::ffff:10.96.0.10")}),
		del("two families", conntrack.Filter{Protocol: inet.UDP, OrigDst: netip.MustParseAddr("10.96.0.10"), ReplySrc: netip.MustParseAddr("fd01::5")}),
		byOrigDst(inet.UDP, "10.96.0.99:53"),
		// The service 10.96.0.10:53 goes away: its UDP flows go, in every zone; the
		// other port and the TCP flow stay.
		byOrigDst(inet.UDP, "10.96.0.10:53"),
		byOrigDst(inet.UDP, "10.96.0.10:53"),
		dump(),
		// The endpoint 10.244.1.5 goes away: every UDP flow it answers, whatever the
		// service.
		byReplySrc(inet.UDP, "10.244.1.5"),
		byOrigDst(inet.UDP, "[fd00::10]:53"),
		// A node port, on any address.
		del("udp orig dst port 30054", conntrack.Filter{Protocol: inet.UDP, OrigDstPort: 30054}),
		// A service and endpoint pair, as for an endpoint of one service removed.
		del("udp orig dst 192.168.0.10:30053 reply src 10.244.4.9", conntrack.Filter{Protocol: inet.UDP,
			OrigDst: netip.MustParseAddr("192.168.0.10"), OrigDstPort: 30053, ReplySrc: netip.MustParseAddr("10.244.4.9")}),
		del("udp orig dst 192.168.0.10:30053 reply src 10.244.4.8:53", conntrack.Filter{Protocol: inet.UDP,
			OrigDst: netip.MustParseAddr("192.168.0.10"), OrigDstPort: 30053, ReplySrc: netip.MustParseAddr("10.244.4.8"), ReplySrcPort: 53}),
		del("nothing"),
		del("a valid and an invalid filter", conntrack.ByReplySrc(inet.SCTP, netip.MustParseAddr("10.244.3.7")), conntrack.Filter{Protocol: inet.TCP}),
		// Several filters at once; port 0: any port of the address.
		del("sctp reply src 10.244.3.7 or tcp orig dst 10.96.0.10:0 or udp orig dst 10.96.0.77:53",
			conntrack.ByReplySrc(inet.SCTP, netip.MustParseAddr("10.244.3.7")), conntrack.ByOrigDst(inet.TCP, ap("10.96.0.10:0")),
			conntrack.ByOrigDst(inet.UDP, ap("10.96.0.77:53"))),
		dump(),
	}
}

// runOps applies the table and returns the transcript. observe, when not nil, reads the
// table independently (in the Dump format) and must agree with every dump step.
func runOps(t *testing.T, impl conntrack.Interface, observe func(t *testing.T) string) string {
	t.Helper()
	var b strings.Builder
	for i, s := range opTable() {
		out, err := s.run(impl)
		fmt.Fprintf(&b, "%02d %s: %s", i, s.name, golden.Outcome(err))
		if strings.HasPrefix(out, "\n") {
			if observe != nil && err == nil {
				if got := observe(t); got != strings.TrimPrefix(out, "\n")+"\n" && !(got == "" && out == "\n") {
					t.Errorf("step %d: Dump() and the independent reading differ (-dump +observed):\n%s",
						i, cmp.Diff(strings.TrimPrefix(out, "\n")+"\n", got))
				}
			}
			b.WriteString(out)
		} else if out != "" {
			b.WriteString(" " + out)
		}
		b.WriteString("\n")
	}
	return b.String()
}
