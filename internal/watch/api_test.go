package watch

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/testutil/poll"
	"github.com/kipvs/kipvs/internal/watch/watchtest"
)

// fakeAPI wraps a fake clientset and records which resources are being watched, so tests
// mutate objects only once the informers' watches exist (the fake has no resourceVersions,
// so a change made between an informer's list and its watch would be lost).
type fakeAPI struct {
	client   *fake.Clientset
	mu       sync.Mutex
	watching map[string]bool
}

func newFakeAPI(objs ...runtime.Object) *fakeAPI {
	f := &fakeAPI{client: fake.NewClientset(objs...), watching: map[string]bool{}}
	f.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		f.mu.Lock()
		f.watching[a.GetResource().Resource] = true
		f.mu.Unlock()
		return false, nil, nil // the default reactor creates the watch, under the same lock
	})
	return f
}

// serveServiceCIDRs makes discovery report networking.k8s.io/v1 with servicecidrs.
func (f *fakeAPI) serveServiceCIDRs() {
	f.client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "networking.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}, {Name: "servicecidrs", Kind: "ServiceCIDR"}},
	}}
}

func (f *fakeAPI) waitWatching(t *testing.T, resources ...string) {
	t.Helper()
	poll.Until(t, 10*time.Second, "watches on "+strings.Join(resources, ","), func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range resources {
			if !f.watching[r] {
				return false, fmt.Sprintf("watching %v", f.watching)
			}
		}
		return true, ""
	})
}

func startAPISource(t *testing.T, f *fakeAPI) *APISource {
	t.Helper()
	return startAPISourceWith(t, f, nil)
}

// startAPISourceWith is startAPISource with options changed by mod (if not nil).
func startAPISourceWith(t *testing.T, f *fakeAPI, mod func(*APISourceOptions)) *APISource {
	t.Helper()
	opts := APISourceOptions{
		Client: f.client, NodeName: "n1", ResyncPeriod: time.Hour,
		Logger: zaptest.NewLogger(t), Clock: clocktesting.NewFakePassiveClock(t0),
	}
	if mod != nil {
		mod(&opts)
	}
	src, err := NewAPISource(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		watchtest.Recv(t, "Done()", src.Done())
	})
	if err := src.Start(ctx); err != nil {
		t.Fatal(err)
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	if err := src.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return src
}

// accumulated merges successive Pending results.
type accumulated struct {
	services    map[types.NamespacedName]*ServiceInfo
	svcEv, epEv int
	nodeChanged bool
	node        *v1.Node
	cidrs       ServiceCIDRs
	triggers    int
}

// collectUntil consumes Changed/Pending until the merged dirty records read as want (see
// describe) and done (if given) holds, or fails after a deadline.
func collectUntil(t *testing.T, src Source, want []string, done func(a *accumulated) bool) *accumulated {
	t.Helper()
	acc := &accumulated{services: map[types.NamespacedName]*ServiceInfo{}}
	if want == nil {
		want = []string{}
	}
	deadline := time.After(10 * time.Second)
	for {
		ch, err := src.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range ch.Services {
			acc.services[k] = r
		}
		acc.svcEv += ch.ServiceEvents
		acc.epEv += ch.EndpointEvents
		acc.nodeChanged = acc.nodeChanged || ch.NodeChanged
		acc.node = ch.Node
		acc.cidrs = ch.ServiceCIDRs
		for _, ts := range ch.TriggerTimes {
			acc.triggers += len(ts)
		}
		got := watchtest.Describe(acc.services)
		if got == nil {
			got = []string{}
		}
		if reflect.DeepEqual(got, want) && (done == nil || done(acc)) {
			return acc
		}
		select {
		case <-src.Changed():
		case <-deadline:
			t.Fatalf("timed out: pending changes %q, want %q", got, want)
		}
	}
}

func TestAPISourceInitialSyncAndFiltering(t *testing.T) {
	headlessSlice := mkSlice("ns", "headless-1", "headless", "10.0.0.3")
	headlessSlice.Labels[v1.IsHeadlessService] = ""
	otherSlice := mkSlice("ns", "other-1", "other", "10.0.0.4")
	otherSlice.Labels[LabelServiceProxyName] = "other"

	f := newFakeAPI(
		mkService("default", "kubernetes", "10.96.0.1"),
		mkService("ns", "a", "10.96.0.10"),
		mkSlice("ns", "a-1", "a", "10.0.0.1"),
		mkService("ns", "headless", v1.ClusterIPNone), // dropped client-side (the fake ignores field selectors)
		headlessSlice,
		mkService("ns", "other", "10.96.0.11", withLabel(LabelServiceProxyName, "other")), // dropped server-side
		otherSlice,
		mkService("ns", "ext", "", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.ExternalName = "example.com" }),
		mkSlice("ns", "later-1", "later", "10.0.0.5"), // its Service comes after sync
		mkNode("n1", map[string]string{"topology.kubernetes.io/zone": "z1"}, "10.244.1.0/24"),
		mkNode("n2", nil, "10.244.2.0/24"),
	)
	src := startAPISource(t, f)
	if !src.Synced() {
		t.Fatal("not Synced() after WaitForSync")
	}
	snap, err := src.All()
	if err != nil {
		t.Fatal(err)
	}
	watchtest.AssertLines(t, "All()", watchtest.Describe(snap.Services), []string{
		"default/kubernetes -> 10.96.0.1[]",
		"ns/a -> 10.96.0.10[a-1:10.0.0.1]",
	})
	if snap.Node == nil || snap.Node.Name != "n1" {
		t.Errorf("Node = %v, want n1", snap.Node)
	}
	wantCIDRs := ServiceCIDRs{Origin: ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}
	if !reflect.DeepEqual(snap.ServiceCIDRs, wantCIDRs) {
		t.Errorf("ServiceCIDRs = %+v, want %+v", snap.ServiceCIDRs, wantCIDRs)
	}

	f.waitWatching(t, "services", "endpointslices", "nodes")
	if _, err := f.client.CoreV1().Services("ns").Create(context.Background(), mkService("ns", "later", "10.96.0.12"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	collectUntil(t, src, []string{"ns/later -> 10.96.0.12[later-1:10.0.0.5]"}, nil)
}

func TestAPISourceEvents(t *testing.T) {
	f := newFakeAPI(mkNode("n1", map[string]string{"zone": "z1"}), mkNode("n2", nil))
	src := startAPISource(t, f)
	f.waitWatching(t, "services", "endpointslices", "nodes")
	ctx := context.Background()
	svcs := f.client.CoreV1().Services("ns")
	slices := f.client.DiscoveryV1().EndpointSlices("ns")
	fresh := withTrigger(mkSlice("ns", "a-1", "a", "10.0.0.2"), t0.Add(time.Hour))

	steps := []struct {
		name string
		do   func() error
		want []string
		done func(a *accumulated) bool
	}{
		{
			name: "service created",
			do: func() error {
				_, err := svcs.Create(ctx, mkService("ns", "a", "10.96.0.1"), metav1.CreateOptions{})
				return err
			},
			want: []string{"ns/a -> 10.96.0.1[]"},
			done: func(a *accumulated) bool { return a.svcEv == 1 && a.epEv == 0 },
		},
		{
			name: "slice created",
			do: func() error {
				_, err := slices.Create(ctx, mkSlice("ns", "a-1", "a", "10.0.0.1"), metav1.CreateOptions{})
				return err
			},
			want: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
			done: func(a *accumulated) bool { return a.svcEv == 0 && a.epEv == 1 },
		},
		{
			name: "slice updated, with a trigger time",
			do:   func() error { _, err := slices.Update(ctx, fresh, metav1.UpdateOptions{}); return err },
			want: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2]"},
			done: func(a *accumulated) bool { return a.epEv == 1 && a.triggers == 1 },
		},
		{
			name: "second slice for another service arrives before it",
			do: func() error {
				_, err := slices.Create(ctx, mkSlice("ns", "b-1", "b", "10.0.0.9"), metav1.CreateOptions{})
				if err != nil {
					return err
				}
				_, err = svcs.Create(ctx, mkService("ns", "b", "10.96.0.2"), metav1.CreateOptions{})
				return err
			},
			want: []string{"ns/b -> 10.96.0.2[b-1:10.0.0.9]"},
		},
		{
			name: "service gains the service-proxy-name label: deleted",
			do: func() error {
				_, err := svcs.Update(ctx, mkService("ns", "a", "10.96.0.1", withLabel(LabelServiceProxyName, "x")), metav1.UpdateOptions{})
				return err
			},
			want: []string{"ns/a -> <deleted>"},
		},
		{
			name: "service loses the label: back, with its slice",
			do: func() error {
				_, err := svcs.Update(ctx, mkService("ns", "a", "10.96.0.1"), metav1.UpdateOptions{})
				return err
			},
			want: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2]"},
		},
		{
			name: "service turns ExternalName: deleted",
			do: func() error {
				_, err := svcs.Update(ctx, mkService("ns", "b", "10.96.0.2", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName }), metav1.UpdateOptions{})
				return err
			},
			want: []string{"ns/b -> <deleted>"},
		},
		{
			name: "slice deleted",
			do:   func() error { return slices.Delete(ctx, "a-1", metav1.DeleteOptions{}) },
			want: []string{"ns/a -> 10.96.0.1[]"},
			done: func(a *accumulated) bool { return a.epEv == 1 && a.triggers == 0 },
		},
		{
			name: "service deleted",
			do:   func() error { return svcs.Delete(ctx, "a", metav1.DeleteOptions{}) },
			want: []string{"ns/a -> <deleted>"},
		},
		{
			name: "other node changes are ignored, ours is reported",
			do: func() error {
				if _, err := f.client.CoreV1().Nodes().Update(ctx, mkNode("n2", map[string]string{"zone": "z9"}), metav1.UpdateOptions{}); err != nil {
					return err
				}
				_, err := f.client.CoreV1().Nodes().Update(ctx, mkNode("n1", map[string]string{"zone": "z2"}), metav1.UpdateOptions{})
				return err
			},
			want: nil,
			done: func(a *accumulated) bool {
				return a.nodeChanged && a.node != nil && a.node.Name == "n1" && a.node.Labels["zone"] == "z2"
			},
		},
		{
			name: "our node deleted",
			do:   func() error { return f.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}) },
			want: nil,
			done: func(a *accumulated) bool { return a.nodeChanged && a.node == nil },
		},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		acc := collectUntil(t, src, st.want, st.done)
		if st.done != nil && !st.done(acc) {
			t.Errorf("%s: accumulated %+v", st.name, acc)
		}
	}
	if src.Node() != nil {
		t.Errorf("Node() = %v after deletion", src.Node())
	}
}

func TestAPISourceNotSyncedUntilListsComplete(t *testing.T) {
	f := newFakeAPI(mkService("ns", "a", "10.96.0.1"), mkSlice("ns", "a-1", "a", "10.0.0.1"))
	listing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	f.client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listing) })
		<-release
		return false, nil, nil
	})
	src, err := NewAPISource(APISourceOptions{Client: f.client, NodeName: "n1", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		watchtest.Recv(t, "Done()", src.Done())
	})
	if err := src.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx); err == nil {
		t.Error("second Start succeeded")
	}
	watchtest.Recv(t, "EndpointSlice list", listing)

	// The Service may well be in the cache already; nothing may be handed out.
	if src.Synced() {
		t.Fatal("Synced() while a list is outstanding")
	}
	if _, err := src.Pending(); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Pending() = %v, want ErrNotSynced", err)
	}
	if _, err := src.All(); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("All() = %v, want ErrNotSynced", err)
	}
	if len(src.Changed()) != 0 {
		t.Fatal("Changed() fired before sync")
	}
	expired, expiredCancel := context.WithCancel(ctx)
	expiredCancel()
	if err := src.WaitForSync(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForSync(cancelled) = %v", err)
	}

	close(release)
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	if err := src.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	watchtest.Recv(t, "sync signal", src.Changed())
	snap, err := src.All()
	if err != nil {
		t.Fatal(err)
	}
	// A complete view: the Service with its slice, never the Service alone.
	watchtest.AssertLines(t, "All()", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"})
}

func TestAPISourceServiceCIDRs(t *testing.T) {
	kube := mkService("default", "kubernetes", "10.96.0.1")
	obj := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	fallback := ServiceCIDRs{Origin: ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}

	tests := []struct {
		name  string
		setup func(f *fakeAPI)
		want  ServiceCIDRs
		// watched: the ServiceCIDR informer runs, so a new object is picked up.
		watched bool
	}{
		{
			name:  "API served",
			setup: (*fakeAPI).serveServiceCIDRs,
			want: ServiceCIDRs{
				Origin:               ServiceCIDRsFromAPI,
				CIDRs:                []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
				KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			},
			watched: true,
		},
		{
			name:  "group version not served",
			setup: func(*fakeAPI) {},
			want:  fallback,
		},
		{
			name: "group version served without servicecidrs",
			setup: func(f *fakeAPI) {
				f.client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
					GroupVersion: "networking.k8s.io/v1",
					APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}},
				}}
			},
			want: fallback,
		},
		{
			name: "discovery fails",
			setup: func(f *fakeAPI) {
				f.serveServiceCIDRs()
				f.client.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			},
			want: fallback,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(kube, obj("kubernetes", "10.96.0.0/12"))
			tc.setup(f)
			src := startAPISource(t, f)
			if got := src.ServiceCIDRs(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ServiceCIDRs() = %+v, want %+v", got, tc.want)
			}
			if !tc.watched {
				return
			}
			if _, err := src.All(); err != nil { // check out the initial state
				t.Fatal(err)
			}
			f.waitWatching(t, "servicecidrs")
			if _, err := f.client.NetworkingV1().ServiceCIDRs().Create(context.Background(), obj("extra", "fd00:96::/108"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			acc := collectUntil(t, src, nil, func(a *accumulated) bool { return len(a.cidrs.CIDRs) == 2 })
			want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
			if !reflect.DeepEqual(acc.cidrs.CIDRs, want) {
				t.Errorf("CIDRs = %v, want %v", acc.cidrs.CIDRs, want)
			}
		})
	}
}

// Discovery that fails at start (the apiserver is not reachable yet) is retried with
// backoff until it answers. When the answer is "served", the source switches to the
// ServiceCIDR objects and watches them; when it is "not served", it stops asking.
func TestAPISourceServiceCIDRDiscoveryRetried(t *testing.T) {
	kube := mkService("default", "kubernetes", "10.96.0.1")
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	fallback := ServiceCIDRs{Origin: ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}
	for _, served := range []bool{true, false} {
		t.Run(fmt.Sprintf("served=%t", served), func(t *testing.T) {
			f := newFakeAPI(kube, cidr("kubernetes", "10.96.0.0/12"))
			if served {
				f.serveServiceCIDRs()
			}
			var mu sync.Mutex
			calls := 0 // the discovery at start and the first retry fail
			f.client.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls <= 2 {
					return true, nil, errors.New("connection refused")
				}
				return false, nil, nil
			})
			clk := clocktesting.NewFakeClock(t0)
			src := startAPISourceWith(t, f, func(o *APISourceOptions) { o.RetryClock = clk })
			if got := src.ServiceCIDRs(); !reflect.DeepEqual(got, fallback) {
				t.Fatalf("ServiceCIDRs() while discovery fails = %+v, want %+v", got, fallback)
			}
			if _, err := src.All(); err != nil { // check out the initial state
				t.Fatal(err)
			}
			// Backoff: 1 s before the first retry (which fails), 2 s before the second.
			for _, d := range []time.Duration{time.Second, 2 * time.Second} {
				poll.Until(t, 10*time.Second, "a discovery retry timer", watchtest.ClockWaiting(clk))
				clk.Step(d - time.Millisecond)
				if !clk.HasWaiters() {
					t.Fatalf("retried before %v", d)
				}
				clk.Step(time.Millisecond)
			}
			if !served {
				poll.Until(t, 10*time.Second, "the discovery that answers", func() (bool, string) {
					mu.Lock()
					defer mu.Unlock()
					return calls == 3, fmt.Sprintf("%d discovery calls", calls)
				})
				if got := src.ServiceCIDRs(); !reflect.DeepEqual(got, fallback) {
					t.Fatalf("ServiceCIDRs() = %+v, want %+v", got, fallback)
				}
				return
			}
			want := ServiceCIDRs{
				Origin:               ServiceCIDRsFromAPI,
				CIDRs:                []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
				KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			}
			acc := collectUntil(t, src, nil, func(a *accumulated) bool { return reflect.DeepEqual(a.cidrs, want) })
			if !reflect.DeepEqual(acc.cidrs, want) {
				t.Fatalf("ServiceCIDRs after discovery answered = %+v, want %+v", acc.cidrs, want)
			}
			f.waitWatching(t, "servicecidrs")
			if _, err := f.client.NetworkingV1().ServiceCIDRs().Create(context.Background(), cidr("extra", "fd00:96::/108"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			acc = collectUntil(t, src, nil, func(a *accumulated) bool { return len(a.cidrs.CIDRs) == 2 })
			if want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}; !reflect.DeepEqual(acc.cidrs.CIDRs, want) {
				t.Errorf("CIDRs = %v, want %v", acc.cidrs.CIDRs, want)
			}
		})
	}
}

func TestNewAPISourceValidates(t *testing.T) {
	_, err := NewAPISource(APISourceOptions{ResyncPeriod: -time.Second})
	for _, want := range []string{"Client is required", "NodeName is required", "ResyncPeriod -1s is negative", "Logger is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewAPISource error %v does not mention %q", err, want)
		}
	}
}
