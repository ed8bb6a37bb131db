package server

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// fastGzip serves h's responses gzip-compressed at gzip.BestSpeed to clients that accept
// gzip (Prometheus does), and as they are to the others. promhttp compresses at the default
// level, which at 10,000 Services (10 MB of text, mostly repeated label names) costs more
// than gathering the metrics; the fastest level compresses this text nearly as well. h must
// not compress itself (promhttp.HandlerOpts.DisableCompression).
func fastGzip(h http.Handler) http.Handler {
	pool := sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
		return w
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gz := pool.Get().(*gzip.Writer)
		defer pool.Put(gz)
		gz.Reset(w)
		w.Header().Set("Content-Encoding", "gzip")
		h.ServeHTTP(&gzipResponse{ResponseWriter: w, gz: gz}, r)
		_ = gz.Close() // the client went away: nothing to tell it
	})
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip with a non-zero weight.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

type gzipResponse struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func (g *gzipResponse) Write(b []byte) (int, error) { return g.gz.Write(b) }

// WriteHeader drops a Content-Length set for the uncompressed body.
func (g *gzipResponse) WriteHeader(code int) {
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}
