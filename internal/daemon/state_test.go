package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/testutil/golden"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// State (the metrics server's /debug/kipvs/state) shows what the daemon programmed: it
// equals the kernel after a sync (sets, VIPs, rules), and lists a removed endpoint's real
// server while it drains.
func TestDaemonState(t *testing.T) {
	log := zaptest.NewLogger(t)
	path := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d := newDaemon(t, cfg, log, node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry()))
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := d.State()
	if len(st.Families) != 1 || st.Families[0].Synced || len(st.Families[0].Addresses) != 0 || st.Families[0].Rules != "" {
		t.Errorf("before the first sync: %+v", st.Families)
	}
	d.start(t)

	st = d.State()
	if st.Dummy != ipvsmode.DummyName || st.FilterBackend != "iptables" || st.GracefulPeriod != cfg.Kipvs.GracefulPeriod.String() || !st.Schedulers["rr"] || len(st.Families) != 1 {
		t.Fatalf("state header: %+v", st)
	}
	fs := st.Families[0]
	if fs.Family != "IPv4" || !fs.Synced || !slices.Equal(fs.Addresses, []string{"10.96.0.10"}) {
		t.Errorf("family: %s synced=%v addresses=%v", fs.Family, fs.Synced, fs.Addresses)
	}
	members := map[string][]string{}
	for _, s := range fs.Sets {
		members[s.Name] = s.Members
	}
	if len(fs.Sets) != 17 || !slices.Equal(members["KUBE-CLUSTER-IP"], []string{"10.96.0.10,tcp:80"}) || !slices.Equal(members["KUBE-IPVS-IPS"], []string{"10.96.0.10"}) {
		t.Errorf("sets: %+v", fs.Sets)
	}
	obs, err := node.nf.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := netfilter.Format(obs.Normalize()); fs.Rules != want {
		t.Errorf("rules:\n%s\nkernel:\n%s", fs.Rules, want)
	}
	golden.Check(t, "state-rules.txt", fs.Rules)
	if len(fs.VirtualServers) != 1 || fs.VirtualServers[0].Address != "10.96.0.10" || len(fs.Draining) != 0 {
		t.Errorf("virtual servers %+v, draining %+v", fs.VirtualServers, fs.Draining)
	}

	// The endpoint moves: the old real server drains at weight 0.
	if err := os.WriteFile(path, []byte(strings.Replace(oneService, "10.244.1.5", "10.244.1.6", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var drain []debugapi.DrainingRealServer
	poll.Until(t, waitLimit, "the old real server to drain", func() (bool, string) {
		drain = d.State().Families[0].Draining
		return len(drain) == 1, fmt.Sprintf("draining %+v", drain)
	})
	if got := drain[0]; got.Protocol != "TCP" || got.Address != "10.96.0.10" || got.Port != 80 || got.RealServer != "10.244.1.5:8080" ||
		time.Since(got.Since) > time.Minute || got.Since.Location() != time.UTC {
		t.Errorf("draining: %+v", got)
	}
}

// The state document names the filter backend the daemon runs, as --kipvs-filter-backend
// chose it: kipvs doctor reads it to know which checks apply.
func TestDaemonStateFilterBackend(t *testing.T) {
	for _, b := range []config.FilterBackend{config.FilterIPTables, config.FilterNFTables} {
		cfg := testConfig(t)
		cfg.Kipvs.FilterBackend = b
		d := newDaemon(t, cfg, zaptest.NewLogger(t), newFakeNode().deps(nil, prometheus.NewRegistry()))
		if got := d.State().FilterBackend; got != string(b) {
			t.Errorf("--kipvs-filter-backend=%s: the state document says %q", b, got)
		}
	}
}
