package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipvs/kipvs/internal/inet"
)

// Services and EndpointSlices reach kipvs either from the apiserver, which validated them,
// or from a source file, which nothing validated. So every field kipvs turns into kernel
// state is checked here, the way the apiserver checks it, and never converted blindly
// (an int32 port of 65616 would otherwise become 80). Two rules (docs/bad-input.md):
//
//   - A value the apiserver would reject makes the whole Service invalid: it is not
//     programmed at all, with one Problem per bad field. Guessing what a broken object meant
//     is worse than not serving it. A bad EndpointSlice port drops that slice, a bad
//     endpoint address that endpoint.
//   - An address the apiserver accepts but no VIP or real server may have (a multicast
//     external IP, any load balancer IP: the API only checks it parses) is skipped alone,
//     with a Problem; the rest of the Service is programmed.

// maxAffinityTimeout is the largest sessionAffinityConfig.clientIP.timeoutSeconds the
// apiserver accepts (one day).
const maxAffinityTimeout = 86400

// unusableAddress says why no VIP or real server may have address a, or "" when it may.
// The apiserver refuses most of these for external IPs and endpoints but none of them for
// load balancer IPs; the kernel refuses multicast, broadcast and 0.0.0.0/8 real servers and
// multicast IPv6 addresses on kube-ipvs0; a loopback or link-local VIP on kube-ipvs0 would
// capture the node's own traffic (169.254.169.254 is the cloud metadata address).
func unusableAddress(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.Is4() && a.As4()[0] == 0:
		return `in 0.0.0.0/8 ("this network"), which the kernel treats as broadcast`
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the limited broadcast address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsLinkLocalUnicast() && a.Is4():
		return "a link-local address (169.254.0.0/16, where the cloud metadata address 169.254.169.254 lives)"
	case a.IsLinkLocalUnicast():
		return "a link-local address (fe80::/10)"
	}
	return ""
}

// parseAddr parses an address field as the apiserver would accept it: an IP address
// without an IPv6 zone, IPv4 octets with leading zeros read as decimal, as kube-proxy reads
// them (inet.ParseAddrSloppy). The address is returned unmapped; bad is why it is not
// acceptable, and when only the zone is wrong, a still holds the parsed address (for its
// family).
func parseAddr(s string) (a netip.Addr, bad string) {
	a, ok := inet.ParseAddrSloppy(s)
	if !ok {
		return netip.Addr{}, fmt.Sprintf("%q is not an IP address", s)
	}
	if z := a.Zone(); z != "" {
		return a.WithZone(""), fmt.Sprintf("%q carries an IPv6 zone (%%%s), which the API does not accept and ipset and IPVS cannot take", s, z)
	}
	return a.Unmap(), ""
}

func validPort(p int32) bool { return p >= 1 && p <= 65535 }

// validateService checks the Service-wide fields kipvs programs and returns this family's
// cluster IPs; ok is false when the Service is invalid (every reason is a Problem).
func (b *builder) validateService() (clusterIPs []netip.Addr, ok bool) {
	before := len(b.st.Problems)
	spec := &b.svc.Spec

	switch spec.Type {
	case "", v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
	default:
		b.problem("spec.type", "InvalidServiceType", fmt.Sprintf("type %q is not one of ClusterIP, NodePort, LoadBalancer, ExternalName; the Service is not programmed", spec.Type))
	}

	switch spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
	case v1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > maxAffinityTimeout {
				b.problem("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "InvalidSessionAffinityTimeout",
					fmt.Sprintf("timeout %d is outside 1-%d seconds; the Service is not programmed", t, maxAffinityTimeout))
			}
		}
	default:
		b.problem("spec.sessionAffinity", "InvalidSessionAffinity", fmt.Sprintf("session affinity %q is not None or ClientIP; the Service is not programmed", spec.SessionAffinity))
	}

	switch spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal:
	default:
		b.problem("spec.externalTrafficPolicy", "InvalidTrafficPolicy", fmt.Sprintf("%q is not Cluster or Local; the Service is not programmed", spec.ExternalTrafficPolicy))
	}
	if p := spec.InternalTrafficPolicy; p != nil && *p != v1.ServiceInternalTrafficPolicyCluster && *p != v1.ServiceInternalTrafficPolicyLocal {
		b.problem("spec.internalTrafficPolicy", "InvalidTrafficPolicy", fmt.Sprintf("%q is not Cluster or Local; the Service is not programmed", *p))
	}

	type portKey struct {
		port  int32
		proto v1.Protocol
	}
	ports := map[portKey]int{}
	nodePorts := map[portKey]int{}
	names := map[string]int{}
	for i := range spec.Ports {
		sp := &spec.Ports[i]
		field := fmt.Sprintf("spec.ports[%d]", i)
		if len(spec.Ports) > 1 && sp.Name == "" {
			b.problem(field+".name", "InvalidPortName", "a name is required when a Service has more than one port (endpoints are matched by name); the Service is not programmed")
		} else if j, dup := names[sp.Name]; dup {
			b.problem(field+".name", "InvalidPortName", fmt.Sprintf("name %q is already used by spec.ports[%d]; the Service is not programmed", sp.Name, j))
		} else {
			names[sp.Name] = i
		}
		if !validPort(sp.Port) {
			b.problem(field+".port", "InvalidPort", fmt.Sprintf("port %d is outside 1-65535; the Service is not programmed", sp.Port))
		}
		// A target port equal to the port (as the file source defaults an unset one) is
		// covered by the port's check.
		if tp := sp.TargetPort; tp.Type == intstr.Int && tp.IntVal != 0 && tp.IntVal != sp.Port && !validPort(tp.IntVal) {
			b.problem(field+".targetPort", "InvalidPort", fmt.Sprintf("target port %d is outside 1-65535; the Service is not programmed", sp.TargetPort.IntVal))
		}
		if sp.NodePort != 0 && !validPort(sp.NodePort) {
			b.problem(field+".nodePort", "InvalidPort", fmt.Sprintf("node port %d is outside 1-65535; the Service is not programmed", sp.NodePort))
		}
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if _, known := protocolOf(sp.Protocol); !known {
			b.problem(field+".protocol", "UnsupportedProtocol", fmt.Sprintf("protocol %q is not TCP, UDP or SCTP; the Service is not programmed", sp.Protocol))
		} else {
			if j, dup := ports[portKey{sp.Port, proto}]; dup {
				b.problem(field, "DuplicatePort", fmt.Sprintf("port %d/%s is already spec.ports[%d]; the Service is not programmed", sp.Port, proto, j))
			} else {
				ports[portKey{sp.Port, proto}] = i
			}
			if sp.NodePort != 0 {
				if j, dup := nodePorts[portKey{sp.NodePort, proto}]; dup {
					b.problem(field+".nodePort", "DuplicatePort", fmt.Sprintf("node port %d/%s is already spec.ports[%d].nodePort; the Service is not programmed", sp.NodePort, proto, j))
				} else {
					nodePorts[portKey{sp.NodePort, proto}] = i
				}
			}
		}
	}
	if hc := spec.HealthCheckNodePort; hc != 0 && !validPort(hc) {
		b.problem("spec.healthCheckNodePort", "InvalidPort", fmt.Sprintf("health check node port %d is outside 1-65535; the Service is not programmed", hc))
	}

	clusterIPs = b.validateClusterIPs()
	return clusterIPs, len(b.st.Problems) == before
}

// validateClusterIPs checks spec.clusterIP(s) and spec.ipFamilies and returns this family's
// cluster IP (at most one).
func (b *builder) validateClusterIPs() []netip.Addr {
	spec := &b.svc.Spec
	ips, field := spec.ClusterIPs, "spec.clusterIPs"
	if len(ips) == 0 && spec.ClusterIP != "" {
		ips, field = []string{spec.ClusterIP}, "spec.clusterIP"
	} else if spec.ClusterIP != "" && len(ips) > 0 && spec.ClusterIP != ips[0] {
		b.problem("spec.clusterIP", "InvalidClusterIP", fmt.Sprintf("%q differs from spec.clusterIPs[0] %q; the Service is not programmed", spec.ClusterIP, ips[0]))
	}
	if len(ips) > 2 {
		b.problem(field, "InvalidClusterIP", fmt.Sprintf("%d cluster IPs: at most one per family is allowed; the Service is not programmed", len(ips)))
		return nil
	}
	var out []netip.Addr
	var fams []inet.Family
	for j, s := range ips {
		f := field
		if field == "spec.clusterIPs" {
			f = fmt.Sprintf("%s[%d]", field, j)
		}
		if s == "" || s == v1.ClusterIPNone {
			fams = append(fams, 0)
			continue
		}
		ip, bad := parseAddr(s)
		if bad != "" {
			b.problem(f, "InvalidClusterIP", bad+"; the Service is not programmed")
			fams = append(fams, 0)
			continue
		}
		fam := inet.IPv4
		if ip.Is6() {
			fam = inet.IPv6
		}
		fams = append(fams, fam)
		switch {
		case j == 1 && fams[0] == fam:
			b.problem(f, "InvalidClusterIP", fmt.Sprintf("%s is of the same family as spec.clusterIPs[0]; a dual-stack Service has one cluster IP per family; the Service is not programmed", ip))
		case unusableAddress(ip) != "":
			b.problem(f, "UnusableClusterIP", fmt.Sprintf("%s is %s; it cannot be a cluster IP, so the Service is not programmed", ip, unusableAddress(ip)))
		case !b.o.Family.Matches(ip):
		case slices.Contains(b.o.NodePortAddresses, ip) || b.o.isLocalAddress(ip):
			b.problem(f, "ClusterIPIsNodeAddress", fmt.Sprintf("cluster IP %s is an address of node %s; binding it on kube-ipvs0 would take the address from the node, so the Service is not programmed in %s", ip, b.o.NodeName, b.o.Family))
		default:
			out = append(out, ip)
		}
	}
	for i, f := range spec.IPFamilies {
		field := fmt.Sprintf("spec.ipFamilies[%d]", i)
		var fam inet.Family
		switch f {
		case v1.IPv4Protocol:
			fam = inet.IPv4
		case v1.IPv6Protocol:
			fam = inet.IPv6
		default:
			b.problem(field, "InvalidIPFamilies", fmt.Sprintf("%q is not IPv4 or IPv6; the Service is not programmed", f))
			continue
		}
		if i < len(fams) && fams[i] != 0 && fams[i] != fam {
			b.problem(field, "InvalidIPFamilies", fmt.Sprintf("%s does not match the family of spec.clusterIPs[%d] %s; the Service is not programmed", f, i, ips[i]))
		}
	}
	return out
}

// externalIPs returns this family's usable spec.externalIPs; the others are Problems.
func (b *builder) externalIPs() []netip.Addr {
	var out []netip.Addr
	for j, s := range b.svc.Spec.ExternalIPs {
		field := fmt.Sprintf("spec.externalIPs[%d]", j)
		ip, bad := parseAddr(s)
		switch {
		case bad != "" && (!ip.IsValid() || b.o.Family.Matches(ip)):
			b.problem(field, "InvalidExternalIP", bad+"; skipped")
		case bad != "" || !b.o.Family.Matches(ip):
		case unusableAddress(ip) != "":
			b.problem(field, "UnusableExternalIP", fmt.Sprintf("%s is %s; it cannot be a virtual server on kube-ipvs0, so it is skipped", ip, unusableAddress(ip)))
		case b.refuseClaim(field, ip, kindExternalIP):
		case !slices.Contains(out, ip):
			out = append(out, ip)
		}
	}
	return out
}

// refuseClaim reports, with a Problem on field, whether ip is an address no Service may
// claim as an external IP or a load balancer IP (kind), however valid: a virtual server
// there would take traffic that belongs to someone else. In order:
//
//   - an address of this node: a NodePort address, an address of its Node's status (a
//     cloud's public address need not be on a link), or for an external IP any address on
//     another link (the node's SSH port, its kubelet). A load balancer IP on another link
//     of the node is allowed only inside --kipvs-load-balancer-ip-cidrs (the operator
//     declares the range as load balancer addresses, e.g. a VIP kube-vip or keepalived puts
//     on the node); it is then served and not bound again;
//   - the apiserver's address (the kubeconfig's server, an endpoint of default/kubernetes):
//     bound on kube-ipvs0 it would cut the node off the apiserver, so no allow list admits it;
//   - inside the Service CIDRs, where only a Service's own cluster IP may be a VIP;
//   - unless the allow list of its kind contains it: inside a pod CIDR (the node's traffic
//     to that pod would go to the Service's endpoints instead), or inside a prefix on one of
//     the node's links or its gateway (the node's traffic to that neighbour, and with ARP
//     answered for kube-ipvs0's addresses the neighbours' traffic too);
//   - outside the allow list of its kind, when one is given.
func (b *builder) refuseClaim(field string, ip netip.Addr, kind VSKind) bool {
	o := b.o
	label, prefix, allow, flag := "external IP", "ExternalIP", o.ExternalIPCIDRs, "--kipvs-external-ip-cidrs"
	if kind == kindLoadBalancer {
		label, prefix, allow, flag = "load balancer IP", "LoadBalancerIP", o.LoadBalancerIPCIDRs, "--kipvs-load-balancer-ip-cidrs"
	}
	allowed := slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(ip) })
	var reason, why string
	switch {
	case slices.Contains(o.NodePortAddresses, ip) || slices.Contains(o.NodeStatusAddresses, ip) ||
		(o.isLocalAddress(ip) && (kind != kindLoadBalancer || !allowed)):
		reason, why = "IsNodeAddress", fmt.Sprintf("is an address of node %s; a virtual server on it would hijack the node's own traffic (its SSH port, its kubelet)", o.NodeName)
	case slices.Contains(o.APIServerAddresses, ip):
		reason, why = "IsAPIServer", "is the apiserver's address; bound on kube-ipvs0 it would cut the node off the apiserver"
	case slices.ContainsFunc(o.ServiceCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) }):
		i := slices.IndexFunc(o.ServiceCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) })
		reason, why = "InServiceCIDR", fmt.Sprintf("is inside the Service CIDR %s, where only a Service's own cluster IP may be a virtual server", o.ServiceCIDRs[i])
	case !allowed && containing(o.PodCIDRs, ip).IsValid():
		reason, why = "InPodCIDR", fmt.Sprintf("is inside the pod CIDR %s: a pod's address, whose traffic from this node would go to the Service's endpoints instead; "+
			"list it in %s to allow it", containing(o.PodCIDRs, ip), flag)
	case !allowed && containing(o.NodeLinkPrefixes, ip).IsValid():
		p := containing(o.NodeLinkPrefixes, ip)
		where := fmt.Sprintf("is inside %s, on a link of node %s", p, o.NodeName)
		if p.IsSingleIP() {
			where = fmt.Sprintf("is a gateway of node %s", o.NodeName)
		}
		reason, why = "OnNodeLink", fmt.Sprintf("%s: a neighbour's address, whose traffic from this node (and, answered by ARP or NDP, from the link) would go to the Service's endpoints instead; "+
			"list it in %s to allow it", where, flag)
	case len(allow) > 0 && !allowed:
		reason, why = "NotAllowed", fmt.Sprintf("is outside %s (%s), the ranges this node accepts %ss from", flag, prefixes(allow), label)
	default:
		return false
	}
	b.problem(field, prefix+reason, fmt.Sprintf("%s %s %s; it is skipped", label, ip, why))
	return true
}

// containing returns the first of ps that contains a, or the zero Prefix.
func containing(ps []netip.Prefix, a netip.Addr) netip.Prefix {
	if i := slices.IndexFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) }); i >= 0 {
		return ps[i]
	}
	return netip.Prefix{}
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// lbIP is a usable load balancer ingress IP; local ones are already on another link of
// the node (allowed by --kipvs-load-balancer-ip-cidrs) and are served but not bound again.
type lbIP struct {
	addr  netip.Addr
	local bool
}

// loadBalancerIPs returns this family's usable VIP-mode ingress IPs; the others are Problems.
func (b *builder) loadBalancerIPs() []lbIP {
	if b.svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []lbIP
	for j, ing := range b.svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy) {
			continue
		}
		field := fmt.Sprintf("status.loadBalancer.ingress[%d].ip", j)
		ip, bad := parseAddr(ing.IP)
		switch {
		case bad != "" && (!ip.IsValid() || b.o.Family.Matches(ip)):
			b.problem(field, "InvalidLoadBalancerIP", bad+"; skipped")
		case bad != "" || !b.o.Family.Matches(ip):
		case unusableAddress(ip) != "":
			b.problem(field, "UnusableLoadBalancerIP", fmt.Sprintf("load balancer IP %s is %s; it cannot be a virtual server on kube-ipvs0, so it is skipped", ip, unusableAddress(ip)))
		case b.refuseClaim(field, ip, kindLoadBalancer):
		case !slices.ContainsFunc(out, func(l lbIP) bool { return l.addr == ip }):
			out = append(out, lbIP{addr: ip, local: b.o.isLocalAddress(ip)})
		}
	}
	return out
}

// checkedSlice is one EndpointSlice of this family with the first address of each endpoint
// parsed once for all service ports; a skipped endpoint has the zero Addr.
type checkedSlice struct {
	*discoveryv1.EndpointSlice
	addrs []netip.Addr
}

// checkSlices validates this family's EndpointSlices: a slice with a port outside
// 1-65535 is dropped; an endpoint whose address is not of the slice's family, carries a
// zone, or is one no real server may have is skipped. Each is a Problem naming the slice.
func (b *builder) checkSlices(in []*discoveryv1.EndpointSlice) []checkedSlice {
	want := discoveryv1.AddressTypeIPv4
	if b.o.Family == inet.IPv6 {
		want = discoveryv1.AddressTypeIPv6
	}
	var out []checkedSlice
	for _, s := range in {
		if s == nil || s.AddressType != want {
			continue
		}
		obj := "endpointslice/" + s.Name
		valid := true
		for j, p := range s.Ports {
			if p.Port != nil && !validPort(*p.Port) {
				b.problem(fmt.Sprintf("%s ports[%d].port", obj, j), "InvalidPort",
					fmt.Sprintf("port %d is outside 1-65535; the slice's endpoints are not used", *p.Port))
				valid = false
			}
		}
		if !valid {
			continue
		}
		cs := checkedSlice{EndpointSlice: s, addrs: make([]netip.Addr, len(s.Endpoints))}
		for i, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			field := obj + " endpoints[" + strconv.Itoa(i) + "].addresses[0]"
			ip, bad := parseAddr(ep.Addresses[0])
			switch {
			case bad != "":
				b.problem(field, "InvalidEndpointAddress", bad+"; the endpoint is skipped")
			case !b.o.Family.Matches(ip):
				b.problem(field, "InvalidEndpointAddress", fmt.Sprintf("%s is not an %s address though the slice's addressType is %s; the endpoint is skipped", ip, b.o.Family, s.AddressType))
			case unusableAddress(ip) != "":
				b.problem(field, "UnusableEndpointAddress", fmt.Sprintf("%s is %s; it cannot be an IPVS real server, so the endpoint is skipped", ip, unusableAddress(ip)))
			default:
				cs.addrs[i] = ip
			}
		}
		out = append(out, cs)
	}
	return out
}
