package proxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

func nn(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: name}
}

// Two Services sharing an external IP keep it bound until both are gone, and a shared
// node-port member survives the removal of one of them.
func TestDesiredSharedAddressRefcount(t *testing.T) {
	o := testOptions()
	tcp := v1.ProtocolTCP
	a := BuildService(ServiceInput{Service: svc("default", "a", "10.96.0.1", externalIPs("203.0.113.9"), ports(v1.ServicePort{Name: "http", Port: 80})),
		Slices: []*discoveryv1.EndpointSlice{slice("a", "a-1", "http", 80, tcp, "10.244.1.1")}}, o)
	b := BuildService(ServiceInput{Service: svc("default", "b", "10.96.0.2", externalIPs("203.0.113.9"), ports(v1.ServicePort{Name: "https", Port: 443})),
		Slices: []*discoveryv1.EndpointSlice{slice("b", "b-1", "https", 443, tcp, "10.244.1.2")}}, o)
	d := NewDesired(inet.IPv4)
	d.Update(nn("a"), a, nil)
	d.Update(nn("b"), b, nil)
	vip := netip.MustParseAddr("203.0.113.9")

	touched := NewTouched()
	d.Update(nn("a"), nil, touched)
	if !d.HasAddress(vip) || !d.HasMember(Member{Set: SetIPVSIPs, Addr: vip}) {
		t.Fatal("shared VIP unbound while b still uses it")
	}
	if _, ok := touched.Addresses[vip]; ok {
		t.Error("shared VIP reported as touched although its desired state did not change")
	}
	if _, ok := touched.VirtualServers[VSKey{inet.TCP, vip, 80}]; !ok {
		t.Error("a's external virtual server not reported as touched")
	}
	touched = NewTouched()
	d.Update(nn("b"), nil, touched)
	if d.HasAddress(vip) || d.HasMember(Member{Set: SetIPVSIPs, Addr: vip}) {
		t.Fatal("VIP still desired after both services are gone")
	}
	if _, ok := touched.Addresses[vip]; !ok {
		t.Error("VIP removal not reported as touched")
	}
	if d.Dump() != "" {
		t.Errorf("state not empty after removing everything:\n%s", d.Dump())
	}
}

// When two Services claim one virtual server, the first owner wins deterministically, the
// loser gets a Problem, and the loser takes over when the winner goes away.
func TestDesiredConflict(t *testing.T) {
	o := testOptions()
	tcp := v1.ProtocolTCP
	mk := func(name, backend string) *ServiceState {
		return BuildService(ServiceInput{Service: svc("default", name, "10.96.0."+fmt.Sprint(len(name)), externalIPs("203.0.113.9")),
			Slices: []*discoveryv1.EndpointSlice{slice(name, name+"-1", "http", 80, tcp, backend)}}, o)
	}
	d := NewDesired(inet.IPv4)
	d.Update(nn("zeta"), mk("zeta", "10.244.9.9"), nil)
	touched := NewTouched()
	d.Update(nn("alpha"), mk("alpha", "10.244.1.1"), touched)
	key := VSKey{inet.TCP, netip.MustParseAddr("203.0.113.9"), 80}
	if got := d.VirtualServer(key).Owner.Name; got != "alpha" {
		t.Fatalf("owner = %s, want alpha (sorts first)", got)
	}
	if _, ok := touched.VirtualServers[key]; !ok {
		t.Error("ownership change not reported as touched")
	}
	if c := d.Conflicts(); len(c) != 1 || c[0].Service.Name != "zeta" {
		t.Errorf("conflicts = %v", c)
	}
	d.Update(nn("alpha"), nil, nil)
	if got := d.VirtualServer(key); got == nil || got.Owner.Name != "zeta" || got.Destinations[0].Address.String() != "10.244.9.9" {
		t.Errorf("after the winner left: %+v", got)
	}
	if len(d.Conflicts()) != 0 {
		t.Errorf("conflicts remain: %v", d.Conflicts())
	}
}

// Incremental maintenance must end in exactly the state a from-scratch build gives, and
// Touched must cover every object whose desired state differs between before and after.
func TestDesiredIncrementalMatchesFullBuild(t *testing.T) {
	o := testOptions()
	rng := rand.New(rand.NewPCG(1, 2))
	tcp := v1.ProtocolTCP
	gen := func(name string) *ServiceState {
		if rng.IntN(4) == 0 {
			return nil
		}
		opts := []svcOpt{}
		if rng.IntN(3) == 0 {
			opts = append(opts, externalIPs(fmt.Sprintf("203.0.113.%d", rng.IntN(3))))
		}
		// Hostile claims: another Service's cluster IP as an external or load balancer IP,
		// with source ranges (members only the winner of the key may add).
		if rng.IntN(3) == 0 {
			opts = append(opts, externalIPs(fmt.Sprintf("10.96.0.%d", rng.IntN(5))))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, lbIngress(fmt.Sprintf("10.96.0.%d", rng.IntN(5)), fmt.Sprintf("203.0.113.%d", rng.IntN(3))), func(s *v1.Service) {
				if rng.IntN(2) == 0 {
					s.Spec.LoadBalancerSourceRanges = []string{fmt.Sprintf("198.51.100.%d/32", rng.IntN(2))}
				}
				if rng.IntN(2) == 0 {
					etpLocal(s)
				}
			})
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, svcType(v1.ServiceTypeNodePort), ports(v1.ServicePort{Name: "http", Port: 80, NodePort: int32(30000 + rng.IntN(3))}))
		}
		var eps []string
		for i := range rng.IntN(4) {
			e := fmt.Sprintf("10.244.%d.%d", rng.IntN(2), i)
			if rng.IntN(2) == 0 {
				e += ":local"
			}
			eps = append(eps, e)
		}
		return BuildService(ServiceInput{
			Service: svc("default", name, fmt.Sprintf("10.96.0.%d", rng.IntN(5)), opts...),
			Slices:  []*discoveryv1.EndpointSlice{slice(name, name+"-1", "http", 8080, tcp, eps...)},
		}, o)
	}
	names := []string{"a", "b", "c", "d", "e", "f"}
	inc := NewDesired(inet.IPv4)
	current := map[string]*ServiceState{}
	for step := range 500 {
		name := names[rng.IntN(len(names))]
		st := gen(name)
		before := snapshot(inc)
		touched := NewTouched()
		inc.Update(nn(name), st, touched)
		current[name] = st
		after := snapshot(inc)

		full := NewDesired(inet.IPv4)
		for _, n := range names {
			full.Update(nn(n), current[n], nil)
		}
		if fmt.Sprint(full.Dump(), full.OutFilter()) != fmt.Sprint(inc.Dump(), inc.OutFilter()) {
			t.Fatalf("step %d: incremental state differs from full build\n--- incremental ---\n%s--- full ---\n%s", step, inc.Dump(), full.Dump())
		}
		for k := range union(before.vs, after.vs) {
			if before.vs[k] != after.vs[k] {
				if _, ok := touched.VirtualServers[k]; !ok {
					t.Fatalf("step %d: virtual server %s changed but was not touched:\n%s\n%s", step, k, before.vs[k], after.vs[k])
				}
			}
		}
		for m := range union(before.members, after.members) {
			if before.members[m] != after.members[m] {
				if _, ok := touched.Members[m]; !ok {
					t.Fatalf("step %d: member %v changed but was not touched", step, m)
				}
			}
		}
		for a := range union(before.addrs, after.addrs) {
			if before.addrs[a] != after.addrs[a] {
				if _, ok := touched.Addresses[a]; !ok {
					t.Fatalf("step %d: address %s changed but was not touched", step, a)
				}
			}
		}
	}
}

type view struct {
	vs      map[VSKey]string
	members map[Member]bool
	addrs   map[netip.Addr]bool
}

func snapshot(d *Desired) view {
	v := view{vs: map[VSKey]string{}, members: map[Member]bool{}, addrs: map[netip.Addr]bool{}}
	for _, x := range d.VirtualServers() {
		c := *x
		c.Kind = 0 // not kernel state (TestVirtualServerEqualChecksEveryField)
		v.vs[x.VSKey] = FormatVirtualServer(&c)
	}
	for _, m := range d.Members() {
		v.members[m] = true
	}
	for _, a := range d.Addresses() {
		v.addrs[a] = true
	}
	return v
}

func union[K comparable, V any](a, b map[K]V) map[K]struct{} {
	out := map[K]struct{}{}
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}

func TestDesiredAccessorsSorted(t *testing.T) {
	d := NewDesired(inet.IPv4)
	o := testOptions()
	for _, n := range []string{"c", "a", "b"} {
		d.Update(nn(n), BuildService(ServiceInput{Service: svc("default", n, "10.96.0."+fmt.Sprint(int(n[0])))}, o), nil)
	}
	vs := d.VirtualServers()
	if !slices.IsSortedFunc(vs, func(a, b *VirtualServer) int { return a.VSKey.Compare(b.VSKey) }) || len(vs) != 3 {
		t.Errorf("virtual servers not sorted: %v", vs)
	}
	if d.NumServices() != 3 || d.Service(nn("a")) == nil {
		t.Errorf("service bookkeeping wrong")
	}
}
