package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// /healthz?exclude= with many distinct values (a URL of up to 1 MB, the server's header
// limit): the check names are deduplicated through a set, linear in the values.
func BenchmarkHealthzExclude(b *testing.B) {
	for _, n := range []int{2_500, 5_000, 9_999} {
		q := url.Values{}
		for i := range n {
			q.Add("exclude", strconv.Itoa(i))
		}
		target := "/healthz?verbose&" + q.Encode()
		h := MetricsHandler(prometheus.NewRegistry(), nil)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
				if w.Code != http.StatusOK || w.Body.Len() < n {
					b.Fatal(w.Code, w.Body.String()[:min(200, w.Body.Len())])
				}
			}
		})
	}
}
