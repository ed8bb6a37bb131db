package proxy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// hugeLB is a LoadBalancer Service with n source ranges on p ports: n x p members of
// KUBE-LOAD-BALANCER-SOURCE-CIDR.
func hugeLB(ns, name, clusterIP, lbIP string, n, p int) *v1.Service {
	var sps []v1.ServicePort
	for i := range p {
		sps = append(sps, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(8000 + i), Protocol: v1.ProtocolTCP, NodePort: int32(30000 + i)})
	}
	s := svc(ns, name, clusterIP, ports(sps...), lbIngress(lbIP))
	for i := range n {
		s.Spec.LoadBalancerSourceRanges = append(s.Spec.LoadBalancerSourceRanges, fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256))
	}
	return s
}

// A Service needing more members than the per-Service limit contributes only a Problem
// naming it and the field that makes it large: nothing of it is programmed.
func TestServiceOverMemberLimitIsRefused(t *testing.T) {
	o := testOptions()
	o.MaxServiceSetMembers = DefaultMaxServiceSetMembers
	st := BuildService(ServiceInput{Service: hugeLB("tenant", "big", "10.96.0.50", "203.0.113.50", 7000, 10)}, o)
	if len(st.VirtualServers)+len(st.Members)+len(st.Addresses)+len(st.OutFilter) != 0 || st.HealthCheckNodePort != 0 {
		t.Errorf("refused Service still contributes %d virtual servers, %d members, %d addresses, %d out-filter entries",
			len(st.VirtualServers), len(st.Members), len(st.Addresses), len(st.OutFilter))
	}
	if len(st.Problems) != 1 {
		t.Fatalf("problems %v, want one", st.Problems)
	}
	p := st.Problems[0]
	if p.Service != (types.NamespacedName{Namespace: "tenant", Name: "big"}) || p.Field != "spec.loadBalancerSourceRanges" ||
		p.Reason != ReasonTooManySetMembers || !strings.Contains(p.Message, "70000 in load-balancer-source-cidr") {
		t.Errorf("problem %+v", p)
	}
	// Within the limit, or with no limit, it is programmed.
	o.MaxServiceSetMembers = 0
	if st := BuildService(ServiceInput{Service: hugeLB("tenant", "big", "10.96.0.50", "203.0.113.50", 7000, 10)}, o); len(st.Members) < 70000 || len(st.Problems) != 0 {
		t.Errorf("without a limit: %d members, problems %v", len(st.Members), st.Problems)
	}
}

// With a set limit, the Service whose members would take a set beyond it is held back
// (only a Problem), the others are in; when room is freed it is let in, and reported.
func TestSetLimitHoldsBackTheOverflowingService(t *testing.T) {
	o := testOptions()
	d := NewDesired(o.Family)
	d.SetMemberLimit(1000)
	build := func(s *v1.Service) *ServiceState { return BuildService(ServiceInput{Service: s}, o) }
	small := build(hugeLB("a", "small", "10.96.0.10", "203.0.113.10", 300, 1))
	big := build(hugeLB("z", "big", "10.96.0.11", "203.0.113.11", 800, 1))
	d.Update(small.Name, small, nil)
	d.Update(big.Name, big, nil)
	if got := d.setSize[SetLoadBalancerSourceNet]; got != 300 {
		t.Errorf("source-cidr set holds %d, want the small Service's 300", got)
	}
	if held := d.Held(); len(held) != 1 || held[0] != big.Name {
		t.Fatalf("held %v, want %s", held, big.Name)
	}
	st := d.Service(big.Name)
	if len(st.Members) != 0 || len(st.VirtualServers) != 0 || len(st.Problems) != 1 || st.Problems[0].Reason != ReasonSetCapacityExceeded ||
		st.Problems[0].Field != "spec.loadBalancerSourceRanges" {
		t.Fatalf("held Service contributes %+v", st)
	}
	// The small one goes: the big one fits and is let in, touching its objects.
	touched := NewTouched()
	d.Update(small.Name, nil, touched)
	if held := d.Held(); len(held) != 0 {
		t.Errorf("still held: %v", held)
	}
	if got := d.TakeReadmitted(); len(got) != 1 || got[0] != big.Name {
		t.Errorf("readmitted %v", got)
	}
	if got := d.setSize[SetLoadBalancerSourceNet]; got != 800 {
		t.Errorf("source-cidr set holds %d, want 800", got)
	}
	if len(touched.VirtualServers) == 0 || len(touched.Members) < 1100 {
		t.Errorf("touched %d virtual servers, %d members: the readmitted Service's objects must be synced", len(touched.VirtualServers), len(touched.Members))
	}
	if st := d.Service(big.Name); len(st.Problems) != 0 || len(st.Members) == 0 {
		t.Errorf("readmitted Service: %d members, problems %v", len(st.Members), st.Problems)
	}
}
