package reconcile

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Each kind of object the kernel may refuse fails alone: the model of everything else
// stays (no full sync needed), the object gets a status of its kind, an unrelated sync
// before its retry time leaves it alone, and the retry at its time ends in what a fresh
// full sync makes, with nothing for a full sync to repair afterwards.
func TestOneFailedObjectIsRetriedAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(e *env)
		kind   Kind
	}{
		{"virtual server", func(e *env) { e.ipvs.SetFault(ipvstest.FailNth(e.ipvs.Mutations()+1, syscall.ENOMEM)) }, KindVirtualServer},
		{"real server", func(e *env) { e.ipvs.SetFault(ipvstest.FailNth(e.ipvs.Mutations()+2, syscall.EBUSY)) }, KindVirtualServer},
		{"address", func(e *env) {
			once := false
			e.dummy.SetFault(func(op string) error {
				if strings.HasPrefix(op, "add address 10.96.0.20/") && !once {
					once = true
					return syscall.ENOMEM
				}
				return nil
			})
		}, KindAddress},
		// The first member of a set's batch goes in, the second fails: what of the batch is
		// in the kernel is not known until the retry re-applies it.
		{"set members", func(e *env) { e.ipset.FailNth(2, syscall.ENOMEM) }, KindSetMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
			e.full()
			touched := e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 9000, "10.244.1.9", "10.244.2.9"))
			tc.inject(e)
			_, err := e.rec.Sync(e.ctx, e.desired, e.opts, touched)
			if !IsApplyError(err) {
				t.Fatalf("sync error = %v, want an *ApplyError", err)
			}
			if e.rec.NeedsFull() {
				t.Fatal("one failed object discarded the model (NeedsFull)")
			}
			failed := e.rec.Failed()
			if len(failed) == 0 {
				t.Fatal("no failed object recorded")
			}
			for _, s := range failed {
				if s.Key.Kind != tc.kind || s.Attempts != 1 || s.Err == nil || !s.RetryAt.Equal(e.clk.Now().Add(time.Second)) {
					t.Errorf("failed object %+v, want kind %s, 1 attempt, an error, retry in 1 s", s, tc.kind)
				}
			}
			if got := e.gauge("kipvs_sync_objects_out_of_sync", map[string]string{"kind": string(tc.kind)}); got != float64(len(failed)) {
				t.Errorf("out-of-sync gauge = %v, want %d", got, len(failed))
			}
			if got := e.counter("kipvs_sync_object_retries_total", map[string]string{"kind": string(tc.kind)}); got != float64(len(failed)) {
				t.Errorf("retries counter = %v, want %d", got, len(failed))
			}
			// A change of another Service before the retry time goes through alone.
			other := e.set(svc("db", "10.96.0.30"), eps("db", v1.ProtocolTCP, 5432, "10.244.3.3"))
			res, err := e.rec.Sync(e.ctx, e.desired, e.opts, other)
			if err != nil || res.Plan.Empty() {
				t.Fatalf("another change before the retry: err %v, plan %v", err, res.Plan)
			}
			if strings.Contains(res.Plan.String(), "10.96.0.20") {
				t.Errorf("the failed object was retried before its time:\n%s", res.Plan)
			}
			e.clk.Step(time.Second)
			if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, proxy.NewTouched()); err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if f := e.rec.Failed(); len(f) != 0 {
				t.Fatalf("still failed after the retry: %+v", f)
			}
			e.expectConverged("after the retry")
		})
	}
}

// A change of a failed object retries it at once, whatever its retry time; an object that
// keeps failing backs off exponentially up to RetryBackoff.Max.
func TestFailedObjectBackoffAndChange(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.RetryBackoff = Backoff{Initial: time.Second, Max: 4 * time.Second} })
	e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5"))
	e.full()
	e.ipvs.SetFault(func(_ int, op ipvs.Op) error {
		if op.Service.Addr.String() == "10.96.0.20" {
			return syscall.ENOMEM
		}
		return nil
	})
	touched := e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 9000, "10.244.1.9"))
	var waits []time.Duration
	for range 5 {
		_, err := e.rec.Sync(e.ctx, e.desired, e.opts, touched)
		if !IsApplyError(err) {
			t.Fatalf("sync error = %v, want an *ApplyError", err)
		}
		f := e.rec.Failed()
		if len(f) != 1 {
			t.Fatalf("failed = %+v", f)
		}
		wait := f[0].RetryAt.Sub(e.clk.Now())
		waits = append(waits, wait)
		e.clk.Step(wait)
		touched = proxy.NewTouched()
	}
	if got, want := waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("backoff = %v, want %v", got, want)
	}
	// Long before the next retry, a change of the failed Service retries it at once.
	e.ipvs.SetFault(nil)
	ch := e.set(svc("api", "10.96.0.20"), eps("api", v1.ProtocolTCP, 9000, "10.244.1.9", "10.244.2.9"))
	if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, ch); err != nil {
		t.Fatal(err)
	}
	if f := e.rec.Failed(); len(f) != 0 {
		t.Fatalf("a change of the failed object did not retry it: %+v", f)
	}
	e.expectConverged("after the change")
}

// expectConverged checks that the kernel is what a fresh full sync of the same desired
// state makes, and that a full sync now plans nothing and finds no drift.
func (e *env) expectConverged(when string) {
	e.t.Helper()
	fresh := newEnv(e.t)
	fresh.desired = e.desired
	fresh.full()
	if got, want := e.dump(), fresh.dump(); got != want {
		e.t.Errorf("%s:\n%s\nwant\n%s", when, got, want)
	}
	if r := e.full(); !r.Plan.Empty() || len(r.Drift) > 0 {
		e.t.Errorf("%s, a full sync plans %v, drift %v", when, r.Plan, r.Drift)
	}
}
