package reconcile

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/inet"
)

// A stale-flow cleanup is measured as kube-proxy's conntrack reconciler is: its duration
// and the flows it deleted, per IP family.
func TestConntrackCleanupMetrics(t *testing.T) {
	e := newEnv(t)
	dnsVIP := netip.MustParseAddr("10.96.0.53")
	e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.7", "10.244.1.8"))
	e.full()
	client := netip.MustParseAddrPort("10.244.9.9:40000")
	if err := e.ct.Insert(conntrack.Flow{Protocol: inet.UDP,
		Orig:  conntrack.Tuple{Src: client, Dst: netip.AddrPortFrom(dnsVIP, 53)},
		Reply: conntrack.Tuple{Src: netip.MustParseAddrPort("10.244.1.7:5353"), Dst: client}}); err != nil {
		t.Fatal(err)
	}
	e.sync(e.set(svc("dns", "10.96.0.53", udp), eps("dns", v1.ProtocolUDP, 5353, "10.244.1.8")))

	got := map[string]string{}
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "kubeproxy_conntrack_") {
			continue
		}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = f.GetHelp() + " = " + strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	want := map[string]string{
		"kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family=IPv4}": "[ALPHA] Cumulative conntrack flows deleted by conntrack reconciler = 1",
		// A histogram: two cleanups observed, the new UDP Service's (nothing to delete)
		// and the removed endpoint's.
		"kubeproxy_conntrack_reconciler_sync_duration_seconds{ip_family=IPv4}": "[ALPHA] ReconcileConntrackFlowsLatency latency in seconds = 2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conntrack reconciler metrics (-want +got):\n%s", diff)
	}
}
