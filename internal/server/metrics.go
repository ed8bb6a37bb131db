package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// TextWriter is a Gatherer that writes what it gathers in the text format itself, faster
// than encoding it (svcstats.TextGatherer).
type TextWriter interface {
	WriteText(w io.Writer) error
}

// metricsEndpoint serves /metrics: promhttp's handler (uncompressed: see fastGzip), or,
// when the client asks for the text format and gatherer is a TextWriter, its text.
func metricsEndpoint(gatherer prometheus.Gatherer) http.Handler {
	h := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{DisableCompression: true})
	tw, ok := gatherer.(TextWriter)
	if !ok {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.Negotiate(r.Header)
		if format.FormatType() != expfmt.TypeTextPlain {
			h.ServeHTTP(w, r)
			return
		}
		// Written as it is produced (a big node's text is tens of megabytes): an error
		// before the first byte is a 500, one after it ends the response early.
		w.Header().Set("Content-Type", string(format))
		cw := &countingWriter{w: w}
		if err := tw.WriteText(cw); err != nil && cw.n == 0 {
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		}
	})
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += n
	return n, err
}

// MetricsHandler serves, like kube-proxy's metrics server: /metrics from gatherer;
// /healthz and /healthz/ping (component-base's healthz with its one "ping" check); the
// SLI metrics of those checks on /metrics/slis (DELETE resets them); /proxyMode ("ipvs");
// and /configz ({"kubeproxy.config.k8s.io": config}). configz returns the effective
// configuration: a *v1alpha1.KubeProxyConfiguration is served in the shape kube-proxy
// serves (see configzValue), any other value as JSON.
func MetricsHandler(gatherer prometheus.Gatherer, configz func() any) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", fastGzip(metricsEndpoint(gatherer)))
	s := newSLIs()
	mux.Handle("/metrics/slis", s.handler())
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/healthz/ping", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte("ipvs"))
	})
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		var cfg any
		if configz != nil {
			cfg = configzValue(configz())
		}
		writeJSON(w, http.StatusOK, map[string]any{"kubeproxy.config.k8s.io": cfg})
	})
	return mux
}

// slis are component-base's health check SLI metrics, on a registry of their own (served
// on /metrics/slis, not /metrics), with the process start time as component-base adds it.
type slis struct {
	reg         *prometheus.Registry
	healthcheck *prometheus.GaugeVec   // kubernetes_healthcheck{name, type}
	total       *prometheus.CounterVec // kubernetes_healthchecks_total{name, type, status}
	start       *prometheus.GaugeVec   // process_start_time_seconds{}
}

func newSLIs() *slis {
	s := &slis{
		reg: prometheus.NewRegistry(),
		healthcheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubernetes", Name: "healthcheck",
			Help: "[STABLE] This metric records the result of a single healthcheck."}, []string{"name", "type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubernetes", Name: "healthchecks_total",
			Help: "[STABLE] This metric records the results of all healthcheck."}, []string{"name", "type", "status"}),
		start: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "process_start_time_seconds",
			Help: "[ALPHA] Start time of the process since unix epoch in seconds."}, nil),
	}
	s.reg.MustRegister(s.healthcheck, s.total, s.start)
	s.start.WithLabelValues().Set(processStart())
	return s
}

// processStart is the process's start time as the process collector reads it from /proc,
// or now where it cannot (as component-base falls back).
func processStart() float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "process_start_time_seconds" && len(f.Metric) == 1 {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	return float64(time.Now().Unix())
}

// handler serves the SLI metrics; DELETE resets them (component-base's HandlerWithReset).
func (s *slis) handler() http.Handler {
	h := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			s.healthcheck.Reset()
			s.total.Reset()
			s.start.Reset()
			_, _ = w.Write([]byte("metrics reset\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// healthz is component-base's /healthz with the one check kube-proxy installs there,
// "ping", which always passes: "ok", or with ?verbose each check and "healthz check
// passed"; ?exclude=<check> skips a check.
func (s *slis) healthz(w http.ResponseWriter, r *http.Request) {
	excluded := r.URL.Query()["exclude"]
	var out strings.Builder
	const check = "ping"
	if slices.Contains(excluded, check) {
		fmt.Fprintf(&out, "[+]%s excluded: ok\n", check)
	} else {
		s.healthcheck.WithLabelValues(check, "healthz").Set(1)
		s.total.WithLabelValues(check, "healthz", "success").Inc()
		fmt.Fprintf(&out, "[+]%s ok\n", check)
	}
	// A set: a URL may carry thousands of values (Go's url.ParseQuery takes up to 10,000),
	// and a list searched for each would make that quadratic.
	var unknown []string
	seen := make(map[string]struct{}, len(excluded))
	for _, e := range excluded {
		if _, dup := seen[e]; e != check && !dup {
			seen[e] = struct{}{}
			unknown = append(unknown, e)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, u := range unknown {
			quoted[i] = fmt.Sprintf("%q", u)
		}
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoted, ","))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := r.URL.Query()["verbose"]; !verbose {
		_, _ = w.Write([]byte("ok"))
		return
	}
	out.WriteString("healthz check passed\n")
	_, _ = w.Write([]byte(out.String()))
}
