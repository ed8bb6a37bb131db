package watch

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A cluster IP with leading zeros in its octets (the apiserver accepts it while
// StrictIPCIDRValidation is off) is read as kube-proxy reads it, as decimal: default/
// kubernetes's 010.096.000.001 is 10.96.0.1 for the clusterCIDR guard, and a source file's
// Service gets the IPv4 family from it, as from 10.96.0.1.
func TestLeadingZeroClusterIP(t *testing.T) {
	svc := &v1.Service{Spec: v1.ServiceSpec{ClusterIPs: []string{"010.096.000.001"}}}
	if got, want := serviceClusterIPs(svc), []netip.Addr{netip.MustParseAddr("10.96.0.1")}; !slices.Equal(got, want) {
		t.Errorf("serviceClusterIPs = %v, want %v", got, want)
	}
	file := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: "010.096.000.010", Ports: []v1.ServicePort{{Port: 53}}}}
	defaultService(file)
	if !slices.Equal(file.Spec.IPFamilies, []v1.IPFamily{v1.IPv4Protocol}) {
		t.Errorf("a source file's Service with cluster IP 010.096.000.010: ipFamilies %v, want [IPv4]", file.Spec.IPFamilies)
	}
}
