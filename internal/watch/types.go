package watch

import (
	"context"
	"errors"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LabelServiceProxyName is the label by which a Service opts out of the default proxy
// (kube-proxy and kipvs skip any Service that carries it, whatever its value).
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// kubernetesServiceNamespace and kubernetesServiceName name the apiserver's own Service,
// whose cluster IPs are the first addresses of the primary service ranges.
const (
	kubernetesServiceNamespace = "default"
	kubernetesServiceName      = "kubernetes"
)

// ErrNotSynced is returned by Pending and All until the source holds a complete initial view.
// The consumer must not touch the kernel before then.
var ErrNotSynced = errors.New("watch: source has not synced yet")

// ServiceInfo is the immutable record of one proxied Service and its EndpointSlices.
// A new ServiceInfo is created on every change; neither the record nor the API objects it
// points to may be modified.
type ServiceInfo struct {
	Service *v1.Service
	// Slices holds the Service's IPv4 and IPv6 EndpointSlices, sorted by name.
	// FQDN slices are dropped (kube-proxy never uses them).
	Slices []*discoveryv1.EndpointSlice
}

// ServiceCIDROrigin tells where the service CIDR information came from.
type ServiceCIDROrigin string

const (
	// ServiceCIDRsUnknown: nothing is known; the caller must use its configured CIDR
	// (--kipvs-service-cidr) or do without.
	ServiceCIDRsUnknown ServiceCIDROrigin = ""
	// ServiceCIDRsFromAPI: CIDRs lists the spec.cidrs of the networking.k8s.io/v1
	// ServiceCIDR objects (including ones being deleted: their addresses may still be in use).
	ServiceCIDRsFromAPI ServiceCIDROrigin = "ServiceCIDR"
	// ServiceCIDRsFromKubernetesService: the ServiceCIDR API is not served (or has no
	// objects); only the cluster IPs of the default/kubernetes Service are known. See
	// ServiceCIDRs.KubernetesServiceIPs for what that does and does not tell.
	ServiceCIDRsFromKubernetesService ServiceCIDROrigin = "KubernetesService"
)

// ServiceCIDRs is the learned service address space.
type ServiceCIDRs struct {
	Origin ServiceCIDROrigin
	// CIDRs is set only when Origin is ServiceCIDRsFromAPI: the union of the ServiceCIDR
	// objects' ranges, masked, de-duplicated and sorted.
	CIDRs []netip.Prefix
	// KubernetesServiceIPs are the cluster IPs of default/kubernetes, whenever that Service is
	// known (whatever the Origin). The apiserver gives that Service the address right after
	// the network address of each primary service range, so each IP tells that its family
	// has a service range, and where the range starts (IP-1). It does NOT tell the prefix
	// length: 10.96.0.1 fits 10.96.0.0/12 as well as 10.96.0.0/24 or any length from /11 to
	// /30. No honest prefix can be inferred from one address, so none is. Callers that need
	// a range must fall back to their configured service CIDR (--kipvs-service-cidr), and
	// may use these IPs to check that the configured range contains them.
	KubernetesServiceIPs []netip.Addr
	// KubernetesEndpointIPs are the endpoint addresses of default/kubernetes's
	// EndpointSlices, both families, sorted: the apiservers' own addresses. They change when
	// an apiserver moves; no external or load balancer IP may take one.
	KubernetesEndpointIPs []netip.Addr
}

// Changes is what changed since the previous Pending (or All) call.
type Changes struct {
	// Services maps every Service name whose record changed to its current record, or to nil
	// when the Service is gone or no longer proxied. Names that were never handed out as
	// proxied may appear with nil (e.g. a Service added and removed between two calls).
	Services map[types.NamespacedName]*ServiceInfo
	// ServiceEvents counts Service add/update/delete events that changed a proxied record
	// (feeds kubeproxy_sync_proxy_rules_service_changes_{pending,total}).
	ServiceEvents int
	// EndpointEvents counts EndpointSlice add/update/delete events that changed a proxied
	// record (feeds kubeproxy_sync_proxy_rules_endpoint_changes_{pending,total}). Events for
	// slices of unknown or unproxied Services are not counted.
	EndpointEvents int
	// TriggerTimes holds, per Service, the endpoints.kubernetes.io/last-change-trigger-time
	// annotations of the slice adds/updates seen (only times after the source was created,
	// as kube-proxy does; deletions carry no trigger time). Observe
	// kubeproxy_network_programming_duration_seconds once the Service has been programmed.
	TriggerTimes map[types.NamespacedName][]time.Time
	// NodeChanged is set when this node's Node appeared, disappeared, or changed in its
	// labels, annotations, spec, deletionTimestamp or status.addresses. Status-only heartbeats
	// update Node but do not set NodeChanged. What a node change dirties is for the consumer
	// to decide.
	NodeChanged bool
	// Node is this node's Node at the time of the call (nil when unknown).
	Node *v1.Node
	// ServiceCIDRsChanged is set when ServiceCIDRs differs from the previous call's.
	ServiceCIDRsChanged bool
	ServiceCIDRs        ServiceCIDRs
}

// Snapshot is a complete, consistent copy of the proxied state for a full sync.
type Snapshot struct {
	// Services holds every proxied Service. The map is the caller's; the records are shared.
	Services map[types.NamespacedName]*ServiceInfo
	Node     *v1.Node
	// ServiceCIDRs is the learned service address space.
	ServiceCIDRs ServiceCIDRs
	// Pending holds the changes this snapshot supersedes: All checks them out, exactly as
	// Pending would, so that the counters and trigger times are not lost and the next
	// Pending call reports only what changed after the snapshot.
	Pending Changes
}

// State is a whole state that a source reads at once (one revision of a source file, for
// package filesource): the objects as the API would serve them. A Store filters them as it
// filters the informers' (see the package doc); ServiceCIDRs, when there are any, are the
// authority for the service ranges, as the API's are.
type State struct {
	Services     []*v1.Service
	Slices       []*discoveryv1.EndpointSlice
	Node         *v1.Node
	ServiceCIDRs []*networkingv1.ServiceCIDR
}

// Source is what the daemon consumes. Both APISource and FileSource implement it.
//
// Typical use:
//
//	if err := src.Start(ctx); err != nil { ... }
//	if err := src.WaitForSync(ctx); err != nil { ... }
//	snap, _ := src.All()            // full sync
//	for range src.Changed() {
//	    ch, _ := src.Pending()      // incremental sync of ch.Services
//	}
//
// If applying a Pending result fails, the consumer must do a full sync next: the changes
// have been handed out and will not be reported again.
type Source interface {
	// Start begins watching. Goroutines it starts end when ctx is cancelled (Done is closed
	// then). It must be called once.
	Start(ctx context.Context) error
	// Done is closed when every goroutine started by Start has exited.
	Done() <-chan struct{}
	// WaitForSync blocks until the initial state is complete, or returns ctx's error.
	WaitForSync(ctx context.Context) error
	// Synced reports whether the initial state is complete.
	Synced() bool
	// Changed receives a value (coalesced, capacity 1) whenever something became dirty after
	// sync, and once when the source becomes synced.
	Changed() <-chan struct{}
	// Pending checks out the changes since the previous Pending or All call.
	// It returns ErrNotSynced before sync.
	Pending() (Changes, error)
	// All returns a full consistent copy and checks out the pending changes with it.
	// It returns ErrNotSynced before sync.
	All() (Snapshot, error)
	// PendingCounts reports, without checking anything out, how many Services have a
	// Service change and how many an EndpointSlice change pending: Services, not events, as
	// kube-proxy's *_changes_pending gauges count them.
	PendingCounts() (services, endpoints int)
	// Node returns this node's current Node, or nil when it is unknown.
	Node() *v1.Node
	// ServiceCIDRs returns the learned service address space.
	ServiceCIDRs() ServiceCIDRs
}
