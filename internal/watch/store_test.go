package watch

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/watch/watchtest"
)

var t0 = time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)

func newTestStore(t *testing.T) *store {
	t.Helper()
	return newStore(zaptest.NewLogger(t), clocktesting.NewFakePassiveClock(t0))
}

func TestStoreChanges(t *testing.T) {
	type op func(s *store)
	setSvc := func(svc *v1.Service) op { return func(s *store) { s.setService(svc) } }
	delSvc := func(ns, name string) op { return func(s *store) { s.deleteService(nn(ns, name)) } }
	setSl := func(sl *discoveryv1.EndpointSlice) op { return func(s *store) { s.setSlice(sl) } }
	delSl := func(ns, name string) op { return func(s *store) { s.deleteSlice(nn(ns, name)) } }
	sameSvc := mkService("ns", "a", "10.96.0.1")

	fqdn := mkSlice("ns", "a-fqdn", "a", "example.com")
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	unlabelled := mkSlice("ns", "a-nolabel", "a", "10.0.0.9")
	delete(unlabelled.Labels, discoveryv1.LabelServiceName)
	headlessSlice := mkSlice("ns", "a-1", "a", "10.0.0.1")
	headlessSlice.Labels[v1.IsHeadlessService] = ""
	otherProxySlice := mkSlice("ns", "a-1", "a", "10.0.0.1")
	otherProxySlice.Labels[LabelServiceProxyName] = "other"

	tests := []struct {
		name        string
		setup       []op // applied and checked out before steps
		steps       []op
		wantPending []string
		wantSvcEv   int
		wantEpEv    int
		// PendingCounts counts Services, not events; nil: the same as the events.
		wantSvcPending, wantEpPending *int
		wantAll                       []string
	}{
		{
			name:        "service add without slices",
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1"))},
			wantPending: []string{"ns/a -> 10.96.0.1[]"},
			wantSvcEv:   1,
			wantAll:     []string{"ns/a -> 10.96.0.1[]"},
		},
		{
			name: "two updates of one service are two events and one pending Service",
			steps: []op{setSvc(mkService("ns", "a", "10.96.0.1")),
				setSvc(mkService("ns", "a", "10.96.0.1", withLabel("app", "x")))},
			wantPending:    []string{"ns/a -> 10.96.0.1[]"},
			wantSvcEv:      2,
			wantSvcPending: new(1),
			wantAll:        []string{"ns/a -> 10.96.0.1[]"},
		},
		{
			name:  "slice of an unknown service is kept but dirties nothing",
			steps: []op{setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
		},
		{
			name:        "slice arriving before its service is found by the service add",
			setup:       []op{setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1"))},
			wantPending: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
			wantSvcEv:   1,
			wantAll:     []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
		},
		{
			name:        "slice update of a proxied service",
			setup:       []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:       []op{setSl(mkSlice("ns", "a-1", "a", "10.0.0.2", "10.0.0.3"))},
			wantPending: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2,10.0.0.3]"},
			wantEpEv:    1,
			wantAll:     []string{"ns/a -> 10.96.0.1[a-1:10.0.0.2,10.0.0.3]"},
		},
		{
			name:  "slices are sorted by name and other services stay clean",
			setup: []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSvc(mkService("ns", "b", "10.96.0.2"))},
			steps: []op{
				setSl(mkSlice("ns", "a-z", "a", "10.0.0.26")),
				setSl(mkSlice("ns", "a-b", "a", "10.0.0.2")),
				setSl(mkSlice("ns", "a-m", "a", "10.0.0.13")),
			},
			wantPending:   []string{"ns/a -> 10.96.0.1[a-b:10.0.0.2 a-m:10.0.0.13 a-z:10.0.0.26]"},
			wantEpEv:      3,
			wantEpPending: new(1), // three slice events, one Service
			wantAll:       []string{"ns/a -> 10.96.0.1[a-b:10.0.0.2 a-m:10.0.0.13 a-z:10.0.0.26]", "ns/b -> 10.96.0.2[]"},
		},
		{
			name:        "service gaining the service-proxy-name label is a deletion",
			setup:       []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1", withLabel(LabelServiceProxyName, "other")))},
			wantPending: []string{"ns/a -> <deleted>"},
			wantSvcEv:   1,
		},
		{
			name: "service losing the label is proxied again with the slices kept meanwhile",
			setup: []op{
				setSvc(mkService("ns", "a", "10.96.0.1", withLabel(LabelServiceProxyName, ""))),
				setSl(mkSlice("ns", "a-1", "a", "10.0.0.1")),
			},
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1"))},
			wantPending: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
			wantSvcEv:   1,
			wantAll:     []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
		},
		{
			name:  "headless service (clusterIP None) is skipped",
			steps: []op{setSvc(mkService("ns", "a", v1.ClusterIPNone))},
		},
		{
			name:  "service without a clusterIP is skipped",
			steps: []op{setSvc(mkService("ns", "a", ""))},
		},
		{
			name: "ExternalName service is skipped even with a clusterIP",
			steps: []op{setSvc(mkService("ns", "a", "10.96.0.1", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
			}))},
		},
		{
			name:  "service labelled headless is skipped",
			steps: []op{setSvc(mkService("ns", "a", "10.96.0.1", withLabel(v1.IsHeadlessService, "")))},
		},
		{
			name:        "service turning headless is a deletion",
			setup:       []op{setSvc(mkService("ns", "a", "10.96.0.1"))},
			steps:       []op{setSvc(mkService("ns", "a", v1.ClusterIPNone))},
			wantPending: []string{"ns/a -> <deleted>"},
			wantSvcEv:   1,
		},
		{
			name:           "service deletion keeps its slices for a later re-add",
			setup:          []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:          []op{delSvc("ns", "a"), setSvc(mkService("ns", "a", "10.96.0.7"))},
			wantPending:    []string{"ns/a -> 10.96.0.7[a-1:10.0.0.1]"},
			wantSvcEv:      2,
			wantSvcPending: new(1),
			wantAll:        []string{"ns/a -> 10.96.0.7[a-1:10.0.0.1]"},
		},
		{
			name:        "service added and deleted between two calls is reported deleted",
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1")), delSvc("ns", "a")},
			wantPending: []string{"ns/a -> <deleted>"},
			wantSvcEv:   2,
			// One Service; kube-proxy nets a create and delete before its sync out to 0
			// (differences.yaml pending-changes-net).
			wantSvcPending: new(1),
		},
		{
			name:  "deleting an unknown service is not a change",
			steps: []op{delSvc("ns", "nope"), delSl("ns", "nope-1")},
		},
		{
			name: "slice deletion",
			setup: []op{
				setSvc(mkService("ns", "a", "10.96.0.1")),
				setSl(mkSlice("ns", "a-1", "a", "10.0.0.1")),
				setSl(mkSlice("ns", "a-2", "a", "10.0.0.2")),
			},
			steps:       []op{delSl("ns", "a-1")},
			wantPending: []string{"ns/a -> 10.96.0.1[a-2:10.0.0.2]"},
			wantEpEv:    1,
			wantAll:     []string{"ns/a -> 10.96.0.1[a-2:10.0.0.2]"},
		},
		{
			name: "slice moving to another service dirties both",
			setup: []op{
				setSvc(mkService("ns", "a", "10.96.0.1")),
				setSvc(mkService("ns", "b", "10.96.0.2")),
				setSl(mkSlice("ns", "x", "a", "10.0.0.1")),
			},
			steps:         []op{setSl(mkSlice("ns", "x", "b", "10.0.0.1"))},
			wantPending:   []string{"ns/a -> 10.96.0.1[]", "ns/b -> 10.96.0.2[x:10.0.0.1]"},
			wantEpEv:      1,
			wantEpPending: new(2), // one event, both Services' endpoints changed
			wantAll:       []string{"ns/a -> 10.96.0.1[]", "ns/b -> 10.96.0.2[x:10.0.0.1]"},
		},
		{
			name:  "resync with the same object is not a change",
			setup: []op{setSvc(sameSvc)},
			steps: []op{setSvc(sameSvc)},
			wantAll: []string{
				"ns/a -> 10.96.0.1[]",
			},
		},
		{
			name:        "same resourceVersion is not a change, a new one is",
			setup:       []op{setSvc(mkService("ns", "a", "10.96.0.1", withRV("5")))},
			steps:       []op{setSvc(mkService("ns", "a", "10.96.0.1", withRV("5"))), setSvc(mkService("ns", "a", "10.96.0.1", withRV("6")))},
			wantPending: []string{"ns/a -> 10.96.0.1[]"},
			wantSvcEv:   1,
			wantAll:     []string{"ns/a -> 10.96.0.1[]"},
		},
		{
			name:    "equal content without resourceVersion is not a change",
			setup:   []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:   []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			wantAll: []string{"ns/a -> 10.96.0.1[a-1:10.0.0.1]"},
		},
		{
			name:        "slice gaining the headless label is removed",
			setup:       []op{setSvc(mkService("ns", "a", "10.96.0.1")), setSl(mkSlice("ns", "a-1", "a", "10.0.0.1"))},
			steps:       []op{setSl(headlessSlice)},
			wantPending: []string{"ns/a -> 10.96.0.1[]"},
			wantEpEv:    1,
			wantAll:     []string{"ns/a -> 10.96.0.1[]"},
		},
		{
			name:    "slices wanting another proxy, FQDN slices and unlabelled slices are ignored",
			setup:   []op{setSvc(mkService("ns", "a", "10.96.0.1"))},
			steps:   []op{setSl(otherProxySlice), setSl(fqdn), setSl(unlabelled)},
			wantAll: []string{"ns/a -> 10.96.0.1[]"},
		},
		{
			name:        "services are keyed by namespace too",
			setup:       []op{setSl(mkSlice("ns1", "a-1", "a", "10.0.0.1"))},
			steps:       []op{setSvc(mkService("ns2", "a", "10.96.0.2"))},
			wantPending: []string{"ns2/a -> 10.96.0.2[]"},
			wantSvcEv:   1,
			wantAll:     []string{"ns2/a -> 10.96.0.2[]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			s.markSynced()
			for _, o := range tc.setup {
				o(s)
			}
			if _, err := s.Pending(); err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.steps {
				o(s)
			}
			wantSv, wantEp := tc.wantSvcEv, tc.wantEpEv
			if tc.wantSvcPending != nil {
				wantSv = *tc.wantSvcPending
			}
			if tc.wantEpPending != nil {
				wantEp = *tc.wantEpPending
			}
			if sv, ep := s.PendingCounts(); sv != wantSv || ep != wantEp {
				t.Errorf("PendingCounts() = %d, %d; want %d, %d", sv, ep, wantSv, wantEp)
			}
			ch, err := s.Pending()
			if err != nil {
				t.Fatal(err)
			}
			watchtest.AssertLines(t, "Pending().Services", watchtest.Describe(ch.Services), tc.wantPending)
			if ch.ServiceEvents != tc.wantSvcEv || ch.EndpointEvents != tc.wantEpEv {
				t.Errorf("events = %d service, %d endpoint; want %d, %d", ch.ServiceEvents, ch.EndpointEvents, tc.wantSvcEv, tc.wantEpEv)
			}
			again, _ := s.Pending()
			if len(again.Services) != 0 || again.ServiceEvents != 0 || again.EndpointEvents != 0 {
				t.Errorf("second Pending() is not empty: %v", watchtest.Describe(again.Services))
			}
			snap, err := s.All()
			if err != nil {
				t.Fatal(err)
			}
			watchtest.AssertLines(t, "All().Services", watchtest.Describe(snap.Services), tc.wantAll)
		})
	}
}

func TestStoreNotSynced(t *testing.T) {
	s := newTestStore(t)
	s.setService(mkService("ns", "a", "10.96.0.1"))

	if s.Synced() {
		t.Fatal("Synced() before markSynced")
	}
	if _, err := s.Pending(); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Pending() before sync: err = %v, want ErrNotSynced", err)
	}
	if _, err := s.All(); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("All() before sync: err = %v, want ErrNotSynced", err)
	}
	if len(s.Changed()) != 0 {
		t.Fatal("Changed() fired before sync")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitForSync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForSync(cancelled) = %v, want context.Canceled", err)
	}

	s.markSynced()
	s.markSynced() // idempotent
	if err := s.WaitForSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Changed():
	default:
		t.Fatal("sync did not signal Changed()")
	}
	snap, err := s.All()
	if err != nil {
		t.Fatal(err)
	}
	watchtest.AssertLines(t, "All()", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
	// All checked out the pre-sync changes.
	watchtest.AssertLines(t, "All().Pending", watchtest.Describe(snap.Pending.Services), []string{"ns/a -> 10.96.0.1[]"})
	if snap.Pending.ServiceEvents != 1 {
		t.Errorf("All().Pending.ServiceEvents = %d, want 1", snap.Pending.ServiceEvents)
	}
	ch, _ := s.Pending()
	if len(ch.Services) != 0 {
		t.Errorf("Pending() after All() = %v, want empty", watchtest.Describe(ch.Services))
	}
}

func TestStoreChangedCoalesces(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	<-s.Changed() // the sync signal

	for i, ip := range []string{"10.96.0.1", "10.96.0.2", "10.96.0.3"} {
		s.setService(mkService("ns", string(rune('a'+i)), ip))
	}
	if n := len(s.Changed()); n != 1 {
		t.Fatalf("len(Changed()) = %d after 3 changes, want 1", n)
	}
	<-s.Changed()
	s.setService(mkService("ns", "a", "10.96.0.1")) // unchanged: no signal
	if n := len(s.Changed()); n != 0 {
		t.Fatalf("unchanged update signalled")
	}
	s.deleteService(nn("ns", "a"))
	if n := len(s.Changed()); n != 1 {
		t.Fatalf("deletion did not signal")
	}
}

func TestStoreTriggerTimes(t *testing.T) {
	s := newTestStore(t) // started at t0
	s.markSynced()
	s.setService(mkService("ns", "a", "10.96.0.1"))
	s.setService(mkService("ns", "b", "10.96.0.2"))

	s.setSlice(withTrigger(mkSlice("ns", "a-1", "a", "10.0.0.1"), t0.Add(-time.Hour))) // before start: ignored
	s.setSlice(withTrigger(mkSlice("ns", "a-1", "a", "10.0.0.2"), t0.Add(time.Second)))
	s.setSlice(withTrigger(mkSlice("ns", "a-2", "a", "10.0.0.3"), t0.Add(2*time.Second)))
	s.setSlice(withTrigger(mkSlice("ns", "x-1", "x", "10.0.0.4"), t0.Add(3*time.Second))) // unknown service
	bad := mkSlice("ns", "b-1", "b", "10.0.0.5")
	bad.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "yesterday"}
	s.setSlice(bad)
	s.deleteSlice(nn("ns", "a-2")) // deletions carry no time, and keep the earlier ones

	ch, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]time.Time{"ns/a": {t0.Add(time.Second), t0.Add(2 * time.Second)}}
	got := map[string][]time.Time{}
	for k, v := range ch.TriggerTimes {
		got[k.String()] = v
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TriggerTimes = %v, want %v", got, want)
	}
	ch, _ = s.Pending()
	if len(ch.TriggerTimes) != 0 {
		t.Errorf("TriggerTimes not checked out: %v", ch.TriggerTimes)
	}
}

func TestStoreNode(t *testing.T) {
	base := mkNode("n1", map[string]string{"topology.kubernetes.io/zone": "z1"}, "10.244.1.0/24")
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	relabelled := base.DeepCopy()
	relabelled.Labels["topology.kubernetes.io/zone"] = "z2"
	recidred := base.DeepCopy()
	recidred.Spec.PodCIDRs = []string{"10.244.9.0/24"}
	deleting := base.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}

	tests := []struct {
		name        string
		prev, next  *v1.Node
		wantChanged bool
	}{
		{"appears", nil, base, true},
		{"status heartbeat only", base, heartbeat, false},
		{"topology label", base, relabelled, true},
		{"pod CIDRs", base, recidred, true},
		{"deletion timestamp", base, deleting, true},
		{"disappears", base, nil, true},
		{"stays absent", nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			s.markSynced()
			s.setNode(tc.prev)
			_, _ = s.Pending()
			s.setNode(tc.next)
			if got := s.Node(); got != tc.next {
				t.Errorf("Node() = %v, want the latest object %v", got, tc.next)
			}
			ch, _ := s.Pending()
			if ch.NodeChanged != tc.wantChanged {
				t.Errorf("NodeChanged = %v, want %v", ch.NodeChanged, tc.wantChanged)
			}
			if ch.Node != tc.next {
				t.Errorf("Changes.Node is not the latest node")
			}
			if len(ch.Services) != 0 {
				t.Errorf("a node change dirtied services: %v", watchtest.Describe(ch.Services))
			}
		})
	}
}

func TestStoreServiceCIDRs(t *testing.T) {
	kube := mkService(kubernetesServiceNamespace, kubernetesServiceName, "10.96.0.1", func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00:10:96::1"}
	})
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	pfx := netip.MustParsePrefix
	addr := netip.MustParseAddr

	tests := []struct {
		name             string
		steps            func(s *store)
		want             ServiceCIDRs
		changedMeanwhile bool
	}{
		{"nothing known", func(*store) {}, ServiceCIDRs{}, false},
		{
			"only default/kubernetes: no prefix is inferred",
			func(s *store) { s.setService(kube) },
			ServiceCIDRs{Origin: ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{addr("10.96.0.1"), addr("fd00:10:96::1")}},
			false,
		},
		{
			"ServiceCIDR objects: masked, sorted, de-duplicated",
			func(s *store) {
				s.useServiceCIDRAPI()
				s.setService(kube)
				s.setServiceCIDR(cidr("kubernetes", "fd00:10:96::/108", "10.96.0.0/12"))
				s.setServiceCIDR(cidr("extra", "10.100.0.7/16", "10.96.0.0/12", "bogus"))
			},
			ServiceCIDRs{
				Origin:               ServiceCIDRsFromAPI,
				CIDRs:                []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.100.0.0/16"), pfx("fd00:10:96::/108")},
				KubernetesServiceIPs: []netip.Addr{addr("10.96.0.1"), addr("fd00:10:96::1")},
			},
			false,
		},
		{
			"API served but no objects falls back to default/kubernetes",
			func(s *store) {
				s.useServiceCIDRAPI()
				s.setServiceCIDR(cidr("kubernetes", "10.96.0.0/12"))
				s.deleteServiceCIDR("kubernetes")
				s.setService(kube)
			},
			ServiceCIDRs{Origin: ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{addr("10.96.0.1"), addr("fd00:10:96::1")}},
			false,
		},
		{
			"ServiceCIDR objects are ignored unless the API is the authority",
			func(s *store) { s.setServiceCIDR(cidr("kubernetes", "10.96.0.0/12")) },
			ServiceCIDRs{},
			false,
		},
		{
			"deleting default/kubernetes forgets its IPs",
			func(s *store) { s.setService(kube); s.deleteService(nn("default", "kubernetes")) },
			ServiceCIDRs{},
			true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			s.markSynced()
			tc.steps(s)
			if got := s.ServiceCIDRs(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ServiceCIDRs() = %+v, want %+v", got, tc.want)
			}
			ch, _ := s.Pending()
			// Changed is sticky until checked out: a change and its reversal still count.
			wantChanged := !reflect.DeepEqual(tc.want, ServiceCIDRs{}) || tc.changedMeanwhile
			if ch.ServiceCIDRsChanged != wantChanged || !reflect.DeepEqual(ch.ServiceCIDRs, tc.want) {
				t.Errorf("Pending(): ServiceCIDRsChanged = %v (want %v), ServiceCIDRs = %+v", ch.ServiceCIDRsChanged, wantChanged, ch.ServiceCIDRs)
			}
		})
	}
}

func TestStoreRecordsAreImmutableAndCopiesIndependent(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	s.setService(mkService("ns", "a", "10.96.0.1"))
	s.setSlice(mkSlice("ns", "a-1", "a", "10.0.0.1"))
	snap, _ := s.All()
	old := snap.Services[nn("ns", "a")]

	delete(snap.Services, nn("ns", "a")) // the caller's map
	s.setSlice(mkSlice("ns", "a-2", "a", "10.0.0.2"))

	if got := watchtest.DescribeRecord(old); got != "10.96.0.1[a-1:10.0.0.1]" {
		t.Errorf("old record changed to %s", got)
	}
	snap2, _ := s.All()
	if got := watchtest.DescribeRecord(snap2.Services[nn("ns", "a")]); got != "10.96.0.1[a-1:10.0.0.1 a-2:10.0.0.2]" {
		t.Errorf("new record = %s", got)
	}
	if snap2.Services[nn("ns", "a")] == old {
		t.Error("record was updated in place instead of replaced")
	}
	cidrs := s.ServiceCIDRs()
	cidrs.CIDRs = append(cidrs.CIDRs, netip.MustParsePrefix("1.0.0.0/8"))
	if len(s.ServiceCIDRs().CIDRs) != 0 {
		t.Error("ServiceCIDRs() returned shared slice")
	}
}

// A record's slice list is shared with the store's index, which replaces it on every change:
// an insert, a replacement or a removal leaves every record handed out as it was.
func TestStoreRecordsKeepTheirSlices(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	s.setService(mkService("ns", "a", "10.96.0.1"))
	record := func() *ServiceInfo {
		t.Helper()
		snap, err := s.All()
		if err != nil {
			t.Fatal(err)
		}
		return snap.Services[nn("ns", "a")]
	}
	s.setSlice(mkSlice("ns", "a-1", "a", "10.0.0.1"))
	s.setSlice(mkSlice("ns", "a-4", "a", "10.0.0.4"))
	s.setSlice(mkSlice("ns", "a-3", "a", "10.0.0.3"))
	r1 := record()
	s.setSlice(mkSlice("ns", "a-2", "a", "10.0.0.2")) // inserted before a-3
	r2 := record()
	s.setSlice(mkSlice("ns", "a-1", "a", "10.0.0.11")) // replaced
	r3 := record()
	s.deleteSlice(nn("ns", "a-3"))
	r4 := record()
	s.setService(mkService("ns", "a", "10.96.0.2")) // the list is shared with the new record
	r5 := record()
	s.deleteSlice(nn("ns", "a-1"))
	s.deleteSlice(nn("ns", "a-2"))
	s.deleteSlice(nn("ns", "a-4"))
	r6 := record()
	watchtest.AssertLines(t, "records", []string{watchtest.DescribeRecord(r1), watchtest.DescribeRecord(r2), watchtest.DescribeRecord(r3), watchtest.DescribeRecord(r4), watchtest.DescribeRecord(r5), watchtest.DescribeRecord(r6)}, []string{
		"10.96.0.1[a-1:10.0.0.1 a-3:10.0.0.3 a-4:10.0.0.4]",
		"10.96.0.1[a-1:10.0.0.1 a-2:10.0.0.2 a-3:10.0.0.3 a-4:10.0.0.4]",
		"10.96.0.1[a-1:10.0.0.11 a-2:10.0.0.2 a-3:10.0.0.3 a-4:10.0.0.4]",
		"10.96.0.1[a-1:10.0.0.11 a-2:10.0.0.2 a-4:10.0.0.4]",
		"10.96.0.2[a-1:10.0.0.11 a-2:10.0.0.2 a-4:10.0.0.4]",
		"10.96.0.2[]",
	})
	if _, ok := s.byService[nn("ns", "a")]; ok {
		t.Error("the index keeps an empty list")
	}
}

func TestStoreReplaceAll(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	first := State{
		Services: []*v1.Service{mkService("ns", "a", "10.96.0.1"), mkService("ns", "b", "10.96.0.2"), mkService("default", "kubernetes", "10.96.0.1")},
		Slices:   []*discoveryv1.EndpointSlice{mkSlice("ns", "a-1", "a", "10.0.0.1"), mkSlice("ns", "b-1", "b", "10.0.0.2")},
		Node:     mkNode("n1", nil),
	}
	s.replaceAll(first)
	ch, _ := s.Pending()
	watchtest.AssertLines(t, "first load", watchtest.Describe(ch.Services), []string{
		"default/kubernetes -> 10.96.0.1[]", "ns/a -> 10.96.0.1[a-1:10.0.0.1]", "ns/b -> 10.96.0.2[b-1:10.0.0.2]",
	})
	if !ch.NodeChanged || ch.ServiceCIDRs.Origin != ServiceCIDRsFromKubernetesService {
		t.Errorf("first load: NodeChanged=%v ServiceCIDRs=%+v", ch.NodeChanged, ch.ServiceCIDRs)
	}

	<-s.Changed()
	// Identical content, freshly decoded: nothing changes.
	s.replaceAll(State{
		Services: []*v1.Service{mkService("ns", "a", "10.96.0.1"), mkService("ns", "b", "10.96.0.2"), mkService("default", "kubernetes", "10.96.0.1")},
		Slices:   []*discoveryv1.EndpointSlice{mkSlice("ns", "a-1", "a", "10.0.0.1"), mkSlice("ns", "b-1", "b", "10.0.0.2")},
		Node:     mkNode("n1", nil),
	})
	if n := len(s.Changed()); n != 0 {
		t.Error("identical reload signalled Changed()")
	}
	ch, _ = s.Pending()
	if len(ch.Services) != 0 || ch.NodeChanged || ch.ServiceCIDRsChanged || ch.ServiceEvents+ch.EndpointEvents != 0 {
		t.Errorf("identical reload produced changes: %v %+v", watchtest.Describe(ch.Services), ch)
	}

	// b's slice changes, a disappears (its slice too), c appears, node and kubernetes go,
	// a ServiceCIDR appears.
	s.replaceAll(State{
		Services: []*v1.Service{mkService("ns", "b", "10.96.0.2"), mkService("ns", "c", "10.96.0.3")},
		Slices:   []*discoveryv1.EndpointSlice{mkSlice("ns", "b-1", "b", "10.0.0.22")},
		ServiceCIDRs: []*networkingv1.ServiceCIDR{{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}},
		}},
	})
	ch, _ = s.Pending()
	watchtest.AssertLines(t, "second load", watchtest.Describe(ch.Services), []string{
		"default/kubernetes -> <deleted>", "ns/a -> <deleted>", "ns/b -> 10.96.0.2[b-1:10.0.0.22]", "ns/c -> 10.96.0.3[]",
	})
	if ch.ServiceEvents != 3 || ch.EndpointEvents != 1 {
		t.Errorf("events = %d, %d; want 3, 1", ch.ServiceEvents, ch.EndpointEvents)
	}
	if !ch.NodeChanged || ch.Node != nil {
		t.Errorf("node removal: NodeChanged=%v Node=%v", ch.NodeChanged, ch.Node)
	}
	want := ServiceCIDRs{Origin: ServiceCIDRsFromAPI, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	if !ch.ServiceCIDRsChanged || !reflect.DeepEqual(ch.ServiceCIDRs, want) {
		t.Errorf("ServiceCIDRs = %+v (changed %v), want %+v", ch.ServiceCIDRs, ch.ServiceCIDRsChanged, want)
	}
	// a's slice is gone from the store: re-adding a finds no slices.
	s.replaceAll(State{Services: []*v1.Service{mkService("ns", "a", "10.96.0.1")}})
	snap, _ := s.All()
	watchtest.AssertLines(t, "third load", watchtest.Describe(snap.Services), []string{"ns/a -> 10.96.0.1[]"})
}

// TestStoreConcurrent exercises the locking under -race.
func TestStoreConcurrent(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := string(rune('a' + (i+w)%5))
				s.setService(mkService("ns", name, "10.96.0.1", withRV(string(rune('0'+i%10)))))
				s.setSlice(mkSlice("ns", name+"-1", name, "10.0.0.1"))
				if i%7 == 0 {
					s.deleteService(nn("ns", name))
				}
				s.setNode(mkNode("n", map[string]string{"i": string(rune('0' + i%10))}))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			_, _ = s.Pending()
			_, _ = s.All()
			_ = s.Node()
			_ = s.ServiceCIDRs()
		}
	}()
	wg.Wait()
	// Final consistency: a full snapshot equals the records rebuilt from scratch.
	snap, _ := s.All()
	for k, r := range snap.Services {
		if r.Service != s.services[k] {
			t.Errorf("%s: record does not hold the stored service", k)
		}
		if len(r.Slices) != len(s.byService[k]) {
			t.Errorf("%s: record has %d slices, index has %d", k, len(r.Slices), len(s.byService[k]))
		}
	}
}
