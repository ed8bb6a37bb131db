package watch

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The endpoints of default/kubernetes (the apiservers' own addresses) are part of the
// ServiceCIDRs record, so a moved apiserver changes it and the consumer rebuilds its
// options; other Services' slices do not.
func TestStoreKubernetesEndpoints(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	v6 := func(sl *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		sl.AddressType = discoveryv1.AddressTypeIPv6
		return sl
	}
	s := newTestStore(t)
	s.markSynced()
	s.setService(mkService(kubernetesServiceNamespace, kubernetesServiceName, "10.96.0.1"))
	s.setService(mkService("app", "web", "10.96.0.20"))
	_, _ = s.Pending()

	steps := []struct {
		name        string
		step        func()
		want        []netip.Addr
		wantChanged bool
	}{
		{"the apiservers' slice appears", func() {
			s.setSlice(mkSlice("default", "kubernetes", "kubernetes", "192.168.1.100", "192.168.1.101"))
		}, addrs("192.168.1.100", "192.168.1.101"), true},
		{"an IPv6 slice joins", func() {
			s.setSlice(v6(mkSlice("default", "kubernetes-v6", "kubernetes", "fd00:1::100")))
		}, addrs("192.168.1.100", "192.168.1.101", "fd00:1::100"), true},
		{"another Service's slice changes nothing", func() {
			s.setSlice(mkSlice("app", "web-1", "web", "10.244.1.5"))
		}, addrs("192.168.1.100", "192.168.1.101", "fd00:1::100"), false},
		{"the same slice again changes nothing", func() {
			s.setSlice(mkSlice("default", "kubernetes", "kubernetes", "192.168.1.101", "192.168.1.100"))
		}, addrs("192.168.1.100", "192.168.1.101", "fd00:1::100"), false},
		{"an apiserver moves", func() {
			s.setSlice(mkSlice("default", "kubernetes", "kubernetes", "192.168.1.100", "192.168.1.102"))
		}, addrs("192.168.1.100", "192.168.1.102", "fd00:1::100"), true},
		{"the IPv6 slice goes", func() { s.deleteSlice(nn("default", "kubernetes-v6")) }, addrs("192.168.1.100", "192.168.1.102"), true},
		{"the slice goes", func() { s.deleteSlice(nn("default", "kubernetes")) }, nil, true},
	}
	for _, st := range steps {
		st.step()
		if got := s.ServiceCIDRs().KubernetesEndpointIPs; !slices.Equal(got, st.want) {
			t.Errorf("%s: KubernetesEndpointIPs = %v, want %v", st.name, got, st.want)
		}
		ch, _ := s.Pending()
		if ch.ServiceCIDRsChanged != st.wantChanged || !slices.Equal(ch.ServiceCIDRs.KubernetesEndpointIPs, st.want) {
			t.Errorf("%s: Pending: ServiceCIDRsChanged = %v (want %v), KubernetesEndpointIPs = %v",
				st.name, ch.ServiceCIDRsChanged, st.wantChanged, ch.ServiceCIDRs.KubernetesEndpointIPs)
		}
	}
}

// The file source's atomic reload carries them too.
func TestStoreKubernetesEndpointsFromFile(t *testing.T) {
	s := newTestStore(t)
	s.markSynced()
	s.replaceAll(State{
		Services: []*v1.Service{mkService(kubernetesServiceNamespace, kubernetesServiceName, "10.96.0.1")},
		Slices:   []*discoveryv1.EndpointSlice{mkSlice("default", "kubernetes", "kubernetes", "192.168.1.100")},
	})
	if got, want := s.ServiceCIDRs().KubernetesEndpointIPs, []netip.Addr{netip.MustParseAddr("192.168.1.100")}; !slices.Equal(got, want) {
		t.Errorf("KubernetesEndpointIPs = %v, want %v", got, want)
	}
	s.replaceAll(State{})
	if got := s.ServiceCIDRs().KubernetesEndpointIPs; got != nil {
		t.Errorf("after the file dropped them: KubernetesEndpointIPs = %v", got)
	}
}
