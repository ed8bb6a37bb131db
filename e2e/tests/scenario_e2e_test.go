//go:build e2e

package tests

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Limits for waits under TCG, which is 10-50x slower than the host.
const (
	startLimit   = 90 * time.Second // kipvs start to its first completed sync
	programLimit = 30 * time.Second // an API change to the kernel
)

// fullSyncLimit is how long a change behind kipvs's back may stay unrepaired: one sync
// period until the next full sync starts, plus two full syncs (the one that may be running
// and had read the kernel before the change, and the one that repairs it; under TCG a full
// sync takes seconds, mostly starting iptables-save and iptables-restore), plus a second
// for the check itself. The durations are kipvs's own averages from /metrics.
func fullSyncLimit(t *testing.T, k *harness.Kipvs) (time.Duration, time.Duration) {
	t.Helper()
	m := k.Metrics(t)
	var full float64
	for _, fam := range []string{`ip_family="IPv4"`, `ip_family="IPv6"`} {
		if n := m.Get("kubeproxy_sync_full_proxy_rules_duration_seconds_count", fam); n > 0 {
			full += m.Get("kubeproxy_sync_full_proxy_rules_duration_seconds_sum", fam) / n
		}
	}
	d := time.Duration(full * float64(time.Second))
	return harness.SyncPeriod + 2*d + time.Second, d
}

// scenario is one end-to-end scenario's world: the API objects, the topology, and the
// guarantee that the node is clean before and after it.
type scenario struct {
	t    *testing.T
	env  harness.Env
	api  *harness.Cluster
	topo *harness.Topology
	// backend is the filter backend startKipvs and startChecked select (eachBackend); the
	// zero value selects none, so kipvs runs with its default.
	backend filterBackend
}

// newScenario checks that the node and the API are clean, creates the Node object and the
// pod bridge, and registers the clean-up, which runs after kipvs has been stopped: `kipvs
// cleanup`, a conntrack flush, a check that nothing kipvs owns is left, then the removal of
// the topology.
func newScenario(t *testing.T) *scenario {
	t.Helper()
	env := harness.LoadEnv(t)
	s := &scenario{t: t, env: env, api: harness.NewCluster(t, env)}
	left, err := harness.QuickLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Logf("kernel state left by an earlier scenario; running kipvs cleanup first:\n%s", strings.Join(left, "\n"))
		if out, err := harness.RunCleanup(env); err != nil {
			t.Fatalf("kipvs cleanup: %v\n%s", err, out)
		}
		if left := harness.Leftovers(t); len(left) > 0 {
			t.Fatalf("kernel state left after kipvs cleanup:\n%s", strings.Join(left, "\n"))
		}
	}
	if objs := s.api.LeftoverObjects(t); len(objs) > 0 {
		t.Fatalf("API objects left by an earlier scenario: %v", objs)
	}
	s.api.EnsureNode(t)
	s.topo = harness.NewTopology(t, env)
	t.Cleanup(func() {
		start := time.Now()
		if out, err := harness.RunCleanup(env); err != nil {
			t.Errorf("kipvs cleanup: %v\n%s", err, out)
		}
		t.Logf("kipvs cleanup took %.1fs", time.Since(start).Seconds())
		if _, err := harness.Run("conntrack", "-F"); err != nil {
			t.Logf("conntrack -F: %v", err)
		}
		if left := harness.Leftovers(t); len(left) > 0 {
			t.Errorf("kipvs cleanup left kernel state behind:\n%s", strings.Join(left, "\n"))
		}
	})
	return s
}

// pods adds echo pods named prefix1.. with IPs 10.244.0.(base+i).
func (s *scenario) pods(prefix string, base byte, n int) []*harness.Pod {
	s.t.Helper()
	var out []*harness.Pod
	for i := 1; i <= n; i++ {
		name := prefix + string(rune('0'+i))
		out = append(out, s.topo.AddPod(s.t, name, netip.AddrFrom4([4]byte{10, 244, 0, base + byte(i)}), harness.PodOptions{}))
	}
	return out
}

// startKipvs starts `kipvs run` with the scenarios' flags plus extra and waits for its
// first sync.
func (s *scenario) startKipvs(extra ...string) *harness.Kipvs {
	s.t.Helper()
	return s.startKipvsArgs(s.runArgs(extra...))
}

// runArgs are harness.RunArgs with the flags of the scenario's filter backend, then extra.
func (s *scenario) runArgs(extra ...string) []string {
	return harness.RunArgs(s.env, append(s.backend.args(), extra...)...)
}

func (s *scenario) startKipvsArgs(args []string) *harness.Kipvs {
	s.t.Helper()
	k := harness.StartKipvs(s.t, s.env, args...)
	d := k.WaitSynced(s.t, startLimit, "kipvs's first sync", nil)
	s.t.Logf("kipvs synced %.1fs after start", d.Seconds())
	s.expectBackendState()
	return k
}

// vs names an IPVS virtual server as harness.IPVSTable does.
func vs(p harness.Proto, ip netip.Addr, port int) string {
	return string(p) + " " + netip.AddrPortFrom(ip, uint16(port)).String()
}

// ap is ip:port.
func ap(ip netip.Addr, port int) netip.AddrPort { return netip.AddrPortFrom(ip, uint16(port)) }

// names returns the pods' names, sorted.
func names(pods ...*harness.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.PodName)
	}
	slices.Sort(out)
	return out
}

// expectSpread sends n requests and checks that every one succeeds, that together they
// reach exactly the backends in want, and that each backend saw the source src.
func expectSpread(t *testing.T, what string, c harness.Client, p harness.Proto, addr netip.AddrPort, n int, src netip.Addr, want ...*harness.Pod) {
	t.Helper()
	seen := map[string]int{}
	for range n {
		a, err := c.Do(p, addr)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if a.Source.Addr() != src {
			t.Errorf("%s: backend %s saw the client as %s, want %s", what, a.Backend, a.Source.Addr(), src)
		}
		seen[a.Backend]++
	}
	got := make([]string, 0, len(seen))
	for b := range seen {
		got = append(got, b)
	}
	slices.Sort(got)
	if !slices.Equal(got, names(want...)) {
		t.Errorf("%s: %d requests reached %v (%v), want every one of %v", what, n, got, seen, names(want...))
		return
	}
	t.Logf("%s: %d requests, answered by %v, client seen as %s", what, n, seen, src)
}
