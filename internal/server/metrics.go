package server

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves /metrics from gatherer, /healthz ("ok"), /proxyMode ("ipvs") and
// /configz ({"kubeproxy.config.k8s.io": config}), like kube-proxy's metrics server.
// configz returns the effective configuration as a JSON-marshalable value.
func MetricsHandler(gatherer prometheus.Gatherer, configz func() any) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
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
			cfg = configz()
		}
		b, err := json.Marshal(map[string]any{"kubeproxy.config.k8s.io": cfg})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	})
	return mux
}
