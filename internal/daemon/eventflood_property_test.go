package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// The event-flood property test (issue 23, finding 4). For each seed it generates a run of
// hostile Services (floods of bad externalIPs and load balancer IPs of several kinds, from
// none to hundreds per Service, changing at every step, so problems come, go and come back),
// syncs, steps of the injected clock and kipvs restarts, driven through the daemon's own
// sync. The invariants, per (object, reason) and per daemon lifetime:
//   - bounded: two Events are at least EventInterval apart on the injected clock;
//   - counted: the counts the Events carry add up to at most the problems the daemon logged
//     (one by one, or counted past the first of a Service in one sync),
//     and, in the last lifetime, after the interval has passed and a final flush, exactly
//     to them (nothing is lost, only aggregated).
const (
	floodSeeds = 30
	floodSteps = 25
)

// floodKinds are the bad address kinds a hostile Service carries, each with its reason.
var floodKinds = []struct {
	reason string
	addr   func(i int) string
	lb     bool // a load balancer ingress IP rather than an externalIP
}{
	{"UnusableExternalIP", func(i int) string { return fmt.Sprintf("239.2.%d.%d", i/250, i%250+1) }, false},
	{"InvalidExternalIP", func(i int) string { return "bad-" + strconv.Itoa(i) }, false},
	{"ExternalIPIsNodeAddress", func(int) string { return "192.168.1.10" }, false},
	{"UnusableLoadBalancerIP", func(i int) string { return fmt.Sprintf("224.3.%d.%d", i/250, i%250+1) }, true},
}

// floodGenService draws a Service of slot i with zero to hundreds of bad addresses.
func floodGenService(rng *rand.Rand, i int) *v1.Service {
	svc, _ := stallService(fmt.Sprintf("hostile-%d", i), fmt.Sprintf("10.96.1.%d", 10+i))
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.Ports[0].NodePort = int32(30100 + i)
	for range rng.IntN(3) {
		k := floodKinds[rng.IntN(len(floodKinds))]
		n := []int{1, 2, 7, 60, 400}[rng.IntN(5)]
		off := rng.IntN(50)
		for j := range n {
			if k.lb {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: k.addr(off + j)})
			} else {
				svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, k.addr(off+j))
			}
		}
	}
	return svc
}

// floodEvents records the Events the daemon sends, stamped with the injected clock.
type floodEvents struct {
	clk    *clocktesting.FakeClock
	events []floodEvent
}

type floodEvent struct {
	key   string // "namespace/name reason"
	at    time.Time
	count int
}

func (e *floodEvents) Warn(svc types.NamespacedName, reason, msg string) {
	count := 1
	if n, rest, ok := strings.Cut(msg, " problems (at most one Event per "); ok && !strings.Contains(n, " ") && rest != "" {
		count, _ = strconv.Atoi(n)
	}
	e.events = append(e.events, floodEvent{key: svc.String() + " " + reason, at: e.clk.Now(), count: count})
}

func (e *floodEvents) WarnNode(node, reason, msg string) {
	e.events = append(e.events, floodEvent{key: "Node/" + node + " " + reason, at: e.clk.Now(), count: 1})
}

func (e *floodEvents) StartNode(node, _, reason, _ string) {
	e.events = append(e.events, floodEvent{key: "Node/" + node + " " + reason, at: e.clk.Now(), count: 1})
}

func TestEventFloodProperty(t *testing.T) {
	for seed := uint64(1); seed <= floodSeeds; seed++ {
		if err := floodRun(seed); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// floodRun runs one seed and returns the first broken invariant.
func floodRun(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x666c6f6f64))
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	node := newFakeNode()
	src := newMemSource("node-a")
	nodeObj := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	services := map[int]*v1.Service{}
	set := func() {
		var svcs []*v1.Service
		for i := range 6 {
			if s := services[i]; s != nil {
				svcs = append(svcs, s.DeepCopy())
			}
		}
		src.Set(svcs, []*discoveryv1.EndpointSlice{}, nodeObj, false)
	}
	set()

	var (
		d      *Daemon
		ev     *floodEvents
		logs   *observer.ObservedLogs
		trace  []string
		checks []func(last bool) error
	)
	start := func() error {
		core, l := observer.New(zapcore.WarnLevel)
		ev, logs = &floodEvents{clk: clk}, l
		deps := node.deps(src, prometheus.NewRegistry())
		deps.Clock, deps.Events = clk, ev
		cfg := testConfig(nil) // it does not use its T
		var err error
		if d, err = New(cfg, "node-a", zap.New(core), deps); err != nil {
			return err
		}
		life := len(checks)
		evs, lg := ev, logs
		checks = append(checks, func(last bool) error { return floodCheck(life, evs, lg, last) })
		return d.sync(context.Background(), true)
	}
	if err := start(); err != nil {
		return err
	}
	for range floodSteps {
		var err error
		switch r := rng.IntN(100); {
		case r < 45:
			i := rng.IntN(6)
			services[i] = floodGenService(rng, i)
			set()
			trace = append(trace, fmt.Sprintf("set hostile-%d (%d externalIPs, %d ingress)", i, len(services[i].Spec.ExternalIPs), len(services[i].Status.LoadBalancer.Ingress)))
			err = d.sync(context.Background(), false)
		case r < 55:
			i := rng.IntN(6)
			delete(services, i)
			set()
			trace = append(trace, fmt.Sprintf("delete hostile-%d", i))
			err = d.sync(context.Background(), false)
		case r < 85:
			step := []time.Duration{time.Second, 10 * time.Second, EventInterval - time.Second, EventInterval, 5 * time.Minute}[rng.IntN(5)]
			clk.Step(step)
			trace = append(trace, "clock +"+step.String())
			if rng.IntN(2) == 0 {
				d.events.flush() // the ticker
				trace = append(trace, "tick")
			}
		case r < 93:
			trace = append(trace, "full sync")
			err = d.sync(context.Background(), true)
		default:
			trace = append(trace, "restart")
			d.hc.Close()
			err = start()
		}
		if err != nil {
			return fmt.Errorf("%v\nsteps:\n%s", err, strings.Join(trace, "\n"))
		}
	}
	clk.Step(EventInterval)
	d.events.flush()
	d.hc.Close()
	for i, check := range checks {
		if err := check(i == len(checks)-1); err != nil {
			return fmt.Errorf("%v\nsteps:\n%s", err, strings.Join(trace, "\n"))
		}
	}
	return nil
}

// floodCheck checks one daemon lifetime's Events against the problems it logged.
func floodCheck(life int, ev *floodEvents, logs *observer.ObservedLogs, last bool) error {
	logged := map[string]int{}
	for _, e := range logs.FilterMessage("service cannot be programmed as written").All() {
		m := e.ContextMap()
		logged[fmt.Sprint(m["service"])+" "+fmt.Sprint(m["reason"])]++
	}
	// Past the first problems of a Service in one report, the log has their count.
	for _, e := range logs.FilterMessage(moreProblemsMessage).All() {
		m := e.ContextMap()
		n, _ := m["more"].(int64)
		logged[fmt.Sprint(m["service"])+" "+fmt.Sprint(m["reason"])] += int(n)
	}
	sent := map[string]int{}
	lastAt := map[string]time.Time{}
	for _, e := range ev.events {
		if at, ok := lastAt[e.key]; ok && e.at.Sub(at) < EventInterval {
			return fmt.Errorf("lifetime %d: two Events on %s %v apart (at most one per %v)", life, e.key, e.at.Sub(at), EventInterval)
		}
		lastAt[e.key] = e.at
		sent[e.key] += e.count
	}
	for k, n := range sent {
		if n > logged[k] {
			return fmt.Errorf("lifetime %d: Events on %s count %d problems, the daemon logged %d", life, k, n, logged[k])
		}
	}
	if last {
		for k, n := range logged {
			if sent[k] != n {
				return fmt.Errorf("last lifetime: %d problems logged on %s, Events count %d", n, k, sent[k])
			}
		}
	}
	return nil
}
