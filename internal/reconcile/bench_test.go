package reconcile

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/proxy"
)

// benchService is Service i with 10 endpoints, a cluster IP and (every 10th) a node port.
func benchService(i, endpoints, gen int) proxy.ServiceInput {
	name := fmt.Sprintf("svc-%05d", i)
	ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
	s := svc(name, ip.String())
	s.Name = name
	if i%10 == 0 {
		nodePort(int32(30000 + i%2700))(s)
	}
	var ips []string
	for e := range endpoints {
		ips = append(ips, netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i) + byte(e+gen)}).String())
	}
	return proxy.ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{eps(name, v1.ProtocolTCP, 8080, ips...)}}
}

// BenchmarkBuildAndFullSync: build the desired state of N Services x 10 endpoints from
// scratch and sync it into an empty (fake) kernel: kipvs's first sync on a node.
func BenchmarkBuildAndFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		inputs := make([]proxy.ServiceInput, n)
		for i := range inputs {
			inputs[i] = benchService(i, 10, 0)
		}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b)
				b.StartTimer()
				for _, in := range inputs {
					e.desired.Update(types.NamespacedName{Namespace: "default", Name: in.Service.Name}, proxy.BuildService(in, e.opts), nil)
				}
				if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResync: a periodic full sync of N Services when nothing changed (read back,
// compare, apply nothing): what every syncPeriod costs, and what upstream pays on every
// single change.
func BenchmarkResync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		e := newEnv(b)
		for i := range n {
			in := benchService(i, 10, 0)
			e.desired.Update(types.NamespacedName{Namespace: "default", Name: in.Service.Name}, proxy.BuildService(in, e.opts), nil)
		}
		if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.rec.FullSync(e.ctx, e.desired, e.opts)
				if err != nil || !res.Plan.Empty() {
					b.Fatalf("resync: %v %v", res.Plan, err)
				}
			}
		})
	}
}

// BenchmarkOneEndpointChange: with N Services programmed, one Service's endpoints change
// (one replaced): build that Service and sync incrementally. Cost should not grow with N.
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		e := newEnv(b)
		for i := range n {
			in := benchService(i, 10, 0)
			e.desired.Update(types.NamespacedName{Namespace: "default", Name: in.Service.Name}, proxy.BuildService(in, e.opts), nil)
		}
		if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err != nil {
			b.Fatal(err)
		}
		versions := []proxy.ServiceInput{benchService(n/2, 10, 1), benchService(n/2, 10, 0)}
		name := types.NamespacedName{Namespace: "default", Name: versions[0].Service.Name}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := proxy.NewTouched()
				e.desired.Update(name, proxy.BuildService(versions[i%2], e.opts), t)
				res, err := e.rec.Sync(e.ctx, e.desired, e.opts, t)
				if err != nil || res.Plan.Empty() {
					b.Fatalf("sync: %v %v", res.Plan, err)
				}
				i++
			}
		})
	}
}

// BenchmarkPeriodicPass: the periodic full sync's comparison of N Services x 4 endpoints,
// nothing changed, in steps of 256 objects (reconcile.Pass) as the daemon runs it: an op is
// the whole pass (its read untimed); max-step-us is the longest step and max-collect-us the
// longest Collect of 256 keys (the holds of the daemon lock), which should not grow with
// N, nor should begin-us, BeginPass (also under the lock); whole-us is FullSyncFrom over the same read (the
// same pass run to its end under one hold of the lock, by Pass.Run).
func BenchmarkPeriodicPass(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		e := newEnv(b)
		for i := range n {
			in := benchService(i, 4, 0)
			e.desired.Update(types.NamespacedName{Namespace: "default", Name: in.Service.Name}, proxy.BuildService(in, e.opts), nil)
		}
		if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err != nil {
			b.Fatal(err)
		}
		read := func() *Read {
			rd := e.rec.BeginRead()
			if err := ReadKernel(e.ctx, rd); err != nil {
				b.Fatal(err)
			}
			return rd
		}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			var longest, collect, whole, begin time.Duration
			for b.Loop() {
				b.StopTimer()
				rd := read()
				b.StartTimer()
				start := time.Now()
				p := e.rec.BeginPass(e.desired, e.opts, rd) // under the daemon lock, as each Collect and step
				begin = max(begin, time.Since(start))
				for done := false; !done; {
					start := time.Now()
					done = p.Collect(256)
					collect = max(collect, time.Since(start))
				}
				p.Prepare()
				for over := false; !over; {
					start := time.Now()
					over = p.Step(e.ctx, 256)
					longest = max(longest, time.Since(start))
				}
				if res, err := p.Result(); err != nil || res.Changes != 0 {
					b.Fatalf("pass: %d changes, %v", res.Changes, err)
				}
				b.StopTimer()
				rd = read()
				start = time.Now()
				if _, err := e.rec.FullSyncFrom(e.ctx, e.desired, e.opts, rd); err != nil {
					b.Fatal(err)
				}
				whole = max(whole, time.Since(start))
				b.StartTimer()
			}
			b.ReportMetric(float64(longest.Microseconds()), "max-step-us")
			b.ReportMetric(float64(begin.Microseconds()), "begin-us")
			b.ReportMetric(float64(collect.Microseconds()), "max-collect-us")
			b.ReportMetric(float64(whole.Microseconds()), "whole-us")
		})
	}
}
