package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/bench"
)

// serveEcho answers on a TCP and a UDP socket of one port as e2e/echo does: GET / with a
// reply and a close, GET /hold with a reply and then each line echoed; a datagram with one.
func serveEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			_, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte("echo "+addr.String()+"\n"), addr)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for l := ""; l != "\r\n"; {
					if l, err = r.ReadString('\n'); err != nil {
						return
					}
				}
				if !strings.Contains(req, "/hold") {
					_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\necho x\n")
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\necho x\n")
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = io.WriteString(c, l)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRun(t *testing.T) {
	target := serveEcho(t)
	for mode, req := range map[string]func(*worker) error{
		bench.LoadTCPNew: (*worker).tcpNew, bench.LoadTCPKeepAlive: (*worker).keepAlive, bench.LoadUDP: (*worker).udp,
	} {
		o := options{mode: mode, target: target, workers: 2, duration: 300 * time.Millisecond, timeout: time.Second}
		r, err := run(o, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Count < 10 || r.Errors != 0 || r.Rate <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Workers != 2 || r.Mode != mode {
			t.Errorf("%s against an echo server: %+v, want >= 10 answered, no error, p50 <= p99", mode, r)
		}
	}
	// Nothing listening: every request is an error, none a sample.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	r, err := run(options{mode: bench.LoadTCPNew, target: closed, workers: 1, duration: 100 * time.Millisecond, timeout: time.Second}, (*worker).tcpNew)
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 0 || r.Errors == 0 || !strings.Contains(r.FirstError, "refused") {
		t.Errorf("tcp-new against a closed port: %+v, want no answer, errors, the first one a refusal", r)
	}
}
