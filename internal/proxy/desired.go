package proxy

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

// Desired is the aggregate desired state of one family: the union of every Service's
// contribution. Members and addresses are reference counted, so a VIP shared by two Services
// stays bound until both are gone. When two Services claim the same virtual server (e.g. the
// same externalIP:port), the owner that sorts first wins and the others get a Problem.
//
// Desired is not safe for concurrent use; the sync loop owns it.
type Desired struct {
	family   inet.Family
	services map[types.NamespacedName]*ServiceState
	vs       map[VSKey][]*VirtualServer // claimants, sorted by owner
	members  map[Member]int
	setSize  [numSets]int
	addrs    map[netip.Addr]int
	out      map[VSKey]int
	// setLimit caps every set's size (0: no cap); see SetMemberLimit.
	setLimit int
	// held are the Services refused for want of room in a set, as built; each contributes
	// only its Problems until room is freed (readmit).
	held map[types.NamespacedName]*ServiceState
	// readmitted lists the held Services that Updates of other Services let in (TakeReadmitted).
	readmitted []types.NamespacedName
}

// NewDesired returns an empty desired state for a family.
func NewDesired(f inet.Family) *Desired {
	return &Desired{
		family:   f,
		services: map[types.NamespacedName]*ServiceState{},
		vs:       map[VSKey][]*VirtualServer{},
		members:  map[Member]int{},
		addrs:    map[netip.Addr]int{},
		out:      map[VSKey]int{},
		held:     map[types.NamespacedName]*ServiceState{},
	}
}

// Family returns the family this state is for.
func (d *Desired) Family() inet.Family { return d.family }

// Touched collects the kernel objects whose desired state may have changed.
type Touched struct {
	VirtualServers map[VSKey]struct{}
	Members        map[Member]struct{}
	Addresses      map[netip.Addr]struct{}
}

// NewTouched returns an empty Touched.
func NewTouched() *Touched {
	return &Touched{VirtualServers: map[VSKey]struct{}{}, Members: map[Member]struct{}{}, Addresses: map[netip.Addr]struct{}{}}
}

// Empty reports whether nothing was touched.
func (t *Touched) Empty() bool {
	return len(t.VirtualServers) == 0 && len(t.Members) == 0 && len(t.Addresses) == 0
}

// Len is the number of touched objects.
func (t *Touched) Len() int { return len(t.VirtualServers) + len(t.Members) + len(t.Addresses) }

// Update replaces the contribution of Service name with st (nil removes it) and records in t
// (when not nil) every object whose desired state changed. With a set limit (SetMemberLimit),
// a Service whose members would take a set beyond it is held back (see capacity.go).
func (d *Desired) Update(name types.NamespacedName, st *ServiceState, t *Touched) {
	delete(d.held, name)
	if d.setLimit > 0 && st != nil {
		if s, size := d.overflow(name, st); size > 0 {
			d.held[name] = st
			st = refuseForSet(st, s, size, d.setLimit)
		}
	}
	if d.update(name, st, t) && len(d.held) > 0 {
		d.readmit(t)
	}
}

// update is Update without the set limit; it reports whether a set got smaller.
func (d *Desired) update(name types.NamespacedName, st *ServiceState, t *Touched) bool {
	shrunk := false
	old := d.services[name]
	if st.contributesNothing() {
		delete(d.services, name)
		st = nil
	} else {
		d.services[name] = st
	}
	var oldVS, newVS []*VirtualServer
	var oldM, newM []Member
	var oldA, newA []netip.Addr
	if old != nil {
		oldVS, oldM, oldA = old.VirtualServers, old.Members, old.Addresses
		for _, k := range old.OutFilter {
			if d.out[k]--; d.out[k] == 0 {
				delete(d.out, k)
			}
		}
	}
	if st != nil {
		newVS, newM, newA = st.VirtualServers, st.Members, st.Addresses
		for _, k := range st.OutFilter {
			d.out[k]++
		}
	}

	// Virtual servers: both lists are sorted by key.
	i, j := 0, 0
	for i < len(oldVS) || j < len(newVS) {
		switch {
		case j == len(newVS) || (i < len(oldVS) && oldVS[i].VSKey.Compare(newVS[j].VSKey) < 0):
			d.removeVS(oldVS[i], t)
			i++
		case i == len(oldVS) || oldVS[i].VSKey.Compare(newVS[j].VSKey) > 0:
			d.addVS(newVS[j], t)
			j++
		default:
			if !oldVS[i].Equal(newVS[j]) || oldVS[i].Owner != newVS[j].Owner {
				d.removeVS(oldVS[i], nil)
				d.addVS(newVS[j], nil)
				touch(t, newVS[j].VSKey)
			} else {
				d.replaceVS(oldVS[i], newVS[j])
			}
			i++
			j++
		}
	}

	// Members and addresses: both lists are sorted and unique.
	for _, m := range minus(oldM, newM, Member.Compare) {
		if d.members[m]--; d.members[m] == 0 {
			delete(d.members, m)
			d.setSize[m.Set]--
			shrunk = true
			if t != nil {
				t.Members[m] = struct{}{}
			}
		}
	}
	for _, m := range minus(newM, oldM, Member.Compare) {
		if d.members[m]++; d.members[m] == 1 {
			d.setSize[m.Set]++
			if t != nil {
				t.Members[m] = struct{}{}
			}
		}
	}
	for _, a := range minus(oldA, newA, netip.Addr.Compare) {
		if d.addrs[a]--; d.addrs[a] == 0 {
			delete(d.addrs, a)
			if t != nil {
				t.Addresses[a] = struct{}{}
			}
		}
	}
	for _, a := range minus(newA, oldA, netip.Addr.Compare) {
		if d.addrs[a]++; d.addrs[a] == 1 && t != nil {
			t.Addresses[a] = struct{}{}
		}
	}
	return shrunk
}

func touch(t *Touched, k VSKey) {
	if t != nil {
		t.VirtualServers[k] = struct{}{}
	}
}

func (d *Desired) addVS(v *VirtualServer, t *Touched) {
	list := d.vs[v.VSKey]
	pos, _ := slices.BinarySearchFunc(list, v, compareOwner)
	d.vs[v.VSKey] = slices.Insert(list, pos, v)
	if pos == 0 {
		touch(t, v.VSKey)
	}
}

// replaceVS swaps in an equal virtual server of the same owner, so later removals (which
// match by identity) find it.
func (d *Desired) replaceVS(old, v *VirtualServer) {
	list := d.vs[v.VSKey]
	for i, x := range list {
		if x == old {
			list[i] = v
			return
		}
	}
}

func (d *Desired) removeVS(v *VirtualServer, t *Touched) {
	list := d.vs[v.VSKey]
	for i, x := range list {
		if x == v {
			list = slices.Delete(list, i, i+1)
			if i == 0 {
				touch(t, v.VSKey)
			}
			break
		}
	}
	if len(list) == 0 {
		delete(d.vs, v.VSKey)
	} else {
		d.vs[v.VSKey] = list
	}
}

func compareOwner(a, b *VirtualServer) int {
	return cmp.Compare(a.Owner.String(), b.Owner.String())
}

// minus returns the elements of sorted a that are not in sorted b.
func minus[T any](a, b []T, cmpFn func(T, T) int) []T {
	var out []T
	j := 0
	for _, x := range a {
		for j < len(b) && cmpFn(b[j], x) < 0 {
			j++
		}
		if j < len(b) && cmpFn(b[j], x) == 0 {
			continue
		}
		out = append(out, x)
	}
	return out
}

// VirtualServer returns the desired virtual server for a key, or nil.
func (d *Desired) VirtualServer(k VSKey) *VirtualServer {
	if list := d.vs[k]; len(list) > 0 {
		return list[0]
	}
	return nil
}

// HasMember reports whether a set member is desired.
func (d *Desired) HasMember(m Member) bool { return d.members[m] > 0 }

// HasAddress reports whether a VIP should be bound on kube-ipvs0.
func (d *Desired) HasAddress(a netip.Addr) bool { return d.addrs[a] > 0 }

// Service returns the current contribution of a Service, or nil.
func (d *Desired) Service(name types.NamespacedName) *ServiceState { return d.services[name] }

// NumServices is the number of Services contributing anything.
func (d *Desired) NumServices() int { return len(d.services) }

// VirtualServers returns every desired virtual server, sorted by key.
func (d *Desired) VirtualServers() []*VirtualServer {
	out := make([]*VirtualServer, 0, len(d.vs))
	for _, list := range d.vs {
		out = append(out, list[0])
	}
	slices.SortFunc(out, func(a, b *VirtualServer) int { return a.VSKey.Compare(b.VSKey) })
	return out
}

// Members returns every desired set member, sorted (Member.Compare).
func (d *Desired) Members() []Member {
	out := slices.Collect(maps.Keys(d.members))
	slices.SortFunc(out, Member.Compare)
	return out
}

// Addresses returns every VIP to bind, sorted.
func (d *Desired) Addresses() []netip.Addr {
	out := slices.Collect(maps.Keys(d.addrs))
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// OutFilter returns the LoadBalancer virtual servers node-originated traffic may not reach, sorted.
func (d *Desired) OutFilter() []VSKey {
	out := slices.Collect(maps.Keys(d.out))
	slices.SortFunc(out, VSKey.Compare)
	return out
}

// Conflicts returns a Problem for every Service that lost a virtual server to another one.
func (d *Desired) Conflicts() []Problem {
	var out []Problem
	for _, list := range d.vs {
		for _, loser := range list[1:] {
			out = append(out, Problem{
				Service: loser.Owner.NamespacedName,
				Field:   "spec",
				Reason:  "VirtualServerConflict",
				Message: fmt.Sprintf("%s %s is already served for %s; this port is not programmed there", loser.Kind, loser.VSKey, list[0].Owner),
			})
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// Problems returns every Service's problems plus the conflicts, sorted.
func (d *Desired) Problems() []Problem {
	var out []Problem
	for _, st := range d.services {
		out = append(out, st.Problems...)
	}
	out = append(out, d.Conflicts()...)
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// Dump renders the whole desired state deterministically, for golden tests and debugging.
func (d *Desired) Dump() string {
	var b strings.Builder
	for _, v := range d.VirtualServers() {
		b.WriteString(FormatVirtualServer(v))
	}
	for _, m := range d.Members() {
		fmt.Fprintf(&b, "member %s %s\n", m.Set, m)
	}
	for _, a := range d.Addresses() {
		fmt.Fprintf(&b, "bind %s\n", a)
	}
	return b.String()
}

// FormatVirtualServer renders one virtual server and its real servers, one per line.
func FormatVirtualServer(v *VirtualServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vs %s %s", v.VSKey, v.Scheduler)
	if len(v.SchedFlags) > 0 {
		fmt.Fprintf(&b, " flags=%s", strings.Join(v.SchedFlags, ","))
	}
	if v.Persistent {
		fmt.Fprintf(&b, " persistent=%d", v.Timeout)
	}
	fmt.Fprintf(&b, " %s %s\n", v.Kind, v.Owner)
	for _, dst := range v.Destinations {
		fmt.Fprintf(&b, "  -> %s w=%d\n", dst.AddrPort(), dst.Weight)
	}
	return b.String()
}
