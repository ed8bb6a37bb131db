package reconcile

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/proxy"
)

// failIPVSOnce fails the first IPVS mutation match accepts, once.
func failIPVSOnce(match func(ipvs.Op) bool) ipvstest.FaultFunc {
	done := false
	return func(_ int, op ipvs.Op) error {
		if !done && match(op) {
			done = true
			return kerr.Errno("injected", syscall.EIO)
		}
		return nil
	}
}

func deletesService(addr string) func(ipvs.Op) bool {
	return func(op ipvs.Op) bool {
		return op.Kind == ipvs.OpDeleteService && op.Service.Addr == netip.MustParseAddr(addr)
	}
}

// restart replaces the reconciler by a new one over the same kernel, as a kipvs restart does.
func (e *env) restart() {
	e.rec = New(Kernel{IPVS: e.ipvs, Filter: iptables.New(e.rec.opts.Family, e.ipset, e.nf), Dummy: e.dummy, Conntrack: e.ct},
		Options{Family: inet.IPv4, GracefulPeriod: 30 * time.Second, Clock: e.clk})
}

// A kernel delete that fails while a Service (or an endpoint) goes away must not leave
// kipvs's object behind: the next full sync, by the same process or after a restart, still
// treats the object as kipvs's and removes it, and the kernel ends exactly as a clean node
// programmed with the same Services. A failed virtual server delete used to leave it
// forwarding forever: its VIP and set members were removed anyway, so observe took it for
// a foreign one.
func TestFailedDeleteConverges(t *testing.T) {
	web := func(e *env) {
		e.set(svc("web", "10.96.0.10", nodePort(30080)), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	}
	dns := func(e *env, ips ...string) *proxy.Touched {
		return e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 5353, ips...))
	}
	scenarios := map[string]struct {
		before func(e *env)                // programmed by a successful full sync
		change func(e *env) *proxy.Touched // applied by the failing incremental sync
		after  func(e *env)                // the desired state after the change
	}{
		"service deleted": {
			before: func(e *env) { web(e); dns(e, "10.244.1.7") },
			change: func(e *env) *proxy.Touched { return e.remove("default", "web") },
			after:  func(e *env) { dns(e, "10.244.1.7") },
		},
		"udp endpoint removed": {
			before: func(e *env) { web(e); dns(e, "10.244.1.7", "10.244.2.8") },
			change: func(e *env) *proxy.Touched { return dns(e, "10.244.1.7") },
			after:  func(e *env) { web(e); dns(e, "10.244.1.7") },
		},
	}
	faults := []struct {
		name     string
		scenario string
		inject   func(e *env)
	}{
		{"cluster IP virtual server delete", "service deleted", func(e *env) {
			e.ipvs.SetFault(failIPVSOnce(deletesService("10.96.0.10")))
		}},
		{"node port virtual server delete", "service deleted", func(e *env) {
			e.ipvs.SetFault(failIPVSOnce(deletesService("192.168.1.10")))
		}},
		{"every virtual server delete", "service deleted", func(e *env) {
			e.ipvs.SetFault(func(_ int, op ipvs.Op) error {
				if op.Kind == ipvs.OpDeleteService {
					return kerr.Errno("injected", syscall.EIO)
				}
				return nil
			})
		}},
		{"set member delete", "service deleted", func(e *env) { e.ipset.FailNth(1, kerr.Errno("injected", syscall.EIO)) }},
		{"VIP unbind", "service deleted", func(e *env) {
			done := false
			e.dummy.SetFault(func(op string) error {
				if !done && strings.HasPrefix(op, "delete address 10.96.0.10/32") {
					done = true
					return kerr.Errno("injected", syscall.EIO)
				}
				return nil
			})
		}},
		{"real server delete", "udp endpoint removed", func(e *env) {
			e.ipvs.SetFault(failIPVSOnce(func(op ipvs.Op) bool { return op.Kind == ipvs.OpDeleteDestination }))
		}},
	}
	for _, f := range faults {
		for _, restart := range []bool{false, true} {
			name := f.name
			if restart {
				name += " then restart"
			}
			t.Run(name, func(t *testing.T) {
				sc := scenarios[f.scenario]
				clean := newEnv(t)
				sc.after(clean)
				clean.full()
				want := clean.dump()

				e := newEnv(t)
				sc.before(e)
				e.full()
				f.inject(e)
				if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, sc.change(e)); err == nil {
					t.Fatal("the sync with a failing delete reported no error")
				}
				e.ipvs.SetFault(nil)
				e.dummy.SetFault(nil)
				if restart {
					e.restart()
				}
				e.full()
				if got := e.dump(); got != want {
					t.Fatalf("kernel after the retry differs from a clean node:\n--- got ---\n%s--- want ---\n%s", got, want)
				}
				if res := e.full(); !res.Plan.Empty() {
					t.Errorf("a further full sync still changes:\n%s", res.Plan)
				}
			})
		}
	}
}

// A node port virtual server kipvs created stays kipvs's when the node loses the address it
// listens on: the next full sync removes it instead of taking it for a foreign one.
func TestNodePortOnLostNodeAddressRemoved(t *testing.T) {
	build := func(e *env) {
		e.set(svc("web", "10.96.0.10", nodePort(30080)), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	}
	newAddrs := []netip.Addr{netip.MustParseAddr("192.168.1.11")}
	clean := newEnv(t)
	clean.opts.NodePortAddresses = newAddrs
	build(clean)
	clean.full()
	want := clean.dump()

	e := newEnv(t)
	build(e)
	e.full()
	e.opts.NodePortAddresses = newAddrs
	build(e)
	e.full()
	if got := e.dump(); got != want {
		t.Fatalf("kernel differs from a clean node:\n--- got ---\n%s--- want ---\n%s", got, want)
	}
}
