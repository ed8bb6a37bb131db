package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

// The victims of issue 23: default/kubernetes (10.96.0.1:443/TCP) and kube-system/kube-dns
// (10.96.0.10:53/UDP and TCP), each with its real servers.
func victimInputs() map[types.NamespacedName]ServiceInput {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	apiSlice := slice("kubernetes", "kubernetes", "https", 6443, tcp, "192.168.1.100")
	dnsUDP := slice("kube-dns", "kube-dns-1", "dns", 53, udp, "10.244.0.5", "10.244.3.6")
	dnsTCP := slice("kube-dns", "kube-dns-2", "dns-tcp", 53, tcp, "10.244.0.5", "10.244.3.6")
	return map[types.NamespacedName]ServiceInput{
		{Namespace: "default", Name: "kubernetes"}: {
			Service: svc("default", "kubernetes", "10.96.0.1", ports(v1.ServicePort{Name: "https", Port: 443, Protocol: tcp})),
			Slices:  []*discoveryv1.EndpointSlice{apiSlice},
		},
		{Namespace: "kube-system", Name: "kube-dns"}: {
			Service: svc("kube-system", "kube-dns", "10.96.0.10", ports(
				v1.ServicePort{Name: "dns", Port: 53, Protocol: udp}, v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: tcp})),
			Slices: []*discoveryv1.EndpointSlice{dnsTCP, dnsUDP},
		},
	}
}

// tenant is a hostile Service in namespace ns claiming the victims' cluster IPs and ports
// with claim (externalIPs or a LoadBalancer ingress, with source ranges that would drop
// every other source), backed by the tenant's own pod.
func tenant(ns string, claim svcOpt) ServiceInput {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	return ServiceInput{
		Service: svc(ns, "evil", "10.96.200.7", claim, ports(
			v1.ServicePort{Name: "https", Port: 443, Protocol: tcp, NodePort: 30443},
			v1.ServicePort{Name: "dns", Port: 53, Protocol: udp, NodePort: 30053},
			v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: tcp, NodePort: 30054})),
		Slices: []*discoveryv1.EndpointSlice{
			slice("evil", "evil-1", "https", 8443, tcp, "10.244.7.7"),
			slice("evil", "evil-2", "dns", 5353, udp, "10.244.7.7"),
			slice("evil", "evil-3", "dns-tcp", 5353, tcp, "10.244.7.7"),
		},
	}
}

func claimExternalIPs(s *v1.Service) { externalIPs("10.96.0.1", "10.96.0.10")(s) }

func claimLoadBalancer(s *v1.Service) {
	lbIngress("10.96.0.1", "10.96.0.10")(s)
	s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
}

// ownedState renders what d holds for the virtual servers of keys: each one with its real
// servers, every set member of its address, protocol and port, and its out-filter entry.
func ownedState(d *Desired, keys []VSKey) string {
	var b strings.Builder
	for _, k := range keys {
		if v := d.VirtualServer(k); v != nil {
			b.WriteString(FormatVirtualServer(v))
		}
		for _, m := range d.Members() {
			if m.Addr == k.Address && m.Proto == k.Protocol && m.Port == k.Port {
				fmt.Fprintf(&b, "member %s %s\n", m.Set, m)
			}
		}
		if slices.Contains(d.OutFilter(), k) {
			fmt.Fprintf(&b, "out-filter %s\n", k)
		}
	}
	return b.String()
}

// A Service's own cluster IP wins its virtual servers over any other Service's externalIP
// or LoadBalancer claim, whatever the namespace names sort as and whatever the order the
// Services arrive in: the victims keep their real servers, the losing claims add nothing
// to the kernel (no set member that would masquerade or filter the victim's traffic), and
// the Problem lands on the claimant only.
func TestClusterIPOwnsItsVirtualServers(t *testing.T) {
	for _, claim := range []struct {
		name  string
		opt   svcOpt
		field string
	}{{"externalIPs", claimExternalIPs, "spec.externalIPs"}, {"loadBalancer", claimLoadBalancer, "status.loadBalancer.ingress"}} {
		for _, ns := range []string{"app", "zzz", "a", "default", "kube-system"} {
			for _, tenantFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/tenant-first=%t", claim.name, ns, tenantFirst), func(t *testing.T) {
					o := testOptions()
					victims := victimInputs()
					evil := tenant(ns, claim.opt)
					evilName := types.NamespacedName{Namespace: ns, Name: "evil"}

					// What the kernel holds for the victims' virtual servers without the tenant.
					want := NewDesired(inet.IPv4)
					var keys []VSKey
					for name, in := range victims {
						st := BuildService(in, o)
						want.Update(name, st, nil)
						for _, v := range st.VirtualServers {
							keys = append(keys, v.VSKey)
						}
					}
					slices.SortFunc(keys, VSKey.Compare)

					d := NewDesired(inet.IPv4)
					if tenantFirst {
						d.Update(evilName, BuildService(evil, o), nil)
					}
					for _, name := range []types.NamespacedName{{Namespace: "kube-system", Name: "kube-dns"}, {Namespace: "default", Name: "kubernetes"}} {
						d.Update(name, BuildService(victims[name], o), NewTouched())
					}
					if !tenantFirst {
						d.Update(evilName, BuildService(evil, o), NewTouched())
					}
					if got, w := ownedState(d, keys), ownedState(want, keys); got != w {
						t.Errorf("the hostile claims changed the victims' kernel state:\n--- got ---\n%s--- want (without the tenant) ---\n%s", got, w)
					}
					for _, p := range d.Problems() {
						if p.Service != evilName {
							t.Errorf("problem on a victim: %s", p)
						}
					}
					var fields []string
					for _, p := range d.Conflicts() {
						fields = append(fields, p.Reason+" "+p.Field)
					}
					wantFields := slices.Repeat([]string{"VirtualServerConflict " + claim.field}, 3)
					if !slices.Equal(fields, wantFields) {
						t.Errorf("conflicts = %q, want %q", fields, wantFields)
					}
				})
			}
		}
	}
}

// When the owner of a cluster IP appears after a claimant already won its virtual server,
// the incremental update takes the virtual server and the claimant's set members back and
// reports each as touched; when the owner goes, the claimant's are installed again.
func TestClusterIPOwnerArrivingLaterTakesBackItsVirtualServer(t *testing.T) {
	o := testOptions()
	dns := types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}
	evilName := types.NamespacedName{Namespace: "app", Name: "evil"}
	d := NewDesired(inet.IPv4)
	d.Update(evilName, BuildService(tenant("app", claimLoadBalancer), o), nil)
	key := VSKey{Protocol: inet.UDP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53}
	fw := Member{Set: SetLoadBalancerFW, Addr: key.Address, Proto: key.Protocol, Port: key.Port}
	if !d.HasMember(fw) || !slices.Contains(d.OutFilter(), key) {
		t.Fatalf("without an owner the claim is served: members %v", d.Members())
	}
	touched := NewTouched()
	d.Update(dns, BuildService(victimInputs()[dns], o), touched)
	if v := d.VirtualServer(key); v == nil || v.Owner.NamespacedName != dns || v.Kind != kindClusterIP {
		t.Fatalf("owner = %+v, want kube-dns's cluster IP", v)
	}
	if d.HasMember(fw) || slices.Contains(d.OutFilter(), key) {
		t.Errorf("the losing claim still filters the owner's traffic: members %v, out filter %v", d.Members(), d.OutFilter())
	}
	if _, ok := touched.Members[fw]; !ok {
		t.Errorf("the claim's member removal was not touched: %v", touched.Members)
	}
	if _, ok := touched.VirtualServers[key]; !ok {
		t.Error("the owner change was not touched")
	}
	touched = NewTouched()
	d.Update(dns, nil, touched)
	if !d.HasMember(fw) {
		t.Error("the claim's member did not come back after the owner left")
	}
	if _, ok := touched.Members[fw]; !ok {
		t.Errorf("the claim's member return was not touched: %v", touched.Members)
	}
}
