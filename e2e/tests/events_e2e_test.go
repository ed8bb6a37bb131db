//go:build e2e

package tests

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, per-Service scheduler: kipvs.io/scheduler sh with kipvs.io/scheduler-flags
// sh-port, and mh (which gets mh-port, as upstream), are programmed on the Services'
// virtual servers; an unknown name keeps the global scheduler (rr) and produces a Warning
// Event UnknownScheduler on that Service only. Every Service carries traffic.
func TestSchedulerAnnotation(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("sc", 10, 2)
	type svcCase struct {
		name        string
		vip         netip.Addr
		annotations map[string]string
		save        string // the -A line of ipvsadm -Sn for TCP port 80
	}
	cases := []svcCase{
		{"i4-sched-sh", netip.MustParseAddr("10.96.17.10"), map[string]string{"kipvs.io/scheduler": "sh", "kipvs.io/scheduler-flags": "sh-port"}, "-A -t 10.96.17.10:80 -s sh -b sh-port"},
		{"i4-sched-mh", netip.MustParseAddr("10.96.17.11"), map[string]string{"kipvs.io/scheduler": "mh"}, "-A -t 10.96.17.11:80 -s mh -b mh-port"},
		{"i4-sched-unknown", netip.MustParseAddr("10.96.17.12"), map[string]string{"kipvs.io/scheduler": "fastest"}, "-A -t 10.96.17.12:80 -s rr"},
	}
	want := map[string]map[string]int{}
	for _, c := range cases {
		ann := c.annotations
		svc := s.api.CreateService(t, harness.ServiceSpec{Name: c.name, ClusterIP: c.vip, Mutate: func(svc *v1.Service) { svc.Annotations = ann }})
		s.api.SetEndpoints(t, svc, backends...)
		want[vs(harness.TCP, c.vip, 80)] = harness.Weights(1, backends...)
		want[vs(harness.UDP, c.vip, 80)] = harness.Weights(1, backends...)
	}
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "scheduler Services programmed", harness.IPVSHas(want))

	save := strings.Split(harness.DumpIPVS(t), "\n")
	for _, c := range cases {
		if !slices.Contains(save, c.save) {
			t.Errorf("%s: ipvsadm -Sn has no line %q:\n%s", c.name, c.save, strings.Join(save, "\n"))
		}
		for range 4 {
			if _, err := s.topo.NodeClient().HTTP(ap(c.vip, 80)); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
	poll.Until(t, programLimit, "Warning Event UnknownScheduler on i4-sched-unknown", func() (bool, string) {
		evs := s.api.Events(t, "i4-sched-unknown", v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "UnknownScheduler" && strings.Contains(e.Note, "fastest") {
				t.Logf("i4-sched-unknown: %s %s", e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
	for _, c := range cases[:2] {
		if evs := s.api.Events(t, c.name, v1.EventTypeWarning); len(evs) > 0 {
			t.Errorf("%s: unexpected Warning Events:\n%s", c.name, harness.EventSummary(evs))
		}
	}
}

// Issue 4, an externalIP the apiserver admits but kipvs must not program: the node's own
// address. It produces a Warning Event ExternalIPIsNodeAddress and is skipped (no virtual
// server on it, not bound on kube-ipvs0), while the Service's ClusterIP and its other
// externalIP, on both ports, and another Service work.
func TestExternalIPIsNodeAddress(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("xn", 10, 2)
	vip := netip.MustParseAddr("10.96.19.10")
	otherVIP := netip.MustParseAddr("10.96.19.11")
	extIP := netip.MustParseAddr("203.0.113.70")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-extip-node", ClusterIP: vip, ExternalIPs: []netip.Addr{harness.NodeIP, extIP}})
	s.api.SetEndpoints(t, svc, backends...)
	other := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-extip-other", ClusterIP: otherVIP})
	s.api.SetEndpoints(t, other, backends...)
	want := map[string]map[string]int{}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		for _, ip := range []netip.Addr{vip, extIP, otherVIP} {
			want[vs(p, ip, 80)] = harness.Weights(1, backends...)
		}
	}
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "externalIP Services programmed", harness.IPVSHas(want))

	tab, err := harness.ReadIPVS()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tab.Names() {
		if strings.Contains(name, " "+harness.NodeIP.String()+":") {
			t.Errorf("virtual server %s on the node's address", name)
		}
	}
	if d := harness.DumpDummy(t); strings.Contains(d, harness.NodeIP.String()+"/") {
		t.Errorf("the node's address is bound on %s:\n%s", harness.DummyName, d)
	}
	poll.Until(t, programLimit, "Warning Event ExternalIPIsNodeAddress on i4-extip-node", func() (bool, string) {
		evs := s.api.Events(t, svc.Name, v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "ExternalIPIsNodeAddress" && strings.Contains(e.Note, harness.NodeIP.String()) {
				t.Logf("%s: %s %s", svc.Name, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
	if evs := s.api.Events(t, other.Name, v1.EventTypeWarning); len(evs) > 0 {
		t.Errorf("%s: unexpected Warning Events:\n%s", other.Name, harness.EventSummary(evs))
	}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		for _, ip := range []netip.Addr{vip, extIP, otherVIP} {
			expectSpread(t, "node -> "+string(p)+" "+ip.String(), s.topo.NodeClient(), p, ap(ip, 80), 4, harness.PodGateway.Addr(), backends...)
		}
	}
}
