package proxy

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Capacity. No one Service may take a kernel table for itself: a Service whose set members
// exceed Options.MaxServiceSetMembers is refused by BuildService, and a Service whose members
// would take a set beyond the Desired's set limit (SetMemberLimit) is held back by Update.
// Either way the Service contributes only a Problem naming the field that makes it large,
// nothing of it is programmed (no half-programmed Service: none of its virtual servers, VIPs
// or members), and every other Service is. docs/bad-input.md explains both limits.

// Problem reasons of the capacity limits.
const (
	// ReasonTooManySetMembers: the Service alone needs more set members than
	// Options.MaxServiceSetMembers.
	ReasonTooManySetMembers = "TooManySetMembers"
	// ReasonSetCapacityExceeded: the Service's members would take a set beyond the set limit.
	ReasonSetCapacityExceeded = "SetCapacityExceeded"
)

// DefaultMaxServiceSetMembers is the default per-Service cap: half of ipset's default
// maxelem, so no Service alone fills a set of the size kube-proxy creates. It is 1,000
// loadBalancerSourceRanges on 32 ports, or one cluster IP with 32,768 ports.
const DefaultMaxServiceSetMembers = 32768

// DefaultMaxSetMembers is the default limit of one set's size, all Services together: 16
// times ipset's default maxelem (a hash:ip,port,net set of that size takes some 36 MB of
// kernel memory: 70,002 members took 2.4 MB on Debian's 6.1).
const DefaultMaxSetMembers = 1 << 20

// SetMemberLimit makes Update hold back a Service whose members would take a set beyond n
// members (0: no limit). Call it on an empty Desired.
func (d *Desired) SetMemberLimit(n int) { d.setLimit = n }

// Held returns the Services held back for want of room in a set, sorted.
func (d *Desired) Held() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(d.held))
	for n := range d.held {
		out = append(out, n)
	}
	slices.SortFunc(out, compareName)
	return out
}

// TakeReadmitted returns, and forgets, the held Services that Updates of other Services let
// in since the last call: their Problems changed without an Update of their own.
func (d *Desired) TakeReadmitted() []types.NamespacedName {
	out := d.readmitted
	d.readmitted = nil
	return out
}

func compareName(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// overflow returns a set st's members would take beyond the set limit, with the size it would
// reach, replacing the current contribution of name; size 0 when every set has room. A set
// already over the limit without st growing it does not count.
func (d *Desired) overflow(name types.NamespacedName, st *ServiceState) (Set, int) {
	var old []Member
	if cur := d.services[name]; cur != nil {
		old = cur.Members
	}
	var delta [numSets]int
	for _, m := range minus(st.Members, old, Member.Compare) {
		if d.members[m] == 0 {
			delta[m.Set]++
		}
	}
	for _, m := range minus(old, st.Members, Member.Compare) {
		if d.members[m] == 1 {
			delta[m.Set]--
		}
	}
	for s := range numSets {
		if size := d.setSize[s] + delta[s]; delta[s] > 0 && size > d.setLimit {
			return s, size
		}
	}
	return 0, 0
}

// readmit lets in the held Services that fit now, smallest first.
func (d *Desired) readmit(t *Touched) {
	names := d.Held()
	slices.SortStableFunc(names, func(a, b types.NamespacedName) int {
		return cmp.Compare(len(d.held[a].Members), len(d.held[b].Members))
	})
	for _, n := range names {
		st := d.held[n]
		if _, size := d.overflow(n, st); size > 0 {
			continue
		}
		delete(d.held, n)
		d.update(n, st, t)
		d.readmitted = append(d.readmitted, n)
	}
}

// refuseForSet is what a Service held back for want of room in set s contributes.
func refuseForSet(st *ServiceState, s Set, size, limit int) *ServiceState {
	n := 0
	for _, m := range st.Members {
		if m.Set == s {
			n++
		}
	}
	return refused(st, Problem{Service: st.Name, Field: fieldOf(s), Reason: ReasonSetCapacityExceeded,
		Message: fmt.Sprintf("the Service's %d members of set %s would take it to %d members, beyond the limit of %d (--kipvs-max-set-members); the Service is not programmed on this node until there is room", n, s, size, limit)})
}

// refused is a Service that contributes only its Problems and p.
func refused(st *ServiceState, p Problem) *ServiceState {
	return &ServiceState{Name: st.Name, Problems: append(slices.Clone(st.Problems), p)}
}

// capServiceMembers refuses st (returns its refusal) when it has more members than the
// per-Service limit (0: no limit).
func capServiceMembers(st *ServiceState, limit int) *ServiceState {
	if limit <= 0 || len(st.Members) <= limit {
		return st
	}
	var bySet [numSets]int
	for _, m := range st.Members {
		bySet[m.Set]++
	}
	big := Set(0)
	for s := range numSets {
		if bySet[s] > bySet[big] {
			big = s
		}
	}
	return refused(st, Problem{Service: st.Name, Field: fieldOf(big), Reason: ReasonTooManySetMembers,
		Message: fmt.Sprintf("the Service needs %d set members (%d in %s), more than the per-Service limit of %d (--kipvs-max-service-set-members); the Service is not programmed on this node", len(st.Members), bySet[big], big, limit)})
}

// fieldOf names the part of a Service that makes its members of set s many.
func fieldOf(s Set) string {
	switch s {
	case SetLoadBalancerSourceNet, SetLoadBalancerSourceIP:
		return "spec.loadBalancerSourceRanges"
	case SetLoadBalancer, SetLoadBalancerFW, SetLoadBalancerLocal:
		return "status.loadBalancer.ingress"
	case SetExternalIP, SetExternalIPLocal:
		return "spec.externalIPs"
	case SetLoopBack:
		return "endpoints"
	}
	return "spec.ports"
}
