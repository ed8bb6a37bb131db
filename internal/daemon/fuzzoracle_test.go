package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipvs/kipvs/internal/proxy"
)

// The oracle judges a Service (with its EndpointSlices) by rules written here from the
// apiserver's validation of the fields kipvs reads and from the kernel's limits, without
// asking kipvs. A Service is
//
//   - wellFormed: the apiserver would admit it and the kernel can hold all of it; it must be
//     programmed in full, whatever the other objects are;
//   - partial: only list elements the apiserver admits are bad (an external IP, a load
//     balancer ingress IP, an endpoint address, an unknown scheduler annotation); kipvs
//     must skip exactly those, so the Service must be programmed as its sanitized copy
//     (those elements removed) would be;
//   - malformed: anything else; how much of it kipvs programs is its choice, but whatever it
//     programs must be made of the Service's valid values (upper bound, see explains).
type class int

const (
	wellFormed class = iota
	partial
	malformed
)

func (c class) String() string { return [...]string{"well-formed", "partial", "malformed"}[c] }

// verdict is the oracle's judgement of one Service.
type verdict struct {
	name    string
	class   class
	reasons []string
	// svc and slices are the sanitized objects (the originals when well-formed).
	svc    *v1.Service
	slices []*discoveryv1.EndpointSlice
	// The Service's valid values, for attributing kernel objects to a malformed Service:
	// virtual IPs with service ports, node addresses with node ports, endpoint addresses
	// with endpoint ports, the health check node port, source ranges, affinity timeouts.
	vips, eps                    map[netip.Addr]bool
	svcPorts, nodePorts, epPorts map[uint16]bool
	hcPort                       uint16
	// rsPorts maps a service port and a node port to the endpoint ports of its name.
	rsPorts    map[uint16]map[uint16]bool
	nets       []netip.Prefix
	timeouts   map[uint32]bool
	anyTimeout bool
}

var fuzzHostAddrs = []netip.Addr{netip.MustParseAddr(fuzzNodeIP4), netip.MustParseAddr(fuzzNodeIP6)}

// Schedulers and flags kipvs documents for its annotations (README, kipvs.io/scheduler).
var (
	oracleSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}
	oracleSchedFlags = map[string][]string{"sh": {"sh-fallback", "sh-port"}, "mh": {"mh-fallback", "mh-port"}}
)

// vipProblem says why s cannot be a virtual IP on this node ("" when it can).
func vipProblem(s string) string {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "not an IP address"
	case a.Zone() != "":
		return "has an IPv6 zone"
	case a.Is4In6():
		return "IPv4-mapped IPv6"
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "not a unicast address"
	case slices.Contains(fuzzHostAddrs, a):
		return "an address of the node"
	}
	return othersAddress(a)
}

// othersAddress says whose address a is when it is the apiserver's, a pod's (the cluster
// CIDR) or the node's gateway's or a neighbour's (the node's links), or "".
func othersAddress(a netip.Addr) string {
	switch {
	case a == netip.MustParseAddr(fuzzAPIServer4):
		return "the apiserver's address"
	case slices.ContainsFunc(fuzzClusterCIDRs, func(p netip.Prefix) bool { return p.Contains(a) }):
		return "inside the cluster CIDR (a pod's address)"
	case slices.ContainsFunc(fuzzNodeLinks, func(p netip.Prefix) bool { return p.Contains(a) }):
		return "on the node's link (its gateway or a neighbour)"
	}
	return ""
}

// fuzzClusterCIDRs is the fuzz daemon's --cluster-cidr.
var fuzzClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}

// endpointProblem says why s cannot be an endpoint address of a slice of type at.
func endpointProblem(s string, at discoveryv1.AddressType) string {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "not an IP address"
	case a.Zone() != "":
		return "has an IPv6 zone"
	case at == discoveryv1.AddressTypeIPv4 && !a.Is4(), at == discoveryv1.AddressTypeIPv6 && (!a.Is6() || a.Is4In6()):
		return "not of the slice's address type"
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "not a unicast address"
	}
	return ""
}

func validPort(p int32) bool { return p >= 1 && p <= 65535 }

func validTargetPort(p v1.ServicePort) bool {
	if p.TargetPort.Type == intstr.String { // an IANA service name
		s := p.TargetPort.StrVal
		return s != "" && len(s) <= 15 && strings.ToLower(s) == s && !strings.ContainsAny(s, " _.")
	}
	return validPort(p.TargetPort.IntVal)
}

func supportedProtocol(p v1.Protocol) bool {
	return p == v1.ProtocolTCP || p == v1.ProtocolUDP || p == v1.ProtocolSCTP
}

// judge classifies one Service and its slices.
func judge(svc *v1.Service, sl []*discoveryv1.EndpointSlice) *verdict {
	v := &verdict{name: svc.Namespace + "/" + svc.Name, vips: map[netip.Addr]bool{}, eps: map[netip.Addr]bool{},
		svcPorts: map[uint16]bool{}, nodePorts: map[uint16]bool{}, epPorts: map[uint16]bool{}, timeouts: map[uint32]bool{}}
	bad := func(format string, args ...any) {
		v.reasons = append(v.reasons, "malformed: "+fmt.Sprintf(format, args...))
	}
	elem := func(format string, args ...any) { v.reasons = append(v.reasons, "skip: "+fmt.Sprintf(format, args...)) }
	allow := func(m map[netip.Addr]bool, s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			m[a] = true
		}
	}
	san := svc.DeepCopy()
	sp := &san.Spec

	switch sp.Type {
	case v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
	default:
		bad("type %q", sp.Type)
	}
	external := sp.Type == v1.ServiceTypeNodePort || sp.Type == v1.ServiceTypeLoadBalancer || len(sp.ExternalIPs) > 0

	// Cluster IPs, families and the family policy.
	if len(sp.ClusterIPs) == 0 || sp.ClusterIP != sp.ClusterIPs[0] {
		bad("clusterIP %q is not clusterIPs[0]", sp.ClusterIP)
	}
	if len(sp.IPFamilies) != len(sp.ClusterIPs) {
		bad("%d ipFamilies for %d clusterIPs", len(sp.IPFamilies), len(sp.ClusterIPs))
	}
	for k, s := range sp.ClusterIPs {
		if why := vipProblem(s); why != "" {
			bad("clusterIPs[%d] %q: %s", k, s, why)
			continue
		}
		allow(v.vips, s)
		a := netip.MustParseAddr(s)
		if k < len(sp.IPFamilies) && (sp.IPFamilies[k] == v1.IPv4Protocol) != a.Is4() {
			bad("clusterIPs[%d] %s is not of ipFamilies[%d] %s", k, s, k, sp.IPFamilies[k])
		}
	}
	if len(sp.IPFamilies) == 2 && sp.IPFamilies[0] == sp.IPFamilies[1] {
		bad("ipFamilies %v", sp.IPFamilies)
	}
	switch pol := sp.IPFamilyPolicy; {
	case pol == nil:
		bad("no ipFamilyPolicy")
	case *pol == v1.IPFamilyPolicySingleStack && len(sp.ClusterIPs) != 1,
		*pol == v1.IPFamilyPolicyRequireDualStack && len(sp.ClusterIPs) != 2:
		bad("ipFamilyPolicy %s with %d clusterIPs", *pol, len(sp.ClusterIPs))
	}

	// Ports: names and (port, protocol) pairs are the whole list's business; a port out of
	// range or of a protocol IPVS lacks is one element.
	if len(sp.Ports) == 0 {
		bad("no ports")
	}
	names := map[string]bool{}
	pairs := map[string]bool{}
	var keep []v1.ServicePort
	for j, p := range sp.Ports {
		if len(sp.Ports) > 1 && p.Name == "" {
			bad("ports[%d] has no name", j)
		}
		if names[p.Name] {
			bad("ports[%d] name %q repeated", j, p.Name)
		}
		names[p.Name] = true
		pair := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if pairs[pair] {
			bad("ports[%d] %s repeated", j, pair)
		}
		pairs[pair] = true
		if !validPort(p.Port) || !supportedProtocol(p.Protocol) {
			// The apiserver rejects the Service: skipping the port or the whole Service
			// are both sound, so only the upper bound applies.
			bad("ports[%d] %s", j, pair)
			continue
		}
		v.svcPorts[uint16(p.Port)] = true
		if !validTargetPort(p) {
			bad("ports[%d] targetPort %s", j, p.TargetPort.String())
		}
		switch {
		case sp.Type == v1.ServiceTypeNodePort && !validPort(p.NodePort),
			sp.Type == v1.ServiceTypeLoadBalancer && p.NodePort != 0 && !validPort(p.NodePort),
			!(sp.Type == v1.ServiceTypeNodePort || sp.Type == v1.ServiceTypeLoadBalancer) && p.NodePort != 0:
			bad("ports[%d] nodePort %d for type %s", j, p.NodePort, sp.Type)
		}
		if validPort(p.NodePort) {
			v.nodePorts[uint16(p.NodePort)] = true
		}
		keep = append(keep, p)
	}
	sp.Ports = keep

	// Session affinity.
	switch sp.SessionAffinity {
	case v1.ServiceAffinityNone:
		if sp.SessionAffinityConfig != nil {
			bad("sessionAffinityConfig with sessionAffinity None")
		}
	case v1.ServiceAffinityClientIP:
		v.timeouts[proxy.DefaultAffinityTimeout] = true
		if c := sp.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > 86400 {
				bad("sessionAffinityConfig.clientIP.timeoutSeconds %d", t)
				v.anyTimeout = true // defaulted or clamped: kipvs's choice, as long as it is valid
			} else {
				v.timeouts[uint32(t)] = true
			}
		}
	default:
		bad("sessionAffinity %q", sp.SessionAffinity)
	}

	// Traffic policies and the health check node port.
	switch {
	case external && sp.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyCluster && sp.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal,
		!external && sp.ExternalTrafficPolicy != "":
		bad("externalTrafficPolicy %q", sp.ExternalTrafficPolicy)
	}
	if itp := sp.InternalTrafficPolicy; itp == nil || (*itp != v1.ServiceInternalTrafficPolicyCluster && *itp != v1.ServiceInternalTrafficPolicyLocal) {
		bad("internalTrafficPolicy")
	}
	hcWanted := sp.Type == v1.ServiceTypeLoadBalancer && sp.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	switch {
	case hcWanted && !validPort(sp.HealthCheckNodePort), !hcWanted && sp.HealthCheckNodePort != 0:
		bad("healthCheckNodePort %d", sp.HealthCheckNodePort)
	}
	if validPort(sp.HealthCheckNodePort) {
		v.hcPort = uint16(sp.HealthCheckNodePort)
	}

	// External IPs and load balancer ingress IPs: each is one element.
	var exts []string
	for j, s := range sp.ExternalIPs {
		if why := vipProblem(s); why != "" {
			elem("externalIPs[%d] %q: %s", j, s, why)
			continue
		}
		allow(v.vips, s)
		exts = append(exts, s)
	}
	sp.ExternalIPs = exts
	var ings []v1.LoadBalancerIngress
	for j, ing := range san.Status.LoadBalancer.Ingress {
		if ing.IP != "" && sp.Type == v1.ServiceTypeLoadBalancer {
			if why := vipProblem(ing.IP); why != "" {
				elem("status.loadBalancer.ingress[%d].ip %q: %s", j, ing.IP, why)
				continue
			}
			allow(v.vips, ing.IP)
		}
		ings = append(ings, ing)
	}
	san.Status.LoadBalancer.Ingress = ings
	if len(sp.LoadBalancerSourceRanges) > 0 && sp.Type != v1.ServiceTypeLoadBalancer {
		bad("loadBalancerSourceRanges on type %s", sp.Type)
	}
	// Hostile sizes (fuzzgen's "huge"): with a VIP and a port, more set members than the
	// per-Service limit; kipvs may refuse the Service (it does, whole, in each family
	// where it is over), and must keep every other Service whole.
	if hostileSize(svc) {
		bad("%d ports, %d loadBalancerSourceRanges, %d externalIPs: beyond a per-Service limit (set members %d, virtual servers %d, real servers %d)",
			len(svc.Spec.Ports), len(svc.Spec.LoadBalancerSourceRanges), len(svc.Spec.ExternalIPs), fuzzMaxServiceSetMembers, fuzzMaxServiceVirtualServers, fuzzMaxServiceRealServers)
	}
	for j, s := range sp.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			bad("loadBalancerSourceRanges[%d] %q is not a CIDR", j, s)
		case p.Bits() == 0:
			// Valid for the apiserver, but hash:net takes no /0: programmed as written it
			// cannot be, so how kipvs allows all is its choice.
			bad("loadBalancerSourceRanges[%d] %s is /0", j, s)
			v.nets = append(v.nets, p)
		default:
			v.nets = append(v.nets, p.Masked())
		}
	}

	// kipvs's annotations.
	sched := "rr"
	if a, ok := san.Annotations[proxy.AnnotationScheduler]; ok {
		if slices.Contains(oracleSchedulers, a) {
			sched = a
		} else {
			elem("annotation %s=%q", proxy.AnnotationScheduler, a)
			delete(san.Annotations, proxy.AnnotationScheduler)
		}
	}
	if a, ok := san.Annotations[proxy.AnnotationSchedulerFlags]; ok {
		for _, f := range strings.Split(a, ",") {
			if !slices.Contains(oracleSchedFlags[sched], f) {
				bad("annotation %s=%q for scheduler %s", proxy.AnnotationSchedulerFlags, a, sched)
			}
		}
	}

	// EndpointSlices: an endpoint or an endpoint port is one element.
	for k, s := range sl {
		s = s.DeepCopy()
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			v.slices = append(v.slices, s) // FQDN: valid, and never used by a proxy
			continue
		}
		var eps []discoveryv1.Endpoint
		for m, e := range s.Endpoints {
			if why := endpointProblem(e.Addresses[0], s.AddressType); why != "" {
				elem("slice %d endpoint %d %q: %s", k, m, e.Addresses[0], why)
				continue
			}
			allow(v.eps, e.Addresses[0])
			eps = append(eps, e)
		}
		s.Endpoints = eps
		var ports []discoveryv1.EndpointPort
		for j, p := range s.Ports {
			if p.Port != nil && !validPort(*p.Port) {
				// Dropping the port or the whole slice are both sound: upper bound only.
				bad("slice %d port %d is %d", k, j, *p.Port)
				continue
			}
			if p.Port != nil {
				v.epPorts[uint16(*p.Port)] = true
			}
			ports = append(ports, p)
		}
		s.Ports = ports
		v.slices = append(v.slices, s)
	}
	v.svc = san
	v.rsPorts = map[uint16]map[uint16]bool{}
	for _, p := range sp.Ports {
		for _, s := range v.slices {
			for _, ep := range s.Ports {
				if ep.Port == nil || ep.Name == nil || *ep.Name != p.Name || ep.Protocol == nil || *ep.Protocol != p.Protocol {
					continue
				}
				for _, vp := range []int32{p.Port, p.NodePort} {
					if validPort(vp) {
						if v.rsPorts[uint16(vp)] == nil {
							v.rsPorts[uint16(vp)] = map[uint16]bool{}
						}
						v.rsPorts[uint16(vp)][uint16(*ep.Port)] = true
					}
				}
			}
		}
	}

	for _, r := range v.reasons {
		if strings.HasPrefix(r, "malformed: ") {
			v.class = malformed
			return v
		}
	}
	if len(v.reasons) > 0 {
		v.class = partial
	}
	return v
}
