package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/metrics"
)

func get(t *testing.T, h http.Handler, path string) (int, Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var r Report
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", path, rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	return rec.Code, r
}

func TestHealthSemantics(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	var node *v1.Node = &v1.Node{}
	m := metrics.New(prometheus.NewRegistry())
	h := NewHealth(clk, 60*time.Second, func() (*v1.Node, bool) { return node, true }, m)
	handler := h.Handler()

	if code, _ := get(t, handler, "/healthz"); code != 200 {
		t.Fatalf("starting up: /healthz = %d, want 200", code)
	}
	h.Updated("IPv4")
	h.QueuedUpdate("IPv4")
	clk.Step(59 * time.Second)
	if code, _ := get(t, handler, "/healthz"); code != 200 {
		t.Fatalf("update pending 59s of 60s: /healthz = %d, want 200", code)
	}
	clk.Step(time.Second)
	code, r := get(t, handler, "/healthz")
	if code != 503 || r.Healthy || r.Status["IPv4"].Healthy {
		t.Fatalf("update pending 60s: /healthz = %d %+v, want 503", code, r)
	}
	// A pending update is not a stuck process: /livez stays 200 (its body still shows
	// the family's sync health).
	code, r = get(t, handler, "/livez")
	if code != 200 || !r.Healthy || r.Status["IPv4"].Healthy {
		t.Fatalf("update pending 60s: /livez = %d %+v, want 200 with IPv4's sync unhealthy", code, r)
	}
	h.Updated("IPv4")
	code, r = get(t, handler, "/healthz")
	if code != 200 || !r.Healthy || r.NodeEligible == nil || !*r.NodeEligible || !r.LastUpdated.Equal(clk.Now()) {
		t.Fatalf("after sync: /healthz = %d %+v", code, r)
	}

	// A node being deleted fails /healthz (load balancers drain it) but not /livez (the
	// kubelet must not restart kipvs for it).
	now := metav1.NewTime(clk.Now())
	node = &v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	if code, r := get(t, handler, "/healthz"); code != 503 || *r.NodeEligible {
		t.Errorf("deleting node: /healthz = %d, nodeEligible %v", code, *r.NodeEligible)
	}
	if code, _ := get(t, handler, "/livez"); code != 200 {
		t.Errorf("deleting node: /livez = %d, want 200", code)
	}
	node = &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: ToBeDeletedTaint}}}}
	if code, _ := get(t, handler, "/healthz"); code != 503 {
		t.Errorf("tainted node: /healthz = %d, want 503", code)
	}
}

// A proxy whose first sync never succeeds must not stay healthy: the pending first sync
// counts like any other queued update.
func TestHealthFirstSyncNeverSucceeds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	h := NewHealth(clk, 60*time.Second, nil, metrics.New(prometheus.NewRegistry()))
	handler := h.Handler()
	h.QueuedUpdate("IPv4")
	h.QueuedUpdate("IPv6")
	clk.Step(59 * time.Second)
	if code, _ := get(t, handler, "/healthz"); code != 200 {
		t.Fatalf("first sync pending 59s of 60s: /healthz = %d, want 200", code)
	}
	h.Updated("IPv6")
	clk.Step(time.Second)
	code, r := get(t, handler, "/healthz")
	if code != 503 || r.Healthy || r.Status["IPv4"].Healthy || !r.Status["IPv6"].Healthy || !r.Status["IPv4"].LastUpdated.IsZero() {
		t.Fatalf("IPv4 never synced for 60s: /healthz = %d %+v, want 503 with IPv4 unhealthy and IPv6 healthy", code, r)
	}
	if code, _ := get(t, handler, "/livez"); code != 200 {
		t.Fatalf("IPv4 never synced for 60s, nothing running: /livez = %d, want 200", code)
	}
}

// /livez fails only while one piece of the sync loop's work has run StuckTimeout or longer
// (the longer of twice the /healthz timeout and MinStuckTimeout), naming the oldest.
func TestLivezStuck(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	h := NewHealth(clk, 60*time.Second, nil, metrics.New(prometheus.NewRegistry()))
	if h.StuckTimeout() != MinStuckTimeout {
		t.Fatalf("StuckTimeout = %v with a 60 s health timeout, want %v", h.StuckTimeout(), MinStuckTimeout)
	}
	if long := NewHealth(clk, 10*time.Minute, nil, nil); long.StuckTimeout() != 20*time.Minute {
		t.Fatalf("StuckTimeout = %v with a 10 min health timeout, want 20 min", long.StuckTimeout())
	}
	handler := h.Handler()
	endRead := h.Begin("periodic read")
	clk.Step(time.Minute)
	endSync := h.Begin("sync")
	clk.Step(MinStuckTimeout - time.Minute - time.Second)
	if code, r := get(t, handler, "/livez"); code != 200 || r.Stuck != "" {
		t.Fatalf("work running 1m59s: /livez = %d %+v, want 200", code, r)
	}
	clk.Step(time.Second)
	if code, r := get(t, handler, "/livez"); code != 503 || !strings.HasPrefix(r.Stuck, "periodic read running since") {
		t.Fatalf("periodic read running 2m: /livez = %d %+v, want 503 naming it", code, r)
	}
	endRead()
	if code, r := get(t, handler, "/livez"); code != 200 {
		t.Fatalf("the read ended, the sync runs 1m: /livez = %d %+v, want 200", code, r)
	}
	clk.Step(time.Minute)
	if code, r := get(t, handler, "/livez"); code != 503 || !strings.HasPrefix(r.Stuck, "sync running since") {
		t.Fatalf("sync running 2m: /livez = %d %+v, want 503 naming it", code, r)
	}
	endSync()
	if code, _ := get(t, handler, "/livez"); code != 200 {
		t.Fatalf("nothing running: /livez = %d, want 200", code)
	}
}

func TestMetricsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.SyncFull.WithLabelValues("IPv4").Inc()
	h := MetricsHandler(reg, func() any { return map[string]string{"mode": "ipvs"} })
	for path, want := range map[string]string{
		"/proxyMode": "ipvs",
		"/healthz":   "ok",
		"/configz":   `{"kubeproxy.config.k8s.io":{"mode":"ipvs"}}`,
		"/metrics":   `kipvs_sync_full_total{ip_family="IPv4"} 1`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s = %d %q, want it to contain %q", path, rec.Code, rec.Body.String(), want)
		}
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, "test", ln, MetricsHandler(prometheus.NewRegistry(), nil)) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/proxyMode")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ipvs" {
		t.Errorf("body %q", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if err := Serve(context.Background(), "test", "256.0.0.1:1", nil, ServeOptions{HardFail: true}); err == nil || !strings.Contains(err.Error(), "test server: listen on 256.0.0.1:1") {
		t.Errorf("bad address error = %v", err)
	}
}
