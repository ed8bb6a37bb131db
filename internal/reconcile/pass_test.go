package reconcile

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// passSeeds is how many random nodes TestPassEndsTheSameWhateverItsSteps and
// TestPassWithSyncsBetweenSteps try.
const passSeeds = 150

// passChange is a random change of one of the node's Services (a new endpoint list, a
// protocol or node port change, or its removal), the same for every env given the same rng.
// An object drifted behind kipvs's back may fail to apply (an *ApplyError): it is
// retried on its own, as on a node.
func passChange(rng *rand.Rand, e *env, services int) {
	if _, err := e.rec.Sync(e.ctx, e.desired, e.opts, passEdit(rng, e, services)); err != nil && !IsApplyError(err) {
		e.t.Fatalf("sync: %v", err)
	}
}

// passEdit is passChange's edit of the desired state, not synced.
func passEdit(rng *rand.Rand, e *env, services int) *proxy.Touched {
	i := rng.IntN(services)
	name := fmt.Sprintf("svc-%d", i)
	if rng.IntN(5) == 0 {
		return e.remove("default", name)
	}
	var mods []func(*v1.Service)
	proto, port := v1.ProtocolTCP, int32(8080)
	if rng.IntN(3) == 0 {
		mods, proto, port = append(mods, udp), v1.ProtocolUDP, 5353
	}
	if rng.IntN(3) == 0 {
		mods = append(mods, nodePort(int32(30000+i)))
	}
	var ips []string
	for range rng.IntN(4) {
		ips = append(ips, fmt.Sprintf("10.244.%d.%d", rng.IntN(3), 1+rng.IntN(6)))
	}
	return e.set(svc(name, fmt.Sprintf("10.96.0.%d", 10+i), mods...), eps(name, proto, port, uniq(ips)...))
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// passDrift changes the kernel behind kipvs's back: a virtual server or a real server
// deleted, a weight changed, the cluster IP set flushed, an address unbound, a foreign
// virtual server on a bound VIP (kipvs's by the ownership rule) when foreign.
func passDrift(t *testing.T, rng *rand.Rand, e *env, foreign bool) {
	t.Helper()
	table, err := e.ipvs.Table()
	if err != nil {
		t.Fatal(err)
	}
	for range rng.IntN(4) {
		if len(table) == 0 {
			break
		}
		ent := table[rng.IntN(len(table))]
		var op ipvs.Op
		switch r := rng.IntN(3); {
		case r == 0 || len(ent.Destinations) == 0:
			op = ipvs.DeleteServiceOp(ent.Service.ServiceKey)
		case r == 1:
			d := ent.Destinations[rng.IntN(len(ent.Destinations))]
			op = ipvs.DeleteDestinationOp(ent.Service.ServiceKey, d.AddrPort())
		default:
			d := ent.Destinations[rng.IntN(len(ent.Destinations))]
			d.Weight = 7
			op = ipvs.UpdateDestinationOp(ent.Service.ServiceKey, d)
		}
		_ = e.ipvs.Apply([]ipvs.Op{op}) // a second change of a deleted one fails: fine
	}
	if rng.IntN(4) == 0 {
		if err := e.ipset.Flush("KUBE-CLUSTER-IP"); err != nil {
			t.Fatal(err)
		}
	}
	if rng.IntN(3) == 0 {
		_, _ = e.dummy.RemoveAddress(netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", 10+rng.IntN(8))))
	}
	if rng.IntN(3) == 0 && foreign {
		a := netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", 10+rng.IntN(8)))
		key := tcpKey(a.String(), 9999)
		_ = e.ipvs.Apply([]ipvs.Op{ipvs.AddServiceOp(ipvs.Service{ServiceKey: key, Scheduler: "rr", Netmask: ipvs.FullNetmask(key.Family)})})
	}
}

// passNode builds two identical nodes (same Services, same first full sync, same drift).
func passNode(t *testing.T, seed uint64, foreign bool) (a, b *env, rngA, rngB *rand.Rand, services int) {
	graceful := time.Duration(0)
	if seed%2 == 0 {
		graceful = 30 * time.Second
	}
	mod := func(o *Options) { o.GracefulPeriod = graceful }
	a, b = newEnv(t, mod), newEnv(t, mod)
	rngA, rngB = rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
	services = 3 + int(seed%6)
	for _, x := range []struct {
		e   *env
		rng *rand.Rand
	}{{a, rngA}, {b, rngB}} {
		for range services * 2 {
			passEdit(x.rng, x.e, services)
		}
		x.e.full()
		// Drains begun before the pass have a start of their own; the drift may re-weight
		// a draining real server.
		passChange(x.rng, x.e, services)
		x.e.clk.Step(5 * time.Second)
		passDrift(t, x.rng, x.e, foreign)
		// A sync after the drift: some of its objects fail (the model is wrong about them)
		// and stay failed into the pass.
		passChange(x.rng, x.e, services)
		x.e.clk.Step(5 * time.Second)
	}
	return a, b, rngA, rngB, services
}

// runPass runs a pass over rd as the daemon does: its keys copied chunk at a time (never
// more at once: the lock is held for that), then prepared, then compared chunk objects at a
// time, with between run between two of those holds of the lock; or (between nil, whole)
// as the daemon runs a full sync under one hold of the lock, with Run (binds beside).
func (e *env) runPass(rd *Read, chunk int, between func(), whole bool) (Result, error) {
	p := e.rec.BeginPass(e.desired, e.opts, rd)
	p.keepPlan = true
	for held := 0; ; {
		done := p.Collect(chunk)
		if n := p.Collected(); n-held > chunk {
			e.t.Fatalf("one Collect(%d) copied %d keys", chunk, n-held)
		} else {
			held = n
		}
		if done {
			break
		}
		if between != nil {
			between()
		}
	}
	if whole {
		p.Run(e.ctx, chunk)
	} else {
		p.Prepare()
		for !p.Step(e.ctx, chunk) {
			if between != nil {
				between()
			}
		}
	}
	if p.Aborted() {
		e.t.Fatal("pass aborted with no full sync since it began")
	}
	return p.Result()
}

// A full sync ends the same whatever its steps: over the same node, drift and changes made
// during the read, a pass in steps of 1 to 4 objects (driven step by step, or by Run, which
// binds the VIPs beside the steps) ends in the same kernel, the same model (what was
// applied, the owned virtual servers, the drain list), the same drift counts and as many
// changes as FullSyncFrom (a pass run in steps of StepSize under one hold of the lock).
func TestPassEndsTheSameWhateverItsSteps(t *testing.T) {
	for seed := range uint64(passSeeds) {
		a, b, rngA, rngB, services := passNode(t, seed, true)
		switch seed % 5 {
		case 1:
			// A restart: adoption of what a kipvs (and the drift) left.
			a.restart()
			b.restart()
		case 2:
			// A node kipvs never ran on: adoption, every set missing.
			a, b = newEnv(t, func(o *Options) { o.GracefulPeriod = a.rec.opts.GracefulPeriod }), newEnv(t, func(o *Options) { o.GracefulPeriod = b.rec.opts.GracefulPeriod })
			for range services {
				passEdit(rngA, a, services)
				passEdit(rngB, b, services)
			}
		}
		rdA, rdB := a.rec.BeginRead(), b.rec.BeginRead()
		if err := ReadKernel(a.ctx, rdA); err != nil {
			t.Fatal(err)
		}
		if err := ReadKernel(b.ctx, rdB); err != nil {
			t.Fatal(err)
		}
		changes := rngA.IntN(4)
		rngB.IntN(4) // the streams stay equal
		if a.rec.NeedsFull() {
			changes = 0 // no incremental sync before the first full one
		}
		for range changes {
			passChange(rngA, a, services)
			passChange(rngB, b, services)
		}
		chunk := 1 + int(seed%4)
		whole := (seed/5)%2 == 1
		resA, errA := a.runPass(rdA, chunk, nil, whole)
		resB, errB := b.rec.FullSyncFrom(b.ctx, b.desired, b.opts, rdB)
		where := fmt.Sprintf("seed %d (chunk %d, %d changes during the read, Run %v)", seed, chunk, changes, whole)
		if errA != nil || errB != nil {
			t.Fatalf("%s: pass err %v, FullSyncFrom err %v", where, errA, errB)
		}
		if got, want := a.dump(), b.dump(); got != want {
			t.Fatalf("%s: kernels differ:\n--- pass ---\n%s--- FullSyncFrom ---\n%s", where, got, want)
		}
		if !reflect.DeepEqual(resA.Drift, resB.Drift) {
			t.Errorf("%s: drift %v, FullSyncFrom's %v", where, resA.Drift, resB.Drift)
		}
		if resA.Plan.Len() != resB.Plan.Len() || resA.Changes != resA.Plan.Len() || resB.Changes != resB.Plan.Len() {
			t.Errorf("%s: %d changes, FullSyncFrom %d:\n--- pass ---\n%s--- FullSyncFrom ---\n%s", where, resA.Plan.Len(), resB.Plan.Len(), resA.Plan, resB.Plan)
		}
		if !reflect.DeepEqual(a.rec.applied, b.rec.applied) {
			t.Errorf("%s: the models of what was applied differ", where)
		}
		if !reflect.DeepEqual(a.rec.owned, b.rec.owned) || !reflect.DeepEqual(a.rec.draining, b.rec.draining) {
			t.Errorf("%s: owned %v / draining %v, FullSyncFrom's %v / %v", where, a.rec.owned, a.rec.draining, b.rec.owned, b.rec.draining)
		}
		if a.rec.journal != nil {
			t.Errorf("%s: the journal is still on after the pass", where)
		}
	}
}

// Incremental syncs between a pass's steps (the lock is released between them) are never
// undone by a later step and never taken for drift: the pass ends where a fresh node's
// first sync of the final Services ends, the next full sync plans nothing and finds no
// drift, and only the drift made before the read is counted.
func TestPassWithSyncsBetweenSteps(t *testing.T) {
	for seed := range uint64(passSeeds) {
		// No foreign virtual server on a VIP: one on a VIP a sync binds after the step that
		// compared it becomes kipvs's only then, and goes at the next full sync (as after a
		// full sync in one piece).
		a, b, rngA, _, services := passNode(t, seed, false)
		// b: the same drift repaired alone, for its count.
		wantDrift := b.full().Drift
		rd := a.rec.BeginRead()
		if err := ReadKernel(a.ctx, rd); err != nil {
			t.Fatal(err)
		}
		chunk := 1 + int(seed%3)
		res, err := a.runPass(rd, chunk, func() {
			if rngA.IntN(2) == 0 {
				passChange(rngA, a, services)
			}
		}, false)
		where := fmt.Sprintf("seed %d (chunk %d)", seed, chunk)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		// Drift on objects a sync changed before the step that compared them is not
		// counted (their copy is stale): at most what b counted.
		for kind, n := range res.Drift {
			if n > wantDrift[kind] {
				t.Errorf("%s: drift %v, more than the %v made", where, res.Drift, wantDrift)
			}
		}
		fresh := newEnv(t, func(o *Options) { o.GracefulPeriod = a.rec.opts.GracefulPeriod })
		fresh.desired = a.desired
		fresh.full()
		if a.rec.opts.GracefulPeriod == 0 {
			// With draining, real servers at weight 0 may stay: only compare without.
			if got, want := a.dump(), fresh.dump(); got != want {
				t.Fatalf("%s: the pass did not end where a fresh node does:\n--- pass ---\n%s--- fresh ---\n%s", where, got, want)
			}
		}
		again := a.full()
		if !again.Plan.Empty() || len(again.Drift) > 0 {
			t.Fatalf("%s: the next full sync planned %s and found drift %v", where, again.Plan, again.Drift)
		}
	}
}

// countingIPVS records the largest batch applied.
type countingIPVS struct {
	*ipvstest.Fake
	largest int
}

func (c *countingIPVS) Apply(ops []ipvs.Op) error {
	c.largest = max(c.largest, len(ops))
	return c.Fake.Apply(ops)
}

// A first full sync in steps applies its plan in batches bounded by the chunk size, not in
// one (whose size grows with the node), and programs what FullSync programs.
func TestFirstSyncInBoundedSteps(t *testing.T) {
	const services, endpoints, chunk = 120, 3, 8
	build := func(e *env) {
		for i := range services {
			var ips []string
			for j := range endpoints {
				ips = append(ips, fmt.Sprintf("10.244.%d.%d", j, i+1))
			}
			name := fmt.Sprintf("svc-%d", i)
			e.set(svc(name, fmt.Sprintf("10.96.%d.%d", i/200, 10+i%200)), eps(name, v1.ProtocolTCP, 8080, ips...))
		}
	}
	ref := newEnv(t)
	build(ref)
	counting := &countingIPVS{Fake: ref.ipvs}
	ref.rec.kernel.IPVS = counting
	ref.full()
	if counting.largest < services {
		t.Fatalf("the reference full sync's largest batch is %d ops: it should be the whole plan", counting.largest)
	}

	e := newEnv(t)
	build(e)
	counting = &countingIPVS{Fake: e.ipvs}
	e.rec.kernel.IPVS = counting
	rd := e.rec.BeginRead()
	if err := ReadKernel(e.ctx, rd); err != nil {
		t.Fatal(err)
	}
	p := e.rec.BeginPass(e.desired, e.opts, rd)
	p.Prepare()
	steps := 0
	for !p.Step(e.ctx, chunk) {
		steps++
	}
	res, err := p.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan != nil || res.Changes < services*(2+endpoints) {
		t.Errorf("result: plan %v kept, %d changes", res.Plan != nil, res.Changes)
	}
	if bound := chunk * (1 + endpoints); counting.largest > bound {
		t.Errorf("largest IPVS batch %d ops; chunks of %d virtual servers with %d real servers make at most %d", counting.largest, chunk, endpoints, bound)
	}
	if steps < services/chunk {
		t.Errorf("%d steps for %d virtual servers in chunks of %d", steps, services, chunk)
	}
	if got, want := e.dump(), ref.dump(); got != want {
		t.Errorf("kernel after the first sync in steps:\n%s\nwant (FullSync's):\n%s", got, want)
	}
	if again := e.full(); !again.Plan.Empty() || len(again.Drift) > 0 {
		t.Errorf("the next full sync planned %s, drift %v", again.Plan, again.Drift)
	}
}
