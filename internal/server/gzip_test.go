package server

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// textGatherer is a TextWriter over a registry: WriteText writes what expfmt writes, plus
// a marker line, so the test sees which path served a request.
type textGatherer struct {
	*prometheus.Registry
	fail bool
}

func (g textGatherer) WriteText(w io.Writer) error {
	if g.fail {
		return errors.New("gathering failed")
	}
	mfs, err := g.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "# written by WriteText\n")
	return err
}

func serveMetrics(t *testing.T, h http.Handler, accept, encoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// /metrics: a text request to a TextWriter is served its text; gzip (at the fastest level)
// when the client accepts it, as promhttp does; a protobuf request goes to promhttp; the
// bodies are what promhttp serves, byte for byte.
func TestMetricsTextAndGzip(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kipvs_test_total", Help: "A test counter."}, []string{"k"})
	reg.MustRegister(c)
	c.WithLabelValues(`a"b\c`).Add(3)
	prom := serveMetrics(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "", "")
	promText := prom.Body.String()
	h := MetricsHandler(textGatherer{Registry: reg}, nil)

	rec := serveMetrics(t, h, "", "")
	if rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != promText+"# written by WriteText\n" {
		t.Errorf("text, identity: encoding %q, body %q; want promhttp's %q and the marker", rec.Header().Get("Content-Encoding"), rec.Body.String(), promText)
	}
	if ct, want := rec.Header().Get("Content-Type"), prom.Header().Get("Content-Type"); ct != want {
		t.Errorf("Content-Type %q, promhttp's %q", ct, want)
	}

	rec = serveMetrics(t, h, "", "deflate, gzip;q=0.9")
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip accepted: Content-Encoding %q", rec.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != promText+"# written by WriteText\n" {
		t.Errorf("gzip body %q", body)
	}

	if rec := serveMetrics(t, h, "", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0: Content-Encoding %q", rec.Header().Get("Content-Encoding"))
	}

	proto := "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
	rec = serveMetrics(t, h, proto, "")
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") {
		t.Errorf("protobuf request: Content-Type %q", ct)
	}

	rec = serveMetrics(t, MetricsHandler(textGatherer{Registry: reg, fail: true}, nil), "", "gzip")
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("failed WriteText: status %d", rec.Code)
	}
}
