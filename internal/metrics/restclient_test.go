package metrics

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// client-go's requests are counted in rest_client_* with component-base's names, labels and
// HELP texts (kubernetes-mixin's "Kubernetes / Proxy" dashboard charts
// rest_client_requests_total{code,host,method} and
// rest_client_request_duration_seconds{verb,host}). This is the only test that installs
// the adapters: client-go accepts them once per process.
func TestRESTClientMetrics(t *testing.T) {
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"34","gitVersion":"v1.34.10"}`))
	}))
	defer apiserver.Close()
	host := strings.TrimPrefix(apiserver.URL, "http://")

	reg := prometheus.NewPedanticRegistry()
	rc := NewRESTClient(reg)
	if err := rc.Install(); err != nil {
		t.Fatal(err)
	}
	if err := NewRESTClient(prometheus.NewRegistry()).Install(); err == nil {
		t.Error("a second Install succeeded; client-go keeps the first adapters, so it must fail")
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: apiserver.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		got[f.GetName()] = f.GetType().String() + " " + f.GetHelp()
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+strings.ReplaceAll(l.GetValue(), host, "HOST"))
			}
			sort.Strings(labels)
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				got[key] = ftoa(m.Counter.GetValue())
			case m.Gauge != nil:
				got[key] = ftoa(m.Gauge.GetValue())
			case m.Histogram != nil:
				got[key] = "count " + ftoa(float64(m.Histogram.GetSampleCount()))
			}
		}
	}
	want := map[string]string{
		"rest_client_requests_total":                                    "COUNTER [ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
		"rest_client_requests_total{code=200,host=HOST,method=GET}":     "1",
		"rest_client_request_duration_seconds":                          "HISTOGRAM [ALPHA] Request latency in seconds. Broken down by verb, and host.",
		"rest_client_request_duration_seconds{host=HOST,verb=GET}":      "count 1",
		"rest_client_rate_limiter_duration_seconds":                     "HISTOGRAM [ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host.",
		"rest_client_rate_limiter_duration_seconds{host=HOST,verb=GET}": "count 1",
		"rest_client_response_size_bytes":                               "HISTOGRAM [ALPHA] Response size in bytes. Broken down by verb and host.",
		"rest_client_response_size_bytes{host=HOST,verb=GET}":           "count 1",
		"rest_client_request_size_bytes":                                "HISTOGRAM [ALPHA] Request size in bytes. Broken down by verb and host.",
		"rest_client_request_size_bytes{host=HOST,verb=GET}":            "count 1",
		"rest_client_transport_create_calls_total":                      "COUNTER [ALPHA] Number of calls to get a new transport, partitioned by the result of the operation hit: obtained from the cache, miss: created and added to the cache, uncacheable: created and not cached",
		"rest_client_transport_create_calls_total{result=miss}":         "1",
		"rest_client_transport_cache_entries":                           "GAUGE [ALPHA] Number of transport entries in the internal cache.",
		"rest_client_transport_cache_entries{}":                         "0", // client-go observes the size before it adds the transport
		"rest_client_exec_plugin_ttl_seconds":                           "GAUGE [ALPHA] Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec plugin. The value is in seconds until certificate expiry (negative if already expired). If auth exec plugins are unused or manage no TLS certificates, the value will be +INF.",
		"rest_client_exec_plugin_ttl_seconds{}":                         "+Inf",
		"rest_client_exec_plugin_certificate_rotation_age":              "HISTOGRAM [ALPHA] Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated. If auth exec plugin client certificates are unused, histogram will contain no data.",
		"rest_client_exec_plugin_certificate_rotation_age{}":            "count 0",
	}
	for k := range got {
		if !strings.HasPrefix(k, "rest_client_") {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rest_client_* (-want +got):\n%s", diff)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
