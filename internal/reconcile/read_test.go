package reconcile

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// A full sync whose read of the kernel ran while incremental syncs changed it (Read) must
// end where a full sync of the final desired state on a fresh node ends, never apply a
// plan computed from a stale copy, and still repair drift on the objects no sync touched.
// Each change runs both before the read (the copy shows it) and after it (the copy is
// stale).
func TestFullSyncFromReadWithSyncsInBetween(t *testing.T) {
	noDrain := func(o *Options) { o.GracefulPeriod = 0 }
	base := func(e *env) {
		e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
		e.set(svc("dns", "10.96.0.53", udp, nodePort(30053)), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.7"))
		e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 6443, "10.244.3.9"))
		e.set(svc("db", "10.96.0.40"), eps("db", v1.ProtocolTCP, 5432, "10.244.6.1", "10.244.6.2"))
	}
	cases := []struct {
		name string
		// change is the incremental sync that runs during the read (after BeginRead).
		change func(e *env)
		// final is the desired state at the end, for the fresh-node reference.
		final func(e *env)
	}{
		{
			name: "endpoint added",
			change: func(e *env) {
				e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6", "10.244.4.1")))
			},
			final: func(e *env) {
				base(e)
				e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6", "10.244.4.1"))
			},
		},
		{
			name:   "endpoint removed",
			change: func(e *env) { e.sync(e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))) },
			final: func(e *env) {
				base(e)
				e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
			},
		},
		{
			name:   "service removed",
			change: func(e *env) { e.sync(e.remove("default", "dns")) },
			final:  func(e *env) { base(e); e.remove("default", "dns") },
		},
		{
			name:   "service added",
			change: func(e *env) { e.sync(e.set(svc("new", "10.96.0.30"), eps("new", v1.ProtocolTCP, 80, "10.244.5.5"))) },
			final: func(e *env) {
				base(e)
				e.set(svc("new", "10.96.0.30"), eps("new", v1.ProtocolTCP, 80, "10.244.5.5"))
			},
		},
		{
			name:   "all endpoints removed",
			change: func(e *env) { e.sync(e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 6443))) },
			final:  func(e *env) { base(e); e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 6443)) },
		},
	}
	for _, tc := range cases {
		for _, readFirst := range []bool{true, false} {
			name := tc.name + "/sync after the read"
			if !readFirst {
				name = tc.name + "/sync before the read"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, noDrain)
				base(e)
				e.full()
				// Drift no sync touches: a real server of db deleted behind kipvs's back.
				db := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.40"), Port: 80}
				if err := e.ipvs.DeleteDestination(db, netip.MustParseAddrPort("10.244.6.2:5432")); err != nil {
					t.Fatal(err)
				}
				rd := e.rec.BeginRead()
				if !readFirst {
					tc.change(e)
				}
				if err := ReadKernel(e.ctx, rd); err != nil {
					t.Fatal(err)
				}
				if readFirst {
					tc.change(e)
				}
				res, err := e.rec.FullSyncFrom(e.ctx, e.desired, e.opts, rd)
				if err != nil {
					t.Fatalf("full sync from the read: %v (a plan from a stale copy)", err)
				}
				if res.Drift["real_server"] != 1 {
					t.Errorf("drift = %v, want the one real server deleted behind kipvs's back", res.Drift)
				}
				ref := newEnv(t, noDrain)
				tc.final(ref)
				ref.full()
				if got, want := e.dump(), ref.dump(); got != want {
					t.Errorf("kernel after the full sync:\n%s\nwant (a fresh node's full sync of the same state):\n%s", got, want)
				}
				if again := e.full(); !again.Plan.Empty() || len(again.Drift) > 0 {
					t.Errorf("a second full sync planned %v, drift %v", again.Plan, again.Drift)
				}
			})
		}
	}
}

// A Read outdated by a failed apply or by another full sync is not used: FullSyncFrom reads
// the kernel again and converges.
func TestFullSyncFromOutdatedRead(t *testing.T) {
	noDrain := func(o *Options) { o.GracefulPeriod = 0 }
	for _, tc := range []struct {
		name    string
		outdate func(e *env)
	}{
		{"apply failed", func(e *env) {
			e.ipvs.SetFault(func(int, ipvs.Op) error { return kerr.ErrInvalid })
			defer e.ipvs.SetFault(nil)
			if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.9.9"))); err == nil {
				t.Fatal("sync with a failing kernel succeeded")
			}
		}},
		{"full sync ran", func(e *env) {
			e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.9.9"))
			e.full()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, noDrain)
			e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
			e.full()
			rd := e.rec.BeginRead()
			if err := ReadKernel(e.ctx, rd); err != nil {
				t.Fatal(err)
			}
			tc.outdate(e)
			if _, err := e.rec.FullSyncFrom(e.ctx, e.desired, e.opts, rd); err != nil {
				t.Fatal(err)
			}
			ref := newEnv(t, noDrain)
			ref.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.9.9"))
			ref.full()
			got, want := e.dump(), ref.dump()
			if got != want {
				t.Errorf("kernel:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
