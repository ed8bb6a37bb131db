package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
)

var errRefused = errors.New("refused by the test")

// gatedDummy refuses the binds of refuse. It holds the binds of a request that has hold in
// it back until release is closed (late: it was not within 10 s), and, when stepWaits, those
// of one that has wait in it until a step waits for them: until awaited was last called
// with binds of the same request (unwaited: not within 10 s).
type gatedDummy struct {
	*dummyiftest.Fake
	refuse     netip.Addr
	hold, wait netip.Addr
	release    chan struct{}
	late       bool
	stepWaits  bool
	unwaited   bool
	mu         sync.Mutex
	lastAwait  []netip.Addr  // the binds a step last waited for
	awaitCalls chan struct{} // a token per awaited call
}

// awaited records that a step waits for adds.
func (g *gatedDummy) awaited(adds []netip.Addr) {
	g.mu.Lock()
	g.lastAwait = adds
	g.mu.Unlock()
	select {
	case g.awaitCalls <- struct{}{}:
	default:
	}
}

// waitForStep returns once the last step to wait waits for some of as.
func (g *gatedDummy) waitForStep(as []netip.Addr) {
	timeout := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		ok := len(g.lastAwait) > 0 && slices.Contains(as, g.lastAwait[0])
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-g.awaitCalls:
		case <-timeout:
			g.unwaited = true
			return
		}
	}
}

func (g *gatedDummy) EnsureAddresses(as []netip.Addr) []error {
	if g.release != nil && slices.Contains(as, g.hold) {
		select {
		case <-g.release:
		case <-time.After(10 * time.Second):
			g.late = true
		}
	}
	if g.stepWaits && slices.Contains(as, g.wait) {
		g.waitForStep(as)
	}
	errs := make([]error, len(as))
	for i, a := range as {
		if a == g.refuse {
			errs[i] = errRefused
		} else {
			_, errs[i] = g.Fake.EnsureAddress(a)
		}
	}
	return errs
}

// vipFirst checks that every virtual server but refused's is created with its VIP bound
// already, and closes created at the first one.
type vipFirst struct {
	*ipvstest.Fake
	dummy   *dummyiftest.Fake
	refused netip.Addr // no bind to wait for
	created chan struct{}
	once    sync.Once
	errs    []string
}

func (v *vipFirst) Apply(ops []ipvs.Op) error {
	bound, err := v.dummy.Addresses()
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.Kind != ipvs.OpAddService {
			continue
		}
		if a := op.Service.Addr; a != v.refused && !slices.Contains(bound, netip.PrefixFrom(a, 32)) {
			v.errs = append(v.errs, fmt.Sprintf("virtual server %s created before its VIP was bound", op.Service.ServiceKey))
		}
		v.once.Do(func() { close(v.created) })
	}
	return v.Fake.Apply(ops)
}

// A pass run whole (a first full sync) binds the VIPs beside its later steps: a virtual
// server is created while the binds of higher VIPs are still going on, never before its own
// VIP is bound. It ends where the same pass in plain steps ends, with the same failures: a
// VIP whose bind failed is reported, and bound by the next sync. (Its virtual server is
// created all the same: its KUBE-CLUSTER-IP member makes it kipvs's, see claimedOps.)
func TestRunBindsBesideVirtualServers(t *testing.T) {
	const services, chunk = 40, 4
	refuse := netip.MustParseAddr("10.96.0.17")
	run := func(whole bool) (*env, *gatedDummy, *vipFirst, error) {
		e := newEnv(t)
		for i := range services {
			name := fmt.Sprintf("svc-%d", i)
			e.set(svc(name, fmt.Sprintf("10.96.0.%d", 10+i)), eps(name, v1.ProtocolTCP, 8080, fmt.Sprintf("10.244.0.%d", i+1), fmt.Sprintf("10.244.1.%d", i+1)))
		}
		g := &gatedDummy{Fake: e.dummy, refuse: refuse}
		v := &vipFirst{Fake: e.ipvs, dummy: e.dummy, refused: refuse, created: make(chan struct{})}
		// The highest VIP's bind waits for a virtual server: binds in line with the steps
		// would wait for it in vain. Those of the address step with 10.96.0.30 wait for a
		// step to wait for them: 10.96.0.30's virtual server is created only after.
		g.hold, g.release = netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", 10+services-1)), v.created
		g.wait, g.stepWaits, g.awaitCalls = netip.MustParseAddr("10.96.0.30"), true, make(chan struct{}, 1)
		e.rec.kernel.Dummy, e.rec.kernel.IPVS = g, v
		rd := e.rec.BeginRead()
		if err := ReadKernel(e.ctx, rd); err != nil {
			t.Fatal(err)
		}
		p := e.rec.BeginPass(e.desired, e.opts, rd)
		if whole {
			p.run(e.ctx, chunk, g.awaited)
			if p.binds != nil {
				t.Error("the binder is still set after Run")
			}
		} else {
			g.release, g.stepWaits = nil, false // in line: nothing to wait for
			p.Prepare()
			for !p.Step(e.ctx, chunk) {
			}
		}
		_, err := p.Result()
		return e, g, v, err
	}
	ref, _, refCheck, refErr := run(false)
	e, g, check, err := run(true)
	if g.late {
		t.Error("the last VIP's bind was not sent before a virtual server was created: the binds did not overlap the virtual servers' steps")
	}
	if g.unwaited {
		t.Errorf("no step waited for the binds with %s", g.wait)
	}
	for _, msg := range append(refCheck.errs, check.errs...) {
		t.Error(msg)
	}
	if got, want := e.dump(), ref.dump(); got != want {
		t.Errorf("Run ends elsewhere than the steps:\n--- Run ---\n%s--- steps ---\n%s", got, want)
	}
	if err == nil || fmt.Sprint(err) != fmt.Sprint(refErr) || !errors.Is(err, errRefused) {
		t.Errorf("Run's error %v, the steps' %v: want the refused bind's", err, refErr)
	}
	ae, _ := AsApplyError(err)
	want := []ObjectKey{addrObject(refuse)}
	if ae == nil || !slices.Equal(ae.Failed, want) {
		t.Errorf("failed objects %v, want %v", ae, want)
	}
	if tab, _ := e.ipvs.Table(); len(tab) != services {
		t.Errorf("%d virtual servers, want %d", len(tab), services)
	}
	// Once the bind goes through, the next sync binds the VIP.
	g.refuse = netip.Addr{}
	if res := e.full(); !slices.Equal(res.Plan.AddAddrs, []netip.Addr{refuse}) {
		t.Errorf("the next full sync bound %v, want %v", res.Plan.AddAddrs, refuse)
	}
	if bound, _ := e.dummy.Addresses(); !slices.Contains(bound, netip.PrefixFrom(refuse, 32)) {
		t.Errorf("%s is still not bound after the next full sync", refuse)
	}
}

// countingDummy counts the bind requests, and those sent once ctx was done, and holds
// those of an address step with hold in it until ctx is done.
type countingDummy struct {
	*dummyiftest.Fake
	ctx   context.Context
	hold  netip.Addr
	calls atomic.Int32
	late  atomic.Int32
}

func (c *countingDummy) EnsureAddresses(as []netip.Addr) []error {
	if len(as) > 0 {
		c.calls.Add(1)
		if c.ctx.Err() != nil {
			c.late.Add(1)
		}
	}
	if slices.Contains(as, c.hold) {
		<-c.ctx.Done()
	}
	return c.Fake.EnsureAddresses(as)
}

// cancelAtCreate cancels at the first virtual server created.
type cancelAtCreate struct {
	*ipvstest.Fake
	cancel context.CancelFunc
}

func (c *cancelAtCreate) Apply(ops []ipvs.Op) error {
	c.cancel()
	return c.Fake.Apply(ops)
}

// A pass run whole that is cancelled while VIPs are still to be bound stops: the binds
// not yet sent are not sent, Run returns only once the binding goroutine has, and the
// reconciler needs a full sync (its model is incomplete).
func TestRunCancelledWhileBinding(t *testing.T) {
	// More binds than one request of the binding goroutine takes (bindGroup): some are
	// still to be sent when the pass is cancelled.
	const services, chunk = bindGroup + 80, 4
	vip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, byte((10 + i) >> 8), byte(10 + i)}) }
	e := newEnv(t)
	for i := range services {
		name := fmt.Sprintf("svc-%d", i)
		e.set(svc(name, vip(i).String()), eps(name, v1.ProtocolTCP, 8080, netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}).String()))
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	d := &countingDummy{Fake: e.dummy, ctx: ctx, hold: vip(10)}
	e.rec.kernel.Dummy, e.rec.kernel.IPVS = d, &cancelAtCreate{Fake: e.ipvs, cancel: cancel}
	rd := e.rec.BeginRead()
	if err := ReadKernel(e.ctx, rd); err != nil {
		t.Fatal(err)
	}
	p := e.rec.BeginPass(e.desired, e.opts, rd)
	p.Run(ctx, chunk)
	calls := d.calls.Load()
	if _, err := p.Result(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run's error %v, want %v", err, context.Canceled)
	}
	if !e.rec.NeedsFull() {
		t.Error("the reconciler does not need a full sync after a cancelled pass")
	}
	// The held request and those before it; none after.
	if bound, _ := e.dummy.Addresses(); d.late.Load() > 0 || slices.Contains(bound, netip.PrefixFrom(vip(services-1), 32)) {
		t.Errorf("%d bind requests (%d once cancelled), %d addresses bound: the binds went on after the cancel", calls, d.late.Load(), len(bound))
	}
}

// favorDummy counts the bind requests sent while the binding goroutine was not favored.
type favorDummy struct {
	*dummyiftest.Fake
	favored, restored *atomic.Int32
	unfavored         atomic.Int32
}

func (f *favorDummy) EnsureAddresses(as []netip.Addr) []error {
	if len(as) > 0 && (f.favored.Load() != 1 || f.restored.Load() != 0) {
		f.unfavored.Add(1)
	}
	return f.Fake.EnsureAddresses(as)
}

// A pass run whole calls Kernel.FavorBinder on its binding goroutine before the first bind
// and its restore after the last; a FavorBinder that fails is logged once, however many
// passes run, and the VIPs are bound all the same.
func TestRunFavorsTheBinder(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	e := newEnv(t, func(o *Options) { o.Logger = zap.New(core) })
	for i := range 12 {
		name := fmt.Sprintf("svc-%d", i)
		e.set(svc(name, fmt.Sprintf("10.96.0.%d", 10+i)), eps(name, v1.ProtocolTCP, 8080, fmt.Sprintf("10.244.0.%d", i+1)))
	}
	var favored, restored atomic.Int32
	var fail error
	d := &favorDummy{Fake: e.dummy, favored: &favored, restored: &restored}
	e.rec.kernel.Dummy = d
	e.rec.kernel.FavorBinder = func() (func(), error) {
		favored.Add(1)
		return func() { restored.Add(1) }, fail
	}
	run := func() {
		t.Helper()
		favored.Store(0)
		restored.Store(0)
		rd := e.rec.BeginRead()
		if err := ReadKernel(e.ctx, rd); err != nil {
			t.Fatal(err)
		}
		p := e.rec.BeginPass(e.desired, e.opts, rd)
		p.Run(e.ctx, 4)
		if _, err := p.Result(); err != nil {
			t.Fatal(err)
		}
		if favored.Load() != 1 || restored.Load() != 1 {
			t.Errorf("FavorBinder called %d times and its restore %d, want once each", favored.Load(), restored.Load())
		}
	}
	run()
	if n := d.unfavored.Load(); n > 0 {
		t.Errorf("%d bind requests sent before FavorBinder or after its restore", n)
	}
	if bound, _ := e.dummy.Addresses(); len(bound) != 12 {
		t.Errorf("%d VIPs bound, want 12", len(bound))
	}
	// Failing: the next passes (a VIP to bind each) log it once.
	fail = errors.New("not permitted by the test")
	for i := range 2 {
		e.dummy.RemoveAddress(netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", 10+i)))
		run()
	}
	if n := logs.FilterMessageSnippet("ordinary scheduler").Len(); n != 1 {
		t.Errorf("the failure to favor the binder was logged %d times, want once", n)
	}
	if bound, _ := e.dummy.Addresses(); len(bound) != 12 {
		t.Errorf("%d VIPs bound after the failures to favor the binder, want 12", len(bound))
	}
}

// callsDummy records each EnsureAddresses call; the first waits for gate, having closed
// started.
type callsDummy struct {
	*dummyiftest.Fake
	refuse  netip.Addr
	started chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	calls   [][]netip.Addr
}

func (d *callsDummy) EnsureAddresses(as []netip.Addr) []error {
	d.mu.Lock()
	d.calls = append(d.calls, slices.Clone(as))
	first := len(d.calls) == 1
	d.mu.Unlock()
	if first {
		close(d.started)
		<-d.gate
	}
	errs := make([]error, len(as))
	for i, a := range as {
		if a == d.refuse {
			errs[i] = errRefused
		}
	}
	return errs
}

// The binding goroutine binds the chunks queued while it was in the kernel in one call, up
// to bindGroup binds, and gives each chunk its own outcomes.
func TestBinderGathersQueuedChunks(t *testing.T) {
	next := 0
	chunk := func(n int) []netip.Addr {
		as := make([]netip.Addr, n)
		for i := range as {
			next++
			as[i] = netip.AddrFrom4([4]byte{10, 96, byte(next >> 8), byte(next)})
		}
		return as
	}
	sizes := []int{1, 3, 2, 1, bindGroup - 5, bindGroup / 2, 7}
	var chunks [][]netip.Addr
	for _, n := range sizes {
		chunks = append(chunks, chunk(n))
	}
	d := &callsDummy{Fake: dummyiftest.NewFake("kube-ipvs0"), refuse: chunks[2][1], started: make(chan struct{}), gate: make(chan struct{})}
	b := startBinder(context.Background(), d, clock.RealClock{}, len(chunks), func() func() { return func() {} })
	b.submit(&Plan{AddAddrs: chunks[0]}, nil, chunks[0][0])
	<-d.started // the binder is in its first call: the rest queue up
	for _, c := range chunks[1:] {
		b.submit(&Plan{AddAddrs: c}, nil, c[0])
	}
	pending := slices.Clone(b.pending)
	close(d.gate)
	for _, c := range pending {
		<-c.bound
	}
	b.stop()
	// 1 | 3+2+1+(bindGroup-5) = bindGroup+1: full | bindGroup/2+7
	want := [][]netip.Addr{chunks[0], slices.Concat(chunks[1:5]...), slices.Concat(chunks[5:]...)}
	if len(d.calls) != len(want) {
		t.Fatalf("%d calls of %v binds, want %d", len(d.calls), lens(d.calls), len(want))
	}
	for i := range want {
		if !slices.Equal(d.calls[i], want[i]) {
			t.Errorf("call %d: %d binds, want %d", i, len(d.calls[i]), len(want[i]))
		}
	}
	for i, c := range pending {
		if len(c.errs) != len(chunks[i]) {
			t.Fatalf("chunk %d: %d outcomes for %d binds", i, len(c.errs), len(chunks[i]))
		}
		for j, err := range c.errs {
			if refused := i == 2 && j == 1; refused != errors.Is(err, errRefused) {
				t.Errorf("chunk %d bind %d (%s): %v", i, j, chunks[i][j], err)
			}
		}
	}
}

func lens(calls [][]netip.Addr) []int {
	var n []int
	for _, c := range calls {
		n = append(n, len(c))
	}
	return n
}
