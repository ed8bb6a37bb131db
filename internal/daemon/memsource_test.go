package daemon

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/watch"
)

// memSource is an in-memory watch.Source for driving Daemon.sync directly: Set replaces
// the whole object set (as a re-read source file does) and marks what changed. It follows
// the watch package's rules: Services that are headless, ExternalName or labelled with a
// service-proxy-name are not proxied; EndpointSlices attach to the Service named by their
// kubernetes.io/service-name label, IPv4 and IPv6 slices only, sorted by name.
type memSource struct {
	mu       sync.Mutex
	nodeName string
	changed  chan struct{}
	records  map[types.NamespacedName]*watch.ServiceInfo
	dirty    map[types.NamespacedName]bool
	node     *v1.Node
	events   int
	triggers map[types.NamespacedName][]time.Time
}

var _ watch.Source = (*memSource)(nil)

func newMemSource(nodeName string) *memSource {
	return &memSource{nodeName: nodeName, changed: make(chan struct{}, 1),
		records: map[types.NamespacedName]*watch.ServiceInfo{}, dirty: map[types.NamespacedName]bool{}}
}

// Set replaces every object. Records whose content changed are marked dirty; touchAll marks
// every record dirty, so the next incremental sync rebuilds them all.
func (s *memSource) Set(services []*v1.Service, eps []*discoveryv1.EndpointSlice, node *v1.Node, touchAll bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[types.NamespacedName]*watch.ServiceInfo{}
	for _, svc := range services {
		if memSkipService(svc) {
			continue
		}
		next[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = &watch.ServiceInfo{Service: svc}
	}
	for _, sl := range eps {
		owner := sl.Labels[discoveryv1.LabelServiceName]
		if owner == "" || (sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		if info := next[types.NamespacedName{Namespace: sl.Namespace, Name: owner}]; info != nil {
			info.Slices = append(info.Slices, sl)
		}
	}
	for _, info := range next {
		slices.SortFunc(info.Slices, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	for k, info := range next {
		if old := s.records[k]; touchAll || old == nil || !apiequality.Semantic.DeepEqual(old, info) {
			s.dirty[k] = true
			s.events++
		}
	}
	for k := range s.records {
		if next[k] == nil {
			s.dirty[k] = true
			s.events++
		}
	}
	s.records = next
	s.node = node
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Trigger adds a last-change-trigger-time of Service name to the next Pending or All (the
// watch source takes it from a slice's annotation).
func (s *memSource) Trigger(name types.NamespacedName, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.triggers == nil {
		s.triggers = map[types.NamespacedName][]time.Time{}
	}
	s.triggers[name] = append(s.triggers[name], t)
}

func memSkipService(svc *v1.Service) bool {
	if _, ok := svc.Labels[watch.LabelServiceProxyName]; ok {
		return true
	}
	return svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.Type == v1.ServiceTypeExternalName
}

func (s *memSource) Start(context.Context) error                        { return nil }
func (s *memSource) Done() <-chan struct{}                              { return nil }
func (s *memSource) WaitForSync(context.Context) error                  { return nil }
func (s *memSource) Synced() bool                                       { return true }
func (s *memSource) Changed() <-chan struct{}                           { return s.changed }
func (s *memSource) ServiceCIDRs() watch.ServiceCIDRs                   { return watch.ServiceCIDRs{} }
func (s *memSource) PendingCounts() (serviceEvents, endpointEvents int) { return 0, 0 }

func (s *memSource) Node() *v1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

func (s *memSource) Pending() (watch.Changes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkoutLocked(), nil
}

func (s *memSource) All() (watch.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := watch.Snapshot{Services: map[types.NamespacedName]*watch.ServiceInfo{}, Node: s.node}
	for k, v := range s.records {
		snap.Services[k] = v
	}
	snap.Pending = s.checkoutLocked()
	return snap, nil
}

func (s *memSource) checkoutLocked() watch.Changes {
	ch := watch.Changes{Services: map[types.NamespacedName]*watch.ServiceInfo{}, ServiceEvents: s.events, Node: s.node,
		TriggerTimes: s.triggers}
	for k := range s.dirty {
		ch.Services[k] = s.records[k]
	}
	s.dirty = map[types.NamespacedName]bool{}
	s.events = 0
	s.triggers = nil
	return ch
}

// memListener is a health check listener that accepts nothing until it is closed.
type memListener struct {
	addr   string
	once   sync.Once
	closed chan struct{}
}

func newMemListener(_ context.Context, addr string) (net.Listener, error) {
	return &memListener{addr: addr, closed: make(chan struct{})}, nil
}

func (l *memListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

type memAddr string

func (a memAddr) Network() string { return "tcp" }
func (a memAddr) String() string  { return string(a) }
