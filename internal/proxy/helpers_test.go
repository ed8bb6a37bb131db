package proxy

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/inet"
)

const testNode = "node-a"

func testOptions() *Options {
	return &Options{
		Family:            inet.IPv4,
		Scheduler:         "rr",
		NodeName:          testNode,
		NodeLabels:        map[string]string{ZoneLabel: "zone-a"},
		NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("192.168.2.10")},
		NodeIP:            netip.MustParseAddr("192.168.1.10"),
		MasqueradeBit:     14,
		LocalDetector:     LocalDetector{Mode: LocalClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
	}
}

type svcOpt func(*v1.Service)

func svc(ns, name, clusterIP string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func ports(p ...v1.ServicePort) svcOpt { return func(s *v1.Service) { s.Spec.Ports = p } }

func svcType(t v1.ServiceType) svcOpt { return func(s *v1.Service) { s.Spec.Type = t } }

func etpLocal(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }

func itpLocal(s *v1.Service) {
	p := v1.ServiceInternalTrafficPolicyLocal
	s.Spec.InternalTrafficPolicy = &p
}

func externalIPs(ips ...string) svcOpt { return func(s *v1.Service) { s.Spec.ExternalIPs = ips } }

func lbIngress(ips ...string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

func annotate(k, v string) svcOpt {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func affinity(timeout int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if timeout > 0 {
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
		}
	}
}

// ep describes one endpoint: "10.244.1.5" ready on another node; modifiers after a colon:
// "10.244.1.5:local", ":notready", ":terminating" (serving, not ready), ":readyterminating"
// (ready, not serving, terminating: what the EndpointSlice controller writes for a deleted
// pod of a Service with publishNotReadyAddresses), ":terminating-nilserving" (not ready,
// terminating, serving not set), ":zone-b" (a zone hint), ":fornode-NAME" (a node hint);
// several may follow each other.
func slice(svcName, name string, portName string, port int32, proto v1.Protocol, eps ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, e := range eps {
		parts := strings.Split(e, ":")
		if strings.Count(e, ":") > 3 { // IPv6 address
			s.AddressType = discoveryv1.AddressTypeIPv6
			parts = []string{e}
			if i := strings.Index(e, "|"); i >= 0 {
				parts = append([]string{e[:i]}, strings.Split(e[i+1:], "|")...)
			}
		}
		ep := discoveryv1.Endpoint{Addresses: []string{parts[0]}, NodeName: ptr.To("node-b")}
		for _, m := range parts[1:] {
			switch {
			case m == "local":
				ep.NodeName = ptr.To(testNode)
			case m == "notready":
				ep.Conditions.Ready = ptr.To(false)
				ep.Conditions.Serving = ptr.To(false)
			case m == "terminating":
				ep.Conditions.Ready = ptr.To(false)
				ep.Conditions.Serving = ptr.To(true)
				ep.Conditions.Terminating = ptr.To(true)
			case m == "readyterminating":
				ep.Conditions.Ready = ptr.To(true)
				ep.Conditions.Serving = ptr.To(false)
				ep.Conditions.Terminating = ptr.To(true)
			case m == "terminating-nilserving":
				ep.Conditions.Ready = ptr.To(false)
				ep.Conditions.Terminating = ptr.To(true)
			case strings.HasPrefix(m, "zone-"):
				if ep.Hints == nil {
					ep.Hints = &discoveryv1.EndpointHints{}
				}
				ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: m})
			case strings.HasPrefix(m, "fornode-"):
				if ep.Hints == nil {
					ep.Hints = &discoveryv1.EndpointHints{}
				}
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discoveryv1.ForNode{Name: strings.TrimPrefix(m, "fornode-")})
			}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}
