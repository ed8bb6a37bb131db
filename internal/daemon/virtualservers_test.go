package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// VirtualServers (the metrics server's debug endpoint) lists what the daemon programs,
// with the Service port each virtual server belongs to.
func TestDaemonVirtualServers(t *testing.T) {
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
	if got := d.VirtualServers(); len(got) != 0 {
		t.Errorf("before the first sync: %+v", got)
	}
	d.start(t)
	want := debugapi.VirtualServer{Protocol: "TCP", Address: "10.96.0.10", Port: 80, Kind: "ClusterIP",
		Namespace: "default", Name: "web", PortName: "http", Destinations: 1}
	if got := d.VirtualServers(); len(got) != 1 || got[0] != want {
		t.Errorf("VirtualServers = %+v, want [%+v]", got, want)
	}
}
