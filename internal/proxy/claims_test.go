package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/internal/inet"
)

// claimGuard is one class of address no external or load balancer IP may take unless the
// operator's allow list of its kind names it: a pod's address, a neighbour on one of the
// node's links (its gateway included).
type claimGuard struct {
	name   string
	reason string // after the kind's prefix
	opts   func(o *Options)
	// addr is the claimed address; allow a range of the allow list containing it.
	addr, allow string
}

func claimGuards(fam inet.Family) []claimGuard {
	p := func(s ...string) []netip.Prefix {
		out := make([]netip.Prefix, len(s))
		for i, x := range s {
			out[i] = netip.MustParsePrefix(x)
		}
		return out
	}
	if fam == inet.IPv6 {
		return []claimGuard{
			{"cluster-cidr", "InPodCIDR", func(o *Options) { o.PodCIDRs = p("fd00:10:244::/56") }, "fd00:10:244:1::5", "fd00:10:244:1::/64"},
			{"node-pod-cidr", "InPodCIDR", func(o *Options) { o.PodCIDRs = p("fd00:10:245:1::/64") }, "fd00:10:245:1::7", "fd00:10:245::/48"},
			{"link-prefix", "OnNodeLink", func(o *Options) { o.NodeLinkPrefixes = p("fd00:1::/64") }, "fd00:1::1", "fd00:1::/120"},
			{"gateway", "OnNodeLink", func(o *Options) { o.NodeLinkPrefixes = p("fd00:1::/64", "fd00:9::1/128") }, "fd00:9::1", "fd00:9::/64"},
		}
	}
	return []claimGuard{
		{"cluster-cidr", "InPodCIDR", func(o *Options) { o.PodCIDRs = p("10.244.0.0/16") }, "10.244.1.5", "10.244.1.0/24"},
		{"node-pod-cidr", "InPodCIDR", func(o *Options) { o.PodCIDRs = p("10.245.1.0/24") }, "10.245.1.7", "10.245.0.0/16"},
		{"link-prefix", "OnNodeLink", func(o *Options) { o.NodeLinkPrefixes = p("192.168.1.0/24") }, "192.168.1.1", "192.168.1.0/28"},
		{"gateway", "OnNodeLink", func(o *Options) { o.NodeLinkPrefixes = p("192.168.1.0/24", "172.31.0.1/32") }, "172.31.0.1", "172.31.0.0/24"},
	}
}

// claimService is a Service of family fam claiming an ordinary address and addr, as
// external IPs (kind kindExternalIP) or load balancer IPs; the field naming addr.
func claimService(fam inet.Family, kind VSKind, addr string) (svc *v1.Service, sl []*discoveryv1.EndpointSlice, field string) {
	ok, clusterIP, at, ep := "203.0.113.8", "10.96.200.7", discoveryv1.AddressTypeIPv4, "10.244.1.5"
	if fam == inet.IPv6 {
		ok, clusterIP, at, ep = "2001:db8::8", "fd00::40", discoveryv1.AddressTypeIPv6, "fd00:10:244::5"
	}
	claim, field := externalIPs(ok, addr), "spec.externalIPs[1]"
	if kind == kindLoadBalancer {
		claim, field = lbIngress(ok, addr), "status.loadBalancer.ingress[1].ip"
	}
	svc = svc_(clusterIP, claim)
	if fam == inet.IPv6 {
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	}
	return svc, []*discoveryv1.EndpointSlice{rawSlice("tenant", "tenant-1", at, 8080, ep)}, field
}

func svc_(clusterIP string, opt svcOpt) *v1.Service { return svc("tenant", "tenant", clusterIP, opt) }

func claimOptions(fam inet.Family, g claimGuard) *Options {
	o := testOptions()
	if fam == inet.IPv6 {
		v6Options(o)
	}
	g.opts(o)
	return o
}

// holds reports whether st programs address a anywhere: a virtual server, a set member, or
// bound on kube-ipvs0.
func holds(st *ServiceState, a netip.Addr) bool {
	return slices.ContainsFunc(st.VirtualServers, func(v *VirtualServer) bool { return v.Address == a }) ||
		slices.ContainsFunc(st.Members, func(m Member) bool { return m.Addr == a }) ||
		slices.Contains(st.Addresses, a)
}

// A pod's address (the cluster CIDR, this node's pod CIDRs) and an address on one of the
// node's links (a prefix it reaches directly, its gateway) are refused as external and load
// balancer IPs, in both families, with a Problem naming the field and the flag that allows
// it; the rest of the Service is programmed.
func TestClaimGuardsRefuse(t *testing.T) {
	for _, fam := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, kind := range []VSKind{kindExternalIP, kindLoadBalancer} {
			prefix, flag := "ExternalIP", "--kipvs-external-ip-cidrs"
			if kind == kindLoadBalancer {
				prefix, flag = "LoadBalancerIP", "--kipvs-load-balancer-ip-cidrs"
			}
			for _, g := range claimGuards(fam) {
				name := fam.String() + "/" + prefix + "/" + g.name
				s, sl, field := claimService(fam, kind, g.addr)
				st := BuildService(ServiceInput{Service: s, Slices: sl}, claimOptions(fam, g))
				if len(st.Problems) != 1 || st.Problems[0].Reason != prefix+g.reason || st.Problems[0].Field != field {
					t.Errorf("%s: problems %v, want one %s%s on %s", name, st.Problems, prefix, g.reason, field)
					continue
				}
				if msg := st.Problems[0].Message; !strings.Contains(msg, g.addr) || !strings.Contains(msg, flag) {
					t.Errorf("%s: message %q does not name the address and %s", name, msg, flag)
				}
				if a := netip.MustParseAddr(g.addr); holds(st, a) {
					t.Errorf("%s: refused %s is programmed", name, a)
				}
				if len(st.VirtualServers) < 2 {
					t.Errorf("%s: the rest of the Service must be programmed, got %d virtual servers", name, len(st.VirtualServers))
				}
			}
		}
	}
}

// The allow list of the kind (--kipvs-external-ip-cidrs, --kipvs-load-balancer-ip-cidrs)
// admits an address these guards refuse: the operator declares the range as one.
func TestClaimGuardsAllowList(t *testing.T) {
	for _, fam := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, kind := range []VSKind{kindExternalIP, kindLoadBalancer} {
			for _, g := range claimGuards(fam) {
				name := fam.String() + "/" + g.name
				s, sl, _ := claimService(fam, kind, g.addr)
				ok := "203.0.113.0/24"
				if fam == inet.IPv6 {
					ok = "2001:db8::/64"
				}
				o := claimOptions(fam, g)
				allow := []netip.Prefix{netip.MustParsePrefix(g.allow), netip.MustParsePrefix(ok)}
				if kind == kindLoadBalancer {
					o.LoadBalancerIPCIDRs = allow
					name += "/lb"
				} else {
					o.ExternalIPCIDRs = allow
				}
				st := BuildService(ServiceInput{Service: s, Slices: sl}, o)
				if len(st.Problems) != 0 {
					t.Errorf("%s: allowed by the list, got problems %v", name, st.Problems)
				}
				if a := netip.MustParseAddr(g.addr); !holds(st, a) || !slices.Contains(st.Addresses, a) {
					t.Errorf("%s: allowed %s is not programmed and bound", name, a)
				}
				// The other kind's list does not allow it.
				o = claimOptions(fam, g)
				if kind == kindLoadBalancer {
					o.ExternalIPCIDRs = allow
				} else {
					o.LoadBalancerIPCIDRs = allow
				}
				if st := BuildService(ServiceInput{Service: s, Slices: sl}, o); len(st.Problems) != 1 {
					t.Errorf("%s: the other kind's allow list admitted it: problems %v", name, st.Problems)
				}
			}
		}
	}
}

// The apiserver's addresses (the kubeconfig's server, default/kubernetes's endpoints) are
// refused whatever the allow lists say: no range declared for Services makes cutting the
// node off the apiserver right.
func TestClaimAPIServerNotOverridable(t *testing.T) {
	for _, fam := range []inet.Family{inet.IPv4, inet.IPv6} {
		api, allow := "192.168.1.100", "192.168.1.0/24"
		if fam == inet.IPv6 {
			api, allow = "fd00:1::100", "fd00:1::/64"
		}
		for _, kind := range []VSKind{kindExternalIP, kindLoadBalancer} {
			prefix := "ExternalIP"
			o := claimOptions(fam, claimGuard{opts: func(*Options) {}})
			o.APIServerAddresses = []netip.Addr{netip.MustParseAddr(api)}
			if kind == kindLoadBalancer {
				prefix = "LoadBalancerIP"
				o.LoadBalancerIPCIDRs = []netip.Prefix{netip.MustParsePrefix(allow)}
			} else {
				o.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix(allow)}
			}
			s, sl, field := claimService(fam, kind, api)
			st := BuildService(ServiceInput{Service: s, Slices: sl}, o)
			if !slices.ContainsFunc(st.Problems, func(p Problem) bool { return p.Reason == prefix+"IsAPIServer" && p.Field == field }) {
				t.Errorf("%s %s: problems %v, want %sIsAPIServer on %s", fam, prefix, st.Problems, prefix, field)
			}
			if holds(st, netip.MustParseAddr(api)) {
				t.Errorf("%s %s: the apiserver's address is programmed", fam, prefix)
			}
		}
	}
}
