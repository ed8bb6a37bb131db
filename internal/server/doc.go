// Package server holds kipvs's HTTP endpoints, with kube-proxy's paths and semantics: the
// health server (/healthz, /livez, default 0.0.0.0:10256) and the metrics server (/metrics,
// /healthz, /proxyMode, /configz, default 127.0.0.1:10249), which also serves the debug
// documents of internal/debugapi under /debug/kipvs/ when --kipvs-debug-endpoints is on.
package server
