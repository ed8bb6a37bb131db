package conntrack_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

func TestOpsFake(t *testing.T) {
	f := conntracktest.NewFake(seedFlows()...)
	golden.Check(t, "ops.golden", runOps(t, f, nil))
}

func TestFakeInsert(t *testing.T) {
	f := conntracktest.NewFake()
	fl := nat(inet.UDP, "10.0.0.1:1", "10.96.0.1:53", "10.244.0.1:53")
	if err := f.Insert(fl); err != nil {
		t.Fatal(err)
	}
	if err := f.Insert(fl); !kerr.IsExists(err) {
		t.Fatalf("duplicate Insert = %v, want ErrExists", err)
	}
	// Another client whose reply tuple clashes with the first flow's.
	clash := conntrack.Flow{Protocol: inet.UDP, Orig: conntrack.Tuple{ap("10.0.0.9:1"), ap("10.96.0.1:53")}, Reply: fl.Reply}
	if err := f.Insert(clash); !kerr.IsExists(err) {
		t.Fatalf("Insert of a clashing reply tuple = %v, want ErrExists", err)
	}
	fl.Zone = 1
	if err := f.Insert(fl); err != nil {
		t.Fatalf("Insert into another zone: %v", err)
	}
	mixed := nat(inet.UDP, "10.0.0.1:1", "[fd00::1]:53", "10.244.0.1:53")
	if err := f.Insert(mixed); !kerr.IsInvalid(err) {
		t.Fatalf("Insert of a mixed-family flow = %v, want ErrInvalid", err)
	}
	if err := f.Insert(conntrack.Flow{Orig: fl.Orig, Reply: fl.Reply}); !kerr.IsInvalid(err) {
		t.Fatalf("Insert without protocol = %v, want ErrInvalid", err)
	}
}

func TestFakeFault(t *testing.T) {
	f := conntracktest.NewFake(seedFlows()...)
	boom := errors.New("boom")
	calls := 0
	f.SetFault(func(conntrack.Flow) error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	n, err := deleteByOrigDst(f, inet.UDP, ap("10.96.0.10:53"))
	if !errors.Is(err, boom) || n != 1 {
		t.Fatalf("Delete with a fault on the 2nd flow = %d, %v; want 1, boom", n, err)
	}
	f.SetFault(nil)
	if n, err := deleteByOrigDst(f, inet.UDP, ap("10.96.0.10:53")); err != nil || n != 2 {
		t.Fatalf("Delete after the fault = %d, %v; want the 2 left", n, err)
	}
}

func TestFakeConcurrent(t *testing.T) {
	f := conntracktest.NewFake()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(g), byte(i)}), 1000)
				if err := f.Insert(conntrack.Flow{Protocol: inet.UDP, Orig: conntrack.Tuple{c, ap("10.96.0.1:53")}, Reply: conntrack.Tuple{ap("10.244.0.1:53"), c}}); err != nil {
					t.Error(err)
				}
				if _, err := f.List(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n, err := deleteByReplySrc(f, inet.UDP, netip.MustParseAddr("10.244.0.1")); err != nil || n != 200 {
		t.Fatalf("Delete = %d, %v; want 200", n, err)
	}
}

func TestFilter(t *testing.T) {
	fl := nat(inet.UDP, "10.0.0.1:40001", "10.96.0.10:53", "10.244.1.5:5353")
	for _, c := range []struct {
		f    conntrack.Filter
		want bool
	}{
		{conntrack.ByOrigDst(inet.UDP, ap("10.96.0.10:53")), true},
		{conntrack.ByOrigDst(inet.UDP, ap("10.96.0.10:0")), true},
		{conntrack.ByOrigDst(inet.UDP, ap("10.96.0.10:54")), false},
		{conntrack.ByOrigDst(inet.TCP, ap("10.96.0.10:53")), false},
		{conntrack.ByOrigDst(inet.UDP, netip.AddrPortFrom(netip.Addr{}, 53)), true},
		{conntrack.ByReplySrc(inet.UDP, netip.MustParseAddr("10.244.1.5")), true},
		{conntrack.ByReplySrc(inet.UDP, netip.MustParseAddr("10.0.0.1")), false},
		{conntrack.Filter{Protocol: inet.UDP, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 5353}, true},
		{conntrack.Filter{Protocol: inet.UDP, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53}, false},
	} {
		if err := c.f.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", c.f, err)
		}
		if got := c.f.Match(fl); got != c.want {
			t.Errorf("%s: Match = %t, want %t", c.f, got, c.want)
		}
	}
	if got, want := (conntrack.Filter{Protocol: inet.UDP, OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 53,
		ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53}).String(),
		"-p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.1.5 --reply-port-src 53"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestFlowString(t *testing.T) {
	fl := nat(inet.UDP, "[fd00::1]:1", "[fd00::10]:53", "[fd01::5]:53")
	fl.Zone, fl.Mark = 3, 0x4000
	if got, want := fl.String(), "udp orig [fd00::1]:1 -> [fd00::10]:53 reply [fd01::5]:53 -> [fd00::1]:1 zone=3 mark=16384"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	icmp := conntrack.Flow{Protocol: inet.ICMP, Orig: conntrack.Tuple{ap("10.0.0.1:0"), ap("10.0.0.2:0")}, Reply: conntrack.Tuple{ap("10.0.0.2:0"), ap("10.0.0.1:0")}}
	if got, want := icmp.String(), "icmp orig 10.0.0.1 -> 10.0.0.2 reply 10.0.0.2 -> 10.0.0.1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := inet.Protocol(200).String(); got != "proto-200" {
		t.Errorf("Protocol(200) = %q", got)
	}
}
