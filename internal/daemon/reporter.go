package daemon

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/watch"
)

// endpointNodes is the set of node names that appear in endpoints[].nodeName across the
// proxied EndpointSlices. Every node watches the same EndpointSlices, so every node holds
// the same set (once the watches have caught up) without watching Nodes or talking to each
// other: it elects, per Service, the one node that sends the Warning Events of the
// Service's Service-wide Problems (reporter). It is kept up to date with every sync's
// changed records, under the daemon lock.
type endpointNodes struct {
	// services holds each Service's node names, sorted and unique (none: no entry).
	services map[types.NamespacedName][]string
	// count is how many Services each node name appears in.
	count map[string]int
}

func newEndpointNodes() *endpointNodes {
	return &endpointNodes{services: map[types.NamespacedName][]string{}, count: map[string]int{}}
}

// reset replaces the set with the node names of every record (a full sync).
func (e *endpointNodes) reset(records map[types.NamespacedName]*watch.ServiceInfo) {
	clear(e.services)
	clear(e.count)
	for name, info := range records {
		e.update(name, info)
	}
}

// update replaces one Service's node names with those of its current record (nil: gone).
func (e *endpointNodes) update(name types.NamespacedName, info *watch.ServiceInfo) {
	nodes := recordNodes(info)
	old := e.services[name]
	if slices.Equal(old, nodes) {
		return
	}
	for _, n := range old {
		if e.count[n]--; e.count[n] <= 0 {
			delete(e.count, n)
		}
	}
	for _, n := range nodes {
		e.count[n]++
	}
	if len(nodes) == 0 {
		delete(e.services, name)
	} else {
		e.services[name] = nodes
	}
}

// recordNodes returns the node names of a record's endpoints, sorted and unique.
func recordNodes(info *watch.ServiceInfo) []string {
	if info == nil {
		return nil
	}
	var nodes []string
	for _, s := range info.Slices {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && *ep.NodeName != "" && !slices.Contains(nodes, *ep.NodeName) {
				nodes = append(nodes, *ep.NodeName)
			}
		}
	}
	slices.Sort(nodes)
	return slices.Clip(nodes)
}

// reporter reports whether node self sends the Events of svc's Service-wide Problems: the
// node of the set with the highest rendezvous hash of (svc, node name). Every node
// computes the same answer from the same set, so one node in the cluster sends them, and
// which one varies by Service (the Events' load spreads over the nodes). An empty set
// (no endpoint names its node: a small or a new cluster), or none kept, elects every node. Cost: the
// nodes that lose usually learn it within a few comparisons (each other node beats this
// one with even odds); the winner compares with every node, once per new Problem.
func (e *endpointNodes) reporter(svc types.NamespacedName, self string) bool {
	if e == nil || len(e.count) == 0 {
		return true
	}
	if e.count[self] == 0 {
		return false
	}
	mine := rendezvous(svc, self)
	for n := range e.count {
		if n == self {
			continue
		}
		if h := rendezvous(svc, n); h > mine || (h == mine && n > self) {
			return false
		}
	}
	return true
}

// rendezvous hashes a Service and a node name: FNV-1a over both, then a 64-bit finaliser
// (FNV alone spreads inputs that differ in their last bytes poorly). It must be the same
// function on every node and in every version that may run beside another: a seeded hash
// (hash/maphash) would elect a different node on each.
func rendezvous(svc types.NamespacedName, node string) uint64 {
	h := fnv.New64a()
	var n [8]byte
	for _, s := range []string{svc.Namespace, svc.Name, node} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// sendsEvent reports whether this node sends p as a Warning Event: a node-specific Problem
// always (only this node knows it), a Service-wide one only on the Service's elected
// reporter. With a source file every node reports: the files of different nodes need not
// agree. The log line is written on every node either way.
func (d *Daemon) sendsEvent(p proxy.Problem) bool {
	if proxy.NodeSpecific(p) || d.cfg.Kipvs.SourceFile != "" {
		return true
	}
	return d.endpointNodes.reporter(p.Service, d.nodeName)
}
