package server

import (
	"net/http"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// HandleDebug adds kipvs's debug endpoints to mux: the virtual servers (vs) and the state
// document (state) when enabled (--kipvs-debug-endpoints); otherwise a 404 under debugapi.DebugPrefix
// that says they are off and how to turn them on, and shows nothing else.
func HandleDebug(mux *http.ServeMux, enabled bool, vs func() []debugapi.VirtualServer, state func() debugapi.State) {
	if enabled {
		mux.Handle(debugapi.VirtualServersPath, VirtualServersHandler(vs))
		mux.Handle(debugapi.StatePath, StateHandler(state))
		return
	}
	mux.HandleFunc(debugapi.DebugPrefix, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(debugapi.DebugHeader, debugapi.DebugDisabled)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("kipvs's debug endpoints are off: " + debugapi.DebugDisabledHint + "\n"))
	})
}
