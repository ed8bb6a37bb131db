package watch

import (
	"maps"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// mkService returns a proxied ClusterIP Service "ns/name" with TCP port 80 -> 8080.
func mkService(ns, name, ip string, mut ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func withLabel(k, v string) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = v
	}
}

func withRV(rv string) func(*v1.Service) { return func(s *v1.Service) { s.ResourceVersion = rv } }

// mkSlice returns an IPv4 EndpointSlice "ns/name" of Service svcName with one ready endpoint
// per address.
func mkSlice(ns, name, svcName string, addrs ...string) *discoveryv1.EndpointSlice {
	port := int32(8080)
	pname := "http"
	proto := v1.ProtocolTCP
	ready := true
	sl := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Protocol: &proto, Port: &port}},
	}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return sl
}

func withTrigger(sl *discoveryv1.EndpointSlice, t time.Time) *discoveryv1.EndpointSlice {
	sl = sl.DeepCopy()
	if sl.Annotations == nil {
		sl.Annotations = map[string]string{}
	}
	sl.Annotations[v1.EndpointsLastChangeTriggerTime] = t.Format(time.RFC3339Nano)
	return sl
}

func mkNode(name string, labels map[string]string, podCIDRs ...string) *v1.Node {
	n := &v1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{PodCIDRs: podCIDRs},
	}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
	}
	return n
}

func keys[V any](m map[types.NamespacedName]V) []string {
	out := []string{}
	for k := range maps.Keys(m) {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}
