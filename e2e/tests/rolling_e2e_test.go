//go:build e2e

package tests

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// rollGrace is --kipvs-graceful-period in the rolling scenario.
const rollGrace = 5 * time.Second

// Issue 4 (seed-004), rolling replacement of all three backends under continuous TCP and
// UDP load from a pod. For each old pod in turn: a new pod comes up ready and the old one
// turns terminating but serving; once kipvs has programmed that, the old pod's TCP real
// server is draining at weight 0 (and gone when idle or after --kipvs-graceful-period) and
// its UDP real server is gone at once together with its conntrack flows; then the old pod
// leaves the slice and its process ends. No new connection or flow started after a change
// was programmed fails, and the last requests are answered by the new pods only.
func TestRollingReplacement(t *testing.T) {
	s := newScenario(t)
	old := s.pods("ro", 10, 3)
	client := s.topo.AddPod(t, "roc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.14.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-rolling", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, old...)
	k := s.startKipvs("--kipvs-graceful-period", rollGrace.String())
	tcpVS, udpVS := vs(harness.TCP, vip, 80), vs(harness.UDP, vip, 80)
	k.WaitSynced(t, programLimit, "rolling: old pods programmed", harness.IPVSHas(map[string]map[string]int{
		tcpVS: harness.Weights(1, old...), udpVS: harness.Weights(1, old...),
	}))

	c := harness.In(&client.NS)
	const interval = 50 * time.Millisecond
	loops := []*harness.Loop{
		harness.StartLoop(t, "pod->tcp ClusterIP", c, harness.TCP, ap(vip, 80), interval),
		harness.StartLoop(t, "pod->udp ClusterIP", c, harness.UDP, ap(vip, 80), interval),
	}
	for _, l := range loops {
		l.WaitSince(t, time.Time{}, 6, programLimit)
	}

	var fresh []*harness.Pod
	current := append([]*harness.Pod(nil), old...) // ready endpoints, in slice order
	type window struct {
		what       string
		from, till time.Time
	}
	var windows []window
	for i, o := range old {
		n := s.topo.AddPod(t, fmt.Sprintf("rn%d", i+1), netip.AddrFrom4([4]byte{10, 244, 0, byte(31 + i)}), harness.PodOptions{})
		fresh = append(fresh, n)
		current[i] = n

		// UDP flows to the old pod exist now (conntrack keeps them for 30 s).
		flowsBefore := udpFlows(t, vip, o.IP)

		// Step 1: the new pod is ready, the old one terminating but still serving.
		var eps []harness.Endpoint
		for _, p := range current {
			eps = append(eps, harness.ReadyEP(p))
		}
		eps = append(eps, harness.TerminatingEP(o))
		changed := time.Now()
		s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, eps...)
		wantTCP := harness.Weights(1, current...)
		wantTCP[o.Endpoint().String()] = 0
		d := k.WaitSynced(t, programLimit, fmt.Sprintf("%s terminating, %s ready", o.PodName, n.PodName), harness.IPVSHas(map[string]map[string]int{
			tcpVS: wantTCP, udpVS: harness.Weights(1, current...),
		}))
		programmed := time.Now()
		if len(windows) > 0 {
			windows[len(windows)-1].till = changed
		}
		windows = append(windows, window{what: o.PodName + " terminating", from: programmed})
		t.Logf("%s terminating: programmed %.1fs after the update; TCP real server at weight 0, UDP real server removed", o.PodName, d.Seconds())
		// As ipvsadm shows it (the drain lasts at least the graceful period).
		drainLine := "-a -t " + ap(vip, 80).String() + " -r " + o.Endpoint().String() + " -m -w 0"
		if save := harness.DumpIPVS(t); !strings.Contains(save, drainLine+"\n") {
			t.Errorf("ipvsadm -Sn right after programming lacks %q:\n%s", drainLine, save)
		}

		// The UDP flows to the old pod are deleted.
		dflows := poll.Until(t, programLimit, "conntrack flows to "+o.PodName+" deleted", func() (bool, string) {
			f := udpFlows(t, vip, o.IP)
			return len(f) == 0, strings.Join(f, "\n")
		})
		t.Logf("%s: %d UDP conntrack flows before, none %.1fs after programming", o.PodName, len(flowsBefore), dflows.Seconds())
		if len(flowsBefore) == 0 {
			t.Errorf("no UDP conntrack flow to %s before it terminated: the loop did not reach it, the check proves nothing", o.PodName)
		}

		// The TCP drain ends when the real server is idle or after the graceful period
		// (checked every 5 s).
		dd := poll.Until(t, rollGrace+5*time.Second+programLimit, "TCP drain of "+o.PodName+" ends", func() (bool, string) {
			tab, err := harness.ReadIPVS()
			if err != nil {
				return false, err.Error()
			}
			if w, ok := tab[tcpVS][o.Endpoint().String()]; ok {
				return false, fmt.Sprintf("%s still has %s at weight %d", tcpVS, o.Endpoint(), w)
			}
			return true, ""
		})
		t.Logf("%s: drained TCP real server removed %.1fs after programming (graceful period %s)", o.PodName, dd.Seconds(), rollGrace)
		if f := udpFlows(t, vip, o.IP); len(f) > 0 {
			t.Errorf("new UDP conntrack flows to %s after its removal:\n%s", o.PodName, strings.Join(f, "\n"))
		}

		// Step 2: the old pod is gone.
		changed = time.Now()
		s.api.SetSlice(t, svc, "", discoveryv1.AddressTypeIPv4, eps[:len(eps)-1]...)
		o.StopEcho()
		k.WaitSynced(t, programLimit, o.PodName+" removed", harness.IPVSHas(map[string]map[string]int{
			tcpVS: harness.Weights(1, current...), udpVS: harness.Weights(1, current...),
		}))
		windows[len(windows)-1].till = changed
		windows = append(windows, window{what: o.PodName + " removed", from: time.Now()})
	}
	end := time.Now()
	for _, l := range loops {
		l.WaitSince(t, end, 12, programLimit)
		l.Stop()
	}
	windows[len(windows)-1].till = time.Now()

	if t.Failed() || harness.Summarize(loops[0].Results()).Failed+harness.Summarize(loops[1].Results()).Failed > 0 {
		rollingDiag(t, loops)
	}
	for _, l := range loops {
		all := l.Results()
		t.Logf("%s, whole run: %s", l.Name, harness.Summarize(all))
		for _, w := range windows {
			var rs []harness.Result
			for _, r := range all {
				if !r.Start.Before(w.from) && r.Start.Before(w.till) {
					rs = append(rs, r)
				}
			}
			sum := harness.Summarize(rs)
			if sum.Failed > 0 {
				t.Errorf("%s, after %q was programmed: %s", l.Name, w.what, sum)
			}
		}
		last := harness.Summarize(l.Since(end))
		if last.Failed > 0 || len(last.Backends) == 0 {
			t.Errorf("%s after the rollout: %s", l.Name, last)
		}
		for b := range last.Backends {
			if !strings.HasPrefix(b, "rn") {
				t.Errorf("%s after the rollout: answered by %s, an old pod (%s)", l.Name, b, last)
			}
		}
	}
}

// udpFlows lists the conntrack entries of UDP flows to vip:80 answered by pod.
func udpFlows(t *testing.T, vip, pod netip.Addr) []string {
	t.Helper()
	out := harness.MustRun(t, "conntrack", "-L", "-p", "udp", "--orig-dst", vip.String(), "--orig-port-dst", "80", "--reply-src", pod.String())
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// rollingDiag logs what the kernel knows about failed requests: the IPVS connection
// entries and conntrack flows of the failed UDP requests' source ports, and a count of
// the IPVS connection states.
func rollingDiag(t *testing.T, loops []*harness.Loop) {
	t.Helper()
	conns, _ := harness.Run("ipvsadm", "-Lnc")
	ct, _ := harness.Run("conntrack", "-L")
	states := map[string]int{}
	for _, l := range strings.Split(conns, "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			states[f[0]+" "+f[2]]++
		}
	}
	t.Logf("diag: IPVS connection entries by protocol and state: %v", states)
	for _, l := range loops {
		for _, r := range l.Results() {
			if r.Err == nil {
				continue
			}
			msg := r.Err.Error()
			i := strings.Index(msg, "10.244.0.20:")
			if i < 0 {
				t.Logf("diag: %s %s %s", l.Name, r.Start.Format("15:04:05.000"), msg)
				continue
			}
			port := strings.TrimRight(strings.SplitN(msg[i+len("10.244.0.20:"):], "-", 2)[0], " ")
			var hits []string
			for _, line := range append(strings.Split(conns, "\n"), strings.Split(ct, "\n")...) {
				if strings.Contains(line, "10.244.0.20:"+port+" ") || strings.Contains(line, "sport="+port+" ") {
					hits = append(hits, line)
				}
			}
			t.Logf("diag: %s %s port %s: %s\n%s", l.Name, r.Start.Format("15:04:05.000"), port, msg, strings.Join(hits, "\n"))
		}
	}
	t.Logf("diag: ipvsadm -Lnc:\n%s", conns)
}
