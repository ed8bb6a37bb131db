package proxy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

type kernelSvc struct {
	svc    *v1.Service
	slices []*discoveryv1.EndpointSlice
}

func kService(name, clusterIP string, mod func(*v1.Service), endpoints ...string) kernelSvc {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	if mod != nil {
		mod(s)
	}
	at := discoveryv1.AddressTypeIPv4
	if strings.Contains(clusterIP, ":") {
		at = discoveryv1.AddressTypeIPv6
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: at,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range endpoints {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-b")})
	}
	return kernelSvc{svc: s, slices: []*discoveryv1.EndpointSlice{sl}}
}

func lb(ips ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

// kernelSync programs the Services into fake kernels with the reconciler, as the daemon's
// full sync does, and returns the IPVS table and kube-ipvs0's addresses.
func kernelSync(t *testing.T, fam inet.Family, nodeAddr string, svcs []kernelSvc) string {
	t.Helper()
	ipv := ipvstest.NewFake()
	dummy := dummyiftest.NewFake("kube-ipvs0")
	nff := inet.IPv4
	if fam == inet.IPv6 {
		nff = inet.IPv6
	}
	rec := reconcile.New(reconcile.Kernel{IPVS: ipv, Filter: iptables.New(fam, ipsettest.NewFake(), netfiltertest.NewFake(nff)), Dummy: dummy, Conntrack: conntracktest.NewFake()},
		reconcile.Options{Family: fam, GracefulPeriod: 30 * time.Second, Clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))})
	opts := &proxy.Options{Family: fam, Scheduler: "rr", NodeName: "node-a", MasqueradeBit: 14,
		NodePortAddresses: []netip.Addr{netip.MustParseAddr(nodeAddr)}, NodeIP: netip.MustParseAddr(nodeAddr)}
	d := proxy.NewDesired(fam)
	for _, s := range svcs {
		d.Update(types.NamespacedName{Namespace: s.svc.Namespace, Name: s.svc.Name}, proxy.BuildService(proxy.ServiceInput{Service: s.svc, Slices: s.slices}, opts), nil)
	}
	if _, err := rec.FullSync(context.Background(), d, opts); err != nil {
		t.Fatalf("full sync failed: %v", err)
	}
	var b strings.Builder
	for _, dump := range []func() (string, error){ipv.Dump, dummy.Dump} {
		s, err := dump()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s)
	}
	return b.String()
}

// Addresses the apiserver accepts (or a source file carries) but the kernel refuses no
// longer fail the sync: the fake kernels reject them as the kernel does, the sync
// succeeds, and everything else is programmed.
func TestBadInputReachesNoKernel(t *testing.T) {
	v4 := []kernelSvc{
		kService("good", "10.96.0.10", nil, "10.244.1.5"),
		kService("mc-external-ip", "10.96.0.11", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"239.1.1.1", "203.0.113.7"} }, "10.244.1.6"),
		kService("lb-any", "10.96.0.12", lb("0.0.0.0", "239.1.1.2", "169.254.169.254", "203.0.113.30"), "10.244.1.7"),
		kService("broadcast-endpoint", "10.96.0.13", nil, "255.255.255.255", "224.0.0.9", "0.0.0.0", "10.244.1.8"),
		kService("bad-port", "10.96.0.14", func(s *v1.Service) { s.Spec.Ports[0].Port = 65616 }, "10.244.1.9"),
		kService("bad-affinity", "10.96.0.15", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](-1)}}
		}, "10.244.1.10"),
		kService("steals-node-ip", "192.168.1.10", nil, "10.244.1.11"),
	}
	v6 := []kernelSvc{
		kService("good6", "fd00::10", nil, "fd00:10:244::5"),
		kService("lb6", "fd00::11", lb("ff05::1", "fe80::1", "2001:db8::30%eth0", "2001:db8::30"), "fd00:10:244::6"),
		kService("zone6", "fd00::12", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"2001:db8::1%1", "2001:db8::7"} },
			"fe80::5", "2001:db8:244::5%eth0", "fd00:10:244::7"),
	}
	got := "=== IPv4\n" + kernelSync(t, inet.IPv4, "192.168.1.10", v4) + "=== IPv6\n" + kernelSync(t, inet.IPv6, "fd00:1::10", v6)
	golden.Check(t, "bad-input-kernel.golden", got)
}
