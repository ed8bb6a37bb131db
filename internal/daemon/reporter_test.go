package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/watch"
)

// reportingNode is one simulated node: a daemon of its own name and address over its own
// fake kernel and source, recording the Events it sends.
type reportingNode struct {
	name   string
	src    *memSource
	d      *Daemon
	events *recordedEvents
}

// reportingNodes starts one daemon per name, the i-th with the node address 192.168.1.1i.
func reportingNodes(t *testing.T, names ...string) []*reportingNode {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))
	var out []*reportingNode
	for i, name := range names {
		n := &reportingNode{name: name, src: newMemSource(name), events: &recordedEvents{}}
		deps := newFakeNode().deps(n.src, prometheus.NewRegistry())
		addr := netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})
		deps.HostAddrs = func() ([]netip.Addr, error) { return []netip.Addr{addr}, nil }
		deps.Clock, deps.Events = clk, n.events
		d, err := New(testConfig(t), name, zap.NewNop(), deps)
		if err != nil {
			t.Fatal(err)
		}
		n.d = d
		out = append(out, n)
	}
	return out
}

// set gives every node the same objects and syncs it (full the first time), then sends
// what its aggregator holds.
func syncAll(t *testing.T, nodes []*reportingNode, svcs []*v1.Service, eps []*discoveryv1.EndpointSlice, full bool) {
	t.Helper()
	for _, n := range nodes {
		n.src.Set(svcs, eps, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, false)
		if err := n.d.sync(context.Background(), full); err != nil {
			t.Fatalf("%s: sync: %v", n.name, err)
		}
		n.d.events.flush()
	}
}

// placedObjects are three good Services whose endpoints run on the given nodes (one each,
// round robin), and bad, a Service with a Service-wide Problem (a multicast external IP)
// and an external IP on each node's own address (node-specific on that node).
func placedObjects(nodes []string, bad string) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	var svcs []*v1.Service
	var eps []*discoveryv1.EndpointSlice
	for i, name := range []string{"web", "api", "db"} {
		svc, sl := stallService(name, fmt.Sprintf("10.96.0.%d", 10+i), fmt.Sprintf("10.244.%d.5", i))
		if len(nodes) > 0 {
			sl.Endpoints[0].NodeName = ptr.To(nodes[i%len(nodes)])
		}
		svcs, eps = append(svcs, svc), append(eps, sl)
	}
	svc, sl := stallService(bad, "10.96.0.40", "10.244.9.5")
	svc.Spec.ExternalIPs = []string{"239.1.1.1", "192.168.1.10", "192.168.1.11", "192.168.1.12"}
	return append(svcs, svc), append(eps, sl)
}

// senders returns the nodes that sent an Event with reason on Service svc.
func senders(nodes []*reportingNode, svc, reason string) []string {
	var out []string
	for _, n := range nodes {
		for _, e := range n.events.all() {
			if strings.HasPrefix(e, "default/"+svc+" "+reason+" ") {
				out = append(out, n.name)
			}
		}
	}
	return out
}

// A Service-wide Problem (every node computes the same one) is sent as a Warning Event by
// one node of the cluster, elected per Service from the node names of the proxied
// EndpointSlices; a node-specific one (an external IP on the node's own address) by every
// node that has it. A tenant churning bad Services costs one Event per Service, not one
// per node.
func TestServiceWideProblemsReportedByOneNode(t *testing.T) {
	names := []string{"node-a", "node-b", "node-c"}
	nodes := reportingNodes(t, names...)
	svcs, eps := placedObjects(names, "bad-0")
	syncAll(t, nodes, svcs, eps, true)
	if got := senders(nodes, "bad-0", "UnusableExternalIP"); len(got) != 1 {
		t.Errorf("UnusableExternalIP (Service-wide) sent by %v, want exactly one node", got)
	}
	if got := senders(nodes, "bad-0", "ExternalIPIsNodeAddress"); strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("ExternalIPIsNodeAddress (node-specific) sent by %v, want each of %v", got, names)
	}

	// Churn: a new bad Service every round (the old one deleted), incremental syncs.
	const rounds = 30
	electedBy := map[string]int{}
	for i := 1; i <= rounds; i++ {
		bad := fmt.Sprintf("bad-%d", i)
		svcs, eps := placedObjects(names, bad)
		syncAll(t, nodes, svcs, eps, false)
		got := senders(nodes, bad, "UnusableExternalIP")
		if len(got) != 1 {
			t.Fatalf("round %d: UnusableExternalIP on %s sent by %v, want exactly one node", i, bad, got)
		}
		electedBy[got[0]]++
	}
	total := 0
	for _, n := range nodes {
		for _, e := range n.events.all() {
			if strings.Contains(e, " UnusableExternalIP ") {
				total++
			}
		}
	}
	if total != rounds+1 {
		t.Errorf("%d Service-wide Events for %d bad Services over %d nodes, want one per Service", total, rounds+1, len(nodes))
	}
	if len(electedBy) < 2 {
		t.Errorf("one node sent every Service-wide Event (%v): the election should spread over the nodes", electedBy)
	}
}

// Without a node name in any EndpointSlice (no endpoints yet, or slices that do not say),
// no node can tell who reports: every node does.
func TestServiceWideProblemsWithoutEndpointNodes(t *testing.T) {
	names := []string{"node-a", "node-b"}
	nodes := reportingNodes(t, names...)
	svcs, eps := placedObjects(nil, "bad")
	syncAll(t, nodes, svcs, eps, true)
	if got := senders(nodes, "bad", "UnusableExternalIP"); len(got) != len(names) {
		t.Errorf("UnusableExternalIP sent by %v, want every node (none can tell who reports)", got)
	}
}

// The election agrees on every node whatever order each learnt the node names in, and
// moves off a node whose endpoints are all gone.
func TestEndpointNodesElection(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "s"}
	a, b := newEndpointNodes(), newEndpointNodes()
	rec := func(nodes ...string) *discoveryv1.EndpointSlice {
		sl := &discoveryv1.EndpointSlice{}
		for _, n := range nodes {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(n)})
		}
		return sl
	}
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	for i, n := range names {
		a.update(types.NamespacedName{Name: n}, infoOf(rec(n)))
		b.update(types.NamespacedName{Name: names[len(names)-1-i]}, infoOf(rec(names[len(names)-1-i])))
	}
	var winner string
	for _, n := range names {
		if a.reporter(svc, n) != b.reporter(svc, n) {
			t.Fatalf("the two views disagree on %s", n)
		}
		if a.reporter(svc, n) {
			if winner != "" {
				t.Fatalf("two reporters: %s and %s", winner, n)
			}
			winner = n
		}
	}
	if winner == "" {
		t.Fatal("no reporter")
	}
	a.update(types.NamespacedName{Name: winner}, nil)
	if a.reporter(svc, winner) {
		t.Errorf("%s still reports with no endpoint left", winner)
	}
	if a.reporter(svc, "not-a-node-with-endpoints") {
		t.Error("a node outside the set reports")
	}
}

func infoOf(slices ...*discoveryv1.EndpointSlice) *watch.ServiceInfo {
	return &watch.ServiceInfo{Service: &v1.Service{}, Slices: slices}
}
