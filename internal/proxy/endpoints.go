package proxy

import (
	"cmp"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// endpoint is one backend of one service port, flattened from the EndpointSlices.
type endpoint struct {
	addr        netip.Addr
	port        uint16
	ready       bool
	serving     bool
	terminating bool
	local       bool
	zoneHints   []string // empty when the endpoint carries no zone hints
	nodeHints   []string // empty when the endpoint carries no node hints
}

// endpointsFor collects the endpoints of one service port (matched by port name and
// protocol) from this family's checked slices, deduplicated by address and port (an
// endpoint can be in two slices briefly while the controller moves it); the first
// occurrence wins, with slices in name order. Endpoints checkSlices skipped are left out.
func endpointsFor(slicesIn []checkedSlice, portName string, proto v1.Protocol, nodeName string) []endpoint {
	n := 0
	for _, s := range slicesIn {
		n += len(s.Endpoints)
	}
	out := make([]endpoint, 0, n)
	for _, s := range slicesIn {
		var port int32 = -1
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			pp := v1.ProtocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if name == portName && pp == proto && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if !validPort(port) { // no such port (checkSlices dropped slices with bad ones)
			continue
		}
		for i, ep := range s.Endpoints {
			addr := s.addrs[i]
			if !addr.IsValid() {
				continue
			}
			e := endpoint{addr: addr, port: uint16(port)}
			// As kube-proxy reads them (pkg/proxy/endpointslicecache.go): a nil ready or
			// serving condition means true, a nil terminating one false.
			e.ready = ep.Conditions.Ready == nil || *ep.Conditions.Ready
			e.serving = ep.Conditions.Serving == nil || *ep.Conditions.Serving
			e.terminating = ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
			e.local = ep.NodeName != nil && nodeName != "" && *ep.NodeName == nodeName
			if ep.Hints != nil {
				for _, z := range ep.Hints.ForZones {
					e.zoneHints = append(e.zoneHints, z.Name)
				}
				for _, n := range ep.Hints.ForNodes {
					e.nodeHints = append(e.nodeHints, n.Name)
				}
			}
			out = append(out, e)
		}
	}
	// Sorted by address and port; of equal ones (the same endpoint in two slices) the first
	// in slice order is kept: the sort is stable.
	slices.SortStableFunc(out, compareEndpoint)
	return slices.CompactFunc(out, func(a, b endpoint) bool { return compareEndpoint(a, b) == 0 })
}

func compareEndpoint(a, b endpoint) int {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	return cmp.Compare(a.port, b.port)
}

// usable picks the endpoints traffic may go to: the ready ones; when none is ready, the ones
// still serving while terminating (KEP-1669), so connections drain instead of failing. As in
// kube-proxy, ready is the ready condition alone: the EndpointSlice controller keeps it true
// for a terminating pod of a Service with publishNotReadyAddresses, which is then still used.
func usable(eps []endpoint) []endpoint {
	if n := readyCount(eps); n > 0 {
		return filter(eps, n, func(e endpoint) bool { return e.ready })
	}
	return filter(eps, 0, func(e endpoint) bool { return e.serving && e.terminating })
}

// filter returns the endpoints keep accepts, in a new list with room for n.
func filter(eps []endpoint, n int, keep func(endpoint) bool) []endpoint {
	var out []endpoint
	if n > 0 {
		out = make([]endpoint, 0, n)
	}
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// readyCount counts the ready endpoints.
func readyCount(eps []endpoint) int {
	n := 0
	for _, e := range eps {
		if e.ready {
			n++
		}
	}
	return n
}

func localOnly(eps []endpoint) []endpoint {
	var out []endpoint
	for _, e := range eps {
		if e.local {
			out = append(out, e)
		}
	}
	return out
}

// topologyFilter is kube-proxy v1.34's topology-aware routing (pkg/proxy/topology.go),
// applied to the ready endpoints only (serving terminating ones, used when none is ready,
// are never filtered). Hints are written by the EndpointSlice controller only for Services
// that ask for them (trafficDistribution, the topology-mode annotation), so their presence
// is what decides, not the Service: when every ready endpoint has node hints and one names
// this node, those (PreferSameNode, on by default since 1.34); otherwise when every one has
// zone hints and one names this node's zone, those; otherwise all. Without nodeHints (the
// PreferSameTrafficDistribution gate off) node hints are not looked at.
func topologyFilter(eps []endpoint, nodeName, zone string, nodeHints bool) []endpoint {
	if readyCount(eps) == 0 {
		return eps
	}
	allNode, forNode, allZone, forZone := nodeHints, false, true, false
	for _, e := range eps {
		if len(e.nodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.nodeHints, nodeName) {
			forNode = true
		}
		if len(e.zoneHints) == 0 {
			allZone = false
		} else if zone != "" && slices.Contains(e.zoneHints, zone) {
			forZone = true
		}
	}
	var keep func(endpoint) bool
	switch {
	case allNode && forNode:
		keep = func(e endpoint) bool { return slices.Contains(e.nodeHints, nodeName) }
	case allZone && forZone:
		keep = func(e endpoint) bool { return slices.Contains(e.zoneHints, zone) }
	default:
		return eps
	}
	var out []endpoint
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// ZoneLabel is the node label naming its zone.
const ZoneLabel = "topology.kubernetes.io/zone"

func toDestinations(eps []endpoint) []Destination {
	out := make([]Destination, 0, len(eps))
	for _, e := range eps {
		out = append(out, Destination{Address: e.addr, Port: e.port, Weight: 1})
	}
	return out
}
