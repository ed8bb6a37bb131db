package filesource

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A source file's Service with a cluster IP with leading zeros in its octets gets the IPv4
// family from it, as from the same address without them: the address is read as kube-proxy
// reads it, as decimal (watch's TestLeadingZeroClusterIP).
func TestLeadingZeroClusterIPFamily(t *testing.T) {
	file := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: "010.096.000.010", Ports: []v1.ServicePort{{Port: 53}}}}
	defaultService(file)
	if !slices.Equal(file.Spec.IPFamilies, []v1.IPFamily{v1.IPv4Protocol}) {
		t.Errorf("a source file's Service with cluster IP 010.096.000.010: ipFamilies %v, want [IPv4]", file.Spec.IPFamilies)
	}
}
