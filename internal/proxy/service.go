package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// ServiceInput is one Service with its EndpointSlices (sorted by name), as the watch layer
// delivers it. Inputs are read-only.
type ServiceInput struct {
	Service *v1.Service
	Slices  []*discoveryv1.EndpointSlice
}

// Problem is something about a Service (or one of its EndpointSlices) that kipvs cannot
// program as written: a value the apiserver admits but the kernel cannot take, or, from a
// source file nothing validated, a value the apiserver would have rejected (validate.go).
// The daemon reports it as a Warning Event on the Service and a log line. Every other
// Service is still programmed, and so is the rest of this one unless the Service itself is
// invalid (see docs/bad-input.md).
type Problem struct {
	Service types.NamespacedName
	Field   string // e.g. spec.externalIPs[1]
	Reason  string // short CamelCase reason for the Event
	Message string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s: %s", p.Service, p.Field, p.Message)
}

// ServiceState is one Service's contribution to the desired kernel state for one family.
type ServiceState struct {
	Name           types.NamespacedName
	VirtualServers []*VirtualServer // sorted by key
	Members        []Member         // sorted, unique
	Addresses      []netip.Addr     // VIPs to bind on kube-ipvs0, sorted, unique
	Problems       []Problem
	// HealthCheckNodePort and LocalEndpoints feed the per-service health check server
	// (externalTrafficPolicy=Local LoadBalancer services; 0 when none).
	HealthCheckNodePort uint16
	LocalEndpoints      int
	// OutFilter lists LoadBalancer virtual servers with source ranges that exclude every
	// node address: node-originated connections to them are dropped (KUBE-IPVS-OUT-FILTER).
	OutFilter []VSKey
	// NoLocalInternal / NoLocalExternal: the Service has an internal / external Local traffic
	// policy and endpoints, but none on this node (kubeproxy_sync_proxy_rules_no_local_endpoints_total).
	NoLocalInternal, NoLocalExternal bool
}

// contributesNothing reports whether st (nil too) adds nothing a reader of Desired sees, so
// Desired need not keep it. LocalEndpoints alone counts for nothing: it is read only with
// HealthCheckNodePort. (TestContributesNothingChecksEveryField keeps this list complete.)
func (st *ServiceState) contributesNothing() bool {
	return st == nil || (len(st.VirtualServers) == 0 && len(st.Members) == 0 && len(st.Addresses) == 0 &&
		len(st.Problems) == 0 && len(st.OutFilter) == 0 && st.HealthCheckNodePort == 0 && !st.NoLocalInternal && !st.NoLocalExternal)
}

// Annotations kipvs reads on Services (beyond kube-proxy, which has one global scheduler).
const (
	AnnotationScheduler      = "kipvs.io/scheduler"
	AnnotationSchedulerFlags = "kipvs.io/scheduler-flags"
)

// ServiceAnnotations lists every Service annotation BuildService reads (the watch layer
// keeps only these in its cache).
func ServiceAnnotations() []string { return []string{AnnotationScheduler, AnnotationSchedulerFlags} }

// DefaultAffinityTimeout is sessionAffinityConfig.clientIP.timeoutSeconds when unset (3 h).
const DefaultAffinityTimeout = 10800

// BuildService computes the contribution of one Service. A nil input or a Service kipvs
// does not proxy (headless, ExternalName, no IP of this family) contributes nothing; an
// invalid Service contributes only its Problems.
func BuildService(in ServiceInput, o *Options) *ServiceState {
	svc := in.Service
	if svc == nil {
		return nil
	}
	st := &ServiceState{Name: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return st
	}
	b := builder{o: o, svc: svc, st: st, members: map[Member]struct{}{}, addrs: map[netip.Addr]struct{}{}}
	clusterIPs, valid := b.validateService()
	if !valid || len(clusterIPs) == 0 {
		// No cluster IP of this family (headless, single-stack of the other family, or
		// unusable): the Service has nothing in this family, not even its node ports, as
		// in kube-proxy (each family's proxier sees only the Services with a cluster IP of
		// its family; an IPv4-only NodePort Service has no IPv6 node port).
		b.finish()
		return st
	}
	sched, flags := b.scheduler()
	vips := serviceVIPs{cluster: clusterIPs, external: b.externalIPs(), lb: b.loadBalancerIPs()}
	checked := b.checkSlices(in.Slices)
	nrs := 0 // real servers of the virtual servers built so far
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		proto, _ := protocolOf(sp.Protocol)                                        // validated
		p := &servicePort{index: i, spec: sp, proto: proto, port: uint16(sp.Port), // validated: 1..65535
			sched: sched, flags: flags, owner: ServicePortName{NamespacedName: st.Name, Port: sp.Name}}
		b.portEndpoints(p, checked)
		b.hairpin(p)
		built := len(st.VirtualServers)
		b.clusterIPServers(p, vips.cluster)
		b.externalIPServers(p, vips.external)
		b.loadBalancerServers(p, vips.lb)
		b.nodePortServers(p)
		for _, v := range st.VirtualServers[built:] {
			nrs += len(v.Destinations)
		}
		if r := capServiceServers(st, o, nrs, i+1, len(svc.Spec.Ports)); r != nil {
			return r
		}
	}

	if externalPolicyLocal(svc) && svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.HealthCheckNodePort != 0 { // validated: 1..65535
		st.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
		b.member(Member{Set: SetHealthCheckNodePort, Port: st.HealthCheckNodePort})
	}
	for a := range b.addrs {
		b.member(Member{Set: SetIPVSIPs, Addr: a})
	}
	b.finish()
	return capServiceMembers(st, o.MaxServiceSetMembers)
}

// serviceVIPs are a Service's usable addresses of the family, by kind.
type serviceVIPs struct {
	cluster, external []netip.Addr
	lb                []lbIP
}

// servicePort is one port of the Service being built, with the endpoints each kind of
// virtual server of it gets.
type servicePort struct {
	index        int
	spec         *v1.ServicePort
	proto        inet.Protocol
	port         uint16
	sched        string
	flags        []string
	owner        ServicePortName
	all          []endpoint // every endpoint of the port, for the hairpin members
	clusterEps   []endpoint // what cluster IPs get
	externalEps  []endpoint // what external IPs, load balancer IPs and node ports get
	externalOnly bool       // externalTrafficPolicy Local: no SNAT
}

// portEndpoints chooses the real servers of each kind of virtual server of p (see
// docs/traffic-policy.md) and counts the local endpoints for the health check.
func (b *builder) portEndpoints(p *servicePort, checked []checkedSlice) {
	svc, o, st := b.svc, b.o, b.st
	apiProto := p.spec.Protocol
	if apiProto == "" {
		apiProto = v1.ProtocolTCP
	}
	p.all = endpointsFor(checked, p.spec.Name, apiProto, o.NodeName)
	// KEP-1669: within the scope of each traffic policy, ready endpoints, else serving
	// terminating ones. The scopes are chosen apart: a node whose only pod is terminating
	// keeps draining to it under a Local policy even while other nodes have ready pods.
	ready := usable(p.all)
	local := usable(localOnly(p.all))
	zone := o.NodeLabels[ZoneLabel]

	// internalTrafficPolicy=Local: this node's endpoints only, no fallback (as the KEP and
	// kube-proxy's iptables/nftables modes; kube-proxy's IPVS mode falls back).
	// externalTrafficPolicy=Local: never SNAT, so the client's source IP reaches the pod;
	// this node's endpoints, or when it has none, the cluster's, as kube-proxy's IPVS mode:
	// this node's own pods and processes are answered (their replies come back through
	// it), while a client elsewhere gets the reply from the pod's address and the
	// connection fails, which upstream's e2e asserts (docs/traffic-policy.md).
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	p.clusterEps = topologyFilter(ready, o.NodeName, zone, !o.IgnoreNodeHints)
	if internalLocal {
		p.clusterEps = local
	}
	p.externalEps = topologyFilter(ready, o.NodeName, zone, !o.IgnoreNodeHints)
	p.externalOnly = externalPolicyLocal(svc)
	if p.externalOnly && len(local) > 0 {
		p.externalEps = local
	}
	// The health check counts ready local endpoints only: a node left with terminating ones
	// answers 503 so the load balancer drains it, while it still serves them.
	if n := readyCount(local); externalPolicyLocal(svc) && n > st.LocalEndpoints {
		st.LocalEndpoints = n
	}
	if len(ready) > 0 && len(local) == 0 {
		st.NoLocalInternal = st.NoLocalInternal || internalLocal
		st.NoLocalExternal = st.NoLocalExternal || externalPolicyLocal(svc)
	}
}

// virtualServer adds one virtual server of p.
func (b *builder) virtualServer(p *servicePort, kind VSKind, addr netip.Addr, port uint16, eps []endpoint) {
	v := &VirtualServer{
		VSKey:        VSKey{Protocol: p.proto, Address: addr, Port: port},
		Scheduler:    p.sched,
		SchedFlags:   p.flags,
		Destinations: toDestinations(eps),
		Owner:        p.owner,
		Kind:         kind,
	}
	if b.svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		v.Persistent = true
		v.Timeout = DefaultAffinityTimeout
		if c := b.svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			v.Timeout = uint32(*c.ClientIP.TimeoutSeconds) // validated: 1..MaxAffinityTimeout
		}
	}
	b.st.VirtualServers = append(b.st.VirtualServers, v)
}

// vipMember is the ip,proto:port member of set for a VIP of p.
func (p *servicePort) vipMember(set Set, ip netip.Addr) Member {
	return Member{Set: set, Addr: ip, Proto: p.proto, Port: p.port}
}

// hairpin: a local endpoint reaching its own Service through a VIP must be masqueraded, or
// the reply would bypass IPVS.
func (b *builder) hairpin(p *servicePort) {
	for _, e := range p.all {
		if e.local {
			b.member(Member{Set: SetLoopBack, Addr: e.addr, Proto: p.proto, Port: e.port, Source: HostSource(e.addr)})
		}
	}
}

func (b *builder) clusterIPServers(p *servicePort, ips []netip.Addr) {
	for _, ip := range ips {
		b.member(p.vipMember(SetClusterIP, ip))
		b.bind(ip)
		b.virtualServer(p, kindClusterIP, ip, p.port, p.clusterEps)
	}
}

func (b *builder) externalIPServers(p *servicePort, ips []netip.Addr) {
	for _, ip := range ips {
		if p.externalOnly {
			b.member(p.vipMember(SetExternalIPLocal, ip))
		} else {
			b.member(p.vipMember(SetExternalIP, ip))
		}
		b.bind(ip)
		b.virtualServer(p, kindExternalIP, ip, p.port, p.externalEps)
	}
}

func (b *builder) loadBalancerServers(p *servicePort, lbs []lbIP) {
	for _, lb := range lbs {
		b.member(p.vipMember(SetLoadBalancer, lb.addr))
		if p.externalOnly {
			b.member(p.vipMember(SetLoadBalancerLocal, lb.addr))
		}
		b.sourceRanges(p.index, lb.addr, p.proto, p.port)
		if !lb.local {
			b.bind(lb.addr)
		}
		b.virtualServer(p, kindLoadBalancer, lb.addr, p.port, p.externalEps)
	}
}

// nodePortServers adds p's node port on every node port address (NodePort and LoadBalancer
// Services).
func (b *builder) nodePortServers(p *servicePort) {
	svc, o := b.svc, b.o
	if p.spec.NodePort == 0 || (svc.Spec.Type != v1.ServiceTypeNodePort && svc.Spec.Type != v1.ServiceTypeLoadBalancer) || len(o.NodePortAddresses) == 0 {
		return
	}
	np := uint16(p.spec.NodePort) // validated: 1..65535
	set, localSet := nodePortSets(p.proto)
	if p.proto == inet.SCTP {
		for _, ip := range o.NodePortAddresses {
			b.member(Member{Set: set, Addr: ip, Proto: inet.SCTP, Port: np})
			if p.externalOnly {
				b.member(Member{Set: localSet, Addr: ip, Proto: inet.SCTP, Port: np})
			}
		}
	} else {
		b.member(Member{Set: set, Port: np})
		if p.externalOnly {
			b.member(Member{Set: localSet, Port: np})
		}
	}
	for _, ip := range o.NodePortAddresses {
		b.virtualServer(p, kindNodePort, ip, np, p.externalEps)
	}
}

type builder struct {
	o       *Options
	svc     *v1.Service
	st      *ServiceState
	members map[Member]struct{}
	addrs   map[netip.Addr]struct{}
}

func (b *builder) problem(field, reason, msg string) {
	b.st.Problems = append(b.st.Problems, Problem{Service: b.st.Name, Field: field, Reason: reason, Message: msg})
}

func (b *builder) member(m Member) { b.members[m] = struct{}{} }

func (b *builder) bind(a netip.Addr) { b.addrs[a] = struct{}{} }

// scheduler returns the Service's scheduler and flags: the kipvs.io/scheduler annotation
// when valid, else the global one. An invalid annotation is a Problem, not a failure.
func (b *builder) scheduler() (string, []string) {
	sched := b.o.Scheduler
	if sched == "" {
		sched = ipvsmode.DefaultScheduler
	}
	if a, ok := b.svc.Annotations[AnnotationScheduler]; ok {
		switch {
		case slices.Contains(b.o.UnavailableSchedulers, a):
			b.problem("metadata.annotations["+AnnotationScheduler+"]", "SchedulerUnavailable",
				fmt.Sprintf("scheduler %q cannot be loaded on node %s (kernel module ip_vs_%s missing); using the global scheduler %q", a, b.o.NodeName, a, sched))
		case slices.Contains(ipvsmode.Schedulers(), a):
			sched = a
		default:
			b.problem("metadata.annotations["+AnnotationScheduler+"]", "UnknownScheduler",
				fmt.Sprintf("scheduler %q is not one of %v; using the global scheduler %q", a, ipvsmode.Schedulers(), sched))
		}
	}
	var flags []string
	if a, ok := b.svc.Annotations[AnnotationSchedulerFlags]; ok && a != "" {
		for _, f := range splitComma(a) {
			if !slices.Contains(ipvsmode.SchedulerFlags(sched), f) {
				b.problem("metadata.annotations["+AnnotationSchedulerFlags+"]", "InvalidSchedulerFlag",
					fmt.Sprintf("flag %q is not valid for scheduler %q (valid: %v); flag ignored", f, sched, ipvsmode.SchedulerFlags(sched)))
				continue
			}
			if !slices.Contains(flags, f) {
				flags = append(flags, f)
			}
		}
	} else if sched == "mh" {
		// As upstream: mh hashes on the source port too, so connections from one client spread.
		flags = []string{ipvsmode.FlagMHPort}
	}
	slices.Sort(flags)
	return sched, flags
}

// sourceRanges records loadBalancerSourceRanges for one LB ip:port: the -FW set marks it
// as filtered, -SOURCE-CIDR holds the allowed ranges, and -SOURCE-IP lets the node itself
// (or a backend hairpinning through the LB IP) in when a range covers the node IP (NodeIP,
// as kube-proxy's allowFromNode).
func (b *builder) sourceRanges(portIdx int, ip netip.Addr, proto inet.Protocol, port uint16) {
	if len(b.svc.Spec.LoadBalancerSourceRanges) == 0 {
		return
	}
	var cidrs []netip.Prefix
	for j, s := range b.svc.Spec.LoadBalancerSourceRanges {
		for _, part := range splitComma(s) {
			p, ok := inet.ParsePrefixSloppy(part) // leading zeros read as decimal, as kube-proxy
			if !ok {
				if portIdx == 0 {
					b.problem(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", j), "InvalidSourceRange", fmt.Sprintf("%q is not a CIDR; ignored", part))
				}
				continue
			}
			p = p.Masked()
			// Not Family.Matches: an IPv4-mapped range is an IPv6 range (as upstream), and
			// its text could not go into an IPv4 set.
			if p.Addr().Is4() == (b.o.Family == inet.IPv4) {
				cidrs = append(cidrs, p)
			}
		}
	}
	if allowsEverySource(cidrs) {
		return
	}
	// With ranges of the other family only, nothing of this family may reach the LB IP.
	b.member(Member{Set: SetLoadBalancerFW, Addr: ip, Proto: proto, Port: port})
	allowNode := false
	for _, p := range cidrs {
		b.member(Member{Set: SetLoadBalancerSourceNet, Addr: ip, Proto: proto, Port: port, Source: p})
		if b.o.NodeIP.IsValid() && p.Contains(b.o.NodeIP) {
			allowNode = true
		}
	}
	if allowNode {
		b.member(Member{Set: SetLoadBalancerSourceIP, Addr: ip, Proto: proto, Port: port, Source: HostSource(ip)})
	} else {
		b.st.OutFilter = append(b.st.OutFilter, VSKey{Protocol: proto, Address: ip, Port: port})
	}
}

func (b *builder) finish() {
	st := b.st
	// A problem found while programming each port (a bad source range) is reported once.
	seen := map[Problem]bool{}
	st.Problems = slices.DeleteFunc(st.Problems, func(p Problem) bool {
		dup := seen[p]
		seen[p] = true
		return dup
	})
	slices.SortFunc(st.VirtualServers, func(x, y *VirtualServer) int {
		if c := x.VSKey.Compare(y.VSKey); c != 0 {
			return c
		}
		return cmp.Compare(x.Kind, y.Kind)
	})
	// Two ports of one Service cannot share a key (the apiserver forbids it), but a
	// ClusterIP equal to one of its own external or load balancer IPs could collide: the
	// cluster IP is kept, as between Services (Desired), and so are only its set members.
	st.VirtualServers = slices.CompactFunc(st.VirtualServers, func(x, y *VirtualServer) bool { return x.VSKey == y.VSKey })
	st.Members = make([]Member, 0, len(b.members))
	for m := range b.members {
		if !m.Set.claimed() || st.claimKind(VSKey{Protocol: m.Proto, Address: m.Addr, Port: m.Port}) == m.Set.claimKind() {
			st.Members = append(st.Members, m)
		}
	}
	slices.SortFunc(st.Members, Member.Compare)
	st.Addresses = make([]netip.Addr, 0, len(b.addrs))
	for a := range b.addrs {
		st.Addresses = append(st.Addresses, a)
	}
	slices.SortFunc(st.Addresses, netip.Addr.Compare)
	slices.SortFunc(st.OutFilter, VSKey.Compare)
	st.OutFilter = slices.Compact(st.OutFilter)
}

// claimKind returns the kind of st's virtual server for k (st.VirtualServers is sorted and
// compact).
func (st *ServiceState) claimKind(k VSKey) VSKind {
	i, ok := slices.BinarySearchFunc(st.VirtualServers, k, func(v *VirtualServer, k VSKey) int { return v.VSKey.Compare(k) })
	if !ok {
		return kindClusterIP
	}
	return st.VirtualServers[i].Kind
}

// RequestedScheduler returns the scheduler a Service asks for with the kipvs.io/scheduler
// annotation, when it is a scheduler kipvs knows (and so may need its module probed).
func RequestedScheduler(svc *v1.Service) (string, bool) {
	if svc == nil {
		return "", false
	}
	a, ok := svc.Annotations[AnnotationScheduler]
	return a, ok && slices.Contains(ipvsmode.Schedulers(), a)
}

func externalPolicyLocal(svc *v1.Service) bool {
	if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
		return false
	}
	return svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(svc.Spec.ExternalIPs) > 0
}

func protocolOf(p v1.Protocol) (inet.Protocol, bool) {
	switch p {
	case v1.ProtocolTCP, "":
		return inet.TCP, true
	case v1.ProtocolUDP:
		return inet.UDP, true
	case v1.ProtocolSCTP:
		return inet.SCTP, true
	}
	return 0, false
}

func nodePortSets(p inet.Protocol) (set, local Set) {
	switch p {
	case inet.UDP:
		return SetNodePortUDP, SetNodePortLocalUDP
	case inet.SCTP:
		return SetNodePortSCTP, SetNodePortLocalSCTP
	}
	return SetNodePortTCP, SetNodePortLocalTCP
}

func splitComma(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
