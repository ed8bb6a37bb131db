package proxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The apiserver accepts IPv4 with leading zeros in the legacy Service and EndpointSlice
// fields while StrictIPCIDRValidation is off (v1.34's default), and kube-proxy reads them
// as decimal (k8s.io/utils/net.ParseIPSloppy, ParseCIDRSloppy): 010.096.000.010 is
// 10.96.0.10. A Service written that way contributes exactly what its canonical spelling
// does: no problem, the same virtual servers, members and addresses; in particular
// 010.0.0.0/8 in loadBalancerSourceRanges lets 10.0.0.0/8 in (ignoring it filtered those
// sources out).
func TestLeadingZeroAddressesAsKubeProxy(t *testing.T) {
	build := func(clusterIP, externalIP, lbIP, sourceRange, endpoint string) string {
		s := svc("default", "zeros", clusterIP, svcType(v1.ServiceTypeLoadBalancer), externalIPs(externalIP), lbIngress(lbIP),
			ports(v1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}),
			func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{sourceRange} })
		st := BuildService(ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{slice("zeros", "zeros-1", "http", 8080, v1.ProtocolTCP, endpoint)}}, testOptions())
		return formatState(st)
	}
	want := build("10.96.0.10", "203.0.113.7", "198.51.100.90", "10.0.0.0/8", "10.244.1.5")
	got := build("010.096.000.010", "203.000.113.007", "198.051.100.090", "010.0.0.0/8", "010.244.001.005")
	if got != want {
		t.Errorf("written with leading zeros:\n%s\nwant what the canonical spelling gives:\n%s", got, want)
	}
	if strings.Contains(got, "problem ") || !strings.Contains(got, "10.96.0.10") {
		t.Errorf("contribution:\n%s", got)
	}
}
