package watch

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A cluster IP with leading zeros in its octets (the apiserver accepts it while
// StrictIPCIDRValidation is off) is read as kube-proxy reads it, as decimal: default/
// kubernetes's 010.096.000.001 is 10.96.0.1 for the clusterCIDR guard (a source file's
// Service gets its IP family the same way: filesource's TestLeadingZeroClusterIPFamily).
func TestLeadingZeroClusterIP(t *testing.T) {
	svc := &v1.Service{Spec: v1.ServiceSpec{ClusterIPs: []string{"010.096.000.001"}}}
	if got, want := serviceClusterIPs(svc), []netip.Addr{netip.MustParseAddr("10.96.0.1")}; !slices.Equal(got, want) {
		t.Errorf("serviceClusterIPs = %v, want %v", got, want)
	}
}
