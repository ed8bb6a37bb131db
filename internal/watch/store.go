package watch

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// store accumulates the state both sources feed and tracks what changed since the consumer
// last looked. All methods are safe for concurrent use.
type store struct {
	log   *zap.Logger
	start time.Time // trigger times before this are ignored (they predate the proxy)

	syncedCh chan struct{} // closed by markSynced
	notify   chan struct{} // capacity 1

	mu     sync.Mutex
	synced bool

	// services holds proxied Services only.
	services map[types.NamespacedName]*v1.Service
	// slices holds every kept EndpointSlice by its own name; byService indexes them by the
	// Service named in their kubernetes.io/service-name label, sorted by name. A byService
	// list is never changed, only replaced: the Service's record shares it.
	slices    map[types.NamespacedName]*discoveryv1.EndpointSlice
	byService map[types.NamespacedName][]*discoveryv1.EndpointSlice
	// records holds one immutable ServiceInfo per proxied Service.
	records map[types.NamespacedName]*ServiceInfo

	dirty          map[types.NamespacedName]struct{}
	serviceEvents  int
	endpointEvents int
	// pendingServices and pendingEndpoints are the Services with a Service change and with an
	// EndpointSlice change since the last checkout: what kube-proxy's *_changes_pending gauges
	// count (Services, not events).
	pendingServices  map[types.NamespacedName]struct{}
	pendingEndpoints map[types.NamespacedName]struct{}
	triggerTimes     map[types.NamespacedName][]time.Time

	node        *v1.Node
	nodeChanged bool

	cidrAPI      bool                      // ServiceCIDR objects are the authority
	cidrObjects  map[string][]netip.Prefix // ServiceCIDR name -> its ranges
	kubeSvcIPs   []netip.Addr              // cluster IPs of default/kubernetes
	cidrs        ServiceCIDRs              // derived from the three above and default/kubernetes's slices
	cidrsChanged bool
}

func newStore(log *zap.Logger, clk clock.PassiveClock) *store {
	return &store{
		log:              log,
		start:            clk.Now(),
		syncedCh:         make(chan struct{}),
		notify:           make(chan struct{}, 1),
		services:         make(map[types.NamespacedName]*v1.Service),
		slices:           make(map[types.NamespacedName]*discoveryv1.EndpointSlice),
		byService:        make(map[types.NamespacedName][]*discoveryv1.EndpointSlice),
		records:          make(map[types.NamespacedName]*ServiceInfo),
		dirty:            make(map[types.NamespacedName]struct{}),
		pendingServices:  make(map[types.NamespacedName]struct{}),
		pendingEndpoints: make(map[types.NamespacedName]struct{}),
		triggerTimes:     make(map[types.NamespacedName][]time.Time),
		cidrObjects:      make(map[string][]netip.Prefix),
	}
}

// ---- consumer side ----

// WaitForSync blocks until the store is synced or ctx ends.
func (s *store) WaitForSync(ctx context.Context) error {
	select {
	case <-s.syncedCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the watch source to sync: %w", ctx.Err())
	}
}

// Synced reports whether the initial state is complete.
func (s *store) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// Changed receives a coalesced signal whenever something became dirty after sync.
func (s *store) Changed() <-chan struct{} { return s.notify }

// Pending checks out what changed since the previous Pending or All call.
func (s *store) Pending() (Changes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return Changes{}, ErrNotSynced
	}
	return s.checkoutLocked(), nil
}

// All returns every proxied Service, the node and the service CIDRs, and checks out the
// pending changes with them.
func (s *store) All() (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return Snapshot{}, ErrNotSynced
	}
	snap := Snapshot{
		Services:     make(map[types.NamespacedName]*ServiceInfo, len(s.records)),
		Node:         s.node,
		ServiceCIDRs: s.cidrs.clone(),
	}
	for k, r := range s.records {
		snap.Services[k] = r
	}
	snap.Pending = s.checkoutLocked()
	return snap, nil
}

// PendingCounts reports, without checking anything out, how many Services have a Service
// change and how many an EndpointSlice change pending.
func (s *store) PendingCounts() (services, endpoints int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pendingServices), len(s.pendingEndpoints)
}

// Node returns this node's Node, or nil.
func (s *store) Node() *v1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// ServiceCIDRs returns the learned service address space.
func (s *store) ServiceCIDRs() ServiceCIDRs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cidrs.clone()
}

func (s *store) checkoutLocked() Changes {
	ch := Changes{
		Services:            make(map[types.NamespacedName]*ServiceInfo, len(s.dirty)),
		ServiceEvents:       s.serviceEvents,
		EndpointEvents:      s.endpointEvents,
		TriggerTimes:        s.triggerTimes,
		NodeChanged:         s.nodeChanged,
		Node:                s.node,
		ServiceCIDRsChanged: s.cidrsChanged,
		ServiceCIDRs:        s.cidrs.clone(),
	}
	for k := range s.dirty {
		ch.Services[k] = s.records[k] // nil when gone
	}
	s.dirty = make(map[types.NamespacedName]struct{})
	s.triggerTimes = make(map[types.NamespacedName][]time.Time)
	s.serviceEvents, s.endpointEvents = 0, 0
	clear(s.pendingServices)
	clear(s.pendingEndpoints)
	s.nodeChanged, s.cidrsChanged = false, false
	return ch
}

// ---- source side ----

// markSynced declares the initial state complete. Idempotent.
func (s *store) markSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced {
		return
	}
	s.synced = true
	close(s.syncedCh)
	s.signalLocked()
}

// signalLocked wakes the consumer. Before sync nobody may act on changes, and the sync
// transition itself signals, so nothing is sent earlier.
func (s *store) signalLocked() {
	if !s.synced {
		return
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// locked runs f with s.mu held.
func (s *store) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *store) setService(svc *v1.Service) { s.locked(func() { s.setServiceLocked(svc) }) }

func (s *store) deleteService(key types.NamespacedName) {
	s.locked(func() { s.deleteServiceLocked(key) })
}

func (s *store) setSlice(slice *discoveryv1.EndpointSlice) {
	s.locked(func() { s.setSliceLocked(slice) })
}

func (s *store) deleteSlice(key types.NamespacedName) { s.locked(func() { s.deleteSliceLocked(key) }) }

// setNode records this node's Node (nil: deleted or absent).
func (s *store) setNode(node *v1.Node) { s.locked(func() { s.setNodeLocked(node) }) }

// useServiceCIDRAPI declares that the ServiceCIDR objects are the authority for the service
// ranges (the API serves them).
func (s *store) useServiceCIDRAPI() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cidrAPI = true
	s.recomputeCIDRsLocked()
}

func (s *store) setServiceCIDR(obj *networkingv1.ServiceCIDR) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setServiceCIDRLocked(obj)
	s.recomputeCIDRsLocked()
}

func (s *store) deleteServiceCIDR(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cidrObjects, name)
	s.recomputeCIDRsLocked()
}

// Store is the change-tracking store behind a Source, for a source outside this package
// that reads its whole state at once (package filesource). Embedded in that source, it
// gives it every method of Source but Start and Done; the source feeds it through the
// Replacer NewStore returns with it.
type Store struct{ *store }

// A Replacer feeds the Store NewStore returned with it.
type Replacer struct{ s *store }

// NewStore returns an empty store, not synced, and its Replacer. Trigger times from before
// now (clk) are ignored: they predate the proxy.
func NewStore(log *zap.Logger, clk clock.PassiveClock) (*Store, Replacer) {
	s := newStore(log, clk)
	return &Store{s}, Replacer{s}
}

// Replace makes the store hold exactly st (see replaceAll). The first Replace completes the
// initial state: the store is synced from then on.
func (r Replacer) Replace(st State) {
	r.s.replaceAll(st)
	r.s.markSynced() // no-op after the first
}

// replaceAll makes the store hold exactly st, as one atomic change: a consumer never sees a
// half-applied reload. Unchanged objects cause no events.
func (s *store) replaceAll(st State) {
	s.mu.Lock()
	defer s.mu.Unlock()

	wantSvc := make(map[types.NamespacedName]struct{}, len(st.Services))
	for _, svc := range st.Services {
		wantSvc[objectKey(svc)] = struct{}{}
	}
	for k := range s.services {
		if _, ok := wantSvc[k]; !ok {
			s.deleteServiceLocked(k)
		}
	}
	if _, ok := wantSvc[types.NamespacedName{Namespace: kubernetesServiceNamespace, Name: kubernetesServiceName}]; !ok {
		s.kubeSvcIPs = nil
	}
	wantSlice := make(map[types.NamespacedName]struct{}, len(st.Slices))
	for _, sl := range st.Slices {
		wantSlice[objectKey(sl)] = struct{}{}
	}
	for k := range s.slices {
		if _, ok := wantSlice[k]; !ok {
			s.deleteSliceLocked(k)
		}
	}
	for _, svc := range st.Services {
		s.setServiceLocked(svc)
	}
	for _, sl := range st.Slices {
		s.setSliceLocked(sl)
	}
	s.setNodeLocked(st.Node)

	s.cidrAPI = len(st.ServiceCIDRs) > 0
	clear(s.cidrObjects)
	for _, sc := range st.ServiceCIDRs {
		s.setServiceCIDRLocked(sc)
	}
	s.recomputeCIDRsLocked()
}

func (s *store) setServiceLocked(svc *v1.Service) {
	key := objectKey(svc)
	if isKubernetesService(key) {
		if ips := serviceClusterIPs(svc); !slices.Equal(ips, s.kubeSvcIPs) {
			s.kubeSvcIPs = ips
			s.recomputeCIDRsLocked()
		}
	}
	if reason := skipServiceReason(svc); reason != "" {
		if _, had := s.services[key]; had {
			s.log.Debug("service is no longer proxied", zap.Stringer("service", key), zap.String("reason", reason))
		} else {
			s.log.Debug("skipping service", zap.Stringer("service", key), zap.String("reason", reason))
		}
		s.deleteServiceLocked(key)
		return
	}
	if old, ok := s.services[key]; ok && sameObject(old, svc) {
		return
	}
	s.services[key] = svc
	s.rebuildLocked(key)
	s.serviceEvents++
	s.pendingServices[key] = struct{}{}
	s.markDirtyLocked(key)
}

func (s *store) deleteServiceLocked(key types.NamespacedName) {
	if isKubernetesService(key) && s.kubeSvcIPs != nil {
		s.kubeSvcIPs = nil
		s.recomputeCIDRsLocked()
	}
	if _, ok := s.services[key]; !ok {
		return
	}
	delete(s.services, key)
	s.rebuildLocked(key)
	s.serviceEvents++
	s.pendingServices[key] = struct{}{}
	s.markDirtyLocked(key)
}

func (s *store) setSliceLocked(slice *discoveryv1.EndpointSlice) {
	key := objectKey(slice)
	if reason := skipSliceReason(slice); reason != "" {
		s.log.Debug("skipping EndpointSlice", zap.Stringer("endpointSlice", key), zap.String("reason", reason))
		s.deleteSliceLocked(key)
		return
	}
	old, had := s.slices[key]
	if had && sameObject(old, slice) {
		return
	}
	owner := sliceServiceKey(slice)
	counted := false
	if had {
		if oldOwner := sliceServiceKey(old); oldOwner != owner {
			counted = s.detachSliceLocked(oldOwner, old.Name)
		}
	}
	s.slices[key] = slice
	list := s.byService[owner]
	i, found := slices.BinarySearchFunc(list, slice.Name, compareSliceName)
	if found {
		list = slices.Clone(list)
		list[i] = slice
	} else {
		list = slices.Insert(slices.Clip(list), i, slice)
	}
	s.byService[owner] = list
	if isKubernetesService(owner) {
		s.recomputeCIDRsLocked()
	}
	if _, proxied := s.services[owner]; proxied {
		s.rebuildLocked(owner)
		s.markDirtyLocked(owner)
		s.pendingEndpoints[owner] = struct{}{}
		counted = true
		s.recordTriggerTimeLocked(owner, slice)
	}
	if counted {
		s.endpointEvents++
	}
}

func (s *store) deleteSliceLocked(key types.NamespacedName) {
	old, ok := s.slices[key]
	if !ok {
		return
	}
	delete(s.slices, key)
	if s.detachSliceLocked(sliceServiceKey(old), old.Name) {
		s.endpointEvents++
	}
}

// detachSliceLocked removes a slice from its Service's index; it reports whether a proxied
// record changed.
func (s *store) detachSliceLocked(owner types.NamespacedName, name string) bool {
	list := s.byService[owner]
	if i, found := slices.BinarySearchFunc(list, name, compareSliceName); found {
		list = slices.Delete(slices.Clone(list), i, i+1)
	}
	if len(list) == 0 {
		delete(s.byService, owner)
	} else {
		s.byService[owner] = list
	}
	if isKubernetesService(owner) {
		s.recomputeCIDRsLocked()
	}
	if _, proxied := s.services[owner]; !proxied {
		return false
	}
	s.rebuildLocked(owner)
	s.markDirtyLocked(owner)
	s.pendingEndpoints[owner] = struct{}{}
	return true
}

func (s *store) recordTriggerTimeLocked(owner types.NamespacedName, slice *discoveryv1.EndpointSlice) {
	t, ok, err := triggerTime(slice)
	if err != nil {
		s.log.Debug("ignoring trigger time", zap.Error(err))
		return
	}
	if ok && t.After(s.start) {
		s.triggerTimes[owner] = append(s.triggerTimes[owner], t)
	}
}

// rebuildLocked replaces the record of key from the current Service and slices.
func (s *store) rebuildLocked(key types.NamespacedName) {
	svc, ok := s.services[key]
	if !ok {
		delete(s.records, key)
		return
	}
	s.records[key] = &ServiceInfo{Service: svc, Slices: s.byService[key]}
}

func compareSliceName(sl *discoveryv1.EndpointSlice, name string) int {
	return strings.Compare(sl.Name, name)
}

func (s *store) markDirtyLocked(key types.NamespacedName) {
	s.dirty[key] = struct{}{}
	s.signalLocked()
}

func (s *store) setNodeLocked(node *v1.Node) {
	old := s.node
	s.node = node
	if NodeRelevantChange(old, node) {
		s.nodeChanged = true
		s.signalLocked()
	}
}

func (s *store) setServiceCIDRLocked(obj *networkingv1.ServiceCIDR) {
	var ps []netip.Prefix
	for _, c := range obj.Spec.CIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			s.log.Warn("ignoring unparsable range of ServiceCIDR",
				zap.String("serviceCIDR", obj.Name), zap.String("cidr", c), zap.Error(err))
			continue
		}
		ps = append(ps, p.Masked())
	}
	s.cidrObjects[obj.Name] = ps
}

func (s *store) recomputeCIDRsLocked() {
	var next ServiceCIDRs
	if len(s.kubeSvcIPs) > 0 {
		next.KubernetesServiceIPs = slices.Clone(s.kubeSvcIPs)
	}
	next.KubernetesEndpointIPs = s.kubernetesEndpointIPsLocked()
	var all []netip.Prefix
	if s.cidrAPI {
		for _, ps := range s.cidrObjects {
			all = append(all, ps...)
		}
	}
	switch {
	case len(all) > 0:
		slices.SortFunc(all, comparePrefix)
		next.Origin = ServiceCIDRsFromAPI
		next.CIDRs = slices.Compact(all)
	case len(next.KubernetesServiceIPs) > 0:
		next.Origin = ServiceCIDRsFromKubernetesService
	}
	if reflect.DeepEqual(next, s.cidrs) {
		return
	}
	s.cidrs = next
	s.cidrsChanged = true
	s.signalLocked()
}

// kubernetesEndpointIPsLocked returns the endpoint addresses of default/kubernetes's
// slices, sorted and de-duplicated (nil when there are none).
func (s *store) kubernetesEndpointIPsLocked() []netip.Addr {
	var out []netip.Addr
	for _, sl := range s.byService[types.NamespacedName{Namespace: kubernetesServiceNamespace, Name: kubernetesServiceName}] {
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Zone() == "" {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func (c ServiceCIDRs) clone() ServiceCIDRs {
	c.CIDRs = slices.Clone(c.CIDRs)
	c.KubernetesServiceIPs = slices.Clone(c.KubernetesServiceIPs)
	c.KubernetesEndpointIPs = slices.Clone(c.KubernetesEndpointIPs)
	return c
}
