package watch

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// fullService is a Service with everything the API may hang on one: what kipvs reads and
// what it does not.
func fullService() *v1.Service {
	return &v1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "uid-web", ResourceVersion: "17", Generation: 3,
			CreationTimestamp: metav1.Unix(1700000000, 0),
			Labels:            map[string]string{"app": "web", "team": "a"},
			Annotations: map[string]string{
				proxy.AnnotationScheduler:                          "sh",
				proxy.AnnotationSchedulerFlags:                     "sh-fallback",
				"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`,
				"service.kubernetes.io/topology-mode":              "Auto",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
			Finalizers: []string{"service.kubernetes.io/load-balancer-cleanup"},
		},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353), NodePort: 30053},
			},
			ExternalIPs:              []string{"198.51.100.10"},
			LoadBalancerSourceRanges: []string{"192.0.2.0/24"},
			ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      32000,
			SessionAffinity:          v1.ServiceAffinityClientIP,
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.10"}}}},
	}
}

// fullSlice is an EndpointSlice of fullService with everything the API may hang on one.
func fullSlice() *discoveryv1.EndpointSlice {
	ep := func(addr, node string, ready, serving, terminating bool, zones ...string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{
			Addresses:  []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
			Hostname:   ptr.To("pod-" + node),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-" + addr, UID: "uid-pod"},
			NodeName:   ptr.To(node),
			Zone:       ptr.To("z1"),
			// DeprecatedTopology only comes from v1beta1 clients.
			DeprecatedTopology: map[string]string{"kubernetes.io/hostname": node},
		}
		if len(zones) > 0 {
			e.Hints = &discoveryv1.EndpointHints{}
			for _, z := range zones {
				e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
			e.Hints.ForNodes = []discoveryv1.ForNode{{Name: node}}
		}
		return e
	}
	eps := make([]discoveryv1.Endpoint, 0, 8) // as decoding leaves them: room to spare
	eps = append(eps,
		ep("10.244.1.5", "node-a", true, true, false, "z1"),
		ep("10.244.2.5", "node-b", true, true, false, "z2"),
		ep("10.244.3.5", "node-c", false, true, true, "z1", "z2"),
		ep("10.244.4.5", "node-d", true, true, false, "z1", "z2"))
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-abc12", UID: "uid-slice", ResourceVersion: "18", Generation: 5,
			GenerateName: "web-",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "web",
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
				"app":                        "web",
			},
			Annotations: map[string]string{
				v1.EndpointsLastChangeTriggerTime: "2026-01-02T03:04:05Z",
				"endpoints.kubernetes.io/other":   "x",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "uid-web"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:endpoints":{}}`)}}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](5353)},
		},
		Endpoints: eps,
	}
}

// The trimmer drops exactly what it says, and keeps the rest.
func TestTrimmerKeepsWhatKipvsReads(t *testing.T) {
	tr := trimmer{serviceAnnotations: proxy.ServiceAnnotations()}

	svc := fullService()
	want := fullService()
	want.ManagedFields = nil
	want.Labels = nil
	want.Annotations = map[string]string{proxy.AnnotationScheduler: "sh", proxy.AnnotationSchedulerFlags: "sh-fallback"}
	if _, err := tr.transform(svc); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, svc); d != "" {
		t.Errorf("trimmed Service (-want +got):\n%s", d)
	}

	sl := fullSlice()
	wantSl := fullSlice()
	wantSl.ManagedFields, wantSl.OwnerReferences = nil, nil
	wantSl.Labels = map[string]string{discoveryv1.LabelServiceName: "web"}
	wantSl.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-02T03:04:05Z"}
	for i := range wantSl.Endpoints {
		e := &wantSl.Endpoints[i]
		e.TargetRef, e.Hostname, e.DeprecatedTopology = nil, nil, nil
	}
	if _, err := tr.transform(sl); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantSl, sl); d != "" {
		t.Errorf("trimmed EndpointSlice (-want +got):\n%s", d)
	}
	if cap(sl.Endpoints) != len(sl.Endpoints) {
		t.Errorf("endpoints: cap %d for %d", cap(sl.Endpoints), len(sl.Endpoints))
	}

	// Idempotent, as client-go asks.
	again := svc.DeepCopy()
	againSl := sl.DeepCopy()
	tr.transform(again)
	tr.transform(againSl)
	if d := cmp.Diff(svc, again); d != "" {
		t.Errorf("Service trimmed twice (-once +twice):\n%s", d)
	}
	if d := cmp.Diff(sl, againSl); d != "" {
		t.Errorf("EndpointSlice trimmed twice (-once +twice):\n%s", d)
	}

	// The filter labels stay; without ServiceAnnotations every annotation does.
	svc = fullService()
	svc.Labels[LabelServiceProxyName] = "other"
	svc.Labels[v1.IsHeadlessService] = ""
	trimmer{}.transform(svc)
	if d := cmp.Diff(map[string]string{LabelServiceProxyName: "other", v1.IsHeadlessService: ""}, svc.Labels); d != "" {
		t.Errorf("Service labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(fullService().Annotations, svc.Annotations); d != "" {
		t.Errorf("Service annotations with no ServiceAnnotations (-want +got):\n%s", d)
	}
	node := mkNode("n1", map[string]string{"topology.kubernetes.io/zone": "z1"}, "10.244.1.0/24")
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	wantNode := node.DeepCopy()
	wantNode.ManagedFields = nil
	trimmer{}.transform(node)
	if d := cmp.Diff(wantNode, node); d != "" {
		t.Errorf("trimmed Node (-want +got):\n%s", d)
	}
}

// What the proxy builds from a trimmed Service and slice is what it builds from the
// originals, for every family, node and topology the objects exercise.
func TestTrimmedObjectsBuildTheSame(t *testing.T) {
	tr := trimmer{serviceAnnotations: proxy.ServiceAnnotations()}
	svc, sl := fullService(), fullSlice()
	tsvc, tsl := svc.DeepCopy(), sl.DeepCopy()
	tr.transform(tsvc)
	tr.transform(tsl)
	for _, node := range []string{"node-a", "node-b", "node-c", "node-x"} {
		for _, zone := range []string{"", "z1", "z2"} {
			o := &proxy.Options{
				Family: inet.IPv4, NodeName: node, Scheduler: "rr",
				NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")},
				LocalAddresses:    []netip.Addr{netip.MustParseAddr("192.168.1.10")},
			}
			if zone != "" {
				o.NodeLabels = map[string]string{proxy.ZoneLabel: zone}
			}
			want := proxy.BuildService(proxy.ServiceInput{Service: svc, Slices: []*discoveryv1.EndpointSlice{sl}}, o)
			got := proxy.BuildService(proxy.ServiceInput{Service: tsvc, Slices: []*discoveryv1.EndpointSlice{tsl}}, o)
			if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("node %s zone %q: built from trimmed objects (-original +trimmed):\n%s", node, zone, d)
			}
			if len(want.VirtualServers) == 0 {
				t.Fatalf("node %s zone %q: the Service builds nothing; the comparison proves nothing", node, zone)
			}
		}
	}
}

// The API source caches and hands out trimmed objects.
func TestAPISourceTrimsObjects(t *testing.T) {
	f := newFakeAPI(fullService(), fullSlice())
	src := startAPISourceWith(t, f, func(o *APISourceOptions) { o.ServiceAnnotations = proxy.ServiceAnnotations() })
	snap, err := src.All()
	if err != nil {
		t.Fatal(err)
	}
	tr := trimmer{serviceAnnotations: proxy.ServiceAnnotations()}
	want := &ServiceInfo{Service: fullService(), Slices: []*discoveryv1.EndpointSlice{fullSlice()}}
	tr.transform(want.Service)
	tr.transform(want.Slices[0])
	if d := cmp.Diff(map[types.NamespacedName]*ServiceInfo{nn("ns", "web"): want}, snap.Services); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}

	// An update is trimmed too.
	f.waitWatching(t, "services", "endpointslices")
	upd := fullSlice()
	upd.ResourceVersion = "19"
	upd.Endpoints = upd.Endpoints[:1]
	if _, err := f.client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.transform(upd)
	acc := collectUntil(t, src, []string{"ns/web -> 10.96.0.10[web-abc12:10.244.1.5]"}, nil)
	if d := cmp.Diff(upd, acc.services[nn("ns", "web")].Slices[0]); d != "" {
		t.Errorf("updated slice (-want +got):\n%s", d)
	}
}
