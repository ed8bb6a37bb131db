package watch

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A zoned cluster IP (only a source file can hold one) is not a cluster IP of
// default/kubernetes: it would never match a Service CIDR, and so hide a clusterCIDR
// overlap from the seed-001 guard.
func TestServiceClusterIPsSkipZoned(t *testing.T) {
	svc := &v1.Service{Spec: v1.ServiceSpec{ClusterIPs: []string{"fd00::1%eth0", "10.96.0.1", "::ffff:10.96.0.2", "bad"}}}
	want := []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.2")}
	if got := serviceClusterIPs(svc); !slices.Equal(got, want) {
		t.Fatalf("serviceClusterIPs = %v, want %v", got, want)
	}
}
