package svcstats

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/server"
)

// hugeServiceBed is one Service within the apiserver's limits with as many series as it can
// have: 32,767 ports (one cluster IP), a 63-character namespace and name, 15-character
// port names.
func hugeServiceBed(t testing.TB) *bed {
	bd := newBed(t)
	ns, name := strings.Repeat("n", 63), strings.Repeat("s", 63)
	vip := netip.MustParseAddr("10.96.0.10")
	var ops []ipvs.Op
	for p := 1; p <= 32767; p++ {
		k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: vip, Port: uint16(p)}
		ops = append(ops, ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"}))
		bd.vss = append(bd.vss, debugapi.VirtualServer{Protocol: "TCP", Address: vip.String(), Port: uint16(p), Kind: "ClusterIP",
			Namespace: ns, Name: name, PortName: fmt.Sprintf("port-%010d", p)})
	}
	if err := bd.fake.Apply(ops); err != nil {
		t.Fatal(err)
	}
	return bd
}

// discard is a ResponseWriter that keeps nothing of the body.
type discard struct {
	h http.Header
	n int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// One in-limit Service (32,767 ports, 63-character names) made 229,370 kipvs_service_*
// series, 59.6 MB of text and 477 MB allocated per scrape. The Service series are capped
// per scrape (the rest dropped and counted), and /metrics is written as it is produced, not
// built in one buffer: a scrape of it allocates a bounded amount.
func TestHugeServiceScrapeBounded(t *testing.T) {
	bd := hugeServiceBed(t)
	c := bd.collector(Options{Connections: observed(t, bd.fake)})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	h := server.MetricsHandler(Gatherer(reg, c), nil)
	scrape := func() (alloc uint64, size int) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		w := &discard{h: http.Header{}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h.ServeHTTP(w, req)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, w.n
	}
	scrape() // builds the scrape plan, kept while the virtual servers stay the same
	alloc, size := scrape()
	t.Logf("one scrape of the 32,767-port Service: %.1f MB allocated, %d bytes gzipped", float64(alloc)/1e6, size)
	const limit = 40 << 20 // 89.6 MB before the limit and the streaming, 22.6 MB after
	if alloc > limit {
		t.Errorf("a scrape allocated %.1f MB, want at most %d MB", float64(alloc)/1e6, limit>>20)
	}

	// What the scrape holds: at most the cap's series, the rest counted.
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		body = string(b)
	}
	series := strings.Count(body, "\nkipvs_service_connections_total{")
	if series != DefaultMaxServices {
		t.Errorf("%d kipvs_service_connections_total series, want the cap %d", series, DefaultMaxServices)
	}
	// Three scrapes so far, each dropping the same sets.
	want := fmt.Sprintf("\nkipvs_service_stats_dropped_total %d\n", 3*(32767-DefaultMaxServices))
	if !strings.Contains(body, want) {
		t.Errorf("no %q in /metrics", strings.TrimSpace(want))
	}
}

// At most MaxServices Service label sets are exported per scrape, the first in label order,
// by the text path and by Gather alike; the rest are counted.
func TestMaxServices(t *testing.T) {
	b := newBed(t)
	for i, name := range []string{"c", "a", "b"} {
		k := b.vs("default", name, "http", "ClusterIP", "TCP", fmt.Sprintf("10.96.0.%d:80", 10+i), "10.244.1.5:8080")
		b.stats(k, 3)
	}
	c := b.collector(Options{MaxServices: 2})
	got := scrape(t, c)
	if !strings.Contains(got, `service="a"`) || !strings.Contains(got, `service="b"`) || strings.Contains(got, `service="c"`) {
		t.Errorf("Gather with MaxServices 2, want a and b only:\n%s", got)
	}
	if !strings.Contains(got, "kipvs_service_stats_dropped_total{} 1\n") {
		t.Errorf("Gather: no count of the one set dropped:\n%s", got)
	}
	var text bytes.Buffer
	if err := Gatherer(prometheus.NewRegistry(), c).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text.String(), "kipvs_service_connections_total{"); n != 2 || strings.Contains(text.String(), `service="c"`) {
		t.Errorf("WriteText with MaxServices 2: %d sets, want a and b:\n%s", n, text.String())
	}
}
