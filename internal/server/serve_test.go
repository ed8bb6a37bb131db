package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitForTimer returns once the retry loop waits on clk (it has logged the failure and
// armed its timer), so that stepping the clock fires that wait.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
}

// A port still held by another process (the old kube-proxy during a swap) is retried every
// RetryInterval, as kube-proxy does, and served once it is free: the node gets its
// /healthz and metrics back without a restart.
func TestServeRetriesUntilThePortIsFree(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	errs := make(chan error, 10)
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, "metrics", addr, MetricsHandler(prometheus.NewRegistry(), nil), ServeOptions{
			Clock: clk, OnError: func(err error) { errs <- err }, OnListen: func(a net.Addr) { ready <- a },
		})
	}()

	first := <-errs
	if first == nil {
		t.Fatal("OnError(nil)")
	}
	waitForTimer(t, clk)
	clk.Step(RetryInterval - time.Millisecond)
	select {
	case err := <-errs:
		t.Fatalf("retried before %v: %v", RetryInterval, err)
	default:
	}
	// Still held at the second attempt: another failure, another wait.
	clk.Step(time.Millisecond)
	<-errs
	waitForTimer(t, clk)

	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Step(RetryInterval)
	<-ready
	resp, err := http.Get("http://" + addr + "/proxyMode")
	if err != nil {
		t.Fatalf("after the port was freed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "ipvs" {
		t.Errorf("/proxyMode = %q", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after the context ended", err)
	}
	if len(errs) != 0 {
		t.Errorf("unexpected errors: %v", <-errs)
	}
}

// With --bind-address-hard-fail a failed listen is returned at once, not retried: kipvs
// exits, as kube-proxy does.
func TestServeHardFail(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	err = Serve(context.Background(), "health", held.Addr().String(), http.NotFoundHandler(), ServeOptions{Clock: clk, HardFail: true})
	if err == nil || clk.HasWaiters() {
		t.Fatalf("hard fail: Serve = %v (waiting to retry: %v), want the listen error", err, clk.HasWaiters())
	}
}

// A context that ends while waiting to retry stops the loop.
func TestServeStopsWhileWaitingToRetry(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, "health", held.Addr().String(), http.NotFoundHandler(), ServeOptions{Clock: clk, OnError: func(err error) { errs <- err }})
	}()
	<-errs
	waitForTimer(t, clk)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}
