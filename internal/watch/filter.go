package watch

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

// skipServiceReason returns why svc is not proxied, or "" when it is. These are kube-proxy's
// rules: the service-proxy-name label (any value), no cluster IP (headless "None" or unset),
// and type ExternalName.
func skipServiceReason(svc *v1.Service) string {
	if _, ok := svc.Labels[LabelServiceProxyName]; ok {
		return "labelled " + LabelServiceProxyName
	}
	if _, ok := svc.Labels[v1.IsHeadlessService]; ok {
		return "labelled " + v1.IsHeadlessService
	}
	switch svc.Spec.ClusterIP {
	case v1.ClusterIPNone:
		return "headless (clusterIP None)"
	case "":
		return "no clusterIP"
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return "type ExternalName"
	}
	return ""
}

// skipSliceReason returns why an EndpointSlice is ignored, or "" when it is kept.
// A kept slice is attached to the Service named by sliceServiceKey.
func skipSliceReason(slice *discoveryv1.EndpointSlice) string {
	if _, ok := slice.Labels[LabelServiceProxyName]; ok {
		return "labelled " + LabelServiceProxyName
	}
	if _, ok := slice.Labels[v1.IsHeadlessService]; ok {
		return "labelled " + v1.IsHeadlessService
	}
	if slice.Labels[discoveryv1.LabelServiceName] == "" {
		return "no " + discoveryv1.LabelServiceName + " label"
	}
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return fmt.Sprintf("addressType %q", slice.AddressType)
	}
	return ""
}

func objectKey(m metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
}

func sliceServiceKey(slice *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: slice.Namespace, Name: slice.Labels[discoveryv1.LabelServiceName]}
}

func isKubernetesService(key types.NamespacedName) bool {
	return key.Namespace == kubernetesServiceNamespace && key.Name == kubernetesServiceName
}

// sameObject reports whether two versions of an object carry the same content: the same
// pointer (informer resync), the same non-empty resourceVersion (relist), or, for objects
// without a resourceVersion (file source), semantically equal content.
func sameObject[T interface {
	metav1.Object
	comparable
}](a, b T) bool {
	if a == b {
		return true
	}
	ra, rb := a.GetResourceVersion(), b.GetResourceVersion()
	if ra != "" && rb != "" {
		return ra == rb
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// NodeRelevantChange reports whether a Node update matters to the proxy (anything but
// status heartbeats).
func NodeRelevantChange(a, b *v1.Node) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	if a == nil || a == b {
		return false
	}
	eq := apiequality.Semantic.DeepEqual
	return !eq(a.Labels, b.Labels) ||
		!eq(a.Annotations, b.Annotations) ||
		!eq(a.Spec, b.Spec) ||
		!eq(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!eq(a.Status.Addresses, b.Status.Addresses)
}

// triggerTime parses the last-change-trigger-time annotation; ok is false when it is absent.
func triggerTime(slice *discoveryv1.EndpointSlice) (t time.Time, ok bool, err error) {
	raw, ok := slice.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("EndpointSlice %s/%s: annotation %s=%q: %w",
			slice.Namespace, slice.Name, v1.EndpointsLastChangeTriggerTime, raw, err)
	}
	return t, true, nil
}

// serviceClusterIPs parses a Service's cluster IPs, skipping unparsable ones.
func serviceClusterIPs(svc *v1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range raw {
		// A zoned address (only a source file can hold one) is no cluster IP; it would also
		// slip past the Service CIDR containment checks, which never match a zone.
		if a, ok := inet.ParseAddrSloppy(s); ok && a.Zone() == "" {
			out = append(out, a.Unmap())
		}
	}
	return out
}
