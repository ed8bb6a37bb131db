package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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

// wide is a Service of namespace ns with nExt external IPs on nPorts TCP ports and one
// EndpointSlice of nEps ready endpoints on another node: (1 + nExt) x nPorts virtual servers
// of nEps real servers each. lb adds a LoadBalancer ingress (and node ports).
func wide(ns, name, clusterIP string, nExt, nPorts, nEps int, lb bool) ServiceInput {
	s := svc(ns, name, clusterIP)
	s.Spec.Ports = nil
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i := range nPorts {
		pn := fmt.Sprintf("p%d", i)
		sp := v1.ServicePort{Name: pn, Port: int32(1000 + i), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(9000)}
		if lb {
			sp.NodePort = int32(30000 + i)
		}
		s.Spec.Ports = append(s.Spec.Ports, sp)
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(pn), Port: ptr.To[int32](9000), Protocol: ptr.To(v1.ProtocolTCP)})
	}
	for i := range nExt {
		s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, fmt.Sprintf("198.51.%d.%d", i/250, 1+i%250))
	}
	if lb {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.77"}}
	}
	for i := range nEps {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", i/250, 1+i%250)},
			NodeName: ptr.To("node-b"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{sl}}
}

func realServers(st *ServiceState) int {
	n := 0
	for _, v := range st.VirtualServers {
		n += len(v.Destinations)
	}
	return n
}

// defaultCaps are testOptions with the per-Service limits at their defaults.
func defaultCaps() *Options {
	o := testOptions()
	o.MaxServiceSetMembers = DefaultMaxServiceSetMembers
	o.MaxServiceVirtualServers = DefaultMaxServiceVirtualServers
	o.MaxServiceRealServers = DefaultMaxServiceRealServers
	return o
}

// One Service of 180 external IPs x 180 ports stays under the set member limit (32,761
// members) but asks, with 100 endpoints, for 3.26 million real servers: refused whole,
// naming spec.externalIPs. A LoadBalancer of 2,500 ports on a node of 16 node port
// addresses (18 with the two of testOptions) has 7,502 set members but 50,000 virtual servers: refused, naming spec.ports.
func TestServiceOverServerLimitsIsRefused(t *testing.T) {
	many := defaultCaps()
	for i := range 16 {
		many.NodePortAddresses = append(many.NodePortAddresses, netip.AddrFrom4([4]byte{192, 168, 3, byte(i + 1)}))
	}
	for _, tc := range []struct {
		name   string
		in     ServiceInput
		o      *Options
		reason string
		field  string
	}{
		{"180 x 180 x 100 endpoints", wide("tenant", "wide", "10.96.0.60", 180, 180, 100, false), defaultCaps(), ReasonTooManyRealServers, "spec.externalIPs"},
		{"2,500 node ports x 16 addresses", wide("tenant", "np", "10.96.0.61", 0, 2500, 0, true), many, ReasonTooManyVirtualServers, "spec.ports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := BuildService(tc.in, tc.o)
			if len(st.VirtualServers)+len(st.Members)+len(st.Addresses)+len(st.OutFilter) != 0 {
				t.Errorf("refused Service still contributes %d virtual servers (%d real servers), %d members, %d addresses",
					len(st.VirtualServers), realServers(st), len(st.Members), len(st.Addresses))
			}
			if len(st.Problems) != 1 {
				t.Fatalf("problems %v, want one", st.Problems)
			}
			if p := st.Problems[0]; p.Reason != tc.reason || p.Field != tc.field {
				t.Errorf("problem %+v, want %s on %s", p, tc.reason, tc.field)
			}
		})
	}
}

// What legitimate Services need passes the per-Service limits at their defaults: 1,000
// endpoints on 4 ports of a LoadBalancer (cluster IP, load balancer IP and two node port
// addresses: 16 virtual servers, 16,000 real servers), 5,000 endpoints on 3 ports of a
// ClusterIP Service, 20 external IPs x 20 ports x 50 endpoints (21,000), one cluster IP
// with 32,767 ports (the most the set member limit lets one cluster IP have).
func TestLegitimateServicesPassServerLimits(t *testing.T) {
	for _, tc := range []struct {
		name           string
		in             ServiceInput
		wantVS, wantRS int
	}{
		{"1,000 endpoints x 4 ports, LoadBalancer", wide("a", "lb", "10.96.0.61", 0, 4, 1000, true), 16, 16000},
		{"5,000 endpoints x 3 ports", wide("a", "big", "10.96.0.62", 0, 3, 5000, false), 3, 15000},
		{"20 external IPs x 20 ports x 50 endpoints", wide("a", "ext", "10.96.0.63", 20, 20, 50, false), 420, 21000},
		{"32,767 ports", wide("a", "ports", "10.96.0.64", 0, 32767, 0, false), 32767, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := BuildService(tc.in, defaultCaps())
			if len(st.Problems) != 0 || len(st.VirtualServers) != tc.wantVS || realServers(st) != tc.wantRS {
				t.Errorf("%d virtual servers, %d real servers, problems %v; want %d, %d, none", len(st.VirtualServers), realServers(st), st.Problems, tc.wantVS, tc.wantRS)
			}
		})
	}
}

// 32 Services of 1,024 ports in one namespace would fill the cluster-ip set to its limit
// (32,768 here; the default, 1,048,576, is 32 Services of 32,768 ports). Ordinary namespaces may fill only the limit less the reserve of kube-system
// and default, so the last of them are held back and a later kube-system Service is
// programmed; a Service of another tenant is held with a Problem naming the namespace that
// holds the set, and is let in, its Problem cleared, once a hog is deleted.
func TestNamespaceFloodLeavesTheReserve(t *testing.T) {
	o := testOptions()
	d := NewDesired(o.Family)
	d.SetMemberLimit(1 << 15)
	for i := range 32 {
		st := BuildService(wide("tenant-a", fmt.Sprintf("hog%02d", i), fmt.Sprintf("10.97.0.%d", i+1), 0, 1024, 0, false), o)
		d.Update(st.Name, st, nil)
	}
	if held := len(d.Held()); held == 0 {
		t.Errorf("no hog held back: the cluster-ip set holds %d of %d", d.setSize[SetClusterIP], 1<<15)
	}
	dns := BuildService(wide("kube-system", "kube-dns", "10.96.0.10", 0, 3, 2, false), o)
	d.Update(dns.Name, dns, nil)
	if st := d.Service(dns.Name); len(st.Problems) != 0 || len(st.VirtualServers) != 3 {
		t.Fatalf("kube-system/kube-dns after the flood: %d virtual servers, problems %v; want 3, none", len(st.VirtualServers), st.Problems)
	}
	victim := BuildService(wide("tenant-b", "web", "10.96.0.20", 0, 2, 2, false), o)
	d.Update(victim.Name, victim, nil)
	st := d.Service(victim.Name)
	if len(st.VirtualServers) != 0 || len(st.Problems) != 1 || st.Problems[0].Reason != ReasonSetCapacityExceeded {
		t.Fatalf("tenant-b/web: %d virtual servers, problems %v; want it held", len(st.VirtualServers), st.Problems)
	}
	if msg := st.Problems[0].Message; !strings.Contains(msg, "set cluster-ip is full: namespace tenant-a holds 30,720 of 32,768 members") {
		t.Errorf("message %q does not name the namespace holding the set", msg)
	}
	d.Update(types.NamespacedName{Namespace: "tenant-a", Name: "hog00"}, nil, nil)
	if got := d.TakeReadmitted(); !slices.Contains(got, victim.Name) {
		t.Errorf("readmitted %v after a hog went, want %s", got, victim.Name)
	}
	if st := d.Service(victim.Name); len(st.Problems) != 0 || len(st.VirtualServers) != 2 {
		t.Errorf("tenant-b/web after a hog went: %d virtual servers, problems %v", len(st.VirtualServers), st.Problems)
	}
}

// The node-wide real-server budget: 50,000 Services x 4 endpoints are admitted under the
// default; under a small limit the Service that would exceed it is held back whole (naming
// the namespace holding the budget), kube-system keeps its reserve, and a held Service is
// let in when a Service goes.
func TestRealServerLimit(t *testing.T) {
	o := testOptions()
	t.Run("50,000 x 4 under the default", func(t *testing.T) {
		d := NewDesired(o.Family)
		d.SetMemberLimit(DefaultMaxSetMembers)
		d.RealServerLimit(DefaultMaxRealServers)
		in := wide("ns", "s", "10.96.0.1", 0, 1, 4, false)
		for i := range 50000 {
			in.Service.Name = fmt.Sprintf("s%05d", i)
			ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&255, i&255)
			in.Service.Spec.ClusterIP, in.Service.Spec.ClusterIPs = ip, []string{ip}
			st := BuildService(in, o)
			d.Update(st.Name, st, nil)
		}
		if held := d.Held(); len(held) != 0 {
			t.Errorf("%d Services held back, first %s", len(held), held[0])
		}
		if d.realServers != 200000 {
			t.Errorf("%d real servers, want 200,000", d.realServers)
		}
	})
	t.Run("held, reserved, readmitted", func(t *testing.T) {
		d := NewDesired(o.Family)
		d.RealServerLimit(1600) // reserve 100: ordinary namespaces 1,500
		var names []types.NamespacedName
		for i := range 4 {
			st := BuildService(wide("tenant-a", fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 0, 5, 100, false), o)
			d.Update(st.Name, st, nil)
			names = append(names, st.Name)
		}
		st := d.Service(names[3])
		if len(st.VirtualServers) != 0 || len(st.Problems) != 1 || st.Problems[0].Reason != ReasonRealServerCapacityExceeded ||
			st.Problems[0].Field != "endpoints" || !strings.Contains(st.Problems[0].Message, "namespace tenant-a holds 1,500 of") {
			t.Fatalf("the fourth Service of 500 real servers: %d virtual servers, problems %v; want it held naming tenant-a", len(st.VirtualServers), st.Problems)
		}
		d.Update(names[0], nil, nil)
		if got := d.TakeReadmitted(); !slices.Equal(got, names[3:]) {
			t.Errorf("readmitted %v, want %v", got, names[3:])
		}
		if st := d.Service(names[3]); len(st.Problems) != 0 || realServers(st) != 500 {
			t.Errorf("readmitted Service: %d real servers, problems %v", realServers(st), st.Problems)
		}
		// Ordinary namespaces hold 1,500 again: kube-system still has its reserve.
		sys := BuildService(wide("kube-system", "metrics", "10.96.0.9", 0, 1, 50, false), o)
		d.Update(sys.Name, sys, nil)
		if st := d.Service(sys.Name); len(st.Problems) != 0 || realServers(st) != 50 {
			t.Errorf("kube-system/metrics: %d real servers, problems %v; want 50, none", realServers(st), st.Problems)
		}
	})
}

// BenchmarkRealServerCost measures what kipvs's own model pays per real server: building
// and adding 50,000 Services x 4 endpoints (200,000 real servers), and one Service of 10
// ports x 6,500 endpoints (65,000, the per-Service limit's order). docs/bad-input.md quotes
// it per real server.
func BenchmarkRealServerCost(b *testing.B) {
	o := testOptions()
	b.Run("50000x4", func(b *testing.B) {
		for range b.N {
			d := NewDesired(o.Family)
			in := wide("ns", "s", "10.96.0.1", 0, 1, 4, false)
			for i := range 50000 {
				in.Service.Name = fmt.Sprintf("s%05d", i)
				ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&255, i&255)
				in.Service.Spec.ClusterIP, in.Service.Spec.ClusterIPs = ip, []string{ip}
				st := BuildService(in, o)
				d.Update(st.Name, st, nil)
			}
		}
	})
	b.Run("1x10x6500", func(b *testing.B) {
		in := wide("ns", "s", "10.96.0.1", 0, 10, 6500, false)
		for range b.N {
			d := NewDesired(o.Family)
			st := BuildService(in, o)
			d.Update(st.Name, st, nil)
		}
	})
}
