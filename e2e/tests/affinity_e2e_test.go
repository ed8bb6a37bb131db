//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, sessionAffinity ClientIP: 50 new connections (and 50 new UDP flows) from one
// client all reach one backend; the virtual servers are persistent with the Service's
// timeoutSeconds; changing timeoutSeconds updates them in place: the new persistence
// timeout is programmed, the connection counter of the TCP virtual server keeps counting
// (a recreated virtual server would start again at 0) and the client stays on its backend.
// Switching sessionAffinity to None and back is an in-place update too.
func TestSessionAffinityClientIP(t *testing.T) {
	s := newScenario(t)
	backends := s.pods("af", 10, 3)
	client := s.topo.AddPod(t, "afc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.11.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-affinity", ClusterIP: vip, Mutate: func(svc *v1.Service) {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	}})
	s.api.SetEndpoints(t, svc, backends...)
	k := s.startKipvs()
	tcpVS, udpVS := vs(harness.TCP, vip, 80), vs(harness.UDP, vip, 80)
	k.WaitSynced(t, programLimit, "affinity programmed", harness.IPVSHas(map[string]map[string]int{
		tcpVS: harness.Weights(1, backends...), udpVS: harness.Weights(1, backends...),
	}))
	for _, name := range []string{tcpVS, udpVS} {
		e := ipvsEntry(t, name)
		if e.Service.Flags&ipvs.FlagPersistent == 0 || e.Service.Timeout != 60 {
			t.Errorf("%s: flags %#x timeout %d, want persistent with timeout 60", name, e.Service.Flags, e.Service.Timeout)
		}
	}
	if out := harness.MustRun(t, "ipvsadm", "-Ln", "-t", ap(vip, 80).String()); !strings.Contains(out, "persistent 60") {
		t.Errorf("ipvsadm -Ln does not show persistent 60:\n%s", out)
	}

	c := harness.In(&client.NS)
	stick := map[harness.Proto]string{}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		stick[p] = expectOneBackend(t, fmt.Sprintf("%s, 50 requests before the update", p), c, p, ap(vip, 80), 50, "")
	}
	// The kernel's estimator folds the per-CPU counters into the ones netlink reports every
	// 2 s: poll.
	before := connsAtLeast(t, tcpVS, 50)

	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) {
		svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To[int32](120)
	})
	d := k.WaitSynced(t, programLimit, "timeoutSeconds 120 programmed", persistence(true, 120, tcpVS, udpVS))
	after := ipvsEntry(t, tcpVS)
	t.Logf("timeout 60 -> 120 programmed %.1fs after the update; %s connection counter %d -> %d",
		d.Seconds(), tcpVS, before.Service.Stats.Conns, after.Service.Stats.Conns)
	if after.Service.Stats.Conns < before.Service.Stats.Conns || after.Service.Stats.Conns < 50 {
		t.Errorf("%s: connection counter went from %d to %d: the virtual server was recreated, not updated in place",
			tcpVS, before.Service.Stats.Conns, after.Service.Stats.Conns)
	}
	if ok, why := harness.IPVSHas(map[string]map[string]int{tcpVS: harness.Weights(1, backends...), udpVS: harness.Weights(1, backends...)})(); !ok {
		t.Errorf("after the update: %s", why)
	}
	if out := harness.MustRun(t, "ipvsadm", "-Ln", "-t", ap(vip, 80).String()); !strings.Contains(out, "persistent 120") {
		t.Errorf("ipvsadm -Ln does not show persistent 120:\n%s", out)
	}
	// The persistence templates survived the update: the client keeps its backend.
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectOneBackend(t, fmt.Sprintf("%s, 10 requests after the update", p), c, p, ap(vip, 80), 10, stick[p])
	}
	before = connsAtLeast(t, tcpVS, before.Service.Stats.Conns+10)

	// Affinity off and on again, both in place: the virtual servers stop and start being
	// persistent (the default timeout 10800 s when it comes back) without being recreated.
	affinity := func(what string, persistent bool, timeout uint32) {
		t.Helper()
		k.WaitSynced(t, programLimit, what, persistence(persistent, timeout, tcpVS, udpVS))
		now := ipvsEntry(t, tcpVS)
		if now.Service.Stats.Conns < before.Service.Stats.Conns {
			t.Errorf("%s: connection counter went from %d to %d: the virtual server was recreated, not updated in place",
				what, before.Service.Stats.Conns, now.Service.Stats.Conns)
		}
		before = now
	}
	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) {
		svc.Spec.SessionAffinity = v1.ServiceAffinityNone
		svc.Spec.SessionAffinityConfig = nil
	})
	affinity("sessionAffinity None programmed", false, 0)
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectSpread(t, fmt.Sprintf("%s, affinity None", p), c, p, ap(vip, 80), 12, client.IP, backends...)
	}
	s.api.UpdateService(t, svc.Name, func(svc *v1.Service) { svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP })
	affinity("sessionAffinity ClientIP again (default timeout)", true, 10800)
	if out := harness.MustRun(t, "ipvsadm", "-Ln", "-t", ap(vip, 80).String()); !strings.Contains(out, "persistent 10800") {
		t.Errorf("ipvsadm -Ln does not show persistent 10800:\n%s", out)
	}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectOneBackend(t, fmt.Sprintf("%s, 10 requests with affinity back", p), c, p, ap(vip, 80), 10, "")
	}
}

// persistence checks that the named virtual servers are persistent with timeout (or, with
// persistent false, are not persistent).
func persistence(persistent bool, timeout uint32, names ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, name := range names {
			e, ok, err := harness.ReadIPVSEntry(name)
			switch {
			case err != nil:
				return false, err.Error()
			case !ok:
				return false, "no virtual server " + name
			case (e.Service.Flags&ipvs.FlagPersistent != 0) != persistent || (persistent && e.Service.Timeout != timeout):
				return false, fmt.Sprintf("%s: flags %#x timeout %d", name, e.Service.Flags, e.Service.Timeout)
			}
		}
		return true, ""
	}
}

// connsAtLeast waits until virtual server name has counted at least n connections and
// returns it.
func connsAtLeast(t *testing.T, name string, n uint64) ipvs.Entry {
	t.Helper()
	var e ipvs.Entry
	poll.Until(t, 10*time.Second, fmt.Sprintf("%s counts %d connections", name, n), func() (bool, string) {
		var ok bool
		var err error
		e, ok, err = harness.ReadIPVSEntry(name)
		switch {
		case err != nil:
			return false, err.Error()
		case !ok:
			return false, "no virtual server " + name
		}
		return e.Service.Stats.Conns >= n, fmt.Sprintf("%d connections", e.Service.Stats.Conns)
	})
	return e
}

// expectOneBackend sends n requests that must all succeed and all reach one backend (want,
// when not empty), and returns that backend.
func expectOneBackend(t *testing.T, what string, c harness.Client, p harness.Proto, addr netip.AddrPort, n int, want string) string {
	t.Helper()
	seen := map[string]int{}
	for range n {
		a, err := c.Do(p, addr)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		seen[a.Backend]++
	}
	if len(seen) != 1 {
		t.Errorf("%s: answers from %v, want every one from a single backend", what, seen)
		return ""
	}
	var got string
	for b := range seen {
		got = b
	}
	if want != "" && got != want {
		t.Errorf("%s: all answered by %s, want %s (the client's backend before)", what, got, want)
	}
	t.Logf("%s: all %d answered by %s", what, n, got)
	return got
}

// ipvsEntry reads one virtual server, failing the test when it is missing.
func ipvsEntry(t *testing.T, name string) ipvs.Entry {
	t.Helper()
	e, ok, err := harness.ReadIPVSEntry(name)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("no virtual server %s", name)
	}
	return e
}
