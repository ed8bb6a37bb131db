//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/harness"
)

// loopInterval paces the request loops (one request per interval at most per loop).
const loopInterval = 100 * time.Millisecond

// activeBackends returns a WaitSynced condition: virtual server vs exists and its real
// servers with a weight above 0 are exactly pods (draining ones at weight 0 may remain).
func activeBackends(vsName string, pods ...*harness.Pod) func() (bool, string) {
	return func() (bool, string) {
		tab, err := harness.ReadIPVS()
		if err != nil {
			return false, err.Error()
		}
		dests, ok := tab[vsName]
		if !ok {
			return false, "no virtual server " + vsName
		}
		var active []string
		for rs, w := range dests {
			if w > 0 {
				active = append(active, rs)
			}
		}
		slices.Sort(active)
		var want []string
		for _, p := range pods {
			want = append(want, p.Endpoint().String())
		}
		slices.Sort(want)
		if !slices.Equal(active, want) {
			return false, fmt.Sprintf("%s: active real servers %v (all %v), want %v", vsName, active, dests, want)
		}
		return true, ""
	}
}

func all(conds ...func() (bool, string)) func() (bool, string) {
	return func() (bool, string) {
		for _, c := range conds {
			if ok, why := c(); !ok {
				return false, why
			}
		}
		return true, ""
	}
}

// Scenario 5: scale a Service 3 -> 1 -> 3 endpoints (EndpointSlice updates) while clients
// keep making new TCP connections and new UDP flows. Once a change is programmed, every new
// request succeeds, even though the removed pods' backends are stopped right after the
// scale-down is programmed (as their pods end), and after the scale-up every backend
// answers again.
func TestScaleUnderLoad(t *testing.T) {
	s := newScenario(t)
	pods := s.pods("sc", 10, 3)
	vip := netip.MustParseAddr("10.96.5.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "s5-scale", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, pods...)
	tcpVS, udpVS := vs(harness.TCP, vip, 80), vs(harness.UDP, vip, 80)
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "s5 programmed", all(activeBackends(tcpVS, pods...), activeBackends(udpVS, pods...)))

	loops := []*harness.Loop{
		harness.StartLoop(t, "node->tcp", s.topo.NodeClient(), harness.TCP, ap(vip, 80), loopInterval),
		harness.StartLoop(t, "node->udp", s.topo.NodeClient(), harness.UDP, ap(vip, 80), loopInterval),
	}
	const perPhase = 30 // requests per loop after each change is programmed
	for _, l := range loops {
		l.WaitSince(t, time.Time{}, 10, programLimit)
	}

	// A phase runs from when its change was seen programmed to the next change (the API
	// update), so nothing in it depends on how fast the next change is programmed.
	type phase struct {
		name     string
		from, to time.Time
		want     []*harness.Pod
	}
	var phases []phase

	// 3 -> 1.
	changed := time.Now()
	s.api.SetEndpoints(t, svc, pods[0])
	d := k.WaitSynced(t, programLimit, "scale down programmed", all(activeBackends(tcpVS, pods[0]), activeBackends(udpVS, pods[0])))
	down := time.Now()
	t.Logf("scale 3 -> 1 programmed %.2fs after the EndpointSlice update (seen after %.2fs of polling)", down.Sub(changed).Seconds(), d.Seconds())
	pods[1].StopEcho() // the removed pods end
	pods[2].StopEcho()
	for _, l := range loops {
		l.WaitSince(t, down, perPhase, programLimit)
	}

	// 1 -> 3: the pods come back first, then the endpoints.
	pods[1].StartEcho(t)
	pods[2].StartEcho(t)
	changed = time.Now()
	phases = append(phases, phase{"after scale down", down, changed, pods[:1]})
	s.api.SetEndpoints(t, svc, pods...)
	k.WaitSynced(t, programLimit, "scale up programmed", all(activeBackends(tcpVS, pods...), activeBackends(udpVS, pods...)))
	up := time.Now()
	t.Logf("scale 1 -> 3 programmed %.2fs after the EndpointSlice update", up.Sub(changed).Seconds())
	for _, l := range loops {
		l.WaitSince(t, up, perPhase, programLimit)
		l.Stop()
	}
	phases = append(phases, phase{"after scale up", up, time.Now(), pods})

	for _, l := range loops {
		rs := l.Results()
		t.Logf("%s: overall %s", l.Name, harness.Summarize(rs))
		for _, ph := range phases {
			var in []harness.Result
			for _, r := range rs {
				if !r.Start.Before(ph.from) && r.Start.Before(ph.to) {
					in = append(in, r)
				}
			}
			sum := harness.Summarize(in)
			t.Logf("%s %s: %s", l.Name, ph.name, sum)
			if sum.Failed > 0 {
				t.Errorf("%s %s: %d of %d new requests failed after the change was programmed: %v", l.Name, ph.name, sum.Failed, sum.Total, sum.FirstErrors)
			}
			var got []string
			for b := range sum.Backends {
				got = append(got, b)
			}
			slices.Sort(got)
			if !slices.Equal(got, names(ph.want...)) {
				t.Errorf("%s %s: answered by %v, want exactly %v", l.Name, ph.name, sum.Backends, names(ph.want...))
			}
		}
	}
}
