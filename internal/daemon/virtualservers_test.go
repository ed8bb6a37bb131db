package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/server"
)

// VirtualServers (the metrics server's debug endpoint) lists what the daemon programs,
// with the Service port each virtual server belongs to.
func TestDaemonVirtualServers(t *testing.T) {
	log := zaptest.NewLogger(t)
	path := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := newFakeNode()
	ready := make(chan struct{})
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d, err := New(cfg, "node-a", log, node.deps(startFileSource(t, ctx, path, log), prometheus.NewRegistry(), ready))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.VirtualServers(); len(got) != 0 {
		t.Errorf("before the first sync: %+v", got)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended before the first sync: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no first sync")
	}
	want := server.VirtualServer{Protocol: "TCP", Address: "10.96.0.10", Port: 80, Kind: "ClusterIP",
		Namespace: "default", Name: "web", PortName: "http", Destinations: 1}
	if got := d.VirtualServers(); len(got) != 1 || got[0] != want {
		t.Errorf("VirtualServers = %+v, want [%+v]", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
