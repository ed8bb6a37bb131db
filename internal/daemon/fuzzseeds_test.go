package daemon

import (
	"maps"
)

// fuzzSeed is one named seed of FuzzSync: a script of picks (field -> table value, see
// genScenario; unnamed fields take the ordinary value). Each is added with f.Add and kept
// as testdata/fuzz/FuzzSync/<name> (TestFuzzSyncCorpus writes them with -update).
type fuzzSeed struct {
	name   string
	script map[string]string
}

// companion is a well-formed Service s1 beside the seed's s0: a dual-stack LoadBalancer
// with TCP and UDP ports, an external IP, an ingress IP per family, source ranges per
// family, externalTrafficPolicy Local with its health check node port, client IP affinity,
// and an EndpointSlice per family. Every seed checks that s0's defect leaves it whole.
var companion = map[string]string{
	"n": "2", "s1.type": "LoadBalancer", "s1.fam": "v4v6", "s1.ports": "2", "s1.p1.port": "53", "s1.p1.protocol": "UDP",
	"s1.exts": "1", "s1.ingresses": "2", "s1.ing1": "$lb6", "s1.srcs": "2", "s1.src1": "2001:db8::/32",
	"s1.etp": "Local", "s1.affinity": "ClientIP", "s1.slices": "2",
}

func seed(name string, kv ...string) fuzzSeed {
	s := maps.Clone(companion)
	for i := 0; i+1 < len(kv); i += 2 {
		s[kv[i]] = kv[i+1]
	}
	return fuzzSeed{name: name, script: s}
}

// lb makes s0 a LoadBalancer with one ingress IP of its first family.
var lb = []string{"s0.type", "LoadBalancer", "s0.ingresses", "1"}

func with(base []string, kv ...string) []string { return append(append([]string{}, base...), kv...) }

var fuzzSeeds = []fuzzSeed{
	// Hostile claims (issue 23): another Service's cluster IP and port as an external IP
	// and as an ingress IP, by a Service that sorts after the owner (s1 on s0's) and by
	// one that sorts first (s0 on s1's), in both families. The owner keeps its virtual
	// servers (checkOwnership).
	seed("hostile-claims-on-first-clusterip", "s1.shape", "partial", "s1.ext0", "$claim4", "s1.ing0", "$claim4", "s1.ing1", "$claim6",
		"s0.fam", "v4v6"),
	seed("hostile-claims-by-first-service", with(lb, "s0.shape", "partial", "s0.exts", "2", "s0.ext0", "$claim4b", "s0.ext1", "$claim6b",
		"s0.ing0", "$claim4b", "s0.fam", "v4v6", "s0.srcs", "1")...),
	// Hostile claims of addresses that belong to others: a pod's (another Service's
	// endpoint, in the cluster CIDR), the node's gateway, a neighbour on its link and the
	// apiserver's, as external and ingress IPs (checkClaimsAndLimits).
	seed("hostile-claims-pod-and-gateway", with(lb, "s0.shape", "partial", "s0.exts", "2", "s0.ext0", "$pod4", "s0.ext1", "$gw4",
		"s0.ing0", "$pod6", "s0.fam", "v4v6")...),
	seed("hostile-claims-neighbour-and-apiserver", with(lb, "s0.shape", "partial", "s0.exts", "2", "s0.ext0", "$nbr6", "s0.ext1", "$api4",
		"s0.ing0", "$api4", "s0.fam", "v4v6")...),
	// A real-server product: many external IPs times ports times endpoints, few set members.
	seed("hostile-real-server-product", "s0.exts", "huge", "s0.ports", "1", "s0.slices", "2", "s0.e0.eps", "3", "s0.e1.eps", "3"),
	seed("hostile-virtual-server-product", "s0.exts", "huge", "s0.ports", "2"),
	// Well-formed baselines.
	seed("wellformed-clusterip-and-lb"),
	seed("wellformed-dualstack-v6-first", "s0.fam", "v6v4", "s0.slices", "2", "s0.affinity", "ClientIP", "s0.timeout", "86400",
		"s0.sched", "mh", "s0.flags", "mh-port,mh-fallback", "s0.itp", "Local", "s0.topology", "PreferClose", "node.zone", "zone-a",
		"s0.e0.a0.hints", "zone-a", "s0.e0.a1.hints", "zone-b", "s0.e0.a1.node", "node-b"),
	seed("wellformed-nodecidr-terminating", "mode", "NodeCIDR", "s0.type", "NodePort", "s0.etp", "Local",
		"s0.e0.a0.ready", "false", "s0.e0.a0.serving", "true", "s0.e0.a0.terminating", "true", "s0.e0.a1.node", "node-b"),

	// SCTP NodePort and LoadBalancer.
	seed("sctp-nodeport", "s0.type", "NodePort", "s0.p0.protocol", "SCTP"),
	seed("sctp-loadbalancer", with(lb, "s0.p0.protocol", "SCTP", "s0.etp", "Local")...),

	// Source ranges: single hosts, and allow-all next to the companion's normal ranges.
	seed("lb-source-range-32", with(lb, "s0.srcs", "1", "s0.src0", "203.0.113.7/32")...),
	seed("lb-source-range-128", with(lb, "s0.fam", "v6", "s0.ing0", "$lb6", "s0.srcs", "1", "s0.src0", "2001:db8::10/128")...),
	seed("lb-source-range-all-v4", with(lb, "s0.srcs", "1", "s0.src0", "0.0.0.0/0")...),
	seed("lb-source-range-all-v6", with(lb, "s0.fam", "v6", "s0.ing0", "$lb6", "s0.srcs", "1", "s0.src0", "::/0")...),

	// Hostile sizes: more set members than the per-Service limit, beside the companion.
	seed("lb-source-ranges-huge", with(lb, "s0.srcs", "huge")...),
	seed("ports-huge", "s0.ports", "huge"),

	// Virtual IPs the kernel must not get.
	seed("external-ip-multicast", "s0.exts", "1", "s0.ext0", "239.1.1.1"),
	seed("lb-ingress-unspecified", with(lb, "s0.ing0", "0.0.0.0")...),
	seed("lb-ingress-multicast-v4", with(lb, "s0.ing0", "239.1.1.1")...),
	seed("lb-ingress-multicast-v6", with(lb, "s0.fam", "v6", "s0.ing0", "ff05::1")...),
	seed("lb-ingress-metadata-link-local", with(lb, "s0.ing0", "169.254.169.254")...),
	seed("lb-ingress-link-local-v6", with(lb, "s0.fam", "v6", "s0.ing0", "fe80::1")...),
	seed("clusterip-is-node-ip", "s0.ip4", "$node"),
	seed("clusterip-is-node-ip-v6", "s0.fam", "v6", "s0.ip6", "$node"),
	seed("clusterip-loopback", "s0.ip4", "127.0.0.1"),
	seed("clusterip-loopback-v6", "s0.fam", "v6", "s0.ip6", "::1"),
	seed("clusterip-broadcast", "s0.ip4", "255.255.255.255"),

	// IPv6 zones.
	seed("clusterip-v6-zone", "s0.fam", "v6", "s0.ip6", "fe80::1%eth0"),
	seed("external-ip-v6-zone", "s0.exts", "1", "s0.ext0", "fe80::1%eth0"),
	seed("lb-ingress-v6-zone", with(lb, "s0.ing0", "fe80::1%eth0")...),
	seed("endpoint-v6-zone", "s0.fam", "v6", "s0.e0.a0.addr", "fe80::1%eth0"),

	// Endpoints.
	seed("endpoint-broadcast", "s0.e0.a0.addr", "255.255.255.255"),
	seed("endpoint-multicast", "s0.e0.a0.addr", "224.0.0.1"),
	seed("endpoint-unspecified-v6", "s0.fam", "v6", "s0.e0.a0.addr", "::"),
	seed("endpoint-link-local-v6", "s0.fam", "v6", "s0.e0.a0.addr", "fe80::1"),
	seed("endpoint-loopback", "s0.e0.a0.addr", "127.0.0.1"),
	seed("endpoint-link-local-v4", "s0.e0.a0.addr", "169.254.1.1"),
	seed("endpoint-port-65616", "s0.e0.p0", "65616"),

	// Ports out of range.
	seed("port-65616", "s0.p0.port", "65616"),
	seed("port-65616-beside-80", "s0.ports", "2", "s0.p0.port", "65616", "s0.p1.port", "80", "s0.e0.p0", "9090"),
	seed("port-minus-1", "s0.p0.port", "-1"),
	seed("port-0", "s0.p0.port", "0"),
	seed("port-65536", "s0.p0.port", "65536"),
	seed("nodeport-65536", "s0.type", "NodePort", "s0.p0.nodePort", "65536"),
	seed("nodeport-minus-1", "s0.type", "NodePort", "s0.p0.nodePort", "-1"),

	// Session affinity.
	seed("affinity-timeout-minus-1", "s0.affinity", "ClientIP", "s0.timeout", "-1"),
	seed("affinity-timeout-0", "s0.affinity", "ClientIP", "s0.timeout", "0"),
	seed("affinity-timeout-86401", "s0.affinity", "ClientIP", "s0.timeout", "86401"),
}
