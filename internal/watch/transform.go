package watch

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trimmer is the informers' transform (cache.TransformFunc): it drops from each object,
// before the informer caches it, what no part of kipvs reads, so the caches (the largest
// part of kipvs's memory, a Service and an EndpointSlice per Service) hold only what is
// used. Objects arrive decoded fresh from the API, so they are changed in place.
//
// Every object loses its managedFields. Beyond that:
//
//   - Services keep only the labels the filter reads (service.kubernetes.io/service-proxy-name,
//     service.kubernetes.io/headless) and the annotations named in serviceAnnotations (nil:
//     all of them).
//   - EndpointSlices keep only the labels the filter reads (the two above and
//     kubernetes.io/service-name) and the endpoints.kubernetes.io/last-change-trigger-time
//     annotation; their owner references go, and each endpoint loses what the proxy never
//     reads (targetRef, hostname, deprecatedTopology). The endpoint list is re-allocated to
//     its length (decoding grows it by appending: 10 endpoints occupy room for 16).
//   - Nodes and ServiceCIDRs lose only their managedFields.
//
// It is idempotent, as client-go asks of a transform.
type trimmer struct {
	serviceAnnotations []string
}

// sliceAnnotations are the EndpointSlice annotations kipvs reads.
func sliceAnnotations() []string { return []string{v1.EndpointsLastChangeTriggerTime} }

// filterLabels are the labels skipServiceReason and skipSliceReason read.
func filterLabels() []string { return []string{LabelServiceProxyName, v1.IsHeadlessService} }

func (t trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		o.ManagedFields = nil
		o.Labels = keepOnly(o.Labels, filterLabels())
		if t.serviceAnnotations != nil {
			o.Annotations = keepOnly(o.Annotations, t.serviceAnnotations)
		}
	case *discoveryv1.EndpointSlice:
		o.ManagedFields = nil
		o.OwnerReferences = nil
		o.Labels = keepOnly(o.Labels, append(filterLabels(), discoveryv1.LabelServiceName))
		o.Annotations = keepOnly(o.Annotations, sliceAnnotations())
		if cap(o.Endpoints) != len(o.Endpoints) {
			o.Endpoints = slices.Clone(o.Endpoints)
		}
		for i := range o.Endpoints {
			ep := &o.Endpoints[i]
			ep.TargetRef, ep.Hostname, ep.DeprecatedTopology = nil, nil, nil
		}
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// keepOnly returns m reduced to keys: m itself when it holds no other key, else a new map
// (nil when none of keys is in m).
func keepOnly(m map[string]string, keys []string) map[string]string {
	n := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			n++
		}
	}
	if n == len(m) {
		return m
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
