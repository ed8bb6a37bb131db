//go:build e2e

package tests

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
)

// hostPort is where the scenario's host service listens on the node (on every address).
const hostPort = 9099

// Issue 4, host services are not exposed on Service IPs: a TCP listener on 0.0.0.0:9099
// in the node's namespace answers on the node's own addresses, but a new connection to
// ClusterIP:9099 (not a Service port) is rejected (KUBE-IPVS-FILTER), from a pod and from
// the node, while the Service port on the same ClusterIP works.
//
// It runs once per filter backend (eachBackend).
func TestHostListenerNotOnVIP(t *testing.T) { eachBackend(t, testHostListenerNotOnVIP) }

func testHostListenerNotOnVIP(t *testing.T, s *scenario) {
	backends := s.pods("hf", 10, 2)
	client := s.topo.AddPod(t, "hfc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.15.10")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-hostfilter", ClusterIP: vip})
	s.api.SetEndpoints(t, svc, backends...)

	ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", hostPort))
	if err != nil {
		t.Fatalf("host listener: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "host\n")
			conn.Close()
		}
	}()

	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "hostfilter programmed", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, backends...),
		vs(harness.UDP, vip, 80): harness.Weights(1, backends...),
	}))

	pod := harness.In(&client.NS)
	for _, c := range []struct {
		who    string
		client harness.Client
	}{{"pod", pod}, {"node", s.topo.NodeClient()}} {
		// The host service itself is there: reachable on the node's bridge address.
		if err := dialHost(c.client, ap(harness.PodGateway.Addr(), hostPort)); err != nil {
			t.Fatalf("%s -> host service on %s:%d: %v", c.who, harness.PodGateway.Addr(), hostPort, err)
		}
		err := dialHost(c.client, ap(vip, hostPort))
		switch {
		case err == nil:
			t.Errorf("%s -> ClusterIP %s:%d reached the node's host service: a host listener is exposed on a Service IP", c.who, vip, hostPort)
		case errors.Is(err, syscall.ECONNREFUSED):
			t.Logf("%s -> ClusterIP %s:%d: %v (rejected, as it should be)", c.who, vip, hostPort, err)
		default:
			t.Errorf("%s -> ClusterIP %s:%d: %v, want connection refused (REJECT)", c.who, vip, hostPort, err)
		}
		expectSpread(t, c.who+" -> tcp ClusterIP Service port", c.client, harness.TCP, ap(vip, 80), 4, map[string]netip.Addr{"pod": client.IP, "node": harness.PodGateway.Addr()}[c.who], backends...)
	}
}

// dialHost connects to the host service at addr from c's namespace and reads its greeting.
func dialHost(c harness.Client, addr netip.AddrPort) error {
	return harness.InNS(c, func() error {
		conn, err := net.DialTimeout("tcp", addr.String(), c.Timeout+2e9)
		if err != nil {
			return err
		}
		defer conn.Close()
		b := make([]byte, 5)
		if _, err := io.ReadFull(conn, b); err != nil {
			return fmt.Errorf("read greeting: %w", err)
		}
		if string(b) != "host\n" {
			return fmt.Errorf("greeting %q", b)
		}
		return nil
	})
}
