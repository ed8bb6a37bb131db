package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// A scheduler module that cannot be loaded when a Service first asks for it is probed again
// on the next full sync: once it loads, the Service's virtual server switches to it.
func TestUnavailableSchedulerProbedAgain(t *testing.T) {
	log := zaptest.NewLogger(t)
	stream := strings.Replace(oneService, "metadata: {name: web, namespace: default}",
		"metadata: {name: web, namespace: default, annotations: {kipvs.io/scheduler: mh}}", 1)
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	node.ipvs.SetFault(func(_ int, op ipvs.Op) error {
		if op.Kind == ipvs.OpAddService && op.Service.Scheduler == "mh" {
			return kerr.Errno("add service", syscall.ENOENT) // ip_vs_mh not loadable yet
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d := startDaemon(t, cfg, log, node.deps(startFileSource(t, t.Context(), path, log), reg))
	const fallback = "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n"
	if dump, _ := node.ipvs.Dump(); dump != fallback {
		t.Fatalf("with ip_vs_mh missing:\n%s\nwant:\n%s", dump, fallback)
	}

	node.ipvs.SetFault(nil) // the module can be loaded now
	d.run.RequestFull()
	poll.Until(t, waitLimit, "a second full sync", fullSyncs(t, reg, 2))
	const want = "-A -t 10.96.0.10:80 -s mh -b mh-port\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\n"
	if dump, _ := node.ipvs.Dump(); dump != want {
		t.Errorf("after ip_vs_mh became loadable:\n%s\nwant:\n%s", dump, want)
	}
}
