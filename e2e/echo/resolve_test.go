package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers A queries for one name with one address (NXDOMAIN otherwise) on UDP and
// TCP of the same loopback port, and counts the queries it got per protocol.
type dnsServer struct {
	addr string
	name string
	ip   [4]byte

	mu      sync.Mutex
	queries map[string]int // "udp", "tcp"
}

func startDNS(t *testing.T, name string, ip [4]byte) *dnsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	s := &dnsServer{addr: ln.Addr().String(), name: name, ip: ip, queries: map[string]int{}}
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := s.answer("udp", buf[:n]); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serveTCP(c)
		}
	}()
	return s
}

func (s *dnsServer) serveTCP(c net.Conn) {
	defer c.Close()
	for {
		var l uint16
		if err := binary.Read(c, binary.BigEndian, &l); err != nil {
			return
		}
		q := make([]byte, l)
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := s.answer("tcp", q)
		if resp == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

func (s *dnsServer) answer(proto string, q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil
	}
	s.mu.Lock()
	s.queries[proto]++
	s.mu.Unlock()
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired},
		Questions: qs,
	}
	if qs[0].Name.String() == s.name && qs[0].Type == dnsmessage.TypeA {
		msg.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: qs[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 30},
			Body:   &dnsmessage.AResource{A: s.ip},
		}}
	} else {
		msg.RCode = dnsmessage.RCodeNameError
	}
	b, err := msg.Pack()
	if err != nil {
		return nil
	}
	return b
}

func (s *dnsServer) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.queries {
		out[k] = v
	}
	return out
}

// -resolve sends every query to the given server over the given protocol only, and prints
// the answer with where it came from.
func TestResolveOverUDPAndTCP(t *testing.T) {
	const name = "kubernetes.default.svc.cluster.local."
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			s := startDNS(t, name, [4]byte{10, 96, 0, 1})
			var out bytes.Buffer
			if err := resolve(&out, name, s.addr, network); err != nil {
				t.Fatal(err)
			}
			want := name + " 10.96.0.1 via " + s.addr + "/" + network + " in "
			if !strings.HasPrefix(out.String(), want) || !strings.HasSuffix(out.String(), "s\n") {
				t.Errorf("printed %q, want %q and the lookup's duration", out.String(), want)
			}
			if got := s.counts(); len(got) != 1 || got[network] == 0 {
				t.Errorf("queries the server got per protocol: %v, want %s only", got, network)
			}
		})
	}
}

// A name the server does not know is an error naming the name and the server.
func TestResolveUnknownName(t *testing.T) {
	s := startDNS(t, "kubernetes.default.svc.cluster.local.", [4]byte{10, 96, 0, 1})
	var out bytes.Buffer
	err := resolve(&out, "nope.default.svc.cluster.local.", s.addr, "tcp")
	if err == nil || !strings.Contains(err.Error(), "nope.default.svc.cluster.local.") || !strings.Contains(err.Error(), s.addr+"/tcp in ") {
		t.Fatalf("err = %v, want one naming the name and %s/tcp", err, s.addr)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q on an error", out.String())
	}
	if err := resolve(&out, "x.", s.addr, "sctp"); err == nil || !strings.Contains(err.Error(), `-dns-net "sctp"`) {
		t.Errorf("-dns-net sctp: err = %v", err)
	}
}
