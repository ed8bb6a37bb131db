package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
)

// Events are written on a client of their own, with its own rate limit (EventsQPS), so
// that an Event flood never takes the watches' requests (issue 23, finding 4: they shared
// the watches' 5 QPS client).
func TestEventsClientIsSeparate(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.ClientConnection.Kubeconfig = kc
	cfg.ClientConnection.QPS, cfg.ClientConnection.Burst = 50, 100
	_, ev, err := newSource(&cfg, "node-a", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	cs, ok := ev.(*kubernetes.Clientset)
	if !ok {
		t.Fatalf("events client is a %T", ev)
	}
	if got := cs.EventsV1().RESTClient().GetRateLimiter().QPS(); got != EventsQPS {
		t.Errorf("events client QPS = %v, want EventsQPS %v (not the watches' %v)", got, float32(EventsQPS), cfg.ClientConnection.QPS)
	}
}
