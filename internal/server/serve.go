package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// RetryInterval is how long Serve waits after a failed listen, or a server that stopped,
// before it tries again: kube-proxy's 5 s.
const RetryInterval = 5 * time.Second

// ServeOptions configure Serve.
type ServeOptions struct {
	// Clock times the wait between attempts; nil is the real clock.
	Clock clock.Clock
	// HardFail returns the first failure instead of retrying (--bind-address-hard-fail).
	HardFail bool
	// OnError is called with each failure that is retried (kube-proxy logs them); may be nil.
	OnError func(error)
	// OnListen is called with the bound address each time the server starts listening; may
	// be nil.
	OnListen func(net.Addr)
}

// Serve listens on addr and serves handler until ctx ends, as kube-proxy runs its health
// and metrics servers: a failed listen (the port still held by the process being replaced,
// say) or a server that stops with an error is reported to OnError and retried every
// RetryInterval, forever. With HardFail the first failure is returned instead. Serve
// returns nil once ctx ends.
func Serve(ctx context.Context, name, addr string, handler http.Handler, o ServeOptions) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	for {
		err := serveOnce(ctx, name, addr, handler, o.OnListen)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%s server on %s stopped", name, addr)
		}
		if o.HardFail {
			return err
		}
		if o.OnError != nil {
			o.OnError(err)
		}
		t := o.Clock.NewTimer(RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

func serveOnce(ctx context.Context, name, addr string, handler http.Handler, onListen func(net.Addr)) error {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server: listen on %s: %w", name, addr, err)
	}
	if onListen != nil {
		onListen(ln.Addr())
	}
	return ServeListener(ctx, name, ln, handler)
}

// Timeouts bound what one connection to the metrics or health server may hold.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers (a client that connects and sends
	// nothing, or sends slowly, is dropped).
	ReadHeader time.Duration
	// Write bounds a response, from the end of the request's headers to the last byte
	// written: a client that stops reading (its TCP window full) is dropped then, and the
	// handler's writes fail, so it returns and frees what it built.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive connection.
	Idle time.Duration
}

// The metrics and health servers' timeouts (see Timeouts). WriteTimeout is the one that
// could cut a legitimate response: a scrape waits up to svcstats.DefaultTimeout (5 s) for
// the kernel's counters, and then writes the body, which took 28-35 ms at 10,000 Services
// (10 MB of text, 234 KB gzipped, docs/performance.md) and is bounded by the Service and
// endpoint series limits; Prometheus gives up on a scrape at its scrape_timeout (10 s by
// default, never more than the scrape interval). Two minutes is well beyond both, and
// beyond /debug/pprof/profile's default 30 s (with --profiling; pprof refuses a longer
// profile than the server's WriteTimeout). Idle is longer than the usual 1 min scrape
// interval, so Prometheus keeps its connection between scrapes.
const (
	ReadHeaderTimeout = 10 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 90 * time.Second
)

// ServeListener serves handler on ln until ctx ends, with ReadHeaderTimeout, WriteTimeout
// and IdleTimeout.
func ServeListener(ctx context.Context, name string, ln net.Listener, handler http.Handler) error {
	return serveListener(ctx, name, ln, handler, Timeouts{ReadHeader: ReadHeaderTimeout, Write: WriteTimeout, Idle: IdleTimeout})
}

func serveListener(ctx context.Context, name string, ln net.Listener, handler http.Handler, t Timeouts) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: t.ReadHeader, WriteTimeout: t.Write, IdleTimeout: t.Idle}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("%s server on %s: %w", name, ln.Addr(), err)
	}
}
