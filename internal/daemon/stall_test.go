package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// slowTableRead is how long the slow fake kernel's IPVS table read takes on the injected
// clock: about what 10,000 virtual servers x 10 real servers take under qemu TCG.
const slowTableRead = 10 * time.Second

// stallBound is the most an endpoint change may wait while a periodic full sync runs.
const stallBound = time.Second

// slowIPVS is a fake IPVS whose table read is slow: it copies the table, reports that a read
// started, waits until the test releases it, and then advances the injected clock by
// slowTableRead. The copy is taken at the start, so changes made during the read are not
// in it (the stale copy a real dump of a changing table can return).
type slowIPVS struct {
	*ipvstest.Fake
	clk     *clocktesting.FakeClock
	slow    atomic.Bool
	reading chan struct{}
	release chan struct{}
}

func (s *slowIPVS) Table() ([]ipvs.Entry, error) {
	t, err := s.Fake.Table()
	if s.slow.Load() {
		s.reading <- struct{}{}
		<-s.release
		s.clk.Step(slowTableRead)
	}
	return t, err
}

// TableContext is Table, given up when ctx ends while the read is held (ipvs.Client's is
// given up between two services' destination dumps).
func (s *slowIPVS) TableContext(ctx context.Context) ([]ipvs.Entry, error) {
	t, err := s.Fake.Table()
	if s.slow.Load() {
		s.reading <- struct{}{}
		select {
		case <-s.release:
			s.clk.Step(slowTableRead)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return t, err
}

func stallService(name, ip string, endpoints ...string) (*v1.Service, *discoveryv1.EndpointSlice) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ep := range endpoints {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return svc, sl
}

// stallObjects is the node's Services; changed adds an endpoint to web.
func stallObjects(changed bool) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	webEPs := []string{"10.244.1.5"}
	if changed {
		webEPs = append(webEPs, "10.244.1.6")
	}
	var svcs []*v1.Service
	var slices []*discoveryv1.EndpointSlice
	for _, s := range []struct {
		name, ip string
		eps      []string
	}{
		{"web", "10.96.0.10", webEPs},
		{"api", "10.96.0.20", []string{"10.244.2.5", "10.244.2.6"}},
		{"db", "10.96.0.30", []string{"10.244.3.5"}},
	} {
		svc, sl := stallService(s.name, s.ip, s.eps...)
		svcs, slices = append(svcs, svc), append(slices, sl)
	}
	return svcs, slices
}

func (n *fakeNode) wholeDump(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []func() (string, error){
		n.ipvs.Dump, n.ipset.Dump, n.dummy.Dump, func() (string, error) { return n.nf.Dump(context.Background()) },
	} {
		s, err := f()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\n--\n", strings.TrimSuffix(s, "\n"))
	}
	return b.String()
}

// An endpoint change that arrives while a periodic full sync reads a slow kernel is
// programmed within stallBound on the injected clock, not after the read; the full sync
// then ends where a fresh node's first sync of the same objects ends (the change it did not
// see in its copy of the table is not undone) and repairs nothing.
func TestChangeDoesNotWaitForPeriodicFullSync(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	slow := &slowIPVS{Fake: node.ipvs, clk: clk, reading: make(chan struct{}), release: make(chan struct{})}
	src := newMemSource("node-a")
	svcs, slices := stallObjects(false)
	src.Set(svcs, slices, nil, false)
	reg := prometheus.NewRegistry()
	deps := node.deps(src, reg)
	deps.Clock = clk
	deps.IPVS = slow
	deps.Kernel = func(f inet.Family) (reconcile.Kernel, error) {
		return reconcile.Kernel{IPVS: slow, Filter: iptables.New(f, node.ipset, node.nf), Dummy: node.dummy, Conntrack: conntracktest.NewFake()}, nil
	}
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = 30 * time.Second
	d := startDaemon(t, cfg, zaptest.NewLogger(t), deps)

	// Step the clock until the periodic full sync starts reading the table.
	slow.slow.Store(true)
	for started := false; !started; {
		clk.Step(time.Second)
		select {
		case <-slow.reading:
			started = true
		case <-time.After(20 * time.Millisecond): // the runner may not have armed its timer yet
		}
	}

	// What a fresh node's first sync of the changed objects programs.
	svcs, slices = stallObjects(true)
	ref := newFakeNode()
	runUntilSyncedOn(t, ref, svcs, slices)
	wantIPVS, err := ref.ipvs.Dump()
	if err != nil {
		t.Fatal(err)
	}

	changedAt := clk.Now()
	src.Set(svcs, slices, nil, false)
	programmed := func() (bool, string) {
		dump, _ := node.ipvs.Dump()
		return dump == wantIPVS, "IPVS:\n" + dump + "want:\n" + wantIPVS
	}
	// Give the change up to 5 s to be programmed while the read is held, then release the
	// read so that it is programmed in any case. The wait is read before the release: the
	// release steps the clock by slowTableRead (from the reader's goroutine, at any time).
	// A change programmed only after the release waited at least that.
	_, heldErr := poll.Wait(5*time.Second, "the change to be programmed during the read", programmed)
	waited := clk.Since(changedAt)
	close(slow.release)
	poll.Until(t, waitLimit, "the change to be programmed", programmed)
	if heldErr != nil {
		waited = clk.Since(changedAt)
	}
	if waited > stallBound {
		t.Errorf("the endpoint change waited %v (injected clock) behind a periodic full sync whose table read took %v; bound %v",
			waited, slowTableRead, stallBound)
	}
	poll.Until(t, waitLimit, "the periodic full sync to end", fullSyncs(t, reg, 2))
	slow.slow.Store(false)
	if err := d.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}

	if got, want := node.wholeDump(t), ref.wholeDump(t); got != want {
		t.Errorf("kernel after the periodic full sync:\n%s\nwant (a fresh node's first sync of the same objects):\n%s", got, want)
	}
	if got := counter(t, reg, "kipvs_kernel_drift_repaired_total"); got != 0 {
		t.Errorf("drift repaired = %v: the full sync took the change made during its read for drift", got)
	}
	if got := counter(t, reg, "kipvs_sync_errors_total"); got != 0 {
		t.Errorf("sync errors = %v: a plan computed from the stale copy failed", got)
	}
}

// A daemon told to stop while its periodic full sync reads the kernel stops without
// waiting for the read's end (at 50,000 Services under qemu TCG the read takes a minute,
// longer than a pod's default termination grace period of 30 s).
func TestStopDuringPeriodicRead(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	slow := &slowIPVS{Fake: node.ipvs, clk: clk, reading: make(chan struct{}), release: make(chan struct{})}
	src := newMemSource("node-a")
	svcs, slices := stallObjects(false)
	src.Set(svcs, slices, nil, false)
	deps := node.deps(src, prometheus.NewRegistry())
	deps.Clock = clk
	deps.IPVS = slow
	deps.Kernel = func(f inet.Family) (reconcile.Kernel, error) {
		return reconcile.Kernel{IPVS: slow, Filter: iptables.New(f, node.ipset, node.nf), Dummy: node.dummy, Conntrack: conntracktest.NewFake()}, nil
	}
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = 30 * time.Second
	d := startDaemon(t, cfg, zaptest.NewLogger(t), deps)
	slow.slow.Store(true)
	for started := false; !started; {
		clk.Step(time.Second)
		select {
		case <-slow.reading:
			started = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The read is held (never released): stop must not wait for it.
	stopped := make(chan error, 1)
	go func() { stopped <- d.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(slow.release) // let the test end
		<-stopped
		t.Fatal("the daemon did not stop while its periodic full sync read the kernel")
	}
}

// runUntilSyncedOn runs a daemon over node and a memSource holding the objects until its
// first sync ends.
func runUntilSyncedOn(t *testing.T, node *fakeNode, svcs []*v1.Service, slices []*discoveryv1.EndpointSlice) {
	t.Helper()
	src := newMemSource("node-a")
	src.Set(svcs, slices, nil, false)
	if err := startDaemon(t, testConfig(t), zaptest.NewLogger(t), node.deps(src, prometheus.NewRegistry())).stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// passObjects is the node of TestChangeProgrammedBetweenPassSteps: many Services, so that
// its periodic full sync takes many steps; changed adds an endpoint to the first.
func passObjects(changed bool) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	var svcs []*v1.Service
	var slices []*discoveryv1.EndpointSlice
	for i := range 60 {
		eps := []string{fmt.Sprintf("10.244.1.%d", 10+i), fmt.Sprintf("10.244.2.%d", 10+i)}
		if changed && i == 0 {
			eps = append(eps, "10.244.3.10")
		}
		svc, sl := stallService(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.1.%d", 10+i), eps...)
		svcs, slices = append(svcs, svc), append(slices, sl)
	}
	return svcs, slices
}

// The periodic full sync compares and repairs the node in steps, holding the daemon lock
// for at most chunk objects at a time whatever the number of Services; an endpoint
// change that comes while it is half-way is programmed before it goes on (not after the
// whole comparison), and the full sync then ends where a fresh node's first sync of the
// same objects ends, undoing nothing and taking nothing for drift.
func TestChangeProgrammedBetweenPassSteps(t *testing.T) {
	const chunk = 4
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	svcs, slices := passObjects(false)
	src.Set(svcs, slices, nil, false)
	reg := prometheus.NewRegistry()
	deps := node.deps(src, reg)
	deps.Clock = clk
	var (
		mu       sync.Mutex
		steps    []int // objects compared by each step
		copies   []int // keys copied by each step that copied some (Pass.Collect)
		lastDone int
		lastHeld int
		compared bool
		paused   = make(chan struct{}, 1)
		resume   = make(chan struct{})
	)
	stepped := func(passes []*reconcile.Pass) {
		done, total, held := 0, 0, 0
		for _, p := range passes {
			d, n := p.Progress()
			done, total, held = done+d, total+n, held+p.Collected()
		}
		mu.Lock()
		if done < lastDone { // a pass of its own: the next periodic full sync
			lastDone, lastHeld = 0, 0
		}
		if held > lastHeld {
			copies = append(copies, held-lastHeld)
		}
		lastHeld = held
		if done > lastDone {
			steps = append(steps, done-lastDone)
		}
		lastDone = done
		first := done > 0 && !compared
		compared = compared || done > 0
		mu.Unlock()
		if first && total > 2*chunk {
			paused <- struct{}{}
			<-resume // half-way (the lock released): the change below runs now
		}
	}
	cfg := testConfig(t)
	cfg.IPVS.SyncPeriod = 30 * time.Second
	d := newDaemon(t, cfg, zaptest.NewLogger(t), deps)
	d.pace = passPace{chunk: chunk, stepped: stepped}
	d.start(t)

	for i, started := 0, false; !started; i++ {
		if i == 500 {
			t.Fatal("no periodic full sync went in steps in 500 s of the injected clock")
		}
		clk.Step(time.Second)
		select {
		case <-paused:
			started = true
		case <-time.After(20 * time.Millisecond): // the runner may not have armed its timer yet
		}
	}

	svcs, slices = passObjects(true)
	ref := newFakeNode()
	runUntilSyncedOn(t, ref, svcs, slices)
	wantIPVS, err := ref.ipvs.Dump()
	if err != nil {
		t.Fatal(err)
	}
	src.Set(svcs, slices, nil, false)
	_, heldErr := poll.Wait(5*time.Second, "the change to be programmed between two steps", func() (bool, string) {
		dump, _ := node.ipvs.Dump()
		return dump == wantIPVS, "IPVS:\n" + dump + "want:\n" + wantIPVS
	})
	if heldErr != nil {
		t.Errorf("the endpoint change was not programmed while the periodic full sync was between two steps: %v", heldErr)
	}
	close(resume)
	poll.Until(t, waitLimit, "the periodic full sync to end", fullSyncs(t, reg, 2))
	if err := d.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	total, copied := 0, 0
	for i, n := range steps {
		total += n
		if n > chunk {
			t.Errorf("step %d compared %d objects under the lock; the bound is %d", i, n, chunk)
		}
	}
	// The keys a pass compares are copied under the lock chunk at a time too, from its
	// beginning (BeginPass copies none).
	for i, n := range copies {
		copied += n
		if n > chunk {
			t.Errorf("copy %d took %d keys under the lock; the bound is %d", i, n, chunk)
		}
	}
	if copied < 240 {
		t.Errorf("%d keys copied in steps (BeginPass copies none); want every object's of the node", copied)
	}
	// 60 virtual servers, 60 cluster IP and 60 VIP set members, 60 addresses.
	if total < 240 || len(steps) < total/chunk {
		t.Errorf("%d steps compared %d objects: want every object of the node, %d at a time", len(steps), total, chunk)
	}
	if got, want := node.wholeDump(t), ref.wholeDump(t); got != want {
		t.Errorf("kernel after the periodic full sync:\n%s\nwant (a fresh node's first sync of the same objects):\n%s", got, want)
	}
	if got := counter(t, reg, "kipvs_kernel_drift_repaired_total"); got != 0 {
		t.Errorf("drift repaired = %v: the full sync took the change made between its steps for drift", got)
	}
	if got := counter(t, reg, "kipvs_sync_errors_total"); got != 0 {
		t.Errorf("sync errors = %v", got)
	}
}
