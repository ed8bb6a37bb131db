package ipvs_test

import (
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// This file holds the operation table shared by the fake (go test) and the kernel
// (ipvs_kernel_test.go): both must end in the state of testdata/ops.golden and fail the
// same steps with the same typed errors and errnos.

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func tcp(s string) ipvs.ServiceKey {
	a := ap(s)
	return ipvs.ServiceKey{Protocol: inet.TCP, Addr: a.Addr(), Port: a.Port()}
}
func udp(s string) ipvs.ServiceKey {
	a := ap(s)
	return ipvs.ServiceKey{Protocol: inet.UDP, Addr: a.Addr(), Port: a.Port()}
}
func sctp(s string) ipvs.ServiceKey {
	a := ap(s)
	return ipvs.ServiceKey{Protocol: inet.SCTP, Addr: a.Addr(), Port: a.Port()}
}
func fwm(mark uint32, f inet.Family) ipvs.ServiceKey {
	return ipvs.ServiceKey{FWMark: mark, Family: f}
}

func masq(s string, w int) ipvs.Destination {
	a := ap(s)
	return ipvs.Destination{Addr: a.Addr(), Port: a.Port(), Forward: ipvs.Masq, Weight: w}
}

// batchFail is one expected failure of an Apply step.
type batchFail struct {
	index int
	kind  error
	errno syscall.Errno
}

type step struct {
	name  string
	run   func(ipvs.Interface) error
	kind  error         // expected kerr type; nil: the step must succeed
	errno syscall.Errno // expected errno when kind is set
	batch []batchFail   // for Apply steps: the expected failed ops, in index order
}

func ok(name string, run func(ipvs.Interface) error) step { return step{name: name, run: run} }

func fails(name string, kind error, errno syscall.Errno, run func(ipvs.Interface) error) step {
	return step{name: name, run: run, kind: kind, errno: errno}
}

func add(s ipvs.Service) func(ipvs.Interface) error {
	return func(i ipvs.Interface) error { return i.AddService(s) }
}
func addDest(k ipvs.ServiceKey, d ipvs.Destination) func(ipvs.Interface) error {
	return func(i ipvs.Interface) error { return i.AddDestination(k, d) }
}

// opTable covers IPv4 and IPv6, TCP/UDP/SCTP and firewall marks, persistence and netmasks,
// sh/mh scheduler flags, the forwarding methods, updates, deletes, a mixed batch and the
// typed errors of duplicate, missing and invalid objects.
func opTable() []step {
	web := tcp("10.0.0.1:80")
	sticky := tcp("10.0.0.2:80")
	dns := udp("10.0.0.3:53")
	shsvc := tcp("10.0.0.4:443")
	sctp4 := sctp("10.0.0.5:9")
	web6 := tcp("[fd00::1]:80")
	dns6 := udp("[fd00::2]:53")
	sctp6 := sctp("[fd00::5]:9")
	far1 := tcp("192.168.1.1:80")
	far2 := tcp("200.1.1.1:80")
	flags := tcp("10.0.0.6:80")
	sip := udp("10.0.0.7:5060")
	mark4 := fwm(100, inet.IPv4)
	mark6 := fwm(101, inet.IPv6)
	gone := tcp("10.0.0.99:80")
	batchSvc := tcp("10.0.0.8:8080")

	return []step{
		ok("add tcp", add(ipvs.Service{ServiceKey: web, Scheduler: "rr"})),
		ok("add persistent with netmask", add(ipvs.Service{ServiceKey: sticky, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 300, Netmask: 0xffff0000})),
		ok("add udp mh with flags", add(ipvs.Service{ServiceKey: dns, Scheduler: "mh", Flags: ipvs.FlagMHFallback | ipvs.FlagMHPort})),
		ok("add sh with flags and persistence", add(ipvs.Service{ServiceKey: shsvc, Scheduler: "sh", Flags: ipvs.FlagSHFallback | ipvs.FlagSHPort | ipvs.FlagPersistent, Timeout: 100})),
		ok("add sctp", add(ipvs.Service{ServiceKey: sctp4, Scheduler: "wrr"})),
		ok("add ipv6 persistent /64", add(ipvs.Service{ServiceKey: web6, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 60, Netmask: 64})),
		ok("add ipv6 udp one-packet", add(ipvs.Service{ServiceKey: dns6, Scheduler: "rr", Flags: ipvs.FlagOnePacket})),
		ok("add ipv6 sctp", add(ipvs.Service{ServiceKey: sctp6, Scheduler: "wlc"})),
		ok("add far address 1", add(ipvs.Service{ServiceKey: far1, Scheduler: "lc"})),
		ok("add far address 2", add(ipvs.Service{ServiceKey: far2, Scheduler: "rr"})),
		ok("add generic scheduler flags", add(ipvs.Service{ServiceKey: flags, Scheduler: "rr", Flags: ipvs.FlagSched1 | ipvs.FlagSched3})),
		ok("add sip persistence engine", add(ipvs.Service{ServiceKey: sip, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 30, PEName: "sip"})),
		ok("add fwmark ipv4", add(ipvs.Service{ServiceKey: mark4, Scheduler: "rr"})),
		ok("add fwmark ipv6 persistent /96", add(ipvs.Service{ServiceKey: mark6, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 10, Netmask: 96})),
		ok("add sh with a third scheduler flag", add(ipvs.Service{ServiceKey: tcp("10.0.0.11:80"), Scheduler: "sh", Flags: ipvs.FlagSched1 | ipvs.FlagSched2 | ipvs.FlagSched3})),
		ok("add lazily loaded scheduler", add(ipvs.Service{ServiceKey: tcp("10.0.0.9:80"), Scheduler: "lblcr"})),

		ok("dest masq", addDest(web, masq("10.1.0.1:8080", 1))),
		ok("dest masq weight 2", addDest(web, masq("10.1.0.2:8080", 2))),
		ok("dest thresholds", addDest(web, ipvs.Destination{Addr: ap("10.1.0.3:8080").Addr(), Port: 8080, Weight: 0, UpperThreshold: 100, LowerThreshold: 10})),
		ok("dest ipv6 in ipv4 service (tunnel)", addDest(web, ipvs.Destination{Addr: ap("[fd01::9]:80").Addr(), Port: 80, Forward: ipvs.Tunnel, Weight: 1})),
		ok("dest route", addDest(sticky, ipvs.Destination{Addr: ap("10.1.0.5:80").Addr(), Port: 80, Forward: ipvs.Route, Weight: 1})),
		ok("dest gue tunnel", addDest(sticky, ipvs.Destination{Addr: ap("10.1.0.6:80").Addr(), Port: 80, Forward: ipvs.Tunnel, Weight: 1,
			TunnelType: ipvs.TunnelGUE, TunnelPort: 6080, TunnelFlags: ipvs.TunnelCsum})),
		ok("dest gre tunnel", addDest(sticky, ipvs.Destination{Addr: ap("10.1.0.7:80").Addr(), Port: 80, Forward: ipvs.Tunnel, Weight: 1,
			TunnelType: ipvs.TunnelGRE, TunnelFlags: ipvs.TunnelNoCsum})),
		ok("dest big weight", addDest(dns, masq("10.1.0.1:53", 65535))),
		ok("dest sh", addDest(shsvc, masq("10.1.0.1:443", 1))),
		ok("dest sctp", addDest(sctp4, masq("10.1.0.7:9", 1))),
		ok("dest ipv6 1", addDest(web6, masq("[fd01::1]:8080", 1))),
		ok("dest ipv6 2", addDest(web6, masq("[fd01::2]:8080", 3))),
		ok("dest ipv6 udp", addDest(dns6, masq("[fd01::1]:53", 1))),
		ok("dest ipv6 sctp", addDest(sctp6, masq("[fd01::7]:9", 1))),
		ok("dest far 1", addDest(far1, masq("10.1.0.1:80", 1))),
		ok("dest far 2", addDest(far2, masq("10.1.0.2:80", 1))),
		ok("dest fwmark port 0", addDest(mark4, masq("10.1.0.1:0", 1))),
		ok("dest fwmark with port", addDest(mark4, masq("10.1.0.2:8080", 1))),
		ok("dest fwmark ipv6", addDest(mark6, masq("[fd01::3]:0", 1))),

		fails("duplicate service", kerr.ErrExists, syscall.EEXIST, add(ipvs.Service{ServiceKey: web, Scheduler: "wrr"})),
		fails("duplicate fwmark service", kerr.ErrExists, syscall.EEXIST, add(ipvs.Service{ServiceKey: mark4, Scheduler: "rr"})),
		fails("duplicate destination", kerr.ErrExists, syscall.EEXIST, addDest(web, masq("10.1.0.1:8080", 7))),
		fails("destination on missing service", kerr.ErrNotFound, syscall.ESRCH, addDest(gone, masq("10.1.0.1:8080", 1))),
		fails("update missing service", kerr.ErrNotFound, syscall.ESRCH, func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: gone, Scheduler: "rr"})
		}),
		fails("delete missing service", kerr.ErrNotFound, syscall.ESRCH, func(i ipvs.Interface) error { return i.DeleteService(gone) }),
		fails("delete missing destination", kerr.ErrNotFound, syscall.ENOENT, func(i ipvs.Interface) error {
			return i.DeleteDestination(web, ap("10.1.0.99:8080"))
		}),
		fails("update missing destination", kerr.ErrNotFound, syscall.ENOENT, func(i ipvs.Interface) error {
			return i.UpdateDestination(web, masq("10.1.0.99:8080", 1))
		}),
		fails("unknown scheduler", kerr.ErrNotFound, syscall.ENOENT, add(ipvs.Service{ServiceKey: gone, Scheduler: "nosuch"})),
		fails("unknown persistence engine", kerr.ErrNotFound, syscall.ENOENT, add(ipvs.Service{ServiceKey: gone, Scheduler: "rr", PEName: "nosuch"})),
		fails("negative weight", kerr.ErrInvalid, syscall.ERANGE, addDest(web, masq("10.1.0.20:8080", -1))),
		fails("lower threshold above upper", kerr.ErrInvalid, syscall.ERANGE, addDest(web, ipvs.Destination{Addr: ap("10.1.0.20:8080").Addr(), Port: 8080, Weight: 1, UpperThreshold: 1, LowerThreshold: 5})),
		fails("mixed family without tunnel", kerr.ErrInvalid, syscall.EINVAL, addDest(web, masq("[fd01::20]:8080", 1))),
		fails("gue tunnel without port", kerr.ErrInvalid, syscall.EINVAL, addDest(web, ipvs.Destination{Addr: ap("10.1.0.21:80").Addr(), Port: 80, Forward: ipvs.Tunnel, Weight: 1, TunnelType: ipvs.TunnelGUE})),
		fails("multicast destination", kerr.ErrInvalid, syscall.EINVAL, addDest(web, masq("224.0.0.1:80", 1))),
		fails("ipv6 netmask too long", kerr.ErrInvalid, syscall.EINVAL, add(ipvs.Service{ServiceKey: tcp("[fd00::99]:80"), Scheduler: "rr", Netmask: 129})),
		fails("fwmark without family", kerr.ErrInvalid, syscall.EINVAL, add(ipvs.Service{ServiceKey: ipvs.ServiceKey{FWMark: 7}, Scheduler: "rr"})),
		fails("unsupported protocol", kerr.ErrInvalid, syscall.EINVAL, add(ipvs.Service{ServiceKey: ipvs.ServiceKey{Protocol: 47, Addr: netip.MustParseAddr("10.0.0.50"), Port: 1}, Scheduler: "rr"})),

		ok("update scheduler and persistence", func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: web, Scheduler: "wrr", Flags: ipvs.FlagPersistent, Timeout: 180, Netmask: 0xffffff00})
		}),
		ok("update sh flags", func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: shsvc, Scheduler: "sh", Flags: ipvs.FlagSHPort})
		}),
		ok("update mh flags", func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: dns, Scheduler: "mh", Flags: ipvs.FlagMHFallback})
		}),
		ok("update fwmark service", func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: mark4, Scheduler: "wlc", Flags: ipvs.FlagPersistent, Timeout: 20})
		}),
		ok("update drops persistence engine", func(i ipvs.Interface) error {
			return i.UpdateService(ipvs.Service{ServiceKey: sip, Scheduler: "rr"})
		}),
		ok("update destination weight and thresholds", func(i ipvs.Interface) error {
			return i.UpdateDestination(web, ipvs.Destination{Addr: ap("10.1.0.1:8080").Addr(), Port: 8080, Weight: 5, UpperThreshold: 50, LowerThreshold: 5})
		}),
		ok("update destination forward method", func(i ipvs.Interface) error {
			return i.UpdateDestination(web6, ipvs.Destination{Addr: ap("[fd01::2]:8080").Addr(), Port: 8080, Forward: ipvs.Route, Weight: 3})
		}),
		ok("delete destination", func(i ipvs.Interface) error { return i.DeleteDestination(web, ap("10.1.0.2:8080")) }),
		ok("delete service with destinations", func(i ipvs.Interface) error { return i.DeleteService(far2) }),
		ok("delete fwmark destination", func(i ipvs.Interface) error { return i.DeleteDestination(mark4, ap("10.1.0.2:8080")) }),

		{
			name: "mixed batch",
			run: func(i ipvs.Interface) error {
				return i.Apply([]ipvs.Op{
					ipvs.AddServiceOp(ipvs.Service{ServiceKey: batchSvc, Scheduler: "rr"}),
					ipvs.AddDestinationOp(batchSvc, masq("10.2.0.1:80", 1)),
					ipvs.AddDestinationOp(batchSvc, masq("10.2.0.1:80", 1)), // duplicate
					ipvs.AddDestinationOp(gone, masq("10.2.0.1:80", 1)),     // missing service
					ipvs.AddDestinationOp(batchSvc, masq("10.2.0.2:80", 1)),
					ipvs.AddServiceOp(ipvs.Service{ServiceKey: fwm(5, 0), Scheduler: "rr"}), // invalid, never sent
					ipvs.UpdateDestinationOp(batchSvc, masq("10.2.0.2:80", 4)),
					ipvs.AddDestinationOp(batchSvc, masq("10.2.0.3:80", 1)),
					ipvs.DeleteDestinationOp(batchSvc, ap("10.2.0.3:80")),
					ipvs.DeleteDestinationOp(batchSvc, ap("10.2.0.3:80")), // already gone
					ipvs.AddServiceOp(ipvs.Service{ServiceKey: tcp("10.0.0.10:80"), Scheduler: "nosuch"}),
				})
			},
			batch: []batchFail{
				{2, kerr.ErrExists, syscall.EEXIST},
				{3, kerr.ErrNotFound, syscall.ESRCH},
				{5, kerr.ErrInvalid, syscall.EINVAL},
				{9, kerr.ErrNotFound, syscall.ENOENT},
				{10, kerr.ErrNotFound, syscall.ENOENT},
			},
		},
		ok("empty batch", func(i ipvs.Interface) error { return i.Apply(nil) }),
	}
}

// runOpTable applies the table to impl, checking every step's outcome.
func runOpTable(t *testing.T, impl ipvs.Interface) {
	t.Helper()
	for _, st := range opTable() {
		err := st.run(impl)
		switch {
		case st.batch != nil:
			var be *ipvs.BatchError
			if !errors.As(err, &be) {
				t.Errorf("%s: got %v, want a *BatchError", st.name, err)
				continue
			}
			var got []int
			for _, oe := range be.Errors {
				got = append(got, oe.Index)
			}
			var want []int
			for _, f := range st.batch {
				want = append(want, f.index)
				oe := be.Failed(f.index)
				if oe == nil {
					continue
				}
				if !errors.Is(oe, f.kind) || !errors.Is(oe, f.errno) {
					t.Errorf("%s: op %d: got %v, want %v and errno %v", st.name, f.index, oe, f.kind, f.errno)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: failed ops %v, want %v (%v)", st.name, got, want, err)
			}
			if !errors.Is(err, st.batch[0].kind) {
				t.Errorf("%s: errors.Is(batch error, %v) = false", st.name, st.batch[0].kind)
			}
		case st.kind == nil:
			if err != nil {
				t.Errorf("%s: unexpected error %v", st.name, err)
			}
		default:
			if !errors.Is(err, st.kind) || !errors.Is(err, st.errno) {
				t.Errorf("%s: got error %v, want %v with errno %d (%v)", st.name, err, st.kind, int(st.errno), st.errno)
			}
		}
	}
}

// checkReads checks that the read calls agree with Table.
func checkReads(t *testing.T, impl ipvs.Interface) {
	t.Helper()
	table, err := impl.Table()
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := impl.Services()
	if err != nil {
		t.Fatal(err)
	}
	var fromTable []ipvs.Service
	for _, e := range table {
		fromTable = append(fromTable, e.Service)
		got, err := impl.GetService(e.Service.ServiceKey)
		if err != nil {
			t.Errorf("GetService(%s): %v", e.Service.ServiceKey, err)
		} else if diff := diff(e.Service, got); diff != "" {
			t.Errorf("GetService(%s) differs from Table (-table +get):\n%s", e.Service.ServiceKey, diff)
		}
		dests, err := impl.Destinations(e.Service.ServiceKey)
		if err != nil {
			t.Errorf("Destinations(%s): %v", e.Service.ServiceKey, err)
		} else if diff := diff(e.Destinations, dests); diff != "" {
			t.Errorf("Destinations(%s) differs from Table (-table +dests):\n%s", e.Service.ServiceKey, diff)
		}
	}
	if diff := diff(fromTable, svcs); diff != "" {
		t.Errorf("Services differs from Table (-table +services):\n%s", diff)
	}
	if _, err := impl.Destinations(tcp("10.0.0.99:80")); !errors.Is(err, kerr.ErrNotFound) || !errors.Is(err, syscall.ESRCH) {
		t.Errorf("Destinations of a missing service: %v, want ErrNotFound/ESRCH", err)
	}
	if _, err := impl.GetService(fwm(999, inet.IPv6)); !errors.Is(err, kerr.ErrNotFound) || !errors.Is(err, syscall.ESRCH) {
		t.Errorf("GetService of a missing service: %v, want ErrNotFound/ESRCH", err)
	}
}

// diff is cmp.Diff that compares netip values by ==.
func diff(want, got any) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}
