package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// testTimeouts are short versions of the servers' timeouts.
var testTimeouts = Timeouts{ReadHeader: time.Second, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}

// startTimeoutServer serves h with testTimeouts on a loopback port until the test ends.
func startTimeoutServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveListener(ctx, "metrics", ln, h, testTimeouts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// A client that asks for a big body and never reads it held the handler (and what it had
// built) for as long as it stayed connected: eight of them held 546 MB of a node's heap.
// With a WriteTimeout the handler's write fails once it has passed, the handler returns and
// the connection is closed.
func TestClientThatNeverReadsIsDropped(t *testing.T) {
	type result struct {
		written int
		err     error
		took    time.Duration
	}
	results := make(chan result, 1)
	const body = 1 << 30 // far more than the socket buffers take
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		start := time.Now()
		chunk := make([]byte, 1<<20)
		n := 0
		var err error
		for n < body && err == nil {
			var k int
			k, err = w.Write(chunk)
			n += k
		}
		results <- result{n, err, time.Since(start)}
	})
	addr := startTimeoutServer(t, h)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing until the handler is done.
	var r result
	select {
	case r = <-results:
	case <-time.After(20 * time.Second):
		t.Fatalf("the handler still writes to a client that reads nothing 20 s later (write timeout %v)", testTimeouts.Write)
	}
	if r.err == nil || r.written >= body {
		t.Fatalf("the handler wrote %d bytes without an error to a client that reads nothing", r.written)
	}
	if r.took < testTimeouts.Write {
		t.Errorf("the write failed after %v, before the write timeout %v: %v", r.took, testTimeouts.Write, r.err)
	}
	// The connection is closed: the client reads what the socket buffers held, then the end.
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after the handler gave up (%d bytes read)", n)
	}
	if n >= body {
		t.Fatalf("the client got the whole body (%d bytes)", n)
	}
}

// A kept-alive connection with no further request is closed after the idle timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	addr := startTimeoutServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
	start := time.Now()
	if err := conn.SetReadDeadline(start.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rest, err := br.ReadString('\n')
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle connection is still open %v later (idle timeout %v)", took, testTimeouts.Idle)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read on the idle connection: %q, %v; want its end", rest, err)
	}
	if took < testTimeouts.Idle/2 {
		t.Errorf("closed after %v, well before the idle timeout %v", took, testTimeouts.Idle)
	}
}

// The servers' own timeouts let the slowest legitimate response finish: a scrape waits up
// to 5 s for the kernel and Prometheus waits at most its scrape_timeout (10 s by default).
func TestServerTimeoutsAllowSlowScrapes(t *testing.T) {
	if WriteTimeout < time.Minute || IdleTimeout < time.Minute || ReadHeaderTimeout <= 0 {
		t.Fatalf("timeouts write %v, idle %v, read header %v", WriteTimeout, IdleTimeout, ReadHeaderTimeout)
	}
}
