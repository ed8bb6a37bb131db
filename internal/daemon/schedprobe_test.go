package daemon

import (
	"os"
	"path/filepath"
	"slices"
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

// A virtual server the kernel refuses (here as for a scheduler whose module cannot load) is
// that Service's problem alone: a Warning Event on the Service names the virtual server and
// the kernel's error, the daemon keeps running and retries it, and once the kernel takes it
// the virtual server is programmed.
func TestRefusedVirtualServerIsAServiceEvent(t *testing.T) {
	log := zaptest.NewLogger(t)
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	node.ipvs.SetFault(func(_ int, op ipvs.Op) error {
		if op.Kind == ipvs.OpAddService && op.Service.Addr.String() == "10.96.0.10" {
			return kerr.Errno("add service", syscall.ENOENT)
		}
		return nil
	})
	ev := &recordedEvents{}
	deps := node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry())
	deps.Events = ev
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	d := startDaemon(t, cfg, log, deps)
	const want = "default/web " + reasonVirtualServerRefused + " the kernel refused virtual server tcp/10.96.0.10:80 on node node-a: "
	poll.Until(t, waitLimit, "a Warning Event on default/web", func() (bool, string) {
		got := ev.all()
		return slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, want) }), strings.Join(got, "\n")
	})

	node.ipvs.SetFault(nil)
	d.run.RequestFull() // not waiting for the backoff
	poll.Until(t, waitLimit, "the virtual server retried", func() (bool, string) {
		dump, err := node.ipvs.Dump()
		return err == nil && dump == oneServiceIPVS, dump
	})
}
