package daemon

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// The daemon registers the Service traffic metrics on its registry, attributing the
// counters of the virtual servers it programmed to their Service port; endpoint series
// only with --kipvs-endpoint-metrics. Without them, the connection gauges are those the
// last full sync's read of the table found.
func TestDaemonServiceTrafficMetrics(t *testing.T) {
	for _, endpoints := range []bool{false, true} {
		t.Run("endpoints="+strconv.FormatBool(endpoints), func(t *testing.T) { testTrafficMetrics(t, endpoints) })
	}
}

func testTrafficMetrics(t *testing.T, endpoints bool) {
	log := zaptest.NewLogger(t)
	path := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	cfg := testConfig(t)
	cfg.Kipvs.SourceFile = path
	cfg.Kipvs.EndpointMetrics = endpoints
	d := newDaemon(t, cfg, log, node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry()))
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	k := ipvs.ServiceKey{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	if err := node.ipvs.SetServiceStats(k, ipvs.Stats{Conns: 42, InBytes: 4200}); err != nil {
		t.Fatal(err)
	}
	if err := node.ipvs.SetDestinationConns(k, netip.MustParseAddrPort("10.244.1.5:8080"), 3, 4, 0); err != nil {
		t.Fatal(err)
	}
	if !endpoints {
		// The connection gauges are the last full read's: the first sync's until the
		// next periodic pass reads the table again.
		got := series(t, d.Gatherer(), "kipvs_service_active_connections")
		if want := `kipvs_service_active_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 0`; !slices.Equal(got, []string{want}) {
			t.Errorf("before the periodic read: got %v, want %s", got, want)
		}
		finish, err := d.periodicRead(t.Context(), passPace{})
		if err != nil {
			t.Fatal(err)
		}
		if err := finish(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := series(t, d.Gatherer(), "kipvs_service_connections_total", "kipvs_service_active_connections", "kipvs_endpoint_inactive_connections")
	want := []string{
		`kipvs_service_active_connections{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 3`,
		`kipvs_service_connections_total{ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 42`,
	}
	if endpoints {
		want = append([]string{`kipvs_endpoint_inactive_connections{endpoint="10.244.1.5:8080",ip_family="IPv4",namespace="default",port="http",protocol="TCP",service="web",vip_kind="cluster_ip"} 4`}, want...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n    %s\nwant\n    %s", strings.Join(got, "\n    "), strings.Join(want, "\n    "))
	}
}

// series gathers reg and renders the series of the named families, sorted.
func series(t *testing.T, reg prometheus.Gatherer, names ...string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"} "+strconv.FormatFloat(metricValue(m), 'g', -1, 64))
		}
	}
	slices.Sort(out)
	return out
}
