package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Capacity. No one Service may take a kernel table for itself, and no one namespace may
// take a node-wide budget from kube-system and default:
//
//   - per Service, BuildService refuses a Service with more set members, virtual servers or
//     real servers than Options.MaxServiceSetMembers, MaxServiceVirtualServers and
//     MaxServiceRealServers (it stops building one as soon as a limit is passed, so a
//     Service asking for millions of real servers costs no more than the limit to refuse);
//   - node-wide, Update holds back a Service whose members would take a set beyond the
//     set limit (SetMemberLimit) or whose real servers would take the node beyond the
//     real-server limit (RealServerLimit). The last 1/ReserveDivisor of each budget is
//     kept for the namespaces of ReservedNamespace: a Service of any other namespace is
//     held back once it would take the budget past the limit less that reserve. A held
//     Service is let in, without a restart, by the Update that frees room for it.
//
// Either way the Service contributes only a Problem naming the field that makes it large
// (and, node-wide, the namespace holding most of the budget), nothing of it is programmed
// (no half-programmed Service: none of its virtual servers, VIPs or members), and every
// other Service is. docs/bad-input.md explains the limits.

// Problem reasons of the capacity limits.
const (
	// ReasonTooManySetMembers: the Service alone needs more set members than
	// Options.MaxServiceSetMembers.
	ReasonTooManySetMembers = "TooManySetMembers"
	// ReasonSetCapacityExceeded: the Service's members would take a set beyond the set limit.
	ReasonSetCapacityExceeded = "SetCapacityExceeded"
	// ReasonTooManyVirtualServers: the Service alone needs more virtual servers than
	// Options.MaxServiceVirtualServers.
	ReasonTooManyVirtualServers = "TooManyVirtualServers"
	// ReasonTooManyRealServers: the Service alone needs more real servers than
	// Options.MaxServiceRealServers.
	ReasonTooManyRealServers = "TooManyRealServers"
	// ReasonRealServerCapacityExceeded: the Service's real servers would take the node
	// beyond the real-server limit.
	ReasonRealServerCapacityExceeded = "RealServerCapacityExceeded"
)

// CapacityReasons lists the reasons of the capacity limits, for the gauge of the Services
// they keep from being programmed.
func CapacityReasons() []string {
	return []string{ReasonTooManySetMembers, ReasonSetCapacityExceeded, ReasonTooManyVirtualServers,
		ReasonTooManyRealServers, ReasonRealServerCapacityExceeded}
}

// DefaultMaxServiceSetMembers is the default per-Service cap: half of ipset's default
// maxelem, so no Service alone fills a set of the size kube-proxy creates. It is 1,000
// loadBalancerSourceRanges on 32 ports, or one cluster IP with 32,767 ports (and its
// ipvs-ips member).
const DefaultMaxServiceSetMembers = 32768

// DefaultMaxSetMembers is the default limit of one set's size, all Services together: 16
// times ipset's default maxelem (a hash:ip,port,net set of that size takes some 36 MB of
// kernel memory: 70,002 members took 2.4 MB on Debian's 6.1).
const DefaultMaxSetMembers = 1 << 20

// DefaultMaxServiceVirtualServers is the default per-Service cap of virtual servers: the
// per-Service set member cap, so the one cluster IP with 32,767 ports that cap admits is
// admitted, while 181 external IPs x 181 ports (32,761 virtual servers, and the 181 of its
// cluster IP) are not. docs/bad-input.md has the measured cost.
const DefaultMaxServiceVirtualServers = 32768

// DefaultMaxServiceRealServers is the default per-Service cap of real servers: 1/16 of
// the node-wide default, 5,000 endpoints on 4 ports of a LoadBalancer Service with two node
// addresses (60,000) pass. docs/bad-input.md has the measured cost.
const DefaultMaxServiceRealServers = 1 << 16

// DefaultMaxRealServers is the default limit of the node's real servers, all Services
// together: 5.2 times the 200,000 of the largest measured node (50,000 Services x 4
// endpoints). docs/bad-input.md has the measured cost.
const DefaultMaxRealServers = 1 << 20

// ReserveDivisor: the last 1/ReserveDivisor of each node-wide budget (a set's members, the
// node's real servers) is kept for the Services of the reserved namespaces.
const ReserveDivisor = 16

// ReservedNamespace reports whether the Services of namespace ns may use the reserve of
// the node-wide budgets: kube-system (the cluster's DNS, metrics) and default (the
// apiserver's kubernetes Service).
func ReservedNamespace(ns string) bool { return ns == "kube-system" || ns == "default" }

// budgetLimit is how much of a budget of the given limit the Services of namespace ns may
// fill: all of it in a reserved namespace, the limit less the reserve in any other.
func budgetLimit(limit int, ns string) int {
	if ReservedNamespace(ns) {
		return limit
	}
	return limit - limit/ReserveDivisor
}

// SetMemberLimit makes Update hold back a Service whose members would take a set beyond n
// members (0: no limit). Call it on an empty Desired.
func (d *Desired) SetMemberLimit(n int) { d.setLimit = n }

// RealServerLimit makes Update hold back a Service whose real servers would take the
// node's beyond n (0: no limit). Call it on an empty Desired.
func (d *Desired) RealServerLimit(n int) { d.rsLimit = n }

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
func (d *Desired) overflow(name types.NamespacedName, st *ServiceState, limit int) (Set, int) {
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
		if size := d.setSize[s] + delta[s]; delta[s] > 0 && size > limit {
			return s, size
		}
	}
	return 0, 0
}

// admit returns the refusal of st when it does not fit the node-wide budgets its namespace
// may fill (nil: it fits).
func (d *Desired) admit(name types.NamespacedName, st *ServiceState) *ServiceState {
	if d.setLimit > 0 {
		limit := budgetLimit(d.setLimit, name.Namespace)
		if s, size := d.overflow(name, st, limit); size > 0 {
			return d.refuseForSet(st, s, size, limit)
		}
	}
	if d.rsLimit > 0 {
		limit := budgetLimit(d.rsLimit, name.Namespace)
		old := realServerCount(d.services[name])
		n := realServerCount(st)
		if total := d.realServers - old + n; n > old && total > limit {
			return d.refuseForRealServers(st, n, total, limit)
		}
	}
	return nil
}

// readmit lets in the held Services that fit now: those of the reserved namespaces first,
// then the smallest.
func (d *Desired) readmit(t *Touched) {
	names := d.Held()
	size := func(n types.NamespacedName) int { return len(d.held[n].Members) + realServerCount(d.held[n]) }
	slices.SortStableFunc(names, func(a, b types.NamespacedName) int {
		return cmp.Or(-cmp.Compare(boolInt(ReservedNamespace(a.Namespace)), boolInt(ReservedNamespace(b.Namespace))),
			cmp.Compare(size(a), size(b)))
	})
	for _, n := range names {
		st := d.held[n]
		if d.admit(n, st) != nil {
			continue
		}
		delete(d.held, n)
		d.update(n, st, t)
		d.readmitted = append(d.readmitted, n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// realServerCount is the number of real servers st asks for (a virtual server another
// Service wins counts too: the budget is of what Services ask for).
func realServerCount(st *ServiceState) int {
	if st == nil {
		return 0
	}
	n := 0
	for _, v := range st.VirtualServers {
		n += len(v.Destinations)
	}
	return n
}

// refuseForSet is what a Service held back for want of room in set s contributes.
func (d *Desired) refuseForSet(st *ServiceState, s Set, size, limit int) *ServiceState {
	n := 0
	for _, m := range st.Members {
		if m.Set == s {
			n++
		}
	}
	ns, held := d.topSetNamespace(s)
	return refused(st, Problem{Service: st.Name, Field: fieldOf(s), Reason: ReasonSetCapacityExceeded,
		Message: fmt.Sprintf("the Service's %s members of set %s would take it to %s members, beyond the %s its namespace may fill (%s); set %s is full: namespace %s holds %s of %s members; the Service is not programmed on this node until there is room",
			Thousands(n), s, Thousands(size), Thousands(limit), budgetFlag("--kipvs-max-set-members", st.Name.Namespace), s, ns, Thousands(held), Thousands(d.setLimit))})
}

// refuseForRealServers is what a Service held back for want of room in the node's real
// servers contributes.
func (d *Desired) refuseForRealServers(st *ServiceState, n, total, limit int) *ServiceState {
	ns, held := d.topRealServerNamespace()
	return refused(st, Problem{Service: st.Name, Field: serverField(st), Reason: ReasonRealServerCapacityExceeded,
		Message: fmt.Sprintf("the Service's %s real servers would take the node's to %s, beyond the %s its namespace may fill (%s); the node's real servers are full: namespace %s holds %s of %s; the Service is not programmed on this node until there is room",
			Thousands(n), Thousands(total), Thousands(limit), budgetFlag("--kipvs-max-real-servers", st.Name.Namespace), ns, Thousands(held), Thousands(d.rsLimit))})
}

// budgetFlag names the flag of a budget and, for an ordinary namespace, the reserve.
func budgetFlag(flag, ns string) string {
	if ReservedNamespace(ns) {
		return flag
	}
	return flag + " less the 1/16 kept for kube-system and default"
}

// serverField names the part of a (built) Service that makes its real servers many: its
// endpoints when a virtual server has more real servers than the Service has virtual
// servers, else what makes its virtual servers many.
func serverField(st *ServiceState) string {
	most := 0
	for _, v := range st.VirtualServers {
		most = max(most, len(v.Destinations))
	}
	if most > len(st.VirtualServers) {
		return "endpoints"
	}
	return vsField(st.VirtualServers)
}

// vsField names the part of a Service that makes its virtual servers many: the kind with
// the most of them, and within it its addresses or its ports, whichever are more.
func vsField(vss []*VirtualServer) string {
	var byKind [kindNodePort + 1]int
	addrs := map[netip.Addr]bool{}
	ports := map[uint16]bool{}
	for _, v := range vss {
		byKind[v.Kind]++
	}
	big := kindClusterIP
	for k := range byKind {
		if byKind[k] > byKind[big] {
			big = VSKind(k)
		}
	}
	for _, v := range vss {
		if v.Kind == big {
			addrs[v.Address] = true
			ports[v.Port] = true
		}
	}
	if (big == kindExternalIP || big == kindLoadBalancer) && len(addrs) >= len(ports) {
		return big.field()
	}
	return "spec.ports"
}

// capServiceServers refuses st (returns its refusal; nil: within the limits) when the
// virtual servers built so far, after port done of total, or their nrs real servers are
// more than the per-Service limits (0: no limit).
func capServiceServers(st *ServiceState, o *Options, nrs, done, total int) *ServiceState {
	nvs := len(st.VirtualServers)
	if o.MaxServiceVirtualServers > 0 && nvs > o.MaxServiceVirtualServers {
		return refused(st, Problem{Service: st.Name, Field: vsField(st.VirtualServers), Reason: ReasonTooManyVirtualServers,
			Message: fmt.Sprintf("the Service needs at least %s virtual servers (its first %d of %d ports), more than the per-Service limit of %s (--kipvs-max-service-virtual-servers); the Service is not programmed on this node",
				Thousands(nvs), done, total, Thousands(o.MaxServiceVirtualServers))})
	}
	if o.MaxServiceRealServers > 0 && nrs > o.MaxServiceRealServers {
		return refused(st, Problem{Service: st.Name, Field: serverField(st), Reason: ReasonTooManyRealServers,
			Message: fmt.Sprintf("the Service needs at least %s real servers (%s virtual servers of its first %d of %d ports), more than the per-Service limit of %s (--kipvs-max-service-real-servers); the Service is not programmed on this node",
				Thousands(nrs), Thousands(nvs), done, total, Thousands(o.MaxServiceRealServers))})
	}
	return nil
}

// Thousands formats n with a comma between each group of three digits (1,048,576).
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
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

// topSetNamespace returns the namespace whose Services hold the most members of set s,
// with their number (ties: the first by name).
func (d *Desired) topSetNamespace(s Set) (string, int) {
	top, most := "", 0
	for ns, c := range d.nsMembers {
		if c[s] > most || (c[s] == most && most > 0 && ns < top) {
			top, most = ns, c[s]
		}
	}
	return top, most
}

// topRealServerNamespace returns the namespace whose Services ask for the most real
// servers, with their number (ties: the first by name).
func (d *Desired) topRealServerNamespace() (string, int) {
	top, most := "", 0
	for ns, n := range d.nsRealServers {
		if n > most || (n == most && most > 0 && ns < top) {
			top, most = ns, n
		}
	}
	return top, most
}

// BudgetRealServers is the Name of the real-server Budget.
const BudgetRealServers = "real-servers"

// Budget is how much of one node-wide budget the programmed Services use, and the
// namespace whose Services use the most of it.
type Budget struct {
	// Name is a set's kind ("cluster-ip") or BudgetRealServers.
	Name string
	// Used of Limit (0: no limit); the reserved namespaces may fill Limit, the others
	// Limit less Limit/ReserveDivisor.
	Used, Limit int
	// TopNamespace holds TopUsed of Used (a set member two Services hold counts for each).
	TopNamespace string
	TopUsed      int
}

// Budgets returns the budgets in use: every set with a member, in AllSets's order, then
// the real servers when there are any.
func (d *Desired) Budgets() []Budget {
	var out []Budget
	for _, s := range AllSets() {
		if d.setSize[s] == 0 {
			continue
		}
		ns, n := d.topSetNamespace(s)
		out = append(out, Budget{Name: s.String(), Used: d.setSize[s], Limit: d.setLimit, TopNamespace: ns, TopUsed: n})
	}
	if d.realServers > 0 {
		ns, n := d.topRealServerNamespace()
		out = append(out, Budget{Name: BudgetRealServers, Used: d.realServers, Limit: d.rsLimit, TopNamespace: ns, TopUsed: n})
	}
	return out
}
