package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/server"
)

// TestMetricsHandlerPaths: the metrics server answers /metrics and /configz, says the debug
// endpoints are off, and serves /debug/pprof/ only with enableProfiling.
func TestMetricsHandlerPaths(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		cfg := config.Defaults()
		cfg.EnableProfiling = profiling
		h := metricsHandler(&cfg, nil, prometheus.NewRegistry(), func(v string) (string, error) { return "set " + v, nil })
		want := map[string]int{"/metrics": 200, "/configz": 200, debugapi.StatePath: 404, "/debug/pprof/": 404, server.FlagsVPath: 404}
		if profiling {
			want["/debug/pprof/"] = 200
			want[server.FlagsVPath] = 406 // PUT only, as kube-proxy
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

// With enableProfiling, PUT /debug/flags/v sets the log verbosity and answers as kube-proxy.
func TestMetricsHandlerFlagsV(t *testing.T) {
	cfg := config.Defaults()
	cfg.EnableProfiling = true
	var got string
	h := metricsHandler(&cfg, nil, prometheus.NewRegistry(), func(v string) (string, error) {
		if v != "4" {
			return "", fmt.Errorf("bad %q", v)
		}
		got = v
		return "successfully set klog.logging.verbosity to " + v, nil
	})
	for _, tc := range []struct {
		body string
		code int
		resp string
	}{
		{"4", 200, "successfully set klog.logging.verbosity to 4\n"},
		{"x", 400, "bad \"x\"\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, server.FlagsVPath, strings.NewReader(tc.body)))
		if rec.Code != tc.code || rec.Body.String() != tc.resp || rec.Header().Get("Content-Type") != "text/plain" {
			t.Errorf("PUT %q: %d %q (%s), want %d %q", tc.body, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"), tc.code, tc.resp)
		}
	}
	if got != "4" {
		t.Errorf("the verbosity set is %q, want 4", got)
	}
}
