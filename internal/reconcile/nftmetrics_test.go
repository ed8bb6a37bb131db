package reconcile

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/nft/nfttest"
)

// With the nftables backend a failure to apply the rules counts in kube-proxy's nftables
// metric, not in the iptables-restore one, and no iptables rule count is exported.
func TestNFTablesRulesMetrics(t *testing.T) {
	fake := nfttest.New(inet.IPv4)
	e := newEnv(t, func(o *Options) { o.NFTables = true })
	e.rec = New(Kernel{IPVS: e.ipvs, Filter: nftables.New(fake), Dummy: e.dummy, Conntrack: e.ct}, e.rec.opts)
	in := faulty.New(1, 1)
	in.SetFilter(func(op string) bool { return strings.HasPrefix(op, "nft run") && !strings.Contains(op, "add set") })
	fake.SetFaulty(in)
	e.set(svc("web", "10.96.0.10"), eps("web", "TCP", 8080, "10.244.1.5"))
	if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err == nil {
		t.Fatal("the rules' transaction was refused, yet the sync reports no error")
	}
	m := e.rec.opts.Metrics
	if got := value(t, m.NFTablesSyncFailuresTotal.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("nftables sync failures = %v, want 1", got)
	}
	if got := value(t, m.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4")); got != 0 {
		t.Errorf("iptables-restore failures = %v, want 0", got)
	}
	fake.SetFaulty(nil)
	if _, err := e.rec.FullSync(e.ctx, e.desired, e.opts); err != nil {
		t.Fatal(err)
	}
	ch := make(chan prometheus.Metric, 16)
	m.IPTablesRulesTotal.Collect(ch)
	close(ch)
	if n := len(ch); n != 0 {
		t.Errorf("%d iptables rule count series with the nftables backend", n)
	}
}

// value is a counter's value.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}
