// Command loadgen is make bench-compare's load generator: it runs in the VM, in the client's
// network namespace, against an echo backend (e2e/echo) reached through a Service or
// directly, and prints one LOADGEN-RESULT line (bench.LoadResult as JSON).
//
//	loadgen -mode tcp-new|tcp-keepalive|udp -target ADDR:PORT [-workers 4] [-duration 10s]
//
// tcp-new opens a connection per request (GET /, the reply read to its end, closed);
// tcp-keepalive holds one connection per worker (GET /hold, then a line echoed per
// request); udp sends a 32-byte datagram per request and waits for the answer. Each worker
// has one request in flight. The CPU figure is the process's own (getrusage): pin it with
// taskset so a saturated generator shows as about 1 core.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/e2e/bench"
)

type options struct {
	mode, target string
	workers      int
	duration     time.Duration
	timeout      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", bench.LoadTCPNew, "tcp-new, tcp-keepalive or udp")
	flag.StringVar(&o.target, "target", "", "ADDR:PORT of an echo backend, or of a Service in front of some")
	flag.IntVar(&o.workers, "workers", 4, "concurrent workers, one request in flight each")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to measure")
	flag.DurationVar(&o.timeout, "timeout", time.Second, "limit for one request (a request that takes longer is an error)")
	flag.Parse()
	if o.target == "" || o.workers < 1 || o.duration <= 0 || o.timeout <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: need -target, -workers >= 1, -duration > 0, -timeout > 0")
		os.Exit(2)
	}
	var req func(w *worker) error
	switch o.mode {
	case bench.LoadTCPNew:
		req = (*worker).tcpNew
	case bench.LoadTCPKeepAlive:
		req = (*worker).keepAlive
	case bench.LoadUDP:
		req = (*worker).udp
	default:
		fmt.Fprintf(os.Stderr, "loadgen: unknown -mode %q\n", o.mode)
		os.Exit(2)
	}
	res, err := run(o, req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
	line, err := bench.MarshalLoadResult(res)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// worker is one request loop with its connection (kept between requests in the modes that
// keep one).
type worker struct {
	o       options
	conn    net.Conn
	r       *bufio.Reader
	samples []time.Duration
	errs    int
	first   error
}

func run(o options, req func(*worker) error) (bench.LoadResult, error) {
	var ru0, ru1 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru0); err != nil {
		return bench.LoadResult{}, fmt.Errorf("getrusage: %w", err)
	}
	start := time.Now()
	end := start.Add(o.duration)
	ws := make([]*worker, o.workers)
	var wg sync.WaitGroup
	for i := range ws {
		w := &worker{o: o}
		ws[i] = w
		wg.Go(func() {
			defer w.close()
			for time.Now().Before(end) {
				t0 := time.Now()
				err := req(w)
				switch {
				case errors.Is(err, errNotSample):
					continue
				case err != nil:
					w.errs++
					if w.first == nil {
						w.first = err
					}
					w.close()
					continue
				}
				w.samples = append(w.samples, time.Since(t0))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru1); err != nil {
		return bench.LoadResult{}, fmt.Errorf("getrusage: %w", err)
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	var samples []time.Duration
	errs := 0
	var first error
	for _, w := range ws {
		samples = append(samples, w.samples...)
		errs += w.errs
		if first == nil {
			first = w.first
		}
	}
	res := bench.SummarizeLoad(o.mode, o.target, o.workers, samples, errs, wall, cpu)
	if first != nil {
		res.FirstError = first.Error()
	}
	return res, nil
}

func (w *worker) close() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn, w.r = nil, nil
	}
}

// tcpNew is one connection: GET /, the reply read until the backend closes.
func (w *worker) tcpNew() error {
	c, err := net.DialTimeout("tcp", w.o.target, w.o.timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(w.o.timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: bench\r\n\r\n"); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !strings.HasPrefix(string(b), "HTTP/1.") || !strings.Contains(string(b), " 200 ") {
		return fmt.Errorf("reply %q", b)
	}
	return nil
}

// keepAlive is one line echoed over the worker's held connection (opened with GET /hold
// first when it has none: that request is not a sample).
func (w *worker) keepAlive() error {
	if w.conn == nil {
		if err := w.hold(); err != nil {
			return err
		}
		return errNotSample
	}
	if err := w.conn.SetDeadline(time.Now().Add(w.o.timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(w.conn, "ping\n"); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	got, err := w.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if got != "ping\n" {
		return fmt.Errorf("echo %q", got)
	}
	return nil
}

// errNotSample marks a request that opened a connection: neither a sample nor an error.
var errNotSample = errors.New("connection opened")

func (w *worker) hold() error {
	c, err := net.DialTimeout("tcp", w.o.target, w.o.timeout)
	if err != nil {
		return err
	}
	w.conn, w.r = c, bufio.NewReader(c)
	if err := c.SetDeadline(time.Now().Add(w.o.timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET /hold HTTP/1.0\r\nHost: bench\r\n\r\n"); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for first := true; ; first = false { // status, headers, the empty line
		l, err := w.r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		if first && !strings.Contains(l, " 200 ") {
			return fmt.Errorf("hold: status %q", l)
		}
		if l == "\r\n" {
			break
		}
	}
	_, err = w.r.ReadString('\n') // "NAME CLIENT" of the backend
	return err
}

// udp is one datagram answered, over the worker's socket.
func (w *worker) udp() error {
	if w.conn == nil {
		c, err := net.Dial("udp", w.o.target)
		if err != nil {
			return err
		}
		w.conn = c
	}
	if err := w.conn.SetDeadline(time.Now().Add(w.o.timeout)); err != nil {
		return err
	}
	if _, err := w.conn.Write([]byte("bench query of a DNS-like size.")); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 512)
	n, err := w.conn.Read(buf)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if n == 0 {
		return errors.New("empty answer")
	}
	return nil
}
