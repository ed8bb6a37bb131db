package svcstats

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/server"
)

// benchBed is n Services, each one ClusterIP port with e real servers, in the fake.
func benchBed(b testing.TB, n, e int) *bed {
	bd := newBed(b)
	var ops []ipvs.Op
	for i := range n {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: vip, Port: 80}
		ops = append(ops, ipvs.AddServiceOp(ipvs.Service{ServiceKey: k, Scheduler: "rr"}))
		for j := range e {
			ep := netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})
			ops = append(ops, ipvs.AddDestinationOp(k, ipvs.Destination{Addr: ep, Port: uint16(8080 + j), Weight: 1}))
		}
		bd.vss = append(bd.vss, debugapi.VirtualServer{Protocol: "TCP", Address: vip.String(), Port: 80, Kind: "ClusterIP",
			Namespace: "ns", Name: fmt.Sprintf("svc-%d", i), PortName: "http", Destinations: e})
	}
	if err := bd.fake.Apply(ops); err != nil {
		b.Fatal(err)
	}
	return bd
}

// One scrape (registry Gather, as /metrics does) at 10,000 Services x 10 real servers.
func BenchmarkScrape10kServices(b *testing.B) {
	for _, endpoints := range []bool{false, true} {
		b.Run(fmt.Sprintf("endpoints=%v", endpoints), func(b *testing.B) {
			bd := benchBed(b, 10000, 10)
			c := bd.collector(Options{Endpoints: endpoints, MaxEndpoints: 200000, Connections: observed(b, bd.fake)})
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			g := Gatherer(reg, c)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				mfs, err := g.Gather()
				if err != nil {
					b.Fatal(err)
				}
				if len(mfs) < 5 {
					b.Fatalf("%d families", len(mfs))
				}
			}
		})
	}
}

// One scrape of /metrics as Prometheus makes it (text, gzip) at 10,000 Services x 10 real
// servers: gathering, encoding and compressing.
func BenchmarkScrapeHTTP10kServices(b *testing.B) {
	bd := benchBed(b, 10000, 10)
	c := bd.collector(Options{MaxEndpoints: 200000, Connections: observed(b, bd.fake)})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	h := server.MetricsHandler(Gatherer(reg, c), nil)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "gzip" {
			b.Fatalf("status %d, encoding %q", rec.Code, rec.Header().Get("Content-Encoding"))
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "gzip-bytes/op")
}

// One scrape of /metrics for one Service of 32,767 ports with 63-character names (the
// most series one in-limit Service makes), in the text format Prometheus asks for (gzip)
// and in protobuf (promhttp's encoder over Gather). The first iteration builds the scrape
// plan, which later scrapes reuse.
func BenchmarkScrapeHugeService(b *testing.B) {
	for _, accept := range []string{"text/plain", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
		b.Run(strings.SplitN(accept, ";", 2)[0], func(b *testing.B) {
			bd := hugeServiceBed(b)
			c := bd.collector(Options{Connections: observed(b, bd.fake)})
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			h := server.MetricsHandler(Gatherer(reg, c), nil)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				req.Header.Set("Accept", accept)
				w := &discard{h: http.Header{}}
				h.ServeHTTP(w, req)
				size = w.n
			}
			b.ReportMetric(float64(size), "gzip-bytes/op")
		})
	}
}
