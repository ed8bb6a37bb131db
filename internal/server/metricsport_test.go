package server

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

type response struct {
	Code        int
	ContentType string
	Body        string
}

func do(h http.Handler, method, path string) response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return response{rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()}
}

// The metrics port's /healthz is component-base's healthz with its one "ping" check, as
// kube-proxy installs it: /healthz/ping, ?verbose and ?exclude, and each check recorded in
// the SLI metrics that /metrics/slis serves (DELETE resets them). /healthz/ping and an
// excluded check are not recorded.
func TestMetricsPortHealthzAndSLIs(t *testing.T) {
	h := MetricsHandler(prometheus.NewRegistry(), nil)
	text := "text/plain; charset=utf-8"
	for _, c := range []struct {
		method, path string
		want         response
	}{
		{"GET", "/healthz", response{200, text, "ok"}},
		{"GET", "/healthz/ping", response{200, text, "ok"}},
		{"GET", "/healthz?verbose", response{200, text, "[+]ping ok\nhealthz check passed\n"}},
		{"GET", "/healthz?verbose&exclude=ping", response{200, text, "[+]ping excluded: ok\nhealthz check passed\n"}},
		{"GET", "/healthz?verbose&exclude=nope", response{200, text,
			"[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"}},
		{"GET", "/healthz/", response{404, text, "404 page not found\n"}},
	} {
		if got := do(h, c.method, c.path); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.method, c.path, got, c.want)
		}
	}

	start := regexp.MustCompile(`(?m)^process_start_time_seconds \d+(\.\d+)?(e\+\d+)?$`)
	got := do(h, "GET", "/metrics/slis")
	if !start.MatchString(got.Body) {
		t.Errorf("/metrics/slis has no process_start_time_seconds:\n%s", got.Body)
	}
	got.Body = start.ReplaceAllString(got.Body, "process_start_time_seconds START")
	want := response{200, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", `# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.
# TYPE kubernetes_healthcheck gauge
kubernetes_healthcheck{name="ping",type="healthz"} 1
# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.
# TYPE kubernetes_healthchecks_total counter
kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 3
# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds START
`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /metrics/slis (-want +got):\n%s", diff)
	}
	if got := do(h, "DELETE", "/metrics/slis"); got.Code != 200 || got.Body != "metrics reset\n" {
		t.Errorf("DELETE /metrics/slis = %+v", got)
	}
	if got := do(h, "GET", "/metrics/slis"); got.Body != "" {
		t.Errorf("/metrics/slis after reset:\n%s", got.Body)
	}
}
