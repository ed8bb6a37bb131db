package server

import (
	"encoding/json"
	"net/http"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// VirtualServersHandler serves list() as a debugapi.VirtualServerList (GET only).
func VirtualServersHandler(list func() []debugapi.VirtualServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		items := list()
		if items == nil {
			items = []debugapi.VirtualServer{}
		}
		b, err := json.Marshal(debugapi.VirtualServerList{Items: items})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	})
}
