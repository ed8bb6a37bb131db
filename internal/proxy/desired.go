package proxy

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
)

// Desired is the aggregate desired state of one family: the union of every Service's
// contribution. Members and addresses are reference counted, so a VIP shared by two Services
// stays bound until both are gone.
//
// When two Services claim the same virtual server (address, port, protocol), one claim wins
// and the others get a Problem (Conflicts): a cluster IP always wins over an external IP, a
// load balancer IP or a node port, so no Service can take over another Service's cluster IP
// however their names sort; among claims of one rank, the owner that sorts first wins. Only
// the winning claim puts the set members of that address, protocol and port (Set.claimed)
// and its out-filter entry in: a losing claim adds nothing that could masquerade, filter or
// redirect the winner's traffic.
//
// Desired is not safe for concurrent use; the sync loop owns it.
type Desired struct {
	family   inet.Family
	services map[types.NamespacedName]*ServiceState
	vs       map[VSKey][]claim // claimants, the winner first (compareClaim)
	members  map[Member]int
	setSize  [numSets]int
	addrs    map[netip.Addr]int
	out      map[VSKey]int
	// setLimit caps every set's size, rsLimit the real servers of every Service together
	// (0: no cap); see SetMemberLimit, RealServerLimit.
	setLimit, rsLimit int
	// realServers is the number of real servers the Services in services ask for;
	// nsMembers and nsRealServers split the set members and the real servers by namespace
	// (a member two Services hold counts for each), to name who holds a full budget.
	realServers   int
	nsMembers     map[string]*[numSets]int
	nsRealServers map[string]int
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
		vs:       map[VSKey][]claim{},
		members:  map[Member]int{},
		addrs:    map[netip.Addr]int{},
		out:      map[VSKey]int{},
		held:     map[types.NamespacedName]*ServiceState{},

		nsMembers:     map[string]*[numSets]int{},
		nsRealServers: map[string]int{},
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
	if st != nil {
		if r := d.admit(name, st); r != nil {
			d.held[name] = st
			st = r
		}
	}
	if d.update(name, st, t) && len(d.held) > 0 {
		d.readmit(t)
	}
}

// update is Update without the limits; it reports whether a set or the node's real
// servers got smaller.
func (d *Desired) update(name types.NamespacedName, st *ServiceState, t *Touched) bool {
	shrunk := false
	old := d.services[name]
	if st.contributesNothing() {
		st = nil
	}
	if d.account(name.Namespace, old, -1) > d.account(name.Namespace, st, 1) {
		shrunk = true
	}
	var oldVS, newVS []*VirtualServer
	var oldM, newM []Member
	var oldA, newA []netip.Addr
	if old != nil {
		oldVS, oldM, oldA = old.VirtualServers, old.Members, old.Addresses
	}
	if st != nil {
		newVS, newM, newA = st.VirtualServers, st.Members, st.Addresses
	}
	// The claimed members of every key this Service claims or claimed follow the key's
	// winner: note whose they are now, and move them once the claims are updated.
	keys := claimedKeys(oldVS, newVS)
	winners := make([]*ServiceState, len(keys))
	for i, k := range keys {
		winners[i] = d.winnerState(k)
	}
	if st == nil {
		delete(d.services, name)
	} else {
		d.services[name] = st
	}

	// Virtual servers: both lists are sorted by key.
	i, j := 0, 0
	for i < len(oldVS) || j < len(newVS) {
		switch {
		case j == len(newVS) || (i < len(oldVS) && oldVS[i].VSKey.Compare(newVS[j].VSKey) < 0):
			d.removeVS(oldVS[i], t)
			i++
		case i == len(oldVS) || oldVS[i].VSKey.Compare(newVS[j].VSKey) > 0:
			d.addVS(claim{newVS[j], st}, t)
			j++
		default:
			switch {
			case !oldVS[i].Equal(newVS[j]) || oldVS[i].Owner != newVS[j].Owner:
				d.removeVS(oldVS[i], nil)
				d.addVS(claim{newVS[j], st}, nil)
				touch(t, newVS[j].VSKey)
			case oldVS[i].Kind != newVS[j].Kind:
				// Same kernel state, another rank: the claim may win or lose the key now.
				was := d.VirtualServer(newVS[j].VSKey)
				d.removeVS(oldVS[i], nil)
				d.addVS(claim{newVS[j], st}, nil)
				if is := d.VirtualServer(newVS[j].VSKey); was != oldVS[i] || is != newVS[j] {
					touch(t, newVS[j].VSKey)
				}
			default:
				d.replaceVS(oldVS[i], claim{newVS[j], st})
			}
			i++
			j++
		}
	}

	// Members and addresses: both lists are sorted and unique. Claimed members follow the
	// winners (below).
	for _, m := range minus(oldM, newM, Member.Compare) {
		if !m.Set.claimed() && d.dropMember(m, t) {
			shrunk = true
		}
	}
	for _, m := range minus(newM, oldM, Member.Compare) {
		if !m.Set.claimed() {
			d.addMember(m, t)
		}
	}
	for i, k := range keys {
		if d.moveClaim(k, winners[i], d.winnerState(k), t) {
			shrunk = true
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

// account adds (sign 1) or takes away (-1) the set members and real servers of st, of
// namespace ns, from the budgets' accounts, and returns its real servers.
func (d *Desired) account(ns string, st *ServiceState, sign int) int {
	if st == nil {
		return 0
	}
	rs := realServerCount(st)
	d.realServers += sign * rs
	if n := d.nsRealServers[ns] + sign*rs; n != 0 {
		d.nsRealServers[ns] = n
	} else {
		delete(d.nsRealServers, ns)
	}
	if len(st.Members) > 0 {
		c := d.nsMembers[ns]
		if c == nil {
			c = new([numSets]int)
			d.nsMembers[ns] = c
		}
		empty := true
		for _, m := range st.Members {
			c[m.Set] += sign
		}
		for _, n := range c {
			empty = empty && n == 0
		}
		if empty {
			delete(d.nsMembers, ns)
		}
	}
	return rs
}

func (d *Desired) addMember(m Member, t *Touched) {
	if d.members[m]++; d.members[m] == 1 {
		d.setSize[m.Set]++
		if t != nil {
			t.Members[m] = struct{}{}
		}
	}
}

// dropMember releases one reference to m and reports whether m left its set.
func (d *Desired) dropMember(m Member, t *Touched) bool {
	if d.members[m]--; d.members[m] == 0 {
		delete(d.members, m)
		d.setSize[m.Set]--
		if t != nil {
			t.Members[m] = struct{}{}
		}
		return true
	}
	return false
}

// claimedKeys returns the sorted union of the keys of two lists sorted by key.
func claimedKeys(a, b []*VirtualServer) []VSKey {
	out := make([]VSKey, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].VSKey.Compare(b[j].VSKey) < 0):
			out = append(out, a[i].VSKey)
			i++
		case i == len(a) || a[i].VSKey.Compare(b[j].VSKey) > 0:
			out = append(out, b[j].VSKey)
			j++
		default:
			out = append(out, a[i].VSKey)
			i++
			j++
		}
	}
	return out
}

// winnerState returns the contribution of the Service whose claim wins key k, or nil.
func (d *Desired) winnerState(k VSKey) *ServiceState {
	if list := d.vs[k]; len(list) > 0 {
		return list[0].st
	}
	return nil
}

// moveClaim hands the claimed members and the out-filter entry of key k from the state
// that won it (from, nil: none) to the one that wins it now (to); it reports whether a member
// left its set.
func (d *Desired) moveClaim(k VSKey, from, to *ServiceState, t *Touched) (shrunk bool) {
	if from == to {
		return false
	}
	for s := range numSets {
		if !s.claimed() {
			continue
		}
		a, b := claimedMembers(from, s, k), claimedMembers(to, s, k)
		for _, m := range minus(a, b, Member.Compare) {
			if d.dropMember(m, t) {
				shrunk = true
			}
		}
		for _, m := range minus(b, a, Member.Compare) {
			d.addMember(m, t)
		}
	}
	was, is := from != nil && hasKey(from.OutFilter, k), to != nil && hasKey(to.OutFilter, k)
	switch {
	case was && !is:
		delete(d.out, k)
	case is && !was:
		d.out[k] = 1
	}
	return shrunk
}

// claimedMembers returns the members of set s that st holds for key k (a sub-slice of its
// sorted members).
func claimedMembers(st *ServiceState, s Set, k VSKey) []Member {
	if st == nil {
		return nil
	}
	ms := st.Members
	lo := Member{Set: s, Addr: k.Address, Proto: k.Protocol, Port: k.Port}
	i, _ := slices.BinarySearchFunc(ms, lo, Member.Compare)
	j := i
	for j < len(ms) && ms[j].Set == s && ms[j].Addr == k.Address && ms[j].Proto == k.Protocol && ms[j].Port == k.Port {
		j++
	}
	return ms[i:j]
}

func hasKey(keys []VSKey, k VSKey) bool {
	_, ok := slices.BinarySearchFunc(keys, k, VSKey.Compare)
	return ok
}

func touch(t *Touched, k VSKey) {
	if t != nil {
		t.VirtualServers[k] = struct{}{}
	}
}

// claim is one Service's virtual server for a key, with the contribution it came in.
type claim struct {
	*VirtualServer
	st *ServiceState
}

func (d *Desired) addVS(c claim, t *Touched) {
	list := d.vs[c.VSKey]
	pos, _ := slices.BinarySearchFunc(list, c, func(a, b claim) int { return compareClaim(a.VirtualServer, b.VirtualServer) })
	d.vs[c.VSKey] = slices.Insert(list, pos, c)
	if pos == 0 {
		touch(t, c.VSKey)
	}
}

// replaceVS swaps in an equal virtual server of the same owner and kind, so later removals
// (which match by identity) find it.
func (d *Desired) replaceVS(old *VirtualServer, c claim) {
	list := d.vs[c.VSKey]
	for i, x := range list {
		if x.VirtualServer == old {
			list[i] = c
			return
		}
	}
}

func (d *Desired) removeVS(v *VirtualServer, t *Touched) {
	list := d.vs[v.VSKey]
	for i, x := range list {
		if x.VirtualServer == v {
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

// compareClaim orders the claims of one key, the winner first: a cluster IP before any
// other kind, then by owner.
func compareClaim(a, b *VirtualServer) int {
	if c := cmp.Compare(a.Kind.rank(), b.Kind.rank()); c != 0 {
		return c
	}
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
		return list[0].VirtualServer
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

// VSKeys, MemberKeys and AddressKeys range over the keys of every desired virtual server,
// set member and address, unsorted. A full sync in steps pulls them a chunk at a time under
// the lock that serializes the changes to d (reconcile.Pass.Collect): a key added or
// removed between two chunks may or may not be produced, as in a range loop over a map
// changed in its body.
func (d *Desired) VSKeys() iter.Seq[VSKey] { return maps.Keys(d.vs) }

// MemberKeys: see VSKeys.
func (d *Desired) MemberKeys() iter.Seq[Member] { return maps.Keys(d.members) }

// AddressKeys: see VSKeys.
func (d *Desired) AddressKeys() iter.Seq[netip.Addr] { return maps.Keys(d.addrs) }

// KeyCounts is how many keys VSKeys, MemberKeys and AddressKeys range over.
func (d *Desired) KeyCounts() (vs, members, addrs int) {
	return len(d.vs), len(d.members), len(d.addrs)
}

// VirtualServers returns every desired virtual server, sorted by key.
func (d *Desired) VirtualServers() []*VirtualServer {
	out := make([]*VirtualServer, 0, len(d.vs))
	for _, list := range d.vs {
		out = append(out, list[0].VirtualServer)
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

// Conflicts returns a Problem for every Service that lost a virtual server to another one
// (on the loser only: the winner is not at fault, and may be the victim of the claim).
func (d *Desired) Conflicts() []Problem {
	var out []Problem
	for _, list := range d.vs {
		for _, loser := range list[1:] {
			out = append(out, conflict(loser.VirtualServer, list[0].VirtualServer))
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// ConflictsOf returns the Problems of the virtual servers Service name claims and lost,
// sorted.
func (d *Desired) ConflictsOf(name types.NamespacedName) []Problem {
	st := d.services[name]
	if st == nil {
		return nil
	}
	var out []Problem
	for _, v := range st.VirtualServers {
		if list := d.vs[v.VSKey]; len(list) > 0 && list[0].VirtualServer != v {
			out = append(out, conflict(v, list[0].VirtualServer))
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// Claimants returns the Services that claim virtual server k, the winner first.
func (d *Desired) Claimants(k VSKey) []types.NamespacedName {
	list := d.vs[k]
	out := make([]types.NamespacedName, len(list))
	for i, c := range list {
		out[i] = c.Owner.NamespacedName
	}
	return out
}

func conflict(loser, winner *VirtualServer) Problem {
	why := "it claimed the address and port first (by namespace/name)"
	if winner.Kind == kindClusterIP {
		why = "a cluster IP always wins over another Service's claim"
	}
	return Problem{
		Service: loser.Owner.NamespacedName,
		Field:   loser.Kind.field(),
		Reason:  "VirtualServerConflict",
		Message: fmt.Sprintf("%s %s is the %s of %s, which keeps it (%s); this claim is not programmed", loser.Kind, loser.VSKey, winner.Kind, winner.Owner, why),
	}
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
