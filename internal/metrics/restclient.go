package metrics

import (
	"context"
	"errors"
	"math"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// RESTClient holds client-go's rest_client_* metrics with the names, labels, buckets and
// HELP texts component-base gives them in kube-proxy (kubernetes-mixin's "Kubernetes /
// Proxy" dashboard charts rest_client_requests_total and
// rest_client_request_duration_seconds). client-go reports into them only once Install has
// handed it the adapters.
type RESTClient struct {
	RequestLatency         *prometheus.HistogramVec // {verb, host}
	RateLimiterLatency     *prometheus.HistogramVec // {verb, host}
	RequestSize            *prometheus.HistogramVec // {verb, host}
	ResponseSize           *prometheus.HistogramVec // {verb, host}
	RequestResult          *prometheus.CounterVec   // {code, method, host}
	RequestRetry           *prometheus.CounterVec   // {code, verb, host}
	ExecPluginCertRotation prometheus.Histogram
	ExecPluginCalls        *prometheus.CounterVec // {code, call_status}
	TransportCacheEntries  prometheus.Gauge
	TransportCreateCalls   *prometheus.CounterVec // {result}

	certExpiry *expiry // behind rest_client_exec_plugin_ttl_seconds
}

type expiry struct {
	mu sync.Mutex
	at *time.Time
}

// NewRESTClient creates the rest_client_* metrics and registers them on reg. Like
// kube-proxy's, it has no rest_client_dns_resolution_duration_seconds: component-base
// defines it but never registers it.
func NewRESTClient(reg prometheus.Registerer) *RESTClient {
	latencyBuckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}
	sizeBuckets := []float64{64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216}
	verbHost := []string{"verb", "host"}
	r := &RESTClient{
		RequestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Buckets: latencyBuckets,
			Help: alpha("Request latency in seconds. Broken down by verb, and host.")}, verbHost),
		RequestSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_size_bytes", Buckets: sizeBuckets,
			Help: alpha("Request size in bytes. Broken down by verb and host.")}, verbHost),
		ResponseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_response_size_bytes", Buckets: sizeBuckets,
			Help: alpha("Response size in bytes. Broken down by verb and host.")}, verbHost),
		RateLimiterLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Buckets: latencyBuckets,
			Help: alpha("Client side rate limiter latency in seconds. Broken down by verb, and host.")}, verbHost),
		RequestResult: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: alpha("Number of HTTP requests, partitioned by status code, method, and host.")},
			[]string{"code", "method", "host"}),
		RequestRetry: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total",
			Help: alpha("Number of request retries, partitioned by status code, verb, and host.")},
			[]string{"code", "verb", "host"}),
		ExecPluginCertRotation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rest_client_exec_plugin_certificate_rotation_age",
			Help: alpha("Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated. " +
				"If auth exec plugin client certificates are unused, histogram will contain no data."),
			// 10 minutes, 30 minutes, 1 hour, 4 hours, 1 day, 1 week, 1, 3 and 6 months, 1 and 4 years.
			Buckets: []float64{600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000}}),
		ExecPluginCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_exec_plugin_call_total",
			Help: alpha("Number of calls to an exec plugin, partitioned by the type of event encountered (no_error, plugin_execution_error, " +
				"plugin_not_found_error, client_internal_error) and an optional exit code. The exit code will be set to 0 if and only if the plugin call was successful."),
		}, []string{"code", "call_status"}),
		TransportCacheEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rest_client_transport_cache_entries",
			Help: alpha("Number of transport entries in the internal cache.")}),
		TransportCreateCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_transport_create_calls_total",
			Help: alpha("Number of calls to get a new transport, partitioned by the result of the operation hit: obtained from the cache, " +
				"miss: created and added to the cache, uncacheable: created and not cached")}, []string{"result"}),
		certExpiry: &expiry{},
	}
	ttl := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rest_client_exec_plugin_ttl_seconds",
		Help: alpha("Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec plugin. " +
			"The value is in seconds until certificate expiry (negative if already expired). " +
			"If auth exec plugins are unused or manage no TLS certificates, the value will be +INF."),
	}, r.certExpiry.ttl)
	reg.MustRegister(r.RequestLatency, r.RequestSize, r.ResponseSize, r.RateLimiterLatency, r.RequestResult,
		r.RequestRetry, ttl, r.ExecPluginCertRotation, r.ExecPluginCalls, r.TransportCacheEntries, r.TransportCreateCalls)
	return r
}

// Install hands r's adapters to client-go (k8s.io/client-go/tools/metrics.Register), which
// keeps the first set it is given for the whole process and silently ignores any later one.
// Install is therefore called once, by the kipvs run command; it fails when another set
// was installed first (r would then stay empty). Tests that install adapters must do it in
// one test per test binary.
func (r *RESTClient) Install() error {
	opts := clientmetrics.RegisterOpts{
		ClientCertExpiry:      r.certExpiry,
		ClientCertRotationAge: durationAdapter{r.ExecPluginCertRotation},
		RequestLatency:        latencyAdapter{r.RequestLatency},
		RequestSize:           sizeAdapter{r.RequestSize},
		ResponseSize:          sizeAdapter{r.ResponseSize},
		RateLimiterLatency:    latencyAdapter{r.RateLimiterLatency},
		RequestResult:         resultAdapter{r.RequestResult},
		RequestRetry:          resultAdapter{r.RequestRetry},
		ExecPluginCalls:       callsAdapter{r.ExecPluginCalls},
		TransportCacheEntries: gaugeAdapter{r.TransportCacheEntries},
		TransportCreateCalls:  labelAdapter{r.TransportCreateCalls},
	}
	clientmetrics.Register(opts)
	if clientmetrics.RequestResult != opts.RequestResult {
		return errors.New("client-go's metrics were registered before kipvs's: rest_client_* stay empty")
	}
	return nil
}

func (e *expiry) Set(at *time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at = at
}

func (e *expiry) ttl() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at == nil {
		return math.Inf(1)
	}
	return time.Until(*e.at).Seconds()
}

type durationAdapter struct{ h prometheus.Histogram }

func (a durationAdapter) Observe(d time.Duration) { a.h.Observe(d.Seconds()) }

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type sizeAdapter struct{ h *prometheus.HistogramVec }

func (a sizeAdapter) Observe(_ context.Context, verb, host string, size float64) {
	a.h.WithLabelValues(verb, host).Observe(size)
}

// resultAdapter serves RequestResult ({code, method, host}) and RequestRetry ({code, verb,
// host}): client-go passes the same three values to both.
type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

func (a resultAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

type callsAdapter struct{ c *prometheus.CounterVec }

func (a callsAdapter) Increment(code int, status string) {
	a.c.WithLabelValues(strconv.Itoa(code), status).Inc()
}

type gaugeAdapter struct{ g prometheus.Gauge }

func (a gaugeAdapter) Observe(v int) { a.g.Set(float64(v)) }

type labelAdapter struct{ c *prometheus.CounterVec }

func (a labelAdapter) Increment(label string) { a.c.WithLabelValues(label).Inc() }
