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

// ServeListener serves handler on ln until ctx ends.
func ServeListener(ctx context.Context, name string, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
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
