package reconcile

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/inet"
)

// A UDP ClusterIP that gains its first endpoint: flows created while it had none (answered
// by the node itself, or not at all) are deleted so the next datagram is scheduled to the
// endpoint; flows of other services stay. Endpoint changes after that delete nothing by
// destination address alone.
func TestFirstUDPEndpointClearsStaleFlows(t *testing.T) {
	e := newEnv(t)
	e.set(svc("dns", "10.96.0.53", udp))
	e.full()
	flow := func(dst, replySrc string) conntrack.Flow {
		return conntrack.Flow{Protocol: inet.UDP,
			Orig:  conntrack.Tuple{Src: netip.MustParseAddrPort("10.244.1.9:40000"), Dst: netip.MustParseAddrPort(dst)},
			Reply: conntrack.Tuple{Src: netip.MustParseAddrPort(replySrc), Dst: netip.MustParseAddrPort("10.244.1.9:40000")}}
	}
	// While dns had no endpoint: a flow to its VIP answered by nobody but the VIP itself.
	e.must(e.ct.Insert(flow("10.96.0.53:53", "10.96.0.53:53")))
	// Another service's live flow.
	e.must(e.ct.Insert(flow("10.96.0.54:53", "10.244.2.2:53")))

	e.sync(e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 53, "10.244.1.7")))
	got, err := e.ct.Dump()
	e.must(err)
	want := "udp orig 10.244.1.9:40000 -> 10.96.0.54:53 reply 10.244.2.2:53 -> 10.244.1.9:40000\n"
	if got != want {
		t.Errorf("flows after the first endpoint:\n%s\nwant\n%s", got, want)
	}

	// A second endpoint: the service already had one, so no flow to the VIP is cleared.
	e.must(e.ct.Insert(flow("10.96.0.53:53", "10.244.1.7:53")))
	e.sync(e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 53, "10.244.1.7", "10.244.1.8")))
	got, err = e.ct.Dump()
	e.must(err)
	if !strings.Contains(got, "reply 10.244.1.7:53") {
		t.Errorf("a live flow to an endpoint that stayed was deleted when a second endpoint came:\n%s", got)
	}
}
