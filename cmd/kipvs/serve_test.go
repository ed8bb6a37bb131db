package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
)

// TestMetricsHandlerPaths: the metrics server answers /metrics and /configz, says the debug
// endpoints are off, and serves /debug/pprof/ only with enableProfiling.
func TestMetricsHandlerPaths(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		cfg := config.Defaults()
		cfg.EnableProfiling = profiling
		h := metricsHandler(&cfg, nil, prometheus.NewRegistry())
		want := map[string]int{"/metrics": 200, "/configz": 200, debugapi.StatePath: 404, "/debug/pprof/": 404}
		if profiling {
			want["/debug/pprof/"] = 200
		}
		for path, code := range want {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != code {
				t.Errorf("profiling %v: GET %s: %d, want %d", profiling, path, rec.Code, code)
			}
		}
	}
}
