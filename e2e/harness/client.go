package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
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
}

// NodeClient is a client in the node's namespace.
func NodeClient() Client { return Client{NS: netns.None()} }

// In returns a client inside ns.
func In(ns *NS) Client { return Client{NS: ns.Handle} }

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

// UDP sends one datagram to addr from a new socket (so a new source port: a new flow for
// IPVS and conntrack) and returns the answer.
func (c Client) UDP(addr netip.AddrPort) (Answer, error) {
	var ans Answer
	err := netnsutil.Do(c.ns(), func() error {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
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

// Proto selects HTTP over TCP or a datagram over UDP.
type Proto string

// Protocols of Client.Do.
const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// Do makes one request of protocol p.
func (c Client) Do(p Proto, addr netip.AddrPort) (Answer, error) {
	if p == UDP {
		return c.UDP(addr)
	}
	return c.HTTP(addr)
}
