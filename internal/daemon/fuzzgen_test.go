package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipvs/kipvs/internal/proxy"
)

// The fuzz input is a choice stream: every field of the generated objects is picked from a
// table of interesting values (index 0 is the ordinary one) by the next byte of input, so
// the fuzzer explores combinations instead of syntax. Placeholders starting with '$' stand
// for an ordinary value private to the object (each Service has its own addresses, node
// ports and endpoint addresses, so well-formed Services never collide with one another).
type chooser interface {
	pick(name string, table []string) string
}

// byteChooser reads the fuzz input; once it is exhausted every pick is the ordinary value.
type byteChooser struct {
	data []byte
	i    int
}

func (c *byteChooser) pick(_ string, table []string) string {
	if c.i >= len(c.data) {
		return table[0]
	}
	b := c.data[c.i]
	c.i++
	return table[int(b)%len(table)]
}

// scriptChooser builds a seed: it answers picks by name from a script (ordinary value for
// names it does not mention) and records the bytes that make a byteChooser answer the same.
type scriptChooser struct {
	script map[string]string
	used   map[string]bool
	out    []byte
}

func (c *scriptChooser) pick(name string, table []string) string {
	idx := 0
	if v, ok := c.script[name]; ok {
		idx = slices.Index(table, v)
		if idx < 0 {
			panic(fmt.Sprintf("seed script: %s=%q is not in the table %q", name, v, table))
		}
		c.used[name] = true
	}
	c.out = append(c.out, byte(idx))
	return table[idx]
}

// encodeSeed turns a script (field name -> table value) into fuzz input bytes.
func encodeSeed(script map[string]string) []byte {
	c := &scriptChooser{script: script, used: map[string]bool{}}
	genScenario(c)
	for name := range script {
		if !c.used[name] {
			panic(fmt.Sprintf("seed script: %s is never picked (misspelt, or its parent is not generated)", name))
		}
	}
	return c.out
}

// The node every scenario runs on: dual-stack, these two addresses on its links.
const fuzzNodeName = "node-a"

var (
	fuzzNodeIP4 = "192.168.1.10"
	fuzzNodeIP6 = "2001:db8::10"
)

// table is a list of values to pick from: index 0 is the ordinary value, and the first good
// ones are valid on their own (a "clean" Service picks only among those).
type table struct {
	v    []string
	good int
}

func tab(good int, v ...string) table {
	if good < 0 {
		good = len(v)
	}
	return table{v: v, good: good}
}

// gen picks for one object: a "clean" one only among each table's good values, a
// "partial" one too except for the list elements kipvs skips alone (external IPs, ingress
// IPs, endpoint addresses, the scheduler annotation), which it picks from the whole table.
type gen struct {
	c     chooser
	shape string
}

func (g gen) pick(name string, t table) string {
	if g.shape == "clean" || g.shape == "partial" {
		return g.c.pick(name, t.v[:t.good])
	}
	return g.c.pick(name, t.v)
}

func (g gen) pickElem(name string, t table) string {
	if g.shape == "clean" {
		return g.c.pick(name, t.v[:t.good])
	}
	return g.c.pick(name, t.v)
}

var tabShape = tab(-1, "random", "clean", "partial")

// Tables. Index 0 is the ordinary value.
var (
	tabCount4     = tab(-1, "1", "2", "3", "4")
	tabCount3     = tab(-1, "1", "2", "0")
	tabPortCount  = tab(3, "1", "2", "0", "huge")
	tabSrcCount   = tab(3, "0", "1", "2", "huge")
	tabCount02    = tab(-1, "0", "1", "2")
	tabEndpoints  = tab(-1, "2", "1", "3", "0")
	tabZone       = tab(-1, "", "zone-a", "zone-b")
	tabPodCIDR4   = tab(2, "10.244.1.0/24", "", "bad", "10.244.1.0/33")
	tabPodCIDR6   = tab(2, "fd00:10:244:1::/64", "", "fe80::/64%eth0")
	tabNodeIP     = tab(1, "good", "bad")
	tabLocalMode  = tab(-1, "ClusterCIDR", "NodeCIDR")
	tabType       = tab(3, "ClusterIP", "NodePort", "LoadBalancer", "ExternalName", "Bogus")
	tabFamilies   = tab(-1, "v4", "v6", "v4v6", "v6v4")
	tabClusterIP4 = tab(1, "$good", "$node", "239.1.1.1", "0.0.0.0", "255.255.255.255", "169.254.1.1", "127.0.0.1", "10.96.0.300")
	tabClusterIP6 = tab(1, "$good", "$node", "ff05::1", "::", "fe80::1", "fe80::1%eth0", "::1", "fd00:96::zz")
	tabPolicy     = tab(2, "$auto", "PreferDualStack", "SingleStack", "RequireDualStack")
	tabFamFields  = tab(1, "ok", "swapped", "missing", "clusterIPdiffers")
	tabPortName   = tab(1, "$auto", "", "dup")
	tabPort       = tab(6, "80", "443", "53", "8443", "1", "65535", "0", "-1", "65536", "65616")
	tabProtocol   = tab(3, "TCP", "UDP", "SCTP", "ICMP")
	tabTargetPort = tab(3, "$port", "8080", "http", "0", "-1", "65536")
	tabNodePort   = tab(2, "$auto", "$max", "0", "65536", "-1")
	tabAffinity   = tab(-1, "None", "ClientIP")
	tabTimeout    = tab(4, "nil", "10800", "1", "86400", "0", "-1", "86401")
	tabETP        = tab(2, "$auto", "Local", "Bogus", "")
	tabITP        = tab(2, "Cluster", "Local", "Bogus")
	tabHCPort     = tab(1, "$auto", "0", "-1", "65536")
	tabExtIP      = tab(2, "$ext4", "$ext6", "239.1.1.1", "$node4", "bad", "fe80::1%eth0", "0.0.0.0", "255.255.255.255", "ff05::1", "169.254.169.254", "$node6", "::", "$claim4", "$claim6", "$claim4b", "$claim6b", "$pod4", "$pod6", "$gw4", "$nbr6", "$api4")
	tabExtCount   = tab(3, "0", "1", "2", "huge")
	tabLBIP       = tab(-1, "", "$lb4")
	tabIngressIP  = tab(3, "$lb4", "$lb6", "", "0.0.0.0", "239.1.1.1", "ff05::1", "169.254.169.254", "fe80::1", "$node4", "bad", "fe80::1%eth0", "255.255.255.255", "$claim4", "$claim6", "$claim4b", "$claim6b", "$pod4", "$pod6", "$gw4", "$nbr6", "$api4")
	tabIPMode     = tab(-1, "nil", "VIP", "Proxy")
	tabSrcRange   = tab(5, "10.0.0.0/8", "192.168.1.0/24", "203.0.113.7/32", "2001:db8::/32", "2001:db8::10/128", "0.0.0.0/0", "::/0", "bad", "10.0.0.0/33", "fe80::/64%eth0")
	tabScheduler  = tab(4, "none", "rr", "sh", "mh", "bogus", "")
	tabSchedFlags = tab(1, "none", "sh-port", "mh-port,mh-fallback", "bogus")
	tabTopology   = tab(-1, "none", "auto", "PreferClose")
	tabAddrType   = tab(-1, "$fam", "IPv4", "IPv6", "FQDN")
	tabEPPort     = tab(3, "8080", "9090", "nil", "0", "-1", "65536", "65616")
	tabEPAddr     = tab(2, "$ep", "$nodeaddr", "255.255.255.255", "0.0.0.0", "224.0.0.1", "127.0.0.1", "fe80::1%eth0", "fe80::1", "::", "bad", "$other", "169.254.1.1")
	tabCond       = tab(-1, "nil", "true", "false")
	tabEPNode     = tab(-1, "node-a", "nil", "node-b")
	tabHints      = tab(-1, "nil", "zone-a", "zone-b", "empty")
)

// scenario is one decoded fuzz input.
type scenario struct {
	// nftables runs the scenario over the nftables filter backend (not generated: FuzzSync
	// runs every input over both backends).
	nftables  bool
	localMode string
	node      *v1.Node
	services  []*v1.Service
	slices    [][]*discoveryv1.EndpointSlice // per Service
}

func genScenario(cc chooser) *scenario {
	c := gen{c: cc}
	sc := &scenario{localMode: c.pick("mode", tabLocalMode)}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNodeName, Labels: map[string]string{"kubernetes.io/hostname": fuzzNodeName}}}
	if z := c.pick("node.zone", tabZone); z != "" {
		node.Labels[proxy.ZoneLabel] = z
	}
	for _, p := range []string{c.pick("node.podcidr4", tabPodCIDR4), c.pick("node.podcidr6", tabPodCIDR6)} {
		if p != "" {
			node.Spec.PodCIDRs = append(node.Spec.PodCIDRs, p)
		}
	}
	if len(node.Spec.PodCIDRs) > 0 {
		node.Spec.PodCIDR = node.Spec.PodCIDRs[0]
	}
	ip4 := fuzzNodeIP4
	if c.pick("node.ip", tabNodeIP) == "bad" {
		ip4 = "192.168.1.300"
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip4}, {Type: v1.NodeInternalIP, Address: fuzzNodeIP6}}
	sc.node = node

	n, _ := strconv.Atoi(c.pick("n", tabCount4))
	for i := range n {
		svc, sl := genService(gen{c: cc, shape: c.pick(fmt.Sprintf("s%d.shape", i), tabShape)}, i)
		sc.services = append(sc.services, svc)
		sc.slices = append(sc.slices, sl)
	}
	return sc
}

func genService(c gen, i int) (*v1.Service, []*discoveryv1.EndpointSlice) {
	p := func(f string) string { return fmt.Sprintf("s%d.%s", i, f) }
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: "default"}}
	sp := &svc.Spec
	sp.Type = v1.ServiceType(c.pick(p("type"), tabType))
	external := sp.Type == v1.ServiceTypeNodePort || sp.Type == v1.ServiceTypeLoadBalancer

	fams := c.pick(p("fam"), tabFamilies)
	ip4 := resolveAddr(c.pick(p("ip4"), tabClusterIP4), fmt.Sprintf("10.96.0.%d", 10+i), "")
	ip6 := resolveAddr(c.pick(p("ip6"), tabClusterIP6), fmt.Sprintf("fd00:96::%x", 0xa0+i), "")
	switch fams {
	case "v4":
		sp.ClusterIPs, sp.IPFamilies = []string{ip4}, []v1.IPFamily{v1.IPv4Protocol}
	case "v6":
		sp.ClusterIPs, sp.IPFamilies = []string{ip6}, []v1.IPFamily{v1.IPv6Protocol}
	case "v4v6":
		sp.ClusterIPs, sp.IPFamilies = []string{ip4, ip6}, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	case "v6v4":
		sp.ClusterIPs, sp.IPFamilies = []string{ip6, ip4}, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	}
	sp.ClusterIP = sp.ClusterIPs[0]
	pol := c.pick(p("policy"), tabPolicy)
	if pol == "$auto" {
		pol = string(v1.IPFamilyPolicySingleStack)
		if len(sp.ClusterIPs) == 2 {
			pol = string(v1.IPFamilyPolicyRequireDualStack)
		}
	}
	ipfp := v1.IPFamilyPolicy(pol)
	sp.IPFamilyPolicy = &ipfp
	switch c.pick(p("famfields"), tabFamFields) {
	case "swapped":
		if sp.IPFamilies[0] == v1.IPv4Protocol {
			sp.IPFamilies[0] = v1.IPv6Protocol
		} else {
			sp.IPFamilies[0] = v1.IPv4Protocol
		}
	case "missing":
		sp.IPFamilies = nil
	case "clusterIPdiffers":
		sp.ClusterIP = fmt.Sprintf("10.96.9.%d", 10+i)
	}

	nports, huge := 0, false
	switch n := c.pick(p("ports"), tabPortCount); n {
	case "huge":
		huge = true // hostile: more set members than the per-Service limit (fuzzHugeCount)
	default:
		nports, _ = strconv.Atoi(n)
	}
	for j := range nports {
		pp := func(f string) string { return p(fmt.Sprintf("p%d.%s", j, f)) }
		port := v1.ServicePort{}
		switch c.pick(pp("name"), tabPortName) {
		case "$auto":
			port.Name = fmt.Sprintf("p%d", j)
		case "dup":
			port.Name = "p0"
		}
		port.Port = atoi32(c.pick(pp("port"), tabPort))
		port.Protocol = v1.Protocol(c.pick(pp("protocol"), tabProtocol))
		switch tp := c.pick(pp("targetPort"), tabTargetPort); tp {
		case "$port":
			port.TargetPort = intstr.FromInt32(port.Port)
		case "http":
			port.TargetPort = intstr.FromString(tp)
		default:
			port.TargetPort = intstr.FromInt32(atoi32(tp))
		}
		switch np := c.pick(pp("nodePort"), tabNodePort); np {
		case "$auto":
			if external {
				port.NodePort = int32(30000 + 10*i + j)
			}
		case "$max":
			port.NodePort = int32(65535 - 10*i - j)
		default:
			port.NodePort = atoi32(np)
		}
		sp.Ports = append(sp.Ports, port)
	}
	for j := range fuzzHugeCount * btoi(huge) {
		port := v1.ServicePort{Name: fmt.Sprintf("h%d", j), Port: int32(10000 + j), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}
		sp.Ports = append(sp.Ports, port)
	}

	if v1.ServiceAffinity(c.pick(p("affinity"), tabAffinity)) == v1.ServiceAffinityClientIP {
		sp.SessionAffinity = v1.ServiceAffinityClientIP
		if t := c.pick(p("timeout"), tabTimeout); t != "nil" {
			ts := atoi32(t)
			sp.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &ts}}
		}
	} else {
		sp.SessionAffinity = v1.ServiceAffinityNone
	}

	next := 0
	switch n := c.pick(p("exts"), tabExtCount); n {
	case "huge":
		// Hostile: a product of external IPs and ports (and endpoints) beyond the fuzz
		// daemon's per-Service virtual and real server limits, with few set members.
		for j := range fuzzHugeExts {
			sp.ExternalIPs = append(sp.ExternalIPs, fmt.Sprintf("198.18.%d.%d", i, j+1))
		}
	default:
		next, _ = strconv.Atoi(n)
	}
	for j := range next {
		sp.ExternalIPs = append(sp.ExternalIPs, resolveAddr(c.pickElem(p(fmt.Sprintf("ext%d", j)), tabExtIP),
			fmt.Sprintf("203.0.113.%d", 10*i+j+1), fmt.Sprintf("2001:db8:e::%x", 0x10*i+j+1)))
	}
	if len(sp.ExternalIPs) > 0 {
		external = true
	}
	switch etp := c.pick(p("etp"), tabETP); etp {
	case "$auto":
		if external {
			sp.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		}
	default:
		sp.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicy(etp)
	}
	itp := v1.ServiceInternalTrafficPolicy(c.pick(p("itp"), tabITP))
	sp.InternalTrafficPolicy = &itp
	switch hc := c.pick(p("hc"), tabHCPort); hc {
	case "$auto":
		if sp.Type == v1.ServiceTypeLoadBalancer && sp.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			sp.HealthCheckNodePort = int32(31000 + i)
		}
	default:
		sp.HealthCheckNodePort = atoi32(hc)
	}
	if c.pick(p("lbip"), tabLBIP) != "" {
		sp.LoadBalancerIP = fmt.Sprintf("198.51.100.%d", 10*i+1) // deprecated field; kipvs ignores it
	}
	ning, _ := strconv.Atoi(c.pick(p("ingresses"), tabCount02))
	for j := range ning {
		ing := v1.LoadBalancerIngress{IP: resolveAddr(c.pickElem(p(fmt.Sprintf("ing%d", j)), tabIngressIP),
			fmt.Sprintf("198.51.100.%d", 10*i+j+1), fmt.Sprintf("2001:db8:1b::%x", 0x10*i+j+1))}
		if ing.IP == "" {
			ing.Hostname = "lb.example.com"
		}
		switch m := c.pick(p(fmt.Sprintf("ing%d.mode", j)), tabIPMode); m {
		case "VIP", "Proxy":
			mode := v1.LoadBalancerIPMode(m)
			ing.IPMode = &mode
		}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
	}
	switch n := c.pick(p("srcs"), tabSrcCount); n {
	case "huge":
		// Hostile: as many ranges, so with one ingress IP and port more set members than the
		// per-Service limit.
		for j := range fuzzHugeCount {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, fmt.Sprintf("100.%d.%d.0/24", 64+j/256, j%256))
		}
	default:
		nsrc, _ := strconv.Atoi(n)
		for j := range nsrc {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, c.pick(p(fmt.Sprintf("src%d", j)), tabSrcRange))
		}
	}
	if s := c.pickElem(p("sched"), tabScheduler); s != "none" {
		svc.Annotations = map[string]string{proxy.AnnotationScheduler: s}
	}
	if f := c.pick(p("flags"), tabSchedFlags); f != "none" {
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[proxy.AnnotationSchedulerFlags] = f
	}
	switch c.pick(p("topology"), tabTopology) {
	case "auto":
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[v1.AnnotationTopologyMode] = "Auto"
	case "PreferClose":
		d := v1.ServiceTrafficDistributionPreferClose
		sp.TrafficDistribution = &d
	}

	var out []*discoveryv1.EndpointSlice
	nsl, _ := strconv.Atoi(c.pick(p("slices"), tabCount3))
	for k := range nsl {
		out = append(out, genSlice(c, svc, i, k))
	}
	return svc, out
}

func genSlice(c gen, svc *v1.Service, i, k int) *discoveryv1.EndpointSlice {
	p := func(f string) string { return fmt.Sprintf("s%d.e%d.%s", i, k, f) }
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-%d", svc.Name, k), Namespace: svc.Namespace,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name},
	}}
	at := c.pick(p("type"), tabAddrType)
	if at == "$fam" {
		// The first slice is of the Service's first family, the second of its last.
		fam := svc.Spec.ClusterIPs[0]
		if k > 0 {
			fam = svc.Spec.ClusterIPs[len(svc.Spec.ClusterIPs)-1]
		}
		at = string(discoveryv1.AddressTypeIPv4)
		if strings.Contains(fam, ":") {
			at = string(discoveryv1.AddressTypeIPv6)
		}
	}
	sl.AddressType = discoveryv1.AddressType(at)
	for j, sp := range svc.Spec.Ports {
		name, proto := sp.Name, sp.Protocol
		ep := discoveryv1.EndpointPort{Name: &name, Protocol: &proto}
		if v := c.pick(p(fmt.Sprintf("p%d", j)), tabEPPort); v != "nil" {
			n := atoi32(v)
			ep.Port = &n
		}
		sl.Ports = append(sl.Ports, ep)
	}
	v4 := sl.AddressType == discoveryv1.AddressTypeIPv4
	neps, _ := strconv.Atoi(c.pick(p("eps"), tabEndpoints))
	for m := range neps {
		pe := func(f string) string { return p(fmt.Sprintf("a%d.%s", m, f)) }
		good4, good6 := fmt.Sprintf("10.244.%d.%d", i+1, 10*k+m+1), fmt.Sprintf("fd00:10:244:%x::%x", i+1, 0x10*k+m+1)
		var addr string
		switch a := c.pickElem(pe("addr"), tabEPAddr); a {
		case "$ep", "$other":
			addr = good4
			if v4 != (a == "$ep") {
				addr = good6
			}
		case "$nodeaddr":
			addr = fuzzNodeIP4
			if !v4 {
				addr = fuzzNodeIP6
			}
		default:
			addr = a
		}
		e := discoveryv1.Endpoint{Addresses: []string{addr}}
		e.Conditions.Ready = boolPtr(c.pick(pe("ready"), tabCond))
		e.Conditions.Serving = boolPtr(c.pick(pe("serving"), tabCond))
		e.Conditions.Terminating = boolPtr(c.pick(pe("terminating"), tabCond))
		if n := c.pick(pe("node"), tabEPNode); n != "nil" {
			e.NodeName = &n
		}
		if z := c.pick(pe("zone"), tabZone); z != "" {
			e.Zone = &z
		}
		switch h := c.pick(pe("hints"), tabHints); h {
		case "nil":
		case "empty":
			e.Hints = &discoveryv1.EndpointHints{}
		default:
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: h}}}
		}
		sl.Endpoints = append(sl.Endpoints, e)
	}
	return sl
}

// resolveAddr replaces the placeholders of an address table.
func resolveAddr(v, good4, good6 string) string {
	switch v {
	case "$good", "$ext4", "$lb4":
		return good4
	case "$ext6", "$lb6":
		return good6
	case "$node", "$node4":
		if strings.Contains(good4, ":") {
			return fuzzNodeIP6
		}
		return fuzzNodeIP4
	case "$node6":
		return fuzzNodeIP6
	// Hostile claims (issue 23): another Service's cluster IP as an external or ingress
	// IP: s0's (claimed by a Service that sorts after it) or s1's (claimed by s0, which
	// sorts first), of the ordinary cluster IPs genService gives them.
	case "$claim4":
		return "10.96.0.10"
	case "$claim6":
		return "fd00:96::a0"
	case "$claim4b":
		return "10.96.0.11"
	case "$claim6b":
		return "fd00:96::a1"
	// Hostile claims of addresses that belong to others: a pod's (s0's first endpoint, in
	// the cluster CIDR), the node's gateway and a neighbour on its link, the apiserver's.
	case "$pod4":
		return "10.244.1.1"
	case "$pod6":
		return "fd00:10:244:1::1"
	case "$gw4":
		return fuzzGateway4
	case "$nbr6":
		return "2001:db8::99"
	case "$api4":
		return fuzzAPIServer4
	}
	return v
}

// fuzzHugeCount is how many ports or source ranges a hostile Service has: beyond the fuzz
// daemon's per-Service member limit (fuzzMaxServiceSetMembers) with one VIP, while no
// generated Service that is not hostile comes near it (at most ~60 members per family).
const (
	fuzzHugeCount            = 120
	fuzzMaxServiceSetMembers = 100
	fuzzSetMaxElem           = 64
)

// fuzzHugeExts is how many external IPs a hostile Service of real-server products has, with
// fewer set members than the per-Service member limit: with two ports beyond the fuzz
// daemon's per-Service virtual server limit, with one port and five or more endpoints beyond
// its real server limit. A Service that is not hostile has at most 12 virtual servers and
// 72 real servers per family (2 ports on 6 addresses, 6 endpoints).
const (
	fuzzHugeExts                 = 24
	fuzzMaxServiceVirtualServers = 30
	fuzzMaxServiceRealServers    = 100
)

// hostileSize reports whether s is one of the generator's hostile sizes, which kipvs may
// refuse whole for the size alone (the oracle calls it malformed).
func hostileSize(s *v1.Service) bool {
	return len(s.Spec.Ports) >= fuzzHugeCount || len(s.Spec.LoadBalancerSourceRanges) >= fuzzHugeCount ||
		len(s.Spec.ExternalIPs) >= fuzzHugeExts
}

// The node's gateway, its links' prefixes (Deps.NodeLinks: the gateway as a single
// address too) and the apiserver's address (Deps.APIServerAddrs) in every fuzz daemon.
const (
	fuzzGateway4   = "192.168.1.1"
	fuzzAPIServer4 = "192.0.2.100"
)

var fuzzNodeLinks = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("2001:db8::/64"),
	netip.MustParsePrefix(fuzzGateway4 + "/32")}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func atoi32(s string) int32 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic("fuzz table value " + s)
	}
	return int32(n)
}

func boolPtr(s string) *bool {
	switch s {
	case "true":
		b := true
		return &b
	case "false":
		b := false
		return &b
	}
	return nil
}
