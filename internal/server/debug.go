package server

import (
	"net/http"
)

// DebugPrefix is where kipvs's debug endpoints (StatePath, VirtualServersPath) live.
const DebugPrefix = "/debug/kipvs/"

// DebugHeader is set on what the metrics server answers under DebugPrefix while the debug
// endpoints are off, with the value DebugDisabled, so clients (kipvs doctor, kipvs status
// --services) can tell "kipvs, endpoints off" from "not kipvs" (kube-proxy answers a plain
// 404).
const (
	DebugHeader   = "X-Kipvs-Debug-Endpoints"
	DebugDisabled = "disabled"
)

// DebugDisabledHint is the fix clients print when the debug endpoints are off.
const DebugDisabledHint = "start kipvs run with --kipvs-debug-endpoints (they list every Service, pod IP and rule of the node: keep --metrics-bind-address on 127.0.0.1 then)"

// HandleDebug adds kipvs's debug endpoints to mux: the virtual servers (vs) and the state
// document (state) when enabled (--kipvs-debug-endpoints); otherwise a 404 under DebugPrefix
// that says they are off and how to turn them on, and shows nothing else.
func HandleDebug(mux *http.ServeMux, enabled bool, vs func() []VirtualServer, state func() State) {
	if enabled {
		mux.Handle(VirtualServersPath, VirtualServersHandler(vs))
		mux.Handle(StatePath, StateHandler(state))
		return
	}
	mux.HandleFunc(DebugPrefix, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(DebugHeader, DebugDisabled)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("kipvs's debug endpoints are off: " + DebugDisabledHint + "\n"))
	})
}
