package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/netnsutil"
)

// Client sends requests to the echo backends from inside a network namespace: the socket
// is created on a thread inside NS, so the connection belongs to that namespace.
type Client struct {
	// NS is where the client runs; netns.None() (the zero value is not None) or a closed
	// handle means the node's namespace.
	NS netns.NsHandle
	// Timeout bounds each request (connect, send, answer); default 3 s.
	Timeout time.Duration
	// ports hands out UDP source ports; nil leaves the choice to the kernel.
	ports *sourcePorts
}

// In returns a client inside ns; its UDP source ports come from ns's topology.
func In(ns *NS) Client { return Client{NS: ns.Handle, ports: ns.ports} }

// WithTimeout returns c with Timeout d.
func (c Client) WithTimeout(d time.Duration) Client {
	c.Timeout = d
	return c
}

// sourcePorts hands out UDP source ports in turn from [srcPortBase, srcPortBase+srcPortCount),
// below the NodePort range and the kernel's ephemeral range. A datagram from a port an
// earlier flow used, while that flow's conntrack and IPVS entries live, belongs to the old
// flow (same 5-tuple) and keeps its backend and NAT: a kernel rule, not the behaviour under
// test. The kernel picks ephemeral ports at random, so a few hundred requests reuse one
// now and then; in turn, a port comes back only after srcPortCount requests.
type sourcePorts struct{ next atomic.Uint32 }

const (
	srcPortBase  = 20000
	srcPortCount = 10000
)

// newSourcePorts starts at a random port, so the node's namespace, which outlives the
// topologies, does not replay one topology's ports in the next.
func newSourcePorts() *sourcePorts {
	s := &sourcePorts{}
	s.next.Store(uint32(rand.IntN(srcPortCount)))
	return s
}

func (s *sourcePorts) take() int { return srcPortBase + int(s.next.Add(1)%srcPortCount) }

// dialUDP connects a UDP socket to addr from the next free source port of c.ports, or
// from one the kernel picks when c has none.
func (c Client) dialUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	raddr := net.UDPAddrFromAddrPort(addr)
	if c.ports == nil {
		return net.DialUDP("udp", nil, raddr)
	}
	var err error
	for range 16 {
		var conn *net.UDPConn
		if conn, err = net.DialUDP("udp", &net.UDPAddr{Port: c.ports.take()}, raddr); err == nil {
			return conn, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, err
}

// Answer is what an echo backend said: its name and the client address it saw.
type Answer struct {
	Backend string
	Source  netip.AddrPort
}

func (a Answer) String() string { return a.Backend + " " + a.Source.String() }

func parseAnswer(line string) (Answer, error) {
	name, src, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return Answer{}, fmt.Errorf("malformed answer %q", line)
	}
	ap, err := netip.ParseAddrPort(src)
	if err != nil {
		return Answer{}, fmt.Errorf("malformed answer %q: %w", line, err)
	}
	return Answer{Backend: name, Source: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
}

func (c Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 3 * time.Second
}

func (c Client) ns() netns.NsHandle {
	if c.NS == 0 {
		return netns.None()
	}
	return c.NS
}

// HTTP makes one HTTP/1.0 request on a new TCP connection to addr and returns the answer.
func (c Client) HTTP(addr netip.AddrPort) (Answer, error) {
	var ans Answer
	err := netnsutil.Do(c.ns(), func() error {
		deadline := time.Now().Add(c.timeout())
		conn, err := net.DialTimeout("tcp", addr.String(), c.timeout())
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(deadline); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: e2e\r\n\r\n"); err != nil {
			return fmt.Errorf("send request: %w", err)
		}
		body, err := io.ReadAll(conn)
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		status, rest, _ := bytes.Cut(body, []byte("\r\n"))
		if !bytes.Contains(status, []byte(" 200 ")) {
			return fmt.Errorf("HTTP status %q", status)
		}
		_, payload, ok := bytes.Cut(rest, []byte("\r\n\r\n"))
		if !ok {
			return fmt.Errorf("no HTTP body in %q", body)
		}
		ans, err = parseAnswer(string(payload))
		return err
	})
	if err != nil {
		return Answer{}, fmt.Errorf("tcp %s: %w", addr, err)
	}
	return ans, nil
}

// UDP sends one datagram to addr from a new socket and returns the answer. With a source
// port sequence (clients from In and Topology.NodeClient) each datagram is a new flow for
// IPVS and conntrack; see sourcePorts.
func (c Client) UDP(addr netip.AddrPort) (Answer, error) {
	var ans Answer
	err := netnsutil.Do(c.ns(), func() error {
		conn, err := c.dialUDP(addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(c.timeout())); err != nil {
			return err
		}
		if _, err := conn.Write([]byte("e2e\n")); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		ans, err = parseAnswer(line)
		return err
	})
	if err != nil {
		return Answer{}, fmt.Errorf("udp %s: %w", addr, err)
	}
	return ans, nil
}

// Proto selects HTTP over TCP, a datagram over UDP or a message over SCTP.
type Proto string

// Protocols of Client.Do.
const (
	TCP  Proto = "tcp"
	UDP  Proto = "udp"
	SCTP Proto = "sctp"
)

// Do makes one request of protocol p.
func (c Client) Do(p Proto, addr netip.AddrPort) (Answer, error) {
	switch p {
	case UDP:
		return c.UDP(addr)
	case SCTP:
		return c.SCTP(addr)
	}
	return c.HTTP(addr)
}

// Held is an established TCP connection to an echo backend's /hold, kept open by both ends
// (an active connection of its IPVS real server) until Close.
type Held struct {
	Answer  Answer // who answered, and the client address it saw
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// Hold opens a connection to addr, asks for /hold and returns it once the backend answered.
func (c Client) Hold(addr netip.AddrPort) (*Held, error) {
	var h *Held
	err := netnsutil.Do(c.ns(), func() error {
		conn, err := net.DialTimeout("tcp", addr.String(), c.timeout())
		if err != nil {
			return err
		}
		h = &Held{conn: conn, r: bufio.NewReader(conn), timeout: c.timeout()}
		if err := conn.SetDeadline(time.Now().Add(c.timeout())); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, "GET /hold HTTP/1.0\r\nHost: e2e\r\n\r\n"); err != nil {
			return fmt.Errorf("send request: %w", err)
		}
		status, err := h.r.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			return fmt.Errorf("HTTP status %q: %v", status, err)
		}
		for {
			l, err := h.r.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read headers: %w", err)
			}
			if l == "\r\n" {
				break
			}
		}
		line, err := h.r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		if h.Answer, err = parseAnswer(line); err != nil {
			return err
		}
		return conn.SetDeadline(time.Time{})
	})
	if err != nil {
		if h != nil {
			h.conn.Close()
		}
		return nil, fmt.Errorf("hold tcp %s: %w", addr, err)
	}
	return h, nil
}

// Ping sends a line over the held connection and waits for the backend to echo it: the
// connection still reaches the same backend through IPVS.
func (h *Held) Ping() error {
	if err := h.conn.SetDeadline(time.Now().Add(h.timeout)); err != nil {
		return err
	}
	defer h.conn.SetDeadline(time.Time{})
	const msg = "ping\n"
	if _, err := io.WriteString(h.conn, msg); err != nil {
		return fmt.Errorf("held connection to %s: send: %w", h.Answer.Backend, err)
	}
	got, err := h.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("held connection to %s: no echo: %w", h.Answer.Backend, err)
	}
	if got != msg {
		return fmt.Errorf("held connection to %s: echo %q, want %q", h.Answer.Backend, got, msg)
	}
	return nil
}

// Close closes the held connection.
func (h *Held) Close() error { return h.conn.Close() }
