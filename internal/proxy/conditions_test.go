package proxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Endpoint conditions read as kube-proxy v1.34 reads them (pkg/proxy/endpointslicecache.go,
// topology.go): an endpoint is used when its ready condition is true, terminating or not;
// only when none is ready, the serving terminating ones; a serving condition left unset
// counts as true. Found by upstream's "[sig-network] Services should be able to connect to
// terminating and unready endpoints if PublishNotReadyAddresses is true" on two nodes: the
// EndpointSlice controller keeps ready=true (serving=false, terminating=true) for a deleted
// pod of such a Service, kube-proxy keeps sending to it, kipvs dropped it (connection refused).
func TestEndpointConditionsAsKubeProxy(t *testing.T) {
	tcp := v1.ProtocolTCP
	clusterDests := func(st *ServiceState, kind VSKind) string {
		for _, v := range st.VirtualServers {
			if v.Kind == kind {
				var out []string
				for _, d := range v.Destinations {
					out = append(out, d.AddrPort().String())
				}
				return strings.Join(out, " ")
			}
		}
		return "<no " + kind.String() + " virtual server>"
	}
	for _, tc := range []struct {
		name      string
		svc       *v1.Service
		eps       []string
		kind      VSKind
		want      string
		wantLocal int // the health check's local endpoints (ETP=Local only)
	}{
		{name: "publishNotReadyAddresses: a deleted pod, alone", svc: svc("default", "web", "10.96.0.10"),
			eps: []string{"10.244.1.5:readyterminating"}, kind: kindClusterIP, want: "10.244.1.5:8080"},
		{name: "publishNotReadyAddresses: a deleted pod next to a ready one", svc: svc("default", "web", "10.96.0.10"),
			eps: []string{"10.244.1.5:readyterminating", "10.244.2.6"}, kind: kindClusterIP, want: "10.244.1.5:8080 10.244.2.6:8080"},
		{name: "ready terminating beats serving terminating", svc: svc("default", "web", "10.96.0.10"),
			eps: []string{"10.244.1.5:readyterminating", "10.244.2.6:terminating"}, kind: kindClusterIP, want: "10.244.1.5:8080"},
		{name: "serving not set counts as serving", svc: svc("default", "web", "10.96.0.10"),
			eps: []string{"10.244.1.5:terminating-nilserving", "10.244.2.6:notready"}, kind: kindClusterIP, want: "10.244.1.5:8080"},
		{name: "ETP=Local: a ready terminating local pod is healthy", svc: svc("default", "lb", "10.96.0.15", lbIngress("203.0.113.20"), etpLocal,
			ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30081})),
			eps: []string{"10.244.1.5", "10.244.2.6:local:readyterminating"}, kind: kindLoadBalancer, want: "10.244.2.6:8080", wantLocal: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := BuildService(ServiceInput{Service: tc.svc, Slices: []*discoveryv1.EndpointSlice{
				slice(tc.svc.Name, tc.svc.Name+"-1", "http", 8080, tcp, tc.eps...)}}, testOptions())
			if got := clusterDests(st, tc.kind); got != tc.want {
				t.Errorf("%s real servers %q, want %q (kube-proxy's)", tc.kind, got, tc.want)
			}
			if st.LocalEndpoints != tc.wantLocal {
				t.Errorf("health check local endpoints %d, want %d", st.LocalEndpoints, tc.wantLocal)
			}
		})
	}
}
